/* The profiler (profile.h): a table of rows (name, direction), filled by
 * hooks in the tape, the pool and the library's regions.
 *
 * Time is charged, never sampled: the profiled thread keeps a mark (the
 * last moment charged), and every event charges [mark, now) to one row and
 * moves the mark:
 *   op start      -> the innermost region (or "(other)"): the code between ops
 *   op end        -> the op (forward or backward)
 *   region begin  -> the enclosing region; region end -> the region
 * So the rows partition the profiled time exactly (their sum is the total)
 * and nesting needs no subtraction. Pool jobs between two events are added
 * to the row charged next, which is the op or region they ran in. */
#define _GNU_SOURCE
#include "profile_internal.h"
#include "tensor.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

bool tg__prof_on;

enum { MAX_ROWS = 256, MAX_DEPTH = 32 };

typedef struct {
    double par_ns, busy_ns, wait_ns, flops, bytes;
    int64_t jobs, par_jobs;
    int max_threads;
} pending;

static struct {
    pthread_t owner;
    bool have_owner;
    int64_t t_begin, t_end, mark;
    tg_profile_entry rows[MAX_ROWS];
    int nrows;
    pending pend;
    int stack[MAX_DEPTH]; /* open regions' rows */
    int depth;            /* may exceed MAX_DEPTH: those levels charge the deepest kept */
} P;

int64_t tg__prof_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

bool tg__prof_owner(void) { return P.have_owner && pthread_equal(P.owner, pthread_self()); }

const char *tg_prof_dir_name(tg_prof_dir dir) {
    static const char *names[] = {"forward", "backward", "optimizer", "data", "checkpoint", "other"};
    return dir >= 0 && dir < TG_PROF_NDIRS ? names[dir] : "?";
}

/* The row of (name, dir): names are the ops' and regions' static strings,
 * so the pointer is compared first. */
static int row_of(const char *name, tg_prof_dir dir) {
    for (int i = 0; i < P.nrows; i++)
        if (P.rows[i].dir == dir && (P.rows[i].name == name || strcmp(P.rows[i].name, name) == 0)) return i;
    if (P.nrows == MAX_ROWS) return MAX_ROWS - 1; /* full: the last row takes the rest */
    tg_profile_entry *e = &P.rows[P.nrows];
    memset(e, 0, sizeof *e);
    e->name = name;
    e->dir = dir;
    e->max_threads = 1;
    return P.nrows++;
}

static int current_row(void) {
    if (P.depth > 0) return P.stack[(P.depth < MAX_DEPTH ? P.depth : MAX_DEPTH) - 1];
    return row_of("(other)", TG_PROF_OTHER);
}

/* [mark, now) and the pending pool jobs to row r. */
static void charge(int r) {
    int64_t now = tg__prof_now();
    tg_profile_entry *e = &P.rows[r];
    e->wall_ns += (double)(now - P.mark);
    e->par_ns += P.pend.par_ns;
    e->busy_ns += P.pend.busy_ns;
    e->wait_ns += P.pend.wait_ns;
    e->flops += P.pend.flops;
    e->bytes += P.pend.bytes;
    e->jobs += P.pend.jobs;
    e->par_jobs += P.pend.par_jobs;
    if (P.pend.max_threads > e->max_threads) e->max_threads = P.pend.max_threads;
    memset(&P.pend, 0, sizeof P.pend);
    P.mark = now;
}

void tg__prof_op_start(void) {
    if (tg__prof_owner()) charge(current_row());
}

void tg__prof_op_end(const char *name, tg_prof_dir dir, double flops, double bytes) {
    if (!tg__prof_owner()) return;
    P.pend.flops += flops;
    P.pend.bytes += bytes;
    int r = row_of(name, dir);
    P.rows[r].calls++;
    charge(r);
}

void tg__prof_job(int threads, double wall_ns, double busy_ns, double wait_ns) {
    P.pend.jobs++;
    if (threads >= 2) {
        P.pend.par_jobs++;
        P.pend.par_ns += wall_ns;
        P.pend.busy_ns += busy_ns;
        P.pend.wait_ns += wait_ns;
    }
    if (threads > P.pend.max_threads) P.pend.max_threads = threads;
}

void tg_profile_begin(void) {
    memset(&P, 0, sizeof P);
    P.owner = pthread_self();
    P.have_owner = true;
    P.t_begin = P.mark = tg__prof_now();
    tg__prof_on = true;
}

