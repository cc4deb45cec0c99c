/* Softmax and log-softmax of each row, stable for large logits:
 *   softmax(x)_j = exp(x_j - m) / sum_k exp(x_k - m),  m = max_k x_k
 *   log_softmax(x)_j = x_j - m - log(sum_k exp(x_k - m)). */
#include "kernels.h"
#include "parallel.h"

#include <math.h>

tg_real tg_k_row_max(const tg_real *x, int64_t n) {
    tg_real m = x[0];
    for (int64_t j = 1; j < n; j++)
        if (x[j] > m) m = x[j];
    return m;
}

void tg_k_softmax_row(tg_real *y, int64_t n) {
    tg_real inv = 1 / tg_k_exp_shift(y, n, tg_k_row_max(y, n));
    for (int64_t j = 0; j < n; j++) y[j] *= inv;
}

/* dx_j = y_j (g_j - sum_k g_k y_k), the vector-Jacobian product of softmax. */
void tg_k_softmax_row_backward(const tg_real *y, const tg_real *g, tg_real *dx, int64_t n, int64_t n_grad,
                               bool accumulate) {
    tg_real dot = 0;
    for (int64_t j = 0; j < n; j++) dot += g[j] * y[j];
    if (accumulate)
        for (int64_t j = 0; j < n_grad; j++) dx[j] += y[j] * (g[j] - dot);
    else {
        for (int64_t j = 0; j < n_grad; j++) dx[j] = y[j] * (g[j] - dot);
        for (int64_t j = n_grad; j < n; j++) dx[j] = 0;
    }
}

typedef struct {
    const tg_real *x;
    tg_real *y;
    int64_t n;
} rows_ctx;

static void softmax_range(void *ctx, int64_t begin, int64_t end, int tid) {
    const rows_ctx *c = ctx;
    (void)tid;
    for (int64_t r = begin; r < end; r++) {
        const tg_real *xr = c->x + r * c->n;
        tg_real *yr = c->y + r * c->n;
        for (int64_t j = 0; j < c->n; j++) yr[j] = xr[j]; /* x may be y */
        tg_k_softmax_row(yr, c->n);
    }
}

void tg_k_softmax_rows(const tg_real *x, tg_real *y, int64_t rows, int64_t n) {
    tg_parallel_for_ns(rows, (double)(rows * n) * TG_NS_ROW_EXP, softmax_range, &(rows_ctx){x, y, n});
}

static void log_softmax_range(void *ctx, int64_t begin, int64_t end, int tid) {
    const rows_ctx *c = ctx;
    int64_t n = c->n;
    (void)tid;
    for (int64_t r = begin; r < end; r++) { /* y = x - logsumexp(x) */
        const tg_real *xr = c->x + r * n;
        tg_real *yr = c->y + r * n, m = tg_k_row_max(xr, n), s = 0;
        for (int64_t j = 0; j < n; j++) s += TG_M(exp)(xr[j] - m);
        tg_real lse = m + TG_M(log)(s);
        for (int64_t j = 0; j < n; j++) yr[j] = xr[j] - lse;
    }
}

void tg_k_log_softmax_rows(const tg_real *x, tg_real *y, int64_t rows, int64_t n) {
    tg_parallel_for_ns(rows, (double)(rows * n) * TG_NS_ROW_EXP, log_softmax_range, &(rows_ctx){x, y, n});
}
