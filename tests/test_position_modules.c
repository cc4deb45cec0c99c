/* The position kinds inside attention (TG_PE_RELATIVE, TG_PE_ROPE,
 * TG_PE_ALIBI) wired into the modules: the encoder (no absolute table; any
 * length runs, while the learned table refuses T > max_len with a clear
 * error) and the decoder (no wpe; the KV cache continues a sequence exactly;
 * relative_k / relative_v named as the issue asks). For each kind: a
 * gradient check of the whole loss w.r.t. every parameter, and the stored
 * and fused attention paths giving the same values. */
#include "test_util.h"

#include <string.h>

static const tg_pe_kind enc_kinds[] = {TG_PE_RELATIVE, TG_PE_ROPE, TG_PE_ALIBI};
static const tg_pe_kind dec_kinds[] = {TG_PE_RELATIVE, TG_PE_ROPE, TG_PE_ALIBI};
static const char *const kind_names[] = {"relative", "rope", "alibi"};

/* The gradient check of f w.r.t. every tensor of p, for position kind v of
 * a module (`what`: "encoder pe", "decoder pos"). */
static void gradcheck_params(tg_fn f, void *ctx, const tg_params *p, const char *what, int v) {
    tg_tensor **in = malloc(sizeof *in * (size_t)p->n);
    for (int i = 0; i < p->n; i++) in[i] = p->items[i].t;
    tg_gradcheck_result r;
    bool ok = tg_gradcheck(f, in, p->n, ctx, 1e-5, 1e-6, &r);
    printf("gradcheck %s=%s: %lld entries, max rel err %.1e\n", what, kind_names[v], (long long)r.checked,
           r.max_rel_err);
    cr_expect(ok, "%s: max rel err %g at %s", kind_names[v], r.max_rel_err, p->items[r.worst_input].name);
    free(in);
}

/* The stored path (weights recorded) and the fused one gave the same output. */
static void expect_paths_agree(const tg_tensor *fused, const tg_tensor *stored, int v) {
    TG_REQUIRE(stored);
    double e = max_diff(fused, stored);
    cr_expect(e < 1e-12, "%s: paths differ by %g", kind_names[v], e);
}

/* ---- encoder ---------------------------------------------------------------- */

static tg_encoder *encoder(tg_pe_kind pe, int max_len, uint64_t seed) {
    tg_encoder_config cfg = tiny_encoder(7, 8, 12, 2, 2, max_len);
    cfg.pe = pe;
    cfg.relative_clip = 3;
    tg_rng rng = tg_rng_new(seed);
    tg_encoder *m = tg_encoder_new(&cfg, &rng);
    cr_assert_not_null(m, "%s", tg_last_error());
    return m;
}

typedef struct {
    tg_encoder *m;
    int T;
} enc_ctx;
static const int tok[2 * 70] = {1, 3, 5, 0, 6, 2, 4, 4, 1, 0, 2, 5};

static tg_tensor *enc_fn(tg_tensor *const *in, int n, void *ctx) {
    (void)in, (void)n;
    const enc_ctx *c = ctx;
    static const int lens[2] = {5, 3};
    tg_tensor *X = tg_encoder_forward(c->m, tok, 2, c->T, (tg_mask){lens, 1, false});
    return X;
}

Test(position_modules, encoder_gradcheck_every_kind) {
    for (int v = 0; v < 3; v++) {
        tg_encoder *m = encoder(enc_kinds[v], 4, 20 + v); /* max_len 4 < T 6: no table to run past */
        tg_params p;
        tg_params_init(&p);
        cr_assert_eq(tg_encoder_params(m, &p, "enc"), 0);
        bool has_rel = tg_params_get(&p, "enc.blocks.0.attention.relative_k") != NULL &&
                       tg_params_get(&p, "enc.blocks.1.attention.relative_v") != NULL;
        cr_expect_eq(has_rel, enc_kinds[v] == TG_PE_RELATIVE, "%s: relative_k/relative_v listed %d", kind_names[v],
                     has_rel);
        for (int i = 0; i < p.n; i++) cr_expect(strstr(p.items[i].name, "pos_encoding") == NULL);
        enc_ctx ctx = {m, 6};
        gradcheck_params(enc_fn, &ctx, &p, "encoder pe", v);
        tg_params_free(&p);
        tg_encoder_free(m);
    }
}

/* Recording (stored path) and not (fused at 70 keys) give the same output. */
Test(position_modules, encoder_stored_and_fused_agree) {
    int T = 70, toks[2 * 70];
    for (int i = 0; i < 2 * T; i++) toks[i] = (i * 5 + 1) % 7;
    static const int lens[2] = {70, 41};
    for (int v = 0; v < 3; v++) {
        tg_encoder *m = encoder(enc_kinds[v], 0, 30 + v);
        tg_scope_begin();
        tg_tensor *fused = tg_encoder_forward(m, toks, 2, T, (tg_mask){lens, 1, false});
        TG_REQUIRE(fused);
        tg_encoder_record_attention(m, true);
        tg_tensor *stored = tg_encoder_forward(m, toks, 2, T, (tg_mask){lens, 1, false});
        expect_paths_agree(fused, stored, v);
        tg_scope_end();
        tg_encoder_free(m);
    }
}

