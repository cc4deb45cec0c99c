/* What only the float build shows (run by `make test` before the double
 * suite): tg_gradcheck there fails with a hint to use the double build
 * instead of failing silently (issue 10). */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "tgrad.h"

static tg_tensor *f_exp(tg_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return tg_exp(in[0]);
}

Test(float_build, gradcheck_says_to_use_the_double_build) {
    if (sizeof(tg_real) != 4) cr_skip_test("float build only");
    tg_tensor *x = tg_from_array(TG_SHAPE(3), (tg_real[]){0.5f, 1.0f, 1.5f});
    tg_set_requires_grad(x, true);
    tg_gradcheck_result r;
    cr_expect_not(tg_gradcheck(f_exp, &x, 1, NULL, 1e-3, 1e-6, &r), "float differences cannot reach 1e-6");
    const char *e = tg_last_error();
    cr_assert_not_null(e);
    cr_expect(strstr(e, "double build"), "%s", e);
    tg_free(x);
}

/* The decoder's KV cache in float: each step's logits equal the full
 * forward's to 1e-5 relative (the double suite, tests/test_decoder.c, checks 1e-12). */
Test(float_build, decoder_cached_logits_equal_full_forward) {
    if (sizeof(tg_real) != 4) cr_skip_test("float build only");
    tg_decoder_config cfg = tg_decoder_config_default(65, 64, 4, 4, 64);
    tg_rng rng = tg_rng_new(1);
    tg_decoder *m = tg_decoder_new(&cfg, &rng);
    cr_assert_not_null(m, "%s", tg_last_error());
    for (int64_t i = 0; i < m->wte->weight->size; i++) m->wte->weight->data[i] *= 10; /* logits up to ~10 */
    tg_decoder_train(m, false);
    int seq[64];
    for (int i = 0; i < 64; i++) seq[i] = (i * 17 + 5) % 65;
    tg_decoder_cache *c = tg_decoder_cache_new(m);
    tg_scope_begin();
    tg_tensor *full = tg_decoder_forward(m, seq, 1, 64);
    cr_assert_not_null(full, "%s", tg_last_error());
    for (int p = 0, n = 10; p < 64; p += n, n = 1) {
        tg_tensor *l = tg_decoder_forward_cached(m, c, seq + p, n);
        cr_assert_not_null(l, "%s", tg_last_error());
        for (int i = 0; i < n * 65; i++)
            cr_expect(fabs((double)l->data[i] - (double)full->data[p * 65 + i]) <=
                          1e-5 * fmax(1, fabs((double)l->data[i])),
                      "position %d logit %d: %g vs %g", p + i / 65, i % 65, (double)l->data[i],
                      (double)full->data[p * 65 + i]);
    }
    tg_scope_end();
    tg_decoder_cache_free(c);
    tg_decoder_free(m);
}

/* GELU tanh's float path (its own vectorisable exp, kernels.h) against the
 * tanh formula in double, values and derivative, over [-20, 20]. */
Test(float_build, gelu_tanh_matches_the_tanh_formula) {
    if (sizeof(tg_real) != 4) cr_skip_test("float build only");
    enum { N = 4001 };
    tg_tensor *x = tg_empty(TG_SHAPE(N));
    for (int i = 0; i < N; i++) x->data[i] = (tg_real)(-20 + 40.0 * i / (N - 1));
    tg_set_requires_grad(x, true);
    tg_scope_begin();
    tg_tensor *y = tg_gelu_tanh(x);
    cr_assert_not_null(y);
    cr_assert_eq(tg_backward(tg_sum_all(y)), 0);
    for (int i = 0; i < N; i++) {
        double v = x->data[i], t = tanh(0.7978845608028654 * (v + 0.044715 * v * v * v));
        double want = 0.5 * v * (1 + t);
        double dwant = 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * 0.7978845608028654 * (1 + 3 * 0.044715 * v * v);
        cr_expect(fabs(y->data[i] - want) <= 1e-6 + 1e-6 * fabs(want), "x %g: %g, want %g", v, (double)y->data[i],
                  want);
        cr_expect(fabs(x->grad->data[i] - dwant) <= 3e-6, "x %g: dy/dx %g, want %g", v, (double)x->grad->data[i],
                  dwant);
    }
    tg_scope_end();
    tg_free(x);
}
