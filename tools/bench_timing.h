/* Timing training steps, shared by bench (tools/bench.c: the encoder
 * workloads, attention, GEMM) and bench_gpt (tools/bench_gpt.c: nanoGPT's
 * GPT): a workload is a context with an untimed prepare (make the next
 * batch) and a timed step; its numbers are the median (with min and max) of
 * the timed steps after warm-up, the arena memory one step takes, the
 * program's peak resident set, printed as the key=value lines that
 * bench/compare.py and the bench scripts read (the last: ms_per_step=).
 * Header-only: each of the two programs includes it once. */
#ifndef TG_BENCH_TIMING_H
#define TG_BENCH_TIMING_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "tgrad.h"

enum { MAX_STEPS = 100000, MAX_ROUNDS = 9 };
static bool g_profile, g_bf16; /* --profile; --precision bf16 (tg_set_precision) */

/* The flags of one workload that the three programs share, as the rows of
 * their cli_opt tables (RUN_FLAGS(r)) and checked alike (run_flags_check). */
typedef struct {
    const char *precision;
    int threads, steps, warmup, rounds;
} run_flags;
#define RUN_FLAGS_DEFAULT \
    { "fp32", 1, 0, -1, 1 }
#define RUN_FLAGS(r)                                                                                                   \
    {"threads", CLI_INT, &(r).threads, "threads for --workload", 1, 1024},                                             \
        {"precision", CLI_STR, &(r).precision, "products for --workload: fp32, or bf16 (bfloat16, float sums)", 0, 0}, \
        {"steps", CLI_INT, &(r).steps, "timed steps (0: the workload's default, >= 10)", 0, MAX_STEPS},                \
        {"warmup", CLI_INT, &(r).warmup, "warm-up steps (-1: the workload's default)", -1, MAX_STEPS},                 \
        {"profile", CLI_FLAG, &g_profile, "with --workload: print the profiler's table of the timed steps", 0, 0}, {   \
        "rounds", CLI_INT, &(r).rounds,                                                                                \
            "full comparison: tgrad and PyTorch measured alternately this many times (a slow workload's default "      \
            "steps "                                                                                                   \
            "shared among them); the table has the median of the rounds' medians",                                     \
            1, MAX_ROUNDS                                                                                              \
    }

/* --precision is fp32 or bf16 (g_bf16 set): 0, or 2 with the usage error. */
static inline int run_flags_check(const run_flags *r, char **argv, const char *about, const cli_opt *o, int n) {
    g_bf16 = strcmp(r->precision, "bf16") == 0;
    if (g_bf16 || strcmp(r->precision, "fp32") == 0) return 0;
    return cli_usage_error(argv[0], "[options]", about, o, n, "--precision: fp32 or bf16, not '%s'", r->precision);
}

/* The pool started with --threads threads, capped at the CPUs (said on stderr). */
static inline void start_threads(int threads) {
    int got = tg_set_num_threads(threads);
    if (got < threads) fprintf(stderr, "bench: --threads %d capped at %d (the CPUs available)\n", threads, got);
}

static inline double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A line of /proc/self/status in MB: "VmHWM" the peak resident set of this
 * program, "VmRSS" the resident set now. Not getrusage's ru_maxrss, which
 * keeps the parent's peak across exec (a Python parent's 10 MB and more). */
static inline double status_mb(const char *key) {
    char line[256];
    double kb = NAN;
    size_t len = strlen(key);
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, len) == 0 && line[len] == ':') kb = strtod(line + len + 1, NULL);
    if (f) fclose(f);
    return kb / 1024.0;
}

static inline double or0(double x) { return isnan(x) ? 0 : x; } /* a peak not measured, or no such unit */

/* The bf16 products' engine (tensor.h: tg_bf16_engine, chosen by measured
 * rate), printed, and its peak: a bf16 row's "of peak" is against the
 * engine that ran (vdpbf16ps: the library's longer probe, 2 ms trials for
 * 0.5 s, when measure). */
static inline double bf16_engine_peak(bool measure) {
    tg_bf16_engine_info e = tg_bf16_engine();
    printf("bf16_engine=%s engine_gflops=%.2f fma_gflops=%.2f vdp_gflops=%.2f amx_gflops=%.2f\n", e.engine, e.gflops,
           e.fma_gflops, e.vdp_gflops, e.amx_gflops);
    return measure && strcmp(e.engine, "avx512_bf16") == 0 ? tg_bf16_peak_measure(0.5) : e.gflops;
}

/* --precision bf16 switched on (the double build refuses it): 0, or 1 with
 * the reason on stderr. */
static inline int set_precision(const char *prog) {
    if (!g_bf16) return 0;
    tg_clear_error();
    tg_set_precision(TG_PREC_BF16);
    if (tg_get_precision() == TG_PREC_BF16) return 0;
    fprintf(stderr, "%s: --precision bf16: %s\n", prog, tg_last_error());
    return 1;
}

/* A workload's default steps s in one of the full comparison's rounds
 * (--rounds): a slow workload's (fewer than 50) shared among the rounds, at
 * least 5 each; the quick ones keep theirs in every round. */
static inline int round_steps(int s, int rounds) {
    int each = (s + rounds - 1) / rounds;
    return s >= 50 || rounds <= 1 ? s : each < 5 ? 5 : each;
}

typedef struct {
    void *ctx;
    void (*prepare)(void *ctx); /* may be NULL */
    int (*step)(void *ctx);     /* 0 on success */
    double gflop;               /* floating-point work of one step (GEMM flops) */
} workload;

typedef struct {
    double med, min, max; /* ms per step */
    double arena_mb;      /* what the first step took of the arena at its peak */
} timing;

/* Times steps steps after warmup ones (the step opens and closes its own
 * scope); with --profile, the profiler's table of the timed steps. 0, or -1
 * when a step failed (its error recorded). */
static inline int time_workload(const workload *w, int steps, int warmup, timing *out) {
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

/* The key=value lines of a timed workload, the last one ms_per_step=<median>;
 * peak_line (or NULL) after the rates, tokens (> 0: a step's) last but one.
 * rss0: the resident set before the workload was built. */
static inline void print_timing(const char *name, int threads, int steps, int warmup, const workload *w,
                                const timing *t, const char *peak_line, double rss0, double tokens) {
    printf("workload=%s threads=%d steps=%d warmup=%d precision=%s isa=%s\n", name, threads, steps, warmup,
           g_bf16 ? "bf16" : "fp32", tg_isa_name());
    printf("min_ms=%.4f max_ms=%.4f gflop_per_step=%.4f gflops=%.2f\n", t->min, t->max, w->gflop,
           w->gflop / (t->med * 1e-3));
    if (peak_line) printf("%s\n", peak_line);
    printf("arena_step_mb=%.2f rss_peak_mb=%.1f rss_added_mb=%.1f\n", t->arena_mb, status_mb("VmHWM"),
           status_mb("VmHWM") - rss0);
    if (tokens > 0) printf("tokens_per_step=%.0f tokens_per_s=%.1f\n", tokens, tokens / (t->med * 1e-3));
    printf("ms_per_step=%.4f\n", t->med);
}

#endif
