/* The lm program's run: its flags, the settings a checkpoint records and
 * how a resumed or fine-tuning run reconciles them with the command line,
 * and its figures. In a header beside lm.c so that lm.c reads as data,
 * model, loop, output.
 *
 * A training state records the run's settings under their flags' names
 * (and the model's sizes under nanoGPT's names, lm_model.h). On --resume a
 * flag left out takes the run's value; a flag given that differs is applied
 * and said when it can change (steps, schedule, batch, evaluation,
 * checkpoints), and refused naming both values when it cannot (the model's
 * shape, the data, the seed). */
#ifndef LM_RUN_H
#define LM_RUN_H

#include <libgen.h>
#include <math.h>
#include "attention_figure.h"
#include "lm_model.h"
#include "lm_report.h"

typedef struct {
    int steps, decay_steps, batch, block, layers, heads, dim, warmup, accum, eval_every, eval_batches, save_every;
    int patience, seed, threads, stop_after, tokens, top_k;
    double lr, min_lr, weight_decay, clip, dropout, temperature;
    const char *data, *out, *resume, *init_from, *load, *prompt, *gelu, *pe, *logits, *tokenizer, *precision;
    bool sample, ddp;
} options;

/* The run's keys, in the order written; fixed: cannot change on resume.
 * Keys a state written before them lacks keep the flag's value. */
typedef struct {
    const char *flag;
    bool fixed, optional;
} lm_key;
static const lm_key LM_KEYS[] = {
    {"data", true, false},       {"seed", true, false},          {"steps", false, false},
    {"batch", false, false},     {"lr", false, false},           {"min-lr", false, false},
    {"warmup", false, false},    {"weight-decay", false, false}, {"clip", false, false},
    {"accum", false, false},     {"dropout", false, false},      {"decay-steps", false, true},
    {"eval-every", false, true}, {"eval-batches", false, true},  {"save-every", false, true},
    {"patience", false, true},   {"precision", false, true},
};
enum { LM_N_KEYS = sizeof LM_KEYS / sizeof LM_KEYS[0] };
static int64_t lm_data_tokens; /* the tokens a resumed run trained on */

static const cli_opt *lm_find_opt(const cli_opt *opts, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(opts[i].name, name) == 0) return &opts[i];
    return NULL;
}

/* An option's value as text (the metadata's form). */
static void lm_opt_text(const cli_opt *opt, char *buf, size_t cap) {
    if (opt->kind == CLI_INT) snprintf(buf, cap, "%d", *(int *)opt->dst);
    if (opt->kind == CLI_REAL) snprintf(buf, cap, "%.17g", *(double *)opt->dst);
    if (opt->kind == CLI_STR) snprintf(buf, cap, "%s", *(const char **)opt->dst ? *(const char **)opt->dst : "");
}

/* Appends s to buf as a JSON string body; -1 for a control character or no room. */
static int lm_json_escape(char *buf, size_t cap, const char *s) {
    size_t n = strlen(buf);
    for (; *s; s++) {
        if ((unsigned char)*s < 0x20 || n + 3 >= cap) return -1;
        if (*s == '"' || *s == '\\') buf[n++] = '\\';
        buf[n++] = *s;
    }
    buf[n] = 0;
    return 0;
}

/* The training state's settings: the model's (model_meta) and the run's
 * (LM_KEYS), malloc'd; NULL with the error recorded. */
static char *lm_settings_json(const options *o, const cli_opt *opts, int nopt, const lm_config *c, const lm_tok *tok,
                              int64_t data_tokens) {
    int k = 0;
    size_t cap = 2048 + 2 * (o->data ? strlen(o->data) : 0);
    char *buf = malloc(cap);
    if (!buf) return tg_set_error("out of memory"), NULL;
    model_meta(buf, cap, c);
    k = (int)strlen(buf) - 1; /* over the closing brace */
    k += snprintf(buf + k, cap - (size_t)k, ",\"data_tokens\":\"%lld\"", (long long)data_tokens);
    for (int i = 0; i < LM_N_KEYS; i++) {
        const cli_opt *opt = lm_find_opt(opts, nopt, LM_KEYS[i].flag);
        char v[64];
        k += snprintf(buf + k, cap - (size_t)k, ",\"%s\":\"", opt->name);
        if (opt->kind == CLI_STR) {
            const char *sv = *(const char **)opt->dst;
            if (lm_json_escape(buf, cap - 3, sv ? sv : "") != 0) {
                free(buf);
                tg_set_error("--%s '%s' cannot be recorded in the checkpoint (a control character)", opt->name, sv);
                return NULL;
            }
            k = (int)strlen(buf);
        } else {
            lm_opt_text(opt, v, sizeof v);
            k += snprintf(buf + k, cap - (size_t)k, "%s", v);
        }
        k += snprintf(buf + k, cap - (size_t)k, "\"");
    }
    snprintf(buf + k, cap - (size_t)k, "}");
    char *all = lm_tok_meta(tok, buf); /* and the vocabulary itself */
    free(buf);
    if (!all) tg_set_error("out of memory");
    return all;
}

