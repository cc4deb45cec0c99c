/* Byte-level BPE (bpe.h): the vocabulary (token bytes, a hash table from
 * bytes to rank), encoding by rank and decoding. The files are read and
 * written in bpe_files.c, vocabularies trained in bpe_train.c, the text
 * cut into pieces in bpe_pretokenize.c. */
#include <stdlib.h>
#include <string.h>

#include "../tensor/tensor.h"
#include "bpe_internal.h"

int bpe_grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t ncap = *cap ? *cap : 16;
    while (ncap < need) ncap *= 2;
    void *q = tg_sys_alloc(ncap * elem);
    if (!q) return -1;
    if (*cap) memcpy(q, *p, *cap * elem);
    tg_sys_free(*p);
    *p = q;
    *cap = ncap;
    return 0;
}

/* 8 bytes at a time, each word folded in by a multiply (the constant is
 * 2^64 / golden ratio, as in Fibonacci hashing); the top half is kept. */
uint32_t bpe_hash(const unsigned char *s, size_t len) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ len;
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0x9E3779B97F4A7C15ull;
        h ^= h >> 29;
        s += 8;
        len -= 8;
    }
    if (len) {
        uint64_t w = 0;
        memcpy(&w, s, len);
        h = (h ^ w) * 0x9E3779B97F4A7C15ull;
        h ^= h >> 29;
    }
    h *= 0xBF58476D1CE4E5B9ull;
    return (uint32_t)(h >> 32);
}

tg_bpe *bpe_new(int n_ids) {
    tg_bpe *b = tg_sys_calloc(1, sizeof *b);
    if (!b) return NULL;
    b->n_ids = b->n_ranks = n_ids;
    size_t size = 64;
    while (size < 2 * (size_t)n_ids + 2) size *= 2;
    b->mask = size - 1;
    b->tok = tg_sys_calloc((size_t)n_ids ? (size_t)n_ids : 1, sizeof *b->tok);
    b->table = tg_sys_calloc(size, sizeof *b->table);
    if (!b->tok || !b->table) {
        tg_bpe_free(b);
        return NULL;
    }
    return b;
}

void tg_bpe_free(tg_bpe *b) {
    if (!b) return;
    tg_sys_free(b->tok);
    tg_sys_free(b->table);
    tg_sys_free(b->bytes);
    tg_sys_free(b->pairs);
    tg_sys_free(b);
}

/* The first min(len, 8) bytes of s as a zero-padded word. */
static inline uint64_t head_of(const unsigned char *s, size_t len) {
    uint64_t w = 0;
    if (len >= 8)
        memcpy(&w, s, 8);
    else
        memcpy(&w, s, len);
    return w;
}

int bpe_rank(const tg_bpe *b, const unsigned char *s, size_t len) {
    uint32_t h = bpe_hash(s, len), l = len < 255 ? (uint32_t)len : 255;
    uint64_t head = head_of(s, len);
    for (uint64_t i = h & b->mask;; i = (i + 1) & b->mask) {
        const bpe_slot *e = &b->table[i];
        if (!e->id_len) return -1;
        if (e->hash != h || (e->id_len & 255) != l || e->head != head) continue;
        int id = (int)(e->id_len >> 8);
        if (len <= 8) return id;
        const bpe_span *t = &b->tok[id];
        if (t->len == len && memcmp(b->bytes + t->off + 8, s + 8, len - 8) == 0) return id;
    }
}

int bpe_set(tg_bpe *b, int id, const unsigned char *s, size_t len) {
    if (bpe_grow((void **)&b->bytes, &b->bytes_cap, b->bytes_len + len, 1) != 0) return -1;
    memcpy(b->bytes + b->bytes_len, s, len);
    b->tok[id] = (bpe_span){(uint32_t)b->bytes_len, (uint32_t)len};
    b->bytes_len += len;
    if (id >= b->n_ranks) return 0;
    uint32_t h = bpe_hash(s, len);
    uint64_t i = h & b->mask;
    while (b->table[i].id_len) i = (i + 1) & b->mask;
    b->table[i] = (bpe_slot){h, (uint32_t)id << 8 | (len < 255 ? (uint32_t)len : 255), head_of(s, len)};
    return 0;
}

