/*
 * h2_stream.c - one HTTP/2 stream as a PAGI scope (http, or sse through
 * sse.c's carrier): made from its head (h2_request.c) after the read that
 * completed it, the body delivered to pull receives with WINDOW_UPDATEs
 * released only as the app takes it, the one place its scope ends, and the
 * stream freed when nghttp2 closes it. The response side is h2_response.c.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "worker/core/access_log.h"
#include "worker/apps/metrics.h"
#include "h2_int.h"
#include "h2_mem.h"
#include "worker/core/reason.h"
#include "worker/scope/scope.h"
#include "worker/core/tls_conn.h"

static const scope_ops h2_scope_ops;
static const scope_ops h2_sse_ops;
static const sse_carrier h2_sse_carrier;

h2_stream *h2_stream_new(h2_session *h, int32_t id)
{
    h2_stream *st = h2_mem_calloc(sizeof *st); /* freed by stream_free */
    if (!st)
        return NULL;
    st->h = h;
    st->id = id;
    st->file_fd = -1;
    h2_head_init(&st->head);
    http_exchange_begin(&st->x, &h2_http_carrier, st, ev_now(h->c->w->loop.ev));
    st->input_at = st->x.log_start;
    st->next = h->streams;
    if (h->streams)
        h->streams->prev = st;
    h->streams = st;
    h->n_streams++;
    h2_session_streams_changed(h);
    return st;
}

size_t h2_session_busy(const h2_session *h)
{
    return h->n_streams + h->n_gone;
}

void h2_session_prune_gone(h2_session *h)
{
    size_t k = 0;
    for (size_t i = 0; i < h->n_gone; i++) {
        if (scope_is_finished(h->gone[i]))
            scope_unref(h->gone[i]);
        else
            h->gone[k++] = h->gone[i];
    }
    h->n_gone = k;
    if (!k) {
        free(h->gone);
        h->gone = NULL;
        h->cap_gone = 0;
    }
}

/* A scope ended with a reason while its app may run on: hold it, so an app
 * that ignores the disconnect still takes one of the connection's streams. */
static void hold_gone(h2_session *h, pagi_scope *s)
{
    if (scope_is_finished(s))
        return;
    if (h->n_gone == h->cap_gone) {
        size_t ncap = h->cap_gone ? h->cap_gone * 2 : 8;
        pagi_scope **v = realloc(h->gone, ncap * sizeof *v);
        if (!v)
            return;
        h->gone = v;
        h->cap_gone = ncap;
    }
    scope_ref(s);
    h->gone[h->n_gone++] = s;
}

/* ---- the request head ---- */

int h2_stream_header(h2_stream *st, const uint8_t *name, size_t nl, const uint8_t *value, size_t vl)
{
    const pagid_limits *l = &st_conn(st)->w->cfg->limits;
    int rc = h2_head_add(&st->head, name, nl, value, vl, l->max_header_size, l->max_header_count);
    return rc == 0 ? 0 : NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
}

void h2_stream_headers_done(h2_stream *st, int end_stream)
{
    h2_session *h = st->h;
    st->ready = 1;
    if (!st->queued) {
        st->queued = 1;
        st->ready_next = NULL;
        if (h->ready_tail)
            h->ready_tail->ready_next = st;
        else
            h->ready_head = st;
        h->ready_tail = st;
    }
    if (end_stream)
        st->req_end = 1;
}

static void drop_body(h2_stream *st);

/* The request's content-length, or -1 (none, or not a number). */
static int64_t declared_length(const h2_request *r)
{
    for (size_t i = 0; i < r->header_count; i++) {
        pagi_str n = r->headers[i].name, v = r->headers[i].value;
        if (n.len != 14 || memcmp(n.ptr, "content-length", 14))
            continue;
        int64_t x = 0;
        if (!v.len)
            return -1;
        for (size_t j = 0; j < v.len; j++) {
            if (v.ptr[j] < '0' || v.ptr[j] > '9' || x > (INT64_MAX - 9) / 10)
                return -1;
            x = x * 10 + (v.ptr[j] - '0');
        }
        return x;
    }
    return -1;
}

