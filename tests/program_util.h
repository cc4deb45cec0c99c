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
    char cmd[4096];
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

#endif
