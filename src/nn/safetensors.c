/* Reading safetensors files: a strict parser for the JSON subset the header
 * uses, and the checks the reference implementation makes (see
 * checkpoint.h for the layout). Nothing here writes; see checkpoint.c. */
#include "checkpoint.h"

#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* The reference implementation refuses headers above 100 MB. */
#define ST_MAX_HEADER 100000000ull
/* Nesting limit for values skipped inside the header. */
#define ST_MAX_DEPTH 64

/* ---- a cursor over the header ---------------------------------------------- */
typedef struct {
    const char *p, *end, *start;
    char why[320];              /* the reason of the first failure */
} json;

static int fail(json *j, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static int fail(json *j, const char *fmt, ...)
{
    if (j->why[0] == '\0') {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(j->why, sizeof j->why, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static long pos(const json *j) { return (long)(j->p - j->start); }

static void skip_ws(json *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static int expect(json *j, char c)
{
    skip_ws(j);
    if (j->p >= j->end) return fail(j, "header JSON ends early, expected '%c'", c);
    if (*j->p != c)
        return fail(j, "header JSON: expected '%c' at byte %ld, found '%c'", c, pos(j), *j->p);
    j->p++;
    return 0;
}

/* RFC 3629 UTF-8, without overlongs or surrogates; the header must be
 * valid UTF-8 for Python to read it. */
static int valid_utf8(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        int len;
        unsigned min;
        if (c < 0x80) { i++; continue; }
        else if ((c & 0xE0) == 0xC0) { len = 2; min = 0x80; c &= 0x1F; }
        else if ((c & 0xF0) == 0xE0) { len = 3; min = 0x800; c &= 0x0F; }
        else if ((c & 0xF8) == 0xF0) { len = 4; min = 0x10000; c &= 0x07; }
        else return 0;
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

static int hex4(const char *s, unsigned *out)
{
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        char c = s[k];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return -1;
    }
    *out = v;
    return 0;
}

static size_t put_utf8(char *o, unsigned c)
{
    if (c < 0x80) { o[0] = (char)c; return 1; }
    if (c < 0x800) { o[0] = (char)(0xC0 | (c >> 6)); o[1] = (char)(0x80 | (c & 0x3F)); return 2; }
    if (c < 0x10000) {
        o[0] = (char)(0xE0 | (c >> 12)); o[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        o[2] = (char)(0x80 | (c & 0x3F)); return 3;
    }
    o[0] = (char)(0xF0 | (c >> 18)); o[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((c >> 6) & 0x3F)); o[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

/* Parses a JSON string. Its unescaped text goes to out (NUL-terminated)
 * when out is not NULL; *len receives the full unescaped length, which may
 * exceed cap - 1 (then out holds a prefix and the caller decides). */
static int parse_string(json *j, char *out, size_t cap, size_t *len)
{
    if (expect(j, '"') != 0) return -1;
    size_t n = 0;
    char u[4];
    for (;;) {
        if (j->p >= j->end) return fail(j, "header JSON: unterminated string");
        unsigned char c = (unsigned char)*j->p++;
        size_t k = 0;
        if (c == '"') break;
        if (c < 0x20) return fail(j, "header JSON: control character in a string at byte %ld", pos(j) - 1);
        if (c != '\\') {
            u[0] = (char)c;
            k = 1;
        } else {
            if (j->p >= j->end) return fail(j, "header JSON: unterminated string");
            char e = *j->p++;
            switch (e) {
            case '"': case '\\': case '/': u[0] = e; k = 1; break;
            case 'b': u[0] = '\b'; k = 1; break;
            case 'f': u[0] = '\f'; k = 1; break;
            case 'n': u[0] = '\n'; k = 1; break;
            case 'r': u[0] = '\r'; k = 1; break;
            case 't': u[0] = '\t'; k = 1; break;
            case 'u': {
                unsigned cp, lo;
                if (j->end - j->p < 4 || hex4(j->p, &cp) != 0)
                    return fail(j, "header JSON: bad \\u escape at byte %ld", pos(j) - 2);
                j->p += 4;
                if (cp >= 0xDC00 && cp <= 0xDFFF)
                    return fail(j, "header JSON: lone surrogate \\u%04X", cp);
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    if (j->end - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u' ||
                        hex4(j->p + 2, &lo) != 0 || lo < 0xDC00 || lo > 0xDFFF)
                        return fail(j, "header JSON: lone surrogate \\u%04X", cp);
                    j->p += 6;
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                }
                if (cp == 0) return fail(j, "header JSON: \\u0000 in a string");
                k = put_utf8(u, cp);
                break;
            }
            default:
                return fail(j, "header JSON: bad escape '\\%c' at byte %ld", e, pos(j) - 2);
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
static int parse_uint(json *j, uint64_t *out, const char *what)
{
    skip_ws(j);
    const char *s = j->p;
    uint64_t v = 0;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
        unsigned d = (unsigned)(*j->p - '0');
        if (v > (UINT64_MAX - d) / 10) return fail(j, "%s: integer too large", what);
        v = v * 10 + d;
        j->p++;
    }
    if (j->p == s) return fail(j, "%s: expected a non-negative integer at byte %ld", what, pos(j));
    if (j->p - s > 1 && *s == '0') return fail(j, "%s: integer with a leading zero", what);
    if (j->p < j->end && (*j->p == '.' || *j->p == 'e' || *j->p == 'E'))
        return fail(j, "%s: expected an integer, found a fraction", what);
    *out = v;
    return 0;
}

/* [u, u, ...] with at most max items; *n receives the count. */
static int parse_uint_array(json *j, uint64_t *out, int max, int *n, const char *what)
{
    if (expect(j, '[') != 0) return -1;
    *n = 0;
    skip_ws(j);
    if (j->p < j->end && *j->p == ']') { j->p++; return 0; }
    for (;;) {
        uint64_t v = 0;
        if (parse_uint(j, &v, what) != 0) return -1;
        if (*n >= max) return fail(j, "%s: more than %d values", what, max);
        out[(*n)++] = v;
        skip_ws(j);
        if (j->p < j->end && *j->p == ',') { j->p++; continue; }
        return expect(j, ']');
    }
}

/* Skips any JSON value (for keys of a tensor entry the format may add). */
static int skip_value(json *j, int depth)
{
    if (depth > ST_MAX_DEPTH) return fail(j, "header JSON nested too deeply");
    skip_ws(j);
    if (j->p >= j->end) return fail(j, "header JSON ends early, expected a value");
    char c = *j->p;
    if (c == '"') return parse_string(j, NULL, 0, NULL);
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        j->p++;
        skip_ws(j);
        if (j->p < j->end && *j->p == close) { j->p++; return 0; }
        for (;;) {
            if (c == '{') {
                if (parse_string(j, NULL, 0, NULL) != 0 || expect(j, ':') != 0) return -1;
            }
            if (skip_value(j, depth + 1) != 0) return -1;
            skip_ws(j);
            if (j->p < j->end && *j->p == ',') { j->p++; continue; }
            return expect(j, close);
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
        return fail(j, "header JSON: unexpected '%c' at byte %ld", *s, (long)(s - j->start));
    if (j->p < j->end && *j->p == '.') {
        d = ++j->p;
        while (j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
        if (j->p == d) return fail(j, "header JSON: bad number at byte %ld", (long)(s - j->start));
    }
    if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
        j->p++;
        if (j->p < j->end && (*j->p == '+' || *j->p == '-')) j->p++;
        d = j->p;
        while (j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
        if (j->p == d) return fail(j, "header JSON: bad number at byte %ld", (long)(s - j->start));
    }
    return 0;
}

/* "__metadata__": an object whose values are all strings. */
static int parse_metadata(json *j)
{
    if (expect(j, '{') != 0) return -1;
    skip_ws(j);
    if (j->p < j->end && *j->p == '}') { j->p++; return 0; }
    for (;;) {
        if (parse_string(j, NULL, 0, NULL) != 0 || expect(j, ':') != 0) return -1;
        skip_ws(j);
        if (j->p >= j->end || *j->p != '"')
            return fail(j, "__metadata__: values must be strings (byte %ld)", pos(j));
        if (parse_string(j, NULL, 0, NULL) != 0) return -1;
        skip_ws(j);
        if (j->p < j->end && *j->p == ',') { j->p++; continue; }
        return expect(j, '}');
    }
}

/* {"dtype": "F32", "shape": [...], "data_offsets": [b, e]} for tensor e->name. */
static int parse_entry(json *j, tg_st_entry *e)
{
    bool have_dtype = false, have_shape = false, have_offsets = false;
    char key[32];
    size_t klen;
    if (expect(j, '{') != 0) return -1;
    skip_ws(j);
    bool empty = j->p < j->end && *j->p == '}';
    if (empty) j->p++;
    while (!empty) {
        if (parse_string(j, key, sizeof key, &klen) != 0 || expect(j, ':') != 0) return -1;
        if (klen >= sizeof key) key[0] = '\0';   /* too long to be a known key */
        if (strcmp(key, "dtype") == 0) {
            if (have_dtype) return fail(j, "%s: duplicate field 'dtype'", e->name);
            size_t dl;
            skip_ws(j);
            if (j->p >= j->end || *j->p != '"') return fail(j, "%s: dtype must be a string", e->name);
            if (parse_string(j, e->dtype, sizeof e->dtype, &dl) != 0) return -1;
            if (dl >= sizeof e->dtype) return fail(j, "%s: unknown dtype '%s...'", e->name, e->dtype);
            have_dtype = true;
        } else if (strcmp(key, "shape") == 0) {
            uint64_t dims[TG_MAX_DIMS];
            if (have_shape) return fail(j, "%s: duplicate field 'shape'", e->name);
            char what[TG_PARAM_NAME_MAX + 16];
            snprintf(what, sizeof what, "%s: shape", e->name);
            if (parse_uint_array(j, dims, TG_MAX_DIMS, &e->ndim, what) != 0) {
                if (strstr(j->why, "more than"))
                    snprintf(j->why, sizeof j->why, "%s: more than %d dimensions (tgrad's limit)",
                             e->name, TG_MAX_DIMS);
                return -1;
            }
            for (int k = 0; k < e->ndim; k++) {
                if (dims[k] > INT_MAX) return fail(j, "%s: dimension %llu too large", e->name,
                                                   (unsigned long long)dims[k]);
                e->shape[k] = (int)dims[k];
            }
            have_shape = true;
        } else if (strcmp(key, "data_offsets") == 0) {
            uint64_t off[2];
            int n;
            if (have_offsets) return fail(j, "%s: duplicate field 'data_offsets'", e->name);
            char what[TG_PARAM_NAME_MAX + 16];
            snprintf(what, sizeof what, "%s: data_offsets", e->name);
            if (parse_uint_array(j, off, 2, &n, what) != 0) {
                if (strstr(j->why, "more than"))
                    snprintf(j->why, sizeof j->why, "%s: data_offsets must be [begin, end]", e->name);
                return -1;
            }
            if (n != 2) return fail(j, "%s: data_offsets must be [begin, end]", e->name);
            e->begin = off[0];
            e->end = off[1];
            have_offsets = true;
        } else if (skip_value(j, 1) != 0) {
            return -1;
        }
        skip_ws(j);
        if (j->p < j->end && *j->p == ',') { j->p++; continue; }
        if (expect(j, '}') != 0) return -1;
        break;
    }
    if (!have_dtype) return fail(j, "%s: missing field 'dtype'", e->name);
    if (!have_shape) return fail(j, "%s: missing field 'shape'", e->name);
    if (!have_offsets) return fail(j, "%s: missing field 'data_offsets'", e->name);
    return 0;
}

/* The whole header: fills st->entries / st->n / st->metadata. */
static int parse_header(json *j, tg_safetensors *st)
{
    int cap = 0;
    if (expect(j, '{') != 0) return -1;
    skip_ws(j);
    bool empty = j->p < j->end && *j->p == '}';
    if (empty) j->p++;
    while (!empty) {
        char name[TG_PARAM_NAME_MAX];
        size_t len;
        if (parse_string(j, name, sizeof name, &len) != 0) return -1;
        if (expect(j, ':') != 0) return -1;
        if (strcmp(name, "__metadata__") == 0) {
            if (st->metadata) return fail(j, "duplicate key '__metadata__'");
            skip_ws(j);
            const char *m = j->p;
            if (parse_metadata(j) != 0) return -1;
            st->metadata = m;
            st->metadata_len = (size_t)(j->p - m);
        } else {
            if (len >= sizeof name)
                return fail(j, "tensor name '%.40s...' is longer than %d bytes", name,
                            TG_PARAM_NAME_MAX - 1);
            if (len == 0) return fail(j, "empty tensor name");
            if (strlen(name) != len) return fail(j, "tensor name with a NUL character");
            if (tg_safetensors_find(st, name) >= 0) return fail(j, "%s: duplicate tensor name", name);
            if (st->n == cap) {
                int ncap = cap ? 2 * cap : 16;
                tg_st_entry *ne = tg_sys_alloc((size_t)ncap * sizeof *ne);
                if (!ne) return fail(j, "out of memory");
                if (st->n) memcpy(ne, st->entries, (size_t)st->n * sizeof *ne);
                tg_sys_free(st->entries);
                st->entries = ne;
                cap = ncap;
            }
            tg_st_entry *e = &st->entries[st->n++];
            memset(e, 0, sizeof *e);
            memcpy(e->name, name, len + 1);
            if (parse_entry(j, e) != 0) return -1;
        }
        skip_ws(j);
        if (j->p < j->end && *j->p == ',') { j->p++; continue; }
        if (expect(j, '}') != 0) return -1;
        break;
    }
    skip_ws(j);
    if (j->p != j->end) return fail(j, "header JSON: unexpected data after the object at byte %ld", pos(j));
    return 0;
}

/* ---- checks beyond syntax ------------------------------------------------- */
static size_t dtype_size(const char *dtype)
{
    if (strcmp(dtype, "F32") == 0) return 4;
    if (strcmp(dtype, "F64") == 0) return 8;
    return 0;
}

typedef struct { uint64_t begin, end; int i; } span;

static int by_begin(const void *a, const void *b)
{
    const span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

static int check_entries(json *j, tg_safetensors *st)
{
    for (int i = 0; i < st->n; i++) {
        tg_st_entry *e = &st->entries[i];
        size_t es = dtype_size(e->dtype);
        if (!es) return fail(j, "%s: dtype '%s' is not supported (only F32 and F64)", e->name, e->dtype);
        uint64_t numel = 1;
        for (int k = 0; k < e->ndim; k++) {
            if (e->shape[k] && numel > (uint64_t)INT64_MAX / 8 / (uint64_t)e->shape[k])
                return fail(j, "%s: shape too large", e->name);
            numel *= (uint64_t)e->shape[k];
        }
        e->numel = (int64_t)numel;
        char sh[64];
        if (e->end < e->begin)
            return fail(j, "%s: data_offsets [%llu, %llu] end before they begin", e->name,
                        (unsigned long long)e->begin, (unsigned long long)e->end);
        if (e->end - e->begin != numel * es)
            return fail(j, "%s: data_offsets [%llu, %llu] hold %llu bytes, but %s %s needs %llu",
                        e->name, (unsigned long long)e->begin, (unsigned long long)e->end,
                        (unsigned long long)(e->end - e->begin), e->dtype,
                        tg_shape_str(sh, e->ndim, e->shape), (unsigned long long)(numel * es));
        if (e->end > st->data_size)
            return fail(j, "%s: data ends at byte %llu but the data section has only %zu bytes "
                        "(file truncated?)", e->name, (unsigned long long)e->end, st->data_size);
    }
    /* Sorted by offset, the tensors must tile [0, data_size) exactly. */
    span *s = tg_sys_alloc((size_t)(st->n ? st->n : 1) * sizeof *s);
    if (!s) return fail(j, "out of memory");
    for (int i = 0; i < st->n; i++)
        s[i] = (span){st->entries[i].begin, st->entries[i].end, i};
    qsort(s, (size_t)st->n, sizeof *s, by_begin);
    uint64_t at = 0;
    int rc = 0;
    for (int i = 0; i < st->n && rc == 0; i++) {
        if (s[i].begin != at)
            rc = fail(j, "%s: data_offsets begin at %llu, expected %llu (%s)",
                      st->entries[s[i].i].name, (unsigned long long)s[i].begin,
                      (unsigned long long)at, s[i].begin < at ? "overlaps another tensor" : "gap");
        at = s[i].end;
    }
    tg_sys_free(s);
    if (rc == 0 && at != st->data_size)
        rc = fail(j, "tensors cover %llu bytes of data but the data section has %zu "
                  "(extra bytes at the end)", (unsigned long long)at, st->data_size);
    return rc;
}

/* ---- public API ----------------------------------------------------------- */
int tg_safetensors_find(const tg_safetensors *st, const char *name)
{
    if (!st || !name) return -1;
    for (int i = 0; i < st->n; i++)
        if (strcmp(st->entries[i].name, name) == 0) return i;
    return -1;
}

void tg_safetensors_close(tg_safetensors *st)
{
    if (!st) return;
    tg_sys_free(st->entries);
    tg_sys_free(st->blob);
    memset(st, 0, sizeof *st);
}

static uint64_t le64(const unsigned char *b)
{
    uint64_t v = 0;
    for (int k = 7; k >= 0; k--) v = (v << 8) | b[k];
    return v;
}

int tg_safetensors_parse(unsigned char *blob, size_t size, const char *name, tg_safetensors *st)
{
    if (!st) { tg_sys_free(blob); tg_set_error("safetensors_open: NULL result"); return -1; }
    memset(st, 0, sizeof *st);
    st->blob = blob;
    st->blob_size = size;
    if (!blob) { tg_set_error("safetensors_open: %s: NULL buffer", name); return -1; }

    json j = {0};
    if (size < 8) {
        fail(&j, "file is %zu bytes, too short to hold the 8-byte header length (truncated?)", size);
    } else {
        uint64_t n = le64(blob);
        if (n > ST_MAX_HEADER) {
            fail(&j, "header length %llu is larger than the 100 MB limit (corrupt file?)",
                 (unsigned long long)n);
        } else if (n > size - 8) {
            fail(&j, "header length %llu is larger than the %zu bytes after it (truncated?)",
                 (unsigned long long)n, size - 8);
        } else if (!valid_utf8(blob + 8, (size_t)n)) {
            fail(&j, "header is not valid UTF-8");
        } else {
            j.start = j.p = (const char *)blob + 8;
            j.end = j.start + n;
            st->data = blob + 8 + n;
            st->data_size = size - 8 - (size_t)n;
            if (parse_header(&j, st) == 0) check_entries(&j, st);
        }
    }
    if (j.why[0]) {
        tg_set_error("safetensors_open: %s: %s", name, j.why);
        tg_safetensors_close(st);
        return -1;
    }
    return 0;
}

int tg_safetensors_open(const char *path, tg_safetensors *st)
{
    unsigned char *blob;
    size_t size;
    if (!st) { tg_set_error("safetensors_open: NULL result"); return -1; }
    memset(st, 0, sizeof *st);
    if (!path) { tg_set_error("safetensors_open: NULL path"); return -1; }
    if (tg_read_file(path, "safetensors_open", &blob, &size) != 0) return -1;
    return tg_safetensors_parse(blob, size, path, st);
}

int tg_safetensors_read(const tg_safetensors *st, int i, tg_real *out)
{
    if (!st || !out || i < 0 || i >= st->n) {
        tg_set_error("safetensors_read: %s", !st || !out ? "NULL argument" : "index out of range");
        return -1;
    }
    const tg_st_entry *e = &st->entries[i];
    const unsigned char *b = st->data + e->begin;
    /* Decode little-endian bytes explicitly: right on any host, and no
     * unaligned loads. */
    if (strcmp(e->dtype, "F32") == 0) {
        for (int64_t k = 0; k < e->numel; k++, b += 4) {
            uint32_t u = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
            float f;
            memcpy(&f, &u, 4);
            out[k] = (tg_real)f;
        }
    } else {
        for (int64_t k = 0; k < e->numel; k++, b += 8) {
            uint64_t u = le64(b);
            double d;
            memcpy(&d, &u, 8);
            out[k] = (tg_real)d;
        }
    }
    return 0;
}

long tg_safetensors_meta(const tg_safetensors *st, const char *key, char *out, size_t cap)
{
    if (!st || !key || !st->metadata) return -1;
    json j = {0};
    j.start = j.p = st->metadata;
    j.end = st->metadata + st->metadata_len;
    size_t klen = strlen(key);
    char *k = tg_sys_alloc(klen + 2);
    if (!k) return -1;
    long found = -1;
    /* The object was validated at open, so the walk cannot fail. */
    expect(&j, '{');
    skip_ws(&j);
    while (j.p < j.end && *j.p != '}') {
        size_t l, vl;
        parse_string(&j, k, klen + 2, &l);
        expect(&j, ':');
        if (l == klen && strcmp(k, key) == 0) {
            parse_string(&j, out, cap, &vl);
            found = (long)vl;
            break;
        }
        parse_string(&j, NULL, 0, NULL);
        skip_ws(&j);
        if (j.p < j.end && *j.p == ',') j.p++;
        skip_ws(&j);
    }
    tg_sys_free(k);
    return found;
}
