/* The lm program's model checkpoints: what the metadata holds and how a
 * model is rebuilt from a file, in a header so that the fuzz harness
 * (tests/fuzz/fuzz_lm_load.c) runs exactly the code the program runs.
 *
 * A checkpoint is untrusted input. The model's sizes are read from the
 * metadata under nanoGPT's GPTConfig names
 *   vocab_size, block_size, n_layer, n_head, n_embd, bias, gelu
 * and tgrad's position kind pe (learned, relative, rope or alibi; absent:
 * learned, nanoGPT's)
 * by the flags' rules (cli_set: whole strings, integers, ranges), and
 * checked against the file's tensors before any model is built, so a
 * crafted file can make the program allocate no more than the file itself
 * holds. */
#ifndef LM_MODEL_H
#define LM_MODEL_H

#include "cli.h"
#include "lm_tokenizer.h"
#include "tgrad.h"

/* Every dropout layer keeps its own generator, and a training state holds
 * each one by name (TG_TRAIN_MAX_RNGS in all): 1 + 3 per layer + the data. */
enum { LM_MAX_LAYERS = 20, LM_MAX_RNGS = 2 + 3 * LM_MAX_LAYERS };

typedef struct {
    int vocab, block, layers, heads, dim;
    bool bias;
    const char *gelu; /* "tanh" or "erf" */
    const char *pe;   /* tg_pe_kind_name's: the decoder's kinds (all but fixed) */
} lm_config;

/* The decoder's position kind of name (tg_pe_kind_name's spelling; the
 * fixed table is the encoder's alone), or -1. */
static int lm_pe_kind(const char *name) {
    for (int k = 0; tg_pe_kind_name((tg_pe_kind)k); k++)
        if (k != TG_PE_FIXED && strcmp(name, tg_pe_kind_name((tg_pe_kind)k)) == 0) return k;
    return -1;
}

/* The metadata of a model file (tg_decoder_save), also the first keys of a
 * training state's. */
static void model_meta(char *buf, size_t cap, const lm_config *c) {
    snprintf(buf, cap,
             "{\"vocab_size\":\"%d\",\"block_size\":\"%d\",\"n_layer\":\"%d\",\"n_head\":\"%d\",\"n_embd\":\"%d\","
             "\"bias\":\"%s\",\"gelu\":\"%s\",\"pe\":\"%s\"}",
             c->vocab, c->block, c->layers, c->heads, c->dim, c->bias ? "true" : "false", c->gelu, c->pe);
}

static bool has_shape(const tg_safetensors *st, const char *name, int rows, int cols) {
    int i = tg_safetensors_find(st, name);
    if (i < 0) return false;
    const tg_st_entry *e = &st->entries[i];
    return e->ndim == 2 && e->shape[0] == rows && e->shape[1] == cols;
}

/* Checks tensor prefix+name exists with shape (rows, cols). */
static int expect_shape(const tg_safetensors *st, const char *path, const char *prefix, const char *name, int rows,
                        int cols) {
    char full[TG_PARAM_NAME_MAX + 8];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    int i = tg_safetensors_find(st, full);
    if (i < 0) {
        tg_set_error("%s: no tensor '%s'", path, full);
        return -1;
    }
    if (!has_shape(st, full, rows, cols)) {
        char got[64];
        const tg_st_entry *e = &st->entries[i];
        tg_set_error("%s: tensor '%s' has shape %s, but the metadata says (%d,%d)", path, full,
                     tg_shape_str(got, e->ndim, e->shape), rows, cols);
        return -1;
    }
    return 0;
}

/* Reads metadata key into v; -1 with the reason recorded when missing,
 * empty or too long. */
static int meta_value(const tg_safetensors *st, const char *path, const char *key, char *v, size_t cap) {
    long len = tg_safetensors_meta(st, key, v, cap);
    if (len <= 0 || len >= (long)cap) {
        tg_set_error("%s: metadata '%s' is %s", path, key, len < 0 ? "missing" : len == 0 ? "empty" : "too long");
        return -1;
    }
    return 0;
}

/* Reads the model's sizes from st's metadata into c and checks them against
 * the tensors (names under prefix: "" for a model file, "model." for a
 * training state) before anything is allocated for them. */
