/* Internal: the library's thread pool (parallel.c). Not installed.
 *
 * Every parallel loop of tgrad writes disjoint outputs, so results do not
 * depend on how the work is split (bit-identical for any thread count).
 * `parallel` false, a pool of one thread, or a call from inside a job runs
 * the whole job on the calling thread. The public knobs are
 * tg_set_num_threads / tg_get_num_threads in tensor.h. */
#ifndef TG_PARALLEL_H
#define TG_PARALLEL_H

#include <stdbool.h>
#include <stdint.h>

#include "tensor.h"

/* ---- the cost model: who runs a loop -----------------------------------------
 * A loop states its work: nanoseconds of one core, its element count times
 * the cost of one element (TG_NS_* below). The pool gives it one thread
 * for every TG_PAR_NS of that work, up to the pool's count: a loop under
 * 2 TG_PAR_NS runs on the caller alone, where handing half of it to a
 * worker would save less than the hand-over costs (the worker's claim of
 * the job and the cache lines of its share moving between cores). One
 * threshold in time fits every kernel, where the element count it
 * replaced (32768) was 3 us of an add but 120 us of an exp or 160 us of
 * the GELU erf form, which ran on one thread below it.
 *
 * Measured with `build/bin/pool_costs` (medians of 21-31, idle 2-core
 * EPYC VM, float, AVX-512): per element at one thread, add 0.10 ns, relu
 * backward 0.10, scale 0.17, layer norm (d 64) 0.36, AdamW 0.38, GELU tanh
 * form 0.56, softmax of 64-wide rows 1.34, exp 3.6, GELU erf form 4.8.
 * The hand-over, a loop of W microseconds at one thread split over 2:
 *   W                      1      2      5     10     20     50    100
 *   pass over memory    1.01x  1.26x  1.49x  1.56x  1.33x  1.58x  1.59x
 *   polynomial per elt  1.05x  1.32x  1.45x  1.53x  1.45x  1.63x  1.65x
 * so a split pays from about 2 us of work: TG_PAR_NS 1 us a thread. At
 * the workload level the threshold hardly shows: toy and gpt-mini at 2
 * threads ran alike with 10 us and with 1 us (medians of 5, interleaved). */
#define TG_PAR_NS     1000.0
#define TG_NS_STREAM  0.15 /* one pass reading and writing memory: add, mul, relu, copy, sum */
#define TG_NS_POLY    0.5  /* a short polynomial per element: GELU (tanh form), layer norm, AdamW */
#define TG_NS_ROW_EXP 1.3  /* a softmax row: max, vector exp, sum, scale */
#define TG_NS_LIBM    4.0  /* a libm call per element: exp, log, tanh, erf, pow */
/* Threads the pool would give a loop of `ns` one-core nanoseconds: 1 below
 * 2 TG_PAR_NS, at most tg_get_num_threads(). */
int tg_parallel_threads_for(double ns);

/* fn(ctx, begin, end, tid) over [begin, end) of [0, n); tid in [0, threads). */
typedef void (*tg_range_fn)(void *ctx, int64_t begin, int64_t end, int tid);
/* fn(ctx, tid, nth) once on each of nth threads. */
typedef void (*tg_team_fn)(void *ctx, int tid, int nth);

/* [0, n) cut into one contiguous range per thread (OpenMP's schedule(static)). */
void tg_parallel_for(int64_t n, bool parallel, tg_range_fn fn, void *ctx);
/* The same on tg_parallel_threads_for(ns) threads: the cost model above. */
void tg_parallel_for_ns(int64_t n, double ns, tg_range_fn fn, void *ctx);
/* Tasks 0..n-1 handed out one at a time (schedule(dynamic, 1)); fn gets
 * ranges [i, i+1), or [0, n) when run serially. */
void tg_parallel_tasks(int64_t n, bool parallel, tg_range_fn fn, void *ctx);
/* The same on at most `threads` threads (tid < threads): for a caller that
 * sized per-thread buffers by tg_get_num_threads() before the job, which
 * another thread's tg_set_num_threads may raise meanwhile. */
void tg_parallel_tasks_at_most(int64_t n, int threads, tg_range_fn fn, void *ctx);
/* fn on every thread of the pool (an OpenMP parallel region); inside it,
 * tg_parallel_barrier() waits for all of them. */
void tg_parallel_team(bool parallel, tg_team_fn fn, void *ctx);
void tg_parallel_barrier(void);
/* Row-wise loops (softmax family, sparsemax, cross-entropy): what a row's
 * forward or backward reads, one struct for all of them so that each op
 * states only its row formula. Unused fields stay zero. */
typedef struct {
    const tg_tensor *x, *y; /* input, output */
    tg_tensor *gx;          /* the input's gradient (backward) */
    const tg_real *g;       /* the output's gradient (backward) */
    const int *lim;         /* per row: keys visible (masked ops), or a target */
    const void *state;      /* the op's saved state */
    tg_real *scratch;       /* one row of scratch per row */
    tg_real scale;
    int64_t n;  /* row length */
    bool fresh; /* gx is fresh: write it, do not add (tg_grad_begin) */
} tg_rows_ctx;
/* row(c, r) for every row r of [0, rows), split among threads when parallel. */
void tg_parallel_rows(int64_t rows, bool parallel, void (*row)(const tg_rows_ctx *c, int64_t r), const tg_rows_ctx *c);
/* The same on tg_parallel_threads_for(ns) threads. */
void tg_parallel_rows_ns(int64_t rows, double ns, void (*row)(const tg_rows_ctx *c, int64_t r), const tg_rows_ctx *c);

/* The calling thread's id in the pool: 0 for the caller and outside jobs. */
int tg_thread_id(void);
/* True inside a job (on a worker, or the caller running its share), where
 * another parallel call would run serially. */
bool tg_in_parallel(void);

#endif
