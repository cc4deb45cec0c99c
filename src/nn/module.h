/* Internal to src/nn (not installed): the checks and the allocation every
 * module shares, so that a constructor or a forward states only what is its
 * own. Errors follow nn.h's convention: "<module>: ..." from a constructor,
 * "<module>_<verb>: NULL module" from a call on a NULL module, and a NULL
 * input keeps the first message (tg_error_null), which names the op that
 * failed upstream. */
#ifndef TG_NN_MODULE_H
#define TG_NN_MODULE_H

#include "nn.h"

/* A zeroed module struct of `size` bytes. need_rng: the module draws its
 * initial weights, so rng must not be NULL. NULL on failure, with
 * "<module>: NULL rng" or "<module>: out of memory" recorded. */
void *tg_module_alloc(const char *module, size_t size, bool need_rng, const tg_rng *rng);
/* A parameter: persistent (it outlives every scope), requiring grad, filled
 * by `init` with scale s: U(-s, s), N(0, s^2), or the constant s (rng may
 * then be NULL). NULL when out of memory. */
typedef enum { TG_INIT_UNIFORM, TG_INIT_NORMAL, TG_INIT_CONST } tg_module_init;
tg_tensor *tg_module_param(int ndim, const int *shape, tg_module_init init, tg_real s, tg_rng *rng);
/* false, with "<module>_<verb>: NULL module" recorded, when m is NULL. */
bool tg_module_present(const char *module, const char *verb, const void *m);
/* x's last axis has `want` entries, else false with "<module>: input <shape>
 * last dim <d>, expected <want>" recorded. */
bool tg_module_last_dim(const char *module, const tg_tensor *x, int want);
/* A forward's entry check: the module is present and its input x is not NULL. */
bool tg_module_input(const char *module, const void *m, const tg_tensor *x);
/* Head `head` (checked by the caller to be in [0, h)) of the attention
 * weights recorded for h heads, [B*h, Q, K] with head j of batch entry b in
 * row b*h + j, copied out as a [B, Q, K] arena tensor; NULL when out of
 * memory, or with "<op>: input 0 is no longer valid ..." when the forward's
 * scope that recorded them has ended. */
tg_tensor *tg_module_head_weights(const char *op, const tg_tensor *w, int h, int head);
/* Whether m's forward with K keys, and position terms in the scores (pos:
 * a tg_attn_pos) or not, takes the fused tg_attention: the rule of
 * tg_dot_attention (not recording, softmax; under TG_PATH_AUTO, K >= 64,
 * or fewer keys without position terms or bf16 products). Defined in
 * attention.c. */
bool tg_dot_attention_takes_fused(const tg_dot_attention *m, int K, bool pos);
/* The heads of X [B, n, h d] as rows of a batch: -> [B h, n, d], head j of
 * entry b in row b h + j (d2l's transpose_qkv: reshape, permute (0, 2, 1,
 * 3), reshape); _merge_heads is its inverse (transpose_output). NULL in,
 * NULL out. Defined in module.c. */
tg_tensor *tg_module_split_heads(tg_tensor *X, int h);
tg_tensor *tg_module_merge_heads(tg_tensor *X, int h);
/* A module's Linear children, listed once per call in state_dict order
 * (defined in linear.c). _params appends each one's parameters under
 * "<prefix>.<names[i]>": 0, or -1 at the first failure with its error
 * recorded. _free frees each (NULL entries are skipped). */
int tg_linears_params(int n, const char *const *names, tg_linear *const *lin, tg_params *p, const char *prefix);
void tg_linears_free(int n, tg_linear *const *lin);

/* The position term of one attention layer (tg_position, nn.h; defined in
 * position.c), shared by MHA and the decoder's blocks.
 * Each kind's part is its row's (tg_pe_rule, position.c); these dispatch.
 * _in_attention: kind lives inside attention (RELATIVE, ROPE, ALIBI).
 * _init: *pos set up for `heads` heads of head_dim features (checked by
 * tg_pe_check; RELATIVE's two tables [2 clip + 1, head_dim] drawn N(0,
 * std^2) from rng, clip in [1, 4096]; ALIBI's slopes; ROPE's pairing; the
 * others nothing); 0, or -1 with "<op>: ..." recorded and *pos untouched.
 * _apply: for a forward whose first query sits at position `offset`,
 * rotates *q and *k, heads split ([B h, T, hd]), in place (ROPE; NULL on
 * failure, with the error recorded; q and k NULL: nothing to rotate) or
 * fills *terms and returns it for the attention op (RELATIVE, ALIBI); NULL
 * when the attention op needs no terms.
 * _rotate_heads: ROPE's rotation of x [B, T, heads hd] in the projections'
 * layout (tg_rope_heads: the first `rotated` heads), for the attention
 * entries that read heads in place; x itself for the other kinds.
 * _params: the tables as "<prefix>.relative_k", "<prefix>.relative_v".
 * _free: frees what _init allocated and leaves none. */
bool tg_pe_in_attention(tg_pe_kind kind);
/* The built-in rows' report functions (tg_pe_rule.report; position_report.c). */
int tg__pe_report_fixed(const tg_pe_view *v, tg_pe_plot *plots);
int tg__pe_report_learned(const tg_pe_view *v, tg_pe_plot *plots);
int tg__pe_report_relative(const tg_pe_view *v, tg_pe_plot *plots);
int tg__pe_report_alibi(const tg_pe_view *v, tg_pe_plot *plots);
int tg__pe_report_rope(const tg_pe_view *v, tg_pe_plot *plots);
/* _in_scores: kind's terms sit in the scores (RELATIVE, ALIBI: the stored
 * path adds them there). _check_model: tg_pe_check, then that model (a
 * TG_PE_ENCODER or TG_PE_DECODER bit) takes kind; -1 with "<op>: position
 * kind fixed: learned, none, ..." (the kinds it takes) recorded otherwise. */
bool tg_pe_in_scores(tg_pe_kind kind);
int tg_pe_check_model(const char *op, tg_pe_kind kind, unsigned model, int head_dim);
int tg_position_init(tg_position *pos, const char *op, tg_pe_kind kind, int heads, int head_dim, int clip,
                     bool rope_half, tg_real std, tg_rng *rng);
const tg_attn_pos *tg_position_apply(const tg_position *pos, int heads, int offset, tg_tensor **q, tg_tensor **k,
                                     tg_attn_pos *terms);
tg_tensor *tg_position_rotate_heads(const tg_position *pos, tg_tensor *x, int heads, int rotated, int offset);
int tg_position_params(const tg_position *pos, tg_params *p, const char *prefix);
void tg_position_free(tg_position *pos);

#endif
