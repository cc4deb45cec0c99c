/** @file
 * A training run: the loop's bookkeeping, once, in the library.
 *
 * A run is a folder. Everything it writes goes there, atomically (a
 * temporary beside the target, then rename; no output name is followed
 * through a symlink):
 *
 *     DIR/train_state.safetensors  the checkpoint: model, optimizer, step,
 *                                  every random generator and the program's
 *                                  settings, in ONE file, so model and state
 *                                  can never be out of step (train.h's format)
 *     DIR/best.safetensors         the same at the best validation loss so far
 *     DIR/metrics.jsonl            one JSON object per step, appended
 *     DIR/lock                     flock'ed by the process writing the run
 *                                  (its pid inside): one writer at a time
 *
 * A checkpoint is written at every evaluation (or every save_every steps),
 * on SIGINT and SIGTERM (then the run stops cleanly), and at the end. A run
 * killed at any moment loses at most the steps since its last checkpoint,
 * and resuming it ends with the same bits as a run never interrupted: the
 * checkpoint holds the data sampler's and every dropout layer's generator,
 * and the metrics log is cut back to the checkpoint's step (truncated past
 * its last good line, never rewritten). Nothing non-finite is ever saved: a
 * step whose loss or weights are not finite stops the run with the last
 * good checkpoint in place.
 *
 * The loop (nanoGPT's train.py, with the bookkeeping inside tg_run_*):
 *
 *     tg_run_config rc = tg_run_defaults("out/my_run", 5000);
 *     rc.schedule = tg_lr_warmup_cosine(6e-4, 6e-5, 100, 5000);
 *     rc.eval_every = 250, rc.patience = 4, rc.resume = resume;
 *     tg_run *run = tg_run_open(&rc, &params, opt, &rngs);
 *     while (tg_run_next(run)) {                 // learning rate set, gradients zeroed
 *         for (int k = 0; k < rc.accum; k++) {   // micro-batches
 *             tg_token_data_batch(d, B, T, x, y);
 *             tg_scope_begin();
 *             tg_run_backward(run, tg_cross_entropy(model(x), y, NULL, -1));
 *             tg_scope_end();
 *         }
 *         tg_run_step(run);                      // clip, optimizer step, log, progress
 *         if (tg_run_eval_due(run)) tg_run_eval(run, validation_loss());
 *     }
 *     return tg_run_close(run);                  // last checkpoint; the exit status
 *
 * Under data parallelism (src/distributed/, tg_dist_init before tg_run_open) the
 * run starts every rank from rank 0's weights, averages the gradients
 * (bucketed, overlapped with the last micro-batch's backward) and the
 * losses, and only rank 0 writes files and prints; every rank stops at the
 * same step (a signal on any rank stops all). */
#ifndef TG_TRAIN_RUN_H
#define TG_TRAIN_RUN_H

#include "train.h"
#include "../nn/decoder.h"

/** A run setting's type: what tg_setting.value points to. */
typedef enum {
    TG_SETTING_INT,    /**< int */
    TG_SETTING_REAL,   /**< double */
    TG_SETTING_STRING, /**< const char * (NULL: none, recorded as "") */
    TG_SETTING_BOOL    /**< bool */
} tg_setting_type;

/** One of a run's settings (a program's flag, the model's shape, the
 * tokenizer, the precision): the run records it with each checkpoint
 * (metadata key: name or key, value: its text: "%d", "%.17g", the string, "true"
 * or "false"), and a resumed run reads it back by its type (strictly, in
 * its range), fills it when the user left it out, applies a changed one
 * that may change with a line saying so, and refuses one that may not,
 * naming both values (tg_run_settings_resume). */
typedef struct {
    const char *name;     /**< the metadata key, e.g. a flag's name without "--" */
    tg_setting_type type; /**< what value points to */
    void *value;          /**< the program's variable: filled on resume when not given */
    bool changeable;      /**< may differ on resume (a larger steps, another lr); else fixed (the model's shape) */
    bool given;           /**< the user set it (a flag given); else a resume takes the run's value */
    double min;           /**< INT and REAL: the least value a checkpoint may hold (min == max: any finite one) */
    double max;           /**< INT and REAL: the largest value a checkpoint may hold */
    const char *key;      /**< the metadata key when it is not name (a model's own key is taken), or NULL */
} tg_setting;

