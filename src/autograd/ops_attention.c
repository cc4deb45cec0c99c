/* Fused scaled dot-product attention that never stores the Q x K matrix:
 *
 *   out = dropout(masked_softmax(q k^T / sqrt(d))) v,
 *   q [B, Q, d], k [B, K, d], v [B, K, dv] -> out [B, Q, dv],
 *
 * with exactly the semantics of the stored path of src/nn/attention.c
 * (tg_score_scaled_dot, tg_masked_softmax, tg_dropout, tg_matmul): masked
 * scores are replaced by -1e6 (mask.h), so a row with no visible key is
 * uniform; dropout is inverted and element (b, q, k) of its mask is drawn at
 * counter index first + (b Q + q) K + k, first = tg_rng_take(rng, B Q K), the
 * index tg_dropout would give it. Called with equal rng states, both paths
 * give the same result up to float rounding.
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
 * Block products go through tg_k_gemm (its small-matrix path, one thread
 * inside a parallel region).
 *
 * Memory added besides out: L (B Q reals), the mask's counts (B Q ints), D
 * in backward (B Q), and per thread a few BQ x BK tiles: O(B Q), never
 * O(Q K). */
#include "op.h"
#include "mask.h"

#include <math.h>
#include <string.h>

#define BQ 64 /* queries per block */
#define BK 64 /* keys per block */

/* The forward's plan, kept as the node's state: everything backward needs
 * besides the inputs and output (arena). */
typedef struct {
    int B, Q, K, d, dv;
    tg_real scale;         /* 1 / sqrt(d), as tg_score_scaled_dot */
    bool dropout;          /* p > 0; the mask holds 1 / (1 - p) */
    tg_dropout_mask mask;  /* the same mask as tg_dropout (dropout_mask.h) */
    uint64_t first;        /* first counter index */
    const int *lim;        /* visible keys of each row, B Q (mask.h) */
    const int *qblock_end; /* per (b, query block): keys any of its rows may see */
    const tg_real *lse;    /* L: log-sum-exp of each row's scores, B Q */
} attention_state;

static int nblocks(int n, int b) { return (n + b - 1) / b; }

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

/* S = scale q_blk k_blk^T, nq x nk, row stride BK. */
static void scores_tile(const attention_state *pl, const tg_real *q, const tg_real *k, tg_real *S, int nq, int nk) {
    tg_k_gemm(false, true, nq, nk, pl->d, pl->scale, q, pl->d, k, pl->d, 0, S, BK);
}

/* ---- forward ---------------------------------------------------------------- */

/* One (batch row b, query block qb): the online softmax over its key blocks. */
static void forward_block(const attention_state *pl, const tg_real *q, const tg_real *k, const tg_real *v, tg_real *out,
                          tg_real *lse, int b, int qb, tg_real *scratch) {
    int Q = pl->Q, K = pl->K, d = pl->d, dv = pl->dv;
    int q0 = qb * BQ, nq = Q - q0 < BQ ? Q - q0 : BQ;
    tg_real *S = scratch, *zf = S + BQ * BK, *acc = zf + BQ * BK, *m = acc + (size_t)BQ * dv, *l = m + BQ;
    int64_t r0 = (int64_t)b * Q + q0;
    for (int i = 0; i < nq; i++) {
        m[i] = -INFINITY;
        l[i] = 0;
    }
    memset(acc, 0, sizeof(tg_real) * (size_t)nq * dv);
    int kend = pl->qblock_end[(int64_t)b * nblocks(Q, BQ) + qb];
    const tg_real *qblk = q + r0 * d;
    for (int k0 = 0; k0 < kend; k0 += BK) {
        int nk = K - k0 < BK ? K - k0 : BK;
        scores_tile(pl, qblk, k + ((int64_t)b * K + k0) * d, S, nq, nk);
        if (pl->dropout) dropout_tile(pl, b, q0, nq, k0, nk, zf);
        for (int i = 0; i < nq; i++) {
            tg_real *s = S + (size_t)i * BK;
            int vis = visible_in_block(pl, r0 + i, k0, nk);
            if (vis == 0) { /* masked: exp(-1e6 - m) is 0 next to a visible key */
                memset(s, 0, sizeof(tg_real) * (size_t)nk);
                continue;
            }
            int n = vis < 0 ? nk : vis;
            if (vis < 0)
                for (int j = 0; j < nk; j++) s[j] = MASK_VALUE;
            tg_real mx = tg_k_max_row(s, n, m[i]);
            tg_real c = TG_M(exp)(m[i] - mx); /* exp(-inf) = 0 on the first block */
            tg_real sum = tg_k_exp_shift(s, n, mx);
            for (int j = n; j < nk; j++) s[j] = 0;
            l[i] = l[i] * c + sum;
            m[i] = mx;
            if (c != 1)
                for (int t = 0; t < dv; t++) acc[(size_t)i * dv + t] *= c;
            if (pl->dropout) tg_k_mul_row(s, zf + (size_t)i * BK, n);
        }
        tg_k_gemm(false, false, nq, dv, nk, 1, S, BK, v + ((int64_t)b * K + k0) * dv, dv, 1, acc, dv);
    }
    for (int i = 0; i < nq; i++) {
        tg_real inv = 1 / l[i];
        for (int t = 0; t < dv; t++) out[(r0 + i) * dv + t] = acc[(size_t)i * dv + t] * inv;
        lse[r0 + i] = m[i] + TG_M(log)(l[i]);
    }
}

