/* Layer normalisation's row loops; the formulas and their derivation are in
 * autograd/ops_layer_norm.c, which checks shapes and records the node. Each
 * loop is built for the baseline, AVX2 and AVX-512 (TG_ISA_DISPATCH); a
 * row's sums run in vector lanes, so they round as the ISA's width orders
 * them, and the same at any thread count. */
#include "kernels.h"
#include "parallel.h"
#include "simd.h"

typedef struct {
    const tg_real *x, *gamma, *beta, *g, *mean, *rstd;
    tg_real *y, *mean_out, *rstd_out, *dx, *dgamma, *dbeta; /* mean_out, rstd_out: the forward's */
    uint16_t *y16;                                          /* the forward's y as bf16 (y NULL) */
    int64_t d, rows;
    tg_real eps;
    bool fresh;
    /* backward_params: pieces of `per` rows x 64 columns; part [chunks, 2 d]
     * holds each row chunk's sums (NULL: one chunk, summed into dgamma, dbeta) */
    tg_real *part;
    int64_t chunks, per, cblocks;
} norm_ctx;

/* mean and biased variance in one pass, over the row shifted by its first
 * element k = x_0 (the shifted data of Chan, Golub & LeVeque, "Algorithms
 * for computing the sample variance", 1983):
 *   s1 = sum_j (x_j - k),  s2 = sum_j (x_j - k)^2,
 *   mean = k + s1/d,  var = (s2 - s1 (s1/d)) / d.
 * The subtraction loses a factor s2 / (d var) = 1 + (x_0 - mean)^2 / var of
 * precision: at most d, as |x_0 - mean| <= sqrt(d - 1) sd (Samuelson's
 * inequality), 1 + z^2 for an x_0 z sd from the mean; E[x^2] - E[x]^2 (no
 * shift) loses 1 + mean^2 / var, without bound. y = ((x - k) - s1/d) rstd
 * gamma + beta uses the shifted row too: x - k is exact for x within a
 * factor 2 of k (Sterbenz), so a row far from 0 keeps the digits that its
 * mean rounded to a tg_real would lose. So the saved "mean" is s1/d, the
 * mean less x_0, and the backward rebuilds xhat = ((x - x_0) - s1/d) rstd
 * as the forward computed it: from k + s1/d rounded, xhat was off by up to
 * 5% on rows of 1e4 + N(0, 1e-2), and the gradients with it. */
#define NORM_COLS 1024 /* a bf16 y's row is made this many values at a time, in a 4 KB stack row (L1) */
TG_KERNEL_BODY void forward_rows_body(void *ctx, int64_t begin, int64_t end, int tid) {
    const norm_ctx *c = ctx;
    const int64_t d = c->d;
    const tg_real *restrict gamma = c->gamma, *restrict beta = c->beta;
    _Alignas(64) tg_real t[NORM_COLS];
    (void)tid;
    for (int64_t r = begin; r < end; r++) {
        const tg_real *restrict xr = c->x + r * d;
        tg_real *restrict yr = c->y ? c->y + r * d : NULL;
        tg_real k = xr[0], s1 = 0, s2 = 0;
#pragma omp simd reduction(+ : s1, s2)
        for (int64_t j = 0; j < d; j++) {
            tg_real t = xr[j] - k;
            s1 += t;
            s2 += t * t;
        }
        tg_real dm = s1 / (tg_real)d, var = (s2 - s1 * dm) / (tg_real)d;
        if (var < 0) var = 0; /* only by rounding, when d nears 1/epsilon; a NaN stays */
        tg_real rs = 1 / TG_M(sqrt)(var + c->eps);
        c->mean_out[r] = dm;
        c->rstd_out[r] = rs;
        if (c->y16) /* a stack row at a time, rounded by the row kernel: no float row in memory */
            for (int64_t j0 = 0; j0 < d; j0 += NORM_COLS) {
                const int64_t n = d - j0 < NORM_COLS ? d - j0 : NORM_COLS;
                const tg_real *restrict xs = xr + j0;
                if (gamma)
                    for (int64_t j = 0; j < n; j++) t[j] = ((xs[j] - k) - dm) * rs * gamma[j0 + j] + beta[j0 + j];
                else
                    for (int64_t j = 0; j < n; j++) t[j] = ((xs[j] - k) - dm) * rs;
                tg_k_to_bf16_row(t, c->y16 + r * d + j0, n);
            }
        else if (gamma)
            for (int64_t j = 0; j < d; j++) yr[j] = ((xr[j] - k) - dm) * rs * gamma[j] + beta[j];
        else
            for (int64_t j = 0; j < d; j++) yr[j] = ((xr[j] - k) - dm) * rs;
    }
}
TG_ISA_DISPATCH(forward_rows, (void *ctx, int64_t begin, int64_t end, int tid), (ctx, begin, end, tid))

