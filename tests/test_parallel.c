/* The thread pool (src/tensor/parallel.c): every index runs exactly once,
 * teams meet at barriers, nested calls run serially, the thread count is
 * capped at the CPUs available, and a forked child gets a pool of its own. */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tensor/parallel.h"
#include "tensor/tensor_internal.h"
#include "test_util.h"

enum { MAXN = 5000 };
static _Atomic int hits[MAXN];
static _Atomic int tids_seen;

static void count_range(void *ctx, int64_t b, int64_t e, int tid) {
    (void)ctx;
    atomic_fetch_or(&tids_seen, 1 << tid);
    for (int64_t i = b; i < e; i++) atomic_fetch_add(&hits[i], 1);
}

static void expect_each_once(int64_t n, const char *what, int threads) {
    for (int64_t i = 0; i < n; i++)
        cr_assert_eq(atomic_load(&hits[i]), 1, "%s, %d threads, n %lld: index %lld ran %d times", what, threads,
                     (long long)n, (long long)i, atomic_load(&hits[i]));
}

Test(parallel, every_index_runs_exactly_once) {
    const int64_t sizes[] = {1, 2, 3, 7, 64, 1001, MAXN};
    /* 2, 1, 2: workers started again after earlier jobs must not rerun them. */
    const int counts[] = {2, 1, 2};
    for (int c = 0; c < 3; c++) {
        int threads = counts[c];
        tg_set_num_threads(threads);
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
            for (int dyn = 0; dyn < 2; dyn++) {
                for (int i = 0; i < MAXN; i++) atomic_store(&hits[i], 0);
                if (dyn)
                    tg_parallel_tasks(sizes[k], true, count_range, NULL);
                else
                    tg_parallel_for(sizes[k], true, count_range, NULL);
                expect_each_once(sizes[k], dyn ? "tasks" : "ranges", threads);
            }
        }
    }
    tg_set_num_threads(0);
}

static _Atomic int calls;
static void count_calls(void *ctx, int64_t b, int64_t e, int tid) {
    atomic_fetch_add(&calls, 1);
    count_range(ctx, b, e, tid);
}

/* parallel.h's cost model: a loop of less than 2 TG_PAR_NS nanoseconds of
 * work runs on the caller, in one call; more is cut into one share per
 * thread the pool has, at most one per TG_PAR_NS. */
Test(parallel, the_cost_model_gives_small_loops_to_the_caller) {
    cr_assert_eq(tg_parallel_threads_for(0), 1);
    cr_assert_eq(tg_parallel_threads_for(1.99 * TG_PAR_NS), 1);
    cr_assert_eq(tg_parallel_threads_for(NAN), 1);
    cr_assert_eq(tg_parallel_threads_for(-1e12), 1);
    for (int threads = 1; threads <= 2; threads++) {
        int nth = tg_set_num_threads(threads); /* 1 on a one-CPU machine */
        cr_assert_eq(tg_parallel_threads_for(2 * TG_PAR_NS), nth);
        cr_assert_eq(tg_parallel_threads_for(1e15), nth);
        const double work[] = {TG_PAR_NS, 1e9};
        for (int w = 0; w < 2; w++) {
            for (int i = 0; i < MAXN; i++) atomic_store(&hits[i], 0);
            atomic_store(&calls, 0);
            atomic_store(&tids_seen, 0);
            tg_parallel_for_ns(MAXN, work[w], count_calls, NULL);
            expect_each_once(MAXN, "tg_parallel_for_ns", nth);
            int shares = w == 0 ? 1 : nth;
            cr_assert_eq(atomic_load(&calls), shares, "%.0f ns at %d threads: %d shares, not %d", work[w], nth,
                         atomic_load(&calls), shares);
            if (w == 0) cr_assert_eq(atomic_load(&tids_seen), 1, "a small loop ran off the caller");
        }
    }
    tg_set_num_threads(0);
}

static _Atomic int phase1[64], after[64];
static void team_body(void *ctx, int tid, int nth) {
    (void)ctx;
    atomic_store(&phase1[tid], 1);
    tg_parallel_barrier();
    int all = 1;
    for (int t = 0; t < nth; t++) all &= atomic_load(&phase1[t]);
    atomic_store(&after[tid], all);
    tg_parallel_barrier();
    tg_parallel_barrier(); /* barriers can be reused */
}

Test(parallel, team_threads_meet_at_barriers) {
    int nth = tg_set_num_threads(2);
    for (int round = 0; round < 50; round++) {
        for (int t = 0; t < 64; t++) atomic_store(&phase1[t], 0), atomic_store(&after[t], 0);
        tg_parallel_team(true, team_body, NULL);
        for (int t = 0; t < nth; t++) cr_assert_eq(atomic_load(&after[t]), 1, "round %d thread %d", round, t);
    }
    tg_set_num_threads(0);
}

