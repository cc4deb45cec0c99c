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

/* y is dropout of x (not NULL): more than lo and fewer than hi entries
 * zeroed, every other one scale times x's (scale = 1/(1-p)). */
static inline void expect_dropped(const tg_tensor *y, const tg_tensor *x, double scale, int lo, int hi) {
    cr_assert_not_null(y, "%s", tg_last_error() ? tg_last_error() : "(no message)");
    int zeros = 0;
    for (int64_t i = 0; i < y->size; i++) {
        if (y->data[i] == 0)
            zeros++;
        else
            cr_expect(fabs(y->data[i] - scale * x->data[i]) < 1e-12, "entry %lld kept but not scaled by 1/(1-p)",
                      (long long)i);
    }
    cr_expect(zeros > lo && zeros < hi, "%d of %lld dropped, expected more than %d and fewer than %d", zeros,
              (long long)y->size, lo, hi);
}

/* The sample standard deviation of t's entries (divisor n); their mean in
 * *mean when mean is not NULL. For init statistics. */
static inline double sample_std(const tg_tensor *t, double *mean) {
    double s = 0, ss = 0;
    for (int64_t i = 0; i < t->size; i++) s += t->data[i];
    double m = s / (double)t->size;
    for (int64_t i = 0; i < t->size; i++) ss += ((double)t->data[i] - m) * ((double)t->data[i] - m);
    if (mean) *mean = m;
    return sqrt(ss / (double)t->size);
}

/* t looks like a draw of N(0, std^2): sample mean within mean_tol of 0,
 * sample std within std_tol of std. */
static inline void expect_normal_init(const tg_tensor *t, double std, double mean_tol, double std_tol,
                                      const char *what) {
    double mean, sd = sample_std(t, &mean);
    cr_expect(fabs(mean) < mean_tol && fabs(sd - std) < std_tol, "%s: N(0, %g^2) init has mean %g, std %g", what, std,
              mean, sd);
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

/* Metadata key of an open checkpoint reads exactly want. */
static inline void expect_meta_is(const tg_safetensors *st, const char *key, const char *want) {
    char v[256] = "";
    long n = tg_safetensors_meta(st, key, v, sizeof v);
    cr_expect(n == (long)strlen(want) && strcmp(v, want) == 0, "metadata %s is '%s' (%ld bytes), not '%s'", key, v, n,
              want);
}

/* A persistent N(0, 1) tensor of the shape, drawn from seed, requiring grad. */
static inline tg_tensor *grad_leaf(int ndim, const int *shape, uint64_t seed) {
    tg_rng rng = tg_rng_new(seed);
    tg_tensor *t = tg_normal(ndim, shape, 0, 1, &rng);
    tg_set_requires_grad(t, true);
    return t;
}

/* Persistent copies of the n gradients of ts (NULL where none): they
 * outlive the scope the backward ran in. */
static inline void grads_of(tg_tensor *const *ts, int n, tg_tensor **out) {
    for (int i = 0; i < n; i++) {
        const tg_tensor *g = ts[i]->grad;
        out[i] = g ? tg_empty_persistent(g->ndim, g->shape) : NULL;
        if (out[i]) memcpy(out[i]->data, g->data, sizeof(tg_real) * (size_t)g->size);
    }
}

#endif
