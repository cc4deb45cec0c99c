/* The training run (src/train/run.h) on a small regression: the best
 * checkpoint and patience, a last step that makes the weights non-finite
 * or a loss that diverges (the last good checkpoint stays, byte for byte),
 * and the metrics log cut back on resume without touching earlier lines. */
#include <stdlib.h>
#include <unistd.h>
#include "test_util.h"

static char dir[64];
static void setup(void) {
    snprintf(dir, sizeof dir, "/tmp/tgrad-run-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}
static void teardown(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) cr_log_warn("could not remove %s", dir);
}
TestSuite(run, .init = setup, .fini = teardown);

typedef struct {
    tg_linear *lin;
    tg_params params;
    tg_optim *opt;
    tg_rngs rngs;
    tg_rng data;
    tg_tensor *x, *y; /* [8, 3] -> [8, 1] */
} reg;

static void reg_new(reg *r) {
    tg_rng init = tg_rng_new(7);
    *r = (reg){.lin = tg_linear_new(3, 1, true, &init), .data = tg_rng_new(9)};
    tg_params_init(&r->params);
    cr_assert_eq(tg_linear_params(r->lin, &r->params, "lin"), 0);
    tg_optim_config oc = tg_adamw_config((tg_real)1e-2, 0);
    TG_REQUIRE(r->opt = tg_optim_new(&oc, &r->params));
    cr_assert_eq(tg_rngs_add(&r->rngs, "data", &r->data), 0);
    TG_REQUIRE(r->x = tg_randn(TG_SHAPE(8, 3), &init));
    TG_REQUIRE(r->y = tg_randn(TG_SHAPE(8, 1), &init));
}
static void reg_free(reg *r) {
    tg_optim_free(r->opt);
    tg_params_free(&r->params);
    tg_linear_free(r->lin);
    tg_free(r->x), tg_free(r->y);
}
/* One micro-batch: the loss of the regression, backward through the run. */
static int reg_backward(reg *r, tg_run *run) {
    tg_scope_begin();
    int rc = tg_run_backward(run, tg_mse_loss(tg_linear_forward(r->lin, r->x), r->y));
    tg_scope_end();
    return rc;
}

static tg_run_config quiet_config(int64_t steps, int eval_every) {
    tg_run_config c = tg_run_defaults(dir, steps);
    c.eval_every = eval_every, c.quiet = true;
    return c;
}

/* A fresh model (reg_new) and a quiet run of it: steps, evaluated every
 * eval_every. */
static tg_run *reg_run(reg *r, int64_t steps, int eval_every) {
    reg_new(r);
    tg_run_config c = quiet_config(steps, eval_every);
    tg_run *run = tg_run_open(&c, &r->params, r->opt, &r->rngs);
    TG_REQUIRE(run);
    return run;
}

static unsigned char *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s", path);
    static unsigned char buf[1 << 20];
    *n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    unsigned char *copy = malloc(*n);
    memcpy(copy, buf, *n);
    return copy;
}
static void expect_file_is(const char *path, const unsigned char *want, size_t n) {
    size_t m;
    unsigned char *got = read_all(path, &m);
    cr_expect(m == n && memcmp(got, want, n) == 0, "%s changed", path);
    free(got);
}

/* The metadata key of a checkpoint in the run's folder is want. */
static void expect_meta(const char *file, const char *key, const char *want) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    tg_safetensors st;
    cr_assert_eq(tg_safetensors_open(path, &st), 0, "%s", tg_last_error());
    expect_meta_is(&st, key, want);
    tg_safetensors_close(&st);
}

/* Validation losses 3, 2, 2.5, 2.6 with patience 2: best at the second
 * evaluation (best.safetensors holds that step), early stop after the
 * fourth, exit status 0. */
