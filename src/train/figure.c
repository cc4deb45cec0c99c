/* Figures of tensors (figure.h): the values converted to float, then viz. */
#include "figure.h"

#include <stdio.h>
#include <stdlib.h>

/* The rows and columns of t drawn as a matrix; false with the error
 * recorded when t is not one. */
static bool matrix_of(const char *what, const tg_tensor *t, int *rows, int *cols) {
    char b[64];
    if (!t) {
        tg_set_error("figure: %s: NULL tensor", what);
        return false;
    }
    bool ok = t->ndim >= 2 && t->size > 0;
    for (int k = 0; ok && k < t->ndim - 2; k++) ok = t->shape[k] == 1;
    if (!ok) {
        tg_set_error("figure: %s: tensor %s is not a matrix (2-D, or leading sizes of 1 as [1, T, T])", what,
                     tg_tshape(b, t));
        return false;
    }
    *rows = t->shape[t->ndim - 2], *cols = t->shape[t->ndim - 1];
    return true;
}

/* t's values as floats (malloc'd), or NULL with the error recorded. */
static float *floats(const tg_tensor *t) {
    float *f = malloc(sizeof(float) * (size_t)(t->size ? t->size : 1));
    if (!f) {
        tg_set_error("figure: out of memory for %lld values", (long long)t->size);
        return NULL;
    }
    for (int64_t i = 0; i < t->size; i++) f[i] = (float)t->data[i];
    return f;
}

static int viz_done(int rc) {
    if (rc != 0) tg_set_error("figure: %s", tg_viz_last_error() ? tg_viz_last_error() : "drawing failed");
    return rc != 0 ? -1 : 0;
}

int tg_figure_heatmap(const char *png_path, const tg_tensor *t, const tg_heatmap_opts *o) {
    int rows, cols;
    if (!matrix_of("heatmap", t, &rows, &cols)) return -1;
    float *f = floats(t);
    int rc = f ? viz_done(tg_viz_heatmap(png_path, f, rows, cols, o)) : -1;
    free(f);
    return rc;
}

int tg_figure_heatmap_grid(const char *png_path, int grid_rows, int grid_cols, const tg_tensor *const *ts,
                           const char *const *panel_titles, const tg_heatmap_opts *o) {
    char a[64], b[64];
    /* 1..64 a side, as tg_viz_heatmap_grid takes (heatmap.c's MAX_GRID),
     * checked first: the panel count must not overflow. */
    if (!ts || grid_rows < 1 || grid_cols < 1 || grid_rows > 64 || grid_cols > 64) {
        tg_set_error("figure: heatmap grid: NULL tensors or a %d x %d grid (1..64 a side)", grid_rows, grid_cols);
        return -1;
    }
    int n = grid_rows * grid_cols, rows = 0, cols = 0, rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        int r, c;
        if (!matrix_of("heatmap grid", ts[i], &r, &c))
            rc = -1;
        else if (i > 0 && (r != rows || c != cols)) {
            tg_set_error("figure: heatmap grid: panel %d is %s, panel 0 %s: one shape for all", i, tg_tshape(a, ts[i]),
                         tg_tshape(b, ts[0]));
            rc = -1;
        }
        rows = r, cols = c;
    }
    float **f = rc == 0 ? calloc((size_t)n, sizeof *f) : NULL;
    if (rc == 0 && !f) rc = (tg_set_error("figure: out of memory"), -1);
    for (int i = 0; rc == 0 && i < n; i++)
        if (!(f[i] = floats(ts[i]))) rc = -1;
    if (rc == 0)
        rc = viz_done(
            tg_viz_heatmap_grid(png_path, grid_rows, grid_cols, (const float *const *)f, rows, cols, panel_titles, o));
    for (int i = 0; f && i < n; i++) free(f[i]);
    free(f);
    return rc;
}

int tg_figure_lineplot(const char *png_path, const tg_tensor *const *ys, const char *const *labels, int n,
                       const tg_tensor *x, const tg_plot_opts *o) {
    char a[64], b[64];
    if (!ys || n < 1) {
        tg_set_error("figure: lineplot: NULL series or %d of them", n);
        return -1;
    }
    for (int s = 0; s < n; s++)
        if (!ys[s] || ys[s]->ndim != 1 || (x && (x->ndim != 1 || x->size != ys[s]->size))) {
            tg_set_error("figure: lineplot: series %d is %s and x %s; 1-D, as long as x", s,
                         ys[s] ? tg_tshape(a, ys[s]) : "NULL", x ? tg_tshape(b, x) : "(none)");
            return -1;
        }
    tg_series *series = calloc((size_t)n, sizeof *series);
    float *fx = x ? floats(x) : NULL;
    int rc = series && (!x || fx) ? 0 : (tg_set_error("figure: out of memory"), -1);
    for (int s = 0; rc == 0 && s < n; s++) {
        series[s] = (tg_series){labels ? labels[s] : NULL, fx, floats(ys[s]), (int)ys[s]->size};
        if (!series[s].y) rc = -1;
    }
    if (rc == 0) rc = viz_done(tg_viz_lineplot(png_path, series, n, o));
    for (int s = 0; series && s < n; s++) free((float *)series[s].y);
    free(series);
    free(fx);
    return rc;
}

int tg_figure_attention(const char *png_path, const char *title, const void *model,
                        tg_tensor *(*weights)(const void *model, int l, int h), int L, int H) {
    const tg_tensor **heads = malloc(sizeof(tg_tensor *) * (size_t)L * H);
    char(*titles)[32] = malloc(sizeof(char[32]) * (size_t)H);
    const char **tp = malloc(sizeof(char *) * (size_t)H);
    int rc = heads && titles && tp ? 0 : (tg_set_error("figure: out of memory"), -1);
    for (int k = 0; rc == 0 && k < L * H; k++)
        if (!(heads[k] = weights(model, k / H, k % H))) rc = -1;
    for (int h = 0; rc == 0 && h < H; h++) {
        snprintf(titles[h], 32, "Head %d", h + 1);
        tp[h] = titles[h];
    }
    tg_heatmap_opts ho = {.title = title,
                          .xlabel = "Key positions",
                          .ylabel = "Query positions",
                          .cmap = TG_CMAP_BLUES,
                          .shared_scale = 1};
    if (rc == 0) rc = tg_figure_heatmap_grid(png_path, L, H, heads, tp, &ho);
    free(heads);
    free(titles);
    free(tp);
    return rc;
}
