/*
 * worker_ctx.h - the explicit worker context every worker module is handed:
 * the config, the loop, the application and the set of live connections.
 * There is no global: a unit test can build one.
 */
#ifndef PAGID_WORKER_CTX_H
#define PAGID_WORKER_CTX_H

#include <stddef.h>
#include <pagi/pagi.h>

#include "common/buf.h"
#include "common/config.h"
#include "worker/core/loop.h"

typedef struct conn conn;
typedef struct state_table state_table;
typedef struct lifespan lifespan;

typedef struct worker_ctx {
    const pagid_config *cfg;
    pagi_loop loop;
    const pagi_app *app;
    void *app_instance;
    int worker_num;
    struct shm_worker *stats; /* this worker's shared slot, or NULL */
    struct shm_region *shm;   /* the whole shared region (metrics), or NULL */
    struct access_log *alog;  /* NULL when the access log is off */
    int under_master;
    state_table *state; /* lifespan state snapshot (copy-on-write) */
    conn *conns;        /* all live connections (intrusive list) */
    size_t n_conns;
    size_t n_status_conns;      /* of those, the status listener's (outside max_connections) */
    size_t n_scopes;            /* request scopes not yet released (lifespan excluded) */
    uint64_t scopes_unfinished; /* detached, unfinished, nothing pending (scope.c) */
    struct pagi_scope *scopes;  /* those scopes (intrusive list) */
    struct scope_quarantine *quarantine; /* debug mode: released scopes kept (scope_debug.c) */
    struct handle_pool *scope_pool;      /* scope shells (handle.h), made at the first scope */
    void *req_blocks; /* request copies' blocks kept for reuse (scope_request.c) */
    unsigned n_req_blocks;
    conn *flush_list;           /* connections with output to write at the safe point */
    buf scratch;                /* reusable space for formatting response heads */
    buf rbuf;                   /* the read buffer, lent to a connection with no buffered input */
    struct h1_parser *h1_spare; /* a finished HTTP/1.1 parser for the next request (http1_conn.c) */
    char peer_text[48];         /* conn_peer_host's answer (INET6_ADDRSTRLEN) */
    unsigned char peer_text_addr[16];              /* the address peer_text spells ... */
    unsigned short peer_text_family;               /* ... and its family; 0 = none yet */
    lifespan *lifespan;                            /* the lifespan scope's driver */
    struct pubsub *pubsub;                         /* publish/subscribe (pubsub.c), or NULL */
    int draining;                                  /* graceful stop in progress: no keep-alive */
    void (*on_conn_count)(struct worker_ctx *w);   /* called when n_conns or n_scopes drops */
    void (*on_request_done)(struct worker_ctx *w); /* an HTTP response was fully written */
} worker_ctx;

#endif
