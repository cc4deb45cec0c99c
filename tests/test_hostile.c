/* Hostile input to the programs (issue 10): each case once crashed, hung,
 * or ended with exit 0 and a wrong or missing result. Every one must now
 * end promptly with a clear message and a non-zero exit. */
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "program_util.h"

static long long clock_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void setup(void) { make_tmp("hostile"); }
TestSuite(hostile, .init = setup, .fini = remove_tmp);

/* Runs build/.../bin/<prog> with args in tmp, under `timeout`; returns its
 * exit code (124 when it had to be killed), its output in out. */
static int run(int seconds, const char *prog, const char *args) {
    char wrapper[64];
    snprintf(wrapper, sizeof wrapper, "timeout -s KILL %d", seconds);
    return run_wrapped(wrapper, prog, args);
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
    tg_tensor *ts[128];
    cr_assert(st.n <= 128);
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

/* One metadata value replaced in meta (a flat object of strings). */
static void meta_of(char *dst, size_t cap, const char *meta, const char *key, const char *value) {
    char pat[32];
    snprintf(pat, sizeof pat, "\"%s\":\"", key);
    const char *at = strstr(meta, pat);
    cr_assert_not_null(at, "%s", key);
    const char *vstart = at + strlen(pat), *vend = strchr(vstart, '"');
    snprintf(dst, cap, "%.*s%s%s", (int)(vstart - meta), meta, value, vend);
}

typedef struct {
    const char *key, *value, *says; /* the metadata value set, and what the error must name */
} meta_case;

/* Each case: good's copy bad with one value of meta replaced; `prog args`
 * (which loads bad) exits 1 within 3 s with a message naming the case.
 * Then a key missing (the metadata partial) is an error too, not a default. */
static void expect_crafted_rejected(const char *good, const char *bad, const char *meta, const meta_case *cases,
                                    size_t n, const char *prog, const char *args, const char *partial) {
    char m[512];
    for (size_t i = 0; i < n; i++) {
        meta_of(m, sizeof m, meta, cases[i].key, cases[i].value);
        rewrite_metadata(good, bad, m);
        double t0 = (double)clock_ms();
        int rc = run(20, prog, args);
        double ms = (double)clock_ms() - t0;
        cr_expect_eq(rc, 1, "%s=%s: exit %d, output:\n%s", cases[i].key, cases[i].value, rc, out);
        cr_expect_not_null(strstr(out, cases[i].says), "%s=%s: message lacks '%s':\n%s", cases[i].key, cases[i].value,
                           cases[i].says, out);
        cr_expect_lt(ms, 3000, "%s=%s took %.0f ms", cases[i].key, cases[i].value, ms);
    }
    rewrite_metadata(good, bad, partial);
    cr_expect_eq(run(20, prog, args), 1, "%s", out);
    cr_expect_not_null(strstr(out, "missing"), "%s", out);
}

Test(hostile, reverse_load_rejects_crafted_metadata_quickly) {
    char good[256], bad[256];
    cr_assert_eq(run(120, "reverse", "--steps 1 --pe fixed --heldout 8 --out ."), 0, "%s", out);
    snprintf(good, sizeof good, "%s/reverse_fixed.safetensors", tmp);
    snprintf(bad, sizeof bad, "%s/bad.safetensors", tmp);
    rewrite_metadata(good, bad, GOOD_META);
    cr_expect_eq(run(60, "reverse", "--load bad.safetensors --heldout 8"), 0, "the untouched copy must load: %s", out);

    static const meta_case cases[] = {
        {"vocab", "5000", "vocab"},           /* once indexed a 4096-entry stack array */
        {"seq_len", "2000000000", "seq_len"}, /* once an unchecked 8 GB malloc */
        {"layers", "100000", "layers"},       /* once ran out of memory building blocks */
        {"dim", "99999999", "dim"},           /* once 15 s and 4 GB before failing */
        {"seq_len", "-1", "seq_len"},         /* once "-0.00%" with exit 0 */
        {"seq_len", "0", "seq_len"},          /* once "-nan%" with exit 0 */
        {"pe", "rotary", "rotary"},           /* once silently replaced */
        {"task", "copy", "copy"},
        {"vocab", "16junk", "16junk"}, /* once accepted as 16 */
        {"dim", "32", "shape"},        /* in range, but not the tensors' size */
        {"layers", "1", "more blocks"},
        {"heads", "5", "divide"},
    };
    expect_crafted_rejected(good, bad, GOOD_META, cases, sizeof cases / sizeof cases[0], "reverse",
                            "--load bad.safetensors --heldout 8", "{\"task\":\"reverse\",\"pe\":\"fixed\"}");
}

Test(hostile, reverse_stops_at_divergence) {
    /* --lr 10 once trained 1000 steps to a loss of 26,591 and exited 0. */
    cr_expect_eq(run(120, "reverse", "--steps 1000 --lr 10 --pe fixed --heldout 8 --out ."), 1, "%s", out);
    EXPECT_OUT("diverged");
    EXPECT_OUT("at step");
}

/* ---- lm --load / --resume: the same for the GPT's checkpoints --------------- */

#define LM_TINY_ARGS                                                                                               \
    "--data '" TG_SRC_DIR "/tests/data/fortunes_excerpt.txt' --steps 4 --batch 2 --block 16 --layers 2 --heads 2 " \
    "--dim 16 --eval-every 2 --eval-batches 2 --tokens 8"
static const char *LM_META = "{\"vocab_size\":\"256\",\"block_size\":\"16\",\"n_layer\":\"2\",\"n_head\":\"2\","
                             "\"n_embd\":\"16\",\"bias\":\"true\",\"gelu\":\"tanh\"}";

/* An lm run in folder dir, stopped after 2 of its 4 steps, trained on t.txt:
 * the first `bytes` bytes of the test excerpt (t.txt rewritten). */
static void lm_stopped_on_excerpt_head(int bytes, const char *dir) {
    char cmd[600], args[300];
    snprintf(cmd, sizeof cmd, "head -c %d '%s/tests/data/fortunes_excerpt.txt' > '%s/t.txt'", bytes, TG_SRC_DIR, tmp);
    cr_assert_eq(system(cmd), 0);
    snprintf(args, sizeof args,
             "--data t.txt --steps 4 --batch 2 --block 16 --layers 1 --heads 2 --dim 16 --eval-batches 2 --tokens 0 "
             "--stop-after 2 --out %s",
             dir);
    cr_assert_eq(run(60, "lm", args), 0, "%s", out);
}

Test(hostile, lm_load_rejects_crafted_metadata_quickly) {
    char good[256], bad[256];
    cr_assert_eq(run(120, "lm", LM_TINY_ARGS " --out ."), 0, "%s", out);
    snprintf(good, sizeof good, "%s/lm.safetensors", tmp);
    snprintf(bad, sizeof bad, "%s/bad.safetensors", tmp);
    rewrite_metadata(good, bad, LM_META);
    cr_expect_eq(run(60, "lm", "--sample --load bad.safetensors --tokens 4"), 0, "the untouched copy must load: %s",
                 out);
    static const meta_case cases[] = {
        {"vocab_size", "70000", "vocab_size"},
        {"block_size", "2000000000", "block_size"},
        {"n_layer", "100000", "n_layer"},
        {"n_embd", "99999999", "n_embd"},
        {"block_size", "-1", "block_size"},
        {"n_head", "0", "n_head"},
        {"n_layer", "2junk", "2junk"},
        {"gelu", "relu", "relu"},
        {"bias", "maybe", "maybe"},
        {"n_embd", "8", "shape"},
        {"vocab_size", "300", "shape"},
        {"block_size", "32", "shape"},
        {"n_layer", "1", "more blocks"},
        {"n_layer", "3", "transformer.h.2"},
        {"n_head", "3", "divide"},
    };
    expect_crafted_rejected(good, bad, LM_META, cases, sizeof cases / sizeof cases[0], "lm",
                            "--sample --load bad.safetensors --tokens 4", "{\"n_layer\":\"2\"}");
    rewrite_metadata(good, bad, NULL);
    cr_expect_eq(run(20, "lm", "--sample --load bad.safetensors"), 1, "%s", out);
    EXPECT_OUT("missing");

    /* A training state's run settings obey the flags' ranges too. */
    snprintf(good, sizeof good, "%s/train_state.safetensors", tmp);
    tg_safetensors st;
    cr_assert_eq(tg_safetensors_open(good, &st), 0);
    char steps[32];
    cr_assert_gt(tg_safetensors_meta(&st, "steps", steps, sizeof steps), 0);
    cr_expect_str_eq(steps, "4");
    char full[4096];
    cr_assert_lt(st.metadata_len, sizeof full);
    snprintf(full, sizeof full, "%.*s", (int)st.metadata_len, st.metadata);
    tg_safetensors_close(&st);
    const char *pairs[][3] = {{"steps", "-5", "steps"}, {"batch", "1e9", "batch"}, {"lr", "nan", "lr"}};
    for (int i = 0; i < 3; i++) {
        char key[32];
        snprintf(key, sizeof key, "\"%s\":\"", pairs[i][0]);
        char *at = strstr(full, key);
        cr_assert_not_null(at, "%s in %s", key, full);
        char edited[4096];
        const char *vstart = at + strlen(key), *vend = strchr(vstart, '"');
        snprintf(edited, sizeof edited, "%.*s%s%s", (int)(vstart - full), full, pairs[i][1], vend);
        snprintf(bad, sizeof bad, "%s/r2", tmp);
        mkdir(bad, 0777);
        snprintf(bad, sizeof bad, "%s/r2/train_state.safetensors", tmp); /* a run's checkpoint in its folder */
        rewrite_metadata(good, bad, edited);
        cr_expect_eq(run(20, "lm", "--resume r2"), 1, "%s=%s: %s", pairs[i][0], pairs[i][1], out);
        cr_expect_not_null(strstr(out, pairs[i][2]), "%s", out);
    }

    /* The data changed under a stopped run: its windows would not be the same. */
    lm_stopped_on_excerpt_head(4000, "s");
    /* A resume reads the run's own tokens.npy, not the text file... */
    lm_stopped_on_excerpt_head(3000, "s3");
    cr_expect_eq(run(60, "lm", "--resume s/train_state.safetensors --out s --stop-after 3"), 0, "%s", out);
    /* ...and refuses that file when it no longer holds the run's tokens. */
    char cmd[600];
    snprintf(cmd, sizeof cmd, "cp '%s/s3/tokens.npy' '%s/s/tokens.npy'", tmp, tmp);
    cr_assert_eq(system(cmd), 0);
    cr_expect_eq(run(60, "lm", "--resume s/train_state.safetensors --out s"), 1, "%s", out);
    EXPECT_OUT("data_tokens is 3000 here, but the run in s has 4000");
}

/* ---- no leak on the success and the error paths of every program ----------- */

static char *memmemx(char *hay, size_t n, const char *needle) {
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(hay + i, needle, k) == 0) return hay + i;
    return NULL;
}

