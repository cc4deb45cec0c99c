/** @file
 * Figures of tensors: the PNG heatmaps and line plots of src/viz (viz.h),
 * which take float arrays so that viz stands alone, drawn straight from
 * tensors of either precision, so a program never copies values by hand.
 *
 *     tg_figure_heatmap("P.png", pe->P, &(tg_heatmap_opts){.title = "P"});
 *     tg_tensor *w = tg_encoder_attention_weights(enc, 0, 1);   // [1, T, T]
 *     tg_figure_heatmap("layer1_head2.png", w, &opts);
 *
 * A tensor drawn as a matrix is 2-D, or has leading sizes of 1 (a head of
 * recorded attention over one sequence, [1, T, T]): its last two axes are
 * the rows and columns. Errors: -1 with "figure: ..." recorded
 * (tg_last_error), naming the shapes, or viz's message. */
#ifndef TG_TRAIN_FIGURE_H
#define TG_TRAIN_FIGURE_H

#include "../tensor/tensor.h"
#include "../viz/viz.h"

/** One heatmap of the matrix t (tg_viz_heatmap). */
int tg_figure_heatmap(const char *png_path, const tg_tensor *t, const tg_heatmap_opts *o);
/** A grid_rows x grid_cols grid of the matrices ts[i * grid_cols + j], all
 * of one shape (tg_viz_heatmap_grid; panel_titles as there): the learned
 * table beside the fixed one, every layer and head of recorded attention. */
int tg_figure_heatmap_grid(const char *png_path, int grid_rows, int grid_cols, const tg_tensor *const *ts,
                           const char *const *panel_titles, const tg_heatmap_opts *o);
/** One figure of recorded attention: weights(model, l, h), layer l's head
 * h for the sequence just run ([1, T, T]: tg_encoder_attention_weights,
 * tg_decoder_attention_weights), for every layer l < L (rows) and head
 * h < H (columns, "Head 1" ...), on one shared colour scale. */
int tg_figure_attention(const char *png_path, const char *title, const void *model,
                        tg_tensor *(*weights)(const void *model, int l, int h), int L, int H);
/** Line plots of n 1-D tensors ys[s] (labels[s] in the legend, labels may
 * be NULL), against x (1-D, as long as each y) or 0, 1, ... when x is NULL
 * (tg_viz_lineplot). */
int tg_figure_lineplot(const char *png_path, const tg_tensor *const *ys, const char *const *labels, int n,
                       const tg_tensor *x, const tg_plot_opts *o);

#endif
