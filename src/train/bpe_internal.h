/* Internals of the byte-level BPE (bpe.h), shared by bpe.c, bpe_files.c,
 * bpe_train.c and bpe_pretokenize.c; not installed. Names without the tg_
 * prefix stay local to the library (tools/tgrad.map, the Makefile's objcopy). */
#ifndef TG_TRAIN_BPE_INTERNAL_H
#define TG_TRAIN_BPE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "bpe.h"

/* Where a token's bytes sit in the arena; len 0 marks an id that is not a
 * token (tokens are never empty). */
typedef struct {
    uint32_t off, len;
} bpe_span;

#define BPE_MAX_SPECIAL 8

struct tg_bpe {
    int n_ids;            /* ids 0 .. n_ids - 1: the ranks, then the special tokens */
    int n_ranks;          /* ids < n_ranks are ranks (mergeable tokens) */
    bpe_span *tok;        /* [n_ids] */
    unsigned char *bytes; /* the arena holding every token's bytes */
    size_t bytes_len, bytes_cap;
    uint64_t *table;     /* open addressing over the ranks: hash << 32 | (id + 1), 0 = empty */
    uint64_t mask;       /* table size - 1 (a power of two, at least twice the ranks) */
    int byte_rank[256];  /* the rank of each single byte */
    uint64_t *pair_keys; /* the pair table (bpe.c): a << 32 | b, UINT64_MAX = empty */
    int32_t *pair_vals;  /* the rank of tokens a and b joined */
    size_t pair_mask, n_pairs;
    int n_special;
    int special[BPE_MAX_SPECIAL]; /* the special tokens' ids */
};

/* An empty vocabulary with room for n_ids ids (NULL when out of memory). */
tg_bpe *bpe_new(int n_ids);
/* Sets id's bytes (copied), and for id < b->n_ranks enters them in the rank
 * table. 0, or -1 when out of memory. Each byte string at most once. */
int bpe_set(tg_bpe *b, int id, const unsigned char *s, size_t len);
/* Adds a special token with the next id. 0 or -1 (out of memory, too many). */
int bpe_add_special(tg_bpe *b, const char *name);
/* The rank of the byte string, or -1. */
int bpe_rank(const tg_bpe *b, const unsigned char *s, size_t len);
/* Once every rank is set: fills byte_rank and builds the pair table that
 * encoding uses. 0, the first byte that is not a token + 1, or -1 when out
 * of memory. */
int bpe_finish(tg_bpe *b);

/* Grows *p (elements of elem bytes, *cap of them) to hold need; 0 or -1. */
int bpe_grow(void **p, size_t *cap, size_t need, size_t elem);
/* A hash of a short byte string (8 bytes at a time). */
uint32_t bpe_hash(const unsigned char *s, size_t len);

/* The generated tables (unicode_tables.c). */
extern const char bpe_unicode_version[];
extern const uint32_t bpe_letter_ranges[][2], bpe_number_ranges[][2];
extern const int bpe_letter_ranges_count, bpe_number_ranges_count;

#endif
