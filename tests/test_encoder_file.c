/* The encoder model's file that describes itself (train/model_file.h:
 * tg_encoder_save, tg_encoder_open): a round trip, reverse's older files
 * (no model_type) and a run's checkpoint naming the tensors "model.*", and
 * metadata checked against the tensors, a mismatch refused with the reason. */
#include <criterion/criterion.h>

#include "test_util.h"
#include "io_test_util.h"

TestSuite(encoder_file, .fini = cleanup);

static tg_encoder_model small(tg_pe_kind pe) {
    tg_encoder_config c = {
        .vocab_size = 12, .num_hiddens = 16, .ffn_hiddens = 24, .num_heads = 2, .num_layers = 2, .pe = pe};
    tg_rng rng = tg_rng_new(7);
    tg_encoder_model m;
    cr_assert_eq(tg_encoder_model_init(&m, &c, 10, &rng), 0, "%s", tg_last_error());
    snprintf(m.task, sizeof m.task, "reverse");
    return m;
}

/* The logits of both models on the same tokens, compared (eval mode). */
static void expect_same_logits(tg_encoder_model *a, tg_encoder_model *b) {
    int x[10];
    for (int t = 0; t < 10; t++) x[t] = (t * 5) % 12;
    tg_encoder_train(a->encoder, false), tg_encoder_train(b->encoder, false);
    tg_scope_begin();
    tg_mask none = {0};
    tg_tensor *ya = tg_linear_forward(a->head, tg_encoder_forward(a->encoder, x, 1, 10, none));
    tg_tensor *yb = tg_linear_forward(b->head, tg_encoder_forward(b->encoder, x, 1, 10, none));
    cr_assert(ya && yb, "%s", tg_last_error());
    for (int64_t i = 0; i < tg_numel(ya->ndim, ya->shape); i++)
        cr_expect_eq(ya->data[i], yb->data[i], "logit %lld", (long long)i);
    tg_scope_end();
}

Test(encoder_file, round_trips_with_its_configuration) {
    tmpdir();
    const tg_pe_kind kinds[] = {TG_PE_FIXED, TG_PE_LEARNED, TG_PE_NONE, TG_PE_ROPE};
    for (int k = 0; k < 4; k++) {
        tg_encoder_model m = small(kinds[k]), o;
        cr_assert_eq(tg_encoder_save(&m, in_dir("e.safetensors")), 0, "%s", tg_last_error());
        cr_assert_eq(tg_encoder_open(in_dir("e.safetensors"), &o), 0, "%s", tg_last_error());
        cr_expect_str_eq(o.task, "reverse");
        cr_expect_eq(o.seq_len, 10);
        const tg_encoder_config *c = &o.encoder->cfg;
        cr_expect(c->vocab_size == 12 && c->num_hiddens == 16 && c->ffn_hiddens == 24 && c->num_heads == 2 &&
                  c->num_layers == 2 && c->pe == kinds[k] && c->max_len == m.encoder->cfg.max_len);
        expect_same_logits(&m, &o);
        tg_encoder_model_free(&o);
        tg_encoder_model_free(&m);
    }
}

/* What reverse wrote before model_type (and its runs write: "model." names). */
Test(encoder_file, older_files_and_run_checkpoints_open) {
    tmpdir();
    tg_encoder_model m = small(TG_PE_LEARNED), o;
    const char *old = "{\"task\":\"sort\",\"pe\":\"learned\",\"vocab\":\"12\",\"seq_len\":\"10\",\"dim\":\"16\","
                      "\"heads\":\"2\",\"ffn\":\"24\",\"layers\":\"2\"}";
    cr_assert_eq(tg_checkpoint_save(in_dir("old.safetensors"), &m.params, old), 0, "%s", tg_last_error());
    cr_assert_eq(tg_encoder_open(in_dir("old.safetensors"), &o), 0, "%s", tg_last_error());
    cr_expect_str_eq(o.task, "sort");
    expect_same_logits(&m, &o);
    tg_encoder_model_free(&o);
    tg_params run;
    tg_params_init(&run);
    cr_assert_eq(tg_encoder_params(m.encoder, &run, "model.encoder"), 0);
    cr_assert_eq(tg_linear_params(m.head, &run, "model.head"), 0);
    cr_assert_eq(tg_checkpoint_save(in_dir("state.safetensors"), &run, old), 0, "%s", tg_last_error());
    cr_assert_eq(tg_encoder_open(in_dir("state.safetensors"), &o), 0, "%s", tg_last_error());
    expect_same_logits(&m, &o);
    tg_encoder_model_free(&o);
    tg_params_free(&run);
    tg_encoder_model_free(&m);
}

