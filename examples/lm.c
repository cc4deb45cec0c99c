/* lm: train a GPT-2 style language model on real text, byte by byte, and
 * sample from it.
 *
 *   text -> bytes (token = byte, V 256) -> .npy token file, 90% train / 10% validation
 *   windows of T bytes -> GPT decoder (nanoGPT's GPT: learned positions,
 *     pre-LayerNorm blocks, causal self-attention, GELU MLP, tied head)
 *   -> cross-entropy of the next byte -> AdamW (decay on matrices only),
 *      warm-up + cosine learning rate, gradient clipping, accumulation
 *
 * A run is a folder (--out, src/train/run.h): the corpus and its token
 * file, metrics.jsonl, train_state.safetensors (model, optimizer, step and
 * generators, saved at every evaluation, on Ctrl-C and at the end),
 * best.safetensors, the model alone as lm.safetensors (nanoGPT's GPT loads
 * it with load_state_dict) and the figures. Ends with a sample and, as the
 * last line, val_loss=<x> nats/byte.
 *
 *   lm                                       train with the defaults (~40 s on 2 cores)
 *   lm --resume out/lm                       continue a stopped run, bit for bit
 *   lm --resume out/lm --steps 2000          extend a finished one (the cosine keeps --decay-steps)
 *   lm --init-from out/lm --data my.txt --out out/ft    fine-tune on another text
 *   lm --sample --load out/lm --prompt "Q: " sample from a run (or any checkpoint it wrote)
 *   mpirun -np 2 lm --ddp                    data-parallel on 2 ranks (make MPI=1): the same run
 *
 * A checkpoint is untrusted input: its metadata is parsed by the flags'
 * own rules (cli_set) and the sizes checked against its tensors before a
 * model is built (tg_decoder_config_of, tg_decoder_open). */
#include <limits.h>
#include <math.h>
#include "cli.h"
#include "tgrad.h"

typedef struct {
    int steps, decay_steps, batch, block, layers, heads, dim, warmup, accum, eval_every, eval_batches, save_every;
    int patience, seed, threads, stop_after, tokens, top_k;
    double lr, min_lr, weight_decay, clip, dropout, temperature;
    const char *data, *out, *resume, *init_from, *load, *prompt, *gelu, *pe, *logits, *tokenizer, *precision;
    bool sample, ddp, overwrite;
} options;

static const char *const ABOUT =
    "Trains a GPT-2 style decoder (nanoGPT's GPT) on text, one byte per token: by default on\n"
    "Debian's fortunes, 90% for training and 10% for validation. The run is the folder --out:\n"
    "metrics log, checkpoints (at every evaluation, the best, on Ctrl-C), the model, the figures.\n"
    "Prints a sample and, last, val_loss=<x> nats/byte. --resume DIR continues or extends a run;\n"
    "--init-from CKPT starts a new one from its weights. With --sample --load CKPT it generates\n"
    "from a saved model instead (--logits FILE writes the logits of the prompt as .npy).";
static const char *const SYNOPSIS = "[options]  |  --resume DIR [options]  |  --sample --load CKPT [--prompt TEXT ...]";

/* The defaults train for about 40 s on 2 shared cores; measured on the
 * fortunes, at this budget more tokens beat more depth (BENCHMARKS.md). */
