/* Multi-head attention, as d2l's MultiHeadAttention:
 *
 *   MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_o,
 *   head_i = Attention(Q W_q_i, K W_k_i, V W_v_i).
 *
 * As d2l, the h projections of size H/h are one projection of size H
 * (num_hiddens), head j being its columns j H/h.., so all heads run as one
 * batched attention. d2l reorders them with copies:
 *   transpose_qkv:    [B, n, H] -> [B, n, h, H/h] -> (0,2,1,3) -> [B*h, n, H/h]
 *   transpose_output: [B*h, Q, H/h] -> [B, h, Q, H/h] -> (0,2,1,3) -> [B, Q, H]
 * here the fused path reads the heads where the projections wrote them and
 * writes the output where W_o reads it (tg_dot_attention_forward_heads);
 * RoPE turns q and k there too (tg_rope_heads); the copies remain only
 * inside the stored path (short sequences). Head j of batch entry b
 * is row b*h + j of the batched scores, so the valid lengths are repeated
 * for each head (torch.repeat_interleave on axis 0). Each head's scores are
 * scaled by sqrt(H/h), its own size. */
#include "module.h"

#include <math.h>
#include <string.h>

tg_mha *tg_mha_new(int key_size, int query_size, int value_size, int num_hiddens, int num_heads, tg_real dropout,
                   bool bias, tg_rng *rng) {
    if (num_heads <= 0 || num_hiddens <= 0 || num_hiddens % num_heads != 0) {
        tg_set_error(num_heads <= 0 || num_hiddens <= 0 ? "mha: num_hiddens %d and num_heads %d must be positive"
                                                        : "mha: num_hiddens %d is not divisible by num_heads %d",
                     num_hiddens, num_heads);
        return NULL;
    }
    tg_mha *m = tg_module_alloc("mha", sizeof *m, false, NULL);
    if (!m) return NULL;
    m->num_heads = num_heads;
    m->num_hiddens = num_hiddens;
    /* Same construction order as d2l: attention, W_q, W_k, W_v, W_o. */
    m->attention = tg_dot_attention_new(dropout, rng);
    m->W_q = m->attention ? tg_linear_new(query_size, num_hiddens, bias, rng) : NULL;
    m->W_k = m->W_q ? tg_linear_new(key_size, num_hiddens, bias, rng) : NULL;
    m->W_v = m->W_k ? tg_linear_new(value_size, num_hiddens, bias, rng) : NULL;
    m->W_o = m->W_v ? tg_linear_new(num_hiddens, num_hiddens, bias, rng) : NULL;
    if (!m->W_o) {
        tg_mha_free(m);
        return NULL;
    }
    return m;
}

/* Self-attention (queries, keys and values one tensor): the three
 * projections as one GEMM over their weights stacked [3 H, in], as the
 * decoder's c_attn, giving the [B, n, 3 H] layout tg_attention_qkv reads.
 * x is read once and the product is three times as wide; the stacking
 * copies 3 H in weights a forward, and its backward (tg_concat's) hands
 * each Linear its rows of the gradient. */
static tg_tensor *self_projection(tg_mha *m, tg_tensor *x) {
    tg_linear *l[3] = {m->W_q, m->W_k, m->W_v};
    tg_tensor *w = tg_concat(3, (tg_tensor *[]){l[0]->weight, l[1]->weight, l[2]->weight}, 0);
    tg_tensor *b = l[0]->bias ? tg_concat(3, (tg_tensor *[]){l[0]->bias, l[1]->bias, l[2]->bias}, 0) : NULL;
    return tg_affine(x, w, b);
}

