/* extrapolate: which positional information generalises to sequences
 * longer than those seen in training?
 *
 * The same small Transformer encoder is trained on sequences of length 16
 * with each kind of position information, then tested on lengths 16, 32,
 * 64 and 128, on two tasks:
 *   shift    output i is input i - 3 (the first three positions are not
 *            scored): a rule about offsets only, the same at every position;
 *   reverse  output i is input T - 1 - i: a rule about absolute position
 *            (where the end is), which changes with T.
 * Kinds (--pe): fixed (sinusoidal table), learned (absolute table of 16
 * rows: it cannot run past them, a dash in the table), none, relative
 * (Shaw et al. 2018, offsets clipped to --clip), rope (Su et al. 2021) and
 * alibi (Press et al. 2022; the encoder is bidirectional, so its bias is
 * the symmetric -m_h |i - j|, which cannot tell left from right).
 *
 * Prints one line per task and kind,
 *   task=<name> pe=<kind> acc@16=<x>% acc@32=<x>% acc@64=<x>% acc@128=<x>%
 * (held-out token accuracy; "-" where the model cannot run), then a table
 * per task, and writes into --out: accuracy against test length per task
 * (extrapolate_<task>.png), and from the shift models what was learned:
 * the relative embeddings (extrapolate_relative.png), the ALiBi biases of
 * every head (extrapolate_alibi.png), RoPE's q.k score against offset
 * (extrapolate_rope.png). Each model is a run (src/train/run.h) in
 * --out/extrapolate/<task>-<kind>/: its metrics.jsonl (the validation loss
 * is on held-out sequences of the training length) and checkpoints. */
#include <math.h>
#include "toy_run.h"

#define N_LENS  4
#define N_KINDS 6
#define SHIFT   3
/* The position kinds, every one of the library's (tg_pe_kind order), by
 * their library names (set at the start of main). */
static const char *kinds[N_KINDS];
static const char *const tasks[2] = {"shift", "reverse"};

typedef struct {
    int steps, train_len, vocab, batch, dim, heads, ffn, layers, clip, heldout, eval_every, threads, seed;
    double lr;
    const char *task, *pe, *optim, *out;
    const tg_optim_rule *rule; /* --optim's row */
} options;

typedef tg_encoder_model model; /* encoder + Linear(d, V) at every position (model_file.h) */

/* n random sequences of length T and their targets; shift leaves its first
 * SHIFT targets ignored. */
static void make_batch(const options *o, int task, tg_rng *rng, int n, int T, int *x, int *y) {
    for (int b = 0; b < n; b++) {
        int *xs = x + (size_t)b * T, *ys = y + (size_t)b * T;
        for (int t = 0; t < T; t++) xs[t] = (int)(tg_rng_next_u64(rng) % (uint64_t)o->vocab);
        for (int t = 0; t < T; t++) ys[t] = task == 0 ? (t >= SHIFT ? xs[t - SHIFT] : TG_IGNORE_INDEX) : xs[T - 1 - t];
    }
}

static int model_new(model *m, const options *o, int kind) {
    tg_rng rng = tg_rng_new((uint64_t)o->seed);
    /* The absolute tables hold train_len rows: the learned one is trained
     * on those only. The fixed one is a formula and could be longer; it is
     * made long enough to be tested (what it does there is the question). */
    tg_encoder_config cfg = {.vocab_size = o->vocab,
                             .num_hiddens = o->dim,
                             .ffn_hiddens = o->ffn,
                             .num_heads = o->heads,
                             .num_layers = o->layers,
                             .max_len = (tg_pe_kind)kind == TG_PE_LEARNED ? o->train_len : 1000,
                             .pe = (tg_pe_kind)kind,
                             .relative_clip = o->clip};
    return tg_encoder_model_init(m, &cfg, o->train_len, &rng);
}

static void model_free(model *m) { tg_encoder_model_free(m); }

