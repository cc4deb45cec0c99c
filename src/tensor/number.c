/* Strict decimal numbers: see number.h. The grammar is checked by hand,
 * then strtod or strtoll converts (the text is plain decimal by then). */
#include "number.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* True when s is a decimal number and nothing else. */
static bool decimal(const char *s, bool integer) {
    if (!s) return false;
    const char *p = s + (*s == '+' || *s == '-');
    size_t digits = strspn(p, "0123456789");
    p += digits;
    if (!integer && *p == '.') {
        size_t frac = strspn(p + 1, "0123456789");
        digits += frac;
        p += 1 + frac;
    }
    if (digits == 0) return false;
    if (!integer && (*p == 'e' || *p == 'E')) {
        p += 1 + (p[1] == '+' || p[1] == '-');
        size_t exp = strspn(p, "0123456789");
        if (exp == 0) return false;
        p += exp;
    }
    return *p == 0;
}

int tg_parse_real(const char *s, double *out) {
    if (!decimal(s, false)) return -1;
    errno = 0;
    double v = strtod(s, NULL);
    if (errno == ERANGE && isinf(v)) return -1; /* beyond double: not finite */
    *out = v;
    return 0;
}

int tg_parse_int64(const char *s, int64_t *out) {
    if (!decimal(s, true)) return -1;
    errno = 0;
    long long v = strtoll(s, NULL, 10);
    if (errno == ERANGE) return -1;
    *out = (int64_t)v;
    return 0;
}
