/* Each example program and tool, run briefly: exit codes, what it prints,
 * and the files it writes (PNGs that open, checkpoints that load back). */
#include <float.h>
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
    cr_expect_eq(run("reverse", "--load run/reverse_learned.safetensors --dim 8"), 2, "--dim is the file's: %s", out);

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

/* ---- lm: a GPT on the committed fortunes excerpt, tiny so it takes a second ---- */

#define LM_TINY                                                                                                     \
    "--data '" TG_SRC_DIR "/tests/data/fortunes_excerpt.txt' --steps 20 --batch 4 --block 32 --layers 2 --heads 2 " \
    "--dim 32 --eval-every 10 --eval-batches 4 --tokens 40 --dropout 0.1"

/* The last line of out. */
static const char *last_line(void) {
    size_t n = strlen(out);
    while (n > 0 && out[n - 1] == '\n') n--;
    size_t i = n;
    while (i > 0 && out[i - 1] != '\n') i--;
    static char line[256];
    snprintf(line, sizeof line, "%.*s", (int)(n - i), out + i);
    return line;
}

Test(examples, lm_trains_samples_and_resumes, .timeout = 300) {
    cr_assert_eq(run("lm", LM_TINY " --out run"), 0, "%s", out);
    double v = 0;
    char unit[32] = "";
    cr_expect_eq(sscanf(last_line(), "val_loss=%lf nats/%31s", &v, unit), 2, "last line: %s", last_line());
    cr_expect_str_eq(unit, "byte");
    cr_expect(v > 0 && v < log(256.0), "val_loss %g", v);
    cr_expect(strstr(out, "--- sample") != NULL, "%s", out);
    expect_png("run/lm_loss.png");
    expect_png("run/lm_attention.png");
    cr_expect(file_exists("run/lm.safetensors"));
    cr_expect(file_exists("run/train_state.safetensors"));
    char path[256], line[512];
    snprintf(path, sizeof path, "%s/run/metrics.jsonl", tmp);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    int lines = 0, with_val = 0;
    while (fgets(line, sizeof line, f)) {
        lines++;
        with_val += strstr(line, "\"val_loss\": null") == NULL;
        cr_expect(strstr(line, "\"grad_norm\": ") && strstr(line, "\"tokens_per_s\": ") && strstr(line, "\"lr\": "),
                  "%s", line);
    }
    fclose(f);
    cr_expect_eq(lines, 20);
    cr_expect_eq(with_val, 2, "validation at steps 10 and 20");

    /* Samples from the checkpoint it wrote; the same seed gives the same text. */
    cr_assert_eq(run("lm", "--sample --load run/lm.safetensors --prompt Hello --tokens 30 --seed 3"), 0, "%s", out);
    cr_expect(strstr(out, "--- sample") && strstr(out, "\nHello"), "%s", out);
    char first[8192];
    snprintf(first, sizeof first, "%s", out);
    cr_assert_eq(run("lm", "--sample --load run/lm.safetensors --prompt Hello --tokens 30 --seed 3"), 0, "%s", out);
    cr_expect_str_eq(out, first);

    /* A user's program fine-tunes a head on the saved model, opened by one library call (tg_decoder_open). */
    cr_assert_eq(
        run("classify", "--steps 20 --data '" TG_SRC_DIR "/tests/data/fortunes_excerpt.txt' run/lm.safetensors"), 0,
        "%s", out);
    cr_expect(strstr(out, "bytes tokenizer") && strstr(out, "held-out accuracy"), "%s", out);

    /* --logits: [1, n, V] of the prompt. */
    cr_assert_eq(run("lm", "--load run/lm.safetensors --logits l.npy --prompt abcd"), 0, "%s", out);
    snprintf(path, sizeof path, "%s/l.npy", tmp);
    tg_tensor *l = tg_npy_load(path);
    TG_REQUIRE(l);
    cr_expect(l->ndim == 3 && l->shape[0] == 1 && l->shape[1] == 4 && l->shape[2] == 256);
    tg_free(l);

    /* Half the steps, then --resume: the same final model and optimizer, bit for bit (dropout on). */
    cr_assert_eq(run("lm", LM_TINY " --out half --stop-after 10"), 0, "%s", out);
    cr_assert_eq(run("lm", "--resume half/train_state.safetensors --out half"), 0, "%s", out);
    cr_expect(strstr(out, "resumed half at step 10") != NULL, "%s", out);
    cr_expect(strncmp(last_line(), "val_loss=", 9) == 0, "%s", out);
    expect_same_tensors("run/train_state.safetensors", "half/train_state.safetensors");
    expect_same_tensors("run/lm.safetensors", "half/lm.safetensors");
    /* A finished run does not resume. */
    cr_expect_eq(run("lm", "--resume run/train_state.safetensors --out run"), 1, "%s", out);
}

