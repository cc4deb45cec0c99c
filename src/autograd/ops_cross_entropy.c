/* Mean cross-entropy of logits x [..., V] (viewed as [N, V]) against integer
 * targets t, through a fused, max-subtracted log-softmax:
 *   lse_r  = m_r + log sum_j exp(x_rj - m_r),   m_r = max_j x_rj
 *   loss   = (1/n) sum_{r counted} (lse_r - x_{r,t_r}),   n = number of counted rows
 * A row counts unless t_r == ignore_index or mask[r] == 0; loss = 0 if none does.
 * Backward, with softmax(x_r)_j = exp(x_rj - lse_r):
 *   dx_rj = g (softmax(x_r)_j - [j == t_r]) / n   on counted rows,  0 on the others. */
#include "op.h"

#include <math.h>
#include <string.h>

typedef struct {
    int *target;     /* N targets, -1 for rows that do not count */
    tg_real *lse;    /* N log-sum-exps */
    int64_t counted; /* n */
} cross_entropy_state;

typedef struct {
    const tg_tensor *x;
    tg_tensor *gx;
    const cross_entropy_state *s;
    tg_real scale;
    int64_t V;
} backward_ctx;

static void backward_rows(void *ctx, int64_t begin, int64_t end, int tid) {
    const backward_ctx *c = ctx;
    const tg_tensor *x = c->x;
    tg_tensor *gx = c->gx;
    const cross_entropy_state *s = c->s;
    tg_real scale = c->scale;
    int64_t V = c->V;
    (void)tid;
    for (int64_t r = begin; r < end; r++) {
        if (s->target[r] < 0) continue;
        const tg_real *xr = x->data + r * V;
        tg_real *dr = gx->data + r * V;
        for (int64_t j = 0; j < V; j++) dr[j] += scale * TG_M(exp)(xr[j] - s->lse[r]);
        dr[s->target[r]] -= scale;
    }
}

static void cross_entropy_backward(tg_node *n) {
    tg_tensor *gx = tg_grad_of(n->in[0]);
    const cross_entropy_state *s = n->state;
    if (!gx || s->counted == 0) return;
    const tg_tensor *x = n->in[0];
    int64_t V = x->shape[x->ndim - 1], N = x->size / V;
    tg_real scale = n->out->grad->data[0] / (tg_real)s->counted;
    tg_parallel_for(N, x->size > TG_PAR_MIN, backward_rows, &(backward_ctx){x, gx, s, scale, V});
}
const tg_op tg_op_cross_entropy = {"cross_entropy", cross_entropy_backward};

typedef struct {
    const tg_tensor *logits;
    const int *tgt;
    tg_real *lse, *row_loss;
    int64_t V;
} forward_ctx;

static void forward_rows(void *ctx, int64_t begin, int64_t end, int tid) {
    const forward_ctx *c = ctx;
    const tg_tensor *logits = c->logits;
    const int *tgt = c->tgt;
    tg_real *lse = c->lse, *row_loss = c->row_loss;
    int64_t V = c->V;
    (void)tid;
    for (int64_t r = begin; r < end; r++) {
        const tg_real *xr = logits->data + r * V;
        tg_real m = xr[0], sum = 0;
        for (int64_t j = 1; j < V; j++)
            if (xr[j] > m) m = xr[j];
        for (int64_t j = 0; j < V; j++) sum += TG_M(exp)(xr[j] - m);
        lse[r] = m + TG_M(log)(sum);
        row_loss[r] = tgt[r] >= 0 ? lse[r] - xr[tgt[r]] : 0;
    }
}

tg_tensor *tg_cross_entropy(tg_tensor *logits, const int *targets, const tg_real *mask, int ignore_index) {
    char b[64];
    if (tg_any_null("cross_entropy", 1, (const tg_tensor *const[]){logits})) return NULL;
    if (logits->ndim == 0 || logits->shape[logits->ndim - 1] == 0) {
        tg_set_error("cross_entropy: logits %s have no class axis (need [..., V], V >= 1)", tg_tshape(b, logits));
        return NULL;
    }
    int64_t V = logits->shape[logits->ndim - 1], N = logits->size / V;
    if (!targets && N > 0) {
        tg_set_error("cross_entropy: logits %s with NULL targets", tg_tshape(b, logits));
        return NULL;
    }
    /* Rows masked out need no valid target (padding may carry any id). */
    for (int64_t r = 0; r < N; r++)
        if (targets[r] != ignore_index && (!mask || mask[r] != 0) && (targets[r] < 0 || targets[r] >= V)) {
            tg_set_error("cross_entropy: logits %s: target %d of row %lld is outside [0, %lld) and is not "
                         "ignore_index %d",
                         tg_tshape(b, logits), targets[r], (long long)r, (long long)V, ignore_index);
            return NULL;
        }
    tg_tensor *y = tg_empty_arena(0, NULL);
    cross_entropy_state *s = tg_arena_alloc(sizeof *s);
    int *tgt = tg_arena_alloc(sizeof(int) * (size_t)(N ? N : 1));
    tg_real *lse = tg_arena_alloc(sizeof(tg_real) * (size_t)(2 * N + 1));
    if (!y || !s || !tgt || !lse) return NULL;
    tg_real *row_loss = lse + N;
    int64_t counted = 0;
    for (int64_t r = 0; r < N; r++) {
        bool counts = targets[r] != ignore_index && (!mask || mask[r] != 0);
        tgt[r] = counts ? targets[r] : -1;
        counted += counts;
    }
    tg_parallel_for(N, logits->size > TG_PAR_MIN, forward_rows, &(forward_ctx){logits, tgt, lse, row_loss, V});
    double total = 0; /* in row order: the same for any thread count */
    for (int64_t r = 0; r < N; r++) total += (double)row_loss[r];
    y->data[0] = counted ? (tg_real)(total / (double)counted) : 0;
    *s = (cross_entropy_state){tgt, lse, counted};
    tg_node *n = tg_node_record(&tg_op_cross_entropy, y, 1, &logits);
    if (n) n->state = s;
    return y;
}
