/** @file
 * tgrad autograd layer: differentiable ops, the tape, backward(), gradcheck.
 *
 * Define-by-run like PyTorch: an op records a node only when grad mode is on
 * and one of its inputs requires grad. tg_backward() walks the recorded nodes
 * newest first (creation order is a topological order) and accumulates
 * gradients into .grad with +=.
 *
 * Every op returns NULL on bad input and records a message (tg_last_error());
 * given a NULL input, or one whose scope has ended, it returns NULL and keeps
 * the message already recorded, so a chain of ops is checked once at its end.
 * Op results are new tensors in the current scope's arena (see tensor.h),
 * released by tg_scope_end(), never freed by the caller; the exceptions
 * (tg_reshape's view, tg_dropout with p = 0) say so.
 *
 * Threads: grad mode, anomaly detection, the gradient-ready hook and the
 * dropout shard are process-wide settings, as tg_last_error() is one message
 * for the process: set them, and run ops and backward, from one thread at a
 * time (the one that runs the model). Only the precision is read atomically.
 */
#ifndef TG_AUTOGRAD_H
#define TG_AUTOGRAD_H

#include "../tensor/tensor.h"

/* ---- ops: one descriptor per op, all listed in tg_op_table ------------------
 * What an op writer needs beyond this (the node, recording, gradient
 * buffers) is internal: autograd/op.h. */

/** An op's backward rule: reads the gradient of node->out and the values the
 * forward saved on the node, and adds the gradients of the node's inputs. */
typedef void (*tg_backward_fn)(tg_node *node);
/** The descriptor of one differentiable op: one static instance per op
 * (the one behind tg_matmul, ...), never allocated or freed by users. */
typedef struct {
    const char *name;        /**< the op's name, as in messages and tg_op_find ("matmul", "exp", ...) */
    tg_backward_fn backward; /**< its backward rule */
} tg_op;

#define TG_NODE_MAX_INPUTS 6 /**< most inputs an op takes (tg_attention_pos: q, k, v, three tables) */
/** NULL-terminated list of every differentiable op; tests/test_gradcheck.c
 * walks it so that an op without a gradient check fails the suite. */
extern const tg_op *const tg_op_table[];
/** The op of tg_op_table named name (exact match), or NULL when there is
 * none or name is NULL (no error recorded). */
const tg_op *tg_op_find(const char *name);

/* ---- grad mode and backward ---------------------------------------------- */
/** Marks t as a leaf whose gradient backward computes (on) or not (off), as
 * torch's requires_grad_(). Parameters of modules require grad already.
 * A NULL t is ignored. */
void tg_set_requires_grad(tg_tensor *t, bool on);
/** Whether ops record nodes now (grad mode; on at start), as
 * torch.is_grad_enabled(). */
bool tg_grad_enabled(void);
/** Turns grad mode on or off, as torch.set_grad_enabled; off (torch.no_grad),
 * ops record nothing and their results do not require grad. Process-wide,
 * not per thread. Returns the previous mode, to restore it after. */
bool tg_set_grad_enabled(bool on);
/** d(loss)/d(t) for every t that requires grad, accumulated into t->grad
 * (created, zeroed, on first use: persistent for a persistent t, in the arena
 * otherwise). loss must have one element and require grad, and its scope
 * must not have ended. Runs with grad mode off. Returns 0, or -1 with an
 * error recorded; a graph a backward has already used is refused before any
 * gradient changes (see tg_backward_retain).
 *
 * Afterwards only the leaves (tensors no op made: parameters, inputs marked
 * with tg_set_requires_grad) hold their gradients, as in PyTorch. The
 * gradient of an op's result (loss included) is freed as soon as the rule
 * of the op that made it has run, its last reader, and its memory goes to
 * the next gradient of the same size in the scope; that result's ->grad is
 * NULL afterwards (a pointer kept to the old gradient is refused by ops as
 * no longer valid). tg_retain_grad keeps one; tg_backward_retain keeps all.
 * So a step holds a few layers' gradients at a time, not all of them. */
int tg_backward(tg_tensor *loss);
/** Same with an explicit seed gradient, the vector-Jacobian product:
 * seed must have as many elements as out (read in out's order). */
int tg_backward_seed(tg_tensor *out, const tg_tensor *seed);
/** A graph serves one backward pass, as in PyTorch: a second tg_backward
 * through the same nodes is an error (it would add the gradients again).
 * This one keeps the graph for another pass (PyTorch's retain_graph=True),
 * and with it every gradient it computed, op results' included (each
 * holds the gradient of the last pass that reached it); otherwise as
 * tg_backward. */
