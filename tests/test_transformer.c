/* The Transformer encoder of d2l: the shapes its notebook prints for the
 * position-wise FFN, AddNorm, an encoder block and the whole encoder; a
 * gradient check of a block against its input and every parameter; stable
 * parameter names; train/eval reaching every dropout; the embedding init. */
#include "test_util.h"

static void expect_shape(const tg_tensor *t, int ndim, const int *shape) {
    char b1[64], b2[64];
    cr_assert_not_null(t, "%s", tg_last_error());
    bool same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = t->shape[i] == shape[i];
    cr_expect(same, "shape %s, expected %s", tg_tshape(b1, t), tg_shape_str(b2, ndim, shape));
}

/* d2l: ffn = PositionWiseFFN(4, 8); ffn(ones((2, 3, 4))).shape == (2, 3, 8). */
Test(transformer, ffn_shape_and_names) {
    tg_rng rng = tg_rng_new(1);
    tg_ffn *ffn = tg_ffn_new(4, 4, 8, &rng);
    TG_REQUIRE(ffn);
    tg_scope_begin();
    tg_tensor *Y = tg_ffn_forward(ffn, tg_ones(TG_SHAPE(2, 3, 4)));
    expect_shape(Y, TG_SHAPE(2, 3, 8));
    /* The same MLP at every position: equal inputs give equal rows. */
    for (int k = 0; k < 8; k++) cr_expect(Y->data[k] == Y->data[5 * 8 + k]);
    tg_scope_end();
    tg_params p;
    tg_params_init(&p);
    tg_ffn_params(ffn, &p, "ffn");
    cr_expect_eq(p.n, 4);
    cr_expect(tg_params_get(&p, "ffn.dense1.weight") == ffn->dense1->weight);
    cr_expect(tg_params_get(&p, "ffn.dense2.bias") == ffn->dense2->bias);
    tg_params_free(&p);
    tg_ffn_free(ffn);
    tg_ffn_free(NULL);
    tg_clear_error();
    cr_expect_null(tg_ffn_new(4, 0, 8, &rng));
    cr_expect(error_has("ffn", "positive"), "%s", tg_last_error());
}

/* d2l: add_norm = AddNorm(4, 0.5); add_norm(ones((2, 3, 4)), ones((2, 3, 4))).shape. */
Test(transformer, addnorm_shape_and_normalisation) {
    tg_rng rng = tg_rng_new(2);
    tg_addnorm *an = tg_addnorm_new(4, 0.5, &rng);
    TG_REQUIRE(an);
    tg_addnorm_train(an, false);
    tg_scope_begin();
    tg_tensor *X = tg_randn(TG_SHAPE(2, 3, 4), &rng), *Y = tg_randn(TG_SHAPE(2, 3, 4), &rng);
    tg_tensor *Z = tg_addnorm_forward(an, X, Y);
    expect_shape(Z, TG_SHAPE(2, 3, 4));
    /* ln(X + Y) with weight 1, bias 0: each row has mean 0, biased variance 1. */
    for (int r = 0; r < 6; r++) {
        double m = 0, v = 0;
        for (int c = 0; c < 4; c++) m += Z->data[r * 4 + c] / 4;
        for (int c = 0; c < 4; c++) v += pow(Z->data[r * 4 + c] - m, 2) / 4;
        cr_expect(fabs(m) < 1e-12 && fabs(v - 1) < 1e-4, "row %d mean %g var %g", r, m, v);
    }
    tg_clear_error();
    cr_expect_null(tg_addnorm_forward(an, X, tg_ones(TG_SHAPE(2, 3, 5))));
    cr_expect(error_has("addnorm", "(2,3,5)"), "%s", tg_last_error());
    tg_scope_end();
    tg_params p;
    tg_params_init(&p);
    tg_addnorm_params(an, &p, "addnorm1");
    cr_expect(p.n == 2 && tg_params_get(&p, "addnorm1.ln.weight") && tg_params_get(&p, "addnorm1.ln.bias"));
    tg_params_free(&p);
    tg_addnorm_free(an);
}

