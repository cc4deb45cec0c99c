/* Command-line flags for every program (the tools, and the examples through
 * their own cli.h, which includes this one): "--name value" or
 * "--name=value", --help, positional arguments, and on anything unknown or malformed one line that says what
 * is wrong, one that points to --help, and exit 2 (the whole usage under a
 * one-line refusal buried it: --help prints it). Numbers
 * are decimal only ("12", "-3", "2.5e-4"): no hex, no blanks, no inf or nan,
 * which strtod alone would take. Usage shows each flag's default, the value
 * before the command line. Header-only: each program includes it once. */
#ifndef TG_CLI_H
#define TG_CLI_H

#include <limits.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tensor/number.h"

typedef enum { CLI_INT, CLI_REAL, CLI_STR, CLI_FLAG } cli_kind;
typedef struct {
    const char *name; /* without the leading "--" */
    cli_kind kind;
    void *dst; /* int*, double*, const char**, bool* */
    const char *help;
    double min, max; /* accepted range for numbers (min < max) */
} cli_opt;

enum { CLI_MAX_OPTS = 64 };
/* " (default ...)" of each option as it was before cli_parse set any, so
 * that usage after a bad value still shows the defaults. */
static char cli_default_at[CLI_MAX_OPTS][80];
static bool cli_defaults_kept;

static void cli_default_text(const cli_opt *o, char *def, size_t cap) {
    def[0] = 0;
    if (o->kind == CLI_INT) snprintf(def, cap, " (default %d)", *(int *)o->dst);
    if (o->kind == CLI_REAL) snprintf(def, cap, " (default %g)", *(double *)o->dst);
    if (o->kind == CLI_STR && *(const char **)o->dst) snprintf(def, cap, " (default %s)", *(const char **)o->dst);
}

static void cli_usage(FILE *f, const char *prog, const char *synopsis, const char *about, const cli_opt *o, int n) {
    fprintf(f, "usage: %s %s\n\n%s\n\noptions:\n", prog, synopsis, about);
    for (int i = 0; i < n; i++) {
        char now[80];
        cli_default_text(&o[i], now, sizeof now);
        fprintf(f, "  --%-14s %s%s\n", o[i].name, o[i].help,
                cli_defaults_kept && i < CLI_MAX_OPTS ? cli_default_at[i] : now);
    }
    fprintf(f, "  --%-14s %s\n", "help", "print this help and exit");
}

/* The line under every refusal: the usage is one flag away, not printed. */
static void cli_usage_hint(const char *prog) { fprintf(stderr, "%s: run with --help for usage\n", prog); }

/* A bad combination of flags: "prog: <message>", the --help hint, and exit
 * code 2 for main to return. */
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
    (void)synopsis, (void)about, (void)o, (void)n;
    cli_usage_hint(prog);
    return 2;
}

/* Stores val in opt's destination by the flag's rules: the whole string is
 * a decimal number (tg_parse_real, tg_parse_int64: no blanks, hex, inf or
 * nan), an int for CLI_INT, inside [min, max] when min < max. Returns false
 * with the reason in why. Also used for values read from a file
 * (checkpoint metadata), so that they obey the same ranges. */
static bool cli_set(const cli_opt *opt, const char *val, char *why, size_t cap) {
    if (opt->kind == CLI_STR) {
        *(const char **)opt->dst = val;
        return true;
    }
    double v = 0;
    int64_t k = 0;
    bool ok = opt->kind == CLI_INT ? tg_parse_int64(val, &k) == 0 && k >= INT_MIN && k <= INT_MAX
                                   : tg_parse_real(val, &v) == 0;
    if (opt->kind == CLI_INT) v = (double)k;
    if (ok && opt->min < opt->max) ok = v >= opt->min && v <= opt->max;
    if (!ok) {
        int k = snprintf(why, cap, "'%s' is not a valid %s", val, opt->kind == CLI_INT ? "integer" : "number");
        if (opt->min < opt->max && k > 0 && (size_t)k < cap)
            snprintf(why + k, cap - (size_t)k, " in [%g, %g]", opt->min, opt->max);
        return false;
    }
    if (opt->kind == CLI_INT)
        *(int *)opt->dst = (int)v;
    else
        *(double *)opt->dst = v;
    return true;
}

