/* Internal: the pieces the float GEMM (gemm.c) and the bf16 GEMM
 * (gemm_bf16.c) share: how a product is split among threads, their
 * thread-local packing buffers, the epilogue on a finished tile, and the
 * AVX-512 kernels' store of a 6 x 32 tile. One copy here so that both
 * products split and store alike. */
#ifndef TG_GEMM_COMMON_H
#define TG_GEMM_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "tensor/kernels.h"
#include "tensor/parallel.h"
#include "tensor/tensor.h"
#include "tensor/tensor_internal.h"

/* Below this many multiply-adds a product runs on one thread: starting the
 * team costs more than it saves. */
#define PARALLEL_MIN_WORK (64.0 * 64.0 * 64.0)

static inline size_t round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }

/* How a product is shared among threads: nt of them (1: the caller alone),
 * each with a run of C's mr-row tiles or, split_n, of B's nr-wide slivers
 * (columns of C). */
typedef struct {
    int nt;
    bool split_n;
} gemm_split;

/* What a share pays for its rows of A (packing them, or reading them in
 * place), in columns of C: a column split has every thread pay for all of
 * A, a row split only for its own rows (both share the packing of B). */
#define SPLIT_A_COLS 16

/* The split of an M x N x K product of mr x nr tiles: one thread below
 * PARALLEL_MIN_WORK or inside a parallel region (a batched caller already
 * splits the work); else C's rows or its columns, whichever gives the
 * smaller largest share, rows on a tie. A share costs its rows times its
 * columns plus SPLIT_A_COLS, rows rounded up to whole mr-row tiles and
 * columns to nr-wide slivers (a part-filled tile costs a full one).
 * Why the SPLIT_A_COLS term: by tiles alone large square products would
 * split by columns (a few % fewer tiles), yet every thread packing all of
 * A costs the column split more than that (more still in the bf16 GEMM,
 * which rounds A as it packs it). The measured shares, and the one case
 * the rule misses, are in BENCHMARKS.md ("GEMM split"). Each element of C
 * is computed by one thread in the same k order either way, so the choice
 * never changes a bit of the result. */
static inline gemm_split gemm_split_choose(int M, int N, int K, int mr, int nr) {
    gemm_split s = {1, false};
    if ((double)M * N * K <= PARALLEL_MIN_WORK || tg_in_parallel()) return s;
    int nt = tg_get_num_threads();
    long long tiles = (M + mr - 1) / mr, slivers = (N + nr - 1) / nr;
    long long tr = nt < tiles ? nt : tiles, tc = nt < slivers ? nt : slivers; /* threads with a share */
    long long share_rows = (tiles + tr - 1) / tr * mr * (slivers * nr + SPLIT_A_COLS);
    long long share_cols = tiles * mr * ((slivers + tc - 1) / tc * nr + SPLIT_A_COLS);
    s.split_n = share_cols < share_rows;
    s.nt = (int)(s.split_n ? tc : tr);
    if (s.nt < 1) s.nt = 1;
    return s;
}

/* Rows [*r0, *r1) of thread tid among nth: a contiguous run of mr-row tiles,
 * as even as the tile count allows. */
static inline void thread_rows(int M, int mr, int tid, int nth, int *r0, int *r1) {
    int tiles = (M + mr - 1) / mr;
    *r0 = (int)((long long)tiles * tid / nth) * mr;
    *r1 = (int)((long long)tiles * (tid + 1) / nth) * mr;
    if (*r1 > M) *r1 = M;
}

/* Rows [*r0, *r1) of the row blocks [b, e) of nth threads' shares (a range
 * of tg_parallel_for over the shares). */
static inline void block_rows(int M, int mr, int64_t b, int64_t e, int nth, int *r0, int *r1) {
    int unused;
    thread_rows(M, mr, (int)b, nth, r0, &unused);
    thread_rows(M, mr, (int)e - 1, nth, &unused, r1);
}

/* The calling thread's packing buffer (gemm_driver.c), at least `bytes`, 64-byte
 * aligned: thread-local, grown on demand, never shrunk, freed by
 * tg_release_all; NULL when out of memory. One buffer serves both products
 * (neither runs inside the other). */
void *tg__gemm_workspace(size_t bytes);

/* The epilogue (tg_k_gemm_ep, kernels.h) on the m x n block of C at c, C0
 * the corner of C (and of ep's outputs): run once per block, when its last
 * K block is in (kb == kblocks - 1), by the thread that computed it, while
 * the block is in cache. ep NULL: nothing. */
