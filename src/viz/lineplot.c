/* Line plots: several (x, y) series on one pair of axes, such as training
 * and validation loss against epochs, optionally with a logarithmic y axis.
 *
 *            title
 *      3 +-----------------+
 *   y    |  \       legend |
 *   l  2 |   \__           |      grid lines at the ticks,
 *   a    |      \____      |      5% margin around the data
 *   b  1 |           \____ |
 *   e    +-----------------+
 *   l    0    50   100   150
 *               xlabel
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "viz_internal.h"

#define MARGIN        14
#define TITLE_PX      18.0f
#define LABEL_PX      14.0f
#define TICK_PX       12.0f
#define LEGEND_PX     13.0f
#define TICK_LEN      4
#define TICK_GAP      3
#define GAP           6
#define LINE_W        2.0f
#define LEGEND_SAMPLE 24 /* length of the line drawn beside a legend entry */
#define LEGEND_PAD    8
#define MIN_PLOT      40 /* smallest plot area we agree to draw into */

static const viz_rgb INK = {0x26, 0x26, 0x26};
static const viz_rgb AXIS = {0x40, 0x40, 0x40};
static const viz_rgb GRID = {0xe6, 0xe6, 0xe6};
static const viz_rgb LEGEND_EDGE = {0xcc, 0xcc, 0xcc};
static const viz_rgb WHITE = {0xff, 0xff, 0xff};

static const char *nonempty(const char *s) { return s && *s ? s : NULL; }

/* The value a point is plotted at on the y axis, or NaN if it cannot be. */
static double y_of(double y, int log_y) {
    if (!isfinite(y)) return NAN;
    if (log_y) return y > 0.0 ? log10(y) : NAN;
    return y;
}

static double x_of(const tg_series *s, int i) { return s->x ? s->x[i] : (double)i; }

/* Range [lo, hi] widened by 5% each side (matplotlib's default margins),
 * or by 1 around a single value. */
static void pad_range(double *lo, double *hi, double frac) {
    if (!(*lo <= *hi)) {
        *lo = 0.0;
        *hi = 1.0;
        return;
    }
    if (*lo == *hi) {
        double d = *lo != 0.0 ? fabs(*lo) * 0.1 : 1.0;
        *lo -= d;
        *hi += d;
        return;
    }
    double d = (*hi - *lo) * frac;
    *lo -= d;
    *hi += d;
}

static int check_args(const char *fn, const char *path, const tg_series *series, int n_series, const tg_plot_opts *o) {
    if (!path || !*path) return viz_error("%s: %d series: no output path given", fn, n_series);
    if (n_series <= 0) return viz_error("%s: n_series = %d: need at least one series", fn, n_series);
    if (!series) return viz_error("%s: %d series: series is NULL", fn, n_series);
    for (int k = 0; k < n_series; k++) {
        if (series[k].n < 0) return viz_error("%s: series %d has n = %d points", fn, k, series[k].n);
        if (series[k].n > 0 && !series[k].y) return viz_error("%s: series %d (n = %d): y is NULL", fn, k, series[k].n);
    }
    if (o->width < 0 || o->height < 0) return viz_error("%s: image size %d x %d is negative", fn, o->width, o->height);
    return 0;
}

typedef struct {
    int x, y, w, h;        /* plot area */
    double x0, x1, y0, y1; /* data range shown (y in log10 units if log_y) */
} axes;

static float to_px_x(const axes *a, double x) { return (float)(a->x + (x - a->x0) / (a->x1 - a->x0) * a->w); }
static float to_px_y(const axes *a, double y) { return (float)(a->y + a->h - (y - a->y0) / (a->y1 - a->y0) * a->h); }

/* Whether the segment (ax, ay)-(bx, by) (a point if both ends are equal)
 * meets the box [x0, x1] x [y0, y1]: Liang-Barsky clipping. */
