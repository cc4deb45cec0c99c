/* An encoder model's file that describes itself (model_file.h): a
 * Transformer encoder and a linear head at every position, the model of the
 * toy sequence tasks (reverse, sort). The configuration is metadata under
 * the names reverse has always written (vocab, seq_len, dim, heads, ffn,
 * layers, pe, task), so its older files and its runs' checkpoints load;
 * tg_encoder_save adds model_type "encoder". A model file is untrusted
 * input: every number is a whole decimal string in a range, every word one
 * of a few, and the tensors must have the shapes the numbers imply before
 * anything is built, so a crafted file makes a reader allocate no more
 * than the file itself holds. */
#include "model_file.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../io/checkpoint.h"
#include "../io/safetensors_meta.h"
#include "../tensor/number.h"
#include "report.h"
#include "run.h"

/* The positional table's length when the file does not say: d2l's 1000, or
 * the sequence length when longer (what reverse has always built). */
static int default_max_len(int seq_len) { return seq_len > 1000 ? seq_len : 1000; }

int tg_encoder_model_init(tg_encoder_model *m, const tg_encoder_config *cfg, int seq_len, tg_rng *rng) {
    if (!m) {
        tg_set_error("encoder_model_init: NULL model");
        return -1;
    }
    *m = (tg_encoder_model){.seq_len = seq_len};
    tg_params_init(&m->params);
    if (!cfg || !rng || seq_len < 1) {
        tg_set_error("encoder_model_init: %s", !cfg ? "NULL config" : !rng ? "NULL rng" : "seq_len must be positive");
        return -1;
    }
    m->encoder = tg_encoder_new(cfg, rng);
    m->head = m->encoder ? tg_linear_new(cfg->num_hiddens, cfg->vocab_size, true, rng) : NULL;
    if (!m->encoder || !m->head || tg_encoder_params(m->encoder, &m->params, "encoder") ||
        tg_linear_params(m->head, &m->params, "head")) {
        tg_encoder_model_free(m);
        return -1;
    }
    return 0;
}

void tg_encoder_model_free(tg_encoder_model *m) {
    if (!m) return;
    tg_encoder_free(m->encoder);
    tg_linear_free(m->head);
    tg_params_free(&m->params);
    m->encoder = NULL, m->head = NULL;
}

tg_tensor *tg_encoder_model_forward(tg_encoder_model *m, const int *tokens, int B, int T) {
    if (!m || !m->encoder) {
        tg_set_error("encoder_model_forward: NULL model");
        return NULL;
    }
    tg_mask none = {0};
    return tg_linear_forward(m->head, tg_encoder_forward(m->encoder, tokens, B, T, none));
}

double tg_encoder_model_evaluate(tg_encoder_model *m, const int *tokens, const int *targets, int n, double *token_acc,
                                 double *seq_acc) {
    if (!m || !m->encoder || !tokens || !targets || n < 1) {
        tg_set_error("encoder_model_evaluate: %s", n < 1 ? "no sequences" : "NULL argument");
        if (token_acc) *token_acc = NAN;
        if (seq_acc) *seq_acc = NAN;
        return NAN;
    }
    int T = m->seq_len, V = m->encoder->cfg.vocab_size;
    long right = 0, seqs = 0;
    double loss = 0;
    tg_encoder_block *b0 = m->encoder->cfg.num_layers > 0 ? m->encoder->blocks[0] : NULL;
    bool training = b0 ? b0->attention->attention->dropout->training : true;
    tg_encoder_train(m->encoder, false);
    bool grad = tg_set_grad_enabled(false);
    for (int start = 0; start < n; start += 256) {
        int B = n - start < 256 ? n - start : 256;
        tg_scope_begin();
        tg_tensor *logits = tg_encoder_model_forward(m, tokens + (size_t)start * T, B, T);
        tg_tensor *ce = tg_cross_entropy(logits, targets + (size_t)start * T, NULL, TG_IGNORE_INDEX);
        loss += ce ? (double)tg_item(ce) * B / n : NAN;
        for (int b = 0; logits && b < B; b++) {
            int ok = 1;
            for (int t = 0; t < T; t++) {
                const tg_real *row = logits->data + ((int64_t)b * T + t) * V;
                int best = 0;
                for (int v = 1; v < V; v++)
                    if (row[v] > row[best]) best = v;
                int hit = best == targets[(size_t)(start + b) * T + t];
                right += hit;
                ok &= hit;
            }
            seqs += ok;
        }
        tg_scope_end();
    }
    tg_set_grad_enabled(grad);
    tg_encoder_train(m->encoder, training);
    if (token_acc) *token_acc = (double)right / ((double)n * T);
    if (seq_acc) *seq_acc = (double)seqs / n;
    return loss;
}

