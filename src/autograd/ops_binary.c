/* Binary elementwise ops with NumPy broadcasting. The gradient of an input
 * that was broadcast is summed over the broadcast axes (tg_k_sum_to):
 *   add: da += g        db += g
 *   sub: da += g        db -= g
 *   mul: da += g b      db += g a
 *   div: da += g / b    db -= g a / b^2                                    */
#include "op.h"

#include <string.h>

static tg_tensor *binary(const tg_op *op, tg_binary_kind kind, tg_tensor *a, tg_tensor *b) {
    char b1[64], b2[64];
    if (tg_any_null(op->name, 2, (const tg_tensor *const[]){a, b})) return NULL;
    int nd, shape[TG_MAX_DIMS];
    if (!tg_broadcast_shape(a->ndim, a->shape, b->ndim, b->shape, &nd, shape)) {
        tg_set_error("%s: shapes %s and %s cannot be broadcast together", op->name, tg_tshape(b1, a), tg_tshape(b2, b));
        return NULL;
    }
    tg_tensor *y = tg_empty_arena(nd, shape);
    if (!y) return NULL;
    tg_k_binary(kind, a, b, y);
    tg_node_record(op, y, 2, (tg_tensor *[]){a, b}); /* no state: the op says which */
    return y;
}

/* dst = s src over ranges split among threads (a copy when s is 1; each
 * element one product: any split gives the same bits). A residual add's
 * gradient copy was a memcpy of [B, T, d] on one thread. */
typedef struct {
    tg_real *dst;
    const tg_real *src;
    tg_real s;
} scale_ctx;
static void scale_range(void *ctx, int64_t b, int64_t e, int tid) {
    const scale_ctx *c = ctx;
    (void)tid;
    if (c->s == 1) {
        if (c->dst != c->src) memcpy(c->dst + b, c->src + b, sizeof(tg_real) * (size_t)(e - b));
        return;
    }
    for (int64_t i = b; i < e; i++) c->dst[i] = c->s * c->src[i];
}
static void scale_into(tg_real *dst, const tg_real *src, tg_real s, int64_t n) {
    tg_parallel_for_ns(n, (double)n * TG_NS_STREAM, scale_range, &(scale_ctx){dst, src, s});
}

/* grad(x) += sum_to(g * factor) where factor is (tensor f, scaled by s), or
 * just s * g when f is NULL. When x has g's shape and this pass has not
 * touched grad(x) yet, the product is written straight into it. */
static void accumulate(tg_tensor *x, const tg_tensor *g, const tg_tensor *f, tg_binary_kind k, tg_real s) {
    bool fresh;
    tg_tensor *gx = tg_grad_begin(x, &fresh);
    if (!gx) return;
    bool direct = fresh && gx->size == g->size;
    tg_tensor *t = direct ? gx : (tg_tensor *)g;
    if (f) {
        if (!direct) t = tg_backward_scratch_tensor(g->ndim, g->shape);
        tg_k_binary(k, g, f, t);
    } else if (direct) {
        scale_into(t->data, g->data, 1, g->size);
    }
    if (s != 1) {
        if (t == g) {
            t = tg_backward_scratch_tensor(g->ndim, g->shape);
            scale_into(t->data, g->data, s, t->size);
        } else {
            scale_into(t->data, t->data, s, t->size);
        }
    }
    if (!direct) tg_k_sum_to(t, gx, !fresh);
}

static tg_binary_kind kind_of(const tg_op *op);

static void binary_backward(tg_node *n) {
    tg_tensor *a = n->in[0], *b = n->in[1], *g = n->out->grad;
    switch (kind_of(n->op)) {
    /* da = g: an input that feeds only this op takes g itself, no copy
     * (tg_grad_share; the residual branch of every AddNorm). */
    case TG_BINARY_ADD:
        if (!tg_grad_share(a, g)) accumulate(a, g, NULL, 0, 1);
        if (!tg_grad_share(b, g)) accumulate(b, g, NULL, 0, 1);
        break;
    case TG_BINARY_SUB:
        if (!tg_grad_share(a, g)) accumulate(a, g, NULL, 0, 1);
        accumulate(b, g, NULL, 0, -1);
        break;
    case TG_BINARY_MUL:
        accumulate(a, g, b, TG_BINARY_MUL, 1);
        accumulate(b, g, a, TG_BINARY_MUL, 1);
        break;
    case TG_BINARY_DIV:
        accumulate(a, g, b, TG_BINARY_DIV, 1);
        if (b->requires_grad) {
            /* db = -g a / b^2 = -(g * y) / b, with y = a / b the output. */
            tg_tensor *gy = tg_backward_scratch_tensor(g->ndim, g->shape);
            tg_k_binary(TG_BINARY_MUL, g, n->out, gy);
            accumulate(b, gy, b, TG_BINARY_DIV, -1);
        }
        break;
    }
}

const tg_op tg_op_add = {"add", binary_backward};
const tg_op tg_op_sub = {"sub", binary_backward};
const tg_op tg_op_mul = {"mul", binary_backward};
const tg_op tg_op_div = {"div", binary_backward};

static tg_binary_kind kind_of(const tg_op *op) {
    return op == &tg_op_add   ? TG_BINARY_ADD
           : op == &tg_op_sub ? TG_BINARY_SUB
           : op == &tg_op_mul ? TG_BINARY_MUL
                              : TG_BINARY_DIV;
}

tg_tensor *tg_add(tg_tensor *a, tg_tensor *b) { return binary(&tg_op_add, TG_BINARY_ADD, a, b); }
tg_tensor *tg_sub(tg_tensor *a, tg_tensor *b) { return binary(&tg_op_sub, TG_BINARY_SUB, a, b); }
tg_tensor *tg_mul(tg_tensor *a, tg_tensor *b) { return binary(&tg_op_mul, TG_BINARY_MUL, a, b); }
tg_tensor *tg_div(tg_tensor *a, tg_tensor *b) { return binary(&tg_op_div, TG_BINARY_DIV, a, b); }
