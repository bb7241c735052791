/*
 * scope_internal.h - the layout of pagi_scope, shared only by the two files
 * of the scope module (scope.c: engine, scope_api.c: public accessors).
 */
#ifndef PAGID_SCOPE_INTERNAL_H
#define PAGID_SCOPE_INTERNAL_H

#include "scope.h"
#include "state_table.h"

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

struct pagi_scope {
    pagi_scope_type type;
    int refs;
    worker_ctx *w;
    const scope_ops *ops;
    void *proto; /* the protocol driver's exchange; NULL once detached */
    struct pagi_scope *prev, *next; /* w->scopes (request scopes only) */

    scope_request req; /* strings point into req_block */
    char *req_block;
    size_t mount_len;  /* bytes of req.path that are root_path (scope_set_mount) */

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
    int recv_queued; /* a delivery job is on the run queue */
    unsigned long recv_gen; /* bumped on disconnect: retires deliveries queued before it */
    buf delivery;    /* bytes of the event being delivered */

    /* pagi.connection */
    int connected;
    const char *reason;
    int started, complete;
    scope_cb_list on_disconnect, on_complete;

    /* pagi.transport */
    scope_cb_list on_high, on_drain;

    /* the worker's drain notice (pagi_scope_on_server_drain) */
    scope_cb_list on_server_drain;

    pagi_buf *send_buf; /* during pagi_send_buf only: the payload's buffer */
};

/* Shared by scope.c and scope_api.c. */
int scope_cb_add(scope_cb_list *l, runq_any_fn fn, void *ud);
void scope_queue_disconnect_cb(pagi_scope *s, runq_any_fn fn, void *ud);
void scope_queue_notify_cb(pagi_scope *s, runq_any_fn fn, void *ud);

#endif
