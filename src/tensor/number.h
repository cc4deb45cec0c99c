/** @file
 * Strict decimal numbers, for command-line flags, environment variables and
 * file metadata: the whole string is [+-]digits (an integer) or, for a
 * real, [+-]digits[.digits][(e|E)[+-]digits] (".5" and "5." too). No
 * blanks, no hex, no inf or nan: strtod and strtol take all of those, so
 * "--steps 0x10" was 16 and " 5" was 5. */
#ifndef TG_NUMBER_H
#define TG_NUMBER_H

#include <stdint.h>

/** A finite real: 0 with the value in *out, or -1 (nothing recorded: the
 * caller names the flag or the key). */
int tg_parse_real(const char *s, double *out);
/** An integer in int64's range: 0 with the value in *out, or -1. */
int tg_parse_int64(const char *s, int64_t *out);

#endif
