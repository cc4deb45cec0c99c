/* The training loop's tools (train.h): learning-rate schedules against
 * values worked out by hand, AdamW parameter groups against a hand-computed
 * step and torch.optim.AdamW's algorithm with two groups, gradient
 * accumulation against one large batch, the metrics log read back with the
 * project's JSON reader, and a training state from which a run resumes bit
 * for bit while a bad file changes nothing. */
#include <sys/stat.h>

#include "io/json.h"
#include "io_test_util.h"
#include "test_util.h"
#include "tgrad.h"

#define EXCERPT TG_SRC_DIR "/tests/data/fortunes_excerpt.txt"

TestSuite(train, .fini = cleanup);

/* ---- learning-rate schedules ----------------------------------------------------- */
Test(train, lr_constant) {
    tg_lr_schedule s = tg_lr_constant(0.3);
    cr_expect_eq(tg_lr_at(&s, 0), 0.3);
    cr_expect_eq(tg_lr_at(&s, 123456789), 0.3);
}

/* nanoGPT's get_lr with learning_rate 1, min_lr 0.1, warmup_iters 4,
 * lr_decay_iters 12, worked out by hand:
 *   it 0..3: (it + 1) / 5;  it 4: r = 0, 1;  it 6: r = 1/4,
 *   0.1 + 0.9 * 0.5 (1 + cos(pi/4)) = 0.1 + 0.45 (1 + 0.7071067811865476);
 *   it 8: r = 1/2, 0.1 + 0.45 = 0.55;  it 12: r = 1, 0.1;  it 13: min_lr. */
Test(train, lr_warmup_cosine_is_nanogpts) {
    tg_lr_schedule s = tg_lr_warmup_cosine(1.0, 0.1, 4, 12);
    const double want[][2] = {{0, 0.2},  {1, 0.4},  {3, 0.8},  {4, 1.0},      {6, 0.1 + 0.45 * 1.7071067811865476},
                              {8, 0.55}, {12, 0.1}, {13, 0.1}, {1000000, 0.1}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        double got = tg_lr_at(&s, (int64_t)want[i][0]);
        cr_expect(fabs(got - want[i][1]) < 1e-15, "step %g: %.17g, expected %.17g", want[i][0], got, want[i][1]);
    }
    /* decreasing through the decay */
    for (int64_t it = 4; it < 12; it++) cr_expect(tg_lr_at(&s, it + 1) < tg_lr_at(&s, it));
    /* no warm-up and no decay span: lr at 0, min_lr after (nanoGPT divides 0 by 0 at 0) */
    tg_lr_schedule z = tg_lr_warmup_cosine(1.0, 0.1, 0, 0);
    cr_expect_eq(tg_lr_at(&z, 0), 1.0);
    cr_expect_eq(tg_lr_at(&z, 1), 0.1);
}

Test(train, lr_errors) {
    tg_lr_schedule s = tg_lr_warmup_cosine(1.0, 0.1, 10, 5);
    cr_expect(isnan(tg_lr_at(&s, 0)));
    cr_expect(error_has("lr_at", "warmup"));
    s = tg_lr_warmup_cosine(-1.0, 0.1, 1, 5);
    cr_expect(isnan(tg_lr_at(&s, 0)));
    s = tg_lr_warmup_cosine(1.0, NAN, 1, 5);
    cr_expect(isnan(tg_lr_at(&s, 0)));
    s = tg_lr_constant(1.0);
    cr_expect(isnan(tg_lr_at(&s, -1)));
    cr_expect(error_has("lr_at", "negative step"));
    cr_expect(isnan(tg_lr_at(NULL, 0)));
    s.kind = (tg_lr_kind)7;
    cr_expect(isnan(tg_lr_at(&s, 0)));
}

/* ---- AdamW parameter groups ------------------------------------------------------------ */
/* A Linear(3 -> 2) and a LayerNorm(2): weight [2, 3] decays, the three 1-D
 * tensors do not. Gradients come from loss = sum_p sum(p * C_p). */
typedef struct {
    tg_linear *lin;
    tg_layer_norm_layer *ln;
    tg_params p;
} small;

static void small_new(small *s) {
    tg_rng rng = tg_rng_new(3);
    s->lin = tg_linear_new(3, 2, true, &rng);
    s->ln = tg_layer_norm_layer_new(2, (tg_real)1e-5);
    TG_REQUIRE(s->lin);
    TG_REQUIRE(s->ln);
    tg_fill_uniform(s->ln->weight, (tg_real)0.5, (tg_real)1.5, &rng); /* not all ones: decay would show */
    tg_fill_uniform(s->ln->bias, -1, 1, &rng);
    tg_params_init(&s->p);
    cr_assert_eq(tg_linear_params(s->lin, &s->p, "lin"), 0);
    cr_assert_eq(tg_layer_norm_layer_params(s->ln, &s->p, "ln"), 0);
}

static void small_free(small *s) {
    tg_linear_free(s->lin);
    tg_layer_norm_layer_free(s->ln);
    tg_params_free(&s->p);
}

/* The gradient of parameter element k at step t: any fixed numbers. */
static double grad_value(int step, int i, int64_t k) { return sin(1.3 * step + 2.1 * i + 0.7 * (double)k) - 0.2; }

static void set_grads(const tg_params *p, int step) {
    tg_scope_begin();
    tg_tensor *total = NULL;
    for (int i = 0; i < p->n; i++) {
        tg_tensor *w = p->items[i].t;
        tg_tensor *c = tg_empty(w->ndim, w->shape);
        for (int64_t k = 0; k < c->size; k++) c->data[k] = (tg_real)grad_value(step, i, k);
        tg_tensor *term = tg_sum_all(tg_mul(w, c));
        total = total ? tg_add(total, term) : term;
    }
    cr_assert_eq(tg_backward(total), 0, "%s", tg_last_error());
    tg_scope_end();
}

Test(train, groups_decay_matrices_only) {
    small s;
    small_new(&s);
    tg_optim_config cfg = tg_adamw_config((tg_real)0.1, (tg_real)0.5);
    tg_optim *o = tg_optim_new_groups(&cfg, &s.p);
    TG_REQUIRE(o);
    cr_assert_eq(s.p.n, 4);
    cr_expect_eq(tg_optim_weight_decay(o, 0), (tg_real)0.5); /* lin.weight [2, 3] */
    cr_expect_eq(tg_optim_weight_decay(o, 1), 0);            /* lin.bias */
    cr_expect_eq(tg_optim_weight_decay(o, 2), 0);            /* ln.weight */
    cr_expect_eq(tg_optim_weight_decay(o, 3), 0);            /* ln.bias */
    cr_expect_eq(tg_optim_weight_decay(o, 4), 0);            /* no such parameter */
    tg_real *w0 = snapshot(&s.p);
    set_grads(&s.p, 0);
    tg_optim_step(o);
    /* By hand, AdamW's first step: m^ = g, v^ = g^2, so
     *   w1 = w0 (1 - lr wd) - lr g / (|g| + eps),  wd = 0.5 for the matrix, 0 else. */
    int64_t at = 0;
    for (int i = 0; i < s.p.n; i++) {
        const tg_tensor *w = s.p.items[i].t;
        double wd = i == 0 ? 0.5 : 0.0;
        for (int64_t k = 0; k < w->size; k++) {
            double g = grad_value(0, i, k);
            double want = (double)w0[at + k] * (1 - 0.1 * wd) - 0.1 * g / (fabs(g) + 1e-8);
            cr_expect(fabs((double)w->data[k] - want) < 1e-12, "%s[%lld]: %.15g, expected %.15g", s.p.items[i].name,
                      (long long)k, (double)w->data[k], want);
        }
        at += w->size;
    }
    free(w0);
    tg_optim_free(o);
    small_free(&s);
}

