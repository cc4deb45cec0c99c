/* Attention: the four scoring functions of the seed blog post and the two
 * attention modules of d2l (DotProductAttention, AdditiveAttention).
 *
 *   attention(Q, K, V) = distribution(score(Q, K)) V
 *
 * score (the blog's "compatibility function"), queries [B, Q, dq] and keys
 * [B, K, dk] -> [B, Q, K]:
 *   dot          Q K^T
 *   scaled dot   Q K^T / sqrt(d)
 *   general      Q W K^T                  W [dq, dk]
 *   additive     w_v^T tanh(W_q q + W_k k)  (Bahdanau; d2l's AdditiveAttention)
 * distribution: masked softmax, or sparsemax (the blog's "sparse softmax").
 * The scoring functions also take 2-D queries [Q, dq] and keys [K, dk]
 * (one batch entry) and then return [Q, K]. */
#include "module.h"

#include <math.h>

/* Checks queries and keys for a scoring function: same rank, 2 or 3, same
 * batch; same feature size when need_same_d. */
static bool check_qk(const char *op, const tg_tensor *q, const tg_tensor *k, bool need_same_d) {
    char b1[64], b2[64];
    if (tg_any_null(op, 2, (const tg_tensor *const[]){q, k})) return false;
    if (q->ndim != k->ndim || q->ndim < 2 || q->ndim > 3 || (q->ndim == 3 && q->shape[0] != k->shape[0])) {
        tg_set_error("%s: queries %s and keys %s: need [B, Q, d] and [B, K, d] (or [Q, d] and [K, d])", op,
                     tg_tshape(b1, q), tg_tshape(b2, k));
        return false;
    }
    int dq = q->shape[q->ndim - 1], dk = k->shape[k->ndim - 1];
    if (need_same_d && dq != dk) {
        tg_set_error("%s: queries %s and keys %s: feature sizes %d and %d differ", op, tg_tshape(b1, q),
                     tg_tshape(b2, k), dq, dk);
        return false;
    }
    return true;
}

tg_tensor *tg_score_dot(tg_tensor *queries, tg_tensor *keys) {
    if (!check_qk("score_dot", queries, keys, true)) return NULL;
    return tg_matmul_t(queries, keys, false, true); /* K^T read through strides */
}

tg_tensor *tg_score_scaled_dot(tg_tensor *queries, tg_tensor *keys) {
    if (!check_qk("score_scaled_dot", queries, keys, true)) return NULL;
    /* Dividing by sqrt(d) keeps the scores' variance near 1 for unit-variance
     * inputs, so the softmax does not saturate (Vaswani et al., 2017). */
    double d = queries->shape[queries->ndim - 1];
    return tg_mul_scalar(tg_matmul_t(queries, keys, false, true), (tg_real)(1.0 / sqrt(d)));
}

tg_tensor *tg_score_general(tg_tensor *queries, tg_tensor *W, tg_tensor *keys) {
    char b1[64], b2[64], b3[64];
    if (!check_qk("score_general", queries, keys, false)) return NULL;
    if (!W) {
        tg_error_null("score_general");
        return NULL;
    }
    int dq = queries->shape[queries->ndim - 1], dk = keys->shape[keys->ndim - 1];
    if (W->ndim != 2 || W->shape[0] != dq || W->shape[1] != dk) {
        tg_set_error("score_general: queries %s, W %s, keys %s: W must be (%d,%d)", tg_tshape(b1, queries),
                     tg_tshape(b2, W), tg_tshape(b3, keys), dq, dk);
        return NULL;
    }
    /* (Q W) K^T: [B, Q, dq] @ [dq, dk] is one GEMM over all batch rows. */
    return tg_matmul_t(tg_matmul(queries, W), keys, false, true);
}

