/* Position terms of attention (tg_attn_pos: ALiBi, a per-head bias table,
 * Shaw's relative keys and values) on the fused op and on the stored path:
 * the same outputs and gradients (q, k, v and the tables) to 1e-12 in
 * double, for heads, masks, dropout, offsets and sizes across the fused
 * op's blocks; bit-identical fused results for 1 and 2 threads; fused
 * memory linear in T; ALiBi's slopes; RoPE's relative property and its two
 * pairings; errors. Gradient checks are in cases_position.c. */
#include "test_util.h"

#include <string.h>

TestSuite(position, .init = scoped_test_begin, .fini = scoped_test_end);

typedef struct {
    int B, Q, K, d, dv, heads, clip, qoff;
    int terms; /* 1 ALiBi, 2 bias, 4 rel_k, 8 rel_v */
    int mask;  /* 0 none, 1 lens [B], 2 causal */
    tg_real p;
    int t5; /* T5 buckets instead of clipping (max_distance 20; one-sided when causal) */
} pos_case;

typedef struct {
    tg_tensor *t[7]; /* out, dq, dk, dv, then the tables' gradients */
    int n;
} grads;

/* One forward + backward through a fresh module forced onto `path`. */
static grads run(tg_attention_path path, const pos_case *c, tg_tensor *const *in, int n_in, const tg_attn_pos *pos,
                 tg_mask mask, const tg_tensor *R) {
    tg_rng rng = tg_rng_new(41);
    tg_dot_attention *m = tg_dot_attention_new(c->p, &rng);
    m->path = path;
    for (int i = 0; i < n_in; i++) tg_zero_grad(in[i]);
    tg_tensor *out = tg_dot_attention_forward_pos(m, in[0], in[1], in[2], mask, pos);
    TG_REQUIRE(out);
    cr_assert_eq(tg_backward_seed(out, R), 0, "%s", tg_last_error());
    grads g = {{tg_clone(out)}, n_in + 1};
    for (int i = 0; i < n_in; i++) g.t[i + 1] = tg_clone(in[i]->grad);
    tg_dot_attention_free(m);
    return g;
}

static void compare(const pos_case *c, uint64_t seed) {
    tg_rng rng = tg_rng_new(seed);
    int R = c->t5 ? c->t5 : 2 * c->clip + 1;
    tg_tensor *in[6] = {tg_randn(TG_SHAPE(c->B, c->Q, c->d), &rng), tg_randn(TG_SHAPE(c->B, c->K, c->d), &rng),
                        tg_randn(TG_SHAPE(c->B, c->K, c->dv), &rng)};
    tg_fill_normal(in[0], 0, 2, &rng);
    int n = 3;
    tg_real slopes[16];
    tg_alibi_slopes(c->heads, slopes);
    tg_attn_pos pos = {.heads = c->heads,
                       .clip = c->clip,
                       .q_offset = c->qoff,
                       .alibi = c->terms & 1 ? slopes : NULL,
                       .t5_buckets = c->t5,
                       .t5_max_distance = 20,
                       .t5_one_sided = c->mask == 2};
    if (c->terms & 2) pos.bias = in[n++] = tg_randn(TG_SHAPE(c->heads, R), &rng);
    if (c->terms & 4) pos.rel_k = in[n++] = tg_randn(TG_SHAPE(R, c->d), &rng);
    if (c->terms & 8) pos.rel_v = in[n++] = tg_randn(TG_SHAPE(R, c->dv), &rng);
    for (int i = 0; i < n; i++) tg_set_requires_grad(in[i], true);
    tg_tensor *Rg = tg_randn(TG_SHAPE(c->B, c->Q, c->dv), &rng);
    int *lens = tg_arena_alloc(sizeof(int) * (size_t)c->B);
    for (int b = 0; b < c->B; b++) lens[b] = (int)(tg_rng_bits(seed, 3, (uint64_t)b) % (uint64_t)(c->K + 2));
    tg_mask mask = {c->mask == 1 ? lens : NULL, c->mask == 1, c->mask == 2};
    grads f = run(TG_PATH_FUSED, c, in, n, &pos, mask, Rg), s = run(TG_PATH_STORED, c, in, n, &pos, mask, Rg);
    static const char *names[] = {"out", "dq", "dk", "dv", "table 1", "table 2", "table 3"};
    for (int i = 0; i < f.n; i++) {
        double e = max_diff(f.t[i], s.t[i]);
        cr_expect(e <= 1e-12,
                  "(B%d,Q%d,K%d,d%d,dv%d) heads %d clip %d off %d terms %d mask %d p %g: %s differs by %.3g", c->B,
                  c->Q, c->K, c->d, c->dv, c->heads, c->clip, c->qoff, c->terms, c->mask, (double)c->p, names[i], e);
    }
}

