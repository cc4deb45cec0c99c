/* The core's single-precision FMA peak, measured (tensor.h): what a
 * training run's "share of the peak" is a share of, and what tools/bench.c
 * reports beside each workload. */
#include "tensor.h"
#include "tensor_internal.h"

#include <math.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
/* 12 independent chains of FMAs: enough to cover latency x pipes. One trial
 * per vector width (V: the vector type, P: the intrinsics' prefix, LANES
 * floats a vector); some cores run 512-bit FMAs at twice the 256-bit rate,
 * others at the same rate, so both are measured and the better one counts.
 * Each FMA is 2 flops. */
#define FMA_PEAK_TRIAL(NAME, TARGET, V, P, LANES)                                                          \
    __attribute__((target(TARGET))) static double NAME(double seconds) {                                   \
        V a0 = P##_set1_ps(0.0f), a1 = P##_set1_ps(0.1f), a2 = P##_set1_ps(0.2f);                          \
        V a3 = P##_set1_ps(0.3f), a4 = P##_set1_ps(0.4f), a5 = P##_set1_ps(0.5f);                          \
        V a6 = P##_set1_ps(0.6f), a7 = P##_set1_ps(0.7f), a8 = P##_set1_ps(0.8f);                          \
        V a9 = P##_set1_ps(0.9f), a10 = P##_set1_ps(1.0f), a11 = P##_set1_ps(1.1f);                        \
        V x = P##_set1_ps(0.999999f), y = P##_set1_ps(1e-7f);                                              \
        long iters = 0;                                                                                    \
        double t0 = now_s(), t;                                                                            \
        do {                                                                                               \
            __asm__ volatile("" : "+v"(x), "+v"(y)); /* keeps the loop from being folded */                \
            for (int r = 0; r < 10000; r++) {                                                              \
                a0 = P##_fmadd_ps(a0, x, y), a1 = P##_fmadd_ps(a1, x, y), a2 = P##_fmadd_ps(a2, x, y);     \
                a3 = P##_fmadd_ps(a3, x, y), a4 = P##_fmadd_ps(a4, x, y), a5 = P##_fmadd_ps(a5, x, y);     \
                a6 = P##_fmadd_ps(a6, x, y), a7 = P##_fmadd_ps(a7, x, y), a8 = P##_fmadd_ps(a8, x, y);     \
                a9 = P##_fmadd_ps(a9, x, y), a10 = P##_fmadd_ps(a10, x, y), a11 = P##_fmadd_ps(a11, x, y); \
            }                                                                                              \
            iters += 10000;                                                                                \
            t = now_s() - t0;                                                                              \
        } while (t < seconds);                                                                             \
        V s = P##_add_ps(P##_add_ps(P##_add_ps(a0, a1), P##_add_ps(a2, a3)),                               \
                         P##_add_ps(P##_add_ps(a4, a5), P##_add_ps(a6, a7)));                              \
        s = P##_add_ps(s, P##_add_ps(P##_add_ps(a8, a9), P##_add_ps(a10, a11)));                           \
        float v[LANES];                                                                                    \
        P##_storeu_ps(v, s);                                                                               \
        __asm__ volatile("" : : "r"(v) : "memory"); /* the sums are used */                                \
        return (double)iters * 12 * LANES * 2 / t * 1e-9;                                                  \
    }
FMA_PEAK_TRIAL(fma_trial_256, "avx2,fma", __m256, _mm256, 8)
FMA_PEAK_TRIAL(fma_trial_512, "avx512f,avx2,fma", __m512, _mm512, 16)

static double g_peak[2]; /* the best per width seen in this process */

/* Trials of a probe lasting about `seconds` in all: of TRIAL_S each, at
 * least 10. Short trials, because the OS takes the core away for a few
 * milliseconds at a time on a busy machine: most short trials run whole
 * where long ones are cut (BENCHMARKS.md, "Measurements behind choices in
 * the code"), and only the best one counts. */
#define TRIAL_S 0.002
static int trials_for(double seconds) {
    double n = seconds / TRIAL_S;
    return n > 10 ? (n < 100000 ? (int)n : 100000) : 10;
}

tg_fma_peak tg_fma_peak_measure(double seconds) {
    tg_fma_peak p = {NAN, NAN, NAN};
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return p;
    bool wide = __builtin_cpu_supports("avx512f");
    double trial = seconds > 0 ? TRIAL_S : 0.001;
    for (int i = 0, n = trials_for(wide ? seconds / 2 : seconds); i < n; i++) { /* noise only slows a trial */
        g_peak[0] = fmax(g_peak[0], fma_trial_256(trial));
        if (wide) g_peak[1] = fmax(g_peak[1], fma_trial_512(trial));
    }
    p.gflops256 = g_peak[0];
    p.gflops512 = wide ? g_peak[1] : NAN;
    p.gflops = fmax(g_peak[0], g_peak[1]);
    return p;
}

