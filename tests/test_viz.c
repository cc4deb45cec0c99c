/* Tests for src/viz: figures are written to a temporary directory and read
 * back with stb_image (compiled here: the library keeps its stb private), then
 * checked where it matters: image size, the colour of known cells, text
 * present, lines drawn, errors reported, files written atomically. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define STB_IMAGE_IMPLEMENTATION
#include <stb/stb_image.h>

#include "viz/viz.h"

#include "concurrent_writers.h"

/* ---- helpers ------------------------------------------------------------- */

static char tmpdir[64];

static void make_tmpdir(void) {
    strcpy(tmpdir, "/tmp/tg_viz_test_XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir), "mkdtemp failed");
}

/* Removes the files (and empty directories) in tmpdir, then tmpdir. */
static void remove_tmpdir(void) {
    DIR *d = opendir(tmpdir);
    if (!d) return;
    struct dirent *e;
    char p[512];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
        if (remove(p) != 0) rmdir(p);
    }
    closedir(d);
    rmdir(tmpdir);
    tg_viz_set_font(NULL);
}

TestSuite(viz, .init = make_tmpdir, .fini = remove_tmpdir);

static const char *path_in_tmp(const char *name) {
    static char p[8][256];
    static int k;
    k = (k + 1) % 8;
    snprintf(p[k], sizeof p[k], "%s/%s", tmpdir, name);
    return p[k];
}

static int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

typedef struct {
    unsigned char *px;
    int w, h;
} image;

static image load(const char *path) {
    image im = {NULL, 0, 0};
    int n = 0;
    im.px = stbi_load(path, &im.w, &im.h, &n, 3);
    cr_assert_not_null(im.px, "cannot read back %s: %s", path, stbi_failure_reason());
    return im;
}

static const unsigned char *pixel(const image *im, int x, int y) {
    cr_assert(x >= 0 && y >= 0 && x < im->w && y < im->h, "pixel (%d,%d) outside %d x %d image", x, y, im->w, im->h);
    return im->px + ((size_t)y * (size_t)im->w + (size_t)x) * 3;
}

static double luminance(const unsigned char *p) { return 0.299 * p[0] + 0.587 * p[1] + 0.114 * p[2]; }

/* Centre pixel of cell (r, c) of a rows x cols matrix drawn in plot. */
static const unsigned char *cell(const image *im, tg_viz_rect plot, int rows, int cols, int r, int c) {
    int x = plot.x + (int)((c + 0.5) * plot.w / cols);
    int y = plot.y + (int)((r + 0.5) * plot.h / rows);
    return pixel(im, x, y);
}

/* Dark pixels (text, frames) in [x0, x1) x [y0, y1). */
static int count_dark(const image *im, int x0, int y0, int x1, int y1) {
    int n = 0;
    for (int y = y0; y < y1; y++)
        for (int x = x0; x < x1; x++)
            if (luminance(pixel(im, x, y)) < 128) n++;
    return n;
}

/* ---- heatmaps ------------------------------------------------------------ */

/* Draws m as a heatmap to p and loads it back; *plot is where its cells are. */
static image draw_heatmap(const char *p, const float *m, int R, int C, const tg_heatmap_opts *o, tg_viz_rect *plot) {
    cr_assert_eq(tg_viz_heatmap(p, m, R, C, o), 0, "%s", tg_viz_last_error());
    cr_assert_eq(tg_viz_heatmap_geometry(R, C, o, NULL, NULL, plot), 0);
    return load(p);
}

Test(viz, heatmap_size_matches_geometry_and_is_readable) {
    float m[16 * 16];
    for (int i = 0; i < 16 * 16; i++) m[i] = (float)i;
    tg_heatmap_opts o = {.title = "t", .xlabel = "keys", .ylabel = "queries"};
    const char *p = path_in_tmp("h16.png");
    cr_assert_eq(tg_viz_heatmap(p, m, 16, 16, &o), 0, "%s", tg_viz_last_error());
    int w, h;
    tg_viz_rect plot;
    cr_assert_eq(tg_viz_heatmap_geometry(16, 16, &o, &w, &h, &plot), 0);
    image im = load(p);
    cr_expect_eq(im.w, w);
    cr_expect_eq(im.h, h);
    cr_expect_geq(plot.w, 300, "a 16x16 matrix should get a readable plot, got %d px", plot.w);
    cr_expect_eq(plot.w, plot.h, "square matrix, square cells");
    cr_expect(plot.x > 0 && plot.y > 0 && plot.x + plot.w < w && plot.y + plot.h < h);
    stbi_image_free(im.px);

    /* 60 x 32, the positional-encoding shape: tall, readable, bounded. */
    cr_assert_eq(tg_viz_heatmap_geometry(60, 32, &o, &w, &h, &plot), 0);
    cr_expect_geq(plot.h, 300);
    cr_expect_geq(plot.w, 150);
    cr_expect_leq(h, 1000);
}

