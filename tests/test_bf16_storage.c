/* Tensors stored as bf16 (tensor.h, tg_dtype; issue 31): tg_to_bf16 rounds
 * as torch's c10::BFloat16 does (to nearest even, subnormals kept, NaN
 * stays NaN), tg_to_real widens exactly, the gradient passes through both
 * unchanged, a reshape of a bf16 tensor is a bf16 view, and an op that
 * reads tg_real tensors refuses a bf16 one with its name in the error.
 * The gradient checks of the two casts are in cases_ops.c. */
#include "test_util.h"
#include "autograd/op.h"
#include "tensor/half.h"

#include <math.h>
#include <stdio.h>
#include <string.h>


/* bits of to_bf16(v), one value at a time */
static uint16_t bits_of(tg_real v) {
    tg_tensor *x = tg_full(TG_SHAPE(1), v), *y = tg_to_bf16(x);
    cr_assert(y != NULL, "%s", tg_last_error());
    cr_assert(y->dtype == TG_DTYPE_BF16 && y->data == NULL && y->bf16 != NULL);
    return y->bf16[0];
}

Test(bf16_storage, rounds_to_nearest_even_and_keeps_subnormals_and_nan) {
    tg_scope_begin();
    cr_expect_eq(bits_of(1.0), 0x3F80);
    cr_expect_eq(bits_of(-2.0), 0xC000);
    cr_expect_eq(bits_of(1.0 + 1.0 / 256), 0x3F80, "a tie with an even kept part stays");
    cr_expect_eq(bits_of(1.0 + 3.0 / 256), 0x3F82, "a tie with an odd kept part rounds up");
    cr_expect_eq(bits_of(1.0 + 1.0 / 256 + 1.0 / 4096), 0x3F81, "above the tie rounds up");
    cr_expect_eq(bits_of(-0.0), 0x8000);
    cr_expect_eq(bits_of((tg_real)INFINITY), 0x7F80);
    uint16_t sub = bits_of((tg_real)1e-40); /* a float subnormal: kept, not flushed */
    cr_expect(sub != 0 && (sub & 0x7F80) == 0, "subnormal 1e-40 gave %04x", sub);
    uint16_t nan = bits_of((tg_real)NAN);
    cr_expect((nan & 0x7F80) == 0x7F80 && (nan & 0x7F) != 0, "NaN gave %04x", nan);
    tg_scope_end();
}

Test(bf16_storage, widens_exactly_and_keeps_shape) {
    tg_rng rng = tg_rng_new(5);
    tg_tensor *x = tg_normal(TG_SHAPE(2, 3, 4), 0, 3, &rng);
    tg_scope_begin();
    tg_tensor *b = tg_to_bf16(x), *r = tg_to_real(b);
    cr_assert(r != NULL, "%s", tg_last_error());
    cr_expect(r->dtype == TG_DTYPE_REAL && r->ndim == 3 && r->shape[2] == 4 && r->size == 24);
    for (int64_t i = 0; i < x->size; i++)
        cr_expect_eq(r->data[i], (tg_real)tg__bf16_round((float)x->data[i]), "element %lld", (long long)i);
    cr_expect_eq(tg_item(b), r->data[0], "tg_item reads a bf16 tensor");
    cr_expect_eq(tg_to_bf16(b), b, "a bf16 tensor cast to bf16 is itself");
    cr_expect_eq(tg_to_real(x), x, "a real tensor cast to real is itself");
    tg_tensor *v = tg_reshape(b, TG_SHAPE(6, 4));
    cr_assert(v != NULL, "%s", tg_last_error());
    cr_expect(v->dtype == TG_DTYPE_BF16 && v->bf16 == b->bf16, "a reshape of bf16 is a bf16 view");
    tg_tensor *c = tg_clone(b);
    cr_expect(c && c->dtype == TG_DTYPE_BF16 && c->bf16 != b->bf16 && !memcmp(c->bf16, b->bf16, 24 * 2));
    tg_scope_end();
    tg_free(x);
}

Test(bf16_storage, gradient_passes_through_both_casts) {
    tg_rng rng = tg_rng_new(9);
    tg_tensor *x = tg_normal(TG_SHAPE(3, 5), 0, 1, &rng), *w = tg_normal(TG_SHAPE(3, 5), 0, 1, &rng);
    tg_set_requires_grad(x, true);
    tg_scope_begin();
    tg_tensor *b = tg_to_bf16(x);
    cr_expect(b && b->requires_grad);
    tg_tensor *loss = tg_sum_all(tg_mul(tg_to_real(tg_reshape(b, TG_SHAPE(15))), tg_reshape(w, TG_SHAPE(15))));
    cr_assert(loss != NULL, "%s", tg_last_error());
    cr_assert_eq(tg_backward(loss), 0, "%s", tg_last_error());
    cr_assert(x->grad != NULL && x->grad->dtype == TG_DTYPE_REAL);
    for (int64_t i = 0; i < x->size; i++) cr_expect_eq(x->grad->data[i], w->data[i], "element %lld", (long long)i);
    tg_scope_end();
    tg_free(x);
    tg_free(w);
}

Test(bf16_storage, ops_that_read_real_refuse_bf16_by_name) {
    tg_tensor *x = tg_ones(TG_SHAPE(2, 3));
    tg_scope_begin();
    tg_tensor *b = tg_to_bf16(x);
    cr_expect_null(tg_add(b, x));
    cr_expect(strstr(tg_last_error(), "add: input 0 (2,3) is bf16"), "%s", tg_last_error());
    cr_expect_null(tg_softmax(b));
    cr_expect(strstr(tg_last_error(), "softmax") && strstr(tg_last_error(), "bf16"), "%s", tg_last_error());
    cr_expect_null(tg_matmul(x, b));
    cr_expect(strstr(tg_last_error(), "input 1"), "%s", tg_last_error());
    tg_rng rng = tg_rng_new(1);
    tg_fill_normal(b, 0, 1, &rng);
    cr_expect(strstr(tg_last_error(), "fill_normal: a bf16 tensor"), "%s", tg_last_error());
    char buf[256] = {0};
    FILE *f = fmemopen(buf, sizeof buf, "w");
    tg_fprint(f, b);
    fclose(f);
    cr_expect(strstr(buf, "1.0000") && strstr(buf, "dtype=bfloat16"), "%s", buf);
    tg_scope_end();
    tg_free(x);
}
