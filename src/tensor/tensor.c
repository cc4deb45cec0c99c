/* Creating and freeing tensors. Where a tensor lives follows one rule:
 * inside a scope, in the arena; outside, persistent (see tensor.h). */
#include "tensor_internal.h"

const int TG_FLAVOUR = 1; /* see tensor.h: the flavour guard */

#include <math.h>
#include <string.h>
#include "half.h"

int64_t tg_numel(int ndim, const int *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

bool tg_same_shape(const tg_tensor *a, const tg_tensor *b) {
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

static bool valid_shape(const char *fn, int ndim, const int *shape) {
    char buf[64];
    if (ndim < 0 || ndim > TG_MAX_DIMS) {
        tg_set_error("%s: %d dimensions; tgrad supports 0 to %d", fn, ndim, TG_MAX_DIMS);
        return false;
    }
    if (ndim > 0 && !shape) {
        tg_set_error("%s: NULL shape", fn);
        return false;
    }
    /* Checked before multiplying: three int sizes overflow int64. Zeros are
     * skipped, because loops multiply the other sizes all the same: their
     * product is at most 2^40 (the elements of a tensor), or 2^62 for an
     * empty one (a size 0: numpy's (0, 2^31 - 1, 2^31 - 1) is valid), so a
     * product of some of the sizes never overflows int64. */
    int max_log2 = 40;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) {
            tg_set_error("%s: negative size in shape %s", fn, tg_shape_str(buf, ndim, shape));
            return false;
        }
        if (shape[i] == 0) max_log2 = 62;
    }
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == 0) continue;
        if (n > ((int64_t)1 << max_log2) / shape[i]) {
            tg_set_error("%s: shape %s is too large (more than 2^%d elements%s)", fn, tg_shape_str(buf, ndim, shape),
                         max_log2, max_log2 == 62 ? " beside its size 0" : "");
            return false;
        }
        n *= shape[i];
    }
    return true;
}

/* The bytes of one element of t's storage. */
static size_t elem_bytes(tg_dtype dtype) { return dtype == TG_DTYPE_BF16 ? sizeof(uint16_t) : sizeof(tg_real); }

static tg_tensor *make_as(int ndim, const int *shape, bool persistent, bool alloc_data, tg_dtype dtype) {
    if (!valid_shape("tensor", ndim, shape)) return NULL;
    int64_t n = tg_numel(ndim, shape);
    size_t bytes = alloc_data ? (size_t)n * elem_bytes(dtype) : 0;
    tg_tensor *t;
    void *data = NULL;
    if (persistent) {
        /* Header and data in one allocation: one malloc, one free. */
        size_t head = (sizeof(tg_tensor) + 63) & ~(size_t)63;
        unsigned char *mem = tg_sys_alloc(head + bytes);
        if (!mem) return NULL;
        t = (tg_tensor *)mem;
        memset(t, 0, sizeof *t);
        data = alloc_data ? mem + head : NULL;
        tg__persistent_account((long long)(head + bytes));
    } else {
        t = tg_arena_alloc(sizeof(tg_tensor));
        if (!t) return NULL;
        memset(t, 0, sizeof *t);
        if (alloc_data && !(data = tg_arena_alloc(bytes))) return NULL;
    }
    if (dtype == TG_DTYPE_BF16)
        t->bf16 = data;
    else
        t->data = data;
    t->dtype = dtype;
    t->magic = TG_MAGIC;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    t->size = n;
    t->persistent = persistent;
    t->owns_data = alloc_data;
    return t;
}
static tg_tensor *make(int ndim, const int *shape, bool persistent, bool alloc_data) {
    return make_as(ndim, shape, persistent, alloc_data, TG_DTYPE_REAL);
}

tg_tensor *tg_empty(int ndim, const int *shape) { return make(ndim, shape, tg_scope_depth() == 0, true); }
tg_tensor *tg_empty_persistent(int ndim, const int *shape) { return make(ndim, shape, true, true); }
tg_tensor *tg_empty_arena(int ndim, const int *shape) { return make(ndim, shape, false, true); }

tg_tensor *tg__empty_recycled(int ndim, const int *shape) {
    tg_tensor *t = make(ndim, shape, false, false);
    if (!t) return NULL;
    size_t bytes = (size_t)t->size * sizeof(tg_real);
    t->data = tg__arena_reuse(bytes);
    if (!t->data && !(t->data = tg_arena_alloc(bytes))) return NULL;
    t->owns_data = true;
    return t;
}

tg_tensor *tg__empty_bf16(int ndim, const int *shape) { return make_as(ndim, shape, false, true, TG_DTYPE_BF16); }

