/* The optimizers' per-element loops (the formulas are in train/optim.c, next
 * to the configuration they come from). Each element's update depends on
 * that element only, so results do not depend on the thread count; Adam's
 * loop is built for each ISA (TG_ISA_DISPATCH), and its sqrt and division
 * round the same at every width. */
#include "kernels.h"
#include "parallel.h"
#include "simd.h"

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
