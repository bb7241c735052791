/*
 * pidfile.h - the master's pid file: written safely as root (pagid serves),
 * checked without writing (pagid -t), read strictly (pagid -s), and removed
 * only while it still names its writer.
 */
#ifndef PAGID_PIDFILE_H
#define PAGID_PIDFILE_H

#include <stddef.h>
#include <sys/types.h>

/**
 * Write pid and a newline to path, mode 0644. A symlink at path, anything
 * but a regular file, a file with other hard links or owned by another
 * user is refused, and nothing is truncated before those checks. 0, or -1
 * with err holding the reason (without the path).
 */
int pidfile_write(const char *path, pid_t pid, char *err, size_t errlen);

/**
 * Problems pidfile_write would have with path, without writing or creating
 * anything (pagid -t): 0, or -1 with err set as above.
 */
int pidfile_check(const char *path, char *err, size_t errlen);

/**
 * Read the pid in path: decimal digits, optionally followed by one newline,
 * nothing else, at most INT_MAX; a symlink is not followed. 0 with *pid set
 * (which may be 0 or 1: the caller decides what it accepts), or -1 with
 * errno: ENOENT (no file), EINVAL (not a pid), ELOOP (a symlink), or the
 * error of open/read.
 */
int pidfile_read(const char *path, pid_t *pid);

/** Remove path if it is a regular file that holds pid; 0, or -1 (left alone). */
int pidfile_remove(const char *path, pid_t pid);

/**
 * At a master's exit: remove path and path.oldbin, each only if it still
 * holds pid (after a handover both belong to other masters).
 */
void pidfile_remove_own(const char *path, pid_t pid);

#endif
