/** @file
 * Files that describe themselves: a tokenizer (tg_tokenizer: bytes or a
 * byte-level BPE) and a model (tg_decoder_open, tg_encoder_open), each opened from its file
 * alone, as nanoGPT's checkpoint carries `model_args` and Hugging Face's
 * config.json its `model_type`: any program, tool or user needs one call,
 * never another program's header.
 *
 * A model file is a safetensors file whose metadata holds (all strings)
 *   model_type   "decoder" (absent: a decoder, as files written before the key)
 *   vocab_size, block_size, n_layer, n_head, n_embd, bias, dropout
 *                nanoGPT's GPTConfig names; gelu ("tanh" or "erf") and pe
 *                (tg_pe_kind_name's: learned, none, relative, rope, alibi;
 *                absent: learned, nanoGPT's)
 *   tokenizer    "bytes" or "bpe" (absent: bytes), and with "bpe"
 *   tokenizer.tiktoken  the whole vocabulary in tiktoken's rank format
 * (tg_decoder_config_json, tg_tokenizer_meta). The sizes are checked
 * against the file's tensors before any model is built, so a crafted file
 * makes a reader allocate no more than the file itself holds.
 *
 *     tg_tokenizer *tok;
 *     tg_decoder *m = tg_decoder_open("out/lm", &tok);       (a run folder or a file)
 *     int64_t n; int *ids = tg_tokenizer_encode(tok, text, len, &n);
 *     ...  tg_decoder_free(m); tg_tokenizer_free(tok); free(ids);
 *
 * Errors: NULL or -1 with one message (tg_last_error) naming the file and
 * what is wrong with it. */
#ifndef TG_TRAIN_MODEL_FILE_H
#define TG_TRAIN_MODEL_FILE_H

#include "../io/safetensors.h"
#include "../nn/decoder.h"
#include "bpe.h"
#include "run.h"
#include "train.h"

/* ---- tokenizers ----------------------------------------------------------- */
/** A tokenizer (opaque): the bytes (token = byte, 256 ids) or a byte-level
 * BPE (bpe.h). Read-only once made: encode and decode may run from several
 * threads at once. Free with tg_tokenizer_free. */
typedef struct tg_tokenizer tg_tokenizer;

/** A tokenizer by name, as the programs' --tokenizer flags take it: "bytes",
 * or any spec of tg_bpe_load ("gpt2", a directory holding encoder.json and
 * vocab.bpe, a .tiktoken rank file). NULL with the error recorded. */
tg_tokenizer *tg_tokenizer_open(const char *spec);
/** A BPE tokenizer around b (taken over: freed with the tokenizer, also on
 * failure); b NULL gives the byte tokenizer. NULL when out of memory. */
tg_tokenizer *tg_tokenizer_from_bpe(tg_bpe *b);
/** The tokenizer a file's metadata records ("tokenizer" and
 * "tokenizer.tiktoken"); the byte tokenizer when it records none (a model
 * from before tokenizers, or nanoGPT's). path is for messages. NULL with
 * "<path>: metadata 'tokenizer' ..." or the vocabulary's own error. */
tg_tokenizer *tg_tokenizer_read(const tg_safetensors *st, const char *path);
/** The JSON object json (NULL: "{}") with the tokenizer's keys added
 * ("tokenizer" and, for a BPE, "tokenizer.tiktoken"): malloc'd (free it),
 * NULL when out of memory or json is not an object. */
char *tg_tokenizer_meta(const tg_tokenizer *t, const char *json);
/** "bytes" or "bpe" (NULL for NULL). */
const char *tg_tokenizer_name(const tg_tokenizer *t);
/** Ids in use: 256 for bytes, tg_bpe_vocab_size for a BPE; 0 for NULL. */
int tg_tokenizer_vocab_size(const tg_tokenizer *t);
/** The bytes of token id (*len receives their count; owned by t), or NULL
 * when id is not a token. */
const unsigned char *tg_tokenizer_token(const tg_tokenizer *t, int id, size_t *len);
/** The BPE inside t (owned by t), or NULL for the byte tokenizer. */
const tg_bpe *tg_tokenizer_bpe(const tg_tokenizer *t);
/** A fingerprint of the vocabulary (64-bit FNV-1a over its tiktoken text,
 * "bytes" for the byte tokenizer), as 16 hex digits in hex[17]: what ties a
 * token file to the tokenizer that made it. 0, or -1 for NULL arguments. */
