/* The bf16 GEMM's fp32 engine, which makes no copy of an operand: on the
 * packed path (gemm_bf16_fp32.c) its packers round (or widen) the
 * operands as they pack them, and the float GEMM's row multiplies them;
 * the float GEMM's own loops do the rest. By definition that is tg_k_gemm
 * on copies of the operands rounded as the bf16 GEMM rounds
 * (tg__bf16_round_daz; a bf16 source widened, its subnormals flushed):
 * this checks it bit for bit, at each ISA level it runs at (AVX2,
 * AVX-512: its packers are AVX2's, the rows' slivers 16 and 32 wide;
 * float build only), every transpose, float and bf16 sources, tails of M
 * (not a multiple of the 6-row panel), N (not a multiple of the sliver)
 * and K (not a multiple of 8), several K blocks, 1, 2 and 3 threads, an
 * epilogue, a product without C (tg_k_gemm_bf16_no_c, which the fp32
 * engine now runs where the float GEMM packs), the few-row products that
 * round as they load (gemm.c, few_rows_bf16), and the direct loops on
 * panels and slivers packed that way (gemm.c, direct_bf16). The operands
 * span 2^-24..2^24 with subnormals, and hold NaN, infinities and rounding
 * ties. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_test_util.h"
#include "isa_util.h"
#include "tensor/half.h"
#include "tensor/kernels.h"

static uint64_t lcg_state = 77; /* gemm_test_util.h */

/* v as the bf16 GEMM multiplies it. */
static tg_real rounded(tg_real v) { return (tg_real)tg__bf16_round_daz((float)v); }

/* Values over a wide range, every 97th a NaN, an infinity or a tie
 * (1 + 2^-8: halfway between two bf16 values, rounds to even). */
static tg_real *operand(size_t n) {
    tg_real *v = lcg_wide(&lcg_state, n);
    static const float special[] = {NAN, INFINITY, -INFINITY, 1.00390625f, -1.01171875f};
    for (size_t i = 50; i < n; i += 97) v[i] = (tg_real)special[(i / 97) % 5];
    return v;
}

/* One product, A and B stored as bf16 (srcs bit 0, bit 1) or tg_real,
 * on nt threads, against tg_k_gemm_ep on 1 thread on rounded copies;
 * with ep, GELU's epilogue into Y; with no_c, only Y16 wanted. */
static void fp32_case(bool ta, bool tb, int M, int N, int K, int srcs, int nt, bool ep, bool no_c) {
    const int lda = (ta ? M : K) + 1, ldb = (tb ? K : N) + 3, ldc = N;
    const size_t na = (size_t)(ta ? K : M) * lda, nb = (size_t)(tb ? N : K) * ldb, nc = (size_t)M * ldc;
    tg_real *A = operand(na), *B = operand(nb), *Ar = malloc(na * sizeof(tg_real)), *Br = malloc(nb * sizeof(tg_real));
    uint16_t *A16 = malloc(na * sizeof(uint16_t)), *B16 = malloc(nb * sizeof(uint16_t));
    tg_real *C[2] = {malloc(nc * sizeof(tg_real)), malloc(nc * sizeof(tg_real))};
    uint16_t *Y16[2] = {calloc(nc, sizeof(uint16_t)), calloc(nc, sizeof(uint16_t))};
    cr_assert(A && B && Ar && Br && A16 && B16 && C[0] && C[1] && Y16[0] && Y16[1]);
    /* the reference's copies: each value rounded, a bf16 source's as stored (rounded by storage first) */
    for (size_t i = 0; i < na; i++) {
        A16[i] = tg__bf16_from_float((float)A[i]);
        Ar[i] = rounded(srcs & 1 ? (tg_real)tg__bf16_to_float(A16[i]) : A[i]);
    }
    for (size_t i = 0; i < nb; i++) {
        B16[i] = tg__bf16_from_float((float)B[i]);
        Br[i] = rounded(srcs & 2 ? (tg_real)tg__bf16_to_float(B16[i]) : B[i]);
    }
    for (size_t i = 0; i < nc; i++) C[0][i] = C[1][i] = (tg_real)NAN; /* beta 0: never read */
    tg_gemm_epilogue e[2];
    for (int h = 0; h < 2; h++) e[h] = (tg_gemm_epilogue){.act = TG_UNARY_GELU_TANH, .Y16 = Y16[h], .c_scratch = no_c};
    int saved = tg_get_num_threads();
    tg_set_num_threads(1);
    const tg_real alpha = no_c ? 1 : (tg_real)0.75; /* a product without C has alpha 1 */
    tg_k_gemm_ep(ta, tb, M, N, K, alpha, Ar, lda, Br, ldb, 0, C[0], ldc, ep ? &e[0] : NULL);
    tg_set_num_threads(nt);
    const void *a = srcs & 1 ? (const void *)A16 : A, *b = srcs & 2 ? (const void *)B16 : B;
    if (no_c)
        cr_assert(tg_k_gemm_bf16_no_c(ta, tb, M, N, K, a, srcs & 1, lda, b, srcs & 2, ldb, ldc, &e[1]),
                  "fp32 engine %dx%dx%d: no product without C", M, N, K);
    else
        tg_k_gemm_bf16_mixed(ta, tb, M, N, K, alpha, a, srcs & 1, lda, b, srcs & 2, ldb, 0, C[1], ldc,
                             ep ? &e[1] : NULL);
    tg_set_num_threads(saved);
    for (size_t i = 0; i < nc; i++) {
        cr_assert(no_c || memcmp(&C[0][i], &C[1][i], sizeof(tg_real)) == 0,
                  "isa %d srcs=%d ta=%d tb=%d %dx%dx%d, %d threads: C(%zu,%zu) %a, on rounded copies %a",
                  (int)tg_isa_level(), srcs, ta, tb, M, N, K, nt, i / ldc, i % ldc, (double)C[1][i], (double)C[0][i]);
        cr_assert(Y16[0][i] == Y16[1][i], "isa %d srcs=%d ta=%d tb=%d %dx%dx%d no_c=%d: Y16 differs at %zu",
                  (int)tg_isa_level(), srcs, ta, tb, M, N, K, no_c, i);
    }
    free(A), free(B), free(Ar), free(Br), free(A16), free(B16);
    free(C[0]), free(C[1]), free(Y16[0]), free(Y16[1]);
}

