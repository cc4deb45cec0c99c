/* tg_k_gemm_bf16 and the 16-bit conversions of tensor/half.h.
 *
 * The product is checked at every ISA level this CPU has (tg__isa_cap: the
 * portable loop built for the baseline, AVX2 and AVX-512, and vdpbf16ps)
 * against two references:
 *   - the scalar one: operands rounded to bf16, products summed in double;
 *     the kernel may differ only by float summation, a few ulps of the sum
 *     of |terms| (the forward error bound of a length-K dot product);
 *   - the float product: bf16 rounds each operand by at most 2^-9 relative,
 *     so a product by at most about 2^-8; the sum of |terms| times that
 *     bounds the difference.
 * Plus all transposes, odd K (the zero-padded last pair), padded leading
 * dimensions, beta == 0 over NaN, K over several blocks, and bit-identical
 * results for 1 and 2 threads. In the double build (the suite compiles
 * every test file) the operands are rounded to float, then to bf16, and
 * the float sums are stored as double: the same checks hold. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/half.h"
#include "gemm_test_util.h"
#include "tensor/kernels.h"
#include "tensor/simd.h"
#include "tensor/amx.h"
#include "tensor/tensor_internal.h" /* tg__isa_cap, tg__bf16_engine_force */

static uint64_t lcg_state = 777; /* gemm_test_util.h */

#define EPS_F 1.1920929e-07

/* One product against both references; C's padding must stay untouched. */
static void check(bool ta, bool tb, int M, int N, int K, tg_real alpha, tg_real beta, int pad, bool nan_c) {
    gemm_operands o = gemm_random_product(&lcg_state, tg_k_gemm_bf16, ta, tb, M, N, K, alpha, beta, pad, nan_c);
    const int lda = o.lda, ldb = o.ldb, ldc = o.ldc;
    const tg_real *A = o.A, *B = o.B, *C0 = o.C0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            tg_real got = o.C[(size_t)i * ldc + j];
            double s16 = 0, s32 = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                tg_real a = ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
                tg_real b = tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j];
                s16 += (double)tg__bf16_round_daz((float)a) * tg__bf16_round_daz((float)b);
                s32 += (double)a * b;
                mag += fabs((double)a * b);
            }
            double c0 = beta == 0 ? 0 : C0[(size_t)i * ldc + j];
            double want16 = alpha * s16 + beta * c0, want32 = alpha * s32 + beta * c0;
            double tol16 = 4 * EPS_F * ((K + 2) * fabs(alpha) * mag * 1.01 + fabs(beta * c0)) + 1e-30;
            double tol32 = tol16 + 2 * 0x1p-8 * fabs(alpha) * mag * 1.01;
            cr_assert(isfinite(got) && fabs(got - want16) <= tol16,
                      "ta=%d tb=%d M=%d N=%d K=%d alpha=%g beta=%g: C(%d,%d) = %.9g, bf16 reference %.9g (tol %.3g)",
                      ta, tb, M, N, K, (double)alpha, (double)beta, i, j, (double)got, want16, tol16);
            cr_assert(fabs(got - want32) <= tol32,
                      "ta=%d tb=%d M=%d N=%d K=%d: C(%d,%d) = %.9g, float product %.9g (tol %.3g)", ta, tb, M, N, K, i,
                      j, (double)got, want32, tol32);
        }
    gemm_operands_free(&o);
}

static void cases(void) {
    static const int s[][3] = {
        {1, 1, 1},   {5, 7, 3},     {16, 16, 16},    {6, 32, 2},     {37, 33, 31},
        {13, 11, 7}, {64, 64, 65},  {255, 257, 129}, {130, 70, 300}, {4, 4200, 60},
        {9, 8, 1},   {600, 3, 257}, {7, 33, 1025},   {3, 50, 1100},  {5, 40, 2100}, /* three K blocks */
    };
    for (int t = 0; t < 4; t++)
        for (size_t i = 0; i < sizeof s / sizeof s[0]; i++) {
            check(t & 1, t & 2, s[i][0], s[i][1], s[i][2], 1, 0, 0, false);
            check(t & 1, t & 2, s[i][0], s[i][1], s[i][2], (tg_real)-0.5, 2, 3, false);
            check(t & 1, t & 2, s[i][0], s[i][1], s[i][2], 1, 0, 1, true);
        }
}

