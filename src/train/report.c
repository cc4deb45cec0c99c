/* The run's report: its data gathered as JSON (report.h); the page itself
 * is src/viz/report.c's. Every part is written by io/json.h's writer from
 * values: what comes from a file (the checkpoint's settings, metrics.jsonl,
 * samples.jsonl, a table file) is parsed and written again, never copied,
 * so a crafted log line can neither reach the page as text nor break it. */
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
    int64_t dropped; /* log lines left out (tg_report_dropped) */
};

/* ---- JSON text: io/json.h's writer ---- */
typedef tg_json_writer jw;

/* Takes w's text as part name of r (or records the failure). */
static int jw_finish(jw *w, tg_report *r, const char *name) {
    char *text = tg_json_finish(w, "report");
    int rc = text ? tg_report_add(r, name, text) : -1;
    free(text);
    return rc;
}

/* jw_finish for a part that is a list (w holds "[...]"): its items join
 * those of a part already there under name, after them. Both are the
 * writer's text, so joining them is joining two lists. */
static int jw_finish_list(jw *w, tg_report *r, const char *name) {
    char *text = tg_json_finish(w, "report");
    if (!text) return -1;
    int i = 0;
    while (i < r->n && strcmp(r->name[i], name) != 0) i++;
    size_t had = i < r->n ? strlen(r->json[i]) : 0;
    int rc = 0;
    if (had > 2 && strcmp(text, "[]") != 0) {
        tg_strbuf all = {0};
        tg_strbuf_put(&all, r->json[i], had - 1); /* without its ']' */
        tg_strbuf_str(&all, ",\n"), tg_strbuf_str(&all, text + 1);
        rc = all.oom ? (tg_set_error("report: %s: out of memory", name), -1) : tg_report_add(r, name, all.p);
        free(all.p);
    } else if (had <= 2) {
        rc = tg_report_add(r, name, text);
    } /* else nothing to add */
    free(text);
    return rc;
}

/* A log line left out: counted in the report and said once per file. */
static void dropped(tg_report *r, const char *path, int64_t k, const char *why) {
    if (k <= 0) return;
    r->dropped += k;
    fprintf(stderr, "report: warning: %s: %lld line%s left out (%s)\n", path, (long long)k, k == 1 ? "" : "s", why);
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

int64_t tg_report_dropped(const tg_report *r) { return r ? r->dropped : 0; }

int tg_report_add(tg_report *r, const char *name, const char *json) {
    if (!r || !name || !json) return tg_set_error("report: NULL report, name or JSON"), -1;
    /* One JSON value and nothing after it: a part can hold nothing that
     * would end the page's data block early or add keys beside it. */
    tg_json c = {.p = json, .end = json + strlen(json), .start = json};
    if (tg_json_skip_value(&c, 0) != 0 || (tg_json_skip_ws(&c), c.p != c.end))
        return tg_set_error("report: part '%s' is not one JSON value: %s", name,
                            c.why[0] ? c.why : "text after the value"),
               -1;
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
    jw w = {0};
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
            if (first) tg_json_begin(&w, '{');
            tg_json_key(&w, key), tg_json_put_string(&w, v, vlen);
            first = 0;
        }
        more = tg_json_next(&j, '}');
    }
    tg_safetensors_close(&st);
    if (first) return tg_json_discard(&w), 0;
    tg_json_end(&w);
    return jw_finish(&w, r, "settings");
}