Test(position, fused_and_stored_paths_agree) {
    cr_assert(sizeof(tg_real) == 8, "compared in the double build");
    static const pos_case cases[] = {
        /* B  Q    K    d   dv  h  clip off terms mask p */
        {4, 5, 5, 3, 2, 2, 0, 0, 1, 2, 0, 0},          /* ALiBi, causal */
        {6, 7, 7, 4, 4, 3, 0, 0, 1, 0, 0, 0},          /* ALiBi bidirectional, 3 heads */
        {4, 6, 6, 3, 3, 2, 2, 0, 2, 1, 0.2, 0},        /* bias table, lens, dropout */
        {4, 9, 9, 4, 3, 2, 3, 0, 12, 2, 0, 0},         /* Shaw, causal */
        {3, 5, 8, 3, 5, 1, 2, 3, 12, 1, 0.3, 0},       /* Shaw, q offset, lens, dropout */
        {2, 4, 4, 2, 2, 2, 1, 0, 15, 0, 0.1, 0},       /* everything */
        {2, 70, 130, 8, 8, 2, 5, 0, 15, 1, 0.1, 0},    /* across blocks */
        {4, 130, 130, 16, 16, 4, 16, 0, 13, 2, 0, 0},  /* ALiBi + Shaw, causal, 3 blocks */
        {2, 100, 100, 8, 4, 2, 200, 0, 14, 0, 0.2, 0}, /* clip beyond T */
        {6, 65, 63, 7, 9, 6, 3, 0, 15, 2, 0.5, 0},
        {4, 90, 100, 8, 8, 2, 0, 0, 14, 1, 0.1, 32}, /* T5 buckets, two-sided */
        {2, 130, 130, 4, 4, 2, 0, 0, 3, 2, 0, 16},   /* T5 one-sided, causal, + ALiBi */
        {3, 6, 9, 3, 2, 3, 0, 3, 15, 0, 0.2, 8},     /* T5 with a q offset */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) compare(&cases[i], 300 + i);
}

/* The fused op with every term: the same bits on 1 and 2 threads, the
 * tables' gradients included. */
