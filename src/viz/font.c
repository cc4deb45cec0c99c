/* Text for figures.
 *
 * Text is first rendered into an 8-bit coverage mask (0 = background,
 * 255 = ink), then blended onto the canvas, upright or turned 90 degrees
 * for a y-axis label. The mask comes from one of two sources:
 *   - a TrueType font (DejaVu Sans by default) rasterised by stb_truetype,
 *     anti-aliased, with kerning and sub-pixel glyph placement;
 *   - when the font file cannot be read, stb_easy_font, a tiny ASCII font
 *     built from rectangles, scaled to the requested size. Ugly but legible,
 *     so a figure never loses its labels. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#endif
#include <stb/stb_truetype.h>
#include <stb/stb_easy_font.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

#include "viz_internal.h"

/* ---- font selection ------------------------------------------------------ */

static char font_path[4096] = TG_VIZ_DEFAULT_FONT;

int tg_viz_set_font(const char *ttf_path) {
    if (!ttf_path) ttf_path = TG_VIZ_DEFAULT_FONT;
    size_t n = strlen(ttf_path);
    if (n >= sizeof font_path)
        return viz_error("tg_viz_set_font: path of %zu bytes is longer than %zu", n, sizeof font_path - 1);
    memcpy(font_path, ttf_path, n + 1);
    return 0;
}

struct viz_font {
    int builtin;        /* 1: stb_easy_font; 0: TrueType below */
    unsigned char *ttf; /* the whole font file, as stb_truetype wants it */
    stbtt_fontinfo info;
};

/* Reads a whole file; NULL if it cannot (or is implausibly large). */
static unsigned char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    unsigned char *buf = NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0) n = ftell(f);
    if (n > 0 && n < (64L << 20) && fseek(f, 0, SEEK_SET) == 0) {
        buf = malloc((size_t)n);
        if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
            free(buf);
            buf = NULL;
        }
    }
    fclose(f);
    return buf;
}

viz_font *viz_font_open(void) {
    viz_font *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    f->builtin = 1;
    if (font_path[0]) {
        f->ttf = read_file(font_path);
        if (f->ttf) {
            int off = stbtt_GetFontOffsetForIndex(f->ttf, 0);
            if (off >= 0 && stbtt_InitFont(&f->info, f->ttf, off)) f->builtin = 0;
        }
    }
    if (f->builtin) {
        free(f->ttf);
        f->ttf = NULL;
    }
    return f;
}

void viz_font_close(viz_font *f) {
    if (!f) return;
    free(f->ttf);
    free(f);
}

int viz_font_is_builtin(const viz_font *f) { return f->builtin; }

/* ---- UTF-8 --------------------------------------------------------------- */

