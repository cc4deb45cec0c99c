/* Hostile input to the programs (issue 10): each case once crashed, hung,
 * or ended with exit 0 and a wrong or missing result. Every one must now
 * end promptly with a clear message and a non-zero exit. */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "test_util.h"

static long long clock_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static char tmp[64];
static char out[16384];

static void setup(void) {
    snprintf(tmp, sizeof tmp, "/tmp/tgrad-hostile-XXXXXX");
    cr_assert_not_null(mkdtemp(tmp));
}
static void teardown(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) cr_log_warn("could not remove %s", tmp);
}
TestSuite(hostile, .init = setup, .fini = teardown);

/* Runs build/.../bin/<prog> with args in tmp, under `timeout`; returns its
 * exit code (124 when it had to be killed), its output in out. */
static int run(int seconds, const char *prog, const char *args) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cd '%s' && timeout -s KILL %d '%s/%s/bin/%s' %s > '%s/log' 2>&1", tmp, seconds,
             TG_SRC_DIR, TG_BUILD_DIR, prog, args, tmp);
    int status = system(cmd);
    char path[256];
    snprintf(path, sizeof path, "%s/log", tmp);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(out, 1, sizeof out - 1, f) : 0;
    out[n] = 0;
    if (f) fclose(f);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

#define EXPECT_OUT(s) cr_expect_not_null(strstr(out, s), "output lacks '%s':\n%s", s, out)

Test(hostile, bench_rejects_an_unknown_workload_in_only) {
    cr_expect_eq(run(30, "bench", "--only toy,bogus --no-torch"), 2, "%s", out);
    EXPECT_OUT("unknown workload 'bogus'");
}

Test(hostile, bench_fails_when_it_cannot_write_its_report) {
    cr_expect_eq(run(120, "bench", "--only gemm-128 --no-torch --markdown /nonexistent-dir/B.md"), 1, "%s", out);
    EXPECT_OUT("/nonexistent-dir/B.md");
}

/* ---- reverse --load: checkpoint metadata is untrusted input ---------------- */

/* Copies the safetensors file src to dst with new metadata (a JSON object). */
static void rewrite_metadata(const char *src, const char *dst, const char *meta) {
    tg_safetensors st;
    cr_assert_eq(tg_safetensors_open(src, &st), 0, "%s", tg_last_error());
    tg_params p;
    tg_params_init(&p);
    tg_tensor *ts[64];
    cr_assert(st.n <= 64);
    for (int i = 0; i < st.n; i++) {
        ts[i] = tg_empty_persistent(st.entries[i].ndim, st.entries[i].shape);
        cr_assert_not_null(ts[i]);
        cr_assert_eq(tg_safetensors_read(&st, i, ts[i]->data), 0);
        cr_assert_eq(tg_params_add(&p, NULL, st.entries[i].name, ts[i]), 0);
    }
    cr_assert_eq(tg_checkpoint_save(dst, &p, meta), 0, "%s", tg_last_error());
    for (int i = 0; i < st.n; i++) tg_free(ts[i]);
    tg_params_free(&p);
    tg_safetensors_close(&st);
}

static const char *GOOD_META =
    "{\"task\":\"reverse\",\"pe\":\"fixed\",\"vocab\":\"16\",\"seq_len\":\"16\",\"dim\":\"64\",\"heads\":\"4\","
    "\"ffn\":\"128\",\"layers\":\"2\"}";

/* One metadata value replaced in GOOD_META. */
static void meta_with(char *out, size_t cap, const char *key, const char *value) {
    char pat[32];
    snprintf(pat, sizeof pat, "\"%s\":\"", key);
    const char *at = strstr(GOOD_META, pat);
    cr_assert_not_null(at);
    const char *vstart = at + strlen(pat), *vend = strchr(vstart, '"');
    snprintf(out, cap, "%.*s%s%s", (int)(vstart - GOOD_META), GOOD_META, value, vend);
}

Test(hostile, reverse_load_rejects_crafted_metadata_quickly) {
    char good[256], bad[256], meta[512], args[600];
    cr_assert_eq(run(120, "reverse", "--steps 1 --pe fixed --heldout 8 --out ."), 0, "%s", out);
    snprintf(good, sizeof good, "%s/reverse_fixed.safetensors", tmp);
    snprintf(bad, sizeof bad, "%s/bad.safetensors", tmp);
    rewrite_metadata(good, bad, GOOD_META);
    cr_expect_eq(run(60, "reverse", "--load bad.safetensors --heldout 8"), 0, "the untouched copy must load: %s", out);

    struct { const char *key, *value, *says; } cases[] = {
        {"vocab", "5000", "vocab"},            /* once indexed a 4096-entry stack array */
        {"seq_len", "2000000000", "seq_len"},  /* once an unchecked 8 GB malloc */
        {"layers", "100000", "layers"},        /* once ran out of memory building blocks */
        {"dim", "99999999", "dim"},            /* once 15 s and 4 GB before failing */
        {"seq_len", "-1", "seq_len"},          /* once "-0.00%" with exit 0 */
        {"seq_len", "0", "seq_len"},           /* once "-nan%" with exit 0 */
        {"pe", "rotary", "rotary"},            /* once silently replaced */
        {"task", "copy", "copy"},
        {"vocab", "16junk", "16junk"},         /* once accepted as 16 */
        {"dim", "32", "shape"},                /* in range, but not the tensors' size */
        {"layers", "1", "more blocks"},
        {"heads", "5", "divide"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        meta_with(meta, sizeof meta, cases[i].key, cases[i].value);
        rewrite_metadata(good, bad, meta);
        snprintf(args, sizeof args, "--load bad.safetensors --heldout 8");
        double t0 = (double)clock_ms();
        int rc = run(20, "reverse", args);
        double ms = (double)clock_ms() - t0;
        cr_expect_eq(rc, 1, "%s=%s: exit %d, output:\n%s", cases[i].key, cases[i].value, rc, out);
        cr_expect_not_null(strstr(out, cases[i].says), "%s=%s: message lacks '%s':\n%s", cases[i].key,
                           cases[i].value, cases[i].says, out);
        cr_expect_lt(ms, 3000, "%s=%s took %.0f ms", cases[i].key, cases[i].value, ms);
    }
    /* A missing key is an error too, not a default. */
    rewrite_metadata(good, bad, "{\"task\":\"reverse\",\"pe\":\"fixed\"}");
    cr_expect_eq(run(20, "reverse", "--load bad.safetensors --heldout 8"), 1, "%s", out);
    cr_expect_not_null(strstr(out, "missing"), "%s", out);
}

Test(hostile, reverse_stops_at_divergence) {
    /* --lr 10 once trained 1000 steps to a loss of 26,591 and exited 0. */
    cr_expect_eq(run(120, "reverse", "--steps 1000 --lr 10 --pe fixed --heldout 8 --out ."), 1, "%s", out);
    EXPECT_OUT("diverged");
    EXPECT_OUT("at step");
}
