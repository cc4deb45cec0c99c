/* Hostile input to the programs (issue 10): each case once crashed, hung,
 * or ended with exit 0 and a wrong or missing result. Every one must now
 * end promptly with a clear message and a non-zero exit. */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "test_util.h"

static char tmp[64];
static char out[16384];

static void setup(void) {
    snprintf(tmp, sizeof tmp, "/tmp/tgrad-hostile-XXXXXX");
    cr_assert_not_null(mkdtemp(tmp));
}
static void teardown(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) cr_log_warn("could not remove %s", tmp);
}
TestSuite(hostile, .init = setup, .fini = teardown);

/* Runs build/.../bin/<prog> with args in tmp, under `timeout`; returns its
 * exit code (124 when it had to be killed), its output in out. */
static int run(int seconds, const char *prog, const char *args) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cd '%s' && timeout -s KILL %d '%s/%s/bin/%s' %s > '%s/log' 2>&1", tmp, seconds,
             TG_SRC_DIR, TG_BUILD_DIR, prog, args, tmp);
    int status = system(cmd);
    char path[256];
    snprintf(path, sizeof path, "%s/log", tmp);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(out, 1, sizeof out - 1, f) : 0;
    out[n] = 0;
    if (f) fclose(f);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

#define EXPECT_OUT(s) cr_expect_not_null(strstr(out, s), "output lacks '%s':\n%s", s, out)

Test(hostile, bench_rejects_an_unknown_workload_in_only) {
    cr_expect_eq(run(30, "bench", "--only toy,bogus --no-torch"), 2, "%s", out);
    EXPECT_OUT("unknown workload 'bogus'");
}

Test(hostile, bench_fails_when_it_cannot_write_its_report) {
    cr_expect_eq(run(120, "bench", "--only gemm-128 --no-torch --markdown /nonexistent-dir/B.md"), 1, "%s", out);
    EXPECT_OUT("/nonexistent-dir/B.md");
}
