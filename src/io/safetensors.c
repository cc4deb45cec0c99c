/* safetensors files, read and written (layout in safetensors.h): the
 * header's JSON through the strict reader of json.c, the checks the
 * reference implementation makes, and a writer whose files it accepts. */
#include "safetensors.h"
#include "strbuf.h"

#include "file.h"
#include "json.h"
#include "../tensor/half.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* The reference implementation refuses headers above 100 MB. */
#define ST_MAX_HEADER 100000000ull

/* "__metadata__": an object whose values are all strings. */
static int parse_metadata(tg_json *j) {
    int empty = tg_json_open(j, '{', '}');
    if (empty) return empty < 0 ? -1 : 0;
    for (;;) {
        if (tg_json_string(j, NULL, 0, NULL) != 0 || tg_json_expect(j, ':') != 0) return -1;
        tg_json_skip_ws(j);
        if (j->p >= j->end || *j->p != '"')
            return tg_json_fail(j, "__metadata__: values must be strings (byte %ld)", tg_json_pos(j));
        if (tg_json_string(j, NULL, 0, NULL) != 0) return -1;
        int more = tg_json_next(j, '}');
        if (more <= 0) return more;
    }
}

/* {"dtype": "F32", "shape": [...], "data_offsets": [b, e]} for tensor e->name. */
static int parse_entry(tg_json *j, tg_st_entry *e) {
    bool have_dtype = false, have_shape = false, have_offsets = false;
    char key[32];
    size_t klen;
    int empty = tg_json_open(j, '{', '}');
    if (empty < 0) return -1;
    while (!empty) {
        if (tg_json_string(j, key, sizeof key, &klen) != 0 || tg_json_expect(j, ':') != 0) return -1;
        if (klen >= sizeof key) key[0] = '\0'; /* too long to be a known key */
        if (strcmp(key, "dtype") == 0) {
            if (have_dtype) return tg_json_fail(j, "%s: duplicate field 'dtype'", e->name);
            size_t dl;
            tg_json_skip_ws(j);
            if (j->p >= j->end || *j->p != '"') return tg_json_fail(j, "%s: dtype must be a string", e->name);
            if (tg_json_string(j, e->dtype, sizeof e->dtype, &dl) != 0) return -1;
            if (dl >= sizeof e->dtype) return tg_json_fail(j, "%s: unknown dtype '%s...'", e->name, e->dtype);
            have_dtype = true;
        } else if (strcmp(key, "shape") == 0) {
            uint64_t dims[TG_MAX_DIMS];
            if (have_shape) return tg_json_fail(j, "%s: duplicate field 'shape'", e->name);
            char what[TG_PARAM_NAME_MAX + 16];
            snprintf(what, sizeof what, "%s: shape", e->name);
            if (tg_json_uint_array(j, dims, TG_MAX_DIMS, &e->ndim, what) != 0) {
                if (strstr(j->why, "more than"))
                    snprintf(j->why, sizeof j->why, "%s: more than %d dimensions (tgrad's limit)", e->name,
                             TG_MAX_DIMS);
                return -1;
            }
            for (int k = 0; k < e->ndim; k++) {
                if (dims[k] > INT_MAX)
                    return tg_json_fail(j, "%s: dimension %llu too large", e->name, (unsigned long long)dims[k]);
                e->shape[k] = (int)dims[k];
            }
            have_shape = true;
        } else if (strcmp(key, "data_offsets") == 0) {
            uint64_t off[2];
            int n;
            if (have_offsets) return tg_json_fail(j, "%s: duplicate field 'data_offsets'", e->name);
            char what[TG_PARAM_NAME_MAX + 16];
            snprintf(what, sizeof what, "%s: data_offsets", e->name);
            if (tg_json_uint_array(j, off, 2, &n, what) != 0) {
                if (strstr(j->why, "more than"))
                    snprintf(j->why, sizeof j->why, "%s: data_offsets must be [begin, end]", e->name);
                return -1;
            }
            if (n != 2) return tg_json_fail(j, "%s: data_offsets must be [begin, end]", e->name);
            e->begin = off[0];
            e->end = off[1];
            have_offsets = true;
        } else if (tg_json_skip_value(j, 1) != 0) {
            return -1;
        }
        int more = tg_json_next(j, '}');
        if (more < 0) return -1;
        if (!more) break;
    }
    if (!have_dtype) return tg_json_fail(j, "%s: missing field 'dtype'", e->name);
    if (!have_shape) return tg_json_fail(j, "%s: missing field 'shape'", e->name);
    if (!have_offsets) return tg_json_fail(j, "%s: missing field 'data_offsets'", e->name);
    return 0;
}