/* Every level up to the CPU's: capping above what the CPU has runs the
 * CPU's widest again, which is harmless. */
Test(gemm_bf16, every_isa_level_against_references) {
    for (int cap = TG_ISA_PORTABLE; cap <= TG_ISA_AMX; cap++) {
        int old = tg__isa_cap(cap);
        cases();
        tg__isa_cap(old);
    }
}

Test(gemm_bf16, k_zero_and_alpha_zero_scale_c) {
    tg_real a[4] = {1, 2, 3, 4}, c[4] = {5, 6, 7, 8};
    tg_k_gemm_bf16(false, false, 2, 2, 0, 1, a, 2, a, 2, (tg_real)0.5, c, 2);
    cr_assert(c[0] == (tg_real)2.5 && c[3] == 4);
    tg_k_gemm_bf16(false, false, 2, 2, 2, 0, a, 2, a, 2, 2, c, 2);
    cr_assert(c[0] == 5 && c[3] == 8);
    tg_k_gemm_bf16(false, false, 0, 2, 2, 1, a, 2, a, 2, 0, c, 2); /* M == 0: nothing */
    cr_assert(c[0] == 5);
}

/* Operands exactly representable in bf16 with small integer products: every
 * path, every summation order gives the exact integer result. */
Test(gemm_bf16, exact_on_bf16_integers) {
    enum { M = 20, N = 40, K = 33 };
    tg_real A[M * K], B[K * N], C[M * N];
    for (int i = 0; i < M * K; i++) A[i] = (tg_real)(i % 7 - 3);
    for (int i = 0; i < K * N; i++) B[i] = (tg_real)(i % 5 - 2) * (tg_real)0.5;
    for (int cap = TG_ISA_PORTABLE; cap <= TG_ISA_AMX; cap++) {
        int old = tg__isa_cap(cap);
        tg_k_gemm_bf16(false, false, M, N, K, 1, A, K, B, N, 0, C, N);
        tg__isa_cap(old);
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double s = 0;
                for (int k = 0; k < K; k++) s += (double)A[i * K + k] * B[k * N + j];
                cr_assert(C[i * N + j] == (tg_real)s, "cap %d: C(%d,%d) = %g, want %g", cap, i, j, (double)C[i * N + j],
                          s);
            }
    }
}

/* A times the identity is A as the GEMM rounds it, exactly, on every path
 * (one nonzero term per sum): the packers' rounding, hardware conversion or
 * formula, over floats of every magnitude, subnormals (flushed to zero) and
 * zeros, against tg__bf16_from_bits_daz. */
Test(gemm_bf16, packing_rounds_like_the_scalar_formula) {
    enum { M = 37, K = 40 };
    static tg_real A[M * K], I[K * K], C[M * K];
    for (int i = 0; i < M * K; i++) {
        uint32_t x;
        do {
            x = (uint32_t)(lcg_next(&lcg_state) >> 32);
            if (i % 5 == 0) x &= 0x807FFFFFu;                                          /* a subnormal or a zero */
        } while ((x & 0x7F800000u) == 0x7F800000u || (x & 0x7F800000u) > 0x5E800000u); /* finite, no overflow */
        A[i] = (tg_real)tg__bits_float(x);
    }
    for (int k = 0; k < K; k++)
        for (int j = 0; j < K; j++) I[k * K + j] = k == j;
    for (int cap = TG_ISA_PORTABLE; cap <= TG_ISA_AMX; cap++)
        for (int t = 0; t < 2; t++) { /* A and A^T read: both packers */
            int old = tg__isa_cap(cap);
            if (t == 0)
                tg_k_gemm_bf16(false, false, M, K, K, 1, A, K, I, K, 0, C, K);
            else /* C = (A^T)^T I with A^T stored: the transposed packer */
            {
                static tg_real At[K * M];
                for (int i = 0; i < M; i++)
                    for (int k = 0; k < K; k++) At[k * M + i] = A[i * K + k];
                tg_k_gemm_bf16(true, false, M, K, K, 1, At, M, I, K, 0, C, K);
            }
            tg__isa_cap(old);
            for (int i = 0; i < M * K; i++) {
                float want = tg__bf16_round_daz((float)A[i]);
                cr_assert(C[i] == (tg_real)want, /* a zero's sign is lost in the sum (+0 + -0) */
                          "cap %d t %d: A[%d] = %a packs to %a, want %a", cap, t, i, (double)A[i], (double)C[i],
                          (double)want);
            }
        }
}

