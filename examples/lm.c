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
 * model is built (lm_model.h). */
#include <math.h>
#include "lm_run.h"

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
        {"layers", CLI_INT, &o->layers, "decoder blocks", 1, LM_MAX_LAYERS},
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
        {"profile", CLI_FLAG, &g_profile, "write the profiler's table of the steps into the run folder (profile.txt)",
         0, 0},
        {"ddp", CLI_FLAG, &o->ddp, "data-parallel under mpirun -np N (make MPI=1); --batch is the global batch", 0, 0},
    };
    int n = (int)(sizeof table / sizeof table[0]);
    for (int i = 0; i < n; i++) opts[i] = table[i];
    return n;
}

/* ---- sampling from a checkpoint (--sample, --logits) ------------------------ */
static int generate(tg_decoder *m, const lm_tok *tok, const options *o) {
    const char *prompt = *o->prompt ? o->prompt : "\n"; /* "": one newline, as nanoGPT's start */
    int64_t n;
    int *ids = lm_tok_encode(tok, (const unsigned char *)prompt, strlen(prompt), &n), rc = -1;
    int *out = malloc(sizeof(int) * (size_t)(o->tokens + 1));
    if (ids && out && n > 0 &&
        tg_decoder_generate(m, ids, (int)n, o->tokens, (tg_real)o->temperature, o->top_k, (uint64_t)o->seed, out) ==
            0) {
        printf("--- sample (temperature %g, top-k %d, seed %d) ---\n", o->temperature, o->top_k, o->seed);
        lm_tok_print(tok, ids, (int)n);
        lm_tok_print(tok, out, o->tokens);
        printf("\n---\n");
        rc = 0;
    } else {
        fprintf(stderr, "lm: %s\n", ids && out ? tg_last_error() : "out of memory for the sample");
    }
    free(ids), free(out);
    return rc;
}

/* The logits of the prompt, [1, n, V], in eval mode, as .npy. */
static int write_logits(tg_decoder *m, const lm_tok *tok, const options *o) {
    int64_t k;
    int *ids = lm_tok_encode(tok, (const unsigned char *)o->prompt, strlen(o->prompt), &k), n = (int)k;
    if (!ids || !n) return free(ids), fprintf(stderr, "lm: --logits needs a non-empty --prompt\n"), -1;
    tg_decoder_train(m, false);
    bool grad = tg_set_grad_enabled(false);
    tg_scope_begin();
    tg_tensor *logits = tg_decoder_forward(m, ids, 1, n);
    int64_t bad = -1; /* the first logit that is not finite: refused, not written (weights that overflow float) */
    for (int64_t i = 0; logits && bad < 0 && i < (int64_t)n * m->cfg.vocab_size; i++)
        if (!isfinite((double)logits->data[i])) bad = i;
    int rc = logits && bad < 0 && tg_npy_save(o->logits, logits) == 0 ? 0 : -1;
    if (bad >= 0)
        fprintf(stderr,
                "lm: --logits: logit %lld (position %lld, token %lld) is %g: the model's weights overflow; "
                "nothing written to %s\n",
                (long long)bad, (long long)(bad / m->cfg.vocab_size), (long long)(bad % m->cfg.vocab_size),
                (double)logits->data[bad], o->logits);
    else if (rc)
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
    lm_tok tok;
    tg_decoder *m = lm_load(o->load, &c, &tok);
    int rc = m ? 0 : -1;
    if (rc != 0) fprintf(stderr, "lm: %s\n", tg_last_error());
    if (rc == 0 && o->logits) rc = write_logits(m, &tok, o);
    if (rc == 0 && (o->sample || !o->logits)) rc = generate(m, &tok, o);
    if (m) lm_tok_free(&tok);
    tg_decoder_free(m);
    tg_release_all();
    return rc == 0 ? 0 : 1;
}

/* ---- training ------------------------------------------------------------------ */
typedef struct {
    options o;
    lm_config c;
    char *tokens_path, *model_path;
    tg_token_data *d;
    tg_decoder *m;
    tg_params params;
    tg_optim *opt;
    tg_rngs rngs;
    tg_run *run;
    lm_tok tok;
    int *x, *y, n_eval;
    bool drew;
    const cli_opt *opts; /* the flags' table, for the settings a checkpoint records */
    int nopt;
} lm_run;

/* The corpus as a token file in the run: the fortunes, a text file's bytes,
 * or a .npy token file used as it is. */
