/*
 * http1_conn.c - HTTP/1.1 on a connection: feeding the parser, creating a
 * scope per request, body flow control, parse errors as server-generated
 * responses, and what happens when a response is complete (keep-alive and
 * the next pipelined request, or close). Requests are served one at a time,
 * so pipelined responses leave in order.
 */
#include "http1_conn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/shm.h"
#include "worker/core/access_log.h"
#include "worker/apps/metrics.h"
#include "worker/core/conn.h"
#include "worker/core/loop.h"
#include "worker/core/reason.h"
#include "worker/scope/scope.h"
#include "worker/sse/sse.h"
#include "worker/core/tls_conn.h"
#include "worker/ws/websocket.h"

/* Input kept for a request that is already complete (pipelined bytes). */
#define PIPELINE_INPUT_MAX 65536

static int h1_on_request(void *ud, const h1_request *req);
static int h1_on_body(void *ud, const char *data, size_t len);
static int h1_on_complete(void *ud);

static const h1_parser_callbacks h1_callbacks = {
    .on_request = h1_on_request,
    .on_body = h1_on_body,
    .on_complete = h1_on_complete,
};

/* The state of a request coming in: made at its first byte. NULL when out of memory. */
static h1_conn *h1_conn_get(conn *c)
{
    if (!c->proto_state)
        c->proto_state = calloc(1, sizeof(h1_conn));
    return c->proto_state;
}

/* The request we answered may still be arriving (its body unread). */
static int h1_conn_peer_may_send(const conn *c)
{
    const h1_conn *h = h1_of(c);
    return !h || !h->msg_complete;
}

int h1_conn_request_line(const conn *c, pagi_str *method, pagi_str *target)
{
    const h1_conn *h = h1_of(c);
    return h && h->parser && h1_parser_request_line(h->parser, method, target);
}

/*
 * The parser lives from the first byte of a request to the end of its
 * message: a connection between requests (or serving a long stream) holds
 * none. Returns NULL when out of memory.
 */
static h1_parser *h1_parser_for(conn *c)
{
    h1_conn *h = h1_of(c);
    if (h->parser)
        return h->parser;
    if (c->w->h1_spare) {
        h->parser = c->w->h1_spare;
        c->w->h1_spare = NULL;
        h1_parser_reuse(h->parser, c);
        return h->parser;
    }
    const pagid_limits *l = &c->w->cfg->limits;
    h1_limits lim = {
        .max_request_line = l->max_request_line,
        .max_header_size = l->max_header_size,
        .max_header_count = l->max_header_count,
        .max_body_size = l->max_body_size,
    };
    h->parser = h1_parser_new(&lim, &h1_callbacks, c);
    return h->parser;
}

/* A parser whose message ended is kept by the worker for the next request
 * (any connection's: the limits and callbacks are the worker's), with its
 * small head blocks: a new one per request was a calloc and three
 * allocations of head memory. One is enough: requests are parsed one at a
 * time. A parser dropped in the middle of a message (an error, a close) is
 * freed, so the spare never holds a half-read request. */
static void h1_parser_drop(conn *c, h1_conn *h)
{
    if (h->parser && !c->w->h1_spare && h1_parser_is_done(h->parser))
        c->w->h1_spare = h->parser;
    else
        h1_parser_free(h->parser);
    h->parser = NULL;
}

/* Free what the state holds; the struct itself is the caller's to free. */
static void h1_conn_clear(conn *c, h1_conn *h)
{
    h1_parser_drop(c, h);
    sse_stream_free(h->sse);
    h->sse = NULL;
    buf_free(&h->body);
    http_exchange_free(&h->x);
}

/* Between requests: nothing up the stack holds the state any more. */
static void h1_conn_free_now(conn *c)
{
    h1_conn *h = h1_of(c);
    if (!h)
        return;
    h1_conn_clear(c, h);
    free(h);
    c->proto_state = NULL;
}

static void h1_conn_free_job(const runq_item *it)
{
    free(it->a);
}

/*
 * conn_close's release: callers up the stack (the parser loop, an exchange
 * ending) may still look at the state after a call that closed the
 * connection, as they may at the conn itself; so the struct goes at the
 * safe point, with the conn, and what it holds goes now.
 */
