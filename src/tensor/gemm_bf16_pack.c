/* The bf16 GEMM's packers (the product and the engines that read what
 * these write: gemm_bf16.c; what the two share: gemm_bf16_pack.h): each
 * rounds a block of an operand to bf16 as it reads it (bf_at) and lays it
 * out for an engine's micro-kernel; the driver (gemm_driver.h) calls them
 * through the engine table's pack_a, pack_b and pack_b_run (the last four
 * functions here).
 *
 * The pair layout is vdpbf16ps's (gemm_bf16.c: per 32-bit lane, a pair of
 * k from each source), so depth comes in pairs: a B sliver holds, for
 * k-pair p and column j, (B(2p, j), B(2p+1, j)) at [p*2*NR + 2j], an A
 * micro-panel (A(r, 2p), A(r, 2p+1)) at [p*2*MR + 2r]; an odd K ends with
 * a zero. The AMX engines read the same B slivers and A in chunks of 16
 * pairs (pack_a_amx, below).
 *
 * Each layout has a portable packer (plain C built for each ISA:
 * TG_ISA_DISPATCH) and AVX-512 BF16 ones for the common cases, with the
 * same bits; the glue at the end picks one per block. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tensor/gemm_bf16_pack.h"
#include "tensor/simd.h"

/* ---- packing: round to bf16 and lay out in pairs ----------------------------
 * One MR-row micro-panel of op(A) (rows i0.., depth k0.., m <= MR rows, kc
 * deep): pair p of row r at dst[p*2*MR + 2r], zeros past m and past kc. */
TG_KERNEL_BODY void pack_a_panel_body(bool trans, int m, int kc, bf_src A, int i0, int k0, uint16_t *dst) {
    int kp = (kc + 1) / 2;
    for (int r = 0; r < MR; r++) {
        if (r >= m) {
            for (int p = 0; p < kp; p++) dst[p * 2 * MR + 2 * r] = dst[p * 2 * MR + 2 * r + 1] = 0;
            continue;
        }
        for (int k = 0; k < 2 * kp; k++)
            dst[(k / 2) * 2 * MR + 2 * r + (k & 1)] = k >= kc ? 0
                                                      : trans ? bf_at(A, k0 + k, i0 + r)
                                                              : bf_at(A, i0 + r, k0 + k);
    }
}

/* One NR-wide sliver of op(B) (columns j0.., n <= NR of them, depth k0..):
 * pair p of column j at dst[p*2*NR + 2j], zeros past n and past kc. */
TG_KERNEL_BODY void pack_b_sliver_body(bool trans, int n, int kc, bf_src B, int k0, int j0, uint16_t *dst) {
    int kp = (kc + 1) / 2;
    if (!trans) {
        /* op(B)(k,j) = B[k*ldb + j]: two rows of B give one row of pairs */
        for (int p = 0; p < kp; p++) {
            bool odd = 2 * p + 1 < kc;
            uint16_t *d = dst + (size_t)p * 2 * NR;
            for (int j = 0; j < n; j++) {
                d[2 * j] = bf_at(B, k0 + 2 * p, j0 + j);
                d[2 * j + 1] = odd ? bf_at(B, k0 + 2 * p + 1, j0 + j) : 0;
            }
            for (int j = 2 * n; j < 2 * NR; j++) d[j] = 0;
        }
    } else {
        /* op(B)(k,j) = B[j*ldb + k]: column j of op(B) is a row of B */
        for (int j = 0; j < NR; j++)
            for (int k = 0; k < 2 * kp; k++)
                dst[(size_t)(k / 2) * 2 * NR + 2 * j + (k & 1)] = j < n && k < kc ? bf_at(B, j0 + j, k0 + k) : 0;
    }
}

TG_ISA_DISPATCH(pack_a_panel, (bool trans, int m, int kc, bf_src A, int i0, int k0, uint16_t *dst),
                (trans, m, kc, A, i0, k0, dst))
TG_ISA_DISPATCH(pack_b_sliver, (bool trans, int n, int kc, bf_src B, int k0, int j0, uint16_t *dst),
                (trans, n, kc, B, k0, j0, dst))

