/* Tensors stored as bf16 (tensor.h, tg_dtype; issue 31): tg_to_bf16 rounds
 * as torch's c10::BFloat16 does (to nearest even, subnormals kept, NaN
 * stays NaN), tg_to_real widens exactly, the gradient passes through both
 * unchanged, a reshape of a bf16 tensor is a bf16 view, and an op that
 * reads tg_real tensors refuses a bf16 one with its name in the error.
 * The gradient checks of the two casts are in cases_ops.c. */
#include "test_util.h"
#include "autograd/op.h"
#include "tensor/half.h"
#include "tensor/kernels.h"
#include "tensor/simd.h"
#include "tensor/tensor_internal.h" /* tg__isa_cap */

#include <math.h>
#include <stdio.h>
#include <string.h>

/* bits of to_bf16(v), one value at a time */
static uint16_t bits_of(tg_real v) {
    tg_tensor *x = tg_full(TG_SHAPE(1), v), *y = tg_to_bf16(x);
    cr_assert(y != NULL, "%s", tg_last_error());
    cr_assert(y->dtype == TG_DTYPE_BF16 && y->data == NULL && y->bf16 != NULL);
    return y->bf16[0];
}

Test(bf16_storage, rounds_to_nearest_even_and_keeps_subnormals_and_nan) {
    tg_scope_begin();
    cr_expect_eq(bits_of(1.0), 0x3F80);
    cr_expect_eq(bits_of(-2.0), 0xC000);
    cr_expect_eq(bits_of(1.0 + 1.0 / 256), 0x3F80, "a tie with an even kept part stays");
    cr_expect_eq(bits_of(1.0 + 3.0 / 256), 0x3F82, "a tie with an odd kept part rounds up");
    cr_expect_eq(bits_of(1.0 + 1.0 / 256 + 1.0 / 4096), 0x3F81, "above the tie rounds up");
    cr_expect_eq(bits_of(-0.0), 0x8000);
    cr_expect_eq(bits_of((tg_real)INFINITY), 0x7F80);
    uint16_t sub = bits_of((tg_real)1e-40); /* a float subnormal: kept, not flushed */
    cr_expect(sub != 0 && (sub & 0x7F80) == 0, "subnormal 1e-40 gave %04x", sub);
    uint16_t nan = bits_of((tg_real)NAN);
    cr_expect((nan & 0x7F80) == 0x7F80 && (nan & 0x7F) != 0, "NaN gave %04x", nan);
    tg_scope_end();
}

/* tg_k_to_bf16 (vcvtneps2bf16 with a fix-up of subnormal lanes where the
 * CPU has AVX-512 BF16, a loop elsewhere) gives tg__bf16_from_float's bits
 * lane by lane: subnormals of both signs among normal values, NaNs with
 * payloads (quiet and signalling), infinities, ties, overflow to infinity,
 * at every length up to 40 (the masked tails) and every ISA level here.
 * (All 2^32 floats were checked once the same way.) */
Test(bf16_storage, to_bf16_kernel_is_the_formula_lane_by_lane) {
    static const uint32_t special[] = {0x00000001, 0x80000001, 0x007FFFFF, 0x807F8000, 0x00008000, 0x00018000,
                                       0x7F800001, 0xFF812345, 0x7FC00000, 0x7FA5A5A5, 0x7F800000, 0xFF800000,
                                       0x7F7FFFFF, 0x3F808000, 0x3F818000, 0x00800000, 0x80000000, 0x00000000};
    const int ns = (int)(sizeof special / sizeof special[0]);
    tg_real x[40];
    uint16_t h[41];
    uint32_t r = 12345;
    for (int cap = TG_ISA_PORTABLE; cap <= TG_ISA_AMX; cap++) {
        int old = tg__isa_cap(cap);
        for (int n = 1; n <= 40; n++)
            for (int rep = 0; rep < 8; rep++) {
                for (int i = 0; i < n; i++) {
                    r = r * 1103515245u + 12345u;
                    uint32_t u = (r >> 8) % 3 == 0 ? special[(r >> 12) % (unsigned)ns] : r;
                    float f;
                    memcpy(&f, &u, sizeof f);
                    x[i] = (tg_real)f;
                }
                h[n] = 0xBEEF;
                tg_k_to_bf16(x, h, n);
                for (int i = 0; i < n; i++)
                    cr_assert_eq(h[i], tg__bf16_from_float((float)x[i]), "cap %d, n %d, lane %d: %#x from %a", cap, n,
                                 i, h[i], (double)x[i]);
                cr_assert_eq(h[n], 0xBEEF, "cap %d, n %d: a lane past n written", cap, n);
            }
        tg__isa_cap(old);
    }
}

