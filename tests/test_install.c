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
