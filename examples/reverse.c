/* reverse: train a Transformer encoder to reverse random token sequences,
 * once with each kind of positional encoding, and see what position buys.
 *
 *   tokens [B,T] -> embedding * sqrt(d) -> + positional encoding -> dropout
 *     -> 2 encoder blocks (self-attention, add & norm, FFN, add & norm)
 *     -> Linear(d, V) -> cross-entropy against the reversed sequence
 *
 * Self-attention alone is permutation-equivariant: without a positional
 * encoding every position sees the same bag of tokens, so the best it can do
 * is guess a token that occurs (~20% on T 16, V 16). With the fixed
 * sinusoidal table it learns the task in a few hundred steps. A learnable
 * table started at the embeddings' scale learns as fast; started small
 * (--learned-pe-std 0.02, BERT's std) it takes thousands of steps to find
 * the positions.
 *
 * --task sort asks for the sorted sequence instead: a different skill
 * (counting how many tokens are smaller), with the same reporting.
 *
 * Writes into --out: the three loss curves, the attention weights of every
 * layer and head for one held-out sequence, the learned positional table
 * beside the fixed one, and a checkpoint per variant (reload with --load).
 *
 * --ddp, under mpirun -np N (make MPI=1): every rank generates the same
 * global batch and trains on its slice of it, with its slice of the
 * dropout masks (tg_dropout_set_shard: each mask draw takes the rank's
 * block of the indices one process would draw), and the gradients are
 * averaged over the ranks (src/distributed/), so the run is the single-process
 * one up to rounding. Every rank evaluates the held-out set (the same
 * numbers); rank 0 alone prints and writes the files, while the others
 * wait for it at a barrier (which has no deadline for them). */
#include <math.h>
#include "reverse_model.h"
#include "toy_run.h"

typedef struct { /* what one training run reports */
    const char *name;
    float *losses;
    int first_99; /* first step with held-out token accuracy >= 99%, or -1 */
    double token_acc, seq_acc, seconds;
} result;

/* A batch of random sequences and their targets (reversed, or sorted). */
static void make_batch(const options *o, tg_rng *rng, int n, int *tokens, int *targets) {
    int T = o->seq_len;
    for (int b = 0; b < n; b++) {
        int *x = tokens + b * T, *y = targets + b * T;
        for (int t = 0; t < T; t++) x[t] = (int)(tg_rng_next_u64(rng) % (uint64_t)o->vocab);
        if (strcmp(o->task, "sort") == 0) {
            int count[4096] = {0}, k = 0;
            for (int t = 0; t < T; t++) count[x[t]]++;
            for (int v = 0; v < o->vocab; v++)
                while (count[v]--) y[k++] = v;
        } else {
            for (int t = 0; t < T; t++) y[t] = x[T - 1 - t];
        }
    }
}

/* The run's report.html (tg_encoder_report): the encoder's attention over
 * the first held-out sequence, the seed's stream 2 as make_batch draws it
 * (tgrad-report draws the same from the folder alone). */
static int write_report(tg_run *run, model *m, const options *o, const char *pe) {
    char title[160];
    snprintf(title, sizeof title, "reverse: the %s task, T %d, V %d, d %d, %d heads, %d blocks, %s positions", o->task,
             o->seq_len, o->vocab, o->dim, o->heads, o->layers, pe);
    int x[1000];
    tg_rng held = tg_rng_fork(&(tg_rng){(uint64_t)o->seed, 0, 0}, 2);
    for (int t = 0; t < o->seq_len; t++) x[t] = (int)(tg_rng_next_u64(&held) % (uint64_t)o->vocab);
    return tg_encoder_report(tg_run_dir(run), NULL, m, x, title);
}

typedef struct { /* what the page of a run in progress shows */
    tg_run *run;
    model *m;
    const options *o;
    const char *pe;
} run_page;

/* tg_run_on_save's callback (rank 0, after each checkpoint): the run's
 * page; one that cannot be written is said on stderr and the run goes on. */
