/** @file
 * Checkpoints: a parameter list (tensor/params.h) saved as a safetensors
 * file (safetensors.h) and loaded back strictly, as PyTorch's
 * load_state_dict(strict=True). */
#ifndef TG_IO_CHECKPOINT_H
#define TG_IO_CHECKPOINT_H

#include "../tensor/params.h"
#include "safetensors.h"

/** Writes every tensor of params, in list order, with dtype TG_REAL_DTYPE
 * ("F32", or "F64" in a double build). metadata_json is NULL or a JSON object
 * of string values, e.g. "{\"epoch\": \"3\"}", stored as "__metadata__".
 * Atomic (io/file.h): on failure path is left as it was and no temporary
 * remains.
 * A NaN or infinite value, which tg_checkpoint_load refuses, is refused
 * here first, before any file is made: a diverged model never replaces a
 * good checkpoint with one that cannot be loaded.
 * Returns 0, or -1 with "checkpoint_save: <path>: <reason>" recorded, e.g.
 * "checkpoint_save: m.safetensors: tensor 'blocks.0.W_q.weight' holds nan
 * at index 3; nothing written".
 * The same file as tg_safetensors_save writes (which checks no value). */
int tg_checkpoint_save(const char *path, const tg_params *params, const char *metadata_json);
/** The same stored as dtype "F32", "F64", "BF16" or "F16" (NULL: TG_REAL_DTYPE),
 * as tg_safetensors_save_dtype: a bf16 checkpoint is half the bytes of F32,
 * its values rounded to nearest even; loading converts back exactly. */
int tg_checkpoint_save_dtype(const char *path, const tg_params *params, const char *metadata_json, const char *dtype);

/** Loads values into every tensor of params (converting F32/F64/BF16/F16 to
 * tg_real).
 * Strict, like PyTorch's load_state_dict(strict=True): the file must hold
 * exactly the names of params, each with the parameter's shape. Everything is
 * checked before the first value is copied (names, shapes, and that every
 * value is finite: a NaN or Inf weight is an error), so on failure (-1,
 * with a message naming the file, the tensor and the problem) the model is
 * unchanged. It knows nothing of what a tensor means: an optimizer's state
 * (tg_optim_state) is checked as any tensor is; tg_train_state_load checks
 * its step and second moments too. */
int tg_checkpoint_load(const char *path, const tg_params *params);
/** The same from a file already opened with tg_safetensors_open (not
 * closed here), for a caller that reads the metadata of the same bytes
 * first (tg_train_state_load); path is for messages. */
int tg_checkpoint_load_from(const tg_safetensors *st, const char *path, const tg_params *params);
/** The same for the tensors named "<prefix>.<param>" (prefix NULL or "":
 * tg_checkpoint_load_from), strict inside that namespace and blind to the
 * file's other tensors: the model ("model") of a training state that also
 * holds an optimizer ("optim.*"). */
int tg_checkpoint_load_prefix(const tg_safetensors *st, const char *path, const tg_params *params, const char *prefix);

#endif
