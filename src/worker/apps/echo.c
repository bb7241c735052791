/*
 * echo.c - the `echo` app: answers 200 with the request body (read as a
 * stream of http.request events), content-length set, and headers
 * x-echo-method, x-echo-path (raw path), x-echo-query and x-echo-root-path
 * (the mount prefix, "" when not mounted). sse: count ticks
 * (event tick, id i, data i), interval ms apart, or a decline with ?status.
 * websocket: accept with the first offered subprotocol, echo each message
 * with its own type until the disconnect. When the worker starts draining,
 * a websocket gets a 1001 close, so a stop or reload does not wait on it;
 * an sse stream is a finite count and drains like a request, unless
 * ?drain=1 asks it to end after its current event.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin.h"

typedef struct echo_req {
    char *body;
    size_t len, cap;
} echo_req;

static void echo_release(pagi_scope *s, void *data)
{
    echo_req *r = data;
    free(r->body);
    free(r);
}

static int echo_append(echo_req *r, pagi_str chunk)
{
    if (chunk.len == 0)
        return 0;
    if (r->cap - r->len < chunk.len) {
        size_t ncap = r->cap ? r->cap : 4096;
        while (ncap - r->len < chunk.len)
            ncap *= 2;
        char *n = realloc(r->body, ncap);
        if (!n)
            return -1;
        r->body = n;
        r->cap = ncap;
    }
    memcpy(r->body + r->len, chunk.ptr, chunk.len);
    r->len += chunk.len;
    return 0;
}

static void echo_respond(pagi_scope *s, echo_req *r)
{
    char clen[24];
    int clen_n = snprintf(clen, sizeof clen, "%zu", r->len);
    pagi_str raw = pagi_scope_raw_path(s), query = pagi_scope_query_string(s);
    const char *method = pagi_scope_method(s);
    pagi_header headers[] = {
        {{"content-type", 12}, {"application/octet-stream", 24}},
        {{"content-length", 14}, {clen, (size_t)clen_n}},
        {{"x-echo-method", 13}, {method, strlen(method)}},
        {{"x-echo-path", 11}, raw},
        {{"x-echo-query", 12}, query},
        {{"x-echo-root-path", 16}, pagi_scope_root_path(s)},
    };
    pagi_str ct;
    if (pagi_scope_header(s, "content-type", &ct))
        headers[0].value = ct;
    pagi_event start = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_START);
    start.status = 200;
    start.headers = headers;
    start.header_count = sizeof headers / sizeof headers[0];
    pagi_event body = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_BODY);
    body.body.ptr = r->body ? r->body : "";
    body.body.len = r->len;
    if (pagi_send(s, &start, NULL, NULL) < 0 || pagi_send(s, &body, NULL, NULL) < 0) {
        pagi_scope_finish(s, pagi_scope_error(s));
        return;
    }
    pagi_scope_finish(s, NULL);
}

static void echo_on_event(pagi_scope *s, const pagi_event *ev, void *ud)
{
    echo_req *r = ud;
    if (ev->type == PAGI_EV_HTTP_DISCONNECT) {
        pagi_scope_finish(s, NULL);
        return;
    }
    if (echo_append(r, ev->body) < 0) {
        pagi_scope_finish(s, "echo: out of memory");
        return;
    }
    if (ev->more) {
        if (pagi_receive(s, echo_on_event, r) < 0)
            pagi_scope_finish(s, pagi_scope_error(s));
        return;
    }
    echo_respond(s, r);
}

/* ---- sse: ?count=N (3) &interval=MS (0) ticks [&drain=1], or ?status=NNN declines ---- */

typedef struct echo_sse {
    int count, interval_ms, status, sent;
    pagi_timer *timer;
} echo_sse;

/* The integer value of a query parameter, or def when absent or not a number. */
static long query_int(pagi_str q, const char *name, long def)
{
    size_t n = strlen(name);
    const char *p = q.ptr, *end = q.ptr + q.len;
    while (p && p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *stop = amp ? amp : end;
        if ((size_t)(stop - p) > n && !strncmp(p, name, n) && p[n] == '=') {
            char num[24];
            size_t k = (size_t)(stop - p) - n - 1;
            if (k == 0 || k >= sizeof num)
                return def;
            memcpy(num, p + n + 1, k);
            num[k] = '\0';
            char *e;
            long v = strtol(num, &e, 10);
            return *e ? def : v;
        }
        p = amp ? amp + 1 : NULL;
    }
    return def;
}

