/* The affine map of a Linear layer over the last axis, as torch's
 * nn.functional.linear:
 *   y = x W^T + b,   x [..., in], W [out, in], b [out] or none, y [..., out]
 * With x viewed as [N, in], the forward is one GEMM that adds b to the
 * sums it finishes (its epilogue, with bf16 products) or starts C at b in
 * every row (beta = 1, float products): the bias costs no pass of its own
 * over [N, out] in memory, nor a tensor for x W^T. Backward (as matmul and add):
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
 * x W^T + b) is one op too: the GEMM adds r + b as it adds b, so x W^T + b is
 * never a tensor of its own (not kept for a backward that does not need
 * it, nor written and read again):
 *   dr = dy,   then dx, dW, db from dy as above.
 *
 * Activations in bf16 (tg_dtype, tensor.h; as PyTorch's autocast keeps a
 * Linear's result): x may be stored as bf16, and the _to forms store the
 * result y (and affine_gelu's kept h) as bf16, rounded by the GEMM's
 * epilogue from each block of float sums it finishes, in cache: where
 * the bf16 GEMM keeps those blocks in a thread's buffer (c_scratch, one K
 * block: tg_k_gemm_bf16_no_c), in one product with no C at all, else from
 * a float C of a chunk of rows (op.h) that nothing else reads. Products of a
 * bf16 x are those of its float values (bf16 products read it in place,
 * float ones a widened copy), so with bf16 products a bf16-stored x gives
 * the bits of the float x it was rounded from. A kept bf16 h makes the
 * backward's gelu'(h) that of the rounded h, as autocast's does, and its
 * dh is kept in bf16 too (exact for the two products that read it). */
#include "op.h"

#include <string.h>
#include "tensor/tensor_internal.h" /* tg__empty_recycled, tg__empty_bf16, tg__tensor_recycle */

/* Rows r0.. of the activation x as stored (rows ldx apart): bf16 bits or
 * tg_real values. */
static const void *x_rows_at(const tg_tensor *x, int64_t r0, int ldx) {
    size_t off = (size_t)r0 * (size_t)ldx;
    return x->dtype == TG_DTYPE_BF16 ? (const void *)(x->bf16 + off) : (const void *)(x->data + off);
}

/* C = op(A) op(X) or op(X) op(B) (x_first) + beta C, with the epilogue ep,
 * where X is rows r0.. of the activation x (x_rows of them, ldx apart):
 * bf16 products read a bf16 x where it lies (tg_k_gemm_bf16_mixed's
 * packers), float ones a widened copy of those rows. */
static void product_x(bool bf16, bool x_first, bool ta, bool tb, int M, int N, int K, const tg_real *other, int ldo,
                      const tg_tensor *x, int64_t r0, int64_t x_rows, int ldx, tg_real beta, tg_real *C, int ldc,
                      const tg_gemm_epilogue *ep) {
    bool xb = x->dtype == TG_DTYPE_BF16;
    const void *xp = x_rows_at(x, r0, ldx);
    if (bf16) {
        if (x_first)
            tg_k_gemm_bf16_mixed(ta, tb, M, N, K, 1, xp, xb, ldx, other, false, ldo, beta, C, ldc, ep);
        else
            tg_k_gemm_bf16_mixed(ta, tb, M, N, K, 1, other, false, ldo, xp, xb, ldx, beta, C, ldc, ep);
        return;
    }
    tg_tensor *xs = NULL;
    if (xb) { /* float products of a bf16 x: its rows widened (exact) */
        if (!(xs = tg__empty_recycled(TG_SHAPE((int)x_rows, ldx)))) return;
        tg_k_from_bf16(xp, xs->data, xs->size);
        xp = xs->data;
    }
    if (x_first)
        tg_k_gemm_ep(ta, tb, M, N, K, 1, xp, ldx, other, ldo, beta, C, ldc, ep);
    else
        tg_k_gemm_ep(ta, tb, M, N, K, 1, other, ldo, xp, ldx, beta, C, ldc, ep);
    tg__tensor_recycle(xs);
}

/* dx = d W and dW += d^T x with bf16 products, from d16 [N, out] stored
 * as bf16; n's inputs are x and W first. */
