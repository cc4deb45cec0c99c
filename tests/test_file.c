/* Files (io/file.c): a failed save leaves the old file and no temporary;
 * temporaries are exclusive and unique; reads refuse what is not a regular
 * file before blocking on it. */
#include <signal.h>
#include <sys/wait.h>

#include "concurrent_writers.h"
#include "io_test_util.h"

TestSuite(file, .fini = cleanup);

Test(file, failed_save_leaves_old_file) {
    model m;
    const char *path = saved_model(&m, 1.0, NULL);
    size_t n0, n1;
    unsigned char *before = read_all(path, &n0);

    /* Into a directory that does not exist. */
    tg_clear_error();
    cr_assert_eq(tg_checkpoint_save("/nonexistent-tg-dir/m.safetensors", &m.p, NULL), -1);
    assert_error_has("checkpoint_save: /nonexistent-tg-dir/m.safetensors");

    /* A list that cannot be saved (a NULL tensor, a bad name): checked
     * before the temporary is created. */
    tg_params bad;
    tg_params_init(&bad);
    tg_params_extend(&bad, NULL, &m.p);
    bad.items[2].t = NULL;
    tg_clear_error();
    cr_assert_eq(tg_checkpoint_save(path, &bad, NULL), -1);
    assert_error_has("blocks.0.W_q.bias");
    bad.items[2].t = m.t[2];
    strcpy(bad.items[1].name, "we\"ird");
    cr_assert_eq(tg_checkpoint_save(path, &bad, NULL), -1);
    tg_params_free(&bad);

    /* The target is a directory: the rename fails after the temporary was
     * written; the temporary is removed. */
    mkdir(in_dir("adir"), 0755);
    write_all(in_dir("adir/keep"), "x", 1);
    tg_clear_error();
    cr_assert_eq(tg_checkpoint_save(in_dir("adir"), &m.p, NULL), -1);
    assert_error_has("rename");

    /* A read-only directory (not for root, who may write anyway). */
    if (geteuid() != 0) {
        chmod(g_dir, 0555);
        cr_assert_eq(tg_checkpoint_save(path, &m.p, NULL), -1);
        assert_error_has("cannot create");
        chmod(g_dir, 0755);
    } else {
        cr_log_info("running as root: read-only directory case skipped");
    }

    unsigned char *after = read_all(path, &n1);
    cr_assert_eq(n0, n1);
    cr_assert(memcmp(before, after, n0) == 0, "old checkpoint changed by a failed save");
    cr_assert_eq(temp_files(), 0, "a temporary file was left behind");
    free(before);
    free(after);
    model_free(&m);
}

/* Issue 10, defect 3: the temporary "<path>.tmp.<pid>" was opened with
 * fopen("wb"), following a symlink planted there (a save overwrote another
 * file); killed saves left their temporaries for ever. */
Test(file, temporaries_are_exclusive_and_stale_ones_removed) {
    tmpdir();
    model m;
    model_new(&m, 1.0);
    const char *path = in_dir("m.safetensors");
    char victim[256], planted[256], stale[256], live[256];
    snprintf(victim, sizeof victim, "%s", in_dir("victim.txt"));
    write_all(victim, "precious", 8);
    snprintf(planted, sizeof planted, "%s.tmp.%ld", path, (long)getpid());
    cr_assert_eq(symlink(victim, planted), 0);
    long dead = 4194303; /* beyond any pid here (checked) */
    cr_assert(kill((pid_t)dead, 0) != 0);
    snprintf(stale, sizeof stale, "%s.tmp.%ld.Xy12Zw", path, dead);
    snprintf(live, sizeof live, "%s.tmp.%ld.Xy12Zw", path, (long)getppid());
    write_all(stale, "half a save", 11);
    write_all(live, "someone else's save in progress", 31);

    cr_assert_eq(tg_checkpoint_save(path, &m.p, NULL), 0, "%s", tg_last_error());
    size_t n;
    unsigned char *v = read_all(victim, &n);
    cr_expect(n == 8 && memcmp(v, "precious", 8) == 0, "a planted symlink was followed");
    free(v);
    cr_expect_not(file_exists(stale), "a dead writer's temporary was not removed");
    cr_expect(file_exists(live), "a live writer's temporary must be left alone");
    unlink(planted);
    unlink(live);
    cr_expect_eq(temp_files(), 0);
    model_free(&m);
}

/* Writer w of the test below: a model of its own, saved 15 times. */
static int save_rounds(int w, const void *path) {
    model m;
    model_new(&m, 1.0 + w);
    int rc = 0;
    for (int r = 0; r < 15; r++) rc |= tg_checkpoint_save(path, &m.p, NULL);
    return rc;
}

/* Concurrent writers of one path: all succeed and the file is whole. */
Test(file, concurrent_saves_never_fail_or_tear) {
    tmpdir();
    const char *path = in_dir("m.safetensors");
    run_concurrent_writers(4, save_rounds, path);
    model m;
    model_new(&m, 9.0);
    cr_expect_eq(tg_checkpoint_load(path, &m.p), 0, "the file is torn: %s", tg_last_error());
    cr_expect_eq(temp_files(), 0, "concurrent writers left temporaries");
    model_free(&m);
}

/* Issue 10, defect 5: `--load FIFO` and `inspect FIFO` hung for ever, as
 * fopen ran before the regular-file check. */
Test(file, a_fifo_or_a_directory_is_refused_without_blocking, .timeout = 10) {
    tmpdir();
    const char *fifo = in_dir("pipe");
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    unsigned char *b;
    size_t n;
    cr_expect_eq(tg_read_file(fifo, "read", &b, &n), -1);
    assert_error_has("not a regular file");
    tg_safetensors st;
    cr_expect_eq(tg_safetensors_open(fifo, &st), -1);
    cr_expect_null(tg_npy_load(fifo));
    cr_expect_eq(tg_read_file(g_dir, "read", &b, &n), -1);
    assert_error_has("not a regular file");
}

/* A NULL path is an error naming the caller, for every reader. */
Test(file, a_null_path_is_refused_by_every_reader) {
    unsigned char *b;
    const unsigned char *cb;
    size_t n;
    cr_expect_eq(tg_read_file(NULL, "read", &b, &n), -1);
    assert_error_has("read: NULL path");
    cr_expect_eq(tg_map_file(NULL, "map", &cb, &n), -1);
    assert_error_has("map: NULL path");
    cr_expect_null(tg_npy_load(NULL));
    assert_error_has("npy_load: NULL path");
    cr_expect_null(tg_bpe_load_tiktoken(NULL));
    assert_error_has("bpe_load_tiktoken: NULL path");
}