/* torch.optim.AdamW(groups) with param_group['lr'] changed before each step,
 * written out from torch's documented algorithm: per parameter,
 *   w *= 1 - lr wd_group;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
 *   w -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps). */
Test(train, groups_match_torch_adamw_with_changing_lr) {
    small s;
    small_new(&s);
    tg_optim_config cfg = tg_adamw_config((tg_real)0.01, (tg_real)0.1);
    cfg.beta2 = (tg_real)0.95; /* nanoGPT's betas (0.9, 0.95) */
    tg_optim *o = tg_optim_new_groups(&cfg, &s.p);
    TG_REQUIRE(o);
    int64_t n = tg_params_numel(&s.p);
    tg_real *start = snapshot(&s.p);
    double *w = malloc((size_t)n * sizeof *w), *m = calloc((size_t)n, sizeof *m), *v = calloc((size_t)n, sizeof *v);
    for (int64_t k = 0; k < n; k++) w[k] = (double)start[k];
    const double lrs[] = {0.01, 0.03, 0.02, 0.005};
    for (int t = 1; t <= 4; t++) {
        double lr = lrs[t - 1];
        cr_assert_eq(tg_optim_set_lr(o, (tg_real)lr), 0);
        tg_optim_zero_grad(o);
        set_grads(&s.p, t);
        tg_optim_step(o);
        int64_t at = 0;
        for (int i = 0; i < s.p.n; i++) {
            double wd = s.p.items[i].t->ndim >= 2 ? 0.1 : 0.0;
            for (int64_t k = 0; k < s.p.items[i].t->size; k++, at++) {
                double g = grad_value(t, i, k);
                w[at] *= 1 - lr * wd;
                m[at] = 0.9 * m[at] + 0.1 * g;
                v[at] = 0.95 * v[at] + 0.05 * g * g;
                w[at] -= lr / (1 - pow(0.9, t)) * m[at] / (sqrt(v[at]) / sqrt(1 - pow(0.95, t)) + 1e-8);
            }
        }
        tg_real *now = snapshot(&s.p);
        for (int64_t k = 0; k < n; k++)
            cr_expect(fabs((double)now[k] - w[k]) < 1e-12, "step %d, element %lld: %.15g, expected %.15g", t,
                      (long long)k, (double)now[k], w[k]);
        free(now);
    }
    free(start);
    free(w);
    free(m);
    free(v);
    tg_optim_free(o);
    small_free(&s);
}

/* SGD takes the groups too: the matrix gets g + wd w, the rest g. */
Test(train, groups_with_sgd_and_setters) {
    small s;
    small_new(&s);
    tg_optim_config cfg = tg_sgd_config((tg_real)0.1, 0, (tg_real)0.5);
    tg_optim *o = tg_optim_new_groups(&cfg, &s.p);
    TG_REQUIRE(o);
    cr_assert_eq(tg_optim_set_weight_decay(o, 2, (tg_real)0.25), 0); /* ln.weight gets its own */
    cr_expect_eq(tg_optim_weight_decay(o, 2), (tg_real)0.25);
    tg_real *w0 = snapshot(&s.p);
    set_grads(&s.p, 0);
    tg_optim_step(o);
    int64_t at = 0;
    for (int i = 0; i < s.p.n; i++) {
        double wd = i == 0 ? 0.5 : i == 2 ? 0.25 : 0.0;
        for (int64_t k = 0; k < s.p.items[i].t->size; k++, at++) {
            double want = (double)w0[at] - 0.1 * (grad_value(0, i, k) + wd * (double)w0[at]);
            cr_expect(fabs((double)s.p.items[i].t->data[k] - want) < 1e-14, "%s[%lld]", s.p.items[i].name,
                      (long long)k);
        }
    }
    cr_expect_eq(tg_optim_set_weight_decay(o, 4, 0), -1);
    cr_expect(error_has("optim_set_weight_decay", "out of range"));
    cr_expect_eq(tg_optim_set_weight_decay(o, 0, -1), -1);
    cr_expect_eq(tg_optim_set_weight_decay(NULL, 0, 0), -1);
    cr_expect_eq(tg_optim_set_lr(o, (tg_real)-0.1), -1);
    cr_expect(error_has("optim_set_lr", "negative"));
    cr_expect_eq(tg_optim_set_lr(o, (tg_real)NAN), -1);
    cr_expect_eq(tg_optim_set_lr(NULL, 1), -1);
    cr_expect_eq(tg_optim_lr(o), (tg_real)0.1);
    cr_expect_eq(tg_optim_set_lr(o, (tg_real)0.5), 0);
    cr_expect_eq(tg_optim_lr(o), (tg_real)0.5);
    /* a plain tg_optim_new keeps one decay for all */
    tg_optim *plain = tg_optim_new(&cfg, &s.p);
    cr_expect_eq(tg_optim_weight_decay(plain, 1), (tg_real)0.5);
    cr_expect_eq(tg_optim_weight_decay(plain, 0), (tg_real)0.5);
    tg_optim_free(plain);
    tg_optim_free(o);
    cr_expect_null(tg_optim_new_groups(NULL, &s.p));
    free(w0);
    small_free(&s);
}

/* ---- gradient accumulation --------------------------------------------------------------- */
/* Linear(4 -> 3) + mean cross-entropy on 8 rows: one batch of 8, or k
 * micro-batches of 8 / k with each loss times 1/k, give the same gradients
 * and the same parameters after three AdamW steps, up to rounding. */