Test(position, fused_bit_identical_for_any_thread_count) {
    tg_rng rng = tg_rng_new(8);
    int B = 4, T = 200, d = 16, h = 2, C = 8, R = 2 * C + 1;
    tg_tensor *in[6] = {tg_randn(TG_SHAPE(B, T, d), &rng), tg_randn(TG_SHAPE(B, T, d), &rng),
                        tg_randn(TG_SHAPE(B, T, d), &rng), tg_randn(TG_SHAPE(h, R), &rng),
                        tg_randn(TG_SHAPE(R, d), &rng),    tg_randn(TG_SHAPE(R, d), &rng)};
    for (int i = 0; i < 6; i++) tg_set_requires_grad(in[i], true);
    tg_real slopes[2];
    tg_alibi_slopes(h, slopes);
    tg_attn_pos pos = {.heads = h, .alibi = slopes, .clip = C, .bias = in[3], .rel_k = in[4], .rel_v = in[5]};
    tg_tensor *Rg = tg_randn(TG_SHAPE(B, T, d), &rng);
    tg_tensor *res[2][7];
    int prev = tg_get_num_threads();
    for (int t = 0; t < 2; t++) {
        tg_set_num_threads(t + 1);
        for (int i = 0; i < 6; i++) tg_zero_grad(in[i]);
        tg_rng r = tg_rng_new(3);
        tg_tensor *out = tg_attention_pos(in[0], in[1], in[2], (tg_mask){NULL, 0, true}, 0.1, &r, &pos);
        TG_REQUIRE(out);
        cr_assert_eq(tg_backward_seed(out, Rg), 0, "%s", tg_last_error());
        res[t][0] = tg_clone(out);
        for (int i = 0; i < 6; i++) res[t][i + 1] = tg_clone(in[i]->grad);
    }
    tg_set_num_threads(prev);
    for (int i = 0; i < 7; i++)
        cr_expect(memcmp(res[0][i]->data, res[1][i]->data, sizeof(tg_real) * (size_t)res[0][i]->size) == 0,
                  "tensor %d differs between 1 and 2 threads", i);
}

/* T = 2048 with every term: the fused op adds far less than one T x T matrix. */
Test(position, fused_memory_is_linear_in_T) {
    tg_scope_end();
    int T = 2048, d = 16, h = 2, C = 32, R = 2 * C + 1;
    tg_rng rng = tg_rng_new(3);
    tg_tensor *q = tg_randn(TG_SHAPE(h, T, d), &rng), *k = tg_randn(TG_SHAPE(h, T, d), &rng);
    tg_tensor *v = tg_randn(TG_SHAPE(h, T, d), &rng), *seed = tg_ones(TG_SHAPE(h, T, d));
    tg_tensor *bias = tg_randn(TG_SHAPE(h, R), &rng), *rk = tg_randn(TG_SHAPE(R, d), &rng);
    tg_tensor *rv = tg_randn(TG_SHAPE(R, d), &rng);
    tg_tensor *all[] = {q, k, v, bias, rk, rv};
    for (int i = 0; i < 6; i++) tg_set_requires_grad(all[i], true);
    tg_real slopes[2];
    tg_alibi_slopes(h, slopes);
    tg_attn_pos pos = {.heads = h, .alibi = slopes, .clip = C, .bias = bias, .rel_k = rk, .rel_v = rv};
    tg_scope_begin();
    tg_memory_stats before = tg_memory();
    tg_tensor *out = tg_attention_pos(q, k, v, (tg_mask){NULL, 0, true}, 0.1, &rng, &pos);
    TG_REQUIRE(out);
    cr_assert_eq(tg_backward_seed(out, seed), 0, "%s", tg_last_error());
    size_t added = tg_memory().arena_peak - before.arena_in_use;
    printf("position: T=%d, every term: arena peak added %zu bytes, T^2 = %zu\n", T, added, (size_t)T * T);
    /* O(T (d + R)): the output and its gradient, L, D, the tiles, and the
     * tables' partial gradients (one per 64 queries); one [2, T, T] weight
     * matrix of the stored path would take 16 T^2 bytes. */
    cr_expect(added < (size_t)T * T, "added %zu bytes, T^2 = %zu", added, (size_t)T * T);
    tg_scope_end();
    for (int i = 0; i < 6; i++) tg_free(all[i]);
    tg_scope_begin();
}

Test(position, alibi_slopes_follow_the_paper) {
    tg_real s[12];
    cr_assert_eq(tg_alibi_slopes(8, s), 0);
    for (int k = 0; k < 8; k++) cr_expect(fabs((double)s[k] - pow(2.0, -(k + 1))) < 1e-15, "8 heads, slope %d", k);
    /* 6 heads: the 4 of n = 4 (2^-2 .. 2^-8), then 2^-1 and 2^-3 from n = 8 */
    static const double six[] = {0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125};
    cr_assert_eq(tg_alibi_slopes(6, s), 0);
    for (int k = 0; k < 6; k++) cr_expect(fabs((double)s[k] - six[k]) < 1e-15, "6 heads, slope %d = %g", k, s[k]);
    cr_assert_eq(tg_alibi_slopes(1, s), 0);
    cr_expect(fabs((double)s[0] - 1.0 / 256) < 1e-15);
    cr_expect_eq(tg_alibi_slopes(0, s), -1);
    cr_expect(error_has("alibi_slopes", "0 heads"));
}

