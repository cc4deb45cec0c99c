/* The fused attention op reading heads in place: tg_attention_heads (q, k, v
 * [B, n, h d]) and tg_attention_qkv (one [B, T, 3 h d] projection) against
 * tg_attention_pos on the heads split by copies ([B h, n, d], head j of entry
 * b in row b h + j, as d2l's transpose_qkv): the same output and gradients
 * to 1e-12 in double, the same dropout draws, for masks, dropout, position
 * terms and sizes that cross the 64 x 64 blocks; bit-identical at 1 and 2
 * threads; the modules' paths (MHA, decoder) against their split-copy
 * fallback; errors. Gradient checks are in cases_attention_op.c. */
#include "test_util.h"

#include <string.h>

TestSuite(attention_heads, .init = scoped_test_begin, .fini = scoped_test_end);

/* [B, n, h d] -> [B h, n, d] */
static tg_tensor *split(tg_tensor *x, int h) {
    int B = x->shape[0], n = x->shape[1], d = x->shape[2] / h;
    return tg_reshape(tg_permute(tg_reshape(x, TG_SHAPE(B, n, h, d)), (const int[]){0, 2, 1, 3}),
                      TG_SHAPE(B * h, n, d));
}

/* [B h, n, d] -> [B, n, h d] */
static tg_tensor *merge(tg_tensor *x, int h) {
    int B = x->shape[0] / h, n = x->shape[1], d = x->shape[2];
    return tg_reshape(tg_permute(tg_reshape(x, TG_SHAPE(B, h, n, d)), (const int[]){0, 2, 1, 3}),
                      TG_SHAPE(B, n, h * d));
}

/* third t of qkv [B, T, 3 h d] -> [B, T, h d], by copy */
static tg_tensor *third(tg_tensor *qkv, int t) {
    int B = qkv->shape[0], T = qkv->shape[1], D = qkv->shape[2] / 3;
    return tg_reshape(tg_slice(tg_reshape(qkv, TG_SHAPE(B, T, 3, D)), 2, t, t + 1), TG_SHAPE(B, T, D));
}

typedef struct {
    int B, Q, K, h, d, dv;
    int mask; /* 0 none, 1 lens [B h], 2 lens [B h, Q], 3 causal */
    tg_real p;
    int pos; /* 0 none, 1 ALiBi, 2 bias table + rel_k + rel_v (clip 3) */
} heads_case;

static tg_mask make_mask(const heads_case *c) {
    tg_mask m = {NULL, 0, c->mask == 3};
    if (c->mask == 0 || c->mask == 3) return m;
    int n = c->B * c->h * (c->mask == 2 ? c->Q : 1);
    int *lens = tg_arena_alloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++) lens[i] = (int)(tg_rng_bits(5, 9, (uint64_t)i) % (uint64_t)(c->K + 3));
    m.lens = lens;
    m.lens_ndim = c->mask == 2 ? 2 : 1;
    return m;
}

typedef struct {
    tg_attn_pos pos;
    tg_real slopes[8];
    tg_tensor *tabs[3];
} pos_terms;

static const tg_attn_pos *make_pos(const heads_case *c, pos_terms *t, tg_rng *rng) {
    memset(t, 0, sizeof *t);
    if (c->pos == 0) return NULL;
    t->pos.heads = c->h;
    if (c->pos == 1) {
        tg_alibi_slopes(c->h, t->slopes);
        t->pos.alibi = t->slopes;
        return &t->pos;
    }
    t->pos.clip = 3;
    t->tabs[0] = t->pos.bias = tg_randn(TG_SHAPE(c->h, 7), rng);
    t->tabs[1] = t->pos.rel_k = tg_randn(TG_SHAPE(7, c->d), rng);
    t->tabs[2] = t->pos.rel_v = tg_randn(TG_SHAPE(7, c->dv), rng);
    for (int i = 0; i < 3; i++) tg_set_requires_grad(t->tabs[i], true);
    return &t->pos;
}

/* out and every gradient, cloned, and the rng's counter after the forward */
typedef struct {
    tg_tensor *t[7];
    uint64_t counter;
} result;

