/* lm's runs as a user meets them (src/train/run.h through the program):
 * stop and resume with other evaluation intervals, a resumed run staying in
 * its folder, kills at random moments (during saves too) and SIGTERM, then
 * resume ending bit for bit where an uninterrupted run ends, extension,
 * --init-from, symlinks planted at every output name (samples.jsonl on
 * resume too), long paths, --sample --load of every file a run writes, the
 * folder's lock and replacement, resume from another directory, early stop
 * on the best model, a resumed run's precision and a token file of another
 * vocabulary refused. */
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
        cr_log_info("the run finished before SIGTERM arrived");
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
    cr_assert_eq(lm(TINY " --steps 6 --eval-every 3 --out s --stop-after 3 --overwrite"), 0, "%s", out);
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
    /* The run's token file, tied to the BPE: refused as --data of a byte run (tg_tokens_check). */
    cr_expect_eq(lm("--data b/tokens.npy --batch 4 --block 16 --layers 1 --heads 2 --dim 16 --steps 2 --out d"), 1,
                 "%s", out);
    cr_expect(strstr(out, "b/tokens.npy was made with the bpe tokenizer"), "%s", out);
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

/* Two writers of one folder: while a run writes it, a new run (even with
 * --overwrite) and a resume are refused naming its pid; its log stays one
 * run's. */
Test(lm_run, two_writers_of_one_folder, .timeout = 120) {
    pid_t pid = start_lm(TINY " --steps 100000 --eval-every 50 --out w");
    struct stat sb;
    for (int i = 0; i < 20000 && stat(path_in("w/train_state.safetensors"), &sb) != 0; i++) sleep_us(1000);
    cr_assert(exists("w/train_state.safetensors"), "the first run saved nothing");
    char want[64];
    snprintf(want, sizeof want, "in use by process %ld", (long)pid);
    cr_expect_eq(lm(TINY " --steps 100 --out w --overwrite"), 1, "%s", out);
    cr_expect(strstr(out, want), "%s: %s", want, out);
    cr_expect_eq(lm("--resume w --steps 200000"), 1, "%s", out);
    cr_expect(strstr(out, want), "%s: %s", want, out);
    kill(pid, SIGTERM);
    int status;
    waitpid(pid, &status, 0);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGTERM, "status %d", status);
    log_steps("w/metrics.jsonl"); /* 1..n, one run's */
    cr_expect_eq(lm("--resume w --steps 100000 --stop-after %d", 1 + log_steps("w/metrics.jsonl")), 0, "%s", out);
}

/* A new run over an existing one is refused (its best kept) naming the
 * three ways on; --overwrite replaces it; --init-from X --out X is refused. */
Test(lm_run, an_existing_run_is_replaced_only_with_overwrite, .timeout = 120) {
    cr_assert_eq(lm(TINY " --steps 2 --eval-every 1 --out x"), 0, "%s", out);
    struct stat before, after;
    cr_assert_eq(stat(path_in("x/best.safetensors"), &before), 0);
    cr_expect_eq(lm(TINY " --steps 2 --eval-every 1 --out x"), 1, "%s", out);
    cr_expect(strstr(out, "--resume x") && strstr(out, "--init-from x") && strstr(out, "--overwrite"), "%s", out);
    cr_assert_eq(stat(path_in("x/best.safetensors"), &after), 0);
    cr_expect(before.st_ino == after.st_ino && before.st_mtime == after.st_mtime, "best.safetensors was touched");
    cr_expect_eq(lm(TINY " --steps 2 --init-from x --out x"), 1, "%s", out);
    cr_expect(strstr(out, "one folder"), "%s", out);
    cr_expect_eq(lm(TINY " --steps 2 --init-from x/best.safetensors --out ./x/"), 1, "%s", out);
    cr_expect_eq(lm(TINY " --steps 2 --eval-every 1 --out x --overwrite"), 0, "%s", out);
    cr_expect(strstr(out, "replaced"), "%s", out);
    /* --init-from names no "resume" rule: its shape comes from the checkpoint. */
    cr_expect_eq(lm(TINY " --steps 2 --init-from x --dim 32 --out y"), 2, "%s", out);
    cr_expect(strstr(out, "--dim 32: the checkpoint x has 16") && !strstr(out, "on resume"), "%s", out);
}

/* samples.jsonl on resume is appended without following a symlink: the
 * target keeps its bytes. */
Test(lm_run, symlinked_samples_on_resume_are_not_followed, .timeout = 120) {
    cr_assert_eq(lm(TINY " --steps 4 --eval-every 2 --stop-after 2 --out s"), 0, "%s", out);
    FILE *f = fopen(path_in("target"), "w");
    fputs("precious", f);
    fclose(f);
    cr_assert_eq(unlink(path_in("s/samples.jsonl")), 0);
    cr_assert_eq(symlink(path_in("target"), path_in("s/samples.jsonl")), 0);
    lm("--resume s");
    char got[64] = "";
    f = fopen(path_in("target"), "r");
    cr_expect(fgets(got, sizeof got, f) && strcmp(got, "precious") == 0, "samples.jsonl was appended through: %s", got);
    fclose(f);
    cr_expect(strstr(out, "symbolic link"), "%s", out);
}