int bpe_add_special(tg_bpe *b, const char *name) {
    if (b->n_special == BPE_MAX_SPECIAL) return -1;
    size_t cap = (size_t)b->n_ids;
    bpe_span *tok = tg_sys_alloc((cap + 1) * sizeof *tok);
    if (!tok) return -1;
    memcpy(tok, b->tok, cap * sizeof *tok);
    tg_sys_free(b->tok);
    b->tok = tok;
    int id = b->n_ids++;
    b->special[b->n_special++] = id;
    return bpe_set(b, id, (const unsigned char *)name, strlen(name));
}

/* The pair table: (a, b) -> c for every two tokens whose bytes joined are
 * token c. tiktoken's merge loop asks "is the concatenation of parts i and
 * i + 1 a token, of which rank?"; the parts are always tokens, so the
 * answer is this table's, found with one 64-bit key instead of hashing and
 * comparing bytes. Each token c of length L has at most L - 1 entries (one
 * per split whose two halves are tokens). */
#define PAIR_MAX_LEN 128 /* the longest token the pair table holds: SHORT_PIECE, so merge_short needs no other */
static uint64_t pair_slot(uint64_t key) { return (key * 0x9E3779B97F4A7C15ull) >> 20; }

static int pairs_put(tg_bpe *b, uint64_t key, int32_t c) {
    if (2 * (b->n_pairs + 1) > b->pair_mask + 1) { /* grow: keep the load at most 1/2 */
        size_t size = b->pair_mask ? 2 * (b->pair_mask + 1) : 1024;
        bpe_pair *t = tg_sys_alloc(size * sizeof *t);
        if (!t) return -1;
        for (size_t i = 0; i < size; i++) t[i].key = UINT64_MAX;
        for (size_t i = 0; b->pairs && i <= b->pair_mask; i++) {
            if (b->pairs[i].key == UINT64_MAX) continue;
            size_t j = pair_slot(b->pairs[i].key) & (size - 1);
            while (t[j].key != UINT64_MAX) j = (j + 1) & (size - 1);
            t[j] = b->pairs[i];
        }
        tg_sys_free(b->pairs);
        b->pairs = t;
        b->pair_mask = size - 1;
    }
    size_t j = pair_slot(key) & b->pair_mask;
    while (b->pairs[j].key != UINT64_MAX) j = (j + 1) & b->pair_mask;
    b->pairs[j] = (bpe_pair){key, c, 0};
    b->n_pairs++;
    return 0;
}

/* The rank of tokens a and b joined, or NO_RANK. */
#define NO_RANK INT32_MAX
static inline int32_t pair_rank(const tg_bpe *b, int32_t x, int32_t y) {
    uint64_t key = (uint64_t)(uint32_t)x << 32 | (uint32_t)y;
    if (!b->pairs) return NO_RANK; /* no token of two bytes or more */
    for (size_t j = pair_slot(key) & b->pair_mask;; j = (j + 1) & b->pair_mask) {
        const bpe_pair *e = &b->pairs[j];
        if (e->key == key) return e->c;
        if (e->key == UINT64_MAX) return NO_RANK;
    }
}

int bpe_finish(tg_bpe *b) {
    for (int c = 0; c < 256; c++) {
        unsigned char s = (unsigned char)c;
        if ((b->byte_rank[c] = bpe_rank(b, &s, 1)) < 0) return c + 1;
    }
    for (int c = 0; c < b->n_ranks; c++) {
        /* Splitting a token of L bytes looks up both halves at every split:
         * L^2 bytes hashed (a 64 KB token took a second, a 3 MB one
         * minutes). Tokens longer than PAIR_MAX_LEN get no entries: the
         * merge loop finds their rank from the piece's bytes (rank_at), so
         * building the table costs at most PAIR_MAX_LEN^2 a token and
         * loading is linear in the file's size. */
        if (b->tok[c].len > PAIR_MAX_LEN) continue;
        const unsigned char *t = b->bytes + b->tok[c].off;
        for (uint32_t k = 1; k < b->tok[c].len; k++) {
            int x = bpe_rank(b, t, k), y = x < 0 ? -1 : bpe_rank(b, t + k, b->tok[c].len - k);
            if (y >= 0 && pairs_put(b, (uint64_t)(uint32_t)x << 32 | (uint32_t)y, c) != 0) return -1;
        }
    }
    return 0;
}

