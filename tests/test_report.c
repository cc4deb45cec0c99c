/* The run report: the page writer (src/viz/report.c) and the data it is
 * given (src/train/report.c). The page in a real browser is
 * tests/report_browser.sh's. */
#include "io_test_util.h"
#include "test_util.h"
#include "io/json.h"
#include "viz/viz_internal.h"

TestSuite(report, .fini = cleanup);

static char *page_of(const char *path) {
    size_t n;
    unsigned char *b = read_all(path, &n);
    char *s = realloc(b, n + 1);
    cr_assert_not_null(s);
    s[n] = 0;
    return s;
}

static int count(const char *s, const char *what) {
    int k = 0;
    for (const char *p = s; (p = strstr(p, what)); p++) k++;
    return k;
}

Test(report, viz_page_is_self_contained_and_escapes_the_data) {
    tmpdir();
    tg_viz_report_part parts[] = {{"settings", "{\"note\": \"</script><script>alert(1)</script>\"}"},
                                  {"samples", "[{\"step\": 1, \"text\": \"<!-- x\"}]"}};
    cr_assert_eq(tg_viz_report(in_dir("r.html"), "a <b> & \"c\"", parts, 2), 0, "%s", tg_viz_last_error());
    char *s = page_of(in_dir("r.html"));
    cr_expect(strstr(s, "<title>a &lt;b&gt; &amp; &quot;c&quot;</title>"));
    cr_expect_eq(count(s, "</script>"), 2, "only the page's own two script blocks end"); /* data, code */
    cr_expect(strstr(s, "\\u003c/script>\\u003cscript>alert(1)"));
    cr_expect(strstr(s, "Content-Security-Policy") && strstr(s, "default-src 'none'"));
    /* The one URL is SVG's namespace name, which is never fetched. */
    cr_expect(!strstr(s, "src=") && !strstr(s, "<link") &&
                  count(s, "http://") == count(s, "http://www.w3.org/2000/svg") && !strstr(s, "https://"),
              "nothing is loaded from elsewhere");
    cr_expect(strstr(s, "function drawAttention") && strstr(s, ".tok.query"), "the page's script and style inline");
    free(s);
}

Test(report, viz_refuses_bad_parts_naming_the_function) {
    tmpdir();
    tg_viz_report_part bad[] = {{"Bad-Name", "{}"}};
    cr_expect_eq(tg_viz_report(in_dir("r.html"), "t", bad, 1), -1);
    cr_expect(strstr(tg_viz_last_error(), "tg_viz_report") && strstr(tg_viz_last_error(), "Bad-Name"));
    tg_viz_report_part empty[] = {{"settings", "  "}};
    cr_expect_eq(tg_viz_report(in_dir("r.html"), "t", empty, 1), -1);
    cr_expect_eq(access(in_dir("r.html"), F_OK), -1, "nothing written");
}

Test(report, curves_from_the_metrics_log) {
    tmpdir();
    FILE *f = fopen(in_dir("metrics.jsonl"), "w");
    fputs("{\"step\": 1, \"lr\": 0.001, \"loss\": 3.5, \"val_loss\": null, \"tokens_per_s\": 10, \"grad_norm\": 1}\n"
          "{\"step\": 2, \"lr\": 0.002, \"loss\": 3.25, \"val_loss\": 3.4, \"tokens_per_s\": 10, \"grad_norm\": 1}\n"
          "not json\n"
          "{\"step\": 3, \"lr\": 0.002, \"loss\": 3, \"val_loss\": null, \"tokens_per_s\": 10, \"grad_norm\": 1}\n"
          "{\"step\": 4, \"lr\": 0.0",
          f); /* a broken line, and one still being written */
    fclose(f);
    tg_report *r = tg_report_new();
    cr_assert_eq(tg_report_add_run(r, g_dir), 0, "%s", tg_last_error());
    cr_expect_eq(tg_report_dropped(r), 1, "the broken line; not the one still being written");
    cr_assert_eq(tg_report_write(r, in_dir("report.html"), "run"), 0, "%s", tg_last_error());
    tg_report_free(r);
    char *s = page_of(in_dir("report.html"));
    cr_expect(strstr(s, "\"metrics\": {\"step\": [1,2,3], \"loss\": [3.5,3.25,3], \"lr\": [0.001,0.002,0.002], "
                        "\"val_step\": [2], \"val_loss\": [3.4]}"),
              "%s", strstr(s, "\"metrics\""));
    cr_expect(!strstr(s, "\n\"settings\": "), "no checkpoint: no settings");
    free(s);
}

