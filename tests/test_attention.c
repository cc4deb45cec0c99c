/* Attention: the scoring functions, DotProductAttention, AdditiveAttention
 * and MultiHeadAttention. Checked against the two worked examples of the
 * seed blog post (seeds/003), d2l's examples (seeds/001), a per-head
 * reference built from slices, and gradient checks in double precision. */
#include "test_util.h"

#include <stdlib.h>
#include <string.h>

#include "autograd/op.h"
#include "nn/module.h"

static void gc_log(const char *what, const tg_gradcheck_result *r) {
    if (getenv("TG_GC_LOG"))
        fprintf(stderr, "gradcheck %-40s max rel %.3e  max abs %.3e  (%lld entries)\n", what, r->max_rel_err,
                r->max_abs_err, (long long)r->checked);
}

static void expect_gradcheck(const char *what, tg_fn f, tg_tensor *const *in, int n, void *ctx) {
    tg_gradcheck_result r;
    tg_clear_error();
    bool ok = tg_gradcheck(f, in, n, ctx, 1e-6, 1e-6, &r);
    gc_log(what, &r);
    cr_expect(ok, "%s: max rel err %g at input %d [%lld]: %s", what, r.max_rel_err, r.worst_input,
              (long long)r.worst_index, tg_last_error() ? tg_last_error() : "");
    cr_expect(r.checked > 0, "%s: nothing checked", what);
}

static tg_tensor *leaf(int ndim, const int *shape, tg_rng *rng) {
    tg_tensor *x = tg_randn(ndim, shape, rng);
    tg_set_requires_grad(x, true);
    return x;
}

/* An attention's data inputs as leaves, drawn in this order: q [2, 3, dq],
 * k [2, 4, dk], v [2, 4, dv] (2 batch entries, 3 queries, 4 keys). */
static void qkv_leaves(tg_tensor **qkv, int dq, int dk, int dv, tg_rng *rng) {
    qkv[0] = leaf(TG_SHAPE(2, 3, dq), rng);
    qkv[1] = leaf(TG_SHAPE(2, 4, dk), rng);
    qkv[2] = leaf(TG_SHAPE(2, 4, dv), rng);
}

static void free_all(tg_tensor *const *t, int n) {
    for (int i = 0; i < n; i++) tg_free(t[i]);
}

/* Sum of a row of weights [.., K] and whether it is zero from `from` on. */
static void expect_row(const tg_real *w, int K, int valid, const char *what, int row) {
    double s = 0;
    for (int k = 0; k < K; k++) {
        s += w[k];
        if (k >= valid)
            cr_expect(w[k] == 0, "%s row %d: weight %g at key %d past valid length %d", what, row, (double)w[k], k,
                      valid);
        else
            cr_expect(w[k] > 0, "%s row %d: weight of visible key %d is 0", what, row, k);
    }
    cr_expect(fabs(s - 1) < 1e-12, "%s row %d sums to %.15g", what, row, s);
}

/* ---- the seed blog post's worked examples (seeds/003) ---------------------- */

/* Example 1 (section 2.5): Q = (1 -2 3 -4) and K = V = three rows, scaled dot
 * product + softmax. The post expects to "pull Q's value out of V" and prints
 * the result (0.99 -1.99 3.00 -4.00). Its intermediate steps contain slips:
 * Q.K_0 = 1+4+9+16 = 30 (printed 42), and 42/2 printed as 22; its printed
 * weights 9.99e-1, 8.31e-7, 9.35e-14 are the softmax of its own (22, 8, -8).
 * With the correct scores (15, 8, -8) the weights are (0.99909, 9.11e-4,
 * 1.03e-10) and the output, truncated to the two decimals it prints, is the
 * same: (0.99, -1.99, 3.00, -4.00). */
static const tg_real blog_q[4] = {1, -2, 3, -4};
static const tg_real blog_kv[12] = {1, -2, 3, -4, -8, 7, 6, -5, 10, 9, 12, 11};

static double trunc2(double x) { return trunc(x * 100) / 100; }

Test(attention, blog_example_1_scaled_dot_softmax) {
    tg_scope_begin();
    tg_tensor *Q = tg_from_array(TG_SHAPE(1, 4), blog_q);
    tg_tensor *KV = tg_from_array(TG_SHAPE(3, 4), blog_kv);
    tg_tensor *dot = tg_score_dot(Q, KV);
    TG_REQUIRE(dot);
    expect_close(dot, (tg_real[]){30, 16, -16}, 3, 0); /* the post prints 42, 16, -16 */
    tg_tensor *scores = tg_score_scaled_dot(Q, KV);
    TG_REQUIRE(scores);
    cr_assert(scores->ndim == 2 && scores->shape[0] == 1 && scores->shape[1] == 3);
    expect_close(scores, (tg_real[]){15, 8, -8}, 3, 0); /* / sqrt(d_k) = / 2 */

    /* The post's printed weights: softmax of its (22, 8, -8), shown truncated
     * to three significant digits. */
    tg_tensor *wb = tg_softmax(tg_from_array(TG_SHAPE(1, 3), (tg_real[]){22, 8, -8}));
    TG_REQUIRE(wb);
    cr_expect(wb->data[0] >= 0.999 && wb->data[0] < 1, "9.99e-1: %.6g", (double)wb->data[0]);
    cr_expect(wb->data[1] >= 8.31e-7 && wb->data[1] < 8.32e-7, "8.31e-7: %.6g", (double)wb->data[1]);
    cr_expect(wb->data[2] >= 9.35e-14 && wb->data[2] < 9.36e-14, "9.35e-14: %.6g", (double)wb->data[2]);

    /* Our weights and the attention output: (0.99, -1.99, 3.00, -4.00). */
    tg_tensor *w = tg_softmax(scores);
    expect_close(w, (tg_real[]){0.9990889487031674, 9.110511943072396e-4, 1.0252530532955489e-10}, 3, 1e-15);
    tg_tensor *out = tg_matmul(w, KV);
    TG_REQUIRE(out);
    const double printed[4] = {0.99, -1.99, 3.00, -4.00};
    for (int j = 0; j < 4; j++)
        cr_expect(fabs(trunc2(out->data[j]) - printed[j]) < 1e-12, "column %d: %.6f prints as %.2f, the post %.2f", j,
                  (double)out->data[j], trunc2(out->data[j]), printed[j]);
    /* The same through the module (batch of one). */
    tg_dot_attention *att = tg_dot_attention_new(0, NULL);
    tg_dot_attention_record(att, true); /* keep the weights to compare */
    TG_REQUIRE(att);
    tg_tensor *Q3 = tg_reshape(Q, TG_SHAPE(1, 1, 4)), *KV3 = tg_reshape(KV, TG_SHAPE(1, 3, 4));
    tg_tensor *out3 = tg_dot_attention_forward(att, Q3, KV3, KV3, (tg_mask){0});
    TG_REQUIRE(out3);
    expect_close(out3, out->data, 4, 1e-14);
    expect_close(att->attention_weights, w->data, 3, 1e-15);

    /* The post's "sparse softmax" cuts small weights off: sparsemax of
     * (15, 8, -8) is exactly one-hot, and the output is exactly Q. */
    att->sparse = true;
    tg_tensor *sp = tg_dot_attention_forward(att, Q3, KV3, KV3, (tg_mask){0});
    TG_REQUIRE(sp);
    expect_close(att->attention_weights, (tg_real[]){1, 0, 0}, 3, 0);
    expect_close(sp, blog_q, 4, 0);
    tg_scope_end();
    tg_dot_attention_free(att);
}

