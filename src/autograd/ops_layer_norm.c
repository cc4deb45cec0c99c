/* Layer normalisation over the last axis (Ba, Kiros & Hinton, 2016), as
 * PyTorch's nn.LayerNorm, biased variance:
 *   mean = (1/d) sum_j x_j,  var = (1/d) sum_j (x_j - mean)^2,  rstd = 1/sqrt(var + eps)
 *   xhat_j = (x_j - mean) rstd,   y_j = xhat_j gamma_j + beta_j
 * Backward (the fused form of llm.c's layernorm_backward), per row:
 *   dxhat_j = g_j gamma_j
 *   dx_j    = rstd (dxhat_j - mean_k(dxhat_k) - xhat_j mean_k(dxhat_k xhat_k))
 *   dgamma_j = sum_rows g_j xhat_j,   dbeta_j = sum_rows g_j
 * mean and rstd of each row are saved; xhat is recomputed from them. */
#include "op.h"

#include <math.h>

typedef struct {
    tg_real *mean, *rstd; /* one per row, in the arena */
} layer_norm_state;

typedef struct {
    const tg_tensor *x, *gamma, *beta;
    tg_tensor *y, *gx, *gg, *gb;
    const layer_norm_state *st;
    const tg_real *g, *gam;
    int64_t d, rows;
    tg_real eps;
    bool fresh;
} layer_norm_ctx;

static void backward_dx_rows(void *ctx, int64_t begin, int64_t end, int tid) {
    const layer_norm_ctx *c = ctx;
    const tg_tensor *x = c->x;
    tg_tensor *gx = c->gx;
    const layer_norm_state *st = c->st;
    const tg_real *g = c->g, *gam = c->gam;
    int64_t d = c->d;
    bool fresh = c->fresh;
    (void)tid;
    for (int64_t r = begin; r < end; r++) {
        /* restrict and branch-free inner loops, so they run in vector lanes */
        const tg_real *restrict xr = x->data + r * d, *restrict gr = g + r * d;
        tg_real *restrict dx = gx->data + r * d;
        tg_real mu = st->mean[r], rs = st->rstd[r], sum_dxhat = 0, sum_dxhat_xhat = 0;
        if (gam) {
#pragma omp simd reduction(+ : sum_dxhat, sum_dxhat_xhat)
            for (int64_t j = 0; j < d; j++) {
                tg_real dxhat = gr[j] * gam[j];
                sum_dxhat += dxhat;
                sum_dxhat_xhat += dxhat * (xr[j] - mu) * rs;
            }
        } else {
#pragma omp simd reduction(+ : sum_dxhat, sum_dxhat_xhat)
            for (int64_t j = 0; j < d; j++) {
                sum_dxhat += gr[j];
                sum_dxhat_xhat += gr[j] * (xr[j] - mu) * rs;
            }
        }
        tg_real m1 = sum_dxhat / (tg_real)d, m2 = sum_dxhat_xhat / (tg_real)d;
        /* dx = ... on a fresh gradient (its memory may hold anything,
         * NaN included, so it is never read), else dx += ... */
        for (int64_t j = 0; j < d; j++) {
            tg_real dxhat = gr[j] * (gam ? gam[j] : 1), xhat = (xr[j] - mu) * rs;
            tg_real v = rs * (dxhat - m1 - xhat * m2);
            dx[j] = fresh ? v : dx[j] + v;
        }
    }
}

static void backward_param_blocks(void *ctx, int64_t begin, int64_t end, int tid) {
    const layer_norm_ctx *c = ctx;
    const tg_tensor *x = c->x;
    tg_tensor *gg = c->gg, *gb = c->gb;
    const layer_norm_state *st = c->st;
    const tg_real *g = c->g;
    int64_t d = c->d, rows = c->rows;
    (void)tid;
    for (int64_t blk = begin; blk < end; blk++) {
        int64_t j0 = blk * 64, w = d - j0 < 64 ? d - j0 : 64;
        tg_real sg[64] = {0}, sgx[64] = {0};
        for (int64_t r = 0; r < rows; r++) {
            const tg_real *gr = g + r * d + j0, *xr = x->data + r * d + j0;
            tg_real mu = st->mean[r], rs = st->rstd[r];
            for (int64_t j = 0; j < w; j++) {
                sg[j] += gr[j];
                sgx[j] += gr[j] * (xr[j] - mu) * rs;
            }
        }
        for (int64_t j = 0; j < w; j++) {
            if (gg) gg->data[j0 + j] += sgx[j];
            if (gb) gb->data[j0 + j] += sg[j];
        }
    }
}