/** Reads a run's settings back before the program builds anything: the
 * checkpoint of the run folder dir (or dir itself, a training state). A
 * setting the checkpoint lacks (written before it) keeps its value; one
 * not given takes the run's value (strings live until the process ends);
 * a given one that differs is applied when changeable, and said on stdout
 * ("resume: --lr 0.001 (the run had 0.002)"), and refused when fixed. 0;
 * 1 when a given setting contradicts a fixed one (a usage error:
 * "--dim 32: the run in DIR has 16, which cannot change on resume ...");
 * -1 when the checkpoint cannot be read or holds a value out of its
 * setting's type or range (the error recorded, naming file and key). */
int tg_run_settings_resume(const char *dir, tg_setting *settings, int n);
/** A setting's value as the metadata's text into buf (cut at cap). */
void tg_setting_text(const tg_setting *s, char *buf, size_t cap);

/** What a run does: get one from tg_run_defaults, change fields, pass it to
 * tg_run_open (which copies it, and copies dir and settings). */
typedef struct {
    const char *dir;            /**< the run's folder (created with its parents) */
    int64_t steps;              /**< the run ends after this step */
    int accum;                  /**< micro-batches per step: tg_run_backward calls between two tg_run_step */
    tg_lr_schedule schedule;    /**< learning rate per step (tg_lr_at); tg_run_defaults: the optimizer's own */
    double clip;                /**< clip the gradient's global norm to this; 0: measure it only */
    int eval_every;             /**< steps between evaluations (tg_run_eval_due); the last step always has one */
    int save_every;             /**< steps between checkpoints; 0: at every evaluation */
    int patience;               /**< stop after this many evaluations without a better validation loss; 0: never */
    int64_t stop_after;         /**< stop after this step (saved), as if interrupted; 0: run to steps */
    double max_loss;            /**< a training loss above this is divergence (a NaN or inf always is); 0: none */
    double tokens_per_step;     /**< for tokens/s (all ranks, all micro-batches); 0: not shown */
    double flops_per_step;      /**< for the share of the FMA peak (all ranks); 0: not shown */
    const tg_setting *settings; /**< the run's settings (tg_setting), saved with each checkpoint; a resume checks
                                     them against the run's again (a late one, e.g. the data's size) */
    int n_settings;             /**< how many settings */
    const char *meta;           /**< NULL, or a model's own metadata saved beside them (a JSON object of string
                                  values: its config, its tokenizer), as a model file's writer makes it */
    bool resume;                /**< continue from DIR/train_state.safetensors (its step, optimizer, generators) */
    bool overwrite;             /**< a new run may replace the run already in DIR (else refused) */
    const char *init_from;      /**< NULL, or the checkpoint the program loaded the weights from: must not be in DIR */
    bool quiet;                 /**< no progress on stderr */
} tg_run_config;

/** Defaults for a run of steps steps in dir: accum 1, the optimizer's
 * learning rate at every step, no clipping, an evaluation every 100 steps
 * and a checkpoint at each, no patience, no stop_after or max_loss, no
 * settings, a new run (not resume), progress on stderr. */
tg_run_config tg_run_defaults(const char *dir, int64_t steps);

/** A training run in progress (opaque): made by tg_run_open, ended and
 * freed by tg_run_close. For one thread. */
typedef struct tg_run tg_run;

/** Claims the folder for this process before anything is written into it:
 * creates DIR and locks it (DIR/lock, flock'ed, holding the pid) until
 * tg_run_close of its run or the process's end, so that a second writer (a
 * new run or a resume) is refused naming the pid. A new run (not resume)
 * is refused when DIR holds a run (its checkpoint or best) unless
 * cfg->overwrite, naming the three ways on (--resume, --init-from,
 * --overwrite); cfg->init_from inside DIR is refused. tg_run_open calls it
 * too (a folder claimed already stays claimed); a program calls it first
 * when it writes files into the run before tg_run_open (a token file).
 * Under data parallelism only rank 0 claims. 0, or -1 with the error
 * recorded. */
