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
 * Each kind is one row (train.h, tg_optim_rule): its name, its state
 * tensors, its checks and its update, whose per-element loop is in
 * tensor/kernels_optim.c. Nothing else names a kind: the optimizer, the
 * training state's checks (train_state.c) and tg_optim_find read the row.
 * All state is allocated by tg_optim_new, so a step makes no allocation.
 * One step counter t is shared by all parameters (torch keeps one per
 * parameter; they differ only for a parameter that had no gradient at some
 * earlier steps, which then gets the bias correction of the global t). */
#include "../nn/nn.h"
#include "train.h"
#include "../tensor/tensor_internal.h"
#include "../tensor/kernels.h" /* the update loops: tensor/kernels_optim.c */
#include "../tensor/parallel.h"
#include "../tensor/profile.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- the rows ------------------------------------------------------------- */

static int sgd_states(const tg_optim_config *c) { return c->momentum != 0; }

static int sgd_check(const tg_optim_config *c, char *why, size_t cap) {
    if (c->momentum >= 0) return 0;
    snprintf(why, cap, "momentum %g must not be negative", (double)c->momentum);
    return -1;
}

static void sgd_update(const tg_optim_config *c, tg_real wd, double t, tg_tensor *w, const tg_tensor *g,
                       tg_tensor *const *state) {
    (void)t;
    tg_k_sgd(c->lr, wd, c->momentum, w->data, c->momentum != 0 ? state[0]->data : NULL, g->data, w->size);
}

static int adam_states(const tg_optim_config *c) {
    (void)c;
    return 2;
}

static int adam_check(const tg_optim_config *c, char *why, size_t cap) {
    if (c->beta1 >= 0 && c->beta1 < 1 && c->beta2 >= 0 && c->beta2 < 1 && c->eps >= 0) return 0;
    snprintf(why, cap, "betas (%g, %g) must be in [0, 1) and eps %g not negative", (double)c->beta1, (double)c->beta2,
             (double)c->eps);
    return -1;
}

/* Adam (decoupled false) or AdamW: per-tensor constants in double (the
 * bias corrections: two pow calls a call); the per-element update in
 * tg_real, as torch computes in the parameter's dtype (and so it
 * vectorises). */
static void adam_any(bool decoupled, const tg_optim_config *c, tg_real wd, double t, tg_tensor *w, const tg_tensor *g,
                     tg_tensor *const *state) {
    tg_adam_step s = {.b1 = c->beta1, .b2 = c->beta2, .eps = c->eps};
    s.step_size = (tg_real)((double)c->lr / (1.0 - pow(c->beta1, t)));
    s.bc2_sqrt = (tg_real)sqrt(1.0 - pow(c->beta2, t));
    s.wd_l2 = decoupled ? 0 : wd;
    s.decay = (tg_real)(decoupled ? 1.0 - (double)c->lr * (double)wd : 1.0);
    tg_k_adam(&s, w->data, state[0]->data, state[1]->data, g->data, w->size);
}

static void adam_update(const tg_optim_config *c, tg_real wd, double t, tg_tensor *w, const tg_tensor *g,
                        tg_tensor *const *state) {
    adam_any(false, c, wd, t, w, g, state);
}

static void adamw_update(const tg_optim_config *c, tg_real wd, double t, tg_tensor *w, const tg_tensor *g,
                         tg_tensor *const *state) {
    adam_any(true, c, wd, t, w, g, state);
}

/* torch's defaults: betas (0.9, 0.999), eps 1e-8; AdamW's weight decay 0.01. */
#define ADAM_DEFAULTS .beta1 = (tg_real)0.9, .beta2 = (tg_real)0.999, .eps = (tg_real)1e-8
#define ADAM_STATES                                                                                               \
    .n_state = 2, .state = {{.name = "m"}, {.name = "v", .never_negative = "a second moment is never negative"}}, \
    .states_used = adam_states, .check = adam_check

/* The built-in rows, in the order of TG_SGD, TG_ADAM, TG_ADAMW (train.h). */
const tg_optim_rule tg_optim_builtin[] = {
    {
        .name = "sgd",
        .about = "SGD (torch.optim.SGD): buf = momentum buf + g + wd w; w -= lr buf",
        .n_state = 1,
        .state = {{.name = "momentum"}},
        .states_used = sgd_states,
        .check = sgd_check,
        .update = sgd_update,
        .elementwise = true,
    },
    {
        .name = "adam",
        .about = "Adam (torch.optim.Adam): moments of g + wd w, bias-corrected",
        .defaults = {ADAM_DEFAULTS},
        ADAM_STATES,
        .update = adam_update,
        .elementwise = true,
    },
    {
        .name = "adamw",
        .about = "AdamW (torch.optim.AdamW): w -= lr wd w, then Adam on g",
        .defaults = {ADAM_DEFAULTS, .weight_decay = (tg_real)0.01},
        ADAM_STATES,
        .update = adamw_update,
        .elementwise = true,
    },
};
#define N_BUILTIN ((int)(sizeof tg_optim_builtin / sizeof tg_optim_builtin[0]))

