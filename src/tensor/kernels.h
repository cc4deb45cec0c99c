/* Raw kernels of the tensor layer (internal: the library and its tests
 * include it, the public headers do not). Raw numerics on preallocated
 * outputs; no shape checking beyond what the autograd ops already did, no
 * graph. Every hand-written fast path (AVX2) has a portable twin in the same
 * file, selected at run time (simd.h). */
#ifndef TG_KERNELS_H
#define TG_KERNELS_H

#include "tensor.h"
#include "dropout_mask.h"

#include <math.h>

/* The unary ops, one row each:
 *   X(name, KIND, forward y = f(v), derivative dx = dy f'(x), arity)
 * The forward is written in v (the input element) and p (the op's scalar:
 * pow's exponent); the derivative in g = dy, x, y = f(x) and p, branch-free
 * so that its loop vectorises. arity is ARG0 for tg_<name>(a), ARG1 for
 * tg_<name>(a, p). tg_k_unary and tg_k_unary_backward (kernels_elementwise.c)
 * expand the two columns, autograd/ops_unary.c the op and its public function,
 * autograd/op.h's TG_OPS lists it in tg_op_table: a new unary op is a row
 * here, its declaration in autograd.h, and its gradient-check cases (two at
 * least, tests/cases_ops.c: the test fails without them). Float libm through
 * TG_M: plain exp would widen to double and run 2x slower. */
/* GELU, GPT-2's tanh approximation (Hendrycks & Gimpel, 2016):
 *   u = sqrt(2/pi) (x + 0.044715 x^3),   y = x/2 (1 + tanh u) = x s,
 * s = (1 + tanh u)/2 = 1 / (1 + exp(-2u)), the sigmoid of 2u: one exp, and
 * no cancellation for negative x;
 *   dy/dx = s + 2 x s (1 - s) sqrt(2/pi) (1 + 3 0.044715 x^2).
 * Double: libm's exp. Float: written so that the compiler vectorises the
 * row's loops, which a libm call per element prevents (with tanhf, GELU took
 * 40% of a GPT training step): u is odd, so with t = exp(-2u(|x|)) <= 1,
 * s = 1/(1+t) for x >= 0 and t/(1+t) below; |x| is capped at 10 (where t
 * reaches 1.2e-38, the end of the normal floats) by comparing its bits,
 * which order as the values do (a float compare of a computed value keeps
 * GCC 12 from vectorising); t is Cephes' expf on [-87.3, 0] (x = n ln2 + r,
 * |r| <= ln2/2, degree-6 polynomial, about 1 ulp, as kernels_exp.c), n
 * rounded by adding and subtracting 1.5 2^23 and 2^n built in the exponent
 * bits. */
