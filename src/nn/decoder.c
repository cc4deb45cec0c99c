/* The GPT-2 decoder of nanoGPT's model.py, built from public ops (see
 * decoder.h for the architecture, the names and the tied head).
 *
 * One block, for x [B, T, d], h heads of size hd = d / h:
 *   qkv = c_attn(ln_1(x))                         [B, T, 3d]: q | k | v
 *   [B, T, 3, h, hd] -> permute (2,0,3,1,4) -> [3, B h, T, hd]: q, k, v are
 *       its three slices along axis 0 (one copy for all heads)
 *   y = softmax(q k^T / sqrt(hd) + causal) v      [B h, T, hd] (tg_attention)
 *   [B, h, T, hd] -> permute (0,2,1,3) -> [B, T, d]
 *   x = x + drop(attn.c_proj(y)),  x = x + drop(mlp.c_proj(gelu(mlp.c_fc(ln_2(x)))))
 * The same function runs a block with a KV cache: the new keys and values
 * are copied into the cache at their positions and the queries attend to
 * every cached key before them. */
#include "decoder.h"
#include "module.h"

#include "../io/checkpoint.h"
#include "../io/safetensors.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define INIT_STD 0.02 /* GPT-2's init of every Linear and Embedding weight */
#define LN_EPS   1e-5 /* nanoGPT's LayerNorm */

tg_decoder_config tg_decoder_config_default(int vocab_size, int block_size, int n_layer, int n_head, int n_embd) {
    return (tg_decoder_config){.vocab_size = vocab_size,
                               .block_size = block_size,
                               .n_layer = n_layer,
                               .n_head = n_head,
                               .n_embd = n_embd,
                               .dropout = 0,
                               .bias = true,
                               .pos = TG_PE_LEARNED,
                               .gelu = TG_DEC_GELU_TANH};
}

/* ---- construction ------------------------------------------------------------ */

/* A Linear with GPT-2's init: weight N(0, std^2), bias 0. */
static tg_linear *linear_new(int in, int out, bool bias, tg_real std, tg_rng *rng) {
    tg_linear *l = tg_linear_new(in, out, bias, rng);
    if (!l) return NULL;
    tg_fill_normal(l->weight, 0, std, rng);
    if (l->bias) memset(l->bias->data, 0, sizeof(tg_real) * (size_t)out);
    return l;
}

/* A LayerNorm (weight 1, bias 0); without bias, as nanoGPT's bias=False,
 * the bias stays a constant zero that is neither trained nor listed. */
static tg_layer_norm_layer *layernorm_new(int d, bool bias) {
    tg_layer_norm_layer *ln = tg_layer_norm_layer_new(d, (tg_real)LN_EPS);
    if (ln && !bias) tg_set_requires_grad(ln->bias, false);
    return ln;
}

static void block_free(tg_decoder_block *b) {
    if (!b) return;
    /* in the order of the forward */
    tg_layer_norm_layer_free(b->ln_1);
    tg_linear_free(b->c_attn);
    tg_dot_attention_free(b->attn);
    tg_linear_free(b->attn_proj);
    tg_dropout_layer_free(b->resid_drop);
    tg_layer_norm_layer_free(b->ln_2);
    tg_linear_free(b->c_fc);
    tg_linear_free(b->mlp_proj);
    tg_dropout_layer_free(b->mlp_drop);
    tg_position_free(&b->pos);
    tg_sys_free(b);
}

