/* Positional encodings: the checks of d2l's section on the sinusoidal table
 * (the formula, the columns 6..9 of its figure, the rotation property that
 * makes relative positions linear), odd widths, the max_len error, eval mode,
 * and gradient checks of the fixed and learned encodings in double. */
#include "test_util.h"

/* P[i, c] straight from the formula, in double. */
static double P_ref(int i, int c, int d) {
    double w = pow(10000.0, -(double)(2 * (c / 2)) / d);
    return (c % 2 == 0) ? sin(i * w) : cos(i * w);
}

static double P_at(const tg_posenc *m, int i, int c) { return (double)m->P->data[(int64_t)i * m->num_hiddens + c]; }

Test(posenc, table_matches_the_formula) {
    tg_posenc *pe = tg_posenc_new(32, 0, 0, NULL); /* max_len 0: d2l's default 1000 */
    TG_REQUIRE(pe);
    cr_assert_eq(pe->max_len, 1000);
    cr_assert(pe->P->ndim == 2 && pe->P->shape[0] == 1000 && pe->P->shape[1] == 32);
    cr_expect(!pe->P->requires_grad, "the fixed table is a constant");
    const int rows[] = {0, 1, 7, 99, 500, 999};
    for (int a = 0; a < 6; a++)
        for (int j = 0; j < 16; j++) {
            int i = rows[a];
            double w = 1.0 / pow(10000.0, 2.0 * j / 32);
            cr_expect(fabs(P_at(pe, i, 2 * j) - sin(i * w)) < 1e-12, "P[%d,%d]", i, 2 * j);
            cr_expect(fabs(P_at(pe, i, 2 * j + 1) - cos(i * w)) < 1e-12, "P[%d,%d]", i, 2 * j + 1);
        }
    tg_params p;
    tg_params_init(&p);
    tg_posenc_params(pe, &p, "pos_encoding");
    cr_expect_eq(p.n, 0, "the fixed table is not a parameter");
    tg_params_free(&p);
    tg_posenc_free(pe);
}

/* d2l plots columns 6..9 of a (60, 32) table; values computed with Python's
 * math module (column 8 at i = 10 is sin(10 / 10000^(8/32)) = sin(1)). */
Test(posenc, columns_6_to_9_as_in_the_d2l_figure) {
    tg_posenc *pe = tg_posenc_new(32, 0, 1000, NULL);
    TG_REQUIRE(pe);
    const int pos[4] = {0, 10, 30, 59};
    const double want[4][4] = {
        {0.0, 1.0, 0.0, 1.0},
        {0.978552492537, -0.205997619765, 0.841470984808, 0.540302305868},
        {-0.812452916718, 0.583026807373, 0.141120008060, -0.989992496600},
        {-0.875790246524, -0.482691872827, -0.373876664830, 0.927478430744},
    };
    for (int a = 0; a < 4; a++)
        for (int c = 6; c <= 9; c++)
            cr_expect(fabs(P_at(pe, pos[a], c) - want[a][c - 6]) < 1e-11, "P[%d,%d] = %.12f, expected %.12f", pos[a], c,
                      P_at(pe, pos[a], c), want[a][c - 6]);
    /* Higher columns oscillate more slowly: column 6 has turned further than
     * column 8 by position 10 (phase 10 / 10000^(6/32) vs 10 / 10000^(8/32)). */
    cr_expect(P_ref(10, 6, 32) > P_ref(10, 8, 32));
    tg_posenc_free(pe);
}

/* For a fixed offset delta the 2x2 rotation by delta * w_j, the same for
 * every position i, maps (P[i,2j], P[i,2j+1]) onto (P[i+delta,2j], P[i+delta,2j+1]). */
Test(posenc, relative_positions_are_a_fixed_rotation) {
    const int d = 32, max_len = 1000;
    tg_posenc *pe = tg_posenc_new(d, 0, max_len, NULL);
    TG_REQUIRE(pe);
    const int deltas[3] = {1, 5, 17};
    double worst = 0;
    for (int k = 0; k < 3; k++) {
        int delta = deltas[k];
        for (int j = 0; j < d / 2; j++) {
            double w = pow(10000.0, -2.0 * j / d);
            double c = cos(delta * w), s = sin(delta * w);
            for (int i = 0; i + delta < max_len; i++) {
                double x = P_at(pe, i, 2 * j), y = P_at(pe, i, 2 * j + 1);
                double rx = c * x + s * y, ry = -s * x + c * y;
                worst = fmax(worst, fabs(rx - P_at(pe, i + delta, 2 * j)));
                worst = fmax(worst, fabs(ry - P_at(pe, i + delta, 2 * j + 1)));
            }
        }
    }
    cr_expect(worst < 1e-5, "rotation error %g", worst);
    tg_posenc_free(pe);
}