void tg_k_layer_norm(const tg_real *x, const tg_real *gamma, const tg_real *beta, tg_real *y, tg_real *mean,
                     tg_real *rstd, int64_t rows, int64_t d, tg_real eps) {
    norm_ctx c = {.x = x, .gamma = gamma, .beta = beta, .y = y, .mean_out = mean, .rstd_out = rstd, .d = d, .eps = eps};
    tg_parallel_for_ns(rows, (double)(rows * d) * TG_NS_POLY, forward_rows, &c);
}

void tg_k_layer_norm_bf16(const tg_real *x, const tg_real *gamma, const tg_real *beta, uint16_t *y, tg_real *mean,
                          tg_real *rstd, int64_t rows, int64_t d, tg_real eps) {
    norm_ctx c = {
        .x = x, .gamma = gamma, .beta = beta, .y16 = y, .mean_out = mean, .rstd_out = rstd, .d = d, .eps = eps};
    tg_parallel_for_ns(rows, (double)(rows * d) * TG_NS_POLY, forward_rows, &c);
}

/* dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)), dxhat = g gamma,
 * for row r. */
static inline void dx_row(const norm_ctx *c, int64_t r) {
    const int64_t d = c->d;
    const tg_real *restrict gam = c->gamma;
    const tg_real *restrict xr = c->x + r * d, *restrict gr = c->g + r * d;
    tg_real *restrict dx = c->dx + r * d;
    tg_real k = xr[0], dm = c->mean[r], rs = c->rstd[r], sum_dxhat = 0, sum_dxhat_xhat = 0;
    if (gam) {
#pragma omp simd reduction(+ : sum_dxhat, sum_dxhat_xhat)
        for (int64_t j = 0; j < d; j++) {
            tg_real dxhat = gr[j] * gam[j];
            sum_dxhat += dxhat;
            sum_dxhat_xhat += dxhat * ((xr[j] - k) - dm) * rs;
        }
    } else {
#pragma omp simd reduction(+ : sum_dxhat, sum_dxhat_xhat)
        for (int64_t j = 0; j < d; j++) {
            sum_dxhat += gr[j];
            sum_dxhat_xhat += gr[j] * ((xr[j] - k) - dm) * rs;
        }
    }
    tg_real m1 = sum_dxhat / (tg_real)d, m2 = sum_dxhat_xhat / (tg_real)d;
    /* dx = ... on a fresh gradient (its memory may hold anything, NaN
     * included, so it is never read), else dx += ... */
    for (int64_t j = 0; j < d; j++) {
        tg_real dxhat = gr[j] * (gam ? gam[j] : 1), xhat = ((xr[j] - k) - dm) * rs;
        tg_real v = rs * (dxhat - m1 - xhat * m2);
        dx[j] = c->fresh ? v : dx[j] + v;
    }
}

/* Row r's terms of dgamma and dbeta over columns j0.. (w of them) added to
 * sgx[0..w) and sg[0..w): g_j xhat_j and g_j. */
static inline void param_row(const norm_ctx *c, int64_t r, int64_t j0, int64_t w, tg_real *restrict sgx,
                             tg_real *restrict sg) {
    const int64_t d = c->d;
    const tg_real *restrict gr = c->g + r * d + j0, *restrict xr = c->x + r * d + j0;
    tg_real kx = c->x[r * d], dm = c->mean[r], rs = c->rstd[r];
    for (int64_t j = 0; j < w; j++) {
        sg[j] += gr[j];
        sgx[j] += gr[j] * ((xr[j] - kx) - dm) * rs;
    }
}

