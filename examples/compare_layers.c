/* compare_layers: the d2l table "Comparing CNNs, RNNs, and Self-Attention",
 * measured. For a sequence of n tokens of width d the chapter predicts
 *
 *   layer           cost         sequential ops   maximum path length
 *   CNN (kernel k)  O(k n d^2)   O(1)             O(n/k)
 *   RNN             O(n d^2)     O(n)             O(n)
 *   self-attention  O(n^2 d)     O(1)             O(1)
 *
 * and this program measures each column:
 *   1. time of forward and forward+backward against n (median of repeats),
 *      the exponent a of time ~ n^a fitted on the upper half of the range;
 *   2. sequential operations: the longest chain of dependent ops (critical
 *      path) in the recorded graph of one forward;
 *   3. path length: |dy_t/dx_s| for a stack of layers (one backward per
 *      output t with a one-hot seed), and the number of layers each kind
 *      needs before the last output depends on the first input;
 *   4. what path length does to learning: predict, at the last position,
 *      the tokens at several distances back, held-out accuracy per distance;
 *   5. the table with measured columns beside the predicted ones.
 * The layers and the measurements of one are the library's (tg_seq_layer,
 * src/nn/seq_layer.c: time, sequential ops, path lengths), the learning
 * test's model too (tg_seq_model). Each model of the learning test is a run (src/train/run.h) in --out/compare_layers/<kind>/: its
 * metrics.jsonl (validation loss on the held-out sequences) and checkpoints. */
#include <math.h>
#include <stdint.h>
#include "toy_run.h"

#define NK    TG_SEQ_KINDS
#define NDIST 6 /* the distances of the learning test */

typedef struct {
    int dim, n_min, n_max, batch, attn_batch, repeats, steps, eval_every, threads, seed;
    bool quick;
    const char *out;
} options;

static const double predicted_exp[NK] = {1, 1, 1, 2, 2, 2};
static const char *kind_name[NK]; /* the library's names (tg_seq_kind_name), set at the start of main */

/* Least-squares slope of log(time) against log(n). */
static double fit_exponent(const double *n, const double *t, int cnt, double *intercept) {
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (int i = 0; i < cnt; i++) {
        double x = log(n[i]), y = log(t[i]);
        sx += x;
        sy += y;
        sxx += x * x;
        sxy += x * y;
    }
    double a = (cnt * sxy - sx * sy) / (cnt * sxx - sx * sx);
    *intercept = (sy - a * sx) / cnt;
    return a;
}

/* ---- learning: tokens at distance m back ---------------------------------- */
static void make_task(tg_rng *rng, int B, int n, int V, const int *dist, int *ids, int *tgt) {
    for (int i = 0; i < B * n; i++) ids[i] = (int)(tg_rng_next_uniform(rng) * V) % V;
    for (int b = 0; b < B; b++)
        for (int j = 0; j < NDIST; j++) tgt[b * NDIST + j] = ids[b * n + n - 1 - dist[j]];
}

/* Held-out accuracy per distance (into acc, when not NULL) and mean loss
 * of the learner on n sequences. */
static double held_out(tg_seq_model *m, const int *ids, const int *tgt, int n, int len, double *acc) {
    const int V = 8;
    bool was = tg_set_grad_enabled(false);
    tg_scope_begin();
    tg_tensor *logits = tg_reshape(tg_seq_model_forward(m, ids, n, len), TG_SHAPE(n * NDIST, V));
    tg_tensor *loss = logits ? tg_cross_entropy(logits, tgt, NULL, TG_IGNORE_INDEX) : NULL;
    double l = loss ? (double)tg_item(loss) : NAN;
    for (int j = 0; j < NDIST && acc && logits; j++) {
        long hits = 0, scored = 0;
        for (int b = 0; b < n; b++)
            hits += toy_argmax_hits(logits->data + (int64_t)(b * NDIST + j) * V, tgt + b * NDIST + j, 1, V, &scored);
        acc[j] = (double)hits / (double)scored;
    }
    tg_scope_end();
    tg_set_grad_enabled(was);
    return l;
}