static bool g_profile; /* --profile: tg_run_close writes the table (src/tensor/profile.h) */
static int lm_options(options *o, cli_opt *opts) {
    *o = (options){.steps = 1200, .batch = 32, .block = 64, .layers = 2, .heads = 4, .dim = 128, .warmup = 50};
    o->accum = 1, o->eval_every = 100, o->eval_batches = 8, o->seed = 1, o->tokens = 300, o->top_k = 40, o->lr = 2e-3;
    o->min_lr = 2e-4, o->weight_decay = 0.1, o->clip = 1.0, o->temperature = 0.8, o->out = "out/lm";
    o->prompt = "The ", o->gelu = "tanh", o->pe = "learned", o->tokenizer = "bytes", o->precision = "fp32";
    const cli_opt table[] = {
        {"data", CLI_STR, &o->data, "text file (or .npy token file) to train on; default: Debian's fortunes", 0, 0},
        {"out", CLI_STR, &o->out, "the run's folder: corpus, log, checkpoints, figures", 0, 0},
        {"steps", CLI_INT, &o->steps, "optimizer steps (on --resume, a larger value extends the run)", 1, 1e7},
        {"decay-steps", CLI_INT, &o->decay_steps, "step where the cosine reaches --min-lr (0: --steps)", 0, 1e7},
        {"batch", CLI_INT, &o->batch, "windows per micro-batch", 1, 4096},
        {"block", CLI_INT, &o->block, "window length T (block_size)", 2, 4096},
        {"layers", CLI_INT, &o->layers, "decoder blocks", 1, TG_DECODER_MAX_LAYERS},
        {"heads", CLI_INT, &o->heads, "attention heads (must divide --dim)", 1, 256},
        {"dim", CLI_INT, &o->dim, "model width n_embd", 1, 8192},
        {"dropout", CLI_REAL, &o->dropout, "dropout probability (embeddings, attention, residual branches)", 0, 0.9},
        {"gelu", CLI_STR, &o->gelu, "tanh (GPT-2) or erf (nanoGPT's nn.GELU)", 0, 0},
        {"pe", CLI_STR, &o->pe, "positions: learned (GPT-2's table), none, relative (Shaw), rope or alibi", 0, 0},
        {"tokenizer", CLI_STR, &o->tokenizer, "bytes, gpt2, or a .tiktoken vocabulary (tgrad-tokenize train)", 0, 0},
        {"precision", CLI_STR, &o->precision, "fp32, or bf16: products in bfloat16 with fp32 sums (torch.autocast)", 0,
         0},
        {"lr", CLI_REAL, &o->lr, "peak AdamW learning rate", 1e-8, 10},
        {"min-lr", CLI_REAL, &o->min_lr, "learning rate at the end of the cosine", 0, 10},
        {"warmup", CLI_INT, &o->warmup, "linear warm-up steps", 0, 1e7},
        {"weight-decay", CLI_REAL, &o->weight_decay, "AdamW decay of the matrices (biases and norms: 0)", 0, 10},
        {"clip", CLI_REAL, &o->clip, "clip the gradient's global norm to this (0: no clipping)", 0, 1e6},
        {"accum", CLI_INT, &o->accum, "micro-batches per step (gradient accumulation)", 1, 1024},
        {"eval-every", CLI_INT, &o->eval_every, "steps between validation losses (and checkpoints)", 1, 1e7},
        {"eval-batches", CLI_INT, &o->eval_batches, "validation batches (fixed windows) per evaluation", 1, 1e6},
        {"save-every", CLI_INT, &o->save_every, "steps between checkpoints (0: at every evaluation)", 0, 1e7},
        {"patience", CLI_INT, &o->patience, "stop after this many evaluations without a better val loss (0: never)", 0,
         1e6},
        {"seed", CLI_INT, &o->seed, "random seed (initialisation, data order, dropout)", 0, 2e9},
        {"threads", CLI_INT, &o->threads, "threads (0: the default, all CPUs available)", 0, 1024},
        {"resume", CLI_STR, &o->resume, "continue the run in this folder (its settings come from its checkpoint)", 0,
         0},
        {"init-from", CLI_STR, &o->init_from, "start a new run from this checkpoint's (or run folder's) weights", 0, 0},
        {"overwrite", CLI_FLAG, &o->overwrite, "a new run replaces the run already in --out (else refused)", 0, 0},
        {"stop-after", CLI_INT, &o->stop_after, "stop after this step and save, as if interrupted (0: no)", 0, 1e7},
        {"sample", CLI_FLAG, &o->sample, "generate from --load CKPT instead of training", 0, 0},
        {"load", CLI_STR, &o->load, "checkpoint (or run folder) for --sample or --logits", 0, 0},
        {"prompt", CLI_STR, &o->prompt, "text the sample starts from", 0, 0},
        {"tokens", CLI_INT, &o->tokens, "bytes to generate", 0, 100000},
        {"temperature", CLI_REAL, &o->temperature, "sampling temperature (0: greedy)", 0, 100},
        {"top-k", CLI_INT, &o->top_k, "sample among the k likeliest bytes (0: all)", 0, 65536},
        {"logits", CLI_STR, &o->logits, "with --load: write the logits of the prompt, [1, n, V], to this .npy", 0, 0},
        {"profile", CLI_FLAG, &g_profile, "time each op of the steps: profile.txt and .json in the run folder", 0, 0},
        {"ddp", CLI_FLAG, &o->ddp, "data-parallel under mpirun -np N (make MPI=1); --batch is the global batch", 0, 0},
    };
    int n = (int)(sizeof table / sizeof table[0]);
    for (int i = 0; i < n; i++) opts[i] = table[i];
    return n;
}

