/** @file
 * The safetensors format, the one Hugging Face uses, so that a tgrad model
 * opens in Python with safetensors.numpy.load_file() and back:
 *
 *     8 bytes   N, the header length, unsigned little-endian
 *     N bytes   JSON: {"__metadata__": {"key": "value", ...},          (optional)
 *                      "name": {"dtype": "F32", "shape": [64, 32],
 *                               "data_offsets": [begin, end]}, ...}
 *               padded with spaces so that the data starts 8-byte aligned
 *     the rest  the tensors' raw little-endian values, one after another;
 *               [begin, end) is relative to the start of this data section
 *
 * Like the reference implementation, a reader accepts a file only when the
 * tensors tile the data section exactly: sorted by offset they start at 0,
 * leave no gap or overlap, and the last one ends at the end of the file.
 */
#ifndef TG_IO_SAFETENSORS_H
#define TG_IO_SAFETENSORS_H

#include "../tensor/params.h"

/** A header holding more entries than this is rejected: checkpoints of
 * real models hold thousands, and each entry costs a few hundred bytes. */
#define TG_ST_MAX_ENTRIES 100000

/* ---- reading --------------------------------------------------------------- */
/** One tensor of a safetensors header, as read and checked. */
typedef struct {
    char name[TG_PARAM_NAME_MAX]; /**< the tensor's name, NUL-terminated, not empty */
    char dtype[8];                /**< "F32", "F64", "BF16" or "F16" */
    int ndim;                     /**< the number of dimensions, 0..TG_MAX_DIMS */
    int shape[TG_MAX_DIMS];       /**< the sizes, shape[0..ndim) */
    int64_t numel;                /**< the number of values: the product of the sizes (1 for ndim 0) */
    uint64_t begin, /**< first byte in the data section */ end; /**< one past the last byte */
} tg_st_entry;

/** An open safetensors file: the whole file in memory, its header parsed
 * and checked. Filled by tg_safetensors_open or tg_safetensors_parse,
 * released by tg_safetensors_close; read-only in between. */
typedef struct {
    tg_st_entry *entries;      /**< in header order */
    int n;                     /**< the number of entries (tensors) */
    unsigned char *blob;       /**< the whole file */
    size_t blob_size;          /**< its size in bytes */
    const unsigned char *data; /**< the data section, inside blob */
    size_t data_size;          /**< its size in bytes */
    const char *metadata;      /**< the "__metadata__" object's JSON text inside blob, or NULL */
    size_t metadata_len;       /**< its length in bytes (the text is not NUL-terminated) */
    int *by_name;              /**< entry indices sorted by name (for find) */
} tg_safetensors;

/** Reads and validates the whole file. F32, F64, BF16 (bfloat16) and F16
 * (IEEE half) tensors are accepted, another dtype is an error naming it;
 * tg_safetensors_read converts each to tg_real (16-bit values exactly). Returns 0, or -1 with
 * "safetensors_open: <path>: <reason>" recorded and st zeroed. */
int tg_safetensors_open(const char *path, tg_safetensors *st);
/** The same for a file already in memory: takes ownership of blob (from
 * tg_sys_alloc; freed by close, or here on failure); name is for messages.
 * Returns 0, or -1 with "safetensors_open: <name>: <reason>" recorded. */
int tg_safetensors_parse(unsigned char *blob, size_t size, const char *name, tg_safetensors *st);
/** Index of the tensor called name, or -1 (a binary search). */
int tg_safetensors_find(const tg_safetensors *st, const char *name);
/** Copies tensor i, converted to tg_real, into out (room for
 * entries[i].numel values). Returns 0, or -1 with the error recorded for a
 * NULL argument or an index out of range. */
int tg_safetensors_read(const tg_safetensors *st, int i, tg_real *out);
/** How many values of tensor i are NaN or infinite (0 for a bad index). */
int64_t tg_safetensors_nonfinite(const tg_safetensors *st, int i);
/** Copies the unescaped metadata value of key into out (NUL-terminated,
 * truncated to cap); returns its full length, or -1 when absent (or there
 * is no metadata; no error recorded). A key given twice has its last value,
 * as Python's json and the safetensors package read it. */
long tg_safetensors_meta(const tg_safetensors *st, const char *key, char *out, size_t cap);
/** The i-th metadata key in file order (i from 0) into key (NUL-terminated,
 * truncated to cap); returns its full length, or -1 past the last. With
 * tg_safetensors_meta, lists the metadata (tgrad-inspect). */
long tg_safetensors_meta_key(const tg_safetensors *st, int i, char *key, size_t cap);
/** Frees what st holds (the file's bytes, entries and index) and zeroes it;
 * pointers into it (metadata, data) become invalid. NULL, or an st zeroed
 * by a failed open, is a no-op. */
void tg_safetensors_close(tg_safetensors *st);

/* ---- writing --------------------------------------------------------------- */
/** Writes every tensor of params, in list order, with dtype TG_REAL_DTYPE
 * ("F32", or "F64" in a double build). metadata_json is NULL or a JSON object
 * of string values, e.g. "{\"epoch\": \"3\"}", stored as "__metadata__".
 * Atomic (file.h): on failure path is left as it was and no temporary
 * remains. Returns 0, or -1 with "safetensors_save: <path>: <reason>". */
int tg_safetensors_save(const char *path, const tg_params *params, const char *metadata_json);
/** The same with every tensor stored as dtype: "F32", "F64", "BF16" or "F16"
 * (NULL: TG_REAL_DTYPE). BF16 and F16 round to nearest even (NaN stays NaN,
 * infinities stay infinite); a finite value too large for the dtype (F16:
 * |x| >= 65520, BF16: past 3.39e38) is an error naming the tensor and the
 * value, and the file is left as it was. A bf16 checkpoint is half the
 * size and loads in PyTorch as torch.bfloat16 (bench/bf16_roundtrip.py). */
int tg_safetensors_save_dtype(const char *path, const tg_params *params, const char *metadata_json, const char *dtype);

#endif
