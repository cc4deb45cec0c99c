/** @file
 * A named list of tensors: the parameters of a module (for optimizers and
 * checkpoints) or the state of an optimizer. Names are stable dotted paths
 * such as "blocks.0.attention.W_q.weight", as in PyTorch's state_dict. */
#ifndef TG_PARAMS_H
#define TG_PARAMS_H

#include "tensor.h"

#define TG_PARAM_NAME_MAX 128

typedef struct {
    char name[TG_PARAM_NAME_MAX];
    tg_tensor *t; /**< not owned: the module owns its tensors */
} tg_param;

typedef struct {
    tg_param *items;
    int n, cap;
} tg_params;

void tg_params_init(tg_params *p);
/** The one name joiner: writes prefix + "." + name (name alone when prefix is
 * NULL or "") into out. Returns 0, or -1 with the error recorded when the
 * result would not fit TG_PARAM_NAME_MAX (out then holds an empty string). */
int tg_param_name(char out[TG_PARAM_NAME_MAX], const char *prefix, const char *name);
/** Appends prefix + "." + name (or just name when prefix is NULL or ""). */
int tg_params_add(tg_params *p, const char *prefix, const char *name, tg_tensor *t);
/** Appends every entry of src with prefix + "." in front of its name. */
int tg_params_extend(tg_params *p, const char *prefix, const tg_params *src);
tg_tensor *tg_params_get(const tg_params *p, const char *name); /**< NULL if absent */
int64_t tg_params_numel(const tg_params *p);
/** The first value of p, in list order, that is NaN or infinite: true with
 * *item (its tensor's position in the list) and *index (its flat index in
 * that tensor) set; false when every value is finite (NULL tensors have
 * none). For a caller that words its own message, e.g. the checkpoint savers. */
bool tg_params_first_nonfinite(const tg_params *p, int *item, int64_t *index);
/** 0 when every value of every tensor of p is finite, else -1 with
 * "<op>: tensor '<name>' holds nan at index 17" recorded (the first such
 * value; "inf", "-inf" for infinities). op names the caller (NULL:
 * "params_check_finite"). A training loop calls it on the parameters after
 * a step, to stop on a diverged run before it saves anything. */
int tg_params_check_finite(const tg_params *p, const char *op);
void tg_params_free(tg_params *p); /**< frees the list, not the tensors */

/** A named list of random generators: the streams a training step draws
 * from (the data sampler, every dropout layer), which a checkpoint must
 * hold for a resumed run to draw what an uninterrupted one would. The
 * generators are not owned; item[i].name points into the list itself, so
 * pass the list by pointer (a copy would point into the original). */
typedef struct {
    const char *name;
    tg_rng *rng;
} tg_named_rng;
#define TG_RNGS_MAX 64
typedef struct {
    int n;
    tg_named_rng item[TG_RNGS_MAX];
    char name[TG_RNGS_MAX][32];
} tg_rngs;
/** Appends (name, rng); a NULL rng (a layer without dropout) is skipped.
 * 0, or -1 with the error recorded (list full, name of 32 or more bytes). */
int tg_rngs_add(tg_rngs *l, const char *name, tg_rng *rng);

#endif
