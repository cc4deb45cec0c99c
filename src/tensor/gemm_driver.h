/* Internal: the one blocked GEMM driver (gemm_driver.c) and what an engine
 * plugs into it. The float products (gemm.c: portable, AVX2 FMA, AVX-512
 * FMA) and the bf16 ones (gemm_bf16.c: vdpbf16ps, AMX tiles, their
 * portable twins) differ only in their gemm_engine rows: the element and
 * the layout of the packed operands, the tile and block sizes, the packers
 * and the micro-kernel. The loops around them (Goto / BLIS: B panels shared
 * by the threads, A blocks packed per thread), the K blocks, the thread
 * split (gemm_grid_choose) and the epilogue are written once, here, in
 * the scheme of BLIS and oneDNN's brgemm: one driver, many micro-kernels.
 * A new engine costs a row, a micro-kernel, its packing rule and a test. */
#ifndef TG_GEMM_DRIVER_H
#define TG_GEMM_DRIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensor/gemm_common.h"

typedef struct gemm_engine gemm_engine;
typedef struct gemm_job gemm_job;

/* A product, and (jc.. pc..) the panel of B and K block the threads are
 * working on; filled by gemm_drive, read by the engine's packers and
 * kernels. */
struct gemm_job {
    const gemm_engine *eng;
    bool trans_a, trans_b;
    int M, N, K, lda, ldb, ldc;
    tg_real alpha, beta;
    const tg_real *A, *B;
    const uint16_t *A16, *B16; /* the bf16 GEMM's operands stored as bf16 bits: set, they replace A, B (NULL) */
    tg_real *C;
    const tg_gemm_epilogue *ep; /* NULL: none */
    int flags;                  /* the caller's, for its engine (bf16: the AVX-512 BF16 packers may run) */
    /* set by gemm_drive */
    int nt;      /* shares of the product: a grid of nt / grid_n runs of C's row tiles x grid_n runs of slivers */
    int threads; /* the threads that take them (one A block buffer each) */
    int grid_n;  /* runs of B's slivers (columns of C) in the grid */
    int mc, nc, kblocks;
    int kgroup;                 /* K blocks of B packed at once (as many as fit GEMM_B_GROUP_BYTES) */
    int kb0, kb_end;            /* the group being multiplied: K blocks kb0..kb_end - 1 */
    int jc, ncur, kb, pc, kcur; /* the current panel: columns jc.. (ncur), K block kb at depth pc.. (kcur) */
    int depth;                  /* packed depth of this K block (eng->depth), in packed elements */
    bool a_direct;              /* this K block's full panels of A read from A16 in place (eng->a_direct) */
    unsigned char *ws;          /* the group's packed blocks of B, then one A block per thread */
    void *chunk_state;          /* in ws, after those: an atomic_int per (K block, chunk of B's slivers) */
    size_t b_bytes, a_bytes;    /* a packed block of B (one K block of the panel); one of A */
    /* C in blocks (ep->c_scratch, one K block, beta 0): each thread's
     * finished block of C (mc rows, a share's columns of the panel, rows
     * cb_ld apart) goes to a buffer of its own in ws for the epilogue, C
     * is never written; cb_bytes its size, 0 when C is C */
    int cb_ld;
    size_t cb_bytes;
};

/* The packed blocks of B one group may hold: the size of the float
 * engines' own KC x NC panel (256 x 4064 floats, 4 MiB), the block of B
 * that Goto's loops keep in L3, so the workspace is no larger than the
 * largest panel was. It holds every K block of most products (gpt-small's
 * N 256 x K 2048: 2 MiB), so that a product is one pool job rather than
 * one per K block; wider or deeper ones (N 1024 x K 2048: 8 MiB) go in
 * groups of this size. */
#define GEMM_B_GROUP_BYTES ((size_t)4 << 20)

/* A product's operands, named as every gemm_* function names its arguments:
 * the start of a gemm_job's (or gemm.c's gemm_ctx's) initialiser. */
#define GEMM_OPERANDS                                                                                   \
    .trans_a = trans_a, .trans_b = trans_b, .M = M, .N = N, .K = K, .lda = lda, .ldb = ldb, .ldc = ldc, \
    .alpha = alpha, .beta = beta, .A = A, .B = B, .C = C, .ep = ep

