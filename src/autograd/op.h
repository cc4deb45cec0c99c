/* What an op writer needs (internal: the ops of src/autograd and the tests
 * include it; no public header does). One file per op family holds the
 * forward, its tg_op descriptor and its backward side by side; the backward
 * reads what the forward saved on the node. */
#ifndef TG_AUTOGRAD_OP_H
#define TG_AUTOGRAD_OP_H

#include "autograd.h"
#include "../tensor/kernels.h"
#include "../tensor/parallel.h"

/* A recorded op application: what backward needs. */
struct tg_node {
    const tg_op *op;
    tg_tensor *out;
    tg_tensor *in[TG_NODE_MAX_INPUTS];
    int n_in;
    /* What the forward saved for the backward: the op's own struct
     * (<op>_state, defined beside the op), arena-owned; NULL if none. */
    void *state;
    uint64_t seq;   /* creation order */
    int depth;      /* ops on the longest chain from the leaves to out */
    uint32_t visit; /* backward pass that reached it */
    bool released;  /* a backward without retain_graph has used it */
    bool bf16;      /* recorded under TG_PREC_BF16: the backward's products are bf16 too */
    tg_node *prev;  /* the node created before this one (the tape) */
    /* The buffer of out->grad during one backward pass (tape.c, reset
     * when the pass starts): freed for reuse once every node holding it
     * has run its rule, the last reader of out->grad being this node. */
    tg_node *grad_owner;   /* the node whose output's buffer out->grad shares (tg_grad_share); NULL: its own */
    tg_tensor *grad_buf;   /* on an owner whose buffer is shared: that buffer (its out->grad) */
    uint32_t grad_holders; /* on such an owner: the holders (it and its sharers) whose rule has not run yet */
    bool retain_grad;      /* tg_retain_grad: out->grad outlives tg_backward */
};

/* Records a node for out if grad mode is on and an input requires grad
 * (tg_node_will_record: an op asks it first when it keeps something only
 * its backward reads). Returns the node (to give its state) or NULL when
 * nothing is recorded. */
bool tg_node_will_record(int n_in, tg_tensor *const *in);
tg_node *tg_node_record(const tg_op *op, tg_tensor *out, int n_in, tg_tensor *const *in);
/* Allocates the node's state, bytes zeroed, in the current scope's arena,
 * and sets n->state to it. Returns it, or NULL (error recorded) when out of
 * memory. */
void *tg_node_state(tg_node *n, size_t bytes);
/* The gradient buffer of t for this backward pass, zeroed when first touched
 * (allocated persistently for persistent tensors, else in the arena), or NULL
 * when t does not require grad. */
tg_tensor *tg_grad_of(tg_tensor *t);
/* Like tg_grad_of, but when this backward pass has not touched t's gradient
 * yet it is returned unzeroed with *fresh = true: the caller must then write
 * every element (=) instead of adding (+=). Saves a memset and a read per
 * element on the common path, where a tensor feeds one op. Gradients of
 * leaves are never fresh once they exist: they accumulate across passes. */
tg_tensor *tg_grad_begin(tg_tensor *t, bool *fresh);
/* For an op whose input's gradient equals its output's (reshape; add):
 * makes g, the output's finished gradient, t's gradient too, seen in t's
 * shape, instead of a copy. Done only when it is exact: t is a non-leaf
 * that feeds this one op, has no gradient yet, is not retained
 * (tg_retain_grad) and has g's size, and g is the gradient of the output
 * of the rule running now (whose buffer's holders tg_backward counts, to
 * free it after the last); returns false (and does nothing) otherwise.
 * No backward writes into its output's gradient, so two inputs may share
 * one g. */
bool tg_grad_share(tg_tensor *t, const tg_tensor *g);
/* Scratch memory for the backward rule running now, bytes uninitialised,
 * handed back for reuse (tg__arena_reuse) as soon as the rule returns:
 * from the scope's recycled blocks when one of this size is free, else
 * from the arena. Outside a rule it is tg_arena_alloc. NULL, with the
 * error recorded, when out of memory. */
void *tg_backward_scratch(size_t bytes);
/* The same as a tensor (ndim, shape): an arena header, its data scratch. */
tg_tensor *tg_backward_scratch_tensor(int ndim, const int *shape);
/* Test switch: whether tg_backward frees intermediate gradients and
 * backward scratch for reuse (on, the default) or keeps all of them until
 * the scope ends, as before recycling; returns the previous setting. The
 * gradients are the same bits either way (tests/test_grad_memory.c). */
