/* The bf16 GEMM's small products (gemm_bf16_small.h): attention's tile
 * products (64 x 64 x 32, 64 x 32 x 64: tg_attention under bf16 on AMX)
 * and the like, thousands of them a training step, each a few
 * microseconds of tiles. Through gemm_drive each also paid for what only
 * large products need: the group and chunk bookkeeping, the atomics of B's
 * chunks packed on demand, a pool job (run inline, but set up), the K
 * block arithmetic, and a call chain per tile; perf found them a large
 * part of each product (bench/measured.md, "Session 7").
 *
 * Here such a product runs the driver's loops for its one case: one K
 * block (K <= KC: the sums in k order from C's start, beta C, as the
 * driver's first block), one panel of B (N <= NC), one share (the grid
 * gemm_grid_choose gives it is 1 x 1: a product below the driver's
 * parallel threshold, or one inside a parallel region). B is packed whole
 * first (pack_b_run over all its slivers, the bits of pack_b's); then for
 * each block of mc rows, A is packed (or read in place, a_direct, as the
 * driver reads it), each sliver's tiles run, and the epilogue is done on
 * the block. A block's packing and each sliver's tiles are the driver's
 * own loop body (gemm_block_a, gemm_sliver_tiles: gemm_driver.h), so the
 * same packers and kernel calls with the same arguments run in the same
 * order as in gemm_drive, hence the same bits (tested against the driver,
 * forced: test_gemm_bf16_small.c).
 *
 * Memory: the driver's thread-local packing buffer (tg__gemm_workspace),
 * which the two never use at once (neither runs inside the other). */
#include "tensor/gemm_bf16_small.h"

#include "tensor/tensor_internal.h" /* tg__bf16_small_force */

/* The largest packed B of a small product: within the core's L2 beside
 * the panel of A, as the driver would keep it. Packing it whole before the
 * first tile (not chunk by chunk as the tiles reach it) is what costs a
 * large B its L1 reuse, so large ones stay with the driver. */
#define SMALL_B_BYTES ((size_t)128 << 10)

static bool g_small_on = true;          /* test switch: false sends every product to gemm_drive */
static _Thread_local long g_small_runs; /* products run here by the calling thread, for the tests */

bool tg__bf16_small_force(bool on) {
    bool old = g_small_on;
    g_small_on = on;
    return old;
}

long tg__bf16_small_runs(void) { return g_small_runs; }

bool gemm_bf16_small(const gemm_engine *e, const gemm_job *op, bool keep) {
    const int M = op->M, N = op->N, K = op->K, mr = e->mr, nr = e->nr;
    if (!g_small_on || K > e->kc || N > e->nc || e->kernel_a) return false;
    gemm_job j = *op;
    j.eng = e;
    j.jc = 0, j.ncur = N, j.kb = j.kb0 = 0, j.kb_end = j.kblocks = j.kgroup = 1, j.pc = 0, j.kcur = K;
    j.depth = e->depth ? e->depth(e, K) : K;
    const int slivers = (N + nr - 1) / nr;
    const size_t sliver = (size_t)j.depth * nr * e->elem;
    j.b_bytes = round_up((size_t)slivers * sliver, 64);
    if (j.b_bytes > SMALL_B_BYTES) return false;
    gemm_grid grid = gemm_grid_choose(M, N, K, mr, nr);
    if (grid.rows * grid.cols != 1) return false;
    j.nt = j.grid_n = j.threads = 1;
    j.mc = (int)round_up((size_t)(M < e->mc ? M : e->mc), (size_t)mr);
    j.nc = (int)round_up((size_t)N, (size_t)nr);
    j.a_bytes = round_up(((size_t)j.depth * j.mc + (size_t)e->a_slack) * e->elem, 64);
    j.ws = tg__gemm_workspace(j.b_bytes + j.a_bytes);
    if (!j.ws) return false;
    unsigned char *apack = j.ws + j.b_bytes;
    j.a_direct = e->a_direct && e->a_direct(&j);
    if (e->pack_b_run)
        e->pack_b_run(&j, 0, slivers, j.ws);
    else
        for (int s = 0; s < slivers; s++) e->pack_b(&j, s * nr, N - s * nr < nr ? N - s * nr : nr, j.ws + s * sliver);
    if (e->begin) e->begin();
    for (int ic = 0; ic < M; ic += j.mc) {
        const int mcur = M - ic < j.mc ? M - ic : j.mc;
        gemm_block_a(&j, false, ic, mcur, apack);
        for (int s = 0; s < slivers; s++) {
            const int j0 = s * nr, n = N - j0 < nr ? N - j0 : nr;
            gemm_sliver_tiles(&j, false, ic, mcur, apack, j.ws + (size_t)s * sliver, j.C + (size_t)ic * j.ldc + j0,
                              j.beta, n);
        }
        gemm_epilogue(j.ep, j.C, j.C + (size_t)ic * j.ldc, j.ldc, mcur, N);
    }
    if (e->end && !keep) e->end();
    g_small_runs++;
    return true;
}