static tg_decoder_block *block_new(const tg_decoder_config *c, tg_rng *rng) {
    tg_decoder_block *b = tg_module_alloc("decoder", sizeof *b, false, NULL);
    if (!b) return NULL;
    int d = c->n_embd;
    /* GPT-2: the residual projections are scaled by 1/sqrt(N), N = 2
     * n_layer residual branches, so the residual stream's variance at init
     * does not grow with depth. */
    tg_real resid_std = (tg_real)(INIT_STD / sqrt(2.0 * c->n_layer));
    bool ok = (b->ln_1 = layernorm_new(d, c->bias)) && (b->c_attn = linear_new(d, 3 * d, c->bias, INIT_STD, rng)) &&
              (b->attn_proj = linear_new(d, d, c->bias, resid_std, rng)) &&
              (b->attn = tg_dot_attention_new(c->dropout, rng)) &&
              (b->resid_drop = tg_dropout_layer_new(c->dropout, rng)) && (b->ln_2 = layernorm_new(d, c->bias)) &&
              (b->c_fc = linear_new(d, 4 * d, c->bias, INIT_STD, rng)) &&
              (b->mlp_proj = linear_new(4 * d, d, c->bias, resid_std, rng)) &&
              (b->mlp_drop = tg_dropout_layer_new(c->dropout, rng));
    /* The block's position term (relative tables at GPT-2's init std, as
     * the other tables; ALiBi's slopes; RoPE's pairing; none otherwise). */
    ok = ok && tg_position_init(&b->pos, "decoder", c->pos, c->n_head, d / c->n_head,
                                c->relative_clip ? c->relative_clip : 16, c->rope_half, (tg_real)INIT_STD, rng) == 0;
    if (!ok) {
        block_free(b);
        return NULL;
    }
    return b;
}

static bool check_config(const tg_decoder_config *c) {
    if (c->vocab_size <= 0 || c->block_size <= 0 || c->n_layer <= 0 || c->n_head <= 0 || c->n_embd <= 0) {
        tg_set_error("decoder: vocab_size %d, block_size %d, n_layer %d, n_head %d and n_embd %d must be positive",
                     c->vocab_size, c->block_size, c->n_layer, c->n_head, c->n_embd);
        return false;
    }
    if (c->n_embd % c->n_head != 0) {
        tg_set_error("decoder: n_head %d does not divide n_embd %d", c->n_head, c->n_embd);
        return false;
    }
    if (c->n_embd > (1 << 28) || (int64_t)c->vocab_size * c->n_embd > ((int64_t)1 << 40)) {
        tg_set_error("decoder: n_embd %d with vocab_size %d is too large", c->n_embd, c->vocab_size);
        return false;
    }
    if (tg_pe_check_model("decoder", c->pos, TG_PE_DECODER, c->n_embd / c->n_head) != 0) return false;
    if (c->relative_clip < 0 || c->relative_clip > 4096) {
        tg_set_error("decoder: relative_clip %d must be in [0, 4096] (0: 16)", c->relative_clip);
        return false;
    }
    if (c->gelu != TG_DEC_GELU_TANH && c->gelu != TG_DEC_GELU_ERF) {
        tg_set_error("decoder: unknown gelu kind %d", (int)c->gelu);
        return false;
    }
    return tg_check_dropout("decoder", c->dropout);
}

tg_decoder *tg_decoder_new(const tg_decoder_config *cfg, tg_rng *rng) {
    if (!cfg || !rng) {
        tg_set_error("decoder: NULL %s", !cfg ? "config" : "rng");
        return NULL;
    }
    if (!check_config(cfg)) return NULL;
    tg_decoder *m = tg_module_alloc("decoder", sizeof *m, false, NULL);
    if (!m) return NULL;
    m->cfg = *cfg;
    m->training = true;
    int d = cfg->n_embd;
    const tg_pe_rule *pe = tg_pe_rule_of(cfg->pos); /* a table added to the input: wpe, the row's */
    bool ok =
        (m->wte = tg_embedding_new(cfg->vocab_size, d, (tg_real)INIT_STD, rng)) &&
        (pe->where != TG_PE_AT_INPUT || (m->wpe = pe->decoder_table(cfg->block_size, d, (tg_real)INIT_STD, rng))) &&
        (m->drop = tg_dropout_layer_new(cfg->dropout, rng));
    if (ok) {
        m->h = tg_sys_calloc((size_t)cfg->n_layer, sizeof *m->h);
        if (!m->h) tg_set_error("decoder: out of memory");
        ok = m->h != NULL;
    }
    for (int i = 0; ok && i < cfg->n_layer; i++) ok = (m->h[i] = block_new(cfg, rng)) != NULL;
    if (ok) ok = (m->ln_f = layernorm_new(d, cfg->bias)) != NULL;
    if (!ok) {
        tg_decoder_free(m);
        return NULL;
    }
    return m;
}

