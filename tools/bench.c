/* bench: how fast tgrad trains small self-attention models on the CPU,
 * measured against PyTorch in the same run.
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
 * Times are the median (with min and max) of >= 10 timed steps after warm-up;
 * the full comparison runs tgrad and PyTorch alternately in 3 rounds
 * (--rounds; a slow workload's steps shared among them, at least 5 each),
 * and reports the median of the rounds' medians.
 *
 * Reproduce:
 *   make bench                                  all workloads at 1 and 2 threads
 *                                               against PyTorch -> BENCHMARKS.md
 *   build/bin/bench --workload mid --threads 2  one workload, tgrad only; the last
 *                                               line is ms_per_step=<median>
 *   build/bin/bench --check-determinism         100 toy steps: 1 vs 2 threads vs rerun
 *   /usr/bin/python3 bench/torch_ref.py --workload mid --threads 2   PyTorch alone
 *
 * With no --workload, each measurement runs in a child process (this program
 * with --workload, or the PyTorch script), so every peak RSS figure is that
 * of one workload alone. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "tgrad.h"

enum { MAX_STEPS = 100000, MAX_ROUNDS = 9 };
/* gpt2's activation memory per token of a sample (gpt2_bytes). */
#define GPT2_SAMPLE_BYTES_PER_TOKEN 1.7e6
static bool g_profile; /* --profile */

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

static double median(double *v, int n) /* sorts v */
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double rss_peak_mb(void) /* the process's peak resident set */
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0; /* Linux reports KiB */
}

static double rss_now_mb(void) {
    long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%*s %ld", &pages) != 1) pages = 0;
        fclose(f);
    }
    return (double)pages * (double)sysconf(_SC_PAGESIZE) / (1024.0 * 1024.0);
}

static void set_threads(int n) { tg_set_num_threads(n); }

/* ---- the core's FMA peak ------------------------------------------------- */
/* The best of each width measured in this process (0: not measured or no
 * such unit), reported apart: the issue of a core whose 512-bit FMAs run
 * at twice the 256-bit rate, or at the same rate. */
static double g_peak256, g_peak512;

/* The bf16 dot-product peak (tensor.h: tg_bf16_peak_measure, 2 ms trials for
 * 0.5 s); the bf16 GEMM's "of peak" is against it. */
static double g_peak_bf16;
static double bf16_peak_gflops(void) {
    double p = tg_bf16_peak_measure(0.5);
    if (!isnan(p)) g_peak_bf16 = fmax(g_peak_bf16, p);
    return p;
}

/* The bf16 products' engine (tensor.h: tg_bf16_engine, chosen by measured
 * rate): a bf16 row's "of peak" is against the engine that ran, its rate
 * measured by the library (vdpbf16ps: the longer probe above). */
static double bf16_engine_peak(void) {
    tg_bf16_engine_info e = tg_bf16_engine();
    printf("bf16_engine=%s engine_gflops=%.2f fma_gflops=%.2f vdp_gflops=%.2f amx_gflops=%.2f\n", e.engine, e.gflops,
           e.fma_gflops, e.vdp_gflops, e.amx_gflops);
    if (strcmp(e.engine, "avx512_bf16") == 0) return bf16_peak_gflops();
    if (!isnan(e.gflops)) g_peak_bf16 = e.gflops;
    return e.gflops;
}

/* The library's probe (tensor.h: tg_fma_peak_measure, 2 ms trials for 1 s
 * over both widths); the best of each width seen in this process is kept. */
static double fma_peak_gflops(void) {
    tg_fma_peak p = tg_fma_peak_measure(1.0);
    if (!isnan(p.gflops256)) g_peak256 = fmax(g_peak256, p.gflops256);
    if (!isnan(p.gflops512)) g_peak512 = fmax(g_peak512, p.gflops512);
    return p.gflops;
}
/* The library's level (tg_isa_name: the CPU's, capped by TG_ISA) and what runs at it. */
static const char *kernel_isa(void) {
    const char *isa = tg_isa_name();
    if (strcmp(isa, "amx") == 0)
        return "amx: AVX-512 (GEMM, elementwise, norm, exp), AMX tiles or AVX-512 BF16 (the bf16 GEMM, by measured "
               "rate), AVX2 (attention rows, packing)";
    if (strcmp(isa, "avx512_bf16") == 0)
        return "avx512_bf16: AVX-512 (GEMM, elementwise, norm, exp), AVX-512 BF16 (the bf16 GEMM), AVX2 (attention "
               "rows, packing)";
    return strcmp(isa, "avx512") == 0 ? "avx512: AVX-512 (GEMM, elementwise, norm, exp), AVX2 (attention rows, packing)"
           : strcmp(isa, "avx2") == 0 ? "avx2: AVX2 and FMA"
                                      : "portable: plain C loops";
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
    int steps;
    double gflop, arena_mb;
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
    out->steps = steps;
    out->gflop = w->gflop;
    out->med = median(ms, steps);
    out->min = ms[0];
    out->max = ms[steps - 1];
    free(ms);
    return 0;
}

/* ---- the Transformer encoder workloads (toy, mid) ---------------------------- */
typedef struct {
    int V, T, B, d, heads, ffn, L;
} model_shape;
static const model_shape TOY = {16, 16, 64, 64, 4, 128, 2};
static const model_shape MID = {64, 128, 32, 256, 8, 1024, 4};

typedef struct {
    model_shape s;
    tg_encoder *encoder;
    tg_linear *head;
    tg_params params;
    tg_optim *opt;
    tg_rng data;
    int *tokens, *targets;
    float loss; /* of the last step */
} model;

static int model_new(model *m, model_shape s, uint64_t seed) {
    memset(m, 0, sizeof *m);
    m->s = s;
    tg_rng rng = tg_rng_new(seed);
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
    m->encoder = tg_encoder_new(&cfg, &rng);
    m->head = tg_linear_new(s.d, s.V, true, &rng);
    if (!m->encoder || !m->head) return -1;
    tg_params_init(&m->params);
    if (tg_encoder_params(m->encoder, &m->params, "encoder") || tg_linear_params(m->head, &m->params, "head"))
        return -1;
    tg_optim_config oc = tg_adam_config((tg_real)1e-3);
    m->opt = tg_optim_new(&oc, &m->params);
    m->data = tg_rng_fork(&rng, 1);
    m->tokens = malloc(sizeof(int) * (size_t)s.B * s.T);
    m->targets = malloc(sizeof(int) * (size_t)s.B * s.T);
    return m->opt && m->tokens && m->targets ? 0 : -1;
}

