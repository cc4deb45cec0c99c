/* Run-time AVX2 dispatch, shared by every kernel with a hand-written AVX2
 * path (gemm.c, kernels_exp.c, dropout_mask.c, kernels_attention.c). Files build
 * with the baseline ISA; functions marked TG_AVX2 are compiled for AVX2 and
 * FMA and called only when tg_cpu_has_avx2() says the CPU has both, so the
 * same binary runs on a machine without them, on the portable loops. */
#ifndef TG_SIMD_H
#define TG_SIMD_H

#include <stdbool.h>

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define TG_X86 1
#include <immintrin.h>
#define TG_AVX2   __attribute__((target("avx2,fma")))
#define TG_AVX512 __attribute__((target("avx512f,avx2,fma")))
#else
#define TG_X86 0
#endif

/* true when the CPU has AVX2 and FMA (asked once, then cached). */
bool tg_cpu_has_avx2(void);
/* true when the CPU (and the OS, which must save the zmm registers) has
 * AVX-512F besides AVX2 and FMA. */
bool tg_cpu_has_avx512(void);

#endif
