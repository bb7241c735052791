/*
 * scope_api.c - the read side of pagi.h: scope facts, lifespan state,
 * userdata, and the pagi.connection / pagi.transport handles.
 */
#include "scope_internal.h"

#include <string.h>
#include <strings.h>

#include "worker/core/tls_info.h"

static const char *const event_names[PAGI_EV__COUNT] = {
    [PAGI_EV_HTTP_REQUEST] = "http.request",
    [PAGI_EV_HTTP_DISCONNECT] = "http.disconnect",
    [PAGI_EV_HTTP_RESPONSE_START] = "http.response.start",
    [PAGI_EV_HTTP_RESPONSE_BODY] = "http.response.body",
    [PAGI_EV_HTTP_RESPONSE_TRAILERS] = "http.response.trailers",
    [PAGI_EV_WEBSOCKET_CONNECT] = "websocket.connect",
    [PAGI_EV_WEBSOCKET_ACCEPT] = "websocket.accept",
    [PAGI_EV_WEBSOCKET_RECEIVE] = "websocket.receive",
    [PAGI_EV_WEBSOCKET_SEND] = "websocket.send",
    [PAGI_EV_WEBSOCKET_KEEPALIVE] = "websocket.keepalive",
    [PAGI_EV_WEBSOCKET_CLOSE] = "websocket.close",
    [PAGI_EV_WEBSOCKET_DISCONNECT] = "websocket.disconnect",
    [PAGI_EV_WEBSOCKET_HTTP_RESPONSE_START] = "websocket.http.response.start",
    [PAGI_EV_WEBSOCKET_HTTP_RESPONSE_BODY] = "websocket.http.response.body",
    [PAGI_EV_SSE_REQUEST] = "sse.request",
    [PAGI_EV_SSE_START] = "sse.start",
    [PAGI_EV_SSE_SEND] = "sse.send",
    [PAGI_EV_SSE_COMMENT] = "sse.comment",
    [PAGI_EV_SSE_KEEPALIVE] = "sse.keepalive",
    [PAGI_EV_SSE_CLOSE] = "sse.close",
    [PAGI_EV_SSE_DISCONNECT] = "sse.disconnect",
    [PAGI_EV_SSE_HTTP_RESPONSE_START] = "sse.http.response.start",
    [PAGI_EV_SSE_HTTP_RESPONSE_BODY] = "sse.http.response.body",
    [PAGI_EV_LIFESPAN_STARTUP] = "lifespan.startup",
    [PAGI_EV_LIFESPAN_STARTUP_COMPLETE] = "lifespan.startup.complete",
    [PAGI_EV_LIFESPAN_STARTUP_FAILED] = "lifespan.startup.failed",
    [PAGI_EV_LIFESPAN_SHUTDOWN] = "lifespan.shutdown",
    [PAGI_EV_LIFESPAN_SHUTDOWN_COMPLETE] = "lifespan.shutdown.complete",
    [PAGI_EV_LIFESPAN_SHUTDOWN_FAILED] = "lifespan.shutdown.failed",
};

const char *pagi_event_type_name(pagi_event_type type)
{
    if (type <= PAGI_EV_NONE || type >= PAGI_EV__COUNT)
        return NULL;
    return event_names[type];
}

pagi_scope_type pagi_scope_type_of(const pagi_scope *s)
{
    return SCOPE_LIVE(s) ? s->type : PAGI_SCOPE_HTTP;
}

const char *pagi_scope_type_name(const pagi_scope *s)
{
    if (!SCOPE_LIVE(s))
        return "unknown";
    switch (s->type) {
    case PAGI_SCOPE_HTTP:
        return "http";
    case PAGI_SCOPE_WEBSOCKET:
        return "websocket";
    case PAGI_SCOPE_SSE:
        return "sse";
    case PAGI_SCOPE_LIFESPAN:
        return "lifespan";
    }
    return "unknown";
}

static const char *or_empty(const char *p) { return p ? p : ""; }

#define EMPTY_STR ((pagi_str){"", 0})

