/* Gradient-check cases for the fused ops used by src/nn (dropout, masked
 * softmax, sparsemax, layer norm, cross-entropy): several shapes and masks
 * per op. Lengths and targets are static arrays; the case's arg[] picks them. */
#include "gradcheck_cases.h"

/* Left as written by hand (clang-format off): macros and case tables, aligned by hand. */
/* clang-format off */
#define UNUSED \
    (void)n;   \
    (void)ctx

/* ---- dropout: a fresh rng per evaluation, so every evaluation draws the same mask ---- */
static tg_tensor *f_dropout(tg_tensor *const *in, int n, void *ctx) {
    UNUSED;
    tg_rng rng = tg_rng_new((uint64_t)GC_ARG(ctx, 1));
    return tg_dropout(in[0], (tg_real)GC_ARG(ctx, 0) / 10, &rng);
}
static tg_tensor *f_dropout_tanh(tg_tensor *const *in, int n, void *ctx) {
    UNUSED;
    tg_rng rng = tg_rng_fork(&(tg_rng){7, 0, 0}, 3);
    rng.counter = 100; /* not at the start of the stream */
    return tg_tanh(tg_dropout(tg_mul(in[0], in[0]), (tg_real)GC_ARG(ctx, 0) / 10, &rng));
}

/* ---- masks for masked softmax and sparsemax, picked by arg[0] ---- */
static const int lens_b3[] = {2, 0, 6};            /* (3,Q,4): a 0 length and one > K */
static const int lens_b2q3[] = {1, 3, 4, 2, 0, 5}; /* (2,3,4), one length per query */
static const int lens_b2[] = {3, 1};               /* (2,4,5) with causal */
static const tg_mask masks[] = {
    {NULL, 0, false}, {lens_b3, 1, false}, {lens_b2q3, 2, false}, {NULL, 0, true}, {lens_b2, 1, true},
};
static tg_tensor *f_masked_softmax(tg_tensor *const *in, int n, void *ctx) {
    UNUSED;
    return tg_masked_softmax(in[0], masks[GC_ARG(ctx, 0)]);
}
/* sparsemax is piecewise linear: scale the inputs by arg[1]/10 so that no
 * entry sits within a finite-difference step of the threshold tau (checked by
 * the seeds used), yet several entries share the support. */
static tg_tensor *f_sparsemax(tg_tensor *const *in, int n, void *ctx) {
    UNUSED;
    return tg_sparsemax(tg_mul_scalar(in[0], (tg_real)GC_ARG(ctx, 1) / 10), masks[GC_ARG(ctx, 0)]);
}

/* ---- layer norm ---- */
static tg_tensor *f_layer_norm(tg_tensor *const *in, int n, void *ctx) {
    (void)ctx;
    return n == 3 ? tg_layer_norm(in[0], in[1], in[2], 1e-5) : tg_layer_norm(in[0], NULL, NULL, 1e-5);
}

/* ---- affine: x w^T + b, with or without the bias ---- */
static tg_tensor *f_affine(tg_tensor *const *in, int n, void *ctx) {
    (void)ctx;
    return tg_affine(in[0], in[1], n == 3 ? in[2] : NULL);
}

/* ---- affine_add: r + x w^T + b; inputs x, w, r and (n 4) b ---- */
static tg_tensor *f_affine_add(tg_tensor *const *in, int n, void *ctx) {
    (void)ctx;
    return tg_affine_add(in[2], in[0], in[1], n == 4 ? in[3] : NULL);
}

/* ---- affine_gelu: gelu(x w^T + b), erf form (arg 0) or tanh form (arg 1) ---- */
static tg_tensor *f_affine_gelu(tg_tensor *const *in, int n, void *ctx) {
    return tg_affine_gelu(in[0], in[1], n == 3 ? in[2] : NULL, GC_ARG(ctx, 0));
}