static void grads_bf16(const tg_node *n, const uint16_t *d16, int N) {
    tg_tensor *x = n->in[0], *w = n->in[1];
    int in = w->shape[1], out = w->shape[0];
    bool fresh;
    tg_tensor *g = tg_grad_begin(x, &fresh);
    if (g)
        tg_k_gemm_bf16_mixed(false, false, N, in, out, 1, d16, true, out, w->data, false, in, fresh ? 0 : 1, g->data,
                             in, NULL);
    if ((g = tg_grad_begin(w, &fresh))) {
        bool xb = x->dtype == TG_DTYPE_BF16;
        tg_k_gemm_bf16_mixed(true, false, out, in, N, 1, d16, true, out,
                             xb ? (const void *)x->bf16 : (const void *)x->data, xb, in, fresh ? 0 : 1, g->data, in,
                             NULL);
    }
}

/* dx, dW and db from dy, the gradient of h = x W^T + b; n's inputs are
 * x, W and then b (or none: b NULL). With bf16 products dy is rounded to
 * bf16 once, as both products' packers would round it (with db's column
 * sums in the same pass: tg_k_to_bf16_operand), and both read that: the
 * same bits, half the bytes read twice and one rounding where there were
 * two, and no pass of its own for db. */
static void affine_grads(const tg_node *n, const tg_tensor *dy, tg_tensor *b) {
    tg_tensor *x = n->in[0], *w = n->in[1];
    int in = w->shape[1], out = w->shape[0], N = out ? (int)(dy->size / out) : 0;
    bool fresh;
    if (n->bf16 && N > 0) {
        tg_tensor *gb = b ? tg_grad_begin(b, &fresh) : NULL;
        int64_t np = tg_k_unary_backward_bf16_part(N, out);
        uint16_t *dy16 = tg_backward_scratch(sizeof(uint16_t) * (size_t)dy->size);
        tg_real *part = tg_backward_scratch(sizeof(tg_real) * (size_t)(np > 0 ? np : 1));
        if (!dy16 || !part) return;
        tg_k_to_bf16_operand(dy->data, dy16, N, out, gb ? gb->data : NULL, gb && fresh, part);
        grads_bf16(n, dy16, N);
        return;
    }
    tg_tensor *g = tg_grad_begin(x, &fresh);
    if (g) TG_GEMM(n->bf16, false, false, N, in, out, 1, dy->data, out, w->data, in, fresh ? 0 : 1, g->data, in);
    if ((g = tg_grad_begin(w, &fresh)))
        product_x(n->bf16, false, true, false, out, in, N, dy->data, out, x, 0, N, in, fresh ? 0 : 1, g->data, in,
                  NULL);
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
 * for activations whose derivative is their value), so h is passed in its
 * place. A bf16 h is widened a chunk of rows at a time (op.h). */
