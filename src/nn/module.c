/* The checks and the allocation every module shares (module.h). */
#include "module.h"

#include <string.h>

void *tg_module_alloc(const char *module, size_t size, bool need_rng, const tg_rng *rng) {
    if (need_rng && !rng) {
        tg_set_error("%s: NULL rng", module);
        return NULL;
    }
    void *m = tg_sys_calloc(1, size);
    if (!m) tg_set_error("%s: out of memory", module);
    return m;
}

tg_tensor *tg_module_param(int ndim, const int *shape, tg_module_init init, tg_real s, tg_rng *rng) {
    tg_tensor *t = tg_empty_persistent(ndim, shape);
    if (!t) return NULL;
    if (init == TG_INIT_UNIFORM)
        tg_fill_uniform(t, -s, s, rng);
    else if (init == TG_INIT_NORMAL)
        tg_fill_normal(t, 0, s, rng);
    else
        for (int64_t i = 0; i < t->size; i++) t->data[i] = s;
    tg_set_requires_grad(t, true);
    return t;
}

bool tg_module_present(const char *module, const char *verb, const void *m) {
    if (!m) tg_set_error("%s_%s: NULL module", module, verb);
    return m != NULL;
}

bool tg_module_last_dim(const char *module, const tg_tensor *x, int want) {
    int d = x->ndim ? x->shape[x->ndim - 1] : 0;
    if (x->ndim >= 1 && d == want) return true;
    char b[64];
    tg_set_error("%s: input %s last dim %d, expected %d", module, tg_tshape(b, x), d, want);
    return false;
}

bool tg_module_input(const char *module, const void *m, const tg_tensor *x) {
    if (!tg_module_present(module, "forward", m)) return false;
    if (!x) tg_error_null(module);
    return x != NULL;
}

tg_tensor *tg_module_head_weights(const char *op, const tg_tensor *w, int h, int head) {
    /* Recorded in a forward's scope: after tg_scope_end they are gone. */
    if (tg_any_null(op, 1, &w)) return NULL;
    int B = w->shape[0] / h, Q = w->shape[1], K = w->shape[2];
    tg_tensor *out = tg_empty_arena(TG_SHAPE(B, Q, K));
    if (!out) return NULL;
    size_t n = (size_t)Q * (size_t)K;
    for (int b = 0; b < B; b++) memcpy(out->data + b * n, w->data + ((size_t)b * h + head) * n, sizeof(tg_real) * n);
    return out;
}

/* [B, n, H] -> [B*h, n, H/h] */
tg_tensor *tg_module_split_heads(tg_tensor *X, int h) {
    if (!X) return NULL;
    int B = X->shape[0], n = X->shape[1], H = X->shape[2];
    tg_tensor *x = tg_reshape(X, TG_SHAPE(B, n, h, H / h));
    x = tg_permute(x, (const int[]){0, 2, 1, 3});
    return tg_reshape(x, TG_SHAPE(B * h, n, H / h));
}

/* [B*h, n, H/h] -> [B, n, H]: the inverse of tg_module_split_heads. */
tg_tensor *tg_module_merge_heads(tg_tensor *X, int h) {
    if (!X) return NULL;
    int Bh = X->shape[0], n = X->shape[1], d = X->shape[2];
    tg_tensor *x = tg_reshape(X, TG_SHAPE(Bh / h, h, n, d));
    x = tg_permute(x, (const int[]){0, 2, 1, 3});
    return tg_reshape(x, TG_SHAPE(Bh / h, n, h * d));
}