int tg_bpe_vocab_size(const tg_bpe *b) { return b ? b->n_ids : 0; }

const unsigned char *tg_bpe_token(const tg_bpe *b, int id, size_t *len) {
    if (!b || id < 0 || id >= b->n_ids || b->tok[id].len == 0) return NULL;
    if (len) *len = b->tok[id].len;
    return b->bytes + b->tok[id].off;
}

int tg_bpe_special_id(const tg_bpe *b, const char *name) {
    if (!b || !name) return -1;
    size_t len = strlen(name);
    for (int i = 0; i < b->n_special; i++) {
        const bpe_span *t = &b->tok[b->special[i]];
        if (t->len == len && memcmp(b->bytes + t->off, name, len) == 0) return b->special[i];
    }
    return -1;
}

/* ---- encoding ------------------------------------------------------------------
 * Inside one piece: tiktoken's byte_pair_merge. The piece is a list of parts,
 * at first its bytes; rank[i] is the rank of part i joined with part i + 1
 * (NO_RANK when that is not a token). The lowest rank, leftmost on ties, is
 * merged, and only the two ranks beside it change. O(m^2) for m bytes,
 * which for the short pieces of real text beats anything cleverer; a long
 * piece (a run of thousands of symbols, say) goes to merge_heap instead. */
#define SHORT_PIECE 128

typedef struct {
    int32_t *id;   /* the parts' tokens */
    int32_t *rank; /* rank of parts i, i + 1 joined */
    int64_t *heap; /* merge_heap: rank << 32 | start */
    uint32_t *next, *prev;
    size_t cap, heap_cap;
} scratch;

static size_t merge_short(const tg_bpe *b, const unsigned char *p, size_t m, scratch *s, int *out) {
    int32_t *id = s->id, *rank = s->rank;
    size_t k = m; /* parts */
    for (size_t i = 0; i < m; i++) id[i] = b->byte_rank[p[i]];
    for (size_t i = 0; i + 1 < k; i++) rank[i] = pair_rank(b, id[i], id[i + 1]);
    while (k > 1) {
        size_t best = 0;
        int32_t r = rank[0];
        for (size_t i = 1; i + 1 < k; i++)
            if (rank[i] < r) r = rank[best = i];
        if (r == NO_RANK) break;
        /* parts best and best + 1 become token r */
        id[best] = r;
        memmove(id + best + 1, id + best + 2, (k - best - 2) * sizeof *id);
        memmove(rank + best + 1, rank + best + 2, (k >= best + 3 ? k - best - 3 : 0) * sizeof *rank);
        k--;
        if (best + 1 < k) rank[best] = pair_rank(b, id[best], id[best + 1]);
        if (best > 0) rank[best - 1] = pair_rank(b, id[best - 1], id[best]);
    }
    memcpy(out, id, k * sizeof *out);
    return k;
}

/* Binary min-heap of rank << 32 | start: lowest rank first, then leftmost. */
static void heap_push(int64_t *h, size_t *n, int64_t v) {
    size_t i = (*n)++;
    while (i > 0 && h[(i - 1) / 2] > v) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = v;
}
static int64_t heap_pop(int64_t *h, size_t *n) {
    int64_t top = h[0], v = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && h[c + 1] < h[c]) c++;
        if (h[c] >= v) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = v;
    return top;
}

