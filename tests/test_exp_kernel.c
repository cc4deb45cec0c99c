/* tg_k_exp_shift (src/tensor/kernels_exp.c), the exp of every softmax: in
 * the float build it is an AVX2 polynomial, so it is checked here against
 * libm's double exp, over the whole range a softmax row can give it (x -
 * max from 0 down past the underflow at -87.3), for lengths that are not a
 * multiple of the 8 lanes. Runs in the float and the double test runs. */
#include <criterion/criterion.h>
#include <math.h>

#include "tensor/kernels.h"
#include "tensor/simd.h"
#include "tensor/tensor_internal.h"
#include "isa_util.h"

#ifdef TG_DOUBLE
#define REL 1e-15
#else
#define REL 4e-7 /* about 3 ulps of float */
#endif

static void exp_shift_matches_libm(void) {
    enum { N = 1003 };
    static tg_real s[N];
    for (int n = 1; n <= N; n += 167) {
        tg_real shift = (tg_real)3.25;
        for (int j = 0; j < n; j++) s[j] = shift - (tg_real)(100.0 * j / N); /* x - shift in (-100, 0] */
        double want_sum = 0;
        tg_real got_sum = tg_k_exp_shift(s, n, shift);
        for (int j = 0; j < n; j++) {
            double x = (double)(shift - (tg_real)(100.0 * j / N)) - (double)shift;
            double want = exp(x);
            want_sum += want;
            if (x < -87.3) {
                cr_expect(s[j] == 0 || fabs(s[j] - want) <= 1e-37, "exp(%g) = %g, want ~0", x, (double)s[j]);
                continue;
            }
            cr_assert(fabs((double)s[j] - want) <= REL * want + 1e-38, "n=%d: exp(%.9g) = %.9g, want %.9g", n, x,
                      (double)s[j], want);
        }
        cr_expect(fabs((double)got_sum - want_sum) <= 1e-6 * want_sum, "n=%d: sum %.9g, want %.9g", n, (double)got_sum,
                  want_sum);
    }
}

Test(exp_kernel, matches_libm_and_sums_in_order) { at_every_isa(exp_shift_matches_libm); }

Test(exp_kernel, softmax_row_of_large_logits_is_finite) {
    tg_real s[9] = {1000, 999, 998, 1000, 0, -1000, 1000, 1000, 999.5};
    tg_real sum = tg_k_exp_shift(s, 9, 1000);
    cr_expect(isfinite(sum) && fabs((double)sum - (4 + exp(-1) + exp(-2) + exp(-0.5))) < 1e-5, "sum %g", (double)sum);
    cr_expect(s[0] == 1 && s[4] == 0 && s[5] == 0, "exp(0) = %g, exp(-1000) = %g", (double)s[0], (double)s[4]);
}

/* The cross-entropy's row loops, at every ISA build this machine has:
 * sum_j exp(x_j - shift) and d_j += scale exp(x_j - shift), against libm's
 * double exp, for lengths around the lanes. */
Test(exp_kernel, sum_exp_and_add_scaled_exp_match_libm) {
    enum { N = 301 };
    static tg_real x[N], d[N];
    for (int cap = TG_ISA_PORTABLE; cap <= TG_ISA_AVX512; cap++) {
        int old = tg__isa_cap(cap);
        for (int n = 1; n <= N; n += 25) {
            const tg_real shift = (tg_real)2.5, scale = (tg_real)-0.125;
            double want_sum = 0;
            for (int j = 0; j < n; j++) {
                x[j] = (tg_real)(2.5 - 30.0 * sin(0.37 * j) * sin(0.37 * j)); /* x - shift in [-30, 0] */
                d[j] = (tg_real)(0.01 * j);
                want_sum += exp((double)x[j] - (double)shift);
            }
            tg_real sum = tg_k_sum_exp(x, n, shift);
            cr_expect(fabs((double)sum - want_sum) <= 1e-6 * want_sum, "ISA %d, n=%d: sum %.9g, want %.9g", cap, n,
                      (double)sum, want_sum);
            tg_k_add_scaled_exp(d, x, n, shift, scale);
            for (int j = 0; j < n; j++) {
                double want = 0.01 * j + (double)scale * exp((double)x[j] - (double)shift);
                cr_assert(fabs((double)d[j] - want) <= 4 * REL * (1 + fabs(want)),
                          "ISA %d, n=%d, j=%d: %.9g, want %.9g", cap, n, j, (double)d[j], want);
            }
        }
        tg__isa_cap(old);
    }
}