static void accum_run(int k, tg_real *out_w, tg_real *out_grad) {
    tg_rng rng = tg_rng_new(11);
    tg_linear *lin = tg_linear_new(4, 3, true, &rng);
    TG_REQUIRE(lin);
    tg_params p;
    tg_params_init(&p);
    cr_assert_eq(tg_linear_params(lin, &p, NULL), 0);
    tg_optim_config cfg = tg_adamw_config((tg_real)0.05, (tg_real)0.1);
    tg_optim *o = tg_optim_new_groups(&cfg, &p);
    TG_REQUIRE(o);
    enum { ROWS = 8 };
    for (int step = 0; step < 3; step++) {
        tg_real xs[ROWS * 4];
        int ys[ROWS];
        for (int r = 0; r < ROWS; r++) {
            for (int c = 0; c < 4; c++) xs[r * 4 + c] = (tg_real)sin(0.9 * step + 1.7 * r + 0.3 * c);
            ys[r] = (r * 7 + step) % 3;
        }
        tg_optim_zero_grad(o);
        int rows = ROWS / k;
        for (int micro = 0; micro < k; micro++) {
            tg_scope_begin();
            tg_tensor *x = tg_from_array(TG_SHAPE(rows, 4), xs + micro * rows * 4);
            tg_tensor *loss = tg_cross_entropy(tg_linear_forward(lin, x), ys + micro * rows, NULL, TG_IGNORE_INDEX);
            cr_assert_eq(tg_backward(tg_mul_scalar(loss, (tg_real)1 / (tg_real)k)), 0, "%s", tg_last_error());
            tg_scope_end();
        }
        if (step == 0) {
            memcpy(out_grad, lin->weight->grad->data, 12 * sizeof(tg_real));
            memcpy(out_grad + 12, lin->bias->grad->data, 3 * sizeof(tg_real));
        }
        tg_optim_step(o);
    }
    memcpy(out_w, lin->weight->data, 12 * sizeof(tg_real));
    memcpy(out_w + 12, lin->bias->data, 3 * sizeof(tg_real));
    tg_optim_free(o);
    tg_params_free(&p);
    tg_linear_free(lin);
}

Test(train, gradient_accumulation_equals_one_batch) {
    tg_real w1[15], g1[15];
    accum_run(1, w1, g1);
    const int ks[] = {2, 4, 8};
    for (int i = 0; i < 3; i++) {
        tg_real wk[15], gk[15];
        accum_run(ks[i], wk, gk);
        for (int j = 0; j < 15; j++) {
            cr_expect(fabs((double)gk[j] - (double)g1[j]) < 1e-14, "k %d grad %d: %.17g vs %.17g", ks[i], j,
                      (double)gk[j], (double)g1[j]);
            cr_expect(fabs((double)wk[j] - (double)w1[j]) < 1e-12, "k %d weight %d: %.17g vs %.17g", ks[i], j,
                      (double)wk[j], (double)w1[j]);
        }
    }
    /* and the loss scale matters: without 1/k the gradient would be k times larger */
    cr_expect(fabs((double)g1[0]) > 1e-3);
}

/* ---- metrics log -------------------------------------------------------------------------- */
/* Reads one line {"step": ..., "lr": ..., ...} with io/json.h; NaN for null. */
static void read_line(const char *line, size_t len, tg_metrics *m) {
    tg_json j = {.p = line, .end = line + len, .start = line};
    static const char *keys[] = {"step", "lr", "loss", "val_loss", "tokens_per_s", "grad_norm"};
    double *vals[] = {NULL, &m->lr, &m->loss, &m->val_loss, &m->tokens_per_s, &m->grad_norm};
    cr_assert_eq(tg_json_expect(&j, '{'), 0, "%s", j.why);
    for (int i = 0; i < 6; i++) {
        char key[32];
        if (i) cr_assert_eq(tg_json_expect(&j, ','), 0, "%s", j.why);
        cr_assert_eq(tg_json_string(&j, key, sizeof key, NULL), 0, "%s", j.why);
        cr_assert_str_eq(key, keys[i]);
        cr_assert_eq(tg_json_expect(&j, ':'), 0);
        if (i == 0) {
            uint64_t u;
            cr_assert_eq(tg_json_uint(&j, &u, "step"), 0, "%s", j.why);
            m->step = (int64_t)u;
        } else if (tg_json_null(&j)) {
            *vals[i] = NAN;
        } else {
            cr_assert_eq(tg_json_number(&j, vals[i], keys[i]), 0, "%s", j.why);
        }
    }
    cr_assert_eq(tg_json_expect(&j, '}'), 0, "%s", j.why);
    tg_json_skip_ws(&j);
    cr_assert_eq(j.p, j.end, "text after the object");
}

static int read_log(const char *path, tg_metrics *out, int max) {
    size_t n;
    unsigned char *b = read_all(path, &n);
    int count = 0;
    for (size_t at = 0; at < n;) {
        const char *nl = memchr(b + at, '\n', n - at);
        cr_assert_not_null(nl, "the last line is not ended");
        cr_assert(count < max);
        read_line((const char *)b + at, (size_t)((const unsigned char *)nl - (b + at)), &out[count++]);
        at = (size_t)((const unsigned char *)nl - b) + 1;
    }
    free(b);
    return count;
}

static bool same(double a, double b) { return (isnan(a) && isnan(b)) || a == b; }

Test(train, metrics_log_reads_back) {
    tmpdir();
    const tg_metrics want[] = {
        {0, 6e-4 / 3, 5.545177444479562, NAN, 51234.5, 0.8312},
        {10, 0.1, 2.25, 2.5, 1e6, INFINITY}, /* infinities, like NaN, are null */
        {123456789012, 0, -0.0, 1e-300, 0.0001, 3},
    };
    tg_metrics_log *log = tg_metrics_log_open(in_dir("m.jsonl"), false);
    TG_REQUIRE(log);
    for (int i = 0; i < 2; i++) cr_assert_eq(tg_metrics_log_write(log, &want[i]), 0);
    /* flushed per line: readable before close */
    tg_metrics got[8];
    cr_assert_eq(read_log(in_dir("m.jsonl"), got, 8), 2);
    cr_assert_eq(tg_metrics_log_close(log), 0);
    /* append (a resumed run) */
    log = tg_metrics_log_open(in_dir("m.jsonl"), true);
    TG_REQUIRE(log);
    cr_assert_eq(tg_metrics_log_write(log, &want[2]), 0);
    cr_assert_eq(tg_metrics_log_close(log), 0);
    cr_assert_eq(read_log(in_dir("m.jsonl"), got, 8), 3);
    for (int i = 0; i < 3; i++) {
        cr_expect_eq(got[i].step, want[i].step);
        cr_expect(same(got[i].lr, want[i].lr), "line %d lr %.17g", i, got[i].lr);
        cr_expect(same(got[i].loss, want[i].loss), "line %d loss", i);
        cr_expect(same(got[i].val_loss, want[i].val_loss), "line %d val_loss %.17g", i, got[i].val_loss);
        cr_expect(same(got[i].tokens_per_s, want[i].tokens_per_s), "line %d tokens_per_s", i);
        cr_expect(same(got[i].grad_norm, isfinite(want[i].grad_norm) ? want[i].grad_norm : NAN), "line %d", i);
    }
    size_t n;
    unsigned char *b = read_all(in_dir("m.jsonl"), &n);
    cr_expect(strstr((char *)b, "\"val_loss\": null") != NULL);
    cr_expect(strstr((char *)b, "\"lr\": 0.1,") != NULL, "shortest form: %s", b);
    free(b);
    /* not appending truncates */
    log = tg_metrics_log_open(in_dir("m.jsonl"), false);
    cr_assert_eq(tg_metrics_log_write(log, &want[0]), 0);
    cr_assert_eq(tg_metrics_log_close(log), 0);
    cr_expect_eq(read_log(in_dir("m.jsonl"), got, 8), 1);
}

