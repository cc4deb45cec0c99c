/* The safetensors reader and writer (io/safetensors.c): the exact byte
 * layout (read back raw), metadata, a header laid out like Python's
 * json.dumps, and for every kind of bad file (truncated at many points,
 * corrupt JSON, an unknown dtype, a header length past the end,
 * inconsistent offsets) a rejection that names the problem. */
#include "io_test_util.h"
#include "test_util.h"
#include "tensor/half.h"

TestSuite(safetensors, .fini = cleanup);

/* A parameter list holding t alone, named "w". */
static tg_params only_w(tg_tensor *t) {
    tg_params p;
    tg_params_init(&p);
    tg_params_add(&p, NULL, "w", t);
    return p;
}

Test(safetensors, exact_layout) {
    tmpdir();
    tg_tensor *w = tensor(TG_SHAPE(2, 3), 0.5);
    tg_params p = only_w(w);
    const char *path = in_dir("w.safetensors");
    cr_assert_eq(tg_checkpoint_save(path, &p, NULL), 0);

    size_t size;
    unsigned char *b = read_all(path, &size);
    const size_t es = sizeof(tg_real);
    char expect[128];
    int hl = snprintf(expect, sizeof expect, "{\"w\":{\"dtype\":\"%s\",\"shape\":[2,3],\"data_offsets\":[0,%zu]}}",
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

Test(safetensors, layout_of_a_model_read_raw) {
    model m;
    const char *path = saved_model(&m, 3.0, "{\"epoch\": \"7\"}");

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

Test(safetensors, metadata_checked_and_escaped) {
    model m;
    const char *path = saved_model(&m, 1.0, "{\"note\": \"a \\\"q\\\" \\u00e9\\n\", \"k\": \"\"}");
    tg_safetensors st;
    cr_assert_eq(tg_safetensors_open(path, &st), 0);
    expect_meta_is(&st, "note", "a \"q\" \xc3\xa9\n");
    expect_meta_is(&st, "k", "");
    tg_safetensors_close(&st);
    /* A key given twice: the last value, as Python's json.loads (it was the first). */
    cr_assert_eq(tg_checkpoint_save(path, &m.p, "{\"step\": \"1\", \"lr\": \"3\", \"step\": \"20\"}"), 0);
    cr_assert_eq(tg_safetensors_open(path, &st), 0);
    expect_meta_is(&st, "step", "20");
    expect_meta_is(&st, "lr", "3");
    tg_safetensors_close(&st);

    static const char *const bad[] = {
        "{\"epoch\": 3}", /* values must be strings */
        "[\"a\"]",        /* not an object */
        "{\"a\": \"b\"",  /* unterminated */
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
Test(safetensors, f32_file_with_python_style_header) {
    tmpdir();
    tg_tensor *w = tensor(TG_SHAPE(2, 2), 0), *b = tensor(TG_SHAPE(3), 0);
    tg_params p = only_w(w);
    tg_params_add(&p, NULL, "b", b);
    const float fw[4] = {0.5f, -1.25f, 3.0e-3f, 1e30f}, fb[3] = {7.0f, -0.1f, 2.5f};
    unsigned char data[28];
    memcpy(data, fb, 12); /* b first in the data, w second */
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

Test(safetensors, truncated_files_rejected) {
    tmpdir();
    model m, other;
    model_new(&m, 1.0);
    model_new(&other, 5.0);
    const char *path = in_dir("m.safetensors");
    cr_assert_eq(tg_checkpoint_save(path, &other.p, NULL), 0);
    size_t size;
    unsigned char *b = read_all(path, &size);
    size_t n = (size_t)le64(b);
    const size_t cuts[] = {0,        1,         7,                     /* inside the length */
                           8,        9,         8 + n / 2,  8 + n - 1, /* inside the header */
                           8 + n,    8 + n + 1, 8 + n + 20,            /* inside the data */
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

Test(safetensors, corrupt_json_rejected) {
    tmpdir();
    model m;
    model_new(&m, 1.0);
    static const char *const bad[] = {
        "{\"w\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}",      /* no closing brace */
        "{\"w\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]},}",    /* trailing comma */
        "{w:{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}",         /* unquoted key */
        "{'w':{'dtype':'F64','shape':[1],'data_offsets':[0,8]}}",               /* single quotes */
        "{\"w\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}} x",   /* garbage after */
        "{\"w\\q\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}",  /* bad escape */
        "{\"w\xff\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", /* not UTF-8 */
        "{\"w\":{\"dtype\":\"F64\",\"shape\":[1.0],\"data_offsets\":[0,8]}}",   /* fraction */
        "{\"w\":{\"dtype\":\"F64\",\"shape\":[-1],\"data_offsets\":[0,8]}}",    /* negative */
        "{\"w\":{\"dtype\":\"F64\",\"shape\":[01],\"data_offsets\":[0,8]}}",    /* leading zero */
        "{\"w\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0]}}",       /* one offset */
        "{\"w\":{\"dtype\":\"F64\",\"shape\":[1]}}",                            /* no offsets */
        "{\"w\":{\"dtype\":\"F64\",\"shape\":[1],\"shape\":[1],\"data_offsets\":[0,8]}}",
        ("{\"w\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]},"
         "\"w\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}"), /* duplicate name */
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
Test(safetensors, unsupported_dtype_rejected) {
    tmpdir();
    tg_tensor *w = tensor(TG_SHAPE(2), 0);
    tg_params p = only_w(w);
    model m = {.t = {w}, .p = p};
    const int64_t ints[2] = {1, 2};
    write_st(in_dir("i64.safetensors"), "{\"w\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]}}", ints, 16);
    expect_load_fails(&m, in_dir("i64.safetensors"), "'I64'", "w:");
    write_st(in_dir("f8.safetensors"), "{\"w\":{\"dtype\":\"F8_E4M3\",\"shape\":[2],\"data_offsets\":[0,2]}}", ints, 2);
    expect_load_fails(&m, in_dir("f8.safetensors"), "'F8_E4M3'", NULL);
    tg_safetensors st;
    tg_clear_error();
    cr_assert_eq(tg_safetensors_open(in_dir("i64.safetensors"), &st), -1);
    assert_error_has("safetensors_open");
    assert_error_has("I64");
    tg_params_free(&p);
    tg_free(w);
}

Test(safetensors, bad_header_length_rejected) {
    model m;
    const char *path = saved_model(&m, 1.0, NULL);
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
Test(safetensors, inconsistent_offsets_rejected) {
    tmpdir();
    tg_tensor *a = tensor(TG_SHAPE(2), 0), *b = tensor(TG_SHAPE(2), 1);
    tg_params p;
    tg_params_init(&p);
    tg_params_add(&p, NULL, "a", a);
    tg_params_add(&p, NULL, "b", b);
    model m = {.t = {a, b}, .p = p};
    const double d[5] = {1, 2, 3, 4, 5};
    struct {
        const char *h;
        size_t n;
        const char *why;
    } cases[] = {
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,8]}," /* too short for shape */
         "\"b\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[8,24]}}",
         24, "a: data_offsets [0, 8]"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]}," /* overlap */
         "\"b\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[8,24]}}",
         24, "overlaps"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]}," /* gap */
         "\"b\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[24,40]}}",
         40, "gap"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]}," /* extra bytes */
         "\"b\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[16,32]}}",
         40, "extra bytes"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[16,0]}," /* reversed */
         "\"b\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[16,32]}}",
         32, "a:"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]}," /* past the end */
         "\"b\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[32,48]}}",
         40, "b: data ends"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]},"
         "\"b\":{\"dtype\":\"F64\",\"shape\":[99999999999,99999999999,99999999999],"
         "\"data_offsets\":[16,32]}}",
         32, "b:"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        write_st(in_dir("o.safetensors"), cases[i].h, d, cases[i].n);
        expect_load_fails(&m, in_dir("o.safetensors"), cases[i].why, NULL);
    }
    tg_params_free(&p);
    tg_free(a);
    tg_free(b);
}

