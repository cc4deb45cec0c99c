/* bench_ops: how fast tgrad runs one attention layer and one GEMM on the
 * CPU, and the core's peaks they are shares of; bench runs it for its attn-T
 * and gemm-n workloads (`bench --workload gemm-1024` is `bench_ops
 * --workload gemm-1024`), and bench/compare.py for --peaks.
 *
 * Workloads (the same in bench/torch_ref.py):
 *   attn-T     one multi-head self-attention layer (d 64, 4 heads, batch 1,
 *              dropout 0.1) on a [1, T, 64] input: forward and backward of
 *              the sum of its output; also the arena memory one step adds.
 *   gemm-n     C = A B for n x n floats, in GFLOP/s and as a fraction of
 *              the core's peak, measured here: the FMA peak, or the bf16
 *              products' engine's. --precision bf16: A and B stored as
 *              bf16 (torch_ref.py's side multiplies bf16 tensors too), C
 *              float, by tg_k_gemm_bf16_mixed (the library's kernel, so
 *              this program links the internal library).
 * The timing and the lines printed are bench's (tools/bench_timing.h).
 *
 *   build/bin/bench_ops --workload attn-4096 --threads 2
 *   build/bin/bench_ops --peaks   the FMA peak (both widths) and vdpbf16ps' */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_timing.h"
#include "cli.h"
#include "tensor/half.h"
#include "tensor/kernels.h"
#include "tgrad.h"

/* ---- the core's peaks (tensor.h: tg_fma_peak_measure, tg_bf16_peak_measure:
 * the library's probes, 2 ms trials, the best one counts) --------------------- */
/* --peaks: what the full comparison's "of peak" is against, measured at its
 * start and end (1 s over both FMA widths, 0.5 s of vdpbf16ps). */
static int print_peaks(void) {
    tg_fma_peak p = tg_fma_peak_measure(1.0);
    printf("isa=%s peak_gflops_per_core=%.2f peak256=%.2f peak512=%.2f peak_bf16=%.2f\n", tg_isa_name(), or0(p.gflops),
           or0(p.gflops256), or0(p.gflops512), or0(tg_bf16_peak_measure(0.5)));
    return 0;
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
    uint16_t *A16, *B16; /* --precision bf16: A and B rounded to bf16, the operands */
} gemm_bench;

static int gemm_step(void *ctx) {
    gemm_bench *g = ctx;
    if (g_bf16)
        tg_k_gemm_bf16_mixed(false, false, g->n, g->n, g->n, 1, g->A16, true, g->n, g->B16, true, g->n, 0, g->C->data,
                             g->n, NULL);
    else
        tg_k_gemm(false, false, g->n, g->n, g->n, 1, g->A->data, g->n, g->B->data, g->n, 0, g->C->data, g->n);
    return 0;
}

/* x as bf16 (round to nearest even, as torch's .bfloat16()); NULL when out of memory. */
static uint16_t *to_bf16(const tg_tensor *x) {
    uint16_t *h = x ? malloc((size_t)x->size * sizeof *h) : NULL;
    for (int64_t i = 0; h && i < x->size; i++) h[i] = tg__bf16_from_float((float)x->data[i]);
    return h;
}

/* Runs attn-T or gemm-n and prints bench's key=value lines (bench_timing.h),
 * with a gemm's peak; the default steps: >= 10 timed, more for cheap ones
 * (in one of the full comparison's rounds: round_steps). */
static int run_op(const char *name, bool gemm, int n, const run_flags *r) {
    int steps = r->steps > 0 ? r->steps : round_steps(gemm ? (n <= 512 ? 50 : 10) : n <= 1024 ? 20 : 10, r->rounds);
    int warmup = r->warmup >= 0 ? r->warmup : gemm ? (n <= 512 ? 5 : 1) : n <= 1024 ? 3 : n >= 4096 ? 1 : 2;
    int threads = r->threads;
    if (set_precision("bench")) return 1;
    double rss0 = status_mb("VmRSS");
    char peak_line[160] = "";
    timing t = {0};
    workload w;
    int rc;
    if (gemm) {
        tg_fma_peak p = {NAN, NAN, NAN};
        if (!g_bf16) p = tg_fma_peak_measure(1.0);
        double bf16 = g_bf16 ? or0(bf16_engine_peak(true)) : 0, peak = g_bf16 ? bf16 : p.gflops;
        gemm_bench g = {n, NULL, NULL, NULL, NULL, NULL};
        tg_rng rng = tg_rng_new(1);
        g.A = tg_randn(TG_SHAPE(n, n), &rng);
        g.B = tg_randn(TG_SHAPE(n, n), &rng);
        g.C = tg_zeros(TG_SHAPE(n, n));
        if (g_bf16) g.A16 = to_bf16(g.A), g.B16 = to_bf16(g.B);
        w = (workload){&g, NULL, gemm_step, 2.0 * n * n * (double)n * 1e-9};
        rc = g.C && (!g_bf16 || (g.A16 && g.B16)) ? time_workload(&w, steps, warmup, &t) : -1;
        tg_free(g.A), tg_free(g.B), tg_free(g.C), free(g.A16), free(g.B16);
        double gflops = w.gflop / (t.med * 1e-3);
        if (!isnan(peak))
            snprintf(peak_line, sizeof peak_line,
                     "peak_gflops_per_core=%.2f peak_fraction=%.4f peak256=%.2f peak512=%.2f peak_bf16=%.2f", peak,
                     gflops / (threads * peak), or0(p.gflops256), or0(p.gflops512), bf16);
    } else {
        attn_bench a = {0};
        w = (workload){&a, NULL, attn_step, attn_gflop(n)};
        rc = attn_new(&a, n) == 0 ? time_workload(&w, steps, warmup, &t) : -1;
        attn_free(&a);
    }
    if (rc != 0) {
        fprintf(stderr, "bench: %s: %s\n", name, tg_last_error() ? tg_last_error() : "failed");
        return 1;
    }
    print_timing(name, threads, steps, warmup, &w, &t, peak_line[0] ? peak_line : NULL, rss0, 0);
    tg_release_all();
    return 0;
}

int main(int argc, char **argv) {
    const char *name = NULL;
    run_flags r = RUN_FLAGS_DEFAULT;
    bool peaks = false;
    cli_opt opts[] = {
        {"workload", CLI_STR, &name, "attn-T (T tokens) or gemm-n (n x n; --precision bf16: A, B stored as bf16)", 0,
         0},
        RUN_FLAGS(r),
        {"peaks", CLI_FLAG, &peaks, "measure the core's FMA and bf16 dot-product peaks (GFLOP/s) instead", 0, 0},
    };
    const int nopt = (int)(sizeof opts / sizeof opts[0]);
    const char *about = "Times one attention layer or one GEMM, or measures the core's peaks.";
    cli_parse(argc, argv, "[options]", about, opts, nopt, NULL, 0);
    if (run_flags_check(&r, argv, about, opts, nopt)) return 2;
    if (peaks)
        return name ? cli_usage_error(argv[0], "[options]", about, opts, nopt, "--peaks or --workload") : print_peaks();
    /* "attn-1024": the kind and its size, 1 to 65536 */
    bool gemm = name && strncmp(name, "gemm-", 5) == 0;
    char *end = NULL;
    long n = name && (gemm || strncmp(name, "attn-", 5) == 0) ? strtol(name + 5, &end, 10) : 0;
    if (!end || *end || n < 1 || n > 65536)
        return cli_usage_error(argv[0], "[options]", about, opts, nopt, "unknown workload '%s'", name ? name : "");
    start_threads(r.threads);
    return run_op(name, gemm, (int)n, &r);
}