Test(run, best_checkpoint_and_patience) {
    reg r;
    reg_new(&r);
    tg_run_config c = quiet_config(100, 1);
    c.patience = 2;
    tg_run *run = tg_run_open(&c, &r.params, r.opt, &r.rngs);
    TG_REQUIRE(run);
    const double val[] = {3, 2, 2.5, 2.6, 1.0};
    int k = 0;
    while (tg_run_next(run)) {
        cr_assert_eq(reg_backward(&r, run), 0);
        cr_assert_eq(tg_run_step(run), 0);
        cr_assert(tg_run_eval_due(run));
        cr_assert_eq(tg_run_eval(run, val[k++]), 0, "%s", tg_last_error());
    }
    int64_t best_step;
    cr_expect_eq(tg_run_best_val(run, &best_step), 2.0);
    cr_expect_eq(best_step, 2);
    cr_expect_eq(tg_run_steps_done(run), 4, "early stop after 2 evaluations without improvement");
    cr_expect_eq(tg_run_close(run), 0);
    expect_meta("best.safetensors", "step", "2");
    reg_free(&r);
}

/* The last step makes a weight NaN: the save is refused, the checkpoint of
 * the last evaluation stays byte for byte, the exit status is 1. */
Test(run, nonfinite_last_step_keeps_the_last_good_save) {
    reg r;
    tg_run *run = reg_run(&r, 4, 2);
    char path[128];
    snprintf(path, sizeof path, "%s/train_state.safetensors", dir);
    unsigned char *good = NULL;
    size_t n = 0;
    while (tg_run_next(run)) {
        cr_assert_eq(reg_backward(&r, run), 0);
        cr_assert_eq(tg_run_step(run), 0);
        if (tg_run_steps_done(run) == 4) r.params.items[0].t->data[1] = (tg_real)NAN; /* as a bad update would */
        if (tg_run_eval_due(run) && tg_run_eval(run, 1.0) != 0) break;
        if (tg_run_steps_done(run) == 2) good = read_all(path, &n);
    }
    cr_expect(error_has("non-finite", "last good checkpoint (step 2"), "%s", tg_last_error());
    cr_expect_eq(tg_run_close(run), 1);
    cr_assert_not_null(good);
    expect_file_is(path, good, n);
    free(good);
    reg_free(&r);
}

/* A loss that is not finite stops the run before the optimizer step. */
Test(run, diverged_loss_stops_with_the_last_save) {
    reg r;
    tg_run *run = reg_run(&r, 10, 2);
    while (tg_run_next(run)) {
        if (tg_run_steps_done(run) == 3) r.x->data[0] = (tg_real)INFINITY;
        cr_assert_eq(reg_backward(&r, run), 0);
        if (tg_run_step(run) != 0) break;
        if (tg_run_eval_due(run)) cr_assert_eq(tg_run_eval(run, 1.0), 0);
    }
    cr_expect(error_has("diverged", "step 4"), "%s", tg_last_error());
    cr_expect_eq(tg_run_steps_done(run), 3);
    cr_expect_eq(tg_run_close(run), 1);
    expect_meta("train_state.safetensors", "step", "2");
    reg_free(&r);
}

/* Resuming at step 3 keeps lines 1..3 where they are (the file's first
 * bytes unchanged) and cuts what follows: later steps, garbage, a torn line. */
