/** @file
 * tgrad modules: the layers of d2l's chapter "Self-Attention and Positional
 * Encoding" and what is needed around them to train a Transformer encoder.
 *
 * Every module follows one pattern:
 *   tg_X *tg_X_new(config..., tg_rng *rng)   parameters are persistent tensors
 *   tg_tensor *tg_X_forward(tg_X *m, ...)     builds a differentiable graph
 *   int tg_X_params(tg_X *m, tg_params *p, const char *prefix)
 *                                             appends its parameters, named as
 *                                             PyTorch's state_dict would;
 *                                             0, or -1 with the error recorded
 *   void tg_X_train(tg_X *m, bool on)         train/eval, reaching its children
 *   void tg_X_free(tg_X *m)
 * Modules are built from public ops only, so they are differentiable and
 * gradient-checkable for free. Constructors return NULL with an error
 * recorded on bad configuration; forwards return NULL on bad input.
 * A NULL module: tg_X_free(NULL) and tg_X_train(NULL, on) do nothing;
 * tg_X_forward(NULL, ...) returns NULL with "X_forward: NULL module"
 * recorded, and tg_X_params(NULL, ...) returns -1 with "X_params: NULL
 * module". Dropout probabilities are checked by tg_check_dropout: [0, 1]. */
#ifndef TG_NN_H
#define TG_NN_H

#include "../autograd/autograd.h"
#include "../tensor/params.h"

/** Linear: y = x W^T + b on the last axis of any-rank x
 * weight [out, in] and bias [out] as torch.nn.Linear, initialised
 * U(-1/sqrt(in), 1/sqrt(in)) (PyTorch's default). */
typedef struct {
    int in, out;
    tg_tensor *weight, *bias; /**< bias NULL when off */
} tg_linear;
tg_linear *tg_linear_new(int in, int out, bool bias, tg_rng *rng);
tg_tensor *tg_linear_forward(tg_linear *m, tg_tensor *x);
int tg_linear_params(tg_linear *m, tg_params *p, const char *prefix); /**< weight, bias */
void tg_linear_free(tg_linear *m);

/** Dropout(p): inverted dropout in training, identity in eval */
typedef struct {
    tg_real p;
    bool training;
    tg_rng rng; /**< masks come from this stream */
} tg_dropout_layer;
tg_dropout_layer *tg_dropout_new(tg_real p, tg_rng *rng);
tg_tensor *tg_dropout_forward(tg_dropout_layer *m, tg_tensor *x);
/** The probability a forward would use now: p in training, 0 in eval. */
tg_real tg_dropout_active_p(const tg_dropout_layer *m);
/** The layer's mask stream, for an op that applies the same dropout itself
 * (the fused attention). */
tg_rng *tg_dropout_rng(tg_dropout_layer *m);
void tg_dropout_train(tg_dropout_layer *m, bool on);
void tg_dropout_free(tg_dropout_layer *m);

/** Embedding(vocab, d): rows of weight [vocab, d], N(0, std^2) */
typedef struct {
    int vocab, dim;
    tg_tensor *weight;
} tg_embedding;
tg_embedding *tg_embedding_new(int vocab, int dim, tg_real std, tg_rng *rng); /**< torch: std 1 */
/** ids has shape (ndim, shape); result [..., d]. An id outside [0, vocab) is an error. */
tg_tensor *tg_embedding_forward(tg_embedding *m, const int *ids, int ndim, const int *shape);
int tg_embedding_params(tg_embedding *m, tg_params *p, const char *prefix); /**< weight */
void tg_embedding_free(tg_embedding *m);

/** LayerNorm(d): eps 1e-5, affine (weight 1, bias 0), biased variance - */
typedef struct {
    int dim;
    tg_real eps;
    tg_tensor *weight, *bias;
} tg_layernorm;
tg_layernorm *tg_layernorm_new(int dim, tg_real eps);
tg_tensor *tg_layernorm_forward(tg_layernorm *m, tg_tensor *x);
int tg_layernorm_params(tg_layernorm *m, tg_params *p, const char *prefix); /**< weight, bias */
void tg_layernorm_free(tg_layernorm *m);

/** attention scoring functions (the four of the seed blog post)
 * queries [B, Q, dq], keys [B, K, dk] -> scores [B, Q, K]. */
