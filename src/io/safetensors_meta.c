/* Checks a model file's reader makes before it builds anything
 * (safetensors_meta.h). */
#include "safetensors_meta.h"

#include <stdint.h>
#include <stdio.h>

#include "../tensor/number.h"
#include "../tensor/params.h"
#include "../tensor/tensor.h"

int tg__st_meta_value(const tg_safetensors *st, const char *path, const char *key, char *v, size_t cap) {
    long len = tg_safetensors_meta(st, key, v, cap);
    if (len <= 0 || len >= (long)cap) {
        tg_set_error("%s: metadata '%s' is %s", path, key, len < 0 ? "missing" : len == 0 ? "empty" : "too long");
        return -1;
    }
    return 0;
}

int tg__st_meta_int(const tg_safetensors *st, const char *path, const char *key, int lo, int hi, int *out) {
    char v[64];
    int64_t k;
    if (tg__st_meta_value(st, path, key, v, sizeof v)) return -1;
    if (tg_parse_int64(v, &k) != 0 || k < lo || k > hi) {
        tg_set_error("%s: metadata '%s': '%s' is not a whole number in [%d, %d]", path, key, v, lo, hi);
        return -1;
    }
    *out = (int)k;
    return 0;
}

int tg__st_expect_shape(const tg_safetensors *st, const char *path, const char *prefix, const char *name, int rows,
                        int cols) {
    char full[TG_PARAM_NAME_MAX + 8];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    int i = tg_safetensors_find(st, full);
    if (i < 0) {
        tg_set_error("%s: no tensor '%s'", path, full);
        return -1;
    }
    const tg_st_entry *e = &st->entries[i];
    if (e->ndim != 2 || e->shape[0] != rows || e->shape[1] != cols) {
        char got[64];
        tg_set_error("%s: tensor '%s' has shape %s, but the metadata says (%d,%d)", path, full,
                     tg_shape_str(got, e->ndim, e->shape), rows, cols);
        return -1;
    }
    return 0;
}
