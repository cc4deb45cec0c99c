/* Position kinds (nn.h, tg_pe_kind, tg_pe_rule): one row each, naming the
 * kind, where it acts, which models take it, its parameters, how the report
 * describes it and the functions that build and apply it and what the
 * report draws of it (position_report.c). Everything else
 * (the encoder's and the decoder's tables, MHA's and the decoder blocks'
 * terms inside attention, the programs' --pe flags, checkpoints' metadata)
 * reads the row, so a new kind is its row here, its op (autograd/, for a
 * kind inside attention) and its test; tests/test_position.c walks the
 * table. The position term inside one attention layer (tg_position) is set
 * up, applied and freed here for MHA and the decoder's blocks alike. */
#include "module.h"
#include "../tensor/tensor_internal.h"

#include <string.h>

/* ---- the rows' functions ------------------------------------------------- */

/* fixed: the sinusoidal table (posenc.c), drawing nothing. */
static tg_posenc *fixed_encoder_table(int d, tg_real dropout, int max_len, tg_real std, tg_rng *rng) {
    (void)std;
    return tg_posenc_new(d, dropout, max_len, rng);
}

/* learned: a trainable table. In an encoder it is added to unit-size scaled
 * embeddings and starts at their scale (std 1, or learned_pe_std), as BERT
 * and GPT-2 draw both tables with one std. At the module's own 0.02 it is
 * 50x weaker than the tokens and the model takes thousands of steps to find
 * positions (measured on the reversal task: see README). */
static tg_posenc *learned_encoder_table(int d, tg_real dropout, int max_len, tg_real std, tg_rng *rng) {
    tg_posenc *m = tg_posenc_learned_new(d, dropout, max_len, rng);
    if (m) tg_fill_normal(m->P, 0, std > 0 ? std : 1, rng);
    return m;
}

/* learned, in a decoder: GPT-2's wpe, N(0, std^2). */
static tg_embedding *learned_decoder_table(int block_size, int d, tg_real std, tg_rng *rng) {
    return tg_embedding_new(block_size, d, std, rng);
}

/* relative: Shaw et al.'s tables a^K and a^V, one row per clipped offset. */
static int relative_init(tg_position *t, const char *op, const tg_position_args *a) {
    if (a->clip < 1 || a->clip > 4096 || !a->rng) {
        tg_set_error("%s: relative clip %d must be in [1, 4096]%s", op, a->clip, a->rng ? "" : ", NULL rng");
        return -1;
    }
    t->relative_k = tg_module_param(TG_SHAPE(2 * a->clip + 1, a->head_dim), TG_INIT_NORMAL, a->std, a->rng);
    t->relative_v =
        t->relative_k ? tg_module_param(TG_SHAPE(2 * a->clip + 1, a->head_dim), TG_INIT_NORMAL, a->std, a->rng) : NULL;
    t->clip = a->clip;
    return t->relative_v ? 0 : -1;
}

static const tg_attn_pos *relative_apply(const tg_position *t, int offset, tg_tensor **q, tg_tensor **k,
                                         tg_attn_pos *terms) {
    (void)offset, (void)q, (void)k;
    terms->rel_k = t->relative_k;
    terms->rel_v = t->relative_v;
    return terms;
}

/* alibi: one slope per head (tg_alibi_slopes). */
static int alibi_init(tg_position *t, const char *op, const tg_position_args *a) {
    t->alibi = tg_sys_alloc(sizeof(tg_real) * (size_t)(a->heads > 0 ? a->heads : 1));
    if (t->alibi && tg_alibi_slopes(a->heads, t->alibi) == 0) return 0;
    tg_set_error("%s: %s", op, t->alibi ? "ALiBi needs at least one head" : "out of memory");
    return -1;
}

static const tg_attn_pos *alibi_apply(const tg_position *t, int offset, tg_tensor **q, tg_tensor **k,
                                      tg_attn_pos *terms) {
    (void)offset, (void)q, (void)k;
    terms->alibi = t->alibi;
    return terms;
}

/* rope: q and k rotated by angle position * 10000^(-2i/d) per feature pair. */
static int rope_check(const char *op, int head_dim) {
    if (head_dim % 2 == 0) return 0;
    tg_set_error("%s: RoPE rotates pairs of features: head size %d is odd", op, head_dim);
    return -1;
}

static int rope_init(tg_position *t, const char *op, const tg_position_args *a) {
    (void)op;
    t->rope_half = a->rope_half;
    return 0;
}

/* Rotated at their positions offset..; a cached key keeps its rotation. */
static const tg_attn_pos *rope_apply(const tg_position *t, int offset, tg_tensor **q, tg_tensor **k,
                                     tg_attn_pos *terms) {
    (void)terms;
    if (!q) return NULL; /* rotated in the heads layout (rope_rotate_heads) */
    *q = tg_rope(*q, offset, 10000, t->rope_half);
    *k = tg_rope(*k, offset, 10000, t->rope_half);
    return NULL;
}

