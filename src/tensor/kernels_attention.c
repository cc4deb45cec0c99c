/* The kernels of the fused attention (autograd/ops_attention.c), declared
 * in kernels.h, each with its portable twin, chosen at run time (simd.h):
 * the blocked path's row kernels (AVX2 loops for the float build), and the
 * short sequences' whole-entry forward and backward (AVX2, AVX-512, and
 * AVX-512 BF16 for its bf16 roundings; their body is
 * kernels_attention_short.h), and the copies of bf16 storage's rows. */
#include "kernels.h"

#include <math.h>

#include "exp_simd.h"
#include "half.h"
#include "bf16_round_simd.h"
#include "simd.h"
#include "transpose_simd.h"

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
/* AVX-512: the tails in masked lanes, not a scalar loop (the diagonal
 * tiles' rows have every length up to 64). The same results: a max is
 * exact, the products and dS the same formula per element. */
TG_AVX512 static tg_real row_max_avx512(const tg_real *s, int n, tg_real m) {
    __m512 v = _mm512_set1_ps(m);
    for (int j = 0; j < n; j += 16)
        v = _mm512_mask_max_ps(v, lanes16(n - j), v, _mm512_maskz_loadu_ps(lanes16(n - j), s + j));
    return _mm512_reduce_max_ps(v);
}
TG_AVX512 static void mul_avx512(tg_real *a, const tg_real *b, int n) {
    for (int j = 0; j < n; j += 16) {
        __mmask16 k = lanes16(n - j);
        _mm512_mask_storeu_ps(a + j, k,
                              _mm512_mul_ps(_mm512_maskz_loadu_ps(k, a + j), _mm512_maskz_loadu_ps(k, b + j)));
    }
}
/* With z, as ds_avx2 rounds: dp z - D fused up to the last multiple of 8,
 * the rest (the AVX2 loop's scalar tail) unfused: the same bits. */
TG_AVX512 static void ds_avx512(tg_real *p, const tg_real *dp, const tg_real *z, tg_real D, int n) {
    __m512 vd = _mm512_set1_ps(D);
    int nv = z ? n / 8 * 8 : n;
    for (int j = 0; j < nv; j += 16) {
        __mmask16 k = lanes16(nv - j);
        __m512 g = _mm512_maskz_loadu_ps(k, dp + j);
        g = z ? _mm512_fmsub_ps(g, _mm512_maskz_loadu_ps(k, z + j), vd) : _mm512_sub_ps(g, vd);
        _mm512_mask_storeu_ps(p + j, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, p + j), g));
    }
    ds_portable(p + nv, dp + nv, z ? z + nv : NULL, D, n - nv);
}
#define ATT_VEC_ROWS 1
#else
#define ATT_VEC_ROWS 0
#endif

tg_real tg_k_max_row(const tg_real *s, int n, tg_real m) {
    return TG_PICK(ATT_VEC_ROWS, row_max_portable, row_max_avx2, row_max_avx512)(s, n, m);
}
void tg_k_mul_row(tg_real *a, const tg_real *b, int n) {
    TG_PICK(ATT_VEC_ROWS, mul_portable, mul_avx2, mul_avx512)(a, b, n);
}
void tg_k_attention_ds_row(tg_real *p, const tg_real *dp, const tg_real *z, tg_real D, int n) {
    TG_PICK(ATT_VEC_ROWS, ds_portable, ds_avx2, ds_avx512)(p, dp, z, D, n);
}

/* Rows of bf16 storage widened (exact; one loop built per ISA, simd.h) or
 * rounded (tg__bf16_from_float, as tg_to_bf16: tg_k_to_bf16_row, a row at
 * a time): the op's rows of q, k, v and out lie 3 h d or h d apart, so
 * the copies go row by row. */
TG_KERNEL_BODY void attn_widen_body(int rows, int cols, const uint16_t *src, int64_t rs, tg_real *dst, int ld) {
    for (int i = 0; i < rows; i++)
        for (int c = 0; c < cols; c++) dst[(size_t)i * ld + c] = (tg_real)tg__bf16_to_float(src[i * rs + c]);
}
TG_ISA_DISPATCH(attn_widen, (int rows, int cols, const uint16_t *src, int64_t rs, tg_real *dst, int ld),
                (rows, cols, src, rs, dst, ld))
