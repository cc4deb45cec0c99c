/* A training run (run.h): the loop's bookkeeping that every training
 * program would otherwise write by hand: the step's learning rate,
 * gradient accumulation, the data-parallel averages, divergence, clipping,
 * the metrics log, progress, evaluations, checkpoints (periodic, best, on a
 * signal, at the end), early stopping, resume and extension. */
#define _DEFAULT_SOURCE /* flock (the run folder's lock) */
#include "run.h"
#include "../tensor/number.h"
#include "../tensor/profile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../distributed/dist.h"
#include "../io/checkpoint.h"
#include "../io/json.h"
#include "../viz/viz.h"

typedef enum { RUN_GOING, RUN_DONE, RUN_EARLY, RUN_STOPPED, RUN_SIGNALLED, RUN_FAILED } run_state;

struct tg_run {
    tg_run_config cfg;
    char *dir, *state_path, *best_path, *log_path, *meta; /* copies: the config's may be freed */
    tg_setting *settings;                                 /* a copy of the config's array */
    const tg_params *params;
    tg_optim *opt;
    const tg_rngs *rngs;
    tg_dist_grads *grads; /* data parallel: the gradient buckets */
    tg_metrics_log *log;
    bool lead, tty;
    run_state state;
    int signo;
    int64_t step, first, saved; /* steps done; at open; at the last checkpoint */
    int micro;                  /* micro-batches of this step so far */
    int sum_form;               /* this step's micro-batches: -1 none yet, 0 means (tg_run_backward), 1 sums */
    double count_acc;           /* sums: the counted targets so far */
    double loss_acc, lr, t_step, t_open, step_s_sum;
    tg_metrics line; /* this step's log line, written when its evaluation (or the next step) comes */
    bool line_pending, eval_due;
    /* history: the training loss of every step, the evaluations */
    float *train, *val_step, *val_loss;
    int64_t train_cap;
    int n_val, val_cap;
    double best, train_sum_since_eval, prev_val, prev_train;
    int64_t best_step, train_n_since_eval;
    int evals_since_best, evals_above; /* evaluations without a better loss; in a row above the best by a margin */
    double peak;                       /* GFLOP/s per core, or NaN */
    int (*on_save)(void *ctx, int64_t step);
    void *on_save_ctx;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- signals: SIGINT and SIGTERM stop the run at the end of the step ------- */
static volatile sig_atomic_t g_signal;
static struct sigaction g_old_int, g_old_term;
static void on_signal(int sig) { g_signal = sig; }
static void signals_catch(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    /* A second Ctrl-C takes the default action: the user insists. Any save
     * it interrupts is atomic, so the last checkpoint stays whole. */
    sa.sa_flags = SA_RESETHAND;
    g_signal = 0;
    sigaction(SIGINT, &sa, &g_old_int);
    sigaction(SIGTERM, &sa, &g_old_term);
}
static void signals_restore(void) {
    sigaction(SIGINT, &g_old_int, NULL);
    sigaction(SIGTERM, &g_old_term, NULL);
}

/* ---- paths and folders ------------------------------------------------------ */
char *tg_run_path(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

int tg_run_metrics_read(const char *dir, tg_metrics **lines, int64_t *n) {
    char *path = dir ? tg_run_path(dir, "metrics.jsonl") : NULL;
    if (!path) {
        tg_set_error("run_metrics_read: %s", dir ? "out of memory" : "NULL run folder");
        return -1;
    }
    int rc = tg_metrics_log_read(path, lines, n);
    free(path);
    return rc;
}

char *tg_run_checkpoint_of(const char *path) {
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) return tg_run_path(path, "train_state.safetensors");
    return strdup(path);
}

int tg_run_mkdir(const char *dir) {
    char *buf = strdup(dir);
    int rc = buf ? 0 : -1;
    for (char *s = buf ? buf + 1 : NULL; rc == 0 && s && *s; s++)
        if (*s == '/') {
            *s = 0;
            if (mkdir(buf, 0777) != 0 && errno != EEXIST) rc = -1;
            *s = '/';
        }
    struct stat sb;
    if (rc == 0 && mkdir(buf, 0777) != 0 && errno != EEXIST) rc = -1;
    if (rc == 0 && (stat(buf, &sb) != 0 || !S_ISDIR(sb.st_mode))) rc = -1;
    if (rc) tg_set_error("run: cannot create the folder %s: %s", dir, buf ? strerror(errno) : "out of memory");
    free(buf);
    return rc;
}

/* ---- the folder's lock ------------------------------------------------------- */
/* One writer per run folder: DIR/lock, flock'ed for as long as this process
 * writes the run (until tg_run_close, or its exit: the kernel drops a
 * flock with the last descriptor, so a killed run leaves no stale lock)
 * and holding its pid for the refusal's message. The file stays: removing
 * it would let a third process lock a new file while the second still
 * holds the old one. One lock at a time per process: the folder of the
 * run being opened. */
static struct {
    int fd; /* -1: none held */
    dev_t dev;
    ino_t ino;
    pid_t pid; /* the holder: a forked child inherits the descriptor, not the run */
} g_lock = {-1, 0, 0, 0};

static void lock_release(void) {
    if (g_lock.fd >= 0 && g_lock.pid == getpid()) close(g_lock.fd);
    g_lock.fd = -1;
}
static bool lock_is_ours(const struct stat *sb) {
    return g_lock.fd >= 0 && g_lock.pid == getpid() && g_lock.dev == sb->st_dev && g_lock.ino == sb->st_ino;
}

/* The refusal when another process holds dir's lock (open as fd): names
 * the process whose id the lock file holds. */
static void lock_refused(int fd, const char *dir) {
    char pid[32] = "";
    ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
    pid[n > 0 ? n : 0] = 0;
    pid[strcspn(pid, "\n")] = 0;
    tg_set_error("run: %s is in use by process %s (another run writes it; wait for it to end, or choose another "
                 "folder)",
                 dir, pid[0] ? pid : "(unknown)");
}

static int lock_take(const char *dir) {
    char *path = tg_run_path(dir, "lock");
    if (!path) return tg_set_error("run: out of memory"), -1;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0666);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        tg_set_error("run: %s: cannot open the folder's lock: %s", path,
                     fd < 0 && errno == ELOOP ? "it is a symbolic link"
                     : fd < 0                 ? strerror(errno)
                                              : "not a file");
        if (fd >= 0) close(fd);
        return free(path), -1;
    }
    if (lock_is_ours(&sb)) { /* claimed already */
        close(fd);
        return free(path), 0;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        lock_refused(fd, dir);
        close(fd);
        return free(path), -1;
    }
    char pid[32];
    int k = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)k, 0) != k) {
        tg_set_error("run: %s: cannot write the lock: %s", path, strerror(errno));
        close(fd);
        return free(path), -1;
    }
    if (g_lock.pid == getpid()) lock_release(); /* else a parent's, inherited: not this process's to close */
    g_lock.fd = fd, g_lock.dev = sb.st_dev, g_lock.ino = sb.st_ino, g_lock.pid = getpid();
    free(path);
    return 0;
}

