/* Heatmaps: one matrix, or a grid of them in the manner of d2l's
 * show_heatmaps(matrices, xlabel, ylabel, titles, figsize, cmap).
 *
 * A figure is laid out once, from the sizes, the options and the text
 * widths alone (never the data), so tg_viz_heatmap_grid_geometry() can
 * tell a caller where each cell lands without drawing:
 *
 *        figure title
 *        col title     col title
 *   y  0 +---------+   +---------+  | |  1.0
 *   l    | panel   |   | panel   |  |c|
 *   a  5 |         |   |         |  |b|  0.5
 *   b    +---------+   +---------+  | |  0.0
 *   e     0   5         0   5
 *   l      xlabel        xlabel
 *
 * Tick labels appear on the left column and the bottom row only (the
 * panels share their axes); tick marks appear on every panel. The colour
 * bar is shared at the right, or one per panel with per-panel scales. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "viz_internal.h"

/* Sizes in pixels. */
#define MARGIN         14
#define TITLE_PX       18.0f /* figure title */
#define PTITLE_PX      14.0f /* panel / column titles */
#define LABEL_PX       14.0f /* axis labels */
#define TICK_PX        12.0f /* tick numbers */
#define TICK_LEN       4
#define TICK_GAP       3    /* between a tick mark and its number */
#define GAP            6    /* between stacked pieces of text */
#define COL_GAP        20   /* between panels side by side */
#define ROW_GAP        14   /* between panels one above another */
#define CB_GAP         14   /* between a panel and its colour bar */
#define CB_W           14   /* colour bar thickness */
#define TICK_SPACING   40   /* about one tick per this many pixels */
#define MAX_GRID       64   /* grid rows or columns */
#define MAX_PANEL_SIDE 2048 /* with an explicit cell_px */
#define MIN_PANEL_SIDE 48   /* thin matrices get stretched cells */

static const viz_rgb INK = {0x26, 0x26, 0x26};  /* text */
static const viz_rgb AXIS = {0x40, 0x40, 0x40}; /* frames and ticks */
static const viz_rgb WHITE = {0xff, 0xff, 0xff};

/* ---- layout -------------------------------------------------------------- */

typedef struct {
    int width, height;
    int pw, ph;                     /* panel plot size */
    int px[MAX_GRID], py[MAX_GRID]; /* plot left per grid column, top per grid row */
    int band[MAX_GRID];             /* title band above each grid row (0 = none) */
    int per_panel_bar;              /* a colour bar beside every panel */
    int cb_label_w;                 /* room for colour bar numbers */
    int xtick_step, ytick_step;     /* matrix index between tick marks */
    int fig_title_y;
} layout;

static const char *nonempty(const char *s) { return s && *s ? s : NULL; }

/* Index ticks at multiples of 1, 2, 5, 10, 20, 50, ... with at most
 * `want` of them in 0..n-1. */
static int index_step(int n, int want) {
    if (want < 2) want = 2;
    for (long mag = 1;; mag *= 10) {
        static const int m[] = {1, 2, 5};
        for (int i = 0; i < 3; i++) {
            long st = m[i] * mag;
            if ((n - 1) / st + 1 <= want || st >= n) return (int)st;
        }
    }
}

/* The title of panel (i, j), or NULL. */
static const char *panel_title(const char *const *titles, int per_panel, int gc, int i, int j) {
    if (!titles) return NULL;
    if (per_panel) return nonempty(titles[i * gc + j]);
    return i == 0 ? nonempty(titles[j]) : NULL;
}

/* Plot size of one panel: square cells of a whole number of pixels when
 * they fit, the longer side near `target` pixels; a matrix larger than
 * the target is box-filtered down (a cell is then under one pixel). */
