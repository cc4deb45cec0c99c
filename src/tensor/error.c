/* The error convention: one message, set by the function that saw bad input,
 * kept while NULL propagates down a chain of calls. */
#include "tensor.h"
#include "tensor_internal.h"

#include <stdarg.h>
#include <string.h>

/* Room for two paths of PATH_MAX (4096 bytes on Linux, e.g. a file and the
 * one it is renamed to) and a reason, so that no message is cut mid-reason
 * for any path the system accepts. One message for the process, not one
 * per thread (the pool's workers run kernels, which record none). */
static char g_msg[3 * 4096 + 1024];
static bool g_has;

const char *tg_last_error(void) { return g_has ? g_msg : NULL; }

void tg_clear_error(void) {
    g_has = false;
    g_msg[0] = 0;
}

void tg_set_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_msg, sizeof g_msg, fmt, ap);
    va_end(ap);
    g_has = true;
}

void tg_error_null(const char *op) {
    if (!g_has) tg_set_error("%s: NULL input", op);
}

/* In place, so a message of any length is renamed whole (a copy through a
 * local buffer of some size is what used to cut long paths). */
void tg__error_rename(const char *from, const char *to, const char *fallback) {
    if (!g_has) {
        tg_set_error("%s: %s", to, fallback ? fallback : "failed");
        return;
    }
    size_t lf = strlen(from), lt = strlen(to), skip = 0;
    if (strncmp(g_msg, from, lf) == 0 && g_msg[lf] == ':' && g_msg[lf + 1] == ' ') skip = lf + 2;
    size_t rest = strlen(g_msg + skip);
    if (lt + 2 + rest > sizeof g_msg - 1) rest = sizeof g_msg - 1 - (lt + 2); /* only a message near the cap */
    memmove(g_msg + lt + 2, g_msg + skip, rest);
    memcpy(g_msg, to, lt);
    memcpy(g_msg + lt, ": ", 2);
    g_msg[lt + 2 + rest] = '\0';
}

const char *tg_shape_str(char *buf, int ndim, const int *shape) {
    int n = 0;
    n += snprintf(buf + n, 64 - n, "(");
    for (int i = 0; i < ndim && n < 60; i++) n += snprintf(buf + n, 64 - n, i ? ",%d" : "%d", shape[i]);
    if (n < 63) snprintf(buf + n, 64 - n, ")");
    return buf;
}

const char *tg_tshape(char *buf, const tg_tensor *t) {
    if (!t) {
        snprintf(buf, 64, "NULL");
        return buf;
    }
    return tg_shape_str(buf, t->ndim, t->shape);
}

void tg__list_append(char *buf, size_t cap, int k, int n, const char *name) {
    size_t len = strlen(buf);
    snprintf(buf + len, cap - len, "%s%s", k == 0 ? "" : k == n - 1 ? " or " : ", ", name);
}
