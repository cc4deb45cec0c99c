/* bench: how fast tgrad trains small self-attention models on the CPU, one
 * workload at a time; with no --workload, every workload against PyTorch.
 *
 * Workloads (the same in bench/torch_ref.py):
 *   toy        d2l's post-norm Transformer encoder, V 16, T 16, B 64, d 64,
 *              4 heads, FFN 128, 2 blocks, + Linear(d, V), cross-entropy at
 *              every position, reversing random sequences, Adam lr 1e-3,
 *              dropout 0.1. One step = zero_grad + forward + loss + backward
 *              + Adam update.
 *   mid        the same with V 64, T 128, B 32, d 256, 8 heads, FFN 1024, 4 blocks.
 *   gpt-mini   nanoGPT's GPT (src/nn/decoder.h): V 256, T 64, 2 layers, 4 heads,
 *              d 128, batch 32; gpt-small: V 256, T 128, 4 layers, 8 heads,
 *              d 256, batch 16. Byte windows of a text file (--text) at
 *              starts s = (w * 2654435761) mod (n - T - 1) for window
 *              w = step * B + b, so PyTorch reads the same ones; AdamW lr 3e-4,
 *              betas (0.9, 0.95), weight decay 0.1 on matrices, no dropout.
 *              One step = zero_grad + forward + loss + backward + AdamW.
 *              --save-init FILE writes the initial weights (nanoGPT names) and
 *              --losses FILE every step's loss, for bench/gpt_interop.py.
 *   gpt2       the same GPT at GPT-2 small's size: V 50257 (GPT-2's tokens;
 *              the byte windows use ids < 256, which changes no cost), T 1024,
 *              12 layers, 12 heads, d 768, batch chosen for memory (the
 *              largest of 8, 4, 2, 1 whose estimate fits half the memory
 *              available; --batch, --seq override B and T). Reports tokens/s
 *              and peak RSS; 2 timed steps by default (one step is tens of
 *              seconds on 2 cores). Not in the full comparison: run it alone,
 *              with bench/torch_ref.py --workload gpt2 beside it.
 *   attn-T     one multi-head self-attention layer (d 64, 4 heads, batch 1,
 *              dropout 0.1) on a [1, T, 64] input: forward and backward of
 *              the sum of its output; also the arena memory one step adds.
 *   gemm-n     C = A B for n x n floats, in GFLOP/s and as a fraction of the
 *              core's single-precision FMA peak, measured here.
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
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "tgrad.h"

#ifndef TG_SRC_DIR /* the source tree, where bench/compare.py is (the Makefile sets it) */
#define TG_SRC_DIR "."
#endif
enum { MAX_STEPS = 100000, MAX_ROUNDS = 9 };
/* gpt2's activation memory per token of a sample (gpt2_bytes). */
#define GPT2_SAMPLE_BYTES_PER_TOKEN 1.7e6
static bool g_profile, g_bf16; /* --profile; --precision bf16 (tg_set_precision; gemm-n calls tg_k_gemm_bf16) */

/* ---- clocks, statistics, memory -------------------------------------------- */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A line of /proc/self/status in MB: "VmHWM" the peak resident set of this
 * program, "VmRSS" the resident set now. Not getrusage's ru_maxrss, which
 * keeps the parent's peak across exec (a Python parent's 10 MB and more). */
static double status_mb(const char *key) {
    char line[256];
    double kb = NAN;
    size_t len = strlen(key);
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, len) == 0 && line[len] == ':') kb = strtod(line + len + 1, NULL);
    if (f) fclose(f);
    return kb / 1024.0;
}

/* ---- the core's peaks (tensor.h: tg_fma_peak_measure, tg_bf16_peak_measure,
 * tg_bf16_engine: the library's probes, 2 ms trials, the best one counts) --- */
static double or0(double x) { return isnan(x) ? 0 : x; } /* not measured, or no such unit */

