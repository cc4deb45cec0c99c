/* Positional encodings (d2l, "Self-Attention and Positional Encoding").
 *
 * Self-attention is permutation-equivariant: shuffling the tokens shuffles
 * the outputs the same way. To let the model use order, a table P of one
 * row per position is added to the input, X + P[:T], then dropout.
 *
 * Fixed (sinusoidal) encoding, computed once in double and stored:
 *     P[i, 2j]   = sin(i / 10000^(2j/d))
 *     P[i, 2j+1] = cos(i / 10000^(2j/d))
 * Column pair j oscillates with frequency w_j = 10000^(-2j/d), from one turn
 * per 2 pi positions down to one per 10000 * 2 pi: low columns change fast
 * (like the low bits of a binary counter), high columns slowly. Because
 * sin/cos of i + delta are a rotation of sin/cos of i by the angle delta w_j,
 * a fixed 2x2 matrix, independent of i, maps row i onto row i + delta, so a
 * linear layer can attend by relative position. With an odd d the last
 * column is a sine without its cosine partner.
 *
 * Learned encoding (d2l's exercise): P is a trainable [max_len, d] table,
 * initialised N(0, 0.02^2) as BERT/GPT-2 do; forward slices the first T rows
 * with tg_slice, so only rows 0..T-1 receive gradient. */
#include "module.h"

#include <math.h>

#define POSENC_DEFAULT_MAX_LEN 1000

/* Shared checks of both constructors; fills m except P. */
static tg_posenc *posenc_alloc(const char *op, int num_hiddens, tg_real dropout, int max_len, bool learned,
                               tg_rng *rng) {
    if (max_len < 0) {
        tg_set_error("%s: max_len %d must be positive (or 0: d2l's default 1000)", op, max_len);
        return NULL;
    }
    if (max_len == 0) max_len = POSENC_DEFAULT_MAX_LEN; /* d2l's default max_len=1000 */
    if (num_hiddens <= 0) {
        tg_set_error("%s: num_hiddens %d must be positive", op, num_hiddens);
        return NULL;
    }
    if (!tg_check_dropout(op, dropout)) return NULL;
    /* the fixed table draws nothing; its dropout takes NULL */
    tg_posenc *m = tg_module_alloc(op, sizeof *m, learned, rng);
    if (!m) return NULL;
    m->max_len = max_len;
    m->num_hiddens = num_hiddens;
    m->learned = learned;
    m->P = tg_empty_persistent(TG_SHAPE(max_len, num_hiddens));
    m->dropout = tg_dropout_layer_new(dropout, rng);
    if (!m->P || !m->dropout) {
        tg_posenc_free(m);
        return NULL;
    }
    return m;
}

tg_posenc *tg_posenc_new(int num_hiddens, tg_real dropout, int max_len, tg_rng *rng) {
    tg_posenc *m = posenc_alloc("posenc", num_hiddens, dropout, max_len, false, rng);
    if (!m) return NULL;
    const int d = num_hiddens;
    for (int i = 0; i < m->max_len; i++) {
        tg_real *row = m->P->data + (int64_t)i * d;
        for (int c = 0; c < d; c++) {
            int j2 = c & ~1; /* 2j: both columns of a pair share one frequency */
            double angle = (double)i / pow(10000.0, (double)j2 / d);
            row[c] = (tg_real)((c & 1) ? cos(angle) : sin(angle));
        }
    }
    return m;
}

tg_posenc *tg_posenc_learned_new(int num_hiddens, tg_real dropout, int max_len, tg_rng *rng) {
    tg_posenc *m = posenc_alloc("posenc_learned", num_hiddens, dropout, max_len, true, rng);
    if (!m) return NULL;
    tg_fill_normal(m->P, 0, (tg_real)0.02, rng);
    tg_set_requires_grad(m->P, true);
    return m;
}

tg_tensor *tg_posenc_forward(tg_posenc *m, tg_tensor *X) {
    char b[64];
    if (!tg_module_present("posenc", "forward", m)) return NULL;
    if (tg_any_null("posenc", 1, (const tg_tensor *const[]){X})) return NULL;
    if (X->ndim < 2 || X->shape[X->ndim - 1] != m->num_hiddens) {
        tg_set_error("posenc: input %s: expected [B, T, %d]", tg_tshape(b, X), m->num_hiddens);
        return NULL;
    }
    int T = X->shape[X->ndim - 2];
    if (T > m->max_len) {
        tg_set_error("posenc: sequence length %d > max_len %d", T, m->max_len);
        return NULL;
    }
    /* P[:T] as [T, d], broadcast over the batch. The fixed table does not
     * require grad, so the slice records nothing and acts as a constant; the
     * learned one records a slice node that routes gradient to rows < T. */
    tg_tensor *PT = T == m->max_len ? m->P : tg_slice(m->P, 0, 0, T);
    return tg_dropout_layer_forward(m->dropout, tg_add(X, PT));
}

int tg_posenc_params(tg_posenc *m, tg_params *p, const char *prefix) {
    if (!tg_module_present("posenc", "params", m)) return -1;
    return m->learned ? tg_params_add(p, prefix, "P", m->P) : 0;
}

void tg_posenc_train(tg_posenc *m, bool on) { tg_dropout_layer_train(m ? m->dropout : NULL, on); }

void tg_posenc_free(tg_posenc *m) {
    if (!m) return;
    tg_free(m->P);
    tg_dropout_layer_free(m->dropout);
    tg_sys_free(m);
}