/* d2l: EncoderBlock(24, 48, 8, 0.5) on ones((2, 100, 24)), valid_lens [3, 2]. */
Test(transformer, encoder_block_shape) {
    tg_rng rng = tg_rng_new(3);
    tg_encoder_block *blk = tg_encoder_block_new(24, 48, 8, 0.5, false, &rng);
    TG_REQUIRE(blk);
    tg_encoder_block_train(blk, false);
    tg_scope_begin();
    tg_mask mask = {.lens = (const int[]){3, 2}, .lens_ndim = 1};
    tg_tensor *Y = tg_encoder_block_forward(blk, tg_ones(TG_SHAPE(2, 100, 24)), mask);
    expect_shape(Y, TG_SHAPE(2, 100, 24));
    tg_scope_end();
    tg_params p;
    tg_params_init(&p);
    tg_encoder_block_params(blk, &p, NULL);
    const char *names[] = {"attention.W_q.weight", "attention.W_k.weight", "attention.W_v.weight",
                           "attention.W_o.weight", "addnorm1.ln.weight",   "addnorm1.ln.bias",
                           "ffn.dense1.weight",    "ffn.dense1.bias",      "ffn.dense2.weight",
                           "ffn.dense2.bias",      "addnorm2.ln.weight",   "addnorm2.ln.bias"};
    cr_expect_eq(p.n, 12);
    for (int i = 0; i < 12; i++) cr_expect(tg_params_get(&p, names[i]) != NULL, "missing %s", names[i]);
    tg_params_free(&p);
    tg_encoder_block_free(blk);

    tg_clear_error();
    cr_expect_null(tg_encoder_block_new(24, 48, 5, 0.5, false, &rng));
    cr_expect(error_has("encoder_block", "num_heads 5 does not divide num_hiddens 24"), "%s", tg_last_error());
    cr_expect_null(tg_encoder_block_new(24, 48, 8, 1.5, false, &rng));
    cr_expect(error_has("encoder_block", "dropout"), "%s", tg_last_error());
}

typedef struct {
    tg_encoder_block *blk;
    tg_mask mask;
} block_ctx;

static tg_tensor *block_fn(tg_tensor *const *in, int n, void *ctx) {
    (void)n;
    block_ctx *c = ctx;
    return tg_encoder_block_forward(c->blk, in[0], c->mask);
}

/* The block's gradient w.r.t. its input and all 12 (or 16 with bias)
 * parameters, with valid lengths [3, 2] so the mask takes part. */
static void gradcheck_block(bool bias) {
    tg_rng rng = tg_rng_new(bias ? 5 : 4);
    tg_encoder_block *blk = tg_encoder_block_new(8, 16, 2, 0, bias, &rng);
    TG_REQUIRE(blk);
    /* LayerNorm starts at weight 1, bias 0; move them so their gradients are generic. */
    tg_fill_normal(blk->addnorm1->ln->weight, 1, 0.2, &rng);
    tg_fill_normal(blk->addnorm2->ln->bias, 0, 0.2, &rng);
    tg_params p;
    tg_params_init(&p);
    tg_encoder_block_params(blk, &p, NULL);
    cr_assert_eq(p.n, bias ? 16 : 12);
    tg_tensor *in[20];
    in[0] = tg_randn(TG_SHAPE(2, 3, 8), &rng);
    tg_set_requires_grad(in[0], true);
    for (int i = 0; i < p.n; i++) in[1 + i] = p.items[i].t;
    block_ctx ctx = {blk, {.lens = (const int[]){3, 2}, .lens_ndim = 1}};
    tg_gradcheck_result r;
    /* eps 1e-5: the block sums many terms, so the rounding error of a
     * difference, ~1e-16 |L| / eps, dominates at 1e-6; the truncation error
     * eps^2 f''' stays far below the tolerance. */
    bool ok = tg_gradcheck(block_fn, in, 1 + p.n, &ctx, 1e-5, 1e-6, &r);
    printf("gradcheck encoder block (bias %d): %lld entries, max rel err %.1e, max abs err %.1e\n", bias,
           (long long)r.checked, r.max_rel_err, r.max_abs_err);
    cr_expect(ok, "max rel err %g at input %d (%s) index %lld: %s", r.max_rel_err, r.worst_input,
              r.worst_input > 0 ? p.items[r.worst_input - 1].name : "X", (long long)r.worst_index,
              tg_last_error() ? tg_last_error() : "");
    cr_expect_eq(r.checked, 48 + tg_params_numel(&p));
    tg_free(in[0]);
    tg_params_free(&p);
    tg_encoder_block_free(blk);
}

