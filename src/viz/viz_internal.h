/* Shared by the files of src/viz/; not part of the public API (see viz.h).
 *
 *   error.c     the per-thread error message
 *   canvas.c    an RGB raster: rectangles, anti-aliased lines, atomic PNG write
 *   font.c      text: TrueType through stb_truetype, or a built-in bitmap font
 *   colormap.c  colour maps and the series palette
 *   ticks.c     "nice" tick positions and their labels
 *   heatmap.c   heatmaps and grids of heatmaps with colour bars
 *   lineplot.c  line plots with a legend
 *   stb_impl.c  the one place the stb implementations are compiled
 *   report.c    the run report's HTML page; report_assets.c holds its CSS
 *               and JavaScript (generated from report/ by tools/embed_report.sh)
 *   sha256.c    SHA-256 and base64, for the page's script hash (its CSP)
 */
#ifndef TG_VIZ_INTERNAL_H
#define TG_VIZ_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "viz.h"

/* ---- errors: record a message; always returns -1 so callers can write
 * `return viz_error(...)`. */
int viz_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* ---- canvas -------------------------------------------------------------- */
typedef struct {
    unsigned char r, g, b;
} viz_rgb;
#define VIZ_HEX(h) \
    ((viz_rgb){(unsigned char)(((h) >> 16) & 0xff), (unsigned char)(((h) >> 8) & 0xff), (unsigned char)((h)&0xff)})

typedef struct {
    int w, h;
    unsigned char *px; /* w * h * 3 bytes, row-major RGB */
} viz_canvas;

/* Largest image side we agree to allocate. */
#define VIZ_MAX_SIDE 16384

int viz_canvas_init(viz_canvas *c, int w, int h, viz_rgb bg, const char *fn);
void viz_canvas_free(viz_canvas *c);
/* Pixels [x0, x1) x [y0, y1), clipped to the canvas. */
void viz_fill_rect(viz_canvas *c, int x0, int y0, int x1, int y1, viz_rgb col);
/* A 1-pixel outline just outside [x, x+w) x [y, y+h). */
void viz_frame_rect(viz_canvas *c, int x, int y, int w, int h, viz_rgb col);
void viz_blend(viz_canvas *c, int x, int y, viz_rgb col, float alpha);
/* An anti-aliased polyline of `width` pixels through (xs[i], ys[i]); a NaN
 * coordinate breaks it. Joints are drawn once (no dark dots). */
int viz_polyline(viz_canvas *c, const float *xs, const float *ys, int n, float width, viz_rgb col, const char *fn);
/* Writes the canvas to path through "<path>.tmp" and rename(). */
int viz_canvas_write_png(const viz_canvas *c, const char *path, const char *fn);

/* atomic.c: a new file appears whole or not at all. viz_atomic_open creates
 * an exclusive temporary beside path (its name in *tmp); viz_atomic_close
 * closes it and, unless failed (already reported) or the write failed,
 * renames it over path; on any failure the temporary is removed. Both
 * return NULL / -1 with the message set through viz_error. */
FILE *viz_atomic_open(const char *path, char **tmp, const char *fn);
int viz_atomic_close(FILE *f, char *tmp, const char *path, int failed, const char *fn);

/* report_assets.c: the page's CSS and JavaScript, one string per line, NULL-terminated. */
extern const char *const viz_report_css[];
extern const char *const viz_report_js[];

/* ---- text ---------------------------------------------------------------- */
typedef struct viz_font viz_font;
enum { VIZ_START = 0, VIZ_CENTER = 1, VIZ_END = 2 };

/* Opens the configured TrueType font, or the built-in bitmap font when it
 * cannot be read. NULL only when out of memory. */
viz_font *viz_font_open(void);
void viz_font_close(viz_font *f);
int viz_font_is_builtin(const viz_font *f);
/* Width of s, and height of a line (ascent to descent), at size px. */
int viz_text_width(viz_font *f, const char *s, float px);
int viz_text_height(viz_font *f, float px);
/* Draws s so that its box is aligned on (x, y): halign/valign are
 * VIZ_START (left/top), VIZ_CENTER or VIZ_END (right/bottom) of the box
 * as it appears on the canvas. rotate = 1 turns it 90 degrees
 * counter-clockwise (reads bottom to top, as a y-axis label). */
int viz_draw_text(viz_canvas *c, viz_font *f, const char *s, float px, int x, int y, int halign, int valign, int rotate,
                  viz_rgb col);

/* ---- colours ------------------------------------------------------------- */
viz_rgb viz_cmap(tg_cmap cmap, double t); /* t in [0, 1]; NaN = grey */
int viz_cmap_valid(tg_cmap cmap);
int viz_cmap_diverging(tg_cmap cmap);
viz_rgb viz_series_color(int i);

/* ---- ticks --------------------------------------------------------------- */
#define VIZ_MAX_TICKS 32
/* Up to about `want` ticks at multiples of a 1-2-5 step inside [lo, hi].
 * Returns the count and stores the step. */
int viz_nice_ticks(double lo, double hi, int want, double *ticks, double *step);
/* Ticks for a logarithmic axis over [lo, hi] (lo > 0): powers of ten, or
 * 1-2-5 multiples when the range is under about two decades. */
int viz_log_ticks(double lo, double hi, int want, double *ticks);
/* A short label for v on an axis whose ticks are `step` apart. */
void viz_format_tick(double v, double step, char *buf, size_t size);

/* ---- SHA-256 (FIPS 180-4) and base64 (RFC 4648), for the page's CSP ---- */
typedef struct {
    uint32_t h[8];
    uint64_t bytes; /* taken so far */
    unsigned char buf[64];
} viz_sha256;
void viz_sha256_init(viz_sha256 *s);
void viz_sha256_update(viz_sha256 *s, const void *data, size_t n);
void viz_sha256_final(viz_sha256 *s, unsigned char out[32]);
/* n bytes as base64 with padding into out (4 * ceil(n / 3) + 1 bytes). */
void viz_base64(const unsigned char *p, size_t n, char *out);

#endif
