/* Regression loss. The classification loss, tg_cross_entropy, is a fused op
 * in src/autograd (a log-softmax composed from public ops would be slower
 * and lose precision for confident logits). */
#include "nn.h"

/* mean((pred - target)^2), as torch.nn.functional.mse_loss with the default
 * reduction "mean"; the shapes must match exactly (PyTorch only warns when
 * they broadcast, which is nearly always a bug). */
tg_tensor *tg_mse_loss(tg_tensor *pred, tg_tensor *target) {
    char b1[64], b2[64];
    if (tg_any_null("mse_loss", 2, (const tg_tensor *const[]){pred, target})) return NULL;
    if (!tg_same_shape(pred, target)) {
        tg_set_error("mse_loss: pred %s and target %s differ in shape", tg_tshape(b1, pred), tg_tshape(b2, target));
        return NULL;
    }
    tg_tensor *diff = tg_sub(pred, target);
    return tg_mean_all(tg_mul(diff, diff));
}
