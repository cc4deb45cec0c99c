/* The GEMM epilogue's add and bf16 results (tg_gemm_epilogue, kernels.h):
 *   - H16 and Y16 are tg_k_to_bf16 of the float v and f(v) bit for bit,
 *     with and without an activation, with a bias, a residual, both or
 *     neither, on shapes with tails (M, N not multiples of 32 or 6) and
 *     K in one block and in several;
 *   - v (left in C) is the product plus (res + bias): with C started at res
 *     + bias and beta = 1 (what the Linear ops did) the same bits on every
 *     engine but the AMX tiles, which start their sums from C (there within
 *     a float rounding of the sum's size);
 *   - the same bits at 1 and 2 threads;
 *   - with C not wanted (c_scratch), the same outputs;
 * on the float GEMM at every ISA level this CPU has and on every engine
 * of the bf16 GEMM. Compiled into both test binaries (the double build
 * checks the portable and AVX2 loops in double). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_test_util.h"
#include "tensor/kernels.h"
#include "tensor/half.h"
#include "tensor/simd.h"
#include "tensor/tensor_internal.h" /* tg__isa_cap, tg__bf16_engine_force */

static uint64_t lcg_state = 4711; /* gemm_test_util.h */

typedef void (*gemm_ep_fn)(bool ta, bool tb, int M, int N, int K, tg_real alpha, const tg_real *A, int lda,
                           const tg_real *B, int ldb, tg_real beta, tg_real *C, int ldc, const tg_gemm_epilogue *ep);

/* M, N, K: tails of the 6 x 32 and 32 x 32 tiles, one K block and several
 * (256 float, 512 AMX, 1024 vdpbf16ps), direct, packed and few-row paths
 * (3 x 700: the float GEMM's columns split among threads). */
static const int shapes[][3] = {{1, 1, 1},     {5, 7, 3},     {37, 33, 31},   {70, 45, 64},   {33, 100, 256},
                                {65, 97, 300}, {40, 70, 600}, {9, 130, 1100}, {130, 40, 257}, {3, 700, 600}};
#define N_SHAPES (int)(sizeof shapes / sizeof shapes[0])

/* One product with the epilogue (variant bits: 1 act, 2 bias, 4 res, 8 H16)
 * against C started at res + bias: what is checked is at the top. exact:
 * v must equal that C bit for bit. Returns nothing; asserts. */
