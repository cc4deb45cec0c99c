/** @file
 * tgrad modules: the layers of d2l's chapter "Self-Attention and Positional
 * Encoding" (attention scoring, multi-head attention, positional encodings
 * fixed, learned, relative, RoPE and ALiBi), the Transformer encoder and the
 * layers around them, plus the CNN and RNN layers the comparison uses; the
 * GPT-2 decoder is in decoder.h.
 *
 * Every module follows one pattern:
 *
 *     tg_X *tg_X_new(config..., tg_rng *rng)   parameters are persistent tensors
 *     tg_tensor *tg_X_forward(tg_X *m, ...)     builds a differentiable graph
 *     int tg_X_params(tg_X *m, tg_params *p, const char *prefix)
 *                                               appends its parameters, named as
 *                                               PyTorch's state_dict would;
 *                                               0, or -1 with the error recorded
 *     void tg_X_train(tg_X *m, bool on)         train/eval, reaching its children
 *     void tg_X_free(tg_X *m)
 *
 * A module named like an op takes _layer, so each spelling means one thing:
 * tg_dropout and tg_layer_norm are the ops, tg_dropout_layer and
 * tg_layer_norm_layer (with tg_dropout_layer_new, ...) the modules.
 *
 * Modules are built from public ops only, so they are differentiable and
 * gradient-checkable for free. Constructors return NULL with an error
 * recorded on bad configuration; forwards return NULL on bad input.
 *
 * Ownership and lifetimes (docs/mainpage.md): a module owns its parameters
 * and child modules, which are persistent (whatever scope is open when the
 * module is made) and freed by its _free call. A forward's result and every
 * intermediate tensor live in the current scope, until tg_scope_end(); so
 * does anything a module records during a forward (attention weights).
 * _params lists the module's tensors without giving them away: the list
 * (tg_params) does not own them.
 *
 * Errors: a NULL module: tg_X_free(NULL) and tg_X_train(NULL, on) do
 * nothing; tg_X_forward(NULL, ...) returns NULL with "X_forward: NULL
 * module" recorded, and tg_X_params(NULL, ...) returns -1 with "X_params:
 * NULL module" (Conv1d, RNN and GRU record "X_params: NULL argument"
 * instead, also for a NULL list). A NULL input tensor returns NULL and keeps
 * the first message (tg_error_null), which names the op that failed
 * upstream, so a chain of calls can be checked once at its end. Dropout
 * probabilities are checked by tg_check_dropout: [0, 1].
 *
 * Threads: a module is for one thread at a time. A forward changes the
 * module (it draws from its dropout streams and records attention weights),
 * so two threads must not run forwards of one module at once.
 *
 * Random generators: a constructor that draws initial weights needs a
 * non-NULL rng and fails with "...: NULL rng" recorded without one, naming
 * the module or the sub-module that draws first (tg_mha_new: "linear"). Each dropout layer
 * forks its own stream from rng when it is made, so two modules made from
 * one generator drop different elements, and a model rebuilt from the same
 * seed drops the same ones again. */
#ifndef TG_NN_H
#define TG_NN_H

#include "../autograd/autograd.h"
#include "../tensor/params.h"

/* ---- Linear ------------------------------------------------------------------ */
/** Linear: y = x W^T + b on the last axis of any-rank x.
 * weight [out, in] and bias [out] as torch.nn.Linear, initialised
 * U(-1/sqrt(in), 1/sqrt(in)) (PyTorch's default). */
typedef struct {
    int in,            /**< input features (x's last axis) */
        out;           /**< output features */
    tg_tensor *weight, /**< [out, in], persistent, requires grad */
        *bias;         /**< [out], persistent, requires grad; NULL when made without bias */
} tg_linear;
/** A Linear layer of in inputs and out outputs, with a bias when bias is
 * true, its weights drawn from rng. NULL with the error recorded when in or
 * out is not positive ("linear: sizes ..."), rng is NULL or memory runs
 * out. Free with tg_linear_free. */
tg_linear *tg_linear_new(int in, int out, bool bias, tg_rng *rng);
/** x [..., in] (any rank >= 1) -> [..., out], as one GEMM that reads W
 * transposed through strides. The result lives in the current scope. NULL
 * with "linear: input <shape> last dim d, expected in" recorded when the
 * last axis does not match, or when m or x is NULL. */
tg_tensor *tg_linear_forward(tg_linear *m, tg_tensor *x);
/** GELU of the layer's output, gelu(x W^T + b) (GPT-2's MLP: tanh_form for
 * GPT-2's tanh form, else the exact erf form), as one GEMM that applies the
 * GELU to each block of the output it finishes (tg_affine_gelu): the values
 * and gradients of tg_gelu (tg_gelu_tanh) of tg_linear_forward, bit for
 * bit. Checks and errors as tg_linear_forward; the result lives in the
 * current scope. */
tg_tensor *tg_linear_gelu_forward(tg_linear *m, tg_tensor *x, bool tanh_form);
/** Appends "<prefix>.weight" and, with a bias, "<prefix>.bias" to p
 * (prefix NULL or "": the bare names). 0, or -1 with the error recorded. */
int tg_linear_params(tg_linear *m, tg_params *p, const char *prefix);
/** Frees the layer and its weight and bias; NULL is a no-op. */
void tg_linear_free(tg_linear *m);

/* ---- Dropout ----------------------------------------------------------------- */
/** Dropout(p), as torch.nn.Dropout: inverted dropout in training (each
 * element zeroed with probability p, the others scaled by 1/(1-p)),
 * identity in eval. A new layer is in training mode, as in PyTorch. */
typedef struct {
    tg_real p;     /**< the probability of zeroing an element, in [0, 1] */
    bool training; /**< true: drop (a new layer); false: eval, the identity */
    tg_rng rng;    /**< the layer's own stream, forked from the constructor's generator; masks come from it */
} tg_dropout_layer;
/** A dropout layer of probability p in [0, 1], in training mode, whose mask
 * stream is forked from rng. rng may be NULL: the layer then forks a fixed
 * stream (seed 0), for layers that never drop (p = 0) or programs that do
 * not care which elements are dropped. NULL with "dropout: dropout p = ...
 * is outside [0, 1]" recorded for a bad p (NaN included). */
tg_dropout_layer *tg_dropout_layer_new(tg_real p, tg_rng *rng);
/** x of any shape -> the same shape: tg_dropout(x, p) with the layer's
 * stream in training mode; in eval mode or with p = 0, x itself (no new
 * tensor, nothing drawn). A new tensor lives in the current scope. NULL with
 * the error recorded for a NULL layer ("dropout_forward: NULL module") or a
 * NULL x. */
tg_tensor *tg_dropout_layer_forward(tg_dropout_layer *m, tg_tensor *x);
/** The probability a forward would use now: p in training, 0 in eval (and 0
 * for a NULL layer). */
tg_real tg_dropout_layer_active_p(const tg_dropout_layer *m);
/** The layer's mask stream, for an op that applies the same dropout itself
 * (the fused attention) and for a training state to save (tg_rngs). NULL
 * for a NULL layer, without an error. Owned by the layer. */
tg_rng *tg_dropout_layer_rng(tg_dropout_layer *m);
/** Training (on: drop) or eval (off: identity) mode; NULL is a no-op. */
void tg_dropout_layer_train(tg_dropout_layer *m, bool on);
/** Frees the layer; NULL is a no-op. */
void tg_dropout_layer_free(tg_dropout_layer *m);

/* ---- Embedding --------------------------------------------------------------- */
/** Embedding(vocab, d), as torch.nn.Embedding: row i of weight [vocab, d]
 * is the vector of token i, initialised N(0, std^2). The gradient adds into
 * the rows that were picked (a row picked twice receives both). */
typedef struct {
    int vocab,         /**< number of rows (token ids 0..vocab-1) */
        dim;           /**< the vectors' size d */
    tg_tensor *weight; /**< [vocab, dim], persistent, requires grad */
} tg_embedding;
/** An embedding table of vocab rows of dim entries drawn N(0, std^2) from
 * rng (PyTorch's default is std 1; std 0 gives zeros). NULL with the error
 * recorded for a non-positive size, a negative or NaN std ("embedding:
 * vocab ..., dim ..., std ..."), a NULL rng or no memory. */
