/* Backward semantics: accumulation, diamonds, x*x, broadcasting, no-grad
 * mode, seed gradients, and backward on a released graph. */
#include "test_util.h"

static tg_tensor *param(int ndim, const int *shape, const tg_real *v) {
    tg_tensor *t = tg_from_array(ndim, shape, v);
    tg_set_requires_grad(t, true);
    return t;
}

Test(autograd, x_times_x_and_accumulation) {
    tg_tensor *x = param(TG_SHAPE(3), (tg_real[]){1, -2, 3});
    for (int rep = 1; rep <= 2; rep++) {
        tg_scope_begin();
        tg_tensor *y = tg_sum_all(tg_mul(x, x));
        TG_REQUIRE(y);
        cr_assert_eq(tg_backward(y), 0, "%s", tg_last_error());
        /* d sum x^2 = 2x, and backward adds to what is there (+=). */
        expect_close(x->grad, (tg_real[]){2.0 * rep, -4.0 * rep, 6.0 * rep}, 3, 1e-12);
        tg_scope_end();
    }
    tg_zero_grad(x);
    expect_close(x->grad, (tg_real[]){0, 0, 0}, 3, 0);
    tg_free(x);
}

Test(autograd, diamond_graph) {
    /* y = exp(x) used twice: z = y*2 + y^2 -> dz/dx = (2 + 2y) e^x */
    tg_tensor *x = param(TG_SHAPE(2), (tg_real[]){0.5, -1});
    tg_scope_begin();
    tg_tensor *y = tg_exp(x);
    tg_tensor *z = tg_sum_all(tg_add(tg_mul_scalar(y, 2), tg_mul(y, y)));
    cr_assert_eq(tg_backward(z), 0);
    for (int i = 0; i < 2; i++) {
        double e = exp((double)x->data[i]);
        cr_expect(fabs(x->grad->data[i] - (2 + 2 * e) * e) < 1e-12);
    }
    tg_scope_end();
    tg_free(x);
}

Test(autograd, broadcast_backward_sums_over_broadcast_axes) {
    tg_tensor *a = param(TG_SHAPE(2, 3), (tg_real[]){1, 2, 3, 4, 5, 6});
    tg_tensor *b = param(TG_SHAPE(3), (tg_real[]){1, 1, 1});
    tg_tensor *c = param(TG_SHAPE(2, 1), (tg_real[]){2, 3});
    tg_scope_begin();
    tg_tensor *y = tg_sum_all(tg_mul(tg_add(a, b), c));
    cr_assert_eq(tg_backward(y), 0);
    expect_close(b->grad, (tg_real[]){5, 5, 5}, 3, 1e-12); /* sum over rows of c */
    expect_close(c->grad, (tg_real[]){9, 18}, 2, 1e-12);   /* row sums of a + b */
    expect_close(a->grad, (tg_real[]){2, 2, 2, 3, 3, 3}, 6, 1e-12);
    tg_scope_end();
    tg_free(a);
    tg_free(b);
    tg_free(c);
}

Test(autograd, records_only_when_needed) {
    tg_tensor *x = param(TG_SHAPE(2), (tg_real[]){1, 2});
    tg_tensor *k = tg_from_array(TG_SHAPE(2), (tg_real[]){3, 4});
    tg_scope_begin();
    tg_tensor *a = tg_mul(k, k);
    cr_expect(!a->requires_grad && a->node == NULL, "no input requires grad: no node");
    bool prev = tg_set_grad_enabled(false);
    tg_tensor *b = tg_mul(x, k);
    tg_set_grad_enabled(prev);
    cr_expect(b->node == NULL && !b->requires_grad, "no-grad mode records nothing");
    cr_expect_eq(tg_backward(tg_sum_all(b)), -1);
    cr_expect(error_has("backward", "does not require grad"), "%s", tg_last_error());
    tg_tensor *c = tg_mul(x, k);
    cr_expect(c->node != NULL && c->requires_grad);
    tg_scope_end();
    tg_free(x);
    tg_free(k);
}

