/* Internal to src/nn (not installed): the checks and the allocation every
 * module shares, so that a constructor or a forward states only what is its
 * own. Errors follow nn.h's convention: "<module>: ..." from a constructor,
 * "<module>_<verb>: NULL module" from a call on a NULL module, and a NULL
 * input keeps the first message (tg_error_null), which names the op that
 * failed upstream. */
#ifndef TG_NN_MODULE_H
#define TG_NN_MODULE_H

#include "nn.h"

/* A zeroed module struct of `size` bytes. need_rng: the module draws its
 * initial weights, so rng must not be NULL. NULL on failure, with
 * "<module>: NULL rng" or "<module>: out of memory" recorded. */
void *tg_module_alloc(const char *module, size_t size, bool need_rng, const tg_rng *rng);
/* A parameter: persistent (it outlives every scope), requiring grad, filled
 * by `init` with scale s: U(-s, s), N(0, s^2), or the constant s (rng may
 * then be NULL). NULL when out of memory. */
typedef enum { TG_INIT_UNIFORM, TG_INIT_NORMAL, TG_INIT_CONST } tg_module_init;
tg_tensor *tg_module_param(int ndim, const int *shape, tg_module_init init, tg_real s, tg_rng *rng);
/* false, with "<module>_<verb>: NULL module" recorded, when m is NULL. */
bool tg_module_present(const char *module, const char *verb, const void *m);
/* x's last axis has `want` entries, else false with "<module>: input <shape>
 * last dim <d>, expected <want>" recorded. */
bool tg_module_last_dim(const char *module, const tg_tensor *x, int want);
/* A forward's entry check: the module is present and its input x is not NULL. */
bool tg_module_input(const char *module, const void *m, const tg_tensor *x);
/* Head `head` (checked by the caller to be in [0, h)) of the attention
 * weights recorded for h heads, [B*h, Q, K] with head j of batch entry b in
 * row b*h + j, copied out as a [B, Q, K] arena tensor; NULL when out of
 * memory. */
tg_tensor *tg_module_head_weights(const tg_tensor *w, int h, int head);
/* A module's Linear children, listed once per call in state_dict order
 * (defined in linear.c). _params appends each one's parameters under
 * "<prefix>.<names[i]>": 0, or -1 at the first failure with its error
 * recorded. _free frees each (NULL entries are skipped). */
int tg_linears_params(int n, const char *const *names, tg_linear *const *lin, tg_params *p, const char *prefix);
void tg_linears_free(int n, tg_linear *const *lin);

#endif
