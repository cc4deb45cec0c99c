/* plot_runs: the loss curves of several runs in one figure. Each run folder's
 * metrics.jsonl gives its training loss at every step and its validation
 * loss where it was evaluated; one line each, labelled by --labels or by the
 * folder. For runs that differ in one setting: make bench draws lm's default
 * run with float and with bf16 products (bench/lm_precision.sh). */
#include <math.h>

#include "cli.h"
#include "tgrad.h"

#define MAX_RUNS 8

/* One run's curves: training loss per step, validation loss where evaluated. */
typedef struct {
    float *step, *loss, *val_step, *val;
    int n, n_val;
} curves;

static int read_run(const char *dir, curves *c) {
    tg_metrics *m = NULL;
    int64_t n = 0;
    if (tg_run_metrics_read(dir, &m, &n) != 0) return -1;
    c->step = malloc(sizeof(float) * (size_t)(n + 1) * 4);
    if (!c->step) {
        tg_sys_free(m);
        return -1;
    }
    c->loss = c->step + n + 1, c->val_step = c->loss + n + 1, c->val = c->val_step + n + 1;
    c->n = c->n_val = 0;
    for (int64_t i = 0; i < n; i++) {
        c->step[c->n] = (float)m[i].step, c->loss[c->n++] = (float)m[i].loss;
        if (!isnan(m[i].val_loss)) c->val_step[c->n_val] = (float)m[i].step, c->val[c->n_val++] = (float)m[i].val_loss;
    }
    tg_sys_free(m);
    return 0;
}

int main(int argc, char **argv) {
    const char *out = "loss_curves.png", *title = "Loss curves", *labels = NULL;
    cli_opt opts[] = {
        {"out", CLI_STR, &out, "PNG to write", 0, 0},
        {"title", CLI_STR, &title, "the figure's title", 0, 0},
        {"labels", CLI_STR, &labels, "comma-separated names of the runs (default: their folders)", 0, 0},
    };
    const int nopt = (int)(sizeof opts / sizeof opts[0]);
    const char *synopsis = "RUN_DIR... [--labels a,b] [--out PNG]";
    const char *about = "Draws the training and validation loss of up to 8 runs (their metrics.jsonl) in one PNG.";
    const char *dirs[MAX_RUNS];
    int nruns = cli_parse(argc, argv, synopsis, about, opts, nopt, dirs, MAX_RUNS);
    if (nruns < 1) return cli_usage_error(argv[0], synopsis, about, opts, nopt, "give 1 to %d run folders", MAX_RUNS);
    char names[MAX_RUNS][64], series_labels[2 * MAX_RUNS][80];
    for (int i = 0; i < nruns; i++) snprintf(names[i], sizeof names[i], "%.63s", dirs[i]);
    if (labels) { /* one name per run, in order */
        int k = 1;
        for (const char *p = labels; *p; p++) k += *p == ',';
        if (k != nruns)
            return cli_usage_error(argv[0], synopsis, about, opts, nopt, "--labels: %d names for %d runs", k, nruns);
        const char *p = labels;
        for (int i = 0; i < nruns; i++) {
            size_t len = strcspn(p, ",");
            snprintf(names[i], sizeof names[i], "%.*s", (int)(len < 63 ? len : 63), p);
            p += len + (p[len] == ',');
        }
    }
    curves c[MAX_RUNS] = {{0}};
    tg_series s[2 * MAX_RUNS];
    int ns = 0, rc = 0;
    for (int i = 0; i < nruns && rc == 0; i++) {
        if (read_run(dirs[i], &c[i]) != 0) {
            fprintf(stderr, "plot_runs: %s\n", tg_last_error());
            rc = 1;
            break;
        }
        snprintf(series_labels[ns], sizeof series_labels[ns], "%.63s, training", names[i]);
        s[ns] = (tg_series){series_labels[ns], c[i].step, c[i].loss, c[i].n}, ns++;
        snprintf(series_labels[ns], sizeof series_labels[ns], "%.63s, validation", names[i]);
        if (c[i].n_val) s[ns] = (tg_series){series_labels[ns], c[i].val_step, c[i].val, c[i].n_val}, ns++;
    }
    tg_plot_opts po = {.title = title, .xlabel = "step", .ylabel = "loss (nats per token)"};
    if (rc == 0 && tg_viz_lineplot(out, s, ns, &po) != 0) {
        fprintf(stderr, "plot_runs: %s\n", tg_last_error());
        rc = 1;
    }
    for (int i = 0; i < nruns; i++) free(c[i].step);
    if (rc == 0) printf("wrote %s\n", out);
    return rc;
}