Test(posenc, odd_width_ends_with_a_sine_column) {
    tg_posenc *pe = tg_posenc_new(5, 0, 50, NULL);
    TG_REQUIRE(pe);
    cr_assert_eq(pe->P->shape[1], 5);
    for (int i = 0; i < 50; i++)
        for (int c = 0; c < 5; c++) cr_expect(fabs(P_at(pe, i, c) - P_ref(i, c, 5)) < 1e-12, "P[%d,%d]", i, c);
    /* Column 4 = sin(i / 10000^(4/5)): zero at i = 0, not the cosine's 1. */
    cr_expect(P_at(pe, 0, 4) == 0 && fabs(P_at(pe, 3, 4) - sin(3 / pow(10000.0, 0.8))) < 1e-15);
    tg_posenc_free(pe);
}

/* d2l: pos_encoding(zeros((1, 60, 32))) has shape (1, 60, 32) and equals P[:, :60]. */
Test(posenc, d2l_shape_check) {
    tg_posenc *pe = tg_posenc_new(32, 0, 1000, NULL);
    TG_REQUIRE(pe);
    tg_posenc_train(pe, false);
    tg_scope_begin();
    tg_tensor *Y = tg_posenc_forward(pe, tg_zeros(TG_SHAPE(1, 60, 32)));
    TG_REQUIRE(Y);
    cr_assert(Y->ndim == 3 && Y->shape[0] == 1 && Y->shape[1] == 60 && Y->shape[2] == 32);
    expect_close(Y, pe->P->data, 60 * 32, 0);
    tg_scope_end();
    tg_posenc_free(pe);
}

/* forward(pe, x) fails with an error that has a (and b). */
static void expect_refused(tg_posenc *pe, tg_tensor *x, const char *a, const char *b) {
    tg_clear_error();
    cr_expect_null(tg_posenc_forward(pe, x));
    cr_expect(error_has(a, b), "%s", tg_last_error());
}

Test(posenc, errors_name_the_lengths) {
    tg_posenc *pe = tg_posenc_new(4, 0, 1000, NULL);
    TG_REQUIRE(pe);
    tg_scope_begin();
    /* 2000 > 1000 rows: an error, not a read past the table (ASan would see it). */
    expect_refused(pe, tg_zeros(TG_SHAPE(1, 2000, 4)), "posenc: sequence length 2000 > max_len 1000", NULL);
    tg_clear_error();
    cr_expect_null(tg_posenc_forward(pe, tg_zeros(TG_SHAPE(1, 3, 5))));
    cr_expect(error_has("posenc", "(1,3,5)"), "%s", tg_last_error());
    expect_refused(pe, NULL, "posenc", "NULL");
    /* Exactly max_len rows is fine. */
    TG_REQUIRE(tg_posenc_forward(pe, tg_zeros(TG_SHAPE(1, 1000, 4))));
    tg_scope_end();
    tg_posenc_free(pe);

    tg_posenc *lp = tg_posenc_learned_new(4, 0, 8, &(tg_rng){0});
    TG_REQUIRE(lp);
    tg_scope_begin();
    expect_refused(lp, tg_zeros(TG_SHAPE(2, 9, 4)), "posenc: sequence length 9 > max_len 8", NULL);
    tg_scope_end();
    tg_posenc_free(lp);

    tg_clear_error();
    cr_expect_null(tg_posenc_new(0, 0, 10, NULL));
    cr_expect(error_has("posenc", "num_hiddens"), "%s", tg_last_error());
    cr_expect_null(tg_posenc_new(4, (tg_real)1.5, 10, NULL));
    cr_expect(error_has("posenc", "dropout"), "%s", tg_last_error());
    cr_expect_null(tg_posenc_learned_new(4, 0, 10, NULL));
    tg_rng rng = tg_rng_new(1);
    cr_expect_null(tg_posenc_learned_new(4, 0, -1, &rng)); /* was a table of d2l's 1000 rows */
    cr_expect(error_has("posenc_learned", "max_len -1"), "%s", tg_last_error());
    cr_expect_null(tg_posenc_new(4, 0, -5, NULL));
    cr_expect(error_has("posenc", "max_len -5"), "%s", tg_last_error());
    tg_posenc_free(NULL);
}

/* Dropout is reached by train/eval: in eval the output is X + P[:T] exactly;
 * in training about half the entries are zeroed and the rest doubled. */