/* An engine: one row of constants and functions. Packed A is micro-panels
 * of mr rows, depth * mr elements each; packed B slivers of nr columns,
 * depth * nr elements each; elements of elem bytes. */
struct gemm_engine {
    int id;      /* the owner's name for the row (its table index) */
    size_t elem; /* bytes of a packed element */
    int mr, nr;  /* the micro-kernel's tile of C */
    int mc, kc, nc;
    int kalign;  /* K blocks start on multiples of this (2: bf16 pairs) */
    int a_slack; /* elements pack_a may write past a block */
    /* packed depth of a kcur-deep block (padding to pairs, chunks); NULL: kcur */
    int (*depth)(const gemm_engine *e, int kcur);
    /* rows i0.. (m of them, whole panels but the last) of op(A), depth
     * pc.., into m / mr micro-panels at dst, zeros past m */
    void (*pack_a)(const gemm_job *j, int i0, int m, void *dst);
    /* columns jc + j0.. (n <= nr) of op(B), depth pc.., into a sliver at
     * dst, zeros past n and past kcur */
    void (*pack_b)(const gemm_job *j, int j0, int n, void *dst);
    /* optional (NULL: pack_b on each): slivers s0..s1-1 of the panel in
     * one call, at dst (sliver s0's place), the same bits as pack_b's */
    void (*pack_b_run)(const gemm_job *j, int s0, int s1, void *dst);
    /* the tile of panel a times sliver b into the m x n corner of C at c:
     * C = alpha * tile + beta * C (beta == 0 never reads C) */
    void (*kernel)(const gemm_job *j, const void *a, const void *b, tg_real *c, tg_real beta, int m, int n);
    /* optional (NULL: A is always packed): the same with A read in place,
     * row r, depth k at a[r*a_rs + k*a_ks], used when a panel of B has at
     * most in_place_max_slivers slivers */
    void (*kernel_a)(const gemm_job *j, const tg_real *a, size_t a_rs, size_t a_ks, const void *b, tg_real *c,
                     tg_real beta, int m, int n);
    int in_place_max_slivers;
    /* optional (NULL: never): whether the kernel reads the current K
     * block's full mr-row panels of A straight from the source, without
     * packing: kernel is then given, for a panel of mr rows, the address of
     * its first row at depth pc in A16 (rows lda apart, A untransposed),
     * and tells the two apart by j->a_direct && m == mr; a last panel of
     * fewer rows is packed as usual (pack_a on those rows alone), so no
     * read passes A's last row. */
    bool (*a_direct)(const gemm_job *j);
    /* optional: run by each thread around its share (AMX: the tile
     * configuration, then its release) */
    void (*begin)(void), (*end)(void);
};

/* The block of A a K block's tiles read, rows ic.. (mcur of them) of
 * op(A): packed into apack's micro-panels, or read in place (in_place: the
 * float engines' kernel_a, all of it; j->a_direct: the AMX engines' whole
 * mr-row panels, a last panel of fewer rows packed alone, at its place
 * in apack). */
static inline void gemm_block_a(const gemm_job *j, bool in_place, int ic, int mcur, unsigned char *apack) {
    const gemm_engine *e = j->eng;
    const int full = mcur / e->mr * e->mr; /* rows in whole panels */
    if (!in_place && !j->a_direct)
        e->pack_a(j, ic, mcur, apack);
    else if (j->a_direct && full < mcur)
        e->pack_a(j, ic + full, mcur - full, apack + (size_t)full / e->mr * ((size_t)j->depth * e->mr * e->elem));
}

/* The micro-kernel's tiles of one packed sliver bs of B (n <= nr columns)
 * down that block of rows, into C at c (the block's first row at the
 * sliver's first column, rows j->ldc apart), C = alpha * tile + beta * C:
 * the one body of the driver's loops (multiply_share) and of the bf16
 * GEMM's small products (gemm_bf16_small.c), so both make the same calls
 * with the same arguments in the same order, hence the same bits. */