/* A header of n empty tensors "t0".."t<n-1>" (each [0], offsets [0, 0]). */
static void write_many(const char *path, int n, bool duplicate_last) {
    size_t cap = (size_t)n * 64 + 64, len = 0;
    char *h = malloc(cap);
    len += (size_t)snprintf(h + len, cap - len, "{");
    for (int i = 0; i < n; i++)
        len +=
            (size_t)snprintf(h + len, cap - len, "%s\"t%d\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}",
                             i ? "," : "", duplicate_last && i == n - 1 ? 0 : i);
    snprintf(h + len, cap - len, "}");
    write_st(path, h, NULL, 0);
    free(h);
}

/* Issue 10, defect 4: the duplicate-name check was pairwise, O(n^2): 160k
 * tensors (a 9 MB header) took 43 s. Now names are sorted, and a header
 * may hold at most TG_ST_MAX_ENTRIES entries. */
Test(safetensors, many_entries_are_checked_in_n_log_n, .timeout = 20) {
    tmpdir();
    const char *path = in_dir("many.safetensors");
    write_many(path, TG_ST_MAX_ENTRIES, false);
    tg_safetensors st;
    cr_assert_eq(tg_safetensors_open(path, &st), 0, "%s", tg_last_error());
    cr_expect_eq(st.n, TG_ST_MAX_ENTRIES);
    cr_expect_eq(tg_safetensors_find(&st, "t77777"), 77777);
    cr_expect_eq(tg_safetensors_find(&st, "t100000"), -1);
    tg_safetensors_close(&st);
    write_many(path, TG_ST_MAX_ENTRIES, true);
    cr_expect_eq(tg_safetensors_open(path, &st), -1);
    assert_error_has("t0: duplicate tensor name");
    write_many(path, 160000, false);
    cr_expect_eq(tg_safetensors_open(path, &st), -1);
    assert_error_has("more than 100000 tensors");
}

