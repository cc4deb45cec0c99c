/* Conv1d over a token sequence, as torch.nn.Conv1d on x.transpose(1, 2):
 *   y[b, t, o] = bias[o] + sum_{j<k} sum_i W[o, i, j] xp[b, t + j*dil, i]
 * where xp is x padded with zeros, left = floor((k-1) dil / 2) rows and
 * right = (k-1) dil - left rows (torch's padding='same').
 *
 * Built from public ops as im2col: the k shifted windows of xp (slices)
 * are concatenated along the feature axis into [B, n, k*in], and one GEMM
 * with W seen as [out, k*in] (permuted to [out, k, in] so that column
 * j*in + i holds W[o, i, j]) gives the output. The alternative, k GEMMs
 * of the shifted slices with W[:, :, j] summed, ran level with it (figures
 * in BENCHMARKS.md, "Measurements behind choices in the code"), so the
 * single GEMM stays: it needs no per-tap weight slices or adds. */
#include "module.h"

#include <math.h>
#include <string.h>

tg_conv1d *tg_conv1d_new(int in, int out, int k, int dilation, bool bias, tg_rng *rng) {
    if (in <= 0 || out <= 0 || k <= 0 || dilation <= 0) {
        tg_set_error("conv1d: in %d, out %d, kernel %d, dilation %d must be positive", in, out, k, dilation);
        return NULL;
    }
    tg_conv1d *m = tg_module_alloc("conv1d", sizeof *m, true, rng);
    if (!m) return NULL;
    m->in = in;
    m->out = out;
    m->k = k;
    m->dilation = dilation;
    /* torch: kaiming_uniform(a = sqrt(5)) = U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = in * k. */
    tg_real bound = (tg_real)(1.0 / sqrt((double)in * k));
    m->weight = tg_module_param(TG_SHAPE(out, in, k), TG_INIT_UNIFORM, bound, rng);
    if (bias) m->bias = tg_module_param(TG_SHAPE(out), TG_INIT_UNIFORM, bound, rng);
    if (!m->weight || (bias && !m->bias)) {
        tg_conv1d_free(m);
        return NULL;
    }
    return m;
}

static tg_tensor *zeros_arena(int B, int rows, int d) {
    tg_tensor *z = tg_empty_arena(TG_SHAPE(B, rows, d));
    if (z) memset(z->data, 0, (size_t)z->size * sizeof(tg_real));
    return z;
}

tg_tensor *tg_conv1d_forward(tg_conv1d *m, tg_tensor *x) {
    char b[64];
    if (!tg_module_input("conv1d", m, x)) return NULL;
    if (x->ndim != 3 || x->shape[2] != m->in) {
        tg_set_error("conv1d: input %s, expected [B, n, %d]", tg_tshape(b, x), m->in);
        return NULL;
    }
    int B = x->shape[0], n = x->shape[1], span = (m->k - 1) * m->dilation;
    int left = span / 2, right = span - left;
    tg_tensor *xp = x;
    if (span > 0) {
        tg_tensor *parts[3];
        int np = 0;
        if (left > 0) parts[np++] = zeros_arena(B, left, m->in);
        parts[np++] = x;
        if (right > 0) parts[np++] = zeros_arena(B, right, m->in);
        xp = tg_concat(np, parts, 1);
    }
    tg_tensor *cols = xp;
    if (m->k > 1) {
        tg_tensor **win = tg_arena_alloc((size_t)m->k * sizeof *win);
        if (!win) return NULL;
        for (int j = 0; j < m->k; j++) win[j] = tg_slice(xp, 1, j * m->dilation, j * m->dilation + n);
        cols = tg_concat_many(m->k, win, 2); /* [B, n, k*in] */
    }
    tg_tensor *w = tg_permute(m->weight, (const int[]){0, 2, 1}); /* [out, k, in] */
    w = tg_reshape(w, TG_SHAPE(m->out, m->k * m->in));
    tg_tensor *y = tg_matmul_t(cols, w, false, true); /* [B, n, out] */
    if (m->bias) y = tg_add(y, m->bias);
    return y;
}

int tg_conv1d_params(tg_conv1d *m, tg_params *p, const char *prefix) {
    if (!m || !p) {
        tg_set_error("conv1d_params: NULL %s", !m ? "module" : "list");
        return -1;
    }
    if (tg_params_add(p, prefix, "weight", m->weight)) return -1;
    if (m->bias && tg_params_add(p, prefix, "bias", m->bias)) return -1;
    return 0;
}

void tg_conv1d_free(tg_conv1d *m) {
    if (!m) return;
    tg_free(m->weight);
    tg_free(m->bias);
    tg_sys_free(m);
}