static inline void gemm_sliver_tiles(const gemm_job *j, bool in_place, int ic, int mcur, const unsigned char *apack,
                                     const unsigned char *bs, tg_real *c, tg_real beta, int n) {
    const gemm_engine *e = j->eng;
    const int mr = e->mr;
    const size_t lda = (size_t)j->lda, panel = (size_t)j->depth * mr * e->elem;
    const size_t a_rs = j->trans_a ? 1 : lda, a_ks = j->trans_a ? lda : 1; /* op(A)(i, k) at A[i*a_rs + k*a_ks] */
    for (int ir = 0; ir < mcur; ir += mr) {
        const int m = mcur - ir < mr ? mcur - ir : mr;
        tg_real *cs = c + (size_t)ir * j->ldc;
        if (in_place)
            e->kernel_a(j, j->A + (size_t)(ic + ir) * a_rs + (size_t)j->pc * a_ks, a_rs, a_ks, bs, cs, beta, m, n);
        else if (j->a_direct && m == mr)
            e->kernel(j, j->A16 + (size_t)(ic + ir) * lda + j->pc, bs, cs, beta, m, n);
        else
            e->kernel(j, apack + (size_t)ir / mr * panel, bs, cs, beta, m, n);
    }
}

/* How the driver shares a product among threads: a grid of `rows` runs of
 * C's mr-row tiles by `cols` runs of B's nr-wide slivers, rows * cols
 * threads. */
typedef struct {
    int rows, cols;
} gemm_grid;

/* gemm_split_choose's row or column split (gemm_common.h), or, where a
 * grid of both has a smaller largest share (tiles or slivers fewer than
 * the threads: a small product on many threads), that grid; each share
 * costed as gemm_split_choose costs one. Two threads never take a grid. */
gemm_grid gemm_grid_choose(int M, int N, int K, int mr, int nr);

/* Whether gemm_drive keeps every finished block of C in a thread's
 * buffer for the epilogue and never writes C (ep->c_scratch, beta 0, K in
 * one block): only then may a caller give no C at all. */
static inline bool gemm_c_blocked(const gemm_engine *e, int K, tg_real beta, const tg_gemm_epilogue *ep) {
    return ep && ep->c_scratch && beta == 0 && (K + e->kc - 1) / e->kc == 1;
}

/* C = alpha * op(A) op(B) + beta * C through engine e, the operands (and
 * flags) in *op. Each element of C is one thread's, summed in k order
 * within each K block, the blocks' boundaries a function of K alone: the
 * same bits at any thread count. false: the packing buffers could not be
 * had (out of memory), nothing done; the caller runs an unpacked loop. */
bool gemm_drive(const gemm_engine *e, const gemm_job *op);

/* The float engine's row that tg_k_gemm_ep (gemm.c) runs an M x N x K
 * product on at this ISA level, or NULL where it takes the direct or
 * few-row loops instead (by the shape alone): for the bf16 GEMM's fp32
 * engine, which runs the row with packers of its own (gemm_bf16_fp32.c). */
const gemm_engine *tg__gemm_float_row(bool trans_a, bool trans_b, int M, int N, int K);
/* The fp32 engine on a product the float GEMM does not pack: its own
 * loops on the operands rounded (or widened from bf16: the job's A16,
 * B16) to bf16, no copy of them made. The direct loops read panels of A
 * and slivers of B from the packers below; the few-row loops (x W^T of a
 * few rows in a decode step, or dy W of a small batch) round each operand
 * as they load it. The bits of tg_k_gemm_ep on rounded copies (gemm.c).
 * false where the float GEMM would pack the product (or in the double
 * build, or below AVX2): nothing done. */
bool tg__gemm_unpacked_bf16(const gemm_job *job);
/* The fp32 engine's packers (gemm_bf16_fp32.c; AVX2 up, float build):
 * gemm.c's AVX2 pack_a (6-row panels) and pack_b_sliver (slivers
 * j->eng->nr wide) for the job's K block (pc, kcur) and panel (jc), each
 * value rounded or widened to bf16 as it is packed. */
void tg__fp32_pack_a(const gemm_job *j, int i0, int m, void *dst);
void tg__fp32_pack_b(const gemm_job *j, int j0, int n, void *dst);

#endif
