/* Fused scaled dot-product attention that never stores the Q x K matrix:
 *
 *   out = dropout(masked_softmax(q k^T / sqrt(d))) v,
 *   q [B, Q, d], k [B, K, d], v [B, K, dv] -> out [B, Q, dv],
 *
 * with exactly the semantics of the stored path of src/nn/attention.c
 * (tg_score_scaled_dot, tg_masked_softmax, tg_dropout, tg_matmul): masked
 * scores are replaced by -1e6 (mask.h), so a row with no visible key is
 * uniform; dropout is inverted and element (b, q, k) of its mask is drawn at
 * counter index first + (b Q + q) K + k, first = tg_dropout_take(rng, B Q K),
 * the index tg_dropout would give it (with the same data-parallel shard:
 * tg_dropout_set_shard). Called with equal rng states, both paths give the
 * same result up to float rounding.
 *
 * Forward: FlashAttention-2 (Dao, "FlashAttention-2: Faster Attention with
 * Better Parallelism and Work Partitioning", 2023, Algorithm 1). Queries in
 * blocks of BQ rows, keys in blocks of BK; per query row i a running max m_i,
 * a running sum l_i and an unnormalised output row o_i:
 *   S_ij = q_i . k_j / sqrt(d)                     (-1e6 where masked)
 *   m_i' = max(m_i, max_j S_ij),  c_i = exp(m_i - m_i')
 *   P_ij = exp(S_ij - m_i')
 *   l_i  = c_i l_i + sum_j P_ij                      (before dropout: the softmax's sum)
 *   o_i  = c_i o_i + sum_j P_ij Z_ij / (1-p) v_j     (Z_ij = keep bit of the dropout mask)
 * and at the end out_i = o_i / l_i. Saved for backward: only the
 * log-sum-exp L_i = m_i + log l_i ([B, Q], arena), the visible-key counts
 * and the rng position; P and Z are recomputed, never stored.
 *
 * Backward (Dao 2023, Algorithm 2, with dropout as in FlashAttention-1,
 * Dao et al. 2022, Appendix B), with dO the gradient of out:
 *   D_i   = sum_c dO_ic O_ic        (= sum_j P_ij dP_ij, also with dropout)
 *   P_ij  = exp(S_ij - L_i)         (recomputed; 1/K on rows with no visible key)
 *   dV_j += sum_i P_ij Z_ij/(1-p) dO_i
 *   dP_ij = (dO_i . v_j) Z_ij / (1-p)
 *   dS_ij = P_ij (dP_ij - D_i)      (0 where masked: masked scores are constants)
 *   dQ_i += sum_j dS_ij k_j / sqrt(d),   dK_j += sum_i dS_ij q_i / sqrt(d)
 *
 * Threads and determinism. Forward: one task per (batch row, query block),
 * independent outputs. Backward in two passes, as the FlashAttention-2
 * paper suggests for a deterministic backward: dQ with one task per query
 * block looping over its key blocks, then dK and dV with one task per key
 * block looping over the query blocks that see it. Each task owns the rows
 * it writes and sums in an order fixed by the shapes, so results are
 * bit-identical for any number of threads, with no atomics and no partial
 * copies; the price is that each tile's P and dP are recomputed twice.
 * When there are enough head-batch entries to keep the team busy (and no
 * position terms, K <= WHOLE_MAX_K), one task does a whole entry instead
 * (backward_entry): query blocks outer, key blocks inner, each tile's P,
 * dP and dS once; every dQ, dK and dV row is summed in the passes' order,
 * so the bits are the same whichever runs (the choice may depend on the
 * thread count).
 *
 * Block products (the tiles' operands, below): tg_k_attn_mm, registers-
 * tiled with B read in place and tg_k_gemm's bits, on k^T and v^T packed
 * once per tile; in chunks of 16 rows cut to the causal (valid-length)
 * prefix, which skips about a third of each diagonal tile's work
 * and changes no bit (the terms skipped are exact zeros).
 *
 * Under bf16 products (tg_set_precision) every product is of bf16 values
 * with float sums, whichever engine runs it (issue 31): a product of two
 * bf16 values is exact in float, so the fp32 kernels on operands rounded
 * to bf16 (tg__bf16_round_daz, as the bf16 GEMM rounds them) are bf16
 * arithmetic. The engine is chosen by the shapes, a rule measured on an
 * AMX Xeon (bench/measured.md, "Session 5: attention's engine under
 * bf16"): short sequences (the short path below) run the short kernel on
 * rounded operands, which beat AMX tiles there; longer ones run the tiles'
 * products on AMX (tg_k_gemm_bf16, whole) where AMX is the bf16 engine --
 * as fast as tg_k_attn_mm on rounded operands at head size 32, much
 * faster at 64 -- else tg_k_attn_mm on rounded operands (round_ops). The
 * rounding: q, k, v (and dO) once per task, as it copies their rows
 * (widen_entry, as bf16 storage widens them); P o Z and dS as they are
 * made, a tile (or on the short path a row of vectors, in vcvtneps2bf16
 * where the CPU has AVX-512 BF16) at a time. The rule was measured again
 * after the changes of "Session 6: attention under bf16 reads bf16"
 * (bench/measured.md): AMX still beats tg_k_attn_mm on rounded operands
 * at T 128, d 32, forward and backward.
 *
 * Layouts (attn_view): the operands' rows are read and written through
 * strides, so the same op serves [B, n, d] tensors (tg_attention_pos), the
 * heads of [B, n, h d] projections in place (tg_attention_heads: head j is
 * columns j d.., its output goes where the output projection reads it) and
 * nanoGPT's fused [B, T, 3 h d] projection (tg_attention_qkv, one input and
 * one gradient). In a GPT block that removes the permute of qkv to
 * [3, B h, T, d], the three slices, the permute back and their backward
 * copies: a quarter of gpt-mini's step memory (bench: arena 105.5 -> 77.5
 * MB; gpt-small 399 -> 287 MB).
 *
 * Memory added besides out: L (B Q reals), the mask's counts (B Q ints), D
 * in backward (B Q), and per thread a few BQ x BK tiles: O(B Q), never
 * O(Q K) -- except that when Q and K are one block each (<= 64), the
 * forward keeps P (B Q K <= 64 B Q reals) and the backward does all of an
 * entry's dQ, dK and dV in one task from it (backward_single): the
 * recomputed scores and exps had made the op slower than the stored path
 * at T 64 (a 32 x 4-head, T 64, d 32 attention forward + backward: 5.0-7.5
 * ms against the stored path's 4.4-5.3; now 3.9-5.0).
 *
 * Short sequences: with at most TG_ATT_SHORT_MAX = 64 keys and no position
 * terms, none of the above runs. Each head-batch entry
 * is one call of tensor/kernels_attention.c (forward, and backward), which
 * does the whole entry with its scores in L1: rows of scores padded to 16
 * lanes, no 64 x 64 tiles, no GEMM calls, the transposes of k and v by
 * register tiles. The forward keeps P (B Q KP reals, KP = K rounded up to
 * 16); the backward draws the dropout mask again, multiplies it into P,
 * and takes D_i = sum_j P_ij Z_ij/(1-p) dP_ij (the same as dO_i . O_i).
 * Tasks take a few entries each; an entry is one task's, so the bits do
 * not depend on the threads either. At the toy's T 16 and head size 16
 * this made the op faster than the stored path, which it had not been
 * (nn/attention.c has the measurements).
 *
 * Position terms (tg_attention_pos, autograd.h: ALiBi, a per-head bias
 * table, Shaw's a^K and a^V), all functions of (head, offset o = j - i),
 * with R buckets r(o) (clipped offsets or T5's, rel_bucket.h), looked up
 * in a map of the Q + K - 1 offsets the op can meet. Per query block, before its key
 * blocks, one product gives each row's bias per bucket,
 *   rb_ir = bias[h, r] + q_i . a^K_r / sqrt(d)          (BQ x R),
 * Shaw's key term computed per offset, not per key (the product a skewing
 * trick would rearrange); a tile adds rb_i,r(j - i) - m_h |j - i| to its
 * visible scores. Shaw's value term: the weights are summed per bucket as
 * they are made, W_ir = sum_{j: r(ij) = r} P_ij Z_ij / (1-p) (rescaled with
 * o_i), and out_i = (o_i + W_i a^V) / l_i. Backward: dP_ij gains
 * dO_i . a^V_r(ij); with G_ir = sum_{j in r} dS_ij and G'_ir = sum_{j in r}
 * P_ij Z_ij / (1-p) (collected in the dQ pass, which sees every tile of its
 * rows),
 *   dq_i += G_i a^K / sqrt(d),  d bias[h] += sum_i G_i,
 *   d a^K += G^T q / sqrt(d),   d a^V += G'^T dO;
 * the table gradients are per-task partials summed in task order after the
 * pass, so they too are the same for any thread count. Memory added: a few
 * BQ x R rows per thread and R (d + dv + 1) per task, still never Q x K.
 *
 * q, k and v stored as bf16 give a bf16 output, each task widening the rows
 * it reads into its own scratch, or on AMX reading them as stored ("bf16
 * storage" below). */
#include "op.h"
#include "mask.h"
#include "rel_bucket.h"
#include "tensor/half.h"
#include "tensor/kernels.h"
#include "tensor/tensor_internal.h" /* tg__empty_bf16 */

#include <math.h>
#include <string.h>

#define BQ          64   /* queries per block */
#define BK          64   /* keys per block */
#define WHOLE_MAX_K 1024 /* the most keys of a whole-entry backward task (attention_backward) */

/* Where an operand's rows are: row i of head-batch entry b = (batch, head)
 * starts at off + batch bs + head hs + i rs. A [B, n, d] tensor is H = 1,
 * bs = n d, rs = d. The heads of a [B, n, h d] tensor are read in place
 * (H = h, bs = n h d, hs = d, rs = h d): no permute to [B h, n, d] and back;
 * the fused projection [B, n, 3 h d] is the same with rs = 3 h d and off 0,
 * h d, 2 h d for q, k, v. */
typedef struct {
    int64_t off, bs, hs, rs;
} attn_view;

/* The forward's plan, kept as the node's state: everything backward needs
 * besides the inputs and output (arena). */
typedef struct {
    int B, Q, K, d, dv;
    tg_real scale;         /* 1 / sqrt(d), as tg_score_scaled_dot */
    bool bf16;             /* block products in bf16 (tg_set_precision), forward and backward */
    bool amx;              /* bf16 on AMX: the tiles' products by tg_k_gemm_bf16, whole (the tile operands) */
    bool round_ops;        /* bf16 otherwise: operands rounded, products by tg_k_attn_mm or the short kernel */
    bool dropout;          /* p > 0; the mask holds 1 / (1 - p) */
    tg_dropout_mask mask;  /* the same mask as tg_dropout (dropout_mask.h) */
    uint64_t first;        /* first counter index */
    const int *lim;        /* visible keys of each row, B Q (mask.h) */
    const int *qblock_end; /* per (b, query block): keys any of its rows may see */
    const tg_real *lse;    /* L: log-sum-exp of each row's scores, B Q */
    tg_real *probs;        /* the weights P, B Q K, kept when Q and K are one block each; else NULL */
    bool short_seq;        /* each entry whole (the short path), and probs, if kept, rows KP apart */
    /* Position terms (tg_attn_pos): none when !has_pos. */
    bool has_pos, rowbias; /* any term; a bias per bucket (bias or rel_k) */
    int heads, qoff, R;    /* R buckets (rel_bucket.h) */
    const int *bmap;       /* bucket of offset o at bmap[o - omin] */
    int64_t omin;
    const tg_real *slopes;              /* [heads] (an arena copy) or NULL */
    const tg_real *pbias, *relk, *relv; /* data of the tables, or NULL */
    int i_bias, i_relk, i_relv;         /* their places among the node's inputs, or -1 */
    /* Where the operands' rows are (attn_view): q, k, v, and out (dO too). */
    int H;     /* heads per batch entry in the views; 1 for [B, n, d] tensors */
    int n_qkv; /* inputs holding q, k, v: 3, or 1 (the fused projection) */
    attn_view vq, vk, vv, vo;
    /* Where the gradients' rows are: q's, k's and v's views as given (a
     * task's copy of the plan points vq, vk, vv at its widened rows). */
    attn_view gvq, gvk, gvv;
    /* q, k, v and out stored as bf16 (tg_dtype): their values, read and
     * written only through widen_entry and round_rows ("bf16 storage"). */
    bool io_bf16;
    const uint16_t *q16, *k16, *v16;
    uint16_t *out16;
    /* q, k and v as tg_real (NULL under bf16 storage): round_ops copies
     * their rows, rounded, as bf16 storage widens its own ("bf16 storage"). */
    const tg_real *qr, *kr, *vr;
} attention_state;

