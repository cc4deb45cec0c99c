/* lm: train a GPT-2 style language model on real text, byte by byte, and
 * sample from it.
 *
 *   text -> bytes (token = byte, V 256) -> .npy token file, 90% train / 10% validation
 *   windows of T bytes -> GPT decoder (nanoGPT's GPT: learned positions,
 *     pre-LayerNorm blocks, causal self-attention, GELU MLP, tied head)
 *   -> cross-entropy of the next byte -> AdamW (decay on matrices only),
 *      warm-up + cosine learning rate, gradient clipping, accumulation
 *
 * The default corpus is Debian's fortunes (one fortune after another); any
 * text file (or a .npy token file) can replace it with --data. Writes into
 * --out: the corpus and its token file, a metrics log (one JSON object per
 * step), the loss curves and the attention weights as PNGs, the whole
 * training state (--resume continues it bit for bit) and the model alone as
 * a safetensors file that nanoGPT's GPT loads with load_state_dict. Ends
 * with a sample and, as the last line, val_loss=<x> nats/byte.
 *
 *   lm                                      train with the defaults (~2 min on 2 cores)
 *   lm --sample --load out/lm/lm.safetensors --prompt "Q: "
 *   lm --resume out/lm/train_state.safetensors
 *   mpirun -np 2 lm --ddp                   data-parallel on 2 ranks (make MPI=1): the same run
 *
 * With --ddp (src/dist/) every rank holds the model, starts from rank 0's
 * weights, trains on its shard of each global batch of --batch windows and
 * averages the gradients with the others; validation batches are shared out
 * too. Rank 0 alone prints, and writes the log, figures and checkpoints; a
 * training state resumes on any number of ranks that divides --batch.
 *
 * A checkpoint is untrusted input: its metadata (the model's sizes, and for
 * a training state the run's settings) is parsed by the flags' own rules
 * (cli_set: whole strings, integers, the flags' ranges) and the sizes are
 * checked against the file's tensors before a model is built. */
#include <math.h>
#include <time.h>
#include "lm_model.h"

enum { LM_MAX_OPTS = 40 };

typedef struct {
    int steps, batch, block, layers, heads, dim, warmup, accum, eval_every, eval_batches, seed, threads, stop_after;
    int tokens, top_k;
    double lr, min_lr, weight_decay, clip, dropout, temperature;
    const char *data, *out, *resume, *load, *prompt, *gelu, *pe, *logits;
    bool sample, ddp;
} options;

static const char *const ABOUT =
    "Trains a GPT-2 style decoder (nanoGPT's GPT) on text, one byte per token: by default on\n"
    "Debian's fortunes, 90% for training and 10% for validation. Writes the metrics log, the loss\n"
    "curves, the attention weights, the training state and the model into --out, prints a sample\n"
    "and, last, val_loss=<x> nats/byte.\n"
    "With --sample --load CKPT it generates from a saved model instead (--logits FILE writes the\n"
    "logits of the prompt as .npy).";
static const char *const SYNOPSIS = "[options]  |  --sample --load CKPT [--prompt TEXT ...]";

/* The defaults train for about 100 s on 2 shared cores. Measured on the
 * fortunes (val loss after the run, time of the run with evaluations):
 *   2 layers, batch 32, lr 2e-3, 1200 steps   1.88 nats/byte   97 s
 *   4 layers, batch 16, lr 2e-3, 1000 steps   2.08             78 s
 *   4 layers, batch 32, lr 1e-3,  900 steps   2.10            139 s
 * (d 128, 4 heads, T 64 each): at this budget more tokens beat more depth. */