tg_tensor *tg_score_additive(tg_tensor *queries, tg_tensor *keys, tg_tensor *W_q, tg_tensor *W_k, tg_tensor *w_v) {
    char b1[64], b2[64], b3[64];
    if (!check_qk("score_additive", queries, keys, false)) return NULL;
    if (tg_any_null("score_additive", 3, (const tg_tensor *const[]){W_q, W_k, w_v})) return NULL;
    bool batched = queries->ndim == 3;
    int B = batched ? queries->shape[0] : 1;
    int nq = queries->shape[queries->ndim - 2], nk = keys->shape[keys->ndim - 2];
    int dq = queries->shape[queries->ndim - 1], dk = keys->shape[keys->ndim - 1];
    int h = W_q->ndim == 2 ? W_q->shape[0] : -1;
    if (W_q->ndim != 2 || W_q->shape[1] != dq || W_k->ndim != 2 || W_k->shape[0] != h || W_k->shape[1] != dk ||
        w_v->ndim != 2 || w_v->shape[0] != 1 || w_v->shape[1] != h) {
        tg_set_error("score_additive: W_q %s, W_k %s, w_v %s: need (h,%d), (h,%d) and (1,h)", tg_tshape(b1, W_q),
                     tg_tshape(b2, W_k), tg_tshape(b3, w_v), dq, dk);
        return NULL;
    }
    if (!batched) { /* one batch entry: [1, n, d] views */
        queries = tg_reshape(queries, TG_SHAPE(1, nq, dq));
        keys = tg_reshape(keys, TG_SHAPE(1, nk, dk));
    }
    /* d2l: features = W_q(q).unsqueeze(2) + W_k(k).unsqueeze(1), broadcast
     * to [B, Q, K, h]; scores = w_v(tanh(features)).squeeze(-1). */
    tg_tensor *qh = tg_reshape(tg_matmul_t(queries, W_q, false, true), TG_SHAPE(B, nq, 1, h));
    tg_tensor *kh = tg_reshape(tg_matmul_t(keys, W_k, false, true), TG_SHAPE(B, 1, nk, h));
    tg_tensor *features = tg_tanh(tg_add(qh, kh));
    tg_tensor *s = tg_matmul_t(tg_reshape(features, TG_SHAPE(B, nq * nk, h)), w_v, false, true);
    return batched ? tg_reshape(s, TG_SHAPE(B, nq, nk)) : tg_reshape(s, TG_SHAPE(nq, nk));
}

/* Checks the values of an attention module against its weights [B, Q, K]. */
static bool check_values(const char *op, const tg_tensor *q, const tg_tensor *k, const tg_tensor *v) {
    char b1[64], b2[64], b3[64];
    if (v->ndim != 3 || q->ndim != 3 || v->shape[0] != k->shape[0] || v->shape[1] != k->shape[1]) {
        tg_set_error("%s: queries %s, keys %s, values %s: need [B, Q, dq], [B, K, dk], [B, K, v]", op, tg_tshape(b1, q),
                     tg_tshape(b2, k), tg_tshape(b3, v));
        return false;
    }
    return true;
}

/* ---- DotProductAttention ---------------------------------------------------- */

tg_dot_attention *tg_dot_attention_new(tg_real dropout, tg_rng *rng) {
    tg_dot_attention *m = tg_module_alloc("dot_attention", sizeof *m, false, NULL);
    if (!m) return NULL;
    m->dropout = tg_dropout_layer_new(dropout, rng);
    if (!m->dropout) {
        tg_sys_free(m);
        return NULL;
    }
    return m;
}

/* The position terms of pos on the stored path: scores [B h, Q, K] plus
 * ALiBi (a constant [h, Q, K]), the bias table (gathered to [h, Q, K]) and
 * Shaw's key term (q rel_k^T gathered to [B h, Q, K], scaled as the scores),
 * the same sums as the fused op computes tile by tile. */
