/* The run's report: its data gathered as JSON (report.h); the page itself
 * is src/viz/report.c's. */
#include "report.h"
#include "run.h"

#include "../io/file.h"
#include "../io/json.h"
#include "../io/safetensors.h"
#include "../io/strbuf.h"
#include "../viz/viz.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { REPORT_MAX_PARTS = 16 };

struct tg_report {
    char *name[REPORT_MAX_PARTS], *json[REPORT_MAX_PARTS];
    int n;
};

/* ---- JSON text: a growing string (io/strbuf.h) ---- */
typedef tg_strbuf sbuf;

/* A number as JSON (NaN and infinities: null, which JSON has instead). */
static void sb_num(sbuf *b, double v) {
    if (isfinite(v))
        tg_strbuf_fmt(b, "%.6g", v);
    else
        tg_strbuf_str(b, "null");
}
/* A JSON string of s[0..n): quote, backslash and control characters escaped. */
static void sb_jstr(sbuf *b, const char *s, size_t n) {
    tg_strbuf_put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            tg_strbuf_fmt(b, "\\%c", c);
        else if (c < 0x20)
            tg_strbuf_fmt(b, "\\u%04x", c);
        else
            tg_strbuf_put(b, (const char *)&s[i], 1);
    }
    tg_strbuf_put(b, "\"", 1);
}
/* Takes b's text as part name of r (or records the failure). */
static int sb_finish(sbuf *b, tg_report *r, const char *name) {
    int rc = b->oom ? (tg_set_error("report: %s: out of memory", name), -1) : tg_report_add(r, name, b->p);
    free(b->p);
    return rc;
}

/* sb_finish for a part that is a list (b holds "[...]"): its items join
 * those of a part already there under name, after them. */
static int sb_finish_list(sbuf *b, tg_report *r, const char *name) {
    int i = 0;
    while (i < r->n && strcmp(r->name[i], name) != 0) i++;
    size_t had = i < r->n ? strlen(r->json[i]) : 0;
    if (had > 2 && !b->oom && strcmp(b->p, "[]") != 0) {
        sbuf all = {0};
        tg_strbuf_put(&all, r->json[i], had - 1); /* without its ']' */
        tg_strbuf_str(&all, ",\n"), tg_strbuf_str(&all, b->p + 1);
        free(b->p);
        *b = all;
    } else if (had > 2 && !b->oom) { /* nothing to add */
        free(b->p);
        return 0;
    }
    return sb_finish(b, r, name);
}

tg_report *tg_report_new(void) {
    tg_report *r = calloc(1, sizeof *r);
    if (!r) tg_set_error("report: out of memory");
    return r;
}

void tg_report_free(tg_report *r) {
    if (!r) return;
    for (int i = 0; i < r->n; i++) free(r->name[i]), free(r->json[i]);
    free(r);
}

int tg_report_add(tg_report *r, const char *name, const char *json) {
    if (!r || !name || !json) return tg_set_error("report: NULL report, name or JSON"), -1;
    int i = 0;
    while (i < r->n && strcmp(r->name[i], name) != 0) i++;
    if (i == REPORT_MAX_PARTS) return tg_set_error("report: more than %d parts", REPORT_MAX_PARTS), -1;
    char *j = strdup(json), *nm = i < r->n ? r->name[i] : strdup(name);
    if (!j || !nm) {
        free(j);
        if (i == r->n) free(nm);
        return tg_set_error("report: %s: out of memory", name), -1;
    }
    if (i < r->n) free(r->json[i]);
    r->name[i] = nm, r->json[i] = j;
    if (i == r->n) r->n++;
    return 0;
}

/* ---- the run: settings and curves ---- */

/* The checkpoint's metadata less the training state's own keys (train.h:
 * tgrad_train_state, step, rngs, rng.*): the program's settings. */
