/* Internal: the bf16 GEMM's small products without the driver's machinery
 * (gemm_bf16_small.c), for gemm_bf16.c. */
#ifndef TG_GEMM_BF16_SMALL_H
#define TG_GEMM_BF16_SMALL_H

#include <stdbool.h>

#include "tensor/gemm_driver.h"

/* C = alpha op(A) op(B) + beta C of *op through engine e, on the calling
 * thread, with the driver's loops and bits but none of its pool job,
 * chunk states or group bookkeeping: when the product is one K block, one
 * panel of B, one share of the driver's grid and small (its packed B at
 * most SMALL_B_BYTES). false: not such a product, or out of memory for
 * the packing buffer; nothing done, the caller runs gemm_drive. keep: the
 * engine's end is not run (its begin must then be safe to run again:
 * gemm_bf16.c's AMX tiles, held configured between products). */
bool gemm_bf16_small(const gemm_engine *e, const gemm_job *op, bool keep);

#endif
