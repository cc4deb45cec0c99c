/* Language-model data (train.h): the byte tokenizer, token files (.npy
 * uint8/uint16), the memory-mapped sampler with its train/validation split
 * and reproducible order, hostile token files, and the fortunes corpus. */
#include <fcntl.h>
#include <sys/stat.h>

#include "io_test_util.h"
#include "test_util.h"
#include "tgrad.h"

#define EXCERPT TG_SRC_DIR "/tests/data/fortunes_excerpt.txt"

TestSuite(data, .fini = cleanup);

/* ---- byte tokenizer --------------------------------------------------------- */
Test(data, bytes_round_trip) {
    const unsigned char text[] = "Hi \xc3\xa9t\xc3\xa9!\n\x00\xff"; /* UTF-8, a NUL and 0xff */
    size_t n = sizeof text - 1;
    int ids[32];
    unsigned char back[32];
    cr_assert_eq(tg_bytes_encode(text, n, ids), 0);
    cr_expect_eq(ids[0], 'H');
    cr_expect_eq(ids[3], 0xc3);
    cr_expect_eq(ids[n - 2], 0);
    cr_expect_eq(ids[n - 1], 255);
    cr_assert_eq(tg_bytes_decode(ids, n, back), 0);
    cr_expect(memcmp(back, text, n) == 0);
    cr_expect_eq(tg_bytes_encode(text, 0, NULL), 0); /* nothing to do */
}

Test(data, bytes_decode_rejects_non_bytes) {
    int ids[] = {72, 256};
    unsigned char out[2];
    cr_expect_eq(tg_bytes_decode(ids, 2, out), -1);
    cr_expect(error_has("bytes_decode", "256"));
    ids[1] = -1;
    cr_expect_eq(tg_bytes_decode(ids, 2, out), -1);
    cr_expect_eq(tg_bytes_decode(NULL, 2, out), -1);
    cr_expect_eq(tg_bytes_encode(NULL, 2, ids), -1);
}

/* ---- token files ---------------------------------------------------------------- */
/* The bytes numpy.save writes for np.array([1, 2, 300], np.uint16):
 * magic, version 1.0, header length 118, the dict padded to 128 bytes. */
Test(data, token_file_layout_is_numpys) {
    tmpdir();
    int ids[] = {1, 2, 300};
    cr_assert_eq(tg_tokens_save(in_dir("t.npy"), ids, 3, 1000), 0, "%s", tg_last_error());
    size_t n;
    unsigned char *b = read_all(in_dir("t.npy"), &n);
    const char *want = "{'descr': '<u2', 'fortran_order': False, 'shape': (3,), }";
    cr_assert_eq(n, 128 + 6);
    cr_expect(memcmp(b, "\x93NUMPY\x01\x00", 8) == 0);
    cr_expect_eq(b[8] | b[9] << 8, 118);
    cr_expect(memcmp(b + 10, want, strlen(want)) == 0);
    cr_expect_eq(b[127], '\n');
    cr_expect(memcmp(b + 128, "\x01\x00\x02\x00\x2c\x01", 6) == 0);
    free(b);
    /* uint8 for a byte vocabulary */
    cr_assert_eq(tg_tokens_save(in_dir("b.npy"), ids, 2, 256), 0);
    b = read_all(in_dir("b.npy"), &n);
    cr_expect_eq(n, 128 + 2);
    cr_expect(strstr((char *)b + 10, "'|u1'") != NULL);
    free(b);
}

Test(data, tokens_save_rejects_bad_ids) {
    tmpdir();
    int ids[] = {1, 256};
    cr_expect_eq(tg_tokens_save(in_dir("t.npy"), ids, 2, 256), -1);
    cr_expect(error_has("tokens_save", "outside [0, 256)"));
    cr_expect(!file_exists(in_dir("t.npy")));
    cr_expect_eq(tg_tokens_save(in_dir("t.npy"), ids, 2, TG_MAX_VOCAB + 1), -1);
    cr_expect(error_has("tokens_save", "vocab 16777217"));
    cr_expect_eq(tg_tokens_save(NULL, ids, 2, 300), -1);
}

