/* Each example program and tool, run briefly: exit codes, what it prints,
 * and the files it writes (PNGs that open, checkpoints that load back). */
#include <stb/stb_image.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include "program_util.h"

static void setup(void) { make_tmp("examples"); }
TestSuite(examples, .init = setup, .fini = remove_tmp);

/* Runs build/.../bin/<prog> with args; returns its exit code, output in out. */
static int run(const char *prog, const char *args) { return run_wrapped("", prog, args); }

static void expect_png(const char *name) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", tmp, name);
    int w = 0, h = 0, c = 0;
    unsigned char *img = stbi_load(path, &w, &h, &c, 3);
    cr_expect_not_null(img, "%s does not open as an image", name);
    cr_expect(w >= 200 && h >= 150, "%s is %dx%d", name, w, h);
    stbi_image_free(img);
}

static bool file_exists(const char *name) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", tmp, name);
    return access(path, F_OK) == 0;
}

Test(examples, positional_encoding) {
    cr_assert_eq(run("positional_encoding", "--out figs"), 0, "%s", out);
    cr_expect(strstr(out, "7 in binary is 111") != NULL, "%s", out);
    expect_png("figs/pe_heatmap.png");
    expect_png("figs/pe_columns.png");
    expect_png("figs/pe_similarity.png");
}

Test(examples, attention_basics) {
    cr_assert_eq(run("attention_basics", "--out figs"), 0, "%s", out);
    cr_expect(strstr(out, "shape = (2, 4, 100)") != NULL, "%s", out);
    cr_expect(strstr(out, "0.9918, -1.9918,  3.0027, -4.0009") != NULL, "example 1 output: %s", out);
    expect_png("figs/attention_example1.png");
    expect_png("figs/attention_example2.png");
}

Test(examples, reverse_trains_saves_and_loads, .timeout = 600) {
    cr_assert_eq(run("reverse", "--steps 20 --eval-every 10 --heldout 40 --batch 16 --out run"), 0, "%s", out);
    cr_expect(strstr(out, "fixed") && strstr(out, "learned") && strstr(out, "none"), "%s", out);
    cr_expect(strstr(out, "token acc") != NULL, "%s", out);
    expect_png("run/reverse_loss.png");
    expect_png("run/reverse_attention_fixed.png");
    expect_png("run/reverse_attention_none.png");
    expect_png("run/reverse_pe_tables.png");
    cr_assert(file_exists("run/reverse_fixed.safetensors"));

    /* Loads back and evaluates. */
    cr_expect_eq(run("reverse", "--load run/reverse_learned.safetensors --heldout 20"), 0, "%s", out);
    cr_expect(strstr(out, "learned PE): held-out token accuracy") != NULL, "%s", out);

    /* A truncated checkpoint is rejected with a message, not a crash. */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "head -c 3000 '%s/run/reverse_fixed.safetensors' > '%s/run/cut.safetensors'", tmp, tmp);
    cr_assert_eq(system(cmd), 0);
    cr_expect_eq(run("reverse", "--load run/cut.safetensors"), 1, "%s", out);
    cr_expect(strstr(out, "cut.safetensors") != NULL, "message names the file: %s", out);

    /* The tools read the checkpoint. */
    cr_expect_eq(run("inspect", "run/reverse_fixed.safetensors"), 0, "%s", out);
    cr_expect(strstr(out, "encoder.blocks.1.ffn.dense2.weight") != NULL, "%s", out);
    cr_expect_eq(run("heatmap", "run/reverse_fixed.safetensors --tensor encoder.embedding.weight --out emb.png"), 0,
                 "%s", out);
    expect_png("emb.png");
}

Test(examples, sort_task) {
    cr_assert_eq(run("reverse", "--task sort --pe fixed --steps 10 --heldout 20 --batch 8 --out run"), 0, "%s", out);
    cr_expect(strstr(out, "sort task") != NULL, "%s", out);
    expect_png("run/sort_loss.png");
}

Test(examples, compare_layers_quick, .timeout = 300) {
    cr_assert_eq(run("compare_layers", "--quick --out cmp"), 0, "%s", out);
    const char *kinds[] = {"cnn", "rnn", "gru", "attention", "attention-stored", "mha"};
    for (int i = 0; i < 6; i++) {
        char key[64], name[32];
        snprintf(key, sizeof key, "\nlayer=%s ", kinds[i]);
        const char *line = strstr(out, key);
        cr_assert_not_null(line, "no line for %s: %s", kinds[i], out);
        double a;
        int lo, hi, s1, n1, s2, n2, l, ln;
        cr_expect_eq(
            sscanf(line + 1,
                   "layer=%31s time_exponent=%lf (n %d..%d) sequential_ops=%d@%d,%d@%d max_path_layers@n=%d@%d", name,
                   &a, &lo, &hi, &s1, &n1, &s2, &n2, &l, &ln),
            10, "%s", line);
        cr_expect(l >= 1, "%s reaches x_0 after %d layers", kinds[i], l);
    }
    cr_expect(file_exists("cmp/compare_layers.txt"));
    expect_png("cmp/compare_time.png");
    expect_png("cmp/compare_paths.png");
    expect_png("cmp/compare_learning.png");
    expect_png("cmp/compare_table.png");
    cr_expect_eq(run("compare_layers", "--no-such-flag"), 2);
}