tg_tensor *tg_mha_forward(tg_mha *m, tg_tensor *queries, tg_tensor *keys, tg_tensor *values, tg_mask mask) {
    char b1[64], b2[64], b3[64];
    if (!tg_module_present("mha", "forward", m)) return NULL;
    if (tg_any_null("mha", 3, (const tg_tensor *const[]){queries, keys, values})) return NULL;
    if (queries->ndim != 3 || keys->ndim != 3 || values->ndim != 3 || keys->shape[0] != queries->shape[0] ||
        values->shape[0] != queries->shape[0] || values->shape[1] != keys->shape[1]) {
        tg_set_error("mha: queries %s, keys %s, values %s: need [B, Q, dq], [B, K, dk], [B, K, dv]",
                     tg_tshape(b1, queries), tg_tshape(b2, keys), tg_tshape(b3, values));
        return NULL;
    }
    if (mask.lens_ndim < 0 || mask.lens_ndim > 2 || (mask.lens_ndim && !mask.lens)) {
        tg_set_error("mha: mask with lens_ndim %d and %s lens", mask.lens_ndim, mask.lens ? "non-NULL" : "NULL");
        return NULL;
    }
    int h = m->num_heads, B = queries->shape[0], nq = queries->shape[1];
    /* One stacked projection when the fused op then reads it in place; the
     * stored path (short sequences with terms in the scores: RELATIVE's
     * tables, ALiBi's slopes; RoPE turns q and k before) would split it. */
    bool terms_in_scores = tg_pe_in_scores(m->pos.kind);
    bool self = queries == keys && keys == values &&
                tg_dot_attention_takes_fused(m->attention, keys->shape[1], terms_in_scores);
    if (self && !tg_module_last_dim("linear", queries, m->W_q->in)) return NULL; /* as W_q would say */
    tg_tensor *qkv = self ? self_projection(m, queries) : NULL;
    if (self && !qkv) return NULL;
    tg_tensor *q = self ? qkv : tg_linear_forward(m->W_q, queries);
    tg_tensor *k = self ? qkv : tg_linear_forward(m->W_k, keys);
    tg_tensor *v = self ? qkv : tg_linear_forward(m->W_v, values);
    if (!q || !k || !v) return NULL;

    /* Valid lengths per head: entry for batch row b*h + j is that of row b
     * (repeat_interleave), for one length per row or one per query. They
     * live in this step's arena, as long as the graph that reads them. */
    tg_mask hm = mask;
    if (mask.lens && mask.lens_ndim > 0) {
        int per_row = mask.lens_ndim == 1 ? 1 : nq;
        int *lens = tg_arena_alloc(sizeof(int) * (size_t)B * (size_t)h * (size_t)per_row);
        if (!lens) return NULL;
        for (int b = 0; b < B; b++)
            for (int j = 0; j < h; j++)
                memcpy(lens + ((size_t)b * h + j) * per_row, mask.lens + (size_t)b * per_row,
                       sizeof(int) * (size_t)per_row);
        hm.lens = lens;
    }
    /* Queries and keys at positions 0..; RoPE turns them where the
     * projections wrote them (q and k of a stacked projection, not v). */
    if (self)
        qkv = tg_position_rotate_heads(&m->pos, qkv, 3 * h, 2 * h, 0);
    else
        q = tg_position_rotate_heads(&m->pos, q, h, h, 0), k = tg_position_rotate_heads(&m->pos, k, h, h, 0);
    tg_attn_pos terms;
    const tg_attn_pos *pp = tg_position_apply(&m->pos, h, 0, NULL, NULL, &terms);
    tg_tensor *out = self ? tg_dot_attention_forward_qkv(m->attention, qkv, h, hm, pp)
                          : tg_dot_attention_forward_heads(m->attention, q, k, v, h, hm, pp);
    return tg_linear_forward(m->W_o, out);
}

int tg_mha_set_position(tg_mha *m, tg_pe_kind pe, int clip, bool rope_half, tg_rng *rng) {
    if (!tg_module_present("mha", "set_position", m)) return -1;
    int h = m->num_heads, hd = m->num_hiddens / h;
    if (tg_pe_in_attention(m->pos.kind)) {
        tg_set_error("mha_set_position: the module has a position term already");
        return -1;
    }
    /* N(0, 1/hd): a^K . q has the size of k . q, whose rows (W_k x) have
     * entries of about that variance at init. */
    return tg_position_init(&m->pos, "mha_set_position", pe, h, hd, clip, rope_half, (tg_real)(1.0 / sqrt((double)hd)),
                            rng);
}

int tg_mha_params(tg_mha *m, tg_params *p, const char *prefix) {
    if (!tg_module_present("mha", "params", m)) return -1;
    const char *names[] = {"W_q", "W_k", "W_v", "W_o"};
    if (tg_linears_params(4, names, (tg_linear *[]){m->W_q, m->W_k, m->W_v, m->W_o}, p, prefix)) return -1;
    return tg_position_params(&m->pos, p, prefix);
}

void tg_mha_train(tg_mha *m, bool on) { tg_dot_attention_train(m ? m->attention : NULL, on); }

void tg_mha_record_attention(tg_mha *m, bool on) {
    if (m) tg_dot_attention_record(m->attention, on);
}

/* Row b*h + head of the recorded [B*h, Q, K] weights, for each b. */
tg_tensor *tg_mha_attention_weights(const tg_mha *m, int head) {
    if (!tg_module_present("mha_attention", "weights", m)) return NULL;
    const tg_tensor *w = m->attention->attention_weights;
    if (!m->attention->record || !w) {
        tg_set_error("mha_attention_weights: no weights recorded (tg_mha_record_attention, then a forward)");
        return NULL;
    }
    int h = m->num_heads;
    if (head < 0 || head >= h) {
        tg_set_error("mha_attention_weights: head %d is outside [0, %d)", head, h);
        return NULL;
    }
    return tg_module_head_weights("mha_attention_weights", w, h, head);
}

void tg_mha_free(tg_mha *m) {
    if (!m) return;
    tg_dot_attention_free(m->attention);
    tg_linears_free(4, (tg_linear *[]){m->W_q, m->W_k, m->W_v, m->W_o});
    tg_position_free(&m->pos);
    tg_sys_free(m);
}
