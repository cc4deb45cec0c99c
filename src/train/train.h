/** @file
 * Training-loop tools for a language model on real text: a byte tokenizer,
 * token files and a sampler over them, the default corpus (Debian's
 * fortunes), learning-rate schedules, AdamW parameter groups, gradient
 * accumulation, a metrics log, and a checkpoint of the whole training state
 * from which a run resumes bit for bit.
 *
 * A training loop with all of it (model, loss and params from nn.h):
 *
 *     tg_token_data *d = tg_token_data_open("corpus.npy", 0.1, seed);
 *     tg_optim *opt = tg_optim_new_groups(&cfg, &params);        // AdamW, decay on matrices
 *     tg_lr_schedule s = tg_lr_warmup_cosine(6e-4, 6e-5, 100, 5000);
 *     tg_named_rng rngs[] = {{"data", tg_token_data_rng(d)}};
 *     int64_t step = 0;
 *     if (resume) tg_train_state_load("run.safetensors", &params, opt, &step, rngs, 1);
 *     for (; step < steps; step++) {
 *         tg_optim_set_lr(opt, (tg_real)tg_lr_at(&s, step));
 *         tg_optim_zero_grad(opt);
 *         for (int k = 0; k < accum; k++) {                        // gradient accumulation
 *             tg_token_data_batch(d, B, T, x, y);
 *             tg_scope_begin();
 *             tg_tensor *loss = tg_cross_entropy(model(x), y, NULL, -1);
 *             tg_backward(tg_mul_scalar(loss, (tg_real)1 / accum));
 *             tg_scope_end();
 *         }
 *         tg_clip_grad_norm(&params, 1);
 *         tg_optim_step(opt);
 *     }
 *     tg_train_state_save("run.safetensors", &params, opt, step, rngs, 1);
 *
 * Gradient accumulation: nothing to call. Gradients add up (+=) in the
 * parameters across backward passes until tg_optim_zero_grad, as in
 * PyTorch. For one step over k micro-batches, zero the gradients, then for
 * each micro-batch backward its mean loss times 1/k (tg_mul_scalar(loss,
 * 1.0 / k)), each in its own scope, then step: the gradient is then the
 * mean of the k micro-batches' mean gradients (nanoGPT's way), the same (up
 * to rounding) as one batch k times as large when every micro-batch counts
 * the same number of targets (tests/test_train.c checks it). When ignored
 * targets (-1, padding) make the counts differ, that weighs a target of a
 * short micro-batch more: for exactly one big batch, backward each
 * micro-batch's summed loss (tg_cross_entropy_sum) and divide the gradients
 * by the total count, as tg_run_backward_sum does (run.h). Clip after the
 * last micro-batch.
 *
 * All of it is for one calling thread at a time (tensor.h's rule); errors
 * follow tgrad's convention: NULL or -1, the message in tg_last_error().
 */
#ifndef TG_TRAIN_TRAIN_H
#define TG_TRAIN_TRAIN_H

#include "../nn/nn.h"

/* ---- byte tokenizer --------------------------------------------------------- */
/** The byte tokenizer's vocabulary size.
 * The simplest tokenizer that covers any text: token = byte value, 256
 * symbols, so UTF-8 text round-trips exactly (a multi-byte character is
 * several tokens). */
#define TG_BYTE_VOCAB 256
/** Byte-tokenizes text: ids[i] = text[i] for i < n (ids holds n ints).
 * Returns 0, or -1 with "bytes_encode: NULL text" (or ids) recorded when
 * one is NULL and n > 0. */
int tg_bytes_encode(const unsigned char *text, size_t n, int *ids);
/** Byte-decodes ids: out[i] = ids[i] (out holds n bytes). Returns 0, or -1
 * with the error recorded when an id is outside [0, 256) (out is then partly
 * written), or ids or out is NULL and n > 0. */
int tg_bytes_decode(const int *ids, size_t n, unsigned char *out);

/* ---- token files ------------------------------------------------------------ */
/** The largest vocabulary a token file may hold: ids below 2^24 (a BPE
 * vocabulary's ids are at most that too, bpe.h). */
