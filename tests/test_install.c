/* The README's install commands work verbatim in a temporary prefix
 * (tests/install_check.sh says what it checks), and every C program in the
 * README compiles and runs. */
#include <stdlib.h>
#include <unistd.h>
#include "test_util.h"

Test(install, readme_install_path_works_verbatim_in_a_temp_prefix, .timeout = 600) {
    char dir[] = "/tmp/tgrad-install-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "sh '%s/tests/install_check.sh' '%s' '%s' > '%s/check.log' 2>&1", TG_SRC_DIR, TG_SRC_DIR,
             dir, dir);
    int rc = system(cmd);
    if (rc != 0) {
        snprintf(cmd, sizeof cmd, "cat '%s/check.log'", dir);
        cr_expect_eq(system(cmd), 0);
    }
    cr_assert_eq(rc, 0, "tests/install_check.sh failed: see %s/check.log", dir);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0);
}

/* Every C program in README.md compiles against the library and runs. */
Test(install, readme_programs_compile_and_run, .timeout = 300) {
    char dir[] = "/tmp/tgrad-readme-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && awk '/^```c$/{n++; f=sprintf(\"prog%%d.c\", n); on=1; next} /^```$/{on=0} on{print > f}' "
             "'%s/README.md' && ls prog*.c | wc -l > count.txt",
             dir, TG_SRC_DIR);
    cr_assert_eq(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "test $(cat '%s/count.txt') -ge 2", dir);
    cr_expect_eq(system(cmd), 0, "README.md should hold at least two C programs");
    snprintf(cmd, sizeof cmd,
             "cd '%s' && for p in prog*.c; do cc -std=c11 -Wall -Wextra -Wpedantic %s -I'%s/src' \"$p\" "
             "'%s/%s' %s -lm -pthread -o \"${p%%.c}\" >> cc.log 2>&1 && ./\"${p%%.c}\" >> run.log 2>&1 "
             "|| { echo \"$p failed\"; cat cc.log run.log; exit 1; }; done",
             dir, sizeof(tg_real) == 8 ? "-DTG_DOUBLE" : "", TG_SRC_DIR, TG_SRC_DIR, TG_LIB, TG_LDFLAGS);
    cr_expect_eq(system(cmd), 0, "a README program failed; see %s", dir);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0);
}

/* The libraries export exactly what the public headers declare: no
 * kernel or op internal (tg__*) can be linked to, no test hook is inside,
 * and nothing declared is missing (tools/exports.sh lists the
 * declarations). */
Test(install, exported_symbols_are_exactly_the_declared_ones, .timeout = 120) {
    char dir[] = "/tmp/tgrad-exports-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    const char *so = sizeof(tg_real) == 8 ? "libtgrad-double.so" : "libtgrad.so";
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && sh tools/exports.sh cc '-std=c11 -D_POSIX_C_SOURCE=200809L -Isrc %s' > '%s/declared' && "
             "nm -D --defined-only '%s/%s' | awk '{print $3}' | sort -u > '%s/shared' && "
             "nm -g --defined-only '%s' | awk 'NF == 3 {print $3}' | sort -u > '%s/static' && "
             "diff '%s/declared' '%s/shared' > '%s/shared.diff' && diff '%s/declared' '%s/static' > '%s/static.diff'",
             TG_SRC_DIR, sizeof(tg_real) == 8 ? "-DTG_DOUBLE" : "", dir, TG_BUILD_DIR, so, dir, TG_LIB, dir, dir, dir,
             dir, dir, dir, dir);
    int rc = system(cmd);
    snprintf(cmd, sizeof cmd, "cat '%s/shared.diff' '%s/static.diff' 2> /dev/null | head -20", dir, dir);
    if (rc != 0) cr_expect_eq(system(cmd), 0);
    cr_assert_eq(rc, 0, "the exported set differs from the declared one (< declared only, > exported only): %s", dir);
    snprintf(cmd, sizeof cmd, "test $(wc -l < '%s/declared') -gt 300 && ! grep -q '^tg__' '%s/shared'", dir, dir);
    cr_expect_eq(system(cmd), 0, "fewer than 300 declarations, or a test hook exported");
    /* Test hooks are not even inside (compiled only with TG_TEST_HOOKS into
     * the tests' library): no fake-load switch, no fault variable. */
    snprintf(cmd, sizeof cmd,
             "! nm '%s' | grep -q tg__parallel_fake_load && ! grep -q -a -e TG_DIST_FAULT -e TG_DIST_SLOW_LEAD '%s' && "
             "nm '%s/libtgrad-internal.a' | grep -q 'T tg__parallel_fake_load'",
             TG_LIB, TG_LIB, TG_BUILD_DIR);
    cr_expect_eq(system(cmd), 0, "a test hook is compiled into %s (or missing from the tests' library)", TG_LIB);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0);
}
