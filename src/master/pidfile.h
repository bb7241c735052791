/*
 * pidfile.h - the pid file: written by the master (or the single process)
 * as root, so never through a symlink and never over anything but a
 * regular file of its own; removed only while it still names us.
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

/** Remove path if it is a regular file that holds pid; 0 or -1 (left alone). */
int pidfile_remove(const char *path, pid_t pid);

#endif
