/* The attention op with q, k, v stored as bf16 (tensor.h, tg_dtype; issue
 * 31): its output is stored as bf16 and equals, bit for bit, the composite
 * tg_to_bf16(op(tg_to_real(q), tg_to_real(k), tg_to_real(v))) for every
 * entry (tg_attention_pos, _heads, _qkv), path (short, one tile, blocked,
 * whole entries), mask, dropout and position term, in fp32 and bf16
 * products (every bf16 engine this CPU has), at 1, 2 and 3 threads. The
 * gradients are real: bit-identical at any thread count, and those of the
 * composite up to the rounding of O in D = rowsum(dO o O) (ops_attention.c,
 * "bf16 storage"); a gradient check through the rounding is not possible,
 * so the composite is the reference. Mixed storage and bf16 position
 * tables are errors naming the op. Built in both flavours (FLOAT_TEST_SRC). */
#include "test_util.h"
#include "autograd/op.h"
#include "tensor/half.h"            /* tg__bf16_round_daz */
#include "tensor/tensor_internal.h" /* tg__bf16_engine_force */

#include <string.h>

TestSuite(attention_bf16);

typedef enum { PLAIN, HEADS, QKV } entry_kind;

typedef struct {
    entry_kind kind;
    int B, Q, K, d, dv, h; /* h heads (PLAIN: 1, or the position terms' heads) */
    int mask;              /* 0 none, 1 lens [Bs], 2 lens [Bs, Q], 3 causal, 4 causal + lens [Bs] */
    tg_real p;             /* dropout */
    int pos;               /* 0 none, 1 ALiBi, 2 ALiBi + bias + rel_k + rel_v */
} bcase;

static const bcase CASES[] = {
    {PLAIN, 2, 5, 7, 4, 3, 1, 0, 0, 0},       /* short path (fp32), one tile (bf16) */
    {PLAIN, 3, 6, 9, 5, 4, 1, 2, 0.3, 0},     /* short, lens [B, Q] (0 and > K), dropout */
    {PLAIN, 2, 64, 64, 16, 16, 1, 4, 0, 0},   /* one tile, causal + lens */
    {PLAIN, 2, 70, 130, 8, 5, 1, 1, 0.2, 0},  /* blocked: two passes or whole entries */
    {PLAIN, 4, 9, 11, 4, 3, 2, 3, 0, 2},      /* position terms, one tile */
    {PLAIN, 2, 130, 130, 8, 6, 2, 3, 0.1, 2}, /* position terms, blocked */
    {HEADS, 2, 128, 128, 32, 32, 2, 3, 0, 0}, /* gpt-small's head size, causal */
    {HEADS, 3, 40, 50, 8, 4, 2, 1, 0.25, 1},  /* heads with ALiBi, lens, dropout */
    {QKV, 2, 128, 128, 32, 32, 2, 3, 0.1, 0}, /* the decoder's fused projection */
    {QKV, 2, 144, 144, 64, 64, 1, 3, 0, 0},   /* d 64, T past two blocks */
    {QKV, 3, 16, 16, 16, 16, 2, 0, 0, 0},     /* the toy's short path */
};

/* The inputs and position tables of a case: leaves that require grad. */
typedef struct {
    tg_tensor *x[3]; /* q, k, v; or qkv alone */
    int nx;
    tg_tensor *tab[3]; /* bias, rel_k, rel_v, or NULL */
    tg_real slopes[4];
    tg_attn_pos pos;
    tg_mask mask;
    tg_tensor *seed; /* dO */
} inputs;

static tg_tensor *leaf(tg_tensor *t) {
    tg_set_requires_grad(t, true);
    return t;
}

