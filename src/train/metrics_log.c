/* The metrics log (train.h): one JSON object per line, flushed per line. */
#include "train.h"

#include "../io/file.h"
#include "../io/json.h"

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
    /* O_NOFOLLOW: a symlink planted at the log's name is refused, never
     * followed into another file. */
    int fd = open(path, O_WRONLY | O_CREAT | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW | (append ? O_APPEND : 0), 0666);
    if (fd < 0) {
        tg_set_error("metrics_log: %s: %s", path,
                     errno == ELOOP ? "a symbolic link; refusing to follow it" : strerror(errno));
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

int tg_metrics_log_write(tg_metrics_log *log, const tg_metrics *m) {
    if (!log || !m) {
        tg_set_error("metrics_log_write: NULL %s", !log ? "log" : "metrics");
        return -1;
    }
    /* Numbers that read back to the bit (io/json.h); null for NaN and
     * infinities, which JSON cannot write. */
    const char *keys[5] = {"lr", "loss", "val_loss", "tokens_per_s", "grad_norm"};
    const double vals[5] = {m->lr, m->loss, m->val_loss, m->tokens_per_s, m->grad_norm};
    tg_json_writer w = {0};
    tg_json_begin(&w, '{');
    tg_json_key(&w, "step"), tg_json_put_int(&w, m->step);
    for (int i = 0; i < 5; i++) tg_json_key(&w, keys[i]), tg_json_put_number(&w, vals[i]);
    tg_json_end(&w);
    char *line = tg_json_finish(&w, "metrics_log_write");
    if (!line) return -1;
    int n = fprintf(log->f, "%s\n", line);
    free(line);
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

/* One line of the log into m: the object tg_metrics_log_write writes (keys
 * in any order, others skipped). 0, or -1 for anything else. */
static int parse_line(const char *line, size_t n, tg_metrics *m) {
    tg_json j = {.p = line, .end = line + n, .start = line};
    *m = (tg_metrics){0, NAN, NAN, NAN, NAN, NAN};
    bool have_step = false;
    int empty = tg_json_open(&j, '{', '}'), more = empty == 0; /* 1 while items follow */
    if (empty < 0) return -1;
    while (more == 1) {
        char key[32];
        double v = NAN;
        if (tg_json_string(&j, key, sizeof key, NULL) || tg_json_expect(&j, ':')) return -1;
        tg_json_skip_ws(&j);
        if (strcmp(key, "step") == 0) {
            uint64_t st;
            if (tg_json_uint(&j, &st, "step") || st < 1 || st > (uint64_t)INT64_MAX / 2) return -1;
            m->step = (int64_t)st, have_step = true;
        } else if (!tg_json_null(&j)) {
            bool known = strcmp(key, "lr") == 0 || strcmp(key, "loss") == 0 || strcmp(key, "val_loss") == 0 ||
                         strcmp(key, "tokens_per_s") == 0 || strcmp(key, "grad_norm") == 0;
            if (known ? tg_json_number(&j, &v, key) : tg_json_skip_value(&j, 0)) return -1;
        }
        if (strcmp(key, "lr") == 0) m->lr = v;
        if (strcmp(key, "loss") == 0) m->loss = v;
        if (strcmp(key, "val_loss") == 0) m->val_loss = v;
        if (strcmp(key, "tokens_per_s") == 0) m->tokens_per_s = v;
        if (strcmp(key, "grad_norm") == 0) m->grad_norm = v;
        more = tg_json_next(&j, '}');
    }
    tg_json_skip_ws(&j);
    return more == 0 && have_step && j.p == j.end ? 0 : -1;
}

tg_metrics_log *tg_metrics_log_resume(const char *path, int64_t step, tg_metrics **lines, int64_t *n) {
    if (!path || !lines || !n || step < 0) {
        tg_set_error("metrics_log_resume: %s", !path || !lines || !n ? "NULL argument" : "negative step");
        return NULL;
    }
    *lines = NULL, *n = 0;
    if (step == 0) { /* a new log: an empty file put in place atomically (a symlink there is replaced) */
        tg_atomic_file af;
        if (tg_atomic_begin(&af, path, "metrics_log") != 0 || tg_atomic_commit(&af, "metrics_log") != 0) return NULL;
        return tg_metrics_log_open(path, true);
    }
    int fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
    struct stat sb;
    if (fd < 0 && errno == ENOENT) return tg_metrics_log_resume(path, 0, lines, n); /* lost: start it again */
    if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        tg_set_error("metrics_log: %s: %s", path,
                     fd < 0 ? (errno == ELOOP ? "a symbolic link; refusing to follow it" : strerror(errno))
                            : "not a regular file");
        if (fd >= 0) close(fd);
        return NULL;
    }
    size_t size = (size_t)sb.st_size;
    char *buf = tg_sys_alloc(size + 1);
    /* At most one kept line per step and per line of the file: sized by
     * the smaller, so a huge step (a state may hold up to INT64_MAX) neither
     * overflows the size nor asks for memory the file cannot fill. */
    int64_t cap = step < (int64_t)size ? step : (int64_t)size;
    tg_metrics *out = tg_sys_alloc(sizeof *out * (size_t)(cap > 0 ? cap : 1));
    size_t got = 0;
    while (buf && got < size) {
        ssize_t k = pread(fd, buf + got, size - got, (off_t)got);
        if (k <= 0) break;
        got += (size_t)k;
    }
    if (!buf || !out || got != size) {
        tg_set_error("metrics_log: %s: %s", path, !buf || !out ? "out of memory" : "read failed");
        tg_sys_free(buf), tg_sys_free(out), close(fd);
        return NULL;
    }
    /* Keep the lines up to the checkpoint's step, in order; cut at the
     * first that is torn (a kill mid-write), malformed, out of order or past
     * the step. Truncation keeps every earlier byte where it is. */
    size_t keep = 0;
    int64_t k = 0, last = 0;
    while (keep < size) {
        char *nl = memchr(buf + keep, '\n', size - keep);
        tg_metrics m;
        if (k == cap || !nl || parse_line(buf + keep, (size_t)(nl - (buf + keep)), &m) != 0 || m.step <= last ||
            m.step > step)
            break;
        out[k++] = m, last = m.step;
        keep = (size_t)(nl - buf) + 1;
    }
    tg_sys_free(buf);
    if (keep < size && ftruncate(fd, (off_t)keep) != 0) {
        tg_set_error("metrics_log: %s: cannot truncate: %s", path, strerror(errno));
        tg_sys_free(out), close(fd);
        return NULL;
    }
    close(fd);
    tg_metrics_log *log = tg_metrics_log_open(path, true);
    if (!log) {
        tg_sys_free(out);
        return NULL;
    }
    *lines = out, *n = k;
    return log;
}

int tg_metrics_log_read(const char *path, tg_metrics **lines, int64_t *n) {
    if (!path || !lines || !n) return tg_set_error("metrics_log_read: NULL argument"), -1;
    *lines = NULL, *n = 0;
    unsigned char *buf;
    size_t size;
    if (tg_read_file(path, "metrics_log_read", &buf, &size) != 0) return -1;
    int64_t cap = 1;
    for (size_t i = 0; i < size; i++) cap += buf[i] == '\n';
    tg_metrics *out = tg_sys_alloc(sizeof(tg_metrics) * (size_t)cap);
    if (!out) {
        tg_sys_free(buf);
        return tg_set_error("metrics_log_read: %s: out of memory for %lld lines", path, (long long)cap), -1;
    }
    const char *p = (const char *)buf, *end = p + size;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) break; /* a line still being written */
        if (parse_line(p, (size_t)(nl - p), &out[*n]) == 0) (*n)++;
        p = nl + 1;
    }
    tg_sys_free(buf);
    *lines = out;
    return 0;
}
