/* Memory scopes and counters, and the acceptance test of the foundation: a
 * two-layer tanh MLP trained with plain SGD through the public header only,
 * whose tenth step makes no system allocation. */
#include "test_util.h"

Test(memory, scope_end_releases_everything) {
    tg_memory_stats before = tg_memory();
    tg_scope_begin();
    tg_tensor *a = tg_ones(TG_SHAPE(1000));
    tg_tensor *b = tg_exp(a);
    TG_REQUIRE(b);
    cr_expect(tg_memory().arena_in_use >= before.arena_in_use + 2 * 1000 * sizeof(tg_real));
    tg_scope_begin(); /* nested */
    tg_tensor *c = tg_add(a, b);
    TG_REQUIRE(c);
    size_t inner = tg_memory().arena_in_use;
    tg_scope_end();
    cr_expect(tg_memory().arena_in_use < inner);
    cr_expect(tg_arena_live(b) && !tg_arena_live(c), "inner scope end frees only the inner scope");
    tg_scope_end();
    cr_expect_eq(tg_memory().arena_in_use, before.arena_in_use);
    cr_expect(tg_memory().arena_peak >= inner);
    cr_expect_eq(tg_scope_depth(), 0);
}

Test(memory, unbalanced_scope_end_is_an_error_not_a_crash) {
    tg_clear_error();
    tg_scope_end();
    cr_expect(error_has("scope_end", "no scope"));
}

/* 64 scopes may be open; the 65th begin fails, and its end closes nothing,
 * so the 64th scope and what it holds stay alive until their own end. */
Test(memory, too_deep_scope_begin_fails_and_keeps_nesting_balanced) {
    tg_clear_error();
    for (int i = 0; i < 63; i++) cr_assert_eq(tg_scope_begin(), 0, "begin %d: %s", i + 1, tg_last_error());
    cr_assert_eq(tg_scope_begin(), 0, "the 64th begin succeeds");
    tg_tensor *a = tg_ones(TG_SHAPE(100));
    TG_REQUIRE(a);
    cr_expect_null(tg_last_error());
    cr_expect_eq(tg_scope_begin(), -1, "the 65th begin fails");
    cr_expect(error_has("scope_begin", "64 nested scopes"), "%s", tg_last_error());
    cr_expect_eq(tg_scope_begin(), -1, "so does a 66th");
    cr_expect_eq(tg_scope_depth(), 64);
    tg_scope_end();
    tg_scope_end(); /* the ends of the two failed begins */
    cr_expect_eq(tg_scope_depth(), 64, "the 64th scope is still open");
    cr_expect(tg_arena_live(a), "and what it holds is intact");
    cr_expect_eq(a->magic, TG_MAGIC);
    cr_expect_eq(a->data[99], 1);
    tg_tensor *b = tg_add_scalar(a, 1); /* the scope still works */
    TG_REQUIRE(b);
    cr_expect_eq(b->data[0], 2);
    tg_scope_end();
    cr_expect(!tg_arena_live(a), "its own end releases it");
    for (int i = 0; i < 63; i++) tg_scope_end();
    cr_expect_eq(tg_scope_depth(), 0);
    tg_clear_error();
    tg_scope_end();
    cr_expect(error_has("scope_end", "no scope"), "and one end too many is still an error");
}

Test(memory, persistent_tensors_are_counted) {
    size_t before = tg_memory().persistent_bytes;
    uint64_t allocs = tg_memory().system_allocs;
    tg_tensor *t = tg_zeros(TG_SHAPE(256));
    cr_expect(tg_memory().persistent_bytes >= before + 256 * sizeof(tg_real));
    cr_expect_eq(tg_memory().system_allocs, allocs + 1, "header and data in one allocation");
    tg_free(t);
    cr_expect_eq(tg_memory().persistent_bytes, before);
}

/* y = 2 sin(x) on [-1.5, 1.5], 64 points; MLP 1 -> 32 (tanh) -> 1. */
Test(memory, mlp_trains_and_tenth_step_allocates_nothing) {
    enum { N = 64, H = 32 };
    tg_rng rng = tg_rng_new(42);
    tg_tensor *x = tg_empty(TG_SHAPE(N, 1)), *y = tg_empty(TG_SHAPE(N, 1));
    for (int i = 0; i < N; i++) {
        x->data[i] = -1.5 + 3.0 * i / (N - 1);
        y->data[i] = 2 * sin(x->data[i]);
    }
    tg_tensor *W1 = tg_normal(TG_SHAPE(1, H), 0, 1, &rng), *b1 = tg_zeros(TG_SHAPE(H));
    /* A zero output layer: the first loss is mean(y^2) ~ 1.9 whatever the seed. */
    tg_tensor *W2 = tg_zeros(TG_SHAPE(H, 1)), *b2 = tg_zeros(TG_SHAPE(1));
    tg_tensor *params[] = {W1, b1, W2, b2};
    for (int i = 0; i < 4; i++) tg_set_requires_grad(params[i], true);

    double first = 0, last = 0;
    const double lr = 0.1;
    for (int step = 1; step <= 3000; step++) {
        uint64_t allocs = tg_memory().system_allocs;
        tg_scope_begin();
        tg_tensor *h = tg_tanh(tg_add(tg_matmul(x, W1), b1));
        tg_tensor *pred = tg_add(tg_matmul(h, W2), b2);
        tg_tensor *diff = tg_sub(pred, y);
        tg_tensor *loss = tg_mean_all(tg_mul(diff, diff));
        TG_REQUIRE(loss);
        for (int i = 0; i < 4; i++) tg_zero_grad(params[i]);
        cr_assert_eq(tg_backward(loss), 0, "%s", tg_last_error());
        for (int i = 0; i < 4; i++)
            for (int64_t j = 0; j < params[i]->size; j++) params[i]->data[j] -= lr * params[i]->grad->data[j];
        if (step == 1) first = tg_item(loss);
        last = tg_item(loss);
        tg_scope_end();
        if (step == 10)
            cr_expect_eq(tg_memory().system_allocs, allocs, "step 10 made %llu system allocations",
                         (unsigned long long)(tg_memory().system_allocs - allocs));
    }
    cr_expect(first > 1, "initial loss %g should be above 1", first);
    cr_expect(last < 0.01, "final loss %g should be below 0.01", last);
    printf("mlp: loss %.4f -> %.5f in 3000 SGD steps\n", first, last);
    for (int i = 0; i < 4; i++) tg_free(params[i]);
    tg_free(x);
    tg_free(y);
}