/* --accum 2 of batch 2 draws the same windows as one batch of 4 (window i of
 * the run from generator index i) and averages the same gradient. */
Test(examples, lm_accumulation_equals_the_larger_batch, .timeout = 120) {
    const char *common = "--data '" TG_SRC_DIR "/tests/data/fortunes_excerpt.txt' --steps 6 --block 16 --layers 1 "
                         "--heads 2 --dim 16 --eval-every 3 --tokens 0";
    char args[1024], first[256];
    /* The same 16 validation windows: --eval-batches counts batches of --batch. */
    snprintf(args, sizeof args, "%s --batch 4 --eval-batches 4 --out a", common);
    cr_assert_eq(run("lm", args), 0, "%s", out);
    snprintf(first, sizeof first, "%s", last_line());
    snprintf(args, sizeof args, "%s --batch 2 --accum 2 --eval-batches 8 --out b", common);
    cr_assert_eq(run("lm", args), 0, "%s", out);
    cr_expect(strstr(out, "batch 2 x 2 accum") != NULL, "%s", out);
    cr_expect_str_eq(last_line(), first);
}

/* The bench's GPT workload writes what bench/gpt_interop.py compares with PyTorch. */
Test(examples, bench_gpt_writes_init_and_losses, .timeout = 120) {
    cr_assert_eq(run("bench", "--workload gpt-mini --steps 2 --warmup 1 --text '" TG_SRC_DIR
                              "/tests/data/fortunes_excerpt.txt' --save-init init.safetensors --losses l.txt"),
                 0, "%s", out);
    cr_expect(strstr(out, "ms_per_step=") != NULL, "%s", out);
    char path[256];
    snprintf(path, sizeof path, "%s/init.safetensors", tmp);
    tg_safetensors st;
    cr_assert_eq(tg_safetensors_open(path, &st), 0, "%s", tg_last_error());
    cr_expect_geq(tg_safetensors_find(&st, "lm_head.weight"), 0);
    cr_expect_geq(tg_safetensors_find(&st, "transformer.h.1.mlp.c_proj.weight"), 0);
    tg_safetensors_close(&st);
    snprintf(path, sizeof path, "%s/l.txt", tmp);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    double l[4];
    int n = 0;
    while (n < 4 && fscanf(f, "%lf", &l[n]) == 1) n++;
    fclose(f);
    cr_expect_eq(n, 3, "one loss per step, warm-up included");
    cr_expect(fabs(l[0] - log(256.0)) < 0.1, "first loss %g is about ln 256 (N(0, 0.02) init)", l[0]);
    cr_expect_eq(run("bench", "--workload gpt-mini --steps 2 --text missing.txt"), 1, "%s", out);
    cr_expect(strstr(out, "missing.txt") != NULL, "%s", out);
}

/* bench --profile: the profiler's table of the timed steps (src/tensor/profile.h);
 * --profile without a workload, and gpt2's --batch elsewhere, are usage errors. */
Test(examples, bench_profile_prints_the_table, .timeout = 120) {
    cr_assert_eq(run("bench", "--workload toy --steps 2 --warmup 1 --profile"), 0, "%s", out);
    cr_expect(strstr(out, "| affine | backward | 9 |") != NULL, "%s", out);
    cr_expect(strstr(out, "| step | optimizer | 1 |") != NULL, "%s", out);
    cr_expect(strstr(out, "on one thread (ops and regions):") != NULL, "%s", out);
    cr_expect_eq(run("bench", "--profile"), 2, "%s", out);
    cr_expect_eq(run("bench", "--workload toy --batch 2"), 2, "%s", out);
}

/* bench --precision (bf16 is refused by the double build, where the suite
 * runs) and inspect --convert (a checkpoint rewritten as BF16, read back). */
