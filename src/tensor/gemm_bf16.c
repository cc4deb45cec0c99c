/* tg_k_gemm_bf16: C = alpha * op(A) op(B) + beta * C with the products in
 * bfloat16 and the sums in float, the product of mixed-precision training
 * (tg_set_precision, autograd.h).
 *
 *   C(i,j) = alpha * sum_k bf16(op(A)(i,k)) * bf16(op(B)(k,j)) + beta * C(i,j)
 *
 * bf16(x) rounds to nearest even and flushes float subnormals to zero
 * (tg__bf16_from_bits_daz, half.h: what vcvtneps2bf16 does, so the AVX-512
 * packers use the instruction and the portable ones the formula, with the
 * same bits); a product of two bf16 values is exact in float (8 + 8
 * significant bits <= 24), so the only rounding after the operands' is the
 * float summation's, in k order within a KC block.
 *
 * The loops are the one GEMM driver's (gemm_driver.c, the float products'
 * too: B panels shared by the threads, A blocks per thread, threads split
 * rows of C or B's slivers (gemm_split_choose), never K, so the result does
 * not depend on the thread count), with the rounding done while packing:
 * the packed operands are bf16, half the bytes of float.
 *
 * The pair layout is that of vdpbf16ps (AVX-512 BF16), which per 32-bit lane
 * j multiplies a pair of bf16 from each source and adds both products to a
 * float sum:
 *     c[j] += a[2j+1] * b[2j+1];  c[j] += a[2j] * b[2j]   (Intel SDM, VDPBF16PS)
 * So depth comes in pairs: a B sliver holds, for k-pair p and column j,
 * (B(2p, j), B(2p+1, j)) at [p*2*NR + 2j], an A micro-panel (A(r, 2p),
 * A(r, 2p+1)) at [p*2*MR + 2r]; an odd K ends with a zero. The micro-kernel
 * broadcasts one row's pair (32 bits) and multiplies it by 16 columns' pairs
 * in one instruction: 32 multiply-adds, twice a float FMA's 16.
 *
 * The portable kernel does the same two float multiply-adds per pair in the
 * same order, in plain C built for each ISA (TG_ISA_DISPATCH); it gives the
 * AVX-512 BF16 kernel's results up to float rounding of the sums (the
 * instruction flushes subnormal sums to zero, which C does not), and is what
 * a CPU without AVX-512 BF16 runs.
 *
 * Engines, each a row of the driver (ENGINES): vdpbf16ps and its portable
 * twin (6-row panels of pairs), the AMX tiles and their twin (32-row panels
 * in tile rows, depth padded to 32), and fp32 (the rounded operands through
 * tg_k_gemm, the float engines' rows of the same driver). Which one runs is
 * chosen by measured rate (bf16_engine_pick).
 *
 * Epilogue (tg_k_gemm_bf16_ep): the driver's, as for the float products:
 * each block of C once after its last KC block, on the thread that
 * computed it.
 *
 * Memory: the packing buffers are the driver's (tg__gemm_workspace: thread-local,
 * grown on demand, released by tg_release_all). */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/amx.h"
#include "tensor/gemm_driver.h"
#include "tensor/half.h"
#include "tensor/kernels.h"
#include "tensor/parallel.h"
#include "tensor/simd.h"
#include "tensor/tensor_internal.h"

/* A 6 x 32 tile of C in twelve 16-float accumulators, as gemm.c's AVX-512
 * kernel. That is enough for vdpbf16ps on Zen 4 (6 cycles of latency, one
 * 512-bit instruction a cycle: six independent sums keep it busy), and a
 * pair step's loads (128 bytes of B, six 32-bit words of A for 12
 * instructions) are well within the core's load ports: on packed operands
 * in cache the kernel runs at the instruction's rate (tg_bf16_peak_measure),
 * so what the product loses is outside it, in packing and the caches.
 *
 * Block sizes (KC in elements of K, rounded to pairs): every KC block costs
 * each tile of C a load, a store and a start and drain of the k loop, so
 * the deeper the block, the less of that per multiply-add, and a K up to
 * KC is a single pass. The KC x 32 sliver of B (KC * 64 bytes in bf16)
 * would fill the 32 KB L1 at KC = 512 already, so it does not stay there:
 * it streams from L2, in order, once per tile, which the hardware
 * prefetchers follow. An MC x KC block of A (MC * KC * 2 bytes, 144 KB)
 * stays in the 1 MB L2. */
#define MR 6
#define NR 32
#ifndef BF_MC
#define BF_MC 72
#endif
#ifndef BF_KC
#define BF_KC 1024
#endif
#define BF_NC 4064 /* a multiple of NR; a KC x NC panel of B is 8 MB, in L3 */

