/* GELU as the GEMM's epilogue (tg_k_gemm_ep, tg_k_gemm_bf16_ep) and the op
 * built on it (tg_affine_gelu, tg_linear_gelu_forward):
 *   - the kernels: C is tg_k_gemm's (tg_k_gemm_bf16's) and Y is tg_k_unary's
 *     f(C), byte for byte: all transposes, alpha and beta, beta 0 over NaN,
 *     K = 0, alpha = 0, padded ldc (Y's padding untouched), Y == C, the
 *     direct and the packed paths (several K blocks, N past one panel), at
 *     every ISA level this CPU has and at 1 and 2 threads;
 *   - the op: its output and the gradients of x, w and b equal those of
 *     tg_gelu(tg_affine(..)) (tg_gelu_tanh for the tanh form) byte for
 *     byte, on the direct path and on the packed one with three K blocks, at
 *     1 and 2 threads and every ISA level, 2-D and 3-D, with and without a
 *     bias and a graph; under bf16 against the bf16 pair;
 *   - errors name the op and the shapes; a NULL input keeps the first
 *     message.
 * Compiled into both test binaries: the double suite and the float kernel
 * tests (the AVX-512 and bf16 paths exist only in float). The gradient
 * checks are tests/cases_nn_ops.c's. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_test_util.h"
#include "tensor/kernels.h"
#include "tensor/simd.h"
#include "tensor/tensor_internal.h" /* tg__isa_cap */
#include "test_util.h"

static uint64_t lcg_state = 2323; /* gemm_test_util.h */

#define IS_FLOAT (sizeof(tg_real) == 4)

typedef void (*gemm_ep_fn)(bool ta, bool tb, int M, int N, int K, tg_real alpha, const tg_real *A, int lda,
                           const tg_real *B, int ldb, tg_real beta, tg_real *C, int ldc, const tg_gemm_epilogue *ep);

/* ---- the kernels ------------------------------------------------------------ */

/* One product by plain and by with_ep (act, Y beside C or Y == C): C and Y
 * as described at the top. */
static void check_kernel(gemm_fn plain, gemm_ep_fn with_ep, tg_unary_kind act, bool ta, bool tb, int M, int N, int K,
                         tg_real alpha, tg_real beta, int pad, bool nan_c, bool in_place) {
    int arows = ta ? K : M, acols = ta ? M : K, brows = tb ? N : K, bcols = tb ? K : N;
    int lda = acols + pad > 0 ? acols + pad : 1, ldb = bcols + pad > 0 ? bcols + pad : 1, ldc = N + pad;
    size_t nc = (size_t)M * ldc;
    tg_real *A = lcg_buf(&lcg_state, (size_t)arows * lda), *B = lcg_buf(&lcg_state, (size_t)brows * ldb);
    tg_real *C1 = lcg_buf(&lcg_state, nc), *C2 = malloc(nc * sizeof *C2), *Y = malloc(nc * sizeof *Y);
    tg_real *want = malloc(nc * sizeof *want);
    cr_assert(C2 && Y && want);
    for (size_t i = 0; i < nc; i++) {
        if (nan_c && i % (size_t)ldc < (size_t)N) C1[i] = NAN;
        Y[i] = 7; /* stays where Y is not written: its padding */
    }
    memcpy(C2, C1, nc * sizeof *C1);
    plain(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C1, ldc);
    tg_gemm_epilogue ep = {.act = act, .Y = in_place ? C2 : Y};
    with_ep(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C2, ldc, &ep);
    memcpy(want, in_place ? C1 : Y, nc * sizeof *want); /* the padding as it must stay */
    for (int i = 0; i < M; i++) tg_k_unary(act, 0, C1 + (size_t)i * ldc, want + (size_t)i * ldc, N);
    const char *form = act == TG_UNARY_GELU_TANH ? "gelu_tanh" : act == TG_UNARY_GELU ? "gelu" : "other";
    if (!in_place)
        cr_assert(memcmp(C1, C2, nc * sizeof *C1) == 0, "%s ta=%d tb=%d %dx%dx%d alpha %g beta %g: C differs", form, ta,
                  tb, M, N, K, (double)alpha, (double)beta);
    const tg_real *y = in_place ? C2 : Y;
    for (size_t i = 0; i < nc; i++)
        cr_assert(memcmp(&y[i], &want[i], sizeof *y) == 0,
                  "%s%s ta=%d tb=%d %dx%dx%d alpha %g beta %g pad %d: Y(%d,%d) = %.9g, want %.9g", form,
                  in_place ? " in place" : "", ta, tb, M, N, K, (double)alpha, (double)beta, pad, (int)(i / ldc),
                  (int)(i % ldc), (double)y[i], (double)want[i]);
    free(A), free(B), free(C1), free(C2), free(Y), free(want);
}