/* Before reading a run's files (tg_run_settings_resume): when another
 * process holds dir's lock, -1 with the refusal recorded (its files may be
 * half made: a run before its first checkpoint has none). */
static int lock_probe(const char *dir) {
    char *path = tg_run_path(dir, "lock");
    int fd = path ? open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK) : -1, rc = 0;
    struct stat sb;
    free(path);
    if (fd < 0) return 0; /* no lock file: no run has written here */
    bool ours = fstat(fd, &sb) == 0 && lock_is_ours(&sb);
    if (!ours && flock(fd, LOCK_SH | LOCK_NB) != 0) {
        lock_refused(fd, dir);
        rc = -1;
    }
    close(fd);
    return rc;
}

/* The folder a checkpoint path belongs to (a folder itself, or a file's
 * parent), resolved: malloc'd, NULL when it does not exist. */
static char *folder_of(const char *path) {
    struct stat sb;
    char *copy = strdup(path), *real = NULL;
    if (copy && stat(copy, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
        char *slash = strrchr(copy, '/');
        if (slash == copy)
            slash[1] = 0;
        else if (slash)
            *slash = 0;
        else
            strcpy(copy, ".");
    }
    if (copy) real = realpath(copy, NULL);
    free(copy);
    return real;
}

int tg_run_claim(const tg_run_config *cfg) {
    if (!cfg || !cfg->dir || !*cfg->dir) return tg_set_error("run: claim: no folder"), -1;
    if (tg_dist_rank() != 0) return 0; /* rank 0 writes the folder */
    if (cfg->init_from) {
        char *a = folder_of(cfg->init_from), *b = folder_of(cfg->dir);
        bool same = a && b && strcmp(a, b) == 0;
        free(a), free(b);
        if (same)
            return tg_set_error("run: --init-from %s and --out %s are one folder: the new run would replace the one it "
                                "starts from (choose another --out)",
                                cfg->init_from, cfg->dir),
                   -1;
    }
    if (tg_run_mkdir(cfg->dir) != 0 || lock_take(cfg->dir) != 0) return -1;
    if (cfg->resume || cfg->overwrite) return 0;
    /* A new run never replaces one without being told (a forgotten
     * --resume would wipe it, best.safetensors included). */
    const char *names[] = {"train_state.safetensors", "best.safetensors"};
    for (int i = 0; i < 2; i++) {
        char *p = tg_run_path(cfg->dir, names[i]);
        struct stat sb;
        bool there = p && lstat(p, &sb) == 0 && S_ISREG(sb.st_mode); /* a symlink there is replaced, not a run */
        free(p);
        if (there) {
            lock_release();
            return tg_set_error("run: %s holds a run: continue it with --resume %s, start a new run from its weights "
                                "with --init-from %s --out OTHER, or replace it with --overwrite",
                                cfg->dir, cfg->dir, cfg->dir),
                   -1;
        }
    }
    return 0;
}

/* ---- failure ------------------------------------------------------------------ */
static bool fail(tg_run *r, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static bool fail(tg_run *r, const char *fmt, ...) {
    if (fmt) {
        char msg[8192];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        tg_set_error("%s", msg);
    }
    r->state = RUN_FAILED;
    return false;
}

/* ---- history ---------------------------------------------------------------- */
static int history_grow(tg_run *r, int64_t steps) {
    if (steps <= r->train_cap) return 0;
    float *t = realloc(r->train, sizeof(float) * (size_t)steps);
    if (!t) return -1;
    for (int64_t i = r->train_cap; i < steps; i++) t[i] = NAN;
    r->train = t, r->train_cap = steps;
    return 0;
}

static int history_add_val(tg_run *r, int64_t step, double v) {
    if (r->n_val == r->val_cap) {
        int cap = r->val_cap ? 2 * r->val_cap : 64;
        float *a = realloc(r->val_step, sizeof(float) * (size_t)cap);
        if (a) r->val_step = a;
        float *b = a ? realloc(r->val_loss, sizeof(float) * (size_t)cap) : NULL;
        if (b) r->val_loss = b;
        if (!a || !b) return -1;
        r->val_cap = cap;
    }
    r->val_step[r->n_val] = (float)step, r->val_loss[r->n_val++] = (float)v;
    return 0;
}

/* ---- settings ---------------------------------------------------------------- */
void tg_setting_text(const tg_setting *e, char *buf, size_t cap) {
    if (!cap) return;
    buf[0] = 0;
    if (e->type == TG_SETTING_INT) snprintf(buf, cap, "%d", *(const int *)e->value);
    if (e->type == TG_SETTING_REAL) snprintf(buf, cap, "%.17g", *(const double *)e->value);
    if (e->type == TG_SETTING_BOOL) snprintf(buf, cap, "%s", *(const bool *)e->value ? "true" : "false");
    if (e->type == TG_SETTING_STRING) {
        const char *v = *(const char *const *)e->value;
        snprintf(buf, cap, "%s", v ? v : "");
    }
}

/* Strings read from checkpoints into the program's settings: kept until the
 * process ends (reachable from here, so no leak checker counts them). */
static char **g_strs;
static int g_n_strs;
static const char *keep_string(const char *v) {
    char **a = realloc(g_strs, sizeof *a * (size_t)(g_n_strs + 1)), *copy = a ? strdup(v) : NULL;
    if (a) g_strs = a;
    if (copy) g_strs[g_n_strs++] = copy;
    return copy;
}

/* A setting's value read from its metadata text v into *iv, *dv or *bv by
 * its type and range: 0, or -1. */
static int setting_parse(const tg_setting *e, const char *v, int *iv, double *dv, bool *bv) {
    int64_t n;
    bool ranged = e->min < e->max;
    switch (e->type) {
    case TG_SETTING_INT:
        if (tg_parse_int64(v, &n) != 0 || n < INT_MIN || n > INT_MAX || (ranged && (n < e->min || n > e->max)))
            return -1;
        *iv = (int)n;
        return 0;
    case TG_SETTING_REAL: return tg_parse_real(v, dv) != 0 || (ranged && (*dv < e->min || *dv > e->max)) ? -1 : 0;
    case TG_SETTING_BOOL: *bv = strcmp(v, "true") == 0; return *bv || strcmp(v, "false") == 0 ? 0 : -1;
    default: return 0;
    }
}

/* The settings against the checkpoint file of the run in dir. Not late
 * (before the program builds anything): a setting not given takes the
 * file's value, a given one that differs is applied and said when
 * changeable. Late (tg_run_open): each compared as it is now, only fixed
 * ones, silently. 0; 1 a fixed one differs; -1 a bad file or value. */
static int settings_against(const char *file, const char *dir, tg_setting *set, int n, bool late) {
    tg_safetensors st;
    if (tg_safetensors_open(file, &st) != 0) return -1;
    int rc = 0;
    for (int i = 0; rc == 0 && i < n; i++) {
        tg_setting *e = &set[i];
        const char *key = e->key ? e->key : e->name;
        long len = tg_safetensors_meta(&st, key, NULL, 0);
        if (len < 0) continue; /* a state written before this setting: the value stays */
        char *v = malloc((size_t)len + 1), now[4096];
        int iv = 0;
        double dv = 0;
        bool bv = false;
        if (!v) {
            tg_set_error("run: out of memory");
            rc = -1;
            break;
        }
        tg_safetensors_meta(&st, key, v, (size_t)len + 1);
        if (setting_parse(e, v, &iv, &dv, &bv) != 0) {
            tg_set_error("run: %s: metadata '%s' is '%s': not %s", file, key, v,
                         e->type == TG_SETTING_BOOL ? "true or false"
                         : e->min < e->max          ? "a number in the setting's range"
                                                    : "a finite number");
            rc = -1;
        }
        /* only a string setting's value is a pointer (an int's may not even be 8 bytes) */
        const char *sv = e->type == TG_SETTING_STRING ? *(const char *const *)e->value : NULL;
        bool same = e->type == TG_SETTING_INT    ? *(int *)e->value == iv
                    : e->type == TG_SETTING_REAL ? *(double *)e->value == dv
                    : e->type == TG_SETTING_BOOL ? *(bool *)e->value == bv
                                                 : strcmp(sv ? sv : "", v) == 0;
        tg_setting_text(e, now, sizeof now);
        if (rc != 0 || same) {
        } else if (!late && !e->given) { /* left out: the run's value */
            if (e->type == TG_SETTING_INT) *(int *)e->value = iv;
            if (e->type == TG_SETTING_REAL) *(double *)e->value = dv;
            if (e->type == TG_SETTING_BOOL) *(bool *)e->value = bv;
            if (e->type == TG_SETTING_STRING && !(*(const char **)e->value = v[0] ? keep_string(v) : NULL) && v[0])
                rc = -1, tg_set_error("run: out of memory");
        } else if (!e->changeable && late) { /* a setting the program knows only now, e.g. the data's size */
            tg_set_error("run: %s is %s here, but the run in %s has %s, which cannot change on resume", e->name,
                         now[0] ? now : "(none)", dir, v[0] ? v : "(none)");
            rc = 1;
        } else if (!e->changeable) {
            tg_set_error("--%s %s: the run in %s has %s, which cannot change on resume (start a new run from its "
                         "weights with --init-from %s --out OTHER)",
                         e->name, now[0] ? now : "(none)", dir, v[0] ? v : "(none)", dir);
            rc = 1;
        } else if (!late) {
            printf("resume: --%s %s (the run had %s)\n", e->name, now, v);
        }
        free(v);
    }
    tg_safetensors_close(&st);
    return rc;
}

int tg_run_settings_resume(const char *dir, tg_setting *set, int n) {
    if (!dir || (n > 0 && !set) || n < 0) return tg_set_error("run: settings: NULL folder or settings"), -1;
    char *file = tg_run_checkpoint_of(dir), *folder = file ? folder_of(dir) : NULL;
    if (!file) return tg_set_error("run: out of memory"), -1;
    if (folder && lock_probe(folder) != 0) return free(file), free(folder), -1;
    free(folder);
    int rc = settings_against(file, dir, set, n, false);
    fflush(stdout);
    free(file);
    return rc;
}

/* ---- checkpoints ------------------------------------------------------------ */
/* The profile of the run's steps so far (profile.h), when the program
 * started one: profile.txt (the table) and profile.json (the report's table
 * format) in the run's folder. */
static int profile_files(const tg_run *r) {
    int steps = (int)(r->step - r->first);
    char path[4096];
    snprintf(path, sizeof path, "%s/profile.txt", r->dir);
    if (tg_profile_save(path, steps) != 0) return -1;
    snprintf(path, sizeof path, "%s/profile.json", r->dir);
    return tg_profile_save(path, steps);
}

/* The model's metadata, the run's settings and its own keys (best so far,
 * patience): one JSON object of string values for the training state
 * (which reads it and writes it again, train_state.c). */
static char *state_meta(const tg_run *r) {
    tg_json_writer w = {0};
    char text[64];
    tg_json_begin(&w, '{');
    for (int i = 0; i < r->cfg.n_settings; i++) {
        const tg_setting *e = &r->settings[i];
        const char *v = e->type == TG_SETTING_STRING ? *(const char *const *)e->value : text;
        if (e->type != TG_SETTING_STRING) tg_setting_text(e, text, sizeof text);
        tg_json_key(&w, e->key ? e->key : e->name), tg_json_put_str(&w, v ? v : "");
    }
    snprintf(text, sizeof text, "%.17g", r->best);
    tg_json_key(&w, "run.best_val_loss"), tg_json_put_str(&w, text);
    snprintf(text, sizeof text, "%lld", (long long)r->best_step);
    tg_json_key(&w, "run.best_step"), tg_json_put_str(&w, text);
    snprintf(text, sizeof text, "%d", r->evals_since_best);
    tg_json_key(&w, "run.evals_since_best"), tg_json_put_str(&w, text);
    snprintf(text, sizeof text, "%d", r->evals_above);
    tg_json_key(&w, "run.evals_above_best"), tg_json_put_str(&w, text);
    if (tg_get_precision() == TG_PREC_BF16) { /* which engine ran the bf16 products, and its measured peak */
        tg_bf16_engine_info e = tg_bf16_engine();
        snprintf(text, sizeof text, isnan(e.gflops) ? "%s" : "%s (%.0f GFLOP/s a core, measured)", e.engine, e.gflops);
        tg_json_key(&w, "run.bf16_engine"), tg_json_put_str(&w, text);
    }
    tg_json_end(&w);
    char *own = tg_json_finish(&w, "run: settings");
    /* The model's object (a JSON object of strings) and ours, one object. */
    const char *m = r->meta;
    size_t n = m ? strlen(m) : 0;
    while (n > 0 && m[n - 1] != '}') n--;
    size_t k = n ? n - 1 : 0;
    while (k > 0 && (m[k - 1] == ' ' || m[k - 1] == '\n')) k--;
    bool members = k > 0 && m[k - 1] != '{';
    if (!own || !k) return own; /* NULL: the writer's error is recorded */
    tg_strbuf b = {0};
    tg_strbuf_put(&b, m, k), tg_strbuf_str(&b, members ? "," : ""), tg_strbuf_str(&b, own + 1);
    free(own);
    if (b.oom) free(b.p), tg_set_error("run: out of memory");
    return b.oom ? NULL : b.p;
}

static int save_to(tg_run *r, const char *path) {
    char *meta = state_meta(r);
    int rc = meta ? tg_train_state_save_meta(path, r->params, r->opt, r->step, r->rngs->item, r->rngs->n, meta) : -1;
    if (!meta) tg_set_error("run: out of memory");
    free(meta);
    return rc;
}

/* The checkpoint of this step (rank 0 writes; every rank calls). A weight
 * that is not finite fails the run first, so the last good checkpoint
 * stays. */
static int save(tg_run *r, bool best) {
    int64_t at = 0;
    int bad = -1;
    if (tg_params_first_nonfinite(r->params, &bad, &at)) {
        fail(r,
             "run: step %lld made the weights non-finite ('%s' holds %g at index %lld); the last good checkpoint "
             "(step %lld, %s) is kept",
             (long long)r->step, r->params->items[bad].name, (double)r->params->items[bad].t->data[at], (long long)at,
             (long long)r->saved, r->state_path);
        return -1;
    }
    if (r->lead) {
        if (save_to(r, r->state_path) != 0 || (best && save_to(r, r->best_path) != 0)) return fail(r, NULL), -1;
        /* the profile so far, before on_save, so the report written there shows it */
        if (tg_profile_enabled() && profile_files(r) != 0) return fail(r, NULL), -1;
        if (r->on_save && r->on_save(r->on_save_ctx, r->step) != 0) return fail(r, NULL), -1;
    }
    /* Data parallel: the others wait for rank 0's files here, at a barrier
     * without a deadline for them (dist.h), not in the next all-reduce,
     * which has one: a long save never kills a healthy job. */
    if (tg_dist_barrier() != 0) return fail(r, NULL), -1;
    r->saved = r->step;
    return 0;
}

/* ---- progress ------------------------------------------------------------------ */
/* "step 330/1200  loss 2.1234  val 2.2345  lr 1.90e-03  51234 tok/s  12.3 ms/step  41% of peak  80 s left" */
static void progress_text(const tg_run *r, char *buf, size_t cap, double val) {
    int64_t done = r->step - r->first, end = r->cfg.stop_after ? r->cfg.stop_after : r->cfg.steps;
    double ms = done > 0 ? 1e3 * r->step_s_sum / (double)done : NAN, el = now_s() - r->t_open;
    int k = snprintf(buf, cap, "step %5lld/%lld  loss %.4f", (long long)r->step, (long long)r->cfg.steps, r->line.loss);
    if (!isnan(val)) k += snprintf(buf + k, cap - (size_t)k, "  val %.4f", val);
    k += snprintf(buf + k, cap - (size_t)k, "  lr %.2e", r->lr);
    if (r->cfg.tokens_per_step > 0 && done > 0)
        k += snprintf(buf + k, cap - (size_t)k, "  %7.0f tok/s", r->cfg.tokens_per_step / (ms * 1e-3));
    if (done > 0) k += snprintf(buf + k, cap - (size_t)k, "  %6.1f ms/step", ms);
    if (r->cfg.flops_per_step > 0 && !isnan(r->peak) && done > 0) {
        double cores = tg_get_num_threads() * tg_dist_size();
        k += snprintf(buf + k, cap - (size_t)k, "  %3.0f%% of peak",
                      100 * r->cfg.flops_per_step / (ms * 1e-3) / (cores * r->peak * 1e9));
    }
    if (done > 0) snprintf(buf + k, cap - (size_t)k, "  %4.0f s left", el / (double)done * (double)(end - r->step));
}

/* On a terminal the live line is rewritten in place and each evaluation
 * leaves a permanent line above it; elsewhere, one line per evaluation. */
static void progress(const tg_run *r, bool permanent, double val) {
    if (!r->lead || r->cfg.quiet || (!permanent && !r->tty)) return;
    char line[512];
    progress_text(r, line, sizeof line, val);
    if (r->tty)
        fprintf(stderr, "\r%s\033[K%s", line, permanent ? "\n" : "");
    else
        fprintf(stderr, "%s\n", line);
}

static void say(const tg_run *r, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void say(const tg_run *r, const char *fmt, ...) {
    if (!r->lead || r->cfg.quiet) return;
    va_list ap;
    va_start(ap, fmt);
    if (r->tty) fputs("\r\033[K", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ---- opening ------------------------------------------------------------------- */
tg_run_config tg_run_defaults(const char *dir, int64_t steps) {
    tg_lr_schedule keep = {.kind = TG_LR_CONSTANT, .lr = NAN}; /* the optimizer's own rate */
    return (tg_run_config){.dir = dir, .steps = steps, .accum = 1, .schedule = keep, .eval_every = 100};
}

static int check_config(const tg_run_config *c) {
    const char *why = !c->dir || !*c->dir        ? "no folder"
                      : c->steps < 1             ? "steps must be at least 1"
                      : c->accum < 1             ? "accum must be at least 1"
                      : c->eval_every < 1        ? "eval_every must be at least 1"
                      : c->save_every < 0        ? "save_every must be 0 or more"
                      : c->patience < 0          ? "patience must be 0 or more"
                      : c->stop_after < 0        ? "stop_after must be 0 or more"
                      : c->stop_after > c->steps ? "stop_after is past steps"
                      : !(c->clip >= 0)          ? "clip must be 0 or more"
                      : !(c->max_loss >= 0)      ? "max_loss must be 0 or more"
                                                 : NULL;
    if (why) tg_set_error("run: %s: %s", c->dir ? c->dir : "(NULL)", why);
    return why ? -1 : 0;
}

/* The run's own metadata keys of a resumed checkpoint (absent in a state
 * written before them: nothing known). */
static int read_run_meta(tg_run *r) {
    tg_safetensors st;
    if (tg_safetensors_open(r->state_path, &st) != 0) return -1;
    char v[64];
    double best;
    int64_t s, k;
    if (tg_safetensors_meta(&st, "run.best_val_loss", v, sizeof v) > 0)
        r->best = tg_parse_real(v, &best) == 0 && best >= 0 ? best : NAN; /* "nan": none yet */
    if (tg_safetensors_meta(&st, "run.best_step", v, sizeof v) > 0)
        r->best_step = tg_parse_int64(v, &s) == 0 && s >= 0 && s <= r->step ? s : 0;
    if (tg_safetensors_meta(&st, "run.evals_since_best", v, sizeof v) > 0)
        r->evals_since_best = tg_parse_int64(v, &k) == 0 && k >= 0 && k < 1000000000 ? (int)k : 0;
    if (tg_safetensors_meta(&st, "run.evals_above_best", v, sizeof v) > 0)
        r->evals_above = tg_parse_int64(v, &k) == 0 && k >= 0 && k < 1000000000 ? (int)k : 0;
    tg_safetensors_close(&st);
    return 0;
}

/* The log of a resumed run, cut back to its step, and its history. */
static int open_log(tg_run *r) {
    tg_metrics *lines = NULL;
    int64_t n = 0;
    r->log = r->lead ? tg_metrics_log_resume(r->log_path, r->step, &lines, &n) : NULL;
    if (r->lead && !r->log) return -1;
    int rc = 0;
    for (int64_t i = 0; rc == 0 && i < n; i++) {
        r->train[lines[i].step - 1] = (float)lines[i].loss;
        if (!isnan(lines[i].val_loss)) rc = history_add_val(r, lines[i].step, lines[i].val_loss);
        if (!isnan(lines[i].val_loss)) r->prev_val = lines[i].val_loss;
    }
    if (n < r->step && r->step > 0)
        say(r, "run: %s holds the lines of %lld of the %lld steps done; the curves have a gap", r->log_path,
            (long long)n, (long long)r->step);
    tg_sys_free(lines);
    if (rc) tg_set_error("run: out of memory");
    return rc;
}

/* A new run in a folder that holds another (tg_run_claim allowed it:
 * overwrite): its checkpoint and best go, so that a later --resume cannot
 * mix the two. */
static int replace_old(tg_run *r) {
    struct stat sb;
    if (lstat(r->state_path, &sb) == 0) say(r, "run: --overwrite: the run in %s is replaced", r->dir);
    if ((unlink(r->state_path) != 0 && errno != ENOENT) || (unlink(r->best_path) != 0 && errno != ENOENT)) {
        tg_set_error("run: %s: cannot remove the old run's checkpoint: %s", r->dir, strerror(errno));
        return -1;
    }
    return 0;
}

/* Everything the run owns but its log (closed apart: its failure counts). */
static void run_free(tg_run *r) {
    signals_restore();
    if (r->lead) lock_release();
    tg_dist_grads_free(r->grads);
    free(r->train), free(r->val_step), free(r->val_loss);
    free(r->dir), free(r->state_path), free(r->best_path), free(r->log_path), free(r->meta), free(r->settings);
    free(r);
}

tg_run *tg_run_open(const tg_run_config *cfg, const tg_params *params, tg_optim *opt, const tg_rngs *rngs) {
    if (!cfg || !params || !opt || !rngs) {
        tg_set_error("run: NULL %s", !cfg ? "config" : !params ? "params" : !opt ? "optimizer" : "rngs");
        return NULL;
    }
    if (check_config(cfg) != 0) return NULL;
    tg_run *r = calloc(1, sizeof *r);
    if (!r) {
        tg_set_error("run: out of memory");
        return NULL;
    }
    r->cfg = *cfg, r->params = params, r->opt = opt, r->rngs = rngs;
    r->lead = tg_dist_rank() == 0, r->tty = isatty(2);
    r->best = NAN, r->prev_val = NAN, r->prev_train = NAN, r->peak = NAN;
    r->dir = strdup(cfg->dir), r->cfg.dir = r->dir;
    r->meta = cfg->meta ? strdup(cfg->meta) : NULL, r->cfg.meta = r->meta;
    r->settings = cfg->n_settings > 0 ? malloc(sizeof *r->settings * (size_t)cfg->n_settings) : NULL;
    if (r->settings) memcpy(r->settings, cfg->settings, sizeof *r->settings * (size_t)cfg->n_settings);
    r->cfg.settings = r->settings;
    r->state_path = tg_run_path(cfg->dir, "train_state.safetensors");
    r->best_path = tg_run_path(cfg->dir, "best.safetensors");
    r->log_path = tg_run_path(cfg->dir, "metrics.jsonl");
    if (!r->dir || !r->state_path || !r->best_path || !r->log_path || (cfg->meta && !r->meta) ||
        (cfg->n_settings > 0 && !r->settings)) {
        tg_set_error("run: out of memory");
        goto fail;
    }
    if (tg_run_claim(cfg) != 0) {
        free(r->dir), free(r->state_path), free(r->best_path), free(r->log_path), free(r->meta), free(r->settings);
        free(r);
        return NULL; /* not run_free: the lock (another run's folder, or none) is not this run's to drop */
    }
    signals_catch(); /* from here a signal stops the run at a step's end */
    if (cfg->resume) {
        /* The settings as the program now has them (filled by
         * tg_run_settings_resume, or late ones such as the data's size)
         * against the run's: a fixed one that differs is refused. */
        if (settings_against(r->state_path, r->dir, r->settings, cfg->n_settings, true) != 0 ||
            tg_train_state_load(r->state_path, params, opt, &r->step, rngs->item, rngs->n) != 0 ||
            read_run_meta(r) != 0)
            goto fail;
        if (r->step >= cfg->steps) {
            tg_set_error("run: %s is at step %lld of %lld: nothing to do (a larger steps extends it)", r->dir,
                         (long long)r->step, (long long)cfg->steps);
            goto fail;
        }
        if (cfg->stop_after && r->step >= cfg->stop_after) {
            tg_set_error("run: %s is at step %lld, past stop_after %lld", r->dir, (long long)r->step,
                         (long long)cfg->stop_after);
            goto fail;
        }
    } else if (r->lead && replace_old(r) != 0) {
        goto fail;
    }
    r->first = r->saved = r->step;
    if (history_grow(r, cfg->steps) != 0 || open_log(r) != 0) goto fail;
    /* Data parallel: every rank from rank 0's weights (the same file, or
     * rank 0's initialisation), and the buckets that average gradients. */
    if (tg_dist_broadcast_params(params) != 0 || (tg_dist_active() && !(r->grads = tg_dist_grads_new(params, 0))))
        goto fail;
    if (cfg->flops_per_step > 0 && r->lead && !cfg->quiet) r->peak = tg_fma_peak_measure(0.05).gflops;
    r->t_open = now_s();
    /* A profile the program started (lm --profile) covers the steps, not the setup. */
    if (tg_profile_enabled()) tg_profile_begin();
    return r;
fail:
    tg_metrics_log_close(r->log);
    run_free(r);
    return NULL;
}

const char *tg_run_dir(const tg_run *r) { return r ? r->dir : NULL; }

void tg_run_on_save(tg_run *r, int (*fn)(void *ctx, int64_t step), void *ctx) {
    if (r) r->on_save = fn, r->on_save_ctx = ctx;
}

/* ---- the loop ------------------------------------------------------------------ */
static int write_line(tg_run *r) {
    if (!r->line_pending) return 0;
    r->line_pending = false;
    if (r->lead && tg_metrics_log_write(r->log, &r->line) != 0) return fail(r, NULL), -1;
    return 0;
}

bool tg_run_next(tg_run *r) {
    if (!r || write_line(r) != 0 || r->state != RUN_GOING) return false;
    if (r->step >= r->cfg.steps) r->state = RUN_DONE;
    if (r->cfg.stop_after && r->step >= r->cfg.stop_after) r->state = RUN_STOPPED;
    /* Under data parallelism every rank learned of a signal from the
     * step's all-reduce (r->signo), so all stop at the same step. */
    if (r->signo || (!tg_dist_active() && g_signal)) {
        r->signo = r->signo ? r->signo : g_signal;
        r->state = RUN_SIGNALLED;
    }
    if (r->state != RUN_GOING) return false;
    const tg_lr_schedule *s = &r->cfg.schedule;
    bool keep = s->kind == TG_LR_CONSTANT && isnan(s->lr); /* tg_run_defaults: the optimizer's own rate */
    r->lr = keep ? (double)tg_optim_lr(r->opt) : tg_lr_at(s, r->step);
    if (isnan(r->lr) || tg_optim_set_lr(r->opt, (tg_real)r->lr) != 0) return fail(r, NULL);
    tg_optim_zero_grad(r->opt);
    r->micro = 0, r->loss_acc = 0, r->eval_due = false, r->sum_form = -1, r->count_acc = 0;
    r->t_step = now_s();
    return true;
}

/* One micro-batch's backward of loss times scale (1: as it is); its value
 * (times value_scale) joins the step's loss. */
static int micro_backward(tg_run *r, tg_tensor *loss, int sum_form, double scale) {
    if (!r || r->state != RUN_GOING) return -1;
    if (!loss) return fail(r, NULL), -1;
    if (r->sum_form >= 0 && r->sum_form != sum_form)
        return fail(r, "run: step %lld mixes tg_run_backward and tg_run_backward_sum", (long long)r->step + 1), -1;
    r->sum_form = sum_form;
    r->loss_acc += (double)tg_item(loss) * scale;
    /* The last micro-batch's backward starts the gradient all-reduce. */
    if (r->grads && r->micro == r->cfg.accum - 1 && tg_dist_grads_arm(r->grads) != 0) return fail(r, NULL), -1;
    if (tg_backward(scale != 1 ? tg_mul_scalar(loss, (tg_real)scale) : loss) != 0) return fail(r, NULL), -1;
    r->micro++;
    return 0;
}

int tg_run_backward(tg_run *r, tg_tensor *loss) { return micro_backward(r, loss, 0, r ? 1.0 / r->cfg.accum : 1); }

int tg_run_backward_sum(tg_run *r, tg_tensor *loss_sum, int64_t counted) {
    if (r && r->state == RUN_GOING && counted < 0)
        return fail(r, "run: tg_run_backward_sum: %lld counted targets", (long long)counted), -1;
    if (r) r->count_acc += (double)counted;
    return micro_backward(r, loss_sum, 1, 1);
}

/* Every gradient times s. */
static void scale_grads(const tg_params *p, double s) {
    for (int i = 0; i < p->n; i++) {
        tg_tensor *g = p->items[i].t ? p->items[i].t->grad : NULL;
        for (int64_t k = 0; g && k < g->size; k++) g->data[k] = (tg_real)(g->data[k] * s);
    }
}

int tg_run_step(tg_run *r) {
    if (!r || r->state != RUN_GOING) return -1;
    if (r->micro != r->cfg.accum)
        return fail(r, "run: step %lld: %d micro-batches, accum is %d", (long long)r->step + 1, r->micro, r->cfg.accum),
               -1;
    /* Every rank's average gradient and loss (the mean of the shards'
     * means), and whether any rank was signalled. */
    double v[3] = {r->loss_acc, g_signal ? (double)g_signal : 0, r->count_acc};
    if (r->grads && (tg_dist_allreduce_grads(r->grads) != 0 || tg_dist_allreduce_sum(v, 3) != 0))
        return fail(r, NULL), -1;
    double loss = v[0] / tg_dist_size();
    if (r->sum_form == 1) { /* sums: the gradient and loss of one batch of all the counted targets */
        loss = v[2] > 0 ? v[0] / v[2] : 0;
        if (v[2] > 0) scale_grads(r->params, tg_dist_size() / v[2]); /* the all-reduce averaged the ranks' sums */
    }
    if (tg_dist_active() && v[1] > 0) r->signo = g_signal ? g_signal : SIGTERM;
    if (!isfinite(loss) || (r->cfg.max_loss > 0 && loss > r->cfg.max_loss))
        return fail(r,
                    "run: training diverged: the loss is %g at step %lld%s; the last good checkpoint (step %lld, "
                    "%s) is kept (try a smaller learning rate)",
                    loss, (long long)r->step + 1, isfinite(loss) ? " (above max_loss)" : "", (long long)r->saved,
                    r->state_path),
               -1;
    double gn = (double)tg_clip_grad_norm(r->params, (tg_real)(r->cfg.clip > 0 ? r->cfg.clip : INFINITY));
    tg_optim_step(r->opt);
    r->step++;
    double dt = now_s() - r->t_step;
    r->step_s_sum += dt;
    r->train[r->step - 1] = (float)loss;
    r->train_sum_since_eval += loss, r->train_n_since_eval++;
    r->line =
        (tg_metrics){r->step, r->lr, loss, NAN, r->cfg.tokens_per_step > 0 ? r->cfg.tokens_per_step / dt : NAN, gn};
    r->line_pending = true;
    int64_t s = r->step;
    r->eval_due = s % r->cfg.eval_every == 0 || s == r->cfg.steps || s == r->cfg.stop_after;
    progress(r, false, NAN);
    /* A checkpoint between evaluations (save_every), after the step's line. */
    if (!r->eval_due && r->cfg.save_every > 0 && s % r->cfg.save_every == 0)
        if (write_line(r) != 0 || save(r, false) != 0) return -1;
    return 0;
}

bool tg_run_eval_due(const tg_run *r) { return r && r->state == RUN_GOING && r->eval_due; }

/* Overfitting is a sustained rise, not noise: validation loss above its
 * best by more than RISE_MARGIN (relative) at RISE_EVALS evaluations in a
 * row while training loss falls. One evaluation above the best is what
 * sampling noise alone gives about half the time on a flat curve. */
enum { RISE_EVALS = 3 };
static const double RISE_MARGIN = 0.01;

/* Early stop: the model the run ends with is the best one. The last
 * model's checkpoint is written first (a resume continues from it), then
 * best.safetensors' weights come back into params and the program's own
 * files (on_save: a model export, a sample) are made from them. */
static int end_on_best(tg_run *r) {
    if (r->step > r->saved && save(r, false) != 0) return -1;
    if (r->best_step == r->step) return 0;
    if (tg_run_init_from(r->best_path, r->params) != 0) return fail(r, NULL), -1;
    if (r->lead && r->on_save && r->on_save(r->on_save_ctx, r->best_step) != 0) return fail(r, NULL), -1;
    return 0;
}

int tg_run_eval(tg_run *r, double val) {
    if (!r || r->state != RUN_GOING) return -1;
    if (isnan(val))
        return fail(r,
                    "run: the validation loss is NaN at step %lld: the model or the validation data holds a "
                    "non-finite value; the last good checkpoint (step %lld, %s) is kept",
                    (long long)r->step, (long long)r->saved, r->state_path),
               -1;
    r->eval_due = false;
    r->line.val_loss = val;
    if (write_line(r) != 0 || history_add_val(r, r->step, val) != 0) return fail(r, "run: out of memory"), -1;
    progress(r, true, val);
    /* Overfitting: a sustained rise above the best (RISE_EVALS) while
     * training loss (mean since the last evaluation) falls. */
    double train = r->train_sum_since_eval / (double)(r->train_n_since_eval ? r->train_n_since_eval : 1);
    r->evals_above = !isnan(r->best) && val > r->best * (1 + RISE_MARGIN) ? r->evals_above + 1 : 0;
    if (r->evals_above == RISE_EVALS && !(train >= r->prev_train))
        say(r,
            "warning: validation loss %.4f has stayed above its best (%.4f at step %lld, kept in %s) for %d "
            "evaluations while training loss fell to %.4f: overfitting?",
            val, r->best, (long long)r->best_step, r->best_path, RISE_EVALS, train);
    r->prev_val = val, r->prev_train = train, r->train_sum_since_eval = 0, r->train_n_since_eval = 0;
    bool better = isnan(r->best) || val < r->best;
    if (better)
        r->best = val, r->best_step = r->step, r->evals_since_best = 0;
    else
        r->evals_since_best++;
    bool due = r->cfg.save_every == 0 || r->step % r->cfg.save_every == 0;
    if ((due || better) && save(r, better) != 0) return -1; /* best.safetensors comes with a checkpoint */
    if (r->cfg.patience && r->evals_since_best >= r->cfg.patience && r->step < r->cfg.steps) {
        say(r,
            "early stop: no better validation loss in %d evaluations; the run ends on the best model (%.4f at step "
            "%lld, %s)",
            r->cfg.patience, r->best, (long long)r->best_step, r->best_path);
        r->state = RUN_EARLY;
        if (end_on_best(r) != 0) return -1;
    }
    return 0;
}

/* The profile of the run's steps, at its end (profile_files is also called
 * at each checkpoint, so the report of a save shows the profile so far). */
static int write_profile(tg_run *r) {
    tg_profile_end();
    if (profile_files(r) != 0) return -1;
    if (!r->cfg.quiet) printf("profile of %d steps: %s/profile.txt\n", (int)(r->step - r->first), r->dir);
    return 0;
}

int tg_run_close(tg_run *r) {
    if (!r) return 1;
    if (r->state == RUN_GOING) r->state = RUN_STOPPED; /* the caller left the loop: keep what it did */
    write_line(r);
    /* The last checkpoint: steps since the last one are not lost. */
    if (r->state != RUN_FAILED && r->step > r->saved) save(r, false);
    if (r->lead && r->tty && !r->cfg.quiet) fputs("\r\033[K", stderr);
    if (r->lead && r->step > r->first) {
        printf("trained steps %lld..%lld in %.1f s\n", (long long)r->first + 1, (long long)r->step,
               now_s() - r->t_open);
        if (r->grads) {
            tg_dist_stats ds = tg_dist_grads_stats(r->grads);
            printf("ddp: all-reduce of %.2f MB per step, %.2f ms per step waited for after backward; %ld of %ld "
                   "buckets started during backward\n",
                   ds.bytes / 1e6, 1e3 * ds.wait_s / (double)(ds.calls ? ds.calls : 1), ds.buckets_early,
                   ds.buckets_early + ds.buckets_late);
        }
        fflush(stdout);
    }
    int rc = r->state == RUN_FAILED ? 1 : r->state == RUN_SIGNALLED ? 128 + r->signo : 0;
    if (r->state == RUN_FAILED)
        fprintf(stderr, "%s\n", tg_last_error() ? tg_last_error() : "run: failed");
    else if (r->state == RUN_SIGNALLED)
        say(r, "stopped by signal %d at step %lld; saved %s (continue with --resume %s)", r->signo, (long long)r->step,
            r->state_path, r->dir);
    else if (r->state == RUN_STOPPED)
        say(r, "stopped at step %lld of %lld; saved %s (continue with --resume %s)", (long long)r->step,
            (long long)r->cfg.steps, r->state_path, r->dir);
    if (tg_metrics_log_close(r->log) != 0 && rc == 0) rc = 1;
    if (tg_profile_enabled() && r->lead && write_profile(r) != 0 && rc == 0) rc = 1;
    run_free(r);
    return rc;
}

/* ---- what the program shows ----------------------------------------------------- */
int64_t tg_run_steps_done(const tg_run *r) { return r ? r->step : 0; }
void tg_run_history(const tg_run *r, const float **train, int64_t *n_train, const float **val_step,
                    const float **val_loss, int *n_val) {
    *train = r->train, *n_train = r->step, *val_step = r->val_step, *val_loss = r->val_loss, *n_val = r->n_val;
}
bool tg_run_stopped_early(const tg_run *r) { return r && r->state == RUN_EARLY; }
double tg_run_best_val(const tg_run *r, int64_t *step) {
    if (step) *step = r ? r->best_step : 0;
    return r ? r->best : NAN;
}
bool tg_run_is_lead(const tg_run *r) { return r && r->lead; }

/* ---- starting from another run ---------------------------------------------------- */
int tg_run_init_from(const char *path, const tg_params *params) {
    char *file = path ? tg_run_checkpoint_of(path) : NULL;
    if (!file || !params) {
        tg_set_error("init_from: %s", !path || !params ? "NULL argument" : "out of memory");
        free(file);
        return -1;
    }
    tg_safetensors st;
    int rc = tg_safetensors_open(file, &st);
    if (rc == 0) {
        /* A training state (or best) holds "model.<name>" beside its
         * optimizer; a plain checkpoint the names themselves. */
        char first[TG_PARAM_NAME_MAX + 8];
        snprintf(first, sizeof first, "model.%s", params->n ? params->items[0].name : "");
        rc = tg_checkpoint_load_prefix(&st, file, params, tg_safetensors_find(&st, first) >= 0 ? "model" : NULL);
        tg_safetensors_close(&st);
    }
    if (rc != 0) {
        const char *e = tg_last_error();
        char *why = strdup(e ? e : "failed");
        tg_set_error("init_from: %s", why ? why : "failed");
        free(why);
    }
    free(file);
    return rc;
}

/* ---- figures and folders ------------------------------------------------------ */
int tg_run_draw_losses(const tg_run *r, const char *png, const char *title, const char *ylabel) {
    if (!r || !png) return tg_set_error("run: figure: NULL run or path"), -1;
    float *xs = malloc(sizeof(float) * (size_t)(r->step ? r->step : 1)); /* steps count from 1 */
    if (!xs) return tg_set_error("run: figure: out of memory"), -1;
    for (int64_t i = 0; i < r->step; i++) xs[i] = (float)(i + 1);
    tg_series s[2] = {{"train", xs, r->train, (int)r->step}, {"validation", r->val_step, r->val_loss, r->n_val}};
    tg_plot_opts po = {.title = title, .xlabel = "step", .ylabel = ylabel};
    int rc = tg_viz_lineplot(png, s, r->n_val > 0 ? 2 : 1, &po);
    if (rc != 0) tg_set_error("run: figure: %s", tg_viz_last_error());
    free(xs);
    return rc;
}

char *tg_run_resume_folder(const char *path) {
    const char *name = "train_state.safetensors";
    struct stat sb;
    size_t n = path ? strlen(path) : 0, k = strlen(name);
    if (!path) return tg_set_error("run: resume: NULL path"), NULL;
    if (stat(path, &sb) != 0 || S_ISDIR(sb.st_mode)) return strdup(path);
    bool state = n >= k && strcmp(path + n - k, name) == 0 && (n == k || path[n - k - 1] == '/');
    if (!state)
        return tg_set_error("--resume takes a run's folder (or its train_state.safetensors); to start from %s, use "
                            "--init-from",
                            path),
               NULL;
    char *dir = n == k ? strdup(".") : strndup(path, n - k - 1 > 0 ? n - k - 1 : 1);
    if (!dir) tg_set_error("run: out of memory");
    return dir;
}

/* ---- a decoder on a token file ------------------------------------------------ */
int tg_run_decoder_step(tg_run *r, tg_decoder *m, tg_token_data *d, int B, int T, int accum, int *x, int *y) {
    int size = tg_dist_size(), rank = tg_dist_rank(), Bl = B / size;
    for (int k = 0; k < accum; k++) {
        tg_token_data_batch_shard(d, B, T, rank, size, x, y); /* this rank's Bl windows of the B all draw */
        tg_scope_begin();
        int64_t n = 0;
        tg_tensor *sum = accum > 1 ? tg_decoder_loss_sum(m, x, y, Bl, T, &n) : NULL;
        int bad = accum > 1 ? tg_run_backward_sum(r, sum, n) : tg_run_backward(r, tg_decoder_loss(m, x, y, Bl, T));
        tg_scope_end();
        if (bad) return -1;
    }
    return tg_run_step(r);
}

double tg_run_decoder_val_loss(tg_decoder *m, const tg_token_data *d, int n_batches, int B, int T, int *x, int *y) {
    double sum = 0;
    tg_decoder_train(m, false);
    bool grad = tg_set_grad_enabled(false);
    for (int i = tg_dist_rank(); i < n_batches; i += tg_dist_size()) {
        tg_token_data_val_batch(d, i, B, T, x, y);
        tg_scope_begin();
        tg_tensor *loss = tg_decoder_loss(m, x, y, B, T);
        sum += loss ? (double)tg_item(loss) : NAN;
        tg_scope_end();
    }
    tg_set_grad_enabled(grad);
    tg_decoder_train(m, true);
    return tg_dist_allreduce_sum(&sum, 1) == 0 ? sum / n_batches : NAN;
}
