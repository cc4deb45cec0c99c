/* positional_encoding: the figures of d2l's section on positional encoding.
 *
 *   1. the table P for 60 positions x 32 dimensions, as a heatmap;
 *   2. columns 6 to 9 of P against position: lower dimensions oscillate faster;
 *   3. the binary representations of 0..7, where lower bits flip faster too;
 *   4. P P^T: how alike two positions' encodings are depends on their
 *      distance, not on where they are (the relative-position property).
 *
 * P[i, 2j] = sin(i / 10000^(2j/d)),  P[i, 2j+1] = cos(i / 10000^(2j/d)). */
#include <stdio.h>
#include "cli.h"
#include "tgrad.h"

/* 0 when the figure at path was written, else 1 after saying why. */
static int write_or_fail(int rc, const char *path) {
    if (rc != 0) {
        fprintf(stderr, "positional_encoding: %s\n", tg_viz_last_error());
        return 1;
    }
    printf("wrote %s\n", path);
    return 0;
}

/* Draws the matrix M [rows, cols] as a heatmap to out/file. */
static int draw_heatmap(const char *out, const char *file, const tg_tensor *M, int rows, int cols,
                        const tg_heatmap_opts *ho) {
    char path[4200];
    float *m = malloc(sizeof(float) * (size_t)M->size);
    if (!m) {
        fprintf(stderr, "positional_encoding: out of memory\n");
        return 1;
    }
    for (int64_t i = 0; i < M->size; i++) m[i] = (float)M->data[i];
    snprintf(path, sizeof path, "%s/%s", out, file);
    int rc = write_or_fail(tg_viz_heatmap(path, m, rows, cols, ho), path);
    free(m);
    return rc;
}

int main(int argc, char **argv) {
    int num_steps = 60, encoding_dim = 32;
    const char *out = "out";
    cli_opt opts[] = {
        {"steps", CLI_INT, &num_steps, "number of positions (rows of P)", 2, 1000},
        {"dim", CLI_INT, &encoding_dim, "encoding dimension d (columns of P)", 2, 1024},
        {"out", CLI_STR, &out, "directory for the PNG files", 0, 0},
    };
    cli_parse(argc, argv, "[options]", "Draws the sinusoidal positional encoding figures of d2l.", opts,
              (int)(sizeof opts / sizeof opts[0]), NULL, 0);
    char path[4200];
    if (cli_ensure_dir(out) != 0) {
        fprintf(stderr, "positional_encoding: cannot create directory %s\n", out);
        return 1;
    }

    /* As d2l: X + P for X = 0 gives P itself (dropout is off in eval mode). */
    tg_rng rng = tg_rng_new(0);
    tg_posenc *pe = tg_posenc_new(encoding_dim, 0, 1000, &rng);
    if (!pe) {
        fprintf(stderr, "positional_encoding: %s\n", tg_last_error());
        return 1;
    }
    tg_posenc_train(pe, false);
    tg_scope_begin();
    tg_tensor *X = tg_zeros(TG_SHAPE(1, num_steps, encoding_dim));
    tg_tensor *P = tg_posenc_forward(pe, X);
    if (!P) {
        fprintf(stderr, "positional_encoding: %s\n", tg_last_error());
        return 1;
    }
    int rc = 0;

    /* 1. The whole table. */
    tg_heatmap_opts ho = {.title = "Sinusoidal positional encoding P",
                          .xlabel = "Column (encoding dimension)",
                          .ylabel = "Row (position)",
                          .cmap = TG_CMAP_RDBU};
    rc |= draw_heatmap(out, "pe_heatmap.png", P, num_steps, encoding_dim, &ho);

    /* 2. Columns 6..9 against position. */
    enum { FIRST = 6, NCOLS = 4 };
    if (encoding_dim >= FIRST + NCOLS) {
        float *cols = malloc(sizeof(float) * NCOLS * (size_t)num_steps);
        tg_series series[NCOLS];
        char labels[NCOLS][16];
        for (int c = 0; c < NCOLS; c++) {
            for (int i = 0; i < num_steps; i++) cols[c * num_steps + i] = (float)P->data[i * encoding_dim + FIRST + c];
            snprintf(labels[c], sizeof labels[c], "Col %d", FIRST + c);
            series[c] = (tg_series){labels[c], NULL, cols + c * num_steps, num_steps};
        }
        tg_plot_opts po = {.title = "Columns 6-9 of P: lower dimensions oscillate faster",
                           .xlabel = "Row (position)",
                           .ylabel = "P[i, j]"};
        snprintf(path, sizeof path, "%s/pe_columns.png", out);
        rc |= write_or_fail(tg_viz_lineplot(path, series, NCOLS, &po), path);
        free(cols);
    }

    /* 3. Binary representations: the higher the bit, the slower it flips. */
    for (int i = 0; i < 8; i++) printf("%d in binary is %d%d%d\n", i, (i >> 2) & 1, (i >> 1) & 1, i & 1);

    /* 4. P P^T: the similarity of positions i and k, a function of i - k. */
    tg_tensor *P2 = tg_reshape(P, TG_SHAPE(num_steps, encoding_dim));
    tg_tensor *S = tg_matmul_t(P2, P2, false, true);
    if (!S) {
        fprintf(stderr, "positional_encoding: %s\n", tg_last_error());
        return 1;
    }
    tg_heatmap_opts so = {.title = "P P^T: similarity depends on relative position",
                          .xlabel = "Position k",
                          .ylabel = "Position i",
                          .cmap = TG_CMAP_RDBU};
    rc |= draw_heatmap(out, "pe_similarity.png", S, num_steps, num_steps, &so);

    tg_scope_end();
    tg_posenc_free(pe);
    tg_release_all();
    return rc;
}
