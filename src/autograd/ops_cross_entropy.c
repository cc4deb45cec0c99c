/* Cross-entropy of logits x [..., V] (viewed as [N, V]) against integer
 * targets t, through a fused, max-subtracted log-softmax:
 *   lse_r  = m_r + log sum_j exp(x_rj - m_r),   m_r = max_j x_rj
 *   loss   = (1/D) sum_{r counted} (lse_r - x_{r,t_r})
 * with D = n, the number of counted rows, for the mean (tg_cross_entropy;
 * loss = 0 if none counts), or D = 1 for the sum (tg_cross_entropy_sum,
 * PyTorch's reduction='sum'). A row counts unless t_r == ignore_index or
 * mask[r] == 0. Backward, with softmax(x_r)_j = exp(x_rj - lse_r):
 *   dx_rj = g (softmax(x_r)_j - [j == t_r]) / D   on counted rows,  0 on the others. */
#include "op.h"

#include <math.h>
#include <string.h>

typedef struct {
    int *target;     /* N targets, -1 for rows that do not count */
    tg_real *lse;    /* N log-sum-exps */
    int64_t counted; /* n */
    int64_t divisor; /* D: n for the mean, 1 for the sum */
} cross_entropy_state;

/* dx_j = scale (softmax(x)_j - [j = target]), softmax from the saved lse */
static void backward_row(const tg_rows_ctx *c, int64_t r) {
    const cross_entropy_state *s = c->state;
    const int64_t V = c->n;
    tg_real *dr = c->gx->data + r * V;
    /* a fresh gradient (tg_grad_begin) is zeroed here, row by row on the
     * row's thread, not by one memset of [N, V] on one thread */
    if (c->fresh) memset(dr, 0, sizeof(tg_real) * (size_t)V);
    if (s->target[r] < 0) return;
    tg_k_add_scaled_exp(dr, c->x->data + r * V, V, s->lse[r], c->scale);
    dr[s->target[r]] -= c->scale;
}

static void cross_entropy_backward(tg_node *n) {
    const cross_entropy_state *s = n->state;
    bool fresh;
    tg_tensor *gx = s->counted == 0 ? tg_grad_of(n->in[0]) : tg_grad_begin(n->in[0], &fresh);
    if (!gx || s->counted == 0) return;
    const tg_tensor *x = n->in[0];
    int64_t V = x->shape[x->ndim - 1], N = x->size / V;
    tg_real scale = n->out->grad->data[0] / (tg_real)s->divisor;
    tg_parallel_rows_ns(N, (double)x->size * TG_NS_ROW_EXP, backward_row,
                        &(tg_rows_ctx){.x = x, .gx = gx, .state = s, .scale = scale, .n = V, .fresh = fresh});
}
const tg_op tg_op_cross_entropy = {"cross_entropy", cross_entropy_backward};

/* The forward in pieces of CE_PIECE rows: boundaries fixed by N alone,
 * each piece's loss summed in row order, the pieces' sums added in order:
 * the same bits at any thread count, and the sum over rows is split with
 * the rows (it was a pass on one thread after them). */
enum { CE_PIECE = 32 };

typedef struct {
    const tg_tensor *x;
    cross_entropy_state *s;
    const int *targets;
    const tg_real *mask;
    int ignore_index;
    int64_t N;
    double *sums;    /* per piece: its rows' losses */
    int64_t *counts; /* per piece: its counted rows, -1 when a target is out of range */
} forward_ctx;

/* Whether row r's loss counts: its target is not ignore_index and the mask
 * (if any) keeps it. Rows masked out need no valid target (padding may
 * carry any id). */
static bool row_counts(const int *targets, const tg_real *mask, int ignore_index, int64_t r) {
    return targets[r] != ignore_index && (!mask || mask[r] != 0);
}

/* Pieces [b, e): each row's target (-1 when it does not count), lse_r =
 * logsumexp(x_r), and loss_r = lse_r - x_r[target] on counted rows. */
