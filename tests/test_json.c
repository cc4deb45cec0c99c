/* The library's JSON (io/json.c), on its own. The strict reader of file
 * headers: strings with every escape and surrogate pairs, what it refuses,
 * integers at the edge of 64 bits, and the nesting limit of skipped values.
 * The one writer: its separators, the escaper (every byte, read back by the
 * reader), numbers that read back to the bit, and misuse refused. */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/tensor.h"

#include "io/json.h"

static tg_json at(const char *text) { return (tg_json){.p = text, .start = text, .end = text + strlen(text)}; }

Test(json, strings_unescape_like_python) {
    char out[64];
    size_t len;
    tg_json j = at("\"a\\\"b\\\\c\\/d\\n\\u00e9\\ud83d\\ude00\"");
    cr_assert_eq(tg_json_string(&j, out, sizeof out, &len), 0, "%s", j.why);
    cr_expect_str_eq(out, "a\"b\\c/d\n\xc3\xa9\xf0\x9f\x98\x80");
    cr_expect_eq(len, strlen(out));
    j = at("\"abcdef\""); /* cut at cap - 1, full length reported */
    cr_assert_eq(tg_json_string(&j, out, 4, &len), 0);
    cr_expect_str_eq(out, "abc");
    cr_expect_eq(len, 6);
}

Test(json, bad_strings_are_refused_with_a_reason) {
    const char *bad[] = {"\"abc", "\"\\x\"", "\"\\ud83d\"", "\"\\ude00\"", "\"a\x01\"", "\"\\u0000\"", "\"\\u12\""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        tg_json j = at(bad[i]);
        cr_expect_eq(tg_json_string(&j, NULL, 0, NULL), -1, "accepted %s", bad[i]);
        cr_expect_neq(j.why[0], '\0', "no reason for %s", bad[i]);
    }
}

Test(json, integers_stop_at_64_bits_and_refuse_fractions) {
    uint64_t v;
    tg_json j = at("18446744073709551615");
    cr_expect_eq(tg_json_uint(&j, &v, "n"), 0);
    cr_expect_eq(v, UINT64_MAX);
    const char *bad[] = {"18446744073709551616", "-1", "1.5", "01", "1e3", ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        j = at(bad[i]);
        cr_expect_eq(tg_json_uint(&j, &v, "n"), -1, "accepted '%s'", bad[i]);
    }
    uint64_t arr[2];
    int n;
    j = at("[1, 2, 3]");
    cr_expect_eq(tg_json_uint_array(&j, arr, 2, &n, "offsets"), -1);
    cr_expect(strstr(j.why, "more than 2"), "%s", j.why);
}

Test(json, skipped_values_nest_at_most_64_deep) {
    char deep[200];
    for (int depth = 60; depth <= 70; depth += 10) {
        memset(deep, '[', (size_t)depth);
        memset(deep + depth, ']', (size_t)depth);
        deep[2 * depth] = '\0';
        tg_json j = at(deep);
        int rc = tg_json_skip_value(&j, 1);
        cr_expect_eq(rc, depth <= TG_JSON_MAX_DEPTH ? 0 : -1, "depth %d: %s", depth, j.why);
    }
    tg_json j = at("{\"a\": [true, false, null, -1.5e3, \"x\", {}]}");
    cr_expect_eq(tg_json_skip_value(&j, 1), 0, "%s", j.why);
    cr_expect_eq(j.p, j.end);
}

Test(json, writer_places_separators_and_nests) {
    tg_json_writer w = {0};
    tg_json_begin(&w, '{');
    tg_json_key(&w, "a"), tg_json_put_int(&w, -3);
    tg_json_key(&w, "b"), tg_json_begin(&w, '[');
    tg_json_put_bool(&w, true), tg_json_put_null(&w), tg_json_put_str(&w, "x");
    tg_json_break(&w), tg_json_begin(&w, '{'), tg_json_end(&w);
    tg_json_put_number(&w, 0.5), tg_json_put_digits(&w, 2.0 / 3, 3), tg_json_put_number(&w, NAN);
    tg_json_end(&w);
    tg_json_end(&w);
    char *text = tg_json_finish(&w, "test");
    cr_assert_not_null(text, "%s", tg_last_error());
    cr_expect_str_eq(text, "{\"a\": -3, \"b\": [true,null,\"x\",\n{},0.5,0.667,null]}");
    free(text);
    w.compact = true; /* a file header's separators */
    tg_json_begin(&w, '{'), tg_json_key(&w, "k"), tg_json_put_str(&w, "v"), tg_json_key(&w, "n");
    tg_json_put_int(&w, 1), tg_json_end(&w);
    text = tg_json_finish(&w, "test");
    cr_expect_str_eq(text, "{\"k\":\"v\",\"n\":1}");
    free(text);
}

