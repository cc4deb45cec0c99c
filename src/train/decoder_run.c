/* What every program that trains a decoder needs besides the loop (run.c):
 * the model's shape and tokenizer from a checkpoint, its weights for a new
 * run, the data checked against the model, the outputs after each
 * checkpoint (the model file, the figures, a sample, report.html), and the
 * sample and logits printed from a saved model (model_file.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "../autograd/autograd.h"
#include "../distributed/dist.h"
#include "../io/npy.h"
#include "figure.h"
#include "model_file.h"
#include "report.h"
#include "run.h"

int tg_decoder_config_of(const char *path, tg_decoder_config *c, tg_tokenizer **tok) {
    char *file = tg_run_checkpoint_of(path), v[8];
    tg_safetensors st;
    if (!file || tg_safetensors_open(file, &st) != 0) return free(file), -1;
    bool state = tg_safetensors_meta(&st, "tgrad_train_state", v, sizeof v) >= 0;
    int rc = tg_decoder_config_read(&st, file, state ? "model." : "", c);
    if (rc == 0 && tok && !(*tok = tg_tokenizer_read(&st, file))) rc = -1;
    tg_safetensors_close(&st);
    free(file);
    return rc;
}

int tg_decoder_init_from(tg_decoder *m, const tg_params *params, const char *path) {
    char *file = tg_run_checkpoint_of(path), v[8];
    tg_safetensors st;
    int rc = file && tg_safetensors_open(file, &st) == 0 ? 0 : -1;
    bool state = rc == 0 && tg_safetensors_meta(&st, "tgrad_train_state", v, sizeof v) >= 0;
    if (rc == 0) tg_safetensors_close(&st);
    if (rc == 0) rc = state ? tg_run_init_from(file, params) : tg_decoder_load(m, file);
    free(file);
    return rc;
}

int tg_decoder_check_data(const tg_token_data *d, const tg_decoder_config *c, int B, int ranks) {
    int T = c->block_size;
    if (d->vocab > c->vocab_size)
        return tg_set_error("the data has tokens up to %d, the model's vocabulary is %d", d->vocab - 1, c->vocab_size),
               -1;
    if (B % ranks != 0) return tg_set_error("--batch %d: the %d ranks must divide it", B, ranks), -1;
    if (d->n_train < T + 1 || tg_token_data_val_batches(d, B, T) < 1)
        return tg_set_error("%lld tokens: the training split needs more than --block %d, the validation split "
                            "(10%%) at least --batch x --block = %d",
                            (long long)d->n, T, B * T),
               -1;
    return 0;
}

char *tg_run_tokens(const char *dir, const char *data, const tg_tokenizer *tok, bool resume) {
    size_t n = data ? strlen(data) : 0;
    struct stat sb;
    char *path = tg_run_path(dir, "tokens.npy");
    if (!path || (resume && lstat(path, &sb) == 0)) return path; /* the run's own, whatever --data's path meant */
    if (data && n > 4 && strcmp(data + n - 4, ".npy") == 0) return free(path), strdup(data);
    if (tg_dist_rank() != 0) return path; /* rank 0 writes it (a barrier follows) */
    if (tg_run_mkdir(dir) != 0) return free(path), NULL;
    char *corpus = data ? NULL : tg_run_path(dir, "fortunes.txt");
    const char *text = data ? data : corpus;
    int64_t k = data ? 0 : corpus ? tg_fortunes_corpus(NULL, corpus) : -1, count;
    if (k > 0) printf("corpus: %lld fortunes from %s -> %s\n", (long long)k, TG_FORTUNES_DIR, corpus);
    int rc = k < 0                    ? -1
             : !tg_tokenizer_bpe(tok) ? tg_tokens_from_text(text, path)
                                      : tg_tokenizer_encode_file(tok, text, path, &n, &count);
    if (rc == 0 && tg_tokenizer_bpe(tok))
        printf("tokenized %s: %zu bytes -> %lld tokens (%.2f bytes a token)\n", text, n, (long long)count,
               (double)n / (double)(count ? count : 1));
    free(corpus);
    if (rc != 0) free(path);
    return rc == 0 ? path : NULL;
}