int tg_backward_retain(tg_tensor *loss);
/** Keeps the gradient of t, an op's result, after tg_backward (torch's
 * t.retain_grad()): t->grad then holds d(loss)/d(t) of the last backward
 * pass, in t's scope, instead of being freed once the rule of the op that
 * made t has run. Call it before the backward pass; it lasts as long as
 * t's graph. A leaf keeps its gradient anyway (nothing to do). Returns 0,
 * or -1 with "retain_grad: ..." recorded for a NULL t or one whose scope
 * has ended, a t that does not require grad, or a call made while a
 * backward pass runs. */
int tg_retain_grad(tg_tensor *t);
/** tg_backward_seed that keeps the graph for another pass, as
 * tg_backward_retain. */
int tg_backward_seed_retain(tg_tensor *out, const tg_tensor *seed);

/* ---- mixed precision --------------------------------------------------------- */
/** The precision of the products (tg_set_precision).
 *
 * Like torch.autocast(dtype=torch.bfloat16): with TG_PREC_BF16 the products
 * (tg_affine, i.e. Linear; tg_matmul; the block products of tg_attention
 * and tg_attention_pos, both the fused and the stored paths) round their
 * operands to bfloat16 and sum in float (tg_k_gemm_bf16), forward and
 * backward; everything else stays float: softmax, layer norm, losses,
 * reductions, elementwise ops, and the parameters, their gradients and the
 * optimizer (float master weights). An op reads the setting once, when it
 * runs forward, and its backward uses the same precision even if the
 * setting changed in between, as autocast's backward follows the forward's
 * dtypes. The setting is one process-wide value, like grad mode (set it from
 * the thread that runs the model, between steps); it is read atomically.
 *
 * The double build refuses TG_PREC_BF16 (error recorded, setting kept at
 * TG_PREC_FP32): it exists for gradient checks, whose central differences
 * need the exact products bf16 would round away.
 *
 *     tg_precision prev = tg_set_precision(TG_PREC_BF16);
 *     ... forward, backward ...
 *     tg_set_precision(prev);                                              */
typedef enum {
    TG_PREC_FP32 = 0, /**< float products (the default) */
    TG_PREC_BF16 = 1  /**< bfloat16 operands, float sums */
} tg_precision;
/** Sets the precision of the products that follow; returns the previous one.
 * A value outside the enum, or TG_PREC_BF16 in the double build, is refused:
 * the setting is kept and an error ("set_precision: ...") recorded, and the
 * current setting is returned all the same. */
tg_precision tg_set_precision(tg_precision p);
/** The current precision of the products (TG_PREC_FP32 at start). */
tg_precision tg_get_precision(void);
/** "fp32" or "bf16" (as the programs' `--precision` flag) as a tg_precision
 * value; -1 for anything else, NULL included (no error recorded). */
int tg_precision_parse(const char *name);
/** "bf16" for TG_PREC_BF16, "fp32" for anything else; a static string. */
const char *tg_precision_name(tg_precision p);

/* ---- debugging and hooks --------------------------------------------------- */
/** Anomaly detection, like torch.autograd.detect_anomaly: while on, every
 * op checks its output, and every backward rule the gradients it produced,
 * for NaN and Inf. The first op that produces one is named, with the
 * shapes: forward ("detect_anomaly: forward of exp gave a non-finite
 * output (2,3) from (2,3)") as tg_last_error() and again as the error of
 * the next tg_backward; backward as the error of tg_backward, which stops
 * there. Costs a pass over every output; off by default. Setting it (on or
 * off) forgets a forward anomaly already seen. Process-wide. */
void tg_set_detect_anomaly(bool on);
/** Whether anomaly detection is on (tg_set_detect_anomaly). */
bool tg_detect_anomaly(void);
/** The number of recorded ops on the longest chain from the leaves to t:
 * the sequential steps its computation needs (0 for a leaf, for a tensor
 * made with grad mode off, and for NULL). */
int tg_graph_depth(const tg_tensor *t);
/** Sets t->grad to zero (if it exists; a NULL t is ignored). */
void tg_zero_grad(tg_tensor *t);
/** The callback of tg_set_grad_ready_hook: leaves[i]'s gradient is final for
 * this backward pass; ctx is the pointer given to the hook. */
typedef void (*tg_grad_ready_fn)(int i, void *ctx);
/** Gradient-ready hook, for overlapping communication with backward
 * (src/distributed/): while set, each backward pass calls fn(i, ctx) once for each
 * leaves[i] as soon as its gradient can receive nothing more in that pass,
 * that is, right after the backward rule of the last node that takes it as an
 * input (backward counts each leaf's uses in the graph when it starts; a
 * leaf the pass does not reach is reported then). The order follows the
 * graph, so it is the same in every process running the same model. One
 * hook at a time (setting one replaces the last); fn NULL removes it. The
 * leaf pointers are kept (not the array), so the leaves must outlive the
 * hook. Costs nothing while unset. Returns 0, or -1 with the error recorded
 * and no hook set (n < 1, leaves or a leaf NULL, out of memory). */
