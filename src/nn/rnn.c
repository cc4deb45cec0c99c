/* Recurrent layers, as torch.nn.RNN (Elman, tanh) and torch.nn.GRU with
 * batch_first=True: (output, h_n) = rnn(x, h0), h0 and h_n [layers, B, H]
 * (h0 zero when not given).
 *
 * RNN:  h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)
 * GRU (torch's gate order r, z, n in the rows of W_ih and W_hh):
 *   r = sigma(W_ir x + b_ir + W_hr h + b_hr)
 *   z = sigma(W_iz x + b_iz + W_hz h + b_hz)
 *   n = tanh(W_in x + b_in + r * (W_hn h + b_hn))
 *   h' = (1 - z) * n + z * h  =  n + z * (h - n)
 * The input projections of every step do not depend on h, so each layer
 * computes them for the whole sequence with one GEMM ([B*n, in] x
 * [in, G*H]); only the h W_hh^T product and the gates stay in the loop of
 * n dependent steps, the O(n) sequential operations of the chapter. The
 * loop is unrolled into the graph, so tg_backward is backpropagation
 * through time over the whole sequence. */
#include "module.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

tg_tensor *tg_concat_many(int n, tg_tensor *const *ts, int axis) {
    if (n < 1 || !ts) {
        tg_set_error("concat_many: %d tensors", n);
        return NULL;
    }
    if (n <= TG_NODE_MAX_INPUTS) return tg_concat(n, ts, axis);
    /* A tree of concats of up to 4: each element is copied log4(n) times,
     * not n times as a chain would. */
    int groups = (n + TG_NODE_MAX_INPUTS - 1) / TG_NODE_MAX_INPUTS;
    tg_tensor **next = tg_arena_alloc((size_t)groups * sizeof *next);
    if (!next) return NULL;
    for (int g = 0; g < groups; g++) {
        int lo = g * TG_NODE_MAX_INPUTS, cnt = n - lo < TG_NODE_MAX_INPUTS ? n - lo : TG_NODE_MAX_INPUTS;
        next[g] = tg_concat(cnt, ts + lo, axis);
        if (!next[g]) return NULL;
    }
    return tg_concat_many(groups, next, axis);
}

static tg_rnn *recurrent_new(const char *op, int gates, int input_size, int hidden_size, int num_layers, tg_rng *rng) {
    if (input_size <= 0 || hidden_size <= 0 || num_layers <= 0 || num_layers > TG_RNN_MAX_LAYERS) {
        tg_set_error("%s: input_size %d, hidden_size %d must be positive, num_layers %d in 1..%d", op, input_size,
                     hidden_size, num_layers, TG_RNN_MAX_LAYERS);
        return NULL;
    }
    tg_rnn *m = tg_module_alloc(op, sizeof *m, true, rng);
    if (!m) return NULL;
    m->input_size = input_size;
    m->hidden_size = hidden_size;
    m->num_layers = num_layers;
    m->gates = gates;
    /* torch: every weight and bias U(-1/sqrt(H), 1/sqrt(H)), drawn in the
     * order of its state_dict (w_ih, w_hh, b_ih, b_hh per layer). */
    tg_real bound = (tg_real)(1.0 / sqrt((double)hidden_size));
    int GH = gates * hidden_size;
    for (int l = 0; l < num_layers; l++) {
        int in = l == 0 ? input_size : hidden_size;
        tg_tensor **slot[4] = {&m->w_ih[l], &m->w_hh[l], &m->b_ih[l], &m->b_hh[l]};
        for (int s = 0; s < 4; s++) {
            int cols = s == 0 ? in : hidden_size;
            *slot[s] = s < 2 ? tg_module_param(TG_SHAPE(GH, cols), TG_INIT_UNIFORM, bound, rng)
                             : tg_module_param(TG_SHAPE(GH), TG_INIT_UNIFORM, bound, rng);
            if (!*slot[s]) {
                tg_rnn_free(m);
                return NULL;
            }
        }
    }
    return m;
}

tg_rnn *tg_rnn_new(int input_size, int hidden_size, int num_layers, tg_rng *rng) {
    return recurrent_new("rnn", 1, input_size, hidden_size, num_layers, rng);
}
tg_gru *tg_gru_new(int input_size, int hidden_size, int num_layers, tg_rng *rng) {
    return recurrent_new("gru", 3, input_size, hidden_size, num_layers, rng);
}

/* Step t of a [B, n, X] sequence as [B, X] (slice copies one step). */
static tg_tensor *step(tg_tensor *seq, int t) {
    tg_tensor *s = tg_slice(seq, 1, t, t + 1);
    return tg_reshape(s, TG_SHAPE(seq->shape[0], seq->shape[2]));
}

/* A zero [B, H] state in the arena. */
static tg_tensor *zero_state(int B, int H) {
    tg_tensor *h = tg_empty_arena(TG_SHAPE(B, H));
    if (h) memset(h->data, 0, (size_t)h->size * sizeof(tg_real));
    return h;
}

