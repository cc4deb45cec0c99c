/* LayerNorm, as torch.nn.LayerNorm(dim) with elementwise_affine:
 *     y = (x - mean) / sqrt(var + eps) * weight + bias
 * over the last axis, var biased (divided by dim). weight starts at ones and
 * bias at zeros, so a new layer only normalises. The arithmetic is the fused
 * op tg_layer_norm. */
#include "module.h"

tg_layer_norm_layer *tg_layer_norm_layer_new(int dim, tg_real eps) {
    if (dim <= 0 || !(eps >= 0)) {
        tg_set_error("layernorm: dim %d, eps %g: need dim > 0 and eps >= 0", dim, (double)eps);
        return NULL;
    }
    tg_layer_norm_layer *m = tg_module_alloc("layernorm", sizeof *m, false, NULL);
    if (!m) return NULL;
    m->dim = dim;
    m->eps = eps;
    m->weight = tg_module_param(TG_SHAPE(dim), TG_INIT_CONST, 1, NULL);
    m->bias = tg_module_param(TG_SHAPE(dim), TG_INIT_CONST, 0, NULL);
    if (!m->weight || !m->bias) {
        tg_layer_norm_layer_free(m);
        return NULL;
    }
    return m;
}

tg_tensor *tg_layer_norm_layer_forward(tg_layer_norm_layer *m, tg_tensor *x) {
    if (!tg_module_input("layernorm", m, x) || !tg_module_last_dim("layernorm", x, m->dim)) return NULL;
    return tg_layer_norm(x, m->weight, m->bias, m->eps);
}

int tg_layer_norm_layer_params(tg_layer_norm_layer *m, tg_params *p, const char *prefix) {
    if (!tg_module_present("layernorm", "params", m)) return -1;
    if (tg_params_add(p, prefix, "weight", m->weight)) return -1;
    return tg_params_add(p, prefix, "bias", m->bias);
}

void tg_layer_norm_layer_free(tg_layer_norm_layer *m) {
    if (!m) return;
    tg_free(m->weight);
    tg_free(m->bias);
    tg_sys_free(m);
}