static void forward_pieces(void *ctx, int64_t b, int64_t e, int tid) {
    const forward_ctx *c = ctx;
    const int64_t V = c->x->shape[c->x->ndim - 1];
    (void)tid;
    for (int64_t p = b; p < e; p++) {
        int64_t r1 = (p + 1) * CE_PIECE < c->N ? (p + 1) * CE_PIECE : c->N, counted = 0;
        double sum = 0;
        bool bad = false;
        for (int64_t r = p * CE_PIECE; r < r1; r++) {
            const int t = c->targets[r];
            bool counts = row_counts(c->targets, c->mask, c->ignore_index, r);
            if (counts && (t < 0 || t >= V)) bad = true, counts = false; /* cross_entropy says which */
            c->s->target[r] = counts ? t : -1;
            counted += counts;
            const tg_real *xr = c->x->data + r * V;
            tg_real m = tg_k_row_max(xr, V);
            c->s->lse[r] = m + TG_M(log)(tg_k_sum_exp(xr, V, m));
            if (counts) sum += (double)(c->s->lse[r] - xr[t]);
        }
        c->sums[p] = sum;
        c->counts[p] = bad ? -1 : counted;
    }
}

/* The mean (mean true) or the sum over the counted rows, their number in
 * *counted when not NULL. */
static tg_tensor *cross_entropy(tg_tensor *logits, const int *targets, const tg_real *mask, int ignore_index, bool mean,
                                int64_t *counted_out) {
    char b[64];
    if (tg_any_null("cross_entropy", 1, (const tg_tensor *const[]){logits})) return NULL;
    if (logits->ndim == 0 || logits->shape[logits->ndim - 1] == 0) {
        tg_set_error("cross_entropy: logits %s have no class axis (need [..., V], V >= 1)", tg_tshape(b, logits));
        return NULL;
    }
    int64_t V = logits->shape[logits->ndim - 1], N = logits->size / V, pieces = (N + CE_PIECE - 1) / CE_PIECE;
    if (!targets && N > 0) {
        tg_set_error("cross_entropy: logits %s with NULL targets", tg_tshape(b, logits));
        return NULL;
    }
    tg_tensor *y = tg_empty_arena(0, NULL);
    cross_entropy_state *s = tg_arena_alloc(sizeof *s);
    int *tgt = tg_arena_alloc(sizeof(int) * (size_t)(N ? N : 1));
    tg_real *lse = tg_arena_alloc(sizeof(tg_real) * (size_t)(N ? N : 1));
    double *sums = tg_arena_alloc(sizeof(double) * (size_t)(pieces ? pieces : 1));
    int64_t *counts = tg_arena_alloc(sizeof(int64_t) * (size_t)(pieces ? pieces : 1));
    if (!y || !s || !tgt || !lse || !sums || !counts) return NULL;
    *s = (cross_entropy_state){tgt, lse, 0, 1};
    forward_ctx c = {logits, s, targets, mask, ignore_index, N, sums, counts};
    tg_parallel_for_ns(pieces, (double)logits->size * TG_NS_ROW_EXP, forward_pieces, &c);
    double total = 0; /* the pieces in order: the same for any thread count */
    int64_t counted = 0;
    for (int64_t p = 0; p < pieces; p++) {
        if (counts[p] < 0) { /* the first row of the piece whose target is out of range */
            for (int64_t r = p * CE_PIECE;; r++)
                if (row_counts(targets, mask, ignore_index, r) && (targets[r] < 0 || targets[r] >= V)) {
                    tg_set_error("cross_entropy: logits %s: target %d of row %lld is outside [0, %lld) and is "
                                 "not ignore_index %d",
                                 tg_tshape(b, logits), targets[r], (long long)r, (long long)V, ignore_index);
                    return NULL;
                }
        }
        total += sums[p];
        counted += counts[p];
    }
    s->counted = counted;
    s->divisor = mean ? counted : 1;
    y->data[0] = !mean ? (tg_real)total : counted ? (tg_real)(total / (double)counted) : 0;
    tg_node *n = tg_node_record(&tg_op_cross_entropy, y, 1, &logits);
    if (n) n->state = s;
    if (counted_out) *counted_out = counted;
    return y;
}

tg_tensor *tg_cross_entropy(tg_tensor *logits, const int *targets, const tg_real *mask, int ignore_index) {
    return cross_entropy(logits, targets, mask, ignore_index, true, NULL);
}

tg_tensor *tg_cross_entropy_sum(tg_tensor *logits, const int *targets, const tg_real *mask, int ignore_index,
                                int64_t *counted) {
    return cross_entropy(logits, targets, mask, ignore_index, false, counted);
}
