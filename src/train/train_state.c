/* The training state (train.h): model, optimizer state, step and random
 * generators in one safetensors checkpoint, loaded all or nothing. */
#include "train.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../io/checkpoint.h"
#include "../io/json.h"
#include "../tensor/tensor_internal.h"

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

/* x in the shortest form that reads back as the same double ("0.5", "1e+30",
 * "nan", "-inf"), for messages that quote a value. */
static void number(char *buf, size_t cap, double x) {
    if (!isfinite(x)) {
        snprintf(buf, cap, "%s", isnan(x) ? "nan" : x > 0 ? "inf" : "-inf");
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, x);
        if (strtod(buf, NULL) == x) return;
    }
}

/* The optimizer's step count t must be the run's step: one tg_optim_step
 * per step of the run. Adam's bias correction divides by 1 - beta^(t+1) at
 * the next step, so a count of -1 divides by zero, and any other wrong
 * count (negative, a fraction, huge, off by one) trains on silently with
 * another step size. 0, or -1 with the reason in why. */
static int check_optim_step(double t, uint64_t step, char *why, size_t cap) {
    /* 2^64 bounds the conversion; whole and in range, the comparison is exact. */
    if (isfinite(t) && t >= 0 && t < 18446744073709551616.0 && t == floor(t) && (uint64_t)t == step) return 0;
    char v[32];
    number(v, sizeof v, t);
    snprintf(why, cap, "'optim.step' is %s; expected %" PRIu64 ", the run's step", v, step);
    return -1;
}

/* The optimizer row's rule for the state entry "optim.<state>.<param>" of
 * the training state: why a negative value is refused (a second moment, a
 * running mean of squares, is never negative: sqrt(v) would be NaN), or
 * NULL when any value goes (or name is no state entry). */
static const char *never_negative(const tg_optim *opt, const char *name) {
    const tg_optim_rule *row = tg_optim_kind(opt);
    if (!row || strncmp(name, "optim.", 6) != 0) return NULL;
    name += 6;
    for (int s = 0; s < row->n_state; s++) {
        size_t n = strlen(row->state[s].name);
        if (strncmp(name, row->state[s].name, n) == 0 && name[n] == '.') return row->state[s].never_negative;
    }
    return NULL;
}

/* 0, or -1 with the reason in why naming the tensor, the index, the value
 * and the row's reason. */
static int check_never_negative(const char *name, const char *reason, const tg_real *x, int64_t n, char *why,
                                size_t cap) {
    for (int64_t k = 0; k < n; k++)
        if (x[k] < 0) {
            char v[32];
            number(v, sizeof v, (double)x[k]);
            snprintf(why, cap, "tensor '%s' holds %s at index %lld (%s)", name, v, (long long)k, reason);
            return -1;
        }
    return 0;
}

/* What the load refuses beyond names and shapes, checked before a save
 * makes any file: every value finite, the optimizer's step the run's, no
 * negative value where the optimizer's row says none can be. 0, or -1
 * with the error recorded. */
static int check_before_save(const char *op, const char *path, const tg_params *all, const tg_optim *opt,
                             int64_t step) {
    char why[400] = "";
    int i;
    int64_t k;
    if (tg_params_first_nonfinite(all, &i, &k)) {
        char v[32];
        number(v, sizeof v, (double)all->items[i].t->data[k]);
        snprintf(why, sizeof why, "tensor '%s' holds %s at index %lld", all->items[i].name, v, (long long)k);
    } else if (check_optim_step((double)tg_optim_state_tensor(opt, "step", 0)->data[0], (uint64_t)step, why,
                                sizeof why) == 0) {
        for (i = 0; i < all->n; i++) {
            const char *reason = never_negative(opt, all->items[i].name);
            const tg_tensor *t = all->items[i].t;
            if (reason && check_never_negative(all->items[i].name, reason, t->data, t->size, why, sizeof why)) break;
        }
    }
    if (!why[0]) return 0;
    tg_set_error("%s: %s: %s; nothing written", op, path, why);
    return -1;
}

