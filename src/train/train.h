/** @file
 * Training-loop tools for a language model on real text: a byte tokenizer,
 * token files and a sampler over them, the default corpus (Debian's
 * fortunes), learning-rate schedules, AdamW parameter groups, gradient
 * accumulation, a metrics log, and a checkpoint of the whole training state
 * from which a run resumes bit for bit.
 *
 * A training loop with all of it (model, loss and params from nn.h):
 *
 *   tg_token_data *d = tg_token_data_open("corpus.npy", 0.1, seed);
 *   tg_optim *opt = tg_optim_new_groups(&cfg, &params);        // AdamW, decay on matrices
 *   tg_lr_schedule s = tg_lr_warmup_cosine(6e-4, 6e-5, 100, 5000);
 *   tg_named_rng rngs[] = {{"data", tg_token_data_rng(d)}};
 *   int64_t step = 0;
 *   if (resume) tg_train_state_load("run.safetensors", &params, opt, &step, rngs, 1);
 *   for (; step < steps; step++) {
 *       tg_optim_set_lr(opt, (tg_real)tg_lr_at(&s, step));
 *       tg_optim_zero_grad(opt);
 *       for (int k = 0; k < accum; k++) {                        // gradient accumulation
 *           tg_token_data_batch(d, B, T, x, y);
 *           tg_scope_begin();
 *           tg_tensor *loss = tg_cross_entropy(model(x), y, NULL, -1);
 *           tg_backward(tg_mul_scalar(loss, (tg_real)1 / accum));
 *           tg_scope_end();
 *       }
 *       tg_clip_grad_norm(&params, 1);
 *       tg_optim_step(opt);
 *   }
 *   tg_train_state_save("run.safetensors", &params, opt, step, rngs, 1);
 */
#ifndef TG_TRAIN_TRAIN_H
#define TG_TRAIN_TRAIN_H

#include "../nn/nn.h"

/** byte tokenizer
 * The simplest tokenizer that covers any text: token = byte value, 256
 * symbols, so UTF-8 text round-trips exactly (a multi-byte character is
 * several tokens). */
#define TG_BYTE_VOCAB 256
/** ids[i] = text[i] for i < n. Returns 0, or -1 on NULL. */
int tg_bytes_encode(const unsigned char *text, size_t n, int *ids);
/** out[i] = ids[i]. Returns 0, or -1 with the error recorded when an id is
 * outside [0, 256) (out is then partly written). */
int tg_bytes_decode(const int *ids, size_t n, unsigned char *out);

/* ---- token files -----------------------------------------------------------
 * A token file is a NumPy .npy file holding one 1-D array of token ids:
 * dtype uint8 ('|u1', vocabularies up to 256, the byte tokenizer),
 * little-endian uint16 ('<u2', up to 65536, e.g. GPT-2's BPE) or uint32
 * ('<u4', up to TG_MAX_VOCAB ids, larger BPE vocabularies), C order.
 * numpy makes one with
 *     np.save("corpus.npy", np.frombuffer(open("corpus.txt", "rb").read(), np.uint8))
 * and reads one with np.load (the header is at most a few hundred bytes; the
 * data starts at a multiple of 64). */
/** The largest vocabulary a token file may hold: ids below 2^24 (a BPE
 * vocabulary's ids are at most that too, bpe.h). */
#define TG_MAX_VOCAB (1 << 24)
/** Writes ids[0..n) as uint8 when vocab <= 256, uint16 when vocab <= 65536,
 * else uint32 (vocab <= TG_MAX_VOCAB); every id must be in [0, vocab). Atomic. Returns 0, or -1 with
 * "tokens_save: <path>: <reason>". */
int tg_tokens_save(const char *path, const int *ids, int64_t n, int vocab);
/** Byte-tokenizes the file text_path into the uint8 token file tokens_path.
 * Returns 0, or -1 with the error recorded. */
int tg_tokens_from_text(const char *text_path, const char *tokens_path);

/** the default corpus: Debian's fortunes
 * The fortune files (package fortunes, and fortunes-min which it pulls in;
 * BSD licence) are English text, one fortune after another, each ended by
 * a line holding only "%". The corpus is every regular file of dir whose
 * name has no '.' (so not the .dat indexes nor the .u8 symlinks; no
 * subdirectory, so not the offensive ones of fortunes-off), in name order,
 * each fortune followed by one empty line in place of its "%" line:
 * plain paragraphs a reader and a byte-level model both take as text.
 * dir NULL means TG_FORTUNES_DIR. Returns the number of fortunes written
 * (> 0), or -1 with "fortunes_corpus: ..." recorded (also when dir holds
 * no fortune file). Atomic. */
