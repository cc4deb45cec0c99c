/* Sequence layers of src/nn: Conv1d, RNN, GRU. Hand-computed forwards,
 * shapes, errors, parameter names, and gradient checks in double precision
 * (every parameter and the input, max rel error <= 1e-6). Then a sequence
 * layer of a chosen kind and the model around it (tg_seq_layer,
 * tg_seq_model): each kind is the modules it names, drawn in order; the
 * path lengths (tg_seq_layer_paths, _reach) and sequential operations
 * (_depth) are what the chapter's table predicts; gradients through them. */
#include "test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static tg_tensor *input(int ndim, const int *shape, tg_rng *rng) {
    tg_tensor *x = tg_randn(ndim, shape, rng);
    tg_set_requires_grad(x, true);
    return x;
}

/* The function closes over the module (ctx) and reads the last input. */
static tg_tensor *conv_f(tg_tensor *const *in, int n, void *ctx) { return tg_conv1d_forward(ctx, in[n - 1]); }
static tg_tensor *rnn_f(tg_tensor *const *in, int n, void *ctx) { return tg_rnn_forward(ctx, in[n - 1]); }
static tg_tensor *gru_f(tg_tensor *const *in, int n, void *ctx) { return tg_gru_forward(ctx, in[n - 1]); }
/* With a state: the inputs end with x, h0; ctx's module and which output. */
typedef struct {
    tg_rnn *m;
    bool gru;
    int out; /* 0: the output sequence, 1: h_n, 2: both, summed with weights */
} state_case;
static tg_tensor *state_f(tg_tensor *const *in, int n, void *ctx) {
    const state_case *c = ctx;
    tg_tensor *h_n = NULL;
    tg_tensor *y = c->gru ? tg_gru_forward_state(c->m, in[n - 2], in[n - 1], &h_n)
                          : tg_rnn_forward_state(c->m, in[n - 2], in[n - 1], &h_n);
    if (c->out == 0) return y;
    if (c->out == 1) return h_n;
    return tg_add(tg_sum_all(tg_mul(y, y)), tg_sum_all(tg_mul_scalar(h_n, 3)));
}

static void check(tg_fn f, void *m, tg_params *p, tg_tensor *x, const char *what) {
    tg_tensor *in[40];
    int n = 0;
    for (int i = 0; i < p->n; i++) in[n++] = p->items[i].t;
    in[n++] = x;
    tg_gradcheck_result r;
    bool ok = tg_gradcheck(f, in, n, m, 1e-6, 1e-6, &r);
    if (getenv("TG_GC_LOG")) fprintf(stderr, "gradcheck %-30s max rel %.3e\n", what, r.max_rel_err);
    cr_expect(ok, "%s: max rel err %g at input %d [%lld]: %s", what, r.max_rel_err, r.worst_input,
              (long long)r.worst_index, tg_last_error() ? tg_last_error() : "");
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += in[i]->size;
    cr_expect_eq(r.checked, total, "%s", what);
}

Test(seq_layers, conv1d_gradcheck) {
    const int cfg[][3] = {{3, 1, 1}, {3, 2, 1}, {2, 1, 1}, {4, 2, 0}, {1, 1, 1}, {5, 1, 1}};
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
        tg_rng rng = tg_rng_new(10 + c);
        tg_conv1d *m = tg_conv1d_new(3, 2, cfg[c][0], cfg[c][1], cfg[c][2], &rng);
        TG_REQUIRE(m);
        tg_params p;
        tg_params_init(&p);
        cr_assert_eq(tg_conv1d_params(m, &p, ""), 0);
        tg_tensor *x = input(TG_SHAPE(2, 7, 3), &rng);
        char what[64];
        snprintf(what, sizeof what, "conv1d k %d dil %d bias %d", cfg[c][0], cfg[c][1], cfg[c][2]);
        check(conv_f, m, &p, x, what);
        tg_params_free(&p);
        tg_free(x);
        tg_conv1d_free(m);
    }
}