int tg_run_claim(const tg_run_config *cfg);

/** Opens the run: claims DIR (tg_run_claim), and with cfg->resume loads the
 * checkpoint into params, opt and rngs (all or nothing) and cuts the
 * metrics log back to its step; otherwise starts a new log (with
 * cfg->overwrite a run already in DIR is replaced, and said so). params, opt and rngs stay the caller's and must
 * outlive the run. Catches SIGINT and SIGTERM until tg_run_close (a second
 * one takes the default action). Under data parallelism it also broadcasts
 * rank 0's weights. NULL with the error recorded ("run: <dir>: ...", e.g.
 * a bad config field, or resuming a run already at steps). */
tg_run *tg_run_open(const tg_run_config *cfg, const tg_params *params, tg_optim *opt, const tg_rngs *rngs);
/** Starts the next step: false when the run is over (all steps done, early
 * stop, --stop-after, a signal, or a failure: tg_run_close tells which;
 * after an early stop params hold the best model: tg_run_stopped_early);
 * else sets the step's learning rate and zeroes the gradients. */
bool tg_run_next(tg_run *run);
/** One micro-batch: backward of loss / accum (the gradients add up), its
 * value kept for the step's loss: the mean of the micro-batches' mean
 * losses (nanoGPT's accumulation; tg_run_backward_sum below is exact when
 * micro-batches count different numbers of targets). Under data parallelism the last
 * micro-batch's backward starts the gradient all-reduce. NULL loss (an op
 * failed) fails the run, as does mixing it with tg_run_backward_sum in one
 * step. 0, or -1 (the run has failed; the error is recorded). */
int tg_run_backward(tg_run *run, tg_tensor *loss);
/** The exact form: loss_sum is a micro-batch's loss summed over its counted
 * targets (tg_cross_entropy_sum), counted their number. At tg_run_step the
 * gradient and the step's loss are divided by the counted targets of all
 * micro-batches (and ranks): the same as one batch holding them all, also
 * when ignored targets (padding, -1) are spread unevenly. tg_run_backward's
 * mean of the micro-batches' means (nanoGPT's) weighs each micro-batch
 * alike, which differs from that when their counts differ. One step uses
 * one form. 0, or -1 (the run has failed). */
int tg_run_backward_sum(tg_run *run, tg_tensor *loss_sum, int64_t counted);
/** Ends the step: averages gradients and loss over the ranks, stops the run
 * on a non-finite (or above max_loss) loss, clips, takes the optimizer
 * step, logs the step and shows progress; writes a checkpoint when
 * save_every says so and no evaluation is due. 0, or -1 (the run has failed,
 * e.g. fewer or more than accum micro-batches). */
int tg_run_step(tg_run *run);
/** True after tg_run_step when this step has an evaluation: every
 * eval_every steps, the last step and the step the run stops at. */
bool tg_run_eval_due(const tg_run *run);
/** Records the validation loss of this step: a permanent progress line, the
 * metrics line, a checkpoint when one is due, best.safetensors when it is
 * the best so far, patience (an early stop loads the best model back into
 * params and calls the on_save function with it), and a warning when
 * validation loss stays above its best (by 1%) for 3 evaluations while
 * training loss falls. A NaN val_loss fails the run, saying so. 0, or -1
 * (the run has failed). */
int tg_run_eval(tg_run *run, double val_loss);
/** Writes the last checkpoint (when steps were taken since the last one and
 * the run did not fail), closes the log and frees the run (params, opt and
 * rngs stay) and restores the signal handlers. Returns the process exit
 * status: 0 when the run finished, stopped early (patience), at stop_after
 * or because the caller left the loop; 1 when it failed (the error is
 * printed on stderr), also when run is NULL or the log cannot be closed;
 * 128 + the signal when a signal stopped it. */
int tg_run_close(tg_run *run);

/* ---- what the program shows and draws ---------------------------------------- */
/** The optimizer steps taken so far, over all sessions (0 for NULL). */
int64_t tg_run_steps_done(const tg_run *run);
/** The training loss of every step so far (index step - 1; NaN for a step
 * whose log line was lost) and the evaluations (step, loss): pointers into
 * the run, valid until the next call on it; run must not be NULL. */