static void panel_size(int rows, int cols, int gr, int gc, int cell_px, int *pw, int *ph) {
    int longest = rows > cols ? rows : cols;
    double s;
    if (cell_px > 0) {
        s = cell_px;
        if ((double)longest * s > MAX_PANEL_SIDE) s = (double)MAX_PANEL_SIDE / longest;
    } else {
        double tw = 820.0 / gc, th = 640.0 / gr;
        double target = tw < th ? tw : th;
        if (target > 420.0) target = 420.0;
        if (target < 110.0) target = 110.0;
        s = target / longest;
        if (s >= 1.0) s = floor(s) < 80.0 ? floor(s) : 80.0;
    }
    *pw = (int)lround(cols * s);
    *ph = (int)lround(rows * s);
    if (*pw < 1) *pw = 1;
    if (*ph < 1) *ph = 1;
    /* A 1 x 512 matrix would be a 1-pixel sliver: stretch its cells. */
    if (*pw < MIN_PANEL_SIDE && *pw < *ph) *pw = *ph < MIN_PANEL_SIDE ? *ph : MIN_PANEL_SIDE;
    if (*ph < MIN_PANEL_SIDE && *ph < *pw) *ph = *pw < MIN_PANEL_SIDE ? *pw : MIN_PANEL_SIDE;
}

static int check_opts(const char *fn, const tg_heatmap_opts *o) {
    if (!viz_cmap_valid(o->cmap)) return viz_error("%s: unknown colour map %d", fn, (int)o->cmap);
    if (o->cell_px < 0) return viz_error("%s: cell_px = %d is negative", fn, o->cell_px);
    return 0;
}

static int check_sizes(const char *fn, int gr, int gc, int rows, int cols) {
    if (rows <= 0 || cols <= 0) return viz_error("%s: matrix (%d,%d): rows and cols must be positive", fn, rows, cols);
    if (gr <= 0 || gc <= 0 || gr > MAX_GRID || gc > MAX_GRID)
        return viz_error("%s: grid (%d,%d) of (%d,%d) matrices: grid rows and cols must be in 1..%d", fn, gr, gc, rows,
                         cols, MAX_GRID);
    return 0;
}

static int compute_layout(viz_font *f, int gr, int gc, int rows, int cols, const char *const *titles,
                          const tg_heatmap_opts *o, layout *L, const char *fn) {
    memset(L, 0, sizeof *L);
    panel_size(rows, cols, gr, gc, o->cell_px, &L->pw, &L->ph);
    L->per_panel_bar = !o->shared_scale && gr * gc > 1;
    L->xtick_step = index_step(cols, L->pw / TICK_SPACING + 1);
    L->ytick_step = index_step(rows, L->ph / TICK_SPACING + 1);

    int tick_h = viz_text_height(f, TICK_PX);
    int label_h = viz_text_height(f, LABEL_PX);
    char buf[32];
    int ytick_w = 0;
    for (int r = 0; r < rows; r += L->ytick_step) {
        snprintf(buf, sizeof buf, "%d", r);
        int w = viz_text_width(f, buf, TICK_PX);
        if (w > ytick_w) ytick_w = w;
    }
    /* Colour bar numbers are data-dependent; reserve a fixed width so the
     * layout is not (labels are short by construction: see ticks.c). */
    L->cb_label_w = viz_text_width(f, "-0.000", TICK_PX);
    int cb_block = CB_GAP + CB_W + TICK_LEN + TICK_GAP + L->cb_label_w;

    int left = MARGIN + ytick_w + TICK_GAP + TICK_LEN;
    if (nonempty(o->ylabel)) left += label_h + GAP;
    int step_x = L->pw + COL_GAP + (L->per_panel_bar ? cb_block : 0);
    for (int j = 0; j < gc; j++) L->px[j] = left + j * step_x;
    L->width = L->px[gc - 1] + L->pw + cb_block + MARGIN;

    int top = MARGIN;
    int title_w = 0;
    if (nonempty(o->title)) {
        L->fig_title_y = top;
        top += viz_text_height(f, TITLE_PX) + GAP + 2;
        title_w = viz_text_width(f, o->title, TITLE_PX);
    }
    int ptitle_band = viz_text_height(f, PTITLE_PX) + GAP;
    int y = top;
    for (int i = 0; i < gr; i++) {
        for (int j = 0; j < gc; j++)
            if (panel_title(titles, o->titles_per_panel, gc, i, j)) L->band[i] = ptitle_band;
        y += L->band[i];
        L->py[i] = y;
        y += L->ph + ROW_GAP;
    }
    y = L->py[gr - 1] + L->ph + TICK_LEN + TICK_GAP + tick_h;
    if (nonempty(o->xlabel)) y += GAP + label_h;
    L->height = y + MARGIN;
    if (title_w + 2 * MARGIN > L->width) L->width = title_w + 2 * MARGIN;
    if (L->width > VIZ_MAX_SIDE || L->height > VIZ_MAX_SIDE)
        return viz_error("%s: a (%d,%d) grid of (%d,%d) matrices needs a %d x %d image, over %d per side", fn, gr, gc,
                         rows, cols, L->width, L->height, VIZ_MAX_SIDE);
    return 0;
}