/* The run's settings (src/train/run.h, tg_setting): the flags a checkpoint
 * records, by the flags' own types and ranges; the fixed ones cannot change
 * on resume. The model's shape is the model's own metadata, checked by
 * lm_shape; so is "tokenizer" (its kind): the flag's key is "tokenizer.spec". */
static const char *const LM_FIXED = " data seed tokenizer ";
static const char *const LM_CHANGEABLE = " steps decay-steps batch lr min-lr warmup weight-decay clip accum dropout "
                                         "eval-every eval-batches save-every patience precision ";
enum { LM_MAX_SETTINGS = 24 };

static bool lm_listed(const char *list, const char *name) {
    const char *at = strstr(list, name);
    size_t n = strlen(name);
    return at && at[-1] == ' ' && at[n] == ' ';
}

/* The settings of the flags in opts, then the data's size (a late one: a
 * resume checks it when the token file is read). Returns their number. */
static int lm_settings(tg_setting *s, const cli_opt *opts, int nopt, int *data_tokens) {
    static const tg_setting_type type[] = {TG_SETTING_INT, TG_SETTING_REAL, TG_SETTING_STRING, TG_SETTING_BOOL};
    int n = 0;
    for (int i = 0; i < nopt && n < LM_MAX_SETTINGS - 1; i++) {
        bool fixed = lm_listed(LM_FIXED, opts[i].name), changeable = lm_listed(LM_CHANGEABLE, opts[i].name);
        if (fixed || changeable)
            s[n++] = (tg_setting){opts[i].name,
                                  type[opts[i].kind],
                                  opts[i].dst,
                                  changeable,
                                  cli_given(opts, nopt, opts[i].name),
                                  opts[i].min,
                                  opts[i].max,
                                  strcmp(opts[i].name, "tokenizer") == 0 ? "tokenizer.spec" : NULL};
    }
    s[n++] = (tg_setting){"data_tokens", TG_SETTING_INT, data_tokens, false, true, 1, INT_MAX, NULL};
    return n;
}

/* ---- sampling from a checkpoint (--sample, --logits) ------------------------ */
static int sample_mode(const options *o) {
    tg_tokenizer *tok = NULL;
    tg_decoder *m = tg_decoder_open(o->load, &tok);
    int rc = m ? 0 : -1;
    if (rc == 0 && o->logits) rc = tg_decoder_write_logits(m, tok, o->prompt, o->logits);
    if (rc == 0 && (o->sample || !o->logits))
        rc = tg_decoder_print_sample(m, tok, o->prompt, o->tokens, o->temperature, o->top_k, (uint64_t)o->seed);
    if (rc != 0) fprintf(stderr, "lm: %s\n", tg_last_error());
    tg_tokenizer_free(tok);
    tg_decoder_free(m);
    tg_release_all();
    return rc == 0 ? 0 : 1;
}

