/* The one blocked GEMM driver (gemm_driver.h): GotoBLAS / BLIS loops around
 * an engine's micro-kernel (Goto & van de Geijn, "Anatomy of
 * high-performance matrix multiplication", TOMS 2008; Van Zee & van de
 * Geijn, "BLIS", TOMS 2015):
 *
 *   for jc in N by NC              B panel K x NC
 *     for each group of K blocks   (all of K when the group's packed B fits
 *                                   GEMM_B_GROUP_BYTES: most products)
 *       for each share of C        (one pool job: a grid of row runs x sliver runs,
 *                                   handed out to the threads one at a time)
 *         for pc in the group's K blocks, in order    B block KC x NC, in L2 / L3
 *           for ic in its rows by MC      A block MC x KC -> packed per thread, in L2
 *             pack A(ic, pc) into MR-tall micro-panels
 *             for jr in its slivers       one B sliver KC x NR
 *               pack it, unless a thread has (B_CHUNK slivers at a time)
 *               for ir in MC by MR
 *                 micro-kernel: MR x NR tile of C += A micro-panel * B sliver
 *
 * Goto's loops, with two changes. A share runs all of a group's K blocks
 * in one job. And B is packed on demand inside that job, a chunk of
 * slivers by the first thread that needs it (claimed with an atomic; a
 * thread that finds a chunk being packed goes on to the chunks after it and
 * comes back to that one last, waiting only then), rather than by a
 * packing job of its own that every thread had to finish before any could
 * multiply: a product is one pool job, with no barrier, where it was two.
 * The threads that share columns start their first pass at different
 * chunks, so they pack different ones; which thread packs a chunk changes
 * nothing in it.
 *
 * Packing is where an engine's element type (float, bf16 pairs, AMX
 * chunks), the operands' stored type (tg_real, or bf16 for the bf16 GEMM)
 * and the transposes are handled; the loops do not know them. An engine
 * may also read A in place: the float engines' kernel_a when a block of A
 * serves few slivers, the AMX engine's tiles from an untransposed bf16 A
 * (a_direct: tileloadd with A's row stride, as oneDNN's brgemm does), which
 * then needs no packing of A but for a last panel of fewer rows.
 *
 * Epilogue (tg_k_gemm_ep): each block of C a thread finishes (the rows of
 * one block of A across one panel of B, after the last KC block) goes
 * through the epilogue (gemm_epilogue: bias, residual, activation, bf16
 * results) on that thread, before its next block: the values come from
 * L2, so a Linear's bias, activation and bf16 rounding cost no pass of
 * their own over [M, N] in memory. Where C itself is not wanted
 * (ep->c_scratch: a bf16 Linear's float sums) and is summed in one pass,
 * the block goes to a buffer of the thread's own (mc rows by its columns
 * of the panel, in L2) instead of C: no write of C to memory, nor its
 * read for ownership. The values are the same, so are the bits.
 *
 * Determinism: K is cut into near-equal blocks whose boundaries depend on
 * K alone; each element of C is summed in k order within a block by the
 * micro-kernel and the blocks added in order; the shares split C's rows,
 * its columns or both (gemm_grid_choose; a row split in GEMM_RUNS_PER_THREAD
 * runs a thread), never K, and whichever thread takes a share sums it the
 * same way. Same bits at any thread count.
 *
 * Memory: the packing buffer belongs to the calling thread (thread-local,
 * tg__gemm_workspace), grown only when a larger product comes; worker
 * threads use slices of the caller's, they never allocate. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "tensor/gemm_driver.h"
#include "tensor/simd.h" /* TG_X86 */

/* ---- packing buffers: thread-local, grown on demand, never shrunk ----------
 * A thread's buffer is also registered under a pthread key whose destructor
 * frees it when the thread ends: a pool worker that ran a product (a bf16
 * block product inside the attention's tasks) and is then retired by
 * tg_set_num_threads would otherwise take its buffer's only pointer with it. */
static _Thread_local void *ws_raw;
static _Thread_local void *ws_buf;
static _Thread_local size_t ws_cap; /* bytes */
static pthread_key_t ws_key;
static pthread_once_t ws_key_once = PTHREAD_ONCE_INIT;

static void ws_free_at_exit(void *raw) { tg_sys_free(raw); }
static void ws_key_make(void) { (void)pthread_key_create(&ws_key, ws_free_at_exit); }

static void gemm_release(void);