int tg_tokenizer_hash(const tg_tokenizer *t, char hex[17]);
/** text (n bytes) as ids: malloc'd (free it; room for at least one id, so
 * an empty text gives a valid pointer and *count 0), their number in
 * *count. NULL with the error recorded. */
int *tg_tokenizer_encode(const tg_tokenizer *t, const unsigned char *text, size_t n, int64_t *count);
/** The bytes of ids into out (room for cap bytes): their number, or -1
 * with the error recorded (an id that is not a token, cap too small). With
 * out NULL, only the number. */
int64_t tg_tokenizer_decode(const tg_tokenizer *t, const int *ids, size_t n, unsigned char *out, size_t cap);
/** Encodes the file text_path into the token file tokens_path (tg_tokens_save,
 * tied to t: tg_tokens_tie), atomically; the text's bytes and the tokens' count in *bytes and *count
 * when not NULL. 0, or -1 with the error recorded. */
int tg_tokenizer_encode_file(const tg_tokenizer *t, const char *text_path, const char *tokens_path, size_t *bytes,
                             int64_t *count);
/** Ties the token file at tokens_path to t: writes the sidecar
 * "<tokens_path>.tokenizer", one line "<name> <vocab size> <hash>"
 * (tg_tokenizer_name, tg_tokenizer_vocab_size, tg_tokenizer_hash),
 * atomically. tg_tokenizer_encode_file calls it. 0, or -1 with the error
 * recorded. */
int tg_tokens_tie(const char *tokens_path, const tg_tokenizer *t);
/** Checks that the token file at tokens_path was made with t: 0 when its
 * sidecar (tg_tokens_tie) names t's vocabulary, or when it has none (a file
 * made by another program: numpy, nanoGPT's prepare.py); -1 with
 * "<path> was made with the <name> tokenizer of <V> ids (hash <h>), not
 * this <name> of <V> ids (hash <h>)" when it names another, so ids are
 * never decoded with a vocabulary they do not belong to. */
int tg_tokens_check(const char *tokens_path, const tg_tokenizer *t);
/** Frees t; NULL is a no-op. */
void tg_tokenizer_free(tg_tokenizer *t);

/* ---- decoder model files -------------------------------------------------- */
/** Opens a decoder: a run folder (its train_state.safetensors), a training
 * state or best.safetensors (tensors "model.<name>"), or a model file
 * (tg_decoder_save, nanoGPT's names). The configuration comes from the
 * metadata (tg_decoder_config_read, checked against the tensors), then the
 * weights (strict). With tok not NULL, *tok receives the file's tokenizer
 * (tg_tokenizer_read; its vocabulary must fit the model's). NULL with the
 * exact reason recorded (for a file that is no checkpoint, what it is);
 * nothing is left allocated then. The model comes in eval mode; its
 * dropout is the file's (0 when it records none), for tg_decoder_train. */
tg_decoder *tg_decoder_open(const char *path, tg_tokenizer **tok);
/** Writes page (NULL: DIR/report.html), the report of the decoder run in
 * dir (report.h): its settings and curves, m's attention of every layer and
 * head over validation window 0 of d (B windows of m's block size; the
 * tokens shown as tok's text), the positional encoding in use and the
 * samples up to step (0: all). What lm writes after each checkpoint and
 * tgrad-report from the folder alone. 0, or -1 with the error recorded. */
int tg_decoder_report(const char *dir, const char *page, tg_decoder *m, const tg_tokenizer *tok, const tg_token_data *d,
                      int B, int64_t step);

/* ---- decoder runs (decoder_run.c) ------------------------------------------ */
/** The configuration (and, with tok not NULL, the tokenizer: *tok, free it)
 * of the checkpoint at path (a run folder, a training state,
 * best.safetensors or a model file), read and checked as tg_decoder_open
 * does, without building the model: what a run started from it (or
 * resuming it) takes as its shape. 0, or -1 with the error recorded. */
int tg_decoder_config_of(const char *path, tg_decoder_config *c, tg_tokenizer **tok);
/** The weights of path (a run folder, a training state: tg_run_init_from;
 * a model file: tg_decoder_load) into m, whose parameters are params: a new
 * run started from another's weights. 0, or -1 with the error recorded. */