static void nested_outer(void *ctx, int64_t b, int64_t e, int tid) {
    (void)ctx;
    for (int64_t i = b; i < e; i++) {
        atomic_store(&tids_seen, 0);
        /* From inside a job: runs on this thread alone, all of [0, 10). */
        tg_parallel_for(10, true, count_range, NULL);
        (void)tid;
    }
}

Test(parallel, nested_calls_run_serially) {
    tg_set_num_threads(2);
    for (int i = 0; i < MAXN; i++) atomic_store(&hits[i], 0);
    tg_parallel_for(1, true, nested_outer, NULL);
    expect_each_once(10, "nested", 2);
    tg_set_num_threads(0);
}

Test(parallel, thread_count_is_capped_at_the_cpus_available) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int n = tg_set_num_threads(1000);
    cr_expect(n >= 1 && n <= cpus, "1000 threads asked, %d given on %ld CPUs", n, cpus);
    cr_expect_eq(tg_get_num_threads(), n);
    cr_expect_eq(tg_set_num_threads(1), 1);
    cr_expect_eq(tg_set_num_threads(0), tg_get_num_threads(), "0 restores the default");
}

Test(parallel, a_forked_child_gets_a_pool_of_its_own) {
    tg_set_num_threads(2);
    for (int i = 0; i < MAXN; i++) atomic_store(&hits[i], 0);
    tg_parallel_for(MAXN, true, count_range, NULL); /* the parent's workers exist now */
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        for (int i = 0; i < MAXN; i++) atomic_store(&hits[i], 0);
        tg_parallel_for(MAXN, true, count_range, NULL);
        for (int i = 0; i < MAXN; i++)
            if (atomic_load(&hits[i]) != 1) _exit(1);
        _exit(0);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's parallel loop failed");
    tg_set_num_threads(0);
}

/* A worker the OS has not scheduled must not hold up a loop: the caller runs
 * the shares nobody has started. The worker is held inside a signal handler
 * (blocked on a pipe) while the caller runs a 2-share loop; waiting for the
 * worker to check in, as the pool once did, would hang here until the
 * timeout. */
static pthread_t share_thread[2];
static int held[2], release_[2];

static void record_thread(void *ctx, int64_t b, int64_t e, int tid) {
    (void)ctx, (void)b, (void)e;
    share_thread[tid] = pthread_self();
    if (tid == 0) nanosleep(&(struct timespec){0, 2000000}, NULL); /* room for the worker to take share 1 */
}

static void hold_here(int sig) {
    (void)sig;
    char c = 1;
    if (write(held[1], &c, 1) != 1) _exit(3);
    if (read(release_[0], &c, 1) != 1) _exit(3);
}

Test(parallel, a_descheduled_worker_does_not_hold_up_the_caller, .timeout = 20) {
    if (tg_set_num_threads(2) < 2) return; /* one CPU: no worker to hold */
    pthread_t worker = pthread_self();
    for (int tries = 0; tries < 1000 && pthread_equal(worker, pthread_self()); tries++) {
        tg_parallel_for(2, true, record_thread, NULL);
        for (int s = 0; s < 2; s++)
            if (!pthread_equal(share_thread[s], pthread_self())) worker = share_thread[s];
    }
    cr_assert(!pthread_equal(worker, pthread_self()), "no share ran on the worker in 1000 loops");
    cr_assert(pipe(held) == 0 && pipe(release_) == 0);
    struct sigaction sa = {.sa_handler = hold_here};
    cr_assert(sigaction(SIGUSR1, &sa, NULL) == 0);
    cr_assert(pthread_kill(worker, SIGUSR1) == 0);
    char c;
    cr_assert(read(held[0], &c, 1) == 1); /* the worker is held now */
    for (int i = 0; i < 5; i++) {
        share_thread[0] = share_thread[1] = worker;
        tg_parallel_for(2, true, record_thread, NULL);
        cr_expect(pthread_equal(share_thread[0], pthread_self()) && pthread_equal(share_thread[1], pthread_self()),
                  "loop %d: both shares ran on the caller", i);
    }
    cr_assert(write(release_[1], &c, 1) == 1);
    signal(SIGUSR1, SIG_DFL);
    for (int i = 0; i < 2; i++) close(held[i]), close(release_[i]);
    tg_set_num_threads(0);
}

/* The default thread count follows the machine's load (OMP_DYNAMIC's idea):
 * with other programs' threads runnable on every other core, a loop runs on
 * the caller alone, in one range; an explicit count is kept whatever the
 * load. */