/* The bf16 products' engine (chosen by measured rate), and its peak: a bf16
 * row's "of peak" is against the engine that ran (vdpbf16ps: the longer
 * probe, 0.5 s). */
static double bf16_engine_peak(bool measure) {
    tg_bf16_engine_info e = tg_bf16_engine();
    printf("bf16_engine=%s engine_gflops=%.2f fma_gflops=%.2f vdp_gflops=%.2f amx_gflops=%.2f\n", e.engine, e.gflops,
           e.fma_gflops, e.vdp_gflops, e.amx_gflops);
    return measure && strcmp(e.engine, "avx512_bf16") == 0 ? tg_bf16_peak_measure(0.5) : e.gflops;
}

/* --peaks: what the full comparison's "of peak" is against, measured at its
 * start and end (1 s over both FMA widths, 0.5 s of vdpbf16ps). */
static int print_peaks(void) {
    tg_fma_peak p = tg_fma_peak_measure(1.0);
    printf("isa=%s peak_gflops_per_core=%.2f peak256=%.2f peak512=%.2f peak_bf16=%.2f\n", tg_isa_name(), or0(p.gflops),
           or0(p.gflops256), or0(p.gflops512), or0(tg_bf16_peak_measure(0.5)));
    return 0;
}

/* ---- timing loop ---------------------------------------------------------------
 * A workload is a context with an untimed prepare (make the next batch) and a
 * timed step. The first call also records how much arena memory one step
 * takes at its peak (the step opens and closes its own scope). */
typedef struct {
    void *ctx;
    void (*prepare)(void *ctx); /* may be NULL */
    int (*step)(void *ctx);     /* 0 on success */
    double gflop;               /* floating-point work of one step (GEMM flops) */
} workload;

typedef struct {
    double med, min, max; /* ms per step */
    double arena_mb;
} timing;

static int time_workload(const workload *w, int steps, int warmup, timing *out) {
    double *ms = malloc(sizeof(double) * (size_t)steps);
    if (!ms) return -1;
    for (int i = 0; i < warmup + steps; i++) {
        if (g_profile && i == warmup) tg_profile_begin(); /* the timed steps only */
        tg_profile_region_begin(TG_PROF_DATA, "bench batch");
        if (w->prepare) w->prepare(w->ctx);
        tg_profile_region_end();
        size_t before = tg_memory().arena_in_use;
        double t0 = now();
        int rc = w->step(w->ctx);
        double t = now() - t0;
        if (rc != 0) {
            free(ms);
            return -1;
        }
        if (i == 0) out->arena_mb = (double)(tg_memory().arena_peak - before) / (1024.0 * 1024.0);
        if (i >= warmup) ms[i - warmup] = 1e3 * t;
    }
    if (g_profile) {
        tg_profile_end();
        tg_profile_print(stdout, steps);
    }
    qsort(ms, (size_t)steps, sizeof *ms, cmp_double);
    out->med = steps % 2 ? ms[steps / 2] : 0.5 * (ms[steps / 2 - 1] + ms[steps / 2]);
    out->min = ms[0];
    out->max = ms[steps - 1];
    free(ms);
    return 0;
}

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

/* ---- nanoGPT's GPT (gpt-mini, gpt-small, gpt2) ---------------------------------- */
typedef struct {
    int V, T, B, L, heads, d;
} gpt_shape;
static const gpt_shape GPT_MINI = {256, 64, 32, 2, 4, 128};
static const gpt_shape GPT_SMALL = {256, 128, 16, 4, 8, 256};
static const gpt_shape GPT2 = {50257, 1024, 0, 12, 12, 768}; /* B: gpt2_batch */
static int g_batch, g_seq;                                   /* --batch, --seq: gpt2's B and T (0: chosen) */

/* Bytes of one gpt2 step besides the model: per sample, measured arena of
 * one step at T 1024 (BENCHMARKS.md), linear in T (the fused attention
 * keeps O(T) per head); the model's parameters, gradients and AdamW's two
 * moments are 16 bytes a parameter. */