void tg_k_attn_widen(int rows, int cols, const uint16_t *src, int64_t rs, tg_real *dst, int ld) {
    attn_widen(rows, cols, src, rs, dst, ld);
}
void tg_k_attn_narrow(int rows, int cols, const tg_real *src, int ld, uint16_t *dst, int64_t rs) {
    for (int i = 0; i < rows; i++) tg_k_to_bf16_row(src + (size_t)i * ld, dst + i * rs, cols);
}

/* out[i] = sum_c x[i, c] y[i, c] over n rows (the backward's D = rowsum(dO
 * o O)): each row's sum from +0 in c order, a multiply and an add per
 * term (no contraction under -std=c11). y as reals, or as bf16 bits (y16:
 * O under bf16 storage), widened exactly. */
static void row_dots_portable(int n, int cols, const tg_real *x, int64_t xs, const tg_real *y, const uint16_t *y16,
                              int64_t ys, tg_real *out) {
    for (int i = 0; i < n; i++) {
        const tg_real *xr = x + i * xs;
        tg_real s = 0;
        if (y16)
            for (int c = 0; c < cols; c++) s += xr[c] * (tg_real)tg__bf16_to_float(y16[i * ys + c]);
        else
            for (int c = 0; c < cols; c++) s += xr[c] * y[i * ys + c];
        out[i] = s;
    }
}

#if TG_SIMD_F32
/* The same sums on 8 rows at once, a row a lane (row_dots_avx512's scheme
 * at AVX2's width, with 8 x 8 blocks): every row's operations, in its
 * order. A bf16 y's block is widened first, a row of 8 in one load. */
TG_AVX2 static void row_dots_avx2(int n, int cols, const float *x, int64_t xs, const float *y, const uint16_t *y16,
                                  int64_t ys, float *out) {
    _Alignas(32) float tx[8 * 8], ty[8 * 8], wy[8 * 8];
    for (int i0 = 0; i0 < n; i0 += 8) {
        const int rows = n - i0 < 8 ? n - i0 : 8;
        __m256 s = _mm256_setzero_ps();
        for (int c0 = 0; c0 < cols; c0 += 8) {
            const int w = cols - c0 < 8 ? cols - c0 : 8;
            transpose8(x + i0 * xs + c0, xs, rows, w, tx, 8);
            if (y16) {
                for (int r = 0; r < rows; r++) {
                    const uint16_t *yr = y16 + (i0 + r) * ys + c0;
                    if (w == 8) {
                        __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)yr));
                        _mm256_store_si256((__m256i *)(void *)(wy + 8 * r), _mm256_slli_epi32(v, 16));
                    } else {
                        for (int c = 0; c < w; c++) wy[8 * r + c] = tg__bf16_to_float(yr[c]);
                    }
                }
                transpose8(wy, 8, rows, w, ty, 8);
            } else {
                transpose8(y + i0 * ys + c0, ys, rows, w, ty, 8);
            }
            for (int c = 0; c < w; c++)
                s = _mm256_add_ps(s, _mm256_mul_ps(_mm256_load_ps(tx + 8 * c), _mm256_load_ps(ty + 8 * c)));
        }
        if (rows == 8) {
            _mm256_storeu_ps(out + i0, s);
        } else {
            _Alignas(32) float t[8];
            _mm256_store_ps(t, s);
            for (int r = 0; r < rows; r++) out[i0 + r] = t[r];
        }
    }
}

/* The same sums on 16 rows at once, a row a lane: each 16 x 16 block of x
 * and of y transposed (transpose16), so that column c of the 16 rows is
 * one vector, then s += x_c * y_c for c in order: every row's operations,
 * in its order. The row loop's sums are a chain of dependent adds, short
 * (dv terms) and one per row; here 16 rows share each add. A bf16 y's
 * block is widened first (a whole row of 16 in one load; a tail of fewer
 * columns one value at a time: 256-bit masked loads of 16-bit words would
 * need AVX-512 BW). */