int tg_decoder_init_from(tg_decoder *m, const tg_params *params, const char *path);
/** Checks a token file against a model of c trained on B windows a step
 * over ranks processes: tokens the vocabulary covers, B divisible by ranks,
 * a training split longer than a window and a validation split of at least
 * one batch. 0, or -1 with the reason recorded (naming --batch and --block). */
int tg_decoder_check_data(const tg_token_data *d, const tg_decoder_config *c, int B, int ranks);
/** The token file of the run in dir, malloc'd (free it): a resumed run's
 * own DIR/tokens.npy when it has one; data itself when it is a .npy token
 * file (check it with tg_tokens_check); otherwise, on rank 0, the text file
 * data (NULL: Debian's fortunes, written to DIR/fortunes.txt) encoded with
 * tok into DIR/tokens.npy, saying what it did on stdout (the other ranks
 * get the path and wait at a barrier for the file). NULL with the error
 * recorded. */
char *tg_run_tokens(const char *dir, const char *data, const tg_tokenizer *tok, bool resume);
/** Bytes per token over the targets of d's first n_batches validation
 * batches (B windows of T; x and y room for B*T ids): what turns a loss per
 * token into bits per byte, bpb = loss / ln 2 / bytes a token, so runs of
 * different vocabularies compare. 1 for the byte tokenizer. */
double tg_tokenizer_bytes_per_token(const tg_tokenizer *t, const tg_token_data *d, int n_batches, int B, int T, int *x,
                                    int *y);
/** Prints a sample on stdout: "--- sample (temperature T, top-k K, seed S)
 * ---", the prompt ("" starts from one newline, as nanoGPT's) and n_new
 * generated tokens as tok's text (control bytes but newline and tab as
 * backslash-x and two hex digits: a byte-level model samples any byte), then "---". 0, or -1 with the
 * error recorded. */
int tg_decoder_print_sample(tg_decoder *m, const tg_tokenizer *tok, const char *prompt, int n_new, double temperature,
                            int top_k, uint64_t seed);
/** Writes the logits of prompt (tok's ids), [1, n, V] in eval mode, to the
 * .npy file path and prints "wrote PATH: logits [1, n, V] of the prompt". A
 * logit that is not finite is refused and nothing written. 0, or -1 with
 * the error recorded. */
int tg_decoder_write_logits(tg_decoder *m, const tg_tokenizer *tok, const char *prompt, const char *path);
/** What a decoder run writes after each checkpoint (tg_run_on_save with
 * tg_decoder_outputs_save): the model file (tg_decoder_save with the
 * tokenizer's keys), the loss curves (lm_loss.png), the attention of every
 * layer and head over validation window 0 (lm_attention.png), a sample of
 * at most 160 tokens appended to samples.jsonl (a new run starts the file
 * afresh) and report.html (tg_decoder_report). */
typedef struct {
    tg_run *run;             /**< the run (its folder and losses) */
    tg_decoder *m;           /**< the model */
    const tg_tokenizer *tok; /**< its tokenizer */
    const tg_token_data *d;  /**< the data (validation window 0 for the figure and report) */
    int batch;               /**< windows a batch (B of the report's window) */
    int *x;                  /**< room for batch * block ids (inputs) */
    int *y;                  /**< room for batch * block ids (targets) */
    const char *model_path;  /**< the model file, e.g. DIR/lm.safetensors */
    const char *data;        /**< the text's path for the figure's title (NULL: Debian's fortunes) */
    const char *prompt;      /**< the sample's start ("": one newline) */
    int tokens;              /**< the sample's tokens (at most 160 are drawn) */
    int top_k;               /**< the sample's top-k */
    double temperature;      /**< the sample's temperature */
    uint64_t seed;           /**< the sample's seed */
    bool resumed;            /**< a resumed run keeps the samples it has */
    const char *prog;        /**< the program's name, before its messages on stderr */
    bool started;            /**< set by the calls: one has run */
    bool drew;               /**< set by the calls: the last drew both figures */
} tg_decoder_outputs;
/** The outputs above for ctx, a tg_decoder_outputs, at step: 0 when the
 * model file was written (a figure or report that could not be is said on
 * stderr after "prog: ", and the run goes on), -1 with the error recorded
 * otherwise. The signature of tg_run_on_save's callback. */