static int lm_options(options *o, cli_opt *opts) {
    *o = (options){.steps = 1200, .batch = 32, .block = 64, .layers = 2, .heads = 4, .dim = 128, .warmup = 50};
    o->accum = 1, o->eval_every = 100, o->eval_batches = 8, o->seed = 1, o->tokens = 300, o->top_k = 40, o->lr = 2e-3;
    o->min_lr = 2e-4, o->weight_decay = 0.1, o->clip = 1.0, o->temperature = 0.8, o->out = "out/lm";
    o->prompt = "The ", o->gelu = "tanh", o->pe = "learned";
    const cli_opt table[] = {
        {"data", CLI_STR, &o->data, "text file (or .npy token file) to train on; default: Debian's fortunes", 0, 0},
        {"out", CLI_STR, &o->out, "directory for the corpus, log, figures and checkpoints", 0, 0},
        {"steps", CLI_INT, &o->steps, "optimizer steps (the cosine schedule ends here)", 1, 1e7},
        {"batch", CLI_INT, &o->batch, "windows per micro-batch", 1, 4096},
        {"block", CLI_INT, &o->block, "window length T (block_size)", 2, 4096},
        {"layers", CLI_INT, &o->layers, "decoder blocks", 1, LM_MAX_LAYERS},
        {"heads", CLI_INT, &o->heads, "attention heads (must divide --dim)", 1, 256},
        {"dim", CLI_INT, &o->dim, "model width n_embd", 1, 8192},
        {"dropout", CLI_REAL, &o->dropout, "dropout probability (embeddings, attention, residual branches)", 0, 0.9},
        {"gelu", CLI_STR, &o->gelu, "tanh (GPT-2) or erf (nanoGPT's nn.GELU)", 0, 0},
        {"pe", CLI_STR, &o->pe, "positions: learned (GPT-2's table), relative (Shaw), rope or alibi", 0, 0},
        {"lr", CLI_REAL, &o->lr, "peak AdamW learning rate", 1e-8, 10},
        {"min-lr", CLI_REAL, &o->min_lr, "learning rate at the end of the cosine", 0, 10},
        {"warmup", CLI_INT, &o->warmup, "linear warm-up steps", 0, 1e7},
        {"weight-decay", CLI_REAL, &o->weight_decay, "AdamW decay of the matrices (biases and norms: 0)", 0, 10},
        {"clip", CLI_REAL, &o->clip, "clip the gradient's global norm to this (0: no clipping)", 0, 1e6},
        {"accum", CLI_INT, &o->accum, "micro-batches per step (gradient accumulation)", 1, 1024},
        {"eval-every", CLI_INT, &o->eval_every, "steps between validation losses", 1, 1e7},
        {"eval-batches", CLI_INT, &o->eval_batches, "validation batches (fixed windows) per evaluation", 1, 1e6},
        {"seed", CLI_INT, &o->seed, "random seed (initialisation, data order, dropout)", 0, 2e9},
        {"threads", CLI_INT, &o->threads, "threads (0: the default, all CPUs available)", 0, 1024},
        {"resume", CLI_STR, &o->resume,
         "continue the run saved in this training state (its settings come from the file)", 0, 0},
        {"stop-after", CLI_INT, &o->stop_after,
         "stop after this step and save the training state, as if interrupted (0: run to --steps)", 0, 1e7},
        {"sample", CLI_FLAG, &o->sample, "generate from --load CKPT instead of training", 0, 0},
        {"load", CLI_STR, &o->load, "model checkpoint for --sample or --logits (its sizes come from the file)", 0, 0},
        {"prompt", CLI_STR, &o->prompt, "text the sample starts from", 0, 0},
        {"tokens", CLI_INT, &o->tokens, "bytes to generate", 0, 100000},
        {"temperature", CLI_REAL, &o->temperature, "sampling temperature (0: greedy)", 0, 100},
        {"top-k", CLI_INT, &o->top_k, "sample among the k likeliest bytes (0: all)", 0, 65536},
        {"logits", CLI_STR, &o->logits, "with --load: write the logits of the prompt, [1, n, V], to this .npy", 0, 0},
        {"ddp", CLI_FLAG, &o->ddp,
         "data-parallel training under mpirun -np N (make MPI=1); --batch is the global batch, split over the ranks", 0,
         0},
    };
    int n = (int)(sizeof table / sizeof table[0]);
    for (int i = 0; i < n; i++) opts[i] = table[i];
    return n;
}

static const cli_opt *find_opt(const cli_opt *opts, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(opts[i].name, name) == 0) return &opts[i];
    return NULL;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- checkpoint metadata ------------------------------------------------------
 * The model's sizes under nanoGPT's GPTConfig names, in both files
 * (lm_model.h), and in a training state, the run's settings under their
 * flags' names, and the number of tokens it trains on:
 *   data, data_tokens, seed, steps, batch, lr, min-lr, warmup, weight-decay, clip, accum, dropout. */
static const char *const RUN_KEYS[] = {"seed",   "steps",        "batch", "lr",    "min-lr",
                                       "warmup", "weight-decay", "clip",  "accum", "dropout"};
enum { N_RUN_KEYS = sizeof RUN_KEYS / sizeof RUN_KEYS[0] };

/* Appends s to buf as a JSON string body; -1 for a control character. */
static int json_escape(char *buf, size_t cap, const char *s) {
    size_t n = strlen(buf);
    for (; *s; s++) {
        if ((unsigned char)*s < 0x20) return -1;
        if (n + 3 >= cap) return -1;
        if (*s == '"' || *s == '\\') buf[n++] = '\\';
        buf[n++] = *s;
    }
    buf[n] = 0;
    return 0;
}

/* The training state's metadata: the model's and the run's. -1 when the
 * data path cannot be written as JSON. */
static int run_meta(char *buf, size_t cap, const lm_config *c, const options *o, int64_t data_tokens) {
    model_meta(buf, cap, c);
    size_t n = strlen(buf) - 1; /* overwrite the closing brace */
    n += (size_t)snprintf(buf + n, cap - n, ",\"data_tokens\":\"%lld\"", (long long)data_tokens);
    snprintf(buf + n, cap - n,
             ",\"seed\":\"%d\",\"steps\":\"%d\",\"batch\":\"%d\",\"lr\":\"%.17g\",\"min-lr\":\"%.17g\","
             "\"warmup\":\"%d\",\"weight-decay\":\"%.17g\",\"clip\":\"%.17g\",\"accum\":\"%d\",\"dropout\":\"%.17g\","
             "\"data\":\"",
             o->seed, o->steps, o->batch, o->lr, o->min_lr, o->warmup, o->weight_decay, o->clip, o->accum, o->dropout);
    if (json_escape(buf, cap - 3, o->data ? o->data : "")) return -1;
    strcat(buf, "\"}");
    return 0;
}

