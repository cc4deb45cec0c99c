/* The kernels of the fused attention (src/tensor/kernels_attention.c): in
 * the float build they have AVX2 (and AVX-512) paths where the CPU has
 * them, so they are checked here against plain loops, for lengths around
 * the lanes (vector body plus tail), at every ISA level the CPU has. Runs
 * in the float and the double test runs. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "isa_util.h"
#include "tensor/half.h"
#include "tensor/kernels.h"
#include "tensor/simd.h"
#include "tensor/tensor_internal.h"

static tg_real val(int i, int salt) { return (tg_real)sin(0.7 * i + salt) * (tg_real)(1 + i % 5); }

Test(row_kernels, max_mul_and_ds_match_plain_loops) {
    enum { N = 37 };
    tg_real s[N], a[N], b[N], p[N], p2[N], dp[N], z[N];
    for (int n = 0; n <= N; n++) {
        for (int j = 0; j < n; j++) {
            s[j] = val(j, n);
            a[j] = val(j, 1);
            b[j] = val(j, 2);
            p[j] = p2[j] = val(j, 3);
            dp[j] = val(j, 4);
            z[j] = j % 3 ? (tg_real)1.25 : 0;
        }
        tg_real m = -1e30f, want = m;
        for (int j = 0; j < n; j++) want = s[j] > want ? s[j] : want;
        cr_expect_eq(tg_k_max_row(s, n, m), want, "max of %d", n);
        cr_expect_eq(tg_k_max_row(s, n, 100), 100, "start value kept, n %d", n);

        tg_k_mul_row(a, b, n);
        for (int j = 0; j < n; j++) cr_expect_eq(a[j], val(j, 1) * val(j, 2), "mul n %d j %d", n, j);

        const tg_real D = (tg_real)0.3;
        tg_k_attention_ds_row(p, dp, z, D, n);
        tg_k_attention_ds_row(p2, dp, NULL, D, n);
        for (int j = 0; j < n; j++) {
            double w = (double)val(j, 3) * ((double)dp[j] * z[j] - D);
            double w2 = (double)val(j, 3) * ((double)dp[j] - D);
            cr_expect(fabs(p[j] - w) <= 1e-6 * (1 + fabs(w)), "ds n %d j %d: %g vs %g", n, j, (double)p[j], w);
            cr_expect(fabs(p2[j] - w2) <= 1e-6 * (1 + fabs(w2)), "ds (no z) n %d j %d", n, j);
        }
    }
}

/* ---- the short sequences' whole-entry kernels ----------------------------------
 * tg_k_attention_short_forward and _backward against the formulas in double
 * (ops_attention.c): shapes that fill the 16 lanes, leave a tail (odd T,
 * feature sizes that are not a multiple of 8), cross a lane block (K 17,
 * 33) or reach TG_ATT_SHORT_MAX; rows strided (as heads read in place),
 * masks with rows that see no key and rows cut short, dropout factors.
 * Nothing past a row's features, nor past the scratch, is written. */
typedef struct {
    int Q, K, d, dv;
    int mask; /* 0 none, 1 lengths (some 0, some past K), 2 causal */
    bool dropout;
} short_case;

enum { PAD = 3 }; /* extra reals between rows */
#define SENTINEL ((tg_real)-777)

static tg_real *filled(size_t n, int salt) {
    tg_real *x = malloc(sizeof(tg_real) * n);
    for (size_t i = 0; i < n; i++) x[i] = val((int)i, salt) / 3;
    return x;
}

/* A gradient got [rows, s] (the kernel added to g0) against g0 + scale A B:
 * A's (r, m) at A[r ar + m am], m < M, B's (m, t) at B[m bs + t]; the
 * columns t >= n (the padding) keep g0. */
static void expect_grad(const char *what, const char *name, const tg_real *got, const tg_real *g0, int rows, int s,
                        int n, int M, double scale, const double *A, int ar, int am, const tg_real *B, int bs,
                        double tol) {
    for (int r = 0; r < rows; r++)
        for (int t = 0; t < s; t++) {
            double want = g0[r * s + t];
            for (int m = 0; t < n && m < M; m++) want += scale * A[r * ar + m * am] * B[m * bs + t];
            cr_expect(fabs(got[r * s + t] - want) <= tol * (1 + fabs(want)), "%s: %s[%d,%d] = %g, want %g", what, name,
                      r, t, (double)got[r * s + t], want);
        }
}