/* Runs prog under valgrind; fails the test on a definite or indirect leak or
 * a memory error (exit 99), else expects exit code want. */
static void valgrind_run(const char *prog, const char *args, int want) {
    int rc = run_wrapped("valgrind -q --leak-check=full --errors-for-leak-kinds=definite,indirect --error-exitcode=99",
                         prog, args);
    cr_expect_neq(rc, 99, "valgrind: %s %s leaks or touches bad memory:\n%s", prog, args, out);
    if (rc != 99) cr_expect_eq(rc, want, "%s %s: exit %d, expected %d:\n%s", prog, args, rc, want, out);
}

/* seq_layers_dump frees everything when its save fails (it returned at once). */
Test(hostile, seq_layers_dump_frees_on_a_failed_save, .timeout = 120) {
#if defined(__SANITIZE_ADDRESS__)
    cr_skip_test("an ASan build cannot run under valgrind; LeakSanitizer checks these programs there");
#endif
    if (system("command -v valgrind > /dev/null") != 0) cr_skip_test("valgrind is not installed");
    valgrind_run("seq_layers_dump", "--out no_such_dir/x.safetensors", 1);
    cr_expect(strstr(out, "no_such_dir"), "the failed save is named: %s", out);
    valgrind_run("seq_layers_dump", "--out s.safetensors", 0);
}

