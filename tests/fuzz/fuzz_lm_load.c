/* libFuzzer harness: the whole `lm --sample --load` path (examples/lm_model.h)
 * on any bytes: metadata parsed by the flags' rules, sizes checked against
 * the tensors, the decoder built and its weights loaded strictly. Either the
 * model loads, or the path fails with a message and frees what it built. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "../../examples/lm_model.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    static char path[64];
    if (!path[0]) snprintf(path, sizeof path, "/tmp/tgrad-fuzz-lm-%ld.safetensors", (long)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
    lm_config c;
    tg_decoder *m = lm_load(path, &c);
    if (m)
        tg_decoder_free(m);
    else if (!tg_last_error())
        abort(); /* a rejection always says why */
    tg_clear_error();
    return 0;
}
