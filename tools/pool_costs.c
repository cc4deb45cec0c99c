/* pool_costs: measures the numbers behind the thread pool's cost model
 * (src/tensor/parallel.h): what one element of each kind of loop costs on
 * one core, and how much work a loop needs before a second thread pays.
 *
 *   build/bin/pool_costs [--threads N] [--reps R]
 *
 * Part 1 times kernels at one thread on 2^18 elements (1 MB, in L2) and
 * prints ns per element: the TG_NS_* constants. Part 2 runs a pass over
 * memory (x = a x + b) of W one-core microseconds on the caller alone and
 * split over N threads (the loop forced parallel, whatever the cost model
 * says), and prints the speed-up for each W: TG_PAR_NS is about the work
 * at which the split starts to pay. Medians of R runs; the machine should
 * be otherwise idle. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "tensor/kernels.h"
#include "tensor/parallel.h"
#include "tgrad.h"

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct {
    tg_real *x, *y, *z;
    int64_t n;
} bufs;

typedef void (*kernel_fn)(const bufs *b);

/* Median over `reps` runs of the mean time of one call, ns. */
static double time_calls(kernel_fn f, const bufs *b, int reps) {
    double *t = malloc(sizeof(double) * (size_t)reps);
    int inner = (int)(2e6 / (double)b->n) + 2;
    for (int r = 0; r < reps; r++) {
        double a = now_ns();
        for (int i = 0; i < inner; i++) f(b);
        t[r] = (now_ns() - a) / inner;
    }
    qsort(t, (size_t)reps, sizeof(double), cmp_double);
    double m = t[reps / 2];
    free(t);
    return m;
}

static void k_add(const bufs *b) { tg_k_unary(TG_UNARY_ADD_SCALAR, 1, b->x, b->y, b->n); }
static void k_relu_backward(const bufs *b) {
    tg_k_unary_backward(TG_UNARY_RELU, 0, b->x, b->x, b->y, b->z, b->n, true);
}
static void k_scale(const bufs *b) { tg_k_scale(b->y, 1.0001, b->n); }
static void k_gelu_tanh(const bufs *b) { tg_k_unary(TG_UNARY_GELU_TANH, 0, b->x, b->y, b->n); }
static void k_gelu_erf(const bufs *b) { tg_k_unary(TG_UNARY_GELU, 0, b->x, b->y, b->n); }
static void k_exp(const bufs *b) { tg_k_unary(TG_UNARY_EXP, 0, b->x, b->y, b->n); }
static void k_softmax(const bufs *b) { tg_k_softmax_rows(b->x, b->y, b->n / 64, 64); }
static void k_layer_norm(const bufs *b) {
    int64_t rows = b->n / 64; /* gamma, beta: z's first 64; mean, rstd after them */
    tg_k_layer_norm(b->x, b->z, b->z, b->y, b->z + 64, b->z + 64 + rows, rows, 64, (tg_real)1e-5);
}
static void k_adam(const bufs *b) {
    tg_adam_step s = {.b1 = (tg_real)0.9,
                      .b2 = (tg_real)0.999,
                      .eps = (tg_real)1e-8,
                      .decay = (tg_real)0.99999,
                      .step_size = (tg_real)1e-3,
                      .bc2_sqrt = (tg_real)0.03};
    tg_k_adam(&s, b->y, b->z, b->z + b->n, b->x, b->n);
}

/* Part 2's loop: x = a x + b over [begin, end). */
static void axpb_range(void *ctx, int64_t begin, int64_t end, int tid) {
    (void)tid;
    tg_real *x = ctx;
    for (int64_t i = begin; i < end; i++) x[i] = x[i] * (tg_real)0.999 + (tg_real)1e-3;
}
/* Part 2's arithmetic loop: 8 steps of a polynomial per element, no
 * memory traffic to speak of (what exp, GELU and softmax rows are like). */