/* ---- colour scale -------------------------------------------------------- */

typedef struct {
    double lo, hi;
} scale;

/* Range of the finite values of n matrices; symmetric maps use [-m, m]. */
static scale find_scale(const float *const *mats, int n, size_t count, int symmetric) {
    double lo = INFINITY, hi = -INFINITY;
    for (int k = 0; k < n; k++)
        for (size_t i = 0; i < count; i++) {
            double v = mats[k][i];
            if (!isfinite(v)) continue;
            if (v < lo) lo = v;
            if (v > hi) hi = v;
        }
    if (!(lo <= hi)) /* no finite value at all */
        return symmetric ? (scale){-1.0, 1.0} : (scale){0.0, 1.0};
    if (symmetric) {
        double m = fabs(lo) > fabs(hi) ? fabs(lo) : fabs(hi);
        if (m == 0.0) m = 1.0;
        return (scale){-m, m};
    }
    if (lo == hi) { /* constant: put it mid-scale */
        double d = lo != 0.0 ? fabs(lo) * 0.1 : 1.0;
        return (scale){lo - d, hi + d};
    }
    return (scale){lo, hi};
}

/* ---- drawing ------------------------------------------------------------- */

/* Each pixel shows the mean of the finite cells under it: one cell when
 * cells are larger than pixels, a box of cells when the matrix is larger
 * than the plot. */
static void draw_cells(viz_canvas *c, const layout *L, int x0, int y0, const float *m, int rows, int cols, scale sc,
                       tg_cmap cmap) {
    double span = sc.hi - sc.lo;
    for (int py = 0; py < L->ph; py++) {
        int r0 = (int)((long long)py * rows / L->ph);
        int r1 = (int)(((long long)(py + 1) * rows + L->ph - 1) / L->ph);
        if (r1 <= r0) r1 = r0 + 1;
        for (int px = 0; px < L->pw; px++) {
            int c0 = (int)((long long)px * cols / L->pw);
            int c1 = (int)(((long long)(px + 1) * cols + L->pw - 1) / L->pw);
            if (c1 <= c0) c1 = c0 + 1;
            double sum = 0.0;
            int k = 0;
            for (int r = r0; r < r1; r++)
                for (int q = c0; q < c1; q++) {
                    double v = m[(size_t)r * (size_t)cols + (size_t)q];
                    if (isfinite(v)) {
                        sum += v;
                        k++;
                    }
                }
            double t = k ? (sum / k - sc.lo) / span : NAN;
            viz_fill_rect(c, x0 + px, y0 + py, x0 + px + 1, y0 + py + 1, viz_cmap(cmap, t));
        }
    }
}

/* Frame, tick marks on the left and bottom, and their numbers if asked. */
static int draw_axes(viz_canvas *c, viz_font *f, const layout *L, int x0, int y0, int rows, int cols, int xnums,
                     int ynums) {
    char buf[32];
    viz_frame_rect(c, x0, y0, L->pw, L->ph, AXIS);
    for (int q = 0; q < cols; q += L->xtick_step) {
        int x = x0 + (int)((q + 0.5) * L->pw / cols);
        viz_fill_rect(c, x, y0 + L->ph + 1, x + 1, y0 + L->ph + 1 + TICK_LEN, AXIS);
        snprintf(buf, sizeof buf, "%d", q);
        if (xnums &&
            viz_draw_text(c, f, buf, TICK_PX, x, y0 + L->ph + 1 + TICK_LEN + TICK_GAP, VIZ_CENTER, VIZ_START, 0, INK))
            return -1;
    }
    for (int r = 0; r < rows; r += L->ytick_step) {
        int y = y0 + (int)((r + 0.5) * L->ph / rows);
        viz_fill_rect(c, x0 - 1 - TICK_LEN, y, x0 - 1, y + 1, AXIS);
        snprintf(buf, sizeof buf, "%d", r);
        if (ynums && viz_draw_text(c, f, buf, TICK_PX, x0 - 1 - TICK_LEN - TICK_GAP, y, VIZ_END, VIZ_CENTER, 0, INK))
            return -1;
    }
    return 0;
}

