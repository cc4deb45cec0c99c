/* tg_k_gemm_bf16_mixed: the bf16 GEMM on operands stored as bf16 (either,
 * or both) gives exactly the bits of tg_k_gemm_bf16_ep on the operands
 * widened to tg_real, on every engine this machine has (gemm_test_util.h:
 * force_engine), every transpose, mixed and bf16 sources, tails of M
 * (fewer than a panel's rows), N and K (K not a multiple of 32, odd K),
 * several K blocks, padded (odd) leading dimensions, alpha and beta (beta 0
 * over NaN, and alpha = beta = 1, where the AMX tiles go on from C), the
 * epilogue, 1, 2, 3 and 7 threads. The operands span 2^-24..2^24 with bf16
 * subnormals among them (lcg_wide, rounded to bf16 as storage rounds,
 * which keeps subnormals): the packers' flush of a bf16 source must be the
 * float path's. K a multiple of 32 with A untransposed and bf16 and B at
 * most 2 slivers (64 columns) wide is the AMX engines' in-place path
 * (tiles loaded from A, gemm_bf16.c: amx_a_direct), so there the
 * comparison is the in-place path against the packed one.
 * Both builds: in the double build the widened copies are doubles. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_test_util.h"
#include "tensor/half.h"
#include "tensor/kernels.h"

static uint64_t lcg_state = 31; /* gemm_test_util.h */

/* One product: srcs bit 0, A stored as bf16; bit 1, B. C starts as NaN
 * when beta is 0 (never read), else as values; the epilogue (GELU tanh)
 * when ep. The reference on 1 thread, the mixed product on nt. */
static void mixed_case(bool ta, bool tb, int M, int N, int K, int srcs, tg_real alpha, tg_real beta, bool ep, int pad,
                       int nt) {
    const int lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
    const size_t na = (size_t)(ta ? K : M) * lda, nb = (size_t)(tb ? N : K) * ldb, nc = (size_t)M * ldc;
    bf16_operand A = bf16_operand_new(&lcg_state, na, true), B = bf16_operand_new(&lcg_state, nb, true);
    tg_real *C[2], *Y[2];
    for (int h = 0; h < 2; h++) {
        C[h] = malloc(nc * sizeof(tg_real)), Y[h] = malloc(nc * sizeof(tg_real));
        cr_assert(C[h] && Y[h]);
        for (size_t i = 0; i < nc; i++) C[h][i] = beta == 0 ? (tg_real)NAN : (tg_real)((int)(i % 7) - 3);
        memset(Y[h], 0, nc * sizeof(tg_real));
    }
    tg_gemm_epilogue e0 = {.act = TG_UNARY_GELU_TANH, .Y = Y[0]}, e1 = {.act = TG_UNARY_GELU_TANH, .Y = Y[1]};
    int saved = tg_get_num_threads();
    tg_set_num_threads(1);
    tg_k_gemm_bf16_ep(ta, tb, M, N, K, alpha, A.w, lda, B.w, ldb, beta, C[0], ldc, ep ? &e0 : NULL);
    tg_set_num_threads(nt);
    const void *a = srcs & 1 ? (const void *)A.b : (const void *)A.w, *b = srcs & 2 ? (const void *)B.b : B.w;
    tg_k_gemm_bf16_mixed(ta, tb, M, N, K, alpha, a, srcs & 1, lda, b, srcs & 2, ldb, beta, C[1], ldc, ep ? &e1 : NULL);
    tg_set_num_threads(saved);
    for (size_t i = 0; i < nc; i++) {
        cr_assert(memcmp(&C[0][i], &C[1][i], sizeof(tg_real)) == 0,
                  "%s srcs=%d ta=%d tb=%d %dx%dx%d pad %d, %d threads: C(%zu,%zu) mixed %a, widened %a",
                  tg_bf16_engine().engine, srcs, ta, tb, M, N, K, pad, nt, i / ldc, i % ldc, (double)C[1][i],
                  (double)C[0][i]);
        cr_assert(memcmp(&Y[0][i], &Y[1][i], sizeof(tg_real)) == 0, "%s srcs=%d %dx%dx%d: epilogue differs at %zu",
                  tg_bf16_engine().engine, srcs, M, N, K, i);
    }
    free(A.b), free(A.w), free(B.b), free(B.w);
    free(C[0]), free(C[1]), free(Y[0]), free(Y[1]);
}