/* Row i of head-batch entry b (b = batch * H + head) of an operand:
 * data + at(pl, view, b, i), its features contiguous. */
static inline int64_t at(const attention_state *pl, const attn_view *v, int b, int i) {
    return v->off + (int64_t)(b / pl->H) * v->bs + (int64_t)(b % pl->H) * v->hs + (int64_t)i * v->rs;
}

static int nblocks(int n, int b) { return (n + b - 1) / b; }

/* ---- bf16 storage ------------------------------------------------------------
 * q, k and v stored as bf16 (tg_dtype: all three, or none) give an output
 * stored as bf16, as torch's scaled_dot_product_attention returns its
 * inputs' dtype; their gradients are tg_real, as every bf16 tensor's. A
 * task widens the rows of its entry that it reads (exactly: a bf16 value
 * is the top half of a float) into its own scratch, and runs the code
 * below on them through a copy of the plan whose views point there (bs =
 * hs = 0: entry b's rows start at the scratch whatever b is); its rows of
 * out go to the scratch too and are rounded into out as tg_to_bf16 rounds.
 * The arithmetic is the real inputs' (the same path, products and sums),
 * so out is bit for bit tg_to_bf16(attention(tg_to_real(q), ...)), and no
 * float copy of q, k, v or out outlives a task: the node keeps half their
 * bytes (a quarter in the double build). The gradients' rows are found through the plan's own views (gvq,
 * gvk, gvv). The backward's D = rowsum(dO o O) reads the stored, rounded O
 * (as FlashAttention does with bf16 inputs), which moves the gradients by
 * about bf16's rounding of O from the composite's; the short path takes D
 * from its kept weights and does not read O. On AMX without position
 * terms (reads_bf16) nothing is widened: the products read q, k and v as
 * stored (tg_k_gemm_bf16_mixed packs bf16 rows in place), the same bits,
 * half the bytes and no copy per task; only the rows of out go through
 * the scratch. */
typedef struct {
    attention_state pl; /* the plan, vq, vk and vv on the widened rows */
    const tg_real *q, *k, *v;
} widened;

/* Rows [i0, i1) of entry b of the operand at src16 (bf16 storage) or at
 * src (rounded to bf16: round_ops), view *v, cols features, copied into
 * dst, rows cols apart; *v then addresses them (row i at (i - i0) cols,
 * for any b). Widening is exact and a bf16 value rounds to itself, so
 * under bf16 storage the copy's values are the products' operands either
 * way. Returns the reals after them. */
static tg_real *widen_rows(const attention_state *pl, attn_view *v, const uint16_t *src16, const tg_real *src, int b,
                           int i0, int i1, int cols, tg_real *dst) {
    int n = i1 > i0 ? i1 - i0 : 0;
    if (src16 && n > 0)
        tg_k_attn_widen(n, cols, src16 + at(pl, v, b, i0), v->rs, dst, cols);
    else if (n > 0)
        tg_k_attn_pack(n, cols, src + at(pl, v, b, i0), v->rs, false, true, dst, cols);
    *v = (attn_view){-(int64_t)i0 * cols, 0, 0, cols};
    return dst + (size_t)n * cols;
}

/* Entry b's queries [q0, q1) and keys [k0, k1) widened (or rounded) into
 * buf (within io_reals): w's plan and operands read them. Returns the
 * reals after them. */
static tg_real *widen_entry(const attention_state *pl, int b, int q0, int q1, int k0, int k1, tg_real *buf,
                            widened *w) {
    w->pl = *pl;
    w->q = buf;
    w->k = buf = widen_rows(pl, &w->pl.vq, pl->q16, pl->qr, b, q0, q1, pl->d, buf);
    w->v = buf = widen_rows(pl, &w->pl.vk, pl->k16, pl->kr, b, k0, k1, pl->d, buf);
    return widen_rows(pl, &w->pl.vv, pl->v16, pl->vr, b, k0, k1, pl->dv, buf);
}

/* Whether the AMX products read q, k and v as stored (bf16 storage on
 * AMX, no position terms): tg_k_gemm_bf16_mixed packs bf16 rows as they
 * lie, so a task widens nothing, the bits of widening them first (the
 * rounding leaves a bf16 value as it is). */
static bool reads_bf16(const attention_state *pl) { return pl->io_bf16 && pl->amx && !pl->has_pos; }

/* Whether a task copies its rows of q, k and v (widened, or rounded). */
static bool copies_rows(const attention_state *pl) { return (pl->io_bf16 && !reads_bf16(pl)) || pl->round_ops; }

/* Reals of a thread's copied rows: an entry's q, k and v, and after them
 * (forward, bf16 storage) its rows of out, or (backward) under round_ops
 * its rows of dO, rounded. */
static size_t io_reals(const attention_state *pl, bool backward) {
    if (reads_bf16(pl)) return backward ? 0 : (size_t)BQ * pl->dv; /* a query block's rows of out */
    if (!copies_rows(pl)) return 0;
    size_t Q = (size_t)pl->Q, K = (size_t)pl->K, d = (size_t)pl->d, dv = (size_t)pl->dv, ent = Q * d + K * (d + dv);
    if (!backward) return ent + (pl->io_bf16 ? Q * dv : 0);
    return ent + (pl->round_ops ? Q * dv : 0);
}

/* Rows [q0, q0 + n) of entry b of out = src's rows (dv apart), rounded to bf16. */
static void round_rows(const attention_state *pl, int b, int q0, int n, const tg_real *src) {
    if (n > 0) tg_k_attn_narrow(n, pl->dv, src, pl->dv, pl->out16 + at(pl, &pl->vo, b, q0), pl->vo.rs);
}

/* The keys a task of query block qb of entry b reads: up to its last key
 * block (forward_block, backward_dq). */
static int keys_read(const attention_state *pl, int b, int qb) {
    int e = nblocks(pl->qblock_end[(int64_t)b * nblocks(pl->Q, BQ) + qb], BK) * BK;
    return e < pl->K ? e : pl->K;
}

/* ---- element kernels --------------------------------------------------------
 * Three quarters of the time goes to the per-element work (a hash and an exp
 * per weight, d = 16 leaves little to the products), so the row kernels have
 * AVX2 versions chosen at run time: tensor/kernels_attention.c (row max,
 * product, dS), dropout_mask.c and kernels_exp.c (tg_k_exp_shift). */

/* zf[i*BK + j] = Z_ij / (1 - p) for the tile at rows q0.., keys k0..: the
 * dropout mask, regenerated from its counters. */
static void dropout_tile(const attention_state *pl, int b, int q0, int nq, int k0, int nk, tg_real *zf) {
    for (int i = 0; i < nq; i++) {
        uint64_t idx = pl->first + ((uint64_t)b * pl->Q + (uint64_t)(q0 + i)) * (uint64_t)pl->K + (uint64_t)k0;
        tg_dropout_mask_row(&pl->mask, idx, nk, zf + (size_t)i * BK);
    }
}

/* Visible keys of row r inside the key block [k0, k0 + nk): a prefix of
 * vis entries; -1 for a row with no visible key at all (uniform row). */
static int visible_in_block(const attention_state *pl, int64_t r, int k0, int nk) {
    int L = pl->lim[r];
    if (L == 0) return -1;
    int v = L - k0;
    return v < 0 ? 0 : v > nk ? nk : v;
}

/* ---- the tiles' operands -----------------------------------------------------
 * The block products are tg_k_attn_mm's (kernels_attention_block.c): B is
 * read as it lies, so k and v, the operands used transposed (q k^T,
 * dO v^T), are packed transposed once per tile. Under bf16 without AMX
 * (round_ops) every operand is rounded once: q, k, v and dO when a task
 * copies its rows (widen_entry, task_operands), P and dS in their own
 * tiles as they are made; the products of the rounded values are exact in
 * float: the bf16 GEMM's arithmetic. On AMX (amx) the products are
 * tg_k_gemm_bf16's on the rows as they lie (the rule that picks it:
 * attention_run), bf16 rows under bf16 storage (reads_bf16, amx_mm).
 * Where the operands are (pointers into q, k, v and dO, or
 * into the task's copies of their rows): */
#define CH 16 /* rows (queries or keys) of a tile's chunks */
typedef struct {
    const tg_real *q, *k, *v, *dO; /* the block's rows: q, dO nq of them; k, v nk */
    int ldq, ldk, ldv, ldo;
    tg_real *kt, *vt; /* k^T (d x BK), v^T (dv x BK, backward) */
    /* The causal (and valid-length) cut: the keys each chunk of CH query
     * rows may see (a prefix: the largest of its rows'; nk when a row sees
     * none and is uniform), and the first query row that may see each
     * chunk of CH keys (nq: none). Products skip the rest, where P, dP and
     * dS are 0: terms that add exactly nothing (from a sum that starts at
     * +0, adding 0 x a finite value leaves the bits as they are), so the
     * results are those of the whole tiles. (Not found under amx, whose
     * products are whole.) */
    int ccols[BQ / CH], rlo[BK / CH];
    bool amx; /* the products whole, by tg_k_gemm_bf16 on the rows as they lie (no cut, no k^T, v^T) */
    /* reads_bf16: the block's rows of q, k, v as stored (q, k, v NULL), rows ldq, ldk, ldv apart. */
    const uint16_t *q16, *k16, *v16;
} tile_ops;

/* Reals of the operand buffers a thread needs (tile_operands): k^T and
 * (backward) v^T. */
static size_t ops_reals(const attention_state *pl, bool backward) {
    size_t d = (size_t)pl->d, dv = (size_t)pl->dv;
    return pl->amx ? 0 : BK * (d + (backward ? dv : 0));
}

/* The operands of the tile at rows q0.. (nq), keys k0.. (nk) of entry b:
 * q's and k's rows, k^T (in buf, ops_reals); with dO, also dO's rows and
 * v^T (the backward), else v's rows (the forward). */
static tile_ops tile_operands(const attention_state *pl, const tg_real *q, const tg_real *k, const tg_real *v,
                              const tg_real *dO, int b, int q0, int nq, int k0, int nk, tg_real *buf) {
    int d = pl->d, dv = pl->dv;
    tile_ops o = {.amx = pl->amx};
    o.kt = buf, o.vt = dO ? buf + (size_t)d * BK : NULL;
    o.ldq = (int)pl->vq.rs, o.ldk = (int)pl->vk.rs, o.ldv = (int)pl->vv.rs;
    if (reads_bf16(pl)) {
        o.q16 = pl->q16 + at(pl, &pl->vq, b, q0), o.k16 = pl->k16 + at(pl, &pl->vk, b, k0);
        o.v16 = pl->v16 + at(pl, &pl->vv, b, k0);
    } else {
        o.q = q + at(pl, &pl->vq, b, q0), o.k = k + at(pl, &pl->vk, b, k0), o.v = v + at(pl, &pl->vv, b, k0);
    }
    const tg_real *kblk = o.k, *vblk = o.v;
    if (!pl->amx) tg_k_attn_pack(nk, d, kblk, pl->vk.rs, true, false, o.kt, BK);
    if (dO) {
        o.dO = dO + at(pl, &pl->vo, b, q0), o.ldo = (int)pl->vo.rs;
        if (!pl->amx) tg_k_attn_pack(nk, dv, vblk, pl->vv.rs, true, false, o.vt, BK);
    }
    if (pl->amx) return o; /* whole products: no cut to find */
    int64_t r0 = (int64_t)b * pl->Q + q0;
    for (int c = 0; c < BK / CH; c++) o.rlo[c] = nq;
    for (int i = 0; i < nq; i++) {
        int vis = visible_in_block(pl, r0 + i, k0, nk), n = vis < 0 ? nk : vis;
        if (i % CH == 0 || n > o.ccols[i / CH]) o.ccols[i / CH] = n;
        for (int c = 0; c * CH < n; c++)
            if (o.rlo[c] > i) o.rlo[c] = i;
    }
    return o;
}