/* Trains the learner of a kind, a run in --out/compare_layers/<kind>, and
 * measures it on 512 fresh sequences from a stream training never used.
 * Returns the run's exit status. */
static int learn(int kind, const options *o, int n, const int *dist, double *acc, int64_t *nparams) {
    const int V = 8, d = 32, B = 32, H = 512;
    tg_rng rng = tg_rng_new((uint64_t)o->seed + 100 + kind), held = tg_rng_new((uint64_t)o->seed + 999);
    /* two convolutions with a ReLU between, a 2-layer RNN, a GRU, or 4-head
     * attention after the fixed sinusoidal positions; NDIST * V logits */
    tg_seq_layer_config c = {(tg_seq_kind)kind, d, kind == TG_SEQ_CNN || kind == TG_SEQ_RNN ? 2 : 1, 3, 4, true};
    tg_seq_model m;
    if (tg_seq_model_init(&m, &c, V, NDIST * V, kind == TG_SEQ_MHA ? n : 0, &rng) != 0) {
        fprintf(stderr, "compare_layers: learner %s: %s\n", kind_name[kind], tg_last_error());
        return 1;
    }
    *nparams = tg_params_numel(&m.params);
    tg_optim_config cfg = tg_adam_config(3e-3);
    tg_optim *opt = tg_optim_new(&cfg, &m.params);
    int *ids = malloc(sizeof(int) * B * n), *tgt = malloc(sizeof(int) * B * NDIST);
    int *h_ids = malloc(sizeof(int) * H * n), *h_tgt = malloc(sizeof(int) * H * NDIST);
    tg_rngs rngs = {0};
    toy_run_config tc = {o->out, "compare_layers", kind_name[kind], o->steps, o->eval_every, 3e-3, 1, 0, B * n};
    tg_run *run = ids && tgt && h_ids && h_tgt && tg_rngs_add(&rngs, "data", &rng) == 0
                      ? toy_run_open(&tc, &m.params, opt, &rngs)
                      : NULL;
    if (h_ids && h_tgt) make_task(&held, H, n, V, dist, h_ids, h_tgt);
    while (tg_run_next(run)) {
        make_task(&rng, B, n, V, dist, ids, tgt);
        tg_scope_begin();
        int bad = tg_run_backward(
            run,
            tg_cross_entropy(tg_reshape(tg_seq_model_forward(&m, ids, B, n), TG_SHAPE(B * NDIST, V)), tgt, NULL, -1));
        tg_scope_end();
        if (bad || tg_run_step(run) != 0) break;
        if (tg_run_eval_due(run) && tg_run_eval(run, held_out(&m, h_ids, h_tgt, H, n, NULL)) != 0) break;
    }
    int status = run ? tg_run_close(run) : 1;
    if (status == 0 && isnan(held_out(&m, h_ids, h_tgt, H, n, acc))) {
        fprintf(stderr, "compare_layers: learning %s: %s\n", kind_name[kind], tg_last_error());
        status = 1;
    }
    free(ids), free(tgt), free(h_ids), free(h_tgt);
    tg_optim_free(opt);
    tg_seq_model_free(&m);
    return status;
}

