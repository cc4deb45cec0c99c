/* A named list of tensors (see params.h). The list grows by doubling; it
 * holds pointers only, the tensors belong to their module. */
#include "params.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void tg_params_init(tg_params *p) {
    if (!p) return;
    p->items = NULL;
    p->n = 0;
    p->cap = 0;
}

/* Makes room for `extra` more items. tensor.h has counted allocators but no
 * realloc, so growing is alloc + copy + free. */
static int reserve(tg_params *p, int extra, const char *op) {
    if (extra <= p->cap - p->n) return 0;
    int cap = p->cap ? p->cap : 8;
    while (cap - p->n < extra) cap *= 2;
    tg_param *items = tg_sys_alloc((size_t)cap * sizeof *items);
    if (!items) {
        tg_set_error("%s: out of memory for %d parameters", op, cap);
        return -1;
    }
    if (p->n) memcpy(items, p->items, (size_t)p->n * sizeof *items);
    tg_sys_free(p->items);
    p->items = items;
    p->cap = cap;
    return 0;
}

/* Writes prefix + "." + name (or name alone) into out; -1 when too long,
 * without recording an error (callers word their own). */
static int join_name(char out[TG_PARAM_NAME_MAX], const char *prefix, const char *name) {
    size_t lp = (prefix && *prefix) ? strlen(prefix) : 0;
    size_t ln = strlen(name);
    size_t total = lp ? lp + 1 + ln : ln;
    if (total > TG_PARAM_NAME_MAX - 1) return -1;
    if (lp) {
        memcpy(out, prefix, lp);
        out[lp] = '.';
        memcpy(out + lp + 1, name, ln + 1);
    } else {
        memcpy(out, name, ln + 1);
    }
    return 0;
}

int tg_param_name(char out[TG_PARAM_NAME_MAX], const char *prefix, const char *name) {
    if (!out || !name) {
        tg_set_error("param_name: NULL %s", !out ? "output" : "name");
        return -1;
    }
    if (join_name(out, prefix, name) != 0) {
        out[0] = '\0';
        tg_set_error("param_name: name '%s%s%s' is longer than %d characters", prefix && *prefix ? prefix : "",
                     prefix && *prefix ? "." : "", name, TG_PARAM_NAME_MAX - 1);
        return -1;
    }
    return 0;
}

static int find(const tg_params *p, const char *name) {
    for (int i = 0; i < p->n; i++)
        if (strcmp(p->items[i].name, name) == 0) return i;
    return -1;
}

int tg_params_add(tg_params *p, const char *prefix, const char *name, tg_tensor *t) {
    if (!p || !name || !t) {
        tg_set_error("params_add: NULL %s", !p ? "list" : !name ? "name" : "tensor");
        return -1;
    }
    char full[TG_PARAM_NAME_MAX];
    if (*name == '\0') {
        tg_set_error("params_add: empty name");
        return -1;
    }
    if (join_name(full, prefix, name) != 0) {
        tg_set_error("params_add: name '%s%s%s' is longer than %d characters", prefix && *prefix ? prefix : "",
                     prefix && *prefix ? "." : "", name, TG_PARAM_NAME_MAX - 1);
        return -1;
    }
    if (find(p, full) >= 0) {
        tg_set_error("params_add: duplicate name '%s'", full);
        return -1;
    }
    if (reserve(p, 1, "params_add") != 0) return -1;
    memcpy(p->items[p->n].name, full, sizeof full);
    p->items[p->n].t = t;
    p->n++;
    return 0;
}

/* All or nothing: every name is checked before the first one is appended. */
int tg_params_extend(tg_params *p, const char *prefix, const tg_params *src) {
    if (!p || !src) {
        tg_set_error("params_extend: NULL %s", !p ? "list" : "source list");
        return -1;
    }
    int n = src->n;
    char full[TG_PARAM_NAME_MAX];
    for (int i = 0; i < n; i++) {
        const char *name = src->items[i].name;
        if (join_name(full, prefix, name) != 0) {
            tg_set_error("params_extend: name '%s%s%s' is longer than %d characters", prefix ? prefix : "",
                         prefix ? "." : "", name, TG_PARAM_NAME_MAX - 1);
            return -1;
        }
        if (find(p, full) >= 0) {
            tg_set_error("params_extend: duplicate name '%s'", full);
            return -1;
        }
        /* Two source names can collide after prefixing only if the source
         * itself had duplicates; check anyway so the list stays unique. */
        for (int j = 0; j < i; j++)
            if (strcmp(src->items[j].name, name) == 0) {
                tg_set_error("params_extend: duplicate name '%s'", full);
                return -1;
            }
    }
    if (reserve(p, n, "params_extend") != 0) return -1;
    /* src may be p itself: items was just reallocated, so index afresh. */
    for (int i = 0; i < n; i++) {
        join_name(full, prefix, src->items[i].name);
        memcpy(p->items[p->n].name, full, sizeof full);
        p->items[p->n].t = src->items[i].t;
        p->n++;
    }
    return 0;
}

tg_tensor *tg_params_get(const tg_params *p, const char *name) {
    if (!p || !name) return NULL;
    int i = find(p, name);
    return i >= 0 ? p->items[i].t : NULL;
}

int64_t tg_params_numel(const tg_params *p) {
    int64_t n = 0;
    if (!p) return 0;
    for (int i = 0; i < p->n; i++)
        if (p->items[i].t) n += p->items[i].t->size;
    return n;
}

bool tg_params_first_nonfinite(const tg_params *p, int *item, int64_t *index) {
    for (int i = 0; p && i < p->n; i++) {
        const tg_tensor *t = p->items[i].t;
        if (!t || !t->data) continue;
        for (int64_t k = 0; k < t->size; k++)
            if (!isfinite(t->data[k])) {
                if (item) *item = i;
                if (index) *index = k;
                return true;
            }
    }
    return false;
}

/* "nan" whatever its sign bit (printf would show "-nan"), "inf" or "-inf". */
static const char *nonfinite_word(double x) {
    if (isnan(x)) return "nan";
    return x > 0 ? "inf" : "-inf";
}

int tg_params_check_finite(const tg_params *p, const char *op) {
    if (!op) op = "params_check_finite";
    if (!p) {
        tg_set_error("%s: NULL parameter list", op);
        return -1;
    }
    int i;
    int64_t k;
    if (!tg_params_first_nonfinite(p, &i, &k)) return 0;
    tg_set_error("%s: tensor '%s' holds %s at index %lld", op, p->items[i].name,
                 nonfinite_word((double)p->items[i].t->data[k]), (long long)k);
    return -1;
}

void tg_params_free(tg_params *p) {
    if (!p) return;
    tg_sys_free(p->items);
    tg_params_init(p);
}

int tg_rngs_add(tg_rngs *l, const char *name, tg_rng *rng) {
    if (!l || !name) {
        tg_set_error("rngs_add: NULL %s", !l ? "list" : "name");
        return -1;
    }
    if (!rng) return 0;
    if (l->n >= TG_RNGS_MAX || strlen(name) >= sizeof l->name[0]) {
        tg_set_error("rngs_add: '%s': %s", name,
                     l->n >= TG_RNGS_MAX ? "the list is full (TG_RNGS_MAX generators)" : "name of 32 bytes or more");
        return -1;
    }
    snprintf(l->name[l->n], sizeof l->name[0], "%s", name);
    l->item[l->n] = (tg_named_rng){l->name[l->n], rng};
    l->n++;
    return 0;
}