/* ---- backward --------------------------------------------------------------- */

typedef struct {
    const attention_state *pl;
    const tg_real *q, *k, *v, *dO, *lse, *D;
} attn_bwd;

/* One tile, rows q0.. x keys k0.. of batch row b: P (recomputed from L) in
 * P, the dropout factors Z/(1-p) in zf; with dv_acc, dV_blk += (P o zf)^T dO
 * (dP as scratch); then dS = P o (dP o zf - D) in P, 0 where masked. */
static void tile_backward(const attn_bwd *w, int b, int q0, int nq, int k0, int nk, tg_real *P, tg_real *zf,
                          tg_real *dP, tg_real *dv_acc) {
    const attention_state *pl = w->pl;
    int Q = pl->Q, K = pl->K, d = pl->d, dv = pl->dv;
    int64_t r0 = (int64_t)b * Q + q0;
    const tg_real *dOblk = w->dO + r0 * dv, *vblk = w->v + ((int64_t)b * K + k0) * dv;
    scores_tile(pl, w->q + r0 * d, w->k + ((int64_t)b * K + k0) * d, P, nq, nk);
    if (pl->dropout) dropout_tile(pl, b, q0, nq, k0, nk, zf);
    for (int i = 0; i < nq; i++) {
        tg_real *p = P + (size_t)i * BK;
        int vis = visible_in_block(pl, r0 + i, k0, nk);
        if (vis < 0) { /* no visible key: uniform, exp(0) / K as masked_softmax */
            for (int j = 0; j < nk; j++) p[j] = (tg_real)1 / (tg_real)K;
            continue;
        }
        tg_real L = w->lse[r0 + i];
        tg_k_exp_shift(p, vis, L);
        for (int j = vis; j < nk; j++) p[j] = 0;
    }
    if (dv_acc) { /* dV += (P o Z/(1-p))^T dO */
        const tg_real *pd = P;
        if (pl->dropout) {
            for (int i = 0; i < nq; i++) {
                memcpy(dP + (size_t)i * BK, P + (size_t)i * BK, sizeof(tg_real) * (size_t)nk);
                tg_k_mul_row(dP + (size_t)i * BK, zf + (size_t)i * BK, nk);
            }
            pd = dP;
        }
        tg_k_gemm(true, false, nk, dv, nq, 1, pd, BK, dOblk, dv, 1, dv_acc, dv);
    }
    /* dP = dO v^T o Z/(1-p);  dS = P o (dP - D) */
    tg_k_gemm(false, true, nq, nk, dv, 1, dOblk, dv, vblk, dv, 0, dP, BK);
    for (int i = 0; i < nq; i++) {
        tg_real *p = P + (size_t)i * BK, *dp = dP + (size_t)i * BK, *z = zf + (size_t)i * BK;
        int vis = visible_in_block(pl, r0 + i, k0, nk);
        if (vis < 0) vis = 0; /* all masked: constant scores, no gradient */
        tg_real Di = w->D[r0 + i];
        tg_k_attention_ds_row(p, dp, pl->dropout ? z : NULL, Di, vis);
        for (int j = vis; j < nk; j++) p[j] = 0;
    }
}

