/* The basic layers of src/nn: Linear, Dropout, Embedding, LayerNorm.
 * Initialisation, shapes on inputs of any rank, hand-computed forwards,
 * errors, parameter names, and gradient checks in double precision. */
#include "test_util.h"

#include <stdlib.h>
#include <string.h>

/* Gradient checks pass a module's parameters and the input together: the
 * function closes over the module (ctx) and reads only the last input; the
 * checker perturbs the parameters in place, which are the module's own. */
static void gc_log(const char *what, const tg_gradcheck_result *r) {
    if (getenv("TG_GC_LOG"))
        fprintf(stderr, "gradcheck %-34s max rel %.3e  max abs %.3e  (%lld entries)\n", what, r->max_rel_err,
                r->max_abs_err, (long long)r->checked);
}

static tg_tensor *input(int ndim, const int *shape, tg_rng *rng) {
    tg_tensor *x = tg_randn(ndim, shape, rng);
    tg_set_requires_grad(x, true);
    return x;
}

/* ---- Linear ------------------------------------------------------------------ */

Test(modules, linear_init_bounds_and_shapes) {
    tg_rng rng = tg_rng_new(1);
    tg_linear *m = tg_linear_new(16, 300, true, &rng);
    TG_REQUIRE(m);
    cr_assert(m->weight->ndim == 2 && m->weight->shape[0] == 300 && m->weight->shape[1] == 16);
    cr_assert(m->bias && m->bias->ndim == 1 && m->bias->shape[0] == 300);
    cr_expect(m->weight->persistent && m->weight->requires_grad && m->bias->requires_grad);
    /* U(-1/sqrt(16), 1/sqrt(16)) = U(-0.25, 0.25): inside the bound, filling it. */
    double lo = 1, hi = -1, sum = 0;
    for (int64_t i = 0; i < m->weight->size; i++) {
        double w = m->weight->data[i];
        lo = fmin(lo, w);
        hi = fmax(hi, w);
        sum += w;
    }
    cr_expect(lo >= -0.25 && hi <= 0.25, "weights in [%g, %g]", lo, hi);
    cr_expect(lo < -0.24 && hi > 0.24, "weights fill the bound: [%g, %g]", lo, hi);
    cr_expect(fabs(sum / (double)m->weight->size) < 0.01, "mean %g", sum / (double)m->weight->size);
    double blo = 1, bhi = -1;
    for (int i = 0; i < 300; i++) {
        blo = fmin(blo, m->bias->data[i]);
        bhi = fmax(bhi, m->bias->data[i]);
    }
    cr_expect(blo >= -0.25 && bhi <= 0.25 && blo < -0.2 && bhi > 0.2, "bias in [%g, %g]", blo, bhi);

    tg_linear *nb = tg_linear_new(16, 3, false, &rng);
    TG_REQUIRE(nb);
    cr_expect(nb->bias == NULL);

    tg_scope_begin();
    const int shapes[3][4] = {{7, 16}, {2, 5, 16}, {2, 3, 4, 16}};
    for (int r = 0; r < 3; r++) {
        int nd = r + 2;
        tg_tensor *x = tg_randn(nd, shapes[r], &rng);
        tg_tensor *y = tg_linear_forward(m, x);
        TG_REQUIRE(y);
        cr_assert_eq(y->ndim, nd);
        for (int i = 0; i < nd - 1; i++) cr_expect_eq(y->shape[i], shapes[r][i]);
        cr_expect_eq(y->shape[nd - 1], 300);
        /* Every row is x_row W^T + b, whatever the rank. */
        int64_t rows = x->size / 16;
        const tg_real *xr = x->data + (rows - 1) * 16;
        for (int o = 0; o < 300; o += 37) {
            double want = m->bias->data[o];
            for (int i = 0; i < 16; i++) want += xr[i] * m->weight->data[o * 16 + i];
            cr_expect(fabs(y->data[(rows - 1) * 300 + o] - want) < 1e-12, "rank %d, output %d", nd, o);
        }
    }
    tg_scope_end();
    tg_linear_free(m);
    tg_linear_free(nb);
}