int tg_set_grad_ready_hook(tg_tensor *const *leaves, int n, tg_grad_ready_fn fn, void *ctx);

/* ---- checking inputs ------------------------------------------------------ */
/** True if any of the n inputs in[] is NULL, or no longer valid (its scope
 * has ended, or it was freed), or stored as bf16 (an op that reads bf16
 * calls tg_any_bad); then records "<op>: NULL input" (keeping an earlier
 * message), "<op>: input i is no longer valid: ..." or "... is bf16". The check
 * every op makes first; for writers of ops built on these. */
bool tg_any_null(const char *op, int n, const tg_tensor *const *in);
/** tg_any_null for an op that reads some inputs stored as bf16: bit i of
 * bf16_ok set lets input i be TG_DTYPE_BF16; any other bf16 input is an
 * error ("op: input 0 (2,3) is bf16; ..."), as it is for tg_any_null. */
bool tg_any_bad(const char *op, int n, const tg_tensor *const *in, unsigned bf16_ok);

/* ---- elementwise ---------------------------------------------------------------
 * Each returns a new tensor of a's shape (the broadcast shape for two
 * tensors), differentiable; no domain is checked (log of a negative value
 * is NaN, as in C). */
/** -a. */
tg_tensor *tg_neg(tg_tensor *a);
/** e^a. */
tg_tensor *tg_exp(tg_tensor *a);
/** Natural logarithm of a; gradient g / a. */
tg_tensor *tg_log(tg_tensor *a);
/** Square root of a; gradient g / (2 sqrt(a)). */
tg_tensor *tg_sqrt(tg_tensor *a);
/** tanh(a); gradient g (1 - tanh^2). */
tg_tensor *tg_tanh(tg_tensor *a);
/** The logistic function 1 / (1 + e^-a); gradient g s (1 - s). */
tg_tensor *tg_sigmoid(tg_tensor *a);
/** max(a, 0); gradient g where a > 0 and 0 elsewhere (0 at a = 0, as torch). */
tg_tensor *tg_relu(tg_tensor *a);
/** GELU, the exact erf form as torch's default: x Phi(x) = x/2 (1 + erf(x / sqrt 2)). */
tg_tensor *tg_gelu(tg_tensor *a);
/** GPT-2's tanh form, torch's gelu(approximate='tanh'):
 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
tg_tensor *tg_gelu_tanh(tg_tensor *a);
/** a^p elementwise (C's pow); gradient g p a^(p-1). */
tg_tensor *tg_pow_scalar(tg_tensor *a, tg_real p);
/** a + b with NumPy broadcasting; a gradient is summed over the axes its
 * input was broadcast along. Shapes that do not broadcast are an error
 * ("add: shapes (2,3) and (4) cannot be broadcast together"). */
tg_tensor *tg_add(tg_tensor *a, tg_tensor *b);
/** a - b, broadcast as tg_add. */
tg_tensor *tg_sub(tg_tensor *a, tg_tensor *b);
/** a * b elementwise, broadcast as tg_add. */
tg_tensor *tg_mul(tg_tensor *a, tg_tensor *b);
/** a / b elementwise, broadcast as tg_add (no check for zeros in b). */
tg_tensor *tg_div(tg_tensor *a, tg_tensor *b);
/** a + s for a scalar s. */
tg_tensor *tg_add_scalar(tg_tensor *a, tg_real s);
/** s a for a scalar s. */
tg_tensor *tg_mul_scalar(tg_tensor *a, tg_real s);

/* ---- reductions ------------------------------------------------------------------
 * axis may be negative, counted from the end; an axis out of range, or a
 * 0-d a, is an error. Without keepdim the axis is removed, with it it stays
 * with size 1. */
/** Sum along axis (0 for an empty axis). */
tg_tensor *tg_sum(tg_tensor *a, int axis, bool keepdim);
/** Mean along axis; an empty axis is an error. */
tg_tensor *tg_mean(tg_tensor *a, int axis, bool keepdim);
/** Maximum along axis; gradient to the first maximum. An empty axis is an error. */
tg_tensor *tg_max(tg_tensor *a, int axis, bool keepdim);
/** Sum of every element: shape () (ndim 0, one element). */
tg_tensor *tg_sum_all(tg_tensor *a);
/** Mean of every element, shape (); an empty a is an error. */
tg_tensor *tg_mean_all(tg_tensor *a);
/** Largest element, shape (); gradient to the first maximum. An empty a is an error. */
tg_tensor *tg_max_all(tg_tensor *a);

