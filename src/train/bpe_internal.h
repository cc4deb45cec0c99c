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

/* A slot of the rank table. Most tokens are at most 8 bytes long, and
 * their bytes sit in the slot itself, so a lookup that finds one reads one
 * cache line; longer ones compare the rest in the arena. */
typedef struct {
    uint32_t hash;   /* bpe_hash of the bytes */
    uint32_t id_len; /* id << 8 | min(len, 255); 0 = empty (no token is empty) */
    uint64_t head;   /* the first 8 bytes, zero-padded */
} bpe_slot;

/* A slot of the pair table: tokens a and b joined are token c, one read. */
typedef struct {
    uint64_t key; /* a << 32 | b; UINT64_MAX = empty */
    int32_t c;
    int32_t unused;
} bpe_pair;

struct tg_bpe {
    int n_ids;            /* ids 0 .. n_ids - 1: the ranks, then the special tokens */
    int n_ranks;          /* ids < n_ranks are ranks (mergeable tokens) */
    bpe_span *tok;        /* [n_ids] */
    unsigned char *bytes; /* the arena holding every token's bytes */
    size_t bytes_len, bytes_cap;
    bpe_slot *table;    /* open addressing over the ranks' bytes */
    uint64_t mask;      /* table size - 1 (a power of two, at least twice the ranks) */
    int byte_rank[256]; /* the rank of each single byte */
    bpe_pair *pairs;    /* the pair table (bpe.c) */
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
enum { BPE_LETTER = 1, BPE_NUMBER = 2 }; /* the class column of bpe_class_ranges */
extern const uint32_t bpe_class_ranges[][3];
extern const int bpe_class_ranges_count;

#endif
