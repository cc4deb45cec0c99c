/* The GPT-2 decoder (src/nn/decoder.c) and its helpers: GELU tanh against
 * hand-computed values; gradient checks of the whole loss w.r.t. every
 * parameter; the tied head against an untied computation; nanoGPT's names,
 * shapes and init; causality; the KV cache against full forwards; generation
 * (greedy, seeded, past block_size) against a cache-free reference;
 * checkpoints with the tied weight under either name; sampling; errors. */
#include "test_util.h"
#include "io_test_util.h"

/* The small model of the brief: V 11, T 5, 2 layers, 2 heads, d 8. */
static tg_decoder_config small_config(void) { return tg_decoder_config_default(11, 6, 2, 2, 8); }

static tg_decoder *small_model(uint64_t seed, const tg_decoder_config *cfg) {
    tg_rng rng = tg_rng_new(seed);
    tg_decoder *m = tg_decoder_new(cfg, &rng);
    cr_assert_not_null(m, "%s", tg_last_error());
    return m;
}

/* LayerNorms start at 1 and 0 and biases at 0: moved, so that every
 * gradient is generic. */
static void perturb(tg_decoder *m, uint64_t seed) {
    tg_rng rng = tg_rng_new(seed);
    tg_params p;
    tg_params_init(&p);
    cr_assert_eq(tg_decoder_params(m, &p, NULL), 0);
    for (int i = 0; i < p.n; i++)
        if (p.items[i].t->ndim == 1) tg_fill_normal(p.items[i].t, strstr(p.items[i].name, "ln") ? 1 : 0, 0.3, &rng);
    tg_params_free(&p);
}

static const int tok25[10] = {1, 4, 0, 9, 10, 3, 3, 7, 2, 5};
static const int tgt25[10] = {4, 0, 9, 10, -1, 3, 7, 2, 5, 6}; /* one ignored */

/* ---- GELU tanh ---------------------------------------------------------------- */

Test(decoder, gelu_tanh_values) {
    /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), evaluated in Python. */
    const tg_real x[] = {-3, -1, -0.5, 0, 0.5, 1, 2, 3, 1e-3};
    const tg_real want[] = {-0.0036373920817729943, -0.15880800939172324, -0.15428599017485606, 0.0,
                            0.34571400982514394,    0.8411919906082768,   1.954597694087775,    2.996362607918227,
                            0.000500398942213582};
    tg_scope_begin();
    tg_tensor *y = tg_gelu_tanh(tg_from_array(TG_SHAPE(9), x));
    TG_REQUIRE(y);
    expect_close(y, want, 9, 1e-15);
    /* Close to, but not, the exact erf form (GELU(1) = 0.8413447460685429). */
    tg_tensor *e = tg_gelu(tg_from_array(TG_SHAPE(1), (const tg_real[]){1}));
    cr_expect(fabs(e->data[0] - 0.8413447460685429) < 1e-15 && fabs(e->data[0] - y->data[5]) > 1e-4);
    tg_clear_error();
    cr_expect_null(tg_gelu_tanh(NULL));
    cr_expect(error_has("gelu_tanh", "NULL"), "%s", tg_last_error());
    tg_scope_end();
}

/* ---- gradient checks ------------------------------------------------------------ */

typedef struct {
    tg_decoder *m;
} loss_ctx;

static tg_tensor *loss_fn(tg_tensor *const *in, int n, void *ctx) {
    (void)in, (void)n;
    return tg_decoder_loss(((loss_ctx *)ctx)->m, tok25, tgt25, 2, 5);
}

/* d loss / d every parameter (the tied wte included) by central
 * differences, B 2, T 5. */
static void gradcheck_model(bool bias, tg_decoder_gelu gelu) {
    tg_decoder_config cfg = small_config();
    cfg.bias = bias;
    cfg.gelu = gelu;
    tg_decoder *m = small_model(bias ? 1 : 2, &cfg);
    perturb(m, 3);
    tg_params p;
    tg_params_init(&p);
    cr_assert_eq(tg_decoder_params(m, &p, NULL), 0);
    tg_tensor **in = malloc(sizeof *in * (size_t)p.n);
    for (int i = 0; i < p.n; i++) in[i] = p.items[i].t;
    loss_ctx ctx = {m};
    tg_gradcheck_result r;
    bool ok = tg_gradcheck(loss_fn, in, p.n, &ctx, 1e-5, 1e-6, &r);
    printf("gradcheck decoder loss (bias %d, gelu %s): %lld entries, max rel err %.1e, max abs err %.1e\n", bias,
           gelu == TG_DEC_GELU_TANH ? "tanh" : "erf", (long long)r.checked, r.max_rel_err, r.max_abs_err);
    cr_expect(ok, "max rel err %g at %s index %lld: %s", r.max_rel_err, p.items[r.worst_input].name,
              (long long)r.worst_index, tg_last_error() ? tg_last_error() : "");
    cr_expect_eq(r.checked, tg_params_numel(&p));
    free(in);
    tg_params_free(&p);
    tg_decoder_free(m);
}