static tg_tensor *add_pos_scores(tg_tensor *scores, tg_tensor *q, const tg_attn_pos *pos) {
    if (!scores) return NULL;
    int Bh = scores->shape[0], Q = scores->shape[1], K = scores->shape[2], d = q->shape[2];
    int h = pos->heads == 0 ? 1 : pos->heads;
    if (h < 0 || Bh % h != 0) {
        tg_set_error("dot_attention: %d rows of heads with %d heads: not a multiple", Bh, pos->heads);
        return NULL;
    }
    tg_tensor *per_head = NULL; /* [h, Q, K]: ALiBi + bias table */
    if (pos->alibi) {
        per_head = tg_empty_arena(TG_SHAPE(h, Q, K));
        if (!per_head) return NULL;
        for (int j = 0; j < h; j++)
            for (int i = 0; i < Q; i++)
                for (int k = 0; k < K; k++) {
                    int64_t o = (int64_t)k - i - pos->q_offset;
                    per_head->data[((int64_t)j * Q + i) * K + k] = -pos->alibi[j] * (tg_real)(o < 0 ? -o : o);
                }
    }
    if (pos->bias) {
        tg_tensor *g = tg_rel_gather(tg_reshape(pos->bias, TG_SHAPE(h, 1, pos->bias->shape[1])), Q, K, pos);
        per_head = per_head ? tg_add(per_head, g) : g;
        if (!per_head) return NULL;
    }
    if (pos->rel_k) {
        tg_tensor *qa = tg_matmul_t(q, pos->rel_k, false, true); /* [B h, Q, R]: one product per offset */
        tg_tensor *e = tg_rel_gather(qa, Q, K, pos);
        scores = tg_add(scores, tg_mul_scalar(e, (tg_real)(1.0 / sqrt((double)d))));
    }
    if (per_head)
        scores = tg_reshape(tg_add(tg_reshape(scores, TG_SHAPE(Bh / h, h, Q, K)), per_head), TG_SHAPE(Bh, Q, K));
    return scores;
}

tg_tensor *tg_dot_attention_forward(tg_dot_attention *m, tg_tensor *queries, tg_tensor *keys, tg_tensor *values,
                                    tg_mask mask) {
    return tg_dot_attention_forward_pos(m, queries, keys, values, mask, NULL);
}

tg_tensor *tg_dot_attention_forward_pos(tg_dot_attention *m, tg_tensor *queries, tg_tensor *keys, tg_tensor *values,
                                        tg_mask mask, const tg_attn_pos *pos) {
    if (!tg_module_present("dot_attention", "forward", m)) return NULL;
    m->attention_weights = NULL;
    if (tg_any_null("dot_attention", 3, (const tg_tensor *const[]){queries, keys, values})) return NULL;
    if (!check_qk("dot_attention", queries, keys, true) || !check_values("dot_attention", queries, keys, values))
        return NULL;
    int K = keys->shape[keys->ndim - 2];
    bool fused = tg_dot_attention_takes_fused(m, K, pos != NULL);
    if (fused)
        return tg_attention_pos(queries, keys, values, mask, tg_dropout_layer_active_p(m->dropout),
                                tg_dropout_layer_rng(m->dropout), pos);
    if (pos && queries->ndim != 3) {
        tg_set_error("dot_attention: position terms need 3-D queries [B h, Q, d]");
        return NULL;
    }
    tg_tensor *scores = tg_score_scaled_dot(queries, keys);
    if (pos) scores = add_pos_scores(scores, queries, pos);
    tg_tensor *w = m->sparse ? tg_sparsemax(scores, mask) : tg_masked_softmax(scores, mask);
    if (m->record) m->attention_weights = w; /* before dropout, as d2l keeps them */
    tg_tensor *wd = tg_dropout_layer_forward(m->dropout, w);
    tg_tensor *out = tg_matmul(wd, values);
    if (pos && pos->rel_v) /* Shaw's value term: the weights summed per offset, times a^V */
        out = tg_add(out, tg_matmul(tg_rel_scatter(wd, pos), pos->rel_v));
    return out;
}

