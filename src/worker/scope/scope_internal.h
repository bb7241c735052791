/*
 * scope_internal.h - the layout of pagi_scope, shared only by the files of
 * the scope module (scope.c: engine, scope_api.c: public accessors,
 * scope_debug.c: debug mode's quarantine and misuse lines,
 * scope_request.c: the request's copy, scope_response.c: timeouts.response).
 */
#ifndef PAGID_SCOPE_INTERNAL_H
#define PAGID_SCOPE_INTERNAL_H

#include "worker/core/app_call.h"
#include "worker/core/handle.h"
#include "scope.h"
#include "worker/core/state_table.h"

typedef struct scope_cb {
    runq_any_fn fn;
    void *ud;
} scope_cb;

/* A small growable list of app callbacks, run in registration order. */
typedef struct scope_cb_list {
    scope_cb *v;
    size_t n, cap;
} scope_cb_list;

#define SCOPE_ERROR_MAX 256

/* A live scope's magic; a released one kept in debug mode's quarantine
 * has SCOPE_MAGIC_RELEASED (its request still readable, for the message),
 * one back in the pool HANDLE_RELEASED: a call on either is recognised. */
#define SCOPE_MAGIC 0x5C09E11Fu
#define SCOPE_MAGIC_RELEASED 0xDEAD5C09u

struct pagi_scope {
    handle_hdr h; /* first: the shell comes from w->scope_pool (handle.h) */
    pagi_scope_type type;
    int refs;
    worker_ctx *w;
    const scope_ops *ops;
    void *proto;                    /* the protocol driver's exchange; NULL once detached */
    struct pagi_scope *prev, *next; /* w->scopes (request scopes only) */

    scope_request req;    /* strings point into req_block */
    char *req_block;      /* owned (scope_request.c) */
    int req_block_pooled; /* of the free list's size: back to it when freed */
    size_t mount_len;     /* bytes of req.path that are root_path (scope_set_mount) */

    /* app side */
    int finished;
    void *userdata;
    void (*release)(pagi_scope *s, void *data);
    void *layer; /* the convenience layer's slot (scope_set_layer_data) */
    void (*layer_release)(void *layer);
    state_table *state;
    char *error; /* the last refusal's message (SCOPE_ERROR_MAX), allocated at the first */

    /* receive */
    pagi_receive_cb recv_cb;
    void *recv_ud;
    int recv_waiting;
    int recv_queued;        /* a delivery job is on the run queue */
    unsigned long recv_gen; /* bumped on disconnect: retires deliveries queued before it */
    buf delivery;           /* bytes of the event being delivered */
    buf log_resp;           /* response header values the access log format logs (%{name}o) */

    /* pagi.connection */
    int connected;
    unsigned sends_pending; /* accepted sends whose callback has not run yet */
    const char *reason;
    int started, complete;
    scope_cb_list on_disconnect, on_complete;
    ev_timer resp_timer; /* timeouts.response, until the response starts or the exchange ends */

    /* pagi.transport */
    scope_cb_list on_high, on_drain;

    /* the worker's drain notice (pagi_scope_on_server_drain) */
    scope_cb_list on_server_drain;

    pagi_buf *send_buf; /* during pagi_send_buf only: the payload's buffer */

    struct pagi_subscription *subs; /* its subscriptions (pubsub.c): they die with it */

    /* scope_set_owner: a group member told when someone else finishes s */
    void (*owner_finish)(pagi_scope *s, void *ud);
    void *owner;
    int unfinished_counted; /* detached unfinished with nothing pending: counted once */
};

/* Shared by scope.c and scope_api.c. */
int scope_cb_add(scope_cb_list *l, runq_any_fn fn, void *ud);
void scope_queue_disconnect_cb(pagi_scope *s, runq_any_fn fn, void *ud);
/* kind names the callback in debug mode's messages ("on_complete", ...). */
void scope_queue_notify_cb(pagi_scope *s, runq_any_fn fn, void *ud, const char *kind);
void scope_queue_server_drain_cb(pagi_scope *s, runq_any_fn fn, void *ud);

/* ---- scope_debug.c: debug mode (pagid --debug) ---- */

/* Is s a live scope? A NULL test and one comparison (the shell's memory
 * stays mapped after release: handle.h); otherwise the call is logged as
 * on a stale handle and the caller returns its safe value. */
#define SCOPE_LIVE(s)                                                                              \
    (__builtin_expect((s) != NULL && (s)->h.magic == SCOPE_MAGIC, 1) || scope_stale((s), __func__))
/* Log fn's use of a handle that is no live scope (NULL included); returns 0. */
int scope_stale(const pagi_scope *s, const char *fn);
/* Put a released shell back in the pool (its request copy freed first). */
void scope_shell_put(pagi_scope *s);
/* scope_request.c: copy req into s's own block; 0, or -1 out of memory. */
int scope_copy_request(pagi_scope *s, const scope_request *req);
/* Free s's request copy (idempotent): its block may wait for the next scope. */
void scope_request_free(pagi_scope *s);
/* Give the blocks waiting for reuse back to malloc (the worker's exit). */
void scope_request_blocks_release(worker_ctx *w);
static inline int scope_debug(const pagi_scope *s)
{
    return s->w->loop.debug;
}
/* "GET /path" (printable, bounded), or the scope type for lifespan. */
const char *scope_label(const pagi_scope *s, char *out, size_t n);
/* Debug mode: log a misuse of the interface on s. */
void scope_misuse(const pagi_scope *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Debug mode: keep a released scope's memory (req_block included) so a
 * stale handle stays recognisable; the oldest is freed past the bound. */
void scope_quarantine_put(pagi_scope *s);
/* Debug mode: the callback of kind held the loop since t0; warn if too long. */
void scope_hold_check(pagi_scope *s, double t0, const char *kind);

/* Around a call into app code: the crash line's note and the master's
 * record of the app call (app_call.h: a few stores) and, in debug mode
 * only, the loop-hold timer. A lifespan scope's calls name it, not a request. */
static inline double scope_app_enter(pagi_scope *s, const char *kind)
{
    const scope_request *r = &s->req;
    int is_lifespan = s->type == PAGI_SCOPE_LIFESPAN;
    app_call_request req = {.id = s,
                            .gen = s->h.gen,
                            .method = is_lifespan ? NULL : r->method,
                            .path = is_lifespan ? "lifespan scope" : r->raw_path.ptr,
                            .path_len = is_lifespan ? 14 : r->raw_path.len,
                            .query = r->query.ptr,
                            .query_len = is_lifespan ? 0 : r->query.len,
                            .client = r->client_host,
                            .client_port = r->client_port,
                            .crash_path = r->path.ptr,
                            .crash_path_len = r->path.len};
    app_call_enter(&s->w->loop, kind, &req);
    return loop_hold_begin(&s->w->loop);
}

static inline void scope_app_leave(pagi_scope *s, double t0, const char *kind)
{
    app_call_leave(&s->w->loop);
    if (t0 != 0)
        scope_hold_check(s, t0, kind);
}

/* scope_response.c: timeouts.response, armed when the app is called, stopped
 * when the response starts or the exchange ends. */
void scope_response_timer_arm(pagi_scope *s);
void scope_response_timer_stop(pagi_scope *s);

#endif