Test(viz, maximum_cell_is_the_darkest_blue) {
    enum { R = 7, C = 9 };
    float m[R * C];
    for (int i = 0; i < R * C; i++) m[i] = (float)((i * 37) % 19) / 19.0f; /* scattered values in [0, 1) */
    m[2 * C + 3] = 5.0f;                                                   /* the maximum at (2, 3) */
    m[4 * C + 1] = -1.0f;                                                  /* the minimum at (4, 1) */
    tg_heatmap_opts o = {.cmap = TG_CMAP_BLUES};
    const char *p = path_in_tmp("max.png");
    tg_viz_rect plot;
    image im = draw_heatmap(p, m, R, C, &o, &plot);
    double lmax = luminance(cell(&im, plot, R, C, 2, 3));
    double lmin = luminance(cell(&im, plot, R, C, 4, 1));
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) {
            double l = luminance(cell(&im, plot, R, C, r, c));
            if (r != 2 || c != 3) cr_expect_gt(l, lmax, "cell (%d,%d) is as dark as the maximum", r, c);
            if (r != 4 || c != 1) cr_expect_lt(l, lmin, "cell (%d,%d) is as light as the minimum", r, c);
        }
    /* The extremes get the ends of the map. */
    unsigned char dark[3], light[3];
    tg_viz_cmap_color(TG_CMAP_BLUES, 1.0, dark);
    tg_viz_cmap_color(TG_CMAP_BLUES, 0.0, light);
    cr_expect_arr_eq(cell(&im, plot, R, C, 2, 3), dark, 3);
    cr_expect_arr_eq(cell(&im, plot, R, C, 4, 1), light, 3);
    stbi_image_free(im.px);
}

Test(viz, diverging_map_is_white_at_zero) {
    enum { R = 3, C = 4 };
    /* Asymmetric data: [-0.5, 2]. Centred on 0, the scale is [-2, 2]. */
    float m[R * C] = {-0.5f, 0.0f, 1.0f, 2.0f, 0.5f, -0.25f, 0.0f, 1.5f, 0.0f, 0.25f, -0.5f, 0.0f};
    tg_heatmap_opts o = {.cmap = TG_CMAP_RDBU};
    const char *p = path_in_tmp("rdbu.png");
    tg_viz_rect plot;
    image im = draw_heatmap(p, m, R, C, &o, &plot);
    const unsigned char *zero = cell(&im, plot, R, C, 0, 1);
    for (int k = 0; k < 3; k++)
        cr_expect_geq(zero[k], 235, "0 should be white-ish, got (%d,%d,%d)", zero[0], zero[1], zero[2]);
    const unsigned char *neg = cell(&im, plot, R, C, 0, 0), *pos = cell(&im, plot, R, C, 0, 3);
    cr_expect_gt(neg[0], neg[2], "negative values are red");
    cr_expect_gt(pos[2], pos[0], "positive values are blue");

    /* symmetric = -1 turns centring off: 0 is no longer the middle. */
    o.symmetric = -1;
    cr_assert_eq(tg_viz_heatmap(p, m, R, C, &o), 0, "%s", tg_viz_last_error());
    stbi_image_free(im.px);
    im = load(p);
    zero = cell(&im, plot, R, C, 0, 1);
    cr_expect_gt(zero[0], zero[2], "on [-0.5, 2], 0 is in the red half");
    stbi_image_free(im.px);
}

