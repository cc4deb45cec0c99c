/* Masked softmax over the last axis of x [B, Q, K] (d2l's masked_softmax):
 *   z_k = x_k if key k is visible, else -1e6;   y = softmax(z)
 * Backward, since masked z_k are constants:
 *   dx_k = y_k (g_k - sum_j g_j y_j) for visible k,   dx_k = 0 for masked k.
 * The mask rules are in mask.h. */
#include "mask.h"

typedef struct {
    const tg_tensor *x, *y;
    tg_tensor *gx;
    const int *lim;
    const tg_real *g;
    int64_t K;
    bool fresh;
} masked_softmax_ctx;

static void backward_rows(void *ctx, int64_t begin, int64_t end, int tid) {
    const masked_softmax_ctx *c = ctx;
    const tg_tensor *y = c->y;
    tg_tensor *gx = c->gx;
    const int *lim = c->lim;
    const tg_real *g = c->g;
    int64_t K = c->K;
    bool fresh = c->fresh;
    (void)tid;
    for (int64_t r = begin; r < end; r++) {
        /* masked keys (k >= lim[r]) get no gradient */
        tg_k_softmax_row_backward(y->data + r * K, g + r * K, gx->data + r * K, K, lim[r], !fresh);
    }
}

static void masked_softmax_backward(tg_node *n) {
    bool fresh;
    tg_tensor *gx = tg_grad_begin(n->in[0], &fresh);
    if (!gx) return;
    const tg_tensor *y = n->out;
    const int *lim = n->state; /* mask_limits: the visible keys of each row */
    int64_t K = y->shape[2], rows = y->size / K;
    const tg_real *g = y->grad->data;
    masked_softmax_ctx c = {.y = y, .gx = gx, .lim = lim, .g = g, .K = K, .fresh = fresh};
    tg_parallel_for(rows, y->size > TG_PAR_MIN, backward_rows, &c);
}

static void forward_rows(void *ctx, int64_t begin, int64_t end, int tid) {
    const masked_softmax_ctx *c = ctx;
    const tg_tensor *x = c->x, *y = c->y;
    const int *lim = c->lim;
    int64_t K = c->K;
    (void)tid;
    for (int64_t r = begin; r < end; r++) {
        const tg_real *xr = x->data + r * K;
        tg_real *yr = y->data + r * K;
        int64_t L = lim[r];
        for (int64_t k = 0; k < K; k++) yr[k] = k < L ? xr[k] : MASK_VALUE;
        tg_k_softmax_row(yr, K);
    }
}
const tg_op tg_op_masked_softmax = {"masked_softmax", masked_softmax_backward};

tg_tensor *tg_masked_softmax(tg_tensor *x, tg_mask mask) {
    if (tg_any_null("masked_softmax", 1, (const tg_tensor *const[]){x})) return NULL;
    if (!mask_check("masked_softmax", x, &mask)) return NULL;
    int *lim = mask_limits(x, &mask);
    tg_tensor *y = lim ? tg_empty_arena(x->ndim, x->shape) : NULL;
    if (!y) return NULL;
    int64_t K = x->shape[2], rows = x->size / K;
    masked_softmax_ctx c = {.x = x, .y = y, .lim = lim, .K = K};
    tg_parallel_for(rows, x->size > TG_PAR_MIN, forward_rows, &c);
    tg_node *n = tg_node_record(&tg_op_masked_softmax, y, 1, &x);
    if (n) n->state = lim;
    return y;
}
