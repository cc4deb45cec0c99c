/* lm's runs as a user meets them (src/train/run.h through the program):
 * stop and resume with other evaluation intervals, a resumed run staying in
 * its folder, kills at random moments (during saves too) and SIGTERM, then
 * resume ending bit for bit where an uninterrupted run ends, extension,
 * --init-from, symlinks planted at every output name, long paths, and
 * --sample --load of every file a run writes. */
#include <signal.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "program_util.h"

static void setup(void) { make_tmp("lm-run"); }
TestSuite(lm_run, .init = setup, .fini = remove_tmp);

#define TINY                                                                                                      \
    "--data '" TG_SRC_DIR "/tests/data/fortunes_excerpt.txt' --batch 4 --block 16 --layers 1 --heads 2 --dim 16 " \
    "--eval-batches 2 --tokens 8 --dropout 0.1"

static int lm(const char *fmt, ...) {
    char args[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    return run_wrapped("", "lm", args);
}

static char *path_in(const char *name) {
    static char p[4][4200];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", tmp, name);
    return p[k];
}
static bool exists(const char *name) { return access(path_in(name), F_OK) == 0; }

/* The steps of a metrics log, which must be 1..n in order; returns n. */
static int log_steps(const char *name) {
    FILE *f = fopen(path_in(name), "r");
    cr_assert_not_null(f, "%s", name);
    char line[1024];
    int n = 0;
    long long s;
    while (fgets(line, sizeof line, f)) {
        cr_expect(sscanf(line, "{\"step\": %lld", &s) == 1 && s == n + 1, "%s line %d: %s", name, n + 1, line);
        n++;
    }
    fclose(f);
    return n;
}

/* Repeated stops and resumes with other --eval-every each time, and a
 * hand-edited log (a line past the step, a torn line): no overflow (the
 * suite runs under ASan too), the log is 1..N, the weights are the
 * uninterrupted run's. */
Test(lm_run, stop_resume_with_changed_intervals_matches_one_run, .timeout = 300) {
    cr_assert_eq(lm(TINY " --steps 40 --eval-every 5 --out a"), 0, "%s", out);
    cr_assert_eq(lm(TINY " --steps 40 --eval-every 5 --out b --stop-after 7"), 0, "%s", out);
    cr_assert_eq(lm("--resume b --eval-every 3 --stop-after 13"), 0, "%s", out);
    cr_expect(strstr(out, "resume: --eval-every 3 (the run had 5)"), "%s", out);
    cr_assert_eq(lm("--resume b --eval-every 1 --stop-after 20"), 0, "%s", out);
    FILE *f = fopen(path_in("b/metrics.jsonl"), "a");
    cr_assert_not_null(f);
    fputs("{\"step\": 21, \"lr\": 1, \"loss\": 1, \"val_loss\": null, \"tokens_per_s\": 1, \"grad_norm\": 1}\n", f);
    fputs("{\"step\": 99999999999999, \"lr\": 1e999}\n{\"step\": 22, \"lo", f);
    fclose(f);
    cr_assert_eq(lm("--resume b --eval-every 11 --stop-after 30"), 0, "%s", out);
    cr_assert_eq(lm("--resume b"), 0, "%s", out);
    cr_expect_eq(log_steps("b/metrics.jsonl"), 40);
    expect_same_tensors("a/lm.safetensors", "b/lm.safetensors");
    expect_same_tensors("a/train_state.safetensors", "b/train_state.safetensors");
}

/* --resume DIR (or DIR/train_state.safetensors) continues in DIR and
 * nowhere else; --out naming another folder is refused. */
Test(lm_run, resume_stays_in_its_folder, .timeout = 120) {
    cr_assert_eq(lm(TINY " --steps 10 --eval-every 5 --out A --stop-after 5"), 0, "%s", out);
    cr_assert_eq(lm("--resume A/train_state.safetensors"), 0, "%s", out);
    cr_expect(!exists("out"), "the resumed run wrote into out/");
    cr_expect_eq(log_steps("A/metrics.jsonl"), 10);
    cr_expect_eq(lm("--resume A --out B --steps 20"), 2, "%s", out);
    cr_expect(strstr(out, "name different runs"), "%s", out);
    cr_expect(!exists("B"));
    cr_expect_eq(lm("--resume A/best.safetensors"), 2, "%s", out);
    cr_expect(strstr(out, "--init-from"), "%s", out);
    cr_expect_eq(lm("--resume A --dim 32 --steps 20"), 2, "%s", out);
    cr_expect(strstr(out, "--dim 32: the run in A has 16"), "%s", out);
}

static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static pid_t start_lm(const char *args) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "cd '%s' && exec '%s/%s/bin/lm' %s > /dev/null 2>&1", tmp, TG_SRC_DIR, TG_BUILD_DIR,
             args);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return pid;
}