Test(modules, linear_forward_by_hand) {
    tg_rng rng = tg_rng_new(2);
    tg_linear *m = tg_linear_new(3, 2, true, &rng);
    TG_REQUIRE(m);
    memcpy(m->weight->data, (tg_real[]){1, 2, 3, 4, 5, 6}, 6 * sizeof(tg_real));
    memcpy(m->bias->data, (tg_real[]){0.5, -1}, 2 * sizeof(tg_real));
    tg_scope_begin();
    tg_tensor *x = tg_from_array(TG_SHAPE(2, 3), (tg_real[]){1, 0, -1, 2, 1, 0});
    tg_tensor *y = tg_linear_forward(m, x);
    TG_REQUIRE(y);
    /* [1,0,-1] W^T = [1-3, 4-6] = [-2, -2]; + b = [-1.5, -3]
     * [2,1,0]  W^T = [2+2, 8+5] = [4, 13];  + b = [4.5, 12] */
    expect_close(y, (tg_real[]){-1.5, -3, 4.5, 12}, 4, 1e-12);
    tg_scope_end();
    tg_linear_free(m);
}

Test(modules, linear_errors) {
    tg_rng rng = tg_rng_new(3);
    tg_linear *m = tg_linear_new(4, 3, true, &rng);
    TG_REQUIRE(m);
    tg_scope_begin();
    tg_clear_error();
    cr_expect_null(tg_linear_forward(m, tg_zeros(TG_SHAPE(2, 5))));
    cr_expect(error_has("linear: input (2,5) last dim 5, expected 4", NULL), "%s", tg_last_error());
    tg_clear_error();
    cr_expect_null(tg_linear_forward(m, NULL));
    cr_expect(error_has("linear", "NULL"), "%s", tg_last_error());
    tg_scope_end();
    tg_clear_error();
    cr_expect_null(tg_linear_new(0, 3, true, &rng));
    cr_expect(error_has("linear", "positive"), "%s", tg_last_error());
    tg_linear_free(m);
    tg_linear_free(NULL);
}

static tg_tensor *linear_f(tg_tensor *const *in, int n, void *ctx) { return tg_linear_forward(ctx, in[n - 1]); }

Test(modules, linear_gradcheck) {
    tg_rng rng = tg_rng_new(4);
    for (int bias = 0; bias <= 1; bias++) {
        tg_linear *m = tg_linear_new(5, 3, bias, &rng);
        TG_REQUIRE(m);
        tg_tensor *x = bias ? input(TG_SHAPE(2, 3, 5), &rng) : input(TG_SHAPE(2, 2, 2, 5), &rng);
        tg_tensor *in[3] = {m->weight, m->bias, x};
        if (!bias) in[1] = x;
        int n = bias ? 3 : 2;
        tg_gradcheck_result r;
        bool ok = tg_gradcheck(linear_f, in, n, m, 1e-6, 1e-6, &r);
        gc_log(bias ? "linear (2,3,5) bias" : "linear (2,2,2,5) no bias", &r);
        cr_expect(ok, "bias %d: max rel err %g at input %d [%lld]: %s", bias, r.max_rel_err, r.worst_input,
                  (long long)r.worst_index, tg_last_error() ? tg_last_error() : "");
        cr_expect_eq(r.checked, m->weight->size + (bias ? 3 : 0) + x->size);
        tg_free(x);
        tg_linear_free(m);
    }
}

/* ---- Dropout layer --------------------------------------------------------------- */

Test(modules, dropout_eval_is_identity) {
    tg_rng rng = tg_rng_new(5);
    tg_dropout_layer *d = tg_dropout_layer_new(0.5, &rng);
    TG_REQUIRE(d);
    cr_expect(d->training, "a new layer trains, as in PyTorch");
    tg_scope_begin();
    tg_tensor *x = tg_randn(TG_SHAPE(4, 8), &rng);
    tg_dropout_layer_train(d, false);
    cr_expect_eq(tg_dropout_layer_forward(d, x), x, "eval returns its input");
    tg_dropout_layer_train(d, true);
    expect_dropped(tg_dropout_layer_forward(d, x), x, 2, 0, 32);
    tg_scope_end();
    tg_dropout_layer_free(d);
}