/* ---- training ------------------------------------------------------------------ */
typedef struct {
    options o;
    tg_decoder_config dc; /* the model's shape: the flags', or a checkpoint's */
    char *tokens_path, *model_path;
    tg_token_data *d;
    tg_decoder *m;
    tg_params params;
    tg_optim *opt;
    tg_rngs rngs;
    tg_run *run;
    tg_tokenizer *tok;
    tg_decoder_outputs outs; /* what each checkpoint writes besides the state */
    int *x, *y, n_eval;
    const cli_opt *opts; /* the flags' table, for the settings a checkpoint records */
    int nopt;
} lm_run;

/* The model's shape and tokenizer from a checkpoint (--resume: the run's
 * state; --init-from: a run folder, a state, best or an lm.safetensors)
 * into r and its flags; a shape flag given that differs: why names both. */
static int lm_shape(lm_run *r, const char *from, char *why, size_t cap) {
    options *o = &r->o;
    tg_decoder_config *c = &r->dc;
    char given[64], run[64];
    int rc = tg_decoder_config_of(from, c, &r->tok);
    const char *names[] = {"block", "layers", "heads", "dim", "gelu", "pe"};
    const char *str[] = {c->gelu == TG_DEC_GELU_ERF ? "erf" : "tanh", tg_pe_kind_name(c->pos)};
    const int num[] = {c->block_size, c->n_layer, c->n_head, c->n_embd};
    for (int i = 0; rc == 0 && i < 6; i++) {
        const cli_opt *opt = NULL;
        for (int k = 0; k < r->nopt; k++) opt = strcmp(r->opts[k].name, names[i]) == 0 ? &r->opts[k] : opt;
        i < 4 ? snprintf(run, sizeof run, "%d", num[i]) : snprintf(run, sizeof run, "%s", str[i - 4]);
        i < 4 ? snprintf(given, sizeof given, "%d", *(int *)opt->dst)
              : snprintf(given, sizeof given, "%s", *(const char **)opt->dst);
        if (i >= 4) *(const char **)opt->dst = str[i - 4];
        if (!cli_given(r->opts, r->nopt, names[i]) || strcmp(given, run) == 0) continue;
        if (o->resume)
            snprintf(why, cap,
                     "--%s %s: the run in %s has %s, which cannot change on resume (start a new run from its weights "
                     "with --init-from %s --out OTHER)",
                     names[i], given, o->out, run, o->out);
        else
            snprintf(why, cap, "--%s %s: the checkpoint %s has %s (a run started from it keeps its model's shape)",
                     names[i], given, from, run);
        rc = -1;
    }
    o->block = c->block_size, o->layers = c->n_layer, o->heads = c->n_head, o->dim = c->n_embd;
    return rc;
}

/* --resume: the run's folder (a folder, or a train_state.safetensors'),
 * its settings and model into r. -1 with why set (a bad flag: exit 2) or
 * the error recorded (a bad checkpoint: exit 1). */
static int lm_resume(lm_run *r, char *why, size_t cap) {
    static char *dir; /* the run's folder, o->out from here */
    options *o = &r->o;
    free(dir);
    if (!(dir = tg_run_resume_folder(o->resume))) return snprintf(why, cap, "%s", tg_last_error()), -1;
    if (cli_given(r->opts, r->nopt, "out") && strcmp(o->out, dir) != 0)
        return snprintf(why, cap, "--out %s and --resume %s name different runs (a resumed run stays in its folder)",
                        o->out, dir),
               -1;
    o->out = dir;
    tg_setting set[LM_MAX_SETTINGS];
    int unused = 0, rc = tg_run_settings_resume(dir, set, lm_settings(set, r->opts, r->nopt, &unused) - 1);
    if (rc == 1) snprintf(why, cap, "%s", tg_last_error());
    return rc != 0 ? -1 : lm_shape(r, dir, why, cap);
}

