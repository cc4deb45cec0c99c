/* Training a byte-level BPE (bpe.h): minbpe's RegexTokenizer.train
 * (Karpathy, github.com/karpathy/minbpe) with GPT-2's pattern, made
 * incremental the way Hugging Face's tokenizers and SentencePiece do it.
 *
 * minbpe recounts every pair of the whole text for each merge: O(merges x
 * text). Here the text becomes a table of distinct pieces with their
 * counts (a word occurring 10,000 times is merged once, its pairs weighted
 * by 10,000), pair counts live in a hash table with, per pair, the list of
 * pieces holding it, and the best pair comes from a max-heap with lazy
 * deletion. A merge touches only the pieces that hold its pair: each such
 * piece's pairs are subtracted, the piece merged left to right (minbpe's
 * merge()), its pairs added back. Only pairs with the new token gain
 * counts, and those are pushed after the merge; every other pair only
 * loses, so a heap entry whose count is out of date is too high, and is
 * pushed again with its true count when it surfaces.
 *
 * Ties: the highest count wins, then the smallest (left id, right id).
 * minbpe breaks ties by first occurrence in the text (Python's dict order
 * in max()); ids are a rule that needs no bookkeeping and is the same for
 * any order of the pieces. */
#include <string.h>

#include "../tensor/tensor.h"
#include "bpe_internal.h"
#include "train.h"

typedef struct {
    uint32_t text_off, text_len; /* the piece in the text */
    uint32_t sym_off, sym_len;   /* its current ids in syms */
    int64_t count;               /* occurrences in the text */
    int32_t stamp;               /* the last merge that visited it */
} word;

typedef struct {
    uint64_t key;   /* left << 32 | right */
    int64_t count;  /* occurrences, weighted by piece counts */
    int32_t *where; /* pieces that hold (or held) the pair; appended, deduplicated against the last */
    size_t n, cap;
    int32_t stamp; /* the last merge that pushed it */
} pair;

typedef struct {
    int64_t count;
    uint64_t key;
} entry;

typedef struct {
    const unsigned char *text;
    word *words;
    size_t n_words, words_cap;
    uint32_t *word_table; /* open addressing: word index + 1 */
    size_t word_mask;
    int32_t *syms;
    size_t n_syms, syms_cap;
    pair *pairs;
    size_t n_pairs, pairs_cap;
    uint32_t *pair_table; /* pair index + 1 */
    size_t pair_mask;
    entry *heap;
    size_t n_heap, heap_cap;
    int oom;
} trainer;

static uint32_t key_hash(uint64_t k) {
    k *= 0x9E3779B97F4A7C15ull;
    return (uint32_t)(k >> 32);
}

static size_t pair_hash_at(const trainer *t, size_t p) { return key_hash(t->pairs[p].key); }
static size_t word_hash_at(const trainer *t, size_t w) {
    return bpe_hash(t->text + t->words[w].text_off, t->words[w].text_len);
}

/* Doubles an open-addressing index (entry + 1 per slot, 0 empty: the pair
 * and word tables) and puts entries 0..n-1 back by hash_at; -1 when out
 * of memory (the old table kept). */
static int index_grow(const trainer *t, uint32_t **table, size_t *mask, size_t n,
                      size_t (*hash_at)(const trainer *, size_t)) {
    size_t size = (*mask + 1) * 2;
    uint32_t *tab = tg_sys_calloc(size, sizeof *tab);
    if (!tab) return -1;
    for (size_t e = 0; e < n; e++) {
        size_t i = hash_at(t, e) & (size - 1);
        while (tab[i]) i = (i + 1) & (size - 1);
        tab[i] = (uint32_t)(e + 1);
    }
    tg_sys_free(*table);
    *table = tab;
    *mask = size - 1;
    return 0;
}

/* The pair's index, created with count 0 when new; -1 when out of memory. */
static long pair_find(trainer *t, uint64_t key) {
    size_t i = key_hash(key) & t->pair_mask;
    for (; t->pair_table[i]; i = (i + 1) & t->pair_mask)
        if (t->pairs[t->pair_table[i] - 1].key == key) return (long)t->pair_table[i] - 1;
    if (bpe_grow((void **)&t->pairs, &t->pairs_cap, t->n_pairs + 1, sizeof *t->pairs) != 0) return -1;
    t->pairs[t->n_pairs] = (pair){key, 0, NULL, 0, 0, -1};
    t->pair_table[i] = (uint32_t)(++t->n_pairs);
    if (2 * t->n_pairs > t->pair_mask && index_grow(t, &t->pair_table, &t->pair_mask, t->n_pairs, pair_hash_at) != 0)
        return -1;
    return (long)t->n_pairs - 1;
}