void h1_conn_free(conn *c)
{
    h1_conn *h = h1_of(c);
    if (!h)
        return;
    h1_conn_clear(c, h);
    c->proto_state = NULL;
    if (loop_queue(&c->w->loop, h1_conn_free_job, NULL, h, NULL, NULL) < 0)
        log_error("leaking a connection's HTTP/1.1 state (out of memory)");
}

void h1_conn_drop_parser(conn *c)
{
    h1_conn *h = h1_of(c);
    h1_parser_drop(c, h);
    buf_free(&h->body);
}

static size_t body_buffer_limit(const conn *c)
{
    return c->w->cfg->high_watermark;
}

/* ---- parser callbacks (run inside h1_parser_feed) ---- */

static int h1_on_request(void *ud, const h1_request *req)
{
    conn *c = ud;
    h1_conn *h = h1_of(c);
    scope_request sr = {
        .method = req->method,
        .http_version = req->http_minor == 0 ? "1.0" : "1.1",
        .scheme = c->tls ? "https" : "http",
        .path = req->path,
        .raw_path = req->raw_path,
        .query = req->query,
        .headers = req->headers,
        .header_count = req->header_count,
        .client_host = c->peer_family ? conn_peer_host(c) : NULL,
        .client_port = c->peer_port,
        .server_host = c->server_host,
        .server_port = c->server_port,
        .tls = c->tls ? tls_conn_info(c->tls) : NULL,
    };
    if (c->tls && !sr.tls)
        return -1; /* out of memory: a TLS scope without its extension would lie */
    h->x.log_start = ev_now(c->w->loop.ev);
    h->x.status = 0;
    if (req->upgrade_websocket && !c->status_listener) /* checked there; c then speaks ws_proto */
        return ws_on_upgrade_request(c, req, &sr);
    pagi_scope_type type = PAGI_SCOPE_HTTP;
    const scope_ops *ops = &h1_exchange_ops;
    if (req->accepts_event_stream && !req->upgrade_websocket && !c->status_listener) {
        /* The spec: Accept: text/event-stream makes an sse scope, for every method. */
        if (!(h->sse = sse_stream_new(c->w, &sse_h1_carrier, c)))
            return -1;
        type = PAGI_SCOPE_SSE;
        ops = &sse_exchange_ops;
    }
    pagi_scope *s = scope_new(c->w, type, ops, c, &sr);
    if (!s) {
        sse_stream_free(h->sse);
        h->sse = NULL;
        return -1;
    }
    h1_exchange_begin(c, s, req);
    return 0;
}

/*
 * A new exchange on this connection: every per-request field starts over
 * here, whatever kind of scope it is (the WebSocket handshake uses it too),
 * so a field added to h1_conn is reset in one place.
 */
void h1_exchange_begin(conn *c, pagi_scope *s, const h1_request *req)
{
    h1_conn *h = h1_of(c);
    h->scope = s;
    h->start_app = 1;
    h->msg_complete = 0;
    h->parse_error = 0;
    h->body_end_delivered = 0;
    h->req_keep_alive = req->keep_alive;
    h->close_after = 0;
    h->announce_keep_alive = 0;
    h->http_minor = req->http_minor;
    h->head_request = strcmp(req->method, "HEAD") == 0;
    h->continue_pending = req->expect_continue && (req->chunked || req->content_length > 0);
    http_exchange_begin(&h->x, &h1_http_carrier, c, h->x.log_start);
    conn_set_state(c, CONN_ACTIVE);
}

static int h1_on_body(void *ud, const char *data, size_t len)
{
    conn *c = ud;
    h1_conn *h = h1_of(c);
    if (buf_append(&h->body, data, len) < 0)
        return -1;
    h->continue_pending = 0; /* the client sent the body without waiting */
    if (h->scope)
        scope_poke_receive(h->scope);
    return 0;
}

static int h1_on_complete(void *ud)
{
    conn *c = ud;
    h1_conn *h = h1_of(c);
    h->msg_complete = 1;
    h->continue_pending = 0;
    if (h->scope)
        scope_poke_receive(h->scope);
    return 0;
}

/* ---- server-generated responses ---- */

static void h1_queue_error(conn *c, int status, const char *text)
{
    shm_count_request(c->w->stats, status);
    buf *tmp = &c->w->scratch;
    buf_reset(tmp);
    if (h1_error_response(tmp, status, text, h1_date_now((long)ev_now(c->w->loop.ev)), 0) == 0)
        outq_append(&c->out, buf_head(tmp), buf_size(tmp));
}

