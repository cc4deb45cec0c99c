/* Elementwise unary ops. Each op's forward is one kernel call and its
 * backward is dx += dy * f'(x), with f' written right below the op. */
#include "op.h"

#include <math.h>

/* Forward: y = f(x) with the kernel; record a node whose backward uses d. */
static tg_tensor *unary(const tg_op *op, tg_unary_kind kind, tg_real p, tg_tensor *a) {
    if (tg_any_null(op->name, 1, (const tg_tensor *const[]){a})) return NULL;
    tg_tensor *y = tg_empty_arena(a->ndim, a->shape);
    if (!y) return NULL;
    tg_k_unary(kind, p, a->data, y->data, a->size);
    tg_node *n = tg_node_record(op, y, 1, &a);
    if (n) n->rarg[0] = p;
    return y;
}

/* dx += GX, where GX is dy * f'(x, y) written in terms of g = dy, x and y
 * and inlined into the loop by the macro below; dx = GX when this pass has
 * not touched dx yet (tg_grad_begin). restrict and a branch-free GX let the
 * compiler vectorise both loops. */
#define UNARY_BACKWARD(n, GX)                                                         \
    do {                                                                              \
        bool fresh_;                                                                  \
        tg_tensor *X_ = (n)->in[0], *Y_ = (n)->out, *GX_ = tg_grad_begin(X_, &fresh_); \
        if (!GX_) break;                                                              \
        const tg_real *restrict gy_ = Y_->grad->data, *restrict xs_ = X_->data;       \
        const tg_real *restrict ys_ = Y_->data;                                       \
        tg_real *restrict gx_ = GX_->data, p = (n)->rarg[0];                          \
        int64_t size_ = X_->size;                                                     \
        (void)p;                                                                      \
        if (fresh_) {                                                                 \
            _Pragma("omp parallel for if (size_ > TG_PAR_MIN)")                        \
            for (int64_t i = 0; i < size_; i++) {                                     \
                tg_real g = gy_[i], x = xs_[i], y = ys_[i];                           \
                (void)x; (void)y;                                                     \
                gx_[i] = (GX);                                                        \
            }                                                                         \
        } else {                                                                      \
            _Pragma("omp parallel for if (size_ > TG_PAR_MIN)")                        \
            for (int64_t i = 0; i < size_; i++) {                                     \
                tg_real g = gy_[i], x = xs_[i], y = ys_[i];                           \
                (void)x; (void)y;                                                     \
                gx_[i] += (GX);                                                       \
            }                                                                         \
        }                                                                             \
    } while (0)

#define UNARY_OP(NAME, KIND, GX_EXPR)                                                 \
    static void NAME##_backward(tg_node *n) { UNARY_BACKWARD(n, GX_EXPR); }         \
    const tg_op tg_op_##NAME = {#NAME, NAME##_backward};                            \
    tg_tensor *tg_##NAME(tg_tensor *a) { return unary(&tg_op_##NAME, KIND, 0, a); }

/*        op       kernel            dx = dy * f'(x), dy = g                 */
UNARY_OP(neg,     TG_UNARY_NEG,     -g)
UNARY_OP(exp,     TG_UNARY_EXP,     g * y)                  /* d e^x = e^x */
UNARY_OP(log,     TG_UNARY_LOG,     g / x)
UNARY_OP(sqrt,    TG_UNARY_SQRT,    g * (tg_real)0.5 / y)   /* d sqrt x = 1/(2 sqrt x) */
UNARY_OP(tanh,    TG_UNARY_TANH,    g * (1 - y * y))        /* d tanh = 1 - tanh^2 */
UNARY_OP(sigmoid, TG_UNARY_SIGMOID, g * y * (1 - y))        /* d s = s (1 - s) */
/* A select, not g * [x > 0]: torch's threshold_backward, 0 at x = 0. */
UNARY_OP(relu,    TG_UNARY_RELU,    x > 0 ? g : 0)
/* GELU(x) = x Phi(x): d/dx = Phi(x) + x phi(x), phi the standard normal pdf. */
UNARY_OP(gelu,    TG_UNARY_GELU,
         g * (tg_real)(0.5 * (1 + erf(x * 0.7071067811865476)) +
                       x * 0.3989422804014327 * exp(-0.5 * (double)x * x)))

/* pow by a scalar: d x^p = p x^(p-1). */
static void pow_backward(tg_node *n) { UNARY_BACKWARD(n, g * p * (tg_real)pow(x, p - 1)); }
const tg_op tg_op_pow_scalar = {"pow_scalar", pow_backward};
tg_tensor *tg_pow_scalar(tg_tensor *a, tg_real p) { return unary(&tg_op_pow_scalar, TG_UNARY_POW, p, a); }

/* y = x + s: dy/dx = 1.  y = s x: dy/dx = s. */
static void add_scalar_backward(tg_node *n) {
    tg_tensor *gx = tg_grad_of(n->in[0]);
    if (gx) for (int64_t i = 0; i < gx->size; i++) gx->data[i] += n->out->grad->data[i];
}
const tg_op tg_op_add_scalar = {"add_scalar", add_scalar_backward};
tg_tensor *tg_add_scalar(tg_tensor *a, tg_real s) {
    if (tg_any_null("add_scalar", 1, (const tg_tensor *const[]){a})) return NULL;
    tg_tensor *y = tg_empty_arena(a->ndim, a->shape);
    if (!y) return NULL;
    for (int64_t i = 0; i < a->size; i++) y->data[i] = a->data[i] + s;
    tg_node_record(&tg_op_add_scalar, y, 1, &a);
    return y;
}

static void mul_scalar_backward(tg_node *n) {
    tg_tensor *gx = tg_grad_of(n->in[0]);
    tg_real s = n->rarg[0];
    if (gx) for (int64_t i = 0; i < gx->size; i++) gx->data[i] += s * n->out->grad->data[i];
}
const tg_op tg_op_mul_scalar = {"mul_scalar", mul_scalar_backward};
tg_tensor *tg_mul_scalar(tg_tensor *a, tg_real s) {
    if (tg_any_null("mul_scalar", 1, (const tg_tensor *const[]){a})) return NULL;
    tg_tensor *y = tg_empty_arena(a->ndim, a->shape);
    if (!y) return NULL;
    for (int64_t i = 0; i < a->size; i++) y->data[i] = a->data[i] * s;
    tg_node *n = tg_node_record(&tg_op_mul_scalar, y, 1, &a);
    if (n) n->rarg[0] = s;
    return y;
}