Test(seq_layers, rnn_and_gru_gradcheck) {
    tg_rng rng = tg_rng_new(3);
    tg_rnn *r = tg_rnn_new(3, 4, 2, &rng);
    tg_gru *g = tg_gru_new(3, 4, 2, &rng);
    TG_REQUIRE(r);
    TG_REQUIRE(g);
    tg_params pr, pg;
    tg_params_init(&pr);
    tg_params_init(&pg);
    cr_assert_eq(tg_rnn_params(r, &pr, "rnn"), 0);
    cr_assert_eq(tg_gru_params(g, &pg, "gru"), 0);
    cr_expect_eq(pr.n, 8);
    cr_expect_str_eq(pr.items[0].name, "rnn.weight_ih_l0");
    cr_expect_str_eq(pr.items[7].name, "rnn.bias_hh_l1");
    cr_expect_str_eq(pg.items[5].name, "gru.weight_hh_l1");
    cr_expect(pg.items[0].t->shape[0] == 12 && pg.items[0].t->shape[1] == 3);
    cr_expect(pg.items[4].t->shape[0] == 12 && pg.items[4].t->shape[1] == 4);
    tg_tensor *x = input(TG_SHAPE(2, 6, 3), &rng);
    check(rnn_f, r, &pr, x, "rnn 2 layers (2,6,3)");
    check(gru_f, g, &pg, x, "gru 2 layers (2,6,3)");
    tg_params_free(&pr);
    tg_params_free(&pg);
    tg_free(x);
    tg_rnn_free(r);
    tg_gru_free(g);
}

/* torch's (output, h_n) = rnn(x, h0): gradients through h0 and from h_n,
 * for both layers of both modules (every parameter, x and h0 checked). */
Test(seq_layers, rnn_and_gru_state_gradcheck) {
    for (int gru = 0; gru <= 1; gru++) {
        tg_rng rng = tg_rng_new(30 + gru);
        tg_rnn *m = gru ? tg_gru_new(3, 4, 2, &rng) : tg_rnn_new(3, 4, 2, &rng);
        TG_REQUIRE(m);
        tg_params p;
        tg_params_init(&p);
        cr_assert_eq(gru ? tg_gru_params(m, &p, "") : tg_rnn_params(m, &p, ""), 0);
        tg_tensor *x = input(TG_SHAPE(2, 5, 3), &rng), *h0 = input(TG_SHAPE(2, 2, 4), &rng);
        tg_params_add(&p, NULL, "x", x); /* check() adds its last input after these: h0 */
        for (int out = 0; out <= 2; out++) {
            state_case c = {m, gru, out};
            char what[64];
            snprintf(what, sizeof what, "%s h0 -> %s", gru ? "gru" : "rnn",
                     out == 0   ? "output"
                     : out == 1 ? "h_n"
                                : "both");
            check(state_f, &c, &p, h0, what);
        }
        /* h_n is the last step of the last layer's output; no h0 is a zero one. */
        tg_scope_begin();
        tg_tensor *h_n = NULL, *z = tg_zeros(TG_SHAPE(2, 2, 4));
        tg_tensor *y = gru ? tg_gru_forward_state(m, x, NULL, &h_n) : tg_rnn_forward_state(m, x, NULL, &h_n);
        tg_tensor *y0 = gru ? tg_gru_forward_state(m, x, z, NULL) : tg_rnn_forward_state(m, x, z, NULL);
        TG_REQUIRE(y);
        TG_REQUIRE(y0);
        TG_REQUIRE(h_n);
        cr_expect(h_n->ndim == 3 && h_n->shape[0] == 2 && h_n->shape[1] == 2 && h_n->shape[2] == 4);
        for (int b = 0; b < 2; b++)
            for (int k = 0; k < 4; k++)
                cr_expect_eq(h_n->data[(1 * 2 + b) * 4 + k], y->data[(b * 5 + 4) * 4 + k], "h_n[1] = y[:, -1]");
        for (int64_t i = 0; i < y->size; i++) cr_expect_eq(y->data[i], y0->data[i], "NULL h0 is a zero one");
        tg_clear_error();
        cr_expect_null(tg_rnn_forward_state(gru ? NULL : m, x, tg_zeros(TG_SHAPE(1, 2, 4)), &h_n));
        cr_expect(gru || strstr(tg_last_error(), "h0 (1,2,4), expected [layers, B, H] = (2,2,4)"), "%s",
                  tg_last_error());
        cr_expect_null(h_n, "no h_n on an error");
        tg_scope_end();
        tg_params_free(&p);
        tg_free(x);
        tg_free(h0);
        gru ? tg_gru_free(m) : tg_rnn_free(m);
    }
}