Test(report, decoder_attention_over_text_and_positions) {
    tmpdir();
    tg_rng rng = tg_rng_new(3);
    tg_decoder_config c = tg_decoder_config_default(256, 8, 2, 2, 8);
    tg_decoder *m = tg_decoder_new(&c, &rng);
    TG_REQUIRE(m);
    int tokens[8];
    tg_bytes_encode((const unsigned char *)"ab\"c\n\x01<d", 8, tokens);
    tg_report *r = tg_report_new();
    cr_assert_eq(tg_report_add_decoder(r, m, tokens, 8, NULL), 0, "%s", tg_last_error());
    cr_expect(m->training, "the model's mode is restored");
    cr_expect(tg_set_grad_enabled(true), "grad mode is restored");
    cr_assert_eq(tg_report_write(r, in_dir("report.html"), "lm"), 0, "%s", tg_last_error());
    char *s = page_of(in_dir("report.html"));
    cr_expect(strstr(s, "\"attention\": {\"title\": \"Attention over one validation window (learned positions)\", "
                        "\"layers\": 2, \"heads\": 2, \"pe\": \"learned\", "
                        "\"tokens\": [\"a\",\"b\",\"\\\"\",\"c\",\"\\n\",\"\\\\x01\",\"\\u003c\",\"d\"]"),
              "%.200s", strstr(s, "\"attention\""));
    cr_expect(strstr(s, "\"w\": [[[1],[0."), "row 0 attends to itself only (causal)");
    cr_expect(strstr(s, "Learned absolute positions: transformer.wpe.weight[:8] [8, 8]"));
    free(s);
    int bad[2] = {0, 300};
    cr_expect_eq(tg_report_add_decoder(r, m, bad, 2, NULL), -1);
    cr_expect(error_has("report", "outside the vocabulary"));
    tg_report_free(r);
    tg_decoder_free(m);
}

Test(report, samples_of_a_resumed_run_and_tables) {
    tmpdir();
    cr_assert_eq(tg_report_append_sample(g_dir, 10, "first", 5), 0);
    cr_assert_eq(tg_report_append_sample(g_dir, 20, "lost", 4), 0); /* after the checkpoint of a killed run */
    cr_assert_eq(tg_report_append_sample(g_dir, 20, "re\x01sumed", 8), 0);
    tg_report *r = tg_report_new();
    cr_assert_eq(tg_report_add_samples(r, g_dir, 0), 0);
    double x[2] = {16, 32}, y[4] = {100, 50, NAN, 25};
    const char *names[2] = {"fixed", "rope"};
    cr_assert_eq(tg_report_add_table(r, "shift", "length", "accuracy", x, 2, names, y, 2), 0);
    cr_assert_eq(tg_report_add_table(r, "reverse", "length", "accuracy", x, 2, names, y, 1), 0);
    cr_assert_eq(tg_report_write(r, in_dir("report.html"), "toy"), 0);
    tg_report_free(r);
    char *s = page_of(in_dir("report.html"));
    cr_expect(
        strstr(s, "\"samples\": [{\"step\": 10, \"text\": \"first\"},\n{\"step\": 20, \"text\": \"re\\\\x01sumed\"}]"),
        "%.120s", strstr(s, "\"samples\""));
    cr_expect(!strstr(s, "lost"));
    cr_expect(strstr(s, "\"table\": [{\"title\": \"shift\"") && strstr(s, "\"y\": [null,25]") &&
              strstr(s, "{\"title\": \"reverse\""));
    free(s);
}

/* The encoder's page: attention over a sequence of numbered tokens, and the
 * positions of every kind, appended model after model (extrapolate's page
 * holds them all). The fixed table's plot holds the sinusoids themselves. */
