/* Tokenizers and model files that describe themselves (model_file.h): the
 * bytes-or-BPE choice, the vocabulary kept in a checkpoint's metadata, and
 * a decoder rebuilt from its file alone. */
#include "model_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../io/file.h"
#include "report.h"
#include "run.h"
#include "train.h"

struct tg_tokenizer {
    tg_bpe *bpe; /* NULL: bytes */
    char *text;  /* the BPE's ranks in tiktoken's format (what a checkpoint keeps) */
    size_t len;
};

tg_tokenizer *tg_tokenizer_from_bpe(tg_bpe *b) {
    tg_tokenizer *t = calloc(1, sizeof *t);
    if (t && b && !(t->text = tg_bpe_tiktoken_text(b, &t->len))) free(t), t = NULL;
    if (!t) {
        tg_bpe_free(b);
        if (!tg_last_error()) tg_set_error("tokenizer: out of memory");
        return NULL;
    }
    t->bpe = b;
    return t;
}

tg_tokenizer *tg_tokenizer_open(const char *spec) {
    if (!spec) {
        tg_set_error("tokenizer_open: NULL spec");
        return NULL;
    }
    if (strcmp(spec, "bytes") == 0) return tg_tokenizer_from_bpe(NULL);
    tg_bpe *b = tg_bpe_load(spec);
    return b ? tg_tokenizer_from_bpe(b) : NULL;
}

tg_tokenizer *tg_tokenizer_read(const tg_safetensors *st, const char *path) {
    if (!st) {
        tg_set_error("tokenizer_read: NULL file");
        return NULL;
    }
    path = path ? path : "model";
    char kind[16] = "bytes";
    long n = tg_safetensors_meta(st, "tokenizer", kind, sizeof kind);
    if (n < 0 || strcmp(kind, "bytes") == 0) return tg_tokenizer_from_bpe(NULL);
    if (strcmp(kind, "bpe") != 0) {
        tg_set_error("%s: metadata 'tokenizer' is '%.15s'; expected bytes or bpe", path, kind);
        return NULL;
    }
    n = tg_safetensors_meta(st, "tokenizer.tiktoken", NULL, 0);
    char *text = n > 0 ? malloc((size_t)n + 1) : NULL;
    if (!text) {
        tg_set_error("%s: metadata 'tokenizer' is 'bpe' without its vocabulary 'tokenizer.tiktoken'", path);
        return NULL;
    }
    tg_safetensors_meta(st, "tokenizer.tiktoken", text, (size_t)n + 1);
    tg_bpe *b = tg_bpe_parse_tiktoken((const unsigned char *)text, (size_t)n, path);
    free(text);
    return b ? tg_tokenizer_from_bpe(b) : NULL;
}

char *tg_tokenizer_meta(const tg_tokenizer *t, const char *json) {
    json = json ? json : "{}";
    size_t n = strlen(json);
    while (n > 0 && (json[n - 1] == ' ' || json[n - 1] == '\n')) n--;
    if (!t || n < 2 || json[n - 1] != '}') {
        tg_set_error("tokenizer_meta: %s", !t ? "NULL tokenizer" : "the metadata is not a JSON object");
        return NULL;
    }
    char *out = malloc(n + 2 * t->len + 64);
    if (!out) {
        tg_set_error("tokenizer_meta: out of memory");
        return NULL;
    }
    size_t k = n - 1; /* up to the closing brace */
    memcpy(out, json, k);
    bool empty = true; /* "{}": no comma before the first key */
    for (size_t i = 1; i < k && empty; i++) empty = json[i] == ' ' || json[i] == '\n';
    k += (size_t)sprintf(out + k, "%s\"tokenizer\":\"%s\"", empty ? "" : ",", t->bpe ? "bpe" : "bytes");
    if (t->bpe) {
        k += (size_t)sprintf(out + k, ",\"tokenizer.tiktoken\":\"");
        for (size_t i = 0; i < t->len; i++) /* base64, digits, spaces and newlines */
            t->text[i] == '\n' ? (out[k++] = '\\', out[k++] = 'n') : (out[k++] = t->text[i]);
        out[k++] = '"';
    }
    out[k++] = '}', out[k] = 0;
    return out;
}

