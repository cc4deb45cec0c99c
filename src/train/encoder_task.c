/* The toy sequence tasks of an encoder model (model_file.h): their data
 * (reverse, sort), the held-out set a run's seed implies, a training step
 * of a run, the attention figure and the run's page. reverse trains on
 * them and tgrad-report rebuilds a run's page from its folder alone, so
 * both take the task, the held-out draw and the title from here: one
 * definition, and the page of a run is the same whoever writes it. */
#include "model_file.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../distributed/dist.h"
#include "figure.h"

enum { TASK_MAX_VOCAB = 4096 }; /* sort counts the tokens in a table of this size */

const char *tg_seq_task_name(const char *task) {
    static const char *const names[] = {"reverse", "sort"};
    for (int i = 0; task && i < 2; i++)
        if (strcmp(task, names[i]) == 0) return names[i];
    tg_set_error("task '%s': expected reverse or sort", task ? task : "(NULL)");
    return NULL;
}

int tg_seq_task_batch(const char *task, tg_rng *rng, int n, int T, int V, int *tokens, int *targets) {
    const char *name = tg_seq_task_name(task);
    if (!name) return -1;
    if (!rng || !tokens || !targets || n < 0 || T < 1 || V < 2 || V > TASK_MAX_VOCAB) {
        tg_set_error("seq_task_batch: %s: NULL argument, or n %d, T %d, V %d outside n >= 0, T >= 1, V in 2..%d", name,
                     n, T, V, TASK_MAX_VOCAB);
        return -1;
    }
    bool sort = strcmp(name, "sort") == 0;
    for (int b = 0; b < n; b++) {
        int *x = tokens + (size_t)b * T, *y = targets + (size_t)b * T;
        for (int t = 0; t < T; t++) x[t] = (int)(tg_rng_next_u64(rng) % (uint64_t)V);
        if (sort) { /* counting sort: y is x in increasing order */
            int count[TASK_MAX_VOCAB] = {0}, k = 0;
            for (int t = 0; t < T; t++) count[x[t]]++;
            for (int v = 0; v < V; v++)
                while (count[v]--) y[k++] = v;
        } else {
            for (int t = 0; t < T; t++) y[t] = x[T - 1 - t];
        }
    }
    return 0;
}

int tg_seq_task_heldout(const char *task, uint64_t seed, int n, int T, int V, int *tokens, int *targets) {
    tg_rng held = tg_rng_fork(&(tg_rng){seed, 0, 0}, 2); /* a stream training never draws from */
    return tg_seq_task_batch(task, &held, n, T, V, tokens, targets);
}

double tg_encoder_task_evaluate(tg_encoder_model *m, uint64_t seed, int n, double *token_acc, double *seq_acc) {
    int T = m ? m->seq_len : 0;
    int *x = m && n > 0 ? malloc(sizeof(int) * (size_t)n * (size_t)T) : NULL;
    int *y = x ? malloc(sizeof(int) * (size_t)n * (size_t)T) : NULL;
    double loss = NAN;
    if (!m || !m->encoder || n < 1)
        tg_set_error("encoder_task_evaluate: %s", n < 1 ? "no sequences" : "NULL model");
    else if (!y)
        tg_set_error("encoder_task_evaluate: out of memory for %d held-out sequences of %d tokens", n, T);
    else if (tg_seq_task_heldout(m->task, seed, n, T, m->encoder->cfg.vocab_size, x, y) == 0)
        loss = tg_encoder_model_evaluate(m, x, y, n, token_acc, seq_acc);
    if (isnan(loss) && token_acc) *token_acc = NAN;
    if (isnan(loss) && seq_acc) *seq_acc = NAN;
    free(x);
    free(y);
    return loss;
}

int tg_run_encoder_step(tg_run *run, tg_encoder_model *m, const int *tokens, const int *targets, int B, int T) {
    int rank = tg_dist_rank(), Bl = B / tg_dist_size();
    size_t at = (size_t)rank * (size_t)Bl * (size_t)T; /* this rank's slice of the global batch */
    tg_scope_begin();
    tg_tensor *logits = tokens && targets ? tg_encoder_model_forward(m, tokens + at, Bl, T) : NULL;
    if (!tokens || !targets) tg_set_error("run_encoder_step: NULL tokens or targets");
    int bad = tg_run_backward(run, tg_cross_entropy(logits, targets ? targets + at : NULL, NULL, TG_IGNORE_INDEX));
    tg_scope_end();
    return bad ? -1 : tg_run_step(run);
}

static tg_tensor *encoder_weights(const void *m, int l, int h) { return tg_encoder_attention_weights(m, l, h); }

int tg_encoder_draw_attention(tg_encoder_model *m, const int *tokens, const char *png_path, const char *title) {
    if (!m || !m->encoder || !tokens || !png_path) {
        tg_set_error("encoder_draw_attention: NULL %s", !tokens ? "tokens" : !png_path ? "path" : "model");
        return -1;
    }
    tg_encoder *e = m->encoder;
    bool training = e->cfg.num_layers > 0 ? e->blocks[0]->attention->attention->dropout->training : true;
    tg_encoder_train(e, false);
    tg_encoder_record_attention(e, true);
    bool grad = tg_set_grad_enabled(false);
    tg_scope_begin();
    int rc = tg_encoder_model_forward(m, tokens, 1, m->seq_len) ? 0 : -1;
    if (rc == 0) rc = tg_figure_attention(png_path, title, e, encoder_weights, e->cfg.num_layers, e->cfg.num_heads);
    tg_scope_end();
    tg_set_grad_enabled(grad);
    tg_encoder_record_attention(e, false);
    tg_encoder_train(e, training);
    return rc;
}

int tg_encoder_task_report(const char *dir, const char *page, tg_encoder_model *m, uint64_t seed) {
    if (!m || !m->encoder) {
        tg_set_error("encoder_task_report: NULL model");
        return -1;
    }
    const tg_encoder_config *c = &m->encoder->cfg;
    int T = m->seq_len, *x = malloc(sizeof(int) * (size_t)T * 2);
    char title[160];
    snprintf(title, sizeof title, "reverse: the %s task, T %d, V %d, d %d, %d heads, %d blocks, %s positions", m->task,
             T, c->vocab_size, c->num_hiddens, c->num_heads, c->num_layers, tg_pe_kind_name(c->pe));
    int rc = x ? tg_seq_task_heldout(m->task, seed, 1, T, c->vocab_size, x, x + T)
               : (tg_set_error("encoder_task_report: out of memory"), -1);
    if (rc == 0) rc = tg_encoder_report(dir, page, m, x, title);
    free(x);
    return rc;
}

int tg_encoder_task_on_save(void *ctx, int64_t step) {
    (void)step;
    const tg_encoder_task_page *p = ctx;
    if (tg_encoder_task_report(tg_run_dir(p->run), NULL, p->m, p->seed) != 0)
        fprintf(stderr, "%s: report: %s\n", p->prog ? p->prog : "run", tg_last_error());
    return 0;
}