Test(transformer, gradcheck_encoder_block) { gradcheck_block(false); }
Test(transformer, gradcheck_encoder_block_with_bias) { gradcheck_block(true); }

static tg_encoder_config d2l_config(void) {
    /* d2l: TransformerEncoder(200, 24, 48, 8, 2, 0.5) */
    tg_encoder_config cfg = tiny_encoder(200, 24, 48, 8, 2, 1000);
    cfg.dropout = 0.5;
    return cfg;
}

Test(transformer, encoder_shape) {
    tg_rng rng = tg_rng_new(6);
    tg_encoder_config cfg = d2l_config();
    tg_encoder *enc = tg_encoder_new(&cfg, &rng);
    TG_REQUIRE(enc);
    tg_encoder_train(enc, false);
    int tokens[2 * 100];
    for (int i = 0; i < 200; i++) tokens[i] = 1;
    tg_scope_begin();
    tg_mask mask = {.lens = (const int[]){3, 2}, .lens_ndim = 1};
    expect_shape(tg_encoder_forward(enc, tokens, 2, 100, mask), TG_SHAPE(2, 100, 24));
    tg_scope_end();
    tg_encoder_free(enc);
}

Test(transformer, encoder_parameter_names) {
    tg_rng rng = tg_rng_new(7);
    for (int variant = 0; variant < 3; variant++) {
        tg_encoder_config cfg = d2l_config();
        cfg.pe = variant == 1 ? TG_PE_LEARNED : variant == 2 ? TG_PE_NONE : TG_PE_FIXED;
        cfg.use_bias = variant == 1;
        tg_encoder *enc = tg_encoder_new(&cfg, &rng);
        TG_REQUIRE(enc);
        cr_expect((enc->pos_encoding == NULL) == (variant == 2) && (enc->dropout != NULL) == (variant == 2));
        tg_params p;
        tg_params_init(&p);
        tg_encoder_params(enc, &p, NULL);
        /* embedding + (learned P) + 2 blocks x (4 projections (+4 biases) + 2 LN x 2 + FFN 4) */
        int want = 1 + (variant == 1) + 2 * (12 + 4 * (variant == 1));
        cr_expect_eq(p.n, want, "variant %d: %d parameters, expected %d", variant, p.n, want);
        cr_expect_str_eq(p.items[0].name, "embedding.weight");
        cr_expect(tg_params_get(&p, "embedding.weight") == enc->embedding->weight);
        cr_expect(tg_params_get(&p, "blocks.0.attention.W_q.weight") != NULL);
        cr_expect(tg_params_get(&p, "blocks.0.addnorm1.ln.weight") != NULL);
        cr_expect(tg_params_get(&p, "blocks.1.ffn.dense2.bias") == enc->blocks[1]->ffn->dense2->bias);
        cr_expect(tg_params_get(&p, "blocks.1.addnorm2.ln.bias") != NULL);
        cr_expect((tg_params_get(&p, "pos_encoding.P") != NULL) == (variant == 1));
        cr_expect((tg_params_get(&p, "blocks.1.attention.W_o.bias") != NULL) == (variant == 1));
        cr_expect(tg_params_get(&p, "blocks.2.ffn.dense1.weight") == NULL);
        tg_params_free(&p);
        /* With a prefix, as inside a bigger model. */
        tg_params_init(&p);
        tg_encoder_params(enc, &p, "encoder");
        cr_expect(tg_params_get(&p, "encoder.blocks.1.ffn.dense2.bias") != NULL);
        tg_params_free(&p);
        tg_encoder_free(enc);
    }
}

