/* Parameter lists, safetensors checkpoints and .npy files.
 *
 * Checkpoints: bit-identical round trips, the exact byte layout (read back
 * raw), atomic replacement, and for every kind of bad file (truncated at
 * many points, corrupt JSON, wrong shape, missing or extra tensors, an
 * unknown dtype, a header length past the end, inconsistent offsets) a
 * failed load that names the problem and leaves every model value as it
 * was. Hand-written files check that F32 data loads into a double build and
 * that a header laid out like Python's json.dumps (spaces, __metadata__,
 * keys in any order) is accepted. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tgrad.h"
#include "tgrad.h"

/* ---- helpers --------------------------------------------------------------- */
static char g_dir[64];

/* A fresh directory per test (Criterion runs each test in its own process). */
static const char *tmpdir(void)
{
    strcpy(g_dir, "/tmp/tg_ckpt_XXXXXX");
    cr_assert_not_null(mkdtemp(g_dir));
    return g_dir;
}

/* Removes the test directory (it holds files and at most one level of
 * subdirectories); run after every test of the file-writing suites. */
static void remove_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[512];
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (unlink(p) != 0) remove_tree(p);
    }
    closedir(d);
    rmdir(dir);
}

static void cleanup(void)
{
    if (g_dir[0]) {
        chmod(g_dir, 0755);
        remove_tree(g_dir);
    }
}

TestSuite(checkpoint, .fini = cleanup);
TestSuite(npy, .fini = cleanup);

static const char *in_dir(const char *name)
{
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name);
    return buf[k];
}

static unsigned char *read_all(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    cr_assert_eq(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    b[n] = 0;
    *size = (size_t)n;
    return b;
}

static void write_all(const char *path, const void *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(b, 1, n, f), n);
    fclose(f);
}

static uint64_t le64(const unsigned char *b)
{
    uint64_t v = 0;
    for (int k = 7; k >= 0; k--) v = (v << 8) | b[k];
    return v;
}

static bool file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* Number of "*.tmp.*" files left in the test directory. */
static int temp_files(void)
{
    DIR *d = opendir(g_dir);
    cr_assert_not_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) n++;
    closedir(d);
    return n;
}

static tg_tensor *tensor(int ndim, const int *shape, double seed)
{
    tg_tensor *t = tg_empty_persistent(ndim, shape);
    cr_assert_not_null(t);
    /* Values with full mantissas, negative numbers and a few specials. */
    for (int64_t i = 0; i < t->size; i++) t->data[i] = (tg_real)(sin(seed + 1.7 * (double)i) * 3.1);
    if (t->size > 2) t->data[1] = (tg_real)-0.0;
    if (t->size > 3) t->data[2] = (tg_real)1e-30;
    return t;
}

/* A small model: an embedding, one attention projection, a bias and a
 * 0-d temperature. */
typedef struct {
    tg_tensor *t[4];
    tg_params p;
} model;

static void model_new(model *m, double seed)
{
    m->t[0] = tensor(TG_SHAPE(5, 4), seed);
    m->t[1] = tensor(TG_SHAPE(4, 4), seed + 10);
    m->t[2] = tensor(TG_SHAPE(4), seed + 20);
    m->t[3] = tensor(0, (const int[]){0}, seed + 30);
    tg_params_init(&m->p);
    cr_assert_eq(tg_params_add(&m->p, NULL, "embed.weight", m->t[0]), 0);
    cr_assert_eq(tg_params_add(&m->p, "blocks.0.W_q", "weight", m->t[1]), 0);
    cr_assert_eq(tg_params_add(&m->p, "blocks.0.W_q", "bias", m->t[2]), 0);
    cr_assert_eq(tg_params_add(&m->p, "", "temperature", m->t[3]), 0);
}

static void model_free(model *m)
{
    for (int i = 0; i < 4; i++) tg_free(m->t[i]);
    tg_params_free(&m->p);
}

/* All values of a parameter list, to compare before/after. */
static tg_real *snapshot(const tg_params *p)
{
    int64_t n = tg_params_numel(p), at = 0;
    tg_real *s = malloc((size_t)(n ? n : 1) * sizeof *s);
    for (int i = 0; i < p->n; i++) {
        memcpy(s + at, p->items[i].t->data, (size_t)p->items[i].t->size * sizeof *s);
        at += p->items[i].t->size;
    }
    return s;
}

static void assert_unchanged(const tg_params *p, const tg_real *snap)
{
    int64_t at = 0;
    for (int i = 0; i < p->n; i++) {
        size_t bytes = (size_t)p->items[i].t->size * sizeof(tg_real);
        cr_assert(memcmp(snap + at, p->items[i].t->data, bytes) == 0,
                  "%s changed by a failed load", p->items[i].name);
        at += p->items[i].t->size;
    }
}

