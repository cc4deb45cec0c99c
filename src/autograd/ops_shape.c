/* Ops that move values without changing them. Each backward sends the
 * gradient back to where the value came from:
 *   reshape:  dx = reshape(g, x.shape)        (a view: no copy forward)
 *   permute:  dx = permute(g, inverse(perm))
 *   slice:    dx[.., start:stop, ..] += g
 *   concat:   dx_i += g[.., offset_i : offset_i + n_i, ..]
 *   gather:   dtable[ids[j]] += g[j]           (rows that repeat add up)
 * and the two casts between tg_real and bf16 storage (tensor.h, tg_dtype),
 * whose backward is reshape's: the gradient passes through unchanged, as
 * torch's .to(dtype) passes it (the rounding is a step function, whose
 * derivative is taken as 1: the straight-through rule of every mixed
 * precision training), and a bf16 tensor's gradient is tg_real. */
#include "op.h"

#include <string.h>
#include "tensor/tensor_internal.h" /* tg__empty_bf16 */

static void add_into(tg_tensor *gx, const tg_real *g) {
    for (int64_t i = 0; i < gx->size; i++) gx->data[i] += g[i];
}

/* ---- reshape ---- */
static void reshape_backward(tg_node *n) {
    bool fresh;
    tg_tensor *g = n->out->grad;
    if (tg_grad_share(n->in[0], g)) return; /* the same values: no copy (the usual case) */
    tg_tensor *gx = tg_grad_begin(n->in[0], &fresh);
    if (gx && fresh)
        memcpy(gx->data, g->data, sizeof(tg_real) * (size_t)gx->size);
    else if (gx && !fresh)
        add_into(gx, g->data);
}
const tg_op tg_op_reshape = {"reshape", reshape_backward};

tg_tensor *tg_reshape(tg_tensor *a, int ndim, const int *shape) {
    char b1[64], b2[64];
    if (tg_any_bad("reshape", 1, (const tg_tensor *const[]){a}, 1)) return NULL;
    if (ndim < 0 || ndim > TG_MAX_DIMS || (ndim && !shape)) {
        tg_set_error("reshape: %s to %d dimensions", tg_tshape(b1, a), ndim);
        return NULL;
    }
    int s[TG_MAX_DIMS], infer = -1;
    int64_t known = 1;
    for (int i = 0; i < ndim; i++) {
        s[i] = shape[i];
        if (s[i] == -1 && infer < 0)
            infer = i;
        else if (s[i] < 0) {
            tg_set_error("reshape: %s to %s: bad size", tg_tshape(b1, a), tg_shape_str(b2, ndim, shape));
            return NULL;
        } else
            known *= s[i];
    }
    if (infer >= 0 && known > 0 && a->size % known == 0) s[infer] = (int)(a->size / known);
    if ((infer >= 0 && (known == 0 || a->size % known != 0)) || tg_numel(ndim, s) != a->size) {
        tg_set_error("reshape: %s to %s: %lld elements do not fit", tg_tshape(b1, a), tg_shape_str(b2, ndim, shape),
                     (long long)a->size);
        return NULL;
    }
    tg_tensor *y = tg_empty_arena(0, NULL); /* header only; shares a's data */
    if (!y) return NULL;
    y->ndim = ndim;
    memcpy(y->shape, s, sizeof(int) * (size_t)ndim);
    y->size = a->size;
    y->data = a->data;
    y->bf16 = a->bf16;
    y->dtype = a->dtype;
    y->owns_data = false;
    tg_node_record(&tg_op_reshape, y, 1, &a);
    return y;
}

/* ---- to_bf16 / to_real ---- */
const tg_op tg_op_to_bf16 = {"to_bf16", reshape_backward};
const tg_op tg_op_to_real = {"to_real", reshape_backward};

void tg__cast_into(const tg_tensor *x, tg_tensor *y) {
    if (y->dtype == TG_DTYPE_BF16)
        tg_k_to_bf16(x->data, y->bf16, x->size);
    else
        tg_k_from_bf16(x->bf16, y->data, x->size);
}

/* x stored as `to`: x itself when it already is (torch's .to), else a new
 * arena tensor of x's shape, recorded as op. */
static tg_tensor *cast(const tg_op *op, tg_tensor *x, tg_dtype to) {
    if (tg_any_bad(op->name, 1, (const tg_tensor *const[]){x}, 1)) return NULL;
    if (x->dtype == to) return x;
    tg_tensor *y = to == TG_DTYPE_BF16 ? tg__empty_bf16(x->ndim, x->shape) : tg_empty_arena(x->ndim, x->shape);
    if (!y) return NULL;
    tg__cast_into(x, y);
    tg_node_record(op, y, 1, &x);
    return y;
}
tg_tensor *tg_to_bf16(tg_tensor *x) { return cast(&tg_op_to_bf16, x, TG_DTYPE_BF16); }
tg_tensor *tg_to_real(tg_tensor *x) { return cast(&tg_op_to_real, x, TG_DTYPE_REAL); }

