/* The training state (train.h): model, optimizer state, step and random
 * generators in one safetensors checkpoint, loaded all or nothing. */
#include "train.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../io/checkpoint.h"

#define FORMAT_VERSION "1"

/* 1-31 characters of [A-Za-z0-9_.-]: safe in a JSON key and in the
 * comma-separated list without escaping. */
static bool good_name(const char *s) {
    size_t n = s ? strlen(s) : 0;
    if (n < 1 || n > 31) return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
              c == '-'))
            return false;
    }
    return true;
}

static int check_args(const char *op, const char *path, const tg_params *model, const tg_optim *opt,
                      const tg_named_rng *rngs, int n_rngs) {
    if (!path || !model || !opt || (!rngs && n_rngs > 0)) {
        tg_set_error("%s: NULL %s", op, !path ? "path" : !model ? "model" : !opt ? "optimizer" : "rngs");
        return -1;
    }
    if (n_rngs < 0 || n_rngs > TG_TRAIN_MAX_RNGS) {
        tg_set_error("%s: %s: %d generators (0 to %d)", op, path, n_rngs, TG_TRAIN_MAX_RNGS);
        return -1;
    }
    for (int i = 0; i < n_rngs; i++) {
        if (!good_name(rngs[i].name) || !rngs[i].rng) {
            tg_set_error("%s: %s: generator %d: %s", op, path, i,
                         !rngs[i].rng ? "NULL rng" : "name must be 1-31 characters of [A-Za-z0-9_.-]");
            return -1;
        }
        for (int k = 0; k < i; k++)
            if (strcmp(rngs[k].name, rngs[i].name) == 0) {
                tg_set_error("%s: %s: generator name '%s' given twice", op, path, rngs[i].name);
                return -1;
            }
    }
    return 0;
}

/* "model.<param>" for the model, "optim.<state>" for the optimizer. */
static int all_tensors(tg_params *all, const tg_params *model, tg_optim *opt) {
    tg_params_init(all);
    if (tg_params_extend(all, "model", model) != 0 || tg_optim_state(opt, all, "optim") != 0) {
        tg_params_free(all);
        return -1;
    }
    return 0;
}

int tg_train_state_save(const char *path, const tg_params *model, tg_optim *opt, int64_t step, const tg_named_rng *rngs,
                        int n_rngs) {
    return tg_train_state_save_meta(path, model, opt, step, rngs, n_rngs, NULL);
}

/* The extra metadata's inside, between its braces (NULL for none), or NULL
 * with the error recorded when it is not one object or uses a format key. */
static const char *extra_inside(const char *op, const char *path, const char *extra, size_t *len) {
    *len = 0;
    if (!extra) return "";
    while (*extra == ' ' || *extra == '\n') extra++;
    size_t n = strlen(extra);
    while (n > 0 && (extra[n - 1] == ' ' || extra[n - 1] == '\n')) n--;
    if (n < 2 || extra[0] != '{' || extra[n - 1] != '}') {
        tg_set_error("%s: %s: extra metadata must be one JSON object", op, path);
        return NULL;
    }
    static const char *const reserved[] = {"\"tgrad_train_state\"", "\"step\"", "\"rngs\"", "\"rng."};
    for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
        if (strstr(extra, reserved[i])) {
            tg_set_error("%s: %s: extra metadata uses the format's key %s", op, path, reserved[i]);
            return NULL;
        }
    const char *in = extra + 1;
    *len = n - 2;
    while (*len > 0 && (*in == ' ' || *in == '\n')) in++, --*len;
    return in;
}

int tg_train_state_save_meta(const char *path, const tg_params *model, tg_optim *opt, int64_t step,
                             const tg_named_rng *rngs, int n_rngs, const char *extra_json) {
    const char *op = "train_state_save";
    if (check_args(op, path, model, opt, rngs, n_rngs) != 0) return -1;
    if (step < 0) {
        tg_set_error("%s: %s: negative step %lld", op, path, (long long)step);
        return -1;
    }
    size_t extra_len;
    const char *extra = extra_inside(op, path, extra_json, &extra_len);
    if (!extra) return -1;
    /* Each generator: ", \"rng.<31>\": \"<20> <20> <20>\"" is under 128 bytes. */
    size_t cap = 256 + (size_t)n_rngs * 160 + extra_len;
    char *meta = tg_sys_alloc(cap);
    if (!meta) {
        tg_set_error("%s: %s: out of memory", op, path);
        return -1;
    }
    int n = snprintf(meta, cap, "{\"tgrad_train_state\": \"" FORMAT_VERSION "\", \"step\": \"%lld\", \"rngs\": \"",
                     (long long)step);
    for (int i = 0; i < n_rngs; i++) n += snprintf(meta + n, cap - (size_t)n, "%s%s", i ? "," : "", rngs[i].name);
    n += snprintf(meta + n, cap - (size_t)n, "\"");
    for (int i = 0; i < n_rngs; i++)
        n += snprintf(meta + n, cap - (size_t)n, ", \"rng.%s\": \"%" PRIu64 " %" PRIu64 " %" PRIu64 "\"", rngs[i].name,
                      rngs[i].rng->seed, rngs[i].rng->stream, rngs[i].rng->counter);
    /* The extra keys after the format's, so a reader taking the first of a
     * duplicated key (tg_safetensors_meta) still reads the format's. The
     * save checks the whole object (tg_safetensors_save). */
    if (extra_len) n += snprintf(meta + n, cap - (size_t)n, ", %.*s", (int)extra_len, extra);
    snprintf(meta + n, cap - (size_t)n, "}");
    tg_params all;
    int rc = all_tensors(&all, model, opt);
    if (rc == 0) {
        rc = tg_checkpoint_save(path, &all, meta);
        tg_params_free(&all);
        if (rc != 0) { /* "checkpoint_save: ..." under this function's name */
            char why[512];
            const char *e = tg_last_error(), *pre = "checkpoint_save: ";
            snprintf(why, sizeof why, "%s", e && strncmp(e, pre, strlen(pre)) == 0 ? e + strlen(pre) : path);
            tg_set_error("%s: %s", op, why);
        }
    }
    tg_sys_free(meta);
    return rc;
}