/* The same in a file, before tg_checkpoint_load_from checks the rest (names,
 * shapes, finiteness): a tensor missing, or of another shape than the
 * optimizer's, is left to it. all: the state's entries (all_tensors). 0, or
 * -1 with the reason in why. */
static int check_file_optim(const tg_safetensors *st, const tg_params *all, const tg_optim *opt, uint64_t step,
                            char *why, size_t cap) {
    int j = tg_safetensors_find(st, "optim.step");
    if (j >= 0 && st->entries[j].numel == 1) {
        tg_real t;
        tg_safetensors_read(st, j, &t);
        if (check_optim_step((double)t, step, why, cap) != 0) return -1;
    }
    for (int i = 0; i < all->n; i++) {
        const char *reason = never_negative(opt, all->items[i].name);
        if (!reason) continue;
        j = tg_safetensors_find(st, all->items[i].name);
        int64_t n = all->items[i].t->size;
        if (j < 0 || st->entries[j].numel != n || n == 0) continue;
        tg_real *x = tg_sys_alloc((size_t)n * sizeof *x);
        if (!x) {
            snprintf(why, cap, "out of memory");
            return -1;
        }
        tg_safetensors_read(st, j, x);
        int bad = check_never_negative(all->items[i].name, reason, x, n, why, cap);
        tg_sys_free(x);
        if (bad) return -1;
    }
    return 0;
}

int tg_train_state_save(const char *path, const tg_params *model, tg_optim *opt, int64_t step, const tg_named_rng *rngs,
                        int n_rngs) {
    return tg_train_state_save_meta(path, model, opt, step, rngs, n_rngs, NULL);
}

/* A JSON string of the extra metadata at j, unescaped into a malloc'd
 * text (NULL with j->why set when it is not one, or out of memory). */
static char *extra_string(tg_json *j) {
    tg_json at = *j;
    size_t n;
    if (tg_json_string(j, NULL, 0, &n) != 0) return NULL;
    char *s = malloc(n + 1);
    if (!s || tg_json_string(&at, s, n + 1, NULL) != 0) tg_json_fail(j, "out of memory"), free(s), s = NULL;
    return s;
}

/* The state's metadata: the format's keys, then the members of the extra
 * object (strings, as safetensors' metadata holds), each read and written
 * again by io/json.h's writer, after the format's so a reader taking the
 * first of a duplicated key still reads the format's. A format key in the
 * extra is refused. NULL with the error recorded. */
