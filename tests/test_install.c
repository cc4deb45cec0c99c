/* `make install PREFIX=...` installs the library, the headers and a
 * pkg-config file, and a program compiles against the installed copy with
 * `pkg-config --cflags --libs tgrad` and runs. */
#include <stdlib.h>
#include <unistd.h>
#include "test_util.h"

Test(install, pkg_config_builds_a_program_against_the_installed_library, .timeout = 300) {
    char dir[] = "/tmp/tgrad-install-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char cmd[2048];
    /* A fresh build directory of its own, so it cannot race the suite's build. */
    snprintf(cmd, sizeof cmd,
             "cd '%s' && env -u MAKEFLAGS -u MAKELEVEL make -s install PREFIX='%s/prefix' "
             "BUILD='%s/build' DOUBLE=0 SANITIZE=0 > '%s/make.log' 2>&1",
             TG_SRC_DIR, dir, dir, dir);
    cr_assert_eq(system(cmd), 0, "make install failed: see %s/make.log", dir);
    snprintf(cmd, sizeof cmd,
             "cat > '%s/prog.c' <<'EOF'\n"
             "#include <tgrad.h>\n"
             "int main(void) {\n"
             "    tg_tensor *x = tg_from_array(TG_SHAPE(3), (tg_real[]){1, 2, 3});\n"
             "    tg_set_requires_grad(x, true);\n"
             "    tg_scope_begin();\n"
             "    tg_tensor *y = tg_sum_all(tg_mul(x, x));\n"
             "    tg_backward(y);\n"
             "    tg_print(x->grad);\n"
             "    tg_scope_end();\n"
             "    tg_free(x);\n"
             "    return 0;\n"
             "}\n"
             "EOF\n"
             "cd '%s' && export PKG_CONFIG_PATH='%s/prefix/lib/pkgconfig' && "
             "cc -std=c11 prog.c $(pkg-config --cflags --libs --static tgrad) -o prog > cc.log 2>&1 && "
             "LD_LIBRARY_PATH='%s/prefix/lib' ./prog > out.txt",
             dir, dir, dir, dir);
    cr_assert_eq(system(cmd), 0, "compiling against the installed copy failed: see %s/cc.log", dir);
    snprintf(cmd, sizeof cmd, "grep -q 'tensor(\\[2.0000, 4.0000, 6.0000\\]' '%s/out.txt'", dir);
    cr_expect_eq(system(cmd), 0, "unexpected output in %s/out.txt", dir);
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
             "'%s/%s/libtgrad.a' %s -lm -fopenmp -o \"${p%%.c}\" >> cc.log 2>&1 && ./\"${p%%.c}\" >> run.log 2>&1 "
             "|| { echo \"$p failed\"; cat cc.log run.log; exit 1; }; done",
             dir, sizeof(tg_real) == 8 ? "-DTG_DOUBLE" : "", TG_SRC_DIR, TG_SRC_DIR, TG_BUILD_DIR, TG_LDFLAGS);
    cr_expect_eq(system(cmd), 0, "a README program failed; see %s", dir);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0);
}