int tg_report_add_run(tg_report *r, const char *dir) {
    if (!r || !dir) return tg_set_error("report: NULL report or run folder"), -1;
    int64_t ckpt_step;
    if (add_settings(r, dir, &ckpt_step) != 0) return -1;
    tg_metrics *m = NULL;
    int64_t n = 0;
    if (tg_run_metrics_read(dir, &m, &n) != 0) return -1;
    /* The log's lines that do not parse were skipped by the reader: counted
     * here (whole lines only; the last may still be being written). */
    char *path = tg_run_path(dir, "metrics.jsonl");
    unsigned char *buf;
    size_t size;
    if (path && tg_read_file(path, "report", &buf, &size) == 0) {
        int64_t lines = 0;
        for (size_t i = 0; i < size; i++) lines += buf[i] == '\n';
        dropped(r, path, lines - n, "not a metrics line");
        tg_sys_free(buf);
    }
    tg_clear_error();
    free(path);
    /* A resumed run's log was cut back to its checkpoint; a killed one may
     * hold later steps that the checkpoint lacks: the page shows the run
     * that resumes. Lines are kept in order, one per step (the last). */
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        if (ckpt_step > 0 && m[i].step > ckpt_step) continue;
        while (k > 0 && m[k - 1].step >= m[i].step) k--;
        m[k++] = m[i];
    }
    /* The curves to 6 digits: the page shows 4, the log keeps every bit. */
    jw w = {0};
    const char *keys[5] = {"step", "loss", "lr", "val_step", "val_loss"};
    tg_json_begin(&w, '{');
    for (int f = 0; f < 5; f++) {
        tg_json_key(&w, keys[f]);
        tg_json_begin(&w, '[');
        for (int64_t i = 0; i < k; i++) {
            if (f >= 3 && !isfinite(m[i].val_loss)) continue; /* the evaluated steps only */
            if (f == 0 || f == 3)
                tg_json_put_int(&w, m[i].step);
            else
                tg_json_put_digits(&w, f == 1 ? m[i].loss : f == 2 ? m[i].lr : m[i].val_loss, 6);
        }
        tg_json_end(&w);
    }
    tg_json_end(&w);
    tg_sys_free(m);
    if (jw_finish(&w, r, "metrics") != 0) return -1;
    /* A profiler's tables (DIR/profile.json), when the run has them; one
     * that cannot be read is said and left out, the page still written. */
    path = tg_run_path(dir, "profile.json");
    if (path && access(path, F_OK) == 0 && tg_report_add_rows_file(r, path) != 0)
        fprintf(stderr, "report: warning: %s\n", tg_last_error()), tg_clear_error();
    free(path);
    return 0;
}

/* ---- a decoder: attention over real text, positional encodings ---- */

/* A key and its string value. */
static void jw_pair(jw *w, const char *key, const char *value) { tg_json_key(w, key), tg_json_put_str(w, value); }

/* A weight to 3 decimals, as short as JSON allows ("0", "1", "0.25"). */
static void jw_weight(jw *w, double v) {
    long k = lround(v * 1000);
    tg_json_put_digits(w, (double)(k < 0 ? 0 : k > 1000 ? 1000 : k) / 1000, 3);
}

static void jw_token(jw *w, int id, const char *const *token_text) {
    if (token_text) {
        tg_json_put_str(w, token_text[id]);
        return;
    }
    char c = (char)id, hex[8];
    if ((id >= 0x20 && id < 0x7f) || id == '\n' || id == '\t')
        tg_json_put_string(w, &c, 1);
    else
        snprintf(hex, sizeof hex, "\\x%02x", id & 0xff), tg_json_put_str(w, hex);
}

static void jw_heatmap(jw *w, const char *title, const char *xlabel, const char *ylabel, const double *d, int rows,
                       int cols) {
    tg_json_begin(w, '{');
    jw_pair(w, "kind", "heatmap"), jw_pair(w, "title", title), jw_pair(w, "xlabel", xlabel);
    jw_pair(w, "ylabel", ylabel);
    tg_json_key(w, "rows"), tg_json_put_int(w, rows);
    tg_json_key(w, "cols"), tg_json_put_int(w, cols);
    tg_json_key(w, "data"), tg_json_begin(w, '[');
    for (int i = 0; i < rows * cols; i++) tg_json_put_digits(w, d[i], 3);
    tg_json_end(w), tg_json_end(w);
}

