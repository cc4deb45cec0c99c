/* A decoder's file that describes itself (decoder.h): the configuration as
 * metadata under nanoGPT's GPTConfig names, written by tg_decoder_save and
 * read back by tg_decoder_config_read, which checks it against the tensors
 * before anything is built. A model file is untrusted input: every number
 * is a whole decimal string in a range, every word one of a few, and the
 * tensors must have the shapes the numbers imply, so a crafted file makes
 * a reader allocate no more than the file itself holds. */
#include "decoder.h"
#include "module.h"

#include "../io/checkpoint.h"
#include "../io/safetensors_meta.h"
#include "../tensor/number.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *gelu_name(tg_decoder_gelu g) { return g == TG_DEC_GELU_ERF ? "erf" : "tanh"; }

int tg_decoder_config_kinds(tg_decoder_config *c, const char *pe, const char *gelu) {
    tg_pe_kind kind;
    if (!pe || tg_pe_kind_parse(pe, &kind) != 0 || kind == TG_PE_FIXED)
        return tg_set_error("pe must be learned, none, relative, rope or alibi"), -1;
    if (!gelu || (strcmp(gelu, "tanh") != 0 && strcmp(gelu, "erf") != 0))
        return tg_set_error("gelu must be tanh or erf"), -1;
    c->pos = kind;
    c->gelu = strcmp(gelu, "erf") == 0 ? TG_DEC_GELU_ERF : TG_DEC_GELU_TANH;
    return 0;
}

int tg_decoder_config_json(const tg_decoder_config *c, char *buf, size_t cap) {
    if (!c || !buf) {
        tg_set_error("decoder_config_json: NULL %s", !c ? "config" : "buffer");
        return -1;
    }
    const char *pe = tg_pe_kind_name(c->pos);
    int n = snprintf(buf, cap,
                     "{\"vocab_size\":\"%d\",\"block_size\":\"%d\",\"n_layer\":\"%d\",\"n_head\":\"%d\","
                     "\"n_embd\":\"%d\",\"bias\":\"%s\",\"gelu\":\"%s\",\"pe\":\"%s\"}",
                     c->vocab_size, c->block_size, c->n_layer, c->n_head, c->n_embd, c->bias ? "true" : "false",
                     gelu_name(c->gelu), pe ? pe : "?");
    if (n < 0 || (size_t)n >= cap) {
        tg_set_error("decoder_config_json: %zu bytes are too few", cap);
        return -1;
    }
    return n;
}

/* The end of the JSON string starting at s (s[0] == '"'): the byte after
 * its closing quote, or NULL. */
static const char *string_end(const char *s) {
    for (s++; *s; s++) {
        if (*s == '\\' && s[1])
            s++;
        else if (*s == '"')
            return s + 1;
    }
    return NULL;
}

static const char *skip_ws(const char *s) {
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r') s++;
    return s;
}

/* Appends the "key":"value" pairs of the JSON object extra whose key is not
 * already one of own's to out (own's closing brace replaced, a comma before
 * each), as written (escapes kept). Returns the malloc'd result, or NULL
 * (out of memory, or extra not an object of strings: error recorded). */
static char *merge_meta(const char *own, const char *extra) {
    size_t n = strlen(own), en = extra ? strlen(extra) : 0;
    char *out = malloc(n + en + 2);
    if (!out) {
        tg_set_error("decoder_save: out of memory for the metadata");
        return NULL;
    }
    memcpy(out, own, n - 1); /* up to own's closing brace */
    size_t k = n - 1;
    const char *p = extra ? skip_ws(extra) : "{}";
    if (*p++ != '{') goto bad;
    for (p = skip_ws(p); *p != '}';) {
        const char *key = p, *key_end = *p == '"' ? string_end(p) : NULL;
        const char *val = key_end ? skip_ws(key_end) : NULL;
        if (!val || *val != ':') goto bad;
        val = skip_ws(val + 1);
        const char *val_end = *val == '"' ? string_end(val) : NULL;
        if (!val_end) goto bad;
        /* own's keys are plain words: the key as written, quotes included, is found in own */
        char probe[80];
        size_t kl = (size_t)(key_end - key);
        bool dup = false;
        if (kl + 1 < sizeof probe) {
            memcpy(probe, key, kl), probe[kl] = ':', probe[kl + 1] = 0;
            dup = strstr(own, probe) != NULL;
        }
        if (!dup) {
            out[k++] = ',';
            memcpy(out + k, key, (size_t)(val_end - key));
            k += (size_t)(val_end - key);
        }
        p = skip_ws(val_end);
        if (*p == ',')
            p = skip_ws(p + 1);
        else if (*p != '}')
            goto bad;
    }
    out[k++] = '}', out[k] = 0;
    return out;
bad:
    free(out);
    tg_set_error("decoder_save: the metadata is not a JSON object of strings");
    return NULL;
}