/* Example 2 (section 4.2): self-attention of "I have a pen", Q = K = V = M.
 * The post prints Q K^T exactly, then weights and output to three decimals.
 * Those weights are softmax(Q K^T) (the dot-product score: its division
 * by sqrt(4) step is garbled and not applied), so they are reproduced with
 * tg_score_dot; the scaled version is checked separately. */
static const tg_real blog_M[16] = {1, 0.5, 0, 0, 0.5, 1, 0, 0.5, 0, 0, 1, 0.5, 0, 0.5, 0.5, 1};

Test(attention, blog_example_2_self_attention) {
    tg_scope_begin();
    tg_tensor *M = tg_from_array(TG_SHAPE(1, 4, 4), blog_M);
    tg_tensor *S = tg_score_dot(M, M);
    TG_REQUIRE(S);
    cr_assert(S->ndim == 3 && S->shape[1] == 4 && S->shape[2] == 4);
    expect_close(S, (tg_real[]){1.25, 1, 0, 0.25, 1, 1.5, 0.25, 1, 0, 0.25, 1.25, 1, 0.25, 1, 1, 1.5}, 16, 0);

    const double w_printed[16] = {0.410, 0.320, 0.118, 0.151, 0.243, 0.400, 0.115, 0.243,
                                  0.118, 0.151, 0.411, 0.320, 0.115, 0.243, 0.243, 0.400};
    const double out_printed[16] = {0.571, 0.601, 0.193, 0.370, 0.443, 0.643, 0.236, 0.500,
                                    0.193, 0.370, 0.571, 0.601, 0.236, 0.500, 0.443, 0.643};
    tg_tensor *W = tg_masked_softmax(S, (tg_mask){0});
    tg_tensor *out = tg_matmul(W, M);
    TG_REQUIRE(out);
    for (int i = 0; i < 16; i++) {
        /* Weights within one unit of the last printed digit (the post
         * truncates 0.41098 to 0.410 in row 0 and rounds it to 0.411 in row 2). */
        cr_expect(fabs(W->data[i] - w_printed[i]) < 1e-3, "weight %d: %.5f, the post %.3f", i, (double)W->data[i],
                  w_printed[i]);
        /* Outputs rounded to three decimals match the post exactly. */
        cr_expect(fabs(round(out->data[i] * 1000) / 1000 - out_printed[i]) < 1e-12, "output %d: %.5f, the post %.3f", i,
                  (double)out->data[i], out_printed[i]);
    }
    /* "a"-"pen" and "I"-"have" couple most strongly (0.601). */
    cr_expect(out->data[1] == out->data[11] && out->data[1] > 0.6);

    /* Scaled dot product (what DotProductAttention computes): scores / 2,
     * reference values from an independent double computation. */
    tg_tensor *S2 = tg_score_scaled_dot(M, M);
    for (int i = 0; i < 16; i++) cr_expect(S2->data[i] == S->data[i] / 2);
    tg_dot_attention *att = tg_dot_attention_new(0, NULL);
    TG_REQUIRE(att);
    tg_tensor *o2 = tg_dot_attention_forward(att, M, M, M, (tg_mask){0});
    TG_REQUIRE(o2);
    expect_close(o2,
                 (tg_real[]){0.47656, 0.55741, 0.27726, 0.43495, 0.41347, 0.57513, 0.29897, 0.50000, 0.27726, 0.43495,
                             0.47656, 0.55741, 0.29897, 0.50000, 0.41347, 0.57513},
                 16, 5e-6);

    /* Sparse softmax on the post's scores keeps only the strong links:
     * row 0: tau = (1.25 + 1 - 1) / 2 = 0.625 -> (0.625, 0.375, 0, 0);
     * row 1: support {1.5, 1, 1}, tau = 2.5/3 -> (1/6, 2/3, 0, 1/6). */
    tg_tensor *SP = tg_sparsemax(S, (tg_mask){0});
    TG_REQUIRE(SP);
    const tg_real t = 1.0 / 6, u = 2.0 / 3;
    expect_close(SP, (tg_real[]){0.625, 0.375, 0, 0, t, u, 0, t, 0, 0, 0.625, 0.375, 0, t, t, u}, 16, 1e-12);
    tg_scope_end();
    tg_dot_attention_free(att);
}

/* ---- d2l's examples (seeds/001 and the attention-scoring section) ---------- */

/* keys ones (2,10,2), values arange(40).reshape(1,10,4) repeated twice. */
static void d2l_kv(tg_tensor **keys, tg_tensor **values) {
    *keys = tg_ones(TG_SHAPE(2, 10, 2));
    tg_tensor *v = tg_empty(TG_SHAPE(2, 10, 4));
    for (int i = 0; i < 80; i++) v->data[i] = i % 40;
    *values = v;
}

/* All keys are equal, so the weights are uniform over the valid keys and the
 * output is the mean of the first valid_len value rows: d2l prints
 * [[[2, 3, 4, 5]], [[10, 11, 12, 13]]]. */