static void print_setup(const lm_run *r, int64_t step) {
    const options *p = &r->o;
    int B = p->batch, T = r->dc.block_size;
    printf("data: %s, %lld tokens (%lld train, %lld validation; %d validation windows of %d per evaluation)\n",
           r->tokens_path, (long long)r->d->n, (long long)r->d->n_train, (long long)(r->d->n - r->d->n_train),
           r->n_eval * B, T);
    printf("model: GPT, V %d, T %d, %d layers, %d heads, d %d, %lld parameters; batch %d x %d accum, %d steps, "
           "AdamW lr %g -> %g (warm-up %d, cosine to step %d), weight decay %g, clip %g, dropout %g\n",
           r->dc.vocab_size, T, r->dc.n_layer, r->dc.n_head, r->dc.n_embd, (long long)tg_decoder_num_params(r->m), B,
           p->accum, p->steps, p->lr, p->min_lr, p->warmup, p->decay_steps, p->weight_decay, p->clip, p->dropout);
    if (step > 0) printf("resumed %s at step %lld\n", p->out, (long long)step);
    if (p->init_from) printf("weights from %s\n", p->init_from);
    if (tg_dist_active())
        printf("ddp: %d ranks, %d windows each per micro-batch\n", tg_dist_size(), B / tg_dist_size());
    fflush(stdout);
}

/* Builds the model, optimizer and run; the loop; the last files. */
static int train_mode(lm_run *r) {
    options *p = &r->o;
    int size = tg_dist_size(), rank = tg_dist_rank();
    tg_run_config rc = tg_run_defaults(p->out, p->steps);
    rc.accum = p->accum, rc.clip = p->clip, rc.eval_every = p->eval_every, rc.save_every = p->save_every;
    rc.patience = p->patience, rc.stop_after = p->stop_after, rc.resume = p->resume != NULL;
    rc.overwrite = p->overwrite, rc.init_from = p->init_from;
    if (tg_run_claim(&rc) != 0 || !(r->tokens_path = tg_run_tokens(p->out, p->data, r->tok, p->resume != NULL)) ||
        tg_dist_barrier() != 0 || tg_tokens_check(r->tokens_path, r->tok) != 0 ||
        !(r->d = tg_token_data_open(r->tokens_path, 0.1, (uint64_t)p->seed)) ||
        tg_decoder_check_data(r->d, &r->dc, p->batch, size) != 0)
        return 1;
    int B = p->batch, T = r->dc.block_size;
    r->n_eval = (int)fmin((double)tg_token_data_val_batches(r->d, B, T), p->eval_batches);
    tg_rng init = tg_rng_new((uint64_t)p->seed);
    r->dc.dropout = (tg_real)p->dropout;
    tg_optim_config oc = tg_adamw_config((tg_real)p->lr, (tg_real)p->weight_decay);
    oc.beta2 = (tg_real)0.95; /* nanoGPT's train.py */
    if (!(r->m = tg_decoder_new(&r->dc, &init)) || tg_decoder_params(r->m, &r->params, NULL) ||
        !(r->opt = tg_optim_new_groups(&oc, &r->params)) || tg_rngs_add(&r->rngs, "data", tg_token_data_rng(r->d)) ||
        tg_decoder_rngs(r->m, &r->rngs) || (p->init_from && tg_decoder_init_from(r->m, &r->params, p->init_from)) ||
        !(r->x = malloc(sizeof(int) * (size_t)B * T)) || !(r->y = malloc(sizeof(int) * (size_t)B * T)))
        return 1;
    char meta[1024];
    tg_decoder_config_json(&r->dc, meta, sizeof meta);
    char *all = tg_tokenizer_meta(r->tok, meta); /* the model's metadata: its config and tokenizer */
    tg_setting set[LM_MAX_SETTINGS];
    int data_tokens = r->d->n > INT_MAX ? INT_MAX : (int)r->d->n;
    rc.schedule = tg_lr_warmup_cosine(p->lr, p->min_lr, p->warmup, p->decay_steps);
    rc.max_loss = 100 * log((double)r->dc.vocab_size); /* a uniform guess costs ln V */
    rc.tokens_per_step = (double)B * T * p->accum;
    rc.flops_per_step = tg_decoder_flops(&r->dc, B * p->accum, T);
    rc.settings = set, rc.n_settings = lm_settings(set, r->opts, r->nopt, &data_tokens), rc.meta = all;
    r->run = all ? tg_run_open(&rc, &r->params, r->opt, &r->rngs) : NULL;
    free(all);
    if (!r->run) return 1;
    r->outs = (tg_decoder_outputs){.run = r->run,
                                   .m = r->m,
                                   .tok = r->tok,
                                   .d = r->d,
                                   .batch = B,
                                   .x = r->x,
                                   .y = r->y,
                                   .model_path = r->model_path,
                                   .data = p->data,
                                   .prompt = p->prompt,
                                   .tokens = p->tokens,
                                   .top_k = p->top_k,
                                   .temperature = p->temperature,
                                   .seed = (uint64_t)p->seed,
                                   .resumed = p->resume != NULL,
                                   .prog = "lm"};
    tg_run_on_save(r->run, tg_decoder_outputs_save, &r->outs);
    print_setup(r, tg_run_steps_done(r->run));
    double val = NAN;
    while (tg_run_next(r->run) && tg_run_decoder_step(r->run, r->m, r->d, B, T, p->accum, r->x, r->y) == 0)
        if (tg_run_eval_due(r->run) &&
            tg_run_eval(r->run, val = tg_run_decoder_val_loss(r->m, r->d, r->n_eval, B, T, r->x, r->y)) != 0)
            break;
    int64_t step = tg_run_steps_done(r->run), best_step;
    double best = tg_run_best_val(r->run, &best_step);
    if (tg_run_stopped_early(r->run)) val = best; /* the run ends on the best model */
    int status = tg_run_close(r->run);            /* the last checkpoint */
    if (status != 0 || rank != 0) return status;
    printf("wrote %s (the run's checkpoint at step %lld; continue with --resume %s), %s/best.safetensors "
           "(val_loss %.4f at step %lld), %s (the model), %s/metrics.jsonl%s and %s/report.html (open it in a "
           "browser)\n",
           p->out, (long long)step, p->out, p->out, best, (long long)best_step, r->model_path, p->out,
           r->outs.drew ? ", lm_loss.png, lm_attention.png" : "", p->out);
    if (tg_decoder_print_sample(r->m, r->tok, p->prompt, p->tokens, p->temperature, p->top_k, (uint64_t)p->seed))
        return fprintf(stderr, "lm: %s\n", tg_last_error()), 1;
    if (!tg_tokenizer_bpe(r->tok)) {
        printf("val_loss=%.4f nats/byte\n", val); /* (bits per byte: / ln 2) */
    } else {
        double bytes = tg_tokenizer_bytes_per_token(r->tok, r->d, r->n_eval, B, T, r->x, r->y);
        printf("val_loss=%.4f nats/token (%.4f bits/byte, %.2f bytes a token)\n", val, val / log(2.0) / bytes, bytes);
    }
    return 0;
}

