/* Matrix products: C = op(A) op(B), op = optional transpose of the last two
 * axes (read through the strides of the GEMM, never copied), for
 *   2-D @ 2-D, 3-D @ 3-D (batched, same batch) and 3-D @ 2-D (B shared).
 * Backward, from dC (Giles, "Collected matrix derivative results", 2008):
 *   d op(A) = dC op(B)^T        d op(B) = op(A)^T dC
 * and for a stored transpose the transpose of that. Both are GEMMs with
 * beta = 1, so they accumulate into the gradients as they go. Under
 * TG_PREC_BF16 (autograd.h) all of them are bf16 products with float sums. */
#include "op.h"

typedef struct {
    int batch, M, N, K;
    bool ta, tb, b_shared; /* b_shared: B is 2-D and serves every batch */
} matmul_state;            /* the product's shape: forward's plan, backward's state */

typedef struct {
    bool bf16, ta, tb; /* bf16: products in bfloat16 (tg_set_precision) */
    int M, N, K, lda, ldb, ldc;
    const tg_real *A, *B;
    int64_t sa, sb, sc;
    tg_real beta;
    tg_real *C;
} batch_ctx;

static void batch_range(void *ctx, int64_t begin, int64_t end, int tid) {
    const batch_ctx *c = ctx;
    (void)tid;
    for (int i = (int)begin; i < (int)end; i++)
        TG_GEMM(c->bf16, c->ta, c->tb, c->M, c->N, c->K, 1, c->A + i * c->sa, c->lda, c->B + i * c->sb, c->ldb, c->beta,
                c->C + i * c->sc, c->ldc);
}

/* For each batch entry i: C_i = alpha op(A_i) op(B_i) + beta C_i. */
static void batch_gemm(bool bf16, bool ta, bool tb, int M, int N, int K, const tg_real *A, int64_t sa, int lda,
                       const tg_real *B, int64_t sb, int ldb, tg_real beta, tg_real *C, int64_t sc, int ldc,
                       int batch) {
    /* Many small products (attention heads) run one per thread; large ones
     * are parallel inside the GEMM. Either way each output element is
     * computed by one thread in one order: results don't depend on threads. */
    int64_t work = (int64_t)M * N * K;
    batch_ctx c = {bf16, ta, tb, M, N, K, lda, ldb, ldc, A, B, sa, sb, sc, beta, C};
    tg_parallel_for(batch, batch > 1 && (batch >= 4 || work < (1 << 18)) && batch * work > (1 << 16), batch_range, &c);
}

static void matmul_backward(tg_node *n) {
    tg_tensor *a = n->in[0], *b = n->in[1];
    const tg_real *g = n->out->grad->data;
    matmul_state p = *(const matmul_state *)n->state;
    int M = p.M, N = p.N, K = p.K;
    int lda = p.ta ? M : K, ldb = p.tb ? K : N;
    int64_t sa = (int64_t)M * K, sb = p.b_shared ? 0 : (int64_t)K * N, sg = (int64_t)M * N;
    /* beta 0 overwrites a gradient this pass has not touched yet. When a and
     * b are one tensor (x x^T), only the first product is fresh. */
    bool fresh_a, fresh_b;
    tg_tensor *ga = tg_grad_begin(a, &fresh_a), *gb = tg_grad_begin(b, &fresh_b);
    tg_real beta_a = fresh_a ? 0 : 1, beta_b = fresh_b ? 0 : 1;
    if (p.b_shared && !p.ta) {
        /* A and dC are [batch*M, K] and [batch*M, N] matrices: one GEMM each,
         * like the forward (Linear on [B, T, d] input takes this path). */
        int BM = p.batch * M;
        if (ga) TG_GEMM(n->bf16, false, !p.tb, BM, K, N, 1, g, N, b->data, ldb, beta_a, ga->data, K);
        if (gb && !p.tb) TG_GEMM(n->bf16, true, false, K, N, BM, 1, a->data, K, g, N, beta_b, gb->data, N);
        if (gb && p.tb) TG_GEMM(n->bf16, true, false, N, K, BM, 1, g, N, a->data, K, beta_b, gb->data, K);
        return;
    }
    if (ga) {
        if (!p.ta) /* dA[M,K] += dC[M,N] op(B)^T */
            batch_gemm(n->bf16, false, !p.tb, M, K, N, g, sg, N, b->data, sb, ldb, beta_a, ga->data, sa, K, p.batch);
        else /* dA[K,M] += op(B)[K,N] dC^T */
            batch_gemm(n->bf16, p.tb, true, K, M, N, b->data, sb, ldb, g, sg, N, beta_a, ga->data, sa, M, p.batch);
    }
    if (gb) {
        if (p.b_shared) {
            /* dB sums over the batch; in order, so it is deterministic. */
            for (int i = 0; i < p.batch; i++) {
                tg_real beta = i == 0 ? beta_b : 1;
                if (!p.tb)
                    TG_GEMM(n->bf16, !p.ta, false, K, N, M, 1, a->data + i * sa, lda, g + i * sg, N, beta, gb->data, N);
                else
                    TG_GEMM(n->bf16, true, p.ta, N, K, M, 1, g + i * sg, N, a->data + i * sa, lda, beta, gb->data, K);
            }
        } else if (!p.tb) /* dB[K,N] += op(A)^T dC */
            batch_gemm(n->bf16, !p.ta, false, K, N, M, a->data, sa, lda, g, sg, N, beta_b, gb->data, sb, N, p.batch);
        else /* dB[N,K] += dC^T op(A) */
            batch_gemm(n->bf16, true, p.ta, N, K, M, g, sg, N, a->data, sa, lda, beta_b, gb->data, sb, K, p.batch);
    }
}
const tg_op tg_op_matmul = {"matmul", matmul_backward};