static void expect_d2l_output(const tg_tensor *out, const tg_tensor *w, const char *what) {
    cr_assert(out->ndim == 3 && out->shape[0] == 2 && out->shape[1] == 1 && out->shape[2] == 4, "%s shape", what);
    expect_close(out, (tg_real[]){2, 3, 4, 5, 10, 11, 12, 13}, 8, 1e-12);
    cr_assert(w && w->ndim == 3 && w->shape[0] == 2 && w->shape[1] == 1 && w->shape[2] == 10);
    expect_row(w->data, 10, 2, what, 0);
    expect_row(w->data + 10, 10, 6, what, 1);
    for (int k = 0; k < 2; k++) cr_expect(fabs(w->data[k] - 0.5) < 1e-14);
    for (int k = 0; k < 6; k++) cr_expect(fabs(w->data[10 + k] - 1.0 / 6) < 1e-14);
}

/* d2l's scoring example through one attention module in eval mode: queries
 * N(0, 1) of shape (2, 1, q_dim), d2l_kv's keys and values, valid lengths
 * (2, 6); the output and the weights the module kept (*weights, read after
 * the forward) are d2l's. */
typedef tg_tensor *(*attention_fn)(void *att, tg_tensor *q, tg_tensor *k, tg_tensor *v, tg_mask mask);
static void run_d2l_example(attention_fn forward, void *att, tg_tensor *const *weights, int q_dim, tg_rng *rng,
                            const char *what) {
    tg_scope_begin();
    tg_tensor *queries = tg_randn(TG_SHAPE(2, 1, q_dim), rng), *keys, *values;
    d2l_kv(&keys, &values);
    int lens[2] = {2, 6};
    tg_tensor *out = forward(att, queries, keys, values, (tg_mask){lens, 1, false});
    TG_REQUIRE(out);
    expect_d2l_output(out, *weights, what);
    tg_scope_end();
}

static tg_tensor *additive_fn(void *att, tg_tensor *q, tg_tensor *k, tg_tensor *v, tg_mask mask) {
    return tg_additive_attention_forward(att, q, k, v, mask);
}

static tg_tensor *dot_fn(void *att, tg_tensor *q, tg_tensor *k, tg_tensor *v, tg_mask mask) {
    return tg_dot_attention_forward(att, q, k, v, mask);
}

/* d2l's additive (query 20, key 2, 8 hidden) and dot-product examples, both
 * with dropout in eval mode: the same keys, values and lengths give both the
 * same output, whatever the queries. */
Test(attention, d2l_additive_and_dot_product_attention_examples) {
    tg_rng rng = tg_rng_new(21);
    tg_additive_attention *add = tg_additive_attention_new(2, 20, 8, 0.1, &rng);
    tg_dot_attention *dot = tg_dot_attention_new(0.5, &rng);
    TG_REQUIRE(add);
    TG_REQUIRE(dot);
    tg_dot_attention_record(dot, true);
    tg_additive_attention_train(add, false);
    tg_dot_attention_train(dot, false);
    run_d2l_example(additive_fn, add, &add->attention_weights, 20, &rng, "additive");
    run_d2l_example(dot_fn, dot, &dot->attention_weights, 2, &rng, "dot");
    tg_additive_attention_free(add);
    tg_dot_attention_free(dot);
}

/* An MHA with every input size H and h heads, in eval mode, keeping its
 * attention weights (the stored path). */
static tg_mha *recording_mha(int H, int h, tg_real dropout, tg_rng *rng) {
    tg_mha *m = tg_mha_new(H, H, H, H, h, dropout, false, rng);
    TG_REQUIRE(m);
    tg_mha_record_attention(m, true);
    tg_mha_train(m, false);
    return m;
}

Test(attention, d2l_multihead_example_shape_and_head_weights) {
    /* num_hiddens 100, 5 heads, dropout 0.5, eval; X ones (2,4,100), Y ones (2,6,100). */
    tg_rng rng = tg_rng_new(23);
    tg_mha *m = recording_mha(100, 5, 0.5, &rng);
    tg_scope_begin();
    tg_tensor *X = tg_ones(TG_SHAPE(2, 4, 100)), *Y = tg_ones(TG_SHAPE(2, 6, 100));
    int lens[2] = {3, 2};
    tg_tensor *out = tg_mha_forward(m, X, Y, Y, (tg_mask){lens, 1, false});
    TG_REQUIRE(out);
    cr_expect(out->ndim == 3 && out->shape[0] == 2 && out->shape[1] == 4 && out->shape[2] == 100,
              "d2l prints (2, 4, 100)");
    /* Per-head weights [B*h, Q, K] = [10, 4, 6]; row b*5 + j is head j of
     * batch entry b, so it sees lens[b] keys. */
    tg_tensor *w = m->attention->attention_weights;
    cr_assert(w && w->ndim == 3 && w->shape[0] == 10 && w->shape[1] == 4 && w->shape[2] == 6);
    for (int r = 0; r < 10; r++)
        for (int q = 0; q < 4; q++) expect_row(w->data + (r * 4 + q) * 6, 6, lens[r / 5], "mha", r * 4 + q);
    /* Self-attention, as d2l's shape check: attention(X, X, X, valid_lens). */
    tg_tensor *self = tg_mha_forward(m, X, X, X, (tg_mask){lens, 1, false});
    TG_REQUIRE(self);
    cr_expect(self->ndim == 3 && self->shape[0] == 2 && self->shape[1] == 4 && self->shape[2] == 100);
    tg_scope_end();
    tg_mha_free(m);
}

/* ---- MultiHeadAttention against a reference built head by head ------------ */

/* Head j uses columns j*d .. (j+1)*d of each projection (d = H/h); the heads'
 * outputs are concatenated and projected by W_o. With lengths that differ
 * between batch rows, a wrong head order or length repetition shows up. */
Test(attention, mha_matches_per_head_reference) {
    tg_rng rng = tg_rng_new(24);
    for (int lens_ndim = 1; lens_ndim <= 2; lens_ndim++) {
        tg_mha *m = tg_mha_new(5, 6, 7, 8, 2, 0, true, &rng);
        TG_REQUIRE(m);
        tg_dot_attention *ref = tg_dot_attention_new(0, NULL);
        tg_scope_begin();
        tg_tensor *q = tg_randn(TG_SHAPE(2, 3, 6), &rng), *k = tg_randn(TG_SHAPE(2, 4, 5), &rng);
        tg_tensor *v = tg_randn(TG_SHAPE(2, 4, 7), &rng);
        int lens1[2] = {4, 1}, lens2[6] = {1, 3, 2, 4, 0, 2};
        tg_mask mask = lens_ndim == 1 ? (tg_mask){lens1, 1, false} : (tg_mask){lens2, 2, false};
        tg_tensor *out = tg_mha_forward(m, q, k, v, mask);
        TG_REQUIRE(out);
        cr_assert(out->shape[0] == 2 && out->shape[1] == 3 && out->shape[2] == 8);
        tg_tensor *Q = tg_linear_forward(m->W_q, q), *K = tg_linear_forward(m->W_k, k);
        tg_tensor *V = tg_linear_forward(m->W_v, v), *heads[2];
        for (int j = 0; j < 2; j++)
            heads[j] = tg_dot_attention_forward(ref, tg_slice(Q, 2, 4 * j, 4 * j + 4), tg_slice(K, 2, 4 * j, 4 * j + 4),
                                                tg_slice(V, 2, 4 * j, 4 * j + 4), mask);
        tg_tensor *want = tg_linear_forward(m->W_o, tg_concat(2, heads, 2));
        TG_REQUIRE(want);
        expect_close(out, want->data, want->size, 1e-12);
        tg_scope_end();
        tg_dot_attention_free(ref);
        tg_mha_free(m);
    }
}