double tg_tokenizer_bytes_per_token(const tg_tokenizer *t, const tg_token_data *d, int n_batches, int B, int T, int *x,
                                    int *y) {
    double bytes = 0;
    for (int i = 0; i < n_batches; i++) {
        tg_token_data_val_batch(d, i, B, T, x, y);
        for (int k = 0; k < B * T; k++) {
            size_t len = 0;
            tg_tokenizer_token(t, y[k], &len);
            bytes += (double)len;
        }
    }
    return bytes / ((double)n_batches * B * T);
}

/* ids as text on stdout: control bytes but newline and tab as \xNN, always
 * (a terminal or a file alike): a byte-level model samples any byte, and
 * ESC or CR would drive the terminal. samples.jsonl keeps the raw bytes. */
static void print_tokens(const tg_tokenizer *t, const int *ids, int n) {
    for (int i = 0; i < n; i++) {
        size_t len = 1;
        const unsigned char *s = tg_tokenizer_token(t, ids[i], &len);
        for (size_t k = 0; s && k < len; k++)
            if ((s[k] < 0x20 && s[k] != '\n' && s[k] != '\t') || s[k] == 0x7f)
                printf("\\x%02x", s[k]);
            else
                putchar(s[k]);
    }
}

int tg_decoder_print_sample(tg_decoder *m, const tg_tokenizer *tok, const char *prompt, int n_new, double temperature,
                            int top_k, uint64_t seed) {
    if (!*prompt) prompt = "\n"; /* "": one newline, as nanoGPT's start */
    int64_t n;
    int *ids = tg_tokenizer_encode(tok, (const unsigned char *)prompt, strlen(prompt), &n), rc = -1;
    int *out = malloc(sizeof(int) * (size_t)(n_new + 1));
    if (ids && out && n > 0 &&
        tg_decoder_generate(m, ids, (int)n, n_new, (tg_real)temperature, top_k, seed, out) == 0) {
        printf("--- sample (temperature %g, top-k %d, seed %d) ---\n", temperature, top_k, (int)seed);
        print_tokens(tok, ids, (int)n);
        print_tokens(tok, out, n_new);
        printf("\n---\n");
        rc = 0;
    } else if (ids && out) {
        rc = -1; /* the error recorded */
    } else {
        tg_set_error("out of memory for the sample");
    }
    free(ids), free(out);
    return rc;
}

int tg_decoder_write_logits(tg_decoder *m, const tg_tokenizer *tok, const char *prompt, const char *path) {
    int64_t k;
    int *ids = tg_tokenizer_encode(tok, (const unsigned char *)prompt, strlen(prompt), &k), n = (int)k;
    if (!ids || !n) return free(ids), tg_set_error("--logits needs a non-empty --prompt"), -1;
    tg_decoder_train(m, false);
    bool grad = tg_set_grad_enabled(false);
    tg_scope_begin();
    tg_tensor *logits = tg_decoder_forward(m, ids, 1, n);
    int64_t bad = -1; /* the first logit that is not finite: refused, not written (weights that overflow float) */
    for (int64_t i = 0; logits && bad < 0 && i < (int64_t)n * m->cfg.vocab_size; i++)
        if (!isfinite((double)logits->data[i])) bad = i;
    int rc = logits && bad < 0 && tg_npy_save(path, logits) == 0 ? 0 : -1;
    if (bad >= 0)
        tg_set_error("--logits: logit %lld (position %lld, token %lld) is %g: the model's weights overflow; "
                     "nothing written to %s",
                     (long long)bad, (long long)(bad / m->cfg.vocab_size), (long long)(bad % m->cfg.vocab_size),
                     (double)logits->data[bad], path);
    else if (rc == 0)
        printf("wrote %s: logits [1, %d, %d] of the prompt\n", path, n, m->cfg.vocab_size);
    tg_scope_end();
    tg_set_grad_enabled(grad);
    free(ids);
    return rc;
}

/* ---- after each checkpoint ------------------------------------------------- */
static int draw_losses(const tg_decoder_outputs *o) {
    const tg_decoder_config *c = &o->m->cfg;
    char *path = tg_run_path(tg_run_dir(o->run), "lm_loss.png"), title[160];
    const char *name = o->data ? strrchr(o->data, '/') : NULL;
    snprintf(title, sizeof title, "GPT (%d layers, d %d, T %d, %s positions) on %.50s: loss per %s", c->n_layer,
             c->n_embd, c->block_size, tg_pe_kind_name(c->pos),
             name      ? name + 1
             : o->data ? o->data
                       : "Debian's fortunes",
             c->vocab_size == TG_BYTE_VOCAB ? "byte" : "token");
    int rc = path ? tg_run_draw_losses(o->run, path, title, "cross-entropy (nats)") : -1;
    if (rc != 0) fprintf(stderr, "%s: %s\n", o->prog, path ? tg_last_error() : "out of memory");
    free(path);
    return rc;
}