#define TG_FORTUNES_DIR "/usr/share/games/fortunes"
int64_t tg_fortunes_corpus(const char *dir, const char *out_path);

/** token data: a memory-mapped token file and its sampler
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
    const unsigned char *map; /**< the whole file, mapped */
    size_t map_size;
    const unsigned char *tokens; /**< token k: the itemsize bytes at tokens + k * itemsize, little-endian */
    int itemsize;                /**< 1, 2 or 4 */
    int64_t n, n_train;          /**< tokens in the file; [0, n_train) train, [n_train, n) validation */
    int vocab;                   /**< largest token + 1 (scanned once at open) */
    tg_rng rng;                  /**< the sampler's generator: counter = training windows drawn so far */
} tg_token_data;
/** val_fraction in [0, 1). NULL with "token_data: <path>: <reason>" recorded
 * on any problem (an empty array is one). */
tg_token_data *tg_token_data_open(const char *path, double val_fraction, uint64_t seed);
/** Token k of the whole file (0 <= k < n), or -1. */
int tg_token_data_get(const tg_token_data *d, int64_t k);
/** B training windows of T tokens into x and y (each B*T ints, row-major
 * [B, T]). Returns 0, or -1 with the error recorded when B or T < 1 or the
 * training split has fewer than T + 1 tokens (nothing drawn then). */
int tg_token_data_batch(tg_token_data *d, int B, int T, int *x, int *y);
/** Data-parallel training (src/dist/): rank's shard of the global batch of
 * B windows, i.e. windows [rank * B / size, (rank + 1) * B / size) of what
 * tg_token_data_batch(d, B, ...) would draw, into x and y (each
 * B / size * T ints). Every rank draws the same B windows from the same
 * generator, so the shards are disjoint, together they are the
 * single-process batch, and the generator's state is the same on every
 * rank (a training state saved by one resumes on any number of ranks with
 * the same B). Returns 0, or -1 with the error recorded (also when size
 * does not divide B, or rank is not in [0, size)). */
int tg_token_data_batch_shard(tg_token_data *d, int B, int T, int rank, int size, int *x, int *y);
/** Number of full validation batches of B windows of T tokens (0 when there
 * is not one). */
int64_t tg_token_data_val_batches(const tg_token_data *d, int B, int T);
/** Validation batch i (0 <= i < tg_token_data_val_batches) into x and y.
 * Returns 0, or -1 with the error recorded. */
int tg_token_data_val_batch(const tg_token_data *d, int64_t i, int B, int T, int *x, int *y);
/** The sampler's generator, for tg_train_state_save/load (NULL for NULL d). */
tg_rng *tg_token_data_rng(tg_token_data *d);
void tg_token_data_close(tg_token_data *d); /**< unmaps; NULL is a no-op */

/** learning-rate schedules
 * Constant: lr at every step.
 * Warm-up then cosine (nanoGPT's get_lr in train.py, exactly), for step it:
 *   it <  warmup:        lr * (it + 1) / (warmup + 1)
 *   it >  decay_steps:   min_lr
 *   otherwise:           min_lr + 0.5 (1 + cos(pi r)) (lr - min_lr),
 *                        r = (it - warmup) / (decay_steps - warmup)
 * (at it == warmup == decay_steps, where nanoGPT divides by zero, lr). */
typedef enum { TG_LR_CONSTANT, TG_LR_WARMUP_COSINE } tg_lr_kind;
typedef struct {
    tg_lr_kind kind;
    double lr, min_lr;
    int64_t warmup_steps, decay_steps;
} tg_lr_schedule;
tg_lr_schedule tg_lr_constant(double lr);
tg_lr_schedule tg_lr_warmup_cosine(double lr, double min_lr, int64_t warmup_steps, int64_t decay_steps);
/** The learning rate at step (0, 1, ...). NaN with the error recorded for a
 * negative step or a bad schedule (a negative or NaN rate, warmup < 0,
 * decay_steps < warmup, an unknown kind). */
double tg_lr_at(const tg_lr_schedule *s, int64_t step);

/** optimizers
 * SGD:   v = momentum v + (g + wd w);  w -= lr v            (torch.optim.SGD)
 * Adam:  m = b1 m + (1-b1) g';  v = b2 v + (1-b2) g'^2,  g' = g + wd w;
 *        w -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
 * AdamW: as Adam with g' = g, and w -= lr wd w first (decoupled decay). */
