/* Counter-based random numbers. The number at index i of stream s under seed
 * k is a hash of (k, s, i), so any element can be drawn alone, in any order,
 * by any thread: a dropout mask does not depend on how work was split.
 * The hash is in tensor.h (tg_rng_hash). */
#include "tensor.h"

#include <math.h>

uint64_t tg_rng_bits(uint64_t seed, uint64_t stream, uint64_t index) {
    return tg_rng_hash(tg_rng_key(seed, stream), index);
}

double tg_rng_uniform_at(uint64_t seed, uint64_t stream, uint64_t index) {
    return (double)(tg_rng_bits(seed, stream, index) >> 11) * 0x1.0p-53; /* 53 random bits */
}

/* Box-Muller on the uniform pair drawn at (2i, 2i+1). */
double tg_rng_normal_at(uint64_t seed, uint64_t stream, uint64_t index) {
    double u1 = tg_rng_uniform_at(seed, stream, 2 * index);
    double u2 = tg_rng_uniform_at(seed, stream, 2 * index + 1);
    return sqrt(-2.0 * log(1.0 - u1)) * cos(6.283185307179586 * u2);
}

tg_rng tg_rng_new(uint64_t seed) { return (tg_rng){seed, 0, 0}; }

tg_rng tg_rng_fork(const tg_rng *r, uint64_t stream) {
    return (tg_rng){r->seed, tg_rng_mix(r->stream * 31 + stream + 1), 0};
}

uint64_t tg_rng_take(tg_rng *r, uint64_t n) {
    uint64_t first = r->counter;
    r->counter += n;
    return first;
}

uint64_t tg_rng_next_u64(tg_rng *r) { return tg_rng_bits(r->seed, r->stream, tg_rng_take(r, 1)); }
double tg_rng_next_uniform(tg_rng *r) { return tg_rng_uniform_at(r->seed, r->stream, tg_rng_take(r, 1)); }

void tg_fill_uniform(tg_tensor *t, tg_real lo, tg_real hi, tg_rng *rng) {
    if (!t || !rng) return;
    if (t->dtype != TG_DTYPE_REAL) {
        tg_set_error("fill_uniform: a bf16 tensor; fill a tg_real one, then tg_to_bf16");
        return;
    }
    uint64_t base = tg_rng_take(rng, (uint64_t)t->size), key = tg_rng_key(rng->seed, rng->stream);
    for (int64_t i = 0; i < t->size; i++) {
        double u = (double)(tg_rng_hash(key, base + (uint64_t)i) >> 11) * 0x1.0p-53;
        t->data[i] = lo + (hi - lo) * (tg_real)u;
    }
}

void tg_fill_normal(tg_tensor *t, tg_real mean, tg_real std, tg_rng *rng) {
    if (!t || !rng) return;
    if (t->dtype != TG_DTYPE_REAL) {
        tg_set_error("fill_normal: a bf16 tensor; fill a tg_real one, then tg_to_bf16");
        return;
    }
    uint64_t base = tg_rng_take(rng, (uint64_t)t->size);
    for (int64_t i = 0; i < t->size; i++)
        t->data[i] = mean + std * (tg_real)tg_rng_normal_at(rng->seed, rng->stream, base + (uint64_t)i);
}

/* A tensor to fill from rng, or NULL ("<op>: NULL rng", or tg_empty's error). */
static tg_tensor *random_empty(const char *op, int ndim, const int *shape, const tg_rng *rng) {
    if (!rng) tg_set_error("%s: NULL rng", op);
    return rng ? tg_empty(ndim, shape) : NULL;
}

tg_tensor *tg_uniform(int ndim, const int *shape, tg_real lo, tg_real hi, tg_rng *rng) {
    tg_tensor *t = random_empty("uniform", ndim, shape, rng);
    if (t) tg_fill_uniform(t, lo, hi, rng);
    return t;
}
tg_tensor *tg_rand(int ndim, const int *shape, tg_rng *rng) { return tg_uniform(ndim, shape, 0, 1, rng); }

tg_tensor *tg_normal(int ndim, const int *shape, tg_real mean, tg_real std, tg_rng *rng) {
    tg_tensor *t = random_empty("normal", ndim, shape, rng);
    if (t) tg_fill_normal(t, mean, std, rng);
    return t;
}
tg_tensor *tg_randn(int ndim, const int *shape, tg_rng *rng) { return tg_normal(ndim, shape, 0, 1, rng); }
