/* In-register transposes of float tiles, shared by the attention kernels
 * (kernels_attention.c's short path, kernels_attention_block.c's packers)
 * and the GEMM's packers (gemm.c, gemm_bf16_fp32.c): transpose8_regs of
 * eight registers, transpose8 (AVX2) and transpose16 (AVX-512) of one
 * tile in memory, with
 *   (src, rs, rows, cols, dst, ld): dst[c, i] = src[i, c] for c < min(cols, W),
 *   i < W (W the tile's width; 0 for i >= rows), rows rs and ld apart.
 * Shuffles only: the bits are the input's. Included where TG_SIMD_F32. */
#ifndef TG_TRANSPOSE_SIMD_H
#define TG_TRANSPOSE_SIMD_H
#include <stdint.h>

#include "simd.h"

#if TG_SIMD_F32
/* The first two rounds of an n x n tile's transpose, the same at both
 * widths W (256: AVX2, 512: AVX-512) but for the intrinsics' names: rows
 * r[] interleaved in pairs (unpack lo/hi) into t[], then pairs of those
 * (shuffle 0x44 / 0xEE) back into r[]: then 128-bit lane L of r[4q + k]
 * holds column 4L + k of rows 4q .. 4q + 3. What is left is moving lanes,
 * which differs by width. Shuffles only: the bits are the input's. */
#define TRANSPOSE_ROUNDS_1_2(W, n, r, t)                              \
    do {                                                              \
        for (int i = 0; i < (n); i += 2) {                            \
            t[i] = _mm##W##_unpacklo_ps(r[i], r[i + 1]);              \
            t[i + 1] = _mm##W##_unpackhi_ps(r[i], r[i + 1]);          \
        }                                                             \
        for (int i = 0; i < (n); i += 4) {                            \
            r[i] = _mm##W##_shuffle_ps(t[i], t[i + 2], 0x44);         \
            r[i + 1] = _mm##W##_shuffle_ps(t[i], t[i + 2], 0xEE);     \
            r[i + 2] = _mm##W##_shuffle_ps(t[i + 1], t[i + 3], 0x44); \
            r[i + 3] = _mm##W##_shuffle_ps(t[i + 1], t[i + 3], 0xEE); \
        }                                                             \
    } while (0)
/* Eight rows of 8 in registers, transposed in place: on return r[c] holds
 * column c. The classic unpack, shuffle, permute (Intel's optimisation
 * manual). */
TG_AVX2 static inline void transpose8_regs(__m256 r[8]) {
    __m256 t[8];
    TRANSPOSE_ROUNDS_1_2(256, 8, r, t);
    for (int i = 0; i < 4; i++) {
        t[i] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x20);
        t[i + 4] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x31);
    }
    for (int i = 0; i < 8; i++) r[i] = t[i];
}
/* One 8 x 8 tile transposed (V_TRANSPOSE, kernels_attention_short.h). */
TG_AVX2 static inline void transpose8(const float *src, int64_t rs, int rows, int cols, float *dst, int ld) {
    __m256i keep = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    __m256 r[8];
    for (int i = 0; i < 8; i++) r[i] = i < rows ? _mm256_maskload_ps(src + i * rs, keep) : _mm256_setzero_ps();
    transpose8_regs(r);
    for (int c = 0; c < 8 && c < cols; c++) _mm256_storeu_ps(dst + (size_t)c * ld, r[c]);
}
/* The lanes below n of 16 (none for n <= 0). */
static inline __mmask16 lanes16(int n) { return (__mmask16)(n <= 0 ? 0 : n >= 16 ? 0xFFFF : (1u << n) - 1); }
/* One 16 x 16 tile transposed (V_TRANSPOSE): unpack pairs of rows, shuffle
 * pairs of those, then two rounds of 128-bit lane shuffles. */
TG_AVX512 static inline void transpose16(const float *src, int64_t rs, int rows, int cols, float *dst, int ld) {
    __m512 r[16], t[16];
    for (int i = 0; i < 16; i++) r[i] = _mm512_maskz_loadu_ps(i < rows ? lanes16(cols) : 0, src + i * rs);
    TRANSPOSE_ROUNDS_1_2(512, 16, r, t);
    for (int h = 0; h < 16; h += 8)
        for (int i = 0; i < 4; i++) {
            t[h + i] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0x88);
            t[h + i + 4] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0xdd);
        }
    for (int i = 0; i < 8; i++) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
    }
    for (int c = 0; c < 16 && c < cols; c++) _mm512_storeu_ps(dst + (size_t)c * ld, r[c]);
}
#endif
#endif