static void model_free(model *m) {
    tg_optim_free(m->opt);
    tg_encoder_free(m->encoder);
    tg_linear_free(m->head);
    tg_params_free(&m->params);
    free(m->tokens);
    free(m->targets);
}

/* Random tokens; the target is the reversed sequence. */
static void model_prepare(void *ctx) {
    model *m = ctx;
    int T = m->s.T;
    for (int b = 0; b < m->s.B; b++)
        for (int t = 0; t < T; t++) {
            int tok = (int)(tg_rng_next_u64(&m->data) % (uint64_t)m->s.V);
            m->tokens[b * T + t] = tok;
            m->targets[b * T + (T - 1 - t)] = tok;
        }
}

static int model_step(void *ctx) {
    model *m = ctx;
    tg_mask none = {0};
    tg_scope_begin();
    tg_optim_zero_grad(m->opt);
    tg_tensor *X = tg_encoder_forward(m->encoder, m->tokens, m->s.B, m->s.T, none);
    tg_tensor *loss = tg_cross_entropy(tg_linear_forward(m->head, X), m->targets, NULL, TG_IGNORE_INDEX);
    int rc = loss && tg_backward(loss) == 0 ? 0 : -1;
    if (rc == 0) {
        tg_optim_step(m->opt);
        m->loss = (float)tg_item(loss);
    }
    tg_scope_end();
    return rc;
}

/* GEMM flops of one training step: forward products x 3 (backward computes
 * two products per forward one). Elementwise work is not counted. */
static double model_gflop(model_shape s) {
    double N = (double)s.B * s.T, d = s.d;
    double block = 4 * 2 * N * d * d                     /* W_q, W_k, W_v, W_o */
                   + 2 * 2 * (double)s.B * s.T * s.T * d /* Q K^T and weights @ V */
                   + 2 * 2 * N * d * s.ffn;              /* dense1, dense2 */
    return 3 * (s.L * block + 2 * N * d * s.V) * 1e-9;
}

/* ---- nanoGPT's GPT (gpt-mini, gpt-small) ---------------------------------------- */
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

/* --precision bf16: products in bfloat16 (tg_set_precision; the gemm-n
 * workload calls tg_k_gemm_bf16), its peak the bf16 dot-product rate. */
static bool g_bf16;

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

/* Steps and warm-up when not given: >= 10 timed steps, more for cheap ones. */
static void default_steps(const char *kind, int size, int *steps, int *warmup) {
    int s = 10, w = 2;
    if (strcmp(kind, "toy") == 0) s = 50, w = 10;
    if (strcmp(kind, "gpt-mini") == 0) s = 30, w = 5;
    if (strcmp(kind, "gpt-small") == 0) s = 20, w = 3;
    if (strcmp(kind, "gpt2") == 0) s = 2, w = 1;
    if (strcmp(kind, "attn") == 0 && size <= 1024) s = 20, w = 3;
    if (strcmp(kind, "attn") == 0 && size >= 4096) w = 1;
    if (strcmp(kind, "gemm") == 0) s = size <= 512 ? 50 : 10, w = size <= 512 ? 5 : 1;
    if (*steps <= 0) *steps = s;
    if (*warmup < 0) *warmup = w;
}

/* Runs one workload in this process and prints key=value lines, the last
 * one ms_per_step=<median>. */
static int run_workload(const char *name, int threads, int steps, int warmup) {
    int size;
    const char *kind = parse_workload(name, &size);
    if (!kind) {
        fprintf(stderr, "bench: unknown workload '%s'\n", name);
        return 2;
    }
    default_steps(kind, size, &steps, &warmup);
    set_threads(threads);
    if (g_bf16) {
        tg_clear_error();
        tg_set_precision(TG_PREC_BF16);
        if (tg_get_precision() != TG_PREC_BF16) {
            fprintf(stderr, "bench: --precision bf16: %s\n", tg_last_error());
            return 1;
        }
    }
    double rss0 = rss_now_mb(), peak = NAN;
    timing t = {0};
    int rc;
    double tokens = 0; /* per step, gpt workloads */
    if (strncmp(kind, "gpt", 3) == 0) {
        gpt_bench g;
        workload w = {&g, gpt_prepare, gpt_step, 0};
        gpt_shape s = strcmp(kind, "gpt-mini") == 0 ? GPT_MINI : strcmp(kind, "gpt-small") == 0 ? GPT_SMALL : GPT2;
        if (strcmp(kind, "gpt2") == 0) {
            if (g_seq) s.T = g_seq;
            s.B = g_batch ? g_batch : gpt2_batch(s.T);
            printf("gpt2: B %d, T %d (estimated %.1f GB; %.1f GB available)\n", s.B, s.T, gpt2_bytes(s.B, s.T) * 1e-9,
                   mem_available_bytes() * 1e-9);
        }
        tokens = (double)s.B * s.T;
        w.gflop = gpt_gflop(s);
        if (g_bf16) bf16_engine_peak(); /* prints the engine */
        rc = gpt_new(&g, s) == 0 ? time_workload(&w, steps, warmup, &t) : -1;
        gpt_free(&g);
    } else if (kind[0] == 'g') {
        peak = g_bf16 ? bf16_engine_peak() : fma_peak_gflops();
        gemm_bench g = {size, NULL, NULL, NULL};
        tg_rng rng = tg_rng_new(1);
        g.A = tg_randn(TG_SHAPE(size, size), &rng);
        g.B = tg_randn(TG_SHAPE(size, size), &rng);
        g.C = tg_zeros(TG_SHAPE(size, size));
        workload w = {&g, NULL, gemm_step, 2.0 * size * size * (double)size * 1e-9};
        rc = g.C ? time_workload(&w, steps, warmup, &t) : -1;
        tg_free(g.A), tg_free(g.B), tg_free(g.C);
    } else if (kind[0] == 'a') {
        attn_bench a = {0};
        workload w = {&a, NULL, attn_step, attn_gflop(size)};
        rc = attn_new(&a, size) == 0 ? time_workload(&w, steps, warmup, &t) : -1;
        attn_free(&a);
    } else {
        model m;
        model_shape s = strcmp(kind, "toy") == 0 ? TOY : MID;
        workload w = {&m, model_prepare, model_step, model_gflop(s)};
        rc = model_new(&m, s, 1) == 0 ? time_workload(&w, steps, warmup, &t) : -1;
        model_free(&m);
    }
    if (rc != 0) {
        fprintf(stderr, "bench: %s: %s\n", name, tg_last_error() ? tg_last_error() : "failed");
        return 1;
    }
    double gflops = t.gflop / (t.med * 1e-3);
    printf("workload=%s threads=%d steps=%d warmup=%d precision=%s isa=%s\n", name, threads, t.steps, warmup,
           g_bf16 ? "bf16" : "fp32", tg_isa_name());
    printf("min_ms=%.4f max_ms=%.4f gflop_per_step=%.4f gflops=%.2f\n", t.min, t.max, t.gflop, gflops);
    if (!isnan(peak))
        printf("peak_gflops_per_core=%.2f peak_fraction=%.4f peak256=%.2f peak512=%.2f peak_bf16=%.2f\n", peak,
               gflops / (threads * peak), g_peak256, g_peak512, g_peak_bf16);
    printf("arena_step_mb=%.2f rss_peak_mb=%.1f rss_added_mb=%.1f\n", t.arena_mb, rss_peak_mb(), rss_peak_mb() - rss0);
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
    model m;
    set_threads(threads);
    if (model_new(&m, TOY, 1) != 0) return -1;
    for (int i = 0; i < DET_STEPS; i++) {
        model_prepare(&m);
        if (model_step(&m) != 0) {
            model_free(&m);
            return -1;
        }
        losses[i] = m.loss;
    }
    uint64_t h = 1469598103934665603ULL; /* FNV-1a over every parameter byte */
    for (int p = 0; p < m.params.n; p++) {
        const unsigned char *b = (const unsigned char *)m.params.items[p].t->data;
        for (size_t i = 0; i < sizeof(tg_real) * (size_t)m.params.items[p].t->size; i++)
            h = (h ^ b[i]) * 1099511628211ULL;
    }
    *param_hash = h;
    model_free(&m);
    return 0;
}