Test(posenc, eval_mode_is_x_plus_p_and_train_mode_drops) {
    tg_rng rng = tg_rng_new(7);
    tg_posenc *pe = tg_posenc_new(6, 0.5, 100, &rng);
    TG_REQUIRE(pe);
    tg_tensor *X = tg_randn(TG_SHAPE(3, 20, 6), &rng);
    tg_scope_begin();
    tg_posenc_train(pe, false);
    tg_tensor *Y = tg_posenc_forward(pe, X);
    TG_REQUIRE(Y);
    for (int b = 0; b < 3; b++)
        for (int t = 0; t < 20; t++)
            for (int c = 0; c < 6; c++) {
                int64_t k = ((int64_t)b * 20 + t) * 6 + c;
                cr_expect(Y->data[k] == X->data[k] + pe->P->data[t * 6 + c], "eval output [%d,%d,%d]", b, t, c);
            }
    tg_posenc_train(pe, true);
    expect_dropped(tg_posenc_forward(pe, X), Y, 2, 120, 240); /* p = 0.5 */
    tg_scope_end();
    tg_free(X);
    tg_posenc_free(pe);
}

static tg_tensor *pe_fn(tg_tensor *const *in, int n, void *ctx) {
    (void)n;
    return tg_posenc_forward(ctx, in[0]);
}

Test(posenc, gradcheck_fixed) {
    tg_rng rng = tg_rng_new(11);
    tg_posenc *pe = tg_posenc_new(5, 0, 8, &rng);
    TG_REQUIRE(pe);
    tg_tensor *X = tg_randn(TG_SHAPE(2, 6, 5), &rng);
    tg_set_requires_grad(X, true);
    tg_gradcheck_result r;
    bool ok = tg_gradcheck(pe_fn, &X, 1, pe, 1e-6, 1e-6, &r);
    printf("gradcheck posenc fixed: %lld entries, max rel err %.1e\n", (long long)r.checked, r.max_rel_err);
    cr_expect(ok && r.checked == 60, "max rel err %g (%s)", r.max_rel_err, tg_last_error());
    cr_expect(pe->P->grad == NULL, "no gradient for the constant table");
    tg_free(X);
    tg_posenc_free(pe);
}

/* A learned table is a parameter, listed as pos_encoding.P, drawn
 * N(0, 0.02^2) (sample mean and std of the table). */
Test(posenc, learned_table_is_a_parameter_drawn_n_0_002) {
    tg_rng rng = tg_rng_new(3);
    tg_posenc *pe = tg_posenc_learned_new(32, 0, 1000, &rng);
    TG_REQUIRE(pe);
    tg_params p;
    tg_params_init(&p);
    cr_expect_eq(tg_posenc_params(pe, &p, "pos_encoding"), 0);
    cr_expect(p.n == 1 && tg_params_get(&p, "pos_encoding.P") == pe->P && pe->P->requires_grad);
    tg_params_free(&p);
    expect_normal_init(pe->P, 0.02, 0.001, 0.0005, "learned table");
    tg_posenc_free(pe);
}

Test(posenc, gradcheck_learned_reaches_only_the_used_rows) {
    tg_rng rng = tg_rng_new(12);
    const int max_len = 7, T = 4, d = 6;
    tg_posenc *pe = tg_posenc_learned_new(d, 0, max_len, &rng);
    TG_REQUIRE(pe);
    tg_tensor *X = tg_randn(TG_SHAPE(3, T, d), &rng);
    tg_set_requires_grad(X, true);
    tg_tensor *in[2] = {X, pe->P};
    tg_gradcheck_result r;
    bool ok = tg_gradcheck(pe_fn, in, 2, pe, 1e-6, 1e-6, &r);
    printf("gradcheck posenc learned: %lld entries, max rel err %.1e\n", (long long)r.checked, r.max_rel_err);
    cr_expect(ok && r.checked == 3 * T * d + max_len * d, "max rel err %g (%s)", r.max_rel_err, tg_last_error());

    /* d/dP of sum(Y) is the batch size for rows < T and zero beyond. */
    tg_zero_grad(pe->P);
    tg_scope_begin();
    cr_assert_eq(tg_backward(tg_sum_all(tg_posenc_forward(pe, X))), 0, "%s", tg_last_error());
    for (int i = 0; i < max_len; i++)
        for (int c = 0; c < d; c++)
            cr_expect(pe->P->grad->data[i * d + c] == (i < T ? 3 : 0), "dP[%d,%d] = %g", i, c,
                      (double)pe->P->grad->data[i * d + c]);
    tg_scope_end();
    tg_free(X);
    tg_posenc_free(pe);
}