/* dQ of query block (b, qb), over the key blocks its rows may see. */
static void backward_dq(const attn_bwd *w, tg_real *gq, int b, int qb, tg_real *scratch) {
    const attention_state *pl = w->pl;
    int Q = pl->Q, K = pl->K, d = pl->d, nqb = nblocks(Q, BQ);
    int q0 = qb * BQ, nq = Q - q0 < BQ ? Q - q0 : BQ;
    tg_real *P = scratch, *zf = P + BQ * BK, *dP = zf + BQ * BK, *acc = dP + BQ * BK;
    memset(acc, 0, sizeof(tg_real) * (size_t)nq * d);
    int kend = pl->qblock_end[(int64_t)b * nqb + qb];
    for (int k0 = 0; k0 < kend; k0 += BK) {
        int nk = K - k0 < BK ? K - k0 : BK;
        tile_backward(w, b, q0, nq, k0, nk, P, zf, dP, NULL);
        tg_k_gemm(false, false, nq, d, nk, pl->scale, P, BK, w->k + ((int64_t)b * K + k0) * d, d, 1, acc, d);
    }
    tg_real *g = gq + ((int64_t)b * Q + q0) * d;
    for (int64_t i = 0; i < (int64_t)nq * d; i++) g[i] += acc[i];
}

/* dK and dV of key block (b, kb), over the query blocks that see it. */
static void backward_dkv(const attn_bwd *w, tg_real *gk, tg_real *gv, int b, int kb, tg_real *scratch) {
    const attention_state *pl = w->pl;
    int Q = pl->Q, K = pl->K, d = pl->d, dv = pl->dv, nqb = nblocks(Q, BQ);
    int k0 = kb * BK, nk = K - k0 < BK ? K - k0 : BK;
    tg_real *P = scratch, *zf = P + BQ * BK, *dP = zf + BQ * BK, *acc_k = dP + BQ * BK;
    tg_real *acc_v = acc_k + (size_t)nk * d;
    memset(acc_k, 0, sizeof(tg_real) * (size_t)nk * (d + dv));
    for (int qb = 0; qb < nqb; qb++) {
        if (k0 >= pl->qblock_end[(int64_t)b * nqb + qb]) continue; /* no row of it sees these keys */
        int q0 = qb * BQ, nq = Q - q0 < BQ ? Q - q0 : BQ;
        tile_backward(w, b, q0, nq, k0, nk, P, zf, dP, gv ? acc_v : NULL);
        if (gk) tg_k_gemm(true, false, nk, d, nq, pl->scale, P, BK, w->q + ((int64_t)b * Q + q0) * d, d, 1, acc_k, d);
    }
    int64_t base = (int64_t)b * K + k0;
    if (gk)
        for (int64_t i = 0; i < (int64_t)nk * d; i++) gk[base * d + i] += acc_k[i];
    if (gv)
        for (int64_t i = 0; i < (int64_t)nk * dv; i++) gv[base * dv + i] += acc_v[i];
}

/* What the backward's loops share (attention_backward). */
typedef struct {
    const attn_bwd *w;
    const tg_real *dO, *O;
    tg_real *D, *scratch, *gq, *gk, *gv;
    size_t per_thread;
    int dv, nqb, nkb;
} backward_ctx;

static void backward_D_rows(void *ctx, int64_t begin, int64_t end, int tid) {
    const backward_ctx *c = ctx;
    (void)tid;
    for (int64_t r = begin; r < end; r++) {
        tg_real s = 0;
        for (int t = 0; t < c->dv; t++) s += c->dO[r * c->dv + t] * c->O[r * c->dv + t];
        c->D[r] = s;
    }
}

