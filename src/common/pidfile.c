/*
 * pidfile.c - the master's pid file. Written as root, usually in a
 * directory such as /run/pagid, so never a way to make root truncate
 * another file: no symlink is followed (O_NOFOLLOW), only a regular file
 * with one link, owned by us, is reused, and it is truncated only after
 * those checks. Read strictly (a truncated or foreign file must never turn
 * into kill(0, ...) or a random pid), and removed only while it names us,
 * so a master exiting after a binary upgrade never deletes its successor's.
 */
#include "pidfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "path.h"

int pidfile_read(const char *path, pid_t *pid)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return -1;
    char buf[32];
    ssize_t n;
    do
        n = read(fd, buf, sizeof buf - 1);
    while (n < 0 && errno == EINTR);
    int saved = errno;
    close(fd);
    if (n < 0) {
        errno = saved;
        return -1;
    }
    size_t len = (size_t)n;
    if (len && buf[len - 1] == '\n')
        len--;
    /* Ten digits hold INT_MAX; anything longer is not a pid file of ours. */
    if (len == 0 || len > 10) {
        errno = EINVAL;
        return -1;
    }
    long long v = 0;
    for (size_t i = 0; i < len; i++) {
        if (buf[i] < '0' || buf[i] > '9') {
            errno = EINVAL;
            return -1;
        }
        v = v * 10 + (buf[i] - '0');
    }
    if (v > INT_MAX) {
        errno = EINVAL;
        return -1;
    }
    *pid = (pid_t)v;
    return 0;
}

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
    return path_creatable(path, err, errlen);
}

int pidfile_remove(const char *path, pid_t pid)
{
    struct stat st;
    pid_t held;
    /* Never through a link, never anything but a regular file. */
    if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode))
        return -1;
    if (pidfile_read(path, &held) < 0)
        return -1;
    if (held != pid) {
        errno = EPERM; /* someone else's by now (a new master after an upgrade) */
        return -1;
    }
    return unlink(path);
}

void pidfile_remove_own(const char *path, pid_t pid)
{
    char old[PATH_MAX + 8];
    pidfile_remove(path, pid);
    if (snprintf(old, sizeof old, "%s.oldbin", path) < (int)sizeof old)
        pidfile_remove(old, pid);
}