/* A word is letters, digits, '_' and '-' (no escaping needed in JSON). */
static bool is_word(const char *s) {
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_' ||
              *s == '-'))
            return false;
    return true;
}

char *tg_encoder_model_meta(const tg_encoder_model *m) {
    if (!m || !m->encoder) {
        tg_set_error("encoder_model_meta: NULL model");
        return NULL;
    }
    if (!is_word(m->task)) {
        tg_set_error("encoder_save: task '%.20s' is not a word", m->task);
        return NULL;
    }
    const tg_encoder_config *c = &m->encoder->cfg;
    const char *pe = tg_pe_kind_name(c->pe);
    char meta[640], task[40] = "";
    if (m->task[0]) snprintf(task, sizeof task, "\"task\":\"%s\",", m->task);
    snprintf(meta, sizeof meta,
             "{\"model_type\":\"encoder\",%s\"pe\":\"%s\",\"vocab\":\"%d\",\"seq_len\":\"%d\",\"dim\":\"%d\","
             "\"heads\":\"%d\",\"ffn\":\"%d\",\"layers\":\"%d\",\"max_len\":\"%d\",\"bias\":\"%s\",\"dropout\":\"%g\"}",
             task, pe ? pe : "?", c->vocab_size, m->seq_len, c->num_hiddens, c->num_heads, c->ffn_hiddens,
             c->num_layers, c->max_len, c->use_bias ? "true" : "false", (double)c->dropout);
    char *copy = strdup(meta);
    if (!copy) tg_set_error("encoder_model_meta: out of memory");
    return copy;
}

int tg_encoder_save(const tg_encoder_model *m, const char *path) {
    if (!m || !m->encoder || !path) {
        tg_set_error("encoder_save: NULL %s", !m || !m->encoder ? "model" : "path");
        return -1;
    }
    char *meta = tg_encoder_model_meta(m);
    int rc = meta ? tg_checkpoint_save(path, &m->params, meta) : -1;
    free(meta);
    return rc;
}

/* ---- reading ---------------------------------------------------------------- */

/* The metadata and shape checks: src/io/safetensors_meta.c. */

/* "model." in a run's checkpoint (the model beside the optimizer), "" in a
 * model file. */
static const char *model_prefix(const tg_safetensors *st) {
    return tg_safetensors_find(st, "model.encoder.embedding.weight") >= 0 ? "model." : "";
}

int tg_encoder_config_read(const tg_safetensors *st, const char *path, tg_encoder_config *c, int *seq_len) {
    if (!st || !c || !seq_len) {
        tg_set_error("encoder_config_read: NULL %s", !st ? "file" : !c ? "config" : "seq_len");
        return -1;
    }
    path = path ? path : "model";
    char v[64];
    if (tg_safetensors_meta(st, "model_type", v, sizeof v) >= 0 && strcmp(v, "encoder") != 0) {
        tg_set_error("%s: metadata 'model_type' is '%.20s'; an encoder's is 'encoder'", path, v);
        return -1;
    }
    int V, T, d, H, F, L, max_len;
    if (tg__st_meta_int(st, path, "vocab", 2, 4096, &V) || tg__st_meta_int(st, path, "seq_len", 2, 1000, &T) ||
        tg__st_meta_int(st, path, "dim", 2, 4096, &d) || tg__st_meta_int(st, path, "heads", 1, 256, &H) ||
        tg__st_meta_int(st, path, "ffn", 1, 100000, &F) || tg__st_meta_int(st, path, "layers", 1, 64, &L))
        return -1;
    if (tg__st_meta_value(st, path, "pe", v, sizeof v)) return -1;
    tg_pe_kind pe;
    if (tg_pe_kind_parse(v, &pe) != 0) {
        tg_set_error("%s: metadata 'pe' is '%.20s'; expected fixed, learned, none, relative, rope or alibi", path, v);
        return -1;
    }
    if (d % H != 0) {
        tg_set_error("%s: metadata: heads %d does not divide dim %d", path, H, d);
        return -1;
    }
    max_len = default_max_len(T);
    if (tg_safetensors_meta(st, "max_len", v, sizeof v) >= 0 &&
        tg__st_meta_int(st, path, "max_len", T, 100000, &max_len))
        return -1;
    bool bias = false;
    if (tg_safetensors_meta(st, "bias", v, sizeof v) >= 0) {
        if (strcmp(v, "true") != 0 && strcmp(v, "false") != 0) {
            tg_set_error("%s: metadata 'bias' is '%.20s'; expected true or false", path, v);
            return -1;
        }
        bias = strcmp(v, "true") == 0;
    }
    double drop = 0;
    if (tg_safetensors_meta(st, "dropout", v, sizeof v) >= 0 &&
        (tg_parse_real(v, &drop) != 0 || drop < 0 || drop >= 1)) {
        tg_set_error("%s: metadata 'dropout' is '%.20s'; expected a number in [0, 1)", path, v);
        return -1;
    }
    /* The sizes against the tensors, before anything is allocated for them. */
    const char *pre = model_prefix(st);
    char name[TG_PARAM_NAME_MAX];
    if (tg__st_expect_shape(st, path, pre, "encoder.embedding.weight", V, d) ||
        tg__st_expect_shape(st, path, pre, "head.weight", V, d))
        return -1;
    snprintf(name, sizeof name, "encoder.blocks.%d.ffn.dense1.weight", L - 1);
    if (tg__st_expect_shape(st, path, pre, name, F, d)) return -1;
    snprintf(name, sizeof name, "%sencoder.blocks.%d.attention.W_q.weight", pre, L);
    if (tg_safetensors_find(st, name) >= 0) {
        tg_set_error("%s: the file has more blocks than the metadata's layers %d", path, L);
        return -1;
    }
    if (pe == TG_PE_LEARNED && tg__st_expect_shape(st, path, pre, "encoder.pos_encoding.P", max_len, d)) return -1;
    *c = (tg_encoder_config){.vocab_size = V,
                             .num_hiddens = d,
                             .ffn_hiddens = F,
                             .num_heads = H,
                             .num_layers = L,
                             .max_len = max_len,
                             .dropout = (tg_real)drop,
                             .pe = pe,
                             .use_bias = bias};
    *seq_len = T;
    return 0;
}

