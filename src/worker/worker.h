/*
 * worker.h - the worker process: one libev loop that accepts on the
 * inherited listeners and runs every connection's lifecycle.
 */
#ifndef PAGID_WORKER_H
#define PAGID_WORKER_H

#include <stddef.h>
#include "common/config.h"

struct shm_region;

/** A bound, listening, non-blocking socket handed to the worker. */
struct tls_server;

typedef struct worker_listener {
    int fd;
    const pagid_listen *conf;
    struct tls_server *tls; /* the TLS context when conf->tls (owned by the listener_set) */
} worker_listener;

/** The log files of a worker: handed over by the master, or opened before
 * the switch of user (-w 0). */
typedef struct worker_logs {
    int chan;      /* the master's log channel (common/log_handover.h; taken), or -1 */
    int access_fd; /* the access log opened for it (taken), or -1: by path */
} worker_logs;

/**
 * Run a worker until it is told to stop. worker_num counts from 1;
 * under_master says whether a master supervises it (0 for --workers 0).
 * shm (may be NULL) is the master's shared region: the worker claims a
 * slot there for its heartbeat, readiness and counters.
 * Signals: SIGTERM (and SIGINT when alone) drain gracefully within
 * timeouts.shutdown; SIGQUIT stops at once. Returns an exit code from
 * exitcodes.h: EXIT_WORKER_FATAL when the app cannot start (never respawn).
 * pubsub_fd is its stream to the master's pub/sub broker (taken), or -1.
 * logs: where its log files come from (NULL: opened by path).
 */
int worker_run(const pagid_config *cfg, const worker_listener *listeners, size_t n, int worker_num,
               int under_master, struct shm_region *shm, unsigned generation, int pubsub_fd,
               const worker_logs *logs);

struct pagi_loop;
/**
 * An app asked that its worker end once its work is done (PSGI's
 * psgix.harakiri.commit): the worker drains and exits EXIT_RECYCLE, as at
 * max_requests, so the master starts a fresh one in its place; why is logged.
 * loop is the worker's (the one apps are created with). Returns 0, or -1
 * when no master supervises this worker (-w 0: nobody would replace it).
 */
int worker_recycle(struct pagi_loop *loop, const char *why);

#endif