/* A vertical colour bar at (x, y), h pixels tall, with numbered ticks. */
static int draw_colorbar(viz_canvas *c, viz_font *f, int x, int y, int h, scale sc, tg_cmap cmap) {
    for (int i = 0; i < h; i++) viz_fill_rect(c, x, y + i, x + CB_W, y + i + 1, viz_cmap(cmap, 1.0 - (i + 0.5) / h));
    viz_frame_rect(c, x, y, CB_W, h, AXIS);
    double ticks[VIZ_MAX_TICKS], step;
    int want = h / TICK_SPACING + 1;
    if (want > 8) want = 8;
    int n = viz_nice_ticks(sc.lo, sc.hi, want, ticks, &step);
    for (int k = 0; k < n; k++) {
        int ty = y + (int)lround((1.0 - (ticks[k] - sc.lo) / (sc.hi - sc.lo)) * (h - 1));
        char buf[32];
        viz_format_tick(ticks[k], step, buf, sizeof buf);
        viz_fill_rect(c, x + CB_W + 1, ty, x + CB_W + 1 + TICK_LEN, ty + 1, AXIS);
        if (viz_draw_text(c, f, buf, TICK_PX, x + CB_W + 1 + TICK_LEN + TICK_GAP, ty, VIZ_START, VIZ_CENTER, 0, INK))
            return -1;
    }
    return 0;
}

static int draw_figure(viz_canvas *c, viz_font *f, const layout *L, int gr, int gc, const float *const *mats, int rows,
                       int cols, const char *const *titles, const tg_heatmap_opts *o) {
    int symmetric = o->symmetric > 0 || (o->symmetric == 0 && viz_cmap_diverging(o->cmap));
    size_t count = (size_t)rows * (size_t)cols;
    scale shared = find_scale(mats, gr * gc, count, symmetric);
    int cb_x = CB_GAP + 1; /* colour bar left, relative to the panel's right edge */

    for (int i = 0; i < gr; i++)
        for (int j = 0; j < gc; j++) {
            const float *m = mats[i * gc + j];
            int x0 = L->px[j], y0 = L->py[i];
            scale sc = L->per_panel_bar ? find_scale(&m, 1, count, symmetric) : shared;
            draw_cells(c, L, x0, y0, m, rows, cols, sc, o->cmap);
            if (draw_axes(c, f, L, x0, y0, rows, cols, i == gr - 1, j == 0)) return -1;
            const char *t = panel_title(titles, o->titles_per_panel, gc, i, j);
            if (t && viz_draw_text(c, f, t, PTITLE_PX, x0 + L->pw / 2, y0 - GAP, VIZ_CENTER, VIZ_END, 0, INK))
                return -1;
            if (L->per_panel_bar && draw_colorbar(c, f, x0 + L->pw + cb_x, y0, L->ph, sc, o->cmap)) return -1;
            if (i == gr - 1 && nonempty(o->xlabel) &&
                viz_draw_text(c, f, o->xlabel, LABEL_PX, x0 + L->pw / 2,
                              y0 + L->ph + 1 + TICK_LEN + TICK_GAP + viz_text_height(f, TICK_PX) + GAP, VIZ_CENTER,
                              VIZ_START, 0, INK))
                return -1;
            if (j == 0 && nonempty(o->ylabel) &&
                viz_draw_text(c, f, o->ylabel, LABEL_PX, MARGIN, y0 + L->ph / 2, VIZ_START, VIZ_CENTER, 1, INK))
                return -1;
        }
    if (!L->per_panel_bar) {
        int top = L->py[0], bottom = L->py[gr - 1] + L->ph;
        if (draw_colorbar(c, f, L->px[gc - 1] + L->pw + cb_x, top, bottom - top, shared, o->cmap)) return -1;
    }
    if (nonempty(o->title)) {
        int mid = (L->px[0] + L->px[gc - 1] + L->pw) / 2;
        int tw = viz_text_width(f, o->title, TITLE_PX);
        if (mid - tw / 2 < MARGIN) mid = MARGIN + tw / 2;
        if (viz_draw_text(c, f, o->title, TITLE_PX, mid, L->fig_title_y, VIZ_CENTER, VIZ_START, 0, INK)) return -1;
    }
    return 0;
}