Test(attention, mha_two_dim_lens_and_causal_reach_every_head) {
    tg_rng rng = tg_rng_new(25);
    tg_mha *m = recording_mha(8, 4, 0, &rng);
    tg_scope_begin();
    tg_tensor *X = tg_randn(TG_SHAPE(2, 3, 8), &rng);
    int lens[6] = {1, 2, 3, 3, 1, 2}; /* [B, Q] */
    TG_REQUIRE(tg_mha_forward(m, X, X, X, (tg_mask){lens, 2, false}));
    tg_tensor *w = m->attention->attention_weights;
    cr_assert(w->shape[0] == 8 && w->shape[1] == 3 && w->shape[2] == 3);
    for (int r = 0; r < 8; r++)
        for (int q = 0; q < 3; q++) expect_row(w->data + (r * 3 + q) * 3, 3, lens[(r / 4) * 3 + q], "2-D lens", r);
    TG_REQUIRE(tg_mha_forward(m, X, X, X, (tg_mask){NULL, 0, true}));
    w = m->attention->attention_weights;
    for (int r = 0; r < 8; r++)
        for (int q = 0; q < 3; q++) expect_row(w->data + (r * 3 + q) * 3, 3, q + 1, "causal", r);
    tg_scope_end();
    tg_mha_free(m);
}

Test(attention, mha_errors_and_param_names) {
    tg_rng rng = tg_rng_new(26);
    tg_clear_error();
    cr_expect_null(tg_mha_new(10, 10, 10, 10, 3, 0, false, &rng));
    cr_expect(error_has("mha", "not divisible"), "%s", tg_last_error());
    cr_expect_null(tg_mha_new(10, 10, 10, 10, 0, 0, false, &rng)); /* was "not divisible by num_heads 0" */
    cr_expect(error_has("mha", "must be positive"), "%s", tg_last_error());
    for (int bias = 0; bias <= 1; bias++) {
        tg_mha *m = tg_mha_new(5, 6, 7, 8, 2, 0, bias, &rng);
        TG_REQUIRE(m);
        cr_expect(m->W_q->in == 6 && m->W_k->in == 5 && m->W_v->in == 7 && m->W_o->in == 8 && m->W_o->out == 8);
        tg_params p;
        tg_params_init(&p);
        tg_mha_params(m, &p, "attention");
        const char *with[] = {"attention.W_q.weight", "attention.W_q.bias",   "attention.W_k.weight",
                              "attention.W_k.bias",   "attention.W_v.weight", "attention.W_v.bias",
                              "attention.W_o.weight", "attention.W_o.bias"};
        const char *without[] = {"attention.W_q.weight", "attention.W_k.weight", "attention.W_v.weight",
                                 "attention.W_o.weight"};
        cr_assert_eq(p.n, bias ? 8 : 4);
        for (int i = 0; i < p.n; i++) cr_expect_str_eq(p.items[i].name, bias ? with[i] : without[i]);
        cr_expect_eq(tg_params_numel(&p), 8 * (6 + 5 + 7 + 8) + (bias ? 32 : 0));
        tg_params_free(&p);
        tg_scope_begin();
        tg_clear_error();
        tg_tensor *q = tg_zeros(TG_SHAPE(2, 3, 6)), *k = tg_zeros(TG_SHAPE(2, 4, 5));
        cr_expect_null(tg_mha_forward(m, q, k, tg_zeros(TG_SHAPE(2, 3, 7)), (tg_mask){0}));
        cr_expect(error_has("mha", "values (2,3,7)"), "%s", tg_last_error());
        tg_clear_error();
        cr_expect_null(tg_mha_forward(m, q, tg_zeros(TG_SHAPE(2, 4, 6)), tg_zeros(TG_SHAPE(2, 4, 7)), (tg_mask){0}));
        cr_expect(error_has("linear", "last dim 6, expected 5"), "%s", tg_last_error());
        tg_scope_end();
        tg_mha_free(m);
    }
    tg_mha_free(NULL);
}

Test(attention, additive_param_names_and_errors) {
    tg_rng rng = tg_rng_new(27);
    tg_additive_attention *a = tg_additive_attention_new(2, 20, 8, 0, &rng);
    TG_REQUIRE(a);
    tg_params p;
    tg_params_init(&p);
    tg_additive_attention_params(a, &p, NULL);
    cr_assert_eq(p.n, 3);
    cr_expect_str_eq(p.items[0].name, "W_k.weight");
    cr_expect_str_eq(p.items[1].name, "W_q.weight");
    cr_expect_str_eq(p.items[2].name, "w_v.weight");
    cr_expect(a->W_k->weight->shape[0] == 8 && a->W_k->weight->shape[1] == 2 && !a->W_k->bias);
    cr_expect(a->W_q->weight->shape[1] == 20 && a->w_v->weight->shape[0] == 1 && a->w_v->weight->shape[1] == 8);
    tg_params_free(&p);
    tg_scope_begin();
    tg_clear_error();
    cr_expect_null(tg_additive_attention_forward(a, tg_zeros(TG_SHAPE(2, 1, 19)), tg_ones(TG_SHAPE(2, 10, 2)),
                                                 tg_ones(TG_SHAPE(2, 10, 4)), (tg_mask){0}));
    cr_expect(error_has("additive_attention", "query size 20"), "%s", tg_last_error());
    tg_clear_error();
    cr_expect_null(tg_score_dot(tg_zeros(TG_SHAPE(2, 3, 4)), tg_zeros(TG_SHAPE(2, 5, 3))));
    cr_expect(error_has("score_dot", "feature sizes 4 and 3 differ"), "%s", tg_last_error());
    tg_clear_error();
    cr_expect_null(
        tg_score_general(tg_zeros(TG_SHAPE(2, 3, 4)), tg_zeros(TG_SHAPE(3, 4)), tg_zeros(TG_SHAPE(2, 5, 3))));
    cr_expect(error_has("score_general", "W must be (4,3)"), "%s", tg_last_error());
    tg_clear_error();
    cr_expect_null(tg_score_scaled_dot(tg_zeros(TG_SHAPE(2, 3, 4)), tg_zeros(TG_SHAPE(3, 5, 4))));
    cr_expect(error_has("score_scaled_dot", "(3,5,4)"), "%s", tg_last_error());
    tg_scope_end();
    tg_additive_attention_free(a);
}

