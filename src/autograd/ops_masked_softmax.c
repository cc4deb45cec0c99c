/* Masked softmax over the last axis of x [B, Q, K] (d2l's masked_softmax):
 *   z_k = x_k if key k is visible, else -1e6;   y = softmax(z)
 * Backward, since masked z_k are constants:
 *   dx_k = y_k (g_k - sum_j g_j y_j) for visible k,   dx_k = 0 for masked k.
 * The mask rules are in mask.h. */
#include "mask.h"

static void backward_row(const tg_rows_ctx *c, int64_t r) {
    /* masked keys (k >= lim[r]) get no gradient */
    int64_t K = c->n;
    tg_k_softmax_row_backward(c->y->data + r * K, c->g + r * K, c->gx->data + r * K, K, c->lim[r], !c->fresh);
}

static void masked_softmax_backward(tg_node *n) {
    bool fresh;
    tg_tensor *gx = tg_grad_begin(n->in[0], &fresh);
    if (!gx) return;
    const tg_tensor *y = n->out;
    const int *lim = n->state; /* mask_limits: the visible keys of each row */
    int64_t K = y->shape[2], rows = y->size / K;
    const tg_real *g = y->grad->data;
    tg_rows_ctx c = {.y = y, .gx = gx, .lim = lim, .g = g, .n = K, .fresh = fresh};
    tg_parallel_rows_ns(rows, (double)y->size * 2 * TG_NS_STREAM, backward_row, &c);
}

static void forward_row(const tg_rows_ctx *c, int64_t r) {
    const int64_t K = c->n, L = c->lim[r];
    const tg_real *xr = c->x->data + r * K;
    tg_real *yr = c->y->data + r * K;
    for (int64_t k = 0; k < K; k++) yr[k] = k < L ? xr[k] : MASK_VALUE;
    tg_k_softmax_row(yr, K);
}
const tg_op tg_op_masked_softmax = {"masked_softmax", masked_softmax_backward};

tg_tensor *tg_masked_softmax(tg_tensor *x, tg_mask mask) {
    if (tg_any_null("masked_softmax", 1, (const tg_tensor *const[]){x})) return NULL;
    if (!mask_check("masked_softmax", x, &mask)) return NULL;
    int *lim = mask_limits(x, &mask);
    tg_tensor *y = lim ? tg_empty_arena(x->ndim, x->shape) : NULL;
    if (!y) return NULL;
    int64_t K = x->shape[2], rows = x->size / K;
    tg_parallel_rows_ns(rows, (double)x->size * TG_NS_ROW_EXP, forward_row,
                        &(tg_rows_ctx){.x = x, .y = y, .lim = lim, .n = K});
    tg_node *n = tg_node_record(&tg_op_masked_softmax, y, 1, &x);
    if (n) n->state = lim;
    return y;
}
