/* One figure of recorded attention for the example programs: the weights
 * of every layer (rows) and head (columns) for one sequence, on one shared
 * colour scale. Header-only, shared by lm and reverse. */
#ifndef ATTENTION_FIGURE_H
#define ATTENTION_FIGURE_H

#include <stdio.h>
#include <stdlib.h>
#include "tgrad.h"

/* weights(model, l, h) is layer l's head h for the sequence just run,
 * [1, T, T] (tg_encoder_attention_weights, tg_decoder_attention_weights).
 * Returns 0, or -1 with the reason printed after "prog: ". */
static int draw_attention_grid(const char *prog, const char *path, const char *title, const void *model,
                               tg_tensor *(*weights)(const void *, int, int), int L, int H) {
    const tg_tensor **heads = malloc(sizeof(tg_tensor *) * (size_t)L * H);
    char(*titles)[32] = malloc(sizeof(char[32]) * (size_t)H);
    const char **tp = malloc(sizeof(char *) * (size_t)H);
    int rc = heads && titles && tp ? 0 : (tg_set_error("out of memory"), -1);
    for (int k = 0; rc == 0 && k < L * H; k++)
        if (!(heads[k] = weights(model, k / H, k % H))) rc = -1;
    for (int h = 0; rc == 0 && h < H; h++) {
        snprintf(titles[h], 32, "Head %d", h + 1);
        tp[h] = titles[h];
    }
    tg_heatmap_opts ho = {.title = title,
                          .xlabel = "Key positions",
                          .ylabel = "Query positions",
                          .cmap = TG_CMAP_BLUES,
                          .shared_scale = 1};
    if (rc == 0) rc = tg_figure_heatmap_grid(path, L, H, heads, tp, &ho);
    if (rc != 0) fprintf(stderr, "%s: %s\n", prog, tg_last_error());
    free(heads);
    free(titles);
    free(tp);
    return rc;
}

#endif