/* A flag given that contradicts the run: why names the flag and both. */
static int lm_refuse(char *why, size_t cap, const char *flag, const char *given, const char *run, const char *dir) {
    snprintf(why, cap,
             "--%s %s: the run in %s has %s, which cannot change on resume (start a new run with "
             "--init-from %s)",
             flag, given, dir, run, dir);
    return -1;
}

/* The model's shape flags against a checkpoint's (resume and init-from). */
static int lm_check_shape(const cli_opt *opts, int nopt, const lm_config *c, const char *dir, char *why, size_t cap,
                          options *o) {
    const char *names[6] = {"block", "layers", "heads", "dim", "gelu", "pe"};
    char run[6][32];
    snprintf(run[0], 32, "%d", c->block), snprintf(run[1], 32, "%d", c->layers), snprintf(run[2], 32, "%d", c->heads);
    snprintf(run[3], 32, "%d", c->dim), snprintf(run[4], 32, "%s", c->gelu), snprintf(run[5], 32, "%s", c->pe);
    for (int i = 0; i < 6; i++) {
        char given[64];
        lm_opt_text(lm_find_opt(opts, nopt, names[i]), given, sizeof given);
        if (cli_given(opts, nopt, names[i]) && strcmp(given, run[i]) != 0)
            return lm_refuse(why, cap, names[i], given, run[i], dir);
    }
    o->block = c->block, o->layers = c->layers, o->heads = c->heads, o->dim = c->dim, o->gelu = c->gelu, o->pe = c->pe;
    return 0;
}

/* --resume: the run's folder, its settings into o. -1 with why set (a bad
 * flag: exit 2) or with the error recorded (a bad checkpoint: exit 1). */
static int lm_resume_settings(options *o, const cli_opt *opts, int nopt, lm_config *c, lm_tok *tok, char *why,
                              size_t cap) {
    static char *dir, *file, strs[LM_N_KEYS][4096]; /* the file's string values the options point to */
    struct stat sb;
    if (stat(o->resume, &sb) == 0 && !S_ISDIR(sb.st_mode)) { /* a file: its folder is the run */
        char *copy = strdup(o->resume);
        const char *base = copy ? basename(copy) : "";
        if (strcmp(base, "train_state.safetensors") != 0) {
            snprintf(why, cap,
                     "--resume takes a run's folder (or its train_state.safetensors); to start from %s, "
                     "use --init-from",
                     o->resume);
            free(copy);
            return -1;
        }
        free(copy);
        copy = strdup(o->resume);
        dir = copy ? strdup(dirname(copy)) : NULL;
        free(copy);
    } else {
        dir = strdup(o->resume);
    }
    if (!dir) return tg_set_error("out of memory"), -1;
    if (cli_given(opts, nopt, "out") && strcmp(o->out, dir) != 0) {
        snprintf(why, cap, "--out %s and --resume %s name different runs (a resumed run stays in its folder)", o->out,
                 dir);
        return -1;
    }
    o->out = dir;
    file = tg_run_checkpoint_of(dir);
    tg_safetensors st;
    if (!file || tg_safetensors_open(file, &st) != 0) return -1;
    int rc = config_from_file(&st, file, "model.", c);
    if (rc == 0 && lm_tok_from_file(tok, &st, file) != 0) rc = -1;
    char v[4096], vw[64], msg[160];
    int file_steps = 0;
    if (rc == 0 && meta_value(&st, file, "data_tokens", v, sizeof v) == 0) {
        int64_t n = 0;
        if (tg_parse_int64(v, &n) != 0 || n < 1) rc = -1, tg_set_error("%s: metadata 'data_tokens' is '%s'", file, v);
        lm_data_tokens = n;
    } else {
        rc = -1;
    }
    if (rc == 0 && lm_check_shape(opts, nopt, c, dir, why, cap, o) != 0) rc = -1;
    for (int i = 0; rc == 0 && !why[0] && i < LM_N_KEYS; i++) {
        const cli_opt *opt = lm_find_opt(opts, nopt, LM_KEYS[i].flag);
        long len = tg_safetensors_meta(&st, opt->name, v, sizeof v);
        if (len < 0 && LM_KEYS[i].optional) {
            if (strcmp(opt->name, "decay-steps") == 0 && !cli_given(opts, nopt, "decay-steps"))
                o->decay_steps = -1; /* a run before --decay-steps decayed to its --steps */
            continue;
        }
        /* The file's value into a scratch copy of the option, by its rules. */
        int iv;
        double dv;
        const char *sv;
        cli_opt file_opt = *opt;
        file_opt.dst = opt->kind == CLI_INT ? (void *)&iv : opt->kind == CLI_REAL ? (void *)&dv : (void *)&sv;
        if (len < 0 || len >= (long)sizeof v || !cli_set(&file_opt, v, msg, sizeof msg)) {
            tg_set_error("%s: metadata '%s': %s", file, opt->name, len < 0 ? "missing" : msg);
            rc = -1;
            break;
        }
        if (strcmp(opt->name, "steps") == 0) file_steps = iv;
        char given[4096];
        lm_opt_text(opt, given, sizeof given);
        lm_opt_text(&file_opt, vw, sizeof vw);
        const char *run = opt->kind == CLI_STR ? v : vw;
        if (!cli_given(opts, nopt, opt->name)) {
            if (opt->kind == CLI_STR) snprintf(strs[i], sizeof strs[i], "%s", v), sv = strs[i];
            if (opt->kind == CLI_STR) *(const char **)opt->dst = sv[0] ? sv : NULL;
            if (opt->kind == CLI_INT) *(int *)opt->dst = iv;
            if (opt->kind == CLI_REAL) *(double *)opt->dst = dv;
        } else if (strcmp(given, run) != 0) {
            if (LM_KEYS[i].fixed) rc = lm_refuse(why, cap, opt->name, given, run[0] ? run : "(none)", dir);
            if (!LM_KEYS[i].fixed) printf("resume: --%s %s (the run had %s)\n", opt->name, given, run);
        }
    }
    if (o->decay_steps == -1) o->decay_steps = file_steps;
    tg_safetensors_close(&st);
    return rc;
}

