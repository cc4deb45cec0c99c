/* lm's tokenizer: the library's (tg_tokenizer, train/model_file.h: bytes or
 * a byte-level BPE, kept in a checkpoint's metadata), under the names lm
 * uses. Validation loss per token depends on the vocabulary; bits per byte
 * do not: bpb = (nats per token) / ln 2 * (tokens / bytes) over the same
 * validation targets, so byte and BPE runs compare. */
#ifndef LM_TOKENIZER_H
#define LM_TOKENIZER_H

#include "tgrad.h"

typedef struct {
    tg_tokenizer *t;
    const tg_bpe *bpe; /* NULL: bytes */
} lm_tok;

static inline int lm_tok_set(lm_tok *t, tg_tokenizer *tok) {
    *t = (lm_tok){tok, tg_tokenizer_bpe(tok)};
    return tok ? 0 : -1;
}
static inline int lm_tok_vocab(const lm_tok *t) { return tg_tokenizer_vocab_size(t->t); }
static inline void lm_tok_free(lm_tok *t) {
    tg_tokenizer_free(t->t);
    *t = (lm_tok){0};
}
/* --tokenizer: bytes, gpt2, a directory holding encoder.json and vocab.bpe, or a .tiktoken file. */
static inline int lm_tok_open(lm_tok *t, const char *spec) { return lm_tok_set(t, tg_tokenizer_open(spec)); }
static inline int lm_tok_from_file(lm_tok *t, const tg_safetensors *st, const char *path) {
    return lm_tok_set(t, tg_tokenizer_read(st, path));
}
/* buf (a JSON object) with the tokenizer's keys: malloc'd, NULL when out of memory. */
static inline char *lm_tok_meta(const lm_tok *t, char *buf) { return tg_tokenizer_meta(t->t, buf); }
static inline int *lm_tok_encode(const lm_tok *t, const unsigned char *text, size_t n, int64_t *count) {
    return tg_tokenizer_encode(t->t, text, n, count);
}

/* A text file into the run's token file, with the tokenizer. */
static inline int lm_tok_encode_file(const lm_tok *t, const char *text_path, const char *tokens_path) {
    size_t n;
    int64_t count;
    if (!t->bpe) return tg_tokens_from_text(text_path, tokens_path);
    int rc = tg_tokenizer_encode_file(t->t, text_path, tokens_path, &n, &count);
    if (rc == 0)
        printf("tokenized %s: %zu bytes -> %lld tokens (%.2f bytes a token)\n", text_path, n, (long long)count,
               (double)n / (double)(count ? count : 1));
    return rc;
}

/* Prints ids as text (a byte-level BPE decodes to any bytes). The printed sample escapes control bytes but newline and tab as \xNN,
 * always (a terminal or a file alike): a byte-level model samples any byte,
 * and ESC or CR would drive the terminal. samples.jsonl keeps the raw bytes. */
static inline void lm_tok_print(const lm_tok *t, const int *ids, int n) {
    for (int i = 0; i < n; i++) {
        size_t len = 1;
        const unsigned char *s = tg_tokenizer_token(t->t, ids[i], &len);
        for (size_t k = 0; s && k < len; k++)
            if ((s[k] < 0x20 && s[k] != '\n' && s[k] != '\t') || s[k] == 0x7f)
                printf("\\x%02x", s[k]);
            else
                putchar(s[k]);
    }
}

/* Bytes per token over the first n_batches validation batches' targets
 * (what the validation loss averages over). */
static inline double lm_tok_bytes_per_token(const lm_tok *t, const tg_token_data *d, int n_batches, int B, int T,
                                            int *x, int *y) {
    if (!t->bpe) return 1;
    double bytes = 0;
    for (int i = 0; i < n_batches; i++) {
        tg_token_data_val_batch(d, i, B, T, x, y);
        for (int k = 0; k < B * T; k++) {
            size_t len = 0;
            tg_bpe_token(t->bpe, y[k], &len);
            bytes += (double)len;
        }
    }
    return bytes / ((double)n_batches * B * T);
}

#endif
