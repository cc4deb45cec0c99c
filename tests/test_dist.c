/* Data-parallel training, what a single process can check: the autograd's
 * gradient-ready hook (order, finality, unreached and repeated leaves), the
 * bucket layout, the single-process behaviour of src/distributed/ (the stubs of a
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

/* ---- dropout over a data-parallel shard (tg_dropout_set_shard) --------------------------
 * size ranks simulated in one process: rank r runs the forward and backward
 * on rows [r Bl, r Bl + Bl) of the global batch, with the shard (r, size)
 * set and its generators in the state the global run started from. Its
 * masks must be its slice of the global run's (the outputs and gradients
 * equal the global ones' rows), and its generators end where the global
 * run's do. */

/* Rows [r0, r0 + n) of t (leading axis), a copy that may require grad. */
static tg_tensor *rows_of(const tg_tensor *t, int r0, int n) {
    int shape[TG_MAX_DIMS];
    memcpy(shape, t->shape, sizeof(int) * (size_t)t->ndim);
    int64_t per = t->size / t->shape[0];
    shape[0] = n;
    tg_tensor *s = tg_from_array(t->ndim, shape, t->data + (int64_t)r0 * per);
    TG_REQUIRE(s);
    tg_set_requires_grad(s, t->requires_grad);
    return s;
}

/* Whether rows [r0, r0 + part->shape[0]) of whole equal part, to tol. */
static bool rows_equal(const tg_tensor *whole, const tg_tensor *part, int r0, double tol) {
    int64_t per = whole->size / whole->shape[0];
    for (int64_t i = 0; i < part->size; i++)
        if (!(fabs((double)part->data[i] - (double)whole->data[(int64_t)r0 * per + i]) <= tol)) return false;
    return true;
}

/* Two draws from one generator in one forward: the rule is per draw. */
static tg_tensor *two_dropouts(tg_tensor *x, tg_rng *g) { return tg_dropout(tg_tanh(tg_dropout(x, 0.3, g)), 0.5, g); }

Test(dist, dropout_shards_are_slices_of_the_single_process_masks) {
    tg_scope_begin();
    enum { B = 6, T = 5, D = 7 };
    tg_rng init = tg_rng_new(5);
    tg_tensor *x = tg_randn(TG_SHAPE(B, T, D), &init);
    tg_set_requires_grad(x, true);
    const tg_rng start = {11, 3, 1000}; /* mid-run: some draws already taken */
    tg_rng one = start;
    tg_tensor *y = two_dropouts(x, &one);
    TG_REQUIRE(y);
    cr_assert_eq(tg_backward(tg_sum_all(tg_mul(y, y))), 0);
    cr_expect_eq(one.counter, start.counter + 2 * (uint64_t)(B * T * D));
    for (int size = 2; size <= 3; size++)
        for (int r = 0, Bl = B / size; r < size; r++) {
            cr_assert_eq(tg_dropout_set_shard(r, size), 0);
            tg_rng g = start;
            tg_tensor *xr = rows_of(x, r * Bl, Bl), *yr = two_dropouts(xr, &g);
            TG_REQUIRE(yr);
            cr_assert_eq(tg_backward(tg_sum_all(tg_mul(yr, yr))), 0);
            cr_expect(rows_equal(y, yr, r * Bl, 0), "rank %d of %d: its masks are its rows' of one process", r, size);
            cr_expect(rows_equal(x->grad, xr->grad, r * Bl, 0), "rank %d of %d: gradient", r, size);
            cr_expect_eq(g.counter, one.counter, "rank %d of %d: the generator stays in step", r, size);
        }
    /* Without the shard, rank 1 would draw rank 0's masks for its rows. */
    cr_assert_eq(tg_dropout_set_shard(0, 1), 0);
    tg_rng g = start;
    tg_tensor *y1 = two_dropouts(rows_of(x, B / 2, B / 2), &g);
    cr_expect_not(rows_equal(y, y1, B / 2, 0));
    tg_scope_end();
}