tg_tensor *tg_score_dot(tg_tensor *queries, tg_tensor *keys);                   /**< Q K^T */
tg_tensor *tg_score_scaled_dot(tg_tensor *queries, tg_tensor *keys);            /**< Q K^T / sqrt(d) */
tg_tensor *tg_score_general(tg_tensor *queries, tg_tensor *W, tg_tensor *keys); /**< Q W K^T, W [dq, dk] */
/** w_v^T tanh(W_q q + W_k k): W_q [h, dq], W_k [h, dk], w_v [1, h] (Linear weights, no bias). */
tg_tensor *tg_score_additive(tg_tensor *queries, tg_tensor *keys, tg_tensor *W_q, tg_tensor *W_k, tg_tensor *w_v);

/** DotProductAttention(dropout): softmax(Q K^T / sqrt(d)) V
 * queries [B, Q, d], keys [B, K, d], values [B, K, v] -> [B, Q, v].
 * The forward picks its path itself (attention.c, one rule): the fused
 * tg_attention, which never stores the [B, Q, K] weights, unless it records
 * them, uses sparsemax, or the sequence is short enough that the stored path
 * (masked softmax, dropout, matmul) is faster. Both give the same values up
 * to rounding and the same dropout mask.
 * While recording (tg_dot_attention_record(m, true); off for a new module)
 * the weights of the last forward, before dropout as d2l keeps them, stay in
 * attention_weights [B, Q, K] until the scope of that forward ends;
 * otherwise attention_weights is NULL. */
typedef enum { TG_PATH_AUTO = 0, TG_PATH_STORED, TG_PATH_FUSED } tg_attention_path;
typedef struct {
    tg_dropout_layer *dropout;
    tg_tensor *attention_weights;
    bool sparse;            /**< sparsemax instead of softmax */
    bool record;            /**< keep attention_weights (stored path) */
    tg_attention_path path; /**< AUTO (the rule above); STORED or FUSED force one (tests, benchmarks) */
} tg_dot_attention;
tg_dot_attention *tg_dot_attention_new(tg_real dropout, tg_rng *rng);
tg_tensor *tg_dot_attention_forward(tg_dot_attention *m, tg_tensor *queries, tg_tensor *keys, tg_tensor *values,
                                    tg_mask mask);
/** The same with the position terms of pos (tg_attn_pos, autograd.h; NULL:
 * none) on either path: the fused op computes them on the fly, the stored
 * path adds them to the [B, Q, K] scores (and Shaw's value term to the
 * output) with public ops. Queries must be 3-D. */
tg_tensor *tg_dot_attention_forward_pos(tg_dot_attention *m, tg_tensor *queries, tg_tensor *keys, tg_tensor *values,
                                        tg_mask mask, const tg_attn_pos *pos);
void tg_dot_attention_record(tg_dot_attention *m, bool on);
void tg_dot_attention_train(tg_dot_attention *m, bool on);
void tg_dot_attention_free(tg_dot_attention *m);

/** AdditiveAttention(key_size, query_size, num_hiddens, dropout) */
typedef struct {
    tg_linear *W_k, *W_q, *w_v; /**< no bias, as d2l */
    tg_dropout_layer *dropout;
    tg_tensor *attention_weights;
} tg_additive_attention;
tg_additive_attention *tg_additive_attention_new(int key_size, int query_size, int num_hiddens, tg_real dropout,
                                                 tg_rng *rng);
tg_tensor *tg_additive_attention_forward(tg_additive_attention *m, tg_tensor *queries, tg_tensor *keys,
                                         tg_tensor *values, tg_mask mask);
int tg_additive_attention_params(tg_additive_attention *m, tg_params *p, const char *prefix);
void tg_additive_attention_train(tg_additive_attention *m, bool on);
void tg_additive_attention_free(tg_additive_attention *m);

/* ---- MultiHeadAttention, as d2l ------------------------------------------
 * W_q [num_hiddens, query_size], W_k, W_v, W_o [num_hiddens, num_hiddens];
 * heads split by reshaping (B, n, H) -> (B*h, n, H/h); valid lengths (given
 * per batch row in mask) repeated for each head; scores scaled by sqrt(H/h).
 * Self-attention is forward(X, X, X). */
/** Position information: an absolute table added to the input (FIXED,
 * LEARNED; NONE: nothing), or a term inside every attention (RELATIVE:
 * Shaw et al. 2018's learned relative_k, relative_v; ROPE: Su et al. 2021's
 * rotation of q and k; ALIBI: Press et al. 2022's linear bias), which sees
 * offsets only and so runs on sequences of any length. */
typedef enum { TG_PE_FIXED, TG_PE_LEARNED, TG_PE_NONE, TG_PE_RELATIVE, TG_PE_ROPE, TG_PE_ALIBI } tg_pe_kind;
/** One enum for every attention module: the encoder takes all six, MHA's
 * position term the three inside attention, the decoder (decoder.h) all
 * but the fixed table. Their names, as the programs' flags and the
 * checkpoints' metadata spell them: "fixed", "learned", "none",
 * "relative", "rope", "alibi"; NULL for a value outside the enum. */