Test(autograd, seed_gradient_for_non_scalar_outputs) {
    tg_tensor *x = param(TG_SHAPE(2, 2), (tg_real[]){1, 2, 3, 4});
    tg_scope_begin();
    tg_tensor *y = tg_mul_scalar(x, 3);
    cr_expect_eq(tg_backward(y), -1, "non-scalar needs a seed");
    tg_tensor *seed = tg_from_array(TG_SHAPE(2, 2), (tg_real[]){1, 0, -1, 2});
    cr_assert_eq(tg_backward_seed(y, seed), 0);
    expect_close(x->grad, (tg_real[]){3, 0, -3, 6}, 4, 1e-12);
    tg_scope_end();
    tg_free(x);
}

Test(autograd, backward_after_scope_end_is_an_error) {
    tg_tensor *x = param(TG_SHAPE(2), (tg_real[]){1, 2});
    tg_scope_begin();
    tg_tensor *y = tg_sum_all(tg_exp(x));
    tg_scope_end();
    tg_clear_error();
    cr_expect_eq(tg_backward(y), -1);
    cr_expect(error_has("backward", "scope has ended"), "%s", tg_last_error());
    tg_free(x);
}

/* Issue 10, defect 7: a second backward over the same graph silently
 * doubled the gradients; as in PyTorch, it is an error unless the first
 * pass kept the graph. */
Test(autograd, a_second_backward_needs_the_graph_retained) {
    tg_tensor *x = param(TG_SHAPE(1), (tg_real[]){2});
    tg_scope_begin();
    tg_tensor *y = tg_sum_all(tg_mul(x, x));
    cr_assert_eq(tg_backward(y), 0);
    cr_expect(fabs(x->grad->data[0] - 4) < 1e-12);
    tg_clear_error();
    cr_expect_eq(tg_backward(y), -1, "a second pass over a released graph must fail");
    cr_expect(error_has("backward", "already used"), "%s", tg_last_error());
    cr_expect(fabs(x->grad->data[0] - 4) < 1e-12, "the refused pass changed the gradient");
    tg_scope_end();
    tg_free(x);
}

/* Issue 10, defect 7: a tensor used after its scope ended silently read
 * whatever the arena held there. Ops now refuse it, also when a later
 * scope has allocated over it. */
Test(autograd, a_tensor_from_an_ended_scope_is_refused) {
    tg_tensor *x = param(TG_SHAPE(4), (tg_real[]){1, 2, 3, 4});
    tg_scope_begin();
    tg_tensor *y = tg_exp(x);
    tg_scope_end();
    tg_clear_error();
    cr_expect_null(tg_add(y, x), "a tensor of an ended scope was used");
    cr_expect(error_has("add", "scope has ended"), "%s", tg_last_error());
    /* The same allocations in a new scope do not revive it. */
    tg_scope_begin();
    tg_tensor *z = tg_exp(x);
    cr_assert_not_null(z);
    tg_clear_error();
    cr_expect_null(tg_mul(y, x), "a stale tensor passed once its memory was reused");
    cr_expect(error_has("mul", "scope has ended"), "%s", tg_last_error());
    tg_scope_end();
    tg_free(x);
}

/* A leaf in an outer scope's arena (an op's result marked with
 * tg_set_requires_grad) would get its gradient in the inner scope where
 * backward runs, freed at that scope's end while the leaf lives on: the
 * next backward would add into freed memory. Refused, with nothing
 * changed; in its own scope the same backward runs. */
