/* Axis permutation (a copy): out[i0..ik] = x[i_{inv perm}], walking the
 * output in order, one output row (last axis) at a time, and x with
 * permuted strides. The x offset of each row is carried from the previous
 * row like an odometer (no division per row), and a row whose last axis
 * stays last (the attention head split, (B,T,h,d) -> (B,h,T,d)) is a
 * contiguous copy. */
#include "kernels.h"
#include "parallel.h"

#include <string.h>

/* Output rows [r0, r1); st[d] is x's stride along output axis d. */
static void permute_rows(const tg_tensor *x, tg_tensor *out, const int64_t *st, int64_t r0, int64_t r1) {
    int nd = out->ndim;
    int64_t inner = out->shape[nd - 1], si = st[nd - 1];
    int64_t idx[TG_MAX_DIMS] = {0}, off = 0, rem = r0;
    for (int d = nd - 2; d >= 0; d--) {
        idx[d] = rem % out->shape[d];
        rem /= out->shape[d];
        off += idx[d] * st[d];
    }
    for (int64_t r = r0; r < r1; r++) {
        tg_real *o = out->data + r * inner;
        const tg_real *src = x->data + off;
        if (si == 1)
            memcpy(o, src, sizeof(tg_real) * (size_t)inner);
        else
            for (int64_t j = 0; j < inner; j++) o[j] = src[j * si];
        for (int d = nd - 2; d >= 0; d--) { /* next row: advance the odometer */
            if (++idx[d] < out->shape[d]) {
                off += st[d];
                break;
            }
            off -= st[d] * (out->shape[d] - 1);
            idx[d] = 0;
        }
    }
}

typedef struct {
    const tg_tensor *x;
    tg_tensor *out;
    const int64_t *st;
} permute_ctx;

/* One contiguous run of output rows per thread. */
static void permute_range(void *ctx, int64_t begin, int64_t end, int tid) {
    const permute_ctx *c = ctx;
    (void)tid;
    permute_rows(c->x, c->out, c->st, begin, end);
}

void tg_k_permute(const tg_tensor *x, const int *perm, tg_tensor *out) {
    int nd = x->ndim;
    if (nd == 0 || out->size == 0) {
        if (out->size) out->data[0] = x->data[0];
        return;
    }
    int64_t xs[TG_MAX_DIMS], st[TG_MAX_DIMS];
    int64_t s = 1;
    for (int d = nd - 1; d >= 0; d--) {
        xs[d] = s;
        s *= x->shape[d];
    }
    for (int d = 0; d < nd; d++) st[d] = xs[perm[d]]; /* x stride of output axis d */
    int64_t rows = out->size / out->shape[nd - 1];
    tg_parallel_for_ns(rows, (double)out->size * 2 * TG_NS_STREAM, permute_range, &(permute_ctx){x, out, st});
}
