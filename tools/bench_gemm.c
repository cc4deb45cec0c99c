/* bench_gemm: GFLOP/s of tg_k_gemm on square n x n products, at 1 and 2
 * threads, against the core's measured FMA peak.
 *
 *   bench_gemm [--portable] [n ...]      (default n = 128 256 512 1024 2048)
 *
 * A product of n x n matrices costs 2 n^3 flops; each figure is that over
 * the median time of several runs (after one warm-up run, which also
 * allocates the packing buffers). The peak is measured, not looked up: a
 * loop of independent 256-bit FMAs, 2 flops x lanes each, timed on one
 * core. Also times the attention model's small per-head products. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tensor/tensor.h"

#ifdef _OPENMP
#include <omp.h>
#endif

int tg__gemm_force_portable(int on); /* src/tensor/gemm.c */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ---- peak: independent FMA chains, enough to cover latency x pipes ------- */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
__attribute__((target("avx2,fma"))) static double fma_peak_gflops(double seconds)
{
    /* 12 chains: latency 4-5 cycles x 2 FMA pipes needs at least 10. Named
     * variables (not an array) so they all stay in registers. */
    __m256 a0 = _mm256_set1_ps(0.0f), a1 = _mm256_set1_ps(0.1f), a2 = _mm256_set1_ps(0.2f);
    __m256 a3 = _mm256_set1_ps(0.3f), a4 = _mm256_set1_ps(0.4f), a5 = _mm256_set1_ps(0.5f);
    __m256 a6 = _mm256_set1_ps(0.6f), a7 = _mm256_set1_ps(0.7f), a8 = _mm256_set1_ps(0.8f);
    __m256 a9 = _mm256_set1_ps(0.9f), a10 = _mm256_set1_ps(1.0f), a11 = _mm256_set1_ps(1.1f);
    __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
    long iters = 0;
    double t0 = now(), t;
    do {
        /* the empty asm hides x and y from the optimiser, so it cannot fold
         * the loop into a closed form */
        __asm__ volatile("" : "+x"(x), "+x"(y));
        for (int r = 0; r < 100000; r++) {
#define F(v) v = _mm256_fmadd_ps(v, x, y)
            F(a0); F(a1); F(a2); F(a3); F(a4); F(a5); F(a6); F(a7); F(a8); F(a9); F(a10); F(a11);
#undef F
        }
        iters += 100000;
        t = now() - t0;
    } while (t < seconds);
    __m256 sum = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                               _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
    sum = _mm256_add_ps(sum, _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)));
    float v[8];
    _mm256_storeu_ps(v, sum);
    if (v[0] == 12345.0f) printf(" ");
    return (double)iters * 12 * 8 * 2 / t * 1e-9;
}
static int have_avx2_fma(void)
{
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#else
static double fma_peak_gflops(double seconds) { (void)seconds; return NAN; }
static int have_avx2_fma(void) { return 0; }
#endif

static tg_real *rand_matrix(size_t n)
{
    tg_real *p = aligned_alloc(64, (n * sizeof(tg_real) + 63) / 64 * 64);
    if (!p) {
        fprintf(stderr, "bench_gemm: out of memory\n");
        exit(1);
    }
    unsigned s = 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        p[i] = (tg_real)((double)(s >> 8) / 16777216.0 - 0.5);
    }
    return p;
}

/* Median seconds of one n x n x n product over enough runs to fill ~0.6 s. */
static double time_square(int n, const tg_real *A, const tg_real *B, tg_real *C)
{
    tg_k_gemm(false, false, n, n, n, 1, A, n, B, n, 0, C, n); /* warm-up */
    double t0 = now();
    tg_k_gemm(false, false, n, n, n, 1, A, n, B, n, 0, C, n);
    double one = now() - t0;
    int runs = (int)(0.6 / (one > 1e-9 ? one : 1e-9));
    if (runs < 3) runs = 3;
    if (runs > 200) runs = 200;
    double *t = malloc((size_t)runs * sizeof *t);
    if (!t) exit(1);
    for (int r = 0; r < runs; r++) {
        t0 = now();
        tg_k_gemm(false, false, n, n, n, 1, A, n, B, n, 0, C, n);
        t[r] = now() - t0;
    }
    qsort(t, (size_t)runs, sizeof *t, cmp_double);
    double med = t[runs / 2];
    free(t);
    return med;
}

