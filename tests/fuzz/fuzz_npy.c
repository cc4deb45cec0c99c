/* libFuzzer harness: any bytes given to the .npy reader either load as a
 * tensor or are rejected with a message; never a crash or a leak. */
#include <stdlib.h>

#include "tgrad.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    tg_tensor *t = tg_npy_parse(data, size, "fuzz");
    if (t) {
        volatile tg_real sum = 0;
        for (int64_t i = 0; i < t->size; i++) sum += t->data[i]; /* every value is readable */
        tg_free(t);
    } else if (!tg_last_error()) {
        abort();
    }
    tg_clear_error();
    return 0;
}
