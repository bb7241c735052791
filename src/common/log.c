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
#include <time.h>
#include <unistd.h>

static int log_fd = 2;
static log_level log_max = LOG_LVL_INFO;
static char log_path[4096];
static char log_role[32] = "pagid";

static const char *const level_names[] = {"error", "warn", "info", "debug"};
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

int log_reopen(void)
{
    if (!log_path[0])
        return 0;
    int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    if (fd < 0)
        return -1;
    if (log_fd > 2)
        close(log_fd);
    log_fd = fd;
    return 0;
}

void log_set_level(log_level level) { log_max = level; }

void log_set_role(const char *role) { snprintf(log_role, sizeof log_role, "%s", role); }

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

void log_msg(log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_vmsg(level, fmt, ap);
    va_end(ap);
}
