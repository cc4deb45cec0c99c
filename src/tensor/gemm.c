/* tg_k_gemm: C = alpha * op(A) op(B) + beta * C, row-major.
 *
 * The large-matrix path is the one GEMM driver (gemm_driver.c: GotoBLAS /
 * BLIS loops, K blocks, thread split, epilogue), shared with the bf16
 * products; this file gives it the float engines, one row each
 * (float_engine below): the micro-kernels and their packers. Packing is
 * where the transposes are handled: op(A) and op(B) are read through their
 * strides while packing, so no transposed copy of a whole matrix is ever
 * made.
 *
 * The micro-kernel keeps an MR x NR tile of C in registers: 6 x 16 floats
 * (6 x 8 doubles) = 12 AVX2 accumulators, enough independent FMA chains to
 * hide the FMA latency on two pipes (6 x 32 in zmm registers at AVX-512).
 * It is compiled with __attribute__((target("avx2,fma"))) and chosen at run
 * time from the CPU features, so the file builds with plain -O2 and the same
 * binary runs on a machine without AVX2, where a portable C kernel takes
 * over.
 *
 * Small products (the attention heads are 16 x 16 x 16) skip packing: a
 * "direct" kernel reads A through its strides and B rows in place. So do
 * products of a few rows (one token a step in generation, M = batch): each
 * element of B serves only M multiply-adds, so packing B would cost as much
 * as the product; the few-row loops read B in the order it lies in memory.
 *
 * These two paths stay in front of the driver because they do not pack:
 * the driver is packing, blocking and a split over packed panels, and they
 * have none of that but the split (gemm_split_choose, the same rule).
 *
 * Epilogue (tg_k_gemm_ep): the driver's on the packed path (gemm_driver.c:
 * per finished block of C, from L2; not tile by tile from L1, where a
 * 32-wide row vectorises worse than a panel-wide one and Y written 6 short
 * rows at a time cost more than the L2 reads saved, so that was slower
 * than a separate pass; the commit that added it has the measurements).
 * The direct loops apply it to each tile they finish (a row, for the
 * portable ones), the few-row loops to each block of sums they store (B
 * transposed: to their rows once all are stored).
 *
 * Determinism: the path is chosen by the shape alone, and on each path the
 * value of C(i,j) depends only on K: on how K is split into KC blocks (each
 * block summed in k order in registers, then added to C; the split depends
 * on K alone), or for the few-row loops on K's lanes. Threads split the rows
 * of C or its columns (gemm_split_choose), never K, so results are
 * bit-identical for any number of threads.
 *
 * Memory: the packing buffers are the driver's (tg__gemm_workspace:
 * thread-local, grown only when a larger product comes), so after the
 * first training step gemm makes no allocation. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tensor/gemm_driver.h"
#include "tensor/kernels.h"
#include "tensor/parallel.h"
#include "tensor/tensor_internal.h"

#include "tensor/simd.h"
#include "tensor/bf16_round_simd.h"
#include "tensor/transpose_simd.h"

/* Block sizes. MC x KC of A fills about a third of the 512 KB L2, a KC x NR
 * sliver of B about half the 32 KB L1, KC x NC of B a few MB of L3 (the
 * values BLIS uses for AMD Zen). MC is a multiple of MR, NC of NR. */
#ifdef TG_DOUBLE
#define AVX_MR 6
#define AVX_NR 8
#ifndef AVX_MC
#define AVX_MC 72
#endif
#else
#define AVX_MR 6
#define AVX_NR 16
#ifndef AVX_MC
#define AVX_MC 144
#endif
#endif
#ifndef AVX_KC
#define AVX_KC 256
#endif
#define AVX_NC 4080

#define PORT_MR 4
#define PORT_NR 8
#define PORT_MC 128
#define PORT_KC 256
#define PORT_NC 4096

/* Up to this many multiply-adds (and with K small enough for the stack
 * sliver below), the direct kernel runs without packing: the operands fit
 * in L2, so packing would cost more than the cache misses it saves
 * (measured: 128^3 direct 78 GFLOP/s, packed 68; the Linear layers of the
 * toy model, 1024x64x64, direct 91, packed 50; 256^3 about equal). */
#ifndef DIRECT_MAX_WORK
#define DIRECT_MAX_WORK (256.0 * 256.0 * 256.0)
#endif
#define DIRECT_MAX_K           512
/* With the AVX-512 kernel the packed path wins from about 40^3 up (one core
 * of this EPYC: 64^3 135 against 114 GFLOP/s direct, 128^3 173 against 113;
 * 32^3 76 against 81). */
#define Z_DIRECT_MAX_WORK      (40.0 * 40.0 * 40.0)
/* The AVX-512 path reads A in place up to this many 32-wide slivers of B
 * per panel (N <= 512), and packs it for wider products (fe_avx512). */
#define A_IN_PLACE_MAX_SLIVERS 16
#define PORT_DIRECT_MAX_WORK   (24.0 * 24.0 * 24.0)
/* Products of a few rows read B as it lies (few_rows_nn, few_rows_nt; from
 * AVX2 up): up to FEW_ROWS_MAX rows when N * K >= FEW_MIN_NK, and with B
 * transposed (A not) up to FEW_ROWS_MAX_NT rows when N * K >=
 * FEW_MIN_NK_NT. Measured on one core of this EPYC, float, AVX-512 level,
 * medians of 21 calls interleaved with the packed path's, ms, packed ->
 * few-row loops:
 *   B untransposed    1 x 4096 x 1024  2.37 -> 0.75    4 x 1024 x 4096  3.03 -> 1.57
 *                     8 x 4096 x 1024  4.92 -> 2.24   12 x 1024 x 4096  3.13 -> 3.24
 *                    16 x 1024 x 4096  3.68 -> 8.81 (blocks of sums 256 wide, B's rows
 *                                                    read 1 KB at a time)
 *   B transposed      1 x 1024 x 4096  2.79 -> 0.82   16 x 4096 x 1024  4.41 -> 2.84
 *                    16 x 1024 x 1024  1.04 -> 0.88   16 x 512 x 512   0.166 -> 0.168
 *                    24 x 512 x 512   0.197 -> 0.244  32 x 1024 x 4096  5.77 -> 5.93
 * (at the AVX2 level, whose packer of an untransposed B is the generic
 * loop, 6 and 8 rows 3.6-5x). Below N * K = 128^2 the direct loops are as
 * fast (B untransposed, 4 and 8 rows, 64 x 64: the loops below 0.83-0.97x;
 * 128 x 128: 0.90-1.51x). */
#define FEW_ROWS_MAX           8
#define FEW_MIN_NK             (128.0 * 128.0)
#define FEW_ROWS_MAX_NT        16
#define FEW_MIN_NK_NT          (1024.0 * 1024.0)

/* ---- C = beta * C (beta == 0 writes zeros without reading C) ------------- */
static void scale_c(int M, int N, tg_real beta, tg_real *C, int ldc) {
    if (beta == 1) return;
    for (int i = 0; i < M; i++) {
        tg_real *c = C + (size_t)i * ldc;
        if (beta == 0)
            for (int j = 0; j < N; j++) c[j] = 0;
        else
            for (int j = 0; j < N; j++) c[j] *= beta;
    }
}

/* Stores an accumulated tile: C = alpha * acc + beta * C for the m x n
 * corner of a tile held as t[r * nr + j]. Used by edge tiles and by the
 * portable kernel. */
static void store_tile(const tg_real *t, int nr, int m, int n, tg_real alpha, tg_real beta, tg_real *c, int ldc) {
    for (int r = 0; r < m; r++) {
        tg_real *cr = c + (size_t)r * ldc;
        const tg_real *tr = t + (size_t)r * nr;
        if (beta == 0)
            for (int j = 0; j < n; j++) cr[j] = alpha * tr[j];
        else
            for (int j = 0; j < n; j++) cr[j] = alpha * tr[j] + beta * cr[j];
    }
}

/* ---- packing --------------------------------------------------------------
 * A block (rows i0.., k0..; mc x kc) -> micro-panels of mr rows; panel p
 * holds op(A)(i0 + p*mr + r, k0 + k) at [p*mr*kc + k*mr + r], rows past mc
 * zero-filled so the kernel always runs on a full tile. */
