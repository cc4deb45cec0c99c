/* A sequence layer of a chosen kind (nn.h, tg_seq_layer): the layers that
 * d2l's "Comparing CNNs, RNNs, and Self-Attention" compares behind one
 * module, each mapping X [B, n, d] to [B, n, d], and what the chapter's
 * "maximum path length" column is, measured: the norm of every block
 * dy_t/dx_s of the Jacobian (tg_seq_layer_paths), and how many stacked
 * layers the last output needs to depend on the first input
 * (tg_seq_layer_reach); the "sequential operations" column, the longest
 * chain of dependent ops in its graph (tg_seq_layer_depth); and its time
 * (tg_seq_layer_time), whose growth with n is the "computational
 * complexity" column. Built from public modules and ops only. */
#include "module.h"
#include "../tensor/profile_internal.h"

#include <math.h>
#include <stdlib.h>

static const char *const kind_names[TG_SEQ_KINDS] = {"cnn", "rnn", "gru", "attention", "attention-stored", "mha"};

const char *tg_seq_kind_name(tg_seq_kind kind) { return (unsigned)kind < TG_SEQ_KINDS ? kind_names[kind] : NULL; }

tg_seq_layer *tg_seq_layer_new(const tg_seq_layer_config *c, tg_rng *rng) {
    if (!c || (unsigned)c->kind >= TG_SEQ_KINDS || c->dim < 1 || c->depth < 1 || c->depth > 4096 ||
        (c->kind == TG_SEQ_CNN && c->kernel < 1) || (c->kind == TG_SEQ_MHA && c->heads < 1)) {
        tg_set_error("seq_layer: %s", !c ? "NULL config"
                                      : (unsigned)c->kind >= TG_SEQ_KINDS
                                          ? "unknown kind"
                                          : "dim and depth (at most 4096) must be positive, and a CNN's kernel and "
                                            "an MHA's heads");
        return NULL;
    }
    bool cnn = c->kind == TG_SEQ_CNN, mha = c->kind == TG_SEQ_MHA;
    tg_seq_layer *m = calloc(1, sizeof *m);
    if (m) m->cfg = *c;
    if (m && cnn) m->conv = calloc((size_t)c->depth, sizeof *m->conv);
    if (m && mha) m->mha = calloc((size_t)c->depth, sizeof *m->mha);
    if (!m || (cnn && !m->conv) || (mha && !m->mha)) {
        tg_set_error("seq_layer: out of memory");
        tg_seq_layer_free(m);
        return NULL;
    }
    bool ok = true; /* the layers' weights drawn from rng one layer after another */
    for (int l = 0; ok && cnn && l < c->depth; l++)
        ok = (m->conv[l] = tg_conv1d_new(c->dim, c->dim, c->kernel, 1, true, rng)) != NULL;
    for (int l = 0; ok && mha && l < c->depth; l++)
        ok = (m->mha[l] = tg_mha_new(c->dim, c->dim, c->dim, c->dim, c->heads, 0, false, rng)) != NULL;
    if (ok && c->kind == TG_SEQ_RNN) ok = (m->rnn = tg_rnn_new(c->dim, c->dim, c->depth, rng)) != NULL;
    if (ok && c->kind == TG_SEQ_GRU) ok = (m->rnn = tg_gru_new(c->dim, c->dim, c->depth, rng)) != NULL;
    if (ok) return m;
    tg_seq_layer_free(m); /* the module's error is recorded */
    return NULL;
}

/* Self-attention of x with itself, q = k = v = x: the n^2 d part alone. */
static tg_tensor *self_attention(tg_tensor *x, bool fused) {
    tg_mask none = {0};
    if (fused) return tg_attention(x, x, x, none, 0, NULL);
    return tg_matmul(tg_masked_softmax(tg_score_scaled_dot(x, x), none), x);
}