static int add_settings(tg_report *r, const char *dir, int64_t *step) {
    char *file = tg_run_path(dir, "train_state.safetensors");
    tg_safetensors st;
    *step = 0;
    if (!file) return -1;
    if (tg_safetensors_open(file, &st) != 0) {
        free(file);
        tg_clear_error();
        return 0; /* no checkpoint yet: no settings, all the curves */
    }
    free(file);
    sbuf b = {0};
    tg_json j = {.p = st.metadata, .end = st.metadata + st.metadata_len, .start = st.metadata};
    int more = st.metadata ? tg_json_open(&j, '{', '}') == 0 : 0, first = 1;
    while (more == 1) {
        char key[256], v[4096];
        size_t klen, vlen;
        if (tg_json_string(&j, key, sizeof key, &klen) || tg_json_expect(&j, ':')) break;
        tg_json_skip_ws(&j);
        if (tg_json_string(&j, v, sizeof v, &vlen)) break;
        bool own = strncmp(key, "tgrad_", 6) == 0 || strcmp(key, "step") == 0 || strcmp(key, "rngs") == 0 ||
                   strncmp(key, "rng.", 4) == 0;
        if (strcmp(key, "step") == 0) *step = strtoll(v, NULL, 10);
        if (!own && klen < sizeof key && vlen < sizeof v) {
            tg_strbuf_str(&b, first ? "{" : ", ");
            sb_jstr(&b, key, klen), tg_strbuf_str(&b, ": "), sb_jstr(&b, v, vlen);
            first = 0;
        }
        more = tg_json_next(&j, '}');
    }
    tg_safetensors_close(&st);
    if (first) return free(b.p), 0;
    tg_strbuf_str(&b, "}");
    return sb_finish(&b, r, "settings");
}

int tg_report_add_run(tg_report *r, const char *dir) {
    if (!r || !dir) return tg_set_error("report: NULL report or run folder"), -1;
    int64_t ckpt_step;
    if (add_settings(r, dir, &ckpt_step) != 0) return -1;
    tg_metrics *m = NULL;
    int64_t n = 0;
    if (tg_run_metrics_read(dir, &m, &n) != 0) return -1;
    /* A resumed run's log was cut back to its checkpoint; a killed one may
     * hold later steps that the checkpoint lacks: the page shows the run
     * that resumes. Lines are kept in order, one per step (the last). */
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        if (ckpt_step > 0 && m[i].step > ckpt_step) continue;
        while (k > 0 && m[k - 1].step >= m[i].step) k--;
        m[k++] = m[i];
    }
    sbuf b = {0};
    const char *keys[3] = {"step", "loss", "lr"};
    tg_strbuf_str(&b, "{");
    for (int f = 0; f < 3; f++) {
        tg_strbuf_fmt(&b, "%s\"%s\": [", f ? ", " : "", keys[f]);
        for (int64_t i = 0; i < k; i++) {
            if (i) tg_strbuf_str(&b, ",");
            if (f == 0)
                tg_strbuf_fmt(&b, "%lld", (long long)m[i].step);
            else
                sb_num(&b, f == 1 ? m[i].loss : m[i].lr);
        }
        tg_strbuf_str(&b, "]");
    }
    for (int f = 0; f < 2; f++) {
        tg_strbuf_fmt(&b, ", \"%s\": [", f ? "val_loss" : "val_step");
        int c = 0;
        for (int64_t i = 0; i < k; i++) {
            if (!isfinite(m[i].val_loss)) continue;
            if (c++) tg_strbuf_str(&b, ",");
            if (f == 0)
                tg_strbuf_fmt(&b, "%lld", (long long)m[i].step);
            else
                sb_num(&b, m[i].val_loss);
        }
        tg_strbuf_str(&b, "]");
    }
    tg_strbuf_str(&b, "}");
    tg_sys_free(m);
    return sb_finish(&b, r, "metrics");
}

/* ---- a decoder: attention over real text, positional encodings ---- */

/* A weight to 3 decimals, as short as JSON allows ("0", "1", "0.25"). */
static void sb_weight(sbuf *b, double w) {
    long k = lround(w * 1000);
    if (k <= 0)
        tg_strbuf_str(b, "0");
    else if (k >= 1000)
        tg_strbuf_str(b, "1");
    else {
        char t[8];
        snprintf(t, sizeof t, "%03ld", k);
        for (int e = 2; e > 0 && t[e] == '0'; e--) t[e] = 0;
        tg_strbuf_fmt(b, "0.%s", t);
    }
}

