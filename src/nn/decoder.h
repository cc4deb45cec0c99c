/** @file
 * A GPT-2 style decoder-only language model, as nanoGPT's model.py `GPT`
 * (Karpathy; Radford et al., "Language Models are Unsupervised Multitask
 * Learners", 2019), with a KV cache for generation and the sampling helpers.
 *
 *   tokens [B, T] -> drop(wte[tokens] + wpe[0..T-1])
 *     -> n_layer blocks (pre-LayerNorm):
 *          x = x + resid_drop(attn.c_proj(causal_attention(attn.c_attn(ln_1(x)))))
 *          x = x + mlp_drop(mlp.c_proj(gelu(mlp.c_fc(ln_2(x)))))
 *     -> ln_f -> logits = x wte^T [B, T, V]      (lm_head tied to wte)
 *
 * Parameter names are nanoGPT's state_dict names, shapes torch's ([out, in]
 * Linear weights), so weights move both ways through safetensors files:
 *   transformer.wte.weight [V, d]          transformer.wpe.weight [block_size, d]
 *   transformer.h.<i>.ln_1.weight, .bias [d]
 *   transformer.h.<i>.attn.c_attn.weight [3d, d], .bias [3d]   (q, k, v rows in that order)
 *   transformer.h.<i>.attn.c_proj.weight [d, d], .bias [d]
 *   transformer.h.<i>.ln_2.weight, .bias [d]
 *   transformer.h.<i>.mlp.c_fc.weight [4d, d], .bias [4d]
 *   transformer.h.<i>.mlp.c_proj.weight [d, 4d], .bias [d]
 *   transformer.ln_f.weight, .bias [d]
 * (no .bias entries when cfg.bias is false, as nanoGPT's bias=False).
 *
 * Tied head. nanoGPT sets transformer.wte.weight = lm_head.weight: one
 * tensor, whose gradient is the sum of the embedding's and the head's. Here
 * too, one tensor (m->wte->weight). PyTorch's named_parameters() lists it
 * once, as transformer.wte.weight, and so does tg_decoder_params (what an
 * optimizer, gradient clipping and a parameter count take). PyTorch's
 * state_dict() has it under both names; tg_decoder_state_dict adds
 * "lm_head.weight" (the same tensor) at the end, in state_dict order.
 * Checkpoints:
 *   tg_decoder_save writes the state_dict: both names, each a full copy of
 *     the values, so nanoGPT reads it strictly:
 *       model.load_state_dict(safetensors.torch.load_file(path))
 *     (safetensors.torch.save_file itself refuses tensors that share memory,
 *     but a file holding two equal copies is an ordinary file).
 *     safetensors.torch.load_model(model, path) is the other way round: it
 *     expects one name per group of shared tensors (it keeps the first in
 *     sorted order, "lm_head.weight") and reports the other,
 *     "transformer.wte.weight", as an unexpected key, so it needs
 *     strict=False with this file (the values are loaded all the same).
 *   tg_decoder_load accepts the tied weight under either name or both: a
 *     file from safetensors.torch.save_model(model, path), which keeps only
 *     "lm_head.weight" (the first of the shared names in sorted order), one
 *     from save_file(model.state_dict() without "lm_head.weight"), or one from
 *     tg_decoder_save. When both are present their values must be equal.
 *     A checkpoint of PyTorch < 2.0 also holds the causal-mask buffers
 *     "transformer.h.<i>.attn.bias"; they are not parameters and are refused
 *     like any unknown name (drop them before saving).
 *
 * GELU. GPT-2 (and Hugging Face's GPT2, "gelu_new") uses the tanh form,
 * the default here (TG_DEC_GELU_TANH); nanoGPT's model.py uses nn.GELU(),
 * the exact erf form: TG_DEC_GELU_ERF reproduces it value for value. */
#ifndef TG_NN_DECODER_H
#define TG_NN_DECODER_H

#include "nn.h"

/** Position information, the kinds of every attention module (tg_pe_kind,
 * nn.h): GPT-2's learned absolute table wpe (TG_PE_LEARNED), or a term
 * inside every attention and no wpe (see tg_mha_set_position, nn.h):
 * RELATIVE, Shaw et al.'s transformer.h.<i>.attn.relative_k and
 * .relative_v [2 relative_clip + 1, n_embd / n_head]; ROPE, q and k rotated
 * by their positions (base 10000, rope_half: the NeoX pairing); ALIBI,
 * -m_h (i - j) on the causal scores; or NONE, no position at all (the
 * causal mask alone tells order). FIXED is refused. With a KV cache the new
 * queries sit at positions len.., so all of them continue a cached
 * sequence exactly. */
typedef enum { TG_DEC_GELU_TANH = 0, TG_DEC_GELU_ERF } tg_decoder_gelu;