void tg_decoder_free(tg_decoder *m) {
    if (!m) return;
    tg_embedding_free(m->wte);
    tg_embedding_free(m->wpe);
    tg_dropout_layer_free(m->drop);
    if (m->h)
        for (int i = 0; i < m->cfg.n_layer; i++) block_free(m->h[i]);
    tg_sys_free(m->h);
    tg_layer_norm_layer_free(m->ln_f);
    tg_sys_free(m);
}

/* ---- forward ------------------------------------------------------------------ */

/* The cache a block writes to and reads from, or NULL (a plain forward). */
typedef struct {
    tg_tensor *k, *v; /* [h, capacity, hd] */
    int start;        /* position of the first new token */
} block_cache;

/* Keys or values of the new tokens, [h, T, hd] (B = 1), copied into the
 * cache [h, capacity, hd] at rows start..start+T-1 of each head. */
static void cache_write(tg_tensor *cache, const tg_tensor *x, int start) {
    int h = x->shape[0], T = x->shape[1], hd = x->shape[2], cap = cache->shape[1];
    for (int j = 0; j < h; j++)
        memcpy(cache->data + ((size_t)j * cap + start) * hd, x->data + (size_t)j * T * hd,
               sizeof(tg_real) * (size_t)T * hd);
}

/* The cached rows 0..len-1 of every head, [h, len, hd]. */
static tg_tensor *cache_read(tg_tensor *cache, int len) {
    return len == cache->shape[1] ? cache : tg_slice(cache, 1, 0, len);
}

/* x normalised by ln and stored as `to` (the layer's own checks first). */
static tg_tensor *norm(tg_layer_norm_layer *ln, tg_tensor *x, tg_dtype to) {
    if (!tg_module_input("layernorm", ln, x) || !tg_module_last_dim("layernorm", x, ln->dim)) return NULL;
    return tg_layer_norm_to(x, ln->weight, ln->bias, ln->eps, to);
}

/* x + drop(proj(a)): without dropout one op, x + a W^T + b, whose GEMM
 * starts from x + b (tg_affine_add): no tensor for a W^T + b. */
static tg_tensor *residual(tg_tensor *x, tg_linear *proj, tg_dropout_layer *drop, tg_tensor *a) {
    if (tg_dropout_layer_active_p(drop) == 0 && proj && a) return tg_affine_add(x, a, proj->weight, proj->bias);
    return tg_add(x, tg_dropout_layer_forward(drop, tg_linear_forward(proj, a)));
}