/* Make the scope of a stream whose head is whole; 0, or an HTTP status to refuse with. */
static int stream_make_scope(h2_stream *st)
{
    conn *c = st_conn(st);
    h2_request r;
    int status = h2_head_request(&st->head, &r);
    if (status) {
        h2_request_free(&r);
        return status;
    }
    /* The limits HTTP/1.1 applies to its request line and body, here to
     * :path and a declared content-length (a body without one is counted
     * as it comes, h2_stream_data). */
    const pagid_limits *l = &c->w->cfg->limits;
    size_t target = r.raw_path.len + (r.query.len ? r.query.len + 1 : 0);
    int64_t clen = declared_length(&r);
    if (l->max_request_line && target > l->max_request_line)
        status = 414;
    else if (l->max_body_size && clen > 0 && (uint64_t)clen > l->max_body_size)
        status = 413;
    if (status) {
        h2_request_free(&r);
        return status;
    }
    if (r.scheme && strcmp(r.scheme, c->tls ? "https" : "http"))
        log_debug("HTTP/2 stream %d from %s: :scheme %s on a %s connection; using the connection's",
                  st->id, conn_peer_host(c), r.scheme, c->tls ? "TLS" : "cleartext");
    scope_request sr = {
        .method = r.method,
        .http_version = "2",
        /* The connection says what the scheme is, not the client: an
         * :scheme of http over TLS must not make an app think its request
         * came in clear (or the reverse). */
        .scheme = c->tls ? "https" : "http",
        .path = r.path,
        .raw_path = r.raw_path,
        .query = r.query,
        .headers = r.headers,
        .header_count = r.header_count,
        .client_host = c->peer_family ? conn_peer_host(c) : NULL,
        .client_port = c->peer_port,
        .server_host = c->server_host,
        .server_port = c->server_port,
        .tls = c->tls ? tls_conn_info(c->tls) : NULL,
    };
    if (r.websocket) {
        /* RFC 8441: a websocket scope, on a listener that serves apps; a
         * CONNECT that ends its stream at once has no tunnel to carry. */
        if (c->status_listener)
            status = 501;
        else if (st->req_end)
            status = 400;
        else if (c->tls && !sr.tls)
            status = 500;
        else
            status = h2_ws_make(st, &r, &sr);
        h2_request_free(&r);
        return status;
    }
    pagi_scope *s = NULL;
    pagi_scope_type type = PAGI_SCOPE_HTTP;
    const scope_ops *ops = &h2_scope_ops;
    if (!c->status_listener && r.event_stream) {
        /* Accept: text/event-stream (any method) makes an sse scope, as over HTTP/1.1. */
        st->sse = sse_stream_new(c->w, &h2_sse_carrier, st);
        type = PAGI_SCOPE_SSE;
        ops = &h2_sse_ops;
    }
    if ((!c->tls || sr.tls) && (type == PAGI_SCOPE_HTTP || st->sse))
        s = scope_new(c->w, type, ops, st, &sr);
    st->x.no_body = !strcmp(r.method, "HEAD");
    h2_request_free(&r);
    if (!s) {
        sse_stream_free(st->sse);
        st->sse = NULL;
        return 500;
    }
    st->scope = s;
    return 0;
}

static const char *refusal_text(int status)
{
    switch (status) {
    case 431:
        return "request header fields too large";
    case 413:
        return "request body too large";
    case 414:
        return "request target too long";
    case 426:
        return "websocket version 13 required";
    case 501:
        return "CONNECT is not supported";
    case 500:
        return "out of memory";
    default:
        return "malformed request";
    }
}

static void stream_start_one(h2_stream *st)
{
    conn *c = st_conn(st);
    st->ready = 0;
    st->started = 1;
    int status = stream_make_scope(st);
    /* The head's storage is the scope's now (copied), or no longer needed. */
    h2_head_free(&st->head);
    if (status) {
        drop_body(st);
        log_info("HTTP/2 stream %d from %s: refused with %d", st->id, conn_peer_host(c), status);
        h2_resp_refuse(st, status, refusal_text(status), 1);
        return;
    }
    pagi_scope *s = st->scope;
    scope_ref(s);
    if (c->status_listener)
        app_metrics.handle(s, c->w);
    else
        scope_start_app(s);
    scope_unref(s);
}