tg_tensor *tg_seq_layer_forward(tg_seq_layer *m, tg_tensor *x) {
    if (!m || !x) {
        tg_set_error("seq_layer_forward: NULL %s", !m ? "layer" : "input");
        return NULL;
    }
    const tg_seq_layer_config *c = &m->cfg;
    if (c->kind == TG_SEQ_RNN) return tg_rnn_forward(m->rnn, x); /* its layers are inside */
    if (c->kind == TG_SEQ_GRU) return tg_gru_forward(m->rnn, x);
    tg_tensor *h = x;
    for (int l = 0; l < c->depth && h; l++) {
        if (c->kind == TG_SEQ_CNN && l > 0 && c->relu) h = tg_relu(h);
        if (c->kind == TG_SEQ_CNN)
            h = tg_conv1d_forward(m->conv[l], h);
        else if (c->kind == TG_SEQ_MHA)
            h = tg_mha_forward(m->mha[l], h, h, h, (tg_mask){0});
        else
            h = self_attention(h, c->kind == TG_SEQ_ATTENTION);
    }
    return h;
}

int tg_seq_layer_params(tg_seq_layer *m, tg_params *p, const char *prefix) {
    if (!m || !p) {
        tg_set_error("seq_layer_params: NULL argument");
        return -1;
    }
    const char *base = prefix && prefix[0] ? prefix : tg_seq_kind_name(m->cfg.kind);
    int n = m->cfg.kind == TG_SEQ_CNN || m->cfg.kind == TG_SEQ_MHA ? m->cfg.depth : 0;
    for (int l = 0; l < n; l++) {
        char name[96]; /* <prefix>0, <prefix>1, ..., or <prefix> alone */
        snprintf(name, sizeof name, n > 1 ? "%.80s%d" : "%.80s", base, l);
        if ((m->conv ? tg_conv1d_params(m->conv[l], p, name) : tg_mha_params(m->mha[l], p, name)) != 0) return -1;
    }
    if (m->cfg.kind == TG_SEQ_RNN) return tg_rnn_params(m->rnn, p, base);
    if (m->cfg.kind == TG_SEQ_GRU) return tg_gru_params(m->rnn, p, base);
    return 0;
}

void tg_seq_layer_free(tg_seq_layer *m) {
    if (!m) return;
    int n = m->cfg.kind == TG_SEQ_CNN || m->cfg.kind == TG_SEQ_MHA ? m->cfg.depth : 0;
    for (int l = 0; l < n && m->conv; l++) tg_conv1d_free(m->conv[l]);
    for (int l = 0; l < n && m->mha; l++) tg_mha_free(m->mha[l]);
    if (m->cfg.kind == TG_SEQ_GRU)
        tg_gru_free(m->rnn);
    else
        tg_rnn_free(m->rnn);
    free(m->conv), free(m->mha), free(m);
}

int tg_seq_layer_paths(tg_seq_layer *m, tg_tensor *x, int only_t, double *G) {
    if (!m || !x || !G || x->ndim != 3 || x->shape[0] != 1 || !x->requires_grad || only_t >= x->shape[1]) {
        tg_set_error("seq_layer_paths: NULL argument, or x not [1, n, d] requiring grad, or row %d outside it", only_t);
        return -1;
    }
    int n = x->shape[1], d = x->shape[2], rc = 0;
    for (int t = only_t < 0 ? 0 : only_t; t < n && rc == 0; t++) {
        tg_scope_begin();
        tg_zero_grad(x);
        tg_tensor *y = tg_seq_layer_forward(m, x);
        tg_tensor *seed = y ? tg_zeros(TG_SHAPE(1, n, y->shape[2])) : NULL;
        rc = seed ? 0 : -1;
        for (int j = 0; seed && j < y->shape[2]; j++) seed->data[(int64_t)t * y->shape[2] + j] = 1; /* y_t's features */
        if (rc == 0 && tg_backward_seed(y, seed) != 0) rc = -1;
        for (int u = 0; u < n && rc == 0; u++) { /* ||dy_t/dx_u||: the gradient of sum(y_t) at x_u */
            double acc = 0;
            for (int j = 0; j < d; j++) acc += (double)x->grad->data[u * d + j] * x->grad->data[u * d + j];
            G[(int64_t)t * n + u] = sqrt(acc);
        }
        tg_scope_end();
        if (only_t >= 0) break;
    }
    return rc;
}