Test(viz, non_finite_values_are_grey_and_left_out_of_the_scale) {
    enum { R = 4, C = 4 };
    float m[R * C];
    for (int i = 0; i < R * C; i++) m[i] = (float)i / 16.0f;
    m[1] = NAN;
    m[6] = INFINITY;
    m[9] = -INFINITY;
    m[15] = 0.5f; /* with inf excluded, 14/16 is the maximum */
    tg_heatmap_opts o = {.cmap = TG_CMAP_REDS};
    const char *p = path_in_tmp("nan.png");
    tg_viz_rect plot;
    image im = draw_heatmap(p, m, R, C, &o, &plot);
    unsigned char grey[3], dark[3];
    tg_viz_cmap_color(TG_CMAP_REDS, NAN, grey);
    tg_viz_cmap_color(TG_CMAP_REDS, 1.0, dark);
    cr_expect_eq(grey[0], grey[1]);
    cr_expect_eq(grey[1], grey[2]);
    cr_expect_arr_eq(cell(&im, plot, R, C, 0, 1), grey, 3);
    cr_expect_arr_eq(cell(&im, plot, R, C, 1, 2), grey, 3);
    cr_expect_arr_eq(cell(&im, plot, R, C, 2, 1), grey, 3);
    cr_expect_arr_eq(cell(&im, plot, R, C, 3, 2), dark, 3, "the largest finite value is darkest");
    stbi_image_free(im.px);

    /* All NaN: still a figure. */
    for (int i = 0; i < R * C; i++) m[i] = NAN;
    cr_expect_eq(tg_viz_heatmap(p, m, R, C, &o), 0, "%s", tg_viz_last_error());
}

Test(viz, titles_and_labels_put_text_on_the_image) {
    float m[5 * 5];
    for (int i = 0; i < 25; i++) m[i] = (float)i;
    tg_heatmap_opts bare = {0}, titled = {.title = "Attention weights", .xlabel = "Keys", .ylabel = "Queries"};
    const char *fonts[3] = {NULL, "", "/nonexistent/font.ttf"}; /* TrueType, built-in, fallback */
    for (int k = 0; k < 3; k++) {
        cr_assert_eq(tg_viz_set_font(fonts[k]), 0);
        const char *p = path_in_tmp("titled.png");
        cr_assert_eq(tg_viz_heatmap(p, m, 5, 5, &titled), 0, "%s", tg_viz_last_error());
        tg_viz_rect plot, bplot;
        int w, h;
        cr_assert_eq(tg_viz_heatmap_geometry(5, 5, &titled, &w, &h, &plot), 0);
        cr_assert_eq(tg_viz_heatmap_geometry(5, 5, &bare, NULL, NULL, &bplot), 0);
        cr_expect_gt(plot.y, bplot.y, "a title takes room above the plot");
        image im = load(p);
        cr_assert_eq(im.w, w);
        int title = count_dark(&im, 0, 0, im.w, plot.y - 8);
        int xlabel = count_dark(&im, plot.x, plot.y + plot.h + 22, plot.x + plot.w, im.h);
        int ylabel = count_dark(&im, 0, plot.y, 20, plot.y + plot.h);
        cr_expect_gt(title, 30, "font %d: no title text (%d dark pixels)", k, title);
        cr_expect_gt(xlabel, 15, "font %d: no x label text (%d dark pixels)", k, xlabel);
        cr_expect_gt(ylabel, 15, "font %d: no y label text (%d dark pixels)", k, ylabel);
        stbi_image_free(im.px);
    }
}

Test(viz, grid_of_heatmaps_with_shared_and_per_panel_scales) {
    enum { GR = 2, GC = 4, N = 6 };
    float data[GR * GC][N * N];
    const float *mats[GR * GC];
    for (int k = 0; k < GR * GC; k++) {
        /* Panel k holds values in [0, k + 1], its maximum at (k % N, N - 1 - k % N). */
        for (int i = 0; i < N * N; i++) data[k][i] = (float)(k + 1) * (float)((i * 7) % 11) / 22.0f;
        data[k][(k % N) * N + (N - 1 - k % N)] = (float)(k + 1);
        mats[k] = data[k];
    }
    const char *titles[GC] = {"Head 1", "Head 2", NULL, "Head 4"};
    tg_heatmap_opts o = {.xlabel = "Keys", .ylabel = "Queries", .cmap = TG_CMAP_BLUES, .shared_scale = 1};
    unsigned char dark[3];
    tg_viz_cmap_color(TG_CMAP_BLUES, 1.0, dark);
    for (int shared = 1; shared >= 0; shared--) {
        o.shared_scale = shared;
        const char *p = path_in_tmp("grid.png");
        cr_assert_eq(tg_viz_heatmap_grid(p, GR, GC, mats, N, N, titles, &o), 0, "%s", tg_viz_last_error());
        int w, h;
        tg_viz_rect plots[GR * GC];
        cr_assert_eq(tg_viz_heatmap_grid_geometry(GR, GC, N, N, titles, &o, &w, &h, plots), 0);
        image im = load(p);
        cr_assert_eq(im.w, w);
        cr_assert_eq(im.h, h);
        for (int k = 0; k < GR * GC; k++) {
            const unsigned char *top = cell(&im, plots[k], N, N, k % N, N - 1 - k % N);
            if (shared) /* only the overall maximum (panel 7) is darkest */
                cr_expect(k == GR * GC - 1 ? !memcmp(top, dark, 3) : luminance(top) > luminance(dark) + 5,
                          "shared scale, panel %d", k);
            else /* every panel's own maximum is darkest */
                cr_expect_arr_eq(top, dark, 3, "per-panel scale, panel %d", k);
        }
        /* Panels do not overlap and keep their order. */
        cr_expect_lt(plots[0].x + plots[0].w, plots[1].x);
        cr_expect_lt(plots[0].y + plots[0].h, plots[GC].y);
        /* Column titles sit above the top row. */
        cr_expect_gt(count_dark(&im, plots[0].x, 0, plots[0].x + plots[0].w, plots[0].y - 2), 20);
        stbi_image_free(im.px);
    }
}

