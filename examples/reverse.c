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

/* One variant is one run (src/train/run.h) in <out>/<task>_<pe>/: its
 * metrics log, checkpoints at every held-out check and the best one; the
 * run shows progress and stops a diverged loss. --ddp: every rank makes
 * the global batch and trains on its slice (the run averages the rest). */
static int train(options *o, const char *pe, result *r, model *m) {
    int B = o->batch, T = o->seq_len, size = tg_dist_size(), rc = -1;
    *r = (result){.name = pe, .first_99 = -1};
    tg_optim *opt = NULL;
    char *meta = NULL;
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
    /* Recorded with each checkpoint: the run's report.html shows them; the
     * model's metadata lets --load and tgrad-report rebuild it from the run
     * folder's checkpoints (tg_encoder_open), the seed its held-out set. */
    tg_setting set[4] = {{.name = "steps", .type = TG_SETTING_INT, .value = &o->steps},
                         {.name = "batch", .type = TG_SETTING_INT, .value = &o->batch},
                         {.name = "lr", .type = TG_SETTING_REAL, .value = &o->lr},
                         {.name = "seed", .type = TG_SETTING_INT, .value = &o->seed}};
    c.settings = set, c.n_settings = 4;
    if (!(meta = tg_encoder_model_meta(m))) goto done;
    c.meta = meta;
    c.overwrite = true; /* no --resume here: each run of a variant is new and replaces the last */
    tg_run *run = tg_run_open(&c, &m->params, opt, &rngs);
    if (!run) goto done;
    tg_encoder_task_page page = {run, m, (uint64_t)o->seed, "reverse"};
    tg_run_on_save(run, tg_encoder_task_on_save, &page); /* the run's report.html, after each checkpoint */
    printf("[%s] training in %s/\n", pe, dir);
    fflush(stdout);
    double t0 = toy_now();
    while (tg_run_next(run)) {
        tg_seq_task_batch(o->task, &data, B, T, o->vocab, x, y); /* the global batch on every rank */
        if (tg_run_encoder_step(run, m, x, y, B, T) != 0) break; /* this rank's slice of it */
        if (tg_run_eval_due(run)) {
            double ta, sa,
                loss = tg_encoder_task_evaluate(m, (uint64_t)o->seed, o->heldout < 256 ? o->heldout : 256, &ta, &sa);
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
    tg_encoder_task_evaluate(m, (uint64_t)o->seed, o->heldout, &r->token_acc, &r->seq_acc);
    rc = 0;
done:
    if (rc != 0 && !r->losses && tg_last_error()) fprintf(stderr, "reverse: %s run: %s\n", pe, tg_last_error());
    if (rc != 0) {
        tg_encoder_model_free(m);
        free(r->losses);
        r->losses = NULL;
    }
    free(x), free(y), free(meta);
    tg_optim_free(opt);
    return rc;
}

/* The attention weights of every layer and head for the first held-out sequence. */
static int draw_attention(model *m, const options *o, const char *pe) {
    int x[2 * 1000]; /* its tokens and targets: T <= 1000 */
    char path[4200], title[128];
    snprintf(path, sizeof path, "%s/%s_attention_%s.png", o->out, o->task, pe);
    snprintf(title, sizeof title, "Attention weights, %s%s (rows: layers 1..%d)",
             pe_kind(pe) == TG_PE_NONE ? "no positional encoding" : pe, pe_kind(pe) == TG_PE_NONE ? "" : " PE",
             o->layers);
    int rc = tg_seq_task_heldout(o->task, (uint64_t)o->seed, 1, o->seq_len, o->vocab, x, x + o->seq_len);
    if (rc == 0) rc = tg_encoder_draw_attention(m, x, path, title);
    if (rc != 0)
        fprintf(stderr, "reverse: %s\n", tg_last_error());
    else
        printf("  wrote %s\n", path);
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

/* --load: the model and its task from the checkpoint (reverse's model file,
 * or a run's train_state or best checkpoint: tg_encoder_open), scored on
 * the held-out set of --seed. */
static int evaluate_checkpoint(const options *o) {
    tg_encoder_model m;
    double ta, sa;
    int rc = tg_encoder_open(o->load, &m) != 0;
    if (rc == 0 && !tg_seq_task_name(m.task))
        rc = 1, tg_set_error("%s: metadata 'task' is %s%s%s; expected reverse or sort", o->load,
                             m.task[0] ? "'" : "missing", m.task, m.task[0] ? "'" : "");
    if (rc == 0 && isnan(tg_encoder_task_evaluate(&m, (uint64_t)o->seed, o->heldout, &ta, &sa))) rc = 1;
    if (rc != 0)
        fprintf(stderr, "reverse: %s\n", tg_last_error());
    else
        printf("%s (%s task, %s PE): held-out token accuracy %.2f%%, sequence accuracy %.2f%% on %d sequences\n",
               o->load, m.task, tg_pe_kind_name(m.encoder->cfg.pe), 100 * ta, 100 * sa, o->heldout);
    tg_encoder_model_free(&m);
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
    bool bad = !tg_seq_task_name(o.task);
    bad |= strcmp(o.pe, "all") && tg_pe_kind_parse(o.pe, &(tg_pe_kind){0}) != 0;
    bad |= strcmp(o.emb_init, "unit") != 0 && strcmp(o.emb_init, "torch") != 0;
    if (bad || o.dim % o.heads != 0)
        return cli_usage_error(argv[0], "[options]", about, opts, nopt,
                               "bad --task, --pe or --emb-init value, or --heads does not divide --dim");
    o.emb_std = strcmp(o.emb_init, "torch") == 0 ? 1.0 : 0.0; /* 0: the library's 1/sqrt(d) */
    if (o.threads > 0 && tg_set_num_threads(o.threads) < o.threads)
        fprintf(stderr, "reverse: --threads %d capped at %d (the CPUs available)\n", o.threads, tg_get_num_threads());
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
    printf("%s task: T %d, V %d, d %d, %d heads, %d blocks, batch %d, %d steps per variant, Adam lr %g\n", o.task,
           o.seq_len, o.vocab, o.dim, o.heads, o.layers, o.batch, o.steps, o.lr);

    result res[3];
    model models[3];
    int rc = 0;
    for (int v = 0; v < nv && rc == 0; v++) {
        if (train(&o, variants[v], &res[v], &models[v]) != 0) {
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
            rc |= draw_attention(&models[v], &o, variants[v]) != 0;
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
        tg_encoder_model_free(&models[v]);
        free(res[v].losses);
    }
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
