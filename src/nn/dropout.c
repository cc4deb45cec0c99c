/* Dropout layer, as torch.nn.Dropout: inverted dropout (tg_dropout) while
 * training, the identity in eval mode. A new layer is in training mode, as
 * in PyTorch.
 *
 * Each layer owns a random stream forked from the constructor's generator,
 * so two layers made from one generator draw different masks, and a model
 * rebuilt from the same seed draws the same masks again. */
#include "module.h"

tg_dropout_layer *tg_dropout_layer_new(tg_real p, tg_rng *rng) {
    if (!tg_check_dropout("dropout", p)) return NULL;
    tg_dropout_layer *m = tg_module_alloc("dropout", sizeof *m, false, NULL);
    if (!m) return NULL;
    m->p = p;
    m->training = true;
    /* NULL rng: a fixed stream (seed 0), for layers that never drop (p = 0)
     * or programs that do not care which elements are dropped. */
    tg_rng fallback = tg_rng_new(0);
    tg_rng *parent = rng ? rng : &fallback;
    m->rng = tg_rng_fork(parent, tg_rng_next_u64(parent));
    return m;
}

tg_tensor *tg_dropout_layer_forward(tg_dropout_layer *m, tg_tensor *x) {
    if (!tg_module_input("dropout", m, x)) return NULL;
    if (!m->training || m->p == 0) return x;
    return tg_dropout(x, m->p, &m->rng);
}

tg_real tg_dropout_layer_active_p(const tg_dropout_layer *m) { return m && m->training ? m->p : 0; }

tg_rng *tg_dropout_layer_rng(tg_dropout_layer *m) { return m ? &m->rng : NULL; }

void tg_dropout_layer_train(tg_dropout_layer *m, bool on) {
    if (m) m->training = on;
}

void tg_dropout_layer_free(tg_dropout_layer *m) {
    if (m) tg_sys_free(m);
}