static int report_on_save(void *ctx, int64_t step) {
    (void)step;
    const run_page *p = ctx;
    if (write_report(p->run, p->m, p->o, p->pe) != 0) fprintf(stderr, "reverse: report: %s\n", tg_last_error());
    return 0;
}

/* One variant is one run (src/train/run.h) in <out>/<task>_<pe>/: its
 * metrics log, checkpoints at every held-out check and the best one; the
 * run shows progress and stops a diverged loss. --ddp: every rank makes
 * the global batch and trains on its slice (the run averages the rest). */
static int train(const options *o, const char *pe, const int *ho_x, const int *ho_y, result *r, model *m) {
    int B = o->batch, T = o->seq_len, rank = tg_dist_rank(), size = tg_dist_size(), Bl = B / size, rc = -1;
    *r = (result){.name = pe, .first_99 = -1};
    tg_optim *opt = NULL;
    tg_rngs rngs = {0};
    tg_rng data = tg_rng_fork(&(tg_rng){(uint64_t)o->seed, 0, 0}, 1); /* same batches for every variant */
    int *x = malloc(sizeof(int) * (size_t)B * T), *y = malloc(sizeof(int) * (size_t)B * T);
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/%s_%s", o->out, o->task, pe);
    if (B % size != 0) tg_set_error("--batch %d: the %d ranks must divide it (it is the global batch)", B, size);
    tg_optim_config oc = tg_adam_config((tg_real)o->lr);
    if (B % size != 0 || !x || !y || model_new(m, o, pe, (uint64_t)o->seed) != 0 ||
        !(opt = tg_optim_new(&oc, &m->params)) || tg_rngs_add(&rngs, "data", &data) ||
        tg_encoder_rngs(m->encoder, &rngs))
        goto done;
    tg_run_config c = tg_run_defaults(dir, o->steps);
    c.eval_every = o->eval_every, c.tokens_per_step = (double)B * T;
    c.max_loss = 100 * log((double)o->vocab); /* a uniform guess costs ln V */
    /* Recorded with each checkpoint: the run's report.html shows them, and
     * they are the model's metadata, so --load and tgrad-report rebuild it
     * from the run folder's checkpoints (tg_encoder_open). */
    char settings[512];
    snprintf(settings, sizeof settings,
             "{\"task\":\"%s\",\"pe\":\"%s\",\"steps\":\"%d\",\"batch\":\"%d\",\"seq_len\":\"%d\",\"vocab\":\"%d\","
             "\"dim\":\"%d\",\"heads\":\"%d\",\"ffn\":\"%d\",\"layers\":\"%d\",\"lr\":\"%g\",\"dropout\":\"%g\","
             "\"seed\":\"%d\"}",
             o->task, pe, o->steps, B, T, o->vocab, o->dim, o->heads, o->ffn, o->layers, o->lr, o->dropout, o->seed);
    c.meta = settings;
    c.overwrite = true; /* no --resume here: each run of a variant is new and replaces the last */
    tg_run *run = tg_run_open(&c, &m->params, opt, &rngs);
    if (!run) goto done;
    run_page page = {run, m, o, pe};
    tg_run_on_save(run, report_on_save, &page); /* the run's report.html, after each checkpoint */
    printf("[%s] training in %s/\n", pe, dir);
    fflush(stdout);
    double t0 = toy_now();
    while (tg_run_next(run)) {
        make_batch(o, &data, B, x, y); /* the global batch on every rank, of which this slice: */
        tg_scope_begin();
        tg_tensor *logits = tg_encoder_model_forward(m, x + (size_t)rank * Bl * T, Bl, T);
        int bad = tg_run_backward(run, tg_cross_entropy(logits, y + (size_t)rank * Bl * T, NULL, TG_IGNORE_INDEX));
        tg_scope_end();
        if (bad || tg_run_step(run) != 0) break;
        if (tg_run_eval_due(run)) {
            double ta, sa,
                loss = tg_encoder_model_evaluate(m, ho_x, ho_y, o->heldout < 256 ? o->heldout : 256, &ta, &sa);
            if (r->first_99 < 0 && ta >= 0.99) r->first_99 = (int)tg_run_steps_done(run);
            if (tg_run_eval(run, loss) != 0) break;
        }
    }
    r->seconds = toy_now() - t0;
    const float *train, *vs, *vl;
    int64_t n;
    int nv;
    tg_run_history(run, &train, &n, &vs, &vl, &nv);
    if ((r->losses = malloc(sizeof(float) * (size_t)(n ? n : 1)))) memcpy(r->losses, train, sizeof(float) * (size_t)n);
    if (tg_run_close(run) != 0 || !r->losses) goto done; /* (the run said why) */
    tg_encoder_model_evaluate(m, ho_x, ho_y, o->heldout, &r->token_acc, &r->seq_acc);
    rc = 0;
done:
    if (rc != 0 && !r->losses && tg_last_error()) fprintf(stderr, "reverse: %s run: %s\n", pe, tg_last_error());
    if (rc != 0) {
        model_free(m);
        free(r->losses);
        r->losses = NULL;
    }
    free(x);
    free(y);
    tg_optim_free(opt);
    return rc;
}