void tg_run_history(const tg_run *run, const float **train, int64_t *n_train, const float **val_step,
                    const float **val_loss, int *n_val);
/** The best validation loss so far (also from before a resume), its step in
 * *step (step may be NULL); NaN (and step 0) before any evaluation. */
double tg_run_best_val(const tg_run *run, int64_t *step);
/** True when patience stopped the run: its params then hold the best
 * model's weights (best.safetensors), the one the program reports. */
bool tg_run_stopped_early(const tg_run *run);
bool tg_run_is_lead(const tg_run *run);    /**< true when this process writes the files (rank 0) */
const char *tg_run_dir(const tg_run *run); /**< the run's folder (the run's copy of the config's dir; NULL for NULL) */
/** Creates dir and its missing parents (mkdir -p). 0, or -1 with the error
 * recorded. */
int tg_run_mkdir(const char *dir);
/** DIR/name, malloc'd (free it): paths of any length the system accepts.
 * NULL when out of memory (no error recorded). */
char *tg_run_path(const char *dir, const char *name);
/** The lines of the run folder dir's metrics log (dir/metrics.jsonl), as
 * tg_metrics_log_read gives them: *lines malloc'd (free it with
 * tg_sys_free), *n of them. 0, or -1 with the error recorded (also "out of
 * memory" when the path cannot be made). */
int tg_run_metrics_read(const char *dir, tg_metrics **lines, int64_t *n);
/** Registers a function called on rank 0 after each checkpoint (also the
 * last), to write the program's own files (figures, a model export) into
 * the run: it returns 0, or -1 to fail the run. fn is called with (ctx, the
 * step); fn NULL removes it. */
void tg_run_on_save(tg_run *run, int (*fn)(void *ctx, int64_t step), void *ctx);

/** Draws the run's training loss per step and its validation losses into
 * png_path (tg_viz_lineplot), titled title, the y axis named ylabel. 0, or
 * -1 with viz's error recorded ("run: figure: ..."). */
int tg_run_draw_losses(const tg_run *run, const char *png_path, const char *title, const char *ylabel);

/** The run folder that a resume names: path itself (a folder), or the
 * folder of a path ending in train_state.safetensors; malloc'd (free it).
 * NULL with the error recorded when path is another file ("... to start
 * from it, use --init-from"), or out of memory. */
char *tg_run_resume_folder(const char *path);

/* ---- a decoder on a token file (src/nn/decoder.h, tg_token_data) ---------- */
/** One step of decoder m on d: accum micro-batches of B windows of T
 * tokens (under data parallelism this rank's B / size of the B every rank
 * draws), each backward through the run (the exact sums,
 * tg_run_backward_sum, when accum > 1), then tg_run_step. x and y hold
 * B * T ints (scratch). 0, or -1 (the run has failed). */
int tg_run_decoder_step(tg_run *run, tg_decoder *m, tg_token_data *d, int B, int T, int accum, int *x, int *y);
/** The mean loss of m over the first n_batches fixed validation batches
 * of d (B windows of T), in eval mode without a graph (training mode
 * after); under data parallelism each rank takes every size-th batch and
 * the sums are added in rank order. NaN when a loss fails (tg_run_eval
 * then fails the run, saying so). */
double tg_run_decoder_val_loss(tg_decoder *m, const tg_token_data *d, int n_batches, int B, int T, int *x, int *y);

/* ---- starting from another run (nanoGPT's init_from) ----------------------- */
/** Loads the weights of a checkpoint into params: a run folder (its
 * train_state.safetensors), a training state or best.safetensors
 * ("model.<name>"), or a plain checkpoint ("<name>"); strict, all or
 * nothing. 0, or -1 with "init_from: <path>: ..." recorded. */
int tg_run_init_from(const char *path, const tg_params *params);
/** The checkpoint file of a run folder or the file itself:
 * DIR/train_state.safetensors when path is a directory, else a copy of path;
 * malloc'd (free it), NULL when out of memory. */
char *tg_run_checkpoint_of(const char *path);

#endif
