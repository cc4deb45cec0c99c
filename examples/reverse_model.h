/* The reverse program's options and model, and how --load rebuilds a model
 * from a checkpoint, in a header so that the fuzz harness
 * (tests/fuzz/fuzz_reverse_load.c) runs exactly the code the program runs.
 *
 * A checkpoint is untrusted input. Its metadata is parsed by the flags' own
 * rules (cli_set: whole strings, integers, the flags' ranges), only known
 * task and pe values are accepted, and the sizes are checked against the
 * file's tensors before any model is built, so a crafted file can make the
 * program allocate no more than the file itself holds. */
#ifndef REVERSE_MODEL_H
#define REVERSE_MODEL_H

#include "cli.h"
#include "tgrad.h"

typedef struct {
    int steps, seq_len, vocab, batch, dim, heads, ffn, layers, eval_every, heldout, threads, seed;
    bool detect_anomaly, ddp;
    double lr, dropout, emb_std, pe_std;
    const char *task, *pe, *out, *load, *emb_init, *precision;
} options;

typedef struct { /* the model: encoder + output layer */
    tg_encoder *encoder;
    tg_linear *head;
    tg_params params;
} model;

enum { REVERSE_MAX_OPTS = 24 };
/* The positional tables hold 1000 positions, or T when longer. */
#define REVERSE_MAX_LEN(T) ((T) > 1000 ? (T) : 1000)

/* Fills o with the defaults and opts with the flags; returns their number. */
static int reverse_options(options *o, cli_opt *opts) {
    *o = (options){.steps = 1000, .seq_len = 16, .vocab = 16, .batch = 64, .dim = 64, .heads = 4, .ffn = 128};
    o->layers = 2, o->eval_every = 50, o->heldout = 1000, o->seed = 1, o->lr = 1e-3, o->dropout = 0.1;
    o->task = "reverse", o->pe = "all", o->out = "out", o->emb_init = "unit", o->precision = "fp32";
    const cli_opt table[] = {
        {"steps", CLI_INT, &o->steps, "training steps per variant", 1, 1e7},
        {"task", CLI_STR, &o->task, "reverse, or sort", 0, 0},
        {"pe", CLI_STR, &o->pe,
         "positional encoding: fixed, learned, none, relative, rope, alibi, or all (fixed, learned, none)", 0, 0},
        {"seq-len", CLI_INT, &o->seq_len, "sequence length T", 2, 1000},
        {"vocab", CLI_INT, &o->vocab, "vocabulary size V", 2, 4096},
        {"batch", CLI_INT, &o->batch, "sequences per step", 1, 1e5},
        {"dim", CLI_INT, &o->dim, "model width d", 2, 4096},
        {"heads", CLI_INT, &o->heads, "attention heads (must divide d)", 1, 256},
        {"ffn", CLI_INT, &o->ffn, "hidden width of the position-wise FFN", 1, 1e5},
        {"layers", CLI_INT, &o->layers, "encoder blocks", 1, 64},
        {"lr", CLI_REAL, &o->lr, "Adam learning rate", 1e-8, 10},
        {"dropout", CLI_REAL, &o->dropout, "dropout probability", 0, 0.99},
        {"emb-init", CLI_STR, &o->emb_init,
         "unit: embeddings N(0,1/d), so E*sqrt(d) has unit size; torch: N(0,1) as nn.Embedding", 0, 0},
        {"learned-pe-std", CLI_REAL, &o->pe_std,
         "init std of the learned table; 0: 1, the scale of the scaled embeddings (try 0.02)", 0, 100},
        {"eval-every", CLI_INT, &o->eval_every, "steps between held-out checks (the 99% mark) and checkpoints", 1, 1e7},
        {"heldout", CLI_INT, &o->heldout, "held-out sequences for the final accuracy", 1, 1e6},
        {"seed", CLI_INT, &o->seed, "random seed (data and initialisation)", 0, 2e9},
        {"threads", CLI_INT, &o->threads, "threads (0: the default, all CPUs available)", 0, 1024},
        {"out", CLI_STR, &o->out, "directory for figures and checkpoints", 0, 0},
        {"load", CLI_STR, &o->load, "evaluate this checkpoint instead of training", 0, 0},
        {"precision", CLI_STR, &o->precision, "fp32, or bf16: products in bfloat16 with fp32 sums (torch.autocast)", 0,
         0},
        {"detect-anomaly", CLI_FLAG, &o->detect_anomaly,
         "name the first op whose output or gradient goes NaN or Inf (slower)", 0, 0},
        {"ddp", CLI_FLAG, &o->ddp,
         "data-parallel training under mpirun -np N (make MPI=1); --batch is the global batch, split over the ranks", 0,
         0},
    };
    int n = (int)(sizeof table / sizeof table[0]);
    for (int i = 0; i < n; i++) opts[i] = table[i];
    return n;
}

