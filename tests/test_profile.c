/* The profiler (src/tensor/profile.h): every op call and backward rule is
 * counted once under its name and direction, regions nest as self time,
 * the rows add up to the profiled time exactly, the pool's columns see a
 * split job, and off means off (no rows, and the same results). */
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test_util.h"

static const tg_profile_entry *row(const tg_profile_entry *rows, int n, const char *name, tg_prof_dir dir) {
    for (int i = 0; i < n; i++)
        if (rows[i].dir == dir && strcmp(rows[i].name, name) == 0) return &rows[i];
    return NULL;
}

static int64_t calls(const tg_profile_entry *rows, int n, const char *name, tg_prof_dir dir) {
    const tg_profile_entry *e = row(rows, n, name, dir);
    return e ? e->calls : 0;
}

/* loss = sum(exp(x @ w)): matmul, exp, sum forward; their three rules backward. */
static tg_real one_step(tg_tensor *x, tg_tensor *w) {
    tg_scope_begin();
    tg_tensor *loss = tg_sum_all(tg_exp(tg_matmul(x, w)));
    cr_assert(loss && tg_backward(loss) == 0, "%s", tg_last_error());
    tg_real v = tg_item(loss);
    tg_scope_end();
    return v;
}

/* one_step's inputs, drawn from seed: x [m, k] and the parameter w [k, n]. */
static void step_inputs(uint64_t seed, int m, int k, int n, tg_tensor **x, tg_tensor **w) {
    tg_rng rng = tg_rng_new(seed);
    *x = tg_randn(TG_SHAPE(m, k), &rng);
    *w = tg_randn(TG_SHAPE(k, n), &rng);
    cr_assert(*x && *w, "%s", tg_last_error());
    tg_set_requires_grad(*w, true);
}

static double rows_sum(const tg_profile_entry *rows, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += rows[i].wall_ns;
    return s;
}

Test(profile, counts_every_op_and_backward_rule_once) {
    tg_tensor *x, *w;
    step_inputs(3, 4, 5, 3, &x, &w);
    tg_profile_begin();
    cr_assert(tg_profile_enabled());
    for (int i = 0; i < 3; i++) one_step(x, w);
    tg_profile_end();
    cr_assert(!tg_profile_enabled());
    tg_profile_entry rows[64];
    int n = tg_profile_entries(rows, 64);
    cr_assert(n <= 64);
    const char *ops[] = {"matmul", "exp", "sum"};
    for (int k = 0; k < 3; k++) {
        cr_expect_eq(calls(rows, n, ops[k], TG_PROF_FORWARD), 3, "%s forward: %lld calls", ops[k],
                     (long long)calls(rows, n, ops[k], TG_PROF_FORWARD));
        cr_expect_eq(calls(rows, n, ops[k], TG_PROF_BACKWARD), 3, "%s backward: %lld calls", ops[k],
                     (long long)calls(rows, n, ops[k], TG_PROF_BACKWARD));
    }
    cr_expect_eq(calls(rows, n, "backward walk", TG_PROF_BACKWARD), 3);
    /* the matmul's estimate: 2 M N K = 2 4 3 5 per forward */
    cr_expect_eq(row(rows, n, "matmul", TG_PROF_FORWARD)->flops, 3 * 2.0 * 4 * 3 * 5);
    /* Charged, not sampled: the rows partition the profiled time. */
    cr_expect_eq(rows_sum(rows, n), tg_profile_total_ns(), "rows %.0f ns, total %.0f ns", rows_sum(rows, n),
                 tg_profile_total_ns());
    for (int i = 1; i < n; i++) cr_expect(rows[i - 1].wall_ns >= rows[i].wall_ns, "rows are largest first");
    tg_free(x), tg_free(w);
}

static void sleep_ms(int ms) { nanosleep(&(struct timespec){0, ms * 1000000L}, NULL); }