Test(modules, dropout_training_keeps_the_mean) {
    tg_rng rng = tg_rng_new(6);
    tg_dropout_layer *d = tg_dropout_layer_new(0.3, &rng);
    TG_REQUIRE(d);
    tg_scope_begin();
    tg_tensor *x = tg_ones(TG_SHAPE(1000, 1000));
    tg_tensor *y = tg_dropout_layer_forward(d, x);
    TG_REQUIRE(y);
    double sum = 0;
    int64_t kept = 0;
    for (int64_t i = 0; i < y->size; i++) {
        sum += y->data[i];
        kept += y->data[i] != 0;
    }
    cr_expect(fabs(sum / 1e6 - 1) < 0.01, "mean %g", sum / 1e6);
    cr_expect(fabs((double)kept / 1e6 - 0.7) < 0.01, "kept fraction %g", (double)kept / 1e6);
    tg_scope_end();
    tg_dropout_layer_free(d);
}

Test(modules, dropout_is_deterministic_for_a_seed) {
    tg_rng r1 = tg_rng_new(77), r2 = tg_rng_new(77);
    tg_dropout_layer *a = tg_dropout_layer_new(0.5, &r1), *b = tg_dropout_layer_new(0.5, &r2);
    tg_dropout_layer *c = tg_dropout_layer_new(0.5, &r1); /* second layer of the same generator */
    TG_REQUIRE(a);
    TG_REQUIRE(b);
    TG_REQUIRE(c);
    tg_scope_begin();
    tg_tensor *x = tg_ones(TG_SHAPE(256));
    tg_tensor *ya = tg_dropout_layer_forward(a, x), *yb = tg_dropout_layer_forward(b, x);
    tg_tensor *yc = tg_dropout_layer_forward(c, x), *ya2 = tg_dropout_layer_forward(a, x);
    int same_ab = 0, same_ac = 0, same_aa = 0;
    for (int i = 0; i < 256; i++) {
        same_ab += ya->data[i] == yb->data[i];
        same_ac += ya->data[i] == yc->data[i];
        same_aa += ya->data[i] == ya2->data[i];
    }
    cr_expect_eq(same_ab, 256, "same seed, same masks");
    cr_expect(same_ac < 200, "two layers of one generator draw different masks (%d equal)", same_ac);
    cr_expect(same_aa < 200, "each call draws a new mask (%d equal)", same_aa);
    tg_scope_end();
    tg_dropout_layer_free(a);
    tg_dropout_layer_free(b);
    tg_dropout_layer_free(c);
}

Test(modules, dropout_bad_probability) {
    tg_rng rng = tg_rng_new(8);
    tg_clear_error();
    cr_expect_null(tg_dropout_layer_new(1.5, &rng));
    cr_expect(error_has("dropout", "1.5"), "%s", tg_last_error());
    cr_expect_null(tg_dropout_layer_new(-0.1, &rng));
    tg_dropout_layer_free(NULL);
}

/* ---- Embedding -------------------------------------------------------------------- */