static void check_one(gemm_fn plain, gemm_ep_fn with_ep, bool exact, int variant, int M, int N, int K,
                      const char *what) {
    const bool act = variant & 1, has_b = variant & 2, has_r = variant & 4, h16 = variant & 8;
    const int ldc = N + 3; /* padded: the padding must stay */
    const size_t nc = (size_t)M * ldc;
    tg_real *A = lcg_buf(&lcg_state, (size_t)M * K), *B = lcg_buf(&lcg_state, (size_t)N * K);
    tg_real *bias = lcg_buf(&lcg_state, (size_t)N), *res = lcg_buf(&lcg_state, nc);
    tg_real *C1 = malloc(nc * sizeof *C1), *C2 = malloc(nc * sizeof *C2), *f = malloc(nc * sizeof *f);
    uint16_t *Y16 = malloc(nc * sizeof *Y16), *H16 = malloc(nc * sizeof *H16), *want = malloc(nc * sizeof *want);
    cr_assert(C1 && C2 && f && Y16 && H16 && want);
    for (size_t i = 0; i < nc; i++) {
        tg_real s = has_r && has_b ? res[i] + bias[i % ldc < (size_t)N ? i % ldc : 0] : has_r ? res[i] : 0;
        if (!has_r && has_b) s = bias[i % ldc < (size_t)N ? i % ldc : 0];
        C1[i] = s;
        C2[i] = 5; /* beta 0: never read */
        Y16[i] = H16[i] = 0x1234;
    }
    /* the old way: C = res + b, then the product added with beta = 1 */
    plain(false, true, M, N, K, 1, A, K, B, K, has_b || has_r ? 1 : 0, C1, ldc);
    tg_gemm_epilogue ep = {.act = TG_UNARY_GELU_TANH,
                           .no_act = !act,
                           .Y16 = Y16,
                           .H16 = h16 ? H16 : NULL,
                           .bias = has_b ? bias : NULL,
                           .res = has_r ? res : NULL};
    with_ep(false, true, M, N, K, 1, A, K, B, K, 0, C2, ldc, &ep);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            size_t o = (size_t)i * ldc + j;
            if (exact)
                cr_assert(memcmp(&C1[o], &C2[o], sizeof *C1) == 0,
                          "%s variant %d %dx%dx%d: v(%d,%d) = %.9g, with C started at res + b %.9g", what, variant, M,
                          N, K, i, j, (double)C2[o], (double)C1[o]);
            else
                cr_assert(fabs((double)(C1[o] - C2[o])) <= 1e-5 * (fabs((double)C1[o]) + 1), "%s %dx%dx%d: v(%d,%d)",
                          what, M, N, K, i, j);
        }
    /* H16 and Y16: tg_k_to_bf16 of v and of f(v), row by row (the padding untouched) */
    for (int i = 0; i < M; i++) {
        tg_real *v = C2 + (size_t)i * ldc, *fr = f + (size_t)i * ldc;
        if (act)
            tg_k_unary(TG_UNARY_GELU_TANH, 0, v, fr, N);
        else
            memcpy(fr, v, sizeof *fr * (size_t)N);
        tg_k_to_bf16(fr, want + (size_t)i * ldc, N);
        for (int j = 0; j < N; j++)
            cr_assert(Y16[(size_t)i * ldc + j] == want[(size_t)i * ldc + j], "%s variant %d %dx%dx%d: Y16(%d,%d)", what,
                      variant, M, N, K, i, j);
        cr_assert(Y16[(size_t)i * ldc + N] == 0x1234, "%s: Y16's padding written", what);
        if (!h16) continue;
        tg_k_to_bf16(v, want + (size_t)i * ldc, N);
        for (int j = 0; j < N; j++)
            cr_assert(H16[(size_t)i * ldc + j] == want[(size_t)i * ldc + j], "%s variant %d %dx%dx%d: H16(%d,%d)", what,
                      variant, M, N, K, i, j);
    }
    /* the same bits at 2 threads */
    int saved = tg_get_num_threads();
    tg_set_num_threads(saved == 1 ? 2 : 1);
    tg_real *C3 = malloc(nc * sizeof *C3);
    uint16_t *Y3 = malloc(nc * sizeof *Y3);
    cr_assert(C3 && Y3);
    memcpy(C3, C2, nc * sizeof *C3);
    memcpy(Y3, Y16, nc * sizeof *Y3);
    ep.Y16 = Y3;
    with_ep(false, true, M, N, K, 1, A, K, B, K, 0, C3, ldc, &ep);
    tg_set_num_threads(saved);
    for (int i = 0; i < M; i++)
        cr_assert(memcmp(C3 + (size_t)i * ldc, C2 + (size_t)i * ldc, sizeof *C3 * (size_t)N) == 0 &&
                      memcmp(Y3 + (size_t)i * ldc, Y16 + (size_t)i * ldc, sizeof *Y3 * (size_t)N) == 0,
                  "%s %dx%dx%d: another thread count gives other bits (row %d)", what, M, N, K, i);
    free(A), free(B), free(bias), free(res), free(C1), free(C2), free(C3), free(f), free(Y16), free(Y3), free(H16),
        free(want);
}

static void all_cases(gemm_fn plain, gemm_ep_fn with_ep, bool exact, const char *what) {
    for (int s = 0; s < N_SHAPES; s++)
        for (int variant = 0; variant < 16; variant++)
            check_one(plain, with_ep, exact, variant, shapes[s][0], shapes[s][1], shapes[s][2], what);
}

Test(gemm_epilogue_bf16, float_gemm_at_every_isa) {
    for (int cap = TG_ISA_PORTABLE; cap <= TG_ISA_AMX; cap++) {
        int old = tg__isa_cap(cap);
        all_cases(tg_k_gemm, tg_k_gemm_ep, true, "float gemm");
        tg__isa_cap(old);
    }
}