static void make_inputs(const bcase *c, uint64_t seed, inputs *in) {
    memset(in, 0, sizeof *in);
    tg_rng rng = tg_rng_new(seed);
    int h = c->kind == PLAIN ? 1 : c->h, Bs = c->kind == PLAIN ? c->B : c->B * c->h;
    if (c->kind == QKV) {
        in->x[0] = leaf(tg_normal(TG_SHAPE(c->B, c->Q, 3 * h * c->d), 0, 1.5, &rng));
        in->nx = 1;
    } else {
        in->x[0] = leaf(tg_normal(TG_SHAPE(c->B, c->Q, h * c->d), 0, 1.5, &rng));
        in->x[1] = leaf(tg_normal(TG_SHAPE(c->B, c->K, h * c->d), 0, 1, &rng));
        in->x[2] = leaf(tg_normal(TG_SHAPE(c->B, c->K, h * c->dv), 0, 1, &rng));
        in->nx = 3;
    }
    in->seed = tg_normal(TG_SHAPE(c->B, c->Q, h * c->dv), 0, 1, &rng);
    in->mask = (tg_mask){NULL, 0, c->mask >= 3};
    if (c->mask == 1 || c->mask == 2 || c->mask == 4) {
        int n = c->mask == 2 ? Bs * c->Q : Bs;
        int *lens = tg_arena_alloc(sizeof(int) * (size_t)n);
        for (int i = 0; i < n; i++) lens[i] = (int)(tg_rng_bits(seed, 9, (uint64_t)i) % (uint64_t)(c->K + 3));
        in->mask.lens = lens;
        in->mask.lens_ndim = c->mask == 2 ? 2 : 1;
    }
    if (c->pos) {
        int ph = c->h, clip = 4, R = 2 * clip + 1;
        cr_assert_eq(tg_alibi_slopes(ph, in->slopes), 0);
        in->pos = (tg_attn_pos){.heads = ph, .alibi = in->slopes, .clip = clip};
        if (c->pos == 2) {
            in->pos.bias = in->tab[0] = leaf(tg_normal(TG_SHAPE(ph, R), 0, 1, &rng));
            in->pos.rel_k = in->tab[1] = leaf(tg_normal(TG_SHAPE(R, c->d), 0, 1, &rng));
            in->pos.rel_v = in->tab[2] = leaf(tg_normal(TG_SHAPE(R, c->dv), 0, 1, &rng));
        }
    }
}

/* The case's op on x (3 tensors, or qkv alone). */
static tg_tensor *op(const bcase *c, inputs *in, tg_tensor *const *x, tg_rng *rng) {
    const tg_attn_pos *pos = c->pos ? &in->pos : NULL;
    switch (c->kind) {
    case PLAIN: return tg_attention_pos(x[0], x[1], x[2], in->mask, c->p, rng, pos);
    case HEADS: return tg_attention_heads(x[0], x[1], x[2], c->h, in->mask, c->p, rng, pos);
    default: return tg_attention_qkv(x[0], c->h, in->mask, c->p, rng, pos);
    }
}

typedef struct {
    tg_tensor *out;  /* bf16 */
    tg_tensor *g[6]; /* gradients of the inputs, then of the tables (NULL where none) */
} result;

/* One forward and backward: the op on bf16 storage (composite false), or
 * the composite tg_to_bf16(op(tg_to_real(.))). Results copied out. */
static result run(const bcase *c, inputs *in, bool composite) {
    tg_rng rng = tg_rng_new(77);
    rng.counter = 1234;
    for (int i = 0; i < in->nx; i++) tg_zero_grad(in->x[i]);
    for (int i = 0; i < 3; i++)
        if (in->tab[i]) tg_zero_grad(in->tab[i]);
    tg_tensor *x[3] = {NULL, NULL, NULL};
    for (int i = 0; i < in->nx; i++) x[i] = composite ? tg_to_real(tg_to_bf16(in->x[i])) : tg_to_bf16(in->x[i]);
    tg_tensor *out = op(c, in, x, &rng);
    if (composite) out = tg_to_bf16(out);
    TG_REQUIRE(out);
    cr_assert_eq(out->dtype, TG_DTYPE_BF16, "the output of bf16 inputs is bf16");
    cr_assert_eq(tg_backward_seed(out, in->seed), 0, "%s", tg_last_error());
    result r = {tg_clone(out), {NULL}};
    for (int i = 0; i < in->nx; i++) r.g[i] = tg_clone(in->x[i]->grad);
    for (int i = 0; i < 3; i++)
        if (in->tab[i]) r.g[3 + i] = tg_clone(in->tab[i]->grad);
    return r;
}

