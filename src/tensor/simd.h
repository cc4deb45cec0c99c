/* Run-time instruction-set dispatch, one mechanism for every kernel with a
 * hand-written path (the GEMMs, the bf16 and AMX engines, exp, dropout
 * masks, attention rows): levels portable < AVX2 < AVX-512 < AVX-512 BF16
 * < AMX. Files build with the baseline ISA; functions marked TG_AVX2,
 * TG_AVX512, TG_AVX512_BF16 or TG_AMX are compiled for that level and called
 * only when tg_isa_level() says the CPU (and, for AMX, the kernel's
 * permission) allows it, so one binary runs anywhere; TG_ISA caps the level
 * (TG_ISA=avx2 reproduces the README's figures on any x86-64). */
#ifndef TG_SIMD_H
#define TG_SIMD_H

#include <stdbool.h>

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define TG_X86 1
#include <immintrin.h>
#define TG_AVX2        __attribute__((target("avx2,fma")))
#define TG_AVX512      __attribute__((target("avx512f,avx2,fma")))
/* vdpbf16ps and vcvtne2ps2bf16 (AVX-512 BF16) besides AVX-512F and BW. */
#define TG_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma")))
/* AMX tiles (tileloadd, tdpbf16ps) besides AVX-512 BF16. */
#define TG_AMX         __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma")))
#else
#define TG_X86 0
#endif
/* 1 where the hand-written float paths (intrinsics on float vectors) are
 * built: x86, float build. */
#if TG_X86 && !defined(TG_DOUBLE)
#define TG_SIMD_F32 1
#else
#define TG_SIMD_F32 0
#endif

/* ISA levels a kernel is built for, narrowest first. TG_ISA_AVX512_BF16
 * adds the bfloat16 dot product (vdpbf16ps) to AVX-512, TG_ISA_AMX the
 * tile engine (tdpbf16ps, with the kernel's permission, amx.c): only the
 * bf16 GEMM (gemm_bf16.c) has paths for them; every other kernel runs its
 * AVX-512 one there, so a kernel tests `level >= TG_ISA_AVX512`, never `==`. */
typedef enum { TG_ISA_PORTABLE = 0, TG_ISA_AVX2 = 1, TG_ISA_AVX512 = 2, TG_ISA_AVX512_BF16 = 3, TG_ISA_AMX = 4 } tg_isa;
/* The widest level the CPU has, capped by tg__isa_cap (tensor_internal.h):
 * every dispatching kernel asks this, so one switch selects a path in all. */
tg_isa tg_isa_level(void);

/* The one way a kernel chooses its path: TG_PICK(on, portable, avx2, avx512)
 * is the widest of the three that tg_isa_level() allows (a kernel without
 * an AVX-512 path names its AVX2 one twice; the AVX-512 BF16 level runs the
 * AVX-512 one), when `on` is 1; when `on` is 0 (a build without those
 * paths: not x86, or the double build for the hand-written float ones) it
 * is `portable`, and the other names need not exist. `on` must expand to a
 * literal 0 or 1: TG_X86 or TG_SIMD_F32. The three may be functions (called
 * as TG_PICK(...)(args)) or anything else of one type, a table of block
 * sizes say. The exceptions are the paths of the AVX-512 BF16 level, chosen
 * by tg_isa_level() >= TG_ISA_AVX512_BF16 where they are used: the bf16
 * GEMM's vdpbf16ps kernel and packers (gemm_bf16.c, gemm_bf16_pack.c) and attention's
 * roundings with vcvtneps2bf16 (kernels_attention.c, _block.c). */
#define TG_PICK(on, portable, avx2, avx512)  TG_PICK_(on, portable, avx2, avx512)
#define TG_PICK_(on, portable, avx2, avx512) TG_PICK_##on(portable, avx2, avx512)
#define TG_PICK_0(portable, avx2, avx512)    (portable)
#define TG_PICK_1(portable, avx2, avx512) \
    (tg_isa_level() >= TG_ISA_AVX512 ? (avx512) : tg_isa_level() >= TG_ISA_AVX2 ? (avx2) : (portable))

/* One loop body, built once per ISA. The compiler vectorises a plain loop
 * at the width of the ISA its function is compiled for; the library is
 * compiled for the baseline (SSE2 on x86-64), so a loop written once runs
 * 4 floats wide unless it is compiled again for AVX2 (8) and AVX-512 (16).
 * TG_ISA_DISPATCH(name, params, args) expects
 *     TG_KERNEL_BODY void name##_body params { ... }
 * and defines name##_portable, name##_avx2 and name##_avx512 (the body
 * inlined into a function compiled for that ISA) and `static void name
 * params`, which runs the one TG_PICK chooses. Results are the same at every
 * width for elementwise loops (no FMA contraction under -std=c11); a
 * reduction may round differently. Example: kernels_elementwise.c. */
#define TG_KERNEL_BODY static inline __attribute__((always_inline))
#if TG_X86
#ifdef __clang__
#define TG_AVX512_VEC TG_AVX512
#else /* GCC otherwise vectorises 256 bits wide even in an AVX-512 function */
#define TG_AVX512_VEC __attribute__((target("avx512f,avx2,fma,prefer-vector-width=512")))
#endif
#define TG_ISA_DISPATCH(name, params, args)                              \
    static void name##_portable params { name##_body args; }             \
    TG_AVX2 static void name##_avx2 params { name##_body args; }         \
    TG_AVX512_VEC static void name##_avx512 params { name##_body args; } \
    static void name params { TG_PICK(1, name##_portable, name##_avx2, name##_avx512) args; }
#else
#define TG_ISA_DISPATCH(name, params, args) \
    static void name params { name##_body args; }
#endif

/* true when the CPU has AVX2 and FMA (asked once, then cached). */
bool tg_cpu_has_avx2(void);
/* true when the CPU (and the OS, which must save the zmm registers) has
 * AVX-512F besides AVX2 and FMA. */
bool tg_cpu_has_avx512(void);
/* true when the CPU has AVX-512 BF16 (and AVX-512 BW, VL) besides the above. */
bool tg_cpu_has_avx512_bf16(void);
/* true when AMX tiles can run here: AVX-512 BF16 as above, AMX-TILE and
 * AMX-BF16 in CPUID, the tile state enabled in XCR0, and the kernel's
 * permission to use it (arch_prctl, asked once per process). When not,
 * the first call says why on stderr, once (amx.c). */
bool tg_cpu_has_amx(void);

#endif