/* Direct and packed products: one K block and several (KC 256 in float and
 * double, 1024 in bf16), edge tiles, N past one panel of B. */
static const int kernel_shapes[][3] = {
    {1, 1, 1},      {5, 7, 3},     {16, 16, 16},  {37, 33, 31},  {6, 32, 64},   {9, 8, 1},     {255, 257, 129},
    {130, 70, 300}, {13, 40, 600}, {600, 3, 257}, {4, 4200, 60}, {7, 33, 1025}, {5, 40, 2100},
};
#define N_KERNEL_SHAPES (int)(sizeof kernel_shapes / sizeof kernel_shapes[0])

static void kernel_cases(gemm_fn plain, gemm_ep_fn with_ep) {
    for (int t = 0; t < 4; t++)
        for (int i = 0; i < N_KERNEL_SHAPES; i++) {
            const int *s = kernel_shapes[i];
            check_kernel(plain, with_ep, TG_UNARY_GELU_TANH, t & 1, t & 2, s[0], s[1], s[2], 1, 0, 0, false, false);
            check_kernel(plain, with_ep, TG_UNARY_GELU, t & 1, t & 2, s[0], s[1], s[2], 1, 1, 2, false, false);
            check_kernel(plain, with_ep, TG_UNARY_GELU_TANH, t & 1, t & 2, s[0], s[1], s[2], (tg_real)-0.5, 2, 3, false,
                         true);
            check_kernel(plain, with_ep, TG_UNARY_RELU, t & 1, t & 2, s[0], s[1], s[2], 1, 0, 1, true, false);
        }
}

/* Every ISA level up to the CPU's (a cap above it runs the CPU's widest
 * again), at 1 and 2 threads. */
static void kernels_everywhere(gemm_fn plain, gemm_ep_fn with_ep) {
    int saved = tg_get_num_threads();
    for (int cap = TG_ISA_PORTABLE; cap <= TG_ISA_AMX; cap++)
        for (int nt = 1; nt <= 2; nt++) {
            int old = tg__isa_cap(cap);
            tg_set_num_threads(nt);
            kernel_cases(plain, with_ep);
            tg__isa_cap(old);
        }
    tg_set_num_threads(saved);
}

Test(gemm_epilogue, float_gemm_at_every_isa_and_thread_count) { kernels_everywhere(tg_k_gemm, tg_k_gemm_ep); }
Test(gemm_epilogue, bf16_gemm_at_every_isa_and_thread_count) { kernels_everywhere(tg_k_gemm_bf16, tg_k_gemm_bf16_ep); }

/* Nothing to multiply (K = 0, alpha = 0): C = beta C, then Y = f(C); M or N
 * zero: nothing at all. */