tg_embedding *tg_embedding_new(int vocab, int dim, tg_real std, tg_rng *rng);
/** The rows of ids, a plain int array of shape (ndim, shape) (ndim in
 * [0, TG_MAX_DIMS - 1]; shape may be NULL when ndim is 0): the result has
 * shape [shape..., dim] and lives in the current scope. NULL with the error
 * recorded for a NULL module ("embedding_forward: NULL module"), NULL or
 * badly shaped ids, or an id outside [0, vocab) ("embedding: id 7 at
 * position 3 of ids (2,4) is outside [0, 5)"). */
tg_tensor *tg_embedding_forward(tg_embedding *m, const int *ids, int ndim, const int *shape);
/** Appends "<prefix>.weight" to p. 0, or -1 with the error recorded. */
int tg_embedding_params(tg_embedding *m, tg_params *p, const char *prefix);
/** Frees the table and the module; NULL is a no-op. */
void tg_embedding_free(tg_embedding *m);

/* ---- LayerNorm --------------------------------------------------------------- */
/** LayerNorm(d), as torch.nn.LayerNorm(d) with elementwise_affine:
 * y = (x - mean) / sqrt(var + eps) * weight + bias over the last axis,
 * biased variance (divided by d). weight starts at ones and bias at zeros,
 * so a new layer only normalises. */
typedef struct {
    int dim;           /**< the normalised (last) axis' size d */
    tg_real eps;       /**< added to the variance (PyTorch's default 1e-5) */
    tg_tensor *weight, /**< [dim], gamma, ones at first; persistent, requires grad */
        *bias;         /**< [dim], beta, zeros at first; persistent, requires grad */
} tg_layer_norm_layer;
/** A LayerNorm over dim features with the given eps (PyTorch's default:
 * 1e-5). Draws nothing, so it takes no rng. NULL with "layernorm: dim ...,
 * eps ...: need dim > 0 and eps >= 0" recorded, or on running out of
 * memory. */
tg_layer_norm_layer *tg_layer_norm_layer_new(int dim, tg_real eps);
/** x [..., dim] (any rank >= 1) -> the same shape, normalised over the last
 * axis (the fused op tg_layer_norm), in the current scope. NULL with
 * "layernorm: input <shape> last dim d, expected dim" recorded on a
 * mismatch, or when m or x is NULL. */
tg_tensor *tg_layer_norm_layer_forward(tg_layer_norm_layer *m, tg_tensor *x);
/** Appends "<prefix>.weight" and "<prefix>.bias" to p. 0, or -1 with the
 * error recorded. */
int tg_layer_norm_layer_params(tg_layer_norm_layer *m, tg_params *p, const char *prefix);
/** Frees the layer and its weight and bias; NULL is a no-op. */
void tg_layer_norm_layer_free(tg_layer_norm_layer *m);

/* ---- attention scoring functions (the four of the seed blog post) ---------- */
/** Dot-product scores Q K^T: queries [B, Q, d] and keys [B, K, d] -> scores
 * [B, Q, K]; 2-D queries [Q, d] and keys [K, d] (one batch entry) give
 * [Q, K]. The result, a new tensor, lives in the current scope. NULL with an
 * error naming the function and the shapes for a NULL input, queries and
 * keys of different ranks (or not 2 or 3), different batch sizes or
 * different feature sizes ("score_dot: queries (2,3,4) and keys (2,5,6):
 * feature sizes 4 and 6 differ"). The other scoring functions take the same
 * shapes and report errors the same way. */
tg_tensor *tg_score_dot(tg_tensor *queries, tg_tensor *keys);
/** Scaled dot-product scores Q K^T / sqrt(d), shapes and errors as
 * tg_score_dot. The scaling keeps the scores' variance near 1 for
 * unit-variance inputs (Vaswani et al. 2017). */
tg_tensor *tg_score_scaled_dot(tg_tensor *queries, tg_tensor *keys);
/** General (bilinear) scores Q W K^T: queries [B, Q, dq], W [dq, dk], keys
 * [B, K, dk] -> [B, Q, K] (or 2-D, as tg_score_dot); dq and dk may differ.
 * NULL with the error recorded as tg_score_dot, or when W is NULL or not
 * [dq, dk]. */
tg_tensor *tg_score_general(tg_tensor *queries, tg_tensor *W, tg_tensor *keys);
/** Additive (Bahdanau) scores w_v^T tanh(W_q q + W_k k) for every query and
 * key: queries [B, Q, dq], keys [B, K, dk] -> [B, Q, K] (or 2-D, as
 * tg_score_dot), W_q [h, dq], W_k [h, dk], w_v [1, h] (Linear weights, no
 * bias, as d2l's AdditiveAttention). NULL with the error recorded as
 * tg_score_dot, or when a weight is NULL or of another shape. */
tg_tensor *tg_score_additive(tg_tensor *queries, tg_tensor *keys, tg_tensor *W_q, tg_tensor *W_k, tg_tensor *w_v);

/* ---- DotProductAttention ----------------------------------------------------- */
/** Which computation tg_dot_attention_forward uses (tg_dot_attention.path). */
typedef enum {
    TG_PATH_AUTO = 0, /**< the module's rule: fused, except below 64 keys with position terms or bf16 (the default) */
    TG_PATH_STORED,   /**< always the stored path: masked softmax, dropout, matmul */
    TG_PATH_FUSED     /**< the fused tg_attention whenever possible (not when recording or sparse) */
} tg_attention_path;
/** DotProductAttention(dropout), as d2l: softmax(Q K^T / sqrt(d)) V.
 * queries [B, Q, d], keys [B, K, d], values [B, K, v] -> [B, Q, v].
 * The forward picks its path itself (attention.c, one rule): the fused
 * tg_attention, which never stores the [B, Q, K] weights, unless it records
 * them, uses sparsemax, or (under TG_PATH_AUTO) has fewer than 64 keys and
 * position terms or bf16 products, where the stored path (masked softmax,
 * dropout, matmul) is faster. Both give the same values up to rounding and
 * the same dropout mask.
 * While recording (tg_dot_attention_record(m, true); off for a new module)
 * the weights of the last forward, before dropout as d2l keeps them, stay in
 * attention_weights [B, Q, K] until the scope of that forward ends;
 * otherwise attention_weights is NULL. */
typedef struct {
    tg_dropout_layer *dropout;    /**< dropout on the attention weights (owned) */
    tg_tensor *attention_weights; /**< [B, Q, K] weights of the last forward when recording, in its scope; else NULL */
    bool sparse;                  /**< sparsemax instead of softmax (false for a new module) */
    bool record;                  /**< keep attention_weights (forces the stored path) */
    tg_attention_path path;       /**< AUTO (the rule above); STORED or FUSED force one (tests, benchmarks) */
} tg_dot_attention;
/** Dot-product attention with dropout probability dropout on its weights,
 * whose dropout stream is forked from rng (NULL allowed, as
 * tg_dropout_layer_new). Not recording, softmax, TG_PATH_AUTO, training mode.
 * NULL with the error recorded for a dropout outside [0, 1] (named
 * "dropout") or no memory. */
tg_dot_attention *tg_dot_attention_new(tg_real dropout, tg_rng *rng);
/** queries [B, Q, d], keys [B, K, d], values [B, K, v] -> [B, Q, v], keys
 * hidden by mask (tg_mask) left out, in the current scope. NULL with an
 * error naming "dot_attention" and the shapes when the module or an input is
 * NULL, an input is not 3-D, the batch sizes or key counts differ, or the
 * feature sizes of queries and keys differ. */
tg_tensor *tg_dot_attention_forward(tg_dot_attention *m, tg_tensor *queries, tg_tensor *keys, tg_tensor *values,
                                    tg_mask mask);