const char *tg_pe_kind_name(tg_pe_kind kind);
/** The kind named name into *out: 0, or -1 with an error listing the names. */
int tg_pe_kind_parse(const char *name, tg_pe_kind *out);
/** The checks every module makes of its kind, once: a kind of the enum, and
 * for RoPE an even head size (it rotates pairs of features). 0, or -1 with
 * "<op>: ..." recorded. */
int tg_pe_check(const char *op, tg_pe_kind kind, int head_dim);
/** The position term inside one attention layer, one object for MHA and
 * the decoder's blocks: set up, applied to q and k (or handed to the
 * attention op as a tg_attn_pos) and freed in one place (src/nn/position.c).
 * kind is TG_PE_RELATIVE, TG_PE_ROPE or TG_PE_ALIBI; any other value means
 * none (a new module). The fields are read-only for users. */
typedef struct {
    tg_pe_kind kind;
    int clip;                           /**< RELATIVE: offsets clipped to [-clip, clip] */
    tg_tensor *relative_k, *relative_v; /**< RELATIVE: [2 clip + 1, head size] each, shared by the heads */
    tg_real *alibi;                     /**< ALIBI: the heads' slopes (tg_alibi_slopes) */
    bool rope_half;                     /**< ROPE: GPT-NeoX's pairing (i, i + d/2) instead of the paper's */
} tg_position;
typedef struct {
    int num_heads, num_hiddens;
    tg_linear *W_q, *W_k, *W_v, *W_o;
    tg_dot_attention *attention;
    tg_position pos; /**< the position term (tg_mha_set_position); none for a new module */
} tg_mha;
tg_mha *tg_mha_new(int key_size, int query_size, int value_size, int num_hiddens, int num_heads, tg_real dropout,
                   bool bias, tg_rng *rng);
tg_tensor *tg_mha_forward(tg_mha *m, tg_tensor *queries, tg_tensor *keys, tg_tensor *values, tg_mask mask);
int tg_mha_params(tg_mha *m, tg_params *p, const char *prefix); /**< W_q.weight, W_k.weight, ... */
/** Gives every head a position term inside attention, with query i and key
 * j of a forward at positions i and j:
 *   TG_PE_RELATIVE  score += q_i . relative_k[r] / sqrt(H/h), out_i += sum_j
 *                   w_ij relative_v[r], r = clip(j - i, -clip, clip) + clip;
 *                   two parameters [2 clip + 1, H/h] drawn N(0, 1/(H/h)),
 *                   listed by tg_mha_params as relative_k, relative_v
 *   TG_PE_ROPE      q and k rotated by tg_rope (base 10000; rope_half picks
 *                   the NeoX pairing), no parameter; H/h must be even
 *   TG_PE_ALIBI     score += -m_h |i - j| with tg_alibi_slopes(h): with a
 *                   causal mask the paper's -m_h (i - j), without one (an
 *                   encoder) its symmetric, bidirectional form
 *   TG_PE_FIXED, TG_PE_LEARNED, TG_PE_NONE: none (they live outside attention).
 * Once, on a new module; 0, or -1 with the error recorded. */
int tg_mha_set_position(tg_mha *m, tg_pe_kind pe, int clip, bool rope_half, tg_rng *rng);
void tg_mha_train(tg_mha *m, bool on);
/** Recording the attention weights: while on, each forward keeps the weights
 * of every head (off for a new module). */
void tg_mha_record_attention(tg_mha *m, bool on);
/** The recorded weights of one head of the last forward, [B, Q, K], as a new
 * tensor in that forward's scope (valid until the scope ends, not part of
 * the graph). NULL with the error recorded when not recording, before a
 * forward, or for a head outside [0, num_heads). */
tg_tensor *tg_mha_attention_weights(const tg_mha *m, int head);
void tg_mha_free(tg_mha *m);

/** positional encodings: output dropout(X + P[:T]) for X [B, T, d]
 * Fixed: P[i, 2j] = sin(i / 10000^(2j/d)), P[i, 2j+1] = cos(i / 10000^(2j/d))
 * (an odd d ends with a sine column). Learned: P is a trainable table
 * initialised N(0, 0.02^2). T > max_len is an error. */
typedef struct {
    int max_len, num_hiddens;
    bool learned;
    tg_tensor *P; /**< [max_len, d]; a parameter when learned */
    tg_dropout_layer *dropout;
} tg_posenc;
/** Both as d2l's PositionalEncoding(num_hiddens, dropout, max_len); max_len 0
 * means d2l's 1000, a negative one is an error. */