/* Adds delta to the pair's count; with w >= 0, notes that piece w holds it. */
static long pair_add(trainer *t, int32_t left, int32_t right, int64_t delta, int32_t w) {
    long p = pair_find(t, (uint64_t)(uint32_t)left << 32 | (uint32_t)right);
    if (p < 0) return t->oom = 1, -1;
    pair *q = &t->pairs[p];
    q->count += delta;
    if (w >= 0 && (q->n == 0 || q->where[q->n - 1] != w)) {
        if (bpe_grow((void **)&q->where, &q->cap, q->n + 1, sizeof *q->where) != 0) return t->oom = 1, -1;
        q->where[q->n++] = w;
    }
    return p;
}

/* Max-heap: higher count first, then the smaller key. */
static int above(entry a, entry b) { return a.count > b.count || (a.count == b.count && a.key < b.key); }
static void push(trainer *t, int64_t count, uint64_t key) {
    if (bpe_grow((void **)&t->heap, &t->heap_cap, t->n_heap + 1, sizeof *t->heap) != 0) {
        t->oom = 1;
        return;
    }
    entry v = {count, key};
    size_t i = t->n_heap++;
    while (i > 0 && above(v, t->heap[(i - 1) / 2])) {
        t->heap[i] = t->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    t->heap[i] = v;
}
static entry pop(trainer *t) {
    entry top = t->heap[0], v = t->heap[--t->n_heap];
    size_t i = 0, n = t->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && above(t->heap[c + 1], t->heap[c])) c++;
        if (!above(t->heap[c], v)) break;
        t->heap[i] = t->heap[c];
        i = c;
    }
    if (n) t->heap[i] = v;
    return top;
}

/* Enters the piece text[off, off + len) in the word table (len >= 2). */
static int add_word(trainer *t, uint32_t off, uint32_t len) {
    const unsigned char *s = t->text + off;
    size_t i = bpe_hash(s, len) & t->word_mask;
    for (; t->word_table[i]; i = (i + 1) & t->word_mask) {
        word *w = &t->words[t->word_table[i] - 1];
        if (w->text_len == len && memcmp(t->text + w->text_off, s, len) == 0) {
            w->count++;
            return 0;
        }
    }
    if (bpe_grow((void **)&t->words, &t->words_cap, t->n_words + 1, sizeof *t->words) != 0 ||
        bpe_grow((void **)&t->syms, &t->syms_cap, t->n_syms + len, sizeof *t->syms) != 0)
        return -1;
    t->words[t->n_words] = (word){off, len, (uint32_t)t->n_syms, len, 1, -1};
    for (uint32_t k = 0; k < len; k++) t->syms[t->n_syms++] = s[k];
    t->word_table[i] = (uint32_t)(++t->n_words);
    if (2 * t->n_words > t->word_mask) return index_grow(t, &t->word_table, &t->word_mask, t->n_words, word_hash_at);
    return 0;
}

static void trainer_free(trainer *t) {
    for (size_t p = 0; p < t->n_pairs; p++) tg_sys_free(t->pairs[p].where);
    tg_sys_free(t->pairs);
    tg_sys_free(t->pair_table);
    tg_sys_free(t->words);
    tg_sys_free(t->word_table);
    tg_sys_free(t->syms);
    tg_sys_free(t->heap);
}

/* Applies merge m (left, right) -> id to piece w, keeping the pair counts. */
static void merge_word(trainer *t, int32_t w, int32_t left, int32_t right, int32_t id, int32_t m, int32_t *touched,
                       size_t *n_touched) {
    word *wd = &t->words[w];
    int32_t *s = t->syms + wd->sym_off;
    uint32_t n = wd->sym_len, k, o;
    for (k = 0; k + 1 < n && !(s[k] == left && s[k + 1] == right); k++) {}
    if (k + 1 >= n) return; /* a stale entry of the list: the piece lost the pair earlier */
    for (k = 0; k + 1 < n; k++) pair_add(t, s[k], s[k + 1], -wd->count, -1);
    for (k = 0, o = 0; k < n; o++) { /* minbpe's merge(): left to right, no overlaps */
        if (k + 1 < n && s[k] == left && s[k + 1] == right) {
            s[o] = id;
            k += 2;
        } else {
            s[o] = s[k++];
        }
    }
    wd->sym_len = n = o;
    for (k = 0; k + 1 < n; k++) {
        int with_new = s[k] == id || s[k + 1] == id;
        long p = pair_add(t, s[k], s[k + 1], wd->count, with_new ? w : -1);
        if (p >= 0 && with_new && t->pairs[p].stamp != m) {
            t->pairs[p].stamp = m;
            touched[(*n_touched)++] = (int32_t)p;
        }
    }
}

