/* The lm run's report.html (src/train/report.h): settings and curves from
 * the run folder, the attention of every layer and head over the first
 * validation window shown as its text, the positional encoding in use, and
 * the samples written at each evaluation (DIR/samples.jsonl). In a header
 * so that lm (after each checkpoint) and tgrad-report (tools/report.c,
 * from the folder alone) write the same page. */
#ifndef LM_REPORT_H
#define LM_REPORT_H

#include "lm_tokenizer.h"

/* Writes page (NULL: DIR/report.html) for the model m of the run in dir at step (0: the
 * checkpoint's), its attention over validation window 0 of d (B windows of
 * m's block size: x and y hold B * T ints). 0, or -1 with the error
 * recorded. */
static int lm_write_report(const char *dir, const char *page, tg_decoder *m, const lm_tok *tok, const tg_token_data *d,
                           int B, int *x, int *y, int64_t step) {
    const tg_decoder_config *c = &m->cfg;
    char title[200];
    snprintf(title, sizeof title, "lm: GPT, %d layers, %d heads, d %d, T %d, %s positions", c->n_layer, c->n_head,
             c->n_embd, c->block_size, tg_pe_kind_name(c->pos));
    tg_report *rep = tg_report_new();
    char *path = page ? strdup(page) : tg_run_path(dir, "report.html");
    int rc = rep && path && tg_token_data_val_batch(d, 0, B, c->block_size, x, y) == 0 ? 0 : -1;
    if (rc == 0) rc = tg_report_add_run(rep, dir);
    /* A BPE's tokens as their text (bytes: NULL, the report writes them itself). */
    int V = tok && tok->bpe ? lm_tok_vocab(tok) : 0;
    char **text = V ? calloc((size_t)V, sizeof *text) : NULL;
    for (int id = 0; text && id < V; id++) {
        size_t len = 0;
        const unsigned char *b = tg_bpe_token(tok->bpe, id, &len);
        if ((text[id] = malloc(len + 1)))
            memcpy(text[id], b ? (const char *)b : "", b ? len : 0), text[id][b ? len : 0] = 0;
    }
    if (rc == 0 && V && !text) rc = -1;
    if (rc == 0) rc = tg_report_add_decoder(rep, m, x, c->block_size, (const char *const *)text);
    for (int id = 0; text && id < V; id++) free(text[id]);
    free(text);
    if (rc == 0) rc = tg_report_add_samples(rep, dir, step);
    if (rc == 0) rc = tg_report_write(rep, path, title);
    tg_report_free(rep);
    free(path);
    return rc;
}

#endif
