/* The error convention: one message, set by the function that saw bad input,
 * kept while NULL propagates down a chain of calls. */
#include "tensor.h"

#include <stdarg.h>
#include <string.h>

static char g_msg[512];
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
