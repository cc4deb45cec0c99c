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
 * the packed operands are bf16, half the bytes of float. This file holds
 * the engines (micro-kernels, the engine table and the choice by rate, the
 * fp32 engine) and the entry points; gemm_bf16_pack.c the packers and the
 * layouts they write, gemm_bf16_pack.h what the two share. A small product
 * (one K block, one panel of B, one thread's: attention's tiles) runs the
 * driver's loops on the calling thread without its machinery
 * (gemm_bf16_small.c), with the same bits.
 *
 * The pair layout is that of vdpbf16ps (AVX-512 BF16), which per 32-bit lane
 * j multiplies a pair of bf16 from each source and adds both products to a
 * float sum:
 *     c[j] += a[2j+1] * b[2j+1];  c[j] += a[2j] * b[2j]   (Intel SDM, VDPBF16PS)
 * So depth comes in pairs (gemm_bf16_pack.c has where each pair goes). The
 * micro-kernel broadcasts one row's pair (32 bits) and multiplies it by 16
 * columns' pairs in one instruction: 32 multiply-adds, twice a float FMA's 16.
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
#include "tensor/gemm_bf16_pack.h"
#include "tensor/gemm_bf16_small.h"
#include "tensor/gemm_driver.h"
#include "tensor/half.h"
#include "tensor/kernels.h"
#include "tensor/parallel.h"
#include "tensor/simd.h"
#include "tensor/tensor_internal.h"

/* Stores a tile held as t[r*NR + j]: C = alpha * t + beta * C on the m x n
 * corner (beta == 0 never reads C, which may hold NaN). Built per ISA, the
 * test of beta outside the loops so that they vectorise: the scalar loop
 * was a visible part of attention's time under bf16 on AMX, which stores
 * its scaled products through here (bench/measured.md, "Session 7"). The same
 * multiplies and adds at any width (no contraction under -std=c11). */
TG_KERNEL_BODY void store_tile_body(const float *t, int m, int n, tg_real alpha, tg_real beta, tg_real *c, int ldc) {
    for (int r = 0; r < m; r++) {
        tg_real *restrict cr = c + (size_t)r * ldc;
        const float *restrict tr = t + r * NR;
        if (beta == 0)
            for (int j = 0; j < n; j++) cr[j] = alpha * (tg_real)tr[j];
        else
            for (int j = 0; j < n; j++) cr[j] = alpha * (tg_real)tr[j] + beta * cr[j];
    }
}
TG_ISA_DISPATCH(store_tile, (const float *t, int m, int n, tg_real alpha, tg_real beta, tg_real *c, int ldc),
                (t, m, n, alpha, beta, c, ldc))

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

/* ---- the AMX engine ------------------------------------------------------------
 * tdpbf16ps multiplies a tile of A (16 rows of 16 bf16 pairs) by a tile of
 * B (16 k pairs of 16 columns' pairs) into a tile of 16 x 16 float sums.
 * B's tiles are the pair slivers, A's come from AMX_MR = 32-row panels in
 * chunks of 16 pairs, depth padded to whole chunks (the layout:
 * gemm_bf16_pack.c, the AMX layout). A micro-tile of C is 32 x 32: 2 x 2
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

/* ---- engines -------------------------------------------------------------------
 * An engine is a row of the one GEMM driver (gemm_driver.h): a
 * micro-kernel and the packing rule of its A panels (B's slivers are the
 * pair layout for all, depth padded to the engine's chunks; the packers:
 * gemm_bf16_pack.c); the loops, the K blocks (on pair boundaries: kalign
 * 2), the thread split and the epilogue are gemm_drive's, the same as the
 * float products'. Which one runs: bf16_engine_pick. */
typedef enum { ENG_PORTABLE, ENG_VDP, ENG_AMX_TWIN, ENG_AMX, ENG_FP32, ENG_COUNT } engine_id;

