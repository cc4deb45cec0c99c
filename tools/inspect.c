/* inspect: lists the tensors of a safetensors checkpoint (or one .npy file):
 * name, dtype (F32, F64, BF16 or F16), shape, and min / max / mean of the
 * values. With --convert OUT it also writes them all to OUT as --dtype
 * (e.g. a float checkpoint as bfloat16, half the bytes, or back). */
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

int main(int argc, char **argv) {
    const char *pos[1] = {NULL}, *convert = NULL, *dtype = "BF16";
    cli_opt opts[] = {
        {"convert", CLI_STR, &convert, "also write every tensor of the safetensors file to this file", 0, 0},
        {"dtype", CLI_STR, &dtype, "the dtype --convert writes: F32, F64, BF16 or F16", 0, 0},
    };
    int n = cli_parse(argc, argv, "FILE.safetensors | FILE.npy",
                      "Lists the tensors of a checkpoint: name, dtype, shape, min, max and mean.", opts, 2, pos, 1);
    if (n != 1) {
        fprintf(stderr, "%s: give one file\n", argv[0]);
        cli_usage(stderr, argv[0], "FILE.safetensors | FILE.npy", "", NULL, 0);
        return 2;
    }
    if (ends_with(pos[0], ".npy")) {
        tg_tensor *t = tg_npy_load(pos[0]);
        if (!t) {
            fprintf(stderr, "inspect: %s\n", tg_last_error());
            return 1;
        }
        header();
        stats(pos[0], TG_REAL_DTYPE, t->ndim, t->shape, t->data, t->size);
        tg_free(t);
        return 0;
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
    int rc = 0;
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
    if (rc == 0 && convert) {
        if (tg_safetensors_save_dtype(convert, &out, NULL, dtype) != 0) {
            fprintf(stderr, "inspect: %s\n", tg_last_error());
            rc = 1;
        } else
            printf("wrote %s as %s\n", convert, dtype);
    }
    for (int i = 0; i < out.n; i++) tg_free(out.items[i].t);
    tg_params_free(&out);
    tg_safetensors_close(&st);
    return rc;
}