/* Lines y[s * n + i] over offsets 0..n-1, one per series. */
static void jw_lines(jw *w, const char *title, const char *ylabel, const double *y, int n, int n_series,
                     const char *name_fmt) {
    tg_json_begin(w, '{');
    jw_pair(w, "kind", "lines"), jw_pair(w, "title", title);
    jw_pair(w, "xlabel", "offset i - j (query i, key j)"), jw_pair(w, "ylabel", ylabel);
    tg_json_key(w, "x"), tg_json_begin(w, '[');
    for (int i = 0; i < n; i++) tg_json_put_int(w, i);
    tg_json_end(w);
    tg_json_key(w, "series"), tg_json_begin(w, '[');
    for (int s = 0; s < n_series; s++) {
        char name[64];
        snprintf(name, sizeof name, name_fmt, s + 1);
        tg_json_begin(w, '{'), jw_pair(w, "name", name);
        tg_json_key(w, "y"), tg_json_begin(w, '[');
        for (int i = 0; i < n; i++) tg_json_put_digits(w, y[s * n + i], 4);
        tg_json_end(w), tg_json_end(w);
    }
    tg_json_end(w), tg_json_end(w);
}

/* Appends the plots of v's positions (tg_pe_plots: its kind's row says
 * what they are) to the "positions" part; "none" draws nothing. */
static int add_positions(tg_report *r, const tg_pe_view *v) {
    tg_pe_plot p[TG_PE_MAX_PLOTS];
    int n = tg_pe_plots(v, p);
    if (n < 0) return -1;
    jw w = {0};
    tg_json_begin(&w, '[');
    for (int i = 0; i < n; i++) {
        if (i > 0) tg_json_break(&w);
        if (p[i].lines)
            jw_lines(&w, p[i].title, p[i].ylabel, p[i].data, p[i].cols, p[i].rows, p[i].series);
        else
            jw_heatmap(&w, p[i].title, p[i].xlabel, p[i].ylabel, p[i].data, p[i].rows, p[i].cols);
    }
    tg_json_end(&w);
    tg_pe_plots_free(p, n);
    return jw_finish_list(&w, r, "positions");
}

/* "attention": every layer's and head's weights over tokens[0..T) of the
 * forward just run, read by weights(model, layer, head) ([1, T, T]); a row
 * is written up to its last non-zero weight (causal: i + 1). */
static int add_attention(tg_report *r, const char *what, const char *pe, int L, int H, const int *tokens, int T,
                         const char *const *token_text, const tg_tensor *(*weights)(const void *, int, int),
                         const void *m) {
    jw b = {0};
    char title[200];
    snprintf(title, sizeof title, "Attention over %s (%s positions)", what, pe);
    tg_json_begin(&b, '{');
    jw_pair(&b, "title", title);
    tg_json_key(&b, "layers"), tg_json_put_int(&b, L);
    tg_json_key(&b, "heads"), tg_json_put_int(&b, H);
    jw_pair(&b, "pe", pe);
    tg_json_key(&b, "tokens"), tg_json_begin(&b, '[');
    for (int i = 0; i < T; i++) jw_token(&b, tokens[i], token_text);
    tg_json_end(&b);
    tg_json_key(&b, "w"), tg_json_begin(&b, '[');
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) {
            const tg_tensor *w = weights(m, l, h); /* [1, T, T] */
            if (!w) return tg_json_discard(&b), -1;
            tg_json_break(&b), tg_json_begin(&b, '[');
            for (int i = 0; i < T; i++) {
                int len = T;
                while (len > 1 && w->data[(int64_t)i * T + len - 1] == 0) len--;
                tg_json_begin(&b, '[');
                for (int j = 0; j < len; j++) jw_weight(&b, (double)w->data[(int64_t)i * T + j]);
                tg_json_end(&b);
            }
            tg_json_end(&b);
        }
    tg_json_end(&b), tg_json_end(&b);
    return jw_finish(&b, r, "attention");
}

static tg_pe_view decoder_positions(const tg_decoder *m) {
    const tg_decoder_config *c = &m->cfg;
    return (tg_pe_view){.kind = c->pos,
                        .table_name = "transformer.wpe.weight",
                        .table = m->wpe ? m->wpe->weight : NULL,
                        .pos = &m->h[0]->pos,
                        .T = c->block_size,
                        .heads = c->n_head,
                        .head_dim = c->n_embd / c->n_head};
}