static void echo_sse_release(pagi_scope *s, void *data)
{
    echo_sse *e = data;
    pagi_timer_stop(e->timer);
    free(e);
}

static void echo_sse_next(pagi_scope *s, echo_sse *e);

static void echo_sse_on_timer(pagi_timer *t, void *ud)
{
    pagi_scope *s = ud;
    echo_sse *e = pagi_scope_userdata(s);
    pagi_timer_stop(t);
    e->timer = NULL;
    echo_sse_next(s, e);
}

static void echo_sse_sent(pagi_scope *s, const char *err, void *ud)
{
    echo_sse *e = ud;
    if (err || !pagi_conn_is_connected(s)) {
        pagi_scope_finish(s, err);
        return;
    }
    if (e->sent >= e->count) {
        pagi_scope_finish(s, NULL); /* returning ends the stream */
        return;
    }
    if (e->interval_ms > 0)
        e->timer = pagi_timer_start(pagi_scope_loop(s), e->interval_ms / 1000.0, 0,
                                    echo_sse_on_timer, s);
    else
        echo_sse_next(s, e);
}

static void echo_sse_next(pagi_scope *s, echo_sse *e)
{
    char num[24];
    int n = snprintf(num, sizeof num, "%d", ++e->sent);
    pagi_event ev = PAGI_EVENT_INIT(PAGI_EV_SSE_SEND);
    ev.event = (pagi_str){"tick", 4};
    ev.id = (pagi_str){num, (size_t)n};
    ev.data = (pagi_str){num, (size_t)n};
    if (pagi_send(s, &ev, echo_sse_sent, e) < 0)
        pagi_scope_finish(s, pagi_scope_error(s));
}

static void echo_sse_on_request(pagi_scope *s, const pagi_event *ev, void *ud)
{
    echo_sse *e = ud;
    if (ev->type == PAGI_EV_SSE_DISCONNECT) {
        pagi_scope_finish(s, NULL);
        return;
    }
    if (ev->more) { /* a body we do not need: read it to the end */
        if (pagi_receive(s, echo_sse_on_request, e) < 0)
            pagi_scope_finish(s, pagi_scope_error(s));
        return;
    }
    if (e->status) {
        static const pagi_header hv[] = {{{"content-type", 12}, {"text/plain", 10}}};
        pagi_event start = PAGI_EVENT_INIT(PAGI_EV_SSE_HTTP_RESPONSE_START);
        start.status = e->status;
        start.headers = hv;
        start.header_count = 1;
        pagi_event body = PAGI_EVENT_INIT(PAGI_EV_SSE_HTTP_RESPONSE_BODY);
        body.body = (pagi_str){"declined\n", 9};
        if (pagi_send(s, &start, NULL, NULL) < 0 || pagi_send(s, &body, NULL, NULL) < 0)
            pagi_scope_finish(s, pagi_scope_error(s));
        else
            pagi_scope_finish(s, NULL);
        return;
    }
    pagi_event start = PAGI_EVENT_INIT(PAGI_EV_SSE_START);
    if (pagi_send(s, &start, echo_sse_sent, e) < 0)
        pagi_scope_finish(s, pagi_scope_error(s));
}

/* Draining: no more ticks. A tick in flight ends the stream from its
 * completion (sent >= count); a tick waiting on its timer ends it now. */
static void echo_sse_on_server_drain(pagi_scope *s, void *ud)
{
    echo_sse *e = ud;
    e->count = e->sent;
    if (e->timer) {
        pagi_timer_stop(e->timer);
        e->timer = NULL;
        pagi_scope_finish(s, NULL);
    }
}