bool tg__grad_recycling(bool on);

/* The first generator index of a dropout mask of n elements, laid out
 * batch first: tg_rng_take(rng, n) in one process; with the data-parallel
 * shard (rank, size) of tg_dropout_set_shard, c + rank n where c is the
 * counter, which moves to c + size n. tg_dropout and tg_attention draw
 * their masks' indices only here. */
uint64_t tg_dropout_take(tg_rng *rng, uint64_t n);
/* y = x cast to y's dtype (tg_to_bf16's rounding, or widening), elements
 * split over threads; x and y of one size. For ops that write a bf16
 * result from a tg_real scratch (ops_shape.c). */
void tg__cast_into(const tg_tensor *x, tg_tensor *y);
/* An op with a bf16 result computes its rows in float a chunk at a time
 * and rounds each chunk as it is done, in a float scratch of at most
 * TG_BF16_CHUNK_BYTES: the result costs its half-size tensor and this
 * bound, never a float copy of itself (gpt-small's c_fc: 8 MB a copy).
 * Rows are independent, so chunks give the bits of one pass.
 * tg__chunk_rows: rows of `cols` values a chunk holds, a multiple of 32
 * (whole tiles of a product) and at most n. */
#define TG_BF16_CHUNK_BYTES ((size_t)2 << 20)
static inline int64_t tg__chunk_rows(int64_t cols, int64_t n) {
    int64_t r = (int64_t)(TG_BF16_CHUNK_BYTES / (sizeof(tg_real) * (size_t)(cols > 0 ? cols : 1)));
    r = r < 32 ? 32 : r / 32 * 32;
    return r < n ? r : n;
}
/* The products of an op: C = alpha op(A) op(B) + beta C in float
 * (tg_k_gemm), or with bf16 operands and float sums (tg_k_gemm_bf16) when
 * bf16, which the op takes from tg_get_precision() in its forward (or from
 * its node, n->bf16, in its backward) and passes down, so that every product
 * of one op, on whichever thread, has one precision. */
#define TG_GEMM(bf16, ...)    ((bf16) ? tg_k_gemm_bf16 : tg_k_gemm)(__VA_ARGS__)
/* The same with an epilogue (tg_k_gemm_ep, tensor/kernels.h) as the last argument. */
#define TG_GEMM_EP(bf16, ...) ((bf16) ? tg_k_gemm_bf16_ep : tg_k_gemm_ep)(__VA_ARGS__)
/* True when the products of an op run now should be bf16. */
static inline bool tg_prec_bf16(void) { return tg_get_precision() == TG_PREC_BF16; }

/* Every op's descriptor, defined in its ops_<family>.c and listed in
 * tg_op_table (ops_table.c) in this order: X(name, family) where family
 * names the file (ops_<family>.c), and for the unary ops the rows of
 * TG_UNARY_OPS (tensor/kernels.h) as they are, X(name, KIND, ...): a new
 * unary row is an op of the table, whose gradient checks the test then
 * demands (tests/test_gradcheck.c). Consumers take X(name, ...). */
/* Left as written by hand (clang-format off): a table, aligned by column. */
/* clang-format off */
#define TG_OPS(X)                                                                                                    \
    TG_UNARY_OPS(X)                                                                                                  \
    X(add, binary) X(sub, binary) X(mul, binary) X(div, binary)                                                      \
    X(sum, reduce) X(mean, reduce) X(max, reduce) X(matmul, matmul) X(softmax, softmax) X(log_softmax, softmax)      \
    X(reshape, shape) X(permute, shape) X(slice, shape) X(concat, shape) X(gather_rows, shape)                       \
    X(dropout, dropout) X(masked_softmax, masked_softmax) X(sparsemax, sparsemax) X(layer_norm, layer_norm)          \
    X(cross_entropy, cross_entropy) X(attention, attention) X(rel_gather, relative) X(rel_scatter, relative)         \
    X(rope, rope) X(affine, affine) X(affine_gelu, affine) X(affine_gelu_tanh, affine)                               \
    X(affine_add, affine) X(to_bf16, shape) X(to_real, shape)
/* clang-format on */

#define TG_OP_DECLARE(name, ...) extern const tg_op tg_op_##name;
TG_OPS(TG_OP_DECLARE)
#undef TG_OP_DECLARE

#endif
