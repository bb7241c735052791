/*
 * log.c - the error log. Lines go to stderr with a syslog priority prefix
 * ("<3>") that journald turns into the line's level, or to a file with a
 * timestamp. One write(2) per line so workers sharing the fd do not
 * interleave partial lines.
 */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "path.h"

static int log_fd = 2;
static log_level log_max = LOG_LVL_INFO;
static char log_path[4096];
static char log_role[32] = "pagid";

static const char *const level_names[] = {"error", "warn", "info", "debug"};
/* Human lines on standard error (--dev, a terminal): 0 off, 1 plain, 2 in colour. */
static int log_human;
/* The process's fd 2 follows the log file (log_capture_stderr). */
static int log_stderr_captured;
static const char *const level_colours[] = {"\033[1;31m", "\033[33m", "\033[32m", "\033[2m"};
static const int syslog_prio[] = {3, 4, 6, 7};

int log_open(const char *path, log_level level)
{
    log_max = level;
    if (!path || !*path || strcmp(path, "stderr") == 0) {
        log_path[0] = '\0';
        log_fd = 2;
        return 0;
    }
    snprintf(log_path, sizeof log_path, "%s", path);
    return log_reopen();
}

/* Can anyone but root create or rename names in path's directory? */
static int dir_writable_by_others(const char *path)
{
    char dir[4096];
    path_dir_of(path, dir, sizeof dir);
    struct stat st;
    if (stat(dir, &st) < 0)
        return 1; /* cannot tell: be careful */
    return st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH));
}

/*
 * Does a directory on the way to path's file come through a symbolic link
 * that sits in a directory others can write? Such a link could have been
 * planted to send root's appends anywhere (a link in a root-only directory,
 * like /var/run -> /run, is the system's own and fine).
 */
static int planted_link_on_the_way(const char *path)
{
    char prefix[4096];
    size_t len = strlen(path);
    if (len >= sizeof prefix)
        return 1; /* cannot tell: be careful */
    const char *last = strrchr(path, '/');
    for (const char *p = path; last && p <= last; p++) {
        if (*p != '/' || p == path)
            continue;
        /* prefix = path up to this slash: a directory component. */
        memcpy(prefix, path, (size_t)(p - path));
        prefix[p - path] = '\0';
        struct stat st;
        if (lstat(prefix, &st) < 0)
            return 0; /* the open fails anyway */
        if (S_ISLNK(st.st_mode) && dir_writable_by_others(prefix))
            return 1;
    }
    return 0;
}

int log_open_append(const char *path, int create, int extra_flags)
{
    int flags = O_WRONLY | O_APPEND | O_NOCTTY | O_CLOEXEC | extra_flags | (create ? O_CREAT : 0);
    if (geteuid() == 0 && planted_link_on_the_way(path)) {
        errno = ELOOP;
        return -1;
    }
    if (geteuid() != 0 || !dir_writable_by_others(path))
        return open(path, flags, 0640);
    /* Root in a directory others can write (a log directory owned by the
     * workers' user, say): whoever writes there could plant a symlink or a
     * hard link and have root append to any file. Follow neither; only a
     * regular file, opened without blocking on a planted FIFO. */
    int fd = open(path, flags | O_NOFOLLOW | O_NONBLOCK, 0640);
    if (fd < 0)
        return -1;
    struct stat st;
    int bad = fstat(fd, &st) < 0     ? errno
              : !S_ISREG(st.st_mode) ? EINVAL
              : st.st_nlink > 1      ? EMLINK
                                     : 0;
    int fl = bad ? 0 : fcntl(fd, F_GETFL);
    if (!bad && !(extra_flags & O_NONBLOCK) && (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0))
        bad = errno;
    if (bad) {
        close(fd);
        errno = bad;
        return -1;
    }
    return fd;
}

const char *log_open_strerror(int errnum)
{
    switch (errnum) {
    case ELOOP:
        return "a symbolic link in a directory other users can write (not followed as root)";
    case EMLINK:
        return "a file with other hard links in a directory other users can write (refused as "
               "root)";
    case EINVAL:
        return "not a regular file, in a directory other users can write (refused as root)";
    default:
        return strerror(errnum);
    }
}