Test(modules, embedding_rows_init_and_errors) {
    tg_rng rng = tg_rng_new(9);
    tg_embedding *e = tg_embedding_new(1000, 100, 1, &rng);
    TG_REQUIRE(e);
    expect_normal_init(e->weight, 1, 0.02, 0.02, "embedding");
    tg_embedding *small = tg_embedding_new(10, 4, 0.02, &rng);
    TG_REQUIRE(small);
    double mx = 0;
    for (int i = 0; i < 40; i++) mx = fmax(mx, fabs(small->weight->data[i]));
    cr_expect(mx < 0.1 && mx > 0, "std 0.02: max |w| %g", mx);

    tg_scope_begin();
    int ids[6] = {3, 0, 9, 3, 1, 2};
    tg_tensor *y = tg_embedding_forward(small, ids, TG_SHAPE(2, 3));
    TG_REQUIRE(y);
    cr_assert(y->ndim == 3 && y->shape[0] == 2 && y->shape[1] == 3 && y->shape[2] == 4);
    for (int t = 0; t < 6; t++)
        for (int j = 0; j < 4; j++) cr_expect_eq(y->data[t * 4 + j], small->weight->data[ids[t] * 4 + j]);
    tg_clear_error();
    cr_expect_null(tg_embedding_forward(small, (int[]){1, 10}, TG_SHAPE(2)));
    cr_expect(error_has("embedding", "id 10 at position 1") && error_has("[0, 10)", NULL), "%s", tg_last_error());
    cr_expect_null(tg_embedding_forward(small, (int[]){-1}, TG_SHAPE(1)));
    cr_expect(error_has("embedding", "id -1"), "%s", tg_last_error());
    tg_scope_end();
    tg_embedding_free(e);
    tg_embedding_free(small);
    tg_embedding_free(NULL);
}

static const int emb_ids[2][3] = {{1, 4, 1}, {0, 2, 1}}; /* repeats: gradients add */
static tg_tensor *embedding_f(tg_tensor *const *in, int n, void *ctx) {
    (void)in;
    (void)n;
    /* A nonlinearity after the lookup, so the gradient depends on values. */
    tg_tensor *y = tg_embedding_forward(ctx, &emb_ids[0][0], TG_SHAPE(2, 3));
    return tg_mul(y, y);
}

Test(modules, embedding_gradcheck) {
    tg_rng rng = tg_rng_new(10);
    tg_embedding *e = tg_embedding_new(5, 3, 1, &rng);
    TG_REQUIRE(e);
    tg_gradcheck_result r;
    bool ok = tg_gradcheck(embedding_f, &e->weight, 1, e, 1e-6, 1e-6, &r);
    gc_log("embedding (5,3) ids (2,3)", &r);
    cr_expect(ok, "max rel err %g: %s", r.max_rel_err, tg_last_error() ? tg_last_error() : "");
    cr_expect_eq(r.checked, 15);
    tg_embedding_free(e);
}

/* ---- LayerNorm ------------------------------------------------------------------------- */

Test(modules, layernorm_matches_pytorch_semantics) {
    tg_layer_norm_layer *ln = tg_layer_norm_layer_new(7, 1e-5);
    TG_REQUIRE(ln);
    for (int i = 0; i < 7; i++) cr_expect(ln->weight->data[i] == 1 && ln->bias->data[i] == 0);
    tg_rng rng = tg_rng_new(11);
    tg_scope_begin();
    tg_tensor *x = tg_normal(TG_SHAPE(2, 3, 7), 3, 2, &rng); /* mean 3, std 2: not normalised already */
    tg_tensor *y = tg_layer_norm_layer_forward(ln, x);
    TG_REQUIRE(y);
    cr_assert(y->ndim == 3 && y->shape[2] == 7);
    for (int r = 0; r < 6; r++) {
        const tg_real *xr = x->data + r * 7, *yr = y->data + r * 7;
        double mu = 0, var = 0;
        for (int j = 0; j < 7; j++) mu += xr[j];
        mu /= 7;
        for (int j = 0; j < 7; j++) var += (xr[j] - mu) * (xr[j] - mu);
        var /= 7; /* biased, as PyTorch */
        double ym = 0, yv = 0;
        for (int j = 0; j < 7; j++) {
            cr_expect(fabs(yr[j] - (xr[j] - mu) / sqrt(var + 1e-5)) < 1e-12, "row %d col %d", r, j);
            ym += yr[j];
        }
        ym /= 7;
        for (int j = 0; j < 7; j++) yv += (yr[j] - ym) * (yr[j] - ym);
        yv /= 7;
        cr_expect(fabs(ym) < 1e-12 && fabs(yv - var / (var + 1e-5)) < 1e-12 && fabs(yv - 1) < 1e-4,
                  "row %d: mean %g, biased var %g", r, ym, yv);
    }
    /* The affine part: y * weight + bias, per feature. */
    for (int i = 0; i < 7; i++) {
        ln->weight->data[i] = i + 1;
        ln->bias->data[i] = -i;
    }
    tg_tensor *y2 = tg_layer_norm_layer_forward(ln, x);
    TG_REQUIRE(y2);
    for (int64_t k = 0; k < y->size; k++) {
        int j = (int)(k % 7);
        cr_expect(fabs(y2->data[k] - (y->data[k] * (j + 1) - j)) < 1e-12);
    }
    tg_clear_error();
    cr_expect_null(tg_layer_norm_layer_forward(ln, tg_zeros(TG_SHAPE(2, 6))));
    cr_expect(error_has("layernorm: input (2,6) last dim 6, expected 7", NULL), "%s", tg_last_error());
    tg_scope_end();
    tg_clear_error();
    cr_expect_null(tg_layer_norm_layer_new(0, 1e-5));
    cr_expect(error_has("layernorm", "dim 0"), "%s", tg_last_error());
    tg_layer_norm_layer_free(ln);
    tg_layer_norm_layer_free(NULL);
}