static void backward_dq_tasks(void *ctx, int64_t begin, int64_t end, int tid) {
    const backward_ctx *c = ctx;
    for (int t = (int)begin; t < (int)end; t++)
        backward_dq(c->w, c->gq, t / c->nqb, t % c->nqb, c->scratch + c->per_thread * (size_t)tid);
}

static void backward_dkv_tasks(void *ctx, int64_t begin, int64_t end, int tid) {
    const backward_ctx *c = ctx;
    for (int t = (int)begin; t < (int)end; t++)
        backward_dkv(c->w, c->gk, c->gv, t / c->nkb, t % c->nkb, c->scratch + c->per_thread * (size_t)tid);
}

static void attention_backward(tg_node *n) {
    tg_tensor *gq = tg_grad_of(n->in[0]), *gk = tg_grad_of(n->in[1]), *gv = tg_grad_of(n->in[2]);
    if (!gq && !gk && !gv) return;
    const attention_state *pl = n->state;
    int B = pl->B, Q = pl->Q, K = pl->K, d = pl->d, dv = pl->dv;
    int64_t rows = (int64_t)B * Q;
    if (rows == 0) return;
    const tg_real *dO = n->out->grad->data, *O = n->out->data;
    tg_real *D = tg_arena_alloc(sizeof(tg_real) * (size_t)rows);
    size_t per_thread = 3 * BQ * BK + (size_t)BK * (d + dv);
    tg_real *scratch = D ? tg_arena_alloc(sizeof(tg_real) * per_thread * (size_t)tg_get_num_threads()) : NULL;
    if (!scratch) return;
    attn_bwd w = {pl, n->in[0]->data, n->in[1]->data, n->in[2]->data, dO, pl->lse, D};
    backward_ctx c = {&w,
                      dO,
                      O,
                      D,
                      scratch,
                      gq ? gq->data : NULL,
                      gk ? gk->data : NULL,
                      gv ? gv->data : NULL,
                      per_thread,
                      dv,
                      nblocks(Q, BQ),
                      nblocks(K, BK)};
    tg_parallel_for(rows, rows * dv > TG_PAR_MIN, backward_D_rows, &c);
    bool big = (double)rows * K * (d + dv) > 65536; /* worth a thread team */
    /* Two passes, each writing rows only its task owns (and q, k, v may be
     * one tensor: the passes do not overlap in time). */
    if (gq) {
        int nqb = nblocks(Q, BQ), tasks = B * nqb;
        tg_parallel_tasks(tasks, big && tasks > 1, backward_dq_tasks, &c);
    }
    if (gk || gv) {
        int nkb = nblocks(K, BK), tasks = B * nkb;
        tg_parallel_tasks(tasks, big && tasks > 1, backward_dkv_tasks, &c);
    }
}
const tg_op tg_op_attention = {"attention", attention_backward};

/* ---- the op ------------------------------------------------------------------- */

typedef struct {
    const attention_state *pl;
    const tg_real *q, *k, *v;
    tg_real *out, *lse, *scratch;
    size_t per_thread;
    int nqb;
} forward_ctx;

static void forward_tasks(void *ctx, int64_t begin, int64_t end, int tid) {
    const forward_ctx *c = ctx;
    for (int64_t t = begin; t < end; t++)
        forward_block(c->pl, c->q, c->k, c->v, c->out, c->lse, (int)(t / c->nqb), (int)(t % c->nqb),
                      c->scratch + c->per_thread * (size_t)tid);
}