static void pack_a(bool trans, int mc, int kc, const tg_real *A, int lda, int i0, int k0, int mr, tg_real *dst) {
    for (int ip = 0; ip < mc; ip += mr) {
        int m = mc - ip < mr ? mc - ip : mr;
        if (!trans) {
            /* op(A)(i,k) = A[i*lda + k]: rows are contiguous in k. */
            for (int r = 0; r < m; r++) {
                const tg_real *src = A + (size_t)(i0 + ip + r) * lda + k0;
                for (int k = 0; k < kc; k++) dst[(size_t)k * mr + r] = src[k];
            }
            for (int r = m; r < mr; r++)
                for (int k = 0; k < kc; k++) dst[(size_t)k * mr + r] = 0;
        } else {
            /* op(A)(i,k) = A[k*lda + i]: the mr rows of one k are contiguous. */
            for (int k = 0; k < kc; k++) {
                const tg_real *src = A + (size_t)(k0 + k) * lda + i0 + ip;
                tg_real *d = dst + (size_t)k * mr;
                for (int r = 0; r < m; r++) d[r] = src[r];
                for (int r = m; r < mr; r++) d[r] = 0;
            }
        }
        dst += (size_t)mr * kc;
    }
}

/* One nr-wide sliver of B (columns j0.., k0..): op(B)(k0 + k, j0 + j) at
 * [k*nr + j], columns past n zero-filled. */
static void pack_b_sliver(bool trans, int n, int kc, const tg_real *B, int ldb, int k0, int j0, int nr, tg_real *dst) {
    if (!trans) {
        /* op(B)(k,j) = B[k*ldb + j]: each k gives n contiguous values. */
        for (int k = 0; k < kc; k++) {
            const tg_real *src = B + (size_t)(k0 + k) * ldb + j0;
            tg_real *d = dst + (size_t)k * nr;
            for (int j = 0; j < n; j++) d[j] = src[j];
            for (int j = n; j < nr; j++) d[j] = 0;
        }
    } else {
        /* op(B)(k,j) = B[j*ldb + k]: each column j is contiguous in k. */
        for (int j = 0; j < n; j++) {
            const tg_real *src = B + (size_t)(j0 + j) * ldb + k0;
            for (int k = 0; k < kc; k++) dst[(size_t)k * nr + j] = src[k];
        }
        for (int j = n; j < nr; j++)
            for (int k = 0; k < kc; k++) dst[(size_t)k * nr + j] = 0;
    }
}

/* ---- portable micro-kernel ------------------------------------------------
 * Plain C on a PORT_MR x PORT_NR tile; the compiler vectorises the j loop
 * with whatever the baseline ISA offers (SSE2 on x86-64, NEON on arm64). */
static void kernel_portable(int kc, const tg_real *restrict a, const tg_real *restrict b, tg_real *c, int ldc,
                            tg_real alpha, tg_real beta, int m, int n) {
    tg_real acc[PORT_MR * PORT_NR] = {0};
    for (int k = 0; k < kc; k++) {
        for (int r = 0; r < PORT_MR; r++) {
            tg_real ar = a[r];
            for (int j = 0; j < PORT_NR; j++) acc[r * PORT_NR + j] += ar * b[j];
        }
        a += PORT_MR;
        b += PORT_NR;
    }
    store_tile(acc, PORT_NR, m, n, alpha, beta, c, ldc);
}

/* Small products without AVX2: i-k-j loops over rows of C, the inner loop
 * contiguous in C and (when not transposed) in B. */
static void direct_portable(bool trans_a, bool trans_b, int i_begin, int i_end, int N, int K, tg_real alpha,
                            const tg_real *A, int lda, const tg_real *B, int ldb, tg_real beta, tg_real *C, int ldc,
                            const tg_gemm_epilogue *ep) {
    scale_c(i_end - i_begin, N, beta, C + (size_t)i_begin * ldc, ldc);
    for (int i = i_begin; i < i_end; i++) {
        /* restrict: C never overlaps A or B, and saying so lets -O2 vectorise
         * without run-time overlap checks */
        tg_real *restrict c = C + (size_t)i * ldc;
        if (!trans_b) {
            for (int k = 0; k < K; k++) {
                tg_real a = alpha * (trans_a ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]);
                const tg_real *restrict b = B + (size_t)k * ldb;
                for (int j = 0; j < N; j++) c[j] += a * b[j];
            }
        } else {
            for (int j = 0; j < N; j++) {
                const tg_real *b = B + (size_t)j * ldb;
                tg_real s = 0;
                for (int k = 0; k < K; k++) s += (trans_a ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]) * b[k];
                c[j] += alpha * s;
            }
        }
        gemm_epilogue(ep, C, c, ldc, 1, N); /* row i is finished */
    }
}

/* ---- AVX2 + FMA micro-kernels --------------------------------------------- */
#if TG_X86
#ifdef TG_DOUBLE
typedef __m256d vreal;
#define VLEN                 4
#define V_ZERO()             _mm256_setzero_pd()
#define V_LOAD(p)            _mm256_loadu_pd(p)
#define V_STORE(p, v)        _mm256_storeu_pd((p), (v))
#define V_BCAST(p)           _mm256_broadcast_sd(p)
#define V_SET1(x)            _mm256_set1_pd(x)
#define V_FMA(a, b, c)       _mm256_fmadd_pd((a), (b), (c))
#define V_MUL(a, b)          _mm256_mul_pd((a), (b))
#define V_ADD(a, b)          _mm256_add_pd((a), (b))
#define V_MASKLOAD(p, m)     _mm256_maskload_pd((p), (m))
#define V_MASKSTORE(p, m, v) _mm256_maskstore_pd((p), (m), (v))
/* Lane l of the mask is on when base + l < n. */
#define V_MASK(n, base) \
    _mm256_cmpgt_epi64(_mm256_set1_epi64x(n), _mm256_setr_epi64x((base), (base) + 1, (base) + 2, (base) + 3))
#else
typedef __m256 vreal;
#define VLEN                 8
#define V_ZERO()             _mm256_setzero_ps()
#define V_LOAD(p)            _mm256_loadu_ps(p)
#define V_STORE(p, v)        _mm256_storeu_ps((p), (v))
#define V_BCAST(p)           _mm256_broadcast_ss(p)
#define V_SET1(x)            _mm256_set1_ps(x)
#define V_FMA(a, b, c)       _mm256_fmadd_ps((a), (b), (c))
#define V_MUL(a, b)          _mm256_mul_ps((a), (b))
#define V_ADD(a, b)          _mm256_add_ps((a), (b))
#define V_MASKLOAD(p, m)     _mm256_maskload_ps((p), (m))
#define V_MASKSTORE(p, m, v) _mm256_maskstore_ps((p), (m), (v))
#define V_MASK(n, base)                                                                                                \
    _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32((base), (base) + 1, (base) + 2, (base) + 3, (base) + 4, \
                                                               (base) + 5, (base) + 6, (base) + 7))
#endif

/* Twelve accumulators c<row><half>: row r of the tile is (c_r0, c_r1). */
#define ACC_DECL                                                          \
    vreal c00 = V_ZERO(), c01 = V_ZERO(), c10 = V_ZERO(), c11 = V_ZERO(); \
    vreal c20 = V_ZERO(), c21 = V_ZERO(), c30 = V_ZERO(), c31 = V_ZERO(); \
    vreal c40 = V_ZERO(), c41 = V_ZERO(), c50 = V_ZERO(), c51 = V_ZERO()
#define ROW_FMA(r, ap)                     \
    do {                                   \
        vreal ar_ = V_BCAST(ap);           \
        c##r##0 = V_FMA(ar_, b0, c##r##0); \
        c##r##1 = V_FMA(ar_, b1, c##r##1); \
    } while (0)
/* ROW_FMA for row r of the direct kernel (row pointer a<r>, depth offset o). */
#define ROW_FMA_AT(r) ROW_FMA(r, a##r + o)

