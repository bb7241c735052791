/*
 * shm.h - one anonymous shared mapping, made by the master before any fork
 * and inherited by every worker: one slot per worker process (its pid,
 * generation, readiness, heartbeat and counters) plus master-wide figures.
 * Workers write only their own slot; the master and the metrics endpoint
 * read. Every field is a C11 atomic, so readers never see torn values.
 */
#ifndef PAGID_SHM_H
#define PAGID_SHM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Disconnect reasons counted per worker, in this order (see reason.h). */
enum shm_reason {
    SHM_R_CLIENT_CLOSED, SHM_R_CLIENT_TIMEOUT, SHM_R_IDLE_TIMEOUT, SHM_R_KEEPALIVE_TIMEOUT,
    SHM_R_WRITE_TIMEOUT, SHM_R_WRITE_ERROR, SHM_R_READ_ERROR, SHM_R_PROTOCOL_ERROR,
    SHM_R_SERVER_SHUTDOWN, SHM_R_SERVER_ERROR, SHM_R_BODY_TOO_LARGE, SHM_R_QUEUE_OVERFLOW,
    SHM_R_RESPONSE_TIMEOUT, /* pagid's own x- reason: timeouts.response */
    SHM_R_OTHER,
    SHM_R__COUNT
};

enum shm_scope_kind { SHM_SCOPE_HTTP, SHM_SCOPE_WEBSOCKET, SHM_SCOPE_SSE, SHM_SCOPE__COUNT };

/* How TLS handshakes ended, counted per worker (metrics: result="..."). */
enum shm_tls_result {
    SHM_TLS_OK,      /* established */
    SHM_TLS_FAILED,  /* a TLS protocol error (no shared cipher, plain HTTP, a bad certificate) */
    SHM_TLS_TIMEOUT, /* not finished within timeouts.header */
    SHM_TLS_CLOSED,  /* the peer closed or reset the connection mid-handshake */
    SHM_TLS_NO_PROTOCOL, /* ALPN offered no protocol we speak: no_application_protocol */
    SHM_TLS__COUNT
};

/*
 * The app call a worker's loop is inside, for the master's blocked-loop kill
 * (gen_check_heartbeats) to name: written by the worker alone, at each
 * outermost call into app code (worker/core/app_call.h), as a seqlock: seq
 * is odd while the fields change, so a reader that saw the same even seq
 * before and after its copy has one consistent record.
 */
#define SHM_APP_CALL_KIND 24
#define SHM_APP_CALL_METHOD 16
#define SHM_APP_CALL_TARGET 132 /* 128 bytes of the escaped request target, "...", NUL */
typedef struct shm_app_call {
    _Atomic uint32_t seq;
    _Atomic uint64_t started_ms;      /* CLOCK_MONOTONIC ms the call began; 0: in no app call */
    char kind[SHM_APP_CALL_KIND];     /* the callback: "handle", "receive", "timer", ... */
    char method[SHM_APP_CALL_METHOD]; /* the request's method, or "" */
    char target[SHM_APP_CALL_TARGET]; /* raw path and query, control bytes as \xHH, or "" */
} shm_app_call;

/** A consistent copy of rec (the master's side), its texts NUL-terminated
 * and any byte outside printable ASCII made '?'; 0, or -1 when the worker
 * kept writing it (it is not blocked, then). */
int shm_app_call_read(const shm_app_call *rec, shm_app_call *out);