Test(seq_layers, conv1d_by_hand) {
    /* in 1, out 1, k 3, weights (1, 2, 3), bias 0.5: same padding 1 each side.
     * x = 1 2 3 4: y_t = 1 x_{t-1} + 2 x_t + 3 x_{t+1} + 0.5. */
    tg_rng rng = tg_rng_new(1);
    tg_conv1d *m = tg_conv1d_new(1, 1, 3, 1, true, &rng);
    TG_REQUIRE(m);
    memcpy(m->weight->data, (tg_real[]){1, 2, 3}, 3 * sizeof(tg_real));
    m->bias->data[0] = 0.5;
    tg_scope_begin();
    tg_tensor *x = tg_from_array(TG_SHAPE(1, 4, 1), (tg_real[]){1, 2, 3, 4});
    tg_tensor *y = tg_conv1d_forward(m, x);
    TG_REQUIRE(y);
    const double want[4] = {0 + 2 + 6 + 0.5, 1 + 4 + 9 + 0.5, 2 + 6 + 12 + 0.5, 3 + 8 + 0 + 0.5};
    for (int t = 0; t < 4; t++) cr_expect(fabs(y->data[t] - want[t]) < 1e-12, "t %d: %g", t, y->data[t]);
    tg_scope_end();
    tg_conv1d_free(m);

    /* k 2, dilation 2: span 2, left 1, right 1 (torch 'same'): y_t = w0 x_{t-1} + w1 x_{t+1}. */
    m = tg_conv1d_new(1, 1, 2, 2, false, &rng);
    TG_REQUIRE(m);
    memcpy(m->weight->data, (tg_real[]){10, 1}, 2 * sizeof(tg_real));
    tg_scope_begin();
    x = tg_from_array(TG_SHAPE(1, 4, 1), (tg_real[]){1, 2, 3, 4});
    y = tg_conv1d_forward(m, x);
    TG_REQUIRE(y);
    const double want2[4] = {2, 13, 24, 30};
    for (int t = 0; t < 4; t++) cr_expect(fabs(y->data[t] - want2[t]) < 1e-12, "dil t %d: %g", t, y->data[t]);
    tg_scope_end();
    tg_conv1d_free(m);
}

