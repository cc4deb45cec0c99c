/* bench: how fast tgrad trains small self-attention models on the CPU, one
 * workload at a time; with no --workload, every workload against PyTorch.
 * The front door of three programs, which it runs with the same flags:
 * bench itself (the encoder workloads and the determinism check), bench_gpt
 * (tools/bench_gpt.c: nanoGPT's GPT) and bench_ops (tools/bench_ops.c: one
 * attention layer, one GEMM, the core's peaks), all timed and printed alike
 * (tools/bench_timing.h).
 *
 * Workloads (the same in bench/torch_ref.py):
 *   toy        d2l's post-norm Transformer encoder, V 16, T 16, B 64, d 64,
 *              4 heads, FFN 128, 2 blocks, + Linear(d, V), cross-entropy at
 *              every position, reversing random sequences, Adam lr 1e-3,
 *              dropout 0.1. One step = zero_grad + forward + loss + backward
 *              + Adam update.
 *   mid        the same with V 64, T 128, B 32, d 256, 8 heads, FFN 1024, 4 blocks.
 *   gpt-mini, gpt-small, gpt2   nanoGPT's GPT (bench_gpt; --text, --save-init,
 *              --losses, --batch and --seq are its flags).
 *   attn-T, gemm-n   one attention layer over T tokens, C = A B for n x n
 *              floats (bench_ops; with --precision bf16, A and B stored as
 *              bf16, C float, as PyTorch's bf16 row).
 * --profile (with --workload): the library's profiler (src/tensor/profile.h)
 * over the timed steps, its table printed before the key=value lines.
 * Times are the median (with min and max) of >= 10 timed steps after warm-up.
 *
 * Reproduce:
 *   make bench                                  all workloads at 1 and 2 threads
 *                                               against PyTorch -> BENCHMARKS.md
 *   build/bin/bench --workload mid --threads 2  one workload, tgrad only; the last
 *                                               line is ms_per_step=<median>
 *   build/bin/bench --check-determinism         100 toy steps: 1 vs 2 threads vs rerun
 *   /usr/bin/python3 bench/torch_ref.py --workload mid --threads 2   PyTorch alone
 *
 * With no --workload, bench runs bench/compare.py (with /usr/bin/python3,
 * standard library only): the full comparison is orchestration (child
 * processes, alternating rounds, medians, BENCHMARKS.md's tables), which
 * reads best as a script; it runs this program once per measurement. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_timing.h"
#include "cli.h"
#include "tgrad.h"

#ifndef TG_SRC_DIR /* the source tree, where bench/compare.py is (the Makefile sets it) */
#define TG_SRC_DIR "."
#endif

/* ---- the Transformer encoder workloads (toy, mid): the library's model of
 * the toy sequence tasks (model_file.h: tg_encoder_model) ---------------------- */
typedef struct {
    int V, T, B, d, heads, ffn, L;
} model_shape;
static const model_shape TOY = {16, 16, 64, 64, 4, 128, 2};
static const model_shape MID = {64, 128, 32, 256, 8, 1024, 4};

typedef struct {
    model_shape s;
    tg_encoder_model m;
    tg_optim *opt;
    tg_rng data;
    int *tokens, *targets;
    float loss; /* of the last step */
} encoder_bench;

static int encoder_new(encoder_bench *e, model_shape s) {
    *e = (encoder_bench){.s = s};
    tg_rng rng = tg_rng_new(1);
    tg_encoder_config cfg = {
        .vocab_size = s.V,
        .num_hiddens = s.d,
        .ffn_hiddens = s.ffn,
        .num_heads = s.heads,
        .num_layers = s.L,
        .max_len = 1000,
        .dropout = (tg_real)0.1,
        .pe = TG_PE_FIXED,
        .use_bias = false,
        .embedding_std = 1, /* torch's nn.Embedding init */
    };
    if (tg_encoder_model_init(&e->m, &cfg, s.T, &rng) != 0) return -1;
    tg_optim_config oc = tg_adam_config((tg_real)1e-3);
    e->opt = tg_optim_new(&oc, &e->m.params);
    e->data = tg_rng_fork(&rng, 1);
    e->tokens = malloc(sizeof(int) * (size_t)s.B * s.T);
    e->targets = malloc(sizeof(int) * (size_t)s.B * s.T);
    return e->opt && e->tokens && e->targets ? 0 : -1;
}

static void encoder_free(encoder_bench *e) {
    tg_optim_free(e->opt);
    tg_encoder_model_free(&e->m);
    free(e->tokens);
    free(e->targets);
}

