/*
 * log.h - the error log: leveled lines to stderr (with syslog priority
 * prefixes "<3>" so journald keeps the level) or to a file.
 */
#ifndef PAGID_LOG_H
#define PAGID_LOG_H

#include <stdarg.h>

#include "config.h"

/** Open the log per config (path NULL = stderr); 0 or -1. */
int log_open(const char *path, log_level level);
void log_set_level(log_level level);
/**
 * Lines on standard error for a person (--dev, a terminal): "TIME LEVEL
 * role[pid]: message" without the syslog prefix, levels in colour when
 * colour is set. A file's lines are not affected.
 */
void log_set_human(int colour);
/** Prefix every line with this process's role, e.g. "master" or "worker 2". */
void log_set_role(const char *role);
void log_msg(log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void log_vmsg(log_level level, const char *fmt, va_list ap);
int log_reopen(void);
/** The open log file's descriptor (to hand to workers), or -1 on stderr. */
int log_file_fd(void);
/**
 * Write to fd from now on (a log file the master opened and handed over):
 * the previous file is closed; the path is kept, for log_reopen.
 */
void log_adopt_fd(int fd);
/**
 * For the processes that run app code (workers, zygotes): when the log is
 * a file, make fd 2 that file too (and again after each reopen), so what the
 * app writes to standard error lands in the error log. 1 when it did, 0 when
 * the log is standard error (a terminal, the journal: nothing to do).
 */
int log_capture_stderr(void);
/**
 * Write one line (msg has no newline) with the usual prefix, minus the
 * timestamp: async-signal-safe, for a fatal signal's handler.
 */
void log_write_signal_safe(log_level level, const char *msg, size_t len);

/**
 * Open path to append log lines (create: O_CREAT, mode 0640; extra_flags
 * such as O_NONBLOCK are added). When this process is root and another user
 * can write to the file's directory, the name must be a regular file with
 * a single link, and a symlink is not followed: root's appends never land
 * in a file someone else chose. The fd, or -1 with errno (ELOOP, EMLINK and
 * EINVAL for those refusals; see log_open_strerror).
 */
int log_open_append(const char *path, int create, int extra_flags);
/** strerror(), with log_open_append's refusals explained. */
const char *log_open_strerror(int errnum);

#define log_error(...) log_msg(LOG_LVL_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LVL_DEBUG, __VA_ARGS__)

#endif