typedef enum { TG_SGD, TG_ADAM, TG_ADAMW } tg_optim_kind;
typedef struct {
    tg_optim_kind kind;
    tg_real lr, momentum, weight_decay, beta1, beta2, eps;
} tg_optim_config;
typedef struct {
    tg_optim_config cfg;
    tg_params params;   /**< copy of the list (names and tensors) */
    tg_tensor **m, **v; /**< state per parameter (momentum / first moment, second moment) */
    tg_tensor *step;    /**< scalar: steps taken (a tensor so it checkpoints) */
    /** Per-parameter weight decay (train.h: groups), or NULL: cfg.weight_decay for all. */
    tg_real *weight_decay;
} tg_optim;
tg_optim_config tg_sgd_config(tg_real lr, tg_real momentum, tg_real weight_decay);
tg_optim_config tg_adam_config(tg_real lr);                        /**< betas (0.9, 0.999), eps 1e-8 */
tg_optim_config tg_adamw_config(tg_real lr, tg_real weight_decay); /**< torch default wd 0.01 */
tg_optim *tg_optim_new(const tg_optim_config *cfg, const tg_params *params);
void tg_optim_step(tg_optim *o); /**< parameters without a grad are skipped */
void tg_optim_zero_grad(tg_optim *o);
/** Appends the optimizer state ("<prefix>.m.<param>", "<prefix>.v.<param>",
 * "<prefix>.step") for checkpoints. */
int tg_optim_state(tg_optim *o, tg_params *p, const char *prefix); /**< 0, or -1 */
void tg_optim_free(tg_optim *o);
/** Scales all gradients so their global L2 norm is at most max_norm; returns
 * the norm before clipping (torch.nn.utils.clip_grad_norm_). max_norm inf
 * only measures; NaN or <= 0 is refused: -1, gradients untouched, the
 * error recorded. */
tg_real tg_clip_grad_norm(const tg_params *p, tg_real max_norm);

/** optimizer: parameter groups and the learning rate
 * tg_optim_new_groups is tg_optim_new with nanoGPT's two AdamW groups
 * (configure_optimizers): weight decay cfg->weight_decay on every parameter
 * of two or more dimensions (Linear and embedding weights), 0 on the rest
 * (biases, LayerNorm weights and biases). Any kind (SGD, Adam, AdamW) takes
 * per-parameter decay, applied as that kind applies its decay. */
tg_optim *tg_optim_new_groups(const tg_optim_config *cfg, const tg_params *params);
/** Sets the decay of parameter i (in list order). 0, or -1 with the error
 * recorded (index out of range, negative or NaN decay). */
int tg_optim_set_weight_decay(tg_optim *o, int i, tg_real wd);
/** The decay parameter i gets (0 for a bad index). */
tg_real tg_optim_weight_decay(const tg_optim *o, int i);
/** The learning rate of the next steps, e.g. tg_lr_at(&s, step) before each
 * step. 0, or -1 with the error recorded (NULL, negative or NaN). */
int tg_optim_set_lr(tg_optim *o, tg_real lr);

/* ---- gradient accumulation ---------------------------------------------------
 * Nothing to call: gradients add up (+=) in the parameters across backward
 * passes until tg_optim_zero_grad, as in PyTorch. For one step over k
 * micro-batches, zero the gradients, then for each micro-batch backward its
 * mean loss times 1/k (tg_mul_scalar(loss, 1.0 / k)), each in its own scope,
 * then step: the gradient is then the mean of the k micro-batches' mean
 * gradients (nanoGPT's way), the same (up to rounding) as one batch k times
 * as large when every micro-batch counts the same number of targets
 * (tests/test_train.c checks it). When ignored targets (-1, padding) make
 * the counts differ, that weighs a target of a short micro-batch more: for
 * exactly one big batch, backward each micro-batch's summed loss
 * (tg_cross_entropy_sum) and divide the gradients by the total count, as
 * tg_run_backward_sum does (run.h). Clip after the last micro-batch. */

/** metrics log: one JSON object per line
 *   {"step": 10, "lr": 0.0006, "loss": 2.5, "val_loss": null, "tokens_per_s": 51234.5, "grad_norm": 0.83}
 * A value that is NaN or infinite (e.g. val_loss on a step without an
 * evaluation) is written null, as JSON has no NaN; numbers are written in
 * the shortest form that reads back to the same double. Each line is
 * flushed when written, so a crashed run keeps every line it logged and
 * another process can follow the file (tail -f, pandas.read_json(lines=True)). */
typedef struct {
    int64_t step;
    double lr, loss, val_loss, tokens_per_s, grad_norm;
} tg_metrics;
typedef struct tg_metrics_log tg_metrics_log;
/** Opens path for writing: appended to when append (a resumed run), else
 * truncated. Refuses anything but a regular file, and a symlink. NULL with
 * "metrics_log: <path>: <reason>" recorded. */
