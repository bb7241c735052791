/*
 * log_handover.h - the master's open log files, handed to a worker (or a
 * zygote) over a datagram socketpair with SCM_RIGHTS: at its start and
 * after each SIGUSR1 reopen. The master opens them as root, so a log
 * directory only root can enter (the nginx convention) serves workers that
 * run as nobody.
 */
#ifndef PAGID_LOG_HANDOVER_H
#define PAGID_LOG_HANDOVER_H

/**
 * Send error_fd and access_fd (-1: not a file / no access log) on chan
 * without blocking; the sender keeps its own copies. 0, or -1 with errno.
 */
int log_handover_send(int chan, int error_fd, int access_fd);

/**
 * Take one handover from chan: *error_fd and *access_fd are new
 * descriptors (close-on-exec) the caller owns, or -1. wait: block until
 * one comes. 1 when one was taken, 0 when none waits, -1 on error (errno
 * ECONNRESET: the master's end is closed).
 */
int log_handover_recv(int chan, int *error_fd, int *access_fd, int wait);

#endif