static void same_for_threads(bool ta, bool tb, int M, int N, int K) {
    gemm_same_for_threads(&lcg_state, tg_k_gemm_bf16, ta, tb, M, N, K);
}

Test(gemm_bf16, bit_identical_across_thread_counts) {
    for (int cap = TG_ISA_PORTABLE; cap <= TG_ISA_AMX; cap++) {
        int old = tg__isa_cap(cap);
        for (int t = 0; t < 4; t++) {
            same_for_threads(t & 1, t & 2, 300, 257, 129);
            same_for_threads(t & 1, t & 2, 97, 700, 1030);
            same_for_threads(t & 1, t & 2, 64, 64, 65);
            same_for_threads(t & 1, t & 2, 3, 2000, 300);  /* few rows: the threads split the columns */
            same_for_threads(t & 1, t & 2, 18, 700, 1100); /* 3 row tiles: by columns, two K blocks */
        }
        tg__isa_cap(old);
    }
}

/* A product of few row tiles splits B's slivers among the threads
 * (gemm_split_choose, as tg_k_gemm): every column right against both
 * references at 2 threads, at every ISA level; one row, a panel whose last
 * sliver is partial, padded operands, several K blocks, N past one panel. */
Test(gemm_bf16, few_rows_split_by_columns) {
    int saved = tg_get_num_threads();
    tg_set_num_threads(2);
    for (int cap = TG_ISA_PORTABLE; cap <= TG_ISA_AMX; cap++) {
        int old = tg__isa_cap(cap);
        for (int t = 0; t < 4; t++) {
            check(t & 1, t & 2, 1, 1000, 300, (tg_real)0.75, (tg_real)0.5, 0, false);
            check(t & 1, t & 2, 5, 1037, 70, 1, 0, 3, false);
            check(t & 1, t & 2, 18, 300, 2100, -1, 0, 1, true);
            check(t & 1, t & 2, 2, 4200, 40, 1, 0, 0, false);
        }
        tg__isa_cap(old);
    }
    tg_set_num_threads(saved);
}

/* ---- the engines (tg__bf16_engine_force) ---------------------------------------
 * Each engine forced in turn (gemm_test_util.h: force_engine): the AMX
 * twin (plain C) runs everywhere, the others where this machine has them;
 * an engine it lacks is said and skipped. */
Test(gemm_bf16, every_engine_against_references) {
    int saved = tg_get_num_threads();
    for (int e = 0; e < N_ENGINES; e++) {
        if (!force_engine(ENGINE_NAMES[e])) continue;
        tg_set_num_threads(3); /* 1 thread: every_engine_same_bits_at_1_2_3_threads */
        cases();
        tg_set_num_threads(2);
        for (int t = 0; t < 4; t++) { /* few rows: split by columns */
            check(t & 1, t & 2, 1, 1000, 300, (tg_real)0.75, (tg_real)0.5, 0, false);
            check(t & 1, t & 2, 18, 300, 2100, -1, 0, 1, true);
        }
    }
    tg__bf16_engine_force(NULL);
    tg_set_num_threads(saved);
}

/* One product at 1, 2 and 3 threads: the same bits. */
static void same_at_1_2_3(bool ta, bool tb, int M, int N, int K) {
    tg_real *A = lcg_buf(&lcg_state, (size_t)M * K), *B = lcg_buf(&lcg_state, (size_t)K * N);
    tg_real *C[3];
    int lda = ta ? M : K, ldb = tb ? K : N, saved = tg_get_num_threads();
    for (int nt = 1; nt <= 3; nt++) {
        C[nt - 1] = calloc((size_t)M * N, sizeof(tg_real));
        cr_assert_not_null(C[nt - 1]);
        tg_set_num_threads(nt);
        tg_k_gemm_bf16(ta, tb, M, N, K, (tg_real)0.75, A, lda, B, ldb, 0, C[nt - 1], N);
    }
    tg_set_num_threads(saved);
    for (int nt = 2; nt <= 3; nt++)
        cr_assert(memcmp(C[0], C[nt - 1], (size_t)M * N * sizeof(tg_real)) == 0,
                  "%s ta=%d tb=%d %dx%dx%d: %d threads differ from 1", tg_bf16_engine().engine, ta, tb, M, N, K, nt);
    free(A), free(B), free(C[0]), free(C[1]), free(C[2]);
}