static void assert_error_has(const char *what)
{
    const char *e = tg_last_error();
    cr_assert_not_null(e, "no error recorded");
    cr_assert(strstr(e, what) != NULL, "error '%s' does not mention '%s'", e, what);
}

/* Loading path into m must fail, mention every string in `what` and leave
 * m unchanged. */
static void expect_load_fails(model *m, const char *path, const char *what1, const char *what2)
{
    tg_real *snap = snapshot(&m->p);
    tg_clear_error();
    cr_assert_eq(tg_checkpoint_load(path, &m->p), -1, "load of %s should fail", path);
    assert_error_has("checkpoint_load");
    if (what1) assert_error_has(what1);
    if (what2) assert_error_has(what2);
    assert_unchanged(&m->p, snap);
    free(snap);
}

/* A safetensors file from a header text (padded to 8 bytes) and raw data. */
static void write_st(const char *path, const char *header, const void *data, size_t n)
{
    size_t hl = strlen(header), padded = (hl + 7) / 8 * 8;
    unsigned char *b = calloc(8 + padded + n + 1, 1);
    for (int k = 0; k < 8; k++) b[k] = (unsigned char)((uint64_t)padded >> (8 * k));
    memcpy(b + 8, header, hl);
    memset(b + 8 + hl, ' ', padded - hl);
    if (n) memcpy(b + 8 + padded, data, n);
    write_all(path, b, 8 + padded + n);
    free(b);
}

/* The dtype a checkpoint of this build is written in. */
static const char *real_dtype(void) { return TG_REAL_DTYPE; }

/* ---- params ------------------------------------------------------------------ */
Test(params, add_get_numel)
{
    tg_tensor *a = tensor(TG_SHAPE(2, 3), 0), *b = tensor(TG_SHAPE(7), 1);
    tg_params p;
    tg_params_init(&p);
    cr_assert_eq(tg_params_add(&p, "enc", "w", a), 0);
    cr_assert_eq(tg_params_add(&p, NULL, "b", b), 0);
    cr_assert_eq(p.n, 2);
    cr_assert_str_eq(p.items[0].name, "enc.w");
    cr_assert_str_eq(p.items[1].name, "b");
    cr_assert_eq(tg_params_get(&p, "enc.w"), a);
    cr_assert_eq(tg_params_get(&p, "b"), b);
    cr_assert_null(tg_params_get(&p, "w"));
    cr_assert_null(tg_params_get(&p, "enc"));
    cr_assert_eq(tg_params_numel(&p), 13);
    tg_params_free(&p);
    cr_assert_eq(p.n, 0);
    cr_assert_null(p.items);
    tg_free(a);
    tg_free(b);
}

Test(params, duplicate_and_long_names_rejected)
{
    tg_tensor *a = tensor(TG_SHAPE(2), 0);
    tg_params p;
    tg_params_init(&p);
    cr_assert_eq(tg_params_add(&p, "layer", "w", a), 0);
    tg_clear_error();
    cr_assert_eq(tg_params_add(&p, NULL, "layer.w", a), -1);
    assert_error_has("params_add");
    assert_error_has("layer.w");
    cr_assert_eq(p.n, 1);

    char name[TG_PARAM_NAME_MAX + 1];
    memset(name, 'x', TG_PARAM_NAME_MAX - 1);
    name[TG_PARAM_NAME_MAX - 1] = 0;   /* 127 characters: the longest allowed */
    cr_assert_eq(tg_params_add(&p, NULL, name, a), 0);
    name[TG_PARAM_NAME_MAX - 2] = 0;   /* 126 + "a." prefix = 128: too long */
    tg_clear_error();
    cr_assert_eq(tg_params_add(&p, "a", name, a), -1);
    assert_error_has("params_add");
    assert_error_has("longer");
    cr_assert_eq(tg_params_add(&p, NULL, "", a), -1);
    cr_assert_eq(tg_params_add(&p, NULL, "n", NULL), -1);
    cr_assert_eq(p.n, 2);
    tg_params_free(&p);
    tg_free(a);
}

Test(params, grows_and_extends)
{
    tg_tensor *a = tensor(TG_SHAPE(3), 0);
    tg_params inner, outer;
    tg_params_init(&inner);
    tg_params_init(&outer);
    char name[32];
    for (int i = 0; i < 100; i++) {
        snprintf(name, sizeof name, "w%d", i);
        cr_assert_eq(tg_params_add(&inner, NULL, name, a), 0);
    }
    cr_assert_eq(inner.n, 100);
    cr_assert_eq(tg_params_numel(&inner), 300);
    cr_assert_eq(tg_params_extend(&outer, "blocks.0", &inner), 0);
    cr_assert_eq(tg_params_extend(&outer, "blocks.1", &inner), 0);
    cr_assert_eq(outer.n, 200);
    cr_assert_str_eq(outer.items[0].name, "blocks.0.w0");
    cr_assert_str_eq(outer.items[199].name, "blocks.1.w99");
    cr_assert_eq(tg_params_get(&outer, "blocks.1.w42"), a);
    /* A clash anywhere: nothing is appended. */
    tg_clear_error();
    cr_assert_eq(tg_params_extend(&outer, "blocks.1", &inner), -1);
    assert_error_has("duplicate");
    cr_assert_eq(outer.n, 200);
    /* No prefix keeps the names. */
    cr_assert_eq(tg_params_extend(&outer, NULL, &inner), 0);
    cr_assert_eq(tg_params_get(&outer, "w7"), a);
    tg_params_free(&inner);
    tg_params_free(&outer);
    tg_free(a);
}

