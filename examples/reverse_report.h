/* The reverse run's report.html (src/train/report.h): settings and curves
 * from the run folder, the encoder's attention of every layer and head over
 * the first held-out sequence (its tokens shown as numbers), and the
 * positional encoding in use (the fixed table as d2l draws it, the learned
 * one beside it, or the attention kinds' terms). In a header so that
 * reverse (after each checkpoint) and tgrad-report (tools/report.c, from
 * the folder alone) write the same page. */
#ifndef REVERSE_REPORT_H
#define REVERSE_REPORT_H

#include "reverse_model.h"

/* The tokens of the first held-out sequence: reverse draws its held-out set
 * from the seed's stream 2, one draw per token (reverse.c, make_batch). */
static void reverse_first_heldout(const options *o, int *x) {
    tg_rng held = tg_rng_fork(&(tg_rng){(uint64_t)o->seed, 0, 0}, 2);
    for (int t = 0; t < o->seq_len; t++) x[t] = (int)(tg_rng_next_u64(&held) % (uint64_t)o->vocab);
}

/* Writes page (NULL: DIR/report.html) for the model m of the run in dir,
 * trained with position kind pe. 0, or -1 with the error recorded. */
static int reverse_write_report(const char *dir, const char *page, model *m, const options *o, const char *pe) {
    int T = o->seq_len, V = o->vocab;
    char title[160];
    snprintf(title, sizeof title, "reverse: the %s task, T %d, V %d, d %d, %d heads, %d blocks, %s positions", o->task,
             T, V, o->dim, o->heads, o->layers, pe);
    int *x = malloc(sizeof(int) * (size_t)T);
    char *names = malloc((size_t)V * 16); /* a token's text: its id and a space, "12 " */
    const char **text = malloc(sizeof(char *) * (size_t)V);
    char *path = page ? strdup(page) : tg_run_path(dir, "report.html");
    tg_report *rep = tg_report_new();
    int rc = x && names && text && path && rep ? 0 : (tg_set_error("reverse: report: out of memory"), -1);
    for (int v = 0; rc == 0 && v < V; v++) snprintf(names + 16 * v, 16, "%d ", v), text[v] = names + 16 * v;
    if (rc == 0) reverse_first_heldout(o, x);
    if (rc == 0) rc = tg_report_add_run(rep, dir);
    if (rc == 0) rc = tg_report_add_encoder(rep, m->encoder, x, T, text);
    if (rc == 0) rc = tg_report_write(rep, path, title);
    tg_report_free(rep);
    free(x), free(names), free(text), free(path);
    return rc;
}

/* What the page of a run in progress shows, for reverse_report_on_save. */
typedef struct {
    tg_run *run;
    model *m;
    const options *o;
    const char *pe;
} reverse_run_page;

/* tg_run_on_save's callback (rank 0, after each checkpoint): the run's
 * page; one that cannot be written is said on stderr and the run goes on. */
static inline int reverse_report_on_save(void *ctx, int64_t step) {
    (void)step;
    const reverse_run_page *p = ctx;
    if (reverse_write_report(tg_run_dir(p->run), NULL, p->m, p->o, p->pe) != 0)
        fprintf(stderr, "reverse: report: %s\n", tg_last_error());
    return 0;
}

#endif
