/* Mixed precision (tg_set_precision, autograd.h): under TG_PREC_BF16 the
 * products of affine, matmul and attention are bf16 products with float
 * sums, forward and backward, and nothing else changes.
 *
 *   - affine's output and its three gradients equal, bit for bit, the same
 *     sums done by hand with tg_k_gemm_bf16 (and the bias stays float);
 *   - the backward follows the precision of the forward, not the setting
 *     at backward time;
 *   - matmul (2-D, batched, 3-D @ 2-D), attention and a GPT's loss stay
 *     within bf16's tolerance of float, and a bf16 step gives bit-identical
 *     results at 1 and 2 threads (the attention op alone at 1, 2, 3 and 7);
 *   - the double build refuses the switch (it exists for exact gradchecks).
 * Runs in the float kernel tests and, for the refusal, in the double suite. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/half.h"
#include "tensor/kernels.h"         /* tg_k_gemm_bf16, tg_k_sum_to */
#include "tensor/tensor_internal.h" /* tg__parallel_fake_cpus */
#include "tgrad.h"

#define IS_FLOAT (sizeof(tg_real) == 4)

Test(mixed_precision, switch_returns_previous_and_parses) {
    cr_assert_eq(tg_get_precision(), TG_PREC_FP32, "fp32 is the default");
    cr_assert_eq(tg_precision_parse("fp32"), TG_PREC_FP32);
    cr_assert_eq(tg_precision_parse("bf16"), TG_PREC_BF16);
    cr_assert_eq(tg_precision_parse("fp16"), -1);
    cr_assert_eq(tg_precision_parse(NULL), -1);
    cr_assert_str_eq(tg_precision_name(TG_PREC_BF16), "bf16");
    tg_clear_error();
    cr_assert_eq(tg_set_precision((tg_precision)7), TG_PREC_FP32);
    cr_assert(strstr(tg_last_error(), "set_precision") != NULL);
    cr_assert_eq(tg_get_precision(), TG_PREC_FP32);
    tg_clear_error();
    tg_precision prev = tg_set_precision(TG_PREC_BF16);
    cr_assert_eq(prev, TG_PREC_FP32);
    if (IS_FLOAT) {
        cr_assert_eq(tg_get_precision(), TG_PREC_BF16);
        cr_assert_eq(tg_set_precision(prev), TG_PREC_BF16);
    } else { /* refused, with a message, the setting unchanged */
        cr_assert_eq(tg_get_precision(), TG_PREC_FP32);
        cr_assert(tg_last_error() && strstr(tg_last_error(), "double build"), "%s", tg_last_error());
    }
    cr_assert_eq(tg_get_precision(), TG_PREC_FP32);
}

static tg_tensor *param(int ndim, const int *shape, tg_rng *rng) {
    tg_tensor *t = tg_randn(ndim, shape, rng);
    cr_assert_not_null(t);
    tg_set_requires_grad(t, true);
    return t;
}

/* max |a - b| / max |b| over the elements */
static double rel_diff(const tg_tensor *a, const tg_tensor *b) {
    double d = 0, m = 0;
    for (int64_t i = 0; i < a->size; i++) {
        d = fmax(d, fabs((double)a->data[i] - (double)b->data[i]));
        m = fmax(m, fabs((double)b->data[i]));
    }
    return d / (m > 0 ? m : 1);
}

/* Affine under bf16 against tg_k_gemm_bf16 by hand: y = x W^T + b,
 * dx = dy W, dW = dy^T x, db = sum dy, each product with bf16 operands. */