/* ---- checkpoint: good files ------------------------------------------------- */
Test(checkpoint, round_trip_bit_identical)
{
    tmpdir();
    model a, b;
    model_new(&a, 1.0);
    model_new(&b, 2.0);   /* same shapes, other values */
    const char *path = in_dir("model.safetensors");
    cr_assert_eq(tg_checkpoint_save(path, &a.p, NULL), 0, "%s", tg_last_error());
    cr_assert_eq(tg_checkpoint_load(path, &b.p), 0, "%s", tg_last_error());
    for (int i = 0; i < 4; i++)
        cr_assert(memcmp(a.t[i]->data, b.t[i]->data, (size_t)a.t[i]->size * sizeof(tg_real)) == 0,
                  "%s differs after the round trip", a.p.items[i].name);
    /* Saving again over the file replaces it. */
    b.t[0]->data[0] = (tg_real)42.5;
    cr_assert_eq(tg_checkpoint_save(path, &b.p, NULL), 0);
    cr_assert_eq(tg_checkpoint_load(path, &a.p), 0);
    cr_assert_eq(a.t[0]->data[0], (tg_real)42.5);
    cr_assert_eq(temp_files(), 0);
    model_free(&a);
    model_free(&b);
}

Test(checkpoint, exact_layout)
{
    tmpdir();
    tg_tensor *w = tensor(TG_SHAPE(2, 3), 0.5);
    tg_params p;
    tg_params_init(&p);
    tg_params_add(&p, NULL, "w", w);
    const char *path = in_dir("w.safetensors");
    cr_assert_eq(tg_checkpoint_save(path, &p, NULL), 0);

    size_t size;
    unsigned char *b = read_all(path, &size);
    const size_t es = sizeof(tg_real);
    char expect[128];
    int hl = snprintf(expect, sizeof expect,
                      "{\"w\":{\"dtype\":\"%s\",\"shape\":[2,3],\"data_offsets\":[0,%zu]}}",
                      real_dtype(), 6 * es);
    uint64_t n = le64(b);
    cr_assert_eq(n % 8, 0, "header not padded to 8 bytes");
    cr_assert(n >= (uint64_t)hl && n < (uint64_t)hl + 8);
    cr_assert(memcmp(b + 8, expect, (size_t)hl) == 0, "header is '%.*s'", (int)n, b + 8);
    for (uint64_t k = (uint64_t)hl; k < n; k++) cr_assert_eq(b[8 + k], ' ');
    cr_assert_eq(size, 8 + n + 6 * es);
    /* The data: little-endian values in C order. */
    for (int i = 0; i < 6; i++) {
        const unsigned char *v = b + 8 + n + (size_t)i * es;
        if (es == 8) {
            uint64_t u = le64(v);
            double d;
            memcpy(&d, &u, 8);
            cr_assert(memcmp(&d, &w->data[i], 8) == 0);
        } else {
            uint32_t u = (uint32_t)v[0] | (uint32_t)v[1] << 8 | (uint32_t)v[2] << 16 | (uint32_t)v[3] << 24;
            float f;
            memcpy(&f, &u, 4);
            cr_assert(memcmp(&f, &w->data[i], 4) == 0);
        }
    }
    free(b);
    tg_params_free(&p);
    tg_free(w);
}