/* The whole header: fills st->entries / st->n / st->metadata. */
static int parse_header(tg_json *j, tg_safetensors *st) {
    int cap = 0;
    int empty = tg_json_open(j, '{', '}');
    if (empty < 0) return -1;
    while (!empty) {
        char name[TG_PARAM_NAME_MAX];
        size_t len;
        if (tg_json_string(j, name, sizeof name, &len) != 0) return -1;
        if (tg_json_expect(j, ':') != 0) return -1;
        if (strcmp(name, "__metadata__") == 0) {
            if (st->metadata) return tg_json_fail(j, "duplicate key '__metadata__'");
            tg_json_skip_ws(j);
            const char *m = j->p;
            if (parse_metadata(j) != 0) return -1;
            st->metadata = m;
            st->metadata_len = (size_t)(j->p - m);
        } else {
            if (len >= sizeof name)
                return tg_json_fail(j, "tensor name '%.40s...' is longer than %d bytes", name, TG_PARAM_NAME_MAX - 1);
            if (len == 0) return tg_json_fail(j, "empty tensor name");
            if (strlen(name) != len) return tg_json_fail(j, "tensor name with a NUL character");
            if (st->n == TG_ST_MAX_ENTRIES)
                return tg_json_fail(j, "more than %d tensors (corrupt file?)", TG_ST_MAX_ENTRIES);
            if (st->n == cap) {
                int ncap = cap ? 2 * cap : 16;
                tg_st_entry *ne = tg_sys_alloc((size_t)ncap * sizeof *ne);
                if (!ne) return tg_json_fail(j, "out of memory");
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
        int more = tg_json_next(j, '}');
        if (more < 0) return -1;
        if (!more) break;
    }
    tg_json_skip_ws(j);
    if (j->p != j->end)
        return tg_json_fail(j, "header JSON: unexpected data after the object at byte %ld", tg_json_pos(j));
    return 0;
}

/* ---- checks beyond syntax ------------------------------------------------- */
typedef struct {
    const char *name;
    int i;
} named;

static int by_name_cmp(const void *a, const void *b) {
    return strcmp(((const named *)a)->name, ((const named *)b)->name);
}

/* Sorts the entries' indices by name, which finds a duplicate name among n
 * entries in O(n log n) (a pairwise check took 43 s for 160k entries) and
 * lets tg_safetensors_find search in O(log n). */
static int index_names(tg_json *j, tg_safetensors *st) {
    named *v = tg_sys_alloc((size_t)(st->n ? st->n : 1) * sizeof *v);
    st->by_name = tg_sys_alloc((size_t)(st->n ? st->n : 1) * sizeof *st->by_name);
    if (!v || !st->by_name) {
        tg_sys_free(v);
        return tg_json_fail(j, "out of memory");
    }
    for (int i = 0; i < st->n; i++) v[i] = (named){st->entries[i].name, i};
    qsort(v, (size_t)st->n, sizeof *v, by_name_cmp);
    int rc = 0;
    for (int i = 0; i < st->n; i++) {
        st->by_name[i] = v[i].i;
        if (i > 0 && rc == 0 && strcmp(v[i].name, v[i - 1].name) == 0)
            rc = tg_json_fail(j, "%s: duplicate tensor name", v[i].name);
    }
    tg_sys_free(v);
    return rc;
}

/* Bytes per value of the dtypes tgrad reads and writes; 0 for any other. */
static size_t dtype_size(const char *dtype) {
    if (strcmp(dtype, "F32") == 0) return 4;
    if (strcmp(dtype, "F64") == 0) return 8;
    if (strcmp(dtype, "BF16") == 0 || strcmp(dtype, "F16") == 0) return 2;
    return 0;
}

typedef struct {
    uint64_t begin, end;
    int i;
} span;

static int by_begin(const void *a, const void *b) {
    const span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

static int check_entries(tg_json *j, tg_safetensors *st) {
    for (int i = 0; i < st->n; i++) {
        tg_st_entry *e = &st->entries[i];
        size_t es = dtype_size(e->dtype);
        if (!es)
            return tg_json_fail(j, "%s: dtype '%s' is not supported (only F32, F64, BF16 and F16)", e->name, e->dtype);
        uint64_t numel = 1;
        for (int k = 0; k < e->ndim; k++) {
            if (e->shape[k] && numel > (uint64_t)INT64_MAX / 8 / (uint64_t)e->shape[k])
                return tg_json_fail(j, "%s: shape too large", e->name);
            numel *= (uint64_t)e->shape[k];
        }
        e->numel = (int64_t)numel;
        char sh[64];
        if (e->end < e->begin)
            return tg_json_fail(j, "%s: data_offsets [%llu, %llu] end before they begin", e->name,
                                (unsigned long long)e->begin, (unsigned long long)e->end);
        if (e->end - e->begin != numel * es)
            return tg_json_fail(j, "%s: data_offsets [%llu, %llu] hold %llu bytes, but %s %s needs %llu", e->name,
                                (unsigned long long)e->begin, (unsigned long long)e->end,
                                (unsigned long long)(e->end - e->begin), e->dtype, tg_shape_str(sh, e->ndim, e->shape),
                                (unsigned long long)(numel * es));
        if (e->end > st->data_size)
            return tg_json_fail(j,
                                "%s: data ends at byte %llu but the data section has only %zu bytes "
                                "(file truncated?)",
                                e->name, (unsigned long long)e->end, st->data_size);
    }
    /* Sorted by offset, the tensors must tile [0, data_size) exactly. */
    span *s = tg_sys_alloc((size_t)(st->n ? st->n : 1) * sizeof *s);
    if (!s) return tg_json_fail(j, "out of memory");
    for (int i = 0; i < st->n; i++) s[i] = (span){st->entries[i].begin, st->entries[i].end, i};
    qsort(s, (size_t)st->n, sizeof *s, by_begin);
    uint64_t at = 0;
    int rc = 0;
    for (int i = 0; i < st->n && rc == 0; i++) {
        if (s[i].begin != at)
            rc = tg_json_fail(j, "%s: data_offsets begin at %llu, expected %llu (%s)", st->entries[s[i].i].name,
                              (unsigned long long)s[i].begin, (unsigned long long)at,
                              s[i].begin < at ? "overlaps another tensor" : "gap");
        at = s[i].end;
    }
    tg_sys_free(s);
    if (rc == 0 && at != st->data_size)
        rc = tg_json_fail(j,
                          "tensors cover %llu bytes of data but the data section has %zu "
                          "(extra bytes at the end)",
                          (unsigned long long)at, st->data_size);
    return rc;
}

/* ---- the header's text: a growing string (strbuf.h) ---- */
static void sb_u64(tg_strbuf *b, uint64_t v) {
    char t[24];
    snprintf(t, sizeof t, "%llu", (unsigned long long)v);
    tg_strbuf_str(b, t);
}

/* ---- writing -------------------------------------------------------------- */
/* Names go into JSON verbatim, so they are kept to printable ASCII other
 * than '"' and '\\'; dotted module paths always are. */
static const char *bad_name(const char *name) {
    if (!*name) return "empty name";
    if (strcmp(name, "__metadata__") == 0) return "the name '__metadata__' is reserved";
    for (const char *c = name; *c; c++)
        if (*c < 0x20 || *c > 0x7E || *c == '"' || *c == '\\')
            return "names must be printable ASCII without '\"' or '\\'";
    return NULL;
}

/* Checks metadata_json is an object of strings by parsing it as the
 * header of an empty file: {"__metadata__": <it>}. */
static int check_metadata(const char *path, const char *meta) {
    size_t ml = strlen(meta);
    static const char pre[] = "{\"__metadata__\":", post[] = "}";
    size_t n = sizeof pre - 1 + ml + sizeof post - 1;
    unsigned char *blob = tg_sys_alloc(8 + n);
    if (!blob) {
        tg_set_error("safetensors_save: %s: out of memory", path);
        return -1;
    }
    for (int k = 0; k < 8; k++) blob[k] = (unsigned char)((uint64_t)n >> (8 * k));
    memcpy(blob + 8, pre, sizeof pre - 1);
    memcpy(blob + 8 + sizeof pre - 1, meta, ml);
    memcpy(blob + 8 + sizeof pre - 1 + ml, post, sizeof post - 1);
    tg_safetensors st;
    if (tg_safetensors_parse(blob, 8 + n, "metadata", &st) != 0) {
        char why[512];
        const char *e = tg_last_error();
        const char *tail = e ? strstr(e, "metadata: ") : NULL;
        snprintf(why, sizeof why, "%s", tail ? tail + 10 : "invalid");
        tg_set_error("safetensors_save: %s: metadata must be a JSON object of strings: %s", path, why);
        return -1;
    }
    int extra = st.n; /* text after the object, smuggling in a tensor entry */
    tg_safetensors_close(&st);
    if (extra) {
        tg_set_error("safetensors_save: %s: metadata must be one JSON object of strings", path);
        return -1;
    }
    return 0;
}

/* Little-endian bytes of n values in dtype (es bytes each), in chunks. A
 * value rounded to BF16 or F16 (half.h: to nearest even, NaN kept) that was
 * finite must stay finite: F16 ends at 65504, so a larger weight would
 * become an infinity that nothing downstream could tell from a diverged
 * run. Returns 0; -1 on a write error; 1 when a value overflows, its index
 * in *bad. */
static int write_values(FILE *f, const tg_real *x, int64_t n, const char *dtype, int64_t *bad) {
    unsigned char buf[8 * 1024];
    const int es = (int)dtype_size(dtype);
    const bool bf16 = strcmp(dtype, "BF16") == 0, f16 = strcmp(dtype, "F16") == 0;
    const int64_t chunk = (int64_t)(sizeof buf / (size_t)es);
    for (int64_t at = 0; at < n; at += chunk) {
        int64_t m = n - at < chunk ? n - at : chunk;
        for (int64_t k = 0; k < m; k++) {
            uint64_t u;
            if (es == 8) {
                double v = (double)x[at + k];
                memcpy(&u, &v, 8);
            } else if (es == 4) {
                u = tg__float_bits((float)x[at + k]);
            } else {
                float v = (float)x[at + k];
                uint16_t h = bf16 ? tg__bf16_from_float(v) : tg__f16_from_float(v);
                bool inf = f16 ? (h & 0x7FFF) == 0x7C00 : (h & 0x7FFF) == 0x7F80;
                if (inf && isfinite(x[at + k])) {
                    *bad = at + k;
                    return 1;
                }
                u = h;
            }
            for (int b = 0; b < es; b++) buf[k * es + b] = (unsigned char)(u >> (8 * b));
        }
        if (fwrite(buf, (size_t)es, (size_t)m, f) != (size_t)m) return -1;
    }
    return 0;
}

int tg_safetensors_save(const char *path, const tg_params *params, const char *metadata_json) {
    return tg_safetensors_save_dtype(path, params, metadata_json, NULL);
}

int tg_safetensors_save_dtype(const char *path, const tg_params *params, const char *metadata_json, const char *dtype) {
    if (!path || !params) {
        tg_set_error("safetensors_save: NULL %s", !path ? "path" : "params");
        return -1;
    }
    if (!dtype) dtype = TG_REAL_DTYPE;
    if (!dtype_size(dtype)) {
        tg_set_error("safetensors_save: %s: dtype '%s' is not one of F32, F64, BF16, F16", path, dtype);
        return -1;
    }
    const uint64_t es = dtype_size(dtype);
    for (int i = 0; i < params->n; i++) {
        const tg_param *p = &params->items[i];
        const char *why = bad_name(p->name);
        if (why) {
            tg_set_error("safetensors_save: %s: '%s': %s", path, p->name, why);
            return -1;
        }
        if (!p->t || (!p->t->data && p->t->size > 0)) {
            tg_set_error("safetensors_save: %s: %s: NULL tensor", path, p->name);
            return -1;
        }
        for (int k = 0; k < i; k++)
            if (strcmp(params->items[k].name, p->name) == 0) {
                tg_set_error("safetensors_save: %s: %s: duplicate name", path, p->name);
                return -1;
            }
    }
    if (metadata_json && check_metadata(path, metadata_json) != 0) return -1;

    /* Header: compact JSON like the reference writer, padded with spaces
     * so the data section starts 8-byte aligned. */
    tg_strbuf h = {0};
    uint64_t off = 0;
    tg_strbuf_str(&h, "{");
    if (metadata_json) {
        tg_strbuf_str(&h, "\"__metadata__\":");
        tg_strbuf_str(&h, metadata_json);
    }
    for (int i = 0; i < params->n; i++) {
        const tg_tensor *t = params->items[i].t;
        if (i || metadata_json) tg_strbuf_str(&h, ",");
        tg_strbuf_str(&h, "\"");
        tg_strbuf_str(&h, params->items[i].name);
        tg_strbuf_str(&h, "\":{\"dtype\":\"");
        tg_strbuf_str(&h, dtype);
        tg_strbuf_str(&h, "\",\"shape\":[");
        for (int k = 0; k < t->ndim; k++) {
            if (k) tg_strbuf_str(&h, ",");
            sb_u64(&h, (uint64_t)t->shape[k]);
        }
        uint64_t bytes = (uint64_t)t->size * es;
        tg_strbuf_str(&h, "],\"data_offsets\":[");
        sb_u64(&h, off);
        tg_strbuf_str(&h, ",");
        sb_u64(&h, off + bytes);
        tg_strbuf_str(&h, "]}");
        off += bytes;
    }
    tg_strbuf_str(&h, "}");
    while (!h.oom && h.n % 8) tg_strbuf_str(&h, " ");
    if (h.oom) {
        free(h.p);
        tg_set_error("safetensors_save: %s: out of memory", path);
        return -1;
    }

    tg_atomic_file af;
    if (tg_atomic_begin(&af, path, "safetensors_save") != 0) {
        free(h.p);
        return -1;
    }
    unsigned char len[8];
    for (int k = 0; k < 8; k++) len[k] = (unsigned char)((uint64_t)h.n >> (8 * k));
    int ok = fwrite(len, 1, 8, af.f) == 8 && fwrite(h.p, 1, h.n, af.f) == h.n;
    free(h.p);
    for (int i = 0; ok && i < params->n; i++) {
        const tg_tensor *t = params->items[i].t;
        int64_t bad = 0;
        int rc = write_values(af.f, t->data, t->size, dtype, &bad);
        if (rc > 0) {
            tg_set_error("safetensors_save: %s: %s: value %g at flat index %lld overflows %s (largest finite %g)", path,
                         params->items[i].name, (double)t->data[bad], (long long)bad, dtype,
                         strcmp(dtype, "F16") == 0 ? 65504.0 : 3.3895313892515355e38);
            tg_atomic_abort(&af);
            return -1;
        }
        ok = rc == 0;
    }
    if (!ok) {
        tg_set_error("safetensors_save: %s: write error: %s", path, strerror(errno));
        tg_atomic_abort(&af);
        return -1;
    }
    return tg_atomic_commit(&af, "safetensors_save");
}

/* ---- public API ----------------------------------------------------------- */
int tg_safetensors_find(const tg_safetensors *st, const char *name) {
    if (!st || !name || !st->by_name) return -1;
    int lo = 0, hi = st->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(st->entries[st->by_name[mid]].name, name);
        if (c == 0) return st->by_name[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

void tg_safetensors_close(tg_safetensors *st) {
    if (!st) return;
    tg_sys_free(st->entries);
    tg_sys_free(st->by_name);
    tg_sys_free(st->blob);
    memset(st, 0, sizeof *st);
}

static uint64_t le64(const unsigned char *b) {
    uint64_t v = 0;
    for (int k = 7; k >= 0; k--) v = (v << 8) | b[k];
    return v;
}

int tg_safetensors_parse(unsigned char *blob, size_t size, const char *name, tg_safetensors *st) {
    if (!st) {
        tg_sys_free(blob);
        tg_set_error("safetensors_open: NULL result");
        return -1;
    }
    memset(st, 0, sizeof *st);
    st->blob = blob;
    st->blob_size = size;
    if (!blob) {
        tg_set_error("safetensors_open: %s: NULL buffer", name);
        return -1;
    }

    tg_json j = {0};
    if (size < 8) {
        tg_json_fail(&j, "file is %zu bytes, too short to hold the 8-byte header length (truncated?)", size);
    } else {
        uint64_t n = le64(blob);
        if (n > ST_MAX_HEADER) {
            tg_json_fail(&j, "header length %llu is larger than the 100 MB limit (corrupt file?)",
                         (unsigned long long)n);
        } else if (n > size - 8) {
            tg_json_fail(&j, "header length %llu is larger than the %zu bytes after it (truncated?)",
                         (unsigned long long)n, size - 8);
        } else if (!tg_json_valid_utf8(blob + 8, (size_t)n)) {
            tg_json_fail(&j, "header is not valid UTF-8");
        } else {
            j.start = j.p = (const char *)blob + 8;
            j.end = j.start + n;
            st->data = blob + 8 + n;
            st->data_size = size - 8 - (size_t)n;
            if (parse_header(&j, st) == 0 && index_names(&j, st) == 0) check_entries(&j, st);
        }
    }
    if (j.why[0]) {
        tg_set_error("safetensors_open: %s: %s", name, j.why);
        tg_safetensors_close(st);
        return -1;
    }
    return 0;
}

int tg_safetensors_open(const char *path, tg_safetensors *st) {
    unsigned char *blob;
    size_t size;
    if (!st) {
        tg_set_error("safetensors_open: NULL result");
        return -1;
    }
    memset(st, 0, sizeof *st);
    if (!path) {
        tg_set_error("safetensors_open: NULL path");
        return -1;
    }
    if (tg_read_file(path, "safetensors_open", &blob, &size) != 0) return -1;
    return tg_safetensors_parse(blob, size, path, st);
}

/* Value k of entry e, decoded from little-endian bytes explicitly: right
 * on any host, and no unaligned loads. */
static double value_at(const tg_safetensors *st, const tg_st_entry *e, int64_t k) {
    const unsigned char *b = st->data + e->begin;
    if (e->dtype[0] == 'B' || strcmp(e->dtype, "F16") == 0) { /* BF16, F16: exact in float */
        uint16_t h = (uint16_t)(b[2 * k] | b[2 * k + 1] << 8);
        return e->dtype[0] == 'B' ? tg__bf16_to_float(h) : tg__f16_to_float(h);
    }
    if (strcmp(e->dtype, "F32") == 0) {
        b += 4 * k;
        uint32_t u = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    uint64_t u = le64(b + 8 * k);
    double d;
    memcpy(&d, &u, 8);
    return d;
}

int tg_safetensors_read(const tg_safetensors *st, int i, tg_real *out) {
    if (!st || !out || i < 0 || i >= st->n) {
        tg_set_error("safetensors_read: %s", !st || !out ? "NULL argument" : "index out of range");
        return -1;
    }
    const tg_st_entry *e = &st->entries[i];
    for (int64_t k = 0; k < e->numel; k++) out[k] = (tg_real)value_at(st, e, k);
    return 0;
}

int64_t tg_safetensors_nonfinite(const tg_safetensors *st, int i) {
    if (!st || i < 0 || i >= st->n) return 0;
    int64_t bad = 0;
    for (int64_t k = 0; k < st->entries[i].numel; k++) {
        double v = value_at(st, &st->entries[i], k);
        bad += !(v - v == 0); /* NaN and +-Inf give NaN */
    }
    return bad;
}

long tg_safetensors_meta_key(const tg_safetensors *st, int i, char *key, size_t cap) {
    if (!st || !st->metadata || i < 0 || !key || cap == 0) return -1;
    tg_json j = {0};
    j.start = j.p = st->metadata;
    j.end = st->metadata + st->metadata_len;
    /* The object was validated at open, so the walk cannot fail. */
    tg_json_expect(&j, '{');
    tg_json_skip_ws(&j);
    for (int k = 0; j.p < j.end && *j.p != '}'; k++) {
        size_t l;
        tg_json_string(&j, key, cap, &l);
        if (k == i) return (long)l;
        tg_json_expect(&j, ':');
        tg_json_string(&j, NULL, 0, NULL);
        tg_json_skip_ws(&j);
        if (j.p < j.end && *j.p == ',') j.p++;
        tg_json_skip_ws(&j);
    }
    key[0] = 0;
    return -1;
}

long tg_safetensors_meta(const tg_safetensors *st, const char *key, char *out, size_t cap) {
    if (!st || !key || !st->metadata) return -1;
    tg_json j = {0};
    j.start = j.p = st->metadata;
    j.end = st->metadata + st->metadata_len;
    size_t klen = strlen(key);
    char *k = tg_sys_alloc(klen + 2);
    if (!k) return -1;
    long found = -1;
    /* The object was validated at open, so the walk cannot fail. */
    tg_json_expect(&j, '{');
    tg_json_skip_ws(&j);
    while (j.p < j.end && *j.p != '}') {
        size_t l, vl;
        tg_json_string(&j, k, klen + 2, &l);
        tg_json_expect(&j, ':');
        if (l == klen && strcmp(k, key) == 0) { /* a later one wins, as in Python's json and Rust's serde map */
            tg_json_string(&j, out, cap, &vl);
            found = (long)vl;
        } else {
            tg_json_string(&j, NULL, 0, NULL);
        }
        tg_json_skip_ws(&j);
        if (j.p < j.end && *j.p == ',') j.p++;
        tg_json_skip_ws(&j);
    }
    tg_sys_free(k);
    return found;
}