Test(parallel, the_default_count_yields_to_other_programs) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (tg_set_num_threads(0) < 2) return; /* one CPU: nothing to adapt */
    int saved = tg__parallel_fake_load(cpus - 1);
    atomic_store(&calls, 0);
    tg_parallel_for(1000, true, count_calls, NULL);
    cr_expect_eq(atomic_load(&calls), 1, "busy machine, default count: one serial range, got %d", atomic_load(&calls));
    tg__parallel_fake_load(0);
    atomic_store(&calls, 0);
    tg_parallel_for(1000, true, count_calls, NULL);
    cr_expect_eq(atomic_load(&calls), tg_get_num_threads(), "idle machine: one range per thread");
    tg_set_num_threads(2);
    tg__parallel_fake_load(cpus - 1);
    atomic_store(&calls, 0);
    tg_parallel_for(1000, true, count_calls, NULL);
    cr_expect_eq(atomic_load(&calls), 2, "an explicit count is kept on a busy machine");
    tg__parallel_fake_load(saved);
    tg_set_num_threads(0);
}

/* How long a waiting thread spins (SPIN_ROUNDS, parallel.c): through the
 * short gaps between the loops of a step while every thread of ours has a
 * core, so the next loop finds the worker awake (one that slept woke too
 * late to help: two threads ran no faster than one); only a microsecond or
 * two while other programs' threads want the cores, so that it gives its
 * core back. Either way a waiting worker sleeps in the end (between steps,
 * or a program that stopped computing). */
Test(parallel, a_waiting_worker_spins_long_only_while_the_cores_are_free, .timeout = 20) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (tg_set_num_threads(2) < 2) return; /* one CPU: no worker */
    int saved = tg__parallel_fake_load(0);
    tg_parallel_for(2, true, count_calls, NULL); /* the load is read before a job (every one while faked) */
    cr_expect(tg__parallel_spins_long(), "free cores: a waiter should spin through the gaps of a step");
    for (int busy = 0; busy <= 1; busy++) {
        tg__parallel_fake_load(busy ? (int)cpus : 0);
        int64_t before = tg__parallel_sleeps();
        tg_parallel_for(2, true, count_calls, NULL);
        cr_expect_eq(tg__parallel_spins_long(), !busy);
        struct timespec ms = {0, 1000000};
        for (int i = 0; i < 5000 && tg__parallel_sleeps() == before; i++) nanosleep(&ms, NULL);
        cr_expect(tg__parallel_sleeps() > before, "%s machine: the waiting worker never went to sleep",
                  busy ? "busy" : "idle");
    }
    tg__parallel_fake_load(saved);
    tg_set_num_threads(0);
}

/* Changing the thread count from one thread while another runs ops: the
 * change waits for the running job and applies to the next (it stopped the
 * workers under a running job, whose caller then waited for ever: 5 of 5
 * runs hung). The ops' results do not change. */
static _Atomic int g_stop_changes;
static void *change_threads(void *arg) {
    (void)arg;
    for (int i = 0; !atomic_load(&g_stop_changes); i++) tg_set_num_threads(1 + i % 2);
    return NULL;
}

Test(parallel, the_thread_count_changes_while_another_thread_runs_ops, .timeout = 60) {
    tg_set_num_threads(2);
    tg_rng rng = tg_rng_new(5);
    tg_tensor *a = tg_randn(TG_SHAPE(160, 160), &rng), *q = tg_randn(TG_SHAPE(4, 80, 16), &rng);
    tg_scope_begin();
    tg_tensor *want = tg_matmul(a, a), *want_att = tg_attention(q, q, q, (tg_mask){0}, 0, NULL);
    TG_REQUIRE(want);
    TG_REQUIRE(want_att);
    pthread_t changer;
    atomic_store(&g_stop_changes, 0);
    cr_assert_eq(pthread_create(&changer, NULL, change_threads, NULL), 0);
    double worst = 0;
    for (int it = 0; it < 300; it++) {
        tg_tensor *got = tg_matmul(a, a), *att = tg_attention(q, q, q, (tg_mask){0}, 0, NULL);
        TG_REQUIRE(got);
        TG_REQUIRE(att);
        for (int64_t k = 0; k < got->size; k++) worst = fmax(worst, fabs((double)(got->data[k] - want->data[k])));
        for (int64_t k = 0; k < att->size; k++) worst = fmax(worst, fabs((double)(att->data[k] - want_att->data[k])));
    }
    atomic_store(&g_stop_changes, 1);
    pthread_join(changer, NULL);
    tg_scope_end();
    cr_expect_eq(worst, 0, "results depend on the thread count: %g", worst);
    tg_free(a);
    tg_free(q);
    tg_set_num_threads(0);
}
