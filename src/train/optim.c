/* Optimizers with PyTorch's update rules, and gradient-norm clipping.
 *
 * For each parameter w with gradient g, at step t = 1, 2, ...:
 *
 *   SGD (torch.optim.SGD, no dampening/nesterov):
 *       g' = g + wd w;  buf = momentum buf + g';  w -= lr buf
 *     (buf = g' alone without momentum). Torch creates buf = g' on the first
 *     step; a buffer of zeros gives momentum * 0 + g' = g', the same value,
 *     also for a parameter whose first gradient comes late.
 *   Adam (torch.optim.Adam, L2 penalty added to the gradient):
 *       g' = g + wd w;  m = b1 m + (1-b1) g';  v = b2 v + (1-b2) g'^2
 *       w -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
 *     (eps outside the square root, written as torch computes it).
 *   AdamW (torch.optim.AdamW, decoupled decay, Loshchilov & Hutter):
 *       w -= lr wd w, then Adam with g' = g.
 *
 * All state is allocated by tg_optim_new, so a step makes no allocation.
 * One step counter t is shared by all parameters (torch keeps one per
 * parameter; they differ only for a parameter that had no gradient at some
 * earlier steps, which then gets the bias correction of the global t). */
#include "../nn/nn.h"
#include "train.h"
#include "../tensor/kernels.h" /* the update loops: tensor/kernels_optim.c */
#include "../tensor/profile.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

tg_optim_config tg_sgd_config(tg_real lr, tg_real momentum, tg_real weight_decay) {
    return (tg_optim_config){.kind = TG_SGD, .lr = lr, .momentum = momentum, .weight_decay = weight_decay};
}

tg_optim_config tg_adam_config(tg_real lr) {
    return (tg_optim_config){
        .kind = TG_ADAM, .lr = lr, .beta1 = (tg_real)0.9, .beta2 = (tg_real)0.999, .eps = (tg_real)1e-8};
}

tg_optim_config tg_adamw_config(tg_real lr, tg_real weight_decay) {
    tg_optim_config c = tg_adam_config(lr);
    c.kind = TG_ADAMW;
    c.weight_decay = weight_decay;
    return c;
}

static bool check_config(const tg_optim_config *c) {
    if (c->kind != TG_SGD && c->kind != TG_ADAM && c->kind != TG_ADAMW) {
        tg_set_error("optim: unknown optimizer kind %d", (int)c->kind);
        return false;
    }
    if (!(c->lr >= 0) || !(c->weight_decay >= 0)) {
        tg_set_error("optim: lr %g and weight_decay %g must not be negative", (double)c->lr, (double)c->weight_decay);
        return false;
    }
    if (c->kind == TG_SGD && !(c->momentum >= 0)) {
        tg_set_error("optim: momentum %g must not be negative", (double)c->momentum);
        return false;
    }
    if (c->kind != TG_SGD && (!(c->beta1 >= 0 && c->beta1 < 1) || !(c->beta2 >= 0 && c->beta2 < 1) || !(c->eps >= 0))) {
        tg_set_error("optim: betas (%g, %g) must be in [0, 1) and eps %g not negative", (double)c->beta1,
                     (double)c->beta2, (double)c->eps);
        return false;
    }
    return true;
}

/* A persistent tensor of zeros shaped like t (persistent even inside a scope). */
static tg_tensor *zeros_like_persistent(const tg_tensor *t) {
    tg_tensor *z = tg_empty_persistent(t->ndim, t->shape);
    if (z && z->size) memset(z->data, 0, (size_t)z->size * sizeof(tg_real));
    return z;
}

