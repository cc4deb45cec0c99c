/* The fused attention's block products (autograd/ops_attention.c's tiles,
 * at most 64 x 64 with an inner size of at most 64: q k^T, P v, dO v^T,
 * P^T dO, dS k, dS^T q), declared in kernels.h:
 *
 *   tg_k_attn_mm:   C = alpha op(A) B + beta C, B untransposed, rows ldb apart;
 *   tg_k_attn_pack: a block of rows copied, or transposed, and (bf16)
 *                   rounded as the bf16 GEMM rounds its operands.
 *
 * Why not tg_k_gemm: at these sizes its packed path spends a good part of
 * each call packing and setting up its blocks for a product of a few
 * thousand cycles (bench/measured.md, "Attention, session 4"). Here B is
 * read as it lies (the one transposed operand, k or v, is packed once per
 * tile by tg_k_attn_pack) and A is broadcast in place, with C's tile in
 * registers: 4 rows x 64 columns (16 zmm accumulators), 4 x 48, 8 x 32 or
 * 8 x 16, so that the op's 16-row chunks are whole tiles.
 *
 * The sums are tg_k_gemm's: each C(i,j) is one fused multiply-add chain
 * over the inner index in order from zero, then alpha acc (+ beta C(i,j),
 * when beta != 0), as its float kernels (all ISA levels with FMA) do for
 * an inner size below its KC block: the same bits. Where there is no
 * AVX-512 path (portable, AVX2, the double build) it is tg_k_gemm.
 *
 * Under bf16 (tg_set_precision) the op rounds each operand once
 * (tg_k_attn_pack, or in place) and multiplies the rounded values here: a
 * product of two bf16 values is exact in float, so this is the bf16
 * GEMM's arithmetic with its fp32 engine's summation order (gemm_bf16.c). */
#include "kernels.h"

#include "half.h"
#include "bf16_round_simd.h"
#include "simd.h"
#include "transpose_simd.h"

/* dst = rows x cols of src (rows rs apart), rows ld apart, each value
 * bf16(x) (tg__bf16_round_daz) when round; dst == src rounds in place. */
static void copy_portable(int rows, int cols, const tg_real *src, int64_t rs, bool round, tg_real *dst, int ld) {
    for (int i = 0; i < rows; i++)
        for (int c = 0; c < cols; c++) {
            tg_real x = src[i * rs + c];
            dst[(size_t)i * ld + c] = round ? (tg_real)tg__bf16_round_daz((float)x) : x;
        }
}

/* dst[c, i] = src[i, c]: cols x rows, rows of dst ld apart. */
static void transpose_portable(int rows, int cols, const tg_real *src, int64_t rs, tg_real *dst, int ld) {
    for (int c = 0; c < cols; c++)
        for (int i = 0; i < rows; i++) dst[(size_t)c * ld + i] = src[i * rs + c];
}

#if TG_SIMD_F32
/* copy_portable on 8 lanes (round8), the last few values as there: the
 * same bits. The scalar loop was 2.6% of a gpt-small bf16 step on an
 * AVX2-only Zen 4 (perf). */
TG_AVX2 static void copy_avx2(int rows, int cols, const float *src, int64_t rs, bool round, float *dst, int ld) {
    for (int i = 0; i < rows; i++) {
        const float *s = src + i * rs;
        float *d = dst + (size_t)i * ld;
        int c = 0;
        for (; c + 8 <= cols; c += 8) {
            __m256 v = _mm256_loadu_ps(s + c);
            _mm256_storeu_ps(d + c, round ? round8(v) : v);
        }
        for (; c < cols; c++) d[c] = round ? tg__bf16_round_daz(s[c]) : s[c];
    }
}
/* 8 x 8 tiles; a tile's store writes 8 lanes of each dst row (zeros past
 * rows), within ld's room for rows rounded up to 16. */
TG_AVX2 static void transpose_avx2(int rows, int cols, const float *src, int64_t rs, float *dst, int ld) {
    for (int c = 0; c < cols; c += 8)
        for (int i = 0; i < rows; i += 8)
            transpose8(src + i * rs + c, rs, rows - i, cols - c, dst + (size_t)c * ld + i, ld);
}
/* copy_portable on 16 lanes, rounding with ROUND: round16 (AVX-512) or
 * round16_bf (vcvtneps2bf16, AVX-512 BF16), the same bits. */
