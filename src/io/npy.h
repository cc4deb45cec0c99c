/** @file
 * NumPy's .npy format, for handing a tensor to Python (numpy.load) and back.
 *
 *     "\x93NUMPY"  major  minor  header length (u16 LE in 1.0, u32 LE in 2.0)
 *     header       a Python dict literal, e.g.
 *                  {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
 *                  padded with spaces and ended by '\n' so that the data starts
 *                  at a multiple of 64 bytes
 *     data         the values, C order, little-endian
 */
#ifndef TG_NPY_H
#define TG_NPY_H

#include "../tensor/tensor.h"

/** Writes t with descr '<f4' (or '<f8' in a double build), format 1.0.
 * Atomic like tg_checkpoint_save: a failure leaves path as it was.
 * Returns 0, or -1 with "npy_save: <path>: <reason>" recorded. */
int tg_npy_save(const char *path, const tg_tensor *t);

/** Reads a '<f4' or '<f8' array (converted to tg_real) of format 1.0, 2.0 or
 * 3.0 into a new persistent tensor (free it with tg_free). A 0-d array loads
 * as ndim 0 with one element. Fortran order, big-endian data, other dtypes,
 * more than TG_MAX_DIMS dimensions and truncated files are errors:
 * NULL, with "npy_load: <path>: <reason>" recorded. */
tg_tensor *tg_npy_load(const char *path);
/** The same for a file already in memory (not taken over); name is for messages. */
tg_tensor *tg_npy_parse(const unsigned char *buf, size_t size, const char *name);

/* ---- arrays tgrad does not load as tensors (token files) ------------------- */
/** Writes a 1-D array of n unsigned integers as numpy.save does for uint8
 * (descr '|u1'; every value must be below 256) or uint16 ('<u2'), itemsize
 * 1 or 2; format 1.0, atomic. Returns 0, or -1 with "npy_save: <path>: ...". */
int tg_npy_save_uint(const char *path, const uint16_t *values, int64_t n, int itemsize);
/** The same for uint32 ('<u4'): token files of vocabularies past 65536. */
int tg_npy_save_uint32(const char *path, const uint32_t *values, int64_t n);
/** The parsed header of a .npy file of any dtype. The caller checks descr,
 * shape and that the data fits: nothing past the header is read. */
typedef struct {
    char descr[16];             /**< as written: "<f4", "|u1", "<u2", ... */
    bool fortran_order;         /**< the header's fortran_order (true: column-major values) */
    int ndim;                   /**< the number of dimensions, 0..TG_MAX_DIMS (0: a scalar) */
    int64_t shape[TG_MAX_DIMS]; /**< each below 2^59, so numel * itemsize is checked easily */
    size_t data_offset;         /**< where the values start, a multiple of 64 for files numpy writes */
} tg_npy_header;
/** Parses the preamble and header dict of buf (size bytes) strictly, as
 * tg_npy_parse. Returns 0, or -1 with "npy_header: <name>: <reason>". */
int tg_npy_parse_header(const unsigned char *buf, size_t size, const char *name, tg_npy_header *h);

#endif