Test(autograd, a_leaf_of_an_outer_scope_is_refused_in_an_inner_one) {
    tg_tensor *x = tg_from_array(TG_SHAPE(3), (const tg_real[]){1, -2, 3}),
              *w = param(TG_SHAPE(3), (tg_real[]){1, 1, 1});
    tg_scope_begin();
    tg_tensor *q = tg_mul_scalar(x, 2);
    TG_REQUIRE(q);
    tg_set_requires_grad(q, true); /* a leaf in this scope's arena */
    for (int rep = 0; rep < 2; rep++) {
        tg_scope_begin();
        tg_tensor *y = tg_sum_all(tg_mul(tg_mul(q, q), w));
        TG_REQUIRE(y);
        tg_clear_error();
        cr_expect_eq(tg_backward(y), -1, "an outer scope's arena leaf got a gradient from an inner scope");
        cr_expect(error_has("backward", "outer scope"), "%s", tg_last_error());
        cr_expect_null(q->grad);
        cr_expect_null(w->grad, "the refused pass changed a gradient");
        tg_scope_end();
    }
    tg_tensor *y = tg_sum_all(tg_mul(q, q));
    TG_REQUIRE(y);
    cr_assert_eq(tg_backward(y), 0, "%s", tg_last_error());
    expect_close(q->grad, (tg_real[]){4, -8, 12}, 3, 1e-12); /* d sum q^2 = 2q */
    tg_scope_end();
    tg_free(x);
    tg_free(w);
}

/* Issue 10, defect 6: detect_anomaly names the op whose output or gradient
 * first went non-finite, with the shapes. */
Test(autograd, detect_anomaly_names_the_op) {
    tg_tensor *x = param(TG_SHAPE(2, 3), (tg_real[]){1, 2, 3, 4, 5, -6});
    tg_set_detect_anomaly(true);
    tg_scope_begin();
    tg_tensor *y = tg_log(x); /* log(-6): NaN, forward */
    tg_tensor *loss = tg_sum_all(tg_mul_scalar(y, 2));
    cr_expect(error_has("detect_anomaly: forward of log", "(2,3)"), "%s", tg_last_error());
    cr_expect_eq(tg_backward(loss), -1);
    cr_expect(error_has("forward of log", "(2,3)"), "%s", tg_last_error());
    tg_scope_end();
    tg_set_detect_anomaly(true); /* clears the recorded one */
    tg_clear_error();
    tg_scope_begin();
    tg_tensor *r = tg_sqrt(tg_mul_scalar(x, 0)); /* sqrt(0) = 0 is fine; its derivative is not */
    cr_expect_null(tg_last_error(), "no forward anomaly here: %s", tg_last_error());
    cr_expect_eq(tg_backward(tg_sum_all(r)), -1);
    cr_expect(error_has("detect_anomaly: backward of sqrt", "(2,3)"), "%s", tg_last_error());
    tg_scope_end();
    tg_set_detect_anomaly(false);
    tg_free(x);
}

Test(autograd, intermediate_grads_are_fresh_for_each_backward) {
    tg_tensor *x = param(TG_SHAPE(1), (tg_real[]){2});
    tg_scope_begin();
    tg_tensor *h = tg_mul(x, x); /* 4 */
    tg_tensor *y = tg_sum_all(h);
    tg_backward_retain(y); /* kept for a second pass */
    tg_retain_grad(h);     /* else tg_backward frees an intermediate's gradient */
    tg_backward(y);        /* same graph again: dx = 2 * 2x */
    cr_expect(fabs(x->grad->data[0] - 8) < 1e-12, "got %g", (double)x->grad->data[0]);
    cr_expect(fabs(h->grad->data[0] - 1) < 1e-12, "non-leaf grad is per pass");
    tg_scope_end();
    tg_free(x);
}

/* reshape's backward hands its output's gradient to its input without a
 * copy when that is exact (tg_grad_share): these graphs check it stays
 * exact when it is not, and over repeated passes on the same graph. */
