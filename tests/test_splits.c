/* The thread splits of the ops that used to run on one thread (BENCHMARKS.md,
 * "Where the time goes"): each gives the same bits at 1, 2, 3 and 7 threads
 * (tg__parallel_fake_cpus lets a 2-core machine run 7), and the profiler
 * (profile.h) shows that the op's work was split at all. */
#include <stdio.h>
#include <string.h>

#include "tensor/tensor_internal.h"
#include "test_util.h"

static const int THREADS[] = {1, 2, 3, 7};
enum { NT = sizeof THREADS / sizeof THREADS[0], MAX_OUT = 8 };

/* What one run of a case produced: copies of up to MAX_OUT tensors. */
typedef struct {
    int n;
    tg_real *data[MAX_OUT];
    int64_t size[MAX_OUT];
} outputs;

static void keep(outputs *o, const tg_tensor *t) {
    cr_assert(t, "%s", tg_last_error());
    o->size[o->n] = t->size;
    o->data[o->n] = malloc(sizeof(tg_real) * (size_t)t->size);
    memcpy(o->data[o->n], t->data, sizeof(tg_real) * (size_t)t->size);
    o->n++;
}

static void outputs_free(outputs *o) {
    for (int i = 0; i < o->n; i++) free(o->data[i]);
}

/* Runs the case at each thread count under the profiler: the outputs must be
 * bitwise those of one thread, and at 2 or more threads the rows named
 * must have split a job over 2 threads or more. */
typedef void (*case_fn)(outputs *o);
static void expect_same_bits(const char *what, case_fn run, const char *const *split_rows, const tg_prof_dir *dirs,
                             int nrows) {
    int old = tg__parallel_fake_cpus(8);
    outputs ref = {0};
    for (int k = 0; k < NT; k++) {
        int got = tg_set_num_threads(THREADS[k]);
        cr_assert_eq(got, THREADS[k]);
        outputs o = {0};
        tg_profile_begin();
        run(&o);
        tg_profile_end();
        if (k == 0) {
            ref = o;
            continue;
        }
        cr_assert_eq(o.n, ref.n);
        for (int i = 0; i < o.n; i++)
            cr_expect(memcmp(o.data[i], ref.data[i], sizeof(tg_real) * (size_t)o.size[i]) == 0,
                      "%s: output %d at %d threads differs from 1 thread's", what, i, THREADS[k]);
        tg_profile_entry rows[64];
        int n = tg_profile_entries(rows, 64);
        for (int r = 0; r < nrows; r++) {
            int max = 0;
            for (int i = 0; i < n && i < 64; i++)
                if (rows[i].dir == dirs[r] && strcmp(rows[i].name, split_rows[r]) == 0) max = rows[i].max_threads;
            cr_expect_geq(max, 2, "%s: %s %s used %d thread(s) at %d", what, split_rows[r], tg_prof_dir_name(dirs[r]),
                          max, THREADS[k]);
        }
        outputs_free(&o);
    }
    outputs_free(&ref);
    tg_set_num_threads(0);
    tg__parallel_fake_cpus(old);
}

static tg_tensor *randn_param(int ndim, const int *shape, uint64_t seed, bool grad) {
    tg_rng rng = tg_rng_new(seed);
    tg_tensor *t = tg_randn(ndim, shape, &rng);
    tg_set_requires_grad(t, grad);
    return t;
}

/* A Linear's bias: copied to every row forward (the rows split), summed
 * over the rows backward (tg_k_sum_to: row chunks x column blocks). */
static void affine_case(outputs *o) {
    tg_tensor *x = randn_param(TG_SHAPE(3, 333, 24), 1, true), *w = randn_param(TG_SHAPE(200, 24), 2, true),
              *b = randn_param(TG_SHAPE(200), 3, true);
    tg_scope_begin();
    tg_tensor *y = tg_affine(x, w, b);
    keep(o, y);
    cr_assert(tg_backward(tg_sum_all(tg_mul(y, y))) == 0, "%s", tg_last_error());
    keep(o, b->grad), keep(o, w->grad), keep(o, x->grad);
    tg_scope_end();
    tg_free(x), tg_free(w), tg_free(b);
}

Test(splits, affine_bias_forward_and_gradient) {
    expect_same_bits("affine", affine_case, (const char *[]){"affine", "affine"},
                     (const tg_prof_dir[]){TG_PROF_FORWARD, TG_PROF_BACKWARD}, 2);
}

/* A broadcast add's gradient: b [1, T, d] (a position table, leading 1) and
 * c [d] (a bias) summed over the rows of a [B, T, d]. */
static void add_case(outputs *o) {
    tg_tensor *a = randn_param(TG_SHAPE(9, 130, 70), 4, true), *b = randn_param(TG_SHAPE(1, 130, 70), 5, true),
              *c = randn_param(TG_SHAPE(70), 6, true);
    tg_scope_begin();
    tg_tensor *y = tg_add(tg_add(a, b), c);
    cr_assert(tg_backward(tg_sum_all(tg_mul(y, y))) == 0, "%s", tg_last_error());
    keep(o, b->grad), keep(o, c->grad), keep(o, a->grad);
    tg_scope_end();
    tg_free(a), tg_free(b), tg_free(c);
}