/* An operand as the GEMM packs it (see the top of the file). */
static inline uint16_t bf(float f) { return tg__bf16_from_bits_daz(tg__float_bits(f)); }
/* A bf16 operand as the GEMM packs it: bf of its value widened to float,
 * which is exact, so what changes is only a subnormal (a zero of its sign)
 * and a NaN (made quiet): the same bits as the float path's. */
static inline uint16_t bf_h(uint16_t h) { return tg__bf16_from_bits_daz((uint32_t)h << 16); }

/* An operand as stored (tg_k_gemm_bf16_mixed): tg_real values (f) or bf16
 * bits (h), one of the two set, rows ld elements apart. */
typedef struct {
    const tg_real *f;
    const uint16_t *h;
    int ld;
} bf_src;
/* Element (r, c) of the stored operand (the transposes are the caller's), packed. */
static inline uint16_t bf_at(bf_src s, int r, int c) {
    size_t i = (size_t)r * s.ld + c;
    return s.h ? bf_h(s.h[i]) : bf((float)s.f[i]);
}

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

/* Stores a tile held as t[r*NR + j]: C = alpha * t + beta * C on the m x n
 * corner (beta == 0 never reads C, which may hold NaN). */
static void store_tile(const float *t, int m, int n, tg_real alpha, tg_real beta, tg_real *c, int ldc) {
    for (int r = 0; r < m; r++) {
        tg_real *cr = c + (size_t)r * ldc;
        for (int j = 0; j < n; j++)
            cr[j] = beta == 0 ? alpha * (tg_real)t[r * NR + j] : alpha * (tg_real)t[r * NR + j] + beta * cr[j];
    }
}

/* ---- portable kernel: vdpbf16ps's arithmetic in C ---------------------------
 * Per pair: the odd product, then the even one, each exact and added to
 * the float sum (the order of the instruction's pseudo-code). */
TG_KERNEL_BODY void kernel_portable_body(int kp, const uint16_t *restrict a, const uint16_t *restrict b, float *t) {
    float acc[MR * NR] = {0};
    for (int p = 0; p < kp; p++, a += 2 * MR, b += 2 * NR)
        for (int r = 0; r < MR; r++) {
            float a0 = tg__bf16_to_float(a[2 * r]), a1 = tg__bf16_to_float(a[2 * r + 1]);
            for (int j = 0; j < NR; j++) {
                float s = acc[r * NR + j] + a1 * tg__bf16_to_float(b[2 * j + 1]);
                acc[r * NR + j] = s + a0 * tg__bf16_to_float(b[2 * j]);
            }
        }
    for (int i = 0; i < MR * NR; i++) t[i] = acc[i];
}
TG_ISA_DISPATCH(kernel_portable, (int kp, const uint16_t *a, const uint16_t *b, float *t), (kp, a, b, t))
TG_ISA_DISPATCH(pack_a_panel, (bool trans, int m, int kc, bf_src A, int i0, int k0, uint16_t *dst),
                (trans, m, kc, A, i0, k0, dst))
TG_ISA_DISPATCH(pack_b_sliver, (bool trans, int n, int kc, bf_src B, int k0, int j0, uint16_t *dst),
                (trans, n, kc, B, k0, j0, dst))

/* ---- AVX-512 BF16 kernel ------------------------------------------------------
 * z<r><h>: row r, columns 16h..16h+15 of the tile. Per pair: two loads of B
 * (32 bf16 each: 16 columns' pairs), per row one 32-bit broadcast of A's
 * pair and two vdpbf16ps. */
#if TG_X86 && defined(__GNUC__)
#define BF_DP(r)                                                          \
    do {                                                                  \
        __m512i ar_ = _mm512_set1_epi32((int)a32[p * MR + (r)]);          \
        z##r##0 = _mm512_dpbf16_ps(z##r##0, (__m512bh)ar_, (__m512bh)b0); \
        z##r##1 = _mm512_dpbf16_ps(z##r##1, (__m512bh)ar_, (__m512bh)b1); \
    } while (0)

TG_AVX512_BF16 static void kernel_avx512_bf16(int kp, const uint16_t *a, const uint16_t *b, tg_real *c, int ldc,
                                              tg_real alpha, tg_real beta, int m, int n) {
    const uint32_t *a32 = (const uint32_t *)(const void *)a; /* a row's pair as one 32-bit word */
    GEMM_PREFETCH_TILE(c, ldc, m, NR);
    GEMM_Z_ACCUMULATORS;
#pragma GCC unroll 4
    for (int p = 0; p < kp; p++) {
        __m512i b0 = _mm512_loadu_si512(b + (size_t)p * 2 * NR), b1 = _mm512_loadu_si512(b + (size_t)p * 2 * NR + 32);
        GEMM_ROWS6(BF_DP);
    }
#ifndef TG_DOUBLE
    if (m == MR && n == NR) {
        __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
        GEMM_ROWS6(GEMM_Z_STORE);
        return;
    }
#endif
    _Alignas(64) float t[MR * NR];
    GEMM_ROWS6(GEMM_Z_SPILL);
    store_tile(t, m, n, alpha, beta, c, ldc);
}
#undef BF_DP
#endif

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