/* {M, N, K, pad}: small and odd; M below a panel; K tails (33, odd); whole
 * chunks of 32 with N at most 64 (the AMX in-place A path) with an M tail
 * (70 = 2 x 32 + 6) and odd leading dimensions, and with N 130 (packed); few rows (a column split); two K blocks of 512
 * (in place) and three of 366-367 (packed). */
static const int SHAPES[][4] = {{5, 7, 3, 0},      {13, 40, 33, 1},  {37, 60, 64, 3},   {70, 45, 96, 1},
                                {100, 130, 64, 0}, {3, 600, 256, 1}, {33, 50, 1024, 1}, {40, 33, 1100, 0}};
static const int THREADS[] = {1, 2, 3, 7};

Test(gemm_bf16_mixed, every_engine_equals_widened_operands) {
    int run = 0;
    for (int e = 0; e < N_ENGINES; e++) {
        if (!force_engine(ENGINE_NAMES[e])) continue;
        for (size_t s = 0; s < sizeof SHAPES / sizeof SHAPES[0]; s++)
            for (int t = 0; t < 4; t++)
                for (int srcs = 1; srcs <= 3; srcs++, run++) {
                    const int *sh = SHAPES[s];
                    tg_real alpha = run % 3 == 0 ? 1 : (tg_real)0.75, beta = run % 3 == 0 ? 1 : run % 3 == 1 ? 0 : 2;
                    mixed_case(t & 1, t & 2, sh[0], sh[1], sh[2], srcs, alpha, beta, run % 2, sh[3], THREADS[run % 4]);
                }
    }
    tg__bf16_engine_force(NULL);
}

/* A bf16 subnormal is a zero in the products, as the float path's rounding
 * makes a float subnormal (DAZ): against 2^126 it would otherwise give
 * 2^-7 and up to 1. C must be exactly the one normal product, 1 * 1, on every
 * engine, A and B stored as bf16 alone or together, every transpose (the
 * operands are symmetric in layout: one row of A, one column of B). */
Test(gemm_bf16_mixed, bf16_subnormals_count_as_zero) {
    enum { K = 64 }; /* whole chunks: the AMX engines read A in place */
    uint16_t a16[K], b16[K];
    tg_real a[K], b[K];
    for (int k = 0; k < K; k++) {
        static const uint16_t sub[] = {0x0001, 0x807F, 0x0040, 0x8001};
        a16[k] = k == 5 ? 0x3F80 : sub[k % 4];                /* 1.0 at k = 5, subnormals elsewhere */
        b16[k] = k == 5 ? 0x3F80 : (k % 3 ? 0x7E80 : 0x0003); /* 1.0, 2^126, or a subnormal */
        a[k] = (tg_real)tg__bf16_to_float(a16[k]), b[k] = (tg_real)tg__bf16_to_float(b16[k]);
    }
    for (int e = 0; e < N_ENGINES; e++) {
        if (!force_engine(ENGINE_NAMES[e])) continue;
        for (int srcs = 1; srcs <= 3; srcs++)
            for (int t = 0; t < 4; t++) {
                tg_real c = -7;
                bool ta = t & 1, tb = t & 2;
                /* A is 1 x K (untransposed: lda K; transposed: K x 1, lda 1), B is K x 1 likewise */
                tg_k_gemm_bf16_mixed(ta, tb, 1, 1, K, 1, srcs & 1 ? (const void *)a16 : a, srcs & 1, ta ? 1 : K,
                                     srcs & 2 ? (const void *)b16 : b, srcs & 2, tb ? K : 1, 0, &c, 1, NULL);
                cr_assert(c == 1, "%s srcs=%d ta=%d tb=%d: C = %a, want 1 (bf16 subnormals as zero)", ENGINE_NAMES[e],
                          srcs, ta, tb, (double)c);
            }
    }
    tg__bf16_engine_force(NULL);
}

/* Nothing to multiply (K 0 or alpha 0): C = beta * C and the epilogue, as
 * tg_k_gemm_bf16_ep, and the operands are not read (NULL here). */
Test(gemm_bf16_mixed, k_zero_scales_c) {
    tg_real c[4] = {1, 2, 3, 4}, y[4];
    tg_gemm_epilogue ep = {.act = TG_UNARY_RELU, .Y = y};
    tg_k_gemm_bf16_mixed(false, false, 2, 2, 0, 1, NULL, true, 1, NULL, true, 2, -1, c, 2, &ep);
    cr_assert(c[0] == -1 && c[3] == -4 && y[0] == 0 && y[3] == 0);
}
