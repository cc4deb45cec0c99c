/* Helpers shared by the tests of src/io (test_file.c, test_json.c,
 * test_safetensors.c, test_npy.c, test_checkpoint.c): a temporary directory
 * per test, raw file access, and a small model to save and load. */
#ifndef TG_IO_TEST_UTIL_H
#define TG_IO_TEST_UTIL_H

#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tgrad.h"

static char g_dir[64]; /* one per test process (Criterion forks each test) */

/* A fresh directory per test (Criterion runs each test in its own process). */
static inline const char *tmpdir(void) {
    strcpy(g_dir, "/tmp/tg_ckpt_XXXXXX");
    cr_assert_not_null(mkdtemp(g_dir));
    return g_dir;
}

/* Removes the test directory (it holds files and at most one level of
 * subdirectories); run after every test of the file-writing suites. */
static inline void remove_tree(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[512];
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (snprintf(p, sizeof p, "%s/%s", dir, e->d_name) >= (int)sizeof p) continue;
        if (unlink(p) != 0) remove_tree(p);
    }
    closedir(d);
    rmdir(dir);
}

static inline void cleanup(void) {
    if (g_dir[0]) {
        chmod(g_dir, 0755);
        remove_tree(g_dir);
    }
}

static inline const char *in_dir(const char *name) {
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name);
    return buf[k];
}

static inline unsigned char *read_all(const char *path, size_t *size) {
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

static inline void write_all(const char *path, const void *b, size_t n) {
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(b, 1, n, f), n);
    fclose(f);
}

static inline uint64_t le64(const unsigned char *b) {
    uint64_t v = 0;
    for (int k = 7; k >= 0; k--) v = (v << 8) | b[k];
    return v;
}

static inline bool file_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* Number of "*.tmp.*" files left in the test directory. */
static inline int temp_files(void) {
    DIR *d = opendir(g_dir);
    cr_assert_not_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) n++;
    closedir(d);
    return n;
}

static inline tg_tensor *tensor(int ndim, const int *shape, double seed) {
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

static inline void model_new(model *m, double seed) {
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

/* In a fresh temporary directory: the model made from seed, saved with the
 * given metadata to "m.safetensors"; returns that path. */
static inline const char *saved_model(model *m, double seed, const char *metadata) {
    tmpdir();
    model_new(m, seed);
    const char *path = in_dir("m.safetensors");
    cr_assert_eq(tg_checkpoint_save(path, &m->p, metadata), 0, "%s", tg_last_error());
    return path;
}

static inline void model_free(model *m) {
    for (int i = 0; i < 4; i++) tg_free(m->t[i]);
    tg_params_free(&m->p);
}

/* All values of a parameter list, to compare before/after. */
static inline tg_real *snapshot(const tg_params *p) {
    int64_t n = tg_params_numel(p), at = 0;
    tg_real *s = malloc((size_t)(n ? n : 1) * sizeof *s);
    for (int i = 0; i < p->n; i++) {
        memcpy(s + at, p->items[i].t->data, (size_t)p->items[i].t->size * sizeof *s);
        at += p->items[i].t->size;
    }
    return s;
}

static inline void assert_unchanged(const tg_params *p, const tg_real *snap) {
    int64_t at = 0;
    for (int i = 0; i < p->n; i++) {
        size_t bytes = (size_t)p->items[i].t->size * sizeof(tg_real);
        cr_assert(memcmp(snap + at, p->items[i].t->data, bytes) == 0, "%s changed by a failed load", p->items[i].name);
        at += p->items[i].t->size;
    }
}

static inline void assert_error_has(const char *what) {
    const char *e = tg_last_error();
    cr_assert_not_null(e, "no error recorded");
    cr_assert(strstr(e, what) != NULL, "error '%s' does not mention '%s'", e, what);
}

/* Loading path into m must fail, mention every string in `what` and leave
 * m unchanged. */
static inline void expect_load_fails(model *m, const char *path, const char *what1, const char *what2) {
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
static inline void write_st(const char *path, const char *header, const void *data, size_t n) {
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
static inline const char *real_dtype(void) { return TG_REAL_DTYPE; }

#endif