/* ---- BF16 and F16 ----------------------------------------------------------
 * Saved with tg_safetensors_save_dtype: 2 bytes a value, rounded to nearest
 * even (tensor/half.h), read back exactly into tg_real. */
static uint16_t le16(const unsigned char *b) { return (uint16_t)(b[0] | b[1] << 8); }

/* Saves w (one tensor) as dtype and returns the raw file; *data: its values. */
static unsigned char *save_raw(tg_tensor *w, const char *dtype, const char *name, const unsigned char **data) {
    tg_params p = only_w(w);
    cr_assert_eq(tg_safetensors_save_dtype(in_dir(name), &p, NULL, dtype), 0, "%s", tg_last_error());
    tg_params_free(&p);
    size_t size;
    unsigned char *b = read_all(in_dir(name), &size);
    uint64_t n = le64(b);
    cr_assert_eq(size, 8 + n + 2 * (size_t)w->size, "%s: 2 bytes a value", dtype);
    char want[64];
    snprintf(want, sizeof want, "\"dtype\":\"%s\"", dtype);
    char *head = calloc((size_t)n + 1, 1);
    memcpy(head, b + 8, (size_t)n);
    cr_assert(strstr(head, want) != NULL, "header '%s' lacks %s", head, want);
    free(head);
    *data = b + 8 + n;
    return b;
}

Test(safetensors, bf16_and_f16_round_trip) {
    tmpdir();
    tg_tensor *w = tensor(TG_SHAPE(3, 5), 0.25), *back = tensor(TG_SHAPE(3, 5), 0);
    w->data[0] = (tg_real)1.00390625;    /* 1 + 2^-8: a bf16 tie, to even 1 */
    w->data[1] = (tg_real)1.01171875;    /* 1 + 3 * 2^-8: a tie, up to 1 + 2^-6 */
    w->data[2] = (tg_real)1.00048828125; /* 1 + 2^-11: an F16 tie, to even 1 */
    w->data[3] = (tg_real)-65504;        /* the largest F16 */
    w->data[4] = (tg_real)6e-8;          /* an F16 subnormal */
    const char *dtypes[] = {"BF16", "F16"};
    for (int d = 0; d < 2; d++) {
        bool bf = d == 0;
        const unsigned char *v;
        unsigned char *raw = save_raw(w, dtypes[d], bf ? "bf16.safetensors" : "f16.safetensors", &v);
        for (int i = 0; i < 15; i++) {
            float f = (float)w->data[i];
            cr_assert_eq(le16(v + 2 * i), bf ? tg__bf16_from_float(f) : tg__f16_from_float(f), "%s value %d", dtypes[d],
                         i);
        }
        free(raw);
        tg_params p = only_w(back);
        cr_assert_eq(tg_checkpoint_load(in_dir(bf ? "bf16.safetensors" : "f16.safetensors"), &p), 0, "%s",
                     tg_last_error());
        for (int i = 0; i < 15; i++) {
            float f = (float)w->data[i];
            tg_real want = bf ? tg__bf16_round(f) : tg__f16_to_float(tg__f16_from_float(f));
            cr_assert_eq(back->data[i], want, "%s value %d: %g, want %g", dtypes[d], i, (double)back->data[i],
                         (double)want);
            cr_assert(fabs((double)back->data[i] - (double)w->data[i]) <=
                          fabs((double)w->data[i]) * (bf ? 0x1p-8 : 0x1p-11) + (bf ? 0 : 0x1p-25),
                      "%s value %d off by more than half an ulp", dtypes[d], i);
        }
        cr_assert_eq(back->data[0], bf ? 1 : (tg_real)1.00390625); /* F16 holds 1 + 2^-8 exactly */
        cr_assert_eq(back->data[1], bf ? (tg_real)1.015625 : (tg_real)1.01171875);
        cr_assert_eq(back->data[2], 1); /* both: a tie or below half an ulp, to 1 */
        tg_params_free(&p);
    }
    tg_free(w);
    tg_free(back);
}