static double gpt2_bytes(int B, int T) {
    double P = 12 * 12.0 * 768 * 768 + (50257.0 + T) * 768;
    return 16 * P + B * GPT2_SAMPLE_BYTES_PER_TOKEN * T;
}

static double mem_available_bytes(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    double kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb > 0 ? kb * 1024 : 4.0 * (1 << 30); /* unknown: assume 4 GiB */
}

/* The largest of 8, 4, 2, 1 whose step fits half the memory available. */
static int gpt2_batch(int T) {
    double half = 0.5 * mem_available_bytes();
    for (int B = 8; B > 1; B /= 2)
        if (gpt2_bytes(B, T) <= half) return B;
    return 1;
}

typedef struct {
    gpt_shape s;
    tg_decoder *m;
    tg_params params;
    tg_optim *opt;
    unsigned char *text;
    int64_t n_text, window; /* windows drawn so far */
    int *x, *y;
    FILE *losses; /* or NULL */
} gpt_bench;

/* Options of the gpt workloads (main's flags). */
static const char *gpt_text = "tests/data/fortunes_excerpt.txt", *gpt_save_init = NULL, *gpt_losses = NULL;

static void gpt_free(gpt_bench *g) {
    tg_optim_free(g->opt);
    tg_params_free(&g->params);
    tg_decoder_free(g->m);
    tg_sys_free(g->text);
    free(g->x);
    free(g->y);
    if (g->losses) fclose(g->losses);
}

static int gpt_new(gpt_bench *g, gpt_shape s) {
    memset(g, 0, sizeof *g);
    tg_params_init(&g->params);
    g->s = s;
    size_t n = 0;
    if (tg_read_file(gpt_text, "--text", &g->text, &n) != 0) return -1; /* a regular file, read whole */
    g->n_text = (int64_t)n;
    if (g->n_text < s.T + 2) {
        tg_set_error("--text %s: %zu bytes, need more than T + 1 = %d", gpt_text, n, s.T + 1);
        return -1;
    }
    tg_rng rng = tg_rng_new(1);
    tg_decoder_config cfg = tg_decoder_config_default(s.V, s.T, s.L, s.heads, s.d);
    if (!(g->m = tg_decoder_new(&cfg, &rng)) || tg_decoder_params(g->m, &g->params, NULL)) return -1;
    if (gpt_save_init && tg_decoder_save(g->m, gpt_save_init, NULL)) return -1;
    tg_optim_config oc = tg_adamw_config((tg_real)3e-4, (tg_real)0.1);
    oc.beta2 = (tg_real)0.95;
    if (!(g->opt = tg_optim_new_groups(&oc, &g->params))) return -1;
    if (gpt_losses && !(g->losses = fopen(gpt_losses, "w"))) {
        tg_set_error("cannot write --losses %s", gpt_losses);
        return -1;
    }
    g->x = malloc(sizeof(int) * (size_t)s.B * s.T);
    g->y = malloc(sizeof(int) * (size_t)s.B * s.T);
    return g->x && g->y ? 0 : -1;
}

/* Window w starts at (w * 2654435761) mod (n - T - 1) (bench/torch_ref.py: gpt_batch). */
static void gpt_prepare(void *ctx) {
    gpt_bench *g = ctx;
    int T = g->s.T;
    for (int b = 0; b < g->s.B; b++, g->window++) {
        int64_t start = (int64_t)(((uint64_t)g->window * 2654435761u) % (uint64_t)(g->n_text - T - 1));
        for (int t = 0; t < T; t++) {
            g->x[b * T + t] = g->text[start + t];
            g->y[b * T + t] = g->text[start + t + 1];
        }
    }
}