typedef struct {
    int vocab_size; /**< V */
    int block_size; /**< longest sequence T (rows of wpe) */
    int n_layer, n_head, n_embd;
    tg_real dropout; /**< nanoGPT's: embeddings, attention weights, residual branches */
    bool bias;       /**< biases in the Linears and LayerNorms (nanoGPT's default true) */
    tg_pe_kind pos;
    tg_decoder_gelu gelu;
    int relative_clip; /**< RELATIVE: offsets clipped to [-clip, clip]; 0 means 16 */
    bool rope_half;    /**< ROPE: pairs (i, i + d/2) as GPT-NeoX/LLaMA code, not (2i, 2i+1) */
} tg_decoder_config;
/** nanoGPT's GPTConfig defaults for the given sizes: dropout 0, bias true,
 * learned positions, GELU tanh. */
tg_decoder_config tg_decoder_config_default(int vocab_size, int block_size, int n_layer, int n_head, int n_embd);

typedef struct {
    tg_layernorm *ln_1, *ln_2;
    tg_linear *c_attn, *attn_proj; /**< attn.c_attn [3d, d], attn.c_proj [d, d] */
    tg_linear *c_fc, *mlp_proj;    /**< mlp.c_fc [4d, d], mlp.c_proj [d, 4d] */
    tg_dot_attention *attn;        /**< scaled dot-product, attention-weight dropout */
    tg_dropout_layer *resid_drop;  /**< attn.resid_dropout */
    tg_dropout_layer *mlp_drop;    /**< mlp.dropout */
    tg_position pos;               /**< attn's position term: RELATIVE's tables, ALIBI's slopes, ROPE */
} tg_decoder_block;

typedef struct {
    tg_decoder_config cfg;
    tg_embedding *wte, *wpe; /**< wte->weight is also the LM head; wpe NULL unless pos is LEARNED */
    tg_dropout_layer *drop;
    tg_decoder_block **h;
    tg_layernorm *ln_f;
    bool training;
} tg_decoder;

/** Builds the model with GPT-2's initialisation (nanoGPT's _init_weights):
 * Linear and Embedding weights N(0, 0.02^2), biases 0, LayerNorm weight 1
 * and bias 0, and the residual projections attn.c_proj.weight and
 * mlp.c_proj.weight N(0, (0.02 / sqrt(2 n_layer))^2). A new model is in
 * training mode. NULL with an error for a bad configuration (sizes not
 * positive, n_head not dividing n_embd, dropout outside [0, 1], unknown
 * enum value). */
tg_decoder *tg_decoder_new(const tg_decoder_config *cfg, tg_rng *rng);
/** tokens [B, T] (row-major, T <= block_size, ids in [0, V)) -> logits
 * [B, T, V], differentiable. */
tg_tensor *tg_decoder_forward(tg_decoder *m, const int *tokens, int B, int T);
/** The same up to ln_f, without the head: [B, T, n_embd], differentiable
 * (tg_decoder_forward is tg_matmul_t(hidden, wte, false, true)). */
tg_tensor *tg_decoder_hidden(tg_decoder *m, const int *tokens, int B, int T);
/** Mean cross-entropy of the logits against targets [B, T]; a target of -1
 * is ignored, as nanoGPT's ignore_index=-1. Returns shape (). */
tg_tensor *tg_decoder_loss(tg_decoder *m, const int *tokens, const int *targets, int B, int T);
/** The same summed over the counted targets, their number in *counted (may
 * be NULL): for tg_run_backward_sum, exact accumulation (run.h). */
tg_tensor *tg_decoder_loss_sum(tg_decoder *m, const int *tokens, const int *targets, int B, int T, int64_t *counted);
/** The parameters, each tensor once (the tied head is transformer.wte.weight),
 * in nanoGPT's named_parameters() order. 0, or -1 with the error recorded. */
int tg_decoder_params(tg_decoder *m, tg_params *p, const char *prefix);
/** Floating-point work of one training step (forward and backward) on B
 * windows of T tokens, counting products only: 6 flops per weight per
 * token for the weights in products (4 Linears a block and the head; the
 * 2 forward and 4 backward of PaLM's appendix B and nanoGPT's
 * estimate_mfu), and 3 x 4 B T^2 d per layer for the two attention
 * products (full T x T; the causal half is not subtracted). */
double tg_decoder_flops(const tg_decoder_config *c, int B, int T);
/** The generators of every dropout (for a training state): "drop", then per
 * block i "h<i>.attn", "h<i>.resid", "h<i>.mlp". 0, or -1 with the error
 * recorded. */
int tg_decoder_rngs(tg_decoder *m, tg_rngs *out);
/** The state_dict: tg_decoder_params and then "lm_head.weight", the same
 * tensor as transformer.wte.weight. For checkpoints, not for optimizers
 * (the tied tensor would be stepped twice). */