Test(train, metrics_log_errors) {
    tmpdir();
    cr_expect_null(tg_metrics_log_open(g_dir, true));
    cr_expect(error_has("metrics_log", "not a regular file") || error_has("metrics_log", "directory"));
    cr_assert_eq(mkfifo(in_dir("fifo"), 0600), 0);
    cr_expect_null(tg_metrics_log_open(in_dir("fifo"), true)); /* refused, not blocked */
    cr_expect_null(tg_metrics_log_open(in_dir("no/such/dir.jsonl"), true));
    cr_expect_null(tg_metrics_log_open(NULL, true));
    cr_expect_eq(tg_metrics_log_write(NULL, &(tg_metrics){0}), -1);
    cr_expect_eq(tg_metrics_log_close(NULL), 0);
    tg_metrics_log *log = tg_metrics_log_open(in_dir("ok.jsonl"), false);
    cr_expect_eq(tg_metrics_log_write(log, NULL), -1);
    tg_metrics_log_close(log);
}

/* ---- training state: resume bit for bit -------------------------------------------------- */
/* A byte-level bigram model with dropout, so that the data order, the
 * dropout stream, the optimizer moments, its step and the schedule all
 * matter: embedding(256, 8) -> dropout(0.25) -> Linear(8, 256). */
enum { RB = 4, RT = 8 };
typedef struct {
    tg_token_data *data;
    tg_embedding *emb;
    tg_dropout_layer *drop;
    tg_linear *head;
    tg_params p;
    tg_optim *opt;
    tg_lr_schedule lr;
    tg_named_rng rngs[2];
} run;

static void run_new(run *r, const char *tokens, uint64_t init_seed) {
    tg_rng rng = tg_rng_new(init_seed);
    r->data = tg_token_data_open(tokens, 0.1, 1234);
    r->emb = tg_embedding_new(256, 8, (tg_real)0.5, &rng);
    r->drop = tg_dropout_layer_new((tg_real)0.25, &rng);
    r->head = tg_linear_new(8, 256, true, &rng);
    TG_REQUIRE(r->data);
    TG_REQUIRE(r->emb);
    TG_REQUIRE(r->drop);
    TG_REQUIRE(r->head);
    tg_params_init(&r->p);
    cr_assert_eq(tg_embedding_params(r->emb, &r->p, "emb"), 0);
    cr_assert_eq(tg_linear_params(r->head, &r->p, "head"), 0);
    tg_optim_config cfg = tg_adamw_config((tg_real)0.01, (tg_real)0.1);
    r->opt = tg_optim_new_groups(&cfg, &r->p);
    TG_REQUIRE(r->opt);
    r->lr = tg_lr_warmup_cosine(0.01, 0.001, 5, 20);
    r->rngs[0] = (tg_named_rng){"data", tg_token_data_rng(r->data)};
    r->rngs[1] = (tg_named_rng){"dropout", tg_dropout_layer_rng(r->drop)};
}

static void run_steps(run *r, int64_t from, int64_t to) {
    int x[RB * RT], y[RB * RT];
    for (int64_t step = from; step < to; step++) {
        cr_assert_eq(tg_optim_set_lr(r->opt, (tg_real)tg_lr_at(&r->lr, step)), 0);
        tg_optim_zero_grad(r->opt);
        cr_assert_eq(tg_token_data_batch(r->data, RB, RT, x, y), 0);
        tg_scope_begin();
        tg_tensor *h = tg_dropout_layer_forward(r->drop, tg_embedding_forward(r->emb, x, TG_SHAPE(RB, RT)));
        tg_tensor *loss = tg_cross_entropy(tg_linear_forward(r->head, h), y, NULL, TG_IGNORE_INDEX);
        cr_assert_eq(tg_backward(loss), 0, "%s", tg_last_error());
        tg_scope_end();
        tg_clip_grad_norm(&r->p, 1);
        tg_optim_step(r->opt);
    }
}

static void run_free(run *r) {
    tg_optim_free(r->opt);
    tg_params_free(&r->p);
    tg_embedding_free(r->emb);
    tg_dropout_layer_free(r->drop);
    tg_linear_free(r->head);
    tg_token_data_close(r->data);
}

/* Model values and optimizer state, in one buffer. */
static tg_real *state_snapshot(run *r, int64_t *n) {
    tg_params all;
    tg_params_init(&all);
    cr_assert_eq(tg_params_extend(&all, "model", &r->p), 0);
    cr_assert_eq(tg_optim_state(r->opt, &all, "optim"), 0);
    *n = tg_params_numel(&all);
    tg_real *s = snapshot(&all);
    tg_params_free(&all);
    return s;
}

static const char *make_tokens(void) {
    static char path[256]; /* in_dir's buffers are reused */
    snprintf(path, sizeof path, "%s", in_dir("corpus.npy"));
    cr_assert_eq(tg_tokens_from_text(EXCERPT, path), 0, "%s", tg_last_error());
    return path;
}

Test(train, resume_is_bit_identical) {
    tmpdir();
    const char *tokens = make_tokens();
    run a, b, c;
    run_new(&a, tokens, 1);
    run_steps(&a, 0, 20);

    run_new(&b, tokens, 1);
    run_steps(&b, 0, 10);
    cr_assert_eq(tg_train_state_save(in_dir("state.safetensors"), &b.p, b.opt, 10, b.rngs, 2), 0, "%s",
                 tg_last_error());
    run_free(&b);

    run_new(&c, tokens, 99); /* fresh objects, another initialisation */
    int64_t step = -1;
    cr_assert_eq(tg_train_state_load(in_dir("state.safetensors"), &c.p, c.opt, &step, c.rngs, 2), 0, "%s",
                 tg_last_error());
    cr_assert_eq(step, 10);
    cr_expect_eq(c.data->rng.counter, 10 * RB);
    run_steps(&c, step, 20);

    int64_t na, nc;
    tg_real *sa = state_snapshot(&a, &na), *sc = state_snapshot(&c, &nc);
    cr_assert_eq(na, nc);
    cr_expect(memcmp(sa, sc, (size_t)na * sizeof(tg_real)) == 0, "model or optimizer state differs after resume");
    cr_expect(memcmp(&a.data->rng, &c.data->rng, sizeof(tg_rng)) == 0);
    cr_expect(memcmp(&a.drop->rng, &c.drop->rng, sizeof(tg_rng)) == 0);
    cr_expect_eq(tg_optim_state_tensor(a.opt, "step", 0)->data[0], 20);
    /* The test can fail: a state without the dropout stream resumes into
     * another run (the fresh layer's stream is at its start). */
    run_new(&b, tokens, 1);
    run_steps(&b, 0, 10);
    cr_assert_eq(tg_train_state_save(in_dir("nodrop.safetensors"), &b.p, b.opt, 10, b.rngs, 1), 0);
    run_free(&b);
    run_new(&b, tokens, 99);
    cr_assert_eq(tg_train_state_load(in_dir("nodrop.safetensors"), &b.p, b.opt, &step, b.rngs, 1), 0);
    run_steps(&b, step, 20);
    int64_t nb;
    tg_real *sb = state_snapshot(&b, &nb);
    cr_expect(memcmp(sa, sb, (size_t)na * sizeof(tg_real)) != 0);
    free(sb);
    free(sa);
    free(sc);
    run_free(&b);
    run_free(&a);
    run_free(&c);
}