tg_tensor *tg_attention(tg_tensor *q, tg_tensor *k, tg_tensor *v, tg_mask mask, tg_real dropout_p, tg_rng *rng) {
    char b1[64], b2[64], b3[64];
    if (tg_any_null("attention", 3, (const tg_tensor *const[]){q, k, v})) return NULL;
    if (q->ndim != 3 || k->ndim != 3 || v->ndim != 3 || k->shape[0] != q->shape[0] || v->shape[0] != q->shape[0] ||
        k->shape[2] != q->shape[2] || v->shape[1] != k->shape[1]) {
        tg_set_error("attention: q %s, k %s, v %s: need [B, Q, d], [B, K, d], [B, K, dv]", tg_tshape(b1, q),
                     tg_tshape(b2, k), tg_tshape(b3, v));
        return NULL;
    }
    int B = q->shape[0], Q = q->shape[1], K = k->shape[1], d = q->shape[2], dv = v->shape[2];
    if (d == 0) {
        tg_set_error("attention: q %s, k %s: feature size 0", tg_tshape(b1, q), tg_tshape(b2, k));
        return NULL;
    }
    /* The mask is checked against the scores' shape [B, Q, K], as masked_softmax does. */
    tg_tensor scores = {.ndim = 3, .shape = {B, Q, K}};
    if (!mask_check("attention", &scores, &mask)) return NULL;
    if (!tg_check_dropout("attention", dropout_p)) return NULL;
    /* p = 1 drops every weight: zeros, and zero gradients through the
     * scaling, as the stored path (tg_dropout draws nothing for p = 1). */
    if (dropout_p == 1) return tg_mul_scalar(tg_attention(q, k, v, mask, 0, NULL), 0);
    if (dropout_p > 0 && !rng) {
        tg_set_error("attention: q %s, k %s, v %s with dropout p = %g: NULL rng", tg_tshape(b1, q), tg_tshape(b2, k),
                     tg_tshape(b3, v), (double)dropout_p);
        return NULL;
    }
    attention_state *pl = tg_arena_alloc(sizeof *pl);
    int *lim = pl ? mask_limits(&scores, &mask) : NULL;
    int nqb = nblocks(Q, BQ);
    int64_t rows = (int64_t)B * Q, nqblocks = (int64_t)B * nqb;
    int *qend = lim ? tg_arena_alloc(sizeof(int) * (size_t)(nqblocks ? nqblocks : 1)) : NULL;
    tg_tensor *out = qend ? tg_empty_arena(TG_SHAPE(B, Q, dv)) : NULL;
    tg_tensor *lse = out ? tg_empty_arena(TG_SHAPE(B, Q)) : NULL;
    if (!lse) return NULL;
    /* Keys a query block must visit: up to the largest visible prefix of its
     * rows, all K when one of them sees none (it is uniform over all keys). */
    for (int64_t bq = 0; bq < nqblocks; bq++) {
        int64_t r0 = bq / nqb * Q + (int64_t)(bq % nqb) * BQ, r1 = r0 + BQ;
        if (r1 > (bq / nqb + 1) * Q) r1 = (bq / nqb + 1) * Q;
        int e = 0;
        for (int64_t r = r0; r < r1; r++) {
            int L = lim[r] == 0 ? K : lim[r];
            if (L > e) e = L;
        }
        qend[bq] = e;
    }
    *pl = (attention_state){B,         Q, K,   d,    dv,       (tg_real)(1.0 / sqrt((double)d)), dropout_p > 0,
                            {0, 0, 0}, 0, lim, qend, lse->data};
    if (pl->dropout) {
        pl->mask = tg_dropout_mask_new(rng->seed, rng->stream, dropout_p);
        pl->first = tg_rng_take(rng, (uint64_t)rows * (uint64_t)K);
    }
    int nth = tg_get_num_threads();
    size_t per_thread = 2 * BQ * BK + (size_t)BQ * dv + 2 * BQ;
    tg_real *scratch = tg_arena_alloc(sizeof(tg_real) * per_thread * (size_t)nth);
    if (!scratch) return NULL;
    forward_ctx c = {pl, q->data, k->data, v->data, out->data, lse->data, scratch, per_thread, nqb};
    tg_parallel_tasks(nqblocks, nqblocks > 1 && (double)rows * K * (d + dv) > 65536, forward_tasks, &c);
    tg_node *n = tg_node_record(&tg_op_attention, out, 3, (tg_tensor *const[]){q, k, v});
    if (n) n->state = pl;
    return out;
}
