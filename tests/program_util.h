/* Running the built programs from a test (test_examples.c, test_hostile.c):
 * a temporary directory per suite and one runner that keeps what the
 * program printed. Include once per test file. */
#ifndef TG_PROGRAM_UTIL_H
#define TG_PROGRAM_UTIL_H

#include <stdlib.h>
#include <sys/wait.h>

#include "test_util.h"

static char tmp[64];
static char out[16384];

static void make_tmp(const char *name) {
    snprintf(tmp, sizeof tmp, "/tmp/tgrad-%s-XXXXXX", name);
    cr_assert_not_null(mkdtemp(tmp));
}
static void remove_tmp(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) cr_log_warn("could not remove %s", tmp);
}

/* Runs `<wrapper> build/.../bin/<prog> <args>` in tmp (wrapper: "" or, say,
 * "timeout -s KILL 5"); returns its exit code, -1 when a signal ended it,
 * and leaves what it printed (stdout and stderr) in out. */
static int run_wrapped(const char *wrapper, const char *prog, const char *args) {
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "cd '%s' && %s '%s/%s/bin/%s' %s > '%s/log' 2>&1", tmp, wrapper, TG_SRC_DIR, TG_BUILD_DIR,
             prog, args, tmp);
    int status = system(cmd);
    char path[256];
    snprintf(path, sizeof path, "%s/log", tmp);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(out, 1, sizeof out - 1, f) : 0;
    out[n] = 0;
    if (f) fclose(f);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Every tensor of two safetensors files holds the same bits (and the names match). */
static inline void expect_same_tensors(const char *a, const char *b) {
    char pa[256], pb[256];
    snprintf(pa, sizeof pa, "%s/%s", tmp, a);
    snprintf(pb, sizeof pb, "%s/%s", tmp, b);
    tg_safetensors x, y;
    cr_assert_eq(tg_safetensors_open(pa, &x), 0, "%s", tg_last_error());
    cr_assert_eq(tg_safetensors_open(pb, &y), 0, "%s", tg_last_error());
    cr_expect_eq(x.n, y.n);
    for (int i = 0; i < x.n; i++) {
        int j = tg_safetensors_find(&y, x.entries[i].name);
        cr_expect_geq(j, 0, "%s lacks %s", b, x.entries[i].name);
        if (j < 0) continue;
        const tg_st_entry *e = &x.entries[i], *f = &y.entries[j];
        cr_expect(e->end - e->begin == f->end - f->begin &&
                      memcmp(x.data + e->begin, y.data + f->begin, e->end - e->begin) == 0,
                  "%s differs", e->name);
    }
    tg_safetensors_close(&x);
    tg_safetensors_close(&y);
}

#endif
