/* Internal: the fused attention's store of a task's finished gradient rows
 * (autograd/ops_attention.c, add_rows; kernels_attention.c). */
#ifndef TG_KERNELS_ATTENTION_ROWS_H
#define TG_KERNELS_ATTENTION_ROWS_H

#include <stdbool.h>
#include <stdint.h>

#include "tensor/tensor.h"

/* g's rows (n of them, rs apart) = acc's rows + 0 (set: g is a fresh
 * buffer, every element written once; the + 0 turns a -0 into the +0 that
 * adding acc to a zeroed buffer gives), or += acc's rows (set false); acc's
 * rows width apart. Under set, whole 64-byte lines of g go out with
 * streaming stores (the rows lie 3 h d apart in the fused projection's
 * gradient, which a training step's next op reads from beyond the core's
 * caches anyway): no read of a line that is about to be overwritten. The
 * same bits either way. */
void tg_k_attn_store_rows(int n, int width, const tg_real *acc, tg_real *g, int64_t rs, bool set);

#endif