/* q and k at positions m and n: RoPE(q)_m . RoPE(k)_n depends on n - m only,
 * and the half pairing is the interleaved one on permuted features. */
Test(position, rope_is_relative_and_pairings_agree) {
    int T = 12, d = 8;
    tg_rng rng = tg_rng_new(4);
    tg_tensor *qv = tg_randn(TG_SHAPE(1, 1, d), &rng), *kv = tg_randn(TG_SHAPE(1, 1, d), &rng);
    tg_tensor *q = tg_empty_arena(TG_SHAPE(1, T, d)), *k = tg_empty_arena(TG_SHAPE(1, T, d));
    for (int t = 0; t < T; t++) {
        memcpy(q->data + t * d, qv->data, sizeof(tg_real) * d);
        memcpy(k->data + t * d, kv->data, sizeof(tg_real) * d);
    }
    for (int half = 0; half < 2; half++) {
        tg_tensor *rq = tg_rope(q, 0, 10000, half), *rk = tg_rope(k, 0, 10000, half);
        TG_REQUIRE(rq);
        TG_REQUIRE(rk);
        for (int m = 0; m + 3 < T; m++) {
            double a = 0, b = 0;
            for (int c = 0; c < d; c++) {
                a += rq->data[m * d + c] * rk->data[(m + 3) * d + c];
                b += rq->data[0 * d + c] * rk->data[3 * d + c];
            }
            cr_expect(fabs(a - b) < 1e-12, "half %d: q_%d . k_%d = %g, q_0 . k_3 = %g", half, m, m + 3, a, b);
        }
        double r0 = 0, x0 = 0; /* position 0 is not rotated */
        for (int c = 0; c < d; c++) r0 += rq->data[c] * rq->data[c], x0 += q->data[c] * q->data[c];
        cr_expect(fabs(r0 - x0) < 1e-12);
    }
    /* half: pair (i, i + d/2) ~ interleaved after permuting features 2i <- i, 2i+1 <- i + d/2 */
    tg_tensor *x = tg_randn(TG_SHAPE(2, 5, d), &rng), *xp = tg_empty_arena(TG_SHAPE(2, 5, d));
    for (int r = 0; r < 10; r++)
        for (int i = 0; i < d / 2; i++) {
            xp->data[r * d + 2 * i] = x->data[r * d + i];
            xp->data[r * d + 2 * i + 1] = x->data[r * d + i + d / 2];
        }
    tg_tensor *yh = tg_rope(x, 2, 100, true), *yi = tg_rope(xp, 2, 100, false);
    for (int r = 0; r < 10; r++)
        for (int i = 0; i < d / 2; i++) {
            cr_expect(fabs(yh->data[r * d + i] - yi->data[r * d + 2 * i]) < 1e-12);
            cr_expect(fabs(yh->data[r * d + i + d / 2] - yi->data[r * d + 2 * i + 1]) < 1e-12);
        }
}

/* tg_rope_heads turns each head where the projection wrote it as tg_rope
 * turns the head split off: [N, T, h d] against [N, T, d] per head; the
 * heads past `rotated` (v of a fused projection) come through unchanged,
 * and so do their gradients. */