int main(int argc, char **argv) {
    options o = {.dim = 64, .n_min = 16, .n_max = 4096, .batch = 8, .attn_batch = 1, .repeats = 7, .steps = 1000};
    o.eval_every = 250, o.threads = 1, o.seed = 1, o.out = "out";
    cli_opt opts[] = {
        {"dim", CLI_INT, &o.dim, "token width d", 2, 1024},
        {"n-min", CLI_INT, &o.n_min, "shortest sequence timed", 2, 1 << 20},
        {"n-max", CLI_INT, &o.n_max, "longest sequence timed", 2, 1 << 20},
        {"batch", CLI_INT, &o.batch, "batch for conv/rnn/gru timing", 1, 4096},
        {"attn-batch", CLI_INT, &o.attn_batch, "batch for attention timing", 1, 4096},
        {"repeats", CLI_INT, &o.repeats, "timed repeats per point (median)", 1, 31},
        {"steps", CLI_INT, &o.steps, "training steps per kind in the learning test", 1, 1e6},
        {"eval-every", CLI_INT, &o.eval_every, "steps between validation losses (and checkpoints) of a learner", 1,
         1e6},
        {"seed", CLI_INT, &o.seed, "random seed", 0, 2e9},
        {"threads", CLI_INT, &o.threads,
         "threads (0: all cores; 1 by default: the exponents are about\n"
         "                 scaling, and a second thread on a shared machine adds stalls)",
         0, 1024},
        {"quick", CLI_FLAG, &o.quick, "tiny sizes, for tests", 0, 0},
        {"out", CLI_STR, &o.out, "directory for figures and the table; the learners' runs go in its compare_layers/", 0,
         0},
    };
    const int nopt = (int)(sizeof opts / sizeof opts[0]);
    const char *about = "Measures the chapter's table comparing CNNs, RNNs and self-attention: time against n,\n"
                        "sequential operations, maximum path length, and what path length does to learning.";
    cli_parse(argc, argv, "[options]", about, opts, nopt, NULL, 0);
    int *tiny[5] = {&o.n_min, &o.n_max, &o.repeats, &o.steps, &o.dim}, tiny_v[5] = {8, 64, 1, 5, 16};
    for (int i = 0; i < 5 && o.quick; i++) /* --quick: tiny sizes, except where a flag says otherwise */
        if (!cli_given(opts, nopt, (const char *[]){"n-min", "n-max", "repeats", "steps", "dim"}[i]))
            *tiny[i] = tiny_v[i];
    if (o.n_min >= o.n_max || o.dim % 4 != 0)
        return cli_usage_error(argv[0], "[options]", about, opts, nopt,
                               "need --n-min < --n-max and --dim divisible by 4");
    if (o.threads > 0 && tg_set_num_threads(o.threads) < o.threads)
        fprintf(stderr, "compare_layers: --threads %d capped at %d (the CPUs available)\n", o.threads,
                tg_get_num_threads());
    if (cli_ensure_dir(o.out) != 0) {
        fprintf(stderr, "compare_layers: cannot create %s\n", o.out);
        return 1;
    }
    const int d = o.dim;
    tg_rng rng = tg_rng_new((uint64_t)o.seed);
    tg_seq_layer *L[NK] = {0}; /* one layer of each kind at width d */
    for (int k = 0; k < NK; k++) {
        tg_seq_layer_config c = {(tg_seq_kind)k, d, 1, 3, 4, false};
        kind_name[k] = tg_seq_kind_name((tg_seq_kind)k);
        if (!(L[k] = tg_seq_layer_new(&c, &rng))) {
            fprintf(stderr, "compare_layers: %s\n", tg_last_error());
            return 1;
        }
    }

    /* 1. time against n */
    int nn = 0;
    double ns[32], tf[NK][32], tb[NK][32];
    for (int n = o.n_min; n <= o.n_max && nn < 32; n *= 2) ns[nn++] = n;
    double expo[NK], expo_f[NK], icpt[NK];
    int lo_i = nn / 2;
    printf("1. time (ms, median of %d) of forward / forward+backward, d %d, batch %d (attention %d)\n", o.repeats, d,
           o.batch, o.attn_batch);
    printf("%-17s", "n");
    for (int i = 0; i < nn; i++) printf(" %13.0f", ns[i]);
    printf("\n");
    for (int k = 0; k < NK; k++) {
        int B = k >= TG_SEQ_ATTENTION ? o.attn_batch : o.batch;
        printf("%-17s", kind_name[k]);
        for (int i = 0; i < nn; i++) {
            int reps = ns[i] >= 2048 ? (o.repeats + 1) / 2 : o.repeats;
            if (reps < 1) reps = 1;
            tf[k][i] = tg_seq_layer_time(L[k], B, (int)ns[i], reps, false, &rng);
            tb[k][i] = tg_seq_layer_time(L[k], B, (int)ns[i], reps, true, &rng);
            if (isnan(tf[k][i]) || isnan(tb[k][i])) fprintf(stderr, "compare_layers: %s\n", tg_last_error());
            printf(" %6.2f/%6.2f", 1e3 * tf[k][i], 1e3 * tb[k][i]);
            fflush(stdout);
        }
        double ic;
        expo_f[k] = fit_exponent(ns + lo_i, tf[k] + lo_i, nn - lo_i, &ic);
        expo[k] = fit_exponent(ns + lo_i, tb[k] + lo_i, nn - lo_i, &icpt[k]);
        printf("   exponent fwd %.2f, fwd+bwd %.2f (chapter %g)\n", expo_f[k], expo[k], predicted_exp[k]);
    }
    { /* figure: the three families (and variants) with fitted lines */
        tg_series s[2 * NK];
        float xs[NK][32], ys[NK][32], fx[NK][2], fy[NK][2];
        char labels[NK][64], flabels[NK][64];
        int ns_ = 0;
        /* the three families (conv, RNN, fused attention) and their fits:
         * six series, six distinct colours, all in the legend */
        for (int k = 0; k <= TG_SEQ_ATTENTION; k++) {
            if (k == TG_SEQ_GRU) continue;
            for (int i = 0; i < nn; i++) {
                xs[k][i] = (float)log2(ns[i]);
                ys[k][i] = (float)(1e3 * tb[k][i]);
            }
            snprintf(labels[k], sizeof labels[k], "%s", kind_name[k]);
            s[ns_++] = (tg_series){labels[k], xs[k], ys[k], nn};
            fx[k][0] = (float)log2(ns[lo_i]);
            fx[k][1] = (float)log2(ns[nn - 1]);
            for (int e = 0; e < 2; e++) fy[k][e] = (float)(1e3 * exp(icpt[k] + expo[k] * fx[k][e] * log(2.0)));
            snprintf(flabels[k], sizeof flabels[k], "fit n^%.2f (chapter n^%g)", expo[k], predicted_exp[k]);
            s[ns_++] = (tg_series){flabels[k], fx[k], fy[k], 2};
        }
        char path[4200], title[128];
        snprintf(path, sizeof path, "%s/compare_time.png", o.out);
        snprintf(title, sizeof title,
                 "Forward+backward time of one layer, d = %d (log-log; fits on the upper half of n)", d);
        tg_plot_opts po = {title, "log2 n (sequence length)", "time (ms, log scale)", 1, 800, 520};
        toy_wrote("compare_layers", tg_viz_lineplot(path, s, ns_, &po), path, false);
    }

    /* 2. sequential operations: critical path of one forward graph */
    const int nq[3] = {16, 64, 256};
    int seq[NK][3];
    double seq_d[NK][3], nq_d[3] = {16, 64, 256}; /* for the figure */
    printf("\n2. sequential operations: ops on the critical path of the forward graph\n");
    for (int k = 0; k < NK; k++) {
        printf("%-17s", kind_name[k]);
        for (int i = 0; i < 3; i++) {
            seq_d[k][i] = seq[k][i] = tg_seq_layer_depth(L[k], nq[i], &rng);
            printf("  n=%d: %d", nq[i], seq[k][i]);
        }
        printf("\n");
    }

    /* 3. path length: heatmaps and layers needed */
    const int hn = o.quick ? 16 : 32, hd = 16;
    const int hk[4] = {TG_SEQ_CNN, TG_SEQ_RNN, TG_SEQ_GRU, TG_SEQ_ATTENTION};
    const int hdepth[4] = {3, 1, 1, 1};
    float *mats[4];
    const char *titles[4] = {"CNN k=3, 3 layers", "RNN, 1 layer", "GRU, 1 layer", "self-attention, 1 layer"};
    double *G = malloc(sizeof(double) * hn * hn);
    for (int i = 0; i < 4; i++) {
        tg_seq_layer_config c = {(tg_seq_kind)hk[i], hd, hdepth[i], 3, 4, false};
        tg_seq_layer *s = tg_seq_layer_new(&c, &rng);
        tg_tensor *x = tg_randn(TG_SHAPE(1, hn, hd), &rng);
        mats[i] = calloc((size_t)hn * hn, sizeof(float));
        if (x) tg_set_requires_grad(x, true);
        if (x && tg_seq_layer_paths(s, x, -1, G) == 0)
            for (int j = 0; j < hn * hn; j++) mats[i][j] = (float)log10(G[j] + 1e-12);
        tg_free(x);
        tg_seq_layer_free(s);
    }
    free(G);
    {
        char path[4200];
        snprintf(path, sizeof path, "%s/compare_paths.png", o.out);
        tg_heatmap_opts ho = {.title = "log10 |dy_t / dx_s| (row t: output, column s: input)",
                              .xlabel = "input position s",
                              .ylabel = "output position t",
                              .cmap = TG_CMAP_VIRIDIS,
                              .titles_per_panel = 1,
                              .symmetric = -1};
        toy_wrote("compare_layers", tg_viz_heatmap_grid(path, 1, 4, (const float *const *)mats, hn, hn, titles, &ho),
                  path, false);
    }
    for (int i = 0; i < 4; i++) free(mats[i]);
    const int pn[4] = {8, 16, 32, 64};
    const int npn = o.quick ? 2 : 4;
    int need[NK][4];
    double rel[NK][4] = {{0}};
    printf("\n3. layers needed before y_{n-1} depends on x_0 (|dy/dx_0| > 1e-30 of the largest; in brackets\n"
           "   |dy_{n-1}/dx_0| / max_s |dy_{n-1}/dx_s| at that depth)\n");
    for (int k = 0; k < NK; k++) {
        int kk = k == TG_SEQ_ATTENTION_STORED || k == TG_SEQ_MHA ? TG_SEQ_ATTENTION : k;
        printf("%-17s", kind_name[k]);
        for (int i = 0; i < npn; i++) {
            if (k == kk)
                need[k][i] = tg_seq_layer_reach(&(tg_seq_layer_config){(tg_seq_kind)kk, hd, 1, 3, 4, false}, pn[i],
                                                pn[i] + 2, &rng, &rel[k][i]);
            else {
                need[k][i] = need[TG_SEQ_ATTENTION][i];
                rel[k][i] = rel[TG_SEQ_ATTENTION][i];
            }
            printf("  n=%d: %d (%.0e)", pn[i], need[k][i], rel[k][i]);
        }
        printf("\n");
    }

    /* 4. learning */
    const int ln = o.quick ? 16 : 32;
    int dist[NDIST] = {1, 2, 4, 8, 16, 31};
    if (o.quick) dist[4] = 12, dist[5] = 15;
    double dist_d[NDIST];
    for (int j = 0; j < NDIST; j++) dist_d[j] = dist[j];
    const int lk[4] = {TG_SEQ_CNN, TG_SEQ_RNN, TG_SEQ_GRU, TG_SEQ_MHA};
    const char *lk_name[4] = {kind_name[TG_SEQ_CNN], kind_name[TG_SEQ_RNN], kind_name[TG_SEQ_GRU],
                              kind_name[TG_SEQ_MHA]};
    double acc[4][NDIST];
    int64_t np[4];
    printf("\n4. held-out accuracy of the token at distance m before the last (n %d, V 8, %d steps; chance 12.5%%)\n",
           ln, o.steps);
    printf("%-10s %8s", "layer", "params");
    for (int j = 0; j < NDIST; j++) printf("  m=%-4d", dist[j]);
    printf("\n");
    for (int i = 0; i < 4; i++) {
        int status = learn(lk[i], &o, ln, dist, acc[i], &np[i]);
        if (status != 0) return status; /* a failure, or a signal stopped the run (saved) */
        printf("%-10s %8lld", kind_name[lk[i]], (long long)np[i]);
        for (int j = 0; j < NDIST; j++) printf("  %5.1f%%", 100 * acc[i][j]);
        printf("\n");
        fflush(stdout);
    }
    tg_plot_opts lpo = {"Recall the token m positions back (held-out accuracy)", "distance m", "accuracy (%)", 0, 0, 0};
    toy_plot_rows("compare_layers", o.out, "compare_learning.png", &lpo, lk_name, dist_d, acc[0], 4, NDIST, 100, false);

    /* 5. the table */
    char path[4200];
    snprintf(path, sizeof path, "%s/compare_layers.txt", o.out);
    tg_atomic_file af; /* a temporary, then rename: no symlink at the name is followed */
    if (tg_atomic_begin(&af, path, "compare_layers") != 0) {
        fprintf(stderr, "%s\n", tg_last_error());
        return 1;
    }
    FILE *outs[2] = {stdout, af.f};
    const char *pc[NK] = {"O(knd^2)", "O(nd^2)", "O(nd^2)", "O(n^2d)", "O(n^2d)", "O(n^2d)"};
    const char *ps[NK] = {"O(1)", "O(n)", "O(n)", "O(1)", "O(1)", "O(1)"};
    const char *pp[NK] = {"O(n/k)", "O(n)", "O(n)", "O(1)", "O(1)", "O(1)"};
    for (int w = 0; w < 2; w++) {
        FILE *g = outs[w];
        fprintf(g, "\n5. the chapter's table, predicted | measured\n");
        fprintf(g, "%-17s %-9s %-9s | %-9s %-18s %-22s\n", "layer", "cost", "seq ops", "time n^a",
                "seq ops n=16/64/256", "layers to reach x_0 n=8..");
        for (int k = 0; k < NK; k++) {
            char sq[64], pl[64] = "";
            snprintf(sq, sizeof sq, "%d/%d/%d", seq[k][0], seq[k][1], seq[k][2]);
            for (int i = 0; i < npn; i++)
                snprintf(pl + strlen(pl), sizeof pl - strlen(pl), "%s%d", i ? "/" : "", need[k][i]);
            fprintf(g, "%-17s %-9s %-9s | a=%-7.2f %-18s %-22s (path %s)\n", kind_name[k], pc[k], ps[k], expo[k], sq,
                    pl, pp[k]);
        }
        fprintf(g, "\n");
        for (int k = 0; k < NK; k++)
            fprintf(g,
                    "layer=%s time_exponent=%.2f (n %.0f..%.0f) sequential_ops=%d@%d,%d@%d max_path_layers@n=%d@%d\n",
                    kind_name[k], expo[k], ns[lo_i], ns[nn - 1], seq[k][0], nq[0], seq[k][2], nq[2], need[k][npn - 1],
                    pn[npn - 1]);
    }
    if (tg_atomic_commit(&af, "compare_layers") != 0) {
        fprintf(stderr, "%s\n", tg_last_error());
        return 1;
    }
    /* the table's measured columns as a figure: sequential ops against n */
    tg_plot_opts tpo = {
        "Sequential operations (critical path of the graph) against n", "n", "ops on the critical path (log)", 1, 0, 0};
    toy_plot_rows("compare_layers", o.out, "compare_table.png", &tpo, kind_name, nq_d, seq_d[0], NK, 3, 1, false);
    printf(
        "wrote %s/compare_layers.txt, compare_time.png, compare_paths.png, compare_learning.png, compare_table.png\n",
        o.out);
    for (int k = 0; k < NK; k++) tg_seq_layer_free(L[k]);
    tg_release_all();
    return 0;
}
