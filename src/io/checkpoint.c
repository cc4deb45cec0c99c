/* A parameter list saved as a safetensors file and loaded back strictly
 * (see checkpoint.h). */
#include "checkpoint.h"

#include <math.h>
#include <string.h>

#include "../tensor/profile.h"
#include "../tensor/tensor_internal.h"
#include "safetensors.h"

/* "nan" whatever its sign bit (printf would show "-nan"), "inf" or "-inf". */
static const char *nonfinite_word(double x) {
    if (isnan(x)) return "nan";
    return x > 0 ? "inf" : "-inf";
}

int tg_checkpoint_save(const char *path, const tg_params *params, const char *metadata_json) {
    return tg_checkpoint_save_dtype(path, params, metadata_json, NULL);
}

static int save_dtype(const char *path, const tg_params *params, const char *metadata_json, const char *dtype);

/* A save or a load is one row of the profile (profile.h): "save" and "load". */
int tg_checkpoint_save_dtype(const char *path, const tg_params *params, const char *metadata_json, const char *dtype) {
    tg_profile_region_begin(TG_PROF_CHECKPOINT, "save");
    int rc = save_dtype(path, params, metadata_json, dtype);
    tg_profile_region_end();
    return rc;
}

static int save_dtype(const char *path, const tg_params *params, const char *metadata_json, const char *dtype) {
    /* The load refuses a NaN or infinite value, so a file holding one could
     * never be read back: refused before any file is made, so that a run
     * whose last step diverged keeps its previous good checkpoint. */
    int i;
    int64_t k;
    if (path && params && tg_params_first_nonfinite(params, &i, &k)) {
        tg_set_error("checkpoint_save: %s: tensor '%s' holds %s at index %lld; nothing written", path,
                     params->items[i].name, nonfinite_word((double)params->items[i].t->data[k]), (long long)k);
        return -1;
    }
    if (tg_safetensors_save_dtype(path, params, metadata_json, dtype) == 0) return 0;
    tg__error_rename("safetensors_save", "checkpoint_save", path ? path : "failed"); /* under this function's name */
    return -1;
}

/* Appends ", name" to a list of at most a few names for a message. */
static void list_name(char *buf, size_t cap, int *count, const char *name) {
    size_t n = strlen(buf);
    if (*count < 4 && n + strlen(name) + 3 < cap)
        snprintf(buf + n, cap - n, "%s%s", *count ? ", " : "", name);
    else if (*count == 4 && n + 6 < cap)
        snprintf(buf + n, cap - n, ", ...");
    (*count)++;
}

int tg_checkpoint_load(const char *path, const tg_params *params) {
    if (!path || !params) {
        tg_set_error("checkpoint_load: NULL %s", !path ? "path" : "params");
        return -1;
    }
    tg_safetensors st;
    if (tg_safetensors_open(path, &st) != 0) {
        tg__error_rename("safetensors_open", "checkpoint_load", path); /* under this function's name */
        return -1;
    }
    tg_profile_region_begin(TG_PROF_CHECKPOINT, "load");
    int rc = tg_checkpoint_load_from(&st, path, params);
    tg_profile_region_end();
    tg_safetensors_close(&st);
    return rc;
}

int tg_checkpoint_load_from(const tg_safetensors *st, const char *path, const tg_params *params) {
    return tg_checkpoint_load_prefix(st, path, params, NULL);
}

/* Entry j is in the namespace being loaded: every entry without a prefix,
 * else the entries named "<prefix>.<...>". */
static bool in_namespace(const char *name, const char *prefix) {
    size_t n = prefix ? strlen(prefix) : 0;
    return !n || (strncmp(name, prefix, n) == 0 && name[n] == '.');
}