TG_KERNEL_BODY void backward_dx_rows_body(void *ctx, int64_t begin, int64_t end, int tid) {
    (void)tid;
    for (int64_t r = begin; r < end; r++) dx_row(ctx, r);
}
TG_ISA_DISPATCH(backward_dx_rows, (void *ctx, int64_t begin, int64_t end, int tid), (ctx, begin, end, tid))

void tg_k_layer_norm_backward_dx(const tg_real *x, const tg_real *g, const tg_real *gamma, const tg_real *mean,
                                 const tg_real *rstd, tg_real *dx, int64_t rows, int64_t d, bool fresh) {
    norm_ctx c = {.x = x, .g = g, .gamma = gamma, .mean = mean, .rstd = rstd, .dx = dx, .d = d, .fresh = fresh};
    tg_parallel_for_ns(rows, (double)(rows * d) * TG_NS_POLY, backward_dx_rows, &c);
}

/* dgamma_j += sum_rows g_j xhat_j, dbeta_j += sum_rows g_j, in pieces of
 * LN_ROWS rows by 64 columns: each row chunk sums its rows in order into its
 * own scratch row, then each column adds the chunks' sums in chunk order
 * (backward_param_combine). The pieces depend on the shape only, so the
 * result does not depend on the thread count; ceil(rows / 128) ceil(d / 64)
 * of them (16 x 2 for gpt-mini's 2048 rows of 128), where column blocks
 * alone gave d / 64 (2) and left the other threads idle. The inner loop
 * runs along a row, in vector lanes. */
#define LN_ROWS 128
TG_KERNEL_BODY void backward_param_blocks_body(void *ctx, int64_t begin, int64_t end, int tid) {
    const norm_ctx *c = ctx;
    const int64_t d = c->d;
    (void)tid;
    for (int64_t p = begin; p < end; p++) {
        int64_t k = p / c->cblocks, j0 = p % c->cblocks * 64, w = d - j0 < 64 ? d - j0 : 64;
        int64_t r0 = k * c->per, r1 = r0 + c->per < c->rows ? r0 + c->per : c->rows;
        tg_real sg[64] = {0}, sgx[64] = {0};
        for (int64_t r = r0; r < r1; r++) param_row(c, r, j0, w, sgx, sg);
        tg_real *pgx = c->part ? c->part + k * 2 * d + j0 : c->dgamma ? c->dgamma + j0 : NULL;
        tg_real *pg = c->part ? c->part + k * 2 * d + d + j0 : c->dbeta ? c->dbeta + j0 : NULL;
        for (int64_t j = 0; j < w; j++) {
            if (c->part) {
                pgx[j] = sgx[j], pg[j] = sg[j];
            } else {
                if (pgx) pgx[j] += sgx[j];
                if (pg) pg[j] += sg[j];
            }
        }
    }
}
TG_ISA_DISPATCH(backward_param_blocks, (void *ctx, int64_t begin, int64_t end, int tid), (ctx, begin, end, tid))

/* dx and the parameters' chunk sums in one pass over x and g (which a
 * pass each read twice from memory, the rows being larger than the L2):
 * chunk k's rows in order, each row's dx (dx_row) and then its terms
 * added to the chunk's row of part (param_row over all columns, from
 * zero): per column the sums of backward_param_blocks, term for term in
 * the same order, hence its bits. */
TG_KERNEL_BODY void backward_chunks_body(void *ctx, int64_t begin, int64_t end, int tid) {
    const norm_ctx *c = ctx;
    const int64_t d = c->d;
    (void)tid;
    for (int64_t k = begin; k < end; k++) {
        int64_t r0 = k * c->per, r1 = r0 + c->per < c->rows ? r0 + c->per : c->rows;
        tg_real *sgx = c->part + k * 2 * d, *sg = sgx + d;
        for (int64_t j = 0; j < 2 * d; j++) sgx[j] = 0;
        for (int64_t r = r0; r < r1; r++) {
            dx_row(c, r);
            param_row(c, r, 0, d, sgx, sg);
        }
    }
}
TG_ISA_DISPATCH(backward_chunks, (void *ctx, int64_t begin, int64_t end, int tid), (ctx, begin, end, tid))