#define KILL_RUN TINY " --steps 60 --eval-every 10 --save-every 1"

/* SIGKILL at random moments (a checkpoint every step, so many land inside
 * a save), then resume: at most the steps since the last save are lost, and
 * the run ends with the uninterrupted run's bits. */
Test(lm_run, killed_at_random_then_resumed_matches_one_run, .timeout = 600) {
    cr_assert_eq(lm(KILL_RUN " --out ref"), 0, "%s", out);
    unsigned seed = (unsigned)time(NULL);
    srand(seed);
    int kills = 0, finished = 0;
    while (kills < 20) {
        bool resume = exists("k/train_state.safetensors");
        pid_t pid = start_lm(resume ? "--resume k" : KILL_RUN " --out k");
        sleep_us(20000 + rand() % 200000);
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) { /* it finished first */
            cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "seed %u: exit %d", seed, status);
            finished++;
            cr_assert_lt(finished, 50, "seed %u: the runs finish before a kill lands", seed);
            char cmd[4200];
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", path_in("k"));
            cr_assert_eq(system(cmd), 0);
            continue;
        }
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        kills++;
    }
    if (exists("k/train_state.safetensors"))
        cr_assert_eq(lm("--resume k"), 0, "seed %u: %s", seed, out);
    else
        cr_assert_eq(lm(KILL_RUN " --out k"), 0, "seed %u: %s", seed, out);
    cr_expect_eq(log_steps("k/metrics.jsonl"), 60, "seed %u", seed);
    expect_same_tensors("ref/train_state.safetensors", "k/train_state.safetensors");
    expect_same_tensors("ref/lm.safetensors", "k/lm.safetensors");
}

/* SIGTERM (and Ctrl-C's SIGINT) stop at the end of the step with a
 * checkpoint: exit 128 + the signal, and resume ends where one run ends. */
Test(lm_run, sigterm_saves_and_resume_matches_one_run, .timeout = 300) {
    const char *args = TINY " --steps 400 --eval-every 100";
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s --out ref", args);
    cr_assert_eq(lm("%s", cmd), 0, "%s", out);
    snprintf(cmd, sizeof cmd, "%s --out t", args);
    pid_t pid = start_lm(cmd);
    struct stat sb;
    while (stat(path_in("t/metrics.jsonl"), &sb) != 0 || sb.st_size == 0) sleep_us(1000); /* steps are logged */
    kill(pid, SIGTERM);
    int status;
    waitpid(pid, &status, 0);
    cr_assert(WIFEXITED(status), "status %d", status);
    if (WEXITSTATUS(status) == 0) {
        cr_log_warn("the run finished before SIGTERM arrived");
        return;
    }
    cr_expect_eq(WEXITSTATUS(status), 128 + SIGTERM);
    cr_assert(exists("t/train_state.safetensors"));
    cr_assert_eq(lm("--resume t"), 0, "%s", out);
    cr_expect_eq(log_steps("t/metrics.jsonl"), 400);
    expect_same_tensors("ref/train_state.safetensors", "t/train_state.safetensors");
}

/* A larger --steps extends a finished run, the cosine ending where it
 * ended (--decay-steps kept), lr at --min-lr after; --init-from starts a
 * new run from a run's weights, and refuses another shape. */