/** The same with the position terms of pos (tg_attn_pos, autograd.h; NULL:
 * none) on either path: the fused op computes them on the fly, the stored
 * path adds them to the [B, Q, K] scores (and Shaw's value term to the
 * output) with public ops. Queries must be 3-D, [B h, Q, d] with B h a
 * multiple of pos->heads (0 means 1). Otherwise as tg_dot_attention_forward. */
tg_tensor *tg_dot_attention_forward_pos(tg_dot_attention *m, tg_tensor *queries, tg_tensor *keys, tg_tensor *values,
                                        tg_mask mask, const tg_attn_pos *pos);
/** Attention over h heads read in place (the multi-head layout): queries
 * [B, Q, h d], keys [B, K, h d], values [B, K, h v] -> [B, Q, h v], head j
 * of each being columns j d.. (j v..) of every row, as d2l's transpose_qkv
 * splits them. mask and pos are those of the [B h, Q, K] scores (head j of
 * batch entry b is row b h + j, so lengths repeat per head). On the fused
 * path (the rule of tg_dot_attention) one tg_attention_heads reads the heads
 * where the projections wrote them and writes the output where the output
 * projection reads it; otherwise the heads are split into [B h, n, d]
 * copies for the stored path, whose recorded weights are [B h, Q, K]. The
 * same values either way, and as tg_dot_attention_forward_pos on the split
 * heads. NULL with an error naming "dot_attention" for bad shapes. */
tg_tensor *tg_dot_attention_forward_heads(tg_dot_attention *m, tg_tensor *queries, tg_tensor *keys, tg_tensor *values,
                                          int heads, tg_mask mask, const tg_attn_pos *pos);
/** Self-attention on a fused projection qkv [B, T, 3 h d] (per row: the h
 * heads of q, then of k, then of v, as nanoGPT's c_attn writes them) ->
 * [B, T, h d]; otherwise as tg_dot_attention_forward_heads (the fused path:
 * tg_attention_qkv, no split copies). */
tg_tensor *tg_dot_attention_forward_qkv(tg_dot_attention *m, tg_tensor *qkv, int heads, tg_mask mask,
                                        const tg_attn_pos *pos);
/** Recording on or off (see tg_dot_attention); either way it forgets the
 * weights recorded so far. NULL is a no-op. */
void tg_dot_attention_record(tg_dot_attention *m, bool on);
/** Training (dropout on) or eval mode; NULL is a no-op. */
void tg_dot_attention_train(tg_dot_attention *m, bool on);
/** Frees the module and its dropout layer; NULL is a no-op. */
void tg_dot_attention_free(tg_dot_attention *m);

/* ---- AdditiveAttention ------------------------------------------------------- */
/** AdditiveAttention(key_size, query_size, num_hiddens, dropout), as d2l:
 * softmax(w_v^T tanh(W_q q + W_k k)) V (tg_score_additive, masked softmax,
 * dropout, matmul). */
typedef struct {
    tg_linear *W_k,               /**< key projection [num_hiddens, key_size], no bias, as d2l */
        *W_q,                     /**< query projection [num_hiddens, query_size], no bias */
        *w_v;                     /**< score vector [1, num_hiddens], no bias */
    tg_dropout_layer *dropout;    /**< dropout on the attention weights */
    tg_tensor *attention_weights; /**< [B, Q, K] weights of the last forward (before dropout), in its scope */
} tg_additive_attention;
/** Additive attention for keys of key_size and queries of query_size
 * features through num_hiddens hidden units, dropout probability dropout,
 * its weights drawn from rng (W_k, W_q, w_v in that order). NULL with the
 * error recorded for a non-positive size or NULL rng (from Linear:
 * "linear: ..."), a bad dropout or no memory. */
tg_additive_attention *tg_additive_attention_new(int key_size, int query_size, int num_hiddens, tg_real dropout,
                                                 tg_rng *rng);
/** queries [B, Q, query_size], keys [B, K, key_size], values [B, K, v]
 * -> [B, Q, v] in the current scope; the weights are always kept in
 * attention_weights. NULL with an error naming "additive_attention" and the
 * shapes on a NULL module or input, a rank other than 3, differing batch
 * sizes or key counts, or feature sizes other than the module's. */
tg_tensor *tg_additive_attention_forward(tg_additive_attention *m, tg_tensor *queries, tg_tensor *keys,
                                         tg_tensor *values, tg_mask mask);
/** Appends "<prefix>.W_k.weight", "<prefix>.W_q.weight" and
 * "<prefix>.w_v.weight" to p. 0, or -1 with the error recorded. */
int tg_additive_attention_params(tg_additive_attention *m, tg_params *p, const char *prefix);
/** Training (dropout on) or eval mode; NULL is a no-op. */
void tg_additive_attention_train(tg_additive_attention *m, bool on);
/** Frees the module, its Linear layers and its dropout; NULL is a no-op. */
void tg_additive_attention_free(tg_additive_attention *m);

/* ---- positions --------------------------------------------------------------- */
/** Position information: an absolute table added to the input, or a term
 * inside every attention. The table: FIXED, LEARNED (NONE: nothing). Inside
 * attention: RELATIVE, Shaw et al. 2018's learned relative_k, relative_v;
 * ROPE, Su et al. 2021's rotation of q and k; ALIBI, Press et al. 2022's
 * linear bias; a term inside attention sees offsets only and so runs on
 * sequences of any length.
 * One enum for every attention module: the encoder takes all six, MHA's
 * position term the three inside attention, the decoder (decoder.h) all
 * but the fixed table. Each kind is a row (tg_pe_rule, below: where it
 * acts, which models take it, its parameters, how the report describes
 * it); a registered row's kind is a value past the enum's (tg_pe_register). */
typedef enum {
    TG_PE_FIXED,    /**< "fixed": the sinusoidal table (tg_posenc_new) added to the input */
    TG_PE_LEARNED,  /**< "learned": a trainable table (tg_posenc_learned_new) added to the input */
    TG_PE_NONE,     /**< "none": no position information */
    TG_PE_RELATIVE, /**< "relative": Shaw et al.'s learned tables of clipped offsets, inside attention */
    TG_PE_ROPE,     /**< "rope": rotary embedding of q and k (tg_rope), inside attention */
    TG_PE_ALIBI     /**< "alibi": a linear bias on the scores per head (tg_alibi_slopes), inside attention */
} tg_pe_kind;
/** The name of kind, as the programs' flags and the checkpoints' metadata
 * spell it: "fixed", "learned", "none", "relative", "rope", "alibi" (its
 * row's, tg_pe_rule below: a registered kind's too); NULL (and no error)
 * for a value without a row. A static string. */
const char *tg_pe_kind_name(tg_pe_kind kind);
/** The kind named name (any row's) into *out: 0, or -1 with an error
 * listing the names ("position kind 'x': expected fixed, learned, ...") when
 * name is NULL or not one of them (*out then untouched). Case-sensitive. */
int tg_pe_kind_parse(const char *name, tg_pe_kind *out);
/** The checks every module makes of its kind, once: a kind with a row
 * (tg_pe_rule_of), and the head size its row needs (RoPE: even, as it
 * rotates pairs of features). 0, or -1 with "<op>: ..." recorded. */
int tg_pe_check(const char *op, tg_pe_kind kind, int head_dim);
/** The position term inside one attention layer, one object for MHA and
 * the decoder's blocks: set up, applied to q and k (or handed to the
 * attention op as a tg_attn_pos) and freed in one place (src/nn/position.c).
 * kind is TG_PE_RELATIVE, TG_PE_ROPE or TG_PE_ALIBI; any other value means
 * none (a new module). The fields are read-only for users; the tensors and
 * slopes are owned by the module that holds the term. */
typedef struct {
    tg_pe_kind kind;       /**< RELATIVE, ROPE or ALIBI; any other value: no term */
    int clip;              /**< RELATIVE: offsets clipped to [-clip, clip] */
    tg_tensor *relative_k, /**< RELATIVE: a^K [2 clip + 1, head size], shared by the heads; else NULL */
        *relative_v;       /**< RELATIVE: a^V [2 clip + 1, head size], shared by the heads; else NULL */
    tg_real *alibi;        /**< ALIBI: the heads' slopes, one per head (tg_alibi_slopes); else NULL */
    bool rope_half;        /**< ROPE: GPT-NeoX's pairing (i, i + d/2) instead of the paper's */
} tg_position;