/* The attention weights of every layer and head for the first validation window. */
static tg_tensor *decoder_weights(const void *m, int l, int h) { return tg_decoder_attention_weights(m, l, h); }
static int draw_attention(const tg_decoder_outputs *o) {
    tg_decoder *m = o->m;
    int T = m->cfg.block_size, L = m->cfg.n_layer;
    if (tg_token_data_val_batch(o->d, 0, o->batch, T, o->x, o->y) != 0) return -1;
    tg_decoder_train(m, false);
    tg_decoder_record_attention(m, true);
    bool grad = tg_set_grad_enabled(false);
    tg_scope_begin();
    char *path = tg_run_path(tg_run_dir(o->run), "lm_attention.png"), title[128];
    snprintf(title, sizeof title, "Causal attention weights (%s positions), one validation window (rows: layers 1..%d)",
             tg_pe_kind_name(m->cfg.pos), L);
    int rc = path && tg_decoder_forward(m, o->x, 1, T) ? 0 : -1;
    if (rc == 0 && (rc = tg_figure_attention(path, title, m, decoder_weights, L, m->cfg.n_head)) != 0)
        fprintf(stderr, "%s: %s\n", o->prog, tg_last_error());
    tg_scope_end();
    tg_set_grad_enabled(grad);
    tg_decoder_record_attention(m, false);
    tg_decoder_train(m, true);
    free(path);
    return rc;
}

/* A short sample into the run's samples.jsonl (a few tokens past a window,
 * so that it costs little: each step past the block is a whole forward,
 * nn/decoder.h), then report.html. */
static int report(tg_decoder_outputs *o, int64_t step) {
    const char *dir = tg_run_dir(o->run);
    if (!o->started && !o->resumed) { /* a new run in an old folder starts its samples afresh */
        char *old = tg_run_path(dir, "samples.jsonl");
        if (old) remove(old);
        free(old);
    }
    o->started = true;
    const char *prompt = o->prompt[0] ? o->prompt : "\n";
    int64_t n;
    int n_new = o->tokens < 160 ? o->tokens : 160,
        *p = tg_tokenizer_encode(o->tok, (const unsigned char *)prompt, strlen(prompt), &n);
    int *ids = p ? malloc(sizeof(int) * (size_t)(n + n_new + 1)) : NULL;
    int rc = ids && n > 0 ? 0 : -1;
    if (rc == 0) memcpy(ids, p, sizeof(int) * (size_t)n);
    if (rc == 0)
        rc = tg_decoder_generate(o->m, ids, (int)n, n_new, (tg_real)o->temperature, o->top_k, o->seed, ids + n);
    size_t len = (size_t)(n + n_new);
    int64_t bytes = rc == 0 ? tg_tokenizer_decode(o->tok, ids, len, NULL, 0) : -1;
    char *text = bytes >= 0 ? malloc((size_t)bytes + 1) : NULL;
    rc = text && tg_tokenizer_decode(o->tok, ids, len, (unsigned char *)text, (size_t)bytes) >= 0 ? 0 : -1;
    if (rc == 0) rc = tg_report_append_sample(dir, step, text, (size_t)bytes);
    if (rc == 0) rc = tg_decoder_report(dir, NULL, o->m, o->tok, o->d, o->batch, step);
    if (rc != 0) fprintf(stderr, "%s: report: %s\n", o->prog, tg_last_error() ? tg_last_error() : "out of memory");
    free(p), free(ids), free(text);
    return rc;
}

int tg_decoder_outputs_save(void *ctx, int64_t step) {
    tg_decoder_outputs *o = ctx;
    char *meta = tg_tokenizer_meta(o->tok, NULL); /* the model file: the model and its tokenizer */
    int rc = meta ? tg_decoder_save(o->m, o->model_path, meta) : -1;
    free(meta);
    if (rc != 0) return -1;
    o->drew = draw_losses(o) == 0 && draw_attention(o) == 0;
    report(o, step);
    return 0; /* a figure that cannot be drawn is said, and the run goes on */
}