Test(gemm_bf16, every_engine_same_bits_at_1_2_3_threads) {
    for (int e = 0; e < N_ENGINES; e++) {
        if (!force_engine(ENGINE_NAMES[e])) continue;
        for (int t = 0; t < 4; t++) {
            same_at_1_2_3(t & 1, t & 2, 300, 257, 129);
            same_at_1_2_3(t & 1, t & 2, 97, 700, 1030);
            same_at_1_2_3(t & 1, t & 2, 3, 2000, 300);
            same_at_1_2_3(t & 1, t & 2, 40, 130, 1100);
        }
    }
    tg__bf16_engine_force(NULL);
}

/* tdpbf16ps's order (gemm_bf16.c): per element, the even products and the
 * odd ones in two float sums, added at the end. Pairs (2^24, 1), (-2^24, 1):
 * even 2^24 - 2^24 = 0, odd 1 + 1 = 2, C = 2; vdpbf16ps's one chain (odd,
 * then even, per pair) loses each 1 against 2^24 and gives 0. And its
 * flush: a product of 2^-70 and 2^-60 is a float subnormal, so zero (FTZ),
 * where the float GEMM keeps 2^-130. */
static void amx_order_and_flush(const char *engine) {
    tg__bf16_engine_force(engine);
    tg_real a[4] = {0x1p12f, 1, -0x1p12f, 1}, b[4] = {0x1p12f, 1, 0x1p12f, 1}, c = -7;
    tg_k_gemm_bf16(false, true, 1, 1, 4, 1, a, 4, b, 4, 0, &c, 1);
    cr_assert(c == 2, "%s: C = %g, want 2 (the even and odd sums apart)", engine, (double)c);
    tg_real x = (tg_real)0x1p-70f, y = (tg_real)0x1p-60f;
    tg_k_gemm_bf16(false, false, 1, 1, 1, 1, &x, 1, &y, 1, 0, &c, 1);
    cr_assert(c == 0, "%s: 2^-70 * 2^-60 = %g, want 0 (flushed)", engine, (double)c);
    tg__bf16_engine_force(NULL);
}

Test(gemm_bf16, amx_twin_sums_and_flushes_as_tdpbf16ps) { amx_order_and_flush("amx_twin"); }

Test(gemm_bf16, vdpbf16ps_order_differs_from_tdpbf16ps) {
    if (!force_engine("portable")) return;
    tg_real a[4] = {0x1p12f, 1, -0x1p12f, 1}, b[4] = {0x1p12f, 1, 0x1p12f, 1}, c = -7;
    tg_k_gemm_bf16(false, true, 1, 1, 4, 1, a, 4, b, 4, 0, &c, 1);
    tg__bf16_engine_force(NULL);
    cr_assert(c == 0, "portable (vdpbf16ps's order): C = %g, want 0", (double)c);
}

/* The hardware kernel against its twin, bit for bit, where AMX runs: every
 * transpose, tails of M, N and K (K not a multiple of 32, odd K), several K
 * blocks, few rows, alpha and beta, an epilogue, 1 and 3 threads; operands
 * over a wide range of magnitudes with bf16 subnormals among them, so
 * that the order of the sums and the flushes are exercised. */
static tg_real *wide_values(size_t n) { return lcg_wide(&lcg_state, n); }

/* Whether the hardware kernel can run: the CPU and Linux allow it, and
 * TG_ISA does not cap the level below it (TG_ISA=avx512_bf16 on an AMX
 * machine runs the other engines, and the tests that ask for AMX skip). */
static bool amx_runs(void) { return tg_cpu_has_amx() && tg_isa_level() >= TG_ISA_AMX; }
static const char *amx_why_not(void) {
    return tg_cpu_has_amx() ? "TG_ISA caps the level below amx" : tg__amx_why_not();
}

