/* The strict JSON reader of file headers (io/json.c), on its own: strings
 * with every escape and surrogate pairs, what it refuses, integers at the
 * edge of 64 bits, and the nesting limit of skipped values. */
#include <criterion/criterion.h>
#include <string.h>

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
