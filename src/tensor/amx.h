/* Internal: AMX tiles (amx.c) for the bf16 GEMM's AMX engine (gemm_bf16.c).
 * tg_cpu_has_amx (simd.h) says whether they can run; nothing here may be
 * called where it said no (a tile instruction would raise SIGILL). */
#ifndef TG_AMX_H
#define TG_AMX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Why tg_cpu_has_amx() is false (a static sentence), NULL when it is true. */
const char *tg__amx_why_not(void);
/* The calling thread's tile configuration (tg__amx_tile's eight 16 x 64-byte
 * tiles), before its first tile; tg__amx_end releases the tiles when its
 * share of a product is done. */
void tg__amx_begin(void);
void tg__amx_end(void);
/* The 32 x 32 float tile of C of an A panel and a B sliver kq chunks of
 * 16 bf16 pairs deep, in the AMX engine's layout (gemm_bf16_pack.c): row r's 16
 * pairs of chunk q of A at a + a_rs r + a_cs q (a packed panel: a_rs 32,
 * a_cs 1024; a bf16 A read in place: its leading dimension and 32); pair
 * p of column j of B at b[64 p + 2 j]. Summed from zero, or (from_c) from
 * the tile's values at t, and stored to t[ldt r + j]. stream_b: B's tiles
 * loaded with the T1 hint, not to be kept in L1 (amx.c says when). The
 * same bits either way. tdpbf16ps: see gemm_bf16.c for its arithmetic. */
void tg__amx_tile(int kq, const uint16_t *a, size_t a_rs, size_t a_cs, const uint16_t *b, float *t, int ldt,
                  bool from_c, bool stream_b);
/* tdpbf16ps's rate on one core in GFLOP/s, measured for about `seconds` on
 * tiles in registers; 0 where tiles cannot run. */
double tg__amx_rate(double seconds);

#endif