Test(gemm_bf16, amx_hardware_equals_twin_bit_for_bit) {
    if (!amx_runs()) {
        cr_log_info("AMX hardware kernel not tested: %s (the twin's tests ran)", amx_why_not());
        cr_skip_test("no AMX here: %s", amx_why_not());
    }
    /* the fourth column: alpha = beta = 1, where the tiles' sums go on
     * from C's values (gemm_bf16.c, tile_amx), C holding float subnormals;
     * short K with narrow B (1 x 1 x 1, 64 x 96 x 64) loads B's tiles
     * plainly, the rest with the T1 hint (amx_stream_b): the same bits */
    static const int s[][4] = {{1, 1, 1, 0},       {5, 7, 3, 1},       {32, 32, 32, 0},   {33, 31, 33, 1},
                               {64, 96, 64, 0},    {37, 33, 31, 0},    {3, 2000, 300, 0}, {255, 257, 129, 0},
                               {130, 70, 1100, 0}, {97, 700, 2100, 0}, {96, 64, 1500, 1}, {70, 45, 1100, 1}};
    int saved = tg_get_num_threads();
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
        for (int t = 0; t < 4; t++)
            for (int nt = 1; nt <= 3; nt += 2) {
                bool ta = t & 1, tb = t & 2;
                int M = s[i][0], N = s[i][1], K = s[i][2];
                tg_real *A = wide_values((size_t)M * K), *B = wide_values((size_t)K * N);
                tg_real *C[2], *Y[2];
                tg_set_num_threads(nt);
                for (int h = 0; h < 2; h++) {
                    tg__bf16_engine_force(h ? "amx" : "amx_twin");
                    C[h] = malloc((size_t)M * N * sizeof(tg_real)), Y[h] = malloc((size_t)M * N * sizeof(tg_real));
                    cr_assert(C[h] && Y[h]);
                    for (int k = 0; k < M * N; k++) C[h][k] = k % 13 ? (tg_real)(k % 7) - 3 : (tg_real)0x1p-130f;
                    tg_gemm_epilogue ep = {.act = TG_UNARY_GELU_TANH, .Y = Y[h]};
                    tg_real alpha = s[i][3] ? 1 : (tg_real)0.75, beta = s[i][3] ? 1 : (tg_real)0.5;
                    tg_k_gemm_bf16_ep(ta, tb, M, N, K, alpha, A, ta ? M : K, B, tb ? K : N, beta, C[h], N,
                                      i % 2 ? &ep : NULL);
                }
                tg__bf16_engine_force(NULL);
                for (int k = 0; k < M * N; k++) {
                    cr_assert(memcmp(&C[0][k], &C[1][k], sizeof(tg_real)) == 0,
                              "ta=%d tb=%d %dx%dx%d, %d threads: C(%d,%d) AMX %a, twin %a", ta, tb, M, N, K, nt, k / N,
                              k % N, (double)C[1][k], (double)C[0][k]);
                    if (i % 2) cr_assert(memcmp(&Y[0][k], &Y[1][k], sizeof(tg_real)) == 0, "epilogue differs at %d", k);
                }
                free(A), free(B), free(C[0]), free(C[1]), free(Y[0]), free(Y[1]);
            }
    tg_set_num_threads(saved);
}

Test(gemm_bf16, amx_hardware_sums_and_flushes_as_tdpbf16ps) {
    if (!amx_runs()) cr_skip_test("no AMX here: %s", amx_why_not());
    amx_order_and_flush("amx");
}

/* The engine by rate: where AMX runs it is the choice (measured some 10x
 * the FMA units'); capped below it, the faster of vdpbf16ps and the float
 * FMA; and the reported peak is the engine's measured rate. */
