/* Data-parallel training over MPI: the collectives with a deadline, and the
 * gradient buckets reduced while backward runs (dist.h says what and why).
 * Without TG_MPI (make without MPI=1) the same functions are the
 * single-process stubs: rank 0 of 1, nothing to reduce. */
#include "dist.h"
#include "../tensor/number.h"
#include "../autograd/op.h" /* tg_grad_of: a parameter without a gradient gets a zero one */

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef TG_MPI
#include <mpi.h>
#include <sys/stat.h>
#endif

typedef struct {
    int hi, lo;    /* parameter indices hi, hi - 1, ..., lo (the order backward finishes them) */
    int ready;     /* of its hi - lo + 1 parameters, final in this backward */
    int64_t numel; /* elements of all its gradients */
    tg_real *buf;  /* the packed gradients, reduced in place */
    bool started;
#ifdef TG_MPI
    MPI_Request req;
#endif
} bucket;

struct tg_dist_grads {
    const tg_params *p;
    int *bucket_of; /* parameter index -> bucket */
    bucket *b;
    int nb, next; /* buckets; the next one to start (buckets start in order) */
    bool armed;
    tg_dist_stats st;
};

/* ---- the layout (both builds) ---------------------------------------------- */

tg_dist_grads *tg_dist_grads_new(const tg_params *p, size_t bucket_bytes) {
    if (!p || p->n < 1) {
        tg_set_error("dist_grads_new: %s", p ? "empty parameter list" : "NULL parameter list");
        return NULL;
    }
    for (int i = 0; i < p->n; i++)
        if (!p->items[i].t) {
            tg_set_error("dist_grads_new: parameter %d (%s) is NULL", i, p->items[i].name);
            return NULL;
        }
    if (bucket_bytes == 0) bucket_bytes = TG_DIST_BUCKET_BYTES;
    tg_dist_grads *g = calloc(1, sizeof *g);
    if (g) g->bucket_of = malloc(sizeof(int) * (size_t)p->n);
    if (g) g->b = calloc((size_t)p->n, sizeof *g->b); /* at most one bucket per parameter */
    if (!g || !g->bucket_of || !g->b) {
        tg_dist_grads_free(g);
        tg_set_error("dist_grads_new: out of memory for %d parameters", p->n);
        return NULL;
    }
    g->p = p;
    /* From the last parameter to the first: backward finishes the last
     * layers' gradients first. A bucket closes at bucket_bytes or more. */
    for (int i = p->n - 1; i >= 0; i--) {
        bucket *b = &g->b[g->nb];
        if (b->numel == 0) b->hi = i;
        b->lo = i;
        b->numel += p->items[i].t->size;
        g->bucket_of[i] = g->nb;
        if ((size_t)b->numel * sizeof(tg_real) >= bucket_bytes || i == 0) g->nb++;
    }
    for (int k = 0; k < g->nb; k++) {
        if (g->b[k].numel > INT32_MAX) {
            tg_set_error("dist_grads_new: bucket %d has %lld elements, more than one MPI message holds", k,
                         (long long)g->b[k].numel);
            tg_dist_grads_free(g);
            return NULL;
        }
        g->b[k].buf = malloc(sizeof(tg_real) * (size_t)(g->b[k].numel ? g->b[k].numel : 1));
        if (!g->b[k].buf) {
            tg_set_error("dist_grads_new: out of memory for a bucket of %lld elements", (long long)g->b[k].numel);
            tg_dist_grads_free(g);
            return NULL;
        }
        g->st.bytes += (double)g->b[k].numel * sizeof(tg_real);
    }
    return g;
}

int tg_dist_grads_buckets(const tg_dist_grads *g) { return g ? g->nb : 0; }
tg_dist_stats tg_dist_grads_stats(const tg_dist_grads *g) { return g ? g->st : (tg_dist_stats){0}; }

void tg_dist_grads_free(tg_dist_grads *g) {
    if (!g) return;
    if (g->armed) tg_set_grad_ready_hook(NULL, 0, NULL, NULL);
    for (int k = 0; g->b && k < g->nb; k++) free(g->b[k].buf);
    free(g->b);
    free(g->bucket_of);
    free(g);
}

#ifndef TG_MPI
/* ---- without MPI: one process ----------------------------------------------- */