int tg_decoder_save(tg_decoder *m, const char *path, const char *metadata_json) {
    if (!tg_module_present("decoder", "save", m)) return -1;
    char cfg[400], own[512];
    int n = tg_decoder_config_json(&m->cfg, cfg, sizeof cfg);
    if (n < 0) return -1;
    /* {"model_type":"decoder", the config's keys, "dropout"} */
    snprintf(own, sizeof own, "{\"model_type\":\"decoder\",%.*s,\"dropout\":\"%g\"}", n - 2, cfg + 1,
             (double)m->cfg.dropout);
    char *meta = merge_meta(own, metadata_json);
    if (!meta) return -1;
    tg_params p;
    tg_params_init(&p);
    int rc = tg_decoder_state_dict(m, &p, NULL) ? -1 : tg_checkpoint_save(path, &p, meta);
    tg_params_free(&p);
    free(meta);
    return rc;
}

/* ---- reading ---------------------------------------------------------------- */

/* The metadata and shape checks: src/io/safetensors_meta.c. */

int tg_decoder_config_read(const tg_safetensors *st, const char *path, const char *prefix, tg_decoder_config *c) {
    if (!st || !c) {
        tg_set_error("decoder_config_read: NULL %s", !st ? "file" : "config");
        return -1;
    }
    path = path ? path : "model", prefix = prefix ? prefix : "";
    char v[64];
    if (tg_safetensors_meta(st, "model_type", v, sizeof v) >= 0 && strcmp(v, "decoder") != 0) {
        tg_set_error("%s: metadata 'model_type' is '%.20s'; a decoder's is 'decoder'", path, v);
        return -1;
    }
    int V, T, L, H, d;
    if (tg__st_meta_int(st, path, "vocab_size", 2, 65536, &V) || tg__st_meta_int(st, path, "block_size", 2, 4096, &T) ||
        tg__st_meta_int(st, path, "n_layer", 1, TG_DECODER_MAX_LAYERS, &L) ||
        tg__st_meta_int(st, path, "n_head", 1, 256, &H) || tg__st_meta_int(st, path, "n_embd", 1, 8192, &d))
        return -1;
    *c = tg_decoder_config_default(V, T, L, H, d);
    if (tg__st_meta_value(st, path, "bias", v, sizeof v)) return -1;
    if (strcmp(v, "true") != 0 && strcmp(v, "false") != 0) {
        tg_set_error("%s: metadata 'bias' is '%s'; expected true or false", path, v);
        return -1;
    }
    c->bias = strcmp(v, "true") == 0;
    if (tg__st_meta_value(st, path, "gelu", v, sizeof v)) return -1;
    if (strcmp(v, "tanh") != 0 && strcmp(v, "erf") != 0) {
        tg_set_error("%s: metadata 'gelu' is '%s'; expected tanh or erf", path, v);
        return -1;
    }
    c->gelu = strcmp(v, "erf") == 0 ? TG_DEC_GELU_ERF : TG_DEC_GELU_TANH;
    if (tg_safetensors_meta(st, "pe", v, sizeof v) >= 0) { /* absent: nanoGPT's learned table */
        tg_pe_kind kind;
        if (tg_pe_kind_parse(v, &kind) != 0 || kind == TG_PE_FIXED) {
            tg_set_error("%s: metadata 'pe' is '%.20s'; expected learned, none, relative, rope or alibi", path, v);
            return -1;
        }
        c->pos = kind;
    }
    double drop = 0;
    if (tg_safetensors_meta(st, "dropout", v, sizeof v) >= 0 &&
        (tg_parse_real(v, &drop) != 0 || drop < 0 || drop >= 1)) {
        tg_set_error("%s: metadata 'dropout' is '%.20s'; expected a number in [0, 1)", path, v);
        return -1;
    }
    c->dropout = (tg_real)drop;
    if (d % H != 0) {
        tg_set_error("%s: metadata: n_head %d does not divide n_embd %d", path, H, d);
        return -1;
    }
    /* The tied weight under either of its names (safetensors.torch.save_model keeps lm_head.weight). */
    char name[TG_PARAM_NAME_MAX + 8];
    snprintf(name, sizeof name, "%stransformer.wte.weight", prefix);
    const char *wte = tg_safetensors_find(st, name) >= 0 ? "transformer.wte.weight" : "lm_head.weight";
    if (tg__st_expect_shape(st, path, prefix, wte, V, d)) return -1;
    if (c->pos == TG_PE_LEARNED && tg__st_expect_shape(st, path, prefix, "transformer.wpe.weight", T, d)) return -1;
    char blk[64];
    snprintf(blk, sizeof blk, "transformer.h.%d.mlp.c_fc.weight", L - 1);
    if (tg__st_expect_shape(st, path, prefix, blk, 4 * d, d)) return -1;
    snprintf(name, sizeof name, "%stransformer.h.%d.ln_1.weight", prefix, L);
    if (tg_safetensors_find(st, name) >= 0) {
        tg_set_error("%s: the file has more blocks than the metadata's n_layer %d", path, L);
        return -1;
    }
    return 0;
}
