/* libFuzzer harness: any bytes given to the safetensors reader either parse
 * into entries whose tensors can all be read, or are rejected with a
 * message; never a crash, a leak or undefined behaviour (ASan + UBSan). */
#include <stdlib.h>
#include <string.h>

#include "tgrad.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    unsigned char *blob = tg_sys_alloc(size ? size : 1);
    if (!blob) return 0;
    memcpy(blob, data, size);
    tg_safetensors st;
    if (tg_safetensors_parse(blob, size, "fuzz", &st) != 0) { /* parse owns blob, even on failure */
        if (!tg_last_error()) abort();                        /* a rejection always says why */
        tg_clear_error();
        return 0;
    }
    for (int i = 0; i < st.n; i++) {
        tg_real *out = malloc((size_t)(st.entries[i].numel ? st.entries[i].numel : 1) * sizeof *out);
        if (out && tg_safetensors_read(&st, i, out) != 0) abort(); /* validated entries must read */
        free(out);
    }
    char v[64];
    tg_safetensors_meta(&st, "vocab", v, sizeof v);
    tg_safetensors_close(&st);
    return 0;
}
