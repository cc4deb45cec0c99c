/* A GPT training run on real text, stopped and resumed through a training
 * state with extra metadata (tg_train_state_save_meta), ends bit for bit
 * where an uninterrupted run does: the loop of examples/lm.c in miniature,
 * with dropout on, so every generator (data, each dropout layer) must be
 * saved and restored. */
#include <stdlib.h>
#include <unistd.h>
#include "test_util.h"

enum { B = 2, T = 16, STEPS = 6 };

typedef struct {
    tg_token_data *d;
    tg_decoder *m;
    tg_params params;
    tg_optim *opt;
    tg_named_rng rngs[2 + 3 * 2];
    char names[2 + 3 * 2][16];
    int n_rngs;
} lm_run;

static char dir[64], tokens[128];

static void setup(void) {
    snprintf(dir, sizeof dir, "/tmp/tgrad-lm-resume-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(tokens, sizeof tokens, "%s/tokens.npy", dir);
    cr_assert_eq(tg_tokens_from_text(TG_SRC_DIR "/tests/data/fortunes_excerpt.txt", tokens), 0, "%s", tg_last_error());
}
static void teardown(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) cr_log_warn("could not remove %s", dir);
}
TestSuite(lm_resume, .init = setup, .fini = teardown);

static void add_rng(lm_run *r, const char *name, tg_rng *g) {
    snprintf(r->names[r->n_rngs], sizeof r->names[0], "%s", name);
    r->rngs[r->n_rngs] = (tg_named_rng){r->names[r->n_rngs], g};
    r->n_rngs++;
}

static void run_new(lm_run *r) {
    memset(r, 0, sizeof *r);
    TG_REQUIRE(r->d = tg_token_data_open(tokens, 0.1, 7));
    tg_rng init = tg_rng_new(3);
    tg_decoder_config cfg = tg_decoder_config_default(256, T, 2, 2, 16);
    cfg.dropout = (tg_real)0.1;
    TG_REQUIRE(r->m = tg_decoder_new(&cfg, &init));
    tg_params_init(&r->params);
    cr_assert_eq(tg_decoder_params(r->m, &r->params, NULL), 0);
    tg_optim_config oc = tg_adamw_config((tg_real)1e-3, (tg_real)0.1);
    TG_REQUIRE(r->opt = tg_optim_new_groups(&oc, &r->params));
    add_rng(r, "data", tg_token_data_rng(r->d));
    add_rng(r, "drop", tg_dropout_layer_rng(r->m->drop));
    for (int i = 0; i < 2; i++) {
        char n[16];
        snprintf(n, sizeof n, "h%d.attn", i);
        add_rng(r, n, tg_dropout_layer_rng(r->m->h[i]->attn->dropout));
        snprintf(n, sizeof n, "h%d.resid", i);
        add_rng(r, n, tg_dropout_layer_rng(r->m->h[i]->resid_drop));
        snprintf(n, sizeof n, "h%d.mlp", i);
        add_rng(r, n, tg_dropout_layer_rng(r->m->h[i]->mlp_drop));
    }
}

static void run_free(lm_run *r) {
    tg_optim_free(r->opt);
    tg_params_free(&r->params);
    tg_decoder_free(r->m);
    tg_token_data_close(r->d);
}

/* Steps from..to-1 of a warm-up + cosine run of STEPS steps, clipped at 1. */
static void train(lm_run *r, int from, int to) {
    tg_lr_schedule s = tg_lr_warmup_cosine(1e-3, 1e-4, 2, STEPS);
    int x[B * T], y[B * T];
    for (int step = from; step < to; step++) {
        cr_assert_eq(tg_optim_set_lr(r->opt, (tg_real)tg_lr_at(&s, step)), 0);
        tg_optim_zero_grad(r->opt);
        cr_assert_eq(tg_token_data_batch(r->d, B, T, x, y), 0);
        tg_scope_begin();
        tg_tensor *loss = tg_decoder_loss(r->m, x, y, B, T);
        TG_REQUIRE(loss);
        cr_assert_eq(tg_backward(loss), 0);
        tg_scope_end();
        tg_clip_grad_norm(&r->params, 1);
        tg_optim_step(r->opt);
    }
}

Test(lm_resume, stopped_and_resumed_equals_straight) {
    lm_run a, b, c;
    run_new(&a);
    train(&a, 0, STEPS);

    run_new(&b);
    train(&b, 0, STEPS / 2);
    char path[128];
    snprintf(path, sizeof path, "%s/state.safetensors", dir);
    const char *extra = "{\"n_layer\": \"2\", \"data\": \"fortunes \\\"excerpt\\\"\"}";
    cr_assert_eq(tg_train_state_save_meta(path, &b.params, b.opt, STEPS / 2, b.rngs, b.n_rngs, extra), 0, "%s",
                 tg_last_error());
    run_free(&b);

    /* The extra keys read back beside the format's. */
    tg_safetensors st;
    cr_assert_eq(tg_safetensors_open(path, &st), 0);
    expect_meta_is(&st, "n_layer", "2");
    expect_meta_is(&st, "data", "fortunes \"excerpt\"");
    expect_meta_is(&st, "step", "3");
    tg_safetensors_close(&st);

    run_new(&c); /* a fresh process, in effect: new model, optimizer and generators */
    int64_t step = -1;
    cr_assert_eq(tg_train_state_load(path, &c.params, c.opt, &step, c.rngs, c.n_rngs), 0, "%s", tg_last_error());
    cr_assert_eq(step, STEPS / 2);
    train(&c, (int)step, STEPS);
    for (int i = 0; i < a.params.n; i++)
        cr_expect(memcmp(a.params.items[i].t->data, c.params.items[i].t->data,
                         sizeof(tg_real) * (size_t)a.params.items[i].t->size) == 0,
                  "%s differs after resuming", a.params.items[i].name);
    for (int i = 0; i < a.n_rngs; i++)
        cr_expect(a.rngs[i].rng->counter == c.rngs[i].rng->counter, "generator %s", a.rngs[i].name);
    run_free(&a);
    run_free(&c);
}

Test(lm_resume, extra_metadata_errors) {
    lm_run r;
    run_new(&r);
    char path[128];
    snprintf(path, sizeof path, "%s/s.safetensors", dir);
    const char *bad[][2] = {
        {"[\"a\"]", "one JSON object"}, {"{\"step\": \"9\"}", "\"step\""}, {"{\"rng.data\": \"1 2 3\"}", "rng."},
        {"{\"a\": 1}", "metadata"},     {"{\"a\": \"1\",}", "metadata"},
    };
    for (int i = 0; i < 5; i++) {
        cr_expect_eq(tg_train_state_save_meta(path, &r.params, r.opt, 0, r.rngs, r.n_rngs, bad[i][0]), -1, "%s",
                     bad[i][0]);
        cr_expect(error_has(bad[i][1], NULL), "%s: %s", bad[i][0], tg_last_error());
        cr_expect_neq(access(path, F_OK), 0, "nothing written for %s", bad[i][0]);
    }
    /* NULL and an empty object are no extra metadata. */
    cr_expect_eq(tg_train_state_save_meta(path, &r.params, r.opt, 0, r.rngs, r.n_rngs, NULL), 0, "%s", tg_last_error());
    cr_expect_eq(tg_train_state_save_meta(path, &r.params, r.opt, 0, r.rngs, r.n_rngs, " {} "), 0, "%s",
                 tg_last_error());
    run_free(&r);
}