Test(hostile, programs_free_everything_on_success_and_error_paths, .timeout = 900) {
#if defined(__SANITIZE_ADDRESS__)
    cr_skip_test("an ASan build cannot run under valgrind; LeakSanitizer checks these programs there");
#endif
    if (system("command -v valgrind > /dev/null") != 0) cr_skip_test("valgrind is not installed");
    char good[256], bad[256];
    cr_assert_eq(run(120, "reverse", "--steps 2 --pe fixed --batch 8 --heldout 8 --out ."), 0, "%s", out);
    snprintf(good, sizeof good, "%s/reverse_fixed.safetensors", tmp);
    /* In range and the right sizes, so the model is built; then the strict
     * load fails on a renamed tensor (once a 241 KB leak). */
    snprintf(bad, sizeof bad, "%s/renamed.safetensors", tmp);
    rewrite_metadata(good, bad, GOOD_META);
    {
        FILE *f = fopen(bad, "r+b");
        cr_assert_not_null(f);
        char buf[8192];
        size_t n = fread(buf, 1, sizeof buf, f);
        char *at = memmemx(buf, n, "head.bias");
        cr_assert_not_null(at);
        at[0] = 'x'; /* "xead.bias": same length, header still valid */
        fseek(f, at - buf, SEEK_SET);
        fputc('x', f);
        fclose(f);
    }
    snprintf(bad, sizeof bad, "%s/truncated.safetensors", tmp);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "head -c 300 '%s' > '%s'", good, bad);
    cr_assert_eq(system(cmd), 0);

    valgrind_run("positional_encoding", "--out pe", 0);
    valgrind_run("positional_encoding", "--steps 0", 2);
    valgrind_run("attention_basics", "--out ab", 0);
    valgrind_run("reverse", "--steps 2 --pe learned --batch 4 --heldout 4 --out r", 0);
    valgrind_run("reverse", "--load reverse_fixed.safetensors --heldout 4", 0);
    valgrind_run("reverse", "--load renamed.safetensors --heldout 4", 1);
    valgrind_run("reverse", "--load truncated.safetensors --heldout 4", 1);
    valgrind_run("reverse", "--load missing.safetensors", 1);
    valgrind_run("reverse", "--steps 50 --lr 10 --pe none --batch 4 --heldout 4 --out r", 1);
    valgrind_run("reverse", "--bogus", 2);
    valgrind_run("inspect", "reverse_fixed.safetensors", 0);
    valgrind_run("inspect", "missing.safetensors", 1);
    valgrind_run("plot_runs", "r/reverse_learned r/reverse_learned --labels a,b --out curves.png", 0);
    valgrind_run("plot_runs", "r/reverse_learned missing", 1);
    valgrind_run("heatmap", "reverse_fixed.safetensors --tensor head.weight --out h.png", 0);
    valgrind_run("heatmap", "reverse_fixed.safetensors --tensor nothing --out h.png", 1);
    valgrind_run("lm", LM_TINY_ARGS " --out lm --stop-after 2", 0);
    valgrind_run("lm", "--resume lm/train_state.safetensors --out lm", 0);
    valgrind_run("lm", "--sample --load lm/lm.safetensors --tokens 8", 0);
    valgrind_run("lm", "--load lm/lm.safetensors --logits l.npy --prompt ab", 0);
    valgrind_run("lm", "--sample --load truncated.safetensors", 1);
    valgrind_run("lm", "--sample --load reverse_fixed.safetensors", 1);
    valgrind_run("lm", "--resume lm/lm.safetensors --out lm", 2); /* not a run's checkpoint: a bad flag */
    valgrind_run("lm", "--data missing.txt --out lm --overwrite", 1);
    valgrind_run("lm", "--data missing.txt --out lm", 1); /* a run is there: refused */
    valgrind_run("lm", "--bogus", 2);
    valgrind_run("extrapolate",
                 "--steps 2 --batch 2 --heldout 2 --dim 8 --heads 2 --ffn 8 --layers 1 --task shift --out e", 0);
    valgrind_run("extrapolate", "--pe bogus", 2);
    valgrind_run("bench", "--workload toy --steps 10 --warmup 1", 0);
    valgrind_run("bench", "--only bogus", 2);
}