const char *tg_tokenizer_name(const tg_tokenizer *t) { return !t ? NULL : t->bpe ? "bpe" : "bytes"; }

int tg_tokenizer_vocab_size(const tg_tokenizer *t) {
    return !t ? 0 : t->bpe ? tg_bpe_vocab_size(t->bpe) : TG_BYTE_VOCAB;
}

const tg_bpe *tg_tokenizer_bpe(const tg_tokenizer *t) { return t ? t->bpe : NULL; }

/* The 256 bytes, each its own token. */
static const unsigned char BYTES[256] = {
#define B4(i)  (i), (i) + 1, (i) + 2, (i) + 3
#define B16(i) B4(i), B4((i) + 4), B4((i) + 8), B4((i) + 12)
#define B64(i) B16(i), B16((i) + 16), B16((i) + 32), B16((i) + 48)
    B64(0), B64(64), B64(128), B64(192)};

const unsigned char *tg_tokenizer_token(const tg_tokenizer *t, int id, size_t *len) {
    if (!t) return NULL;
    if (t->bpe) return tg_bpe_token(t->bpe, id, len);
    if (id < 0 || id >= TG_BYTE_VOCAB) return NULL;
    if (len) *len = 1;
    return &BYTES[id];
}

int tg_tokenizer_hash(const tg_tokenizer *t, char hex[17]) {
    if (!t || !hex) {
        tg_set_error("tokenizer_hash: NULL %s", !t ? "tokenizer" : "output");
        return -1;
    }
    const char *s = t->bpe ? t->text : "bytes";
    size_t n = t->bpe ? t->len : 5;
    uint64_t h = 14695981039346656037ull; /* FNV-1a, 64 bits */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    snprintf(hex, 17, "%016llx", (unsigned long long)h);
    return 0;
}

int *tg_tokenizer_encode(const tg_tokenizer *t, const unsigned char *text, size_t n, int64_t *count) {
    if (!t || (!text && n) || !count) {
        tg_set_error("tokenizer_encode: NULL %s", !t ? "tokenizer" : !count ? "count" : "text");
        return NULL;
    }
    int *ids = malloc(sizeof(int) * (n ? n : 1)); /* a token is one byte or more */
    if (!ids) {
        tg_set_error("tokenizer_encode: out of memory for %zu ids", n);
        return NULL;
    }
    *count = t->bpe ? tg_bpe_encode(t->bpe, text, n, 0, ids) : tg_bytes_encode(text, n, ids) ? -1 : (int64_t)n;
    if (*count < 0) free(ids), ids = NULL;
    return ids;
}

int64_t tg_tokenizer_decode(const tg_tokenizer *t, const int *ids, size_t n, unsigned char *out, size_t cap) {
    if (!t || (!ids && n)) {
        tg_set_error("tokenizer_decode: NULL %s", !t ? "tokenizer" : "ids");
        return -1;
    }
    if (t->bpe) return out ? tg_bpe_decode(t->bpe, ids, n, out, cap) : tg_bpe_decoded_size(t->bpe, ids, n);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= TG_BYTE_VOCAB) {
            tg_set_error("tokenizer_decode: id %d at %zu is not a byte (0..255)", ids[i], i);
            return -1;
        }
    if (out && cap < n) {
        tg_set_error("tokenizer_decode: %zu ids need %zu bytes, the output holds %zu", n, n, cap);
        return -1;
    }
    if (out) tg_bytes_decode(ids, n, out);
    return (int64_t)n;
}

int tg_tokenizer_encode_file(const tg_tokenizer *t, const char *text_path, const char *tokens_path, size_t *bytes,
                             int64_t *count) {
    if (!t || !text_path || !tokens_path) {
        tg_set_error("tokenizer_encode_file: NULL %s", !t ? "tokenizer" : !text_path ? "text path" : "tokens path");
        return -1;
    }
    unsigned char *text;
    size_t n;
    int64_t k = 0;
    if (tg_read_file(text_path, "tokenizer_encode_file", &text, &n) != 0) return -1;
    int *ids = tg_tokenizer_encode(t, text, n, &k);
    tg_sys_free(text);
    int rc = ids ? tg_tokens_save(tokens_path, ids, k, tg_tokenizer_vocab_size(t)) : -1;
    if (rc == 0) rc = tg_tokens_tie(tokens_path, t);
    free(ids);
    if (bytes) *bytes = n;
    if (count) *count = k;
    return rc;
}

