/*
 * pidfile.c - the pid file as other processes see it: a strict reader (a
 * truncated or foreign file must never turn into kill(0, ...) or a random
 * pid) and removal that checks ownership first.
 */
#include "pidfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int pidfile_read(const char *path, pid_t *pid)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
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

int pidfile_unlink_if(const char *path, pid_t pid)
{
    pid_t held;
    if (pidfile_read(path, &held) < 0)
        return -1;
    if (held != pid) {
        errno = EPERM;
        return -1;
    }
    return unlink(path);
}

void pidfile_remove_own(const char *path, pid_t pid)
{
    char old[PATH_MAX + 8];
    pidfile_unlink_if(path, pid);
    if (snprintf(old, sizeof old, "%s.oldbin", path) < (int)sizeof old)
        pidfile_unlink_if(old, pid);
}