/* Decodes one code point and advances *s; malformed bytes give U+FFFD. */
static int next_codepoint(const char **s) {
    const unsigned char *p = (const unsigned char *)*s;
    int cp, extra;
    if (p[0] < 0x80) {
        cp = p[0];
        extra = 0;
    } else if ((p[0] & 0xe0) == 0xc0) {
        cp = p[0] & 0x1f;
        extra = 1;
    } else if ((p[0] & 0xf0) == 0xe0) {
        cp = p[0] & 0x0f;
        extra = 2;
    } else if ((p[0] & 0xf8) == 0xf0) {
        cp = p[0] & 0x07;
        extra = 3;
    } else {
        *s += 1;
        return 0xfffd;
    }
    for (int i = 1; i <= extra; i++) {
        if ((p[i] & 0xc0) != 0x80) {
            *s += i;
            return 0xfffd;
        }
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    *s += 1 + extra;
    return cp;
}

/* ---- built-in font ------------------------------------------------------- */

/* stb_easy_font draws glyphs inside 9 units: capitals from 0 to 7,
 * descenders down to 9. A unit becomes round(px / 9) pixels (at least 1):
 * whole pixels keep the blocky glyphs crisp. */
#define EASY_BOX 9.0f

static float easy_scale(float px) {
    float k = roundf(px / 9.0f);
    return k < 1.0f ? 1.0f : k;
}

/* stb_easy_font knows printable ASCII only; anything else becomes '?'. */
static char *easy_ascii(const char *s) {
    char *a = malloc(strlen(s) + 1), *o = a;
    if (!a) return NULL;
    while (*s) {
        int cp = next_codepoint(&s);
        *o++ = (cp >= 32 && cp < 127) ? (char)cp : '?';
    }
    *o = '\0';
    return a;
}

static int easy_width(const char *s, float px) {
    char *a = easy_ascii(s);
    if (!a) return 0;
    int w = (int)ceilf(stb_easy_font_width(a) * easy_scale(px));
    free(a);
    return w;
}

static unsigned char *easy_mask(const char *s, float px, int *mw, int *mh) {
    char *a = easy_ascii(s);
    if (!a) return NULL;
    float k = easy_scale(px);
    int w = (int)ceilf(stb_easy_font_width(a) * k) + 1;
    int h = (int)ceilf(EASY_BOX * k) + 1;
    size_t vbytes = strlen(a) * 400 + 64; /* about 270 bytes a character */
    char *vbuf = malloc(vbytes);
    unsigned char *mask = calloc((size_t)w * (size_t)h, 1);
    if (!vbuf || !mask) {
        free(a);
        free(vbuf);
        free(mask);
        return NULL;
    }
    int quads = stb_easy_font_print(0, 0, a, NULL, vbuf, (int)vbytes);
    /* Each quad is 4 vertices of 16 bytes (x, y, z floats and a colour);
     * they are axis-aligned rectangles, filled here at scale k. */
    for (int q = 0; q < quads; q++) {
        float x0 = 1e9f, y0 = 1e9f, x1 = -1e9f, y1 = -1e9f;
        for (int v = 0; v < 4; v++) {
            float xy[2];
            memcpy(xy, vbuf + (q * 4 + v) * 16, sizeof xy);
            x0 = fminf(x0, xy[0]);
            x1 = fmaxf(x1, xy[0]);
            y0 = fminf(y0, xy[1]);
            y1 = fmaxf(y1, xy[1]);
        }
        int ix0 = (int)roundf(x0 * k), ix1 = (int)roundf(x1 * k);
        int iy0 = (int)roundf(y0 * k), iy1 = (int)roundf(y1 * k);
        for (int y = iy0 < 0 ? 0 : iy0; y < iy1 && y < h; y++)
            for (int x = ix0 < 0 ? 0 : ix0; x < ix1 && x < w; x++) mask[(size_t)y * (size_t)w + (size_t)x] = 255;
    }
    free(a);
    free(vbuf);
    *mw = w;
    *mh = h;
    return mask;
}

/* ---- TrueType ------------------------------------------------------------ */

/* Horizontal pen positions: pen advances by each glyph's advance width
 * plus the kerning with the next glyph, all in font units * scale. */
static float ttf_advance(viz_font *f, int cp, int next, float scale) {
    int adv, lsb;
    stbtt_GetCodepointHMetrics(&f->info, cp, &adv, &lsb);
    float a = adv * scale;
    if (next) a += scale * stbtt_GetCodepointKernAdvance(&f->info, cp, next);
    return a;
}

static int ttf_width(viz_font *f, const char *s, float px) {
    float scale = stbtt_ScaleForPixelHeight(&f->info, px), pen = 0.0f;
    const char *p = s;
    int cp = *p ? next_codepoint(&p) : 0;
    while (cp) {
        int next = *p ? next_codepoint(&p) : 0;
        pen += ttf_advance(f, cp, next, scale);
        cp = next;
    }
    return (int)ceilf(pen);
}

static int ttf_height(viz_font *f, float px) {
    int asc, desc, gap;
    stbtt_GetFontVMetrics(&f->info, &asc, &desc, &gap);
    float scale = stbtt_ScaleForPixelHeight(&f->info, px);
    return (int)ceilf((asc - desc) * scale);
}

/* Glyphs may reach a little left of the pen or right of the last advance
 * (italic overhangs, 'j'); the mask keeps PAD spare columns on each side. */
#define PAD 2

static unsigned char *ttf_mask(viz_font *f, const char *s, float px, int *mw, int *mh) {
    float scale = stbtt_ScaleForPixelHeight(&f->info, px);
    int asc, desc, gap;
    stbtt_GetFontVMetrics(&f->info, &asc, &desc, &gap);
    int w = ttf_width(f, s, px) + 2 * PAD, h = ttf_height(f, px);
    int baseline = (int)roundf(asc * scale);
    unsigned char *mask = calloc((size_t)w * (size_t)h, 1);
    if (!mask) return NULL;
    float pen = PAD;
    const char *p = s;
    int cp = *p ? next_codepoint(&p) : 0;
    while (cp) {
        int next = *p ? next_codepoint(&p) : 0;
        float shift = pen - floorf(pen);
        int gw, gh, gx, gy;
        unsigned char *g =
            stbtt_GetCodepointBitmapSubpixel(&f->info, scale, scale, shift, 0.0f, cp, &gw, &gh, &gx, &gy);
        if (g) {
            int ox = (int)floorf(pen) + gx, oy = baseline + gy;
            for (int y = 0; y < gh; y++) {
                int my = oy + y;
                if (my < 0 || my >= h) continue;
                for (int x = 0; x < gw; x++) {
                    int mx = ox + x;
                    if (mx < 0 || mx >= w) continue;
                    unsigned char *m = &mask[(size_t)my * (size_t)w + (size_t)mx];
                    unsigned char v = g[y * gw + x];
                    if (v > *m) *m = v;
                }
            }
            stbtt_FreeBitmap(g, NULL);
        }
        pen += ttf_advance(f, cp, next, scale);
        cp = next;
    }
    *mw = w;
    *mh = h;
    return mask;
}

/* ---- public to the viz files --------------------------------------------- */

int viz_text_width(viz_font *f, const char *s, float px) {
    if (!s || !*s) return 0;
    return f->builtin ? easy_width(s, px) : ttf_width(f, s, px);
}

int viz_text_height(viz_font *f, float px) {
    return f->builtin ? (int)ceilf(EASY_BOX * easy_scale(px)) : ttf_height(f, px);
}

int viz_draw_text(viz_canvas *c, viz_font *f, const char *s, float px, int x, int y, int halign, int valign, int rotate,
                  viz_rgb col) {
    if (!s || !*s) return 0;
    int mw = 0, mh = 0;
    unsigned char *mask = f->builtin ? easy_mask(s, px, &mw, &mh) : ttf_mask(f, s, px, &mw, &mh);
    if (!mask) return viz_error("viz: out of memory drawing text '%s'", s);
    int pad = f->builtin ? 0 : PAD;
    int tw = viz_text_width(f, s, px), th = viz_text_height(f, px);
    /* The text box as it appears on the canvas (w x h, turned if rotated). */
    int bw = rotate ? th : tw, bh = rotate ? tw : th;
    int left = x - (halign == VIZ_CENTER ? bw / 2 : halign == VIZ_END ? bw : 0);
    int top = y - (valign == VIZ_CENTER ? bh / 2 : valign == VIZ_END ? bh : 0);
    for (int my = 0; my < mh; my++)
        for (int mx = 0; mx < mw; mx++) {
            unsigned char v = mask[(size_t)my * (size_t)mw + (size_t)mx];
            if (!v) continue;
            /* Upright: mask (mx, my) -> (left + mx - pad, top + my).
             * Turned counter-clockwise: the mask's x runs up the canvas,
             * its y runs right: -> (left + my, top + tw - 1 - (mx - pad)). */
            int cx = rotate ? left + my : left + mx - pad;
            int cy = rotate ? top + tw - 1 - (mx - pad) : top + my;
            viz_blend(c, cx, cy, col, v / 255.0f);
        }
    free(mask);
    return 0;
}
