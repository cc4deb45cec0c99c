/* Inverted dropout (Srivastava et al., 2014, in the form PyTorch uses):
 *   y_i = keep_i * x_i / (1 - p),   dx_i = keep_i * g_i / (1 - p),
 *   keep_i = [tg_rng_uniform_at(seed, stream, first + i) >= p],
 * so E[y_i] = x_i. The mask is a pure function of (seed, stream, first + i):
 * backward draws it again instead of storing it, and it does not depend on
 * the number of threads. */
#include "autograd.h"

#include <math.h>
#include <string.h>

typedef struct {
    uint64_t seed, stream, first;   /* where the mask's random numbers start */
    uint64_t key, threshold;        /* tg_rng_key(seed, stream); ceil(p 2^53) */
} dropout_key;

/* uniform_at(i) >= p, in integers: (bits >> 11) 2^-53 >= p. */
static inline bool keep(const dropout_key *k, int64_t i) {
    return (tg_rng_hash(k->key, k->first + (uint64_t)i) >> 11) >= k->threshold;
}

static void dropout_backward(tg_node *n) {
    bool fresh;
    tg_tensor *gx = tg_grad_begin(n->in[0], &fresh);
    if (!gx) return;
    tg_real p = n->rarg[0];
    if (p >= 1) {                             /* y = 0: no gradient */
        if (fresh) memset(gx->data, 0, sizeof(tg_real) * (size_t)gx->size);
        return;
    }
    const dropout_key *k = n->ptr;
    const tg_real *g = n->out->grad->data;
#pragma omp parallel for if (gx->size > 32768)
    for (int64_t i = 0; i < gx->size; i++) {
        tg_real d = keep(k, i) ? g[i] / (1 - p) : 0;
        gx->data[i] = fresh ? d : gx->data[i] + d;
    }
}
const tg_op tg_op_dropout = {"dropout", dropout_backward};

tg_tensor *tg_dropout(tg_tensor *x, tg_real p, tg_rng *rng) {
    char b[64];
    if (tg_any_null("dropout", 1, (const tg_tensor *const[]){x})) return NULL;
    if (!(p >= 0 && p <= 1)) {   /* also catches NaN */
        tg_set_error("dropout: %s with p = %g: p must be in [0, 1]", tg_tshape(b, x), (double)p);
        return NULL;
    }
    if (p == 0) return x;        /* identity: the caller's tensor itself, as documented */
    if (p < 1 && !rng) {
        tg_set_error("dropout: %s with p = %g: NULL rng", tg_tshape(b, x), (double)p);
        return NULL;
    }
    tg_tensor *y = tg_empty_arena(x->ndim, x->shape);
    if (!y) return NULL;
    dropout_key key = {0, 0, 0, 0, 0};
    if (p >= 1) {
        memset(y->data, 0, sizeof(tg_real) * (size_t)y->size);
    } else {
        key = (dropout_key){rng->seed, rng->stream, tg_rng_take(rng, (uint64_t)x->size),
                            tg_rng_key(rng->seed, rng->stream), (uint64_t)ceil((double)p * 0x1.0p53)};
#pragma omp parallel for if (x->size > 32768)
        for (int64_t i = 0; i < x->size; i++) y->data[i] = keep(&key, i) ? x->data[i] / (1 - p) : 0;
    }
    tg_node *n = tg_node_record(&tg_op_dropout, y, 1, &x);
    if (n) {
        n->rarg[0] = p;
        dropout_key *k = tg_arena_alloc(sizeof *k);
        if (!k) return NULL;
        *k = key;
        n->ptr = k;
    }
    return y;
}
