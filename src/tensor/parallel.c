/* tgrad's own thread pool: the library decides how its threads wait.
 *
 * Why not OpenMP's runtime: libgomp's idle threads busy-wait about 3 ms
 * after each parallel region before they sleep, and libgomp reads its wait
 * policy once, from the environment, before any library code runs. On a
 * 2-core machine that spinning fights the working thread: measured here, a
 * user's training loop ran 4x slower at the default 2 threads than at 1
 * when two such programs shared the cores (6.1 s against 1.4 s), and only a
 * restart with OMP_WAIT_POLICY=passive fixed it, a fix a library cannot
 * apply for its caller. Here a waiting worker spins a few microseconds (long
 * enough to catch the next loop of a training step, which follows within
 * microseconds) and then sleeps on a condition variable.
 *
 * The caller is thread 0 and works too. tg_parallel_for splits [0, n) into
 * one contiguous range per thread; tg_parallel_tasks hands out tasks one at
 * a time. Every loop the library runs in parallel writes disjoint outputs,
 * so how the work is split never changes a result. A parallel call made
 * from inside a parallel job runs serially on the calling thread. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "number.h"
#include "parallel.h"
#include "profile_internal.h"
#include "tensor.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* How long a waiting thread spins before it sleeps depends on who else
 * wants the cores (the load check below, every 10 ms):
 * - other programs' threads runnable: SPIN_ROUNDS pauses (a microsecond or
 *   two), then sleep, so that a waiter gives its core back. Measured on the
 *   shared 2-core VM, two toy --threads 2 --steps 300 runs at once: 2000
 *   rounds 9.2-13 s (with the caller also only spinning), 300 rounds 7.0 s,
 *   50 rounds 5.8 s.
 * - a free core for each of our threads: up to SPIN_IDLE_NS. A training
 *   step is hundreds of parallel loops a few to a few hundred microseconds
 *   apart; a worker that slept between them took tens of microseconds to
 *   wake (a futex wake on a VM), by which time the caller had run every
 *   share itself, so two threads ran no faster than one (BENCHMARKS.md:
 *   toy at 2 threads slower than at 1). Spinning through those gaps is what
 *   OpenBLAS and OpenMP do; here it stops when the machine gets busy. */
#define SPIN_ROUNDS  50
#define SPIN_IDLE_NS 200000LL
#define MAX_THREADS  64

enum { STATIC_RANGES, TASKS, TEAM };
typedef struct {
    int kind;
    tg_range_fn fn;  /* STATIC_RANGES, TASKS */
    tg_team_fn team; /* TEAM */
    void *ctx;
    int64_t n;
    int nshares;               /* shares of this job (threads of a team) */
    _Atomic int64_t next;      /* next task (TASKS) */
    _Atomic int done;          /* shares finished */
    _Atomic int barrier_count; /* tg_parallel_barrier: arrivals */
    _Atomic int barrier_sense;
    bool prof;               /* profiled (profile.h): shares add their time to busy_ns */
    _Atomic int64_t busy_ns; /* the shares' summed time, when prof */
} job;

/* The claim word: which job is current and which of its shares are taken,
 *   gen << GEN_SHIFT | team << 16 | nshares << 8 | next share.
 * A job's range and task shares go to whichever thread claims them first
 * (compare-and-swap on this word): the caller, after its own share, runs
 * the shares no worker has started, so a worker that the OS has not
 * scheduled yet (two programs on two cores) costs nothing, where waiting
 * for it to check in cost the whole time slice. A share can be claimed only
 * while the word still names its job, and a job ends only when all its
 * shares are done, so a share's thread always reads the job it claimed.
 * A team's share t belongs to thread t (its barriers need every thread, and
 * GEMM's packing buffers are per thread), so team shares are not claimed. */
#define GEN_SHIFT       17
#define CLAIM_NEXT(w)   ((int)((w)&0xff))
#define CLAIM_SHARES(w) ((int)(((w) >> 8) & 0xff))
#define CLAIM_TEAM(w)   ((int)(((w) >> 16) & 1))
#define CLAIM_GEN(w)    ((w) >> GEN_SHIFT)