Test(gemm_epilogue_bf16, bf16_gemm_on_every_engine) {
    for (int e = 0; e < N_ENGINES; e++) {
        if (!force_engine(ENGINE_NAMES[e])) continue;
        /* the AMX tiles (and their twin) start their sums from C: res + b
         * first there, last with the epilogue (float only: in double a
         * block's sum is added to C) */
        bool from_c = sizeof(tg_real) == 4 && strncmp(ENGINE_NAMES[e], "amx", 3) == 0;
        all_cases(tg_k_gemm_bf16, tg_k_gemm_bf16_ep, !from_c, ENGINE_NAMES[e]);
    }
    tg__bf16_engine_force(NULL);
}

/* C not wanted (ep.c_scratch: the finished blocks in a thread's buffer,
 * gemm_driver.c): Y16 and H16 the bits of the same product into C, at 1,
 * 2 and 4 threads (row, column and grid splits), on one K block (where
 * the buffer serves) and several (where C does), N past the AMX panel's
 * 1024 columns, M past a block's rows; the outputs' padding untouched. */
static void check_c_scratch(gemm_ep_fn with_ep, int M, int N, int K, const char *what) {
    const int ldc = N + 5;
    const size_t nc = (size_t)M * ldc;
    tg_real *A = lcg_buf(&lcg_state, (size_t)M * K), *B = lcg_buf(&lcg_state, (size_t)N * K);
    tg_real *bias = lcg_buf(&lcg_state, (size_t)N), *res = lcg_buf(&lcg_state, nc), *C = malloc(nc * sizeof *C);
    uint16_t *y[2], *h[2];
    for (int t = 0; t < 2; t++) y[t] = malloc(nc * sizeof **y), h[t] = malloc(nc * sizeof **h);
    cr_assert(C && y[0] && y[1] && h[0] && h[1]);
    for (size_t i = 0; i < nc; i++) y[0][i] = h[0][i] = 0x1234;
    tg_gemm_epilogue ep = {.act = TG_UNARY_GELU_TANH, .Y16 = y[0], .H16 = h[0], .bias = bias, .res = res};
    with_ep(false, true, M, N, K, 1, A, K, B, K, 0, C, ldc, &ep);
    int saved = tg_get_num_threads();
    for (int nt = 1; nt <= 4; nt *= 2) {
        tg_set_num_threads(nt);
        for (size_t i = 0; i < nc; i++) y[1][i] = h[1][i] = 0x1234;
        ep.Y16 = y[1], ep.H16 = h[1], ep.c_scratch = true;
        with_ep(false, true, M, N, K, 1, A, K, B, K, 0, C, ldc, &ep);
        cr_assert(memcmp(y[0], y[1], nc * sizeof **y) == 0 && memcmp(h[0], h[1], nc * sizeof **h) == 0,
                  "%s %dx%dx%d at %d threads: C's blocks in a buffer give other bits", what, M, N, K, nt);
    }
    tg_set_num_threads(saved);
    free(A), free(B), free(bias), free(res), free(C), free(y[0]), free(y[1]), free(h[0]), free(h[1]);
}

Test(gemm_epilogue_bf16, c_scratch_gives_the_same_outputs) {
    static const int sh[][3] = {{37, 33, 31}, {70, 45, 64}, {130, 1100, 200}, {9, 130, 1100}, {200, 300, 256}};
    for (int s = 0; s < 5; s++) {
        for (int cap = TG_ISA_PORTABLE; cap <= TG_ISA_AMX; cap++) {
            int old = tg__isa_cap(cap);
            check_c_scratch(tg_k_gemm_ep, sh[s][0], sh[s][1], sh[s][2], "float gemm");
            tg__isa_cap(old);
        }
        for (int e = 0; e < N_ENGINES; e++)
            if (force_engine(ENGINE_NAMES[e]))
                check_c_scratch(tg_k_gemm_bf16_ep, sh[s][0], sh[s][1], sh[s][2], ENGINE_NAMES[e]);
        tg__bf16_engine_force(NULL);
    }
}

