/* Semantics of the fused ops used by src/nn: dropout statistics and mask
 * reproducibility, masked softmax as d2l's masked_softmax, sparsemax against
 * an independent reference, layer norm statistics, cross-entropy against
 * log_softmax, and their error messages. Gradients are checked in
 * test_gradcheck.c; here only the gradient properties a gradcheck cannot see
 * (exact zeros, determinism). Everything lives in a scope: nothing leaks. */
#include "test_util.h"

#include <string.h>

TestSuite(fused, .init = scoped_test_begin, .fini = scoped_test_end);

static tg_tensor *leaf(int ndim, const int *shape, const tg_real *v) {
    tg_tensor *t = tg_from_array(ndim, shape, v);
    tg_set_requires_grad(t, true);
    return t;
}

/* N(0, 1) entries from the generator of `seed`, requiring grad. */
static tg_tensor *randn_leaf(int ndim, const int *shape, uint64_t seed) {
    tg_rng rng = tg_rng_new(seed);
    tg_tensor *t = tg_randn(ndim, shape, &rng);
    tg_set_requires_grad(t, true);
    return t;
}

/* backward with a random seed gradient (a vector-Jacobian product) */
static void backward_random(tg_tensor *y, uint64_t seed) {
    tg_rng rng = tg_rng_new(seed);
    tg_tensor *g = tg_randn(y->ndim, y->shape, &rng);
    TG_REQUIRE(g);
    cr_assert_eq(tg_backward_seed(y, g), 0, "%s", tg_last_error());
}

static bool all_finite(const tg_tensor *t) {
    for (int64_t i = 0; i < t->size; i++)
        if (!isfinite((double)t->data[i])) return false;
    return true;
}

/* ======================================================================
 * dropout
 * ====================================================================== */

static void dropout_statistics(tg_real p) {
    const int n = 1000000;
    tg_tensor *x = tg_ones(TG_SHAPE(n));
    tg_rng rng = tg_rng_new(42);
    tg_tensor *y = tg_dropout(x, p, &rng);
    TG_REQUIRE(y);
    cr_expect_eq(rng.counter, (uint64_t)n, "dropout reserves one number per element");
    int64_t zeros = 0;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        sum += y->data[i];
        if (y->data[i] == 0)
            zeros++;
        else
            cr_assert(y->data[i] == (tg_real)1 / (1 - p), "kept value %.17g", (double)y->data[i]);
    }
    double mean = sum / n, frac = (double)zeros / n;
    cr_expect(fabs(mean - 1) < 0.01, "p=%g: mean %g not within 1%% of 1", (double)p, mean);
    cr_expect(fabs(frac - p) < 0.003, "p=%g: fraction zeroed %g", (double)p, frac);
}
Test(fused, dropout_keeps_the_mean_p01) { dropout_statistics(0.1); }
Test(fused, dropout_keeps_the_mean_p05) { dropout_statistics(0.5); }

Test(fused, dropout_kept_values_are_exactly_x_times_1_over_1_minus_p) {
    tg_rng r0 = tg_rng_new(3);
    tg_tensor *x = tg_randn(TG_SHAPE(1000), &r0);
    tg_real p = 0.3;
    tg_rng rng = tg_rng_new(9);
    tg_tensor *y = tg_dropout(x, p, &rng);
    TG_REQUIRE(y);
    int kept = 0;
    for (int i = 0; i < 1000; i++) {
        /* As PyTorch: x * (1 / (1 - p)), the scale computed once. */
        cr_expect(y->data[i] == 0 || y->data[i] == x->data[i] * (1 / (1 - p)), "element %d", i);
        kept += y->data[i] != 0;
    }
    cr_expect(kept > 600 && kept < 800, "kept %d of 1000", kept);
}

Test(fused, dropout_p0_is_identity_and_p1_is_zero) {
    tg_tensor *x = leaf(TG_SHAPE(2, 3), (tg_real[]){1, -2, 3, 4, 5, -6});
    tg_rng rng = tg_rng_new(1);
    cr_expect_eq(tg_dropout(x, 0, &rng), x, "p = 0 returns x itself");
    cr_expect_eq(tg_dropout(x, 0, NULL), x, "p = 0 needs no rng");
    cr_expect_eq(rng.counter, 0, "p = 0 draws nothing");
    tg_tensor *y = tg_dropout(x, 1, NULL);
    TG_REQUIRE(y);
    expect_close(y, (tg_real[]){0, 0, 0, 0, 0, 0}, 6, 0);
    cr_assert_eq(tg_backward(tg_sum_all(y)), 0, "%s", tg_last_error());
    expect_close(x->grad, (tg_real[]){0, 0, 0, 0, 0, 0}, 6, 0);
}