static void sb_token(sbuf *b, int id, const char *const *token_text) {
    if (token_text) {
        sb_jstr(b, token_text[id], strlen(token_text[id]));
        return;
    }
    char c = (char)id, hex[8];
    if ((id >= 0x20 && id < 0x7f) || id == '\n' || id == '\t')
        sb_jstr(b, &c, 1);
    else
        snprintf(hex, sizeof hex, "\\x%02x", id & 0xff), sb_jstr(b, hex, strlen(hex));
}

static void sb_heatmap(sbuf *b, const char *title, const char *xlabel, const char *ylabel, const tg_real *d, int rows,
                       int cols) {
    tg_strbuf_str(b, "{\"kind\": \"heatmap\", \"title\": "), sb_jstr(b, title, strlen(title));
    tg_strbuf_fmt(b, ", \"xlabel\": \"%s\", \"ylabel\": \"%s\", \"rows\": %d, \"cols\": %d, \"data\": [", xlabel,
                  ylabel, rows, cols);
    for (int i = 0; i < rows * cols; i++) {
        if (i) tg_strbuf_str(b, ",");
        tg_strbuf_fmt(b, "%.3g", (double)d[i]);
    }
    tg_strbuf_str(b, "]}");
}

/* Lines y[s * n + i] over offsets 0..n-1, one per series. */
static void sb_lines(sbuf *b, const char *title, const char *ylabel, const double *y, int n, int n_series,
                     const char *name_fmt) {
    tg_strbuf_str(b, "{\"kind\": \"lines\", \"title\": "), sb_jstr(b, title, strlen(title));
    tg_strbuf_fmt(b, ", \"xlabel\": \"offset i - j (query i, key j)\", \"ylabel\": \"%s\", \"x\": [", ylabel);
    for (int i = 0; i < n; i++) tg_strbuf_fmt(b, "%s%d", i ? "," : "", i);
    tg_strbuf_str(b, "], \"series\": [");
    for (int s = 0; s < n_series; s++) {
        tg_strbuf_fmt(b, "%s{\"name\": \"", s ? ", " : "");
        tg_strbuf_fmt(b, name_fmt, s + 1);
        tg_strbuf_str(b, "\", \"y\": [");
        for (int i = 0; i < n; i++) tg_strbuf_fmt(b, "%s%.4g", i ? "," : "", y[s * n + i]);
        tg_strbuf_str(b, "]}");
    }
    tg_strbuf_str(b, "]}");
}

/* What a model's positions are, for the "positions" part, whatever the
 * model (decoder, encoder): the kind's name and what that kind uses. */
typedef struct {
    const char *kind;            /* fixed, learned, none, relative, rope, alibi */
    const char *table_name;      /* fixed, learned: the table's name */
    const tg_tensor *table;      /* fixed, learned: P [>= T, d], rows 0..T-1 shown */
    const tg_tensor *relative_k; /* relative: the first layer's [2 clip + 1, d_head] */
    const tg_real *alibi;        /* alibi: the heads' slopes */
    int T, heads, head_dim;
    bool beside_fixed; /* learned: the fixed sinusoidal table beside it (the chapter's comparison) */
} pos_view;

