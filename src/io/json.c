/* A strict reader for the JSON that file headers use (safetensors): one
 * cursor over a buffer, the first failure's reason kept in it. RFC 8259
 * strings (escapes, surrogate pairs, no control characters), non-negative
 * integers, and a skipper for any value. See json.h. */
#include "json.h"
#include "../tensor/tensor.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tg_json_fail(tg_json *j, const char *fmt, ...) {
    if (j->why[0] == '\0') {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(j->why, sizeof j->why, fmt, ap);
        va_end(ap);
    }
    return -1;
}

long tg_json_pos(const tg_json *j) { return (long)(j->p - j->start); }

void tg_json_skip_ws(tg_json *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}

int tg_json_expect(tg_json *j, char c) {
    tg_json_skip_ws(j);
    if (j->p >= j->end) return tg_json_fail(j, "header JSON ends early, expected '%c'", c);
    if (*j->p != c)
        return tg_json_fail(j, "header JSON: expected '%c' at byte %ld, found '%c'", c, tg_json_pos(j), *j->p);
    j->p++;
    return 0;
}

/* RFC 3629 UTF-8, without overlongs or surrogates; the header must be
 * valid UTF-8 for Python to read it. */
int tg_json_valid_utf8(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        int len;
        unsigned min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            len = 2;
            min = 0x80;
            c &= 0x1F;
        } else if ((c & 0xF0) == 0xE0) {
            len = 3;
            min = 0x800;
            c &= 0x0F;
        } else if ((c & 0xF8) == 0xF0) {
            len = 4;
            min = 0x10000;
            c &= 0x07;
        } else
            return 0;
        if (n - i < (size_t)len) return 0;
        for (int k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return 0;
            c = (c << 6) | (s[i + k] & 0x3F);
        }
        if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
        i += (size_t)len;
    }
    return 1;
}

static int hex4(const char *s, unsigned *out) {
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        char c = s[k];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return -1;
    }
    *out = v;
    return 0;
}