Test(bf16_storage, widens_exactly_and_keeps_shape) {
    tg_rng rng = tg_rng_new(5);
    tg_tensor *x = tg_normal(TG_SHAPE(2, 3, 4), 0, 3, &rng);
    tg_scope_begin();
    tg_tensor *b = tg_to_bf16(x), *r = tg_to_real(b);
    cr_assert(r != NULL, "%s", tg_last_error());
    cr_expect(r->dtype == TG_DTYPE_REAL && r->ndim == 3 && r->shape[2] == 4 && r->size == 24);
    for (int64_t i = 0; i < x->size; i++)
        cr_expect_eq(r->data[i], (tg_real)tg__bf16_round((float)x->data[i]), "element %lld", (long long)i);
    cr_expect_eq(tg_item(b), r->data[0], "tg_item reads a bf16 tensor");
    cr_expect_eq(tg_to_bf16(b), b, "a bf16 tensor cast to bf16 is itself");
    cr_expect_eq(tg_to_real(x), x, "a real tensor cast to real is itself");
    tg_tensor *v = tg_reshape(b, TG_SHAPE(6, 4));
    cr_assert(v != NULL, "%s", tg_last_error());
    cr_expect(v->dtype == TG_DTYPE_BF16 && v->bf16 == b->bf16, "a reshape of bf16 is a bf16 view");
    tg_tensor *c = tg_clone(b);
    cr_expect(c && c->dtype == TG_DTYPE_BF16 && c->bf16 != b->bf16 && !memcmp(c->bf16, b->bf16, 24 * 2));
    tg_scope_end();
    tg_free(x);
}

Test(bf16_storage, gradient_passes_through_both_casts) {
    tg_rng rng = tg_rng_new(9);
    tg_tensor *x = tg_normal(TG_SHAPE(3, 5), 0, 1, &rng), *w = tg_normal(TG_SHAPE(3, 5), 0, 1, &rng);
    tg_set_requires_grad(x, true);
    tg_scope_begin();
    tg_tensor *b = tg_to_bf16(x);
    cr_expect(b && b->requires_grad);
    tg_tensor *loss = tg_sum_all(tg_mul(tg_to_real(tg_reshape(b, TG_SHAPE(15))), tg_reshape(w, TG_SHAPE(15))));
    cr_assert(loss != NULL, "%s", tg_last_error());
    cr_assert_eq(tg_backward(loss), 0, "%s", tg_last_error());
    cr_assert(x->grad != NULL && x->grad->dtype == TG_DTYPE_REAL);
    for (int64_t i = 0; i < x->size; i++) cr_expect_eq(x->grad->data[i], w->data[i], "element %lld", (long long)i);
    tg_scope_end();
    tg_free(x);
    tg_free(w);
}

Test(bf16_storage, ops_that_read_real_refuse_bf16_by_name) {
    tg_tensor *x = tg_ones(TG_SHAPE(2, 3));
    tg_scope_begin();
    tg_tensor *b = tg_to_bf16(x);
    cr_expect_null(tg_add(b, x));
    cr_expect(strstr(tg_last_error(), "add: input 0 (2,3) is bf16"), "%s", tg_last_error());
    cr_expect_null(tg_softmax(b));
    cr_expect(strstr(tg_last_error(), "softmax") && strstr(tg_last_error(), "bf16"), "%s", tg_last_error());
    cr_expect_null(tg_matmul(x, b));
    cr_expect(strstr(tg_last_error(), "input 1"), "%s", tg_last_error());
    tg_rng rng = tg_rng_new(1);
    tg_fill_normal(b, 0, 1, &rng);
    cr_expect(strstr(tg_last_error(), "fill_normal: a bf16 tensor"), "%s", tg_last_error());
    char buf[256] = {0};
    FILE *f = fmemopen(buf, sizeof buf, "w");
    tg_fprint(f, b);
    fclose(f);
    cr_expect(strstr(buf, "1.0000") && strstr(buf, "dtype=bfloat16"), "%s", buf);
    tg_scope_end();
    tg_free(x);
}

/* ---- ops that write or read bf16 activations ---------------------------------
 * Each checked against the same op on float tensors: a bf16 result is
 * tg_to_bf16 of the float result, bit for bit; a bf16 input gives the
 * results of its widened values, bit for bit; gradients likewise, except
 * affine_gelu's, whose kept pre-activation is rounded. */

