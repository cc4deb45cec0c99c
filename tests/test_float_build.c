/* What only the float build shows (run by `make test` before the double
 * suite): tg_gradcheck there fails with a hint to use the double build
 * instead of failing silently (issue 10). */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tensor/kernels.h"
#include "tensor/simd.h"
#include "tensor/tensor_internal.h"
#include "tgrad.h"

/* A checkpoint of the double build can hold values beyond float's range:
 * finite in the file, they would load as infinity here, so the load
 * refuses them and leaves the model as it was. */
Test(float_build, checkpoint_value_beyond_float_range_refused) {
    if (sizeof(tg_real) != 4) cr_skip_test("float build only");
    char path[64];
    snprintf(path, sizeof path, "/tmp/tg_f64_%ld.safetensors", (long)getpid());
    const char *hdr = "{\"w\":{\"dtype\":\"F64\",\"shape\":[3],\"data_offsets\":[0,24]}}";
    size_t hl = strlen(hdr), pad = (hl + 7) / 8 * 8;
    unsigned char b[8 + 128 + 24];
    cr_assert_leq(pad, 128);
    for (int k = 0; k < 8; k++) b[k] = (unsigned char)((uint64_t)pad >> (8 * k));
    memcpy(b + 8, hdr, hl);
    memset(b + 8 + hl, ' ', pad - hl);
    const double v[3] = {1.0, 1e300, 2.0};
    for (int i = 0; i < 3; i++) {
        uint64_t u;
        memcpy(&u, &v[i], 8);
        for (int k = 0; k < 8; k++) b[8 + pad + 8 * i + k] = (unsigned char)(u >> (8 * k));
    }
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(b, 1, 8 + pad + 24, f), 8 + pad + 24);
    fclose(f);
    tg_tensor *w = tg_from_array(TG_SHAPE(3), (tg_real[]){7, 8, 9});
    tg_params p;
    tg_params_init(&p);
    cr_assert_eq(tg_params_add(&p, NULL, "w", w), 0);
    cr_expect_eq(tg_checkpoint_load(path, &p), -1, "loaded 1e300 into a float as %g", (double)w->data[1]);
    const char *e = tg_last_error();
    cr_expect(e && strstr(e, "w: the F64 value at index 1 is beyond the range of float"), "%s", e ? e : "");
    cr_expect(w->data[0] == 7 && w->data[1] == 8 && w->data[2] == 9, "the model changed");
    unlink(path);
    tg_params_free(&p);
    tg_free(w);
}

static tg_tensor *f_exp(tg_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return tg_exp(in[0]);
}

Test(float_build, gradcheck_says_to_use_the_double_build) {
    if (sizeof(tg_real) != 4) cr_skip_test("float build only");
    tg_tensor *x = tg_from_array(TG_SHAPE(3), (tg_real[]){0.5f, 1.0f, 1.5f});
    tg_set_requires_grad(x, true);
    tg_gradcheck_result r;
    cr_expect_not(tg_gradcheck(f_exp, &x, 1, NULL, 1e-3, 1e-6, &r), "float differences cannot reach 1e-6");
    const char *e = tg_last_error();
    cr_assert_not_null(e);
    cr_expect(strstr(e, "double build"), "%s", e);
    tg_free(x);
}

/* The decoder's KV cache in float: each step's logits equal the full
 * forward's to 1e-5 relative (the double suite, tests/test_decoder.c, checks 1e-12). */