/* ---- public -------------------------------------------------------------- */

static const tg_heatmap_opts default_opts;

static int grid_impl(const char *fn, const char *png_path, int gr, int gc, const float *const *mats, int rows, int cols,
                     const char *const *titles, const tg_heatmap_opts *o) {
    if (!o) o = &default_opts;
    if (check_sizes(fn, gr, gc, rows, cols) || check_opts(fn, o)) return -1;
    if (!png_path || !*png_path) return viz_error("%s: (%d,%d) matrix: no output path given", fn, rows, cols);
    if (!mats) return viz_error("%s: (%d,%d) matrix: data is NULL", fn, rows, cols);
    for (int k = 0; k < gr * gc; k++)
        if (!mats[k])
            return viz_error("%s: grid (%d,%d): matrix %d (row %d, col %d) is NULL", fn, gr, gc, k, k / gc, k % gc);
    viz_font *f = viz_font_open();
    if (!f) return viz_error("%s: out of memory opening the font", fn);
    layout L;
    viz_canvas c = {0, 0, NULL};
    int rc = compute_layout(f, gr, gc, rows, cols, titles, o, &L, fn);
    if (!rc) rc = viz_canvas_init(&c, L.width, L.height, WHITE, fn);
    if (!rc) rc = draw_figure(&c, f, &L, gr, gc, mats, rows, cols, titles, o);
    if (!rc) rc = viz_canvas_write_png(&c, png_path, fn);
    viz_canvas_free(&c);
    viz_font_close(f);
    return rc;
}

int tg_viz_heatmap(const char *png_path, const float *data, int rows, int cols, const tg_heatmap_opts *o) {
    if (!data && rows > 0 && cols > 0) return viz_error("tg_viz_heatmap: (%d,%d) matrix: data is NULL", rows, cols);
    const float *mats[1] = {data};
    return grid_impl("tg_viz_heatmap", png_path, 1, 1, mats, rows, cols, NULL, o);
}

int tg_viz_heatmap_grid(const char *png_path, int grid_rows, int grid_cols, const float *const *mats, int rows,
                        int cols, const char *const *panel_titles, const tg_heatmap_opts *o) {
    return grid_impl("tg_viz_heatmap_grid", png_path, grid_rows, grid_cols, mats, rows, cols, panel_titles, o);
}

static int geometry_impl(const char *fn, int grid_rows, int grid_cols, int rows, int cols,
                         const char *const *panel_titles, const tg_heatmap_opts *o, int *width, int *height,
                         tg_viz_rect *plots) {
    if (!o) o = &default_opts;
    if (check_sizes(fn, grid_rows, grid_cols, rows, cols) || check_opts(fn, o)) return -1;
    viz_font *f = viz_font_open();
    if (!f) return viz_error("%s: out of memory opening the font", fn);
    layout L;
    int rc = compute_layout(f, grid_rows, grid_cols, rows, cols, panel_titles, o, &L, fn);
    viz_font_close(f);
    if (rc) return -1;
    if (width) *width = L.width;
    if (height) *height = L.height;
    if (plots)
        for (int i = 0; i < grid_rows; i++)
            for (int j = 0; j < grid_cols; j++) plots[i * grid_cols + j] = (tg_viz_rect){L.px[j], L.py[i], L.pw, L.ph};
    return 0;
}

int tg_viz_heatmap_grid_geometry(int grid_rows, int grid_cols, int rows, int cols, const char *const *panel_titles,
                                 const tg_heatmap_opts *o, int *width, int *height, tg_viz_rect *plots) {
    return geometry_impl("tg_viz_heatmap_grid_geometry", grid_rows, grid_cols, rows, cols, panel_titles, o, width,
                         height, plots);
}

int tg_viz_heatmap_geometry(int rows, int cols, const tg_heatmap_opts *o, int *width, int *height, tg_viz_rect *plot) {
    return geometry_impl("tg_viz_heatmap_geometry", 1, 1, rows, cols, NULL, o, width, height, plot);
}