/* max |a - b| / max(max |b|, 1e-30): the gradients' distance, relative. */
static double rel_diff(const tg_tensor *a, const tg_tensor *b) {
    double m = 0;
    for (int64_t i = 0; i < b->size; i++) m = fmax(m, fabs((double)b->data[i]));
    return max_diff(a, b) / fmax(m, 1e-30);
}

static const char *const GNAMES[6] = {"d q", "d k", "d v", "d bias", "d rel_k", "d rel_v"};

/* The contract for case c under the current precision and engine; returns
 * the gradients' largest relative distance from the composite's. */
static double check_case(const bcase *c, int ci, const char *setting) {
    double worst = 0;
    tg_scope_begin();
    inputs in;
    make_inputs(c, 100 + (uint64_t)ci, &in);
    int prev = tg_get_num_threads();
    tg_set_num_threads(1);
    result want = run(c, &in, true), one = run(c, &in, false);
    for (int nt = 1; nt <= 3; nt++) {
        tg_set_num_threads(nt);
        result got = nt == 1 ? one : run(c, &in, false);
        cr_expect(!memcmp(got.out->bf16, want.out->bf16, sizeof(uint16_t) * (size_t)want.out->size),
                  "case %d (%s, %d threads): the output is not tg_to_bf16 of the composite's, bit for bit", ci, setting,
                  nt);
        for (int i = 0; i < 6; i++) {
            if (!want.g[i]) continue;
            cr_expect(!memcmp(got.g[i]->data, one.g[i]->data, sizeof(tg_real) * (size_t)one.g[i]->size),
                      "case %d (%s): %s at %d threads differs from 1 thread's", ci, setting, GNAMES[i], nt);
            /* D reads the rounded O: a relative change of about 2^-8 in D */
            double e = rel_diff(got.g[i], want.g[i]);
            worst = fmax(worst, e);
            cr_expect(e < 3e-2, "case %d (%s, %d threads): %s differs from the composite's by %.3g (relative)", ci,
                      setting, nt, GNAMES[i], e);
        }
    }
    tg_set_num_threads(prev);
    tg_scope_end(); /* the inputs too: they live in the arena */
    return worst;
}

static void check_all(const char *setting) {
    double worst = 0;
    for (int i = 0; i < (int)(sizeof CASES / sizeof CASES[0]); i++)
        worst = fmax(worst, check_case(&CASES[i], i, setting));
    cr_log_info("attention_bf16 (%s): gradients within %.3g (relative) of the composite's\n", setting, worst);
}

Test(attention_bf16, equals_the_composite_in_fp32_products) {
    tg_precision prev = tg_set_precision(TG_PREC_FP32);
    check_all("fp32");
    tg_set_precision(prev);
}

/* Every engine of the bf16 products: AMX (the blocked tiles' products by
 * tg_k_gemm_bf16 on the widened rows) and the others (the fp32 kernels on
 * operands rounded to bf16; short sequences so on every engine). */
Test(attention_bf16, equals_the_composite_in_bf16_products) {
    static const char *const engines[] = {"amx", "avx512_bf16", "fp32", "portable"};
    tg_precision prev = tg_set_precision(TG_PREC_BF16);
    for (int e = 0; e < 4; e++) {
        tg__bf16_engine_force(engines[e]);
        if (strcmp(tg_bf16_engine().engine, engines[e]) == 0) {
            char setting[64];
            snprintf(setting, sizeof setting, "bf16 on %s", engines[e]);
            check_all(setting);
        } else {
            cr_log_info("attention_bf16: no %s engine on this CPU; skipped", engines[e]);
        }
    }
    tg__bf16_engine_force(NULL); /* the rate's choice again */
    tg_set_precision(prev);
}

/* p = 1 drops every weight: zeros (signed as the composite's) and zero gradients. */
Test(attention_bf16, dropout_one_gives_the_composite_zeros) {
    bcase c = {PLAIN, 2, 5, 7, 4, 3, 1, 3, 1, 0};
    check_case(&c, 99, "p = 1");
}

