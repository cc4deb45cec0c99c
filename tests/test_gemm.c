/* tg_k_gemm against a naive triple loop: all four transpose combinations,
 * odd sizes and sizes around the cache-block boundaries, alpha/beta
 * variants, beta == 0 over NaN garbage, K == 0, padded leading dimensions,
 * and bit-identical results for 1 and 2 threads. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_test_util.h"
#include "isa_util.h"
#include "tensor/gemm_common.h" /* gemm_split_choose */
#include "tensor/gemm_driver.h" /* gemm_grid_choose */
#include "tensor/kernels.h"
#include "tensor/simd.h"
#include "tensor/tensor_internal.h" /* tg__isa_cap: the kernels a machine without AVX-512 or AVX2
                                     * runs are tested too */

static uint64_t lcg_state = 12345; /* gemm_test_util.h */

/* Tolerance for one element: a few ulps of the sum of |terms|, the classic
 * forward error bound of a dot product of length K. */
#ifdef TG_DOUBLE
#define EPS 2.220446049250313e-16
#else
#define EPS 1.1920929e-07
#endif

/* Runs one gemm with the given shapes and padding, compares each element
 * with a long-double naive loop and checks the padding of C is untouched. */
static void check(bool ta, bool tb, int M, int N, int K, tg_real alpha, tg_real beta, int pad, bool nan_c) {
    gemm_operands o = gemm_random_product(&lcg_state, tg_k_gemm, ta, tb, M, N, K, alpha, beta, pad, nan_c);
    const int lda = o.lda, ldb = o.ldb, ldc = o.ldc;
    const tg_real *A = o.A, *B = o.B, *C0 = o.C0;
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            tg_real got = o.C[(size_t)i * ldc + j];
            long double s = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                long double a = ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
                long double b = tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j];
                s += a * b;
                mag += fabsl(a * b);
            }
            long double c0 = beta == 0 ? 0 : (long double)C0[(size_t)i * ldc + j];
            long double want = (long double)alpha * s + (long double)beta * c0;
            long double tol =
                4 * EPS * ((K + 2) * fabsl((long double)alpha) * mag + fabsl((long double)beta * c0)) + 1e-30L;
            cr_assert(isfinite(got) && fabsl((long double)got - want) <= tol,
                      "ta=%d tb=%d M=%d N=%d K=%d alpha=%g beta=%g pad=%d: C(%d,%d) = %.17g, "
                      "want %.17Lg (tol %.3Lg)",
                      ta, tb, M, N, K, (double)alpha, (double)beta, pad, i, j, (double)got, want, tol);
        }
    }
    gemm_operands_free(&o);
}

/* One case in all four transpose combinations of A and B. */
static void check_all_transposes(int M, int N, int K, tg_real alpha, tg_real beta, int pad, bool nan_c) {
    for (int t = 0; t < 4; t++) check(t & 1, t & 2, M, N, K, alpha, beta, pad, nan_c);
}

static const int odd[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 15, 16, 17, 23, 24, 31, 32, 33, 37};
#define NODD (int)(sizeof odd / sizeof odd[0])

Test(gemm, all_transposes_sizes_1_to_37) {
    for (int t = 0; t < 4; t++)
        for (int M = 1; M <= 37; M++)
            for (int n = 0; n < NODD; n++)
                for (int k = 0; k < NODD; k += 3) check(t & 1, t & 2, M, odd[n], odd[k], 1, 0, 0, false);
}

Test(gemm, all_transposes_k_sizes) {
    for (int t = 0; t < 4; t++)
        for (int K = 1; K <= 37; K++)
            for (int n = 0; n < NODD; n += 2) check(t & 1, t & 2, odd[(n + K) % NODD], odd[n], K, 1, 0, 0, false);
}

Test(gemm, square_small_heads) {
    /* the attention model's per-head products: [16,16] @ [16,16] and friends */
    check_all_transposes(16, 16, 16, 1, 0, 0, false);
    check_all_transposes(8, 8, 4, 1, 1, 0, false);
    check_all_transposes(64, 64, 64, 0.5, 0, 0, false);
}

Test(gemm, around_block_boundaries) {
    static const int s[][3] = {
        {255, 257, 129}, {257, 255, 257}, {100, 1023, 7}, {7, 33, 1023}, {129, 17, 300},
        {300, 300, 300}, {97, 513, 65},   {1, 600, 255},  {600, 1, 257},
    };
    for (int t = 0; t < 4; t++)
        for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
            check(t & 1, t & 2, s[i][0], s[i][1], s[i][2], 1, 0, 0, false);
}

Test(gemm, wide_panel_past_nc) {
    /* N beyond one NC panel (4080 / 4096 columns), K over several KC blocks */
    check_all_transposes(7, 4200, 40, 1, 0.5, 0, false);
    check_all_transposes(3, 50, 1100, 1, 0, 2, false);
}