int tg_decoder_outputs_save(void *ctx, int64_t step);

/* ---- encoder model files -------------------------------------------------- */
/** The model of the toy sequence tasks (reverse, sort): a Transformer
 * encoder and Linear(d, vocab) at every position, one logit row per token.
 * Its file describes itself: tg_encoder_save writes model_type "encoder"
 * and the configuration under the names reverse has always used (vocab,
 * seq_len, dim, heads, ffn, layers, pe, task, then max_len, bias, dropout),
 * so reverse's older files and its runs' checkpoints open too. */
typedef struct {
    tg_encoder *encoder; /**< the encoder, tensors "encoder.*" */
    tg_linear *head;     /**< Linear(d, vocab) at every position, tensors "head.*" */
    tg_params params;    /**< both, under those names */
    int seq_len;         /**< the sequence length it is trained on (the file's "seq_len") */
    char task[16];       /**< what it was trained for, a word ("reverse"; the file's "task"), or "" */
} tg_encoder_model;
/** Builds m as cfg describes (tg_encoder_new, then the head, both drawn
 * from rng in that order), for sequences of seq_len tokens; task is left
 * "" for the caller. 0, or -1 with the error recorded and nothing left
 * allocated. */
int tg_encoder_model_init(tg_encoder_model *m, const tg_encoder_config *cfg, int seq_len, tg_rng *rng);
/** Frees what m holds (not m); NULL members and NULL are no-ops. */
void tg_encoder_model_free(tg_encoder_model *m);
/** The logits [B*T, vocab] of tokens [B, T] (ids in [0, vocab)) in the
 * current scope: the head over the encoder's output, no mask. NULL with
 * the error recorded. */
tg_tensor *tg_encoder_model_forward(tg_encoder_model *m, const int *tokens, int B, int T);
/** Held-out scores of n sequences of m->seq_len tokens and their targets
 * (one per token), in eval mode and without gradients, 256 sequences a
 * forward: *token_acc the share of tokens whose largest logit is the
 * target, *seq_acc the share of sequences right at every token (either may
 * be NULL). Returns their mean cross-entropy; NaN with the error recorded
 * for NULL arguments or n < 1. The model's mode is restored. */
double tg_encoder_model_evaluate(tg_encoder_model *m, const int *tokens, const int *targets, int n, double *token_acc,
                                 double *seq_acc);
/** Writes m's weights ("encoder.*", "head.*") with its configuration as
 * metadata (see tg_encoder_model); atomic (tg_checkpoint_save). 0, or -1
 * with the error recorded (a task that is not a word included). */
int tg_encoder_save(const tg_encoder_model *m, const char *path);
/** m's configuration as a model file's metadata (see tg_encoder_model): a
 * JSON object of string values, malloc'd (free it); what tg_encoder_save
 * writes, and a run's model metadata (tg_run_config.meta), so that
 * tg_encoder_open rebuilds the model from the run's checkpoints. NULL with
 * the error recorded (a task that is not a word, out of memory). */
char *tg_encoder_model_meta(const tg_encoder_model *m);
/** Reads an encoder model's configuration from st's metadata (path names
 * the file in errors) and checks it against the tensors (under "model." in
 * a run's checkpoint, else bare) before anything is built: every number a
 * whole decimal string in its range (vocab 2..4096, seq_len 2..1000, dim
 * 2..4096, heads 1..256 dividing dim, ffn 1..100000, layers 1..64), pe one
 * of the six kinds, model_type "encoder" when present, the embedding, head,
 * last block's FFN and a learned table of the implied shapes, no block
 * beyond layers. max_len absent: 1000, or seq_len when longer. 0, or -1
 * with the reason recorded ("metadata 'vocab' is missing", "... has shape
 * (16,64), but the metadata says (16,32)"). */
int tg_encoder_config_read(const tg_safetensors *st, const char *path, tg_encoder_config *c, int *seq_len);
/** Opens an encoder model into m: a run folder (its
 * train_state.safetensors), a run's checkpoint or a model file
 * (tg_encoder_save, or reverse's older files). Configuration by
 * tg_encoder_config_read, task (a word) from the metadata, then the weights
 * (strict). The model comes in eval mode. 0, or -1 with the exact reason
 * recorded; nothing is left allocated then (m may still be freed). */