/* Column blocks [b, e): the row chunks' sums, in chunk order, into dgamma and dbeta. */
static void backward_param_combine(void *ctx, int64_t b, int64_t e, int tid) {
    const norm_ctx *c = ctx;
    const int64_t d = c->d, j1 = e * 64 < d ? e * 64 : d;
    (void)tid;
    for (int64_t j = b * 64; j < j1; j++) {
        tg_real sgx = 0, sg = 0;
        for (int64_t k = 0; k < c->chunks; k++) sgx += c->part[k * 2 * d + j], sg += c->part[k * 2 * d + d + j];
        if (c->dgamma) c->dgamma[j] += sgx;
        if (c->dbeta) c->dbeta[j] += sg;
    }
}

/* The chunks' sums (part) into dgamma and dbeta: a single chunk's added
 * straight (as backward_param_blocks adds its sums when it has no part),
 * several in chunk order (backward_param_combine). */
static void params_from_part(norm_ctx *c) {
    if (c->chunks > 1) {
        tg_parallel_for_ns(c->cblocks, (double)(c->chunks * 2 * c->d) * TG_NS_STREAM, backward_param_combine, c);
        return;
    }
    for (int64_t j = 0; j < c->d; j++) {
        if (c->dgamma) c->dgamma[j] += c->part[j];
        if (c->dbeta) c->dbeta[j] += c->part[c->d + j];
    }
}

void tg_k_layer_norm_backward_params(const tg_real *x, const tg_real *g, const tg_real *mean, const tg_real *rstd,
                                     tg_real *dgamma, tg_real *dbeta, int64_t rows, int64_t d) {
    norm_ctx c = {.x = x, .g = g, .mean = mean, .rstd = rstd, .dgamma = dgamma, .dbeta = dbeta, .d = d, .rows = rows};
    c.cblocks = (d + 63) / 64;
    c.chunks = (rows + LN_ROWS - 1) / LN_ROWS;
    if (c.chunks > 1) c.part = tg_arena_alloc(sizeof(tg_real) * (size_t)(c.chunks * 2 * d));
    if (!c.part) c.chunks = 1; /* one chunk (or no memory for the scratch): straight into dgamma, dbeta */
    c.per = c.chunks > 1 ? LN_ROWS : rows;
    tg_parallel_for_ns(c.chunks * c.cblocks, (double)(rows * d) * TG_NS_POLY, backward_param_blocks, &c);
    if (c.part) params_from_part(&c);
}

void tg_k_layer_norm_backward(const tg_real *x, const tg_real *g, const tg_real *gamma, const tg_real *mean,
                              const tg_real *rstd, tg_real *dx, bool fresh, tg_real *dgamma, tg_real *dbeta,
                              int64_t rows, int64_t d) {
    norm_ctx c = {.x = x,
                  .g = g,
                  .gamma = gamma,
                  .mean = mean,
                  .rstd = rstd,
                  .dx = dx,
                  .fresh = fresh,
                  .dgamma = dgamma,
                  .dbeta = dbeta,
                  .d = d,
                  .rows = rows};
    c.cblocks = (d + 63) / 64;
    c.chunks = (rows + LN_ROWS - 1) / LN_ROWS;
    c.per = LN_ROWS;
    c.part = dx && (dgamma || dbeta) && rows > 0 ? tg_arena_alloc(sizeof(tg_real) * (size_t)(c.chunks * 2 * d)) : NULL;
    if (!c.part) { /* one of the two, or no memory for the chunks' sums: a pass each */
        if (dx) tg_k_layer_norm_backward_dx(x, g, gamma, mean, rstd, dx, rows, d, fresh);
        if (dgamma || dbeta) tg_k_layer_norm_backward_params(x, g, mean, rstd, dgamma, dbeta, rows, d);
        return;
    }
    tg_parallel_for_ns(c.chunks, (double)(rows * d) * 2 * TG_NS_POLY, backward_chunks, &c);
    params_from_part(&c);
}
