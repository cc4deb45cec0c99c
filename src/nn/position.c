/* Position kinds (nn.h, tg_pe_kind): their names, parsing, and the checks
 * every attention module (encoder, decoder, MHA) makes of them, once; and
 * the position term inside one attention layer (tg_position), set up,
 * applied and freed here for MHA and the decoder's blocks alike. */
#include "module.h"

#include <string.h>

static const char *const PE_NAMES[] = {"fixed", "learned", "none", "relative", "rope", "alibi"};
#define N_PE ((int)(sizeof PE_NAMES / sizeof PE_NAMES[0]))

const char *tg_pe_kind_name(tg_pe_kind kind) { return (int)kind >= 0 && (int)kind < N_PE ? PE_NAMES[kind] : NULL; }

int tg_pe_kind_parse(const char *name, tg_pe_kind *out) {
    for (int k = 0; name && k < N_PE; k++)
        if (strcmp(name, PE_NAMES[k]) == 0) {
            *out = (tg_pe_kind)k;
            return 0;
        }
    tg_set_error("position kind '%s': expected fixed, learned, none, relative, rope or alibi", name ? name : "(NULL)");
    return -1;
}

bool tg_pe_in_attention(tg_pe_kind kind) { return kind == TG_PE_RELATIVE || kind == TG_PE_ROPE || kind == TG_PE_ALIBI; }

int tg_pe_check(const char *op, tg_pe_kind kind, int head_dim) {
    if (!tg_pe_kind_name(kind)) {
        tg_set_error("%s: unknown position kind %d", op, (int)kind);
        return -1;
    }
    if (kind == TG_PE_ROPE && head_dim % 2 != 0) {
        tg_set_error("%s: RoPE rotates pairs of features: head size %d is odd", op, head_dim);
        return -1;
    }
    return 0;
}

/* ---- the position term of one attention layer -------------------------- */

int tg_position_init(tg_position *pos, const char *op, tg_pe_kind kind, int heads, int head_dim, int clip,
                     bool rope_half, tg_real std, tg_rng *rng) {
    if (!pos) {
        tg_set_error("%s: NULL position", op);
        return -1;
    }
    if (tg_pe_check(op, kind, head_dim) != 0) return -1;
    tg_position t = {.kind = kind}; /* *pos changes only on success */
    if (kind == TG_PE_RELATIVE) {
        if (clip < 1 || clip > 4096 || !rng) {
            tg_set_error("%s: relative clip %d must be in [1, 4096]%s", op, clip, rng ? "" : ", NULL rng");
            return -1;
        }
        /* Shaw et al.'s tables a^K and a^V, one row per clipped offset. */
        t.relative_k = tg_module_param(TG_SHAPE(2 * clip + 1, head_dim), TG_INIT_NORMAL, std, rng);
        t.relative_v =
            t.relative_k ? tg_module_param(TG_SHAPE(2 * clip + 1, head_dim), TG_INIT_NORMAL, std, rng) : NULL;
        t.clip = clip;
        if (!t.relative_v) {
            tg_position_free(&t);
            return -1;
        }
    } else if (kind == TG_PE_ALIBI) {
        t.alibi = tg_sys_alloc(sizeof(tg_real) * (size_t)(heads > 0 ? heads : 1));
        if (!t.alibi || tg_alibi_slopes(heads, t.alibi) != 0) {
            tg_set_error("%s: %s", op, t.alibi ? "ALiBi needs at least one head" : "out of memory");
            tg_position_free(&t);
            return -1;
        }
    } else if (kind == TG_PE_ROPE) {
        t.rope_half = rope_half;
    }
    *pos = t;
    return 0;
}

const tg_attn_pos *tg_position_apply(const tg_position *pos, int heads, int offset, tg_tensor **q, tg_tensor **k,
                                     tg_attn_pos *terms) {
    *terms = (tg_attn_pos){.heads = heads, .q_offset = offset, .clip = pos->clip};
    switch (pos->kind) {
    case TG_PE_RELATIVE:
        terms->rel_k = pos->relative_k;
        terms->rel_v = pos->relative_v;
        return terms;
    case TG_PE_ALIBI: terms->alibi = pos->alibi; return terms;
    case TG_PE_ROPE:         /* rotated at their positions offset..; a cached key keeps its rotation */
        if (!q) return NULL; /* rotated in the heads layout (tg_position_rotate_heads) */
        *q = tg_rope(*q, offset, 10000, pos->rope_half);
        *k = tg_rope(*k, offset, 10000, pos->rope_half);
        return NULL;
    default: return NULL;
    }
}

tg_tensor *tg_position_rotate_heads(const tg_position *pos, tg_tensor *x, int heads, int rotated, int offset) {
    return pos->kind == TG_PE_ROPE ? tg_rope_heads(x, heads, rotated, offset, 10000, pos->rope_half) : x;
}

int tg_position_params(const tg_position *pos, tg_params *p, const char *prefix) {
    if (!pos->relative_k) return 0; /* only RELATIVE has parameters: its two tables */
    return tg_params_add(p, prefix, "relative_k", pos->relative_k)
               ? -1
               : tg_params_add(p, prefix, "relative_v", pos->relative_v);
}

void tg_position_free(tg_position *pos) {
    if (!pos) return;
    tg_free(pos->relative_k);
    tg_free(pos->relative_v);
    tg_sys_free(pos->alibi);
    *pos = (tg_position){.kind = TG_PE_NONE};
}
