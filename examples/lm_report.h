/* The lm run's report.html: the library's tg_decoder_report
 * (train/model_file.h), which tgrad-report writes from the folder alone. */
#ifndef LM_REPORT_H
#define LM_REPORT_H

#include "lm_tokenizer.h"

static int lm_write_report(const char *dir, const char *page, tg_decoder *m, const lm_tok *tok, const tg_token_data *d,
                           int B, int *x, int *y, int64_t step) {
    (void)x, (void)y;
    return tg_decoder_report(dir, page, m, tok ? tok->t : NULL, d, B, step);
}

#endif