/* A tiny extrapolate run: one line per task and kind in the documented
 * form, a dash where the learned table cannot run, the five figures. */
Test(examples, extrapolate_quick, .timeout = 600) {
    cr_assert_eq(
        run("extrapolate", "--steps 20 --batch 8 --heldout 4 --dim 16 --heads 2 --ffn 16 --layers 1 --out ext"), 0,
        "%s", out);
    static const char *const tasks[] = {"shift", "reverse"};
    static const char *const pes[] = {"fixed", "learned", "none", "relative", "rope", "alibi"};
    for (int t = 0; t < 2; t++)
        for (int p = 0; p < 6; p++) {
            char key[64];
            snprintf(key, sizeof key, "task=%s pe=%s acc@16=", tasks[t], pes[p]);
            const char *line = strstr(out, key);
            cr_expect_not_null(line, "no line for %s: %s", key, out);
            if (!line) continue;
            double a16 = -1, a128 = -1;
            int n = sscanf(line + strlen(key), "%lf%% acc@32=%*s acc@64=%*s acc@128=%lf%%", &a16, &a128);
            cr_expect(a16 >= 0 && a16 <= 100, "%s %.80s", key, line);
            if (p == 1)
                cr_expect(strncmp(strstr(line, "acc@32="), "acc@32=- acc@64=- acc@128=-", 27) == 0, "%.90s", line);
            else
                cr_expect(n == 2 && a128 >= 0 && a128 <= 100, "%.90s", line);
        }
    cr_expect(strstr(out, "sequence length 32 > max_len 16") != NULL, "the library's reason for the dash: %s", out);
    expect_png("ext/extrapolate_shift.png");
    expect_png("ext/extrapolate_reverse.png");
    expect_png("ext/extrapolate_relative.png");
    expect_png("ext/extrapolate_alibi.png");
    expect_png("ext/extrapolate_rope.png");
    cr_expect_eq(run("extrapolate", "--pe sometimes"), 2);
    cr_expect_eq(run("extrapolate", "--task sort"), 2);
    cr_expect_eq(run("extrapolate", "--dim 30 --heads 4"), 2);
    cr_expect_eq(run("extrapolate", "--dim 12 --heads 4 --pe rope"), 2); /* head size 3 */
}

/* reverse with a position kind inside attention: trains, saves, loads back. */
Test(examples, reverse_with_relative_positions, .timeout = 600) {
    cr_assert_eq(run("reverse", "--pe relative --steps 5 --heldout 8 --batch 4 --dim 16 --out run"), 0, "%s", out);
    cr_expect_eq(run("reverse", "--load run/reverse_relative.safetensors --heldout 8"), 0, "%s", out);
    cr_expect(strstr(out, "relative PE") != NULL, "%s", out);
    cr_assert_eq(run("reverse", "--pe alibi --steps 3 --heldout 8 --batch 4 --dim 16 --out run"), 0, "%s", out);
    cr_expect_eq(run("reverse", "--load run/reverse_alibi.safetensors --heldout 8"), 0, "%s", out);
}

Test(examples, every_program_has_help_and_rejects_bad_flags) {
    const char *progs[] = {"positional_encoding", "attention_basics", "reverse", "inspect", "heatmap", "extrapolate"};
    for (int i = 0; i < 6; i++) {
        cr_expect_eq(run(progs[i], "--help"), 0, "%s --help", progs[i]);
        cr_expect(strstr(out, "usage:") != NULL, "%s --help prints usage: %s", progs[i], out);
        cr_expect_eq(run(progs[i], "--no-such-flag"), 2, "%s with a bad flag", progs[i]);
        cr_expect(strstr(out, "usage:") != NULL, "%s: usage on a bad flag", progs[i]);
    }
    cr_expect_eq(run("reverse", "--steps abc"), 2);
    cr_expect_eq(run("reverse", "--pe sometimes"), 2);
    cr_expect_eq(run("reverse", "--dim 30 --heads 4"), 2);
    cr_expect_eq(run("positional_encoding", "--dim -1"), 2);
    cr_expect_eq(run("inspect", ""), 2);
    cr_expect_eq(run("heatmap", "x.npy --cmap nope"), 2);
    cr_expect_eq(run("inspect", "missing.safetensors"), 1);
}
