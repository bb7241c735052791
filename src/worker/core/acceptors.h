/*
 * acceptors.h - a worker's listening sockets: when they are watched
 * (accepting, limits.max_connections, the fair-accept gate of accept_gate.h)
 * and the accept loop that hands each new socket to conn_new.
 */
#ifndef PAGID_ACCEPTORS_H
#define PAGID_ACCEPTORS_H

#include <arpa/inet.h>
#include <ev.h>
#include <stddef.h>
#include <stdint.h>

#include "worker/worker.h"
#include "worker/worker_ctx.h"

struct acceptors;

/** One listening socket of the worker. */
typedef struct acceptor {
    ev_io io;
    int fd;
    char host[INET6_ADDRSTRLEN + 8];
    int port;
    int status;                   /* the status.listen socket */
    const struct tls_server *tls; /* a TLS listener's context, else NULL */
    int h2; /* HTTP/2 allowed: ALPN h2 (TLS) or h2c prior knowledge (listen.http2) */
    struct acceptors *set;
} acceptor;

/** Every listening socket of a worker and the state that decides which are watched. */
typedef struct acceptors {
    worker_ctx *w;
    acceptor *list;
    size_t n;
    int accepting;
    int gated;                    /* past its share: the app listeners are left to peers */
    int at_limit;                 /* limits.max_connections app connections: the same */
    double limit_logged_at;       /* when reaching the limit was last logged (0: never) */
    unsigned long limit_unlogged; /* times it was reached since then */
    uint64_t gate_progress;       /* the peers' accept count when last looked at */
    double gate_since;            /* when it last changed, or the gate closed */
    ev_timer accept_retry;        /* out of file descriptors or memory: accepting again */
    ev_timer gate_timer;          /* while gated: the share looked at again */
    ev_signal sig_gate;           /* a peer's accept let this worker in again */
} acceptors;

/**
 * Describe the n listeners (sockets stay the caller's until acceptors_close)
 * and start listening for the peers' gate wake-ups on w's loop. Nothing is
 * accepted before acceptors_set_accepting(as, 1). Returns 0, or -1 when out
 * of memory.
 */
int acceptors_init(acceptors *as, worker_ctx *w, const worker_listener *listeners, size_t n);
/** Watch the listeners (on) or none of them (off). */
void acceptors_set_accepting(acceptors *as, int on);
/** A connection of this worker went: below the limit or within the share again? */
void acceptors_on_conn_closed(acceptors *as);
/**
 * Draining: stop accepting, close the listening sockets, clear the slot's
 * readiness and wake the gated peers, whose share this worker's becomes.
 */
void acceptors_close(acceptors *as);
/** The loop is over: every watcher stopped, the list freed (sockets not closed). */
void acceptors_free(acceptors *as);

#endif