Test(checkpoint, layout_of_a_model_read_raw)
{
    tmpdir();
    model m;
    model_new(&m, 3.0);
    const char *path = in_dir("m.safetensors");
    cr_assert_eq(tg_checkpoint_save(path, &m.p, "{\"epoch\": \"7\"}"), 0, "%s", tg_last_error());

    size_t size;
    unsigned char *raw = read_all(path, &size);
    uint64_t n = le64(raw);
    cr_assert_eq(n % 8, 0);
    cr_assert_eq(raw[8], '{');

    tg_safetensors st;
    cr_assert_eq(tg_safetensors_open(path, &st), 0, "%s", tg_last_error());
    cr_assert_eq(st.n, 4);
    cr_assert_eq(st.data, st.blob + 8 + n);
    cr_assert_eq(st.data_size, size - 8 - n);
    uint64_t at = 0;
    for (int i = 0; i < 4; i++) {
        const tg_st_entry *e = &st.entries[i];
        const tg_tensor *t = m.t[i];
        cr_assert_str_eq(e->name, m.p.items[i].name, "entries in list order");
        cr_assert_str_eq(e->dtype, real_dtype());
        cr_assert_eq(e->ndim, t->ndim);
        for (int k = 0; k < t->ndim; k++) cr_assert_eq(e->shape[k], t->shape[k]);
        cr_assert_eq(e->numel, t->size);
        cr_assert_eq(e->begin, at);
        cr_assert_eq(e->end, at + (uint64_t)t->size * sizeof(tg_real));
        at = e->end;
        /* Raw bytes at the offsets are the values (little-endian host). */
        cr_assert(memcmp(raw + 8 + n + e->begin, t->data, (size_t)(e->end - e->begin)) == 0);
        tg_real *out = malloc((size_t)t->size * sizeof *out);
        cr_assert_eq(tg_safetensors_read(&st, i, out), 0);
        cr_assert(memcmp(out, t->data, (size_t)t->size * sizeof *out) == 0);
        free(out);
    }
    cr_assert_eq(at, st.data_size);
    char v[16];
    cr_assert_eq(tg_safetensors_meta(&st, "epoch", v, sizeof v), 1);
    cr_assert_str_eq(v, "7");
    cr_assert_eq(tg_safetensors_meta(&st, "nope", v, sizeof v), -1);
    cr_assert_eq(tg_safetensors_find(&st, "temperature"), 3);
    cr_assert_eq(st.entries[3].ndim, 0);
    cr_assert_eq(st.entries[3].numel, 1);
    tg_safetensors_close(&st);
    cr_assert_null(st.blob);
    free(raw);
    model_free(&m);
}

Test(checkpoint, metadata_checked_and_escaped)
{
    tmpdir();
    model m;
    model_new(&m, 1.0);
    const char *path = in_dir("m.safetensors");
    cr_assert_eq(tg_checkpoint_save(path, &m.p, "{\"note\": \"a \\\"q\\\" \\u00e9\\n\", \"k\": \"\"}"), 0,
                 "%s", tg_last_error());
    tg_safetensors st;
    cr_assert_eq(tg_safetensors_open(path, &st), 0);
    char v[32];
    cr_assert_eq(tg_safetensors_meta(&st, "note", v, sizeof v), 9);
    cr_assert_str_eq(v, "a \"q\" \xc3\xa9\n");
    cr_assert_eq(tg_safetensors_meta(&st, "k", v, sizeof v), 0);
    tg_safetensors_close(&st);

    static const char *const bad[] = {
        "{\"epoch\": 3}",                        /* values must be strings */
        "[\"a\"]",                               /* not an object */
        "{\"a\": \"b\"",                         /* unterminated */
        "{\"a\": \"b\"}, \"x\": {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [0, 0]}",
        "",
    };
    const char *other = in_dir("other.safetensors");
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        tg_clear_error();
        cr_assert_eq(tg_checkpoint_save(other, &m.p, bad[i]), -1, "metadata '%s' accepted", bad[i]);
        assert_error_has("metadata");
        cr_assert(!file_exists(other));
    }
    cr_assert_eq(temp_files(), 0);
    model_free(&m);
}

/* A header written by hand the way Python's json.dumps lays it out, with
 * __metadata__, keys in another order, an unknown key, and F32 data: it
 * loads into the double build by conversion. */
Test(checkpoint, f32_file_with_python_style_header)
{
    tmpdir();
    tg_tensor *w = tensor(TG_SHAPE(2, 2), 0), *b = tensor(TG_SHAPE(3), 0);
    tg_params p;
    tg_params_init(&p);
    tg_params_add(&p, NULL, "w", w);
    tg_params_add(&p, NULL, "b", b);
    const float fw[4] = {0.5f, -1.25f, 3.0e-3f, 1e30f}, fb[3] = {7.0f, -0.1f, 2.5f};
    unsigned char data[28];
    memcpy(data, fb, 12);        /* b first in the data, w second */
    memcpy(data + 12, fw, 16);
    write_st(in_dir("f32.safetensors"),
             "{\"__metadata__\": {\"format\": \"np\"}, "
             "\"w\": {\"shape\": [2, 2], \"dtype\": \"F32\", \"data_offsets\": [12, 28], \"x\": [null, 1.5e3]},\n"
             " \"b\": {\"dtype\": \"F32\", \"shape\": [3], \"data_offsets\": [0, 12]}}",
             data, sizeof data);
    cr_assert_eq(tg_checkpoint_load(in_dir("f32.safetensors"), &p), 0, "%s", tg_last_error());
    for (int i = 0; i < 4; i++) cr_assert_eq(w->data[i], (tg_real)fw[i]);
    for (int i = 0; i < 3; i++) cr_assert_eq(b->data[i], (tg_real)fb[i]);

    /* F64 data loads as well (into float by rounding). */
    const double dw[4] = {0.1, 0.2, 0.3, 0.4}, db[3] = {1, 2, 3};
    unsigned char d64[56];
    memcpy(d64, dw, 32);
    memcpy(d64 + 32, db, 24);
    write_st(in_dir("f64.safetensors"),
             "{\"w\":{\"dtype\":\"F64\",\"shape\":[2,2],\"data_offsets\":[0,32]},"
             "\"b\":{\"dtype\":\"F64\",\"shape\":[3],\"data_offsets\":[32,56]}}",
             d64, sizeof d64);
    cr_assert_eq(tg_checkpoint_load(in_dir("f64.safetensors"), &p), 0, "%s", tg_last_error());
    for (int i = 0; i < 4; i++) cr_assert_eq(w->data[i], (tg_real)dw[i]);
    tg_params_free(&p);
    tg_free(w);
    tg_free(b);
}