static tg_tensor *rope_rotate_heads(const tg_position *t, tg_tensor *x, int heads, int rotated, int offset) {
    return tg_rope_heads(x, heads, rotated, offset, 10000, t->rope_half);
}

/* ---- the table ------------------------------------------------------------ */

/* Indexed by the enum, so a built-in row cannot sit at another kind's value. */
static const tg_pe_rule builtin[] = {
    [TG_PE_FIXED] = {.name = "fixed",
                     .about = "fixed sinusoidal table added to the input: P[i, 2j] = sin(i / 10000^(2j/d)), "
                              "P[i, 2j+1] = cos(i / 10000^(2j/d))",
                     .where = TG_PE_AT_INPUT,
                     .models = TG_PE_ENCODER, /* GPT's positions are learned, or inside attention */
                     .params = "",
                     .encoder_table = fixed_encoder_table,
                     .report = tg__pe_report_fixed},
    [TG_PE_LEARNED] = {.name = "learned",
                       .about = "learned absolute table added to the input (BERT, GPT-2)",
                       .where = TG_PE_AT_INPUT,
                       .models = TG_PE_ENCODER | TG_PE_DECODER,
                       .params = "pos_encoding.P (encoder), transformer.wpe.weight (decoder)",
                       .encoder_table = learned_encoder_table,
                       .decoder_table = learned_decoder_table,
                       .report = tg__pe_report_learned},
    [TG_PE_NONE] = {.name = "none",
                    .about = "no position information",
                    .where = TG_PE_AT_NOTHING,
                    .models = TG_PE_ENCODER | TG_PE_DECODER,
                    .params = ""},
    [TG_PE_RELATIVE] = {.name = "relative",
                        .about = "relative positions (Shaw et al. 2018): learned tables of clipped offsets "
                                 "in every attention's scores and values",
                        .where = TG_PE_AT_SCORES,
                        .models = TG_PE_ENCODER | TG_PE_DECODER,
                        .params = "relative_k, relative_v per attention layer",
                        .init = relative_init,
                        .apply = relative_apply,
                        .report = tg__pe_report_relative},
    [TG_PE_ROPE] = {.name = "rope",
                    .about = "rotary positions (Su et al. 2021): q and k rotated by their positions",
                    .where = TG_PE_AT_QK,
                    .models = TG_PE_ENCODER | TG_PE_DECODER,
                    .params = "",
                    .check = rope_check,
                    .init = rope_init,
                    .apply = rope_apply,
                    .rotate_heads = rope_rotate_heads,
                    .report = tg__pe_report_rope},
    [TG_PE_ALIBI] = {.name = "alibi",
                     .about = "ALiBi (Press et al. 2022): a linear bias -m_h |i - j| on each head's scores",
                     .where = TG_PE_AT_SCORES,
                     .models = TG_PE_ENCODER | TG_PE_DECODER,
                     .params = "",
                     .init = alibi_init,
                     .apply = alibi_apply,
                     .report = tg__pe_report_alibi},
};
#define N_BUILTIN ((int)(sizeof builtin / sizeof builtin[0]))
#define MAX_KINDS 16
static const tg_pe_rule *registered[MAX_KINDS - N_BUILTIN];
static int n_registered;

const tg_pe_rule *tg_pe_rule_of(tg_pe_kind kind) {
    int k = (int)kind;
    return k >= 0 && k < N_BUILTIN                          ? &builtin[k]
           : k >= N_BUILTIN && k < N_BUILTIN + n_registered ? registered[k - N_BUILTIN]
                                                            : NULL;
}

int tg_pe_kind_count(void) { return N_BUILTIN + n_registered; }

int tg_pe_rule_check(const tg_pe_rule *row) {
    const char *name = row && row->name ? row->name : "(no name)";
    const char *missing = NULL;
    if (!row)
        missing = "NULL row";
    else if (!row->name || !row->name[0] || strlen(row->name) > 31 ||
             strspn(row->name, "abcdefghijklmnopqrstuvwxyz0123456789_-") != strlen(row->name))
        missing = "a name of 1-31 characters of [a-z0-9_-]";
    else if (!row->about || !row->params)
        missing = "no about line or no params line";
    else if (!(row->models & (TG_PE_ENCODER | TG_PE_DECODER)) || (row->models & ~(TG_PE_ENCODER | TG_PE_DECODER)))
        missing = "models: TG_PE_ENCODER, TG_PE_DECODER or both";
    else if ((unsigned)row->where > TG_PE_AT_QK)
        missing = "where is not a tg_pe_where";
    else {
        switch (row->where) { /* no default: a new tg_pe_where is named by -Wswitch here */
        case TG_PE_AT_NOTHING: break;
        case TG_PE_AT_INPUT:
            if ((row->models & TG_PE_ENCODER) && !row->encoder_table) missing = "no encoder_table (it takes encoders)";
            if ((row->models & TG_PE_DECODER) && !row->decoder_table) missing = "no decoder_table (it takes decoders)";
            break;
        case TG_PE_AT_QK:
            if (!row->init || !row->apply || !row->rotate_heads)
                missing = "no init, apply or rotate_heads (it turns q and k)";
            break;
        case TG_PE_AT_SCORES:
            if (!row->init || !row->apply) missing = "no init or apply (it acts inside attention)";
            break;
        }
    }
    if (!missing) return 0;
    tg_set_error("pe_rule: %s: %s", name, missing);
    return -1;
}