Test(position, rope_heads_equals_rope_per_head) {
    int N = 2, T = 5, h = 3, d = 4;
    tg_rng rng = tg_rng_new(9);
    tg_tensor *x = tg_randn(TG_SHAPE(N, T, h * d), &rng);
    tg_tensor *head = tg_empty_arena(TG_SHAPE(N, T, d));
    for (int half = 0; half < 2; half++) {
        tg_tensor *y = tg_rope_heads(x, h, 2, 3, 500, half);
        TG_REQUIRE(y);
        for (int j = 0; j < h; j++) {
            for (int r = 0; r < N * T; r++) memcpy(head->data + r * d, x->data + (r * h + j) * d, sizeof(tg_real) * d);
            tg_tensor *want = j < 2 ? tg_rope(head, 3, 500, half) : head;
            TG_REQUIRE(want);
            for (int r = 0; r < N * T; r++)
                for (int c = 0; c < d; c++)
                    cr_expect_eq(y->data[(r * h + j) * d + c], want->data[r * d + c], "half %d head %d row %d", half, j,
                                 r);
        }
    }
    tg_tensor *xg = tg_randn(TG_SHAPE(1, 2, 2 * d), &rng);
    tg_set_requires_grad(xg, true);
    cr_assert_eq(tg_backward(tg_sum_all(tg_rope_heads(xg, 2, 1, 0, 10000, false))), 0, "%s", tg_last_error());
    for (int t = 0; t < 2; t++)
        for (int c = d; c < 2 * d; c++) cr_expect_eq(xg->grad->data[t * 2 * d + c], 1, "an unturned head's gradient");
    cr_expect_null(tg_rope_heads(x, 5, 5, 0, 10000, false)); /* 12 features are not 5 heads */
    cr_expect(error_has("rope", "5 heads"), "%s", tg_last_error());
    cr_expect_not_null(tg_rope_heads(x, 6, 6, 0, 10000, false)); /* heads of 2 features: fine */
    cr_expect_null(tg_rope_heads(x, 3, 4, 0, 10000, false));
    cr_expect(error_has("rope", "4 of them rotated"), "%s", tg_last_error());
}

/* T5's buckets (32, max_distance 128) against Hugging Face's
 * _relative_position_bucket evaluated in Python, two-sided and one-sided:
 * scatter of ones counts the keys per bucket, gather of 0..R-1 names them. */