/* ---- permute / transpose ---- */
typedef struct {
    int perm[TG_MAX_DIMS];
} permute_state;

static void permute_backward(tg_node *n) {
    bool fresh;
    tg_tensor *gx = tg_grad_begin(n->in[0], &fresh);
    if (!gx) return;
    int nd = n->out->ndim, inv[TG_MAX_DIMS];
    const permute_state *st = n->state;
    for (int i = 0; i < nd; i++) inv[st->perm[i]] = i;
    tg_tensor *t = fresh ? gx : tg_backward_scratch_tensor(gx->ndim, gx->shape);
    tg_k_permute(n->out->grad, inv, t);
    if (!fresh) add_into(gx, t->data);
}
const tg_op tg_op_permute = {"permute", permute_backward};

tg_tensor *tg_permute(tg_tensor *a, const int *perm) {
    char b[64];
    if (tg_any_null("permute", 1, (const tg_tensor *const[]){a})) return NULL;
    if (!perm) {
        tg_set_error("permute: NULL permutation for %s", tg_tshape(b, a));
        return NULL;
    }
    int seen[TG_MAX_DIMS] = {0}, shape[TG_MAX_DIMS];
    for (int i = 0; i < a->ndim; i++) {
        if (perm[i] < 0 || perm[i] >= a->ndim || seen[perm[i]]++) {
            tg_set_error("permute: %s: entry %d (%d) is not a permutation of 0..%d", tg_tshape(b, a), i, perm[i],
                         a->ndim - 1);
            return NULL;
        }
        shape[i] = a->shape[perm[i]];
    }
    tg_tensor *y = tg_empty_arena(a->ndim, shape);
    if (!y) return NULL;
    tg_k_permute(a, perm, y);
    tg_node *n = tg_node_record(&tg_op_permute, y, 1, &a);
    if (n) {
        permute_state *st = tg_node_state(n, sizeof *st);
        if (!st) return NULL;
        memcpy(st->perm, perm, sizeof(int) * (size_t)a->ndim);
    }
    return y;
}

tg_tensor *tg_transpose(tg_tensor *a, int d0, int d1) {
    char b[64];
    if (tg_any_null("transpose", 1, (const tg_tensor *const[]){a})) return NULL;
    if (d0 < 0) d0 += a->ndim;
    if (d1 < 0) d1 += a->ndim;
    if (d0 < 0 || d0 >= a->ndim || d1 < 0 || d1 >= a->ndim) {
        tg_set_error("transpose: axes (%d,%d) out of range for shape %s", d0, d1, tg_tshape(b, a));
        return NULL;
    }
    int perm[TG_MAX_DIMS];
    for (int i = 0; i < a->ndim; i++) perm[i] = i;
    perm[d0] = d1;
    perm[d1] = d0;
    return tg_permute(a, perm);
}

/* ---- slice and concat share one copy: a block of `len` rows along an axis
 * viewed as [outer, n, inner] ---- */
static void copy_block(tg_real *dst, int64_t dn, int64_t doff, const tg_real *src, int64_t sn, int64_t soff,
                       int64_t outer, int64_t len, int64_t inner, bool add) {
    for (int64_t o = 0; o < outer; o++) {
        tg_real *d = dst + (o * dn + doff) * inner;
        const tg_real *s = src + (o * sn + soff) * inner;
        if (add)
            for (int64_t i = 0; i < len * inner; i++) d[i] += s[i];
        else
            memcpy(d, s, sizeof(tg_real) * (size_t)(len * inner));
    }
}

static void axis_dims(const tg_tensor *t, int axis, int64_t *outer, int64_t *inner) {
    *outer = *inner = 1;
    for (int i = 0; i < axis; i++) *outer *= t->shape[i];
    for (int i = axis + 1; i < t->ndim; i++) *inner *= t->shape[i];
}

typedef struct {
    int axis, start;
} slice_state;

static void slice_backward(tg_node *n) {
    tg_tensor *gx = tg_grad_of(n->in[0]);
    if (!gx) return;
    const slice_state *st = n->state;
    int axis = st->axis, start = st->start;
    int64_t outer, inner;
    axis_dims(gx, axis, &outer, &inner);
    copy_block(gx->data, gx->shape[axis], start, n->out->grad->data, n->out->shape[axis], 0, outer, n->out->shape[axis],
               inner, true);
}
const tg_op tg_op_slice = {"slice", slice_backward};