/* Everything a load may change, to compare after a failed load. */
typedef struct {
    tg_real *values;
    int64_t n;
    tg_rng data, drop;
} saved;

static saved save_all(run *r) {
    saved s;
    s.values = state_snapshot(r, &s.n);
    s.data = r->data->rng;
    s.drop = r->drop->rng;
    return s;
}

static void expect_load_fails_unchanged(run *r, const char *path, const tg_params *model, int n_rngs,
                                        const char *what) {
    saved before = save_all(r);
    int64_t step = 77;
    tg_clear_error();
    cr_expect_eq(tg_train_state_load(path, model, r->opt, &step, r->rngs, n_rngs), -1, "load should fail (%s)", what);
    cr_expect(error_has("train_state_load", what), "error '%s' lacks '%s'", tg_last_error() ? tg_last_error() : "",
              what);
    cr_expect_eq(step, 77);
    saved after = save_all(r);
    cr_assert_eq(before.n, after.n);
    cr_expect(memcmp(before.values, after.values, (size_t)before.n * sizeof(tg_real)) == 0, "changed (%s)", what);
    cr_expect(memcmp(&before.data, &after.data, sizeof(tg_rng)) == 0, "data rng changed (%s)", what);
    cr_expect(memcmp(&before.drop, &after.drop, sizeof(tg_rng)) == 0, "dropout rng changed (%s)", what);
    free(before.values);
    free(after.values);
}

/* A file with the tensors of r and the given metadata, written by the
 * plain safetensors writer, which checks no value: a crafted file. */
static void write_state(run *r, const char *path, const char *meta) {
    tg_params all;
    tg_params_init(&all);
    cr_assert_eq(tg_params_extend(&all, "model", &r->p), 0);
    cr_assert_eq(tg_optim_state(r->opt, &all, "optim"), 0);
    cr_assert_eq(tg_safetensors_save(path, &all, meta), 0, "%s", tg_last_error());
    tg_params_free(&all);
}

/* A run with init seed 1 on fresh tokens in a new temporary directory. */
static void run_fresh(run *r) {
    tmpdir();
    run_new(r, make_tokens(), 1);
}

Test(train, bad_states_change_nothing) {
    run r;
    run_fresh(&r);
    run_steps(&r, 0, 3);
    char good[256]; /* in_dir's buffers are reused */
    snprintf(good, sizeof good, "%s", in_dir("good.safetensors"));
    cr_assert_eq(tg_train_state_save(good, &r.p, r.opt, 3, r.rngs, 2), 0, "%s", tg_last_error());
    run_steps(&r, 3, 5); /* now the objects differ from the file */

    /* truncated */
    size_t n;
    unsigned char *b = read_all(good, &n);
    write_all(in_dir("cut.safetensors"), b, n - 5);
    expect_load_fails_unchanged(&r, in_dir("cut.safetensors"), &r.p, 2, "cut.safetensors");
    /* a flipped value into NaN (the last 8 bytes are the last value's: the
     * optimizer's step) */
    memset(b + n - sizeof(tg_real), 0xff, sizeof(tg_real));
    write_all(in_dir("nan.safetensors"), b, n);
    expect_load_fails_unchanged(&r, in_dir("nan.safetensors"), &r.p, 2, "'optim.step' is nan");
    free(b);
    /* other generators than given */
    expect_load_fails_unchanged(&r, good, &r.p, 1, "generators");
    /* another model: a parameter list without the head's bias */
    tg_params fewer;
    tg_params_init(&fewer);
    cr_assert_eq(tg_embedding_params(r.emb, &fewer, "emb"), 0);
    cr_assert_eq(tg_params_add(&fewer, "head", "weight", r.head->weight), 0);
    expect_load_fails_unchanged(&r, good, &fewer, 2, "unexpected");
    tg_params_free(&fewer);
    /* a plain model checkpoint is not a training state */
    cr_assert_eq(tg_checkpoint_save(in_dir("model.safetensors"), &r.p, NULL), 0);
    expect_load_fails_unchanged(&r, in_dir("model.safetensors"), &r.p, 2, "not a training state");
    /* bad metadata, with the right tensors */
    const char *metas[][2] = {
        {"{\"tgrad_train_state\": \"2\", \"step\": \"3\", \"rngs\": \"data,dropout\"}", "format '2'"},
        {"{\"tgrad_train_state\": \"1\", \"step\": \"-3\", \"rngs\": \"data,dropout\"}", "step"},
        {"{\"tgrad_train_state\": \"1\", \"step\": \"99999999999999999999\", \"rngs\": \"data,dropout\"}", "step"},
        {"{\"tgrad_train_state\": \"1\", \"rngs\": \"data,dropout\"}", "step"},
        {"{\"tgrad_train_state\": \"1\", \"step\": \"3\", \"rngs\": \"data,dropout\", \"rng.data\": \"1 2 3\"}",
         "rng.dropout"},
        {"{\"tgrad_train_state\": \"1\", \"step\": \"3\", \"rngs\": \"data,dropout\", \"rng.data\": \"1 2\", "
         "\"rng.dropout\": \"1 2 3\"}",
         "rng.data"},
        {"{\"tgrad_train_state\": \"1\", \"step\": \"3\", \"rngs\": \"data,dropout\", \"rng.data\": \"1 2 3 4\", "
         "\"rng.dropout\": \"1 2 3\"}",
         "rng.data"},
        {"{\"tgrad_train_state\": \"1\", \"step\": \"3\", \"rngs\": \"data,dropout\", \"rng.data\": \"1 -2 3\", "
         "\"rng.dropout\": \"1 2 3\"}",
         "rng.data"},
    };
    for (size_t i = 0; i < sizeof metas / sizeof metas[0]; i++) {
        write_state(&r, in_dir("meta.safetensors"), metas[i][0]);
        expect_load_fails_unchanged(&r, in_dir("meta.safetensors"), &r.p, 2, metas[i][1]);
    }
    /* a value too long to read whole is refused, not read cut short as 0 */
    /* (zeros past the loader's buffer for a value, TG_TRAIN_MAX_RNGS * 33 + 8) */
    const size_t zeros = TG_TRAIN_MAX_RNGS * 33 + 100, cap = zeros + 1000;
    char *longmeta = malloc(cap);
    int at = snprintf(longmeta, cap,
                      "{\"tgrad_train_state\": \"1\", \"step\": \"3\", \"rngs\": \"data,dropout\", "
                      "\"rng.dropout\": \"1 2 3\", \"rng.data\": \"1 2 ");
    memset(longmeta + at, '0', zeros);
    snprintf(longmeta + at + zeros, cap - (size_t)at - zeros, "5\"}");
    write_state(&r, in_dir("meta.safetensors"), longmeta);
    expect_load_fails_unchanged(&r, in_dir("meta.safetensors"), &r.p, 2, "rng.data");
    free(longmeta);
    /* and the good file still loads */
    int64_t step = 0;
    cr_expect_eq(tg_train_state_load(good, &r.p, r.opt, &step, r.rngs, 2), 0, "%s", tg_last_error());
    cr_expect_eq(step, 3);
    cr_expect_eq(tg_optim_state_tensor(r.opt, "step", 0)->data[0], 3);
    run_free(&r);
}