static void layer_norm_backward(tg_node *n) {
    tg_tensor *x = n->in[0];
    bool affine = n->n_in == 3;
    tg_tensor *gamma = affine ? n->in[1] : NULL;
    bool fresh;
    tg_tensor *gx = tg_grad_begin(x, &fresh);
    tg_tensor *gg = affine ? tg_grad_of(n->in[1]) : NULL;
    tg_tensor *gb = affine ? tg_grad_of(n->in[2]) : NULL;
    const layer_norm_state *st = n->state;
    int64_t d = x->shape[x->ndim - 1], rows = x->size / d;
    const tg_real *g = n->out->grad->data;
    if (gx) {
        const tg_real *gam = affine ? gamma->data : NULL;
        layer_norm_ctx c = {.x = x, .gx = gx, .st = st, .g = g, .gam = gam, .d = d, .fresh = fresh};
        tg_parallel_for(rows, x->size > TG_PAR_MIN, backward_dx_rows, &c);
    }
    if (gg || gb) {
        /* Sums over rows, rows taken in order for every column (so the result
         * does not depend on the thread count); a thread owns a block of 64
         * columns and its inner loop runs along a row, in vector lanes. */
        int64_t nblk = (d + 63) / 64;
        layer_norm_ctx c = {.x = x, .gg = gg, .gb = gb, .st = st, .g = g, .d = d, .rows = rows};
        tg_parallel_for(nblk, x->size > TG_PAR_MIN, backward_param_blocks, &c);
    }
}
const tg_op tg_op_layer_norm = {"layer_norm", layer_norm_backward};

static void forward_rows(void *ctx, int64_t begin, int64_t end, int tid) {
    const layer_norm_ctx *c = ctx;
    const tg_tensor *x = c->x, *gamma = c->gamma, *beta = c->beta;
    tg_tensor *y = c->y;
    const layer_norm_state *st = c->st; /* writes go through its mean and rstd pointers */
    int64_t d = c->d;
    tg_real eps = c->eps;
    (void)tid;
    for (int64_t r = begin; r < end; r++) {
        const tg_real *xr = x->data + r * d;
        tg_real *yr = y->data + r * d;
        tg_real mu = 0, var = 0;
        /* simd: the sums run in vector lanes (a fixed order, whatever the
         * thread count) instead of one add after another. */
#pragma omp simd reduction(+ : mu)
        for (int64_t j = 0; j < d; j++) mu += xr[j];
        mu /= (tg_real)d;
#pragma omp simd reduction(+ : var)
        for (int64_t j = 0; j < d; j++) var += (xr[j] - mu) * (xr[j] - mu); /* two passes: no cancellation */
        var /= (tg_real)d;
        tg_real rs = 1 / TG_M(sqrt)(var + eps);
        st->mean[r] = mu;
        st->rstd[r] = rs;
        for (int64_t j = 0; j < d; j++) {
            tg_real xhat = (xr[j] - mu) * rs;
            yr[j] = gamma ? xhat * gamma->data[j] + beta->data[j] : xhat;
        }
    }
}

tg_tensor *tg_layer_norm(tg_tensor *x, tg_tensor *gamma, tg_tensor *beta, tg_real eps) {
    char b1[64], b2[64], b3[64];
    if (tg_any_null("layer_norm", 1, (const tg_tensor *const[]){x})) return NULL;
    if (!gamma != !beta) { /* one of them NULL: most likely an earlier failed call */
        tg_error_null("layer_norm");
        return NULL;
    }
    if (x->ndim == 0 || x->shape[x->ndim - 1] == 0) {
        tg_set_error("layer_norm: x %s has no last axis to normalise", tg_tshape(b1, x));
        return NULL;
    }
    int64_t d = x->shape[x->ndim - 1], rows = x->size / d;
    if (gamma && (gamma->ndim != 1 || gamma->shape[0] != d || beta->ndim != 1 || beta->shape[0] != d)) {
        tg_set_error("layer_norm: x %s with gamma %s and beta %s: gamma and beta must have shape (%lld)",
                     tg_tshape(b1, x), tg_tshape(b2, gamma), tg_tshape(b3, beta), (long long)d);
        return NULL;
    }
    if (!(eps >= 0)) {
        tg_set_error("layer_norm: x %s with eps = %g: eps must be >= 0", tg_tshape(b1, x), (double)eps);
        return NULL;
    }
    tg_tensor *y = tg_empty_arena(x->ndim, x->shape);
    layer_norm_state *st = tg_arena_alloc(sizeof *st);
    tg_real *buf = tg_arena_alloc(sizeof(tg_real) * (size_t)(2 * rows + 1));
    if (!y || !st || !buf) return NULL;
    st->mean = buf;
    st->rstd = buf + rows;
    layer_norm_ctx c = {.x = x, .gamma = gamma, .beta = beta, .y = y, .st = st, .d = d, .eps = eps};
    tg_parallel_for(rows, x->size > TG_PAR_MIN, forward_rows, &c);
    tg_node *n = gamma ? tg_node_record(&tg_op_layer_norm, y, 3, (tg_tensor *const[]){x, gamma, beta})
                       : tg_node_record(&tg_op_layer_norm, y, 1, &x);
    if (n) n->state = st;
    return y;
}