Test(seq_layers, rnn_step_by_hand) {
    /* input 1, hidden 1: h1 = tanh(w_ih x1 + b_ih + b_hh), h2 = tanh(w_ih x2 + b_ih + w_hh h1 + b_hh). */
    tg_rng rng = tg_rng_new(1);
    tg_rnn *m = tg_rnn_new(1, 1, 1, &rng);
    TG_REQUIRE(m);
    m->w_ih[0]->data[0] = 0.5;
    m->w_hh[0]->data[0] = -0.7;
    m->b_ih[0]->data[0] = 0.1;
    m->b_hh[0]->data[0] = 0.2;
    tg_scope_begin();
    tg_tensor *x = tg_from_array(TG_SHAPE(1, 2, 1), (tg_real[]){1, -2});
    tg_tensor *y = tg_rnn_forward(m, x);
    TG_REQUIRE(y);
    double h1 = tanh(0.5 + 0.3), h2 = tanh(-1.0 + 0.3 - 0.7 * h1);
    cr_expect(fabs(y->data[0] - h1) < 1e-12 && fabs(y->data[1] - h2) < 1e-12, "%g %g", y->data[0], y->data[1]);
    tg_scope_end();
    tg_rnn_free(m);

    /* GRU, hidden 1, one step from h = 0: h' = (1 - z) n. */
    tg_gru *g = tg_gru_new(1, 1, 1, &rng);
    TG_REQUIRE(g);
    memcpy(g->w_ih[0]->data, (tg_real[]){0.3, -0.4, 0.8}, 3 * sizeof(tg_real));
    memcpy(g->b_ih[0]->data, (tg_real[]){0.1, 0.2, -0.1}, 3 * sizeof(tg_real));
    memcpy(g->b_hh[0]->data, (tg_real[]){0.05, -0.05, 0.3}, 3 * sizeof(tg_real));
    tg_scope_begin();
    x = tg_from_array(TG_SHAPE(1, 1, 1), (tg_real[]){2});
    y = tg_gru_forward(g, x);
    TG_REQUIRE(y);
    double r = 1 / (1 + exp(-(0.6 + 0.1 + 0.05))), z = 1 / (1 + exp(-(-0.8 + 0.2 - 0.05)));
    double n = tanh(1.6 - 0.1 + r * 0.3);
    cr_expect(fabs(y->data[0] - (1 - z) * n) < 1e-12, "gru %g vs %g", y->data[0], (1 - z) * n);
    tg_scope_end();
    tg_gru_free(g);
}

Test(seq_layers, shapes_and_errors) {
    tg_rng rng = tg_rng_new(2);
    cr_expect_null(tg_conv1d_new(0, 2, 3, 1, true, &rng));
    cr_expect(strstr(tg_last_error(), "conv1d"));
    cr_expect_null(tg_rnn_new(3, 0, 1, &rng));
    cr_expect(strstr(tg_last_error(), "rnn"));
    cr_expect_null(tg_gru_new(3, 4, 0, &rng));
    tg_conv1d *c = tg_conv1d_new(4, 6, 3, 2, true, &rng);
    tg_rnn *r = tg_rnn_new(4, 5, 2, &rng);
    tg_gru *g = tg_gru_new(4, 5, 1, &rng);
    TG_REQUIRE(c);
    TG_REQUIRE(r);
    TG_REQUIRE(g);
    cr_expect(c->weight->shape[0] == 6 && c->weight->shape[1] == 4 && c->weight->shape[2] == 3);
    tg_scope_begin();
    tg_tensor *x = tg_randn(TG_SHAPE(2, 9, 4), &rng);
    tg_tensor *ys[3] = {tg_conv1d_forward(c, x), tg_rnn_forward(r, x), tg_gru_forward(g, x)};
    const int outd[3] = {6, 5, 5};
    for (int i = 0; i < 3; i++) {
        TG_REQUIRE(ys[i]);
        cr_expect(ys[i]->ndim == 3 && ys[i]->shape[0] == 2 && ys[i]->shape[1] == 9 && ys[i]->shape[2] == outd[i]);
    }
    tg_tensor *bad = tg_randn(TG_SHAPE(2, 9, 3), &rng);
    tg_clear_error();
    cr_expect_null(tg_conv1d_forward(c, bad));
    cr_expect(strstr(tg_last_error(), "conv1d") && strstr(tg_last_error(), "(2,9,3)"), "%s", tg_last_error());
    tg_clear_error();
    cr_expect_null(tg_rnn_forward(r, bad));
    cr_expect(strstr(tg_last_error(), "rnn") && strstr(tg_last_error(), "(2,9,3)"), "%s", tg_last_error());
    tg_clear_error();
    cr_expect_null(tg_gru_forward(g, tg_randn(TG_SHAPE(9, 4), &rng)));
    cr_expect(strstr(tg_last_error(), "gru"), "%s", tg_last_error());
    cr_expect_null(tg_gru_forward(r, x)); /* an RNN is not a GRU */
    cr_expect_eq(tg_conv1d_params(NULL, NULL, ""), -1);
    cr_expect(strstr(tg_last_error(), "conv1d_params: NULL module"), "%s", tg_last_error());
    cr_expect_eq(tg_gru_params(NULL, NULL, ""), -1);
    cr_expect(strstr(tg_last_error(), "gru_params: NULL module"), "%s", tg_last_error());
    tg_scope_end();
    tg_conv1d_free(c);
    tg_rnn_free(r);
    tg_gru_free(g);
}

