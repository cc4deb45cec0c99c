/* Command-line flags for the tools (inspect, heatmap, bench): "--name value"
 * or "--name=value", --help, positional arguments, and usage + exit 2 on
 * anything unknown or malformed. Header-only: each tool includes it once.
 * (The examples have their own examples/cli.h, which also reads real numbers
 * and makes output directories.) */
#ifndef TG_TOOLS_CLI_H
#define TG_TOOLS_CLI_H

#include <errno.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef enum { CLI_INT, CLI_STR, CLI_FLAG } cli_kind;
typedef struct {
    const char *name; /* without the leading "--" */
    cli_kind kind;
    void *dst; /* int*, const char**, bool* */
    const char *help;
    long min, max; /* accepted range of an integer (when min < max) */
} cli_opt;

static void cli_usage(FILE *f, const char *prog, const char *synopsis, const char *about, const cli_opt *o, int n) {
    fprintf(f, "usage: %s %s\n\n%s\n\noptions:\n", prog, synopsis, about);
    for (int i = 0; i < n; i++) {
        fprintf(f, "  --%-14s %s", o[i].name, o[i].help);
        if (o[i].kind == CLI_INT) fprintf(f, " (default %d)", *(int *)o[i].dst);
        if (o[i].kind == CLI_STR && *(const char **)o[i].dst) fprintf(f, " (default %s)", *(const char **)o[i].dst);
        fputc('\n', f);
    }
    fprintf(f, "  --%-14s %s\n", "help", "print this help and exit");
}

/* A bad combination of flags: "prog: <message>", the usage, and exit code 2
 * for main to return. */
#if defined(__GNUC__)
__attribute__((format(printf, 6, 7), unused))
#endif
static int
cli_usage_error(const char *prog, const char *synopsis, const char *about, const cli_opt *o, int n, const char *fmt,
                ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    cli_usage(stderr, prog, synopsis, about, o, n);
    return 2;
}

/* Sets one option from its value text; false when the value is bad. */
static bool cli_set(const cli_opt *opt, const char *val) {
    if (opt->kind == CLI_STR) {
        *(const char **)opt->dst = val;
        return true;
    }
    char *end;
    errno = 0;
    long v = strtol(val, &end, 10);
    if (!*val || *end || errno || v < -2147483647L || v > 2147483647L) return false;
    if (opt->min < opt->max && (v < opt->min || v > opt->max)) return false;
    *(int *)opt->dst = (int)v;
    return true;
}

/* Parses argv into the options; positional arguments go to pos (up to
 * max_pos), and their count is returned. Prints usage and exits 0 on --help,
 * 2 on a bad flag or value. */
static int cli_parse(int argc, char **argv, const char *synopsis, const char *about, const cli_opt *o, int n,
                     const char **pos, int max_pos) {
    int npos = 0;
    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a], *why = NULL;
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            cli_usage(stdout, argv[0], synopsis, about, o, n);
            exit(0);
        }
        if (strncmp(arg, "--", 2) != 0) {
            if (npos < max_pos) {
                pos[npos++] = arg;
                continue;
            }
            fprintf(stderr, "%s: unexpected argument '%s'\n", argv[0], arg);
            goto bad;
        }
        const char *eq = strchr(arg + 2, '=');
        size_t len = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
        const cli_opt *opt = NULL;
        for (int i = 0; i < n && !opt; i++)
            if (strlen(o[i].name) == len && strncmp(o[i].name, arg + 2, len) == 0) opt = &o[i];
        const char *val =
            !opt || opt->kind == CLI_FLAG || eq ? (eq ? eq + 1 : NULL) : (a + 1 < argc ? argv[++a] : NULL);
        if (!opt)
            why = "unknown option";
        else if (opt->kind == CLI_FLAG && eq)
            why = "takes no value";
        else if (opt->kind == CLI_FLAG) {
            *(bool *)opt->dst = true;
            continue;
        } else if (!val)
            why = "needs a value";
        else if (!cli_set(opt, val))
            why = opt->min < opt->max ? "needs an integer in range" : "needs an integer";
        if (!why) continue;
        fprintf(stderr, "%s: %s: %s", argv[0], arg, why);
        if (opt && opt->kind == CLI_INT && opt->min < opt->max) fprintf(stderr, " [%ld, %ld]", opt->min, opt->max);
        fputc('\n', stderr);
        goto bad;
    }
    return npos;
bad:
    cli_usage(stderr, argv[0], synopsis, about, o, n);
    exit(2);
}

/* Threads: the library's own pool (src/tensor/parallel.c) decides how its
 * idle threads wait, so the tools no longer restart themselves with
 * OMP_WAIT_POLICY set. */

#endif
