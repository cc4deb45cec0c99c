/* NumPy .npy files (layout in npy.h). The header is a Python dict literal;
 * the reader accepts what numpy.save writes: the three keys in any order,
 * single or double quotes, a shape tuple with an optional trailing comma. */
#include "npy.h"

#include <limits.h>
#include <stdarg.h>
#include <string.h>

#include "file.h"

static const char MAGIC[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

/* ---- save ----------------------------------------------------------------- */
/* Little-endian bytes of m values from src + at (tg_real, uint16 as 1 or 2 bytes). */
typedef void (*npy_encode)(const void *src, int64_t at, int64_t m, unsigned char *buf);

static void encode_reals(const void *src, int64_t at, int64_t m, unsigned char *buf) {
    const tg_real *x = (const tg_real *)src + at;
    for (int64_t k = 0; k < m; k++) {
        uint64_t u;
        if (sizeof(tg_real) == 4) {
            float v = (float)x[k];
            uint32_t w;
            memcpy(&w, &v, 4);
            u = w;
        } else {
            double v = (double)x[k];
            memcpy(&u, &v, 8);
        }
        for (size_t b = 0; b < sizeof(tg_real); b++)
            buf[k * (int64_t)sizeof(tg_real) + (int64_t)b] = (unsigned char)(u >> (8 * b));
    }
}
static void encode_u8(const void *src, int64_t at, int64_t m, unsigned char *buf) {
    for (int64_t k = 0; k < m; k++) buf[k] = (unsigned char)((const uint16_t *)src)[at + k];
}
static void encode_u16(const void *src, int64_t at, int64_t m, unsigned char *buf) {
    for (int64_t k = 0; k < m; k++) {
        uint16_t v = ((const uint16_t *)src)[at + k];
        buf[2 * k] = (unsigned char)(v & 0xFF), buf[2 * k + 1] = (unsigned char)(v >> 8);
    }
}

static void encode_u32(const void *src, int64_t at, int64_t m, unsigned char *buf) {
    for (int64_t k = 0; k < m; k++) {
        uint32_t v = ((const uint32_t *)src)[at + k];
        for (int b = 0; b < 4; b++) buf[4 * k + b] = (unsigned char)(v >> (8 * b));
    }
}

/* Saves atomically: the preamble, the header dict h (n bytes; h has room for
 * 64 more: it is padded with spaces and a '\n' so that the data starts at a
 * multiple of 64 bytes), then count values of itemsize bytes from src. */
static int npy_write(const char *path, char *h, int n, int64_t count, int itemsize, npy_encode encode,
                     const void *src) {
    int total = (10 + n + 1 + 63) / 64 * 64;
    while (10 + n + 1 < total) h[n++] = ' ';
    h[n++] = '\n';
    unsigned char pre[10];
    memcpy(pre, MAGIC, 6);
    pre[6] = 1; /* format 1.0 */
    pre[7] = 0;
    pre[8] = (unsigned char)(n & 0xFF);
    pre[9] = (unsigned char)(n >> 8);
    tg_atomic_file af;
    if (tg_atomic_begin(&af, path, "npy_save") != 0) return -1;
    int ok = fwrite(pre, 1, 10, af.f) == 10 && fwrite(h, 1, (size_t)n, af.f) == (size_t)n;
    enum { CHUNK = 512 };
    unsigned char buf[8 * CHUNK];
    for (int64_t at = 0; ok && at < count; at += CHUNK) {
        int64_t m = count - at < CHUNK ? count - at : CHUNK;
        encode(src, at, m, buf);
        ok = fwrite(buf, (size_t)itemsize, (size_t)m, af.f) == (size_t)m;
    }
    if (!ok) {
        tg_set_error("npy_save: %s: write error", path);
        tg_atomic_abort(&af);
        return -1;
    }
    return tg_atomic_commit(&af, "npy_save");
}

int tg_npy_save(const char *path, const tg_tensor *t) {
    if (!path || !t || (!t->data && t->size > 0)) {
        tg_set_error("npy_save: NULL %s", !path ? "path" : "tensor");
        return -1;
    }
    char h[256];
    int n = snprintf(h, sizeof h, "{'descr': '<f%d', 'fortran_order': False, 'shape': (", (int)sizeof(tg_real));
    for (int k = 0; k < t->ndim; k++)
        n += snprintf(h + n, sizeof h - (size_t)n, "%d,%s", t->shape[k], k + 1 < t->ndim ? " " : "");
    /* A 1-tuple needs its comma, "(3,)"; numpy writes "(3, 4)" for more. */
    if (t->ndim > 1) n--;
    n += snprintf(h + n, sizeof h - (size_t)n, "), }");
    return npy_write(path, h, n, t->size, (int)sizeof(tg_real), encode_reals, t->data);
}

int tg_npy_save_uint(const char *path, const uint16_t *values, int64_t n, int itemsize) {
    if (!path || (!values && n > 0)) {
        tg_set_error("npy_save: NULL %s", !path ? "path" : "values");
        return -1;
    }
    if (n < 0 || (itemsize != 1 && itemsize != 2)) {
        tg_set_error("npy_save: %s: %lld values of %d bytes: need n >= 0 and 1 or 2 bytes", path, (long long)n,
                     itemsize);
        return -1;
    }
    for (int64_t k = 0; itemsize == 1 && k < n; k++)
        if (values[k] > 255) {
            tg_set_error("npy_save: %s: value %u at %lld does not fit in uint8", path, values[k], (long long)k);
            return -1;
        }
    char h[128];
    int len = snprintf(h, sizeof h, "{'descr': '%s', 'fortran_order': False, 'shape': (%lld,), }",
                       itemsize == 1 ? "|u1" : "<u2", (long long)n);
    return npy_write(path, h, len, n, itemsize, itemsize == 1 ? encode_u8 : encode_u16, values);
}

int tg_npy_save_uint32(const char *path, const uint32_t *values, int64_t n) {
    if (!path || (!values && n > 0)) {
        tg_set_error("npy_save: NULL %s", !path ? "path" : "values");
        return -1;
    }
    if (n < 0) {
        tg_set_error("npy_save: %s: %lld values: need n >= 0", path, (long long)n);
        return -1;
    }
    char h[128];
    int len = snprintf(h, sizeof h, "{'descr': '<u4', 'fortran_order': False, 'shape': (%lld,), }", (long long)n);
    return npy_write(path, h, len, n, 4, encode_u32, values);
}

/* ---- the header dict ------------------------------------------------------ */
typedef struct {
    const char *p, *end;
    char why[200];
} cursor;

static int fail(cursor *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static int fail(cursor *c, const char *fmt, ...) {
    if (!c->why[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->why, sizeof c->why, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static void ws(cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static bool eat(cursor *c, char ch) {
    ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

/* 'text' or "text", no escapes (numpy never writes any). */
static int quoted(cursor *c, char *out, size_t cap) {
    ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return fail(c, "header: expected a quoted string");
    char q = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' || *c->p == '\n') return fail(c, "header: unsupported character in a string");
        if (n + 1 < cap)
            out[n++] = *c->p;
        else
            return fail(c, "header: string too long");
        c->p++;
    }
    if (c->p >= c->end) return fail(c, "header: unterminated string");
    c->p++;
    out[n] = '\0';
    return 0;
}

static bool word(cursor *c, const char *w) {
    size_t n = strlen(w);
    ws(c);
    if ((size_t)(c->end - c->p) >= n && memcmp(c->p, w, n) == 0) {
        c->p += n;
        return true;
    }
    return false;
}

/* (d0, d1, ...) with an optional trailing comma; Python 2 wrote 3L. */
static int shape_tuple(cursor *c, int *ndim, int64_t *dims, int64_t max_dim) {
    if (!eat(c, '(')) return fail(c, "header: 'shape' must be a tuple");
    *ndim = 0;
    for (;;) {
        if (eat(c, ')')) return 0;
        ws(c);
        int64_t v = 0;
        const char *s = c->p;
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
            if (v > (max_dim - (*c->p - '0')) / 10) return fail(c, "header: dimension too large");
            v = v * 10 + (*c->p++ - '0');
        }
        if (c->p == s) return fail(c, "header: bad dimension in 'shape'");
        if (c->p < c->end && *c->p == 'L') c->p++;
        if (*ndim >= TG_MAX_DIMS) return fail(c, "array has more than %d dimensions (tgrad's limit)", TG_MAX_DIMS);
        dims[(*ndim)++] = v;
        if (eat(c, ',')) continue;
        if (eat(c, ')')) return 0;
        return fail(c, "header: bad 'shape' tuple");
    }
}

typedef struct {
    char descr[16];
    bool fortran;
    int ndim;
    int64_t dims[TG_MAX_DIMS];
    int64_t max_dim; /* a larger dimension is an error */
} npy_header;

static int parse_dict(cursor *c, npy_header *h) {
    bool have_descr = false, have_fortran = false, have_shape = false;
    if (!eat(c, '{')) return fail(c, "header is not a Python dict");
    for (;;) {
        if (eat(c, '}')) break;
        char key[32];
        if (quoted(c, key, sizeof key) != 0) return -1;
        if (!eat(c, ':')) return fail(c, "header: expected ':' after '%s'", key);
        if (strcmp(key, "descr") == 0 && !have_descr) {
            ws(c);
            if (c->p < c->end && *c->p == '[') return fail(c, "structured dtypes are not supported");
            if (quoted(c, h->descr, sizeof h->descr) != 0) return -1;
            have_descr = true;
        } else if (strcmp(key, "fortran_order") == 0 && !have_fortran) {
            if (word(c, "True"))
                h->fortran = true;
            else if (word(c, "False"))
                h->fortran = false;
            else
                return fail(c, "header: 'fortran_order' must be True or False");
            have_fortran = true;
        } else if (strcmp(key, "shape") == 0 && !have_shape) {
            if (shape_tuple(c, &h->ndim, h->dims, h->max_dim) != 0) return -1;
            have_shape = true;
        } else {
            return fail(c, "header: unexpected or repeated key '%s'", key);
        }
        if (eat(c, ',')) continue;
        if (eat(c, '}')) break;
        return fail(c, "header: expected ',' or '}'");
    }
    ws(c);
    if (c->p != c->end) return fail(c, "header: unexpected text after the dict");
    if (!have_descr || !have_fortran || !have_shape)
        return fail(c, "header: missing key '%s'", !have_descr ? "descr" : !have_fortran ? "fortran_order" : "shape");
    return 0;
}

/* Magic, version, header length and the dict: on success *start is where
 * the data begins. */
static int parse_preamble(cursor *c, const unsigned char *b, size_t size, npy_header *h, size_t *start) {
    if (size < 10 || memcmp(b, MAGIC, 6) != 0)
        return fail(c, size < 10 && size >= 6 && memcmp(b, MAGIC, 6) == 0 ? "file truncated inside the preamble"
                                                                          : "not a .npy file (bad magic)");
    if (b[6] < 1 || b[6] > 3) return fail(c, "unsupported format version %d.%d", b[6], b[7]);
    size_t hlen;
    if (b[6] == 1) {
        hlen = (size_t)b[8] | (size_t)b[9] << 8;
        *start = 10;
    } else if (size < 12) {
        return fail(c, "file truncated inside the preamble");
    } else {
        hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
        *start = 12;
    }
    if (hlen > size - *start)
        return fail(c, "header length %zu is larger than the %zu bytes after it (truncated?)", hlen, size - *start);
    c->p = (const char *)b + *start;
    c->end = c->p + hlen;
    *start += hlen;
    return parse_dict(c, h);
}

int tg_npy_parse_header(const unsigned char *b, size_t size, const char *name, tg_npy_header *out) {
    if (!b || !name || !out) {
        tg_set_error("npy_header: NULL %s", !b ? "buffer" : !name ? "name" : "output");
        return -1;
    }
    cursor c = {0};
    npy_header h = {.max_dim = INT64_MAX / 16};
    size_t start = 0;
    if (parse_preamble(&c, b, size, &h, &start) != 0) {
        tg_set_error("npy_header: %s: %s", name, c.why);
        return -1;
    }
    memset(out, 0, sizeof *out);
    memcpy(out->descr, h.descr, sizeof out->descr);
    out->fortran_order = h.fortran;
    out->ndim = h.ndim;
    for (int k = 0; k < h.ndim; k++) out->shape[k] = h.dims[k];
    out->data_offset = start;
    return 0;
}

/* ---- load ----------------------------------------------------------------- */
tg_tensor *tg_npy_load(const char *path) {
    unsigned char *b;
    size_t size;
    if (tg_read_file(path, "npy_load", &b, &size) != 0) return NULL;
    tg_tensor *t = tg_npy_parse(b, size, path);
    tg_sys_free(b);
    return t;
}

tg_tensor *tg_npy_parse(const unsigned char *b, size_t size, const char *path) {
    if (!b || !path) {
        tg_set_error("npy_load: NULL %s", !b ? "buffer" : "name");
        return NULL;
    }
    cursor c = {0};
    npy_header h = {.max_dim = INT_MAX};
    size_t start = 0, es = 0;
    int64_t numel = 1;
    if (parse_preamble(&c, b, size, &h, &start) == 0) {
        const char *d = h.descr;
        if (h.fortran)
            fail(&c, "fortran_order True is not supported (save a C-contiguous array)");
        else if (d[0] == '>' && (strcmp(d + 1, "f4") == 0 || strcmp(d + 1, "f8") == 0))
            fail(&c, "big-endian data ('%s') is not supported; use '<%s'", d, d + 1);
        else if (strcmp(d, "<f4") == 0)
            es = 4;
        else if (strcmp(d, "<f8") == 0)
            es = 8;
        else
            fail(&c, "dtype '%s' is not supported (only '<f4' and '<f8')", d);
    }
    for (int k = 0; k < h.ndim; k++)
        if (h.dims[k] == 0) numel = 0; /* empty, whatever the other sizes (the tensor checks those) */
    if (!c.why[0] && numel) {
        for (int k = 0; k < h.ndim; k++) {
            if (numel > INT64_MAX / 8 / h.dims[k]) {
                fail(&c, "shape too large");
                break;
            }
            numel *= h.dims[k];
        }
    }
    if (!c.why[0]) {
        uint64_t need = (uint64_t)numel * es, have = size - start;
        if (have < need)
            fail(&c, "file truncated: data has %llu bytes, the header's shape needs %llu", (unsigned long long)have,
                 (unsigned long long)need);
        else if (have > need)
            fail(&c, "%llu unexpected bytes after the data", (unsigned long long)(have - need));
    }
    tg_tensor *t = NULL;
    if (!c.why[0]) {
        int shape[TG_MAX_DIMS] = {0};
        for (int k = 0; k < h.ndim; k++) shape[k] = (int)h.dims[k];
        t = tg_empty_persistent(h.ndim, shape);
        if (!t) fail(&c, "%s", tg_last_error() ? tg_last_error() : "cannot allocate the tensor"); /* the reason */
    }
    if (c.why[0]) {
        tg_set_error("npy_load: %s: %s", path, c.why);
        return NULL;
    }
    const unsigned char *p = b + start;
    for (int64_t k = 0; k < numel; k++, p += es) {
        uint64_t u = 0;
        for (int i = (int)es - 1; i >= 0; i--) u = (u << 8) | p[i];
        if (es == 4) {
            uint32_t w = (uint32_t)u;
            float f;
            memcpy(&f, &w, 4);
            t->data[k] = (tg_real)f;
        } else {
            double d;
            memcpy(&d, &u, 8);
            t->data[k] = (tg_real)d;
        }
    }
    return t;
}
