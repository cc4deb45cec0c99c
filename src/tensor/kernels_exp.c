/* s[j] = exp(s[j] - shift) in place, returning the sum: the inner loop of
 * every softmax (masked_softmax, the fused attention, softmax rows). In the
 * float build on a CPU with AVX2 it runs 8 lanes at a time (16 with
 * AVX-512, whose sum of a row then rounds in another order) with a
 * polynomial expf (about 1 ulp, exp_simd.h); elsewhere, and always in the
 * double build (where the tests compare paths to 1e-12), libm's exp. The
 * sum is taken in a fixed order either way, whatever the thread count. */
#include "kernels.h"

#include <math.h>

#include "exp_simd.h"
#include "simd.h"

/* The hand-written AVX2 and AVX-512 paths: x86, float build (each chosen at run time). */
#define EXP_SIMD TG_SIMD_F32

static tg_real exp_shift_portable(tg_real *s, int64_t n, tg_real shift) {
    tg_real sum = 0;
    for (int64_t j = 0; j < n; j++) {
        s[j] = TG_M(exp)(s[j] - shift);
        sum += s[j];
    }
    return sum;
}

#if EXP_SIMD
/* sum_j exp(x_j - shift) for j < n, writing each exp to out[j] unless out
 * is NULL (out may be x): exp_shift and the cross-entropy's sum_exp. */
TG_AVX2 static tg_real exp_sum_avx2(const tg_real *x, tg_real *out, int64_t n, tg_real shift) {
    __m256 vs = _mm256_set1_ps(shift), acc = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 y = tg_exp8(_mm256_sub_ps(_mm256_loadu_ps(x + j), vs));
        if (out) _mm256_storeu_ps(out + j, y);
        acc = _mm256_add_ps(acc, y);
    }
    _Alignas(32) float t[8];
    _mm256_store_ps(t, acc);
    tg_real sum = ((t[0] + t[4]) + (t[1] + t[5])) + ((t[2] + t[6]) + (t[3] + t[7]));
    for (; j < n; j++) {
        tg_real y = _mm256_cvtss_f32(tg_exp8(_mm256_set1_ps(x[j] - shift)));
        if (out) out[j] = y;
        sum += y;
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
#if EXP_SIMD
TG_AVX2 static tg_real sum_exp_avx2(const tg_real *x, int64_t n, tg_real shift) {
    return exp_sum_avx2(x, NULL, n, shift);
}
TG_AVX2 static void add_scaled_exp_avx2(tg_real *d, const tg_real *x, int64_t n, tg_real shift, tg_real scale) {
    __m256 vs = _mm256_set1_ps(shift), vk = _mm256_set1_ps(scale);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 e = tg_exp8(_mm256_sub_ps(_mm256_loadu_ps(x + j), vs));
        _mm256_storeu_ps(d + j, _mm256_add_ps(_mm256_loadu_ps(d + j), _mm256_mul_ps(vk, e)));
    }
    for (; j < n; j++) d[j] += scale * _mm256_cvtss_f32(tg_exp8(_mm256_set1_ps(x[j] - shift)));
}
#endif

tg_real tg_k_sum_exp(const tg_real *x, int64_t n, tg_real shift) {
    return TG_PICK(EXP_SIMD, sum_exp_portable, sum_exp_avx2, sum_exp_avx2)(x, n, shift);
}
void tg_k_add_scaled_exp(tg_real *d, const tg_real *x, int64_t n, tg_real shift, tg_real scale) {
    TG_PICK(EXP_SIMD, add_scaled_exp_portable, add_scaled_exp_avx2, add_scaled_exp_avx2)(d, x, n, shift, scale);
}

#if EXP_SIMD
/* A softmax row's exp and sum 16 lanes wide, the sum in 16 lanes added up
 * in a fixed tree. The fused attention is its main user. */
TG_AVX512 static tg_real exp_shift_avx512(tg_real *s, int64_t n, tg_real shift) {
    __m512 vs = _mm512_set1_ps(shift), acc = _mm512_setzero_ps();
    for (int64_t j = 0; j < n; j += 16) { /* the tail masked: lanes past n neither read nor written */
        __mmask16 m = (__mmask16)(n - j >= 16 ? 0xFFFF : (1u << (n - j)) - 1);
        __m512 y = _mm512_maskz_mov_ps(m, tg_exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, s + j), vs)));
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

#if EXP_SIMD
static tg_real exp_shift_avx2(tg_real *s, int64_t n, tg_real shift) { return exp_sum_avx2(s, s, n, shift); }
#endif
tg_real tg_k_exp_shift(tg_real *s, int64_t n, tg_real shift) {
    return TG_PICK(EXP_SIMD, exp_shift_portable, exp_shift_avx2, exp_shift_avx512)(s, n, shift);
}
