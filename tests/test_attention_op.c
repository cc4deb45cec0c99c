/* The fused attention op (tg_attention) against the stored path it replaces
 * (scaled scores -> tg_masked_softmax -> tg_dropout -> tg_matmul): same
 * output and same gradients of q, k and v to 1e-12 in double, for many
 * shapes, masks and dropout rates, with the same dropout mask for equal rng
 * states; bit-identical results for 1 and 2 threads; memory far below the
 * Q x K weights; errors. (The modules' choice of path and their recording
 * switch are tested in test_attention.c.)
 * Gradient checks are in cases_attention_op.c. */
#include "test_util.h"

#include <string.h>

TestSuite(attention_op, .init = scoped_test_begin, .fini = scoped_test_end);

typedef struct {
    int B, Q, K, d, dv;
    int mask; /* 0 none, 1 lens [B], 2 lens [B, Q], 3 causal, 4 causal + lens [B] */
    tg_real p;
} shape_case;

/* Random lengths in [0, K + 2] (so 0 and > K occur), deterministic per seed. */
static tg_mask make_mask(const shape_case *c, uint64_t seed) {
    tg_mask m = {NULL, 0, c->mask >= 3};
    if (c->mask == 0 || c->mask == 3) return m;
    int n = c->mask == 2 ? c->B * c->Q : c->B;
    int *lens = tg_arena_alloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++) lens[i] = (int)(tg_rng_bits(seed, 9, (uint64_t)i) % (uint64_t)(c->K + 3));
    m.lens = lens;
    m.lens_ndim = c->mask == 2 ? 2 : 1;
    return m;
}

static tg_tensor *stored_path(tg_tensor *q, tg_tensor *k, tg_tensor *v, tg_mask mask, tg_real p, tg_rng *rng) {
    tg_tensor *s = tg_mul_scalar(tg_matmul_t(q, k, false, true), (tg_real)(1.0 / sqrt((double)q->shape[2])));
    return tg_matmul(tg_dropout(tg_masked_softmax(s, mask), p, rng), v);
}

typedef struct {
    tg_tensor *out, *gq, *gk, *gv;
    uint64_t counter;
} run_result;

/* One forward + backward (seed gradient R) of either path; the gradients are copied. */
static run_result run(bool fused, tg_tensor *q, tg_tensor *k, tg_tensor *v, tg_mask mask, tg_real p,
                      const tg_tensor *R) {
    tg_rng rng = tg_rng_new(77);
    rng.counter = 1234;
    tg_zero_grad(q), tg_zero_grad(k), tg_zero_grad(v);
    tg_tensor *out = fused ? tg_attention(q, k, v, mask, p, &rng) : stored_path(q, k, v, mask, p, &rng);
    TG_REQUIRE(out);
    cr_assert_eq(tg_backward_seed(out, R), 0, "%s", tg_last_error());
    return (run_result){tg_clone(out), tg_clone(q->grad), tg_clone(k->grad), tg_clone(v->grad), rng.counter};
}

static void compare_with_stored(const shape_case *c, uint64_t seed) {
    tg_rng rng = tg_rng_new(seed);
    tg_tensor *q = tg_randn(TG_SHAPE(c->B, c->Q, c->d), &rng), *k = tg_randn(TG_SHAPE(c->B, c->K, c->d), &rng);
    tg_tensor *v = tg_randn(TG_SHAPE(c->B, c->K, c->dv), &rng), *R = tg_randn(TG_SHAPE(c->B, c->Q, c->dv), &rng);
    tg_fill_normal(q, 0, 2, &rng); /* sharper weights than unit scores */
    tg_set_requires_grad(q, true), tg_set_requires_grad(k, true), tg_set_requires_grad(v, true);
    tg_mask mask = make_mask(c, seed);
    run_result f = run(true, q, k, v, mask, c->p, R), s = run(false, q, k, v, mask, c->p, R);
    cr_expect_eq(f.counter, s.counter, "(%d,%d,%d,%d,%d) mask %d p %g: rng counters %llu and %llu", c->B, c->Q, c->K,
                 c->d, c->dv, c->mask, (double)c->p, (unsigned long long)f.counter, (unsigned long long)s.counter);
    const char *names[] = {"out", "dq", "dk", "dv"};
    tg_tensor *a[] = {f.out, f.gq, f.gk, f.gv}, *b[] = {s.out, s.gq, s.gk, s.gv};
    for (int i = 0; i < 4; i++) {
        double e = max_diff(a[i], b[i]);
        cr_expect(e <= 1e-12, "(B%d,Q%d,K%d,d%d,dv%d) mask %d p %g: %s differs from the stored path by %.3g", c->B,
                  c->Q, c->K, c->d, c->dv, c->mask, (double)c->p, names[i], e);
    }
}

