/* libFuzzer harness: the whole `reverse --load` path (examples/reverse_model.h)
 * on any bytes: metadata parsed by the flags' rules, sizes checked against
 * the tensors, the model built and its weights loaded strictly. Either the
 * model loads, or the path fails with a message and frees what it built. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "../../examples/reverse_model.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    const char *path = input_path("reverse.safetensors");
    write_input(path, data, size);
    options o;
    cli_opt opts[REVERSE_MAX_OPTS];
    int nopt = reverse_options(&o, opts);
    model m;
    const char *pe;
    if (reverse_load(path, &o, opts, nopt, &m, &pe) == 0) {
        model_free(&m);
    } else if (!tg_last_error()) {
        abort(); /* a rejection always says why */
    }
    tg_clear_error();
    return 0;
}