/* A training state's run settings into o (the flags' rules and ranges). */
static int run_from_file(const tg_safetensors *st, const char *path, options *o, const cli_opt *opts, int nopt,
                         char *data, size_t data_cap, int64_t *data_tokens) {
    char v[64], why[128];
    char *end;
    if (meta_value(st, path, "data_tokens", v, sizeof v)) return -1;
    errno = 0;
    long long nt = strtoll(v, &end, 10);
    if (*end || errno || nt < 1) {
        tg_set_error("%s: metadata 'data_tokens' is '%s'; expected a positive integer", path, v);
        return -1;
    }
    *data_tokens = nt;
    for (int k = 0; k < N_RUN_KEYS; k++) {
        const cli_opt *opt = find_opt(opts, nopt, RUN_KEYS[k]);
        if (meta_value(st, path, RUN_KEYS[k], v, sizeof v)) return -1;
        if (!opt || !cli_set(opt, v, why, sizeof why)) {
            tg_set_error("%s: metadata '%s': %s", path, RUN_KEYS[k], opt ? why : "no such option");
            return -1;
        }
    }
    long len = tg_safetensors_meta(st, "data", data, data_cap);
    if (len < 0 || len >= (long)data_cap) {
        tg_set_error("%s: metadata 'data' is %s", path, len < 0 ? "missing" : "too long");
        return -1;
    }
    o->data = data[0] ? data : NULL;
    return 0;
}

/* ---- sampling from a checkpoint (--sample, --logits) ----------------------------- */

/* The prompt as tokens (its bytes); "" is one newline, as nanoGPT's start. */
static int *encode_prompt(const char *prompt, int *n) {
    if (!*prompt) prompt = "\n";
    *n = (int)strlen(prompt);
    int *ids = malloc(sizeof(int) * (size_t)*n);
    if (ids) tg_bytes_encode((const unsigned char *)prompt, (size_t)*n, ids);
    return ids;
}

/* Prints tokens as bytes (an id past 255 of a larger vocabulary as <id>). */
static void print_tokens(const int *ids, int n) {
    for (int i = 0; i < n; i++)
        if (ids[i] < 256)
            putchar(ids[i]);
        else
            printf("<%d>", ids[i]);
}

static int generate(tg_decoder *m, const options *o) {
    int n, rc = 0;
    int *prompt = encode_prompt(o->prompt, &n), *out = malloc(sizeof(int) * (size_t)(o->tokens + 1));
    if (!prompt || !out) {
        fprintf(stderr, "lm: out of memory for the sample\n");
        rc = -1;
    } else if (tg_decoder_generate(m, prompt, n, o->tokens, (tg_real)o->temperature, o->top_k, (uint64_t)o->seed,
                                   out) != 0) {
        fprintf(stderr, "lm: %s\n", tg_last_error());
        rc = -1;
    } else {
        printf("--- sample (temperature %g, top-k %d, seed %d) ---\n", o->temperature, o->top_k, o->seed);
        print_tokens(prompt, n);
        print_tokens(out, o->tokens);
        printf("\n---\n");
    }
    free(prompt);
    free(out);
    return rc;
}

/* The logits of the prompt, [1, n, V], in eval mode, as .npy. */
static int write_logits(tg_decoder *m, const options *o) {
    int n;
    int *ids = encode_prompt(o->prompt, &n);
    if (!ids) return -1;
    tg_decoder_train(m, false);
    bool grad = tg_set_grad_enabled(false);
    tg_scope_begin();
    tg_tensor *logits = tg_decoder_forward(m, ids, 1, n);
    int rc = logits && tg_npy_save(o->logits, logits) == 0 ? 0 : -1;
    if (rc)
        fprintf(stderr, "lm: %s\n", tg_last_error());
    else
        printf("wrote %s: logits [1, %d, %d] of the prompt\n", o->logits, n, m->cfg.vocab_size);
    tg_scope_end();
    tg_set_grad_enabled(grad);
    free(ids);
    return rc;
}

static int sample_mode(const options *o) {
    lm_config c;
    tg_decoder *m = lm_load(o->load, &c);
    int rc = m ? 0 : -1;
    if (rc != 0) fprintf(stderr, "lm: %s\n", tg_last_error());
    if (rc == 0 && o->logits) rc = write_logits(m, o);
    if (rc == 0 && (o->sample || !o->logits)) rc = generate(m, o);
    tg_decoder_free(m);
    tg_release_all();
    return rc == 0 ? 0 : 1;
}

/* ---- training ----------------------------------------------------------------------- */

typedef struct {
    options o;
    lm_config c;
    char dir_data[1024]; /* --data as read from a training state */
    char tokens_path[1100], state_path[1100], model_path[1100], log_path[1100];
    tg_token_data *d;
    tg_decoder *m;
    tg_params params;
    tg_optim *opt;
    tg_metrics_log *log;
    tg_dist_grads *grads; /* --ddp's gradient buckets */
    tg_named_rng rngs[LM_MAX_RNGS];
    char rng_names[LM_MAX_RNGS][32];
    int n_rngs, n_eval;
    int *x, *y;
    float *train_loss;    /* per step (index step - 1) */
    float *val_x, *val_y; /* evaluations: step, loss */
    int n_val;
} run;

static void run_free(run *r) {
    tg_metrics_log_close(r->log);
    tg_optim_free(r->opt);
    tg_params_free(&r->params);
    tg_decoder_free(r->m);
    tg_token_data_close(r->d);
    free(r->x);
    free(r->y);
    free(r->train_loss);
    free(r->val_x);
    free(r->val_y);
}

/* The corpus as a token file in --out: the fortunes, a text file's bytes,
 * or a .npy token file used as it is. */