Test(decoder, gradcheck_loss_all_parameters) { gradcheck_model(true, TG_DEC_GELU_TANH); }
Test(decoder, gradcheck_loss_no_bias_gelu_erf) { gradcheck_model(false, TG_DEC_GELU_ERF); }

/* The tied head: the gradient of wte equals the embedding's contribution
 * plus the head's, computed untied (hidden states times a separate copy). */
Test(decoder, tied_head_gradient_is_the_sum_of_both_uses) {
    tg_decoder_config cfg = small_config();
    tg_decoder *m = small_model(4, &cfg);
    perturb(m, 5);
    tg_tensor *wte = m->wte->weight;
    tg_scope_begin();
    cr_assert_eq(tg_backward(tg_decoder_loss(m, tok25, tgt25, 2, 5)), 0, "%s", tg_last_error());
    tg_tensor *tied = tg_clone(wte->grad);
    tg_zero_grad(wte);
    tg_tensor *head = tg_clone(wte); /* untied copy of the values */
    tg_set_requires_grad(head, true);
    tg_tensor *logits = tg_matmul_t(tg_decoder_hidden(m, tok25, 2, 5), head, false, true);
    cr_assert_eq(tg_backward(tg_cross_entropy(logits, tgt25, NULL, -1)), 0, "%s", tg_last_error());
    double worst = 0, emb = 0, hd = 0;
    for (int64_t i = 0; i < wte->size; i++) {
        worst = fmax(worst, fabs(tied->data[i] - (wte->grad->data[i] + head->grad->data[i])));
        emb = fmax(emb, fabs(wte->grad->data[i]));
        hd = fmax(hd, fabs(head->grad->data[i]));
    }
    cr_expect(worst < 1e-14, "tied gradient differs from the sum by %g", worst);
    cr_expect(emb > 1e-3 && hd > 1e-3, "both uses contribute (%g, %g)", emb, hd);
    /* And the forward is the same: forward == hidden wte^T. */
    tg_tensor *f = tg_decoder_forward(m, tok25, 2, 5);
    expect_close(f, logits->data, logits->size, 1e-14);
    tg_scope_end();
    tg_decoder_free(m);
}

/* ---- names, shapes, init ------------------------------------------------------ */