#if TG_X86 && defined(__GNUC__) && !defined(TG_DOUBLE)
/* C = alpha * C on a whole AMX_MR x NR tile that the hardware stored into
 * C: store_tile's alpha * t with beta 0, the same float multiply, without
 * the tile's trip through a buffer (the AMX engine implies AVX-512). */
TG_AVX512 static void scale_tile(float *c, int ldc, float alpha) {
    const __m512 va = _mm512_set1_ps(alpha);
    for (int r = 0; r < AMX_MR; r++) {
        float *cr = c + (size_t)r * ldc;
        _mm512_storeu_ps(cr, _mm512_mul_ps(va, _mm512_loadu_ps(cr)));
        _mm512_storeu_ps(cr + 16, _mm512_mul_ps(va, _mm512_loadu_ps(cr + 16)));
    }
}
#endif

/* The AMX engines' tile (hardware or twin) into the m x n corner of C.
 * When alpha and beta are 1 (a later K block of the driver, or a caller's
 * C += AB) the tile's sums go on from C's values: tdpbf16ps adds to its
 * destination, so C is loaded into the tiles and no partial sum goes
 * through memory and a separate add; the twin starts from the same values,
 * so both give the same bits. (Not in the double build, where C is double:
 * there a block's float sum is added to C in double.) A whole tile with
 * beta 0 goes to C straight as well, and is then scaled in place when
 * alpha is not 1 (attention's scaled products): alpha * t, the multiply
 * store_tile does, without the tile's trip through t. */
