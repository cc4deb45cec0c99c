/* Gradient-check cases for the position terms of attention (tg_attn_pos):
 * the fused tg_attention_pos and the stored path of tg_dot_attention with
 * the same terms (ALiBi, the per-head bias table, Shaw's rel_k and rel_v),
 * with masks, dropout, several heads, a query offset and sizes that cross
 * the fused op's 64 x 64 blocks; the stored path's own ops (rel_gather,
 * rel_scatter); RoPE in both pairings.
 * arg[0]: mask (as cases_attention_op.c: 0 none, 1 lens [B], 3 causal),
 * arg[1]: dropout p in tenths, arg[2]: terms (1 ALiBi, 2 bias, 4 rel_k,
 * 8 rel_v) + 16 * heads, arg[3]: clip + 100 * q_offset + 10000 * T5
 * buckets (max_distance 9, one-sided under a causal mask). Inputs: q, k, v,
 * then the tables present, in the order bias, rel_k, rel_v. */
#include "gradcheck_cases.h"

static const int lens_b4[] = {2, 0, 7, 3};

static tg_mask pick_mask(int which, int B) {
    (void)B;
    switch (which) {
    case 1: return (tg_mask){lens_b4, 1, false};
    case 3: return (tg_mask){NULL, 0, true};
    default: return (tg_mask){NULL, 0, false};
    }
}

/* The tg_attn_pos a case describes, its tables taken from in[3..]. */
static tg_attn_pos case_pos(tg_tensor *const *in, void *ctx, tg_real *slopes) {
    int terms = GC_ARG(ctx, 2) & 15, heads = GC_ARG(ctx, 2) >> 4;
    tg_attn_pos pos = {.heads = heads,
                       .clip = GC_ARG(ctx, 3) % 100,
                       .q_offset = GC_ARG(ctx, 3) / 100 % 100,
                       .t5_buckets = GC_ARG(ctx, 3) / 10000,
                       .t5_max_distance = 9,
                       .t5_one_sided = GC_ARG(ctx, 0) == 3};
    int next = 3;
    if (terms & 1) {
        tg_alibi_slopes(heads, slopes);
        pos.alibi = slopes;
    }
    if (terms & 2) pos.bias = in[next++];
    if (terms & 4) pos.rel_k = in[next++];
    if (terms & 8) pos.rel_v = in[next++];
    return pos;
}

static tg_tensor *f_fused(tg_tensor *const *in, int n, void *ctx) {
    (void)n;
    tg_real slopes[16];
    tg_attn_pos pos = case_pos(in, ctx, slopes);
    tg_rng rng = tg_rng_new(23);
    rng.counter = 9;
    return tg_attention_pos(in[0], in[1], in[2], pick_mask(GC_ARG(ctx, 0), in[0]->shape[0]),
                            (tg_real)GC_ARG(ctx, 1) / 10, &rng, &pos);
}

/* The module's stored path, a fresh module (and so the same dropout mask)
 * per evaluation. */
static tg_tensor *f_stored(tg_tensor *const *in, int n, void *ctx) {
    (void)n;
    tg_real slopes[16];
    tg_attn_pos pos = case_pos(in, ctx, slopes);
    tg_rng rng = tg_rng_new(23);
    tg_dot_attention *m = tg_dot_attention_new((tg_real)GC_ARG(ctx, 1) / 10, &rng);
    m->path = TG_PATH_STORED;
    tg_tensor *out = tg_dot_attention_forward_pos(m, in[0], in[1], in[2], pick_mask(GC_ARG(ctx, 0), 0), &pos);
    tg_dot_attention_free(m);
    return out;
}

/* arg[0] Q, arg[1] K, arg[2] clip (or, negative, that many T5 buckets), arg[3] q_offset */
static tg_attn_pos rel_pos(void *ctx) {
    int c = GC_ARG(ctx, 2);
    return (tg_attn_pos){
        .clip = c > 0 ? c : 0, .t5_buckets = c < 0 ? -c : 0, .t5_max_distance = 6, .q_offset = GC_ARG(ctx, 3)};
}
static tg_tensor *f_gather(tg_tensor *const *in, int n, void *ctx) {
    (void)n;
    tg_attn_pos pos = rel_pos(ctx);
    return tg_rel_gather(in[0], GC_ARG(ctx, 0), GC_ARG(ctx, 1), &pos);
}
static tg_tensor *f_scatter(tg_tensor *const *in, int n, void *ctx) {
    (void)n;
    tg_attn_pos pos = rel_pos(ctx);
    return tg_rel_scatter(in[0], &pos);
}
/* RoPE of x, times x again so the check also sees a non-linear use. */
static tg_tensor *f_rope(tg_tensor *const *in, int n, void *ctx) {
    (void)n;
    tg_tensor *y = tg_rope(in[0], GC_ARG(ctx, 0), (tg_real)GC_ARG(ctx, 1), GC_ARG(ctx, 2) != 0);
    return tg_mul(y, in[0]);
}

/* RoPE of x's heads in place of layout: GC_ARG 3 = heads * 10 + rotated. */
static tg_tensor *f_rope_heads(tg_tensor *const *in, int n, void *ctx) {
    (void)n;
    int hr = GC_ARG(ctx, 3);
    tg_tensor *y = tg_rope_heads(in[0], hr / 10, hr % 10, GC_ARG(ctx, 0), (tg_real)GC_ARG(ctx, 1), GC_ARG(ctx, 2) != 0);
    return tg_mul(y, in[0]);
}