/* The library's spelling of the --pe name (tg_pe_kind_name: a string that
 * outlives the flag), or NULL for an unknown one. */
static const char *pe_name(const char *name) {
    tg_pe_kind k;
    return tg_pe_kind_parse(name, &k) == 0 ? tg_pe_kind_name(k) : NULL;
}

static tg_pe_kind pe_kind(const char *name) {
    tg_pe_kind k;
    return tg_pe_kind_parse(name, &k) == 0 ? k : TG_PE_NONE;
}

/* On failure the caller still frees m with model_free. */
static int model_new(model *m, const options *o, const char *pe, uint64_t seed) {
    tg_rng rng = tg_rng_new(seed);
    tg_params_init(&m->params);
    tg_encoder_config cfg = {
        .vocab_size = o->vocab,
        .num_hiddens = o->dim,
        .ffn_hiddens = o->ffn,
        .num_heads = o->heads,
        .num_layers = o->layers,
        .max_len = REVERSE_MAX_LEN(o->seq_len),
        .dropout = (tg_real)o->dropout,
        .pe = pe_kind(pe),
        .use_bias = false,
        .embedding_std = (tg_real)o->emb_std,
        .learned_pe_std = (tg_real)o->pe_std,
    };
    m->encoder = tg_encoder_new(&cfg, &rng);
    m->head = tg_linear_new(o->dim, o->vocab, true, &rng);
    if (!m->encoder || !m->head) return -1;
    if (tg_encoder_params(m->encoder, &m->params, "encoder") || tg_linear_params(m->head, &m->params, "head"))
        return -1;
    return 0;
}

static void model_free(model *m) {
    tg_encoder_free(m->encoder);
    tg_linear_free(m->head);
    tg_params_free(&m->params);
}

/* Checks that tensor name exists with shape (rows, cols). */
static int reverse_expect_shape(const tg_safetensors *st, const char *path, const char *name, int rows, int cols) {
    int i = tg_safetensors_find(st, name);
    if (i < 0) {
        tg_set_error("%s: no tensor '%s'", path, name);
        return -1;
    }
    const tg_st_entry *e = &st->entries[i];
    if (e->ndim != 2 || e->shape[0] != rows || e->shape[1] != cols) {
        char got[64];
        tg_set_error("%s: tensor '%s' has shape %s, but the metadata says (%d,%d)", path, name,
                     tg_shape_str(got, e->ndim, e->shape), rows, cols);
        return -1;
    }
    return 0;
}

/* "model." in a run's checkpoint (train_state, best: the model beside the
 * optimizer, src/train/run.h), "" in the model file reverse saves. */
static const char *reverse_prefix(const tg_safetensors *st) {
    return tg_safetensors_find(st, "model.encoder.embedding.weight") >= 0 ? "model." : "";
}

/* Reads the model's configuration from the checkpoint at path into o and
 * *pe (a string literal). Returns 0, or -1 with the reason recorded. */