/* tg_k_gemm_bf16 on AMX, A or B read as bf16 where A16 or B16 is given
 * (reads_bf16; else A, B). */
static void amx_mm(bool trans_a, bool trans_b, int m, int n, int k, tg_real alpha, const tg_real *A,
                   const uint16_t *A16, int lda, const tg_real *B, const uint16_t *B16, int ldb, tg_real beta,
                   tg_real *C, int ldc) {
    tg_k_gemm_bf16_mixed(trans_a, trans_b, m, n, k, alpha, A16 ? (const void *)A16 : (const void *)A, A16 != NULL, lda,
                         B16 ? (const void *)B16 : (const void *)B, B16 != NULL, ldb, beta, C, ldc, NULL);
}

/* C = alpha A B + beta C over a tile's query rows (A's, C's), chunk by
 * chunk, with the output columns (inner false) or the inner index (inner
 * true; then beta is 1) cut to what the chunk's rows see. */
static void mm_query_rows(const tile_ops *o, int nq, bool inner, int n, int k, tg_real alpha, const tg_real *A, int lda,
                          const tg_real *B, const uint16_t *B16, int ldb, tg_real beta, tg_real *C, int ldc) {
    if (o->amx) { /* inner: k is the tile's keys */
        amx_mm(false, false, nq, n, k, alpha, A, NULL, lda, B, B16, ldb, beta, C, ldc);
        return;
    }
    for (int i0 = 0; i0 < nq; i0 += CH) {
        int rows = nq - i0 < CH ? nq - i0 : CH, w = o->ccols[i0 / CH];
        if (w > 0)
            tg_k_attn_mm(false, rows, inner ? n : w, inner ? w : k, alpha, A + (size_t)i0 * lda, lda, B, ldb, beta,
                         C + (size_t)i0 * ldc, ldc);
    }
}

/* C += alpha A^T B over a tile's keys (C's rows, A's columns: A is a
 * query x key tile, BK apart), each chunk of keys from the first query
 * row that sees it. */
static void mm_key_rows(const tile_ops *o, int nk, int nq, int n, tg_real alpha, const tg_real *A, const tg_real *B,
                        const uint16_t *B16, int ldb, tg_real *C, int ldc) {
    if (o->amx) {
        amx_mm(true, false, nk, n, nq, alpha, A, NULL, BK, B, B16, ldb, 1, C, ldc);
        return;
    }
    for (int j0 = 0; j0 < nk; j0 += CH) {
        int rows = nk - j0 < CH ? nk - j0 : CH, lo = o->rlo[j0 / CH];
        if (lo < nq)
            tg_k_attn_mm(true, rows, n, nq - lo, alpha, A + (size_t)lo * BK + j0, BK, B + (size_t)lo * ldb, ldb, 1,
                         C + (size_t)j0 * ldc, ldc);
    }
}

/* S = scale q_blk k_blk^T, nq x nk, row stride BK. */
/* tg_k_attn_mm with tg_k_gemm's arguments (B untransposed): the one
 * whole-tile product of backward_single, next to tg_k_gemm_bf16 on AMX. */