/* Random tokens; the target is the reversed sequence. */
static void encoder_prepare(void *ctx) {
    encoder_bench *e = ctx;
    int T = e->s.T;
    for (int b = 0; b < e->s.B; b++)
        for (int t = 0; t < T; t++) {
            int tok = (int)(tg_rng_next_u64(&e->data) % (uint64_t)e->s.V);
            e->tokens[b * T + t] = tok;
            e->targets[b * T + (T - 1 - t)] = tok;
        }
}

static int encoder_step(void *ctx) {
    encoder_bench *e = ctx;
    tg_scope_begin();
    tg_optim_zero_grad(e->opt);
    tg_tensor *logits = tg_encoder_model_forward(&e->m, e->tokens, e->s.B, e->s.T);
    tg_tensor *loss = tg_cross_entropy(logits, e->targets, NULL, TG_IGNORE_INDEX);
    int rc = loss && tg_backward(loss) == 0 ? 0 : -1;
    if (rc == 0) {
        tg_optim_step(e->opt);
        e->loss = (float)tg_item(loss);
    }
    tg_scope_end();
    return rc;
}

/* GEMM flops of one training step: forward products x 3 (backward computes
 * two products per forward one). Elementwise work is not counted. */
static double encoder_gflop(model_shape s) {
    double N = (double)s.B * s.T, d = s.d;
    double block = 4 * 2 * N * d * d                     /* W_q, W_k, W_v, W_o */
                   + 2 * 2 * (double)s.B * s.T * s.T * d /* Q K^T and weights @ V */
                   + 2 * 2 * N * d * s.ffn;              /* dense1, dense2 */
    return 3 * (s.L * block + 2 * N * d * s.V) * 1e-9;
}

/* ---- determinism: 100 toy steps, 1 vs 2 threads vs a second run -------------- */
enum { DET_STEPS = 100 };

/* Trains toy for DET_STEPS steps; the losses and a hash of the final
 * parameters' bits. */
static int toy_losses(int threads, float *losses, uint64_t *param_hash) {
    encoder_bench e;
    tg_set_num_threads(threads);
    int rc = encoder_new(&e, TOY);
    for (int i = 0; i < DET_STEPS && rc == 0; i++) {
        encoder_prepare(&e);
        rc = encoder_step(&e);
        losses[i] = e.loss;
    }
    uint64_t h = 1469598103934665603ULL; /* FNV-1a over every parameter byte */
    for (int p = 0; p < e.m.params.n && rc == 0; p++) {
        const unsigned char *b = (const unsigned char *)e.m.params.items[p].t->data;
        for (size_t i = 0; i < sizeof(tg_real) * (size_t)e.m.params.items[p].t->size; i++)
            h = (h ^ b[i]) * 1099511628211ULL;
    }
    *param_hash = h;
    encoder_free(&e);
    return rc;
}

/* Prints one line beginning PASS or FAIL; returns 0 on PASS. */
static int check_determinism(void) {
    static const int threads[] = {1, 2, 1, 2};
    static const char *names[] = {"1 thread", "2 threads", "1 thread (second run)", "2 threads (second run)"};
    float losses[4][DET_STEPS];
    uint64_t hash[4];
    for (int r = 0; r < 4; r++)
        if (toy_losses(threads[r], losses[r], &hash[r]) != 0) {
            printf("FAIL: toy training failed: %s\n", tg_last_error());
            return 1;
        }
    for (int r = 1; r < 4; r++) {
        for (int i = 0; i < DET_STEPS; i++)
            if (memcmp(&losses[r][i], &losses[0][i], sizeof(float)) != 0) {
                printf("FAIL: %s differs from 1 thread at step %d (loss %.9g vs %.9g)\n", names[r], i + 1,
                       (double)losses[r][i], (double)losses[0][i]);
                return 1;
            }
        if (hash[r] != hash[0]) {
            printf("FAIL: %s: same losses, but the final parameters differ\n", names[r]);
            return 1;
        }
    }
    printf("PASS: %d toy steps with dropout 0.1: losses and final parameters bit-identical at 1 and 2 threads and on "
           "a second run (loss %.6f -> %.6f)\n",
           DET_STEPS, (double)losses[0][0], (double)losses[0][DET_STEPS - 1]);
    return 0;
}

/* Runs toy or mid in this process and prints bench_timing.h's key=value
 * lines, the last one ms_per_step=<median>. Default steps: toy's 50 (cheap),
 * mid's 10 (in one of the full comparison's rounds: round_steps). */
