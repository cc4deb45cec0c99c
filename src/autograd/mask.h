/* The attention mask shared by tg_masked_softmax and tg_sparsemax (internal).
 *
 * For x of shape [B, Q, K], the keys query (b, q) may see always form a
 * prefix 0..L-1 of the row, with
 *   L = min(K, lens[b] (lens_ndim 1) or lens[b*Q + q] (lens_ndim 2), q + 1 if causal).
 * A length larger than K means "every key", as in d2l. As d2l's
 * masked_softmax, masked scores are replaced by MASK_VALUE = -1e6 before
 * normalising, so a row with L = 0 is normalised over K equal values and
 * comes out uniform, never NaN. */
#ifndef TG_AUTOGRAD_MASK_H
#define TG_AUTOGRAD_MASK_H

#include "op.h"

#define MASK_VALUE ((tg_real)-1e6)

/* Number of visible keys (a prefix) of row (b, q). */
static inline int mask_visible_count(const tg_mask *m, int b, int q, int Q, int K) {
    int L = K;
    if (m->lens && m->lens_ndim == 1 && m->lens[b] < L) L = m->lens[b];
    if (m->lens && m->lens_ndim == 2 && m->lens[(int64_t)b * Q + q] < L) L = m->lens[(int64_t)b * Q + q];
    if (m->causal && q + 1 < L) L = q + 1;
    return L;
}

/* Checks x (non-NULL) and the mask; records "<op>: ..." and returns false on
 * a bad rank, lens_ndim or a negative length. */
static inline bool mask_check(const char *op, const tg_tensor *x, const tg_mask *m) {
    char b[64];
    if (x->ndim != 3) {
        tg_set_error("%s: x %s must be 3-D [batch, queries, keys]", op, tg_tshape(b, x));
        return false;
    }
    if (x->shape[2] == 0) {
        tg_set_error("%s: x %s has no keys to normalise over", op, tg_tshape(b, x));
        return false;
    }
    if (m->lens_ndim < 0 || m->lens_ndim > 2) {
        tg_set_error("%s: x %s with lens_ndim %d: must be 0 (no lengths), 1 ([B]) or 2 ([B, Q])", op, tg_tshape(b, x),
                     m->lens_ndim);
        return false;
    }
    if (m->lens && m->lens_ndim == 0) {
        tg_set_error("%s: x %s: lens given with lens_ndim 0 (set lens_ndim to 1 or 2)", op, tg_tshape(b, x));
        return false;
    }
    if (m->lens) {
        int64_t n = m->lens_ndim == 1 ? x->shape[0] : (int64_t)x->shape[0] * x->shape[1];
        for (int64_t i = 0; i < n; i++)
            if (m->lens[i] < 0) {
                tg_set_error("%s: x %s: length %d at position %lld of lens (%s) is negative", op, tg_tshape(b, x),
                             m->lens[i], (long long)i, m->lens_ndim == 1 ? "[B]" : "[B, Q]");
                return false;
            }
    }
    return true;
}

/* The visible count of every row, B*Q ints in the arena: forward reads it, and
 * backward keeps it (as the node's state), since the caller's lens may not outlive the graph. */
static inline int *mask_limits(const tg_tensor *x, const tg_mask *m) {
    int B = x->shape[0], Q = x->shape[1], K = x->shape[2];
    int64_t rows = (int64_t)B * Q;
    int *lim = tg_arena_alloc(sizeof(int) * (size_t)(rows ? rows : 1));
    if (!lim) return NULL;
    for (int b = 0; b < B; b++)
        for (int q = 0; q < Q; q++) lim[(int64_t)b * Q + q] = mask_visible_count(m, b, q, Q, K);
    return lim;
}

#endif