void tg__tensor_recycle(tg_tensor *t) {
    if (!t || t->persistent) return;
    void *p = t->dtype == TG_DTYPE_BF16 ? (void *)t->bf16 : (void *)t->data;
    if (t->owns_data && p) tg__arena_recycle(p, (size_t)t->size * elem_bytes(t->dtype));
    t->magic = 0; /* a pointer kept to it is refused by the ops from now on (tg_any_null) */
    t->data = NULL;
    t->bf16 = NULL;
}

tg_tensor *tg_full(int ndim, const int *shape, tg_real value) {
    tg_tensor *t = tg_empty(ndim, shape);
    if (t)
        for (int64_t i = 0; i < t->size; i++) t->data[i] = value;
    return t;
}
tg_tensor *tg_zeros(int ndim, const int *shape) {
    tg_tensor *t = tg_empty(ndim, shape);
    if (t) memset(t->data, 0, (size_t)t->size * sizeof(tg_real));
    return t;
}
tg_tensor *tg_ones(int ndim, const int *shape) { return tg_full(ndim, shape, 1); }

tg_tensor *tg_zeros_like(const tg_tensor *t) {
    if (!t) {
        tg_error_null("zeros_like");
        return NULL;
    }
    return tg_zeros(t->ndim, t->shape);
}

tg_tensor *tg_arange(tg_real start, tg_real stop, tg_real step) {
    if (!isfinite((double)start) || !isfinite((double)stop) || !isfinite((double)step)) {
        tg_set_error("arange: start %g, stop %g and step %g must be finite", (double)start, (double)stop, (double)step);
        return NULL;
    }
    if (step == 0 || (stop - start) / step > (tg_real)1e9) {
        tg_set_error("arange: bad step %g for [%g, %g)", (double)step, (double)start, (double)stop);
        return NULL;
    }
    int64_t n = 0;
    while ((step > 0 && start + n * step < stop) || (step < 0 && start + n * step > stop)) n++;
    int shape[1] = {(int)n};
    tg_tensor *t = tg_empty(1, shape);
    if (t)
        for (int64_t i = 0; i < n; i++) t->data[i] = start + (tg_real)i * step;
    return t;
}

tg_tensor *tg_from_array(int ndim, const int *shape, const tg_real *values) {
    if (!values) {
        tg_set_error("from_array: NULL values");
        return NULL;
    }
    tg_tensor *t = tg_empty(ndim, shape);
    if (t) memcpy(t->data, values, (size_t)t->size * sizeof(tg_real));
    return t;
}

tg_tensor *tg_clone(const tg_tensor *src) {
    if (!src) {
        tg_error_null("clone");
        return NULL;
    }
    if (src->dtype == TG_DTYPE_BF16) { /* a copy of the same storage, in the arena as every bf16 tensor */
        tg_tensor *t = tg__empty_bf16(src->ndim, src->shape);
        if (t) memcpy(t->bf16, src->bf16, (size_t)t->size * sizeof(uint16_t));
        return t;
    }
    return tg_from_array(src->ndim, src->shape, src->data);
}

tg_tensor *tg_view(const tg_tensor *src, int ndim, const int *shape) {
    char b1[64], b2[64];
    if (!src) {
        tg_error_null("view");
        return NULL;
    }
    if (!valid_shape("view", ndim, shape)) return NULL;
    if (tg_numel(ndim, shape) != src->size) {
        tg_set_error("view: %s to %s: %lld elements vs %lld", tg_tshape(b1, src), tg_shape_str(b2, ndim, shape),
                     (long long)src->size, (long long)tg_numel(ndim, shape));
        return NULL;
    }
    tg_tensor *t = make(ndim, shape, tg_scope_depth() == 0, false);
    if (t) {
        t->data = src->data;
        t->bf16 = src->bf16;
        t->dtype = src->dtype;
    }
    return t;
}

void tg_free(tg_tensor *t) {
    if (!t || !t->persistent || t->magic != TG_MAGIC) return;
    if (t->grad && t->grad->persistent) tg_free(t->grad);
    size_t head = (sizeof(tg_tensor) + 63) & ~(size_t)63;
    tg__persistent_account(-(long long)(head + (t->owns_data ? (size_t)t->size * elem_bytes(t->dtype) : 0)));
    t->magic = 0;
    tg_sys_free(t);
}

tg_real tg_item(const tg_tensor *t) {
    if (!t || t->size <= 0) return 0;
    return t->dtype == TG_DTYPE_BF16 ? (tg_real)tg__bf16_to_float(t->bf16[0]) : t->data[0];
}

bool tg_broadcast_shape(int na, const int *sa, int nb, const int *sb, int *nout, int *out) {
    int nd = na > nb ? na : nb;
    for (int i = 0; i < nd; i++) {
        int da = i - (nd - na) >= 0 ? sa[i - (nd - na)] : 1;
        int db = i - (nd - nb) >= 0 ? sb[i - (nd - nb)] : 1;
        if (da != db && da != 1 && db != 1) return false;
        out[i] = da == 1 ? db : da;
    }
    *nout = nd;
    return true;
}