Test(examples, bench_precision_and_inspect_convert, .timeout = 120) {
    cr_expect_eq(run("bench", "--workload gemm-64 --precision fp16"), 2, "%s", out);
    cr_expect(strstr(out, "--precision") != NULL, "%s", out);
    int rc = run("bench", "--workload gemm-64 --steps 2 --warmup 0 --precision bf16");
    if (sizeof(tg_real) == 8) {
        cr_expect_eq(rc, 1, "%s", out);
        cr_expect(strstr(out, "double build") != NULL, "%s", out);
    } else {
        cr_expect_eq(rc, 0, "%s", out);
        cr_expect(strstr(out, "precision=bf16") != NULL, "%s", out);
    }
    cr_assert_eq(run("bench", "--workload gpt-mini --steps 1 --warmup 0 --text '" TG_SRC_DIR
                              "/tests/data/fortunes_excerpt.txt' --save-init init.safetensors"),
                 0, "%s", out);
    cr_expect_eq(run("inspect", "init.safetensors --convert half.safetensors --dtype BF16"), 0, "%s", out);
    cr_expect(strstr(out, "wrote half.safetensors as BF16") != NULL, "%s", out);
    cr_expect_eq(run("inspect", "half.safetensors"), 0, "%s", out);
    cr_expect(strstr(out, "lm_head.weight                           BF16 (256,128)") != NULL, "%s", out);
    /* The copy keeps the metadata (it was dropped): the model file describes itself, so lm samples it. */
    cr_expect(strstr(out, "model_type = decoder") && strstr(out, "n_layer = "), "%s", out);
    cr_expect_eq(run("lm", "--sample --load half.safetensors --tokens 4"), 0, "%s", out);
    cr_expect_eq(run("inspect", "init.safetensors --convert bad.safetensors --dtype I8"), 1, "%s", out);
    cr_expect(strstr(out, "'I8'") != NULL && !file_exists("bad.safetensors"), "%s", out);
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

/* tokenize: train a vocabulary, encode into a token file that token_data
 * opens, decode back to the same bytes; commands' own flags and errors. */
Test(examples, tokenize_trains_encodes_and_decodes_back) {
    const char *text = TG_SRC_DIR "/tests/data/fortunes_excerpt.txt";
    char args[1024];
    snprintf(args, sizeof args, "train --vocab-size 400 '%s' -o v.tiktoken", text);
    cr_assert_eq(run("tokenize", args), 0, "%s", out);
    cr_expect(strstr(out, "trained 400 ids") != NULL, "%s", out);
    snprintf(args, sizeof args, "encode --vocab v.tiktoken '%s' -o t.npy", text);
    cr_assert_eq(run("tokenize", args), 0, "%s", out);
    cr_expect(strstr(out, "MB/s") != NULL, "%s", out);
    char path[256];
    snprintf(path, sizeof path, "%s/t.npy", tmp);
    tg_token_data *d = tg_token_data_open(path, 0, 1);
    cr_assert_not_null(d, "%s", tg_last_error());
    cr_expect(d->n > 1000 && d->n < 8010 && d->vocab <= 400, "%lld tokens, vocab %d", (long long)d->n, d->vocab);
    tg_token_data_close(d);
    cr_assert_eq(run("tokenize", "decode --vocab v.tiktoken t.npy -o back.txt"), 0, "%s", out);
    snprintf(args, sizeof args, "cmp '%s' '%s/back.txt'", text, tmp);
    cr_expect_eq(system(args), 0, "decode(encode(text)) differs from the text");
    /* inspect reads the token file (uint16 here) and the vocabulary. */
    cr_assert_eq(run("inspect", "t.npy"), 0, "%s", out);
    cr_expect(strstr(out, "t.npy: token file,") && strstr(out, "(uint16)"), "%s", out);
    cr_assert_eq(run("inspect", "v.tiktoken"), 0, "%s", out);
    cr_expect(strstr(out, "v.tiktoken: BPE vocabulary, 400 ids"), "%s", out);
    /* The token file is tied to its vocabulary (it was not, and another one decoded it to garbage). */
    snprintf(args, sizeof args, "train --vocab-size 300 '%s' -o w.tiktoken", text);
    cr_assert_eq(run("tokenize", args), 0, "%s", out);
    cr_expect_eq(run("tokenize", "decode --vocab w.tiktoken t.npy -o wrong.txt"), 1, "%s", out);
    cr_expect(strstr(out, "t.npy was made with the bpe tokenizer of 400 ids") &&
                  strstr(out, "not this bpe tokenizer of 300"),
              "%s", out);
    /* An empty text encodes to a token file that decodes back to the empty text (decode refused it). */
    snprintf(path, sizeof path, "%s/empty.txt", tmp);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fclose(f);
    cr_assert_eq(run("tokenize", "encode --vocab v.tiktoken empty.txt -o e.npy"), 0, "%s", out);
    cr_expect_eq(run("tokenize", "decode --vocab v.tiktoken e.npy -o e.txt"), 0, "%s", out);
    snprintf(args, sizeof args, "test -f '%s/e.txt' && ! test -s '%s/e.txt'", tmp, tmp);
    cr_expect_eq(system(args), 0, "decode of an empty token file writes an empty text");
    cr_expect_eq(run("tokenize", "encode --vocab missing.tiktoken x.txt -o t.npy"), 1);
    cr_expect(strstr(out, "bpe_load_tiktoken: missing.tiktoken") != NULL, "%s", out);
    cr_expect_eq(run("tokenize", "train --vocab-size 10 x.txt -o v"), 2, "%s", out);
    cr_expect_eq(run("tokenize", "encode x.txt"), 2, "%s", out);
    cr_expect_eq(run("tokenize", "frobnicate"), 2, "%s", out);
    cr_expect_eq(run("tokenize", "encode --help"), 0, "%s", out);
    cr_expect(strstr(out, "--vocab") != NULL, "%s", out);
}

/* tgrad-inspect shows every file an lm run writes: the checkpoint's tensors
 * and metadata, the uint8 token file, the metrics log and the samples. */
Test(examples, inspect_reads_every_file_of_a_run, .timeout = 120) {
    cr_assert_eq(run("lm", LM_TINY " --out ins"), 0, "%s", out);
    cr_assert_eq(run("inspect", "ins/lm.safetensors"), 0, "%s", out);
    cr_expect(strstr(out, "transformer.wte.weight") && strstr(out, "metadata:\n") && strstr(out, "  n_layer = 2\n") &&
                  strstr(out, "  tokenizer = bytes\n"),
              "%s", out);
    cr_assert_eq(run("inspect", "ins/train_state.safetensors"), 0, "%s", out);
    cr_expect(strstr(out, "  step = 20\n") && strstr(out, "optim."), "%s", out);
    cr_assert_eq(run("inspect", "ins/tokens.npy"), 0, "%s", out);
    cr_expect(strstr(out, "ins/tokens.npy: token file,") && strstr(out, "(uint8)"), "%s", out);
    cr_assert_eq(run("inspect", "ins/metrics.jsonl"), 0, "%s", out);
    cr_expect(strstr(out, "metrics log, 20 lines, steps 1..20") && strstr(out, "2 evaluations, best val_loss"), "%s",
              out);
    cr_assert_eq(run("inspect", "ins/samples.jsonl"), 0, "%s", out);
    cr_expect(strstr(out, "ins/samples.jsonl: 2 lines; the last: {\"step\": 20"), "%s", out);
    cr_expect_eq(run("inspect", "ins/metrics.jsonl --convert x.safetensors"), 2, "%s", out);
    cr_expect_eq(run("inspect", "missing.npy"), 1, "%s", out);
    /* plot_runs draws the run's curves, a second run named beside it */
    cr_expect_eq(run("plot_runs", "ins ins --labels a,b --out curves.png"), 0, "%s", out);
    expect_png("curves.png");
    cr_expect_eq(run("plot_runs", "ins --labels a,b"), 2, "%s", out);
    cr_expect(strstr(out, "--labels: 2 names for 1 runs"), "%s", out);
    cr_expect_eq(run("plot_runs", "missing"), 1, "%s", out);
    cr_expect(strstr(out, "missing/metrics.jsonl"), "%s", out);
}

Test(examples, every_program_has_help_and_rejects_bad_flags) {
    const char *progs[] = {
        "positional_encoding", "attention_basics", "reverse", "inspect", "heatmap", "extrapolate", "lm", "tokenize",
        "plot_runs",           "pool_costs",       "classify"};
    for (int i = 0; i < (int)(sizeof progs / sizeof progs[0]); i++) {
        cr_expect_eq(run(progs[i], "--help"), 0, "%s --help", progs[i]);
        cr_expect(strstr(out, "usage:") != NULL, "%s --help prints usage: %s", progs[i], out);
        /* A bad flag: the refusal and a pointer to --help, not the whole usage under it. */
        cr_expect_eq(run(progs[i], "--no-such-flag"), 2, "%s with a bad flag", progs[i]);
        cr_expect(strstr(out, "'--no-such-flag'") && strstr(out, "run with --help for usage"),
                  "%s: refusal and hint on a bad flag: %s", progs[i], out);
        cr_expect(!strstr(out, "usage:") && !strstr(out, "options:"), "%s: no usage on a bad flag: %s", progs[i], out);
        int lines = 0;
        for (const char *c = out; *c; c++) lines += *c == '\n';
        cr_expect_leq(lines, 2, "%s: a bad flag prints two lines, not %d: %s", progs[i], lines, out);
    }
    cr_expect_eq(run("reverse", "--steps abc"), 2);
    /* Numbers are decimal and nothing else (strtod took all of these), in the examples and the tools alike. */
    static const char *const not_numbers[] = {"--steps 0x10", "--steps ' 5'", "--steps 1e3",      "--lr inf",
                                              "--lr nan",     "--lr 0x1p-10", "--dropout ' 0.1'", "--lr 1e"};
    for (size_t i = 0; i < sizeof not_numbers / sizeof *not_numbers; i++) {
        cr_expect_eq(run("reverse", not_numbers[i]), 2, "reverse %s", not_numbers[i]);
        cr_expect(strstr(out, "is not a valid"), "reverse %s: %s", not_numbers[i], out);
    }
    cr_expect_eq(run("bench", "--steps 0x10"), 2);
    /* TG_ISA caps the kernels (the result is the same), and bench says which ran. */
    cr_assert_eq(run_wrapped("TG_ISA=portable", "bench", "--workload gemm-64 --steps 10"), 0, "%s", out);
    cr_expect(strstr(out, " isa=portable\n"), "%s", out);
    cr_assert_eq(run_wrapped("TG_ISA=sse9", "bench", "--workload gemm-64 --steps 10"), 0, "%s", out);
    cr_expect(strstr(out, "TG_ISA=sse9 is not portable, avx2, avx512, avx512_bf16 or amx; ignored"), "%s", out);
    /* Flags a mode would ignore are refused. */
    cr_expect_eq(run("bench", "--workload toy --markdown /nonexistent/x.md"), 2);
    cr_expect(strstr(out, "--markdown is for the full comparison"), "%s", out);
    cr_expect_eq(run("bench", "--workload gemm-64 --only toy"), 2);
    /* The gpt workloads' flags, given to another workload (they were ignored). */
    cr_expect_eq(run("bench", "--workload toy --save-init x.safetensors"), 2, "%s", out);
    cr_expect(strstr(out, "--save-init is for the gpt workloads, not toy"), "%s", out);
    cr_expect_eq(run("bench", "--workload toy --losses l.txt"), 2, "%s", out);
    cr_expect_eq(run("bench", "--workload gemm-64 --text t.txt"), 2, "%s", out);
    cr_expect_eq(run("bench", "--check-determinism --python /bin/false"), 2);
    cr_expect_eq(run("heatmap", "x.npy --tensor w"), 2);
    cr_expect(strstr(out, "--tensor names a tensor of a safetensors file"), "%s", out);
    cr_expect_eq(run("heatmap", "x.npy --index ' 3'"), 2);
    /* --help after other flags shows the defaults, not the values parsed so far. */
    cr_expect_eq(run("reverse", "--dim 8 --help"), 0);
    cr_expect(strstr(out, "model width d (default 64)"), "%s", out);
    cr_expect_eq(run("lm", "--steps 7 --help"), 0);
    cr_expect(!strstr(out, "(default 7)"), "%s", out);
    /* A bad combination (cli_usage_error) is one line and the hint too. */
    cr_expect_eq(run("reverse", "--dim 30 --heads 4"), 2);
    cr_expect(strstr(out, "run with --help for usage") && !strstr(out, "options:"), "%s", out);
    cr_expect_eq(run("reverse", "--pe sometimes"), 2);
    cr_expect_eq(run("reverse", "--dim 30 --heads 4"), 2);
    cr_expect_eq(run("positional_encoding", "--dim -1"), 2);
    cr_expect_eq(run("inspect", ""), 2);
    cr_expect_eq(run("heatmap", "x.npy --cmap nope"), 2);
    cr_expect_eq(run("inspect", "missing.safetensors"), 1);
    cr_expect_eq(run("lm", "--dim 30 --heads 4"), 2);
    cr_expect_eq(run("lm", "--gelu relu"), 2);
    cr_expect_eq(run("lm", "--sample"), 2, "--sample needs --load");
    cr_expect_eq(run("lm", "--layers 21"), 2);
    cr_expect_eq(run("lm", "--sample --load missing.safetensors"), 1);
    cr_expect(strstr(out, "missing.safetensors") != NULL, "%s", out);
}

/* A copy of src (in tmp) with every value of tensor `name` set to the
 * largest finite value of its dtype: a checkpoint any load accepts whose
 * products overflow. */
static void write_overflowing_copy(const char *src, const char *name, const char *dst) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", tmp, src);
    tg_safetensors st;
    cr_assert_eq(tg_safetensors_open(path, &st), 0, "%s", tg_last_error());
    int i = tg_safetensors_find(&st, name);
    cr_assert_geq(i, 0, "%s has no %s", src, name);
    unsigned char *copy = malloc(st.blob_size);
    cr_assert_not_null(copy);
    memcpy(copy, st.blob, st.blob_size);
    unsigned char *at = copy + (st.data - st.blob) + st.entries[i].begin;
    for (int64_t k = 0; k < st.entries[i].numel; k++) {
        if (strcmp(st.entries[i].dtype, "F32") == 0) memcpy(at + 4 * k, &(float){FLT_MAX}, 4);
        if (strcmp(st.entries[i].dtype, "F64") == 0) memcpy(at + 8 * k, &(double){DBL_MAX}, 8);
    }
    snprintf(path, sizeof path, "%s/%s", tmp, dst);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(copy, 1, st.blob_size, f), st.blob_size);
    fclose(f);
    free(copy);
    tg_safetensors_close(&st);
}

