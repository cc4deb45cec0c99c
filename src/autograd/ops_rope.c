/* Rotary position embedding (RoPE; Su, Lu, Pan, Murtadha, Wen, Liu,
 * "RoFormer: Enhanced Transformer with Rotary Position Embedding", 2021).
 *
 * For x [N, T, d], row t at position p = t + offset, pair i of features
 * (a, b) = (2i, 2i+1) is rotated by theta_i(p) = p base^(-2i/d):
 *   y_a = x_a cos theta - x_b sin theta
 *   y_b = x_a sin theta + x_b cos theta.
 * Rotating q at position m and k at position n makes their product
 * q R(m)^T R(n) k = q R(n - m) k a function of the offset n - m only: the
 * relative position enters the scores with no parameter and no table.
 * The paper pairs neighbours (2i, 2i+1); GPT-NeoX's and LLaMA's code pairs
 * i with i + d/2 ("rotate_half"), the same rotations applied to permuted
 * features (half = true), so weights trained one way need their q and k
 * rows permuted to run the other.
 *
 * Backward: a rotation's transpose is its inverse,
 *   dx_a =  g_a cos theta + g_b sin theta
 *   dx_b = -g_a sin theta + g_b cos theta. */
#include "op.h"

#include <math.h>

typedef struct {
    int offset, groups, rotated; /* rows of `groups` d-wide heads, the first `rotated` of them rotated */
    bool half;
    tg_real base;
} rope_state;

/* dst = R(sign theta) src on the first st->rotated heads of every row of
 * src [N, T, groups d], and dst = src on the others (add: dst += ...);
 * sign -1 is the inverse rotation. */
static void rope_apply(const tg_real *src, tg_real *dst, int N, int T, int d, const rope_state *st, int sign,
                       bool add) {
    int h = d / 2, rot = st->rotated;
    int64_t row = (int64_t)st->groups * d; /* a token's features */
    for (int t = 0; t < T; t++) {
        double p = (double)t + st->offset;
        for (int i = 0; i < h; i++) {
            double theta = p * pow((double)st->base, -2.0 * i / d);
            tg_real c = (tg_real)cos(theta), s = (tg_real)(sign * sin(theta));
            int a = st->half ? i : 2 * i, b = st->half ? i + h : 2 * i + 1;
            for (int64_t n = 0; n < N; n++) {
                for (int g = 0; g < rot; g++) {
                    const tg_real *x = src + (n * T + t) * row + (int64_t)g * d;
                    tg_real *y = dst + (n * T + t) * row + (int64_t)g * d;
                    tg_real ya = x[a] * c - x[b] * s, yb = x[a] * s + x[b] * c;
                    if (add) {
                        y[a] += ya;
                        y[b] += yb;
                    } else {
                        y[a] = ya;
                        y[b] = yb;
                    }
                }
            }
        }
    }
    if (rot == st->groups) return;
    for (int64_t r = 0; r < (int64_t)N * T; r++) /* the heads not rotated (v of a fused q, k, v) */
        for (int64_t j = (int64_t)rot * d; j < row; j++)
            dst[r * row + j] = (add ? dst[r * row + j] : 0) + src[r * row + j];
}

static void rope_backward(tg_node *n) {
    tg_tensor *gx = tg_grad_of(n->in[0]);
    if (!gx) return;
    const tg_tensor *y = n->out;
    const rope_state *st = n->state;
    rope_apply(y->grad->data, gx->data, y->shape[0], y->shape[1], y->shape[2] / st->groups, st, -1, true);
}
const tg_op tg_op_rope = {"rope", rope_backward};

tg_tensor *tg_rope_heads(tg_tensor *x, int heads, int rotated, int offset, tg_real base, bool half) {
    char b[64];
    if (tg_any_null("rope", 1, (const tg_tensor *const[]){x})) return NULL;
    if (heads < 1 || rotated < 0 || rotated > heads) {
        tg_set_error("rope: %d heads, %d of them rotated: need heads >= 1 and 0 <= rotated <= heads", heads, rotated);
        return NULL;
    }
    if (x->ndim != 3 || x->shape[2] % heads != 0 || (x->shape[2] / heads) % 2 != 0) {
        tg_set_error("rope: x %s, %d heads: need [N, T, heads d] with d even (features rotate in pairs)",
                     tg_tshape(b, x), heads);
        return NULL;
    }
    if (!(base > 1) || !isfinite((double)base) || offset < 0) {
        tg_set_error("rope: base %g must be finite and > 1, offset %d not negative", (double)base, offset);
        return NULL;
    }
    tg_tensor *y = tg_empty_arena(x->ndim, x->shape);
    if (!y) return NULL;
    rope_state st = {offset, heads, rotated, half, base};
    rope_apply(x->data, y->data, x->shape[0], x->shape[1], x->shape[2] / heads, &st, 1, false);
    tg_node *n = tg_node_record(&tg_op_rope, y, 1, &x);
    rope_state *s = n ? tg_node_state(n, sizeof *s) : NULL;
    if (s) *s = st;
    return y;
}

tg_tensor *tg_rope(tg_tensor *x, int offset, tg_real base, bool half) {
    return tg_rope_heads(x, 1, 1, offset, base, half);
}
