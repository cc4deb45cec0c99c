/* The tensor layer: creation, shapes, the RNG, printing and the kernels. */
#include <string.h>
#include "test_util.h"
#include "tensor/kernels.h" /* the raw kernels */

Test(tensor, creation_values_and_shapes) {
    tg_tensor *z = tg_zeros(TG_SHAPE(2, 3, 4, 5));
    TG_REQUIRE(z);
    cr_expect_eq(z->ndim, 4);
    cr_expect_eq(z->size, 120);
    cr_expect(z->persistent, "made outside a scope: persistent");
    for (int i = 0; i < 120; i++) cr_expect_eq(z->data[i], 0);
    tg_tensor *o = tg_ones(TG_SHAPE(3));
    tg_tensor *f = tg_full(TG_SHAPE(2, 2), 2.5);
    cr_expect_eq(o->data[2], 1);
    cr_expect_eq(f->data[3], 2.5);
    tg_tensor *r = tg_arange(0, 1, 0.25);
    tg_real want[] = {0, 0.25, 0.5, 0.75};
    expect_close(r, want, 4, 0);
    tg_tensor *a = tg_from_array(TG_SHAPE(2, 2), (tg_real[]){1, 2, 3, 4});
    tg_tensor *c = tg_clone(a);
    a->data[0] = 9;
    cr_expect_eq(c->data[0], 1, "clone copies values");
    tg_free(z);
    tg_free(o);
    tg_free(f);
    tg_free(r);
    tg_free(a);
    tg_free(c);
    cr_expect_eq(tg_memory().persistent_bytes, 0, "all persistent bytes returned");
}

Test(tensor, scope_tensors_live_in_the_arena) {
    tg_scope_begin();
    tg_tensor *t = tg_zeros(TG_SHAPE(10));
    cr_expect(!t->persistent);
    cr_expect(tg_arena_live(t));
    tg_scope_end();
    cr_expect(!tg_arena_live(t), "released at scope end");
}

Test(tensor, rng_is_counter_based_and_well_distributed) {
    tg_rng r1 = tg_rng_new(7), r2 = tg_rng_new(7);
    tg_tensor *a = tg_randn(TG_SHAPE(100000), &r1);
    /* The same numbers drawn one at a time, in reverse order. */
    for (int64_t i = 99999; i >= 0; i -= 997) cr_expect_eq(a->data[i], (tg_real)tg_rng_normal_at(7, 0, (uint64_t)i));
    tg_tensor *b = tg_randn(TG_SHAPE(100000), &r2);
    cr_expect(memcmp(a->data, b->data, sizeof(tg_real) * 100000) == 0, "same seed, same numbers");
    double m = 0, v = 0;
    for (int i = 0; i < 100000; i++) m += a->data[i];
    m /= 100000;
    for (int i = 0; i < 100000; i++) v += (a->data[i] - m) * (a->data[i] - m);
    v /= 100000;
    cr_expect(fabs(m) < 0.02 && fabs(v - 1) < 0.02, "N(0,1): mean %g var %g", m, v);
    tg_tensor *u = tg_uniform(TG_SHAPE(100000), -2, 2, &r1);
    double lo = 1e9, hi = -1e9, mu = 0;
    for (int i = 0; i < 100000; i++) {
        lo = fmin(lo, u->data[i]);
        hi = fmax(hi, u->data[i]);
        mu += u->data[i];
    }
    cr_expect(lo >= -2 && hi < 2 && fabs(mu / 100000) < 0.02, "U(-2,2): [%g, %g] mean %g", lo, hi, mu / 1e5);
    tg_tensor *c = tg_randn(TG_SHAPE(4), &r1);
    cr_expect(c->data[0] != b->data[0], "the counter advances");
    tg_free(a);
    tg_free(b);
    tg_free(u);
    tg_free(c);
}

Test(tensor, broadcast_shape_rules) {
    int nd, s[TG_MAX_DIMS];
    cr_assert(tg_broadcast_shape(TG_SHAPE(2, 1, 4), TG_SHAPE(3, 1), &nd, s));
    cr_expect(nd == 3 && s[0] == 2 && s[1] == 3 && s[2] == 4);
    cr_expect(!tg_broadcast_shape(TG_SHAPE(2, 3), TG_SHAPE(4), &nd, s));
}

