/* Small helpers shared by the test files. */
#ifndef TG_TEST_UTIL_H
#define TG_TEST_UTIL_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>

#include "tgrad.h"

/* Fails the test with tgrad's message when a call returned NULL. */
#define TG_REQUIRE(x) \
    cr_assert((x) != NULL, "%s returned NULL: %s", #x, tg_last_error() ? tg_last_error() : "(no message)")

/* |a - b| <= tol element by element. */
static inline void expect_close(const tg_tensor *a, const tg_real *want, int64_t n, double tol) {
    cr_assert_eq(a->size, n, "size %lld, expected %lld", (long long)a->size, (long long)n);
    for (int64_t i = 0; i < n; i++)
        cr_expect(fabs((double)a->data[i] - (double)want[i]) <= tol, "element %lld: %.10g, expected %.10g",
                  (long long)i, (double)a->data[i], (double)want[i]);
}

/* The current error message contains all of the given fragments. */
static inline bool error_has(const char *a, const char *b) {
    const char *m = tg_last_error();
    return m && strstr(m, a) && (!b || strstr(m, b));
}

/* The largest |a_i - b_i| over the elements (infinite when one is NaN). */
static inline double max_diff(const tg_tensor *a, const tg_tensor *b) {
    double m = 0;
    for (int64_t i = 0; i < a->size; i++) {
        double e = fabs((double)a->data[i] - (double)b->data[i]);
        if (e > m || e != e) m = e != e ? INFINITY : e;
    }
    return m;
}

/* Suite fixtures for tests that run inside one scope: every tensor they
 * make is freed when the test ends, and no stale error leaks in. */
static inline void scoped_test_begin(void) {
    tg_clear_error();
    tg_scope_begin();
}
static inline void scoped_test_end(void) { tg_scope_end(); }

/* A small encoder's config; dropout 0, fixed encoding and no bias unless
 * the test sets them. */
static inline tg_encoder_config tiny_encoder(int vocab, int dim, int ffn, int heads, int layers, int max_len) {
    return (tg_encoder_config){.vocab_size = vocab,
                               .num_hiddens = dim,
                               .ffn_hiddens = ffn,
                               .num_heads = heads,
                               .num_layers = layers,
                               .max_len = max_len,
                               .pe = TG_PE_FIXED};
}

#endif