static int prepare_tokens(run *r) {
    const options *o = &r->o;
    size_t n = o->data ? strlen(o->data) : 0;
    if (o->data && n > 4 && strcmp(o->data + n - 4, ".npy") == 0) {
        snprintf(r->tokens_path, sizeof r->tokens_path, "%s", o->data);
        return 0;
    }
    snprintf(r->tokens_path, sizeof r->tokens_path, "%s/tokens.npy", o->out);
    if (tg_dist_rank() != 0) return 0; /* rank 0 writes it (train_mode waits) */
    const char *text = o->data;
    char corpus[1100];
    if (!text) {
        snprintf(corpus, sizeof corpus, "%s/fortunes.txt", o->out);
        int64_t k = tg_fortunes_corpus(NULL, corpus);
        if (k < 0) return -1;
        printf("corpus: %lld fortunes from %s -> %s\n", (long long)k, TG_FORTUNES_DIR, corpus);
        text = corpus;
    }
    return tg_tokens_from_text(text, r->tokens_path);
}

/* The generators a step draws from: the data sampler and every dropout layer. */
static void collect_rngs(run *r) {
    tg_decoder *m = r->m;
    int n = 0;
#define ADD(nm, g)                                                   \
    do {                                                             \
        snprintf(r->rng_names[n], sizeof r->rng_names[n], "%s", nm); \
        r->rngs[n] = (tg_named_rng){r->rng_names[n], g};             \
        n++;                                                         \
    } while (0)
    ADD("data", tg_token_data_rng(r->d));
    ADD("drop", tg_dropout_rng(m->drop));
    for (int i = 0; i < m->cfg.n_layer; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "h%d.attn", i);
        ADD(nm, tg_dropout_rng(m->h[i]->attn->dropout));
        snprintf(nm, sizeof nm, "h%d.resid", i);
        ADD(nm, tg_dropout_rng(m->h[i]->resid_drop));
        snprintf(nm, sizeof nm, "h%d.mlp", i);
        ADD(nm, tg_dropout_rng(m->h[i]->mlp_drop));
    }
#undef ADD
    r->n_rngs = n;
}

/* --ddp with dropout: each dropout (tg_dropout, tg_attention) takes one
 * block of generator indices per forward, laid out batch first, so one
 * process's masks for the global batch are the ranks' blocks one after
 * another. Rank r starts its forward at index c0 + r * per[j] and every
 * rank ends at c0 + size * per[j]: the masks are the single-process ones,
 * and the generators stay in step on every rank. per[j], generator j's
 * indices per forward of a shard, is measured once with a forward. */
static int dropout_per_shard(run *r, int Bl, int T, uint64_t *per) {
    uint64_t c0[LM_MAX_RNGS];
    for (int j = 1; j < r->n_rngs; j++) c0[j] = r->rngs[j].rng->counter; /* rngs[0] is the data's */
    memset(r->x, 0, sizeof(int) * (size_t)Bl * T);
    memset(r->y, 0, sizeof(int) * (size_t)Bl * T);
    bool grad = tg_set_grad_enabled(false);
    tg_scope_begin();
    int rc = tg_decoder_loss(r->m, r->x, r->y, Bl, T) ? 0 : -1;
    tg_scope_end();
    tg_set_grad_enabled(grad);
    for (int j = 1; j < r->n_rngs; j++) {
        per[j] = r->rngs[j].rng->counter - c0[j];
        r->rngs[j].rng->counter = c0[j];
    }
    return rc;
}

/* Mean validation loss over the fixed windows (eval mode, no graph). */
static double evaluate(run *r) {
    int B = r->o.batch, T = r->c.block;
    double sum = 0;
    tg_decoder_train(r->m, false);
    bool grad = tg_set_grad_enabled(false);
    /* With --ddp each rank takes every size-th batch; the sums are added in rank order. */
    for (int i = tg_dist_rank(); i < r->n_eval; i += tg_dist_size()) {
        tg_token_data_val_batch(r->d, i, B, T, r->x, r->y);
        tg_scope_begin();
        tg_tensor *loss = tg_decoder_loss(r->m, r->x, r->y, B, T);
        sum += loss ? (double)tg_item(loss) : NAN;
        tg_scope_end();
    }
    tg_set_grad_enabled(grad);
    tg_decoder_train(r->m, true);
    if (tg_dist_allreduce_sum(&sum, 1) != 0) return NAN;
    return sum / r->n_eval;
}

/* A number of one line of the metrics log (tg_metrics_log_write's format). */
static bool log_number(const char *line, const char *key, double *v) {
    char pat[32];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(line, pat);
    if (!p) return false;
    p += strlen(pat);
    if (strncmp(p, "null", 4) == 0) {
        *v = NAN;
        return true;
    }
    char *end;
    *v = strtod(p, &end);
    return end != p;
}

/* Opens the metrics log. A resumed run keeps the lines of the steps it
 * already did (and its curves): the log is read, cut at the resumed step
 * and written again, so a log that ran past the checkpoint has no step twice. */
