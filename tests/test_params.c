/* Parameter lists (tensor/params.h): names joined like a PyTorch
 * state_dict, duplicates and over-long names rejected, growth. */
#include "io_test_util.h"

Test(params, add_get_numel) {
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

Test(params, duplicate_and_long_names_rejected) {
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
    name[TG_PARAM_NAME_MAX - 1] = 0; /* 127 characters: the longest allowed */
    cr_assert_eq(tg_params_add(&p, NULL, name, a), 0);
    name[TG_PARAM_NAME_MAX - 2] = 0; /* 126 + "a." prefix = 128: too long */
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

Test(params, grows_and_extends) {
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
    assert_error_has("params_extend: duplicate");
    cr_assert_eq(outer.n, 200);
    /* No prefix keeps the names. */
    cr_assert_eq(tg_params_extend(&outer, NULL, &inner), 0);
    cr_assert_eq(tg_params_get(&outer, "w7"), a);
    tg_params_free(&inner);
    tg_params_free(&outer);
    tg_free(a);
}

/* tg_params_check_finite: the first NaN or infinite value in list order,
 * named with its tensor and index, for a training loop to stop on. */
Test(params, check_finite) {
    tg_tensor *a = tensor(TG_SHAPE(2, 3), 0), *b = tensor(TG_SHAPE(7), 1), *s = tensor(0, NULL, 2);
    tg_params p;
    tg_params_init(&p);
    cr_assert_eq(tg_params_add(&p, "enc", "w", a), 0);
    cr_assert_eq(tg_params_add(&p, NULL, "b", b), 0);
    cr_assert_eq(tg_params_add(&p, NULL, "scale", s), 0);
    tg_clear_error();
    cr_expect_eq(tg_params_check_finite(&p, "train"), 0);
    cr_expect_null(tg_last_error());
    b->data[6] = (tg_real)-INFINITY;
    cr_expect_eq(tg_params_check_finite(&p, "train"), -1);
    cr_expect_str_eq(tg_last_error(), "train: tensor 'b' holds -inf at index 6");
    a->data[4] = (tg_real)NAN;
    cr_expect_eq(tg_params_check_finite(&p, "step 12"), -1);
    cr_expect_str_eq(tg_last_error(), "step 12: tensor 'enc.w' holds nan at index 4");
    a->data[4] = 0;
    b->data[6] = 0;
    s->data[0] = (tg_real)INFINITY;
    cr_expect_eq(tg_params_check_finite(&p, "x"), -1);
    cr_expect_str_eq(tg_last_error(), "x: tensor 'scale' holds inf at index 0");
    cr_expect_eq(tg_params_check_finite(NULL, "x"), -1);
    cr_expect_str_eq(tg_last_error(), "x: NULL parameter list");
    s->data[0] = 1;
    tg_params empty;
    tg_params_init(&empty);
    cr_expect_eq(tg_params_check_finite(&empty, NULL), 0);
    tg_params_free(&p);
    tg_free(a);
    tg_free(b);
    tg_free(s);
}