/* ---- AVX-512 packers -------------------------------------------------------
 * The same bits as the loops above, laid out with whole-vector stores: the
 * scalar loops' 16-bit scattered stores took a third of a 512^3 product.
 * They read either source (load16, load32): floats through the hardware
 * conversion (vcvtneps2bf16: bf's bits), bf16 through bf_h's two fixes,
 * 16-bit moves with half the bytes read. The double build's tg_real
 * sources are doubles, which only the loops pack (fast_src). */
#if TG_X86 && defined(__GNUC__)
#define HAVE_FAST_PACK 1

/* bf_h on 32 bf16 at once: a subnormal -> the zero of its sign, a NaN ->
 * quiet; vectors of normal values and zeros (the usual case) go back as
 * they came. */
TG_AVX512_BF16 static inline __m512i bf_h32(__m512i v) {
    const __m512i expo = _mm512_set1_epi16(0x7F80);
    __mmask32 sub = _mm512_mask_test_epi16_mask(_mm512_testn_epi16_mask(v, expo), v, _mm512_set1_epi16(0x007F));
    __mmask32 nan = _mm512_cmpgt_epu16_mask(_mm512_and_si512(v, _mm512_set1_epi16(0x7FFF)), expo);
    if (!(sub | nan)) return v;
    v = _mm512_mask_blend_epi16(nan, v, _mm512_or_si512(v, _mm512_set1_epi16(0x0040)));
    return _mm512_mask_blend_epi16(sub, v, _mm512_and_si512(v, _mm512_set1_epi16((short)0x8000)));
}

/* Elements i.. of a stored operand, packed: 16 (32) bf16, zeros where the
 * mask is clear (masked-off lanes are neither read nor faulted on). */
TG_AVX512_BF16 static inline __m256i load16(bf_src s, size_t i, __mmask16 mk) {
#ifndef TG_DOUBLE
    if (!s.h) return (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mk, s.f + i));
#endif
    return _mm512_castsi512_si256(bf_h32(_mm512_maskz_loadu_epi16(mk, s.h + i))); /* lanes 16-31 zero */
}
TG_AVX512_BF16 static inline __m512i load32(bf_src s, size_t i, __mmask32 mk) {
#ifndef TG_DOUBLE
    if (!s.h)
        return (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps((__mmask16)(mk >> 16), s.f + i + 16),
                                            _mm512_maskz_loadu_ps((__mmask16)mk, s.f + i));
#endif
    return bf_h32(_mm512_maskz_loadu_epi16(mk, s.h + i));
}
/* The first `left` of 16 (32) lanes. */
static inline __mmask16 lanes16(int left) {
    return (__mmask16)(left >= 16 ? 0xFFFF : left <= 0 ? 0 : (1u << left) - 1);
}
static inline __mmask32 lanes32(int left) { return left >= 32 ? 0xFFFFFFFFu : left <= 0 ? 0 : (1u << left) - 1; }
/* Element i's address, for a prefetch. */
static inline const char *src_at(bf_src s, size_t i) { return s.h ? (const char *)(s.h + i) : (const char *)(s.f + i); }

/* In-register transpose of 8 x 8 32-bit words (gemm.c's TRANSPOSE8, on
 * integer vectors through casts: shuffles move bits, never change them). */
TG_AVX512_BF16 static inline void transpose8(__m256i v[8]) {
    __m256 r[8], t[8], u[8];
    for (int i = 0; i < 8; i++) r[i] = _mm256_castsi256_ps(v[i]);
    for (int i = 0; i < 8; i += 2)
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]), t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44), u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44), u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int i = 0; i < 4; i++) {
        v[i] = _mm256_castps_si256(_mm256_permute2f128_ps(u[i], u[i + 4], 0x20));
        v[i + 4] = _mm256_castps_si256(_mm256_permute2f128_ps(u[i], u[i + 4], 0x31));
    }
}

/* 16 x 16 32-bit words transposed in registers: r[i] lane j -> r[j] lane i
 * (unpacks within 128-bit lanes, then 4 x 4 blocks of lanes). */