static int prepare_tokens(lm_run *r) {
    const char *data = r->o.data;
    size_t n = data ? strlen(data) : 0;
    struct stat sb;
    if (!(r->tokens_path = tg_run_path(r->o.out, "tokens.npy"))) return -1;
    if (r->o.resume && lstat(r->tokens_path, &sb) == 0) return 0; /* the run's own, whatever --data's path meant */
    if (data && n > 4 && strcmp(data + n - 4, ".npy") == 0)
        return free(r->tokens_path), (r->tokens_path = strdup(data)) ? 0 : -1;
    if (tg_dist_rank() != 0) return 0; /* rank 0 writes it (a barrier follows) */
    if (tg_run_mkdir(r->o.out) != 0) return -1;
    char *corpus = data ? NULL : tg_run_path(r->o.out, "fortunes.txt");
    int64_t k = data ? 0 : corpus ? tg_fortunes_corpus(NULL, corpus) : -1;
    if (k > 0) printf("corpus: %lld fortunes from %s -> %s\n", (long long)k, TG_FORTUNES_DIR, corpus);
    int rc = k < 0 ? -1 : lm_tok_encode_file(&r->tok, data ? data : corpus, r->tokens_path);
    free(corpus);
    return rc;
}

/* After each checkpoint (rank 0): the model alone, for nanoGPT and
 * --sample, and the figures. */
static int on_save(void *ctx, int64_t step) {
    lm_run *r = ctx;
    char meta[1024];
    model_meta(meta, sizeof meta, &r->c);
    char *all = lm_tok_meta(&r->tok, meta); /* the model and its tokenizer */
    int rc = all ? tg_decoder_save(r->m, r->model_path, all) : -1;
    free(all);
    if (rc != 0) return -1;
    r->drew = lm_draw_losses(r->run, r->o.data, &r->c) == 0 &&
              lm_draw_attention(r->o.out, r->m, r->d, r->o.batch, r->x, r->y) == 0;
    lm_report(&r->o, r->m, &r->tok, r->d, r->x, r->y, step); /* report.html (and a sample) */
    return 0; /* a figure that cannot be drawn is said, and the run goes on */
}