static int gpt_step(void *ctx) {
    gpt_bench *g = ctx;
    tg_scope_begin();
    tg_optim_zero_grad(g->opt);
    tg_tensor *loss = tg_decoder_loss(g->m, g->x, g->y, g->s.B, g->s.T);
    int rc = loss && tg_backward(loss) == 0 ? 0 : -1;
    if (rc == 0) {
        tg_optim_step(g->opt);
        if (g->losses) fprintf(g->losses, "%.9g\n", (double)tg_item(loss));
    }
    tg_scope_end();
    return rc;
}

/* GEMM flops of one step: 6 N P for the P weights in products (the four
 * Linears of each block and the head), plus 3 x 4 B T^2 d for the two
 * attention products (full T x T; the causal half is not subtracted). */
static double gpt_gflop(gpt_shape s) {
    double N = (double)s.B * s.T, d = s.d;
    double P = s.L * 12.0 * d * d + (double)s.V * d;
    return (6 * N * P + 3 * 4.0 * s.B * (double)s.T * s.T * d * s.L) * 1e-9;
}

/* ---- one attention layer (attn-T) ------------------------------------------- */
typedef struct {
    tg_mha *mha;
    tg_params params;
    tg_tensor *X; /* [1, T, 64] */
} attn_bench;

static int attn_new(attn_bench *a, int T) {
    tg_rng rng = tg_rng_new(1);
    a->mha = tg_mha_new(64, 64, 64, 64, 4, (tg_real)0.1, false, &rng);
    a->X = tg_randn(TG_SHAPE(1, T, 64), &rng);
    if (!a->mha || !a->X) return -1;
    tg_params_init(&a->params);
    return tg_mha_params(a->mha, &a->params, "attention");
}

static void attn_free(attn_bench *a) {
    tg_mha_free(a->mha);
    tg_free(a->X);
    tg_params_free(&a->params);
}

static int attn_step(void *ctx) {
    attn_bench *a = ctx;
    tg_mask none = {0};
    tg_scope_begin();
    for (int i = 0; i < a->params.n; i++) tg_zero_grad(a->params.items[i].t);
    tg_tensor *out = tg_mha_forward(a->mha, a->X, a->X, a->X, none);
    int rc = out && tg_backward(tg_sum_all(out)) == 0 ? 0 : -1;
    tg_scope_end();
    return rc;
}

static double attn_gflop(int T) {
    double d = 64;
    return 3 * (4 * 2 * T * d * d + 2 * 2 * (double)T * T * d) * 1e-9;
}

/* ---- C = A B (gemm-n) ------------------------------------------------------- */
typedef struct {
    int n;
    tg_tensor *A, *B, *C;
} gemm_bench;

static int gemm_step(void *ctx) {
    gemm_bench *g = ctx;
    (g_bf16 ? tg_k_gemm_bf16 : tg_k_gemm)(false, false, g->n, g->n, g->n, 1, g->A->data, g->n, g->B->data, g->n, 0,
                                          g->C->data, g->n);
    return 0;
}

/* ---- one workload by name ------------------------------------------------------ */

/* Splits "attn-1024" into its kind and size; returns the kind, or NULL. */
static const char *parse_workload(const char *name, int *size) {
    *size = 0;
    if (strcmp(name, "toy") == 0 || strcmp(name, "mid") == 0 || strcmp(name, "gpt-mini") == 0 ||
        strcmp(name, "gpt-small") == 0 || strcmp(name, "gpt2") == 0)
        return name;
    const char *kinds[] = {"attn", "gemm"};
    for (int k = 0; k < 2; k++) {
        size_t len = strlen(kinds[k]);
        char *end;
        if (strncmp(name, kinds[k], len) == 0 && name[len] == '-') {
            long v = strtol(name + len + 1, &end, 10);
            if (*end || v < 1 || v > 65536) return NULL;
            *size = (int)v;
            return kinds[k];
        }
    }
    return NULL;
}

/* Steps and warm-up when not given: >= 10 timed steps, more for cheap ones.
 * In one of the full comparison's `rounds` rounds (--rounds), a slow
 * workload's steps (fewer than 50) are shared among the rounds, at least 5
 * each; the quick ones keep theirs in every round. */