#define TG_MAX_VOCAB (1 << 24)
/** Writes ids[0..n) as a token file at path: uint8 when vocab <= 256, uint16
 * when vocab <= 65536, else uint32 (vocab <= TG_MAX_VOCAB); every id must be
 * in [0, vocab). Atomic (a failure leaves path as it was). Returns 0, or -1
 * with "tokens_save: <path>: <reason>" recorded (n < 0, vocab outside
 * [1, TG_MAX_VOCAB], an id out of range, a write failure; "tokens_save: NULL
 * path" or ids).
 *
 * A token file is a NumPy .npy file holding one 1-D array of token ids:
 * dtype uint8 ('|u1', vocabularies up to 256, the byte tokenizer),
 * little-endian uint16 ('<u2', up to 65536, e.g. GPT-2's BPE) or uint32
 * ('<u4', up to TG_MAX_VOCAB ids, larger BPE vocabularies), C order.
 * numpy makes one with
 *
 *     np.save("corpus.npy", np.frombuffer(open("corpus.txt", "rb").read(), np.uint8))
 *
 * and reads one with np.load (the header is at most a few hundred bytes; the
 * data starts at a multiple of 64). */
int tg_tokens_save(const char *path, const int *ids, int64_t n, int vocab);
/** Byte-tokenizes the file text_path (read whole into memory) into the uint8
 * token file tokens_path, atomically. Returns 0, or -1 with
 * "tokens_from_text: <path>: <reason>" recorded (NULL path, text_path not a
 * readable regular file, a write failure). */
int tg_tokens_from_text(const char *text_path, const char *tokens_path);

/* ---- the default corpus: Debian's fortunes ----------------------------------- */
/** Where Debian installs the fortune files: tg_fortunes_corpus's dir when NULL. */
#define TG_FORTUNES_DIR "/usr/share/games/fortunes"
/** Writes the default corpus, Debian's fortunes, as one text file at out_path.
 * The fortune files (package fortunes, and fortunes-min which it pulls in;
 * BSD licence) are English text, one fortune after another, each ended by
 * a line holding only "%". The corpus is every regular file of dir whose
 * name has no '.' (so not the .dat indexes nor the .u8 symlinks; no
 * subdirectory, so not the offensive ones of fortunes-off), in name order,
 * each fortune followed by one empty line in place of its "%" line:
 * plain paragraphs a reader and a byte-level model both take as text
 * (blank lines before a fortune's first character are dropped; an entry
 * that cannot be read as a regular file, e.g. a directory, is skipped).
 * dir NULL means TG_FORTUNES_DIR. Returns the number of fortunes written
 * (> 0), or -1 with "fortunes_corpus: ..." recorded (NULL out_path, dir
 * cannot be listed, and also when dir holds no fortune file). Atomic. */
int64_t tg_fortunes_corpus(const char *dir, const char *out_path);

/* ---- token data ------------------------------------------------------------- */
/** A memory-mapped token file and its sampler (tg_token_data_open).
 * tg_token_data_open maps a token file read-only (nothing is copied, so a
 * corpus larger than memory works) and validates it as untrusted input:
 * a regular file, a strict .npy header, a 1-D uint8, uint16 or uint32 array
 * whose data fills the rest of the file exactly, every token below
 * TG_MAX_VOCAB. The first n_train tokens are for
 * training, the rest (the last val_fraction, rounded down) for validation,
 * as nanoGPT's prepare.py splits 90/10.
 *
 * Training windows: tg_token_data_batch draws B start positions s uniformly
 * in [0, n_train - T - 1] from d->rng, and writes x[b, t] = tok[s_b + t],
 * y[b, t] = tok[s_b + t + 1] (the next token). Window i of the run is drawn
 * from the counter-based generator at index i, so the data order is a pure
 * function of (seed, windows drawn so far) = (seed, step * B): saving d->rng
 * (tg_train_state_save) and restoring it resumes the exact order.
 * Validation windows are fixed: window j starts at n_train + j * T (back to
 * back, no overlap), and validation batch i holds windows iB .. iB + B - 1,
 * so every evaluation sees the same tokens. The file must not be truncated
 * while it is mapped (reading a page past the new end raises SIGBUS). */