Test(attention_op, matches_the_stored_path) {
    cr_assert(sizeof(tg_real) == 8, "compared in the double build");
    static const shape_case cases[] = {
        {1, 1, 1, 1, 1, 0, 0},
        {2, 3, 5, 4, 3, 0, 0},
        {3, 4, 6, 3, 2, 1, 0},
        {2, 5, 4, 2, 3, 2, 0},
        {2, 6, 6, 3, 3, 3, 0},
        {2, 7, 4, 3, 2, 3, 0}, /* causal, Q > K */
        {2, 4, 7, 3, 2, 4, 0},
        {2, 3, 5, 4, 3, 0, 0.1},
        {3, 5, 9, 4, 2, 1, 0.5},
        {2, 6, 6, 3, 3, 3, 0.3},
        {1, 70, 130, 5, 3, 0, 0},
        {1, 130, 70, 5, 7, 2, 0.2},
        {2, 70, 130, 8, 8, 3, 0.1},
        {2, 129, 129, 16, 16, 4, 0.1},
        {3, 200, 150, 16, 8, 1, 0.25},
        {2, 64, 64, 16, 16, 2, 0.1},
        {1, 300, 300, 16, 16, 3, 0.1},
        {4, 65, 63, 7, 9, 0, 0.9},
        /* short sequences (Q, K <= 64: one call per entry), rows padded to 16 lanes: full lanes, a tail, odd T,
         * feature sizes off the lanes, Q != K, 17 and 33 keys (a second and a third lane block) */
        {3, 16, 16, 16, 16, 0, 0.1},
        {2, 16, 16, 16, 16, 1, 0},
        {2, 13, 13, 5, 7, 3, 0.2},
        {2, 32, 32, 32, 32, 2, 0.1},
        {2, 17, 33, 12, 20, 4, 0.3},
        {3, 5, 64, 16, 48, 1, 0.1},
        {1, 1, 17, 16, 16, 2, 0.5},
        {2, 64, 64, 64, 64, 3, 0.1},
        {2, 33, 9, 3, 16, 2, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) compare_with_stored(&cases[i], 100 + i);
}

/* The op (dropout 0.1) on 1 and 2 threads: the output and the three
 * gradients bit for bit; the case is "<what> <n>" in messages. */
static void expect_same_at_1_and_2_threads(tg_tensor *q, tg_tensor *k, tg_tensor *v, tg_mask mask, tg_tensor *R,
                                           const char *what, int n) {
    tg_set_num_threads(1);
    run_result one = run(true, q, k, v, mask, 0.1, R);
    tg_set_num_threads(2);
    run_result two = run(true, q, k, v, mask, 0.1, R);
    tg_tensor *a[] = {one.out, one.gq, one.gk, one.gv}, *b[] = {two.out, two.gq, two.gk, two.gv};
    for (int i = 0; i < 4; i++)
        cr_expect(memcmp(a[i]->data, b[i]->data, sizeof(tg_real) * (size_t)a[i]->size) == 0,
                  "%s %d: tensor %d differs between 1 and 2 threads", what, n, i);
}

/* The same call on 1 and 2 threads gives the same bits. */
Test(attention_op, bit_identical_for_any_thread_count) {
    tg_rng rng = tg_rng_new(5);
    int B = 3, T = 300, d = 16;
    tg_tensor *q = tg_randn(TG_SHAPE(B, T, d), &rng), *k = tg_randn(TG_SHAPE(B, T, d), &rng);
    tg_tensor *v = tg_randn(TG_SHAPE(B, T, d), &rng), *R = tg_randn(TG_SHAPE(B, T, d), &rng);
    tg_set_requires_grad(q, true), tg_set_requires_grad(k, true), tg_set_requires_grad(v, true);
    static const int lens[] = {300, 0, 170};
    tg_mask masks[] = {{NULL, 0, true}, {lens, 1, false}};
    int prev = tg_get_num_threads();
    for (int m = 0; m < 2; m++) expect_same_at_1_and_2_threads(q, k, v, masks[m], R, "mask", m);
    tg_set_num_threads(prev);
}

/* The same for short sequences (one call of the kernel per entry, tasks of
 * a few entries): 37 entries of T 16 and of T 13 with odd sizes. */
Test(attention_op, short_sequences_bit_identical_for_any_thread_count) {
    tg_rng rng = tg_rng_new(6);
    static const int shapes[][4] = {{37, 16, 16, 16}, {37, 13, 5, 7}}; /* B, T, d, dv */
    int prev = tg_get_num_threads();
    for (int s = 0; s < 2; s++) {
        int B = shapes[s][0], T = shapes[s][1], d = shapes[s][2], dv = shapes[s][3];
        tg_tensor *q = tg_randn(TG_SHAPE(B, T, d), &rng), *k = tg_randn(TG_SHAPE(B, T, d), &rng);
        tg_tensor *v = tg_randn(TG_SHAPE(B, T, dv), &rng), *R = tg_randn(TG_SHAPE(B, T, dv), &rng);
        tg_set_requires_grad(q, true), tg_set_requires_grad(k, true), tg_set_requires_grad(v, true);
        expect_same_at_1_and_2_threads(q, k, v, (tg_mask){NULL, 0, true}, R, "T", T);
    }
    tg_set_num_threads(prev);
}

/* T = 2048, 2 heads of size 16: forward + backward adds far less than the
 * T x T bytes one weight matrix would take (the stored path keeps three
 * [2, T, T] tensors of 8-byte reals: 96 T^2 bytes). The inputs are
 * persistent, so their gradients are too: the arena holds only what the
 * op adds, plus the output and its gradient. */
Test(attention_op, memory_is_linear_in_T) {
    tg_scope_end(); /* the inputs are made outside any scope */
    int T = 2048, d = 16;
    tg_rng rng = tg_rng_new(3);
    tg_tensor *q = tg_randn(TG_SHAPE(2, T, d), &rng), *k = tg_randn(TG_SHAPE(2, T, d), &rng);
    tg_tensor *v = tg_randn(TG_SHAPE(2, T, d), &rng);
    tg_tensor *seed = tg_ones(TG_SHAPE(2, T, d)); /* d sum(out) / d out */
    tg_set_requires_grad(q, true), tg_set_requires_grad(k, true), tg_set_requires_grad(v, true);
    tg_scope_begin();
    tg_memory_stats before = tg_memory();
    tg_tensor *out = tg_attention(q, k, v, (tg_mask){NULL, 0, true}, 0.1, &rng);
    TG_REQUIRE(out);
    cr_assert_eq(tg_backward_seed(out, seed), 0, "%s", tg_last_error());
    tg_memory_stats after = tg_memory();
    size_t added = after.arena_peak - before.arena_in_use;
    size_t out_and_grad = 2 * (size_t)out->size * sizeof(tg_real);
    printf("attention_op: T=%d, 2 heads of 16: arena peak added %zu bytes (output and its gradient %zu), T^2 = %zu\n",
           T, added, out_and_grad, (size_t)T * T);
    cr_expect(before.arena_peak <= before.arena_in_use + added, "a fresh process: peak %zu", before.arena_peak);
    cr_expect(added < (size_t)T * T / 2, "added %zu bytes, T^2 = %zu", added, (size_t)T * T);
    /* its own: L, D, the mask's counts (O(T)) and a few 64 x 64 tiles per thread */
    cr_expect(added - out_and_grad < (size_t)T * T / 8, "op's own memory %zu bytes", added - out_and_grad);
    tg_scope_end();
    tg_free(q), tg_free(k), tg_free(v), tg_free(seed);
    tg_scope_begin();
}

Test(attention_op, errors_name_the_op_and_shapes) {
    tg_rng rng = tg_rng_new(1);
    tg_tensor *q = tg_zeros(TG_SHAPE(2, 3, 4)), *k = tg_zeros(TG_SHAPE(2, 5, 4)), *v = tg_zeros(TG_SHAPE(2, 5, 3));
    tg_mask none = {NULL, 0, false};
    cr_expect_null(tg_attention(q, tg_zeros(TG_SHAPE(2, 5, 3)), v, none, 0, NULL));
    cr_expect(error_has("attention: q (2,3,4), k (2,5,3), v (2,5,3)", NULL), "%s", tg_last_error());
    cr_expect_null(tg_attention(q, k, tg_zeros(TG_SHAPE(2, 4, 3)), none, 0, NULL));
    cr_expect(error_has("attention:", "v (2,4,3)"), "%s", tg_last_error());
    cr_expect_null(tg_attention(tg_zeros(TG_SHAPE(3, 4)), k, v, none, 0, NULL));
    cr_expect(error_has("attention:", "q (3,4)"), "%s", tg_last_error());
    cr_expect_null(tg_attention(q, tg_zeros(TG_SHAPE(1, 5, 4)), v, none, 0, NULL));
    cr_expect(error_has("attention:", "k (1,5,4)"), "%s", tg_last_error());
    cr_expect_null(tg_attention(q, k, v, none, 1.5, &rng));
    cr_expect(error_has("attention:", "1.5"), "%s", tg_last_error());
    cr_expect_null(tg_attention(q, k, v, none, -0.1, &rng));
    cr_expect(error_has("attention:", "[0, 1]"), "%s", tg_last_error());
    cr_expect_null(tg_attention(q, k, v, none, 0.1, NULL));
    cr_expect(error_has("attention:", "NULL rng"), "%s", tg_last_error());
    static const int neg[] = {1, -2};
    cr_expect_null(tg_attention(q, k, v, (tg_mask){neg, 1, false}, 0, NULL));
    cr_expect(error_has("attention:", "negative"), "%s", tg_last_error());
    cr_expect_null(tg_attention(q, k, v, (tg_mask){neg, 3, false}, 0, NULL));
    cr_expect(error_has("attention:", "lens_ndim 3"), "%s", tg_last_error());
    cr_expect_null(tg_attention(q, tg_zeros(TG_SHAPE(2, 0, 4)), tg_zeros(TG_SHAPE(2, 0, 3)), none, 0, NULL));
    cr_expect(error_has("attention:", "no keys"), "%s", tg_last_error());
    tg_clear_error();
    cr_expect_null(tg_attention(NULL, k, v, none, 0, NULL));
    cr_expect(error_has("attention: NULL input", NULL), "%s", tg_last_error());
    /* p = 0 needs no rng, and leaves a given one untouched */
    tg_tensor *y = tg_attention(q, k, v, none, 0, &rng);
    TG_REQUIRE(y);
    cr_expect_eq(rng.counter, 0u);
    /* an empty query set is fine */
    y = tg_attention(tg_zeros(TG_SHAPE(2, 0, 4)), k, v, none, 0.5, &rng);
    TG_REQUIRE(y);
    cr_expect_eq(y->shape[1], 0);
}