/* Nothing to multiply (K = 0): v = res + b, and its bf16. */
Test(gemm_epilogue_bf16, k_zero) {
    tg_real bias[3] = {1.5, -2, 0.25}, res[6] = {1, 2, 3, 4, 5, 6}, C[6];
    uint16_t Y16[6];
    tg_gemm_epilogue ep = {.no_act = true, .Y16 = Y16, .bias = bias, .res = res};
    tg_k_gemm_ep(false, true, 2, 3, 0, 1, NULL, 1, NULL, 1, 0, C, 3, &ep);
    for (int i = 0; i < 6; i++) {
        cr_assert_eq(C[i], res[i] + bias[i % 3]);
        cr_assert_eq(Y16[i], tg__bf16_from_float((float)C[i]));
    }
}

/* ---- the activation's backward from a bf16 h (tg_k_unary_backward_bf16) ---
 * dh16 and db bit for bit those of the passes it replaces: h widened,
 * tg_k_unary_backward, tg_k_sum_to of the float d, tg_k_to_bf16; db
 * fresh and added to, and none; rows in one piece of the sums and in
 * several, columns with tails; at 1 and 2 threads. */
static void check_act_backward(tg_unary_kind act, int rows, int cols, int db_mode) {
    size_t n = (size_t)rows * cols;
    tg_real *hv = lcg_buf(&lcg_state, n), *gy = lcg_buf(&lcg_state, n), *hs = malloc(n * sizeof *hs);
    tg_real *d = malloc(n * sizeof *d), *db0 = lcg_buf(&lcg_state, (size_t)cols);
    tg_real *want_db = malloc((size_t)cols * sizeof *want_db), *db = malloc((size_t)cols * sizeof *db);
    uint16_t *h16 = malloc(n * sizeof *h16), *want = malloc(n * sizeof *want), *dh16 = malloc(n * sizeof *dh16);
    int64_t np = tg_k_unary_backward_bf16_part(rows, cols);
    tg_real *part = malloc((size_t)(np > 0 ? np : 1) * sizeof *part);
    cr_assert(hs && d && want_db && db && h16 && want && dh16 && part);
    for (size_t i = 0; i < n; i++) hv[i] *= 4;
    tg_k_to_bf16(hv, h16, (int64_t)n);
    /* the passes */
    tg_k_from_bf16(h16, hs, (int64_t)n);
    tg_k_unary_backward(act, 0, gy, hs, hs, d, (int64_t)n, true);
    tg_k_to_bf16(d, want, (int64_t)n);
    memcpy(want_db, db0, (size_t)cols * sizeof *db0);
    tg_tensor dt = {.magic = TG_MAGIC, .ndim = 2, .shape = {rows, cols}, .size = (int64_t)n, .data = d};
    tg_tensor bt = {.magic = TG_MAGIC, .ndim = 1, .shape = {cols}, .size = cols, .data = want_db};
    if (db_mode) tg_k_sum_to(&dt, &bt, db_mode == 2);
    int saved = tg_get_num_threads();
    for (int nt = 1; nt <= 2; nt++) {
        tg_set_num_threads(nt);
        memcpy(db, db0, (size_t)cols * sizeof *db0);
        tg_k_unary_backward_bf16(act, h16, gy, dh16, rows, cols, db_mode ? db : NULL, db_mode == 1, part);
        cr_assert(memcmp(dh16, want, n * sizeof *want) == 0, "act %d %dx%d at %d threads: dh16 differs", (int)act, rows,
                  cols, nt);
        if (db_mode)
            for (int j = 0; j < cols; j++)
                cr_assert(memcmp(&db[j], &want_db[j], sizeof *db) == 0,
                          "act %d %dx%d db mode %d at %d threads: db[%d] = %.9g, want %.9g", (int)act, rows, cols,
                          db_mode, nt, j, (double)db[j], (double)want_db[j]);
    }
    tg_set_num_threads(saved);
    free(hv), free(gy), free(hs), free(d), free(db0), free(want_db), free(db), free(h16), free(want), free(dh16),
        free(part);
}