Test(gemm_bf16, engine_chosen_by_measured_rate) {
    tg__bf16_engine_force(NULL);
    tg_bf16_engine_info info = tg_bf16_engine();
    cr_assert(info.engine != NULL);
    if (tg_cpu_has_amx() && tg_isa_level() >= TG_ISA_AMX) {
        cr_assert_str_eq(info.engine, "amx");
        cr_assert(info.gflops == info.amx_gflops &&
                      !(info.amx_gflops <= info.fma_gflops) /* no fp32 engine in double */,
                  "amx %g, fma %g", info.amx_gflops, info.fma_gflops);
    }
    int old = tg__isa_cap(TG_ISA_AVX512_BF16);
    info = tg_bf16_engine();
    if (tg_cpu_has_avx512_bf16() && TG_SIMD_F32)
        cr_assert_str_eq(info.engine, info.vdp_gflops > info.fma_gflops ? "avx512_bf16" : "fp32");
    tg__isa_cap(TG_ISA_PORTABLE);
    cr_assert_str_eq(tg_bf16_engine().engine, "portable");
    tg__isa_cap(old);
}

/* ---- the conversions ------------------------------------------------------- */
static uint32_t bits(float f) { return tg__float_bits(f); }

Test(half, bf16_rounds_to_nearest_even) {
    cr_assert_eq(tg__bf16_from_float(1.0f), 0x3F80);
    /* 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to the even 1 */
    cr_assert_eq(tg__bf16_from_float(1.0f + 0x1p-8f), 0x3F80);
    /* 1 + 3*2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6: up */
    cr_assert_eq(tg__bf16_from_float(1.0f + 3 * 0x1p-8f), 0x3F82);
    cr_assert_eq(tg__bf16_from_float(1.0f + 0x1p-8f + 0x1p-20f), 0x3F81); /* past halfway: up */
    cr_assert_eq(tg__bf16_from_float(-2.0f), 0xC000);
    cr_assert_eq(tg__bf16_from_float(INFINITY), 0x7F80);
    cr_assert_eq(tg__bf16_from_float(-INFINITY), 0xFF80);
    cr_assert_eq(tg__bf16_from_float(3.4028235e38f), 0x7F80); /* FLT_MAX rounds up to inf */
    cr_assert_eq(tg__bf16_from_float(0x1p-133f), 0x0001);     /* a subnormal is kept, not flushed */
    cr_assert_eq(tg__bf16_from_float(-0.0f), 0x8000);
    /* a NaN whose payload is only in the dropped bits stays a NaN */
    uint16_t h = tg__bf16_from_bits(0x7F800001u);
    cr_assert(isnan(tg__bf16_to_float(h)) && (h & 0x0040));
    cr_assert(isnan(tg__bf16_to_float(tg__bf16_from_float(NAN))));
    cr_assert_eq(bits(tg__bf16_to_float(0x3F81)), 0x3F810000u);
}

Test(half, f16_rounds_to_nearest_even) {
    cr_assert_eq(tg__f16_from_float(1.0f), 0x3C00);
    cr_assert_eq(tg__f16_from_float(1.0f + 0x1p-11f), 0x3C00);     /* tie, to even */
    cr_assert_eq(tg__f16_from_float(1.0f + 3 * 0x1p-11f), 0x3C02); /* tie, up to even */
    cr_assert_eq(tg__f16_from_float(65504.0f), 0x7BFF);
    cr_assert_eq(tg__f16_from_float(65519.0f), 0x7BFF);
    cr_assert_eq(tg__f16_from_float(65520.0f), 0x7C00); /* halfway past the largest: inf */
    cr_assert_eq(tg__f16_from_float(-1e9f), 0xFC00);
    cr_assert_eq(tg__f16_from_float(0x1p-14f), 0x0400);     /* smallest normal */
    cr_assert_eq(tg__f16_from_float(0x1p-24f), 0x0001);     /* smallest subnormal */
    cr_assert_eq(tg__f16_from_float(0x1p-25f), 0x0000);     /* tie with 0: even */
    cr_assert_eq(tg__f16_from_float(0x1.8p-25f), 0x0001);   /* past the tie */
    cr_assert_eq(tg__f16_from_float(3 * 0x1p-25f), 0x0002); /* 1.5 units: tie, to even 2 */
    cr_assert_eq(tg__f16_from_float(0x1.ffcp-15f), 0x0400); /* rounds up into the normals */
    cr_assert_eq(tg__f16_from_float(-0.0f), 0x8000);
    cr_assert(isnan(tg__f16_to_float(tg__f16_from_float(NAN))));
    cr_assert(isinf(tg__f16_to_float(0x7C00)) && tg__f16_to_float(0xFC00) < 0);
    cr_assert(tg__f16_to_float(0x0001) == 0x1p-24f && tg__f16_to_float(0x8400) == -0x1p-14f);
    /* every finite half round-trips through float exactly */
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7C00) == 0x7C00) continue;
        cr_assert_eq(tg__f16_from_float(tg__f16_to_float((uint16_t)h)), h, "half 0x%04x", h);
    }
}