/* Fills verdict with one line beginning PASS or FAIL; returns 0 on PASS. */
static int check_determinism(char *verdict, size_t cap) {
    static const int threads[] = {1, 2, 1, 2};
    static const char *names[] = {"1 thread", "2 threads", "1 thread (second run)", "2 threads (second run)"};
    float losses[4][DET_STEPS];
    uint64_t hash[4];
    for (int r = 0; r < 4; r++)
        if (toy_losses(threads[r], losses[r], &hash[r]) != 0) {
            snprintf(verdict, cap, "FAIL: toy training failed: %s", tg_last_error());
            return 1;
        }
    set_threads(1);
    for (int r = 1; r < 4; r++) {
        for (int i = 0; i < DET_STEPS; i++)
            if (memcmp(&losses[r][i], &losses[0][i], sizeof(float)) != 0) {
                snprintf(verdict, cap, "FAIL: %s differs from 1 thread at step %d (loss %.9g vs %.9g)", names[r], i + 1,
                         (double)losses[r][i], (double)losses[0][i]);
                return 1;
            }
        if (hash[r] != hash[0]) {
            snprintf(verdict, cap, "FAIL: %s: same losses, but the final parameters differ", names[r]);
            return 1;
        }
    }
    snprintf(verdict, cap,
             "PASS: %d toy steps with dropout 0.1: losses and final parameters bit-identical at 1 and 2 "
             "threads and on a second run (loss %.6f -> %.6f)",
             DET_STEPS, (double)losses[0][0], (double)losses[0][DET_STEPS - 1]);
    return 0;
}

/* ---- child processes ------------------------------------------------------------
 * Each measurement of the full run is a child: this program with --workload,
 * or the PyTorch script. env lists "NAME=value" to set and "NAME" to unset. */
enum { OUT_CAP = 16384 };

static int run_child(char *const argv[], const char *const env[], char *out) {
    int fd[2];
    if (pipe(fd) != 0) return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        for (int i = 0; env && env[i]; i++) {
            char kv[256];
            snprintf(kv, sizeof kv, "%s", env[i]);
            char *eq = strchr(kv, '=');
            if (eq) {
                *eq = 0;
                setenv(kv, eq + 1, 1);
            } else
                unsetenv(kv);
        }
        execv(argv[0], argv);
        fprintf(stderr, "bench: cannot run %s\n", argv[0]);
        _exit(127);
    }
    close(fd[1]);
    size_t n = 0;
    ssize_t got;
    while ((got = read(fd[0], out + n, OUT_CAP - 1 - n)) > 0) n += (size_t)got;
    out[n] = 0;
    close(fd[0]);
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The value of the last "key=value" in out (key at a word start); NAN if absent. */
static double value_of(const char *out, const char *key) {
    double v = NAN;
    size_t len = strlen(key);
    for (const char *p = out; (p = strstr(p, key)) != NULL; p += len)
        if ((p == out || p[-1] == ' ' || p[-1] == '\n') && p[len] == '=') v = strtod(p + len + 1, NULL);
    return v;
}

/* The string value of the first "key=value" in out, into buf. */
static const char *string_of(const char *out, const char *key, char *buf, size_t cap) {
    char pat[64];
    snprintf(pat, sizeof pat, "%s=", key);
    const char *p = strstr(out, pat);
    snprintf(buf, cap, "?");
    if (p) snprintf(buf, cap, "%.*s", (int)strcspn(p + strlen(pat), " \n"), p + strlen(pat));
    return buf;
}

/* ---- the full comparison ------------------------------------------------------ */
typedef struct {
    const char *python, *script, *self;
    int steps, warmup; /* from the command line; 0 / -1: each workload's default */
    int rounds;        /* tgrad and PyTorch measured alternately this many times */
    const char *only;  /* comma-separated workloads, or NULL for all */
    bool torch;        /* false once PyTorch failed to run */
    double peak;       /* best FMA peak seen (GFLOP/s per core): noise only lowers it */
    char torch_version[64], blas[256];
} env_info;