Test(train, save_errors) {
    run r;
    run_fresh(&r);
    tg_named_rng bad[] = {{"a b", tg_token_data_rng(r.data)}};
    cr_expect_eq(tg_train_state_save(in_dir("s"), &r.p, r.opt, 0, bad, 1), -1);
    cr_expect(error_has("train_state_save", "name"));
    tg_named_rng twice[] = {r.rngs[0], r.rngs[0]};
    cr_expect_eq(tg_train_state_save(in_dir("s"), &r.p, r.opt, 0, twice, 2), -1);
    cr_expect(error_has("train_state_save", "twice"));
    tg_named_rng null_rng[] = {{"x", NULL}};
    cr_expect_eq(tg_train_state_save(in_dir("s"), &r.p, r.opt, 0, null_rng, 1), -1);
    cr_expect_eq(tg_train_state_save(in_dir("s"), &r.p, r.opt, -1, r.rngs, 2), -1);
    cr_expect_eq(tg_train_state_save(in_dir("s"), &r.p, NULL, 0, r.rngs, 2), -1);
    cr_expect_eq(tg_train_state_save(in_dir("no/dir/s"), &r.p, r.opt, 0, r.rngs, 2), -1);
    cr_expect(error_has("train_state_save", "no/dir/s"));
    cr_expect(!file_exists(in_dir("s")));
    int64_t step;
    cr_expect_eq(tg_train_state_load(in_dir("s"), &r.p, r.opt, &step, r.rngs, 2), -1);
    cr_expect_eq(tg_train_state_load(in_dir("s"), &r.p, r.opt, NULL, r.rngs, 2), -1);
    /* no generators at all is fine */
    run_steps(&r, 0, 2);
    cr_expect_eq(tg_train_state_save(in_dir("s"), &r.p, r.opt, 2, NULL, 0), 0, "%s", tg_last_error());
    cr_expect_eq(tg_train_state_load(in_dir("s"), &r.p, r.opt, &step, NULL, 0), 0, "%s", tg_last_error());
    cr_expect_eq(step, 2);
    run_free(&r);
}

/* ---- training state: nothing unloadable is saved, nothing untrusted is loaded ---------- */
TestSuite(train_state, .fini = cleanup);

/* The state file of r as saved at step 3, its path in good (256 bytes). */
static void good_state_at_3(run *r, char *good) {
    run_fresh(r);
    run_steps(r, 0, 3);
    snprintf(good, 256, "%s", in_dir("good.safetensors"));
    cr_assert_eq(tg_train_state_save(good, &r->p, r->opt, 3, r->rngs, 2), 0, "%s", tg_last_error());
}

/* good_state_at_3, and the file's bytes (n of them, the caller frees). */
static unsigned char *good_state_bytes(run *r, char *good, size_t *n) {
    good_state_at_3(r, good);
    return read_all(good, n);
}

/* A save of r at step to path must fail with a message holding
 * "train_state_save: <path>: <what>; nothing written" and leave path as it
 * was: holding the bytes old[0..n) (old NULL: no file). */
static void expect_save_refused(run *r, const char *path, int64_t step, const char *what, const unsigned char *old,
                                size_t n) {
    char want[512];
    snprintf(want, sizeof want, "train_state_save: %s: %s; nothing written", path, what);
    tg_clear_error();
    cr_expect_eq(tg_train_state_save(path, &r->p, r->opt, step, r->rngs, 2), -1, "save accepted (%s)", what);
    cr_expect(error_has(want, NULL), "error '%s', expected '%s'", tg_last_error() ? tg_last_error() : "", want);
    if (!old) {
        cr_expect(!file_exists(path), "a refused save created %s", path);
    } else {
        size_t m;
        unsigned char *now = read_all(path, &m);
        cr_expect(m == n && memcmp(now, old, n) == 0, "a refused save changed %s (%s)", path, what);
        free(now);
    }
    cr_expect_eq(temp_files(), 0);
}

