/** @file
 * A named list of tensors: the parameters of a module (for optimizers and
 * checkpoints) or the state of an optimizer. Names are stable dotted paths
 * such as "blocks.0.attention.W_q.weight", as in PyTorch's state_dict.
 *
 * The list holds pointers: it never owns, copies or frees the tensors (the
 * module does). Names are unique within a list. A list is for one thread at
 * a time. */
#ifndef TG_PARAMS_H
#define TG_PARAMS_H

#include "tensor.h"

#define TG_PARAM_NAME_MAX 128 /**< bytes of a name, its terminating NUL included (names up to 127 characters) */

/** One entry of a tg_params list. */
typedef struct {
    char name[TG_PARAM_NAME_MAX]; /**< the full dotted name, NUL-terminated */
    tg_tensor *t;                 /**< not owned: the module owns its tensors */
} tg_param;

/** A growable list of named tensors, in the order they were added (a
 * module's state_dict order). Start it with tg_params_init (or zero it),
 * end it with tg_params_free. The fields are read-only for users. */
typedef struct {
    tg_param *items; /**< the entries, items[0..n-1] (NULL while cap is 0) */
    int n, cap;      /**< cap: entries allocated, n <= cap */
} tg_params;
/** @var tg_params::n
 * Number of entries. */

/** Makes p an empty list (no allocation); a NULL p is ignored. */
void tg_params_init(tg_params *p);
/** The one name joiner: writes prefix + "." + name (name alone when prefix is
 * NULL or "") into out. Returns 0, or -1 with the error recorded when the
 * result would not fit TG_PARAM_NAME_MAX (out then holds an empty string)
 * or out or name is NULL. */
int tg_param_name(char out[TG_PARAM_NAME_MAX], const char *prefix, const char *name);
/** Appends t as prefix + "." + name (or just name when prefix is NULL or "").
 * Returns 0, or -1 with "params_add: ..." recorded and p unchanged: NULL p,
 * name or t, an empty name, a full name longer than TG_PARAM_NAME_MAX - 1,
 * a name already in p, or out of memory. */
int tg_params_add(tg_params *p, const char *prefix, const char *name, tg_tensor *t);
/** Appends every entry of src, in order, with prefix + "." in front of its
 * name (prefix NULL or "": the names as they are). All or nothing: every
 * name is checked (length, not already in p) before the first is appended;
 * -1 with the error recorded (NULL p or src, a name too long or duplicated,
 * out of memory), and p unchanged, otherwise 0. src may be p itself. */
int tg_params_extend(tg_params *p, const char *prefix, const tg_params *src);
/** The tensor named name (the full name), or NULL if absent, or p or name is
 * NULL (no error recorded). */
tg_tensor *tg_params_get(const tg_params *p, const char *name);
/** The total number of values of the list's tensors (0 for a NULL p). */
int64_t tg_params_numel(const tg_params *p);
/** The first value of p, in list order, that is NaN or infinite: true with
 * *item (its tensor's position in the list) and *index (its flat index in
 * that tensor) set (either pointer may be NULL); false when every value is
 * finite (NULL tensors have none) or p is NULL. For a caller that words its
 * own message, e.g. the checkpoint savers. */
bool tg_params_first_nonfinite(const tg_params *p, int *item, int64_t *index);
/** 0 when every value of every tensor of p is finite, else -1 with
 * "<op>: tensor '<name>' holds nan at index 17" recorded (the first such
 * value; "inf", "-inf" for infinities; -1 also for a NULL p). op names the
 * caller (NULL: "params_check_finite"). A training loop calls it on the
 * parameters after a step, to stop on a diverged run before it saves
 * anything. */
int tg_params_check_finite(const tg_params *p, const char *op);
/** Frees the list, not the tensors, and leaves p empty (as tg_params_init),
 * ready for reuse; a NULL p is ignored. */
void tg_params_free(tg_params *p);

/** One generator of a tg_rngs list, under its name. */
typedef struct {
    const char *name; /**< points into the owning tg_rngs' name array */
    tg_rng *rng;      /**< not owned: the generator of a module or of the program */
} tg_named_rng;
#define TG_RNGS_MAX 256 /**< most generators a tg_rngs list holds: a decoder of 84 layers (1 + 3 per layer) */
/** A named list of random generators: the streams a training step draws
 * from (the data sampler, every dropout layer), which a checkpoint must
 * hold for a resumed run to draw what an uninterrupted one would. The
 * generators are not owned; item[i].name points into the list itself, so
 * pass the list by pointer (a copy would point into the original). Start
 * with a zeroed list (tg_rngs l = {0}); it needs no freeing. */
typedef struct {
    int n;                          /**< generators in the list, 0..TG_RNGS_MAX */
    tg_named_rng item[TG_RNGS_MAX]; /**< item[0..n-1], in the order added */
    char name[TG_RNGS_MAX][32];     /**< the names' storage (item[i].name is name[i]), each below 32 bytes */
} tg_rngs;
/** Appends (name, rng), the name copied; a NULL rng (a layer without a
 * generator) is skipped and returns 0. Names are not checked for
 * duplicates. 0, or -1 with the error recorded (NULL l or name, list full,
 * name of 32 or more bytes). */
int tg_rngs_add(tg_rngs *l, const char *name, tg_rng *rng);

#endif