Test(mixed_precision, affine_is_bf16_products_forward_and_backward) {
    if (!IS_FLOAT) cr_skip_test("float build only");
    enum { N = 37, IN = 70, OUT = 45 };
    tg_rng rng = tg_rng_new(3);
    tg_tensor *x = param(TG_SHAPE(N, IN), &rng), *w = param(TG_SHAPE(OUT, IN), &rng);
    tg_tensor *b = param(TG_SHAPE(OUT), &rng), *dy = tg_randn(TG_SHAPE(N, OUT), &rng);
    tg_precision prev = tg_set_precision(TG_PREC_BF16);
    tg_scope_begin();
    tg_tensor *y = tg_affine(x, w, b);
    cr_assert_not_null(y);
    /* the backward runs after the switch is back at fp32: it must still be bf16 */
    tg_set_precision(prev);
    cr_assert_eq(tg_backward_seed(y, dy), 0, "%s", tg_last_error());

    static tg_real want[N * OUT], gx[N * IN], gw[OUT * IN];
    /* the bias is added after the products (the GEMM's epilogue) */
    tg_k_gemm_bf16(false, true, N, OUT, IN, 1, x->data, IN, w->data, IN, 0, want, OUT);
    for (int r = 0; r < N; r++)
        for (int j = 0; j < OUT; j++) want[r * OUT + j] += b->data[j];
    tg_k_gemm_bf16(false, false, N, IN, OUT, 1, dy->data, OUT, w->data, IN, 0, gx, IN);
    tg_k_gemm_bf16(true, false, OUT, IN, N, 1, dy->data, OUT, x->data, IN, 0, gw, IN);
    cr_assert(memcmp(y->data, want, sizeof want) == 0, "forward differs from tg_k_gemm_bf16");
    cr_assert(memcmp(x->grad->data, gx, sizeof gx) == 0, "dx differs");
    cr_assert(memcmp(w->grad->data, gw, sizeof gw) == 0, "dW differs");
    for (int j = 0; j < OUT; j++) { /* db: a float sum of dy, no rounding of dy */
        double s = 0;
        for (int r = 0; r < N; r++) s += dy->data[r * OUT + j];
        cr_assert(fabs((double)b->grad->data[j] - s) < 1e-4, "db[%d]", j);
    }
    /* and fp32 gives other (closer to exact) values, within bf16 tolerance */
    tg_tensor *y32 = tg_affine(x, w, b);
    cr_assert(memcmp(y->data, y32->data, sizeof want) != 0, "bf16 changed nothing");
    cr_assert(rel_diff(y, y32) < 0.02, "bf16 forward off by %g", rel_diff(y, y32));
    tg_scope_end();
    tg_free(x), tg_free(w), tg_free(b), tg_free(dy);
}

/* The same at gpt-small's scale of rows (the weight gradient's K in
 * several K blocks, db's sums in several pieces), through affine_add (y =
 * r + x W^T + b), with float subnormals in dy (zeros to the products), at
 * 1 and 2 threads: dy rounded once for both products (affine_grads) gives
 * the bits of each product rounding it as it packs, and db is
 * tg_k_sum_to's. */
Test(mixed_precision, affine_add_backward_is_bf16_products_at_scale) {
    if (!IS_FLOAT) cr_skip_test("float build only");
    enum { N = 1100, IN = 40, OUT = 70 };
    tg_rng rng = tg_rng_new(5);
    tg_tensor *x = param(TG_SHAPE(N, IN), &rng), *w = param(TG_SHAPE(OUT, IN), &rng);
    tg_tensor *b = param(TG_SHAPE(OUT), &rng), *r = param(TG_SHAPE(N, OUT), &rng);
    tg_tensor *dy = tg_randn(TG_SHAPE(N, OUT), &rng);
    for (int i = 0; i < N * OUT; i += 11) dy->data[i] *= 0x1p-128f; /* subnormal */
    static tg_real gx[N * IN], gw[OUT * IN], gb[OUT];
    tg_k_gemm_bf16(false, false, N, IN, OUT, 1, dy->data, OUT, w->data, IN, 0, gx, IN);
    tg_k_gemm_bf16(true, false, OUT, IN, N, 1, dy->data, OUT, x->data, IN, 0, gw, IN);
    tg_tensor bt = {.magic = TG_MAGIC, .ndim = 1, .shape = {OUT}, .size = OUT, .data = gb};
    tg_k_sum_to(dy, &bt, false);
    int saved = tg_get_num_threads();
    for (int nt = 1; nt <= 2; nt++) {
        tg_set_num_threads(nt);
        tg_precision prev = tg_set_precision(TG_PREC_BF16);
        tg_scope_begin();
        tg_tensor *y = tg_affine_add(r, x, w, b);
        cr_assert_not_null(y, "%s", tg_last_error());
        cr_assert_eq(tg_backward_seed(y, dy), 0, "%s", tg_last_error());
        cr_assert(memcmp(x->grad->data, gx, sizeof gx) == 0, "dx differs at %d threads", nt);
        cr_assert(memcmp(w->grad->data, gw, sizeof gw) == 0, "dW differs at %d threads", nt);
        cr_assert(memcmp(b->grad->data, gb, sizeof gb) == 0, "db differs at %d threads", nt);
        tg_scope_end();
        tg_set_precision(prev);
        tg_zero_grad(x), tg_zero_grad(w), tg_zero_grad(b), tg_zero_grad(r);
    }
    tg_set_num_threads(saved);
    tg_free(x), tg_free(w), tg_free(b), tg_free(r), tg_free(dy);
}

