/* Sparsemax (Martins & Astudillo, "From Softmax to Sparsemax", 2016): the
 * Euclidean projection of each row z onto the probability simplex,
 *   y_j = max(z_j - tau, 0),  tau such that sum_j max(z_j - tau, 0) = 1.
 * With z sorted decreasingly (z_(1) >= z_(2) >= ...), the support size is
 *   k = max{ k : 1 + k z_(k) > sum_{i<=k} z_(i) },  tau = (sum_{i<=k} z_(i) - 1) / k.
 * Off the support y is exactly 0. On the support S the Jacobian is
 * I - 1 1^T / |S|, so backward is
 *   dx_j = g_j - (1/|S|) sum_{i in S} g_i   for j in S (and visible),  0 otherwise.
 * Masking as tg_masked_softmax (mask.h): masked scores become -1e6, constants. */
#include "mask.h"

#include <stdlib.h>

static int desc(const void *a, const void *b) {
    tg_real x = *(const tg_real *)a, y = *(const tg_real *)b;
    return (x < y) - (x > y);
}

static void backward_row(const tg_rows_ctx *c, int64_t r) {
    const int64_t K = c->n;
    const tg_real *yr = c->y->data + r * K, *gr = c->g + r * K;
    tg_real sum = 0;
    int64_t size = 0;
    for (int64_t k = 0; k < K; k++)
        if (yr[k] > 0) {
            sum += gr[k];
            size++;
        }
    tg_real mean = size ? sum / (tg_real)size : 0;
    for (int64_t k = 0; k < c->lim[r]; k++)
        if (yr[k] > 0) c->gx->data[r * K + k] += gr[k] - mean;
}

static void sparsemax_backward(tg_node *n) {
    tg_tensor *gx = tg_grad_of(n->in[0]);
    if (!gx) return;
    const tg_tensor *y = n->out;
    const int *lim = n->state; /* mask_limits: the visible keys of each row */
    int64_t K = y->shape[2], rows = y->size / K;
    const tg_real *g = y->grad->data;
    tg_parallel_rows_ns(rows, (double)y->size * 2 * TG_NS_STREAM, backward_row,
                        &(tg_rows_ctx){.y = y, .gx = gx, .lim = lim, .g = g, .n = K});
}
const tg_op tg_op_sparsemax = {"sparsemax", sparsemax_backward};

static void forward_row(const tg_rows_ctx *c, int64_t r) {
    const int64_t K = c->n;
    const tg_real *xr = c->x->data + r * K;
    tg_real *yr = c->y->data + r * K, *zs = c->scratch + r * K;
    int64_t L = c->lim[r];
    /* z minus its maximum (sparsemax is shift invariant): a fully masked
     * row becomes all zeros, so tau = -1/K is exact even in float. */
    tg_real m = L > 0 ? xr[0] : MASK_VALUE;
    for (int64_t k = 1; k < L; k++)
        if (xr[k] > m) m = xr[k];
    if (L < K && MASK_VALUE > m) m = MASK_VALUE;
    for (int64_t k = 0; k < K; k++) yr[k] = (k < L ? xr[k] : MASK_VALUE) - m;
    for (int64_t k = 0; k < K; k++) zs[k] = yr[k];
    qsort(zs, (size_t)K, sizeof(tg_real), desc);
    double cum = 0, cum_k = 0;
    int64_t support = 1;
    for (int64_t k = 0; k < K; k++) {
        cum += zs[k];
        if (1 + (double)(k + 1) * zs[k] > cum) {
            support = k + 1;
            cum_k = cum;
        }
    }
    tg_real tau = (tg_real)((cum_k - 1) / (double)support);
    for (int64_t k = 0; k < K; k++) yr[k] = yr[k] > tau ? yr[k] - tau : 0;
}

tg_tensor *tg_sparsemax(tg_tensor *x, tg_mask mask) {
    if (tg_any_null("sparsemax", 1, (const tg_tensor *const[]){x})) return NULL;
    if (!mask_check("sparsemax", x, &mask)) return NULL;
    int *lim = mask_limits(x, &mask);
    tg_tensor *y = lim ? tg_empty_arena(x->ndim, x->shape) : NULL;
    tg_real *sorted = y ? tg_arena_alloc(sizeof(tg_real) * (size_t)x->size) : NULL; /* scratch, one row per row */
    if (!sorted) return NULL;
    int64_t K = x->shape[2], rows = x->size / K;
    tg_rows_ctx c = {.x = x, .y = y, .lim = lim, .scratch = sorted, .n = K};
    tg_parallel_rows_ns(rows, (double)x->size * TG_NS_LIBM, forward_row, &c); /* a sort per row */
    tg_node *n = tg_node_record(&tg_op_sparsemax, y, 1, &x);
    if (n) n->state = lim;
    return y;
}
