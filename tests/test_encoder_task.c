/* The toy sequence tasks of an encoder model (train/model_file.h,
 * encoder_task.c): their data and the held-out set a seed implies, the
 * scores on it, a run trained by tg_run_encoder_step whose checkpoints
 * carry the model's metadata (tg_encoder_open rebuilds it from the run
 * folder), its page written after each checkpoint and again from the
 * folder alone, the same bytes; and the attention figure. */
#include <criterion/criterion.h>

#include "test_util.h"
#include "io_test_util.h"

#include <math.h>
#include <string.h>

TestSuite(encoder_task, .fini = cleanup);

Test(encoder_task, reverse_and_sort_targets_and_the_held_out_stream) {
    int x[3 * 7], y[3 * 7];
    tg_rng rng = tg_rng_new(2);
    cr_assert_eq(tg_seq_task_batch("reverse", &rng, 3, 7, 5, x, y), 0, "%s", tg_last_error());
    for (int b = 0; b < 3; b++)
        for (int t = 0; t < 7; t++) {
            cr_expect(x[b * 7 + t] >= 0 && x[b * 7 + t] < 5);
            cr_expect_eq(y[b * 7 + t], x[b * 7 + 6 - t]);
        }
    cr_assert_eq(tg_seq_task_batch("sort", &rng, 3, 7, 5, x, y), 0);
    for (int b = 0; b < 3; b++) {
        int cx[5] = {0}, cy[5] = {0};
        for (int t = 0; t < 7; t++) cx[x[b * 7 + t]]++, cy[y[b * 7 + t]]++;
        cr_expect_arr_eq(cx, cy, sizeof cx, "the same tokens");
        for (int t = 1; t < 7; t++) cr_expect_leq(y[b * 7 + t - 1], y[b * 7 + t], "in order");
    }
    /* The held-out set is the seed's stream 2, one draw per token: a larger
     * set starts with a smaller one. */
    int h[2 * 7], g[2 * 7], big[3 * 7], bt[3 * 7];
    cr_assert_eq(tg_seq_task_heldout("reverse", 11, 2, 7, 5, h, g), 0);
    tg_rng held = tg_rng_fork(&(tg_rng){11, 0, 0}, 2);
    for (int i = 0; i < 14; i++) cr_expect_eq(h[i], (int)(tg_rng_next_u64(&held) % 5));
    cr_assert_eq(tg_seq_task_heldout("reverse", 11, 3, 7, 5, big, bt), 0);
    cr_expect_arr_eq(big, h, sizeof h);
    cr_expect_null(tg_seq_task_name("copy"));
    cr_expect(error_has("task 'copy'", "expected reverse or sort"), "%s", tg_last_error());
    cr_expect_eq(tg_seq_task_batch("sort", &rng, 1, 7, 5000, x, y), -1, "V past the counting table");
    cr_expect_str_eq(tg_seq_task_name("sort"), "sort");
}

/* Two steps of a run, its page after each checkpoint and from the folder
 * alone; the scores on the held-out set are tg_encoder_model_evaluate's. */
Test(encoder_task, a_run_its_page_and_its_scores) {
    tmpdir();
    tg_encoder_config c = {.vocab_size = 6, .num_hiddens = 8, .ffn_hiddens = 8, .num_heads = 2, .num_layers = 1};
    tg_rng rng = tg_rng_new(3);
    tg_encoder_model m;
    cr_assert_eq(tg_encoder_model_init(&m, &c, 5, &rng), 0, "%s", tg_last_error());
    snprintf(m.task, sizeof m.task, "sort");
    tg_optim_config oc = tg_adam_config((tg_real)0.01);
    tg_optim *opt = tg_optim_new(&oc, &m.params);
    tg_rngs rngs = {0};
    cr_assert_eq(tg_encoder_rngs(m.encoder, &rngs), 0);
    char *meta = tg_encoder_model_meta(&m);
    TG_REQUIRE(meta);
    cr_expect(strstr(meta, "\"task\":\"sort\"") && strstr(meta, "\"model_type\":\"encoder\""), "%s", meta);
    int seed = 4;
    tg_setting set[1] = {{.name = "seed", .type = TG_SETTING_INT, .value = &seed}};
    tg_run_config rc = tg_run_defaults(in_dir("run"), 2);
    rc.quiet = true, rc.eval_every = 1, rc.meta = meta, rc.settings = set, rc.n_settings = 1;
    tg_run *run = tg_run_open(&rc, &m.params, opt, &rngs);
    TG_REQUIRE(run);
    tg_encoder_task_page page = {run, &m, (uint64_t)seed, "test"};
    tg_run_on_save(run, tg_encoder_task_on_save, &page);
    int x[4 * 5], y[4 * 5];
    while (tg_run_next(run)) {
        cr_assert_eq(tg_seq_task_batch("sort", &rng, 4, 5, 6, x, y), 0);
        cr_assert_eq(tg_run_encoder_step(run, &m, x, y, 4, 5), 0, "%s", tg_last_error());
        if (tg_run_eval_due(run)) cr_assert_eq(tg_run_eval(run, tg_encoder_task_evaluate(&m, 4, 8, NULL, NULL)), 0);
    }
    cr_assert_eq(tg_run_close(run), 0);
    free(meta);

    double ta, sa, tb, sb;
    int hx[8 * 5], hy[8 * 5];
    cr_assert_eq(tg_seq_task_heldout("sort", 4, 8, 5, 6, hx, hy), 0);
    double la = tg_encoder_task_evaluate(&m, 4, 8, &ta, &sa), lb = tg_encoder_model_evaluate(&m, hx, hy, 8, &tb, &sb);
    cr_expect(la == lb && ta == tb && sa == sb, "%g %g", la, lb);
    cr_expect(isnan(tg_encoder_task_evaluate(&m, 4, 0, &ta, NULL)) && isnan(ta));

    /* The run folder rebuilds the model; its page again is the same bytes. */
    tg_encoder_model o;
    cr_assert_eq(tg_encoder_open(in_dir("run"), &o), 0, "%s", tg_last_error());
    cr_expect_str_eq(o.task, "sort");
    char own[4096], again[4096];
    snprintf(own, sizeof own, "%s", in_dir("run/report.html"));
    snprintf(again, sizeof again, "%s", in_dir("again.html"));
    cr_assert_eq(tg_encoder_task_report(in_dir("run"), again, &o, 4), 0, "%s", tg_last_error());
    unsigned char *a, *b;
    size_t na, nb;
    cr_assert_eq(tg_read_file(own, "test", &a, &na), 0, "%s", tg_last_error());
    cr_assert_eq(tg_read_file(again, "test", &b, &nb), 0);
    cr_expect(na == nb && memcmp(a, b, na) == 0, "the page from the folder alone differs");
    char *text = strndup((const char *)a, na);
    cr_expect(text && strstr(text, "reverse: the sort task, T 5, V 6, d 8, 2 heads, 1 blocks, fixed positions"));
    free(text);
    tg_sys_free(a), tg_sys_free(b);

    cr_assert_eq(tg_encoder_draw_attention(&o, hx, in_dir("att.png"), "attention"), 0, "%s", tg_last_error());
    cr_expect(file_exists(in_dir("att.png")));
    cr_expect_eq(tg_encoder_draw_attention(&o, NULL, in_dir("att.png"), "attention"), -1);
    tg_encoder_model_free(&o);
    tg_optim_free(opt);
    tg_encoder_model_free(&m);
}
