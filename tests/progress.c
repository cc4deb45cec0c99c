/* The test binaries' progress: one line per suite as its last test ends,
 *     test_optim                    11 tests    0.8 s
 * (the test file; "file/suite" when the suite is named otherwise), one
 * before it for each test that took SLOW_S seconds or more,
 *     install::readme_install_path_works_verbatim_in_a_temp_prefix   71.2 s   1 of 2
 * and, after HEARTBEAT_S seconds without a line, one for each test still
 * running,
 *     hostile::programs_free_everything_on_success_and_error_paths running for 60 s
 * so that `make test` is never silent for minutes: Criterion itself prints
 * only the failures and, at the end, its summary line ("Synthesis: ..."),
 * which stays as it was. Linked into both test binaries (the Makefile's
 * TEST_SRC and FLOAT_TEST_SRC); not a test file itself.
 *
 * Criterion's report hooks run in the runner process, which hands the tests
 * to its workers (one per core) and gets their results back. PRE_SUITE comes
 * when a suite's first test is handed out, POST_SUITE when its last one is,
 * not when it has ended, so a suite is done here when as many of its tests
 * have ended (POST_TEST, or TEST_CRASH: one of them for every test, with its
 * status and time) as it has enabled ones. A test that dies in its .init
 * reports neither, nor does a parameterized suite give its count up front,
 * and --fail-fast stops early: those suites get their line at POST_ALL,
 * before the summary ("N did not end" for the tests that never reported).
 * The hooks run only as tests start and end, so the heartbeat is a thread of
 * the runner (started at PRE_ALL); one lock keeps it and the hooks apart.
 * The lines go to stderr, with Criterion's own. */
#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

enum { MAX_SUITES = 256, MAX_RUNNING = 64 };
#define SLOW_S      10.0 /* a test this long gets its own line */
#define HEARTBEAT_S 60.0 /* at most this long without a line while tests run */

typedef struct {
    const char *name; /* the suite's, valid until POST_ALL */
    char label[64];   /* what the line shows */
    size_t expected;  /* enabled tests; 0 when unknown (parameterized) */
    size_t ended, failed;
    double start;
    bool printed;
} suite_progress;

static suite_progress suites[MAX_SUITES];
static int n_suites;

/* The tests between PRE_TEST and their end, and when the last line went out. */
static struct {
    const struct criterion_test *test;
    double start;
} running[MAX_RUNNING];
static double last_line;
static bool all_done;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static suite_progress *find(const char *name) {
    for (int i = 0; i < n_suites; i++)
        if (strcmp(suites[i].name, name) == 0) return &suites[i];
    return NULL;
}

/* "tests/test_optim.c" and suite optim -> "test_optim"; suite
 * optim_checkpoint there -> "test_optim/optim_checkpoint". */
static void make_label(suite_progress *s, const char *file) {
    const char *base = file ? strrchr(file, '/') : NULL;
    base = base ? base + 1 : file;
    if (!base) {
        snprintf(s->label, sizeof s->label, "%s", s->name);
        return;
    }
    int stem = (int)strcspn(base, ".");
    bool same = strncmp(base, "test_", 5) == 0 && stem - 5 == (int)strlen(s->name) &&
                strncmp(base + 5, s->name, (size_t)stem - 5) == 0;
    if (same)
        snprintf(s->label, sizeof s->label, "%.*s", stem, base);
    else
        snprintf(s->label, sizeof s->label, "%.*s/%s", stem, base, s->name);
}

/* Each line in one write (stderr is unbuffered: one fprintf, one write), so
 * that nothing another process writes lands inside it. */
static void print_line(suite_progress *s) {
    s->printed = true;
    char failed[48] = "", unended[48] = "";
    if (s->failed) snprintf(failed, sizeof failed, "   %zu FAILED", s->failed);
    if (s->ended < s->expected) snprintf(unended, sizeof unended, "   %zu did not end", s->expected - s->ended);
    fprintf(stderr, "  %-28s %3zu test%s %6.1f s%s%s\n", s->label, s->ended, s->ended == 1 ? " " : "s",
            now() - s->start, failed, unended);
    last_line = now();
}

