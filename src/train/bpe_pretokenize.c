/* GPT-2's pre-tokenisation (bpe.h), a hand-written matcher for the pattern
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * with the semantics of a backtracking regex engine (fancy-regex in
 * tiktoken, Python's regex in GPT-2's encoder.py): at each position the
 * first alternative that matches wins, each quantifier is greedy.
 * Unrolled, that is one look at the first two code points and one run:
 *   - a contraction 's 't 'm 'd 're 've 'll (lower case only, as GPT-2);
 *   - a space then a letter, number or "other" code point: the space and
 *     the run of that class after it; else a run of the first code point's
 *     class (letters, numbers, others);
 *   - white space: the whole run when the text ends with it, else the run
 *     but its last code point (which starts the next piece, " word"), or the
 *     one code point when the run is one long (\s+ after (?!\S) failed).
 * A hand-written matcher rather than PCRE2: no dependency, no JIT, and the
 * ASCII path is a table lookup per byte (BENCHMARKS.md has the speed). */
#include <stdint.h>

#include "bpe_internal.h"

enum { C_OTHER, C_LETTER, C_NUMBER, C_SPACE };

/* The class of each ASCII byte. \s is Unicode's White_Space (Rust regex's
 * and Python's \s for str), which holds 0x09-0x0D and 0x20 but not
 * 0x1C-0x1F (Python's str.isspace() differs there). */
static const uint8_t ascii_class[128] = {
    ['\t'] = C_SPACE, ['\n'] = C_SPACE, ['\v'] = C_SPACE, ['\f'] = C_SPACE, ['\r'] = C_SPACE, [' '] = C_SPACE,
    ['0'] = C_NUMBER, ['1'] = C_NUMBER, ['2'] = C_NUMBER, ['3'] = C_NUMBER, ['4'] = C_NUMBER, ['5'] = C_NUMBER,
    ['6'] = C_NUMBER, ['7'] = C_NUMBER, ['8'] = C_NUMBER, ['9'] = C_NUMBER, ['A'] = C_LETTER, ['B'] = C_LETTER,
    ['C'] = C_LETTER, ['D'] = C_LETTER, ['E'] = C_LETTER, ['F'] = C_LETTER, ['G'] = C_LETTER, ['H'] = C_LETTER,
    ['I'] = C_LETTER, ['J'] = C_LETTER, ['K'] = C_LETTER, ['L'] = C_LETTER, ['M'] = C_LETTER, ['N'] = C_LETTER,
    ['O'] = C_LETTER, ['P'] = C_LETTER, ['Q'] = C_LETTER, ['R'] = C_LETTER, ['S'] = C_LETTER, ['T'] = C_LETTER,
    ['U'] = C_LETTER, ['V'] = C_LETTER, ['W'] = C_LETTER, ['X'] = C_LETTER, ['Y'] = C_LETTER, ['Z'] = C_LETTER,
    ['a'] = C_LETTER, ['b'] = C_LETTER, ['c'] = C_LETTER, ['d'] = C_LETTER, ['e'] = C_LETTER, ['f'] = C_LETTER,
    ['g'] = C_LETTER, ['h'] = C_LETTER, ['i'] = C_LETTER, ['j'] = C_LETTER, ['k'] = C_LETTER, ['l'] = C_LETTER,
    ['m'] = C_LETTER, ['n'] = C_LETTER, ['o'] = C_LETTER, ['p'] = C_LETTER, ['q'] = C_LETTER, ['r'] = C_LETTER,
    ['s'] = C_LETTER, ['t'] = C_LETTER, ['u'] = C_LETTER, ['v'] = C_LETTER, ['w'] = C_LETTER, ['x'] = C_LETTER,
    ['y'] = C_LETTER, ['z'] = C_LETTER,
};

/* The class column of the generated range holding cp (BPE_LETTER or
 * BPE_NUMBER), 0 when none does: a binary search of the sorted ranges. */
static uint32_t range_class(uint32_t cp) {
    int lo = 0, hi = bpe_class_ranges_count - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < bpe_class_ranges[mid][0])
            hi = mid - 1;
        else if (cp > bpe_class_ranges[mid][1])
            lo = mid + 1;
        else
            return bpe_class_ranges[mid][2];
    }
    return 0;
}

/* The class of a code point past ASCII. White_Space beyond ASCII
 * (PropList.txt, unchanged since Unicode 6.3): U+0085, U+00A0, U+1680,
 * U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000. */