/* Frees the calling thread's packing buffer. */
static void ws_drop(void) {
    if (ws_raw) {
        (void)pthread_setspecific(ws_key, NULL);
        tg_sys_free(ws_raw);
    }
    ws_raw = NULL;
    ws_buf = NULL;
    ws_cap = 0;
}

void *tg__gemm_workspace(size_t bytes) {
    if (bytes > ws_cap) {
        tg__on_release_all(gemm_release);
        pthread_once(&ws_key_once, ws_key_make);
        ws_drop();
        ws_raw = tg_sys_alloc(bytes + 64);
        if (!ws_raw) return NULL;
        (void)pthread_setspecific(ws_key, ws_raw);
        ws_buf = (void *)(((uintptr_t)ws_raw + 63) & ~(uintptr_t)63);
        ws_cap = bytes;
    }
    return ws_buf;
}

static void release_on_thread(void *ctx, int tid, int nth) {
    (void)ctx, (void)tid, (void)nth;
    ws_drop();
}

/* Run by tg_release_all: every thread of the pool frees its own buffers (a
 * worker has some when it ran a product of a batch, tg_k_gemm called from a
 * parallel loop). */
static void gemm_release(void) { tg_parallel_team(true, release_on_thread, NULL); }

static inline int packed_depth(const gemm_engine *e, int kcur) { return e->depth ? e->depth(e, kcur) : kcur; }

/* The K blocks of a product, near-equal and at most KC deep (257 -> 129 +
 * 128, not 256 + 1), their boundaries on multiples of kalign, the last
 * ending at K: a function of K alone, which keeps results
 * thread-independent. Sets the job's kb, pc, kcur and depth for block kb. */
static void k_block(gemm_job *j, int kb) {
    const int ka = j->eng->kalign;
    j->kb = kb;
    j->pc = (int)((long long)j->K * kb / j->kblocks) / ka * ka;
    int end = kb + 1 == j->kblocks ? j->K : (int)((long long)j->K * (kb + 1) / j->kblocks) / ka * ka;
    j->kcur = end - j->pc;
    j->depth = packed_depth(j->eng, j->kcur);
}

/* Slivers of B packed together, by one thread: enough to keep an engine's
 * pack_b_run on long rows (AMX packs a pair of rows across them), few
 * enough that the threads sharing a panel split its packing finely. */
#define B_CHUNK_COLS         128
/* Runs of C's rows per thread in a row split (gemm_drive), whole tiles. */
#define GEMM_RUNS_PER_THREAD 4
/* A group of packed B larger than this does not stay in a core's L2 (1 MB
 * on Zen 4 and 5, 2 MB on Sapphire and Emerald Rapids) from one run of C's
 * rows to the next: each run reads all of it again from L3, which only
 * GEMM_RUN_MIN_ROWS rows of work a run repay (a weight gradient: dW [256,
 * 1024] = dy^T x over 2048 tokens, 4 MB of packed x, took 3.5-4.5 ms at 2
 * threads in 32-row runs against 2.9-3.2 in 128-row ones, 5 alternated
 * pairs on the 2-core Emerald Rapids VM). */
#define GEMM_B_L2_BYTES      ((size_t)1 << 20)
#define GEMM_RUN_MIN_ROWS    128
static inline int b_chunk(const gemm_engine *e) { return e->nr >= B_CHUNK_COLS ? 1 : B_CHUNK_COLS / e->nr; }
/* The chunks of a K block of a panel cols wide. */
static inline int b_chunks(const gemm_engine *e, int cols) {
    return ((cols + e->nr - 1) / e->nr + b_chunk(e) - 1) / b_chunk(e);
}

/* The chunk states of a group's packed B, one atomic_int per (K block,
 * chunk of slivers): CHUNK_TODO, CHUNK_PACKING (a thread claimed it),
 * CHUNK_READY (packed; the release store publishes the bytes). */
enum { CHUNK_TODO, CHUNK_PACKING, CHUNK_READY };

static inline void pause_cpu(void) {
#if TG_X86
    __builtin_ia32_pause();
#endif
}

/* The state of the chunk of K block j->kb (the one j is set to) that holds sliver s. */
static inline atomic_int *chunk_state_of(const gemm_job *j, int s) {
    return (atomic_int *)j->chunk_state + (size_t)(j->kb - j->kb0) * b_chunks(j->eng, j->ncur) + s / b_chunk(j->eng);
}

