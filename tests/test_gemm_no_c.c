/* A bf16 product with no C (tg_k_gemm_bf16_no_c, kernels.h) and the bf16
 * Linear forward that runs on it (ops_affine.c):
 *   - where it runs (K in one block of the engine, c_scratch; on the fp32
 *     engine, a product the float GEMM packs, K in one of its blocks) its
 *     outputs Y16 and H16 are those of tg_k_gemm_bf16_mixed
 *     with a C and the same epilogue, bit for bit, with a bias, a
 *     residual and GELU, float or bf16 x, at 1 and 2 threads, on every
 *     bf16 engine this CPU has (hardware AMX and its twin included);
 *   - where it cannot (K past one block, no c_scratch, the fp32 engine on
 *     a product the float GEMM does not pack, an empty product) it returns
 *     false and writes nothing;
 *   - tg_affine_to and tg_affine_gelu_to with a bf16 result over more rows
 *     than a chunk of float C holds (op.h) give the bits of the float
 *     result rounded, for K in one block (one product, no C) and in two
 *     (chunks of C, as before).
 * The float build only: bf16 products keep float sums. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_test_util.h"
#include "tensor/gemm_driver.h" /* tg__gemm_float_row: the products the fp32 engine packs */
#include "tensor/kernels.h"
#include "test_util.h"

static uint64_t lcg_state = 8080; /* gemm_test_util.h */

#define IS_FLOAT (sizeof(tg_real) == 4)

/* One x W^T (M x N x K, x float or bf16) with epilogue variant bits (1
 * GELU, 2 bias, 4 res, 8 H16): no C against C, outputs compared; want:
 * whether no C should run. */
static void check_no_c(const char *engine, int M, int N, int K, int variant, bool x_bf16, bool want) {
    const bool act = variant & 1, has_b = variant & 2, has_r = variant & 4, h16 = variant & 8;
    const size_t nc = (size_t)M * N;
    bf16_operand x = bf16_operand_new(&lcg_state, (size_t)M * K, true);
    tg_real *w = lcg_buf(&lcg_state, (size_t)N * K), *bias = lcg_buf(&lcg_state, (size_t)N);
    tg_real *res = lcg_buf(&lcg_state, nc), *C = malloc(nc * sizeof *C);
    uint16_t *y1 = malloc(nc * 2), *h1 = malloc(nc * 2), *y2 = malloc(nc * 2), *h2 = malloc(nc * 2);
    cr_assert(C && y1 && h1 && y2 && h2);
    for (size_t i = 0; i < nc; i++) y1[i] = h1[i] = y2[i] = h2[i] = 0x1234;
    const void *xp = x_bf16 ? (const void *)x.b : (const void *)x.w;
    tg_gemm_epilogue ep = {.act = TG_UNARY_GELU_TANH,
                           .no_act = !act,
                           .Y16 = y1,
                           .H16 = h16 ? h1 : NULL,
                           .bias = has_b ? bias : NULL,
                           .res = has_r ? res : NULL,
                           .c_scratch = true};
    tg_k_gemm_bf16_mixed(false, true, M, N, K, 1, xp, x_bf16, K, w, false, K, 0, C, N, &ep);
    int saved = tg_get_num_threads();
    for (int nt = 1; nt <= 2; nt++) {
        tg_set_num_threads(nt);
        ep.Y16 = y2;
        ep.H16 = h16 ? h2 : NULL;
        bool ran = tg_k_gemm_bf16_no_c(false, true, M, N, K, xp, x_bf16, K, w, false, K, N, &ep);
        cr_assert(ran == want, "%s %dx%dx%d: no C %s", engine, M, N, K, ran ? "ran" : "declined");
        if (!ran) {
            for (size_t i = 0; i < nc; i++) cr_assert(y2[i] == 0x1234 && h2[i] == 0x1234, "declined, yet wrote");
            continue;
        }
        cr_assert(memcmp(y1, y2, nc * 2) == 0, "%s variant %d %dx%dx%d x_bf16 %d, %d threads: Y16 differs", engine,
                  variant, M, N, K, x_bf16, nt);
        cr_assert(memcmp(h1, h2, nc * 2) == 0, "%s variant %d %dx%dx%d: H16 differs", engine, variant, M, N, K);
        for (size_t i = 0; i < nc; i++) y2[i] = h2[i] = 0x1234;
    }
    tg_set_num_threads(saved);
    free(x.b), free(x.w), free(w), free(bias), free(res), free(C), free(y1), free(h1), free(y2), free(h2);
}

