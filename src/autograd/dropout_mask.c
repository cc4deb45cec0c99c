/* The dropout mask generator (see dropout_mask.h): SplitMix64 on the
 * counter, vectorised with AVX2 (64-bit products from 32-bit halves), with
 * a portable fallback chosen at run time as in gemm.c. */
#include "dropout_mask.h"

#include <math.h>

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define MASK_X86 1
#include <immintrin.h>
#define TG_AVX2 __attribute__((target("avx2,fma")))
#else
#define MASK_X86 0
#endif

tg_dropout_mask tg_dropout_mask_new(uint64_t seed, uint64_t stream, tg_real p) {
    tg_dropout_mask m = {tg_rng_key(seed, stream), (uint64_t)ceil((double)p * 0x1.0p53), (tg_real)1 / (1 - p)};
    return m;
}

#define GOLDEN 0x9e3779b97f4a7c15ULL

/* row[j] = Z_j / (1-p) for the keys k0 .. k0+n-1 of one row: keep iff
 * (mix(z) >> 11) >= threshold, z = key + (index + 1) golden, which is
 * tg_rng_hash(key, index) advanced by one golden-ratio step per key. */
static void row_portable(const tg_dropout_mask *m, uint64_t z, int64_t n, tg_real *row) {
    for (int64_t j = 0; j < n; j++, z += GOLDEN) row[j] = (tg_rng_mix(z) >> 11) >= m->threshold ? m->scale : 0;
}

#if MASK_X86
/* Low 64 bits of a * c for 4 lanes, c a constant split in 32-bit halves. */
TG_AVX2 static inline __m256i mul64(__m256i a, __m256i c_lo, __m256i c_hi) {
    __m256i lo = _mm256_mul_epu32(a, c_lo);
    __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), c_lo), _mm256_mul_epu32(a, c_hi));
    return _mm256_add_epi64(lo, _mm256_slli_epi64(cross, 32));
}

/* Keep masks (all ones) of 4 consecutive counters starting at z: tg_rng_mix
 * (SplitMix64's finaliser) lane by lane. h >> 11 < 2^53, so the signed
 * 64-bit compare is the unsigned one. */
TG_AVX2 static inline __m256i keep4(__m256i z, __m256i thr_minus_1) {
    const __m256i c1_lo = _mm256_set1_epi64x(0x1ce4e5b9), c1_hi = _mm256_set1_epi64x(0xbf58476d);
    const __m256i c2_lo = _mm256_set1_epi64x(0x133111eb), c2_hi = _mm256_set1_epi64x(0x94d049bb);
    z = _mm256_xor_si256(z, _mm256_srli_epi64(z, 30));
    z = mul64(z, c1_lo, c1_hi);
    z = _mm256_xor_si256(z, _mm256_srli_epi64(z, 27));
    z = mul64(z, c2_lo, c2_hi);
    z = _mm256_xor_si256(z, _mm256_srli_epi64(z, 31));
    return _mm256_cmpgt_epi64(_mm256_srli_epi64(z, 11), thr_minus_1);
}

TG_AVX2 static void row_avx2(const tg_dropout_mask *m, uint64_t z0, int64_t n, tg_real *row) {
    const __m256i step = _mm256_set1_epi64x((long long)(4 * GOLDEN));
    const __m256i thr = _mm256_set1_epi64x((long long)m->threshold - 1);   /* threshold >= 1 when p > 0 */
    __m256i z = _mm256_add_epi64(_mm256_set1_epi64x((long long)z0),
                                 _mm256_setr_epi64x(0, (long long)GOLDEN, (long long)(2 * GOLDEN), (long long)(3 * GOLDEN)));
    int64_t j = 0;
#ifdef TG_DOUBLE
    const __m256d inv = _mm256_set1_pd(m->scale);
    for (; j + 4 <= n; j += 4, z = _mm256_add_epi64(z, step))
        _mm256_storeu_pd(row + j, _mm256_and_pd(_mm256_castsi256_pd(keep4(z, thr)), inv));
#else
    const __m256 inv = _mm256_set1_ps(m->scale);
    const __m256i low_halves = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    for (; j + 8 <= n; j += 8) {
        __m256i a = _mm256_permutevar8x32_epi32(keep4(z, thr), low_halves);
        z = _mm256_add_epi64(z, step);
        __m256i b = _mm256_permutevar8x32_epi32(keep4(z, thr), low_halves);
        z = _mm256_add_epi64(z, step);
        __m256i m = _mm256_permute2x128_si256(a, b, 0x20);   /* 8 lane masks, in order */
        _mm256_storeu_ps(row + j, _mm256_and_ps(_mm256_castsi256_ps(m), inv));
    }
#endif
    row_portable(m, z0 + (uint64_t)j * GOLDEN, n - j, row + j);
}
#endif


void tg_dropout_mask_row(const tg_dropout_mask *m, uint64_t index, int64_t n, tg_real *row) {
    uint64_t z = m->key + (index + 1) * GOLDEN;   /* tg_rng_hash(key, index) before its mix */
#if MASK_X86
    static int avx2 = -1;   /* benign race: every thread computes the same value */
    if (avx2 < 0) avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (avx2) { row_avx2(m, z, n, row); return; }
#endif
    row_portable(m, z, n, row);
}
