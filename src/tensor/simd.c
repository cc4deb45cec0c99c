/* tg_cpu_has_avx2, tg_cpu_has_avx512, tg_isa_level (simd.h) and the test
 * switch tg__isa_cap (tensor_internal.h). */
#include "simd.h"
#include "tensor_internal.h"

static int g_isa_cap = TG_ISA_AVX512_BF16;

int tg__isa_cap(int level) {
    int old = g_isa_cap;
    g_isa_cap = level;
    return old;
}

tg_isa tg_isa_level(void) {
    tg_isa cpu = tg_cpu_has_avx512_bf16() ? TG_ISA_AVX512_BF16
                 : tg_cpu_has_avx512()    ? TG_ISA_AVX512
                 : tg_cpu_has_avx2()      ? TG_ISA_AVX2
                                          : TG_ISA_PORTABLE;
    return (int)cpu < g_isa_cap ? cpu : (tg_isa)g_isa_cap;
}

bool tg_cpu_has_avx2(void) {
#if TG_X86
    static int cached = -1; /* benign race: every thread computes the same value */
    if (cached < 0) cached = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return cached;
#else
    return false;
#endif
}

bool tg_cpu_has_avx512(void) {
#if TG_X86
    /* libgcc's feature bits for AVX-512 already require the OS to save the
     * zmm state (XCR0), so a kernel that disabled it reports none. */
    static int cached = -1;
    if (cached < 0) cached = tg_cpu_has_avx2() && __builtin_cpu_supports("avx512f");
    return cached;
#else
    return false;
#endif
}

bool tg_cpu_has_avx512_bf16(void) {
#if TG_X86
    static int cached = -1;
    if (cached < 0)
        cached = tg_cpu_has_avx512() && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                 __builtin_cpu_supports("avx512bf16");
    return cached;
#else
    return false;
#endif
}
