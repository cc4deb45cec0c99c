/* The default corpus: Debian's fortune files as one text (train.h). */
#include "train.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "../io/file.h"

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The names of dir with no '.' in them, sorted; tg_sys_alloc'd. */
static int list_names(const char *dir, char ***out, int *count) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    char **names = NULL;
    int n = 0, cap = 0, rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '\0' || strchr(e->d_name, '.')) continue;
        if (n == cap) {
            int ncap = cap ? 2 * cap : 16;
            char **grown = tg_sys_alloc((size_t)ncap * sizeof *grown);
            if (!grown) {
                rc = -1;
                break;
            }
            if (n) memcpy(grown, names, (size_t)n * sizeof *names);
            tg_sys_free(names);
            names = grown;
            cap = ncap;
        }
        size_t len = strlen(e->d_name) + 1;
        if (!(names[n] = tg_sys_alloc(len))) {
            rc = -1;
            break;
        }
        memcpy(names[n++], e->d_name, len);
    }
    closedir(d);
    if (n > 1) qsort(names, (size_t)n, sizeof *names, by_name);
    *out = names;
    *count = n;
    return rc;
}

/* Appends the fortunes of one file to f: each "%" line becomes an empty
 * line; a last fortune without its "%" is ended the same way. Returns the
 * number of fortunes. */
static int64_t write_fortunes(FILE *f, const unsigned char *b, size_t n) {
    int64_t count = 0;
    bool text = false; /* the current fortune has a character that is not white space */
    size_t i = 0;
    while (i < n) {
        size_t end = i;
        while (end < n && b[end] != '\n') end++;
        size_t len = end - i;
        if (len == 1 && b[i] == '%') {
            if (text) fputc('\n', f), count++;
            text = false;
        } else {
            for (size_t k = i; k < end; k++) text |= b[k] != ' ' && b[k] != '\t' && b[k] != '\r';
            if (text) { /* lines before a fortune's first character are dropped */
                fwrite(b + i, 1, len, f);
                fputc('\n', f);
            }
        }
        i = end + 1;
    }
    if (text) fputc('\n', f), count++;
    return count;
}

int64_t tg_fortunes_corpus(const char *dir, const char *out_path) {
    if (!out_path) {
        tg_set_error("fortunes_corpus: NULL output path");
        return -1;
    }
    if (!dir) dir = TG_FORTUNES_DIR;
    char **names = NULL;
    int n = 0;
    if (list_names(dir, &names, &n) != 0) {
        tg_set_error("fortunes_corpus: %s: cannot list the directory%s", dir,
                     names ? " (out of memory)" : " (install Debian's fortunes package: tools/install-deps.sh)");
        for (int i = 0; i < n; i++) tg_sys_free(names[i]);
        tg_sys_free(names);
        return -1;
    }
    tg_atomic_file af;
    int64_t total = 0, files = 0;
    bool skipped = false;
    int rc = tg_atomic_begin(&af, out_path, "fortunes_corpus");
    for (int i = 0; rc == 0 && i < n; i++) {
        size_t plen = strlen(dir) + strlen(names[i]) + 2;
        char *path = tg_sys_alloc(plen);
        if (!path) {
            tg_set_error("fortunes_corpus: out of memory");
            rc = -1;
            break;
        }
        snprintf(path, plen, "%s/%s", dir, names[i]);
        unsigned char *b;
        size_t size;
        /* tg_read_file refuses what is not a regular file: a directory or a
         * symlink to one is skipped, as a symlink to a fortune file is not
         * (the .u8 links have a '.' and were never listed). */
        if (tg_read_file(path, "fortunes_corpus", &b, &size) == 0) {
            total += write_fortunes(af.f, b, size);
            files++;
            tg_sys_free(b);
        } else {
            skipped = true;
        }
        tg_sys_free(path);
    }
    for (int i = 0; i < n; i++) tg_sys_free(names[i]);
    tg_sys_free(names);
    if (rc != 0) {
        tg_atomic_abort(&af);
        return -1;
    }
    if (total == 0) {
        tg_atomic_abort(&af);
        tg_set_error("fortunes_corpus: %s: no fortune file (%lld files read)", dir, (long long)files);
        return -1;
    }
    if (skipped) tg_clear_error(); /* a skipped entry's message is not this call's error */
    return tg_atomic_commit(&af, "fortunes_corpus") == 0 ? total : -1;
}