tg_optim *tg_optim_new(const tg_optim_config *cfg, const tg_params *params) {
    if (!cfg || !params) {
        tg_set_error("optim: NULL %s", !cfg ? "config" : "parameter list");
        return NULL;
    }
    if (!check_config(cfg)) return NULL;
    for (int i = 0; i < params->n; i++)
        if (!params->items[i].t) {
            tg_set_error("optim: parameter '%s' is NULL", params->items[i].name);
            return NULL;
        }
    tg_optim *o = tg_sys_calloc(1, sizeof *o);
    if (!o) {
        tg_set_error("optim: out of memory");
        return NULL;
    }
    o->cfg = *cfg;
    tg_params_init(&o->params);
    const int n = params->n;
    bool need_m = cfg->kind != TG_SGD || cfg->momentum != 0;
    bool need_v = cfg->kind != TG_SGD;
    bool ok = tg_params_extend(&o->params, NULL, params) == 0;
    if (ok && n > 0 && need_m) ok = (o->m = tg_sys_calloc((size_t)n, sizeof *o->m)) != NULL;
    if (ok && n > 0 && need_v) ok = (o->v = tg_sys_calloc((size_t)n, sizeof *o->v)) != NULL;
    for (int i = 0; ok && i < n; i++) {
        const tg_tensor *w = params->items[i].t;
        if (need_m) ok = (o->m[i] = zeros_like_persistent(w)) != NULL;
        if (ok && need_v) ok = (o->v[i] = zeros_like_persistent(w)) != NULL;
    }
    if (ok) ok = (o->step = tg_empty_persistent(0, NULL)) != NULL;
    if (!ok) {
        if (!tg_last_error()) tg_set_error("optim: out of memory");
        tg_optim_free(o);
        return NULL;
    }
    o->step->data[0] = 0;
    return o;
}

static void sgd_update(const tg_optim_config *c, double wd, tg_tensor *w, const tg_tensor *g, tg_tensor *buf) {
    tg_k_sgd(c->lr, wd, c->momentum, w->data, buf ? buf->data : NULL, g->data, w->size);
}

static void adam_update(const tg_optim_config *c, tg_real wd, double t, tg_tensor *w, const tg_tensor *g, tg_tensor *m,
                        tg_tensor *v) {
    /* Per-tensor constants in double; the per-element update in tg_real, as
     * torch computes in the parameter's dtype (and so it vectorises). */
    const double lr = c->lr;
    tg_adam_step s = {.b1 = c->beta1, .b2 = c->beta2, .eps = c->eps};
    s.wd_l2 = c->kind == TG_ADAM ? wd : 0;
    s.decay = (tg_real)(c->kind == TG_ADAMW ? 1.0 - lr * (double)wd : 1.0);
    s.step_size = (tg_real)(lr / (1.0 - pow(c->beta1, t)));
    s.bc2_sqrt = (tg_real)sqrt(1.0 - pow(c->beta2, t));
    tg_k_adam(&s, w->data, m->data, v->data, g->data, w->size);
}

void tg_optim_step(tg_optim *o) {
    if (!o) return;
    double t = (double)o->step->data[0] + 1, elems = 0;
    o->step->data[0] = (tg_real)t;
    tg_profile_region_begin(TG_PROF_OPTIMIZER, "step");
    for (int i = 0; i < o->params.n; i++) {
        tg_tensor *w = o->params.items[i].t;
        const tg_tensor *g = w->grad;
        if (!g) continue; /* no gradient reached it: skipped, as torch */
        elems += (double)w->size;
        tg_real wd = o->weight_decay ? o->weight_decay[i] : o->cfg.weight_decay;
        if (o->cfg.kind == TG_SGD)
            sgd_update(&o->cfg, wd, w, g, o->m ? o->m[i] : NULL);
        else
            adam_update(&o->cfg, wd, t, w, g, o->m[i], o->v[i]);
    }
    /* profile.h's estimate, Adam's: about 12 flops an element; w, g, m, v read and w, m, v written */
    tg_profile_add_work(12 * elems, 7 * elems * (double)sizeof(tg_real));
    tg_profile_region_end();
}

void tg_optim_zero_grad(tg_optim *o) {
    if (!o) return;
    for (int i = 0; i < o->params.n; i++) tg_zero_grad(o->params.items[i].t);
}

/* Names the state after its parameter, so a checkpoint written for one
 * model loads only into the same model (tg_checkpoint_load is strict). */
int tg_optim_state(tg_optim *o, tg_params *p, const char *prefix) {
    char name[TG_PARAM_NAME_MAX];
    if (!o) {
        tg_set_error("optim_state: NULL optimizer");
        return -1;
    }
    const char *mname = o->cfg.kind == TG_SGD ? "momentum" : "m";
    for (int i = 0; o->m && i < o->params.n; i++)
        if (tg_param_name(name, mname, o->params.items[i].name) || tg_params_add(p, prefix, name, o->m[i])) return -1;
    for (int i = 0; o->v && i < o->params.n; i++)
        if (tg_param_name(name, "v", o->params.items[i].name) || tg_params_add(p, prefix, name, o->v[i])) return -1;
    return tg_params_add(p, prefix, "step", o->step);
}