typedef struct {
    const unsigned char *map;    /**< the whole file, mapped */
    size_t map_size;             /**< the file's size in bytes: the length mapped */
    const unsigned char *tokens; /**< token k: the itemsize bytes at tokens + k * itemsize, little-endian */
    int itemsize;                /**< 1, 2 or 4 */
    int64_t n,                   /**< tokens in the file (at least 1) */
        n_train;                 /**< [0, n_train) train, [n_train, n) validation */
    int vocab;                   /**< largest token + 1 (scanned once at open) */
    tg_rng rng;                  /**< the sampler's generator: counter = training windows drawn so far */
} tg_token_data;
/** Opens the token file at path (see tg_token_data: mapped, validated,
 * split) with its sampler's generator at (seed, stream 0, counter 0); every
 * token is read once, for the checks and vocab. val_fraction in [0, 1).
 * Returns a handle to close with tg_token_data_close. NULL with
 * "token_data: <path>: <reason>" recorded on any problem (an empty array is
 * one; also a dtype other than uint8, uint16 or uint32, data that does not
 * fill the file exactly, a token of TG_MAX_VOCAB or more). */
tg_token_data *tg_token_data_open(const char *path, double val_fraction, uint64_t seed);
/** Token k of the whole file (0 <= k < n), or -1 (NULL d or k out of
 * range; no error recorded). */
int tg_token_data_get(const tg_token_data *d, int64_t k);
/** B training windows of T tokens into x and y (each B*T ints, row-major
 * [B, T]), drawn as tg_token_data says; d->rng's counter advances by B.
 * Returns 0, or -1 with the error recorded when d, x or y is NULL, B or
 * T < 1 or the training split has fewer than T + 1 tokens (nothing drawn
 * then). */
int tg_token_data_batch(tg_token_data *d, int B, int T, int *x, int *y);
/** Data-parallel training (src/distributed/): rank's shard of the global batch of
 * B windows. That is windows [rank * B / size, (rank + 1) * B / size) of what
 * tg_token_data_batch(d, B, ...) would draw, into x and y (each
 * B / size * T ints). Every rank draws the same B windows from the same
 * generator, so the shards are disjoint, together they are the
 * single-process batch, and the generator's state is the same on every
 * rank (a training state saved by one resumes on any number of ranks with
 * the same B). Returns 0, or -1 with the error recorded (also when size
 * does not divide B, or rank is not in [0, size)). */
int tg_token_data_batch_shard(tg_token_data *d, int B, int T, int rank, int size, int *x, int *y);
/** Number of full validation batches of B windows of T tokens (0 when there
 * is not one, and for NULL d or B or T < 1). */
int64_t tg_token_data_val_batches(const tg_token_data *d, int B, int T);
/** Validation batch i (0 <= i < tg_token_data_val_batches) into x and y
 * (each B*T ints, row-major [B, T]); the generator is not used. Returns 0,
 * or -1 with the error recorded (NULL d, x or y, B or T < 1, i out of
 * range). */
int tg_token_data_val_batch(const tg_token_data *d, int64_t i, int B, int T, int *x, int *y);
/** The sampler's generator, for tg_train_state_save/load (NULL for NULL d):
 * a pointer into d, valid until tg_token_data_close. */
tg_rng *tg_token_data_rng(tg_token_data *d);
/** Unmaps the file and frees d; NULL is a no-op. */
void tg_token_data_close(tg_token_data *d);

/* ---- learning-rate schedules ------------------------------------------------ */
/** The kind of a learning-rate schedule (tg_lr_schedule). */
typedef enum {
    TG_LR_CONSTANT,     /**< lr at every step */
    TG_LR_WARMUP_COSINE /**< linear warm-up to lr, then cosine decay to min_lr (nanoGPT's get_lr) */
} tg_lr_kind;
/** A learning-rate schedule: made by tg_lr_constant or tg_lr_warmup_cosine,
 * read with tg_lr_at (which checks it).
 * Constant: lr at every step.
 * Warm-up then cosine (nanoGPT's get_lr in train.py, exactly), for step it:
 *
 *     it <  warmup:        lr * (it + 1) / (warmup + 1)
 *     it >  decay_steps:   min_lr
 *     otherwise:           min_lr + 0.5 (1 + cos(pi r)) (lr - min_lr),
 *                          r = (it - warmup) / (decay_steps - warmup)
 *
 * (at it == warmup == decay_steps, where nanoGPT divides by zero, lr). */
