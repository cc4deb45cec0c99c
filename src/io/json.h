/* A strict JSON reader for file headers (internal to src/io; not installed).
 *
 * A tg_json is a cursor over [start, end). Every reader advances it and
 * returns 0, or -1 with the reason of the first failure kept in j->why
 * ("header JSON: expected ':' at byte 17, found ','"), so a caller checks
 * once at the end of a chain and reports one message. */
#ifndef TG_IO_JSON_H
#define TG_IO_JSON_H

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

/* Writing: s[0..n) as a JSON string, quoted and escaped ('"', '\\', and
 * control characters as \u00XX), appended to b. */
void tg_json_write_string(tg_strbuf *b, const char *s, size_t n);

#endif