Test(float_build, decoder_cached_logits_equal_full_forward) {
    if (sizeof(tg_real) != 4) cr_skip_test("float build only");
    tg_decoder_config cfg = tg_decoder_config_default(65, 64, 4, 4, 64);
    tg_rng rng = tg_rng_new(1);
    tg_decoder *m = tg_decoder_new(&cfg, &rng);
    cr_assert_not_null(m, "%s", tg_last_error());
    for (int64_t i = 0; i < m->wte->weight->size; i++) m->wte->weight->data[i] *= 10; /* logits up to ~10 */
    tg_decoder_train(m, false);
    int seq[64];
    for (int i = 0; i < 64; i++) seq[i] = (i * 17 + 5) % 65;
    tg_decoder_cache *c = tg_decoder_cache_new(m);
    tg_scope_begin();
    tg_tensor *full = tg_decoder_forward(m, seq, 1, 64);
    cr_assert_not_null(full, "%s", tg_last_error());
    for (int p = 0, n = 10; p < 64; p += n, n = 1) {
        tg_tensor *l = tg_decoder_forward_cached(m, c, seq + p, n);
        cr_assert_not_null(l, "%s", tg_last_error());
        for (int i = 0; i < n * 65; i++)
            cr_expect(fabs((double)l->data[i] - (double)full->data[p * 65 + i]) <=
                          1e-5 * fmax(1, fabs((double)l->data[i])),
                      "position %d logit %d: %g vs %g", p + i / 65, i % 65, (double)l->data[i],
                      (double)full->data[p * 65 + i]);
    }
    tg_scope_end();
    tg_decoder_cache_free(c);
    tg_decoder_free(m);
}

static void gelu_tanh_against_formula(void) {
    enum { N = 4001 };
    tg_tensor *x = tg_empty(TG_SHAPE(N));
    for (int i = 0; i < N; i++) x->data[i] = (tg_real)(-20 + 40.0 * i / (N - 1));
    tg_set_requires_grad(x, true);
    tg_scope_begin();
    tg_tensor *y = tg_gelu_tanh(x);
    cr_assert_not_null(y);
    cr_assert_eq(tg_backward(tg_sum_all(y)), 0);
    for (int i = 0; i < N; i++) {
        double v = x->data[i], t = tanh(0.7978845608028654 * (v + 0.044715 * v * v * v));
        double want = 0.5 * v * (1 + t);
        double dwant = 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * 0.7978845608028654 * (1 + 3 * 0.044715 * v * v);
        cr_expect(fabs(y->data[i] - want) <= 1e-6 + 1e-6 * fabs(want), "x %g: %g, want %g", v, (double)y->data[i],
                  want);
        cr_expect(fabs(x->grad->data[i] - dwant) <= 3e-6, "x %g: dy/dx %g, want %g", v, (double)x->grad->data[i],
                  dwant);
    }
    tg_scope_end();
    tg_free(x);
}

/* GELU tanh's float path (its own vectorisable exp, kernels.h) against the
 * tanh formula in double, values and derivative, over [-20, 20]. */
Test(float_build, gelu_tanh_matches_the_tanh_formula) {
    if (sizeof(tg_real) != 4) cr_skip_test("float build only");
    for (int cap = TG_ISA_PORTABLE; cap <= TG_ISA_AVX512; cap++) { /* each build of the kernel */
        int old = tg__isa_cap(cap);
        gelu_tanh_against_formula();
        tg__isa_cap(old);
    }
}

/* Every row of TG_UNARY_OPS gives the same bits, forward and backward
 * (fresh and accumulating), whichever ISA build of the loop runs
 * (TG_ISA_DISPATCH): elementwise loops round the same at every width. */