int tg_encoder_open(const char *path, tg_encoder_model *m) {
    if (!m) {
        tg_set_error("encoder_open: NULL model");
        return -1;
    }
    *m = (tg_encoder_model){0};
    tg_params_init(&m->params);
    if (!path) {
        tg_set_error("encoder_open: NULL path");
        return -1;
    }
    char *file = tg_run_checkpoint_of(path);
    tg_safetensors st;
    if (!file || tg_safetensors_open(file, &st) != 0) {
        if (!file) tg_set_error("encoder_open: out of memory");
        free(file);
        return -1;
    }
    tg_encoder_config c;
    int T;
    int rc = tg_encoder_config_read(&st, file, &c, &T);
    char task[sizeof m->task] = "";
    long n = rc == 0 ? tg_safetensors_meta(&st, "task", task, sizeof task) : -1;
    if (rc == 0 && n >= 0 && (n == 0 || n >= (long)sizeof task || !is_word(task))) {
        tg_set_error("%s: metadata 'task' is not a word of at most %zu letters", file, sizeof task - 1);
        rc = -1;
    }
    tg_rng rng = tg_rng_new(0);
    if (rc == 0) rc = tg_encoder_model_init(m, &c, T, &rng);
    if (rc == 0) rc = tg_checkpoint_load_prefix(&st, file, &m->params, *model_prefix(&st) ? "model" : NULL);
    tg_safetensors_close(&st);
    free(file);
    if (rc != 0) {
        tg_encoder_model_free(m);
        return -1;
    }
    if (n > 0) memcpy(m->task, task, sizeof task);
    tg_encoder_train(m->encoder, false); /* a model opened is for use: dropout off until the caller trains it */
    return 0;
}

int tg_encoder_report(const char *dir, const char *page, tg_encoder_model *m, const int *tokens, const char *title) {
    if (!dir || !m || !m->encoder || !tokens) {
        tg_set_error("encoder_report: NULL %s", !dir ? "run folder" : !tokens ? "tokens" : "model");
        return -1;
    }
    int V = m->encoder->cfg.vocab_size;
    char *names = malloc((size_t)V * 16); /* a token's text: its id and a space, "12 " */
    const char **text = malloc(sizeof(char *) * (size_t)V);
    char *path = page ? strdup(page) : tg_run_path(dir, "report.html");
    tg_report *rep = tg_report_new();
    int rc = names && text && path && rep ? 0 : (tg_set_error("encoder_report: out of memory"), -1);
    for (int v = 0; rc == 0 && v < V; v++) snprintf(names + 16 * v, 16, "%d ", v), text[v] = names + 16 * v;
    if (rc == 0) rc = tg_report_add_run(rep, dir);
    if (rc == 0) rc = tg_report_add_encoder(rep, m->encoder, tokens, m->seq_len, text);
    if (rc == 0) rc = tg_report_write(rep, path, title ? title : dir);
    tg_report_free(rep);
    free(names), free(text), free(path);
    return rc;
}