/* Whether sliver s's chunk is being packed by another thread just now. */
static inline bool chunk_busy(const gemm_job *j, int s) {
    return atomic_load_explicit(chunk_state_of(j, s), memory_order_relaxed) == CHUNK_PACKING;
}

/* Sliver s of K block j->kb (the one j is set to) packed, by this thread
 * if no other has claimed its chunk, else once the other has finished. */
static void ensure_packed(const gemm_job *j, int s, int slivers) {
    const gemm_engine *e = j->eng;
    const int ch = b_chunk(e), c = s / ch;
    atomic_int *st = chunk_state_of(j, s);
    if (atomic_load_explicit(st, memory_order_acquire) == CHUNK_READY) return;
    int todo = CHUNK_TODO;
    if (atomic_compare_exchange_strong_explicit(st, &todo, CHUNK_PACKING, memory_order_acquire, memory_order_acquire)) {
        const int c0 = c * ch, c1 = c0 + ch < slivers ? c0 + ch : slivers;
        unsigned char *dst = j->ws + (size_t)(j->kb - j->kb0) * j->b_bytes + (size_t)c0 * j->depth * e->nr * e->elem;
        if (e->pack_b_run)
            e->pack_b_run(j, c0, c1, dst);
        else
            for (int t = c0; t < c1; t++) {
                int j0 = t * e->nr, n = j->ncur - j0 < e->nr ? j->ncur - j0 : e->nr;
                e->pack_b(j, j0, n, dst + (size_t)(t - c0) * j->depth * e->nr * e->elem);
            }
        atomic_store_explicit(st, CHUNK_READY, memory_order_release);
        return;
    }
    while (atomic_load_explicit(st, memory_order_acquire) != CHUNK_READY) pause_cpu();
}

/* Share t of the grid: a run of C's mr-row tiles times a run of the panel's
 * slivers, for each of the group's K blocks in order (each element of C
 * summed block after block, as one thread would); the share packs its rows
 * of A into its own buffer (apack), one block of rows at a time, and the
 * chunks of B it is first to reach; with cbuf (gemm_job's cb_bytes) its
 * block of C goes there, not to C. Its slivers are taken from a start
 * that depends on its row run, wrapping around: the order of the slivers
 * is the order of C's columns, not of any element's sum. */
static void multiply_share(const gemm_job *g, int t, unsigned char *apack, tg_real *cbuf) {
    const gemm_engine *eng = g->eng;
    const int mr = eng->mr, nr = eng->nr, mc = g->mc, slivers = (g->ncur + nr - 1) / nr;
    int row0, row1, s0, s1;
    thread_rows(g->M, mr, t / g->grid_n, g->nt / g->grid_n, &row0, &row1);
    thread_rows(slivers, 1, t % g->grid_n, g->grid_n, &s0, &s1);
    const int ch = b_chunk(eng), runs = g->nt / g->grid_n, ns = s1 - s0;
    const int first = ns > 0 ? (int)((long long)(ns + ch - 1) / ch * (t / g->grid_n) / runs) * ch % ns : 0;
    /* A read in place (op(A)(i, k) at A[i*lda + k], or A[k*lda + i]
     * transposed) when its block serves few slivers of B, by an engine that
     * can: packing it costs a pass over A that only many slivers repay. */
    const bool in_place = eng->kernel_a && slivers <= eng->in_place_max_slivers;
    const int j1 = s1 * nr < g->ncur ? s1 * nr : g->ncur; /* this share's columns of the panel */
    gemm_job j = *g;
    if (cbuf) j.ldc = g->cb_ld;                   /* the kernels' C is the thread's block buffer */
    for (int kb = g->kb0; kb < g->kb_end; kb++) { /* the K blocks in order: each C element's sum order */
        k_block(&j, kb);
        j.a_direct = !in_place && eng->a_direct && eng->a_direct(&j);
        const size_t sliver = (size_t)j.depth * nr * eng->elem;
        const unsigned char *bblock = g->ws + (size_t)(kb - g->kb0) * g->b_bytes; /* in L2 across the rows */
        tg_real beta_k = kb == 0 ? j.beta : 1;
        const tg_gemm_epilogue *ep = kb == j.kblocks - 1 ? j.ep : NULL; /* only the last K block finishes C */
        for (int ic = row0; ic < row1; ic += mc) {
            int mcur = row1 - ic < mc ? row1 - ic : mc;
            gemm_block_a(&j, in_place, ic, mcur, apack);
            /* A sliver whose chunk another thread is packing is left for a
             * second pass rather than waited for: the first pass goes on to
             * the chunks after it (and packs those), so two threads that
             * reach the same chunk split the packing instead of one idling.
             * The slivers' order is that of C's columns, not of a sum. */
            uint64_t later = 0; /* bit c: chunk c (< 64) left for the second pass, all its slivers */
            for (int pass = 0; pass < 2; pass++)
                for (int i = 0; i < ns; i++) {
                    int s = s0 + (first + i) % ns, j0 = s * nr, chunk = s / ch;
                    const uint64_t bit = chunk < 64 ? (uint64_t)1 << chunk : 0;
                    if (pass == 0 && ((later & bit) || (bit && chunk_busy(&j, s)))) {
                        later |= bit; /* a chunk once passed is ready: only its first sliver decides */
                        continue;
                    }
                    if (pass == 1 && !(later & bit)) continue;
                    ensure_packed(&j, s, slivers);
                    int n = j.ncur - j0 < nr ? j.ncur - j0 : nr;
                    tg_real *c = cbuf ? cbuf + (j0 - s0 * nr) : j.C + (size_t)ic * j.ldc + j.jc + j0;
                    gemm_sliver_tiles(&j, in_place, ic, mcur, apack, bblock + (size_t)s * sliver, c, beta_k, n);
                }
            /* rows ic.. of the panel are finished (on the last K block): the epilogue, from L2 */
            if (j1 > s0 * nr && cbuf && ep)
                tg_k_epilogue_tile(ep, ic, j.jc + s0 * nr, cbuf, j.ldc, g->ldc, mcur, j1 - s0 * nr);
            else if (j1 > s0 * nr)
                gemm_epilogue(ep, j.C, j.C + (size_t)ic * j.ldc + j.jc + s0 * nr, j.ldc, mcur, j1 - s0 * nr);
        }
    }
}