Test(report, encoder_attention_and_the_positions_of_every_kind) {
    tmpdir();
    tg_rng rng = tg_rng_new(4);
    static const char *const names[] = {"0 ", "1 ", "2 ", "3 ", "4 ", "5 "};
    int tokens[5] = {3, 1, 4, 1, 5};
    tg_report *r = tg_report_new();
    tg_encoder *ms[6];
    for (int k = 0; k < 6; k++) { /* TG_PE_FIXED .. TG_PE_ALIBI */
        tg_encoder_config c = tiny_encoder(6, 8, 8, 2, 2, 10);
        c.pe = (tg_pe_kind)k;
        ms[k] = tg_encoder_new(&c, &rng);
        TG_REQUIRE(ms[k]);
    }
    cr_assert_eq(tg_report_add_encoder(r, ms[0], tokens, 5, names), 0, "%s", tg_last_error());
    cr_expect(ms[0]->blocks[0]->attention->attention->dropout->training, "the model's mode is restored");
    for (int k = 1; k < 6; k++) cr_assert_eq(tg_report_add_positions(r, ms[k], 5), 0, "%s", tg_last_error());
    cr_assert_eq(tg_report_write(r, in_dir("report.html"), "reverse"), 0, "%s", tg_last_error());
    char *s = page_of(in_dir("report.html"));
    cr_expect(strstr(s, "\"title\": \"Attention over one held-out sequence (fixed positions)\", \"layers\": 2, "
                        "\"heads\": 2, \"pe\": \"fixed\", \"tokens\": [\"3 \",\"1 \",\"4 \",\"1 \",\"5 \"]"),
              "%.200s", strstr(s, "\"attention\""));
    cr_expect(!strstr(s, "\"w\": [[[1],"), "an encoder's rows are not causal");
    /* fixed: P[1, 0] = sin(1), P[1, 1] = cos(1), as %.3g */
    const char *fixed = strstr(s, "Fixed sinusoidal positions: P[:5] [5, 8]");
    cr_assert(fixed);
    cr_expect(strstr(fixed, "\"data\": [0,1,0,1,0,1,0,1,0.841,0.54,"), "%.120s", strstr(fixed, "\"data\""));
    cr_expect(strstr(s, "Learned absolute positions: pos_encoding.P[:5] [5, 8]"));
    cr_expect(strstr(s, "Fixed sinusoidal positions: P[:5] [5, 8], beside the learned table"));
    cr_expect(strstr(s, "Relative positions (Shaw et al.): layer 1's relative_k [33, 4]"));
    cr_expect(strstr(s, "RoPE positions: q.k of two equal vectors"));
    cr_expect(strstr(s, "ALiBi positions: the bias -m_h (i - j)"));
    cr_expect_eq(count(s, "\"kind\": \"heatmap\""), 4, "fixed, learned + fixed beside it, relative; none adds none");
    free(s);
    int bad[2] = {0, 6};
    cr_expect_eq(tg_report_add_encoder(r, ms[0], bad, 2, names), -1);
    cr_expect(error_has("report: encoder attention", "outside the vocabulary"));
    cr_expect_eq(tg_report_add_encoder(r, ms[0], tokens, 11, names), -1);
    cr_expect(error_has("report: encoder attention", "T 11 outside 1..10"));
    cr_expect_eq(tg_report_add_positions(r, ms[1], 11), -1);
    cr_expect(error_has("report: positions", "T 11"));
    tg_report_free(r);
    for (int k = 0; k < 6; k++) tg_encoder_free(ms[k]);
}

/* What the report shows of a kind comes from its row: a row registered
 * here with a report function of its own is drawn as it says, and one
 * without (an INPUT table) by its name, about line and table. */
static int ramp_report(const tg_pe_view *v, tg_pe_plot *plots) {
    plots[0] = (tg_pe_plot){.lines = true, .ylabel = "ramp", .series = "line %d", .rows = 1, .cols = v->T};
    snprintf(plots[0].title, sizeof plots[0].title, "Ramp positions over %d offsets", v->T);
    if (!(plots[0].data = malloc(sizeof(double) * (size_t)v->T))) return -1;
    for (int i = 0; i < v->T; i++) plots[0].data[i] = 0.5 * i;
    return 1;
}

