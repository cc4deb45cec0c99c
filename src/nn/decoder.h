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
 * Linear weights), so weights move both ways through safetensors files
 * (N is a block's index, 0..n_layer-1, d is n_embd, V is vocab_size):
 *   transformer.wte.weight [V, d]          transformer.wpe.weight [block_size, d]
 *   transformer.h.N.ln_1.weight, .bias [d]
 *   transformer.h.N.attn.c_attn.weight [3d, d], .bias [3d]   (q, k, v rows in that order)
 *   transformer.h.N.attn.c_proj.weight [d, d], .bias [d]
 *   transformer.h.N.ln_2.weight, .bias [d]
 *   transformer.h.N.mlp.c_fc.weight [4d, d], .bias [4d]
 *   transformer.h.N.mlp.c_proj.weight [d, 4d], .bias [d]
 *   transformer.ln_f.weight, .bias [d]
 * (no .bias entries when cfg.bias is false, as nanoGPT's bias=False; no wpe
 * unless cfg.pos is TG_PE_LEARNED, and with TG_PE_RELATIVE two more tables
 * per block, transformer.h.N.attn.relative_k and .relative_v, after
 * attn.c_proj).
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
 *     transformer.h.N.attn.bias; they are not parameters and are refused
 *     like any unknown name (drop them before saving).
 *
 * GELU. GPT-2 (and Hugging Face's GPT2, "gelu_new") uses the tanh form,
 * the default here (TG_DEC_GELU_TANH); nanoGPT's model.py uses nn.GELU(),
 * the exact erf form: TG_DEC_GELU_ERF reproduces it value for value.
 *
 * Ownership and threads, as everywhere (docs/mainpage.md): the model owns its
 * modules and parameters (tg_decoder_free); forward results, logits and
 * losses live in the current scope; a model and its cache are used by one
 * thread at a time. */
#ifndef TG_NN_DECODER_H
#define TG_NN_DECODER_H

#include "../io/safetensors.h"
#include "nn.h"

/** The GELU of the MLPs (see the file's notes): GPT-2's tanh form or the
 * exact erf form of nanoGPT's nn.GELU(). */
typedef enum {
    TG_DEC_GELU_TANH = 0, /**< 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), tg_gelu_tanh: GPT-2, the default */
    TG_DEC_GELU_ERF       /**< x Phi(x), tg_gelu: nanoGPT's nn.GELU() */
} tg_decoder_gelu;

/** The model's sizes and options, as nanoGPT's GPTConfig; start from
 * tg_decoder_config_default and change fields. tg_decoder_new copies it.
 *
 * Position information (pos), the kinds of every attention module
 * (tg_pe_kind, nn.h): GPT-2's learned absolute table wpe (TG_PE_LEARNED), or
 * a term inside every attention and no wpe (see tg_mha_set_position, nn.h):
 * RELATIVE, Shaw et al.'s transformer.h.N.attn.relative_k and .relative_v
 * [2 relative_clip + 1, n_embd / n_head] in block N; ROPE, q and k rotated
 * by their positions (base 10000, rope_half: the NeoX pairing; the head
 * size n_embd / n_head must be even); ALIBI, -m_h (i - j) on the causal
 * scores; or NONE, no position at all (the causal mask alone tells order).
 * FIXED is refused. With a KV cache the new queries sit at positions len..,
 * so all of them continue a cached sequence exactly. */
typedef struct {
    int vocab_size; /**< V */
    int block_size; /**< longest sequence T (rows of wpe) */
    int n_layer, n_head, n_embd;
    tg_real dropout;      /**< nanoGPT's: embeddings, attention weights, residual branches */
    bool bias;            /**< biases in the Linears and LayerNorms (nanoGPT's default true) */
    tg_pe_kind pos;       /**< position information (above); TG_PE_FIXED is refused */
    tg_decoder_gelu gelu; /**< the MLPs' GELU */
    int relative_clip;    /**< RELATIVE: offsets clipped to [-clip, clip], in [0, 4096]; 0 means 16 */
    bool rope_half;       /**< ROPE: pairs (i, i + d/2) as GPT-NeoX/LLaMA code, not (2i, 2i+1) */
} tg_decoder_config;
/** @var tg_decoder_config::n_layer
 * Number of blocks, transformer.h.0 to transformer.h.{n_layer-1}. */
/** @var tg_decoder_config::n_head
 * Attention heads per block; must divide n_embd. */
/** @var tg_decoder_config::n_embd
 * d, the width of the residual stream (head size n_embd / n_head). */

/** nanoGPT's GPTConfig defaults for the given sizes: dropout 0, bias true,
 * learned positions, GELU tanh (relative_clip 0, rope_half false). Nothing is
 * checked here: tg_decoder_new checks the configuration. */
tg_decoder_config tg_decoder_config_default(int vocab_size, int block_size, int n_layer, int n_head, int n_embd);
/** Sets c's position kind and GELU by the names a model file's "pe" and
 * "gelu" keys spell them (tg_decoder_config_json): pe one of learned, none,
 * relative, rope or alibi (tg_pe_kind_name's kinds but fixed, the
 * encoder's alone), gelu tanh or erf, as programs' --pe and --gelu flags
 * take them. 0, or -1 with "pe must be learned, none, relative, rope or
 * alibi" or "gelu must be tanh or erf" recorded (pe checked first), c unchanged. */
int tg_decoder_config_kinds(tg_decoder_config *c, const char *pe, const char *gelu);

/** One pre-LayerNorm block, transformer.h.N (see the file's diagram); owned
 * by its tg_decoder. The fields are read-only for users. */
typedef struct {
    tg_layer_norm_layer *ln_1, *ln_2; /**< ln_2: before the MLP, [d] */
    tg_linear *c_attn, *attn_proj;    /**< attn.c_attn [3d, d], attn.c_proj [d, d] */
    tg_linear *c_fc, *mlp_proj;       /**< mlp.c_fc [4d, d], mlp.c_proj [d, 4d] */
    tg_dot_attention *attn;           /**< scaled dot-product, attention-weight dropout */
    tg_dropout_layer *resid_drop;     /**< attn.resid_dropout */
    tg_dropout_layer *mlp_drop;       /**< mlp.dropout */
    tg_position pos;                  /**< attn's position term: RELATIVE's tables, ALIBI's slopes, ROPE */
} tg_decoder_block;
/** @var tg_decoder_block::ln_1
 * The LayerNorm before attention, [d]. */
/** @var tg_decoder_block::c_attn
 * attn.c_attn [3d, d]: q, k and v of every head in one product. */
/** @var tg_decoder_block::c_fc
 * mlp.c_fc [4d, d], the MLP's expansion. */

/** The model (nanoGPT's GPT): made by tg_decoder_new, freed by
 * tg_decoder_free, which frees every module and parameter it owns. The
 * fields are read-only for users (change the mode with tg_decoder_train). */
typedef struct {
    tg_decoder_config cfg;     /**< the configuration it was built with (a copy) */
    tg_embedding *wte, *wpe;   /**< wte->weight is also the LM head; wpe NULL unless pos is LEARNED */
    tg_dropout_layer *drop;    /**< dropout of the embeddings (transformer.drop) */
    tg_decoder_block **h;      /**< the cfg.n_layer blocks, h[0] first */
    tg_layer_norm_layer *ln_f; /**< the final LayerNorm, [d] */
    bool training;             /**< training mode (dropout on); true for a new model */
} tg_decoder;
/** @var tg_decoder::wte
 * Token embedding, weight [V, d] (transformer.wte), tied to the LM head. */

/** Builds the model with GPT-2's initialisation (nanoGPT's _init_weights):
 * Linear and Embedding weights N(0, 0.02^2), biases 0, LayerNorm weight 1
 * and bias 0, and the residual projections attn.c_proj.weight and
 * mlp.c_proj.weight N(0, (0.02 / sqrt(2 n_layer))^2), drawn from rng (which
 * advances; the dropout layers fork their generators from it). A new model
 * is in training mode and does not record attention. The caller owns it:
 * tg_decoder_free. NULL with an error for a NULL cfg or rng or a bad
 * configuration (sizes not positive, n_head not dividing n_embd, n_embd or
 * vocab_size x n_embd too large, dropout outside [0, 1], relative_clip
 * outside [0, 4096], TG_PE_FIXED, an odd head size with ROPE, unknown enum
 * value), or out of memory. */
tg_decoder *tg_decoder_new(const tg_decoder_config *cfg, tg_rng *rng);
/** tokens [B, T] (row-major, T <= block_size, ids in [0, V)) -> logits
 * [B, T, V], differentiable (dropout as the model's mode says). NULL with
 * "decoder_forward: ..." recorded for a NULL m or tokens, B or T not
 * positive, T past block_size or a token outside the vocabulary. */
tg_tensor *tg_decoder_forward(tg_decoder *m, const int *tokens, int B, int T);
/** The same up to ln_f, without the head: [B, T, n_embd], differentiable
 * (tg_decoder_forward is tg_matmul_t(hidden, wte, false, true)); the same
 * checks ("decoder_hidden: ..."). */
tg_tensor *tg_decoder_hidden(tg_decoder *m, const int *tokens, int B, int T);
/** Mean cross-entropy of the logits against targets [B, T]; a target of -1
 * is ignored, as nanoGPT's ignore_index=-1 (not TG_IGNORE_INDEX: any other
 * target outside [0, V) is an error). Returns shape (), 0 when every target
 * is ignored. NULL with the error recorded for bad tokens (as
 * tg_decoder_forward) or NULL targets. */
tg_tensor *tg_decoder_loss(tg_decoder *m, const int *tokens, const int *targets, int B, int T);
/** The same summed over the counted targets, their number in *counted (may
 * be NULL): for tg_run_backward_sum, exact accumulation (run.h). */
tg_tensor *tg_decoder_loss_sum(tg_decoder *m, const int *tokens, const int *targets, int B, int T, int64_t *counted);
/** Appends the parameters to p (a list the caller started and frees; the
 * tensors stay the model's), each tensor once (the tied head is
 * transformer.wte.weight), in nanoGPT's named_parameters() order, every
 * name under prefix + "." (prefix NULL or "": the names of the file's
 * notes). 0, or -1 with the error recorded (NULL m, a duplicate or too long
 * name); entries appended before the failure stay in p. */
int tg_decoder_params(tg_decoder *m, tg_params *p, const char *prefix);
/** Floating-point work of one training step (forward and backward) on B
 * windows of T tokens, counting products only: 6 flops per weight per
 * token for the weights in products (4 Linears a block and the head; the
 * 2 forward and 4 backward of PaLM's appendix B and nanoGPT's
 * estimate_mfu), and 3 x 4 B T^2 d per layer for the two attention
 * products (full T x T; the causal half is not subtracted). 0 for a NULL c;
 * nothing else is checked. */
double tg_decoder_flops(const tg_decoder_config *c, int B, int T);
/** Appends the generators of every dropout to out (for a training state;
 * out started by the caller, as by tg_rngs r = {0}): "drop", then per
 * block i "h<i>.attn" (the attention weights'), "h<i>.resid", "h<i>.mlp",
 * 1 + 3 n_layer entries in all, also when dropout is 0. The generators stay
 * the model's. 0, or -1 with the error recorded (NULL m or out, the list
 * full: more than TG_RNGS_MAX entries in all). */
int tg_decoder_rngs(tg_decoder *m, tg_rngs *out);
/** The state_dict: tg_decoder_params and then "lm_head.weight" (under prefix
 * too), the same tensor as transformer.wte.weight. For checkpoints, not for
 * optimizers (the tied tensor would be stepped twice). 0, or -1 with the
 * error recorded. */
int tg_decoder_state_dict(tg_decoder *m, tg_params *p, const char *prefix);
/** Writes tg_decoder_state_dict to a safetensors file that describes
 * itself (tg_checkpoint_save: atomic, non-finite values refused): its
 * metadata is "model_type": "decoder", the configuration
 * (tg_decoder_config_json) and "dropout", then the keys of metadata_json
 * (NULL or a JSON object of strings: a tokenizer's, the caller's own) that
 * are not among those. 0, or -1 with the error recorded (NULL m included). */
int tg_decoder_save(tg_decoder *m, const char *path, const char *metadata_json);
/** The most blocks a model file may declare: each dropout layer keeps its
 * own generator in a training state (1 + 3 per block + the data's, at most
 * TG_RNGS_MAX). */
#define TG_DECODER_MAX_LAYERS 20
/** The configuration as a JSON object of strings under nanoGPT's GPTConfig
 * names, into buf (cap bytes):
 * {"vocab_size":"V","block_size":"T","n_layer":"L","n_head":"H","n_embd":"d",
 * "bias":"true","gelu":"tanh","pe":"learned"} (dropout is a run's setting,
 * not the model's: tg_decoder_save adds it). The length written, or -1 with
 * the error recorded (NULL, or cap too small). */
int tg_decoder_config_json(const tg_decoder_config *c, char *buf, size_t cap);
/** Reads a configuration from a file's metadata (the keys above; "pe"
 * absent: learned; "dropout" absent: 0; "model_type", when present, must be
 * "decoder") and checks it against the file's tensors, named under prefix
 * ("" for a model file, "model." for a training state), before anything is
 * allocated: the tied weight [V, d] under either name, wpe [T, d] when pe
 * is learned, block n_layer-1's MLP and no block n_layer. path is for
 * messages. 0, or -1 with "<path>: metadata 'n_head' ..." or
 * "<path>: tensor '...' has shape ..." recorded. */
int tg_decoder_config_read(const tg_safetensors *st, const char *path, const char *prefix, tg_decoder_config *c);
/** Loads a checkpoint holding the tied weight as transformer.wte.weight,
 * lm_head.weight or both (equal); otherwise strict as tg_checkpoint_load:
 * on failure (-1, error recorded: NULL m or path, an unreadable file, tied
 * copies that differ, a missing, unknown or misshapen tensor, a non-finite
 * value) the model is unchanged. */
int tg_decoder_load(tg_decoder *m, const char *path);
/** Training mode (dropout on) or eval mode, as model.train() / model.eval();
 * a NULL m is ignored. */
void tg_decoder_train(tg_decoder *m, bool on);
/** While on, each forward keeps the attention weights of every layer and
 * head (stored path); off (the default) the fused tg_attention runs
 * wherever it is faster and no weights are kept. A NULL m is ignored. */
void tg_decoder_record_attention(tg_decoder *m, bool on);
/** The recorded weights of head `head` of layer `layer` of the last forward,
 * [B, T, K] (K = T for tg_decoder_forward, the cached length for
 * tg_decoder_forward_cached; rows sum to 1, zero past each query's
 * position; before dropout), copied into a new tensor of the current scope,
 * not part of the graph. Call it before that forward's scope ends (the
 * recorded weights live there). NULL with an error for a NULL m, when not
 * recording, before a forward, or for a layer or head out of range. */
tg_tensor *tg_decoder_attention_weights(const tg_decoder *m, int layer, int head);
/** The number of parameter values, each tensor once, as nanoGPT's
 * get_num_params(non_embedding=False) (wpe and the relative tables
 * included); -1 with the error recorded for a NULL m. */
int64_t tg_decoder_num_params(tg_decoder *m);
/** Frees the model: every module and parameter it owns (tensors taken from
 * it, as by tg_decoder_params, become invalid). A NULL m is ignored. */
void tg_decoder_free(tg_decoder *m);

/** A KV cache for generation, one sequence (batch 1): the keys and values
 * of every layer for positions 0..len-1, [n_head, block_size, d/n_head]
 * each, so a new token attends to them instead of recomputing the whole prefix: a step
 * costs O(len d) attention plus O(d^2) per layer, not a full forward. Made
 * by tg_decoder_cache_new for one model (its sizes), freed by
 * tg_decoder_cache_free; the fields are read-only for users. */
typedef struct {
    int n_layer, n_head, head_dim, capacity; /**< capacity = block_size */
    int len;                                 /**< positions cached */
    tg_tensor **k, **v;                      /**< v: per layer, persistent, [n_head, capacity, head_dim] */
} tg_decoder_cache;
/** @var tg_decoder_cache::n_layer
 * The model's n_layer: the number of k and v tensors. */
/** @var tg_decoder_cache::n_head
 * The model's n_head. */
/** @var tg_decoder_cache::head_dim
 * n_embd / n_head. */
/** @var tg_decoder_cache::k
 * The keys: per layer, persistent, [n_head, capacity, head_dim]. */

/** An empty cache (len 0) for model m: 2 n_layer persistent tensors of
 * [n_head, block_size, n_embd / n_head], owned by the cache. NULL with the
 * error recorded for a NULL m or out of memory. */
tg_decoder_cache *tg_decoder_cache_new(const tg_decoder *m);
/** Forgets the cached positions (len = 0), for a new sequence; NULL is ignored. */
void tg_decoder_cache_reset(tg_decoder_cache *c);
/** Frees the cache and its tensors; NULL is ignored. */
void tg_decoder_cache_free(tg_decoder_cache *c);
/** Runs n tokens at positions c->len to c->len + n - 1 (an error past
 * block_size), each attending to the cached positions and, causally, to the
 * tokens before it; appends their keys and values (c->len += n). Returns
 * logits [1, n, V] equal to those positions' logits of tg_decoder_forward
 * over the whole sequence (to rounding). Inference only: runs with grad mode
 * off, so the result is not part of a graph; dropout follows the model's
 * mode (tg_decoder_train(m, false) for exact logits). NULL with the error
 * recorded for a NULL cache, bad tokens (as tg_decoder_forward) or a cache
 * made for another model's sizes; on error c->len is unchanged and the
 * cached positions are intact. */
tg_tensor *tg_decoder_forward_cached(tg_decoder *m, tg_decoder_cache *c, const int *tokens, int n);

/** Generates n_new tokens after the prompt, as nanoGPT's generate: n_new
 * times, the logits of the last position divided by temperature, cut to
 * the top_k largest (top_k <= 0 or >= V: all), one token drawn from their
 * softmax and appended. temperature 0 is greedy
 * (argmax). Writes the n_new new tokens to out (the prompt is not copied;
 * n_new 0 writes nothing and out may then be NULL).
 * The sequence is cropped to its last block_size tokens, as nanoGPT crops
 * idx_cond. Steps run through a KV cache; once the sequence outgrows
 * block_size the window slides, every token's position in it changes, and
 * the cache of the cropped window is rebuilt (one forward of block_size
 * tokens per step from then on: the cost of nanoGPT's generate).
 * Runs with grad mode and dropout off (the model's mode is restored);
 * draws from tg_rng_new(seed), so a seed gives the same tokens. Memory
 * comes from a scope of its own per step. Returns 0, or -1 with the error
 * recorded (NULL m, prompt or out, n_prompt < 1, n_new < 0, a token out of
 * range, temperature negative, NaN or infinite, out of memory); out then
 * holds the tokens generated before the failure. */
int tg_decoder_generate(tg_decoder *m, const int *prompt, int n_prompt, int n_new, tg_real temperature, int top_k,
                        uint64_t seed, int *out);

/* ---- sampling helpers (sample.c) --------------------------------------------
 * Over the last axis of x, one result per row (x->size / last dim rows),
 * written to out, which holds that many ints. x needs ndim >= 1 and a last
 * axis of at least one entry. */
/** Index of the largest value (the first on ties; NaN counts as largest, as
 * torch.argmax). Returns 0, or -1 with an error (NULL x or out, no last
 * axis). */
int tg_argmax(const tg_tensor *x, int *out);
/** One index per row drawn from softmax(x / temperature) restricted to the
 * top_k largest values (ties with the k-th largest kept, as nanoGPT's
 * logits < v[-1] cut); top_k <= 0 keeps all, temperature 0 is tg_argmax
 * (rng unused, may be NULL). One uniform draw of rng per row (inverse CDF,
 * in double). Returns 0, or -1 with an error (temperature negative, NaN or
 * infinite, NULL x, out or rng, a NaN or +inf logit, a row of -inf only);
 * out then holds the rows before the failing one. */
int tg_sample(const tg_tensor *x, tg_real temperature, int top_k, tg_rng *rng, int *out);

#endif