const char *pagi_scope_http_version(const pagi_scope *s)
{
    return SCOPE_LIVE(s) ? or_empty(s->req.http_version) : "";
}
const char *pagi_scope_method(const pagi_scope *s)
{
    return SCOPE_LIVE(s) ? or_empty(s->req.method) : "";
}
const char *pagi_scope_scheme(const pagi_scope *s)
{
    if (!SCOPE_LIVE(s))
        return "";
    return s->req.scheme ? s->req.scheme : "http";
}
/* The whole decoded path, also under a mount: PSGI's PATH_INFO is path minus root_path (Www.pod). */
pagi_str pagi_scope_path(const pagi_scope *s)
{
    return SCOPE_LIVE(s) ? s->req.path : EMPTY_STR;
}
pagi_str pagi_scope_raw_path(const pagi_scope *s)
{
    return SCOPE_LIVE(s) ? s->req.raw_path : EMPTY_STR;
}
pagi_str pagi_scope_query_string(const pagi_scope *s)
{
    return SCOPE_LIVE(s) ? s->req.query : EMPTY_STR;
}
pagi_str pagi_scope_root_path(const pagi_scope *s)
{
    if (!SCOPE_LIVE(s))
        return EMPTY_STR;
    if (!s->mount_len)
        return (pagi_str){"", 0};
    return (pagi_str){s->req.path.ptr, s->mount_len};
}

const pagi_header *pagi_scope_headers(const pagi_scope *s, size_t *count)
{
    if (!SCOPE_LIVE(s)) {
        if (count)
            *count = 0;
        return NULL;
    }
    if (count)
        *count = s->req.header_count;
    return s->req.headers;
}

int pagi_scope_header(const pagi_scope *s, const char *name, pagi_str *value)
{
    if (!SCOPE_LIVE(s) || !name)
        return 0;
    size_t n = strlen(name);
    for (size_t i = 0; i < s->req.header_count; i++) {
        const pagi_header *h = &s->req.headers[i];
        if (h->name.len == n && strncasecmp(h->name.ptr, name, n) == 0) {
            if (value)
                *value = h->value;
            return 1;
        }
    }
    return 0;
}

const char *pagi_scope_client(const pagi_scope *s, int *port)
{
    if (!SCOPE_LIVE(s)) {
        if (port)
            *port = 0;
        return NULL;
    }
    if (port)
        *port = s->req.client_port;
    return s->req.client_host;
}

const char *pagi_scope_server(const pagi_scope *s, int *port)
{
    if (!SCOPE_LIVE(s)) {
        if (port)
            *port = 0;
        return NULL;
    }
    if (port)
        *port = s->req.server_port;
    return s->req.server_host;
}

size_t pagi_scope_subprotocol_count(const pagi_scope *s)
{
    return SCOPE_LIVE(s) ? s->req.subprotocol_count : 0;
}

pagi_str pagi_scope_subprotocol(const pagi_scope *s, size_t i)
{
    if (!SCOPE_LIVE(s))
        return (pagi_str){NULL, 0};
    if (i >= s->req.subprotocol_count)
        return (pagi_str){NULL, 0};
    return s->req.subprotocols[i];
}

int pagi_scope_has_extension(const pagi_scope *s, const char *name)
{
    if (!SCOPE_LIVE(s))
        return 0;
    if (!name)
        return 0;
    if (strcmp(name, "websocket.http.response") == 0)
        return (s->req.extensions & SCOPE_EXT_WEBSOCKET_HTTP_RESPONSE) != 0;
    if (strcmp(name, "tls") == 0)
        return s->req.tls != NULL;
    return 0;
}

const pagi_tls_info *pagi_scope_tls(const pagi_scope *s)
{
    if (!SCOPE_LIVE(s))
        return NULL;
    return s->req.tls ? tls_info_get(s->req.tls) : NULL;
}

int pagi_scope_worker_num(const pagi_scope *s, int *is_worker)
{
    if (!SCOPE_LIVE(s)) {
        if (is_worker)
            *is_worker = 0;
        return -1;
    }
    if (is_worker)
        *is_worker = s->w->under_master;
    return s->w->worker_num;
}

pagi_loop *pagi_scope_loop(const pagi_scope *s)
{
    return SCOPE_LIVE(s) ? &s->w->loop : NULL;
}

int pagi_state_set(pagi_scope *s, const char *key, void *value)
{
    if (!s || !SCOPE_LIVE(s) || !key)
        return -1;
    state_table *t = state_table_set(s->state, key, value);
    if (!t)
        return -1;
    s->state = t;
    /* The lifespan scope writes the worker's namespace; later requests copy it. */
    if (s->type == PAGI_SCOPE_LIFESPAN) {
        state_table_unref(s->w->state);
        s->w->state = state_table_ref(t);
    }
    return 0;
}