tg_posenc *tg_posenc_new(int num_hiddens, tg_real dropout, int max_len, tg_rng *rng); /**< fixed */
tg_posenc *tg_posenc_learned_new(int num_hiddens, tg_real dropout, int max_len, tg_rng *rng);
tg_tensor *tg_posenc_forward(tg_posenc *m, tg_tensor *X);
int tg_posenc_params(tg_posenc *m, tg_params *p, const char *prefix); /**< "P" when learned */
void tg_posenc_train(tg_posenc *m, bool on);
void tg_posenc_free(tg_posenc *m);

/** Transformer encoder pieces, as d2l */
typedef struct { /**< dense2(relu(dense1(X))) */
    tg_linear *dense1, *dense2;
} tg_ffn;
tg_ffn *tg_ffn_new(int num_hiddens, int ffn_hiddens, int num_outputs, tg_rng *rng);
tg_tensor *tg_ffn_forward(tg_ffn *m, tg_tensor *X);
int tg_ffn_params(tg_ffn *m, tg_params *p, const char *prefix);
void tg_ffn_free(tg_ffn *m);

typedef struct { /**< ln(dropout(Y) + X) */
    tg_dropout_layer *dropout;
    tg_layernorm *ln;
} tg_addnorm;
tg_addnorm *tg_addnorm_new(int dim, tg_real dropout, tg_rng *rng);
tg_tensor *tg_addnorm_forward(tg_addnorm *m, tg_tensor *X, tg_tensor *Y);
int tg_addnorm_params(tg_addnorm *m, tg_params *p, const char *prefix);
void tg_addnorm_train(tg_addnorm *m, bool on);
void tg_addnorm_free(tg_addnorm *m);

typedef struct { /**< Y = addnorm1(X, mha(X,X,X)); addnorm2(Y, ffn(Y)) */
    tg_mha *attention;
    tg_addnorm *addnorm1, *addnorm2;
    tg_ffn *ffn;
} tg_encoder_block;
tg_encoder_block *tg_encoder_block_new(int num_hiddens, int ffn_hiddens, int num_heads, tg_real dropout, bool use_bias,
                                       tg_rng *rng);
tg_tensor *tg_encoder_block_forward(tg_encoder_block *m, tg_tensor *X, tg_mask mask);
int tg_encoder_block_params(tg_encoder_block *m, tg_params *p, const char *prefix);
void tg_encoder_block_train(tg_encoder_block *m, bool on);
void tg_encoder_block_free(tg_encoder_block *m);

typedef struct {
    int vocab_size, num_hiddens, ffn_hiddens, num_heads, num_layers, max_len;
    tg_real dropout;
    tg_pe_kind pe;
    bool use_bias;
    /** Std of the embedding init. 0 means 1/sqrt(d), so that the scaled
     * embedding E * sqrt(d) has unit size, as the original Transformer; 1 is
     * PyTorch's nn.Embedding default, which drowns the positional signal. */
    tg_real embedding_std;
    /** Std of a learned positional table's init. 0 means 1, the scale of the
     * scaled embeddings it is added to; 0.02 is the module's own default. */
    tg_real learned_pe_std;
    /** TG_PE_RELATIVE: offsets clipped to [-relative_clip, relative_clip];
     * 0 means 16 (Shaw et al.'s k). */
    int relative_clip;
} tg_encoder_config;

/** With pe RELATIVE, ROPE or ALIBI there is no table: the blocks' attention
 * carries the positions (tg_mha_set_position), any T runs, and max_len only
 * sizes a table that is not made. */
typedef struct { /**< pos_encoding(embedding(tokens) * sqrt(d)) -> blocks */
    tg_encoder_config cfg;
    tg_embedding *embedding;
    tg_posenc *pos_encoding;   /**< NULL for TG_PE_NONE and the attention kinds (then dropout alone) */
    tg_dropout_layer *dropout; /**< used only when pos_encoding is NULL */
    tg_encoder_block **blocks;
} tg_encoder;
tg_encoder *tg_encoder_new(const tg_encoder_config *cfg, tg_rng *rng);
/** tokens [B, T] -> [B, T, num_hiddens]; mask as for attention (lengths per row). */
tg_tensor *tg_encoder_forward(tg_encoder *m, const int *tokens, int B, int T, tg_mask mask);
int tg_encoder_params(tg_encoder *m, tg_params *p, const char *prefix);
/** The generators of every dropout (for a training state): "dropout" or
 * "pos_encoding", then "blocks.<i>.attention", ".addnorm1", ".addnorm2".
 * 0, or -1 with the error recorded. */
