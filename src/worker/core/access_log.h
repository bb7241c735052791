/*
 * access_log.h - the worker's access log: one line per finished or aborted
 * request, formatted into a per-worker buffer and written with O_APPEND in
 * batches (at most every 100 ms, or when the buffer passes half full), so a
 * request never waits for the disk. A line that finds no room is dropped
 * and counted, never waited for.
 */
#ifndef PAGID_ACCESS_LOG_H
#define PAGID_ACCESS_LOG_H

#include <ev.h>
#include <stdint.h>
#include <pagi/pagi.h>

#include "common/config.h"

typedef struct access_log access_log;
struct shm_worker;
typedef struct conn conn;

/**
 * Open the access log of cfg in this worker: fd is the file the master
 * opened for it (taken), or -1 to open the path here. *out is NULL when the
 * log is off (access_log.path unset; fd is closed). Dropped lines are also
 * counted in stats (may be NULL). 0, or -1 with a message in err.
 */
int access_log_open(access_log **out, const pagid_config *cfg, int fd, struct ev_loop *ev,
                    struct shm_worker *stats, char *err, size_t errlen);
/** The master reopened the file (SIGUSR1): write what is buffered to the
 * old one, then write to fd (taken; closed when al is NULL). */
void access_log_adopt(access_log *al, int fd);
/** Flush what is buffered, close, free. NULL is fine. */
void access_log_close(access_log *al);
/** SIGUSR1: write what is buffered to the old file, then reopen the path. 0 or -1. */
int access_log_reopen(access_log *al);
/** Write the buffer now (also done by the timer). */
void access_log_flush(access_log *al);
/** Lines dropped so far (buffer full, write errors). */
uint64_t access_log_dropped(const access_log *al);

/**
 * One line for the exchange on c. s is its scope (NULL for a request the
 * parser refused before any scope existed); start is ev_now() when the
 * request arrived (0: now); status is what was sent (0: nothing); bytes are
 * body bytes; reason is NULL when the exchange completed.
 */
void access_log_request(access_log *al, conn *c, pagi_scope *s, double start, int status,
                        uint64_t bytes, const char *reason);

/** At a response start: keep the response headers the format logs
 * (%{name}o) with the scope, for its line. */
void access_log_response_start(access_log *al, pagi_scope *s, const pagi_event *ev);

#endif
