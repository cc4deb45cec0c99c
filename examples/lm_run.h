/* The lm program's run: its flags, the settings a checkpoint records
 * (typed run settings, src/train/run.h: a resume fills the flags left out,
 * applies changeable ones and refuses fixed ones, naming both values),
 * the model's shape from a checkpoint, and its figures. In a header beside
 * lm.c so that lm.c reads as data, model, loop, output. */
#ifndef LM_RUN_H
#define LM_RUN_H

#include <math.h>
#include "attention_figure.h"
#include "lm_model.h"
#include "lm_report.h"

typedef struct {
    int steps, decay_steps, batch, block, layers, heads, dim, warmup, accum, eval_every, eval_batches, save_every;
    int patience, seed, threads, stop_after, tokens, top_k;
    double lr, min_lr, weight_decay, clip, dropout, temperature;
    const char *data, *out, *resume, *init_from, *load, *prompt, *gelu, *pe, *logits, *tokenizer, *precision;
    bool sample, ddp, overwrite;
} options;

/* The run's settings (src/train/run.h, tg_setting): the flags a checkpoint
 * records, by the flags' own types and ranges; the fixed ones cannot change
 * on resume. The model's shape is the model's own metadata (lm_model.h),
 * checked by lm_shape; so is "tokenizer" (its kind): the flag's key is
 * "tokenizer.spec". */
static const char *const LM_FIXED = " data seed tokenizer ";
static const char *const LM_CHANGEABLE = " steps decay-steps batch lr min-lr warmup weight-decay clip accum dropout "
                                         "eval-every eval-batches save-every patience precision ";
enum { LM_MAX_SETTINGS = 24 };

static bool lm_listed(const char *list, const char *name) {
    const char *at = strstr(list, name);
    size_t n = strlen(name);
    return at && at[-1] == ' ' && at[n] == ' ';
}

/* The settings of the flags in opts, then the data's size (a late one: a
 * resume checks it when the token file is read). Returns their number. */
static int lm_settings(tg_setting *s, const cli_opt *opts, int nopt, int *data_tokens) {
    static const tg_setting_type type[] = {TG_SETTING_INT, TG_SETTING_REAL, TG_SETTING_STRING, TG_SETTING_BOOL};
    int n = 0;
    for (int i = 0; i < nopt && n < LM_MAX_SETTINGS - 1; i++) {
        bool fixed = lm_listed(LM_FIXED, opts[i].name), changeable = lm_listed(LM_CHANGEABLE, opts[i].name);
        if (fixed || changeable)
            s[n++] = (tg_setting){opts[i].name,
                                  type[opts[i].kind],
                                  opts[i].dst,
                                  changeable,
                                  cli_given(opts, nopt, opts[i].name),
                                  opts[i].min,
                                  opts[i].max,
                                  strcmp(opts[i].name, "tokenizer") == 0 ? "tokenizer.spec" : NULL};
    }
    s[n++] = (tg_setting){"data_tokens", TG_SETTING_INT, data_tokens, false, true, 1, INT_MAX, NULL};
    return n;
}

/* The model's shape and tokenizer from a checkpoint (--resume: the run's
 * state; --init-from: a run folder, a state, best or an lm.safetensors)
 * into c and o; a shape flag given that differs: why names both. */