void h2_stream_start_ready(h2_session *h)
{
    /* Oldest first, as the client opened them. A stream freed meanwhile
     * leaves the queue (stream_free), so popping before starting is safe. */
    while (h->ready_head && h->c->state != CONN_CLOSED) {
        h2_stream *st = h->ready_head;
        h->ready_head = st->ready_next;
        if (!h->ready_head)
            h->ready_tail = NULL;
        st->queued = 0;
        st->ready_next = NULL;
        if (st->ready)
            stream_start_one(st);
    }
}

/* ---- the request body ---- */

static void stream_end_scope(h2_stream *st, const char *reason);

/* limits.max_body_size passed: 413 while no response has started (the app,
 * if it runs, hears body_too_large), else the stream is reset. */
static void body_too_large(h2_stream *st)
{
    h2_session *h = st->h;
    st->too_large = 1;
    log_info("HTTP/2 stream %d from %s: request body too large", st->id, conn_peer_host(h->c));
    int had_scope = st->scope != NULL;
    if (st->x.resp == HX_NONE && !st->refuse)
        st->x.status = 413; /* for the access log line the scope's end writes */
    stream_end_scope(st, reason_body_too_large);
    drop_body(st);
    st->started = 1; /* no scope to make for it any more */
    st->ready = 0;
    h2_head_free(&st->head);
    if (st->x.resp == HX_NONE && !st->refuse)
        h2_resp_refuse(st, 413, "request body too large", !had_scope);
    else
        nghttp2_submit_rst_stream(h->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL);
    h2_session_kick(h);
}

int h2_stream_data(h2_stream *st, const uint8_t *data, size_t len)
{
    st->input_at = ev_now(st_conn(st)->w->loop.ev);
    size_t max = st_conn(st)->w->cfg->limits.max_body_size;
    st->body_total += len;
    /* A websocket's messages have their own bounds, frames sent with its
     * extended CONNECT (before st->ws exists) included. */
    int is_ws = st->ws || h2_head_has_protocol(&st->head);
    if (!is_ws && !st->too_large && !st->refuse && max && st->body_total > max)
        body_too_large(st);
    if (st->started && (!st->scope || !scope_is_connected(st->scope) || st->end_delivered)) {
        /* Nobody will read it: give the window back at once. (Before its
         * app starts, a body waits: the stream window bounds it.) */
        nghttp2_session_consume(st->h->ng, st->id, len);
        h2_session_kick(st->h);
        return 0;
    }
    if (buf_append(&st->body, data, len) < 0)
        return -1;
    if (st->ws)
        h2_ws_data(st, len);
    else if (st->scope)
        scope_poke_receive(st->scope);
    return 0;
}

void h2_stream_request_end(h2_stream *st)
{
    st->req_end = 1;
    if (st->ws && st->scope)
        h2_ws_peer_end(st);
    else if (st->scope)
        scope_poke_receive(st->scope);
}

static int body_event(pagi_scope *s, pagi_event *ev, int take, pagi_event_type req_type,
                      pagi_event_type disc_type)
{
    h2_stream *st = scope_proto(s);
    if (!st || !scope_is_connected(s) || scope_is_complete(s)) {
        if (take) {
            ev->type = disc_type;
            const char *r = pagi_conn_disconnect_reason(s);
            ev->reason.ptr = r ? r : "";
            ev->reason.len = r ? strlen(r) : 0;
        }
        return 1;
    }
    if (buf_size(&st->body) == 0 && !(st->req_end && !st->end_delivered))
        return 0;
    if (!take)
        return 1;
    scope_deliver_body(s, &st->body, st->req_end, req_type, ev);
    if (st->req_end)
        st->end_delivered = 1;
    if (ev->body.len) {
        /* The app took these bytes: the client may send as many more (and
         * has timeouts.request from now to do it). */
        st->input_at = ev_now(st_conn(st)->w->loop.ev);
        nghttp2_session_consume(st->h->ng, st->id, ev->body.len);
        h2_session_kick(st->h);
    }
    return 1;
}

static int h2_next_event(pagi_scope *s, pagi_event *ev, int take)
{
    return body_event(s, ev, take, PAGI_EV_HTTP_REQUEST, PAGI_EV_HTTP_DISCONNECT);
}

static void h2_receive_wanted(pagi_scope *s)
{
    h2_stream *st = scope_proto(s);
    if (!st)
        return;
    /* The request timeout counts from when the app began waiting (or the
     * stream's last body bytes, whichever is later). */
    st->input_at = ev_now(st_conn(st)->w->loop.ev);
    h2_session_arm_deadlines(st->h);
}