/* ---- the AMX engine ------------------------------------------------------------
 * tdpbf16ps multiplies a tile of A (16 rows of 16 bf16 pairs) by a tile of
 * B (16 k pairs of 16 columns' pairs) into a tile of 16 x 16 float sums.
 * B's tile is the pair layout above: rows of the NR-wide sliver 128 bytes
 * apart, columns 0-15 at its start, 16-31 64 bytes on. A's tile is rows of
 * pairs, so A is packed for it into AMX_MR = 32-row panels (two tiles),
 * depth in chunks of 16 pairs (32 k): chunk q of a panel holds row r's
 * pairs at [q*1024 + r*32 + 2p + (k&1)]. Depth is padded with zero pairs
 * to whole chunks, in A and B alike. A micro-tile of C is 32 x 32: 2 x 2
 * tiles (amx.c).
 *
 * The arithmetic of one tdpbf16ps (Intel SDM, TDPBF16PS), per element of
 * C: two float sums, of the even and of the odd products of the 16 pairs,
 * each started at zero and chained in pair order with a fused multiply-add
 * (round to nearest even, subnormal results flushed to zero: FTZ), then
 *     C(i,j) = C(i,j) + (even + odd)      (each add FTZ too)
 * with bf16 subnormal operands read as zero (DAZ), and a float subnormal
 * in C too (C = 2^-130 plus a sum near 2^-110 gives the sum alone on the
 * hardware). This is what the twin below computes, and what the hardware
 * kernel was found to give, bit for bit, on an Emerald Rapids Xeon
 * (tests/test_gemm_bf16.c runs the check wherever AMX is present). The
 * order differs from vdpbf16ps's (one chain, the odd product then the
 * even), so the two engines round differently.
 *
 * Blocks: AMX_KC = 512 deep and AMX_MC = 32 rows, one panel: the panel
 * (512 x 32 bf16, 32 KB) stays in L1 while the B slivers of the panel
 * stream past it from L2 (the kernel loads B's tiles with the T1 hint,
 * so that they do not push the panel out: amx_stream_b). Every tile's 4
 * loads of a chunk then find at most 2 outside L1.
 * With two panels a block (MC 64) the block no longer fits L1 beside the
 * sliver; shallower blocks cost C more loads and stores. The driver's
 * loops over KC x MC were timed in isolation on this Emerald Rapids,
 * 1024^3 (bench/measured.md, AMX): 512 x 32 the fastest, then 256 x 32,
 * 512 x 64 and 256 x 64; 1024 or 128 deep and 128 rows or more well
 * behind. Since every 32 rows pass the whole panel of B, the panel is
 * kept within L2: AMX_NC = 1024 columns (512 x 1024 bf16, 1 MB of the
 * core's 2 MB), where the float engines' 4064 (4 MB) sent the slivers to
 * L3 (2048^3: 1.2-1.5x slower; bench/measured.md, AMX). NC does not
 * change any sum (K blocks do), so neither the bits. */
#define AMX_MR 32
#define AMX_KQ 16 /* pairs a chunk (a tile row of A) */
#ifndef AMX_MC
#define AMX_MC 32
#endif
#ifndef AMX_KC
#define AMX_KC 512
#endif
#ifndef AMX_NC
#define AMX_NC 1024
#endif

/* A bf16 operand as tdpbf16ps reads it: subnormals as zero (DAZ). */
static inline float amx_in(uint16_t h) { return (h & 0x7F80) ? tg__bf16_to_float(h) : (h & 0x8000) ? -0.0f : 0.0f; }
/* A float result as tdpbf16ps writes it: subnormals flushed to zero (FTZ). */
static inline float amx_out(float x) { return fabsf(x) < FLT_MIN ? copysignf(0.0f, x) : x; }

/* The twin of tg__amx_tile (amx.h): the same tile, the same bits, in C
 * (fmaf is exact whether the compiler calls libm's or emits an FMA). Row r
 * of chunk q of A at a + r*a_rs + q*a_cs, as tg__amx_tile reads it. */