/* ---- tg_seq_layer, tg_seq_model ---------------------------------------- */

static tg_seq_layer_config layer_cfg(tg_seq_kind k, int d, int depth, bool relu) {
    return (tg_seq_layer_config){.kind = k, .dim = d, .depth = depth, .kernel = 3, .heads = 2, .relu = relu};
}

/* Each kind is the modules it names, drawn from the generator in order: a
 * CNN of two with a ReLU between is conv1(relu(conv0(x))), bit for bit. */
Test(seq_layer, kinds_are_their_modules) {
    static const char *const names[TG_SEQ_KINDS] = {"cnn", "rnn", "gru", "attention", "attention-stored", "mha"};
    for (int k = 0; k < TG_SEQ_KINDS; k++) cr_expect_str_eq(tg_seq_kind_name((tg_seq_kind)k), names[k]);
    cr_expect_null(tg_seq_kind_name(TG_SEQ_KINDS));
    tg_rng a = tg_rng_new(5), b = tg_rng_new(5);
    tg_seq_layer_config c = layer_cfg(TG_SEQ_CNN, 4, 2, true);
    tg_seq_layer *m = tg_seq_layer_new(&c, &a);
    tg_conv1d *c0 = tg_conv1d_new(4, 4, 3, 1, true, &b), *c1 = tg_conv1d_new(4, 4, 3, 1, true, &b);
    cr_assert(m && c0 && c1, "%s", tg_last_error());
    tg_tensor *x = tg_randn(TG_SHAPE(2, 5, 4), &a);
    tg_scope_begin();
    tg_tensor *y = tg_seq_layer_forward(m, x), *z = tg_conv1d_forward(c1, tg_relu(tg_conv1d_forward(c0, x)));
    cr_assert(y && z, "%s", tg_last_error());
    cr_expect(y->ndim == 3 && y->shape[0] == 2 && y->shape[1] == 5 && y->shape[2] == 4);
    cr_expect_arr_eq(y->data, z->data, sizeof(tg_real) * (size_t)z->size);
    tg_scope_end();
    tg_params p;
    tg_params_init(&p);
    cr_assert_eq(tg_seq_layer_params(m, &p, "conv"), 0, "%s", tg_last_error());
    cr_expect(tg_params_get(&p, "conv0.weight") && tg_params_get(&p, "conv1.bias"), "conv0.*, conv1.*");
    tg_params_free(&p);
    tg_seq_layer_free(m);
    tg_conv1d_free(c0), tg_conv1d_free(c1);
    /* Every kind maps [B, n, d] to [B, n, d]; one MHA is "mha.*". */
    for (int k = 0; k < TG_SEQ_KINDS; k++) {
        c = layer_cfg((tg_seq_kind)k, 4, 1, false);
        m = tg_seq_layer_new(&c, &a);
        TG_REQUIRE(m);
        tg_scope_begin();
        y = tg_seq_layer_forward(m, x);
        cr_expect(y && y->shape[0] == 2 && y->shape[1] == 5 && y->shape[2] == 4, "%s", tg_seq_kind_name(c.kind));
        tg_scope_end();
        tg_params_init(&p);
        cr_expect_eq(tg_seq_layer_params(m, &p, NULL), 0);
        if (k == TG_SEQ_MHA) cr_expect(tg_params_get(&p, "mha.W_q.weight"), "%s", p.n ? p.items[0].name : "none");
        if (k == TG_SEQ_GRU) cr_expect(tg_params_get(&p, "gru.weight_ih_l0"));
        cr_expect_eq(p.n == 0, k == TG_SEQ_ATTENTION || k == TG_SEQ_ATTENTION_STORED, "%s", tg_seq_kind_name(c.kind));
        tg_params_free(&p);
        tg_seq_layer_free(m);
    }
    tg_free(x);
    c = layer_cfg(TG_SEQ_KINDS, 4, 1, false);
    cr_expect_null(tg_seq_layer_new(&c, &a));
    cr_expect(error_has("seq_layer", "unknown kind"), "%s", tg_last_error());
    c = layer_cfg(TG_SEQ_CNN, 4, 0, false);
    cr_expect_null(tg_seq_layer_new(&c, &a));
    cr_expect(error_has("seq_layer", "depth"), "%s", tg_last_error());
    cr_expect_null(tg_seq_layer_forward(NULL, NULL));
}

