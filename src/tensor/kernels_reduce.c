/* Reductions along one axis, with the tensor viewed as [outer, n, inner].
 * Each output sums its n terms in index order, so results do not depend on
 * the thread count. */
#include "kernels.h"
#include "parallel.h"

typedef struct {
    const tg_real *x;
    tg_real *y;
    int64_t *argmax;
    int64_t n, inner;
} axis_ctx;

static void sum_axis_range(void *ctx, int64_t begin, int64_t end, int tid) {
    const axis_ctx *c = ctx;
    const tg_real *x = c->x;
    tg_real *y = c->y;
    int64_t n = c->n, inner = c->inner;
    (void)tid;
    for (int64_t o = begin; o < end; o++) {
        tg_real *yo = y + o * inner;
        for (int64_t i = 0; i < inner; i++) yo[i] = 0;
        for (int64_t k = 0; k < n; k++) {
            const tg_real *xk = x + (o * n + k) * inner;
            for (int64_t i = 0; i < inner; i++) yo[i] += xk[i];
        }
    }
}

void tg_k_sum_axis(const tg_real *x, tg_real *y, int64_t outer, int64_t n, int64_t inner) {
    tg_parallel_for_ns(outer, (double)(outer * n * inner) * TG_NS_STREAM, sum_axis_range,
                       &(axis_ctx){x, y, NULL, n, inner});
}

static void max_axis_range(void *ctx, int64_t begin, int64_t end, int tid) {
    const axis_ctx *c = ctx;
    const tg_real *x = c->x;
    tg_real *y = c->y;
    int64_t *argmax = c->argmax;
    int64_t n = c->n, inner = c->inner;
    (void)tid;
    for (int64_t o = begin; o < end; o++) {
        for (int64_t i = 0; i < inner; i++) {
            const tg_real *xo = x + o * n * inner + i;
            int64_t best = 0;
            for (int64_t k = 1; k < n; k++)
                if (xo[k * inner] > xo[best * inner]) best = k; /* first maximum wins */
            y[o * inner + i] = n ? xo[best * inner] : 0;
            if (argmax) argmax[o * inner + i] = best;
        }
    }
}

void tg_k_max_axis(const tg_real *x, tg_real *y, int64_t *argmax, int64_t outer, int64_t n, int64_t inner) {
    tg_parallel_for_ns(outer, (double)(outer * n * inner) * TG_NS_STREAM, max_axis_range,
                       &(axis_ctx){x, y, argmax, n, inner});
}
