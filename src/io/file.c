/* Whole-file reads and atomic replacement: see file.h for the rules. */
#include "file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* A read-only descriptor of path, which must be a regular file (its stat in
 * *sb), or -1 with the error recorded ("<op>: NULL path" for NULL). O_NONBLOCK: opening a FIFO with no
 * writer would otherwise block for ever; it changes nothing for a regular
 * file. */
static int open_regular(const char *path, const char *op, struct stat *sb) {
    if (!path) {
        tg_set_error("%s: NULL path", op);
        return -1;
    }
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        tg_set_error("%s: %s: %s", op, path, strerror(errno));
        return -1;
    }
    if (fstat(fd, sb) != 0 || !S_ISREG(sb->st_mode)) {
        tg_set_error("%s: %s: not a regular file", op, path);
        close(fd);
        return -1;
    }
    return fd;
}

int tg_read_file(const char *path, const char *op, unsigned char **buf, size_t *size) {
    *buf = NULL;
    *size = 0;
    struct stat sb;
    int fd = open_regular(path, op, &sb);
    if (fd < 0) return -1;
    size_t n = (size_t)sb.st_size;
    unsigned char *b = tg_sys_alloc(n ? n : 1);
    if (!b) {
        tg_set_error("%s: %s: out of memory for %zu bytes", op, path, n);
        close(fd);
        return -1;
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, b + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (got != n) {
        tg_set_error("%s: %s: read error (%zu of %zu bytes)", op, path, got, n);
        tg_sys_free(b);
        return -1;
    }
    *buf = b;
    *size = n;
    return 0;
}

int tg_map_file(const char *path, const char *op, const unsigned char **buf, size_t *size) {
    static const unsigned char empty[1];
    *buf = NULL;
    *size = 0;
    struct stat sb;
    int fd = open_regular(path, op, &sb);
    if (fd < 0) return -1;
    if (sb.st_size == 0) { /* mmap of length 0 is an error */
        close(fd);
        *buf = empty;
        return 0;
    }
    if ((uint64_t)sb.st_size > (uint64_t)SIZE_MAX) {
        tg_set_error("%s: %s: file too large to map", op, path);
        close(fd);
        return -1;
    }
    void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd); /* the mapping keeps the file open */
    if (m == MAP_FAILED) {
        tg_set_error("%s: %s: mmap failed: %s", op, path, strerror(errno));
        return -1;
    }
    *buf = m;
    *size = (size_t)sb.st_size;
    return 0;
}

void tg_unmap_file(const unsigned char *buf, size_t size) {
    if (buf && size) munmap((void *)buf, size);
}

/* The directory part of path ("." when there is none), tg_sys_alloc'd. */
static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    size_t n = !slash ? 1 : slash == path ? 1 : (size_t)(slash - path);
    char *dir = tg_sys_alloc(n + 1);
    if (!dir) return NULL;
    memcpy(dir, slash ? path : ".", n);
    dir[n] = '\0';
    return dir;
}

/* Removes "<base>.tmp.<pid>.*" in dir for every pid that no longer runs.
 * src/viz/atomic.c has its own copy on purpose (viz stands alone): a fix
 * here belongs there too. */
static void remove_stale_temps(const char *dir, const char *base) {
    DIR *d = opendir(dir);
    if (!d) return;
    size_t blen = strlen(base);
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *name = e->d_name;
        if (strncmp(name, base, blen) != 0 || strncmp(name + blen, ".tmp.", 5) != 0) continue;
        char *end;
        long pid = strtol(name + blen + 5, &end, 10);
        if (end == name + blen + 5 || *end != '.' || pid <= 0 || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive, or not ours to judge */
        size_t n = strlen(dir) + strlen(name) + 2;
        char *full = tg_sys_alloc(n);
        if (!full) break;
        snprintf(full, n, "%s/%s", dir, name);
        unlink(full);
        tg_sys_free(full);
    }
    closedir(d);
}

int tg_atomic_begin(tg_atomic_file *af, const char *path, const char *op) {
    af->f = NULL;
    af->path = path;
    size_t len = strlen(path) + 40;
    af->tmp = tg_sys_alloc(len);
    char *dir = dir_of(path);
    if (!af->tmp || !dir) {
        tg_set_error("%s: %s: out of memory", op, path);
        tg_sys_free(af->tmp);
        tg_sys_free(dir);
        af->tmp = NULL;
        return -1;
    }
    const char *slash = strrchr(path, '/');
    remove_stale_temps(dir, slash ? slash + 1 : path);
    tg_sys_free(dir);
    snprintf(af->tmp, len, "%s.tmp.%ld.XXXXXX", path, (long)getpid());
    int fd = mkstemp(af->tmp);
    if (fd >= 0) {
        /* mkstemp makes the file 0600; give it the mode a plain fopen would. */
        mode_t mask = umask(0);
        umask(mask);
        fchmod(fd, 0666 & ~mask);
        af->f = fdopen(fd, "wb");
        if (!af->f) close(fd);
    }
    if (!af->f) {
        tg_set_error("%s: %s: cannot create a temporary file beside it: %s", op, path, strerror(errno));
        if (fd >= 0) unlink(af->tmp);
        tg_sys_free(af->tmp);
        af->tmp = NULL;
        return -1;
    }
    return 0;
}

void tg_atomic_abort(tg_atomic_file *af) {
    if (af->f) fclose(af->f);
    if (af->tmp) {
        unlink(af->tmp);
        tg_sys_free(af->tmp);
    }
    af->f = NULL;
    af->tmp = NULL;
}

/* Makes the rename itself durable; best effort, a failure changes nothing
 * the caller could act on. */
static void sync_parent_dir(const char *path) {
    char *dir = dir_of(path);
    if (!dir) return;
    int fd = open(dir, O_RDONLY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    tg_sys_free(dir);
}

int tg_atomic_commit(tg_atomic_file *af, const char *op) {
    const char *why = NULL;
    int err = 0;
    if (ferror(af->f))
        why = "write error", err = EIO;
    else if (fflush(af->f) != 0)
        why = "write error", err = errno;
    else if (fsync(fileno(af->f)) != 0)
        why = "fsync failed", err = errno;
    int rc = fclose(af->f);
    af->f = NULL;
    if (!why && rc != 0) why = "close failed", err = errno;
    if (!why && rename(af->tmp, af->path) != 0) why = "rename failed", err = errno;
    if (why) {
        tg_set_error("%s: %s: %s: %s", op, af->path, why, strerror(err));
        tg_atomic_abort(af);
        return -1;
    }
    tg_sys_free(af->tmp);
    af->tmp = NULL;
    sync_parent_dir(af->path);
    return 0;
}