static inline void gemm_epilogue(const tg_gemm_epilogue *ep, const tg_real *C0, tg_real *c, int ldc, int m, int n) {
    if (!ep) return;
    ptrdiff_t off = c - C0;
    tg_k_epilogue_tile(ep, off / ldc, (int)(off % ldc), c, ldc, ldc, m, n);
}

/* ep seen from element (i0, j0) of C: every output moved there. */
static inline tg_gemm_epilogue gemm_epilogue_at(const tg_gemm_epilogue *ep, int i0, int j0, int ldc) {
    size_t off = (size_t)i0 * (size_t)ldc + (size_t)j0;
    tg_gemm_epilogue e = *ep;
    if (e.Y) e.Y += off;
    if (e.Y16) e.Y16 += off;
    if (e.H16) e.H16 += off;
    if (e.res) e.res += off;
    if (e.bias) e.bias += j0;
    return e;
}

/* For a path that sums an element in more than one pass into C (K blocks,
 * the portable direct loop): the add of res + bias cannot come last with
 * the bits of a C started at it, so C is started at it here (C = beta C +
 * (res + bias), or res + bias when beta is 0), *beta becomes 1, and the
 * rest of ep (in *rest) is returned. ep without an add: ep, nothing done. */
static inline const tg_gemm_epilogue *gemm_epilogue_start(const tg_gemm_epilogue *ep, tg_gemm_epilogue *rest,
                                                          tg_real *C, int ldc, int M, int N, tg_real *beta) {
    if (!ep || (!ep->bias && !ep->res)) return ep;
    tg_k_epilogue_start(ep, C, ldc, M, N, *beta);
    *beta = 1;
    *rest = *ep;
    rest->bias = NULL;
    rest->res = NULL;
    return rest;
}

/* ---- the 6-row tiles of the AVX2 and AVX-512 kernels -----------------------
 * GEMM_ROWS6(op): op(0); ... op(5); one statement per row of the tile. */
#define GEMM_ROWS6(op) \
    do {               \
        op(0);         \
        op(1);         \
        op(2);         \
        op(3);         \
        op(4);         \
        op(5);         \
    } while (0)

/* Fetches the m rows of an nr-wide tile of C now, so that their cache misses
 * overlap the k loop. */
#define GEMM_PREFETCH_TILE(c, ldc, m, nr)                         \
    for (int r_ = 0; r_ < (m); r_++) {                            \
        __builtin_prefetch((c) + (size_t)r_ * (ldc), 1);          \
        __builtin_prefetch((c) + (size_t)r_ * (ldc) + (nr)-1, 1); \
    }

/* The AVX-512 tile's twelve accumulators z00 .. z51 (row r in z<r>0,
 * z<r>1), declared and zero. */
#define GEMM_Z_ACCUMULATORS                                                                                            \
    __m512 z00 = _mm512_setzero_ps(), z01 = _mm512_setzero_ps(), z10 = _mm512_setzero_ps(), z11 = _mm512_setzero_ps(); \
    __m512 z20 = _mm512_setzero_ps(), z21 = _mm512_setzero_ps(), z30 = _mm512_setzero_ps(), z31 = _mm512_setzero_ps(); \
    __m512 z40 = _mm512_setzero_ps(), z41 = _mm512_setzero_ps(), z50 = _mm512_setzero_ps(), z51 = _mm512_setzero_ps()

/* AVX-512, row r of a 6 x 32 float tile held in z<r>0, z<r>1.
 * GEMM_ROWS6(GEMM_Z_STORE): C = alpha * tile + beta * C, with va, vb alpha
 * and beta broadcast, c and ldc the tile's corner in C (beta == 0 never
 * reads C). GEMM_ROWS6(GEMM_Z_SPILL): the tile to float t[6 * 32], for
 * store_tile. */
#define GEMM_Z_STORE(r)                                                            \
    do {                                                                           \
        float *cr_ = c + (size_t)(r)*ldc;                                          \
        __m512 t0_ = _mm512_mul_ps(va, z##r##0), t1_ = _mm512_mul_ps(va, z##r##1); \
        if (beta != 0) {                                                           \
            t0_ = _mm512_fmadd_ps(vb, _mm512_loadu_ps(cr_), t0_);                  \
            t1_ = _mm512_fmadd_ps(vb, _mm512_loadu_ps(cr_ + 16), t1_);             \
        }                                                                          \
        _mm512_storeu_ps(cr_, t0_);                                                \
        _mm512_storeu_ps(cr_ + 16, t1_);                                           \
    } while (0)
#define GEMM_Z_SPILL(r)                             \
    do {                                            \
        _mm512_storeu_ps(t + (r)*32, z##r##0);      \
        _mm512_storeu_ps(t + (r)*32 + 16, z##r##1); \
    } while (0)

#endif