typedef struct {
    tg_lr_kind kind;      /**< which schedule */
    double lr,            /**< the peak rate (a constant schedule's rate); finite, >= 0 */
        min_lr;           /**< the rate after decay_steps; finite, >= 0 (constant: lr, unused) */
    int64_t warmup_steps, /**< steps of linear warm-up, >= 0 */
        decay_steps;      /**< the step at which the cosine reaches min_lr, >= warmup_steps */
} tg_lr_schedule;
/** A constant schedule: lr at every step (checked by tg_lr_at). */
tg_lr_schedule tg_lr_constant(double lr);
/** Warm-up then cosine decay (see tg_lr_schedule; checked by tg_lr_at). */
tg_lr_schedule tg_lr_warmup_cosine(double lr, double min_lr, int64_t warmup_steps, int64_t decay_steps);
/** The learning rate at step (0, 1, ...). NaN with the error recorded for a
 * NULL schedule, a negative step or a bad schedule (a negative, infinite or
 * NaN rate, or for warm-up cosine min_lr; warmup < 0, decay_steps < warmup,
 * an unknown kind): "lr_at: <reason>". */
double tg_lr_at(const tg_lr_schedule *s, int64_t step);

/* ---- optimizers -------------------------------------------------------------- */
/** An optimizer's update rule (PyTorch's), for a parameter w with gradient
 * g at step t = 1, 2, ... (wd: its weight decay):
 *
 *     SGD:   v = momentum v + (g + wd w);  w -= lr v            (torch.optim.SGD)
 *     Adam:  m = b1 m + (1-b1) g';  v = b2 v + (1-b2) g'^2,  g' = g + wd w;
 *            w -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
 *     AdamW: as Adam with g' = g, and w -= lr wd w first (decoupled decay).
 *
 * Each kind is one row of a table (tg_optim_rule, below): its name, its
 * state tensors and what a saved one may hold, its checks and its update.
 * An optimizer, the training state's checks (tg_train_state_save, _load)
 * and a program's --optim flag (tg_optim_find) all read the row, so a new
 * optimizer is its row, its kernel (tensor/kernels_optim.c) and its test. */
typedef struct tg_optim_rule tg_optim_rule;
/** The most state tensors per parameter a row may have. */
#define TG_OPTIM_STATE_MAX 4
/** An optimizer's settings: get one from tg_optim_config_of (any row),
 * tg_sgd_config, tg_adam_config or tg_adamw_config, change fields, pass it
 * to tg_optim_new (which checks and copies it). */
typedef struct {
    const tg_optim_rule *kind; /**< the row: TG_SGD, TG_ADAM, TG_ADAMW, tg_optim_find(name) */
    tg_real lr,                /**< the learning rate, >= 0 (tg_optim_set_lr changes it per step) */
        momentum,              /**< SGD's momentum, >= 0 (0: no momentum buffer); unused by Adam and AdamW */
        weight_decay,          /**< >= 0, applied as kind says; per parameter: tg_optim_set_weight_decay */
        beta1,                 /**< Adam's and AdamW's first-moment decay, in [0, 1) */
        beta2,                 /**< Adam's and AdamW's second-moment decay, in [0, 1) */
        eps;                   /**< Adam's and AdamW's term added to the denominator, >= 0 */
} tg_optim_config;
/** One state tensor per parameter of a row (Adam's "m" and "v"). */
typedef struct {
    const char *name; /**< its name in checkpoints: "optim.<name>.<param>" */
    /** NULL: any finite value; else why a negative value is refused, in
     * the training state's message ("a second moment is never negative"):
     * tg_train_state_save and _load refuse one. */
    const char *never_negative;
} tg_optim_state_rule;
/** An optimizer kind: one row. Every field is required (tg_optim_rule_check
 * says which is missing); a row lives as long as the program (static). */