Test(report, positions_come_from_the_kinds_rows) {
    tmpdir();
    static tg_pe_rule ramp, plain;
    ramp = *tg_pe_rule_of(TG_PE_LEARNED), plain = ramp;
    ramp.name = "ramp", ramp.report = ramp_report;
    plain.name = "plain", plain.about = "a learned table (test-only)", plain.report = NULL;
    tg_pe_kind kr, kp;
    cr_assert_eq(tg_pe_register(&ramp, &kr), 0, "%s", tg_last_error());
    cr_assert_eq(tg_pe_register(&plain, &kp), 0, "%s", tg_last_error());
    tg_rng rng = tg_rng_new(4);
    tg_report *r = tg_report_new();
    tg_encoder *ms[2];
    for (int k = 0; k < 2; k++) {
        tg_encoder_config c = tiny_encoder(6, 8, 8, 2, 2, 10);
        c.pe = k ? kp : kr;
        TG_REQUIRE(ms[k] = tg_encoder_new(&c, &rng));
        cr_assert_eq(tg_report_add_positions(r, ms[k], 4), 0, "%s", tg_last_error());
    }
    cr_assert_eq(tg_report_write(r, in_dir("report.html"), "rows"), 0, "%s", tg_last_error());
    char *s = page_of(in_dir("report.html"));
    const char *at = strstr(s, "\"title\": \"Ramp positions over 4 offsets\"");
    cr_expect(at && strstr(at, "\"name\": \"line 1\", \"y\": [0,0.5,1,1.5]"), "%.300s", at ? at : s);
    cr_expect(strstr(s, "plain positions (a learned table (test-only)): pos_encoding.P[:4] [4, 8]"));
    cr_expect_eq(count(s, "\"kind\": \"heatmap\""), 1, "the plain row's table; the ramp row draws lines");
    free(s);
    tg_pe_view v = {.kind = kp, .T = 4}; /* no table: the view lacks what the kind uses */
    tg_pe_plot p[TG_PE_MAX_PLOTS];
    cr_expect_eq(tg_pe_plots(&v, p), -1);
    cr_expect(error_has("pe_plots: plain", "table"), "%s", tg_last_error());
    v.kind = (tg_pe_kind)99;
    cr_expect_eq(tg_pe_plots(&v, p), -1);
    cr_expect(error_has("pe_plots", "without a row"), "%s", tg_last_error());
    tg_report_free(r);
    for (int k = 0; k < 2; k++) tg_encoder_free(ms[k]);
}

/* The page's data block: the text between its <script> and </script>. */
static char *data_block(const char *page) {
    const char *open = "<script type=\"application/json\" id=\"tg-data\">\n";
    const char *a = strstr(page, open);
    cr_assert(a);
    a += strlen(open);
    const char *b = strstr(a, "</script>");
    cr_assert(b);
    return strndup(a, (size_t)(b - a));
}

/* How many times the data's top-level object holds key, and the string
 * value of the last (what JSON.parse keeps) into value when it is one. */
static int top_keys(const char *data, const char *key, char *value, size_t cap) {
    tg_json j = {.p = data, .start = data, .end = data + strlen(data)};
    int k = 0, more = tg_json_open(&j, '{', '}') == 0;
    while (more == 1) {
        char name[64];
        cr_assert_eq(tg_json_string(&j, name, sizeof name, NULL), 0, "%s", j.why);
        cr_assert_eq(tg_json_expect(&j, ':'), 0, "%s", j.why);
        tg_json_skip_ws(&j);
        tg_json at = j;
        cr_assert_eq(tg_json_skip_value(&j, 0), 0, "%s", j.why);
        if (strcmp(name, key) == 0) {
            k++;
            if (value && *at.p == '"') tg_json_string(&at, value, cap, NULL);
        }
        more = tg_json_next(&j, '}');
    }
    tg_json_skip_ws(&j);
    cr_expect(more == 0 && j.p == j.end, "the data block is one JSON object: %s", j.why);
    return k;
}

/* Issue 34.4: a samples.jsonl line is parsed and written again, never
 * copied: text after a line's object cannot add keys to the page's data
 * (its title, its settings) nor break it; such lines, and lines that do
 * not parse, are left out and counted. */