/* Shares [b, e) of the grid, on the buffers of A (and of C's blocks) of
 * the thread that runs them (tid < threads). */
static void multiply_range(void *ctx, int64_t b, int64_t e, int tid) {
    const gemm_job *g = ctx;
    const size_t me = (size_t)(g->threads == 1 ? 0 : tid);
    unsigned char *apack = g->ws + (size_t)g->kgroup * g->b_bytes + me * g->a_bytes;
    tg_real *cbuf = NULL;
    if (g->cb_bytes)
        cbuf = (tg_real *)(void *)(g->ws + (size_t)g->kgroup * g->b_bytes + (size_t)g->threads * g->a_bytes +
                                   me * g->cb_bytes);
    if (g->eng->begin) g->eng->begin();
    for (int64_t t = b; t < e; t++) multiply_share(g, (int)t, apack, cbuf);
    if (g->eng->end) g->eng->end();
}

/* The cost of the largest share of a grid of gr x gc shares: its rows
 * (whole mr-row tiles) times its columns (whole slivers) plus SPLIT_A_COLS
 * for packing its rows of A, gemm_split_choose's measure. */
static long long grid_cost(long long tiles, long long slivers, int mr, int nr, int gr, int gc) {
    return (tiles + gr - 1) / gr * mr * ((slivers + gc - 1) / gc * nr + SPLIT_A_COLS);
}

gemm_grid gemm_grid_choose(int M, int N, int K, int mr, int nr) {
    gemm_split s = gemm_split_choose(M, N, K, mr, nr);
    gemm_grid g = {s.split_n ? 1 : s.nt, s.split_n ? s.nt : 1};
    if (s.nt == 1 && ((double)M * N * K <= PARALLEL_MIN_WORK || tg_in_parallel())) return g;
    int nt = tg_get_num_threads();
    long long tiles = (M + mr - 1) / mr, slivers = (N + nr - 1) / nr;
    long long best = grid_cost(tiles, slivers, mr, nr, g.rows, g.cols);
    for (int gr = 2; gr <= nt / 2 && gr <= tiles; gr++)
        for (int gc = 2; gr * gc <= nt && gc <= slivers; gc++) {
            long long c = grid_cost(tiles, slivers, mr, nr, gr, gc);
            if (c < best) best = c, g = (gemm_grid){gr, gc};
        }
    return g;
}