static int open_log(run *r, int64_t start) {
    tg_metrics *old = NULL;
    int n_old = 0;
    if (start > 0) {
        FILE *f = fopen(r->log_path, "r");
        char line[1024];
        old = calloc((size_t)start, sizeof *old);
        if (!old) return -1;
        while (f && fgets(line, sizeof line, f)) {
            tg_metrics mt;
            double s;
            if (!log_number(line, "step", &s) || !(s >= 1 && s <= (double)start) || n_old >= start) continue;
            mt.step = (int64_t)s;
            if (!log_number(line, "lr", &mt.lr) || !log_number(line, "loss", &mt.loss) ||
                !log_number(line, "val_loss", &mt.val_loss) || !log_number(line, "tokens_per_s", &mt.tokens_per_s) ||
                !log_number(line, "grad_norm", &mt.grad_norm))
                continue;
            old[n_old++] = mt;
        }
        if (f) fclose(f);
    }
    int rc = (r->log = tg_metrics_log_open(r->log_path, false)) ? 0 : -1;
    for (int i = 0; rc == 0 && i < n_old; i++) {
        rc = tg_metrics_log_write(r->log, &old[i]);
        r->train_loss[old[i].step - 1] = (float)old[i].loss;
        if (!isnan(old[i].val_loss)) {
            r->val_x[r->n_val] = (float)old[i].step;
            r->val_y[r->n_val++] = (float)old[i].val_loss;
        }
    }
    free(old);
    return rc;
}

static int draw_losses(run *r) {
    char path[1100], title[160];
    snprintf(path, sizeof path, "%s/lm_loss.png", r->o.out);
    const char *name = r->o.data ? strrchr(r->o.data, '/') : NULL;
    name = name ? name + 1 : r->o.data ? r->o.data : "Debian's fortunes";
    snprintf(title, sizeof title, "GPT (%d layers, d %d, T %d) on %.60s: loss per %s", r->c.layers, r->c.dim,
             r->c.block, name, r->c.vocab == TG_BYTE_VOCAB ? "byte" : "token");
    tg_series s[2] = {{"train", NULL, r->train_loss, r->o.steps}, {"validation", r->val_x, r->val_y, r->n_val}};
    /* Steps count from 1 on the x axis. */
    float *xs = malloc(sizeof(float) * (size_t)r->o.steps);
    if (!xs) return -1;
    for (int i = 0; i < r->o.steps; i++) xs[i] = (float)(i + 1);
    s[0].x = xs;
    tg_plot_opts po = {.title = title, .xlabel = "step", .ylabel = "cross-entropy (nats)"};
    int rc = tg_viz_lineplot(path, s, r->n_val > 0 ? 2 : 1, &po);
    free(xs);
    if (rc != 0) {
        fprintf(stderr, "lm: %s\n", tg_viz_last_error());
        return -1;
    }
    printf("wrote %s\n", path);
    return 0;
}

/* The attention weights of every layer and head for the first validation window. */
static int draw_attention(run *r) {
    int T = r->c.block, L = r->c.layers, H = r->c.heads, B = r->o.batch;
    if (tg_token_data_val_batch(r->d, 0, B, T, r->x, r->y) != 0) return -1;
    tg_decoder_train(r->m, false);
    tg_decoder_record_attention(r->m, true);
    bool grad = tg_set_grad_enabled(false);
    tg_scope_begin();
    int rc = tg_decoder_forward(r->m, r->x, 1, T) ? 0 : -1;
    float *w = malloc(sizeof(float) * (size_t)L * H * T * T);
    const float **mats = malloc(sizeof(float *) * (size_t)L * H);
    char(*titles)[32] = malloc(sizeof(char[32]) * (size_t)H);
    const char **tp = malloc(sizeof(char *) * (size_t)H);
    if (!w || !mats || !titles || !tp) rc = -1;
    for (int l = 0; rc == 0 && l < L; l++)
        for (int h = 0; rc == 0 && h < H; h++) {
            const tg_tensor *aw = tg_decoder_attention_weights(r->m, l, h); /* [1, T, T] */
            if (!aw) {
                rc = -1;
                break;
            }
            mats[l * H + h] = w + ((int64_t)l * H + h) * T * T;
            for (int i = 0; i < T * T; i++) w[((int64_t)l * H + h) * T * T + i] = (float)aw->data[i];
        }
    for (int h = 0; rc == 0 && h < H; h++) {
        snprintf(titles[h], 32, "Head %d", h + 1);
        tp[h] = titles[h];
    }
    char path[1100], title[128];
    snprintf(path, sizeof path, "%s/lm_attention.png", r->o.out);
    snprintf(title, sizeof title, "Causal attention weights, one validation window (rows: layers 1..%d)", L);
    tg_heatmap_opts ho = {.title = title,
                          .xlabel = "Key positions",
                          .ylabel = "Query positions",
                          .cmap = TG_CMAP_BLUES,
                          .shared_scale = 1};
    if (rc == 0 && tg_viz_heatmap_grid(path, L, H, mats, T, T, tp, &ho) != 0) {
        fprintf(stderr, "lm: %s\n", tg_viz_last_error());
        rc = -2;
    }
    if (rc == -1) fprintf(stderr, "lm: attention weights: %s\n", tg_last_error() ? tg_last_error() : "out of memory");
    if (rc == 0) {
        printf("wrote %s (window: \"", path);
        for (int i = 0; i < T && i < 40; i++) {
            int ch = r->x[i];
            if (ch == '\n')
                printf("\\n");
            else
                putchar(ch >= 32 && ch < 127 ? ch : '?');
        }
        printf("%s\")\n", T > 40 ? "..." : "");
    }
    tg_scope_end();
    tg_set_grad_enabled(grad);
    tg_decoder_record_attention(r->m, false);
    tg_decoder_train(r->m, true);
    free(w);
    free(mats);
    free(titles);
    free(tp);
    return rc == 0 ? 0 : -1;
}