TG_AVX512 static void row_dots_avx512(int n, int cols, const float *x, int64_t xs, const float *y, const uint16_t *y16,
                                      int64_t ys, float *out) {
    _Alignas(64) float tx[16 * 16], ty[16 * 16], wy[16 * 16];
    for (int i0 = 0; i0 < n; i0 += 16) {
        const int rows = n - i0 < 16 ? n - i0 : 16;
        __m512 s = _mm512_setzero_ps();
        for (int c0 = 0; c0 < cols; c0 += 16) {
            const int w = cols - c0 < 16 ? cols - c0 : 16;
            transpose16(x + i0 * xs + c0, xs, rows, w, tx, 16);
            if (y16) {
                for (int r = 0; r < rows; r++) {
                    const uint16_t *yr = y16 + (i0 + r) * ys + c0;
                    if (w == 16) {
                        __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)yr));
                        _mm512_store_si512(wy + 16 * r, _mm512_slli_epi32(v, 16));
                    } else {
                        for (int c = 0; c < w; c++) wy[16 * r + c] = tg__bf16_to_float(yr[c]);
                    }
                }
                transpose16(wy, 16, rows, w, ty, 16);
            } else {
                transpose16(y + i0 * ys + c0, ys, rows, w, ty, 16);
            }
            for (int c = 0; c < w; c++)
                s = _mm512_add_ps(s, _mm512_mul_ps(_mm512_load_ps(tx + 16 * c), _mm512_load_ps(ty + 16 * c)));
        }
        _mm512_mask_storeu_ps(out + i0, lanes16(rows), s);
    }
}
#endif

void tg_k_attn_row_dots(int n, int cols, const tg_real *x, int64_t xs, const tg_real *y, const uint16_t *y16,
                        int64_t ys, tg_real *out) {
    TG_PICK(TG_SIMD_F32, row_dots_portable, row_dots_avx2, row_dots_avx512)(n, cols, x, xs, y, y16, ys, out);
}

/* tg_k_attn_store_rows (kernels.h): a + 0 or g + a per
 * element, the same adds at any width (the + 0 keeps a -0 from reaching a
 * fresh gradient, as adding to a zeroed one would). */
static void store_rows_portable(int n, int width, const tg_real *acc, tg_real *g, int64_t rs, bool set) {
    for (int i = 0; i < n; i++) {
        tg_real *restrict r = g + i * rs;
        const tg_real *restrict a = acc + (size_t)i * width;
        if (set)
            for (int c = 0; c < width; c++) r[c] = a[c] + (tg_real)0;
        else
            for (int c = 0; c < width; c++) r[c] += a[c];
    }
}

#if TG_SIMD_F32
/* store_rows_avx512's streaming stores at AVX2's width: two 32-byte
 * stores fill each 64-byte line whole, so it is never read in. */
TG_AVX2 static void store_rows_avx2(int n, int width, const float *acc, float *g, int64_t rs, bool set) {
    if (!set || width % 16 != 0 || ((uintptr_t)g | (uintptr_t)(rs * 4)) % 64 != 0) {
        store_rows_portable(n, width, acc, g, rs, set);
        return;
    }
    const __m256 zero = _mm256_setzero_ps();
    for (int i = 0; i < n; i++)
        for (int c = 0; c < width; c += 8)
            _mm256_stream_ps(g + i * rs + c, _mm256_add_ps(_mm256_loadu_ps(acc + (size_t)i * width + c), zero));
    _mm_sfence();
}

/* Under set, rows of whole aligned 64-byte lines (gpt's head sizes 32 and
 * 64 in a 64-byte aligned gradient) go out with vmovntps: each line is
 * written whole, so reading it in first (what a plain store does) is a
 * wasted trip to memory; the fence orders them before the op returns. */
TG_AVX512 static void store_rows_avx512(int n, int width, const float *acc, float *g, int64_t rs, bool set) {
    if (!set || width % 16 != 0 || ((uintptr_t)g | (uintptr_t)(rs * 4)) % 64 != 0) {
        store_rows_portable(n, width, acc, g, rs, set);
        return;
    }
    const __m512 zero = _mm512_setzero_ps();
    for (int i = 0; i < n; i++)
        for (int c = 0; c < width; c += 16)
            _mm512_stream_ps(g + i * rs + c, _mm512_add_ps(_mm512_loadu_ps(acc + (size_t)i * width + c), zero));
    _mm_sfence();
}
#endif

void tg_k_attn_store_rows(int n, int width, const tg_real *acc, tg_real *g, int64_t rs, bool set) {
    TG_PICK(TG_SIMD_F32, store_rows_portable, store_rows_avx2, store_rows_avx512)(n, width, acc, g, rs, set);
}