Test(checkpoint, empty_list)
{
    tmpdir();
    tg_params p;
    tg_params_init(&p);
    const char *path = in_dir("empty.safetensors");
    cr_assert_eq(tg_checkpoint_save(path, &p, NULL), 0);
    size_t size;
    unsigned char *b = read_all(path, &size);
    cr_assert_eq(size, 16);   /* what the reference writes: 8, "{}" + 6 spaces */
    cr_assert(memcmp(b, "\x08\0\0\0\0\0\0\0{}      ", 16) == 0);
    free(b);
    cr_assert_eq(tg_checkpoint_load(path, &p), 0);
}

/* ---- checkpoint: atomic saves ----------------------------------------------- */
Test(checkpoint, failed_save_leaves_old_file)
{
    tmpdir();
    model m;
    model_new(&m, 1.0);
    const char *path = in_dir("m.safetensors");
    cr_assert_eq(tg_checkpoint_save(path, &m.p, NULL), 0);
    size_t n0, n1;
    unsigned char *before = read_all(path, &n0);

    /* Into a directory that does not exist. */
    tg_clear_error();
    cr_assert_eq(tg_checkpoint_save("/nonexistent-tg-dir/m.safetensors", &m.p, NULL), -1);
    assert_error_has("checkpoint_save: /nonexistent-tg-dir/m.safetensors");

    /* A list that cannot be saved (a NULL tensor, a bad name): checked
     * before the temporary is created. */
    tg_params bad;
    tg_params_init(&bad);
    tg_params_extend(&bad, NULL, &m.p);
    bad.items[2].t = NULL;
    tg_clear_error();
    cr_assert_eq(tg_checkpoint_save(path, &bad, NULL), -1);
    assert_error_has("blocks.0.W_q.bias");
    bad.items[2].t = m.t[2];
    strcpy(bad.items[1].name, "we\"ird");
    cr_assert_eq(tg_checkpoint_save(path, &bad, NULL), -1);
    tg_params_free(&bad);

    /* The target is a directory: the rename fails after the temporary was
     * written; the temporary is removed. */
    mkdir(in_dir("adir"), 0755);
    write_all(in_dir("adir/keep"), "x", 1);
    tg_clear_error();
    cr_assert_eq(tg_checkpoint_save(in_dir("adir"), &m.p, NULL), -1);
    assert_error_has("rename");

    /* A read-only directory (not for root, who may write anyway). */
    if (geteuid() != 0) {
        chmod(g_dir, 0555);
        cr_assert_eq(tg_checkpoint_save(path, &m.p, NULL), -1);
        assert_error_has("cannot create");
        chmod(g_dir, 0755);
    } else {
        cr_log_info("running as root: read-only directory case skipped");
    }

    unsigned char *after = read_all(path, &n1);
    cr_assert_eq(n0, n1);
    cr_assert(memcmp(before, after, n0) == 0, "old checkpoint changed by a failed save");
    cr_assert_eq(temp_files(), 0, "a temporary file was left behind");
    free(before);
    free(after);
    model_free(&m);
}

/* ---- checkpoint: bad files ---------------------------------------------------- */
Test(checkpoint, truncated_files_rejected)
{
    tmpdir();
    model m, other;
    model_new(&m, 1.0);
    model_new(&other, 5.0);
    const char *path = in_dir("m.safetensors");
    cr_assert_eq(tg_checkpoint_save(path, &other.p, NULL), 0);
    size_t size;
    unsigned char *b = read_all(path, &size);
    size_t n = (size_t)le64(b);
    const size_t cuts[] = {0, 1, 7,                       /* inside the length */
                           8, 9, 8 + n / 2, 8 + n - 1,    /* inside the header */
                           8 + n, 8 + n + 1, 8 + n + 20,  /* inside the data */
                           size - 9, size - 1};
    const char *cut = in_dir("cut.safetensors");
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        write_all(cut, b, cuts[i]);
        expect_load_fails(&m, cut, "truncated", "cut.safetensors");
    }
    free(b);
    model_free(&m);
    model_free(&other);
}