int log_reopen(void)
{
    if (!log_path[0])
        return 0;
    int fd = log_open_append(log_path, 1, 0);
    if (fd < 0)
        return -1;
    if (log_fd > 2)
        close(log_fd);
    log_fd = fd;
    if (log_stderr_captured)
        dup2(fd, 2); /* a reopened (rotated) log: the app's stderr follows */
    return 0;
}

int log_file_fd(void)
{
    return log_path[0] && log_fd > 2 ? log_fd : -1;
}

void log_adopt_fd(int fd)
{
    if (fd < 0 || fd == log_fd)
        return;
    if (log_fd > 2)
        close(log_fd);
    log_fd = fd;
    /* The master's reopened file: stderr (captured) follows it, as on a reopen. */
    if (log_stderr_captured)
        dup2(log_fd, 2);
}

int log_capture_stderr(void)
{
    if (!log_path[0] || log_fd <= 2)
        return 0;
    if (!log_stderr_captured && dup2(log_fd, 2) < 0)
        return 0;
    log_stderr_captured = 1;
    return 1;
}

void log_set_human(int colour)
{
    log_human = colour ? 2 : 1;
}

void log_set_level(log_level level)
{
    log_max = level;
}

void log_set_role(const char *role)
{
    snprintf(log_role, sizeof log_role, "%s", role);
}

void log_vmsg(log_level level, const char *fmt, va_list ap)
{
    if (level > log_max)
        return;
    char line[2048];
    int n;
    if (log_path[0]) {
        char ts[32];
        time_t t = time(NULL);
        struct tm tm;
        localtime_r(&t, &tm);
        strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S%z", &tm);
        n = snprintf(line, sizeof line, "%s [%s] %s[%d]: ", ts, level_names[level], log_role,
                     (int)getpid());
    } else if (log_human) {
        /* "16:02:11.042 warn  worker 1[123]: ...": the time of day is enough on a terminal. */
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        struct tm tm;
        localtime_r(&now.tv_sec, &tm);
        int colour = log_human == 2;
        n = snprintf(line, sizeof line, "%02d:%02d:%02d.%03ld %s%-5s%s %s[%d]: ", tm.tm_hour,
                     tm.tm_min, tm.tm_sec, now.tv_nsec / 1000000L,
                     colour ? level_colours[level] : "", level_names[level],
                     colour ? "\033[0m" : "", log_role, (int)getpid());
    } else {
        n = snprintf(line, sizeof line, "<%d>%s[%d]: %s: ", syslog_prio[level], log_role,
                     (int)getpid(), level_names[level]);
    }
    if (n < 0)
        return;
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    if (m < 0)
        return;
    size_t len = (size_t)n + (size_t)m;
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    int saved = errno;
    ssize_t w = write(log_fd, line, len);
    (void)w;
    errno = saved;
}

static size_t put_str(char *out, size_t at, size_t cap, const char *s)
{
    while (*s && at < cap)
        out[at++] = *s++;
    return at;
}

void log_write_signal_safe(log_level level, const char *msg, size_t len)
{
    char line[1200];
    size_t n = 0, cap = sizeof line - 1;
    char num[16];
    size_t k = sizeof num;
    num[--k] = '\0';
    for (unsigned long p = (unsigned long)getpid(); p || k == sizeof num - 1; p /= 10)
        num[--k] = (char)('0' + p % 10);
    if (log_path[0]) {
        n = put_str(line, n, cap, "[");
        n = put_str(line, n, cap, level_names[level]);
        n = put_str(line, n, cap, "] ");
        n = put_str(line, n, cap, log_role);
        n = put_str(line, n, cap, "[");
        n = put_str(line, n, cap, num + k);
        n = put_str(line, n, cap, "]: ");
    } else {
        char prio[4] = {'<', (char)('0' + syslog_prio[level]), '>', '\0'};
        n = put_str(line, n, cap, prio);
        n = put_str(line, n, cap, log_role);
        n = put_str(line, n, cap, "[");
        n = put_str(line, n, cap, num + k);
        n = put_str(line, n, cap, "]: ");
        n = put_str(line, n, cap, level_names[level]);
        n = put_str(line, n, cap, ": ");
    }
    for (size_t i = 0; i < len && n < cap; i++)
        line[n++] = msg[i];
    line[n++] = '\n';
    ssize_t w = write(log_fd, line, n);
    (void)w;
}

void log_msg(log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_vmsg(level, fmt, ap);
    va_end(ap);
}
