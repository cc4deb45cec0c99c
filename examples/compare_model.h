/* The layers compare_layers measures, in a header of their own so that the
 * program reads as its five measurements: one layer of each kind at width
 * d, stacks of them and the gradients through them (path lengths), and the
 * small model of the learning test (an embedding, the layer(s), a linear
 * head at the last position). */
#ifndef COMPARE_MODEL_H
#define COMPARE_MODEL_H

#include <math.h>
#include <stdlib.h>
#include "tgrad.h"

enum { K_CONV, K_RNN, K_GRU, K_ATTN, K_ATTN_STORED, K_MHA, NK };
static const char *kind_name[NK] = {"cnn", "rnn", "gru", "attention", "attention-stored", "mha"};

typedef struct { /* one layer of each kind at width d */
    tg_conv1d *conv;
    tg_rnn *rnn;
    tg_gru *gru;
    tg_mha *mha;
} layers;

/* Self-attention of X with itself, q = k = v = X (no projections: the
 * n^2 d part alone), through the fused op or the stored path
 * (scores, softmax, product kept in memory). */
static tg_tensor *self_attention(tg_tensor *x, bool fused) {
    tg_mask none = {0};
    if (fused) return tg_attention(x, x, x, none, 0, NULL);
    return tg_matmul(tg_masked_softmax(tg_score_scaled_dot(x, x), none), x);
}

static tg_tensor *layer_forward(layers *L, int kind, tg_tensor *x) {
    tg_mask none = {0};
    switch (kind) {
    case K_CONV: return tg_conv1d_forward(L->conv, x);
    case K_RNN: return tg_rnn_forward(L->rnn, x);
    case K_GRU: return tg_gru_forward(L->gru, x);
    case K_ATTN: return self_attention(x, true);
    case K_ATTN_STORED: return self_attention(x, false);
    default: return tg_mha_forward(L->mha, x, x, x, none);
    }
}

/* ---- path length: gradients of a stack of layers -------------------------- */
typedef struct {
    int kind, depth;
    tg_conv1d **conv;
    tg_rnn *rnn;
    tg_gru *gru;
} stack;

static tg_tensor *stack_forward(stack *s, tg_tensor *x) {
    tg_tensor *h = x;
    for (int l = 0; l < s->depth && h; l++) {
        if (s->kind == K_CONV)
            h = tg_conv1d_forward(s->conv[l], h);
        else if (s->kind == K_RNN)
            h = tg_rnn_forward(s->rnn, h); /* its layers are inside */
        else if (s->kind == K_GRU)
            h = tg_gru_forward(s->gru, h);
        else
            h = self_attention(h, true);
        if (s->kind != K_CONV && s->kind != K_ATTN) break;
    }
    return h;
}

static stack stack_new(int kind, int depth, int d, int k, tg_rng *rng) {
    stack s = {.kind = kind, .depth = depth};
    if (kind == K_CONV) {
        s.conv = calloc((size_t)depth, sizeof *s.conv);
        for (int l = 0; l < depth; l++) s.conv[l] = tg_conv1d_new(d, d, k, 1, true, rng);
    }
    if (kind == K_RNN) s.rnn = tg_rnn_new(d, d, depth, rng);
    if (kind == K_GRU) s.gru = tg_gru_new(d, d, depth, rng);
    return s;
}
static void stack_free(stack *s) {
    if (s->conv)
        for (int l = 0; l < s->depth; l++) tg_conv1d_free(s->conv[l]);
    free(s->conv);
    tg_rnn_free(s->rnn);
    tg_gru_free(s->gru);
}

/* G[t * n + s] = || dy_t / dx_s ||, y_t summed over features. */
static int path_gradients(stack *s, int n, int d, tg_rng *rng, double *G, int only_t) {
    tg_tensor *x = tg_randn(TG_SHAPE(1, n, d), rng);
    tg_set_requires_grad(x, true);
    int rc = 0;
    for (int t = only_t < 0 ? 0 : only_t; t < n && rc == 0; t++) {
        tg_scope_begin();
        tg_zero_grad(x);
        tg_tensor *y = stack_forward(s, x);
        if (!y) {
            rc = -1;
            tg_scope_end();
            break;
        }
        tg_tensor *seed = tg_zeros(TG_SHAPE(1, n, y->shape[2]));
        for (int j = 0; j < y->shape[2]; j++) seed->data[(int64_t)t * y->shape[2] + j] = 1;
        if (tg_backward_seed(y, seed) != 0) rc = -1;
        for (int u = 0; u < n && rc == 0; u++) {
            double acc = 0;
            for (int j = 0; j < d; j++) acc += (double)x->grad->data[u * d + j] * x->grad->data[u * d + j];
            G[(int64_t)t * n + u] = sqrt(acc);
        }
        tg_scope_end();
        if (only_t >= 0) break;
    }
    tg_free(x);
    return rc;
}