/* ---- MultiHeadAttention ------------------------------------------------------ */
/** MultiHeadAttention, as d2l's:
 * MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_o with
 * head_i = Attention(Q W_q_i, K W_k_i, V W_v_i).
 * W_q [num_hiddens, query_size], W_k [num_hiddens, key_size],
 * W_v [num_hiddens, value_size], W_o [num_hiddens, num_hiddens];
 * heads split by reshaping (B, n, H) -> (B*h, n, H/h) (row b*h + j is head j
 * of batch entry b); valid lengths (given per batch row in mask) repeated
 * for each head; scores scaled by sqrt(H/h). Self-attention is
 * forward(X, X, X). */
typedef struct {
    int num_heads,               /**< h */
        num_hiddens;             /**< H, a multiple of h; each head has H/h features */
    tg_linear *W_q,              /**< query projection [H, query_size] */
        *W_k,                    /**< key projection [H, key_size] */
        *W_v,                    /**< value projection [H, value_size] */
        *W_o;                    /**< output projection [H, H] */
    tg_dot_attention *attention; /**< the heads' scaled dot-product attention, with the dropout */
    tg_position pos;             /**< the position term (tg_mha_set_position); none for a new module */
} tg_mha;
/** Multi-head attention of num_heads heads over num_hiddens features, for
 * keys, queries and values of key_size, query_size and value_size features,
 * dropout probability dropout on the weights, the four projections with
 * biases when bias is true, drawn from rng (in d2l's order: W_q, W_k, W_v,
 * W_o). NULL with the error recorded when num_heads or num_hiddens is not
 * positive or num_heads does not divide num_hiddens ("mha: ..."), for a bad
 * size or NULL rng (from Linear), a bad dropout, or no memory. */
tg_mha *tg_mha_new(int key_size, int query_size, int value_size, int num_hiddens, int num_heads, tg_real dropout,
                   bool bias, tg_rng *rng);
/** queries [B, Q, query_size], keys [B, K, key_size], values [B, K,
 * value_size] -> [B, Q, num_hiddens] in the current scope, with the
 * position term if one is set (queries and keys at positions 0..). mask:
 * lens per batch row (lens_ndim 1, [B]) or per query (2, [B, Q]), and/or
 * causal. NULL with an error naming "mha" and the shapes on a NULL module or
 * input, a rank other than 3, differing batch sizes or key counts, or a bad
 * mask; a wrong feature size is reported by the projection ("linear: ..."). */
tg_tensor *tg_mha_forward(tg_mha *m, tg_tensor *queries, tg_tensor *keys, tg_tensor *values, tg_mask mask);
/** Appends the projections' parameters ("<prefix>.W_q.weight",
 * "<prefix>.W_q.bias" with biases, then W_k, W_v, W_o) and, with a relative
 * position term, "<prefix>.relative_k" and "<prefix>.relative_v" to p. 0, or
 * -1 with the error recorded. */
int tg_mha_params(tg_mha *m, tg_params *p, const char *prefix);
/** Gives every head a position term inside attention, with query i and key
 * j of a forward at positions i and j:
 *
 *     TG_PE_RELATIVE  score += q_i . relative_k[r] / sqrt(H/h), out_i += sum_j
 *                     w_ij relative_v[r], r = clip(j - i, -clip, clip) + clip;
 *                     two parameters [2 clip + 1, H/h] drawn N(0, 1/(H/h))
 *                     from rng (clip in [1, 4096], rng not NULL), listed by
 *                     tg_mha_params as relative_k, relative_v
 *     TG_PE_ROPE      q and k rotated by tg_rope (base 10000; rope_half picks
 *                     the NeoX pairing), no parameter; H/h must be even
 *     TG_PE_ALIBI     score += -m_h |i - j| with tg_alibi_slopes(h): with a
 *                     causal mask the paper's -m_h (i - j), without one (an
 *                     encoder) its symmetric, bidirectional form
 *     TG_PE_FIXED, TG_PE_LEARNED, TG_PE_NONE: none (they live outside attention).
 *
 * clip is read for RELATIVE only, rope_half for ROPE only, rng for RELATIVE
 * only (may be NULL otherwise). Once, on a new module: a module that has a
 * term already refuses another. 0, or -1 with "mha_set_position: ..."
 * recorded and the module unchanged. */
int tg_mha_set_position(tg_mha *m, tg_pe_kind pe, int clip, bool rope_half, tg_rng *rng);
/** Training (dropout on) or eval mode; NULL is a no-op. */
void tg_mha_train(tg_mha *m, bool on);
/** Recording the attention weights: while on, each forward keeps the weights
 * of every head (off for a new module; recording forces the stored path).
 * NULL is a no-op. */
void tg_mha_record_attention(tg_mha *m, bool on);
/** The recorded weights of one head of the last forward, [B, Q, K], as a new
 * tensor in the current scope (call it before that forward's scope ends: the
 * weights it copies live there; not part of the graph). NULL with the error
 * recorded for a NULL module, when not recording, before a forward, or for a
 * head outside [0, num_heads). */
tg_tensor *tg_mha_attention_weights(const tg_mha *m, int head);
/** Frees the module, its projections, attention and position term; NULL is
 * a no-op. */
void tg_mha_free(tg_mha *m);

/* ---- positional encodings ---------------------------------------------------- */
/** Positional encoding: output dropout(X + P[:T]) for X [B, T, d].
 * Fixed: P[i, 2j] = sin(i / 10000^(2j/d)), P[i, 2j+1] = cos(i / 10000^(2j/d))
 * (an odd d ends with a sine column), computed once. Learned: P is a
 * trainable table initialised N(0, 0.02^2). T > max_len is an error. */
typedef struct {
    int max_len,               /**< rows of P: the longest sequence T */
        num_hiddens;           /**< d, columns of P */
    bool learned;              /**< true: P is a trainable parameter (tg_posenc_learned_new) */
    tg_tensor *P;              /**< [max_len, d], persistent; a parameter (requires grad) when learned */
    tg_dropout_layer *dropout; /**< applied to X + P[:T] */
} tg_posenc;
/** The fixed (sinusoidal) encoding, as d2l's PositionalEncoding(num_hiddens,
 * dropout, max_len); max_len 0 means d2l's 1000. The table draws nothing:
 * rng only seeds the dropout stream and may be NULL (as tg_dropout_layer_new).
 * NULL with "posenc: ..." recorded for a negative max_len, a non-positive
 * num_hiddens or a bad dropout, or when memory runs out. */
tg_posenc *tg_posenc_new(int num_hiddens, tg_real dropout, int max_len, tg_rng *rng);
/** The learned encoding (d2l's exercise): P drawn N(0, 0.02^2) from rng, as
 * BERT and GPT-2 do; the same arguments and checks as tg_posenc_new, errors
 * named "posenc_learned", and rng must not be NULL. */
tg_posenc *tg_posenc_learned_new(int num_hiddens, tg_real dropout, int max_len, tg_rng *rng);
/** X [..., T, d] (rank >= 2, d = num_hiddens) -> dropout(X + P[:T]), the
 * same shape, in the current scope; only rows 0..T-1 of a learned P receive
 * gradient. NULL with "posenc: ..." recorded for a NULL module or X, a wrong
 * shape, or T > max_len ("posenc: sequence length 1200 > max_len 1000"). */
tg_tensor *tg_posenc_forward(tg_posenc *m, tg_tensor *X);
/** Appends "<prefix>.P" to p when learned; the fixed table is not a
 * parameter, and nothing is appended. 0, or -1 with the error recorded. */
int tg_posenc_params(tg_posenc *m, tg_params *p, const char *prefix);
/** Training (dropout on) or eval mode; NULL is a no-op. */
void tg_posenc_train(tg_posenc *m, bool on);
/** Frees the module, its table and its dropout; NULL is a no-op. */
void tg_posenc_free(tg_posenc *m);