/* loss = sum(f(..) * seed) so every output element has its own gradient. */
static tg_tensor *weighted(tg_tensor *y, tg_tensor *seed) { return tg_sum_all(tg_mul(y, seed)); }

/* Forward and gradients of fn in fp32 and bf16: close within bf16 tolerance. */
typedef tg_tensor *(*build_fn)(tg_tensor **in);

static void compare_precisions(build_fn fn, tg_tensor **in, int n_in, double tol) {
    tg_tensor *out[2] = {NULL, NULL}, *grads[2][4] = {{NULL}};
    for (int p = 0; p < 2; p++) {
        tg_precision prev = tg_set_precision(p ? TG_PREC_BF16 : TG_PREC_FP32);
        for (int i = 0; i < n_in; i++) tg_zero_grad(in[i]);
        tg_scope_begin();
        tg_tensor *y = fn(in);
        cr_assert_not_null(y, "%s", tg_last_error());
        tg_rng rng = tg_rng_new(11);
        tg_tensor *seed = tg_randn(y->ndim, y->shape, &rng);
        cr_assert_eq(tg_backward(weighted(y, seed)), 0, "%s", tg_last_error());
        out[p] = tg_empty_persistent(y->ndim, y->shape);
        memcpy(out[p]->data, y->data, sizeof(tg_real) * (size_t)y->size);
        tg_scope_end();
        for (int i = 0; i < n_in; i++) grads[p][i] = tg_clone(in[i]->grad); /* outside a scope: persistent */
        tg_set_precision(prev);
    }
    cr_assert(rel_diff(out[1], out[0]) < tol, "forward: bf16 off by %g", rel_diff(out[1], out[0]));
    cr_assert(rel_diff(out[1], out[0]) > 0, "forward: bf16 identical to fp32 (not in effect?)");
    for (int i = 0; i < n_in; i++) {
        cr_assert(rel_diff(grads[1][i], grads[0][i]) < tol, "grad %d: bf16 off by %g", i,
                  rel_diff(grads[1][i], grads[0][i]));
        tg_free(grads[0][i]), tg_free(grads[1][i]);
    }
    tg_free(out[0]), tg_free(out[1]);
}

static tg_tensor *mm2(tg_tensor **in) { return tg_matmul(in[0], in[1]); }
static tg_tensor *mm3t(tg_tensor **in) { return tg_matmul_t(in[2], in[3], false, true); }
static tg_tensor *mm32(tg_tensor **in) { return tg_matmul(in[2], in[1]); }
static tg_tensor *attn(tg_tensor **in) {
    tg_mask causal = {.causal = true};
    return tg_attention(in[0], in[1], in[2], causal, 0, NULL);
}