/* The plots of v's positions, as items of a JSON list (none for "none"). */
static int sb_positions(sbuf *b, const pos_view *v) {
    int T = v->T;
    char title[200];
    if (strcmp(v->kind, "fixed") == 0 || strcmp(v->kind, "learned") == 0) {
        int d = v->table->shape[1];
        bool fixed = strcmp(v->kind, "fixed") == 0;
        if (fixed)
            snprintf(title, sizeof title,
                     "Fixed sinusoidal positions: P[:%d] [%d, %d], P[i, 2j] = sin(i / 10000^(2j/d)), P[i, 2j+1] = "
                     "cos(i / 10000^(2j/d))",
                     T, T, d);
        else
            snprintf(title, sizeof title, "Learned absolute positions: %s[:%d] [%d, %d]", v->table_name, T, T, d);
        sb_heatmap(b, title, "encoding dimension", "position", v->table->data, T, d);
        if (!fixed && v->beside_fixed) {
            tg_rng rng = tg_rng_new(0);
            tg_posenc *pe = tg_posenc_new(d, 0, T, &rng);
            if (!pe) return -1;
            snprintf(title, sizeof title, "Fixed sinusoidal positions: P[:%d] [%d, %d], beside the learned table", T, T,
                     d);
            tg_strbuf_str(b, ",\n");
            sb_heatmap(b, title, "encoding dimension", "position", pe->P->data, T, d);
            tg_posenc_free(pe);
        }
    } else if (strcmp(v->kind, "relative") == 0) {
        const tg_tensor *k = v->relative_k;
        int clip = (k->shape[0] - 1) / 2;
        snprintf(title, sizeof title,
                 "Relative positions (Shaw et al.): layer 1's relative_k [%d, %d], rows: offsets -%d..%d", k->shape[0],
                 k->shape[1], clip, clip);
        sb_heatmap(b, title, "dimension", "offset + clip", k->data, k->shape[0], k->shape[1]);
    } else if (strcmp(v->kind, "alibi") == 0 || strcmp(v->kind, "rope") == 0) {
        bool alibi = strcmp(v->kind, "alibi") == 0;
        int nl = alibi ? v->heads : 1, dh = v->head_dim;
        double *y = malloc(sizeof(double) * (size_t)T * (size_t)nl);
        if (!y) return tg_set_error("report: positions: out of memory"), -1;
        for (int s = 0; s < nl; s++)
            for (int o = 0; o < T; o++) {
                double val = 0; /* ALiBi: -m_h (i - j); RoPE: mean of cos(o theta_k), theta_k = 10000^(-2k/d) */
                if (alibi) val = -(double)v->alibi[s] * o;
                for (int k = 0; !alibi && k < dh / 2; k++) val += cos(o * pow(10000.0, -2.0 * k / dh)) / (dh / 2);
                y[s * T + o] = val;
            }
        if (alibi)
            sb_lines(b, "ALiBi positions: the bias -m_h (i - j) added to each head's scores", "bias", y, T, nl,
                     "head %d");
        else
            sb_lines(b, "RoPE positions: q.k of two equal vectors against their offset (mean cos)", "score", y, T, 1,
                     "rope, d_head");
        free(y);
    } else {
        return 1; /* none: nothing drawn */
    }
    return 0;
}

/* Appends v's plots to the "positions" part. */
static int add_positions(tg_report *r, const pos_view *v) {
    sbuf b = {0};
    tg_strbuf_str(&b, "[");
    int rc = sb_positions(&b, v);
    tg_strbuf_str(&b, "]");
    if (rc < 0) return free(b.p), -1;
    return sb_finish_list(&b, r, "positions");
}

/* "attention": every layer's and head's weights over tokens[0..T) of the
 * forward just run, read by weights(model, layer, head) ([1, T, T]); a row
 * is written up to its last non-zero weight (causal: i + 1). */
static int add_attention(tg_report *r, const char *what, const char *pe, int L, int H, const int *tokens, int T,
                         const char *const *token_text, const tg_tensor *(*weights)(const void *, int, int),
                         const void *m) {
    sbuf b = {0};
    tg_strbuf_fmt(&b,
                  "{\"title\": \"Attention over %s (%s positions)\", \"layers\": %d, \"heads\": %d, \"pe\": \"%s\", "
                  "\"tokens\": [",
                  what, pe, L, H, pe);
    for (int i = 0; i < T; i++) {
        if (i) tg_strbuf_str(&b, ",");
        sb_token(&b, tokens[i], token_text);
    }
    tg_strbuf_str(&b, "], \"w\": [");
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) {
            const tg_tensor *w = weights(m, l, h); /* [1, T, T] */
            if (!w) return free(b.p), -1;
            tg_strbuf_str(&b, l + h ? ",\n[" : "[");
            for (int i = 0; i < T; i++) {
                int len = T;
                while (len > 1 && w->data[(int64_t)i * T + len - 1] == 0) len--;
                tg_strbuf_str(&b, i ? ",[" : "[");
                for (int j = 0; j < len; j++) {
                    if (j) tg_strbuf_str(&b, ",");
                    sb_weight(&b, (double)w->data[(int64_t)i * T + j]);
                }
                tg_strbuf_str(&b, "]");
            }
            tg_strbuf_str(&b, "]");
        }
    tg_strbuf_str(&b, "]}");
    return sb_finish(&b, r, "attention");
}