typedef struct {
    const char *workload;
    int threads;
    bool bf16; /* --precision bf16 for tgrad, autocast bf16 (bf16 tensors for gemm) for PyTorch */
    bool ok;
    double med, min, max, gflop, rss, arena; /* tgrad */
    bool torch_ok;
    double t_med[2], t_min[2], t_max[2], t_rss[2]; /* PyTorch, variants d2l / nn (or one for gemm) */
    int t_n, t_best;
} row;

static const char *ALL_WORKLOADS[] = {"toy",       "mid",       "gpt-mini",  "gpt-small", "attn-256",
                                      "attn-1024", "attn-2048", "attn-4096", "gemm-128",  "gemm-256",
                                      "gemm-512",  "gemm-1024", "gemm-2048"};
/* Measured again with bf16 products (tg_set_precision; PyTorch with autocast). */
static const char *BF16_WORKLOADS[] = {"gpt-mini", "gpt-small", "gemm-512", "gemm-1024", "gemm-2048"};
static const char *VARIANTS[] = {"d2l", "nn"};
static bool is_gpt(const char *workload) { return strncmp(workload, "gpt-", 4) == 0; }

/* Appends "--steps S --warmup W" for the workload: the user's numbers, or
 * the workload's defaults, the same for tgrad and PyTorch. */
static void add_steps_args(const env_info *e, const char *workload, char **argv, int *n, char *sbuf, char *wbuf) {
    int size, steps = e->steps, warmup = e->warmup;
    const char *kind = parse_workload(workload, &size);
    default_steps(kind, size, &steps, &warmup);
    /* the slow workloads' default steps (fewer than 50) shared among the
     * rounds, at least 5 each; the quick ones keep theirs in every round */
    if (e->steps <= 0 && e->rounds > 1 && steps < 50) {
        steps = (steps + e->rounds - 1) / e->rounds;
        if (steps < 5) steps = 5;
    }
    steps = (steps + e->rounds - 1) / e->rounds < 5 ? 5 : (steps + e->rounds - 1) / e->rounds;
    snprintf(sbuf, 16, "%d", steps);
    snprintf(wbuf, 16, "%d", warmup);
    argv[(*n)++] = "--steps", argv[(*n)++] = sbuf;
    argv[(*n)++] = "--warmup", argv[(*n)++] = wbuf;
}

static void measure_tgrad(env_info *e, row *r) {
    char th[16], sb[16], wb[16], out[OUT_CAP];
    snprintf(th, sizeof th, "%d", r->threads);
    char *argv[16] = {(char *)e->self, "--workload", (char *)r->workload, "--threads", th};
    int n = 5;
    add_steps_args(e, r->workload, argv, &n, sb, wb);
    if (is_gpt(r->workload)) argv[n++] = "--text", argv[n++] = (char *)gpt_text;
    if (r->bf16) argv[n++] = "--precision", argv[n++] = "bf16";
    argv[n] = NULL;
    r->ok = run_child(argv, NULL, out) == 0 && !isnan(value_of(out, "ms_per_step"));
    if (!r->ok) return;
    r->med = value_of(out, "ms_per_step");
    r->min = value_of(out, "min_ms");
    r->max = value_of(out, "max_ms");
    r->gflop = value_of(out, "gflop_per_step");
    r->rss = value_of(out, "rss_peak_mb");
    r->arena = value_of(out, "arena_step_mb");
    /* gemm children measure the peak too: the FMA peak (and each width's),
     * or in a bf16 row the bf16 dot-product peak instead */
    double peak = value_of(out, "peak_gflops_per_core");
    if (!isnan(peak) && r->bf16) {
        g_peak_bf16 = fmax(g_peak_bf16, value_of(out, "peak_bf16"));
    } else if (!isnan(peak)) {
        if (peak > e->peak) e->peak = peak;
        g_peak256 = fmax(g_peak256, value_of(out, "peak256"));
        g_peak512 = fmax(g_peak512, value_of(out, "peak512"));
    }
}

/* PyTorch at its best: its own thread settings, and OPENBLAS_CORETYPE unset
 * so that OpenBLAS picks the kernels for this CPU. */
static void measure_torch(env_info *e, row *r) {
    char th[16], sb[16], wb[16], out[OUT_CAP], omp[48], blas[48], mkl[48];
    snprintf(th, sizeof th, "%d", r->threads);
    snprintf(omp, sizeof omp, "OMP_NUM_THREADS=%d", r->threads);
    snprintf(blas, sizeof blas, "OPENBLAS_NUM_THREADS=%d", r->threads);
    snprintf(mkl, sizeof mkl, "MKL_NUM_THREADS=%d", r->threads);
    const char *env[] = {"OPENBLAS_CORETYPE", omp, blas, mkl, r->threads > 1 ? "OMP_WAIT_POLICY=passive" : NULL, NULL};
    bool gemm = strncmp(r->workload, "gemm", 4) == 0, gpt = is_gpt(r->workload);
    r->t_n = gemm || gpt ? 1 : 2; /* the GPT has one PyTorch form, nanoGPT's */
    r->torch_ok = e->torch;
    for (int v = 0; v < r->t_n && r->torch_ok; v++) {
        char *argv[16] = {(char *)e->python, (char *)e->script,
                          "--workload",      (char *)r->workload,
                          "--threads",       th,
                          "--variant",       gpt ? "nanogpt" : (char *)VARIANTS[v]};
        int n = 8;
        add_steps_args(e, r->workload, argv, &n, sb, wb);
        if (gpt) argv[n++] = "--text", argv[n++] = (char *)gpt_text;
        if (r->bf16) argv[n++] = "--precision", argv[n++] = "bf16";
        argv[n] = NULL;
        if (run_child(argv, env, out) != 0 || isnan(value_of(out, "ms_per_step"))) {
            fprintf(stderr, "bench: PyTorch (%s %s) failed; going on with tgrad alone\n", e->python, e->script);
            r->torch_ok = e->torch = false;
            break;
        }
        r->t_med[v] = value_of(out, "ms_per_step");
        r->t_min[v] = value_of(out, "min_ms");
        r->t_max[v] = value_of(out, "max_ms");
        r->t_rss[v] = value_of(out, "rss_peak_mb");
        string_of(out, "torch", e->torch_version, sizeof e->torch_version);
        string_of(out, "blas", e->blas, sizeof e->blas);
    }
    r->t_best = r->t_n == 2 && r->t_med[1] < r->t_med[0] ? 1 : 0;
}