tg_tensor *tg_matmul_t(tg_tensor *a, tg_tensor *b, bool ta, bool tb) {
    char b1[64], b2[64];
    if (tg_any_null("matmul", 2, (const tg_tensor *const[]){a, b})) return NULL;
    bool ok_rank = (a->ndim == 2 && b->ndim == 2) || (a->ndim == 3 && (b->ndim == 3 || b->ndim == 2));
    if (!ok_rank) {
        tg_set_error("matmul: %s @ %s: supports 2-D @ 2-D, 3-D @ 3-D and 3-D @ 2-D", tg_tshape(b1, a),
                     tg_tshape(b2, b));
        return NULL;
    }
    int ra = a->ndim - 2, rb = b->ndim - 2; /* index of the row axis */
    matmul_state p;
    p.batch = a->ndim == 3 ? a->shape[0] : 1;
    p.b_shared = a->ndim == 3 && b->ndim == 2;
    p.ta = ta;
    p.tb = tb;
    p.M = ta ? a->shape[ra + 1] : a->shape[ra];
    p.K = ta ? a->shape[ra] : a->shape[ra + 1];
    int kb = tb ? b->shape[rb + 1] : b->shape[rb];
    p.N = tb ? b->shape[rb] : b->shape[rb + 1];
    if (p.K != kb) {
        tg_set_error("matmul: %s%s @ %s%s: inner dimensions %d and %d differ", tg_tshape(b1, a), ta ? "^T" : "",
                     tg_tshape(b2, b), tb ? "^T" : "", p.K, kb);
        return NULL;
    }
    if (a->ndim == 3 && b->ndim == 3 && a->shape[0] != b->shape[0]) {
        tg_set_error("matmul: %s @ %s: batch sizes %d and %d differ", tg_tshape(b1, a), tg_tshape(b2, b), a->shape[0],
                     b->shape[0]);
        return NULL;
    }
    int shape[3] = {p.batch, p.M, p.N};
    tg_tensor *y = a->ndim == 3 ? tg_empty_arena(3, shape) : tg_empty_arena(2, shape + 1);
    if (!y) return NULL;
    int lda = ta ? p.M : p.K, ldb = tb ? p.K : p.N;
    bool bf16 = tg_prec_bf16();
    if (p.b_shared && !ta) {
        /* [batch*M, K] @ B in one GEMM: better blocking than batch small ones. */
        TG_GEMM(bf16, false, tb, p.batch * p.M, p.N, p.K, 1, a->data, lda, b->data, ldb, 0, y->data, p.N);
    } else {
        int64_t sa = (int64_t)p.M * p.K, sb = p.b_shared ? 0 : (int64_t)p.K * p.N;
        batch_gemm(bf16, ta, tb, p.M, p.N, p.K, a->data, sa, lda, b->data, sb, ldb, 0, y->data, (int64_t)p.M * p.N, p.N,
                   p.batch);
    }
    tg_node *n = tg_node_record(&tg_op_matmul, y, 2, (tg_tensor *[]){a, b});
    if (n) {
        matmul_state *st = tg_node_state(n, sizeof *st);
        if (!st) return NULL;
        *st = p;
    }
    return y;
}

tg_tensor *tg_matmul(tg_tensor *a, tg_tensor *b) { return tg_matmul_t(a, b, false, false); }