/* ---- position kinds: one row each --------------------------------------------- */
/** Where a position kind acts. */
typedef enum {
    TG_PE_AT_NOTHING, /**< nowhere ("none") */
    TG_PE_AT_INPUT,   /**< a table P [max_len, d] added to the embeddings: X + P[:T] */
    TG_PE_AT_SCORES,  /**< terms in every attention's scores (tg_attn_pos: RELATIVE's tables, ALiBi's slopes) */
    TG_PE_AT_QK       /**< q and k turned before the scores (RoPE) */
} tg_pe_where;
/** The models a kind is accepted by (tg_pe_rule.models, a bit set). */
#define TG_PE_ENCODER 1u /**< tg_encoder (and MHA's position term, for the kinds inside attention) */
#define TG_PE_DECODER 2u /**< tg_decoder */
/** What the set-up of a position term inside attention gets (tg_pe_rule.init). */
typedef struct {
    int heads;      /**< the layer's heads */
    int head_dim;   /**< features per head */
    int clip;       /**< RELATIVE: offsets clipped to [-clip, clip] */
    bool rope_half; /**< ROPE: GPT-NeoX's pairing */
    tg_real std;    /**< the std of drawn tables (RELATIVE) */
    tg_rng *rng;    /**< where tables are drawn from (NULL where nothing is drawn) */
} tg_position_args;
/** What a model's positions are, for the run report (tg_pe_plots), whatever
 * the model: its kind and what that kind uses. */
typedef struct {
    tg_pe_kind kind;        /**< the model's position kind */
    const char *table_name; /**< INPUT: the table's name in the model ("pos_encoding.P", "transformer.wpe.weight") */
    const tg_tensor *table; /**< INPUT: the table [>= T, d] (rows 0..T-1 shown); else NULL */
    const tg_position *pos; /**< inside attention: the first layer's term; else NULL */
    int T;                  /**< the positions shown, 0..T-1 */
    int heads;              /**< the attention's heads */
    int head_dim;           /**< features per head */
    bool beside_fixed;      /**< a learned table: the fixed sinusoidal one beside it (the chapter's comparison) */
} tg_pe_view;
/** One plot of the report's "positions" part: a heatmap, or lines over the
 * offsets 0..cols-1. */
typedef struct {
    bool lines;         /**< false: a heatmap of rows x cols values; true: rows lines over offsets 0..cols-1 */
    char title[200];    /**< the plot's title */
    const char *xlabel; /**< the x axis (lines: the offsets' label is the report's own) */
    const char *ylabel; /**< the y axis */
    const char *series; /**< lines: each line's name, a printf format given the 1-based line ("head %d") */
    int rows;           /**< heatmap rows, or the number of lines */
    int cols;           /**< heatmap columns, or the points of a line */
    double *data;       /**< rows x cols values, row-major; malloc'd (tg_pe_plots_free) */
} tg_pe_plot;
/** The most plots a row's report function gives. */
#define TG_PE_MAX_PLOTS 4
/** A position kind: one row of the table that the encoder, MHA, the decoder,
 * the programs' --pe flags (tg_pe_kind_parse) and checkpoints' metadata
 * (tg_pe_kind_name) read. Which functions a row needs follows from where it
 * acts; tg_pe_rule_check says which is missing. A row lives as long as the
 * program (static). */
typedef struct {
    const char *name;   /**< "fixed", "learned", ...: flags, metadata (1-31 of [a-z0-9_-]) */
    const char *about;  /**< how the report and --help describe it, one line */
    tg_pe_where where;  /**< where it acts */
    unsigned models;    /**< TG_PE_ENCODER | TG_PE_DECODER: which models accept it */
    const char *params; /**< its parameters as a model names them ("" none): the report, the docs */
    /** INPUT, for an encoder: its table as a module (tg_posenc: X + P[:T],
     * dropout); std: tg_encoder_config.learned_pe_std. */
    tg_posenc *(*encoder_table)(int d, tg_real dropout, int max_len, tg_real std, tg_rng *rng);
    /** INPUT, for a decoder: its table [block_size, d] as an embedding
     * (nanoGPT's wpe), std: GPT-2's 0.02. */
    tg_embedding *(*decoder_table)(int block_size, int d, tg_real std, tg_rng *rng);
    /** SCORES, QK: the head size it needs (NULL: any); 0, or -1 with
     * "<op>: ..." recorded. */
    int (*check)(const char *op, int head_dim);
    /** SCORES, QK: sets up *t's fields (t->kind is set); 0, or -1 with
     * "<op>: ..." recorded (whatever it allocated left in *t to free). */
    int (*init)(tg_position *t, const char *op, const tg_position_args *a);
    /** SCORES, QK: a forward's terms from queries at positions offset..:
     * fills *terms and returns it (SCORES), or turns *q and *k split into
     * heads [B h, T, hd] and returns NULL (QK; q NULL: nothing to turn). */
    const tg_attn_pos *(*apply)(const tg_position *t, int offset, tg_tensor **q, tg_tensor **k, tg_attn_pos *terms);
    /** QK: turns the first `rotated` of `heads` heads of x [B, T, heads hd]
     * (the projections' layout) at positions offset..; x itself for SCORES. */
    tg_tensor *(*rotate_heads)(const tg_position *t, tg_tensor *x, int heads, int rotated, int offset);
    /** What the run report shows of a model's positions of this kind
     * (tg_pe_plots): fills plots[0..n) (n at most TG_PE_MAX_PLOTS, data
     * malloc'd) and returns n, or -1 with the error recorded (nothing left
     * allocated). NULL: an INPUT kind's table as a heatmap titled with the
     * row's name and about line; nothing for the others. */
    int (*report)(const tg_pe_view *v, tg_pe_plot *plots);
} tg_pe_rule;
/** The row of kind: a built-in kind (the enum) or a registered one; NULL
 * (no error recorded) for any other value. */
const tg_pe_rule *tg_pe_rule_of(tg_pe_kind kind);
/** 0 when row has what a row acting where it acts needs, or -1 with
 * "pe_rule: <name>: <what is missing>" recorded. */
int tg_pe_rule_check(const tg_pe_rule *row);
/** Adds row to the table (after the built-in kinds, at most 16 in all) and
 * its kind into *kind: a value past the enum's. Call it before threads read
 * the table (no lock). 0, or -1 with the error recorded: the row fails
 * tg_pe_rule_check, its name is taken, the table is full. */
int tg_pe_register(const tg_pe_rule *row, tg_pe_kind *kind);
/** The number of kinds (built-in and registered): kinds 0..count-1 have rows. */
int tg_pe_kind_count(void);
/** What the run report shows of v (its "positions" part), from v->kind's
 * row: the row's report function, or without one an INPUT kind's table
 * (v->table) as a heatmap titled "<name> positions (<about>): ..." and
 * nothing for the others. Fills plots (room for TG_PE_MAX_PLOTS) and
 * returns their number; -1 with the error recorded for a kind without a
 * row, a view without what its kind uses, or no memory. Free the plots'
 * data with tg_pe_plots_free. */
int tg_pe_plots(const tg_pe_view *v, tg_pe_plot *plots);
/** Frees the data of plots[0..n); NULL is a no-op. */
void tg_pe_plots_free(tg_pe_plot *plots, int n);

/* ---- Transformer encoder pieces, as d2l -------------------------------------- */
/** PositionWiseFFN: dense2(relu(dense1(X))), the same MLP at every
 * position. */
typedef struct {
    tg_linear *dense1, /**< [ffn_hiddens, num_hiddens], with bias */
        *dense2;       /**< [num_outputs, ffn_hiddens], with bias */
} tg_ffn;
/** A position-wise FFN num_hiddens -> ffn_hiddens -> num_outputs, weights
 * from rng. NULL with "ffn: sizes ... must be positive" recorded, for a NULL
 * rng (from Linear) or no memory. It has no dropout, and so no _train. */