Test(json, writer_refuses_misuse) {
    tg_json_writer w = {0};
    tg_json_begin(&w, '{'), tg_json_put_int(&w, 1), tg_json_end(&w); /* a value without its key */
    cr_expect_null(tg_json_finish(&w, "test"));
    cr_expect(strstr(tg_last_error(), "test: JSON written out of order"), "%s", tg_last_error());
    tg_json_begin(&w, '['); /* left open */
    cr_expect_null(tg_json_finish(&w, "test"));
    tg_json_put_int(&w, 1), tg_json_put_int(&w, 2); /* two values at the top */
    cr_expect_null(tg_json_finish(&w, "test"));
    tg_json_begin(&w, '['), tg_json_key(&w, "k"), tg_json_end(&w); /* a key in an array */
    cr_expect_null(tg_json_finish(&w, "test"));
    tg_json_begin(&w, '{'), tg_json_key(&w, "k"), tg_json_end(&w); /* a key without its value */
    cr_expect_null(tg_json_finish(&w, "test"));
    cr_expect_null(tg_json_finish(&w, "test"), "nothing written");
}

/* s[0..n) through the escaper and back through the reader. */
static char *round_trip(const char *s, size_t n, size_t *len) {
    tg_json_writer w = {0};
    tg_json_put_string(&w, s, n);
    char *text = tg_json_finish(&w, "test");
    cr_assert_not_null(text);
    cr_expect(tg_json_valid_utf8((const unsigned char *)text, strlen(text)), "%s", text);
    cr_expect(!strchr(text, '<'), "'<' is never written as it is: %s", text);
    for (const char *p = text; *p; p++) cr_expect((unsigned char)*p >= 0x20, "a raw control byte in %s", text);
    static char out[1024];
    tg_json j = at(text);
    cr_expect_eq(tg_json_string(&j, out, sizeof out, len), 0, "%s: %s", text, j.why);
    cr_expect_eq(j.p, j.end);
    free(text);
    return out;
}

Test(json, escaper_reads_back_and_always_writes_valid_utf8) {
    /* Every ASCII byte but NUL, quotes, backslashes, '<', and UTF-8 of 2, 3 and 4 bytes: read back as they were. */
    char all[160];
    size_t n = 0;
    for (int c = 1; c < 128; c++) all[n++] = (char)c;
    const char *multi = "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
    memcpy(all + n, multi, strlen(multi)), n += strlen(multi);
    size_t len;
    char *out = round_trip(all, n, &len);
    cr_expect_eq(len, n);
    cr_expect(memcmp(out, all, n) == 0);
    /* Bytes that are not UTF-8 (a lone continuation, a cut sequence, an
     * overlong, a surrogate, 0xff) and NUL: each a U+FFFD. */
    const char bad[] = "a\x80"
                       "b\xe2\x82"
                       "c\xc0\xaf"
                       "d\xed\xa0\x80"
                       "e\xff"
                       "f\0g";
    out = round_trip(bad, sizeof bad - 1, &len);
    const char *want = "a\xef\xbf\xbd"
                       "b\xef\xbf\xbd\xef\xbf\xbd"
                       "c\xef\xbf\xbd\xef\xbf\xbd"
                       "d\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
                       "e\xef\xbf\xbd"
                       "f\xef\xbf\xbdg";
    cr_expect_eq(len, strlen(want));
    cr_expect(memcmp(out, want, strlen(want)) == 0, "%s", out);
}

Test(json, numbers_read_back_to_the_bit) {
    const double v[] = {0.1, 1.0 / 3, 1e-300, 5e-324, DBL_MAX, -2.5, 123456789012345678.0, 0.0, 2.0 / 3e10};
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        tg_json_writer w = {0};
        tg_json_put_number(&w, v[i]);
        char *text = tg_json_finish(&w, "test");
        cr_assert_not_null(text);
        tg_json j = at(text);
        double back;
        cr_expect_eq(tg_json_number(&j, &back, "n"), 0, "%s", text);
        cr_expect(memcmp(&back, &v[i], sizeof back) == 0, "%.17g written as %s", v[i], text);
        cr_expect(strlen(text) <= 24, "%s", text);
        free(text);
    }
    const double odd[] = {NAN, INFINITY, -INFINITY};
    for (int i = 0; i < 3; i++) {
        tg_json_writer w = {0};
        tg_json_put_number(&w, odd[i]);
        char *text = tg_json_finish(&w, "test");
        cr_expect_str_eq(text, "null");
        free(text);
    }
}
