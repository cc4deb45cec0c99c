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
 *   5. the table with measured columns beside the predicted ones. */
#include <math.h>
#include <stdint.h>
#include <time.h>
#include "cli.h"
#include "tgrad.h"

typedef struct {
    int dim, n_min, n_max, batch, attn_batch, repeats, steps, threads, seed;
    bool quick;
    const char *out;
} options;

enum { K_CONV, K_RNN, K_GRU, K_ATTN, K_ATTN_STORED, K_MHA, NK };
static const char *kind_name[NK] = {"cnn", "rnn", "gru", "attention", "attention-stored", "mha"};
static const double predicted_exp[NK] = {1, 1, 1, 2, 2, 2};

typedef struct { /* one layer of each kind at width d */
    tg_conv1d *conv;
    tg_rnn *rnn;
    tg_gru *gru;
    tg_mha *mha;
} layers;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Self-attention of X with itself, q = k = v = X (no projections: the
 * n^2 d part alone), through the fused op or the stored path
 * (scores, softmax, product kept in memory). */
static tg_tensor *self_attention(tg_tensor *x, bool fused) {
    tg_mask none = {0};
    if (fused) return tg_attention(x, x, x, none, 0, NULL);
    return tg_matmul(tg_masked_softmax(tg_score_scaled_dot(x, x), none), x);
}