static tg_tensor *block_forward(tg_decoder *m, tg_decoder_block *b, tg_tensor *x, int B, int T, block_cache *cache) {
    int h = m->cfg.n_head, d = m->cfg.n_embd, hd = d / h;
    /* With bf16 products, the training forward keeps what only feeds
     * products in bf16, as torch's autocast keeps a Linear's result: the
     * normalised rows, qkv and the attention's output (when the fused
     * attention reads qkv as it lies and no RoPE turns it), c_fc's GELU
     * and its pre-activation. Half the bytes a step keeps; the products
     * read the same bf16 values they would have rounded. */
    bool bf16 = !cache && tg_get_precision() == TG_PREC_BF16;
    tg_dtype act = bf16 ? TG_DTYPE_BF16 : TG_DTYPE_REAL;
    tg_attn_pos terms;
    const tg_attn_pos *pp = cache ? NULL : tg_position_apply(&b->pos, h, 0, NULL, NULL, &terms);
    const tg_pe_rule *pe = tg_pe_rule_of(b->pos.kind);
    bool qkv_bf16 =
        false && bf16 && !(pe && pe->where == TG_PE_AT_QK) && tg_dot_attention_takes_fused(b->attn, T, pp != NULL);
    tg_tensor *qkv = tg_affine_to(norm(b->ln_1, x, act), b->c_attn->weight, b->c_attn->bias,
                                  qkv_bf16 ? TG_DTYPE_BF16 : TG_DTYPE_REAL);
    tg_mask mask = {.causal = true};
    tg_tensor *y; /* [B, T, d] */
    if (!cache) { /* training: the heads read where c_attn wrote them (RoPE turns q and k there) */
        qkv = tg_position_rotate_heads(&b->pos, qkv, 3 * h, 2 * h, 0);
        y = tg_dot_attention_forward_qkv(b->attn, qkv, h, mask, pp);
    } else { /* generation: each head's keys and values go to the cache, [h, cap, hd] */
        qkv = tg_reshape(tg_permute(tg_reshape(qkv, TG_SHAPE(B, T, 3, h, hd)), (const int[]){2, 0, 3, 1, 4}),
                         TG_SHAPE(3, B * h, T, hd));
        tg_tensor *q = tg_reshape(tg_slice(qkv, 0, 0, 1), TG_SHAPE(B * h, T, hd));
        tg_tensor *k = tg_reshape(tg_slice(qkv, 0, 1, 2), TG_SHAPE(B * h, T, hd));
        tg_tensor *v = tg_reshape(tg_slice(qkv, 0, 2, 3), TG_SHAPE(B * h, T, hd));
        if (!q || !k || !v) return NULL;
        /* RoPE rotates before caching: a cached key keeps its position */
        const tg_attn_pos *pp = tg_position_apply(&b->pos, h, cache->start, &q, &k, &terms);
        if (!q || !k) return NULL;
        cache_write(cache->k, k, cache->start);
        cache_write(cache->v, v, cache->start);
        if (cache->start > 0) {
            /* Query i (position start + i) sees keys 0..start+i: every cached
             * one and the new ones up to itself. One new token sees them all.
             * (From position 0 the plain causal mask is the same.) */
            k = cache_read(cache->k, cache->start + T);
            v = cache_read(cache->v, cache->start + T);
            mask.causal = false;
            if (T > 1) {
                int *lens = tg_arena_alloc(sizeof(int) * (size_t)h * (size_t)T);
                if (!lens) return NULL;
                for (int j = 0; j < h; j++)
                    for (int i = 0; i < T; i++) lens[j * T + i] = cache->start + i + 1;
                mask.lens = lens;
                mask.lens_ndim = 2;
            }
        }
        y = tg_module_merge_heads(tg_dot_attention_forward_pos(b->attn, q, k, v, mask, pp), h); /* [B h, T, hd] -> */
    }
    x = residual(x, b->attn_proj, b->resid_drop, y);
    /* c_fc and its GELU as one op: the GEMM applies the GELU as it finishes each block */
    tg_tensor *f =
        tg_affine_gelu_to(norm(b->ln_2, x, act), b->c_fc->weight, b->c_fc->bias, m->cfg.gelu == TG_DEC_GELU_TANH, act);
    return residual(x, b->mlp_proj, b->mlp_drop, f);
}

/* Checks tokens [B, T] at positions start..start+T-1 against the model. */
static bool check_tokens(const char *op, const tg_decoder *m, const int *tokens, int B, int T, int start) {
    if (!m || !tokens) {
        tg_set_error("%s: NULL %s", op, !m ? "module" : "tokens");
        return false;
    }
    if (B <= 0 || T <= 0) {
        tg_set_error("%s: tokens (%d,%d): sizes must be positive", op, B, T);
        return false;
    }
    if (start + T > m->cfg.block_size) {
        if (start == 0)
            tg_set_error("%s: sequence length %d exceeds block_size %d", op, T, m->cfg.block_size);
        else
            tg_set_error("%s: %d cached + %d new positions exceed block_size %d", op, start, T, m->cfg.block_size);
        return false;
    }
    int V = m->cfg.vocab_size;
    for (int64_t i = 0; i < (int64_t)B * T; i++)
        if (tokens[i] < 0 || tokens[i] >= V) {
            tg_set_error("%s: token %d at (%lld,%lld) is outside the vocabulary [0, %d)", op, tokens[i],
                         (long long)(i / T), (long long)(i % T), V);
            return false;
        }
    return true;
}

/* The model up to ln_f on tokens [B, T] at positions start..: [B, T, d],
 * or only the last position's [B, 1, d] when last_only (nanoGPT's inference
 * shortcut: the head is the largest product of a step). */
