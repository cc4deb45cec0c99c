/* Raw kernels of the tensor layer (internal: the library and its tests
 * include it, the public headers do not). Raw numerics on preallocated
 * outputs; no shape checking beyond what the autograd ops already did, no
 * graph. Every hand-written fast path (AVX2) has a portable twin in the same
 * file, selected at run time (simd.h). */
#ifndef TG_KERNELS_H
#define TG_KERNELS_H

#include "tensor.h"
#include "dropout_mask.h"

typedef enum {
    TG_UNARY_NEG, TG_UNARY_EXP, TG_UNARY_LOG, TG_UNARY_SQRT, TG_UNARY_TANH,
    TG_UNARY_SIGMOID, TG_UNARY_RELU, TG_UNARY_GELU, TG_UNARY_POW
} tg_unary_kind;
typedef enum { TG_BINARY_ADD, TG_BINARY_SUB, TG_BINARY_MUL, TG_BINARY_DIV } tg_binary_kind;

void tg_k_unary(tg_unary_kind kind, tg_real param, const tg_real *x, tg_real *y, int64_t n);
/* out = a (op) b with NumPy broadcasting; out has the broadcast shape. */
void tg_k_binary(tg_binary_kind kind, const tg_tensor *a, const tg_tensor *b, tg_tensor *out);
/* Sums src (broadcast shape) down to dst's shape, which src broadcasts from;
 * dst += sum when accumulate, else dst = sum. */
void tg_k_sum_to(const tg_tensor *src, tg_tensor *dst, bool accumulate);
/* Reductions along one axis viewed as [outer, n, inner]. */
void tg_k_sum_axis(const tg_real *x, tg_real *y, int64_t outer, int64_t n, int64_t inner);
void tg_k_max_axis(const tg_real *x, tg_real *y, int64_t *argmax, int64_t outer, int64_t n, int64_t inner);
/* s[j] = exp(s[j] - shift) for j < n, in place; returns the sum. For
 * softmax rows: s[j] - shift <= 0 (kernels_exp.c). */
tg_real tg_k_exp_shift(tg_real *s, int64_t n, tg_real shift);
/* Row-wise softmax / log-softmax of [rows, n], max-subtracted for stability. */
void tg_k_softmax_rows(const tg_real *x, tg_real *y, int64_t rows, int64_t n);
void tg_k_log_softmax_rows(const tg_real *x, tg_real *y, int64_t rows, int64_t n);
/* out = permutation of x's axes: out.shape[i] = x.shape[perm[i]]. */
void tg_k_permute(const tg_tensor *x, const int *perm, tg_tensor *out);

#endif
