/* The byte tokenizer and token files (train.h): token = byte value, and a
 * token file is a 1-D uint8, uint16 or uint32 .npy array (io/npy.h). */
#include "train.h"

#include <string.h>

#include "../io/file.h"
#include "../io/npy.h"
#include "../tensor/tensor_internal.h"

int tg_bytes_encode(const unsigned char *text, size_t n, int *ids) {
    if ((!text || !ids) && n > 0) {
        tg_set_error("bytes_encode: NULL %s", !text ? "text" : "ids");
        return -1;
    }
    for (size_t i = 0; i < n; i++) ids[i] = text[i];
    return 0;
}

int tg_bytes_decode(const int *ids, size_t n, unsigned char *out) {
    if ((!ids || !out) && n > 0) {
        tg_set_error("bytes_decode: NULL %s", !ids ? "ids" : "output");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= TG_BYTE_VOCAB) {
            tg_set_error("bytes_decode: id %d at %zu is not a byte (0..255)", ids[i], i);
            return -1;
        }
        out[i] = (unsigned char)ids[i];
    }
    return 0;
}

/* Renames "npy_save: ..." to "<op>: ..." so the message names the call made. */
static void rename_error(const char *op) { tg__error_rename("npy_save", op, "failed"); }

int tg_tokens_save(const char *path, const int *ids, int64_t n, int vocab) {
    if (!path || (!ids && n > 0)) {
        tg_set_error("tokens_save: NULL %s", !path ? "path" : "ids");
        return -1;
    }
    if (n < 0 || vocab < 1 || vocab > TG_MAX_VOCAB) {
        tg_set_error("tokens_save: %s: %lld tokens, vocab %d: need n >= 0 and vocab in [1, %d]", path, (long long)n,
                     vocab, TG_MAX_VOCAB);
        return -1;
    }
    /* the narrowest dtype that holds every id: uint8, uint16, else uint32 */
    int itemsize = vocab <= 256 ? 1 : vocab <= 65536 ? 2 : 4;
    void *v = tg_sys_alloc((size_t)(n ? n : 1) * (itemsize == 4 ? 4 : 2));
    if (!v) {
        tg_set_error("tokens_save: %s: out of memory for %lld tokens", path, (long long)n);
        return -1;
    }
    for (int64_t k = 0; k < n; k++) {
        if (ids[k] < 0 || ids[k] >= vocab) {
            tg_set_error("tokens_save: %s: token %d at %lld is outside [0, %d)", path, ids[k], (long long)k, vocab);
            tg_sys_free(v);
            return -1;
        }
        if (itemsize == 4)
            ((uint32_t *)v)[k] = (uint32_t)ids[k];
        else
            ((uint16_t *)v)[k] = (uint16_t)ids[k];
    }
    int rc = itemsize == 4 ? tg_npy_save_uint32(path, v, n) : tg_npy_save_uint(path, v, n, itemsize);
    tg_sys_free(v);
    if (rc != 0) rename_error("tokens_save");
    return rc;
}

int tg_tokens_from_text(const char *text_path, const char *tokens_path) {
    if (!text_path || !tokens_path) {
        tg_set_error("tokens_from_text: NULL %s", !text_path ? "text path" : "tokens path");
        return -1;
    }
    unsigned char *text;
    size_t n;
    if (tg_read_file(text_path, "tokens_from_text", &text, &n) != 0) return -1;
    uint16_t *v = tg_sys_alloc((n ? n : 1) * sizeof *v);
    if (!v) {
        tg_set_error("tokens_from_text: %s: out of memory for %zu tokens", text_path, n);
        tg_sys_free(text);
        return -1;
    }
    for (size_t k = 0; k < n; k++) v[k] = text[k]; /* the byte tokenizer */
    int rc = tg_npy_save_uint(tokens_path, v, (int64_t)n, 1);
    tg_sys_free(v);
    tg_sys_free(text);
    if (rc != 0) rename_error("tokens_from_text");
    return rc;
}
