/* Token data (train.h): a token file mapped read-only, split into training
 * and validation tokens, and sampled in windows from a counter-based
 * generator so that the data order is a function of (seed, windows drawn). */
#include "train.h"

#include <string.h>

#include "../io/file.h"
#include "../io/npy.h"
#include "../tensor/profile.h"
#include "../tensor/tensor_internal.h"

/* Token k; k is in range. */
static inline int token_at(const tg_token_data *d, int64_t k) {
    if (d->itemsize == 1) return d->tokens[k];
    if (d->itemsize == 2) return d->tokens[2 * k] | d->tokens[2 * k + 1] << 8; /* little-endian, whatever the host */
    const unsigned char *t = d->tokens + 4 * k;                                /* below TG_MAX_VOCAB, checked at open */
    return (int)((uint32_t)t[0] | (uint32_t)t[1] << 8 | (uint32_t)t[2] << 16 | (uint32_t)t[3] << 24);
}

tg_token_data *tg_token_data_open(const char *path, double val_fraction, uint64_t seed) {
    if (!path) {
        tg_set_error("token_data: NULL path");
        return NULL;
    }
    if (!(val_fraction >= 0 && val_fraction < 1)) {
        tg_set_error("token_data: %s: val_fraction %g must be in [0, 1)", path, val_fraction);
        return NULL;
    }
    const unsigned char *map;
    size_t size;
    if (tg_map_file(path, "token_data", &map, &size) != 0) return NULL;
    tg_npy_header h;
    /* The reason alone: the path, of any length, goes straight into the
     * message, which holds it whole. */
    char why[200] = "";
    int itemsize = 0;
    bool bad_header = tg_npy_parse_header(map, size, path, &h) != 0;
    if (bad_header) {
        tg__error_rename("npy_header", "token_data", path); /* "npy_header: <path>: <reason>" */
    } else if (strcmp(h.descr, "|u1") == 0 || strcmp(h.descr, "<u1") == 0 || strcmp(h.descr, "u1") == 0) {
        itemsize = 1;
    } else if (strcmp(h.descr, "<u2") == 0) {
        itemsize = 2;
    } else if (strcmp(h.descr, "<u4") == 0) {
        itemsize = 4;
    } else {
        snprintf(why, sizeof why, "dtype '%s' is not a token dtype (uint8 '|u1', uint16 '<u2' or uint32 '<u4')",
                 h.descr);
    }
    bool ok = !bad_header && !why[0];
    if (ok && h.fortran_order && h.ndim > 1) snprintf(why, sizeof why, "fortran_order True is not supported");
    if (ok && !why[0] && h.ndim != 1) snprintf(why, sizeof why, "%d-D array, a token file holds one 1-D array", h.ndim);
    if (ok && !why[0]) {
        /* shape[0] < 2^59 (npy.h), so the product does not overflow. */
        uint64_t need = (uint64_t)h.shape[0] * (uint64_t)itemsize, have = size - h.data_offset;
        if (have != need)
            snprintf(why, sizeof why, "the header's %lld tokens need %llu bytes of data, the file has %llu%s",
                     (long long)h.shape[0], (unsigned long long)need, (unsigned long long)have,
                     have < need ? " (truncated?)" : "");
        else if (h.shape[0] == 0)
            snprintf(why, sizeof why, "no tokens");
    }
    tg_token_data *d = NULL;
    if (ok && !why[0] && !(d = tg_sys_calloc(1, sizeof *d))) snprintf(why, sizeof why, "out of memory");
    if (bad_header || why[0]) {
        tg_unmap_file(map, size);
        if (why[0]) tg_set_error("token_data: %s: %s", path, why);
        return NULL;
    }
    d->map = map;
    d->map_size = size;
    d->tokens = map + h.data_offset;
    d->itemsize = itemsize;
    d->n = h.shape[0];
    /* nanoGPT: n_train = int(n * 0.9); here the validation part is rounded
     * down, so a fraction of 0 leaves no validation tokens. */
    d->n_train = d->n - (int64_t)((double)d->n * val_fraction);
    uint32_t max = 0;
    for (int64_t k = 0; k < d->n; k++) {
        const unsigned char *t = d->tokens + k * itemsize;
        uint32_t v = itemsize == 1 ? t[0]
                     : itemsize == 2
                         ? (uint32_t)(t[0] | t[1] << 8)
                         : (uint32_t)t[0] | (uint32_t)t[1] << 8 | (uint32_t)t[2] << 16 | (uint32_t)t[3] << 24;
        if (v >= TG_MAX_VOCAB) { /* uint32 only: an id no vocabulary has, and too large for an embedding */
            tg_set_error("token_data: %s: token %lu at %lld is not below %d (TG_MAX_VOCAB)", path, (unsigned long)v,
                         (long long)k, TG_MAX_VOCAB);
            tg_unmap_file(map, size);
            tg_sys_free(d);
            return NULL;
        }
        if (v > max) max = v;
    }
    d->vocab = (int)max + 1;
    d->rng = tg_rng_new(seed);
    return d;
}