Test(autograd, reshape_gradient_sharing_is_exact) {
    tg_tensor *a = param(TG_SHAPE(2, 3), (tg_real[]){1, 2, 3, 4, 5, 6});
    tg_scope_begin();
    tg_tensor *x = tg_mul_scalar(a, 2); /* non-leaf, feeds the reshape only */
    tg_tensor *y = tg_reshape(x, TG_SHAPE(3, 2));
    tg_tensor *loss = tg_sum_all(tg_mul(y, y)); /* d/dy = 2y = 4a, d/da = 8a */
    cr_assert_eq(tg_backward_retain(loss), 0, "%s", tg_last_error());
    expect_close(a->grad, (tg_real[]){8, 16, 24, 32, 40, 48}, 6, 1e-12);
    expect_close(x->grad, (tg_real[]){4, 8, 12, 16, 20, 24}, 6, 1e-12);
    cr_expect(x->grad->ndim == 2 && x->grad->shape[0] == 2 && x->grad->shape[1] == 3, "x's gradient has x's shape");
    /* A second pass on the same graph after x got a second consumer: y's and
     * x's gradients now differ, and neither may overwrite the other. */
    tg_zero_grad(a);
    tg_tensor *z = tg_mul_scalar(x, 3); /* x = 2a: d(sum z)/da = 6 */
    tg_tensor *loss2 = tg_add(tg_sum_all(tg_mul(y, y)), tg_sum_all(z));
    cr_assert(!tg_retain_grad(x) && !tg_retain_grad(y), "%s", tg_last_error()); /* read after tg_backward */
    cr_assert_eq(tg_backward(loss2), 0, "%s", tg_last_error());
    expect_close(a->grad, (tg_real[]){14, 22, 30, 38, 46, 54}, 6, 1e-12);
    expect_close(y->grad, (tg_real[]){4, 8, 12, 16, 20, 24}, 6, 1e-12);
    expect_close(x->grad, (tg_real[]){7, 11, 15, 19, 23, 27}, 6, 1e-12);
    tg_scope_end();
    tg_free(a);
}

Test(autograd, add_gradient_sharing_is_exact) {
    tg_tensor *p = param(TG_SHAPE(3), (tg_real[]){1, 2, 3});
    tg_scope_begin();
    tg_tensor *x = tg_mul_scalar(p, 2), *y = tg_mul_scalar(p, 3); /* each feeds the add only */
    tg_tensor *z = tg_add(x, y);                                  /* 5p */
    cr_assert_eq(tg_backward_retain(tg_sum_all(tg_mul(z, z))), 0, "%s", tg_last_error());
    /* dz = 2z = 10p = dx = dy; dp = 2 dx + 3 dy = 50p */
    expect_close(p->grad, (tg_real[]){50, 100, 150}, 3, 1e-12);
    expect_close(x->grad, (tg_real[]){10, 20, 30}, 3, 1e-12);
    expect_close(y->grad, (tg_real[]){10, 20, 30}, 3, 1e-12);
    /* Again on the same graph after x got a second consumer. */
    tg_zero_grad(p);
    tg_tensor *loss = tg_add(tg_sum_all(tg_mul(z, z)), tg_sum_all(tg_mul_scalar(x, 4)));
    cr_assert(!tg_retain_grad(x) && !tg_retain_grad(y) && !tg_retain_grad(z), "%s", tg_last_error());
    cr_assert_eq(tg_backward(loss), 0, "%s", tg_last_error());
    expect_close(x->grad, (tg_real[]){14, 24, 34}, 3, 1e-12);
    expect_close(y->grad, (tg_real[]){10, 20, 30}, 3, 1e-12);
    expect_close(z->grad, (tg_real[]){10, 20, 30}, 3, 1e-12);
    expect_close(p->grad, (tg_real[]){58, 108, 158}, 3, 1e-12);
    tg_scope_end();
    tg_free(p);
}

Test(autograd, reshape_is_a_view_and_transpose_backward) {
    tg_tensor *x = param(TG_SHAPE(2, 3), (tg_real[]){1, 2, 3, 4, 5, 6});
    tg_scope_begin();
    tg_tensor *r = tg_reshape(x, TG_SHAPE(3, -1));
    cr_expect(r->data == x->data && r->shape[1] == 2);
    tg_tensor *t = tg_transpose(r, 0, 1); /* (2,3) */
    tg_tensor *w = tg_from_array(TG_SHAPE(2, 3), (tg_real[]){1, 2, 3, 4, 5, 6});
    tg_backward(tg_sum_all(tg_mul(t, w)));
    /* x (as 3x2) element [i][j] meets w[j][i]. */
    expect_close(x->grad, (tg_real[]){1, 4, 2, 5, 3, 6}, 6, 1e-12);
    tg_scope_end();
    tg_free(x);
}