/* ---- ending ---- */

/* Is the app waiting for body bytes that have not come? */
static int body_waiting(const h2_stream *st)
{
    return st->scope && !st->ws && !st->req_end && buf_size(&st->body) == 0 &&
           scope_receive_waiting(st->scope);
}

double h2_stream_deadlines(h2_session *h, double now)
{
    const pagid_timeouts *t = &h->c->w->cfg->timeouts;
    double next = 0;
    for (h2_stream *st = h->streams; st; st = st->next) {
        double due;
        if (!st->started && !st->ready) {
            /* A header block still coming: timeouts.header bounds it whole,
             * however its CONTINUATION frames trickle in. The connection
             * can carry nothing else meanwhile, so it ends. */
            if (t->header <= 0)
                continue;
            due = st->x.log_start + t->header;
            if (now >= due) {
                log_info("HTTP/2 stream %d from %s: header timeout", st->id, conn_peer_host(h->c));
                conn_close(h->c, reason_client_timeout);
                return 0;
            }
        } else if (body_waiting(st)) {
            if (t->request <= 0)
                continue;
            due = st->input_at + t->request;
            if (now >= due) {
                log_info("HTTP/2 stream %d from %s: request timeout", st->id, conn_peer_host(h->c));
                stream_end_scope(st, reason_client_timeout);
                st->started = 1; /* no scope to make for it any more */
                st->ready = 0;
                nghttp2_submit_rst_stream(h->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL);
                h2_session_kick(h);
                continue;
            }
        } else {
            continue;
        }
        if (!next || due < next)
            next = due;
    }
    return next;
}

void h2_stream_timeout_stalled(h2_session *h)
{
    for (h2_stream *st = h->streams; st; st = st->next) {
        if (!st_pending(st) || st->too_large)
            continue;
        log_info("HTTP/2 stream %d from %s: write timeout (the client's window stays shut)", st->id,
                 conn_peer_host(h->c));
        stream_end_scope(st, reason_write_timeout);
        nghttp2_submit_rst_stream(h->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL);
    }
    h2_session_kick(h);
}

/* The one way a stream lets go of its scope: completed (reason NULL) or
 * not. Idempotent, so exactly one end per scope whatever comes first. */
static void stream_end_scope(h2_stream *st, const char *reason)
{
    pagi_scope *s = st->scope;
    if (!s)
        return;
    conn *c = st_conn(st);
    if (st->ws) { /* websocket_io.c turns the end into the scope's, and logs it */
        if (reason)
            hold_gone(st->h, s);
        h2_ws_end(st, reason);
        drop_body(st);
        return;
    }
    http_exchange_log(&st->x, c, s, reason);
    if (reason) {
        hold_gone(st->h, s);
        scope_disconnect(s, reason);
        http_exchange_settle_parked(&st->x, s, NULL);
        drop_body(st); /* no app will take it now */
    } else {
        scope_mark_complete(s);
        http_exchange_settle_parked(&st->x, s, NULL);
        c->served++;
        if (c->w->on_request_done)
            c->w->on_request_done(c->w);
    }
    sse_stream_free(st->sse); /* its timers stop with it */
    st->sse = NULL;
    st->scope = NULL;
    scope_detach(s);
}

/* Body bytes no app will take: the connection's window gets them back. */
static void drop_body(h2_stream *st)
{
    if (buf_size(&st->body))
        nghttp2_session_consume(st->h->ng, st->id, buf_size(&st->body));
    buf_free(&st->body);
}

void h2_stream_response_sent(h2_stream *st)
{
    http_exchange_set_state(&st->x, HX_FINAL);
    stream_end_scope(st, NULL);
    drop_body(st);
    /* The answer is whole while the request is not: tell the client to stop
     * sending it (RFC 9113 8.1), rather than take a body nobody reads. */
    if (!st->req_end)
        nghttp2_submit_rst_stream(st->h->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_NO_ERROR);
}