/* Against a reference rounding done in double: the nearest bf16 (ties to
 * the even significand) over many random floats of all magnitudes. */
Test(half, bf16_matches_double_reference) {
    for (int i = 0; i < 200000; i++) {
        uint32_t x = (uint32_t)(lcg_next(&lcg_state) >> 32);
        if ((x & 0x7F800000u) == 0x7F800000u) continue; /* inf / NaN: tested above */
        float f = tg__bits_float(x);
        uint16_t lo = (uint16_t)(x >> 16), hi = (uint16_t)(lo + 1);
        double dl = fabs((double)f - tg__bf16_to_float(lo)), dh = fabs((double)f - tg__bf16_to_float(hi));
        if ((hi & 0x7FFF) == 0x7F80) continue; /* next to inf: FLT_MAX's case above */
        uint16_t want = dl < dh ? lo : dh < dl ? hi : (lo & 1) ? hi : lo;
        cr_assert_eq(tg__bf16_from_bits(x), want, "x = 0x%08x", x);
    }
}

/* C += A B (alpha = beta = 1) on the AMX engines: the tiles' sums go on
 * from C's values (tile_amx), through several K blocks, whole tiles (the
 * hardware's tiles loaded from C) and partial ones (C copied in and out),
 * every transpose, 1 and 3 threads. Small integers keep every sum exact in
 * any order, so C must come out as C + A B exactly: C counted once, no
 * block lost. The twin everywhere, the hardware where AMX runs. */
Test(gemm_bf16, amx_sums_go_on_from_c) {
    static const int s[][3] = {{64, 64, 1100}, {70, 45, 1100}, {33, 31, 33}, {5, 96, 1500}};
    int saved = tg_get_num_threads();
    for (int h = 0; h < 2; h++) {
        if (h && !force_engine("amx")) break;
        tg__bf16_engine_force(h ? "amx" : "amx_twin");
        for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
            for (int t = 0; t < 4; t++)
                for (int nt = 1; nt <= 3; nt += 2) {
                    bool ta = t & 1, tb = t & 2;
                    int M = s[i][0], N = s[i][1], K = s[i][2];
                    tg_real *A = malloc((size_t)M * K * sizeof(tg_real)), *B = malloc((size_t)K * N * sizeof(tg_real));
                    tg_real *C = malloc((size_t)M * N * sizeof(tg_real));
                    cr_assert(A && B && C);
                    for (int k = 0; k < M * K; k++) A[k] = (tg_real)((k * 7) % 5 - 2);
                    for (int k = 0; k < K * N; k++) B[k] = (tg_real)((k * 3) % 7 - 3);
                    for (int k = 0; k < M * N; k++) C[k] = (tg_real)(k % 11 - 5);
                    tg_set_num_threads(nt);
                    tg_k_gemm_bf16(ta, tb, M, N, K, 1, A, ta ? M : K, B, tb ? K : N, 1, C, N);
                    for (int r = 0; r < M; r++)
                        for (int c = 0; c < N; c++) {
                            double want = (double)((r * N + c) % 11 - 5);
                            for (int k = 0; k < K; k++)
                                want += (double)A[ta ? (size_t)k * M + r : (size_t)r * K + k] *
                                        (double)B[tb ? (size_t)c * K + k : (size_t)k * N + c];
                            cr_assert(C[r * N + c] == (tg_real)want,
                                      "%s ta=%d tb=%d %dx%dx%d, %d threads: C(%d,%d) %g, want %g",
                                      h ? "amx" : "amx_twin", ta, tb, M, N, K, nt, r, c, (double)C[r * N + c], want);
                        }
                    free(A), free(B), free(C);
                }
    }
    tg__bf16_engine_force(NULL);
    tg_set_num_threads(saved);
}
