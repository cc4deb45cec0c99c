/* Helpers shared by the GEMM tests (test_gemm.c, test_gemm_bf16.c): a
 * repeatable random stream and the operands of one product. */
#ifndef TG_GEMM_TEST_UTIL_H
#define TG_GEMM_TEST_UTIL_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/tensor.h"

/* Deterministic values from a small LCG, so a failure repeats; each test
 * file seeds its own state. lcg_next steps it, lcg_uniform is in [-1, 1). */
static inline uint64_t lcg_next(uint64_t *state) {
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return *state;
}
static inline tg_real lcg_uniform(uint64_t *state) {
    return (tg_real)((double)(lcg_next(state) >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}
static inline tg_real *lcg_buf(uint64_t *state, size_t n) {
    tg_real *p = malloc((n ? n : 1) * sizeof *p);
    cr_assert_not_null(p);
    for (size_t i = 0; i < n; i++) p[i] = lcg_uniform(state);
    return p;
}

/* The operands of C = alpha * op(A) op(B) + beta * C, M x N x K, leading
 * dimensions padded by pad, random (A, B, then C); with nan_c, C's M x N
 * corner holds NaN. C0 is a copy of C before the product. */
typedef struct {
    int lda, ldb, ldc;
    tg_real *A, *B, *C, *C0;
} gemm_operands;

static inline gemm_operands gemm_operands_new(uint64_t *state, bool ta, bool tb, int M, int N, int K, int pad,
                                              bool nan_c) {
    int arows = ta ? K : M, acols = ta ? M : K;
    int brows = tb ? N : K, bcols = tb ? K : N;
    gemm_operands o = {.lda = acols + pad, .ldb = bcols + pad, .ldc = N + pad};
    if (o.lda < 1) o.lda = 1;
    if (o.ldb < 1) o.ldb = 1;
    if (o.ldc < 1) o.ldc = 1;
    o.A = lcg_buf(state, (size_t)arows * o.lda);
    o.B = lcg_buf(state, (size_t)brows * o.ldb);
    o.C = lcg_buf(state, (size_t)M * o.ldc);
    if (nan_c)
        for (size_t i = 0; i < (size_t)M * o.ldc; i++)
            if (i % (size_t)o.ldc < (size_t)N) o.C[i] = NAN;
    o.C0 = malloc(((size_t)M * o.ldc + 1) * sizeof *o.C0);
    cr_assert_not_null(o.C0);
    memcpy(o.C0, o.C, (size_t)M * o.ldc * sizeof *o.C);
    return o;
}

static inline void gemm_operands_free(gemm_operands *o) {
    free(o->A);
    free(o->B);
    free(o->C);
    free(o->C0);
}

#endif