Test(fused, dropout_gradient_is_the_mask_over_1_minus_p) {
    tg_rng r0 = tg_rng_new(5);
    tg_tensor *x = tg_randn(TG_SHAPE(100000), &r0); /* above the OpenMP threshold */
    tg_set_requires_grad(x, true);
    tg_rng rng = tg_rng_new(6);
    tg_tensor *y = tg_dropout(x, 0.25, &rng);
    TG_REQUIRE(y);
    cr_assert_eq(tg_backward(tg_sum_all(y)), 0, "%s", tg_last_error());
    for (int64_t i = 0; i < x->size; i++)
        cr_assert(x->grad->data[i] == (y->data[i] != 0 ? 1 / (tg_real)0.75 : 0), "element %lld", (long long)i);
}

Test(fused, dropout_mask_depends_only_on_the_rng_state) {
    tg_tensor *x = tg_ones(TG_SHAPE(300000)); /* 150 us of work: threads split it (parallel.h) */
    tg_rng a = tg_rng_new(77), b = a;
    tg_tensor *y1 = tg_dropout(x, 0.5, &a);
    tg_tensor *y2 = tg_dropout(x, 0.5, &b);
    TG_REQUIRE(y1);
    TG_REQUIRE(y2);
    cr_expect(memcmp(y1->data, y2->data, sizeof(tg_real) * 300000) == 0, "same rng state, same mask");
    tg_tensor *y3 = tg_dropout(x, 0.5, &a); /* the counter moved on: another mask */
    TG_REQUIRE(y3);
    cr_expect(memcmp(y1->data, y3->data, sizeof(tg_real) * 300000) != 0, "next call, new mask");
    int saved = tg_get_num_threads();
    tg_rng c = tg_rng_new(77), d = c;
    tg_set_num_threads(1);
    tg_tensor *t1 = tg_dropout(x, 0.3, &c);
    tg_set_num_threads(2);
    tg_tensor *t2 = tg_dropout(x, 0.3, &d);
    tg_set_num_threads(saved);
    TG_REQUIRE(t1);
    TG_REQUIRE(t2);
    cr_expect(memcmp(t1->data, t2->data, sizeof(tg_real) * 300000) == 0, "1 thread and 2 threads differ");
}

Test(fused, dropout_errors) {
    tg_tensor *x = tg_ones(TG_SHAPE(2, 3));
    tg_rng rng = tg_rng_new(1);
    cr_expect_null(tg_dropout(x, -0.1, &rng));
    cr_expect(error_has("dropout", "(2,3)"), "%s", tg_last_error());
    cr_expect(error_has("dropout", "[0, 1]"), "%s", tg_last_error());
    cr_expect_null(tg_dropout(x, 1.5, &rng));
    cr_expect(error_has("dropout", "p = 1.5"), "%s", tg_last_error());
    cr_expect_null(tg_dropout(x, NAN, &rng));
    cr_expect_null(tg_dropout(x, 0.5, NULL));
    cr_expect(error_has("dropout", "NULL rng"), "%s", tg_last_error());
    tg_clear_error();
    cr_expect_null(tg_dropout(NULL, 0.5, &rng));
    cr_expect_str_eq(tg_last_error(), "dropout: NULL input");
    cr_expect_eq(rng.counter, 0, "failed calls draw nothing");
}

/* ======================================================================
 * masked softmax
 * ====================================================================== */

/* Rows sum to 1 and entries at or past each row's visible count are exactly 0;
 * a row with no visible key is uniform. */
static void expect_prefix_rows(const tg_tensor *y, const int *visible) {
    int K = y->shape[2];
    for (int64_t r = 0; r < y->size / K; r++) {
        double s = 0;
        for (int k = 0; k < K; k++) {
            s += y->data[r * K + k];
            if (visible[r] == 0)
                cr_expect(fabs(y->data[r * K + k] - 1.0 / K) < 1e-15, "row %lld: no visible key, not uniform",
                          (long long)r);
            else if (k >= visible[r])
                cr_expect(y->data[r * K + k] == 0, "row %lld key %d not masked", (long long)r, k);
            else
                cr_expect(y->data[r * K + k] > 0, "row %lld key %d masked", (long long)r, k);
        }
        cr_expect(fabs(s - 1) < 1e-12, "row %lld sums to %.17g", (long long)r, s);
    }
}

Test(fused, masked_softmax_d2l_example_1d_lens) {
    /* d2l: masked_softmax(torch.rand(2, 2, 4), torch.tensor([2, 3])) */
    tg_rng rng = tg_rng_new(2);
    tg_tensor *x = tg_rand(TG_SHAPE(2, 2, 4), &rng);
    tg_tensor *y = tg_masked_softmax(x, (tg_mask){(const int[]){2, 3}, 1, false});
    TG_REQUIRE(y);
    expect_prefix_rows(y, (const int[]){2, 2, 3, 3});
    /* the visible part is the softmax of the visible scores */
    tg_tensor *ref = tg_softmax(tg_slice(tg_slice(x, 0, 0, 1), 2, 0, 2));
    for (int q = 0; q < 2; q++)
        for (int k = 0; k < 2; k++) cr_expect(fabs(y->data[q * 4 + k] - ref->data[q * 2 + k]) < 1e-15);
}