int tg_decoder_state_dict(tg_decoder *m, tg_params *p, const char *prefix);
/** Writes tg_decoder_state_dict to a safetensors file (tg_checkpoint_save). */
int tg_decoder_save(tg_decoder *m, const char *path, const char *metadata_json);
/** Loads a checkpoint holding the tied weight as transformer.wte.weight,
 * lm_head.weight or both (equal); otherwise strict as tg_checkpoint_load:
 * on failure (-1, error recorded) the model is unchanged. */
int tg_decoder_load(tg_decoder *m, const char *path);
/** Training mode (dropout on) or eval mode, as model.train() / model.eval(). */
void tg_decoder_train(tg_decoder *m, bool on);
/** While on, each forward keeps the attention weights of every layer and
 * head (stored path); off (the default) the fused tg_attention runs
 * wherever it is faster and no weights are kept. */
void tg_decoder_record_attention(tg_decoder *m, bool on);
/** The recorded weights of head `head` of layer `layer` of the last forward,
 * [B, T, T] (rows sum to 1, zero above the diagonal), valid until that
 * forward's scope ends. NULL with an error when not recording, before a
 * forward, or for a layer or head out of range. */
tg_tensor *tg_decoder_attention_weights(const tg_decoder *m, int layer, int head);
int64_t tg_decoder_num_params(tg_decoder *m); /**< each tensor once, as nanoGPT's non_embedding=False */
void tg_decoder_free(tg_decoder *m);

/** KV cache
 * For generation, one sequence (batch 1): the keys and values of every
 * layer for positions 0..len-1, [n_head, block_size, d/n_head] each, so a
 * new token attends to them instead of recomputing the whole prefix: a step
 * costs O(len d) attention plus O(d^2) per layer, not a full forward. */
typedef struct {
    int n_layer, n_head, head_dim, capacity; /**< capacity = block_size */
    int len;                                 /**< positions cached */
    tg_tensor **k, **v;                      /**< per layer, persistent */
} tg_decoder_cache;
tg_decoder_cache *tg_decoder_cache_new(const tg_decoder *m);
void tg_decoder_cache_reset(tg_decoder_cache *c); /**< len = 0 */
void tg_decoder_cache_free(tg_decoder_cache *c);
/** Runs n tokens at positions c->len .. c->len + n - 1 (an error past
 * block_size), each attending to the cached positions and, causally, to the
 * tokens before it; appends their keys and values. Returns logits [1, n, V]
 * equal to those positions' logits of tg_decoder_forward over the whole
 * sequence (to rounding). Inference only: runs with grad mode off, so the
 * result is not part of a graph. The cache is left unchanged on error. */
tg_tensor *tg_decoder_forward_cached(tg_decoder *m, tg_decoder_cache *c, const int *tokens, int n);

/** generation
 * nanoGPT's generate: n_new times, the logits of the last position divided
 * by temperature, cut to the top_k largest (top_k <= 0 or >= V: all), one
 * token drawn from their softmax and appended. temperature 0 is greedy
 * (argmax). Writes the n_new new tokens to out (the prompt is not copied).
 * The sequence is cropped to its last block_size tokens, as nanoGPT crops
 * idx_cond. Steps run through a KV cache; once the sequence outgrows
 * block_size the window slides, every token's learned absolute position
 * changes, and the cache of the cropped window is rebuilt (one forward of
 * block_size tokens per step from then on: the cost of nanoGPT's generate).
 * Runs with grad mode and dropout off (the model's mode is restored);
 * draws from tg_rng_new(seed), so a seed gives the same tokens. Memory
 * comes from a scope of its own per step. Returns 0, or -1 with the error
 * recorded (n_prompt < 1, n_new < 0, a token out of range, temperature < 0). */
int tg_decoder_generate(tg_decoder *m, const int *prompt, int n_prompt, int n_new, tg_real temperature, int top_k,
                        uint64_t seed, int *out);

/* ---- sampling helpers (sample.c) --------------------------------------------
 * Over the last axis of x, one result per row (x->size / last dim rows). */
/** Index of the largest value (the first on ties; NaN counts as largest, as
 * torch.argmax). Returns 0, or -1 with an error. */
int tg_argmax(const tg_tensor *x, int *out);
/** One index per row drawn from softmax(x / temperature) restricted to the
 * top_k largest values (ties with the k-th largest kept, as nanoGPT's
 * logits < v[-1] cut); top_k <= 0 keeps all, temperature 0 is tg_argmax.
 * One uniform draw of rng per row (inverse CDF, in double). Returns 0, or -1
 * with an error (temperature negative or NaN, NULL arguments). */
int tg_sample(const tg_tensor *x, tg_real temperature, int top_k, tg_rng *rng, int *out);

#endif