/* The rounds of a row as one: the median of their medians, the smallest
 * minimum and the largest maximum and peak RSS; failed if any failed. */
static row combine_rounds(const row *rd, int n) {
    row r = rd[0];
    double med[MAX_ROUNDS], tmed[2][MAX_ROUNDS];
    for (int k = 0; k < n; k++) {
        r.ok = r.ok && rd[k].ok;
        r.torch_ok = r.torch_ok && rd[k].torch_ok;
        med[k] = rd[k].med;
        r.min = fmin(r.min, rd[k].min), r.max = fmax(r.max, rd[k].max);
        r.rss = fmax(r.rss, rd[k].rss), r.arena = fmax(r.arena, rd[k].arena);
        for (int v = 0; v < rd[k].t_n; v++) {
            tmed[v][k] = rd[k].t_med[v];
            r.t_min[v] = fmin(r.t_min[v], rd[k].t_min[v]), r.t_max[v] = fmax(r.t_max[v], rd[k].t_max[v]);
            r.t_rss[v] = fmax(r.t_rss[v], rd[k].t_rss[v]);
        }
    }
    r.med = median(med, n);
    for (int v = 0; v < r.t_n; v++) r.t_med[v] = median(tmed[v], n);
    r.t_best = r.t_n == 2 && r.t_med[1] < r.t_med[0] ? 1 : 0;
    return r;
}

/* One line of the table, in Markdown (readable on a terminal too). */
static void print_row(FILE *f, const row *r, double peak) {
    /* a bf16 row's share is of the bf16 dot-product peak (bf16_peak_gflops) */
    if (r->bf16 && g_peak_bf16 > 0) peak = g_peak_bf16;
    char tg[64] = "failed", pt[96] = "n/a", ratio[16] = "n/a", tg_perf[32] = "n/a", pt_perf[32] = "n/a";
    char mem[48] = "n/a";
    int b = r->t_best;
    if (r->ok) {
        double gf = r->gflop / (r->med * 1e-3);
        snprintf(tg, sizeof tg, "%.2f (%.2f-%.2f)", r->med, r->min, r->max);
        snprintf(tg_perf, sizeof tg_perf, "%.1f / %.0f%%", gf, 100 * gf / (r->threads * peak));
        snprintf(mem, sizeof mem, "%.0f", r->rss);
    }
    if (r->torch_ok) {
        double gf = r->gflop / (r->t_med[b] * 1e-3); /* the same work as tgrad's step */
        snprintf(pt, sizeof pt, "%.2f (%.2f-%.2f)", r->t_med[b], r->t_min[b], r->t_max[b]);
        if (r->t_n == 2) {
            size_t l = strlen(pt);
            snprintf(pt + l, sizeof pt - l, " %s; other %.2f", VARIANTS[b], r->t_med[1 - b]);
        } else if (is_gpt(r->workload)) {
            size_t l = strlen(pt);
            snprintf(pt + l, sizeof pt - l, " nanogpt");
        }
        if (r->ok) {
            snprintf(ratio, sizeof ratio, "%.2fx", r->t_med[b] / r->med);
            snprintf(pt_perf, sizeof pt_perf, "%.1f / %.0f%%", gf, 100 * gf / (r->threads * peak));
        }
        size_t l = strlen(mem);
        snprintf(mem + l, sizeof mem - l, " / %.0f", r->t_rss[b]);
    }
    fprintf(f, "| %s%s | %d | %s | %s | %s | %s | %s | %s |\n", r->workload, r->bf16 ? " bf16" : "", r->threads, tg, pt,
            ratio, tg_perf, pt_perf, mem);
}

