/* The dropout mask generator (see dropout_mask.h): a 32-bit hash of the
 * counter, vectorised with AVX2 (8 lanes), with a portable fallback chosen
 * at run time as in gemm.c. */
#include "dropout_mask.h"

#include <math.h>

#include "simd.h"
#include "tensor_internal.h"

tg_dropout_mask tg_dropout_mask_new(uint64_t seed, uint64_t stream, tg_real p) {
    tg_dropout_mask m = {tg_rng_key(seed, stream), (uint64_t)ceil((double)p * 0x1.0p32), (tg_real)1 / (1 - p)};
    return m;
}

/* triple32 (Chris Wellons, github.com/skeeto/hash-prospector): a bijection
 * of 32-bit integers in which every input bit flips every output bit with
 * probability 1/2 to within 0.02%. */
static inline uint32_t triple32(uint32_t x) {
    x ^= x >> 17;
    x *= 0xed5ad4bbu;
    x ^= x >> 11;
    x *= 0xac4c1b51u;
    x ^= x >> 15;
    x *= 0x31848babu;
    x ^= x >> 14;
    return x;
}

/* The key of the 2^32 counters that share hi32(c). */
static uint32_t key32(const tg_dropout_mask *m, uint32_t hi) { return (uint32_t)(tg_rng_hash(m->key, hi) >> 32); }

/* row[j] for counters lo .. lo + n - 1, all with the same high half. */
static void run_portable(const tg_dropout_mask *m, uint32_t key, uint32_t lo, int64_t n, tg_real *row) {
    for (int64_t j = 0; j < n; j++, lo++) row[j] = triple32(lo ^ key) >= m->threshold ? m->scale : 0;
}

#if TG_X86
TG_AVX2 static inline __m256i triple32_avx2(__m256i x) {
    x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 17));
    x = _mm256_mullo_epi32(x, _mm256_set1_epi32((int)0xed5ad4bbu));
    x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 11));
    x = _mm256_mullo_epi32(x, _mm256_set1_epi32((int)0xac4c1b51u));
    x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 15));
    x = _mm256_mullo_epi32(x, _mm256_set1_epi32((int)0x31848babu));
    return _mm256_xor_si256(x, _mm256_srli_epi32(x, 14));
}

TG_AVX2 static void run_avx2(const tg_dropout_mask *m, uint32_t key, uint32_t lo, int64_t n, tg_real *row) {
    /* Unsigned h >= t as signed (h ^ 2^31) > ((t - 1) ^ 2^31); t - 1 fits
     * 32 bits because 1 <= t <= 2^32. */
    const __m256i flip = _mm256_set1_epi32((int)0x80000000u);
    const __m256i thr = _mm256_set1_epi32((int)((uint32_t)(m->threshold - 1) ^ 0x80000000u));
    const __m256i vkey = _mm256_set1_epi32((int)key), step = _mm256_set1_epi32(8);
    __m256i c = _mm256_add_epi32(_mm256_set1_epi32((int)lo), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    int64_t j = 0;
    for (; j + 8 <= n; j += 8, c = _mm256_add_epi32(c, step)) {
        __m256i h = triple32_avx2(_mm256_xor_si256(c, vkey));
        __m256i keep = _mm256_cmpgt_epi32(_mm256_xor_si256(h, flip), thr);
#ifdef TG_DOUBLE
        /* widen the 8 lane masks to two sets of 4 64-bit masks */
        __m256d s = _mm256_set1_pd(m->scale);
        __m256i k0 = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(keep));
        __m256i k1 = _mm256_cvtepi32_epi64(_mm256_extracti128_si256(keep, 1));
        _mm256_storeu_pd(row + j, _mm256_and_pd(_mm256_castsi256_pd(k0), s));
        _mm256_storeu_pd(row + j + 4, _mm256_and_pd(_mm256_castsi256_pd(k1), s));
#else
        _mm256_storeu_ps(row + j, _mm256_and_ps(_mm256_castsi256_ps(keep), _mm256_set1_ps(m->scale)));
#endif
    }
    run_portable(m, key, lo + (uint32_t)j, n - j, row + j);
}
#endif

void tg_dropout_mask_row(const tg_dropout_mask *m, uint64_t index, int64_t n, tg_real *row) {
    /* tests cap the level to compare the loops */
    void (*run)(const tg_dropout_mask *, uint32_t, uint32_t, int64_t, tg_real *) =
        TG_PICK(TG_X86, run_portable, run_avx2, run_avx2);
    while (n > 0) {
        /* A row may cross a multiple of 2^32 (where the key changes): split it there. */
        uint32_t hi = (uint32_t)(index >> 32), lo = (uint32_t)index;
        int64_t left = (int64_t)(0x100000000ull - lo), len = n < left ? n : left;
        uint32_t key = key32(m, hi);
        run(m, key, lo, len, row);
        index += (uint64_t)len;
        row += len;
        n -= len;
    }
}