void tg_profile_end(void) {
    if (!tg__prof_on || !tg__prof_owner()) return;
    charge(current_row()); /* open regions keep what they ran so far */
    P.t_end = P.mark;
    tg__prof_on = false;
}

bool tg_profile_enabled(void) { return tg__prof_on; }

double tg_profile_total_ns(void) {
    if (!P.have_owner) return 0;
    return (double)((tg__prof_on ? tg__prof_now() : P.t_end) - P.t_begin);
}

void tg_profile_region_begin(tg_prof_dir dir, const char *name) {
    if (!TG_PROF_ON() || !tg__prof_owner()) return;
    charge(current_row());
    int r = row_of(name ? name : "(unnamed)", dir);
    if (P.depth < MAX_DEPTH) P.stack[P.depth] = r;
    P.depth++;
}

void tg_profile_region_end(void) {
    if (!TG_PROF_ON() || !tg__prof_owner() || P.depth == 0) return;
    int r = current_row();
    P.rows[r].calls++;
    charge(r);
    P.depth--;
}

void tg_profile_add_work(double flops, double bytes) {
    if (!TG_PROF_ON() || !tg__prof_owner()) return;
    P.pend.flops += flops;
    P.pend.bytes += bytes;
}

static int by_wall(const void *a, const void *b) {
    const tg_profile_entry *x = a, *y = b;
    return (x->wall_ns < y->wall_ns) - (x->wall_ns > y->wall_ns);
}

int tg_profile_entries(tg_profile_entry *out, int cap) {
    if (out && cap > 0) {
        tg_profile_entry sorted[MAX_ROWS];
        memcpy(sorted, P.rows, sizeof(tg_profile_entry) * (size_t)P.nrows);
        qsort(sorted, (size_t)P.nrows, sizeof *sorted, by_wall);
        memcpy(out, sorted, sizeof(tg_profile_entry) * (size_t)(cap < P.nrows ? cap : P.nrows));
    }
    return P.nrows;
}

/* Derived columns of a row. */
typedef struct {
    double per_step, share, us_call, serial_us_call, threads, wait_pct, gflops, gbs;
} derived;

static derived derive(const tg_profile_entry *e, double total, int steps) {
    derived d;
    double serial = e->wall_ns - e->par_ns;
    /* a row with no calls ((other): time between ops) is per step, not the whole profile's as one call */
    double calls = e->calls > 0 ? (double)e->calls : steps > 0 ? steps : 1;
    d.per_step = e->wall_ns * 1e-6 / (steps > 0 ? steps : 1);
    d.share = total > 0 ? 100 * e->wall_ns / total : 0;
    d.us_call = e->wall_ns * 1e-3 / calls;
    d.serial_us_call = (serial > 0 ? serial : 0) * 1e-3 / calls;
    /* average threads busy over the row's time: its one-thread part plus the jobs' share time */
    d.threads = e->wall_ns > 0 ? ((serial > 0 ? serial : 0) + e->busy_ns) / e->wall_ns : 0;
    d.wait_pct = e->wall_ns > 0 ? 100 * e->wait_ns / e->wall_ns : 0;
    d.gflops = e->wall_ns > 0 ? e->flops / e->wall_ns : 0; /* flops per ns = GFLOP/s */
    d.gbs = e->wall_ns > 0 ? e->bytes / e->wall_ns : 0;
    return d;
}

int tg_profile_print(FILE *f, int steps) {
    tg_profile_entry rows[MAX_ROWS];
    int n = tg_profile_entries(rows, MAX_ROWS);
    double total = tg_profile_total_ns();
    fprintf(f, "profile: %.3f ms%s, %d thread%s, %d rows (self time; the rows add up to the total)\n",
            total * 1e-6 / (steps > 0 ? steps : 1), steps > 0 ? " per step" : "", tg_get_num_threads(),
            tg_get_num_threads() > 1 ? "s" : "", n);
    double serial = 0, wait = 0, jobs = 0, par_jobs = 0, per = steps > 0 ? steps : 1;
    for (int i = 0; i < n; i++)
        if (rows[i].name[0] != '(') { /* the library's rows, not the program's own code */
            serial += rows[i].wall_ns - rows[i].par_ns;
            wait += rows[i].wait_ns;
            jobs += (double)rows[i].jobs;
            par_jobs += (double)rows[i].par_jobs;
        }
    /* the part a larger machine cannot shorten, and how often the pool hands work over */
    fprintf(f, "on one thread (ops and regions): %.3f ms%s (%.1f%%); pool jobs %.0f (%.0f split), waited %.3f ms\n",
            serial * 1e-6 / per, steps > 0 ? " per step" : "", total > 0 ? 100 * serial / total : 0, jobs / per,
            par_jobs / per, wait * 1e-6 / per);
    fprintf(f,
            "| op | direction | calls%s | ms%s | share | us/call | of which 1 thread | threads busy | pool wait "
            "| GFLOP/s | GB/s |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
            steps > 0 ? "/step" : "", steps > 0 ? "/step" : "");
    for (int i = 0; i < n; i++) {
        const tg_profile_entry *e = &rows[i];
        derived d = derive(e, total, steps);
        fprintf(f, "| %s | %s | %.4g | %.3f | %.1f%% | %.1f | %.1f | %.2f (max %d) | %.1f%% | %.1f | %.1f |\n", e->name,
                tg_prof_dir_name(e->dir), steps > 0 ? (double)e->calls / steps : (double)e->calls, d.per_step, d.share,
                d.us_call, d.serial_us_call, d.threads, e->max_threads, d.wait_pct, d.gflops, d.gbs);
    }
    return ferror(f) ? -1 : 0;
}

