/* Data-parallel training, what a single process can check: the autograd's
 * gradient-ready hook (order, finality, unreached and repeated leaves), the
 * bucket layout, the single-process behaviour of src/dist/ (the stubs of a
 * build without MPI=1, or MPI not initialised), and the data shard of
 * tg_token_data_batch_shard. The collectives themselves run under mpirun
 * in tests/dist_test.sh (make test MPI=1). */
#include "io_test_util.h"
#include "test_util.h"
#include "tgrad.h"

TestSuite(dist, .fini = cleanup);

/* ---- the gradient-ready hook -------------------------------------------------- */
typedef struct {
    int order[8], n;
    tg_tensor *const *leaves;
    tg_real snap[8][4]; /* each leaf's gradient when it was reported */
} ready_log;

static void on_ready(int i, void *ctx) {
    ready_log *r = ctx;
    cr_assert_lt(r->n, 8);
    r->order[r->n++] = i;
    const tg_tensor *g = r->leaves[i]->grad;
    for (int k = 0; k < 4; k++) r->snap[i][k] = g && k < g->size ? g->data[k] : (tg_real)-999;
}

Test(dist, grad_ready_hook_reports_each_leaf_once_when_final) {
    tg_rng rng = tg_rng_new(3);
    /* a is used twice (first and last op), b in the middle, c never. */
    tg_tensor *a = tg_randn(TG_SHAPE(4), &rng), *b = tg_randn(TG_SHAPE(4), &rng), *c = tg_randn(TG_SHAPE(4), &rng);
    tg_tensor *leaves[4] = {a, b, c, a}; /* a listed twice: its second index is reported at the start */
    for (int i = 0; i < 3; i++) tg_set_requires_grad(leaves[i], true);
    ready_log log = {.leaves = leaves};
    cr_assert_eq(tg_set_grad_ready_hook(leaves, 4, on_ready, &log), 0);
    tg_scope_begin();
    tg_tensor *h = tg_tanh(tg_mul(a, a)); /* first use of a */
    h = tg_mul(h, b);
    tg_tensor *loss = tg_sum(tg_mul(h, a), -1, false); /* last use of a */
    cr_assert_eq(tg_backward(loss), 0);
    tg_scope_end();
    /* Unreached first (c, and a's duplicate entry), then b, whose only use
     * is later in the forward than a's first. */
    cr_assert_eq(log.n, 4);
    cr_expect_eq(log.order[0], 2);
    cr_expect_eq(log.order[1], 3);
    cr_expect_eq(log.order[2], 1);
    cr_expect_eq(log.order[3], 0);
    /* Reported gradients were already final. */
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 4; k++) cr_expect_eq(log.snap[i][k], leaves[i]->grad->data[k], "leaf %d [%d]", i, k);
    /* Removed: the next backward reports nothing. */
    cr_assert_eq(tg_set_grad_ready_hook(NULL, 0, NULL, NULL), 0);
    log.n = 0;
    tg_scope_begin();
    cr_assert_eq(tg_backward(tg_sum(tg_mul(a, b), -1, false)), 0);
    tg_scope_end();
    cr_expect_eq(log.n, 0);
    /* Bad arguments. */
    cr_expect_eq(tg_set_grad_ready_hook(NULL, 2, on_ready, &log), -1);
    cr_expect_eq(tg_set_grad_ready_hook(leaves, 0, on_ready, &log), -1);
    tg_tensor *with_null[2] = {a, NULL};
    cr_expect_eq(tg_set_grad_ready_hook(with_null, 2, on_ready, &log), -1);
    tg_free(a), tg_free(b), tg_free(c);
}

/* ---- bucket layout and the single-process behaviour ---------------------------- */
static void four_params(tg_params *p, tg_tensor **t) {
    const int sizes[4] = {100, 300, 50, 1000};
    tg_params_init(p);
    for (int i = 0; i < 4; i++) {
        t[i] = tg_full(TG_SHAPE(sizes[i]), (tg_real)(i + 1));
        tg_set_requires_grad(t[i], true);
        char name[8];
        snprintf(name, sizeof name, "p%d", i);
        cr_assert_eq(tg_params_add(p, NULL, name, t[i]), 0);
    }
}

Test(dist, buckets_follow_backward_order_and_size) {
    tg_params p;
    tg_tensor *t[4];
    four_params(&p, t);
    /* From the last: p3 (1000 >= 400) alone, then p2 + p1 (350) + p0 (450). */
    tg_dist_grads *g = tg_dist_grads_new(&p, 400 * sizeof(tg_real));
    TG_REQUIRE(g);
    cr_expect_eq(tg_dist_grads_buckets(g), 2);
    tg_dist_grads_free(g);
    g = tg_dist_grads_new(&p, 1); /* every parameter its own bucket */
    cr_expect_eq(tg_dist_grads_buckets(g), 4);
    tg_dist_grads_free(g);
    g = tg_dist_grads_new(&p, 0); /* the default, 4 MiB: one bucket */
    cr_expect_eq(tg_dist_grads_buckets(g), 1);
    tg_dist_grads_free(g);
    cr_expect_null(tg_dist_grads_new(NULL, 0));
    tg_params empty;
    tg_params_init(&empty);
    cr_expect_null(tg_dist_grads_new(&empty, 0));
    cr_expect(error_has("dist_grads_new", "empty"));
    cr_expect_eq(tg_dist_grads_buckets(NULL), 0);
    tg_dist_grads_free(NULL);
    tg_params_free(&p);
    for (int i = 0; i < 4; i++) tg_free(t[i]);
}

