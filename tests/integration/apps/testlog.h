/*
 * testlog.h - the observation log shared by the integration test modules:
 * one "<id> <event ...>" line per call, appended to the file named by
 * PAGID_TEST_LOG (nothing when unset), written whole so that lines from
 * several workers never interleave. Header-only: each module is a single
 * .c file compiled by the test runner.
 */
#ifndef PAGID_TESTLOG_H
#define PAGID_TESTLOG_H

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline void testlog_v(const char *id, const char *fmt, va_list ap)
{
    const char *path = getenv("PAGID_TEST_LOG");
    if (path == NULL || *path == '\0')
        return;
    char line[800];
    int k = snprintf(line, sizeof line, "%s ", id);
    if (k < 0 || (size_t)k >= sizeof line)
        return;
    int m = vsnprintf(line + k, sizeof line - (size_t)k - 1, fmt, ap);
    if (m < 0)
        return;
    size_t len = (size_t)k + (size_t)m;
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    for (size_t j = 0; j < len; j++) /* one event, one line */
        if (line[j] == '\n' || line[j] == '\r')
            line[j] = ' ';
    line[len++] = '\n';
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    const char *p = line;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        p += w;
        len -= (size_t)w;
    }
    close(fd);
}

#endif
