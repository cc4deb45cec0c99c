/* Softmax and log-softmax along the last axis.
 *   y = softmax(x):     dx = y * (g - sum_j g_j y_j)
 *   y = log_softmax(x): dx = g - softmax(x) * sum_j g_j,  softmax(x) = exp(y) */
#include "op.h"

#include <math.h>

static tg_tensor *softmax_like(const tg_op *op, tg_tensor *a, bool log_form) {
    char b[64];
    if (tg_any_null(op->name, 1, (const tg_tensor *const[]){a})) return NULL;
    if (a->ndim == 0 || a->shape[a->ndim - 1] == 0) {
        tg_set_error("%s: shape %s has no last axis to normalise", op->name, tg_tshape(b, a));
        return NULL;
    }
    tg_tensor *y = tg_empty_arena(a->ndim, a->shape);
    if (!y) return NULL;
    int64_t n = a->shape[a->ndim - 1];
    if (log_form)
        tg_k_log_softmax_rows(a->data, y->data, a->size / n, n);
    else
        tg_k_softmax_rows(a->data, y->data, a->size / n, n);
    tg_node_record(op, y, 1, &a);
    return y;
}

static void softmax_backward_row(const tg_rows_ctx *c, int64_t r) {
    int64_t n = c->n;
    tg_k_softmax_row_backward(c->y->data + r * n, c->g + r * n, c->gx->data + r * n, n, n, !c->fresh);
}

static void softmax_backward(tg_node *nd) {
    bool fresh;
    tg_tensor *gx = tg_grad_begin(nd->in[0], &fresh);
    if (!gx) return;
    const tg_tensor *y = nd->out;
    int64_t n = y->shape[y->ndim - 1], rows = y->size / n;
    const tg_real *g = y->grad->data;
    tg_parallel_rows_ns(rows, (double)y->size * 2 * TG_NS_STREAM, softmax_backward_row,
                        &(tg_rows_ctx){.y = y, .gx = gx, .g = g, .n = n, .fresh = fresh});
}

/* dx = g - exp(y) sum(g), y = log_softmax(x) */
static void log_softmax_backward_row(const tg_rows_ctx *c, int64_t r) {
    const int64_t n = c->n;
    const tg_real *yr = c->y->data + r * n, *gr = c->g + r * n;
    tg_real *dx = c->gx->data + r * n, sum = 0;
    for (int64_t j = 0; j < n; j++) sum += gr[j];
    for (int64_t j = 0; j < n; j++) dx[j] += gr[j] - TG_M(exp)(yr[j]) * sum;
}

static void log_softmax_backward(tg_node *nd) {
    tg_tensor *gx = tg_grad_of(nd->in[0]);
    if (!gx) return;
    const tg_tensor *y = nd->out;
    int64_t n = y->shape[y->ndim - 1], rows = y->size / n;
    const tg_real *g = y->grad->data;
    tg_parallel_rows_ns(rows, (double)y->size * TG_NS_LIBM, log_softmax_backward_row,
                        &(tg_rows_ctx){.y = y, .gx = gx, .g = g, .n = n});
}

const tg_op tg_op_softmax = {"softmax", softmax_backward};
const tg_op tg_op_log_softmax = {"log_softmax", log_softmax_backward};

tg_tensor *tg_softmax(tg_tensor *a) { return softmax_like(&tg_op_softmax, a, false); }
tg_tensor *tg_log_softmax(tg_tensor *a) { return softmax_like(&tg_op_log_softmax, a, true); }