bool tg_dist_available(void) { return false; }
int tg_dist_init(int *argc, char ***argv) {
    (void)argc, (void)argv;
    tg_set_error("dist: tgrad was built without MPI=1; rebuild with `make MPI=1` (Open MPI) for data-parallel "
                 "training");
    return -1;
}
bool tg_dist_active(void) { return false; }
int tg_dist_rank(void) { return 0; }
int tg_dist_size(void) { return 1; }
int tg_dist_barrier(void) { return 0; }
int tg_dist_broadcast_params(const tg_params *p) {
    if (!p) tg_error_null("dist_broadcast_params");
    return p ? 0 : -1;
}
int tg_dist_allreduce_sum(double *v, int n) {
    if (!v && n > 0) tg_error_null("dist_allreduce_sum");
    return !v && n > 0 ? -1 : 0;
}
int tg_dist_finalize(void) { return 0; }
void tg_dist_abort(int code) { exit(code); }
int tg_dist_grads_arm(tg_dist_grads *g) {
    if (!g) tg_error_null("dist_grads_arm");
    return g ? 0 : -1;
}
int tg_dist_allreduce_grads(tg_dist_grads *g) {
    if (!g) {
        tg_error_null("dist_allreduce_grads");
        return -1;
    }
    g->st.calls++;
    return 0;
}

#else
/* ---- with MPI ----------------------------------------------------------------- */

static MPI_Comm g_comm = MPI_COMM_NULL; /* our own duplicate of MPI_COMM_WORLD */
static int g_rank, g_size = 1;
static double g_timeout = 60;
/* Each rank's pid and whether it runs beside this one (the same host and
 * pid namespace), where kill(2) and /proc can tell whether it still lives. */
typedef struct {
    long long pid;
    uint64_t host; /* a hash of the host's name and the pid namespace; 0: unknown */
} peer_id;
static peer_id *g_peers;
#define TG_MPI_REAL (sizeof(tg_real) == sizeof(double) ? MPI_DOUBLE : MPI_FLOAT)

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Copies the bucket's gradients into its buffer (or, back = true, the
 * buffer divided by n into the gradients: the average over n ranks). */
static int bucket_copy(tg_dist_grads *g, bucket *b, bool back, int n) {
    int64_t off = 0;
    for (int i = b->hi; i >= b->lo; i--) {
        tg_tensor *t = g->p->items[i].t;
        tg_tensor *gr = t->grad ? t->grad : tg_grad_of(t);
        if (!gr) {
            tg_set_error("dist_allreduce_grads: no gradient for %s (does it require grad?)", g->p->items[i].name);
            return -1;
        }
        if (back)
            for (int64_t j = 0; j < t->size; j++) gr->data[j] = b->buf[off + j] / (tg_real)n;
        else
            memcpy(b->buf + off, gr->data, sizeof(tg_real) * (size_t)t->size);
        off += t->size;
    }
    return 0;
}

bool tg_dist_available(void) { return true; }
bool tg_dist_active(void) { return g_comm != MPI_COMM_NULL; }
int tg_dist_rank(void) { return g_rank; }
int tg_dist_size(void) { return g_size; }

/* An MPI error code as "what: MPI's message". */
static int mpi_failed(const char *what, int code) {
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(code, msg, &len);
    tg_set_error("tgrad dist: rank %d: %s failed: %s", g_rank, what, msg);
    return -1;
}

/* Polls n requests until all are done or the deadline passes. Spins a
 * little, then sleeps 50 us between polls, so that a rank waiting for a
 * slower one leaves the CPU to it (2 ranks on 2 cores share them). */
static int wait_all(int n, MPI_Request *reqs, const char *what) {
    double deadline = now() + g_timeout;
    for (long polls = 0;; polls++) {
        int done = 0, rc = MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS) return mpi_failed(what, rc);
        if (done) return 0;
        if (now() > deadline) {
            tg_set_error("tgrad dist: rank %d: %s did not complete within %g s (a rank may have died)", g_rank, what,
                         g_timeout);
            return -1;
        }
        if (polls > 200) nanosleep(&(struct timespec){0, 50000}, NULL);
    }
}

/* This process's peer_id. The pid namespace is part of the host: two
 * containers may share a host name, never their pids. */
static peer_id self_id(void) {
    char name[256] = "";
    struct stat ns;
    peer_id me = {(long long)getpid(), 0};
    if (gethostname(name, sizeof name - 1) != 0 || stat("/proc/self/ns/pid", &ns) != 0) return me; /* unknown */
    /* FNV-1a of the name, then of the namespace's inode and device */
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *c = name; *c; c++) h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
    h = (h ^ (uint64_t)ns.st_ino) * 0x100000001b3ull;
    h = (h ^ (uint64_t)ns.st_dev) * 0x100000001b3ull;
    me.host = h ? h : 1;
    return me;
}