TG_AVX512_BF16 static inline void transpose16(__m512i r[16]) {
    __m512i t[16], u[16];
    for (int i = 0; i < 16; i += 2)
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]), t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    for (int k = 0; k < 16; k += 4) {
        u[k] = _mm512_unpacklo_epi64(t[k], t[k + 2]), u[k + 1] = _mm512_unpackhi_epi64(t[k], t[k + 2]);
        u[k + 2] = _mm512_unpacklo_epi64(t[k + 1], t[k + 3]), u[k + 3] = _mm512_unpackhi_epi64(t[k + 1], t[k + 3]);
    }
    /* u[4k + j], 128-bit lane L: column 4L + j of rows 4k..4k+3 */
    for (int j = 0; j < 4; j++) {
        __m512i v0 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x88), v1 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xDD);
        __m512i w0 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x88);
        __m512i w1 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xDD);
        r[j] = _mm512_shuffle_i32x4(v0, w0, 0x88), r[8 + j] = _mm512_shuffle_i32x4(v0, w0, 0xDD);
        r[4 + j] = _mm512_shuffle_i32x4(v1, w1, 0x88), r[12 + j] = _mm512_shuffle_i32x4(v1, w1, 0xDD);
    }
}

/* pack_a_panel, A untransposed: 16 k of each row are 8 pair-words; the
 * panel's rows (and 2 zero rows) transposed 8 x 8 give one 8-word store per
 * pair, whose last 2 words the next pair overwrites (the last pair's land
 * in the slack after the block). */
TG_AVX512_BF16 static void pack_a_fast(int m, int kc, bf_src A, int i0, int k0, uint16_t *dst) {
    uint32_t *d = (uint32_t *)(void *)dst;
    size_t src[MR];
    for (int r = 0; r < MR; r++) src[r] = (size_t)(i0 + (r < m ? r : 0)) * A.ld + k0;
    int k = 0;
    for (; k + 16 <= kc; k += 16) {
        __m256i v[8];
        for (int r = 0; r < MR; r++) v[r] = r < m ? load16(A, src[r] + k, 0xFFFF) : _mm256_setzero_si256();
        v[6] = v[7] = _mm256_setzero_si256();
        transpose8(v);
        for (int q = 0; q < 8; q++) _mm256_storeu_si256((__m256i *)(void *)(d + (size_t)(k / 2 + q) * MR), v[q]);
    }
    for (; k < kc + (kc & 1); k++)
        for (int r = 0; r < MR; r++)
            dst[(size_t)(k / 2) * 2 * MR + 2 * r + (k & 1)] = r < m && k < kc ? bf_at(A, i0 + r, k0 + k) : 0;
}

/* pack_a_panel for a transposed A (op(A)(i,k) = A[k*lda + i], as in the
 * weight gradient dY^T X), the whole mc-row block at once: per pair, rows k and k+1 of
 * A hold the block's values side by side, so 16 rows' pair-words are one
 * load of each, a shift and an or, as in pack_b_fast; they go to a row
 * buffer, then 6 words to each panel (masked stores). Half the
 * instructions per value of a panel-by-panel loop, which was 5% of a
 * bf16 GPT step. */
TG_AVX512_BF16 static void pack_at_block(int mc, int kc, bf_src A, int i0, int k0, uint16_t *dst) {
    _Alignas(64) uint32_t row[BF_MC + 16] = {0};
    const int kp = (kc + 1) / 2;
    uint32_t *d = (uint32_t *)(void *)dst;
    for (int p = 0; p < kp; p++) {
        const size_t s0 = (size_t)(k0 + 2 * p) * A.ld + i0, s1 = s0 + A.ld;
        bool odd = 2 * p + 1 < kc;
        for (int i = 0; i < mc; i += 16) {
            __mmask16 mk = lanes16(mc - i);
            __m512i e = _mm512_cvtepu16_epi32(load16(A, s0 + i, mk));
            __m512i o = odd ? _mm512_cvtepu16_epi32(load16(A, s1 + i, mk)) : _mm512_setzero_si512();
            _mm512_store_si512(row + i, _mm512_or_si512(e, _mm512_slli_epi32(o, 16))); /* zero past mc */
        }
        for (int j = 0; j * MR < mc; j++)
            _mm256_mask_storeu_epi32(d + ((size_t)j * kp + p) * MR, 0x3F,
                                     _mm256_loadu_si256((const __m256i *)(row + j * MR)));
    }
}

