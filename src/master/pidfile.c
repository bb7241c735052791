/*
 * pidfile.c - the pid file. The master writes it as root, usually in a
 * directory such as /run/pagid, so it must not be a way to make root
 * truncate or overwrite another file: a symlink is never followed
 * (O_NOFOLLOW), only a regular file with one link, owned by us, is
 * reused, and it is truncated only after those checks (not O_TRUNC).
 */
#include "pidfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PIDFILE_MODE 0644 /* readable by anyone: scripts and pagid -s read it */

/* Why st (the file at the pid file's name) must not be written; NULL when fine. */
static const char *refusal(const struct stat *st, char *buf, size_t len)
{
    if (S_ISLNK(st->st_mode))
        return "is a symbolic link (a pid file is never written through one)";
    if (!S_ISREG(st->st_mode))
        return "is not a regular file";
    if (st->st_nlink > 1)
        return "has other hard links";
    if (st->st_uid != geteuid()) {
        snprintf(buf, len, "belongs to uid %lu, not to this process's uid %lu",
                 (unsigned long)st->st_uid, (unsigned long)geteuid());
        return buf;
    }
    return NULL;
}

/* The directory part of path ("." when there is none). */
static void dir_of(const char *path, char *out, size_t len)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(out, len, ".");
    else if (slash == path)
        snprintf(out, len, "/");
    else
        snprintf(out, len, "%.*s", (int)(slash - path), path);
}

int pidfile_write(const char *path, pid_t pid, char *err, size_t errlen)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC,
                  PIDFILE_MODE);
    if (fd < 0) {
        snprintf(err, errlen, "%s",
                 errno == ELOOP ? "is a symbolic link (a pid file is never written through one)"
                                : strerror(errno));
        return -1;
    }
    struct stat st;
    char why[128];
    const char *bad = fstat(fd, &st) < 0 ? strerror(errno) : refusal(&st, why, sizeof why);
    if (bad) {
        snprintf(err, errlen, "%s", bad);
        close(fd);
        return -1;
    }
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%d\n", (int)pid);
    /* The mode, whatever the umask (systemd's UMask=0027 would hide it). */
    if (ftruncate(fd, 0) < 0 || write(fd, buf, (size_t)n) != n ||
        ((st.st_mode & 07777) != PIDFILE_MODE && fchmod(fd, PIDFILE_MODE) < 0)) {
        snprintf(err, errlen, "%s", strerror(errno ? errno : EIO));
        close(fd);
        return -1;
    }
    if (close(fd) < 0) {
        snprintf(err, errlen, "%s", strerror(errno));
        return -1;
    }
    return 0;
}

int pidfile_check(const char *path, char *err, size_t errlen)
{
    struct stat st;
    char why[128];
    if (lstat(path, &st) == 0) {
        const char *bad = refusal(&st, why, sizeof why);
        if (!bad && faccessat(AT_FDCWD, path, W_OK, AT_EACCESS) < 0)
            bad = strerror(errno);
        if (bad) {
            snprintf(err, errlen, "%s", bad);
            return -1;
        }
        return 0;
    }
    if (errno != ENOENT) {
        snprintf(err, errlen, "%s", strerror(errno));
        return -1;
    }
    char dir[4096];
    dir_of(path, dir, sizeof dir);
    if (stat(dir, &st) < 0) {
        snprintf(err, errlen, "directory %s: %s", dir, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s is not a directory", dir);
        return -1;
    }
    if (faccessat(AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS) < 0) {
        snprintf(err, errlen, "cannot create it in %s: %s", dir, strerror(errno));
        return -1;
    }
    return 0;
}

int pidfile_remove(const char *path, pid_t pid)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    char buf[32];
    ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? read(fd, buf, sizeof buf - 1) : -1;
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    /* Someone else's by now (a new master after an upgrade): not ours to remove. */
    if (atol(buf) != (long)pid)
        return -1;
    return unlink(path);
}