static tg_tensor *hidden_forward(tg_decoder *m, const int *tokens, int B, int T, int start, tg_decoder_cache *c,
                                 bool last_only) {
    tg_tensor *x = tg_embedding_forward(m->wte, tokens, TG_SHAPE(B, T));
    if (m->wpe) {
        tg_tensor *wpe = m->wpe->weight;
        tg_tensor *pos = start == 0 && T == m->cfg.block_size ? wpe : tg_slice(wpe, 0, start, start + T);
        x = tg_add(x, pos); /* [B,T,d] + [T,d] */
    }
    x = tg_dropout_layer_forward(m->drop, x);
    for (int i = 0; i < m->cfg.n_layer; i++) {
        block_cache bc = {c ? c->k[i] : NULL, c ? c->v[i] : NULL, start};
        x = block_forward(m, m->h[i], x, B, T, c ? &bc : NULL);
    }
    if (last_only && T > 1) x = tg_slice(x, 1, T - 1, T);
    return tg_layer_norm_layer_forward(m->ln_f, x);
}

/* hidden_forward, then the tied head: logits = x wte^T. */
static tg_tensor *model_forward(tg_decoder *m, const int *tokens, int B, int T, int start, tg_decoder_cache *c,
                                bool last_only) {
    return tg_matmul_t(hidden_forward(m, tokens, B, T, start, c, last_only), m->wte->weight, false, true);
}

tg_tensor *tg_decoder_hidden(tg_decoder *m, const int *tokens, int B, int T) {
    if (!check_tokens("decoder_hidden", m, tokens, B, T, 0)) return NULL;
    return hidden_forward(m, tokens, B, T, 0, NULL, false);
}

tg_tensor *tg_decoder_forward(tg_decoder *m, const int *tokens, int B, int T) {
    if (!check_tokens("decoder_forward", m, tokens, B, T, 0)) return NULL;
    return model_forward(m, tokens, B, T, 0, NULL, false);
}

/* The logits of a loss, or NULL with the error recorded. */
static tg_tensor *loss_logits(const char *op, tg_decoder *m, const int *tokens, const int *targets, int B, int T) {
    if (!check_tokens(op, m, tokens, B, T, 0)) return NULL;
    if (!targets) {
        tg_set_error("%s: NULL targets", op);
        return NULL;
    }
    return model_forward(m, tokens, B, T, 0, NULL, false);
}

tg_tensor *tg_decoder_loss(tg_decoder *m, const int *tokens, const int *targets, int B, int T) {
    return tg_cross_entropy(loss_logits("decoder_loss", m, tokens, targets, B, T), targets, NULL, -1);
}

tg_tensor *tg_decoder_loss_sum(tg_decoder *m, const int *tokens, const int *targets, int B, int T, int64_t *counted) {
    return tg_cross_entropy_sum(loss_logits("decoder_loss_sum", m, tokens, targets, B, T), targets, NULL, -1, counted);
}

/* ---- parameters, checkpoints ---------------------------------------------------- */

static int linear_params(tg_linear *l, tg_params *p, const char *prefix, const char *name) {
    char b[TG_PARAM_NAME_MAX];
    return tg_param_name(b, prefix, name) || tg_linear_params(l, p, b) ? -1 : 0;
}

/* weight, and bias unless the model has none (nanoGPT's bias=False). */
static int layernorm_params(tg_layer_norm_layer *ln, bool bias, tg_params *p, const char *prefix, const char *name) {
    char b[TG_PARAM_NAME_MAX];
    if (tg_param_name(b, prefix, name) || tg_params_add(p, b, "weight", ln->weight)) return -1;
    return bias ? tg_params_add(p, b, "bias", ln->bias) : 0;
}

int tg_decoder_params(tg_decoder *m, tg_params *p, const char *prefix) {
    char tr[TG_PARAM_NAME_MAX], b[TG_PARAM_NAME_MAX], blk[TG_PARAM_NAME_MAX], a[TG_PARAM_NAME_MAX], index[16];
    if (!tg_module_present("decoder", "params", m)) return -1;
    bool bias = m->cfg.bias;
    if (tg_param_name(tr, prefix, "transformer")) return -1;
    if (tg_param_name(b, tr, "wte") || tg_embedding_params(m->wte, p, b)) return -1;
    if (m->wpe && (tg_param_name(b, tr, "wpe") || tg_embedding_params(m->wpe, p, b))) return -1;
    if (tg_param_name(b, tr, "h")) return -1;
    for (int i = 0; i < m->cfg.n_layer; i++) {
        tg_decoder_block *k = m->h[i];
        snprintf(index, sizeof index, "%d", i);
        if (tg_param_name(blk, b, index) || layernorm_params(k->ln_1, bias, p, blk, "ln_1") ||
            linear_params(k->c_attn, p, blk, "attn.c_attn") || linear_params(k->attn_proj, p, blk, "attn.c_proj") ||
            tg_param_name(a, blk, "attn") || tg_position_params(&k->pos, p, a) ||
            layernorm_params(k->ln_2, bias, p, blk, "ln_2") || linear_params(k->c_fc, p, blk, "mlp.c_fc") ||
            linear_params(k->mlp_proj, p, blk, "mlp.c_proj"))
            return -1;
    }
    return layernorm_params(m->ln_f, bias, p, tr, "ln_f");
}