static struct {
    int nthreads; /* wanted, including the caller; 0 = not decided yet */
    bool fixed;   /* set explicitly (tg_set_num_threads(n > 0) or the environment): never adapted */
    int started;  /* workers running (nthreads - 1 once started) */
    pthread_t workers[MAX_THREADS];
    _Atomic uint64_t claim; /* the claim word above */
    uint64_t start_gen;     /* its gen when the workers were started */
    _Atomic int sleepers;
    _Atomic int stop;
    _Atomic int waiters; /* threads asleep on `done` (end of job, barrier) */
    pthread_mutex_t mu;
    /* One caller at a time: a job from a caller's thread holds it from start
     * to end, and so does a change of the thread count, which would
     * otherwise stop the workers under a running job (that caller then
     * waited for ever). Jobs from several threads take turns. */
    pthread_mutex_t run_mu;
    pthread_cond_t wake; /* workers: a new job */
    pthread_cond_t done; /* a job's end or a barrier's release */
    job job;
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER,
          .run_mu = PTHREAD_MUTEX_INITIALIZER,
          .wake = PTHREAD_COND_INITIALIZER,
          .done = PTHREAD_COND_INITIALIZER};

static _Atomic bool g_cores_free; /* the last load check found a free core for each of our threads */

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Whether a waiter that has spun `round` times spins once more (see
 * SPIN_ROUNDS): *since holds when its long spin began (0 before). */
static bool keep_spinning(int round, int64_t *since) {
    if (round < SPIN_ROUNDS) return true;
    if (!atomic_load_explicit(&g_cores_free, memory_order_relaxed)) return false;
    if (round % 64) return true; /* the clock every 64 pauses */
    int64_t now = now_ns();
    if (!*since) *since = now;
    return now - *since < SPIN_IDLE_NS;
}

/* Waits until *v != avoid: spins (keep_spinning), then sleeps on pool.done.
 * With more threads than free cores (two programs on two cores) a waiter
 * that only spins or yields keeps the thread it waits for off the CPU; a
 * sleeping one gives the CPU back. The thread that changes *v calls
 * wake_waiters after the change; waiters is raised before *v is checked
 * under the lock, so one of the two always sees the other (seq_cst). */
static void wait_while_eq(_Atomic int *v, int avoid) {
    int64_t since = 0;
    for (int spin = 0; keep_spinning(spin, &since); spin++) {
        if (atomic_load(v) != avoid) return;
        cpu_relax();
    }
    pthread_mutex_lock(&pool.mu);
    atomic_fetch_add(&pool.waiters, 1);
    while (atomic_load(v) == avoid) pthread_cond_wait(&pool.done, &pool.mu);
    atomic_fetch_sub(&pool.waiters, 1);
    pthread_mutex_unlock(&pool.mu);
}

static void wake_waiters(void) {
    if (atomic_load(&pool.waiters) > 0) {
        pthread_mutex_lock(&pool.mu);
        pthread_cond_broadcast(&pool.done);
        pthread_mutex_unlock(&pool.mu);
    }
}

static _Thread_local int t_id;      /* 0 for the caller and outside jobs */
static _Thread_local int t_nth = 1; /* threads of the job this thread runs */
static _Thread_local bool t_in_job;
static _Thread_local bool t_serial; /* inside run_serial (the profile's job count) */

int tg_thread_id(void) { return t_id; }
bool tg_in_parallel(void) { return t_in_job; }

/* CPUs this process may run on (affinity), at least 1. A TG_NO_THREADS
 * build (make OMP=0) counts one, so its pool never starts a thread. */
#ifdef TG_TEST_HOOKS
static int g_fake_cpus; /* > 0: tg__parallel_fake_cpus */
int tg__parallel_fake_cpus(int n) {
    int old = g_fake_cpus;
    g_fake_cpus = n;
    return old;
}
#endif