Test(train_state, save_refuses_non_finite) {
    run r;
    char good[256];
    size_t n;
    unsigned char *old = good_state_bytes(&r, good, &n);
    /* Model parameters and optimizer moments (emb.weight, head.weight,
     * head.bias in list order). */
    struct {
        tg_tensor *t;
        int64_t k;
        double x;
        const char *what;
    } cases[] = {
        {r.head->weight, 17, NAN, "tensor 'model.head.weight' holds nan at index 17"},
        {r.emb->weight, 0, INFINITY, "tensor 'model.emb.weight' holds inf at index 0"},
        {r.head->bias, 5, -INFINITY, "tensor 'model.head.bias' holds -inf at index 5"},
        {tg_optim_state_tensor(r.opt, "m", 0), 3, NAN, "tensor 'optim.m.emb.weight' holds nan at index 3"},
        {tg_optim_state_tensor(r.opt, "v", 2), 1, INFINITY, "tensor 'optim.v.head.bias' holds inf at index 1"},
        {tg_optim_state_tensor(r.opt, "step", 0), 0, NAN, "tensor 'optim.step' holds nan at index 0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tg_real keep = cases[i].t->data[cases[i].k];
        cases[i].t->data[cases[i].k] = (tg_real)cases[i].x;
        expect_save_refused(&r, good, 3, cases[i].what, old, n);
        expect_save_refused(&r, in_dir("new.safetensors"), 3, cases[i].what, NULL, 0);
        cases[i].t->data[cases[i].k] = keep;
    }
    /* The first bad value in list order is the one named. */
    tg_optim_state_tensor(r.opt, "v", 0)->data[9] = (tg_real)NAN;
    r.head->bias->data[2] = (tg_real)NAN;
    expect_save_refused(&r, good, 3, "tensor 'model.head.bias' holds nan at index 2", old, n);
    free(old);
    run_free(&r);
}

/* What the load refuses, the save refuses too: an optimizer step other than
 * the run's, a negative second moment. */
Test(train_state, save_refuses_unloadable_optimizer_state) {
    run r;
    char good[256];
    size_t n;
    unsigned char *old = good_state_bytes(&r, good, &n);
    expect_save_refused(&r, good, 4, "'optim.step' is 3; expected 4, the run's step", old, n);
    expect_save_refused(&r, good, 2, "'optim.step' is 3; expected 2, the run's step", old, n);
    tg_optim_state_tensor(r.opt, "step", 0)->data[0] = (tg_real)2.5;
    expect_save_refused(&r, good, 3, "'optim.step' is 2.5; expected 3, the run's step", old, n);
    tg_optim_state_tensor(r.opt, "step", 0)->data[0] = 3;
    tg_real keep = tg_optim_state_tensor(r.opt, "v", 1)->data[6];
    tg_optim_state_tensor(r.opt, "v", 1)->data[6] = (tg_real)-0.25;
    expect_save_refused(
        &r, good, 3, "tensor 'optim.v.head.weight' holds -0.25 at index 6 (a second moment is never negative)", old, n);
    tg_optim_state_tensor(r.opt, "v", 1)->data[6] = keep;
    cr_expect_eq(tg_train_state_save(good, &r.p, r.opt, 3, r.rngs, 2), 0, "%s", tg_last_error());
    free(old);
    run_free(&r);
}

/* The metadata a good state of r holds, as a string to write crafted files with. */
static char *state_meta(const char *path) {
    tg_safetensors st;
    cr_assert_eq(tg_safetensors_open(path, &st), 0, "%s", tg_last_error());
    char *m = malloc(st.metadata_len + 1);
    memcpy(m, st.metadata, st.metadata_len);
    m[st.metadata_len] = 0;
    tg_safetensors_close(&st);
    return m;
}

/* Writes r's tensors with one value changed (t[k] = x) and the metadata
 * meta, then expects the load to fail naming what, leaving r as it was. */
static void expect_crafted_refused(run *r, const char *meta, tg_tensor *t, int64_t k, double x, const char *what) {
    tg_real keep = t->data[k];
    t->data[k] = (tg_real)x;
    write_state(r, in_dir("crafted.safetensors"), meta);
    t->data[k] = keep;
    char full[512];
    snprintf(full, sizeof full, "train_state_load: %s: %s", in_dir("crafted.safetensors"), what);
    expect_load_fails_unchanged(r, in_dir("crafted.safetensors"), &r->p, 2, full);
}

Test(train_state, crafted_optimizer_state_refused) {
    run r;
    char good[256];
    good_state_at_3(&r, good);
    char *meta = state_meta(good);
    run_steps(&r, 3, 5);                                  /* the objects now differ from the file */
    tg_optim_state_tensor(r.opt, "step", 0)->data[0] = 3; /* as in the file, so only the crafted value differs */
    /* optim.step: a finite whole number equal to the run's step (3). */
    const struct {
        double x;
        const char *is;
    } steps[] = {{-1, "-1"}, {-0.5, "-0.5"}, {0.5, "0.5"}, {1e30, "1e+30"},
                 {4, "4"},   {2, "2"},       {NAN, "nan"}, {INFINITY, "inf"}};
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        char what[128];
        snprintf(what, sizeof what, "'optim.step' is %s; expected 3, the run's step", steps[i].is);
        expect_crafted_refused(&r, meta, tg_optim_state_tensor(r.opt, "step", 0), 0, steps[i].x, what);
    }
    /* The run's step in the metadata one past the optimizer's. */
    char *at = strstr(meta, "\"step\":");
    cr_assert_not_null(at, "%s", meta);
    at = strchr(at + 7, '3'); /* the value "3" (the writer's spacing aside) */
    cr_assert_not_null(at, "%s", meta);
    *at = '4';
    expect_crafted_refused(&r, meta, tg_optim_state_tensor(r.opt, "step", 0), 0, 3,
                           "'optim.step' is 3; expected 4, the run's step");
    *at = '3';
    /* Adam's second moments are never negative; every moment is finite. */
    expect_crafted_refused(&r, meta, tg_optim_state_tensor(r.opt, "v", 1), 6, -0.25,
                           "tensor 'optim.v.head.weight' holds -0.25 at index 6");
    expect_crafted_refused(&r, meta, tg_optim_state_tensor(r.opt, "v", 0), 0, -1e-300,
                           "tensor 'optim.v.emb.weight' holds -1e-300 at index 0");
    expect_crafted_refused(&r, meta, tg_optim_state_tensor(r.opt, "m", 2), 4, NAN, "optim.m.head.bias");
    expect_crafted_refused(&r, meta, tg_optim_state_tensor(r.opt, "v", 2), 4, -INFINITY,
                           "tensor 'optim.v.head.bias' holds -inf at index 4");
    /* A moment of another shape. */
    tg_params all;
    tg_params_init(&all);
    cr_assert_eq(tg_params_extend(&all, "model", &r.p), 0);
    cr_assert_eq(tg_optim_state(r.opt, &all, "optim"), 0);
    tg_tensor *wrong = tg_empty_persistent(1, (const int[]){3});
    TG_REQUIRE(wrong);
    memset(wrong->data, 0, 3 * sizeof(tg_real));
    for (int i = 0; i < all.n; i++)
        if (strcmp(all.items[i].name, "optim.v.head.bias") == 0) all.items[i].t = wrong;
    cr_assert_eq(tg_safetensors_save(in_dir("shape.safetensors"), &all, meta), 0, "%s", tg_last_error());
    expect_load_fails_unchanged(&r, in_dir("shape.safetensors"), &r.p, 2, "optim.v.head.bias: shape (3) in file");
    tg_params_free(&all);
    tg_free(wrong);
    /* -0 is not negative: the file loads, and the good one still does. */
    tg_optim_state_tensor(r.opt, "step", 0)->data[0] = 3;
    tg_real keep = tg_optim_state_tensor(r.opt, "v", 0)->data[1];
    tg_optim_state_tensor(r.opt, "v", 0)->data[1] = (tg_real)-0.0;
    write_state(&r, in_dir("zero.safetensors"), meta);
    tg_optim_state_tensor(r.opt, "v", 0)->data[1] = keep;
    int64_t step = 0;
    cr_expect_eq(tg_train_state_load(in_dir("zero.safetensors"), &r.p, r.opt, &step, r.rngs, 2), 0, "%s",
                 tg_last_error());
    cr_expect_eq(tg_train_state_load(good, &r.p, r.opt, &step, r.rngs, 2), 0, "%s", tg_last_error());
    cr_expect_eq(step, 3);
    free(meta);
    run_free(&r);
}