static tg_pe_view encoder_positions(const tg_encoder *m, int T) {
    const tg_encoder_config *c = &m->cfg;
    return (tg_pe_view){.kind = c->pe,
                        .table_name = "pos_encoding.P",
                        .table = m->pos_encoding ? m->pos_encoding->P : NULL,
                        .pos = &m->blocks[0]->attention->pos,
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
    tg_pe_view v = decoder_positions(m);
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
    tg_pe_view v = encoder_positions(m, T);
    return add_positions(r, &v);
}

/* ---- samples ---- */

int tg_report_append_sample(const char *dir, int64_t step, const char *text, size_t n) {
    char *path = dir && text ? tg_run_path(dir, "samples.jsonl") : NULL;
    if (!path) return tg_set_error("report: sample: NULL folder or text"), -1;
    tg_strbuf t = {0};
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)text[i];
        if ((c >= 0x20 && c < 0x7f) || c == '\n' || c == '\t')
            tg_strbuf_put(&t, (const char *)&text[i], 1);
        else
            tg_strbuf_fmt(&t, "\\x%02x", c);
    }
    jw w = {0};
    tg_json_begin(&w, '{');
    tg_json_key(&w, "step"), tg_json_put_int(&w, step);
    tg_json_key(&w, "text"), tg_json_put_string(&w, t.p ? t.p : "", t.oom ? 0 : t.n);
    tg_json_end(&w);
    char *line = t.oom ? (tg_json_discard(&w), NULL) : tg_json_finish(&w, "report: sample");
    free(t.p);
    /* O_NOFOLLOW: a symlink planted at the name is refused, never appended
     * through (a resumed run appends to the file it finds). */
    size_t len = line ? strlen(line) : 0;
    int fd = line ? open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0666) : -1;
    FILE *f = fd >= 0 ? fdopen(fd, "a") : NULL;
    bool link = line && fd < 0 && errno == ELOOP;
    if (fd >= 0 && !f) close(fd);
    int rc = f && fwrite(line, 1, len, f) == len && fputc('\n', f) == '\n' ? 0 : -1;
    if (f && fclose(f) != 0) rc = -1;
    if (rc) tg_set_error("report: cannot append a sample to %s%s", path, link ? ": it is a symbolic link" : "");
    free(path), free(line);
    return rc;
}

/* One line of samples.jsonl, {"step": n, "text": "..."} and nothing after
 * it: 0 with the step and the unescaped text (malloc'd) in *text, or -1. */
static int parse_sample(const char *p, const char *end, uint64_t *step, char **text, size_t *len) {
    tg_json j = {.p = p, .end = end, .start = p};
    char key[8];
    *text = NULL;
    if (tg_json_open(&j, '{', '}') != 0 || tg_json_string(&j, key, sizeof key, NULL) != 0 || strcmp(key, "step") != 0 ||
        tg_json_expect(&j, ':') != 0 || tg_json_uint(&j, step, "step") != 0 || tg_json_next(&j, '}') != 1 ||
        tg_json_string(&j, key, sizeof key, NULL) != 0 || strcmp(key, "text") != 0 || tg_json_expect(&j, ':') != 0)
        return -1;
    tg_json_skip_ws(&j);
    tg_json at = j; /* the text's string: measured, then read */
    if (tg_json_string(&j, NULL, 0, len) != 0 || tg_json_next(&j, '}') != 0) return -1;
    tg_json_skip_ws(&j);
    if (j.p != j.end || *step > (uint64_t)INT64_MAX) return -1; /* text after the object */
    *text = malloc(*len + 1);
    return *text && tg_json_string(&at, *text, *len + 1, NULL) == 0 ? 0 : -1;
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
    /* Lines in order; a later line of the same or an earlier step (a
     * resumed run) replaces those after it. Each line is parsed as
     * {"step": n, "text": "..."} with nothing after it, and the page gets
     * the values written again, never the line's bytes. */
    typedef struct {
        int64_t step;
        char *text;
        size_t n;
    } line;
    size_t cap = 1, k = 0;
    int64_t bad = 0;
    for (size_t i = 0; i < size; i++) cap += buf[i] == '\n';
    line *ls = malloc(sizeof(line) * cap);
    const char *p = (const char *)buf, *end = p + size;
    while (ls && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) break; /* a line still being written */
        uint64_t step = 0;
        char *text;
        size_t len;
        if (parse_sample(p, nl, &step, &text, &len) != 0) {
            bad++;
            free(text);
        } else if (max_step > 0 && (int64_t)step > max_step) {
            free(text);
        } else {
            while (k > 0 && ls[k - 1].step >= (int64_t)step) free(ls[--k].text);
            ls[k++] = (line){(int64_t)step, text, len};
        }
        p = nl + 1;
    }
    jw w = {0};
    tg_json_begin(&w, '[');
    for (size_t i = 0; ls && i < k; i++) {
        tg_json_break(&w), tg_json_begin(&w, '{');
        tg_json_key(&w, "step"), tg_json_put_int(&w, ls[i].step);
        tg_json_key(&w, "text"), tg_json_put_string(&w, ls[i].text, ls[i].n);
        tg_json_end(&w);
        free(ls[i].text);
    }
    tg_json_end(&w);
    int rc = !ls ? (tg_set_error("report: samples: out of memory"), -1) : 0;
    if (rc == 0) dropped(r, path, bad, "not one {\"step\", \"text\"} object");
    if (rc == 0 && k > 0)
        rc = jw_finish(&w, r, "samples");
    else
        tg_json_discard(&w);
    free(ls);
    free(path);
    tg_sys_free(buf);
    return rc;
}

