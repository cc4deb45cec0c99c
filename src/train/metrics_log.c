/* The metrics log (train.h): one JSON object per line, flushed per line. */
#include "train.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct tg_metrics_log {
    FILE *f;
    bool failed; /* a write failed: reported again by close */
};

tg_metrics_log *tg_metrics_log_open(const char *path, bool append) {
    if (!path) {
        tg_set_error("metrics_log: NULL path");
        return NULL;
    }
    /* O_NONBLOCK and the fstat: a FIFO or a device is refused at once
     * instead of blocking the training run (as io/file.h's reads). */
    int fd = open(path, O_WRONLY | O_CREAT | O_NONBLOCK | O_CLOEXEC | (append ? O_APPEND : 0), 0666);
    if (fd < 0) {
        tg_set_error("metrics_log: %s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        tg_set_error("metrics_log: %s: not a regular file", path);
        close(fd);
        return NULL;
    }
    /* Truncated only now that it is known to be a regular file. */
    if (!append && ftruncate(fd, 0) != 0) {
        tg_set_error("metrics_log: %s: cannot truncate: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    tg_metrics_log *log = tg_sys_calloc(1, sizeof *log);
    FILE *f = log ? fdopen(fd, append ? "a" : "w") : NULL;
    if (!f) {
        tg_set_error("metrics_log: %s: %s", path, log ? strerror(errno) : "out of memory");
        tg_sys_free(log);
        close(fd);
        return NULL;
    }
    log->f = f;
    return log;
}

/* The shortest of %.15g, %.16g, %.17g that reads back as v; null for NaN
 * and infinities, which JSON cannot write. */
static void number(char *buf, size_t cap, double v) {
    if (!isfinite(v)) {
        snprintf(buf, cap, "null");
        return;
    }
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) return;
    }
}

int tg_metrics_log_write(tg_metrics_log *log, const tg_metrics *m) {
    if (!log || !m) {
        tg_set_error("metrics_log_write: NULL %s", !log ? "log" : "metrics");
        return -1;
    }
    char lr[32], loss[32], val[32], tps[32], gn[32];
    number(lr, sizeof lr, m->lr);
    number(loss, sizeof loss, m->loss);
    number(val, sizeof val, m->val_loss);
    number(tps, sizeof tps, m->tokens_per_s);
    number(gn, sizeof gn, m->grad_norm);
    int n = fprintf(log->f,
                    "{\"step\": %lld, \"lr\": %s, \"loss\": %s, \"val_loss\": %s, \"tokens_per_s\": %s, "
                    "\"grad_norm\": %s}\n",
                    (long long)m->step, lr, loss, val, tps, gn);
    if (n < 0 || fflush(log->f) != 0) {
        log->failed = true;
        tg_set_error("metrics_log_write: write failed: %s", strerror(errno));
        return -1;
    }
    return 0;
}

int tg_metrics_log_close(tg_metrics_log *log) {
    if (!log) return 0;
    int rc = fclose(log->f) != 0 || log->failed ? -1 : 0;
    if (rc) tg_set_error("metrics_log_close: a write failed");
    tg_sys_free(log);
    return rc;
}