Test(dist, one_process_changes_nothing) {
    cr_expect_not(tg_dist_active());
    cr_expect_eq(tg_dist_rank(), 0);
    cr_expect_eq(tg_dist_size(), 1);
    cr_expect_eq(tg_dist_barrier(), 0);
#ifndef TG_MPI
    cr_expect_not(tg_dist_available());
    cr_expect_eq(tg_dist_init(NULL, NULL), -1);
    cr_expect(error_has("built without MPI=1", "make MPI=1"));
    cr_expect_not(tg_dist_active());
#endif
    double v[2] = {1.5, -2};
    cr_expect_eq(tg_dist_allreduce_sum(v, 2), 0);
    cr_expect(v[0] == 1.5 && v[1] == -2);
    cr_expect_eq(tg_dist_allreduce_sum(NULL, 2), -1);
    tg_params p;
    tg_tensor *t[4];
    four_params(&p, t);
    cr_expect_eq(tg_dist_broadcast_params(&p), 0);
    cr_expect_eq(tg_dist_broadcast_params(NULL), -1);
    cr_expect_eq(t[3]->data[999], 4);
    /* Armed or not, one process's gradients are already the average. */
    tg_dist_grads *g = tg_dist_grads_new(&p, 1);
    TG_REQUIRE(g);
    cr_expect_eq(tg_dist_grads_arm(g), 0);
    tg_scope_begin();
    tg_tensor *loss = tg_sum(tg_mul(t[3], t[3]), -1, false); /* d/dp3 = 2 p3 = 8 */
    cr_assert_eq(tg_backward(loss), 0);
    tg_scope_end();
    cr_expect_eq(tg_dist_allreduce_grads(g), 0);
    cr_expect_eq(t[3]->grad->data[0], 8);
    cr_expect_eq(tg_dist_grads_stats(g).calls, 1);
    cr_expect_eq(tg_dist_grads_stats(g).bytes, 1450.0 * sizeof(tg_real));
    cr_expect_eq(tg_dist_allreduce_grads(NULL), -1);
    cr_expect_eq(tg_dist_grads_arm(NULL), -1);
    cr_expect_eq(tg_dist_grads_stats(NULL).calls, 0);
    tg_dist_grads_free(g);
    cr_expect_eq(tg_dist_finalize(), 0);
    tg_params_free(&p);
    for (int i = 0; i < 4; i++) tg_free(t[i]);
}

/* ---- the data shard ---------------------------------------------------------------- */
Test(dist, token_data_shards_are_the_global_batch) {
    tmpdir();
    int ids[2000];
    for (int k = 0; k < 2000; k++) ids[k] = k % 1000;
    cr_assert_eq(tg_tokens_save(in_dir("count.npy"), ids, 2000, 1000), 0);
    tg_token_data *one = tg_token_data_open(in_dir("count.npy"), 0.1, 5);
    tg_token_data *r0 = tg_token_data_open(in_dir("count.npy"), 0.1, 5);
    tg_token_data *r1 = tg_token_data_open(in_dir("count.npy"), 0.1, 5);
    TG_REQUIRE(one);
    TG_REQUIRE(r0);
    TG_REQUIRE(r1);
    enum { B = 8, T = 6 };
    int x[B * T], y[B * T], xs[B * T], ys[B * T];
    for (int step = 0; step < 3; step++) {
        cr_assert_eq(tg_token_data_batch(one, B, T, x, y), 0);
        cr_assert_eq(tg_token_data_batch_shard(r0, B, T, 0, 2, xs, ys), 0);
        cr_assert_eq(tg_token_data_batch_shard(r1, B, T, 1, 2, xs + B / 2 * T, ys + B / 2 * T), 0);
        cr_expect(memcmp(x, xs, sizeof x) == 0 && memcmp(y, ys, sizeof y) == 0, "step %d", step);
        cr_expect_eq(r0->rng.counter, one->rng.counter); /* every rank's generator stays in step */
        cr_expect_eq(r1->rng.counter, one->rng.counter);
    }
    cr_expect_eq(tg_token_data_batch_shard(r0, 9, T, 0, 2, xs, ys), -1);
    cr_expect(error_has("token_data_batch_shard", "divide"));
    cr_expect_eq(tg_token_data_batch_shard(r0, B, T, 2, 2, xs, ys), -1);
    cr_expect_eq(tg_token_data_batch_shard(r0, B, T, 0, 0, xs, ys), -1);
    cr_expect_eq(tg_token_data_batch_shard(NULL, B, T, 0, 1, xs, ys), -1);
    tg_token_data_close(one), tg_token_data_close(r0), tg_token_data_close(r1);
}
