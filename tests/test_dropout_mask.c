/* The dropout mask generator (src/tensor/dropout_mask.c): its AVX2 and
 * portable loops give the same mask, also where a row crosses a multiple of
 * 2^32 counters, with the right keep rate and no correlation between
 * neighbours. Built in both the float and the double test runs, since each
 * precision has its own AVX2 store path. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/kernels.h"
#include "tensor/simd.h"
#include "tensor/tensor_internal.h"

Test(dropout_mask, avx2_and_portable_agree_also_across_2_to_the_32) {
    tg_dropout_mask m = tg_dropout_mask_new(5, 7, 0.3);
    static tg_real a[4099], b[4099];
    /* An odd length (vector body plus tail), and rows that start just below
     * a multiple of 2^32, where the hash's key changes. */
    const uint64_t starts[] = {0, 123456789, 0xFFFFFFFFull - 100, 0x2FFFFFFF0ull, 0xFFFFFFFFFFFFF000ull};
    for (size_t s = 0; s < sizeof starts / sizeof starts[0]; s++) {
        int old = tg__isa_cap(TG_ISA_AVX512);
        tg_dropout_mask_row(&m, starts[s], 4099, a);
        tg__isa_cap(TG_ISA_PORTABLE);
        tg_dropout_mask_row(&m, starts[s], 4099, b);
        tg__isa_cap(old);
        cr_expect(memcmp(a, b, sizeof a) == 0, "row at %llu: AVX2 and portable masks differ",
                  (unsigned long long)starts[s]);
        int kept = 0;
        for (int j = 0; j < 4099; j++) kept += a[j] != 0;
        cr_expect(kept > 2650 && kept < 3090, "row at %llu kept %d of 4099 (p = 0.3)", (unsigned long long)starts[s],
                  kept);
    }
}

Test(dropout_mask, neighbours_are_independent) {
    /* P(both dropped) = p^2 for adjacent and for 2^16-apart counters. */
    const int n = 1000000;
    tg_dropout_mask m = tg_dropout_mask_new(11, 0, 0.5);
    tg_real *r = malloc(sizeof(tg_real) * (size_t)(n + 65536));
    cr_assert_not_null(r);
    tg_dropout_mask_row(&m, 0, n + 65536, r);
    int both1 = 0, both16 = 0;
    for (int i = 0; i < n; i++) {
        both1 += r[i] == 0 && r[i + 1] == 0;
        both16 += r[i] == 0 && r[i + 65536] == 0;
    }
    cr_expect(fabs(both1 / (double)n - 0.25) < 0.003, "adjacent: P(both dropped) = %g", both1 / (double)n);
    cr_expect(fabs(both16 / (double)n - 0.25) < 0.003, "2^16 apart: P(both dropped) = %g", both16 / (double)n);
    free(r);
}