Test(splits, broadcast_add_gradient) {
    expect_same_bits("add", add_case, (const char *[]){"add"}, (const tg_prof_dir[]){TG_PROF_BACKWARD}, 1);
}

/* The embedding: rows gathered forward, scattered with repeats backward
 * (pieces by id modulo 16 x column blocks, positions in order). */
static void gather_case(outputs *o) {
    tg_tensor *table = randn_param(TG_SHAPE(300, 130), 7, true);
    enum { N = 4000 };
    static int ids[N];
    for (int j = 0; j < N; j++) ids[j] = (int)((j * 2654435761u) % 97u) * 3; /* repeats, multiples of 3 */
    tg_scope_begin();
    tg_tensor *y = tg_gather_rows(table, ids, 2, (int[]){40, 100});
    keep(o, y);
    cr_assert(tg_backward(tg_sum_all(tg_mul(y, y))) == 0, "%s", tg_last_error());
    keep(o, table->grad);
    tg_scope_end();
    tg_free(table);
}

Test(splits, embedding_gather_and_scatter) {
    expect_same_bits("gather_rows", gather_case, (const char *[]){"gather_rows", "gather_rows"},
                     (const tg_prof_dir[]){TG_PROF_FORWARD, TG_PROF_BACKWARD}, 2);
}

/* Layer norm's parameter gradients (row chunks x column blocks, chunk sums
 * in order) and its input's; cross-entropy's logits gradient, zeroed row
 * by row on the rows' threads. */
static void norm_and_loss_case(outputs *o) {
    tg_tensor *x = randn_param(TG_SHAPE(1000, 70), 8, true), *gamma = randn_param(TG_SHAPE(70), 9, true),
              *beta = randn_param(TG_SHAPE(70), 10, true);
    static int targets[1000];
    for (int r = 0; r < 1000; r++) targets[r] = r % 7 == 0 ? -100 : (r * 31) % 70; /* some rows ignored */
    tg_scope_begin();
    tg_tensor *y = tg_layer_norm(x, gamma, beta, (tg_real)1e-5);
    keep(o, y);
    tg_tensor *loss = tg_cross_entropy(y, targets, NULL, -100);
    cr_assert(loss && tg_backward(loss) == 0, "%s", tg_last_error());
    keep(o, loss), keep(o, gamma->grad), keep(o, beta->grad), keep(o, x->grad);
    tg_scope_end();
    tg_free(x), tg_free(gamma), tg_free(beta);
}

Test(splits, layer_norm_parameters_and_cross_entropy) {
    expect_same_bits("layer_norm + cross_entropy", norm_and_loss_case,
                     (const char *[]){"layer_norm", "cross_entropy", "cross_entropy"},
                     (const tg_prof_dir[]){TG_PROF_BACKWARD, TG_PROF_FORWARD, TG_PROF_BACKWARD}, 3);
}

/* cross_entropy's loss: rows in pieces of 32 (here 1001 rows: a last piece
 * of 9), each piece summed in row order and the pieces in order; a mask
 * and ignored rows count nothing; the sum and the mean. */
static void cross_entropy_case(outputs *o) {
    enum { N = 1001, V = 50 };
    tg_tensor *x = randn_param(TG_SHAPE(N, V), 11, true);
    static int targets[N];
    static tg_real mask[N];
    for (int r = 0; r < N; r++) targets[r] = r % 5 == 0 ? -1 : (r * 17) % V, mask[r] = r % 11 != 3;
    int64_t counted = 0;
    tg_scope_begin();
    tg_tensor *sum = tg_cross_entropy_sum(x, targets, mask, -1, &counted);
    keep(o, sum);
    cr_assert_eq(counted, 727);
    tg_tensor *mean = tg_cross_entropy(x, targets, NULL, -1);
    keep(o, mean);
    cr_assert(tg_backward(tg_add(sum, mean)) == 0, "%s", tg_last_error());
    keep(o, x->grad);
    tg_scope_end();
    tg_free(x);
}

Test(splits, cross_entropy_loss_sum) {
    expect_same_bits("cross_entropy", cross_entropy_case, (const char *[]){"cross_entropy"},
                     (const tg_prof_dir[]){TG_PROF_FORWARD}, 1);
}

/* The optimizer step (AdamW, decay on matrices only) as one split over all
 * parameters' elements, and gradient clipping (the norm's pieces summed in
 * order, the scaling): a matrix and many small vectors, as a model's
 * biases and norms. */