static void short_case_check(const short_case *c, int cap) {
    int Q = c->Q, K = c->K, d = c->d, dv = c->dv, KP = tg_k_attention_short_stride(K);
    int qs = d + PAD, ks = d + PAD, vs = dv + PAD, os = dv + PAD;
    tg_real scale = (tg_real)(1 / sqrt((double)d));
    tg_real *q = filled((size_t)Q * qs, 1), *k = filled((size_t)K * ks, 2), *v = filled((size_t)K * vs, 3);
    tg_real *dO = filled((size_t)Q * os, 4), *out = malloc(sizeof(tg_real) * (size_t)Q * os);
    tg_real *gq = filled((size_t)Q * qs, 5), *gk = filled((size_t)K * ks, 6), *gv = filled((size_t)K * vs, 7);
    tg_real *gq0 = filled((size_t)Q * qs, 5), *gk0 = filled((size_t)K * ks, 6), *gv0 = filled((size_t)K * vs, 7);
    tg_real *P = malloc(sizeof(tg_real) * (size_t)Q * KP);
    tg_real *zf = calloc((size_t)Q * KP, sizeof(tg_real));
    int *lim = malloc(sizeof(int) * (size_t)Q);
    for (int i = 0; i < Q * os; i++) out[i] = SENTINEL;
    for (int i = 0; i < Q; i++) {
        lim[i] = c->mask == 1 ? (i * 7 + 3) % (K + 3) : c->mask == 2 ? (i + 1 < K ? i + 1 : K) : K;
        for (int j = 0; j < K; j++) zf[(size_t)i * KP + j] = !c->dropout ? 1 : (i * K + j) % 4 == 1 ? 0 : (tg_real)1.25;
    }
    size_t ns = tg_k_attention_short_scratch(Q, K, d, dv);
    tg_real *scratch = malloc(sizeof(tg_real) * (ns + 64));
    for (int i = 0; i < 64; i++) scratch[ns + (size_t)i] = SENTINEL;

    int old = tg__isa_cap(cap);
    tg_attn_entry e = {Q, K, d, dv, scale, q, k, v, qs, ks, vs, os, lim, false, 0, 0, 0, false, false, false};
    tg_k_attention_short_forward(&e, c->dropout ? zf : NULL, out, P, scratch);
    tg_k_attention_short_backward(&e, P, c->dropout ? zf : NULL, dO, gq, gk, gv, scratch);
    tg_k_attention_short_backward(&e, P, c->dropout ? zf : NULL, dO, NULL, NULL, NULL, scratch); /* nothing wanted */
    tg__isa_cap(old);

    /* the formulas, in double */
    double *Sr = calloc((size_t)Q * K, sizeof(double)), *Pr = calloc((size_t)Q * K, sizeof(double));
    double *Pdr = calloc((size_t)Q * K, sizeof(double)), *dS = calloc((size_t)Q * K, sizeof(double));
    for (int i = 0; i < Q; i++) {
        int n = lim[i] == 0 || lim[i] > K ? K : lim[i];
        double m = -INFINITY, sum = 0;
        for (int j = 0; j < K; j++) {
            double s = 0;
            for (int t = 0; t < d; t++) s += (double)q[i * qs + t] * k[j * ks + t];
            Sr[i * K + j] = lim[i] == 0 ? 0 : s * scale;
            if (j < n && Sr[i * K + j] > m) m = Sr[i * K + j];
        }
        for (int j = 0; j < n; j++) sum += exp(Sr[i * K + j] - m);
        for (int j = 0; j < K; j++) {
            Pr[i * K + j] = j < n ? exp(Sr[i * K + j] - m) / sum : 0;
            Pdr[i * K + j] = Pr[i * K + j] * (c->dropout ? (double)zf[(size_t)i * KP + j] : 1);
        }
        double D = 0, dP[64];
        for (int j = 0; j < K; j++) {
            dP[j] = 0;
            for (int t = 0; t < dv; t++) dP[j] += (double)dO[i * os + t] * v[j * vs + t];
            D += Pdr[i * K + j] * dP[j];
        }
        for (int j = 0; j < K; j++) dS[i * K + j] = lim[i] == 0 ? 0 : Pdr[i * K + j] * dP[j] - Pr[i * K + j] * D;
    }
#ifdef TG_DOUBLE
    const double tol = 1e-12;
#else
    const double tol = 2e-5;
#endif
    char what[96];
    snprintf(what, sizeof what, "Q%d K%d d%d dv%d mask %d%s at ISA %d", Q, K, d, dv, c->mask,
             c->dropout ? " dropout" : "", cap);
    for (int i = 0; i < Q; i++)
        for (int j = 0; j < KP; j++) {
            double want = j < K ? Pr[i * K + j] : 0, got = P[(size_t)i * KP + j];
            cr_expect(fabs(got - want) <= tol, "%s: P[%d,%d] = %g, want %g", what, i, j, got, want);
        }
    for (int i = 0; i < Q; i++)
        for (int t = 0; t < os; t++) {
            double want = 0;
            for (int j = 0; t < dv && j < K; j++) want += Pdr[i * K + j] * v[j * vs + t];
            if (t >= dv) {
                cr_expect(out[i * os + t] == SENTINEL, "%s: out[%d,%d] written past dv", what, i, t);
                continue;
            }
            cr_expect(fabs(out[i * os + t] - want) <= tol * (1 + fabs(want)), "%s: out[%d,%d] = %g, want %g", what, i,
                      t, (double)out[i * os + t], want);
        }
    expect_grad(what, "dq", gq, gq0, Q, qs, d, K, scale, dS, K, 1, k, ks, tol);
    expect_grad(what, "dk", gk, gk0, K, ks, d, Q, scale, dS, 1, K, q, qs, tol);
    expect_grad(what, "dv", gv, gv0, K, vs, dv, Q, 1, Pdr, 1, K, dO, os, tol);
    for (int i = 0; i < 64; i++) cr_expect(scratch[ns + (size_t)i] == SENTINEL, "%s: written past the scratch", what);
    free(Sr), free(Pr), free(Pdr), free(dS), free(scratch), free(lim), free(zf), free(P);
    free(q), free(k), free(v), free(dO), free(out), free(gq), free(gk), free(gv), free(gq0), free(gk0), free(gv0);
}