/* --init-from: the model's shape from the checkpoint (a run folder, a
 * training state or best, or an lm.safetensors), into c and o. */
static int lm_init_settings(options *o, const cli_opt *opts, int nopt, lm_config *c, lm_tok *tok, char *why,
                            size_t cap) {
    char *file = tg_run_checkpoint_of(o->init_from);
    tg_safetensors st;
    if (!file || tg_safetensors_open(file, &st) != 0) return free(file), -1;
    char v[8];
    bool state = tg_safetensors_meta(&st, "tgrad_train_state", v, sizeof v) >= 0;
    int rc = config_from_file(&st, file, state ? "model." : "", c);
    if (rc == 0) rc = lm_tok_from_file(tok, &st, file);
    tg_safetensors_close(&st);
    if (rc == 0) rc = lm_check_shape(opts, nopt, c, o->init_from, why, cap, o);
    free(file);
    return rc;
}

/* The weights of --init-from into the new model. */
static int lm_init_weights(tg_decoder *m, const tg_params *params, const char *path) {
    char *file = tg_run_checkpoint_of(path);
    tg_safetensors st;
    char v[8];
    int rc = file && tg_safetensors_open(file, &st) == 0 ? 0 : -1;
    bool state = rc == 0 && tg_safetensors_meta(&st, "tgrad_train_state", v, sizeof v) >= 0;
    if (rc == 0) tg_safetensors_close(&st);
    if (rc == 0) rc = state ? tg_run_init_from(file, params) : tg_decoder_load(m, file);
    free(file);
    return rc;
}

/* The token file against the run: the same data on resume, tokens the
 * model's vocabulary covers, enough for a window and a validation batch. */
static int lm_check_data(const tg_token_data *d, const char *from, const lm_config *c, int B, int size) {
    int T = c->block;
    if (lm_data_tokens && d->n != lm_data_tokens)
        return tg_set_error("%s: the run trained on %lld tokens, the data holds %lld", from, (long long)lm_data_tokens,
                            (long long)d->n),
               -1;
    if (d->vocab > c->vocab)
        return tg_set_error("the data has tokens up to %d, the model's vocabulary is %d", d->vocab - 1, c->vocab), -1;
    if (B % size != 0) return tg_set_error("--batch %d: the %d ranks must divide it", B, size), -1;
    if (d->n_train < T + 1 || tg_token_data_val_batches(d, B, T) < 1)
        return tg_set_error("%lld tokens: the training split needs more than --block %d, the validation split "
                            "(10%%) at least --batch x --block = %d",
                            (long long)d->n, T, B * T),
               -1;
    return 0;
}