/* The general and additive scores against direct loops. */
Test(attention, general_and_additive_scores_by_hand) {
    tg_rng rng = tg_rng_new(28);
    tg_scope_begin();
    tg_tensor *q = tg_randn(TG_SHAPE(2, 3, 4), &rng), *k = tg_randn(TG_SHAPE(2, 5, 6), &rng);
    tg_tensor *W = tg_randn(TG_SHAPE(4, 6), &rng);
    tg_tensor *Wq = tg_randn(TG_SHAPE(7, 4), &rng), *Wk = tg_randn(TG_SHAPE(7, 6), &rng);
    tg_tensor *wv = tg_randn(TG_SHAPE(1, 7), &rng);
    tg_tensor *g = tg_score_general(q, W, k), *a = tg_score_additive(q, k, Wq, Wk, wv);
    TG_REQUIRE(g);
    TG_REQUIRE(a);
    cr_assert(a->ndim == 3 && a->shape[0] == 2 && a->shape[1] == 3 && a->shape[2] == 5);
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 5; j++) {
                const tg_real *qi = q->data + (b * 3 + i) * 4, *kj = k->data + (b * 5 + j) * 6;
                double sg = 0, sa = 0;
                for (int x = 0; x < 4; x++)
                    for (int y = 0; y < 6; y++) sg += qi[x] * W->data[x * 6 + y] * kj[y];
                for (int hh = 0; hh < 7; hh++) {
                    double f = 0;
                    for (int x = 0; x < 4; x++) f += Wq->data[hh * 4 + x] * qi[x];
                    for (int y = 0; y < 6; y++) f += Wk->data[hh * 6 + y] * kj[y];
                    sa += wv->data[hh] * tanh(f);
                }
                int o = (b * 3 + i) * 5 + j;
                cr_expect(fabs(g->data[o] - sg) < 1e-12, "general [%d,%d,%d]", b, i, j);
                cr_expect(fabs(a->data[o] - sa) < 1e-12, "additive [%d,%d,%d]", b, i, j);
            }
    tg_scope_end();
}

/* ---- train / eval ----------------------------------------------------------- */

Test(attention, train_eval_reaches_children) {
    tg_rng rng = tg_rng_new(29);
    tg_mha *m = tg_mha_new(8, 8, 8, 8, 2, 0.5, false, &rng);
    tg_mha_record_attention(m, true);
    tg_additive_attention *a = tg_additive_attention_new(8, 8, 4, 0.5, &rng);
    tg_dot_attention *d = tg_dot_attention_new(0.5, &rng);
    TG_REQUIRE(m);
    TG_REQUIRE(a);
    TG_REQUIRE(d);
    cr_expect(m->attention->dropout->training && a->dropout->training && d->dropout->training);
    tg_mha_train(m, false);
    tg_additive_attention_train(a, false);
    tg_dot_attention_train(d, false);
    cr_expect(!m->attention->dropout->training && !a->dropout->training && !d->dropout->training);
    tg_scope_begin();
    tg_tensor *X = tg_randn(TG_SHAPE(2, 5, 8), &rng);
    tg_tensor *e1 = tg_mha_forward(m, X, X, X, (tg_mask){0}), *e2 = tg_mha_forward(m, X, X, X, (tg_mask){0});
    TG_REQUIRE(e1);
    expect_close(e2, e1->data, e1->size, 0); /* eval: deterministic */
    tg_mha_train(m, true);
    cr_expect(m->attention->dropout->training);
    tg_tensor *t1 = tg_mha_forward(m, X, X, X, (tg_mask){0});
    TG_REQUIRE(t1);
    int differ = 0;
    for (int64_t i = 0; i < t1->size; i++) differ += fabs(t1->data[i] - e1->data[i]) > 1e-9;
    cr_expect(differ > t1->size / 2, "training applies attention dropout (%d of %lld differ)", differ,
              (long long)t1->size);
    /* The kept weights are taken before dropout: the same in both modes. */
    tg_tensor *wt = m->attention->attention_weights;
    tg_mha_train(m, false);
    tg_mha_forward(m, X, X, X, (tg_mask){0});
    expect_close(m->attention->attention_weights, wt->data, wt->size, 1e-15);
    tg_scope_end();
    tg_mha_free(m);
    tg_additive_attention_free(a);
    tg_dot_attention_free(d);
}

/* ---- gradient checks (double, dropout 0) ------------------------------------- */

static tg_tensor *f_dot(tg_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return tg_score_dot(in[0], in[1]);
}
static tg_tensor *f_scaled(tg_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return tg_score_scaled_dot(in[0], in[1]);
}
static tg_tensor *f_general(tg_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return tg_score_general(in[0], in[2], in[1]);
}
static tg_tensor *f_additive(tg_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return tg_score_additive(in[0], in[1], in[2], in[3], in[4]);
}

Test(attention, gradcheck_scoring_functions) {
    tg_rng rng = tg_rng_new(31);
    tg_tensor *q = leaf(TG_SHAPE(2, 3, 4), &rng), *k = leaf(TG_SHAPE(2, 5, 4), &rng);
    tg_tensor *k6 = leaf(TG_SHAPE(2, 5, 6), &rng), *W = leaf(TG_SHAPE(4, 6), &rng);
    tg_tensor *Wq = leaf(TG_SHAPE(3, 4), &rng), *Wk = leaf(TG_SHAPE(3, 6), &rng), *wv = leaf(TG_SHAPE(1, 3), &rng);
    expect_gradcheck("score_dot (2,3,4) (2,5,4)", f_dot, (tg_tensor *[]){q, k}, 2, NULL);
    expect_gradcheck("score_scaled_dot (2,3,4) (2,5,4)", f_scaled, (tg_tensor *[]){q, k}, 2, NULL);
    expect_gradcheck("score_general (2,3,4) W(4,6) (2,5,6)", f_general, (tg_tensor *[]){q, k6, W}, 3, NULL);
    expect_gradcheck("score_additive h=3", f_additive, (tg_tensor *[]){q, k6, Wq, Wk, wv}, 5, NULL);
    free_all((tg_tensor *[]){q, k, k6, W, Wq, Wk, wv}, 7);
}