Test(gemm_no_c, the_bits_of_a_product_with_c_on_every_engine) {
    if (!IS_FLOAT) cr_skip_test("float build only");
    for (int e = 0; e < N_ENGINES; e++) {
        if (!force_engine(ENGINE_NAMES[e])) continue;
        bool fp32 = strcmp(ENGINE_NAMES[e], "fp32") == 0;
        /* tails of the 6 x 32 and 32 x 32 tiles; K to the AMX block's 512, and one block on; one
         * product that every float row packs (the fp32 engine's no C, K in its block of 256) */
        static const int shapes[][3] = {{1, 1, 1},      {37, 33, 31},  {70, 100, 256},
                                        {130, 70, 512}, {65, 40, 513}, {300, 260, 256}};
        for (int s = 0; s < 6; s++) {
            int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
            const gemm_engine *row = tg__gemm_float_row(false, true, M, N, K);
            bool want = fp32 ? row && K <= row->kc : K <= (strncmp(ENGINE_NAMES[e], "amx", 3) == 0 ? 512 : 1024);
            for (int variant = 0; variant < 16; variant += 5)
                check_no_c(ENGINE_NAMES[e], M, N, K, variant, s % 2, want);
        }
        check_no_c(ENGINE_NAMES[e], 40, 50, 1100, 15, false, false); /* past every engine's block */
    }
    tg__bf16_engine_force(NULL);
}

Test(gemm_no_c, declines_without_c_scratch_and_when_empty) {
    if (!IS_FLOAT) cr_skip_test("float build only");
    tg_real x[64] = {1}, w[64] = {1};
    uint16_t y[64];
    tg_gemm_epilogue ep = {.no_act = true, .Y16 = y};
    cr_assert(!tg_k_gemm_bf16_no_c(false, true, 4, 4, 4, x, false, 4, w, false, 4, 4, &ep), "ran without c_scratch");
    cr_assert(!tg_k_gemm_bf16_no_c(false, true, 4, 4, 4, x, false, 4, w, false, 4, 4, NULL), "ran without an epilogue");
    ep.c_scratch = true;
    cr_assert(!tg_k_gemm_bf16_no_c(false, true, 4, 4, 0, x, false, 4, w, false, 4, 4, &ep), "ran with K = 0");
    cr_assert(!tg_k_gemm_bf16_no_c(false, true, 0, 4, 4, x, false, 4, w, false, 4, 4, &ep), "ran with M = 0");
}

/* The ops: bf16 y (and gelu's) over 600 rows of 1024 (more than the 512 a
 * chunk of float C holds) equal the float result rounded; K 256 runs with
 * no C, K 600 (two AMX blocks) in chunks. */
static void check_op(int K) {
    tg_rng rng = tg_rng_new(77);
    tg_tensor *x = tg_randn(TG_SHAPE(600, K), &rng), *w = tg_randn(TG_SHAPE(1024, K), &rng);
    tg_tensor *b = tg_randn(TG_SHAPE(1024), &rng);
    tg_scope_begin();
    for (int gelu = 0; gelu <= 1; gelu++) {
        tg_tensor *y32 = gelu ? tg_affine_gelu(x, w, b, true) : tg_affine(x, w, b);
        tg_tensor *y16 = gelu ? tg_affine_gelu_to(x, w, b, true, TG_DTYPE_BF16) : tg_affine_to(x, w, b, TG_DTYPE_BF16);
        TG_REQUIRE(y32);
        TG_REQUIRE(y16);
        uint16_t *want = malloc(sizeof(uint16_t) * (size_t)y32->size);
        cr_assert_not_null(want);
        tg_k_to_bf16(y32->data, want, y32->size);
        cr_assert(memcmp(want, y16->bf16, sizeof(uint16_t) * (size_t)y32->size) == 0,
                  "K %d gelu %d: the bf16 result is not the float one rounded", K, gelu);
        free(want);
    }
    tg_scope_end();
    tg_free(x), tg_free(w), tg_free(b);
}

Test(gemm_no_c, bf16_linear_forward_over_many_rows) {
    if (!IS_FLOAT) cr_skip_test("float build only");
    tg_precision prev = tg_set_precision(TG_PREC_BF16);
    int saved = tg_get_num_threads();
    /* the engine by rate (AMX here), then two others; the twins are the kernel test's (slow at this size) */
    static const char *const engines[] = {NULL, "avx512_bf16", "fp32"};
    for (int e = 0; e < 3; e++) {
        if (engines[e] && !force_engine(engines[e])) continue;
        for (int nt = 1; nt <= 2; nt++) {
            tg_set_num_threads(nt);
            check_op(256);
            check_op(600);
        }
    }
    tg_set_num_threads(saved);
    tg__bf16_engine_force(NULL);
    tg_set_precision(prev);
}
