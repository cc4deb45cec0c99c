/* Reductions along one axis, with the tensor viewed as [outer, n, inner].
 * Each output sums its n terms in index order, so results do not depend on
 * the thread count. */
#include "kernels.h"

void tg_k_sum_axis(const tg_real *x, tg_real *y, int64_t outer, int64_t n, int64_t inner) {
#pragma omp parallel for if (outer * n * inner > TG_PAR_MIN)
    for (int64_t o = 0; o < outer; o++) {
        tg_real *yo = y + o * inner;
        for (int64_t i = 0; i < inner; i++) yo[i] = 0;
        for (int64_t k = 0; k < n; k++) {
            const tg_real *xk = x + (o * n + k) * inner;
            for (int64_t i = 0; i < inner; i++) yo[i] += xk[i];
        }
    }
}

void tg_k_max_axis(const tg_real *x, tg_real *y, int64_t *argmax, int64_t outer, int64_t n, int64_t inner) {
#pragma omp parallel for if (outer * n * inner > TG_PAR_MIN)
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t i = 0; i < inner; i++) {
            const tg_real *xo = x + o * n * inner + i;
            int64_t best = 0;
            for (int64_t k = 1; k < n; k++)
                if (xo[k * inner] > xo[best * inner]) best = k;   /* first maximum wins */
            y[o * inner + i] = n ? xo[best * inner] : 0;
            if (argmax) argmax[o * inner + i] = best;
        }
    }
}
