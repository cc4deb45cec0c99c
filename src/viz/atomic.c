/* A copy of src/io/file.c's atomic writer on purpose: viz stands alone (it could be lifted into another project as is).
 *
 * Writing a file so that readers only ever see the old or the new whole file.
 *
 * The bytes go to a temporary "<path>.tmp.<pid>.XXXXXX" in the target's
 * directory, created exclusively by mkstemp (O_CREAT | O_EXCL: a symlink
 * planted at that name makes it fail instead of being followed), then the
 * temporary is renamed over path. Every writer has its own temporary, so
 * concurrent writers of one path never fail or tear it: the last rename
 * wins. Temporaries of the same path whose writer is gone (killed mid-save:
 * its pid no longer runs) are removed before a new one is made. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "viz_internal.h"

/* Removes "<base>.tmp.<pid>.*" in dir for every pid that no longer runs. */
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
        char full[4096];
        if (snprintf(full, sizeof full, "%s/%s", dir, name) < (int)sizeof full) unlink(full);
    }
    closedir(d);
}

FILE *viz_atomic_open(const char *path, char **tmp, const char *fn) {
    *tmp = NULL;
    size_t len = strlen(path);
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    char *name = malloc(len + 32);
    if (!dir || !name) {
        free(dir);
        free(name);
        viz_error("%s: out of memory", fn);
        return NULL;
    }
    remove_stale_temps(dir, slash ? slash + 1 : path);
    free(dir);
    snprintf(name, len + 32, "%s.tmp.%ld.XXXXXX", path, (long)getpid());
    int fd = mkstemp(name);
    if (fd < 0) {
        viz_error("%s: cannot create a temporary file beside '%s': %s", fn, path, strerror(errno));
        free(name);
        return NULL;
    }
    /* mkstemp makes the file 0600; give it the mode a plain fopen would. */
    mode_t mask = umask(0);
    umask(mask);
    fchmod(fd, 0666 & ~mask);
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        viz_error("%s: cannot open '%s': %s", fn, name, strerror(errno));
        close(fd);
        unlink(name);
        free(name);
        return NULL;
    }
    *tmp = name;
    return f;
}

int viz_atomic_close(FILE *f, char *tmp, const char *path, int failed, const char *fn) {
    int e = 0;
    if (fflush(f) != 0) /* no fsync: a figure need not survive a power cut */
        e = errno;
    if (fclose(f) != 0 && !e) e = errno;
    int rc = 0;
    if (failed) {
        rc = -1; /* the caller has reported why */
    } else if (e) {
        rc = viz_error("%s: writing '%s' failed: %s", fn, tmp, strerror(e));
    } else if (rename(tmp, path) != 0) {
        rc = viz_error("%s: cannot rename '%s' to '%s': %s", fn, tmp, path, strerror(errno));
    }
    if (rc != 0) unlink(tmp);
    free(tmp);
    return rc;
}