static tg_tensor *layernorm_f(tg_tensor *const *in, int n, void *ctx) {
    return tg_layer_norm_layer_forward(ctx, in[n - 1]);
}

Test(modules, layernorm_gradcheck) {
    tg_rng rng = tg_rng_new(12);
    tg_layer_norm_layer *ln = tg_layer_norm_layer_new(6, 1e-5);
    TG_REQUIRE(ln);
    /* Away from (1, 0), so that the gradient of x goes through gamma. */
    tg_fill_normal(ln->weight, 1, 0.5, &rng);
    tg_fill_normal(ln->bias, 0, 0.5, &rng);
    tg_tensor *x = input(TG_SHAPE(2, 3, 6), &rng);
    tg_tensor *in[3] = {ln->weight, ln->bias, x};
    tg_gradcheck_result r;
    bool ok = tg_gradcheck(layernorm_f, in, 3, ln, 1e-6, 1e-6, &r);
    gc_log("layernorm (2,3,6)", &r);
    cr_expect(ok, "max rel err %g at input %d: %s", r.max_rel_err, r.worst_input,
              tg_last_error() ? tg_last_error() : "");
    cr_expect_eq(r.checked, 6 + 6 + 36);
    tg_free(x);
    tg_layer_norm_layer_free(ln);
}

/* ---- parameter names ----------------------------------------------------------------- */

Test(modules, param_names) {
    tg_rng rng = tg_rng_new(13);
    tg_linear *l = tg_linear_new(4, 3, true, &rng), *lnb = tg_linear_new(4, 3, false, &rng);
    tg_layer_norm_layer *ln = tg_layer_norm_layer_new(4, 1e-5);
    tg_embedding *e = tg_embedding_new(9, 4, 1, &rng);
    tg_params p;
    tg_params_init(&p);
    tg_linear_params(l, &p, "fc");
    tg_linear_params(lnb, &p, "proj");
    tg_layer_norm_layer_params(ln, &p, "blocks.0.ln");
    tg_embedding_params(e, &p, NULL);
    const char *want[] = {"fc.weight", "fc.bias", "proj.weight", "blocks.0.ln.weight", "blocks.0.ln.bias", "weight"};
    cr_assert_eq(p.n, 6);
    for (int i = 0; i < 6; i++) cr_expect_str_eq(p.items[i].name, want[i]);
    cr_expect_eq(tg_params_get(&p, "fc.weight"), l->weight);
    cr_expect_eq(tg_params_get(&p, "blocks.0.ln.bias"), ln->bias);
    cr_expect_eq(tg_params_get(&p, "weight"), e->weight);
    cr_expect_eq(tg_params_numel(&p), 12 + 3 + 12 + 4 + 4 + 36);
    tg_params_free(&p);
    tg_linear_free(l);
    tg_linear_free(lnb);
    tg_layer_norm_layer_free(ln);
    tg_embedding_free(e);
}