static char *state_metadata(const char *op, const char *path, int64_t step, const tg_optim_rule *optim,
                            const tg_named_rng *rngs, int n_rngs, const char *extra) {
    tg_json_writer w = {.compact = true}; /* a safetensors header, compact like the reference writer */
    char key[64], v[80];
    tg_json_begin(&w, '{');
    tg_json_key(&w, "tgrad_train_state"), tg_json_put_str(&w, FORMAT_VERSION);
    snprintf(v, sizeof v, "%lld", (long long)step);
    tg_json_key(&w, "step"), tg_json_put_str(&w, v);
    tg_json_key(&w, "optim"), tg_json_put_str(&w, optim->name); /* the optimizer's row */
    tg_strbuf names = {0};                                      /* "a,b,c": check_args allows no ',' in a name */
    for (int i = 0; i < n_rngs; i++) tg_strbuf_str(&names, i ? "," : ""), tg_strbuf_str(&names, rngs[i].name);
    tg_json_key(&w, "rngs"), tg_json_put_string(&w, names.p ? names.p : "", names.oom ? 0 : names.n);
    free(names.p);
    for (int i = 0; i < n_rngs; i++) {
        snprintf(key, sizeof key, "rng.%s", rngs[i].name);
        snprintf(v, sizeof v, "%" PRIu64 " %" PRIu64 " %" PRIu64, rngs[i].rng->seed, rngs[i].rng->stream,
                 rngs[i].rng->counter);
        tg_json_key(&w, key), tg_json_put_str(&w, v);
    }
    tg_json j = {.p = extra, .end = extra ? extra + strlen(extra) : NULL, .start = extra};
    int more = extra ? tg_json_open(&j, '{', '}') : 1; /* 1: empty, 0: members follow */
    if (more < 0) {
        tg_json_discard(&w);
        tg_set_error("%s: %s: extra metadata must be one JSON object", op, path);
        return NULL;
    }
    for (more = more == 0; more == 1; more = tg_json_next(&j, '}')) {
        char *k = extra_string(&j), *val = k && tg_json_expect(&j, ':') == 0 ? extra_string(&j) : NULL;
        bool own = k && (strcmp(k, "tgrad_train_state") == 0 || strcmp(k, "step") == 0 || strcmp(k, "optim") == 0 ||
                         strcmp(k, "rngs") == 0 || strncmp(k, "rng.", 4) == 0);
        if (own) tg_set_error("%s: %s: extra metadata uses the format's key \"%s\"", op, path, k);
        if (val && !own) tg_json_key(&w, k), tg_json_put_str(&w, val);
        free(k), free(val);
        if (!val || own) {
            if (!own) tg_set_error("%s: %s: extra metadata: %s", op, path, j.why[0] ? j.why : "not a string value");
            tg_json_discard(&w);
            return NULL;
        }
    }
    tg_json_skip_ws(&j);
    if (more < 0 || j.p != j.end) {
        tg_set_error("%s: %s: extra metadata must be one JSON object: %s", op, path,
                     j.why[0] ? j.why : "text after it");
        tg_json_discard(&w);
        return NULL;
    }
    tg_json_end(&w);
    char *text = tg_json_finish(&w, op);
    return text;
}

int tg_train_state_save_meta(const char *path, const tg_params *model, tg_optim *opt, int64_t step,
                             const tg_named_rng *rngs, int n_rngs, const char *extra_json) {
    const char *op = "train_state_save";
    if (check_args(op, path, model, opt, rngs, n_rngs) != 0) return -1;
    if (step < 0) {
        tg_set_error("%s: %s: negative step %lld", op, path, (long long)step);
        return -1;
    }
    char *meta = state_metadata(op, path, step, tg_optim_kind(opt), rngs, n_rngs, extra_json);
    if (!meta) return -1;
    tg_params all;
    int rc = all_tensors(&all, model, opt);
    if (rc == 0) {
        rc = check_before_save(op, path, &all, opt, step);
        if (rc == 0) {
            rc = tg_checkpoint_save(path, &all, meta);
            if (rc != 0) tg__error_rename("checkpoint_save", op, path); /* under this function's name */
        }
        tg_params_free(&all);
    }
    free(meta);
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
        tg__error_rename("safetensors_open", op, path);
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
    /* The optimizer's row: a state saved by another kind (Adam's into
     * AdamW: the same tensors) is refused by name; a file without the key
     * (written before it was kept) is checked by its tensors alone. */
    if (!why[0] && meta(&st, "optim", v, sizeof v) >= 0 && strcmp(v, tg_optim_kind(opt)->name) != 0)
        snprintf(why, sizeof why, "optimizer '%.40s' in the file, '%s' given", v, tg_optim_kind(opt)->name);
    int rc = -1;
    tg_params all;
    if (all_tensors(&all, model, opt) != 0) {
        tg_safetensors_close(&st);
        return -1;
    }
    if (!why[0]) check_file_optim(&st, &all, opt, got_step, why, sizeof why);
    if (why[0]) {
        tg_set_error("%s: %s: %s", op, path, why);
    } else {
        rc = tg_checkpoint_load_from(&st, path, &all); /* checks everything, then copies */
        if (rc != 0) tg__error_rename("checkpoint_load", op, path);
    }
    tg_params_free(&all);
    if (rc == 0) {
        *step = (int64_t)got_step;
        for (int i = 0; i < n_rngs; i++) *rngs[i].rng = got[i];
    }
    tg_safetensors_close(&st);
    return rc;
}