/* The attention kinds run past max_len; the learned table refuses with a
 * clear error, and the fixed one too. */
Test(position_modules, encoder_lengths_past_max_len) {
    int toks[64] = {0};
    for (int v = 0; v < 3; v++) {
        tg_encoder *m = encoder(enc_kinds[v], 16, 40);
        tg_scope_begin();
        cr_expect_not_null(tg_encoder_forward(m, toks, 1, 64, (tg_mask){0}), "%s: %s", kind_names[v], tg_last_error());
        tg_scope_end();
        tg_encoder_free(m);
    }
    tg_encoder *m = encoder(TG_PE_LEARNED, 16, 41);
    tg_scope_begin();
    tg_clear_error();
    cr_expect_null(tg_encoder_forward(m, toks, 1, 64, (tg_mask){0}));
    cr_expect(error_has("sequence length 64 > max_len 16", NULL), "%s", tg_last_error());
    tg_scope_end();
    tg_encoder_free(m);
}

Test(position_modules, mha_set_position_errors) {
    tg_rng rng = tg_rng_new(1);
    tg_mha *m = tg_mha_new(6, 6, 6, 6, 2, 0, false, &rng); /* head size 3: odd */
    tg_clear_error();
    cr_expect_eq(tg_mha_set_position(m, TG_PE_ROPE, 0, false, &rng), -1);
    cr_expect(error_has("mha_set_position", "odd"));
    cr_expect_eq(tg_mha_set_position(m, TG_PE_RELATIVE, 0, false, &rng), -1);
    cr_expect(error_has("mha_set_position", "clip 0"));
    cr_expect_eq(tg_mha_set_position(m, (tg_pe_kind)9, 2, false, &rng), -1);
    cr_expect(error_has("mha_set_position", "unknown"));
    cr_expect_eq(tg_mha_set_position(m, TG_PE_ALIBI, 0, false, &rng), 0);
    cr_expect_eq(tg_mha_set_position(m, TG_PE_RELATIVE, 2, false, &rng), -1);
    cr_expect(error_has("mha_set_position", "already"));
    cr_expect_eq(tg_mha_set_position(NULL, TG_PE_ALIBI, 0, false, &rng), -1);
    tg_mha_free(m);
    tg_encoder_config cfg = tiny_encoder(5, 6, 8, 2, 1, 8);
    cfg.pe = TG_PE_ROPE;
    cr_expect_null(tg_encoder_new(&cfg, &rng));
    cr_expect(error_has("encoder", "odd"));
}

/* ---- decoder ---------------------------------------------------------------- */

static tg_decoder *decoder(tg_pe_kind pos, int block, uint64_t seed) {
    tg_decoder_config cfg = tg_decoder_config_default(11, block, 2, 2, 8);
    cfg.pos = pos;
    cfg.relative_clip = 3;
    tg_rng rng = tg_rng_new(seed);
    tg_decoder *m = tg_decoder_new(&cfg, &rng);
    cr_assert_not_null(m, "%s", tg_last_error());
    /* biases and LayerNorms off their init, tables at a generic size */
    tg_params p;
    tg_params_init(&p);
    tg_decoder_params(m, &p, NULL);
    for (int i = 0; i < p.n; i++)
        if (p.items[i].t->ndim == 1 || strstr(p.items[i].name, "relative"))
            tg_fill_normal(p.items[i].t, strstr(p.items[i].name, "ln") ? 1 : 0, 0.3, &rng);
    tg_params_free(&p);
    return m;
}

static const int dtok[10] = {1, 4, 0, 9, 10, 3, 3, 7, 2, 5};
static const int dtgt[10] = {4, 0, 9, 10, -1, 3, 7, 2, 5, 6};
static tg_tensor *dec_fn(tg_tensor *const *in, int n, void *ctx) {
    (void)in, (void)n;
    return tg_decoder_loss(ctx, dtok, dtgt, 2, 5);
}

Test(position_modules, decoder_gradcheck_every_kind) {
    for (int v = 0; v < 3; v++) {
        tg_decoder *m = decoder(dec_kinds[v], 6, 50 + v);
        cr_expect_null(m->wpe);
        tg_params p;
        tg_params_init(&p);
        cr_assert_eq(tg_decoder_params(m, &p, NULL), 0);
        cr_expect_null(tg_params_get(&p, "transformer.wpe.weight"));
        tg_tensor *rk = tg_params_get(&p, "transformer.h.1.attn.relative_k");
        cr_expect_eq(rk != NULL, dec_kinds[v] == TG_PE_RELATIVE);
        if (rk) cr_expect(rk->shape[0] == 7 && rk->shape[1] == 4);
        gradcheck_params(dec_fn, m, &p, "decoder pos", v);
        tg_params_free(&p);
        tg_decoder_free(m);
    }
}

/* The KV cache continues the sequence exactly: the queries' positions
 * (RoPE's rotation, the offsets of ALiBi and of the relative tables) start
 * where the cache ends. And recording (stored) equals fused at 64 keys. */