double tg_decoder_flops(const tg_decoder_config *c, int B, int T) {
    if (!c) return 0;
    double N = (double)B * T, d = c->n_embd, L = c->n_layer;
    double P = L * 12 * d * d + (double)c->vocab_size * d; /* weights in products: 4 Linears a block, the head */
    return 6 * N * P + 3 * 4.0 * B * (double)T * T * d * L;
}

int tg_decoder_rngs(tg_decoder *m, tg_rngs *out) {
    char name[32];
    if (!tg_module_present("decoder", "rngs", m) || tg_rngs_add(out, "drop", tg_dropout_layer_rng(m->drop))) return -1;
    for (int i = 0; i < m->cfg.n_layer; i++) {
        const char *part[3] = {"attn", "resid", "mlp"};
        tg_rng *g[3] = {tg_dropout_layer_rng(m->h[i]->attn->dropout), tg_dropout_layer_rng(m->h[i]->resid_drop),
                        tg_dropout_layer_rng(m->h[i]->mlp_drop)};
        for (int j = 0; j < 3; j++) {
            snprintf(name, sizeof name, "h%d.%s", i, part[j]);
            if (tg_rngs_add(out, name, g[j])) return -1;
        }
    }
    return 0;
}

int tg_decoder_state_dict(tg_decoder *m, tg_params *p, const char *prefix) {
    if (tg_decoder_params(m, p, prefix)) return -1;
    return tg_params_add(p, prefix, "lm_head.weight", m->wte->weight);
}

int64_t tg_decoder_num_params(tg_decoder *m) {
    tg_params p;
    tg_params_init(&p);
    int64_t n = tg_decoder_params(m, &p, NULL) ? -1 : tg_params_numel(&p);
    tg_params_free(&p);
    return n;
}

/* True when tensors i and j of st hold the same values (after conversion). */
static int same_values(const tg_safetensors *st, int i, int j, bool *same) {
    const tg_st_entry *a = &st->entries[i], *b = &st->entries[j];
    *same = a->ndim == b->ndim && a->numel == b->numel;
    for (int k = 0; *same && k < a->ndim; k++) *same = a->shape[k] == b->shape[k];
    if (!*same) return 0;
    tg_real *x = tg_sys_alloc(sizeof(tg_real) * (size_t)(a->numel ? a->numel : 1));
    tg_real *y = tg_sys_alloc(sizeof(tg_real) * (size_t)(a->numel ? a->numel : 1));
    int rc = x && y && !tg_safetensors_read(st, i, x) && !tg_safetensors_read(st, j, y) ? 0 : -1;
    if (rc == 0) *same = memcmp(x, y, sizeof(tg_real) * (size_t)a->numel) == 0;
    tg_sys_free(x);
    tg_sys_free(y);
    return rc;
}