static int cpus_available(void) {
#ifdef TG_NO_THREADS
    return 1;
#endif
#ifdef TG_TEST_HOOKS
    if (g_fake_cpus > 0) return g_fake_cpus;
#endif
#ifdef CPU_COUNT
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static int clamp_threads(long n) {
    int cap = cpus_available();
    if (cap > MAX_THREADS) cap = MAX_THREADS;
    return n < 1 ? 1 : n > cap ? cap : (int)n;
}

/* Default: TG_NUM_THREADS, else OMP_NUM_THREADS (its first entry), else
 * every CPU available; *fixed says whether the environment chose. */
static int default_threads(bool *fixed) {
    const char *names[] = {"TG_NUM_THREADS", "OMP_NUM_THREADS"};
    for (int i = 0; i < 2; i++) {
        const char *v = getenv(names[i]);
        int64_t n = 0;
        if (v && tg_parse_int64(v, &n) == 0 && n > 0) {
            *fixed = true;
            return clamp_threads((long)n);
        }
    }
    *fixed = false;
    return clamp_threads(cpus_available());
}

/* ---- the default count follows the machine's load ---------------------------
 * Measured here (BENCHMARKS.md): two programs at 2 threads each on 2 cores
 * ran 7% slower than two at 1 thread; every parallel loop woke a worker
 * that could only take a core from the other program. So, like OpenMP's
 * OMP_DYNAMIC, the default count is adapted: every 10 ms the pool reads how
 * many threads of the whole machine are runnable (/proc/loadavg's 4th field,
 * the kernel's nr_running), subtracts its own awake ones, and uses only the
 * cores left (at least 1). A count set explicitly is never adapted. Results
 * do not depend on the thread count, so this changes speed only. */
#define LOAD_CHECK_NS 10000000LL
#ifdef TG_TEST_HOOKS
/* Test builds only (the library the tests link, Makefile's $(INTERNAL)):
 * tg__parallel_fake_load pretends `others` threads of other programs run. */
static int g_fake_others = -1; /* -1: read the machine */

int tg__parallel_fake_load(int others) {
    int old = g_fake_others;
    g_fake_others = others;
    return old;
}
/* How many times a worker has gone to sleep waiting for a job; whether
 * waiters now spin long (a free core for each of our threads). */
static _Atomic int64_t g_sleeps;
int64_t tg__parallel_sleeps(void) { return atomic_load(&g_sleeps); }
bool tg__parallel_spins_long(void) { return atomic_load(&g_cores_free); }
#define COUNT_SLEEP() atomic_fetch_add(&g_sleeps, 1)
#else
#define g_fake_others (-1)
#define COUNT_SLEEP() ((void)0)
#endif

/* Runnable threads on the machine now, or -1 when it cannot be read. */
static int machine_runnable(void) {
    char buf[128];
    FILE *f = fopen("/proc/loadavg", "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    int running = -1, total;
    if (sscanf(buf, "%*f %*f %*f %d/%d", &running, &total) != 2) return -1;
    return running;
}

/* Threads for the next job: nth, or fewer while other programs' threads
 * are runnable (the default count only). Checked about every 10 ms; the
 * same check, for any count, tells the waiters how long to spin
 * (g_cores_free, SPIN_ROUNDS). The check (two files read, an affinity
 * call) is tens of microseconds of system calls on a busy VM, and it ran
 * on the caller before a job, a one-thread stretch in whichever op came
 * next (the profiler's "of which 1 thread" of attention). So run_job does
 * it while it waits for the workers' shares (load_check_in_wait), time the
 * caller would spend waiting anyway; only a check overdue by two periods
 * (jobs that all ended without a wait) is done here, before the job. */
static int64_t g_load_ns = -2 * LOAD_CHECK_NS; /* the last check; under run_mu, as all below */
static int g_adapted, g_load_nth;              /* its result; the count it was asked for */

static int64_t coarse_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void load_check(int nth, int64_t now) {
    g_load_ns = now;
    int others = g_fake_others;
    int cpus = cpus_available();
    if (others < 0) {
        int running = machine_runnable(); /* counts this caller and our awake workers */
        others = running < 0 ? 0 : running - 1 - (pool.started - atomic_load(&pool.sleepers));
        /* nr_running counts every CPU of the machine; a process allowed
         * fewer (taskset, a cpuset) expects its share of them. */
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        if (online > cpus && others > 0) others = (int)((others * (long)cpus + online - 1) / online);
    }
    int free_cores = cpus - (others > 0 ? others : 0);
    g_adapted = free_cores < 1 ? 1 : free_cores;
    atomic_store_explicit(&g_cores_free, free_cores >= nth, memory_order_relaxed);
}

static int threads_for_load(int nth) {
    if (nth < 2) return nth;
    g_load_nth = nth;
    int64_t now = coarse_now_ns();
    /* a faked load (tests) is read at every job, as it was set */
    if (now - g_load_ns >= 2 * LOAD_CHECK_NS || g_fake_others >= 0) load_check(nth, now);
    return pool.fixed || g_adapted >= nth ? nth : g_adapted;
}

/* The caller's shares are done and a worker's is not: a check that is due
 * runs now, for the next job. */
static void load_check_in_wait(const job *j) {
    if (g_load_nth < 2 || atomic_load(&j->done) >= j->nshares) return;
    int64_t now = coarse_now_ns();
    if (now - g_load_ns >= LOAD_CHECK_NS) load_check(g_load_nth, now);
}

static void stop_workers(void) {
    if (!pool.started) return;
    atomic_store(&pool.stop, 1);
    pthread_mutex_lock(&pool.mu);
    atomic_fetch_add(&pool.claim, (uint64_t)1 << GEN_SHIFT); /* a new gen with no shares: wakes them */
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.mu);
    for (int i = 0; i < pool.started; i++) pthread_join(pool.workers[i], NULL);
    pool.started = 0;
    atomic_store(&pool.stop, 0);
}

/* The thread count, decided on first use (run_mu held, or inside a job). */
static int threads_wanted(void) {
    if (!pool.nthreads) pool.nthreads = default_threads(&pool.fixed);
    return pool.nthreads;
}

int tg_get_num_threads(void) {
    if (t_in_job) return threads_wanted(); /* the job's caller holds run_mu: the count cannot change */
    pthread_mutex_lock(&pool.run_mu);
    int n = threads_wanted();
    pthread_mutex_unlock(&pool.run_mu);
    return n;
}

int tg_set_num_threads(int n) {
    if (t_in_job) return threads_wanted(); /* not from inside a job */
    bool fixed = true;
    int want = n <= 0 ? default_threads(&fixed) : clamp_threads(n);
    pthread_mutex_lock(&pool.run_mu); /* after the running job, if any */
    pool.fixed = fixed;
    if (want != pool.nthreads) {
        stop_workers();
        pool.nthreads = want;
    }
    pthread_mutex_unlock(&pool.run_mu);
    return want;
}

/* Share `share` of the current job, on the calling thread. tg_thread_id()
 * reports the share while it runs. */
static void run_share(job *j, int share) {
    int id = t_id, nshares = j->nshares;
    bool prof = j->prof;
    int64_t t0 = prof ? tg__prof_now() : 0;
    t_id = share;
    t_nth = nshares;
    if (j->kind == TASKS) {
        for (int64_t i; (i = atomic_fetch_add(&j->next, 1)) < j->n;) j->fn(j->ctx, i, i + 1, share);
    } else if (j->kind == TEAM) {
        j->team(j->ctx, share, j->nshares);
    } else {
        int64_t lo = j->n * share / j->nshares, hi = j->n * (share + 1) / j->nshares;
        if (lo < hi) j->fn(j->ctx, lo, hi, share);
    }
    t_nth = 1;
    t_id = id;
    if (prof) atomic_fetch_add(&j->busy_ns, tg__prof_now() - t0);
    /* nshares was read before: once done is full the caller may start a new job. */
    if (atomic_fetch_add(&j->done, 1) == nshares - 1) wake_waiters();
}

/* Claims the next unstarted share of job `gen`: its index, or -1 when the
 * word names another job or every share is taken. */
static int claim_share(uint64_t gen) {
    uint64_t w = atomic_load(&pool.claim);
    while (CLAIM_GEN(w) == gen && !CLAIM_TEAM(w) && CLAIM_NEXT(w) < CLAIM_SHARES(w))
        if (atomic_compare_exchange_weak(&pool.claim, &w, w + 1)) return CLAIM_NEXT(w);
    return -1;
}

/* The job run on the calling thread alone (not parallel, or nested). */
static void run_serial(int kind, tg_range_fn fn, tg_team_fn team, void *ctx, int64_t n) {
    /* the profile counts the outermost job only, as a parallel job's nested calls */
    if (TG_PROF_ON() && !t_in_job && !t_serial && tg__prof_owner()) tg__prof_job(1, 0, 0, 0);
    int outer = t_nth;
    bool outer_serial = t_serial;
    t_nth = 1;
    t_serial = true;
    if (kind == TEAM)
        team(ctx, t_id, 1);
    else if (n > 0)
        fn(ctx, 0, n, t_id);
    t_nth = outer;
    t_serial = outer_serial;
}

static void *worker_main(void *arg) {
    t_id = (int)(intptr_t)arg;
    int self = t_id;
    t_in_job = true;
    /* The gen when the workers were started, between two jobs: not the
     * word's gen when this thread first runs, which may be a new job's. */
    uint64_t seen = pool.start_gen;
    for (;;) {
        uint64_t w = atomic_load(&pool.claim);
        int64_t since = 0;
        for (int spin = 0; CLAIM_GEN(w) == seen && keep_spinning(spin, &since); spin++) {
            cpu_relax();
            w = atomic_load(&pool.claim);
        }
        if (CLAIM_GEN(w) == seen) {
            pthread_mutex_lock(&pool.mu);
            atomic_fetch_add(&pool.sleepers, 1);
            COUNT_SLEEP();
            while (CLAIM_GEN(w = atomic_load(&pool.claim)) == seen) pthread_cond_wait(&pool.wake, &pool.mu);
            atomic_fetch_sub(&pool.sleepers, 1);
            pthread_mutex_unlock(&pool.mu);
        }
        seen = CLAIM_GEN(w);
        if (atomic_load(&pool.stop)) return NULL;
        if (CLAIM_TEAM(w)) {
            /* The job cannot end before this thread's share is done. */
            if (self < CLAIM_SHARES(w)) run_share(&pool.job, self);
        } else {
            for (int share; (share = claim_share(seen)) >= 0;) run_share(&pool.job, share);
        }
    }
}

/* A forked child has none of the parent's threads: start afresh. */
static void after_fork_in_child(void) {
    pool.started = 0;
    atomic_store(&pool.sleepers, 0);
    atomic_store(&pool.stop, 0);
    pthread_mutex_init(&pool.mu, NULL);
    pthread_mutex_init(&pool.run_mu, NULL);
    pthread_cond_init(&pool.wake, NULL);
    pthread_cond_init(&pool.done, NULL);
    atomic_store(&pool.waiters, 0);
}

static bool start_workers(void) {
    static bool atfork_done;
    if (!atfork_done) {
        pthread_atfork(NULL, NULL, after_fork_in_child);
        atfork_done = true;
    }
    pool.start_gen = CLAIM_GEN(atomic_load(&pool.claim)); /* pthread_create publishes it */
    while (pool.started < pool.nthreads - 1) {
        if (pthread_create(&pool.workers[pool.started], NULL, worker_main, (void *)(intptr_t)(pool.started + 1)) != 0)
            break; /* run with the threads we have */
        pool.started++;
    }
    return pool.started > 0;
}

/* The job on up to the pool's threads, and at most cap (0: no cap). */
static void run_job(int kind, tg_range_fn fn, tg_team_fn team, void *ctx, int64_t n, int cap) {
    if (t_in_job) { /* nested: serial, on this thread */
        run_serial(kind, fn, team, ctx, n);
        return;
    }
    pthread_mutex_lock(&pool.run_mu);
    int nth = threads_wanted();
    int for_load = threads_for_load(nth);
    if (kind != TEAM) nth = for_load; /* a team needs all its threads */
    if (cap > 0 && nth > cap) nth = cap;
    if (nth < 2 || (kind != TEAM && n < 2) || (pool.started < nth - 1 && !start_workers())) {
        pthread_mutex_unlock(&pool.run_mu);
        run_serial(kind, fn, team, ctx, n);
        return;
    }
    if (kind == TEAM || nth > pool.started + 1) nth = pool.started + 1;
    job *j = &pool.job;
    j->kind = kind;
    j->fn = fn;
    j->team = team;
    j->ctx = ctx;
    j->n = n;
    j->nshares = kind != TEAM && (int64_t)nth > n ? (int)n : nth;
    atomic_store(&j->next, 0);
    atomic_store(&j->done, 0);
    atomic_store(&j->barrier_count, 0);
    j->prof = TG_PROF_ON() && tg__prof_owner();
    int64_t t0 = 0, t_own = 0;
    if (j->prof) {
        atomic_store(&j->busy_ns, 0);
        t0 = tg__prof_now();
    }
    /* Publishing the new claim word starts the job (seq_cst: the fields above are seen first). */
    uint64_t gen = CLAIM_GEN(atomic_load(&pool.claim)) + 1;
    atomic_store(&pool.claim, gen << GEN_SHIFT | (uint64_t)(kind == TEAM) << 16 | (uint64_t)j->nshares << 8);
    if (atomic_load(&pool.sleepers) > 0) {
        pthread_mutex_lock(&pool.mu);
        pthread_cond_broadcast(&pool.wake);
        pthread_mutex_unlock(&pool.mu);
    }
    t_in_job = true;
    if (kind == TEAM)
        run_share(j, 0);
    else
        for (int share; (share = claim_share(gen)) >= 0;) run_share(j, share);
    t_in_job = false;
    if (j->prof) t_own = tg__prof_now();
    load_check_in_wait(j);
    for (int d; (d = atomic_load(&j->done)) < j->nshares;) wait_while_eq(&j->done, d);
    if (j->prof) {
        int64_t t1 = tg__prof_now();
        tg__prof_job(j->nshares, (double)(t1 - t0), (double)atomic_load(&j->busy_ns), (double)(t1 - t_own));
    }
    pthread_mutex_unlock(&pool.run_mu);
}

void tg_parallel_for(int64_t n, bool parallel, tg_range_fn fn, void *ctx) {
    if (parallel)
        run_job(STATIC_RANGES, fn, NULL, ctx, n, 0);
    else
        run_serial(STATIC_RANGES, fn, NULL, ctx, n);
}

/* The most threads a loop of `ns` one-core nanoseconds may use (1: the
 * caller alone); run_job caps the pool's count with it. */
static int ns_cap(double ns) {
    if (!(ns >= 2 * TG_PAR_NS)) return 1; /* also NaN */
    double c = ns / TG_PAR_NS;
    return c < MAX_THREADS ? (int)c : MAX_THREADS;
}

int tg_parallel_threads_for(double ns) {
    int cap = ns_cap(ns), nth = cap > 1 ? tg_get_num_threads() : 1;
    return nth < cap ? nth : cap;
}

void tg_parallel_for_ns(int64_t n, double ns, tg_range_fn fn, void *ctx) {
    int cap = ns_cap(ns);
    if (cap > 1)
        run_job(STATIC_RANGES, fn, NULL, ctx, n, cap);
    else
        run_serial(STATIC_RANGES, fn, NULL, ctx, n);
}

void tg_parallel_tasks(int64_t n, bool parallel, tg_range_fn fn, void *ctx) {
    if (parallel)
        run_job(TASKS, fn, NULL, ctx, n, 0);
    else
        run_serial(TASKS, fn, NULL, ctx, n);
}

void tg_parallel_tasks_at_most(int64_t n, int threads, tg_range_fn fn, void *ctx) {
    if (threads > 1)
        run_job(TASKS, fn, NULL, ctx, n, threads);
    else
        run_serial(TASKS, fn, NULL, ctx, n);
}

void tg_parallel_team(bool parallel, tg_team_fn fn, void *ctx) {
    if (parallel)
        run_job(TEAM, NULL, fn, ctx, 0, 0);
    else
        run_serial(TEAM, NULL, fn, ctx, 0);
}

typedef struct {
    void (*row)(const tg_rows_ctx *c, int64_t r);
    const tg_rows_ctx *c;
} rows_job;

static void rows_range(void *ctx, int64_t begin, int64_t end, int tid) {
    const rows_job *j = ctx;
    (void)tid;
    for (int64_t r = begin; r < end; r++) j->row(j->c, r);
}

void tg_parallel_rows(int64_t rows, bool parallel, void (*row)(const tg_rows_ctx *c, int64_t r), const tg_rows_ctx *c) {
    tg_parallel_for(rows, parallel, rows_range, &(rows_job){row, c});
}

void tg_parallel_rows_ns(int64_t rows, double ns, void (*row)(const tg_rows_ctx *c, int64_t r), const tg_rows_ctx *c) {
    tg_parallel_for_ns(rows, ns, rows_range, &(rows_job){row, c});
}

/* Sense-reversing barrier over the threads of the running job. */
void tg_parallel_barrier(void) {
    job *j = &pool.job;
    int nth = t_nth;
    if (nth < 2) return;
    int sense = atomic_load(&j->barrier_sense);
    if (atomic_fetch_add(&j->barrier_count, 1) == nth - 1) {
        atomic_store(&j->barrier_count, 0);
        atomic_store(&j->barrier_sense, !sense);
        wake_waiters();
    } else {
        wait_while_eq(&j->barrier_sense, sense);
    }
}
