/* Learning-rate schedules (train.h). The warm-up + cosine one is nanoGPT's
 * get_lr (train.py), line for line:
 *   it <  warmup:       lr * (it + 1) / (warmup + 1)
 *   it >  decay_steps:  min_lr
 *   else:               min_lr + 0.5 (1 + cos(pi (it - warmup) / (decay_steps - warmup))) (lr - min_lr) */
#include "train.h"

#include <math.h>

tg_lr_schedule tg_lr_constant(double lr) { return (tg_lr_schedule){.kind = TG_LR_CONSTANT, .lr = lr, .min_lr = lr}; }

tg_lr_schedule tg_lr_warmup_cosine(double lr, double min_lr, int64_t warmup_steps, int64_t decay_steps) {
    return (tg_lr_schedule){.kind = TG_LR_WARMUP_COSINE,
                            .lr = lr,
                            .min_lr = min_lr,
                            .warmup_steps = warmup_steps,
                            .decay_steps = decay_steps};
}

double tg_lr_at(const tg_lr_schedule *s, int64_t it) {
    if (!s || it < 0) {
        tg_set_error("lr_at: %s", !s ? "NULL schedule" : "negative step");
        return NAN;
    }
    if (!(s->lr >= 0) || !isfinite(s->lr)) {
        tg_set_error("lr_at: learning rate %g must be finite and not negative", s->lr);
        return NAN;
    }
    if (s->kind == TG_LR_CONSTANT) return s->lr;
    if (s->kind != TG_LR_WARMUP_COSINE) {
        tg_set_error("lr_at: unknown schedule kind %d", (int)s->kind);
        return NAN;
    }
    const int64_t w = s->warmup_steps, d = s->decay_steps;
    if (!(s->min_lr >= 0) || !isfinite(s->min_lr) || w < 0 || d < w) {
        tg_set_error("lr_at: min_lr %g, warmup %lld, decay_steps %lld: need min_lr >= 0 and 0 <= warmup <= "
                     "decay_steps",
                     s->min_lr, (long long)w, (long long)d);
        return NAN;
    }
    if (it < w) return s->lr * (double)(it + 1) / (double)(w + 1);
    if (it > d) return s->min_lr;
    if (d == w) return s->lr; /* it == w == d: the limit r = 0 (nanoGPT divides 0 by 0) */
    double r = (double)(it - w) / (double)(d - w);
    double coeff = 0.5 * (1.0 + cos(3.141592653589793 * r));
    return s->min_lr + coeff * (s->lr - s->min_lr);
}
