/* Embedding, as torch.nn.Embedding: row i of weight [vocab, dim] is the
 * vector of token i. The gradient adds into the rows that were picked
 * (tg_gather_rows), rows picked twice receive both gradients. */
#include "module.h"

tg_embedding *tg_embedding_new(int vocab, int dim, tg_real std, tg_rng *rng) {
    if (vocab <= 0 || dim <= 0 || !(std >= 0)) {
        tg_set_error("embedding: vocab %d, dim %d, std %g: need positive sizes and std >= 0", vocab, dim, (double)std);
        return NULL;
    }
    tg_embedding *m = tg_module_alloc("embedding", sizeof *m, true, rng);
    if (!m) return NULL;
    m->vocab = vocab;
    m->dim = dim;
    m->weight = tg_module_param(TG_SHAPE(vocab, dim), TG_INIT_NORMAL, std, rng); /* torch: std 1 */
    if (!m->weight) {
        tg_sys_free(m);
        return NULL;
    }
    return m;
}

tg_tensor *tg_embedding_forward(tg_embedding *m, const int *ids, int ndim, const int *shape) {
    char b[64];
    if (!tg_module_present("embedding", "forward", m)) return NULL;
    if (!ids || ndim < 0 || ndim >= TG_MAX_DIMS || (ndim && !shape)) {
        tg_set_error("embedding: %s ids of %d dimensions (at most %d)", ids ? "bad" : "NULL", ndim, TG_MAX_DIMS - 1);
        return NULL;
    }
    int64_t n = tg_numel(ndim, shape);
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= m->vocab) {
            tg_set_error("embedding: id %d at position %lld of ids %s is outside [0, %d)", ids[i], (long long)i,
                         tg_shape_str(b, ndim, shape), m->vocab);
            return NULL;
        }
    return tg_gather_rows(m->weight, ids, ndim, shape);
}

int tg_embedding_params(tg_embedding *m, tg_params *p, const char *prefix) {
    if (!tg_module_present("embedding", "params", m)) return -1;
    return tg_params_add(p, prefix, "weight", m->weight);
}

void tg_embedding_free(tg_embedding *m) {
    if (!m) return;
    tg_free(m->weight);
    tg_sys_free(m);
}
