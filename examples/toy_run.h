/* What the programs that train a small model per variant share
 * (extrapolate, compare_layers): each model is a run (src/train/run.h) in
 * its own folder OUT/PROG/NAME, holding its metrics.jsonl and checkpoints;
 * it is scored by the argmax of its logits; its figures go into OUT. */
#ifndef TOY_RUN_H
#define TOY_RUN_H

#include <time.h>
#include "cli.h"
#include "tgrad.h"

static inline double toy_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct {
    const char *out, *prog, *name; /* the run's folder: OUT/PROG/NAME */
    int steps, eval_every;
    double lr, clip;        /* Adam's constant rate; clip the gradient norm (0: no) */
    double max_loss;        /* a training loss above this is divergence (0: only NaN and inf) */
    double tokens_per_step; /* for the progress line's tok/s */
} toy_run_config;

/* Opens a new run for the model's params, optimizer and generators, and
 * says where on stderr (its progress follows there). NULL with the error
 * printed. */
static inline tg_run *toy_run_open(const toy_run_config *c, const tg_params *params, tg_optim *opt,
                                   const tg_rngs *rngs) {
    char *base = tg_run_path(c->out, c->prog), *dir = base ? tg_run_path(base, c->name) : NULL;
    tg_run_config rc = tg_run_defaults(dir, c->steps);
    rc.schedule = tg_lr_constant(c->lr), rc.clip = c->clip, rc.eval_every = c->eval_every;
    rc.max_loss = c->max_loss, rc.tokens_per_step = c->tokens_per_step;
    char settings[512]; /* recorded with each checkpoint, shown by the run's report.html */
    snprintf(settings, sizeof settings,
             "{\"program\":\"%s\",\"variant\":\"%s\",\"steps\":\"%d\",\"eval_every\":\"%d\",\"lr\":\"%g\","
             "\"clip\":\"%g\"}",
             c->prog, c->name, c->steps, c->eval_every, c->lr, c->clip);
    rc.meta = settings;
    rc.overwrite = true; /* no --resume here: each run of a variant is new and replaces the last */
    tg_run *run = dir && opt ? tg_run_open(&rc, params, opt, rngs) : NULL;
    if (run) tg_run_on_save(run, tg_report_on_save, run); /* the run's report.html */
    if (run)
        fprintf(stderr, "%s: training %s in %s\n", c->prog, c->name, dir);
    else
        fprintf(stderr, "%s: %s: %s\n", c->prog, c->name, dir && tg_last_error() ? tg_last_error() : "out of memory");
    free(base), free(dir);
    return run;
}

/* How many of rows rows of V logits have their largest entry at the
 * target; rows whose target is TG_IGNORE_INDEX are skipped, the others
 * counted in *scored. */
static inline long toy_argmax_hits(const tg_real *logits, const int *targets, int64_t rows, int V, long *scored) {
    long hits = 0;
    for (int64_t r = 0; r < rows; r++) {
        if (targets[r] == TG_IGNORE_INDEX) continue;
        const tg_real *row = logits + r * V;
        int best = 0;
        for (int v = 1; v < V; v++)
            if (row[v] > row[best]) best = v;
        hits += best == targets[r];
        (*scored)++;
    }
    return hits;
}

/* After writing a figure (rc from src/viz/): says so when asked, or prints
 * viz's error. Returns rc. */
static inline int toy_wrote(const char *prog, int rc, const char *path, bool say) {
    if (rc != 0)
        fprintf(stderr, "%s: %s\n", prog, tg_viz_last_error());
    else if (say)
        printf("  wrote %s\n", path);
    return rc;
}

/* A table as a line plot, OUT/file: row r is the line names[r] (none when
 * NULL) through (xs[c], scale * ys[r * cols + c]); a NaN breaks it. At most
 * 16 rows of 64 columns. Returns toy_wrote's rc. */
static inline int toy_plot_rows(const char *prog, const char *out, const char *file, const tg_plot_opts *po,
                                const char *const *names, const double *xs, const double *ys, int rows, int cols,
                                double scale, bool say) {
    float fx[64], fy[16][64];
    tg_series s[16];
    int n = 0;
    for (int c = 0; c < cols && c < 64; c++) fx[c] = (float)xs[c];
    for (int r = 0; r < rows && r < 16; r++) {
        if (!names[r]) continue;
        for (int c = 0; c < cols && c < 64; c++) fy[n][c] = (float)(scale * ys[r * cols + c]);
        s[n] = (tg_series){names[r], fx, fy[n], cols < 64 ? cols : 64}, n++;
    }
    char *path = tg_run_path(out, file);
    int rc = path ? toy_wrote(prog, tg_viz_lineplot(path, s, n, po), path, say) : -1;
    free(path);
    return rc;
}

/* OUT/PROG/report.html: what rep holds already (the models' positions),
 * then one table and chart per task of held-out token accuracy (%) against
 * test length, for the kinds that ran; acc is [n_tasks][n_kinds][n_lens],
 * ran [n_tasks][n_kinds]; each run's folder has its own page with its
 * curves. 0, or -1 with the error printed. */
static inline int toy_report_tables(tg_report *rep, const char *prog, const char *out, const char *title,
                                    const char *settings, const char *const *tasks, int n_tasks,
                                    const char *const *kinds, int n_kinds, const int *lens, int n_lens,
                                    const double *acc, const bool *ran, int train_len) {
    char *base = tg_run_path(out, prog), *path = base ? tg_run_path(base, "report.html") : NULL;
    const char **names = malloc(sizeof(char *) * (size_t)n_kinds);
    double *xs = malloc(sizeof(double) * (size_t)n_lens), *ys = malloc(sizeof(double) * (size_t)n_kinds * n_lens);
    int rc = rep && path && names && xs && ys ? tg_report_add(rep, "settings", settings) : -1;
    bool any = false;
    for (int i = 0; xs && i < n_lens; i++) xs[i] = lens[i];
    for (int t = 0; rc == 0 && t < n_tasks; t++) {
        int n = 0;
        for (int v = 0; v < n_kinds; v++) {
            if (!ran[t * n_kinds + v]) continue;
            names[n] = kinds[v];
            for (int i = 0; i < n_lens; i++) ys[n * n_lens + i] = 100 * acc[((size_t)t * n_kinds + v) * n_lens + i];
            n++;
        }
        char head[128];
        snprintf(head, sizeof head, "%s task: held-out token accuracy (%%) by test length, trained on %d", tasks[t],
                 train_len);
        if (n)
            rc = tg_report_add_table(rep, head, "test sequence length", "held-out token accuracy (%)", xs, n_lens,
                                     names, ys, n);
        any |= n > 0;
    }
    if (rc == 0 && any) rc = tg_report_write(rep, path, title);
    if (rc == 0 && any) printf("  wrote %s\n", path);
    if (rc != 0) fprintf(stderr, "%s: %s\n", prog, tg_last_error() ? tg_last_error() : "out of memory");
    free(base), free(path), free(names), free(xs), free(ys);
    return rc;
}

#endif
