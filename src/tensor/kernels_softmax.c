/* Softmax and log-softmax of each row, stable for large logits:
 *   softmax(x)_j = exp(x_j - m) / sum_k exp(x_k - m),  m = max_k x_k
 *   log_softmax(x)_j = x_j - m - log(sum_k exp(x_k - m)). */
#include "kernels.h"

#include <math.h>

static tg_real row_max(const tg_real *x, int64_t n) {
    tg_real m = x[0];
    for (int64_t j = 1; j < n; j++) if (x[j] > m) m = x[j];
    return m;
}

void tg_k_softmax_rows(const tg_real *x, tg_real *y, int64_t rows, int64_t n) {
#pragma omp parallel for if (rows * n > TG_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const tg_real *xr = x + r * n;
        tg_real *yr = y + r * n, m = row_max(xr, n);
        for (int64_t j = 0; j < n; j++) yr[j] = xr[j];
        tg_real inv = 1 / tg_k_exp_shift(yr, n, m);
        for (int64_t j = 0; j < n; j++) yr[j] *= inv;
    }
}

void tg_k_log_softmax_rows(const tg_real *x, tg_real *y, int64_t rows, int64_t n) {
#pragma omp parallel for if (rows * n > TG_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const tg_real *xr = x + r * n;
        tg_real *yr = y + r * n, m = row_max(xr, n), s = 0;
        for (int64_t j = 0; j < n; j++) s += TG_M(exp)(xr[j] - m);
        tg_real lse = m + TG_M(log)(s);
        for (int64_t j = 0; j < n; j++) yr[j] = xr[j] - lse;
    }
}