Test(run, metrics_log_is_cut_back_not_rewritten) {
    char path[128];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    const char *keep =
        "{\"step\": 1, \"lr\": 0.1, \"loss\": 2, \"val_loss\": null, \"tokens_per_s\": 5, \"grad_norm\": 1}\n"
        "{\"step\": 2, \"lr\": 0.1, \"loss\": 1.5, \"val_loss\": 1.75, \"tokens_per_s\": 5, \"grad_norm\": 1}\n"
        "{\"grad_norm\": 1, \"step\": 3, \"loss\": 1.25, \"lr\": 0.1, \"val_loss\": null, \"x\": [1]}\n";
    FILE *f = fopen(path, "w");
    fputs(keep, f);
    fputs("{\"step\": 4, \"lr\": 0.1, \"loss\": 1, \"val_loss\": null}\n{\"step\": 5, \"lo", f);
    fclose(f);
    tg_metrics *lines;
    int64_t n;
    tg_metrics_log *log = tg_metrics_log_resume(path, 3, &lines, &n);
    TG_REQUIRE(log);
    cr_expect_eq(n, 3);
    cr_expect(n == 3 && lines[1].val_loss == 1.75 && lines[2].loss == 1.25 && isnan(lines[2].val_loss));
    tg_sys_free(lines);
    tg_metrics m = {4, 0.1, 1, NAN, 5, 1};
    cr_expect_eq(tg_metrics_log_write(log, &m), 0);
    cr_expect_eq(tg_metrics_log_close(log), 0);
    size_t len;
    unsigned char *got = read_all(path, &len);
    cr_expect(len > strlen(keep) && memcmp(got, keep, strlen(keep)) == 0, "the kept lines moved");
    cr_expect(strstr((char *)got + strlen(keep), "\"step\": 4") && !memchr(got + strlen(keep), '5', 1));
    free(got);
    /* A step past the file's lines keeps them all. */
    log = tg_metrics_log_resume(path, 10, &lines, &n);
    TG_REQUIRE(log);
    cr_expect_eq(n, 4);
    tg_sys_free(lines);
    tg_metrics_log_close(log);
    /* ...and so does a huge one (the line buffer was sized by the step:
     * 2^60 lines wrapped to a 0-byte buffer, overflowed by the first line) */
    log = tg_metrics_log_resume(path, (int64_t)1 << 60, &lines, &n);
    TG_REQUIRE(log);
    cr_expect(n == 4 && lines[3].step == 4, "n %lld", (long long)n);
    tg_sys_free(lines);
    tg_metrics_log_close(log);
}

/* Resume without a checkpoint, or past its steps, says so. */
Test(run, resume_errors_name_the_run) {
    reg r;
    reg_new(&r);
    tg_run_config c = quiet_config(3, 1);
    c.resume = true;
    cr_expect_null(tg_run_open(&c, &r.params, r.opt, &r.rngs));
    cr_expect(error_has(dir, "train_state.safetensors"), "%s", tg_last_error());
    c.resume = false;
    tg_run *run = tg_run_open(&c, &r.params, r.opt, &r.rngs);
    TG_REQUIRE(run);
    while (tg_run_next(run)) {
        cr_assert_eq(reg_backward(&r, run), 0);
        cr_assert_eq(tg_run_step(run), 0);
        if (tg_run_eval_due(run)) cr_assert_eq(tg_run_eval(run, 1.0), 0);
    }
    cr_expect_eq(tg_run_close(run), 0);
    c.resume = true;
    cr_expect_null(tg_run_open(&c, &r.params, r.opt, &r.rngs));
    cr_expect(error_has("at step 3 of 3", "extends"), "%s", tg_last_error());
    c.steps = 5;
    TG_REQUIRE(run = tg_run_open(&c, &r.params, r.opt, &r.rngs));
    cr_expect_eq(tg_run_steps_done(run), 3);
    cr_expect_eq(tg_run_close(run), 0);
    reg_free(&r);
}

/* Accumulation over micro-batches whose targets are ignored unevenly (1 of
 * 6, then 4 of 6): with the summed losses (tg_run_backward_sum) the step's
 * gradient and loss are one batch of the 7 counted targets, exactly; the
 * mean of the two means (tg_run_backward) weighs the 2 targets of the second
 * micro-batch as much as the 5 of the first, and differs. */
static const int ce_targets[12] = {
    0, 2, TG_IGNORE_INDEX, 1, 1, 0, TG_IGNORE_INDEX, 2, TG_IGNORE_INDEX, TG_IGNORE_INDEX, 0, TG_IGNORE_INDEX};