Test(checkpoint, corrupt_json_rejected)
{
    tmpdir();
    model m;
    model_new(&m, 1.0);
    static const char *const bad[] = {
        "{\"w\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}",     /* no closing brace */
        "{\"w\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]},}",   /* trailing comma */
        "{w:{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}",        /* unquoted key */
        "{'w':{'dtype':'F64','shape':[1],'data_offsets':[0,8]}}",              /* single quotes */
        "{\"w\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}} x",  /* garbage after */
        "{\"w\\q\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", /* bad escape */
        "{\"w\xff\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}",/* not UTF-8 */
        "{\"w\":{\"dtype\":\"F64\",\"shape\":[1.0],\"data_offsets\":[0,8]}}",  /* fraction */
        "{\"w\":{\"dtype\":\"F64\",\"shape\":[-1],\"data_offsets\":[0,8]}}",   /* negative */
        "{\"w\":{\"dtype\":\"F64\",\"shape\":[01],\"data_offsets\":[0,8]}}",   /* leading zero */
        "{\"w\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0]}}",      /* one offset */
        "{\"w\":{\"dtype\":\"F64\",\"shape\":[1]}}",                            /* no offsets */
        "{\"w\":{\"dtype\":\"F64\",\"shape\":[1],\"shape\":[1],\"data_offsets\":[0,8]}}",
        ("{\"w\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]},"
         "\"w\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}"),    /* duplicate name */
        "{\"__metadata__\":{\"a\":1},\"w\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}",
        "[]",
        "",
    };
    const char *path = in_dir("bad.safetensors");
    const double zero = 0;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        write_st(path, bad[i], &zero, 8);
        /* The parser itself refuses it (not merely the name check). */
        tg_safetensors st;
        cr_assert_eq(tg_safetensors_open(path, &st), -1, "case %zu parsed", i);
        expect_load_fails(&m, path, "bad.safetensors", NULL);
    }
    model_free(&m);
}

/* A file that is fine except for one tensor; each case names it. */
Test(checkpoint, wrong_shape_rejected)
{
    tmpdir();
    model m;
    model_new(&m, 1.0);
    tg_tensor *wrong = tensor(TG_SHAPE(4, 3), 9);
    tg_params p;
    tg_params_init(&p);
    tg_params_extend(&p, NULL, &m.p);
    p.items[1].t = wrong;
    cr_assert_eq(tg_checkpoint_save(in_dir("s.safetensors"), &p, NULL), 0);
    expect_load_fails(&m, in_dir("s.safetensors"), "blocks.0.W_q.weight", "shape (4,3) in file, (4,4) in model");
    tg_params_free(&p);
    tg_free(wrong);
    model_free(&m);
}

Test(checkpoint, missing_and_extra_names_rejected)
{
    tmpdir();
    model m;
    model_new(&m, 1.0);
    tg_params fewer, more;
    tg_params_init(&fewer);
    tg_params_init(&more);
    for (int i = 0; i < 4; i++)
        if (i != 2) tg_params_add(&fewer, NULL, m.p.items[i].name, m.t[i]);
    tg_params_extend(&more, NULL, &m.p);
    tg_params_add(&more, NULL, "blocks.0.W_k.weight", m.t[1]);
    cr_assert_eq(tg_checkpoint_save(in_dir("fewer.safetensors"), &fewer, NULL), 0);
    cr_assert_eq(tg_checkpoint_save(in_dir("more.safetensors"), &more, NULL), 0);
    expect_load_fails(&m, in_dir("fewer.safetensors"), "blocks.0.W_q.bias", "missing");
    expect_load_fails(&m, in_dir("more.safetensors"), "blocks.0.W_k.weight", "unexpected");
    tg_params_free(&fewer);
    tg_params_free(&more);
    model_free(&m);
}

Test(checkpoint, unsupported_dtype_rejected)
{
    tmpdir();
    tg_tensor *w = tensor(TG_SHAPE(2), 0);
    tg_params p;
    tg_params_init(&p);
    tg_params_add(&p, NULL, "w", w);
    model m = {.t = {w}, .p = p};
    const int64_t ints[2] = {1, 2};
    write_st(in_dir("i64.safetensors"), "{\"w\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]}}",
             ints, 16);
    expect_load_fails(&m, in_dir("i64.safetensors"), "'I64'", "w:");
    write_st(in_dir("f16.safetensors"), "{\"w\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]}}",
             ints, 4);
    expect_load_fails(&m, in_dir("f16.safetensors"), "'F16'", NULL);
    tg_safetensors st;
    tg_clear_error();
    cr_assert_eq(tg_safetensors_open(in_dir("i64.safetensors"), &st), -1);
    assert_error_has("safetensors_open");
    assert_error_has("I64");
    tg_params_free(&p);
    tg_free(w);
}