static void stream_free(h2_stream *st)
{
    h2_session *h = st->h;
    /* First: a websocket still open would end here (h2ws_ended settles the
     * parked sends and reads the body), so nothing of the stream is freed yet. */
    if (st->ws)
        h2_ws_free(st);
    h->pending -= st_pending(st);
    if (st->prev)
        st->prev->next = st->next;
    else
        h->streams = st->next;
    if (st->next)
        st->next->prev = st->prev;
    h->n_streams--;
    if (h->in_head == st)
        h->in_head = NULL;
    if (st->queued) {
        h2_stream **pp = &h->ready_head, *prev = NULL;
        while (*pp != st) {
            prev = *pp;
            pp = &(*pp)->ready_next;
        }
        *pp = st->ready_next;
        if (h->ready_tail == st)
            h->ready_tail = prev;
    }
    st_close_file(st);
    h2_head_free(&st->head);
    /* Body bytes still held (an app that never read them): the connection's
     * window gets them back, or every abandoned upload would shrink it for
     * good. nghttp2 credits the connection even for a closed stream. */
    if (buf_size(&st->body))
        nghttp2_session_consume_connection(h->ng, buf_size(&st->body));
    buf_free(&st->body);
    buf_free(&st->out);
    st_release_held(st);
    buf_free(&st->trailers);
    free(st->kept_head);
    http_exchange_free(&st->x);
    sse_stream_free(st->sse);
    h2_mem_free(st);
}

void h2_stream_reset(h2_stream *st, const char *reason)
{
    h2_session *h = st->h;
    stream_end_scope(st, reason);
    nghttp2_submit_rst_stream(h->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL);
    h2_session_kick(h);
}

void h2_stream_peer_reset(h2_stream *st)
{
    st->peer_reset = 1;
}

void h2_stream_closed(h2_stream *st, uint32_t error_code)
{
    h2_session *h = st->h;
    if (st->scope) {
        /* A client's RST_STREAM (CANCEL, usually) is the client leaving this
         * request; our own reset is a protocol or server error. */
        const char *reason = st->peer_reset || error_code == NGHTTP2_NO_ERROR ? reason_client_closed
                             : error_code == NGHTTP2_INTERNAL_ERROR           ? reason_server_error
                                                                    : reason_protocol_error;
        stream_end_scope(st, reason);
    }
    stream_free(st);
    h2_session_streams_changed(h);
}

void h2_stream_peer_eof(h2_session *h)
{
    for (h2_stream *st = h->streams; st; st = st->next) {
        if (st->started && !st->scope)
            continue; /* ended already: nothing to lose */
        /* A whole request is still answered, but an event stream is never
         * whole: a client that half-closed would hold it for good (as
         * HTTP/1.1, where a FIN ends it). */
        if (st->req_end && !st->sse)
            continue;
        stream_end_scope(st, reason_client_closed);
        st->started = 1;
        st->ready = 0;
        nghttp2_submit_rst_stream(h->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL);
    }
}

int h2_stream_going_away(h2_session *h)
{
    int n = 0;
    for (h2_stream *st = h->streams; st; st = st->next)
        if (st->ws && st->scope)
            n += h2_ws_going_away(st);
    return n;
}

void h2_stream_abort_all(h2_session *h, const char *reason)
{
    for (h2_stream *st = h->streams; st; st = st->next)
        stream_end_scope(st, reason ? reason : reason_server_shutdown);
}

void h2_stream_free_all(h2_session *h)
{
    while (h->streams)
        stream_free(h->streams);
    for (size_t i = 0; i < h->n_gone; i++)
        scope_unref(h->gone[i]);
    free(h->gone);
    h->gone = NULL;
    h->n_gone = h->cap_gone = 0;
}

/* ---- HTTP/2 as the carrier of an http exchange ---- */

static http_exchange *h2_exchange_of(const pagi_scope *s)
{
    h2_stream *st = scope_proto(s);
    return st ? &st->x : NULL;
}

/* The server's answer in the app's place (the 500 backstop, the 504 of
 * timeouts.response): the scope ends with reason, the stream with the
 * answer; the connection's other streams go on. */
static void h2c_answer(http_exchange *x, pagi_scope *s, int status, const char *text,
                       const char *reason, int may_keep)
{
    (void)s;
    (void)may_keep;
    h2_stream *st = x->owner;
    stream_end_scope(st, reason);
    h2_resp_refuse(st, status, text, 0);
}

