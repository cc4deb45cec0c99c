/* The affine map of a Linear layer over the last axis, as torch's
 * nn.functional.linear:
 *   y = x W^T + b,   x [..., in], W [out, in], b [out] or none, y [..., out]
 * With x viewed as [N, in], the forward is one GEMM whose C starts as b in
 * every row (beta = 1): the bias costs no pass of its own (a GEMM
 * epilogue), nor a tensor for x W^T. Backward (as matmul and add):
 *   dx = dy W,   dW += dy^T x,   db += sum_rows dy
 * Under TG_PREC_BF16 (autograd.h) the three products are bf16 with float
 * sums; the bias and its gradient stay float.
 *
 * A Linear followed by GELU, y = gelu(h), h = x W^T + b (GPT-2's MLP), is
 * one op as well: the same GEMM applies GELU to each block of h it
 * finishes, while the block is in cache (tg_k_gemm_ep), instead of a pass
 * of its own over [N, out] in memory. That saves memory traffic, not
 * arithmetic, and the GELU pass is mostly arithmetic (the tanh form on an
 * AVX-512 core): the forward gains a little, forward and backward together
 * about nothing (the backward does the pair's work). h is kept in the
 * arena for the backward:
 *   dh = dy * gelu'(h),   then dx, dW, db from dh as above,
 * gelu and gelu' the rows of TG_UNARY_OPS that tg_gelu and tg_gelu_tanh
 * run, so the values and gradients are those of tg_gelu(tg_affine(..)),
 * bit for bit. Without a node to record (no grad, or no input requiring
 * it) h is not kept: the GELU overwrites it in place, one [N, out] tensor
 * instead of the pair's two.
 *
 * A Linear whose result is added to r (a residual connection, y = r +
 * x W^T + b) is one op too: the GEMM starts from r + b, so x W^T + b is
 * never a tensor of its own (not kept for a backward that does not need
 * it, nor written and read again):
 *   dr = dy,   then dx, dW, db from dy as above.
 *
 * Activations in bf16 (tg_dtype, tensor.h; as PyTorch's autocast keeps a
 * Linear's result): x may be stored as bf16, and the _to forms store the
 * result y (and affine_gelu's kept h) as bf16, computed in a float scratch
 * that is reused as soon as it is rounded. Products of a bf16 x are those
 * of its float values (the widened x: exact), so with bf16 products a
 * bf16-stored x gives the bits of the float x it was rounded from. A kept
 * bf16 h makes the backward's gelu'(h) that of the rounded h, as autocast's
 * does. */
#include "op.h"

#include <string.h>
#include "tensor/tensor_internal.h" /* tg__empty_recycled, tg__empty_bf16, tg__tensor_recycle */

/* x's values as tg_real for a product: x->data, or, for a bf16 x, a widened
 * copy in *scratch (recycled by operand_done). */
static const tg_real *operand(const tg_tensor *x, tg_tensor **scratch) {
    *scratch = NULL;
    if (x->dtype == TG_DTYPE_REAL) return x->data;
    if (!(*scratch = tg__empty_recycled(x->ndim, x->shape))) return NULL;
    tg__cast_into(x, *scratch);
    return (*scratch)->data;
}
static void operand_done(tg_tensor *scratch) { tg__tensor_recycle(scratch); }

/* dx, dW and db from dy, the gradient of h = x W^T + b; n's inputs are
 * x, W and then b (or none: b NULL). */
static void affine_grads(const tg_node *n, const tg_tensor *dy, tg_tensor *b) {
    tg_tensor *x = n->in[0], *w = n->in[1];
    int in = w->shape[1], out = w->shape[0], N = out ? (int)(dy->size / out) : 0;
    bool fresh;
    tg_tensor *g = tg_grad_begin(x, &fresh);
    if (g) TG_GEMM(n->bf16, false, false, N, in, out, 1, dy->data, out, w->data, in, fresh ? 0 : 1, g->data, in);
    if ((g = tg_grad_begin(w, &fresh))) {
        tg_tensor *xs;
        const tg_real *xv = operand(x, &xs);
        if (xv) TG_GEMM(n->bf16, true, false, out, in, N, 1, dy->data, out, xv, in, fresh ? 0 : 1, g->data, in);
        operand_done(xs);
    }
    if (b && (g = tg_grad_begin(b, &fresh))) tg_k_sum_to(dy, g, !fresh);
}

static void affine_backward(tg_node *n) { affine_grads(n, n->out->grad, n->n_in == 3 ? n->in[2] : NULL); }
const tg_op tg_op_affine = {"affine", affine_backward};