/* ---- short sequences: one head-batch entry at a time ---------------------------
 * With K <= TG_ATT_SHORT_MAX keys a whole entry's scores fit in L1, so its
 * forward and backward are done in one go, without the 64 x 64 tiles and
 * the GEMM calls of the blocked path: a row of scores is KP = K rounded up
 * to AL lanes (zeros past K), each product is the same kernel on four rows
 * (mm4), four rows' softmax go in step. The body is written once on
 * vectors (kernels_attention_short.h) and built for scalars (the portable
 * twin, and the double build), AVX2 and AVX-512 below. Each output element
 * is one entry's, and an entry is one call: the same bits for any thread
 * count. */
enum { AL = 16 }; /* lanes a row is padded to: one AVX-512 vector of floats */

static int pad_lanes(int n) { return (n + AL - 1) / AL * AL; }
int tg_k_attention_short_stride(int K) { return pad_lanes(K); }

/* The forward's k^T, v, four rows of scores and of output; the backward's
 * v^T, k, q, dO (each padded when its rows are not whole lanes), dS (and 3
 * rows mm4 may write past it), four rows of a gradient, P o Z/(1-p). */
size_t tg_k_attention_short_scratch(int Q, int K, int d, int dv) {
    size_t KP = (size_t)pad_lanes(K), DP = (size_t)pad_lanes(d), VP = (size_t)pad_lanes(dv);
    size_t fwd = d * KP + K * VP + 4 * KP + 4 * VP;
    size_t bwd = dv * KP + K * DP + Q * DP + Q * VP + (size_t)(2 * Q + 3) * KP + 4 * (DP > VP ? DP : VP);
    return fwd > bwd ? fwd : bwd;
}

/* rows x cols of src (rows rs apart) -> dst, rows ld apart, zeros past cols. */
TG_KERNEL_BODY void pack_rows(const tg_real *src, int64_t rs, int rows, int cols, tg_real *dst, int ld) {
    for (int i = 0; i < rows; i++) {
        for (int c = 0; c < cols; c++) dst[(size_t)i * ld + c] = src[i * rs + c];
        for (int c = cols; c < ld; c++) dst[(size_t)i * ld + c] = 0;
    }
}
/* Rows r0.. r0 + 3 of a matrix of n rows (past n - 1: row n - 1 again,
 * computed, never stored). */
TG_KERNEL_BODY void rows4(const tg_real *base, int64_t rs, int r0, int n, const tg_real *a[4]) {
    for (int r = 0; r < 4; r++) a[r] = base + (int64_t)(r0 + r < n ? r0 + r : n - 1) * rs;
}

/* The portable twin: vectors of one real. */
#define SV(name)                                  name##_portable
#define SV_FN                                     static inline __attribute__((always_inline))
#define SV_ENTRY                                  static
#define VEC                                       tg_real
#define VL                                        1
#define MM_NV                                     16
#define V_LOAD(p)                                 (*(p))
#define V_STORE(p, v)                             (*(p) = (v))
#define V_ZERO()                                  ((tg_real)0)
#define V_SET1(x)                                 ((tg_real)(x))
#define V_ADD(a, b)                               ((a) + (b))
#define V_SUB(a, b)                               ((a) - (b))
#define V_MUL(a, b)                               ((a) * (b))
#define V_FMA(a, b, c)                            ((a) * (b) + (c))
#define V_MAX(a, b)                               ((a) > (b) ? (a) : (b))
#define V_EXP(v)                                  TG_M(exp)(v)
#define V_BELOW_OR(v, n, x)                       ((n) > 0 ? (v) : (tg_real)(x))
#define V_ROUND(v)                                ((tg_real)tg__bf16_round_daz((float)(v)))
#define V_HSUM(v)                                 (v)
#define V_HMAX(v)                                 (v)
#define V_TRANSPOSE(src, rs, rows, cols, dst, ld) (*(dst) = (rows) > 0 ? *(src) : 0) /* a 1 x 1 tile */
#include "kernels_attention_short.h"