Test(lm_run, extend_and_init_from, .timeout = 300) {
    cr_assert_eq(lm(TINY " --steps 20 --eval-every 10 --lr 1e-2 --min-lr 1e-3 --out r"), 0, "%s", out);
    cr_expect_eq(lm("--resume r"), 1, "a finished run does not resume: %s", out);
    cr_assert_eq(lm("--resume r --steps 30"), 0, "%s", out);
    cr_expect_eq(log_steps("r/metrics.jsonl"), 30);
    FILE *f = fopen(path_in("r/metrics.jsonl"), "r");
    char line[1024];
    double lr = 0;
    for (int i = 0; i < 25 && fgets(line, sizeof line, f); i++) sscanf(strstr(line, "\"lr\": "), "\"lr\": %lf", &lr);
    fclose(f);
    cr_expect_float_eq(lr, 1e-3, 1e-12, "lr at step 25: %g", lr);

    cr_assert_eq(lm(TINY " --steps 1 --eval-every 1 --out fresh"), 0, "%s", out);
    cr_assert_eq(lm(TINY " --steps 1 --eval-every 1 --init-from r --out ft"), 0, "%s", out);
    cr_expect(strstr(out, "weights from r"), "%s", out);
    double fresh = 0, tuned = 0;
    f = fopen(path_in("fresh/metrics.jsonl"), "r");
    cr_assert(fgets(line, sizeof line, f));
    sscanf(strstr(line, "\"val_loss\": "), "\"val_loss\": %lf", &fresh);
    fclose(f);
    f = fopen(path_in("ft/metrics.jsonl"), "r");
    cr_assert(fgets(line, sizeof line, f));
    sscanf(strstr(line, "\"val_loss\": "), "\"val_loss\": %lf", &tuned);
    fclose(f);
    cr_expect_lt(tuned, fresh - 0.3, "from r's weights %g, fresh %g", tuned, fresh);
    cr_expect_eq(lm(TINY " --init-from r/lm.safetensors --dim 32 --out x"), 2, "%s", out);
    cr_expect(strstr(out, "--dim 32"), "%s", out);
    cr_assert_eq(lm(TINY " --steps 1 --init-from r/best.safetensors --out y"), 0, "%s", out);
}

/* A symlink planted at any output name is replaced (or refused), never
 * followed: the target keeps its bytes. */
Test(lm_run, symlinks_at_output_names_are_not_followed, .timeout = 120) {
    const char *names[] = {"metrics.jsonl", "train_state.safetensors", "best.safetensors", "lm.safetensors",
                           "lm_loss.png",   "lm_attention.png",        "tokens.npy"};
    enum { N = sizeof names / sizeof names[0] };
    cr_assert_eq(mkdir(path_in("s"), 0777), 0);
    for (int i = 0; i < N; i++) {
        char target[64], link[64];
        snprintf(target, sizeof target, "target%d", i);
        snprintf(link, sizeof link, "s/%s", names[i]);
        FILE *f = fopen(path_in(target), "w");
        fputs("precious", f);
        fclose(f);
        cr_assert_eq(symlink(path_in(target), path_in(link)), 0);
    }
    cr_assert_eq(lm(TINY " --steps 3 --eval-every 3 --out s"), 0, "%s", out);
    for (int i = 0; i < N; i++) {
        char target[64], link[64], got[16] = "";
        snprintf(target, sizeof target, "target%d", i);
        snprintf(link, sizeof link, "s/%s", names[i]);
        FILE *f = fopen(path_in(target), "r");
        cr_expect(fgets(got, sizeof got, f) && strcmp(got, "precious") == 0, "%s was written through", names[i]);
        fclose(f);
        struct stat sb;
        cr_expect(lstat(path_in(link), &sb) == 0 && S_ISREG(sb.st_mode), "%s is not a regular file", names[i]);
    }
    /* A symlink at a resumed run's log is refused. */
    cr_assert_eq(lm(TINY " --steps 6 --eval-every 3 --out s --stop-after 3"), 0, "%s", out);
    cr_assert_eq(unlink(path_in("s/metrics.jsonl")), 0);
    cr_assert_eq(symlink(path_in("target0"), path_in("s/metrics.jsonl")), 0);
    cr_expect_eq(lm("--resume s"), 1, "%s", out);
    cr_expect(strstr(out, "symbolic link"), "%s", out);
}

/* --sample --load takes every checkpoint a run writes (the folder, the
 * state, best, the model), and names what any other file of it is. */
