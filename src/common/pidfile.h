/*
 * pidfile.h - reading the master's pid file strictly (for pagid -s) and
 * removing a pid file only when it still names us, so a master that exits
 * during or after a binary upgrade never deletes its successor's file.
 */
#ifndef PAGID_PIDFILE_H
#define PAGID_PIDFILE_H

#include <sys/types.h>

/**
 * Read the pid in path: decimal digits, optionally followed by one newline,
 * nothing else, at most INT_MAX. 0 with *pid set (which may be 0 or 1: the
 * caller decides what it accepts), or -1 with errno: ENOENT (no file),
 * EINVAL (not a pid), or the error of open/read.
 */
int pidfile_read(const char *path, pid_t *pid);

/** Unlink path if it holds pid; 0 when removed, -1 otherwise (errno). */
int pidfile_unlink_if(const char *path, pid_t pid);

/**
 * At a master's exit: remove path and path.oldbin, each only if it still
 * holds pid (after a handover both belong to other masters).
 */
void pidfile_remove_own(const char *path, pid_t pid);

#endif