Test(profile, regions_nest_as_self_time) {
    tg_rng rng = tg_rng_new(4);
    tg_tensor *x = tg_randn(TG_SHAPE(3, 3), &rng);
    tg_profile_begin();
    tg_profile_region_begin(TG_PROF_DATA, "outer");
    tg_profile_region_begin(TG_PROF_CHECKPOINT, "inner");
    sleep_ms(30); /* the inner region's own time */
    tg_scope_begin();
    TG_REQUIRE(tg_exp(x)); /* an op inside a region is its own row */
    tg_scope_end();
    tg_profile_add_work(10, 20);
    tg_profile_region_end();
    tg_profile_region_end();
    tg_profile_region_end(); /* one end too many: ignored */
    tg_profile_end();
    tg_profile_entry rows[16];
    int n = tg_profile_entries(rows, 16);
    const tg_profile_entry *outer = row(rows, n, "outer", TG_PROF_DATA),
                           *inner = row(rows, n, "inner", TG_PROF_CHECKPOINT);
    cr_assert(outer && inner);
    cr_expect_eq(outer->calls, 1);
    cr_expect_eq(inner->calls, 1);
    cr_expect_eq(calls(rows, n, "exp", TG_PROF_FORWARD), 1);
    cr_expect_eq(inner->flops, 10);
    cr_expect_eq(inner->bytes, 20);
    cr_expect_eq(outer->flops, 0, "work goes to the innermost region only");
    cr_expect_geq(inner->wall_ns, 30e6, "the sleep is the inner region's: %.0f ns", inner->wall_ns);
    /* The outer region does not count the inner one's time again. */
    cr_expect_eq(rows_sum(rows, n), tg_profile_total_ns());
    cr_expect_leq(outer->wall_ns, tg_profile_total_ns() - inner->wall_ns);
    tg_free(x);
}

Test(profile, off_means_off) {
    tg_tensor *x, *w;
    step_inputs(5, 6, 4, 4, &x, &w);
    tg_profile_begin();
    tg_profile_end();
    int before = tg_profile_entries(NULL, 0);
    double total = tg_profile_total_ns();
    tg_real off = one_step(x, w);
    tg_profile_region_begin(TG_PROF_OPTIMIZER, "region while off");
    tg_profile_region_end();
    cr_expect_eq(tg_profile_entries(NULL, 0), before, "no rows while off");
    cr_expect_eq(tg_profile_total_ns(), total);
    tg_real off_grad = w->grad->data[0];
    /* on: the same bits */
    tg_zero_grad(w);
    tg_profile_begin();
    tg_real on = one_step(x, w);
    tg_profile_end();
    cr_expect_eq(on, off, "the loss with the profiler on: %.17g, off: %.17g", (double)on, (double)off);
    cr_expect_eq(w->grad->data[0], off_grad);
    tg_free(x), tg_free(w);
}

Test(profile, the_pool_columns_see_a_split_job) {
    if (tg_set_num_threads(2) < 2) {
        tg_set_num_threads(0);
        cr_skip("one CPU");
    }
    tg_rng rng = tg_rng_new(6);
    tg_tensor *x = tg_randn(TG_SHAPE(512, 512), &rng); /* exp of 2^18 elements: far above the cost model's split */
    tg_profile_begin();
    tg_scope_begin();
    TG_REQUIRE(tg_exp(x));
    tg_scope_end();
    tg_profile_end();
    tg_profile_entry rows[8];
    int n = tg_profile_entries(rows, 8);
    const tg_profile_entry *e = row(rows, n, "exp", TG_PROF_FORWARD);
    cr_assert(e);
    cr_expect_eq(e->max_threads, 2);
    cr_expect_eq(e->par_jobs, 1);
    cr_expect_gt(e->busy_ns, 0);
    cr_expect_leq(e->par_ns, e->wall_ns);
    tg_set_num_threads(0);
    tg_free(x);
}

Test(profile, writes_a_table_and_json) {
    tg_tensor *x, *w;
    step_inputs(7, 4, 5, 3, &x, &w);
    tg_profile_begin();
    one_step(x, w);
    tg_profile_end();
    char path[] = "/tmp/tg_profile_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    char json[64];
    snprintf(json, sizeof json, "%s.json", path);
    cr_assert_eq(tg_profile_save(path, 1), 0, "%s", tg_last_error());
    cr_assert_eq(tg_profile_save(json, 1), 0, "%s", tg_last_error());
    char buf[8192];
    FILE *f = fopen(path, "r");
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = 0;
    cr_expect(strstr(buf, "| matmul | backward |"), "table:\n%s", buf);
    f = fopen(json, "r");
    len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = 0;
    cr_expect(strstr(buf, "[\"matmul\", \"forward\", 1, "), "json:\n%s", buf);
    /* the run report's table format: a run folder's profile.json shows on its page */
    tg_report *rep = tg_report_new();
    cr_expect_eq(tg_report_add_rows_file(rep, json), 0, "%s\n%s", tg_last_error(), buf);
    tg_report_free(rep);
    unlink(path), unlink(json);
    cr_expect_eq(tg_profile_save(NULL, 0), -1);
    cr_expect(error_has("profile_save", NULL));
    cr_expect_eq(tg_profile_save("/nonexistent-dir/p.txt", 0), -1);
    cr_expect(error_has("profile_save", "/nonexistent-dir/p.txt"));
    tg_free(x), tg_free(w);
}