/* Whether the fp32 engine runs at this ISA level (from AVX2 up). */
static bool fp32_runs(void) { return strcmp(tg_bf16_engine().engine, "fp32") == 0; }

/* Each of n shapes {M, N, K} at every transpose, the sources, threads and
 * epilogue varied from one product to the next. */
static void shapes_case(const int (*shapes)[3], size_t n) {
    if (!fp32_runs()) return;
    int run = 0;
    for (size_t s = 0; s < n; s++)
        for (int t = 0; t < 4; t++, run++)
            fp32_case(t & 1, t & 2, shapes[s][0], shapes[s][1], shapes[s][2], run % 4, 1 + run % 3, run % 2, false);
}

/* The packed path: a tail in every dimension, the largest three K blocks
 * (K 700: 256 + 256 + 188) and a K below 512 but M N K above the direct
 * loops'. */
static void packed_shapes(void) {
    static const int packed[][3] = {{301, 257, 259}, {97, 70, 700}, {13, 1003, 600}, {260, 130, 523}};
    shapes_case(packed, sizeof packed / sizeof packed[0]);
}

Test(gemm_bf16_fp32, packed_path_is_tg_k_gemm_on_rounded_copies) {
    if (!force_engine("fp32")) return;
    at_every_isa(packed_shapes);
    tg__bf16_engine_force(NULL);
}

/* Products of a few rows take the float GEMM's few-row loops, which on
 * this engine round (or widen) each operand as they load it (A's values
 * once per group of k, when B is untransposed): the same bits as those
 * loops on rounded copies, for 1 row, an odd count, 16 rows with B
 * transposed (N K above 2^20), K tails (K % 8: 4, 1, 6), N tails (300,
 * 130: not a multiple of 8); A transposed or not; with both transposed
 * the direct loops. */
static void few_rows_shapes(void) {
    static const int few[][3] = {{1, 64, 300}, {3, 300, 257}, {7, 130, 1030}, {16, 1030, 1030}};
    shapes_case(few, sizeof few / sizeof few[0]);
}

Test(gemm_bf16_fp32, few_rows_are_tg_k_gemm_on_rounded_copies) {
    if (!force_engine("fp32")) return;
    at_every_isa(few_rows_shapes);
    tg__bf16_engine_force(NULL);
}

/* Products the float GEMM gives its direct loops (at most 256^3
 * multiply-adds, K <= 512; at AVX-512 40^3): panels of A rounded a chunk
 * of rows at a time (24 rows at K 512, 36 at K 300: several chunks), each
 * sliver of B rounded once a chunk; tails of M, N and K, 1 row and
 * N below a sliver, a window of lm's sampling (64 x 384 x 128). */
static void direct_shapes(void) {
    static const int direct[][3] = {{64, 384, 128}, {200, 40, 300}, {13, 37, 512}, {1, 17, 9}, {30, 30, 30}};
    shapes_case(direct, sizeof direct / sizeof direct[0]);
}

Test(gemm_bf16_fp32, direct_loops_are_tg_k_gemm_on_rounded_copies) {
    if (!force_engine("fp32")) return;
    at_every_isa(direct_shapes);
    tg__bf16_engine_force(NULL);
}

/* Without C (one K block: K <= 256 in the float rows' blocks): the
 * epilogue's Y16 is the one from a product into C. */
static void no_c_shapes(void) {
    if (!fp32_runs()) return;
    for (int t = 0; t < 4; t++) fp32_case(t & 1, t & 2, 301, 257, 250, t, 1 + t % 3, true, true);
}

Test(gemm_bf16_fp32, product_without_c) {
    if (!force_engine("fp32")) return;
    at_every_isa(no_c_shapes);
    tg__bf16_engine_force(NULL);
}