/* One convention for a NULL module (nn.h): free and train ignore it, forward
 * returns NULL and params -1, each with "<module>_<verb>: NULL module". */
Test(modules, null_module_convention) {
    tg_scope_begin();
    tg_tensor *x = tg_zeros(TG_SHAPE(2, 3, 4));
    tg_params p;
    tg_params_init(&p);
    tg_clear_error();
    cr_expect_null(tg_linear_forward(NULL, x));
    cr_expect(error_has("linear_forward: NULL module", NULL), "%s", tg_last_error());
    cr_expect_null(tg_mha_forward(NULL, x, x, x, (tg_mask){0}));
    cr_expect(error_has("mha_forward: NULL module", NULL), "%s", tg_last_error());
    cr_expect_null(tg_encoder_forward(NULL, (const int[]){0}, 1, 1, (tg_mask){0}));
    cr_expect(error_has("encoder_forward: NULL module", NULL), "%s", tg_last_error());
    cr_expect_null(tg_posenc_forward(NULL, x));
    cr_expect(error_has("posenc_forward: NULL module", NULL), "%s", tg_last_error());
    cr_expect_eq(tg_mha_params(NULL, &p, "a"), -1);
    cr_expect(error_has("mha_params: NULL module", NULL), "%s", tg_last_error());
    cr_expect_eq(tg_encoder_params(NULL, &p, "a"), -1);
    cr_expect(error_has("encoder_params: NULL module", NULL), "%s", tg_last_error());
    cr_expect_eq(p.n, 0);
    tg_mha_free(NULL);
    tg_encoder_free(NULL);
    tg_posenc_free(NULL);
    tg_mha_train(NULL, true);
    tg_encoder_train(NULL, true);
    tg_scope_end();
}

/* tg_param_name is the one joiner; a _params function reports a name that
 * does not fit, or a duplicate, instead of dropping the parameter. */
Test(modules, params_report_failures) {
    char out[TG_PARAM_NAME_MAX];
    cr_expect_eq(tg_param_name(out, "blocks.0", "ffn"), 0);
    cr_expect_str_eq(out, "blocks.0.ffn");
    cr_expect_eq(tg_param_name(out, "", "ffn"), 0);
    cr_expect_str_eq(out, "ffn");
    cr_expect_eq(tg_param_name(out, NULL, "ffn"), 0);
    char long_prefix[TG_PARAM_NAME_MAX];
    memset(long_prefix, 'a', sizeof long_prefix - 4);
    long_prefix[sizeof long_prefix - 4] = '\0';
    tg_clear_error();
    cr_expect_eq(tg_param_name(out, long_prefix, "ffn"), -1);
    cr_expect(error_has("param_name", "longer than"), "%s", tg_last_error());

    tg_rng rng = tg_rng_new(3);
    tg_mha *m = tg_mha_new(4, 4, 4, 4, 2, 0, true, &rng);
    TG_REQUIRE(m);
    tg_params p;
    tg_params_init(&p);
    tg_clear_error();
    cr_expect_eq(tg_mha_params(m, &p, long_prefix), -1);
    cr_expect(error_has("longer than", NULL), "%s", tg_last_error());
    cr_expect_eq(tg_mha_params(m, &p, "attention"), 0);
    cr_expect_eq(p.n, 8);
    cr_expect_eq(tg_mha_params(m, &p, "attention"), -1, "a second add is a duplicate");
    cr_expect(error_has("duplicate", "attention.W_q.weight"), "%s", tg_last_error());
    cr_expect_eq(tg_mha_params(m, NULL, "attention"), -1);
    tg_params_free(&p);
    tg_mha_free(m);
}