Test(checkpoint, bad_header_length_rejected)
{
    tmpdir();
    model m;
    model_new(&m, 1.0);
    const char *path = in_dir("m.safetensors");
    cr_assert_eq(tg_checkpoint_save(path, &m.p, NULL), 0);
    size_t size;
    unsigned char *b = read_all(path, &size);
    const uint64_t lens[] = {size, size - 7, (uint64_t)1 << 40, UINT64_MAX, 0, 3};
    for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) {
        for (int k = 0; k < 8; k++) b[k] = (unsigned char)(lens[i] >> (8 * k));
        write_all(in_dir("len.safetensors"), b, size);
        expect_load_fails(&m, in_dir("len.safetensors"), "len.safetensors", NULL);
    }
    expect_load_fails(&m, in_dir("no-such-file.safetensors"), "No such file", NULL);
    free(b);
    model_free(&m);
}

/* data_offsets must match dtype x shape and tile the data section. */
Test(checkpoint, inconsistent_offsets_rejected)
{
    tmpdir();
    tg_tensor *a = tensor(TG_SHAPE(2), 0), *b = tensor(TG_SHAPE(2), 1);
    tg_params p;
    tg_params_init(&p);
    tg_params_add(&p, NULL, "a", a);
    tg_params_add(&p, NULL, "b", b);
    model m = {.t = {a, b}, .p = p};
    const double d[5] = {1, 2, 3, 4, 5};
    struct { const char *h; size_t n; const char *why; } cases[] = {
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,8]},"     /* too short for shape */
         "\"b\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[8,24]}}", 24, "a: data_offsets [0, 8]"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]},"    /* overlap */
         "\"b\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[8,24]}}", 24, "overlaps"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]},"    /* gap */
         "\"b\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[24,40]}}", 40, "gap"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]},"    /* extra bytes */
         "\"b\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[16,32]}}", 40, "extra bytes"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[16,0]},"    /* reversed */
         "\"b\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[16,32]}}", 32, "a:"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]},"    /* past the end */
         "\"b\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[32,48]}}", 40, "b: data ends"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]},"
         "\"b\":{\"dtype\":\"F64\",\"shape\":[99999999999,99999999999,99999999999],"
         "\"data_offsets\":[16,32]}}", 32, "b:"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        write_st(in_dir("o.safetensors"), cases[i].h, d, cases[i].n);
        expect_load_fails(&m, in_dir("o.safetensors"), cases[i].why, NULL);
    }
    tg_params_free(&p);
    tg_free(a);
    tg_free(b);
}

/* ---- npy ---------------------------------------------------------------------- */
static void npy_round_trip(int ndim, const int *shape)
{
    tg_tensor *t = tensor(ndim, shape, 0.25);
    const char *path = in_dir("t.npy");
    cr_assert_eq(tg_npy_save(path, t), 0, "%s", tg_last_error());
    tg_tensor *u = tg_npy_load(path);
    cr_assert_not_null(u, "%s", tg_last_error());
    cr_assert(u->persistent);
    cr_assert_eq(u->ndim, t->ndim);
    for (int k = 0; k < t->ndim; k++) cr_assert_eq(u->shape[k], t->shape[k]);
    cr_assert_eq(u->size, t->size);
    cr_assert(memcmp(u->data, t->data, (size_t)t->size * sizeof(tg_real)) == 0);
    tg_free(t);
    tg_free(u);
    cr_assert_eq(temp_files(), 0);
}

Test(npy, round_trip_shapes)
{
    tmpdir();
    npy_round_trip(TG_SHAPE(3, 4));
    npy_round_trip(TG_SHAPE(5));
    npy_round_trip(TG_SHAPE(2, 3, 4));
    npy_round_trip(TG_SHAPE(1, 1, 1, 1, 1, 7));
    npy_round_trip(0, (const int[]){0});
}