bool gemm_drive(const gemm_engine *e, const gemm_job *op) {
    gemm_job j = *op;
    const int M = j.M, N = j.N, K = j.K, mr = e->mr, nr = e->nr;
    j.eng = e;
    /* K in near-equal blocks (k_block): a block is at most kalign - 1
     * deeper than ceil(K / kblocks). */
    j.kblocks = (K + e->kc - 1) / e->kc;
    int depth_max = packed_depth(e, (K + j.kblocks - 1) / j.kblocks + e->kalign - 1);
    j.nc = (int)round_up((size_t)(N < e->nc ? N : e->nc), (size_t)nr);
    j.mc = (int)round_up((size_t)(M < e->mc ? M : e->mc), (size_t)mr);
    /* Threads split C into a grid of row runs x sliver runs (a row or a
     * column split unless tiles or slivers are fewer than the threads:
     * gemm_grid_choose). Either way each element of C is one thread's,
     * summed in the same order: the same bits at any thread count. */
    gemm_grid grid = gemm_grid_choose(M, N, K, mr, nr);
    j.threads = grid.rows * grid.cols;
    j.b_bytes = round_up((size_t)depth_max * j.nc * e->elem, 64);
    j.a_bytes = round_up(((size_t)depth_max * j.mc + (size_t)e->a_slack) * e->elem, 64);
    j.kgroup = (int)(GEMM_B_GROUP_BYTES / j.b_bytes);
    if (j.kgroup < 1) j.kgroup = 1;
    if (j.kgroup > j.kblocks) j.kgroup = j.kblocks;
    /* A row split is cut finer than the threads, its runs handed out one at
     * a time: a thread slowed by another tenant of its core (on a shared
     * machine: bench/measured.md, "Session 8") takes fewer of them instead
     * of holding the product up with an equal share; but no run under
     * GEMM_RUN_MIN_ROWS rows where each run reads a group of B too large
     * to stay in L2. Which thread sums a run changes none of its bits. */
    if (j.threads > 1 && grid.cols == 1) {
        const int tiles = (M + mr - 1) / mr, long_runs = M / GEMM_RUN_MIN_ROWS;
        int runs = j.threads * GEMM_RUNS_PER_THREAD;
        if (j.b_bytes * (size_t)j.kgroup > GEMM_B_L2_BYTES && runs > long_runs)
            runs = long_runs > j.threads ? long_runs : j.threads;
        grid.rows = runs < tiles ? runs : tiles;
    }
    j.nt = grid.rows * grid.cols;
    j.grid_n = grid.cols;
    /* C in blocks (ep->c_scratch): where C is summed in one pass from
     * zero, so that a finished block is final. Its rows cb_ld apart, a
     * cache line past the panel's width: rows a multiple of 4 KB apart
     * would all fall in one set of the L1. */
    const bool cblock = gemm_c_blocked(e, K, j.beta, j.ep);
    j.cb_ld = cblock ? j.nc + (int)(64 / sizeof(tg_real)) : 0;
    j.cb_bytes = cblock ? round_up((size_t)j.mc * (size_t)j.cb_ld * sizeof(tg_real), 64) : 0;
    const size_t state_bytes = round_up((size_t)j.kgroup * b_chunks(e, j.nc) * sizeof(atomic_int), 64);
    const size_t before_state = (size_t)j.kgroup * j.b_bytes + (size_t)j.threads * (j.a_bytes + j.cb_bytes);
    j.ws = tg__gemm_workspace(before_state + state_bytes);
    if (!j.ws) return false;
    j.chunk_state = j.ws + before_state;
    /* An epilogue's res + bias comes last on a product summed in one pass;
     * over several K blocks C starts at it instead (gemm_epilogue_start),
     * as a caller's C would have, and keeps those bits. */
    tg_gemm_epilogue rest;
    if (j.kblocks > 1) j.ep = gemm_epilogue_start(j.ep, &rest, j.C, j.ldc, M, N, &j.beta);
    for (j.jc = 0; j.jc < N; j.jc += j.nc) {
        j.ncur = N - j.jc < j.nc ? N - j.jc : j.nc;
        for (int kb = 0; kb < j.kblocks; kb += j.kgroup) {
            j.kb = j.kb0 = kb;
            j.kb_end = kb + j.kgroup < j.kblocks ? kb + j.kgroup : j.kblocks;
            int used = (j.kb_end - kb) * b_chunks(e, j.ncur);
            for (int c = 0; c < used; c++) atomic_init((atomic_int *)j.chunk_state + c, CHUNK_TODO);
            tg_parallel_tasks_at_most(j.nt, j.threads, multiply_range, &j);
        }
    }
    return true;
}
