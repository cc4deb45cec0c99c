/** @file
 * The profiler: where a program's time goes, per op and direction, like
 * torch.profiler's key_averages() table.
 *
 *   tg_profile_begin();                 // or run any program with TG_PROFILE=1
 *   ... training steps ...
 *   tg_profile_end();
 *   tg_profile_print(stdout, steps);    // one row per (op, direction), largest first
 *
 * What is recorded, on the thread that called tg_profile_begin (the one that
 * runs the tape; other threads' calls are not counted):
 * - forward: each op's call, from its input checks to its node on the tape
 *   (its output's allocation and kernel), also with grad mode off;
 * - backward: each node's backward rule, and the walk itself
 *   ("backward walk": marking and seeding);
 * - optimizer, data, checkpoint: the library's regions (tg_optim_step,
 *   tg_optim_zero_grad, a token batch, a checkpoint's save or load), and any region a program
 *   opens with tg_profile_region_begin/end.
 * Time is self time: a region's row excludes the ops and regions inside it,
 * so the rows add up to the profiled wall time; what falls in no op and no
 * region (a program's own code) is the row "(other)".
 *
 * Per row: calls, wall time, and from the thread pool (tensor/parallel.c):
 * the wall time spent inside jobs split over 2 or more threads (the rest of
 * the row's time ran on one thread: "serial"), the threads' summed busy time
 * in those jobs, the most threads a job used, and the time the calling
 * thread waited for the others at a job's end (the pool's hand-over and
 * imbalance). Flops and bytes are estimates from the shapes (a product
 * 2 M N K; other ops one flop per output element; bytes: inputs read and
 * output written once, twice that for a backward), enough for GFLOP/s and
 * GB/s columns, not a hardware counter.
 *
 * Off (the default) costs one predictable branch per op, backward node and
 * pool job. Results never depend on it: it only reads clocks. */
#ifndef TG_PROFILE_H
#define TG_PROFILE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/** Where a row's time was spent: an op's forward or backward, the
 * optimizer's step, data (token batches), checkpoints, or other. */
typedef enum {
    TG_PROF_FORWARD,
    TG_PROF_BACKWARD,
    TG_PROF_OPTIMIZER,
    TG_PROF_DATA,
    TG_PROF_CHECKPOINT,
    TG_PROF_OTHER, /* a program's own regions, and "(other)" */
    TG_PROF_NDIRS
} tg_prof_dir;

/** One row of the profile: one (name, direction). Times in nanoseconds. */
typedef struct {
    const char *name; /**< the op's name (tg_op.name) or the region's */
    tg_prof_dir dir;  /**< forward, backward, optimizer, data, checkpoint or other */
    int64_t calls;    /**< times it ran */
    double wall_ns;   /**< self time on the profiled thread */
    double par_ns;    /**< of which inside pool jobs on >= 2 threads; wall - par ran on one thread */
    double busy_ns;   /**< all threads' time running shares of those jobs */
    double wait_ns;   /**< the profiled thread waiting for the other threads at a job's end */
    int64_t jobs;     /**< pool jobs started (parallel or not) */
    int64_t par_jobs; /**< of which split over >= 2 threads */
    int max_threads;  /**< most threads one job used (1: none was split) */
    double flops;     /**< estimated from shapes */
    double bytes;     /**< estimated from shapes: moved to and from memory */
} tg_profile_entry;

/** Clears the profile and starts recording on the calling thread. */
void tg_profile_begin(void);
/** Stops recording; the profile stays readable until the next begin. */
void tg_profile_end(void);
/** True while recording. */
bool tg_profile_enabled(void);
/** Wall time from tg_profile_begin to tg_profile_end (or to now), ns. */
double tg_profile_total_ns(void);
/** Copies up to cap rows, largest wall time first; returns the number of
 * rows there are (cap 0: only count them). */
int tg_profile_entries(tg_profile_entry *out, int cap);
/** A region of the program's own (dir: any; name: a string that outlives
 * the profile, e.g. a literal). Regions nest; each row is self time. */
void tg_profile_region_begin(tg_prof_dir dir, const char *name);
/** Closes the innermost region opened by tg_profile_region_begin. */
void tg_profile_region_end(void);
/** Adds estimated work to the innermost open region. */
void tg_profile_add_work(double flops, double bytes);
/** "forward", "backward", "optimizer", "data", "checkpoint", "other". */
const char *tg_prof_dir_name(tg_prof_dir dir);
/** The table, largest first: per row calls, ms (per step when steps > 0),
 * share of the total, us per call (per step for "(other)", which has no
 * calls), the part of it on one thread, the
 * threads' average occupancy, the pool wait, GFLOP/s and GB/s. Returns 0,
 * or -1 when writing fails. */
int tg_profile_print(FILE *f, int steps);
/** The same rows as JSON ({"total_ms", "steps", "threads", "rows": [...]}). */
int tg_profile_write_json(FILE *f, int steps);
/** Writes the table to path (JSON when it ends in ".json"); 0 or -1 with
 * the error recorded. */
int tg_profile_save(const char *path, int steps);

#endif