int tg_checkpoint_load_prefix(const tg_safetensors *st, const char *path, const tg_params *params, const char *prefix) {
    if (!st || !path || !params) {
        tg_set_error("checkpoint_load: NULL %s", !st ? "file" : !path ? "path" : "params");
        return -1;
    }
    /* Every check first; the model is touched only when all pass. */
    int *idx = tg_sys_alloc((size_t)(params->n ? params->n : 1) * sizeof *idx);
    bool *used = tg_sys_calloc((size_t)(st->n ? st->n : 1), sizeof *used);
    char names[256] = "";
    int count = 0, rc = 0;
    if (!idx || !used) {
        tg_set_error("checkpoint_load: %s: out of memory", path);
        rc = -1;
        goto done;
    }
    for (int i = 0; i < params->n; i++) {
        const tg_param *p = &params->items[i];
        if (!p->t || (!p->t->data && p->t->size > 0)) {
            tg_set_error("checkpoint_load: %s: %s: NULL tensor in the parameter list", path, p->name);
            rc = -1;
            goto done;
        }
        char full[TG_PARAM_NAME_MAX];
        if (tg_param_name(full, prefix, p->name) != 0) {
            rc = -1;
            goto done;
        }
        idx[i] = tg_safetensors_find(st, full);
        if (idx[i] < 0)
            list_name(names, sizeof names, &count, full);
        else
            used[idx[i]] = true;
    }
    if (count) {
        tg_set_error("checkpoint_load: %s: %d tensor%s of the model missing from the file: %s", path, count,
                     count > 1 ? "s" : "", names);
        rc = -1;
        goto done;
    }
    for (int j = 0; j < st->n; j++)
        if (!used[j] && in_namespace(st->entries[j].name, prefix))
            list_name(names, sizeof names, &count, st->entries[j].name);
    if (count) {
        tg_set_error("checkpoint_load: %s: %d unexpected tensor%s in the file (not in the model): %s", path, count,
                     count > 1 ? "s" : "", names);
        rc = -1;
        goto done;
    }
    for (int i = 0; i < params->n; i++) {
        const tg_tensor *t = params->items[i].t;
        const tg_st_entry *e = &st->entries[idx[i]];
        bool same = e->ndim == t->ndim;
        for (int k = 0; same && k < t->ndim; k++) same = e->shape[k] == t->shape[k];
        if (!same) {
            char a[64], b[64];
            tg_set_error("checkpoint_load: %s: %s: shape %s in file, %s in model", path, e->name,
                         tg_shape_str(a, e->ndim, e->shape), tg_shape_str(b, t->ndim, t->shape));
            rc = -1;
            goto done;
        }
    }
    for (int i = 0; i < params->n; i++) {
        int64_t bad = tg_safetensors_nonfinite(st, idx[i]);
        if (bad) {
            tg_set_error("checkpoint_load: %s: %s: %lld of %lld values are NaN or infinite (a diverged run?)", path,
                         st->entries[idx[i]].name, (long long)bad, (long long)st->entries[idx[i]].numel);
            rc = -1;
            goto done;
        }
    }
    /* A float build converts F64 values to float: one beyond float's range
     * is finite in the file but would load as infinity. */
    for (int i = 0; sizeof(tg_real) < sizeof(double) && i < params->n; i++) {
        const tg_st_entry *e = &st->entries[idx[i]];
        if (strcmp(e->dtype, "F64") != 0 || e->numel == 0) continue;
        tg_real *x = tg_sys_alloc((size_t)e->numel * sizeof *x);
        if (!x) {
            tg_set_error("checkpoint_load: %s: out of memory", path);
            rc = -1;
            goto done;
        }
        tg_safetensors_read(st, idx[i], x);
        int64_t k = 0;
        while (k < e->numel && isfinite(x[k])) k++;
        tg_sys_free(x);
        if (k < e->numel) {
            tg_set_error("checkpoint_load: %s: %s: the F64 value at index %lld is beyond the range of float, this "
                         "build's tg_real",
                         path, e->name, (long long)k);
            rc = -1;
            goto done;
        }
    }
    for (int i = 0; i < params->n; i++) tg_safetensors_read(st, idx[i], params->items[i].t->data);

done:
    tg_sys_free(idx);
    tg_sys_free(used);
    return rc;
}