typedef struct {
    void *m;
    tg_mask mask;
    int n_params;
    bool self;
} att_ctx;

static tg_tensor *f_dot_attention(tg_tensor *const *in, int n, void *ctx) {
    (void)n;
    att_ctx *c = ctx;
    return tg_dot_attention_forward(c->m, in[0], in[1], in[2], c->mask);
}

Test(attention, gradcheck_dot_product_attention) {
    tg_rng rng = tg_rng_new(32);
    tg_dot_attention *att = tg_dot_attention_new(0, NULL);
    TG_REQUIRE(att);
    tg_tensor *in[3];
    qkv_leaves(in, 4, 4, 5, &rng);
    int lens1[2] = {2, 3}, lens2[6] = {1, 4, 2, 3, 2, 1};
    att_ctx c = {att, {NULL, 0, false}, 0, false};
    expect_gradcheck("dot_attention no mask", f_dot_attention, in, 3, &c);
    c.mask = (tg_mask){lens1, 1, false};
    expect_gradcheck("dot_attention 1-D lens", f_dot_attention, in, 3, &c);
    c.mask = (tg_mask){lens2, 2, false};
    expect_gradcheck("dot_attention 2-D lens", f_dot_attention, in, 3, &c);
    c.mask = (tg_mask){NULL, 0, true};
    expect_gradcheck("dot_attention causal", f_dot_attention, in, 3, &c);
    c.mask = (tg_mask){lens1, 1, true};
    expect_gradcheck("dot_attention 1-D lens + causal", f_dot_attention, in, 3, &c);
    att->sparse = true;
    c.mask = (tg_mask){lens1, 1, false};
    expect_gradcheck("dot_attention sparsemax 1-D lens", f_dot_attention, in, 3, &c);
    free_all(in, 3);
    tg_dot_attention_free(att);
}

static tg_tensor *f_additive_attention(tg_tensor *const *in, int n, void *ctx) {
    att_ctx *c = ctx;
    return tg_additive_attention_forward(c->m, in[n - 3], in[n - 2], in[n - 1], c->mask);
}

Test(attention, gradcheck_additive_attention) {
    tg_rng rng = tg_rng_new(33);
    tg_additive_attention *att = tg_additive_attention_new(3, 4, 5, 0, &rng);
    TG_REQUIRE(att);
    tg_tensor *in[6] = {att->W_k->weight, att->W_q->weight, att->w_v->weight};
    qkv_leaves(in + 3, 4, 3, 2, &rng);
    int lens[2] = {3, 2};
    att_ctx c = {att, {lens, 1, false}, 3, false};
    expect_gradcheck("additive_attention 1-D lens", f_additive_attention, in, 6, &c);
    free_all(in + 3, 3);
    tg_additive_attention_free(att);
}

static tg_tensor *f_mha(tg_tensor *const *in, int n, void *ctx) {
    att_ctx *c = ctx;
    if (c->self) return tg_mha_forward(c->m, in[n - 1], in[n - 1], in[n - 1], c->mask);
    return tg_mha_forward(c->m, in[n - 3], in[n - 2], in[n - 1], c->mask);
}

/* Parameters of m then the data inputs, in one array. */
static int mha_inputs(tg_mha *m, tg_tensor **in, tg_tensor *const *data, int n_data) {
    tg_params p;
    tg_params_init(&p);
    tg_mha_params(m, &p, NULL);
    int n = 0;
    for (int i = 0; i < p.n; i++) in[n++] = p.items[i].t;
    tg_params_free(&p);
    for (int i = 0; i < n_data; i++) in[n++] = data[i];
    return n;
}

Test(attention, gradcheck_multihead_attention) {
    tg_rng rng = tg_rng_new(34);
    tg_tensor *qkv[3];
    qkv_leaves(qkv, 6, 5, 7, &rng);
    int lens1[2] = {3, 2}, lens2[6] = {1, 4, 2, 3, 2, 1};
    for (int bias = 0; bias <= 1; bias++) {
        tg_mha *m = tg_mha_new(5, 6, 7, 8, 2, 0, bias, &rng);
        TG_REQUIRE(m);
        tg_tensor *in[11];
        int n = mha_inputs(m, in, qkv, 3);
        att_ctx c = {m, {lens1, 1, false}, n - 3, false};
        expect_gradcheck(bias ? "mha H8 h2 1-D lens, bias" : "mha H8 h2 1-D lens, no bias", f_mha, in, n, &c);
        c.mask = (tg_mask){lens2, 2, false};
        expect_gradcheck(bias ? "mha H8 h2 2-D lens, bias" : "mha H8 h2 2-D lens, no bias", f_mha, in, n, &c);
        tg_mha_free(m);
    }
    free_all(qkv, 3);
}

Test(attention, gradcheck_self_attention) {
    tg_rng rng = tg_rng_new(35);
    tg_mha *m = tg_mha_new(8, 8, 8, 8, 2, 0, true, &rng);
    TG_REQUIRE(m);
    tg_tensor *X = leaf(TG_SHAPE(2, 3, 8), &rng);
    tg_tensor *in[9];
    int n = mha_inputs(m, in, (tg_tensor *[]){X}, 1);
    int lens[2] = {3, 2};
    att_ctx c = {m, {lens, 1, false}, n - 1, true};
    expect_gradcheck("mha self-attention X,X,X lens", f_mha, in, n, &c);
    c.mask = (tg_mask){NULL, 0, true};
    expect_gradcheck("mha self-attention causal", f_mha, in, n, &c);
    tg_free(X);
    tg_mha_free(m);
}

/* ---- the path choice and the recording switch ------------------------------ */

static double max_abs_diff(const tg_tensor *a, const tg_tensor *b) {
    cr_assert(a && b && a->size == b->size);
    double m = 0;
    for (int64_t i = 0; i < a->size; i++) m = fmax(m, fabs((double)a->data[i] - (double)b->data[i]));
    return m;
}

/* With 70 keys the default forward runs the fused op; recording runs the
 * stored path. Same outputs (and the same dropout masks in training), and the
 * recorded weights of each head are masked_softmax(Q_j K_j^T / sqrt(d)). */