tg_ffn *tg_ffn_new(int num_hiddens, int ffn_hiddens, int num_outputs, tg_rng *rng);
/** X [..., num_hiddens] -> [..., num_outputs] in the current scope. NULL for
 * a NULL module ("ffn_forward: NULL module"); a NULL X or a wrong last axis
 * is reported by dense1 ("linear: ..."). */
tg_tensor *tg_ffn_forward(tg_ffn *m, tg_tensor *X);
/** Appends "<prefix>.dense1.weight", "<prefix>.dense1.bias",
 * "<prefix>.dense2.weight" and "<prefix>.dense2.bias" to p. 0, or -1 with
 * the error recorded. */
int tg_ffn_params(tg_ffn *m, tg_params *p, const char *prefix);
/** Frees the module and its two Linear layers; NULL is a no-op. */
void tg_ffn_free(tg_ffn *m);

/** AddNorm: ln(dropout(Y) + X), the residual connection then LayerNorm.
 * Dropout is on the sublayer output Y only, so the residual path X stays
 * exact. */
typedef struct {
    tg_dropout_layer *dropout; /**< dropout on Y */
    tg_layer_norm_layer *ln;   /**< LayerNorm over dim features, eps 1e-5 */
} tg_addnorm;
/** An AddNorm over dim features with dropout probability dropout (stream
 * forked from rng; NULL allowed, as tg_dropout_layer_new). NULL with "addnorm:
 * ..." recorded for a non-positive dim or a bad dropout, or no memory. */
tg_addnorm *tg_addnorm_new(int dim, tg_real dropout, tg_rng *rng);
/** X and Y of one shape [..., dim] -> ln(dropout(Y) + X), the same shape,
 * in the current scope. NULL with the error recorded for a NULL module or
 * input, shapes that differ ("addnorm: X (2,3,8) and Y (2,3,4) differ in
 * shape") or a last axis other than dim ("layernorm: ..."). */
tg_tensor *tg_addnorm_forward(tg_addnorm *m, tg_tensor *X, tg_tensor *Y);
/** Appends "<prefix>.ln.weight" and "<prefix>.ln.bias" to p. 0, or -1 with
 * the error recorded. */
int tg_addnorm_params(tg_addnorm *m, tg_params *p, const char *prefix);
/** Training (dropout on) or eval mode; NULL is a no-op. */
void tg_addnorm_train(tg_addnorm *m, bool on);
/** Frees the module, its dropout and its LayerNorm; NULL is a no-op. */
void tg_addnorm_free(tg_addnorm *m);

/** TransformerEncoderBlock: Y = addnorm1(X, mha(X, X, X));
 * out = addnorm2(Y, ffn(Y)). */
typedef struct {
    tg_mha *attention;    /**< self-attention, num_hiddens -> num_hiddens */
    tg_addnorm *addnorm1, /**< after the attention */
        *addnorm2;        /**< after the FFN */
    tg_ffn *ffn;          /**< num_hiddens -> ffn_hiddens -> num_hiddens */
} tg_encoder_block;
/** An encoder block of num_hiddens features, num_heads heads, an FFN of
 * ffn_hiddens hidden units and dropout probability dropout everywhere;
 * use_bias gives the attention's projections biases (the FFN always has
 * them). Weights from rng, made in the order attention, addnorm1, ffn,
 * addnorm2. NULL with "encoder_block: ..." recorded for a non-positive size,
 * num_heads not dividing num_hiddens or a bad dropout; NULL also for a NULL
 * rng (from Linear) or no memory. */
tg_encoder_block *tg_encoder_block_new(int num_hiddens, int ffn_hiddens, int num_heads, tg_real dropout, bool use_bias,
                                       tg_rng *rng);
/** X [B, T, num_hiddens] -> the same shape in the current scope; mask as
 * for tg_mha_forward (lengths per row). NULL for a NULL module
 * ("encoder_block_forward: NULL module"); a bad X or mask is reported by the
 * sub-module that sees it ("mha: ..."). */
tg_tensor *tg_encoder_block_forward(tg_encoder_block *m, tg_tensor *X, tg_mask mask);
/** Appends the block's parameters under "<prefix>.attention",
 * "<prefix>.addnorm1", "<prefix>.ffn" and "<prefix>.addnorm2" (as
 * tg_mha_params, tg_addnorm_params and tg_ffn_params name them) to p. 0, or
 * -1 with the error recorded. */
int tg_encoder_block_params(tg_encoder_block *m, tg_params *p, const char *prefix);
/** Training (every dropout on) or eval mode; NULL is a no-op. */
void tg_encoder_block_train(tg_encoder_block *m, bool on);
/** Frees the block and its sub-modules; NULL is a no-op. */
void tg_encoder_block_free(tg_encoder_block *m);

/** The configuration of a Transformer encoder (tg_encoder_new copies it).
 * Start from a zeroed struct: every 0 below picks the documented default. */
typedef struct {
    int vocab_size,  /**< token ids 0..vocab_size-1; must be positive */
        num_hiddens, /**< d, the model width; positive, a multiple of num_heads */
        ffn_hiddens, /**< hidden units of each block's FFN; positive */
        num_heads,   /**< attention heads per block; positive */
        num_layers,  /**< encoder blocks; 0 or more (0: embedding and positions only) */
        max_len;     /**< longest sequence of a position table; 0 means d2l's 1000 (unused by the attention kinds) */
    tg_real dropout; /**< dropout probability of every dropout layer, in [0, 1] */
    tg_pe_kind pe;   /**< the position information (any of the six kinds) */
    bool use_bias;   /**< biases in the attention projections (the FFNs always have them) */
    /** Std of the embedding init. 0 means 1/sqrt(d), so that the scaled
     * embedding E * sqrt(d) has unit size, as the original Transformer; 1 is
     * PyTorch's nn.Embedding default, which drowns the positional signal. */
    tg_real embedding_std;
    /** Std of a learned positional table's init. 0 means 1, the scale of the
     * scaled embeddings it is added to; 0.02 is the module's own default. */
    tg_real learned_pe_std;
    /** TG_PE_RELATIVE: offsets clipped to [-relative_clip, relative_clip];
     * 0 means 16 (Shaw et al.'s k); otherwise in [1, 4096]. */
    int relative_clip;
} tg_encoder_config;

/** TransformerEncoder, as d2l: pos_encoding(embedding(tokens) * sqrt(d))
 * -> blocks. With pe RELATIVE, ROPE or ALIBI there is no table: the blocks'
 * attention carries the positions (tg_mha_set_position), any T runs, and
 * max_len only sizes a table that is not made. */
typedef struct {
    tg_encoder_config cfg;     /**< the configuration, with max_len, relative_clip and embedding_std resolved */
    tg_embedding *embedding;   /**< [vocab_size, num_hiddens] token embedding */
    tg_posenc *pos_encoding;   /**< NULL for TG_PE_NONE and the attention kinds (then dropout alone) */
    tg_dropout_layer *dropout; /**< used only when pos_encoding is NULL */
    tg_encoder_block **blocks; /**< num_layers blocks (NULL when num_layers is 0) */
} tg_encoder;
/** An encoder as cfg describes it (copied), weights drawn from rng. NULL
 * with "encoder: ..." recorded for a NULL cfg or rng, a non-positive
 * vocab_size, a negative num_layers or max_len, bad block sizes or dropout,
 * an unknown pe or RoPE with an odd head size, or a negative std; NULL with
 * the sub-module's error for a bad relative_clip or no memory. */
tg_encoder *tg_encoder_new(const tg_encoder_config *cfg, tg_rng *rng);
/** tokens [B, T] (a plain row-major int array of ids in [0, vocab_size)) ->
 * [B, T, num_hiddens] in the current scope; mask as for attention (lengths
 * per row). NULL with the error recorded for a NULL module or tokens
 * ("encoder_forward: ..."), B or T not positive ("encoder: ..."), an id
 * outside the vocabulary ("embedding: ..."), T > max_len with a position
 * table ("posenc: ..."), or a bad mask ("mha: ..."). */