/* The bf16 dot product: 12 chains of vdpbf16ps (AVX-512 BF16), each
 * instruction 32 bf16 multiply-adds into 16 float sums, 64 flops. */
__attribute__((target("avx512f,avx512bw,avx512bf16"))) static double bf16_trial(double seconds) {
    __m512 a0 = _mm512_set1_ps(0.0f), a1 = _mm512_set1_ps(0.1f), a2 = _mm512_set1_ps(0.2f), a3 = _mm512_set1_ps(0.3f);
    __m512 a4 = _mm512_set1_ps(0.4f), a5 = _mm512_set1_ps(0.5f), a6 = _mm512_set1_ps(0.6f), a7 = _mm512_set1_ps(0.7f);
    __m512 a8 = _mm512_set1_ps(0.8f), a9 = _mm512_set1_ps(0.9f), a10 = _mm512_set1_ps(1.0f), a11 = _mm512_set1_ps(1.1f);
    __m512i xi = _mm512_set1_epi16(0x3F80), yi = _mm512_set1_epi16(0x3380); /* bf16 1.0, 6e-8 */
    long iters = 0;
    double t0 = now_s(), t;
    do {
        __asm__ volatile("" : "+v"(xi), "+v"(yi)); /* keeps the loop from being folded */
        __m512bh x = (__m512bh)xi, y = (__m512bh)yi;
        for (int r = 0; r < 10000; r++) {
            a0 = _mm512_dpbf16_ps(a0, x, y), a1 = _mm512_dpbf16_ps(a1, x, y), a2 = _mm512_dpbf16_ps(a2, x, y);
            a3 = _mm512_dpbf16_ps(a3, x, y), a4 = _mm512_dpbf16_ps(a4, x, y), a5 = _mm512_dpbf16_ps(a5, x, y);
            a6 = _mm512_dpbf16_ps(a6, x, y), a7 = _mm512_dpbf16_ps(a7, x, y), a8 = _mm512_dpbf16_ps(a8, x, y);
            a9 = _mm512_dpbf16_ps(a9, x, y), a10 = _mm512_dpbf16_ps(a10, x, y), a11 = _mm512_dpbf16_ps(a11, x, y);
        }
        iters += 10000;
        t = now_s() - t0;
    } while (t < seconds);
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                             _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
    s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
    float v[16];
    _mm512_storeu_ps(v, s);
    __asm__ volatile("" : : "r"(v) : "memory"); /* the sums are used */
    return (double)iters * 12 * 64 / t * 1e-9;
}

static double g_peak_bf16; /* the best seen in this process */

double tg_bf16_peak_measure(double seconds) {
    if (!__builtin_cpu_supports("avx512bf16") || !__builtin_cpu_supports("avx512bw")) return NAN;
    double trial = seconds > 0 ? TRIAL_S : 0.001;
    for (int i = 0, n = trials_for(seconds); i < n; i++) g_peak_bf16 = fmax(g_peak_bf16, bf16_trial(trial));
    return g_peak_bf16;
}

/* The quick probes of the bf16 GEMM's engine choice (tensor_internal.h):
 * the best of 3 trials, about `seconds` in all, nothing kept. */
double tg__fma_rate(double seconds) {
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return 0;
    bool wide = __builtin_cpu_supports("avx512f");
    double best = 0, trial = seconds / (wide ? 6 : 3);
    for (int i = 0; i < 3; i++) {
        best = fmax(best, fma_trial_256(trial));
        if (wide) best = fmax(best, fma_trial_512(trial));
    }
    return best;
}

double tg__vdp_rate(double seconds) {
    if (!__builtin_cpu_supports("avx512bf16") || !__builtin_cpu_supports("avx512bw")) return 0;
    double best = 0;
    for (int i = 0; i < 3; i++) best = fmax(best, bf16_trial(seconds / 3));
    return best;
}
#else
tg_fma_peak tg_fma_peak_measure(double seconds) {
    (void)seconds;
    (void)now_s;
    return (tg_fma_peak){NAN, NAN, NAN};
}
double tg_bf16_peak_measure(double seconds) {
    (void)seconds;
    return NAN;
}
double tg__fma_rate(double seconds) {
    (void)seconds;
    return 0;
}
double tg__vdp_rate(double seconds) {
    (void)seconds;
    return 0;
}
#endif