static result finish(tg_tensor *out, const tg_tensor *R, tg_tensor *const *inputs, int n, tg_rng *rng) {
    TG_REQUIRE(out);
    cr_assert_eq(tg_backward_seed(out, R), 0, "%s", tg_last_error());
    result r = {{tg_clone(out)}, rng->counter};
    for (int i = 0; i < n; i++) r.t[1 + i] = inputs[i] ? tg_clone(inputs[i]->grad) : NULL;
    return r;
}

static void expect_same(const result *a, const result *b, int n, const char *what) {
    cr_expect_eq(a->counter, b->counter, "%s: rng counters %llu and %llu", what, (unsigned long long)a->counter,
                 (unsigned long long)b->counter);
    for (int i = 0; i < n; i++) {
        if (!a->t[i]) continue;
        double e = max_diff(a->t[i], b->t[i]);
        cr_expect(e <= 1e-12, "%s: tensor %d (0 out, then the gradients) differs by %.3g", what, i, e);
    }
}

/* A case's inputs from init: q [B, Q, h d], k [B, K, h d], v [B, K, h dv]
 * (all three requiring gradients) and the output's seed R [B, Q, h dv]. */
static void make_inputs(const heads_case *c, tg_rng *init, tg_tensor **q, tg_tensor **k, tg_tensor **v, tg_tensor **R) {
    *q = tg_randn(TG_SHAPE(c->B, c->Q, c->h * c->d), init);
    *k = tg_randn(TG_SHAPE(c->B, c->K, c->h * c->d), init);
    *v = tg_randn(TG_SHAPE(c->B, c->K, c->h * c->dv), init);
    *R = tg_randn(TG_SHAPE(c->B, c->Q, c->h * c->dv), init);
    tg_set_requires_grad(*q, true), tg_set_requires_grad(*k, true), tg_set_requires_grad(*v, true);
}

static void compare_heads(const heads_case *c) {
    char what[128];
    snprintf(what, sizeof what, "B%d Q%d K%d h%d d%d dv%d mask %d p %g pos %d", c->B, c->Q, c->K, c->h, c->d, c->dv,
             c->mask, (double)c->p, c->pos);
    tg_rng init = tg_rng_new(11);
    tg_tensor *q, *k, *v, *R;
    make_inputs(c, &init, &q, &k, &v, &R);
    pos_terms terms;
    const tg_attn_pos *pos = make_pos(c, &terms, &init);
    tg_mask mask = make_mask(c);
    tg_tensor *in[6] = {q, k, v, terms.tabs[0], terms.tabs[1], terms.tabs[2]};
    result r[2];
    for (int path = 0; path < 2; path++) {
        for (int i = 0; i < 6; i++)
            if (in[i]) tg_zero_grad(in[i]);
        tg_rng rng = tg_rng_new(77);
        rng.counter = 99;
        tg_tensor *out =
            path == 0
                ? tg_attention_heads(q, k, v, c->h, mask, c->p, &rng, pos)
                : merge(tg_attention_pos(split(q, c->h), split(k, c->h), split(v, c->h), mask, c->p, &rng, pos), c->h);
        r[path] = finish(out, R, in, 6, &rng);
    }
    expect_same(&r[0], &r[1], 7, what);
}

