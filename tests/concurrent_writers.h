/* Concurrent writers of one path, for the tests that atomic saves never
 * fail and never tear a file (test_file.c: checkpoints, test_viz.c:
 * figures). POSIX and Criterion only, so the viz tests, which stand apart
 * from tgrad.h as the viz layer does, can use it too. */
#ifndef TG_CONCURRENT_WRITERS_H
#define TG_CONCURRENT_WRITERS_H

#include <criterion/criterion.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* Forks `writers` processes at once; process w runs writer(w, ctx) (all its
 * rounds of saving) and exits with its status. Expects every one to have
 * returned 0. */
static inline void run_concurrent_writers(int writers, int (*writer)(int w, const void *ctx), const void *ctx) {
    enum { MAX_WRITERS = 16 };
    cr_assert(writers >= 1 && writers <= MAX_WRITERS);
    pid_t kids[MAX_WRITERS];
    for (int w = 0; w < writers; w++) {
        kids[w] = fork();
        cr_assert(kids[w] >= 0);
        if (kids[w] == 0) _exit(writer(w, ctx) == 0 ? 0 : 1);
    }
    for (int w = 0; w < writers; w++) {
        int status;
        cr_assert_eq(waitpid(kids[w], &status, 0), kids[w]);
        cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writer %d failed", w);
    }
}

#endif