/* A decimal uint64 with nothing around it; 0 or -1. */
static int parse_u64(const char *s, uint64_t *out, const char **end) {
    if (*s < '0' || *s > '9') return -1;
    errno = 0;
    char *e;
    unsigned long long v = strtoull(s, &e, 10);
    if (errno) return -1;
    *out = v;
    *end = e;
    return 0;
}

/* The metadata value of key into v (cap bytes): its length, or -1 when
 * absent or too long for v (a value cut short could read as another). */
static long meta(const tg_safetensors *st, const char *key, char *v, size_t cap) {
    long len = tg_safetensors_meta(st, key, v, cap);
    return len >= 0 && (size_t)len < cap ? len : -1;
}

int tg_train_state_load(const char *path, const tg_params *model, tg_optim *opt, int64_t *step,
                        const tg_named_rng *rngs, int n_rngs) {
    const char *op = "train_state_load";
    if (check_args(op, path, model, opt, rngs, n_rngs) != 0) return -1;
    if (!step) {
        tg_set_error("%s: NULL step", op);
        return -1;
    }
    tg_safetensors st;
    if (tg_safetensors_open(path, &st) != 0) {
        char why[512];
        const char *e = tg_last_error(), *pre = "safetensors_open: ";
        snprintf(why, sizeof why, "%s", e && strncmp(e, pre, strlen(pre)) == 0 ? e + strlen(pre) : path);
        tg_set_error("%s: %s", op, why);
        return -1;
    }
    /* The scalars first, into locals: nothing is assigned before every
     * check of the file has passed. */
    tg_rng got[TG_TRAIN_MAX_RNGS];
    uint64_t got_step = 0;
    char v[TG_TRAIN_MAX_RNGS * 33 + 8], key[48], why[400] = "";
    const char *end;
    long len = meta(&st, "tgrad_train_state", v, sizeof v);
    if (len < 0)
        snprintf(why, sizeof why, "not a training state (no \"tgrad_train_state\" in the metadata)");
    else if (strcmp(v, FORMAT_VERSION) != 0)
        snprintf(why, sizeof why, "training-state format '%.40s', this library reads '" FORMAT_VERSION "'", v);
    else if (meta(&st, "step", v, sizeof v) < 0 || parse_u64(v, &got_step, &end) != 0 || *end ||
             got_step > (uint64_t)INT64_MAX)
        snprintf(why, sizeof why, "metadata \"step\" missing or not a non-negative integer");
    if (!why[0]) {
        /* The file's generators must be exactly the ones given, in order. */
        char want[sizeof v] = "";
        size_t w = 0;
        for (int i = 0; i < n_rngs; i++)
            w += (size_t)snprintf(want + w, sizeof want - w, "%s%s", i ? "," : "", rngs[i].name);
        len = meta(&st, "rngs", v, sizeof v);
        if (len < 0 || strcmp(v, want) != 0)
            snprintf(why, sizeof why, "generators \"%.120s\" in the file, \"%.120s\" given", len < 0 ? "(none)" : v,
                     want);
    }
    for (int i = 0; !why[0] && i < n_rngs; i++) {
        snprintf(key, sizeof key, "rng.%s", rngs[i].name);
        uint64_t a[3];
        const char *s = v;
        int ok = meta(&st, key, v, sizeof v) >= 0;
        for (int k = 0; ok && k < 3; k++) {
            ok = parse_u64(s, &a[k], &end) == 0 && *end == (k < 2 ? ' ' : '\0');
            s = end + 1;
        }
        if (!ok)
            snprintf(why, sizeof why, "metadata \"%s\" missing or not \"<seed> <stream> <counter>\"", key);
        else
            got[i] = (tg_rng){a[0], a[1], a[2]};
    }
    int rc = -1;
    if (why[0]) {
        tg_set_error("%s: %s: %s", op, path, why);
    } else {
        tg_params all;
        if (all_tensors(&all, model, opt) == 0) {
            rc = tg_checkpoint_load_from(&st, path, &all); /* checks everything, then copies */
            tg_params_free(&all);
            if (rc != 0) {
                char msg[512];
                const char *e = tg_last_error(), *pre = "checkpoint_load: ";
                snprintf(msg, sizeof msg, "%s", e && strncmp(e, pre, strlen(pre)) == 0 ? e + strlen(pre) : path);
                tg_set_error("%s: %s", op, msg);
            }
        }
    }
    if (rc == 0) {
        *step = (int64_t)got_step;
        for (int i = 0; i < n_rngs; i++) *rngs[i].rng = got[i];
    }
    tg_safetensors_close(&st);
    return rc;
}
