/* Axis permutation (a copy): out[i0..ik] = x[i_{inv perm}], walking the
 * output in order and x with permuted strides. */
#include "tensor.h"

void tg_k_permute(const tg_tensor *x, const int *perm, tg_tensor *out) {
    int nd = x->ndim;
    int64_t xs[TG_MAX_DIMS], st[TG_MAX_DIMS];
    int64_t s = 1;
    for (int d = nd - 1; d >= 0; d--) { xs[d] = s; s *= x->shape[d]; }
    for (int d = 0; d < nd; d++) st[d] = xs[perm[d]];   /* x stride of output axis d */
    int64_t inner = nd ? out->shape[nd - 1] : 1;
    int64_t rows = inner ? out->size / inner : 0;
    int64_t si = nd ? st[nd - 1] : 0;
#pragma omp parallel for if (out->size > TG_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        int64_t off = 0, rem = r;
        for (int d = nd - 2; d >= 0; d--) {
            off += (rem % out->shape[d]) * st[d];
            rem /= out->shape[d];
        }
        tg_real *o = out->data + r * inner;
        for (int64_t j = 0; j < inner; j++) o[j] = x->data[off + j * si];
    }
}