/* Layers needed before y_{n-1} depends on x_0: the smallest depth with
 * |dy_{n-1}/dx_0| > 1e-30 max_s |dy_{n-1}/dx_s| (far above float's
 * underflow, so: any dependence at all), or -1 beyond max_depth. *rel gets
 * that ratio at the depth found: how strongly it depends (a 1e-6 threshold
 * instead would say a 63-layer CNN or a 32-step RNN never reaches x_0: the
 * gradient along the long path is ~1e-14 of the largest one). */
static int layers_needed(int kind, int n, int d, int max_depth, tg_rng *rng, double *rel) {
    double *G = malloc(sizeof(double) * (size_t)n * n);
    int found = -1;
    for (int depth = 1; depth <= max_depth && found < 0; depth++) {
        stack s = stack_new(kind, depth, d, 3, rng);
        if (path_gradients(&s, n, d, rng, G, n - 1) == 0) {
            const double *row = G + (int64_t)(n - 1) * n;
            double mx = 0;
            for (int u = 0; u < n; u++) mx = fmax(mx, row[u]);
            if (row[0] > 1e-30 * mx) {
                found = depth;
                *rel = row[0] / mx;
            }
        }
        stack_free(&s);
        if (kind != K_CONV && found < 0 && depth >= 1 && kind != K_ATTN) break; /* recurrent: depth 1 decides */
    }
    free(G);
    return found;
}

/* ---- the learning test's model: tokens at distance m back ------------- */
#define NDIST 6
typedef struct {
    tg_embedding *emb;
    tg_posenc *pe;
    tg_conv1d *conv[2];
    tg_rnn *rnn;
    tg_gru *gru;
    tg_mha *mha;
    tg_linear *head;
    tg_params params;
} learner;

static tg_tensor *learner_forward(learner *m, int kind, const int *ids, int B, int n) {
    tg_tensor *h = tg_embedding_forward(m->emb, ids, TG_SHAPE(B, n));
    tg_mask none = {0};
    if (kind == K_CONV)
        h = tg_conv1d_forward(m->conv[1], tg_relu(tg_conv1d_forward(m->conv[0], h)));
    else if (kind == K_RNN)
        h = tg_rnn_forward(m->rnn, h);
    else if (kind == K_GRU)
        h = tg_gru_forward(m->gru, h);
    else {
        h = tg_posenc_forward(m->pe, h);
        h = tg_mha_forward(m->mha, h, h, h, none);
    }
    if (!h) return NULL;
    h = tg_reshape(tg_slice(h, 1, n - 1, n), TG_SHAPE(B, h->shape[2]));
    return tg_reshape(tg_linear_forward(m->head, h), TG_SHAPE(B * NDIST, -1));
}

/* The learner for a kind: V tokens of width d, sequences of n (the
 * sinusoidal table of the attention kind), NDIST * V logits. NULL members
 * on failure, with the error recorded. */
static void learner_new(learner *m, int kind, int V, int d, int n, tg_rng *rng) {
    tg_params_init(&m->params);
    m->emb = tg_embedding_new(V, d, 1, rng);
    tg_embedding_params(m->emb, &m->params, "emb");
    if (kind == K_CONV)
        for (int l = 0; l < 2; l++) {
            m->conv[l] = tg_conv1d_new(d, d, 3, 1, true, rng);
            tg_conv1d_params(m->conv[l], &m->params, l ? "conv1" : "conv0");
        }
    if (kind == K_RNN) {
        m->rnn = tg_rnn_new(d, d, 2, rng);
        tg_rnn_params(m->rnn, &m->params, "rnn");
    }
    if (kind == K_GRU) {
        m->gru = tg_gru_new(d, d, 1, rng);
        tg_gru_params(m->gru, &m->params, "gru");
    }
    if (kind == K_MHA) {
        m->pe = tg_posenc_new(d, 0, n, rng);
        m->mha = tg_mha_new(d, d, d, d, 4, 0, false, rng);
        tg_mha_params(m->mha, &m->params, "mha");
    }
    m->head = tg_linear_new(d, NDIST * V, true, rng);
    tg_linear_params(m->head, &m->params, "head");
}

static void learner_free(learner *m) {
    tg_params_free(&m->params);
    tg_embedding_free(m->emb);
    tg_posenc_free(m->pe);
    tg_conv1d_free(m->conv[0]);
    tg_conv1d_free(m->conv[1]);
    tg_rnn_free(m->rnn);
    tg_gru_free(m->gru);
    tg_mha_free(m->mha);
    tg_linear_free(m->head);
}

#endif