/* The node keeps bf16 inputs and a bf16 output, and the widened rows are
 * per-thread scratch that the forward gives back: a forward's arena growth
 * (the second of a scope, which takes the first's scratch again) is
 * smaller than with real storage by at least half of out's real bytes. */
Test(attention_bf16, keeps_half_the_bytes) {
    tg_rng rng = tg_rng_new(3);
    int B = 4, T = 128, h = 2, d = 32;
    tg_tensor *qkv = leaf(tg_normal(TG_SHAPE(B, T, 3 * h * d), 0, 1, &rng));
    size_t added[2];
    for (int bf = 0; bf < 2; bf++) {
        tg_scope_begin();
        tg_tensor *x = bf ? tg_to_bf16(qkv) : tg_to_real(tg_to_bf16(qkv));
        TG_REQUIRE(x);
        TG_REQUIRE(tg_attention_qkv(x, h, (tg_mask){NULL, 0, true}, 0, NULL, NULL));
        size_t before = tg_memory().arena_in_use;
        TG_REQUIRE(tg_attention_qkv(x, h, (tg_mask){NULL, 0, true}, 0, NULL, NULL));
        added[bf] = tg_memory().arena_in_use - before;
        tg_scope_end();
    }
    size_t out_real = sizeof(tg_real) * (size_t)B * T * h * d;
    cr_log_info("attention_bf16: forward kept %zu bytes with real storage, %zu with bf16 (out %zu real bytes)\n",
                added[0], added[1], out_real);
    cr_expect(added[1] + out_real / 2 <= added[0], "bf16 storage kept %zu bytes, real %zu", added[1], added[0]);
    tg_free(qkv);
}

/* No queries: an empty output, stored as bf16. */
Test(attention_bf16, no_queries_give_an_empty_bf16_output) {
    tg_scope_begin();
    tg_rng rng = tg_rng_new(6);
    tg_tensor *q = tg_to_bf16(tg_randn(TG_SHAPE(2, 0, 4), &rng)), *k = tg_to_bf16(tg_randn(TG_SHAPE(2, 3, 4), &rng));
    tg_tensor *v = tg_to_bf16(tg_randn(TG_SHAPE(2, 3, 5), &rng));
    tg_tensor *out = tg_attention(q, k, v, (tg_mask){NULL, 0, false}, 0, NULL);
    TG_REQUIRE(out);
    cr_expect(out->dtype == TG_DTYPE_BF16 && out->size == 0 && out->ndim == 3 && out->shape[2] == 5);
    tg_scope_end();
}

Test(attention_bf16, mixed_storage_is_an_error) {
    tg_scope_begin();
    tg_rng rng = tg_rng_new(4);
    tg_tensor *q = tg_randn(TG_SHAPE(2, 3, 4), &rng), *k = tg_randn(TG_SHAPE(2, 5, 4), &rng);
    tg_tensor *v = tg_randn(TG_SHAPE(2, 5, 6), &rng);
    tg_tensor *qb = tg_to_bf16(q), *kb = tg_to_bf16(k), *vb = tg_to_bf16(v);
    tg_mask none = {NULL, 0, false};
    cr_expect_null(tg_attention(qb, k, v, none, 0, NULL));
    cr_expect(error_has("attention:", "need all three tg_real or all three bf16"), "%s", tg_last_error());
    cr_expect_null(tg_attention(qb, kb, v, none, 0, NULL));
    cr_expect(error_has("attention:", "v (2,5,6) real"), "%s", tg_last_error());
    cr_expect_null(tg_attention_heads(q, kb, vb, 2, none, 0, NULL, NULL));
    cr_expect(error_has("attention_heads:", "all three bf16"), "%s", tg_last_error());
    tg_tensor *bias = tg_to_bf16(tg_randn(TG_SHAPE(1, 3), &rng));
    tg_attn_pos pos = {.heads = 1, .clip = 1, .bias = bias};
    cr_expect_null(tg_attention_pos(qb, kb, vb, none, 0, NULL, &pos));
    cr_expect(error_has("attention:", "position bias (1,3) is bf16"), "%s", tg_last_error());
    tg_scope_end();
}