static void echo_sse_handle(pagi_scope *s)
{
    echo_sse *e = calloc(1, sizeof *e);
    if (!e) {
        pagi_scope_finish(s, "echo: out of memory");
        return;
    }
    pagi_str q = pagi_scope_query_string(s);
    e->count = (int)query_int(q, "count", 3);
    e->interval_ms = (int)query_int(q, "interval", 0);
    long status = query_int(q, "status", 0);
    e->status = (status >= 200 && status <= 999) ? (int)status : 0;
    if (e->count < 0)
        e->count = 0;
    if (e->interval_ms < 0)
        e->interval_ms = 0;
    pagi_scope_set_userdata(s, e, echo_sse_release);
    int end_on_drain = query_int(q, "drain", 0) == 1;
    if ((end_on_drain && pagi_scope_on_server_drain(s, echo_sse_on_server_drain, e) < 0) ||
        pagi_receive(s, echo_sse_on_request, e) < 0)
        pagi_scope_finish(s, pagi_scope_error(s));
}

/* ---- websocket: accept (first offered subprotocol), echo each message with its type ---- */

static void echo_ws_on_event(pagi_scope *s, const pagi_event *ev, void *ud);

static void echo_ws_next(pagi_scope *s, const char *err, void *ud)
{
    /* The next receive waits for the echo's completion: a slow client slows the echo. */
    if (err) {
        pagi_scope_finish(s, err);
        return;
    }
    if (pagi_receive(s, echo_ws_on_event, NULL) < 0)
        pagi_scope_finish(s, pagi_scope_error(s));
}

static void echo_ws_on_event(pagi_scope *s, const pagi_event *ev, void *ud)
{
    pagi_event out;
    switch (ev->type) {
    case PAGI_EV_WEBSOCKET_CONNECT:
        if (pagi_server_draining(s)) { /* a handshake caught by the drain: refused (403) */
            pagi_scope_finish(s, NULL);
            return;
        }
        out = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_ACCEPT);
        if (pagi_scope_subprotocol_count(s) > 0)
            out.subprotocol = pagi_scope_subprotocol(s, 0);
        break;
    case PAGI_EV_WEBSOCKET_RECEIVE:
        if (pagi_server_draining(s)) { /* our 1001 close is out: no more echoes */
            echo_ws_next(s, NULL, NULL);
            return;
        }
        out = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_SEND);
        out.is_text = ev->is_text;
        if (ev->is_text)
            out.text = ev->text;
        else
            out.bytes = ev->bytes;
        break;
    default: /* websocket.disconnect */
        pagi_scope_finish(s, NULL);
        return;
    }
    if (pagi_send(s, &out, echo_ws_next, NULL) < 0)
        pagi_scope_finish(s, pagi_scope_error(s));
}

/* Draining: close with 1001 (before the accept, that close is a refusal).
 * The pending receive then gets the disconnect, which finishes the scope. */
static void echo_ws_on_server_drain(pagi_scope *s, void *ud)
{
    pagi_event close = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_CLOSE);
    close.code = 1001;
    close.reason = (pagi_str){"server shutting down", 20};
    pagi_send(s, &close, NULL, NULL); /* refused only if already closed */
}

static void echo_handle(pagi_scope *s, void *instance)
{
    if (pagi_scope_type_of(s) == PAGI_SCOPE_WEBSOCKET) {
        if (pagi_scope_on_server_drain(s, echo_ws_on_server_drain, NULL) < 0 ||
            pagi_receive(s, echo_ws_on_event, NULL) < 0)
            pagi_scope_finish(s, pagi_scope_error(s));
        return;
    }
    if (pagi_scope_type_of(s) == PAGI_SCOPE_SSE) {
        echo_sse_handle(s);
        return;
    }
    if (pagi_scope_type_of(s) != PAGI_SCOPE_HTTP) {
        pagi_scope_finish(s, "echo: unsupported scope type");
        return;
    }
    echo_req *r = calloc(1, sizeof *r);
    if (!r) {
        pagi_scope_finish(s, "echo: out of memory");
        return;
    }
    pagi_scope_set_userdata(s, r, echo_release);
    if (pagi_receive(s, echo_on_event, r) < 0)
        pagi_scope_finish(s, pagi_scope_error(s));
}

const pagi_app app_echo = {
    .abi_version = PAGI_ABI_VERSION,
    .name = "echo",
    .handle = echo_handle,
};
