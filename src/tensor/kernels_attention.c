/* The row kernels of the fused attention (autograd/ops_attention.c), each an
 * AVX2 loop for the float build with its portable twin beside it, chosen at
 * run time (simd.h). Declared in kernels.h. */
#include "kernels.h"

#include "simd.h"

static tg_real row_max_portable(const tg_real *s, int n, tg_real m) {
    for (int j = 0; j < n; j++) m = s[j] > m ? s[j] : m;
    return m;
}
static void mul_portable(tg_real *a, const tg_real *b, int n) {
    for (int j = 0; j < n; j++) a[j] *= b[j];
}
static void ds_portable(tg_real *p, const tg_real *dp, const tg_real *z, tg_real D, int n) {
    if (z)
        for (int j = 0; j < n; j++) p[j] = p[j] * (dp[j] * z[j] - D);
    else
        for (int j = 0; j < n; j++) p[j] = p[j] * (dp[j] - D);
}

#if TG_X86 && !defined(TG_DOUBLE)
TG_AVX2 static tg_real row_max_avx2(const tg_real *s, int n, tg_real m) {
    __m256 v = _mm256_set1_ps(m);
    int j = 0;
    for (; j + 8 <= n; j += 8) v = _mm256_max_ps(v, _mm256_loadu_ps(s + j));
    _Alignas(32) float t[8];
    _mm256_store_ps(t, v);
    for (int i = 0; i < 8; i++) m = t[i] > m ? t[i] : m;
    return row_max_portable(s + j, n - j, m);
}
TG_AVX2 static void mul_avx2(tg_real *a, const tg_real *b, int n) {
    int j = 0;
    for (; j + 8 <= n; j += 8) _mm256_storeu_ps(a + j, _mm256_mul_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j)));
    mul_portable(a + j, b + j, n - j);
}
TG_AVX2 static void ds_avx2(tg_real *p, const tg_real *dp, const tg_real *z, tg_real D, int n) {
    __m256 vd = _mm256_set1_ps(D);
    int j = 0;
    if (z)
        for (; j + 8 <= n; j += 8)
            _mm256_storeu_ps(p + j, _mm256_mul_ps(_mm256_loadu_ps(p + j), _mm256_fmsub_ps(_mm256_loadu_ps(dp + j),
                                                                                          _mm256_loadu_ps(z + j), vd)));
    else
        for (; j + 8 <= n; j += 8)
            _mm256_storeu_ps(p + j, _mm256_mul_ps(_mm256_loadu_ps(p + j), _mm256_sub_ps(_mm256_loadu_ps(dp + j), vd)));
    ds_portable(p + j, dp + j, z ? z + j : NULL, D, n - j);
}
#define ATT_VEC_ROWS 1
#else
#define ATT_VEC_ROWS 0
#endif

tg_real tg_k_max_row(const tg_real *s, int n, tg_real m) {
    return TG_PICK(ATT_VEC_ROWS, row_max_portable, row_max_avx2, row_max_avx2)(s, n, m);
}
void tg_k_mul_row(tg_real *a, const tg_real *b, int n) {
    TG_PICK(ATT_VEC_ROWS, mul_portable, mul_avx2, mul_avx2)(a, b, n);
}
void tg_k_attention_ds_row(tg_real *p, const tg_real *dp, const tg_real *z, tg_real D, int n) {
    TG_PICK(ATT_VEC_ROWS, ds_portable, ds_avx2, ds_avx2)(p, dp, z, D, n);
}
