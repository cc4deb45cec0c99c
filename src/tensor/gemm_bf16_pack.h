/* Internal: what the bf16 GEMM's engines (gemm_bf16.c: micro-kernels,
 * engine table, choice, entry points) and its packers (gemm_bf16_pack.c)
 * share: the shapes of the packed panels and blocks, an operand as stored
 * (bf_src) and its rounding to bf16 (bf, bf_h, bf_at), and the packers the
 * engine table names. */
#ifndef TG_GEMM_BF16_PACK_H
#define TG_GEMM_BF16_PACK_H

#include <stddef.h>
#include <stdint.h>

#include "tensor/gemm_driver.h"
#include "tensor/half.h"

/* A 6 x 32 tile of C in twelve 16-float accumulators, as gemm.c's AVX-512
 * kernel. That is enough for vdpbf16ps on Zen 4 (6 cycles of latency, one
 * 512-bit instruction a cycle: six independent sums keep it busy), and a
 * pair step's loads (128 bytes of B, six 32-bit words of A for 12
 * instructions) are well within the core's load ports: on packed operands
 * in cache the kernel runs at the instruction's rate (tg_bf16_peak_measure),
 * so what the product loses is outside it, in packing and the caches.
 *
 * Block sizes (KC in elements of K, rounded to pairs): every KC block costs
 * each tile of C a load, a store and a start and drain of the k loop, so
 * the deeper the block, the less of that per multiply-add, and a K up to
 * KC is a single pass. The KC x 32 sliver of B (KC * 64 bytes in bf16)
 * would fill the 32 KB L1 at KC = 512 already, so it does not stay there:
 * it streams from L2, in order, once per tile, which the hardware
 * prefetchers follow. An MC x KC block of A (MC * KC * 2 bytes, 144 KB)
 * stays in the 1 MB L2. */
#define MR 6
#define NR 32
#ifndef BF_MC
#define BF_MC 72
#endif
#ifndef BF_KC
#define BF_KC 1024
#endif
#define BF_NC 4064 /* a multiple of NR; a KC x NC panel of B is 8 MB, in L3 */

/* The AMX engines' panels of A: AMX_MR rows (two tiles of 16), depth in
 * chunks of AMX_KQ pairs (the layout: gemm_bf16_pack.c; the blocks:
 * gemm_bf16.c). */
#define AMX_MR 32
#define AMX_KQ 16 /* pairs a chunk (a tile row of A) */

/* An operand as the GEMM packs it (gemm_bf16.c, at the top). */
static inline uint16_t bf(float f) { return tg__bf16_from_bits_daz(tg__float_bits(f)); }
/* A bf16 operand as the GEMM packs it: bf of its value widened to float,
 * which is exact, so what changes is only a subnormal (a zero of its sign)
 * and a NaN (made quiet): the same bits as the float path's. */
static inline uint16_t bf_h(uint16_t h) { return tg__bf16_from_bits_daz((uint32_t)h << 16); }

/* An operand as stored (tg_k_gemm_bf16_mixed): tg_real values (f) or bf16
 * bits (h), one of the two set, rows ld elements apart. */
typedef struct {
    const tg_real *f;
    const uint16_t *h;
    int ld;
} bf_src;
/* Element (r, c) of the stored operand (the transposes are the caller's), packed. */
static inline uint16_t bf_at(bf_src s, int r, int c) {
    size_t i = (size_t)r * s.ld + c;
    return s.h ? bf_h(s.h[i]) : bf((float)s.f[i]);
}

/* The engines' packers (gemm_engine's pack_a, pack_b and pack_b_run,
 * gemm_driver.h; gemm_bf16_pack.c): op(A)'s rows ic.. (mcur of them) into
 * MR-row pair panels, or AMX_MR-row panels of AMX_KQ-pair chunks; an
 * NR-wide sliver of op(B) (columns j0.., n of them) in pairs; slivers
 * s0..s1-1 of the panel at once. */
void pack_a_pairs(const gemm_job *j, int ic, int mcur, void *apack_);
void pack_a_amx_block(const gemm_job *j, int ic, int mcur, void *apack_);
void pack_b_pairs(const gemm_job *j, int j0, int n, void *dst_);
void pack_b_pairs_run(const gemm_job *j, int s0, int s1, void *dst_);

/* The fp32 engine's packed path (gemm_bf16_fp32.c): the job on the float
 * GEMM's row and micro-kernel, its operands rounded (or widened) to bf16
 * as they are packed. false where the float GEMM would not pack the
 * product (its direct or few-row loops), with no_c (a job without C)
 * where that path would not keep C in blocks (gemm_c_blocked), or out of
 * memory: nothing done. */
bool tg__gemm_bf16_fp32(const gemm_job *job, bool no_c);

#endif
