/* Figures of tensors (src/train/figure.h): the same PNG bytes as the float
 * calls of viz on the same values, and every error named. */
#include "io_test_util.h"
#include "test_util.h"

TestSuite(figure, .fini = cleanup);

static bool same_file(const char *a, const char *b) {
    size_t na, nb;
    unsigned char *x = read_all(a, &na), *y = read_all(b, &nb);
    bool same = na == nb && memcmp(x, y, na) == 0;
    free(x), free(y);
    return same;
}

static float *floats_of(const tg_tensor *t) {
    float *f = malloc(sizeof(float) * (size_t)t->size);
    for (int64_t i = 0; i < t->size; i++) f[i] = (float)t->data[i];
    return f;
}

Test(figure, tensors_draw_as_their_float_values) {
    tmpdir();
    tg_rng rng = tg_rng_new(1);
    tg_tensor *m = tg_randn(TG_SHAPE(5, 7), &rng), *head = tg_randn(TG_SHAPE(1, 5, 7), &rng);
    float *fm = floats_of(m), *fh = floats_of(head);
    tg_heatmap_opts o = {.title = "t", .xlabel = "x", .ylabel = "y", .cmap = TG_CMAP_RDBU};
    cr_assert_eq(tg_figure_heatmap(in_dir("a.png"), m, &o), 0, "%s", tg_last_error());
    cr_assert_eq(tg_viz_heatmap(in_dir("b.png"), fm, 5, 7, &o), 0);
    cr_expect(same_file(in_dir("a.png"), in_dir("b.png")), "heatmap");
    const char *titles[2] = {"m", "head"};
    cr_assert_eq(tg_figure_heatmap_grid(in_dir("c.png"), 1, 2, (const tg_tensor *const[]){m, head}, titles, &o), 0,
                 "%s", tg_last_error());
    cr_assert_eq(tg_viz_heatmap_grid(in_dir("d.png"), 1, 2, (const float *const[]){fm, fh}, 5, 7, titles, &o), 0);
    cr_expect(same_file(in_dir("c.png"), in_dir("d.png")), "grid, a [1, 5, 7] head beside a [5, 7] matrix");
    tg_tensor *x = tg_arange(0, 7, 1), *y = tg_randn(TG_SHAPE(7), &rng);
    float *fx = floats_of(x), *fy = floats_of(y);
    tg_plot_opts po = {.title = "lines", .xlabel = "i", .ylabel = "v"};
    cr_assert_eq(tg_figure_lineplot(in_dir("e.png"), (const tg_tensor *const[]){x, y}, (const char *const[]){"x", "y"},
                                    2, x, &po),
                 0, "%s", tg_last_error());
    tg_series s[2] = {{"x", fx, fx, 7}, {"y", fx, fy, 7}};
    cr_assert_eq(tg_viz_lineplot(in_dir("f.png"), s, 2, &po), 0);
    cr_expect(same_file(in_dir("e.png"), in_dir("f.png")), "line plot");
    free(fm), free(fh), free(fx), free(fy);

    /* Errors name the shapes. */
    tg_clear_error();
    cr_expect_eq(tg_figure_heatmap(in_dir("g.png"), y, &o), -1);
    cr_expect(error_has("figure: heatmap", "(7) is not a matrix"), "%s", tg_last_error());
    tg_tensor *two = tg_randn(TG_SHAPE(2, 5, 7), &rng);
    cr_expect_eq(tg_figure_heatmap(in_dir("g.png"), two, &o), -1);
    cr_expect(error_has("figure: heatmap", "(2,5,7) is not a matrix"), "%s", tg_last_error());
    tg_tensor *other = tg_randn(TG_SHAPE(5, 6), &rng);
    cr_expect_eq(tg_figure_heatmap_grid(in_dir("g.png"), 1, 2, (const tg_tensor *const[]){m, other}, NULL, &o), -1);
    cr_expect(error_has("figure: heatmap grid", "panel 1 is (5,6), panel 0 (5,7)"), "%s", tg_last_error());
    cr_expect_eq(tg_figure_heatmap_grid(in_dir("g.png"), 70000, 70000, (const tg_tensor *const[]){m}, NULL, &o), -1);
    cr_expect(error_has("figure: heatmap grid", "70000 x 70000 grid (1..64 a side)"), "%s", tg_last_error());
    cr_expect_eq(tg_figure_lineplot(in_dir("g.png"), (const tg_tensor *const[]){m}, NULL, 1, NULL, &po), -1);
    cr_expect(error_has("figure: lineplot", "series 0 is (5,7)"), "%s", tg_last_error());
    cr_expect_eq(tg_figure_lineplot(in_dir("g.png"), (const tg_tensor *const[]){y}, NULL, 1, other, &po), -1);
    cr_expect_eq(tg_figure_heatmap("/nonexistent-dir/g.png", m, &o), -1);
    cr_expect(error_has("figure: ", "nonexistent-dir"), "%s", tg_last_error());
    cr_expect_eq(tg_figure_heatmap(in_dir("g.png"), NULL, &o), -1);
    cr_expect(!file_exists(in_dir("g.png")));
    tg_free(m), tg_free(head), tg_free(x), tg_free(y), tg_free(two), tg_free(other);
}
