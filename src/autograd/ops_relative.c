/* Relative-position gather and scatter, the stored path's pieces of the
 * position terms of tg_attention_pos (autograd.h). Query i sits at position
 * i + q_offset, key j at j; their offset o = j - i - q_offset falls in bucket
 *   r(i, j) = clip(o, -C, C) + C,   R = 2C + 1 buckets
 * (Shaw et al. 2018: offsets beyond C share the end vectors).
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

#include <string.h>

typedef struct {
    int clip, q_offset;
} rel_state;

static inline int rel_bucket(int64_t o, int clip) { return o < -clip ? 0 : o > clip ? 2 * clip : (int)o + clip; }

/* y[n,i,j] += x[n, i*xq, r(i,j)] for all n, i, j (x [N, Qx, R], y [N, Q, K]): gather when
 * to_y, else its adjoint x[...] += y[...]. */
static void rel_map(tg_real *x, int Qx, tg_real *y, int N, int Q, int K, int clip, int q_offset, bool to_y) {
    int R = 2 * clip + 1;
    for (int64_t n = 0; n < N; n++)
        for (int i = 0; i < Q; i++) {
            tg_real *xr = x + (n * Qx + (Qx == 1 ? 0 : i)) * R;
            tg_real *yr = y + (n * Q + i) * (int64_t)K;
            int64_t o0 = -(int64_t)i - q_offset;
            if (to_y)
                for (int j = 0; j < K; j++) yr[j] += xr[rel_bucket(o0 + j, clip)];
            else
                for (int j = 0; j < K; j++) xr[rel_bucket(o0 + j, clip)] += yr[j];
        }
}

static bool check_clip(const char *op, int clip) {
    if (clip < 0 || clip > (1 << 20)) {
        tg_set_error("%s: clip %d must be in [0, 2^20]", op, clip);
        return false;
    }
    return true;
}

static void rel_gather_backward(tg_node *n) {
    tg_tensor *gx = tg_grad_of(n->in[0]);
    if (!gx) return;
    const rel_state *st = n->state;
    const tg_tensor *y = n->out;
    rel_map(gx->data, gx->shape[1], y->grad->data, y->shape[0], y->shape[1], y->shape[2], st->clip, st->q_offset,
            false);
}
const tg_op tg_op_rel_gather = {"rel_gather", rel_gather_backward};

tg_tensor *tg_rel_gather(tg_tensor *x, int Q, int K, int clip, int q_offset) {
    char b[64];
    if (tg_any_null("rel_gather", 1, (const tg_tensor *const[]){x})) return NULL;
    if (!check_clip("rel_gather", clip)) return NULL;
    if (x->ndim != 3 || x->shape[2] != 2 * clip + 1 || (x->shape[1] != Q && x->shape[1] != 1) || Q < 0 || K < 0) {
        tg_set_error("rel_gather: x %s with Q %d, K %d, clip %d: need [N, %d or 1, %d]", tg_tshape(b, x), Q, K, clip, Q,
                     2 * clip + 1);
        return NULL;
    }
    tg_tensor *y = tg_empty_arena(TG_SHAPE(x->shape[0], Q, K));
    if (!y) return NULL;
    memset(y->data, 0, sizeof(tg_real) * (size_t)y->size);
    rel_map(x->data, x->shape[1], y->data, x->shape[0], Q, K, clip, q_offset, true);
    tg_node *n = tg_node_record(&tg_op_rel_gather, y, 1, &x);
    rel_state *st = n ? tg_node_state(n, sizeof *st) : NULL;
    if (st) *st = (rel_state){clip, q_offset};
    return y;
}

static void rel_scatter_backward(tg_node *n) {
    tg_tensor *gw = tg_grad_of(n->in[0]);
    if (!gw) return;
    const rel_state *st = n->state;
    const tg_tensor *y = n->out;
    rel_map(y->grad->data, y->shape[1], gw->data, gw->shape[0], gw->shape[1], gw->shape[2], st->clip, st->q_offset,
            true);
}
const tg_op tg_op_rel_scatter = {"rel_scatter", rel_scatter_backward};

tg_tensor *tg_rel_scatter(tg_tensor *w, int clip, int q_offset) {
    char b[64];
    if (tg_any_null("rel_scatter", 1, (const tg_tensor *const[]){w})) return NULL;
    if (!check_clip("rel_scatter", clip)) return NULL;
    if (w->ndim != 3) {
        tg_set_error("rel_scatter: w %s must be 3-D [N, Q, K]", tg_tshape(b, w));
        return NULL;
    }
    int N = w->shape[0], Q = w->shape[1], K = w->shape[2];
    tg_tensor *y = tg_empty_arena(TG_SHAPE(N, Q, 2 * clip + 1));
    if (!y) return NULL;
    memset(y->data, 0, sizeof(tg_real) * (size_t)y->size);
    rel_map(y->data, Q, w->data, N, Q, K, clip, q_offset, false);
    tg_node *n = tg_node_record(&tg_op_rel_scatter, y, 1, &w);
    rel_state *st = n ? tg_node_state(n, sizeof *st) : NULL;
    if (st) *st = (rel_state){clip, q_offset};
    return y;
}