/* The one place that chooses the path (tg_dot_attention_forward_pos and
 * the head layouts). The fused op gives the same values (to rounding) and
 * the same dropout mask without a [B, Q, K] tensor; under TG_PATH_AUTO it
 * is the default. Up to 64 keys it does each head-batch entry whole
 * (kernels_attention.c), faster than the stored path at every short shape
 * measured (BENCHMARKS.md, "Measurements behind choices in the code"). The
 * whole-entry path takes neither position terms nor bf16 products; with
 * them, below 64 keys, the blocked path is still slower than the stored
 * one, so those keep the stored path. */
bool tg_dot_attention_takes_fused(const tg_dot_attention *m, int K, bool pos) {
    if (m->record || m->sparse) return false;
    if (m->path != TG_PATH_AUTO) return m->path == TG_PATH_FUSED;
    return K >= 64 || (!pos && tg_get_precision() != TG_PREC_BF16);
}

tg_tensor *tg_dot_attention_forward_heads(tg_dot_attention *m, tg_tensor *queries, tg_tensor *keys, tg_tensor *values,
                                          int heads, tg_mask mask, const tg_attn_pos *pos) {
    char b1[64], b2[64], b3[64];
    if (!tg_module_present("dot_attention", "forward", m)) return NULL;
    m->attention_weights = NULL;
    if (tg_any_null("dot_attention", 3, (const tg_tensor *const[]){queries, keys, values})) return NULL;
    if (heads < 1 || queries->ndim != 3 || keys->ndim != 3 || values->ndim != 3 || queries->shape[2] % heads ||
        keys->shape[2] % heads || values->shape[2] % heads) {
        tg_set_error("dot_attention: queries %s, keys %s, values %s with %d heads: need 3-D, feature sizes that the "
                     "heads divide",
                     tg_tshape(b1, queries), tg_tshape(b2, keys), tg_tshape(b3, values), heads);
        return NULL;
    }
    if (!check_qk("dot_attention", queries, keys, true) || !check_values("dot_attention", queries, keys, values))
        return NULL;
    if (tg_dot_attention_takes_fused(m, keys->shape[1], pos != NULL))
        return tg_attention_heads(queries, keys, values, heads, mask, tg_dropout_layer_active_p(m->dropout),
                                  tg_dropout_layer_rng(m->dropout), pos);
    tg_tensor *out =
        tg_dot_attention_forward_pos(m, tg_module_split_heads(queries, heads), tg_module_split_heads(keys, heads),
                                     tg_module_split_heads(values, heads), mask, pos);
    return tg_module_merge_heads(out, heads);
}

tg_tensor *tg_dot_attention_forward_qkv(tg_dot_attention *m, tg_tensor *qkv, int heads, tg_mask mask,
                                        const tg_attn_pos *pos) {
    char b1[64];
    if (!tg_module_present("dot_attention", "forward", m)) return NULL;
    m->attention_weights = NULL;
    if (tg_any_bad("dot_attention", 1, (const tg_tensor *const[]){qkv}, 1))
        return NULL; /* bf16: tg_attention_qkv reads it */
    if (heads < 1 || qkv->ndim != 3 || qkv->shape[2] % (3 * heads)) {
        tg_set_error("dot_attention: qkv %s with %d heads: need [B, T, 3 h d]", tg_tshape(b1, qkv), heads);
        return NULL;
    }
    int B = qkv->shape[0], T = qkv->shape[1], h = heads, hd = qkv->shape[2] / (3 * h);
    if (tg_dot_attention_takes_fused(m, T, pos != NULL))
        return tg_attention_qkv(qkv, h, mask, tg_dropout_layer_active_p(m->dropout), tg_dropout_layer_rng(m->dropout),
                                pos);
    /* [B, T, 3, h, hd] -> [3, B h, T, hd], then one slice per third. */
    tg_tensor *t = tg_reshape(tg_permute(tg_reshape(qkv, TG_SHAPE(B, T, 3, h, hd)), (const int[]){2, 0, 3, 1, 4}),
                              TG_SHAPE(3, B * h, T, hd));
    tg_tensor *q = tg_reshape(tg_slice(t, 0, 0, 1), TG_SHAPE(B * h, T, hd));
    tg_tensor *k = tg_reshape(tg_slice(t, 0, 1, 2), TG_SHAPE(B * h, T, hd));
    tg_tensor *v = tg_reshape(tg_slice(t, 0, 2, 3), TG_SHAPE(B * h, T, hd));
    return tg_module_merge_heads(tg_dot_attention_forward_pos(m, q, k, v, mask, pos), h);
}