/* Left as written by hand (clang-format off): macros and case tables, aligned by hand. */
/* clang-format off */
#define R_(c) (2 * (c) + 1)
/* q (B,Q,d), k (B,K,d), v (B,K,dv), and the tables of `terms` */
#define POS(op, fn, what, mask, p10, terms, H, clip, qoff, B, Q, K, d, dv, ntab, t0r, t0c, t1r, t1c, t2r, t2c) \
    {                                                                                                          \
        op, what, fn, 3 + ntab, {3, 3, 3, 2, 2, 2},                                                            \
            {{B, Q, d}, {B, K, d}, {B, K, dv}, {t0r, t0c}, {t1r, t1c}, {t2r, t2c}},                            \
            {mask, p10, (terms) + 16 * (H), (clip) + 100 * (qoff)}, 0, {                                       \
            0                                                                                                  \
        }                                                                                                      \
    }

#define CASES(op, fn)                                                                                               \
    POS(op, fn, "ALiBi causal 2 heads", 3, 0, 1, 2, 0, 0, 4, 5, 5, 3, 2, 0, 0, 0, 0, 0, 0, 0),                      \
        POS(op, fn, "ALiBi 3 heads lens drop", 1, 3, 1, 3, 0, 0, 3, 4, 6, 2, 3, 0, 0, 0, 0, 0, 0, 0),               \
        POS(op, fn, "bias table clip 2, 2 heads", 0, 0, 2, 2, 2, 0, 4, 4, 6, 3, 2, 1, 2, R_(2), 0, 0, 0, 0),        \
        POS(op, fn, "bias causal q_offset 2", 3, 0, 2, 2, 3, 2, 2, 3, 5, 2, 2, 1, 2, R_(3), 0, 0, 0, 0),            \
        POS(op, fn, "Shaw k+v clip 2", 0, 0, 12, 2, 2, 0, 4, 5, 6, 3, 2, 2, R_(2), 3, R_(2), 2, 0, 0),              \
        POS(op, fn, "Shaw k+v lens drop", 1, 2, 12, 1, 1, 0, 4, 3, 5, 2, 3, 2, R_(1), 2, R_(1), 3, 0, 0),           \
        POS(op, fn, "all terms causal", 3, 0, 15, 2, 2, 0, 2, 4, 4, 2, 2, 3, 2, R_(2), R_(2), 2, R_(2), 2),         \
        POS(op, fn, "Shaw v only, all masked row", 1, 0, 8, 1, 1, 0, 4, 2, 4, 2, 2, 1, R_(1), 2, 0, 0, 0, 0),       \
        POS(op, fn, "Q=70 K=130 all terms drop", 0, 1, 15, 1, 3, 0, 1, 70, 130, 1, 1, 3, 1, R_(3), R_(3), 1, R_(3), \
            1),                                                                                                     \
        POS(op, fn, "T5 8 buckets bias+Shaw", 1, 0, 14, 2, 80000, 0, 4, 5, 12, 2, 2, 3, 2, 8, 8, 2, 8, 2),          \
        POS(op, fn, "T5 6 one-sided causal", 3, 0, 2, 2, 60000, 0, 2, 12, 12, 2, 2, 1, 2, 6, 0, 0, 0, 0)

const gc_case gc_cases_position[] = {
    CASES("attention", f_fused),
    CASES("masked_softmax", f_stored),
    {"rel_gather", "(2,3,5) -> Q3 K4 clip 2", f_gather, 1, {3}, {{2, 3, 5}}, {3, 4, 2, 0}, 0, {0}},
    {"rel_gather", "(2,1,3) shared -> Q4 K6 clip 1 off 2", f_gather, 1, {3}, {{2, 1, 3}}, {4, 6, 1, 2}, 0, {0}},
    {"rel_scatter", "(2,3,4) clip 1", f_scatter, 1, {3}, {{2, 3, 4}}, {0, 0, 1, 0}, 0, {0}},
    {"rel_scatter", "(1,4,6) clip 3 off 1", f_scatter, 1, {3}, {{1, 4, 6}}, {0, 0, 3, 1}, 0, {0}},
    {"rel_gather", "(2,1,8) T5 8 -> Q5 K9", f_gather, 1, {3}, {{2, 1, 8}}, {5, 9, -8, 0}, 0, {0}},
    {"rel_scatter", "(2,5,9) T5 8", f_scatter, 1, {3}, {{2, 5, 9}}, {0, 0, -8, 0}, 0, {0}},
    {"rope", "(2,3,4) interleaved", f_rope, 1, {3}, {{2, 3, 4}}, {0, 10000, 0, 0}, 0, {0}},
    {"rope", "(2,5,6) half, offset 3, base 100", f_rope, 1, {3}, {{2, 5, 6}}, {3, 100, 1, 0}, 0, {0}},
    {"rope", "heads (2,3,12) 3 heads, 2 turned", f_rope_heads, 1, {3}, {{2, 3, 12}}, {1, 10000, 0, 32}, 0, {0}},
    {"rope", "heads (1,4,12) 2 heads half", f_rope_heads, 1, {3}, {{1, 4, 12}}, {0, 100, 1, 22}, 0, {0}},
};
const int gc_cases_position_count = (int)(sizeof gc_cases_position / sizeof gc_cases_position[0]);
/* clang-format on */