static void print_table(FILE *f, const row *rows, int n, double peak) {
    fprintf(f, "| workload | threads | tgrad ms/step median (min-max) | PyTorch ms/step median (min-max) "
               "variant | torch/tgrad | tgrad GFLOP/s / of peak | PyTorch GFLOP/s / of peak | "
               "peak RSS MB tgrad / torch |\n");
    fprintf(f, "|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n; i++) print_row(f, &rows[i], peak);
}

/* Geometric mean of torch/tgrad over the rows with both, at one thread count. */
static double geomean_ratio(const row *rows, int n, int threads, int *count) {
    double s = 0;
    *count = 0;
    for (int i = 0; i < n; i++)
        if (rows[i].threads == threads && !rows[i].bf16 && rows[i].ok && rows[i].torch_ok) {
            s += log(rows[i].t_med[rows[i].t_best] / rows[i].med);
            ++*count;
        }
    return *count ? exp(s / *count) : NAN;
}

static void cpu_model(char *buf, size_t cap) {
    snprintf(buf, cap, "unknown");
    FILE *p = popen("lscpu 2>/dev/null", "r");
    char line[512];
    while (p && fgets(line, sizeof line, p))
        if (strncmp(line, "Model name:", 11) == 0) {
            char *s = line + 11;
            s += strspn(s, " \t");
            s[strcspn(s, "\n")] = 0;
            snprintf(buf, cap, "%s", s);
        }
    if (p) pclose(p);
}

static int write_markdown(const char *path, const row *rows, int n, double peak, const env_info *e,
                          const char *determinism, const char *started) {
    tg_atomic_file af;
    if (tg_atomic_begin(&af, path, "bench") != 0) {
        fprintf(stderr, "bench: %s\n", tg_last_error());
        return -1;
    }
    FILE *f = af.f;
    char cpu[256];
    cpu_model(cpu, sizeof cpu);
    fprintf(f, "# Benchmarks: tgrad vs PyTorch on the CPU\n\n");
    fprintf(f,
            "Written by `make bench` (`build/bin/bench --markdown %s`); every number below comes from "
            "that run. The machine is shared and noisy, so tgrad and PyTorch were measured alternately, "
            "%d rounds of each row, and a time is the median of the rounds' medians (min-max over all "
            "their steps).\n\n",
            path, e->rounds);
    fprintf(f, "- date: %s\n- machine: %s, %ld cores online\n", started, cpu, sysconf(_SC_NPROCESSORS_ONLN));
    char wide[48] = "none (no AVX-512)";
    if (g_peak512 > 0) snprintf(wide, sizeof wide, "%.1f GFLOP/s", g_peak512);
    fprintf(f,
            "- measured single-precision FMA peak per core, best of all measurements in the run: 256-bit FMAs "
            "%.1f GFLOP/s, 512-bit FMAs %s; \"of peak\" below is against the faster, %.1f GFLOP/s\n",
            g_peak256, wide, peak);
    if (g_peak_bf16 > 0)
        fprintf(f,
                "- measured bf16 dot-product peak per core (vdpbf16ps, AVX-512 BF16: 32 multiply-adds into 16 float "
                "sums per instruction), best of the run: %.1f GFLOP/s (%.2fx the FMA peak); \"of peak\" of a bf16 "
                "row is against it\n",
                g_peak_bf16, g_peak_bf16 / peak);
    fprintf(f, "- tgrad's kernels on this CPU (chosen at run time, src/tensor/simd.h): %s\n", kernel_isa());
    fprintf(f, "- tgrad: float, its own thread pool (src/tensor/parallel.c: a waiting thread spins up to 200 "
               "microseconds while every thread has a free core, a microsecond or two while other programs want "
               "the cores, then sleeps; no OpenMP runtime)\n");
    if (e->torch)
        fprintf(f,
                "- PyTorch %s via %s, BLAS %s; OPENBLAS_CORETYPE unset, OMP/OPENBLAS/MKL_NUM_THREADS and "
                "torch.set_num_threads = threads, OMP_WAIT_POLICY=passive at 2 threads\n",
                e->torch_version, e->python, e->blas);
    else
        fprintf(f, "- PyTorch: **not available** (%s could not run %s); tgrad's numbers alone\n", e->python, e->script);
    fprintf(f, "\n## Workloads\n\n"
               "- toy: V 16, T 16, B 64, d 64, 4 heads, FFN 128, 2 blocks; mid: V 64, T 128, B 32, d 256, 8 heads, "
               "FFN 1024, 4 blocks. d2l post-norm Transformer encoder + Linear(d, V), cross-entropy at every "
               "position, reversing random sequences, Adam lr 1e-3, dropout 0.1. One step = zero_grad + forward "
               "+ loss + backward + Adam.\n"
               "- gpt-mini: nanoGPT's GPT, V 256, T 64, 2 layers, 4 heads, d 128, batch 32; gpt-small: V 256, "
               "T 128, 4 layers, 8 heads, d 256, batch 16. Byte windows of tests/data/fortunes_excerpt.txt read "
               "in the same order by both, AdamW lr 3e-4, no dropout; PyTorch runs nanoGPT's model.py (manual "
               "attention: torch < 2.0 has no scaled_dot_product_attention).\n"
               "- attn-T: one multi-head self-attention layer (d 64, 4 heads, batch 1, dropout 0.1), forward + "
               "backward of sum(output).\n"
               "- gemm-n: C = A B, n x n float.\n"
               "- `bf16` rows: tgrad with `--precision bf16` (tg_set_precision(TG_PREC_BF16): the products of "
               "Linear, matmul and attention with bf16 operands and float sums, forward and backward; the rest, the "
               "weights and AdamW in float; gemm-n runs tg_k_gemm_bf16), PyTorch with "
               "`torch.autocast(\"cpu\", dtype=torch.bfloat16)` around the forward and loss (gemm-n: torch.mm of "
               "bf16 tensors). Their \"of peak\" is against the bf16 dot-product peak.\n"
               "- PyTorch variants: `d2l` (d2l's MultiHeadAttention from nn.Linear) and `nn` "
               "(torch.nn.MultiheadAttention); the table uses the faster one and shows the other.\n"
               "- GFLOP/s counts GEMM flops only (3x the forward products for a training step); \"of peak\" is "
               "per core (GFLOP/s / threads / measured peak).\n\n");
    fprintf(f, "## Results\n\n");
    print_table(f, rows, n, peak);
    fprintf(f, "\n## Ratios (torch/tgrad > 1: tgrad is faster)\n\n");
    for (int th = 1; th <= 2; th++) {
        int cnt;
        double g = geomean_ratio(rows, n, th, &cnt);
        if (cnt) fprintf(f, "- %d thread%s: geometric mean %.2fx over %d workloads\n", th, th > 1 ? "s" : "", g, cnt);
    }
    for (int i = 0; i < n; i++)
        if (rows[i].ok && rows[i].torch_ok && rows[i].t_med[rows[i].t_best] < rows[i].med)
            fprintf(f, "- slower than PyTorch: %s%s at %d thread%s (%.2fx)\n", rows[i].workload,
                    rows[i].bf16 ? " bf16" : "", rows[i].threads, rows[i].threads > 1 ? "s" : "",
                    rows[i].t_med[rows[i].t_best] / rows[i].med);
    fprintf(f, "\n## Memory\n\nPeak RSS of each workload's own process (getrusage), MB:\n\n");
    fprintf(f, "| workload | threads | tgrad | tgrad arena per step | PyTorch d2l | PyTorch nn "
               "|\n|---|---|---|---|---|---|\n");
    for (int i = 0; i < n; i++)
        if (rows[i].ok && strncmp(rows[i].workload, "gemm", 4) != 0) {
            fprintf(f, "| %s%s | %d | %.0f | %.1f |", rows[i].workload, rows[i].bf16 ? " bf16" : "", rows[i].threads,
                    rows[i].rss, rows[i].arena);
            if (rows[i].torch_ok && rows[i].t_n == 1)
                fprintf(f, " %.0f (nanoGPT) | - |\n", rows[i].t_rss[0]);
            else if (rows[i].torch_ok)
                fprintf(f, " %.0f | %.0f |\n", rows[i].t_rss[0], rows[i].t_rss[1]);
            else
                fprintf(f, " n/a | n/a |\n");
        }
    fprintf(f, "\nThe PyTorch process includes the interpreter and libtorch (about 230 MB before any work).\n");
    for (int i = 0; i < n; i++)
        if (strcmp(rows[i].workload, "mid") == 0 && rows[i].ok && rows[i].torch_ok) {
            const row *r = &rows[i];
            double lo = fmin(r->t_rss[0], r->t_rss[1]);
            fprintf(f,
                    "\nTarget, mid at %d thread%s (tgrad's peak RSS no higher than PyTorch's): tgrad %.0f MB, "
                    "PyTorch %.0f MB (d2l) / %.0f MB (nn): %s\n",
                    r->threads, r->threads > 1 ? "s" : "", r->rss, r->t_rss[0], r->t_rss[1],
                    r->rss <= lo                               ? "met"
                    : r->rss <= fmax(r->t_rss[0], r->t_rss[1]) ? "met against one variant only"
                                                               : "NOT met");
        }
    /* The bf16 rows against their fp32 twins (issue 24's goals: gpt-small
     * bf16 >= 1.6x tgrad fp32, >= 2x PyTorch autocast, peak RSS below it). */
    bool bf16_title = false;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < n && rows[i].bf16 && rows[i].ok && is_gpt(rows[i].workload); k++)
            if (!rows[k].bf16 && rows[k].ok && rows[k].threads == rows[i].threads &&
                strcmp(rows[k].workload, rows[i].workload) == 0) {
                if (!bf16_title)
                    fprintf(f, "\n## bf16 products against float\n\n| workload | threads | tgrad fp32 / tgrad bf16 | "
                               "PyTorch autocast bf16 / tgrad bf16 | peak RSS MB tgrad bf16 / autocast |\n"
                               "|---|---|---|---|---|\n");
                bf16_title = true;
                const row *b = &rows[i];
                char pt[32] = "n/a", mem[32] = "n/a";
                if (b->torch_ok) {
                    snprintf(pt, sizeof pt, "%.2fx", b->t_med[0] / b->med);
                    snprintf(mem, sizeof mem, "%.0f / %.0f", b->rss, b->t_rss[0]);
                }
                fprintf(f, "| %s | %d | %.2fx | %s | %s |\n", b->workload, b->threads, rows[k].med / b->med, pt, mem);
            }
    fprintf(f, "\n## Determinism\n\n`build/bin/bench --check-determinism`: %s\n", determinism);
    fprintf(f,
            "\n## Commands\n\n```sh\nmake bench     # sh tools/install-bench-deps.sh; build/bin/bench --markdown %s\n"
            "# one measurement of the table:\nbuild/bin/bench --workload WORKLOAD --threads N\n"
            "env -u OPENBLAS_CORETYPE OMP_NUM_THREADS=N OPENBLAS_NUM_THREADS=N MKL_NUM_THREADS=N \\\n"
            "    %s %s --workload WORKLOAD --threads N --variant d2l|nn\n"
            "# (plus OMP_WAIT_POLICY=passive at N=2)\n```\n",
            path, e->python, e->script);
    if (tg_atomic_commit(&af, "bench") != 0) {
        fprintf(stderr, "bench: %s\n", tg_last_error());
        return -1;
    }
    printf("wrote %s\n", path);
    return 0;
}