Test(gemm_epilogue, k_zero_alpha_zero_and_empty) {
    for (int bf = 0; bf < 2; bf++) {
        gemm_fn plain = bf ? tg_k_gemm_bf16 : tg_k_gemm;
        gemm_ep_fn with_ep = bf ? tg_k_gemm_bf16_ep : tg_k_gemm_ep;
        check_kernel(plain, with_ep, TG_UNARY_GELU_TANH, false, true, 5, 7, 0, 1, (tg_real)0.5, 1, false, false);
        check_kernel(plain, with_ep, TG_UNARY_GELU, false, true, 5, 7, 0, 1, 0, 0, true, false);
        check_kernel(plain, with_ep, TG_UNARY_GELU, true, false, 4, 9, 6, 0, 2, 2, false, true);
        tg_real c[4] = {1, 2, 3, 4}, y[4] = {5, 5, 5, 5};
        tg_gemm_epilogue ep = {.act = TG_UNARY_GELU, .Y = y};
        with_ep(false, false, 0, 2, 2, 1, c, 2, c, 2, 0, c, 2, &ep);
        with_ep(false, false, 2, 0, 2, 1, c, 2, c, 2, 0, c, 2, &ep);
        cr_assert(c[0] == 1 && c[3] == 4 && y[0] == 5 && y[3] == 5, "an empty product wrote");
    }
}

/* ---- the op ------------------------------------------------------------------ */

typedef struct {
    tg_tensor *y, *gx, *gw, *gb; /* persistent copies; gradients NULL without a graph */
} op_result;

static tg_tensor *keep(const tg_tensor *t) {
    if (!t) return NULL;
    tg_tensor *k = tg_empty_persistent(t->ndim, t->shape);
    cr_assert_not_null(k);
    memcpy(k->data, t->data, sizeof(tg_real) * (size_t)t->size);
    return k;
}

/* y = act(x w^T + b), fused or as the pair, then (with grad) the backward
 * from dy; the output and the gradients, kept. */
static op_result run_op(bool fused, bool tanh_form, tg_tensor *x, tg_tensor *w, tg_tensor *b, const tg_tensor *dy,
                        bool grad) {
    tg_tensor *in[3] = {x, w, b};
    for (int i = 0; i < 3; i++)
        if (in[i]) {
            tg_set_requires_grad(in[i], grad);
            tg_zero_grad(in[i]);
        }
    tg_scope_begin();
    tg_tensor *y = fused       ? tg_affine_gelu(x, w, b, tanh_form)
                   : tanh_form ? tg_gelu_tanh(tg_affine(x, w, b))
                               : tg_gelu(tg_affine(x, w, b));
    TG_REQUIRE(y);
    if (grad) cr_assert_eq(tg_backward_seed(y, dy), 0, "%s", tg_last_error());
    op_result r = {keep(y), grad ? keep(x->grad) : NULL, grad ? keep(w->grad) : NULL, grad && b ? keep(b->grad) : NULL};
    tg_scope_end();
    return r;
}

static void expect_same(const tg_tensor *a, const tg_tensor *b, const char *what, const char *where) {
    if (!a && !b) return;
    cr_assert(a && b && a->size == b->size, "%s %s: one missing or sizes differ", where, what);
    cr_assert(memcmp(a->data, b->data, sizeof(tg_real) * (size_t)a->size) == 0, "%s %s: fused differs from the pair",
              where, what);
}

static void op_result_free(op_result *r) { tg_free(r->y), tg_free(r->gx), tg_free(r->gw), tg_free(r->gb); }

/* The fused op against the pair, both forms, with and without a bias and a
 * graph, for x of shape xs (ndim nd) and out outputs. */
static void check_op(int nd, const int *xs, int out) {
    int in = xs[nd - 1];
    tg_rng rng = tg_rng_new((uint64_t)(in * 1000 + out));
    tg_tensor *x = tg_randn(nd, xs, &rng), *w = tg_randn(TG_SHAPE(out, in), &rng), *b = tg_randn(TG_SHAPE(out), &rng);
    TG_REQUIRE(x);
    TG_REQUIRE(w);
    TG_REQUIRE(b);
    /* pre-activations of order 1, where GELU bends */
    for (int64_t i = 0; i < w->size; i++) w->data[i] *= (tg_real)(1.5 / sqrt((double)in));
    int ys[TG_MAX_DIMS];
    memcpy(ys, xs, sizeof(int) * (size_t)nd);
    ys[nd - 1] = out;
    tg_tensor *dy = tg_randn(nd, ys, &rng);
    char where[96];
    for (int form = 0; form < 2; form++)
        for (int with_b = 0; with_b < 2; with_b++)
            for (int grad = 0; grad < 2; grad++) {
                snprintf(where, sizeof where, "x [..,%d] out %d %s%s%s, %d threads, isa %d", in, out,
                         form ? "tanh" : "erf", with_b ? " bias" : "", grad ? " grad" : "", tg_get_num_threads(),
                         (int)tg_isa_level());
                op_result p = run_op(false, form, x, w, with_b ? b : NULL, dy, grad);
                op_result f = run_op(true, form, x, w, with_b ? b : NULL, dy, grad);
                expect_same(f.y, p.y, "y", where);
                expect_same(f.gx, p.gx, "dx", where);
                expect_same(f.gw, p.gw, "dW", where);
                expect_same(f.gb, p.gb, "db", where);
                op_result_free(&p);
                op_result_free(&f);
            }
    tg_free(x), tg_free(w), tg_free(b), tg_free(dy);
}