struct tg_optim_rule {
    const char *name;  /**< "sgd", "adam", "adamw": flags, reports, tg_optim_find (1-31 of [a-z0-9_-]) */
    const char *about; /**< one line: the rule and where it comes from (--help, reports) */
    /** The settings tg_optim_config_of starts from (kind and lr are set there). */
    tg_optim_config defaults;
    int n_state;                                   /**< state tensors per parameter, 0..TG_OPTIM_STATE_MAX */
    tg_optim_state_rule state[TG_OPTIM_STATE_MAX]; /**< [n_state], in checkpoint order */
    /** How many of state[] these settings use, a prefix (SGD without
     * momentum: none); they are made as zeros by tg_optim_new. */
    int (*states_used)(const tg_optim_config *c);
    /** The row's own checks of c (tg_optim_new checks lr and weight_decay):
     * 0, or -1 with the reason written into why[cap]. */
    int (*check)(const tg_optim_config *c, char *why, size_t cap);
    /** Updates one parameter w (gradient g, decay wd) at step t = 1, 2, ...
     * with its state tensors state[0..states_used) (shaped as w); the per
     * element loop belongs in tensor/kernels_optim.c. */
    void (*update)(const tg_optim_config *c, tg_real wd, double t, tg_tensor *w, const tg_tensor *g,
                   tg_tensor *const *state);
    /** Optional (false: a call per whole parameter). true promises that
     * update reads and writes element k of w, g and the states only at k,
     * using only their data and size: a step may then call it on flat 1-D
     * views of any runs of a parameter's elements, and does, so that one
     * step is one split over all the parameters' elements (small ones are
     * not left on one thread). SGD, Adam and AdamW are. */
    bool elementwise;
};
/** The built-in rows, the table's first (through the macros below or tg_optim_rule_at). */
extern const tg_optim_rule tg_optim_builtin[];
#define TG_SGD   (&tg_optim_builtin[0]) /**< torch.optim.SGD without dampening or Nesterov; decay added to the gradient */
#define TG_ADAM  (&tg_optim_builtin[1]) /**< torch.optim.Adam; decay added to the gradient (an L2 term) */
#define TG_ADAMW (&tg_optim_builtin[2]) /**< torch.optim.AdamW; decoupled decay (Loshchilov & Hutter) */
/** 0 when row has every field a row needs, or -1 with "optim_rule: <name>:
 * <what is missing>" recorded (NULL row, name, about or function, a state
 * count outside [0, TG_OPTIM_STATE_MAX], a state without a name). */
int tg_optim_rule_check(const tg_optim_rule *row);
/** Adds row to the table that tg_optim_find and tg_optim_rule_at read
 * (after the built-in rows; at most 16 rows in all). Call it before threads
 * read the table (it takes no lock). 0, or -1 with the error recorded: the
 * row fails tg_optim_rule_check, its name is taken, or the table is full. */
int tg_optim_register(const tg_optim_rule *row);
/** The row named name (case-sensitive): a program's --optim flag. NULL with
 * "optimizer 'x': expected sgd, adam or adamw" (every row's name) recorded. */
const tg_optim_rule *tg_optim_find(const char *name);
/** Row i of the table (0: sgd, 1: adam, 2: adamw, then registered rows),
 * NULL past the last: for walking it. */
const tg_optim_rule *tg_optim_rule_at(int i);
/** kind's defaults with learning rate lr (NULL kind: a config of kind NULL,
 * which tg_optim_new refuses). */
tg_optim_config tg_optim_config_of(const tg_optim_rule *kind, tg_real lr);
/** An optimizer: made by tg_optim_new or tg_optim_new_groups, freed by
 * tg_optim_free. It updates the caller's parameter tensors (not owned) and
 * owns its state, persistent tensors made at creation, so a step makes no
 * allocation. Opaque: read it through the functions below. */
typedef struct tg_optim tg_optim;
/** SGD settings: lr, momentum, weight_decay (added to the gradient). */
tg_optim_config tg_sgd_config(tg_real lr, tg_real momentum, tg_real weight_decay);
/** Adam settings: lr, betas (0.9, 0.999), eps 1e-8, no weight decay. */
tg_optim_config tg_adam_config(tg_real lr);
/** AdamW settings: lr and weight_decay (torch's default is 0.01), betas
 * (0.9, 0.999), eps 1e-8. */
