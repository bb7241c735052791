/*
 * listeners.h - the listening sockets: bound once by the master (or by the
 * single process with --workers 0) and inherited by every worker.
 */
#ifndef PAGID_LISTENERS_H
#define PAGID_LISTENERS_H

#include <stddef.h>
#include <sys/types.h>

#include "../common/config.h"
#include "../worker/worker.h"

/** TCP listen backlog; the kernel clamps it to net.core.somaxconn. */
#define LISTEN_BACKLOG 4096

/**
 * Every socket the configuration asks for. items[i].conf borrows
 * cfg->listens[i], so the set must not outlive the config it was opened
 * from. For a unix socket, the device and inode recorded at bind time let
 * the owner unlink its own socket file and never a newer one that another
 * process created at the same path.
 */
typedef struct listener_set {
    worker_listener *items; /* handed to worker_run as is */
    size_t n;
    dev_t *unix_dev; /* per item; 0 when not a unix socket we created */
    ino_t *unix_ino;
} listener_set;

/**
 * Bind and listen on every cfg->listens[]. Sockets are non-blocking and
 * close-on-exec. On failure nothing stays open, and err holds a line such
 * as "cannot listen on 127.0.0.1:8080: Address already in use"; returns
 * 0 or -1.
 */
int listeners_open(const pagid_config *cfg, listener_set *ls, char *err, size_t errlen);

/**
 * Close this process's copies of the sockets (the kernel socket lives on
 * while a worker still holds it). Idempotent: a closed slot has fd -1.
 */
void listeners_close(listener_set *ls);

/**
 * Close, unlink the unix socket files this process created (only if they
 * are still the same inode), and free the set. Only the process that opened
 * the set calls this, on its way out.
 */
void listeners_destroy(listener_set *ls);

#endif
