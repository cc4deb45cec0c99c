/* bench_gpt: how fast tgrad trains nanoGPT's GPT (src/nn/decoder.h) on the
 * CPU; bench runs it for its gpt workloads (`bench --workload gpt-mini` is
 * `bench_gpt --workload gpt-mini`), and bench/gpt_interop.py,
 * bench/bf16_loss_curves.py and bench/lm_torch_ref.py use its initial
 * weights and losses.
 *
 * Workloads (the same in bench/torch_ref.py):
 *   gpt-mini   V 256, T 64, 2 layers, 4 heads, d 128, batch 32; gpt-small:
 *              V 256, T 128, 4 layers, 8 heads, d 256, batch 16. Byte windows
 *              of a text file (--text) at starts s = (w * 2654435761) mod
 *              (n - T - 1) for window w = step * B + b, so PyTorch reads the
 *              same ones; AdamW lr 3e-4, betas (0.9, 0.95), weight decay 0.1
 *              on matrices, no dropout. One step = zero_grad + forward + loss
 *              + backward + AdamW. --save-init FILE writes the initial weights
 *              (nanoGPT names) and --losses FILE every step's loss.
 *   gpt2       the same GPT at GPT-2 small's size: V 50257 (GPT-2's tokens;
 *              the byte windows use ids < 256, which changes no cost), T 1024,
 *              12 layers, 12 heads, d 768, batch chosen for memory (the
 *              largest of 8, 4, 2, 1 whose estimate fits half the memory
 *              available; --batch, --seq override B and T). Reports tokens/s
 *              and peak RSS; 2 timed steps by default (one step is tens of
 *              seconds on 2 cores). Not in the full comparison: run it alone,
 *              with bench/torch_ref.py --workload gpt2 beside it.
 * A step's GEMM flops are tg_decoder_flops'; the timing and the lines
 * printed are bench's (tools/bench_timing.h).
 *
 *   build/bin/bench_gpt --workload gpt-small --threads 2 [--precision bf16] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_timing.h"
#include "cli.h"
#include "tgrad.h"

/* gpt2's activation memory per token of a sample (gpt2_bytes). */
#define GPT2_SAMPLE_BYTES_PER_TOKEN 1.7e6

/* ---- nanoGPT's GPT (gpt-mini, gpt-small, gpt2) ---------------------------------- */
typedef struct {
    const char *name;
    int V, T, B, L, heads, d;
    int steps, warmup; /* by default: >= 10 timed steps, but gpt2's tens of seconds each */
} gpt_shape;
static const gpt_shape SHAPES[] = {
    {"gpt-mini", 256, 64, 32, 2, 4, 128, 30, 5},
    {"gpt-small", 256, 128, 16, 4, 8, 256, 20, 3},
    {"gpt2", 50257, 1024, 0, 12, 12, 768, 2, 1}, /* B: gpt2_batch */
};
static int g_batch, g_seq; /* --batch, --seq: gpt2's B and T (0: chosen) */

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

/* Runs one workload and prints bench's key=value lines (bench_timing.h). */
static int run_gpt(gpt_shape s, const run_flags *r) {
    int steps = r->steps > 0 ? r->steps : round_steps(s.steps, r->rounds),
        warmup = r->warmup < 0 ? s.warmup : r->warmup;
    if (set_precision("bench")) return 1;
    if (s.B == 0) {
        if (g_seq) s.T = g_seq;
        s.B = g_batch ? g_batch : gpt2_batch(s.T);
        printf("gpt2: B %d, T %d (estimated %.1f GB; %.1f GB available)\n", s.B, s.T, gpt2_bytes(s.B, s.T) * 1e-9,
               mem_available_bytes() * 1e-9);
    }
    double rss0 = status_mb("VmRSS");
    tg_decoder_config cfg = tg_decoder_config_default(s.V, s.T, s.L, s.heads, s.d);
    gpt_bench g;
    workload w = {&g, gpt_prepare, gpt_step, tg_decoder_flops(&cfg, s.B, s.T) * 1e-9};
    timing t = {0};
    if (g_bf16) bf16_engine_peak(false); /* says which engine runs the products */
    int rc = gpt_new(&g, s) == 0 ? time_workload(&w, steps, warmup, &t) : -1;
    gpt_free(&g);
    if (rc != 0) {
        fprintf(stderr, "bench: %s: %s\n", s.name, tg_last_error() ? tg_last_error() : "failed");
        return 1;
    }
    print_timing(s.name, r->threads, steps, warmup, &w, &t, NULL, rss0, (double)s.B * s.T);
    tg_release_all();
    return 0;
}

int main(int argc, char **argv) {
    const char *name = "gpt-mini";
    run_flags r = RUN_FLAGS_DEFAULT;
    cli_opt opts[] = {
        {"workload", CLI_STR, &name, "gpt-mini, gpt-small or gpt2", 0, 0},
        RUN_FLAGS(r),
        {"batch", CLI_INT, &g_batch, "gpt2: the batch (0: the largest of 8, 4, 2, 1 that fits memory)", 0, 64},
        {"seq", CLI_INT, &g_seq, "gpt2: the sequence length T (0: 1024)", 0, 16384},
        {"text", CLI_STR, &gpt_text, "the text whose bytes they train on", 0, 0},
        {"save-init", CLI_STR, &gpt_save_init, "write the initial weights to this safetensors file", 0, 0},
        {"losses", CLI_STR, &gpt_losses, "write every step's loss (warm-up too) to this file", 0, 0},
    };
    const int nopt = (int)(sizeof opts / sizeof opts[0]);
    const char *about = "Times training steps of nanoGPT's GPT on a text's byte windows.";
    cli_parse(argc, argv, "[options]", about, opts, nopt, NULL, 0);
    if (run_flags_check(&r, argv, about, opts, nopt)) return 2;
    int k = 0;
    while (k < 3 && strcmp(SHAPES[k].name, name) != 0) k++;
    if (k == 3) return cli_usage_error(argv[0], "[options]", about, opts, nopt, "unknown workload '%s'", name);
    if (SHAPES[k].B != 0 && (cli_given(opts, nopt, "batch") || cli_given(opts, nopt, "seq")))
        return cli_usage_error(argv[0], "[options]", about, opts, nopt, "--batch and --seq are for --workload gpt2");
    start_threads(r.threads);
    return run_gpt(SHAPES[k], &r);
}