/* The attention heads: 64 products of [16,16] x [16,16]^T (scores) and
 * [16,16] x [16,16] (weights @ V); nanoseconds per product. */
static double time_heads(void)
{
    enum { H = 64, T = 16, D = 16 };
    tg_real *Q = rand_matrix((size_t)H * T * D), *Kt = rand_matrix((size_t)H * T * D);
    tg_real *S = rand_matrix((size_t)H * T * T);
    int reps = 2000;
    double best = 1e30;
    for (int trial = 0; trial < 5; trial++) {
        double t0 = now();
        for (int r = 0; r < reps; r++)
            for (int h = 0; h < H; h++) {
                tg_k_gemm(false, true, T, T, D, 0.25, Q + h * T * D, D, Kt + h * T * D, D, 0,
                          S + h * T * T, T);
                tg_k_gemm(false, false, T, D, T, 1, S + h * T * T, T, Kt + h * T * D, D, 0,
                          Q + h * T * D, D);
            }
        double t = (now() - t0) / ((double)reps * H * 2);
        if (t < best) best = t;
    }
    free(Q);
    free(Kt);
    free(S);
    return best * 1e9;
}

int main(int argc, char **argv)
{
    int sizes[32], ns = 0;
    bool portable = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--portable") == 0) {
            portable = true;
        } else {
            char *end;
            long v = strtol(argv[i], &end, 10);
            if (*end || v < 1 || v > 16384 || ns == 32) {
                fprintf(stderr, "usage: bench_gemm [--portable] [n ...]\n");
                return 2;
            }
            sizes[ns++] = (int)v;
        }
    }
    if (ns == 0) {
        static const int def[] = {128, 256, 512, 1024, 2048};
        for (ns = 0; ns < 5; ns++) sizes[ns] = def[ns];
    }
    if (portable) tg__gemm_force_portable(1);

    /* best of several short trials: other processes on the machine can only
     * slow a trial down, never speed it up */
    double peak = NAN;
    if (have_avx2_fma())
        for (int i = 0; i < 10; i++) {
            double p = fma_peak_gflops(0.05);
            if (!(p <= peak)) peak = p;
        }
    bool is_double = sizeof(tg_real) == sizeof(double);
    /* the FMA loop runs on floats; doubles fill half the lanes */
    double peak_real = is_double ? peak / 2 : peak;
    printf("tg_real = %s, kernel = %s\n", is_double ? "double" : "float",
           portable || !have_avx2_fma() ? "portable C" : "AVX2+FMA");
    printf("measured peak per core: %.1f GFLOP/s single precision (%.1f for tg_real)\n", peak,
           peak_real);
    printf("%6s %8s %10s %8s %10s %8s %10s\n", "n", "threads", "ms", "GFLOP/s", "per core",
           "of peak", "");

    int max_threads = 1;
#ifdef _OPENMP
    max_threads = omp_get_max_threads() < 2 ? omp_get_max_threads() : 2;
#endif
    for (int s = 0; s < ns; s++) {
        int n = sizes[s];
        size_t nn = (size_t)n * n;
        tg_real *A = rand_matrix(nn), *B = rand_matrix(nn), *C = rand_matrix(nn);
        for (int th = 1; th <= max_threads; th++) {
#ifdef _OPENMP
            omp_set_num_threads(th);
#endif
            double t = time_square(n, A, B, C);
            double gf = 2.0 * n * (double)n * n / t * 1e-9;
            printf("%6d %8d %10.3f %8.1f %10.1f %7.1f%%\n", n, th, t * 1e3, gf, gf / th,
                   100 * gf / th / peak_real);
        }
        free(A);
        free(B);
        free(C);
    }
#ifdef _OPENMP
    omp_set_num_threads(1);
#endif
    printf("attention head 16x16x16 (A B and A B^T): %.0f ns per product\n", time_heads());
    return 0;
}