Test(attention, recording_matches_the_fused_default) {
    tg_rng rng = tg_rng_new(40);
    int B = 2, T = 70, H = 8, h = 2, d = H / h;
    tg_mha *m = tg_mha_new(H, H, H, H, h, 0.3, false, &rng);
    TG_REQUIRE(m);
    tg_scope_begin();
    tg_tensor *X = tg_randn(TG_SHAPE(B, T, H), &rng);
    int lens[2] = {70, 33};
    tg_mask mask = {lens, 1, false};
    for (int training = 0; training <= 1; training++) {
        tg_mha_train(m, training);
        tg_rng saved = m->attention->dropout->rng;
        tg_mha_record_attention(m, false);
        tg_tensor *fused = tg_mha_forward(m, X, X, X, mask);
        TG_REQUIRE(fused);
        cr_expect_null(m->attention->attention_weights, "the fused path stores no weights");
        cr_expect_null(tg_mha_attention_weights(m, 0));
        cr_expect(error_has("mha_attention_weights", "no weights recorded"), "%s", tg_last_error());
        uint64_t used = m->attention->dropout->rng.counter - saved.counter;
        m->attention->dropout->rng = saved;
        tg_mha_record_attention(m, true);
        tg_tensor *rec = tg_mha_forward(m, X, X, X, mask);
        TG_REQUIRE(rec);
        cr_expect(max_abs_diff(fused, rec) <= 1e-12, "training %d: fused and recording differ by %g", training,
                  max_abs_diff(fused, rec));
        cr_expect_eq(m->attention->dropout->rng.counter - saved.counter, used, "the same dropout draws");
        cr_expect_eq(used, training ? (uint64_t)B * h * T * T : 0);
    }
    /* The recorded weights against the stored path built head by head. */
    tg_tensor *Q = tg_linear_forward(m->W_q, X), *K = tg_linear_forward(m->W_k, X);
    for (int j = 0; j < h; j++) {
        tg_tensor *want = tg_masked_softmax(
            tg_score_scaled_dot(tg_slice(Q, 2, d * j, d * j + d), tg_slice(K, 2, d * j, d * j + d)), mask);
        tg_tensor *got = tg_mha_attention_weights(m, j);
        TG_REQUIRE(want);
        TG_REQUIRE(got);
        cr_expect(got->ndim == 3 && got->shape[0] == B && got->shape[1] == T && got->shape[2] == T);
        cr_expect(max_abs_diff(got, want) <= 1e-12, "head %d: recorded weights differ by %g", j,
                  max_abs_diff(got, want));
    }
    tg_clear_error();
    cr_expect_null(tg_mha_attention_weights(m, h));
    cr_expect(error_has("mha_attention_weights", "head 2 is outside [0, 2)"), "%s", tg_last_error());
    cr_expect_null(tg_mha_attention_weights(m, -1));
    cr_expect_null(tg_mha_attention_weights(NULL, 0));
    cr_expect(error_has("mha_attention_weights", "NULL module"), "%s", tg_last_error());
    tg_scope_end();
    tg_mha_free(m);
}

/* The op that made out: "attention" for the fused op, "matmul" for the
 * stored path's last product. */
static const char *made_by(const tg_tensor *out) { return out && out->node ? out->node->op->name : "(none)"; }

/* TG_PATH_AUTO's rule (attention.c): the fused op for short sequences
 * (whole entries, kernels_attention.c), except with position terms or bf16
 * products below 64 keys, where the op would take its blocked path and the
 * stored path is faster; recording and sparsemax force the stored path,
 * TG_PATH_FUSED and _STORED force theirs. */
Test(attention, the_rule_takes_the_fused_op_for_short_sequences) {
    tg_rng rng = tg_rng_new(8);
    tg_dot_attention *m = tg_dot_attention_new(0.1, &rng);
    TG_REQUIRE(m);
    tg_real slopes[2];
    tg_alibi_slopes(2, slopes);
    tg_attn_pos alibi = {.heads = 2, .alibi = slopes};
    cr_expect(tg_dot_attention_takes_fused(m, 16, false));
    cr_expect(tg_dot_attention_takes_fused(m, 1, false));
    cr_expect_not(tg_dot_attention_takes_fused(m, 16, true));
    cr_expect_not(tg_dot_attention_takes_fused(m, 63, true));
    cr_expect(tg_dot_attention_takes_fused(m, 64, true));
    for (int K = 16; K <= 64; K += 48) {
        tg_tensor *q = leaf(TG_SHAPE(4, 16, 8), &rng), *k = leaf(TG_SHAPE(4, K, 8), &rng);
        tg_tensor *v = leaf(TG_SHAPE(4, K, 8), &rng);
        tg_mask none = {NULL, 0, false};
        cr_expect_str_eq(made_by(tg_dot_attention_forward_pos(m, q, k, v, none, NULL)), "attention", "K %d", K);
        cr_expect_str_eq(made_by(tg_dot_attention_forward_pos(m, q, k, v, none, &alibi)),
                         K < 64 ? "matmul" : "attention", "K %d with ALiBi", K);
        m->path = TG_PATH_FUSED;
        cr_expect_str_eq(made_by(tg_dot_attention_forward_pos(m, q, k, v, none, &alibi)), "attention", "K %d", K);
        m->path = TG_PATH_STORED;
        cr_expect_str_eq(made_by(tg_dot_attention_forward_pos(m, q, k, v, none, NULL)), "matmul", "K %d", K);
        m->path = TG_PATH_AUTO;
        tg_dot_attention_record(m, true);
        cr_expect_str_eq(made_by(tg_dot_attention_forward_pos(m, q, k, v, none, NULL)), "matmul", "K %d", K);
        tg_dot_attention_record(m, false);
    }
    m->sparse = true;
    cr_expect_not(tg_dot_attention_takes_fused(m, 16, false));
    cr_expect_not(tg_dot_attention_takes_fused(m, 128, false));
    m->sparse = false;
    tg_precision prev = tg_set_precision(TG_PREC_BF16); /* refused by the double build */
    if (tg_get_precision() == TG_PREC_BF16) {
        cr_expect_not(tg_dot_attention_takes_fused(m, 16, false));
        cr_expect(tg_dot_attention_takes_fused(m, 64, false));
    }
    tg_set_precision(prev);
    tg_clear_error();
    tg_dot_attention_free(m);
}