Test(gemm_epilogue_bf16, activation_backward_from_bf16_is_the_passes) {
    static const int shapes2[][2] = {{1, 1}, {5, 70}, {128, 64}, {129, 65}, {300, 200}, {672, 96}};
    tg_unary_kind acts[] = {TG_UNARY_GELU_TANH, TG_UNARY_GELU, TG_UNARY_RELU};
    for (int a = 0; a < 3; a++)
        for (int s = 0; s < 6; s++)
            for (int mode = 0; mode < 3; mode++) check_act_backward(acts[a], shapes2[s][0], shapes2[s][1], mode);
}

/* tg_k_to_bf16_operand: h the bf16 GEMM's rounding of each value
 * (tg__bf16_from_bits_daz: subnormals flushed, NaN quiet) and db
 * tg_k_sum_to's column sums bit for bit (fresh, added to, none), on wide
 * values with float subnormals and NaNs, rows in one piece of the sums and
 * several, at 1 and 2 threads and every ISA level. */
static void check_operand(int rows, int cols, int db_mode) {
    size_t n = (size_t)rows * cols;
    tg_real *x = lcg_wide(&lcg_state, n), *db0 = lcg_buf(&lcg_state, (size_t)cols);
    tg_real *want_db = malloc((size_t)cols * sizeof *want_db), *db = malloc((size_t)cols * sizeof *db);
    uint16_t *h = malloc((n + 1) * sizeof *h);
    int64_t np = tg_k_unary_backward_bf16_part(rows, cols);
    tg_real *part = malloc((size_t)(np > 0 ? np : 1) * sizeof *part);
    cr_assert(want_db && db && h && part);
    for (size_t i = 7; i < n; i += 97) x[i] = (tg_real)tg__bits_float(0x7F800001u + (uint32_t)i); /* NaNs */
    memcpy(want_db, db0, (size_t)cols * sizeof *db0);
    tg_tensor xt = {.magic = TG_MAGIC, .ndim = 2, .shape = {rows, cols}, .size = (int64_t)n, .data = x};
    tg_tensor bt = {.magic = TG_MAGIC, .ndim = 1, .shape = {cols}, .size = cols, .data = want_db};
    if (db_mode) tg_k_sum_to(&xt, &bt, db_mode == 2);
    int saved = tg_get_num_threads();
    for (int cap = TG_ISA_PORTABLE; cap <= TG_ISA_AMX; cap++) {
        int old = tg__isa_cap(cap);
        for (int nt = 1; nt <= 2; nt++) {
            tg_set_num_threads(nt);
            memcpy(db, db0, (size_t)cols * sizeof *db0);
            h[n] = 0xBEEF;
            tg_k_to_bf16_operand(x, h, rows, cols, db_mode ? db : NULL, db_mode == 1, part);
            for (size_t i = 0; i < n; i++)
                cr_assert_eq(h[i], tg__bf16_from_bits_daz(tg__float_bits((float)x[i])), "%dx%d cap %d: h[%zu] of %a",
                             rows, cols, cap, i, (double)x[i]);
            cr_assert_eq(h[n], 0xBEEF);
            if (db_mode)
                for (int j = 0; j < cols; j++)
                    cr_assert(memcmp(&db[j], &want_db[j], sizeof *db) == 0 || (isnan(db[j]) && isnan(want_db[j])),
                              "%dx%d db mode %d cap %d at %d threads: db[%d] = %.9g, want %.9g", rows, cols, db_mode,
                              cap, nt, j, (double)db[j], (double)want_db[j]);
        }
        tg__isa_cap(old);
    }
    tg_set_num_threads(saved);
    free(x), free(db0), free(want_db), free(db), free(h), free(part);
}

Test(gemm_epilogue_bf16, operand_rounding_is_the_packers_and_db_the_sums) {
    static const int shapes2[][2] = {{1, 1}, {5, 70}, {129, 65}, {300, 200}, {672, 96}};
    for (int s = 0; s < 5; s++)
        for (int mode = 0; mode < 3; mode++) check_operand(shapes2[s][0], shapes2[s][1], mode);
}