/* Which options the command line gave (by index in the table), for a
 * program that must tell a flag given from its default (a resumed run). */
static bool cli_given_at[CLI_MAX_OPTS];
static inline bool cli_given(const cli_opt *o, int n, const char *name) {
    for (int i = 0; i < n && i < CLI_MAX_OPTS; i++)
        if (strcmp(o[i].name, name) == 0) return cli_given_at[i];
    return false;
}

/* The first option the command line gave that is not among allowed (a
 * NULL-terminated list of names), or NULL: a mode that reads only some
 * flags refuses the others rather than ignore them. */
static inline const char *cli_given_outside(const cli_opt *o, int n, const char *const *allowed) {
    for (int i = 0; i < n && i < CLI_MAX_OPTS; i++) {
        bool ok = !cli_given_at[i];
        for (const char *const *a = allowed; !ok && *a; a++) ok = strcmp(o[i].name, *a) == 0;
        if (!ok) return o[i].name;
    }
    return NULL;
}

/* Parses argv into the options; positional arguments go to pos (up to
 * max_pos). Prints usage and exits 0 on --help; on a bad flag, the reason
 * and the --help hint, and exits 2. */
static int cli_parse(int argc, char **argv, const char *synopsis, const char *about, const cli_opt *o, int n,
                     const char **pos, int max_pos) {
    for (int i = 0; i < n && i < CLI_MAX_OPTS; i++)
        cli_default_text(&o[i], cli_default_at[i], sizeof cli_default_at[i]);
    cli_defaults_kept = true;
    int npos = 0;
    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            cli_usage(stdout, argv[0], synopsis, about, o, n);
            exit(0);
        }
        if (strncmp(arg, "--", 2) != 0) {
            if (npos >= max_pos) {
                fprintf(stderr, "%s: unexpected argument '%s'\n", argv[0], arg);
                goto bad;
            }
            pos[npos++] = arg;
            continue;
        }
        const char *name = arg + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const cli_opt *opt = NULL;
        for (int i = 0; i < n; i++)
            if (strlen(o[i].name) == len && strncmp(o[i].name, name, len) == 0) opt = &o[i];
        if (!opt) {
            fprintf(stderr, "%s: unknown option '%s'\n", argv[0], arg);
            goto bad;
        }
        if (opt - o < CLI_MAX_OPTS) cli_given_at[opt - o] = true;
        if (opt->kind == CLI_FLAG) {
            if (eq) {
                fprintf(stderr, "%s: --%s takes no value\n", argv[0], opt->name);
                goto bad;
            }
            *(bool *)opt->dst = true;
            continue;
        }
        const char *val = eq ? eq + 1 : (a + 1 < argc ? argv[++a] : NULL);
        if (!val) {
            fprintf(stderr, "%s: --%s needs a value\n", argv[0], opt->name);
            goto bad;
        }
        char why[128];
        if (!cli_set(opt, val, why, sizeof why)) {
            fprintf(stderr, "%s: --%s: %s\n", argv[0], opt->name, why);
            goto bad;
        }
    }
    return npos;
bad:
    cli_usage_hint(argv[0]);
    exit(2);
}

/* Threads: the library's own pool (src/tensor/parallel.c) decides how its
 * idle threads wait (a few microseconds of spinning, then sleep), so the
 * programs no longer restart themselves with OMP_WAIT_POLICY set. */

/* Creates one directory if it does not exist; 0 on success. */
static inline int cli_mkdir1(const char *dir) {
    struct stat st;
    if (stat(dir, &st) == 0) return S_ISDIR(st.st_mode) ? 0 : -1;
    return mkdir(dir, 0777);
}

/* Creates dir and its missing parents (mkdir -p: --out may be out/lm); 0 on
 * success. */
static inline int cli_ensure_dir(const char *dir) {
    char buf[4200];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf) return -1;
    for (char *s = buf + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            if (cli_mkdir1(buf) != 0) return -1;
            *s = '/';
        }
    return cli_mkdir1(buf);
}

#endif