Test(row_kernels, short_attention_matches_the_formulas_at_every_isa) {
    static const short_case cases[] = {
        {16, 16, 16, 16, 0, true}, {16, 16, 16, 16, 1, false}, {13, 13, 5, 7, 2, true},  {1, 1, 1, 1, 0, false},
        {5, 37, 16, 20, 1, true},  {32, 32, 32, 32, 2, true},  {3, 17, 33, 8, 1, false}, {64, 64, 16, 64, 1, true},
        {64, 64, 12, 9, 2, false}, {20, 9, 48, 3, 0, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int cap = TG_ISA_PORTABLE; cap <= TG_ISA_AVX512; cap++) short_case_check(&cases[i], cap);
}

/* The attention's block products (kernels_attention_block.c): the same bits
 * as tg_k_gemm, both transposes of A, beta 0 and 1, shapes around the
 * register tiles (4 and 8 rows, 16 to 64 columns with tails) and the op's
 * 64 x 64 tiles, A and B rows strided as in the op. */
static void block_products_case(void) {
    static const int shapes[][3] = {{64, 64, 32}, {64, 32, 64}, {64, 64, 64}, {16, 17, 33}, {13, 50, 7},
                                    {5, 3, 1},    {1, 1, 1},    {9, 48, 16},  {64, 16, 64}, {37, 63, 64}};
    enum { LD = 200 };
    static tg_real A[LD * 64], B[LD * 64], C0[64 * 64], C1[64 * 64];
    for (int i = 0; i < LD * 64; i++) A[i] = val(i, 5), B[i] = val(i, 6);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int beta = 0; beta < 2; beta++) {
                int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
                for (int i = 0; i < 64 * 64; i++) C0[i] = C1[i] = val(i, 7);
                tg_k_attn_mm(ta, m, n, k, (tg_real)0.17, A, LD, B, LD, (tg_real)beta, C0, 64);
                tg_k_gemm(ta, false, m, n, k, (tg_real)0.17, A, LD, B, LD, (tg_real)beta, C1, 64);
                cr_expect(memcmp(C0, C1, sizeof C0) == 0, "%dx%dx%d trans_a %d beta %d at ISA level %d", m, n, k, ta,
                          beta, (int)tg_isa_level());
            }
}