typedef struct shm_worker {
    _Atomic int pid;                  /* 0 = free slot */
    _Atomic unsigned generation;      /* config generation the worker runs */
    _Atomic int worker_num;
    _Atomic int ready;                /* lifespan startup passed, accepting */
    _Atomic uint64_t heartbeat_ms;    /* CLOCK_MONOTONIC ms, refreshed by the loop */
    shm_app_call app_call;            /* the app call the loop is inside, if any */
    _Atomic uint64_t requests[6];     /* by status class: [1]..[5] = 1xx..5xx, [0] other */
    _Atomic uint64_t bytes_in, bytes_out;
    _Atomic int64_t open_connections;
    _Atomic uint64_t accepted;        /* connections taken from the listeners (fair accept) */
    _Atomic int gated;                /* fair accept: 0 watching, 1 past its share, 2 woken */
    _Atomic int64_t open_scopes[SHM_SCOPE__COUNT];
    _Atomic uint64_t disconnects[SHM_R__COUNT];
    _Atomic uint64_t access_log_dropped; /* lines the access log could not write */
    _Atomic uint64_t max_connections_reached; /* times it stopped accepting at the limit */
    _Atomic uint64_t response_timeouts; /* timeouts.response: 504s sent for an app */
    /* TLS listeners: handshakes by outcome, and connections open on them. */
    _Atomic uint64_t tls_handshakes[SHM_TLS__COUNT];
    _Atomic uint64_t tls_resumed; /* of the ok ones, those that resumed a session */
    _Atomic int64_t tls_open;
    /* HTTP/2: connections that spoke it, streams opened, RST_STREAMs the
     * clients sent, connections ended for a flood or rapid reset. */
    _Atomic uint64_t h2_connections, h2_streams, h2_resets, h2_calm, h2_refused, h2_websockets;
    /* pub/sub (docs/pubsub.md): messages this worker published, callbacks it
     * made, messages it dropped (its full channel to the master, a
     * subscription's full queue, a client that does not drain). */
    _Atomic uint64_t pubsub_published, pubsub_delivered, pubsub_dropped;
    /* Scopes whose connection ended while the app had not finished them and
     * waited for nothing that would tell it (a missing pagi_scope_finish). */
    _Atomic uint64_t scopes_unfinished;
    /* The worker pool (common/pool.h): in a pool process's slot, 1 while it
     * runs a request or call, and how many it finished; in a worker's, its
     * requests and calls waiting for a free process, those refused (queue
     * full) and those past worker_pool.timeout. */
    _Atomic int pool_busy;
    _Atomic int pool_state; /* a pool process's POOL_OFF/IDLE/CLAIMED (common/pool.h) */
    _Atomic uint64_t pool_served;
    _Atomic int64_t pool_waiting;
    _Atomic uint64_t pool_rejected, pool_timeouts;
} shm_worker;

typedef struct shm_region {
    _Atomic unsigned generation;      /* current (newest) generation */
    _Atomic uint64_t worker_restarts; /* crashes replaced by the master */
    _Atomic uint64_t reloads;         /* successful reloads */
    _Atomic uint64_t pubsub_master_dropped; /* frames the broker dropped: a worker's queue was full */
    /* The master's pub/sub backend (docs/pubsub.md, "Across machines"):
     * kind 0 none, 1 redis; up 1 while both its connections work. */
    _Atomic int pubsub_backend, pubsub_backend_up;
    _Atomic uint64_t pubsub_backend_sent, pubsub_backend_received, pubsub_backend_dropped;
    _Atomic uint64_t pubsub_backend_reconnects;
    /* messages from the backend larger than any pagid message (published
     * into Redis by another program): skipped unread, the link kept */
    _Atomic uint64_t pubsub_backend_too_large;
    size_t n_slots;
    _Atomic size_t n_used;            /* slots below this were ever claimed: bound for scans */
    shm_worker slots[];
} shm_region;

/** Map a region with n_slots worker slots (master, before fork); NULL on failure. */
shm_region *shm_create(size_t n_slots);
void shm_destroy(shm_region *r);
/** Claim a free slot for pid (a worker claims its own at start); NULL when full. */
shm_worker *shm_claim(shm_region *r, int pid, int worker_num, unsigned generation);
/** Release the slot of a pid that exited (the master, when it reaps it). */
void shm_release(shm_region *r, int pid);
shm_worker *shm_find(shm_region *r, int pid);
/** How many leading slots a scan for live workers must look at (claims take
 * the first free slot, so this stays near the number of workers). */
static inline size_t shm_slots_used(const shm_region *r)
{
    return atomic_load_explicit(&r->n_used, memory_order_acquire);
}
/** CLOCK_MONOTONIC in milliseconds. */
uint64_t shm_now_ms(void);

/* Worker-side helpers: no-ops when slot is NULL (no master, or tests). */
void shm_count_request(shm_worker *slot, int status);
void shm_count_disconnect(shm_worker *slot, const char *reason);
static inline void shm_add(_Atomic uint64_t *counter, uint64_t n)
{
    atomic_fetch_add_explicit(counter, n, memory_order_relaxed);
}

#endif
