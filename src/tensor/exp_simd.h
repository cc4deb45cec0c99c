/* Cephes' expf on AVX2 and AVX-512 vectors, for the hand-written float
 * paths that need an exp inside their loops (kernels_exp.c: softmax rows
 * and the cross-entropy; kernels_attention.c: the short attention):
 * x = n ln2 + r, |r| <= ln2/2, a degree-6 polynomial in r (about 1 ulp),
 * times 2^n built in the exponent bits; 0 below -87.3 (underflow), as expf
 * rounds. Internal; include after simd.h, in a float build on x86
 * (TG_SIMD_F32). */
#ifndef TG_EXP_SIMD_H
#define TG_EXP_SIMD_H

#include "simd.h"

#if TG_SIMD_F32
/* The polynomial on one vector of x already clamped to [-87.3, 88.3],
 * written once for both widths: P is the intrinsics' prefix, V and VI the
 * float and integer vector types. */
#define EXP_POLY(NAME, TARGET, V, VI, P, ROUND, CAST)                                                                 \
    TARGET static inline V NAME(V x) {                                                                                \
        V n = ROUND(P##_mul_ps(x, P##_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); \
        V r = P##_fnmadd_ps(n, P##_set1_ps(0.693359375f), x);                                                         \
        r = P##_fnmadd_ps(n, P##_set1_ps(-2.12194440e-4f), r);                                                        \
        V p = P##_set1_ps(1.9875691500e-4f);                                                                          \
        p = P##_fmadd_ps(p, r, P##_set1_ps(1.3981999507e-3f));                                                        \
        p = P##_fmadd_ps(p, r, P##_set1_ps(8.3334519073e-3f));                                                        \
        p = P##_fmadd_ps(p, r, P##_set1_ps(4.1665795894e-2f));                                                        \
        p = P##_fmadd_ps(p, r, P##_set1_ps(1.6666665459e-1f));                                                        \
        p = P##_fmadd_ps(p, r, P##_set1_ps(5.0000001201e-1f));                                                        \
        p = P##_fmadd_ps(p, P##_mul_ps(r, r), P##_add_ps(r, P##_set1_ps(1.0f)));                                      \
        VI e = P##_slli_epi32(P##_add_epi32(P##_cvtps_epi32(n), P##_set1_epi32(127)), 23);                            \
        return P##_mul_ps(p, CAST(e));                                                                                \
    }
EXP_POLY(tg_exp8_poly, TG_AVX2, __m256, __m256i, _mm256, _mm256_round_ps, _mm256_castsi256_ps)
EXP_POLY(tg_exp16_poly, TG_AVX512, __m512, __m512i, _mm512, _mm512_roundscale_ps, _mm512_castsi512_ps)
#undef EXP_POLY

/* expf for 8 lanes. */
TG_AVX2 static inline __m256 tg_exp8(__m256 x) {
    const __m256 lo = _mm256_set1_ps(-87.3f), hi = _mm256_set1_ps(88.3f);
    __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    return _mm256_andnot_ps(under, tg_exp8_poly(_mm256_min_ps(_mm256_max_ps(x, lo), hi)));
}

/* expf for 16 lanes. */
TG_AVX512 static inline __m512 tg_exp16(__m512 x) {
    const __m512 lo = _mm512_set1_ps(-87.3f), hi = _mm512_set1_ps(88.3f);
    __mmask16 keep = _mm512_cmp_ps_mask(x, lo, _CMP_GE_OQ);
    return _mm512_maskz_mov_ps(keep, tg_exp16_poly(_mm512_min_ps(_mm512_max_ps(x, lo), hi)));
}
#endif

#endif