int tg_decoder_load(tg_decoder *m, const char *path) {
    if (!m || !path) {
        tg_set_error("decoder_load: NULL %s", !m ? "module" : "path");
        return -1;
    }
    /* Which names the tied weight has in the file decides the list that
     * tg_checkpoint_load (strict, all checks before any copy) fills. */
    tg_safetensors st;
    if (tg_safetensors_open(path, &st)) return -1;
    int iw = tg_safetensors_find(&st, "transformer.wte.weight"), ih = tg_safetensors_find(&st, "lm_head.weight");
    bool same = true;
    int rc = iw >= 0 && ih >= 0 ? same_values(&st, iw, ih, &same) : 0;
    tg_safetensors_close(&st);
    if (rc) {
        tg_set_error("decoder_load: %s: out of memory comparing the tied weights", path);
        return -1;
    }
    if (!same) {
        tg_set_error("decoder_load: %s: transformer.wte.weight and lm_head.weight differ, but the model ties "
                     "them (one tensor)",
                     path);
        return -1;
    }
    tg_params p;
    tg_params_init(&p);
    rc = iw >= 0 && ih >= 0 ? tg_decoder_state_dict(m, &p, NULL) : tg_decoder_params(m, &p, NULL);
    if (!rc && iw < 0 && ih >= 0) /* saved by safetensors.torch.save_model: the head's name only */
        snprintf(p.items[0].name, sizeof p.items[0].name, "%s", "lm_head.weight");
    if (!rc) rc = tg_checkpoint_load(path, &p);
    tg_params_free(&p);
    return rc;
}

/* ---- modes, attention weights ---------------------------------------------------- */

void tg_decoder_train(tg_decoder *m, bool on) {
    if (!m) return;
    m->training = on;
    tg_dropout_layer_train(m->drop, on);
    for (int i = 0; i < m->cfg.n_layer; i++) {
        tg_dot_attention_train(m->h[i]->attn, on);
        tg_dropout_layer_train(m->h[i]->resid_drop, on);
        tg_dropout_layer_train(m->h[i]->mlp_drop, on);
    }
}

void tg_decoder_record_attention(tg_decoder *m, bool on) {
    if (!m) return;
    for (int i = 0; i < m->cfg.n_layer; i++) tg_dot_attention_record(m->h[i]->attn, on);
}

tg_tensor *tg_decoder_attention_weights(const tg_decoder *m, int layer, int head) {
    if (!tg_module_present("decoder_attention", "weights", m)) return NULL;
    if (layer < 0 || layer >= m->cfg.n_layer) {
        tg_set_error("decoder_attention_weights: layer %d is outside [0, %d)", layer, m->cfg.n_layer);
        return NULL;
    }
    int h = m->cfg.n_head;
    if (head < 0 || head >= h) {
        tg_set_error("decoder_attention_weights: head %d is outside [0, %d)", head, h);
        return NULL;
    }
    const tg_dot_attention *a = m->h[layer]->attn;
    const tg_tensor *w = a->attention_weights; /* [B h, T, K], row b h + head */
    if (!a->record || !w) {
        tg_set_error("decoder_attention_weights: no weights recorded (tg_decoder_record_attention, then a forward)");
        return NULL;
    }
    return tg_module_head_weights("decoder_attention_weights", w, h, head);
}

/* ---- KV cache ----------------------------------------------------------------- */

tg_decoder_cache *tg_decoder_cache_new(const tg_decoder *m) {
    if (!tg_module_present("decoder", "cache_new", m)) return NULL;
    const tg_decoder_config *cfg = &m->cfg;
    tg_decoder_cache *c = tg_sys_calloc(1, sizeof *c);
    if (c) {
        c->k = tg_sys_calloc((size_t)cfg->n_layer, sizeof *c->k);
        c->v = tg_sys_calloc((size_t)cfg->n_layer, sizeof *c->v);
    }
    if (!c || !c->k || !c->v) {
        tg_set_error("decoder_cache_new: out of memory");
        tg_decoder_cache_free(c);
        return NULL;
    }
    c->n_layer = cfg->n_layer;
    c->n_head = cfg->n_head;
    c->head_dim = cfg->n_embd / cfg->n_head;
    c->capacity = cfg->block_size;
    for (int i = 0; i < c->n_layer; i++) {
        c->k[i] = tg_empty_persistent(TG_SHAPE(c->n_head, c->capacity, c->head_dim));
        c->v[i] = tg_empty_persistent(TG_SHAPE(c->n_head, c->capacity, c->head_dim));
        if (!c->k[i] || !c->v[i]) {
            tg_decoder_cache_free(c);
            return NULL;
        }
    }
    return c;
}

void tg_decoder_cache_reset(tg_decoder_cache *c) {
    if (c) c->len = 0;
}

