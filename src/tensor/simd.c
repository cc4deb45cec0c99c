/* tg_cpu_has_avx2 (simd.h). */
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