static void default_steps(const char *kind, int size, int rounds, int *steps, int *warmup) {
    int s = 10, w = 2;
    if (strcmp(kind, "toy") == 0) s = 50, w = 10;
    if (strcmp(kind, "gpt-mini") == 0) s = 30, w = 5;
    if (strcmp(kind, "gpt-small") == 0) s = 20, w = 3;
    if (strcmp(kind, "gpt2") == 0) s = 2, w = 1;
    if (strcmp(kind, "attn") == 0 && size <= 1024) s = 20, w = 3;
    if (strcmp(kind, "attn") == 0 && size >= 4096) w = 1;
    if (strcmp(kind, "gemm") == 0) s = size <= 512 ? 50 : 10, w = size <= 512 ? 5 : 1;
    if (s < 50 && rounds > 1) s = (s + rounds - 1) / rounds < 5 ? 5 : (s + rounds - 1) / rounds;
    if (*steps <= 0) *steps = s;
    if (*warmup < 0) *warmup = w;
}

/* Runs one workload in this process and prints key=value lines, the last
 * one ms_per_step=<median>. */
static int run_workload(const char *name, int threads, int steps, int warmup, int rounds) {
    int size;
    const char *kind = parse_workload(name, &size);
    default_steps(kind, size, rounds, &steps, &warmup);
    if (g_bf16) {
        tg_clear_error();
        tg_set_precision(TG_PREC_BF16);
        if (tg_get_precision() != TG_PREC_BF16) {
            fprintf(stderr, "bench: --precision bf16: %s\n", tg_last_error());
            return 1;
        }
    }
    double rss0 = status_mb("VmRSS"), peak = NAN, p256 = 0, p512 = 0, pbf16 = 0;
    double tokens = 0; /* per step, gpt workloads */
    timing t = {0};
    workload w = {0};
    int rc = -1;
    if (strncmp(kind, "gpt", 3) == 0) {
        gpt_bench g;
        gpt_shape s = strcmp(kind, "gpt-mini") == 0 ? GPT_MINI : strcmp(kind, "gpt-small") == 0 ? GPT_SMALL : GPT2;
        if (strcmp(kind, "gpt2") == 0) {
            if (g_seq) s.T = g_seq;
            s.B = g_batch ? g_batch : gpt2_batch(s.T);
            printf("gpt2: B %d, T %d (estimated %.1f GB; %.1f GB available)\n", s.B, s.T, gpt2_bytes(s.B, s.T) * 1e-9,
                   mem_available_bytes() * 1e-9);
        }
        tokens = (double)s.B * s.T;
        w = (workload){&g, gpt_prepare, gpt_step, gpt_gflop(s)};
        if (g_bf16) bf16_engine_peak(false); /* says which engine runs the products */
        rc = gpt_new(&g, s) == 0 ? time_workload(&w, steps, warmup, &t) : -1;
        gpt_free(&g);
    } else if (kind[0] == 'g') {
        tg_fma_peak p = {NAN, NAN, NAN};
        if (!g_bf16) p = tg_fma_peak_measure(1.0);
        peak = g_bf16 ? (pbf16 = or0(bf16_engine_peak(true))) : p.gflops;
        p256 = or0(p.gflops256), p512 = or0(p.gflops512);
        gemm_bench g = {size, NULL, NULL, NULL};
        tg_rng rng = tg_rng_new(1);
        g.A = tg_randn(TG_SHAPE(size, size), &rng);
        g.B = tg_randn(TG_SHAPE(size, size), &rng);
        g.C = tg_zeros(TG_SHAPE(size, size));
        w = (workload){&g, NULL, gemm_step, 2.0 * size * size * (double)size * 1e-9};
        rc = g.C ? time_workload(&w, steps, warmup, &t) : -1;
        tg_free(g.A), tg_free(g.B), tg_free(g.C);
    } else if (kind[0] == 'a') {
        attn_bench a = {0};
        w = (workload){&a, NULL, attn_step, attn_gflop(size)};
        rc = attn_new(&a, size) == 0 ? time_workload(&w, steps, warmup, &t) : -1;
        attn_free(&a);
    } else {
        encoder_bench e;
        model_shape s = strcmp(kind, "toy") == 0 ? TOY : MID;
        w = (workload){&e, encoder_prepare, encoder_step, encoder_gflop(s)};
        rc = encoder_new(&e, s) == 0 ? time_workload(&w, steps, warmup, &t) : -1;
        encoder_free(&e);
    }
    if (rc != 0) {
        fprintf(stderr, "bench: %s: %s\n", name, tg_last_error() ? tg_last_error() : "failed");
        return 1;
    }
    double gflops = w.gflop / (t.med * 1e-3);
    printf("workload=%s threads=%d steps=%d warmup=%d precision=%s isa=%s\n", name, threads, steps, warmup,
           g_bf16 ? "bf16" : "fp32", tg_isa_name());
    printf("min_ms=%.4f max_ms=%.4f gflop_per_step=%.4f gflops=%.2f\n", t.min, t.max, w.gflop, gflops);
    if (!isnan(peak))
        printf("peak_gflops_per_core=%.2f peak_fraction=%.4f peak256=%.2f peak512=%.2f peak_bf16=%.2f\n", peak,
               gflops / (threads * peak), p256, p512, pbf16);
    printf("arena_step_mb=%.2f rss_peak_mb=%.1f rss_added_mb=%.1f\n", t.arena_mb, status_mb("VmHWM"),
           status_mb("VmHWM") - rss0);
    if (tokens > 0) printf("tokens_per_step=%.0f tokens_per_s=%.1f\n", tokens, tokens / (t.med * 1e-3));
    printf("ms_per_step=%.4f\n", t.med);
    tg_release_all();
    return 0;
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

/* ---- the full comparison: bench/compare.py, given this program's path ---------- */
typedef struct {
    const char *only, *markdown, *python, *script;
    int rounds, steps, warmup;
    bool no_torch;
} comparison;

static int run_comparison(const comparison *c) {
    char self[4096], rounds[16], steps[16], warmup[16];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        fprintf(stderr, "bench: cannot find this program's path (/proc/self/exe): %s\n", strerror(errno));
        return 1;
    }
    self[n] = 0;
    snprintf(rounds, sizeof rounds, "%d", c->rounds);
    snprintf(steps, sizeof steps, "%d", c->steps);
    snprintf(warmup, sizeof warmup, "%d", c->warmup);
    const char *argv[24] = {"/usr/bin/python3", TG_SRC_DIR "/bench/compare.py", "--bench", self, "--rounds", rounds,
                            "--steps", steps, "--warmup", warmup, "--python", c->python, "--torch-script", c->script,
                            "--text", gpt_text};
    int k = 16;
    if (c->only) argv[k++] = "--only", argv[k++] = c->only;
    if (c->markdown) argv[k++] = "--markdown", argv[k++] = c->markdown;
    if (c->no_torch) argv[k++] = "--no-torch";
    fflush(stdout);
    execv(argv[0], (char *const *)argv);
    fprintf(stderr, "bench: the full comparison is %s, run by %s: %s\n", argv[1], argv[0], strerror(errno));
    return 1;
}