static int segment_meets_box(float ax, float ay, float bx, float by, float x0, float y0, float x1, float y1) {
    double t0 = 0.0, t1 = 1.0, dx = (double)bx - ax, dy = (double)by - ay;
    double p[4] = {-dx, dx, -dy, dy}, q[4] = {ax - (double)x0, x1 - (double)ax, ay - (double)y0, y1 - (double)ay};
    for (int k = 0; k < 4; k++) {
        if (p[k] == 0.0) {
            if (q[k] < 0.0) return 0;
            continue;
        }
        double t = q[k] / p[k];
        if (p[k] < 0.0) {
            if (t > t1) return 0;
            if (t > t0) t0 = t;
        } else {
            if (t < t0) return 0;
            if (t < t1) t1 = t;
        }
    }
    return 1;
}

/* Whether any plotted point or line segment comes within a line's width
 * (plus a little air) of the box at (lx, ly), lw x lh pixels. */
static int box_covers_data(const axes *a, const tg_series *series, int n_series, int log_y, int lx, int ly, int lw,
                           int lh) {
    float pad = LINE_W * 0.5f + 3.0f;
    float x0 = (float)lx - pad, y0 = (float)ly - pad, x1 = (float)(lx + lw) + pad, y1 = (float)(ly + lh) + pad;
    for (int k = 0; k < n_series; k++) {
        int have_prev = 0;
        float qx = 0.0f, qy = 0.0f;
        for (int i = 0; i < series[k].n; i++) {
            double y = y_of(series[k].y[i], log_y), x = x_of(&series[k], i);
            if (!isfinite(x) || isnan(y)) {
                have_prev = 0;
                continue;
            }
            float px = to_px_x(a, x), py = to_px_y(a, y);
            /* The segment from the previous point, or the point itself. */
            if (segment_meets_box(have_prev ? qx : px, have_prev ? qy : py, px, py, x0, y0, x1, y1)) return 1;
            qx = px;
            qy = py;
            have_prev = 1;
        }
    }
    return 0;
}

/* The legend's size for the labelled series, or 0 rows if none is. */
static void legend_size(viz_font *f, const tg_series *series, int n_series, int *rows, int *lw, int *lh, int *row_h) {
    int tw = 0;
    *rows = 0;
    *row_h = viz_text_height(f, LEGEND_PX) + 4;
    for (int k = 0; k < n_series; k++)
        if (nonempty(series[k].label)) {
            int w = viz_text_width(f, series[k].label, LEGEND_PX);
            if (w > tw) tw = w;
            (*rows)++;
        }
    *lw = 2 * LEGEND_PAD + LEGEND_SAMPLE + GAP + tw;
    *lh = 2 * LEGEND_PAD + *rows * *row_h - 4;
}

/* The legend never covers data: it goes in the first corner of the plot
 * (top right, top left, bottom right, bottom left) where it hides no point
 * and no line, else outside the plot area, to the right of it (or below the
 * figure if it is taller than the plot), growing the canvas *cw x *ch. */
static void place_legend(const axes *a, const tg_series *series, int n_series, int log_y, int lw, int lh, int *lx,
                         int *ly, int *cw, int *ch) {
    int inset = 8;
    int cx[4] = {a->x + a->w - inset - lw, a->x + inset, a->x + a->w - inset - lw, a->x + inset};
    int cy[4] = {a->y + inset, a->y + inset, a->y + a->h - inset - lh, a->y + a->h - inset - lh};
    if (lw + 2 * inset <= a->w && lh + 2 * inset <= a->h)
        for (int c = 0; c < 4; c++)
            if (!box_covers_data(a, series, n_series, log_y, cx[c], cy[c], lw, lh)) {
                *lx = cx[c];
                *ly = cy[c];
                return;
            }
    if (lh <= a->h) {
        *lx = a->x + a->w + MARGIN;
        *ly = a->y;
        if (*lx + lw + MARGIN > *cw) *cw = *lx + lw + MARGIN;
        return;
    }
    *lx = a->x + (a->w - lw) / 2;
    if (*lx < MARGIN) *lx = MARGIN;
    *ly = *ch - MARGIN + GAP;
    *ch = *ly + lh + MARGIN;
    if (*lx + lw + MARGIN > *cw) *cw = *lx + lw + MARGIN;
}