Test(attention_heads, heads_in_place_match_the_split_copies) {
    cr_assert(sizeof(tg_real) == 8, "compared in the double build");
    static const heads_case cases[] = {
        {2, 3, 5, 2, 4, 3, 0, 0, 0},   {2, 4, 4, 3, 2, 2, 3, 0, 0},      {3, 4, 6, 2, 3, 2, 1, 0, 0},
        {2, 5, 4, 2, 2, 3, 2, 0, 0},   {2, 6, 6, 2, 3, 3, 3, 0.3, 0},    {2, 5, 5, 2, 3, 2, 3, 0, 1},
        {2, 4, 6, 2, 3, 2, 1, 0.2, 2}, {1, 70, 130, 2, 3, 2, 3, 0.1, 0}, {1, 130, 70, 3, 2, 3, 2, 0.2, 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) compare_heads(&cases[i]);
}

/* Short sequences, heads read in place at feature sizes that fill the 16
 * lanes (their rows then used where they are, h d or 3 h d apart) and
 * sizes that do not, against the stored path on the split copies (scaled
 * scores, masked softmax, dropout, product). */
Test(attention_heads, short_heads_in_place_match_the_stored_path) {
    cr_assert(sizeof(tg_real) == 8, "compared in the double build");
    static const heads_case cases[] = {
        {4, 16, 16, 4, 16, 16, 0, 0.1, 0},
        {3, 13, 13, 2, 32, 16, 1, 0.2, 0},
        {2, 16, 20, 3, 5, 7, 2, 0.1, 0},
        {2, 64, 64, 2, 16, 32, 3, 0.1, 0},
    };
    for (size_t n = 0; n < sizeof cases / sizeof cases[0]; n++) {
        const heads_case *c = &cases[n];
        char what[128];
        snprintf(what, sizeof what, "B%d Q%d K%d h%d d%d dv%d mask %d p %g", c->B, c->Q, c->K, c->h, c->d, c->dv,
                 c->mask, (double)c->p);
        tg_rng init = tg_rng_new(12);
        tg_tensor *q, *k, *v, *R;
        make_inputs(c, &init, &q, &k, &v, &R);
        tg_mask mask = make_mask(c);
        tg_tensor *in[3] = {q, k, v};
        result r[2];
        for (int path = 0; path < 2; path++) {
            for (int i = 0; i < 3; i++) tg_zero_grad(in[i]);
            tg_rng rng = tg_rng_new(77);
            rng.counter = 5;
            tg_tensor *out;
            if (path == 0)
                out = tg_attention_heads(q, k, v, c->h, mask, c->p, &rng, NULL);
            else {
                tg_tensor *qs = split(q, c->h), *s = tg_matmul_t(qs, split(k, c->h), false, true);
                s = tg_mul_scalar(s, (tg_real)(1.0 / sqrt((double)c->d)));
                out = merge(tg_matmul(tg_dropout(tg_masked_softmax(s, mask), c->p, &rng), split(v, c->h)), c->h);
            }
            r[path] = finish(out, R, in, 3, &rng);
        }
        expect_same(&r[0], &r[1], 4, what);
        if (c->Q == c->K && c->d == c->dv) { /* the fused projection: the same three as one tensor */
            tg_tensor *qkv = tg_clone(tg_concat(3, (tg_tensor *[]){q, k, v}, 2)), *g[3]; /* a leaf */
            tg_set_requires_grad(qkv, true);
            tg_rng rng = tg_rng_new(77);
            rng.counter = 5;
            result f = finish(tg_attention_qkv(qkv, c->h, mask, c->p, &rng, NULL), R, (tg_tensor *[]){qkv}, 1, &rng);
            for (int t = 0; t < 3; t++) g[t] = third(f.t[1], t);
            result fr = {{f.t[0], g[0], g[1], g[2]}, f.counter};
            expect_same(&fr, &r[1], 4, what);
        }
    }
}

/* qkv [B, T, 3 h d] through tg_attention_qkv, and through its thirds split by copies. */
static void compare_qkv(int B, int T, int h, int d, tg_real p, int pos_kind) {
    char what[96];
    snprintf(what, sizeof what, "qkv B%d T%d h%d d%d p %g pos %d", B, T, h, d, (double)p, pos_kind);
    heads_case c = {B, T, T, h, d, d, 3, p, pos_kind};
    tg_rng init = tg_rng_new(21);
    tg_tensor *qkv = tg_randn(TG_SHAPE(B, T, 3 * h * d), &init), *R = tg_randn(TG_SHAPE(B, T, h * d), &init);
    tg_set_requires_grad(qkv, true);
    pos_terms terms;
    const tg_attn_pos *pos = make_pos(&c, &terms, &init);
    tg_tensor *in[4] = {qkv, terms.tabs[0], terms.tabs[1], terms.tabs[2]};
    tg_mask causal = {NULL, 0, true};
    result r[2];
    for (int path = 0; path < 2; path++) {
        for (int i = 0; i < 4; i++)
            if (in[i]) tg_zero_grad(in[i]);
        tg_rng rng = tg_rng_new(78);
        tg_tensor *out = path == 0 ? tg_attention_qkv(qkv, h, causal, p, &rng, pos)
                                   : merge(tg_attention_pos(split(third(qkv, 0), h), split(third(qkv, 1), h),
                                                            split(third(qkv, 2), h), causal, p, &rng, pos),
                                           h);
        r[path] = finish(out, R, in, 4, &rng);
    }
    expect_same(&r[0], &r[1], 5, what);
}

Test(attention_heads, a_fused_projection_matches_its_thirds) {
    cr_assert(sizeof(tg_real) == 8, "compared in the double build");
    compare_qkv(2, 5, 2, 3, 0, 0);
    compare_qkv(2, 7, 3, 2, 0.3, 1);
    compare_qkv(1, 9, 2, 4, 0.2, 2);
    compare_qkv(1, 130, 2, 3, 0.1, 0); /* three query and key blocks */
}

Test(attention_heads, bit_identical_for_any_thread_count) {
    tg_rng init = tg_rng_new(3);
    tg_tensor *qkv = tg_randn(TG_SHAPE(4, 100, 3 * 4 * 8), &init);
    tg_tensor *toy = tg_randn(TG_SHAPE(16, 16, 3 * 64), &init); /* the toy's shape: T 16, 4 heads of 16 */
    tg_set_requires_grad(qkv, true);
    tg_set_requires_grad(toy, true);
    /* the toy's shape without a mask, then a causal mask at T 100 */
    struct {
        tg_tensor *x;
        bool causal;
        const char *what;
    } cases[] = {{toy, false, "T 16"}, {qkv, true, "T 100, causal"}};
    for (int ci = 0; ci < 2; ci++) {
        tg_tensor *x = cases[ci].x, *out[2], *grad[2];
        for (int t = 0; t < 2; t++) {
            tg_set_num_threads(t + 1);
            tg_zero_grad(x);
            tg_rng rng = tg_rng_new(9);
            tg_tensor *y = tg_attention_qkv(x, 4, (tg_mask){NULL, 0, cases[ci].causal}, 0.1, &rng, NULL);
            TG_REQUIRE(y);
            cr_assert_eq(tg_backward(tg_sum_all(tg_mul(y, y))), 0, "%s", tg_last_error());
            out[t] = tg_clone(y);
            grad[t] = tg_clone(x->grad);
        }
        tg_set_num_threads(0);
        cr_expect(memcmp(out[0]->data, out[1]->data, sizeof(tg_real) * (size_t)out[0]->size) == 0, "%s",
                  cases[ci].what);
        cr_expect(memcmp(grad[0]->data, grad[1]->data, sizeof(tg_real) * (size_t)grad[0]->size) == 0, "%s",
                  cases[ci].what);
    }
}

/* MHA's forward (heads in place on the fused path) against the split copies
 * of the stored path forced, and the decoder's against its own fallback
 * (recording forces the stored path). */
Test(attention_heads, modules_match_their_split_copy_paths) {
    cr_assert(sizeof(tg_real) == 8, "compared in the double build");
    tg_rng rng = tg_rng_new(5);
    tg_mha *m = tg_mha_new(6, 6, 6, 8, 2, 0, true, &rng);
    TG_REQUIRE(m);
    tg_tensor *x = tg_randn(TG_SHAPE(2, 70, 6), &rng);
    static const int lens[] = {50, 70};
    tg_tensor *y[2];
    for (int path = 0; path < 2; path++) {
        m->attention->path = path == 0 ? TG_PATH_FUSED : TG_PATH_STORED;
        y[path] = tg_mha_forward(m, x, x, x, (tg_mask){lens, 1, false});
        TG_REQUIRE(y[path]);
    }
    cr_expect(max_diff(y[0], y[1]) <= 1e-12, "mha: %.3g", max_diff(y[0], y[1]));
    /* Self-attention's stacked projection (one GEMM) against the three
     * Linears (distinct but equal inputs), forward and gradients. */
    m->attention->path = TG_PATH_AUTO;
    tg_tensor *R = tg_randn(TG_SHAPE(2, 70, 8), &rng), *g[2][4];
    for (int path = 0; path < 2; path++) {
        tg_params p;
        tg_params_init(&p);
        cr_assert_eq(tg_mha_params(m, &p, "mha"), 0, "%s", tg_last_error());
        for (int i = 0; i < p.n; i++) tg_zero_grad(p.items[i].t);
        tg_tensor *x2 = path == 0 ? x : tg_clone(x);
        y[path] = tg_mha_forward(m, x, x2, path == 0 ? x : tg_clone(x), (tg_mask){lens, 1, false});
        TG_REQUIRE(y[path]);
        cr_assert_eq(tg_backward_seed(y[path], R), 0, "%s", tg_last_error());
        for (int i = 0; i < 4; i++) g[path][i] = tg_clone(p.items[i].t->grad); /* W_q's and W_k's */
        tg_params_free(&p);
    }
    cr_expect(max_diff(y[0], y[1]) <= 1e-12, "mha self: %.3g", max_diff(y[0], y[1]));
    for (int i = 0; i < 4; i++)
        cr_expect(max_diff(g[0][i], g[1][i]) <= 1e-12, "mha self: gradient %d: %.3g", i, max_diff(g[0][i], g[1][i]));
    tg_mha_free(m);

    tg_decoder_config cfg = tg_decoder_config_default(11, 70, 1, 2, 8);
    tg_decoder *dec = tg_decoder_new(&cfg, &rng);
    TG_REQUIRE(dec);
    int *idx = tg_arena_alloc(sizeof(int) * 2 * 70);
    for (int i = 0; i < 140; i++) idx[i] = (i * 7) % 11;
    tg_tensor *logits[2];
    for (int path = 0; path < 2; path++) {
        tg_decoder_record_attention(dec, path == 1);
        logits[path] = tg_decoder_forward(dec, idx, 2, 70);
        TG_REQUIRE(logits[path]);
    }
    cr_expect(max_diff(logits[0], logits[1]) <= 1e-12, "decoder: %.3g", max_diff(logits[0], logits[1]));
    tg_decoder_free(dec);
}

Test(attention_heads, errors_name_the_op_and_shapes) {
    tg_tensor *q = tg_zeros(TG_SHAPE(2, 3, 4)), *k = tg_zeros(TG_SHAPE(2, 5, 4)), *v = tg_zeros(TG_SHAPE(2, 5, 6));
    tg_mask none = {NULL, 0, false};
    cr_expect_null(tg_attention_heads(q, k, v, 3, none, 0, NULL, NULL));
    cr_expect(error_has("attention_heads: q (2,3,4), k (2,5,4), v (2,5,6) with 3 heads", NULL), "%s", tg_last_error());
    cr_expect_null(tg_attention_heads(q, k, v, 0, none, 0, NULL, NULL));
    cr_expect(error_has("attention_heads:", "with 0 heads"), "%s", tg_last_error());
    cr_expect_null(tg_attention_heads(q, tg_zeros(TG_SHAPE(2, 4, 4)), v, 2, none, 0, NULL, NULL));
    cr_expect(error_has("attention_heads:", "k (2,4,4)"), "%s", tg_last_error());
    tg_clear_error(); /* a NULL input keeps an earlier op's message */
    cr_expect_null(tg_attention_heads(NULL, k, v, 2, none, 0, NULL, NULL));
    cr_expect(error_has("attention_heads: NULL input", NULL), "%s", tg_last_error());
    static const int neg[] = {1, 2, -3, 4}; /* the mask of the [B h, Q, K] scores: B h lengths */
    cr_expect_null(tg_attention_heads(q, k, v, 2, (tg_mask){neg, 1, false}, 0, NULL, NULL));
    cr_expect(error_has("attention:", "negative"), "%s", tg_last_error());
    cr_expect(tg_attention_heads(q, k, v, 2, none, 0.5, NULL, NULL) == NULL);
    cr_expect(error_has("attention:", "NULL rng"), "%s", tg_last_error());
    tg_tensor *qkv = tg_zeros(TG_SHAPE(2, 3, 12));
    cr_expect_null(tg_attention_qkv(qkv, 5, none, 0, NULL, NULL));
    cr_expect(error_has("attention_qkv: qkv (2,3,12) with 5 heads: need [B, T, 3 h d]", NULL), "%s", tg_last_error());
    cr_expect_null(tg_attention_qkv(tg_zeros(TG_SHAPE(3, 12)), 2, none, 0, NULL, NULL));
    cr_expect(error_has("attention_qkv: qkv (3,12)", NULL), "%s", tg_last_error());
    tg_clear_error();
    cr_expect_null(tg_attention_qkv(NULL, 2, none, 0, NULL, NULL));
    cr_expect(error_has("attention_qkv: NULL input", NULL), "%s", tg_last_error());
    tg_tensor *y = tg_attention_qkv(qkv, 2, (tg_mask){NULL, 0, true}, 0, NULL, NULL);
    TG_REQUIRE(y);
    cr_expect(y->ndim == 3 && y->shape[0] == 2 && y->shape[1] == 3 && y->shape[2] == 4);
}