/* The fused attention's mask over [B h, Q, K] weights, heads folded in
 * batch-major (row b h + head), as mha.c folds them. */
Test(dist, attention_dropout_shards_are_slices_of_the_single_process_masks) {
    tg_scope_begin();
    enum { B = 6, H = 2, Q = 5, K = 7, DK = 4, DV = 3 };
    tg_rng init = tg_rng_new(9);
    tg_tensor *q = tg_randn(TG_SHAPE(B * H, Q, DK), &init), *k = tg_randn(TG_SHAPE(B * H, K, DK), &init);
    tg_tensor *v = tg_randn(TG_SHAPE(B * H, K, DV), &init);
    tg_set_requires_grad(q, true), tg_set_requires_grad(k, true), tg_set_requires_grad(v, true);
    tg_mask causal = {NULL, 0, true};
    const tg_rng start = {4, 1, 77};
    tg_rng one = start;
    tg_tensor *o = tg_attention(q, k, v, causal, 0.3, &one);
    TG_REQUIRE(o);
    cr_assert_eq(tg_backward(tg_sum_all(tg_mul(o, o))), 0);
    for (int size = 2; size <= 3; size++)
        for (int r = 0, Bl = B / size; r < size; r++) {
            cr_assert_eq(tg_dropout_set_shard(r, size), 0);
            tg_rng g = start, gs = start;
            int r0 = r * Bl * H, n = Bl * H;
            tg_tensor *qr = rows_of(q, r0, n), *kr = rows_of(k, r0, n), *vr = rows_of(v, r0, n);
            tg_tensor *o_r = tg_attention(qr, kr, vr, causal, 0.3, &g);
            TG_REQUIRE(o_r);
            cr_assert_eq(tg_backward(tg_sum_all(tg_mul(o_r, o_r))), 0);
            cr_expect(rows_equal(o, o_r, r0, 1e-12), "rank %d of %d: output", r, size);
            cr_expect(rows_equal(q->grad, qr->grad, r0, 1e-12) && rows_equal(k->grad, kr->grad, r0, 1e-12) &&
                          rows_equal(v->grad, vr->grad, r0, 1e-12),
                      "rank %d of %d: gradients", r, size);
            cr_expect_eq(g.counter, one.counter, "rank %d of %d: the generator stays in step", r, size);
            /* The stored path's tg_dropout takes the same shard of the same indices. */
            tg_tensor *s = tg_mul_scalar(tg_matmul_t(qr, kr, false, true), (tg_real)(1.0 / sqrt((double)DK)));
            tg_tensor *os = tg_matmul(tg_dropout(tg_masked_softmax(s, causal), 0.3, &gs), vr);
            TG_REQUIRE(os);
            cr_expect_lt(max_diff(os, o_r), 1e-12, "rank %d of %d: stored path", r, size);
        }
    cr_assert_eq(tg_dropout_set_shard(0, 1), 0);
    tg_scope_end();
}

Test(dist, dropout_shard_needs_a_rank_inside_the_world) {
    int r = -1, s = -1;
    tg_dropout_get_shard(&r, &s);
    cr_expect(r == 0 && s == 1, "default: rank 0 of 1, got %d of %d", r, s);
    cr_expect_eq(tg_dropout_set_shard(2, 2), -1);
    cr_expect(error_has("dropout_set_shard", "rank 2 of 2"));
    cr_expect_eq(tg_dropout_set_shard(-1, 2), -1);
    cr_expect_eq(tg_dropout_set_shard(0, 0), -1);
    tg_dropout_get_shard(&r, &s);
    cr_expect(r == 0 && s == 1, "a refused shard changes nothing");
    cr_expect_eq(tg_dropout_set_shard(1, 3), 0);
    tg_dropout_get_shard(&r, NULL);
    tg_dropout_get_shard(NULL, &s);
    cr_expect(r == 1 && s == 3);
    cr_expect_eq(tg_dropout_set_shard(0, 1), 0);
}
