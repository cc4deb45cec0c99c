/* A growing string, for JSON being written (a safetensors header, a run
 * report's parts): an allocation failure is kept in oom, the writes after
 * it do nothing, and the writer checks oom once at the end. Internal to the
 * library (not installed); the text is malloc'd: free(b.p). */
#ifndef TG_IO_STRBUF_H
#define TG_IO_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    char *p; /* NUL-terminated text, or NULL before the first write */
    size_t n, cap;
    bool oom;
} tg_strbuf;

void tg_strbuf_put(tg_strbuf *b, const char *s, size_t n); /* appends s[0..n) */
void tg_strbuf_str(tg_strbuf *b, const char *s);           /* appends s */
/* Appends printf's text (at most 511 bytes: numbers, short names). */
void tg_strbuf_fmt(tg_strbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#endif
