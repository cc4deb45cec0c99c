/* tg_cpu_has_avx2, tg_cpu_has_avx512, tg_isa_level (simd.h), tg_isa_name
 * (tensor.h), the TG_ISA environment variable and the test switch
 * tg__isa_cap (tensor_internal.h). */
#include "simd.h"
#include "tensor.h"
#include "tensor_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const ISA_NAMES[] = {"portable", "avx2", "avx512", "avx512_bf16", "amx"};

/* TG_ISA=portable|avx2|avx512|avx512_bf16|amx caps every kernel's instruction
 * set, as ATEN_CPU_CAPABILITY does PyTorch's: read once, at the first
 * kernel; an unknown value is said on stderr and ignored, one above the
 * CPU's is capped at the CPU's (said too). -1: not read yet. */
static int g_isa_cap = -1;

/* Asked once, then cached: every kernel's dispatch (TG_PICK) asks, and the
 * questions (pthread_once in tg_cpu_has_amx) were 1% of a bf16 GPT step. */
static tg_isa cpu_level(void) {
    static int cached = -1; /* benign race: every thread computes the same value */
    if (cached < 0)
        cached = tg_cpu_has_amx()           ? TG_ISA_AMX
                 : tg_cpu_has_avx512_bf16() ? TG_ISA_AVX512_BF16
                 : tg_cpu_has_avx512()      ? TG_ISA_AVX512
                 : tg_cpu_has_avx2()        ? TG_ISA_AVX2
                                            : TG_ISA_PORTABLE;
    return (tg_isa)cached;
}

static int env_cap(void) {
    const char *v = getenv("TG_ISA");
    if (!v || !*v) return TG_ISA_AMX;
    for (int k = 0; k <= TG_ISA_AMX; k++)
        if (strcmp(v, ISA_NAMES[k]) == 0) {
            if (k > (int)cpu_level())
                fprintf(stderr, "tgrad: TG_ISA=%s: this CPU has %s at most; using %s\n", v, ISA_NAMES[cpu_level()],
                        ISA_NAMES[cpu_level()]);
            return k;
        }
    fprintf(stderr, "tgrad: TG_ISA=%s is not portable, avx2, avx512, avx512_bf16 or amx; ignored\n", v);
    return TG_ISA_AMX;
}

int tg__isa_cap(int level) {
    int old = g_isa_cap < 0 ? env_cap() : g_isa_cap;
    g_isa_cap = level;
    return old;
}

tg_isa tg_isa_level(void) {
    if (g_isa_cap < 0) g_isa_cap = env_cap(); /* benign race: every thread reads the same */
    tg_isa cpu = cpu_level();
    return (int)cpu < g_isa_cap ? cpu : (tg_isa)g_isa_cap;
}

const char *tg_isa_name(void) { return ISA_NAMES[tg_isa_level()]; }

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