static pos_view decoder_positions(const tg_decoder *m) {
    const tg_decoder_config *c = &m->cfg;
    return (pos_view){.kind = tg_pe_kind_name(c->pos),
                      .table_name = "transformer.wpe.weight",
                      .table = m->wpe ? m->wpe->weight : NULL,
                      .relative_k = m->h[0]->pos.relative_k,
                      .alibi = m->h[0]->pos.alibi,
                      .T = c->block_size,
                      .heads = c->n_head,
                      .head_dim = c->n_embd / c->n_head};
}

static pos_view encoder_positions(const tg_encoder *m, int T) {
    const tg_encoder_config *c = &m->cfg;
    const tg_mha *a = m->blocks[0]->attention;
    return (pos_view){.kind = tg_pe_kind_name(c->pe),
                      .table_name = "pos_encoding.P",
                      .table = m->pos_encoding ? m->pos_encoding->P : NULL,
                      .relative_k = a->pos.relative_k,
                      .alibi = a->pos.alibi,
                      .T = T,
                      .heads = c->num_heads,
                      .head_dim = c->num_hiddens / c->num_heads,
                      .beside_fixed = true};
}

/* The window of a model's attention part: T in 1..max_T, every token in
 * the vocabulary (bytes when there is no token_text). 0, or -1 with the
 * error recorded. */
static int check_window(const char *model, bool given, const int *tokens, int T, int max_T, int vocab,
                        const char *const *token_text) {
    if (!given || !tokens || T < 1 || T > max_T)
        return tg_set_error("report: %s attention: NULL argument or T %d outside 1..%d", model, T, max_T), -1;
    for (int i = 0; i < T; i++)
        if (tokens[i] < 0 || tokens[i] >= vocab || (!token_text && tokens[i] > 255))
            return tg_set_error("report: %s attention: token %d at %d is outside the vocabulary", model, tokens[i], i),
                   -1;
    return 0;
}

static const tg_tensor *decoder_weights(const void *m, int l, int h) { return tg_decoder_attention_weights(m, l, h); }

int tg_report_add_decoder(tg_report *r, tg_decoder *m, const int *tokens, int T, const char *const *token_text) {
    if (check_window("decoder", r && m, tokens, T, m ? m->cfg.block_size : 0, m ? m->cfg.vocab_size : 0, token_text) !=
        0)
        return -1;
    int L = m->cfg.n_layer, H = m->cfg.n_head;
    bool training = m->training, grad = tg_set_grad_enabled(false);
    tg_decoder_train(m, false);
    tg_decoder_record_attention(m, true);
    tg_scope_begin();
    int rc = tg_decoder_forward(m, tokens, 1, T) ? 0 : -1;
    if (rc == 0)
        rc = add_attention(r, "one validation window", tg_pe_kind_name(m->cfg.pos), L, H, tokens, T, token_text,
                           decoder_weights, m);
    tg_scope_end();
    tg_decoder_record_attention(m, false);
    tg_decoder_train(m, training);
    tg_set_grad_enabled(grad);
    if (rc != 0) return -1;
    pos_view v = decoder_positions(m);
    return add_positions(r, &v);
}

static const tg_tensor *encoder_weights(const void *m, int l, int h) { return tg_encoder_attention_weights(m, l, h); }

