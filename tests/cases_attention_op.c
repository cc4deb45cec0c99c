/* Gradient-check cases for the fused attention op (tg_attention): every mask
 * kind, dropout with a fixed rng made inside the case (so every evaluation
 * draws the same mask), Q != K, dv != d, and sizes that cross the op's 64 x 64
 * blocks. arg[0] picks the mask, arg[1] is the dropout p in tenths, arg[2]
 * the rng seed. Inputs stay at a few hundred elements: each costs two
 * forwards. */
#include "gradcheck_cases.h"

static const int lens_b3[] = {2, 0, 7};            /* (3,Q,5): a 0 length and one > K */
static const int lens_b2q3[] = {1, 3, 4, 2, 0, 5}; /* (2,3,4): one length per query */
static const int lens_b2[] = {3, 1};               /* causal + lengths */
static int lens_q70[70];                           /* (1,70,130): per query, filled below */

static tg_mask pick_mask(int which) {
    switch (which) {
    case 1: return (tg_mask){lens_b3, 1, false};
    case 2: return (tg_mask){lens_b2q3, 2, false};
    case 3: return (tg_mask){NULL, 0, true};
    case 4: return (tg_mask){lens_b2, 1, true};
    case 5: /* lengths 0 .. 135 spread over the 3 key blocks, some 0, some > K */
        for (int q = 0; q < 70; q++) lens_q70[q] = q % 9 == 4 ? 0 : (q * 37) % 137;
        return (tg_mask){lens_q70, 2, false};
    default: return (tg_mask){NULL, 0, false};
    }
}

static tg_tensor *f_attention(tg_tensor *const *in, int n, void *ctx) {
    (void)n;
    tg_rng rng = tg_rng_new((uint64_t)GC_ARG(ctx, 2));
    rng.counter = 5; /* not at the start of the stream */
    return tg_attention(in[0], in[1], in[2], pick_mask(GC_ARG(ctx, 0)), (tg_real)GC_ARG(ctx, 1) / 10, &rng);
}

/* The heads read in place: arg[3] = heads + 100 (with ALiBi) or heads. */
static const tg_attn_pos *pick_pos(int alibi, int heads, tg_attn_pos *pos, tg_real *slopes) {
    if (!alibi) return NULL;
    tg_alibi_slopes(heads, slopes);
    *pos = (tg_attn_pos){.heads = heads, .alibi = slopes};
    return pos;
}

/* Three inputs: tg_attention_heads; one: tg_attention_qkv. */
static tg_tensor *f_attention_heads(tg_tensor *const *in, int n, void *ctx) {
    tg_rng rng = tg_rng_new((uint64_t)GC_ARG(ctx, 2));
    tg_attn_pos pos;
    tg_real slopes[8], p = (tg_real)GC_ARG(ctx, 1) / 10;
    int h = GC_ARG(ctx, 3) % 100;
    const tg_attn_pos *pp = pick_pos(GC_ARG(ctx, 3) >= 100, h, &pos, slopes);
    tg_mask mask = pick_mask(GC_ARG(ctx, 0));
    return n == 1 ? tg_attention_qkv(in[0], h, mask, p, &rng, pp)
                  : tg_attention_heads(in[0], in[1], in[2], h, mask, p, &rng, pp);
}

/* q (B,Q,d), k (B,K,d), v (B,K,dv) */
/* Left as written by hand (clang-format off): macros and case tables, aligned by hand. */
/* clang-format off */
#define ATT(what, mask, p10, B, Q, K, d, dv)                                                                        \
    {                                                                                                               \
        "attention", what, f_attention, 3, {3, 3, 3}, {{B, Q, d}, {B, K, d}, {B, K, dv}}, {mask, p10, 17}, 0, { 0 } \
    }

const gc_case gc_cases_attention_op[] = {
    ATT("(2,3,4)x(2,5,4)x(2,5,3)", 0, 0, 2, 3, 5, 4, 3),
    ATT("lens [2,0,7] K=5", 1, 0, 3, 2, 5, 4, 2),
    ATT("lens per query", 2, 0, 2, 3, 4, 3, 2),
    ATT("causal 4x4", 3, 0, 2, 4, 4, 3, 3),
    ATT("causal+lens [3,1] Q=3 K=5", 4, 0, 2, 3, 5, 2, 4),
    ATT("dropout 0.3", 0, 3, 2, 3, 5, 4, 3),
    ATT("dropout 0.3 lens [2,0,7]", 1, 3, 3, 2, 5, 3, 2),
    ATT("Q=70 K=130 causal drop 0.2", 3, 2, 1, 70, 130, 2, 1),
    ATT("Q=70 K=130 lens/query drop 0.1", 5, 1, 1, 70, 130, 1, 2),
    /* short sequences, one call per entry: a second lane block of keys (K 17), a full 16-lane row */
    ATT("Q=6 K=17 causal drop 0.2", 3, 2, 2, 6, 17, 3, 2),
    ATT("Q=K=16 d=1 dv=2 lens [2,0,7] drop 0.1", 1, 1, 3, 16, 16, 1, 2),
    /* heads in place: q (B,Q,h d), k (B,K,h d), v (B,K,h dv); the mask is the [B h, Q, K] scores' */
    {"attention", "heads in place, h=3 (1,3,6)x(1,5,6)x(1,5,3) lens [2,0,7]", f_attention_heads, 3, {3, 3, 3},
     {{1, 3, 6}, {1, 5, 6}, {1, 5, 3}}, {1, 0, 17, 3}, 0, {0}},
    {"attention", "heads in place, h=2 causal drop 0.3 ALiBi", f_attention_heads, 3, {3, 3, 3},
     {{2, 4, 4}, {2, 4, 4}, {2, 4, 6}}, {3, 3, 17, 102}, 0, {0}},
    /* the fused projection qkv (B,T,3 h d) */
    {"attention", "fused qkv, h=2 d=2 causal", f_attention_heads, 1, {3}, {{2, 4, 12}}, {3, 0, 17, 2}, 0, {0}},
    /* d 16: the rows read where they are (16 lanes), 3 h d apart */
    {"attention", "fused qkv, h=1 d=16 causal drop 0.2", f_attention_heads, 1, {3}, {{1, 5, 48}}, {3, 2, 17, 1}, 0,
     {0}},
    {"attention", "fused qkv, h=2 d=3 causal drop 0.2 ALiBi", f_attention_heads, 1, {3}, {{1, 5, 18}}, {3, 2, 17, 102}, 0,
     {0}},
};
const int gc_cases_attention_op_count = (int)(sizeof gc_cases_attention_op / sizeof gc_cases_attention_op[0]);
/* clang-format on */
