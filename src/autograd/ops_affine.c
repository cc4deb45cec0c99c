/* The affine map of a Linear layer over the last axis, as torch's
 * nn.functional.linear:
 *   y = x W^T + b,   x [..., in], W [out, in], b [out] or none, y [..., out]
 * With x viewed as [N, in], the forward is one GEMM whose C starts as b in
 * every row (beta = 1): the bias costs no pass of its own (a GEMM
 * epilogue), nor a tensor for x W^T. Backward (as matmul and add):
 *   dx = dy W,   dW += dy^T x,   db += sum_rows dy
 * Under TG_PREC_BF16 (autograd.h) the three products are bf16 with float
 * sums; the bias and its gradient stay float. */
#include "op.h"

#include <string.h>

static void affine_backward(tg_node *n) {
    tg_tensor *x = n->in[0], *w = n->in[1], *b = n->n_in == 3 ? n->in[2] : NULL;
    const tg_tensor *dy = n->out->grad;
    int in = w->shape[1], out = w->shape[0], N = (int)(x->size / in);
    bool fresh;
    tg_tensor *g = tg_grad_begin(x, &fresh);
    if (g) TG_GEMM(n->bf16, false, false, N, in, out, 1, dy->data, out, w->data, in, fresh ? 0 : 1, g->data, in);
    if ((g = tg_grad_begin(w, &fresh)))
        TG_GEMM(n->bf16, true, false, out, in, N, 1, dy->data, out, x->data, in, fresh ? 0 : 1, g->data, in);
    if (b && (g = tg_grad_begin(b, &fresh))) tg_k_sum_to(dy, g, !fresh);
}
const tg_op tg_op_affine = {"affine", affine_backward};

tg_tensor *tg_affine(tg_tensor *x, tg_tensor *w, tg_tensor *b) {
    char b1[64], b2[64], b3[64];
    if (tg_any_null("affine", 2, (const tg_tensor *const[]){x, w})) return NULL;
    int in = w->ndim == 2 ? w->shape[1] : -1, out = w->ndim == 2 ? w->shape[0] : -1;
    if (x->ndim < 1 || w->ndim != 2 || x->shape[x->ndim - 1] != in || (b && (b->ndim != 1 || b->shape[0] != out))) {
        tg_set_error("affine: x %s, weight %s, bias %s: need x [..., in], weight [out, in], bias [out] or NULL",
                     tg_tshape(b1, x), tg_tshape(b2, w), b ? tg_tshape(b3, b) : "NULL");
        return NULL;
    }
    int shape[TG_MAX_DIMS];
    memcpy(shape, x->shape, sizeof(int) * (size_t)x->ndim);
    shape[x->ndim - 1] = out;
    tg_tensor *y = tg_empty_arena(x->ndim, shape);
    if (!y) return NULL;
    int64_t N = in ? x->size / in : 0;
    for (int64_t r = 0; b && r < N; r++) memcpy(y->data + r * out, b->data, sizeof(tg_real) * (size_t)out);
    if (N > 0)
        TG_GEMM(tg_prec_bf16(), false, true, (int)N, out, in, 1, x->data, in, w->data, in, b ? 1 : 0, y->data, out);
    tg_node_record(&tg_op_affine, y, b ? 3 : 2, (tg_tensor *[]){x, w, b});
    return y;
}