Test(viz, large_and_thin_matrices_stay_bounded_and_visible) {
    enum { N = 512 };
    float *m = malloc(sizeof(float) * N * N);
    cr_assert_not_null(m);
    for (int i = 0; i < N * N; i++) m[i] = (float)sin(i * 0.001);
    const char *p = path_in_tmp("big.png");
    cr_assert_eq(tg_viz_heatmap(p, m, N, N, NULL), 0, "%s", tg_viz_last_error());
    image im = load(p);
    cr_expect_leq(im.w, 1000);
    cr_expect_leq(im.h, 1000);
    cr_expect_geq(im.w, 300);
    stbi_image_free(im.px);

    /* One row of 300: the cells are stretched so the strip can be seen. */
    tg_viz_rect plot;
    cr_assert_eq(tg_viz_heatmap_geometry(1, 300, NULL, NULL, NULL, &plot), 0);
    cr_expect_geq(plot.h, 40);
    cr_expect_eq(tg_viz_heatmap(p, m, 1, 300, NULL), 0, "%s", tg_viz_last_error());

    /* An explicit cell size is honoured. */
    tg_heatmap_opts o = {.cell_px = 7};
    cr_assert_eq(tg_viz_heatmap_geometry(10, 20, &o, NULL, NULL, &plot), 0);
    cr_expect_eq(plot.w, 140);
    cr_expect_eq(plot.h, 70);
    free(m);
}

/* ---- line plots ---------------------------------------------------------- */

static int count_color(const image *im, const unsigned char rgb[3], int tol) {
    int n = 0;
    for (int i = 0; i < im->w * im->h; i++) {
        const unsigned char *p = im->px + (size_t)i * 3;
        if (abs(p[0] - rgb[0]) <= tol && abs(p[1] - rgb[1]) <= tol && abs(p[2] - rgb[2]) <= tol) n++;
    }
    return n;
}

Test(viz, lineplot_draws_each_series_in_its_colour) {
    enum { N = 100 };
    float x[N], a[N], b[N], c[N];
    for (int i = 0; i < N; i++) {
        x[i] = (float)i * 0.5f;
        a[i] = 2.0f * expf(-i / 20.0f) + 0.05f;
        b[i] = 2.5f * expf(-i / 40.0f) + 0.2f;
        c[i] = 1.0f + 0.1f * sinf(i * 0.3f);
    }
    b[50] = NAN; /* a gap, not a crash */
    tg_series s[3] = {{"train", x, a, N}, {"valid", x, b, N}, {NULL, NULL, c, N}};
    for (int log_y = 0; log_y <= 1; log_y++) {
        tg_plot_opts o = {.title = "Loss", .xlabel = "epoch", .ylabel = "loss", .log_y = log_y};
        const char *p = path_in_tmp("loss.png");
        cr_assert_eq(tg_viz_lineplot(p, s, 3, &o), 0, "%s", tg_viz_last_error());
        image im = load(p);
        cr_expect_eq(im.w, 640);
        cr_expect_eq(im.h, 420);
        for (int k = 0; k < 3; k++) {
            unsigned char col[3];
            tg_viz_series_color(k, col);
            int n = count_color(&im, col, 10);
            cr_expect_gt(n, 100, "log_y=%d: series %d colour on %d pixels only", log_y, k, n);
        }
        cr_expect_gt(count_dark(&im, 0, 0, im.w, 30), 20, "title text");
        stbi_image_free(im.px);
    }
    /* Sizes, and values a log axis cannot show (<= 0) are skipped. */
    a[0] = 0.0f;
    a[1] = -1.0f;
    tg_plot_opts o = {.log_y = 1, .width = 300, .height = 200};
    const char *p = path_in_tmp("small.png");
    cr_assert_eq(tg_viz_lineplot(p, s, 1, &o), 0, "%s", tg_viz_last_error());
    image im = load(p);
    cr_expect_eq(im.w, 300);
    cr_expect_eq(im.h, 200);
    stbi_image_free(im.px);
    /* A single point and an empty series still make a figure. */
    tg_series one[2] = {{"one", NULL, c, 1}, {"none", NULL, NULL, 0}};
    cr_expect_eq(tg_viz_lineplot(p, one, 2, NULL), 0, "%s", tg_viz_last_error());
}