static void *heartbeat(void *arg) {
    (void)arg;
    for (;;) {
        nanosleep(&(struct timespec){.tv_sec = 1}, NULL);
        pthread_mutex_lock(&lock);
        if (all_done) break;
        double t = now();
        if (t - last_line >= HEARTBEAT_S) {
            for (int i = 0; i < MAX_RUNNING; i++)
                if (running[i].test)
                    fprintf(stderr, "    %s::%s running for %.0f s\n", running[i].test->category, running[i].test->name,
                            t - running[i].start);
            last_line = t;
        }
        pthread_mutex_unlock(&lock);
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

ReportHook(PRE_ALL)(struct criterion_test_set *set) {
    (void)set;
    last_line = now();
    pthread_t t;
    if (pthread_create(&t, NULL, heartbeat, NULL) == 0) pthread_detach(t); /* else no heartbeat, nothing worse */
}

static void pre_suite(struct criterion_suite_set *set) {
    if (n_suites == MAX_SUITES) return; /* no line for the rest, nothing worse */
    suite_progress *s = &suites[n_suites++];
    *s = (suite_progress){.name = set->suite.name, .start = now()};
    bool suite_off = set->suite.data && set->suite.data->disabled;
    bool known = true;
    const char *file = NULL;
    for (struct criterion_ordered_set_node *n = set->tests ? set->tests->first : NULL; n; n = n->next) {
        struct criterion_test *t = (void *)(n + 1); /* Criterion's FOREACH_SET layout */
        if (!file) file = t->data->file_;
        if (suite_off || t->data->disabled) continue; /* Criterion skips it: no hook */
        if (t->data->kind_ == CR_TEST_PARAMETERIZED) known = false;
        s->expected++;
    }
    if (!known) s->expected = 0;
    make_label(s, file);
}

static void pre_test(struct criterion_test *test) {
    for (int i = 0; i < MAX_RUNNING; i++)
        if (!running[i].test) {
            running[i].test = test;
            running[i].start = now();
            return;
        }
}

static void ended(struct criterion_test_stats *st) {
    for (int i = 0; i < MAX_RUNNING; i++)
        if (running[i].test == st->test) {
            running[i].test = NULL;
            break;
        }
    suite_progress *s = find(st->test->category);
    if (!s) return;
    s->ended++;
    if (st->test_status == CR_STATUS_FAILED || st->crashed) s->failed++;
    if (st->elapsed_time >= SLOW_S) {
        char of[48] = "";
        if (s->expected) snprintf(of, sizeof of, "   %zu of %zu", s->ended, s->expected);
        fprintf(stderr, "    %s::%s %6.1f s%s\n", s->name, st->test->name, (double)st->elapsed_time, of);
        last_line = now();
    }
    if (!s->printed && s->expected && s->ended == s->expected) print_line(s);
}

static void post_all(void) {
    all_done = true;
    for (int i = 0; i < n_suites; i++) {
        suite_progress *s = &suites[i];
        if (!s->printed && (s->ended || s->expected)) print_line(s); /* a test died in .init, or --fail-fast */
    }
}

/* The hooks, each under the lock. */
#define LOCKED(call) (pthread_mutex_lock(&lock), (call), pthread_mutex_unlock(&lock))
ReportHook(PRE_SUITE)(struct criterion_suite_set *set) { LOCKED(pre_suite(set)); }
ReportHook(PRE_TEST)(struct criterion_test *test) { LOCKED(pre_test(test)); }
ReportHook(POST_TEST)(struct criterion_test_stats *st) { LOCKED(ended(st)); }
ReportHook(TEST_CRASH)(struct criterion_test_stats *st) { LOCKED(ended(st)); }
ReportHook(POST_ALL)(struct criterion_global_stats *stats) {
    (void)stats;
    LOCKED(post_all());
}

/* Every process of the binary, the runner and the worker of each test,
 * writes its standard output a line at a time even into a pipe or a file
 * (make test | tee, CI): fully buffered, a test's printf lines (the
 * gradient checks) would go out in 4 KiB pieces, and the other worker's
 * lines or these would land in the middle of one. */
__attribute__((constructor)) static void whole_lines(void) { setvbuf(stdout, NULL, _IOLBF, 0); }