/* One progress line, rewritten in place on a terminal; a line per
 * evaluation otherwise. */
static void progress(const run *r, int64_t step, double loss, double val, double lr, double tok_s, double left,
                     bool tty, bool evaluated) {
    if (tg_dist_rank() != 0) return;
    char v[16] = "   -  ";
    if (!isnan(val)) snprintf(v, sizeof v, "%.4f", val);
    if (tty)
        fprintf(stderr, "\rstep %5lld/%d  loss %.4f  val %s  lr %.2e  %7.0f tok/s  %4.0fs left  ", (long long)step,
                r->o.steps, loss, v, lr, tok_s, left);
    else if (evaluated)
        fprintf(stderr, "step %5lld/%d  loss %.4f  val %s  lr %.2e  %7.0f tok/s  %4.0fs left\n", (long long)step,
                r->o.steps, loss, v, lr, tok_s, left);
}

static int train_mode(options *o, const cli_opt *opts, int nopt) {
    run r = {0};
    tg_params_init(&r.params);
    int rc = 1, rank = tg_dist_rank(), size = tg_dist_size();
    bool lead = rank == 0;
    int64_t step = 0, data_tokens = 0;
    double val = NAN;
    /* A resumed run takes its model and settings from the training state
     * (into *o: the flags' table points there). */
    if (o->resume) {
        tg_safetensors st;
        if (tg_safetensors_open(o->resume, &st) != 0) goto fail;
        int bad = config_from_file(&st, o->resume, "model.", &r.c) ||
                  run_from_file(&st, o->resume, o, opts, nopt, r.dir_data, sizeof r.dir_data, &data_tokens);
        tg_safetensors_close(&st);
        if (bad) goto fail;
        o->block = r.c.block, o->layers = r.c.layers, o->heads = r.c.heads, o->dim = r.c.dim, o->gelu = r.c.gelu;
        o->pe = r.c.pe;
    }
    r.o = *o;
    const options *p = &r.o;
    if (p->stop_after > p->steps) {
        tg_set_error("--stop-after %d is past --steps %d", p->stop_after, p->steps);
        goto fail;
    }
    if (lead && cli_ensure_dir(p->out) != 0) { /* (--ddp: two mkdir -p at once race) */
        tg_set_error("cannot create directory %s", p->out);
        goto fail;
    }
    snprintf(r.state_path, sizeof r.state_path, "%s/train_state.safetensors", p->out);
    snprintf(r.model_path, sizeof r.model_path, "%s/lm.safetensors", p->out);
    snprintf(r.log_path, sizeof r.log_path, "%s/metrics.jsonl", p->out);
    if (prepare_tokens(&r) != 0 || tg_dist_barrier() != 0 ||
        !(r.d = tg_token_data_open(r.tokens_path, 0.1, (uint64_t)p->seed)))
        goto fail;
    int vocab = r.d->vocab <= TG_BYTE_VOCAB ? TG_BYTE_VOCAB : r.d->vocab;
    /* The same data, or the order of windows would not be the same. */
    if (o->resume && r.d->n != data_tokens) {
        tg_set_error("%s: the run trained on %lld tokens, %s holds %lld", o->resume, (long long)data_tokens,
                     r.tokens_path, (long long)r.d->n);
        goto fail;
    }
    if (o->resume && vocab > r.c.vocab) {
        tg_set_error("%s: the data has tokens up to %d, the model's vocabulary is %d", o->resume, vocab - 1, r.c.vocab);
        goto fail;
    }
    if (!o->resume) r.c = (lm_config){vocab, p->block, p->layers, p->heads, p->dim, true, p->gelu, p->pe};
    int B = p->batch, T = r.c.block, Bl = B / size; /* Bl: this rank's share */
    if (B % size != 0) {
        tg_set_error("--batch %d: the %d ranks must divide it (it is the global batch)", B, size);
        goto fail;
    }
    int64_t nval = tg_token_data_val_batches(r.d, B, T);
    if (r.d->n_train < T + 1 || nval < 1) {
        tg_set_error("%s: %lld tokens: the training split needs more than --block %d, the validation split (10%%) "
                     "at least --batch x --block = %d",
                     r.tokens_path, (long long)r.d->n, T, B * T);
        goto fail;
    }
    r.n_eval = (int)(nval < p->eval_batches ? nval : p->eval_batches);
    tg_rng init = tg_rng_new((uint64_t)p->seed);
    tg_decoder_config dc = decoder_config(&r.c, p->dropout);
    if (!(r.m = tg_decoder_new(&dc, &init)) || tg_decoder_params(r.m, &r.params, NULL)) goto fail;
    tg_optim_config oc = tg_adamw_config((tg_real)p->lr, (tg_real)p->weight_decay);
    oc.beta2 = (tg_real)0.95; /* nanoGPT's train.py */
    if (!(r.opt = tg_optim_new_groups(&oc, &r.params))) goto fail;
    collect_rngs(&r);
    if (o->resume) {
        if (tg_train_state_load(o->resume, &r.params, r.opt, &step, r.rngs, r.n_rngs) != 0) goto fail;
        if (step >= p->steps || (p->stop_after && step >= p->stop_after)) {
            tg_set_error("%s: the run is already at step %lld of %d%s", o->resume, (long long)step, p->steps,
                         p->stop_after ? " (or past --stop-after)" : "");
            goto fail;
        }
    }
    /* --ddp: everyone from rank 0's weights (a resumed run loaded them from one file already). */
    if (tg_dist_broadcast_params(&r.params) != 0 || (tg_dist_active() && !(r.grads = tg_dist_grads_new(&r.params, 0))))
        goto fail;
    r.x = malloc(sizeof(int) * (size_t)B * T);
    r.y = malloc(sizeof(int) * (size_t)B * T);
    r.train_loss = malloc(sizeof(float) * (size_t)p->steps);
    int max_val = p->steps / p->eval_every + 2;
    r.val_x = malloc(sizeof(float) * (size_t)max_val);
    r.val_y = malloc(sizeof(float) * (size_t)max_val);
    if (!r.x || !r.y || !r.train_loss || !r.val_x || !r.val_y) {
        tg_set_error("out of memory for batches of %d x %d tokens", B, T);
        goto fail;
    }
    for (int i = 0; i < p->steps; i++) r.train_loss[i] = NAN;
    if (lead && open_log(&r, step) != 0) goto fail;

    printf("data: %s, %lld tokens (%lld train, %lld validation; %d validation windows of %d per evaluation)\n",
           r.tokens_path, (long long)r.d->n, (long long)r.d->n_train, (long long)(r.d->n - r.d->n_train), r.n_eval * B,
           T);
    printf("model: GPT, V %d, T %d, %d layers, %d heads, d %d, %lld parameters; batch %d x %d accum, %d steps, "
           "AdamW lr %g -> %g (warm-up %d), weight decay %g, clip %g, dropout %g\n",
           r.c.vocab, T, r.c.layers, r.c.heads, r.c.dim, (long long)tg_decoder_num_params(r.m), B, p->accum, p->steps,
           p->lr, p->min_lr, p->warmup < p->steps ? p->warmup : p->steps, p->weight_decay, p->clip, p->dropout);
    if (step > 0) printf("resumed from %s at step %lld\n", o->resume, (long long)step);
    if (tg_dist_active())
        printf("ddp: %d ranks, %d windows each per micro-batch, gradients averaged in %d buckets\n", size, Bl,
               tg_dist_grads_buckets(r.grads));
    fflush(stdout);

    /* A run shorter than its warm-up warms up over all of it. */
    tg_lr_schedule sched = tg_lr_warmup_cosine(p->lr, p->min_lr, p->warmup < p->steps ? p->warmup : p->steps, p->steps);
    int64_t end = p->stop_after ? p->stop_after : p->steps, first = step;
    bool tty = isatty(2);
    uint64_t per[LM_MAX_RNGS] = {0}, c0[LM_MAX_RNGS];
    bool shard_drop = size > 1 && p->dropout > 0;
    if (shard_drop && dropout_per_shard(&r, Bl, T, per) != 0) goto fail;
    double t0 = now();
    for (; step < end; step++) {
        double lr = tg_lr_at(&sched, step), t_step = now(), loss = 0;
        if (isnan(lr) || tg_optim_set_lr(r.opt, (tg_real)lr) != 0) goto fail;
        tg_optim_zero_grad(r.opt);
        for (int k = 0; k < p->accum; k++) {
            /* --ddp: this rank's Bl windows of the B every rank draws. */
            tg_token_data_batch_shard(r.d, B, T, rank, size, r.x, r.y);
            for (int j = 1; shard_drop && j < r.n_rngs; j++) {
                c0[j] = r.rngs[j].rng->counter;
                r.rngs[j].rng->counter = c0[j] + (uint64_t)rank * per[j];
            }
            tg_scope_begin();
            tg_tensor *l = tg_decoder_loss(r.m, r.x, r.y, Bl, T);
            double lv = l ? (double)tg_item(l) : NAN;
            /* The last micro-batch's backward starts the gradient all-reduce. */
            int bad = !l || (r.grads && k == p->accum - 1 && tg_dist_grads_arm(r.grads) != 0) ||
                      tg_backward(p->accum > 1 ? tg_mul_scalar(l, (tg_real)(1.0 / p->accum)) : l) != 0;
            tg_scope_end();
            if (bad) goto fail;
            for (int j = 1; shard_drop && j < r.n_rngs; j++) r.rngs[j].rng->counter = c0[j] + (uint64_t)size * per[j];
            loss += lv / p->accum;
        }
        /* Every rank's average gradient, and loss (the mean of the shards' means). */
        if (r.grads && (tg_dist_allreduce_grads(r.grads) != 0 || tg_dist_allreduce_sum(&loss, 1) != 0)) goto fail;
        loss /= size;
        /* Diverged: stop at once. A uniform guess costs ln V. */
        if (!(loss <= 100 * log((double)r.c.vocab))) {
            tg_set_error("training diverged: the loss is %g at step %lld (a uniform guess costs %.2f; try a smaller "
                         "--lr)",
                         loss, (long long)step + 1, log((double)r.c.vocab));
            goto fail;
        }
        double gn = p->clip > 0 ? (double)tg_clip_grad_norm(&r.params, (tg_real)p->clip)
                                : (double)tg_clip_grad_norm(&r.params, (tg_real)INFINITY);
        tg_optim_step(r.opt);
        double dt = now() - t_step;
        r.train_loss[step] = (float)loss;
        bool evaluated = (step + 1) % p->eval_every == 0 || step + 1 == p->steps || step + 1 == end;
        double v = NAN;
        if (evaluated) {
            v = val = evaluate(&r);
            r.val_x[r.n_val] = (float)(step + 1);
            r.val_y[r.n_val++] = (float)v;
        }
        double tok_s = (double)B * T * p->accum / dt;
        tg_metrics mt = {step + 1, lr, loss, v, tok_s, gn};
        if (lead && tg_metrics_log_write(r.log, &mt) != 0) goto fail;
        double el = now() - t0, done = (double)(step + 1 - first);
        progress(&r, step + 1, loss, val, lr, (double)B * T * p->accum * done / el,
                 el / done * (double)(end - step - 1), tty, evaluated);
    }
    if (tty && lead) fputc('\n', stderr);
    printf("trained steps %lld..%lld in %.1f s\n", (long long)first + 1, (long long)step, now() - t0);
    if (tg_dist_active() && step > first) {
        tg_dist_stats ds = tg_dist_grads_stats(r.grads);
        printf("ddp: all-reduce of %.2f MB per step, %.2f ms per step waited for after backward; %ld of %ld buckets "
               "started during backward\n",
               ds.bytes / 1e6, 1e3 * ds.wait_s / (double)ds.calls, ds.buckets_early,
               ds.buckets_early + ds.buckets_late);
    }
    if (!lead) { /* rank 0 writes the files and the sample; the others wait for it */
        rc = tg_dist_barrier() == 0 ? 0 : 1;
        if (rc) goto fail;
        goto done;
    }

    char meta[4096];
    if (run_meta(meta, sizeof meta, &r.c, p, r.d->n) != 0) {
        tg_set_error("--data path '%.200s' does not fit the checkpoint's metadata (a control character, or too long)",
                     p->data);
        goto fail;
    }
    if (tg_train_state_save_meta(r.state_path, &r.params, r.opt, step, r.rngs, r.n_rngs, meta) != 0) goto fail;
    printf("wrote %s (training state at step %lld; continue with --resume %s)\n", r.state_path, (long long)step,
           r.state_path);
    model_meta(meta, sizeof meta, &r.c);
    if (tg_decoder_save(r.m, r.model_path, meta) != 0) goto fail;
    printf("wrote %s (model; --sample --load it, or load_state_dict in nanoGPT's GPT)\n", r.model_path);
    if (draw_losses(&r) != 0 || draw_attention(&r) != 0) {
        rc = 1;
        goto done;
    }
    printf("wrote %s (one JSON object per step)\n", r.log_path);
    if (isnan(val) && !tg_dist_active()) val = evaluate(&r); /* (a collective: not on rank 0 alone) */
    if (generate(r.m, p) != 0) {
        rc = 1;
        goto done;
    }
    printf("val_loss=%.4f nats/%s\n", val, r.c.vocab == TG_BYTE_VOCAB ? "byte" : "token");
    fflush(stdout);
    rc = tg_dist_barrier() == 0 ? 0 : 1;
    if (rc) goto fail;
    goto done;
fail:
    fprintf(stderr, "%slm: %s\n", isatty(2) ? "\n" : "", tg_last_error() ? tg_last_error() : "failed");
    rc = 1;
done:
    /* --ddp: the other ranks may be inside a collective this rank will never join. */
    if (rc != 0 && tg_dist_active()) tg_dist_abort(rc);
    tg_dist_grads_free(r.grads);
    run_free(&r);
    tg_release_all();
    return rc;
}