TG_KERNEL_BODY void amx_twin_tile_body(int kq, const uint16_t *a, size_t a_rs, size_t a_cs, const uint16_t *b, float *t,
                                       bool from_c) {
    if (!from_c)
        for (int i = 0; i < AMX_MR * NR; i++) t[i] = 0;
    for (int q = 0; q < kq; q++) {
        const uint16_t *bq = b + (size_t)q * 1024;
        for (int r = 0; r < AMX_MR; r++) {
            const uint16_t *ar = a + (size_t)r * a_rs + (size_t)q * a_cs;
            for (int j = 0; j < NR; j++) {
                float even = 0, odd = 0;
                for (int p = 0; p < AMX_KQ; p++) {
                    even = amx_out(fmaf(amx_in(ar[2 * p]), amx_in(bq[p * 64 + 2 * j]), even));
                    odd = amx_out(fmaf(amx_in(ar[2 * p + 1]), amx_in(bq[p * 64 + 2 * j + 1]), odd));
                }
                t[r * NR + j] = amx_out(amx_out(t[r * NR + j]) + amx_out(even + odd)); /* C: DAZ too */
            }
        }
    }
}
TG_ISA_DISPATCH(amx_twin_tile,
                (int kq, const uint16_t *a, size_t a_rs, size_t a_cs, const uint16_t *b, float *t, bool from_c),
                (kq, a, a_rs, a_cs, b, t, from_c))

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

/* ---- engines -------------------------------------------------------------------
 * An engine is a row of the one GEMM driver (gemm_driver.h): a
 * micro-kernel and the packing rule of its A panels (B's slivers are the
 * pair layout for all, depth padded to the engine's chunks); the loops,
 * the K blocks (on pair boundaries: kalign 2), the thread split and the
 * epilogue are gemm_drive's, the same as the float products'. Which one
 * runs: bf16_engine_pick. */
typedef enum { ENG_PORTABLE, ENG_VDP, ENG_AMX_TWIN, ENG_AMX, ENG_FP32, ENG_COUNT } engine_id;

/* The AMX engines' tile (hardware or twin) into the m x n corner of C.
 * When alpha and beta are 1 (a later K block of the driver, or a caller's
 * C += AB) the tile's sums go on from C's values: tdpbf16ps adds to its
 * destination, so C is loaded into the tiles and no partial sum goes
 * through memory and a separate add; the twin starts from the same values,
 * so both give the same bits. (Not in the double build, where C is double:
 * there a block's float sum is added to C in double.) */
static void tile_amx(engine_id e, int kq, const uint16_t *a, size_t a_rs, size_t a_cs, const uint16_t *b, tg_real *c,
                     int ldc, tg_real alpha, tg_real beta, int m, int n, bool stream_b) {
    _Alignas(64) float t[AMX_MR * NR];
#ifdef TG_DOUBLE
    const bool from_c = false;
#else
    const bool from_c = alpha == 1 && beta == 1;
#if TG_X86 && defined(__GNUC__)
    if (e == ENG_AMX && m == AMX_MR && n == NR && alpha == 1 && (beta == 0 || from_c)) {
        tg__amx_tile(kq, a, a_rs, a_cs, b, c, ldc, from_c, stream_b); /* the tiles straight from and to C */
        return;
    }
#endif
    if (from_c)
        for (int r = 0; r < AMX_MR; r++)
            for (int j = 0; j < NR; j++) t[r * NR + j] = r < m && j < n ? c[(size_t)r * ldc + j] : 0;
#endif
#if TG_X86 && defined(__GNUC__)
    if (e == ENG_AMX)
        tg__amx_tile(kq, a, a_rs, a_cs, b, t, NR, from_c, stream_b);
    else
#endif
        amx_twin_tile(kq, a, a_rs, a_cs, b, t, from_c);
    (void)stream_b;                  /* the twin has no caches to steer */
    if (from_c) alpha = 1, beta = 0; /* C's value is in the sums */
    store_tile(t, m, n, alpha, beta, c, ldc);
}

/* The tile of one A panel and one B sliver, kp pairs deep (a whole number
 * of the engine's chunks), into the m x n corner of C; stream_b: the AMX
 * kernel's loads of B with the T1 hint (amx_stream_b). The AMX engines'
 * panel of A has row r of chunk q at a + r*a_rs + q*a_cs (a packed one:
 * 32, 1024; A read in place: lda, 32); the others' is always packed. */
static void tile(engine_id e, int kp, const uint16_t *a, size_t a_rs, size_t a_cs, const uint16_t *b, tg_real *c,
                 int ldc, tg_real alpha, tg_real beta, int m, int n, bool stream_b) {
    if (e == ENG_AMX || e == ENG_AMX_TWIN) {
        tile_amx(e, kp / AMX_KQ, a, a_rs, a_cs, b, c, ldc, alpha, beta, m, n, stream_b);
        return;
    }
#if TG_X86 && defined(__GNUC__)
    if (e == ENG_VDP) {
        kernel_avx512_bf16(kp, a, b, c, ldc, alpha, beta, m, n);
        return;
    }
#endif
    _Alignas(64) float t[MR * NR];
    kernel_portable(kp, a, b, t);
    store_tile(t, m, n, alpha, beta, c, ldc);
}

