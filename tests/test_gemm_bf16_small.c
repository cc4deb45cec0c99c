/* The bf16 GEMM's small products (gemm_bf16_small.c) run without the
 * driver and must give exactly its bits: each product here runs twice,
 * on the small path (the default) and forced through gemm_drive
 * (tg__bf16_small_force), and every byte of C and of the epilogue's
 * output must agree. On every engine this machine has (the AMX twin
 * everywhere, the hardware where AMX runs), every transpose, operands
 * stored as float or bf16 (either, both), attention's tile shapes (64 x 64
 * x 32, 64 x 32 x 64) and tails of M, N and K (partial tiles, K not whole
 * chunks), A read in place (bf16, untransposed, K whole chunks, B at most
 * 2 slivers), padded leading dimensions, alpha and beta (beta 0 over NaN,
 * alpha = beta = 1 where the AMX tiles go on from C, alpha != 1 with beta
 * 0 where the AMX tile is scaled in C), the epilogue, 1 and 2 threads.
 * The operands span 2^-24..2^24 with subnormals (lcg_wide): the sums'
 * order and flushes are seen. Both builds. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_test_util.h"
#include "tensor/half.h"
#include "tensor/kernels.h"
#include "tensor/parallel.h"
#include "tensor/simd.h"

static uint64_t lcg_state = 77; /* gemm_test_util.h */

/* C = alpha op(A) op(B) + beta C on the small path (h 1) and through the
 * driver (h 0), the same start; srcs bit 0: A stored as bf16, bit 1: B; on
 * nt threads (0: as set). Returns whether the small path ran. */
static bool small_case(bool ta, bool tb, int M, int N, int K, int srcs, tg_real alpha, tg_real beta, bool ep, int pad,
                       int nt) {
    const int lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
    const size_t nc = (size_t)M * ldc;
    bf16_operand A = bf16_operand_new(&lcg_state, (size_t)(ta ? K : M) * lda, false),
                 B = bf16_operand_new(&lcg_state, (size_t)(tb ? N : K) * ldb, false);
    const void *a = srcs & 1 ? (const void *)A.b : (const void *)A.w, *b = srcs & 2 ? (const void *)B.b : B.w;
    tg_real *C[2], *Y[2];
    long runs[2];
    int saved = tg_get_num_threads();
    if (nt) tg_set_num_threads(nt);
    for (int h = 0; h < 2; h++) {
        C[h] = malloc(nc * sizeof(tg_real)), Y[h] = calloc(nc, sizeof(tg_real));
        cr_assert(C[h] && Y[h]);
        for (size_t i = 0; i < nc; i++)
            C[h][i] = beta == 0 && i % ldc < (size_t)N ? (tg_real)NAN : (tg_real)((int)(i % 7) - 3);
        tg_gemm_epilogue e = {.act = TG_UNARY_GELU_TANH, .Y = Y[h]};
        tg__bf16_small_force(h == 1);
        long before = tg__bf16_small_runs();
        tg_k_gemm_bf16_mixed(ta, tb, M, N, K, alpha, a, srcs & 1, lda, b, srcs & 2, ldb, beta, C[h], ldc,
                             ep ? &e : NULL);
        runs[h] = tg__bf16_small_runs() - before;
    }
    tg__bf16_small_force(true);
    if (nt) tg_set_num_threads(saved);
    cr_assert(runs[0] == 0, "forced through the driver, yet the small path ran");
    for (size_t i = 0; i < nc; i++) {
        cr_assert(memcmp(&C[0][i], &C[1][i], sizeof(tg_real)) == 0,
                  "%s srcs=%d ta=%d tb=%d %dx%dx%d alpha %g beta %g pad %d, %d threads: C(%zu,%zu) small %a, "
                  "driver %a",
                  tg_bf16_engine().engine, srcs, ta, tb, M, N, K, (double)alpha, (double)beta, pad, nt, i / ldc,
                  i % ldc, (double)C[1][i], (double)C[0][i]);
        cr_assert(memcmp(&Y[0][i], &Y[1][i], sizeof(tg_real)) == 0, "%s srcs=%d %dx%dx%d: epilogue differs at %zu",
                  tg_bf16_engine().engine, srcs, M, N, K, i);
    }
    free(A.b), free(A.w), free(B.b), free(B.w);
    free(C[0]), free(C[1]), free(Y[0]), free(Y[1]);
    return runs[1] > 0;
}

/* {M, N, K, pad}: one element; tails; attention's tiles (scores 64 x 64 x
 * 32, the products into its accumulators 64 x 32 x 64), whole AMX tiles
 * (32 x 32 x 32), M past one panel with a tail (70, 100), K a whole AMX
 * block (512), 128 x 64 x 32 (64^3 multiply-adds: the most the driver
 * leaves to one thread), and K deeper than an AMX block (600: the driver
 * on both runs under AMX). */
static const int SHAPES[][4] = {{1, 1, 1, 0},      {5, 7, 3, 1},    {64, 64, 32, 0},  {64, 32, 64, 0},
                                {32, 32, 32, 0},   {33, 31, 33, 1}, {37, 60, 64, 3},  {70, 45, 96, 1},
                                {100, 40, 512, 0}, {31, 96, 17, 2}, {128, 64, 32, 0}, {20, 30, 600, 1}};
/* {alpha, beta}: beta 0 over NaN with alpha 1 and not; C += AB; both. */
static const double SCALES[][2] = {{1, 0}, {0.125, 0}, {1, 1}, {0.75, 0.5}};