/* The kernels the CPU would not pick on this machine: the portable ones
 * (switch 1), and AVX2 where the AVX-512 kernel runs by default (switch 2). */
static void kernels_with_cap(int cap) {
    int old = tg__isa_cap(cap);
    static const int s[][3] = {
        {1, 1, 1},      {5, 7, 3},     {16, 16, 16}, {37, 33, 31},  {255, 257, 129},
        {130, 70, 300}, {4, 4200, 60}, {9, 8, 1},    {600, 3, 257},
    };
    for (int t = 0; t < 4; t++)
        for (size_t i = 0; i < sizeof s / sizeof s[0]; i++) {
            check(t & 1, t & 2, s[i][0], s[i][1], s[i][2], 1, 0, 0, false);
            check(t & 1, t & 2, s[i][0], s[i][1], s[i][2], -0.5, 2, 3, false);
            check(t & 1, t & 2, s[i][0], s[i][1], s[i][2], 1, 0, 1, true);
        }
    tg__isa_cap(old);
}
Test(gemm, portable_kernels) { kernels_with_cap(TG_ISA_PORTABLE); }
Test(gemm, avx2_kernels_where_avx512_is_default) { kernels_with_cap(TG_ISA_AVX2); }

Test(gemm, alpha_beta_variants) {
    static const tg_real ab[][2] = {{1, 1}, {2, -1}, {-0.5, 0.25}, {0, 1}, {0, 0.5}, {1.5, 0}, {0, 0}};
    for (int t = 0; t < 4; t++)
        for (size_t v = 0; v < sizeof ab / sizeof ab[0]; v++) {
            check(t & 1, t & 2, 13, 11, 7, ab[v][0], ab[v][1], 0, false);
            check(t & 1, t & 2, 70, 90, 130, ab[v][0], ab[v][1], 0, false);
        }
}

Test(gemm, beta_zero_overwrites_nan) {
    check_all_transposes(5, 7, 3, 1, 0, 0, true);
    check_all_transposes(16, 16, 16, 1, 0, 0, true);
    check_all_transposes(77, 131, 70, -2, 0, 3, true);
    check_all_transposes(9, 9, 9, 0, 0, 0, true); /* alpha == 0 too */
}

Test(gemm, k_zero_scales_c) {
    check_all_transposes(6, 5, 0, 1, 0, 0, true);
    check_all_transposes(6, 5, 0, 1, 0.5, 0, false);
    check_all_transposes(200, 130, 0, 1, 2, 1, false);
}

Test(gemm, empty_m_or_n_is_noop) {
    tg_real a[4] = {1, 2, 3, 4}, c[4] = {5, 6, 7, 8};
    tg_k_gemm(false, false, 0, 2, 2, 1, a, 2, a, 2, 0, c, 2);
    tg_k_gemm(false, false, 2, 0, 2, 1, a, 2, a, 2, 0, c, 2);
    tg_k_gemm(true, true, 0, 0, 0, 1, a, 1, a, 1, 0, c, 1);
    cr_assert(c[0] == 5 && c[1] == 6 && c[2] == 7 && c[3] == 8);
}

Test(gemm, padded_leading_dimensions) {
    check_all_transposes(7, 9, 11, 1, 0.5, 5, false);
    check_all_transposes(33, 17, 40, -1, 1, 13, false);
    check_all_transposes(130, 70, 260, 1, 0, 7, false);
}

/* Same inputs, 1 thread then 2 threads: every byte of C must agree (gemm_test_util.h). */
static void same_for_threads(bool ta, bool tb, int M, int N, int K) {
    gemm_same_for_threads(&lcg_state, tg_k_gemm, ta, tb, M, N, K);
}

static void same_for_threads_all(void) {
    for (int t = 0; t < 4; t++) {
        same_for_threads(t & 1, t & 2, 300, 257, 129); /* packed path */
        same_for_threads(t & 1, t & 2, 97, 700, 300);
        same_for_threads(t & 1, t & 2, 513, 33, 600);
        same_for_threads(t & 1, t & 2, 64, 64, 65); /* direct path, threaded */
        same_for_threads(t & 1, t & 2, 150, 100, 120);
        same_for_threads(t & 1, t & 2, 3, 2000, 300); /* few rows: the threads split the columns */
        same_for_threads(t & 1, t & 2, 1, 4100, 301); /* few rows, B in place: blocks of sums, K % 4 */
        same_for_threads(t & 1, t & 2, 8, 1000, 517);
        same_for_threads(t & 1, t & 2, 12, 1100, 1000); /* B transposed: 12 rows read it in place */
        same_for_threads(t & 1, t & 2, 18, 700, 300);   /* 3 row tiles: split by columns */
        same_for_threads(t & 1, t & 2, 600, 40, 200);   /* 100 row tiles, 2 slivers: by rows */
    }
}

