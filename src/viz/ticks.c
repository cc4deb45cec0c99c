/* Where to put tick marks on an axis, and how to label them.
 *
 * A "nice" step is 1, 2, 2.5 or 5 times a power of ten, the smallest that
 * keeps the tick count near what the axis has room for (the rule matplotlib
 * and most plotting programs use). Ticks sit at the multiples of the step
 * that fall inside the axis range. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "viz_internal.h"

static double nice_step(double raw) {
    double mag = pow(10.0, floor(log10(raw)));
    double norm = raw / mag;
    double m = norm <= 1.0 ? 1.0 : norm <= 2.0 ? 2.0 : norm <= 2.5 ? 2.5 : norm <= 5.0 ? 5.0 : 10.0;
    return m * mag;
}

int viz_nice_ticks(double lo, double hi, int want, double *ticks, double *step) {
    if (want < 1) want = 1;
    if (!(hi > lo) || !isfinite(lo) || !isfinite(hi)) {
        ticks[0] = isfinite(lo) ? lo : 0.0;
        *step = 1.0;
        return 1;
    }
    double st = nice_step((hi - lo) / want);
    double eps = st * 1e-9;
    int n = 0;
    for (double k = ceil((lo - eps) / st); n < VIZ_MAX_TICKS; k++) {
        double v = k * st;
        if (v > hi + eps) break;
        if (fabs(v) < eps) v = 0.0; /* no "-0" or "1e-17" at the origin */
        ticks[n++] = v;
    }
    *step = st;
    return n;
}

int viz_log_ticks(double lo, double hi, int want, double *ticks) {
    int n = 0;
    int d0 = (int)ceil(log10(lo) - 1e-9), d1 = (int)floor(log10(hi) + 1e-9);
    if (d1 - d0 + 1 >= 3) {
        /* Enough decades: label powers of ten, every k-th if crowded. */
        int k = (d1 - d0) / (want > 1 ? want : 1) + 1;
        for (int d = d0; d <= d1 && n < VIZ_MAX_TICKS; d += k) ticks[n++] = pow(10.0, d);
        return n;
    }
    /* A narrow range: 1, 2 and 5 times each power of ten. */
    static const double mant[] = {1.0, 2.0, 5.0};
    for (int d = (int)floor(log10(lo)); d <= (int)ceil(log10(hi)); d++)
        for (int i = 0; i < 3 && n < VIZ_MAX_TICKS; i++) {
            double v = mant[i] * pow(10.0, d);
            if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) ticks[n++] = v;
        }
    if (n >= 2) return n;
    double st;
    return viz_nice_ticks(lo, hi, want, ticks, &st);
}

/* Fewest decimals d such that step * 10^d is a whole number. */
static int step_decimals(double step) {
    if (!(step > 0.0) || !isfinite(step)) return 0;
    for (int d = -15; d < 15; d++) {
        double s = step * pow(10.0, d);
        if (s >= 0.999 && fabs(s - round(s)) < 1e-6 * s) return d;
    }
    return 15;
}

void viz_format_tick(double v, double step, char *buf, size_t size) {
    if (v == 0.0 || !isfinite(v)) {
        snprintf(buf, size, v == 0.0 ? "0" : "%g", v);
        return;
    }
    int d = step_decimals(step);
    if (fabs(v) < 1e5 && d <= 4) {
        snprintf(buf, size, "%.*f", d > 0 ? d : 0, v);
        return;
    }
    /* Scientific, with as many mantissa digits as the step needs, then
     * shortened: "2.5e+04" -> "2.5e4", "1e-05" -> "1e-5". */
    int e = (int)floor(log10(fabs(v)));
    int md = e + d;
    char tmp[64];
    snprintf(tmp, sizeof tmp, "%.*e", md > 0 ? (md < 6 ? md : 6) : 0, v);
    char *ep = strchr(tmp, 'e');
    if (ep) {
        char *src = ep + 1, *dst = ep + 1;
        if (*src == '+')
            src++;
        else if (*src == '-')
            *dst++ = *src++;
        while (*src == '0' && src[1]) src++;
        memmove(dst, src, strlen(src) + 1);
    }
    snprintf(buf, size, "%s", tmp);
}