static void h2c_abort(http_exchange *x, pagi_scope *s, const char *reason)
{
    (void)s;
    h2_stream *st = x->owner;
    stream_end_scope(st, reason);
    nghttp2_submit_rst_stream(st->h->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
    h2_session_kick(st->h);
}

const http_carrier h2_http_carrier = {
    .name = "HTTP/2",
    .strict_length = 1,
    .abort_says = "stream reset",
    .exchange = h2_exchange_of,
    .start = h2_resp_start,
    .body_mem = h2_resp_body_mem,
    .body_file = h2_resp_body_file,
    .body_end = h2_resp_body_end,
    .trailers = h2_resp_trailers,
    .pushed = h2_resp_pushed,
    .queued = h2_resp_queued,
    .answer = h2c_answer,
    .abort = h2c_abort,
};

/* ---- scope ops ---- */

static int h2_send(pagi_scope *s, const pagi_event *ev, pagi_send_cb cb, void *ud)
{
    return http_exchange_send(&h2_http_carrier, s, ev, cb, ud);
}

static void h2_response_timeout(pagi_scope *s)
{
    http_exchange_response_timeout(&h2_http_carrier, s);
}

static void h2_finished(pagi_scope *s, const char *error)
{
    http_exchange_finished(&h2_http_carrier, s, error);
}

static size_t h2_buffered(const pagi_scope *s)
{
    return http_exchange_buffered(&h2_http_carrier, s);
}

static int h2_above_high(const pagi_scope *s)
{
    return http_exchange_above_high(&h2_http_carrier, s);
}

static const scope_ops h2_scope_ops = {
    .send = h2_send,
    .next_event = h2_next_event,
    .receive_wanted = h2_receive_wanted,
    .finished = h2_finished,
    .buffered = h2_buffered,
    .above_high = h2_above_high,
    .response_timeout = h2_response_timeout,
};

/* ---- sse scopes on a stream: sse.c's carrier ---- */

static int sse_start(pagi_scope *s, const pagi_event *ev, pagi_send_cb cb, void *ud, int decline)
{
    (void)decline; /* a declined stream simply ends; no connection to close */
    h2_stream *st = scope_proto(s);
    return http_exchange_start(&st->x, s, ev, cb, ud, "http.response.start");
}

static int sse_body(pagi_scope *s, const pagi_event *ev, pagi_send_cb cb, void *ud)
{
    h2_stream *st = scope_proto(s);
    return http_exchange_body(&st->x, s, ev, cb, ud);
}

static int sse_next(pagi_scope *s, pagi_event *ev, int take)
{
    return body_event(s, ev, take, PAGI_EV_SSE_REQUEST, PAGI_EV_SSE_DISCONNECT);
}

static pagi_scope *sse_scope(void *owner)
{
    return ((h2_stream *)owner)->scope;
}

static sse_stream *sse_of(const pagi_scope *s)
{
    const h2_stream *st = scope_proto(s);
    return st ? st->sse : NULL;
}

/* timeouts.sse_idle: this stream ends (reset), the connection's others go on. */
static void sse_idle(void *owner)
{
    h2_stream *st = owner;
    h2_session *h = st->h;
    int32_t id = st->id;
    stream_end_scope(st, reason_idle_timeout);
    nghttp2_submit_rst_stream(h->ng, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
    h2_session_kick(h);
}

static size_t sse_queued(void *owner)
{
    return st_pending(owner);
}

static const sse_carrier h2_sse_carrier = {
    .start = sse_start,
    .body = sse_body,
    .next_event = sse_next,
    .finished = h2_finished,
    .end = NULL,
    .scope = sse_scope,
    .stream = sse_of,
    .idle = sse_idle,
    .queued = sse_queued,
};

static int h2_sse_send(pagi_scope *s, const pagi_event *ev, pagi_send_cb cb, void *ud)
{
    return sse_send_with(&h2_sse_carrier, s, ev, cb, ud);
}

static void h2_sse_finished(pagi_scope *s, const char *error)
{
    sse_finished_with(&h2_sse_carrier, s, error);
}

static const scope_ops h2_sse_ops = {
    .send = h2_sse_send,
    .next_event = sse_next,
    .receive_wanted = h2_receive_wanted,
    .finished = h2_sse_finished,
    .buffered = h2_buffered,
    .above_high = h2_above_high,
    .response_timeout = h2_response_timeout, /* not started: 504 as for http */
};