Test(fused, masked_softmax_d2l_example_2d_lens) {
    /* d2l: masked_softmax(torch.rand(2, 2, 4), torch.tensor([[1, 3], [2, 4]])) */
    tg_rng rng = tg_rng_new(3);
    tg_tensor *x = tg_rand(TG_SHAPE(2, 2, 4), &rng);
    tg_tensor *y = tg_masked_softmax(x, (tg_mask){(const int[]){1, 3, 2, 4}, 2, false});
    TG_REQUIRE(y);
    expect_prefix_rows(y, (const int[]){1, 3, 2, 4});
    cr_expect(y->data[0] == 1, "a single visible key gets all the weight");
    tg_tensor *full = tg_softmax(x);
    for (int k = 0; k < 4; k++)
        cr_expect(fabs(y->data[12 + k] - full->data[12 + k]) < 1e-15, "length K is plain softmax");
}

Test(fused, masked_softmax_zero_length_is_uniform_and_long_length_is_everything) {
    tg_tensor *x = randn_leaf(TG_SHAPE(2, 3, 5), 4);
    tg_tensor *y = tg_masked_softmax(x, (tg_mask){(const int[]){0, 9}, 1, false});
    TG_REQUIRE(y);
    cr_expect(all_finite(y), "no NaN");
    for (int i = 0; i < 15; i++) cr_expect(fabs(y->data[i] - 0.2) < 1e-15, "uniform 1/K: %.17g", (double)y->data[i]);
    tg_tensor *full = tg_softmax(x);
    for (int i = 15; i < 30; i++)
        cr_expect(fabs(y->data[i] - full->data[i]) < 1e-15, "length 9 > K = 5 means all keys");
    backward_random(y, 11);
    for (int i = 0; i < 15; i++) cr_expect(x->grad->data[i] == 0, "fully masked row: no gradient");
    cr_expect(all_finite(x->grad));
}

Test(fused, masked_softmax_causal_and_causal_with_lens) {
    tg_rng rng = tg_rng_new(5);
    tg_tensor *x = tg_randn(TG_SHAPE(2, 4, 4), &rng);
    tg_tensor *y = tg_masked_softmax(x, (tg_mask){NULL, 0, true});
    TG_REQUIRE(y);
    expect_prefix_rows(y, (const int[]){1, 2, 3, 4, 1, 2, 3, 4});
    y = tg_masked_softmax(x, (tg_mask){(const int[]){2, 9}, 1, true});
    TG_REQUIRE(y);
    expect_prefix_rows(y, (const int[]){1, 2, 2, 2, 1, 2, 3, 4});
    y = tg_masked_softmax(x, (tg_mask){(const int[]){3, 0, 1, 4, 4, 4, 4, 2}, 2, true});
    TG_REQUIRE(y);
    expect_prefix_rows(y, (const int[]){1, 0, 1, 4, 1, 2, 3, 2}); /* (b0,q1): length 0, uniform */
}

Test(fused, masked_softmax_is_stable_for_large_logits) {
    tg_tensor *x = tg_from_array(TG_SHAPE(1, 2, 3), (tg_real[]){1e4, 1e4 - 1, -1e4, 1e4, 2e4, -1e4});
    tg_tensor *y = tg_masked_softmax(x, (tg_mask){(const int[]){2, 1}, 2, false});
    TG_REQUIRE(y);
    double e = exp(-1.0);
    expect_close(y, (tg_real[]){1 / (1 + e), e / (1 + e), 0, 1, 0, 0}, 6, 1e-15);
}

Test(fused, masked_softmax_masked_entries_get_zero_gradient) {
    tg_tensor *x = randn_leaf(TG_SHAPE(3, 4, 6), 6);
    const int lens[] = {2, 5, 0};
    tg_tensor *y = tg_masked_softmax(x, (tg_mask){lens, 1, true});
    TG_REQUIRE(y);
    backward_random(y, 12);
    for (int b = 0; b < 3; b++)
        for (int q = 0; q < 4; q++) {
            int L = lens[b] < q + 1 ? lens[b] : q + 1;
            double s = 0;
            for (int k = 0; k < 6; k++) {
                tg_real g = x->grad->data[(b * 4 + q) * 6 + k];
                if (k >= L) cr_expect(g == 0, "masked (%d,%d,%d) has gradient %g", b, q, k, (double)g);
                s += g;
            }
            cr_expect(fabs(s) < 1e-12, "softmax gradients sum to zero over a row");
        }
}