/* ---- cross-entropy, targets and masks picked by arg[0] ---- */
static const int tgt4[] = {1, 0, 4, 2};
static const int tgt4_ignore[] = {1, TG_IGNORE_INDEX, 3, TG_IGNORE_INDEX};
static const int tgt6[] = {0, 3, 3, 1, 2, 0};
static const tg_real mask4[] = {1, 0, 1, 1};
static const tg_real mask6[] = {1, 1, 0, 1, 0, 1};
static tg_tensor *f_cross_entropy(tg_tensor *const *in, int n, void *ctx) {
    UNUSED;
    switch (GC_ARG(ctx, 0)) {
    case 0: return tg_cross_entropy(in[0], tgt4, NULL, TG_IGNORE_INDEX);
    case 1: return tg_cross_entropy(in[0], tgt4, mask4, TG_IGNORE_INDEX);
    case 2: return tg_cross_entropy(in[0], tgt4_ignore, NULL, TG_IGNORE_INDEX);
    case 3: return tg_cross_entropy(in[0], tgt6, NULL, TG_IGNORE_INDEX);
    case 4: return tg_cross_entropy(tg_mul_scalar(in[0], 4), tgt6, mask6, 3); /* ignore_index 3 */
    case 5: return tg_cross_entropy_sum(in[0], tgt4_ignore, NULL, TG_IGNORE_INDEX, NULL);
    default: return tg_cross_entropy_sum(tg_mul_scalar(in[0], 4), tgt6, mask6, 3, NULL);
    }
}

#define C1A(op, what, fn, a0, a1, nd, ...)                             \
    {                                                                  \
        op, what, f_##fn, 1, {nd}, {{__VA_ARGS__}}, {a0, a1}, 0, { 0 } \
    }
#define LN3(what, nd, d, ...)                                                                     \
    {                                                                                             \
        "layer_norm", what, f_layer_norm, 3, {nd, 1, 1}, {{__VA_ARGS__}, {d}, {d}}, {0}, 0, { 0 } \
    }

/* op "affine_gelu" (tanh 0) or "affine_gelu_tanh" (tanh 1). */
#define AFG(op, tanh, what, n_in, out, in, nd, ...)                                                    \
    {                                                                                                  \
        op, what, f_affine_gelu, n_in, {nd, 2, 1}, {{__VA_ARGS__}, {out, in}, {out}}, {tanh}, 0, { 0 } \
    }
#define AFF(what, n_in, out, in, nd, ...)                                                            \
    {                                                                                                \
        "affine", what, f_affine, n_in, {nd, 2, 1}, {{__VA_ARGS__}, {out, in}, {out}}, {0}, 0, { 0 } \
    }