Test(report, crafted_sample_lines_cannot_rewrite_the_page) {
    tmpdir();
    FILE *f = fopen(in_dir("samples.jsonl"), "w");
    cr_assert_not_null(f);
    fputs("{\"step\": 10, \"text\": \"first\"}\n"
          "{\"step\": 20, \"text\": \"x\"}], \"title\": \"pwned\", \"settings\": {\"lr\": \"evil\"}, \"z\": [\n"
          "{\"step\": 30, \"text\": \"y\"} {\"step\": 31, \"text\": \"z\"}\n"
          "not json at all\n"
          "{\"step\": 40, \"text\": \"</script><script>alert(1)</script>\\u2028\"}  \n",
          f);
    fclose(f);
    tg_report *r = tg_report_new();
    cr_assert_eq(tg_report_add_samples(r, g_dir, 0), 0, "%s", tg_last_error());
    cr_expect_eq(tg_report_dropped(r), 3, "the crafted lines and the one that does not parse");
    cr_assert_eq(tg_report_add(r, "settings", "{\"lr\": \"0.001\"}"), 0);
    cr_assert_eq(tg_report_write(r, in_dir("report.html"), "the run"), 0, "%s", tg_last_error());
    tg_report_free(r);
    char *s = page_of(in_dir("report.html")), *data = data_block(s), title[64] = "";
    cr_expect_eq(top_keys(data, "title", title, sizeof title), 1);
    cr_expect_str_eq(title, "the run");
    cr_expect_eq(top_keys(data, "settings", NULL, 0), 1);
    cr_expect_eq(top_keys(data, "z", NULL, 0), 0);
    cr_expect(!strstr(s, "pwned") && !strstr(s, "evil") && !strstr(s, "\"step\": 31"), "%s", data);
    cr_expect(strstr(data, "\"samples\": [{\"step\": 10, \"text\": \"first\"},\n{\"step\": 40, \"text\": "
                           "\"\\u003c/script>\\u003cscript>alert(1)\\u003c/script>\xe2\x80\xa8\"}]"),
              "%s", data);
    cr_expect_eq(count(s, "</script>"), 2, "only the page's own two script blocks end");
    free(data), free(s);
    /* A part given as text must be one JSON value, nothing after it. */
    r = tg_report_new();
    cr_expect_eq(tg_report_add(r, "settings", "{}, \"title\": \"pwned\""), -1);
    cr_expect(error_has("report: part 'settings' is not one JSON value", NULL), "%s", tg_last_error());
    cr_expect_eq(tg_report_add(r, "samples", "[1, 2"), -1);
    tg_report_free(r);
}

/* Issue 34: the page lets its one script run by hash, not by
 * 'unsafe-inline': the hash in the CSP is the SHA-256 of the script
 * element's text as written (the browser test runs it under that CSP). */
Test(report, csp_allows_the_script_by_its_sha256) {
    tmpdir();
    cr_assert_eq(tg_viz_report(in_dir("r.html"), "t", NULL, 0), 0, "%s", tg_viz_last_error());
    char *s = page_of(in_dir("r.html"));
    const char *csp = strstr(s, "script-src 'sha256-");
    cr_assert(csp, "%.400s", s);
    cr_expect(!strstr(s, "script-src 'unsafe-inline'") && !strstr(s, "'unsafe-eval'"));
    char want[45] = "";
    sscanf(csp + strlen("script-src 'sha256-"), "%44[A-Za-z0-9+/=]", want);
    cr_expect_eq(strlen(want), 44);
    const char *body = strstr(s, "<script>\n");
    cr_assert(body && !strstr(body + 1, "<script>"), "one script element without attributes");
    body += strlen("<script>");
    const char *end = strstr(body, "</script>");
    cr_assert(end);
    viz_sha256 h;
    unsigned char d[32];
    char got[45];
    viz_sha256_init(&h);
    viz_sha256_update(&h, body, (size_t)(end - body));
    viz_sha256_final(&h, d);
    viz_base64(d, 32, got);
    cr_expect_str_eq(got, want);
    free(s);
}

