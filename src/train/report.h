/** @file
 * The run's report: report.html in the run folder, one self-contained page
 * (written by src/viz/report.c; its script draws it in the browser) with
 * the settings, the loss and learning-rate curves, and what a program adds:
 * a decoder's attention over one window of real text and its positional
 * encodings, samples, a table. This file gathers that data from the run and
 * the model as JSON; viz writes the page.
 *
 *     tg_report *rep = tg_report_new();
 *     tg_report_add_run(rep, "out/lm");                 // settings + metrics.jsonl
 *     tg_report_add_decoder(rep, m, window, T, NULL);   // attention + positions
 *     tg_report_add_samples(rep, "out/lm", step);       // out/lm/samples.jsonl
 *     tg_report_write(rep, "out/lm/report.html", "lm: GPT on the fortunes");
 *     tg_report_free(rep);
 *
 * A program refreshes it from its tg_run_on_save callback (after each
 * checkpoint); `tgrad-report DIR` (tools/report.c) rebuilds it from a run
 * folder alone. Errors: -1 with "report: ..." recorded (tg_last_error), or
 * the message of the lower call that failed (a forward, reading a log). */
#ifndef TG_TRAIN_REPORT_H
#define TG_TRAIN_REPORT_H

#include "../nn/decoder.h"
#include "run.h"
#include "train.h"

/** The page's data being gathered (opaque): up to 16 named parts of JSON
 * text. Made by tg_report_new, freed with tg_report_free; not for use by
 * two threads at once. */
typedef struct tg_report tg_report;

/** An empty report; NULL when out of memory (recorded). */
tg_report *tg_report_new(void);
/** Frees the report and its parts; NULL is a no-op. */
void tg_report_free(tg_report *r);
/** A part of the page's data under name (tg_viz_report's list), its JSON
 * text copied; a part added again replaces the first. 0, or -1 with the
 * error recorded (NULL argument, json not exactly one JSON value, a 17th
 * part, out of memory). */
int tg_report_add(tg_report *r, const char *name, const char *json);
/** How many lines of the run's logs (metrics.jsonl, samples.jsonl) the
 * report left out because they did not parse; each file with such lines
 * also gets one warning on stderr. 0 for NULL. */
int64_t tg_report_dropped(const tg_report *r);
/** From a run folder: "settings", the metadata of DIR/train_state.safetensors
 * (the training state's own keys left out), "metrics", the curves of
 * DIR/metrics.jsonl (steps past the checkpoint's, left by a kill before a
 * resume, are dropped), and the tables of DIR/profile.json when there is
 * one (tg_report_add_rows_file; one that cannot be read is a warning on
 * stderr). A missing checkpoint leaves the settings out. 0, or
 * -1 with the error recorded: a missing or unreadable DIR/metrics.jsonl is
 * an error ("metrics_log_read: ..."). */
int tg_report_add_run(tg_report *r, const char *dir);
/** "attention": one forward of m over tokens[0..T) (T in 1..block_size) in
 * eval mode (no graph; m's training mode and the grad mode are restored,
 * attention recording is left off), every layer's and head's weights with
 * the tokens' text: token_text[id], or, when token_text is NULL, the tokens
 * as bytes (ids below 256; printable ASCII, newline and tab as is, others
 * as the text `\xNN`). Appended to "positions": what m's position kind uses
 * over its block_size positions (the learned table wpe; the first layer's
 * relative_k table; ALiBi's biases against offset per head; RoPE's score
 * q.k of equal vectors against offset). Weights are kept to 3 decimals (the
 * page shows 3). 0, or -1 with the error recorded (e.g. a token outside the
 * vocabulary, a failed forward). */
int tg_report_add_decoder(tg_report *r, tg_decoder *m, const int *tokens, int T, const char *const *token_text);
/** The same for an encoder (tg_encoder, nn.h) over one sequence
 * tokens[0..T) (T at most the positional table's max_len when it has one):
 * "attention" with every layer and head, then its positions appended to
 * "positions" (tg_report_add_positions). token_text as above (a toy task's
 * ids: names such as "12"). The model's mode and grad mode are restored,
 * attention recording is left off. 0, or -1 with the error recorded. */
int tg_report_add_encoder(tg_report *r, tg_encoder *m, const int *tokens, int T, const char *const *token_text);
/** Appends what m's position kind uses over positions 0..T-1 to the
 * "positions" part, each plot titled with the kind: the fixed sinusoidal
 * table (d2l's heatmap); the learned table with the fixed one beside it;
 * the first layer's relative_k; ALiBi's biases against offset per head;
 * RoPE's score against offset; nothing for none. Called for several
 * models, the page shows them all (extrapolate: one per kind). T must be in
 * 1..max_len when m has a positional table. 0, or -1 with the error
 * recorded. */
int tg_report_add_positions(tg_report *r, const tg_encoder *m, int T);
/** "samples": the lines {"step": s, "text": "..."} of DIR/samples.jsonl with
 * step <= max_step (0 or less: all), the last one of each step; a line of an
 * earlier step (a resumed run) drops the lines after it. Each line is parsed
 * and its values written again (never copied): a line that does not parse,
 * or has anything after its object, is left out, counted
 * (tg_report_dropped) and said in one warning on stderr. No file or no
 * line: no part. 0, or -1 with the error recorded (NULL argument, out of
 * memory). */
int tg_report_add_samples(tg_report *r, const char *dir, int64_t max_step);
/** Appends a sample to DIR/samples.jsonl as one line {"step": step, "text":
 * "..."} (text of n bytes; bytes that are not printable ASCII or newline/tab
 * as the text `\xNN`). Not atomic: a plain append. 0, or -1 with the error
 * recorded. */
int tg_report_append_sample(const char *dir, int64_t step, const char *text, size_t n);
/** "table", a list: one more table of rows x[0..n) against n_series
 * columns (ys[s * n + i], names[s]; NaN or infinite: null, shown "–"),
 * drawn as a table and a chart. Tables added before stay (the part is a
 * list). 0, or -1 with the error recorded (a NULL argument, n or n_series
 * below 1). */
int tg_report_add_table(tg_report *r, const char *title, const char *xlabel, const char *ylabel, const double *x, int n,
                        const char *const *names, const double *ys, int n_series);
/** Appends to "table" the tables of a JSON file (a profiler's, ...): one
 * table or a list of them, each {"title": "...", "columns": ["name", ...],
 * "rows": [[cell, ...], ...]}, a cell a string, a number or null, every row
 * as long as columns (at most 64). The file is parsed and its values
 * written again; other keys are ignored. The page shows each as a plain
 * table. tg_report_add_run adds DIR/profile.json this way when the run
 * has one. 0, or -1 with "report: <path>: <reason>" recorded. */
int tg_report_add_rows_file(tg_report *r, const char *path);
/** Writes the page to path (tg_viz_report, atomically; title NULL: "Run
 * report"). 0, or -1 with "report: <viz's message>" recorded. */
int tg_report_write(const tg_report *r, const char *path, const char *title);
/** The page of a run folder alone (settings, curves, samples if any) as
 * DIR/report.html: what a program with nothing more to show writes from
 * its tg_run_on_save callback. title NULL: dir. 0, or -1 with the error
 * recorded. */
int tg_report_write_run(const char *dir, const char *title);
/** A tg_run_on_save callback (ctx: the tg_run) writing tg_report_write_run
 * of the run's folder, titled with the folder; a page that cannot be written
 * is said on stderr and the run goes on (always returns 0). step is unused. */
int tg_report_on_save(void *run, int64_t step);

#endif