/* A product of fewer row tiles than threads splits B's slivers among them
 * (gemm_blocked): every column right, at 2 threads, the panel's last
 * sliver partial, several K blocks. */
Test(gemm, few_rows_split_by_columns) {
    int saved = tg_get_num_threads();
    tg_set_num_threads(2);
    check_all_transposes(1, 1000, 300, (tg_real)0.75, (tg_real)0.5, 0, false);
    check_all_transposes(5, 1037, 70, 1, 0, 3, false);
    tg_set_num_threads(saved);
}

/* Products of a few rows read B in place (gemm.c's few_rows: up to 8
 * rows with N * K >= 128^2, and with B transposed up to 16 rows when N * K
 * >= 1024^2): every row count to one past the limit, columns that end a
 * vector or a block of sums (4096 / m floats, 2048 / m doubles) short, K
 * past a multiple of 4 and of the vector width, alpha and beta, beta == 0
 * over NaN, padded operands; at every ISA level, on 1 and 2 threads. */
Test(gemm, few_rows_b_read_in_place) {
    static const int s[][3] = {
        {1, 4100, 7}, {2, 2050, 9},  {3, 1400, 33}, {4, 37, 1025}, {5, 820, 21}, {6, 130, 130},
        {7, 600, 30}, {8, 520, 301}, {9, 300, 60},  {1, 17, 4096}, {2, 3, 6000}, {11, 1024, 1025},
    };
    int saved = tg_get_num_threads();
    for (int cap = TG_ISA_PORTABLE; cap <= TG_ISA_AVX512; cap++)
        for (int nt = 1; nt <= 2; nt++) {
            int old = tg__isa_cap(cap);
            tg_set_num_threads(nt);
            for (size_t i = 0; i < sizeof s / sizeof s[0]; i++) {
                check_all_transposes(s[i][0], s[i][1], s[i][2], (tg_real)0.75, (tg_real)0.5, 3, false);
                check_all_transposes(s[i][0], s[i][1], s[i][2], -1, 0, 0, true);
            }
            tg__isa_cap(old);
        }
    tg_set_num_threads(saved);
}

/* The few-row loops with B untransposed are a chain of exactly rounded FMAs
 * per element in k order at either width: AVX2 and AVX-512 give the same
 * bits. */
Test(gemm, few_rows_same_bits_at_avx2_and_avx512) {
    static const int s[][3] = {{1, 4100, 7}, {3, 1400, 33}, {8, 520, 301}, {5, 37, 1025}};
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
        for (int ta = 0; ta < 2; ta++) {
            int M = s[i][0], N = s[i][1], K = s[i][2];
            tg_real *A = lcg_buf(&lcg_state, (size_t)M * K), *B = lcg_buf(&lcg_state, (size_t)K * N);
            tg_real *C[2] = {lcg_buf(&lcg_state, (size_t)M * N), malloc((size_t)M * N * sizeof(tg_real))};
            cr_assert_not_null(C[1]);
            for (int w = 0; w < 2; w++) {
                int old = tg__isa_cap(w ? TG_ISA_AVX512 : TG_ISA_AVX2);
                tg_k_gemm(ta, false, M, N, K, (tg_real)0.75, A, ta ? M : K, B, N, 0, C[w], N);
                tg__isa_cap(old);
            }
            cr_assert(memcmp(C[0], C[1], (size_t)M * N * sizeof(tg_real)) == 0, "ta=%d %dx%dx%d", ta, M, N, K);
            free(A), free(B), free(C[0]), free(C[1]);
        }
}

/* gemm_split_choose (gemm_common.h) at 2 threads: the split whose largest
 * share is smaller, counting whole tiles and each share's rows of A, rows
 * on a tie, one thread for a small product. */
Test(gemm, split_by_the_smaller_largest_share) {
    int saved = tg_get_num_threads();
    tg_set_num_threads(2);
    gemm_split s = gemm_split_choose(1, 1000, 300, 6, 32); /* one row tile: columns */
    cr_assert(s.nt == 2 && s.split_n);
    s = gemm_split_choose(18, 1024, 512, 6, 32); /* 3 row tiles: 2 against 1.5 */
    cr_assert(s.nt == 2 && s.split_n);
    s = gemm_split_choose(24, 1024, 512, 6, 32); /* 4 row tiles: the tiles tie, A's rows decide */
    cr_assert(s.nt == 2 && !s.split_n);
    s = gemm_split_choose(256, 256, 256, 6, 32); /* 43 row tiles: fewer tiles by columns, less of A by rows */
    cr_assert(s.nt == 2 && !s.split_n);
    s = gemm_split_choose(600, 40, 200, 6, 32); /* 100 row tiles, 2 slivers (the second 8 wide) */
    cr_assert(s.nt == 2 && !s.split_n);
    s = gemm_split_choose(1, 32, 4000, 6, 32); /* one tile, one sliver */
    cr_assert(s.nt == 1);
    s = gemm_split_choose(16, 16, 16, 6, 32); /* below PARALLEL_MIN_WORK */
    cr_assert(s.nt == 1);
    tg_set_num_threads(saved);
}