/* FIPS 180-4's examples (and the one-million-'a' message), byte at a time
 * and at once; base64 of RFC 4648's examples. */
Test(report, sha256_and_base64_match_the_standards) {
    static const char *const msg[] = {"", "abc", "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"};
    static const char *const hex[] = {"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                                      "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
                                      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"};
    for (int i = 0; i < 4; i++) {
        viz_sha256 h;
        unsigned char d[32];
        char got[65];
        viz_sha256_init(&h);
        if (i < 3) {
            viz_sha256_update(&h, msg[i], strlen(msg[i]));
        } else {
            char a[1001];
            memset(a, 'a', sizeof a);
            for (int k = 0; k < 1000; k++) viz_sha256_update(&h, a, k % 2 ? 999 : 1001);
        }
        viz_sha256_final(&h, d);
        for (int k = 0; k < 32; k++) snprintf(got + 2 * k, 3, "%02x", d[k]);
        cr_expect_str_eq(got, i < 3 ? hex[i] : "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    }
    static const char *const plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *const b64[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (int i = 0; i < 7; i++) {
        char out[16];
        viz_base64((const unsigned char *)plain[i], strlen(plain[i]), out);
        cr_expect_str_eq(out, b64[i]);
    }
}

static void write_file(const char *name, const char *text) {
    FILE *f = fopen(in_dir(name), "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

/* A profiler's tables: DIR/profile.json (one table or a list of them,
 * {title, columns, rows}) is parsed, written again into the "table" part
 * and shown by a page rebuilt from the run folder; a malformed one is
 * refused with its reason. */
Test(report, tables_of_rows_from_the_run_folders_profile_json) {
    tmpdir();
    write_file("metrics.jsonl", "{\"step\": 1, \"lr\": 0.001, \"loss\": 3.5, \"val_loss\": null, \"tokens_per_s\": 10, "
                                "\"grad_norm\": 1}\n");
    write_file("profile.json", "[{\"title\": \"Time per op\", \"columns\": [\"op\", \"calls\", \"ms\"], \"note\": {},\n"
                               " \"rows\": [[\"matmul\", 120, 3.5], [\"soft<max\", 4, null]]},\n"
                               " {\"rows\": [], \"columns\": [\"a\"], \"title\": \"empty\"}]\n");
    tg_report *r = tg_report_new();
    cr_assert_eq(tg_report_add_run(r, g_dir), 0, "%s", tg_last_error());
    cr_assert_eq(tg_report_write(r, in_dir("report.html"), "run"), 0, "%s", tg_last_error());
    tg_report_free(r);
    char *s = page_of(in_dir("report.html"));
    cr_expect(strstr(s, "\"table\": [{\"title\": \"Time per op\", \"columns\": [\"op\",\"calls\",\"ms\"], \"rows\": "
                        "[[\"matmul\",120,3.5],\n[\"soft\\u003cmax\",4,null]]},\n"
                        "{\"title\": \"empty\", \"columns\": [\"a\"], \"rows\": []}]"),
              "%s", strstr(s, "\"table\""));
    free(s);
    const char *bad[][2] = {
        {"{\"title\": \"t\", \"columns\": [\"a\", \"b\"], \"rows\": [[1]]}", "a row of 1 cells, not 2"},
        {"{\"title\": \"t\", \"columns\": [\"a\"], \"rows\": [[1, 2]]}", "a row of 2 cells, not 1"},
        {"{\"title\": \"t\", \"columns\": [\"a\"], \"rows\": [[{}]]}", "table cell: expected a number"},
        {"{\"title\": \"t\", \"rows\": []}", "\"columns\""},
        {"{\"title\": \"t\", \"columns\": [\"a\"], \"rows\": []} x", "text after the table"},
        {"[1]", "expected '{'"},
    };
    r = tg_report_new();
    for (int i = 0; i < 6; i++) {
        write_file("t.json", bad[i][0]);
        cr_expect_eq(tg_report_add_rows_file(r, in_dir("t.json")), -1, "%s", bad[i][0]);
        cr_expect(error_has("t.json", bad[i][1]), "%s: %s", bad[i][0], tg_last_error());
    }
    tg_report_free(r);
}