/* pack_b_sliver, B untransposed, for ns slivers side by side (sliver s at
 * dst + s * stride; n columns in all, zeros past n): rows 2p and 2p+1 of a
 * sliver's 32 columns loaded as 32 bf16 each and interleaved into 32 pairs
 * by two vpermt2w; masked loads past n. A pair of rows is read across all
 * the slivers before the next: each row of B is on pages of its own, and a
 * sliver at a time read 128 bytes of a page and moved on, where the
 * hardware prefetchers do not follow (bench/measured.md, AMX: 1.35-1.5x
 * the rate). */
TG_AVX512_BF16 static void pack_b_fast(int ns, int n, int kc, bf_src B, int k0, int j0, uint16_t *dst, size_t stride) {
    /* word 2j of the result: word j of row 2p's 32 (e), word 2j + 1: word j of row 2p + 1's (o: index 32 + j);
     * lo the pairs of columns 0-15, hi of 16-31 */
    const __m512i lo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6, 37,
                                        5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
    const __m512i hi = _mm512_set_epi16(63, 31, 62, 30, 61, 29, 60, 28, 59, 27, 58, 26, 57, 25, 56, 24, 55, 23, 54, 22,
                                        53, 21, 52, 20, 51, 19, 50, 18, 49, 17, 48, 16);
    for (int p = 0; p < (kc + 1) / 2; p++) {
        const size_t s0 = (size_t)(k0 + 2 * p) * B.ld + j0, s1 = s0 + B.ld;
        bool odd = 2 * p + 1 < kc;
        for (int c = 0; c < ns * NR; c += NR) {
            __mmask32 mk = lanes32(n - c);
            __m512i e = load32(B, s0 + c, mk), o = odd ? load32(B, s1 + c, mk) : _mm512_setzero_si512();
            uint16_t *d = dst + (size_t)(c / NR) * stride + (size_t)p * 2 * NR;
            _mm512_storeu_si512(d, _mm512_permutex2var_epi16(e, lo, o));
            _mm512_storeu_si512(d + 32, _mm512_permutex2var_epi16(e, hi, o));
        }
    }
}

/* pack_b_sliver, B transposed (op(B)(k,j) = B[j*ldb + k], as in x W^T):
 * 16 k of each of the sliver's rows are 8 pair-words; 8 rows at a time
 * transposed 8 x 8, each pair's 8 columns are one store. */
TG_AVX512_BF16 static void pack_bt_fast(int n, int kc, bf_src B, int k0, int j0, uint16_t *dst) {
    uint32_t *d = (uint32_t *)(void *)dst;
    size_t src[NR];
    for (int j = 0; j < NR; j++) src[j] = (size_t)(j0 + (j < n ? j : 0)) * B.ld + k0;
    int k = 0;
    for (; k + 16 <= kc; k += 16)
        for (int h = 0; h < NR / 8; h++) {
            __m256i v[8];
            for (int j = 0; j < 8; j++)
                v[j] = h * 8 + j < n ? load16(B, src[h * 8 + j] + k, 0xFFFF) : _mm256_setzero_si256();
            transpose8(v);
            for (int q = 0; q < 8; q++)
                _mm256_storeu_si256((__m256i *)(void *)(d + (size_t)(k / 2 + q) * NR + h * 8), v[q]);
        }
    for (; k < kc + (kc & 1); k++)
        for (int j = 0; j < NR; j++)
            dst[(size_t)(k / 2) * 2 * NR + 2 * j + (k & 1)] = j < n && k < kc ? bf_at(B, j0 + j, k0 + k) : 0;
}
#endif
/* Whether the AVX-512 packers read this operand (the flags allowing). */
static inline bool fast_src(bf_src s) { return s.h != NULL || TG_SIMD_F32; }

/* ---- the AMX layout -------------------------------------------------------------
 * tdpbf16ps (gemm_bf16.c) multiplies a tile of A (16 rows of 16 bf16
 * pairs) by a tile of B (16 k pairs of 16 columns' pairs). B's tile is the
 * pair layout above: rows of the NR-wide sliver 128 bytes apart, columns
 * 0-15 at its start, 16-31 64 bytes on. A's tile is rows of pairs, so A is
 * packed for it into AMX_MR = 32-row panels (two tiles), depth in chunks of
 * 16 pairs (32 k): chunk q of a panel holds row r's pairs at
 * [q*1024 + r*32 + 2p + (k&1)]. Depth is padded with zero pairs to whole
 * chunks, in A and B alike. */
/* One AMX_MR-row panel of op(A) (rows i0.., m <= AMX_MR of them, depth
 * k0.., kc deep, kq chunks), zeros past m and past kc. */