Test(row_kernels, block_products_are_tg_k_gemm_bit_for_bit_at_every_isa) { at_every_isa(block_products_case); }

/* tg_k_attn_pack: copies and transposes exactly, and rounds as the bf16
 * GEMM does (tg__bf16_round_daz): ties, subnormals, infinities, NaN. */
static void pack_case(void) {
    enum { R = 37, CO = 21, RS = 30, LDT = 48 };
    static tg_real src[R * RS], dst[R * LDT], want[R * LDT];
    for (int i = 0; i < R * RS; i++) src[i] = val(i, 8) * (tg_real)1e3;
    float odd[] = {1.00390625f, 1.01171875f, -1.00390625f, 1e-40f, -1e-40f, INFINITY,
                   -INFINITY,   NAN,         0.0f,         -0.0f,  3.4e38f};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) src[i * 7] = (tg_real)odd[i];
    for (int tr = 0; tr < 2; tr++)
        for (int bf = 0; bf < 2; bf++) {
            int rows = tr ? CO : R, cols = tr ? R : CO;
            for (int i = 0; i < R * LDT; i++) dst[i] = want[i] = 0;
            for (int i = 0; i < R; i++)
                for (int c = 0; c < CO; c++) {
                    tg_real x = src[i * RS + c];
                    if (bf) x = (tg_real)tg__bf16_round_daz((float)x);
                    want[tr ? (size_t)c * LDT + i : (size_t)i * LDT + c] = x;
                }
            tg_k_attn_pack(R, CO, src, RS, tr, bf, dst, LDT);
            for (int i = 0; i < rows; i++)
                for (int c = 0; c < cols; c++) {
                    tg_real g = dst[(size_t)i * LDT + c], w = want[(size_t)i * LDT + c];
                    cr_expect(memcmp(&g, &w, sizeof g) == 0 || (isnan(g) && isnan(w)),
                              "transpose %d bf16 %d [%d,%d]: %g, want %g at ISA level %d", tr, bf, i, c, (double)g,
                              (double)w, (int)tg_isa_level());
                }
        }
}

Test(row_kernels, attention_pack_copies_transposes_and_rounds_at_every_isa) { at_every_isa(pack_case); }

/* tg_k_attn_row_dots: each row's sum in column order from 0, a multiply
 * and an add per term, bit for bit the plain loop's, for row counts around
 * the 16 lanes and column counts around a 16-column block (tails), rows
 * strided, y as reals and as bf16 bits. */
static void row_dots_case(void) {
    enum { NMAX = 40, CMAX = 37, XS = 41, YS = 45 };
    static tg_real x[NMAX * XS], y[NMAX * YS], out[NMAX + 1];
    static uint16_t y16[NMAX * YS];
    for (int i = 0; i < NMAX * XS; i++) x[i] = val(i, 9) * (tg_real)(i % 3 ? 1e-3 : 7);
    for (int i = 0; i < NMAX * YS; i++) {
        y[i] = val(i, 10) * (tg_real)(i % 4 ? 1 : 1e4);
        y16[i] = tg__bf16_from_float((float)y[i]);
    }
    static const int ns[] = {0, 1, 5, 16, 17, 40}, cs[] = {1, 7, 16, 32, 33, 37};
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
        for (size_t b = 0; b < sizeof cs / sizeof cs[0]; b++)
            for (int bf = 0; bf < 2; bf++) {
                int n = ns[a], cols = cs[b];
                out[n] = 12345;
                tg_k_attn_row_dots(n, cols, x, XS, bf ? NULL : y, bf ? y16 : NULL, YS, out);
                cr_expect(out[n] == 12345, "row_dots wrote past its %d rows", n);
                for (int i = 0; i < n; i++) {
                    tg_real s = 0;
                    for (int c = 0; c < cols; c++)
                        s += x[i * XS + c] * (bf ? (tg_real)tg__bf16_to_float(y16[i * YS + c]) : y[i * YS + c]);
                    cr_expect(memcmp(&s, &out[i], sizeof s) == 0,
                              "row_dots n %d cols %d bf16 %d row %d: %a, want %a at ISA level %d", n, cols, bf, i,
                              (double)out[i], (double)s, (int)tg_isa_level());
                }
            }
}

Test(row_kernels, attention_row_dots_are_the_plain_loop_at_every_isa) { at_every_isa(row_dots_case); }

