/* A parameter list saved as a safetensors file and loaded back strictly
 * (see checkpoint.h). */
#include "checkpoint.h"

#include <string.h>

#include "safetensors.h"

int tg_checkpoint_save(const char *path, const tg_params *params, const char *metadata_json) {
    return tg_checkpoint_save_dtype(path, params, metadata_json, NULL);
}

int tg_checkpoint_save_dtype(const char *path, const tg_params *params, const char *metadata_json, const char *dtype) {
    if (tg_safetensors_save_dtype(path, params, metadata_json, dtype) == 0) return 0;
    /* Same message, under this function's name. */
    char why[512];
    const char *e = tg_last_error(), *pre = "safetensors_save: ";
    snprintf(why, sizeof why, "%s", e && strncmp(e, pre, strlen(pre)) == 0 ? e + strlen(pre) : e ? e : path);
    tg_set_error("checkpoint_save: %s", why);
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
        /* Same message, under this function's name. */
        char why[512];
        const char *e = tg_last_error();
        const char *pre = "safetensors_open: ";
        snprintf(why, sizeof why, "%s", e && strncmp(e, pre, strlen(pre)) == 0 ? e + strlen(pre) : e ? e : path);
        tg_set_error("checkpoint_load: %s", why);
        return -1;
    }
    int rc = tg_checkpoint_load_from(&st, path, params);
    tg_safetensors_close(&st);
    return rc;
}

int tg_checkpoint_load_from(const tg_safetensors *st, const char *path, const tg_params *params) {
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
        idx[i] = tg_safetensors_find(st, p->name);
        if (idx[i] < 0)
            list_name(names, sizeof names, &count, p->name);
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
        if (!used[j]) list_name(names, sizeof names, &count, st->entries[j].name);
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
    for (int i = 0; i < params->n; i++) tg_safetensors_read(st, idx[i], params->items[i].t->data);

done:
    tg_sys_free(idx);
    tg_sys_free(used);
    return rc;
}