/* One switch on the encoder records every layer and head; the encoder's
 * fused default gives the recording forward's output. */
Test(attention, encoder_records_every_layer_and_head) {
    tg_scope_end();
    tg_encoder_config cfg = tiny_encoder(11, 16, 24, 4, 2, 100);
    cfg.dropout = 0.1;
    cfg.use_bias = true;
    tg_rng rng = tg_rng_new(41);
    tg_encoder *e = tg_encoder_new(&cfg, &rng);
    TG_REQUIRE(e);
    tg_encoder_train(e, false);
    int B = 2, T = 66, tokens[2 * 66];
    for (int i = 0; i < B * T; i++) tokens[i] = (i * 7 + 3) % cfg.vocab_size;
    static const int lens[] = {66, 40};
    tg_mask mask = {lens, 1, false};
    tg_scope_begin();
    tg_tensor *fused = tg_encoder_forward(e, tokens, B, T, mask);
    TG_REQUIRE(fused);
    cr_expect_null(tg_encoder_attention_weights(e, 0, 0));
    tg_encoder_record_attention(e, true);
    tg_tensor *rec = tg_encoder_forward(e, tokens, B, T, mask);
    TG_REQUIRE(rec);
    cr_expect(max_abs_diff(fused, rec) <= 1e-12, "encoder: fused and recording differ by %g", max_abs_diff(fused, rec));
    for (int l = 0; l < cfg.num_layers; l++)
        for (int j = 0; j < cfg.num_heads; j++) {
            tg_tensor *w = tg_encoder_attention_weights(e, l, j);
            TG_REQUIRE(w);
            cr_assert(w->ndim == 3 && w->shape[0] == B && w->shape[1] == T && w->shape[2] == T);
            for (int b = 0; b < B; b++)
                for (int q = 0; q < T; q++) expect_row(w->data + ((int64_t)b * T + q) * T, T, lens[b], "encoder", q);
        }
    tg_clear_error();
    cr_expect_null(tg_encoder_attention_weights(e, 2, 0));
    cr_expect(error_has("encoder_attention_weights", "layer 2 is outside [0, 2)"), "%s", tg_last_error());
    cr_expect_null(tg_encoder_attention_weights(e, 0, 4));
    cr_expect(error_has("mha_attention_weights", "head 4"), "%s", tg_last_error());
    cr_expect_null(tg_encoder_attention_weights(NULL, 0, 0));
    tg_encoder_record_attention(e, false);
    cr_expect_null(tg_encoder_attention_weights(e, 0, 0), "switching off forgets the weights");
    tg_encoder_record_attention(NULL, true); /* NULL is ignored */
    tg_mha_record_attention(NULL, true);
    tg_scope_end();
    tg_encoder_free(e);
    tg_scope_begin();
}

/* Dropout p = 1 (torch allows it) drops every weight: the fused op gives
 * zeros and zero gradients, as the stored path, and draws nothing. */
static tg_tensor *f_fused_p1(tg_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return tg_attention(in[0], in[1], in[2], (tg_mask){NULL, 0, true}, 1, NULL);
}
static tg_tensor *f_stored_p1(tg_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    tg_tensor *w = tg_masked_softmax(tg_score_scaled_dot(in[0], in[1]), (tg_mask){NULL, 0, true});
    return tg_matmul(tg_dropout(w, 1, NULL), in[2]);
}
Test(attention, dropout_one_gives_zeros_on_both_paths) {
    tg_rng rng = tg_rng_new(42);
    tg_scope_begin();
    tg_tensor *in[3] = {leaf(TG_SHAPE(2, 3, 4), &rng), leaf(TG_SHAPE(2, 5, 4), &rng), leaf(TG_SHAPE(2, 5, 3), &rng)};
    tg_fn fs[2] = {f_fused_p1, f_stored_p1};
    for (int p = 0; p < 2; p++) {
        for (int i = 0; i < 3; i++) tg_zero_grad(in[i]);
        tg_tensor *y = fs[p](in, 3, NULL);
        TG_REQUIRE(y);
        for (int64_t i = 0; i < y->size; i++) cr_expect(y->data[i] == 0, "path %d: output %g", p, (double)y->data[i]);
        cr_assert(tg_backward(tg_sum_all(y)) == 0, "%s", tg_last_error());
        for (int i = 0; i < 3; i++)
            for (int64_t j = 0; in[i]->grad && j < in[i]->grad->size; j++)
                cr_expect(in[i]->grad->data[j] == 0, "path %d: input %d has gradient", p, i);
    }
    tg_rng before = rng;
    cr_expect_not_null(tg_attention(in[0], in[1], in[2], (tg_mask){0}, 1, &rng));
    cr_expect_eq(rng.counter, before.counter, "p = 1 draws nothing");
    tg_scope_end();
    free_all(in, 3);
}

/* The recorded weights live in the forward's scope: asked for after it
 * ended, the modules say so instead of copying freed memory. */
Test(attention, weights_asked_for_after_their_scope_are_refused) {
    tg_rng rng = tg_rng_new(41);
    tg_mha *m = recording_mha(8, 2, 0, &rng);
    tg_decoder_config cfg = tg_decoder_config_default(11, 8, 1, 2, 8);
    tg_decoder *d = tg_decoder_new(&cfg, &rng);
    TG_REQUIRE(d);
    tg_decoder_record_attention(d, true);
    tg_scope_begin();
    tg_tensor *X = tg_randn(TG_SHAPE(1, 4, 8), &rng);
    int ids[4] = {1, 2, 3, 4};
    TG_REQUIRE(tg_mha_forward(m, X, X, X, (tg_mask){0}));
    TG_REQUIRE(tg_decoder_forward(d, ids, 1, 4));
    cr_expect_not_null(tg_mha_attention_weights(m, 1), "%s", tg_last_error());
    cr_expect_not_null(tg_decoder_attention_weights(d, 0, 1), "%s", tg_last_error());
    tg_scope_end();
    tg_scope_begin(); /* the arena's memory is reused by a new scope */
    tg_randn(TG_SHAPE(64, 64), &rng);
    cr_expect_null(tg_mha_attention_weights(m, 1));
    cr_expect(error_has("mha_attention_weights", "no longer valid"), "%s", tg_last_error());
    cr_expect_null(tg_decoder_attention_weights(d, 0, 1));
    cr_expect(error_has("decoder_attention_weights", "no longer valid"), "%s", tg_last_error());
    tg_scope_end();
    tg_decoder_free(d);
    tg_mha_free(m);
}