static void whole_tile_mm(bool trans_a, bool trans_b, int m, int n, int k, tg_real alpha, const tg_real *A, int lda,
                          const tg_real *B, int ldb, tg_real beta, tg_real *C, int ldc) {
    (void)trans_b;
    tg_k_attn_mm(trans_a, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* C = alpha A B^T (nq x nk, rows BK apart) with B^T packed in Bt (rows BK
 * apart), or, on AMX, B's rows as they lie (Br, ldr). */
static void mm_transposed(const tile_ops *o, int nq, int nk, int k, tg_real alpha, const tg_real *A,
                          const uint16_t *A16, int lda, const tg_real *Bt, const tg_real *Br, const uint16_t *Br16,
                          int ldr, tg_real *C) {
    if (o->amx)
        amx_mm(false, true, nq, nk, k, alpha, A, A16, lda, Br, Br16, ldr, 0, C, BK);
    else
        mm_query_rows(o, nq, false, 0, k, alpha, A, lda, Bt, NULL, BK, 0, C, BK);
}

static void scores_tile(const attention_state *pl, const tile_ops *o, tg_real *S, int nq, int nk) {
    mm_transposed(o, nq, nk, pl->d, pl->scale, o->q, o->q16, o->ldq, o->kt, o->k, o->k16, o->ldk, S);
}

/* ---- position terms ----------------------------------------------------------- */

/* The bucket of offset o (clipped or T5's), looked up: the map holds the
 * Q + K - 1 offsets the op can meet (rel_bucket_map). */
static inline int bucket_of(const attention_state *pl, int64_t o) { return pl->bmap[o - pl->omin]; }

/* rb[i R + r] = bias[h, r] + scale q_i . rel_k[r] for the nq rows at qblk of batch row b. */
static void rowbias_block(const attention_state *pl, const tg_real *qblk, int b, int nq, tg_real *rb) {
    int R = pl->R;
    if (pl->relk)
        TG_GEMM(pl->bf16, false, true, nq, R, pl->d, pl->scale, qblk, (int)pl->vq.rs, pl->relk, pl->d, 0, rb, R);
    else
        memset(rb, 0, sizeof(tg_real) * (size_t)nq * R);
    if (pl->pbias) {
        const tg_real *t = pl->pbias + (size_t)(b % pl->heads) * R;
        for (int i = 0; i < nq; i++)
            for (int r = 0; r < R; r++) rb[(size_t)i * R + r] += t[r];
    }
}

/* s[j] += rb[r(o0 + j)] - m_h |o0 + j| for j < n: the position terms of one
 * row's visible scores, o0 the offset of the tile's first key. */
static void add_pos_row(const attention_state *pl, const tg_real *rb, int b, int64_t o0, int n, tg_real *s) {
    if (rb)
        for (int j = 0; j < n; j++) s[j] += rb[bucket_of(pl, o0 + j)];
    if (pl->slopes) {
        tg_real m = pl->slopes[b % pl->heads];
        for (int j = 0; j < n; j++) {
            int64_t o = o0 + j;
            s[j] -= m * (tg_real)(o < 0 ? -o : o);
        }
    }
}

/* acc[r(o0 + j)] += x[j] (z[j] when z) for j < n: one row summed per bucket. */
static void bucket_sum_row(const attention_state *pl, int64_t o0, const tg_real *x, const tg_real *z, int n,
                           tg_real *acc) {
    for (int j = 0; j < n; j++) acc[bucket_of(pl, o0 + j)] += z ? x[j] * z[j] : x[j];
}

/* Offset of key k0 from query row q0 + i. */
static inline int64_t offset0(const attention_state *pl, int k0, int q0, int i) {
    return (int64_t)k0 - ((int64_t)q0 + i + pl->qoff);
}

/* ---- forward ---------------------------------------------------------------- */

/* One (batch row b, query block qb): the online softmax over its key blocks. */
static void forward_block(const attention_state *pl, const tg_real *q, const tg_real *k, const tg_real *v, tg_real *out,
                          tg_real *lse, int b, int qb, tg_real *scratch, tg_real *opbuf) {
    int Q = pl->Q, K = pl->K, dv = pl->dv;
    int q0 = qb * BQ, nq = Q - q0 < BQ ? Q - q0 : BQ;
    tg_real *S = scratch, *zf = S + BQ * BK, *acc = zf + BQ * BK, *m = acc + (size_t)BQ * dv, *l = m + BQ;
    tg_real *rb = l + BQ, *wb = rb + (size_t)BQ * pl->R; /* per-bucket row bias, Shaw's summed weights */
    int64_t r0 = (int64_t)b * Q + q0;
    for (int i = 0; i < nq; i++) {
        m[i] = -INFINITY;
        l[i] = 0;
    }
    memset(acc, 0, sizeof(tg_real) * (size_t)nq * dv);
    int kend = pl->qblock_end[(int64_t)b * nblocks(Q, BQ) + qb];
    if (pl->rowbias) rowbias_block(pl, q + at(pl, &pl->vq, b, q0), b, nq, rb);
    if (pl->relv) memset(wb, 0, sizeof(tg_real) * (size_t)nq * pl->R);
    for (int k0 = 0; k0 < kend; k0 += BK) {
        int nk = K - k0 < BK ? K - k0 : BK;
        tile_ops ops = tile_operands(pl, q, k, v, NULL, b, q0, nq, k0, nk, opbuf);
        scores_tile(pl, &ops, S, nq, nk);
        if (pl->dropout) dropout_tile(pl, b, q0, nq, k0, nk, zf);
        for (int i = 0; i < nq; i++) {
            tg_real *s = S + (size_t)i * BK;
            int vis = visible_in_block(pl, r0 + i, k0, nk);
            if (vis == 0) { /* masked: exp(-1e6 - m) is 0 next to a visible key */
                memset(s, 0, sizeof(tg_real) * (size_t)nk);
                if (pl->probs) memset(pl->probs + (r0 + i) * K + k0, 0, sizeof(tg_real) * (size_t)nk);
                continue;
            }
            int n = vis < 0 ? nk : vis;
            if (vis < 0)
                for (int j = 0; j < nk; j++) s[j] = MASK_VALUE;
            else if (pl->has_pos)
                add_pos_row(pl, pl->rowbias ? rb + (size_t)i * pl->R : NULL, b, offset0(pl, k0, q0, i), n, s);
            tg_real mx = tg_k_max_row(s, n, m[i]);
            tg_real c = TG_M(exp)(m[i] - mx); /* exp(-inf) = 0 on the first block */
            tg_real sum = tg_k_exp_shift(s, n, mx);
            for (int j = n; j < nk; j++) s[j] = 0;
            l[i] = l[i] * c + sum;
            m[i] = mx;
            if (pl->probs) { /* one key block: the row's weights are final */
                tg_real *pr = pl->probs + (r0 + i) * K, inv = 1 / sum;
                for (int j = 0; j < nk; j++) pr[j] = s[j] * inv;
            }
            if (c != 1) {
                for (int t = 0; t < dv; t++) acc[(size_t)i * dv + t] *= c;
                if (pl->relv)
                    for (int r = 0; r < pl->R; r++) wb[(size_t)i * pl->R + r] *= c;
            }
            if (pl->dropout) tg_k_mul_row(s, zf + (size_t)i * BK, n);
            if (pl->relv) bucket_sum_row(pl, offset0(pl, k0, q0, i), s, NULL, n, wb + (size_t)i * pl->R);
        }
        /* P o Z/(1-p) rounded, the whole tile once its rows are made: a
         * row rounded as soon as it is written reads back stores that
         * have not retired (masked stores do not forward), which cost
         * more than the products (bench/measured.md, "Session 5"). */
        if (pl->round_ops) tg_k_attn_pack(nq, nk, S, BK, false, true, S, BK);
        mm_query_rows(&ops, nq, true, dv, nk, 1, S, BK, ops.v, ops.v16, ops.ldv, 1, acc, dv);
    }
    if (pl->relv) TG_GEMM(pl->bf16, false, false, nq, dv, pl->R, 1, wb, pl->R, pl->relv, dv, 1, acc, dv);
    for (int i = 0; i < nq; i++) {
        tg_real inv = 1 / l[i];
        tg_real *o = out + at(pl, &pl->vo, b, q0 + i);
        for (int t = 0; t < dv; t++) o[t] = acc[(size_t)i * dv + t] * inv;
        lse[r0 + i] = m[i] + TG_M(log)(l[i]);
    }
}

/* ---- backward --------------------------------------------------------------- */

typedef struct {
    const attention_state *pl;
    const tg_real *q, *k, *v, *dO, *lse, *D;
    /* The gradients of q, k and v are written (=), not added to: fresh
     * buffers (tg_grad_begin) whose every element this pass writes once
     * (grads_begin). */
    bool set_q, set_k, set_v;
    /* Per (b, query block) task of the dQ pass: the position tables'
     * gradient partials (R, R d, R dv reals each), or NULL. */
    tg_real *part_bias, *part_relk, *part_relv;
} attn_bwd;

/* The position rows of query block rows q0.. of batch row b: rb (bias per
 * bucket) and dOa = dO a^V^T (Shaw's value term in dP), each nq x R. */
static void pos_rows(const attn_bwd *w, int b, int q0, int nq, tg_real *rb, tg_real *dOa) {
    const attention_state *pl = w->pl;
    if (pl->rowbias) rowbias_block(pl, w->q + at(pl, &pl->vq, b, q0), b, nq, rb);
    if (pl->relv)
        TG_GEMM(pl->bf16, false, true, nq, pl->R, pl->dv, 1, w->dO + at(pl, &pl->vo, b, q0), (int)pl->vo.rs, pl->relv,
                pl->dv, 0, dOa, pl->R);
}

/* One tile, rows q0.. x keys k0.. of batch row b: its operands in *ops
 * (opbuf), P (recomputed from L) in P, the dropout factors Z/(1-p) in zf;
 * with dv_acc, dV_blk += (P o zf)^T dO (dP as scratch); then dS = P o (dP o
 * zf - D) in P, 0 where masked. Returns dS as the products take it: P, or
 * under bf16 a rounded copy in dP. */
static const tg_real *tile_backward(const attn_bwd *w, int b, int q0, int nq, int k0, int nk, tg_real *P, tg_real *zf,
                                    tg_real *dP, tg_real *dv_acc, const tg_real *rb, const tg_real *dOa,
                                    tg_real *gv_bucket, tg_real *opbuf, tile_ops *ops) {
    const attention_state *pl = w->pl;
    int Q = pl->Q, K = pl->K;
    int64_t r0 = (int64_t)b * Q + q0;
    *ops = tile_operands(pl, w->q, w->k, w->v, w->dO, b, q0, nq, k0, nk, opbuf);
    if (pl->dropout) dropout_tile(pl, b, q0, nq, k0, nk, zf);
    if (pl->probs) /* kept by the forward (one block): no recomputing */
        for (int i = 0; i < nq; i++) memcpy(P + (size_t)i * BK, pl->probs + (r0 + i) * K + k0, sizeof(tg_real) * nk);
    else
        scores_tile(pl, ops, P, nq, nk);
    for (int i = 0; !pl->probs && i < nq; i++) {
        tg_real *p = P + (size_t)i * BK;
        int vis = visible_in_block(pl, r0 + i, k0, nk);
        if (vis < 0) { /* no visible key: uniform, exp(0) / K as masked_softmax */
            for (int j = 0; j < nk; j++) p[j] = (tg_real)1 / (tg_real)K;
            continue;
        }
        tg_real L = w->lse[r0 + i];
        if (pl->has_pos)
            add_pos_row(pl, pl->rowbias ? rb + (size_t)i * pl->R : NULL, b, offset0(pl, k0, q0, i), vis, p);
        tg_k_exp_shift(p, vis, L);
        for (int j = vis; j < nk; j++) p[j] = 0;
    }
    if (dv_acc) { /* dV += (P o Z/(1-p))^T dO */
        const tg_real *pd = P;
        if (pl->dropout || pl->round_ops) {
            for (int i = 0; i < nq; i++) { /* row by row: each rounded while in L1 */
                tg_real *r = dP + (size_t)i * BK;
                if (!pl->dropout) {
                    tg_k_attn_pack(1, nk, P + (size_t)i * BK, 0, false, true, r, nk);
                    continue;
                }
                memcpy(r, P + (size_t)i * BK, sizeof(tg_real) * (size_t)nk);
                tg_k_mul_row(r, zf + (size_t)i * BK, nk);
                if (pl->round_ops) tg_k_attn_pack(1, nk, r, 0, false, true, r, nk);
            }
            pd = dP;
        }
        mm_key_rows(ops, nk, nq, pl->dv, 1, pd, ops->dO, NULL, ops->ldo, dv_acc, pl->dv);
    }
    if (gv_bucket) /* G' += P o Z/(1-p) summed per bucket */
        for (int i = 0; i < nq; i++)
            bucket_sum_row(pl, offset0(pl, k0, q0, i), P + (size_t)i * BK, pl->dropout ? zf + (size_t)i * BK : NULL, nk,
                           gv_bucket + (size_t)i * pl->R);
    /* dP = dO (v + a^V)^T o Z/(1-p);  dS = P o (dP - D) */
    mm_transposed(ops, nq, nk, pl->dv, 1, ops->dO, NULL, ops->ldo, ops->vt, ops->v, ops->v16, ops->ldv, dP);
    if (pl->relv)
        for (int i = 0; i < nq; i++) {
            tg_real *dp = dP + (size_t)i * BK;
            const tg_real *a = dOa + (size_t)i * pl->R;
            int64_t o0 = offset0(pl, k0, q0, i);
            for (int j = 0; j < nk; j++) dp[j] += a[bucket_of(pl, o0 + j)];
        }
    for (int i = 0; i < nq; i++) {
        tg_real *p = P + (size_t)i * BK, *dp = dP + (size_t)i * BK, *z = zf + (size_t)i * BK;
        int vis = visible_in_block(pl, r0 + i, k0, nk);
        if (vis < 0) vis = 0; /* all masked: constant scores, no gradient */
        tg_real Di = w->D[r0 + i];
        tg_k_attention_ds_row(p, dp, pl->dropout ? z : NULL, Di, vis);
        for (int j = vis; j < nk; j++) p[j] = 0;
    }
    if (pl->round_ops) /* dS rounded into dP, the tile at once (as P in forward_block) */
        tg_k_attn_pack(nq, nk, P, BK, false, true, dP, BK);
    return pl->round_ops ? dP : P;
}

/* g's rows i0 .. i0 + n - 1 of entry b (view v) += acc's rows (width
 * apart): a task's finished sums added to the gradient; nothing if g is
 * NULL. set: g is a fresh buffer (attn_bwd), written with acc + 0, the
 * bits of adding acc to a zeroed one (+0 + -0 is +0), without the zeroing
 * pass over g and without reading g back: tg_k_attn_store_rows writes
 * whole lines with streaming stores (the rows are strided through the
 * fused projection's gradient, a line read from memory per row for a
 * plain store; bench/measured.md, "Session 8"). */
static void add_rows(const attention_state *pl, const attn_view *v, int b, int i0, int n, int width, const tg_real *acc,
                     tg_real *g, bool set) {
    if (g) tg_k_attn_store_rows(n, width, acc, g + at(pl, v, b, i0), v->rs, set);
}

/* dQ of query block (b, qb), over the key blocks its rows may see. */
static void backward_dq(const attn_bwd *w, tg_real *gq, int b, int qb, tg_real *scratch, tg_real *opbuf) {
    const attention_state *pl = w->pl;
    int Q = pl->Q, K = pl->K, d = pl->d, nqb = nblocks(Q, BQ);
    int q0 = qb * BQ, nq = Q - q0 < BQ ? Q - q0 : BQ;
    int R = pl->R;
    tg_real *P = scratch, *zf = P + BQ * BK, *dP = zf + BQ * BK, *acc = dP + BQ * BK;
    tg_real *rb = acc + (size_t)BK * (d + pl->dv), *dOa = rb + (size_t)BQ * R, *G = dOa + (size_t)BQ * R;
    tg_real *Gv = G + (size_t)BQ * R;
    bool want_G = w->part_bias || w->part_relk || (gq && pl->relk);
    memset(acc, 0, sizeof(tg_real) * (size_t)nq * d);
    if (want_G) memset(G, 0, sizeof(tg_real) * (size_t)nq * R);
    if (w->part_relv) memset(Gv, 0, sizeof(tg_real) * (size_t)nq * R);
    if (pl->has_pos) pos_rows(w, b, q0, nq, rb, dOa);
    int kend = pl->qblock_end[(int64_t)b * nqb + qb];
    for (int k0 = 0; k0 < kend; k0 += BK) {
        int nk = K - k0 < BK ? K - k0 : BK;
        tile_ops ops;
        const tg_real *dS =
            tile_backward(w, b, q0, nq, k0, nk, P, zf, dP, NULL, rb, dOa, w->part_relv ? Gv : NULL, opbuf, &ops);
        if (gq) mm_query_rows(&ops, nq, true, d, nk, pl->scale, dS, BK, ops.k, ops.k16, ops.ldk, 1, acc, d);
        if (want_G) /* G += dS summed per bucket (0 where masked) */
            for (int i = 0; i < nq; i++)
                bucket_sum_row(pl, offset0(pl, k0, q0, i), P + (size_t)i * BK, NULL, nk, G + (size_t)i * R);
    }
    int64_t task = (int64_t)b * nqb + qb;
    /* q's rows: only with position terms, where q is never read as bf16 (reads_bf16) */
    const tg_real *qblk = pl->has_pos ? w->q + at(pl, &pl->vq, b, q0) : NULL, *dOblk = w->dO + at(pl, &pl->vo, b, q0);
    if (gq) {
        if (pl->relk) TG_GEMM(pl->bf16, false, false, nq, d, R, pl->scale, G, R, pl->relk, d, 1, acc, d);
        add_rows(pl, &pl->gvq, b, q0, nq, d, acc, gq, w->set_q);
    }
    if (w->part_bias) {
        tg_real *pb = w->part_bias + task * R;
        memset(pb, 0, sizeof(tg_real) * (size_t)R);
        for (int i = 0; i < nq; i++)
            for (int r = 0; r < R; r++) pb[r] += G[(size_t)i * R + r];
    }
    if (w->part_relk)
        TG_GEMM(pl->bf16, true, false, R, d, nq, pl->scale, G, R, qblk, (int)pl->vq.rs, 0, w->part_relk + task * R * d,
                d);
    if (w->part_relv)
        TG_GEMM(pl->bf16, true, false, R, pl->dv, nq, 1, Gv, R, dOblk, (int)pl->vo.rs, 0,
                w->part_relv + task * R * pl->dv, pl->dv);
}

/* dK and dV of key block (b, kb), over the query blocks that see it. */
static void backward_dkv(const attn_bwd *w, tg_real *gk, tg_real *gv, int b, int kb, tg_real *scratch, tg_real *opbuf) {
    const attention_state *pl = w->pl;
    int Q = pl->Q, K = pl->K, d = pl->d, dv = pl->dv, nqb = nblocks(Q, BQ);
    int k0 = kb * BK, nk = K - k0 < BK ? K - k0 : BK;
    tg_real *P = scratch, *zf = P + BQ * BK, *dP = zf + BQ * BK, *acc_k = dP + BQ * BK;
    tg_real *acc_v = acc_k + (size_t)nk * d;
    tg_real *rb = acc_k + (size_t)BK * (d + dv), *dOa = rb + (size_t)BQ * pl->R;
    memset(acc_k, 0, sizeof(tg_real) * (size_t)nk * (d + dv));
    for (int qb = 0; qb < nqb; qb++) {
        if (k0 >= pl->qblock_end[(int64_t)b * nqb + qb]) continue; /* no row of it sees these keys */
        int q0 = qb * BQ, nq = Q - q0 < BQ ? Q - q0 : BQ;
        if (pl->has_pos) pos_rows(w, b, q0, nq, rb, dOa);
        tile_ops ops;
        const tg_real *dS =
            tile_backward(w, b, q0, nq, k0, nk, P, zf, dP, gv ? acc_v : NULL, rb, dOa, NULL, opbuf, &ops);
        if (gk) mm_key_rows(&ops, nk, nq, d, pl->scale, dS, ops.q, ops.q16, ops.ldq, acc_k, d);
    }
    add_rows(pl, &pl->gvk, b, k0, nk, d, acc_k, gk, w->set_k);
    add_rows(pl, &pl->gvv, b, k0, nk, dv, acc_v, gv, w->set_v);
}

/* dQ, dK and dV of head-batch entry b when its queries and keys are one
 * block each (Q, K <= 64: gpt-mini's T 64, the toy's 16) and no table
 * needs G: the one tile recomputed once, not once per pass. The task owns
 * the entry's rows of all three gradients. */
static void backward_single(const attn_bwd *w, tg_real *gq, tg_real *gk, tg_real *gv, int b, tg_real *scratch,
                            tg_real *opbuf) {
    const attention_state *pl = w->pl;
    int Q = pl->Q, K = pl->K, d = pl->d, dv = pl->dv;
    tg_real *P = scratch, *zf = P + BQ * BK, *dP = zf + BQ * BK, *acc_k = dP + BQ * BK, *acc_v = acc_k + (size_t)K * d;
    tg_real *rb = acc_k + (size_t)BK * (d + dv), *dOa = rb + (size_t)BQ * pl->R;
    tg_real *acc_q = dOa + 3 * (size_t)BQ * pl->R; /* past the pass scratch (backward_dq's G, Gv) */
    if (pl->has_pos) pos_rows(w, b, 0, Q, rb, dOa);
    memset(acc_v, 0, sizeof(tg_real) * (size_t)K * dv);
    tile_ops ops;
    const tg_real *dS = tile_backward(w, b, 0, Q, 0, K, P, zf, dP, gv ? acc_v : NULL, rb, dOa, NULL, opbuf, &ops);
    if (gq) {
        if (pl->amx)
            amx_mm(false, false, Q, d, K, pl->scale, dS, NULL, BK, ops.k, ops.k16, ops.ldk, 0, acc_q, d);
        else
            whole_tile_mm(false, false, Q, d, K, pl->scale, dS, BK, ops.k, ops.ldk, 0, acc_q, d);
        add_rows(pl, &pl->gvq, b, 0, Q, d, acc_q, gq, w->set_q);
    }
    if (gk) {
        if (pl->amx)
            amx_mm(true, false, K, d, Q, pl->scale, dS, NULL, BK, ops.q, ops.q16, ops.ldq, 0, acc_k, d);
        else
            whole_tile_mm(true, false, K, d, Q, pl->scale, dS, BK, ops.q, ops.ldq, 0, acc_k, d);
    }
    add_rows(pl, &pl->gvk, b, 0, K, d, acc_k, gk, w->set_k);
    add_rows(pl, &pl->gvv, b, 0, K, dv, acc_v, gv, w->set_v);
}

/* dQ, dK and dV of head-batch entry b in one task, without position
 * terms: each tile's P, dP and dS made once, where the two passes make
 * them twice. The sums are the passes': dQ of a query block over its key
 * blocks in order, dK and dV of a key block over the query blocks that
 * see it in order (query blocks outer), each from zero, then added to the
 * gradient: the same bits, whichever runs. acc_kv holds K (d + dv) reals. */
static void backward_entry(const attn_bwd *w, tg_real *gq, tg_real *gk, tg_real *gv, int b, tg_real *scratch,
                           tg_real *opbuf, tg_real *acc_kv) {
    const attention_state *pl = w->pl;
    int Q = pl->Q, K = pl->K, d = pl->d, dv = pl->dv, nqb = nblocks(Q, BQ);
    tg_real *P = scratch, *zf = P + BQ * BK, *dP = zf + BQ * BK, *acc_q = dP + BQ * BK;
    tg_real *acc_k = acc_kv, *acc_v = acc_k + (size_t)K * d;
    memset(acc_kv, 0, sizeof(tg_real) * (size_t)K * (d + dv));
    for (int qb = 0; qb < nqb; qb++) {
        int q0 = qb * BQ, nq = Q - q0 < BQ ? Q - q0 : BQ, kend = pl->qblock_end[(int64_t)b * nqb + qb];
        memset(acc_q, 0, sizeof(tg_real) * (size_t)nq * d);
        for (int k0 = 0; k0 < kend; k0 += BK) {
            int nk = K - k0 < BK ? K - k0 : BK;
            tile_ops ops;
            const tg_real *dS = tile_backward(w, b, q0, nq, k0, nk, P, zf, dP, gv ? acc_v + (size_t)k0 * dv : NULL,
                                              NULL, NULL, NULL, opbuf, &ops);
            if (gq) mm_query_rows(&ops, nq, true, d, nk, pl->scale, dS, BK, ops.k, ops.k16, ops.ldk, 1, acc_q, d);
            if (gk) mm_key_rows(&ops, nk, nq, d, pl->scale, dS, ops.q, ops.q16, ops.ldq, acc_k + (size_t)k0 * d, d);
        }
        add_rows(pl, &pl->gvq, b, q0, nq, d, acc_q, gq, w->set_q);
    }
    add_rows(pl, &pl->gvk, b, 0, K, d, acc_k, gk, w->set_k);
    add_rows(pl, &pl->gvv, b, 0, K, dv, acc_v, gv, w->set_v);
}

/* What the backward's loops share (attention_backward). */
typedef struct {
    const attn_bwd *w;
    const tg_real *dO, *O;
    tg_real *D, *scratch, *gq, *gk, *gv;
    size_t per_thread, kv_per_thread; /* reals: the scratch, and (whole entries) the key blocks' accumulators */
    int dv, nqb, nkb, nth;
} backward_ctx;

/* Thread tid's scratch, and at its end its operand buffers (ops_reals),
 * after its widened rows (io_reals) under bf16 storage. */
static tg_real *thread_scratch(const backward_ctx *c, int tid) { return c->scratch + c->per_thread * (size_t)tid; }
static tg_real *thread_opbuf(const backward_ctx *c, int tid) {
    return thread_scratch(c, tid) + c->per_thread - ops_reals(c->w->pl, true);
}

/* The operands of a task on entry b that reads its queries [q0, q1) and
 * keys [k0, k1): c's own, or under bf16 storage or round_ops the rows
 * copied into thread tid's scratch, read through *lw (wd holds them);
 * under round_ops dO's rows [q0, q1) too, rounded (D_rows reads c's own,
 * as the composite's softmax backward reads the unrounded dO). */
static const attn_bwd *task_operands(const backward_ctx *c, int tid, int b, int q0, int q1, int k0, int k1, widened *wd,
                                     attn_bwd *lw) {
    const attention_state *pl = c->w->pl;
    if (!copies_rows(pl)) return c->w;
    tg_real *after = widen_entry(pl, b, q0, q1, k0, k1, thread_opbuf(c, tid) - io_reals(pl, true), wd);
    *lw = *c->w;
    lw->pl = &wd->pl, lw->q = wd->q, lw->k = wd->k, lw->v = wd->v;
    if (pl->round_ops) {
        lw->dO = after;
        widen_rows(pl, &wd->pl.vo, NULL, c->dO, b, q0, q1, pl->dv, after);
    }
    return lw;
}

/* D_r = sum_c dO_rc O_rc of rows [begin, end) of the B Q (O as stored:
 * under bf16 storage its rounded values, "bf16 storage" above), an
 * entry's rows at a time (tg_k_attn_row_dots: rows a constant stride
 * apart, each summed in c order). */
static void D_rows(const backward_ctx *c, int64_t begin, int64_t end) {
    const attention_state *pl = c->w->pl;
    for (int64_t r = begin; r < end;) {
        int b = (int)(r / pl->Q), i = (int)(r % pl->Q);
        int n = end - r < pl->Q - i ? (int)(end - r) : pl->Q - i;
        int64_t o = at(pl, &pl->vo, b, i);
        tg_k_attn_row_dots(n, c->dv, c->dO + o, pl->vo.rs, pl->io_bf16 ? NULL : c->O + o,
                           pl->io_bf16 ? pl->out16 + o : NULL, pl->vo.rs, c->D + r);
        r += n;
    }
}

static void backward_D_rows(void *ctx, int64_t begin, int64_t end, int tid) {
    (void)tid;
    D_rows(ctx, begin, end);
}

/* The passes that read D first compute it for the rows they own (entry t,
 * or query block t): D was a job of its own before them, one more
 * hand-over. A row's D is the same loop wherever it runs. */
static void backward_single_tasks(void *ctx, int64_t begin, int64_t end, int tid) {
    const backward_ctx *c = ctx;
    int Q = c->w->pl->Q;
    for (int t = (int)begin; t < (int)end; t++) {
        D_rows(c, (int64_t)t * Q, (int64_t)(t + 1) * Q);
        widened wd;
        attn_bwd lw;
        const attn_bwd *w = task_operands(c, tid, t, 0, Q, 0, c->w->pl->K, &wd, &lw);
        backward_single(w, c->gq, c->gk, c->gv, t, thread_scratch(c, tid), thread_opbuf(c, tid));
    }
}

/* Whole entries (backward_entry), D first for the entry's rows; the key
 * blocks' accumulators after the thread's scratch and operand buffers. */
static void backward_entry_tasks(void *ctx, int64_t begin, int64_t end, int tid) {
    const backward_ctx *c = ctx;
    int Q = c->w->pl->Q;
    tg_real *acc_kv = c->scratch + c->per_thread * (size_t)c->nth + c->kv_per_thread * (size_t)tid;
    for (int t = (int)begin; t < (int)end; t++) {
        D_rows(c, (int64_t)t * Q, (int64_t)(t + 1) * Q);
        widened wd;
        attn_bwd lw;
        const attn_bwd *w = task_operands(c, tid, t, 0, Q, 0, c->w->pl->K, &wd, &lw);
        backward_entry(w, c->gq, c->gk, c->gv, t, thread_scratch(c, tid), thread_opbuf(c, tid), acc_kv);
    }
}

static void backward_dq_tasks(void *ctx, int64_t begin, int64_t end, int tid) {
    const backward_ctx *c = ctx;
    int Q = c->w->pl->Q;
    for (int t = (int)begin; t < (int)end; t++) {
        int64_t r0 = (int64_t)(t / c->nqb) * Q + (int64_t)(t % c->nqb) * BQ;
        int64_t r1 = (t % c->nqb + 1) * BQ < Q ? r0 + BQ : (int64_t)(t / c->nqb + 1) * Q;
        D_rows(c, r0, r1);
        int b = t / c->nqb, qb = t % c->nqb, q0 = qb * BQ;
        widened wd;
        attn_bwd lw;
        const attn_bwd *w = task_operands(c, tid, b, q0, q0 + (int)(r1 - r0), 0, keys_read(c->w->pl, b, qb), &wd, &lw);
        backward_dq(w, c->gq, b, qb, thread_scratch(c, tid), thread_opbuf(c, tid));
    }
}

static void backward_dkv_tasks(void *ctx, int64_t begin, int64_t end, int tid) {
    const backward_ctx *c = ctx;
    for (int t = (int)begin; t < (int)end; t++) {
        int b = t / c->nkb, k0 = t % c->nkb * BK, k1 = k0 + BK < c->w->pl->K ? k0 + BK : c->w->pl->K;
        widened wd;
        attn_bwd lw;
        const attn_bwd *w = task_operands(c, tid, b, 0, c->w->pl->Q, k0, k1, &wd, &lw);
        backward_dkv(w, c->gk, c->gv, b, t % c->nkb, thread_scratch(c, tid), thread_opbuf(c, tid));
    }
}

/* ---- short sequences -----------------------------------------------------------
 * K <= TG_ATT_SHORT_MAX keys, no position terms (bf16 products too): one call of
 * kernels_attention.c per head-batch entry (the header comment). */

/* Entry b's operands (the kernels' view of attn_view). */
static tg_attn_entry short_entry(const attention_state *pl, const tg_real *q, const tg_real *k, const tg_real *v,
                                 int b) {
    return (tg_attn_entry){pl->Q,
                           pl->K,
                           pl->d,
                           pl->dv,
                           pl->scale,
                           q + at(pl, &pl->vq, b, 0),
                           k + at(pl, &pl->vk, b, 0),
                           v + at(pl, &pl->vv, b, 0),
                           pl->vq.rs,
                           pl->vk.rs,
                           pl->vv.rs,
                           pl->vo.rs,
                           pl->lim + (int64_t)b * pl->Q,
                           pl->round_ops,
                           0,
                           0,
                           0,
                           false,
                           false,
                           false};
}

/* Entries per task: enough work that a task is not mostly overhead. */
static int short_group(const attention_state *pl) {
    int64_t work = (int64_t)pl->Q * pl->K * (pl->d + pl->dv);
    int64_t g = work > 0 ? 32768 / work : 1;
    return g < 1 ? 1 : (int)g;
}

typedef struct {
    const attention_state *pl;
    const tg_real *q, *k, *v, *dO;
    tg_real *out, *gq, *gk, *gv, *scratch;
    bool set_q, set_k, set_v; /* the gradients fresh (attn_bwd) */
    size_t per_thread;
    int group;
} short_ctx;

/* zf = the dropout factors of entry b (Q x K, rows KP apart, zeros past
 * K): its counters are one run, first + b Q K + i K + j. */
static void short_dropout(const attention_state *pl, int b, int KP, tg_real *zf) {
    int Q = pl->Q, K = pl->K;
    uint64_t first = pl->first + (uint64_t)b * (uint64_t)Q * (uint64_t)K;
    if (KP == K) {
        tg_dropout_mask_row(&pl->mask, first, (int64_t)Q * K, zf);
        return;
    }
    for (int i = 0; i < Q; i++) {
        tg_dropout_mask_row(&pl->mask, first + (uint64_t)i * (uint64_t)K, K, zf + (size_t)i * KP);
        for (int j = K; j < KP; j++) zf[(size_t)i * KP + j] = 0;
    }
}

/* Entry b of short_tasks under bf16 storage or round_ops: its rows
 * widened (or rounded) into io; the forward's out rows after them
 * (rounded into out) under bf16 storage, else written to out; the
 * backward's dO rows after them, rounded, under round_ops. The kernel
 * adds its gradients in place (e.gqs, gks, gvs), as on uncopied rows. */
static void short_entry_copied(const short_ctx *c, int b, const tg_real *zf, tg_real *work, tg_real *io) {
    const attention_state *pl = c->pl;
    int Q = pl->Q, K = pl->K, dv = pl->dv;
    int64_t QKP = (int64_t)Q * tg_k_attention_short_stride(K);
    widened w;
    tg_real *after = widen_entry(pl, b, 0, Q, 0, K, io, &w);
    if (!c->dO) {
        tg_real *out = c->out + at(pl, &pl->vo, b, 0);
        if (pl->io_bf16) w.pl.vo = (attn_view){0, 0, 0, dv}, out = after; /* out's rows in `after` */
        tg_attn_entry e = short_entry(&w.pl, w.q, w.k, w.v, b);
        tg_k_attention_short_forward(&e, pl->dropout ? zf : NULL, out, pl->probs ? pl->probs + b * QKP : NULL, work);
        if (pl->io_bf16) round_rows(pl, b, 0, Q, after);
        return;
    }
    const tg_real *dO = c->dO + at(pl, &pl->vo, b, 0); /* dO's rows: vo as given */
    if (pl->round_ops) {
        dO = after;
        after = widen_rows(pl, &w.pl.vo, NULL, c->dO, b, 0, Q, dv, after);
    }
    tg_attn_entry e = short_entry(&w.pl, w.q, w.k, w.v, b);
    e.gqs = pl->gvq.rs, e.gks = pl->gvk.rs, e.gvs = pl->gvv.rs; /* the gradients in place */
    e.fresh_gq = c->set_q, e.fresh_gk = c->set_k, e.fresh_gv = c->set_v;
    tg_k_attention_short_backward(
        &e, pl->probs + b * QKP, pl->dropout ? zf : NULL, dO, c->gq ? c->gq + at(pl, &pl->gvq, b, 0) : NULL,
        c->gk ? c->gk + at(pl, &pl->gvk, b, 0) : NULL, c->gv ? c->gv + at(pl, &pl->gvv, b, 0) : NULL, work);
}

/* Tasks [begin, end) of `group` entries each: entries [begin group, end
 * group), forward or (dO set) backward. */
static void short_tasks(void *ctx, int64_t begin, int64_t end, int tid) {
    const short_ctx *c = ctx;
    const attention_state *pl = c->pl;
    int KP = tg_k_attention_short_stride(pl->K);
    int64_t QKP = (int64_t)pl->Q * KP;
    tg_real *zf = c->scratch + c->per_thread * (size_t)tid, *work = zf + QKP;
    tg_real *io = c->scratch + c->per_thread * (size_t)(tid + 1) - io_reals(pl, c->dO != NULL);
    for (int b = (int)(begin * c->group); b < pl->B && b < end * c->group; b++) {
        int64_t o = at(pl, &pl->vo, b, 0);
        if (pl->dropout) short_dropout(pl, b, KP, zf); /* the backward draws the forward's mask again */
        if (copies_rows(pl)) {
            short_entry_copied(c, b, zf, work, io);
            continue;
        }
        tg_attn_entry e = short_entry(pl, c->q, c->k, c->v, b);
        e.fresh_gq = c->set_q, e.fresh_gk = c->set_k, e.fresh_gv = c->set_v;
        if (!c->dO) {
            tg_k_attention_short_forward(&e, pl->dropout ? zf : NULL, c->out + o,
                                         pl->probs ? pl->probs + b * QKP : NULL, work);
            continue;
        }
        tg_k_attention_short_backward(
            &e, pl->probs + b * QKP, pl->dropout ? zf : NULL, c->dO + o, c->gq ? c->gq + at(pl, &pl->gvq, b, 0) : NULL,
            c->gk ? c->gk + at(pl, &pl->gvk, b, 0) : NULL, c->gv ? c->gv + at(pl, &pl->gvv, b, 0) : NULL, work);
    }
}

/* Tasks of groups of entries, on a thread team when the whole is worth it. */
static void short_run(const attention_state *pl, short_ctx *c, int nth) {
    c->group = short_group(pl);
    int64_t tasks = (pl->B + c->group - 1) / c->group;
    bool big = (double)pl->B * pl->Q * pl->K * (pl->d + pl->dv) > 65536;
    tg_parallel_tasks_at_most(tasks, big && tasks > 1 ? nth : 1, short_tasks, c);
}

/* The gradients of q, k and v (qkv[i]; the fused projection is one tensor
 * three times) into g[i]: a fresh, unzeroed buffer (tg_grad_begin) with
 * set[i] when the tile passes will write each of its elements once (its
 * size is the rows of the op's views, its tensor is no other operand's);
 * else one zeroed, added to. */
static void grads_begin(const attention_state *pl, tg_tensor *const *qkv, tg_tensor **g, bool *set) {
    const int64_t B = pl->B, Q = pl->Q, K = pl->K, d = pl->d, dv = pl->dv, rows[3] = {Q * d, K * d, K * dv};
    for (int i = 0; i < 3; i++) {
        bool fresh = false, alone = pl->n_qkv == 3 && qkv[i] != qkv[(i + 1) % 3] && qkv[i] != qkv[(i + 2) % 3];
        if (pl->n_qkv == 1 && i > 0) { /* the one tensor's, begun at i = 0 */
            g[i] = g[0], set[i] = set[0];
            continue;
        }
        g[i] = alone || pl->n_qkv == 1 ? tg_grad_begin(qkv[i], &fresh) : tg_grad_of(qkv[i]);
        int64_t written = pl->n_qkv == 1 ? B * (rows[0] + rows[1] + rows[2]) : B * rows[i];
        set[i] = fresh && Q > 0 && K > 0 && g[i]->size == written;
        if (fresh && !set[i]) memset(g[i]->data, 0, sizeof(tg_real) * (size_t)g[i]->size);
    }
}

/* The fresh gradients zeroed after all, when the passes cannot run (out of
 * memory for their scratch: the error is recorded): no garbage left. */
static void grads_unset(tg_tensor **g, bool *set) {
    for (int i = 0; i < 3; i++)
        if (set[i] && (i == 0 || g[i] != g[0])) memset(g[i]->data, 0, sizeof(tg_real) * (size_t)g[i]->size);
}

/* Its temporaries (D, the threads' scratch, the tables' partials) are
 * backward scratch: the next rule reuses them once this one returns. */
static void attention_backward(tg_node *n) {
    const attention_state *pl = n->state;
    /* The fused projection is one input: its gradient holds q's, k's and v's columns. */
    tg_tensor *const *qkv = pl->n_qkv == 3 ? n->in : (tg_tensor *const[]){n->in[0], n->in[0], n->in[0]};
    tg_tensor *g[3];
    bool set[3];
    grads_begin(pl, qkv, g, set);
    tg_tensor *gq = g[0], *gk = g[1], *gv = g[2];
    tg_tensor *gbias = pl->i_bias >= 0 ? tg_grad_of(n->in[pl->i_bias]) : NULL;
    tg_tensor *grelk = pl->i_relk >= 0 ? tg_grad_of(n->in[pl->i_relk]) : NULL;
    tg_tensor *grelv = pl->i_relv >= 0 ? tg_grad_of(n->in[pl->i_relv]) : NULL;
    bool gpos = gbias || grelk || grelv;
    if (!gq && !gk && !gv && !gpos) return;
    if (pl->short_seq) {
        int nth = tg_get_num_threads();
        size_t per_thread = (size_t)pl->Q * tg_k_attention_short_stride(pl->K) +
                            tg_k_attention_short_scratch(pl->Q, pl->K, pl->d, pl->dv) + io_reals(pl, true);
        tg_real *scratch = tg_backward_scratch(sizeof(tg_real) * per_thread * (size_t)nth);
        if (!scratch) {
            grads_unset(g, set);
            return;
        }
        short_ctx c = {.pl = pl,
                       .q = qkv[0]->data,
                       .k = qkv[1]->data,
                       .v = qkv[2]->data,
                       .dO = n->out->grad->data,
                       .gq = gq ? gq->data : NULL,
                       .gk = gk ? gk->data : NULL,
                       .gv = gv ? gv->data : NULL,
                       .scratch = scratch,
                       .set_q = set[0],
                       .set_k = set[1],
                       .set_v = set[2],
                       .per_thread = per_thread};
        short_run(pl, &c, nth);
        return;
    }
    int B = pl->B, Q = pl->Q, K = pl->K, d = pl->d, dv = pl->dv, R = pl->R;
    int64_t rows = (int64_t)B * Q;
    if (rows == 0) return;
    const tg_real *dO = n->out->grad->data, *O = n->out->data;
    tg_real *D = tg_backward_scratch(sizeof(tg_real) * (size_t)rows);
    bool single = Q <= BQ && K <= BK && !gpos && !pl->relk && !pl->relv; /* one tile per entry (backward_single) */
    /* The passes' scratch, backward_single's dQ rows past it, then the
     * widened rows (bf16 storage) and the operand buffers. */
    size_t per_thread = 3 * BQ * BK + (size_t)BK * (d + dv) + 4 * (size_t)BQ * R + (single ? (size_t)BQ * d : 0) +
                        io_reals(pl, true) + ops_reals(pl, true);
    int nth = tg_get_num_threads();                 /* the tasks run on at most these: the scratch is theirs */
    bool big = (double)rows * K * (d + dv) > 65536; /* worth a thread team */
    /* Whole entries in one pass when there are enough of them to keep the
     * team busy (at most a fifth of its time idle): the same bits as the
     * two passes, less work. Their key blocks' accumulators, K (d + dv)
     * reals a thread, are bounded by WHOLE_MAX_K. */
    int team = big && B > 1 ? nth : 1;
    bool whole = !pl->has_pos && !(Q <= BQ && K <= BK) && K <= WHOLE_MAX_K &&
                 (int64_t)((B + team - 1) / team) * team * 4 <= (int64_t)B * 5;
    size_t kv_per_thread = whole ? (size_t)K * (d + dv) : 0;
    tg_real *scratch = D ? tg_backward_scratch(sizeof(tg_real) * (per_thread + kv_per_thread) * (size_t)nth) : NULL;
    if (!scratch) {
        grads_unset(g, set);
        return;
    }
    int64_t ntasks = (int64_t)B * nblocks(Q, BQ);
    attn_bwd w = {pl,     qkv[0]->data, qkv[1]->data, qkv[2]->data, dO,   pl->lse, D,
                  set[0], set[1],       set[2],       NULL,         NULL, NULL};
    if ((gbias && !(w.part_bias = tg_backward_scratch(sizeof(tg_real) * (size_t)(ntasks * R)))) ||
        (grelk && !(w.part_relk = tg_backward_scratch(sizeof(tg_real) * (size_t)(ntasks * R * d)))) ||
        (grelv && !(w.part_relv = tg_backward_scratch(sizeof(tg_real) * (size_t)(ntasks * R * dv))))) {
        grads_unset(g, set);
        return;
    }
    backward_ctx c = {&w,
                      dO,
                      O,
                      D,
                      scratch,
                      gq ? gq->data : NULL,
                      gk ? gk->data : NULL,
                      gv ? gv->data : NULL,
                      per_thread,
                      kv_per_thread,
                      dv,
                      nblocks(Q, BQ),
                      nblocks(K, BK),
                      nth};
    if (single) { /* one tile per entry: one pass, D in its tasks */
        tg_parallel_tasks_at_most(B, team, backward_single_tasks, &c);
        return;
    }
    if (whole) {
        tg_parallel_tasks_at_most(B, team, backward_entry_tasks, &c);
        return;
    }
    /* Two passes, each writing rows only its task owns (and q, k, v may be
     * one tensor: the passes do not overlap in time). D = rowsum(dO o O) in
     * the first pass's tasks, or a job of its own when only k, v need it. */
    if (gq || gpos) {
        int nqb = nblocks(Q, BQ), tasks = B * nqb;
        tg_parallel_tasks_at_most(tasks, big && tasks > 1 ? nth : 1, backward_dq_tasks, &c);
    } else {
        tg_parallel_for_ns(rows, (double)(rows * dv) * 2 * TG_NS_STREAM, backward_D_rows, &c);
    }
    /* The tables' partials, summed in task order (deterministic). */
    for (int64_t t = 0; t < ntasks; t++) {
        if (gbias) {
            tg_real *g = gbias->data + (size_t)((t / nblocks(Q, BQ)) % pl->heads) * R;
            for (int r = 0; r < R; r++) g[r] += w.part_bias[t * R + r];
        }
        if (grelk)
            for (int64_t i = 0; i < (int64_t)R * d; i++) grelk->data[i] += w.part_relk[t * R * d + i];
        if (grelv)
            for (int64_t i = 0; i < (int64_t)R * dv; i++) grelv->data[i] += w.part_relv[t * R * dv + i];
    }
    if (gk || gv) {
        int nkb = nblocks(K, BK), tasks = B * nkb;
        tg_parallel_tasks_at_most(tasks, big && tasks > 1 ? nth : 1, backward_dkv_tasks, &c);
    }
}
const tg_op tg_op_attention = {"attention", attention_backward};

/* ---- the op ------------------------------------------------------------------- */

typedef struct {
    const attention_state *pl;
    const tg_real *q, *k, *v;
    tg_real *out, *lse, *scratch;
    size_t per_thread; /* reals: the block's scratch, then (bf16 storage) io_reals, then ops_reals */
    int nqb;
} forward_ctx;

static void forward_tasks(void *ctx, int64_t begin, int64_t end, int tid) {
    const forward_ctx *c = ctx;
    const attention_state *pl = c->pl;
    tg_real *opbuf = c->scratch + c->per_thread * (size_t)(tid + 1) - ops_reals(pl, false);
    for (int64_t t = begin; t < end; t++) {
        int b = (int)(t / c->nqb), qb = (int)(t % c->nqb);
        tg_real *scratch = c->scratch + c->per_thread * (size_t)tid;
        int q0 = qb * BQ, nq = pl->Q - q0 < BQ ? pl->Q - q0 : BQ;
        if (reads_bf16(pl)) { /* q, k, v read as stored; the block's rows of out in io, then rounded */
            tg_real *io = opbuf - io_reals(pl, false);
            attention_state w = *pl;
            w.vo = (attn_view){-(int64_t)q0 * pl->dv, 0, 0, pl->dv};
            forward_block(&w, NULL, NULL, NULL, io, c->lse, b, qb, scratch, opbuf);
            round_rows(pl, b, q0, nq, io);
            continue;
        }
        if (!copies_rows(pl)) {
            forward_block(pl, c->q, c->k, c->v, c->out, c->lse, b, qb, scratch, opbuf);
            continue;
        }
        /* The block's queries and the keys it reads widened (bf16 storage)
         * or rounded (round_ops); under bf16 storage its rows of out are
         * written after them (vo on them), then rounded. */
        tg_real *io = opbuf - io_reals(pl, false);
        widened w;
        tg_real *ob = widen_entry(pl, b, q0, q0 + nq, 0, keys_read(pl, b, qb), io, &w);
        if (!pl->io_bf16) {
            forward_block(&w.pl, w.q, w.k, w.v, c->out, c->lse, b, qb, scratch, opbuf);
            continue;
        }
        w.pl.vo = (attn_view){-(int64_t)q0 * pl->dv, 0, 0, pl->dv};
        forward_block(&w.pl, w.q, w.k, w.v, ob, c->lse, b, qb, scratch, opbuf);
        round_rows(pl, b, q0, nq, ob);
    }
}

/* Checks pos against pl's shapes (q, the tensor named in errors); fills
 * pl's position fields and appends the tables to in[] (n_in). */
static bool pos_setup(const tg_attn_pos *pos, const tg_tensor *q, attention_state *pl, tg_tensor **in, int *n_in) {
    char b1[64], b2[64];
    pl->heads = 1;
    pl->R = 1;
    pl->i_bias = pl->i_relk = pl->i_relv = -1;
    if (!pos) return true;
    int B = pl->B, d = pl->d, dv = pl->dv;
    int h = pos->heads == 0 ? 1 : pos->heads;
    if (h < 0 || B % h != 0) {
        tg_set_error("attention: q %s with %d heads: the batch must be a multiple of the heads", tg_tshape(b1, q),
                     pos->heads);
        return false;
    }
    if (!rel_bucket_check("attention", pos)) return false;
    int R = rel_bucket_count(pos);
    const struct {
        const tg_tensor *t;
        int rows, cols;
        const char *name;
    } tabs[3] = {{pos->bias, h, R, "bias"}, {pos->rel_k, R, d, "rel_k"}, {pos->rel_v, R, dv, "rel_v"}};
    for (int i = 0; i < 3; i++) {
        const tg_tensor *t = tabs[i].t;
        if (t && t->dtype != TG_DTYPE_REAL) {
            tg_set_error("attention: position %s %s is bf16; the tables are tg_real", tabs[i].name, tg_tshape(b2, t));
            return false;
        }
        if (t && (t->ndim != 2 || t->shape[0] != tabs[i].rows || t->shape[1] != tabs[i].cols)) {
            tg_set_error("attention: q %s, position %s %s: need (%d,%d) (%d buckets, %d heads)", tg_tshape(b1, q),
                         tabs[i].name, tg_tshape(b2, t), tabs[i].rows, tabs[i].cols, R, h);
            return false;
        }
    }
    pl->has_pos = pos->alibi || pos->bias || pos->rel_k || pos->rel_v;
    pl->rowbias = pos->bias || pos->rel_k;
    pl->heads = h;
    pl->qoff = pos->q_offset;
    pl->R = R;
    if (pl->has_pos && !(pl->bmap = rel_bucket_map(pos, pl->Q, pl->K, &pl->omin))) return false;
    if (pos->alibi) {
        tg_real *sl = tg_arena_alloc(sizeof(tg_real) * (size_t)h);
        if (!sl) return false;
        for (int i = 0; i < h; i++) {
            if (!isfinite((double)pos->alibi[i])) {
                tg_set_error("attention: ALiBi slope %g of head %d is not finite", (double)pos->alibi[i], i);
                return false;
            }
            sl[i] = pos->alibi[i];
        }
        pl->slopes = sl;
    }
    tg_tensor *const t3[3] = {pos->bias, pos->rel_k, pos->rel_v};
    int *idx[3] = {&pl->i_bias, &pl->i_relk, &pl->i_relv};
    const tg_real **data[3] = {&pl->pbias, &pl->relk, &pl->relv};
    for (int i = 0; i < 3; i++)
        if (t3[i]) {
            *idx[i] = *n_in;
            *data[i] = t3[i]->data;
            in[(*n_in)++] = t3[i];
        }
    return true;
}

/* The op for every layout. shape holds B (head-batch entries), Q, K, d, dv,
 * H, the views and n_qkv; in[0..n_qkv) the operands (in[0], "what", names
 * them in errors); the output is out_shape, written through shape->vo. */
/* The visible keys of every row (mask.h's mask_limits, kept for backward)
 * and the keys each query block must visit: up to the largest visible
 * prefix of its rows, all K when one of them sees none (it is uniform over
 * all keys). Split over the query blocks, each writing its own rows and its
 * own qend entry: B h Q rows (16384 at gpt-small) were a loop on one thread
 * before the blocks' tasks. */
#define NS_LIMIT_ROW 1.0 /* a row's count and max: a few compares and a store */
typedef struct {
    const tg_mask *mask;
    int *lim, *qend;
    int Q, K, nqb;
} limits_ctx;

static void limits_blocks(void *ctx, int64_t begin, int64_t end, int tid) {
    const limits_ctx *c = ctx;
    (void)tid;
    for (int64_t bq = begin; bq < end; bq++) {
        int b = (int)(bq / c->nqb), q0 = (int)(bq % c->nqb) * BQ, q1 = q0 + BQ < c->Q ? q0 + BQ : c->Q;
        int e = 0;
        for (int q = q0; q < q1; q++) {
            int L = mask_visible_count(c->mask, b, q, c->Q, c->K);
            c->lim[(int64_t)b * c->Q + q] = L;
            if (L == 0) L = c->K;
            if (L > e) e = L;
        }
        c->qend[bq] = e;
    }
}

static tg_tensor *attention_run(const attention_state *shape, tg_tensor **in, const char *what, int out_ndim,
                                const int *out_shape, tg_mask mask, tg_real dropout_p, tg_rng *rng,
                                const tg_attn_pos *pos) {
    char b1[64];
    int B = shape->B, Q = shape->Q, K = shape->K, d = shape->d, dv = shape->dv;
    if (d == 0) {
        tg_set_error("attention: %s %s: feature size 0", what, tg_tshape(b1, in[0]));
        return NULL;
    }
    /* The mask is checked against the scores' shape [B, Q, K], as masked_softmax does. */
    tg_tensor scores = {.ndim = 3, .shape = {B, Q, K}};
    if (!mask_check("attention", &scores, &mask)) return NULL;
    if (!tg_check_dropout("attention", dropout_p)) return NULL;
    /* p = 1 drops every weight: zeros, and zero gradients through the
     * scaling, as the stored path (tg_dropout draws nothing for p = 1). */
    if (dropout_p == 1) {
        tg_tensor *y = attention_run(shape, in, what, out_ndim, out_shape, mask, 0, NULL, pos);
        return shape->io_bf16 ? tg_to_bf16(tg_mul_scalar(tg_to_real(y), 0)) : tg_mul_scalar(y, 0);
    }
    if (dropout_p > 0 && !rng) {
        tg_set_error("attention: %s %s with dropout p = %g: NULL rng", what, tg_tshape(b1, in[0]), (double)dropout_p);
        return NULL;
    }
    attention_state *pl = tg_arena_alloc(sizeof *pl);
    tg_tensor *inputs[TG_NODE_MAX_INPUTS] = {in[0], in[1], in[2]};
    int n_in = shape->n_qkv;
    if (pl) *pl = *shape;
    if (pl && !pos_setup(pos, in[0], pl, inputs, &n_in)) return NULL;
    if (pl) {
        pl->gvq = pl->vq, pl->gvk = pl->vk, pl->gvv = pl->vv;
        tg_tensor *const *src = pl->n_qkv == 3 ? in : (tg_tensor *const[]){in[0], in[0], in[0]};
        pl->q16 = src[0]->bf16, pl->k16 = src[1]->bf16, pl->v16 = src[2]->bf16;
        if (!pl->io_bf16) pl->qr = src[0]->data, pl->kr = src[1]->data, pl->vr = src[2]->data;
    }
    int nqb = nblocks(Q, BQ);
    int64_t rows = (int64_t)B * Q, nqblocks = (int64_t)B * nqb;
    int *lim = pl ? tg_arena_alloc(sizeof(int) * (size_t)(rows ? rows : 1)) : NULL;
    int *qend = lim ? tg_arena_alloc(sizeof(int) * (size_t)(nqblocks ? nqblocks : 1)) : NULL;
    tg_tensor *out = !qend            ? NULL
                     : shape->io_bf16 ? tg__empty_bf16(out_ndim, out_shape)
                                      : tg_empty_arena(out_ndim, out_shape);
    tg_tensor *lse = out ? tg_empty_arena(TG_SHAPE(B, Q)) : NULL;
    if (!lse) return NULL;
    limits_ctx lc = {&mask, lim, qend, Q, K, nqb};
    tg_parallel_for_ns(nqblocks, (double)rows * NS_LIMIT_ROW, limits_blocks, &lc);
    pl->scale = (tg_real)(1.0 / sqrt((double)d));
    pl->bf16 = tg_prec_bf16();
    pl->dropout = dropout_p > 0;
    pl->lim = lim, pl->qblock_end = qend, pl->lse = lse->data, pl->out16 = out->bf16;
    /* Short sequences keep their weights, B Q K <= 64 B Q reals (rows
     * padded on the whole-entry path): the backward then skips the scores'
     * product and the exps, which at T <= 64 made this op slower than the
     * stored path (toy, gpt-mini). Only when there will be a backward. */
    pl->short_seq = K <= TG_ATT_SHORT_MAX && !pl->has_pos;
    /* bf16's engine (the header, "Block products"): short sequences on the
     * short kernel, rounded operands; longer ones on AMX tiles where AMX is
     * the bf16 engine, else on tg_k_attn_mm, rounded operands. */
    pl->amx = pl->bf16 && !pl->short_seq && strcmp(tg_bf16_engine().engine, "amx") == 0;
    pl->round_ops = pl->bf16 && !pl->amx;
    int KP = pl->short_seq ? tg_k_attention_short_stride(K) : K; /* P's row stride */
    bool keep = (pl->short_seq || (Q <= BQ && K <= BK)) && tg_node_will_record(n_in, inputs);
    if (keep && !(pl->probs = tg_arena_alloc(sizeof(tg_real) * (size_t)(rows * KP)))) return NULL;
    if (pl->dropout) {
        pl->mask = tg_dropout_mask_new(rng->seed, rng->stream, dropout_p);
        pl->first = tg_dropout_take(rng, (uint64_t)rows * (uint64_t)K);
    }
    /* The threads' scratch: given back once the forward is done, so the
     * next attention of the scope (the next layer's) takes the same block. */
    int nth = tg_get_num_threads();
    size_t per_thread = pl->short_seq ? (size_t)Q * KP + tg_k_attention_short_scratch(Q, K, d, dv)
                                      : 2 * BQ * BK + (size_t)BQ * dv + 2 * BQ +
                                            (pl->has_pos ? 2 * (size_t)BQ * pl->R : 0) + ops_reals(pl, false);
    per_thread += io_reals(pl, false);
    size_t bytes = sizeof(tg_real) * per_thread * (size_t)nth;
    tg_real *scratch = tg__arena_reuse(bytes);
    if (!scratch && !(scratch = tg_arena_alloc(bytes))) return NULL;
    tg_tensor *const *qkv = pl->n_qkv == 3 ? in : (tg_tensor *const[]){in[0], in[0], in[0]};
    if (pl->short_seq) {
        short_ctx c = {.pl = pl,
                       .q = qkv[0]->data,
                       .k = qkv[1]->data,
                       .v = qkv[2]->data,
                       .out = out->data,
                       .scratch = scratch,
                       .per_thread = per_thread};
        short_run(pl, &c, nth);
    } else {
        forward_ctx c = {pl, qkv[0]->data, qkv[1]->data, qkv[2]->data, out->data, lse->data, scratch, per_thread, nqb};
        tg_parallel_tasks_at_most(nqblocks, nqblocks > 1 && (double)rows * K * (d + dv) > 65536 ? nth : 1,
                                  forward_tasks, &c);
    }
    tg__arena_recycle(scratch, bytes);
    tg_node *n = tg_node_record(&tg_op_attention, out, n_in, inputs);
    if (n) n->state = pl;
    return out;
}

/* q, k and v valid and stored alike: all tg_real, or all bf16 ("bf16
 * storage"); else an error naming op. */
static bool bad_operands(const char *op, tg_tensor *q, tg_tensor *k, tg_tensor *v) {
    char b1[64], b2[64], b3[64];
    if (tg_any_bad(op, 3, (const tg_tensor *const[]){q, k, v}, 7)) return true;
    if (q->dtype == k->dtype && q->dtype == v->dtype) return false;
    const char *name[2] = {"real", "bf16"};
    tg_set_error("%s: q %s %s, k %s %s, v %s %s: need all three tg_real or all three bf16", op, tg_tshape(b1, q),
                 name[q->dtype == TG_DTYPE_BF16], tg_tshape(b2, k), name[k->dtype == TG_DTYPE_BF16], tg_tshape(b3, v),
                 name[v->dtype == TG_DTYPE_BF16]);
    return true;
}

tg_tensor *tg_attention(tg_tensor *q, tg_tensor *k, tg_tensor *v, tg_mask mask, tg_real dropout_p, tg_rng *rng) {
    return tg_attention_pos(q, k, v, mask, dropout_p, rng, NULL);
}

tg_tensor *tg_attention_pos(tg_tensor *q, tg_tensor *k, tg_tensor *v, tg_mask mask, tg_real dropout_p, tg_rng *rng,
                            const tg_attn_pos *pos) {
    char b1[64], b2[64], b3[64];
    if (bad_operands("attention", q, k, v)) return NULL;
    if (q->ndim != 3 || k->ndim != 3 || v->ndim != 3 || k->shape[0] != q->shape[0] || v->shape[0] != q->shape[0] ||
        k->shape[2] != q->shape[2] || v->shape[1] != k->shape[1]) {
        tg_set_error("attention: q %s, k %s, v %s: need [B, Q, d], [B, K, d], [B, K, dv]", tg_tshape(b1, q),
                     tg_tshape(b2, k), tg_tshape(b3, v));
        return NULL;
    }
    int B = q->shape[0], Q = q->shape[1], K = k->shape[1], d = q->shape[2], dv = v->shape[2];
    attention_state s = {
        .B = B, .Q = Q, .K = K, .d = d, .dv = dv, .H = 1, .n_qkv = 3, .io_bf16 = q->dtype == TG_DTYPE_BF16};
    s.vq = (attn_view){0, (int64_t)Q * d, 0, d};
    s.vk = (attn_view){0, (int64_t)K * d, 0, d};
    s.vv = (attn_view){0, (int64_t)K * dv, 0, dv};
    s.vo = (attn_view){0, (int64_t)Q * dv, 0, dv};
    return attention_run(&s, (tg_tensor *[]){q, k, v}, "q", TG_SHAPE(B, Q, dv), mask, dropout_p, rng, pos);
}

tg_tensor *tg_attention_heads(tg_tensor *q, tg_tensor *k, tg_tensor *v, int heads, tg_mask mask, tg_real dropout_p,
                              tg_rng *rng, const tg_attn_pos *pos) {
    char b1[64], b2[64], b3[64];
    if (bad_operands("attention_heads", q, k, v)) return NULL;
    int h = heads;
    if (h < 1 || q->ndim != 3 || k->ndim != 3 || v->ndim != 3 || k->shape[0] != q->shape[0] ||
        v->shape[0] != q->shape[0] || k->shape[2] != q->shape[2] || v->shape[1] != k->shape[1] ||
        q->shape[2] % h != 0 || v->shape[2] % h != 0) {
        tg_set_error("attention_heads: q %s, k %s, v %s with %d heads: need [B, Q, h d], [B, K, h d], [B, K, h dv]",
                     tg_tshape(b1, q), tg_tshape(b2, k), tg_tshape(b3, v), heads);
        return NULL;
    }
    int B = q->shape[0], Q = q->shape[1], K = k->shape[1], d = q->shape[2] / h, dv = v->shape[2] / h;
    attention_state s = {
        .B = B * h, .Q = Q, .K = K, .d = d, .dv = dv, .H = h, .n_qkv = 3, .io_bf16 = q->dtype == TG_DTYPE_BF16};
    s.vq = (attn_view){0, (int64_t)Q * h * d, d, (int64_t)h * d};
    s.vk = (attn_view){0, (int64_t)K * h * d, d, (int64_t)h * d};
    s.vv = (attn_view){0, (int64_t)K * h * dv, dv, (int64_t)h * dv};
    s.vo = (attn_view){0, (int64_t)Q * h * dv, dv, (int64_t)h * dv};
    return attention_run(&s, (tg_tensor *[]){q, k, v}, "q", TG_SHAPE(B, Q, h * dv), mask, dropout_p, rng, pos);
}

tg_tensor *tg_attention_qkv(tg_tensor *qkv, int heads, tg_mask mask, tg_real dropout_p, tg_rng *rng,
                            const tg_attn_pos *pos) {
    char b1[64];
    if (tg_any_bad("attention_qkv", 1, (const tg_tensor *const[]){qkv}, 1)) return NULL;
    int h = heads;
    if (h < 1 || qkv->ndim != 3 || qkv->shape[2] % (3 * h) != 0) {
        tg_set_error("attention_qkv: qkv %s with %d heads: need [B, T, 3 h d]", tg_tshape(b1, qkv), heads);
        return NULL;
    }
    int B = qkv->shape[0], T = qkv->shape[1], d = qkv->shape[2] / (3 * h), D = h * d;
    attention_state s = {
        .B = B * h, .Q = T, .K = T, .d = d, .dv = d, .H = h, .n_qkv = 1, .io_bf16 = qkv->dtype == TG_DTYPE_BF16};
    int64_t bs = (int64_t)T * 3 * D;
    s.vq = (attn_view){0, bs, d, 3 * (int64_t)D};
    s.vk = (attn_view){D, bs, d, 3 * (int64_t)D};
    s.vv = (attn_view){2 * (int64_t)D, bs, d, 3 * (int64_t)D};
    s.vo = (attn_view){0, (int64_t)T * D, d, D};
    return attention_run(&s, (tg_tensor *[]){qkv, NULL, NULL}, "qkv", TG_SHAPE(B, T, D), mask, dropout_p, rng, pos);
}

int tg_alibi_slopes(int heads, tg_real *out) {
    if (heads < 1 || !out) {
        tg_set_error("alibi_slopes: %d heads%s: need at least 1 and an output", heads, out ? "" : " and NULL out");
        return -1;
    }
    /* Press et al. 2022: for n a power of two, the geometric sequence
     * 2^(-8/n), 2^(-16/n), ..., 2^(-8); otherwise the n' = 2^floor(log2 h)
     * slopes, then the odd-indexed slopes of 2 n' (those between them). */
    int n = 1;
    while (n * 2 <= heads) n *= 2;
    for (int k = 1; k <= n && k <= heads; k++) out[k - 1] = (tg_real)pow(2.0, -8.0 * k / n);
    for (int k = 1, i = n; i < heads; k += 2, i++) out[i] = (tg_real)pow(2.0, -8.0 * k / (2.0 * n));
    return 0;
}