tg_optim_config tg_adamw_config(tg_real lr, tg_real weight_decay);
/** An optimizer over params, with cfg's settings for every parameter: the
 * list is copied, the tensors stay the caller's and must outlive the
 * optimizer. Its state is persistent zeros (even inside a scope) and its
 * step count 0. Free it with tg_optim_free. NULL with the error recorded:
 * "optim: <reason>" for a NULL cfg or params, a NULL tensor in params, no
 * kind, a negative or NaN lr or weight_decay, what the row's check refuses
 * (SGD: a negative momentum; Adam, AdamW: betas outside [0, 1) or a
 * negative eps), out of memory; "optim_rule: ..." for an incomplete row; or
 * the list's own error (duplicate names). */
tg_optim *tg_optim_new(const tg_optim_config *cfg, const tg_params *params);
/** One step: the step count rises by 1, then every parameter with a grad is
 * updated by the kind's rule at cfg.lr (parameters without a grad are
 * skipped, as torch does). NULL is a no-op. The gradients are not checked
 * (each must have its parameter's shape). The count is a tg_real: exact up
 * to 2^24 steps in the float build. */
void tg_optim_step(tg_optim *o);
/** Sets every parameter's gradient to zero (a parameter without one keeps
 * none): gradients add up across backward passes until this call. NULL is a
 * no-op. */
void tg_optim_zero_grad(tg_optim *o);
/** Appends the optimizer state to p, for checkpoints: for each state the
 * row's settings use, in the row's order, "<prefix>.<state>.<param>" for
 * every parameter ("<prefix>.m.<param>" and "<prefix>.v.<param>" for Adam
 * and AdamW, "<prefix>.momentum.<param>" for SGD with momentum; SGD without
 * has none), then "<prefix>.step". The entries
 * are the optimizer's own tensors, so loading into them restores the state.
 * 0, or -1 with the error recorded ("optim_state: NULL optimizer", or
 * tg_params_add's: NULL p, a name too long, a duplicate); entries appended
 * before a failure stay in p. */
int tg_optim_state(tg_optim *o, tg_params *p, const char *prefix);
/** Frees the optimizer and its state (not the parameters); NULL is a no-op. */
void tg_optim_free(tg_optim *o);
/** Scales all gradients so their global L2 norm is at most max_norm; returns
 * the norm before clipping (torch.nn.utils.clip_grad_norm_). max_norm inf
 * only measures; NaN or <= 0 is refused: -1, gradients untouched, the
 * error recorded. The norm is of all gradients of p as one vector, summed
 * in double in list order (parameters without a grad count nothing); when
 * max_norm / (norm + 1e-6) is below 1 every gradient is multiplied by it.
 * NULL p returns 0 (no error recorded). */
tg_real tg_clip_grad_norm(const tg_params *p, tg_real max_norm);

/* ---- optimizer: parameter groups and the learning rate ----------------------- */
/** tg_optim_new with nanoGPT's two parameter groups.
 * tg_optim_new_groups is tg_optim_new with nanoGPT's two AdamW groups
 * (configure_optimizers): weight decay cfg->weight_decay on every parameter
 * of two or more dimensions (Linear and embedding weights), 0 on the rest
 * (biases, LayerNorm weights and biases). Any kind (SGD, Adam, AdamW) takes
 * per-parameter decay, applied as that kind applies its decay. Change a
 * parameter's decay with tg_optim_set_weight_decay. NULL with the error
 * recorded, as tg_optim_new. */
tg_optim *tg_optim_new_groups(const tg_optim_config *cfg, const tg_params *params);
/** Sets the decay of parameter i (in list order). 0, or -1 with
 * "optim_set_weight_decay: <reason>" recorded (NULL o, index out of range,
 * negative or NaN decay, out of memory). */
int tg_optim_set_weight_decay(tg_optim *o, int i, tg_real wd);
/** The decay parameter i gets (0 for a bad index or NULL o; no error recorded). */
tg_real tg_optim_weight_decay(const tg_optim *o, int i);
/** Sets the learning rate of the next steps (cfg.lr). Call it before each
 * step with tg_lr_at(&s, step). 0, or -1 with "optim_set_lr: <reason>"
 * recorded (NULL o, a negative or NaN rate). */