const gc_case gc_cases_nn_ops[] = {
    AFF("(4,3) (5,3) + (5)", 3, 5, 3, 2, 4, 3),
    AFF("(2,3,4) (2,4) + (2)", 3, 2, 4, 3, 2, 3, 4),
    AFF("(3,5) (4,5), no bias", 2, 4, 5, 2, 3, 5),
    {"affine_add", "(4,3) (5,3) + (5) + r (4,5)", f_affine_add, 4, {2, 2, 2, 1}, {{4, 3}, {5, 3}, {4, 5}, {5}}, {0}, 0, {0}},
    {"affine_add", "(2,3,4) (2,4) + r (2,3,2), no bias", f_affine_add, 3, {3, 2, 3}, {{2, 3, 4}, {2, 4}, {2, 3, 2}}, {0}, 0, {0}},
    {"affine_add", "r (3,4) constant", f_affine_add, 4, {2, 2, 2, 1}, {{3, 2}, {4, 2}, {3, 4}, {4}}, {0}, 0, {false, false, true}},
    AFG("affine_gelu", 0, "(4,3) (5,3) + (5)", 3, 5, 3, 2, 4, 3),
    AFG("affine_gelu", 0, "(2,3,4) (2,4) + (2)", 3, 2, 4, 3, 2, 3, 4),
    AFG("affine_gelu", 0, "(3,5) (4,5), no bias", 2, 4, 5, 2, 3, 5),
    AFG("affine_gelu", 0, "(2,1,3) (6,3), no bias", 2, 6, 3, 3, 2, 1, 3),
    AFG("affine_gelu_tanh", 1, "(4,3) (5,3) + (5)", 3, 5, 3, 2, 4, 3),
    AFG("affine_gelu_tanh", 1, "(2,3,4) (2,4) + (2)", 3, 2, 4, 3, 2, 3, 4),
    AFG("affine_gelu_tanh", 1, "(3,5) (4,5), no bias", 2, 4, 5, 2, 3, 5),
    AFG("affine_gelu_tanh", 1, "(2,1,3) (6,3), no bias", 2, 6, 3, 3, 2, 1, 3),
    C1A("dropout", "(4,5) p=0.3", dropout, 3, 11, 2, 4, 5),
    C1A("dropout", "(2,3,4) p=0.5", dropout, 5, 12, 3, 2, 3, 4),
    C1A("dropout", "tanh(drop(x*x)) (7) p=0.5", dropout_tanh, 5, 0, 1, 7),
    C1A("masked_softmax", "(2,3,4) no mask", masked_softmax, 0, 0, 3, 2, 3, 4),
    C1A("masked_softmax", "(3,2,4) lens [2,0,6]", masked_softmax, 1, 0, 3, 3, 2, 4),
    C1A("masked_softmax", "(2,3,4) lens per query", masked_softmax, 2, 0, 3, 2, 3, 4),
    C1A("masked_softmax", "(2,4,4) causal", masked_softmax, 3, 0, 3, 2, 4, 4),
    C1A("masked_softmax", "(2,4,5) causal+lens [3,1]", masked_softmax, 4, 0, 3, 2, 4, 5),
    C1A("sparsemax", "1.5x (2,3,5) no mask", sparsemax, 0, 15, 3, 2, 3, 5),
    C1A("sparsemax", "1.5x (3,2,4) lens [2,0,6]", sparsemax, 1, 15, 3, 3, 2, 4),
    C1A("sparsemax", "x (2,3,4) lens per query", sparsemax, 2, 10, 3, 2, 3, 4),
    C1A("sparsemax", "0.5x (2,4,5) causal+lens [3,1]", sparsemax, 4, 5, 3, 2, 4, 5),
    LN3("(3,5) affine", 2, 5, 3, 5),
    LN3("(2,3,4) affine", 3, 4, 2, 3, 4),
    C1A("layer_norm", "(4,6) no affine", layer_norm, 0, 0, 2, 4, 6),
    C1A("layer_norm", "(2,2,3) no affine", layer_norm, 0, 0, 3, 2, 2, 3),
    C1A("cross_entropy", "(4,5)", cross_entropy, 0, 0, 2, 4, 5),
    C1A("cross_entropy", "(4,5) mask [1,0,1,1]", cross_entropy, 1, 0, 2, 4, 5),
    C1A("cross_entropy", "(4,5) two rows ignored", cross_entropy, 2, 0, 2, 4, 5),
    C1A("cross_entropy", "(2,3,4)", cross_entropy, 3, 0, 3, 2, 3, 4),
    C1A("cross_entropy", "4x (2,3,4) mask, ignore 3", cross_entropy, 4, 0, 3, 2, 3, 4),
    C1A("cross_entropy", "sum: (4,5) two rows ignored", cross_entropy, 5, 0, 2, 4, 5),
    C1A("cross_entropy", "sum: 4x (2,3,4) mask, ignore 3", cross_entropy, 6, 0, 3, 2, 3, 4),
};
const int gc_cases_nn_ops_count = (int)(sizeof gc_cases_nn_ops / sizeof gc_cases_nn_ops[0]);
/* clang-format on */