/* Past 65536 ids (a large BPE vocabulary) a token file is uint32, numpy's '<u4'. */
Test(data, uint32_token_files_for_large_vocabularies) {
    tmpdir();
    int ids[] = {70000, 0, 16777215, 65536, 3};
    cr_assert_eq(tg_tokens_save(in_dir("t.npy"), ids, 5, TG_MAX_VOCAB), 0, "%s", tg_last_error());
    size_t n;
    unsigned char *b = read_all(in_dir("t.npy"), &n);
    cr_expect_eq(n, 128 + 5 * 4);
    cr_expect(strstr((char *)b + 10, "{'descr': '<u4', 'fortran_order': False, 'shape': (5,), }") != NULL);
    cr_expect(b[128] == 0x70 && b[129] == 0x11 && b[130] == 0x01 && b[131] == 0); /* 70000 little-endian */
    free(b);
    tg_token_data *d = tg_token_data_open(in_dir("t.npy"), 0, 1);
    TG_REQUIRE(d);
    cr_expect_eq(d->itemsize, 4);
    cr_expect_eq(d->vocab, 16777216);
    for (int k = 0; k < 5; k++) cr_expect_eq(tg_token_data_get(d, k), ids[k]);
    tg_token_data_close(d);
    /* a vocabulary of 65537 still needs uint32; 65536 fits uint16 */
    cr_assert_eq(tg_tokens_save(in_dir("u.npy"), ids + 3, 2, 65537), 0);
    b = read_all(in_dir("u.npy"), &n);
    cr_expect(strstr((char *)b + 10, "'<u4'") != NULL);
    free(b);
    cr_assert_eq(tg_tokens_save(in_dir("v.npy"), ids + 4, 1, 65536), 0);
    b = read_all(in_dir("v.npy"), &n);
    cr_expect(strstr((char *)b + 10, "'<u2'") != NULL);
    free(b);
}

Test(data, text_to_tokens_and_back) {
    tmpdir();
    cr_assert_eq(tg_tokens_from_text(EXCERPT, in_dir("c.npy")), 0, "%s", tg_last_error());
    size_t n;
    unsigned char *text = read_all(EXCERPT, &n);
    tg_token_data *d = tg_token_data_open(in_dir("c.npy"), 0.1, 1);
    TG_REQUIRE(d);
    cr_assert_eq(d->n, (int64_t)n);
    cr_expect_eq(d->itemsize, 1);
    for (size_t k = 0; k < n; k++) cr_assert_eq(tg_token_data_get(d, (int64_t)k), text[k], "token %zu", k);
    cr_expect_eq(tg_token_data_get(d, -1), -1);
    cr_expect_eq(tg_token_data_get(d, d->n), -1);
    int max = 0;
    for (size_t k = 0; k < n; k++) max = text[k] > max ? text[k] : max;
    cr_expect_eq(d->vocab, max + 1);
    tg_token_data_close(d);
    free(text);
    cr_expect_eq(tg_tokens_from_text(in_dir("missing.txt"), in_dir("x.npy")), -1);
    cr_expect(error_has("tokens_from_text", "missing.txt"));
}

/* ---- token data: split, windows, order ---------------------------------------------- */
/* A uint16 file whose token k is k % 1000, so a window shows where it came from. */
static tg_token_data *counting_data(int64_t n, double val, uint64_t seed) {
    int *ids = malloc((size_t)n * sizeof *ids);
    for (int64_t k = 0; k < n; k++) ids[k] = (int)(k % 1000);
    cr_assert_eq(tg_tokens_save(in_dir("count.npy"), ids, n, 1000), 0);
    free(ids);
    tg_token_data *d = tg_token_data_open(in_dir("count.npy"), val, seed);
    TG_REQUIRE(d);
    return d;
}

Test(data, split_and_train_windows) {
    tmpdir();
    tg_token_data *d = counting_data(1000, 0.1, 7);
    cr_expect_eq(d->itemsize, 2);
    cr_expect_eq(d->n_train, 900); /* the last 10 % validate */
    cr_expect_eq(d->vocab, 1000);
    enum { B = 16, T = 10 };
    int x[B * T], y[B * T];
    bool seen_low = false, seen_high = false;
    for (int rep = 0; rep < 40; rep++) {
        cr_assert_eq(tg_token_data_batch(d, B, T, x, y), 0);
        for (int b = 0; b < B; b++) {
            int s = x[b * T];
            cr_assert(s >= 0 && s <= 900 - T - 1, "start %d", s);
            seen_low |= s < 100;
            seen_high |= s > 780;
            for (int t = 0; t < T; t++) {
                cr_assert_eq(x[b * T + t], s + t);
                cr_assert_eq(y[b * T + t], s + t + 1); /* the next token */
            }
        }
    }
    cr_expect(seen_low && seen_high, "starts should cover the training split");
    cr_expect_eq(d->rng.counter, 40 * B); /* one draw per window */
    tg_token_data_close(d);
}

