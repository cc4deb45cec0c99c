/* Files (io/file.c): a failed save leaves the old file and no temporary;
 * temporaries are exclusive and unique; reads refuse what is not a regular
 * file before blocking on it. */
#include "io_test_util.h"

TestSuite(file, .fini = cleanup);

Test(file, failed_save_leaves_old_file)
{
    tmpdir();
    model m;
    model_new(&m, 1.0);
    const char *path = in_dir("m.safetensors");
    cr_assert_eq(tg_checkpoint_save(path, &m.p, NULL), 0);
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

