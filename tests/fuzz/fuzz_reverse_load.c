/* libFuzzer harness: the whole `reverse --load` path (tg_encoder_open, the
 * library's call reverse makes) on any bytes: metadata parsed as whole
 * numbers in ranges, sizes checked against the tensors, the model built and
 * its weights loaded strictly. Either the
 * model loads, or the path fails with a message and frees what it built. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "tgrad.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    const char *path = input_path("reverse.safetensors");
    write_input(path, data, size);
    tg_encoder_model m;
    if (tg_encoder_open(path, &m) == 0) {
        tg_encoder_model_free(&m);
    } else if (!tg_last_error()) {
        abort(); /* a rejection always says why */
    }
    tg_clear_error();
    return 0;
}