/* The attention weights of every layer and head for one held-out sequence. */
static tg_tensor *encoder_weights(const void *m, int l, int h) { return tg_encoder_attention_weights(m, l, h); }
static int draw_attention(model *m, const options *o, const int *tokens, const char *pe) {
    int T = o->seq_len;
    tg_encoder_train(m->encoder, false);
    tg_encoder_record_attention(m->encoder, true);
    bool grad = tg_set_grad_enabled(false);
    tg_scope_begin();
    char path[4200], title[128];
    snprintf(path, sizeof path, "%s/%s_attention_%s.png", o->out, o->task, pe);
    snprintf(title, sizeof title, "Attention weights, %s%s (rows: layers 1..%d)",
             pe_kind(pe) == TG_PE_NONE ? "no positional encoding" : pe, pe_kind(pe) == TG_PE_NONE ? "" : " PE",
             o->layers);
    int rc = tg_encoder_model_forward(m, tokens, 1, T) ? 0 : -1;
    if (rc == 0 && (rc = tg_figure_attention(path, title, m->encoder, encoder_weights, o->layers, o->heads)) != 0)
        fprintf(stderr, "reverse: %s\n", tg_last_error());
    if (rc == 0) printf("  wrote %s\n", path);
    tg_scope_end();
    tg_set_grad_enabled(grad);
    tg_encoder_train(m->encoder, true);
    tg_encoder_record_attention(m->encoder, false);
    return rc;
}

/* The learned table P[:T] beside the fixed sinusoidal one. */
static int draw_tables(model *learned, const options *o) {
    int T = o->seq_len, d = o->dim;
    tg_rng rng = tg_rng_new(0);
    tg_posenc *fixed = tg_posenc_new(d, 0, T, &rng);
    tg_scope_begin();
    const tg_tensor *mats[2] = {tg_slice(learned->encoder->pos_encoding->P, 0, 0, T), fixed ? fixed->P : NULL};
    const char *titles[2] = {"learned P[:T]", "fixed sinusoidal P[:T]"};
    char path[4200];
    snprintf(path, sizeof path, "%s/%s_pe_tables.png", o->out, o->task);
    tg_heatmap_opts ho = {.title = "Positional encodings: learned vs fixed",
                          .xlabel = "Encoding dimension",
                          .ylabel = "Position",
                          .cmap = TG_CMAP_RDBU,
                          .shared_scale = 0};
    int rc = tg_figure_heatmap_grid(path, 1, 2, mats, titles, &ho);
    if (rc != 0)
        fprintf(stderr, "reverse: %s\n", tg_last_error());
    else
        printf("  wrote %s\n", path);
    tg_scope_end();
    tg_posenc_free(fixed);
    return rc;
}

static int draw_losses(const result *r, int n, const options *o) {
    tg_series s[3];
    for (int i = 0; i < n; i++) s[i] = (tg_series){r[i].name, NULL, r[i].losses, o->steps};
    char path[4200], title[128];
    snprintf(path, sizeof path, "%s/%s_loss.png", o->out, o->task);
    snprintf(title, sizeof title, "Training loss (%s task) by positional encoding", o->task);
    tg_plot_opts po = {.title = title, .xlabel = "step", .ylabel = "cross-entropy", .log_y = 1};
    return toy_wrote("reverse", tg_viz_lineplot(path, s, n, &po), path, true);
}