void tg_optim_free(tg_optim *o) {
    if (!o) return;
    for (int i = 0; i < o->params.n; i++) {
        if (o->m) tg_free(o->m[i]);
        if (o->v) tg_free(o->v[i]);
    }
    tg_sys_free(o->m);
    tg_sys_free(o->v);
    tg_sys_free(o->weight_decay);
    tg_free(o->step);
    tg_params_free(&o->params);
    tg_sys_free(o);
}

/* nanoGPT's configure_optimizers: two groups, decay on every tensor of two or
 * more dimensions (Linear and embedding weights), none on the rest (biases,
 * LayerNorm weights and biases), since decaying a gain or an offset towards
 * zero does not regularise the function the way shrinking a matrix does. */
tg_optim *tg_optim_new_groups(const tg_optim_config *cfg, const tg_params *params) {
    tg_optim *o = tg_optim_new(cfg, params);
    if (!o) return NULL;
    for (int i = 0; i < o->params.n; i++)
        if (tg_optim_set_weight_decay(o, i, o->params.items[i].t->ndim >= 2 ? cfg->weight_decay : 0) != 0) {
            tg_optim_free(o);
            return NULL;
        }
    return o;
}

int tg_optim_set_weight_decay(tg_optim *o, int i, tg_real wd) {
    if (!o || i < 0 || i >= o->params.n || !(wd >= 0)) {
        tg_set_error("optim_set_weight_decay: %s", !o           ? "NULL optimizer"
                                                   : !(wd >= 0) ? "negative or NaN weight decay"
                                                                : "parameter index out of range");
        return -1;
    }
    if (!o->weight_decay) {
        o->weight_decay = tg_sys_alloc((size_t)o->params.n * sizeof *o->weight_decay);
        if (!o->weight_decay) {
            tg_set_error("optim_set_weight_decay: out of memory");
            return -1;
        }
        for (int k = 0; k < o->params.n; k++) o->weight_decay[k] = o->cfg.weight_decay;
    }
    o->weight_decay[i] = wd;
    return 0;
}

tg_real tg_optim_weight_decay(const tg_optim *o, int i) {
    if (!o || i < 0 || i >= o->params.n) return 0;
    return o->weight_decay ? o->weight_decay[i] : o->cfg.weight_decay;
}

int tg_optim_set_lr(tg_optim *o, tg_real lr) {
    if (!o || !(lr >= 0)) {
        tg_set_error("optim_set_lr: %s", !o ? "NULL optimizer" : "negative or NaN learning rate");
        return -1;
    }
    o->cfg.lr = lr;
    return 0;
}

/* torch.nn.utils.clip_grad_norm_ (norm_type 2): the norm of all gradients
 * as one vector, summed in double in a fixed order; every gradient is
 * multiplied by max_norm / (norm + 1e-6) when that factor is below 1. */
tg_real tg_clip_grad_norm(const tg_params *p, tg_real max_norm) {
    if (!p) return 0;
    if (!(max_norm > 0)) { /* NaN or <= 0: nothing could be kept */
        tg_set_error("clip_grad_norm: max_norm %g must be positive (inf: no clipping, the norm only)",
                     (double)max_norm);
        return -1;
    }
    double sq = 0;
    for (int i = 0; i < p->n; i++) {
        const tg_tensor *g = p->items[i].t ? p->items[i].t->grad : NULL;
        if (!g) continue;
        for (int64_t k = 0; k < g->size; k++) sq += (double)g->data[k] * (double)g->data[k];
    }
    double norm = sqrt(sq);
    double coef = (double)max_norm / (norm + 1e-6);
    if (coef < 1) {
        for (int i = 0; i < p->n; i++) {
            tg_tensor *g = p->items[i].t ? p->items[i].t->grad : NULL;
            if (g) tg_k_scale(g->data, coef, g->size);
        }
    }
    return (tg_real)norm;
}
