/* The fused attention's backward writes a fresh gradient of q, k and v
 * (tg_grad_begin: not zeroed) with acc + 0 rather than adding its sums to
 * a zeroed one (ops_attention.c: grads_begin, add_rows): the gradient of
 * an input that feeds the attention alone must be bit for bit the one
 * it gets when another op's backward (adding exact zeros) ran first and
 * the attention added to it. Through a projection (tg_attention_qkv: one
 * tensor for q, k and v) and three tensors (tg_attention); sequences of
 * one tile (backward_single), a few (whole entries or the two passes) and
 * a short one (the short path, which zeroes); fp32 products, and in the
 * float build bf16 (on AMX where it runs). q = k = v given as one tensor
 * (the gradient zeroed, each added) is checked against three copies. */
#include "test_util.h"

#include <string.h>

TestSuite(attention_grads, .init = scoped_test_begin, .fini = scoped_test_end);

typedef struct {
    int B, T, h, d;
    bool fused; /* tg_attention_qkv on [B, T, 3 h d], else tg_attention on three [B h, T, d] */
} grads_case;

/* x's gradient through y = x * 1 and the attention of y (split in three
 * for !fused); shared: y also feeds y * 0, whose backward runs first. */
static tg_tensor *x_grad(const grads_case *c, tg_tensor *x, const tg_tensor *R, bool shared) {
    tg_zero_grad(x);
    tg_mask causal = {NULL, 0, true};
    tg_tensor *y = tg_mul_scalar(x, 1), *out;
    if (c->fused) {
        out = tg_attention_qkv(y, c->h, causal, 0, NULL, NULL);
    } else {
        int64_t n = (int64_t)c->B * c->h * c->T * c->d;
        tg_tensor *q = tg_reshape(tg_slice(tg_reshape(y, TG_SHAPE(3, n)), 0, 0, 1), TG_SHAPE(c->B * c->h, c->T, c->d));
        tg_tensor *k = tg_reshape(tg_slice(tg_reshape(y, TG_SHAPE(3, n)), 0, 1, 2), TG_SHAPE(c->B * c->h, c->T, c->d));
        tg_tensor *v = tg_reshape(tg_slice(tg_reshape(y, TG_SHAPE(3, n)), 0, 2, 3), TG_SHAPE(c->B * c->h, c->T, c->d));
        out = tg_attention(q, k, v, causal, 0, NULL);
    }
    TG_REQUIRE(out);
    tg_tensor *loss = tg_sum_all(tg_mul(out, (tg_tensor *)R));
    if (shared) loss = tg_add(loss, tg_sum_all(tg_mul_scalar(y, 0)));
    cr_assert_eq(tg_backward(loss), 0, "%s", tg_last_error());
    return tg_clone(x->grad);
}

static void fresh_case(const grads_case *c) {
    tg_rng rng = tg_rng_new(5);
    tg_tensor *x = tg_randn(TG_SHAPE(c->B, c->T, 3 * c->h * c->d), &rng);
    tg_set_requires_grad(x, true);
    tg_tensor *R = c->fused ? tg_randn(TG_SHAPE(c->B, c->T, c->h * c->d), &rng)
                            : tg_randn(TG_SHAPE(c->B * c->h, c->T, c->d), &rng);
    tg_tensor *a = x_grad(c, x, R, false), *b = x_grad(c, x, R, true);
    for (int64_t i = 0; i < a->size; i++)
        cr_assert(memcmp(&a->data[i], &b->data[i], sizeof(tg_real)) == 0,
                  "B%d T%d h%d d%d fused %d: dx[%lld] fresh %a, added %a", c->B, c->T, c->h, c->d, c->fused,
                  (long long)i, (double)a->data[i], (double)b->data[i]);
}

static const grads_case CASES[] = {{2, 64, 2, 32, true},   {2, 128, 2, 32, true}, {1, 200, 2, 16, true},
                                   {2, 12, 2, 8, true},    {2, 64, 2, 32, false}, {2, 128, 2, 32, false},
                                   {1, 200, 2, 16, false}, {2, 12, 2, 8, false}};

static void all_cases(void) {
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) fresh_case(&CASES[i]);
}

Test(attention_grads, fresh_gradients_equal_added_ones) {
    int saved = tg_get_num_threads();
    for (int nt = 1; nt <= 2; nt++) {
        tg_set_num_threads(nt);
        all_cases();
#ifndef TG_DOUBLE
        tg_precision prev = tg_set_precision(TG_PREC_BF16);
        all_cases();
        tg_set_precision(prev);
#endif
    }
    tg_set_num_threads(saved);
}

/* tg_attention(y, y, y): one tensor's gradient, zeroed and added to three
 * times, against three copies' gradients summed (to rounding). */
Test(attention_grads, one_tensor_as_q_k_and_v) {
    tg_rng rng = tg_rng_new(9);
    tg_tensor *x = tg_randn(TG_SHAPE(4, 128, 16), &rng), *R = tg_randn(TG_SHAPE(4, 128, 16), &rng);
    tg_set_requires_grad(x, true);
    tg_mask causal = {NULL, 0, true};
    tg_tensor *y = tg_mul_scalar(x, 1);
    cr_assert_eq(tg_backward(tg_sum_all(tg_mul(tg_attention(y, y, y, causal, 0, NULL), R))), 0, "%s", tg_last_error());
    tg_tensor *one = tg_clone(x->grad);
    tg_zero_grad(x);
    tg_tensor *q = tg_mul_scalar(x, 1), *k = tg_mul_scalar(x, 1), *v = tg_mul_scalar(x, 1);
    cr_assert_eq(tg_backward(tg_sum_all(tg_mul(tg_attention(q, k, v, causal, 0, NULL), R))), 0, "%s", tg_last_error());
    double e = max_diff(one, x->grad), scale = 0;
    for (int64_t i = 0; i < one->size; i++) scale = fmax(scale, fabs((double)one->data[i]));
    cr_expect(e <= 1e-5 * scale, "q = k = v: gradient off by %g (largest %g)", e, scale);
}