static void print_setup(const lm_run *r, int64_t step) {
    const options *p = &r->o;
    int B = p->batch, T = r->c.block;
    printf("data: %s, %lld tokens (%lld train, %lld validation; %d validation windows of %d per evaluation)\n",
           r->tokens_path, (long long)r->d->n, (long long)r->d->n_train, (long long)(r->d->n - r->d->n_train),
           r->n_eval * B, T);
    printf("model: GPT, V %d, T %d, %d layers, %d heads, d %d, %lld parameters; batch %d x %d accum, %d steps, "
           "AdamW lr %g -> %g (warm-up %d, cosine to step %d), weight decay %g, clip %g, dropout %g\n",
           r->c.vocab, T, r->c.layers, r->c.heads, r->c.dim, (long long)tg_decoder_num_params(r->m), B, p->accum,
           p->steps, p->lr, p->min_lr, p->warmup, p->decay_steps, p->weight_decay, p->clip, p->dropout);
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
    if (tg_run_claim(&rc) != 0 || prepare_tokens(r) != 0 || tg_dist_barrier() != 0 ||
        !(r->d = tg_token_data_open(r->tokens_path, 0.1, (uint64_t)p->seed)) ||
        lm_check_data(r->d, &r->c, p->batch, size) != 0)
        return 1;
    int B = p->batch, T = r->c.block;
    r->n_eval = (int)fmin((double)tg_token_data_val_batches(r->d, B, T), p->eval_batches);
    tg_rng init = tg_rng_new((uint64_t)p->seed);
    tg_decoder_config dc = decoder_config(&r->c, p->dropout);
    tg_optim_config oc = tg_adamw_config((tg_real)p->lr, (tg_real)p->weight_decay);
    oc.beta2 = (tg_real)0.95; /* nanoGPT's train.py */
    if (!(r->m = tg_decoder_new(&dc, &init)) || tg_decoder_params(r->m, &r->params, NULL) ||
        !(r->opt = tg_optim_new_groups(&oc, &r->params)) || tg_rngs_add(&r->rngs, "data", tg_token_data_rng(r->d)) ||
        tg_decoder_rngs(r->m, &r->rngs) || (p->init_from && lm_init_weights(r->m, &r->params, p->init_from) != 0) ||
        !(r->x = malloc(sizeof(int) * (size_t)B * T)) || !(r->y = malloc(sizeof(int) * (size_t)B * T)))
        return 1;
    char meta[1024];
    model_meta(meta, sizeof meta, &r->c);
    char *all = lm_tok_meta(&r->tok, meta); /* the model's metadata: its config and tokenizer */
    tg_setting set[LM_MAX_SETTINGS];
    int data_tokens = r->d->n > INT_MAX ? INT_MAX : (int)r->d->n;
    rc.schedule = tg_lr_warmup_cosine(p->lr, p->min_lr, p->warmup, p->decay_steps);
    rc.max_loss = 100 * log((double)r->c.vocab); /* a uniform guess costs ln V */
    rc.tokens_per_step = (double)B * T * p->accum;
    rc.flops_per_step = tg_decoder_flops(&dc, B * p->accum, T);
    rc.settings = set, rc.n_settings = lm_settings(set, r->opts, r->nopt, &data_tokens), rc.meta = all;
    r->run = all ? tg_run_open(&rc, &r->params, r->opt, &r->rngs) : NULL;
    free(all);
    if (!r->run) return 1;
    tg_run_on_save(r->run, on_save, r);
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
           r->drew ? ", lm_loss.png, lm_attention.png" : "", p->out);
    if (generate(r->m, &r->tok, p) != 0) return 1;
    if (!r->tok.bpe) {
        printf("val_loss=%.4f nats/byte\n", val); /* (bits per byte: / ln 2) */
    } else {
        double bytes = lm_tok_bytes_per_token(&r->tok, r->d, r->n_eval, B, T, r->x, r->y);
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
    if (strcmp(o->gelu, "tanh") != 0 && strcmp(o->gelu, "erf") != 0)
        snprintf(why, sizeof why, "--gelu must be tanh or erf");
    if (lm_pe_kind(o->pe) < 0) snprintf(why, sizeof why, "--pe must be learned, none, relative, rope or alibi");
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
        (o->resume      ? lm_resume(o, opts, nopt, &r.c, &r.tok, why, sizeof why)
         : o->init_from ? lm_shape(o, opts, nopt, o->init_from, &r.c, &r.tok, why, sizeof why)
                        : 0) != 0 &&
        !why[0]) {
        fprintf(stderr, "lm: %s\n", tg_last_error());
        return 1;
    }
    if (o->init_from) o->tokenizer = r.tok.bpe ? o->init_from : "bytes"; /* recorded: its vocabulary */
    if (!why[0] && o->dim % o->heads != 0) snprintf(why, sizeof why, "--heads must divide --dim");
    int prec = tg_precision_parse(o->precision); /* the products' precision, for the whole run */
    if (!why[0] && prec >= 0) tg_set_precision((tg_precision)prec);
    if (!why[0] && (prec < 0 || tg_get_precision() != (tg_precision)prec))
        snprintf(why, sizeof why, "--precision %s: %s", o->precision,
                 prec < 0          ? "fp32 or bf16"
                 : tg_last_error() ? tg_last_error()
                                   : "not available");
    if (!why[0] && o->stop_after > o->steps) snprintf(why, sizeof why, "--stop-after is past --steps");
    if (why[0]) return cli_usage_error(argv[0], SYNOPSIS, ABOUT, opts, nopt, "%s", why);
    if (o->threads > 0 && tg_set_num_threads(o->threads) < o->threads)
        fprintf(stderr, "lm: --threads %d capped at the CPUs available\n", o->threads);
    if (o->load) return sample_mode(o);
    if (g_profile) tg_profile_begin();
    if (o->decay_steps == 0) o->decay_steps = o->steps;
    if (o->warmup > o->decay_steps) o->warmup = o->decay_steps; /* a run shorter than its warm-up warms up over all */
    if (!o->resume && !o->init_from && lm_tok_open(&r.tok, o->tokenizer) != 0) {
        fprintf(stderr, "lm: --tokenizer %s: %s\n", o->tokenizer, tg_last_error());
        return 1;
    }
    if (!o->resume && !o->init_from)
        r.c = (lm_config){lm_tok_vocab(&r.tok), o->block, o->layers, o->heads, o->dim, true, o->gelu, o->pe};
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
    lm_tok_free(&r.tok);
    tg_release_all();
    return rc;
}