Test(gemm, bit_identical_across_thread_counts) { at_every_isa(same_for_threads_all); }

/* gemm_grid_choose (gemm_driver.h): at 2 threads the row or column split,
 * never a grid; on more threads than a product has tiles (or slivers), a
 * grid of both when its largest share is smaller. */
Test(gemm, grid_when_tiles_are_fewer_than_threads) {
    int old = tg__parallel_fake_cpus(16);
    tg_set_num_threads(2);
    gemm_grid g = gemm_grid_choose(24, 256, 512, 6, 32);
    cr_assert(g.rows * g.cols == 2 && (g.rows == 1 || g.cols == 1), "%d x %d", g.rows, g.cols);
    tg_set_num_threads(16);
    g = gemm_grid_choose(24, 256, 512, 6, 32); /* 4 tiles x 8 slivers: a share of 1 x 2, not 1 x 8 or 4 x 1 */
    cr_assert(g.rows == 4 && g.cols == 4, "%d x %d", g.rows, g.cols);
    g = gemm_grid_choose(12, 256, 2000, 6, 32); /* 2 tiles x 8 slivers */
    cr_assert(g.rows == 2 && g.cols == 8, "%d x %d", g.rows, g.cols);
    g = gemm_grid_choose(960, 256, 512, 6, 32); /* 160 tiles: the rows alone */
    cr_assert(g.rows == 16 && g.cols == 1, "%d x %d", g.rows, g.cols);
    g = gemm_grid_choose(16, 16, 16, 6, 32); /* below PARALLEL_MIN_WORK */
    cr_assert(g.rows == 1 && g.cols == 1);
    tg_set_num_threads(7);
    g = gemm_grid_choose(12, 256, 2000, 6, 32); /* 2 x 3: shares of 1 tile x 3 slivers */
    cr_assert(g.rows == 2 && g.cols == 3, "%d x %d", g.rows, g.cols);
    tg_set_num_threads(0);
    tg__parallel_fake_cpus(old);
}

/* One product at 1, 2, 3 and 7 threads (a 7-thread pool on any machine):
 * the same bits each time. */
static void same_bits_at_1_2_3_7(bool ta, bool tb, int M, int N, int K) {
    static const int threads[] = {1, 2, 3, 7};
    int old = tg__parallel_fake_cpus(8);
    size_t mn = (size_t)M * N;
    tg_real *A = lcg_buf(&lcg_state, (size_t)M * K), *B = lcg_buf(&lcg_state, (size_t)K * N);
    tg_real *C0 = lcg_buf(&lcg_state, mn), *C = malloc(mn * sizeof *C), *ref = malloc(mn * sizeof *C);
    cr_assert(C && ref);
    for (int t = 0; t < 4; t++) {
        tg_set_num_threads(threads[t]);
        memcpy(C, C0, mn * sizeof *C);
        tg_k_gemm(ta, tb, M, N, K, (tg_real)0.75, A, ta ? M : K, B, tb ? K : N, (tg_real)0.5, C, N);
        if (t == 0)
            memcpy(ref, C, mn * sizeof *C);
        else
            cr_assert(memcmp(C, ref, mn * sizeof *C) == 0, "ta=%d tb=%d %dx%dx%d: %d threads differ from 1", ta, tb, M,
                      N, K, threads[t]);
    }
    tg_set_num_threads(0);
    tg__parallel_fake_cpus(old);
    free(A), free(B), free(C0), free(C), free(ref);
}

/* The driver's grid (2 row tiles x 8 slivers: 2 x 3 shares at 7 threads)
 * and its groups of K blocks (K 5000 in 20 blocks of about 1 MB of B: five
 * groups of 4), against the naive loop and across thread counts. */
Test(gemm, grid_and_k_groups_same_bits_at_1_2_3_7_threads) {
    for (int t = 0; t < 4; t++) {
        same_bits_at_1_2_3_7(t & 1, t & 2, 12, 256, 2000);
        same_bits_at_1_2_3_7(t & 1, t & 2, 18, 1000, 5000);
        same_bits_at_1_2_3_7(t & 1, t & 2, 200, 40, 700);
    }
    check_all_transposes(18, 1000, 5000, 1, 0.5, 0, false);
}
