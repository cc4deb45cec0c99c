/* Saving and loading a parameter list as a safetensors file (layout in
 * checkpoint.h), and the two file helpers the writers share: whole-file
 * reads and atomic replacement (write a temporary, fsync, rename). */
#include "checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- file helpers --------------------------------------------------------- */
int tg_read_file(const char *path, const char *op, unsigned char **buf, size_t *size)
{
    *buf = NULL;
    *size = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        tg_set_error("%s: %s: %s", op, path, strerror(errno));
        return -1;
    }
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        tg_set_error("%s: %s: not a regular file", op, path);
        fclose(f);
        return -1;
    }
    size_t n = (size_t)sb.st_size;
    unsigned char *b = tg_sys_alloc(n ? n : 1);
    if (!b) {
        tg_set_error("%s: %s: out of memory for %zu bytes", op, path, n);
        fclose(f);
        return -1;
    }
    size_t got = fread(b, 1, n, f);
    int err = ferror(f);
    fclose(f);
    if (got != n || err) {
        tg_set_error("%s: %s: read error", op, path);
        tg_sys_free(b);
        return -1;
    }
    *buf = b;
    *size = n;
    return 0;
}

int tg_atomic_begin(tg_atomic_file *af, const char *path, const char *op)
{
    af->f = NULL;
    af->path = path;
    size_t len = strlen(path) + 32;
    af->tmp = tg_sys_alloc(len);
    if (!af->tmp) {
        tg_set_error("%s: %s: out of memory", op, path);
        return -1;
    }
    snprintf(af->tmp, len, "%s.tmp.%ld", path, (long)getpid());
    af->f = fopen(af->tmp, "wb");
    if (!af->f) {
        tg_set_error("%s: %s: cannot create %s: %s", op, path, af->tmp, strerror(errno));
        tg_sys_free(af->tmp);
        af->tmp = NULL;
        return -1;
    }
    return 0;
}

void tg_atomic_abort(tg_atomic_file *af)
{
    if (af->f) fclose(af->f);
    if (af->tmp) {
        remove(af->tmp);
        tg_sys_free(af->tmp);
    }
    af->f = NULL;
    af->tmp = NULL;
}

/* Makes the rename itself durable; best effort, a failure changes nothing
 * the caller could act on. */
static void sync_parent_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir;
    if (!slash) {
        dir = tg_sys_alloc(2);
        if (!dir) return;
        strcpy(dir, ".");
    } else {
        size_t n = slash == path ? 1 : (size_t)(slash - path);
        dir = tg_sys_alloc(n + 1);
        if (!dir) return;
        memcpy(dir, path, n);
        dir[n] = '\0';
    }
    int fd = open(dir, O_RDONLY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    tg_sys_free(dir);
}

int tg_atomic_commit(tg_atomic_file *af, const char *op)
{
    const char *why = NULL;
    int err = 0;
    if (ferror(af->f)) why = "write error", err = EIO;
    else if (fflush(af->f) != 0) why = "write error", err = errno;
    else if (fsync(fileno(af->f)) != 0) why = "fsync failed", err = errno;
    int rc = fclose(af->f);
    af->f = NULL;
    if (!why && rc != 0) why = "close failed", err = errno;
    if (!why && rename(af->tmp, af->path) != 0) why = "rename failed", err = errno;
    if (why) {
        tg_set_error("%s: %s: %s: %s", op, af->path, why, strerror(err));
        tg_atomic_abort(af);
        return -1;
    }
    tg_sys_free(af->tmp);
    af->tmp = NULL;
    sync_parent_dir(af->path);
    return 0;
}

/* ---- a growable string for the header -------------------------------------- */
typedef struct {
    char *s;
    size_t n, cap;
    bool oom;
} strbuf;

static void sb_put(strbuf *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *ns = tg_sys_alloc(cap);
        if (!ns) { b->oom = true; return; }
        if (b->n) memcpy(ns, b->s, b->n);
        tg_sys_free(b->s);
        b->s = ns;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}