int tg_encoder_open(const char *path, tg_encoder_model *m);
/** Writes page (NULL: DIR/report.html), the report of the encoder run in
 * dir (report.h): its settings and curves, m's attention of every layer
 * and head over tokens[0..m->seq_len) (shown as their ids) and its
 * positional encoding, under title (NULL: dir). What reverse writes after
 * each checkpoint and tgrad-report from the folder alone. 0, or -1 with the
 * error recorded. */
int tg_encoder_report(const char *dir, const char *page, tg_encoder_model *m, const int *tokens, const char *title);

/* ---- the toy sequence tasks of an encoder model (encoder_task.c) --------- */
/** The task named task, as a static string: "reverse" (the targets are the
 * tokens in reverse order) or "sort" (in increasing order); NULL with
 * "task '<task>': expected reverse or sort" recorded for any other. */
const char *tg_seq_task_name(const char *task);
/** n random sequences of T tokens in [0, V) into tokens [n, T], drawn from
 * rng one tg_rng_next_u64 per token in order, and the task's targets into
 * targets [n, T]. 0, or -1 with the error recorded (an unknown task, NULL
 * arguments, n < 0, T < 1, V outside 2..4096). */
int tg_seq_task_batch(const char *task, tg_rng *rng, int n, int T, int V, int *tokens, int *targets);
/** The held-out set of a run of seed: tg_seq_task_batch drawing from the
 * seed's stream 2 (tg_rng_fork), which training never draws from, so the
 * first sequences of a larger set are those of a smaller one. 0, or -1 as
 * tg_seq_task_batch. */
int tg_seq_task_heldout(const char *task, uint64_t seed, int n, int T, int V, int *tokens, int *targets);
/** Scores m on the first n sequences of its task's (m->task) held-out set
 * of seed (tg_seq_task_heldout, m->seq_len tokens) as
 * tg_encoder_model_evaluate does: the mean cross-entropy, *token_acc and
 * *seq_acc (either may be NULL). NaN (and NaN scores) with the error
 * recorded for a NULL model, n < 1, a task that is not one, no memory. */
double tg_encoder_task_evaluate(tg_encoder_model *m, uint64_t seed, int n, double *token_acc, double *seq_acc);
/** One training step of m on the global batch tokens, targets [B, T]:
 * under data parallelism this rank's slice of B / ranks sequences (each
 * rank holds the whole batch), else all of it; the cross-entropy's backward
 * through the run (tg_run_backward), then tg_run_step. 0, or -1 (the run
 * has failed; the error is recorded). */
int tg_run_encoder_step(tg_run *run, tg_encoder_model *m, const int *tokens, const int *targets, int B, int T);
/** Draws the attention weights of every layer (rows) and head (columns) of
 * m over tokens[0..m->seq_len) into png_path under title
 * (tg_figure_attention), from a forward in eval mode without gradients;
 * m's mode is restored. 0, or -1 with the error recorded. */
int tg_encoder_draw_attention(tg_encoder_model *m, const int *tokens, const char *png_path, const char *title);
/** The page of a toy-task run in dir (tg_encoder_report, page NULL:
 * DIR/report.html): m's attention over the first sequence of seed's
 * held-out set, titled with m's task and shape ("reverse: the sort task,
 * T 16, V 16, d 64, 4 heads, 2 blocks, fixed positions"). What reverse
 * writes after each checkpoint and tgrad-report from the folder alone, the
 * same page. 0, or -1 with the error recorded. */
int tg_encoder_task_report(const char *dir, const char *page, tg_encoder_model *m, uint64_t seed);
/** What a toy-task run's page needs after each checkpoint
 * (tg_encoder_task_on_save). */
typedef struct {
    tg_run *run;         /**< the run (its folder) */
    tg_encoder_model *m; /**< the model */
    uint64_t seed;       /**< the run's seed: its held-out set */
    const char *prog;    /**< the program's name, before its messages on stderr (NULL: "run") */
} tg_encoder_task_page;
/** tg_run_on_save's callback with ctx a tg_encoder_task_page: writes the
 * run's report.html (tg_encoder_task_report). A page that cannot be
 * written is said on stderr and the run goes on: returns 0. */
int tg_encoder_task_on_save(void *ctx, int64_t step);

#endif