Test(fused, masked_softmax_and_sparsemax_errors) {
    tg_tensor *x2 = tg_zeros(TG_SHAPE(2, 3)), *x3 = tg_zeros(TG_SHAPE(2, 3, 4));
    tg_tensor *(*fn[2])(tg_tensor *, tg_mask) = {tg_masked_softmax, tg_sparsemax};
    const char *name[2] = {"masked_softmax", "sparsemax"};
    for (int i = 0; i < 2; i++) {
        cr_expect_null(fn[i](x2, (tg_mask){NULL, 0, false}));
        cr_expect(error_has(name[i], "(2,3) must be 3-D"), "%s", tg_last_error());
        cr_expect_null(fn[i](x3, (tg_mask){(const int[]){1, 2}, 3, false}));
        cr_expect(error_has(name[i], "lens_ndim 3"), "%s", tg_last_error());
        cr_expect_null(fn[i](x3, (tg_mask){(const int[]){1, -2}, 1, false}));
        cr_expect(error_has(name[i], "length -2 at position 1"), "%s", tg_last_error());
        cr_expect_null(fn[i](x3, (tg_mask){(const int[]){1, 2, 3, 4, 5, -1}, 2, false}));
        cr_expect(error_has(name[i], "(2,3,4)"), "%s", tg_last_error());
        cr_expect_null(fn[i](x3, (tg_mask){(const int[]){1, 2}, 0, false}));
        cr_expect(error_has(name[i], "lens_ndim 0"), "%s", tg_last_error());
        tg_clear_error();
        cr_expect_null(fn[i](NULL, (tg_mask){NULL, 0, false}));
        cr_expect(error_has(name[i], "NULL input"), "%s", tg_last_error());
    }
}

/* ======================================================================
 * sparsemax
 * ====================================================================== */

/* Reference: tau by bisection on f(tau) = sum_j max(z_j - tau, 0) - 1, which is
 * decreasing; independent of the sort-based algorithm of the op. */
static void sparsemax_ref(const tg_real *z, double *p, int K) {
    double lo = z[0], hi;
    for (int k = 1; k < K; k++)
        if (z[k] > lo) lo = z[k];
    hi = lo;
    lo -= 1; /* f(max - 1) >= 0, f(max) = -1 */
    for (int it = 0; it < 200; it++) {
        double mid = 0.5 * (lo + hi), f = -1;
        for (int k = 0; k < K; k++) f += fmax(z[k] - mid, 0);
        if (f > 0)
            lo = mid;
        else
            hi = mid;
    }
    for (int k = 0; k < K; k++) p[k] = fmax(z[k] - 0.5 * (lo + hi), 0);
}

static tg_tensor *sparsemax_row(int K, const tg_real *v) {
    tg_tensor *x = tg_from_array(3, (const int[]){1, 1, K}, v);
    return tg_sparsemax(x, (tg_mask){NULL, 0, false});
}

Test(fused, sparsemax_small_examples) {
    tg_tensor *y = sparsemax_row(3, (tg_real[]){0.1, 1.1, 0.2});
    TG_REQUIRE(y);
    /* tau = (1.1 + 0.2 - 1) / 2 = 0.15: not [0, 1, 0], since 0.2 > tau */
    expect_close(y, (tg_real[]){0, 0.95, 0.05}, 3, 1e-15);
    cr_expect(y->data[0] == 0);
    y = sparsemax_row(3, (tg_real[]){0.1, 2.1, 0.2}); /* gap > 1: one-hot */
    expect_close(y, (tg_real[]){0, 1, 0}, 3, 0);
    y = sparsemax_row(2, (tg_real[]){1, 1});
    expect_close(y, (tg_real[]){0.5, 0.5}, 2, 0);
    y = sparsemax_row(4, (tg_real[]){-3, -3, -3, -3});
    expect_close(y, (tg_real[]){0.25, 0.25, 0.25, 0.25}, 4, 1e-15);
    y = sparsemax_row(3, (tg_real[]){1e4, 1e4 - 0.5, -1e4});
    expect_close(y, (tg_real[]){0.75, 0.25, 0}, 3, 1e-12);
}

/* The seed blog post (seeds/003) works scaled dot-product attention by hand
 * for q = (1,-2,3,-4) against the keys/values K = V = rows (1,-2,3,-4),
 * (-8,7,6,-5), (10,9,12,11), and lists "sparse softmax" (cut the weights
 * below a threshold) as the alternative to softmax. The scores q K^T / sqrt(4)
 * are (15, 8, -8) (the post prints 42, 16, -16 / 2, an arithmetic slip: the
 * first dot product is 1 + 4 + 9 + 16 = 30). softmax gives weights of about
 * (0.9991, 9.1e-4, 1e-10) and a value close to q; sparsemax gives exactly
 * (1, 0, 0) and retrieves q itself. */