int tg_optim_set_lr(tg_optim *o, tg_real lr);
/** The learning rate of the next step (0 for NULL). */
tg_real tg_optim_lr(const tg_optim *o);
/** The optimizer's row (NULL for NULL). */
const tg_optim_rule *tg_optim_kind(const tg_optim *o);
/** A tensor of the state, the optimizer's own (writing into it changes the
 * state): state "step" (i ignored) is the scalar step count; a row's state
 * name ("m", "v", "momentum") with parameter index i is that parameter's
 * tensor. NULL for a NULL o, a state these settings do not use, or i out of
 * range (no error recorded). */
tg_tensor *tg_optim_state_tensor(const tg_optim *o, const char *state, int i);

/* ---- gradient accumulation: nothing to call (see the file comment) ---------- */

/* ---- metrics log ------------------------------------------------------------- */
/** One line of the metrics log. The log holds one JSON object per line:
 *
 *     {"step": 10, "lr": 0.0006, "loss": 2.5, "val_loss": null, "tokens_per_s": 51234.5, "grad_norm": 0.83}
 *
 * A value that is NaN or infinite (e.g. val_loss on a step without an
 * evaluation) is written null, as JSON has no NaN; numbers are written in
 * the shortest form that reads back to the same double. Each line is
 * flushed when written, so a crashed run keeps every line it logged and
 * another process can follow the file (tail -f, pandas.read_json(lines=True)). */
typedef struct {
    int64_t step;     /**< the step (a line read back has step >= 1) */
    double lr,        /**< the learning rate of the step */
        loss,         /**< the training loss */
        val_loss,     /**< the validation loss; NaN (null) on a step without an evaluation */
        tokens_per_s, /**< training throughput, tokens per second */
        grad_norm;    /**< the gradients' global L2 norm before clipping */
} tg_metrics;
/** An open metrics log (opaque): made by tg_metrics_log_open or
 * tg_metrics_log_resume, closed and freed by tg_metrics_log_close. A value
 * missing or null in a line read back is NaN. */
typedef struct tg_metrics_log tg_metrics_log;
/** Opens path for writing (created when missing): appended to when append
 * (a resumed run), else truncated. Refuses anything but a regular file, and
 * a symlink. NULL with "metrics_log: <path>: <reason>" recorded. */
tg_metrics_log *tg_metrics_log_open(const char *path, bool append);
/** Opens the log of a run resumed at step (after `step` steps): keeps its
 * lines of steps 1..step that read back whole and in order, cuts the file
 * after the last of them (ftruncate: nothing before is rewritten, so a kill
 * at any moment loses no earlier line), and opens it for appending. The
 * kept lines go to *lines (tg_sys_free them), their count to *n. The cut is
 * at the first line that is torn, malformed, not after the line before it,
 * or past step. step 0 starts a new, empty log, put in place atomically
 * (*lines NULL, *n 0); so does a log missing at path. A symlink at path is
 * refused, never followed. NULL with the error recorded
 * ("metrics_log: <path>: <reason>"; "metrics_log_resume: ..." for a NULL
 * argument or a negative step). */
tg_metrics_log *tg_metrics_log_resume(const char *path, int64_t step, tg_metrics **lines, int64_t *n);
/** Writes one line (m's fields) and flushes it. 0, or -1 with
 * "metrics_log_write: <reason>" recorded (NULL log or m, a failed write;
 * tg_metrics_log_close then fails too). */
int tg_metrics_log_write(tg_metrics_log *log, const tg_metrics *m);
/** Closes and frees the log; 0, or -1 with "metrics_log_close: a write
 * failed" recorded when a write failed (late, or earlier). NULL is a no-op
 * (0). */
int tg_metrics_log_close(tg_metrics_log *log);
/** Reads a log (of a running or finished run) without changing it: every
 * line that reads back whole, in file order (a line being written, or
 * broken, is skipped), into *lines (tg_sys_free them), their count to *n.
 * 0, or -1 with the error recorded (a NULL argument, the file cannot be
 * read: "metrics_log_read: <path>: <reason>"). */
int tg_metrics_log_read(const char *path, tg_metrics **lines, int64_t *n);

/* ---- training state: checkpoint and bit-identical resume --------------------- */
/** The most generators a training state holds: TG_RNGS_MAX, 64 (tg_named_rng
 * and tg_rngs: tensor/params.h). */
