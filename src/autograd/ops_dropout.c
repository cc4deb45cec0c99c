/* Inverted dropout (Srivastava et al., 2014, in the form PyTorch uses):
 *   y_i = x_i * keep_i / (1 - p),   dx_i = g_i * keep_i / (1 - p),
 *   keep_i = [hash(seed, stream, first + i) >= ceil(p 2^32)]  (dropout_mask.h),
 * so E[y_i] = x_i. The mask is a pure function of (seed, stream, first + i)
 * (dropout_mask.h, shared with the fused attention op): backward draws it
 * again instead of storing it, and it does not depend on the number of
 * threads. first comes from tg_dropout_take, which also holds the
 * data-parallel shard of every mask (tg_dropout_set_shard). */
#include "op.h"

#include <string.h>

enum { CHUNK = 512 }; /* mask values drawn at a time, on the stack */

/* ---- the data-parallel shard of the masks (autograd.h) ------------------------
 * One process drawing a mask for the global batch of `size` equal slices
 * takes indices [c, c + size n) and gives slice r the indices
 * [c + r n, c + r n + n) (the batch is the leading axis). A rank that holds
 * slice r draws exactly those, then moves its counter to c + size n as that
 * process would: its masks are its slice of the single-process ones, and
 * every rank's generators stay in step. Set once, before the first forward
 * (a program's setting; not per thread: the draws run on the caller). */
static int g_shard_rank = 0, g_shard_size = 1;

int tg_dropout_set_shard(int rank, int size) {
    if (size < 1 || rank < 0 || rank >= size) {
        tg_set_error("dropout_set_shard: rank %d of %d: need size >= 1 and 0 <= rank < size", rank, size);
        return -1;
    }
    g_shard_rank = rank, g_shard_size = size;
    return 0;
}

void tg_dropout_get_shard(int *rank, int *size) {
    if (rank) *rank = g_shard_rank;
    if (size) *size = g_shard_size;
}

uint64_t tg_dropout_take(tg_rng *rng, uint64_t n) {
    uint64_t c = tg_rng_take(rng, (uint64_t)g_shard_size * n); /* counter: c -> c + size n */
    return c + (uint64_t)g_shard_rank * n;
}

typedef struct {
    tg_dropout_mask mask;
    uint64_t first; /* where the mask's counters start */
    tg_real p;      /* p = 1: y = 0, no mask */
} dropout_state;

/* out[i] = (accumulate ? out[i] : 0) + in[i] * mask_i / (1 - p). */
typedef struct {
    const dropout_state *s;
    const tg_real *in;
    tg_real *out;
    int64_t n;
    bool accumulate;
} apply_ctx;

static void apply_chunks(void *ctx, int64_t begin, int64_t end, int tid) {
    const apply_ctx *a = ctx;
    const dropout_state *s = a->s;
    const tg_real *in = a->in;
    tg_real *out = a->out;
    int64_t n = a->n;
    bool accumulate = a->accumulate;
    (void)tid;
    for (int64_t c = begin; c < end; c++) {
        tg_real m[CHUNK];
        int64_t i0 = c * CHUNK, len = n - i0 < CHUNK ? n - i0 : CHUNK;
        tg_dropout_mask_row(&s->mask, s->first + (uint64_t)i0, len, m);
        if (accumulate)
            for (int64_t j = 0; j < len; j++) out[i0 + j] += in[i0 + j] * m[j];
        else
            for (int64_t j = 0; j < len; j++) out[i0 + j] = in[i0 + j] * m[j];
    }
}

static void apply(const dropout_state *s, const tg_real *in, tg_real *out, int64_t n, bool accumulate) {
    int64_t chunks = (n + CHUNK - 1) / CHUNK;
    tg_parallel_for_ns(chunks, (double)n * TG_NS_POLY, apply_chunks, &(apply_ctx){s, in, out, n, accumulate});
}

static void dropout_backward(tg_node *n) {
    bool fresh;
    tg_tensor *gx = tg_grad_begin(n->in[0], &fresh);
    if (!gx) return;
    const dropout_state *s = n->state;
    if (s->p >= 1) { /* y = 0: no gradient */
        if (fresh) memset(gx->data, 0, sizeof(tg_real) * (size_t)gx->size);
        return;
    }
    apply(s, n->out->grad->data, gx->data, gx->size, !fresh);
}
const tg_op tg_op_dropout = {"dropout", dropout_backward};

tg_tensor *tg_dropout(tg_tensor *x, tg_real p, tg_rng *rng) {
    char b[64];
    if (tg_any_null("dropout", 1, (const tg_tensor *const[]){x})) return NULL;
    char who[80];
    snprintf(who, sizeof who, "dropout: %s", tg_tshape(b, x));
    if (!tg_check_dropout(who, p)) return NULL;
    if (p == 0) return x; /* identity: the caller's tensor itself, as documented */
    if (p < 1 && !rng) {
        tg_set_error("dropout: %s with p = %g: NULL rng", tg_tshape(b, x), (double)p);
        return NULL;
    }
    tg_tensor *y = tg_empty_arena(x->ndim, x->shape);
    dropout_state *s = tg_arena_alloc(sizeof *s);
    if (!y || !s) return NULL;
    s->p = p;
    if (p >= 1) {
        memset(y->data, 0, sizeof(tg_real) * (size_t)y->size);
    } else {
        s->mask = tg_dropout_mask_new(rng->seed, rng->stream, p);
        s->first = tg_dropout_take(rng, (uint64_t)x->size);
        apply(s, x->data, y->data, x->size, false);
    }
    tg_node *n = tg_node_record(&tg_op_dropout, y, 1, &x);
    if (n) n->state = s;
    return y;
}

bool tg_check_dropout(const char *who, tg_real p) {
    if (p >= 0 && p <= 1) return true; /* false for NaN too */
    tg_set_error("%s: dropout p = %g is outside [0, 1]", who, (double)p);
    return false;
}