tg_tensor *tg_slice(tg_tensor *a, int axis, int start, int stop) {
    char b[64];
    if (tg_any_null("slice", 1, (const tg_tensor *const[]){a})) return NULL;
    if (axis < 0) axis += a->ndim;
    if (axis < 0 || axis >= a->ndim) {
        tg_set_error("slice: axis %d out of range for shape %s", axis, tg_tshape(b, a));
        return NULL;
    }
    if (start < 0 || stop > a->shape[axis] || start > stop) {
        tg_set_error("slice: [%d:%d) along axis %d of shape %s is out of bounds", start, stop, axis, tg_tshape(b, a));
        return NULL;
    }
    int shape[TG_MAX_DIMS];
    memcpy(shape, a->shape, sizeof shape);
    shape[axis] = stop - start;
    tg_tensor *y = tg_empty_arena(a->ndim, shape);
    if (!y) return NULL;
    int64_t outer, inner;
    axis_dims(a, axis, &outer, &inner);
    copy_block(y->data, shape[axis], 0, a->data, a->shape[axis], start, outer, shape[axis], inner, false);
    tg_node *n = tg_node_record(&tg_op_slice, y, 1, &a);
    if (n) {
        slice_state *st = tg_node_state(n, sizeof *st);
        if (!st) return NULL;
        *st = (slice_state){axis, start};
    }
    return y;
}

typedef struct {
    int axis;
} concat_state;

static void concat_backward(tg_node *n) {
    int axis = ((const concat_state *)n->state)->axis;
    const tg_tensor *y = n->out;
    int64_t outer, inner, off = 0;
    axis_dims(y, axis, &outer, &inner);
    for (int i = 0; i < n->n_in; i++) {
        int len = n->in[i]->shape[axis];
        tg_tensor *gx = tg_grad_of(n->in[i]);
        if (gx) copy_block(gx->data, len, 0, y->grad->data, y->shape[axis], off, outer, len, inner, true);
        off += len;
    }
}
const tg_op tg_op_concat = {"concat", concat_backward};

tg_tensor *tg_concat(int n, tg_tensor *const *ts, int axis) {
    char b1[64], b2[64];
    if (n < 1 || n > TG_NODE_MAX_INPUTS || !ts) {
        tg_set_error("concat: %d tensors; 1 to %d supported", n, TG_NODE_MAX_INPUTS);
        return NULL;
    }
    if (tg_any_null("concat", n, (const tg_tensor *const *)ts)) return NULL;
    const tg_tensor *a = ts[0];
    if (axis < 0) axis += a->ndim;
    if (axis < 0 || axis >= a->ndim) {
        tg_set_error("concat: axis %d out of range for shape %s", axis, tg_tshape(b1, a));
        return NULL;
    }
    int shape[TG_MAX_DIMS];
    memcpy(shape, a->shape, sizeof shape);
    for (int i = 1; i < n; i++) {
        bool ok = ts[i]->ndim == a->ndim;
        for (int d = 0; ok && d < a->ndim; d++) ok = d == axis || ts[i]->shape[d] == a->shape[d];
        if (!ok) {
            tg_set_error("concat: shapes %s and %s differ outside axis %d", tg_tshape(b1, a), tg_tshape(b2, ts[i]),
                         axis);
            return NULL;
        }
        shape[axis] += ts[i]->shape[axis];
    }
    tg_tensor *y = tg_empty_arena(a->ndim, shape);
    if (!y) return NULL;
    int64_t outer, inner, off = 0;
    axis_dims(y, axis, &outer, &inner);
    for (int i = 0; i < n; i++) {
        int len = ts[i]->shape[axis];
        copy_block(y->data, shape[axis], off, ts[i]->data, len, 0, outer, len, inner, false);
        off += len;
    }
    tg_node *nd = tg_node_record(&tg_op_concat, y, n, ts);
    if (nd) {
        concat_state *st = tg_node_state(nd, sizeof *st);
        if (!st) return NULL;
        st->axis = axis;
    }
    return y;
}

/* ---- gather rows (embedding lookup) ---- */
typedef struct {
    const int *ids;
} gather_rows_state; /* a copy of the ids, in the arena */

/* The embedding's backward, table[ids[j]] += g[j], split into pieces that
 * own the table rows id % GATHER_BUCKETS == bucket, in column blocks of
 * GATHER_COLS: each piece walks every position j in order and adds only
 * its own, so every element sums its terms in position order, as one
 * thread would: the same bits at any split. A bucket by id modulo, not by
 * range, keeps the pieces even when the ids in use are few and close
 * (bytes of text in a 50257-token table). Pieces: 16 x d / 64. */
