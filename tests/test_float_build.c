/* What only the float build shows (run by `make test` before the double
 * suite): tg_gradcheck there fails with a hint to use the double build
 * instead of failing silently (issue 10). */
#include <criterion/criterion.h>
#include <string.h>

#include "tgrad.h"

static tg_tensor *f_exp(tg_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return tg_exp(in[0]);
}

Test(float_build, gradcheck_says_to_use_the_double_build) {
    if (sizeof(tg_real) != 4) cr_skip_test("float build only");
    tg_tensor *x = tg_from_array(TG_SHAPE(3), (tg_real[]){0.5f, 1.0f, 1.5f});
    tg_set_requires_grad(x, true);
    tg_gradcheck_result r;
    cr_expect_not(tg_gradcheck(f_exp, &x, 1, NULL, 1e-3, 1e-6, &r), "float differences cannot reach 1e-6");
    const char *e = tg_last_error();
    cr_assert_not_null(e);
    cr_expect(strstr(e, "double build"), "%s", e);
    tg_free(x);
}