/* The same merges for a long piece in O(m log m): parts form a linked list
 * (indexed by their first byte), candidate pairs sit in a heap with lazy
 * deletion. An entry (rank, start) is current while part `start` is alive
 * and its pair with the next part still joins to that rank: the same token
 * at the same place, so the same bytes. The order (rank, start) is the
 * short version's order. */
/* The rank of parts i and j (next[i]) of p joined, or NO_RANK: the pair
 * table's answer, or for a join longer than the table holds (PAIR_MAX_LEN),
 * the rank of the bytes p[i, end of j) themselves, as tiktoken asks. */
static int32_t rank_at(const tg_bpe *b, const unsigned char *p, const int32_t *id, uint32_t i, uint32_t j) {
    size_t len = (size_t)b->tok[id[i]].len + b->tok[id[j]].len;
    if (len <= PAIR_MAX_LEN) return pair_rank(b, id[i], id[j]);
    int r = bpe_rank(b, p + i, len);
    return r < 0 ? NO_RANK : r;
}

static size_t merge_heap(const tg_bpe *b, const unsigned char *p, size_t m, scratch *s, int *out) {
    uint32_t *next = s->next, *prev = s->prev;
    int32_t *id = s->id;
    const uint32_t none = UINT32_MAX, gone = UINT32_MAX - 1;
    size_t hn = 0;
    for (size_t i = 0; i < m; i++) {
        next[i] = (uint32_t)(i + 1); /* m: none */
        prev[i] = i ? (uint32_t)(i - 1) : none;
        id[i] = b->byte_rank[p[i]];
    }
    for (size_t i = 0; i + 1 < m; i++) {
        int32_t r = pair_rank(b, id[i], id[i + 1]);
        if (r != NO_RANK) heap_push(s->heap, &hn, (int64_t)r << 32 | (int64_t)i);
    }
    while (hn) {
        int64_t e = heap_pop(s->heap, &hn);
        uint32_t i = (uint32_t)(e & 0xFFFFFFFF), j = next[i];
        int32_t r = (int32_t)(e >> 32);
        if (prev[i] == gone || j >= m || rank_at(b, p, id, i, j) != r) continue; /* stale */
        id[i] = r;                                                               /* j joins i */
        next[i] = next[j];
        if (next[j] < m) prev[next[j]] = i;
        prev[j] = gone;
        if (next[i] < m) {
            int32_t rr = rank_at(b, p, id, i, next[i]);
            if (rr != NO_RANK) heap_push(s->heap, &hn, (int64_t)rr << 32 | i);
        }
        if (prev[i] != none) {
            int32_t rl = rank_at(b, p, id, prev[i], i);
            if (rl != NO_RANK) heap_push(s->heap, &hn, (int64_t)rl << 32 | prev[i]);
        }
    }
    size_t k = 0;
    for (uint32_t i = 0; i < m; i = next[i]) out[k++] = id[i];
    return k;
}

static int scratch_fit(scratch *s, size_t m) {
    if (m + 1 <= s->cap) return 0;
    void *arrays[4] = {s->id, s->rank, s->next, s->prev};
    size_t c = 0;
    for (int a = 0; a < 4; a++) {
        c = s->cap;
        if (bpe_grow(&arrays[a], &c, m + 1, 4) != 0) return -1;
    }
    s->id = arrays[0];
    s->rank = arrays[1];
    s->next = arrays[2];
    s->prev = arrays[3];
    s->cap = c;
    /* a heap entry per push: at most m - 1 at first and two per merge */
    return bpe_grow((void **)&s->heap, &s->heap_cap, 3 * m + 1, sizeof *s->heap);
}

static void scratch_free(scratch *s) {
    tg_sys_free(s->id);
    tg_sys_free(s->rank);
    tg_sys_free(s->next);
    tg_sys_free(s->prev);
    tg_sys_free(s->heap);
}

