/* Each build of a kernel tested where this machine can run it. */
#ifndef TG_TEST_ISA_UTIL_H
#define TG_TEST_ISA_UTIL_H

#include "tensor/simd.h"
#include "tensor/tensor_internal.h" /* tg__isa_cap */

/* Runs fn once at each ISA level from the portable C up (tg__isa_cap caps
 * the level at it; a level this CPU lacks runs the best it has), then
 * restores the cap. */
static inline void at_every_isa(void (*fn)(void)) {
    for (int cap = TG_ISA_PORTABLE; cap <= TG_ISA_AVX512; cap++) {
        int old = tg__isa_cap(cap);
        fn();
        tg__isa_cap(old);
    }
}

#endif
