/* What the tensor layer shares with the rest of the library and its tests
 * but not with programs (internal: no public header includes it). Each
 * symbol is defined once and declared only here, so the compiler checks
 * that every user agrees with the definition. */
#ifndef TG_TENSOR_INTERNAL_H
#define TG_TENSOR_INTERNAL_H

#include "tensor.h"

/* The autograd layer's tape (its newest node), saved per scope and restored
 * at its end so that the nodes a scope released are no longer on the tape.
 * The tensor layer only carries the pointer; it never looks inside
 * (memory.c; used by autograd/tape.c). */
extern void *tg__tape_head;

/* Recycling inside a scope (memory.c). tg__arena_recycle gives back p, a
 * block of bytes that tg_arena_alloc or tg__arena_reuse returned and
 * nothing reads any more, before its scope ends: it waits on the free list
 * of the scope that allocated it (ignored when p is not live arena memory).
 * tg__arena_reuse(bytes) returns a block of exactly that size (as rounded by
 * the arena) from the current scope's list, uninitialised, or NULL when
 * there is none (then take it from the arena). A scope's list is emptied
 * at its end. For backward's gradients and temporaries (autograd/tape.c). */
void tg__arena_recycle(void *p, size_t bytes);
void *tg__arena_reuse(size_t bytes);
/* The depth of the open scope whose allocations hold p (0: the root
 * level), -1 when p is not live arena memory (memory.c). */
int tg__arena_depth(const void *p);
/* An arena tensor (tg_empty_arena) whose data comes from the current
 * scope's recycled blocks when one of its size is free; uninitialised.
 * tensor.c */
tg_tensor *tg__empty_recycled(int ndim, const int *shape);
/* An arena tensor of dtype TG_DTYPE_BF16 (its bf16 storage uninitialised),
 * or NULL with tg_empty's error. tensor.c */
tg_tensor *tg__empty_bf16(int ndim, const int *shape);
/* Ends an arena tensor before its scope does: its data, if it owns it,
 * goes to tg__arena_recycle, and its header is marked dead (magic 0, data
 * NULL), so ops refuse a pointer kept to it. Nothing for a persistent or
 * NULL t. tensor.c */
void tg__tensor_recycle(tg_tensor *t);

/* Adds delta to the persistent byte count of tg_memory() (memory.c; called
 * by tensor.c when a persistent tensor is made or freed). */
void tg__persistent_account(long long delta);

/* Registers fn to run at tg_release_all(), e.g. the GEMM driver's release
 * (gemm_driver.c) of the calling thread's packing buffer. Registering the same fn again does
 * nothing; safe to call from several threads. A hook instead of a direct
 * call, so memory.c does not depend on the kernels that use it. */
void tg__on_release_all(void (*fn)(void));

/* Renames the recorded message "<from>: <rest>" to "<to>: <rest>" (or
 * "<to>: <message>" when it does not start with from, "<to>: <fallback>"
 * when none is recorded), so a function reports a failure of the one it
 * called under its own name. In place: the message stays whole whatever
 * the length of the paths in it (error.c). */
void tg__error_rename(const char *from, const char *to, const char *fallback);

/* Appends name, the k-th of n, to the list in buf (cap bytes, "" to
 * start): "a", "a or b", "a, b or c", as the messages that list the valid
 * choices say them (error.c). */
void tg__list_append(char *buf, size_t cap, int k, int n, const char *name);

/* Test switch: the widest ISA the kernels may use (a tg_isa of simd.h:
 * 0 portable, 1 AVX2, 2 AVX-512, 3 AVX-512 BF16, the default); the CPU
 * still caps it.
 * Every dispatching kernel follows it, so a test runs each path this
 * machine has. Returns the previous setting. simd.c */
int tg__isa_cap(int level);
/* Test switch: the bf16 GEMM's engine by name ("amx", "amx_twin",
 * "avx512_bf16", "portable", "fp32"; NULL: by measured rate, the default),
 * as the environment variable TG_BF16_ENGINE; an engine the ISA level
 * lacks is passed over for the rate's choice. Returns the previous one
 * (an index, -1: by rate). gemm_bf16.c */
int tg__bf16_engine_force(const char *name);
/* Test switch: whether the bf16 GEMM runs its small products on the
 * calling thread without the driver (gemm_bf16_small.c; true, the
 * default) or sends every product through gemm_drive (false), the same
 * bits either way. Returns the previous setting. gemm_bf16_small.c */
bool tg__bf16_small_force(bool on);
/* How many products the calling thread has run on that small path, so a
 * test can tell that it ran. gemm_bf16_small.c */
long tg__bf16_small_runs(void);
/* The rates of one core the engine choice compares, GFLOP/s, best of 3
 * trials of about seconds / 3; 0 where the CPU lacks the unit. peak.c */
double tg__fma_rate(double seconds);
double tg__vdp_rate(double seconds);
/* Pretend that many other threads are runnable on the machine (-1: read
 * /proc/loadavg again), for the default thread count's adaptation; returns
 * the previous setting. A test hook: only in the library the tests link
 * (built with TG_TEST_HOOKS). parallel.c */
int tg__parallel_fake_load(int others);
/* How many times the pool's workers have gone to sleep waiting for a job,
 * and whether a waiting thread now spins up to SPIN_IDLE_NS before it
 * sleeps (else a microsecond or two); test builds only, as above.
 * parallel.c */
int64_t tg__parallel_sleeps(void);
/* Pretends the machine has n CPUs (0: the real count), so that a test can
 * run 3 or 7 threads on 2 cores; returns the previous setting. */
int tg__parallel_fake_cpus(int n);
bool tg__parallel_spins_long(void);

#endif