/* The legend's frame in a line plot: the rows holding a run of at least 40
 * pixels of its edge colour (#cccccc), which nothing else draws that long. */
static int find_legend(const image *im, int *x0, int *y0, int *x1, int *y1) {
    int found = 0;
    for (int y = 0; y < im->h; y++) {
        int run = 0;
        for (int x = 0; x < im->w; x++) {
            const unsigned char *p = pixel(im, x, y);
            run = p[0] == 0xcc && p[1] == 0xcc && p[2] == 0xcc ? run + 1 : 0;
            if (run != 40) continue;
            int xs = x - 39, xe = x;
            while (xe + 1 < im->w && pixel(im, xe + 1, y)[0] == 0xcc && pixel(im, xe + 1, y)[1] == 0xcc) xe++;
            if (!found) {
                *x0 = xs;
                *x1 = xe;
                *y0 = y;
            }
            *y1 = y;
            found = 1;
        }
    }
    return found;
}

/* Pixels of some colour (data lines, in any tab10 colour but grey): axes,
 * grid, text and the legend's frame are all grey. */
static int colourful(const unsigned char *p) {
    int mx = p[0], mn = p[0];
    for (int k = 1; k < 3; k++) {
        if (p[k] > mx) mx = p[k];
        if (p[k] < mn) mn = p[k];
    }
    return mx - mn > 24;
}

/* Draws the series with their labels and without (so no legend), finds the
 * legend's box in the first and checks that the second has no data pixel
 * there: the legend hides nothing. Returns the first figure's width. */
static int expect_legend_hides_nothing(const char *what, const tg_series *series, int n) {
    tg_series bare[4];
    cr_assert_leq(n, 4);
    for (int k = 0; k < n; k++) {
        bare[k] = series[k];
        bare[k].label = NULL;
    }
    const char *pl = path_in_tmp("legend.png"), *pb = path_in_tmp("bare.png");
    cr_assert_eq(tg_viz_lineplot(pl, series, n, NULL), 0, "%s", tg_viz_last_error());
    cr_assert_eq(tg_viz_lineplot(pb, bare, n, NULL), 0, "%s", tg_viz_last_error());
    image with = load(pl), without = load(pb);
    cr_expect_eq(without.w, 640);
    cr_expect_eq(without.h, 420);
    int x0 = 0, y0 = 0, x1 = 0, y1 = 0;
    cr_assert(find_legend(&with, &x0, &y0, &x1, &y1), "%s: no legend frame found", what);
    cr_expect_gt(y1 - y0, 15, "%s: legend frame %d..%d x %d..%d", what, x0, x1, y0, y1);
    int hidden = 0;
    for (int y = y0; y <= y1 && y < without.h; y++)
        for (int x = x0; x <= x1 && x < without.w; x++) hidden += colourful(pixel(&without, x, y));
    cr_expect_eq(hidden, 0, "%s: the legend at x %d..%d, y %d..%d covers %d data pixels", what, x0, x1, y0, y1, hidden);
    int w = with.w;
    stbi_image_free(with.px);
    stbi_image_free(without.px);
    return w;
}