Test(fused, sparsemax_on_the_seed_attention_example) {
    tg_tensor *q = tg_from_array(TG_SHAPE(1, 1, 4), (tg_real[]){1, -2, 3, -4});
    tg_tensor *kv = tg_from_array(TG_SHAPE(1, 3, 4), (tg_real[]){1, -2, 3, -4, -8, 7, 6, -5, 10, 9, 12, 11});
    tg_tensor *scores = tg_mul_scalar(tg_matmul_t(q, kv, false, true), 0.5);
    TG_REQUIRE(scores);
    expect_close(scores, (tg_real[]){15, 8, -8}, 3, 0);
    tg_tensor *w_soft = tg_masked_softmax(scores, (tg_mask){NULL, 0, false});
    tg_tensor *w_sparse = tg_sparsemax(scores, (tg_mask){NULL, 0, false});
    TG_REQUIRE(w_soft);
    TG_REQUIRE(w_sparse);
    cr_expect(fabs(w_soft->data[0] - 0.999088) < 1e-6, "softmax weight %g", (double)w_soft->data[0]);
    cr_expect(w_soft->data[2] > 0);
    expect_close(w_sparse, (tg_real[]){1, 0, 0}, 3, 0);
    tg_tensor *out = tg_matmul(w_sparse, kv);
    expect_close(out, (tg_real[]){1, -2, 3, -4}, 4, 0);
}

Test(fused, sparsemax_matches_a_bisection_reference) {
    tg_rng rng = tg_rng_new(8);
    const int B = 4, Q = 5, K = 9;
    tg_tensor *x = tg_normal(TG_SHAPE(4, 5, 9), 0, 2, &rng);
    tg_tensor *y = tg_sparsemax(x, (tg_mask){NULL, 0, false});
    TG_REQUIRE(y);
    int zeros = 0;
    for (int r = 0; r < B * Q; r++) {
        double p[9], s = 0;
        sparsemax_ref(x->data + r * K, p, K);
        for (int k = 0; k < K; k++) {
            tg_real v = y->data[r * K + k];
            cr_expect(fabs(v - p[k]) < 1e-12, "row %d key %d: %.17g vs %.17g", r, k, (double)v, p[k]);
            cr_expect(v >= 0);
            if (p[k] == 0) {
                cr_expect(v == 0, "exact zero expected");
                zeros++;
            }
            s += v;
        }
        cr_expect(fabs(s - 1) < 1e-12, "row %d sums to %.17g", r, s);
    }
    cr_expect(zeros > B * Q, "sparsemax should be sparse: %d zeros", zeros);
}

Test(fused, sparsemax_masking_and_gradient) {
    tg_tensor *x = randn_leaf(TG_SHAPE(3, 2, 5), 9);
    const int lens[] = {3, 0, 7};
    tg_tensor *y = tg_sparsemax(x, (tg_mask){lens, 1, false});
    TG_REQUIRE(y);
    for (int q = 0; q < 2; q++) {
        double p[5];
        sparsemax_ref(x->data + q * 5, p, 3); /* batch 0: 3 visible keys */
        for (int k = 0; k < 5; k++) cr_expect(fabs(y->data[q * 5 + k] - (k < 3 ? p[k] : 0)) < 1e-12);
        for (int k = 0; k < 5; k++) cr_expect(y->data[10 + q * 5 + k] == (tg_real)0.2, "length 0: uniform");
        sparsemax_ref(x->data + 20 + q * 5, p, 5); /* batch 2: length 7 > K */
        for (int k = 0; k < 5; k++) cr_expect(fabs(y->data[20 + q * 5 + k] - p[k]) < 1e-12);
    }
    backward_random(y, 13);
    for (int r = 0; r < 6; r++) {
        double s = 0;
        for (int k = 0; k < 5; k++) {
            tg_real g = x->grad->data[r * 5 + k];
            if (y->data[r * 5 + k] == 0 || (r < 2 && k >= 3) || (r >= 2 && r < 4))
                cr_expect(g == 0, "off the support or masked (%d,%d): gradient %g", r, k, (double)g);
            s += g;
        }
        cr_expect(fabs(s) < 1e-12, "gradient sums to zero over the support");
    }
}

/* ======================================================================
 * layer norm
 * ====================================================================== */