static int lm_shape(options *o, const cli_opt *opts, int nopt, const char *from, lm_config *c, lm_tok *tok, char *why,
                    size_t cap) {
    char *file = tg_run_checkpoint_of(from), v[8], given[64], run[64];
    tg_safetensors st;
    if (!file || tg_safetensors_open(file, &st) != 0) return free(file), -1;
    bool state = tg_safetensors_meta(&st, "tgrad_train_state", v, sizeof v) >= 0;
    int rc = config_from_file(&st, file, state ? "model." : "", c);
    if (rc == 0) rc = lm_tok_from_file(tok, &st, file);
    tg_safetensors_close(&st);
    free(file);
    const char *names[] = {"block", "layers", "heads", "dim", "gelu", "pe"}, *str[] = {c->gelu, c->pe};
    const int num[] = {c->block, c->layers, c->heads, c->dim};
    for (int i = 0; rc == 0 && i < 6; i++) {
        const cli_opt *opt = NULL;
        for (int k = 0; k < nopt; k++) opt = strcmp(opts[k].name, names[i]) == 0 ? &opts[k] : opt;
        i < 4 ? snprintf(run, sizeof run, "%d", num[i]) : snprintf(run, sizeof run, "%s", str[i - 4]);
        i < 4 ? snprintf(given, sizeof given, "%d", *(int *)opt->dst)
              : snprintf(given, sizeof given, "%s", *(const char **)opt->dst);
        if (i >= 4) *(const char **)opt->dst = str[i - 4];
        if (!cli_given(opts, nopt, names[i]) || strcmp(given, run) == 0) continue;
        if (o->resume)
            snprintf(why, cap,
                     "--%s %s: the run in %s has %s, which cannot change on resume (start a new run from its weights "
                     "with --init-from %s --out OTHER)",
                     names[i], given, o->out, run, o->out);
        else
            snprintf(why, cap, "--%s %s: the checkpoint %s has %s (a run started from it keeps its model's shape)",
                     names[i], given, from, run);
        rc = -1;
    }
    o->block = c->block, o->layers = c->layers, o->heads = c->heads, o->dim = c->dim;
    return rc;
}

/* --resume: the run's folder (a folder, or a train_state.safetensors'),
 * its settings and model into o, c and tok. -1 with why set (a bad flag:
 * exit 2) or the error recorded (a bad checkpoint: exit 1). */
static int lm_resume(options *o, const cli_opt *opts, int nopt, lm_config *c, lm_tok *tok, char *why, size_t cap) {
    static char *dir; /* the run's folder, o->out from here */
    free(dir);
    if (!(dir = tg_run_resume_folder(o->resume))) return snprintf(why, cap, "%s", tg_last_error()), -1;
    if (cli_given(opts, nopt, "out") && strcmp(o->out, dir) != 0)
        return snprintf(why, cap, "--out %s and --resume %s name different runs (a resumed run stays in its folder)",
                        o->out, dir),
               -1;
    o->out = dir;
    tg_setting set[LM_MAX_SETTINGS];
    int unused = 0, rc = tg_run_settings_resume(dir, set, lm_settings(set, opts, nopt, &unused) - 1);
    if (rc == 1) snprintf(why, cap, "%s", tg_last_error());
    return rc != 0 ? -1 : lm_shape(o, opts, nopt, dir, c, tok, why, cap);
}

/* The weights of --init-from into the new model. */
static int lm_init_weights(tg_decoder *m, const tg_params *params, const char *path) {
    char *file = tg_run_checkpoint_of(path);
    tg_safetensors st;
    char v[8];
    int rc = file && tg_safetensors_open(file, &st) == 0 ? 0 : -1;
    bool state = rc == 0 && tg_safetensors_meta(&st, "tgrad_train_state", v, sizeof v) >= 0;
    if (rc == 0) tg_safetensors_close(&st);
    if (rc == 0) rc = state ? tg_run_init_from(file, params) : tg_decoder_load(m, file);
    free(file);
    return rc;
}

/* The token file against the model: tokens its vocabulary covers, enough
 * for a window and a validation batch (the same data on resume: the run's
 * data_tokens setting). */
static int lm_check_data(const tg_token_data *d, const lm_config *c, int B, int size) {
    int T = c->block;
    if (d->vocab > c->vocab)
        return tg_set_error("the data has tokens up to %d, the model's vocabulary is %d", d->vocab - 1, c->vocab), -1;
    if (B % size != 0) return tg_set_error("--batch %d: the %d ranks must divide it", B, size), -1;
    if (d->n_train < T + 1 || tg_token_data_val_batches(d, B, T) < 1)
        return tg_set_error("%lld tokens: the training split needs more than --block %d, the validation split "
                            "(10%%) at least --batch x --block = %d",
                            (long long)d->n, T, B * T),
               -1;
    return 0;
}