/* Writes the 6 x NR accumulators to t (row-major, NR per row). */
#define ROW_SPILL(r)                              \
    do {                                          \
        V_STORE(t_ + (r)*AVX_NR, c##r##0);        \
        V_STORE(t_ + (r)*AVX_NR + VLEN, c##r##1); \
    } while (0)
#define ACC_SPILL(t)           \
    do {                       \
        tg_real *t_ = (t);     \
        GEMM_ROWS6(ROW_SPILL); \
    } while (0)

/* Full-tile store, row r: C = alpha*acc (+ beta*C). */
#define ROW_STORE(r)                                              \
    do {                                                          \
        tg_real *cr_ = c + (size_t)(r)*ldc;                       \
        vreal t0_ = V_MUL(va, c##r##0), t1_ = V_MUL(va, c##r##1); \
        if (beta != 0) {                                          \
            t0_ = V_ADD(t0_, V_MUL(vb, V_LOAD(cr_)));             \
            t1_ = V_ADD(t1_, V_MUL(vb, V_LOAD(cr_ + VLEN)));      \
        }                                                         \
        V_STORE(cr_, t0_);                                        \
        V_STORE(cr_ + VLEN, t1_);                                 \
    } while (0)
/* The tile's accumulators into C: a full tile row by row in registers, an
 * edge tile through a spill to memory (store_tile). */
#define TILE_STORE()                                          \
    do {                                                      \
        if (m == AVX_MR && n == AVX_NR) {                     \
            vreal va = V_SET1(alpha), vb = V_SET1(beta);      \
            GEMM_ROWS6(ROW_STORE);                            \
        } else {                                              \
            _Alignas(64) tg_real t[AVX_MR * AVX_NR];          \
            ACC_SPILL(t);                                     \
            store_tile(t, AVX_NR, m, n, alpha, beta, c, ldc); \
        }                                                     \
    } while (0)

/* Packed kernel: a is an AVX_MR-row micro-panel, b an AVX_NR-wide sliver,
 * both contiguous; the m x n corner of the tile is stored to C. */
TG_AVX2 static void kernel_avx2(int kc, const tg_real *a, const tg_real *b, tg_real *c, int ldc, tg_real alpha,
                                tg_real beta, int m, int n) {
    /* Fetch the C tile now so its cache misses overlap the k loop. */
    GEMM_PREFETCH_TILE(c, ldc, m, AVX_NR);
    ACC_DECL;
    int k = 0;
    /* Unrolled by 4: fewer loop branches, and the loads of the next step
     * can issue while the FMAs of this one run. */
#define STEP(u)                                   \
    do {                                          \
        vreal b0 = V_LOAD(b + (u)*AVX_NR);        \
        vreal b1 = V_LOAD(b + (u)*AVX_NR + VLEN); \
        const tg_real *a_ = a + (u)*AVX_MR;       \
        ROW_FMA(0, a_ + 0);                       \
        ROW_FMA(1, a_ + 1);                       \
        ROW_FMA(2, a_ + 2);                       \
        ROW_FMA(3, a_ + 3);                       \
        ROW_FMA(4, a_ + 4);                       \
        ROW_FMA(5, a_ + 5);                       \
    } while (0)
    for (; k + 4 <= kc; k += 4) {
        __builtin_prefetch(b + 4 * AVX_NR * 4);
        STEP(0);
        STEP(1);
        STEP(2);
        STEP(3);
        a += 4 * AVX_MR;
        b += 4 * AVX_NR;
    }
    for (; k < kc; k++) {
        STEP(0);
        a += AVX_MR;
        b += AVX_NR;
    }
#undef STEP
    TILE_STORE();
}

/* Direct kernel for small products: op(A)(i,k) = a[i*ars + k*acs], op(B)
 * rows at b + k*ldb, no packing. The tile's m x n corner is stored; B rows
 * are read with masked loads past column nload (nload == NR when b is a
 * zero-padded sliver). Rows past m repeat row 0: computed, never stored. */
TG_AVX2 static void kernel_direct_avx2(int K, const tg_real *a, ptrdiff_t ars, ptrdiff_t acs, const tg_real *b,
                                       ptrdiff_t ldb, tg_real *c, int ldc, tg_real alpha, tg_real beta, int m, int n,
                                       int nload) {
    const tg_real *a0 = a, *a1 = a + (m > 1 ? ars : 0), *a2 = a + (m > 2 ? 2 * ars : 0);
    const tg_real *a3 = a + (m > 3 ? 3 * ars : 0), *a4 = a + (m > 4 ? 4 * ars : 0);
    const tg_real *a5 = a + (m > 5 ? 5 * ars : 0);
    ACC_DECL;
    if (nload == AVX_NR) {
        for (int k = 0; k < K; k++, b += ldb) {
            ptrdiff_t o = k * acs;
            vreal b0 = V_LOAD(b), b1 = V_LOAD(b + VLEN);
            GEMM_ROWS6(ROW_FMA_AT);
        }
    } else {
        /* maskload never touches memory in masked-off lanes, so reading a
         * partial row of B cannot fault past its end. */
        __m256i m0 = V_MASK(nload, 0), m1 = V_MASK(nload, VLEN);
        for (int k = 0; k < K; k++, b += ldb) {
            ptrdiff_t o = k * acs;
            vreal b0 = V_MASKLOAD(b, m0), b1 = V_MASKLOAD(b + VLEN, m1);
            GEMM_ROWS6(ROW_FMA_AT);
        }
    }
    TILE_STORE();
}

#ifndef TG_DOUBLE

/* pack_a for an untransposed float A and the 6-row kernel: 8 k at a time,
 * the panel's rows (zero rows past m, and two more to make 8) transposed
 * in registers, so each k column of 6 values is one store. The store of
 * column k writes 8 values; its last 2 land where column k+1 goes next (or,
 * for the last column, in the 8 elements of slack the driver leaves after (a_slack)
 * the buffer). Measured: packing went from 9% of a 1024^3 product to 3%. */
TG_AVX2 static void pack_a_avx2(int mc, int kc, const tg_real *A, int lda, int i0, int k0, tg_real *dst) {
    for (int ip = 0; ip < mc; ip += AVX_MR) {
        int m = mc - ip < AVX_MR ? mc - ip : AVX_MR;
        const tg_real *src[AVX_MR];
        for (int r = 0; r < AVX_MR; r++) src[r] = A + (size_t)(i0 + ip + (r < m ? r : 0)) * lda + k0;
        int k = 0;
        for (; k + 8 <= kc; k += 8) {
            __m256 v[8];
            for (int r = 0; r < AVX_MR; r++) v[r] = r < m ? _mm256_loadu_ps(src[r] + k) : _mm256_setzero_ps();
            v[6] = v[7] = _mm256_setzero_ps();
            transpose8_regs(v);
            for (int j = 0; j < 8; j++) _mm256_storeu_ps(dst + (size_t)(k + j) * AVX_MR, v[j]);
        }
        for (; k < kc; k++)
            for (int r = 0; r < AVX_MR; r++) dst[(size_t)k * AVX_MR + r] = r < m ? src[r][k] : 0;
        dst += (size_t)AVX_MR * kc;
    }
}

/* pack_a for a transposed float A (op(A)(i,k) = A[k*lda + i], as in the
 * weight gradient dY^T X): the panel's 6 values of one k are contiguous in
 * A, so each k is one 8-wide load and one 8-wide store (its last 2 values
 * overwritten by the next k, or landing in the slack). The load reads 2
 * values past the panel, so it is used only where the block has them. */
TG_AVX2 static void pack_at_avx2(int mc, int kc, const tg_real *A, int lda, int i0, int k0, tg_real *dst) {
    for (int ip = 0; ip < mc; ip += AVX_MR) {
        int m = mc - ip < AVX_MR ? mc - ip : AVX_MR;
        const tg_real *src = A + (size_t)k0 * lda + i0 + ip;
        if (ip + 8 <= mc) {
            for (int k = 0; k < kc; k++)
                _mm256_storeu_ps(dst + (size_t)k * AVX_MR, _mm256_loadu_ps(src + (size_t)k * lda));
        } else {
            for (int k = 0; k < kc; k++)
                for (int r = 0; r < AVX_MR; r++) dst[(size_t)k * AVX_MR + r] = r < m ? src[(size_t)k * lda + r] : 0;
        }
        dst += (size_t)AVX_MR * kc;
    }
}

/* pack_b_sliver for a transposed float B (op(B)(k,j) = B[j*ldb + k], as in
 * X W^T): the sliver's nr columns (16 for the AVX2 kernel, 32 for the
 * AVX-512 one) are nr rows of B, transposed 8 x 8 at a time so that each k
 * row of the sliver is nr/8 stores. The element-by-element gather it
 * replaces took 8-11% of a GPT training step with the 32-wide sliver. */
TG_AVX2 static void pack_bt_avx2(int nr, int n, int kc, const tg_real *B, int ldb, int k0, int j0, tg_real *dst) {
    const tg_real *src[32]; /* nr <= 32 */
    for (int j = 0; j < nr; j++) src[j] = B + (size_t)(j0 + (j < n ? j : 0)) * ldb + k0;
    int k = 0;
    for (; k + 8 <= kc; k += 8) {
        for (int h = 0; h < nr / 8; h++) {
            __m256 v[8];
            for (int j = 0; j < 8; j++)
                v[j] = h * 8 + j < n ? _mm256_loadu_ps(src[h * 8 + j] + k) : _mm256_setzero_ps();
            transpose8_regs(v);
            for (int q = 0; q < 8; q++) _mm256_storeu_ps(dst + (size_t)(k + q) * nr + h * 8, v[q]);
        }
    }
    for (; k < kc; k++)
        for (int j = 0; j < nr; j++) dst[(size_t)k * nr + j] = j < n ? src[j][k] : 0;
}
#endif

/* Small product: tiles of 6 x NR, B slivers outer so one sliver of B is
 * reused from L1 by every row tile. A transposed B is first copied, one
 * K x NR sliver at a time, into a stack buffer (K <= DIRECT_MAX_K). */
static void direct_avx2(bool trans_a, bool trans_b, int i_begin, int i_end, int N, int K, tg_real alpha,
                        const tg_real *A, int lda, const tg_real *B, int ldb, tg_real beta, tg_real *C, int ldc,
                        const tg_gemm_epilogue *ep) {
    _Alignas(64) tg_real sliver[DIRECT_MAX_K * AVX_NR];
    ptrdiff_t ars = trans_a ? 1 : lda, acs = trans_a ? lda : 1;
    for (int j0 = 0; j0 < N; j0 += AVX_NR) {
        int n = N - j0 < AVX_NR ? N - j0 : AVX_NR;
        const tg_real *b = B + j0;
        ptrdiff_t bstride = ldb;
        int nload = n;
        if (trans_b) {
#ifdef TG_DOUBLE
            pack_b_sliver(true, n, K, B, ldb, 0, j0, AVX_NR, sliver);
#else
            pack_bt_avx2(AVX_NR, n, K, B, ldb, 0, j0, sliver);
#endif
            b = sliver;
            bstride = AVX_NR;
            nload = AVX_NR; /* zero-padded: full loads are safe */
        }
        for (int i0 = i_begin; i0 < i_end; i0 += AVX_MR) {
            int m = i_end - i0 < AVX_MR ? i_end - i0 : AVX_MR;
            tg_real *c = C + (size_t)i0 * ldc + j0;
            kernel_direct_avx2(K, A + (size_t)i0 * ars, ars, acs, b, bstride, c, ldc, alpha, beta, m, n, nload);
            gemm_epilogue(ep, C, c, ldc, m, n);
        }
    }
}

/* ---- few rows: B read as it lies ---------------------------------------------
 * A product of a few rows (one token a step in generation, M = batch) uses
 * each element of B only M times, so packing B (a read and a write of all of
 * it, then the kernel's read) costs as much as the product; and the direct
 * loops read B one sliver of columns at a time, down all K rows of B (one
 * cache line per row, a row's stride apart, a page after page) or across 16
 * rows at once. Measured in a scratch program, 1 x 1024 x 4096, B
 * untransposed, one core: packed 2.5-2.9 ms, 32-column slivers down B in
 * place 2.4-2.5, the loop below 0.8-1.0 (0.5-0.8 at AVX-512 width); a
 * plain read of B 0.3-0.6. These loops read B in the order it lies:
 *   B untransposed (op(B) row k is B's row k): C's rows += A(i,k) * B's row
 *     k, 4 k at a time, into a block of sums that stays in L1 (FEW_ACC),
 *     each sum chained in k order as in the register kernels;
 *   B transposed (B[j, k], a Linear layer's weight), A untransposed: dot
 *     products of 2 rows of A and 4 rows of B, VLEN lanes over k (lane l
 *     sums the k = l mod VLEN), the lanes added in a fixed order at the end.
 * An element's value depends on K alone, not on which columns a call
 * covers: a split of the columns among threads gives the same bits. */
#define FEW_ACC  (16384 / (int)sizeof(tg_real)) /* 16 KB of sums: half of L1 */
#define FEW_COLS 64                             /* a thread's share of the columns: a multiple of this */
/* few_rows_nn and its AVX-512 twin. */
typedef void (*few_nn_fn)(bool trans_a, int m, int N, int K, tg_real alpha, const tg_real *A, int lda, const tg_real *B,
                          int ldb, tg_real beta, tg_real *C, int ldc, const tg_gemm_epilogue *ep);

/* How the few-row loops load an operand: its tg_real values as they are
 * (FEW_PLAIN), or as the bf16 GEMM's fp32 engine multiplies them (float
 * build): tg_real values rounded to bf16 (FEW_ROUND: round8, the packers'
 * bf), bf16 bits widened (FEW_WIDE: bf_h). Those read no copy of W: a
 * decode step's product x W^T on that engine used to round a whole copy
 * of W first, which made bf16 generation 1.6x slower than float on an
 * AVX2 CPU (lm --sample; bench/measured.md, session 10). few_scalar is
 * the same for one value (few_rows_nn's broadcasts of A: packed1). */
enum { FEW_PLAIN, FEW_ROUND, FEW_WIDE };
/* VLEN values of operand p (mode) from element i on, or (tail) its first
 * n (< VLEN, mask mk), zeros after. */
TG_AVX2 static inline __attribute__((always_inline)) vreal few_load(int mode, const void *p, size_t i, bool tail,
                                                                    __m256i mk, int n) {
#if TG_SIMD_F32
    if (mode == FEW_WIDE) {
        const uint16_t *h = (const uint16_t *)p + i;
        if (!tail) return widen8_packed(h);
        uint16_t t[8] = {0}; /* no load past the row: its last n values, zeros after */
        memcpy(t, h, sizeof(uint16_t) * (size_t)n);
        return widen8_packed(t);
    }
#endif
    (void)mode, (void)n;
    const tg_real *f = (const tg_real *)p + i;
    vreal v = tail ? V_MASKLOAD(f, mk) : V_LOAD(f);
#if TG_SIMD_F32
    if (mode == FEW_ROUND) v = round8(v); /* round8(0) = 0: the zeros past K stay zeros */
#endif
    return v;
}

TG_AVX2 static inline __attribute__((always_inline)) tg_real few_scalar(int mode, const void *p, size_t i) {
#if TG_SIMD_F32
    if (mode != FEW_PLAIN) return packed1(mode == FEW_ROUND ? p : NULL, mode == FEW_WIDE ? p : NULL, i);
#endif
    (void)mode;
    return ((const tg_real *)p)[i];
}

/* few_rows_nn's loops, A's and B's loads in modes am and bm (always
 * inlined with constants). Under a bf16 mode A's values of a group of k
 * are made once per block of columns (ar), not at each broadcast. */
TG_AVX2 static inline __attribute__((always_inline)) void
few_rows_nn_body(int am, int bm, bool trans_a, int m, int N, int K, tg_real alpha, const void *A, int lda,
                 const void *B, int ldb, tg_real beta, tg_real *C, int ldc, const tg_gemm_epilogue *ep) {
    _Alignas(32) tg_real acc[FEW_ACC];
    tg_real ar[FEW_ROWS_MAX * 4];      /* A(r, k + q) at ar[r * 4 + q], as multiplied (am != FEW_PLAIN) */
    int W = FEW_ACC / m / VLEN * VLEN; /* columns per block of sums */
    if (W > (int)round_up((size_t)N, VLEN)) W = (int)round_up((size_t)N, VLEN);
    const size_t ai = trans_a ? 1 : (size_t)lda, ak = trans_a ? (size_t)lda : 1; /* A(i,k) at A[i*ai + k*ak] */
    const tg_real *Af = (const tg_real *)A;
    for (int j0 = 0; j0 < N; j0 += W) {
        const int w = N - j0 < W ? N - j0 : W;
        memset(acc, 0, sizeof(tg_real) * (size_t)m * W);
        int k = 0;
        for (; k + 4 <= K; k += 4) {
            const size_t b = (size_t)k * ldb + j0;
            if (am != FEW_PLAIN)
                for (int r = 0; r < m; r++)
                    for (int q = 0; q < 4; q++) ar[r * 4 + q] = few_scalar(am, A, r * ai + (k + q) * ak);
            for (int j = 0; j < w; j += VLEN) {
                vreal b0, b1, b2, b3;
                const bool tail = j + VLEN > w; /* the last columns: masked loads never touch memory past them */
                const __m256i mk = tail ? V_MASK(w - j, 0) : _mm256_setzero_si256();
                b0 = few_load(bm, B, b + j, tail, mk, w - j), b1 = few_load(bm, B, b + ldb + j, tail, mk, w - j);
                b2 = few_load(bm, B, b + 2 * (size_t)ldb + j, tail, mk, w - j);
                b3 = few_load(bm, B, b + 3 * (size_t)ldb + j, tail, mk, w - j);
                for (int r = 0; r < m; r++) {
                    const tg_real *a = am == FEW_PLAIN ? Af + r * ai + k * ak : ar + r * 4;
                    const size_t s = am == FEW_PLAIN ? ak : 1;
                    tg_real *sum = acc + (size_t)r * W + j;
                    vreal t = V_LOAD(sum);
                    t = V_FMA(V_BCAST(a), b0, t);
                    t = V_FMA(V_BCAST(a + s), b1, t);
                    t = V_FMA(V_BCAST(a + 2 * s), b2, t);
                    t = V_FMA(V_BCAST(a + 3 * s), b3, t);
                    V_STORE(sum, t);
                }
            }
        }
        for (; k < K; k++) {
            const size_t b = (size_t)k * ldb + j0;
            if (am != FEW_PLAIN)
                for (int r = 0; r < m; r++) ar[r] = few_scalar(am, A, r * ai + k * ak);
            for (int j = 0; j < w; j += VLEN) {
                const bool tail = j + VLEN > w;
                vreal b0 = few_load(bm, B, b + j, tail, tail ? V_MASK(w - j, 0) : _mm256_setzero_si256(), w - j);
                for (int r = 0; r < m; r++) {
                    tg_real *sum = acc + (size_t)r * W + j;
                    const tg_real *a = am == FEW_PLAIN ? Af + r * ai + k * ak : ar + r;
                    V_STORE(sum, V_FMA(V_BCAST(a), b0, V_LOAD(sum)));
                }
            }
        }
        store_tile(acc, W, m, w, alpha, beta, C + j0, ldc);
        gemm_epilogue(ep, C, C + j0, ldc, m, w);
    }
}
TG_AVX2 static void few_rows_nn(bool trans_a, int m, int N, int K, tg_real alpha, const tg_real *A, int lda,
                                const tg_real *B, int ldb, tg_real beta, tg_real *C, int ldc,
                                const tg_gemm_epilogue *ep) {
    few_rows_nn_body(FEW_PLAIN, FEW_PLAIN, trans_a, m, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ep);
}

/* The VLEN lanes of v added in a fixed order. */
TG_AVX2 static inline tg_real lanes_sum(vreal v) {
#ifdef TG_DOUBLE
    __m128d x = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(x, _mm_unpackhi_pd(x, x)));
#else
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_add_ss(x, _mm_movehdup_ps(x)));
#endif
}

#define DOT_FMA(r, j) s##r##j = V_FMA(x##r, y##j, s##r##j)
/* few_rows_nt's loops, A's and B's loads in modes am and bm (always
 * inlined with constants: one function per pair of modes). */
TG_AVX2 static inline __attribute__((always_inline)) void
few_rows_nt_body(int am, int bm, int m, int N, int K, tg_real alpha, const void *A, int lda, const void *B, int ldb,
                 tg_real beta, tg_real *C, int ldc, const tg_gemm_epilogue *ep) {
    const int kfull = K / VLEN * VLEN;
    const __m256i mk = V_MASK(K - kfull, 0); /* the last K % VLEN values of a row */
    for (int j = 0; j < N; j += 4) {
        /* columns past N repeat column j: computed, not stored */
        const size_t y0o = (size_t)j * ldb, y1o = j + 1 < N ? y0o + ldb : y0o;
        const size_t y2o = j + 2 < N ? y0o + 2 * (size_t)ldb : y0o, y3o = j + 3 < N ? y0o + 3 * (size_t)ldb : y0o;
        for (int i = 0; i < m; i += 2) {
            const size_t x0o = (size_t)i * lda, x1o = i + 1 < m ? x0o + lda : x0o;
            vreal s00 = V_ZERO(), s01 = V_ZERO(), s02 = V_ZERO(), s03 = V_ZERO();
            vreal s10 = V_ZERO(), s11 = V_ZERO(), s12 = V_ZERO(), s13 = V_ZERO();
            for (int k = 0; k < K; k += VLEN) {
                const bool tail = k >= kfull; /* zeros past K in both operands add +0 */
                const int n = K - kfull;
                vreal x0 = few_load(am, A, x0o + k, tail, mk, n), x1 = few_load(am, A, x1o + k, tail, mk, n);
                vreal y0 = few_load(bm, B, y0o + k, tail, mk, n), y1 = few_load(bm, B, y1o + k, tail, mk, n);
                vreal y2 = few_load(bm, B, y2o + k, tail, mk, n), y3 = few_load(bm, B, y3o + k, tail, mk, n);
                DOT_FMA(0, 0), DOT_FMA(0, 1), DOT_FMA(0, 2), DOT_FMA(0, 3);
                DOT_FMA(1, 0), DOT_FMA(1, 1), DOT_FMA(1, 2), DOT_FMA(1, 3);
            }
            tg_real t[2 * 4] = {lanes_sum(s00), lanes_sum(s01), lanes_sum(s02), lanes_sum(s03),
                                lanes_sum(s10), lanes_sum(s11), lanes_sum(s12), lanes_sum(s13)};
            store_tile(t, 4, m - i < 2 ? m - i : 2, N - j < 4 ? N - j : 4, alpha, beta, C + (size_t)i * ldc + j, ldc);
        }
    }
    gemm_epilogue(ep, C, C, ldc, m, N);
}
TG_AVX2 static void few_rows_nt(int m, int N, int K, tg_real alpha, const tg_real *A, int lda, const tg_real *B,
                                int ldb, tg_real beta, tg_real *C, int ldc, const tg_gemm_epilogue *ep) {
    few_rows_nt_body(FEW_PLAIN, FEW_PLAIN, m, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ep);
}
#if TG_SIMD_F32
/* The few-row loops on the bf16 GEMM's operands: each a float one
 * rounded, or bf16 bits widened (A16, B16 set); B transposed (nt) or not. */
TG_AVX2 static void few_rows_bf16(bool nt, bool trans_a, int m, int N, int K, tg_real alpha, const tg_real *A,
                                  const uint16_t *A16, int lda, const tg_real *B, const uint16_t *B16, int ldb,
                                  tg_real beta, tg_real *C, int ldc, const tg_gemm_epilogue *ep) {
#define FEW(am, a, bm, b)                                                                        \
    do {                                                                                         \
        if (nt)                                                                                  \
            few_rows_nt_body(am, bm, m, N, K, alpha, a, lda, b, ldb, beta, C, ldc, ep);          \
        else                                                                                     \
            few_rows_nn_body(am, bm, trans_a, m, N, K, alpha, a, lda, b, ldb, beta, C, ldc, ep); \
    } while (0)
    if (A16 && B16)
        FEW(FEW_WIDE, A16, FEW_WIDE, B16);
    else if (A16)
        FEW(FEW_WIDE, A16, FEW_ROUND, B);
    else if (B16)
        FEW(FEW_ROUND, A, FEW_WIDE, B16);
    else
        FEW(FEW_ROUND, A, FEW_ROUND, B);
#undef FEW
}
#endif
#undef DOT_FMA
#endif /* TG_X86 */

/* ---- AVX-512 micro-kernel (float) ------------------------------------------
 * The AVX2 kernel's scheme at twice the width: a 6 x 32 tile of C in twelve
 * zmm accumulators, one broadcast of A and two loads of B per k. On cores
 * whose FMA units are 512 bits wide (AMD Zen 5, Intel server cores) that
 * doubles the multiply-adds per cycle; on one that splits them in two it
 * is no slower. The A micro-panels have the AVX2 kernel's 6 rows, so its
 * fast packers serve both. Chosen at run time (tg_cpu_has_avx512). */
#if TG_X86 && !defined(TG_DOUBLE)
#define Z_MR 6
#define Z_NR 32
#define Z_MC 144
#define Z_KC 256
#define Z_NC 4064 /* a multiple of Z_NR */
#define Z_FMA(r)                                     \
    do {                                             \
        __m512 ar_ = _mm512_set1_ps(a##r[off]);      \
        z##r##0 = _mm512_fmadd_ps(ar_, b0, z##r##0); \
        z##r##1 = _mm512_fmadd_ps(ar_, b1, z##r##1); \
    } while (0)

/* The 6 x 32 tile with A read in place: row r, depth k at
 * a[r*a_rs + k*a_ks], rows past m reading row 0 (their results are not
 * stored). The packed panel is a_rs = 1, a_ks = 6; A itself is a_rs = lda,
 * a_ks = 1, or, transposed, a_rs = 1, a_ks = lda. */
TG_AVX512 static inline __attribute__((always_inline)) void z_tile(int kc, const float *a, size_t a_rs, size_t a_ks,
                                                                   const float *b, float *c, int ldc, float alpha,
                                                                   float beta, int m, int n) {
    const float *a0 = a, *a1 = a + (m > 1 ? a_rs : 0), *a2 = a + (m > 2 ? 2 * a_rs : 0);
    const float *a3 = a + (m > 3 ? 3 * a_rs : 0), *a4 = a + (m > 4 ? 4 * a_rs : 0), *a5 = a + (m > 5 ? 5 * a_rs : 0);
    GEMM_PREFETCH_TILE(c, ldc, m, Z_NR);
    GEMM_Z_ACCUMULATORS;
    size_t off = 0;
#pragma GCC unroll 4
    for (int k = 0; k < kc; k++, off += a_ks, b += Z_NR) {
        __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
        GEMM_ROWS6(Z_FMA);
    }
    if (m == Z_MR && n == Z_NR) {
        __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
        GEMM_ROWS6(GEMM_Z_STORE);
    } else {
        _Alignas(64) float t[Z_MR * Z_NR];
        GEMM_ROWS6(GEMM_Z_SPILL);
        store_tile(t, Z_NR, m, n, alpha, beta, c, ldc);
    }
}

TG_AVX512 static void kernel_avx512(int kc, const float *a, const float *b, float *c, int ldc, float alpha, float beta,
                                    int m, int n) {
    z_tile(kc, a, 1, Z_MR, b, c, ldc, alpha, beta, m, n);
}
TG_AVX512 static void kernel_avx512_a(int kc, const float *a, size_t a_rs, size_t a_ks, const float *b, float *c,
                                      int ldc, float alpha, float beta, int m, int n) {
    z_tile(kc, a, a_rs, a_ks, b, c, ldc, alpha, beta, m, n);
}
#undef Z_FMA

/* pack_b_sliver for an untransposed float B and the 32-wide sliver: each k
 * row is two 16-wide loads, masked past n (masked-off lanes are neither
 * read nor faulted on) and stored whole, zeros included. The generic
 * loop's short variable-length copies took 5% of a GPT step. */
TG_AVX512 static void pack_b_avx512(int n, int kc, const float *B, int ldb, int k0, int j0, float *dst) {
    __mmask16 m0 = (__mmask16)(n >= 16 ? 0xFFFF : (1u << n) - 1);
    __mmask16 m1 = (__mmask16)(n >= 32 ? 0xFFFF : n <= 16 ? 0 : (1u << (n - 16)) - 1);
    for (int k = 0; k < kc; k++) {
        const float *src = B + (size_t)(k0 + k) * ldb + j0;
        _mm512_storeu_ps(dst + (size_t)k * Z_NR, _mm512_maskz_loadu_ps(m0, src));
        _mm512_storeu_ps(dst + (size_t)k * Z_NR + 16, _mm512_maskz_loadu_ps(m1, src + 16));
    }
}

/* few_rows_nn 16 floats wide: the same sums in the same order (a chain of
 * exactly rounded FMAs per element, so the same bits as the AVX2 loop),
 * half the instructions per byte of B. */
TG_AVX512 static void few_rows_nn_avx512(bool trans_a, int m, int N, int K, float alpha, const float *A, int lda,
                                         const float *B, int ldb, float beta, float *C, int ldc,
                                         const tg_gemm_epilogue *ep) {
    _Alignas(64) float acc[FEW_ACC];
    int W = FEW_ACC / m / 16 * 16; /* columns per block of sums */
    if (W > (int)round_up((size_t)N, 16)) W = (int)round_up((size_t)N, 16);
    const size_t ai = trans_a ? 1 : (size_t)lda, ak = trans_a ? (size_t)lda : 1; /* A(i,k) at A[i*ai + k*ak] */
    for (int j0 = 0; j0 < N; j0 += W) {
        const int w = N - j0 < W ? N - j0 : W;
        memset(acc, 0, sizeof(float) * (size_t)m * W);
        int k = 0;
        for (; k + 4 <= K; k += 4) {
            const float *b = B + (size_t)k * ldb + j0;
            for (int j = 0; j < w; j += 16) {
                __mmask16 mk = (__mmask16)(w - j >= 16 ? 0xFFFF : (1u << (w - j)) - 1); /* no load past B's row */
                __m512 b0 = _mm512_maskz_loadu_ps(mk, b + j), b1 = _mm512_maskz_loadu_ps(mk, b + ldb + j);
                __m512 b2 = _mm512_maskz_loadu_ps(mk, b + 2 * (size_t)ldb + j);
                __m512 b3 = _mm512_maskz_loadu_ps(mk, b + 3 * (size_t)ldb + j);
                for (int r = 0; r < m; r++) {
                    const float *a = A + r * ai + k * ak;
                    float *sum = acc + (size_t)r * W + j;
                    __m512 t = _mm512_load_ps(sum);
                    t = _mm512_fmadd_ps(_mm512_set1_ps(a[0]), b0, t);
                    t = _mm512_fmadd_ps(_mm512_set1_ps(a[ak]), b1, t);
                    t = _mm512_fmadd_ps(_mm512_set1_ps(a[2 * ak]), b2, t);
                    t = _mm512_fmadd_ps(_mm512_set1_ps(a[3 * ak]), b3, t);
                    _mm512_store_ps(sum, t);
                }
            }
        }
        for (; k < K; k++) {
            const float *b = B + (size_t)k * ldb + j0;
            for (int j = 0; j < w; j += 16) {
                __mmask16 mk = (__mmask16)(w - j >= 16 ? 0xFFFF : (1u << (w - j)) - 1);
                __m512 b0 = _mm512_maskz_loadu_ps(mk, b + j);
                for (int r = 0; r < m; r++) {
                    float *sum = acc + (size_t)r * W + j;
                    _mm512_store_ps(sum, _mm512_fmadd_ps(_mm512_set1_ps(A[r * ai + k * ak]), b0, _mm512_load_ps(sum)));
                }
            }
        }
        store_tile(acc, W, m, w, alpha, beta, C + j0, ldc);
        gemm_epilogue(ep, C, C + j0, ldc, m, w);
    }
}
#endif

/* ---- the engines: rows of the one GEMM driver (gemm_driver.h) --------------
 * Each is a micro-kernel and its packers; the loops, the K blocks, the
 * thread split and the epilogue are gemm_drive's. The wrappers adapt the
 * kernels' own signatures to the driver's. */
static void pack_a_generic(const gemm_job *j, int i0, int m, void *dst) {
    pack_a(j->trans_a, m, j->kcur, j->A, j->lda, i0, j->pc, j->eng->mr, dst);
}
static void pack_b_generic(const gemm_job *j, int j0, int n, void *dst) {
    pack_b_sliver(j->trans_b, n, j->kcur, j->B, j->ldb, j->pc, j->jc + j0, j->eng->nr, dst);
}
static void kernel_portable_e(const gemm_job *j, const void *a, const void *b, tg_real *c, tg_real beta, int m, int n) {
    kernel_portable(j->depth, a, b, c, j->ldc, j->alpha, beta, m, n);
}

#if TG_X86
/* The AVX2 and AVX-512 kernels both take 6-row micro-panels, so they share
 * the fast packers of A (float; the double build packs with the loops). */
static void pack_a_6(const gemm_job *j, int i0, int m, void *dst) {
#ifndef TG_DOUBLE
    if (j->trans_a)
        pack_at_avx2(m, j->kcur, j->A, j->lda, i0, j->pc, dst);
    else
        pack_a_avx2(m, j->kcur, j->A, j->lda, i0, j->pc, dst);
#else
    pack_a_generic(j, i0, m, dst);
#endif
}
static void pack_b_avx2(const gemm_job *j, int j0, int n, void *dst) {
#ifndef TG_DOUBLE
    if (j->trans_b) {
        pack_bt_avx2(AVX_NR, n, j->kcur, j->B, j->ldb, j->pc, j->jc + j0, dst);
        return;
    }
#endif
    pack_b_generic(j, j0, n, dst);
}
TG_AVX2 static void kernel_avx2_e(const gemm_job *j, const void *a, const void *b, tg_real *c, tg_real beta, int m,
                                  int n) {
    kernel_avx2(j->depth, a, b, c, j->ldc, j->alpha, beta, m, n);
}
#endif

#if TG_SIMD_F32
static void pack_b_z(const gemm_job *j, int j0, int n, void *dst) {
    if (j->trans_b)
        pack_bt_avx2(Z_NR, n, j->kcur, j->B, j->ldb, j->pc, j->jc + j0, dst);
    else
        pack_b_avx512(n, j->kcur, j->B, j->ldb, j->pc, j->jc + j0, dst);
}
TG_AVX512 static void kernel_avx512_e(const gemm_job *j, const void *a, const void *b, tg_real *c, tg_real beta, int m,
                                      int n) {
    kernel_avx512(j->depth, a, b, c, j->ldc, j->alpha, beta, m, n);
}
TG_AVX512 static void kernel_avx512_a_e(const gemm_job *j, const tg_real *a, size_t a_rs, size_t a_ks, const void *b,
                                        tg_real *c, tg_real beta, int m, int n) {
    kernel_avx512_a(j->kcur, a, a_rs, a_ks, b, c, j->ldc, j->alpha, beta, m, n);
}
#endif

/* An engine of the float products: its driver row, and up to how many
 * multiply-adds a product takes the direct loops instead. */
typedef struct {
    gemm_engine e;
    double direct_max;
} float_engine;

/* One row of the float engines: the tile, the blocks, the packers and the
 * kernel (a_slack 8: pack_a_avx2 and pack_at_avx2 write up to 8 values past
 * a block). (clang-format off: it would give each field a line.) */
/* clang-format off */
#define FLOAT_ROW(mr_, nr_, mc_, kc_, nc_, pack_a_, pack_b_, kernel_)                                              \
    .elem = sizeof(tg_real), .mr = mr_, .nr = nr_, .mc = mc_, .kc = kc_, .nc = nc_, .kalign = 1, .a_slack = 8,    \
    .pack_a = pack_a_, .pack_b = pack_b_, .kernel = kernel_
static const float_engine fe_portable = {
    {FLOAT_ROW(PORT_MR, PORT_NR, PORT_MC, PORT_KC, PORT_NC, pack_a_generic, pack_b_generic, kernel_portable_e)},
    PORT_DIRECT_MAX_WORK};
#if TG_X86
static const float_engine fe_avx2 = {
    {FLOAT_ROW(AVX_MR, AVX_NR, AVX_MC, AVX_KC, AVX_NC, pack_a_6, pack_b_avx2, kernel_avx2_e)}, DIRECT_MAX_WORK};
#endif
/* The AVX-512 kernel exists for float only: the double build runs AVX2's.
 * It reads A in place up to A_IN_PLACE_MAX_SLIVERS slivers per panel of B
 * (N <= 512) and packs it for wider products: packing A was 9% of a
 * gpt-mini step (perf, bench); in place, gemm-512 ran 1.18x faster and
 * gemm-2048 (128 slivers) 7% slower. */
#if TG_SIMD_F32
static const float_engine fe_avx512 = {
    {FLOAT_ROW(Z_MR, Z_NR, Z_MC, Z_KC, Z_NC, pack_a_6, pack_b_z, kernel_avx512_e), .kernel_a = kernel_avx512_a_e,
     .in_place_max_slivers = A_IN_PLACE_MAX_SLIVERS},
    Z_DIRECT_MAX_WORK};
#define FE_AVX512 (&fe_avx512)
#else
#define FE_AVX512 (&fe_avx2)
#endif
/* clang-format on */

static void direct_rows(bool avx2, bool trans_a, bool trans_b, int r0, int r1, int N, int K, tg_real alpha,
                        const tg_real *A, int lda, const tg_real *B, int ldb, tg_real beta, tg_real *C, int ldc,
                        const tg_gemm_epilogue *ep) {
#if TG_X86
    if (avx2) {
        direct_avx2(trans_a, trans_b, r0, r1, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ep);
        return;
    }
#endif
    (void)avx2;
    direct_portable(trans_a, trans_b, r0, r1, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ep);
}

typedef struct {
    bool avx2, few, trans_a, trans_b; /* few: the few-row loops, else the direct ones */
    int M, N, K, mr, nr, nt, lda, ldb, ldc;
    tg_real alpha, beta;
    const tg_real *A, *B;
    const uint16_t *A16, *B16; /* bf16: the fp32 engine's operands, these set or A, B */
    bool bf16;
    tg_real *C;
    const tg_gemm_epilogue *ep; /* NULL: none */
    bool split_n;               /* threads split C's columns (B's slivers), not its rows */
} gemm_ctx;

#if TG_SIMD_F32
/* The direct loops on the bf16 GEMM's operands (the fp32 engine), rows
 * [r0, r1) and columns [j0, j1) of C (C and ep at that corner): rows of
 * op(A) rounded (or widened) into 6-row panels on the stack, BF16_PANELS
 * floats at a time, and for each chunk of rows each 16-column sliver of
 * op(B) likewise (the packers of gemm_bf16_fp32.c), then kernel_direct_avx2
 * on them. The kernel sees the values it would read from rounded copies,
 * zeros past B's last column where it would mask them: the bits of the
 * direct loops on such copies. Why: the copies were made whole, on the
 * calling thread, and the other threads waited (bf16 sampling in lm on an
 * AVX2 Zen 4: round_copy 15%, spinning workers 22% of the run). */
#define BF16_PANELS (12 * 1024) /* 48 KB: 24 rows at K = DIRECT_MAX_K */
TG_AVX2 static void direct_bf16(const gemm_ctx *c, int r0, int r1, int j0, int j1, tg_real *C,
                                const tg_gemm_epilogue *ep) {
    _Alignas(64) float sliver[DIRECT_MAX_K * AVX_NR];
    _Alignas(64) float panels[BF16_PANELS + 8]; /* + the packer's slack (a_slack) */
    const int K = c->K, rows = BF16_PANELS / K / AVX_MR * AVX_MR;
    const gemm_job j = {.eng = &fe_avx2.e, /* its nr: AVX_NR, the direct kernel's sliver */
                        .trans_a = c->trans_a,
                        .trans_b = c->trans_b,
                        .K = K,
                        .kcur = K,
                        .lda = c->lda,
                        .ldb = c->ldb,
                        .A = c->A16 ? NULL : c->A,
                        .B = c->B16 ? NULL : c->B,
                        .A16 = c->A16,
                        .B16 = c->B16};
    for (int ib = r0; ib < r1; ib += rows) {
        const int mb = r1 - ib < rows ? r1 - ib : rows;
        tg__fp32_pack_a(&j, ib, mb, panels);
        for (int jb = j0; jb < j1; jb += AVX_NR) {
            const int n = j1 - jb < AVX_NR ? j1 - jb : AVX_NR;
            tg__fp32_pack_b(&j, jb, n, sliver);
            for (int ip = 0; ip < mb; ip += AVX_MR) {
                const int m = mb - ip < AVX_MR ? mb - ip : AVX_MR;
                tg_real *ct = C + (size_t)(ib - r0 + ip) * c->ldc + (jb - j0);
                /* panel ip / 6 at ip * K: op(A)(i, k) at [k * 6 + i] */
                kernel_direct_avx2(K, panels + (size_t)ip * K, 1, AVX_MR, sliver, AVX_NR, ct, c->ldc, c->alpha, c->beta,
                                   m, n, AVX_NR);
                gemm_epilogue(ep, C, ct, c->ldc, m, n);
            }
        }
    }
}
#endif
/* Rows [r0, r1), columns [j0, j1) of a product that is not packed: the
 * direct loops or, few, the few-row ones, on A, B and C from that corner
 * (and the epilogue's Y). */
static void unpacked_share(const gemm_ctx *c, int r0, int r1, int j0, int j1) {
    tg_gemm_epilogue ep = c->ep ? gemm_epilogue_at(c->ep, r0, j0, c->ldc) : (tg_gemm_epilogue){0};
    tg_real *C = c->C + (size_t)r0 * c->ldc + j0;
    const tg_gemm_epilogue *e = c->ep ? &ep : NULL;
#if TG_SIMD_F32
    if (c->bf16 && !c->few) { /* tg__gemm_unpacked_bf16's direct loops */
        direct_bf16(c, r0, r1, j0, j1, C, e);
        return;
    }
    if (c->bf16) { /* the few-row loops: A and B from the corner, as stored */
        const size_t ao = (size_t)r0 * (c->trans_a ? 1 : (size_t)c->lda),
                     bo = c->trans_b ? (size_t)j0 * c->ldb : (size_t)j0;
        few_rows_bf16(c->trans_b, c->trans_a, r1 - r0, j1 - j0, c->K, c->alpha, c->A16 ? NULL : c->A + ao,
                      c->A16 ? c->A16 + ao : NULL, c->lda, c->B16 ? NULL : c->B + bo, c->B16 ? c->B16 + bo : NULL,
                      c->ldb, c->beta, C, c->ldc, e);
        return;
    }
#endif
    const tg_real *A = c->A + (size_t)r0 * (c->trans_a ? 1 : (size_t)c->lda);
    const tg_real *B = c->B + (c->trans_b ? (size_t)j0 * c->ldb : (size_t)j0);
#if TG_X86
    if (c->few && c->trans_b) {
        few_rows_nt(r1 - r0, j1 - j0, c->K, c->alpha, A, c->lda, B, c->ldb, c->beta, C, c->ldc, e);
        return;
    }
    if (c->few) {
        few_nn_fn nn = TG_PICK(TG_SIMD_F32, few_rows_nn, few_rows_nn, few_rows_nn_avx512);
        nn(c->trans_a, r1 - r0, j1 - j0, c->K, c->alpha, A, c->lda, B, c->ldb, c->beta, C, c->ldc, e);
        return;
    }
#endif
    direct_rows(c->avx2, c->trans_a, c->trans_b, 0, r1 - r0, j1 - j0, c->K, c->alpha, A, c->lda, B, c->ldb, c->beta, C,
                c->ldc, e);
}

/* Shares [b, e) of the product's nt: runs of C's mr-row tiles or, split_n,
 * of nr-wide column slivers. A range job, so a share no thread has started
 * is run by the caller (no barrier needs a whole team here). */
static void unpacked_range(void *ctx, int64_t b, int64_t e, int tid) {
    (void)tid;
    const gemm_ctx *c = ctx;
    int r0 = 0, r1 = c->M, j0 = 0, j1 = c->N;
    if (c->split_n)
        block_rows(c->N, c->nr, b, e, c->nt, &j0, &j1);
    else
        block_rows(c->M, c->mr, b, e, c->nt, &r0, &r1);
    unpacked_share(c, r0, r1, j0, j1);
}

/* c's shares, split among the threads (gemm_split_choose). */
static void run_unpacked(gemm_ctx *c) {
    gemm_split split = gemm_split_choose(c->M, c->N, c->K, c->mr, c->nr);
    c->nt = split.nt;
    c->split_n = split.split_n;
    /* A job costs far more than a whole 16x16x16 product: skip it. */
    if (split.nt == 1)
        unpacked_share(c, 0, c->M, 0, c->N);
    else
        tg_parallel_for(split.nt, true, unpacked_range, c);
}

/* Products without packing: small ones (the direct loops) and, few, those
 * of a few rows (few_rows_nn, few_rows_nt; all rows are one tile, so
 * threads split the columns). */
static void gemm_unpacked(bool few, bool avx2, bool trans_a, bool trans_b, int M, int N, int K, tg_real alpha,
                          const tg_real *A, int lda, const tg_real *B, int ldb, tg_real beta, tg_real *C, int ldc,
                          const tg_gemm_epilogue *ep) {
    int mr = few ? M : avx2 ? AVX_MR : 1, nr = few ? FEW_COLS : avx2 ? AVX_NR : 1;
    gemm_ctx c = {GEMM_OPERANDS, .avx2 = avx2, .few = few, .mr = mr, .nr = nr};
    run_unpacked(&c);
}

/* Whether a product takes the few-row loops (few_rows_nn, few_rows_nt),
 * on B as it lies, rather than the direct or the packed path. */
static bool few_rows(bool trans_a, bool trans_b, int M, int N, int K) {
    double nk = (double)N * K;
    if (trans_a && trans_b) return false; /* few_rows_nt reads rows of A */
    return (M <= FEW_ROWS_MAX && nk >= FEW_MIN_NK) || (trans_b && M <= FEW_ROWS_MAX_NT && nk >= FEW_MIN_NK_NT);
}

/* The float engine of this ISA level: the kernels follow tg_isa_level()
 * (simd.h, TG_PICK), which tests cap to run the paths the CPU would not
 * pick. */
static const float_engine *float_engine_now(void) { return TG_PICK(TG_X86, &fe_portable, &fe_avx2, FE_AVX512); }

/* Whether a product skips the driver for the direct loops or, *few, the
 * few-row ones: by the shape alone. Without AVX2 only tiny products with B
 * untransposed take the direct loops: at -O2 GCC leaves them scalar (a
 * loop needing a remainder is not vectorised, a float dot product never
 * is), while the packed path's fixed-size kernel is vectorised. */
static bool unpacked_path(const float_engine *fe, bool trans_a, bool trans_b, int M, int N, int K, bool *few) {
    bool avx2 = fe != &fe_portable; /* the direct loops: AVX2 or portable */
    *few = avx2 && few_rows(trans_a, trans_b, M, N, K);
    return *few || ((double)M * N * K <= fe->direct_max && K <= DIRECT_MAX_K && (avx2 || !trans_b));
}

const gemm_engine *tg__gemm_float_row(bool trans_a, bool trans_b, int M, int N, int K) {
    const float_engine *fe = float_engine_now();
    bool few;
    return unpacked_path(fe, trans_a, trans_b, M, N, K, &few) ? NULL : &fe->e;
}

bool tg__gemm_unpacked_bf16(const gemm_job *job) {
#if TG_SIMD_F32
    const float_engine *fe = float_engine_now();
    bool few;
    if (fe == &fe_portable || !unpacked_path(fe, job->trans_a, job->trans_b, job->M, job->N, job->K, &few))
        return false;
    gemm_ctx c = {.trans_a = job->trans_a,
                  .trans_b = job->trans_b,
                  .M = job->M,
                  .N = job->N,
                  .K = job->K,
                  .lda = job->lda,
                  .ldb = job->ldb,
                  .ldc = job->ldc,
                  .alpha = job->alpha,
                  .beta = job->beta,
                  .A = job->A,
                  .B = job->B,
                  .A16 = job->A16,
                  .B16 = job->B16,
                  .C = job->C,
                  .ep = job->ep,
                  .bf16 = true,
                  .avx2 = true,
                  .few = few,
                  .mr = few ? job->M : AVX_MR,
                  .nr = few ? FEW_COLS : AVX_NR};
    run_unpacked(&c);
    return true;
#else
    (void)job;
    return false;
#endif
}

void tg_k_gemm_ep(bool trans_a, bool trans_b, int M, int N, int K, tg_real alpha, const tg_real *A, int lda,
                  const tg_real *B, int ldb, tg_real beta, tg_real *C, int ldc, const tg_gemm_epilogue *ep) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0 || alpha == 0) { /* nothing to multiply: C = beta * C */
        scale_c(M, N, beta, C, ldc);
        gemm_epilogue(ep, C, C, ldc, M, N);
        return;
    }
    const float_engine *fe = float_engine_now();
    bool avx2 = fe != &fe_portable, few;
    tg_gemm_epilogue rest; /* the portable direct loop sums into C: it starts at the epilogue's res + bias */
    if (unpacked_path(fe, trans_a, trans_b, M, N, K, &few)) {
        if (!avx2) ep = gemm_epilogue_start(ep, &rest, C, ldc, M, N, &beta);
        gemm_unpacked(few, avx2, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ep);
        return;
    }
    /* the packed path: the one driver, with this ISA's engine */
    if (!gemm_drive(&fe->e, &(gemm_job){GEMM_OPERANDS})) { /* out of memory: slow but correct, and no crash */
        ep = gemm_epilogue_start(ep, &rest, C, ldc, M, N, &beta);
        direct_portable(trans_a, trans_b, 0, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ep);
    }
}

void tg_k_gemm(bool trans_a, bool trans_b, int M, int N, int K, tg_real alpha, const tg_real *A, int lda,
               const tg_real *B, int ldb, tg_real beta, tg_real *C, int ldc) {
    tg_k_gemm_ep(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, NULL);
}