/* ---- bf16 products on real storage ---------------------------------------
 * Whatever engine runs them (the short kernel or tg_k_attn_mm on operands
 * rounded to bf16, or AMX tiles), a bf16 attention multiplies bf16 values
 * with float sums: its output and gradients are those of the inputs rounded
 * to bf16 first (the op rounds them itself: the same bits), close to fp32
 * products on the rounded inputs (what is left is the rounding of P and dS,
 * about 2^-8 of each), and the same bits at 1, 2 and 3 threads. */
typedef struct {
    tg_real *v; /* out, then d qkv */
    size_t n;
} flat;

static flat qkv_run(tg_tensor *qkv, int h, tg_precision prec, int threads) {
    tg_set_num_threads(threads);
    tg_precision prev = tg_set_precision(prec);
    tg_zero_grad(qkv);
    tg_scope_begin();
    tg_tensor *out = tg_attention_qkv(qkv, h, (tg_mask){NULL, 0, true}, 0, NULL, NULL);
    TG_REQUIRE(out);
    tg_rng rng = tg_rng_new(8);
    cr_assert_eq(tg_backward_seed(out, tg_normal(out->ndim, out->shape, 0, 1, &rng)), 0, "%s", tg_last_error());
    flat f = {malloc(sizeof(tg_real) * (size_t)(out->size + qkv->size)), (size_t)(out->size + qkv->size)};
    cr_assert_not_null(f.v);
    memcpy(f.v, out->data, sizeof(tg_real) * (size_t)out->size);
    memcpy(f.v + out->size, qkv->grad->data, sizeof(tg_real) * (size_t)qkv->size);
    tg_scope_end();
    tg_set_precision(prev);
    return f;
}

Test(attention_bf16, bf16_products_are_those_of_rounded_operands) {
    if (sizeof(tg_real) != 4) cr_skip_test("float build only: the double build refuses bf16 products");
    static const char *const engines[] = {"amx", "avx512_bf16", "fp32", "portable"};
    static const int shapes[][4] = {{3, 64, 2, 32}, {2, 130, 2, 32}, {1, 16, 2, 16}}; /* B, T, h, d: short, blocked */
    int saved = tg_get_num_threads();
    for (int s = 0; s < 3; s++) {
        int B = shapes[s][0], T = shapes[s][1], h = shapes[s][2], d = shapes[s][3];
        tg_rng rng = tg_rng_new(40 + (uint64_t)s);
        tg_tensor *x = leaf(tg_normal(TG_SHAPE(B, T, 3 * h * d), 0, 1.5, &rng)), *xr = leaf(tg_clone(x));
        TG_REQUIRE(xr);
        for (int64_t i = 0; i < xr->size; i++) xr->data[i] = (tg_real)tg__bf16_round_daz((float)xr->data[i]);
        flat ref = qkv_run(xr, h, TG_PREC_FP32, 1);
        for (int e = 0; e < 4; e++) {
            tg__bf16_engine_force(engines[e]);
            if (strcmp(tg_bf16_engine().engine, engines[e]) != 0) continue;
            flat one = qkv_run(x, h, TG_PREC_BF16, 1), pre = qkv_run(xr, h, TG_PREC_BF16, 1);
            double worst = 0, scale = 0;
            for (size_t i = 0; i < ref.n; i++) {
                worst = fmax(worst, fabs((double)one.v[i] - (double)ref.v[i]));
                scale = fmax(scale, fabs((double)ref.v[i]));
            }
            size_t n_out = (size_t)B * T * h * d;
            size_t first = n_out;
            for (size_t i = 0; i < n_out && first == n_out; i++)
                if (memcmp(&one.v[i], &pre.v[i], sizeof(tg_real))) first = i;
            cr_expect(first == n_out, "T %d on %s: rounding the inputs first moved out[%zu] (%.17g, %.17g)", T,
                      engines[e], first, first < n_out ? (double)one.v[first] : 0.0,
                      first < n_out ? (double)pre.v[first] : 0.0);
            cr_expect(worst < 2e-2 * scale && worst > 0, "T %d on %s: %g off fp32 products on rounded inputs (of %g)",
                      T, engines[e], worst, scale);
            for (int nt = 2; nt <= 3; nt++) {
                flat got = qkv_run(x, h, TG_PREC_BF16, nt);
                cr_expect(!memcmp(got.v, one.v, sizeof(tg_real) * one.n), "T %d on %s: %d threads differ from 1", T,
                          engines[e], nt);
                free(got.v);
            }
            free(one.v), free(pre.v);
        }
        tg__bf16_engine_force(NULL);
        free(ref.v);
        tg_free(x), tg_free(xr);
    }
    tg_set_num_threads(saved);
}