Test(fused, layer_norm_rows_have_mean_0_and_variance_1) {
    tg_rng rng = tg_rng_new(10);
    tg_tensor *x = tg_normal(TG_SHAPE(3, 4, 16), 5, 3, &rng);
    tg_real eps = 1e-5;
    tg_tensor *y = tg_layer_norm(x, NULL, NULL, eps);
    TG_REQUIRE(y);
    for (int r = 0; r < 12; r++) {
        double mx = 0, vx = 0, my = 0, vy = 0;
        for (int j = 0; j < 16; j++) {
            mx += x->data[r * 16 + j];
            my += y->data[r * 16 + j];
        }
        mx /= 16;
        my /= 16;
        for (int j = 0; j < 16; j++) {
            vx += pow(x->data[r * 16 + j] - mx, 2);
            vy += pow(y->data[r * 16 + j] - my, 2);
        }
        vx /= 16;
        vy /= 16; /* biased, as PyTorch */
        cr_expect(fabs(my) < 1e-12, "row %d mean %g", r, my);
        cr_expect(fabs(vy - vx / (vx + eps)) < 1e-12, "row %d variance %.15g, expected %.15g", r, vy, vx / (vx + eps));
        cr_expect(fabs(vy - 1) < 1e-5, "row %d variance %g", r, vy);
    }
}

Test(fused, layer_norm_by_hand) {
    /* x = (1,2,3,4): mean 2.5, biased var 1.25; y = (x - 2.5)/sqrt(1.25 + eps) * gamma + beta */
    tg_tensor *x = tg_from_array(TG_SHAPE(2, 4), (tg_real[]){1, 2, 3, 4, -1, -1, -1, -1});
    tg_tensor *gamma = tg_from_array(TG_SHAPE(4), (tg_real[]){1, 2, 0.5, -1});
    tg_tensor *beta = tg_from_array(TG_SHAPE(4), (tg_real[]){0, 0.5, 0, 1});
    double rs = 1 / sqrt(1.25 + 1e-5);
    tg_tensor *y = tg_layer_norm(x, gamma, beta, 1e-5);
    TG_REQUIRE(y);
    expect_close(y, (tg_real[]){-1.5 * rs, -0.5 * rs * 2 + 0.5, 0.5 * rs * 0.5, -1.5 * rs + 1, 0, 0.5, 0, 1}, 8,
                 1e-14); /* a constant row normalises to beta */
    y = tg_layer_norm(tg_slice(x, 0, 0, 1), NULL, NULL, 0);
    TG_REQUIRE(y);
    double r0 = 1 / sqrt(1.25);
    expect_close(y, (tg_real[]){-1.5 * r0, -0.5 * r0, 0.5 * r0, 1.5 * r0}, 4, 1e-14);
}

Test(fused, layer_norm_parameter_gradients_do_not_depend_on_threads) {
    tg_rng rng = tg_rng_new(11);
    tg_tensor *x = tg_randn(TG_SHAPE(3000, 96), &rng); /* 140 us of work: threads split it */
    tg_tensor *gamma = tg_randn(TG_SHAPE(96), &rng), *beta = tg_randn(TG_SHAPE(96), &rng);
    tg_set_requires_grad(x, true);
    tg_set_requires_grad(gamma, true);
    tg_set_requires_grad(beta, true);
    tg_real saved[3][96];
    for (int pass = 0; pass < 2; pass++) {
        int old = tg_get_num_threads();
        tg_set_num_threads(pass == 0 ? 1 : 3);
        tg_zero_grad(x);
        tg_zero_grad(gamma);
        tg_zero_grad(beta);
        tg_tensor *y = tg_layer_norm(x, gamma, beta, 1e-5);
        TG_REQUIRE(y);
        backward_random(y, 14);
        tg_set_num_threads(old);
        if (pass == 0) {
            memcpy(saved[0], gamma->grad->data, sizeof saved[0]);
            memcpy(saved[1], beta->grad->data, sizeof saved[1]);
            memcpy(saved[2], x->grad->data, sizeof saved[2]);
        } else {
            cr_expect(memcmp(saved[0], gamma->grad->data, sizeof saved[0]) == 0, "dgamma differs");
            cr_expect(memcmp(saved[1], beta->grad->data, sizeof saved[1]) == 0, "dbeta differs");
            cr_expect(memcmp(saved[2], x->grad->data, sizeof saved[2]) == 0, "dx differs");
        }
    }
    /* dx of each row sums to zero (the mean is subtracted) */
    for (int r = 0; r < 512; r++) {
        double s = 0;
        for (int j = 0; j < 96; j++) s += x->grad->data[r * 96 + j];
        cr_expect(fabs(s) < 1e-10, "row %d: %g", r, s);
    }
}