void *pagi_state_get(const pagi_scope *s, const char *key)
{
    return SCOPE_LIVE(s) ? state_table_get(s->state, key) : NULL;
}

void pagi_scope_set_userdata(pagi_scope *s, void *data, void (*release)(pagi_scope *, void *))
{
    if (!s || !SCOPE_LIVE(s))
        return;
    s->userdata = data;
    s->release = release;
}

void *pagi_scope_userdata(const pagi_scope *s)
{
    return SCOPE_LIVE(s) ? s->userdata : NULL;
}

const char *pagi_scope_error(const pagi_scope *s)
{
    if (!SCOPE_LIVE(s))
        return "stale handle";
    return s->error ? s->error : "";
}

/* ---- pagi.connection ---- */

int pagi_conn_is_connected(const pagi_scope *s)
{
    return SCOPE_LIVE(s) ? s->connected : 0;
}
const char *pagi_conn_disconnect_reason(const pagi_scope *s)
{
    return SCOPE_LIVE(s) ? s->reason : NULL;
}
int pagi_conn_response_started(const pagi_scope *s)
{
    return SCOPE_LIVE(s) ? s->started : 0;
}
int pagi_conn_response_complete(const pagi_scope *s)
{
    return SCOPE_LIVE(s) ? s->complete : 0;
}

int pagi_conn_on_disconnect(pagi_scope *s, pagi_disconnect_cb cb, void *ud)
{
    if (!s || !SCOPE_LIVE(s) || !cb)
        return -1;
    if (!s->connected) {
        scope_queue_disconnect_cb(s, (runq_any_fn)cb, ud);
        return 0;
    }
    return scope_cb_add(&s->on_disconnect, (runq_any_fn)cb, ud);
}

int pagi_conn_on_complete(pagi_scope *s, pagi_notify_cb cb, void *ud)
{
    if (!s || !SCOPE_LIVE(s) || !cb)
        return -1;
    if (s->complete) {
        scope_queue_notify_cb(s, (runq_any_fn)cb, ud, "on_complete");
        return 0;
    }
    return scope_cb_add(&s->on_complete, (runq_any_fn)cb, ud);
}

/* ---- pagi.transport ---- */

size_t pagi_transport_buffered_amount(const pagi_scope *s)
{
    if (!SCOPE_LIVE(s))
        return 0;
    return (s->proto && s->ops->buffered) ? s->ops->buffered(s) : 0;
}

size_t pagi_transport_high_water_mark(const pagi_scope *s)
{
    return SCOPE_LIVE(s) ? s->w->cfg->high_watermark : 0;
}
size_t pagi_transport_low_water_mark(const pagi_scope *s)
{
    return SCOPE_LIVE(s) ? s->w->cfg->low_watermark : 0;
}

int pagi_transport_on_high_water(pagi_scope *s, pagi_notify_cb cb, void *ud)
{
    if (!s || !SCOPE_LIVE(s) || !cb)
        return -1;
    if (scope_cb_add(&s->on_high, (runq_any_fn)cb, ud) < 0)
        return -1;
    if (s->proto && s->ops->above_high && s->ops->above_high(s))
        scope_queue_notify_cb(s, (runq_any_fn)cb, ud, "on_high_water");
    return 0;
}

int pagi_transport_on_drain(pagi_scope *s, pagi_notify_cb cb, void *ud)
{
    if (!s || !SCOPE_LIVE(s) || !cb)
        return -1;
    return scope_cb_add(&s->on_drain, (runq_any_fn)cb, ud);
}

/* ---- the worker's drain notice ---- */

int pagi_server_draining(const pagi_scope *s)
{
    return s && SCOPE_LIVE(s) && s->w->draining ? 1 : 0;
}

int pagi_scope_on_server_drain(pagi_scope *s, pagi_notify_cb cb, void *ud)
{
    if (!s || !SCOPE_LIVE(s))
        return -1;
    if (!cb)
        return scope_fail(s, "on_server_drain: no callback");
    if (s->type == PAGI_SCOPE_LIFESPAN)
        return scope_fail(
            s, "on_server_drain: not for the lifespan scope (it gets lifespan.shutdown)");
    if (s->w->draining) {
        scope_queue_server_drain_cb(s, (runq_any_fn)cb, ud);
        return 0;
    }
    return scope_cb_add(&s->on_server_drain, (runq_any_fn)cb, ud);
}
