/* Checkpoints (io/checkpoint.c): bit-identical round trips, and loads that
 * fail (wrong shape, missing or extra tensors, NaN weights) naming the
 * problem and leaving every model value as it was. */
#include "io_test_util.h"

TestSuite(checkpoint, .fini = cleanup);

Test(checkpoint, round_trip_bit_identical) {
    tmpdir();
    model a, b;
    model_new(&a, 1.0);
    model_new(&b, 2.0); /* same shapes, other values */
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

Test(checkpoint, empty_list) {
    tmpdir();
    tg_params p;
    tg_params_init(&p);
    const char *path = in_dir("empty.safetensors");
    cr_assert_eq(tg_checkpoint_save(path, &p, NULL), 0);
    size_t size;
    unsigned char *b = read_all(path, &size);
    cr_assert_eq(size, 16); /* what the reference writes: 8, "{}" + 6 spaces */
    cr_assert(memcmp(b, "\x08\0\0\0\0\0\0\0{}      ", 16) == 0);
    free(b);
    cr_assert_eq(tg_checkpoint_load(path, &p), 0);
}

Test(checkpoint, wrong_shape_rejected) {
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

Test(checkpoint, missing_and_extra_names_rejected) {
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

/* Issue 10, defect 6: an all-NaN checkpoint loaded and reported accuracy. */
Test(checkpoint, non_finite_weights_rejected) {
    tmpdir();
    model m, other;
    model_new(&m, 1.0);
    model_new(&other, 2.0);
    m.t[1]->data[3] = (tg_real)NAN;
    m.t[2]->data[0] = (tg_real)INFINITY;
    const char *path = in_dir("nan.safetensors");
    /* tg_checkpoint_save refuses them (below); the plain writer does not. */
    cr_assert_eq(tg_safetensors_save(path, &m.p, NULL), 0);
    expect_load_fails(&other, path, "NaN or infinite", NULL);
    model_free(&m);
    model_free(&other);
}

/* A checkpoint that could not be loaded is never written: a NaN or infinite
 * value is refused before any file is made, naming the tensor, the index
 * and the value, and the good file at the path stays byte for byte. */
Test(checkpoint, save_refuses_non_finite) {
    model m;
    const char *saved = saved_model(&m, 1.0, NULL);
    char path[256];
    snprintf(path, sizeof path, "%s", saved);
    size_t n;
    unsigned char *old = read_all(path, &n);
    const struct {
        int t, k;
        double x;
        const char *what;
    } cases[] = {{1, 3, NAN, "tensor 'blocks.0.W_q.weight' holds nan at index 3"},
                 {0, 19, INFINITY, "tensor 'embed.weight' holds inf at index 19"},
                 {3, 0, -INFINITY, "tensor 'temperature' holds -inf at index 0"},
                 {2, 1, -NAN, "tensor 'blocks.0.W_q.bias' holds nan at index 1"}};
    for (int i = 0; i < 4; i++) {
        tg_real keep = m.t[cases[i].t]->data[cases[i].k];
        m.t[cases[i].t]->data[cases[i].k] = (tg_real)cases[i].x;
        for (int fresh = 0; fresh < 2; fresh++) {
            const char *to = fresh ? in_dir("fresh.safetensors") : path;
            char want[512];
            snprintf(want, sizeof want, "checkpoint_save: %s: %s; nothing written", to, cases[i].what);
            tg_clear_error();
            cr_expect_eq(tg_checkpoint_save(to, &m.p, "{\"a\": \"b\"}"), -1, "saved %s", cases[i].what);
            cr_expect(tg_last_error() && strcmp(tg_last_error(), want) == 0, "error '%s', expected '%s'",
                      tg_last_error() ? tg_last_error() : "", want);
        }
        m.t[cases[i].t]->data[cases[i].k] = keep;
        size_t n2;
        unsigned char *now = read_all(path, &n2);
        cr_expect(n2 == n && memcmp(now, old, n) == 0, "a refused save changed the file (%s)", cases[i].what);
        free(now);
        cr_expect(!file_exists(in_dir("fresh.safetensors")));
        cr_expect_eq(temp_files(), 0);
    }
    cr_expect_eq(tg_checkpoint_save(path, &m.p, NULL), 0, "%s", tg_last_error());
    free(old);
    model_free(&m);
}
