/* inspect: shows any file tgrad writes.
 *   .safetensors  every tensor (name, dtype F32/F64/BF16/F16, shape, min,
 *                 max, mean), then the metadata, key by key (long values cut)
 *   .npy          an array as one such row; a token file (uint8, uint16 or
 *                 uint32, as lm and tgrad-tokenize write) as its count and ids
 *   .tiktoken     a BPE vocabulary: its size and special tokens
 *   metrics.jsonl a run's log: its steps, losses and best validation loss
 *   other .jsonl  (samples.jsonl) its lines, the last one shown
 * With --convert OUT a checkpoint is also written to OUT as --dtype (e.g. a
 * float checkpoint as bfloat16, half the bytes, or back). */
#include <math.h>
#include "cli.h"
#include "tgrad.h"

static void stats(const char *name, const char *dtype, int ndim, const int *shape, const tg_real *v, int64_t n) {
    char buf[64];
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    for (int64_t i = 0; i < n; i++) {
        lo = fmin(lo, (double)v[i]);
        hi = fmax(hi, (double)v[i]);
        sum += (double)v[i];
    }
    if (n == 0) lo = hi = 0;
    printf("%-40s %-4s %-16s %11.4g %11.4g %11.4g\n", name, dtype, tg_shape_str(buf, ndim, shape), lo, hi,
           n ? sum / (double)n : 0.0);
}

static void header(void) { printf("%-40s %-4s %-16s %11s %11s %11s\n", "name", "type", "shape", "min", "max", "mean"); }

static bool ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* The metadata of a checkpoint, key = value, a value past 100 bytes cut
 * (lm's checkpoints carry their whole vocabulary). */
static void metadata(const tg_safetensors *st) {
    char key[256], val[104];
    for (int i = 0; tg_safetensors_meta_key(st, i, key, sizeof key) >= 0; i++) {
        if (i == 0) printf("metadata:\n");
        long n = tg_safetensors_meta(st, key, val, sizeof val);
        for (char *c = val; *c; c++)
            if (*c == '\n' || *c == '\t') *c = ' ';
        if (n >= (long)sizeof val)
            printf("  %s = %.96s... (%ld bytes)\n", key, val, n);
        else
            printf("  %s = %s\n", key, val);
    }
}

/* A .npy of tokens (uint8, uint16, uint32): what tg_token_data reads. */
static int tokens(const char *path) {
    tg_token_data *d = tg_token_data_open(path, 0, 0);
    if (!d) return -1;
    printf("%s: token file, %lld tokens of %d bytes (uint%d), ids 0..%d (vocab %d)\n", path, (long long)d->n,
           d->itemsize, 8 * d->itemsize, d->vocab - 1, d->vocab);
    tg_token_data_close(d);
    return 0;
}

/* A run's metrics.jsonl: steps, first and last training loss, the
 * evaluations and the best of them. */
static int metrics(const char *path) {
    tg_metrics *m = NULL;
    int64_t n = 0, evals = 0, best = -1;
    if (tg_metrics_log_read(path, &m, &n) != 0) return -1;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(m[i].val_loss)) {
            evals++;
            if (best < 0 || m[i].val_loss < m[best].val_loss) best = i;
        }
    printf("%s: metrics log, %lld lines", path, (long long)n);
    if (n)
        printf(", steps %lld..%lld, loss %.4g -> %.4g, lr %.3g at the last", (long long)m[0].step,
               (long long)m[n - 1].step, m[0].loss, m[n - 1].loss, m[n - 1].lr);
    if (best >= 0)
        printf("; %lld evaluations, best val_loss %.4f at step %lld", (long long)evals, m[best].val_loss,
               (long long)m[best].step);
    printf("\n");
    tg_sys_free(m);
    return 0;
}

/* Any other JSON-lines file (samples.jsonl): its lines, the last shown. */
static int lines(const char *path) {
    unsigned char *b;
    size_t size, count = 0, last = 0;
    if (tg_read_file(path, "inspect", &b, &size) != 0) return -1;
    for (size_t i = 0; i < size; i++)
        if (b[i] == '\n') {
            count++;
            if (i + 1 < size) last = i + 1;
        }
    printf("%s: %zu lines; the last: %.*s%s\n", path, count, (int)(size - last > 200 ? 200 : size - last),
           (const char *)b + last, size - last > 200 ? "..." : "");
    tg_sys_free(b);
    return 0;
}