static int cp_class(uint32_t cp) {
    if (cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
        cp == 0x202F || cp == 0x205F || cp == 0x3000)
        return C_SPACE;
    switch (range_class(cp)) {
    case BPE_LETTER: return C_LETTER;
    case BPE_NUMBER: return C_NUMBER;
    default: return C_OTHER;
    }
}

static inline int cont(const unsigned char *t, size_t n, size_t i) { return i < n && (t[i] & 0xC0) == 0x80; }

/* The class of the code point at t[i] (i < n), its length in *len. A byte
 * that does not start a valid UTF-8 sequence (RFC 3629, Table 3-7 of the
 * Unicode standard: the second byte's range depends on the first) is a
 * code point of class "other" and length 1. */
static inline int class_at(const unsigned char *t, size_t n, size_t i, size_t *len) {
    unsigned c = t[i];
    if (c < 0x80) {
        *len = 1;
        return ascii_class[c];
    }
    *len = 1;
    if (c >= 0xC2 && c <= 0xDF) {
        if (!cont(t, n, i + 1)) return C_OTHER;
        *len = 2;
        return cp_class((c & 0x1Fu) << 6 | (t[i + 1] & 0x3Fu));
    }
    if (c >= 0xE0 && c <= 0xEF) {
        if (!cont(t, n, i + 1) || !cont(t, n, i + 2)) return C_OTHER;
        unsigned d = t[i + 1];
        if ((c == 0xE0 && d < 0xA0) || (c == 0xED && d > 0x9F)) return C_OTHER; /* overlong, surrogate */
        *len = 3;
        return cp_class((c & 0x0Fu) << 12 | (d & 0x3Fu) << 6 | (t[i + 2] & 0x3Fu));
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (!cont(t, n, i + 1) || !cont(t, n, i + 2) || !cont(t, n, i + 3)) return C_OTHER;
        unsigned d = t[i + 1];
        if ((c == 0xF0 && d < 0x90) || (c == 0xF4 && d > 0x8F)) return C_OTHER; /* overlong, past U+10FFFF */
        *len = 4;
        return cp_class((c & 0x07u) << 18 | (d & 0x3Fu) << 12 | (t[i + 2] & 0x3Fu) << 6 | (t[i + 3] & 0x3Fu));
    }
    return C_OTHER;
}

/* The end of the run of code points of class cls that starts at i. */
static size_t run_end(const unsigned char *t, size_t n, size_t i, int cls) {
    while (i < n) {
        if (t[i] < 0x80) { /* the common case, without the call */
            if (ascii_class[t[i]] != cls) break;
            i++;
            continue;
        }
        size_t len;
        if (class_at(t, n, i, &len) != cls) break;
        i += len;
    }
    return i;
}

size_t tg_bpe_pretokenize_next(const unsigned char *t, size_t n, size_t at) {
    if (!t || at >= n) return n;
    unsigned c = t[at];
    if (c == '\'' && at + 1 < n) { /* 's 't 'm 'd, then 're 've 'll */
        unsigned d = t[at + 1];
        if (d == 's' || d == 't' || d == 'm' || d == 'd') return at + 2;
        if (at + 2 < n) {
            unsigned e = t[at + 2];
            if ((d == 'r' && e == 'e') || (d == 'v' && e == 'e') || (d == 'l' && e == 'l')) return at + 3;
        }
    }
    size_t len;
    if (c == ' ' && at + 1 < n) { /* " ?X+": the space joins a following run of letters, numbers or others */
        int next = class_at(t, n, at + 1, &len);
        if (next != C_SPACE) return run_end(t, n, at + 1 + len, next);
    }
    int cls = class_at(t, n, at, &len);
    if (cls != C_SPACE) return run_end(t, n, at + len, cls);
    /* White space: find the run's end and where its last code point starts. */
    size_t last = at, i = at + len;
    while (i < n) {
        size_t l;
        if (class_at(t, n, i, &l) != C_SPACE) break;
        last = i;
        i += l;
    }
    if (i == n) return n;        /* \s+(?!\S) at the end of the text */
    return last > at ? last : i; /* \s+(?!\S) backs off one; \s+ for one */
}

size_t tg_bpe_cut(const unsigned char *t, size_t n, size_t want) {
    if (!t) return n;
    for (size_t k = want < 2 ? 2 : want; k < n; k++)
        if (t[k - 1] == '\n' && t[k] > ' ' && t[k] < 0x7F && t[k - 2] > ' ' && t[k - 2] < 0x7F) return k;
    return n;
}