/* y = r + x W^T + b: the inputs x, W, b (or none), r; dr = dy, the rest
 * as affine's. */
static void affine_add_backward(tg_node *n) {
    tg_tensor *dy = n->out->grad, *r = n->in[n->n_in - 1];
    if (!tg_grad_share(r, dy)) { /* the same values: no copy when dy can be r's */
        bool fresh;
        tg_tensor *g = tg_grad_begin(r, &fresh);
        if (g) tg_k_sum_to(dy, g, !fresh);
    }
    affine_grads(n, dy, n->n_in == 4 ? n->in[2] : NULL);
}
const tg_op tg_op_affine_add = {"affine_add", affine_add_backward};

/* What affine_gelu's backward reads: the pre-activation h = x W^T + b
 * (stored as bf16 when the result is). */
typedef struct {
    tg_tensor *h;
} affine_act_state;

/* dh = dy gelu'(h) (the activation's row of TG_UNARY_OPS), then the
 * affine's gradients from dh. GELU's row reads h alone (its y argument is
 * for activations whose derivative is their value), so a bf16 y passes h
 * in its place. */
static void affine_act_backward(tg_node *n, tg_unary_kind act) {
    const tg_tensor *h = ((const affine_act_state *)n->state)->h, *y = n->out;
    tg_tensor *dh = tg_backward_scratch_tensor(h->ndim, h->shape); /* reused once this rule returns */
    if (!dh) return;
    tg_tensor *hs;
    const tg_real *hv = operand(h, &hs);
    if (!hv) return;
    tg_k_unary_backward(act, 0, y->grad->data, hv, y->dtype == TG_DTYPE_REAL ? y->data : hv, dh->data, h->size, true);
    operand_done(hs);
    affine_grads(n, dh, n->n_in == 3 ? n->in[2] : NULL);
}
static void affine_gelu_backward(tg_node *n) { affine_act_backward(n, TG_UNARY_GELU); }
static void affine_gelu_tanh_backward(tg_node *n) { affine_act_backward(n, TG_UNARY_GELU_TANH); }
const tg_op tg_op_affine_gelu = {"affine_gelu", affine_gelu_backward};
const tg_op tg_op_affine_gelu_tanh = {"affine_gelu_tanh", affine_gelu_tanh_backward};

/* The output [..., out] of x [..., in] by w [out, in], in the arena; NULL
 * with the error (named op) for NULL inputs or shapes that do not fit. */
static tg_tensor *affine_output(const char *op, const tg_tensor *x, const tg_tensor *w, const tg_tensor *b,
                                tg_dtype to) {
    char b1[64], b2[64], b3[64];
    if (tg_any_bad(op, 2, (const tg_tensor *const[]){x, w}, 1)) return NULL;
    int in = w->ndim == 2 ? w->shape[1] : -1, out = w->ndim == 2 ? w->shape[0] : -1;
    if (x->ndim < 1 || w->ndim != 2 || x->shape[x->ndim - 1] != in || (b && (b->ndim != 1 || b->shape[0] != out))) {
        tg_set_error("%s: x %s, weight %s, bias %s: need x [..., in], weight [out, in], bias [out] or NULL", op,
                     tg_tshape(b1, x), tg_tshape(b2, w), b ? tg_tshape(b3, b) : "NULL");
        return NULL;
    }
    int shape[TG_MAX_DIMS];
    memcpy(shape, x->shape, sizeof(int) * (size_t)x->ndim);
    shape[x->ndim - 1] = out;
    return to == TG_DTYPE_BF16 ? tg__empty_bf16(x->ndim, shape) : tg_empty_arena(x->ndim, shape);
}

/* Rows [r0, r1) of h set to b, to the rows of res, or to their sum: the
 * GEMM's starting value. Rows split over threads (any split gives the same
 * bits). */
typedef struct {
    const tg_real *b, *res; /* either may be NULL */
    tg_real *h;
    int out;
} bias_rows_ctx;
static void bias_rows(void *ctx, int64_t r0, int64_t r1, int tid) {
    const bias_rows_ctx *c = ctx;
    size_t n = (size_t)c->out;
    (void)tid;
    for (int64_t r = r0; r < r1; r++) {
        tg_real *h = c->h + r * c->out;
        if (!c->res)
            memcpy(h, c->b, sizeof(tg_real) * n);
        else if (!c->b)
            memcpy(h, c->res + r * c->out, sizeof(tg_real) * n);
        else
            for (size_t j = 0; j < n; j++) h[j] = c->res[r * c->out + j] + c->b[j];
    }
}