/* ---- a table ---- */

int tg_report_add_table(tg_report *r, const char *title, const char *xlabel, const char *ylabel, const double *x, int n,
                        const char *const *names, const double *ys, int n_series) {
    if (!r || !title || !xlabel || !ylabel || !x || !names || !ys || n < 1 || n_series < 1)
        return tg_set_error("report: table: NULL argument or no rows (%d) or series (%d)", n, n_series), -1;
    jw w = {0};
    tg_json_begin(&w, '['), tg_json_begin(&w, '{');
    jw_pair(&w, "title", title), jw_pair(&w, "xlabel", xlabel), jw_pair(&w, "ylabel", ylabel);
    tg_json_key(&w, "x"), tg_json_begin(&w, '[');
    for (int i = 0; i < n; i++) tg_json_put_digits(&w, x[i], 6);
    tg_json_end(&w);
    tg_json_key(&w, "series"), tg_json_begin(&w, '[');
    for (int s = 0; s < n_series; s++) {
        tg_json_begin(&w, '{'), jw_pair(&w, "name", names[s]);
        tg_json_key(&w, "y"), tg_json_begin(&w, '[');
        for (int i = 0; i < n; i++) tg_json_put_digits(&w, ys[(size_t)s * n + i], 6);
        tg_json_end(&w), tg_json_end(&w);
    }
    tg_json_end(&w), tg_json_end(&w), tg_json_end(&w);
    return jw_finish_list(&w, r, "table");
}

/* ---- a table of rows from a file (a profiler's, ...) ---- */

/* tg_json_open's answer as tg_json_next's: 1 when items follow, 0 when
 * the container is empty, -1 on an error. */
static int items(int open) { return open == 0 ? 1 : open == 1 ? 0 : -1; }

/* One table {"title": "...", "columns": ["...", ...], "rows": [[cell, ...],
 * ...]} at j, each cell a string, a number or null and each row as long as
 * columns, written again into w (keys in that order, others skipped). 0, or
 * -1 with the reason in j->why. */