int tg_encoder_rngs(tg_encoder *m, tg_rngs *out);
void tg_encoder_train(tg_encoder *m, bool on);
/** tg_mha_record_attention on every block: while on, a forward keeps the
 * weights of every layer and head. */
void tg_encoder_record_attention(tg_encoder *m, bool on);
/** The recorded weights of head `head` of block `layer`, [B, T, T], as
 * tg_mha_attention_weights (valid until the forward's scope ends). */
tg_tensor *tg_encoder_attention_weights(const tg_encoder *m, int layer, int head);
void tg_encoder_free(tg_encoder *m);

/** losses */
tg_tensor *tg_mse_loss(tg_tensor *pred, tg_tensor *target); /**< mean of squares */
/* tg_cross_entropy (autograd.h) is the classification loss. */

/** sequence layers: Conv1d, RNN, GRU (the chapter's comparison)
 * All take batch-first token sequences [B, n, in] and return [B, n, out],
 * with PyTorch's parameter names and layouts so weights move both ways.
 * Conv1d: weight [out, in, k], bias [out] as torch.nn.Conv1d applied to
 * x.transpose(1, 2); stride 1, 'same' zero padding (left (k-1)*dil/2
 * rounded down, right the rest, as torch's padding='same'), dilation dil.
 * RNN (Elman, tanh) and GRU as torch.nn.RNN / torch.nn.GRU with
 * batch_first=True: weight_ih_l{L} [G*H, in_L],
 * weight_hh_l{L} [G*H, H], bias_ih_l{L}, bias_hh_l{L} [G*H], G = 1 (RNN)
 * or 3 (GRU, gates r, z, n in torch's order). The forward returns the
 * last layer's outputs at every step; backward runs through time over the
 * unrolled graph. Init U(-1/sqrt(fan), 1/sqrt(fan)) with fan = in*k (conv)
 * or H (recurrent), as torch. params returns 0, or -1 on error. */
typedef struct {
    int in, out, k, dilation;
    tg_tensor *weight, *bias; /**< bias NULL when off */
} tg_conv1d;
tg_conv1d *tg_conv1d_new(int in, int out, int k, int dilation, bool bias, tg_rng *rng);
tg_tensor *tg_conv1d_forward(tg_conv1d *m, tg_tensor *x);
int tg_conv1d_params(tg_conv1d *m, tg_params *p, const char *prefix); /**< weight, bias */
void tg_conv1d_free(tg_conv1d *m);

#define TG_RNN_MAX_LAYERS 16
typedef struct {
    int input_size, hidden_size, num_layers, gates; /**< gates: 1 RNN, 3 GRU */
    tg_tensor *w_ih[TG_RNN_MAX_LAYERS], *w_hh[TG_RNN_MAX_LAYERS];
    tg_tensor *b_ih[TG_RNN_MAX_LAYERS], *b_hh[TG_RNN_MAX_LAYERS];
} tg_rnn;
typedef tg_rnn tg_gru;
tg_rnn *tg_rnn_new(int input_size, int hidden_size, int num_layers, tg_rng *rng);
tg_tensor *tg_rnn_forward(tg_rnn *m, tg_tensor *x); /**< h0 zero, h_n not returned */
/** torch's (output, h_n) = rnn(x, h0): h0 [num_layers, B, H] or NULL (zero),
 * and, when h_n is not NULL, the last step's state of every layer in *h_n
 * [num_layers, B, H] (in the current scope, like the output). Gradients
 * flow into h0 and from h_n. NULL with an error naming the shapes. */
tg_tensor *tg_rnn_forward_state(tg_rnn *m, tg_tensor *x, tg_tensor *h0, tg_tensor **h_n);
int tg_rnn_params(tg_rnn *m, tg_params *p, const char *prefix);
void tg_rnn_free(tg_rnn *m);
tg_gru *tg_gru_new(int input_size, int hidden_size, int num_layers, tg_rng *rng);
tg_tensor *tg_gru_forward(tg_gru *m, tg_tensor *x);
tg_tensor *tg_gru_forward_state(tg_gru *m, tg_tensor *x, tg_tensor *h0, tg_tensor **h_n); /**< as the RNN's */
int tg_gru_params(tg_gru *m, tg_params *p, const char *prefix);
void tg_gru_free(tg_gru *m);
/** Concatenates n tensors (any n >= 1) along axis, as a tree of tg_concat. */
tg_tensor *tg_concat_many(int n, tg_tensor *const *ts, int axis);

#endif
