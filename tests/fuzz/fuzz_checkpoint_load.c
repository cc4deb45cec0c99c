/* libFuzzer harness: any bytes loaded as a checkpoint into a small model
 * (an encoder and a head, as the examples build): the load succeeds, or it
 * fails with a message and leaves every parameter exactly as it was. What
 * loads saves again: every value loaded is finite (also an F64 value
 * converted to a float build's tg_real). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_util.h"

static tg_encoder *enc;
static tg_linear *head;
static tg_params params;
static tg_real *snap;
static int64_t total;

static void build(void) {
    tg_rng rng = tg_rng_new(1);
    tg_encoder_config cfg = {.vocab_size = 4, .num_hiddens = 4, .ffn_hiddens = 4, .num_heads = 2, .num_layers = 1};
    cfg.max_len = 4, cfg.pe = TG_PE_LEARNED;
    enc = tg_encoder_new(&cfg, &rng);
    head = tg_linear_new(4, 4, true, &rng);
    tg_params_init(&params);
    if (!enc || !head || tg_encoder_params(enc, &params, "encoder") || tg_linear_params(head, &params, "head")) abort();
    total = tg_params_numel(&params);
    snap = malloc(sizeof(tg_real) * (size_t)total);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    if (!enc) build();
    const char *path = input_path("ckpt.safetensors");
    write_input(path, data, size);
    snapshot(&params, snap);
    if (tg_checkpoint_load(path, &params) != 0) {
        if (!tg_last_error()) abort();
        tg_real *now = malloc(sizeof(tg_real) * (size_t)total);
        snapshot(&params, now);
        if (memcmp(now, snap, sizeof(tg_real) * (size_t)total) != 0) abort(); /* a failed load changed the model */
        free(now);
    } else if (tg_checkpoint_save(path, &params, NULL) != 0) {
        abort(); /* loaded a value the save refuses */
    }
    tg_clear_error();
    return 0;
}