Test(data, order_is_a_function_of_seed_and_position) {
    tmpdir();
    tg_token_data *a = counting_data(5000, 0.1, 42), *b = tg_token_data_open(in_dir("count.npy"), 0.1, 42);
    tg_token_data *c = tg_token_data_open(in_dir("count.npy"), 0.1, 43);
    TG_REQUIRE(b);
    TG_REQUIRE(c);
    enum { B = 4, T = 8 };
    int xa[B * T], ya[B * T], xb[B * T], yb[B * T], xc[B * T], yc[B * T];
    int saved_x[B * T];
    tg_rng at3;
    for (int step = 0; step < 6; step++) {
        if (step == 3) at3 = *tg_token_data_rng(a);
        cr_assert_eq(tg_token_data_batch(a, B, T, xa, ya), 0);
        cr_assert_eq(tg_token_data_batch(b, B, T, xb, yb), 0);
        cr_assert_eq(tg_token_data_batch(c, B, T, xc, yc), 0);
        cr_expect(memcmp(xa, xb, sizeof xa) == 0 && memcmp(ya, yb, sizeof ya) == 0, "same seed, step %d", step);
        cr_expect(memcmp(xa, xc, sizeof xa) != 0, "another seed, step %d", step);
        if (step == 3) memcpy(saved_x, xa, sizeof xa);
    }
    /* Restoring the generator replays the order from there. */
    *tg_token_data_rng(b) = at3;
    cr_assert_eq(tg_token_data_batch(b, B, T, xb, yb), 0);
    cr_expect(memcmp(xb, saved_x, sizeof xb) == 0);
    cr_expect_eq(tg_token_data_rng(NULL), NULL);
    tg_token_data_close(a);
    tg_token_data_close(b);
    tg_token_data_close(c);
}

Test(data, validation_batches_are_fixed) {
    tmpdir();
    tg_token_data *d = counting_data(1000, 0.1, 1); /* validation: tokens 900..999 */
    enum { B = 2, T = 10 };
    /* 99 usable tokens -> 9 windows of 10 (+1 target) -> 4 batches of 2 */
    cr_assert_eq(tg_token_data_val_batches(d, B, T), 4);
    int x[B * T], y[B * T], x2[B * T], y2[B * T];
    for (int64_t i = 0; i < 4; i++) {
        cr_assert_eq(tg_token_data_val_batch(d, i, B, T, x, y), 0);
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) {
                int want = 900 + (int)(i * B + b) * T + t;
                cr_assert_eq(x[b * T + t], want);
                cr_assert_eq(y[b * T + t], want + 1);
            }
        tg_token_data_batch(d, B, T, x2, y2); /* training draws do not move validation */
        cr_assert_eq(tg_token_data_val_batch(d, i, B, T, x2, y2), 0);
        cr_expect(memcmp(x, x2, sizeof x) == 0);
    }
    cr_expect_eq(tg_token_data_val_batch(d, 4, B, T, x, y), -1);
    cr_expect(error_has("token_data_val_batch", "batch 4 of 4"));
    cr_expect_eq(tg_token_data_val_batch(d, -1, B, T, x, y), -1);
    cr_expect_eq(tg_token_data_val_batches(d, B, 200), 0);
    tg_token_data_close(d);
    /* no validation split at all */
    d = tg_token_data_open(in_dir("count.npy"), 0, 1);
    TG_REQUIRE(d);
    cr_expect_eq(d->n_train, 1000);
    cr_expect_eq(tg_token_data_val_batches(d, 1, 1), 0);
    tg_token_data_close(d);
}

Test(data, batch_errors) {
    tmpdir();
    tg_token_data *d = counting_data(20, 0.5, 1); /* 10 training tokens */
    int x[64], y[64];
    cr_expect_eq(tg_token_data_batch(d, 1, 9, x, y), 0);
    uint64_t before = d->rng.counter;
    cr_expect_eq(tg_token_data_batch(d, 1, 10, x, y), -1);
    cr_expect(error_has("token_data_batch", "10 training tokens"));
    cr_expect_eq(d->rng.counter, before, "a failed batch draws nothing");
    cr_expect_eq(tg_token_data_batch(d, 0, 4, x, y), -1);
    cr_expect_eq(tg_token_data_batch(d, 1, 4, NULL, y), -1);
    cr_expect_eq(tg_token_data_batch(NULL, 1, 4, x, y), -1);
    tg_token_data_close(d);
    tg_token_data_close(NULL);
    cr_expect_null(tg_token_data_open(in_dir("count.npy"), 1.0, 1));
    cr_expect(error_has("token_data", "val_fraction"));
    cr_expect_null(tg_token_data_open(in_dir("count.npy"), -0.1, 1));
}

