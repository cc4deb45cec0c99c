/* The optimizers' per-element loops (the formulas are in train/optim.c, next
 * to the configuration they come from). Each element's update depends on
 * that element only, so results do not depend on the thread count; Adam's
 * loop is built for each ISA (TG_ISA_DISPATCH), and its sqrt and division
 * round the same at every width. */
#include "kernels.h"
#include "parallel.h"
#include "simd.h"

#include <string.h>

typedef struct {
    const tg_adam_step *s;
    tg_real *w, *m, *v, *buf;
    const tg_real *g;
    double lr, wd, momentum, coef; /* SGD; coef: tg_k_scale */
} optim_ctx;

/* Adam / AdamW on elements [begin, end):
 *   w' = decay w,  g' = g + wd_l2 w',  m = b1 m + (1-b1) g',  v = b2 v + (1-b2) g'^2
 *   w = w' - step_size m / (sqrt(v) / bc2_sqrt + eps) */
TG_KERNEL_BODY void adam_range_body(void *ctx, int64_t begin, int64_t end, int tid) {
    const optim_ctx *c = ctx;
    const tg_real b1 = c->s->b1, b2 = c->s->b2, eps = c->s->eps, wd_l2 = c->s->wd_l2, decay = c->s->decay;
    const tg_real step_size = c->s->step_size, bc2_sqrt = c->s->bc2_sqrt;
    tg_real *restrict W = c->w, *restrict M = c->m, *restrict V = c->v;
    const tg_real *restrict G = c->g;
    (void)tid;
    for (int64_t i = begin; i < end; i++) {
        tg_real wi = W[i] * decay;      /* AdamW: w -= lr wd w */
        tg_real gi = G[i] + wd_l2 * wi; /* Adam: L2 penalty in the gradient */
        tg_real mi = b1 * M[i] + (1 - b1) * gi;
        tg_real vi = b2 * V[i] + (1 - b2) * gi * gi;
        M[i] = mi;
        V[i] = vi;
        W[i] = wi - step_size * mi / (TG_M(sqrt)(vi) / bc2_sqrt + eps);
    }
}
TG_ISA_DISPATCH(adam_range, (void *ctx, int64_t begin, int64_t end, int tid), (ctx, begin, end, tid))

void tg_k_adam(const tg_adam_step *s, tg_real *w, tg_real *m, tg_real *v, const tg_real *g, int64_t n) {
    tg_parallel_for_ns(n, (double)n * TG_NS_POLY, adam_range, &(optim_ctx){.s = s, .w = w, .m = m, .v = v, .g = g});
}

/* SGD in double: d = g + wd w;  buf = momentum buf + d (if buf);  w -= lr d */
static void sgd_range(void *ctx, int64_t begin, int64_t end, int tid) {
    const optim_ctx *c = ctx;
    const double lr = c->lr, wd = c->wd, mom = c->momentum;
    tg_real *W = c->w, *M = c->buf;
    const tg_real *G = c->g;
    (void)tid;
    for (int64_t i = begin; i < end; i++) {
        double d = (double)G[i] + wd * (double)W[i];
        if (M) {
            d = mom * (double)M[i] + d;
            M[i] = (tg_real)d;
        }
        W[i] = (tg_real)((double)W[i] - lr * d);
    }
}

void tg_k_sgd(double lr, double wd, double momentum, tg_real *w, tg_real *buf, const tg_real *g, int64_t n) {
    optim_ctx c = {.w = w, .buf = buf, .g = g, .lr = lr, .wd = wd, .momentum = momentum};
    tg_parallel_for_ns(n, (double)n * 2 * TG_NS_STREAM, sgd_range, &c);
}

static void scale_range(void *ctx, int64_t begin, int64_t end, int tid) {
    const optim_ctx *c = ctx;
    (void)tid;
    for (int64_t k = begin; k < end; k++) c->w[k] = (tg_real)((double)c->w[k] * c->coef);
}

void tg_k_scale(tg_real *x, double coef, int64_t n) {
    tg_parallel_for_ns(n, (double)n * TG_NS_STREAM, scale_range, &(optim_ctx){.w = x, .coef = coef});
}