static int config_from_file(const tg_safetensors *st, const char *path, const char *prefix, lm_config *c) {
    *c = (lm_config){0};
    const cli_opt keys[] = {
        {"vocab_size", CLI_INT, &c->vocab, "", 2, 65536},
        {"block_size", CLI_INT, &c->block, "", 2, 4096},
        {"n_layer", CLI_INT, &c->layers, "", 1, LM_MAX_LAYERS},
        {"n_head", CLI_INT, &c->heads, "", 1, 256},
        {"n_embd", CLI_INT, &c->dim, "", 1, 8192},
    };
    char v[64], why[128];
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        if (meta_value(st, path, keys[k].name, v, sizeof v)) return -1;
        if (!cli_set(&keys[k], v, why, sizeof why)) {
            tg_set_error("%s: metadata '%s': %s", path, keys[k].name, why);
            return -1;
        }
    }
    if (meta_value(st, path, "bias", v, sizeof v)) return -1;
    if (strcmp(v, "true") != 0 && strcmp(v, "false") != 0) {
        tg_set_error("%s: metadata 'bias' is '%s'; expected true or false", path, v);
        return -1;
    }
    c->bias = strcmp(v, "true") == 0;
    if (meta_value(st, path, "gelu", v, sizeof v)) return -1;
    c->gelu = strcmp(v, "tanh") == 0 ? "tanh" : strcmp(v, "erf") == 0 ? "erf" : NULL;
    if (!c->gelu) {
        tg_set_error("%s: metadata 'gelu' is '%s'; expected tanh or erf", path, v);
        return -1;
    }
    c->pe = tg_pe_kind_name(TG_PE_LEARNED);
    if (tg_safetensors_meta(st, "pe", v, sizeof v) >= 0) { /* absent: nanoGPT's learned table */
        int kind = lm_pe_kind(v);
        if (kind < 0) {
            tg_set_error("%s: metadata 'pe' is '%.20s'; expected learned, none, relative, rope or alibi", path, v);
            return -1;
        }
        c->pe = tg_pe_kind_name((tg_pe_kind)kind);
    }
    if (c->dim % c->heads != 0) {
        tg_set_error("%s: metadata: n_head %d does not divide n_embd %d", path, c->heads, c->dim);
        return -1;
    }
    /* The tied weight under either of its names (safetensors.torch.save_model keeps lm_head.weight). */
    char name[TG_PARAM_NAME_MAX + 8];
    snprintf(name, sizeof name, "%stransformer.wte.weight", prefix);
    const char *wte = tg_safetensors_find(st, name) >= 0 ? "transformer.wte.weight" : "lm_head.weight";
    if (expect_shape(st, path, prefix, wte, c->vocab, c->dim)) return -1;
    if (lm_pe_kind(c->pe) == TG_PE_LEARNED &&
        expect_shape(st, path, prefix, "transformer.wpe.weight", c->block, c->dim))
        return -1;
    char blk[64];
    snprintf(blk, sizeof blk, "transformer.h.%d.mlp.c_fc.weight", c->layers - 1);
    if (expect_shape(st, path, prefix, blk, 4 * c->dim, c->dim)) return -1;
    snprintf(name, sizeof name, "%stransformer.h.%d.ln_1.weight", prefix, c->layers);
    if (tg_safetensors_find(st, name) >= 0) {
        tg_set_error("%s: the file has more blocks than the metadata's n_layer %d", path, c->layers);
        return -1;
    }
    return 0;
}
static tg_decoder_config decoder_config(const lm_config *c, double dropout) {
    tg_decoder_config dc = tg_decoder_config_default(c->vocab, c->block, c->layers, c->heads, c->dim);
    dc.bias = c->bias;
    dc.gelu = strcmp(c->gelu, "erf") == 0 ? TG_DEC_GELU_ERF : TG_DEC_GELU_TANH;
    dc.pos = (tg_pe_kind)lm_pe_kind(c->pe);
    dc.dropout = (tg_real)dropout;
    return dc;
}
/* What a file that is not a checkpoint is, for the message (lm writes
 * token files, texts, logs and figures into its run folder too). */
static const char *lm_file_kind(const char *path) {
    unsigned char b[8] = {0};
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(b, 1, sizeof b, f) : 0;
    if (f) fclose(f);
    if (n >= 6 && memcmp(b, "\x93NUMPY", 6) == 0) return "a .npy array (a token file?)";
    if (n >= 4 && memcmp(b, "\x89PNG", 4) == 0) return "a PNG image";
    if (n >= 2 && memcmp(b, "{\"", 2) == 0) return "a JSON log";
    return n ? "not a safetensors checkpoint" : "empty or unreadable";
}

/* --load's model: a run folder (its train_state.safetensors), a training
 * state or best.safetensors ("model." tensors), or a model file
 * (lm.safetensors, nanoGPT's names): sizes from the metadata, then the
 * weights (strict). NULL with the reason recorded; nothing is left
 * allocated then. */
static tg_decoder *lm_load(const char *path, lm_config *c, lm_tok *tok) {
    char *file = tg_run_checkpoint_of(path), v[8];
    tg_safetensors st;
    if (tok) *tok = (lm_tok){0};
    if (!file || tg_safetensors_open(file, &st) != 0) {
        if (file && access(file, R_OK) == 0)
            tg_set_error("%s is %s; --load takes a run folder, its train_state.safetensors, best.safetensors or "
                         "lm.safetensors",
                         file, lm_file_kind(file));
        free(file);
        return NULL;
    }
    bool state = tg_safetensors_meta(&st, "tgrad_train_state", v, sizeof v) >= 0;
    int rc = config_from_file(&st, file, state ? "model." : "", c);
    if (rc == 0 && tok && lm_tok_from_file(tok, &st, file) != 0) rc = -1;
    if (rc == 0 && tok && lm_tok_vocab(tok) > c->vocab)
        rc = -1, tg_set_error("%s: its tokenizer has %d tokens, its model %d", file, lm_tok_vocab(tok), c->vocab);
    tg_safetensors_close(&st);
    tg_rng rng = tg_rng_new(0);
    tg_decoder_config dc = rc == 0 ? decoder_config(c, 0) : (tg_decoder_config){0};
    tg_decoder *m = rc == 0 ? tg_decoder_new(&dc, &rng) : NULL;
    tg_params p;
    tg_params_init(&p);
    if (m && (state ? tg_decoder_params(m, &p, NULL) || tg_run_init_from(file, &p) : tg_decoder_load(m, file))) {
        tg_decoder_free(m);
        m = NULL;
    }
    tg_params_free(&p);
    free(file);
    if (!m && tok) lm_tok_free(tok);
    return m;
}

#endif