static size_t put_utf8(char *o, unsigned c) {
    if (c < 0x80) {
        o[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (char)(0xC0 | (c >> 6));
        o[1] = (char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        o[0] = (char)(0xE0 | (c >> 12));
        o[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        o[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (c >> 18));
    o[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((c >> 6) & 0x3F));
    o[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

/* Parses a JSON string. Its unescaped text goes to out (NUL-terminated)
 * when out is not NULL; *len receives the full unescaped length, which may
 * exceed cap - 1 (then out holds a prefix and the caller decides). */
int tg_json_string(tg_json *j, char *out, size_t cap, size_t *len) {
    if (tg_json_expect(j, '"') != 0) return -1;
    size_t n = 0;
    char u[4];
    for (;;) {
        if (j->p >= j->end) return tg_json_fail(j, "header JSON: unterminated string");
        unsigned char c = (unsigned char)*j->p++;
        size_t k = 0;
        if (c == '"') break;
        if (c < 0x20)
            return tg_json_fail(j, "header JSON: control character in a string at byte %ld", tg_json_pos(j) - 1);
        if (c != '\\') {
            u[0] = (char)c;
            k = 1;
        } else {
            if (j->p >= j->end) return tg_json_fail(j, "header JSON: unterminated string");
            char e = *j->p++;
            static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
            const char *one = e ? strchr(from, e) : NULL; /* a one-character escape */
            if (one) {
                u[0] = to[one - from];
                k = 1;
            } else if (e == 'u') {
                unsigned cp, lo;
                if (j->end - j->p < 4 || hex4(j->p, &cp) != 0)
                    return tg_json_fail(j, "header JSON: bad \\u escape at byte %ld", tg_json_pos(j) - 2);
                j->p += 4;
                if (cp >= 0xDC00 && cp <= 0xDFFF) return tg_json_fail(j, "header JSON: lone surrogate \\u%04X", cp);
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    if (j->end - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u' || hex4(j->p + 2, &lo) != 0 ||
                        lo < 0xDC00 || lo > 0xDFFF)
                        return tg_json_fail(j, "header JSON: lone surrogate \\u%04X", cp);
                    j->p += 6;
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                }
                if (cp == 0) return tg_json_fail(j, "header JSON: \\u0000 in a string");
                k = put_utf8(u, cp);
            } else {
                return tg_json_fail(j, "header JSON: bad escape '\\%c' at byte %ld", e, tg_json_pos(j) - 2);
            }
        }
        for (size_t i = 0; i < k; i++, n++)
            if (out && n + 1 < cap) out[n] = u[i];
    }
    if (out && cap) out[n < cap ? n : cap - 1] = '\0';
    if (len) *len = n;
    return 0;
}

/* A non-negative JSON integer (no sign, fraction or exponent). */
int tg_json_uint(tg_json *j, uint64_t *out, const char *what) {
    tg_json_skip_ws(j);
    const char *s = j->p;
    uint64_t v = 0;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
        unsigned d = (unsigned)(*j->p - '0');
        if (v > (UINT64_MAX - d) / 10) return tg_json_fail(j, "%s: integer too large", what);
        v = v * 10 + d;
        j->p++;
    }
    if (j->p == s) return tg_json_fail(j, "%s: expected a non-negative integer at byte %ld", what, tg_json_pos(j));
    if (j->p - s > 1 && *s == '0') return tg_json_fail(j, "%s: integer with a leading zero", what);
    if (j->p < j->end && (*j->p == '.' || *j->p == 'e' || *j->p == 'E'))
        return tg_json_fail(j, "%s: expected an integer, found a fraction", what);
    *out = v;
    return 0;
}

/* RFC 8259's number: -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?,
 * checked here because strtod also takes "inf", "0x1p3" and " 1". */
int tg_json_number(tg_json *j, double *out, const char *what) {
    tg_json_skip_ws(j);
    const char *s = j->p, *p = j->p, *e = j->end;
#define DIGITS(q) ((q) < e && *(q) >= '0' && *(q) <= '9')
    if (p < e && *p == '-') p++;
    if (!DIGITS(p)) return tg_json_fail(j, "%s: expected a number at byte %ld", what, tg_json_pos(j));
    if (*p == '0')
        p++;
    else
        while (DIGITS(p)) p++;
    if (p < e && *p == '.') {
        if (!DIGITS(p + 1)) return tg_json_fail(j, "%s: bad fraction at byte %ld", what, tg_json_pos(j));
        for (p++; DIGITS(p);) p++;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < e && (*p == '+' || *p == '-')) p++;
        if (!DIGITS(p)) return tg_json_fail(j, "%s: bad exponent at byte %ld", what, tg_json_pos(j));
        while (DIGITS(p)) p++;
    }
#undef DIGITS
    char buf[64];
    if ((size_t)(p - s) >= sizeof buf) return tg_json_fail(j, "%s: number too long", what);
    memcpy(buf, s, (size_t)(p - s));
    buf[p - s] = '\0';
    *out = strtod(buf, NULL);
    j->p = p;
    return 0;
}

int tg_json_open(tg_json *j, char open, char close) {
    if (tg_json_expect(j, open) != 0) return -1;
    tg_json_skip_ws(j);
    if (j->p < j->end && *j->p == close) {
        j->p++;
        return 1;
    }
    return 0;
}

int tg_json_next(tg_json *j, char close) {
    tg_json_skip_ws(j);
    if (j->p < j->end && *j->p == ',') {
        j->p++;
        return 1;
    }
    return tg_json_expect(j, close) != 0 ? -1 : 0;
}

int tg_json_null(tg_json *j) {
    tg_json_skip_ws(j);
    if (j->end - j->p >= 4 && memcmp(j->p, "null", 4) == 0) {
        j->p += 4;
        return 1;
    }
    return 0;
}

/* [u, u, ...] with at most max items; *n receives the count. */
int tg_json_uint_array(tg_json *j, uint64_t *out, int max, int *n, const char *what) {
    *n = 0;
    int empty = tg_json_open(j, '[', ']');
    if (empty) return empty < 0 ? -1 : 0;
    for (;;) {
        uint64_t v = 0;
        if (tg_json_uint(j, &v, what) != 0) return -1;
        if (*n >= max) return tg_json_fail(j, "%s: more than %d values", what, max);
        out[(*n)++] = v;
        int more = tg_json_next(j, ']');
        if (more <= 0) return more;
    }
}

/* Skips any JSON value (for keys of a tensor entry the format may add). */
int tg_json_skip_value(tg_json *j, int depth) {
    if (depth > TG_JSON_MAX_DEPTH) return tg_json_fail(j, "header JSON nested too deeply");
    tg_json_skip_ws(j);
    if (j->p >= j->end) return tg_json_fail(j, "header JSON ends early, expected a value");
    char c = *j->p;
    if (c == '"') return tg_json_string(j, NULL, 0, NULL);
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        int empty = tg_json_open(j, c, close);
        if (empty) return empty < 0 ? -1 : 0;
        for (;;) {
            if (c == '{') {
                if (tg_json_string(j, NULL, 0, NULL) != 0 || tg_json_expect(j, ':') != 0) return -1;
            }
            if (tg_json_skip_value(j, depth + 1) != 0) return -1;
            int more = tg_json_next(j, close);
            if (more <= 0) return more;
        }
    }
    static const char *const lits[] = {"true", "false", "null"};
    for (int k = 0; k < 3; k++) {
        size_t l = strlen(lits[k]);
        if ((size_t)(j->end - j->p) >= l && memcmp(j->p, lits[k], l) == 0) {
            j->p += l;
            return 0;
        }
    }
    /* number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
    const char *s = j->p;
    if (j->p < j->end && *j->p == '-') j->p++;
    const char *d = j->p;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
    if (j->p == d || (j->p - d > 1 && *d == '0'))
        return tg_json_fail(j, "header JSON: unexpected '%c' at byte %ld", *s, (long)(s - j->start));
    if (j->p < j->end && *j->p == '.') {
        d = ++j->p;
        while (j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
        if (j->p == d) return tg_json_fail(j, "header JSON: bad number at byte %ld", (long)(s - j->start));
    }
    if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
        j->p++;
        if (j->p < j->end && (*j->p == '+' || *j->p == '-')) j->p++;
        d = j->p;
        while (j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
        if (j->p == d) return tg_json_fail(j, "header JSON: bad number at byte %ld", (long)(s - j->start));
    }
    return 0;
}

/* ---- the writer (json.h) ---- */

/* The separator before a value, and the value's place checked: in an
 * object a value follows its key, in an array any value may come, at the
 * top only one. */
static bool before_value(tg_json_writer *w) {
    if (w->failed || w->out.oom) return false;
    if (w->depth == 0) {
        if (w->out.n > 0) w->failed = true; /* a second value at the top */
    } else if (w->open[w->depth - 1] == '{') {
        if (!w->keyed) w->failed = true; /* a value without its key */
        w->keyed = false;
    } else {
        if (w->has_item[w->depth - 1]) tg_strbuf_str(&w->out, w->brk ? ",\n" : ",");
        w->has_item[w->depth - 1] = true;
        w->brk = false;
    }
    return !w->failed;
}

/* The one escaper: see json.h. Valid UTF-8 sequences (tg_json_valid_utf8's
 * rule) are copied; any other byte becomes U+FFFD. */
static void put_escaped(tg_strbuf *b, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    tg_strbuf_put(b, "\"", 1);
    size_t run = 0; /* s[run..i) is copied as it is, in one put */
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char u[7];
        size_t len = 1;
        if (c >= 0x80) {
            len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
            if (len == 0 || n - i < len || !tg_json_valid_utf8((const unsigned char *)s + i, len))
                esc = "\\ufffd", len = 1;
        } else if (c == '"') {
            esc = "\\\"";
        } else if (c == '\\') {
            esc = "\\\\";
        } else if (c == '\n') {
            esc = "\\n";
        } else if (c == '\t') {
            esc = "\\t";
        } else if (c == 0) {
            esc = "\\ufffd"; /* tg_json_string refuses \u0000 (C strings end there) */
        } else if (c < 0x20 || c == '<' || c == 0x7f) {
            snprintf(u, sizeof u, "\\u00%c%c", hex[c >> 4], hex[c & 15]);
            esc = u;
        }
        if (esc) {
            tg_strbuf_put(b, s + run, i - run);
            tg_strbuf_str(b, esc);
            run = i + len;
        }
        i += len;
    }
    tg_strbuf_put(b, s + run, n - run);
    tg_strbuf_put(b, "\"", 1);
}

void tg_json_begin(tg_json_writer *w, char open) {
    if (open != '{' && open != '[') w->failed = true;
    if (!before_value(w)) return;
    if (w->depth == TG_JSON_MAX_DEPTH) {
        w->failed = true;
        return;
    }
    w->open[w->depth] = open, w->has_item[w->depth] = false, w->depth++;
    tg_strbuf_put(&w->out, &open, 1);
}

void tg_json_end(tg_json_writer *w) {
    if (w->depth == 0 || w->keyed) w->failed = true; /* nothing open, or a key without its value */
    if (w->failed) return;
    w->depth--;
    tg_strbuf_str(&w->out, w->open[w->depth] == '{' ? "}" : "]");
    w->brk = false;
}

void tg_json_key(tg_json_writer *w, const char *key) {
    if (w->failed || w->out.oom) return;
    if (w->depth == 0 || w->open[w->depth - 1] != '{' || w->keyed || !key) {
        w->failed = true;
        return;
    }
    if (w->has_item[w->depth - 1]) tg_strbuf_str(&w->out, w->brk ? ",\n" : w->compact ? "," : ", ");
    w->has_item[w->depth - 1] = true, w->brk = false, w->keyed = true;
    put_escaped(&w->out, key, strlen(key));
    tg_strbuf_str(&w->out, w->compact ? ":" : ": ");
}

void tg_json_put_string(tg_json_writer *w, const char *s, size_t n) {
    if (!s && n) w->failed = true;
    if (before_value(w)) put_escaped(&w->out, s ? s : "", n);
}

void tg_json_put_str(tg_json_writer *w, const char *s) { tg_json_put_string(w, s ? s : "", s ? strlen(s) : 0); }

void tg_json_put_number(tg_json_writer *w, double v) {
    if (!before_value(w)) return;
    if (!isfinite(v)) {
        tg_strbuf_str(&w->out, "null");
        return;
    }
    char buf[32];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    tg_strbuf_str(&w->out, buf);
}

void tg_json_put_digits(tg_json_writer *w, double v, int digits) {
    if (!before_value(w)) return;
    if (isfinite(v))
        tg_strbuf_fmt(&w->out, "%.*g", digits < 1 ? 1 : digits > 17 ? 17 : digits, v);
    else
        tg_strbuf_str(&w->out, "null");
}

void tg_json_put_int(tg_json_writer *w, int64_t v) {
    if (before_value(w)) tg_strbuf_fmt(&w->out, "%lld", (long long)v);
}

void tg_json_put_bool(tg_json_writer *w, bool v) {
    if (before_value(w)) tg_strbuf_str(&w->out, v ? "true" : "false");
}

void tg_json_put_null(tg_json_writer *w) {
    if (before_value(w)) tg_strbuf_str(&w->out, "null");
}

void tg_json_break(tg_json_writer *w) { w->brk = true; }

void tg_json_discard(tg_json_writer *w) {
    free(w->out.p);
    bool compact = w->compact;
    *w = (tg_json_writer){.compact = compact};
}

char *tg_json_finish(tg_json_writer *w, const char *what) {
    char *text = NULL;
    if (w->out.oom)
        tg_set_error("%s: out of memory writing JSON", what);
    else if (w->failed || w->depth != 0 || w->out.n == 0)
        tg_set_error("%s: JSON written out of order (%s)", what,
                     w->failed ? "a value without its key, or a second value" : "a container left open, or nothing");
    else
        text = w->out.p, w->out.p = NULL; /* the caller's now */
    tg_json_discard(w);
    return text;
}
