/* The one blocked GEMM driver (gemm_driver.h): GotoBLAS / BLIS loops around
 * an engine's micro-kernel (Goto & van de Geijn, "Anatomy of
 * high-performance matrix multiplication", TOMS 2008; Van Zee & van de
 * Geijn, "BLIS", TOMS 2015):
 *
 *   for jc in N by NC            B panel KC x NC  -> packed once, lives in L3
 *     for pc in K by KC
 *       pack B(pc, jc) into NR-wide slivers          (shared by all threads)
 *       for ic in M by MC        A block MC x KC  -> packed per thread, in L2
 *         pack A(ic, pc) into MR-tall micro-panels
 *         for jr in NC by NR     one B sliver KC x NR
 *           for ir in MC by MR
 *             micro-kernel: MR x NR tile of C += A micro-panel * B sliver
 *
 * Packing is where an engine's element type (float, bf16 pairs, AMX
 * chunks) and the transposes are handled; the loops do not know them.
 *
 * Epilogue (tg_k_gemm_ep): each block of C a thread finishes (the rows of
 * one block of A across one panel of B, after the last KC block) goes
 * through act (gemm_epilogue) on that thread, before its next block: the
 * values come from L2, so an activation after a Linear costs no pass of
 * its own over [M, N] in memory.
 *
 * Determinism: K is cut into near-equal blocks whose boundaries depend on
 * K alone; each element of C is summed in k order within a block by the
 * micro-kernel and the blocks added in order; threads split C's rows or
 * its columns (gemm_split_choose), never K. Same bits at any thread count.
 *
 * Memory: the packing buffer belongs to the calling thread (thread-local,
 * tg__gemm_workspace), grown only when a larger product comes; worker
 * threads use slices of the caller's, they never allocate. */
#include <stdint.h>

#include "tensor/gemm_driver.h"

/* ---- packing buffers: thread-local, grown on demand, never shrunk ---------- */
static _Thread_local void *ws_raw;
static _Thread_local void *ws_buf;
static _Thread_local size_t ws_cap; /* bytes */

static void gemm_release(void);

void *tg__gemm_workspace(size_t bytes) {
    if (bytes > ws_cap) {
        tg__on_release_all(gemm_release);
        if (ws_raw) tg_sys_free(ws_raw);
        ws_cap = 0;
        ws_buf = NULL;
        ws_raw = tg_sys_alloc(bytes + 64);
        if (!ws_raw) return NULL;
        ws_buf = (void *)(((uintptr_t)ws_raw + 63) & ~(uintptr_t)63);
        ws_cap = bytes;
    }
    return ws_buf;
}

/* Frees the calling thread's packing buffers. */
static void release_on_thread(void *ctx, int tid, int nth) {
    (void)ctx, (void)tid, (void)nth;
    if (ws_raw) tg_sys_free(ws_raw);
    ws_raw = NULL;
    ws_buf = NULL;
    ws_cap = 0;
}

/* Run by tg_release_all: every thread of the pool frees its own buffers (a
 * worker has some when it ran a product of a batch, tg_k_gemm called from a
 * parallel loop). */
static void gemm_release(void) { tg_parallel_team(true, release_on_thread, NULL); }

static inline int packed_depth(const gemm_engine *e, int kcur) { return e->depth ? e->depth(e, kcur) : kcur; }

/* Two range jobs per panel of B (columns jc.., depth pc..): the threads pack
 * the panel together, then each multiplies its rows by it. Range jobs, not
 * a team meeting at barriers: a share that no thread has started is run by
 * the caller, so a thread the OS has not scheduled (two programs on two
 * cores) does not hold up the product; the end of the packing job is the
 * barrier. */
static void pack_b_range(void *ctx, int64_t b, int64_t e, int tid) {
    (void)tid;
    const gemm_job *j = ctx;
    const int nr = j->eng->nr;
    const size_t sliver = (size_t)j->depth * nr * j->eng->elem;
    if (j->eng->pack_b_run) {
        j->eng->pack_b_run(j, (int)b, (int)e, j->ws + (size_t)b * sliver);
        return;
    }
    for (int64_t s = b; s < e; s++) {
        int j0 = (int)s * nr, n = j->ncur - j0 < nr ? j->ncur - j0 : nr;
        j->eng->pack_b(j, j0, n, j->ws + (size_t)s * sliver);
    }
}

/* Row blocks [b, e) of the product's nt (thread_rows) times the packed panel;
 * share tid packs its rows of A into its own buffer. With split_n, shares
 * [b, e) are runs of the panel's slivers instead, times every row (each
 * share packs all of A). */