/* Persistent copies of the gradients of ts (the scope ends before they are
 * compared), then cleared for the next run. */
static void take_grads(tg_tensor *const *ts, int n, tg_tensor **out) {
    grads_of(ts, n, out);
    for (int i = 0; i < n; i++) tg_zero_grad(ts[i]);
}

static double max_abs(const tg_tensor *t) {
    double m = 0;
    for (int64_t i = 0; i < t->size; i++) m = fmax(m, fabs((double)t->data[i]));
    return m;
}

static bool same_bits(const tg_tensor *a, const tg_tensor *b) {
    return a && b && a->size == b->size && !memcmp(a->data, b->data, sizeof(tg_real) * (size_t)a->size);
}

/* op(x, w, b, to) for to = bf16 against tg_to_bf16 of to = real; and with
 * x itself bf16 against x widened; at both precisions. kind: 0 affine,
 * 1 affine_gelu_tanh, 2 layer_norm (w, b of shape [in]). */
static tg_tensor *run_op(int kind, tg_tensor *x, tg_tensor *w, tg_tensor *b, tg_dtype to) {
    if (kind == 0) return tg_affine_to(x, w, b, to);
    if (kind == 1) return tg_affine_gelu_to(x, w, b, true, to);
    return tg_layer_norm_to(x, w, b, (tg_real)1e-5, to);
}

static void check_op(int kind, tg_precision prec, int N, int in, int out) {
    if (kind == 2) out = in;
    tg_tensor *x = grad_leaf(TG_SHAPE(N, in), 1),
              *w = kind == 2 ? grad_leaf(TG_SHAPE(in), 2) : grad_leaf(TG_SHAPE(out, in), 2);
    tg_rng rng = tg_rng_new(4);
    tg_tensor *b = grad_leaf(TG_SHAPE(out), 3), *c = tg_normal(TG_SHAPE(N, out), 0, 1, &rng);
    tg_tensor *ps[3] = {x, w, b}, *g_ref[3], *g_bf[3], *g_in[3], *g_wid[3];
    tg_precision old = tg_set_precision(prec);
    const char *what = kind == 0 ? "affine" : kind == 1 ? "affine_gelu_tanh" : "layer_norm";
    /* 1. a bf16 result is the float result rounded; the gradients are the same (but affine_gelu's) */
    tg_scope_begin();
    tg_tensor *yr = run_op(kind, x, w, b, TG_DTYPE_REAL), *want = tg_to_real(tg_to_bf16(yr));
    cr_assert(want != NULL, "%s", tg_last_error());
    cr_assert_eq(tg_backward(tg_sum_all(tg_mul(yr, c))), 0, "%s", tg_last_error());
    take_grads(ps, 3, g_ref);
    tg_tensor *yb = run_op(kind, x, w, b, TG_DTYPE_BF16);
    cr_assert(yb != NULL && yb->dtype == TG_DTYPE_BF16, "%s: %s", what, tg_last_error());
    cr_expect(same_bits(tg_to_real(yb), want), "%s: the bf16 result is not the float one rounded", what);
    cr_assert_eq(tg_backward(tg_sum_all(tg_mul(tg_to_real(yb), c))), 0, "%s", tg_last_error());
    take_grads(ps, 3, g_bf);
    for (int i = 0; i < 3; i++) {
        if (kind == 1) /* gelu' of the rounded pre-activation: bf16's 2^-8 relative, summed */
            cr_expect(max_diff(g_bf[i], g_ref[i]) <= 0.02 * max_abs(g_ref[i]), "%s: gradient %d off by %g of %g", what,
                      i, max_diff(g_bf[i], g_ref[i]), max_abs(g_ref[i]));
        else
            cr_expect(same_bits(g_bf[i], g_ref[i]), "%s: gradient %d differs with a bf16 result", what, i);
    }
    tg_scope_end();
    /* 2. a bf16 input gives the results and gradients of its widened values (affine ops only) */
    if (kind != 2) {
        tg_scope_begin();
        tg_tensor *y1 = run_op(kind, tg_to_bf16(x), w, b, TG_DTYPE_REAL);
        cr_assert(y1 != NULL, "%s: %s", what, tg_last_error());
        cr_assert_eq(tg_backward(tg_sum_all(tg_mul(y1, c))), 0, "%s", tg_last_error());
        take_grads(ps, 3, g_in);
        tg_tensor *y2 = run_op(kind, tg_to_real(tg_to_bf16(x)), w, b, TG_DTYPE_REAL);
        cr_expect(same_bits(y1, y2), "%s: a bf16 input is not its widened values", what);
        cr_assert_eq(tg_backward(tg_sum_all(tg_mul(y2, c))), 0, "%s", tg_last_error());
        take_grads(ps, 3, g_wid);
        for (int i = 0; i < 3; i++)
            cr_expect(same_bits(g_in[i], g_wid[i]), "%s: gradient %d differs with a bf16 input", what, i);
        for (int i = 0; i < 3; i++) tg_free(g_in[i]), tg_free(g_wid[i]);
        tg_scope_end();
    }
    tg_set_precision(old);
    for (int i = 0; i < 3; i++) tg_free(g_ref[i]), tg_free(g_bf[i]), tg_free(ps[i]);
    tg_free(c);
}