/* End the current exchange abnormally (on_disconnect with reason) and let go of it. */
void h1_abort_exchange(conn *c, const char *reason)
{
    h1_conn *h = h1_of(c);
    pagi_scope *s = h->scope;
    if (!s)
        return;
    http_exchange_log(&h->x, c, s, reason);
    scope_disconnect(s, reason);
    http_exchange_settle_parked(&h->x, s, NULL);
    h1_exchange_release(c);
}

/* Whatever way the exchange ended: let go of the scope and the per-request state. */
void h1_exchange_release(conn *c)
{
    h1_conn *h = h1_of(c);
    pagi_scope *s = h->scope;
    sse_stream_free(h->sse);
    h->sse = NULL;
    h->scope = NULL;
    if (s)
        scope_detach(s);
}

static conn_fate h1_parse_failed(conn *c)
{
    h1_conn *h = h1_of(c);
    int status = h1_parser_error_status(h->parser);
    const char *text = h1_parser_error_text(h->parser);
    log_info("%d from %s:%d: %s", status, conn_peer_host(c), c->peer_port, text);
    if (h->scope) {
        /* The head was fine; the body was not (bad chunk, or over the size limit). */
        int started = scope_is_started(h->scope);
        if (!started)
            h->x.status = status; /* the line says what the client got */
        h1_abort_exchange(c, status == 413 ? reason_body_too_large : reason_protocol_error);
        if (started) {
            conn_close(c, NULL);
            return CONN_GONE;
        }
    } else if (c->w->alog) {
        access_log_request(c->w->alog, c, NULL, 0, status, 0, NULL);
    }
    h1_queue_error(c, status, text);
    conn_close_after_write(c);
    return CONN_ALIVE; /* until the answer is written */
}

void h1_conn_plain_http(conn *c)
{
    if (c->w->alog)
        access_log_request(c->w->alog, c, NULL, 0, 400, 0, NULL);
    h1_queue_error(c, 400, "plain HTTP request sent to an HTTPS port");
    conn_close_after_write(c);
}

void h1_conn_header_timeout(conn *c)
{
    if (c->w->alog)
        access_log_request(c->w->alog, c, NULL, 0, 408, 0, NULL);
    h1_queue_error(c, 408, "request header timeout");
    conn_close_after_write(c);
}

/* ---- input ---- */

conn_fate h1_conn_on_input(conn *c)
{
    if (buf_size(&c->in) == 0 ||
        (c->state != CONN_WAIT_REQUEST && c->state != CONN_READ_HEAD && c->state != CONN_ACTIVE))
        return conn_fate_of(c);
    h1_conn *h = h1_conn_get(c);
    if (!h) {
        conn_close(c, reason_server_error);
        return CONN_GONE;
    }
    for (;;) {
        if (c->state != CONN_WAIT_REQUEST && c->state != CONN_READ_HEAD && c->state != CONN_ACTIVE)
            return CONN_ALIVE; /* closing or lingering: still there */
        if (c->state == CONN_ACTIVE &&
            (h->msg_complete || buf_size(&h->body) >= body_buffer_limit(c)))
            return CONN_ALIVE; /* pipelined bytes wait; or the app has not taken the body yet */
        size_t avail = buf_size(&c->in);
        if (avail == 0)
            return CONN_ALIVE;
        /* A body is fed no further than the buffer's room: the body buffer
         * never holds more than the high watermark, whatever one read brought. */
        int capped = 0;
        if (c->state == CONN_ACTIVE && h->scope &&
            avail > body_buffer_limit(c) - buf_size(&h->body)) {
            avail = body_buffer_limit(c) - buf_size(&h->body);
            capped = 1;
        }
        size_t used = 0;
        h1_parser *p = h1_parser_for(c);
        if (!p) {
            conn_close(c, reason_server_error);
            return CONN_GONE;
        }
        h1_state st = h1_parser_feed(p, buf_head(&c->in), avail, &used);
        buf_consume(&c->in, used);
        if (c->state == CONN_WAIT_REQUEST && h1_parser_started(p))
            conn_set_state(c, CONN_READ_HEAD);
        if (st == H1_DONE && h->parser == p)
            h1_parser_drop(c, h); /* the message is whole: nothing left to parse */
        if (h->start_app && h->scope) {
            h->start_app = 0;
            pagi_scope *s = h->scope;
            scope_ref(s);
            if (c->status_listener)
                app_metrics.handle(s, c->w); /* never the app: only metrics here */
            else
                scope_start_app(s);
            /* The app ran: it may have closed the connection (h is then
             * released: not looked at), or ended this exchange. */
            conn_fate fate = conn_fate_of(c);
            int ended = fate == CONN_GONE || h->scope != s;
            scope_unref(s);
            if (fate == CONN_GONE)
                return CONN_GONE;
            if (ended && st != H1_ERROR)
                return CONN_ALIVE;
        }
        if (st == H1_ERROR)
            return h1_parse_failed(c);
        if (st == H1_NEED_MORE && !capped)
            return CONN_ALIVE;
        /* H1_DONE: loop once more, which returns as the message is complete;
         * a capped feed: once more, which feeds on if the body left room. */
    }
}