static bool selected(const char *only, const char *workload) {
    if (!only) return true;
    size_t len = strlen(workload);
    for (const char *p = only; (p = strstr(p, workload)) != NULL; p += len)
        if ((p == only || p[-1] == ',') && (p[len] == ',' || p[len] == 0)) return true;
    return false;
}

static int run_all(env_info *e, const char *markdown) {
    char started[64];
    time_t t0 = time(NULL);
    strftime(started, sizeof started, "%Y-%m-%d %H:%M %Z", localtime(&t0));
    e->peak = fma_peak_gflops();
    enum { NW = sizeof ALL_WORKLOADS / sizeof ALL_WORKLOADS[0], NB = sizeof BF16_WORKLOADS / sizeof BF16_WORKLOADS[0] };
    row rows[(NW + NB) * 2];
    int n = 0;
    for (int w = 0; w < (int)(NW + NB); w++)
        for (int th = 1; th <= 2 && selected(e->only, w < (int)NW ? ALL_WORKLOADS[w] : BF16_WORKLOADS[w - NW]);
             th++, n++) {
            bool bf16 = w >= (int)NW;
            row rd[MAX_ROUNDS] = {{0}};
            fprintf(stderr, "bench: %-9s%s %d thread%s:", bf16 ? BF16_WORKLOADS[w - NW] : ALL_WORKLOADS[w],
                    bf16 ? " bf16" : "", th, th > 1 ? "s" : " ");
            /* tgrad and PyTorch alternately: a noisy minute of the shared
             * machine lands on one round of one side, not on a whole row */
            for (int k = 0; k < e->rounds; k++) {
                rd[k] =
                    (row){.workload = bf16 ? BF16_WORKLOADS[w - NW] : ALL_WORKLOADS[w], .threads = th, .bf16 = bf16};
                measure_tgrad(e, &rd[k]);
                measure_torch(e, &rd[k]);
                fprintf(stderr, " %.2f/%.2f", rd[k].med, rd[k].torch_ok ? rd[k].t_med[rd[k].t_best] : NAN);
            }
            rows[n] = combine_rounds(rd, e->rounds);
            fprintf(stderr, " ms (tgrad/PyTorch by round)\n");
        }
    double peak = fmax(e->peak, fma_peak_gflops());
    bf16_peak_gflops();
    printf("FMA peak: %.1f GFLOP/s per core (single precision, best of all measurements; 256-bit %.1f, 512-bit %.1f)\n",
           peak, g_peak256, g_peak512);
    if (g_peak_bf16 > 0) printf("bf16 dot-product peak (vdpbf16ps): %.1f GFLOP/s per core\n", g_peak_bf16);
    if (!e->torch) printf("note: PyTorch could not be run (%s %s): tgrad's numbers alone\n", e->python, e->script);
    char determinism[512];
    check_determinism(determinism, sizeof determinism);
    printf("\n");
    print_table(stdout, rows, n, peak);
    printf("\ndeterminism: %s\n", determinism);
    for (int th = 1; th <= 2; th++) {
        int cnt;
        double g = geomean_ratio(rows, n, th, &cnt);
        if (cnt) printf("torch/tgrad at %d thread%s: geometric mean %.2fx\n", th, th > 1 ? "s" : "", g);
    }
    if (markdown && write_markdown(markdown, rows, n, peak, e, determinism, started) != 0) return 1;
    for (int i = 0; i < n; i++)
        if (!rows[i].ok) return 1;
    return 0;
}