Test(position, t5_buckets_match_the_reference) {
    static const int offs[] = {-200, -128, -20, -8, -1, 0, 1, 7, 8, 9, 20, 127, 128, 500};
    static const int two[] = {15, 15, 10, 8, 1, 0, 17, 23, 24, 24, 26, 31, 31, 31};
    static const int one[] = {31, 31, 17, 8, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    tg_tensor *ids = tg_empty_arena(TG_SHAPE(1, 1, 32));
    for (int r = 0; r < 32; r++) ids->data[r] = r;
    /* one query at position 200 (q_offset), keys 0..700: offset j - 200 */
    for (int side = 0; side < 2; side++) {
        tg_attn_pos pos = {.q_offset = 200, .t5_buckets = 32, .t5_max_distance = 128, .t5_one_sided = side};
        tg_tensor *b = tg_rel_gather(ids, 1, 701, &pos);
        TG_REQUIRE(b);
        for (int i = 0; i < 14; i++)
            cr_expect_eq((int)b->data[offs[i] + 200], side ? one[i] : two[i], "one-sided %d: offset %d in bucket %g",
                         side, offs[i], b->data[offs[i] + 200]);
    }
}

Test(position, errors) {
    tg_rng rng = tg_rng_new(1);
    tg_tensor *q = tg_randn(TG_SHAPE(4, 3, 2), &rng), *v = tg_randn(TG_SHAPE(4, 3, 5), &rng);
    tg_tensor *t = tg_randn(TG_SHAPE(3, 2), &rng);
    tg_mask none = {0};
    cr_expect_null(tg_attention_pos(q, q, v, none, 0, NULL, &(tg_attn_pos){.heads = 3}));
    cr_expect(error_has("attention", "multiple of the heads"));
    cr_expect_null(tg_attention_pos(q, q, v, none, 0, NULL, &(tg_attn_pos){.heads = 2, .clip = 2, .rel_k = t}));
    cr_expect(error_has("attention", "rel_k (3,2)"), "%s", tg_last_error());
    cr_expect_null(tg_attention_pos(q, q, v, none, 0, NULL, &(tg_attn_pos){.heads = 2, .clip = 1, .rel_v = t}));
    cr_expect(error_has("attention", "rel_v"));
    cr_expect_null(tg_attention_pos(q, q, v, none, 0, NULL, &(tg_attn_pos){.heads = 2, .clip = 1, .bias = t}));
    cr_expect(error_has("attention", "bias"));
    cr_expect_null(tg_attention_pos(q, q, v, none, 0, NULL, &(tg_attn_pos){.clip = -1}));
    cr_expect(error_has("attention", "clip -1"));
    tg_real nan_slope[1] = {NAN};
    cr_expect_null(tg_attention_pos(q, q, v, none, 0, NULL, &(tg_attn_pos){.heads = 1, .alibi = nan_slope}));
    cr_expect(error_has("attention", "ALiBi slope"));
    cr_expect_null(tg_rel_gather(t, 3, 4, &(tg_attn_pos){.clip = 2}));
    cr_expect(error_has("rel_gather", "(3,2)"));
    cr_expect_null(tg_rel_scatter(t, &(tg_attn_pos){.clip = 1}));
    cr_expect(error_has("rel_scatter", "3-D"));
    tg_tensor *w = tg_randn(TG_SHAPE(1, 2, 3), &rng);
    cr_expect_null(tg_rel_scatter(w, NULL));
    cr_expect(error_has("rel_scatter", "NULL"));
    cr_expect_null(tg_rel_scatter(w, &(tg_attn_pos){.t5_buckets = 8, .t5_max_distance = 2}));
    cr_expect(error_has("rel_scatter", "max_distance 2"), "%s", tg_last_error());
    cr_expect_null(tg_attention_pos(q, q, v, none, 0, NULL, &(tg_attn_pos){.t5_buckets = 3, .t5_max_distance = 9}));
    cr_expect(error_has("attention", "t5_buckets 3"));
    cr_expect_null(tg_rope(tg_randn(TG_SHAPE(1, 2, 3), &rng), 0, 10000, false));
    cr_expect(error_has("rope", "d even"));
    cr_expect_null(tg_rope(q, 0, 1, false));
    cr_expect(error_has("rope", "base 1"));
}

/* ---- the table of position kinds -------------------------------------------- */

/* Every kind has a complete row, its name round-trips through the flags'
 * parser, and every model its row names builds with it, trains one step's
 * backward (its parameters, if any, receive gradient) and lists them; the
 * models it does not name refuse it, naming the kinds they take. */
Test(position_table, every_kind_has_a_complete_row_that_its_models_accept) {
    const int n = tg_pe_kind_count();
    cr_expect_eq(n, 6, "fixed, learned, none, relative, rope, alibi");
    cr_expect_null(tg_pe_rule_of((tg_pe_kind)n));
    cr_expect_null(tg_pe_rule_of((tg_pe_kind)-1));
    for (int k = 0; k < n; k++) {
        const tg_pe_rule *r = tg_pe_rule_of((tg_pe_kind)k);
        cr_assert_not_null(r, "kind %d has no row", k);
        cr_expect_eq(tg_pe_rule_check(r), 0, "%s", tg_last_error());
        tg_pe_kind parsed;
        cr_expect(tg_pe_kind_parse(r->name, &parsed) == 0 && (int)parsed == k, "%s", r->name);
        cr_expect_str_eq(tg_pe_kind_name((tg_pe_kind)k), r->name);
        const int tokens[6] = {1, 2, 3, 0, 2, 1};
        tg_rng rng = tg_rng_new(3);

        tg_encoder_config ec = tiny_encoder(4, 8, 16, 2, 1, 8);
        ec.pe = (tg_pe_kind)k;
        tg_encoder *e = tg_encoder_new(&ec, &rng);
        if (r->models & TG_PE_ENCODER) {
            cr_assert_not_null(e, "encoder with %s: %s", r->name, tg_last_error());
            cr_expect_eq(e->pos_encoding != NULL, r->where == TG_PE_AT_INPUT, "%s: a table at the input", r->name);
            tg_params p;
            tg_params_init(&p);
            cr_assert_eq(tg_encoder_params(e, &p, "enc"), 0);
            tg_scope_begin();
            cr_assert_eq(tg_backward(tg_sum_all(tg_encoder_forward(e, tokens, 2, 3, (tg_mask){0}))), 0, "%s: %s",
                         r->name, tg_last_error());
            tg_scope_end();
            for (int i = 0; i < p.n; i++)
                if (strstr(p.items[i].name, "pos_encoding") || strstr(p.items[i].name, "relative"))
                    cr_expect_not_null(p.items[i].t->grad, "%s: %s gets a gradient", r->name, p.items[i].name);
            tg_params_free(&p);
            tg_encoder_free(e);
        } else {
            cr_expect_null(e, "the encoder refuses %s", r->name);
        }

        tg_decoder_config dc = tg_decoder_config_default(4, 8, 1, 2, 8);
        dc.pos = (tg_pe_kind)k;
        tg_decoder *d = tg_decoder_new(&dc, &rng);
        if (r->models & TG_PE_DECODER) {
            cr_assert_not_null(d, "decoder with %s: %s", r->name, tg_last_error());
            cr_expect_eq(d->wpe != NULL, r->where == TG_PE_AT_INPUT, "%s: wpe", r->name);
            tg_scope_begin();
            cr_expect_not_null(tg_decoder_loss(d, tokens, tokens, 2, 3), "%s: %s", r->name, tg_last_error());
            tg_scope_end();
            tg_decoder_free(d);
        } else {
            cr_expect_null(d, "the decoder refuses %s", r->name);
            cr_expect(error_has("decoder: position kind", r->name), "%s", tg_last_error());
        }
    }
    cr_expect_eq(tg_pe_kind_parse("sinusoidal", &(tg_pe_kind){0}), -1);
    cr_expect(error_has("expected fixed, learned, none, relative, rope or alibi", NULL), "%s", tg_last_error());
}

/* A row missing what its place needs fails the check and is not registered. */
Test(position_table, incomplete_row_is_refused) {
    tg_pe_rule r = *tg_pe_rule_of(TG_PE_ROPE);
    tg_pe_kind k = (tg_pe_kind)-1;
    r.name = "rope2";
    r.rotate_heads = NULL;
    cr_expect_eq(tg_pe_rule_check(&r), -1);
    cr_expect(error_has("pe_rule: rope2", "rotate_heads"), "%s", tg_last_error());
    cr_expect_eq(tg_pe_register(&r, &k), -1);
    cr_expect_eq((int)k, -1);
    r = *tg_pe_rule_of(TG_PE_LEARNED);
    r.name = "learned2";
    r.decoder_table = NULL;
    cr_expect_eq(tg_pe_rule_check(&r), -1, "a decoder kind without a decoder table");
    r.models = TG_PE_ENCODER;
    cr_expect_eq(tg_pe_rule_check(&r), 0, "%s", tg_last_error());
    r.models = 0;
    cr_expect_eq(tg_pe_rule_check(&r), -1, "no model");
    r = *tg_pe_rule_of(TG_PE_RELATIVE);
    cr_expect_eq(tg_pe_register(&r, &k), -1, "a name taken");
    cr_expect(error_has("pe_register", "taken"), "%s", tg_last_error());
    r.name = "relative2";
    r.apply = NULL;
    cr_expect_eq(tg_pe_rule_check(&r), -1, "in the scores without apply");
    r.apply = tg_pe_rule_of(TG_PE_RELATIVE)->apply;
    r.where = (tg_pe_where)9;
    cr_expect_eq(tg_pe_rule_check(&r), -1, "a where outside the enum");
}