/* The direct path (small products), the packed one with three K blocks
 * (K 600: past DIRECT_MAX_K, so packed at every level), edge tiles. */
static void op_shapes(void) {
    check_op(2, (const int[]){5, 7}, 9);
    check_op(3, (const int[]){2, 3, 16}, 16);
    check_op(3, (const int[]){3, 50, 600}, 70);
    check_op(2, (const int[]){37, 130}, 33);
}

Test(affine_gelu, equals_the_unfused_pair_at_every_isa_and_thread_count) {
    int saved = tg_get_num_threads();
    for (int cap = TG_ISA_PORTABLE; cap <= TG_ISA_AMX; cap++)
        for (int nt = 1; nt <= 2; nt++) {
            int old = tg__isa_cap(cap);
            tg_set_num_threads(nt);
            op_shapes();
            tg__isa_cap(old);
        }
    tg_set_num_threads(saved);
}

/* The same, every product bf16 (tg_set_precision): against the bf16 pair,
 * byte for byte, and not the float result. */
Test(affine_gelu, bf16_equals_the_bf16_pair) {
    if (!IS_FLOAT) cr_skip_test("float build only");
    int saved = tg_get_num_threads();
    for (int cap = TG_ISA_AVX512; cap <= TG_ISA_AMX; cap++) /* the portable bf16 kernel, then vdpbf16ps */
        for (int nt = 1; nt <= 2; nt++) {
            int old = tg__isa_cap(cap);
            tg_set_num_threads(nt);
            tg_precision prev = tg_set_precision(TG_PREC_BF16);
            op_shapes();
            check_op(2, (const int[]){40, 1100}, 45); /* two bf16 K blocks */
            tg_set_precision(prev);
            tg__isa_cap(old);
        }
    tg_set_num_threads(saved);
    /* in effect: the bf16 output is not the float one */
    tg_rng rng = tg_rng_new(9);
    tg_tensor *x = tg_randn(TG_SHAPE(20, 64), &rng), *w = tg_randn(TG_SHAPE(30, 64), &rng);
    tg_scope_begin();
    tg_tensor *y32 = tg_affine_gelu(x, w, NULL, true);
    tg_precision prev = tg_set_precision(TG_PREC_BF16);
    tg_tensor *y16 = tg_affine_gelu(x, w, NULL, true);
    tg_set_precision(prev);
    TG_REQUIRE(y32);
    TG_REQUIRE(y16);
    cr_assert(memcmp(y32->data, y16->data, sizeof(tg_real) * (size_t)y32->size) != 0, "bf16 changed nothing");
    double d = max_diff(y16, y32);
    cr_assert(d < 0.1, "bf16 off by %g", d);
    tg_scope_end();
    tg_free(x), tg_free(w);
}

/* in = 0: x w^T is 0, so y = gelu(b) in every row (gelu(0) = 0 without a
 * bias), for the op and for tg_affine alike (which left y unset and divided
 * by in = 0 in its backward); db sums the rows' gradients. */