/* ---- linear algebra ------------------------------------------------------- */
/** a @ b for 2-D @ 2-D ([M, K] @ [K, N] -> [M, N]), 3-D @ 3-D (batched, same
 * batch: [B, M, K] @ [B, K, N] -> [B, M, N]) and 3-D @ 2-D (b shared by the
 * batch). Other ranks, inner sizes or batch sizes that differ are errors
 * ("matmul: (2,3) @ (4,5): inner dimensions 3 and 4 differ"). bf16 products
 * under TG_PREC_BF16. */
tg_tensor *tg_matmul(tg_tensor *a, tg_tensor *b);
/** Same with a (trans_a) or b (trans_b) transposed in its last two axes,
 * read through the GEMM's strides without a copy (Q K^T: trans_b). */
tg_tensor *tg_matmul_t(tg_tensor *a, tg_tensor *b, bool trans_a, bool trans_b);
/** x w^T + b over the last axis of x (torch's nn.functional.linear):
 * x [..., in], w [out, in], b [out] or NULL -> [..., out]. One GEMM that
 * starts from the bias (ops_affine.c); bf16 products under TG_PREC_BF16.
 * Other shapes are an error naming the three. */
tg_tensor *tg_affine(tg_tensor *x, tg_tensor *w, tg_tensor *b);
/** gelu(x w^T + b): tg_gelu (or, with tanh_form, tg_gelu_tanh) of
 * tg_affine(x, w, b), as one op whose GEMM applies the GELU to each block
 * of the product it finishes, while the block is in cache: no pass of its
 * own over [..., out] in memory (which gains little where GELU's
 * arithmetic, not memory, bounds that pass; the backward is the pair's).
 * Shapes as tg_affine; values and gradients equal the two ops', bit for
 * bit. With a graph it keeps x w^T + b for the backward (one more
 * [..., out] tensor in the scope, as the pair does); without one (no grad
 * mode, or no input requiring grad) it does not. bf16 products under
 * TG_PREC_BF16. Errors name "affine_gelu" or "affine_gelu_tanh" and the
 * three shapes. */
tg_tensor *tg_affine_gelu(tg_tensor *x, tg_tensor *w, tg_tensor *b, bool tanh_form);
/** r + x w^T + b (a Linear on a residual connection: torch's r +
 * F.linear(x, w, b)) as one op: the GEMM starts from r + b, so x w^T + b
 * is never a tensor of its own. r has the result's shape [..., out] and is
 * tg_real; x may be bf16. Values: the GEMM's sums added to r + b (not
 * (x w^T + b) + r: equal to rounding). Errors name "affine_add". */
tg_tensor *tg_affine_add(tg_tensor *r, tg_tensor *x, tg_tensor *w, tg_tensor *b);
/** tg_affine with the result stored as `to` (TG_DTYPE_BF16: rounded to
 * bf16 as tg_to_bf16, from a float scratch that is then reused: half the
 * bytes kept). x may be stored as bf16 in tg_affine, tg_affine_gelu and
 * these: its products are those of its float values. */
tg_tensor *tg_affine_to(tg_tensor *x, tg_tensor *w, tg_tensor *b, tg_dtype to);
/** tg_affine_gelu with the result stored as `to`; with TG_DTYPE_BF16 the
 * pre-activation kept for the backward is bf16 too, so the backward's
 * gelu' is that of the rounded x w^T + b (as under torch's autocast). */
tg_tensor *tg_affine_gelu_to(tg_tensor *x, tg_tensor *w, tg_tensor *b, bool tanh_form, tg_dtype to);

/* ---- softmax along the last axis ---------------------------------------------- */
/** softmax along the last axis (max-subtracted); a's shape. A 0-d a or an
 * empty last axis is an error. */
tg_tensor *tg_softmax(tg_tensor *a);
/** log(softmax(a)) along the last axis, computed directly (stable); checks as
 * tg_softmax. */
tg_tensor *tg_log_softmax(tg_tensor *a);

/* ---- shape ---------------------------------------------------------------------- */
/** a seen with shape (ndim, shape): one entry may be -1 (inferred); the
 * element counts must match. No copy: the result shares a's values (a view
 * whose header lives in the arena), so it is valid while a is. A bf16 a
 * gives a bf16 view. */
tg_tensor *tg_reshape(tg_tensor *a, int ndim, const int *shape);
/** x stored as bfloat16 (tg_dtype; torch's x.to(torch.bfloat16)): each
 * value rounded to nearest even (subnormals kept), half the bytes; x itself
 * when it is bf16 already. The gradient passes back unchanged (as torch's)
 * and is tg_real. For activations that only feed bf16 products, which
 * round their operands the same way. */
tg_tensor *tg_to_bf16(tg_tensor *x);
/** x stored as tg_real (torch's x.float()): exact; x itself when it is
 * tg_real already. The gradient passes back unchanged. */