/* The run's gradient of the linear layer after one step of 2 micro-batches
 * (sums: the exact form), and its logged loss. */
static void accumulated(bool sums, tg_real *grad, float *loss) {
    tg_rng init = tg_rng_new(3);
    tg_linear *lin = tg_linear_new(4, 3, true, &init);
    tg_tensor *x = tg_randn(TG_SHAPE(12, 4), &init);
    tg_params p;
    tg_params_init(&p);
    cr_assert_eq(tg_linear_params(lin, &p, "lin"), 0);
    tg_optim_config oc = tg_sgd_config(0, 0, 0); /* lr 0: the weights stay, the gradient is read after the step */
    tg_optim *opt = tg_optim_new(&oc, &p);
    tg_rngs rngs = {0};
    tg_run_config c = quiet_config(1, 1);
    c.accum = 2;
    tg_run *run = tg_run_open(&c, &p, opt, &rngs);
    TG_REQUIRE(run);
    cr_assert(tg_run_next(run));
    for (int k = 0; k < 2; k++) {
        tg_scope_begin();
        tg_tensor *logits = tg_linear_forward(lin, tg_slice(x, 0, 6 * k, 6 * k + 6));
        int64_t n = 0; /* the count is written by the loss, before the call that reads it */
        tg_tensor *sum = sums ? tg_cross_entropy_sum(logits, ce_targets + 6 * k, NULL, TG_IGNORE_INDEX, &n) : NULL;
        int rc = sums ? tg_run_backward_sum(run, sum, n)
                      : tg_run_backward(run, tg_cross_entropy(logits, ce_targets + 6 * k, NULL, TG_IGNORE_INDEX));
        cr_assert_eq(rc, 0, "%s", tg_last_error());
        tg_scope_end();
    }
    cr_assert_eq(tg_run_step(run), 0, "%s", tg_last_error());
    memcpy(grad, lin->weight->grad->data, sizeof(tg_real) * 12);
    const float *train, *vs, *vl;
    int64_t n;
    int nv;
    tg_run_history(run, &train, &n, &vs, &vl, &nv);
    *loss = train[0];
    tg_run_close(run);
    tg_optim_free(opt);
    tg_params_free(&p);
    tg_linear_free(lin);
    tg_free(x);
}

Test(run, accumulation_of_sums_is_one_batch_with_uneven_ignored_targets) {
    /* One batch of all 12 rows, 7 counted. */
    tg_rng init = tg_rng_new(3);
    tg_linear *lin = tg_linear_new(4, 3, true, &init);
    tg_tensor *x = tg_randn(TG_SHAPE(12, 4), &init);
    tg_scope_begin();
    tg_tensor *loss = tg_cross_entropy(tg_linear_forward(lin, x), ce_targets, NULL, TG_IGNORE_INDEX);
    cr_assert_eq(tg_backward(loss), 0);
    double want_loss = tg_item(loss);
    tg_scope_end();
    tg_real want[12], exact[12], means[12];
    memcpy(want, lin->weight->grad->data, sizeof want);
    float exact_loss, means_loss;
    accumulated(true, exact, &exact_loss);
    accumulated(false, means, &means_loss);
    double err = 0, off = 0, norm = 0;
    for (int i = 0; i < 12; i++) {
        err = fmax(err, fabs((double)(exact[i] - want[i])));
        off = fmax(off, fabs((double)(means[i] - want[i])));
        norm = fmax(norm, fabs((double)want[i]));
    }
    cr_expect(err < 1e-12 * norm, "sums: max |difference| %g from one batch", err);
    cr_expect(off > 0.05 * norm, "means differ from one batch when the counts differ (%g)", off / norm);
    cr_expect(fabs(exact_loss - want_loss) < 1e-6 * want_loss, "the step's loss %g, one batch's %g", exact_loss,
              want_loss);
    tg_linear_free(lin);
    tg_free(x);
}