#include "tensor/simd.h"
#if TG_SIMD_F32
#include "tensor/bf16_round_simd.h"
/* The vector roundings of the attention kernels (round8, round16, and
 * round16_bf in vcvtneps2bf16) are
 * tg__bf16_round_daz lane by lane: ties, NaN, infinities, subnormals. */
TG_AVX2 static void round_avx2(const float *x, float *y) { _mm256_storeu_ps(y, round8(_mm256_loadu_ps(x))); }
TG_AVX512 static void round_avx512(const float *x, float *y) { _mm512_storeu_ps(y, round16(_mm512_loadu_ps(x))); }
TG_AVX512_BF16 static void round_avx512bf(const float *x, float *y) {
    _mm512_storeu_ps(y, round16_bf(_mm512_loadu_ps(x)));
}
Test(attention_bf16, vector_roundings_are_the_scalar_one) {
    static const uint32_t special[16] = {0x3F808000u, 0x3F818000u, 0x3F80FFFFu, 0x7F800000u, 0xFF800000u, 0x7FC00001u,
                                         0x7F800001u, 0x00000001u, 0x807FFFFFu, 0x00800000u, 0x7F7FFFFFu, 0x80000000u,
                                         0x3F7FFFFFu, 0xBF808001u, 0x477FF000u, 0x33800000u};
    tg_rng rng = tg_rng_new(2);
    for (int round = 0; round < 64; round++) {
        float x[16], y[16];
        for (int i = 0; i < 16; i++) {
            uint32_t b = round == 0 ? special[i] : (uint32_t)tg_rng_next_u64(&rng);
            memcpy(&x[i], &b, sizeof b);
        }
        static const char *const name[3] = {"round8", "round16", "round16_bf"};
        static const tg_isa level[3] = {TG_ISA_AVX2, TG_ISA_AVX512, TG_ISA_AVX512_BF16};
        for (int isa = 0; isa < 3; isa++) {
            if (tg_isa_level() < level[isa]) continue;
            (isa == 2 ? round_avx512bf : isa ? round_avx512 : round_avx2)(x, y);
            for (int i = 0; i < (isa ? 16 : 8); i++) {
                float want = tg__bf16_round_daz(x[i]);
                cr_expect(!memcmp(&y[i], &want, sizeof want), "%s: lane %d of 0x%08x", name[isa], i,
                          (unsigned)tg__float_bits(x[i]));
            }
        }
    }
}

/* widen8_packed (the fp32 engine's loads of bf16 operands) is round8 of
 * the widened value (tg__bf16_round_daz: bf_h, gemm_bf16_pack.h) for
 * every one of the 65,536 bf16 bit patterns: subnormals to signed zeros,
 * NaNs quiet (signalling ones too), the rest as they are. */
TG_AVX2 static void widen_avx2(const uint16_t *h, float *y) { _mm256_storeu_ps(y, widen8_packed(h)); }
Test(attention_bf16, widen8_packed_is_round8_of_every_bf16_value) {
    if (tg_isa_level() < TG_ISA_AVX2) return;
    for (uint32_t h0 = 0; h0 < 65536; h0 += 8) {
        uint16_t h[8];
        float y[8];
        for (int i = 0; i < 8; i++) h[i] = (uint16_t)(h0 + (uint32_t)i);
        widen_avx2(h, y);
        for (int i = 0; i < 8; i++) {
            float want = tg__bf16_round_daz(tg__bf16_to_float(h[i]));
            cr_assert(!memcmp(&y[i], &want, sizeof want), "widen8_packed(0x%04x): 0x%08x, round8 0x%08x",
                      (unsigned)h[i], (unsigned)tg__float_bits(y[i]), (unsigned)tg__float_bits(want));
        }
    }
}
#endif

