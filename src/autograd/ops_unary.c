/* Elementwise unary ops. Each op's forward is one kernel call and its
 * backward another, dx += dy * f'(x); f and f' are one row of TG_UNARY_OPS
 * (tensor/kernels.h), the scalar ops x + s and s x among them. */
#include "op.h"

#include <math.h>

/* The op's scalar, the p of the formulas (pow's exponent, mul_scalar's s).
 * Saved only when nonzero: no state reads as p = 0 (unary_p). */
typedef struct {
    tg_real p;
} unary_state;

static tg_real unary_p(const tg_node *n) { return n->state ? ((const unary_state *)n->state)->p : 0; }

/* Saves p on n (if recorded and p != 0); false when out of memory. */
static bool save_p(tg_node *n, tg_real p) {
    if (!n || p == 0) return true;
    unary_state *st = tg_node_state(n, sizeof *st);
    if (st) st->p = p;
    return st != NULL;
}

/* Forward: y = f(x) with the kernel; record a node that keeps p. */
static tg_tensor *unary(const tg_op *op, tg_unary_kind kind, tg_real p, tg_tensor *a) {
    if (tg_any_null(op->name, 1, (const tg_tensor *const[]){a})) return NULL;
    tg_tensor *y = tg_empty_arena(a->ndim, a->shape);
    if (!y) return NULL;
    tg_k_unary(kind, p, a->data, y->data, a->size);
    return save_p(tg_node_record(op, y, 1, &a), p) ? y : NULL;
}

/* dx (+)= dy f'(x), the kernel of the op's row of TG_UNARY_OPS. */
static void unary_backward(tg_node *n, tg_unary_kind kind) {
    bool fresh;
    tg_tensor *X = n->in[0], *Y = n->out, *GX = tg_grad_begin(X, &fresh);
    if (!GX) return;
    tg_k_unary_backward(kind, unary_p(n), Y->grad->data, X->data, Y->data, GX->data, X->size, fresh);
}

/* One op per row of TG_UNARY_OPS (tensor/kernels.h): its backward, its
 * descriptor and its public function. */
#define UNARY_API_ARG0(NAME, KIND) \
    tg_tensor *tg_##NAME(tg_tensor *a) { return unary(&tg_op_##NAME, TG_UNARY_##KIND, 0, a); }
#define UNARY_API_ARG1(NAME, KIND) \
    tg_tensor *tg_##NAME(tg_tensor *a, tg_real p) { return unary(&tg_op_##NAME, TG_UNARY_##KIND, p, a); }
#define UNARY_OP(NAME, KIND, F, GX_EXPR, ARITY)                                     \
    static void NAME##_backward(tg_node *n) { unary_backward(n, TG_UNARY_##KIND); } \
    const tg_op tg_op_##NAME = {#NAME, NAME##_backward};                            \
    UNARY_API_##ARITY(NAME, KIND)

TG_UNARY_OPS(UNARY_OP)