int tg_pe_register(const tg_pe_rule *row, tg_pe_kind *kind) {
    if (!kind) {
        tg_set_error("pe_register: NULL kind");
        return -1;
    }
    if (tg_pe_rule_check(row) != 0) return -1;
    tg_pe_kind taken;
    if (tg_pe_kind_parse(row->name, &taken) == 0) {
        tg_set_error("pe_register: the name '%s' is taken", row->name);
        return -1;
    }
    tg_clear_error(); /* the parse's "expected ..." */
    if (N_BUILTIN + n_registered == MAX_KINDS) {
        tg_set_error("pe_register: %s: the table is full (%d kinds)", row->name, MAX_KINDS);
        return -1;
    }
    registered[n_registered++] = row;
    *kind = (tg_pe_kind)(N_BUILTIN + n_registered - 1);
    return 0;
}

const char *tg_pe_kind_name(tg_pe_kind kind) {
    const tg_pe_rule *r = tg_pe_rule_of(kind);
    return r ? r->name : NULL;
}

int tg_pe_kind_parse(const char *name, tg_pe_kind *out) {
    const int n = tg_pe_kind_count();
    for (int k = 0; name && k < n; k++)
        if (strcmp(name, tg_pe_rule_of((tg_pe_kind)k)->name) == 0) {
            *out = (tg_pe_kind)k;
            return 0;
        }
    char list[MAX_KINDS * 34] = "";
    for (int k = 0; k < n; k++) tg__list_append(list, sizeof list, k, n, tg_pe_rule_of((tg_pe_kind)k)->name);
    tg_set_error("position kind '%s': expected %s", name ? name : "(NULL)", list);
    return -1;
}

bool tg_pe_in_attention(tg_pe_kind kind) {
    const tg_pe_rule *r = tg_pe_rule_of(kind);
    return r && (r->where == TG_PE_AT_SCORES || r->where == TG_PE_AT_QK);
}

bool tg_pe_in_scores(tg_pe_kind kind) {
    const tg_pe_rule *r = tg_pe_rule_of(kind);
    return r && r->where == TG_PE_AT_SCORES;
}

int tg_pe_check(const char *op, tg_pe_kind kind, int head_dim) {
    const tg_pe_rule *r = tg_pe_rule_of(kind);
    if (!r) {
        tg_set_error("%s: unknown position kind %d", op, (int)kind);
        return -1;
    }
    return r->check ? r->check(op, head_dim) : 0;
}

int tg_pe_check_model(const char *op, tg_pe_kind kind, unsigned model, int head_dim) {
    if (tg_pe_check(op, kind, head_dim) != 0) return -1;
    if (tg_pe_rule_of(kind)->models & model) return 0;
    /* "decoder: position kind fixed: learned, none, relative, rope or alibi" */
    char list[MAX_KINDS * 34] = "";
    int n = 0, taken = 0;
    for (int k = 0; k < tg_pe_kind_count(); k++) taken += (tg_pe_rule_of((tg_pe_kind)k)->models & model) != 0;
    for (int k = 0; k < tg_pe_kind_count(); k++) {
        const tg_pe_rule *r = tg_pe_rule_of((tg_pe_kind)k);
        if (r->models & model) tg__list_append(list, sizeof list, n++, taken, r->name);
    }
    tg_set_error("%s: position kind %s: %s", op, tg_pe_kind_name(kind), list);
    return -1;
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
    const tg_pe_rule *r = tg_pe_rule_of(kind);
    if (tg_pe_in_attention(kind)) {
        tg_position_args a = {
            .heads = heads, .head_dim = head_dim, .clip = clip, .rope_half = rope_half, .std = std, .rng = rng};
        if (r->init(&t, op, &a) != 0) {
            tg_position_free(&t);
            return -1;
        }
    }
    *pos = t;
    return 0;
}

const tg_attn_pos *tg_position_apply(const tg_position *pos, int heads, int offset, tg_tensor **q, tg_tensor **k,
                                     tg_attn_pos *terms) {
    *terms = (tg_attn_pos){.heads = heads, .q_offset = offset, .clip = pos->clip};
    return tg_pe_in_attention(pos->kind) ? tg_pe_rule_of(pos->kind)->apply(pos, offset, q, k, terms) : NULL;
}

tg_tensor *tg_position_rotate_heads(const tg_position *pos, tg_tensor *x, int heads, int rotated, int offset) {
    const tg_pe_rule *r = tg_pe_rule_of(pos->kind);
    return r && r->where == TG_PE_AT_QK ? r->rotate_heads(pos, x, heads, rotated, offset) : x;
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
