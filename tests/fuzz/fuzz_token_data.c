/* libFuzzer harness: any bytes opened as a token file (tg_token_data_open,
 * through mmap) either open, and then every training and validation window
 * reads tokens inside the file below the scanned vocabulary, or are
 * rejected with a message; never a crash or a leak. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "fuzz_util.h"

static void check_window(const tg_token_data *d, const int *x, const int *y, int n) {
    for (int i = 0; i < n; i++)
        if (x[i] < 0 || x[i] >= d->vocab || y[i] < 0 || y[i] >= d->vocab) abort();
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    const char *path = input_path("tokens.npy");
    write_input(path, data, size);
    tg_token_data *d = tg_token_data_open(path, 0.25, 1);
    if (!d) {
        if (!tg_last_error()) abort();
    } else {
        enum { B = 2, T = 3 };
        int x[B * T], y[B * T];
        if (d->n <= 0 || d->n_train > d->n || d->vocab < 1 || d->vocab > TG_MAX_VOCAB) abort();
        if (tg_token_data_batch(d, B, T, x, y) == 0)
            check_window(d, x, y, B * T);
        else if (d->n_train >= T + 1)
            abort(); /* enough tokens, yet refused */
        int64_t nv = tg_token_data_val_batches(d, 1, T);
        for (int64_t i = 0; i < nv && i < 64; i++) {
            if (tg_token_data_val_batch(d, i, 1, T, x, y) != 0) abort();
            check_window(d, x, y, T);
        }
        if (tg_token_data_get(d, d->n - 1) < 0 || tg_token_data_get(d, d->n) != -1) abort();
        tg_token_data_close(d);
    }
    tg_clear_error();
    return 0;
}