/* True when rank r is known to have died: it runs beside this rank and its
 * pid is gone (ESRCH) or a zombie (exited, not yet reaped by Open MPI's
 * daemon). A rank on another host is never known dead here; there mpirun,
 * which ends the job when a rank exits without MPI_Finalize, is the check. */
static bool peer_dead(int r) {
    if (!g_peers || r == g_rank || !g_peers[r].host || g_peers[r].host != g_peers[g_rank].host) return false;
    if (kill((pid_t)g_peers[r].pid, 0) != 0 && errno == ESRCH) return true;
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%lld/stat", g_peers[r].pid);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[n] = 0;
    /* "pid (comm) S ...": the state follows the last ')' (comm may hold one). */
    const char *e = strrchr(line, ')');
    return e && e[1] == ' ' && (e[2] == 'Z' || e[2] == 'X');
}

/* Polls a barrier's request on a rank other than 0: no deadline, but the
 * peers beside it are watched (tg_dist_barrier says why). Spins a little,
 * then sleeps 50 us between polls, 1 ms after the first second, so a long
 * wait leaves the CPU to rank 0; every 0.2 s it checks that no peer died.
 * A peer may leave the barrier and exit normally before this rank sees the
 * barrier complete (its messages have arrived), so a dead peer's barrier
 * gets one more second before it counts as a failure. */
static int wait_for_lead(MPI_Request *req, const char *what) {
    double t0 = now(), check = t0 + 0.2, grace = 0;
    int dead = -1;
    for (long polls = 0;; polls++) {
        int done = 0, rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return mpi_failed(what, rc);
        if (done) return 0;
        double t = now();
        if (dead >= 0 && t > grace) {
            tg_set_error("tgrad dist: rank %d: %s: rank %d (pid %lld) died while this rank waited for it", g_rank, what,
                         dead, g_peers[dead].pid);
            return -1;
        }
        if (dead < 0 && t > check) {
            for (int p = 0; p < g_size && dead < 0; p++)
                if (peer_dead(p)) dead = p, grace = t + 1;
            check = t + 0.2;
        }
        if (polls > 200) nanosleep(&(struct timespec){0, t - t0 < 1 ? 50000 : 1000000}, NULL);
    }
}

/* Test hooks, compiled into test builds only (Makefile: -DTG_TEST_HOOKS for
 * the library the tests link and the lm that tests/dist_test.sh runs); the
 * installed library has neither and ignores these variables. */
#ifdef TG_TEST_HOOKS
/* TG_DIST_FAULT=R:K:exit (or hang): rank R exits (or stops answering) at
 * its K-th tg_dist_allreduce_grads, or with K "barrier" on entering a
 * barrier (rank 0: as if it died in its single-rank work), for the tests
 * of a rank that dies. call: the all-reduce's number, 0 for a barrier. */
static void maybe_fail(long call) {
    const char *f = getenv("TG_DIST_FAULT");
    int r;
    char at[16] = "", how[8] = "";
    if (!f || sscanf(f, "%d:%15[^:]:%7s", &r, at, how) != 3 || r != g_rank) return;
    if (call == 0 ? strcmp(at, "barrier") != 0 : atol(at) != call) return;
    fprintf(stderr, "tgrad dist: rank %d: TG_DIST_FAULT: %s at %s%s\n", g_rank,
            strcmp(how, "hang") == 0 ? "hanging" : "exiting", call ? "all-reduce " : "", at);
    if (strcmp(how, "hang") == 0)
        for (;;) sleep(1);
    _exit(3);
}

/* TG_DIST_SLOW_LEAD_S=S: rank 0 sleeps S seconds on entering a barrier, as
 * if its single-rank work before it (a save, a sample) took that long, for
 * the test of a long save under a short TG_DIST_TIMEOUT_S. */
static void maybe_slow_lead(void) {
    const char *s = getenv("TG_DIST_SLOW_LEAD_S");
    double v = 0;
    if (g_rank != 0 || !s || tg_parse_real(s, &v) != 0 || !(v > 0)) return;
    fprintf(stderr, "tgrad dist: rank 0: TG_DIST_SLOW_LEAD_S: %g s of single-rank work before the barrier\n", v);
    nanosleep(&(struct timespec){(time_t)v, (long)((v - (double)(time_t)v) * 1e9)}, NULL);
}
#else
static void maybe_fail(long call) { (void)call; }
static void maybe_slow_lead(void) {}
#endif

