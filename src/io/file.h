/** @file
 * Files: whole-file reads and atomic replacement (internal to src/io and
 * the programs; declared in the public tgrad.h for tools that write their
 * own reports).
 *
 * Reading: tg_read_file opens without following the caller into a FIFO or
 * a device (O_NONBLOCK, then fstat): anything but a regular file is
 * rejected before a byte is read, so `--load FIFO` fails at once.
 *
 * Writing: the bytes go to a temporary "<path>.tmp.<pid>.XXXXXX" beside the
 * target, created exclusively by mkstemp (O_CREAT | O_EXCL: a symlink
 * planted there is never followed), fsynced, then renamed over path. Every
 * writer has its own temporary, so concurrent writers of one path never
 * fail or tear it (the last rename wins); every error path removes the
 * temporary; and temporaries of the same path whose writer is gone (a save
 * killed midway: its pid no longer runs) are removed by the next save. */
#ifndef TG_IO_FILE_H
#define TG_IO_FILE_H

#include <stdio.h>

#include "../tensor/tensor.h"

/** A file being written atomically: tg_atomic_begin, write to f, then
 * tg_atomic_commit (or tg_atomic_abort to give up). */
typedef struct {
    FILE *f;          /**< write here */
    char *tmp;        /**< the temporary's name (tg_sys_alloc'd; freed by commit or abort) */
    const char *path; /**< the target, not copied: must stay valid until commit or abort */
} tg_atomic_file;
/** Creates the temporary beside path (removing stale ones first); op names
 * the caller in messages. Returns 0, or -1 with "<op>: <path>: <reason>"
 * (then af holds nothing to commit or abort). */
int tg_atomic_begin(tg_atomic_file *af, const char *path, const char *op);
/** Flushes, fsyncs and renames over path; on failure removes the temporary.
 * Either way af is finished. Returns 0 or -1 (message recorded). */
int tg_atomic_commit(tg_atomic_file *af, const char *op);
/** Closes and removes the temporary file; path is untouched. Safe on an af
 * already finished. */
void tg_atomic_abort(tg_atomic_file *af);
/** Reads a whole regular file into a tg_sys_alloc'd buffer (free with
 * tg_sys_free). Returns 0, or -1 with "<op>: <path>: <reason>" ("<op>:
 * NULL path" for a NULL path). */
int tg_read_file(const char *path, const char *op, unsigned char **buf, size_t *size);
/** Maps a whole regular file read-only (mmap, MAP_PRIVATE), with the same
 * checks as tg_read_file, for files too large to copy (token corpora). An
 * empty file maps to a non-NULL pointer of size 0. Returns 0, or -1 with
 * "<op>: <path>: <reason>"; undo with tg_unmap_file(*buf, *size). */
int tg_map_file(const char *path, const char *op, const unsigned char **buf, size_t *size);
/** Unmaps what tg_map_file mapped (buf and size as it returned them); an
 * empty file's buffer or NULL is a no-op. */
void tg_unmap_file(const unsigned char *buf, size_t size);

#endif
