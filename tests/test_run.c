/* The training run (src/train/run.h) on a small regression: the best
 * checkpoint and patience, a last step that makes the weights non-finite
 * or a loss that diverges (the last good checkpoint stays, byte for byte),
 * the metrics log cut back on resume without touching earlier lines, the
 * folder's lock and replacement, early stop on the best model, the
 * overfitting warning, and typed settings read back on resume. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
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
    c.overwrite = true; /* each test's runs replace their folder's; the tests of replacement clear it */
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

/* The weights at each evaluation, by step (on_save sees them). */
typedef struct {
    const tg_params *p;
    tg_real w[16][4];
    int64_t last;
} weights_seen;
static int keep_weights(void *ctx, int64_t step) {
    weights_seen *s = ctx;
    tg_real *to = s->w[step < 16 ? step : 15];
    for (int i = 0, k = 0; i < s->p->n; i++)
        for (int64_t j = 0; j < s->p->items[i].t->size && k < 4; j++) to[k++] = s->p->items[i].t->data[j];
    s->last = step;
    return 0;
}

/* A run of r (made here) with patience 2, evaluated at every step on
 * validation losses 3, 2, 2.5, 2.6, 1.0, run to its end; seen (when not
 * NULL) keeps the weights on_save sees. */
static tg_run *patience_run(reg *r, weights_seen *seen) {
    reg_new(r);
    tg_run_config c = quiet_config(100, 1);
    c.patience = 2;
    tg_run *run = tg_run_open(&c, &r->params, r->opt, &r->rngs);
    TG_REQUIRE(run);
    if (seen) {
        seen->p = &r->params;
        tg_run_on_save(run, keep_weights, seen);
    }
    const double val[] = {3, 2, 2.5, 2.6, 1.0};
    int k = 0;
    while (tg_run_next(run)) {
        cr_assert_eq(reg_backward(r, run), 0);
        cr_assert_eq(tg_run_step(run), 0);
        cr_assert(tg_run_eval_due(run));
        cr_assert_eq(tg_run_eval(run, val[k++]), 0, "%s", tg_last_error());
    }
    return run;
}

/* Validation losses 3, 2, 2.5, 2.6 with patience 2: best at the second
 * evaluation (best.safetensors holds that step), early stop after the
 * fourth, exit status 0. */
Test(run, best_checkpoint_and_patience) {
    reg r;
    tg_run *run = patience_run(&r, NULL);
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

/* A run of steps steps, evaluated at each with val[k] (val NULL: 1.0). */
static int run_through(reg *r, tg_run *run, const double *val) {
    int k = 0;
    while (tg_run_next(run)) {
        cr_assert_eq(reg_backward(r, run), 0);
        cr_assert_eq(tg_run_step(run), 0);
        if (tg_run_eval_due(run) && tg_run_eval(run, val ? val[k++] : 1.0) != 0) break;
    }
    return tg_run_close(run);
}

/* While one process writes the folder, another's run (new, replacing, or a
 * resume) is refused naming the writer's pid; after it closes, one opens. */
Test(run, a_second_writer_is_refused_naming_the_pid) {
    reg r;
    tg_run *run = reg_run(&r, 4, 2);
    pid_t kid = fork();
    cr_assert_geq(kid, 0);
    if (kid == 0) {
        reg k;
        reg_new(&k);
        tg_run_config c = quiet_config(4, 2);
        char want[64];
        snprintf(want, sizeof want, "in use by process %ld", (long)getppid());
        bool refused = !tg_run_open(&c, &k.params, k.opt, &k.rngs) && error_has(want, dir);
        c.resume = true;
        tg_setting none[1];
        refused = refused && tg_run_settings_resume(dir, none, 0) == -1 && error_has(want, NULL);
        _exit(refused ? 0 : 1);
    }
    int status;
    cr_assert_eq(waitpid(kid, &status, 0), kid);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the second writer was not refused by pid");
    cr_expect_eq(run_through(&r, run, NULL), 0);
    kid = fork();
    if (kid == 0) {
        reg k;
        reg_new(&k);
        tg_run_config c = quiet_config(6, 2);
        c.resume = true;
        tg_run *again = tg_run_open(&c, &k.params, k.opt, &k.rngs);
        _exit(again && run_through(&k, again, NULL) == 0 ? 0 : 1);
    }
    cr_assert_eq(waitpid(kid, &status, 0), kid);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "after close, a resume opens");
    reg_free(&r);
}

