/* Linear layer, as torch.nn.Linear: y = x W^T + b on the last axis.
 *
 * W is [out, in] and stays that way: the product reads it transposed
 * through the GEMM's strides (tg_affine), never through a copy.
 * Initialisation is PyTorch's default: kaiming_uniform(a = sqrt(5)) on W
 * reduces to U(-1/sqrt(in), 1/sqrt(in)), and the bias uses the same bound
 * 1/sqrt(fan_in). */
#include "module.h"

#include <math.h>

tg_linear *tg_linear_new(int in, int out, bool bias, tg_rng *rng) {
    if (in <= 0 || out <= 0) {
        tg_set_error("linear: sizes in %d, out %d must be positive", in, out);
        return NULL;
    }
    tg_linear *m = tg_module_alloc("linear", sizeof *m, true, rng);
    if (!m) return NULL;
    m->in = in;
    m->out = out;
    tg_real bound = (tg_real)(1.0 / sqrt((double)in));
    /* Persistent whatever scope is open: parameters outlive every step. */
    m->weight = tg_module_param(TG_SHAPE(out, in), TG_INIT_UNIFORM, bound, rng);
    if (bias) m->bias = tg_module_param(TG_SHAPE(out), TG_INIT_UNIFORM, bound, rng);
    if (!m->weight || (bias && !m->bias)) {
        tg_linear_free(m);
        return NULL;
    }
    return m;
}

tg_tensor *tg_linear_forward(tg_linear *m, tg_tensor *x) {
    if (!tg_module_input("linear", m, x) || !tg_module_last_dim("linear", x, m->in)) return NULL;
    return tg_affine(x, m->weight, m->bias); /* one GEMM, the bias its starting value */
}

tg_tensor *tg_linear_gelu_forward(tg_linear *m, tg_tensor *x, bool tanh_form) {
    if (!tg_module_input("linear", m, x) || !tg_module_last_dim("linear", x, m->in)) return NULL;
    return tg_affine_gelu(x, m->weight, m->bias, tanh_form); /* one GEMM, GELU its epilogue */
}

int tg_linear_params(tg_linear *m, tg_params *p, const char *prefix) {
    if (!tg_module_present("linear", "params", m)) return -1;
    if (tg_params_add(p, prefix, "weight", m->weight)) return -1;
    return m->bias ? tg_params_add(p, prefix, "bias", m->bias) : 0;
}

void tg_linear_free(tg_linear *m) {
    if (!m) return;
    tg_free(m->weight);
    tg_free(m->bias);
    tg_sys_free(m);
}

int tg_linears_params(int n, const char *const *names, tg_linear *const *lin, tg_params *p, const char *prefix) {
    char b[TG_PARAM_NAME_MAX];
    for (int i = 0; i < n; i++)
        if (tg_param_name(b, prefix, names[i]) || tg_linear_params(lin[i], p, b)) return -1;
    return 0;
}

void tg_linears_free(int n, tg_linear *const *lin) {
    for (int i = 0; i < n; i++) tg_linear_free(lin[i]);
}