Test(mixed_precision, matmul_and_attention_close_to_fp32) {
    if (!IS_FLOAT) cr_skip_test("float build only");
    tg_rng rng = tg_rng_new(5);
    tg_tensor *in[4] = {param(TG_SHAPE(33, 40), &rng), param(TG_SHAPE(40, 29), &rng), param(TG_SHAPE(3, 17, 40), &rng),
                        param(TG_SHAPE(3, 21, 40), &rng)};
    compare_precisions(mm2, in, 2, 0.02);
    compare_precisions(mm3t, in, 4, 0.02);
    compare_precisions(mm32, in, 3, 0.02);
    for (int i = 0; i < 4; i++) tg_free(in[i]);
    tg_tensor *qkv[3] = {param(TG_SHAPE(4, 70, 16), &rng), param(TG_SHAPE(4, 70, 16), &rng),
                         param(TG_SHAPE(4, 70, 16), &rng)};
    compare_precisions(attn, qkv, 3, 0.03);
    for (int i = 0; i < 3; i++) tg_free(qkv[i]);
}

/* A GPT's loss and gradients under bf16: close to fp32, and the same bits
 * at 1 and 2 threads. */
static double gpt_loss(tg_decoder *m, tg_precision prec, int threads, double *grad_sum) {
    static const int tok[2 * 16] = {1, 4, 0, 9, 10, 3, 3, 7, 2, 5,  8, 8, 1, 0, 6, 2,
                                    5, 5, 9, 1, 0,  2, 4, 6, 8, 10, 1, 3, 5, 7, 9, 0};
    static const int tgt[2 * 16] = {4, 0, 9, 10, 3, 3, 7, 2, 5,  8, 8, 1, 0, 6, 2, 5,
                                    5, 9, 1, 0,  2, 4, 6, 8, 10, 1, 3, 5, 7, 9, 0, 1};
    int saved = tg_get_num_threads();
    tg_set_num_threads(threads);
    tg_precision prev = tg_set_precision(prec);
    tg_params p;
    tg_params_init(&p);
    cr_assert_eq(tg_decoder_params(m, &p, NULL), 0);
    for (int i = 0; i < p.n; i++) tg_zero_grad(p.items[i].t);
    tg_scope_begin();
    tg_tensor *loss = tg_decoder_loss(m, tok, tgt, 2, 16);
    cr_assert_not_null(loss, "%s", tg_last_error());
    cr_assert_eq(tg_backward(loss), 0, "%s", tg_last_error());
    double l = loss->data[0];
    tg_scope_end();
    *grad_sum = 0;
    for (int i = 0; i < p.n; i++)
        for (int64_t k = 0; k < p.items[i].t->size; k++) *grad_sum += fabs((double)p.items[i].t->grad->data[k]);
    tg_params_free(&p);
    tg_set_precision(prev);
    tg_set_num_threads(saved);
    return l;
}

Test(mixed_precision, gpt_loss_close_to_fp32_and_thread_independent) {
    if (!IS_FLOAT) cr_skip_test("float build only");
    tg_decoder_config cfg = tg_decoder_config_default(11, 16, 2, 2, 32);
    tg_rng rng = tg_rng_new(9);
    tg_decoder *m = tg_decoder_new(&cfg, &rng);
    cr_assert_not_null(m);
    double g32, g16a, g16b;
    double l32 = gpt_loss(m, TG_PREC_FP32, 1, &g32);
    double l16a = gpt_loss(m, TG_PREC_BF16, 1, &g16a), l16b = gpt_loss(m, TG_PREC_BF16, 2, &g16b);
    cr_assert(fabs(l16a - l32) < 0.01 && l16a != l32, "loss fp32 %.7f, bf16 %.7f", l32, l16a);
    cr_assert(fabs(g16a - g32) < 0.02 * g32, "sum |grad| fp32 %g, bf16 %g", g32, g16a);
    cr_assert(memcmp(&l16a, &l16b, sizeof l16a) == 0 && memcmp(&g16a, &g16b, sizeof g16a) == 0,
              "bf16: 1 and 2 threads differ (%.9g vs %.9g)", l16a, l16b);
    tg_decoder_free(m);
}