TG_KERNEL_BODY void pack_a_amx_body(bool trans, int m, int kc, int kq, bf_src A, int i0, int k0, uint16_t *dst) {
    for (int q = 0; q < kq; q++)
        for (int r = 0; r < AMX_MR; r++) {
            uint16_t *d = dst + (size_t)q * 1024 + r * 32;
            for (int e = 0; e < 32; e++) {
                int k = q * 32 + e;
                d[e] = r >= m || k >= kc ? 0 : trans ? bf_at(A, k0 + k, i0 + r) : bf_at(A, i0 + r, k0 + k);
            }
        }
}
TG_ISA_DISPATCH(pack_a_amx, (bool trans, int m, int kc, int kq, bf_src A, int i0, int k0, uint16_t *dst),
                (trans, m, kc, kq, A, i0, k0, dst))

#ifdef HAVE_FAST_PACK
/* pack_a_amx, A untransposed: a chunk of a row is 32 values, one load32
 * (zeros past kc), one 64-byte store. */
TG_AVX512_BF16 static void pack_a_amx_fast(int m, int kc, int kq, bf_src A, int i0, int k0, uint16_t *dst) {
    for (int r = 0; r < AMX_MR; r++) {
        const size_t s = (size_t)(i0 + r) * A.ld + k0, s2 = s + 2 * (size_t)A.ld;
        for (int q = 0; q < kq; q++) {
            if (r + 2 < m && q * 32 < kc) { /* two rows on: each row is on pages of its own */
                _mm_prefetch(src_at(A, s2 + q * 32), _MM_HINT_T0);
                _mm_prefetch(src_at(A, s2 + q * 32 + 16), _MM_HINT_T0);
            }
            __m512i v = r < m ? load32(A, s + q * 32, lanes32(kc - q * 32)) : _mm512_setzero_si512();
            _mm512_storeu_si512(dst + (size_t)q * 1024 + r * 32, v);
        }
    }
}

/* pack_a_amx, A transposed (op(A)(i,k) = A[k*lda + i], the weight
 * gradient dY^T X): rows k and k+1 of A hold 16 of the panel's values of a
 * pair side by side, so 16 rows' pair-words are a load of each, a shift and
 * an or (as pack_at_block); 16 pairs of them transposed 16 x 16 give each
 * row's 16 pairs of the chunk, one 64-byte store. (A scatter of each
 * pair's words took 9% of a bf16 gpt-mini step.) */
TG_AVX512_BF16 static void pack_at_amx_fast(int m, int kc, int kq, bf_src A, int i0, int k0, uint16_t *dst) {
    for (int h = 0; h < 2; h++) {
        const __mmask16 mk = lanes16(m - 16 * h);
        for (int q = 0; q < kq; q++) {
            __m512i w[16];
            for (int p = 0; p < AMX_KQ; p++) {
                int k = q * 32 + 2 * p;
                w[p] = _mm512_setzero_si512();
                if (k < kc && mk) {
                    const size_t s0 = (size_t)(k0 + k) * A.ld + i0 + 16 * h;
                    __m512i e = _mm512_cvtepu16_epi32(load16(A, s0, mk));
                    __m512i o = k + 1 < kc ? _mm512_cvtepu16_epi32(load16(A, s0 + A.ld, mk)) : _mm512_setzero_si512();
                    w[p] = _mm512_or_si512(e, _mm512_slli_epi32(o, 16));
                }
            }
            transpose16(w);
            for (int i = 0; i < 16; i++) _mm512_storeu_si512(dst + (size_t)q * 1024 + (16 * h + i) * 32, w[i]);
        }
    }
}
#endif

/* ---- the engines' packers -------------------------------------------------------
 * gemm_engine's pack_a, pack_b and pack_b_run (gemm_driver.h) for the
 * engine table (gemm_bf16.c): each packs a block of the driver's job. */

/* A job's operands as stored. */
static inline bf_src src_a(const gemm_job *j) { return (bf_src){j->A, j->A16, j->lda}; }
static inline bf_src src_b(const gemm_job *j) { return (bf_src){j->B, j->B16, j->ldb}; }

/* An NR-wide sliver of op(B) in pairs, zero pairs past kcur up to the
 * padded depth; the AVX-512 BF16 packers where the ISA level allows
 * (flags), else the loop (the same bits). */