int tg_dist_init(int *argc, char ***argv) {
    int inited = 0;
    MPI_Initialized(&inited);
    if (inited || tg_dist_active()) {
        tg_set_error("dist_init: MPI is initialised already");
        return -1;
    }
    const char *t = getenv("TG_DIST_TIMEOUT_S");
    if (t && *t) {
        double v = 0;
        if (tg_parse_real(t, &v) != 0 || !(v > 0)) {
            tg_set_error("dist_init: TG_DIST_TIMEOUT_S is '%s'; expected seconds > 0", t);
            return -1;
        }
        g_timeout = v;
    }
    if (MPI_Init(argc, argv) != MPI_SUCCESS) {
        tg_set_error("dist_init: MPI_Init failed");
        return -1;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &g_comm);
    if (rc != MPI_SUCCESS) return mpi_failed("MPI_Comm_dup", rc);
    MPI_Comm_set_errhandler(g_comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(g_comm, &g_rank);
    MPI_Comm_size(g_comm, &g_size);
    /* Every rank's pid and host, for the barrier's check of its peers. */
    peer_id me = self_id();
    g_peers = calloc((size_t)g_size, sizeof *g_peers);
    if (!g_peers) {
        tg_set_error("dist_init: out of memory for %d ranks", g_size);
        return -1;
    }
    /* Each rank's dropout masks are its slice of the global batch's
     * (autograd.h: tg_dropout_set_shard), so no program touches a generator. */
    if (tg_dropout_set_shard(g_rank, g_size) != 0) return -1;
    MPI_Request r;
    rc = MPI_Iallgather(&me, (int)sizeof me, MPI_BYTE, g_peers, (int)sizeof me, MPI_BYTE, g_comm, &r);
    return rc != MPI_SUCCESS ? mpi_failed("dist_init", rc) : wait_all(1, &r, "dist_init");
}

int tg_dist_barrier(void) {
    if (!tg_dist_active()) return 0;
    maybe_slow_lead();
    maybe_fail(0);
    MPI_Request r;
    int rc = MPI_Ibarrier(g_comm, &r);
    if (rc != MPI_SUCCESS) return mpi_failed("barrier", rc);
    return g_rank == 0 ? wait_all(1, &r, "barrier") : wait_for_lead(&r, "barrier");
}

/* Every rank's n doubles, rank after rank, into all (n * size). */
static int allgather(const double *v, int n, double *all, const char *what) {
    MPI_Request r;
    int rc = MPI_Iallgather(v, n, MPI_DOUBLE, all, n, MPI_DOUBLE, g_comm, &r);
    return rc != MPI_SUCCESS ? mpi_failed(what, rc) : wait_all(1, &r, what);
}

int tg_dist_allreduce_sum(double *v, int n) {
    if (n <= 0) return 0;
    if (!v) {
        tg_error_null("dist_allreduce_sum");
        return -1;
    }
    if (!tg_dist_active()) return 0;
    double *all = malloc(sizeof(double) * (size_t)n * (size_t)g_size);
    if (!all) {
        tg_set_error("dist_allreduce_sum: out of memory");
        return -1;
    }
    int rc = allgather(v, n, all, "allreduce_sum");
    for (int i = 0; rc == 0 && i < n; i++) {
        double s = 0;
        for (int r = 0; r < g_size; r++) s += all[(size_t)r * (size_t)n + (size_t)i]; /* rank order */
        v[i] = s;
    }
    free(all);
    return rc;
}

int tg_dist_broadcast_params(const tg_params *p) {
    if (!p) {
        tg_error_null("dist_broadcast_params");
        return -1;
    }
    if (!tg_dist_active()) return 0;
    /* The same list everywhere, or the broadcasts would pair wrong tensors. */
    double mine[2] = {(double)p->n, (double)tg_params_numel(p)};
    double *all = malloc(sizeof(double) * 2 * (size_t)g_size);
    int rc = all ? allgather(mine, 2, all, "broadcast_params") : -1;
    for (int r = 0; rc == 0 && r < g_size; r++)
        if (all[2 * r] != mine[0] || all[2 * r + 1] != mine[1]) {
            tg_set_error("tgrad dist: rank %d: broadcast_params: rank %d has %g tensors of %g elements, this one %g "
                         "of %g",
                         g_rank, r, all[2 * r], all[2 * r + 1], mine[0], mine[1]);
            rc = -1;
        }
    free(all);
    for (int i = 0; rc == 0 && i < p->n; i++) {
        tg_tensor *t = p->items[i].t;
        MPI_Request r;
        int e = MPI_Ibcast(t->data, (int)t->size, TG_MPI_REAL, 0, g_comm, &r);
        rc = e != MPI_SUCCESS ? mpi_failed("broadcast_params", e) : wait_all(1, &r, "broadcast_params");
    }
    return rc;
}

int tg_dist_finalize(void) {
    if (!tg_dist_active()) return 0;
    MPI_Comm_free(&g_comm);
    g_comm = MPI_COMM_NULL;
    free(g_peers);
    g_peers = NULL;
    g_rank = 0, g_size = 1;
    MPI_Finalize();
    return 0;
}

void tg_dist_abort(int code) {
    if (!tg_dist_active()) exit(code);
    fflush(stdout);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    exit(code); /* not reached */
}

/* Starts bucket k: its gradients into the buffer, then the nonblocking sum. */
static int bucket_start(tg_dist_grads *g, int k) {
    bucket *b = &g->b[k];
    if (bucket_copy(g, b, false, 1) != 0) return -1;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, b->buf, (int)b->numel, TG_MPI_REAL, MPI_SUM, g_comm, &b->req);
    if (rc != MPI_SUCCESS) return mpi_failed("allreduce_grads", rc);
    b->started = true;
    return 0;
}

