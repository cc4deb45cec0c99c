/* libFuzzer harness: the whole `lm --sample --load` path (examples/lm_model.h)
 * on any bytes: metadata parsed by the flags' rules, sizes checked against
 * the tensors, the decoder built and its weights loaded strictly. Either the
 * model loads, or the path fails with a message and frees what it built. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "../../examples/lm_model.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    const char *path = input_path("lm.safetensors");
    write_input(path, data, size);
    lm_config c;
    lm_tok tok;
    tg_decoder *m = lm_load(path, &c, &tok);
    if (m) lm_tok_free(&tok);
    if (m)
        tg_decoder_free(m);
    else if (!tg_last_error())
        abort(); /* a rejection always says why */
    tg_clear_error();
    return 0;
}