void tg_decoder_cache_free(tg_decoder_cache *c) {
    if (!c) return;
    for (int i = 0; i < c->n_layer; i++) {
        if (c->k) tg_free(c->k[i]);
        if (c->v) tg_free(c->v[i]);
    }
    tg_sys_free(c->k);
    tg_sys_free(c->v);
    tg_sys_free(c);
}

static tg_tensor *forward_cached(tg_decoder *m, tg_decoder_cache *c, const int *tokens, int n, bool last_only) {
    if (!c) {
        tg_set_error("decoder_forward_cached: NULL cache");
        return NULL;
    }
    if (!check_tokens("decoder_forward_cached", m, tokens, 1, n, c->len)) return NULL;
    int hd = m->cfg.n_embd / m->cfg.n_head;
    if (c->n_layer != m->cfg.n_layer || c->n_head != m->cfg.n_head || c->head_dim != hd ||
        c->capacity != m->cfg.block_size) {
        tg_set_error("decoder_forward_cached: the cache (%d layers, %d heads of %d, %d positions) was made for "
                     "another model",
                     c->n_layer, c->n_head, c->head_dim, c->capacity);
        return NULL;
    }
    bool grad = tg_set_grad_enabled(false);
    tg_tensor *logits = model_forward(m, tokens, 1, n, c->len, c, last_only);
    tg_set_grad_enabled(grad);
    if (logits) c->len += n;
    return logits;
}

tg_tensor *tg_decoder_forward_cached(tg_decoder *m, tg_decoder_cache *c, const int *tokens, int n) {
    return forward_cached(m, c, tokens, n, false);
}

/* ---- generation ------------------------------------------------------------------ */

int tg_decoder_generate(tg_decoder *m, const int *prompt, int n_prompt, int n_new, tg_real temperature, int top_k,
                        uint64_t seed, int *out) {
    if (!m || !prompt || (!out && n_new > 0)) {
        tg_set_error("decoder_generate: NULL %s", !m ? "module" : !prompt ? "prompt" : "out");
        return -1;
    }
    if (n_prompt < 1 || n_new < 0) {
        tg_set_error("decoder_generate: %d prompt tokens (need at least 1) and %d new ones (not negative)", n_prompt,
                     n_new);
        return -1;
    }
    if (!(temperature >= 0)) {
        tg_set_error("decoder_generate: temperature %g must be 0 (greedy) or positive", (double)temperature);
        return -1;
    }
    for (int i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= m->cfg.vocab_size) {
            tg_set_error("decoder_generate: prompt token %d at %d is outside the vocabulary [0, %d)", prompt[i], i,
                         m->cfg.vocab_size);
            return -1;
        }
    if (n_new == 0) return 0;
    int bs = m->cfg.block_size;
    int *seq = tg_sys_alloc(sizeof(int) * ((size_t)n_prompt + (size_t)n_new));
    tg_decoder_cache *c = seq ? tg_decoder_cache_new(m) : NULL;
    if (!c) {
        if (!seq) tg_set_error("decoder_generate: out of memory");
        tg_sys_free(seq);
        return -1;
    }
    memcpy(seq, prompt, sizeof(int) * (size_t)n_prompt);
    bool training = m->training;
    tg_decoder_train(m, false);
    tg_rng rng = tg_rng_new(seed);
    int len = n_prompt, rc = 0;
    for (int i = 0; i < n_new && rc == 0; i++) {
        rc = tg_scope_begin();
        tg_tensor *logits = NULL;
        if (rc == 0 && i > 0 && c->len < bs) /* room in the cache: run the newest token alone */
            logits = forward_cached(m, c, seq + len - 1, 1, true);
        else if (rc == 0) {
            /* First step, or the window slides: every position changes, so
             * the cache is rebuilt from the last block_size tokens. */
            int w = len < bs ? len : bs;
            tg_decoder_cache_reset(c);
            logits = forward_cached(m, c, seq + len - w, w, true);
        }
        int next = 0;
        if (rc == 0 && (!logits || tg_sample(logits, temperature, top_k, &rng, &next))) rc = -1;
        tg_scope_end();
        if (rc == 0) seq[len++] = out[i] = next;
    }
    tg_decoder_train(m, training);
    tg_decoder_cache_free(c);
    tg_sys_free(seq);
    return rc;
}