/* ---- figures ------------------------------------------------------------------ */
static int lm_draw_losses(const char *out, const char *data, const lm_config *c, const float *train, int64_t n,
                          const float *vs, const float *vl, int nv) {
    char *path = tg_run_path(out, "lm_loss.png"), title[160];
    const char *name = data ? strrchr(data, '/') : NULL;
    name = name ? name + 1 : data ? data : "Debian's fortunes";
    snprintf(title, sizeof title, "GPT (%d layers, d %d, T %d, %s positions) on %.50s: loss per %s", c->layers, c->dim,
             c->block, c->pe, name, c->vocab == TG_BYTE_VOCAB ? "byte" : "token");
    float *xs = malloc(sizeof(float) * (size_t)(n ? n : 1)); /* steps count from 1 */
    int rc = path && xs ? 0 : -1;
    for (int64_t i = 0; xs && i < n; i++) xs[i] = (float)(i + 1);
    tg_series s[2] = {{"train", xs, train, (int)n}, {"validation", vs, vl, nv}};
    tg_plot_opts po = {.title = title, .xlabel = "step", .ylabel = "cross-entropy (nats)"};
    if (rc == 0 && (rc = tg_viz_lineplot(path, s, nv > 0 ? 2 : 1, &po)) != 0)
        fprintf(stderr, "lm: %s\n", tg_viz_last_error());
    free(xs), free(path);
    return rc;
}

/* The attention weights of every layer and head for the first validation window. */
static tg_tensor *decoder_weights(const void *m, int l, int h) { return tg_decoder_attention_weights(m, l, h); }
static int lm_draw_attention(const char *out, tg_decoder *m, const tg_token_data *d, int B, int *x, int *y) {
    int T = m->cfg.block_size, L = m->cfg.n_layer;
    if (tg_token_data_val_batch(d, 0, B, T, x, y) != 0) return -1;
    tg_decoder_train(m, false);
    tg_decoder_record_attention(m, true);
    bool grad = tg_set_grad_enabled(false);
    tg_scope_begin();
    char *path = tg_run_path(out, "lm_attention.png"), title[128];
    snprintf(title, sizeof title, "Causal attention weights (%s positions), one validation window (rows: layers 1..%d)",
             tg_pe_kind_name(m->cfg.pos), L);
    int rc = path && tg_decoder_forward(m, x, 1, T) ? 0 : -1;
    if (rc == 0) rc = draw_attention_grid("lm", path, title, m, decoder_weights, L, m->cfg.n_head);
    tg_scope_end();
    tg_set_grad_enabled(grad);
    tg_decoder_record_attention(m, false);
    tg_decoder_train(m, true);
    free(path);
    return rc;
}

/* After each checkpoint: a short sample into the run's samples.jsonl (a
 * few bytes past a window, so that it costs little: each step past the
 * block is a whole forward, src/nn/decoder.h), then report.html. */
static int lm_report(const options *o, tg_decoder *m, const lm_tok *tok, const tg_token_data *d, int *x, int *y,
                     int64_t step) {
    static bool started; /* a new run in an old folder starts its samples afresh */
    if (!started && !o->resume) {
        char *old = tg_run_path(o->out, "samples.jsonl");
        if (old) remove(old);
        free(old);
    }
    started = true;
    const char *prompt = o->prompt[0] ? o->prompt : "\n";
    int64_t n;
    int n_new = o->tokens < 160 ? o->tokens : 160,
        *p = lm_tok_encode(tok, (const unsigned char *)prompt, strlen(prompt), &n);
    int *ids = p ? malloc(sizeof(int) * (size_t)(n + n_new + 1)) : NULL;
    int rc = ids && n > 0 ? 0 : -1;
    if (rc == 0) memcpy(ids, p, sizeof(int) * (size_t)n);
    if (rc == 0)
        rc = tg_decoder_generate(m, ids, (int)n, n_new, (tg_real)o->temperature, o->top_k, (uint64_t)o->seed, ids + n);
    /* the sample as text: its bytes, or the BPE's decoding */
    size_t len = (size_t)(n + n_new);
    int64_t bytes = rc == 0 && tok->bpe ? tg_bpe_decoded_size(tok->bpe, ids, len) : (int64_t)len;
    char *text = rc == 0 && bytes >= 0 ? malloc((size_t)bytes + 1) : NULL;
    if (rc == 0 && !text) rc = -1;
    if (rc == 0 && tok->bpe) rc = tg_bpe_decode(tok->bpe, ids, len, (unsigned char *)text, (size_t)bytes) < 0 ? -1 : 0;
    for (size_t i = 0; rc == 0 && !tok->bpe && i < len; i++) text[i] = (char)ids[i];
    if (rc == 0) rc = tg_report_append_sample(o->out, step, text, (size_t)bytes);
    if (rc == 0) rc = lm_write_report(o->out, NULL, m, tok, d, o->batch, x, y, step);
    if (rc != 0) fprintf(stderr, "lm: report: %s\n", tg_last_error() ? tg_last_error() : "out of memory");
    free(p), free(ids), free(text);
    return rc;
}

#endif