tg_bpe *tg_bpe_train(const unsigned char *text, size_t n, int vocab_size,
                     void (*progress)(int done, int wanted, void *ctx), void *ctx) {
    if (!text && n > 0) {
        tg_set_error("bpe_train: NULL text");
        return NULL;
    }
    if (vocab_size < 257 || vocab_size > TG_MAX_VOCAB) {
        tg_set_error("bpe_train: vocab_size %d: need 257 (the 256 bytes and <|endoftext|>) to %d", vocab_size,
                     TG_MAX_VOCAB);
        return NULL;
    }
    if (n >= UINT32_MAX) {
        tg_set_error("bpe_train: %zu bytes of text: at most 4 GiB", n);
        return NULL;
    }
    trainer t = {.text = text, .word_mask = 1023, .pair_mask = 1023};
    int32_t *touched = NULL;
    size_t touched_cap = 0;
    int wanted = vocab_size - 257, done = 0;
    /* The vocabulary grows with the merges: its table finds a merge whose
     * bytes are a token already (see below). */
    tg_bpe *b = bpe_new(256 + wanted);
    t.word_table = tg_sys_calloc(t.word_mask + 1, sizeof *t.word_table);
    t.pair_table = tg_sys_calloc(t.pair_mask + 1, sizeof *t.pair_table);
    if (!b || !t.word_table || !t.pair_table) goto oom;
    for (int c = 0; c < 256; c++) {
        unsigned char s = (unsigned char)c;
        if (bpe_set(b, c, &s, 1) != 0) goto oom;
    }
    for (size_t at = 0; at < n;) {
        size_t e = tg_bpe_pretokenize_next(text, n, at);
        if (e - at >= 2 && add_word(&t, (uint32_t)at, (uint32_t)(e - at)) != 0) goto oom;
        at = e;
    }
    for (size_t w = 0; w < t.n_words; w++) {
        const int32_t *s = t.syms + t.words[w].sym_off;
        for (uint32_t k = 0; k + 1 < t.words[w].sym_len; k++)
            pair_add(&t, s[k], s[k + 1], t.words[w].count, (int32_t)w);
    }
    for (size_t p = 0; p < t.n_pairs; p++) push(&t, t.pairs[p].count, t.pairs[p].key);
    if (t.oom) goto oom;
    for (int32_t step = 0; done < wanted; step++) {
        long best = -1;
        while (t.n_heap && best < 0) {
            entry e = pop(&t);
            long p = pair_find(&t, e.key);
            if (p < 0) goto oom;
            if (t.pairs[p].count == e.count && e.count > 0)
                best = p;
            else if (t.pairs[p].count > 0 && t.pairs[p].count < e.count)
                push(&t, t.pairs[p].count, e.key); /* out of date: back in with its true count */
        }
        if (best < 0) break; /* no pair left: every piece is one token */
        uint64_t key = t.pairs[best].key;
        int32_t left = (int32_t)(key >> 32), right = (int32_t)(key & 0xFFFFFFFF);
        /* The new token's bytes. Rarely, they are a token already, made by
         * another pair ("a"+"bc" after "ab"+"c"): then the pieces take that
         * id, so every token's bytes stay distinct (a rank file cannot hold
         * one token twice) and no id is spent. */
        const bpe_span *l = &b->tok[left], *r = &b->tok[right];
        unsigned char buf[256], *s = buf;
        size_t len = (size_t)l->len + r->len;
        if (len > sizeof buf && !(s = tg_sys_alloc(len))) goto oom;
        memcpy(s, b->bytes + l->off, l->len);
        memcpy(s + l->len, b->bytes + r->off, r->len);
        int32_t id = bpe_rank(b, s, len);
        int fresh = id < 0;
        if (fresh) {
            id = 256 + done;
            if (bpe_set(b, id, s, len) != 0) id = -1;
        }
        if (s != buf) tg_sys_free(s);
        if (id < 0) goto oom;
        /* The piece list of the pair is taken out first: merging appends to other lists only
         * (those of pairs with id), but may move the pair array. */
        int32_t *where = t.pairs[best].where;
        size_t n_where = t.pairs[best].n;
        t.pairs[best].where = NULL;
        t.pairs[best].n = t.pairs[best].cap = 0;
        /* every occurrence can make at most two new pairs */
        if (bpe_grow((void **)&touched, &touched_cap, 2 * (size_t)t.pairs[best].count + 2, sizeof *touched) != 0) {
            tg_sys_free(where);
            goto oom;
        }
        size_t n_touched = 0;
        for (size_t i = 0; i < n_where; i++) {
            int32_t w = where[i];
            if (t.words[w].stamp == step) continue;
            t.words[w].stamp = step;
            merge_word(&t, w, left, right, id, step, touched, &n_touched);
        }
        tg_sys_free(where);
        for (size_t i = 0; i < n_touched; i++) push(&t, t.pairs[touched[i]].count, t.pairs[touched[i]].key);
        if (t.oom) goto oom;
        if (fresh && ++done % 256 == 0 && progress) progress(done, wanted, ctx);
    }
    if (progress && done % 256) progress(done, wanted, ctx);
    b->n_ids = b->n_ranks = 256 + done;
    if (bpe_finish(b) != 0 || bpe_add_special(b, TG_BPE_ENDOFTEXT) != 0) goto oom;
    trainer_free(&t);
    tg_sys_free(touched);
    return b;
oom:
    tg_set_error("bpe_train: out of memory (%zu bytes of text, %zu distinct pieces)", n, t.n_words);
    tg_bpe_free(b);
    trainer_free(&t);
    tg_sys_free(touched);
    return NULL;
}