/* The autograd's gradient-ready hook: parameter i is final. Starts every
 * complete bucket in order, and lets MPI progress the started ones (Open
 * MPI moves a nonblocking collective on only inside MPI calls). */
static void grad_ready(int i, void *ctx) {
    tg_dist_grads *g = ctx;
    bucket *b = &g->b[g->bucket_of[i]];
    b->ready++;
    while (g->next < g->nb && g->b[g->next].ready == g->b[g->next].hi - g->b[g->next].lo + 1) {
        if (bucket_start(g, g->next) != 0) break; /* tg_dist_allreduce_grads reports it */
        g->next++;
        g->st.buckets_early++;
    }
    for (int k = 0; k < g->next; k++) {
        int done;
        if (g->b[k].req != MPI_REQUEST_NULL) MPI_Test(&g->b[k].req, &done, MPI_STATUS_IGNORE);
    }
    if (g->next == g->nb) { /* all started: the rest of this backward needs no hook */
        tg_set_grad_ready_hook(NULL, 0, NULL, NULL);
        g->armed = false;
    }
}

int tg_dist_grads_arm(tg_dist_grads *g) {
    if (!g) {
        tg_error_null("dist_grads_arm");
        return -1;
    }
    if (!tg_dist_active() || g_size == 1) return 0;
    const char *off = getenv("TG_DIST_NO_OVERLAP");
    if (off && strcmp(off, "1") == 0) return 0;
    tg_tensor **leaves = malloc(sizeof *leaves * (size_t)g->p->n);
    if (!leaves) {
        tg_set_error("dist_grads_arm: out of memory");
        return -1;
    }
    for (int i = 0; i < g->p->n; i++) leaves[i] = g->p->items[i].t;
    for (int k = 0; k < g->nb; k++) g->b[k].ready = 0;
    int rc = tg_set_grad_ready_hook(leaves, g->p->n, grad_ready, g);
    free(leaves);
    g->armed = rc == 0;
    return rc;
}

int tg_dist_allreduce_grads(tg_dist_grads *g) {
    if (!g) {
        tg_error_null("dist_allreduce_grads");
        return -1;
    }
    g->st.calls++;
    if (!tg_dist_active() || g_size == 1) return 0;
    maybe_fail(g->st.calls);
    double t0 = now();
    if (g->armed) tg_set_grad_ready_hook(NULL, 0, NULL, NULL);
    g->armed = false;
    int rc = 0;
    for (; rc == 0 && g->next < g->nb; g->next++, g->st.buckets_late++) rc = bucket_start(g, g->next);
    MPI_Request *reqs = malloc(sizeof *reqs * (size_t)g->nb);
    if (!reqs && rc == 0) {
        tg_set_error("dist_allreduce_grads: out of memory");
        rc = -1;
    }
    for (int k = 0; rc == 0 && k < g->nb; k++) reqs[k] = g->b[k].req;
    if (rc == 0) rc = wait_all(g->nb, reqs, "allreduce_grads");
    for (int k = 0; rc == 0 && k < g->nb; k++) {
        g->b[k].req = MPI_REQUEST_NULL;
        rc = bucket_copy(g, &g->b[k], true, g_size);
    }
    free(reqs);
    for (int k = 0; k < g->nb; k++) g->b[k].started = false, g->b[k].ready = 0;
    g->next = 0;
    g->st.wait_s += now() - t0;
    return rc;
}
#endif