Test(tensor, binary_kernel_broadcasts) {
    tg_tensor *a = tg_from_array(TG_SHAPE(2, 3), (tg_real[]){1, 2, 3, 4, 5, 6});
    tg_tensor *b = tg_from_array(TG_SHAPE(2, 1), (tg_real[]){10, 20});
    tg_tensor *c = tg_empty(TG_SHAPE(2, 3));
    tg_k_binary(TG_BINARY_ADD, a, b, c);
    expect_close(c, (tg_real[]){11, 12, 13, 24, 25, 26}, 6, 0);
    tg_tensor *d = tg_zeros(TG_SHAPE(1, 3));
    tg_k_sum_to(a, d, false);
    expect_close(d, (tg_real[]){5, 7, 9}, 3, 0);
    tg_free(a);
    tg_free(b);
    tg_free(c);
    tg_free(d);
}

Test(tensor, softmax_kernel_is_stable_for_large_logits) {
    tg_real x[] = {1000, 1001, 1002, -1000, 0, 1000};
    tg_real y[6], l[6];
    tg_k_softmax_rows(x, y, 2, 3);
    tg_k_log_softmax_rows(x, l, 2, 3);
    double e = exp(1.0), s = 1 + e + e * e;
    cr_expect(fabs(y[2] - e * e / s) < 1e-12 && fabs(y[0] - 1 / s) < 1e-12);
    cr_expect(fabs(y[5] - 1) < 1e-12 && y[3] == 0);
    cr_expect(fabs(l[2] - log(e * e / s)) < 1e-12 && isfinite(l[3]) && l[3] < -1999);
}

Test(tensor, permute_kernel) {
    tg_tensor *a = tg_arange(0, 24, 1);
    tg_tensor *v = tg_view(a, TG_SHAPE(2, 3, 4));
    tg_tensor *o = tg_empty(TG_SHAPE(4, 2, 3));
    tg_k_permute(v, (const int[]){2, 0, 1}, o);
    /* o[k,i,j] = v[i,j,k] */
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++) cr_expect_eq(o->data[k * 6 + i * 3 + j], v->data[i * 12 + j * 4 + k]);
    tg_free(o);
    tg_free(v);
    tg_free(a);
}

Test(tensor, print_like_pytorch) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    tg_tensor *a = tg_from_array(TG_SHAPE(2, 2), (tg_real[]){1, -2.5, 3, 4});
    tg_fprint(f, a);
    fclose(f);
    cr_expect_str_eq(buf, "tensor([[ 1.0000, -2.5000],\n        [ 3.0000,  4.0000]], shape=(2,2))\n");
    free(buf);
    f = open_memstream(&buf, &len);
    tg_tensor *big = tg_arange(0, 2000, 1);
    tg_fprint(f, big);
    fclose(f);
    cr_expect(strstr(buf, "2.0000,  ...,") && strstr(buf, "1999.0000]") && len < 200, "elided: %s", buf);
    free(buf);
    tg_free(a);
    tg_free(big);
}

/* Flags, environment variables and metadata are read as decimal numbers
 * and nothing else (strtod took blanks, hex, inf and nan). */
Test(tensor, strict_decimal_numbers) {
    static const struct {
        const char *s;
        double v;
    } reals[] = {{"12", 12}, {"-3", -3}, {"+7", 7}, {"2.5e-4", 2.5e-4}, {".5", 0.5}, {"5.", 5}, {"1E3", 1000}};
    for (size_t i = 0; i < sizeof reals / sizeof *reals; i++) {
        double v = -1;
        cr_expect_eq(tg_parse_real(reals[i].s, &v), 0, "%s", reals[i].s);
        cr_expect_eq(v, reals[i].v, "%s", reals[i].s);
    }
    static const char *const not_reals[] = {"",    " 5", "5 ", "0x10", "inf",   "-inf",
                                            "nan", "1e", "e5", ".",    "1e400", "1,5"};
    for (size_t i = 0; i < sizeof not_reals / sizeof *not_reals; i++) {
        double v = 42;
        cr_expect_eq(tg_parse_real(not_reals[i], &v), -1, "'%s' taken", not_reals[i]);
        cr_expect_eq(v, 42, "untouched on failure");
    }
    cr_expect_eq(tg_parse_real(NULL, &(double){0}), -1);
    int64_t k = 0;
    cr_expect_eq(tg_parse_int64("-9223372036854775808", &k), 0);
    cr_expect_eq(k, INT64_MIN);
    static const char *const not_ints[] = {"1.5", "1e3", "0x10", " 3", "3 ", "9223372036854775808", "", "+"};
    for (size_t i = 0; i < sizeof not_ints / sizeof *not_ints; i++)
        cr_expect_eq(tg_parse_int64(not_ints[i], &k), -1, "'%s' taken", not_ints[i]);
}