static void affine_act_backward(tg_node *n, tg_unary_kind act) {
    const tg_tensor *h = ((const affine_act_state *)n->state)->h, *gy = n->out->grad;
    tg_tensor *w = n->in[1], *b = n->n_in == 3 ? n->in[2] : NULL;
    if (h->dtype == TG_DTYPE_REAL || h->size == 0) {                   /* (an empty h's data is not read) */
        tg_tensor *dh = tg_backward_scratch_tensor(h->ndim, h->shape); /* reused once this rule returns */
        if (!dh) return;
        tg_k_unary_backward(act, 0, gy->data, h->data, h->data, dh->data, h->size, true);
        affine_grads(n, dh, b);
        return;
    }
    /* With bf16 products, dh feeds only the two products (which round it
     * as it is stored) and db: it is kept in bf16, half the bytes, made in
     * one pass per chunk of rows from h16 and gy with db's column sums
     * (tg_k_unary_backward_bf16: the bits of widening h, the derivative,
     * tg_k_sum_to of the float chunk and rounding it, pass after pass).
     * Under float products a float dh is kept, from h widened a chunk of
     * rows at a time. */
    int out = w->shape[0];
    int64_t N = out ? h->size / out : 0, R = tg__chunk_rows(out, N);
    if (!n->bf16) {
        tg_real *hs = tg_backward_scratch(sizeof(tg_real) * (size_t)(R * out));
        tg_tensor *dh = tg_backward_scratch_tensor(h->ndim, h->shape);
        if (!hs || !dh) return;
        for (int64_t r0 = 0; r0 < N; r0 += R) {
            int64_t cnt = (N - r0 < R ? N - r0 : R) * out, off = r0 * out;
            tg_k_from_bf16(h->bf16 + off, hs, cnt);
            tg_k_unary_backward(act, 0, gy->data + off, hs, hs, dh->data + off, cnt, true);
        }
        affine_grads(n, dh, b);
        return;
    }
    bool fresh_b = false;
    tg_tensor *gb = b ? tg_grad_begin(b, &fresh_b) : NULL;
    int64_t np = tg_k_unary_backward_bf16_part(R, out);
    uint16_t *dh16 = tg_backward_scratch(sizeof(uint16_t) * (size_t)h->size);
    tg_real *part = tg_backward_scratch(sizeof(tg_real) * (size_t)(np > 0 ? np : 1));
    if (!dh16 || !part) return;
    for (int64_t r0 = 0; r0 < N; r0 += R) { /* chunks of R rows: db's order as it was */
        int64_t rows = N - r0 < R ? N - r0 : R, off = r0 * out;
        tg_k_unary_backward_bf16(act, h->bf16 + off, gy->data + off, dh16 + off, rows, out, gb ? gb->data : NULL,
                                 fresh_b && r0 == 0, part);
    }
    grads_bf16(n, dh16, (int)N);
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

/* Rows r0.. (n of them) of h = res + x W^T + b into C (n rows of out),
 * with the epilogue ep (its outputs at rows r0.. of the whole result, ep's
 * bias and res unset: set here). C NULL (bf16 products, ep.c_scratch):
 * no C at all, where the GEMM can do without (tg_k_gemm_bf16_no_c);
 * false where it cannot, nothing done. With bf16 products the GEMM adds res + b
 * in its epilogue, after the products (beta = 0): C is written once and
 * never read (tg_gemm_epilogue says where that changes a bit). With float
 * products C starts at res + b (beta = 1; tg_k_epilogue_start, the GEMM's
 * own start of C summed in several passes), the order those products have
 * always had. With in = 0 the GEMM only sets
 * the rows to res + b or 0. */
static bool affine_rows(const tg_tensor *x, const tg_tensor *w, const tg_tensor *b, const tg_tensor *res, int64_t r0,
                        int64_t n, tg_real *C, tg_gemm_epilogue ep) {
    int in = w->shape[1], out = w->shape[0];
    bool bf16 = tg_prec_bf16();
    if (n <= 0) return true;
    ep.bias = b ? b->data : NULL;
    ep.res = res ? res->data + r0 * out : NULL;
    if (!C)
        return bf16 && tg_k_gemm_bf16_no_c(false, true, (int)n, out, in, x_rows_at(x, r0, in),
                                           x->dtype == TG_DTYPE_BF16, in, w->data, false, in, out, &ep);
    if (!bf16 && (b || res)) { /* C set to res + b here, the epilogue left to add nothing */
        tg_k_epilogue_start(&ep, C, out, (int)n, out, 0);
        ep.bias = ep.res = NULL;
    }
    bool plain = !ep.Y && !ep.Y16 && !ep.H16 && !ep.bias && !ep.res; /* nothing for an epilogue to do */
    product_x(bf16, true, false, true, (int)n, out, in, w->data, in, x, r0, n, in, !bf16 && (b || res) ? 1 : 0, C, out,
              plain ? NULL : &ep);
    return true;
}

/* y = act(res + x W^T + b) over all N rows, its pre-activation into h when
 * h is not NULL (act NULL: y itself is the affine map). y and h are float
 * or both bf16. bf16 ones are written by the GEMM's epilogue (y16 = bf16(f(v)),
 * h16 = bf16(v)): with bf16 products, where the GEMM keeps every block of
 * C in a thread's buffer (c_scratch: K in one block), in one product over
 * all rows with no C, W packed once; else from a float C of a chunk of
 * rows (op.h, tg__chunk_rows), which only the epilogue reads, from cache,
 * each chunk packing W again. Rows are independent: the same bits either
 * way. false: out of memory. */
static bool affine_forward(const tg_tensor *x, const tg_tensor *w, const tg_tensor *b, const tg_tensor *res,
                           tg_tensor *y, tg_tensor *h, const tg_unary_kind *act) {
    int out = w->shape[0];
    int64_t N = out ? y->size / out : 0;
    tg_gemm_epilogue ep = {.act = act ? *act : TG_UNARY_NEG, .no_act = !act};
    if (y->dtype == TG_DTYPE_REAL) {
        if (act) ep.Y = y->data;
        affine_rows(x, w, b, res, 0, N, h ? h->data : y->data, ep);
        return true;
    }
    if (N == 0) return true;
    ep.c_scratch = true; /* only y16 (and h16) wanted: the GEMM may keep C's blocks in a thread's buffer */
    ep.Y16 = y->bf16;
    ep.H16 = h ? h->bf16 : NULL;
    if (affine_rows(x, w, b, res, 0, N, NULL, ep)) return true; /* no C at all */
    int64_t R = tg__chunk_rows(out, N);
    tg_tensor *fc = tg__empty_recycled(TG_SHAPE((int)R, out)); /* C of a chunk */
    if (!fc) return false;
    for (int64_t r0 = 0; r0 < N; r0 += R) {
        int64_t n = N - r0 < R ? N - r0 : R;
        ep.Y16 = y->bf16 + r0 * out;
        ep.H16 = h ? h->bf16 + r0 * out : NULL;
        affine_rows(x, w, b, res, r0, n, fc->data, ep);
    }
    tg__tensor_recycle(fc);
    return true;
}

tg_tensor *tg_affine_to(tg_tensor *x, tg_tensor *w, tg_tensor *b, tg_dtype to) {
    tg_tensor *y = affine_output("affine", x, w, b, to);
    if (!y || !affine_forward(x, w, b, NULL, y, NULL, NULL)) return NULL;
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
    affine_forward(x, w, b, r, y, NULL, NULL);
    if (b)
        tg_node_record(&tg_op_affine_add, y, 4, (tg_tensor *[]){x, w, b, r});
    else
        tg_node_record(&tg_op_affine_add, y, 3, (tg_tensor *[]){x, w, r});
    return y;
}
tg_tensor *tg_affine(tg_tensor *x, tg_tensor *w, tg_tensor *b) { return tg_affine_to(x, w, b, TG_DTYPE_REAL); }

tg_tensor *tg_affine_gelu_to(tg_tensor *x, tg_tensor *w, tg_tensor *b, bool tanh_form, tg_dtype to) {
    const tg_op *op = tanh_form ? &tg_op_affine_gelu_tanh : &tg_op_affine_gelu;
    tg_tensor *y = affine_output(op->name, x, w, b, to);
    if (!y) return NULL;
    tg_tensor *in[3] = {x, w, b};
    /* h is kept only when the node below will be recorded (as bf16 when y is) */
    bool keep = tg_node_will_record(b ? 3 : 2, in);
    tg_tensor *h = !keep                 ? NULL
                   : to == TG_DTYPE_BF16 ? tg__empty_bf16(y->ndim, y->shape)
                                         : tg_empty_arena(y->ndim, y->shape);
    tg_unary_kind act = tanh_form ? TG_UNARY_GELU_TANH : TG_UNARY_GELU;
    if ((keep && !h) || !affine_forward(x, w, b, NULL, y, h, &act)) return NULL;
    tg_node *n = tg_node_record(op, y, b ? 3 : 2, in);
    affine_act_state *st = n ? tg_node_state(n, sizeof *st) : NULL;
    if (n && !st) return NULL;
    if (st) st->h = h;
    return y;
}
tg_tensor *tg_affine_gelu(tg_tensor *x, tg_tensor *w, tg_tensor *b, bool tanh_form) {
    return tg_affine_gelu_to(x, w, b, tanh_form, TG_DTYPE_REAL);
}