/* --logits refuses logits that are not finite (it wrote inf/NaN and exited
 * 0), and the printed sample escapes control bytes (a prompt's ESC and CR
 * reached the terminal raw). */
Test(examples, lm_refuses_nonfinite_logits_and_escapes_control_bytes, .timeout = 300) {
    cr_assert_eq(run("lm", LM_TINY " --steps 2 --out ctl"), 0, "%s", out);
    cr_assert_eq(run("lm", "--load ctl/lm.safetensors --logits ok.npy --prompt ab"), 0, "%s", out);
    /* the last LayerNorm's gain: any normalised entry above 1 overflows */
    write_overflowing_copy("ctl/lm.safetensors", "transformer.ln_f.weight", "huge.safetensors");
    cr_expect_eq(run("lm", "--load huge.safetensors --logits bad.npy --prompt ab"), 1, "%s", out);
    cr_expect(strstr(out, "is not finite") || strstr(out, "weights overflow"), "%s", out);
    char path[256];
    snprintf(path, sizeof path, "%s/bad.npy", tmp);
    cr_expect_neq(access(path, F_OK), 0, "no logits file is written");
    cr_assert_eq(run("lm", "--sample --load ctl/lm.safetensors --tokens 4 --prompt \"$(printf 'a\\033[2Jb\\rc')\""), 0,
                 "%s", out);
    cr_expect(!strchr(out, '\033') && !strchr(out, '\r'), "raw control bytes in the sample: %s", out);
    cr_expect(strstr(out, "a\\x1b[2Jb\\x0dc"), "the prompt's ESC and CR escaped: %s", out);
}

/* lm --pe: the decoder with a position kind inside attention trains, its
 * checkpoint names the kind, and --sample rebuilds the same model from it. */
Test(examples, lm_with_relative_positions, .timeout = 300) {
    cr_assert_eq(run("lm", LM_TINY " --steps 4 --pe relative --out rel"), 0, "%s", out);
    cr_assert_eq(run("lm", "--sample --load rel/lm.safetensors --tokens 8"), 0, "%s", out);
    char path[256];
    snprintf(path, sizeof path, "%s/rel/lm.safetensors", tmp);
    tg_safetensors st;
    cr_assert_eq(tg_safetensors_open(path, &st), 0, "%s", tg_last_error());
    char v[32];
    cr_expect(tg_safetensors_meta(&st, "pe", v, sizeof v) > 0 && strcmp(v, "relative") == 0);
    cr_expect_geq(tg_safetensors_find(&st, "transformer.h.0.attn.relative_k"), 0);
    cr_expect_lt(tg_safetensors_find(&st, "transformer.wpe.weight"), 0, "no absolute table");
    tg_safetensors_close(&st);
    cr_expect_eq(run("lm", "--pe sometimes"), 2);
}
