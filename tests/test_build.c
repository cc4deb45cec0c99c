/* Building installs nothing: `make` (all, lib, programs, install, a fuzzer)
 * never runs tools/install-deps.sh, apt or sudo, so it works with no network
 * and no sudo, and where there is no dpkg. `make test`, `make demo` and
 * `make fuzz` do install what is missing, before compiling anything, unless
 * NO_DEPS=1. A missing build-time header stops the build with one line that
 * names its Debian package.
 *
 * The cases are dry runs in the source tree (make -n -B: every target out of
 * date, its commands printed and not run; only the lines that call $(MAKE)
 * run, as dry runs themselves) with a PATH whose sudo, apt-get, apt, dpkg
 * and dpkg-query fail loudly and leave a mark, so that an install step fails
 * a case whether it shows among the commands or runs. `make bench` is left
 * out: its recipe runs a sub-make in a shell line that also runs
 * tools/bench_ddp.sh, even under -n. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "test_util.h"

static char tmp[64];    /* this case's directory: the stubs, make's output */
static char out[16384]; /* what a check found */

static void setup(void) {
    snprintf(tmp, sizeof tmp, "/tmp/tgrad-build-XXXXXX");
    cr_assert_not_null(mkdtemp(tmp));
    char path[256];
    snprintf(path, sizeof path, "%s/bin", tmp);
    cr_assert_eq(mkdir(path, 0755), 0);
    const char *stubs[] = {"sudo", "apt-get", "apt", "dpkg", "dpkg-query"};
    for (size_t i = 0; i < sizeof stubs / sizeof *stubs; i++) {
        snprintf(path, sizeof path, "%s/bin/%s", tmp, stubs[i]);
        FILE *f = fopen(path, "w");
        cr_assert_not_null(f);
        fprintf(f,
                "#!/bin/sh\n"
                "echo \"$0 $*\" >> '%s/installs'\n"
                "echo \"$0: tests/test_build.c: no installing\" >&2\n"
                "exit 1\n",
                tmp);
        fclose(f);
        cr_assert_eq(chmod(path, 0755), 0);
    }
}
static void teardown(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) cr_log_warn("could not remove %s", tmp);
}
TestSuite(build, .init = setup, .fini = teardown);

/* A command line that installs: the scripts of tools/, apt, dpkg, sudo. */
#define INSTALL_RE                                                            \
    "^[[:space:]]*(sudo[[:space:]]+)?((ba)?sh[[:space:]]+)?([^[:space:]]*/)?" \
    "(tools/install-[a-z-]*deps\\.sh|apt-get|apt|dpkg|dpkg-query)([[:space:]]|$)"

/* Runs `make ARGS` in the source tree, the stubs first in PATH and none of
 * the variables of the make that runs the suite (MAKEFLAGS, DOUBLE=1 and
 * the like, NO_DEPS); returns make's exit code, its output in tmp/log. */
static int run_make(const char *args) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u NO_DEPS -u DOUBLE -u MPI -u SANITIZE -u OMP "
             "-u BUILD -u DIST_NOTE -u CFLAGS PATH='%s/bin':\"$PATH\" make %s > '%s/log' 2>&1",
             TG_SRC_DIR, tmp, args, tmp);
    int status = system(cmd);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The lines of tmp/log that match the extended regex re (no single quote
 * in it), numbered, into out (empty: none). */
static void grep_log(const char *re) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "grep -nE '%s' '%s/log' | head -20 > '%s/found'; true", re, tmp, tmp);
    cr_assert_eq(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s/found", tmp);
    FILE *f = fopen(cmd, "r");
    cr_assert_not_null(f);
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = 0;
    fclose(f);
}

/* The first line of tmp/log that matches re (0: none). */
static long first_line(const char *re) {
    grep_log(re);
    return atol(out);
}

/* Whether a stub ran; if so, what it was asked, in out. */
static bool stub_ran(void) {
    char path[256];
    snprintf(path, sizeof path, "%s/installs", tmp);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = 0;
    fclose(f);
    return true;
}

Test(build, make_installs_nothing, .timeout = 300) {
    char install[512];
    snprintf(install, sizeof install, "install PREFIX='%s/prefix'", tmp);
    const char *goals[] = {
        "", "all", "lib", "programs", install, "DOUBLE=1 lib programs", "MPI=1 all", "build/fuzz/fuzz_npy"};
    for (size_t i = 0; i < sizeof goals / sizeof *goals; i++) {
        char args[600];
        snprintf(args, sizeof args, "-n -B %s", goals[i]);
        int rc = run_make(args);
        grep_log(INSTALL_RE);
        cr_expect_eq(out[0], 0, "make %s would install:\n%s", args, out);
        cr_expect_eq(rc, 0, "make %s failed: see %s/log", args, tmp);
        cr_assert_not(stub_ran(), "make %s ran an installer:\n%s", args, out);
    }
}

Test(build, test_demo_fuzz_install_first_but_not_with_NO_DEPS, .timeout = 300) {
    const char *goals[] = {"test", "demo", "fuzz", "test MPI=1"};
    for (size_t i = 0; i < sizeof goals / sizeof *goals; i++) {
        char args[256];
        snprintf(args, sizeof args, "-n -B %s", goals[i]);
        cr_expect_eq(run_make(args), 0, "make %s failed: see %s/log", args, tmp);
        long install = first_line("^[[:space:]]*sh tools/install-deps\\.sh");
        long compile = first_line(" -c ");
        cr_expect(install > 0, "make %s installs nothing", args);
        cr_expect(compile > 0, "make %s compiles nothing", args);
        cr_expect(install < compile, "make %s installs (line %ld) after compiling (line %ld)", args, install, compile);

        snprintf(args, sizeof args, "-n -B NO_DEPS=1 %s", goals[i]);
        cr_expect_eq(run_make(args), 0, "make %s failed: see %s/log", args, tmp);
        grep_log(INSTALL_RE);
        cr_expect_eq(out[0], 0, "make %s would install:\n%s", args, out);
        cr_assert_not(stub_ran(), "make %s ran an installer:\n%s", args, out);
    }
}

/* Without stb's headers (-nostdinc hides them), compiling src/viz stops at
 * one line that names libstb-dev and make deps, before the compiler's
 * errors; nothing is installed. */
Test(build, missing_stb_header_is_one_line_naming_the_package, .timeout = 120) {
    char args[512];
    snprintf(args, sizeof args, "BUILD='%s/b' CFLAGS=-nostdinc '%s/b/obj/src/viz/canvas.o'", tmp, tmp);
    cr_expect_neq(run_make(args), 0, "make %s succeeded without stb", args);
    grep_log("^tgrad: src/viz needs <stb/stb_image_write.h>, from Debian.s libstb-dev: make deps installs it");
    cr_expect_neq(out[0], 0, "no line naming libstb-dev: see %s/log", tmp);
    grep_log("error:|No such file");
    cr_expect_eq(out[0], 0, "compiler errors:\n%s", out);
    cr_expect_not(stub_ran(), "make ran an installer:\n%s", out);
}