Test(safetensors, bf16_and_f16_keep_inf_and_nan) {
    tmpdir();
    tg_tensor *w = tensor(TG_SHAPE(4), 0);
    w->data[0] = (tg_real)INFINITY;
    w->data[1] = (tg_real)-INFINITY;
    w->data[2] = (tg_real)NAN;
    w->data[3] = (tg_real)-0.0;
    const char *dtypes[] = {"BF16", "F16"};
    for (int d = 0; d < 2; d++) {
        const unsigned char *v;
        unsigned char *raw = save_raw(w, dtypes[d], "x.safetensors", &v);
        free(raw);
        tg_safetensors st;
        cr_assert_eq(tg_safetensors_open(in_dir("x.safetensors"), &st), 0, "%s", tg_last_error());
        cr_assert_str_eq(st.entries[0].dtype, dtypes[d]);
        tg_real got[4];
        cr_assert_eq(tg_safetensors_read(&st, 0, got), 0);
        cr_assert(isinf(got[0]) && got[0] > 0 && isinf(got[1]) && got[1] < 0, "%s: infinities", dtypes[d]);
        cr_assert(isnan(got[2]), "%s: NaN", dtypes[d]);
        cr_assert(got[3] == 0 && signbit(got[3]), "%s: -0", dtypes[d]);
        cr_assert_eq(tg_safetensors_nonfinite(&st, 0), 3);
        tg_safetensors_close(&st);
    }
    tg_free(w);
}

/* A finite value past the dtype's range would become an infinity: refused,
 * naming the tensor and the value, and the file left as it was. */
Test(safetensors, overflow_to_inf_refused) {
    tmpdir();
    tg_tensor *w = tensor(TG_SHAPE(3), 0);
    w->data[1] = (tg_real)70000;
    tg_params p = only_w(w);
    const char *path = in_dir("o.safetensors");
    cr_assert_eq(tg_safetensors_save(path, &p, NULL), 0);
    size_t before_size;
    unsigned char *before = read_all(path, &before_size);
    tg_clear_error();
    cr_assert_eq(tg_safetensors_save_dtype(path, &p, NULL, "F16"), -1);
    assert_error_has("overflows F16");
    assert_error_has("w:");
    assert_error_has("70000");
    size_t after_size;
    unsigned char *after = read_all(path, &after_size);
    cr_assert(after_size == before_size && memcmp(before, after, before_size) == 0, "file changed");
    cr_assert_eq(temp_files(), 0);
    /* the same value is fine in BF16 (float's range), as is an unknown dtype not */
    cr_assert_eq(tg_safetensors_save_dtype(path, &p, NULL, "BF16"), 0, "%s", tg_last_error());
    cr_assert_eq(tg_checkpoint_save_dtype(path, &p, NULL, "I8"), -1);
    assert_error_has("checkpoint_save");
    assert_error_has("'I8'");
    free(before);
    free(after);
    tg_params_free(&p);
    tg_free(w);
}

Test(safetensors, bf16_bad_sizes_rejected) {
    tmpdir();
    tg_tensor *w = tensor(TG_SHAPE(2), 0);
    tg_params p = only_w(w);
    model m = {.t = {w}, .p = p};
    const uint16_t h[3] = {0x3F80, 0x4000, 0};
    write_st(in_dir("b3.safetensors"), "{\"w\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,3]}}", h, 3);
    expect_load_fails(&m, in_dir("b3.safetensors"), "hold 3 bytes", "BF16 (2) needs 4");
    write_st(in_dir("h8.safetensors"), "{\"w\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,6]}}", h, 6);
    expect_load_fails(&m, in_dir("h8.safetensors"), "hold 6 bytes", "F16 (2) needs 4");
    /* and a good one, written as Python's safetensors would: 1.0 and 2.0 */
    write_st(in_dir("ok.safetensors"), "{\"w\": {\"dtype\": \"BF16\", \"shape\": [2], \"data_offsets\": [0, 4]}}", h,
             4);
    cr_assert_eq(tg_checkpoint_load(in_dir("ok.safetensors"), &p), 0, "%s", tg_last_error());
    cr_assert(w->data[0] == 1 && w->data[1] == 2);
    tg_params_free(&p);
    tg_free(w);
}