#define COPY_ROWS(name, TARGET, ROUND)                                                                          \
    TARGET static void name(int rows, int cols, const float *src, int64_t rs, bool round, float *dst, int ld) { \
        for (int i = 0; i < rows; i++) {                                                                        \
            int c = 0;                                                                                          \
            for (; c + 16 <= cols; c += 16) {                                                                   \
                __m512 v = _mm512_loadu_ps(src + i * rs + c);                                                   \
                _mm512_storeu_ps(dst + (size_t)i * ld + c, round ? ROUND(v) : v);                               \
            }                                                                                                   \
            if (c < cols) {                                                                                     \
                __mmask16 m = lanes16(cols - c);                                                                \
                __m512 v = _mm512_maskz_loadu_ps(m, src + i * rs + c);                                          \
                _mm512_mask_storeu_ps(dst + (size_t)i * ld + c, m, round ? ROUND(v) : v);                       \
            }                                                                                                   \
        }                                                                                                       \
    }
COPY_ROWS(copy_avx512, TG_AVX512, round16)
COPY_ROWS(copy_avx512bf, TG_AVX512_BF16, round16_bf)
#undef COPY_ROWS
/* 16 x 16 tiles; a tile's store writes 16 lanes of each dst row (zeros
 * past rows), so ld must leave room for rows rounded up to 16. */
TG_AVX512 static void transpose_avx512(int rows, int cols, const float *src, int64_t rs, float *dst, int ld) {
    for (int c = 0; c < cols; c += 16)
        for (int i = 0; i < rows; i += 16)
            transpose16(src + i * rs + c, rs, rows - i, cols - c, dst + (size_t)c * ld + i, ld);
}

/* The MR x (NV 16) tile of C at rows i0.. (m <= MR of them stored; the
 * others read row 0 of A and are dropped), the last vector's lanes in
 * `last`: one FMA chain per element, inner index in order (the header).
 * The accumulators are named variables (c<row>_<vector>), written out by
 * the macros below, so that they stay in zmm registers. */
#define VFOR1(X, r)    X(r, 0)
#define VFOR2(X, r)    X(r, 0) X(r, 1)
#define VFOR3(X, r)    X(r, 0) X(r, 1) X(r, 2)
#define VFOR4(X, r)    X(r, 0) X(r, 1) X(r, 2) X(r, 3)
#define RFOR4(X, V)    X(0, V) X(1, V) X(2, V) X(3, V)
#define RFOR8(X, V)    RFOR4(X, V) X(4, V) X(5, V) X(6, V) X(7, V)
#define ACC_DECL(r, u) __m512 c##r##_##u = _mm512_setzero_ps();
#define ROW_DECL(r, V) V(ACC_DECL, r) const float *a##r = A + (r < m ? r : 0) * ars;
#define B_LOAD(r, u)   __m512 b##u = u == NV - 1 ? _mm512_maskz_loadu_ps(last, b + 16 * u) : _mm512_loadu_ps(b + 16 * u);
#define ACC_FMA(r, u)  c##r##_##u = _mm512_fmadd_ps(x##r, b##u, c##r##_##u);
#define ROW_FMA(r, V)                          \
    {                                          \
        __m512 x##r = _mm512_set1_ps(a##r[o]); \
        V(ACC_FMA, r)                          \
    }