static int copy_rows_table(tg_json *j, jw *w) {
    enum { MAX_COLS = 64 };
    int cols = -1, have = 0, more = -1;
    tg_json rows = {0};
    char *title = NULL, *col[MAX_COLS] = {0};
    for (more = items(tg_json_open(j, '{', '}')); more == 1; more = tg_json_next(j, '}')) {
        char key[16];
        if (tg_json_string(j, key, sizeof key, NULL) != 0 || tg_json_expect(j, ':') != 0) break;
        tg_json_skip_ws(j);
        if (strcmp(key, "title") == 0 && !title) {
            tg_json at = *j;
            size_t n;
            if (tg_json_string(j, NULL, 0, &n) != 0 || !(title = malloc(n + 1))) break;
            tg_json_string(&at, title, n + 1, NULL);
        } else if (strcmp(key, "columns") == 0 && cols < 0) {
            int in = items(tg_json_open(j, '[', ']'));
            for (cols = 0; in == 1; in = tg_json_next(j, ']')) {
                char name[128];
                if (cols == MAX_COLS) in = tg_json_fail(j, "table: more than %d columns", MAX_COLS);
                if (in < 0 || tg_json_string(j, name, sizeof name, NULL) != 0 || !(col[cols] = strdup(name))) break;
                cols++;
            }
            if (in != 0) break;
        } else if (strcmp(key, "rows") == 0 && !have) {
            rows = *j, have = 1; /* read once the columns are known */
            if (tg_json_skip_value(j, 0) != 0) break;
        } else if (tg_json_skip_value(j, 0) != 0) {
            break;
        }
    }
    if (more == 0 && (!title || cols < 1 || !have))
        more = tg_json_fail(j, "table: \"title\", \"columns\" (at least one) and \"rows\" are needed");
    if (more == 0) {
        tg_json_begin(w, '{');
        jw_pair(w, "title", title);
        tg_json_key(w, "columns"), tg_json_begin(w, '[');
        for (int c = 0; c < cols; c++) tg_json_put_str(w, col[c]);
        tg_json_end(w);
        tg_json_key(w, "rows"), tg_json_begin(w, '[');
        int in = items(tg_json_open(&rows, '[', ']'));
        for (; in == 1; in = tg_json_next(&rows, ']')) {
            int c = 0, cell = items(tg_json_open(&rows, '[', ']'));
            tg_json_break(w), tg_json_begin(w, '[');
            for (; cell == 1 && c <= cols; cell = tg_json_next(&rows, ']'), c++) {
                double v;
                tg_json_skip_ws(&rows);
                if (rows.p < rows.end && *rows.p == '"') {
                    tg_json at = rows;
                    size_t n;
                    char *t = tg_json_string(&rows, NULL, 0, &n) == 0 ? malloc(n + 1) : NULL;
                    if (!t) break;
                    tg_json_string(&at, t, n + 1, NULL);
                    tg_json_put_string(w, t, n);
                    free(t);
                } else if (tg_json_null(&rows)) {
                    tg_json_put_null(w);
                } else if (tg_json_number(&rows, &v, "table cell") == 0) {
                    tg_json_put_number(w, v);
                } else {
                    break;
                }
            }
            if (cell != 0 || c != cols) {
                in = tg_json_fail(&rows, "table: a row of %d cells, not %d strings, numbers or nulls", c, cols);
                break;
            }
            tg_json_end(w);
        }
        tg_json_end(w), tg_json_end(w);
        if (in != 0) more = tg_json_fail(j, "%s", rows.why[0] ? rows.why : "table: bad rows");
    }
    free(title);
    for (int c = 0; c < MAX_COLS; c++) free(col[c]);
    return more == 0 ? 0 : (tg_json_fail(j, "table: not {\"title\", \"columns\", \"rows\"}"), -1);
}

int tg_report_add_rows_file(tg_report *r, const char *path) {
    if (!r || !path) return tg_set_error("report: table file: NULL report or path"), -1;
    unsigned char *buf;
    size_t size;
    if (tg_read_file(path, "report", &buf, &size) != 0) return -1;
    tg_json j = {.p = (const char *)buf, .end = (const char *)buf + size, .start = (const char *)buf};
    jw w = {0};
    tg_json_begin(&w, '[');
    tg_json_skip_ws(&j);
    int rc = 0;
    if (j.p < j.end && *j.p == '[') { /* a list of tables */
        int more = items(tg_json_open(&j, '[', ']'));
        for (; more == 1 && rc == 0; more = tg_json_next(&j, ']')) tg_json_break(&w), rc = copy_rows_table(&j, &w);
        if (more < 0) rc = -1;
    } else {
        rc = copy_rows_table(&j, &w);
    }
    tg_json_skip_ws(&j);
    if (rc == 0 && j.p != j.end) rc = tg_json_fail(&j, "text after the table");
    tg_json_end(&w);
    tg_sys_free(buf);
    if (rc != 0) {
        tg_json_discard(&w);
        return tg_set_error("report: %s: %s", path, j.why), -1;
    }
    return jw_finish_list(&w, r, "table");
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