/* ---- figures ------------------------------------------------------------------ */
static int lm_draw_losses(const tg_run *run, const char *data, const lm_config *c) {
    char *path = tg_run_path(tg_run_dir(run), "lm_loss.png"), title[160];
    const char *name = data ? strrchr(data, '/') : NULL;
    snprintf(title, sizeof title, "GPT (%d layers, d %d, T %d, %s positions) on %.50s: loss per %s", c->layers, c->dim,
             c->block, c->pe,
             name   ? name + 1
             : data ? data
                    : "Debian's fortunes",
             c->vocab == TG_BYTE_VOCAB ? "byte" : "token");
    int rc = path ? tg_run_draw_losses(run, path, title, "cross-entropy (nats)") : -1;
    if (rc != 0) fprintf(stderr, "lm: %s\n", path ? tg_last_error() : "out of memory");
    free(path);
    return rc;
}

/* The attention weights of every layer and head for the first validation window. */
static tg_tensor *decoder_weights(const void *m, int l, int h) { return tg_decoder_attention_weights(m, l, h); }
static int lm_draw_attention(const char *out, tg_decoder *m, const tg_token_data *d, int B, int *x, int *y) {
    int T = m->cfg.block_size, L = m->cfg.n_layer;
    if (tg_token_data_val_batch(d, 0, B, T, x, y) != 0) return -1;
    tg_decoder_train(m, false);
    tg_decoder_record_attention(m, true);
    bool grad = tg_set_grad_enabled(false);
    tg_scope_begin();
    char *path = tg_run_path(out, "lm_attention.png"), title[128];
    snprintf(title, sizeof title, "Causal attention weights (%s positions), one validation window (rows: layers 1..%d)",
             tg_pe_kind_name(m->cfg.pos), L);
    int rc = path && tg_decoder_forward(m, x, 1, T) ? 0 : -1;
    if (rc == 0) rc = draw_attention_grid("lm", path, title, m, decoder_weights, L, m->cfg.n_head);
    tg_scope_end();
    tg_set_grad_enabled(grad);
    tg_decoder_record_attention(m, false);
    tg_decoder_train(m, true);
    free(path);
    return rc;
}

/* After each checkpoint: a short sample into the run's samples.jsonl (a
 * few bytes past a window, so that it costs little: each step past the
 * block is a whole forward, src/nn/decoder.h), then report.html. */
static int lm_report(const options *o, tg_decoder *m, const lm_tok *tok, const tg_token_data *d, int *x, int *y,
                     int64_t step) {
    static bool started; /* a new run in an old folder starts its samples afresh */
    if (!started && !o->resume) {
        char *old = tg_run_path(o->out, "samples.jsonl");
        if (old) remove(old);
        free(old);
    }
    started = true;
    const char *prompt = o->prompt[0] ? o->prompt : "\n";
    int64_t n;
    int n_new = o->tokens < 160 ? o->tokens : 160,
        *p = lm_tok_encode(tok, (const unsigned char *)prompt, strlen(prompt), &n);
    int *ids = p ? malloc(sizeof(int) * (size_t)(n + n_new + 1)) : NULL;
    int rc = ids && n > 0 ? 0 : -1;
    if (rc == 0) memcpy(ids, p, sizeof(int) * (size_t)n);
    if (rc == 0)
        rc = tg_decoder_generate(m, ids, (int)n, n_new, (tg_real)o->temperature, o->top_k, (uint64_t)o->seed, ids + n);
    /* the sample as text: its bytes, or the BPE's decoding */
    size_t len = (size_t)(n + n_new);
    int64_t bytes = rc == 0 && tok->bpe ? tg_bpe_decoded_size(tok->bpe, ids, len) : (int64_t)len;
    char *text = rc == 0 && bytes >= 0 ? malloc((size_t)bytes + 1) : NULL;
    if (rc == 0 && !text) rc = -1;
    if (rc == 0 && tok->bpe) rc = tg_bpe_decode(tok->bpe, ids, len, (unsigned char *)text, (size_t)bytes) < 0 ? -1 : 0;
    for (size_t i = 0; rc == 0 && !tok->bpe && i < len; i++) text[i] = (char)ids[i];
    if (rc == 0) rc = tg_report_append_sample(o->out, step, text, (size_t)bytes);
    if (rc == 0) rc = lm_write_report(o->out, NULL, m, tok, d, o->batch, x, y, step);
    if (rc != 0) fprintf(stderr, "lm: report: %s\n", tg_last_error() ? tg_last_error() : "out of memory");
    free(p), free(ids), free(text);
    return rc;
}

#endif