int tg_token_data_get(const tg_token_data *d, int64_t k) { return d && k >= 0 && k < d->n ? token_at(d, k) : -1; }

/* x[b, t] = tok[s + t], y[b, t] = tok[s + t + 1] for one window at s. */
static void window(const tg_token_data *d, int64_t s, int T, int *x, int *y) {
    for (int t = 0; t < T; t++) {
        x[t] = token_at(d, s + t);
        y[t] = token_at(d, s + t + 1);
    }
}

static bool check_bt(const char *op, const tg_token_data *d, int B, int T, const int *x, const int *y) {
    if (!d || !x || !y) {
        tg_set_error("%s: NULL %s", op, !d ? "data" : !x ? "x" : "y");
        return false;
    }
    if (B < 1 || T < 1) {
        tg_set_error("%s: B %d and T %d must be at least 1", op, B, T);
        return false;
    }
    return true;
}

int tg_token_data_batch(tg_token_data *d, int B, int T, int *x, int *y) {
    return tg_token_data_batch_shard(d, B, T, 0, 1, x, y);
}

static int batch_shard(tg_token_data *d, int B, int T, int rank, int size, int *x, int *y);

/* A batch is one row of the profile (profile.h): data "batch". */
int tg_token_data_batch_shard(tg_token_data *d, int B, int T, int rank, int size, int *x, int *y) {
    tg_profile_region_begin(TG_PROF_DATA, "batch");
    int rc = batch_shard(d, B, T, rank, size, x, y);
    tg_profile_region_end();
    return rc;
}

static int batch_shard(tg_token_data *d, int B, int T, int rank, int size, int *x, int *y) {
    if (!check_bt("token_data_batch", d, B, T, x, y)) return -1;
    if (size < 1 || rank < 0 || rank >= size || B % size != 0) {
        tg_set_error("token_data_batch_shard: rank %d of %d ranks, batch %d: the ranks must divide the batch", rank,
                     size, B);
        return -1;
    }
    if (d->n_train < (int64_t)T + 1) {
        tg_set_error("token_data_batch: %lld training tokens, a window of T = %d needs %lld", (long long)d->n_train, T,
                     (long long)T + 1);
        return -1;
    }
    /* Starts in [0, n_train - T - 1], so y's last token is a training token. */
    const int64_t range = d->n_train - T;
    const uint64_t first = tg_rng_take(&d->rng, (uint64_t)B);
    const int per = B / size, b0 = rank * per; /* this rank's windows of the B drawn */
    for (int b = b0; b < b0 + per; b++) {
        /* 53 random bits scaled to the range: exact enough below 2^53 tokens,
         * with no modulo bias visible at corpus sizes. */
        int64_t s = (int64_t)(tg_rng_uniform_at(d->rng.seed, d->rng.stream, first + (uint64_t)b) * (double)range);
        if (s >= range) s = range - 1;
        window(d, s, T, x + (size_t)(b - b0) * (size_t)T, y + (size_t)(b - b0) * (size_t)T);
    }
    return 0;
}

int64_t tg_token_data_val_batches(const tg_token_data *d, int B, int T) {
    if (!d || B < 1 || T < 1) return 0;
    int64_t n_val = d->n - d->n_train;
    if (n_val < (int64_t)T + 1) return 0;
    return (n_val - 1) / T / B; /* window j reads tokens n_train + jT .. n_train + jT + T */
}

int tg_token_data_val_batch(const tg_token_data *d, int64_t i, int B, int T, int *x, int *y) {
    if (!check_bt("token_data_val_batch", d, B, T, x, y)) return -1;
    int64_t nb = tg_token_data_val_batches(d, B, T);
    if (i < 0 || i >= nb) {
        tg_set_error("token_data_val_batch: batch %lld of %lld (B %d, T %d, %lld validation tokens)", (long long)i,
                     (long long)nb, B, T, (long long)(d->n - d->n_train));
        return -1;
    }
    for (int b = 0; b < B; b++) {
        int64_t s = d->n_train + (i * B + b) * (int64_t)T;
        window(d, s, T, x + (size_t)b * (size_t)T, y + (size_t)b * (size_t)T);
    }
    return 0;
}

tg_rng *tg_token_data_rng(tg_token_data *d) { return d ? &d->rng : NULL; }

void tg_token_data_close(tg_token_data *d) {
    if (!d) return;
    tg_unmap_file(d->map, d->map_size);
    tg_sys_free(d);
}