/* Held-out token accuracy at length T (targets that are not ignored), and
 * in *loss (when not NULL) the mean cross-entropy; NAN with the library's
 * message in why (when given) when the model cannot run at T. */
static double evaluate(model *m, const options *o, int task, int T, double *loss, char *why, size_t cap) {
    int n = o->heldout;
    int *x = malloc(sizeof(int) * (size_t)n * T), *y = malloc(sizeof(int) * (size_t)n * T);
    tg_rng held = tg_rng_fork(&(tg_rng){(uint64_t)o->seed, 0, 0}, 100 + (uint64_t)T); /* never trained on */
    make_batch(o, task, &held, n, T, x, y);
    tg_encoder_train(m->encoder, false);
    bool grad = tg_set_grad_enabled(false);
    long right = 0, total = 0;
    double sum = 0;
    for (int s = 0; s < n; s += 64) {
        int B = n - s < 64 ? n - s : 64;
        long scored = 0;
        tg_scope_begin();
        tg_tensor *logits = tg_encoder_model_forward(m, x + (size_t)s * T, B, T);
        if (!logits) {
            if (why && !why[0]) snprintf(why, cap, "%s", tg_last_error()); /* the first length that failed */
            tg_scope_end();
            total = 0;
            break;
        }
        right += toy_argmax_hits(logits->data, y + (size_t)s * T, (int64_t)B * T, o->vocab, &scored);
        tg_tensor *l = loss ? tg_cross_entropy(logits, y + (size_t)s * T, NULL, TG_IGNORE_INDEX) : NULL;
        sum += l ? (double)tg_item(l) * (double)scored : 0;
        total += scored;
        tg_scope_end();
    }
    tg_set_grad_enabled(grad);
    tg_encoder_train(m->encoder, true);
    free(x);
    free(y);
    if (loss) *loss = total > 0 ? sum / (double)total : NAN;
    return total > 0 ? (double)right / (double)total : NAN;
}

static double val_loss(model *m, const options *o, int task) {
    double loss;
    evaluate(m, o, task, o->train_len, &loss, NULL, 0);
    return loss;
}

/* Trains m (new) on the task at train_len, as the run --out/extrapolate/
 * <task>-<kind>. Returns the run's exit status (tg_run_close's). */
static int train(model *m, const options *o, int task, int kind) {
    int B = o->batch, T = o->train_len;
    if (model_new(m, o, kind) != 0) {
        fprintf(stderr, "extrapolate: %s, %s: %s\n", tasks[task], kinds[kind], tg_last_error());
        return 1;
    }
    tg_optim_config oc = tg_optim_config_of(o->rule, (tg_real)o->lr);
    tg_optim *opt = tg_optim_new(&oc, &m->params);
    int *x = malloc(sizeof(int) * (size_t)B * T), *y = malloc(sizeof(int) * (size_t)B * T);
    tg_rng data = tg_rng_fork(&(tg_rng){(uint64_t)o->seed, 0, 0}, 1 + (uint64_t)task); /* same batches for all */
    char name[64];
    snprintf(name, sizeof name, "%s-%s", tasks[task], kinds[kind]);
    /* Divergence: a uniform guess costs ln V. */
    toy_run_config tc = {o->out, "extrapolate", name, o->steps, o->eval_every, o->lr, 0, 100 * log(o->vocab), B * T};
    tg_rngs rngs = {0}; /* the data sampler's and the dropouts' generators, for the run's checkpoints */
    bool ok = x && y && tg_rngs_add(&rngs, "data", &data) == 0 && tg_encoder_rngs(m->encoder, &rngs) == 0;
    tg_run *run = ok ? toy_run_open(&tc, &m->params, opt, &rngs) : NULL;
    while (tg_run_next(run)) {
        make_batch(o, task, &data, B, T, x, y);
        tg_scope_begin();
        int bad =
            tg_run_backward(run, tg_cross_entropy(tg_encoder_model_forward(m, x, B, T), y, NULL, TG_IGNORE_INDEX));
        tg_scope_end();
        if (bad || tg_run_step(run) != 0) break;
        if (tg_run_eval_due(run) && tg_run_eval(run, val_loss(m, o, task)) != 0) break;
    }
    int status = run ? tg_run_close(run) : 1;
    tg_optim_free(opt);
    free(x);
    free(y);
    return status;
}