/* tg_k_attn_narrow: tg__bf16_from_float's bits (ties to even, subnormals
 * kept, infinities, NaN made quiet) at every ISA, for row lengths around
 * 16 lanes, rows strided; nothing written past a row's columns. */
static void narrow_case(void) {
    enum { R = 5, CMAX = 37, LD = 40, RS = 43 };
    static tg_real src[R * LD];
    static uint16_t dst[R * RS];
    const float odd[] = {1.00390625f, 1.01171875f, -1.00390625f, 1e-40f, -1e-40f, INFINITY,  -INFINITY,
                         NAN,         -NAN,        0.0f,         -0.0f,  3.4e38f, 3.3961e38f};
    for (int i = 0; i < R * LD; i++) src[i] = val(i, 11) * (tg_real)(i % 5 ? 1 : 1e-30);
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) src[i * 3] = (tg_real)odd[i];
    static const int cs[] = {1, 15, 16, 17, 32, 37};
    for (size_t b = 0; b < sizeof cs / sizeof cs[0]; b++) {
        memset(dst, 0xAB, sizeof dst);
        tg_k_attn_narrow(R, cs[b], src, LD, dst, RS);
        for (int i = 0; i < R; i++)
            for (int c = 0; c < RS; c++) {
                uint16_t want = c < cs[b] ? tg__bf16_from_float((float)src[i * LD + c]) : 0xABAB;
                cr_expect(dst[i * RS + c] == want, "narrow cols %d [%d,%d]: %04x, want %04x at ISA level %d", cs[b], i,
                          c, dst[i * RS + c], want, (int)tg_isa_level());
            }
    }
}

Test(row_kernels, attention_narrow_rounds_as_tg_to_bf16_at_every_isa) { at_every_isa(narrow_case); }

/* tg_k_attn_store_rows: set writes acc + 0 (a -0 becomes +0, NaN and
 * infinities pass), else adds acc to the rows; the streaming path (set,
 * whole aligned 64-byte lines: widths 16, 32, 64, row strides of whole
 * lines) and the plain one (odd widths, an unaligned start or stride) give
 * those bits at every ISA, and nothing is written between the rows. */
static void store_rows_case(void) {
    enum { N = 6, W = 64, RS = 96 };
    static _Alignas(64) tg_real acc[N * W], g[N * RS + 32], want[N * RS + 32];
    for (int i = 0; i < N * W; i++) acc[i] = val(i, 12) * (tg_real)(i % 7 ? 1 : 1e-38);
    acc[3] = (tg_real)-0.0, acc[W + 5] = (tg_real)INFINITY, acc[2 * W + 1] = (tg_real)NAN, acc[16] = (tg_real)-0.0;
    static const int ws[] = {16, 32, 64, 7, 33};
    static const int64_t strides[] = {96, 80, 64, 81}; /* 81: rows off the lines */
    for (size_t a = 0; a < sizeof ws / sizeof ws[0]; a++)
        for (size_t s = 0; s < sizeof strides / sizeof strides[0]; s++)
            for (int off = 0; off < 2; off++)
                for (int set = 0; set < 2; set++) {
                    int w = ws[a];
                    int64_t rs = strides[s];
                    tg_real *dst = g + (off ? 3 : 0), *ref = want + (dst - g); /* 3: a start off the lines */
                    for (int i = 0; i < N * RS + 32; i++) g[i] = want[i] = val(i, 13);
                    for (int i = 0; i < N; i++)
                        for (int c = 0; c < w; c++) {
                            tg_real *r = ref + i * rs + c;
                            *r = set ? acc[i * w + c] + (tg_real)0 : *r + acc[i * w + c];
                        }
                    tg_k_attn_store_rows(N, w, acc, dst, rs, set);
                    cr_expect(!memcmp(g, want, sizeof g), "store_rows width %d stride %lld offset %d set %d at ISA %d",
                              w, (long long)rs, (int)(dst - g), set, (int)tg_isa_level());
                }
    tg_real z = 0;
    tg_k_attn_store_rows(1, 16, acc, g, 16, true);
    cr_expect(!memcmp(&g[3], &z, sizeof z), "a -0 of acc is stored as +0");
}

Test(row_kernels, attention_store_rows_are_the_plain_loop_at_every_isa) { at_every_isa(store_rows_case); }