/* --load: rebuild the model from the checkpoint (tg_encoder_open) and evaluate it. */
static int evaluate_checkpoint(options *o) {
    model m;
    const char *pe;
    if (reverse_load(o->load, o, &m, &pe) != 0) {
        fprintf(stderr, "reverse: %s\n", tg_last_error());
        return 1;
    }
    int n = o->heldout, T = o->seq_len, rc = 0;
    int *x = malloc(sizeof(int) * (size_t)n * T), *y = malloc(sizeof(int) * (size_t)n * T);
    if (!x || !y) {
        fprintf(stderr, "reverse: out of memory for %d held-out sequences of %d tokens\n", n, T);
        rc = 1;
    } else {
        tg_rng held = tg_rng_fork(&(tg_rng){(uint64_t)o->seed, 0, 0}, 2);
        make_batch(o, &held, n, x, y);
        double ta, sa;
        tg_encoder_model_evaluate(&m, x, y, n, &ta, &sa);
        printf("%s (%s task, %s PE): held-out token accuracy %.2f%%, sequence accuracy %.2f%% on %d sequences\n",
               o->load, o->task, pe, 100 * ta, 100 * sa, n);
    }
    free(x);
    free(y);
    model_free(&m);
    tg_release_all();
    return rc;
}

int main(int argc, char **argv) {
    options o;
    cli_opt opts[REVERSE_MAX_OPTS];
    const int nopt = reverse_options(&o, opts);
    const char *about = "Trains a Transformer encoder to reverse (or sort) random sequences with fixed, learned and\n"
                        "no positional encoding, and draws what it learned.";
    cli_parse(argc, argv, "[options]", about, opts, nopt, NULL, 0);
    if (o.ddp && o.load)
        return cli_usage_error(argv[0], "[options]", about, opts, nopt, "--ddp trains; not with --load");
    bool bad = strcmp(o.task, "reverse") != 0 && strcmp(o.task, "sort") != 0;
    bad |= strcmp(o.pe, "all") && !pe_name(o.pe);
    bad |= strcmp(o.emb_init, "unit") != 0 && strcmp(o.emb_init, "torch") != 0;
    if (bad || o.dim % o.heads != 0) {
        return cli_usage_error(argv[0], "[options]", about, opts, nopt,
                               "bad --task, --pe or --emb-init value, or --heads does not divide --dim");
    }
    o.emb_std = strcmp(o.emb_init, "torch") == 0 ? 1.0 : 0.0; /* 0: the library's 1/sqrt(d) */
    if (o.threads > 0) {
        int got = tg_set_num_threads(o.threads);
        if (got < o.threads)
            fprintf(stderr, "reverse: --threads %d capped at %d (the CPUs available)\n", o.threads, got);
    }
    tg_set_detect_anomaly(o.detect_anomaly);
    int prec = tg_precision_parse(o.precision); /* the products' precision, for every variant */
    if (prec >= 0) tg_set_precision((tg_precision)prec);
    if (prec < 0 || tg_get_precision() != (tg_precision)prec)
        return cli_usage_error(argv[0], "[options]", about, opts, nopt, "--precision %s: %s", o.precision,
                               prec < 0          ? "fp32 or bf16"
                               : tg_last_error() ? tg_last_error()
                                                 : "not available");
    static const char *const evaluating[] = {"load", "heldout", "seed", "threads", "detect-anomaly", "precision", NULL};
    const char *stray = o.load ? cli_given_outside(opts, nopt, evaluating) : NULL;
    if (stray)
        return cli_usage_error(argv[0], "[options]", about, opts, nopt,
                               "--%s has no effect with --load (the checkpoint says what the model is)", stray);
    if (o.load) return evaluate_checkpoint(&o);
    if (o.ddp) {
        if (tg_dist_init(&argc, &argv) != 0) {
            fprintf(stderr, "reverse: --ddp: %s\n", tg_last_error());
            return 2;
        }
        /* Rank 0 speaks and writes for the run; the others print only their errors. */
        if (tg_dist_rank() != 0 && !freopen("/dev/null", "w", stdout)) return 1;
    }
    bool lead = tg_dist_rank() == 0;
    if (lead && cli_ensure_dir(o.out) != 0) {
        fprintf(stderr, "reverse: cannot create directory %s\n", o.out);
        return 1;
    }

    const char *variants[3] = {"fixed", "learned", "none"};
    int nv = 3;
    if (strcmp(o.pe, "all") != 0) {
        variants[0] = o.pe;
        nv = 1;
    }
    int T = o.seq_len;
    int *hx = malloc(sizeof(int) * (size_t)o.heldout * T), *hy = malloc(sizeof(int) * (size_t)o.heldout * T);
    tg_rng held = tg_rng_fork(&(tg_rng){(uint64_t)o.seed, 0, 0}, 2); /* a stream training never draws from */
    make_batch(&o, &held, o.heldout, hx, hy);
    printf("%s task: T %d, V %d, d %d, %d heads, %d blocks, batch %d, %d steps per variant, Adam lr %g\n", o.task, T,
           o.vocab, o.dim, o.heads, o.layers, o.batch, o.steps, o.lr);

    result res[3];
    model models[3];
    int rc = 0;
    for (int v = 0; v < nv && rc == 0; v++) {
        if (train(&o, variants[v], hx, hy, &res[v], &models[v]) != 0) {
            rc = 1;
            nv = v;
            break;
        }
        if (lead) {
            char path[4200];
            snprintf(path, sizeof path, "%s/%s_%s.safetensors", o.out, o.task, variants[v]);
            if (tg_encoder_save(&models[v], path) != 0) {
                fprintf(stderr, "reverse: %s\n", tg_last_error());
                rc = 1;
            }
            rc |= draw_attention(&models[v], &o, hx, variants[v]) != 0;
            if (pe_kind(variants[v]) == TG_PE_LEARNED) rc |= draw_tables(&models[v], &o) != 0;
        }
        /* --ddp: the others wait here while rank 0 saves and draws alone, not
         * in the next variant's first collective, whose deadline a long save
         * would pass. (A failed rank 0 skips it: the end aborts the run.) */
        if (rc == 0 && tg_dist_barrier() != 0) {
            fprintf(stderr, "reverse: %s\n", tg_last_error());
            rc = 1;
        }
    }
    if (nv > 0 && lead) rc |= draw_losses(res, nv, &o) != 0;

    if (nv > 0) printf("\n%-8s %12s %12s %14s %9s\n", "PE", "token acc", "seq acc", "first >= 99%", "time");
    for (int v = 0; v < nv; v++) {
        char first[32] = "never";
        if (res[v].first_99 > 0) snprintf(first, sizeof first, "step %d", res[v].first_99);
        printf("%-8s %11.2f%% %11.2f%% %14s %8.1fs\n", res[v].name, 100 * res[v].token_acc, 100 * res[v].seq_acc, first,
               res[v].seconds);
    }
    for (int v = 0; v < nv; v++)
        if (pe_kind(res[v].name) == TG_PE_NONE)
            printf("\nNo positional encoding: %.0f%% vs %.0f%% with the fixed table, because self-attention sees the "
                   "tokens as a set, not a sequence.\n",
                   100 * res[v].token_acc, 100 * res[0].token_acc);
    if (nv > 0) printf("\nFigures and checkpoints are in %s/\n", o.out);
    for (int v = 0; v < nv; v++) {
        model_free(&models[v]);
        free(res[v].losses);
    }
    free(hx);
    free(hy);
    tg_release_all();
    if (tg_dist_active()) { /* a failed rank ends them all: the others may wait in a collective */
        fflush(stdout);
        if (rc != 0 || tg_dist_barrier() != 0) {
            if (rc == 0) fprintf(stderr, "reverse: %s\n", tg_last_error());
            tg_dist_abort(rc ? rc : 1);
        }
        tg_dist_finalize();
    }
    return rc;
}