/* A resume reads the folder's own tokens.npy: a relative --data made in one
 * directory does not break a resume from another. */
Test(lm_run, resume_from_another_directory_with_relative_data, .timeout = 120) {
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "cp '%s/tests/data/fortunes_excerpt.txt' '%s' && mkdir '%s'", TG_SRC_DIR,
             path_in("d.txt"), path_in("elsewhere"));
    cr_assert_eq(system(cmd), 0);
    const char *args = "--data d.txt --batch 4 --block 16 --layers 1 --heads 2 --dim 16 --eval-batches 2 --tokens 8 "
                       "--steps 6 --eval-every 3";
    cr_assert_eq(lm("%s --out ref", args), 0, "%s", out);
    cr_assert_eq(lm("%s --out r --stop-after 3", args), 0, "%s", out);
    cr_assert_eq(run_wrapped("cd elsewhere &&", "lm", "--resume ../r"), 0, "%s", out);
    expect_same_tensors("ref/train_state.safetensors", "r/train_state.safetensors");
}

/* Early stop: the final line, the sample and lm.safetensors are the best
 * model's. */
Test(lm_run, early_stop_ends_on_the_best_model, .timeout = 120) {
    cr_assert_eq(lm(TINY " --steps 400 --eval-every 1 --lr 0.5 --min-lr 0.5 --warmup 0 --patience 2 --out e"), 0, "%s",
                 out);
    const char *stop = strstr(out, "early stop");
    cr_assert_not_null(stop, "the run did not stop early: %s", out);
    double best = 0, last = 0;
    const char *b = strstr(stop, "the best model (");
    cr_assert(b && sscanf(b, "the best model (%lf", &best) == 1, "%s", stop);
    const char *v = strstr(out, "val_loss=");
    cr_assert(v && sscanf(v, "val_loss=%lf", &last) == 1, "%s", out);
    cr_expect_float_eq(last, best, 1e-4, "the final line %g, the best %g", last, best);
    tg_safetensors st, bs;
    cr_assert_eq(tg_safetensors_open(path_in("e/lm.safetensors"), &st), 0, "%s", tg_last_error());
    cr_assert_eq(tg_safetensors_open(path_in("e/best.safetensors"), &bs), 0, "%s", tg_last_error());
    int compared = 0;
    for (int i = 0; i < st.n; i++) {
        char name[300];
        snprintf(name, sizeof name, "model.%s", st.entries[i].name);
        int j = tg_safetensors_find(&bs, name);
        if (j < 0) continue; /* lm_head.weight: the tied embedding, exported for nanoGPT */
        compared++;
        const tg_st_entry *a = &st.entries[i], *b = &bs.entries[j];
        cr_expect(a->end - a->begin == b->end - b->begin &&
                      memcmp(st.data + a->begin, bs.data + b->begin, a->end - a->begin) == 0,
                  "lm.safetensors' %s is not best's", a->name);
    }
    cr_expect_gt(compared, 3);
    tg_safetensors_close(&st), tg_safetensors_close(&bs);
}

/* A resumed run keeps the precision it was trained in: bf16 recorded in the
 * state comes back without --precision (in the double build, which has no
 * bf16 products, it is refused by name: proof that it came back). */
Test(lm_run, resumed_run_keeps_its_precision, .timeout = 60) {
    cr_assert_eq(lm(TINY " --steps 4 --eval-every 2 --stop-after 2 --out p"), 0, "%s", out);
    /* "fp32" -> "bf16" in the state's metadata: the same length, the header stays valid. */
    FILE *f = fopen(path_in("p/train_state.safetensors"), "r+b");
    cr_assert_not_null(f);
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    char *at = NULL;
    for (size_t i = 0; i + 20 < n && !at; i++)
        if (memcmp(buf + i, "\"precision\":\"fp32\"", 18) == 0) at = buf + i + 13;
    cr_assert_not_null(at, "no precision setting in the state");
    fseek(f, at - buf, SEEK_SET);
    fputs("bf16", f);
    fclose(f);
    int rc = lm("--resume p");
    if (sizeof(tg_real) == 8) {
        cr_expect_eq(rc, 2, "%s", out);
        cr_expect(strstr(out, "--precision bf16"), "%s", out);
    } else {
        cr_expect_eq(rc, 0, "%s", out);
    }
    cr_expect_eq(lm("--resume p --precision fp32"), 0, "%s", out);
    cr_expect(strstr(out, "resume: --precision fp32 (the run had bf16)"), "%s", out);
}