int main(int argc, char **argv) {
    const char *name = NULL, *precision = "fp32";
    int threads = 1;
    bool determinism = false, peaks = false;
    comparison c = {.python = "/usr/bin/python3", .script = "bench/torch_ref.py", .rounds = 3, .warmup = -1};
    cli_opt opts[] = {
        {"workload", CLI_STR, &name,
         "run one workload (toy, mid, gpt-mini, gpt-small, gpt2, attn-T, gemm-n), tgrad only", 0, 0},
        {"profile", CLI_FLAG, &g_profile, "with --workload: print the profiler's table of the timed steps", 0, 0},
        {"batch", CLI_INT, &g_batch, "gpt2: the batch (0: the largest of 8, 4, 2, 1 that fits memory)", 0, 64},
        {"seq", CLI_INT, &g_seq, "gpt2: the sequence length T (0: 1024)", 0, 16384},
        {"threads", CLI_INT, &threads, "threads for --workload", 1, 1024},
        {"precision", CLI_STR, &precision, "products for --workload: fp32, or bf16 (bfloat16, float sums)", 0, 0},
        {"steps", CLI_INT, &c.steps, "timed steps (0: the workload's default, >= 10)", 0, MAX_STEPS},
        {"warmup", CLI_INT, &c.warmup, "warm-up steps (-1: the workload's default)", -1, MAX_STEPS},
        {"markdown", CLI_STR, &c.markdown, "also write the full comparison to this file", 0, 0},
        {"check-determinism", CLI_FLAG, &determinism, "100 toy steps at 1 and 2 threads and again: PASS/FAIL", 0, 0},
        {"peaks", CLI_FLAG, &peaks, "measure the core's FMA and bf16 dot-product peaks (GFLOP/s)", 0, 0},
        {"only", CLI_STR, &c.only, "comma-separated workloads for the full comparison (default all)", 0, 0},
        {"rounds", CLI_INT, &c.rounds,
         "full comparison: tgrad and PyTorch measured alternately this many times (a slow workload's default steps "
         "shared among them); the table has the median of the rounds' medians",
         1, MAX_ROUNDS},
        {"no-torch", CLI_FLAG, &c.no_torch, "skip PyTorch in the full comparison", 0, 0},
        {"python", CLI_STR, &c.python, "Python with torch, for the comparison", 0, 0},
        {"torch-script", CLI_STR, &c.script, "the PyTorch side of the comparison", 0, 0},
        {"text", CLI_STR, &gpt_text, "gpt workloads: the text whose bytes they train on", 0, 0},
        {"save-init", CLI_STR, &gpt_save_init, "gpt workloads: write the initial weights to this safetensors file", 0,
         0},
        {"losses", CLI_STR, &gpt_losses, "gpt workloads: write every step's loss (warm-up too) to this file", 0, 0},
    };
    const int nopt = (int)(sizeof opts / sizeof opts[0]);
    const char *about = "Times tgrad training steps; with no --workload, every workload at 1 and 2 threads\n"
                        "against PyTorch (run as a subprocess), as one table.";
#define USAGE_ERROR(...) cli_usage_error(argv[0], "[options]", about, opts, nopt, __VA_ARGS__)
    cli_parse(argc, argv, "[options]", about, opts, nopt, NULL, 0);
    int size;
    if (strcmp(precision, "fp32") != 0 && strcmp(precision, "bf16") != 0)
        return USAGE_ERROR("--precision: fp32 or bf16, not '%s'", precision);
    g_bf16 = strcmp(precision, "bf16") == 0;
    if (name && !parse_workload(name, &size)) return USAGE_ERROR("unknown workload '%s'", name);
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
                               name ? "--workload" : determinism ? "--check-determinism" : "--peaks");
    /* The gpt workloads' flags mean nothing to the others: refused too. */
    static const char *const gpt_only[] = {"save-init", "losses", "text"};
    for (size_t k = 0; name && strncmp(name, "gpt", 3) != 0 && k < sizeof gpt_only / sizeof *gpt_only; k++)
        if (cli_given(opts, nopt, gpt_only[k]))
            return USAGE_ERROR("--%s is for the gpt workloads, not %s", gpt_only[k], name);
    if (determinism) return check_determinism();
    if (peaks) return print_peaks();
    if (!name) return run_comparison(&c);
    int got = tg_set_num_threads(threads);
    if (got < threads) fprintf(stderr, "bench: --threads %d capped at %d (the CPUs available)\n", threads, got);
    return run_workload(name, threads, c.steps, c.warmup, cli_given(opts, nopt, "rounds") ? c.rounds : 1);
}