Test(affine_gelu, empty_inner_dimension_gives_gelu_of_the_bias) {
    tg_tensor *x = tg_zeros(TG_SHAPE(3, 0)), *w = tg_zeros(TG_SHAPE(4, 0));
    tg_tensor *b = tg_from_array(TG_SHAPE(4), (const tg_real[]){-1, 0, 0.5, 2});
    tg_set_requires_grad(b, true);
    tg_scope_begin();
    for (int form = 0; form < 2; form++) {
        tg_tensor *y = tg_affine_gelu(x, w, b, form), *h = tg_affine(x, w, b), *z = tg_affine_gelu(x, w, NULL, form);
        TG_REQUIRE(y);
        TG_REQUIRE(h);
        TG_REQUIRE(z);
        tg_tensor *g = form ? tg_gelu_tanh(b) : tg_gelu(b);
        for (int r = 0; r < 3; r++)
            for (int j = 0; j < 4; j++) {
                cr_expect(y->data[r * 4 + j] == g->data[j], "row %d: %g, want %g", r, (double)y->data[r * 4 + j],
                          (double)g->data[j]);
                cr_expect(h->data[r * 4 + j] == b->data[j], "affine row %d: %g", r, (double)h->data[r * 4 + j]);
                cr_expect(z->data[r * 4 + j] == 0, "no bias: %g", (double)z->data[r * 4 + j]);
            }
        /* db: 3 rows of 1 through the affine; 3 rows of gelu'(b) through the op, as through the pair */
        tg_zero_grad(b);
        cr_assert_eq(tg_backward(tg_sum_all(h)), 0, "%s", tg_last_error());
        for (int j = 0; j < 4; j++) cr_expect(b->grad->data[j] == 3, "affine db[%d] = %g", j, (double)b->grad->data[j]);
        tg_zero_grad(b);
        cr_assert_eq(tg_backward(tg_sum_all(g)), 0, "%s", tg_last_error());
        tg_real want[4];
        for (int j = 0; j < 4; j++) want[j] = 3 * b->grad->data[j];
        tg_zero_grad(b);
        cr_assert_eq(tg_backward(tg_sum_all(y)), 0, "%s", tg_last_error());
        for (int j = 0; j < 4; j++)
            cr_expect(fabs((double)b->grad->data[j] - (double)want[j]) <= 1e-6 * fabs((double)want[j]) + 1e-30,
                      "db[%d] = %g, want %g", j, (double)b->grad->data[j], (double)want[j]);
    }
    tg_scope_end();
    tg_free(x), tg_free(w), tg_free(b);
}

/* Without a graph the pre-activation is not kept: one [N, out] tensor in
 * the arena, where the pair makes two and the op with a graph two. */
Test(affine_gelu, keeps_the_pre_activation_only_for_a_graph) {
    enum { N = 64, IN = 32, OUT = 48 };
    tg_rng rng = tg_rng_new(4);
    tg_tensor *x = tg_randn(TG_SHAPE(N, IN), &rng), *w = tg_randn(TG_SHAPE(OUT, IN), &rng);
    size_t one = N * OUT * sizeof(tg_real);
    for (int grad = 0; grad < 2; grad++) {
        tg_set_requires_grad(w, grad);
        tg_scope_begin();
        size_t before = tg_memory().arena_in_use;
        TG_REQUIRE(tg_affine_gelu(x, w, NULL, true));
        size_t used = tg_memory().arena_in_use - before;
        cr_expect(used >= (grad ? 2 : 1) * one && used < (grad ? 3 : 2) * one,
                  "grad %d: %zu bytes for %zu-byte outputs", grad, used, one);
        tg_scope_end();
    }
    tg_free(x), tg_free(w);
}

/* The module: tg_linear_gelu_forward is the GELU of tg_linear_forward,
 * values and parameter gradients, with and without a bias. */