/* ---- many tensors as one split ---------------------------------------------
 * An optimizer step and gradient clipping touch every parameter: one pool
 * job per tensor left each small one (biases, norms' gains) on one thread
 * and paid a hand-over per tensor. Here the tensors' elements are one
 * range [0, total), cut among the threads; a thread's range is walked
 * tensor by tensor. */

/* Array i of the concatenation that holds element `at` of it, and where it
 * starts; i == n when at is past the end. */
static int flat_find(int n, int64_t (*len)(const void *src, int i), const void *src, int64_t at, int64_t *base) {
    int64_t b = 0;
    int i = 0;
    for (; i < n && b + len(src, i) <= at; i++) b += len(src, i);
    *base = b;
    return i;
}

typedef struct {
    const tg_k_arrays *a;
    int64_t total;
    double coef;
    bool zero;    /* scale_arrays_range: write zeros (0 * inf would be NaN) */
    double *sums; /* TG_K_SUMSQ_PIECES */
} arrays_ctx;

static int64_t arrays_len(const void *src, int i) {
    const tg_k_arrays *a = src;
    int64_t len = 0;
    return a->at(a->src, i, &len) ? len : 0;
}

/* fn on every part [k0, k1) of an array x that elements [begin, end) of
 * the concatenation cover. */
#define ARRAYS_WALK(a, begin, end, fn)                                                                           \
    do {                                                                                                         \
        int64_t base_;                                                                                           \
        for (int i_ = flat_find((a)->n, arrays_len, (a), (begin), &base_); i_ < (a)->n && base_ < (end); i_++) { \
            int64_t len_ = 0;                                                                                    \
            tg_real *x = (a)->at((a)->src, i_, &len_);                                                           \
            if (!x) len_ = 0;                                                                                    \
            int64_t k0 = (begin) > base_ ? (begin)-base_ : 0;                                                    \
            int64_t k1 = ((end) < base_ + len_ ? (end) : base_ + len_) - base_;                                  \
            if (k1 > k0) fn;                                                                                     \
            base_ += len_;                                                                                       \
        }                                                                                                        \
    } while (0)

/* Pieces [pb, pe): piece p covers [total p / P, total (p + 1) / P). */
static void sumsq_range(void *ctx, int64_t pb, int64_t pe, int tid) {
    const arrays_ctx *c = ctx;
    (void)tid;
    for (int64_t p = pb; p < pe; p++) {
        int64_t begin = c->total * p / TG_K_SUMSQ_PIECES, end = c->total * (p + 1) / TG_K_SUMSQ_PIECES;
        double s = 0;
        ARRAYS_WALK(c->a, begin, end, {
            for (int64_t k = k0; k < k1; k++) s += (double)x[k] * (double)x[k];
        });
        c->sums[p] = s;
    }
}

double tg_k_sum_squares_arrays(const tg_k_arrays *a) {
    double sums[TG_K_SUMSQ_PIECES];
    arrays_ctx c = {.a = a, .sums = sums};
    for (int i = 0; i < a->n; i++) c.total += arrays_len(a, i);
    tg_parallel_for_ns(TG_K_SUMSQ_PIECES, (double)c.total * TG_NS_STREAM, sumsq_range, &c);
    double s = 0;
    for (int p = 0; p < TG_K_SUMSQ_PIECES; p++) s += sums[p]; /* in order: thread-independent */
    return s;
}

static void scale_arrays_range(void *ctx, int64_t begin, int64_t end, int tid) {
    const arrays_ctx *c = ctx;
    (void)tid;
    ARRAYS_WALK(c->a, begin, end, {
        if (c->zero)
            memset(x + k0, 0, sizeof(tg_real) * (size_t)(k1 - k0));
        else
            for (int64_t k = k0; k < k1; k++) x[k] = (tg_real)((double)x[k] * c->coef);
    });
}

static void scale_or_zero_arrays(const tg_k_arrays *a, double coef, bool zero) {
    arrays_ctx c = {.a = a, .coef = coef, .zero = zero};
    for (int i = 0; i < a->n; i++) c.total += arrays_len(a, i);
    tg_parallel_for_ns(c.total, (double)c.total * TG_NS_STREAM, scale_arrays_range, &c);
}

void tg_k_scale_arrays(const tg_k_arrays *a, double coef) { scale_or_zero_arrays(a, coef, false); }

void tg_k_zero_arrays(const tg_k_arrays *a) { scale_or_zero_arrays(a, 0, true); }