int main(int argc, char **argv) {
    const char *name = NULL, *markdown = NULL, *precision = "fp32";
    int threads = 1, steps = 0, warmup = -1;
    bool determinism = false, no_torch = false;
    env_info e = {.python = "/usr/bin/python3",
                  .script = "bench/torch_ref.py",
                  .self = "/proc/self/exe",
                  .torch = true,
                  .rounds = 3};
    cli_opt opts[] = {
        {"workload", CLI_STR, &name,
         "run one workload (toy, mid, gpt-mini, gpt-small, gpt2, attn-T, gemm-n), tgrad only", 0, 0},
        {"profile", CLI_FLAG, &g_profile, "with --workload: print the profiler's table of the timed steps", 0, 0},
        {"batch", CLI_INT, &g_batch, "gpt2: the batch (0: the largest of 8, 4, 2, 1 that fits memory)", 0, 64},
        {"seq", CLI_INT, &g_seq, "gpt2: the sequence length T (0: 1024)", 0, 16384},
        {"threads", CLI_INT, &threads, "threads for --workload", 1, 1024},
        {"precision", CLI_STR, &precision, "products for --workload: fp32, or bf16 (bfloat16, float sums)", 0, 0},
        {"steps", CLI_INT, &steps, "timed steps (0: the workload's default, >= 10)", 0, MAX_STEPS},
        {"warmup", CLI_INT, &warmup, "warm-up steps (-1: the workload's default)", -1, MAX_STEPS},
        {"markdown", CLI_STR, &markdown, "also write the full comparison to this file", 0, 0},
        {"check-determinism", CLI_FLAG, &determinism, "100 toy steps at 1 and 2 threads and again: PASS/FAIL", 0, 0},
        {"only", CLI_STR, &e.only, "comma-separated workloads for the full comparison (default all)", 0, 0},
        {"rounds", CLI_INT, &e.rounds,
         "full comparison: tgrad and PyTorch measured alternately this many times (a slow workload's default steps "
         "shared among them); the table has the median of the rounds' medians",
         1, MAX_ROUNDS},
        {"no-torch", CLI_FLAG, &no_torch, "skip PyTorch in the full comparison", 0, 0},
        {"python", CLI_STR, &e.python, "Python with torch, for the comparison", 0, 0},
        {"torch-script", CLI_STR, &e.script, "the PyTorch side of the comparison", 0, 0},
        {"text", CLI_STR, &gpt_text, "gpt workloads: the text whose bytes they train on", 0, 0},
        {"save-init", CLI_STR, &gpt_save_init, "gpt workloads: write the initial weights to this safetensors file", 0,
         0},
        {"losses", CLI_STR, &gpt_losses, "gpt workloads: write every step's loss (warm-up too) to this file", 0, 0},
    };
    const int nopt = (int)(sizeof opts / sizeof opts[0]);
    const char *about = "Times tgrad training steps; with no --workload, every workload at 1 and 2 threads\n"
                        "against PyTorch (run as a subprocess), as one table.";
    cli_parse(argc, argv, "[options]", about, opts, nopt, NULL, 0);
    int size;
    if (strcmp(precision, "fp32") != 0 && strcmp(precision, "bf16") != 0)
        return cli_usage_error(argv[0], "[options]", about, opts, nopt, "--precision: fp32 or bf16, not '%s'",
                               precision);
    g_bf16 = strcmp(precision, "bf16") == 0;
    if (name && !parse_workload(name, &size)) {
        return cli_usage_error(argv[0], "[options]", about, opts, nopt, "unknown workload '%s'", name);
    }
    /* Every name in --only must be a workload: a typo would give an empty table. */
    for (const char *p = e.only; p && *p;) {
        size_t len = strcspn(p, ",");
        bool known = false;
        for (size_t w = 0; w < sizeof ALL_WORKLOADS / sizeof ALL_WORKLOADS[0]; w++)
            known |= strlen(ALL_WORKLOADS[w]) == len && strncmp(ALL_WORKLOADS[w], p, len) == 0;
        if (!known) {
            return cli_usage_error(argv[0], "[options]", about, opts, nopt, "--only: unknown workload '%.*s'", (int)len,
                                   p);
        }
        p += len + (p[len] == ',');
    }
    /* The full comparison's flags mean nothing to one workload or the
     * determinism check: refused rather than ignored. */
    if (!name && cli_given(opts, nopt, "profile"))
        return cli_usage_error(argv[0], "[options]", about, opts, nopt, "--profile needs --workload");
    if ((!name || strcmp(name, "gpt2") != 0) && (cli_given(opts, nopt, "batch") || cli_given(opts, nopt, "seq")))
        return cli_usage_error(argv[0], "[options]", about, opts, nopt, "--batch and --seq are for --workload gpt2");
    static const char *const comparison[] = {"markdown", "only", "no-torch", "python", "torch-script"};
    for (size_t k = 0; (name || determinism) && k < sizeof comparison / sizeof *comparison; k++)
        if (cli_given(opts, nopt, comparison[k]))
            return cli_usage_error(argv[0], "[options]", about, opts, nopt, "--%s is for the full comparison, not %s",
                                   comparison[k], name ? "--workload" : "--check-determinism");
    /* The gpt workloads' flags mean nothing to the others: refused too. */
    static const char *const gpt_only[] = {"save-init", "losses", "text"};
    for (size_t k = 0; name && !is_gpt(name) && k < sizeof gpt_only / sizeof *gpt_only; k++)
        if (cli_given(opts, nopt, gpt_only[k]))
            return cli_usage_error(argv[0], "[options]", about, opts, nopt, "--%s is for the gpt workloads, not %s",
                                   gpt_only[k], name);
    if (determinism) {
        char verdict[512];
        int rc = check_determinism(verdict, sizeof verdict);
        printf("%s\n", verdict);
        return rc;
    }
    if (name) {
        int got = tg_set_num_threads(threads);
        if (got < threads) fprintf(stderr, "bench: --threads %d capped at %d (the CPUs available)\n", threads, got);
        return run_workload(name, threads, steps, warmup);
    }
    e.steps = steps;
    e.warmup = warmup;
    e.torch = !no_torch && access(e.script, R_OK) == 0 && access(e.python, X_OK) == 0;
    return run_all(&e, markdown);
}