tg_tensor *tg_to_real(tg_tensor *x);
/** a with axes axis0 and axis1 swapped (either may be negative); a copy. */
tg_tensor *tg_transpose(tg_tensor *a, int axis0, int axis1);
/** Axis i of the result is axis perm[i] of a; a copy. perm has a->ndim
 * entries and must be a permutation of 0..ndim-1. */
tg_tensor *tg_permute(tg_tensor *a, const int *perm);
/** Entries [start, stop) of a along axis (which may be negative); a copy.
 * Needs 0 <= start <= stop <= the axis' size (no negative indices). */
tg_tensor *tg_slice(tg_tensor *a, int axis, int start, int stop);
/** The n tensors ts[] joined along axis (which may be negative); they must
 * agree on every other axis. 1 <= n <= TG_NODE_MAX_INPUTS. */
tg_tensor *tg_concat(int n, tg_tensor *const *ts, int axis);
/** Rows of a 2-D table [V, d] picked by ids (shape ndim/shape, ndim <
 * TG_MAX_DIMS): result [..., d]. ids are copied (they need not outlive the
 * call); an id outside [0, V) is an error. Gradients of repeated ids add up. */
tg_tensor *tg_gather_rows(tg_tensor *table, const int *ids, int ndim, const int *shape);

/* ---- fused ops used by the modules of src/nn ------------------------------
 * Each is one op with its own backward (and gradcheck) because composing it
 * from the ops above would be slower or numerically worse. */

/** Inverted dropout: each element is kept with probability 1-p and scaled by
 * 1/(1-p), so the expectation is unchanged. Element i's keep bit is a hash
 * of (seed, stream, first + i), first = tg_rng_take(rng, n) in one process
 * (dropout_mask.h; with a shard, below): the mask is regenerated in
 * backward, never stored. p = 0 returns x itself (not a copy, and draws
 * nothing); p = 1 returns zeros (and draws nothing). p outside [0, 1] is an
 * error (tg_check_dropout), and so is a NULL rng when 0 < p < 1. */
tg_tensor *tg_dropout(tg_tensor *x, tg_real p, tg_rng *rng);
/** Data-parallel dropout. Under data parallelism (src/distributed/) each of `size`
 * ranks runs the forward on its slice of the global batch, rank r holding
 * rows [r Bl, r Bl + Bl) of B = size Bl. With the shard (rank, size) set,
 * every mask draw of n elements (tg_dropout, tg_attention's dropout) from a
 * generator whose counter is c takes
 *   first = c + rank n,  mask indices [c + rank n, c + rank n + n),
 *   and then counter = c + size n,
 * which is rank's slice of the size n indices one process drawing the
 * global batch takes, when the batch is the tensor's leading axis (as for
 * [B, T, d] activations, and for attention weights [B h, Q, K] with the
 * heads folded in batch-major, as mha.c does). So the ranks' masks
 * together are the single-process masks, draw by draw (also when one
 * generator is drawn from several times per forward), and every rank's
 * generators stay in step, as their checkpoints assume. A mask whose
 * leading axis is not the batch is still a valid mask, independent on
 * each rank, but not the single-process one. No other draw (initialisation,
 * data sampling, tg_rand, ...) is sharded. The default is rank 0 of 1 (first
 * = c, counter = c + n). A data-parallel program calls, once after
 * tg_dist_init:  tg_dropout_set_shard(tg_dist_rank(), tg_dist_size()).
 * Process-wide; set it before the first forward. Returns 0, or -1 with
 * "dropout_set_shard: ..." recorded (and the shard unchanged) unless
 * size >= 1 and 0 <= rank < size. */
int tg_dropout_set_shard(int rank, int size);
/** The current shard (tg_dropout_set_shard) into *rank and *size; either may be NULL. */
void tg_dropout_get_shard(int *rank, int *size);
/** The one dropout-probability check: p in [0, 1], as torch.nn.Dropout (p = 1
 * drops everything and gives zeros). Returns false with "who: dropout
 * p = P is outside [0, 1]" recorded otherwise (also for NaN), P being p's
 * value. */
bool tg_check_dropout(const char *who, tg_real p);

/** Which keys each query may see, for attention over x of shape [B, Q, K].
 *   lens == NULL            every key;
 *   lens_ndim == 1: lens[b]        keys 0..lens[b]-1 for every query of row b;
 *   lens_ndim == 2: lens[b*Q + q]  keys 0..lens[b*Q+q]-1 for query q;
 *   causal:                 additionally only keys 0..q (query q, key k <= q).
 * A length above K means every key; a negative one is an error. As d2l,
 * masked scores are replaced by -1e6 before normalising, so a row with no
 * visible key comes out uniform (never NaN). Passed by value; the ops copy
 * what they need, so lens need not outlive the call. */
