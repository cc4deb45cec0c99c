/* A sequence model around a sequence layer (nn.h, tg_seq_model): token
 * embeddings, the fixed sinusoidal positions when asked (an attention
 * layer alone cannot tell positions apart), the layer, and a linear head
 * at the last position: the model that turns a sequence into one
 * prediction, the learning test of d2l's comparison of CNNs, RNNs and
 * self-attention. Built from public modules only. */
#include "module.h"

int tg_seq_model_init(tg_seq_model *m, const tg_seq_layer_config *c, int vocab, int n_out, int max_len, tg_rng *rng) {
    if (!m) {
        tg_set_error("seq_model: NULL model");
        return -1;
    }
    *m = (tg_seq_model){0};
    tg_params_init(&m->params);
    if (!c || vocab < 1 || n_out < 1 || max_len < 0) {
        tg_set_error("seq_model: %s", !c ? "NULL config" : "vocab and n_out must be positive, max_len not negative");
        return -1;
    }
    /* drawn from rng in this order: the embeddings, the layer, the head */
    m->emb = tg_embedding_new(vocab, c->dim, 1, rng);
    m->pe = m->emb && max_len > 0 ? tg_posenc_new(c->dim, 0, max_len, rng) : NULL;
    m->layer = m->emb && (m->pe || max_len == 0) ? tg_seq_layer_new(c, rng) : NULL;
    m->head = m->layer ? tg_linear_new(c->dim, n_out, true, rng) : NULL;
    if (!m->head || tg_embedding_params(m->emb, &m->params, "emb") ||
        tg_seq_layer_params(m->layer, &m->params, c->kind == TG_SEQ_CNN ? "conv" : NULL) ||
        tg_linear_params(m->head, &m->params, "head")) {
        tg_seq_model_free(m);
        return -1;
    }
    return 0;
}

tg_tensor *tg_seq_model_forward(tg_seq_model *m, const int *ids, int B, int n) {
    if (!m || !m->layer || !ids || B < 1 || n < 1) {
        tg_set_error("seq_model_forward: %s", !m || !m->layer || !ids ? "NULL argument" : "B and n must be positive");
        return NULL;
    }
    tg_tensor *h = tg_embedding_forward(m->emb, ids, TG_SHAPE(B, n));
    h = tg_seq_layer_forward(m->layer, m->pe ? tg_posenc_forward(m->pe, h) : h);
    if (!h) return NULL;
    h = tg_reshape(tg_slice(h, 1, n - 1, n), TG_SHAPE(B, h->shape[2])); /* the last position */
    return tg_linear_forward(m->head, h);
}

void tg_seq_model_free(tg_seq_model *m) {
    if (!m) return;
    tg_params_free(&m->params);
    tg_embedding_free(m->emb);
    tg_posenc_free(m->pe);
    tg_seq_layer_free(m->layer);
    tg_linear_free(m->head);
    *m = (tg_seq_model){0};
}