/* Encodes ordinary text (no special tokens) into out; the number of ids or -1. */
static int64_t encode_ordinary(const tg_bpe *b, const unsigned char *t, size_t n, int *out, scratch *s) {
    int64_t k = 0;
    for (size_t at = 0; at < n;) {
        size_t e = tg_bpe_pretokenize_next(t, n, at), m = e - at;
        const unsigned char *p = t + at;
        at = e;
        if (m == 1) { /* a byte is always a token */
            out[k++] = b->byte_rank[*p];
            continue;
        }
        int whole = bpe_rank(b, p, m); /* most words of real text are one token */
        if (whole >= 0) {
            out[k++] = whole;
            continue;
        }
        if (scratch_fit(s, m) != 0) return -1;
        k += (int64_t)(m <= SHORT_PIECE ? merge_short(b, p, m, s, out + k) : merge_heap(b, p, m, s, out + k));
    }
    return k;
}

/* The first occurrence of s (len > 0) in t, or NULL (memmem is not C11 or POSIX). */
static const unsigned char *find(const unsigned char *t, size_t n, const unsigned char *s, size_t len) {
    for (const unsigned char *p = t; n >= len;) {
        const unsigned char *c = memchr(p, s[0], n - len + 1);
        if (!c) return NULL;
        if (memcmp(c, s, len) == 0) return c;
        n -= (size_t)(c + 1 - p);
        p = c + 1;
    }
    return NULL;
}

int64_t tg_bpe_encode(const tg_bpe *b, const unsigned char *text, size_t n, int flags, int *ids) {
    if (!b || ((!text || !ids) && n > 0)) {
        tg_set_error("bpe_encode: NULL %s", !b ? "vocabulary" : !text ? "text" : "ids");
        return -1;
    }
    scratch s = {0};
    int64_t k = 0;
    size_t at = 0;
    while (at < n) {
        /* the next special token, when they are wanted: the earliest, the longest there */
        size_t sp = n, sp_len = 0;
        int sp_id = -1;
        for (int i = 0; (flags & TG_BPE_SPECIAL) && i < b->n_special; i++) {
            const bpe_span *t = &b->tok[b->special[i]];
            const unsigned char *f = find(text + at, n - at, b->bytes + t->off, t->len);
            size_t where = f ? (size_t)(f - text) : n;
            if (f && (where < sp || (where == sp && t->len > sp_len))) {
                sp = where;
                sp_len = t->len;
                sp_id = b->special[i];
            }
        }
        int64_t got = encode_ordinary(b, text + at, sp - at, ids + k, &s);
        if (got < 0) {
            scratch_free(&s);
            tg_set_error("bpe_encode: out of memory");
            return -1;
        }
        k += got;
        if (sp_id >= 0) ids[k++] = sp_id;
        at = sp + sp_len;
    }
    scratch_free(&s);
    return k;
}

/* ---- decoding ------------------------------------------------------------------ */
int64_t tg_bpe_decoded_size(const tg_bpe *b, const int *ids, size_t n) {
    if (!b || (!ids && n > 0)) {
        tg_set_error("bpe_decode: NULL %s", !b ? "vocabulary" : "ids");
        return -1;
    }
    int64_t size = 0;
    for (size_t k = 0; k < n; k++) {
        if (ids[k] < 0 || ids[k] >= b->n_ids || b->tok[ids[k]].len == 0) {
            tg_set_error("bpe_decode: id %d at %zu is not a token of this vocabulary (%d ids)", ids[k], k, b->n_ids);
            return -1;
        }
        size += b->tok[ids[k]].len;
    }
    return size;
}

int64_t tg_bpe_decode(const tg_bpe *b, const int *ids, size_t n, unsigned char *out, size_t cap) {
    int64_t need = tg_bpe_decoded_size(b, ids, n);
    if (need < 0) return -1;
    if ((size_t)need > cap || (!out && need > 0)) {
        tg_set_error("bpe_decode: %zu ids decode to %lld bytes, the output has room for %zu", n, (long long)need, cap);
        return -1;
    }
    size_t at = 0;
    for (size_t k = 0; k < n; k++) {
        const bpe_span *t = &b->tok[ids[k]];
        memcpy(out + at, b->bytes + t->off, t->len);
        at += t->len;
    }
    return (int64_t)at;
}