static int wrote(int rc, const char *path) { return toy_wrote("extrapolate", rc, path, true); }

/* Shaw's learned a^K and a^V of the first block, rows = offsets -C..C. */
static int draw_relative(model *m, const options *o) {
    const tg_position *a = &m->encoder->blocks[0]->attention->pos;
    const char *titles[2] = {"relative_k (a^K)", "relative_v (a^V)"};
    char path[4200], ylabel[64];
    snprintf(path, sizeof path, "%s/extrapolate_relative.png", o->out);
    snprintf(ylabel, sizeof ylabel, "offset j - i + %d (row 0: <= -%d)", a->clip, a->clip);
    tg_heatmap_opts ho = {.title = "Relative position embeddings learned on the shift task (block 0)",
                          .xlabel = "head dimension",
                          .ylabel = ylabel,
                          .cmap = TG_CMAP_RDBU};
    return wrote(
        tg_figure_heatmap_grid(path, 1, 2, (const tg_tensor *const[]){a->relative_k, a->relative_v}, titles, &ho),
        path);
}

/* ALiBi's bias -m_h |i - j| of every head at the training length. */
static int draw_alibi(model *m, const options *o) {
    const tg_position *a = &m->encoder->blocks[0]->attention->pos;
    int h = m->encoder->blocks[0]->attention->num_heads, T = o->train_len;
    float *all = malloc(sizeof(float) * (size_t)h * T * T);
    const float **mats = malloc(sizeof *mats * (size_t)h);
    char(*titles)[48] = malloc(sizeof *titles * (size_t)h);
    const char **tp = malloc(sizeof *tp * (size_t)h);
    for (int j = 0; j < h; j++) {
        for (int q = 0; q < T; q++)
            for (int k = 0; k < T; k++) all[((size_t)j * T + q) * T + k] = (float)(-a->alibi[j] * abs(q - k));
        mats[j] = all + (size_t)j * T * T;
        snprintf(titles[j], sizeof titles[j], "head %d: m = 1/%g", j, 1 / (double)a->alibi[j]);
        tp[j] = titles[j];
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/extrapolate_alibi.png", o->out);
    tg_heatmap_opts ho = {.title = "ALiBi: the bias -m_h |i - j| added to each head's scores",
                          .xlabel = "key j",
                          .ylabel = "query i",
                          .cmap = TG_CMAP_BLUES,
                          .symmetric = -1};
    int rc = wrote(tg_viz_heatmap_grid(path, 1, h, mats, T, T, tp, &ho), path);
    free(all);
    free(mats);
    free(titles);
    free(tp);
    return rc;
}

/* RoPE in the trained first block: the score of the mean query at position
 * 0 with the mean key at offset o (means over the scaled token embeddings),
 *   s(o) = sum_i cos(o w_i)(q_a k_a + q_b k_b) + sin(o w_i)(q_b k_a - q_a k_b),
 * w_i = 10000^(-2i/hd): the content-free part of what each head prefers. */
static int draw_rope(model *m, const options *o) {
    const tg_mha *a = m->encoder->blocks[0]->attention;
    int d = o->dim, h = a->num_heads, hd = d / h, V = o->vocab, range = 64, n = 2 * range + 1;
    double *e = calloc((size_t)d, sizeof *e), *q = calloc((size_t)d, sizeof *q), *k = calloc((size_t)d, sizeof *k);
    for (int t = 0; t < V; t++)
        for (int c = 0; c < d; c++) e[c] += m->encoder->embedding->weight->data[(size_t)t * d + c] * sqrt(d) / V;
    for (int r = 0; r < d; r++)
        for (int c = 0; c < d; c++) {
            q[r] += a->W_q->weight->data[(size_t)r * d + c] * e[c];
            k[r] += a->W_k->weight->data[(size_t)r * d + c] * e[c];
        }
    float *xs = malloc(sizeof(float) * (size_t)n), *ys = malloc(sizeof(float) * (size_t)n * h);
    tg_series *s = malloc(sizeof *s * (size_t)h);
    char(*labels)[16] = malloc(sizeof *labels * (size_t)h);
    for (int i = 0; i < n; i++) xs[i] = (float)(i - range);
    for (int j = 0; j < h; j++) {
        const double *qh = q + j * hd, *kh = k + j * hd;
        for (int i = 0; i < n; i++) {
            double off = i - range, sc = 0;
            for (int p = 0; p < hd / 2; p++) {
                double w = pow(10000.0, -2.0 * p / hd);
                double qa = qh[2 * p], qb = qh[2 * p + 1], ka = kh[2 * p], kb = kh[2 * p + 1];
                sc += cos(off * w) * (qa * ka + qb * kb) + sin(off * w) * (qb * ka - qa * kb);
            }
            ys[(size_t)j * n + i] = (float)(sc / sqrt(hd));
        }
        snprintf(labels[j], sizeof labels[j], "head %d", j);
        s[j] = (tg_series){labels[j], xs, ys + (size_t)j * n, n};
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/extrapolate_rope.png", o->out);
    tg_plot_opts po = {.title = "RoPE after training on shift: mean q.k / sqrt(d_head) against offset j - i",
                       .xlabel = "offset j - i (trained on |j - i| <= 15)",
                       .ylabel = "score"};
    int rc = wrote(tg_viz_lineplot(path, s, h, &po), path);
    free(e), free(q), free(k), free(xs), free(ys), free(s), free(labels);
    return rc;
}

static int draw_accuracy(const options *o, int task, double acc[N_KINDS][N_LENS], const bool *ran, const int *lens) {
    const char *names[N_KINDS];
    double xs[N_LENS];
    for (int i = 0; i < N_LENS; i++) xs[i] = lens[i];
    for (int v = 0; v < N_KINDS; v++) names[v] = ran[v] ? kinds[v] : NULL; /* NAN accuracy: no line there */
    char file[64], title[128];
    snprintf(file, sizeof file, "extrapolate_%s.png", tasks[task]);
    snprintf(title, sizeof title, "%s task, trained on length %d", tasks[task], o->train_len);
    tg_plot_opts po = {.title = title, .xlabel = "test sequence length", .ylabel = "held-out token accuracy (%)"};
    return toy_plot_rows("extrapolate", o->out, file, &po, names, xs, acc[0], N_KINDS, N_LENS, 100, true);
}

int main(int argc, char **argv) {
    options o = {.steps = 1500, .train_len = 16, .vocab = 16, .batch = 32, .dim = 32, .heads = 4, .ffn = 64};
    o.layers = 2, o.clip = 8, o.heldout = 200, o.eval_every = 250, o.seed = 1, o.lr = 3e-3, o.task = "all",
    o.pe = "all", o.optim = "adam", o.out = "out";
    const cli_opt opts[] = {
        {"task", CLI_STR, &o.task, "shift, reverse, or all", 0, 0},
        {"pe", CLI_STR, &o.pe, "fixed, learned, none, relative, rope, alibi, or all", 0, 0},
        {"steps", CLI_INT, &o.steps, "training steps per task and kind", 1, 1e7},
        {"train-len", CLI_INT, &o.train_len, "training length T (tested at T, 2T, 4T, 8T)", 4, 256},
        {"vocab", CLI_INT, &o.vocab, "vocabulary size", 2, 4096},
        {"batch", CLI_INT, &o.batch, "sequences per step", 1, 1e5},
        {"dim", CLI_INT, &o.dim, "model width d", 2, 4096},
        {"heads", CLI_INT, &o.heads, "attention heads (must divide d; RoPE needs an even head size)", 1, 256},
        {"ffn", CLI_INT, &o.ffn, "hidden width of the FFN", 1, 1e5},
        {"layers", CLI_INT, &o.layers, "encoder blocks", 1, 64},
        {"clip", CLI_INT, &o.clip, "relative: offsets clipped to [-clip, clip] (< T: the end rows get trained)", 1,
         4096},
        {"optim", CLI_STR, &o.optim, "optimizer: any row of the library's table (sgd, adam, adamw)", 0, 0},
        {"lr", CLI_REAL, &o.lr, "learning rate", 1e-8, 10},
        {"heldout", CLI_INT, &o.heldout, "held-out sequences per test length", 1, 1e6},
        {"eval-every", CLI_INT, &o.eval_every, "steps between validation losses (and checkpoints) of each run", 1, 1e7},
        {"seed", CLI_INT, &o.seed, "random seed", 0, 2e9},
        {"threads", CLI_INT, &o.threads, "threads (0: all CPUs available)", 0, 1024},
        {"out", CLI_STR, &o.out, "directory for the figures; the runs go in its extrapolate/", 0, 0},
    };
    const int nopt = (int)(sizeof opts / sizeof opts[0]);
    const char *about = "Trains a Transformer encoder on length 16 with each kind of positional information and\n"
                        "tests it on lengths 16 to 128, on a task of offsets (shift) and one of absolute position\n"
                        "(reverse).";
    cli_parse(argc, argv, "[options]", about, opts, nopt, NULL, 0);
    for (int v = 0; v < N_KINDS; v++) kinds[v] = tg_pe_kind_name((tg_pe_kind)v);
    int task_sel = strcmp(o.task, "all") == 0       ? -1
                   : strcmp(o.task, "shift") == 0   ? 0
                   : strcmp(o.task, "reverse") == 0 ? 1
                                                    : -2;
    int kind_sel = strcmp(o.pe, "all") == 0 ? -1 : -2;
    for (int v = 0; v < N_KINDS; v++)
        if (strcmp(o.pe, kinds[v]) == 0) kind_sel = v;
    bool rope_ok =
        (kind_sel >= 0 && kind_sel != TG_PE_ROPE) || tg_pe_check("extrapolate", TG_PE_ROPE, o.dim / o.heads) == 0;
    if (task_sel == -2 || kind_sel == -2 || o.dim % o.heads != 0 || !rope_ok) {
        return cli_usage_error(argv[0], "[options]", about, opts, nopt,
                               "bad --task or --pe value, --heads does not divide --dim, or an odd head size for rope");
    }
    if (!(o.rule = tg_optim_find(o.optim))) /* the names come from the table */
        return cli_usage_error(argv[0], "[options]", about, opts, nopt, "%s", tg_last_error());
    if (o.threads > 0) tg_set_num_threads(o.threads);
    if (cli_ensure_dir(o.out) != 0) {
        fprintf(stderr, "extrapolate: cannot create directory %s\n", o.out);
        return 1;
    }
    int lens[N_LENS];
    for (int i = 0; i < N_LENS; i++) lens[i] = o.train_len << i;
    printf("extrapolate: train on T %d, test on %d, %d, %d, %d; V %d, d %d, %d heads, %d blocks, %d steps of %d, "
           "Adam lr %g, relative clip %d\n",
           o.train_len, lens[0], lens[1], lens[2], lens[3], o.vocab, o.dim, o.heads, o.layers, o.steps, o.batch, o.lr,
           o.clip);
    double t_start = toy_now();
    int run = 0, rc = 0, status = 0;   /* rc: a figure failed; status: a run's exit status */
    tg_report *page = tg_report_new(); /* OUT/extrapolate/report.html: positions, then the tables */
    double acc[2][N_KINDS][N_LENS];
    bool ran[2][N_KINDS] = {{false}};
    char why[2][N_KINDS][256];
    for (int task = 0; task < 2 && status == 0; task++) {
        if (task_sel >= 0 && task != task_sel) continue;
        for (int v = 0; v < N_KINDS && status == 0; v++) {
            if (kind_sel >= 0 && v != kind_sel) continue;
            model m = {0};
            run++;
            if ((status = train(&m, &o, task, v)) != 0) { /* a failure or a signal: the runs so far are reported */
                model_free(&m);
                break;
            }
            ran[task][v] = true;
            why[task][v][0] = 0;
            printf("task=%s pe=%s", tasks[task], kinds[v]);
            for (int i = 0; i < N_LENS; i++) {
                acc[task][v][i] = evaluate(&m, &o, task, lens[i], NULL, why[task][v], sizeof why[task][v]);
                if (isnan(acc[task][v][i]))
                    printf(" acc@%d=-", lens[i]);
                else
                    printf(" acc@%d=%.1f%%", lens[i], 100 * acc[task][v][i]);
            }
            printf("\n");
            fflush(stdout);
            if (task == 0 && (tg_pe_kind)v == TG_PE_RELATIVE) rc |= draw_relative(&m, &o) != 0;
            if (task == 0 && (tg_pe_kind)v == TG_PE_ALIBI) rc |= draw_alibi(&m, &o) != 0;
            if (task == 0 && (tg_pe_kind)v == TG_PE_ROPE) rc |= draw_rope(&m, &o) != 0;
            /* The page shows what each kind uses, over the longest test length (a learned table has only the
             * training length's rows). */
            if (task == 0 && page &&
                tg_report_add_positions(page, m.encoder,
                                        (tg_pe_kind)v == TG_PE_LEARNED ? o.train_len : lens[N_LENS - 1]))
                rc |= 1, fprintf(stderr, "extrapolate: report: %s\n", tg_last_error());
            model_free(&m);
        }
    }
    for (int task = 0; task < 2; task++) {
        bool any = false;
        for (int v = 0; v < N_KINDS; v++) any |= ran[task][v];
        if (!any) continue;
        printf("\n%s task: held-out token accuracy by test length (trained on %d)\n%-9s", tasks[task], o.train_len,
               "pe");
        for (int i = 0; i < N_LENS; i++) printf(" %7d", lens[i]);
        printf("\n");
        for (int v = 0; v < N_KINDS; v++) {
            if (!ran[task][v]) continue;
            printf("%-9s", kinds[v]);
            for (int i = 0; i < N_LENS; i++)
                if (isnan(acc[task][v][i]))
                    printf(" %7s", "-");
                else
                    printf(" %6.1f%%", 100 * acc[task][v][i]);
            printf("\n");
        }
        for (int v = 0; v < N_KINDS; v++)
            if (ran[task][v] && why[task][v][0]) printf("  (-: %s: %s)\n", kinds[v], why[task][v]);
        rc |= draw_accuracy(&o, task, acc[task], ran[task], lens) != 0;
    }
    char settings[512];
    snprintf(settings, sizeof settings,
             "{\"train_len\":\"%d\",\"steps\":\"%d\",\"batch\":\"%d\",\"vocab\":\"%d\",\"dim\":\"%d\","
             "\"heads\":\"%d\",\"layers\":\"%d\",\"lr\":\"%g\",\"seed\":\"%d\"}",
             o.train_len, o.steps, o.batch, o.vocab, o.dim, o.heads, o.layers, o.lr, o.seed);
    rc |= toy_report_tables(page, "extrapolate", o.out, "extrapolate: positions against sequence length", settings,
                            tasks, 2, kinds, N_KINDS, lens, N_LENS, acc[0][0], ran[0], o.train_len) != 0;
    tg_report_free(page);
    printf("\n%d runs in %.0f s\n", run, toy_now() - t_start);
    tg_release_all();
    return status ? status : rc;
}