int main(int argc, char **argv) {
    lm_run r = {0};
    options *o = &r.o;
    cli_opt opts[CLI_MAX_OPTS];
    const int nopt = lm_options(o, opts);
    cli_parse(argc, argv, SYNOPSIS, ABOUT, opts, nopt, NULL, 0);
    r.opts = opts, r.nopt = nopt;
    char why[32768] = "";
    r.dc = tg_decoder_config_default(TG_BYTE_VOCAB, o->block, o->layers, o->heads, o->dim); /* V: the tokenizer's */
    if (tg_decoder_config_kinds(&r.dc, o->pe, o->gelu) != 0) snprintf(why, sizeof why, "--%s", tg_last_error());
    if ((o->sample || o->logits) && !o->load) snprintf(why, sizeof why, "--sample and --logits need --load CKPT");
    if (o->load && (o->resume || o->init_from || o->ddp))
        snprintf(why, sizeof why, "--load samples; --resume, --init-from and --ddp train");
    if (o->resume && o->init_from) snprintf(why, sizeof why, "--resume continues a run, --init-from starts one");
    static const char *const sampling[] = {"load",   "sample", "prompt",  "tokens",    "temperature", "top-k",
                                           "logits", "seed",   "threads", "precision", NULL};
    const char *stray = o->load ? cli_given_outside(opts, nopt, sampling) : NULL;
    if (!why[0] && stray)
        snprintf(why, sizeof why, "--%s has no effect with --load (it samples; it does not train)", stray);
    /* A resumed run takes its settings from its checkpoint (run.h); one
     * started from another takes the model's shape and tokenizer. */
    if (o->init_from && cli_given(opts, nopt, "tokenizer"))
        snprintf(why, sizeof why, "--tokenizer: the run's tokenizer is the one its checkpoint carries");
    if (!why[0] &&
        (o->resume      ? lm_resume(&r, why, sizeof why)
         : o->init_from ? lm_shape(&r, o->init_from, why, sizeof why)
                        : 0) != 0 &&
        !why[0]) {
        fprintf(stderr, "lm: %s\n", tg_last_error());
        return 1;
    }
    if (o->init_from) o->tokenizer = tg_tokenizer_bpe(r.tok) ? o->init_from : "bytes"; /* recorded: its vocabulary */
    if (!why[0] && o->dim % o->heads != 0) snprintf(why, sizeof why, "--heads must divide --dim");
    int prec = tg_precision_parse(o->precision); /* the products' precision, for the whole run */
    if (!why[0] && prec >= 0) tg_set_precision((tg_precision)prec);
    if (!why[0] && (prec < 0 || tg_get_precision() != (tg_precision)prec))
        snprintf(why, sizeof why, "--precision %s: %s", o->precision,
                 prec < 0          ? "fp32 or bf16"
                 : tg_last_error() ? tg_last_error()
                                   : "not available");
    if (!why[0] && o->stop_after > o->steps) snprintf(why, sizeof why, "--stop-after is past --steps");
    if (why[0]) return tg_tokenizer_free(r.tok), cli_usage_error(argv[0], SYNOPSIS, ABOUT, opts, nopt, "%s", why);
    if (o->threads > 0 && tg_set_num_threads(o->threads) < o->threads)
        fprintf(stderr, "lm: --threads %d capped at the CPUs available\n", o->threads);
    if (o->load) return sample_mode(o);
    if (g_profile) tg_profile_begin();
    if (o->decay_steps == 0) o->decay_steps = o->steps;
    if (o->warmup > o->decay_steps) o->warmup = o->decay_steps; /* a run shorter than its warm-up warms up over all */
    if (!o->resume && !o->init_from && !(r.tok = tg_tokenizer_open(o->tokenizer))) {
        fprintf(stderr, "lm: --tokenizer %s: %s\n", o->tokenizer, tg_last_error());
        return 1;
    }
    if (!o->resume && !o->init_from) r.dc.vocab_size = tg_tokenizer_vocab_size(r.tok);
    if (o->ddp && tg_dist_init(&argc, &argv) != 0) {
        fprintf(stderr, "lm: --ddp: %s\n", tg_last_error());
        return 2;
    }
    /* Rank 0 speaks for the run; the others print only their errors. */
    if (tg_dist_rank() != 0 && !freopen("/dev/null", "w", stdout)) return 1;
    r.model_path = tg_run_path(o->out, "lm.safetensors");
    tg_params_init(&r.params);
    int rc = r.model_path ? train_mode(&r) : 1;
    if (rc == 1 && tg_last_error() && !r.run) fprintf(stderr, "lm: %s\n", tg_last_error());
    /* The others wait for rank 0's files and sample; then all end together. */
    if (rc == 0 && tg_dist_barrier() != 0) rc = 1;
    if (rc != 0 && tg_dist_active()) tg_dist_abort(rc);
    tg_dist_finalize();
    tg_optim_free(r.opt);
    tg_params_free(&r.params);
    tg_decoder_free(r.m);
    tg_token_data_close(r.d);
    free(r.x), free(r.y), free(r.tokens_path), free(r.model_path);
    tg_tokenizer_free(r.tok);
    tg_release_all();
    return rc;
}