/* SGD keeps a step count too (its update does not use it): it must match. */
Test(train_state, sgd_step_checked) {
    run r;
    run_fresh(&r);
    tg_optim_config cfg = tg_sgd_config((tg_real)0.1, (tg_real)0.9, 0);
    tg_optim *adamw = r.opt;
    r.opt = tg_optim_new(&cfg, &r.p);
    TG_REQUIRE(r.opt);
    run_steps(&r, 0, 2);
    char good[256];
    snprintf(good, sizeof good, "%s", in_dir("sgd.safetensors"));
    cr_assert_eq(tg_train_state_save(good, &r.p, r.opt, 2, r.rngs, 2), 0, "%s", tg_last_error());
    char *meta = state_meta(good);
    expect_crafted_refused(&r, meta, tg_optim_state_tensor(r.opt, "step", 0), 0, 0.5,
                           "'optim.step' is 0.5; expected 2, the run's step");
    expect_crafted_refused(&r, meta, tg_optim_state_tensor(r.opt, "step", 0), 0, 7,
                           "'optim.step' is 7; expected 2, the run's step");
    /* Momentum buffers may be negative. */
    tg_optim_state_tensor(r.opt, "momentum", 1)->data[0] = (tg_real)-3;
    write_state(&r, in_dir("neg.safetensors"), meta);
    int64_t step;
    cr_expect_eq(tg_train_state_load(in_dir("neg.safetensors"), &r.p, r.opt, &step, r.rngs, 2), 0, "%s",
                 tg_last_error());
    free(meta);
    tg_optim_free(r.opt);
    r.opt = adamw;
    run_free(&r);
}

/* ---- messages with long paths ---------------------------------------------------------- */
/* in_dir(name) spelt with "./" repeated to about 3000 bytes: a path the
 * system accepts (PATH_MAX 4096) without a deep tree to clean up. */
static char *long_path(const char *name) {
    size_t dots = 1500, n = strlen(g_dir) + 1 + 2 * dots + strlen(name) + 1;
    char *p = malloc(n), *q = p + sprintf(p, "%s/", g_dir);
    for (size_t i = 0; i < dots; i++, q += 2) memcpy(q, "./", 2);
    strcpy(q, name);
    cr_assert_geq(strlen(p), 3000);
    return p;
}

/* The recorded message with every occurrence of path replaced by "<P>". */
static char *message_without(const char *path) {
    const char *e = tg_last_error();
    cr_assert_not_null(e);
    char *out = malloc(strlen(e) + 1), *o = out;
    size_t lp = strlen(path);
    while (*e) {
        if (strncmp(e, path, lp) == 0) {
            o += sprintf(o, "<P>");
            e += lp;
        } else {
            *o++ = *e++;
        }
    }
    *o = 0;
    return out;
}

/* Failing call number which, on path (in the test directory). */
static void fail_at(int which, run *r, const char *path) {
    size_t plen = strlen(path);
    tg_clear_error();
    int64_t step;
    int rc = 0;
    switch (which) {
    case 0: /* no such file */ rc = tg_train_state_load(path, &r->p, r->opt, &step, r->rngs, 2); break;
    case 1: /* a NaN weight */
        r->head->bias->data[0] = (tg_real)NAN;
        rc = tg_train_state_save(path, &r->p, r->opt, 3, r->rngs, 2);
        r->head->bias->data[0] = 0;
        break;
    case 2: /* a step the optimizer did not take */ rc = tg_train_state_save(path, &r->p, r->opt, 9, r->rngs, 2); break;
    case 3: /* other generators than the file's */
        rc = tg_train_state_load(path, &r->p, r->opt, &step, r->rngs, 1);
        break;
    case 4: /* a directory that does not exist */ rc = tg_checkpoint_save(path, &r->p, NULL); break;
    case 5: rc = tg_checkpoint_load(path, &r->p); break;
    case 6: /* not a .npy file */ rc = tg_token_data_open(path, 0.1, 1) ? 0 : -1; break;
    case 7: /* a directory that does not exist */ rc = tg_tokens_save(path, (const int[]){1, 2, 3}, 3, 256); break;
    }
    cr_assert_eq(rc, -1, "call %d on a path of %zu bytes succeeded", which, plen);
}

/* A path of 3000 bytes reaches the message whole, with the whole reason:
 * the message is the one the short path gives, the path aside. */
Test(train_state, long_path_message_whole) {
    run r;
    char good[256];
    good_state_at_3(&r, good);
    const char *names[] = {"absent.safetensors",   "nan.safetensors",    "step.safetensors", "good.safetensors",
                           "no/dir/c.safetensors", "absent.safetensors", "junk.npy",         "no/dir/t.npy"};
    write_all(in_dir("junk.npy"), "not a numpy file at all", 23);
    for (int which = 0; which < 8; which++) {
        char short_path[256];
        snprintf(short_path, sizeof short_path, "%s", in_dir(names[which]));
        char *lp = long_path(names[which]);
        fail_at(which, &r, short_path);
        char *want = message_without(short_path);
        fail_at(which, &r, lp);
        char *got = message_without(lp);
        cr_expect_str_eq(got, want, "call %d: the message of a %zu-byte path is cut", which, strlen(lp));
        cr_expect(strstr(tg_last_error(), lp) != NULL, "call %d: the path is not whole", which);
        free(want);
        free(got);
        free(lp);
    }
    run_free(&r);
}

/* io/json.h's number reader, which reads the log back: JSON's grammar only. */
Test(train, json_number_is_strict) {
    const char *good[][2] = {
        {"0", "0"}, {"-0.5", "-0.5"}, {"1e-300", "1e-300"}, {"5.9999999999999995e-04", "6e-4"}, {" 12.5E+2", "1250"}};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        tg_json j = {.p = good[i][0], .end = good[i][0] + strlen(good[i][0]), .start = good[i][0]};
        double v;
        cr_expect_eq(tg_json_number(&j, &v, "x"), 0, "%s: %s", good[i][0], j.why);
        cr_expect_eq(v, strtod(good[i][1], NULL), "%s", good[i][0]);
        cr_expect_eq(j.p, j.end);
    }
    const char *bad[] = {"", "-", "01", "1.", ".5", "1e", "+1", "inf", "nan", "0x10", "null"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tg_json j = {.p = bad[i], .end = bad[i] + strlen(bad[i]), .start = bad[i]};
        double v;
        int rc = tg_json_number(&j, &v, "x");
        /* "01" and "0x10" read 0 and stop before the rest, which the
         * caller's next expectation rejects; the others fail at once */
        if (strcmp(bad[i], "01") == 0 || strcmp(bad[i], "0x10") == 0)
            cr_expect(rc == 0 && j.p != j.end);
        else
            cr_expect_eq(rc, -1, "'%s' accepted", bad[i]);
    }
    static const char text[] = "null,";
    tg_json j = {.p = text, .end = text + 5, .start = text};
    cr_expect_eq(tg_json_null(&j), 1);
    cr_expect_eq(*j.p, ',');
    cr_expect_eq(tg_json_null(&j), 0);
}
