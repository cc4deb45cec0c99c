/* The library's JSON (internal to the library; not installed): a strict
 * reader for file headers and logs, and the one writer (with the one string
 * escaper) for everything the library writes as JSON: the training state's
 * metadata, the metrics log, samples.jsonl and the run report's data.
 *
 * Reader: a tg_json is a cursor over [start, end). Every reader advances it
 * and returns 0, or -1 with the reason of the first failure kept in j->why
 * ("header JSON: expected ':' at byte 17, found ','"), so a caller checks
 * once at the end of a chain and reports one message.
 *
 * Writer: a tg_json_writer streams values into a growing string
 * (io/strbuf.h), placing the commas and colons itself. Like the strbuf it
 * keeps its first failure (out of memory, a value where a key belongs, more
 * closes than opens) and does nothing after it; tg_json_finish checks once. */
#ifndef TG_IO_JSON_H
#define TG_IO_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "strbuf.h"

/* Nesting limit for skipped values. */
#define TG_JSON_MAX_DEPTH 64

typedef struct {
    const char *p, *end, *start;
    char why[320]; /* the reason of the first failure */
} tg_json;

/* Records the reason (the first one wins); returns -1. */
int tg_json_fail(tg_json *j, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
long tg_json_pos(const tg_json *j); /* bytes from start */
void tg_json_skip_ws(tg_json *j);
int tg_json_expect(tg_json *j, char c); /* skips white space, then c */
/* Containers: tg_json_open takes `open` and returns 1 when `close` follows
 * at once (empty, consumed), 0 when items follow; tg_json_next, after an
 * item, takes ',' and returns 1 (another item), or `close` and returns 0.
 * Both return -1 on anything else. */
int tg_json_open(tg_json *j, char open, char close);
int tg_json_next(tg_json *j, char close);
/* RFC 3629 UTF-8 without overlongs or surrogates: 1 if s is valid. */
int tg_json_valid_utf8(const unsigned char *s, size_t n);
/* A string; its unescaped text goes to out (NUL-terminated, cut at cap - 1)
 * when out is not NULL, its full unescaped length to *len. */
int tg_json_string(tg_json *j, char *out, size_t cap, size_t *len);
/* A non-negative integer (no sign, fraction or exponent); what names it in messages. */
int tg_json_uint(tg_json *j, uint64_t *out, const char *what);
/* [u, u, ...] of at most max integers; *n receives the count. */
int tg_json_uint_array(tg_json *j, uint64_t *out, int max, int *n, const char *what);
/* A number in JSON's grammar (-?int frac? exp?), converted by strtod. */
int tg_json_number(tg_json *j, double *out, const char *what);
/* 1 when the next value is the literal null (consumed), else 0 (nothing consumed). */
int tg_json_null(tg_json *j);
/* Any value, nested at most TG_JSON_MAX_DEPTH deep. */
int tg_json_skip_value(tg_json *j, int depth);

/* ---- the writer ---- */

typedef struct {
    tg_strbuf out; /* the text so far (out.p, out.n) */
    bool compact;  /* separators "," and ":" (a file header); else ", " and ": " */
    bool failed;   /* misuse: see tg_json_finish */
    bool keyed;    /* a key was written: its value comes next */
    bool brk;      /* the next separator ends its line (tg_json_break) */
    int depth;
    char open[TG_JSON_MAX_DEPTH];     /* '{' or '[' of each open container */
    bool has_item[TG_JSON_MAX_DEPTH]; /* it holds an item already */
} tg_json_writer;

/* Opens an object ('{') or an array ('['), as a value. */
void tg_json_begin(tg_json_writer *w, char open);
/* Closes the innermost container. */
void tg_json_end(tg_json_writer *w);
/* The next member's name (inside an object); its value follows. */
void tg_json_key(tg_json_writer *w, const char *key);
/* The one escaper: s[0..n) as a JSON string. '"', '\\' and control
 * characters escaped, '<' as \u003c (the text can sit in an HTML <script>
 * block as it is), and each byte that is not part of valid UTF-8 (and NUL)
 * as U+FFFD, so the output is always valid UTF-8 that tg_json_string reads
 * back. */
void tg_json_put_string(tg_json_writer *w, const char *s, size_t n);
void tg_json_put_str(tg_json_writer *w, const char *s); /* a NUL-terminated s */
/* A number that reads back as v: the shortest of %.15g, %.16g, %.17g that
 * strtod returns to v; null for NaN and infinities, which JSON lacks. */
void tg_json_put_number(tg_json_writer *w, double v);
/* A number to `digits` significant digits (%.*g), for figures' data where
 * size matters more than the last bits; null when not finite. */
void tg_json_put_digits(tg_json_writer *w, double v, int digits);
void tg_json_put_int(tg_json_writer *w, int64_t v);
void tg_json_put_bool(tg_json_writer *w, bool v);
void tg_json_put_null(tg_json_writer *w);
/* Starts a new line before the next item (a list a person may read). */
void tg_json_break(tg_json_writer *w);
/* The text (malloc'd, the caller frees it), or NULL when the writer failed
 * or a container is still open, with the error recorded under `what`. The
 * writer is empty again afterwards. */
char *tg_json_finish(tg_json_writer *w, const char *what);
/* Drops what was written (after an error of the caller's). */
void tg_json_discard(tg_json_writer *w);

#endif