static void tile_amx(engine_id e, int kq, const uint16_t *a, size_t a_rs, size_t a_cs, const uint16_t *b, tg_real *c,
                     int ldc, tg_real alpha, tg_real beta, int m, int n, bool stream_b) {
    _Alignas(64) float t[AMX_MR * NR];
#ifdef TG_DOUBLE
    const bool from_c = false;
#else
    const bool from_c = alpha == 1 && beta == 1;
#if TG_X86 && defined(__GNUC__)
    if (e == ENG_AMX && m == AMX_MR && n == NR && (beta == 0 || from_c)) {
        tg__amx_tile(kq, a, a_rs, a_cs, b, c, ldc, from_c, stream_b); /* the tiles straight from and to C */
        if (alpha != 1) scale_tile(c, ldc, alpha);                    /* beta 0: alpha * t, as store_tile */
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

/* The AMX engine's tile configuration around a thread's work (amx.c): the
 * driver's shares configure the tiles and release them when done; a small
 * product (gemm_bf16_small) configures them only if this thread has not,
 * and leaves them configured, held until the thread's next share of the
 * driver releases them: attention's tile products come by the thousand,
 * a few microseconds each, and a load of the configuration and a release
 * around each were a visible part of them (bench/measured.md, "Session
 * 7"). Tiles left configured cost a thread only a larger save of its
 * state when it is switched out. */
static _Thread_local bool amx_held;
static void amx_begin(void) {
    if (!amx_held) tg__amx_begin();
    amx_held = true;
}
static void amx_end(void) {
    tg__amx_end();
    amx_held = false;
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
    [ENG_AMX] = {"amx", TG_ISA_AMX, AMX_ROW(ENG_AMX, amx_begin, amx_end)},
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
        amx_held = false; /* the probe released this thread's tiles */
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

/* ---- the fp32 engine: operands rounded to bf16, then the float GEMM ---------
 * A product the float GEMM packs runs on its driver row with packers that
 * round as they pack (gemm_bf16_fp32.c); one it does not pack, on its own
 * loops, which read panels and slivers from those packers (the direct
 * loops) or round each operand as they load it (the few-row loops)
 * (gemm.c, tg__gemm_unpacked_bf16). Either way no copy of an operand is
 * made, and C has the bits of tg_k_gemm_ep on rounded copies of op(A) and
 * op(B). Out of memory for the packing, the portable engine runs. */

/* An operand as the caller stored it: bf16 bits or tg_real values. */
static bf_src stored(const void *p, bool bf16, int ld) { return (bf_src){bf16 ? NULL : p, bf16 ? p : NULL, ld}; }

/* A product's job for the driver, the operands as stored. */
static gemm_job bf16_job(bool trans_a, bool trans_b, int M, int N, int K, tg_real alpha, bf_src a, bf_src b,
                         tg_real beta, tg_real *C, int ldc, const tg_gemm_epilogue *ep) {
    return (gemm_job){.trans_a = trans_a,
                      .trans_b = trans_b,
                      .M = M,
                      .N = N,
                      .K = K,
                      .lda = a.ld,
                      .ldb = b.ld,
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
}

void tg_k_gemm_bf16_mixed(bool trans_a, bool trans_b, int M, int N, int K, tg_real alpha, const void *A, bool a_bf16,
                          int lda, const void *B, bool b_bf16, int ldb, tg_real beta, tg_real *C, int ldc,
                          const tg_gemm_epilogue *ep) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0 || alpha == 0) { /* nothing to multiply: C = beta * C, as tg_k_gemm */
        tg_k_gemm_ep(trans_a, trans_b, M, N, 0, alpha, NULL, lda, NULL, ldb, beta, C, ldc, ep);
        return;
    }
    const bf_src a = stored(A, a_bf16, lda), b = stored(B, b_bf16, ldb);
    engine_id eng = bf16_engine_pick();
    const gemm_job job = bf16_job(trans_a, trans_b, M, N, K, alpha, a, b, beta, C, ldc, ep);
    if (eng == ENG_FP32 && (tg__gemm_bf16_fp32(&job, false) || tg__gemm_unpacked_bf16(&job))) return;
    if (eng == ENG_FP32) eng = ENG_PORTABLE;                              /* out of memory for the packing */
    if (gemm_bf16_small(&ENGINES[eng].drv, &job, eng == ENG_AMX)) return; /* without the driver's machinery */
    if (!gemm_drive(&ENGINES[eng].drv, &job))
        gemm_bf16_unpacked(trans_a, trans_b, M, N, K, alpha, a, b, beta, C, ldc, ep);
}

bool tg_k_gemm_bf16_no_c(bool trans_a, bool trans_b, int M, int N, int K, const void *A, bool a_bf16, int lda,
                         const void *B, bool b_bf16, int ldb, int ldc, const tg_gemm_epilogue *ep) {
    if (M <= 0 || N <= 0 || K <= 0) return false;
    engine_id eng = bf16_engine_pick();
    const bf_src a = stored(A, a_bf16, lda), b = stored(B, b_bf16, ldb);
    const gemm_job job = bf16_job(trans_a, trans_b, M, N, K, 1, a, b, 0, NULL, ldc, ep); /* C: never touched */
    if (eng == ENG_FP32) /* the float GEMM's row, where it packs the product and keeps C in blocks */
        return tg__gemm_bf16_fp32(&job, true);
    if (!gemm_c_blocked(&ENGINES[eng].drv, K, 0, ep)) return false; /* C would be written */
    return gemm_drive(&ENGINES[eng].drv, &job);                     /* false: out of memory, nothing done */
}

void tg_k_gemm_bf16_ep(bool trans_a, bool trans_b, int M, int N, int K, tg_real alpha, const tg_real *A, int lda,
                       const tg_real *B, int ldb, tg_real beta, tg_real *C, int ldc, const tg_gemm_epilogue *ep) {
    tg_k_gemm_bf16_mixed(trans_a, trans_b, M, N, K, alpha, A, false, lda, B, false, ldb, beta, C, ldc, ep);
}

void tg_k_gemm_bf16(bool trans_a, bool trans_b, int M, int N, int K, tg_real alpha, const tg_real *A, int lda,
                    const tg_real *B, int ldb, tg_real beta, tg_real *C, int ldc) {
    tg_k_gemm_bf16_mixed(trans_a, trans_b, M, N, K, alpha, A, false, lda, B, false, ldb, beta, C, ldc, NULL);
}