Test(lm_run, sample_loads_every_checkpoint_and_names_other_files, .timeout = 120) {
    cr_assert_eq(lm(TINY " --steps 2 --eval-every 1 --out r"), 0, "%s", out);
    const char *ok[] = {"r", "r/train_state.safetensors", "r/best.safetensors", "r/lm.safetensors"};
    for (int i = 0; i < 4; i++) cr_expect_eq(lm("--sample --load %s --tokens 4", ok[i]), 0, "%s: %s", ok[i], out);
    cr_expect_eq(lm("--sample --load r --steps 5"), 2, "a training flag with --load is refused: %s", out);
    cr_expect(strstr(out, "--steps has no effect with --load"), "%s", out);
    const char *other[] = {"r/tokens.npy", "r/metrics.jsonl", "r/lm_loss.png"};
    for (int i = 0; i < 3; i++) {
        cr_expect_eq(lm("--sample --load %s", other[i]), 1, "%s", other[i]);
        cr_expect(strstr(out, "takes a run folder"), "%s: %s", other[i], out);
    }
}

/* Paths far longer than the old 1100-byte buffers work, and an error about
 * one arrives whole. */
Test(lm_run, long_paths, .timeout = 120) {
    char dir[2200] = "";
    for (int i = 0; i < 8; i++)
        strcat(dir, i ? "/" : ""),
            strncat(dir,
                    "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd"
                    "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd",
                    200);
    cr_assert_eq(lm(TINY " --steps 2 --eval-every 1 --out %s", dir), 0, "%s", out);
    cr_expect_eq(lm("--resume %s/missing", dir), 1, "%s", out);
    cr_expect(strstr(out, "/missing") && strstr(out, "No such file"), "%s", out);
}

/* --tokenizer with a trained BPE: the text is encoded with it, the prompt
 * too, the sample decoded, validation reported per token and in bits per
 * byte; the checkpoint carries the vocabulary, so the model file alone
 * samples anywhere; a resumed run keeps its tokenizer. */
Test(lm_run, trained_bpe_end_to_end, .timeout = 120) {
    cr_assert_eq(run_wrapped("", "tokenize",
                             "train --vocab-size 400 '" TG_SRC_DIR "/tests/data/fortunes_excerpt.txt' -o v.tiktoken"),
                 0, "%s", out);
    cr_assert_eq(lm(TINY " --steps 4 --eval-every 2 --tokenizer v.tiktoken --out b"), 0, "%s", out);
    double nats = 0, bpb = 0, per = 0;
    const char *last = strstr(out, "val_loss=");
    cr_assert_not_null(last, "%s", out);
    cr_expect_eq(sscanf(last, "val_loss=%lf nats/token (%lf bits/byte, %lf bytes a token)", &nats, &bpb, &per), 3, "%s",
                 last);
    cr_expect(per > 1.2 && fabs(bpb - nats / log(2.0) / per) < 0.01 * bpb, "%g %g %g", nats, bpb, per);
    cr_assert_eq(rename(path_in("b/lm.safetensors"), path_in("alone.safetensors")), 0);
    cr_assert_eq(lm("--sample --load alone.safetensors --prompt 'The cat' --tokens 5"), 0, "%s", out);
    cr_expect(strstr(out, "\nThe cat"), "the prompt round-trips through the BPE: %s", out);
    cr_expect_eq(lm("--resume b --steps 6 --tokenizer bytes"), 2, "%s", out);
    cr_assert_eq(lm("--resume b --steps 6"), 0, "%s", out);
    cr_expect(strstr(out, "nats/token"), "%s", out);
    cr_expect_eq(lm(TINY " --tokenizer missing.tiktoken --out c"), 1, "%s", out);
    cr_expect(strstr(out, "missing.tiktoken"), "%s", out);
}

/* --precision: bf16 products are the float build's; the double build (the
 * one the suite runs, for exact gradient checks) refuses them by name. */
Test(lm_run, precision_flag, .timeout = 60) {
    cr_expect_eq(lm(TINY " --steps 1 --precision fp16 --out p"), 2, "%s", out);
    cr_expect(strstr(out, "--precision fp16: fp32 or bf16"), "%s", out);
    if (sizeof(tg_real) == 8) {
        cr_expect_eq(lm(TINY " --steps 1 --precision bf16 --out p"), 2, "%s", out);
        cr_expect(strstr(out, "double build"), "%s", out);
    }
    cr_expect_eq(lm(TINY " --steps 1 --eval-every 1 --precision fp32 --out p"), 0, "%s", out);
}