Test(viz, lineplot_legend_never_covers_data) {
    /* Points fill the top-right corner, where the legend usually goes, and a
     * flat line runs along the bottom: the legend goes top left, inside. */
    enum { N = 60 };
    float x[N], dense[N], flat[N];
    for (int i = 0; i < N; i++) {
        x[i] = (float)i / (N - 1);
        dense[i] = x[i] < 0.5f ? 0.5f : (i % 2 ? 1.0f : 0.75f);
        flat[i] = 0.0f;
    }
    tg_series corner[2] = {{"dense top right", x, dense, N}, {"flat bottom", x, flat, N}};
    cr_expect_eq(expect_legend_hides_nothing("top right filled", corner, 2), 640, "the legend fits inside");
    /* Two diagonals: their ends sit in all four corners. */
    float ends[2] = {0.0f, 1.0f}, up[2] = {0.0f, 1.0f}, down[2] = {1.0f, 0.0f};
    tg_series cross[2] = {{"up", ends, up, 2}, {"down", ends, down, 2}};
    cr_expect_gt(expect_legend_hides_nothing("diagonals", cross, 2), 640, "the canvas grows for the legend");
    /* An octagon whose sides cut every corner with no point in any: only
     * the line segments are in the way. */
    float ox[9] = {0.15f, 0.85f, 1.0f, 1.0f, 0.85f, 0.15f, 0.0f, 0.0f, 0.15f};
    float oy[9] = {0.0f, 0.0f, 0.15f, 0.85f, 1.0f, 1.0f, 0.85f, 0.15f, 0.0f};
    tg_series oct[1] = {{"oct", ox, oy, 9}};
    cr_expect_gt(expect_legend_hides_nothing("octagon", oct, 1), 640, "the canvas grows for the legend");
}

/* ---- errors and atomic writes -------------------------------------------- */

static void expect_error(int rc, const char *must_contain, const char *must_contain2) {
    cr_expect_eq(rc, -1);
    const char *e = tg_viz_last_error();
    cr_assert_not_null(e, "no error message recorded");
    cr_expect_not_null(strstr(e, must_contain), "message '%s' lacks '%s'", e, must_contain);
    if (must_contain2) cr_expect_not_null(strstr(e, must_contain2), "message '%s' lacks '%s'", e, must_contain2);
    tg_viz_clear_error();
    cr_expect_null(tg_viz_last_error());
}

Test(viz, bad_arguments_return_minus_one_with_a_message) {
    float m[4] = {1, 2, 3, 4};
    const float *mats[2] = {m, NULL};
    const char *p = path_in_tmp("bad.png");
    expect_error(tg_viz_heatmap(p, m, 0, 5, NULL), "tg_viz_heatmap", "(0,5)");
    expect_error(tg_viz_heatmap(p, m, 2, -1, NULL), "tg_viz_heatmap", "(2,-1)");
    expect_error(tg_viz_heatmap(p, NULL, 2, 2, NULL), "tg_viz_heatmap", "NULL");
    expect_error(tg_viz_heatmap(NULL, m, 2, 2, NULL), "tg_viz_heatmap", "path");
    tg_heatmap_opts o = {.cmap = (tg_cmap)42};
    expect_error(tg_viz_heatmap(p, m, 2, 2, &o), "tg_viz_heatmap", "colour map");
    o = (tg_heatmap_opts){.cell_px = -3};
    expect_error(tg_viz_heatmap(p, m, 2, 2, &o), "tg_viz_heatmap", "cell_px");
    expect_error(tg_viz_heatmap_grid(p, 1, 2, mats, 2, 2, NULL, NULL), "tg_viz_heatmap_grid", "NULL");
    expect_error(tg_viz_heatmap_grid(p, 0, 2, mats, 2, 2, NULL, NULL), "tg_viz_heatmap_grid", "(0,2)");
    expect_error(tg_viz_heatmap_grid(p, 1, 1, NULL, 2, 2, NULL, NULL), "tg_viz_heatmap_grid", "NULL");
    expect_error(tg_viz_heatmap_geometry(3, 0, NULL, NULL, NULL, NULL), "tg_viz_heatmap_geometry", "(3,0)");
    expect_error(tg_viz_heatmap("/nonexistent-dir/x/fig.png", m, 2, 2, NULL), "tg_viz_heatmap",
                 "/nonexistent-dir/x/fig.png");

    tg_series s = {"s", NULL, m, 4}, bad = {"s", NULL, NULL, 4}, neg = {"s", NULL, m, -2};
    expect_error(tg_viz_lineplot(p, &s, 0, NULL), "tg_viz_lineplot", "n_series");
    expect_error(tg_viz_lineplot(p, NULL, 1, NULL), "tg_viz_lineplot", "NULL");
    expect_error(tg_viz_lineplot(p, &bad, 1, NULL), "tg_viz_lineplot", "y is NULL");
    expect_error(tg_viz_lineplot(p, &neg, 1, NULL), "tg_viz_lineplot", "-2");
    tg_plot_opts tiny = {.width = 50, .height = 40};
    expect_error(tg_viz_lineplot(p, &s, 1, &tiny), "tg_viz_lineplot", "50 x 40");
    expect_error(tg_viz_lineplot("/nonexistent-dir/loss.png", &s, 1, NULL), "tg_viz_lineplot",
                 "/nonexistent-dir/loss.png");
    cr_expect_not(file_exists(p), "no figure after errors");
}

