/* .npy files (io/npy.c): round trips of every rank, the exact header
 * layout, version 2.0 and '<f4' input, and bad files rejected. */
#include "io_test_util.h"

TestSuite(npy, .fini = cleanup);

static void npy_round_trip(int ndim, const int *shape) {
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

Test(npy, round_trip_shapes) {
    tmpdir();
    npy_round_trip(TG_SHAPE(3, 4));
    npy_round_trip(TG_SHAPE(5));
    npy_round_trip(TG_SHAPE(2, 3, 4));
    npy_round_trip(TG_SHAPE(1, 1, 1, 1, 1, 7));
    npy_round_trip(0, (const int[]){0});
}

Test(npy, header_layout) {
    tmpdir();
    struct {
        int ndim;
        int shape[3];
        const char *text;
    } cases[] = {
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
static void write_npy(const char *path, int major, const char *dict, const void *data, size_t n) {
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

Test(npy, converts_f4_and_reads_version_2) {
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

Test(npy, bad_files_rejected) {
    tmpdir();
    const double d[8] = {0};
    struct {
        const char *dict;
        size_t n;
        const char *why;
    } cases[] = {
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

/* An empty array is valid whatever its other sizes (numpy saves
 * np.zeros((0, 2**31 - 1, 2**31 - 1))); one the tensors cannot hold is
 * refused with the tensors' own reason, not "cannot allocate". */
Test(npy, empty_arrays_load_and_the_real_reason_is_kept) {
    tmpdir();
    const char *path = in_dir("empty.npy");
    static const struct {
        const char *shape;
        int ndim, dims[4];
    } ok[] = {{"(0, 2147483647, 2147483647)", 3, {0, 2147483647, 2147483647}},
              {"(2147483647, 2147483647, 0)", 3, {2147483647, 2147483647, 0}},
              {"(0,)", 1, {0}}};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        char dict[128];
        snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }", ok[i].shape);
        write_npy(path, 1, dict, NULL, 0);
        tg_tensor *t = tg_npy_load(path);
        cr_assert_not_null(t, "%s: %s", ok[i].shape, tg_last_error());
        cr_expect_eq(t->ndim, ok[i].ndim);
        cr_expect_eq(t->size, 0);
        for (int k = 0; k < t->ndim; k++) cr_expect_eq(t->shape[k], ok[i].dims[k], "%s", ok[i].shape);
        tg_free(t);
    }
    write_npy(path, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 2147483647, 2147483647, 2147483647), }",
              NULL, 0);
    tg_clear_error();
    cr_expect_null(tg_npy_load(path));
    assert_error_has("npy_load");
    assert_error_has("too large (more than 2^62 elements beside its size 0)");
}
