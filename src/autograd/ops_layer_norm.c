/* Layer normalisation over the last axis (Ba, Kiros & Hinton, 2016), as
 * PyTorch's nn.LayerNorm, biased variance:
 *   mean = (1/d) sum_j x_j,  var = (1/d) sum_j (x_j - mean)^2,  rstd = 1/sqrt(var + eps)
 *   xhat_j = (x_j - mean) rstd,   y_j = xhat_j gamma_j + beta_j
 * Backward (the fused form of llm.c's layernorm_backward), per row:
 *   dxhat_j = g_j gamma_j
 *   dx_j    = rstd (dxhat_j - mean_k(dxhat_k) - xhat_j mean_k(dxhat_k xhat_k))
 *   dgamma_j = sum_rows g_j xhat_j,   dbeta_j = sum_rows g_j
 * mean (less the row's x_0: the kernel's shift) and rstd of each row are
 * saved; xhat is recomputed from them as the forward computed it. The
 * loops are tensor kernels (tensor/kernels_norm.c). */
#include "op.h"

#include <math.h>
#include "tensor/tensor_internal.h" /* tg__empty_bf16 */

typedef struct {
    tg_real *mean, *rstd; /* one per row, in the arena; mean less x_0 */
} layer_norm_state;

static void layer_norm_backward(tg_node *n) {
    tg_tensor *x = n->in[0];
    bool affine = n->n_in == 3;
    tg_tensor *gamma = affine ? n->in[1] : NULL;
    bool fresh;
    tg_tensor *gx = tg_grad_begin(x, &fresh);
    tg_tensor *gg = affine ? tg_grad_of(n->in[1]) : NULL;
    tg_tensor *gb = affine ? tg_grad_of(n->in[2]) : NULL;
    const layer_norm_state *st = n->state;
    int64_t d = x->shape[x->ndim - 1], rows = x->size / d;
    const tg_real *g = n->out->grad->data;
    tg_k_layer_norm_backward(x->data, g, affine ? gamma->data : NULL, st->mean, st->rstd, gx ? gx->data : NULL, fresh,
                             gg ? gg->data : NULL, gb ? gb->data : NULL, rows, d);
}
const tg_op tg_op_layer_norm = {"layer_norm", layer_norm_backward};

tg_tensor *tg_layer_norm_to(tg_tensor *x, tg_tensor *gamma, tg_tensor *beta, tg_real eps, tg_dtype to) {
    char b1[64], b2[64], b3[64];
    if (tg_any_null("layer_norm", 1, (const tg_tensor *const[]){x})) return NULL;
    if (!gamma != !beta) { /* one of them NULL: most likely an earlier failed call */
        tg_error_null("layer_norm");
        return NULL;
    }
    if (x->ndim == 0 || x->shape[x->ndim - 1] == 0) {
        tg_set_error("layer_norm: x %s has no last axis to normalise", tg_tshape(b1, x));
        return NULL;
    }
    int64_t d = x->shape[x->ndim - 1], rows = x->size / d;
    if (gamma && (gamma->ndim != 1 || gamma->shape[0] != d || beta->ndim != 1 || beta->shape[0] != d)) {
        tg_set_error("layer_norm: x %s with gamma %s and beta %s: gamma and beta must have shape (%lld)",
                     tg_tshape(b1, x), tg_tshape(b2, gamma), tg_tshape(b3, beta), (long long)d);
        return NULL;
    }
    if (!(eps >= 0)) {
        tg_set_error("layer_norm: x %s with eps = %g: eps must be >= 0", tg_tshape(b1, x), (double)eps);
        return NULL;
    }
    tg_tensor *y = to == TG_DTYPE_BF16 ? tg__empty_bf16(x->ndim, x->shape) : tg_empty_arena(x->ndim, x->shape);
    layer_norm_state *st = tg_arena_alloc(sizeof *st);
    tg_real *buf = tg_arena_alloc(sizeof(tg_real) * (size_t)(2 * rows + 1));
    if (!y || !st || !buf) return NULL;
    st->mean = buf;
    st->rstd = buf + rows;
    const tg_real *g = gamma ? gamma->data : NULL, *be = gamma ? beta->data : NULL;
    if (to != TG_DTYPE_BF16) {
        tg_k_layer_norm(x->data, g, be, y->data, st->mean, st->rstd, rows, d, eps);
    } else {
        tg_k_layer_norm_bf16(x->data, g, be, y->bf16, st->mean, st->rstd, rows, d, eps);
    }
    tg_node *n = gamma ? tg_node_record(&tg_op_layer_norm, y, 3, (tg_tensor *const[]){x, gamma, beta})
                       : tg_node_record(&tg_op_layer_norm, y, 1, &x);
    if (n) n->state = st;
    return y;
}
tg_tensor *tg_layer_norm(tg_tensor *x, tg_tensor *gamma, tg_tensor *beta, tg_real eps) {
    return tg_layer_norm_to(x, gamma, beta, eps, TG_DTYPE_REAL);
}