Test(position_modules, decoder_cache_and_paths_agree) {
    const int seq[12] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8};
    for (int v = 0; v < 3; v++) {
        tg_decoder *m = decoder(dec_kinds[v], 12, 60 + v);
        tg_decoder_train(m, false);
        tg_decoder_cache *c = tg_decoder_cache_new(m);
        TG_REQUIRE(c);
        tg_scope_begin();
        tg_tensor *full = tg_decoder_forward(m, seq, 1, 12);
        TG_REQUIRE(full);
        const int chunks[] = {4, 1, 3, 1, 3};
        int pos = 0;
        for (int i = 0; i < 5; i++) {
            tg_tensor *l = tg_decoder_forward_cached(m, c, seq + pos, chunks[i]);
            TG_REQUIRE(l);
            double e = 0;
            for (int64_t j = 0; j < l->size; j++) e = fmax(e, fabs(l->data[j] - full->data[pos * 11 + j]));
            cr_expect(e < 1e-12, "%s: chunk %d differs by %g", kind_names[v], i, e);
            pos += chunks[i];
        }
        tg_scope_end();
        tg_decoder_cache_free(c);
        tg_decoder_free(m);

        m = decoder(dec_kinds[v], 64, 70 + v);
        int toks[2 * 64];
        for (int i = 0; i < 2 * 64; i++) toks[i] = (i * 7 + 3) % 11;
        tg_scope_begin();
        tg_tensor *fused = tg_decoder_forward(m, toks, 2, 64);
        TG_REQUIRE(fused);
        tg_decoder_record_attention(m, true);
        tg_tensor *stored = tg_decoder_forward(m, toks, 2, 64);
        expect_paths_agree(fused, stored, v);
        tg_scope_end();
        tg_decoder_free(m);
    }
}

Test(position_modules, decoder_config_errors) {
    tg_rng rng = tg_rng_new(1);
    tg_decoder_config cfg = tg_decoder_config_default(11, 8, 1, 2, 6); /* head size 3 */
    cfg.pos = TG_PE_ROPE;
    tg_clear_error();
    cr_expect_null(tg_decoder_new(&cfg, &rng));
    cr_expect(error_has("decoder", "odd"));
    cfg = tg_decoder_config_default(11, 8, 1, 2, 8);
    cfg.relative_clip = -1;
    cr_expect_null(tg_decoder_new(&cfg, &rng));
    cr_expect(error_has("decoder", "relative_clip -1"));
    cfg.relative_clip = 0;
    cfg.pos = (tg_pe_kind)7;
    cr_expect_null(tg_decoder_new(&cfg, &rng));
    cr_expect(error_has("decoder", "unknown position"));
}

/* One enum for every module: its names and parsing in the library, the
 * RoPE check once, the decoder's kinds (all but the fixed table; none is a
 * causal decoder with no position at all). */
Test(position_modules, one_kind_enum_named_and_checked_by_the_library) {
    static const char *const names[] = {"fixed", "learned", "none", "relative", "rope", "alibi"};
    for (int k = 0; k < 6; k++) {
        cr_expect_str_eq(tg_pe_kind_name((tg_pe_kind)k), names[k]);
        tg_pe_kind got = TG_PE_FIXED;
        cr_expect_eq(tg_pe_kind_parse(names[k], &got), 0);
        cr_expect_eq((int)got, k);
    }
    cr_expect_null(tg_pe_kind_name((tg_pe_kind)6));
    tg_pe_kind got;
    tg_clear_error();
    cr_expect_eq(tg_pe_kind_parse("sinusoidal", &got), -1);
    cr_expect(error_has("'sinusoidal'", "fixed, learned, none, relative, rope or alibi"), "%s", tg_last_error());
    cr_expect_eq(tg_pe_check("x", TG_PE_ROPE, 4), 0);
    cr_expect_eq(tg_pe_check("x", TG_PE_ROPE, 3), -1);
    cr_expect(error_has("x: RoPE", "head size 3 is odd"), "%s", tg_last_error());
    cr_expect_eq(tg_pe_check("x", (tg_pe_kind)9, 4), -1);
    /* The decoder: none trains (no wpe, no term), fixed is refused. */
    tg_rng rng = tg_rng_new(2);
    tg_decoder_config c = tg_decoder_config_default(16, 8, 1, 2, 8);
    c.pos = TG_PE_NONE;
    tg_decoder *m = tg_decoder_new(&c, &rng);
    TG_REQUIRE(m);
    cr_expect_null(m->wpe);
    int tok[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    tg_scope_begin();
    TG_REQUIRE(tg_decoder_loss(m, tok, tok, 1, 8));
    tg_scope_end();
    tg_decoder_free(m);
    c.pos = TG_PE_FIXED;
    cr_expect_null(tg_decoder_new(&c, &rng));
    cr_expect(error_has("decoder: position kind fixed", NULL), "%s", tg_last_error());
    c.pos = TG_PE_ROPE, c.n_head = 8; /* head size 1 */
    cr_expect_null(tg_decoder_new(&c, &rng));
    cr_expect(error_has("decoder: RoPE", "odd"), "%s", tg_last_error());
}