/* h = res + x W^T + b into h: res + b (or either) in every row, then the
 * GEMM with beta = 1 (beta = 0 without either), with the epilogue ep
 * (NULL: none). x's rows are h's (N = size / out): with in = 0 the GEMM
 * only sets h to res + b or 0. */
static void affine_product(const tg_tensor *x, const tg_tensor *w, const tg_tensor *b, const tg_tensor *res,
                           tg_tensor *h, const tg_gemm_epilogue *ep) {
    int in = w->shape[1], out = w->shape[0];
    int64_t N = out ? h->size / out : 0;
    if (b || res)
        tg_parallel_for_ns(N, (double)h->size * TG_NS_STREAM, bias_rows,
                           &(bias_rows_ctx){b ? b->data : NULL, res ? res->data : NULL, h->data, out});
    tg_tensor *xs;
    const tg_real *xv = N > 0 ? operand(x, &xs) : NULL;
    if (xv)
        TG_GEMM_EP(tg_prec_bf16(), false, true, (int)N, out, in, 1, xv, in, w->data, in, b || res ? 1 : 0, h->data, out,
                   ep);
    if (xv) operand_done(xs);
}

tg_tensor *tg_affine_to(tg_tensor *x, tg_tensor *w, tg_tensor *b, tg_dtype to) {
    tg_tensor *y = affine_output("affine", x, w, b, to), *f = y ? tg__float_target(y) : NULL;
    if (!f) return NULL;
    affine_product(x, w, b, NULL, f, NULL);
    tg__float_store(y, f);
    tg_node_record(&tg_op_affine, y, b ? 3 : 2, (tg_tensor *[]){x, w, b});
    return y;
}

tg_tensor *tg_affine_add(tg_tensor *r, tg_tensor *x, tg_tensor *w, tg_tensor *b) {
    char b1[64], b2[64];
    if (tg_any_null("affine_add", 1, (const tg_tensor *const[]){r})) return NULL;
    tg_tensor *y = affine_output("affine_add", x, w, b, TG_DTYPE_REAL);
    if (!y) return NULL;
    if (!tg_same_shape(r, y)) {
        tg_set_error("affine_add: r %s, x W^T + b %s: need the same shape", tg_tshape(b1, r), tg_tshape(b2, y));
        return NULL;
    }
    affine_product(x, w, b, r, y, NULL);
    if (b)
        tg_node_record(&tg_op_affine_add, y, 4, (tg_tensor *[]){x, w, b, r});
    else
        tg_node_record(&tg_op_affine_add, y, 3, (tg_tensor *[]){x, w, r});
    return y;
}
tg_tensor *tg_affine(tg_tensor *x, tg_tensor *w, tg_tensor *b) { return tg_affine_to(x, w, b, TG_DTYPE_REAL); }

tg_tensor *tg_affine_gelu_to(tg_tensor *x, tg_tensor *w, tg_tensor *b, bool tanh_form, tg_dtype to) {
    const tg_op *op = tanh_form ? &tg_op_affine_gelu_tanh : &tg_op_affine_gelu;
    tg_tensor *y = affine_output(op->name, x, w, b, to), *fy = y ? tg__float_target(y) : NULL;
    if (!fy) return NULL;
    tg_tensor *in[3] = {x, w, b};
    /* h is kept only when the node below will be recorded (as bf16 when y is) */
    bool keep = tg_node_will_record(b ? 3 : 2, in);
    tg_tensor *h = !keep                 ? fy
                   : to == TG_DTYPE_BF16 ? tg__empty_bf16(y->ndim, y->shape)
                                         : tg_empty_arena(y->ndim, y->shape);
    tg_tensor *fh = h ? tg__float_target(h) : NULL;
    if (!fh) return NULL;
    affine_product(x, w, b, NULL, fh, &(tg_gemm_epilogue){tanh_form ? TG_UNARY_GELU_TANH : TG_UNARY_GELU, fy->data});
    if (fh != fy) tg__float_store(h, fh);
    tg__float_store(y, fy);
    tg_node *n = tg_node_record(op, y, b ? 3 : 2, in);
    affine_act_state *st = n ? tg_node_state(n, sizeof *st) : NULL;
    if (n && !st) return NULL;
    if (st) st->h = h;
    return y;
}
tg_tensor *tg_affine_gelu(tg_tensor *x, tg_tensor *w, tg_tensor *b, bool tanh_form) {
    return tg_affine_gelu_to(x, w, b, tanh_form, TG_DTYPE_REAL);
}
