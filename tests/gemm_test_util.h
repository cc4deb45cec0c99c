/* Helpers shared by the GEMM tests (test_gemm.c, test_gemm_bf16.c): a
 * repeatable random stream and one product on random operands. */
#ifndef TG_GEMM_TEST_UTIL_H
#define TG_GEMM_TEST_UTIL_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/half.h"
#include "tensor/tensor.h"
#include "tensor/tensor_internal.h" /* tg__bf16_engine_force */

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

/* Values over a wide range of magnitudes (2^-24 to 2^24), with float
 * subnormals among them (every 11th: a zero to the bf16 GEMM, DAZ, and a
 * bf16 subnormal when rounded to bf16 as storage is, keeping them): what
 * exercises the bf16 engines' sum order and flushes. */
static inline tg_real *lcg_wide(uint64_t *state, size_t n) {
    tg_real *v = malloc((n ? n : 1) * sizeof *v);
    cr_assert_not_null(v);
    for (size_t i = 0; i < n; i++) {
        uint64_t r = lcg_next(state);
        int e = (int)(r >> 40) % 48 - 24;
        if (i % 11 == 0) e = -130 + (int)((r >> 20) % 8); /* subnormal in float: zero in bf16 (DAZ) */
        v[i] = (tg_real)ldexpf((float)((int)(r % 2001) - 1000) / 1000.0f, e);
    }
    return v;
}

/* n values over a wide range (lcg_wide) stored as bf16 (b, rounded as
 * tg_to_bf16 rounds, keeping subnormals) and as tg_real (w): with widen,
 * b's values widened (the same operand in either storage), else the
 * values themselves (rounded by the GEMM). Free both. */
typedef struct {
    uint16_t *b;
    tg_real *w;
} bf16_operand;
static inline bf16_operand bf16_operand_new(uint64_t *state, size_t n, bool widen) {
    bf16_operand o = {malloc((n ? n : 1) * sizeof(uint16_t)), lcg_wide(state, n)};
    cr_assert_not_null(o.b);
    for (size_t i = 0; i < n; i++) {
        o.b[i] = tg__bf16_from_float((float)o.w[i]);
        if (widen) o.w[i] = (tg_real)tg__bf16_to_float(o.b[i]);
    }
    return o;
}

/* The bf16 GEMM's engines, each forced in turn by the tests
 * (tg__bf16_engine_force). */
static const char *const ENGINE_NAMES[] = {"portable", "avx512_bf16", "amx_twin", "amx", "fp32"};
#define N_ENGINES (int)(sizeof ENGINE_NAMES / sizeof ENGINE_NAMES[0])

/* Forces the engine; false, said with cr_log_info, when this machine (or
 * build) lacks it: this Criterion exits 1 after any cr_log_warn, which
 * would fail make test on a machine that lacks an engine. */
static inline bool force_engine(const char *name) {
    tg__bf16_engine_force(name);
    const char *runs = tg_bf16_engine().engine;
    if (strcmp(runs, name) != 0) {
        cr_log_info("bf16 engine %s: not on this machine (%s would run); its checks skipped", name, runs);
        return false;
    }
    return true;
}

/* tg_k_gemm and tg_k_gemm_bf16. */
typedef void (*gemm_fn)(bool ta, bool tb, int M, int N, int K, tg_real alpha, const tg_real *A, int lda,
                        const tg_real *B, int ldb, tg_real beta, tg_real *C, int ldc);

/* One product C = alpha * op(A) op(B) + beta * C by gemm, M x N x K, on
 * random operands (A, B, then C) with leading dimensions padded by pad;
 * with nan_c, C's M x N corner holds NaN. C0 is C before the product; C's
 * padding (columns N..ldc) must be untouched. */
typedef struct {
    int lda, ldb, ldc;
    tg_real *A, *B, *C, *C0;
} gemm_operands;

static inline gemm_operands gemm_random_product(uint64_t *state, gemm_fn gemm, bool ta, bool tb, int M, int N, int K,
                                                tg_real alpha, tg_real beta, int pad, bool nan_c) {
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

    gemm(ta, tb, M, N, K, alpha, o.A, o.lda, o.B, o.ldb, beta, o.C, o.ldc);

    for (int i = 0; i < M; i++)
        for (int j = N; j < o.ldc; j++) {
            size_t at = (size_t)i * o.ldc + j;
            cr_assert(memcmp(&o.C[at], &o.C0[at], sizeof *o.C) == 0, "padding of C changed at (%d,%d)", i, j);
        }
    return o;
}

static inline void gemm_operands_free(gemm_operands *o) {
    free(o->A);
    free(o->B);
    free(o->C);
    free(o->C0);
}

/* Same random inputs through gemm on 1 thread, then on 2: every byte of C
 * must agree. */
static inline void gemm_same_for_threads(uint64_t *state, gemm_fn gemm, bool ta, bool tb, int M, int N, int K) {
    tg_real *A = lcg_buf(state, (size_t)M * K), *B = lcg_buf(state, (size_t)K * N);
    tg_real *C1 = lcg_buf(state, (size_t)M * N), *C2 = malloc((size_t)M * N * sizeof *C2);
    cr_assert_not_null(C2);
    memcpy(C2, C1, (size_t)M * N * sizeof *C1);
    int lda = ta ? M : K, ldb = tb ? K : N, saved = tg_get_num_threads();
    tg_set_num_threads(1);
    gemm(ta, tb, M, N, K, (tg_real)0.75, A, lda, B, ldb, (tg_real)0.5, C1, N);
    tg_set_num_threads(2);
    gemm(ta, tb, M, N, K, (tg_real)0.75, A, lda, B, ldb, (tg_real)0.5, C2, N);
    tg_set_num_threads(saved);
    cr_assert(memcmp(C1, C2, (size_t)M * N * sizeof *C1) == 0, "ta=%d tb=%d %dx%dx%d differs between 1 and 2 threads",
              ta, tb, M, N, K);
    free(A);
    free(B);
    free(C1);
    free(C2);
}

#endif