void tg_dot_attention_record(tg_dot_attention *m, bool on) {
    if (m) {
        m->record = on;
        m->attention_weights = NULL;
    }
}

void tg_dot_attention_train(tg_dot_attention *m, bool on) { tg_dropout_layer_train(m ? m->dropout : NULL, on); }

void tg_dot_attention_free(tg_dot_attention *m) {
    if (!m) return;
    tg_dropout_layer_free(m->dropout);
    tg_sys_free(m);
}

/* ---- AdditiveAttention ------------------------------------------------------ */

tg_additive_attention *tg_additive_attention_new(int key_size, int query_size, int num_hiddens, tg_real dropout,
                                                 tg_rng *rng) {
    tg_additive_attention *m = tg_module_alloc("additive_attention", sizeof *m, false, NULL);
    if (!m) return NULL;
    m->W_k = tg_linear_new(key_size, num_hiddens, false, rng);
    m->W_q = m->W_k ? tg_linear_new(query_size, num_hiddens, false, rng) : NULL;
    m->w_v = m->W_q ? tg_linear_new(num_hiddens, 1, false, rng) : NULL;
    m->dropout = m->w_v ? tg_dropout_layer_new(dropout, rng) : NULL;
    if (!m->dropout) {
        tg_additive_attention_free(m);
        return NULL;
    }
    return m;
}

tg_tensor *tg_additive_attention_forward(tg_additive_attention *m, tg_tensor *queries, tg_tensor *keys,
                                         tg_tensor *values, tg_mask mask) {
    char b1[64], b2[64];
    if (!tg_module_present("additive_attention", "forward", m)) return NULL;
    m->attention_weights = NULL;
    const char *op = "additive_attention";
    if (tg_any_null(op, 3, (const tg_tensor *const[]){queries, keys, values})) return NULL;
    if (!check_qk(op, queries, keys, false) || !check_values(op, queries, keys, values)) return NULL;
    if (queries->shape[2] != m->W_q->in || keys->shape[2] != m->W_k->in) {
        tg_set_error("%s: queries %s and keys %s: expected query size %d and key size %d", op, tg_tshape(b1, queries),
                     tg_tshape(b2, keys), m->W_q->in, m->W_k->in);
        return NULL;
    }
    tg_tensor *scores = tg_score_additive(queries, keys, m->W_q->weight, m->W_k->weight, m->w_v->weight);
    tg_tensor *w = tg_masked_softmax(scores, mask);
    m->attention_weights = w;
    return tg_matmul(tg_dropout_layer_forward(m->dropout, w), values);
}

int tg_additive_attention_params(tg_additive_attention *m, tg_params *p, const char *prefix) {
    if (!tg_module_present("additive_attention", "params", m)) return -1;
    return tg_linears_params(3, (const char *[]){"W_k", "W_q", "w_v"}, (tg_linear *[]){m->W_k, m->W_q, m->w_v}, p,
                             prefix);
}

void tg_additive_attention_train(tg_additive_attention *m, bool on) {
    tg_dropout_layer_train(m ? m->dropout : NULL, on);
}

void tg_additive_attention_free(tg_additive_attention *m) {
    if (!m) return;
    tg_linears_free(3, (tg_linear *[]){m->W_k, m->W_q, m->w_v});
    tg_dropout_layer_free(m->dropout);
    tg_sys_free(m);
}