/* "<path>.tokenizer", malloc'd. */
static char *sidecar_of(const char *tokens_path) {
    size_t n = strlen(tokens_path);
    char *p = malloc(n + 11);
    if (p)
        memcpy(p, tokens_path, n), memcpy(p + n, ".tokenizer", 11);
    else
        tg_set_error("tokens_tie: out of memory");
    return p;
}

/* t's sidecar line: "<name> <vocab size> <hash>". */
static int tie_line(const tg_tokenizer *t, char *line, size_t cap) {
    char hex[17];
    if (tg_tokenizer_hash(t, hex) != 0) return -1;
    snprintf(line, cap, "%s %d %s", tg_tokenizer_name(t), tg_tokenizer_vocab_size(t), hex);
    return 0;
}

int tg_tokens_tie(const char *tokens_path, const tg_tokenizer *t) {
    char line[64], *side = tokens_path && t ? sidecar_of(tokens_path) : NULL;
    if (!side) {
        if (!tokens_path || !t) tg_set_error("tokens_tie: NULL %s", !t ? "tokenizer" : "path");
        return -1;
    }
    tie_line(t, line, sizeof line);
    tg_atomic_file af;
    int rc = tg_atomic_begin(&af, side, "tokens_tie");
    if (rc == 0 && fprintf(af.f, "%s\n", line) < 0) {
        tg_atomic_abort(&af);
        tg_set_error("tokens_tie: %s: write failed", side);
        rc = -1;
    } else if (rc == 0)
        rc = tg_atomic_commit(&af, "tokens_tie");
    free(side);
    return rc;
}

int tg_tokens_check(const char *tokens_path, const tg_tokenizer *t) {
    char want[64], got[64] = "", *side = tokens_path && t ? sidecar_of(tokens_path) : NULL;
    if (!side) {
        if (!tokens_path || !t) tg_set_error("tokens_check: NULL %s", !t ? "tokenizer" : "path");
        return -1;
    }
    FILE *f = fopen(side, "r");
    free(side);
    if (!f) return 0; /* not made by tgrad: nothing to check */
    bool read = fgets(got, sizeof got, f) != NULL;
    fclose(f);
    got[strcspn(got, "\r\n")] = 0;
    tie_line(t, want, sizeof want);
    if (read && strcmp(got, want) == 0) return 0;
    char name[16] = "?", hash[24] = "?";
    int vocab = 0;
    if (sscanf(got, "%15s %d %23s", name, &vocab, hash) != 3) snprintf(name, sizeof name, "?");
    tg_set_error("%s was made with the %s tokenizer of %d ids (hash %s), not this %s tokenizer of %d ids (hash %s): "
                 "its ids would decode to other text",
                 tokens_path, name, vocab, hash, tg_tokenizer_name(t), tg_tokenizer_vocab_size(t),
                 want + strlen(want) - 16);
    return -1;
}

void tg_tokenizer_free(tg_tokenizer *t) {
    if (!t) return;
    tg_bpe_free(t->bpe);
    free(t->text);
    free(t);
}

/* ---- decoder model files ---------------------------------------------------- */

/* What a file that is not a checkpoint is, for the message (a run folder
 * holds token files, texts, logs and figures too). */
static const char *file_kind(const char *path) {
    unsigned char b[8] = {0};
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(b, 1, sizeof b, f) : 0;
    if (f) fclose(f);
    if (n >= 6 && memcmp(b, "\x93NUMPY", 6) == 0) return "a .npy array (a token file?)";
    if (n >= 4 && memcmp(b, "\x89PNG", 4) == 0) return "a PNG image";
    if (n >= 2 && memcmp(b, "{\"", 2) == 0) return "a JSON log";
    return n ? "not a safetensors checkpoint" : "empty or unreadable";
}

