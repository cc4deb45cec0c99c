/* An RGB raster to draw figures on, and its atomic PNG writer.
 *
 * Coordinates are pixels with (0, 0) at the top-left corner; pixel (x, y)
 * covers [x, x+1) x [y, y+1), so its centre is (x + 0.5, y + 0.5).
 * Every drawing call clips to the canvas. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stb/stb_image_write.h>

#include "viz_internal.h"

int viz_canvas_init(viz_canvas *c, int w, int h, viz_rgb bg, const char *fn) {
    c->w = c->h = 0;
    c->px = NULL;
    if (w <= 0 || h <= 0 || w > VIZ_MAX_SIDE || h > VIZ_MAX_SIDE)
        return viz_error("%s: image of %d x %d pixels is outside 1..%d per side", fn, w, h, VIZ_MAX_SIDE);
    c->px = malloc((size_t)w * (size_t)h * 3);
    if (!c->px) return viz_error("%s: out of memory for a %d x %d image", fn, w, h);
    c->w = w;
    c->h = h;
    viz_fill_rect(c, 0, 0, w, h, bg);
    return 0;
}

void viz_canvas_free(viz_canvas *c) {
    free(c->px);
    c->px = NULL;
    c->w = c->h = 0;
}

void viz_fill_rect(viz_canvas *c, int x0, int y0, int x1, int y1, viz_rgb col) {
    if (x0 < 0) x0 = 0;
    if (y0 < 0) y0 = 0;
    if (x1 > c->w) x1 = c->w;
    if (y1 > c->h) y1 = c->h;
    for (int y = y0; y < y1; y++) {
        unsigned char *p = c->px + ((size_t)y * (size_t)c->w + (size_t)x0) * 3;
        for (int x = x0; x < x1; x++, p += 3) {
            p[0] = col.r;
            p[1] = col.g;
            p[2] = col.b;
        }
    }
}

void viz_frame_rect(viz_canvas *c, int x, int y, int w, int h, viz_rgb col) {
    viz_fill_rect(c, x - 1, y - 1, x + w + 1, y, col);         /* top */
    viz_fill_rect(c, x - 1, y + h, x + w + 1, y + h + 1, col); /* bottom */
    viz_fill_rect(c, x - 1, y, x, y + h, col);                 /* left */
    viz_fill_rect(c, x + w, y, x + w + 1, y + h, col);         /* right */
}

void viz_blend(viz_canvas *c, int x, int y, viz_rgb col, float alpha) {
    if (x < 0 || y < 0 || x >= c->w || y >= c->h || !(alpha > 0.0f)) return;
    if (alpha > 1.0f) alpha = 1.0f;
    unsigned char *p = c->px + ((size_t)y * (size_t)c->w + (size_t)x) * 3;
    p[0] = (unsigned char)(p[0] + (col.r - p[0]) * alpha + 0.5f);
    p[1] = (unsigned char)(p[1] + (col.g - p[1]) * alpha + 0.5f);
    p[2] = (unsigned char)(p[2] + (col.b - p[2]) * alpha + 0.5f);
}

/* Distance from point p to segment ab. */
static float seg_dist(float px, float py, float ax, float ay, float bx, float by) {
    float dx = bx - ax, dy = by - ay;
    float len2 = dx * dx + dy * dy;
    float t = len2 > 0.0f ? ((px - ax) * dx + (py - ay) * dy) / len2 : 0.0f;
    if (t < 0.0f) t = 0.0f;
    if (t > 1.0f) t = 1.0f;
    float ex = px - (ax + t * dx), ey = py - (ay + t * dy);
    return sqrtf(ex * ex + ey * ey);
}

/* Each pixel's coverage is 1 inside the stroke and falls off linearly over
 * one pixel at its edge: cover = clamp(width/2 + 0.5 - distance, 0, 1).
 * Segments write the maximum into a coverage mask that is blended once at
 * the end, so where segments meet the line is not darker. A point with no
 * valid neighbour is drawn as a dot of the line's width. */
int viz_polyline(viz_canvas *c, const float *xs, const float *ys, int n, float width, viz_rgb col, const char *fn) {
    float *mask = calloc((size_t)c->w * (size_t)c->h, sizeof *mask);
    if (!mask) return viz_error("%s: out of memory for a line mask", fn);
    float r = width * 0.5f;
    int bx0 = c->w, by0 = c->h, bx1 = -1, by1 = -1; /* box of touched pixels */
    for (int i = 0; i < n; i++) {
        int ok = isfinite(xs[i]) && isfinite(ys[i]);
        int next_ok = i + 1 < n && isfinite(xs[i + 1]) && isfinite(ys[i + 1]);
        int prev_ok = i > 0 && isfinite(xs[i - 1]) && isfinite(ys[i - 1]);
        if (!ok || (!next_ok && prev_ok)) continue;
        /* A segment to the next point, or a lone point drawn as a dot. */
        int j = next_ok ? i + 1 : i;
        float ax = xs[i], ay = ys[i], bx = xs[j], by = ys[j];
        int x0 = (int)floorf(fminf(ax, bx) - r - 1.0f);
        int x1 = (int)ceilf(fmaxf(ax, bx) + r + 1.0f);
        int y0 = (int)floorf(fminf(ay, by) - r - 1.0f);
        int y1 = (int)ceilf(fmaxf(ay, by) + r + 1.0f);
        if (x0 < 0) x0 = 0;
        if (y0 < 0) y0 = 0;
        if (x1 > c->w - 1) x1 = c->w - 1;
        if (y1 > c->h - 1) y1 = c->h - 1;
        for (int y = y0; y <= y1; y++)
            for (int x = x0; x <= x1; x++) {
                float d = seg_dist(x + 0.5f, y + 0.5f, ax, ay, bx, by);
                float cover = r + 0.5f - d;
                if (cover <= 0.0f) continue;
                float *m = &mask[(size_t)y * (size_t)c->w + (size_t)x];
                if (cover > *m) *m = cover > 1.0f ? 1.0f : cover;
            }
        if (x0 < bx0) bx0 = x0;
        if (y0 < by0) by0 = y0;
        if (x1 > bx1) bx1 = x1;
        if (y1 > by1) by1 = y1;
    }
    for (int y = by0; y <= by1; y++)
        for (int x = bx0; x <= bx1; x++) viz_blend(c, x, y, col, mask[(size_t)y * (size_t)c->w + (size_t)x]);
    free(mask);
    return 0;
}

/* stb_image_write hands us the encoded bytes; we write them with stdio so
 * that a failure can be reported with errno. */
typedef struct {
    FILE *f;
    int failed;
    int err;
} png_sink;

static void sink_write(void *ctx, void *data, int size) {
    png_sink *s = ctx;
    if (s->failed || size <= 0) return;
    if (fwrite(data, 1, (size_t)size, s->f) != (size_t)size) {
        s->failed = 1;
        s->err = errno;
    }
}

int viz_canvas_write_png(const viz_canvas *c, const char *path, const char *fn) {
    char *tmp;
    png_sink s = {viz_atomic_open(path, &tmp, fn), 0, 0};
    if (!s.f) return -1;
    int ok = stbi_write_png_to_func(sink_write, &s, c->w, c->h, 3, c->px, c->w * 3);
    if (!ok)
        viz_error("%s: PNG encoding of a %d x %d image failed", fn, c->w, c->h);
    else if (s.failed)
        viz_error("%s: writing '%s' failed: %s", fn, tmp, strerror(s.err));
    return viz_atomic_close(s.f, tmp, path, !ok || s.failed, fn);
}