Test(float_build, unary_kernels_agree_at_every_isa) {
    enum { N = 1037 }; /* vector bodies and a tail at 4, 8 and 16 lanes */
    static tg_real xs[N], pos[N], gy[N], y[3][N], gx[3][N], acc[3][N];
    for (int i = 0; i < N; i++) {
        pos[i] = (tg_real)(0.05 + 12.0 * i / N);
        xs[i] = pos[i] * (i % 3 ? 1 : -1);
        gy[i] = (tg_real)sin(0.3 * i);
    }
#define ONE_KIND(name, KIND, f, df, arity)                                                                          \
    for (int cap = TG_ISA_PORTABLE; cap <= TG_ISA_AVX512; cap++) {                                                  \
        int old = tg__isa_cap(cap);                                                                                 \
        bool domain =                                                                                               \
            TG_UNARY_##KIND == TG_UNARY_LOG || TG_UNARY_##KIND == TG_UNARY_SQRT || TG_UNARY_##KIND == TG_UNARY_POW; \
        const tg_real *x = domain ? pos : xs; /* log, sqrt, pow: x > 0 */                                           \
        tg_k_unary(TG_UNARY_##KIND, (tg_real)1.5, x, y[cap], N);                                                    \
        tg_k_unary_backward(TG_UNARY_##KIND, (tg_real)1.5, gy, x, y[cap], gx[cap], N, true);                        \
        for (int i = 0; i < N; i++) acc[cap][i] = (tg_real)0.25;                                                    \
        tg_k_unary_backward(TG_UNARY_##KIND, (tg_real)1.5, gy, x, y[cap], acc[cap], N, false);                      \
        tg__isa_cap(old);                                                                                           \
    }                                                                                                               \
    for (int cap = 1; cap <= 2; cap++) {                                                                            \
        cr_expect(memcmp(y[0], y[cap], sizeof y[0]) == 0, #name ": forward at ISA %d differs from portable", cap);  \
        cr_expect(memcmp(gx[0], gx[cap], sizeof gx[0]) == 0, #name ": backward at ISA %d differs", cap);            \
        cr_expect(memcmp(acc[0], acc[cap], sizeof acc[0]) == 0, #name ": accumulating backward at ISA %d", cap);    \
    }
    TG_UNARY_OPS(ONE_KIND)
#undef ONE_KIND
}

/* Adam's loop (tensor/kernels_optim.c) gives the same bits at every ISA
 * build: its sqrt and division are correctly rounded at any width. */
Test(float_build, adam_update_agrees_at_every_isa) {
    enum { N = 1037 };
    static tg_real w[3][N], m[3][N], v[3][N], g[N];
    const tg_adam_step s = {.b1 = (tg_real)0.9,
                            .b2 = (tg_real)0.95,
                            .eps = (tg_real)1e-8,
                            .wd_l2 = 0,
                            .decay = (tg_real)0.9998,
                            .step_size = (tg_real)3e-3,
                            .bc2_sqrt = (tg_real)0.3};
    for (int cap = TG_ISA_PORTABLE; cap <= TG_ISA_AVX512; cap++) {
        for (int i = 0; i < N; i++) {
            w[cap][i] = (tg_real)cos(0.1 * i);
            m[cap][i] = (tg_real)(0.01 * sin(0.2 * i));
            v[cap][i] = (tg_real)(1e-4 * (1 + sin(0.3 * i)));
            g[i] = (tg_real)sin(0.7 * i);
        }
        int old = tg__isa_cap(cap);
        for (int step = 0; step < 3; step++) tg_k_adam(&s, w[cap], m[cap], v[cap], g, N);
        tg__isa_cap(old);
    }
    for (int cap = 1; cap <= 2; cap++) {
        cr_expect(memcmp(w[0], w[cap], sizeof w[0]) == 0, "weights at ISA %d differ from portable", cap);
        cr_expect(memcmp(v[0], v[cap], sizeof v[0]) == 0, "second moments at ISA %d differ", cap);
    }
    cr_expect(w[0][5] != (tg_real)cos(0.5), "the update changed the weights");
}

/* The broadcasting binary kernels give the same bits at every ISA build,
 * on equal shapes (the chunked loop) and on a broadcast row (the row loop). */
Test(float_build, binary_kernels_agree_at_every_isa) {
    tg_tensor *a = tg_empty(TG_SHAPE(7, 37)), *b = tg_empty(TG_SHAPE(7, 37)), *row = tg_empty(TG_SHAPE(37));
    tg_tensor *out[3][2];
    for (int64_t i = 0; i < a->size; i++) {
        a->data[i] = (tg_real)sin(0.37 * (double)i);
        b->data[i] = (tg_real)(1.5 + cos(0.11 * (double)i));
    }
    for (int j = 0; j < 37; j++) row->data[j] = (tg_real)(0.5 + 0.01 * j);
    for (int k = TG_BINARY_ADD; k <= TG_BINARY_DIV; k++) {
        for (int cap = TG_ISA_PORTABLE; cap <= TG_ISA_AVX512; cap++) {
            int old = tg__isa_cap(cap);
            out[cap][0] = tg_empty(TG_SHAPE(7, 37));
            out[cap][1] = tg_empty(TG_SHAPE(7, 37));
            tg_k_binary((tg_binary_kind)k, a, b, out[cap][0]);
            tg_k_binary((tg_binary_kind)k, a, row, out[cap][1]);
            tg__isa_cap(old);
        }
        for (int cap = 1; cap <= 2; cap++)
            for (int v = 0; v < 2; v++)
                cr_expect(memcmp(out[0][v]->data, out[cap][v]->data, sizeof(tg_real) * 7 * 37) == 0,
                          "binary kind %d (%s) at ISA %d differs from portable", k, v ? "broadcast" : "same shape",
                          cap);
        if (k == TG_BINARY_DIV) cr_expect_eq(out[2][1]->data[40], a->data[40] / row->data[3], "a / row at [1, 3]");
        for (int cap = 0; cap <= 2; cap++) tg_free(out[cap][0]), tg_free(out[cap][1]);
    }
    tg_free(a), tg_free(b), tg_free(row);
}

/* Layer norm's row kernels (tensor/kernels_norm.c) at every ISA build
 * against the formulas in double: forward, dx, dgamma and dbeta. Their sums
 * run in vector lanes, so the ISAs round differently, within 1e-5. */
Test(float_build, layer_norm_kernels_match_double_at_every_isa) {
    enum { R = 5, D = 83 }; /* D: vector bodies and a tail, and two blocks of the parameter sums */
    static tg_real x[R * D], g[R * D], gam[D], bet[D], y[R * D], mean[R], rstd[R], dx[R * D], dg[D], db[D];
    for (int i = 0; i < R * D; i++) {
        x[i] = (tg_real)(sin(0.3 * i) * (1 + i % 7));
        g[i] = (tg_real)cos(0.17 * i);
    }
    for (int j = 0; j < D; j++) gam[j] = (tg_real)(1 + 0.01 * j), bet[j] = (tg_real)(0.1 * sin(j));
    for (int cap = TG_ISA_PORTABLE; cap <= TG_ISA_AVX512; cap++) {
        int old = tg__isa_cap(cap);
        memset(dg, 0, sizeof dg), memset(db, 0, sizeof db);
        tg_k_layer_norm(x, gam, bet, y, mean, rstd, R, D, (tg_real)1e-5);
        tg_k_layer_norm_backward_dx(x, g, gam, mean, rstd, dx, R, D, true);
        tg_k_layer_norm_backward_params(x, g, mean, rstd, dg, db, R, D);
        tg__isa_cap(old);
        double wdg[D] = {0}, wdb[D] = {0};
        for (int r = 0; r < R; r++) {
            const tg_real *xr = x + r * D, *gr = g + r * D;
            double mu = 0, var = 0, m1 = 0, m2 = 0;
            for (int j = 0; j < D; j++) mu += xr[j];
            mu /= D;
            for (int j = 0; j < D; j++) var += (xr[j] - mu) * (xr[j] - mu);
            double rs = 1 / sqrt(var / D + 1e-5);
            for (int j = 0; j < D; j++) {
                double xh = (xr[j] - mu) * rs;
                m1 += gr[j] * gam[j] / D, m2 += gr[j] * gam[j] * xh / D;
                wdg[j] += gr[j] * xh, wdb[j] += gr[j];
                cr_expect(fabs(y[r * D + j] - (xh * gam[j] + bet[j])) < 1e-5, "ISA %d: y[%d][%d]", cap, r, j);
            }
            for (int j = 0; j < D; j++) {
                double xh = (xr[j] - mu) * rs, want = rs * (gr[j] * gam[j] - m1 - xh * m2);
                cr_expect(fabs(dx[r * D + j] - want) < 1e-5 * (1 + fabs(want)), "ISA %d: dx[%d][%d] %g, want %g", cap,
                          r, j, (double)dx[r * D + j], want);
            }
        }
        for (int j = 0; j < D; j++)
            cr_expect(fabs(dg[j] - wdg[j]) < 1e-5 * (1 + fabs(wdg[j])) &&
                          fabs(db[j] - wdb[j]) < 1e-5 * (1 + fabs(wdb[j])),
                      "ISA %d: dgamma/dbeta[%d]", cap, j);
    }
}

/* The fused backward (tg_k_layer_norm_backward: dx and the parameters' sums
 * in one pass) against the two passes of its own kernels, bit for bit, at
 * every ISA build: several row chunks with a tail (300 rows) and one chunk
 * (50), with and without gamma, dx fresh and added to, a parameter alone. */
Test(float_build, layer_norm_fused_backward_is_the_two_passes) {
    enum { RMAX = 300, D = 83 };
    static tg_real x[RMAX * D], g[RMAX * D], gam[D], y[RMAX * D], mean[RMAX], rstd[RMAX];
    static tg_real dx1[RMAX * D], dx2[RMAX * D], dg1[D], dg2[D], db1[D], db2[D];
    for (int i = 0; i < RMAX * D; i++) x[i] = (tg_real)(sin(0.3 * i) * (1 + i % 7)), g[i] = (tg_real)cos(0.17 * i);
    for (int j = 0; j < D; j++) gam[j] = (tg_real)(1 + 0.01 * j);
    for (int cap = TG_ISA_PORTABLE; cap <= TG_ISA_AVX512; cap++)
        for (int v = 0; v < 8; v++) {
            int R = v & 1 ? 50 : RMAX, old = tg__isa_cap(cap);
            bool fresh = v & 2, with_gamma = v & 4;
            const tg_real *gm = with_gamma ? gam : NULL;
            tg_k_layer_norm(x, gm, with_gamma ? gam : NULL, y, mean, rstd, R, D, (tg_real)1e-5);
            for (int i = 0; i < R * D; i++) dx1[i] = dx2[i] = (tg_real)(0.5 * sin(i));
            for (int j = 0; j < D; j++) dg1[j] = dg2[j] = (tg_real)j, db1[j] = db2[j] = (tg_real)-j;
            tg_k_layer_norm_backward_dx(x, g, gm, mean, rstd, dx1, R, D, fresh);
            tg_k_layer_norm_backward_params(x, g, mean, rstd, dg1, db1, R, D);
            tg_k_layer_norm_backward(x, g, gm, mean, rstd, dx2, fresh, dg2, db2, R, D);
            cr_expect(memcmp(dx1, dx2, sizeof(tg_real) * (size_t)(R * D)) == 0, "ISA %d, case %d: dx", cap, v);
            cr_expect(memcmp(dg1, dg2, sizeof dg1) == 0 && memcmp(db1, db2, sizeof db1) == 0,
                      "ISA %d, case %d: dgamma, dbeta", cap, v);
            tg_k_layer_norm_backward(x, g, gm, mean, rstd, NULL, fresh, NULL, db2, R, D); /* dbeta alone */
            tg_k_layer_norm_backward_params(x, g, mean, rstd, NULL, db1, R, D);
            cr_expect(memcmp(db1, db2, sizeof db1) == 0, "ISA %d, case %d: dbeta alone", cap, v);
            tg__isa_cap(old);
        }
}

/* Layer norm's statistics on hard rows, a large offset with a small spread,
 * against a two-pass reference in double, at every ISA build this CPU has.
 * Row 0 is 1e4 + N(0, 1e-2), row 1 1e6 + N(0, 1), row 3 1e2 + N(0, 1e-3)
 * (spread over hundreds of ulps, so the sums round). On them the naive
 * var = E[x^2] - E[x]^2 in float is all rounding: E[x^2] ~ 1e8 in row 0 has
 * an ulp of 8, against var ~ 1e-4, and var comes out -8 to -224 (rstd NaN);
 * rows 1 and 3 get rstd off by a factor of 14 to 1e3, or NaN (checked
 * below, on that formula, to keep the rows hard). Row 2 is the worst case
 * of the kernel's shift by x_0 (kernels_norm.c): x_0 = 1e4 + 1, the rest
 * 1e4, so x_0 - mean = sqrt(d - 1) sd (Samuelson) and the shifted sums
 * lose a factor d. Bounds, in float epsilons u: mean within 4u of
 * |mean| + sd (the rounding of k + s1/d and of s1/d); rstd within 2du
 * relative (that factor d at most, on the rounding of s2 and s1^2/d); y
 * within rstd's error + (8 + sqrt(d))u of |gamma| (1 + |xhat|) + |beta|
 * (x - k - s1/d, with s1/d at most sqrt(d) sd, then the products).
 * Subtracting the mean rounded to a float, as Welford's update and the
 * former two-pass loop do, misses the rstd and y bounds by factors up to
 * 3e3 and 5e2 here: half an ulp of 1e4 is 5% of row 0's sd. */
Test(float_build, layer_norm_statistics_on_hard_rows_at_every_isa) {
    enum { R = 4, DMAX = 1000 };
    static const int ds[] = {1, 7, 64, 256, 1000};
    static tg_real x[R * DMAX], y[R * DMAX], gam[DMAX], bet[DMAX];
    const double u = FLT_EPSILON, eps = 1e-12; /* eps below every row's var, which rstd then shows */
    for (int j = 0; j < DMAX; j++) gam[j] = (tg_real)(0.5 + 0.001 * j), bet[j] = (tg_real)(0.1 * cos(j));
    for (int k = 0; k < 5; k++) {
        int d = ds[k];
        for (int j = 0; j < d; j++) {
            x[j] = (tg_real)(1e4 + 1e-2 * tg_rng_normal_at(23, (uint64_t)d, (uint64_t)j));
            x[d + j] = (tg_real)(1e6 + tg_rng_normal_at(23, (uint64_t)d, (uint64_t)(DMAX + j)));
            x[2 * d + j] = (tg_real)(j == 0 ? 1e4 + 1 : 1e4);
            x[3 * d + j] = (tg_real)(1e2 + 1e-3 * tg_rng_normal_at(23, (uint64_t)d, (uint64_t)(2 * DMAX + j)));
        }
        double mean[R], sd[R], rstd[R];
        for (int r = 0; r < R; r++) {
            const tg_real *xr = x + r * d;
            double m = 0, v = 0;
            for (int j = 0; j < d; j++) m += xr[j];
            m /= d;
            for (int j = 0; j < d; j++) v += (xr[j] - m) * (xr[j] - m);
            mean[r] = m, sd[r] = sqrt(v / d), rstd[r] = 1 / sqrt(v / d + eps);
            if (r != 2 && d > 1) { /* E[x^2] - E[x]^2 in float: far outside the bound */
                float s = 0, s2 = 0;
                for (int j = 0; j < d; j++) s += (float)xr[j], s2 += (float)xr[j] * (float)xr[j];
                float nm = s / (float)d, nv = s2 / (float)d - nm * nm, nrs = 1 / sqrtf(nv + (float)eps);
                cr_expect(!(fabs(nrs - rstd[r]) <= 100 * 2 * d * u * rstd[r]), "d %d row %d: E[x^2] - E[x]^2 passes", d,
                          r);
            }
        }
        for (int cap = TG_ISA_PORTABLE; cap <= TG_ISA_AVX512; cap++) {
            int old = tg__isa_cap(cap);
            bool has = (int)tg_isa_level() == cap;
            tg_real fmean[R], frstd[R];
            static tg_real g[R * DMAX], dx[R * DMAX], dg[DMAX], db[DMAX];
            for (int i = 0; i < R * d; i++) g[i] = (tg_real)cos(0.37 * i);
            memset(dg, 0, sizeof dg), memset(db, 0, sizeof db);
            if (has) {
                tg_k_layer_norm(x, gam, bet, y, fmean, frstd, R, d, (tg_real)eps);
                tg_k_layer_norm_backward_dx(x, g, gam, fmean, frstd, dx, R, d, true);
                tg_k_layer_norm_backward_params(x, g, fmean, frstd, dg, db, R, d);
            }
            tg__isa_cap(old);
            if (!has) break; /* the CPU has no wider build */
            double wdg[DMAX] = {0}, sdg[DMAX] = {0};
            for (int r = 0; r < R; r++) {
                /* the backward from the saved statistics, against double: its
                 * x hat is the forward's, within y's bound; the row sums of
                 * dx add up to d such errors */
                const tg_real *xr = x + r * d, *gr = g + r * d;
                double m1 = 0, m2 = 0, scale = 0, edx = 0;
                for (int j = 0; j < d; j++) {
                    double xh = (xr[j] - mean[r]) * rstd[r];
                    m1 += gr[j] * gam[j] / d, m2 += gr[j] * gam[j] * xh / d;
                    wdg[j] += gr[j] * xh, sdg[j] += fabs(gr[j]) * (1 + fabs(xh));
                }
                for (int j = 0; j < d; j++)
                    scale = fmax(scale, fabs(gr[j] * gam[j]) + fabs(m1) + fabs(m2) * 2 * sqrt(d));
                for (int j = 0; j < d; j++) {
                    double xh = (xr[j] - mean[r]) * rstd[r], want = rstd[r] * (gr[j] * gam[j] - m1 - xh * m2);
                    edx = fmax(edx, fabs(dx[r * d + j] - want) / (rstd[r] * scale));
                }
                double er = fabs(frstd[r] - rstd[r]) / rstd[r];
                cr_expect(edx <= er + (16 + 2 * sqrt(d)) * u, "ISA %d d %d row %d: dx off by %.3g (rstd %.3g)", cap, d,
                          r, edx, er);
            }
            for (int j = 0; j < d; j++)
                cr_expect(fabs(dg[j] - wdg[j]) <= 2 * d * u * sdg[j], "ISA %d d %d: dgamma[%d] %.9g, want %.9g", cap, d,
                          j, (double)dg[j], wdg[j]);
            for (int r = 0; r < R; r++) {
                double em =
                    fabs(x[r * d] + (double)fmean[r] - mean[r]) / (fabs(mean[r]) + sd[r]); /* saved: mean - x_0 */
                double er = fabs(frstd[r] - rstd[r]) / rstd[r], ey = 0;
                for (int j = 0; j < d; j++) {
                    double xh = (x[r * d + j] - mean[r]) * rstd[r], want = xh * gam[j] + bet[j];
                    double e = fabs(y[r * d + j] - want) / (fabs(gam[j]) * (1 + fabs(xh)) + fabs(bet[j]));
                    ey = e > ey ? e : ey;
                }
                cr_log_info("ISA %d d %4d row %d: mean %.2g rstd %.2g y %.2g (relative, in u: %.2f %.2f %.2f)", cap, d,
                            r, em, er, ey, em / u, er / u, ey / u);
                cr_expect(em <= 4 * u, "ISA %d d %d row %d: mean %.9g, want %.9g", cap, d, r, (double)fmean[r],
                          mean[r]);
                cr_expect(er <= 2 * d * u, "ISA %d d %d row %d: rstd %.9g, want %.9g", cap, d, r, (double)frstd[r],
                          rstd[r]);
                cr_expect(ey <= er + (8 + sqrt(d)) * u, "ISA %d d %d row %d: y off by %.3g", cap, d, r, ey);
            }
        }
    }
}