static int run_encoder(const char *name, const run_flags *r) {
    bool toy = strcmp(name, "toy") == 0;
    int steps = r->steps > 0 ? r->steps : round_steps(toy ? 50 : 10, r->rounds), warmup = r->warmup;
    if (warmup < 0) warmup = toy ? 10 : 2;
    if (set_precision("bench")) return 1;
    double rss0 = status_mb("VmRSS");
    encoder_bench e;
    model_shape s = toy ? TOY : MID;
    workload w = {&e, encoder_prepare, encoder_step, encoder_gflop(s)};
    timing t = {0};
    int rc = encoder_new(&e, s) == 0 ? time_workload(&w, steps, warmup, &t) : -1;
    encoder_free(&e);
    if (rc != 0) {
        fprintf(stderr, "bench: %s: %s\n", name, tg_last_error() ? tg_last_error() : "failed");
        return 1;
    }
    print_timing(name, r->threads, steps, warmup, &w, &t, NULL, rss0, 0);
    tg_release_all();
    return 0;
}

/* Which program runs a workload: bench (toy, mid), bench_gpt or bench_ops;
 * NULL for a name that is none of the workloads. */
static const char *program_of(const char *name) {
    if (strcmp(name, "toy") == 0 || strcmp(name, "mid") == 0) return "bench";
    if (strcmp(name, "gpt-mini") == 0 || strcmp(name, "gpt-small") == 0 || strcmp(name, "gpt2") == 0)
        return "bench_gpt";
    if (strncmp(name, "attn-", 5) != 0 && strncmp(name, "gemm-", 5) != 0) return NULL;
    char *end;
    long n = strtol(name + 5, &end, 10); /* T or n: 1 to 65536 */
    return *end || n < 1 || n > 65536 ? NULL : "bench_ops";
}

/* ---- what runs elsewhere: the other workloads and the peaks (bench_gpt,
 * bench_ops: beside this program, given its command line) and the full
 * comparison (bench/compare.py, given this program's path) ------------------- */
typedef struct {
    const char *only, *markdown, *python, *script, *text;
    const run_flags *r; /* its --rounds, --steps, --warmup */
    bool no_torch;
} comparison;

/* This process replaced with argv[0] run on argv; 1 with the reason when it cannot be. */
static int run_instead(const char **argv) {
    fflush(stdout);
    execv(argv[0], (char *const *)argv);
    fprintf(stderr, "bench: cannot run %s: %s\n", argv[0], strerror(errno));
    return 1;
}

/* prog (or NULL: the full comparison) with args, argc of them. */
static int run_elsewhere(const char *prog, const comparison *c, int argc, char **args) {
    char self[4096], path[4200], rounds[16], steps[16], warmup[16];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        fprintf(stderr, "bench: cannot find this program's path (/proc/self/exe): %s\n", strerror(errno));
        return 1;
    }
    self[n] = 0;
    if (prog) {
        const char *argv[64] = {path};
        snprintf(path, sizeof path, "%.*s/%s", (int)(strrchr(self, '/') - self), self, prog);
        for (int i = 0; i < argc && i < 62; i++) argv[i + 1] = args[i];
        return run_instead(argv);
    }
    snprintf(rounds, sizeof rounds, "%d", c->r->rounds);
    snprintf(steps, sizeof steps, "%d", c->r->steps);
    snprintf(warmup, sizeof warmup, "%d", c->r->warmup);
    const char *argv[24] = {"/usr/bin/python3", TG_SRC_DIR "/bench/compare.py",
                            "--bench",          self,
                            "--rounds",         rounds,
                            "--steps",          steps,
                            "--warmup",         warmup,
                            "--python",         c->python,
                            "--torch-script",   c->script,
                            "--text",           c->text};
    int k = 16;
    if (c->only) argv[k++] = "--only", argv[k++] = c->only;
    if (c->markdown) argv[k++] = "--markdown", argv[k++] = c->markdown;
    if (c->no_torch) argv[k++] = "--no-torch";
    return run_instead(argv);
}