/* The chapter's path lengths: a convolution of width 3 reaches one position
 * each way, an RNN only the past, self-attention everything; the last
 * output of a CNN needs n - 1 layers to see the first input, the others one. */
Test(seq_layer, path_lengths_and_sequential_operations) {
    tg_rng rng = tg_rng_new(9);
    const int n = 6, d = 4;
    double G[36];
    tg_seq_kind kinds[3] = {TG_SEQ_CNN, TG_SEQ_RNN, TG_SEQ_ATTENTION};
    for (int i = 0; i < 3; i++) {
        tg_seq_layer_config c = layer_cfg(kinds[i], d, 1, false);
        tg_seq_layer *m = tg_seq_layer_new(&c, &rng);
        tg_tensor *x = tg_randn(TG_SHAPE(1, n, d), &rng);
        cr_assert(m && x, "%s", tg_last_error());
        tg_set_requires_grad(x, true);
        cr_assert_eq(tg_seq_layer_paths(m, x, -1, G), 0, "%s", tg_last_error());
        for (int t = 0; t < n; t++)
            for (int s = 0; s < n; s++) {
                bool reach = kinds[i] == TG_SEQ_CNN ? abs(t - s) <= 1 : kinds[i] == TG_SEQ_RNN ? s <= t : true;
                cr_expect_eq(G[t * n + s] > 0, reach, "%s: dy_%d/dx_%d = %g", tg_seq_kind_name(kinds[i]), t, s,
                             G[t * n + s]);
            }
        int depth = tg_seq_layer_depth(m, n, &rng);
        if (kinds[i] == TG_SEQ_ATTENTION) cr_expect_eq(depth, 1, "one fused op");
        if (kinds[i] == TG_SEQ_RNN) cr_expect_gt(depth, tg_seq_layer_depth(m, 2, &rng), "grows with n");
        double t = tg_seq_layer_time(m, 2, n, 3, true, &rng);
        cr_expect(isfinite(t) && t > 0, "%g s", t);
        tg_free(x);
        tg_seq_layer_free(m);
    }
    double rel = 0;
    tg_seq_layer_config c = layer_cfg(TG_SEQ_CNN, d, 1, false);
    cr_expect_eq(tg_seq_layer_reach(&c, n, n + 2, &rng, &rel), n - 1, "a CNN of k 3 adds one position a layer");
    cr_expect(rel > 0 && rel <= 1, "%g", rel);
    cr_expect_eq(tg_seq_layer_reach(&c, n, n - 2, &rng, NULL), -1, "not within n - 2 layers");
    c.kind = TG_SEQ_RNN;
    cr_expect_eq(tg_seq_layer_reach(&c, n, 4, &rng, &rel), 1);
    c.kind = TG_SEQ_ATTENTION;
    cr_expect_eq(tg_seq_layer_reach(&c, n, 4, &rng, &rel), 1);
    tg_tensor *x = tg_randn(TG_SHAPE(2, n, d), &rng);
    cr_expect_eq(tg_seq_layer_paths(NULL, x, -1, G), -1);
    cr_expect(error_has("seq_layer_paths", NULL));
    tg_free(x);
}

