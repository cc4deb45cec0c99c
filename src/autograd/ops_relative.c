/* Relative-position gather and scatter, the stored path's pieces of the
 * position terms of tg_attention_pos (autograd.h). Query i sits at position
 * i + q_offset, key j at j; their offset o = j - i - q_offset falls in one
 * of R buckets r(i, j) (rel_bucket.h: clipped to [-C, C], R = 2C + 1, as
 * Shaw et al. 2018, or T5's logarithmic buckets), the fused op's buckets.
 *
 *   gather:  x [N, Qx, R] -> y [N, Q, K],  y[n,i,j] = x[n, i (or 0 when Qx = 1), r(i,j)]
 *            backward: dx[n, i or 0, r] += sum_{j: r(i,j) = r} g[n,i,j]
 *   scatter: w [N, Q, K] -> y [N, Q, R],   y[n,i,r] = sum_{j: r(i,j) = r} w[n,i,j]
 *            backward: dw[n,i,j] += g[n,i,r(i,j)]
 *
 * With x = q rel_k^T (one product per offset, [N, Q, R]), gather gives
 * Shaw's q_i . a^K_ij for every (i, j) without the [Q, K, d] tensor of
 * a^K_ij: what Huang et al. 2018 ("Music Transformer") do by skewing a
 * padded [Q, R] matrix, written as an index map. The stored path builds the
 * [Q, K] scores anyway; the fused op never does (ops_attention.c). */
#include "op.h"
#include "rel_bucket.h"

#include <string.h>

typedef struct {
    const int *bmap; /* bucket of offset o at bmap[o - omin] (rel_bucket_map) */
    int64_t omin;
    int R;
} rel_state;

/* y[n,i,j] += x[n, i or 0, r(i,j)] for all n, i, j (x [N, Qx, R], y [N, Q, K]): gather when
 * to_y, else its adjoint x[...] += y[...]. */
static void rel_map(const rel_state *st, tg_real *x, int Qx, tg_real *y, int N, int Q, int K, bool to_y) {
    int R = st->R;
    for (int64_t n = 0; n < N; n++)
        for (int i = 0; i < Q; i++) {
            tg_real *xr = x + (n * Qx + (Qx == 1 ? 0 : i)) * R;
            tg_real *yr = y + (n * Q + i) * (int64_t)K;
            const int *b = st->bmap + (Q - 1 - i); /* b[j]: bucket of j - i - q_offset (map from omin) */
            if (to_y)
                for (int j = 0; j < K; j++) yr[j] += xr[b[j]];
            else
                for (int j = 0; j < K; j++) xr[b[j]] += yr[j];
        }
}

/* The buckets of pos for Q queries and K keys, or false with an error. */
static bool rel_setup(const char *op, const tg_attn_pos *pos, int Q, int K, rel_state *st) {
    if (!pos) {
        tg_set_error("%s: NULL position description", op);
        return false;
    }
    if (!rel_bucket_check(op, pos)) return false;
    st->R = rel_bucket_count(pos);
    st->bmap = rel_bucket_map(pos, Q, K, &st->omin);
    return st->bmap != NULL;
}

static void rel_gather_backward(tg_node *n) {
    tg_tensor *gx = tg_grad_of(n->in[0]);
    if (!gx) return;
    const tg_tensor *y = n->out;
    rel_map(n->state, gx->data, gx->shape[1], y->grad->data, y->shape[0], y->shape[1], y->shape[2], false);
}
const tg_op tg_op_rel_gather = {"rel_gather", rel_gather_backward};

tg_tensor *tg_rel_gather(tg_tensor *x, int Q, int K, const tg_attn_pos *pos) {
    char b[64];
    if (tg_any_null("rel_gather", 1, (const tg_tensor *const[]){x})) return NULL;
    rel_state st;
    if (Q < 1 || K < 1) {
        tg_set_error("rel_gather: Q %d and K %d must be positive", Q, K);
        return NULL;
    }
    if (!rel_setup("rel_gather", pos, Q, K, &st)) return NULL;
    if (x->ndim != 3 || x->shape[2] != st.R || (x->shape[1] != Q && x->shape[1] != 1)) {
        tg_set_error("rel_gather: x %s with Q %d, K %d: need [N, %d or 1, %d] (%d buckets)", tg_tshape(b, x), Q, K, Q,
                     st.R, st.R);
        return NULL;
    }
    tg_tensor *y = tg_empty_arena(TG_SHAPE(x->shape[0], Q, K));
    if (!y) return NULL;
    memset(y->data, 0, sizeof(tg_real) * (size_t)y->size);
    rel_map(&st, x->data, x->shape[1], y->data, x->shape[0], Q, K, true);
    tg_node *n = tg_node_record(&tg_op_rel_gather, y, 1, &x);
    rel_state *s = n ? tg_node_state(n, sizeof *s) : NULL;
    if (s) *s = st;
    return y;
}

static void rel_scatter_backward(tg_node *n) {
    tg_tensor *gw = tg_grad_of(n->in[0]);
    if (!gw) return;
    const tg_tensor *y = n->out;
    rel_map(n->state, y->grad->data, y->shape[1], gw->data, gw->shape[0], gw->shape[1], gw->shape[2], true);
}
const tg_op tg_op_rel_scatter = {"rel_scatter", rel_scatter_backward};

tg_tensor *tg_rel_scatter(tg_tensor *w, const tg_attn_pos *pos) {
    char b[64];
    if (tg_any_null("rel_scatter", 1, (const tg_tensor *const[]){w})) return NULL;
    if (w->ndim != 3 || w->shape[1] < 1 || w->shape[2] < 1) {
        tg_set_error("rel_scatter: w %s must be 3-D [N, Q, K] with Q, K > 0", tg_tshape(b, w));
        return NULL;
    }
    int N = w->shape[0], Q = w->shape[1], K = w->shape[2];
    rel_state st;
    if (!rel_setup("rel_scatter", pos, Q, K, &st)) return NULL;
    tg_tensor *y = tg_empty_arena(TG_SHAPE(N, Q, st.R));
    if (!y) return NULL;
    memset(y->data, 0, sizeof(tg_real) * (size_t)y->size);
    rel_map(&st, y->data, Q, w->data, N, Q, K, false);
    tg_node *n = tg_node_record(&tg_op_rel_scatter, y, 1, &w);
    rel_state *s = n ? tg_node_state(n, sizeof *s) : NULL;
    if (s) *s = st;
    return y;
}