int main(int argc, char **argv) {
    options o;
    cli_opt opts[LM_MAX_OPTS];
    const int nopt = lm_options(&o, opts);
    cli_parse(argc, argv, SYNOPSIS, ABOUT, opts, nopt, NULL, 0);
    const char *why = NULL;
    if (strcmp(o.gelu, "tanh") != 0 && strcmp(o.gelu, "erf") != 0) why = "--gelu must be tanh or erf";
    if (lm_pe_kind(o.pe) < 0) why = "--pe must be learned, relative, rope or alibi";
    if (o.dim % o.heads != 0) why = "--heads must divide --dim";
    if ((o.sample || o.logits) && !o.load) why = "--sample and --logits need --load CKPT";
    if (o.load && o.resume) why = "--load and --resume exclude each other";
    if (o.ddp && o.load) why = "--ddp trains; --load samples in one process";
    if (why) { return cli_usage_error(argv[0], SYNOPSIS, ABOUT, opts, nopt, "%s", why); }
    if (o.threads > 0) {
        int got = tg_set_num_threads(o.threads);
        if (got < o.threads) fprintf(stderr, "lm: --threads %d capped at %d (the CPUs available)\n", o.threads, got);
    }
    if (o.load) return sample_mode(&o);
    if (!o.ddp) return train_mode(&o, opts, nopt);
    if (tg_dist_init(&argc, &argv) != 0) {
        fprintf(stderr, "lm: --ddp: %s\n", tg_last_error());
        return 2;
    }
    /* Rank 0 speaks for the run; the others print only their errors. */
    if (tg_dist_rank() != 0 && !freopen("/dev/null", "w", stdout)) return 1;
    int rc = train_mode(&o, opts, nopt);
    tg_dist_finalize();
    return rc;
}
