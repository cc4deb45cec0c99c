/* libFuzzer harness: any bytes loaded as a training state (a Linear's
 * parameters, its AdamW state, the step and two generators): the load
 * succeeds, or it fails with a message and leaves parameters, optimizer
 * state, step and generators exactly as they were. What it loads is what
 * the save would write: every value finite, the optimizer's step equal to
 * the run's, no negative second moment; so a successful load saves again. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_util.h"

static tg_linear *lin;
static tg_optim *opt;
static tg_params params, all;
static tg_rng r1, r2;
static tg_named_rng rngs[2];
static int64_t total;

static void build(void) {
    tg_rng rng = tg_rng_new(1);
    lin = tg_linear_new(3, 2, true, &rng);
    tg_params_init(&params);
    if (!lin || tg_linear_params(lin, &params, NULL)) abort();
    tg_optim_config cfg = tg_adamw_config((tg_real)0.01, (tg_real)0.1);
    opt = tg_optim_new_groups(&cfg, &params);
    tg_params_init(&all);
    if (!opt || tg_params_extend(&all, "model", &params) || tg_optim_state(opt, &all, "optim")) abort();
    total = tg_params_numel(&all);
    r1 = tg_rng_new(5);
    r2 = tg_rng_new(6);
    rngs[0] = (tg_named_rng){"data", &r1};
    rngs[1] = (tg_named_rng){"dropout", &r2};
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    if (!lin) build();
    const char *path = input_path("state.safetensors");
    write_input(path, data, size);
    tg_real *snap = malloc(sizeof(tg_real) * (size_t)total), *now = malloc(sizeof(tg_real) * (size_t)total);
    snapshot(&all, snap);
    tg_rng s1 = r1, s2 = r2;
    int64_t step = -7;
    if (tg_train_state_load(path, &params, opt, &step, rngs, 2) != 0) {
        if (!tg_last_error()) abort();
        snapshot(&all, now);
        if (memcmp(now, snap, sizeof(tg_real) * (size_t)total) != 0) abort(); /* a failed load changed the model */
        if (step != -7 || memcmp(&s1, &r1, sizeof s1) || memcmp(&s2, &r2, sizeof s2)) abort();
    } else {
        if (step < 0 || tg_optim_state_tensor(opt, "step", 0)->data[0] != (tg_real)step) abort();
        for (int i = 0; tg_optim_state_tensor(opt, "v", i); i++) {
            const tg_tensor *v = tg_optim_state_tensor(opt, "v", i);
            for (int64_t k = 0; k < v->size; k++)
                if (v->data[k] < 0) abort(); /* a negative second moment loaded */
        }
        if (tg_params_check_finite(&all, "fuzz") != 0) abort();
        if (tg_train_state_save(path, &params, opt, step, rngs, 2) != 0) abort();
    }
    free(snap);
    free(now);
    tg_clear_error();
    return 0;
}
