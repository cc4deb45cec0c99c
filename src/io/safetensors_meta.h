/* Checks a model file's reader makes before it builds anything (internal:
 * the decoder's and the encoder's readers share them, src/nn/decoder_file.c
 * and src/train/encoder_file.c). Each returns 0, or -1 with a message naming
 * path and the key or tensor. */
#ifndef TG_SAFETENSORS_META_H
#define TG_SAFETENSORS_META_H

#include <stddef.h>

#include "safetensors.h"

/* Metadata key into v (cap bytes); refused when missing, empty or too long. */
int tg__st_meta_value(const tg_safetensors *st, const char *path, const char *key, char *v, size_t cap);
/* An integer key in [lo, hi] into *out. */
int tg__st_meta_int(const tg_safetensors *st, const char *path, const char *key, int lo, int hi, int *out);
/* Tensor prefix+name exists with shape (rows, cols). */
int tg__st_expect_shape(const tg_safetensors *st, const char *path, const char *prefix, const char *name, int rows,
                        int cols);

#endif
