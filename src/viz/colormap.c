/* Colour maps and the palette for line series.
 *
 * Each map is a list of evenly spaced colour stops, the same stops
 * matplotlib uses (ColorBrewer's Blues, Reds and RdBu; viridis sampled at
 * ten points), with linear interpolation in sRGB between neighbours:
 *   t in [0, 1],  s = t * (n - 1),  i = floor(s),
 *   colour = stop[i] + (s - i) * (stop[i+1] - stop[i]). */
#include <math.h>

#include "viz_internal.h"

static const unsigned blues[] = {
    0xf7fbff, 0xdeebf7, 0xc6dbef, 0x9ecae1, 0x6baed6, 0x4292c6, 0x2171b5, 0x08519c, 0x08306b,
};
static const unsigned reds[] = {
    0xfff5f0, 0xfee0d2, 0xfcbba1, 0xfc9272, 0xfb6a4a, 0xef3b2c, 0xcb181d, 0xa50f15, 0x67000d,
};
/* Diverging: low values red, 0.5 (zero, on a symmetric scale) near white,
 * high values blue. */
static const unsigned rdbu[] = {
    0x67001f, 0xb2182b, 0xd6604d, 0xf4a582, 0xfddbc7, 0xf7f7f7, 0xd1e5f0, 0x92c5de, 0x4393c3, 0x2166ac, 0x053061,
};
static const unsigned viridis[] = {
    0x440154, 0x482878, 0x3e4989, 0x31688e, 0x26828e, 0x1f9e89, 0x35b779, 0x6ece58, 0xb5de2b, 0xfde725,
};

/* Missing values (NaN, inf): a mid grey that none of the maps contains. */
#define MISSING 0x9a9a9a

int viz_cmap_valid(tg_cmap cmap) {
    return cmap == TG_CMAP_BLUES || cmap == TG_CMAP_REDS || cmap == TG_CMAP_RDBU || cmap == TG_CMAP_VIRIDIS;
}

int viz_cmap_diverging(tg_cmap cmap) { return cmap == TG_CMAP_RDBU; }

viz_rgb viz_cmap(tg_cmap cmap, double t) {
    const unsigned *stop;
    int n;
#define USE(a) (stop = a, n = (int)(sizeof a / sizeof a[0]))
    switch (cmap) {
    case TG_CMAP_REDS: USE(reds); break;
    case TG_CMAP_RDBU: USE(rdbu); break;
    case TG_CMAP_VIRIDIS: USE(viridis); break;
    case TG_CMAP_BLUES:
    default: USE(blues); break;
    }
#undef USE
    if (isnan(t)) return VIZ_HEX(MISSING);
    if (t < 0.0) t = 0.0;
    if (t > 1.0) t = 1.0;
    double s = t * (n - 1);
    int i = (int)s;
    if (i >= n - 1) return VIZ_HEX(stop[n - 1]);
    double f = s - i;
    viz_rgb a = VIZ_HEX(stop[i]), b = VIZ_HEX(stop[i + 1]);
    return (viz_rgb){
        (unsigned char)lround(a.r + f * (b.r - a.r)),
        (unsigned char)lround(a.g + f * (b.g - a.g)),
        (unsigned char)lround(a.b + f * (b.b - a.b)),
    };
}

void tg_viz_cmap_color(tg_cmap cmap, double t, unsigned char rgb[3]) {
    viz_rgb c = viz_cmap(cmap, t);
    rgb[0] = c.r;
    rgb[1] = c.g;
    rgb[2] = c.b;
}

/* matplotlib's "tab10": the default colour cycle, distinct at a glance. */
static const unsigned tab10[] = {
    0x1f77b4, 0xff7f0e, 0x2ca02c, 0xd62728, 0x9467bd, 0x8c564b, 0xe377c2, 0x7f7f7f, 0xbcbd22, 0x17becf,
};

viz_rgb viz_series_color(int i) {
    int n = (int)(sizeof tab10 / sizeof tab10[0]);
    i %= n;
    if (i < 0) i += n;
    return VIZ_HEX(tab10[i]);
}

void tg_viz_series_color(int i, unsigned char rgb[3]) {
    viz_rgb c = viz_series_color(i);
    rgb[0] = c.r;
    rgb[1] = c.g;
    rgb[2] = c.b;
}