tg_metrics_log *tg_metrics_log_open(const char *path, bool append);
/** Opens the log of a run resumed at step (after `step` steps): keeps its
 * lines of steps 1..step that read back whole and in order, cuts the file
 * after the last of them (ftruncate: nothing before is rewritten, so a kill
 * at any moment loses no earlier line), and opens it for appending. The
 * kept lines go to *lines (tg_sys_free them), their count to *n. step 0
 * starts a new, empty log, put in place atomically. A symlink at path is
 * refused, never followed. NULL with the error recorded. */
tg_metrics_log *tg_metrics_log_resume(const char *path, int64_t step, tg_metrics **lines, int64_t *n);
/** Writes one line and flushes it. 0, or -1 with the error recorded. */
int tg_metrics_log_write(tg_metrics_log *log, const tg_metrics *m);
/** Closes; 0, or -1 when a write failed late. NULL is a no-op (0). */
int tg_metrics_log_close(tg_metrics_log *log);
/** Reads a log (of a running or finished run) without changing it: every
 * line that reads back whole, in file order (a line being written, or
 * broken, is skipped), into *lines (tg_sys_free them), their count to *n.
 * 0, or -1 with the error recorded (the file cannot be read). */
int tg_metrics_log_read(const char *path, tg_metrics **lines, int64_t *n);

/** training state: checkpoint and bit-identical resume
 * One safetensors file holding everything a run needs to continue as if it
 * had never stopped:
 *   "model.<param>"                 the model's parameters
 *   "optim.<state>"                 tg_optim_state: "optim.m.<param>",
 *                                   "optim.v.<param>" (or "optim.momentum.<param>"),
 *                                   "optim.step"
 *   __metadata__ "tgrad_train_state"  "1" (the format version)
 *                "step"               the steps done, as a decimal string
 *                "rngs"               the generators' names, comma-separated
 *                "rng.<name>"         "<seed> <stream> <counter>" in decimal
 * The generators are the data sampler (tg_token_data_rng) and any other
 * stream the run draws from (dropout layers: tg_dropout_rng); 64-bit
 * values go in the metadata as text because a tensor of F32 or F64 could
 * not hold them exactly.
 * The optimizer steps once per step of the run, so "optim.step" equals
 * "step" (whatever the kind: Adam's bias correction 1 - beta^t reads it;
 * SGD keeps the count too).
 * Saving is atomic, and a file the load would refuse is never written: a
 * NaN or infinite value in any tensor (model or optimizer), an optimizer
 * step other than step, or a negative second moment is refused before any
 * file is made, so a run whose last step diverged keeps its previous good
 * state at path.
 * Loading is strict and all or nothing: the format version, the step
 * (0 to INT64_MAX), every generator (the same names, as given; seed,
 * stream and counter each a uint64), the tensors' names and shapes, every
 * value finite, "optim.step" a whole number equal to "step", and Adam's
 * and AdamW's second moments "optim.v.*" >= 0 are all checked before
 * anything is written, so a corrupt, crafted or mismatched file leaves
 * model, optimizer, step and generators as they were.
 * Names are 1-31 characters of [A-Za-z0-9_.-]. */
#define TG_TRAIN_MAX_RNGS TG_RNGS_MAX /**< tg_named_rng and tg_rngs: tensor/params.h */
/** 0, or -1 with "train_state_save: <path>: <reason>" recorded, e.g.
 * "train_state_save: out/x.safetensors: tensor 'model.h.0.attn.c_attn.weight'
 * holds nan at index 17; nothing written". step is the steps done, the
 * optimizer's count. */
int tg_train_state_save(const char *path, const tg_params *model, tg_optim *opt, int64_t step, const tg_named_rng *rngs,
                        int n_rngs);
/** tg_train_state_save with more metadata: extra_json is NULL or one JSON
 * object of string values, e.g. "{\"n_layer\": \"4\"}" (a program's run
 * configuration), added after the format's keys, which it may not use
 * ("tgrad_train_state", "step", "rngs", "rng.*"). tg_safetensors_meta reads
 * them back; tg_train_state_load ignores them. */
int tg_train_state_save_meta(const char *path, const tg_params *model, tg_optim *opt, int64_t step,
                             const tg_named_rng *rngs, int n_rngs, const char *extra_json);
/** 0, or -1 with "train_state_load: <path>: <reason>" recorded, naming the
 * key at fault, e.g. "train_state_load: run.safetensors: 'optim.step' is 0.5;
 * expected 120, the run's step" (nothing changed). */
int tg_train_state_load(const char *path, const tg_params *model, tg_optim *opt, int64_t *step,
                        const tg_named_rng *rngs, int n_rngs);

#endif
