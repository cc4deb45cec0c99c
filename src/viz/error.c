/* The viz layer's error message. viz stands alone, so it keeps its own
 * message instead of using the tensor layer's; one per thread, so two
 * threads drawing figures do not overwrite each other's message. */
#include <stdarg.h>
#include <stdio.h>

#include "viz_internal.h"

/* Room for two paths of PATH_MAX (4096 on Linux: "cannot rename '<tmp>' to
 * '<path>'") and a reason, so no message is cut for a path the system
 * accepts. */
static _Thread_local char viz_msg[3 * 4096 + 1024];
static _Thread_local int viz_has_msg;

const char *tg_viz_last_error(void) { return viz_has_msg ? viz_msg : NULL; }

void tg_viz_clear_error(void) {
    viz_has_msg = 0;
    viz_msg[0] = '\0';
}

int viz_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(viz_msg, sizeof viz_msg, fmt, ap);
    va_end(ap);
    viz_has_msg = 1;
    return -1;
}