Test(npy, header_layout)
{
    tmpdir();
    struct { int ndim; int shape[3]; const char *text; } cases[] = {
        {2, {3, 4}, "'shape': (3, 4), }"},
        {1, {5}, "'shape': (5,), }"},
        {0, {0}, "'shape': (), }"},
        {3, {2, 10, 100}, "'shape': (2, 10, 100), }"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        tg_tensor *t = tensor(cases[i].ndim, cases[i].shape, 0);
        cr_assert_eq(tg_npy_save(in_dir("h.npy"), t), 0);
        size_t size;
        unsigned char *b = read_all(in_dir("h.npy"), &size);
        cr_assert(memcmp(b, "\x93NUMPY\x01\x00", 8) == 0);
        size_t hl = (size_t)b[8] | (size_t)b[9] << 8;
        cr_assert_eq((10 + hl) % 64, 0, "header not 64-byte aligned");
        cr_assert_eq(b[10 + hl - 1], '\n');
        char descr[64];
        snprintf(descr, sizeof descr, "{'descr': '<f%d', 'fortran_order': False, ", (int)sizeof(tg_real));
        cr_assert(memcmp(b + 10, descr, strlen(descr)) == 0, "header: %.*s", (int)hl, b + 10);
        char *h = strndup((const char *)b + 10, hl);
        cr_assert(strstr(h, cases[i].text), "header '%s' lacks %s", h, cases[i].text);
        cr_assert_eq(size, 10 + hl + (size_t)t->size * sizeof(tg_real));
        cr_assert(memcmp(b + 10 + hl, t->data, (size_t)t->size * sizeof(tg_real)) == 0);
        free(h);
        free(b);
        tg_free(t);
    }
}

/* A .npy from a header text (padded as numpy does) and raw data. */
static void write_npy(const char *path, int major, const char *dict, const void *data, size_t n)
{
    size_t pre = major == 1 ? 10 : 12, dl = strlen(dict);
    size_t hl = (pre + dl + 1 + 63) / 64 * 64 - pre;
    unsigned char *b = calloc(pre + hl + n + 1, 1);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (unsigned char)major;
    for (size_t k = 0; k < pre - 8; k++) b[8 + k] = (unsigned char)(hl >> (8 * k));
    memcpy(b + pre, dict, dl);
    memset(b + pre + dl, ' ', hl - dl - 1);
    b[pre + hl - 1] = '\n';
    if (n) memcpy(b + pre + hl, data, n);
    write_all(path, b, pre + hl + n);
    free(b);
}

Test(npy, converts_f4_and_reads_version_2)
{
    tmpdir();
    const float f[6] = {1.5f, -2.25f, 1e-7f, 3e38f, 0.0f, -0.5f};
    write_npy(in_dir("f4.npy"), 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", f, 24);
    tg_tensor *t = tg_npy_load(in_dir("f4.npy"));
    cr_assert_not_null(t, "%s", tg_last_error());
    cr_assert_eq(t->ndim, 2);
    for (int i = 0; i < 6; i++) cr_assert_eq(t->data[i], (tg_real)f[i]);
    tg_free(t);

    const double d[3] = {0.1, 0.2, 0.3};
    write_npy(in_dir("v2.npy"), 2, "{\"shape\": (3L,), \"fortran_order\": False, \"descr\": \"<f8\"}", d, 24);
    t = tg_npy_load(in_dir("v2.npy"));
    cr_assert_not_null(t, "%s", tg_last_error());
    cr_assert_eq(t->ndim, 1);
    cr_assert_eq(t->shape[0], 3);
    for (int i = 0; i < 3; i++) cr_assert_eq(t->data[i], (tg_real)d[i]);
    tg_free(t);
}

Test(npy, bad_files_rejected)
{
    tmpdir();
    const double d[8] = {0};
    struct { const char *dict; size_t n; const char *why; } cases[] = {
        {"{'descr': '<f8', 'fortran_order': True, 'shape': (2, 2), }", 32, "fortran_order"},
        {"{'descr': '>f8', 'fortran_order': False, 'shape': (2, 2), }", 32, "big-endian"},
        {"{'descr': '>f4', 'fortran_order': False, 'shape': (2, 2), }", 16, "big-endian"},
        {"{'descr': '<i8', 'fortran_order': False, 'shape': (2, 2), }", 32, "'<i8'"},
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }", 31, "truncated"},
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }", 0, "truncated"},
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }", 40, "after the data"},
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1), }", 8, "dimensions"},
        {"{'descr': '<f8', 'fortran_order': False}", 8, "shape"},
        {"{'descr': '<f8', 'fortran_order': False, 'shape': [2], }", 16, "tuple"},
        {"{'descr': '<f8', 'fortran_order': maybe, 'shape': (2,), }", 16, "fortran_order"},
        {"not a dict", 0, "dict"},
    };
    const char *path = in_dir("bad.npy");
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        write_npy(path, 1, cases[i].dict, d, cases[i].n);
        tg_clear_error();
        cr_assert_null(tg_npy_load(path), "case %zu accepted", i);
        assert_error_has("npy_load: ");
        assert_error_has("bad.npy");
        assert_error_has(cases[i].why);
    }
    /* Truncated inside the preamble and inside the header; a wrong magic. */
    write_npy(path, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", d, 8);
    size_t size;
    unsigned char *b = read_all(path, &size);
    const size_t cuts[] = {0, 4, 9, 30, 63};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        write_all(in_dir("cut.npy"), b, cuts[i]);
        tg_clear_error();
        cr_assert_null(tg_npy_load(in_dir("cut.npy")), "cut at %zu accepted", cuts[i]);
        assert_error_has("cut.npy");
    }
    b[1] = 'X';
    write_all(in_dir("magic.npy"), b, size);
    cr_assert_null(tg_npy_load(in_dir("magic.npy")));
    assert_error_has("magic");
    free(b);
    cr_assert_null(tg_npy_load(in_dir("absent.npy")));
    assert_error_has("No such file");
    cr_assert_eq(tg_npy_save("/nonexistent-tg-dir/x.npy", &(tg_tensor){0}), -1);
}