typedef struct {
    const int *lens; /**< valid lengths, [B] or [B, Q] as lens_ndim says; NULL: no lengths */
    int lens_ndim;   /**< 0 (no lengths), 1 or 2 */
    bool causal;     /**< query q also sees only keys 0..q */
} tg_mask;

/** softmax over the last axis of x [B, Q, K] with the mask; masked entries
 * get zero gradient. x must be 3-D with K > 0; a bad mask (lens_ndim not 0,
 * 1 or 2, lens with lens_ndim 0, a negative length) is an error. */
tg_tensor *tg_masked_softmax(tg_tensor *x, tg_mask mask);
/** sparsemax (Martins & Astudillo, 2016): the Euclidean projection of each
 * row onto the probability simplex, with the same masking and checks as
 * tg_masked_softmax (a row with no visible key is uniform); exact backward
 * dx = g - mean(g over the support), zero off the support. */
tg_tensor *tg_sparsemax(tg_tensor *x, tg_mask mask);

/** Scaled dot-product attention, fused (ops_attention.c):
 *   out = dropout(masked_softmax(q k^T / sqrt(d), mask)) v,
 * q [B, Q, d], k [B, K, d], v [B, K, dv] -> out [B, Q, dv], the same values
 * as the stored path tg_masked_softmax + tg_dropout + tg_matmul (up to
 * rounding, and the same dropout mask for equal rng states: element
 * (b, q, k) at index first + (b Q + q) K + k, first taken as tg_dropout
 * takes it for n = B Q K, data-parallel shard included),
 * without ever storing the [B, Q, K] weights: FlashAttention-2's online
 * softmax forward, backward recomputing the weights from the saved
 * log-sum-exp and the dropout mask from its counter. Memory O(B Q d);
 * with at most 64 queries and keys the weights (B Q K <= 64 B Q reals) are
 * kept instead of recomputed, when a backward will need them.
 * dropout_p in [0, 1] (1 gives zeros, as tg_dropout, and draws nothing);
 * rng may be NULL when dropout_p is 0 or 1. Shapes that do not fit, d = 0,
 * a bad mask (as tg_masked_softmax) or a bad dropout_p are errors.
 * q, k and v may be stored as bf16 (tg_dtype), all three or none (mixing
 * them is an error): out is then bf16, bit for bit tg_to_bf16 of the op on
 * tg_to_real(q), tg_to_real(k), tg_to_real(v), as torch's
 * scaled_dot_product_attention returns its inputs' dtype; their gradients
 * are tg_real, those of that composite up to bf16's rounding of out (the
 * backward reads the stored out, as FlashAttention does). So do the other
 * entries below (the position tables stay tg_real). */
tg_tensor *tg_attention(tg_tensor *q, tg_tensor *k, tg_tensor *v, tg_mask mask, tg_real dropout_p, tg_rng *rng);

/** Position terms of attention scores, functions of (head, offset) computed
 * on the fly (ops_attention.c), never a [Q, K] table. Rows of q, k, v are
 * (batch, head) pairs, row b of q being head b % heads (mha.c folds heads
 * into the batch so). Query i sits at position i + q_offset (a KV cache's
 * first new position; 0 otherwise), key j at j, and o = j - (i + q_offset)
 * is their offset. The tables are indexed by the offset's bucket r, one of
 * R: offsets clipped to [-clip, clip], r = clip(o, -clip, clip) + clip and
 * R = 2 clip + 1 (Shaw et al.), or with t5_buckets > 0 T5's buckets, R =
 * t5_buckets: exact for small |o|, logarithmic up to t5_max_distance, two
 * halves for keys before and after the query unless t5_one_sided (as
 * Hugging Face's T5 _relative_position_bucket; src/autograd/rel_bucket.h).
 * Every term is optional (NULL); with several they add up:
 *   alibi   [heads] slopes m_h:  score += -m_h |o|         (Press et al.
 *           2022; with a causal mask |o| = i - j, the paper's form; without
 *           one, the symmetric bidirectional form)
 *   bias    [heads, R]:          score += bias[h, r]       (a learned bias
 *           per head and bucket: T5's, Raffel et al. 2020, with t5_buckets)
 *   rel_k   [R, d]:              score += q_i . rel_k[r] / sqrt(d)
 *   rel_v   [R, dv]:             out_i += sum_j w_ij rel_v[r]
 *           (Shaw, Uszkoreit, Vaswani 2018: e_ij = q_i (k_j + a^K_ij)^T /
 *           sqrt(d), z_i = sum_j w_ij (v_j + a^V_ij), w after dropout;
 *           shared across heads as in the paper).
 * Masked scores stay -1e6 (the bias is not added to them). bias, rel_k and
 * rel_v receive gradients when they require grad; the slopes are constants.
 * Checked by the ops that take it: clip in [0, 2^20], t5_buckets in
 * [0, 2^20] with at least one exact bucket per side and t5_max_distance
 * above them, tables of the shapes above, finite slopes. The struct is
 * read during the call only; the tables are inputs of the op's node. */
