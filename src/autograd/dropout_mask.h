/* The dropout mask, shared by tg_dropout (ops_dropout.c) and the fused
 * attention op (ops_attention.c), so that both draw the same mask:
 *   counter i is kept iff (tg_rng_hash(key, i) >> 11) >= ceil(p 2^53),
 * i.e. iff tg_rng_uniform_at(seed, stream, i) >= p, and a kept element is
 * scaled by 1/(1-p) (inverted dropout, as PyTorch: x * mask * scale). */
#ifndef TG_DROPOUT_MASK_H
#define TG_DROPOUT_MASK_H

#include "autograd.h"

typedef struct {
    uint64_t key;         /* tg_rng_key(seed, stream) */
    uint64_t threshold;   /* ceil(p 2^53); >= 1 when p > 0 */
    tg_real scale;        /* 1 / (1 - p) */
} tg_dropout_mask;

tg_dropout_mask tg_dropout_mask_new(uint64_t seed, uint64_t stream, tg_real p);
/* row[j] = scale if counter index + j is kept, else 0, for j < n.
 * AVX2 when the CPU has it (4 hashes at a time), else portable C. */
void tg_dropout_mask_row(const tg_dropout_mask *m, uint64_t index, int64_t n, tg_real *row);

#endif
