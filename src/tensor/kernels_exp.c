/* s[j] = exp(s[j] - shift) in place, returning the sum: the inner loop of
 * every softmax (masked_softmax, the fused attention, softmax rows). In the
 * float build on a CPU with AVX2 it runs 8 lanes at a time (16 with
 * AVX-512, whose sum of a row then rounds in another order) with a
 * polynomial expf (about 1 ulp, below); elsewhere, and always in the
 * double build (where the tests compare paths to 1e-12), libm's exp. The
 * sum is taken in a fixed order either way, whatever the thread count. */
#include "kernels.h"

#include <math.h>

#include "simd.h"

#if TG_X86 && !defined(TG_DOUBLE)
#define EXP_AVX2 1
#else
#define EXP_AVX2 0
#endif

static tg_real exp_shift_portable(tg_real *s, int64_t n, tg_real shift) {
    tg_real sum = 0;
    for (int64_t j = 0; j < n; j++) {
        s[j] = TG_M(exp)(s[j] - shift);
        sum += s[j];
    }
    return sum;
}

#if EXP_AVX2
/* expf for 8 lanes (Cephes' expf: x = n ln2 + r, |r| <= ln2/2, degree-6
 * polynomial, about 1 ulp); 0 below -87.3 (underflow), as expf rounds. */
TG_AVX2 static inline __m256 exp8(__m256 x) {
    const __m256 lo = _mm256_set1_ps(-87.3f), hi = _mm256_set1_ps(88.3f);
    __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    x = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(under, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

TG_AVX2 static tg_real exp_shift_avx2(tg_real *s, int64_t n, tg_real shift) {
    __m256 vs = _mm256_set1_ps(shift), acc = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 y = exp8(_mm256_sub_ps(_mm256_loadu_ps(s + j), vs));
        _mm256_storeu_ps(s + j, y);
        acc = _mm256_add_ps(acc, y);
    }
    _Alignas(32) float t[8];
    _mm256_store_ps(t, acc);
    tg_real sum = ((t[0] + t[4]) + (t[1] + t[5])) + ((t[2] + t[6]) + (t[3] + t[7]));
    for (; j < n; j++) {
        s[j] = _mm256_cvtss_f32(exp8(_mm256_set1_ps(s[j] - shift)));
        sum += s[j];
    }
    return sum;
}
#endif

/* The cross-entropy's two loops over a row of logits (V = 256 for a byte
 * model: 5% of a GPT step with libm's expf): the sum of exp(x_j - shift)
 * for the log-sum-exp, and d_j += scale exp(x_j - shift) for the softmax
 * in the gradient. */
static tg_real sum_exp_portable(const tg_real *x, int64_t n, tg_real shift) {
    tg_real sum = 0;
    for (int64_t j = 0; j < n; j++) sum += TG_M(exp)(x[j] - shift);
    return sum;
}
static void add_scaled_exp_portable(tg_real *d, const tg_real *x, int64_t n, tg_real shift, tg_real scale) {
    for (int64_t j = 0; j < n; j++) d[j] += scale * TG_M(exp)(x[j] - shift);
}
#if EXP_AVX2
TG_AVX2 static tg_real sum_exp_avx2(const tg_real *x, int64_t n, tg_real shift) {
    __m256 vs = _mm256_set1_ps(shift), acc = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) acc = _mm256_add_ps(acc, exp8(_mm256_sub_ps(_mm256_loadu_ps(x + j), vs)));
    _Alignas(32) float t[8];
    _mm256_store_ps(t, acc);
    tg_real sum = ((t[0] + t[4]) + (t[1] + t[5])) + ((t[2] + t[6]) + (t[3] + t[7]));
    for (; j < n; j++) sum += _mm256_cvtss_f32(exp8(_mm256_set1_ps(x[j] - shift)));
    return sum;
}
TG_AVX2 static void add_scaled_exp_avx2(tg_real *d, const tg_real *x, int64_t n, tg_real shift, tg_real scale) {
    __m256 vs = _mm256_set1_ps(shift), vk = _mm256_set1_ps(scale);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + j), vs));
        _mm256_storeu_ps(d + j, _mm256_add_ps(_mm256_loadu_ps(d + j), _mm256_mul_ps(vk, e)));
    }
    for (; j < n; j++) d[j] += scale * _mm256_cvtss_f32(exp8(_mm256_set1_ps(x[j] - shift)));
}
#endif

tg_real tg_k_sum_exp(const tg_real *x, int64_t n, tg_real shift) {
#if EXP_AVX2
    if (tg_isa_level() >= TG_ISA_AVX2) return sum_exp_avx2(x, n, shift);
#endif
    return sum_exp_portable(x, n, shift);
}

void tg_k_add_scaled_exp(tg_real *d, const tg_real *x, int64_t n, tg_real shift, tg_real scale) {
#if EXP_AVX2
    if (tg_isa_level() >= TG_ISA_AVX2) {
        add_scaled_exp_avx2(d, x, n, shift, scale);
        return;
    }
#endif
    add_scaled_exp_portable(d, x, n, shift, scale);
}

#if EXP_AVX2
/* exp8's polynomial 16 lanes wide; the row's sum in 16 lanes, added up in a
 * fixed tree. Softmax rows of the fused attention are its main user. */
TG_AVX512 static inline __m512 exp16(__m512 x) {
    const __m512 lo = _mm512_set1_ps(-87.3f), hi = _mm512_set1_ps(88.3f);
    __mmask16 keep = _mm512_cmp_ps_mask(x, lo, _CMP_GE_OQ);
    x = _mm512_min_ps(_mm512_max_ps(x, lo), hi);
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_maskz_mul_ps(keep, p, _mm512_castsi512_ps(e));
}

TG_AVX512 static tg_real exp_shift_avx512(tg_real *s, int64_t n, tg_real shift) {
    __m512 vs = _mm512_set1_ps(shift), acc = _mm512_setzero_ps();
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m512 y = exp16(_mm512_sub_ps(_mm512_loadu_ps(s + j), vs));
        _mm512_storeu_ps(s + j, y);
        acc = _mm512_add_ps(acc, y);
    }
    if (j < n) { /* the tail, masked: lanes past n neither read nor written */
        __mmask16 m = (__mmask16)((1u << (n - j)) - 1);
        __m512 y = _mm512_maskz_mov_ps(m, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, s + j), vs)));
        _mm512_mask_storeu_ps(s + j, m, y);
        acc = _mm512_add_ps(acc, y);
    }
    _Alignas(64) float t[16];
    _mm512_store_ps(t, acc);
    for (int w = 8; w >= 1; w /= 2) /* pairwise: t[i] += t[i + w] */
        for (int i = 0; i < w; i++) t[i] += t[i + w];
    return t[0];
}
#endif

tg_real tg_k_exp_shift(tg_real *s, int64_t n, tg_real shift) {
#if EXP_AVX2
    if (tg_isa_level() >= TG_ISA_AVX512) return exp_shift_avx512(s, n, shift);
    if (tg_isa_level() >= TG_ISA_AVX2) return exp_shift_avx2(s, n, shift);
#endif
    return exp_shift_portable(s, n, shift);
}
