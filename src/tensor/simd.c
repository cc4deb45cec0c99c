/* tg_cpu_has_avx2, tg_cpu_has_avx512 (simd.h). */
#include "simd.h"

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
