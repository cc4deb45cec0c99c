/* viz keeps its own small JSON string escaper (put_json_string, for the
 * title) by design: viz stands alone and knows nothing of src/io.
 *
 * The run report: one self-contained HTML page (no network, no external
 * file, no framework) that shows what a training run holds.
 *
 * The page is the caller's data, embedded as JSON in a
 * <script type="application/json"> block, and the page's own CSS and
 * JavaScript (src/viz/report/, embedded as C strings by
 * tools/embed_report.sh into report_assets.c), which draw it in the
 * browser. viz knows nothing of runs or tensors: the caller names each
 * part ("settings", "metrics", "attention", ... : report.js lists the
 * shapes it draws) and hands over its JSON text. A Content-Security-Policy
 * forbids every fetch, so the page provably works offline, and lets only
 * the page's own script run: it names that script by its SHA-256
 * ('sha256-...' of the script element's exact text), so even data that
 * escaped its block could not run as script. */
#include <stdio.h>
#include <string.h>

#include "viz_internal.h"

/* Text inside <title>: & < > " as entities. */
static void put_html(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '&')
            fputs("&amp;", f);
        else if (*s == '<')
            fputs("&lt;", f);
        else if (*s == '>')
            fputs("&gt;", f);
        else if (*s == '"')
            fputs("&quot;", f);
        else
            fputc(*s, f);
    }
}

/* JSON text inside <script>: every '<' as \u003c, so no "</script>" or
 * "<!--" in the data can end the block early (outside a string a '<' is
 * not JSON anyway, and the page's JSON.parse would say so). */
static void put_json(FILE *f, const char *s) {
    for (; *s; s++) *s == '<' ? (void)fputs("\\u003c", f) : (void)fputc(*s, f);
}

/* A JSON string of s: quotes, backslashes and control characters escaped. */
static void put_json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20 || c == '<')
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void put_lines(FILE *f, const char *const *lines) {
    for (; *lines; lines++) fputs(*lines, f);
}

/* The page's script element holds exactly SCRIPT_LEAD and then the lines
 * of viz_report_js; its CSP source is 'sha256-<base64 of their SHA-256>'. */
#define SCRIPT_LEAD "\n"
static void script_hash(char out[45]) {
    viz_sha256 s;
    unsigned char d[32];
    viz_sha256_init(&s);
    viz_sha256_update(&s, SCRIPT_LEAD, strlen(SCRIPT_LEAD));
    for (const char *const *l = viz_report_js; *l; l++) viz_sha256_update(&s, *l, strlen(*l));
    viz_sha256_final(&s, d);
    viz_base64(d, sizeof d, out);
}

/* A part's name: what report.js looks up, so a plain identifier. */
static int valid_name(const char *s) {
    if (!s || !*s) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || *s == '_')) return 0;
    return 1;
}

int tg_viz_report(const char *html_path, const char *title, const tg_viz_report_part *parts, int n_parts) {
    const char *fn = "tg_viz_report";
    if (!html_path || (n_parts > 0 && !parts) || n_parts < 0)
        return viz_error("%s: NULL path or parts (n_parts %d)", fn, n_parts);
    for (int i = 0; i < n_parts; i++) {
        if (!valid_name(parts[i].name) || strcmp(parts[i].name, "title") == 0)
            return viz_error("%s: part %d: name '%s' is not a lower-case identifier other than 'title'", fn, i,
                             parts[i].name ? parts[i].name : "(null)");
        if (!parts[i].json || !parts[i].json[strspn(parts[i].json, " \t\r\n")])
            return viz_error("%s: part '%s': no JSON", fn, parts[i].name);
    }
    char *tmp;
    FILE *f = viz_atomic_open(html_path, &tmp, fn);
    if (!f) return -1;
    title = title ? title : "Run report";
    char hash[45];
    script_hash(hash);
    /* No network: nothing may be fetched; only the inline style and the one
     * script whose hash is given run. */
    fprintf(f,
            "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
            "script-src 'sha256-%s'; style-src 'unsafe-inline'; img-src data:\">\n<title>",
            hash);
    put_html(f, title);
    fputs("</title>\n<style>\n", f);
    put_lines(f, viz_report_css);
    fputs("</style>\n</head>\n<body>\n<main id=\"app\"></main>\n"
          "<script type=\"application/json\" id=\"tg-data\">\n{\"title\": ",
          f);
    put_json_string(f, title);
    for (int i = 0; i < n_parts; i++) {
        fprintf(f, ",\n\"%s\": ", parts[i].name);
        put_json(f, parts[i].json);
    }
    fputs("}\n</script>\n<script>" SCRIPT_LEAD, f);
    put_lines(f, viz_report_js);
    fputs("</script>\n</body>\n</html>\n", f);
    int failed = ferror(f) != 0;
    if (failed) viz_error("%s: writing '%s' failed", fn, tmp);
    return viz_atomic_close(f, tmp, html_path, failed, fn);
}