Test(decoder, parameter_names_and_shapes_as_nanogpt) {
    tg_decoder_config cfg = small_config();
    tg_decoder *m = small_model(6, &cfg);
    const int d = 8;
    const struct {
        const char *name;
        int ndim, s0, s1;
    } want[] = {{"transformer.wte.weight", 2, 11, d},
                {"transformer.wpe.weight", 2, 6, d},
#define BLOCK(i)                                                                                                      \
    {"transformer.h." #i ".ln_1.weight", 1, d, 0}, {"transformer.h." #i ".ln_1.bias", 1, d, 0},                       \
        {"transformer.h." #i ".attn.c_attn.weight", 2, 3 * d, d},                                                     \
        {"transformer.h." #i ".attn.c_attn.bias", 1, 3 * d, 0}, {"transformer.h." #i ".attn.c_proj.weight", 2, d, d}, \
        {"transformer.h." #i ".attn.c_proj.bias", 1, d, 0}, {"transformer.h." #i ".ln_2.weight", 1, d, 0},            \
        {"transformer.h." #i ".ln_2.bias", 1, d, 0}, {"transformer.h." #i ".mlp.c_fc.weight", 2, 4 * d, d},           \
        {"transformer.h." #i ".mlp.c_fc.bias", 1, 4 * d, 0}, {"transformer.h." #i ".mlp.c_proj.weight", 2, d, 4 * d}, \
        {"transformer.h." #i ".mlp.c_proj.bias", 1, d, 0}
                BLOCK(0),
                BLOCK(1),
#undef BLOCK
                {"transformer.ln_f.weight", 1, d, 0},
                {"transformer.ln_f.bias", 1, d, 0}};
    const int n = (int)(sizeof want / sizeof want[0]);
    tg_params p, sd;
    tg_params_init(&p);
    tg_params_init(&sd);
    cr_assert_eq(tg_decoder_params(m, &p, NULL), 0);
    cr_assert_eq(tg_decoder_state_dict(m, &sd, NULL), 0);
    cr_assert_eq(p.n, n);
    cr_assert_eq(sd.n, n + 1);
    for (int i = 0; i < n; i++) {
        const tg_tensor *t = p.items[i].t;
        cr_expect_str_eq(p.items[i].name, want[i].name);
        cr_expect_str_eq(sd.items[i].name, want[i].name);
        cr_expect(t->ndim == want[i].ndim && t->shape[0] == want[i].s0 && (t->ndim == 1 || t->shape[1] == want[i].s1),
                  "%s: wrong shape", want[i].name);
        cr_expect(t->requires_grad, "%s does not require grad", want[i].name);
        for (int j = 0; j < i; j++) cr_expect(p.items[j].t != t, "%s listed twice", want[i].name);
    }
    /* The tied head: the state_dict's last entry is the same tensor as wte. */
    cr_expect_str_eq(sd.items[n].name, "lm_head.weight");
    cr_expect(sd.items[n].t == m->wte->weight && p.items[0].t == m->wte->weight);
    /* 2 V d counted once: nanoGPT's get_num_params(non_embedding=False). */
    int64_t per_layer = 2 * d + 3 * d * d + 3 * d + d * d + d + 2 * d + 4 * d * d + 4 * d + 4 * d * d + d;
    cr_expect_eq(tg_decoder_num_params(m), 11 * d + 6 * d + 2 * per_layer + 2 * d);
    tg_params_free(&p);
    tg_params_free(&sd);
    /* A prefix goes in front of every name. */
    tg_params_init(&p);
    cr_assert_eq(tg_decoder_state_dict(m, &p, "model"), 0);
    cr_expect_str_eq(p.items[0].name, "model.transformer.wte.weight");
    cr_expect_str_eq(p.items[p.n - 1].name, "model.lm_head.weight");
    tg_params_free(&p);
    tg_decoder_free(m);

    /* bias=False: no Linear or LayerNorm biases. */
    cfg.bias = false;
    m = small_model(6, &cfg);
    tg_params_init(&p);
    cr_assert_eq(tg_decoder_params(m, &p, NULL), 0);
    cr_expect_eq(p.n, 2 + 2 * 6 + 1);
    for (int i = 0; i < p.n; i++) cr_expect(!strstr(p.items[i].name, "bias"), "%s", p.items[i].name);
    cr_expect_str_eq(p.items[3].name, "transformer.h.0.attn.c_attn.weight");
    tg_params_free(&p);
    tg_decoder_free(m);
}

/* GPT-2's init: N(0, 0.02^2) weights, N(0, (0.02/sqrt(2 L))^2) residual
 * projections, zero biases, LayerNorm 1 and 0. */
Test(decoder, init_statistics) {
    tg_decoder_config cfg = tg_decoder_config_default(256, 32, 4, 4, 64);
    tg_decoder *m = small_model(7, &cfg);
    tg_params p;
    tg_params_init(&p);
    cr_assert_eq(tg_decoder_params(m, &p, NULL), 0);
    double resid = 0.02 / sqrt(2.0 * 4);
    for (int i = 0; i < p.n; i++) {
        const char *name = p.items[i].name;
        const tg_tensor *t = p.items[i].t;
        double mean, sd = sample_std(t, &mean);
        if (strstr(name, "ln_") && strstr(name, "weight"))
            cr_expect(mean == 1 && sd == 0, "%s: mean %g std %g", name, mean, sd);
        else if (strstr(name, "bias"))
            cr_expect(mean == 0 && sd == 0, "%s: mean %g std %g", name, mean, sd);
        else {
            double want = strstr(name, "c_proj.weight") ? resid : 0.02;
            /* n >= 2048 samples: the sample std is within ~1.6% (1 sigma) */
            cr_expect(fabs(sd / want - 1) < 0.08 && fabs(mean) < 4 * want / sqrt((double)t->size),
                      "%s: std %g, want %g", name, sd, want);
        }
    }
    tg_params_free(&p);
    tg_decoder_free(m);
}

/* ---- behaviour ----------------------------------------------------------------- */

/* Changing a token changes no logit before it. */
Test(decoder, causal) {
    tg_decoder_config cfg = small_config();
    tg_decoder *m = small_model(8, &cfg);
    perturb(m, 9);
    int a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {1, 2, 3, 9, 5, 6};
    tg_scope_begin();
    tg_tensor *la = tg_decoder_forward(m, a, 1, 6), *lb = tg_decoder_forward(m, b, 1, 6);
    TG_REQUIRE(la);
    TG_REQUIRE(lb);
    for (int i = 0; i < 3 * 11; i++) cr_expect(la->data[i] == lb->data[i], "logit %d changed", i);
    double diff = 0;
    for (int i = 3 * 11; i < 6 * 11; i++) diff = fmax(diff, fabs(la->data[i] - lb->data[i]));
    cr_expect(diff > 1e-6, "later logits do depend on the token");
    tg_scope_end();
    tg_decoder_free(m);
}

/* Recorded weights: causal rows summing to 1; recording (stored path) and
 * not (fused tg_attention at 64 keys) give the same logits. */
Test(decoder, record_attention_and_fused_path_agree) {
    tg_decoder_config cfg = tg_decoder_config_default(13, 64, 2, 2, 8);
    tg_decoder *m = small_model(10, &cfg);
    perturb(m, 11);
    int tok[2 * 64];
    for (int i = 0; i < 2 * 64; i++) tok[i] = (i * 7 + 3) % 13;
    tg_scope_begin();
    tg_tensor *fused = tg_decoder_forward(m, tok, 2, 64);
    TG_REQUIRE(fused);
    tg_clear_error();
    cr_expect_null(tg_decoder_attention_weights(m, 0, 0));
    cr_expect(error_has("decoder_attention_weights", "no weights"), "%s", tg_last_error());
    tg_decoder_record_attention(m, true);
    tg_tensor *stored = tg_decoder_forward(m, tok, 2, 64);
    TG_REQUIRE(stored);
    expect_close(stored, fused->data, fused->size, 1e-12);
    for (int layer = 0; layer < 2; layer++)
        for (int head = 0; head < 2; head++) {
            tg_tensor *w = tg_decoder_attention_weights(m, layer, head);
            TG_REQUIRE(w);
            cr_assert(w->ndim == 3 && w->shape[0] == 2 && w->shape[1] == 64 && w->shape[2] == 64);
            for (int r = 0; r < 2 * 64; r++) {
                double s = 0;
                for (int k = 0; k < 64; k++) {
                    s += w->data[r * 64 + k];
                    if (k > r % 64) cr_expect(w->data[r * 64 + k] == 0, "future key %d of query %d", k, r % 64);
                }
                cr_expect(fabs(s - 1) < 1e-12);
            }
        }
    tg_clear_error();
    cr_expect_null(tg_decoder_attention_weights(m, 2, 0));
    cr_expect(error_has("layer 2", "[0, 2)"), "%s", tg_last_error());
    cr_expect_null(tg_decoder_attention_weights(m, 0, -1));
    cr_expect(error_has("head -1", NULL), "%s", tg_last_error());
    tg_scope_end();
    tg_decoder_free(m);
}

/* Dropout is on in training mode (two forwards differ) and off in eval. */
Test(decoder, train_and_eval_modes) {
    tg_decoder_config cfg = small_config();
    cfg.dropout = 0.3;
    tg_decoder *m = small_model(12, &cfg);
    tg_scope_begin();
    tg_tensor *a = tg_decoder_forward(m, tok25, 2, 5), *b = tg_decoder_forward(m, tok25, 2, 5);
    double diff = 0;
    for (int64_t i = 0; i < a->size; i++) diff = fmax(diff, fabs(a->data[i] - b->data[i]));
    cr_expect(diff > 1e-6, "training forwards draw different masks");
    tg_decoder_train(m, false);
    a = tg_decoder_forward(m, tok25, 2, 5);
    b = tg_decoder_forward(m, tok25, 2, 5);
    expect_close(a, b->data, b->size, 0);
    tg_scope_end();
    tg_decoder_free(m);
}

/* A few Adam steps on one batch: the loss falls (the tied tensor, listed
 * once, is stepped once). */
Test(decoder, trains) {
    tg_decoder_config cfg = small_config();
    tg_decoder *m = small_model(13, &cfg);
    tg_params p;
    tg_params_init(&p);
    cr_assert_eq(tg_decoder_params(m, &p, NULL), 0);
    tg_optim_config oc = tg_adam_config(1e-2);
    tg_optim *o = tg_optim_new(&oc, &p);
    double first = 0, last = 0;
    for (int step = 0; step < 40; step++) {
        tg_scope_begin();
        tg_optim_zero_grad(o);
        tg_tensor *loss = tg_decoder_loss(m, tok25, tgt25, 2, 5);
        TG_REQUIRE(loss);
        if (step == 0) first = tg_item(loss);
        last = tg_item(loss);
        cr_assert_eq(tg_backward(loss), 0);
        tg_optim_step(o);
        tg_scope_end();
    }
    cr_expect(first > 2 && last < 0.5 * first, "loss %g -> %g", first, last);
    tg_optim_free(o);
    tg_params_free(&p);
    tg_decoder_free(m);
}

/* ---- KV cache and generation ----------------------------------------------- */

/* Each position's logits from the cache (a prefill of 4, single tokens, a
 * chunk of 3 after cached positions) equal a full forward's. */
Test(decoder, cached_logits_equal_full_forward) {
    tg_decoder_config cfg = tg_decoder_config_default(11, 12, 2, 2, 8);
    tg_decoder *m = small_model(14, &cfg);
    perturb(m, 15);
    tg_decoder_train(m, false);
    const int seq[12] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8};
    tg_decoder_cache *c = tg_decoder_cache_new(m);
    TG_REQUIRE(c);
    tg_scope_begin();
    tg_tensor *full = tg_decoder_forward(m, seq, 1, 12);
    TG_REQUIRE(full);
    const int chunks[] = {4, 1, 1, 3, 1, 1, 1};
    int pos = 0;
    for (int i = 0; i < 7; i++) {
        tg_tensor *l = tg_decoder_forward_cached(m, c, seq + pos, chunks[i]);
        TG_REQUIRE(l);
        cr_assert(l->ndim == 3 && l->shape[0] == 1 && l->shape[1] == chunks[i] && l->shape[2] == 11);
        cr_expect(l->node == NULL, "cached logits are not part of a graph");
        expect_close(l, full->data + pos * 11, l->size, 1e-12);
        pos += chunks[i];
        cr_expect_eq(c->len, pos);
    }
    /* Full: one more is an error, and the cache stays as it was. */
    tg_clear_error();
    cr_expect_null(tg_decoder_forward_cached(m, c, seq, 1));
    cr_expect(error_has("12 cached + 1 new", "block_size 12"), "%s", tg_last_error());
    cr_expect_eq(c->len, 12);
    tg_decoder_cache_reset(c);
    cr_expect_eq(c->len, 0);
    cr_expect_null(tg_decoder_forward_cached(m, c, (const int[]){11}, 1));
    cr_expect(error_has("token 11", "[0, 11)"), "%s", tg_last_error());
    cr_expect_eq(c->len, 0);
    tg_scope_end();
    tg_decoder_cache_free(c);
    /* A cache made for another model is refused. */
    tg_decoder_config other = small_config();
    tg_decoder *m2 = small_model(1, &other);
    c = tg_decoder_cache_new(m2);
    tg_scope_begin();
    cr_expect_null(tg_decoder_forward_cached(m, c, seq, 1));
    cr_expect(error_has("another model", NULL), "%s", tg_last_error());
    tg_scope_end();
    tg_decoder_cache_free(c);
    tg_decoder_free(m2);
    tg_decoder_free(m);
}

/* nanoGPT's generate without a cache: the full forward of the last
 * block_size tokens every step, then tg_sample. */
static void reference_generate(tg_decoder *m, const int *prompt, int n_prompt, int n_new, tg_real temperature,
                               int top_k, uint64_t seed, int *out) {
    int bs = m->cfg.block_size, len = n_prompt;
    int *seq = malloc(sizeof(int) * (size_t)(n_prompt + n_new));
    memcpy(seq, prompt, sizeof(int) * (size_t)n_prompt);
    tg_rng rng = tg_rng_new(seed);
    tg_decoder_train(m, false);
    for (int i = 0; i < n_new; i++) {
        tg_scope_begin();
        int w = len < bs ? len : bs;
        tg_tensor *l = tg_decoder_forward(m, seq + len - w, 1, w);
        TG_REQUIRE(l);
        tg_tensor *last = tg_slice(l, 1, w - 1, w);
        cr_assert_eq(tg_sample(last, temperature, top_k, &rng, &out[i]), 0);
        seq[len++] = out[i];
        tg_scope_end();
    }
    tg_decoder_train(m, true);
    free(seq);
}

/* Cached generation gives nanoGPT's tokens, also after the sequence
 * outgrows block_size (8 here: 3 + 20 tokens); greedy and sampled. */
Test(decoder, generate_matches_uncached_reference) {
    tg_decoder_config cfg = tg_decoder_config_default(11, 8, 2, 2, 8);
    tg_decoder *m = small_model(16, &cfg);
    perturb(m, 17);
    /* Sharper logits, so greedy decoding does not just repeat one token. */
    for (int64_t i = 0; i < m->wte->weight->size; i++) m->wte->weight->data[i] *= 40;
    const int prompt[3] = {1, 2, 3};
    const struct {
        tg_real temperature;
        int top_k;
    } modes[] = {{0, 0}, {1, 0}, {0.8, 3}, {1.5, 1}};
    for (int k = 0; k < 4; k++) {
        int got[20], want[20];
        cr_assert_eq(tg_decoder_generate(m, prompt, 3, 20, modes[k].temperature, modes[k].top_k, 42, got), 0, "%s",
                     tg_last_error());
        reference_generate(m, prompt, 3, 20, modes[k].temperature, modes[k].top_k, 42, want);
        for (int i = 0; i < 20; i++)
            cr_expect_eq(got[i], want[i], "mode %d token %d: %d, reference %d", k, i, got[i], want[i]);
        cr_expect(m->training, "the model's mode is restored");
    }
    /* A prompt longer than block_size is cropped to its last 8 tokens. */
    const int long_prompt[12] = {5, 5, 5, 5, 1, 2, 3, 4, 5, 6, 7, 8};
    int a[5], b[5];
    cr_assert_eq(tg_decoder_generate(m, long_prompt, 12, 5, 0, 0, 1, a), 0);
    cr_assert_eq(tg_decoder_generate(m, long_prompt + 4, 8, 5, 0, 0, 1, b), 0);
    for (int i = 0; i < 5; i++) cr_expect_eq(a[i], b[i]);
    tg_decoder_free(m);
}

Test(decoder, generate_deterministic_and_seeded) {
    tg_decoder_config cfg = small_config();
    tg_decoder *m = small_model(18, &cfg);
    perturb(m, 19);
    const int prompt[2] = {4, 7};
    int a[16], b[16], c[16];
    cr_assert_eq(tg_decoder_generate(m, prompt, 2, 16, 0, 0, 1, a), 0);
    cr_assert_eq(tg_decoder_generate(m, prompt, 2, 16, 0, 0, 2, b), 0); /* greedy: the seed plays no part */
    for (int i = 0; i < 16; i++) cr_expect_eq(a[i], b[i]);
    cr_assert_eq(tg_decoder_generate(m, prompt, 2, 16, 1, 0, 7, a), 0);
    cr_assert_eq(tg_decoder_generate(m, prompt, 2, 16, 1, 0, 7, b), 0);
    cr_assert_eq(tg_decoder_generate(m, prompt, 2, 16, 1, 0, 8, c), 0);
    int same = 0;
    for (int i = 0; i < 16; i++) {
        cr_expect_eq(a[i], b[i], "same seed, token %d", i);
        cr_expect(a[i] >= 0 && a[i] < 11);
        same += a[i] == c[i];
    }
    cr_expect(same < 16, "another seed draws other tokens");
    cr_expect_eq(tg_decoder_generate(m, prompt, 2, 0, 1, 0, 7, NULL), 0); /* nothing to do */
    tg_decoder_free(m);
}

/* ---- checkpoints ---------------------------------------------------------------- */

static void expect_same_logits(tg_decoder *a, tg_decoder *b, double tol) {
    tg_scope_begin();
    tg_tensor *la = tg_decoder_forward(a, tok25, 2, 5), *lb = tg_decoder_forward(b, tok25, 2, 5);
    TG_REQUIRE(la);
    TG_REQUIRE(lb);
    expect_close(la, lb->data, lb->size, tol);
    tg_scope_end();
}

/* A file as nanoGPT writes it: the state_dict with the tied weight under
 * `keep` ("both", "lm_head.weight" as safetensors.torch.save_model keeps,
 * or "transformer.wte.weight"). */
static void save_as(tg_decoder *m, const char *path, const char *keep) {
    tg_params p;
    tg_params_init(&p);
    cr_assert_eq(tg_decoder_state_dict(m, &p, NULL), 0);
    if (strcmp(keep, "lm_head.weight") == 0)
        memmove(&p.items[0], &p.items[1], sizeof p.items[0] * (size_t)--p.n);
    else if (strcmp(keep, "transformer.wte.weight") == 0)
        p.n--;
    cr_assert_eq(tg_checkpoint_save(path, &p, NULL), 0, "%s", tg_last_error());
    tg_params_free(&p);
}

Test(decoder, checkpoint_tied_weight_under_either_name, .fini = cleanup) {
    tmpdir();
    tg_decoder_config cfg = small_config();
    tg_decoder *a = small_model(20, &cfg);
    perturb(a, 21);
    /* tg_decoder_save: both names, each a full copy. */
    cr_assert_eq(tg_decoder_save(a, in_dir("gpt.safetensors"), NULL), 0, "%s", tg_last_error());
    tg_safetensors st;
    cr_assert_eq(tg_safetensors_open(in_dir("gpt.safetensors"), &st), 0);
    cr_expect_eq(st.n, 29);
    int iw = tg_safetensors_find(&st, "transformer.wte.weight"), ih = tg_safetensors_find(&st, "lm_head.weight");
    cr_assert(iw >= 0 && ih >= 0);
    cr_expect(st.entries[ih].ndim == 2 && st.entries[ih].shape[0] == 11 && st.entries[ih].shape[1] == 8);
    cr_expect(st.entries[iw].begin != st.entries[ih].begin);
    tg_safetensors_close(&st);
    const char *keeps[] = {"both", "lm_head.weight", "transformer.wte.weight"};
    for (int k = 0; k < 3; k++) {
        save_as(a, in_dir("nano.safetensors"), keeps[k]);
        tg_decoder *b = small_model(22 + k, &cfg);
        cr_assert_eq(tg_decoder_load(b, k ? in_dir("nano.safetensors") : in_dir("gpt.safetensors")), 0, "%s: %s",
                     keeps[k], tg_last_error());
        cr_expect(memcmp(a->wte->weight->data, b->wte->weight->data, sizeof(tg_real) * 88) == 0);
        expect_same_logits(a, b, 0);
        tg_decoder_free(b);
    }
    /* Both names with different values: refused, the model unchanged. */
    tg_tensor *other = tg_clone(a->wte->weight);
    other->data[5] += 1;
    tg_params p;
    tg_params_init(&p);
    cr_assert_eq(tg_decoder_params(a, &p, NULL), 0);
    tg_params_add(&p, NULL, "lm_head.weight", other);
    cr_assert_eq(tg_checkpoint_save(in_dir("bad.safetensors"), &p, NULL), 0);
    tg_params_free(&p);
    tg_decoder *b = small_model(30, &cfg), *b0 = small_model(30, &cfg);
    tg_clear_error();
    cr_expect_eq(tg_decoder_load(b, in_dir("bad.safetensors")), -1);
    cr_expect(error_has("lm_head.weight differ", "ties them"), "%s", tg_last_error());
    expect_same_logits(b, b0, 0);
    /* A missing tensor or an extra one (the attn.bias buffers of PyTorch
     * < 2.0) is refused as by tg_checkpoint_load. */
    tg_params_init(&p);
    cr_assert_eq(tg_decoder_state_dict(a, &p, NULL), 0);
    tg_tensor *mask = tg_ones(TG_SHAPE(1, 1, 6, 6));
    tg_params_add(&p, NULL, "transformer.h.0.attn.bias", mask);
    cr_assert_eq(tg_checkpoint_save(in_dir("old.safetensors"), &p, NULL), 0);
    cr_expect_eq(tg_decoder_load(b, in_dir("old.safetensors")), -1);
    cr_expect(error_has("unexpected", "attn.bias"), "%s", tg_last_error());
    p.n -= 3; /* the buffer, lm_head.weight and transformer.ln_f.bias */
    cr_assert_eq(tg_checkpoint_save(in_dir("short.safetensors"), &p, NULL), 0);
    cr_expect_eq(tg_decoder_load(b, in_dir("short.safetensors")), -1);
    cr_expect(error_has("missing", "ln_f.bias"), "%s", tg_last_error());
    cr_expect_eq(tg_decoder_load(b, in_dir("absent.safetensors")), -1);
    expect_same_logits(b, b0, 0);
    tg_params_free(&p);
    tg_free(mask);
    tg_free(other);
    tg_decoder_free(b);
    tg_decoder_free(b0);
    tg_decoder_free(a);
}

/* ---- sampling helpers -------------------------------------------------------- */

Test(decoder, argmax_and_sample) {
    tg_scope_begin();
    tg_tensor *x = tg_from_array(TG_SHAPE(2, 4), ((const tg_real[]){0.5, 2, 2, -1, -3, -2, -2.5, -9}));
    int idx[2];
    cr_assert_eq(tg_argmax(x, idx), 0);
    cr_expect(idx[0] == 1 && idx[1] == 1, "first maximum: %d %d", idx[0], idx[1]);
    tg_rng rng = tg_rng_new(3);
    int s[2];
    cr_assert_eq(tg_sample(x, 0, 0, &rng, s), 0); /* temperature 0: argmax */
    cr_expect(s[0] == 1 && s[1] == 1);
    /* Frequencies follow softmax(x / T): logits log(0.1, 0.2, 0.7). */
    tg_tensor *l = tg_from_array(TG_SHAPE(3), ((const tg_real[]){log(0.1), log(0.2), log(0.7)}));
    int count[3] = {0}, n = 20000;
    for (int i = 0; i < n; i++) {
        int k;
        cr_assert_eq(tg_sample(l, 1, 0, &rng, &k), 0);
        count[k]++;
    }
    const double p[3] = {0.1, 0.2, 0.7};
    for (int k = 0; k < 3; k++)
        cr_expect(fabs(count[k] / (double)n - p[k]) < 0.015, "token %d: %g, want %g", k, count[k] / (double)n, p[k]);
    /* Temperature 2: p^(1/2) normalised; top_k 2 never draws the smallest. */
    int c2[3] = {0};
    for (int i = 0; i < n; i++) {
        int k;
        cr_assert_eq(tg_sample(l, 2, 2, &rng, &k), 0);
        c2[k]++;
    }
    double z = sqrt(0.2) + sqrt(0.7);
    cr_expect_eq(c2[0], 0);
    cr_expect(fabs(c2[2] / (double)n - sqrt(0.7) / z) < 0.015, "%g", c2[2] / (double)n);
    /* top_k 1 is argmax at any temperature. */
    for (int i = 0; i < 20; i++) {
        cr_assert_eq(tg_sample(x, 5, 1, &rng, s), 0);
        cr_expect(s[0] == 1 || s[0] == 2, "ties with the k-th value are kept: %d", s[0]);
        cr_expect_eq(s[1], 1);
    }
    /* errors */
    tg_clear_error();
    cr_expect_eq(tg_sample(x, -1, 0, &rng, s), -1);
    cr_expect(error_has("sample", "temperature -1"), "%s", tg_last_error());
    cr_expect_eq(tg_sample(x, INFINITY, 0, &rng, s), -1); /* would draw masked (-inf) tokens */
    cr_expect(error_has("sample", "finite"), "%s", tg_last_error());
    cr_expect_eq(tg_sample(x, NAN, 0, &rng, s), -1);
    cr_expect_eq(tg_sample(x, 1, 0, NULL, s), -1);
    cr_expect(error_has("sample", "rng"), "%s", tg_last_error());
    cr_expect_eq(tg_argmax(NULL, s), -1);
    cr_expect(error_has("argmax", "NULL"), "%s", tg_last_error());
    x->data[2] = NAN;
    cr_expect_eq(tg_sample(x, 1, 0, &rng, s), -1);
    cr_expect(error_has("sample", "nan"), "%s", tg_last_error());
    cr_assert_eq(tg_argmax(x, idx), 0);
    cr_expect_eq(idx[0], 2, "NaN is the largest, as torch.argmax");
    tg_scope_end();
}

/* ---- errors ---------------------------------------------------------------------- */

Test(decoder, errors) {
    tg_rng rng = tg_rng_new(1);
    tg_decoder_config cfg = small_config();
    /* Each bad config is refused with a message naming the field. */
#define EXPECT_REFUSED(field, value, a, b)                                       \
    do {                                                                         \
        tg_decoder_config c = cfg;                                               \
        c.field = value;                                                         \
        cr_expect_null(tg_decoder_new(&c, &rng), #field " " #value " accepted"); \
        cr_expect(error_has(a, b), "%s", tg_last_error());                       \
    } while (0)
    EXPECT_REFUSED(n_head, 3, "n_head 3", "n_embd 8");
    EXPECT_REFUSED(vocab_size, 0, "decoder", "vocab_size 0");
    EXPECT_REFUSED(n_layer, 0, "n_layer 0", "positive");
    EXPECT_REFUSED(dropout, 1.5, "decoder", "dropout");
    EXPECT_REFUSED(pos, (tg_pe_kind)7, "position kind 7", NULL);
    EXPECT_REFUSED(gelu, (tg_decoder_gelu)5, "gelu kind 5", NULL);
#undef EXPECT_REFUSED
    cr_expect_null(tg_decoder_new(NULL, &rng));
    cr_expect(error_has("NULL config", NULL), "%s", tg_last_error());

    tg_decoder *m = small_model(2, &cfg);
    tg_scope_begin();
    tg_clear_error();
    int too_long[7] = {0};
    cr_expect_null(tg_decoder_forward(m, too_long, 1, 7));
    cr_expect(error_has("sequence length 7", "block_size 6"), "%s", tg_last_error());
    int bad_tok[3] = {1, 11, 2};
    cr_expect_null(tg_decoder_forward(m, bad_tok, 1, 3));
    cr_expect(error_has("token 11 at (0,1)", "[0, 11)"), "%s", tg_last_error());
    bad_tok[1] = -1;
    cr_expect_null(tg_decoder_loss(m, bad_tok, bad_tok, 1, 3));
    cr_expect(error_has("decoder_loss: token -1", NULL), "%s", tg_last_error());
    cr_expect_null(tg_decoder_loss(m, tok25, NULL, 2, 5));
    cr_expect(error_has("NULL targets", NULL), "%s", tg_last_error());
    cr_expect_null(tg_decoder_loss(m, tok25, (const int[]){0, 1, 2, 3, 4, 5, 6, 7, 8, 11}, 2, 5));
    cr_expect(error_has("cross_entropy", "target 11"), "%s", tg_last_error());
    cr_expect_null(tg_decoder_forward(m, tok25, 0, 5));
    cr_expect(error_has("sizes must be positive", NULL), "%s", tg_last_error());
    cr_expect_null(tg_decoder_forward(NULL, tok25, 2, 5));
    cr_expect(error_has("decoder_forward: NULL module", NULL), "%s", tg_last_error());
    int out[4];
    cr_expect_eq(tg_decoder_generate(m, bad_tok, 3, 4, 1, 0, 1, out), -1);
    cr_expect(error_has("prompt token -1", NULL), "%s", tg_last_error());
    cr_expect_eq(tg_decoder_generate(m, tok25, 0, 4, 1, 0, 1, out), -1);
    cr_expect(error_has("0 prompt tokens", NULL), "%s", tg_last_error());
    cr_expect_eq(tg_decoder_generate(m, tok25, 2, 4, -0.5, 0, 1, out), -1);
    cr_expect(error_has("temperature", NULL), "%s", tg_last_error());
    tg_params p;
    tg_params_init(&p);
    cr_expect_eq(tg_decoder_params(NULL, &p, NULL), -1);
    cr_expect(error_has("decoder_params: NULL module", NULL), "%s", tg_last_error());
    tg_scope_end();
    cr_expect_null(tg_decoder_cache_new(NULL));
    tg_decoder_free(m);
    tg_decoder_free(NULL);
    tg_decoder_train(NULL, true);
    tg_decoder_record_attention(NULL, true);
    tg_decoder_cache_free(NULL);
}

/* GPT-2 medium's 24 layers (and XL's 48) have 1 + 3 n_layer dropout
 * generators: all of them fit a tg_rngs list, so a training state can hold
 * them (64 entries stopped at 21 layers). */
Test(decoder, rngs_of_a_deep_decoder_fit_one_list) {
    tg_decoder_config cfg = tg_decoder_config_default(11, 4, 48, 2, 8);
    tg_rng rng = tg_rng_new(5);
    tg_decoder *m = tg_decoder_new(&cfg, &rng);
    TG_REQUIRE(m);
    tg_rngs *r = calloc(1, sizeof *r);
    cr_assert_not_null(r);
    cr_expect_eq(tg_decoder_rngs(m, r), 0, "%s", tg_last_error());
    cr_expect_eq(r->n, 1 + 3 * 48);
    cr_expect_str_eq(r->item[r->n - 1].name, "h47.mlp");
    free(r);
    tg_decoder_free(m);
}