tg_tensor *tg_encoder_forward(tg_encoder *m, const int *tokens, int B, int T, tg_mask mask);
/** Appends "<prefix>.embedding.weight", "<prefix>.pos_encoding.P" (learned
 * table only) and each block's parameters under "<prefix>.blocks.<i>" (as
 * tg_encoder_block_params) to p. 0, or -1 with the error recorded. */
int tg_encoder_params(tg_encoder *m, tg_params *p, const char *prefix);
/** The generators of every dropout (for a training state): "dropout" or
 * "pos_encoding", then "blocks.<i>.attention", ".addnorm1", ".addnorm2".
 * The generators stay owned by the encoder. 0, or -1 with the error
 * recorded (a NULL module or list, or a list that is full: TG_RNGS_MAX). */
int tg_encoder_rngs(tg_encoder *m, tg_rngs *out);
/** Training (every dropout on) or eval mode, for every sub-module; NULL is
 * a no-op. */
void tg_encoder_train(tg_encoder *m, bool on);
/** tg_mha_record_attention on every block: while on, a forward keeps the
 * weights of every layer and head. NULL is a no-op. */
void tg_encoder_record_attention(tg_encoder *m, bool on);
/** The recorded weights of head `head` of block `layer`, [B, T, T], as
 * tg_mha_attention_weights (a new tensor in the current scope; call it
 * before the forward's scope ends). NULL with the error recorded for a NULL
 * module, a layer outside [0, num_layers), or as tg_mha_attention_weights. */
tg_tensor *tg_encoder_attention_weights(const tg_encoder *m, int layer, int head);
/** Frees the encoder and all its sub-modules; NULL is a no-op. */
void tg_encoder_free(tg_encoder *m);

/* ---- losses ------------------------------------------------------------------ */
/** Mean squared error mean((pred - target)^2), as
 * torch.nn.functional.mse_loss with reduction "mean": a scalar (shape ())
 * in the current scope. The shapes must match exactly (no broadcasting);
 * NULL with "mse_loss: pred ... and target ... differ in shape" recorded
 * otherwise, or for a NULL input. tg_cross_entropy (autograd.h) is the
 * classification loss. */
tg_tensor *tg_mse_loss(tg_tensor *pred, tg_tensor *target);

/* ---- sequence layers: Conv1d, RNN, GRU (the chapter's comparison) -------------
 * All take batch-first token sequences [B, n, in] and return [B, n, out],
 * with PyTorch's parameter names and layouts so weights move both ways. */
/** Conv1d over a token sequence: weight [out, in, k], bias [out] as
 * torch.nn.Conv1d applied to x.transpose(1, 2); stride 1, 'same' zero
 * padding (left (k-1)*dil/2 rounded down, right the rest, as torch's
 * padding='same'), dilation dil. Init U(-1/sqrt(fan), 1/sqrt(fan)) with
 * fan = in*k, as torch. Batch-first: [B, n, in] -> [B, n, out]. */
typedef struct {
    int in,            /**< input features (channels) */
        out,           /**< output features (channels) */
        k,             /**< kernel size */
        dilation;      /**< spacing of the kernel's taps */
    tg_tensor *weight, /**< [out, in, k], persistent, requires grad */
        *bias;         /**< [out]; NULL when made without bias */
} tg_conv1d;
/** A Conv1d of in to out features, kernel size k, the given dilation, with
 * a bias when bias is true, weights from rng. NULL with "conv1d: ... must be
 * positive" recorded for a non-positive size, or for a NULL rng or no
 * memory. */
tg_conv1d *tg_conv1d_new(int in, int out, int k, int dilation, bool bias, tg_rng *rng);
/** x [B, n, in] -> [B, n, out] in the current scope (as im2col and one
 * GEMM). NULL with "conv1d: input <shape>, expected [B, n, in]" recorded
 * for another shape, or for a NULL module or x. */
tg_tensor *tg_conv1d_forward(tg_conv1d *m, tg_tensor *x);
/** Appends "<prefix>.weight" and, with a bias, "<prefix>.bias" to p. 0, or
 * -1 with the error recorded ("conv1d_params: NULL argument" for a NULL
 * module or list). */
int tg_conv1d_params(tg_conv1d *m, tg_params *p, const char *prefix);
/** Frees the layer and its weight and bias; NULL is a no-op. */
void tg_conv1d_free(tg_conv1d *m);

/** The most layers an RNN or GRU can have (num_layers in 1..TG_RNN_MAX_LAYERS). */
#define TG_RNN_MAX_LAYERS 16
/** A stacked recurrent layer: RNN (Elman, tanh) or GRU as torch.nn.RNN /
 * torch.nn.GRU with batch_first=True: weight_ih_l{L} [G*H, in_L],
 * weight_hh_l{L} [G*H, H], bias_ih_l{L}, bias_hh_l{L} [G*H], G = 1 (RNN)
 * or 3 (GRU, gates r, z, n in torch's order), in_L the input size for layer
 * 0 and H above it. Always with biases. The forward returns the last
 * layer's outputs at every step; backward runs through time over the
 * unrolled graph. Init U(-1/sqrt(H), 1/sqrt(H)), as torch. */
typedef struct {
    int input_size,                     /**< features of x */
        hidden_size,                    /**< H, features of the state and of the output */
        num_layers,                     /**< stacked layers, 1..TG_RNN_MAX_LAYERS */
        gates;                          /**< gates: 1 RNN, 3 GRU */
    tg_tensor *w_ih[TG_RNN_MAX_LAYERS], /**< weight_ih_l{L}: [G*H, in_L] per layer; NULL past num_layers */
        *w_hh[TG_RNN_MAX_LAYERS];       /**< weight_hh_l{L}: [G*H, H] per layer; NULL past num_layers */
    tg_tensor *b_ih[TG_RNN_MAX_LAYERS], /**< bias_ih_l{L}: [G*H] per layer; NULL past num_layers */
        *b_hh[TG_RNN_MAX_LAYERS];       /**< bias_hh_l{L}: [G*H] per layer; NULL past num_layers */
} tg_rnn;
/** A GRU: the same struct as tg_rnn, with gates 3 (made by tg_gru_new and
 * used with the tg_gru_ calls). */
typedef tg_rnn tg_gru;
/** An Elman RNN (tanh) of num_layers layers, input_size inputs and
 * hidden_size state, weights from rng (in state_dict order). NULL with
 * "rnn: ..." recorded for a non-positive size, num_layers outside
 * 1..TG_RNN_MAX_LAYERS, a NULL rng or no memory. Free with tg_rnn_free. */
tg_rnn *tg_rnn_new(int input_size, int hidden_size, int num_layers, tg_rng *rng);
/** x [B, n, input_size] (n >= 1) -> the last layer's outputs [B, n,
 * hidden_size] in the current scope, from a zero h0; h_n is not returned.
 * NULL with "rnn: ..." recorded for another shape or a module made by
 * tg_gru_new, or for a NULL module or x. */
tg_tensor *tg_rnn_forward(tg_rnn *m, tg_tensor *x);
/** torch's (output, h_n) = rnn(x, h0): h0 [num_layers, B, H] or NULL (zero),
 * and, when h_n is not NULL, the last step's state of every layer in *h_n
 * [num_layers, B, H] (in the current scope, like the output; NULL on
 * failure). Gradients flow into h0 and from h_n. NULL with an error naming
 * the shapes. */
tg_tensor *tg_rnn_forward_state(tg_rnn *m, tg_tensor *x, tg_tensor *h0, tg_tensor **h_n);
/** Appends "<prefix>.weight_ih_l0", "<prefix>.weight_hh_l0",
 * "<prefix>.bias_ih_l0", "<prefix>.bias_hh_l0", then layer 1's, ... to p.
 * 0, or -1 with the error recorded ("rnn_params: NULL argument" for a NULL
 * module or list). */
int tg_rnn_params(tg_rnn *m, tg_params *p, const char *prefix);
/** Frees the module and its weights; NULL is a no-op. */
void tg_rnn_free(tg_rnn *m);
/** A GRU, as tg_rnn_new with three gates per layer; errors name "gru". Free
 * with tg_gru_free. */