static void poly_range(void *ctx, int64_t begin, int64_t end, int tid) {
    (void)tid;
    tg_real *x = ctx;
    for (int64_t i = begin; i < end; i++) {
        tg_real v = x[i], p = v;
        for (int s = 0; s < 8; s++) p = p * v + (tg_real)0.5;
        x[i] = v + (tg_real)1e-30 * p;
    }
}
static bool g_forced;
static tg_range_fn g_loop = axpb_range;
static void k_loop(const bufs *b) {
    if (g_forced)
        tg_parallel_for(b->n, true, g_loop, b->x);
    else
        g_loop(b->x, 0, b->n, 0);
}

int main(int argc, char **argv) {
    int threads = 2, reps = 31;
    cli_opt opts[] = {
        {"threads", CLI_INT, &threads, "threads for part 2's split loop", 2, 64},
        {"reps", CLI_INT, &reps, "runs per measurement (the median is printed)", 3, 1001},
    };
    const char *about = "Measures the thread pool's cost model (src/tensor/parallel.h): ns per element of\n"
                        "each kind of loop at one thread, and the work at which a second thread pays.";
    cli_parse(argc, argv, "[options]", about, opts, 2, NULL, 0);

    const int64_t n = 1 << 18;
    bufs b = {malloc(sizeof(tg_real) * (size_t)n), malloc(sizeof(tg_real) * (size_t)n),
              malloc(sizeof(tg_real) * (size_t)(2 * n + 64)), n};
    if (!b.x || !b.y || !b.z) return 1;
    for (int64_t i = 0; i < n; i++) b.x[i] = (tg_real)((i % 97) * 0.01 - 0.4), b.y[i] = 1;
    for (int64_t i = 0; i < 2 * n + 64; i++) b.z[i] = (tg_real)0.5;

    struct {
        const char *name;
        kernel_fn f;
    } kernels[] = {{"add", k_add},
                   {"relu backward", k_relu_backward},
                   {"scale", k_scale},
                   {"layer norm (d 64)", k_layer_norm},
                   {"AdamW", k_adam},
                   {"GELU tanh form", k_gelu_tanh},
                   {"softmax (rows of 64)", k_softmax},
                   {"exp", k_exp},
                   {"GELU erf form", k_gelu_erf}};
    tg_set_num_threads(1);
    printf("kernel costs, 1 thread, %lld elements (ns per element, median of %d):\n", (long long)n, reps);
    for (size_t k = 0; k < sizeof kernels / sizeof kernels[0]; k++)
        printf("  %-22s %6.2f\n", kernels[k].name, time_calls(kernels[k].f, &b, reps) / (double)n);

    /* Part 2: sizes from the one-thread cost of each loop itself. */
    const int64_t big = 1 << 21;
    free(b.x);
    b.x = calloc((size_t)big, sizeof(tg_real));
    if (!b.x) return 1;
    int nth = tg_set_num_threads(threads);
    struct {
        const char *name;
        tg_range_fn fn;
    } loops[] = {{"a pass over memory, x = a x + b", axpb_range}, {"arithmetic, a polynomial per element", poly_range}};
    for (int l = 0; l < 2; l++) {
        g_loop = loops[l].fn;
        g_forced = false;
        b.n = n;
        double per = time_calls(k_loop, &b, reps) / (double)n;
        printf("\nhand-over, %s (%.2f ns per element): 1 thread vs split over %d, median of %d:\n", loops[l].name, per,
               nth, reps);
        printf("  %12s %12s %8s\n", "1 thread us", "split us", "speed-up");
        const double work_us[] = {1, 2, 5, 10, 20, 50, 100, 200};
        for (size_t w = 0; w < sizeof work_us / sizeof work_us[0]; w++) {
            b.n = (int64_t)(work_us[w] * 1e3 / per);
            if (b.n > big) b.n = big;
            if (b.n < 2) b.n = 2;
            g_forced = false;
            double t1 = time_calls(k_loop, &b, reps);
            g_forced = true;
            double t2 = time_calls(k_loop, &b, reps);
            printf("  %12.2f %12.2f %7.2fx\n", t1 / 1e3, t2 / 1e3, t1 / t2);
        }
    }
    printf("\nthe cost model now: TG_PAR_NS %.0f ns a thread (loops under %.0f us run on the caller)\n", TG_PAR_NS,
           2 * TG_PAR_NS / 1e3);
    free(b.x), free(b.y), free(b.z);
    return 0;
}