static void optimizer_case(outputs *o) {
    enum { SMALL = 9 };
    tg_params p;
    tg_params_init(&p);
    tg_tensor *t[SMALL + 1];
    t[0] = randn_param(TG_SHAPE(70, 90), 12, true);
    for (int i = 1; i <= SMALL; i++) t[i] = randn_param(TG_SHAPE(10 + i), 12 + (uint64_t)i, true);
    for (int i = 0; i <= SMALL; i++) {
        char name[16];
        snprintf(name, sizeof name, "p%d", i);
        cr_assert(tg_params_add(&p, NULL, name, t[i]) == 0, "%s", tg_last_error());
    }
    tg_optim_config cfg = tg_adamw_config((tg_real)0.01, (tg_real)0.1);
    tg_optim *opt = tg_optim_new_groups(&cfg, &p);
    cr_assert(opt, "%s", tg_last_error());
    tg_tensor *norms = tg_zeros(TG_SHAPE(2));
    for (int step = 0; step < 2; step++) {
        tg_scope_begin();
        tg_tensor *loss = tg_sum_all(tg_mul(t[0], t[0]));
        for (int i = 1; i <= SMALL; i++) loss = tg_add(loss, tg_sum_all(tg_mul(t[i], t[i])));
        tg_optim_zero_grad(opt);
        cr_assert(tg_backward(loss) == 0, "%s", tg_last_error());
        norms->data[step] = tg_clip_grad_norm(&p, (tg_real)1);
        tg_optim_step(opt);
        tg_scope_end();
    }
    keep(o, norms), keep(o, t[0]), keep(o, t[1]), keep(o, t[SMALL / 2]), keep(o, t[SMALL]);
    tg_optim_free(opt);
    tg_params_free(&p);
    for (int i = 0; i <= SMALL; i++) tg_free(t[i]);
    tg_free(norms);
}

Test(splits, optimizer_step_and_clipping) {
    expect_same_bits("optimizer", optimizer_case, (const char *[]){"step"}, (const tg_prof_dir[]){TG_PROF_OPTIMIZER},
                     1);
}

/* The fused attention: each query block's visible-key counts and key extent
 * (forward), and D = rowsum(dO o O) in the tasks of the pass that first
 * reads it (backward): whole entries in one pass (qkv), the two
 * query-block passes (a partial last block, rows that see no key), k and v
 * only (D as a job of its own), and one tile per entry (ALiBi keeps it off
 * the short path). The 4 entries of q, k, v are whole-entry tasks at 1 and
 * 2 threads and the two passes at 3 and 7 (too few to keep the team busy):
 * both give the same bits. */
static void attention_case(outputs *o) {
    static const int len8[8] = {130, 0, 77, 5, 200, 64, 65, 1};
    static int lens[8 * 4]; /* one per (batch entry, head) */
    for (int i = 0; i < 8 * 4; i++) lens[i] = len8[(i * 3) % 8];
    tg_tensor *qkv = randn_param(TG_SHAPE(8, 130, 3 * 4 * 8), 13, true);
    tg_tensor *q = randn_param(TG_SHAPE(4, 100, 16), 14, false), *k = randn_param(TG_SHAPE(4, 100, 16), 15, true),
              *v = randn_param(TG_SHAPE(4, 100, 16), 16, true);
    tg_tensor *q2 = randn_param(TG_SHAPE(12, 50, 16), 17, true), *k2 = randn_param(TG_SHAPE(12, 50, 16), 18, true),
              *v2 = randn_param(TG_SHAPE(12, 50, 16), 19, true);
    const tg_real slopes[4] = {(tg_real)0.5, (tg_real)0.25, (tg_real)0.125, (tg_real)0.0625};
    tg_attn_pos alibi = {.heads = 4, .alibi = slopes};
    tg_scope_begin();
    tg_tensor *y1 = tg_attention_qkv(qkv, 4, (tg_mask){.causal = true, .lens = lens, .lens_ndim = 1}, 0, NULL, NULL);
    tg_tensor *y2 = tg_attention(q, k, v, (tg_mask){.causal = true}, 0, NULL);
    tg_tensor *y3 = tg_attention_pos(q2, k2, v2, (tg_mask){.causal = true}, 0, NULL, &alibi);
    keep(o, y1), keep(o, y2), keep(o, y3);
    tg_tensor *loss =
        tg_add(tg_add(tg_sum_all(tg_mul(y1, y1)), tg_sum_all(tg_mul(y2, y2))), tg_sum_all(tg_mul(y3, y3)));
    cr_assert(loss && tg_backward(loss) == 0, "%s", tg_last_error());
    keep(o, qkv->grad), keep(o, k->grad), keep(o, v->grad), keep(o, q2->grad);
    cr_assert_null(q->grad);
    tg_scope_end();
    tg_free(qkv), tg_free(q), tg_free(k), tg_free(v), tg_free(q2), tg_free(k2), tg_free(v2);
}

Test(splits, attention_limits_and_D) {
    expect_same_bits("attention", attention_case, (const char *[]){"attention", "attention"},
                     (const tg_prof_dir[]){TG_PROF_FORWARD, TG_PROF_BACKWARD}, 2);
}