#define GATHER_BUCKETS 16 /* a power of 2 */
#define GATHER_COLS    64
typedef struct {
    const int *ids;
    const tg_real *g;
    tg_real *table;
    int64_t count, d, cblocks;
} gather_ctx;

static void gather_backward_pieces(void *ctx, int64_t b, int64_t e, int tid) {
    const gather_ctx *c = ctx;
    (void)tid;
    for (int64_t p = b; p < e; p++) {
        int bucket = (int)(p / c->cblocks);
        int64_t k0 = p % c->cblocks * GATHER_COLS, w = c->d - k0 < GATHER_COLS ? c->d - k0 : GATHER_COLS;
        for (int64_t j = 0; j < c->count; j++) {
            if ((c->ids[j] & (GATHER_BUCKETS - 1)) != bucket) continue; /* ids >= 0: the forward checked */
            tg_real *dst = c->table + (int64_t)c->ids[j] * c->d + k0;
            const tg_real *src = c->g + j * c->d + k0;
#pragma omp simd
            for (int64_t k = 0; k < w; k++) dst[k] += src[k];
        }
    }
}

static void gather_backward(tg_node *n) {
    tg_tensor *gt = tg_grad_of(n->in[0]);
    if (!gt) return;
    gather_ctx c = {.ids = ((const gather_rows_state *)n->state)->ids, .g = n->out->grad->data, .table = gt->data};
    c.d = n->in[0]->shape[1];
    c.count = n->out->size / (c.d ? c.d : 1);
    c.cblocks = (c.d + GATHER_COLS - 1) / GATHER_COLS;
    tg_parallel_for_ns(GATHER_BUCKETS * c.cblocks, (double)n->out->size * TG_NS_STREAM, gather_backward_pieces, &c);
}

/* Forward rows [j0, j1): y[j] = table[ids[j]] (copies: any split). */
static void gather_forward_rows(void *ctx, int64_t j0, int64_t j1, int tid) {
    const gather_ctx *c = ctx;
    (void)tid;
    for (int64_t j = j0; j < j1; j++)
        memcpy(c->table + j * c->d, c->g + (int64_t)c->ids[j] * c->d, sizeof(tg_real) * (size_t)c->d);
}
const tg_op tg_op_gather_rows = {"gather_rows", gather_backward};

tg_tensor *tg_gather_rows(tg_tensor *table, const int *ids, int ndim, const int *shape) {
    char b1[64], b2[64];
    if (tg_any_null("gather_rows", 1, (const tg_tensor *const[]){table})) return NULL;
    if (table->ndim != 2 || ndim < 0 || ndim >= TG_MAX_DIMS || (ndim && !shape) || !ids) {
        tg_set_error("gather_rows: table %s with ids of %d dimensions: need a 2-D table and ids of "
                     "at most %d dimensions",
                     tg_tshape(b1, table), ndim, TG_MAX_DIMS - 1);
        return NULL;
    }
    int64_t count = tg_numel(ndim, shape), V = table->shape[0], d = table->shape[1];
    for (int64_t j = 0; j < count; j++)
        if (ids[j] < 0 || ids[j] >= V) {
            tg_set_error("gather_rows: id %d at position %lld is outside [0, %lld) for table %s "
                         "(ids shape %s)",
                         ids[j], (long long)j, (long long)V, tg_tshape(b1, table), tg_shape_str(b2, ndim, shape));
            return NULL;
        }
    int oshape[TG_MAX_DIMS];
    memcpy(oshape, shape, sizeof(int) * (size_t)ndim);
    oshape[ndim] = (int)d;
    tg_tensor *y = tg_empty_arena(ndim + 1, oshape);
    if (!y) return NULL;
    /* (the context's g is the table read, its table the output written) */
    gather_ctx c = {.ids = ids, .g = table->data, .table = y->data, .count = count, .d = d};
    tg_parallel_for_ns(count, (double)y->size * TG_NS_STREAM, gather_forward_rows, &c);
    tg_node *n = tg_node_record(&tg_op_gather_rows, y, 1, &table);
    if (n) {
        gather_rows_state *st = tg_node_state(n, sizeof *st);
        int *copy = tg_arena_alloc(sizeof(int) * (size_t)(count ? count : 1));
        if (!st || !copy) return NULL;
        memcpy(copy, ids, sizeof(int) * (size_t)count);
        st->ids = copy;
    }
    return y;
}