Test(affine_gelu, linear_gelu_forward_is_gelu_of_linear_forward) {
    tg_rng rng = tg_rng_new(6);
    for (int bias = 0; bias < 2; bias++)
        for (int form = 0; form < 2; form++) {
            tg_linear *m = tg_linear_new(24, 40, bias, &rng);
            TG_REQUIRE(m);
            tg_tensor *x = tg_randn(TG_SHAPE(2, 5, 24), &rng), *dy = tg_randn(TG_SHAPE(2, 5, 40), &rng);
            tg_tensor *out[2], *gw[2], *gb[2] = {NULL, NULL};
            for (int fused = 0; fused < 2; fused++) {
                tg_zero_grad(m->weight);
                if (m->bias) tg_zero_grad(m->bias);
                tg_scope_begin();
                tg_tensor *y = fused  ? tg_linear_gelu_forward(m, x, form)
                               : form ? tg_gelu_tanh(tg_linear_forward(m, x))
                                      : tg_gelu(tg_linear_forward(m, x));
                TG_REQUIRE(y);
                cr_assert_eq(y->ndim, 3);
                cr_assert_eq(y->shape[2], 40);
                cr_assert_eq(tg_backward_seed(y, dy), 0, "%s", tg_last_error());
                out[fused] = keep(y);
                gw[fused] = keep(m->weight->grad);
                gb[fused] = m->bias ? keep(m->bias->grad) : NULL;
                tg_scope_end();
            }
            expect_same(out[1], out[0], "y", "linear_gelu_forward");
            expect_same(gw[1], gw[0], "dW", "linear_gelu_forward");
            expect_same(gb[1], gb[0], "db", "linear_gelu_forward");
            for (int i = 0; i < 2; i++) tg_free(out[i]), tg_free(gw[i]), tg_free(gb[i]);
            tg_free(x), tg_free(dy);
            tg_linear_free(m);
        }
}

/* ---- errors ------------------------------------------------------------------ */

Test(affine_gelu, errors_name_the_op_and_the_shapes) {
    tg_clear_error();
    tg_tensor *t23 = tg_zeros(TG_SHAPE(2, 3)), *t45 = tg_zeros(TG_SHAPE(4, 5)), *t3 = tg_zeros(TG_SHAPE(3));
    cr_expect_null(tg_affine_gelu(t23, t45, NULL, false)); /* x [2,3] needs weight [out, 3] */
    cr_expect(error_has("affine_gelu: x (2,3), weight (4,5), bias NULL", NULL), "%s", tg_last_error());
    cr_expect_null(tg_affine_gelu(t45, t45, t3, true)); /* bias (3) for out 4 */
    cr_expect(error_has("affine_gelu_tanh: x (4,5), weight (4,5), bias (3)", NULL), "%s", tg_last_error());
    cr_expect_null(tg_affine_gelu(t23, t3, NULL, true)); /* weight not 2-D */
    cr_expect(error_has("affine_gelu_tanh", "weight (3)"), "%s", tg_last_error());
    tg_clear_error();
    cr_expect_null(tg_affine_gelu(NULL, t45, NULL, false));
    cr_expect(error_has("affine_gelu", "NULL"), "%s", tg_last_error());
    tg_clear_error();
    cr_expect_null(tg_affine_gelu(t23, NULL, NULL, true));
    cr_expect(error_has("affine_gelu_tanh", "NULL"), "%s", tg_last_error());
    /* a NULL input from a failed op keeps that op's message */
    tg_clear_error();
    cr_expect_null(tg_affine_gelu(tg_matmul(t23, t45), t45, NULL, true));
    cr_expect(error_has("matmul: (2,3) @ (4,5)", NULL), "%s", tg_last_error());

    tg_rng rng = tg_rng_new(1);
    tg_linear *m = tg_linear_new(4, 3, true, &rng);
    TG_REQUIRE(m);
    tg_clear_error();
    cr_expect_null(tg_linear_gelu_forward(m, t23, true));
    cr_expect(error_has("linear: input (2,3) last dim 3, expected 4", NULL), "%s", tg_last_error());
    tg_clear_error();
    cr_expect_null(tg_linear_gelu_forward(m, NULL, false));
    cr_expect(error_has("linear", "NULL"), "%s", tg_last_error());
    tg_clear_error();
    cr_expect_null(tg_linear_gelu_forward(NULL, t23, false));
    cr_expect(error_has("linear", "NULL"), "%s", tg_last_error());
    tg_linear_free(m);
    tg_free(t23), tg_free(t45), tg_free(t3);
}