/* Small shapes, then ones whose bf16 result is computed in two chunks of
 * float rows and a tail (op.h, tg__chunk_rows: 512 rows of 1024 values). */
static void check_op_sizes(int kind) {
    for (int p = 0; p < 2; p++) {
        tg_precision prec = p ? TG_PREC_BF16 : TG_PREC_FP32;
        check_op(kind, prec, 37, 48, 40);
        check_op(kind, prec, 1100, kind == 2 ? 1024 : 24, 1024);
        if (kind == 2) /* rows wider than the bf16 forward's stack row (kernels_norm.c, NORM_COLS) */
            check_op(kind, prec, 7, 1500, 1500);
    }
}
Test(bf16_storage, affine_reads_and_writes_bf16) { check_op_sizes(0); }
Test(bf16_storage, affine_gelu_reads_and_writes_bf16) { check_op_sizes(1); }
Test(bf16_storage, layer_norm_writes_bf16) { check_op_sizes(2); }

/* ---- the decoder under bf16 products --------------------------------------------
 * It keeps its normalised rows, qkv, the attention's output, c_fc's GELU and
 * pre-activation in bf16 (decoder.c): a forward keeps well under the bytes
 * of the float one, its loss is the float loss to bf16's rounding, and a
 * RoPE decoder (q, k turned in float) still trains. The double build
 * refuses bf16 products: nothing to check there. */
static double decoder_loss(tg_decoder *m, tg_precision prec, size_t *kept) {
    enum { B = 2, T = 64 };
    int tok[B * T], tgt[B * T];
    for (int i = 0; i < B * T; i++) tok[i] = (i * 7) % 13, tgt[i] = (i * 5 + 3) % 13;
    tg_precision old = tg_set_precision(prec);
    tg_scope_begin();
    /* a first forward leaves its float scratch on the scope's free lists;
     * the second takes it from there: its growth is what a forward keeps */
    tg_tensor *loss = tg_decoder_loss(m, tok, tgt, B, T);
    size_t before = tg_memory().arena_in_use;
    loss = tg_decoder_loss(m, tok, tgt, B, T);
    cr_assert(loss != NULL, "%s", tg_last_error());
    *kept = tg_memory().arena_in_use - before;
    cr_assert_eq(tg_backward(loss), 0, "%s", tg_last_error());
    double v = (double)tg_item(loss);
    tg_scope_end();
    tg_set_precision(old);
    return v;
}

Test(bf16_storage, decoder_keeps_its_activations_in_bf16) {
    if (tg_set_precision(TG_PREC_BF16) != TG_PREC_FP32 || tg_get_precision() != TG_PREC_BF16) {
        cr_log_info("bf16 products are refused in this build: nothing to check");
        tg_set_precision(TG_PREC_FP32);
        return;
    }
    tg_set_precision(TG_PREC_FP32);
    for (int rope = 0; rope < 2; rope++) {
        tg_decoder_config cfg = tg_decoder_config_default(13, 64, 2, 4, 64);
        if (rope) cfg.pos = TG_PE_ROPE;
        tg_rng rng = tg_rng_new(7);
        tg_decoder *m = tg_decoder_new(&cfg, &rng);
        TG_REQUIRE(m);
        size_t kept32, kept16;
        double l32 = decoder_loss(m, TG_PREC_FP32, &kept32), l16 = decoder_loss(m, TG_PREC_BF16, &kept16);
        cr_expect(fabs(l16 - l32) < 0.02 * fabs(l32), "rope %d: bf16 loss %g, float %g", rope, l16, l32);
        if (!rope) /* qkv in float under RoPE: less kept in bf16 there */
            cr_expect(kept16 < 0.75 * kept32, "a bf16 forward keeps %zu bytes, the float one %zu", kept16, kept32);
        tg_decoder_free(m);
    }
}