#define ACC_STORE(r, u)                                                                           \
    {                                                                                             \
        float *cr = C + (size_t)(r)*ldc + 16 * u;                                                 \
        __mmask16 lanes = u == NV - 1 ? last : 0xFFFF;                                            \
        __m512 v = _mm512_mul_ps(va, c##r##_##u);                                                 \
        if (beta != 0) v = _mm512_add_ps(v, _mm512_mul_ps(vb, _mm512_maskz_loadu_ps(lanes, cr))); \
        _mm512_mask_storeu_ps(cr, lanes, v);                                                      \
    }
#define ROW_STORE(r, V) \
    if (r < m) { V(ACC_STORE, r) }
#define MM_TILE(name, NV_, VFOR, RFOR)                                                                              \
    TG_AVX512 static void name(int m, int k, float alpha, const float *A, int64_t ars, int64_t acs, const float *B, \
                               int64_t ldb, __mmask16 last, float beta, float *C, int ldc) {                        \
        enum { NV = NV_ };                                                                                          \
        RFOR(ROW_DECL, VFOR)                                                                                        \
        for (int t = 0; t < k; t++) {                                                                               \
            const float *b = B + t * ldb;                                                                           \
            int64_t o = t * acs;                                                                                    \
            VFOR(B_LOAD, _)                                                                                         \
            RFOR(ROW_FMA, VFOR)                                                                                     \
        }                                                                                                           \
        __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);                                               \
        RFOR(ROW_STORE, VFOR)                                                                                       \
    }
MM_TILE(tile_4x64, 4, VFOR4, RFOR4)
MM_TILE(tile_4x48, 3, VFOR3, RFOR4)
MM_TILE(tile_8x32, 2, VFOR2, RFOR8)
MM_TILE(tile_8x16, 1, VFOR1, RFOR8)

/* Columns [j0, j0 + nn) of C (nn <= 64) in tiles of rows: the widest
 * register tile that nn's vectors allow. */
#define MM_ROWS(tile, MR)                                                                      \
    for (int i0 = 0; i0 < m; i0 += MR)                                                         \
    tile(m - i0 < MR ? m - i0 : MR, k, alpha, A + i0 * ars, ars, acs, B + j0, ldb, last, beta, \
         C + (size_t)i0 * ldc + j0, ldc)
TG_AVX512 static void mm_avx512(bool trans_a, int m, int n, int k, float alpha, const float *A, int lda, const float *B,
                                int ldb, float beta, float *C, int ldc) {
    int64_t ars = trans_a ? 1 : lda, acs = trans_a ? lda : 1;
    for (int j0 = 0; j0 < n; j0 += 64) {
        int nn = n - j0 < 64 ? n - j0 : 64, nv = (nn + 15) / 16;
        __mmask16 last = lanes16(nn - 16 * (nv - 1));
        switch (nv) {
        case 4: MM_ROWS(tile_4x64, 4); break;
        case 3: MM_ROWS(tile_4x48, 4); break;
        case 2: MM_ROWS(tile_8x32, 8); break;
        default: MM_ROWS(tile_8x16, 8); break;
        }
    }
}
#undef MM_ROWS
#define ATT_MM_AVX512 1
#else
#define ATT_MM_AVX512 0
#endif

void tg_k_attn_mm(bool trans_a, int m, int n, int k, tg_real alpha, const tg_real *A, int lda, const tg_real *B,
                  int ldb, tg_real beta, tg_real *C, int ldc) {
#if ATT_MM_AVX512
    if (tg_isa_level() >= TG_ISA_AVX512 && m > 0 && n > 0 && k > 0 && alpha != 0) {
        mm_avx512(trans_a, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
#endif
    tg_k_gemm(trans_a, false, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

void tg_k_attn_pack(int rows, int cols, const tg_real *src, int64_t rs, bool transpose, bool bf16, tg_real *dst,
                    int ld) {
    if (rows <= 0 || cols <= 0) return;
    void (*copy)(int, int, const tg_real *, int64_t, bool, tg_real *, int) = copy_portable;
    void (*transpose_rows)(int, int, const tg_real *, int64_t, tg_real *, int) = transpose_portable;
#if TG_SIMD_F32
    if (tg_isa_level() >= TG_ISA_AVX2) copy = copy_avx2, transpose_rows = transpose_avx2;
#endif
#if ATT_MM_AVX512
    if (tg_isa_level() >= TG_ISA_AVX512) copy = copy_avx512, transpose_rows = transpose_avx512;
    if (tg_isa_level() >= TG_ISA_AVX512_BF16) copy = copy_avx512bf;
#endif
    if (!transpose) {
        copy(rows, cols, src, rs, bf16, dst, ld);
        return;
    }
    transpose_rows(rows, cols, src, rs, dst, ld);
    if (bf16) copy(cols, rows, dst, ld, true, dst, ld);
}