typedef struct {
    int heads;            /**< 0 means 1; must divide the batch B of q */
    int q_offset;         /**< position of query 0 */
    const tg_real *alibi; /**< [heads] or NULL */
    int clip;             /**< offsets clipped to [-clip, clip] for the tables */
    tg_tensor *bias;      /**< [heads, R] or NULL */
    tg_tensor *rel_k;     /**< [R, d] or NULL */
    tg_tensor *rel_v;     /**< [R, dv] or NULL */
    int t5_buckets;       /**< > 0: T5's buckets instead of clipping (R = t5_buckets) */
    int t5_max_distance;  /**< T5's max_distance (128 in T5) */
    bool t5_one_sided;    /**< T5's bidirectional=False (a causal decoder) */
} tg_attn_pos;
/** tg_attention with the position terms of pos (NULL: none, tg_attention
 * itself). Memory stays O(B Q (d + R)). */
tg_tensor *tg_attention_pos(tg_tensor *q, tg_tensor *k, tg_tensor *v, tg_mask mask, tg_real dropout_p, tg_rng *rng,
                            const tg_attn_pos *pos);
/** tg_attention_pos over h heads read in place, without split copies:
 * q [B, Q, h d], k [B, K, h d], v [B, K, h dv] -> out [B, Q, h dv], head j
 * of every row being columns j d.. of q and k (j dv.. of v and out). The
 * same values and dropout mask as tg_attention_pos on the heads split to
 * [B h, n, d] (head j of batch entry b as row b h + j): mask and pos are
 * those of the [B h, Q, K] scores. heads < 1 or feature sizes that h does
 * not divide are errors, named "attention_heads". */
tg_tensor *tg_attention_heads(tg_tensor *q, tg_tensor *k, tg_tensor *v, int heads, tg_mask mask, tg_real dropout_p,
                              tg_rng *rng, const tg_attn_pos *pos);
/** Self-attention straight from a fused projection: qkv [B, T, 3 h d],
 * each row the h heads of q, then of k, then of v (nanoGPT's c_attn, viewed
 * as [B, T, 3, h, d]) -> out [B, T, h d], as tg_attention_heads on the three
 * thirds, with one gradient for qkv. Errors named "attention_qkv". */
tg_tensor *tg_attention_qkv(tg_tensor *qkv, int heads, tg_mask mask, tg_real dropout_p, tg_rng *rng,
                            const tg_attn_pos *pos);
/** ALiBi's slopes for h heads, written to out[0..heads-1]. As Press et al.
 * 2022: m_k = 2^(-8k/h), k = 1..h, when h is a power of two; otherwise, the
 * paper's rule, the slopes of the largest power of two n < h followed by
 * every other slope of 2n (the odd k) until there are h. Returns 0, or -1
 * with "alibi_slopes: ..." recorded for heads < 1 or a NULL out. */
int tg_alibi_slopes(int heads, tg_real *out);

/** The stored path's relative-position gather (ops_relative.c), with the
 * buckets r(i, j) of pos (its clip or T5 fields and q_offset; the tables
 * are not read; a NULL pos is an error):
 * x [N, Qx, R] (Qx = Q, or 1 shared by all queries) -> [N, Q, K],
 *   out[n, i, j] = x[n, i or 0, r(i, j)]   (Huang et al. 2018's "skewing",
 *   as a gather: q rel_k^T [N, Q, R] becomes Shaw's q . a^K_ij).
 * Q and K must be positive. Its backward is tg_rel_scatter. */
tg_tensor *tg_rel_gather(tg_tensor *x, int Q, int K, const tg_attn_pos *pos);
/** The adjoint of tg_rel_gather: w [N, Q, K] (Q, K > 0) -> [N, Q, R],
 * out[n, i, r] = sum_{j: r(i,j) = r} w[n, i, j] (the weights summed per
 * offset, for Shaw's value term). Its backward is tg_rel_gather. */
tg_tensor *tg_rel_scatter(tg_tensor *w, const tg_attn_pos *pos);