/* A path of about 3000 bytes (PATH_MAX is 4096) reaches the message whole,
 * with the reason after it. */
Test(viz, long_path_message_whole) {
    float m[4] = {1, 2, 3, 4};
    size_t n = 3000;
    char *p = malloc(n + 32);
    strcpy(p, "/nonexistent-dir/");
    for (size_t at = strlen(p); at < n; at += 2) memcpy(p + at, "./", 3);
    strcat(p, "fig.png");
    cr_assert_eq(tg_viz_heatmap(p, m, 2, 2, NULL), -1);
    const char *e = tg_viz_last_error(), *why = ": No such file or directory";
    cr_assert_not_null(e);
    cr_expect_not_null(strstr(e, p), "the path is cut");
    cr_expect(strlen(e) > strlen(why) && strcmp(e + strlen(e) - strlen(why), why) == 0, "the message is cut: ...%s",
              e + (strlen(e) > 40 ? strlen(e) - 40 : 0));
    free(p);
}

/* Number of entries in tmpdir whose name starts with prefix. */
static int count_prefixed(const char *prefix) {
    DIR *d = opendir(tmpdir);
    cr_assert_not_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

Test(viz, writes_are_atomic) {
    float good[4] = {0, 1, 2, 3};
    const char *p = path_in_tmp("fig.png");
    cr_assert_eq(tg_viz_heatmap(p, good, 2, 2, NULL), 0, "%s", tg_viz_last_error());
    cr_expect(file_exists(p));
    cr_expect_eq(count_prefixed("fig.png.tmp"), 0, "a successful write leaves no temporary");

    /* A write that fails at the end (rename onto a non-empty directory)
     * reports the path and leaves no temporary behind. */
    const char *dirp = path_in_tmp("dir.png");
    char inner[600];
    cr_assert_eq(mkdir(dirp, 0700), 0);
    snprintf(inner, sizeof inner, "%s/x", dirp);
    FILE *f = fopen(inner, "w");
    cr_assert_not_null(f);
    fclose(f);
    cr_expect_eq(tg_viz_heatmap(dirp, good, 2, 2, NULL), -1);
    cr_expect_not_null(strstr(tg_viz_last_error(), "dir.png"), "%s", tg_viz_last_error());
    cr_expect_eq(count_prefixed("dir.png.tmp"), 0, "a failed write leaves no temporary");
    unlink(inner);
    rmdir(dirp);
}

/* Writer w of the concurrent writers below: a heatmap of its own, drawn to
 * path 10 times. */
static int heatmap_rounds(int w, const void *path) {
    float m[64];
    for (int i = 0; i < 64; i++) m[i] = (float)(i * (w + 1));
    int rc = 0;
    for (int r = 0; r < 10; r++) rc |= tg_viz_heatmap(path, m, 8, 8, NULL);
    return rc;
}

/* Issue 10, defect 3: the temporary was always "<png>.tmp", opened with
 * fopen: a symlink planted there was followed (the save overwrote another
 * file), two runs with the same --out collided, and killed saves left
 * temporaries forever. */
Test(viz, temporaries_are_exclusive_and_stale_ones_are_removed) {
    float good[4] = {0, 1, 2, 3};
    const char *p = path_in_tmp("fig.png");
    char victim[600], link1[600], link2[600], stale[600], live[600];
    snprintf(victim, sizeof victim, "%s/victim.txt", tmpdir);
    snprintf(link1, sizeof link1, "%s.tmp", p);
    snprintf(link2, sizeof link2, "%s.tmp.%ld", p, (long)getpid());
    FILE *f = fopen(victim, "w");
    cr_assert_not_null(f);
    fputs("precious", f);
    fclose(f);
    cr_assert_eq(symlink(victim, link1), 0);
    cr_assert_eq(symlink(victim, link2), 0);

    /* A dead writer's temporary (no process has pid 2^22 - 1 here: checked) and a live one's. */
    long dead = 4194303;
    cr_assert(kill((pid_t)dead, 0) != 0, "pid %ld unexpectedly runs", dead);
    snprintf(stale, sizeof stale, "%s.tmp.%ld.AbC123", p, dead);
    snprintf(live, sizeof live, "%s.tmp.%ld.AbC123", p, (long)getppid());
    cr_assert_not_null(f = fopen(stale, "w"));
    fclose(f);
    cr_assert_not_null(f = fopen(live, "w"));
    fclose(f);

    cr_assert_eq(tg_viz_heatmap(p, good, 2, 2, NULL), 0, "%s", tg_viz_last_error());
    char buf[16] = {0};
    cr_assert_not_null(f = fopen(victim, "r"));
    cr_expect_not_null(fgets(buf, sizeof buf, f));
    fclose(f);
    cr_expect_str_eq(buf, "precious", "a planted symlink was followed");
    cr_expect_not(file_exists(stale), "a dead writer's temporary was not removed");
    cr_expect(file_exists(live), "a live writer's temporary must be left alone");
    unlink(link1);
    unlink(link2);
    unlink(live);
    unlink(victim);

    /* Concurrent writers of one path: all succeed, the file is whole. */
    run_concurrent_writers(6, heatmap_rounds, p);
    image im = load(p);
    int wpx, hpx;
    cr_assert_eq(tg_viz_heatmap_geometry(8, 8, NULL, &wpx, &hpx, NULL), 0);
    cr_expect_eq(im.w, wpx);
    cr_expect_eq(im.h, hpx);
    stbi_image_free(im.px);
    cr_expect_eq(count_prefixed("fig.png.tmp"), 0, "concurrent writers left temporaries");
}

Test(viz, colour_maps_run_light_to_dark_and_diverge_through_white) {
    unsigned char lo[3], hi[3], mid[3], nan[3];
    tg_cmap seq[3] = {TG_CMAP_BLUES, TG_CMAP_REDS, TG_CMAP_VIRIDIS};
    for (int k = 0; k < 3; k++) {
        tg_viz_cmap_color(seq[k], 0.0, lo);
        tg_viz_cmap_color(seq[k], 1.0, hi);
        if (seq[k] == TG_CMAP_VIRIDIS)
            cr_expect_lt(luminance(lo), luminance(hi), "viridis runs dark to light");
        else
            cr_expect_gt(luminance(lo), luminance(hi), "map %d runs light to dark", k);
        /* Monotone luminance along the map. */
        double prev = luminance(lo);
        for (int i = 1; i <= 20; i++) {
            unsigned char c[3];
            tg_viz_cmap_color(seq[k], i / 20.0, c);
            double l = luminance(c);
            if (seq[k] == TG_CMAP_VIRIDIS)
                cr_expect_geq(l, prev - 1e-9);
            else
                cr_expect_leq(l, prev + 1e-9);
            prev = l;
        }
    }
    tg_viz_cmap_color(TG_CMAP_RDBU, 0.5, mid);
    tg_viz_cmap_color(TG_CMAP_RDBU, 0.0, lo);
    tg_viz_cmap_color(TG_CMAP_RDBU, 1.0, hi);
    cr_expect(mid[0] > 240 && mid[1] > 240 && mid[2] > 240);
    cr_expect(lo[0] > lo[2] && hi[2] > hi[0]);
    tg_viz_cmap_color(TG_CMAP_BLUES, -3.0, mid); /* clamped */
    tg_viz_cmap_color(TG_CMAP_BLUES, 0.0, lo);
    cr_expect_arr_eq(mid, lo, 3);
    tg_viz_cmap_color(TG_CMAP_BLUES, NAN, nan);
    cr_expect(nan[0] == nan[1] && nan[1] == nan[2]);
    /* Series colours are distinct. */
    unsigned char a[3], b[3];
    for (int i = 0; i < 10; i++)
        for (int j = i + 1; j < 10; j++) {
            tg_viz_series_color(i, a);
            tg_viz_series_color(j, b);
            cr_expect(memcmp(a, b, 3) != 0, "series %d and %d share a colour", i, j);
        }
}