int main(int argc, char **argv) {
    const char *name = NULL, *init = NULL, *losses = NULL;
    int batch = 0, seq = 0;
    bool determinism = false, peaks = false;
    run_flags r = RUN_FLAGS_DEFAULT;
    r.rounds = 3; /* the full comparison's */
    comparison c = {.python = "/usr/bin/python3",
                    .script = "bench/torch_ref.py",
                    .text = "tests/data/fortunes_excerpt.txt",
                    .r = &r};
    cli_opt opts[] = {
        {"workload", CLI_STR, &name,
         "run one workload (toy, mid, gpt-mini, gpt-small, gpt2, attn-T, gemm-n: bf16 A, B with --precision bf16), "
         "tgrad only",
         0, 0},
        RUN_FLAGS(r),
        {"batch", CLI_INT, &batch, "gpt2: the batch (0: the largest of 8, 4, 2, 1 that fits memory)", 0, 64},
        {"seq", CLI_INT, &seq, "gpt2: the sequence length T (0: 1024)", 0, 16384},
        {"markdown", CLI_STR, &c.markdown, "also write the full comparison to this file", 0, 0},
        {"check-determinism", CLI_FLAG, &determinism, "100 toy steps at 1 and 2 threads and again: PASS/FAIL", 0, 0},
        {"peaks", CLI_FLAG, &peaks, "measure the core's FMA and bf16 dot-product peaks (GFLOP/s)", 0, 0},
        {"only", CLI_STR, &c.only, "comma-separated workloads for the full comparison (default all)", 0, 0},
        {"no-torch", CLI_FLAG, &c.no_torch, "skip PyTorch in the full comparison", 0, 0},
        {"python", CLI_STR, &c.python, "Python with torch, for the comparison", 0, 0},
        {"torch-script", CLI_STR, &c.script, "the PyTorch side of the comparison", 0, 0},
        {"text", CLI_STR, &c.text, "gpt workloads: the text whose bytes they train on", 0, 0},
        {"save-init", CLI_STR, &init, "gpt workloads: write the initial weights to this safetensors file", 0, 0},
        {"losses", CLI_STR, &losses, "gpt workloads: write every step's loss (warm-up too) to this file", 0, 0},
    };
    const int nopt = (int)(sizeof opts / sizeof opts[0]);
    const char *about = "Times tgrad training steps; with no --workload, every workload at 1 and 2 threads\n"
                        "against PyTorch (run as a subprocess), as one table.";
#define USAGE_ERROR(...) cli_usage_error(argv[0], "[options]", about, opts, nopt, __VA_ARGS__)
    cli_parse(argc, argv, "[options]", about, opts, nopt, NULL, 0);
    if (run_flags_check(&r, argv, about, opts, nopt)) return 2;
    if (name && !program_of(name)) return USAGE_ERROR("unknown workload '%s'", name);
    if ((name != NULL) + determinism + peaks > 1)
        return USAGE_ERROR("--workload, --check-determinism and --peaks: one at a time");
    /* The full comparison's flags mean nothing to one workload, the
     * determinism check or the peaks: refused rather than ignored. */
    if (!name && cli_given(opts, nopt, "profile")) return USAGE_ERROR("--profile needs --workload");
    if ((!name || strcmp(name, "gpt2") != 0) && (cli_given(opts, nopt, "batch") || cli_given(opts, nopt, "seq")))
        return USAGE_ERROR("--batch and --seq are for --workload gpt2");
    static const char *const full[] = {"markdown", "only", "no-torch", "python", "torch-script"};
    for (size_t k = 0; (name || determinism || peaks) && k < sizeof full / sizeof *full; k++)
        if (cli_given(opts, nopt, full[k]))
            return USAGE_ERROR("--%s is for the full comparison, not %s", full[k],
                               name          ? "--workload"
                               : determinism ? "--check-determinism"
                                             : "--peaks");
    /* The gpt workloads' flags mean nothing to the others: refused too. */
    static const char *const gpt_only[] = {"save-init", "losses", "text"};
    for (size_t k = 0; name && strncmp(name, "gpt", 3) != 0 && k < sizeof gpt_only / sizeof *gpt_only; k++)
        if (cli_given(opts, nopt, gpt_only[k]))
            return USAGE_ERROR("--%s is for the gpt workloads, not %s", gpt_only[k], name);
    if (determinism) return check_determinism();
    if (peaks) return run_elsewhere("bench_ops", NULL, argc - 1, argv + 1);
    if (!name) return run_elsewhere(NULL, &c, 0, NULL);
    if (strcmp(program_of(name), "bench") != 0) return run_elsewhere(program_of(name), NULL, argc - 1, argv + 1);
    if (!cli_given(opts, nopt, "rounds")) r.rounds = 1; /* one workload alone */
    start_threads(r.threads);
    return run_encoder(name, &r);
}