/* A killed writer leaves no stale lock: the kernel drops the flock. */
Test(run, a_killed_writer_leaves_no_lock) {
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t kid = fork();
    if (kid == 0) {
        reg k;
        tg_run *run = reg_run(&k, 4, 2);
        char c = run ? 'y' : 'n';
        if (write(fds[1], &c, 1) != 1) _exit(1);
        pause();
        _exit(0);
    }
    char c = 0;
    cr_assert_eq(read(fds[0], &c, 1), 1);
    cr_assert_eq(c, 'y');
    reg r;
    reg_new(&r);
    tg_run_config cfg = quiet_config(4, 2);
    cr_expect_null(tg_run_open(&cfg, &r.params, r.opt, &r.rngs), "locked while the writer lives");
    kill(kid, SIGKILL);
    waitpid(kid, NULL, 0);
    tg_run *run = tg_run_open(&cfg, &r.params, r.opt, &r.rngs);
    cr_expect_not_null(run, "%s", tg_last_error());
    if (run) cr_expect_eq(run_through(&r, run, NULL), 0);
    close(fds[0]), close(fds[1]);
    reg_free(&r);
}

/* A new run over a finished one is refused naming the three ways on, and
 * the old run's files stay; with overwrite it replaces it; a run started
 * from a checkpoint inside its own folder is refused. */
Test(run, an_existing_run_is_replaced_only_with_overwrite) {
    reg r;
    cr_expect_eq(run_through(&r, reg_run(&r, 2, 1), NULL), 0);
    char best[128];
    snprintf(best, sizeof best, "%s/best.safetensors", dir);
    size_t n;
    unsigned char *before = read_all(best, &n);
    tg_run_config c = quiet_config(2, 1);
    c.overwrite = false;
    cr_expect_null(tg_run_open(&c, &r.params, r.opt, &r.rngs));
    cr_expect(error_has("--resume", "--init-from") && error_has("--overwrite", dir), "%s", tg_last_error());
    expect_file_is(best, before, n);
    c.init_from = best;
    c.overwrite = true;
    cr_expect_null(tg_run_open(&c, &r.params, r.opt, &r.rngs));
    cr_expect(error_has("--init-from", "one folder"), "%s", tg_last_error());
    c.init_from = NULL;
    reg fresh;
    reg_new(&fresh);
    tg_run *run = tg_run_open(&c, &fresh.params, fresh.opt, &fresh.rngs);
    cr_expect_not_null(run, "%s", tg_last_error());
    cr_expect_neq(access(best, F_OK), 0, "the replaced run's best is gone");
    if (run) cr_expect_eq(run_through(&fresh, run, NULL), 0);
    free(before);
    reg_free(&r), reg_free(&fresh);
}

/* Early stop: the run ends on the best model (best.safetensors' weights
 * back in params, on_save called with them last), not on the last one. */
Test(run, early_stop_ends_on_the_best_model) {
    reg r;
    weights_seen seen = {0};
    tg_run *run = patience_run(&r, &seen);
    cr_expect(tg_run_stopped_early(run));
    cr_expect_eq(tg_run_steps_done(run), 4);
    cr_expect_eq(seen.last, 2, "the last on_save is the best model's (step 2), not step %lld's", (long long)seen.last);
    weights_seen now = {.p = &r.params};
    keep_weights(&now, 0);
    cr_expect(memcmp(now.w[0], seen.w[2], sizeof now.w[0]) == 0, "params hold the best model's weights");
    cr_expect(memcmp(now.w[0], seen.w[4], sizeof now.w[0]) != 0, "...not the last model's");
    cr_expect_eq(tg_run_close(run), 0);
    expect_meta("train_state.safetensors", "step", "4"); /* a resume continues from the last model */
    expect_meta("best.safetensors", "step", "2");
    reg_free(&r);
}

/* The lines a quiet=false run prints on stderr while f runs, in buf. */
static void stderr_of(void (*f)(void *), void *ctx, char *buf, size_t cap) {
    fflush(stderr);
    int saved = dup(2);
    char path[128];
    snprintf(path, sizeof path, "%s/stderr.txt", dir);
    FILE *to = fopen(path, "w+");
    cr_assert_not_null(to);
    dup2(fileno(to), 2);
    f(ctx);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(to);
    size_t n = fread(buf, 1, cap - 1, to);
    buf[n] = 0;
    fclose(to);
}

/* A run through validation losses ctx (ending at 0), not quiet. */
static void loud_run(void *ctx) {
    const double *val = ctx;
    int n = 0;
    while (val[n] != 0) n++;
    reg r;
    reg_new(&r);
    tg_run_config c = quiet_config(n, 1);
    c.quiet = false;
    tg_run *run = tg_run_open(&c, &r.params, r.opt, &r.rngs);
    TG_REQUIRE(run);
    run_through(&r, run, val);
    reg_free(&r);
}

static int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

/* Overfitting is a sustained rise: noise around the best (isolated rises,
 * rises within 1%) warns nothing; three evaluations in a row above the
 * best by more than 1% while training loss falls warn once. */