#include "tensor/kernels.h"
/* The short kernel at the AVX-512 BF16 level (its roundings of the weights
 * and dS in vcvtneps2bf16) gives the AVX-512 level's bits, forward and
 * backward, with and without dropout: the same body, the same roundings. */
static void short_bf16_run(int cap, int Q, int K, int d, int dv, bool dropout, tg_real *res, size_t n_res) {
    int KP = tg_k_attention_short_stride(K);
    size_t nq = (size_t)Q * d, nk = (size_t)K * d, nv = (size_t)K * dv, no = (size_t)Q * dv, np = (size_t)Q * KP;
    tg_real *buf =
        calloc(2 * nq + 2 * nk + 2 * nv + 2 * no + 2 * np + tg_k_attention_short_scratch(Q, K, d, dv), sizeof(tg_real));
    tg_real *q = buf, *k = q + nq, *v = k + nk, *dO = v + nv, *gq = dO + no, *gk = gq + nq, *gv = gk + nk;
    tg_real *out = gv + nv, *P = out + no, *zf = P + np, *scratch = zf + np;
    tg_rng rng = tg_rng_new(11);
    for (size_t i = 0; i < nq + nk + nv + no; i++)
        q[i] = (tg_real)tg__bf16_round_daz((float)(tg_rng_next_u64(&rng) >> 40) / 4194304.0f - 2);
    int lim[64];
    for (int i = 0; i < Q; i++) {
        lim[i] = i % 5 == 4 ? 0 : i + 1 < K ? i + 1 : K;
        for (int j = 0; j < KP; j++) zf[(size_t)i * KP + j] = j >= K ? 0 : !dropout ? 1 : (i + 3 * j) % 4 ? 1.25f : 0;
    }
    int old = tg__isa_cap(cap);
    tg_attn_entry e = {Q, K, d, dv, (tg_real)0.3, q, k, v, d, d, dv, dv, lim, true, 0, 0, 0, false, false, false};
    tg_k_attention_short_forward(&e, dropout ? zf : NULL, out, P, scratch);
    tg_k_attention_short_backward(&e, P, dropout ? zf : NULL, dO, gq, gk, gv, scratch);
    tg__isa_cap(old);
    memcpy(res, gq, sizeof(tg_real) * n_res); /* gq, gk, gv, out, P: contiguous */
    free(buf);
}
Test(attention_bf16, short_kernel_rounds_alike_at_the_bf16_level) {
    if (tg_isa_level() < TG_ISA_AVX512_BF16) {
        cr_log_info("attention_bf16: no AVX-512 BF16 on this CPU; skipped");
        return;
    }
    static const int shapes[][4] = {{64, 64, 32, 32}, {13, 37, 5, 7}, {16, 16, 16, 16}};
    for (int s = 0; s < 3; s++)
        for (int dr = 0; dr < 2; dr++) {
            int Q = shapes[s][0], K = shapes[s][1], d = shapes[s][2], dv = shapes[s][3];
            size_t n = (size_t)Q * d + (size_t)K * d + (size_t)K * dv + (size_t)Q * dv +
                       (size_t)Q * tg_k_attention_short_stride(K);
            tg_real *a = malloc(sizeof(tg_real) * n), *b = malloc(sizeof(tg_real) * n);
            short_bf16_run(TG_ISA_AVX512, Q, K, d, dv, dr, a, n);
            short_bf16_run(TG_ISA_AVX512_BF16, Q, K, d, dv, dr, b, n);
            cr_expect(!memcmp(a, b, sizeof(tg_real) * n), "short kernel %dx%d, d %d, dv %d, dropout %d: bits differ", Q,
                      K, d, dv, dr);
            free(a), free(b);
        }
}