/* ---- the table ------------------------------------------------------------ */

#define MAX_ROWS 16
static const tg_optim_rule *registered[MAX_ROWS - N_BUILTIN];
static int n_registered;

const tg_optim_rule *tg_optim_rule_at(int i) {
    return i >= 0 && i < N_BUILTIN                          ? &tg_optim_builtin[i]
           : i >= N_BUILTIN && i < N_BUILTIN + n_registered ? registered[i - N_BUILTIN]
                                                            : NULL;
}

int tg_optim_rule_check(const tg_optim_rule *row) {
    const char *name = row && row->name ? row->name : "(no name)";
    const char *missing = !row                                                    ? "NULL row"
                          : !row->name || !row->name[0]                           ? "no name"
                          : !row->about                                           ? "no about line"
                          : row->n_state < 0 || row->n_state > TG_OPTIM_STATE_MAX ? "state count outside [0, 4]"
                          : !row->states_used                                     ? "no states_used function"
                          : !row->check                                           ? "no check function"
                          : !row->update                                          ? "no update function"
                                                                                  : NULL;
    for (const char *c = missing ? "" : row->name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_' || *c == '-') || c - row->name >= 31)
            missing = "a name of more than 31 characters, or not of [a-z0-9_-]";
    for (int s = 0; !missing && s < row->n_state; s++)
        if (!row->state[s].name || !row->state[s].name[0] || strchr(row->state[s].name, '.'))
            missing = "a state without a name (or with a dot)";
    if (!missing) return 0;
    tg_set_error("optim_rule: %s: %s", name, missing);
    return -1;
}

int tg_optim_register(const tg_optim_rule *row) {
    if (tg_optim_rule_check(row) != 0) return -1;
    for (int i = 0; tg_optim_rule_at(i); i++)
        if (strcmp(tg_optim_rule_at(i)->name, row->name) == 0) {
            tg_set_error("optim_register: the name '%s' is taken", row->name);
            return -1;
        }
    if (N_BUILTIN + n_registered == MAX_ROWS) {
        tg_set_error("optim_register: %s: the table is full (%d rows)", row->name, MAX_ROWS);
        return -1;
    }
    registered[n_registered++] = row;
    return 0;
}

const tg_optim_rule *tg_optim_find(const char *name) {
    const int n_rows = N_BUILTIN + n_registered;
    for (int i = 0; name && i < n_rows; i++)
        if (strcmp(tg_optim_rule_at(i)->name, name) == 0) return tg_optim_rule_at(i);
    char list[MAX_ROWS * 34] = "";
    for (int i = 0; i < n_rows; i++) tg__list_append(list, sizeof list, i, n_rows, tg_optim_rule_at(i)->name);
    tg_set_error("optimizer '%s': expected %s", name ? name : "(NULL)", list);
    return NULL;
}

tg_optim_config tg_optim_config_of(const tg_optim_rule *kind, tg_real lr) {
    tg_optim_config c = kind ? kind->defaults : (tg_optim_config){0};
    c.kind = kind;
    c.lr = lr;
    return c;
}

tg_optim_config tg_sgd_config(tg_real lr, tg_real momentum, tg_real weight_decay) {
    tg_optim_config c = tg_optim_config_of(TG_SGD, lr);
    c.momentum = momentum;
    c.weight_decay = weight_decay;
    return c;
}

tg_optim_config tg_adam_config(tg_real lr) { return tg_optim_config_of(TG_ADAM, lr); }

tg_optim_config tg_adamw_config(tg_real lr, tg_real weight_decay) {
    tg_optim_config c = tg_optim_config_of(TG_ADAMW, lr);
    c.weight_decay = weight_decay;
    return c;
}

/* ---- an optimizer ------------------------------------------------------------ */

struct tg_optim {
    tg_optim_config cfg;                   /* a copy of the config; cfg.lr is the current learning rate */
    tg_params params;                      /* a copy of the list (the tensors stay the caller's) */
    int n_state;                           /* cfg.kind->states_used(&cfg) */
    tg_tensor **state[TG_OPTIM_STATE_MAX]; /* [n_state][params.n]: the row's state tensors */
    tg_tensor *step;                       /* scalar: steps taken (a tensor so it checkpoints) */
    tg_real *weight_decay;                 /* per parameter (groups), or NULL: cfg.weight_decay for all */
    int *live;                             /* [params.n]: a step's parameters with a gradient (step_split) */
};

static bool check_config(const tg_optim_config *c) {
    char why[200] = "";
    if (!c->kind) {
        tg_set_error("optim: no optimizer kind (a row: TG_SGD, TG_ADAM, TG_ADAMW or tg_optim_find(name))");
        return false;
    }
    if (tg_optim_rule_check(c->kind) != 0) return false;
    if (!(c->lr >= 0) || !(c->weight_decay >= 0))
        snprintf(why, sizeof why, "lr %g and weight_decay %g must not be negative", (double)c->lr,
                 (double)c->weight_decay);
    else if (c->kind->check(c, why, sizeof why) != 0 && !why[0])
        snprintf(why, sizeof why, "%s refuses its settings", c->kind->name);
    if (!why[0]) return true;
    tg_set_error("optim: %s", why);
    return false;
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
    int used = cfg->kind->states_used(cfg);
    if (used < 0 || used > cfg->kind->n_state) {
        tg_set_error("optim: %s: states_used gives %d of its %d states", cfg->kind->name, used, cfg->kind->n_state);
        return NULL;
    }
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
    o->n_state = used;
    tg_params_init(&o->params);
    const int n = params->n;
    bool ok = tg_params_extend(&o->params, NULL, params) == 0;
    for (int s = 0; ok && n > 0 && s < used; s++)
        ok = (o->state[s] = tg_sys_calloc((size_t)n, sizeof **o->state)) != NULL;
    for (int s = 0; s < used; s++)
        for (int i = 0; ok && i < n; i++) ok = (o->state[s][i] = zeros_like_persistent(params->items[i].t)) != NULL;
    if (ok) ok = (o->step = tg_empty_persistent(0, NULL)) != NULL;
    if (ok && n > 0 && cfg->kind->elementwise) ok = (o->live = tg_sys_calloc((size_t)n, sizeof *o->live)) != NULL;
    if (!ok) {
        if (!tg_last_error()) tg_set_error("optim: out of memory");
        tg_optim_free(o);
        return NULL;
    }
    o->step->data[0] = 0;
    return o;
}

/* A row whose update is elementwise (tg_optim_rule.elementwise): every
 * parameter with a gradient in one split over all their elements,
 * concatenated, where a call per parameter left each small one (a bias, a
 * norm's gain) alone on one thread. A thread's range of the concatenation
 * becomes the update's calls on flat views of the runs of w, g and the
 * states it covers; an elementwise rule gives the same bits on any runs,
 * so at any thread count. */
typedef struct {
    const tg_optim *o;
    const int *live; /* parameter indices, in order */
    int n;
    double t;
} split_ctx;

/* A flat view of elements [k0, k1) of t (the update reads data and size). */
static tg_tensor flat_run(const tg_tensor *t, int64_t k0, int64_t k1) {
    tg_tensor v = *t;
    v.ndim = 1;
    v.shape[0] = (int)(k1 - k0);
    v.size = k1 - k0;
    v.data = t->data + k0;
    v.grad = NULL;
    v.owns_data = false;
    return v;
}

static void split_range(void *ctx, int64_t begin, int64_t end, int tid) {
    const split_ctx *c = ctx;
    const tg_optim *o = c->o;
    (void)tid;
    int64_t base = 0;
    for (int j = 0; j < c->n && base < end; j++) {
        int i = c->live[j];
        tg_tensor *w = o->params.items[i].t;
        int64_t k0 = begin > base ? begin - base : 0, k1 = (end < base + w->size ? end : base + w->size) - base;
        base += w->size;
        if (k1 <= k0) continue;
        tg_tensor wv = flat_run(w, k0, k1), gv = flat_run(w->grad, k0, k1), sv[TG_OPTIM_STATE_MAX];
        tg_tensor *st[TG_OPTIM_STATE_MAX] = {0};
        for (int s = 0; s < o->n_state; s++) sv[s] = flat_run(o->state[s][i], k0, k1), st[s] = &sv[s];
        tg_real wd = o->weight_decay ? o->weight_decay[i] : o->cfg.weight_decay;
        o->cfg.kind->update(&o->cfg, wd, c->t, &wv, &gv, st);
    }
}

static double step_split(tg_optim *o, double t) {
    double elems = 0;
    int n = 0;
    for (int i = 0; i < o->params.n; i++) {
        const tg_tensor *w = o->params.items[i].t;
        if (!w->grad) continue; /* no gradient reached it: skipped, as torch */
        o->live[n++] = i;
        elems += (double)w->size;
    }
    tg_parallel_for_ns((int64_t)elems, elems * TG_NS_POLY, split_range, &(split_ctx){o, o->live, n, t});
    return elems;
}

void tg_optim_step(tg_optim *o) {
    if (!o) return;
    double t = (double)o->step->data[0] + 1, elems = 0;
    o->step->data[0] = (tg_real)t;
    tg_tensor *st[TG_OPTIM_STATE_MAX] = {0};
    tg_profile_region_begin(TG_PROF_OPTIMIZER, "step");
    if (o->live)
        elems = step_split(o, t);
    else
        for (int i = 0; i < o->params.n; i++) {
            tg_tensor *w = o->params.items[i].t;
            const tg_tensor *g = w->grad;
            if (!g) continue; /* no gradient reached it: skipped, as torch */
            elems += (double)w->size;
            tg_real wd = o->weight_decay ? o->weight_decay[i] : o->cfg.weight_decay;
            for (int s = 0; s < o->n_state; s++) st[s] = o->state[s][i];
            o->cfg.kind->update(&o->cfg, wd, t, w, g, st);
        }
    /* profile.h's estimate, Adam's: about 12 flops an element; w, g, m, v read and w, m, v written */
    tg_profile_add_work(12 * elems, 7 * elems * (double)sizeof(tg_real));
    tg_profile_region_end();
}

/* Gradient i of a parameter list, for tg_k_arrays. */
static tg_real *grad_at(const void *src, int i, int64_t *len) {
    const tg_params *p = src;
    const tg_tensor *g = p->items[i].t ? p->items[i].t->grad : NULL;
    *len = g ? g->size : 0;
    return g ? g->data : NULL;
}

/* tg_zero_grad on every parameter, as one split over all the gradients'
 * elements (a job per tensor left the small ones on one thread). Its own
 * row in the profile ("zero_grad", optimizer), as torch's profiler names
 * it: it was most of the time "(other)" showed between ops. */
void tg_optim_zero_grad(tg_optim *o) {
    if (!o) return;
    tg_profile_region_begin(TG_PROF_OPTIMIZER, "zero_grad");
    tg_k_zero_arrays(&(tg_k_arrays){&o->params, o->params.n, grad_at});
    tg_profile_region_end();
}

/* Names the state after its parameter, so a checkpoint written for one
 * model loads only into the same model (tg_checkpoint_load is strict). */
int tg_optim_state(tg_optim *o, tg_params *p, const char *prefix) {
    char name[TG_PARAM_NAME_MAX];
    if (!o) {
        tg_set_error("optim_state: NULL optimizer");
        return -1;
    }
    for (int s = 0; s < o->n_state; s++)
        for (int i = 0; i < o->params.n; i++)
            if (tg_param_name(name, o->cfg.kind->state[s].name, o->params.items[i].name) ||
                tg_params_add(p, prefix, name, o->state[s][i]))
                return -1;
    return tg_params_add(p, prefix, "step", o->step);
}

void tg_optim_free(tg_optim *o) {
    if (!o) return;
    for (int s = 0; s < TG_OPTIM_STATE_MAX; s++) {
        for (int i = 0; o->state[s] && i < o->params.n; i++) tg_free(o->state[s][i]);
        tg_sys_free(o->state[s]);
    }
    tg_sys_free(o->weight_decay);
    tg_sys_free(o->live);
    tg_free(o->step);
    tg_params_free(&o->params);
    tg_sys_free(o);
}

tg_real tg_optim_lr(const tg_optim *o) { return o ? o->cfg.lr : 0; }

const tg_optim_rule *tg_optim_kind(const tg_optim *o) { return o ? o->cfg.kind : NULL; }

tg_tensor *tg_optim_state_tensor(const tg_optim *o, const char *state, int i) {
    if (!o || !state) return NULL;
    if (strcmp(state, "step") == 0) return o->step;
    if (i < 0 || i >= o->params.n) return NULL;
    for (int s = 0; s < o->n_state; s++)
        if (strcmp(o->cfg.kind->state[s].name, state) == 0) return o->state[s][i];
    return NULL;
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
 * as one vector, summed in double (pieces of the concatenated gradients
 * at boundaries fixed by its length, their sums added in order:
 * tg_k_sum_squares_arrays); every gradient is multiplied by
 * max_norm / (norm + 1e-6) when that factor is below 1. Both passes are
 * one split over all the gradients' elements. */
tg_real tg_clip_grad_norm(const tg_params *p, tg_real max_norm) {
    if (!p) return 0;
    if (!(max_norm > 0)) { /* NaN or <= 0: nothing could be kept */
        tg_set_error("clip_grad_norm: max_norm %g must be positive (inf: no clipping, the norm only)",
                     (double)max_norm);
        return -1;
    }
    const tg_k_arrays grads = {p, p->n, grad_at};
    double norm = sqrt(tg_k_sum_squares_arrays(&grads));
    double coef = (double)max_norm / (norm + 1e-6);
    if (coef < 1) tg_k_scale_arrays(&grads, coef);
    return (tg_real)norm;
}