void pack_b_pairs(const gemm_job *j, int j0, int n, void *dst_) {
    uint16_t *dst = dst_;
    const int kp = (j->kcur + 1) / 2, kpad = j->depth / 2;
    const bf_src B = src_b(j);
    if (kpad > kp) memset(dst + (size_t)kp * 2 * NR, 0, (size_t)(kpad - kp) * 2 * NR * sizeof(uint16_t));
#ifdef HAVE_FAST_PACK
    if (j->flags && fast_src(B)) {
        if (j->trans_b)
            pack_bt_fast(n, j->kcur, B, j->pc, j->jc + j0, dst);
        else
            pack_b_fast(1, n, j->kcur, B, j->pc, j->jc + j0, dst, 0);
        return;
    }
#endif
    pack_b_sliver(j->trans_b, n, j->kcur, B, j->pc, j->jc + j0, dst);
}

/* Slivers s0..s1-1 of the panel (the driver's pack_b_run): B untransposed
 * row pairs across all of them (pack_b_fast), else sliver by sliver. */
void pack_b_pairs_run(const gemm_job *j, int s0, int s1, void *dst_) {
    uint16_t *dst = dst_;
    const size_t sliver = (size_t)j->depth * NR;
#ifdef HAVE_FAST_PACK
    if (j->flags && !j->trans_b && fast_src(src_b(j))) {
        const int kp = (j->kcur + 1) / 2, kpad = j->depth / 2;
        for (int s = 0; s < s1 - s0 && kpad > kp; s++)
            memset(dst + s * sliver + (size_t)kp * 2 * NR, 0, (size_t)(kpad - kp) * 2 * NR * sizeof(uint16_t));
        pack_b_fast(s1 - s0, j->ncur - s0 * NR, j->kcur, src_b(j), j->pc, j->jc + s0 * NR, dst, sliver);
        return;
    }
#endif
    for (int s = s0; s < s1; s++) {
        int j0 = s * NR, n = j->ncur - j0 < NR ? j->ncur - j0 : NR;
        pack_b_pairs(j, j0, n, dst + (size_t)(s - s0) * sliver);
    }
}

/* Rows i0.. (mcur of them) of op(A), depth pc.., into MR-row pair panels. */
void pack_a_pairs(const gemm_job *j, int ic, int mcur, void *apack_) {
    uint16_t *apack = apack_;
    const size_t panel = (size_t)j->depth * MR;
    const bf_src A = src_a(j);
    const bool fast = j->flags && fast_src(A);
    (void)fast;
#ifdef HAVE_FAST_PACK
    if (fast && j->trans_a) {
        pack_at_block(mcur, j->kcur, A, ic, j->pc, apack);
        return;
    }
#endif
    for (int ir = 0; ir < mcur; ir += MR) {
        int m = mcur - ir < MR ? mcur - ir : MR;
        uint16_t *dst = apack + (size_t)ir / MR * panel;
#ifdef HAVE_FAST_PACK
        if (fast) {
            pack_a_fast(m, j->kcur, A, ic + ir, j->pc, dst);
            continue;
        }
#endif
        pack_a_panel(j->trans_a, m, j->kcur, A, ic + ir, j->pc, dst);
    }
}

/* Rows i0.. of op(A) into AMX_MR-row panels of 16-pair chunks. */
void pack_a_amx_block(const gemm_job *j, int ic, int mcur, void *apack_) {
    uint16_t *apack = apack_;
    const size_t panel = (size_t)j->depth * AMX_MR;
    const int kq = j->depth / 2 / AMX_KQ;
    const bf_src A = src_a(j);
    for (int ir = 0; ir < mcur; ir += AMX_MR) {
        int m = mcur - ir < AMX_MR ? mcur - ir : AMX_MR;
        uint16_t *dst = apack + (size_t)ir / AMX_MR * panel;
#ifdef HAVE_FAST_PACK
        if (j->flags && fast_src(A)) {
            (j->trans_a ? pack_at_amx_fast : pack_a_amx_fast)(m, j->kcur, kq, A, ic + ir, j->pc, dst);
            continue;
        }
#endif
        pack_a_amx(j->trans_a, m, j->kcur, kq, A, ic + ir, j->pc, dst);
    }
}