static int reverse_config_from_checkpoint(const char *path, options *o, const cli_opt *opts, int nopt,
                                          const char **pe) {
    tg_safetensors st;
    if (tg_safetensors_open(path, &st) != 0) return -1;
    static const char *const keys[] = {"vocab", "seq_len", "dim", "heads", "ffn", "layers", "task", "pe"};
    char vals[8][64];
    int rc = 0;
    for (int k = 0; k < 8 && rc == 0; k++) {
        long len = tg_safetensors_meta(&st, keys[k], vals[k], sizeof vals[k]);
        if (len <= 0 || len >= (long)sizeof vals[k]) {
            tg_set_error("%s: metadata '%s' is %s", path, keys[k],
                         len < 0    ? "missing"
                         : len == 0 ? "empty"
                                    : "too long");
            rc = -1;
        }
    }
    for (int k = 0; k < 6 && rc == 0; k++) { /* the integers, by the rules of their flags */
        char flag[16], why[128];
        snprintf(flag, sizeof flag, "%s", keys[k]);
        for (char *c = flag; *c; c++)
            if (*c == '_') *c = '-';
        const cli_opt *opt = NULL;
        for (int i = 0; i < nopt; i++)
            if (strcmp(opts[i].name, flag) == 0) opt = &opts[i];
        if (!opt || !cli_set(opt, vals[k], why, sizeof why)) {
            tg_set_error("%s: metadata '%s': %s", path, keys[k], opt ? why : "no such option");
            rc = -1;
        }
    }
    if (rc == 0) {
        const char *task = strcmp(vals[6], "reverse") == 0 ? "reverse" : strcmp(vals[6], "sort") == 0 ? "sort" : NULL;
        const char *kind = pe_name(vals[7]);
        if (!task || !kind) {
            tg_set_error("%s: metadata '%s' is '%s'; expected %s", path, task ? "pe" : "task", task ? vals[7] : vals[6],
                         task ? "fixed, learned, none, relative, rope or alibi" : "reverse or sort");
            rc = -1;
        } else if (o->dim % o->heads != 0) {
            tg_set_error("%s: metadata: heads %d does not divide dim %d", path, o->heads, o->dim);
            rc = -1;
        } else {
            o->task = task;
            *pe = kind;
        }
    }
    /* The sizes against the tensors, before anything is allocated for them
     * (a run's checkpoint names them model.*). */
    const char *pre = reverse_prefix(&st);
    char name[TG_PARAM_NAME_MAX];
    snprintf(name, sizeof name, "%sencoder.embedding.weight", pre);
    if (rc == 0) rc = reverse_expect_shape(&st, path, name, o->vocab, o->dim);
    snprintf(name, sizeof name, "%shead.weight", pre);
    if (rc == 0) rc = reverse_expect_shape(&st, path, name, o->vocab, o->dim);
    if (rc == 0) {
        snprintf(name, sizeof name, "%sencoder.blocks.%d.ffn.dense1.weight", pre, o->layers - 1);
        rc = reverse_expect_shape(&st, path, name, o->ffn, o->dim);
    }
    if (rc == 0) {
        snprintf(name, sizeof name, "%sencoder.blocks.%d.attention.W_q.weight", pre, o->layers);
        if (tg_safetensors_find(&st, name) >= 0) {
            tg_set_error("%s: the file has more blocks than the metadata's layers %d", path, o->layers);
            rc = -1;
        }
    }
    snprintf(name, sizeof name, "%sencoder.pos_encoding.P", pre);
    if (rc == 0 && pe_kind(*pe) == TG_PE_LEARNED)
        rc = reverse_expect_shape(&st, path, name, REVERSE_MAX_LEN(o->seq_len), o->dim);
    tg_safetensors_close(&st);
    return rc;
}

/* --load's model: configuration from the file (reverse's model file, or a
 * run's train_state or best checkpoint), then its weights (strict: names
 * and shapes must match; on failure nothing is left allocated). */
static int reverse_load(const char *path, options *o, const cli_opt *opts, int nopt, model *m, const char **pe) {
    if (reverse_config_from_checkpoint(path, o, opts, nopt, pe) != 0) return -1;
    if (model_new(m, o, *pe, 0) != 0) {
        model_free(m);
        return -1;
    }
    tg_safetensors st;
    int rc = tg_safetensors_open(path, &st);
    if (rc == 0) {
        rc = tg_checkpoint_load_prefix(&st, path, &m->params, *reverse_prefix(&st) ? "model" : NULL);
        tg_safetensors_close(&st);
    }
    if (rc != 0) model_free(m);
    return rc;
}

#endif