tg_gru *tg_gru_new(int input_size, int hidden_size, int num_layers, tg_rng *rng);
/** As tg_rnn_forward, for a GRU (errors name "gru"; a module made by
 * tg_rnn_new is refused). */
tg_tensor *tg_gru_forward(tg_gru *m, tg_tensor *x);
/** As tg_rnn_forward_state, for a GRU. */
tg_tensor *tg_gru_forward_state(tg_gru *m, tg_tensor *x, tg_tensor *h0, tg_tensor **h_n);
/** As tg_rnn_params, for a GRU (the same names; "gru_params: NULL
 * argument"). */
int tg_gru_params(tg_gru *m, tg_params *p, const char *prefix);
/** Frees the GRU and its weights; NULL is a no-op. */
void tg_gru_free(tg_gru *m);
/** Concatenates n tensors (any n >= 1) along axis, as a tree of tg_concat
 * (each element copied about log(n) times, not n times as a chain would).
 * The result lives in the current scope. NULL with "concat_many: n tensors"
 * recorded for n < 1 or a NULL ts, or with tg_concat's error. */
tg_tensor *tg_concat_many(int n, tg_tensor *const *ts, int axis);

/* ---- a sequence layer of a chosen kind (seq_layer.c) ----------------------- */
/** The layers d2l's "Comparing CNNs, RNNs, and Self-Attention" compares:
 * each maps X [B, n, d] to [B, n, d]. */
typedef enum {
    TG_SEQ_CNN,              /**< "cnn": depth Conv1d(d, d, kernel), n kept; ReLU between them when relu */
    TG_SEQ_RNN,              /**< "rnn": an Elman RNN of depth layers (tg_rnn) */
    TG_SEQ_GRU,              /**< "gru": a GRU of depth layers (tg_gru) */
    TG_SEQ_ATTENTION,        /**< "attention": softmax(X X^T / sqrt(d)) X, q = k = v = X, no projections
                                  (the fused tg_attention), depth times */
    TG_SEQ_ATTENTION_STORED, /**< "attention-stored": the same through the stored path (scores, softmax and
                                  product kept in memory) */
    TG_SEQ_MHA,              /**< "mha": depth multi-head self-attentions with projections (tg_mha, no bias) */
    TG_SEQ_KINDS             /**< the number of kinds */
} tg_seq_kind;
/** The name of kind ("cnn", "rnn", "gru", "attention", "attention-stored",
 * "mha"), a static string; NULL for a value that is not a kind. */
const char *tg_seq_kind_name(tg_seq_kind kind);
/** What a sequence layer is. */
typedef struct {
    tg_seq_kind kind; /**< which layer */
    int dim;          /**< d, the width in and out */
    int depth;        /**< stacked layers (1..4096; an RNN's or GRU's at most TG_RNN_MAX_LAYERS) */
    int kernel;       /**< CNN: the kernel size k */
    int heads;        /**< MHA: the heads (dividing dim) */
    bool relu;        /**< CNN: a ReLU between two convolutions */
} tg_seq_layer_config;
/** A sequence layer (tg_seq_layer_new); the fields are read-only for users. */
typedef struct {
    tg_seq_layer_config cfg; /**< what it is */
    tg_conv1d **conv;        /**< CNN: its depth convolutions; else NULL */
    tg_rnn *rnn;             /**< RNN, GRU: the module (a tg_gru for GRU); else NULL */
    tg_mha **mha;            /**< MHA: its depth attentions; else NULL */
} tg_seq_layer;
/** A layer as c says, its weights drawn from rng layer by layer (the
 * attention kinds draw nothing). NULL with "seq_layer: ..." or the
 * module's error recorded for a bad config, a NULL rng where weights are
 * drawn, or no memory. Free with tg_seq_layer_free. */
tg_seq_layer *tg_seq_layer_new(const tg_seq_layer_config *c, tg_rng *rng);
/** X [B, n, d] -> [B, n, d] in the current scope. NULL with the error
 * recorded (the modules' for a wrong shape). */
tg_tensor *tg_seq_layer_forward(tg_seq_layer *m, tg_tensor *x);
/** Appends m's parameters to p under prefix (NULL or "": the kind's name):
 * a CNN's and an MHA's layers as prefix0, prefix1, ... when deeper than one
 * (else prefix), each with its module's names; an RNN's and a GRU's as
 * tg_rnn_params. 0, or -1 with the error recorded. */
int tg_seq_layer_params(tg_seq_layer *m, tg_params *p, const char *prefix);
/** Frees m and its modules; NULL is a no-op. */
void tg_seq_layer_free(tg_seq_layer *m);
/** The chapter's path lengths, measured: G[t n + s] = ||dy_t / dx_s||, the
 * Frobenius norm of the Jacobian block of output position t against input
 * position s (the gradient of sum(y_t) at x_s, one backward per t with a
 * one-hot seed), for x [1, n, d] requiring grad (its gradient is
 * overwritten); every row t, or only row only_t when only_t >= 0 (the
 * others untouched). 0, or -1 with the error recorded. */
int tg_seq_layer_paths(tg_seq_layer *m, tg_tensor *x, int only_t, double *G);
/** The layers of kind c->kind (c->depth ignored) needed before the last of
 * n outputs depends on the first input: the smallest depth in
 * 1..max_depth with |dy_{n-1}/dx_0| > 1e-30 max_s |dy_{n-1}/dx_s| (far
 * above float's underflow: any dependence at all), each depth a new layer
 * and x [1, n, d] drawn from rng in that order; *rel (when not NULL) gets
 * that ratio, how strongly it depends. A recurrent layer or the stored and
 * multi-head attentions are decided at depth 1. -1 when no depth reaches;
 * -2 with the error recorded when a layer cannot be made or run. */
int tg_seq_layer_reach(const tg_seq_layer_config *c, int n, int max_depth, tg_rng *rng, double *rel);
/** The median wall time, in seconds, of reps (1..32) forwards of m over a
 * random x [B, n, d] drawn from rng (outside the timing), with backward
 * true each followed by the backward of sum(y), after one untimed run
 * (the arena's blocks, the caches). NaN with the error recorded. */
double tg_seq_layer_time(tg_seq_layer *m, int B, int n, int reps, bool backward, tg_rng *rng);
/** The chapter's sequential operations, measured: the ops on the longest
 * chain of dependent ops (tg_graph_depth) in the graph of one forward of m
 * over a random x [1, n, d] drawn from rng. -1 with the error recorded. */
int tg_seq_layer_depth(tg_seq_layer *m, int n, tg_rng *rng);
/** A model around a sequence layer (seq_model.c): a sequence of token ids
 * to one prediction, read at its last position. */
typedef struct {
    tg_embedding *emb;   /**< [vocab, d], drawn N(0, 1): tensors "emb.*" */
    tg_posenc *pe;       /**< the fixed sinusoidal positions added to the embeddings, or NULL */
    tg_seq_layer *layer; /**< the layer: tensors "conv0", "conv1", ... for a CNN, else under the kind's name */
    tg_linear *head;     /**< Linear(d, n_out) at the last position, tensors "head.*" */
    tg_params params;    /**< all of them, in that order */
} tg_seq_model;
/** Builds m: vocab embeddings of width c->dim, the fixed sinusoidal
 * positions of max_len rows when max_len > 0 (an attention layer alone
 * cannot tell positions apart; 0: none), the layer c, and Linear(d, n_out),
 * drawn from rng in that order. 0, or -1 with the error recorded and
 * nothing left allocated. */
int tg_seq_model_init(tg_seq_model *m, const tg_seq_layer_config *c, int vocab, int n_out, int max_len, tg_rng *rng);
/** The logits [B, n_out] of ids [B, n] (each in [0, vocab)) in the current
 * scope: the head over the layer's output at position n - 1. NULL with the
 * error recorded. */
tg_tensor *tg_seq_model_forward(tg_seq_model *m, const int *ids, int B, int n);
/** Frees what m holds (not m); NULL is a no-op. */
void tg_seq_model_free(tg_seq_model *m);

#endif