static void multiply_range(void *ctx, int64_t b, int64_t e, int tid) {
    const gemm_job *j = ctx;
    const gemm_engine *eng = j->eng;
    const int mr = eng->mr, nr = eng->nr, mc = j->mc;
    const size_t panel = (size_t)j->depth * mr * eng->elem, sliver = (size_t)j->depth * nr * eng->elem;
    unsigned char *apack = j->ws + j->b_bytes + (size_t)(j->nt == 1 ? 0 : tid) * j->a_bytes;
    int row0 = 0, row1 = j->M, slivers = (j->ncur + nr - 1) / nr, s0 = 0, s1 = slivers;
    if (j->split_n)
        block_rows(slivers, 1, b, e, j->nt, &s0, &s1);
    else
        block_rows(j->M, mr, b, e, j->nt, &row0, &row1);
    tg_real beta_k = j->kb == 0 ? j->beta : 1;
    const tg_gemm_epilogue *ep = j->kb == j->kblocks - 1 ? j->ep : NULL; /* only the last K block finishes C */
    /* A read in place (op(A)(i, k) at A[i*lda + k], or A[k*lda + i]
     * transposed) when its block serves few slivers of B, by an engine that
     * can: packing it costs a pass over A that only many slivers repay. */
    const bool in_place = eng->kernel_a && slivers <= eng->in_place_max_slivers;
    const size_t lda = (size_t)j->lda, a_rs = j->trans_a ? 1 : lda, a_ks = j->trans_a ? lda : 1;
    if (eng->begin) eng->begin();
    for (int ic = row0; ic < row1; ic += mc) {
        int mcur = row1 - ic < mc ? row1 - ic : mc;
        if (!in_place) eng->pack_a(j, ic, mcur, apack);
        for (int s = s0; s < s1; s++) {
            int j0 = s * nr;
            int n = j->ncur - j0 < nr ? j->ncur - j0 : nr;
            const unsigned char *bs = j->ws + (size_t)s * sliver;
            for (int ir = 0; ir < mcur; ir += mr) {
                int m = mcur - ir < mr ? mcur - ir : mr;
                tg_real *cs = j->C + (size_t)(ic + ir) * j->ldc + j->jc + j0;
                if (in_place)
                    eng->kernel_a(j, j->A + (size_t)(ic + ir) * a_rs + (size_t)j->pc * a_ks, a_rs, a_ks, bs, cs, beta_k,
                                  m, n);
                else
                    eng->kernel(j, apack + (size_t)ir / mr * panel, bs, cs, beta_k, m, n);
            }
        }
        /* rows ic.. of the panel are finished (on the last K block): the epilogue, from L2 */
        int j1 = s1 * nr < j->ncur ? s1 * nr : j->ncur; /* this share's columns of the panel */
        if (j1 > s0 * nr)
            gemm_epilogue(ep, j->C, j->C + (size_t)ic * j->ldc + j->jc + s0 * nr, j->ldc, mcur, j1 - s0 * nr);
    }
    if (eng->end) eng->end();
}

bool gemm_drive(const gemm_engine *e, const gemm_job *op) {
    gemm_job j = *op;
    const int M = j.M, N = j.N, K = j.K, mr = e->mr, nr = e->nr;
    j.eng = e;
    /* K in near-equal blocks of at most KC (257 -> 129 + 128, not 256 + 1),
     * boundaries on multiples of kalign, the last block ending at K: the
     * split depends on K only, which keeps results thread-independent. A
     * block is at most kalign - 1 deeper than ceil(K / kblocks). */
    j.kblocks = (K + e->kc - 1) / e->kc;
    int depth_max = packed_depth(e, (K + j.kblocks - 1) / j.kblocks + e->kalign - 1);
    j.nc = (int)round_up((size_t)(N < e->nc ? N : e->nc), (size_t)nr);
    j.mc = (int)round_up((size_t)(M < e->mc ? M : e->mc), (size_t)mr);
    /* Threads split C's rows or B's slivers, whichever keeps the shares
     * full (gemm_split_choose). Either way each element of C is one
     * thread's, summed in the same order: the same bits at any thread count. */
    gemm_split split = gemm_split_choose(M, N, K, mr, nr);
    j.nt = split.nt;
    j.split_n = split.split_n;
    j.b_bytes = round_up((size_t)depth_max * j.nc * e->elem, 64);
    j.a_bytes = round_up(((size_t)depth_max * j.mc + (size_t)e->a_slack) * e->elem, 64);
    j.ws = tg__gemm_workspace(j.b_bytes + (size_t)j.nt * j.a_bytes);
    if (!j.ws) return false;
    const int ka = e->kalign;
    for (j.jc = 0; j.jc < N; j.jc += j.nc) {
        j.ncur = N - j.jc < j.nc ? N - j.jc : j.nc;
        for (j.kb = 0; j.kb < j.kblocks; j.kb++) {
            j.pc = (int)((long long)K * j.kb / j.kblocks) / ka * ka;
            int end = j.kb + 1 == j.kblocks ? K : (int)((long long)K * (j.kb + 1) / j.kblocks) / ka * ka;
            j.kcur = end - j.pc;
            j.depth = packed_depth(e, j.kcur);
            tg_parallel_for((j.ncur + nr - 1) / nr, j.nt > 1, pack_b_range, &j);
            tg_parallel_for(j.nt, j.nt > 1, multiply_range, &j);
        }
    }
    return true;
}