int tg_report_add_encoder(tg_report *r, tg_encoder *m, const int *tokens, int T, const char *const *token_text) {
    int max_T = m && m->pos_encoding ? m->cfg.max_len : INT_MAX; /* a table's rows; any T without one */
    if (check_window("encoder", r && m, tokens, T, max_T, m ? m->cfg.vocab_size : 0, token_text) != 0) return -1;
    bool training = m->blocks[0]->attention->attention->dropout->training, grad = tg_set_grad_enabled(false);
    tg_encoder_train(m, false);
    tg_encoder_record_attention(m, true);
    tg_scope_begin();
    int rc = tg_encoder_forward(m, tokens, 1, T, (tg_mask){0}) ? 0 : -1;
    if (rc == 0)
        rc = add_attention(r, "one held-out sequence", tg_pe_kind_name(m->cfg.pe), m->cfg.num_layers, m->cfg.num_heads,
                           tokens, T, token_text, encoder_weights, m);
    tg_scope_end();
    tg_encoder_record_attention(m, false);
    tg_encoder_train(m, training);
    tg_set_grad_enabled(grad);
    return rc != 0 ? -1 : tg_report_add_positions(r, m, T);
}

int tg_report_add_positions(tg_report *r, const tg_encoder *m, int T) {
    if (!r || !m || T < 1 || (m->pos_encoding && T > m->cfg.max_len))
        return tg_set_error("report: positions: NULL argument or T %d outside 1..%d", T, m ? m->cfg.max_len : 0), -1;
    pos_view v = encoder_positions(m, T);
    return add_positions(r, &v);
}

/* ---- samples ---- */

int tg_report_append_sample(const char *dir, int64_t step, const char *text, size_t n) {
    char *path = dir && text ? tg_run_path(dir, "samples.jsonl") : NULL;
    if (!path) return tg_set_error("report: sample: NULL folder or text"), -1;
    sbuf b = {0};
    tg_strbuf_fmt(&b, "{\"step\": %lld, \"text\": ", (long long)step);
    sbuf t = {0};
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)text[i];
        if ((c >= 0x20 && c < 0x7f) || c == '\n' || c == '\t')
            tg_strbuf_put(&t, (const char *)&text[i], 1);
        else
            tg_strbuf_fmt(&t, "\\x%02x", c);
    }
    sb_jstr(&b, t.p ? t.p : "", t.n);
    tg_strbuf_str(&b, "}\n");
    free(t.p);
    /* O_NOFOLLOW: a symlink planted at the name is refused, never appended
     * through (a resumed run appends to the file it finds). */
    int fd = b.oom || t.oom ? -1 : open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0666);
    FILE *f = fd >= 0 ? fdopen(fd, "a") : NULL;
    bool link = fd < 0 && errno == ELOOP;
    if (fd >= 0 && !f) close(fd);
    int rc = f && fwrite(b.p, 1, b.n, f) == b.n ? 0 : -1;
    if (f && fclose(f) != 0) rc = -1;
    if (rc) tg_set_error("report: cannot append a sample to %s%s", path, link ? ": it is a symbolic link" : "");
    free(path), free(b.p);
    return rc;
}

int tg_report_add_samples(tg_report *r, const char *dir, int64_t max_step) {
    char *path = r && dir ? tg_run_path(dir, "samples.jsonl") : NULL;
    if (!path) return tg_set_error("report: samples: NULL report or folder"), -1;
    unsigned char *buf;
    size_t size;
    if (tg_read_file(path, "report", &buf, &size) != 0) {
        free(path);
        tg_clear_error();
        return 0; /* no samples: no section */
    }
    free(path);
    /* Lines in order; a later line of the same or an earlier step (a
     * resumed run) replaces those after it. Each line is checked as JSON
     * {"step": n, "text": "..."} and copied as it is. */
    typedef struct {
        int64_t step;
        const char *p;
        size_t n;
    } line;
    size_t cap = 1, k = 0;
    for (size_t i = 0; i < size; i++) cap += buf[i] == '\n';
    line *ls = malloc(sizeof(line) * cap);
    const char *p = (const char *)buf, *end = p + size;
    while (ls && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) break;
        tg_json j = {.p = p, .end = nl, .start = p};
        char key[8];
        uint64_t step = 0;
        int ok = tg_json_open(&j, '{', '}') == 0 && tg_json_string(&j, key, sizeof key, NULL) == 0 &&
                 strcmp(key, "step") == 0 && tg_json_expect(&j, ':') == 0 && (tg_json_skip_ws(&j), 1) &&
                 tg_json_uint(&j, &step, "step") == 0 && tg_json_next(&j, '}') == 1 &&
                 tg_json_string(&j, key, sizeof key, NULL) == 0 && strcmp(key, "text") == 0 &&
                 tg_json_expect(&j, ':') == 0 && (tg_json_skip_ws(&j), 1) && tg_json_string(&j, NULL, 0, NULL) == 0 &&
                 tg_json_next(&j, '}') == 0;
        if (ok && (max_step <= 0 || (int64_t)step <= max_step)) {
            while (k > 0 && ls[k - 1].step >= (int64_t)step) k--;
            ls[k++] = (line){(int64_t)step, p, (size_t)(nl - p)};
        }
        p = nl + 1;
    }
    sbuf b = {0};
    tg_strbuf_str(&b, "[");
    for (size_t i = 0; ls && i < k; i++) {
        if (i) tg_strbuf_str(&b, ",\n");
        tg_strbuf_put(&b, ls[i].p, ls[i].n);
    }
    tg_strbuf_str(&b, "]");
    int rc = !ls ? (tg_set_error("report: samples: out of memory"), -1) : 0;
    if (rc == 0 && k > 0)
        rc = sb_finish(&b, r, "samples");
    else
        free(b.p);
    free(ls);
    tg_sys_free(buf);
    return rc;
}

