/* The row kernels of the fused attention (src/tensor/kernels_attention.c):
 * in the float build they are AVX2 loops where the CPU has it, so they are
 * checked here against plain loops, for lengths around the 8 lanes (vector
 * body plus tail). Runs in the float and the double test runs. */
#include <criterion/criterion.h>
#include <math.h>

#include "tensor/kernels.h"

static tg_real val(int i, int salt) { return (tg_real)sin(0.7 * i + salt) * (tg_real)(1 + i % 5); }

Test(row_kernels, max_mul_and_ds_match_plain_loops) {
    enum { N = 37 };
    tg_real s[N], a[N], b[N], p[N], p2[N], dp[N], z[N];
    for (int n = 0; n <= N; n++) {
        for (int j = 0; j < n; j++) {
            s[j] = val(j, n);
            a[j] = val(j, 1);
            b[j] = val(j, 2);
            p[j] = p2[j] = val(j, 3);
            dp[j] = val(j, 4);
            z[j] = j % 3 ? (tg_real)1.25 : 0;
        }
        tg_real m = -1e30f, want = m;
        for (int j = 0; j < n; j++) want = s[j] > want ? s[j] : want;
        cr_expect_eq(tg_k_max_row(s, n, m), want, "max of %d", n);
        cr_expect_eq(tg_k_max_row(s, n, 100), 100, "start value kept, n %d", n);

        tg_k_mul_row(a, b, n);
        for (int j = 0; j < n; j++) cr_expect_eq(a[j], val(j, 1) * val(j, 2), "mul n %d j %d", n, j);

        const tg_real D = (tg_real)0.3;
        tg_k_attention_ds_row(p, dp, z, D, n);
        tg_k_attention_ds_row(p2, dp, NULL, D, n);
        for (int j = 0; j < n; j++) {
            double w = (double)val(j, 3) * ((double)dp[j] * z[j] - D);
            double w2 = (double)val(j, 3) * ((double)dp[j] - D);
            cr_expect(fabs(p[j] - w) <= 1e-6 * (1 + fabs(w)), "ds n %d j %d: %g vs %g", n, j, (double)p[j], w);
            cr_expect(fabs(p2[j] - w2) <= 1e-6 * (1 + fabs(w2)), "ds (no z) n %d j %d", n, j);
        }
    }
}