/* ---- hostile token files --------------------------------------------------------------- */
/* A .npy file with the given header dict and n data bytes. */
static void write_npy(const char *path, const char *dict, size_t data_bytes) {
    char h[256];
    int len = snprintf(h, sizeof h, "%s", dict);
    while ((10 + len + 1) % 64) h[len++] = ' ';
    h[len++] = '\n';
    unsigned char *b = calloc(10 + (size_t)len + data_bytes + 1, 1);
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (unsigned char)len;
    b[9] = (unsigned char)(len >> 8);
    memcpy(b + 10, h, (size_t)len);
    write_all(path, b, 10 + (size_t)len + data_bytes);
    free(b);
}

static void expect_open_fails(const char *path, const char *what) {
    tg_clear_error();
    cr_expect_null(tg_token_data_open(path, 0.1, 1), "%s should be refused", path);
    cr_expect(error_has("token_data", what), "error '%s' lacks '%s'", tg_last_error() ? tg_last_error() : "", what);
}

Test(data, hostile_files_refused) {
    tmpdir();
    write_npy(in_dir("ok.npy"), "{'descr': '|u1', 'fortran_order': False, 'shape': (5,), }", 5);
    tg_token_data *d = tg_token_data_open(in_dir("ok.npy"), 0.1, 1);
    TG_REQUIRE(d);
    tg_token_data_close(d);
    /* file, header dict, data bytes, what the error names */
    static const struct {
        const char *file, *dict;
        size_t bytes;
        const char *why;
    } bad[] = {
        {"f4.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }", 20, "dtype '<f4'"},
        {"be.npy", "{'descr': '>u2', 'fortran_order': False, 'shape': (5,), }", 10, "'>u2'"},
        {"2d.npy", "{'descr': '|u1', 'fortran_order': False, 'shape': (2, 3), }", 6, "2-D"},
        {"short.npy", "{'descr': '<u2', 'fortran_order': False, 'shape': (5,), }", 9, "truncated"},
        {"long.npy", "{'descr': '|u1', 'fortran_order': False, 'shape': (5,), }", 6, "the file has 6"},
        {"huge.npy", "{'descr': '<u2', 'fortran_order': False, 'shape': (576460752303423487,), }", 4, "need"},
        {"over.npy", "{'descr': '<u2', 'fortran_order': False, 'shape': (99999999999999999999,), }", 4, "too large"},
        {"empty.npy", "{'descr': '|u1', 'fortran_order': False, 'shape': (0,), }", 0, "no tokens"},
        {"dict.npy", "{'descr': '|u1', 'shape': (5,), }", 5, "fortran_order"},
        {"u8.npy", "{'descr': '<u8', 'fortran_order': False, 'shape': (5,), }", 40, "dtype '<u8'"},
        {"u4short.npy", "{'descr': '<u4', 'fortran_order': False, 'shape': (5,), }", 19, "truncated"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_npy(in_dir(bad[i].file), bad[i].dict, bad[i].bytes);
        expect_open_fails(in_dir(bad[i].file), bad[i].why);
    }
    /* a uint32 token past TG_MAX_VOCAB: no vocabulary has it (and an embedding of 2^32 rows is no model) */
    write_npy(in_dir("big.npy"), "{'descr': '<u4', 'fortran_order': False, 'shape': (2,), }", 8);
    FILE *f = fopen(in_dir("big.npy"), "r+b");
    cr_assert_not_null(f);
    fseek(f, 128 + 4, SEEK_SET);
    fwrite("\x00\x00\x00\x01", 1, 4, f); /* 2^24 */
    fclose(f);
    expect_open_fails(in_dir("big.npy"), "token 16777216 at 1 is not below 16777216");
    write_all(in_dir("text.npy"), "hello world", 11);
    expect_open_fails(in_dir("text.npy"), "bad magic");
    write_all(in_dir("zero.npy"), "", 0);
    expect_open_fails(in_dir("zero.npy"), "bad magic");
    expect_open_fails(in_dir("absent.npy"), "No such file");
    expect_open_fails(g_dir, "not a regular file");
    cr_assert_eq(mkfifo(in_dir("fifo"), 0600), 0);
    expect_open_fails(in_dir("fifo"), "not a regular file"); /* and does not hang */
}

static void write_str(const char *path, const char *s) { write_all(path, s, strlen(s)); }

/* io/npy.h's header parser, which token files go through: any dtype, large shapes. */
Test(data, npy_header_of_any_dtype) {
    tmpdir();
    write_npy(in_dir("a.npy"), "{'shape': (3, 4000000000), 'fortran_order': True, 'descr': '<i8'}", 0);
    size_t n;
    unsigned char *b = read_all(in_dir("a.npy"), &n);
    tg_npy_header h;
    cr_assert_eq(tg_npy_parse_header(b, n, "a.npy", &h), 0, "%s", tg_last_error());
    cr_expect_str_eq(h.descr, "<i8");
    cr_expect(h.fortran_order);
    cr_expect_eq(h.ndim, 2);
    cr_expect_eq(h.shape[0], 3);
    cr_expect_eq(h.shape[1], 4000000000LL); /* past INT_MAX: fine for a header */
    cr_expect_eq(h.data_offset, n);
    cr_expect_eq(tg_npy_parse_header(b, 9, "a.npy", &h), -1);
    cr_expect(error_has("npy_header: a.npy", "truncated"));
    cr_expect_eq(tg_npy_parse_header(NULL, n, "a.npy", &h), -1);
    /* tg_npy_parse still refuses a dimension past INT_MAX, as before */
    write_npy(in_dir("f.npy"), "{'descr': '<f4', 'fortran_order': False, 'shape': (4000000000,), }", 0);
    cr_expect_null(tg_npy_load(in_dir("f.npy")));
    cr_expect(error_has("npy_load", "dimension too large"));
    free(b);
}

/* ---- the fortunes corpus ------------------------------------------------------------------ */
Test(data, fortunes_corpus_from_a_directory) {
    tmpdir();
    mkdir(in_dir("f"), 0755);
    char p[300];
    snprintf(p, sizeof p, "%s/b", in_dir("f"));
    write_str(p, "Second file.\n%\n");
    snprintf(p, sizeof p, "%s/a", in_dir("f"));
    write_str(p, "One.\n%\nTwo,\n\nin two lines.\n%\n\n%\nThree, no end");
    snprintf(p, sizeof p, "%s/a.dat", in_dir("f"));
    write_all(p, "\x00\x01 binary index", 15);
    snprintf(p, sizeof p, "%s/a.u8", in_dir("f"));
    cr_assert_eq(symlink("a", p), 0);
    snprintf(p, sizeof p, "%s/off", in_dir("f"));
    mkdir(p, 0755); /* a subdirectory (fortunes-off's place) is skipped */
    cr_assert_eq(tg_fortunes_corpus(in_dir("f"), in_dir("corpus.txt")), 4, "%s", tg_last_error());
    size_t n;
    unsigned char *b = read_all(in_dir("corpus.txt"), &n);
    const char *want = "One.\n\nTwo,\n\nin two lines.\n\nThree, no end\n\nSecond file.\n\n";
    cr_expect_str_eq((char *)b, want);
    free(b);
    cr_expect_eq(tg_fortunes_corpus(in_dir("nowhere"), in_dir("c2.txt")), -1);
    cr_expect(error_has("fortunes_corpus", "fortunes"));
    cr_expect(!file_exists(in_dir("c2.txt")));
    cr_expect_eq(tg_fortunes_corpus(in_dir("f/off"), in_dir("c2.txt")), -1);
    cr_expect(error_has("fortunes_corpus", "no fortune file"));
    cr_expect_eq(temp_files(), 0);
}

/* The installed corpus (tools/install-deps.sh installs fortunes), when present. */
Test(data, fortunes_corpus_installed) {
    struct stat sb;
    if (stat(TG_FORTUNES_DIR "/fortunes", &sb) != 0) cr_skip_test("Debian's fortunes is not installed");
    tmpdir();
    int64_t count = tg_fortunes_corpus(NULL, in_dir("corpus.txt"));
    cr_assert(count > 400, "%lld fortunes: %s", (long long)count, tg_last_error() ? tg_last_error() : "");
    cr_assert_eq(tg_tokens_from_text(in_dir("corpus.txt"), in_dir("corpus.npy")), 0);
    tg_token_data *d = tg_token_data_open(in_dir("corpus.npy"), 0.1, 1);
    TG_REQUIRE(d);
    cr_expect(d->n > 20000);
    cr_expect(d->vocab <= 256);
    tg_token_data_close(d);
}