/* A BPE vocabulary in tiktoken's rank format. */
static int vocabulary(const char *path) {
    tg_bpe *b = tg_bpe_load_tiktoken(path);
    if (!b) return -1;
    printf("%s: BPE vocabulary, %d ids; <|endoftext|> is %d\n", path, tg_bpe_vocab_size(b),
           tg_bpe_special_id(b, "<|endoftext|>"));
    tg_bpe_free(b);
    return 0;
}

int main(int argc, char **argv) {
    const char *pos[1] = {NULL}, *convert = NULL, *dtype = "BF16";
    const char *synopsis = "FILE (.safetensors, .npy, .tiktoken, .jsonl)";
    cli_opt opts[] = {
        {"convert", CLI_STR, &convert, "also write every tensor of the safetensors file to this file", 0, 0},
        {"dtype", CLI_STR, &dtype, "the dtype --convert writes: F32, F64, BF16 or F16", 0, 0},
    };
    const char *about = "Shows a file tgrad writes: a checkpoint's tensors (name, dtype, shape, min, max, mean) and\n"
                        "metadata, an array or a token file, a vocabulary, a run's metrics or samples.";
    int n = cli_parse(argc, argv, synopsis, about, opts, 2, pos, 1);
    if (n != 1) return cli_usage_error(argv[0], synopsis, about, opts, 2, "give one file");
    bool st_file = !ends_with(pos[0], ".npy") && !ends_with(pos[0], ".tiktoken") && !ends_with(pos[0], ".jsonl");
    if (convert && !st_file)
        return cli_usage_error(argv[0], synopsis, about, opts, 2, "--convert writes a safetensors file's tensors");
    int rc = 0;
    if (ends_with(pos[0], ".npy")) {
        tg_tensor *t = tg_npy_load(pos[0]);
        if (t) {
            header();
            stats(pos[0], TG_REAL_DTYPE, t->ndim, t->shape, t->data, t->size);
            tg_free(t);
        } else {
            char why[512]; /* not a float array: a token file, else the array's own reason */
            snprintf(why, sizeof why, "%s", tg_last_error());
            if (tokens(pos[0]) != 0) rc = (tg_set_error("%s", why), -1);
        }
    } else if (ends_with(pos[0], ".tiktoken")) {
        rc = vocabulary(pos[0]);
    } else if (ends_with(pos[0], "metrics.jsonl")) {
        rc = metrics(pos[0]);
    } else if (ends_with(pos[0], ".jsonl")) {
        rc = lines(pos[0]);
    }
    if (!st_file) {
        if (rc != 0) fprintf(stderr, "inspect: %s\n", tg_last_error());
        return rc != 0;
    }
    tg_safetensors st;
    if (tg_safetensors_open(pos[0], &st) != 0) {
        fprintf(stderr, "inspect: %s\n", tg_last_error());
        return 1;
    }
    header();
    int64_t total = 0;
    tg_params out; /* for --convert: every tensor, in file order */
    tg_params_init(&out);
    for (int i = 0; i < st.n && rc == 0; i++) {
        const tg_st_entry *e = &st.entries[i];
        tg_tensor *t = tg_empty_persistent(e->ndim, e->shape);
        if (!t || tg_safetensors_read(&st, i, t->data) != 0 ||
            (convert && tg_params_add(&out, NULL, e->name, t) != 0)) {
            fprintf(stderr, "inspect: %s\n", tg_last_error());
            tg_free(t);
            rc = 1;
            break;
        }
        stats(e->name, e->dtype, e->ndim, e->shape, t->data, e->numel);
        total += e->numel;
        if (!convert) tg_free(t);
    }
    if (rc == 0) printf("%d tensors, %lld values\n", st.n, (long long)total);
    if (rc == 0) metadata(&st);
    if (rc == 0 && convert) {
        /* The metadata goes along as it was: a model file describes itself
         * (tg_decoder_open), so a BF16 copy of lm's model still samples. */
        char *meta = st.metadata ? strndup(st.metadata, st.metadata_len) : NULL;
        if ((st.metadata && !meta) || tg_safetensors_save_dtype(convert, &out, meta, dtype) != 0) {
            fprintf(stderr, "inspect: %s\n", meta || !st.metadata ? tg_last_error() : "out of memory");
            rc = 1;
        } else
            printf("wrote %s as %s, metadata kept\n", convert, dtype);
        free(meta);
    }
    for (int i = 0; i < out.n; i++) tg_free(out.items[i].t);
    tg_params_free(&out);
    tg_safetensors_close(&st);
    return rc;
}