#ifdef TG_DOUBLE
static inline tg_real tg_k_gelu_tanh_s(tg_real x) {
    return 1 / (1 + exp(-1.5957691216057308 * (x + 0.044715 * x * x * x)));
}
#else
static inline float tg_k_gelu_tanh_s(float x) {
    union {
        float f;
        int32_t i;
    } a = {.f = x};
    a.i &= 0x7fffffff;                                                    /* |x| */
    a.i = a.i < 0x41200000 ? a.i : 0x41200000;                            /* min(|x|, 10.0f) */
    float w = -1.5957691216057308f * (a.f + 0.044715f * a.f * a.f * a.f); /* -2u(|x|), in [-87.3, 0] */
    float n = (w * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = w - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + (r + 1.0f);
    union {
        int32_t i;
        float f;
    } e = {.i = ((int32_t)n + 127) * (1 << 23)};
    float t = p * e.f;
    return (x >= 0 ? 1.0f : t) / (1.0f + t);
}
#endif
static inline tg_real tg_k_gelu_tanh(tg_real x) { return x * tg_k_gelu_tanh_s(x); }
static inline tg_real tg_k_gelu_tanh_dx(tg_real x) {
    tg_real s = tg_k_gelu_tanh_s(x);
    return s + x * s * (1 - s) * (tg_real)1.5957691216057308 * (1 + (tg_real)(3 * 0.044715) * x * x);
}
/* Left as written by hand (clang-format off): a table, aligned by column. */
/* clang-format off */
#define TG_UNARY_OPS(X)                                                                                            \
    X(neg, NEG, -v, -g, ARG0)                                                                                      \
    X(exp, EXP, TG_M(exp)(v), g *y, ARG0) /* d e^x = e^x */                                                        \
    X(log, LOG, TG_M(log)(v), g / x, ARG0)                                                                         \
    X(sqrt, SQRT, TG_M(sqrt)(v), g *(tg_real)0.5 / y, ARG0)             /* 1/(2 sqrt x) */                         \
    X(tanh, TANH, TG_M(tanh)(v), g *(1 - y * y), ARG0)                  /* 1 - tanh^2 */                           \
    X(sigmoid, SIGMOID, 1 / (1 + TG_M(exp)(-v)), g * y * (1 - y), ARG0) /* s (1 - s) */                            \
    /* A select, not g * [x > 0]: torch's threshold_backward, 0 at x = 0. */                                       \
    X(relu, RELU, v > 0 ? v : 0, x > 0 ? g : 0, ARG0)                                                              \
    /* GELU(x) = x Phi(x) = x/2 (1 + erf(x / sqrt 2)), torch's exact form;      \
     * d/dx = Phi(x) + x phi(x), phi the standard normal pdf. */                                  \
    X(gelu, GELU, (tg_real)0.5 * v * (1 + (tg_real)erf((double)v * 0.7071067811865476)),                           \
      g * (tg_real)(0.5 * (1 + erf(x * 0.7071067811865476)) + x * 0.3989422804014327 * exp(-0.5 * (double)x * x)), \
      ARG0)                                                                                                        \
    /* GPT-2's form, torch's gelu(approximate='tanh'): tg_k_gelu_tanh above. */                                    \
    X(gelu_tanh, GELU_TANH, tg_k_gelu_tanh(v), g *tg_k_gelu_tanh_dx(x), ARG0)                                      \
    /* d x^p = p x^(p-1) */                                                                                        \
    X(pow_scalar, POW, pow(v, p), g *p *(tg_real)pow(x, p - 1), ARG1)                                              \
    X(add_scalar, ADD_SCALAR, v + p, g, ARG1)   /* x + s: d/dx = 1 */                                              \
    X(mul_scalar, MUL_SCALAR, v *p, g *p, ARG1) /* s x: d/dx = s */
/* clang-format on */

#define TG_UNARY_KIND_(name, KIND, f, df, arity) TG_UNARY_##KIND,
typedef enum { TG_UNARY_OPS(TG_UNARY_KIND_) } tg_unary_kind;
#undef TG_UNARY_KIND_
typedef enum { TG_BINARY_ADD, TG_BINARY_SUB, TG_BINARY_MUL, TG_BINARY_DIV } tg_binary_kind;

void tg_k_unary(tg_unary_kind kind, tg_real param, const tg_real *x, tg_real *y, int64_t n);
/* n values rounded to bf16 bits as tg__bf16_from_float rounds them (half.h:
 * to nearest even, subnormals kept), and back (exact); split over threads. */
void tg_k_to_bf16(const tg_real *x, uint16_t *h, int64_t n);
/* The same rounding of one row of n values, on the calling thread (the
 * rows of a strided copy: tg_k_attn_narrow). */
void tg_k_to_bf16_row(const tg_real *x, uint16_t *h, int64_t n);
void tg_k_from_bf16(const uint16_t *h, tg_real *x, int64_t n);
/* The backward of the same row: gx = gy f'(x) when fresh, else gx += it
 * (y = f(x), the forward's output). */
void tg_k_unary_backward(tg_unary_kind kind, tg_real param, const tg_real *gy, const tg_real *x, const tg_real *y,
                         tg_real *gx, int64_t n, bool fresh);
/* The backward of act (a row of TG_UNARY_OPS without a scalar) on rows x
 * cols values of a bf16 pre-activation h16 with output gradient gy:
 * d = gy f'(h) (tg_k_unary_backward's bits, on h widened), dh16 = bf16(d)
 * (tg_k_to_bf16's rounding), and db (NULL: none) = (db_fresh) or +=
 * d's column sums, in tg_k_sum_to's order for a [rows, cols] tensor. part
 * is scratch of tg_k_unary_backward_bf16_part(rows, cols) reals. One pass,
 * split over threads; the same bits at any thread count. */
void tg_k_unary_backward_bf16(tg_unary_kind kind, const uint16_t *h16, const tg_real *gy, uint16_t *dh16, int64_t rows,
                              int64_t cols, tg_real *db, bool db_fresh, tg_real *part);
int64_t tg_k_unary_backward_bf16_part(int64_t rows, int64_t cols);
/* The same pass without an activation, for an operand of bf16 products:
 * h = x rounded as the bf16 GEMM rounds what it packs (tg__bf16_from_bits_daz,
 * half.h: subnormals to zero, NaN quiet), so a product reading h gives
 * the bits of one reading x, and db (NULL: none) = (db_fresh) or += x's
 * column sums, tg_k_sum_to's bits; part as above. */
void tg_k_to_bf16_operand(const tg_real *x, uint16_t *h, int64_t rows, int64_t cols, tg_real *db, bool db_fresh,
                          tg_real *part);
/* tg_k_unary on an m x n block of rows ld apart: y = f(x), the same
 * formula, hence the same bits. y == x (in place) is allowed. On the
 * calling thread: the GEMM's epilogue runs it on one finished block of C
 * at a time (tg_k_gemm_ep). */
void tg_k_unary_tile(tg_unary_kind kind, tg_real param, int m, int n, const tg_real *x, tg_real *y, int ld);

/* ---- GEMM with an epilogue ---------------------------------------------------
 * tg_k_gemm_ep is tg_k_gemm (tg_k_gemm_bf16_ep: tg_k_gemm_bf16) that also
 * finishes C block by block, each block once, after its last K block, on
 * the thread that computed it, while the block is still in cache: no second
 * pass over C in memory (gemm_driver.c says which blocks). For a finished
 * element c = C(i,j) (alpha op(A) op(B) + beta C, as tg_k_gemm leaves it):
 *   v = c + (res(i,j) + bias[j])   (or c + bias[j], c + res(i,j); else c)
 *   C(i,j) = v, H16(i,j) = bf16(v), Y(i,j) = f(v), Y16(i,j) = bf16(f(v))
 * f the act row of TG_UNARY_OPS without a scalar (GELU, GELU tanh, ReLU,
 * ...; no_act: f(v) = v), bit for bit tg_k_unary's; bf16() tg_k_to_bf16's
 * rounding (half.h, subnormals kept). Each output is written only when its
 * pointer is set; Y may be C itself (then C keeps f(v)). res, Y, Y16 and
 * H16 have C's shape and ldc. The add is v = c + (res + bias): a caller
 * that started C at res + bias with beta = 1 gets the same sum in another
 * order, products first (exactly the same bits where an element is summed
 * in one pass from zero and added to C once; where K is split in blocks
 * the GEMM starts C at res + bias itself, as that caller did). ep NULL:
 * tg_k_gemm exactly. C is final at any thread count. */
typedef struct {
    tg_unary_kind act;   /* f of y = f(v) */
    tg_real *Y;          /* f(v), M x N at stride ldc; Y == C: in place; NULL: none */
    uint16_t *Y16;       /* f(v) rounded to bf16; NULL: none */
    uint16_t *H16;       /* v rounded to bf16 (a pre-activation a backward keeps); NULL: none */
    const tg_real *bias; /* [N], added to every row; NULL: none */
    const tg_real *res;  /* M x N at stride ldc, added (a residual); NULL: none */
    bool no_act;         /* f(v) = v: no activation */
    /* C itself is not wanted, only the outputs (Y not C, Y16, H16): the
     * GEMM may leave C unwritten and keep each block it finishes in a
     * thread's buffer for the epilogue instead (gemm_driver.c, where it
     * does). C must still be given, for the paths that use it. */
    bool c_scratch;
} tg_gemm_epilogue;
/* The epilogue on the m x n block of values at c (rows ldc apart), whose
 * corner is element (i0, j0) of C: ep's outputs at the same place, their
 * rows ldo apart (C's stride; ldc too where c is C's block). The GEMM's
 * drivers call it on each finished block. */
void tg_k_epilogue_tile(const tg_gemm_epilogue *ep, int64_t i0, int j0, tg_real *c, int ldc, int ldo, int m, int n);
/* C = beta C + (res + bias) (or either; beta 0: C is not read), M x N at
 * stride ldc, rows split over threads: the start of a C that the GEMM sums
 * in several passes (gemm_common.h, gemm_epilogue_start). */
void tg_k_epilogue_start(const tg_gemm_epilogue *ep, tg_real *C, int ldc, int M, int N, tg_real beta);
void tg_k_gemm_ep(bool trans_a, bool trans_b, int M, int N, int K, tg_real alpha, const tg_real *A, int lda,
                  const tg_real *B, int ldb, tg_real beta, tg_real *C, int ldc, const tg_gemm_epilogue *ep);
void tg_k_gemm_bf16_ep(bool trans_a, bool trans_b, int M, int N, int K, tg_real alpha, const tg_real *A, int lda,
                       const tg_real *B, int ldb, tg_real beta, tg_real *C, int ldc, const tg_gemm_epilogue *ep);
/* tg_k_gemm_bf16_ep with either operand stored as bfloat16 (tensor.h's
 * TG_DTYPE_BF16 storage): A is `const uint16_t *` (bf16 bits, a_bf16) or
 * `const tg_real *`, B likewise; C stays tg_real. The packers read the
 * bf16 directly (no float copy; for a narrow B the AMX engine's tiles load an
 * untransposed bf16 A in place). Exactly the bits of tg_k_gemm_bf16_ep on
 * the operands widened to tg_real (exact), whose rounding leaves a bf16
 * value as it is but for a subnormal, a zero in the products (DAZ), and a
 * NaN, made quiet: at any thread count, on every engine. */
void tg_k_gemm_bf16_mixed(bool trans_a, bool trans_b, int M, int N, int K, tg_real alpha, const void *A, bool a_bf16,
                          int lda, const void *B, bool b_bf16, int ldb, tg_real beta, tg_real *C, int ldc,
                          const tg_gemm_epilogue *ep);
/* tg_k_gemm_bf16_mixed with alpha 1, beta 0 and no C at all, for a caller
 * that wants only the epilogue's outputs (ep->c_scratch; Y16, H16, or a
 * Y that is not C): where the product's engine keeps every finished block
 * of C in a thread's buffer (one K block deep; on the fp32 engine, a
 * product the float GEMM packs) it runs, with tg_k_gemm_bf16_mixed's bits, and returns true; else (or out
 * of memory) it returns false and has done nothing: the caller then
 * gives a C. ldc is the outputs' row stride. */
bool tg_k_gemm_bf16_no_c(bool trans_a, bool trans_b, int M, int N, int K, const void *A, bool a_bf16, int lda,
                         const void *B, bool b_bf16, int ldb, int ldc, const tg_gemm_epilogue *ep);
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
/* sum_{j<n} exp(x_j - shift), and d_j += scale exp(x_j - shift) for j < n:
 * the cross-entropy's log-sum-exp and gradient (kernels_exp.c). */
tg_real tg_k_sum_exp(const tg_real *x, int64_t n, tg_real shift);
void tg_k_add_scaled_exp(tg_real *d, const tg_real *x, int64_t n, tg_real shift, tg_real scale);
/* Row-wise softmax / log-softmax of [rows, n], max-subtracted for stability
 * (kernels_softmax.c), and the row kernels behind them, which the masked
 * softmax reuses: */
tg_real tg_k_row_max(const tg_real *x, int64_t n); /* n >= 1 */
void tg_k_softmax_row(tg_real *y, int64_t n);      /* in place */
/* Softmax backward of one row y with output gradient g:
 * dx_j (+)= y_j (g_j - sum_{k<n} g_k y_k) for j < n_grad; when !accumulate,
 * dx_j = 0 for n_grad <= j < n (masked keys); when accumulating they are
 * left alone. */
void tg_k_softmax_row_backward(const tg_real *y, const tg_real *g, tg_real *dx, int64_t n, int64_t n_grad,
                               bool accumulate);
void tg_k_softmax_rows(const tg_real *x, tg_real *y, int64_t rows, int64_t n);
void tg_k_log_softmax_rows(const tg_real *x, tg_real *y, int64_t rows, int64_t n);
/* out = permutation of x's axes: out.shape[i] = x.shape[perm[i]]. */
void tg_k_permute(const tg_tensor *x, const int *perm, tg_tensor *out);

/* Row kernels of the fused attention (kernels_attention.c):
 *   tg_k_max_row:          max(m, s[0..n-1]);
 *   tg_k_mul_row:          a[j] *= b[j];
 *   tg_k_attention_ds_row: p[j] = p[j] (dp[j] z[j] - D), or p[j] (dp[j] - D)
 *                          when z is NULL (dS of one row, no dropout). */
tg_real tg_k_max_row(const tg_real *s, int n, tg_real m);
void tg_k_mul_row(tg_real *a, const tg_real *b, int n);
void tg_k_attention_ds_row(tg_real *p, const tg_real *dp, const tg_real *z, tg_real D, int n);

/* The fused attention's block products (kernels_attention_block.c), for
 * tiles of at most 64 x 64 and inner sizes of at most 64:
 *   tg_k_attn_mm:   C = alpha op(A) B + beta C, m x n, inner k; op(A) = A
 *                   (rows lda apart) or, trans_a, A^T; B's rows ldb apart.
 *                   The same bits as tg_k_gemm(trans_a, false, ...).
 *   tg_k_attn_pack: dst = rows x cols of src (rows rs apart), or with
 *                   transpose its cols x rows transpose, rows ld apart (ld
 *                   at least rows rounded up to 16: whole 16-lane stores);
 *                   with bf16 each value rounded as the bf16 GEMM rounds
 *                   (tg__bf16_round_daz). dst == src (same rows, no
 *                   transpose) rounds in place. */
void tg_k_attn_mm(bool trans_a, int m, int n, int k, tg_real alpha, const tg_real *A, int lda, const tg_real *B,
                  int ldb, tg_real beta, tg_real *C, int ldc);
void tg_k_attn_pack(int rows, int cols, const tg_real *src, int64_t rs, bool transpose, bool bf16, tg_real *dst,
                    int ld);

/* The fused attention's rows under bf16 storage (kernels_attention.c):
 *   tg_k_attn_widen:  dst = rows x cols of src (bf16 bits, rows rs apart)
 *                     widened, exact; dst's rows ld apart;
 *   tg_k_attn_narrow: dst (bf16 bits, rows rs apart) = rows x cols of src
 *                     (rows ld apart) rounded as tg_to_bf16 rounds
 *                     (tg__bf16_from_float). */
void tg_k_attn_widen(int rows, int cols, const uint16_t *src, int64_t rs, tg_real *dst, int ld);
void tg_k_attn_narrow(int rows, int cols, const tg_real *src, int ld, uint16_t *dst, int64_t rs);
/* The fused attention backward's D_i = sum_c dO_ic O_ic (kernels_attention.c):
 * out[i] = sum_c x[i xs + c] y[i ys + c] for n rows, y as reals or (y16
 * set, y NULL) as bf16 bits, each row summed from 0 in c order: the bits
 * of the plain loop at every ISA. */
void tg_k_attn_row_dots(int n, int cols, const tg_real *x, int64_t xs, const tg_real *y, const uint16_t *y16,
                        int64_t ys, tg_real *out);
/* The fused attention backward's store of a task's finished gradient rows
 * (kernels_attention.c): g's rows (n of them, rs apart) = acc's rows + 0
 * (set: g is a fresh buffer, every element written once; the + 0 turns a
 * -0 into the +0 that adding acc to a zeroed buffer gives), or += acc's
 * rows (set false); acc's rows width apart. Under set, whole 64-byte lines
 * of g go out with streaming stores (the rows lie 3 h d apart in the fused
 * projection's gradient, which a training step's next op reads from beyond
 * the core's caches anyway): no read of a line about to be overwritten.
 * The same bits either way. */
void tg_k_attn_store_rows(int n, int width, const tg_real *acc, tg_real *g, int64_t rs, bool set);

/* The fused attention's short sequences (kernels_attention.c): one
 * head-batch entry with Q queries and K <= TG_ATT_SHORT_MAX keys, done
 * whole. Rows of q, k, v are qs, ks, vs reals apart, those of out and dO os
 * apart; lim[i] the keys row i sees (a prefix; 0: none, the row is uniform
 * as masked_softmax makes it). The Q x K matrices P and zf have rows KP =
 * tg_k_attention_short_stride(K) >= K apart, zeros past K.
 *   forward:  out = (P o Z) v with P = masked_softmax(scale q k^T) and Z the
 *             dropout factors zf (scale or 0; NULL: no dropout); P is
 *             written when not NULL.
 *   backward: from P, the same zf and the output's gradient dO, adds dQ,
 *             dK, dV to gq, gk, gv (each may be NULL; their rows as q's,
 *             k's, v's; fresh_g*: written as if added to zeros).
 * scratch holds tg_k_attention_short_scratch(Q, K, d, dv) reals. Each
 * output element is summed in an order fixed by the shapes and the ISA. */
enum { TG_ATT_SHORT_MAX = 64 };
typedef struct {
    int Q, K, d, dv;
    tg_real scale;
    const tg_real *q, *k, *v;
    int64_t qs, ks, vs, os;
    const int *lim;
    /* bf16 products (tg_set_precision): q, k, v and dO are given rounded
     * to bf16, and the kernels round the weights (P o Z) and dS they
     * multiply, so every product is of bf16 values, exact in float. */
    bool bf16;
    /* Row strides of the gradients gq, gk, gv (0: q's, k's, v's): the
     * operands may be a task's copies while the gradients are in place. */
    int64_t gqs, gks, gvs;
    /* The backward writes each row of gq, gk, gv (each true) as 0 + its
     * sum, without reading it: a fresh gradient, not zeroed (tg_grad_begin). */
    bool fresh_gq, fresh_gk, fresh_gv;
} tg_attn_entry;
int tg_k_attention_short_stride(int K);
size_t tg_k_attention_short_scratch(int Q, int K, int d, int dv);
void tg_k_attention_short_forward(const tg_attn_entry *e, const tg_real *zf, tg_real *out, tg_real *P,
                                  tg_real *scratch);
void tg_k_attention_short_backward(const tg_attn_entry *e, const tg_real *P, const tg_real *zf, const tg_real *dO,
                                   tg_real *gq, tg_real *gk, tg_real *gv, tg_real *scratch);

/* The optimizers' loops over n elements (kernels_optim.c; the formulas and
 * where the constants come from: train/optim.c). */
typedef struct {
    tg_real b1, b2, eps, wd_l2, decay, step_size, bc2_sqrt;
} tg_adam_step;
void tg_k_adam(const tg_adam_step *s, tg_real *w, tg_real *m, tg_real *v, const tg_real *g, int64_t n);
/* SGD, in double: d = g + wd w; buf = momentum buf + d (buf may be NULL); w -= lr d. */
void tg_k_sgd(double lr, double wd, double momentum, tg_real *w, tg_real *buf, const tg_real *g, int64_t n);
void tg_k_scale(tg_real *x, double coef, int64_t n); /* x *= coef, in double */
/* n arrays seen as one (a model's gradients): at(src, i, &len) gives array
 * i and its length, NULL (or len 0) for none. */
typedef struct {
    const void *src;
    int n;
    tg_real *(*at)(const void *src, int i, int64_t *len);
} tg_k_arrays;
/* The sum of squares of all the arrays' elements, in double: the
 * concatenation cut into TG_K_SUMSQ_PIECES pieces at boundaries fixed by
 * the total length, each summed in order, the pieces' sums added in order:
 * the same bits at any thread count. */
#define TG_K_SUMSQ_PIECES 256
double tg_k_sum_squares_arrays(const tg_k_arrays *a);
void tg_k_scale_arrays(const tg_k_arrays *a, double coef); /* every element *= coef, in double */
void tg_k_zero_arrays(const tg_k_arrays *a);               /* every element = 0 */

/* Layer normalisation over rows of d >= 1 (kernels_norm.c; formulas in
 * autograd/ops_layer_norm.c). gamma and beta NULL: no affine part. The
 * forward saves each row's mean less the row's first element (the shift
 * its sums use; kernels_norm.c says why) and rstd; the backward's dx = ... when
 * fresh, else dx += ...; dgamma and dbeta (either may be NULL) are added to. */
void tg_k_layer_norm(const tg_real *x, const tg_real *gamma, const tg_real *beta, tg_real *y, tg_real *mean,
                     tg_real *rstd, int64_t rows, int64_t d, tg_real eps);
/* The same with y stored as bf16 bits (tg_layer_norm_to): each value
 * rounded as tg_k_to_bf16 rounds it, as its row is done, the bits of
 * tg_k_to_bf16 of tg_k_layer_norm's y. */
void tg_k_layer_norm_bf16(const tg_real *x, const tg_real *gamma, const tg_real *beta, uint16_t *y, tg_real *mean,
                          tg_real *rstd, int64_t rows, int64_t d, tg_real eps);
void tg_k_layer_norm_backward_dx(const tg_real *x, const tg_real *g, const tg_real *gamma, const tg_real *mean,
                                 const tg_real *rstd, tg_real *dx, int64_t rows, int64_t d, bool fresh);
void tg_k_layer_norm_backward_params(const tg_real *x, const tg_real *g, const tg_real *mean, const tg_real *rstd,
                                     tg_real *dgamma, tg_real *dbeta, int64_t rows, int64_t d);
/* Both (dx, or dgamma and dbeta, may be NULL), with the bits of the two
 * above: in one pass over x and g when dx and a parameter are wanted. */
void tg_k_layer_norm_backward(const tg_real *x, const tg_real *g, const tg_real *gamma, const tg_real *mean,
                              const tg_real *rstd, tg_real *dx, bool fresh, tg_real *dgamma, tg_real *dbeta,
                              int64_t rows, int64_t d);

#endif