Test(fused, layer_norm_errors) {
    tg_tensor *x = tg_zeros(TG_SHAPE(2, 4)), *g3 = tg_ones(TG_SHAPE(3)), *g4 = tg_ones(TG_SHAPE(4));
    cr_expect_null(tg_layer_norm(x, g3, g4, 1e-5));
    cr_expect_str_eq(tg_last_error(), "layer_norm: x (2,4) with gamma (3) and beta (4): gamma and beta must "
                                      "have shape (4)");
    cr_expect_null(tg_layer_norm(x, g4, tg_ones(TG_SHAPE(1, 4)), 1e-5));
    cr_expect(error_has("layer_norm", "beta (1,4)"), "%s", tg_last_error());
    cr_expect_null(tg_layer_norm(tg_zeros(0, NULL), NULL, NULL, 1e-5));
    cr_expect(error_has("layer_norm", "no last axis"), "%s", tg_last_error());
    cr_expect_null(tg_layer_norm(x, NULL, NULL, -1));
    cr_expect(error_has("layer_norm", "eps"), "%s", tg_last_error());
    tg_clear_error();
    cr_expect_null(tg_layer_norm(x, g4, NULL, 1e-5));
    cr_expect_str_eq(tg_last_error(), "layer_norm: NULL input");
    tg_clear_error();
    cr_expect_null(tg_layer_norm(NULL, NULL, NULL, 1e-5));
    cr_expect_str_eq(tg_last_error(), "layer_norm: NULL input");
}

/* ======================================================================
 * cross-entropy
 * ====================================================================== */

Test(fused, cross_entropy_is_minus_mean_log_softmax_at_the_targets) {
    tg_tensor *x = randn_leaf(TG_SHAPE(2, 3, 5), 12);
    const int t[] = {4, 0, 2, TG_IGNORE_INDEX, 1, 3};
    tg_tensor *loss = tg_cross_entropy(x, t, NULL, TG_IGNORE_INDEX);
    TG_REQUIRE(loss);
    cr_expect_eq(loss->ndim, 0, "shape ()");
    tg_tensor *ls = tg_log_softmax(x);
    double want = 0;
    for (int r = 0; r < 6; r++)
        if (t[r] != TG_IGNORE_INDEX) want -= ls->data[r * 5 + t[r]];
    want /= 5;
    cr_expect(fabs(tg_item(loss) - want) < 1e-14, "%.17g vs %.17g", (double)tg_item(loss), want);
    cr_assert_eq(tg_backward(loss), 0, "%s", tg_last_error());
    for (int r = 0; r < 6; r++)
        for (int j = 0; j < 5; j++) {
            double g = t[r] == TG_IGNORE_INDEX ? 0 : (exp(ls->data[r * 5 + j]) - (j == t[r])) / 5;
            cr_expect(fabs(x->grad->data[r * 5 + j] - g) < 1e-15, "row %d class %d", r, j);
        }
}

Test(fused, cross_entropy_mask_and_custom_ignore_index) {
    tg_tensor *x = tg_from_array(TG_SHAPE(3, 2), (tg_real[]){0, 0, 1, 3, 2, 0});
    /* row 1 masked out: its target 99 is never read; row 2 target 0 */
    tg_tensor *loss = tg_cross_entropy(x, (const int[]){1, 99, 0}, (const tg_real[]){1, 0, 1}, TG_IGNORE_INDEX);
    TG_REQUIRE(loss);
    double want = (log(2.0) + log(1 + exp(-2.0))) / 2;
    cr_expect(fabs(tg_item(loss) - want) < 1e-15);
    loss = tg_cross_entropy(x, (const int[]){1, 7, 0}, NULL, 7); /* ignore_index 7 */
    TG_REQUIRE(loss);
    cr_expect(fabs(tg_item(loss) - want) < 1e-15);
}

Test(fused, cross_entropy_fully_ignored_batch_is_zero) {
    tg_tensor *x = leaf(TG_SHAPE(2, 3), (tg_real[]){1, 2, 3, 4, 5, 6});
    tg_tensor *loss = tg_cross_entropy(x, (const int[]){TG_IGNORE_INDEX, TG_IGNORE_INDEX}, NULL, TG_IGNORE_INDEX);
    TG_REQUIRE(loss);
    cr_expect(tg_item(loss) == 0, "loss %g", (double)tg_item(loss));
    cr_assert_eq(tg_backward(loss), 0, "%s", tg_last_error());
    expect_close(x->grad, (tg_real[]){0, 0, 0, 0, 0, 0}, 6, 0);
    loss = tg_cross_entropy(x, (const int[]){0, 1}, (const tg_real[]){0, 0}, TG_IGNORE_INDEX);
    TG_REQUIRE(loss);
    cr_expect(tg_item(loss) == 0);
}

Test(fused, cross_entropy_is_stable_for_large_logits) {
    tg_tensor *x = leaf(TG_SHAPE(2, 3), (tg_real[]){1e4, 0, -1e4, 1e4, 1e4, 0});
    tg_tensor *loss = tg_cross_entropy(x, (const int[]){1, 0}, NULL, TG_IGNORE_INDEX);
    TG_REQUIRE(loss);
    double want = (1e4 + log(2.0)) / 2; /* row 0: lse = 1e4, row 1: lse = 1e4 + log 2 */
    cr_expect(isfinite((double)tg_item(loss)) && fabs(tg_item(loss) - want) < 1e-9, "%.17g", (double)tg_item(loss));
    cr_assert_eq(tg_backward(loss), 0);
    cr_expect(all_finite(x->grad));
    expect_close(x->grad, (tg_real[]){0.5, -0.5, 0, -0.25, 0.25, 0}, 6, 1e-12); /* lse = 1e4 + log 2 rounds at 1e-12 */
}

