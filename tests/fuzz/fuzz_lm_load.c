/* libFuzzer harness: the whole `lm --sample --load` path (tg_decoder_open,
 * train/model_file.h) on any bytes: metadata parsed strictly, sizes checked
 * against the tensors, the decoder built and its weights loaded strictly,
 * the tokenizer read from the metadata. Either the model loads, or the path
 * fails with a message and frees what it built. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    const char *path = input_path("lm.safetensors");
    write_input(path, data, size);
    tg_tokenizer *tok = NULL;
    tg_decoder *m = tg_decoder_open(path, &tok);
    tg_tokenizer_free(tok);
    if (m)
        tg_decoder_free(m);
    else if (!tg_last_error())
        abort(); /* a rejection always says why */
    tg_clear_error();
    return 0;
}
