/* The offset buckets of tg_attn_pos (internal: ops_attention.c and
 * ops_relative.c share them, so the fused and the stored path index the
 * tables alike). Offset o = j - i - q_offset of key j from query i:
 *   clipping (Shaw et al. 2018): r = clip(o, -clip, clip) + clip, R = 2 clip + 1;
 *   T5 (Raffel et al. 2020, t5_buckets = N > 0): two-sided unless
 *     t5_one_sided, N/2 buckets per side (keys after the query, o > 0, in
 *     the upper half); on a side of n buckets, distances |o| < n/2 have a
 *     bucket each, and larger ones share n/2 buckets spaced logarithmically
 *     up to t5_max_distance, beyond which all fall in the last:
 *       r = n/2 + floor(log(|o| / (n/2)) / log(max_distance / (n/2)) * (n/2));
 *     one-sided (a causal decoder): |o| for o <= 0, and every o > 0 in
 *     bucket 0. As Hugging Face's T5Attention._relative_position_bucket. */
#ifndef TG_AUTOGRAD_REL_BUCKET_H
#define TG_AUTOGRAD_REL_BUCKET_H

#include "op.h"

#include <math.h>

static inline int rel_bucket_count(const tg_attn_pos *p) { return p->t5_buckets > 0 ? p->t5_buckets : 2 * p->clip + 1; }

static inline int rel_bucket(const tg_attn_pos *p, int64_t o) {
    if (p->t5_buckets <= 0) return o < -p->clip ? 0 : o > p->clip ? 2 * p->clip : (int)o + p->clip;
    int n = p->t5_buckets, r = 0;
    int64_t dist;
    if (!p->t5_one_sided) {
        n /= 2;
        r = o > 0 ? n : 0;
        dist = o < 0 ? -o : o;
    } else
        dist = o < 0 ? -o : 0;
    int exact = n / 2;
    if (dist < exact) return r + (int)dist;
    int big = exact + (int)(log((double)dist / exact) / log((double)p->t5_max_distance / exact) * (n - exact));
    return r + (big < n - 1 ? big : n - 1);
}

/* Checks the bucketing fields; records "<op>: ..." and returns false when bad. */
static inline bool rel_bucket_check(const char *op, const tg_attn_pos *p) {
    if (p->clip < 0 || p->clip > (1 << 20)) {
        tg_set_error("%s: position clip %d must be in [0, 2^20]", op, p->clip);
        return false;
    }
    int side = p->t5_one_sided ? p->t5_buckets : p->t5_buckets / 2, exact = side / 2;
    if (p->t5_buckets < 0 || p->t5_buckets > (1 << 20) ||
        (p->t5_buckets > 0 && (exact < 1 || p->t5_max_distance <= exact))) {
        tg_set_error("%s: t5_buckets %d with max_distance %d: need at least %d buckets and a max_distance above %d", op,
                     p->t5_buckets, p->t5_max_distance, p->t5_one_sided ? 2 : 4, exact);
        return false;
    }
    return true;
}

/* map[o - omin] = rel_bucket(p, o) for the offsets of Q queries and K keys,
 * omin = -(Q - 1) - q_offset; Q + K - 1 ints in the arena, or NULL. */
static inline int *rel_bucket_map(const tg_attn_pos *p, int Q, int K, int64_t *omin) {
    int64_t n = (int64_t)Q + K - 1, lo = -(int64_t)(Q - 1) - p->q_offset;
    int *map = tg_arena_alloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    if (!map) return NULL;
    for (int64_t i = 0; i < n; i++) map[i] = rel_bucket(p, lo + i);
    *omin = lo;
    return map;
}

#endif