Test(fused, cross_entropy_does_not_depend_on_threads) {
    tg_rng rng = tg_rng_new(13);
    tg_tensor *x = tg_normal(TG_SHAPE(6000, 50), 0, 3, &rng);
    int *t = tg_arena_alloc(sizeof(int) * 6000);
    for (int i = 0; i < 6000; i++) t[i] = (i * 7) % 50;
    tg_real a = 0, b = 0;
    int old = tg_get_num_threads();
    tg_set_num_threads(1);
    a = tg_item(tg_cross_entropy(x, t, NULL, TG_IGNORE_INDEX));
    tg_set_num_threads(4);
    b = tg_item(tg_cross_entropy(x, t, NULL, TG_IGNORE_INDEX));
    tg_set_num_threads(old);
    cr_expect(a == b, "%.17g vs %.17g", (double)a, (double)b);
}

Test(fused, cross_entropy_errors) {
    tg_tensor *x = tg_zeros(TG_SHAPE(2, 3));
    cr_expect_null(tg_cross_entropy(x, (const int[]){0, 3}, NULL, TG_IGNORE_INDEX));
    cr_expect_str_eq(tg_last_error(), "cross_entropy: logits (2,3): target 3 of row 1 is outside [0, 3) and is "
                                      "not ignore_index -100");
    cr_expect_null(tg_cross_entropy(x, (const int[]){-1, 0}, NULL, TG_IGNORE_INDEX));
    cr_expect(error_has("cross_entropy", "target -1 of row 0"), "%s", tg_last_error());
    cr_expect_null(tg_cross_entropy(x, NULL, NULL, TG_IGNORE_INDEX));
    cr_expect(error_has("cross_entropy", "NULL targets"), "%s", tg_last_error());
    cr_expect_null(tg_cross_entropy(tg_zeros(0, NULL), (const int[]){0}, NULL, TG_IGNORE_INDEX));
    cr_expect(error_has("cross_entropy", "no class axis"), "%s", tg_last_error());
    tg_clear_error();
    cr_expect_null(tg_cross_entropy(NULL, (const int[]){0}, NULL, TG_IGNORE_INDEX));
    cr_expect_str_eq(tg_last_error(), "cross_entropy: NULL input");
}

/* r + x W^T + b as one op (tg_affine_add): the values of tg_add(r,
 * tg_affine(x, W, b)) up to rounding (the sums start from r + b), the same
 * gradients up to rounding, and a residual of another shape refused. */
Test(fused_ops, affine_add_is_a_residual_linear) {
    tg_rng rng = tg_rng_new(21);
    tg_tensor *x = tg_normal(TG_SHAPE(2, 5, 12), 0, 1, &rng), *w = tg_normal(TG_SHAPE(7, 12), 0, 1, &rng);
    tg_tensor *b = tg_normal(TG_SHAPE(7), 0, 1, &rng), *r = tg_normal(TG_SHAPE(2, 5, 7), 0, 1, &rng);
    tg_tensor *ps[4] = {x, w, b, r}, *g1[4];
    for (int i = 0; i < 4; i++) tg_set_requires_grad(ps[i], true);
    tg_scope_begin();
    tg_tensor *c = tg_normal(TG_SHAPE(2, 5, 7), 0, 1, &rng);
    tg_tensor *y1 = tg_affine_add(r, x, w, b), *y2 = tg_add(r, tg_affine(x, w, b));
    cr_assert(y1 && y2, "%s", tg_last_error());
    cr_expect(max_diff(y1, y2) < 1e-5, "affine_add differs from add(affine) by %g", max_diff(y1, y2));
    cr_assert_eq(tg_backward(tg_sum_all(tg_mul(y1, c))), 0, "%s", tg_last_error());
    grads_of(ps, 4, g1);
    for (int i = 0; i < 4; i++) tg_zero_grad(ps[i]);
    cr_assert_eq(tg_backward(tg_sum_all(tg_mul(y2, c))), 0, "%s", tg_last_error());
    for (int i = 0; i < 4; i++)
        cr_expect(max_diff(g1[i], ps[i]->grad) < 1e-4, "gradient %d differs by %g", i, max_diff(g1[i], ps[i]->grad));
    cr_expect_null(tg_affine_add(x, x, w, b));
    cr_expect(strstr(tg_last_error(), "affine_add: r (2,5,12)"), "%s", tg_last_error());
    tg_scope_end();
    for (int i = 0; i < 4; i++) tg_free(ps[i]), tg_free(g1[i]);
}