#define TG_TRAIN_MAX_RNGS TG_RNGS_MAX
/** Saves the training state at path: model, optimizer, step and generators.
 * One safetensors file holding everything a run needs to continue as if it
 * had never stopped:
 *
 *     "model.<param>"                 the model's parameters
 *     "optim.<state>"                 tg_optim_state: "optim.m.<param>",
 *                                     "optim.v.<param>" (or "optim.momentum.<param>"),
 *                                     "optim.step"
 *     __metadata__ "tgrad_train_state"  "1" (the format version)
 *                  "step"               the steps done, as a decimal string
 *                  "optim"              the optimizer's row ("adamw"); a file
 *                                       without it (older) loads by its tensors
 *                  "rngs"               the generators' names, comma-separated
 *                  "rng.<name>"         "<seed> <stream> <counter>" in decimal
 *
 * The generators are the data sampler (tg_token_data_rng) and any other
 * stream the run draws from (dropout layers: tg_dropout_layer_rng); 64-bit
 * values go in the metadata as text because a tensor of F32 or F64 could
 * not hold them exactly.
 * The optimizer steps once per step of the run, so "optim.step" equals
 * "step" (whatever the kind: Adam's bias correction 1 - beta^t reads it;
 * SGD keeps the count too).
 * Saving is atomic, and a file the load would refuse is never written: a
 * NaN or infinite value in any tensor (model or optimizer), an optimizer
 * step other than step, or a negative value in a state its row says is
 * never negative (Adam's second moment) is refused before any
 * file is made, so a run whose last step diverged keeps its previous good
 * state at path.
 * Loading is strict and all or nothing: the format version, the step
 * (0 to INT64_MAX), every generator (the same names, as given; seed,
 * stream and counter each a uint64), the tensors' names and shapes, every
 * value finite, "optim.step" a whole number equal to "step", "optim" the
 * given optimizer's name, and the states the row says are never negative
 * (Adam's and AdamW's "optim.v.*") >= 0 are all checked before
 * anything is written, so a corrupt, crafted or mismatched file leaves
 * model, optimizer, step and generators as they were.
 * Generator names are 1-31 characters of [A-Za-z0-9_.-], each given once;
 * n_rngs is 0 to TG_TRAIN_MAX_RNGS (rngs may be NULL when it is 0).
 *
 * Returns 0, or -1 with "train_state_save: <path>: <reason>" recorded, e.g.
 * "train_state_save: out/x.safetensors: tensor 'model.h.0.attn.c_attn.weight'
 * holds nan at index 17; nothing written" (also for a NULL path, model or
 * opt, a bad generator list, a negative step). step is the steps done, the
 * optimizer's count. */
int tg_train_state_save(const char *path, const tg_params *model, tg_optim *opt, int64_t step, const tg_named_rng *rngs,
                        int n_rngs);
/** tg_train_state_save with more metadata. extra_json is NULL or one JSON
 * object of string values, e.g. "{\"n_layer\": \"4\"}" (a program's run
 * configuration), added after the format's keys, which it may not use
 * ("tgrad_train_state", "step", "rngs", "rng.*"; the quoted names are
 * refused anywhere in extra_json). tg_safetensors_meta reads them back;
 * tg_train_state_load ignores them. Returns 0, or -1 as
 * tg_train_state_save (also "extra metadata must be one JSON object"). */
int tg_train_state_save_meta(const char *path, const tg_params *model, tg_optim *opt, int64_t step,
                             const tg_named_rng *rngs, int n_rngs, const char *extra_json);
/** Loads a training state saved by tg_train_state_save into model, opt,
 * *step and the generators rngs point to (the same names, in the same
 * order, as saved), all or nothing (see tg_train_state_save for the checks).
 * Returns 0, or -1 with "train_state_load: <path>: <reason>" recorded,
 * naming the key at fault, e.g. "train_state_load: run.safetensors:
 * 'optim.step' is 0.5; expected 120, the run's step" (nothing changed; also
 * for NULL arguments or a bad generator list, as the save). */
int tg_train_state_load(const char *path, const tg_params *model, tg_optim *opt, int64_t *step,
                        const tg_named_rng *rngs, int n_rngs);

#endif
