/* bf16 rounding of float lanes, tg__bf16_round_daz (half.h) on vectors,
 * shared by the attention kernels (kernels_attention.c's short path,
 * kernels_attention_block.c's packers) and the bf16 GEMM's fp32 engine
 * (gemm_bf16_fp32.c's packers, gemm.c's few-row loops): round8 (AVX2),
 * widen8_packed (bf16 bits, with round8's flush and quieting) and round16
 * (AVX-512F), in integer operations: NaN quieted, a zero exponent flushed
 * to a signed zero, else x + 0x7FFF + ((x >> 16) & 1) cut to its top 16
 * bits. The bits of the scalar function, lane by lane; round16_bf the
 * same in vcvtneps2bf16. Included where TG_SIMD_F32. */
#ifndef TG_BF16_ROUND_SIMD_H
#define TG_BF16_ROUND_SIMD_H
#include <stdint.h>

#include "half.h"
#include "simd.h"

#if TG_SIMD_F32
TG_AVX2 static inline __m256 round8(__m256 v) {
    __m256i x = _mm256_castps_si256(v), ax = _mm256_and_si256(x, _mm256_set1_epi32(0x7FFFFFFF));
    __m256i r = _mm256_add_epi32(x, _mm256_add_epi32(_mm256_set1_epi32(0x7FFF),
                                                     _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1))));
    __m256i nan = _mm256_cmpgt_epi32(ax, _mm256_set1_epi32(0x7F800000)); /* ax >= 0: a signed compare will do */
    __m256i daz = _mm256_cmpeq_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7F800000)), _mm256_setzero_si256());
    r = _mm256_blendv_epi8(r, _mm256_or_si256(x, _mm256_set1_epi32(0x00400000)), nan);
    r = _mm256_and_si256(r, _mm256_set1_epi32((int)0xFFFF0000u));
    r = _mm256_blendv_epi8(r, _mm256_and_si256(x, _mm256_set1_epi32((int)0x80000000u)), daz);
    return _mm256_castsi256_ps(r);
}
/* 8 bf16 values from h as the bf16 GEMM packs them (bf_h, gemm_bf16_pack.h):
 * widened exactly (zero-extend, shift), then what round8 would change in
 * a value that is already bf16, and only that: a zero exponent (zero,
 * subnormal) to a signed zero, a NaN made quiet. Its rounding step leaves
 * such a value as it is (x + 0x7FFF + lsb never carries out of the zero
 * low half), so the bits are round8's; 10 instructions where widening
 * through round8 took 16 (the packers widen most of a bf16 step's
 * operands: activations and gradients stored as bf16). */
TG_AVX2 static inline __m256 widen8_packed(const uint16_t *h) {
    __m256i x = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)h)), 16);
    __m256i daz = _mm256_cmpeq_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7F800000)), _mm256_setzero_si256());
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7FFFFFFF)), _mm256_set1_epi32(0x7F800000));
    x = _mm256_or_si256(x, _mm256_and_si256(nan, _mm256_set1_epi32(0x00400000)));
    x = _mm256_andnot_si256(_mm256_and_si256(daz, _mm256_set1_epi32(0x7FFF0000)), x); /* daz: the sign alone */
    return _mm256_castsi256_ps(x);
}
/* Value i as round8 or widen8_packed gives it, one lane alone (the
 * packers' and the few-row loops' scalar tails and broadcasts): a float
 * f[i] rounded, or (h set) the bf16 bits h[i] widened through the same
 * rounding, which only flushes a subnormal and quiets a NaN. */
static inline float packed1(const float *f, const uint16_t *h, size_t i) {
    return tg__bf16_round_daz(h ? tg__bf16_to_float(h[i]) : f[i]);
}
TG_AVX512 static inline __m512 round16(__m512 v) {
    __m512i x = _mm512_castps_si512(v), top = _mm512_set1_epi32((int)0xFFFF0000u);
    __m512i r = _mm512_add_epi32(x, _mm512_add_epi32(_mm512_set1_epi32(0x7FFF),
                                                     _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1))));
    __mmask16 nan =
        _mm512_cmpgt_epu32_mask(_mm512_and_si512(x, _mm512_set1_epi32(0x7FFFFFFF)), _mm512_set1_epi32(0x7F800000));
    __mmask16 daz = _mm512_testn_epi32_mask(x, _mm512_set1_epi32(0x7F800000));
    r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(x, _mm512_set1_epi32(0x00400000)));
    r = _mm512_and_si512(r, top);
    r = _mm512_mask_mov_epi32(r, daz, _mm512_and_si512(x, _mm512_set1_epi32((int)0x80000000u)));
    return _mm512_castsi512_ps(r);
}
/* round16 in one instruction where the CPU has AVX-512 BF16:
 * vcvtneps2bf16 rounds to nearest even, flushes a subnormal input to a
 * signed zero and quiets a NaN (its top half | 0x40): tg__bf16_round_daz
 * (half.h, checked bit for bit on this CPU; tests/test_attention_bf16.c
 * checks it lane by lane); widened back exactly (zero-extend, shift). */
TG_AVX512_BF16 static inline __m512 round16_bf(__m512 v) {
    __m256i h = (__m256i)_mm512_cvtneps_pbh(v);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
#endif
#endif