static void sb_str(strbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_u64(strbuf *b, uint64_t v)
{
    char t[24];
    snprintf(t, sizeof t, "%llu", (unsigned long long)v);
    sb_str(b, t);
}

/* ---- save ----------------------------------------------------------------- */
/* Names go into JSON verbatim, so they are kept to printable ASCII other
 * than '"' and '\\'; dotted module paths always are. */
static const char *bad_name(const char *name)
{
    if (!*name) return "empty name";
    if (strcmp(name, "__metadata__") == 0) return "the name '__metadata__' is reserved";
    for (const char *c = name; *c; c++)
        if (*c < 0x20 || *c > 0x7E || *c == '"' || *c == '\\')
            return "names must be printable ASCII without '\"' or '\\'";
    return NULL;
}

/* Checks metadata_json is an object of strings by parsing it as the
 * header of an empty file: {"__metadata__": <it>}. */
static int check_metadata(const char *path, const char *meta)
{
    size_t ml = strlen(meta);
    static const char pre[] = "{\"__metadata__\":", post[] = "}";
    size_t n = sizeof pre - 1 + ml + sizeof post - 1;
    unsigned char *blob = tg_sys_alloc(8 + n);
    if (!blob) {
        tg_set_error("checkpoint_save: %s: out of memory", path);
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
        tg_set_error("checkpoint_save: %s: metadata must be a JSON object of strings: %s", path, why);
        return -1;
    }
    int extra = st.n;   /* text after the object, smuggling in a tensor entry */
    tg_safetensors_close(&st);
    if (extra) {
        tg_set_error("checkpoint_save: %s: metadata must be one JSON object of strings", path);
        return -1;
    }
    return 0;
}

/* Little-endian bytes of n values, in chunks. */
static int write_values(FILE *f, const tg_real *x, int64_t n)
{
    unsigned char buf[8 * 1024];
    const int es = (int)sizeof(tg_real);
    const int64_t chunk = (int64_t)(sizeof buf / sizeof(tg_real));
    for (int64_t at = 0; at < n; at += chunk) {
        int64_t m = n - at < chunk ? n - at : chunk;
        for (int64_t k = 0; k < m; k++) {
            uint64_t u;
            if (es == 4) {
                float v = (float)x[at + k];
                uint32_t w;
                memcpy(&w, &v, 4);
                u = w;
            } else {
                double v = (double)x[at + k];
                memcpy(&u, &v, 8);
            }
            for (int b = 0; b < es; b++) buf[k * es + b] = (unsigned char)(u >> (8 * b));
        }
        if (fwrite(buf, (size_t)es, (size_t)m, f) != (size_t)m) return -1;
    }
    return 0;
}

int tg_checkpoint_save(const char *path, const tg_params *params, const char *metadata_json)
{
    if (!path || !params) {
        tg_set_error("checkpoint_save: NULL %s", !path ? "path" : "params");
        return -1;
    }
    for (int i = 0; i < params->n; i++) {
        const tg_param *p = &params->items[i];
        const char *why = bad_name(p->name);
        if (why) {
            tg_set_error("checkpoint_save: %s: '%s': %s", path, p->name, why);
            return -1;
        }
        if (!p->t || (!p->t->data && p->t->size > 0)) {
            tg_set_error("checkpoint_save: %s: %s: NULL tensor", path, p->name);
            return -1;
        }
        for (int k = 0; k < i; k++)
            if (strcmp(params->items[k].name, p->name) == 0) {
                tg_set_error("checkpoint_save: %s: %s: duplicate name", path, p->name);
                return -1;
            }
    }
    if (metadata_json && check_metadata(path, metadata_json) != 0) return -1;

    /* Header: compact JSON like the reference writer, padded with spaces
     * so the data section starts 8-byte aligned. */
    strbuf h = {0};
    uint64_t off = 0;
    sb_str(&h, "{");
    if (metadata_json) {
        sb_str(&h, "\"__metadata__\":");
        sb_str(&h, metadata_json);
    }
    for (int i = 0; i < params->n; i++) {
        const tg_tensor *t = params->items[i].t;
        if (i || metadata_json) sb_str(&h, ",");
        sb_str(&h, "\"");
        sb_str(&h, params->items[i].name);
        sb_str(&h, "\":{\"dtype\":\"" TG_REAL_DTYPE "\",\"shape\":[");
        for (int k = 0; k < t->ndim; k++) {
            if (k) sb_str(&h, ",");
            sb_u64(&h, (uint64_t)t->shape[k]);
        }
        uint64_t bytes = (uint64_t)t->size * sizeof(tg_real);
        sb_str(&h, "],\"data_offsets\":[");
        sb_u64(&h, off);
        sb_str(&h, ",");
        sb_u64(&h, off + bytes);
        sb_str(&h, "]}");
        off += bytes;
    }
    sb_str(&h, "}");
    while (!h.oom && h.n % 8) sb_str(&h, " ");
    if (h.oom) {
        tg_sys_free(h.s);
        tg_set_error("checkpoint_save: %s: out of memory", path);
        return -1;
    }

    tg_atomic_file af;
    if (tg_atomic_begin(&af, path, "checkpoint_save") != 0) {
        tg_sys_free(h.s);
        return -1;
    }
    unsigned char len[8];
    for (int k = 0; k < 8; k++) len[k] = (unsigned char)((uint64_t)h.n >> (8 * k));
    int ok = fwrite(len, 1, 8, af.f) == 8 && fwrite(h.s, 1, h.n, af.f) == h.n;
    tg_sys_free(h.s);
    for (int i = 0; ok && i < params->n; i++) {
        const tg_tensor *t = params->items[i].t;
        ok = write_values(af.f, t->data, t->size) == 0;
    }
    if (!ok) {
        tg_set_error("checkpoint_save: %s: write error: %s", path, strerror(errno));
        tg_atomic_abort(&af);
        return -1;
    }
    return tg_atomic_commit(&af, "checkpoint_save");
}

/* ---- load ----------------------------------------------------------------- */
/* Appends ", name" to a list of at most a few names for a message. */
static void list_name(char *buf, size_t cap, int *count, const char *name)
{
    size_t n = strlen(buf);
    if (*count < 4 && n + strlen(name) + 3 < cap)
        snprintf(buf + n, cap - n, "%s%s", *count ? ", " : "", name);
    else if (*count == 4 && n + 6 < cap)
        snprintf(buf + n, cap - n, ", ...");
    (*count)++;
}

int tg_checkpoint_load(const char *path, const tg_params *params)
{
    if (!path || !params) {
        tg_set_error("checkpoint_load: NULL %s", !path ? "path" : "params");
        return -1;
    }
    tg_safetensors st;
    if (tg_safetensors_open(path, &st) != 0) {
        /* Same message, under this function's name. */
        char why[512];
        const char *e = tg_last_error();
        const char *pre = "safetensors_open: ";
        snprintf(why, sizeof why, "%s",
                 e && strncmp(e, pre, strlen(pre)) == 0 ? e + strlen(pre) : e ? e : path);
        tg_set_error("checkpoint_load: %s", why);
        return -1;
    }

    /* Every check first; the model is touched only when all pass. */
    int *idx = tg_sys_alloc((size_t)(params->n ? params->n : 1) * sizeof *idx);
    bool *used = tg_sys_calloc((size_t)(st.n ? st.n : 1), sizeof *used);
    char names[256] = "";
    int count = 0, rc = 0;
    if (!idx || !used) {
        tg_set_error("checkpoint_load: %s: out of memory", path);
        rc = -1;
        goto done;
    }
    for (int i = 0; i < params->n; i++) {
        const tg_param *p = &params->items[i];
        if (!p->t || (!p->t->data && p->t->size > 0)) {
            tg_set_error("checkpoint_load: %s: %s: NULL tensor in the parameter list", path, p->name);
            rc = -1;
            goto done;
        }
        idx[i] = tg_safetensors_find(&st, p->name);
        if (idx[i] < 0) list_name(names, sizeof names, &count, p->name);
        else used[idx[i]] = true;
    }
    if (count) {
        tg_set_error("checkpoint_load: %s: %d tensor%s of the model missing from the file: %s",
                     path, count, count > 1 ? "s" : "", names);
        rc = -1;
        goto done;
    }
    for (int j = 0; j < st.n; j++)
        if (!used[j]) list_name(names, sizeof names, &count, st.entries[j].name);
    if (count) {
        tg_set_error("checkpoint_load: %s: %d unexpected tensor%s in the file (not in the model): %s",
                     path, count, count > 1 ? "s" : "", names);
        rc = -1;
        goto done;
    }
    for (int i = 0; i < params->n; i++) {
        const tg_tensor *t = params->items[i].t;
        const tg_st_entry *e = &st.entries[idx[i]];
        bool same = e->ndim == t->ndim;
        for (int k = 0; same && k < t->ndim; k++) same = e->shape[k] == t->shape[k];
        if (!same) {
            char a[64], b[64];
            tg_set_error("checkpoint_load: %s: %s: shape %s in file, %s in model", path, e->name,
                         tg_shape_str(a, e->ndim, e->shape), tg_shape_str(b, t->ndim, t->shape));
            rc = -1;
            goto done;
        }
    }
    for (int i = 0; i < params->n; i++) tg_safetensors_read(&st, idx[i], params->items[i].t->data);

done:
    tg_sys_free(idx);
    tg_sys_free(used);
    tg_safetensors_close(&st);
    return rc;
}