/* A small encoder whose every dropout has p 0.3. */
static tg_encoder *dropout_encoder(int layers, tg_pe_kind pe, uint64_t seed) {
    tg_rng rng = tg_rng_new(seed);
    tg_encoder_config cfg = tiny_encoder(10, 8, 16, 2, layers, 16);
    cfg.dropout = 0.3;
    cfg.pe = pe;
    return tg_encoder_new(&cfg, &rng);
}

/* Every dropout is reached: in eval two forwards agree bit for bit; in
 * training each forward draws new masks, and differs from eval. */
static void check_train_eval(tg_pe_kind pe) {
    tg_encoder *enc = dropout_encoder(2, pe, 8);
    TG_REQUIRE(enc);
    int tokens[2 * 5] = {1, 2, 3, 4, 5, 9, 8, 7, 6, 0};
    tg_mask mask = {.lens = (const int[]){5, 3}, .lens_ndim = 1};
    tg_scope_begin();
    tg_encoder_train(enc, false);
    tg_tensor *e1 = tg_encoder_forward(enc, tokens, 2, 5, mask), *e2 = tg_encoder_forward(enc, tokens, 2, 5, mask);
    tg_encoder_train(enc, true);
    tg_tensor *t1 = tg_encoder_forward(enc, tokens, 2, 5, mask), *t2 = tg_encoder_forward(enc, tokens, 2, 5, mask);
    TG_REQUIRE(e1);
    TG_REQUIRE(e2);
    TG_REQUIRE(t1);
    TG_REQUIRE(t2);
    cr_expect_arr_eq(e1->data, e2->data, (size_t)e1->size * sizeof(tg_real), "eval is deterministic");
    int diff12 = 0, diff_e = 0;
    for (int64_t k = 0; k < t1->size; k++) {
        diff12 += t1->data[k] != t2->data[k];
        diff_e += t1->data[k] != e1->data[k];
    }
    cr_expect(diff12 > t1->size / 2, "two training forwards differ (%d of %lld entries)", diff12, (long long)t1->size);
    cr_expect(diff_e > t1->size / 2, "training differs from eval");
    tg_scope_end();
    tg_encoder_free(enc);
}

Test(transformer, train_eval_reaches_every_dropout_fixed) { check_train_eval(TG_PE_FIXED); }
Test(transformer, train_eval_reaches_every_dropout_none) { check_train_eval(TG_PE_NONE); }

/* Only the dropout layers change between train and eval: with all of them
 * turned off by hand, a training-mode forward equals the eval one. */
Test(transformer, train_mode_touches_only_dropouts) {
    tg_encoder *enc = dropout_encoder(1, TG_PE_LEARNED, 9);
    TG_REQUIRE(enc);
    int tokens[4] = {1, 2, 3, 4};
    tg_scope_begin();
    tg_encoder_train(enc, false);
    tg_tensor *e = tg_encoder_forward(enc, tokens, 1, 4, (tg_mask){0});
    tg_encoder_train(enc, true);
    cr_expect(enc->pos_encoding->dropout->training && enc->blocks[0]->addnorm1->dropout->training &&
              enc->blocks[0]->addnorm2->dropout->training && enc->blocks[0]->attention->attention->dropout->training);
    enc->pos_encoding->dropout->p = 0;
    enc->blocks[0]->addnorm1->dropout->p = 0;
    enc->blocks[0]->addnorm2->dropout->p = 0;
    enc->blocks[0]->attention->attention->dropout->p = 0;
    tg_tensor *t = tg_encoder_forward(enc, tokens, 1, 4, (tg_mask){0});
    TG_REQUIRE(e);
    TG_REQUIRE(t);
    cr_expect_arr_eq(e->data, t->data, (size_t)e->size * sizeof(tg_real));
    tg_scope_end();
    tg_encoder_free(enc);
}