/** Rotary position embedding (RoPE) of x [N, T, d], d even. As Su et al.
 * 2021, row t at position t + offset: each pair (a, b) of features is
 * rotated by the angle theta = (t + offset) base^(-2i/d),
 *   y_a = x_a cos theta - x_b sin theta,  y_b = x_a sin theta + x_b cos theta,
 * with the pairs (2i, 2i+1) of the paper (interleaved), or, with half, the
 * pairs (i, i + d/2) of GPT-NeoX's and LLaMA's code (the same rotation on
 * permuted features). Backward: the inverse rotation of the gradient.
 * base must be finite and > 1 (10000 in the paper) and offset >= 0. */
tg_tensor *tg_rope(tg_tensor *x, int offset, tg_real base, bool half);
/** tg_rope on each head of x [N, T, heads d] where the projections wrote
 * them (head j: features j d .. j d + d - 1), without splitting the heads:
 * the first `rotated` heads are rotated as tg_rope rotates a [N, T, d]
 * tensor, the others copied. A fused [B, T, 3 h d] q, k, v projection
 * takes heads 3h, rotated 2h (q and k turn, v does not). d even,
 * 0 <= rotated <= heads. tg_rope(x, ...) is tg_rope_heads(x, 1, 1, ...). */
tg_tensor *tg_rope_heads(tg_tensor *x, int heads, int rotated, int offset, tg_real base, bool half);

/** Layer normalisation over the last axis, biased variance, as PyTorch:
 *   y = (x - mean) / sqrt(var + eps) * gamma + beta.
 * gamma and beta ([d]) may both be NULL (no affine); one of them alone is
 * taken for a failed earlier call ("layer_norm: NULL input"). eps >= 0. */
tg_tensor *tg_layer_norm(tg_tensor *x, tg_tensor *gamma, tg_tensor *beta, tg_real eps);
/** tg_layer_norm with the result stored as `to` (TG_DTYPE_BF16: rounded as
 * tg_to_bf16 from a float scratch that is then reused; the backward reads
 * x and the saved statistics, never y, so its gradients are unchanged). */
tg_tensor *tg_layer_norm_to(tg_tensor *x, tg_tensor *gamma, tg_tensor *beta, tg_real eps, tg_dtype to);

/** Mean cross-entropy of logits [..., V] against integer targets (one per
 * row), computed through a fused log-softmax. Rows whose target equals
 * ignore_index, or whose mask entry is 0 (mask may be NULL; any other value
 * counts the row, it is not a weight), do not count; the mean is over the
 * rows that do (0 if none). Returns shape (). A counted row's target must be
 * in [0, V); targets may be NULL only when there are no rows. */
tg_tensor *tg_cross_entropy(tg_tensor *logits, const int *targets, const tg_real *mask, int ignore_index);
/** The same summed over the counted rows (PyTorch's reduction='sum'), their
 * number in *counted (may be NULL): the pieces of a mean over several
 * micro-batches, sum of sums / sum of counts, which tg_run_backward_sum
 * takes (exact gradient accumulation with ignored targets). */
tg_tensor *tg_cross_entropy_sum(tg_tensor *logits, const int *targets, const tg_real *mask, int ignore_index,
                                int64_t *counted);
#define TG_IGNORE_INDEX (-100) /**< PyTorch's default ignore_index */

/* ---- gradient checking ------------------------------------------------------- */
/** The function tg_gradcheck differentiates: the output (any shape) of the n
 * inputs, or NULL on failure. Called with grad mode on and off; ctx is the
 * caller's pointer, passed through. */
typedef tg_tensor *(*tg_fn)(tg_tensor *const *inputs, int n, void *ctx);
/** What tg_gradcheck measured. */
typedef struct {
    double max_abs_err;  /**< largest |analytic - numeric| */
    double max_rel_err;  /**< |analytic - numeric| / max(|analytic|, |numeric|, 1e-2) */
    int worst_input;     /**< the input of max_rel_err (-1 when nothing was checked) */
    int64_t worst_index; /**< its flat index in that input (-1 when nothing was checked) */
    int64_t checked;     /**< number of gradient entries compared */
} tg_gradcheck_result;
/** Compares the analytic gradient of f with central finite differences, for
 * every input that requires grad. f may return any shape: the scalar checked
 * is sum(f(x) * R) with R a fixed random tensor, so every output element
 * contributes. Each evaluation of f runs in its own scope. The inputs' grads
 * are zeroed first and hold the analytic gradient after; their values are
 * perturbed by +-eps and restored. Run it in the double build (float's
 * rounding swamps the differences).
 * Returns true when max_rel_err <= tol; false with an error recorded
 * otherwise, or when f fails, no input is given, or the output does not
 * depend on an input that requires grad. eps is the finite-difference step;
 * res (may be NULL) receives the measurements, also on failure once f,
 * inputs and n have passed their checks. */
bool tg_gradcheck(tg_fn f, tg_tensor *const *inputs, int n, void *ctx, double eps, double tol,
                  tg_gradcheck_result *res);

#endif