/* ---- a table ---- */

int tg_report_add_table(tg_report *r, const char *title, const char *xlabel, const char *ylabel, const double *x, int n,
                        const char *const *names, const double *ys, int n_series) {
    if (!r || !title || !xlabel || !ylabel || !x || !names || !ys || n < 1 || n_series < 1)
        return tg_set_error("report: table: NULL argument or no rows (%d) or series (%d)", n, n_series), -1;
    sbuf b = {0};
    tg_strbuf_str(&b, "[{\"title\": "), sb_jstr(&b, title, strlen(title));
    tg_strbuf_str(&b, ", \"xlabel\": "), sb_jstr(&b, xlabel, strlen(xlabel));
    tg_strbuf_str(&b, ", \"ylabel\": "), sb_jstr(&b, ylabel, strlen(ylabel));
    tg_strbuf_str(&b, ", \"x\": [");
    for (int i = 0; i < n; i++) tg_strbuf_str(&b, i ? "," : ""), sb_num(&b, x[i]);
    tg_strbuf_str(&b, "], \"series\": [");
    for (int s = 0; s < n_series; s++) {
        tg_strbuf_str(&b, s ? ", {\"name\": " : "{\"name\": "), sb_jstr(&b, names[s], strlen(names[s]));
        tg_strbuf_str(&b, ", \"y\": [");
        for (int i = 0; i < n; i++) tg_strbuf_str(&b, i ? "," : ""), sb_num(&b, ys[(size_t)s * n + i]);
        tg_strbuf_str(&b, "]}");
    }
    tg_strbuf_str(&b, "]}]");
    return sb_finish_list(&b, r, "table");
}

int tg_report_write(const tg_report *r, const char *path, const char *title) {
    if (!r || !path) return tg_set_error("report: NULL report or path"), -1;
    tg_viz_report_part parts[REPORT_MAX_PARTS];
    for (int i = 0; i < r->n; i++) parts[i] = (tg_viz_report_part){r->name[i], r->json[i]};
    if (tg_viz_report(path, title, parts, r->n) != 0)
        return tg_set_error("report: %s", tg_viz_last_error() ? tg_viz_last_error() : "writing the page failed"), -1;
    return 0;
}

int tg_report_write_run(const char *dir, const char *title) {
    tg_report *rep = tg_report_new();
    char *path = dir ? tg_run_path(dir, "report.html") : NULL;
    int rc = rep && path ? tg_report_add_run(rep, dir) : -1;
    if (rc == 0) rc = tg_report_add_samples(rep, dir, 0);
    if (rc == 0) rc = tg_report_write(rep, path, title ? title : dir);
    tg_report_free(rep);
    free(path);
    return rc;
}

int tg_report_on_save(void *run, int64_t step) {
    (void)step;
    const char *dir = tg_run_dir(run);
    if (tg_report_write_run(dir, dir) != 0) fprintf(stderr, "report: %s\n", tg_last_error());
    return 0;
}