Test(gemm_bf16_small, same_bits_as_the_driver) {
    for (int e = 0; e < N_ENGINES; e++) {
        if (strcmp(ENGINE_NAMES[e], "fp32") == 0 || !force_engine(ENGINE_NAMES[e])) continue; /* fp32: no driver */
        int run = 0, small = 0;
        for (size_t s = 0; s < sizeof SHAPES / sizeof SHAPES[0]; s++)
            for (int t = 0; t < 4; t++)
                for (int srcs = 0; srcs < 4; srcs++)
                    for (size_t a = 0; a < sizeof SCALES / sizeof SCALES[0]; a++, run++) {
                        const int *sh = SHAPES[s];
                        int nt = run % 5 == 4 ? 2 : 1;
                        bool ran = small_case(t & 1, t & 2, sh[0], sh[1], sh[2], srcs, (tg_real)SCALES[a][0],
                                              (tg_real)SCALES[a][1], run % 3 == 0, sh[3], nt);
                        /* one thread and one K block (the AMX engines' 512, the others' 1024): always small */
                        if (nt == 1 && sh[2] <= 512)
                            cr_assert(ran, "%s %dx%dx%d: the small path did not run", ENGINE_NAMES[e], sh[0], sh[1],
                                      sh[2]);
                        small += ran;
                    }
        cr_log_info("%s: %d of %d products on the small path", ENGINE_NAMES[e], small, run);
    }
    tg__bf16_engine_force(NULL);
}

/* Inside a parallel region every product is one thread's, whatever its
 * size: the small path there too (a 128 x 128 x 64 product, above the
 * driver's parallel threshold), the driver's bits. On the engine this
 * machine picks, or the portable one where that is the fp32 engine
 * (which has no small path: an AVX2-only CPU). */
static void region_product(void *ctx, int tid, int nth) {
    (void)nth;
    if (tid == 0) *(bool *)ctx = small_case(false, true, 128, 128, 64, 3, (tg_real)0.125, 0, false, 0, 0);
}

Test(gemm_bf16_small, inside_a_parallel_region) {
    bool ran = false;
    int saved = tg_get_num_threads();
    if (strcmp(tg_bf16_engine().engine, "fp32") == 0) tg__bf16_engine_force("portable");
    tg_set_num_threads(2);
    tg_parallel_team(true, region_product, &ran);
    tg_set_num_threads(saved);
    tg__bf16_engine_force(NULL);
    cr_assert(ran, "a product inside a parallel region did not take the small path");
}

/* The AMX hardware's whole tiles with beta 0 go to C straight and are
 * scaled there when alpha is not 1 (gemm_bf16.c, tile_amx), where the
 * twin's go through store_tile: the same bits, on attention's shapes and
 * tails, every transpose and source, beta 0 (over NaN) and not. */
Test(gemm_bf16_small, amx_tiles_scaled_in_c_equal_the_twin) {
    if (!tg_cpu_has_amx() || tg_isa_level() < TG_ISA_AMX) cr_skip_test("no AMX here (the twin's tests ran)");
    static const int s[][3] = {{64, 64, 32}, {32, 32, 32}, {64, 32, 64}, {70, 45, 96}, {96, 64, 600}};
    static const double scales[][2] = {{0.125, 0}, {-3, 0}, {1, 0}, {0.125, 1}};
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
        for (int t = 0; t < 4; t++)
            for (int srcs = 0; srcs < 4; srcs++)
                for (size_t a = 0; a < sizeof scales / sizeof scales[0]; a++) {
                    const int M = s[i][0], N = s[i][1], K = s[i][2];
                    const bool ta = t & 1, tb = t & 2;
                    const tg_real alpha = (tg_real)scales[a][0], beta = (tg_real)scales[a][1];
                    bf16_operand A = bf16_operand_new(&lcg_state, (size_t)M * K, false),
                                 B = bf16_operand_new(&lcg_state, (size_t)K * N, false);
                    const void *pa = srcs & 1 ? (const void *)A.b : (const void *)A.w;
                    const void *pb = srcs & 2 ? (const void *)B.b : (const void *)B.w;
                    tg_real *C[2];
                    for (int h = 0; h < 2; h++) {
                        C[h] = malloc((size_t)M * N * sizeof(tg_real));
                        cr_assert_not_null(C[h]);
                        for (int k = 0; k < M * N; k++) C[h][k] = beta == 0 ? (tg_real)NAN : (tg_real)(k % 5 - 2);
                        tg__bf16_engine_force(h ? "amx" : "amx_twin");
                        tg_k_gemm_bf16_mixed(ta, tb, M, N, K, alpha, pa, srcs & 1, ta ? M : K, pb, srcs & 2, tb ? K : N,
                                             beta, C[h], N, NULL);
                    }
                    tg__bf16_engine_force(NULL);
                    for (int k = 0; k < M * N; k++)
                        cr_assert(memcmp(&C[0][k], &C[1][k], sizeof(tg_real)) == 0,
                                  "srcs=%d ta=%d tb=%d %dx%dx%d alpha %g beta %g: C(%d,%d) AMX %a, twin %a", srcs, ta,
                                  tb, M, N, K, (double)alpha, (double)beta, k / N, k % N, (double)C[1][k],
                                  (double)C[0][k]);
                    free(A.b), free(A.w), free(B.b), free(B.w), free(C[0]), free(C[1]);
                }
}