/* The packed depth of a kcur-deep block, in bf16: its pairs, padded to
 * chunks of AMX_KQ pairs for the AMX layout. */
static int depth_pairs(const gemm_engine *e, int kcur) {
    (void)e;
    return 2 * ((kcur + 1) / 2);
}
static int depth_amx(const gemm_engine *e, int kcur) {
    (void)e;
    return 2 * (int)round_up((size_t)(kcur + 1) / 2, AMX_KQ);
}

/* A job's operands as stored. */
static inline bf_src src_a(const gemm_job *j) { return (bf_src){j->A, j->A16, j->lda}; }
static inline bf_src src_b(const gemm_job *j) { return (bf_src){j->B, j->B16, j->ldb}; }

/* An NR-wide sliver of op(B) in pairs, zero pairs past kcur up to the
 * padded depth; the AVX-512 BF16 packers where the ISA level allows
 * (flags), else the loop (the same bits). */
static void pack_b_pairs(const gemm_job *j, int j0, int n, void *dst_) {
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
static void pack_b_pairs_run(const gemm_job *j, int s0, int s1, void *dst_) {
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
static void pack_a_pairs(const gemm_job *j, int ic, int mcur, void *apack_) {
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
static void pack_a_amx_block(const gemm_job *j, int ic, int mcur, void *apack_) {
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

/* Whether the AMX kernel loads B's tiles with the T1 hint (amx.c): when
 * the panel of B the loops walk (its slivers, each passed once per panel
 * of A) and a panel of A do not fit the L1 together, a sliver is never
 * found in L1 again at the next panel of A, and loading it close only
 * pushes out the panel of A, which every sliver uses; when they fit (a
 * short K, a narrow B: attention's blocks) plain loads keep both there.
 * The 48 KB are the L1 of the cores with AMX so far (Sapphire, Emerald
 * and Granite Rapids); the whole panel is counted even where threads split
 * it, which errs on the side of the hint. */
#define AMX_L1_BYTES ((size_t)48 << 10)
static bool amx_stream_b(const gemm_job *j) {
    size_t slivers = (size_t)(j->ncur + NR - 1) / NR;
    return (slivers * NR + AMX_MR) * (size_t)j->depth * sizeof(uint16_t) > AMX_L1_BYTES;
}

/* Whether the AMX engines read this K block's panels of A in place
 * (gemm_driver.h, a_direct): A stored as bf16, untransposed, the block
 * whole chunks deep (a tile row is 32 k; the zero padding of a last,
 * partial chunk needs a packed copy), and a panel of B of at most
 * AMX_A_DIRECT_SLIVERS slivers. Then a tile of A is tileloadd with A's row
 * stride, no packing of A at all, as oneDNN's brgemm reads it. Why the
 * sliver bound: a packed panel (32 KB, contiguous) stays in L1 while the
 * slivers pass, where the same rows in place (lda apart) were found
 * slower from 4 slivers on (1.4x at 32), and faster with 1 or 2, where
 * packing is a pass over A for one or two uses (bench/measured.md,
 * session 5). Packing a bf16 A is a 16-bit copy anyway. The same values
 * reach the tiles either way: tdpbf16ps reads a subnormal as zero, as the
 * packers flush it (bf_h); only a NaN's payload may differ (the packers
 * quiet it). */
#ifndef AMX_A_DIRECT_SLIVERS
#define AMX_A_DIRECT_SLIVERS 2 /* 0: always packed (for timing the two) */
#endif
static bool amx_a_direct(const gemm_job *j) {
    return j->A16 && !j->trans_a && j->kcur % (2 * AMX_KQ) == 0 && (j->ncur + NR - 1) / NR <= AMX_A_DIRECT_SLIVERS;
}

static void tile_e(const gemm_job *j, const void *a, const void *b, tg_real *c, tg_real beta, int m, int n) {
    const bool direct = j->a_direct && m == AMX_MR; /* a is A16's row (gemm_driver.h) */
    tile((engine_id)j->eng->id, j->depth / 2, a, direct ? (size_t)j->lda : 32, direct ? 32 : 1024, b, c, j->ldc,
         j->alpha, beta, m, n, amx_stream_b(j));
}

typedef struct {
    const char *name;
    tg_isa level;    /* the ISA level it needs */
    gemm_engine drv; /* its row of the driver (unused by fp32) */
} bf16_engine;
/* a_slack 16: pack_a_fast writes up to 16 values past a block. (clang-format
 * off: it would give each field a line.) */
/* clang-format off */
#define PAIRS_ROW(id_)                                                                                           \
    {.id = id_, .elem = sizeof(uint16_t), .mr = MR, .nr = NR, .mc = BF_MC, .kc = BF_KC, .nc = BF_NC, .kalign = 2, \
     .a_slack = 16, .depth = depth_pairs, .pack_a = pack_a_pairs, .pack_b = pack_b_pairs,                    \
     .pack_b_run = pack_b_pairs_run, .kernel = tile_e}
#define AMX_ROW(id_, begin_, end_)                                                                                    \
    {.id = id_, .elem = sizeof(uint16_t), .mr = AMX_MR, .nr = NR, .mc = AMX_MC, .kc = AMX_KC, .nc = AMX_NC,          \
     .kalign = 2, .a_slack = 16, .depth = depth_amx, .pack_a = pack_a_amx_block, .pack_b = pack_b_pairs,             \
     .pack_b_run = pack_b_pairs_run, .kernel = tile_e, .a_direct = amx_a_direct, .begin = begin_, .end = end_}
/* clang-format on */
static const bf16_engine ENGINES[ENG_COUNT] = {
    [ENG_PORTABLE] = {"portable", TG_ISA_PORTABLE, PAIRS_ROW(ENG_PORTABLE)},
    [ENG_VDP] = {"avx512_bf16", TG_ISA_AVX512_BF16, PAIRS_ROW(ENG_VDP)},
    [ENG_AMX_TWIN] = {"amx_twin", TG_ISA_PORTABLE, AMX_ROW(ENG_AMX_TWIN, NULL, NULL)},
    /* the thread's tile configuration around its share, then the release (amx.c) */
    [ENG_AMX] = {"amx", TG_ISA_AMX, AMX_ROW(ENG_AMX, tg__amx_begin, tg__amx_end)},
    [ENG_FP32] = {"fp32", TG_ISA_AVX2, {.id = ENG_FP32}}, /* operands rounded, then tg_k_gemm */
};

/* Scalar fallback when the packing buffers cannot be had: the same sums in
 * the same order, slowly, so an out-of-memory machine still gets the
 * product (and no crash). */
static void gemm_bf16_unpacked(bool ta, bool tb, int M, int N, int K, tg_real alpha, bf_src A, bf_src B, tg_real beta,
                               tg_real *C, int ldc, const tg_gemm_epilogue *ep) {
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int k = 0; k < K; k++)
                s += tg__bf16_to_float(ta ? bf_at(A, k, i) : bf_at(A, i, k)) *
                     tg__bf16_to_float(tb ? bf_at(B, j, k) : bf_at(B, k, j));
            tg_real *cij = C + (size_t)i * ldc + j;
            *cij = beta == 0 ? alpha * (tg_real)s : alpha * (tg_real)s + beta * *cij;
        }
        gemm_epilogue(ep, C, C + (size_t)i * ldc, ldc, 1, N);
    }
}

/* ---- the engine that runs: by measured rate ---------------------------------
 * Each engine's rate on one core is measured once per process, at the first
 * bf16 product (about 6 ms in all, the best of short interleaved trials:
 * tg__fma_rate, tg__vdp_rate in peak.c, tg__amx_rate in amx.c), and the fastest engine
 * the ISA level allows runs: AMX or vdpbf16ps, unless the FMA units beat
 * both, and then the operands are rounded to bf16 and go through the float
 * GEMM (fp32): a product of two bf16 values is exact in float, so the
 * result is still the bf16 product summed in float. That is the case on
 * Intel cores without AMX (one 512-bit vdpbf16ps every 2 cycles, two FMAs
 * a cycle), the opposite of AMD Zen 4 and 5. The twins never run unasked.
 * TG_BF16_ENGINE=<name> (or the test switch tg__bf16_engine_force) names
 * one instead, when the ISA level has it. */
static double g_rate[ENG_COUNT]; /* GFLOP/s per core; 0: none here */
static pthread_once_t g_rate_once = PTHREAD_ONCE_INIT;
static int g_forced = -1; /* an engine_id, or -1: by rate */
static bool g_forced_read;

static void measure_rates(void) {
    g_rate[ENG_PORTABLE] = 1e-3; /* not measured: last of all */
    g_rate[ENG_AMX_TWIN] = 0;    /* never by rate */
    /* 8 rounds of short trials of each, interleaved, the best of each
     * kept: a busy machine slows some trials, and interleaving spreads
     * that over all three rather than one */
    for (int round = 0; round < 8; round++) {
#if TG_SIMD_F32
        if (tg_cpu_has_avx2()) g_rate[ENG_FP32] = fmax(g_rate[ENG_FP32], tg__fma_rate(0.0003));
#endif
        if (tg_cpu_has_avx512_bf16()) g_rate[ENG_VDP] = fmax(g_rate[ENG_VDP], tg__vdp_rate(0.0003));
        if (tg_cpu_has_amx()) g_rate[ENG_AMX] = fmax(g_rate[ENG_AMX], tg__amx_rate(0.0001));
    }
}

static int engine_by_name(const char *v) {
    for (int e = 0; e < ENG_COUNT; e++)
        if (strcmp(v, ENGINES[e].name) == 0) return e;
    return -1;
}

static bool engine_runs(engine_id e, tg_isa level) {
    if (e == ENG_FP32 && !TG_SIMD_F32) return false;
    return ENGINES[e].level <= level;
}

static engine_id bf16_engine_pick(void) {
    pthread_once(&g_rate_once, measure_rates);
    if (!g_forced_read) { /* benign race: every thread reads the same */
        const char *v = getenv("TG_BF16_ENGINE");
        if (v && *v && g_forced < 0) {
            g_forced = engine_by_name(v);
            if (g_forced < 0)
                fprintf(stderr,
                        "tgrad: TG_BF16_ENGINE=%s is not amx, avx512_bf16, fp32, portable or amx_twin; ignored\n", v);
        }
        g_forced_read = true;
    }
    tg_isa level = tg_isa_level();
    if (g_forced >= 0 && engine_runs((engine_id)g_forced, level)) return (engine_id)g_forced;
    engine_id best = ENG_PORTABLE;
    for (int e = ENG_VDP; e < ENG_COUNT; e++)
        if (e != ENG_AMX_TWIN && engine_runs((engine_id)e, level) && g_rate[e] > g_rate[best]) best = (engine_id)e;
    static bool said; /* once: why AMX is not the engine, where the CPU could have it */
    if (!said && best != ENG_AMX && tg_cpu_has_avx512_bf16()) {
        said = true;
        const char *why = tg__amx_why_not();
        if (why)
            fprintf(stderr, "tgrad: bf16 products without AMX (%s): the %s engine runs\n", why, ENGINES[best].name);
    }
    return best;
}

int tg__bf16_engine_force(const char *name) {
    int old = g_forced;
    g_forced_read = true; /* the switch overrides the environment */
    g_forced = name ? engine_by_name(name) : -1;
    return old;
}

tg_bf16_engine_info tg_bf16_engine(void) {
    engine_id e = bf16_engine_pick();
    tg_bf16_engine_info info = {ENGINES[e].name, NAN, NAN, NAN, NAN};
    double *r[] = {&info.fma_gflops, &info.vdp_gflops, &info.amx_gflops};
    engine_id ids[] = {ENG_FP32, ENG_VDP, ENG_AMX};
    for (int i = 0; i < 3; i++)
        if (g_rate[ids[i]] > 0) *r[i] = g_rate[ids[i]];
    if (g_rate[e] > 0 && e != ENG_PORTABLE) info.gflops = g_rate[e];
    return info;
}

/* ---- the fp32 engine: operands rounded to bf16, then tg_k_gemm --------------
 * Rounded copies of op(A) and op(B) as stored (the same transposes and a
 * compact leading dimension), in a thread-local buffer grown on demand and
 * freed by tg_release_all, or when its thread ends (a pthread key's
 * destructor: a pool worker that ran an attention tile's product on this
 * engine and was retired by tg_set_num_threads, as gemm_driver.c's). */
static _Thread_local void *fp32_buf;
static _Thread_local size_t fp32_cap; /* floats */
static pthread_key_t fp32_key;
static pthread_once_t fp32_key_once = PTHREAD_ONCE_INIT;

static void fp32_free_at_exit(void *buf) { tg_sys_free(buf); }
static void fp32_key_make(void) { (void)pthread_key_create(&fp32_key, fp32_free_at_exit); }

static void fp32_drop(void) {
    if (fp32_buf) {
        (void)pthread_setspecific(fp32_key, NULL);
        tg_sys_free(fp32_buf);
    }
    fp32_buf = NULL;
    fp32_cap = 0;
}
static void fp32_release_on_thread(void *ctx, int tid, int nth) {
    (void)ctx, (void)tid, (void)nth;
    fp32_drop();
}
static void fp32_release(void) { tg_parallel_team(true, fp32_release_on_thread, NULL); }

/* rows x cols of src (leading dimension ld) rounded into dst (leading
 * dimension cols); built per ISA (a scalar loop was half the engine's
 * time). A bf16 source is widened (bf_h: its flush and quieting only). */
TG_KERNEL_BODY void round_copy_body(int rows, int cols, const tg_real *src, int ld, tg_real *dst) {
    for (int i = 0; i < rows; i++) {
        const tg_real *s = src + (size_t)i * ld;
        tg_real *d = dst + (size_t)i * cols;
        for (int j = 0; j < cols; j++) d[j] = (tg_real)tg__bf16_round_daz((float)s[j]);
    }
}
TG_KERNEL_BODY void widen_copy_body(int rows, int cols, const uint16_t *src, int ld, tg_real *dst) {
    for (int i = 0; i < rows; i++) {
        const uint16_t *s = src + (size_t)i * ld;
        tg_real *d = dst + (size_t)i * cols;
        for (int j = 0; j < cols; j++) d[j] = (tg_real)tg__bf16_to_float(bf_h(s[j]));
    }
}
TG_ISA_DISPATCH(round_copy, (int rows, int cols, const tg_real *src, int ld, tg_real *dst), (rows, cols, src, ld, dst))
TG_ISA_DISPATCH(widen_copy, (int rows, int cols, const uint16_t *src, int ld, tg_real *dst), (rows, cols, src, ld, dst))

static void operand_copy(int rows, int cols, bf_src s, tg_real *dst) {
    if (s.h)
        widen_copy(rows, cols, s.h, s.ld, dst);
    else
        round_copy(rows, cols, s.f, s.ld, dst);
}

static bool gemm_fp32_engine(bool ta, bool tb, int M, int N, int K, tg_real alpha, bf_src A, bf_src B, tg_real beta,
                             tg_real *C, int ldc, const tg_gemm_epilogue *ep) {
    size_t need = (size_t)M * K + (size_t)K * N;
    if (need > fp32_cap) {
        tg__on_release_all(fp32_release);
        pthread_once(&fp32_key_once, fp32_key_make);
        fp32_drop();
        fp32_buf = tg_sys_alloc(need * sizeof(tg_real));
        if (!fp32_buf) return false;
        (void)pthread_setspecific(fp32_key, fp32_buf);
        fp32_cap = need;
    }
    tg_real *a = (tg_real *)fp32_buf, *b = a + (size_t)M * K;
    int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    operand_copy(ar, ac, A, a);
    operand_copy(br, bc, B, b);
    tg_k_gemm_ep(ta, tb, M, N, K, alpha, a, ac, b, bc, beta, C, ldc, ep);
    return true;
}

void tg_k_gemm_bf16_mixed(bool trans_a, bool trans_b, int M, int N, int K, tg_real alpha, const void *A, bool a_bf16,
                          int lda, const void *B, bool b_bf16, int ldb, tg_real beta, tg_real *C, int ldc,
                          const tg_gemm_epilogue *ep) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0 || alpha == 0) { /* nothing to multiply: C = beta * C, as tg_k_gemm */
        tg_k_gemm_ep(trans_a, trans_b, M, N, 0, alpha, NULL, lda, NULL, ldb, beta, C, ldc, ep);
        return;
    }
    const bf_src a = {a_bf16 ? NULL : A, a_bf16 ? A : NULL, lda}, b = {b_bf16 ? NULL : B, b_bf16 ? B : NULL, ldb};
    engine_id eng = bf16_engine_pick();
    if (eng == ENG_FP32 && gemm_fp32_engine(trans_a, trans_b, M, N, K, alpha, a, b, beta, C, ldc, ep)) return;
    if (eng == ENG_FP32) eng = ENG_PORTABLE; /* out of memory for the copies */
    const gemm_job job = {.trans_a = trans_a,
                          .trans_b = trans_b,
                          .M = M,
                          .N = N,
                          .K = K,
                          .lda = lda,
                          .ldb = ldb,
                          .ldc = ldc,
                          .alpha = alpha,
                          .beta = beta,
                          .A = a.f,
                          .B = b.f,
                          .A16 = a.h,
                          .B16 = b.h,
                          .C = C,
                          .ep = ep,
                          .flags = tg_isa_level() >= TG_ISA_AVX512_BF16}; /* the AVX-512 BF16 packers may run */
    if (!gemm_drive(&ENGINES[eng].drv, &job))
        gemm_bf16_unpacked(trans_a, trans_b, M, N, K, alpha, a, b, beta, C, ldc, ep);
}

void tg_k_gemm_bf16_ep(bool trans_a, bool trans_b, int M, int N, int K, tg_real alpha, const tg_real *A, int lda,
                       const tg_real *B, int ldb, tg_real beta, tg_real *C, int ldc, const tg_gemm_epilogue *ep) {
    tg_k_gemm_bf16_mixed(trans_a, trans_b, M, N, K, alpha, A, false, lda, B, false, ldb, beta, C, ldc, ep);
}

void tg_k_gemm_bf16(bool trans_a, bool trans_b, int M, int N, int K, tg_real alpha, const tg_real *A, int lda,
                    const tg_real *B, int ldb, tg_real beta, tg_real *C, int ldc) {
    tg_k_gemm_bf16_mixed(trans_a, trans_b, M, N, K, alpha, A, false, lda, B, false, ldb, beta, C, ldc, NULL);
}
