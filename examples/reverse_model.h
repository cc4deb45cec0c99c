/* The reverse program's options and model. The model, its file and the
 * tasks are the library's (model_file.h: tg_encoder_model, tg_encoder_open,
 * tg_encoder_save, tg_seq_task_*: the checkpoint describes itself and is
 * checked against its tensors before anything is built); here are the
 * flags and the model they describe. */
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

enum { REVERSE_MAX_OPTS = 24 };

typedef tg_encoder_model model; /* the encoder + output layer */

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

/* The kind of a --pe name (NONE for an unknown one: main refused those). */
static tg_pe_kind pe_kind(const char *name) {
    tg_pe_kind k;
    return tg_pe_kind_parse(name, &k) == 0 ? k : TG_PE_NONE;
}

/* On failure the caller still frees m with tg_encoder_model_free. */
static int model_new(model *m, const options *o, const char *pe, uint64_t seed) {
    tg_rng rng = tg_rng_new(seed);
    tg_encoder_config cfg = {
        .vocab_size = o->vocab,
        .num_hiddens = o->dim,
        .ffn_hiddens = o->ffn,
        .num_heads = o->heads,
        .num_layers = o->layers,
        .max_len = o->seq_len > 1000 ? o->seq_len : 1000, /* d2l's 1000 positions, or T when longer */
        .dropout = (tg_real)o->dropout,
        .pe = pe_kind(pe),
        .use_bias = false,
        .embedding_std = (tg_real)o->emb_std,
        .learned_pe_std = (tg_real)o->pe_std,
    };
    if (tg_encoder_model_init(m, &cfg, o->seq_len, &rng) != 0) return -1;
    snprintf(m->task, sizeof m->task, "%s", o->task);
    return 0;
}

#endif
