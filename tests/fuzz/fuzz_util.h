/* Helpers shared by the libFuzzer harnesses that load a file into a model. */
#ifndef TG_FUZZ_UTIL_H
#define TG_FUZZ_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tgrad.h"

/* A file of this process's for the fuzzer's input: /tmp/tgrad-fuzz-<pid>-<name>. */
static inline const char *input_path(const char *name) {
    static char path[96];
    if (!path[0]) snprintf(path, sizeof path, "/tmp/tgrad-fuzz-%ld-%s", (long)getpid(), name);
    return path;
}

/* The fuzzer's bytes as the file at path (the loaders read files). */
static inline void write_input(const char *path, const unsigned char *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size)) abort();
    fclose(f);
}

/* Every tensor of p, in order, into to (tg_params_numel(p) values): a
 * failed load must leave these unchanged. */
static inline void snapshot(const tg_params *p, tg_real *to) {
    int64_t at = 0;
    for (int i = 0; i < p->n; i++) {
        memcpy(to + at, p->items[i].t->data, sizeof(tg_real) * (size_t)p->items[i].t->size);
        at += p->items[i].t->size;
    }
}

#endif