static int draw_legend(viz_canvas *c, viz_font *f, const tg_series *series, int n_series, int lx, int ly, int lw,
                       int lh, int row_h) {
    viz_fill_rect(c, lx, ly, lx + lw, ly + lh, WHITE);
    viz_frame_rect(c, lx, ly, lw, lh, LEGEND_EDGE);
    int y = ly + LEGEND_PAD;
    for (int k = 0; k < n_series; k++) {
        if (!nonempty(series[k].label)) continue;
        float mid = (float)(y + (row_h - 4) / 2) + 0.5f;
        float xs[2] = {(float)(lx + LEGEND_PAD), (float)(lx + LEGEND_PAD + LEGEND_SAMPLE)};
        float ys[2] = {mid, mid};
        if (viz_polyline(c, xs, ys, 2, LINE_W + 0.5f, viz_series_color(k), "tg_viz_lineplot") ||
            viz_draw_text(c, f, series[k].label, LEGEND_PX, lx + LEGEND_PAD + LEGEND_SAMPLE + GAP, (int)mid, VIZ_START,
                          VIZ_CENTER, 0, INK))
            return -1;
        y += row_h;
    }
    return 0;
}

/* Lays out the w x h figure, places the legend (which may grow the canvas),
 * then creates the canvas *c and draws into it. */