static tg_tensor *layer_f(tg_tensor *const *in, int n, void *ctx) {
    return tg_sum_all(tg_mul(tg_seq_layer_forward(ctx, in[n - 1]), in[n - 1]));
}

/* Gradients through the layers (double build: tight tolerances). */
Test(seq_layer, gradcheck) {
    tg_seq_kind kinds[4] = {TG_SEQ_CNN, TG_SEQ_ATTENTION, TG_SEQ_ATTENTION_STORED, TG_SEQ_MHA};
    for (int i = 0; i < 4; i++) {
        tg_rng rng = tg_rng_new(3 + i);
        tg_seq_layer_config c = layer_cfg(kinds[i], 4, 2, true);
        tg_seq_layer *m = tg_seq_layer_new(&c, &rng);
        tg_tensor *x = tg_randn(TG_SHAPE(2, 3, 4), &rng);
        cr_assert(m && x, "%s", tg_last_error());
        tg_set_requires_grad(x, true);
        tg_params p;
        tg_params_init(&p);
        cr_assert_eq(tg_seq_layer_params(m, &p, NULL), 0);
        tg_tensor *in[40];
        int n = 0;
        for (int j = 0; j < p.n; j++) in[n++] = p.items[j].t;
        in[n++] = x;
        tg_gradcheck_result r;
        cr_expect(tg_gradcheck(layer_f, in, n, m, 1e-6, 1e-5, &r), "%s: max rel err %g", tg_seq_kind_name(kinds[i]),
                  r.max_rel_err);
        tg_params_free(&p);
        tg_free(x);
        tg_seq_layer_free(m);
    }
}

/* The model: embeddings, positions when asked, the layer, a head at the
 * last position; its parameters in that order and named. */
Test(seq_layer, model_predicts_from_the_last_position) {
    tg_rng rng = tg_rng_new(4);
    tg_seq_layer_config c = layer_cfg(TG_SEQ_MHA, 8, 1, false);
    tg_seq_model m;
    cr_assert_eq(tg_seq_model_init(&m, &c, 5, 12, 6, &rng), 0, "%s", tg_last_error());
    cr_expect_not_null(m.pe);
    cr_expect_str_eq(m.params.items[0].name, "emb.weight");
    cr_expect_str_eq(m.params.items[m.params.n - 1].name, "head.bias");
    const int ids[14] = {0, 1, 2, 3, 4, 0, 4, 3, 2, 1, 0, 4, 1, 2}; /* 2 x 6, or 2 x 7 for the refusal */
    tg_scope_begin();
    tg_tensor *y = tg_seq_model_forward(&m, ids, 2, 6);
    cr_assert(y && y->ndim == 2 && y->shape[0] == 2 && y->shape[1] == 12, "%s", tg_last_error());
    tg_tensor *z = tg_seq_model_forward(&m, ids, 1, 6); /* sequence 0 alone: its row */
    cr_expect_arr_eq(z->data, y->data, sizeof(tg_real) * 12);
    cr_expect_null(tg_seq_model_forward(&m, ids, 2, 7), "past the positions' table");
    tg_scope_end();
    tg_seq_model_free(&m);
    tg_seq_model_free(&m); /* twice: a no-op */
    c.kind = TG_SEQ_GRU;
    cr_assert_eq(tg_seq_model_init(&m, &c, 5, 3, 0, &rng), 0, "%s", tg_last_error());
    cr_expect_null(m.pe);
    cr_expect(tg_params_get(&m.params, "gru.weight_hh_l0"));
    tg_seq_model_free(&m);
    cr_expect_eq(tg_seq_model_init(&m, &c, 0, 3, 0, &rng), -1);
    cr_expect(error_has("seq_model", "vocab"));
}