#if TG_SIMD_F32
/* AVX2: 8 floats. */
TG_AVX2 static inline __m256 below_or8(__m256 v, int n, float x) {
    __m256i keep = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return _mm256_blendv_ps(_mm256_set1_ps(x), v, _mm256_castsi256_ps(keep));
}
TG_AVX2 static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
TG_AVX2 static inline float hmax8(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)));
}
#define SV(name)            name##_avx2
#define SV_FN               TG_AVX2 static inline __attribute__((always_inline))
#define SV_ENTRY            TG_AVX2 static
#define VEC                 __m256
#define VL                  8
#define MM_NV               2
#define V_LOAD(p)           _mm256_loadu_ps(p)
#define V_STORE(p, v)       _mm256_storeu_ps(p, v)
#define V_ZERO()            _mm256_setzero_ps()
#define V_SET1(x)           _mm256_set1_ps(x)
#define V_ADD(a, b)         _mm256_add_ps(a, b)
#define V_SUB(a, b)         _mm256_sub_ps(a, b)
#define V_MUL(a, b)         _mm256_mul_ps(a, b)
#define V_FMA(a, b, c)      _mm256_fmadd_ps(a, b, c)
#define V_MAX(a, b)         _mm256_max_ps(a, b)
#define V_EXP(v)            tg_exp8(v)
#define V_BELOW_OR(v, n, x) below_or8(v, n, x)
#define V_ROUND(v)          round8(v)
#define V_HSUM(v)           hsum8(v)
#define V_HMAX(v)           hmax8(v)
#define V_TRANSPOSE         transpose8
#include "kernels_attention_short.h"

/* AVX-512: 16 floats, the lanes past n masked (lanes16, transpose_simd.h). */
#define SV(name)            name##_avx512
#define SV_FN               TG_AVX512 static inline __attribute__((always_inline))
#define SV_ENTRY            TG_AVX512 static
#define VEC                 __m512
#define VL                  16
#define MM_NV               2
#define V_LOAD(p)           _mm512_loadu_ps(p)
#define V_STORE(p, v)       _mm512_storeu_ps(p, v)
#define V_ZERO()            _mm512_setzero_ps()
#define V_SET1(x)           _mm512_set1_ps(x)
#define V_ADD(a, b)         _mm512_add_ps(a, b)
#define V_SUB(a, b)         _mm512_sub_ps(a, b)
#define V_MUL(a, b)         _mm512_mul_ps(a, b)
#define V_FMA(a, b, c)      _mm512_fmadd_ps(a, b, c)
#define V_MAX(a, b)         _mm512_max_ps(a, b)
#define V_EXP(v)            tg_exp16(v)
#define V_BELOW_OR(v, n, x) _mm512_mask_blend_ps(lanes16(n), _mm512_set1_ps(x), v)
#define V_ROUND(v)          round16(v)
#define V_HSUM(v)           _mm512_reduce_add_ps(v)
#define V_HMAX(v)           _mm512_reduce_max_ps(v)
#define V_TRANSPOSE         transpose16
#define SV_KEEP_VEC
#include "kernels_attention_short.h"

/* AVX-512 BF16: the AVX-512 body (its vector macros kept) with its
 * roundings (the weights and dS under bf16 products) in vcvtneps2bf16,
 * one instruction where round16 is about ten: the same bits. */
#undef SV_KEEP_VEC
#define SV(name)   name##_avx512bf16
#define SV_FN      TG_AVX512_BF16 static inline __attribute__((always_inline))
#define SV_ENTRY   TG_AVX512_BF16 static
#define V_ROUND(v) round16_bf(v)
#include "kernels_attention_short.h"
#define SHORT_PICK(name) \
    (tg_isa_level() >= TG_ISA_AVX512_BF16 ? name##_avx512bf16 : TG_PICK(1, name##_portable, name##_avx2, name##_avx512))
#else
#define SHORT_PICK(name) name##_portable
#endif

void tg_k_attention_short_forward(const tg_attn_entry *e, const tg_real *zf, tg_real *out, tg_real *P,
                                  tg_real *scratch) {
    SHORT_PICK(short_forward)(e, zf, out, P, scratch);
}
void tg_k_attention_short_backward(const tg_attn_entry *e, const tg_real *P, const tg_real *zf, const tg_real *dO,
                                   tg_real *gq, tg_real *gk, tg_real *gv, tg_real *scratch) {
    SHORT_PICK(short_backward)(e, P, zf, dO, gq, gk, gv, scratch);
}