int tg_seq_layer_reach(const tg_seq_layer_config *c, int n, int max_depth, tg_rng *rng, double *rel) {
    double *G = c && n > 1 ? malloc(sizeof(double) * (size_t)n * (size_t)n) : NULL;
    if (!G) {
        tg_set_error("seq_layer_reach: %s", !c || n < 2 ? "NULL config or n < 2" : "out of memory");
        return -2;
    }
    int found = -1, err = 0;
    bool stacks = c->kind == TG_SEQ_CNN || c->kind == TG_SEQ_ATTENTION; /* else one layer decides */
    for (int depth = 1; depth <= max_depth && found < 0 && !err; depth++) {
        tg_seq_layer_config at = *c;
        at.depth = depth;
        tg_seq_layer *m = tg_seq_layer_new(&at, rng);
        tg_tensor *x = m ? tg_randn(TG_SHAPE(1, n, c->dim), rng) : NULL;
        if (x) tg_set_requires_grad(x, true);
        err = !x || tg_seq_layer_paths(m, x, n - 1, G) != 0;
        const double *row = G + (int64_t)(n - 1) * n;
        double mx = 0;
        for (int u = 0; u < n && !err; u++) mx = fmax(mx, row[u]);
        if (!err && row[0] > 1e-30 * mx) { /* any dependence at all: far above float's underflow */
            found = depth;
            if (rel) *rel = row[0] / mx;
        }
        tg_free(x);
        tg_seq_layer_free(m);
        if (!stacks) break;
    }
    free(G);
    return err ? -2 : found;
}

double tg_seq_layer_time(tg_seq_layer *m, int B, int n, int reps, bool backward, tg_rng *rng) {
    if (!m || B < 1 || n < 1 || reps < 1 || reps > 32) {
        tg_set_error("seq_layer_time: NULL layer, or B %d, n %d, reps %d outside B, n >= 1, reps 1..32", B, n, reps);
        return NAN;
    }
    double t[32];
    tg_tensor *x = tg_randn(TG_SHAPE(B, n, m->cfg.dim), rng); /* persistent: not timed */
    if (!x) return NAN;
    tg_set_requires_grad(x, backward);
    for (int r = 0; r <= reps; r++) { /* r = 0 warms up */
        tg_scope_begin();
        int64_t t0 = tg__prof_now();
        tg_tensor *y = tg_seq_layer_forward(m, x);
        if (y && backward) tg_backward(tg_sum_all(y));
        double dt = 1e-9 * (double)(tg__prof_now() - t0);
        tg_scope_end();
        if (!y) {
            tg_free(x);
            return NAN;
        }
        int k = r - 1; /* kept in increasing order (insertion): the median is the middle one */
        for (; k > 0 && t[k - 1] > dt; k--) t[k] = t[k - 1];
        if (r > 0) t[k] = dt;
    }
    tg_free(x);
    return t[reps / 2];
}

int tg_seq_layer_depth(tg_seq_layer *m, int n, tg_rng *rng) {
    if (!m || n < 1) {
        tg_set_error("seq_layer_depth: NULL layer or n %d < 1", n);
        return -1;
    }
    tg_scope_begin();
    tg_tensor *x = tg_randn(TG_SHAPE(1, n, m->cfg.dim), rng);
    if (x) tg_set_requires_grad(x, true);
    tg_tensor *y = x ? tg_seq_layer_forward(m, x) : NULL;
    int depth = y ? tg_graph_depth(y) : -1;
    tg_scope_end();
    return depth;
}