static tg_tensor *recurrent_forward(const char *op, int gates, tg_rnn *m, tg_tensor *x, tg_tensor *h0,
                                    tg_tensor **h_n) {
    char b[64], b0[64];
    if (h_n) *h_n = NULL;
    if (!tg_module_input(op, m, x)) return NULL;
    if (m->gates != gates) {
        tg_set_error("%s: module was not made by tg_%s_new", op, op);
        return NULL;
    }
    if (x->ndim != 3 || x->shape[2] != m->input_size || x->shape[1] < 1) {
        tg_set_error("%s: input %s, expected [B, n, %d] with n >= 1", op, tg_tshape(b, x), m->input_size);
        return NULL;
    }
    int B = x->shape[0], n = x->shape[1], H = m->hidden_size, L = m->num_layers;
    if (h0 && (h0->ndim != 3 || h0->shape[0] != L || h0->shape[1] != B || h0->shape[2] != H)) {
        tg_set_error("%s: h0 %s, expected [layers, B, H] = (%d,%d,%d) for input %s", op, tg_tshape(b0, h0), L, B, H,
                     tg_tshape(b, x));
        return NULL;
    }
    tg_tensor **hs = tg_arena_alloc((size_t)n * sizeof *hs), **last = tg_arena_alloc((size_t)L * sizeof *last);
    if (!hs || !last) return NULL;
    tg_tensor *seq = x;
    for (int l = 0; l < m->num_layers; l++) {
        /* All steps' input projections in one GEMM: [B, n, G*H]. */
        tg_tensor *gi = tg_add(tg_matmul_t(seq, m->w_ih[l], false, true), m->b_ih[l]);
        if (!gi) return NULL;
        tg_tensor *gi_r = NULL, *gi_z = NULL, *gi_n = gi;
        if (gates == 3) {
            gi_r = tg_slice(gi, 2, 0, H);
            gi_z = tg_slice(gi, 2, H, 2 * H);
            gi_n = tg_slice(gi, 2, 2 * H, 3 * H);
        }
        tg_tensor *h = h0 ? tg_reshape(tg_slice(h0, 0, l, l + 1), TG_SHAPE(B, H)) : zero_state(B, H);
        if (!h) return NULL;
        for (int t = 0; t < n; t++) {
            tg_tensor *gh = tg_add(tg_matmul_t(h, m->w_hh[l], false, true), m->b_hh[l]); /* [B, G*H] */
            if (gates == 1) {
                h = tg_tanh(tg_add(step(gi_n, t), gh));
            } else {
                tg_tensor *r = tg_sigmoid(tg_add(step(gi_r, t), tg_slice(gh, 1, 0, H)));
                tg_tensor *z = tg_sigmoid(tg_add(step(gi_z, t), tg_slice(gh, 1, H, 2 * H)));
                tg_tensor *nn = tg_tanh(tg_add(step(gi_n, t), tg_mul(r, tg_slice(gh, 1, 2 * H, 3 * H))));
                h = tg_add(nn, tg_mul(z, tg_sub(h, nn)));
            }
            if (!h) return NULL;
            hs[t] = tg_reshape(h, TG_SHAPE(B, 1, H));
        }
        last[l] = tg_reshape(h, TG_SHAPE(1, B, H));
        seq = tg_concat_many(n, hs, 1); /* [B, n, H] */
        if (!seq) return NULL;
    }
    if (h_n && !(*h_n = tg_concat_many(L, last, 0))) return NULL; /* [L, B, H] */
    return seq;
}

tg_tensor *tg_rnn_forward(tg_rnn *m, tg_tensor *x) { return recurrent_forward("rnn", 1, m, x, NULL, NULL); }
tg_tensor *tg_gru_forward(tg_gru *m, tg_tensor *x) { return recurrent_forward("gru", 3, m, x, NULL, NULL); }
tg_tensor *tg_rnn_forward_state(tg_rnn *m, tg_tensor *x, tg_tensor *h0, tg_tensor **h_n) {
    return recurrent_forward("rnn", 1, m, x, h0, h_n);
}
tg_tensor *tg_gru_forward_state(tg_gru *m, tg_tensor *x, tg_tensor *h0, tg_tensor **h_n) {
    return recurrent_forward("gru", 3, m, x, h0, h_n);
}

static int recurrent_params(const char *op, tg_rnn *m, tg_params *p, const char *prefix) {
    if (!m || !p) {
        tg_set_error("%s_params: NULL %s", op, !m ? "module" : "list");
        return -1;
    }
    char name[32];
    for (int l = 0; l < m->num_layers; l++) {
        const char *kind[4] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh"};
        tg_tensor *t[4] = {m->w_ih[l], m->w_hh[l], m->b_ih[l], m->b_hh[l]};
        for (int s = 0; s < 4; s++) {
            snprintf(name, sizeof name, "%s_l%d", kind[s], l);
            if (tg_params_add(p, prefix, name, t[s])) return -1;
        }
    }
    return 0;
}
int tg_rnn_params(tg_rnn *m, tg_params *p, const char *prefix) { return recurrent_params("rnn", m, p, prefix); }
int tg_gru_params(tg_gru *m, tg_params *p, const char *prefix) { return recurrent_params("gru", m, p, prefix); }

void tg_rnn_free(tg_rnn *m) {
    if (!m) return;
    for (int l = 0; l < TG_RNN_MAX_LAYERS; l++) {
        tg_free(m->w_ih[l]);
        tg_free(m->w_hh[l]);
        tg_free(m->b_ih[l]);
        tg_free(m->b_hh[l]);
    }
    tg_sys_free(m);
}
void tg_gru_free(tg_gru *m) { tg_rnn_free(m); }