/* Default embedding std 1/sqrt(d), so embedding * sqrt(d) has unit size
 * next to the unit-size sinusoids; an explicit std is honoured. */
Test(transformer, embedding_init_std) {
    tg_rng rng = tg_rng_new(10);
    tg_encoder_config cfg = d2l_config();
    tg_encoder *enc = tg_encoder_new(&cfg, &rng);
    TG_REQUIRE(enc);
    double sd = sample_std(enc->embedding->weight, NULL), want = 1 / sqrt(24.0);
    cr_expect(fabs(sd - want) < 0.05 * want, "embedding std %g, expected 1/sqrt(24) = %g", sd, want);
    cr_expect(enc->cfg.embedding_std > 0, "the resolved std is kept in cfg");
    tg_encoder_free(enc);
    cfg.embedding_std = 1;
    enc = tg_encoder_new(&cfg, &rng);
    TG_REQUIRE(enc);
    sd = sample_std(enc->embedding->weight, NULL);
    cr_expect(fabs(sd - 1) < 0.05, "embedding std %g, expected 1", sd);
    tg_encoder_free(enc);
}

Test(transformer, encoder_config_errors) {
    tg_rng rng = tg_rng_new(11);
    tg_encoder_config bad;
#define EXPECT_BAD(field_edit, frag)                                                   \
    do {                                                                               \
        bad = d2l_config();                                                            \
        field_edit;                                                                    \
        tg_clear_error();                                                              \
        cr_expect_null(tg_encoder_new(&bad, &rng), #field_edit " should be rejected"); \
        cr_expect(error_has("encoder", frag), #field_edit ": %s", tg_last_error());    \
    } while (0)
    EXPECT_BAD(bad.vocab_size = 0, "vocab_size");
    EXPECT_BAD(bad.num_hiddens = -4, "num_hiddens");
    EXPECT_BAD(bad.ffn_hiddens = 0, "ffn_hiddens");
    EXPECT_BAD(bad.num_heads = 0, "num_heads");
    EXPECT_BAD(bad.num_heads = 7, "does not divide");
    EXPECT_BAD(bad.dropout = 1.5, "dropout");
    EXPECT_BAD(bad.dropout = -0.1, "dropout");
    EXPECT_BAD(bad.num_layers = -1, "num_layers");
    EXPECT_BAD(bad.max_len = -1, "max_len");
    EXPECT_BAD(bad.embedding_std = -1, "embedding_std");
    EXPECT_BAD(bad.pe = (tg_pe_kind)7, "unknown position kind 7");
#undef EXPECT_BAD
    tg_clear_error();
    cr_expect_null(tg_encoder_new(NULL, &rng));
    tg_encoder_free(NULL);

    /* A sequence longer than max_len is an error from the positional encoding. */
    tg_encoder_config cfg = d2l_config();
    cfg.max_len = 10;
    tg_encoder *enc = tg_encoder_new(&cfg, &rng);
    TG_REQUIRE(enc);
    int tokens[12] = {0};
    tg_scope_begin();
    tg_clear_error();
    cr_expect_null(tg_encoder_forward(enc, tokens, 1, 12, (tg_mask){0}));
    cr_expect(error_has("posenc: sequence length 12 > max_len 10", NULL), "%s", tg_last_error());
    tokens[3] = 200;
    tg_clear_error();
    cr_expect_null(tg_encoder_forward(enc, tokens, 1, 5, (tg_mask){0}));
    cr_expect(tg_last_error() != NULL);
    tg_scope_end();
    tg_encoder_free(enc);
}
