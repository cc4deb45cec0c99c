/* lm's model files, under the names lm uses: the library reads and writes
 * them (tg_decoder_open, tg_decoder_config_read and _json,
 * train/model_file.h, nn/decoder.h): nanoGPT's GPTConfig names (vocab_size,
 * block_size, n_layer, n_head, n_embd, bias), gelu and tgrad's position
 * kind pe, checked against the tensors before any model is built. */
#ifndef LM_MODEL_H
#define LM_MODEL_H

#include "cli.h"
#include "lm_tokenizer.h"
#include "tgrad.h"

enum { LM_MAX_LAYERS = TG_DECODER_MAX_LAYERS };

typedef struct {
    int vocab, block, layers, heads, dim;
    bool bias;
    const char *gelu; /* "tanh" or "erf" */
    const char *pe;   /* tg_pe_kind_name's: the decoder's kinds (all but fixed) */
} lm_config;

/* The decoder's position kind of name (the fixed table is the encoder's alone), or -1. */
static int lm_pe_kind(const char *name) {
    tg_pe_kind k;
    return tg_pe_kind_parse(name, &k) == 0 && k != TG_PE_FIXED ? (int)k : (tg_clear_error(), -1);
}

static tg_decoder_config decoder_config(const lm_config *c, double dropout) {
    tg_decoder_config dc = tg_decoder_config_default(c->vocab, c->block, c->layers, c->heads, c->dim);
    dc.bias = c->bias;
    dc.gelu = strcmp(c->gelu, "erf") == 0 ? TG_DEC_GELU_ERF : TG_DEC_GELU_TANH;
    dc.pos = (tg_pe_kind)lm_pe_kind(c->pe);
    dc.dropout = (tg_real)dropout;
    return dc;
}
static lm_config lm_config_of(const tg_decoder_config *dc) {
    return (lm_config){dc->vocab_size,
                       dc->block_size,
                       dc->n_layer,
                       dc->n_head,
                       dc->n_embd,
                       dc->bias,
                       dc->gelu == TG_DEC_GELU_ERF ? "erf" : "tanh",
                       tg_pe_kind_name(dc->pos)};
}

/* The metadata of a model file, also the first keys of a training state's. */
static void model_meta(char *buf, size_t cap, const lm_config *c) {
    tg_decoder_config dc = decoder_config(c, 0);
    tg_decoder_config_json(&dc, buf, cap);
}

/* Metadata key into v; -1 with the reason recorded when missing, empty or too long. */
static int meta_value(const tg_safetensors *st, const char *path, const char *key, char *v, size_t cap) {
    long len = tg_safetensors_meta(st, key, v, cap);
    if (len <= 0 || len >= (long)cap) {
        tg_set_error("%s: metadata '%s' is %s", path, key, len < 0 ? "missing" : len == 0 ? "empty" : "too long");
        return -1;
    }
    return 0;
}

/* The model's sizes from st's metadata, checked against the tensors under prefix. */
static int config_from_file(const tg_safetensors *st, const char *path, const char *prefix, lm_config *c) {
    tg_decoder_config dc;
    if (tg_decoder_config_read(st, path, prefix, &dc) != 0) return -1;
    *c = lm_config_of(&dc);
    return 0;
}

/* --load's model: a run folder, a training state, best.safetensors or lm.safetensors. */
static tg_decoder *lm_load(const char *path, lm_config *c, lm_tok *tok) {
    tg_tokenizer *t = NULL;
    tg_decoder *m = tg_decoder_open(path, tok ? &t : NULL);
    if (m) *c = lm_config_of(&m->cfg);
    if (tok) lm_tok_set(tok, t);
    return m;
}

#endif