tg_decoder *tg_decoder_open(const char *path, tg_tokenizer **tok) {
    if (tok) *tok = NULL;
    if (!path) {
        tg_set_error("decoder_open: NULL path");
        return NULL;
    }
    char *file = tg_run_checkpoint_of(path), v[8];
    tg_safetensors st;
    if (!file || tg_safetensors_open(file, &st) != 0) {
        if (file && access(file, R_OK) == 0)
            tg_set_error("%s is %s; decoder_open takes a run folder, its train_state.safetensors, "
                         "best.safetensors or a model file (lm.safetensors)",
                         file, file_kind(file));
        else if (!file)
            tg_set_error("decoder_open: out of memory");
        free(file);
        return NULL;
    }
    bool state = tg_safetensors_meta(&st, "tgrad_train_state", v, sizeof v) >= 0;
    tg_decoder_config c;
    int rc = tg_decoder_config_read(&st, file, state ? "model." : "", &c);
    tg_tokenizer *t = rc == 0 && tok ? tg_tokenizer_read(&st, file) : NULL;
    if (rc == 0 && tok && !t) rc = -1;
    if (rc == 0 && t && tg_tokenizer_vocab_size(t) > c.vocab_size)
        rc = -1,
        tg_set_error("%s: its tokenizer has %d tokens, its model %d", file, tg_tokenizer_vocab_size(t), c.vocab_size);
    tg_safetensors_close(&st);
    tg_rng rng = tg_rng_new(0);
    tg_decoder *m = rc == 0 ? tg_decoder_new(&c, &rng) : NULL;
    tg_params p;
    tg_params_init(&p);
    if (m && (state ? tg_decoder_params(m, &p, NULL) || tg_run_init_from(file, &p) : tg_decoder_load(m, file))) {
        tg_decoder_free(m);
        m = NULL;
    }
    tg_params_free(&p);
    free(file);
    tg_decoder_train(m, false); /* a model opened is for use: dropout off until the caller trains it */
    if (m && tok)
        *tok = t;
    else
        tg_tokenizer_free(t);
    return m;
}

int tg_decoder_report(const char *dir, const char *page, tg_decoder *m, const tg_tokenizer *tok, const tg_token_data *d,
                      int B, int64_t step) {
    if (!dir || !m || !d || B < 1) {
        tg_set_error("decoder_report: %s", !dir ? "NULL dir" : !m ? "NULL model" : !d ? "NULL data" : "B < 1");
        return -1;
    }
    const tg_decoder_config *c = &m->cfg;
    char title[200];
    snprintf(title, sizeof title, "lm: GPT, %d layers, %d heads, d %d, T %d, %s positions", c->n_layer, c->n_head,
             c->n_embd, c->block_size, tg_pe_kind_name(c->pos));
    size_t BT = (size_t)B * (size_t)c->block_size;
    int *x = malloc(sizeof(int) * BT), *y = malloc(sizeof(int) * BT);
    tg_report *rep = tg_report_new();
    char *path = page ? strdup(page) : tg_run_path(dir, "report.html");
    int rc = rep && path && x && y ? 0 : (tg_set_error("decoder_report: out of memory"), -1);
    if (rc == 0) rc = tg_token_data_val_batch(d, 0, B, c->block_size, x, y);
    if (rc == 0) rc = tg_report_add_run(rep, dir);
    /* A BPE's tokens as their text (bytes: NULL, the report writes them itself). */
    int V = tok && tok->bpe ? tg_tokenizer_vocab_size(tok) : 0;
    char **text = V ? calloc((size_t)V, sizeof *text) : NULL;
    for (int id = 0; text && id < V; id++) {
        size_t len = 0;
        const unsigned char *b = tg_bpe_token(tok->bpe, id, &len);
        if ((text[id] = malloc(len + 1)))
            memcpy(text[id], b ? (const char *)b : "", b ? len : 0), text[id][b ? len : 0] = 0;
    }
    if (rc == 0 && V && !text) rc = -1, tg_set_error("decoder_report: out of memory");
    if (rc == 0) rc = tg_report_add_decoder(rep, m, x, c->block_size, (const char *const *)text);
    for (int id = 0; text && id < V; id++) free(text[id]);
    free(text);
    if (rc == 0) rc = tg_report_add_samples(rep, dir, step);
    if (rc == 0) rc = tg_report_write(rep, path, title);
    tg_report_free(rep);
    free(path), free(x), free(y);
    return rc;
}