Test(run, overfitting_warning_only_on_a_sustained_rise) {
    static char err[1 << 16];
    double noise[] = {3, 2, 2.3, 2.01, 2.3, 1.9, 1.91, 2.2, 1.9, 2.25, 1.915, 1.92, 0};
    stderr_of(loud_run, noise, err, sizeof err);
    cr_expect_eq(count(err, "overfitting?"), 0, "noise warned:\n%s", err);
    double rise[] = {3, 2, 2.1, 2.2, 2.3, 2.4, 2.5, 0};
    stderr_of(loud_run, rise, err, sizeof err);
    cr_expect_eq(count(err, "overfitting?"), 1, "a sustained rise warns once:\n%s", err);
    cr_expect(strstr(err, "above its best (2.0000 at step 2"), "%s", err);
}

/* A NaN validation loss ends the run saying so, not "run: failed". */
Test(run, nan_validation_loss_says_so) {
    static char err[1 << 16];
    double nan_at_3[] = {3, 2, NAN, 1, 0};
    stderr_of(loud_run, nan_at_3, err, sizeof err);
    cr_expect(strstr(err, "validation loss is NaN at step 3"), "%s", err);
    cr_expect(strstr(err, "last good checkpoint (step 2"), "%s", err);
}

/* Typed settings: written with each checkpoint as text; on resume one left
 * out takes the run's value (a string too: a bf16 run stays bf16), a
 * changeable one given is applied and said, a fixed one given that differs
 * is refused naming both values, and a value out of its type or range in
 * the file is refused naming the key; at open a late one (the data's size)
 * is checked. */
Test(run, typed_settings_resume) {
    int steps = 2, dim = 16, tokens = 500;
    double lr = 0.002;
    const char *precision = "bf16", *data = "a \"quoted\"\tpath";
    bool flag = true;
    tg_setting set[] = {
        {"steps", TG_SETTING_INT, &steps, true, true, 1, 1e7, NULL},
        {"dim", TG_SETTING_INT, &dim, false, true, 1, 8192, NULL},
        {"lr", TG_SETTING_REAL, &lr, true, true, 0, 10, NULL},
        {"precision", TG_SETTING_STRING, &precision, true, true, 0, 0, NULL},
        {"data", TG_SETTING_STRING, &data, false, true, 0, 0, "data.path"},
        {"flag", TG_SETTING_BOOL, &flag, false, true, 0, 0, NULL},
        {"tokens", TG_SETTING_INT, &tokens, false, true, 1, 1e9, NULL},
    };
    enum { N = sizeof set / sizeof set[0] };
    reg r;
    reg_new(&r);
    tg_run_config c = quiet_config(2, 1);
    c.settings = set, c.n_settings = N;
    c.meta = "{\"n_layer\": \"2\"}";
    tg_run *run = tg_run_open(&c, &r.params, r.opt, &r.rngs);
    TG_REQUIRE(run);
    cr_expect_eq(run_through(&r, run, NULL), 0);
    expect_meta("train_state.safetensors", "lr", "0.002");
    expect_meta("train_state.safetensors", "data.path", "a \"quoted\"\tpath"); /* its key */
    expect_meta("train_state.safetensors", "flag", "true");
    expect_meta("train_state.safetensors", "n_layer", "2");
    /* A new process's values: nothing given but steps (changed) and dim (the same). */
    steps = 4, dim = 16, lr = 0, precision = "fp32", data = NULL, flag = false;
    for (int i = 0; i < N; i++) set[i].given = i < 2;
    cr_expect_eq(tg_run_settings_resume(dir, set, N), 0, "%s", tg_last_error());
    cr_expect_eq(lr, 0.002);
    cr_expect_str_eq(precision, "bf16", "a resumed bf16 run stays bf16");
    cr_expect_str_eq(data, "a \"quoted\"\tpath");
    cr_expect(flag);
    cr_expect_eq(steps, 4);
    dim = 32;
    cr_expect_eq(tg_run_settings_resume(dir, set, N), 1);
    cr_expect(error_has("--dim 32", "has 16, which cannot change on resume"), "%s", tg_last_error());
    dim = 16;
    /* At open: a late setting that differs (the data's size) is refused. */
    tokens = 499;
    c.resume = true, c.steps = 4;
    cr_expect_null(tg_run_open(&c, &r.params, r.opt, &r.rngs));
    cr_expect(error_has("tokens", "499") && error_has("500", NULL), "%s", tg_last_error());
    tokens = 500;
    TG_REQUIRE(run = tg_run_open(&c, &r.params, r.opt, &r.rngs));
    cr_expect_eq(tg_run_close(run), 0);
    /* A value out of its range in the file: refused naming the key. */
    set[0].min = 3, set[0].max = 10;
    cr_expect_eq(tg_run_settings_resume(dir, set, N), -1);
    cr_expect(error_has("'steps'", "'2'"), "%s", tg_last_error());
    reg_free(&r);
}