/* Each crafted key is refused naming it, before anything is built. */
Test(encoder_file, metadata_is_checked_against_the_tensors) {
    tmpdir();
    tg_encoder_model m = small(TG_PE_LEARNED), o;
    static const struct {
        const char *meta, *says;
    } cases[] = {
        {"\"vocab\":\"13\",\"dim\":\"16\",\"heads\":\"2\",\"layers\":\"2\",\"pe\":\"learned\"", "has shape"},
        {"\"vocab\":\"12\",\"dim\":\"32\",\"heads\":\"2\",\"layers\":\"2\",\"pe\":\"learned\"", "has shape"},
        {"\"vocab\":\"12\",\"dim\":\"16\",\"heads\":\"2\",\"layers\":\"1\",\"pe\":\"learned\"", "more blocks"},
        {"\"vocab\":\"12\",\"dim\":\"16\",\"heads\":\"2\",\"layers\":\"3\",\"pe\":\"learned\"", "no tensor"},
        {"\"vocab\":\"12\",\"dim\":\"16\",\"heads\":\"3\",\"layers\":\"2\",\"pe\":\"learned\"", "divide"},
        {"\"vocab\":\"12junk\",\"dim\":\"16\",\"heads\":\"2\",\"layers\":\"2\",\"pe\":\"learned\"", "12junk"},
        {"\"vocab\":\"12\",\"dim\":\"16\",\"heads\":\"2\",\"layers\":\"2\",\"pe\":\"rotary\"", "rotary"},
        {"\"vocab\":\"12\",\"dim\":\"16\",\"heads\":\"2\",\"layers\":\"2\"", "'pe' is missing"},
        {"\"model_type\":\"decoder\",\"vocab\":\"12\",\"dim\":\"16\",\"heads\":\"2\",\"layers\":\"2\",\"pe\":"
         "\"learned\"",
         "an encoder's is 'encoder'"},
        {"\"vocab\":\"12\",\"dim\":\"16\",\"heads\":\"2\",\"layers\":\"2\",\"pe\":\"learned\",\"max_len\":\"5\"",
         "max_len"},
        {"\"vocab\":\"12\",\"dim\":\"16\",\"heads\":\"2\",\"layers\":\"2\",\"pe\":\"learned\",\"task\":\"a b\"",
         "'task' is not a word"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char meta[512];
        snprintf(meta, sizeof meta, "{\"seq_len\":\"10\",\"ffn\":\"24\",%s}", cases[i].meta);
        cr_assert_eq(tg_checkpoint_save(in_dir("bad.safetensors"), &m.params, meta), 0, "%s", tg_last_error());
        cr_expect_neq(tg_encoder_open(in_dir("bad.safetensors"), &o), 0, "case %zu loaded", i);
        cr_expect(error_has("bad.safetensors", cases[i].says), "case %zu: %s", i, tg_last_error());
        cr_expect_null(o.encoder, "case %zu left a model", i);
    }
    cr_expect_neq(tg_encoder_open(NULL, &o), 0);
    cr_expect_neq(tg_encoder_open(in_dir("none.safetensors"), &o), 0);
    tg_encoder_model_free(&m);
}

/* Held-out scores: the reversal of 3 sequences scored by hand from the
 * logits, the mode restored, n < 1 refused. */
Test(encoder_file, evaluate_scores_tokens_and_sequences) {
    tg_encoder_model m = small(TG_PE_FIXED);
    int x[30], y[30];
    for (int i = 0; i < 30; i++) x[i] = (i * 7) % 12;
    for (int s = 0; s < 3; s++)
        for (int t = 0; t < 10; t++) y[s * 10 + t] = x[s * 10 + 9 - t];
    double ta, sa, loss = tg_encoder_model_evaluate(&m, x, y, 3, &ta, &sa);
    cr_assert(loss > 0 && ta >= 0 && ta <= 1 && sa >= 0 && sa <= ta, "%g %g %g", loss, ta, sa);
    tg_encoder_train(m.encoder, false);
    tg_scope_begin();
    tg_tensor *logits = tg_encoder_model_forward(&m, x, 3, 10);
    cr_assert_not_null(logits, "%s", tg_last_error());
    int hits = 0;
    for (int r = 0; r < 30; r++) {
        int best = 0;
        for (int v = 1; v < 12; v++)
            if (logits->data[r * 12 + v] > logits->data[r * 12 + best]) best = v;
        hits += best == y[r];
    }
    tg_scope_end();
    cr_expect_eq(ta, hits / 30.0);
    cr_expect(m.encoder->blocks[0]->attention->attention->dropout->training == false, "mode restored");
    cr_expect(isnan(tg_encoder_model_evaluate(&m, x, y, 0, &ta, &sa)) && isnan(ta));
    cr_expect(error_has("encoder_model_evaluate", "no sequences"), "%s", tg_last_error());
    tg_encoder_model_free(&m);
}