conn_fate h1_conn_on_eof(conn *c)
{
    switch (c->state) {
    case CONN_WAIT_REQUEST:
    case CONN_READ_HEAD:
        conn_close(c, NULL);
        return CONN_GONE;
    case CONN_ACTIVE:
        /* The client left while its request was being served. */
        conn_close(c, reason_client_closed);
        return CONN_GONE;
    default:
        return conn_fate_of(c); /* closing: finish writing what we have */
    }
}

int h1_conn_wants_read(const conn *c)
{
    const h1_conn *h = h1_of(c);
    if (buf_size(&c->in) >= PIPELINE_INPUT_MAX)
        return 0;
    if (!h || h->msg_complete)
        return 1; /* keep watching, to see a client that leaves */
    return buf_size(&h->body) < body_buffer_limit(c);
}

int h1_conn_waiting_for_body(const conn *c)
{
    const h1_conn *h = h1_of(c);
    return h && h->scope && !h->msg_complete && !h->continue_pending &&
           scope_receive_waiting(h->scope) && buf_size(&h->body) == 0;
}

/* ---- output side ---- */

conn_fate h1_conn_on_written(conn *c)
{
    h1_conn *h = h1_of(c);
    if (!h || !h->scope)
        return CONN_ALIVE;
    http_exchange_written(&h->x, h->scope, c->w->cfg->low_watermark);
    if (h->x.resp == HX_FINAL && outq_buffered(&c->out) == 0)
        return h1_exchange_end(c);
    return CONN_ALIVE;
}

/* The response is fully written: complete the exchange, then keep-alive or close. */
conn_fate h1_exchange_end(conn *c)
{
    h1_conn *h = h1_of(c);
    pagi_scope *s = h->scope;
    http_exchange_log(&h->x, c, s, NULL);
    scope_mark_complete(s);
    http_exchange_settle_parked(&h->x, s, NULL);
    h1_exchange_release(c);
    c->served++;
    if (c->w->on_request_done)
        c->w->on_request_done(c->w); /* may start a drain: read draining after it */
    return h1_exchange_next(c, h->plan.keep_alive);
}

conn_fate h1_exchange_next(conn *c, int keep)
{
    h1_conn *h = h1_of(c);
    keep = keep && h->msg_complete && !c->w->draining && !c->eof;
    if (!keep) {
        conn_close_after_write(c);
        return CONN_ALIVE;
    }
    /* Between requests the connection keeps nothing but itself: its
     * HTTP/1.1 state is made again by the next request's first byte. */
    h1_conn_free_now(c);
    conn_set_state(c, CONN_WAIT_REQUEST);
    if (buf_size(&c->in) > 0)
        return h1_conn_on_input(c);
    return CONN_ALIVE;
}

void h1_conn_on_close(conn *c, const char *reason)
{
    h1_conn *h = h1_of(c);
    if (h && h->scope)
        h1_abort_exchange(c, reason ? reason : reason_server_error);
}

const conn_proto h1_proto = {
    .name = "http/1.1",
    .on_input = h1_conn_on_input,
    .on_eof = h1_conn_on_eof,
    .on_written = h1_conn_on_written,
    .wants_read = h1_conn_wants_read,
    .waiting_for_input = h1_conn_waiting_for_body,
    .on_close = h1_conn_on_close,
    .on_header_timeout = h1_conn_header_timeout,
    .on_plain_http = h1_conn_plain_http,
    .peer_may_send = h1_conn_peer_may_send,
    .release = h1_conn_free,
    .request_line = h1_conn_request_line,
};
