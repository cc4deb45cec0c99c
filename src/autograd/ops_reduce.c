/* Reductions along one axis. The input is viewed as [outer, n, inner]:
 *   sum:  y[o,i] = sum_k x[o,k,i]        dx[o,k,i] += g[o,i]
 *   mean: y = sum / n                     dx[o,k,i] += g[o,i] / n
 *   max:  y[o,i] = x[o,k*,i]              dx[o,k*,i] += g[o,i]  (first maximum)
 * The *_all variants flatten first, so they are compositions, not new ops. */
#include "op.h"

#include <string.h>

typedef struct {
    int64_t outer, n, inner;
    int nd;
    int shape[TG_MAX_DIMS];
} reduce_plan;

static bool plan(const char *op, const tg_tensor *a, int axis, bool keepdim, reduce_plan *p) {
    char b[64];
    if (axis < -a->ndim || axis >= a->ndim || a->ndim == 0) {
        tg_set_error("%s: axis %d out of range for shape %s", op, axis, tg_tshape(b, a));
        return false;
    }
    if (axis < 0) axis += a->ndim;
    p->outer = p->inner = 1;
    for (int i = 0; i < axis; i++) p->outer *= a->shape[i];
    for (int i = axis + 1; i < a->ndim; i++) p->inner *= a->shape[i];
    p->n = a->shape[axis];
    if (p->n == 0 && strcmp(op, "sum") != 0) {
        tg_set_error("%s: axis %d of shape %s is empty", op, axis, tg_tshape(b, a));
        return false;
    }
    p->nd = 0;
    for (int i = 0; i < a->ndim; i++) {
        if (i == axis && !keepdim) continue;
        p->shape[p->nd++] = i == axis ? 1 : a->shape[i];
    }
    return true;
}

/* What sum, mean and max backward read: the axis view, and for max the
 * index of the first maximum of each output element (arena). */
typedef struct {
    int64_t outer, n, inner;
    const int64_t *argmax; /* max only */
} reduce_state;

static reduce_state *save_dims(tg_node *n, const reduce_plan *p) {
    reduce_state *st = tg_node_state(n, sizeof *st);
    if (st) {
        st->outer = p->outer;
        st->n = p->n;
        st->inner = p->inner;
    }
    return st;
}

/* dx[o,k,i] += scale * g[o,i] */
static void spread_backward(tg_node *n, tg_real scale) {
    tg_tensor *gx = tg_grad_of(n->in[0]);
    if (!gx) return;
    const reduce_state *st = n->state;
    int64_t outer = st->outer, len = st->n, inner = st->inner;
    const tg_real *g = n->out->grad->data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < len; k++) {
            tg_real *d = gx->data + (o * len + k) * inner;
            for (int64_t i = 0; i < inner; i++) d[i] += scale * g[o * inner + i];
        }
}

static void sum_backward(tg_node *n) { spread_backward(n, 1); }
static void mean_backward(tg_node *n) { spread_backward(n, (tg_real)1 / (tg_real)((const reduce_state *)n->state)->n); }

const tg_op tg_op_sum = {"sum", sum_backward};
const tg_op tg_op_mean = {"mean", mean_backward};

static tg_tensor *sum_like(const tg_op *op, tg_tensor *a, int axis, bool keepdim, bool mean) {
    reduce_plan p;
    if (tg_any_null(op->name, 1, (const tg_tensor *const[]){a})) return NULL;
    if (!plan(op->name, a, axis, keepdim, &p)) return NULL;
    tg_tensor *y = tg_empty_arena(p.nd, p.shape);
    if (!y) return NULL;
    tg_k_sum_axis(a->data, y->data, p.outer, p.n, p.inner);
    if (mean)
        for (int64_t i = 0; i < y->size; i++) y->data[i] /= (tg_real)p.n;
    tg_node *n = tg_node_record(op, y, 1, &a);
    if (n && !save_dims(n, &p)) return NULL;
    return y;
}

tg_tensor *tg_sum(tg_tensor *a, int axis, bool keepdim) { return sum_like(&tg_op_sum, a, axis, keepdim, false); }
tg_tensor *tg_mean(tg_tensor *a, int axis, bool keepdim) { return sum_like(&tg_op_mean, a, axis, keepdim, true); }

static void max_backward(tg_node *n) {
    tg_tensor *gx = tg_grad_of(n->in[0]);
    if (!gx) return;
    const reduce_state *st = n->state;
    int64_t len = st->n, inner = st->inner;
    const int64_t *arg = st->argmax;
    const tg_real *g = n->out->grad->data;
    for (int64_t j = 0; j < n->out->size; j++) {
        int64_t o = j / inner, i = j % inner;
        gx->data[(o * len + arg[j]) * inner + i] += g[j];
    }
}
const tg_op tg_op_max = {"max", max_backward};

tg_tensor *tg_max(tg_tensor *a, int axis, bool keepdim) {
    reduce_plan p;
    if (tg_any_null("max", 1, (const tg_tensor *const[]){a})) return NULL;
    if (!plan("max", a, axis, keepdim, &p)) return NULL;
    tg_tensor *y = tg_empty_arena(p.nd, p.shape);
    int64_t *arg = tg_arena_alloc(sizeof(int64_t) * (size_t)(y ? y->size : 0));
    if (!y || !arg) return NULL;
    tg_k_max_axis(a->data, y->data, arg, p.outer, p.n, p.inner);
    tg_node *n = tg_node_record(&tg_op_max, y, 1, &a);
    if (n) {
        reduce_state *st = save_dims(n, &p);
        if (!st) return NULL;
        st->argmax = arg;
    }
    return y;
}

/* Whole-tensor reductions: flatten (a view) and reduce axis 0 to shape (). */
static tg_tensor *flat(const char *op, tg_tensor *a) {
    if (tg_any_null(op, 1, (const tg_tensor *const[]){a})) return NULL;
    return tg_reshape(a, 1, (const int[]){(int)a->size});
}
tg_tensor *tg_sum_all(tg_tensor *a) { return tg_sum(flat("sum_all", a), 0, false); }
tg_tensor *tg_mean_all(tg_tensor *a) { return tg_mean(flat("mean_all", a), 0, false); }
tg_tensor *tg_max_all(tg_tensor *a) { return tg_max(flat("max_all", a), 0, false); }