/* The attention op under bf16 at 1, 2, 3 and 7 threads: the output and the
 * gradient bit for bit, with each bf16 engine this machine has (AMX: the
 * tiles' products by tg_k_gemm_bf16; the others: operands rounded once,
 * float sums), and close to fp32. The fused projection of 4 entries (2 x 2
 * heads), T 130 (a partial third query block), causal with lengths (one 0:
 * a uniform row): whole-entry backward tasks at 1 and 2 threads, the two
 * passes at 3 and 7. */
static void attention_run(tg_tensor *qkv, tg_precision prec, int threads, tg_real *dst, size_t n_out) {
    static const int lens[4] = {130, 61, 0, 77}; /* per entry (batch, head) */
    tg_precision prev = tg_set_precision(prec);
    cr_assert_eq(tg_set_num_threads(threads), threads);
    tg_zero_grad(qkv);
    tg_scope_begin();
    tg_tensor *y = tg_attention_qkv(qkv, 2, (tg_mask){.lens = lens, .lens_ndim = 1, .causal = true}, 0, NULL, NULL);
    cr_assert_not_null(y, "%s", tg_last_error());
    cr_assert_eq(tg_backward(tg_sum_all(tg_mul(y, y))), 0, "%s", tg_last_error());
    memcpy(dst, y->data, n_out);
    memcpy((char *)dst + n_out, qkv->grad->data, sizeof(tg_real) * (size_t)qkv->grad->size);
    tg_scope_end();
    tg_set_precision(prev);
}

Test(mixed_precision, attention_bf16_same_bits_at_any_thread_count) {
    if (!IS_FLOAT) cr_skip_test("float build only");
    static const int threads[] = {1, 2, 3, 7};
    static const char *const engines[] = {"amx", "avx512_bf16", "fp32"};
    int old_cpus = tg__parallel_fake_cpus(8), saved = tg_get_num_threads();
    tg_rng rng = tg_rng_new(12);
    tg_tensor *qkv = param(TG_SHAPE(2, 130, 3 * 2 * 32), &rng);
    size_t n_out = sizeof(tg_real) * 2 * 130 * 2 * 32, n = n_out / sizeof(tg_real) + (size_t)qkv->size;
    tg_real *f32 = malloc(sizeof(tg_real) * n), *ref = malloc(sizeof(tg_real) * n), *got = malloc(sizeof(tg_real) * n);
    cr_assert(f32 && ref && got);
    attention_run(qkv, TG_PREC_FP32, 1, f32, n_out);
    for (int e = 0; e < 3; e++) {
        tg__bf16_engine_force(engines[e]);
        if (strcmp(tg_bf16_engine().engine, engines[e]) != 0) { /* cr_log_info: a warning fails the run */
            cr_log_info("bf16 engine %s: not on this machine; skipped", engines[e]);
            continue;
        }
        for (int t = 0; t < 4; t++) {
            attention_run(qkv, TG_PREC_BF16, threads[t], t == 0 ? ref : got, n_out);
            if (t == 0) continue;
            cr_expect(memcmp(got, ref, n_out) == 0, "%s: output at %d threads differs from 1 thread's", engines[e],
                      threads[t]);
            cr_expect(
                memcmp(got + n_out / sizeof(tg_real), ref + n_out / sizeof(tg_real), sizeof(tg_real) * n - n_out) == 0,
                "%s: gradient at %d threads differs from 1 thread's", engines[e], threads[t]);
        }
        double worst = 0, scale = 0;
        for (size_t i = 0; i < n; i++) {
            double dd = fabs((double)ref[i] - (double)f32[i]);
            worst = dd > worst ? dd : worst;
            scale = fabs((double)f32[i]) > scale ? fabs((double)f32[i]) : scale;
        }
        cr_expect(worst < 0.03 * scale && worst > 0, "%s: bf16 off fp32 by %g (largest |value| %g)", engines[e], worst,
                  scale);
    }
    tg__bf16_engine_force(NULL);
    free(f32), free(ref), free(got);
    tg_free(qkv);
    tg_set_num_threads(saved);
    tg__parallel_fake_cpus(old_cpus);
}
