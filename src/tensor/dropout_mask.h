/* The dropout mask, shared by tg_dropout (ops_dropout.c) and the fused
 * attention op (ops_attention.c), so that both draw the same mask for the
 * same RNG state. Counter c (64 bits) is kept iff
 *   h(c) >= ceil(p 2^32),  h(c) = triple32(lo32(c) ^ key32(hi32(c))),
 * where key32 is a 32-bit key drawn from (seed, stream, hi32(c)) with the
 * 64-bit hash of rng.c, and triple32 is a 32-bit integer hash with three
 * multiplies (Wellons' "hash prospector", bias 0.02): P(keep) = 1 - p to
 * within 2^-32. 32-bit lanes hash 8 counters per AVX2 instruction, 3-4x
 * faster than the 64-bit SplitMix finaliser, which needs emulated 64-bit
 * products. A kept element is scaled by 1/(1-p) (inverted dropout, as
 * PyTorch: x * mask * scale). */
#ifndef TG_DROPOUT_MASK_H
#define TG_DROPOUT_MASK_H

#include "tensor.h"

typedef struct {
    uint64_t key;       /* tg_rng_key(seed, stream) */
    uint64_t threshold; /* ceil(p 2^32), in [1, 2^32] when 0 < p < 1 */
    tg_real scale;      /* 1 / (1 - p) */
} tg_dropout_mask;

tg_dropout_mask tg_dropout_mask_new(uint64_t seed, uint64_t stream, tg_real p);
/* row[j] = scale if counter index + j is kept, else 0, for j < n.
 * AVX2 when the CPU has it (8 hashes at a time), else portable C; both
 * give the same mask. */
void tg_dropout_mask_row(const tg_dropout_mask *m, uint64_t index, int64_t n, tg_real *row);

#endif