static tg_tensor *layer_forward(layers *L, int kind, tg_tensor *x) {
    tg_mask none = {0};
    switch (kind) {
    case K_CONV: return tg_conv1d_forward(L->conv, x);
    case K_RNN: return tg_rnn_forward(L->rnn, x);
    case K_GRU: return tg_gru_forward(L->gru, x);
    case K_ATTN: return self_attention(x, true);
    case K_ATTN_STORED: return self_attention(x, false);
    default: return tg_mha_forward(L->mha, x, x, x, none);
    }
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median time of forward (backward = false) or forward + backward. */
static double time_layer(layers *L, int kind, int B, int n, int d, int reps, bool backward, tg_rng *rng) {
    double t[32];
    tg_tensor *x = tg_randn(TG_SHAPE(B, n, d), rng); /* persistent */
    tg_set_requires_grad(x, backward);
    for (int r = 0; r <= reps; r++) { /* r = 0 warms up */
        tg_scope_begin();
        double t0 = now();
        tg_tensor *y = layer_forward(L, kind, x);
        if (y && backward) tg_backward(tg_sum_all(y));
        double dt = now() - t0;
        tg_scope_end();
        if (!y) {
            fprintf(stderr, "compare_layers: %s\n", tg_last_error());
            tg_free(x);
            return NAN;
        }
        if (r > 0) t[r - 1] = dt;
    }
    tg_free(x);
    qsort(t, (size_t)reps, sizeof t[0], cmp_double);
    return t[reps / 2];
}

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

/* ---- critical path of the recorded graph ---------------------------------- */
/* Ops on the longest dependent chain from the inputs to y. */
static int critical_path(layers *L, int kind, int n, int d, tg_rng *rng) {
    tg_scope_begin();
    tg_tensor *x = tg_randn(TG_SHAPE(1, n, d), rng);
    tg_set_requires_grad(x, true);
    tg_tensor *y = layer_forward(L, kind, x);
    int depth = y ? tg_graph_depth(y) : -1;
    tg_scope_end();
    return depth;
}

/* ---- path length: gradients of a stack of layers -------------------------- */
typedef struct {
    int kind, depth;
    tg_conv1d **conv;
    tg_rnn *rnn;
    tg_gru *gru;
} stack;

static tg_tensor *stack_forward(stack *s, tg_tensor *x) {
    tg_tensor *h = x;
    for (int l = 0; l < s->depth && h; l++) {
        if (s->kind == K_CONV)
            h = tg_conv1d_forward(s->conv[l], h);
        else if (s->kind == K_RNN)
            h = tg_rnn_forward(s->rnn, h); /* its layers are inside */
        else if (s->kind == K_GRU)
            h = tg_gru_forward(s->gru, h);
        else
            h = self_attention(h, true);
        if (s->kind != K_CONV && s->kind != K_ATTN) break;
    }
    return h;
}

/* G[t * n + s] = || dy_t / dx_s ||, y_t summed over features. */
static int path_gradients(stack *s, int n, int d, tg_rng *rng, double *G, int only_t) {
    tg_tensor *x = tg_randn(TG_SHAPE(1, n, d), rng);
    tg_set_requires_grad(x, true);
    int rc = 0;
    for (int t = only_t < 0 ? 0 : only_t; t < n && rc == 0; t++) {
        tg_scope_begin();
        tg_zero_grad(x);
        tg_tensor *y = stack_forward(s, x);
        if (!y) {
            rc = -1;
            tg_scope_end();
            break;
        }
        tg_tensor *seed = tg_zeros(TG_SHAPE(1, n, y->shape[2]));
        for (int j = 0; j < y->shape[2]; j++) seed->data[(int64_t)t * y->shape[2] + j] = 1;
        if (tg_backward_seed(y, seed) != 0) rc = -1;
        for (int u = 0; u < n && rc == 0; u++) {
            double acc = 0;
            for (int j = 0; j < d; j++) acc += (double)x->grad->data[u * d + j] * x->grad->data[u * d + j];
            G[(int64_t)t * n + u] = sqrt(acc);
        }
        tg_scope_end();
        if (only_t >= 0) break;
    }
    tg_free(x);
    return rc;
}

static stack stack_new(int kind, int depth, int d, int k, tg_rng *rng) {
    stack s = {.kind = kind, .depth = depth};
    if (kind == K_CONV) {
        s.conv = calloc((size_t)depth, sizeof *s.conv);
        for (int l = 0; l < depth; l++) s.conv[l] = tg_conv1d_new(d, d, k, 1, true, rng);
    }
    if (kind == K_RNN) s.rnn = tg_rnn_new(d, d, depth, rng);
    if (kind == K_GRU) s.gru = tg_gru_new(d, d, depth, rng);
    return s;
}
static void stack_free(stack *s) {
    if (s->conv)
        for (int l = 0; l < s->depth; l++) tg_conv1d_free(s->conv[l]);
    free(s->conv);
    tg_rnn_free(s->rnn);
    tg_gru_free(s->gru);
}

/* Layers needed before y_{n-1} depends on x_0: the smallest depth with
 * |dy_{n-1}/dx_0| > 1e-30 max_s |dy_{n-1}/dx_s| (far above float's
 * underflow, so: any dependence at all), or -1 beyond max_depth. *rel gets
 * that ratio at the depth found: how strongly it depends (a 1e-6 threshold
 * instead would say a 63-layer CNN or a 32-step RNN never reaches x_0: the
 * gradient along the long path is ~1e-14 of the largest one). */
static int layers_needed(int kind, int n, int d, int max_depth, tg_rng *rng, double *rel) {
    double *G = malloc(sizeof(double) * (size_t)n * n);
    int found = -1;
    for (int depth = 1; depth <= max_depth && found < 0; depth++) {
        stack s = stack_new(kind, depth, d, 3, rng);
        if (path_gradients(&s, n, d, rng, G, n - 1) == 0) {
            const double *row = G + (int64_t)(n - 1) * n;
            double mx = 0;
            for (int u = 0; u < n; u++) mx = fmax(mx, row[u]);
            if (row[0] > 1e-30 * mx) {
                found = depth;
                *rel = row[0] / mx;
            }
        }
        stack_free(&s);
        if (kind != K_CONV && found < 0 && depth >= 1 && kind != K_ATTN) break; /* recurrent: depth 1 decides */
    }
    free(G);
    return found;
}

/* ---- learning: tokens at distance m back ---------------------------------- */
#define NDIST 6
typedef struct {
    tg_embedding *emb;
    tg_posenc *pe;
    tg_conv1d *conv[2];
    tg_rnn *rnn;
    tg_gru *gru;
    tg_mha *mha;
    tg_linear *head;
    tg_params params;
} learner;

static tg_tensor *learner_forward(learner *m, int kind, const int *ids, int B, int n) {
    tg_tensor *h = tg_embedding_forward(m->emb, ids, TG_SHAPE(B, n));
    tg_mask none = {0};
    if (kind == K_CONV)
        h = tg_conv1d_forward(m->conv[1], tg_relu(tg_conv1d_forward(m->conv[0], h)));
    else if (kind == K_RNN)
        h = tg_rnn_forward(m->rnn, h);
    else if (kind == K_GRU)
        h = tg_gru_forward(m->gru, h);
    else {
        h = tg_posenc_forward(m->pe, h);
        h = tg_mha_forward(m->mha, h, h, h, none);
    }
    if (!h) return NULL;
    h = tg_reshape(tg_slice(h, 1, n - 1, n), TG_SHAPE(B, h->shape[2]));
    return tg_reshape(tg_linear_forward(m->head, h), TG_SHAPE(B * NDIST, -1));
}

static void make_task(tg_rng *rng, int B, int n, int V, const int *dist, int *ids, int *tgt) {
    for (int i = 0; i < B * n; i++) ids[i] = (int)(tg_rng_next_uniform(rng) * V) % V;
    for (int b = 0; b < B; b++)
        for (int j = 0; j < NDIST; j++) tgt[b * NDIST + j] = ids[b * n + n - 1 - dist[j]];
}

static int learn(int kind, const options *o, int n, const int *dist, double *acc, int64_t *nparams) {
    const int V = 8, d = 32, B = 32;
    tg_rng rng = tg_rng_new((uint64_t)o->seed + 100 + kind);
    learner m = {0};
    tg_params_init(&m.params);
    m.emb = tg_embedding_new(V, d, 1, &rng);
    tg_embedding_params(m.emb, &m.params, "emb");
    if (kind == K_CONV)
        for (int l = 0; l < 2; l++) {
            m.conv[l] = tg_conv1d_new(d, d, 3, 1, true, &rng);
            tg_conv1d_params(m.conv[l], &m.params, l ? "conv1" : "conv0");
        }
    if (kind == K_RNN) {
        m.rnn = tg_rnn_new(d, d, 2, &rng);
        tg_rnn_params(m.rnn, &m.params, "rnn");
    }
    if (kind == K_GRU) {
        m.gru = tg_gru_new(d, d, 1, &rng);
        tg_gru_params(m.gru, &m.params, "gru");
    }
    if (kind == K_MHA) {
        m.pe = tg_posenc_new(d, 0, n, &rng);
        m.mha = tg_mha_new(d, d, d, d, 4, 0, false, &rng);
        tg_mha_params(m.mha, &m.params, "mha");
    }
    m.head = tg_linear_new(d, NDIST * V, true, &rng);
    tg_linear_params(m.head, &m.params, "head");
    *nparams = tg_params_numel(&m.params);
    tg_optim_config cfg = tg_adam_config(3e-3);
    tg_optim *opt = tg_optim_new(&cfg, &m.params);
    int *ids = malloc(sizeof(int) * 512 * n), *tgt = malloc(sizeof(int) * 512 * NDIST);
    int rc = 0;
    for (int s = 0; s < o->steps && rc == 0; s++) {
        make_task(&rng, B, n, V, dist, ids, tgt);
        tg_scope_begin();
        tg_optim_zero_grad(opt);
        tg_tensor *loss = tg_cross_entropy(learner_forward(&m, kind, ids, B, n), tgt, NULL, TG_IGNORE_INDEX);
        if (!loss || tg_backward(loss) != 0)
            rc = -1;
        else {
            tg_clip_grad_norm(&m.params, 1);
            tg_optim_step(opt);
        }
        tg_scope_end();
    }
    /* held out: 512 fresh sequences from a stream training never used */
    tg_rng held = tg_rng_new((uint64_t)o->seed + 999);
    make_task(&held, 512, n, V, dist, ids, tgt);
    bool was = tg_set_grad_enabled(false);
    tg_scope_begin();
    tg_tensor *logits = rc == 0 ? learner_forward(&m, kind, ids, 512, n) : NULL;
    if (!logits) rc = -1;
    for (int j = 0; j < NDIST && rc == 0; j++) {
        int hit = 0;
        for (int b = 0; b < 512; b++) {
            const tg_real *row = logits->data + (int64_t)(b * NDIST + j) * V;
            int best = 0;
            for (int v = 1; v < V; v++)
                if (row[v] > row[best]) best = v;
            hit += best == tgt[b * NDIST + j];
        }
        acc[j] = hit / 512.0;
    }
    tg_scope_end();
    tg_set_grad_enabled(was);
    if (rc) fprintf(stderr, "compare_layers: learning %s: %s\n", kind_name[kind], tg_last_error());
    free(ids);
    free(tgt);
    tg_optim_free(opt);
    tg_params_free(&m.params);
    tg_embedding_free(m.emb);
    tg_posenc_free(m.pe);
    tg_conv1d_free(m.conv[0]);
    tg_conv1d_free(m.conv[1]);
    tg_rnn_free(m.rnn);
    tg_gru_free(m.gru);
    tg_mha_free(m.mha);
    tg_linear_free(m.head);
    return rc;
}

int main(int argc, char **argv) {
    options o = {.dim = 64, .n_min = 16, .n_max = 4096, .batch = 8, .attn_batch = 1, .repeats = 7, .steps = 1000};
    o.threads = 1, o.seed = 1, o.out = "out";
    cli_opt opts[] = {
        {"dim", CLI_INT, &o.dim, "token width d", 2, 1024},
        {"n-min", CLI_INT, &o.n_min, "shortest sequence timed", 2, 1 << 20},
        {"n-max", CLI_INT, &o.n_max, "longest sequence timed", 2, 1 << 20},
        {"batch", CLI_INT, &o.batch, "batch for conv/rnn/gru timing", 1, 4096},
        {"attn-batch", CLI_INT, &o.attn_batch, "batch for attention timing", 1, 4096},
        {"repeats", CLI_INT, &o.repeats, "timed repeats per point (median)", 1, 31},
        {"steps", CLI_INT, &o.steps, "training steps per kind in the learning test", 1, 1e6},
        {"seed", CLI_INT, &o.seed, "random seed", 0, 2e9},
        {"threads", CLI_INT, &o.threads,
         "threads (0: all cores; 1 by default: the exponents are about\n"
         "                 scaling, and a second thread on a shared machine adds stalls)",
         0, 1024},
        {"quick", CLI_FLAG, &o.quick, "tiny sizes, for tests", 0, 0},
        {"out", CLI_STR, &o.out, "directory for figures and the table", 0, 0},
    };
    const int nopt = (int)(sizeof opts / sizeof opts[0]);
    const char *about = "Measures the chapter's table comparing CNNs, RNNs and self-attention: time against n,\n"
                        "sequential operations, maximum path length, and what path length does to learning.";
    cli_parse(argc, argv, "[options]", about, opts, nopt, NULL, 0);
    if (o.n_min >= o.n_max || o.dim % 4 != 0) {
        return cli_usage_error(argv[0], "[options]", about, opts, nopt,
                               "need --n-min < --n-max and --dim divisible by 4");
    }
    if (o.quick) {
        o.n_min = 8;
        o.n_max = 64;
        o.repeats = 1;
        o.steps = 5;
        o.dim = 16;
    }
    if (o.threads > 0 && tg_set_num_threads(o.threads) < o.threads)
        fprintf(stderr, "compare_layers: --threads %d capped at %d (the CPUs available)\n", o.threads,
                tg_get_num_threads());
    if (cli_ensure_dir(o.out) != 0) {
        fprintf(stderr, "compare_layers: cannot create %s\n", o.out);
        return 1;
    }
    const int d = o.dim;
    tg_rng rng = tg_rng_new((uint64_t)o.seed);
    layers L = {tg_conv1d_new(d, d, 3, 1, true, &rng), tg_rnn_new(d, d, 1, &rng), tg_gru_new(d, d, 1, &rng),
                tg_mha_new(d, d, d, d, 4, 0, false, &rng)};
    if (!L.conv || !L.rnn || !L.gru || !L.mha) {
        fprintf(stderr, "compare_layers: %s\n", tg_last_error());
        return 1;
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
        int B = k >= K_ATTN ? o.attn_batch : o.batch;
        printf("%-17s", kind_name[k]);
        for (int i = 0; i < nn; i++) {
            int reps = ns[i] >= 2048 ? (o.repeats + 1) / 2 : o.repeats;
            if (reps < 1) reps = 1;
            tf[k][i] = time_layer(&L, k, B, (int)ns[i], d, reps, false, &rng);
            tb[k][i] = time_layer(&L, k, B, (int)ns[i], d, reps, true, &rng);
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
        for (int k = 0; k <= K_ATTN; k++) {
            if (k == K_GRU) continue;
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
        char path[1024];
        snprintf(path, sizeof path, "%s/compare_time.png", o.out);
        tg_plot_opts po = {"Forward+backward time of one layer, d = 64 (log-log; fits on the upper half of n)",
                           "log2 n (sequence length)",
                           "time (ms, log scale)",
                           1,
                           800,
                           520};
        if (tg_viz_lineplot(path, s, ns_, &po) != 0) fprintf(stderr, "compare_layers: %s\n", tg_viz_last_error());
    }

    /* 2. sequential operations: critical path of one forward graph */
    const int nq[3] = {16, 64, 256};
    int seq[NK][3];
    printf("\n2. sequential operations: ops on the critical path of the forward graph\n");
    for (int k = 0; k < NK; k++) {
        printf("%-17s", kind_name[k]);
        for (int i = 0; i < 3; i++) {
            seq[k][i] = critical_path(&L, k, nq[i], d, &rng);
            printf("  n=%d: %d", nq[i], seq[k][i]);
        }
        printf("\n");
    }

    /* 3. path length: heatmaps and layers needed */
    const int hn = o.quick ? 16 : 32, hd = 16;
    const int hk[4] = {K_CONV, K_RNN, K_GRU, K_ATTN};
    const int hdepth[4] = {3, 1, 1, 1};
    float *mats[4];
    const char *titles[4] = {"CNN k=3, 3 layers", "RNN, 1 layer", "GRU, 1 layer", "self-attention, 1 layer"};
    double *G = malloc(sizeof(double) * hn * hn);
    for (int i = 0; i < 4; i++) {
        stack s = stack_new(hk[i], hdepth[i], hd, 3, &rng);
        mats[i] = calloc((size_t)hn * hn, sizeof(float));
        if (path_gradients(&s, hn, hd, &rng, G, -1) == 0)
            for (int j = 0; j < hn * hn; j++) mats[i][j] = (float)log10(G[j] + 1e-12);
        stack_free(&s);
    }
    free(G);
    {
        char path[1024];
        snprintf(path, sizeof path, "%s/compare_paths.png", o.out);
        tg_heatmap_opts ho = {.title = "log10 |dy_t / dx_s| (row t: output, column s: input)",
                              .xlabel = "input position s",
                              .ylabel = "output position t",
                              .cmap = TG_CMAP_VIRIDIS,
                              .titles_per_panel = 1,
                              .symmetric = -1};
        if (tg_viz_heatmap_grid(path, 1, 4, (const float *const *)mats, hn, hn, titles, &ho) != 0)
            fprintf(stderr, "compare_layers: %s\n", tg_viz_last_error());
    }
    for (int i = 0; i < 4; i++) free(mats[i]);
    const int pn[4] = {8, 16, 32, 64};
    const int npn = o.quick ? 2 : 4;
    int need[NK][4];
    double rel[NK][4] = {{0}};
    printf("\n3. layers needed before y_{n-1} depends on x_0 (|dy/dx_0| > 1e-30 of the largest; in brackets\n"
           "   |dy_{n-1}/dx_0| / max_s |dy_{n-1}/dx_s| at that depth)\n");
    for (int k = 0; k < NK; k++) {
        int kk = k == K_ATTN_STORED || k == K_MHA ? K_ATTN : k;
        printf("%-17s", kind_name[k]);
        for (int i = 0; i < npn; i++) {
            if (k == kk)
                need[k][i] = layers_needed(kk, pn[i], hd, pn[i] + 2, &rng, &rel[k][i]);
            else {
                need[k][i] = need[K_ATTN][i];
                rel[k][i] = rel[K_ATTN][i];
            }
            printf("  n=%d: %d (%.0e)", pn[i], need[k][i], rel[k][i]);
        }
        printf("\n");
    }

    /* 4. learning */
    const int ln = o.quick ? 16 : 32;
    int dist[NDIST] = {1, 2, 4, 8, 16, 31};
    if (o.quick) {
        dist[4] = 12;
        dist[5] = 15;
    }
    const int lk[4] = {K_CONV, K_RNN, K_GRU, K_MHA};
    double acc[4][NDIST];
    int64_t np[4];
    printf("\n4. held-out accuracy of the token at distance m before the last (n %d, V 8, %d steps; chance 12.5%%)\n",
           ln, o.steps);
    printf("%-10s %8s", "layer", "params");
    for (int j = 0; j < NDIST; j++) printf("  m=%-4d", dist[j]);
    printf("\n");
    for (int i = 0; i < 4; i++) {
        if (learn(lk[i], &o, ln, dist, acc[i], &np[i]) != 0) return 1;
        printf("%-10s %8lld", kind_name[lk[i]], (long long)np[i]);
        for (int j = 0; j < NDIST; j++) printf("  %5.1f%%", 100 * acc[i][j]);
        printf("\n");
        fflush(stdout);
    }
    {
        tg_series s[4];
        float xs[NDIST], ys[4][NDIST];
        for (int j = 0; j < NDIST; j++) xs[j] = (float)dist[j];
        for (int i = 0; i < 4; i++) {
            for (int j = 0; j < NDIST; j++) ys[i][j] = (float)(100 * acc[i][j]);
            s[i] = (tg_series){kind_name[lk[i]], xs, ys[i], NDIST};
        }
        char path[1024];
        snprintf(path, sizeof path, "%s/compare_learning.png", o.out);
        tg_plot_opts po = {
            "Recall the token m positions back (held-out accuracy)", "distance m", "accuracy (%)", 0, 0, 0};
        if (tg_viz_lineplot(path, s, 4, &po) != 0) fprintf(stderr, "compare_layers: %s\n", tg_viz_last_error());
    }

    /* 5. the table */
    char path[1024];
    snprintf(path, sizeof path, "%s/compare_layers.txt", o.out);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "compare_layers: cannot write %s\n", path);
        return 1;
    }
    FILE *outs[2] = {stdout, f};
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
    fclose(f);
    { /* the table's measured columns as a figure: sequential ops against n */
        tg_series s[NK];
        float xs[3], ys[NK][3];
        for (int i = 0; i < 3; i++) xs[i] = (float)nq[i];
        for (int k = 0; k < NK; k++) {
            for (int i = 0; i < 3; i++) ys[k][i] = (float)seq[k][i];
            s[k] = (tg_series){kind_name[k], xs, ys[k], 3};
        }
        snprintf(path, sizeof path, "%s/compare_table.png", o.out);
        tg_plot_opts po = {"Sequential operations (critical path of the graph) against n",
                           "n",
                           "ops on the critical path (log)",
                           1,
                           0,
                           0};
        if (tg_viz_lineplot(path, s, NK, &po) != 0) fprintf(stderr, "compare_layers: %s\n", tg_viz_last_error());
    }
    printf(
        "wrote %s/compare_layers.txt, compare_time.png, compare_paths.png, compare_learning.png, compare_table.png\n",
        o.out);
    tg_conv1d_free(L.conv);
    tg_rnn_free(L.rnn);
    tg_gru_free(L.gru);
    tg_mha_free(L.mha);
    tg_release_all();
    return 0;
}