static int draw_plot(viz_canvas *c, viz_font *f, const tg_series *series, int n_series, const tg_plot_opts *o, int w,
                     int h, const char *fn) {
    int log_y = o->log_y != 0;
    /* Data range over every plottable point. */
    double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
    for (int k = 0; k < n_series; k++)
        for (int i = 0; i < series[k].n; i++) {
            double x = x_of(&series[k], i), y = y_of(series[k].y[i], log_y);
            if (!isfinite(x) || isnan(y)) continue;
            if (x < xlo) xlo = x;
            if (x > xhi) xhi = x;
            if (y < ylo) ylo = y;
            if (y > yhi) yhi = y;
        }
    axes a;
    a.x0 = xlo;
    a.x1 = xhi;
    a.y0 = ylo;
    a.y1 = yhi;
    pad_range(&a.x0, &a.x1, 0.03);
    pad_range(&a.y0, &a.y1, 0.05);

    int tick_h = viz_text_height(f, TICK_PX), label_h = viz_text_height(f, LABEL_PX);
    int top = MARGIN + (nonempty(o->title) ? viz_text_height(f, TITLE_PX) + GAP + 2 : 0);
    int bottom = h - MARGIN - TICK_LEN - TICK_GAP - tick_h - (nonempty(o->xlabel) ? GAP + label_h : 0);
    int plot_h = bottom - top;

    /* y ticks first: their widest number decides the left margin. */
    double yt[VIZ_MAX_TICKS], ystep = 0.0;
    int ny_want = plot_h / 45 + 1, ny;
    if (log_y) {
        ny = viz_log_ticks(pow(10.0, a.y0), pow(10.0, a.y1), ny_want, yt);
    } else {
        ny = viz_nice_ticks(a.y0, a.y1, ny_want, yt, &ystep);
    }
    char ylab[VIZ_MAX_TICKS][32];
    int ytick_w = 0;
    for (int k = 0; k < ny; k++) {
        viz_format_tick(yt[k], log_y ? yt[k] : ystep, ylab[k], sizeof ylab[k]);
        int w = viz_text_width(f, ylab[k], TICK_PX);
        if (w > ytick_w) ytick_w = w;
    }
    int left = MARGIN + ytick_w + TICK_GAP + TICK_LEN + (nonempty(o->ylabel) ? label_h + GAP : 0);
    int right = w - MARGIN - 10; /* room for half the last x number */
    if (right - left < MIN_PLOT || plot_h < MIN_PLOT)
        return viz_error("%s: image %d x %d leaves a plot area of %d x %d, under %d x %d", fn, w, h, right - left,
                         plot_h, MIN_PLOT, MIN_PLOT);
    a.x = left;
    a.y = top;
    a.w = right - left;
    a.h = plot_h;

    int rows, lw, lh, row_h, lx = 0, ly = 0, cw = w, ch = h;
    legend_size(f, series, n_series, &rows, &lw, &lh, &row_h);
    if (rows) place_legend(&a, series, n_series, log_y, lw, lh, &lx, &ly, &cw, &ch);
    if (viz_canvas_init(c, cw, ch, WHITE, fn)) return -1;

    double xt[VIZ_MAX_TICKS], xstep;
    int nx = viz_nice_ticks(a.x0, a.x1, a.w / 90 + 1, xt, &xstep);

    /* Grid, then the data, then the frame and ticks over them. */
    for (int k = 0; k < nx; k++) {
        int x = (int)to_px_x(&a, xt[k]);
        viz_fill_rect(c, x, a.y, x + 1, a.y + a.h, GRID);
    }
    for (int k = 0; k < ny; k++) {
        int y = (int)to_px_y(&a, log_y ? log10(yt[k]) : yt[k]);
        viz_fill_rect(c, a.x, y, a.x + a.w, y + 1, GRID);
    }
    for (int k = 0; k < n_series; k++) {
        int n = series[k].n;
        if (n == 0) continue;
        float *px = malloc((size_t)n * 2 * sizeof *px);
        if (!px) return viz_error("%s: out of memory for series %d of %d points", fn, k, n);
        float *py = px + n;
        for (int i = 0; i < n; i++) {
            double x = x_of(&series[k], i), y = y_of(series[k].y[i], log_y);
            px[i] = isfinite(x) && !isnan(y) ? to_px_x(&a, x) : NAN;
            py[i] = isfinite(x) && !isnan(y) ? to_px_y(&a, y) : NAN;
        }
        int rc = viz_polyline(c, px, py, n, LINE_W, viz_series_color(k), fn);
        free(px);
        if (rc) return -1;
    }
    viz_frame_rect(c, a.x, a.y, a.w, a.h, AXIS);
    char buf[32];
    for (int k = 0; k < nx; k++) {
        int x = (int)to_px_x(&a, xt[k]);
        viz_fill_rect(c, x, a.y + a.h + 1, x + 1, a.y + a.h + 1 + TICK_LEN, AXIS);
        viz_format_tick(xt[k], xstep, buf, sizeof buf);
        if (viz_draw_text(c, f, buf, TICK_PX, x, a.y + a.h + 1 + TICK_LEN + TICK_GAP, VIZ_CENTER, VIZ_START, 0, INK))
            return -1;
    }
    for (int k = 0; k < ny; k++) {
        int y = (int)to_px_y(&a, log_y ? log10(yt[k]) : yt[k]);
        viz_fill_rect(c, a.x - 1 - TICK_LEN, y, a.x - 1, y + 1, AXIS);
        if (viz_draw_text(c, f, ylab[k], TICK_PX, a.x - 1 - TICK_LEN - TICK_GAP, y, VIZ_END, VIZ_CENTER, 0, INK))
            return -1;
    }
    if (rows && draw_legend(c, f, series, n_series, lx, ly, lw, lh, row_h)) return -1;
    if (nonempty(o->title) &&
        viz_draw_text(c, f, o->title, TITLE_PX, a.x + a.w / 2, MARGIN, VIZ_CENTER, VIZ_START, 0, INK))
        return -1;
    if (nonempty(o->xlabel) &&
        viz_draw_text(c, f, o->xlabel, LABEL_PX, a.x + a.w / 2, a.y + a.h + 1 + TICK_LEN + TICK_GAP + tick_h + GAP,
                      VIZ_CENTER, VIZ_START, 0, INK))
        return -1;
    if (nonempty(o->ylabel) &&
        viz_draw_text(c, f, o->ylabel, LABEL_PX, MARGIN, a.y + a.h / 2, VIZ_START, VIZ_CENTER, 1, INK))
        return -1;
    return 0;
}

static const tg_plot_opts default_opts;

int tg_viz_lineplot(const char *png_path, const tg_series *series, int n_series, const tg_plot_opts *o) {
    const char *fn = "tg_viz_lineplot";
    if (!o) o = &default_opts;
    if (check_args(fn, png_path, series, n_series, o)) return -1;
    int w = o->width ? o->width : 640, h = o->height ? o->height : 420;
    viz_font *f = viz_font_open();
    if (!f) return viz_error("%s: out of memory opening the font", fn);
    viz_canvas c = {0, 0, NULL};
    int rc = draw_plot(&c, f, series, n_series, o, w, h, fn);
    if (!rc) rc = viz_canvas_write_png(&c, png_path, fn);
    viz_canvas_free(&c);
    viz_font_close(f);
    return rc;
}