/* The run report's table format (train/report.h, tg_report_add_rows_file):
 * {"title", "columns", "rows": [[cells]]}, so a run folder's profile.json
 * shows on its report page as it is. Names are the library's op and region
 * names ([a-z_ ()] only: nothing to escape), which is why this layer, below
 * io's JSON writer, may print them directly. */
int tg_profile_write_json(FILE *f, int steps) {
    tg_profile_entry rows[MAX_ROWS];
    int n = tg_profile_entries(rows, MAX_ROWS);
    double total = tg_profile_total_ns(), per = steps > 0 ? steps : 1;
    fprintf(f,
            "{\"title\": \"Profile: %.3f ms%s, %d thread%s (self time per op)\",\n \"columns\": [\"op\", "
            "\"direction\", \"calls%s\", \"ms%s\", \"share %%\", \"one thread ms%s\", \"threads busy\", "
            "\"max threads\", \"pool wait ms%s\", \"GFLOP/s\", \"GB/s\"],\n \"rows\": [",
            total * 1e-6 / per, steps > 0 ? " per step" : "", tg_get_num_threads(), tg_get_num_threads() > 1 ? "s" : "",
            steps > 0 ? "/step" : "", steps > 0 ? "/step" : "", steps > 0 ? "/step" : "", steps > 0 ? "/step" : "");
    for (int i = 0; i < n; i++) {
        const tg_profile_entry *e = &rows[i];
        derived d = derive(e, total, steps);
        double serial = e->wall_ns - e->par_ns;
        fprintf(f, "%s\n  [\"%s\", \"%s\", %.6g, %.6f, %.2f, %.6f, %.3f, %d, %.6f, %.3f, %.3f]", i ? "," : "", e->name,
                tg_prof_dir_name(e->dir), (double)e->calls / per, d.per_step, d.share,
                (serial > 0 ? serial : 0) * 1e-6 / per, d.threads, e->max_threads, e->wait_ns * 1e-6 / per, d.gflops,
                d.gbs);
    }
    fprintf(f, "\n]}\n");
    return ferror(f) ? -1 : 0;
}

int tg_profile_save(const char *path, int steps) {
    if (!path) {
        tg_error_null("profile_save");
        return -1;
    }
    FILE *f = fopen(path, "w");
    if (!f) {
        tg_set_error("profile_save: cannot write %s", path);
        return -1;
    }
    size_t len = strlen(path);
    bool json = len >= 5 && strcmp(path + len - 5, ".json") == 0;
    int rc = json ? tg_profile_write_json(f, steps) : tg_profile_print(f, steps);
    if (fclose(f) != 0 || rc != 0) {
        tg_set_error("profile_save: writing %s failed", path);
        return -1;
    }
    return 0;
}

/* TG_PROFILE=1 profiles any program from its start and prints the table on
 * stderr at exit; TG_PROFILE=PATH writes it there instead (JSON for .json). */
static const char *g_env_path;

static void profile_at_exit(void) {
    if (!tg__prof_on) return;
    tg_profile_end();
    if (g_env_path)
        tg_profile_save(g_env_path, 0);
    else
        tg_profile_print(stderr, 0);
}

__attribute__((constructor)) static void profile_from_env(void) {
    const char *v = getenv("TG_PROFILE");
    if (!v || !*v || strcmp(v, "0") == 0) return;
    g_env_path = strcmp(v, "1") == 0 ? NULL : v;
    tg_profile_begin();
    atexit(profile_at_exit);
}
