/*
 * log_channel.h - a worker's end of its log channel (common/log_handover.h):
 * the files the master opened for it, taken at start, and the reopened
 * ones after each SIGUSR1, adopted by the error log and the access log.
 */
#ifndef PAGID_LOG_CHANNEL_H
#define PAGID_LOG_CHANNEL_H

#include <ev.h>

struct access_log;

typedef struct log_channel {
    ev_io io;
    int fd;                   /* -1: none (alone, -w 0: SIGUSR1 reopens by path) */
    struct access_log **alog; /* where the worker keeps its access log */
} log_channel;

/** No channel yet: log_channel_stop is safe. */
void log_channel_init(log_channel *lc);
/**
 * Take fd (the channel, or -1) and the files the master sent on it before
 * the fork: the error log is adopted now, the access log's descriptor is
 * put in *access_fd (-1: the master could not open it). Then watch for
 * reopened files, without keeping the loop alive. 0, or -1 (logged) when
 * nothing came.
 */
int log_channel_start(log_channel *lc, int fd, struct ev_loop *ev, struct access_log **alog,
                      int *access_fd);
/** Stop watching and close the channel. */
void log_channel_stop(log_channel *lc, struct ev_loop *ev);

#endif
