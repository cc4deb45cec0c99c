/* Internal: the profiler's hooks (profile.c), called by the pool
 * (parallel.c), the tape (autograd/tape.c) and the library's regions. Not
 * installed. Each hook site tests TG_PROF_ON() first: off, that one branch
 * is the whole cost. */
#ifndef TG_PROFILE_INTERNAL_H
#define TG_PROFILE_INTERNAL_H

#include "profile.h"

#include <stdbool.h>
#include <stdint.h>

extern bool tg__prof_on; /* between tg_profile_begin and tg_profile_end */
#define TG_PROF_ON() __builtin_expect(tg__prof_on, 0)

/* An op's forward begins (its input checks): the time before it goes to
 * the innermost region. Also before a backward rule. */
void tg__prof_op_start(void);
/* The op ends: the time since its start (or the previous op's end, for an
 * op that ran inside another) is its self time. */
void tg__prof_op_end(const char *name, tg_prof_dir dir, double flops, double bytes);
/* True on the thread being profiled (the pool counts only its jobs). */
bool tg__prof_owner(void);
/* A pool job run by the profiled thread: its threads, its wall time, the
 * threads' summed share time, and the caller's wait at its end (ns). */
void tg__prof_job(int threads, double wall_ns, double busy_ns, double wait_ns);
/* CLOCK_MONOTONIC in ns. */
int64_t tg__prof_now(void);

#endif
