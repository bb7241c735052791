/*
 * sse.c - the sse scope. It rides on an HTTP exchange through a carrier
 * (sse.h: HTTP/1.1's here, an HTTP/2 stream's in h2_stream.c): sse.start
 * is a response start with the event-stream headers filled in, every
 * dispatch is one body chunk (or DATA), sse.close (or the app returning) is
 * the final one, and a decline is an ordinary response. First send wins:
 * after sse.start the decline events raise, after a decline the stream
 * events raise.
 */
#include "sse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "worker/core/conn.h"
#include "worker/http1/http1_conn.h"
#include "worker/http1/http1_exchange.h"
#include "worker/core/reason.h"
#include "worker/scope/scope.h"

typedef enum sse_mode {
    SSE_PENDING,   /* nothing sent yet: start or decline */
    SSE_STREAMING, /* sse.start sent */
    SSE_DECLINED,  /* sse.http.response.start sent */
    SSE_CLOSED     /* sse.close sent (or the app returned): further stream events raise */
} sse_mode;

struct sse_stream {
    sse_mode mode;
    const sse_carrier *car;
    void *owner; /* the carrier's exchange: the conn (HTTP/1.1), the stream (HTTP/2) */
    worker_ctx *w;
    ev_timer keepalive;
    char *keepalive_line; /* the whole comment line(s), "\n\n"-terminated */
    size_t keepalive_len;
    ev_timer idle;
};

/* ---- HTTP/1.1's carrier ---- */

static int h1_start(pagi_scope *s, const pagi_event *ev, pagi_send_cb cb, void *ud, int decline)
{
    conn *c = scope_proto(s);
    if (decline)
        h1_of(c)->close_after = 1; /* the spec: the server closes after a decline */
    else
        h1_of(c)->announce_keep_alive =
            1; /* Www.pod: sse.start sends Connection: keep-alive on 1.1 */
    return http_exchange_start(&h1_of(c)->x, s, ev, cb, ud, "http.response.start");
}

static int h1_body(pagi_scope *s, const pagi_event *ev, pagi_send_cb cb, void *ud)
{
    conn *c = scope_proto(s);
    return http_exchange_body(&h1_of(c)->x, s, ev, cb, ud);
}

static int h1_next(pagi_scope *s, pagi_event *ev, int take)
{
    return h1x_next_body_event(s, ev, take, PAGI_EV_SSE_REQUEST, PAGI_EV_SSE_DISCONNECT);
}

static void h1_end(pagi_scope *s)
{
    conn *c = scope_proto(s);
    h1_of(c)->plan.keep_alive = 0; /* an event-stream client reconnects on a new connection */
}

static pagi_scope *h1_scope(void *owner)
{
    return h1_of(owner)->scope;
}

static sse_stream *h1_stream(const pagi_scope *s)
{
    conn *c = scope_proto(s);
    return c && h1_of(c) ? h1_of(c)->sse : NULL;
}

static void h1_idle(void *owner) { conn_close(owner, reason_idle_timeout); }

static size_t h1_queued(void *owner) { return outq_buffered(&((conn *)owner)->out); }

const sse_carrier sse_h1_carrier = {
    .start = h1_start,
    .body = h1_body,
    .next_event = h1_next,
    .finished = h1x_finished,
    .end = h1_end,
    .scope = h1_scope,
    .stream = h1_stream,
    .idle = h1_idle,
    .queued = h1_queued,
};

/* ---- writing dispatches ---- */

/* Queue bytes as one body chunk through the exchange (framing, backpressure, completion). */
static int sse_write(pagi_scope *s, sse_stream *st, const char *p, size_t n, int more,
                     pagi_send_cb cb, void *ud)
{
    pagi_event body = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_BODY);
    body.body.ptr = p;
    body.body.len = n;
    body.more = more;
    return st->car->body(s, &body, cb, ud);
}

static void sse_touch(sse_stream *st)
{
    double idle = st->w->cfg->timeouts.sse_idle;
    if (idle > 0) {
        ev_timer_stop(st->w->loop.ev, &st->idle);
        ev_timer_set(&st->idle, idle, 0.);
        ev_timer_start(st->w->loop.ev, &st->idle);
    }
}

static int has_newline(pagi_str v)
{
    return v.ptr && (memchr(v.ptr, '\n', v.len) || memchr(v.ptr, '\r', v.len));
}

/* Append "name: value" for each line of v (split on CRLF, CR or LF). */
static int append_lines(buf *b, const char *prefix, pagi_str v)
{
    const char *p = v.ptr ? v.ptr : "";
    const char *end = p + v.len;
    for (;;) {
        const char *nl = p;
        while (nl < end && *nl != '\n' && *nl != '\r')
            nl++;
        if (buf_append_str(b, prefix) < 0 || buf_append(b, p, (size_t)(nl - p)) < 0 ||
            buf_append(b, "\n", 1) < 0)
            return -1;
        if (nl == end)
            return 0;
        p = nl + ((nl + 1 < end && nl[0] == '\r' && nl[1] == '\n') ? 2 : 1);
    }
}

/* A comment: every line starts with ':' (so a newline cannot forge a dispatch). */
static int format_comment(buf *b, pagi_str text)
{
    if (text.len && text.ptr[0] == ':') {
        text.ptr++;
        text.len--;
    }
    return append_lines(b, ":", text) < 0 || buf_append(b, "\n", 1) < 0 ? -1 : 0;
}

int sse_format_send(buf *b, const pagi_event *ev)
{
    int rc = 0;
    if (ev->event.ptr && ev->event.len)
        rc |= buf_append_str(b, "event: ") | buf_append(b, ev->event.ptr, ev->event.len) |
              buf_append(b, "\n", 1);
    if (ev->id.ptr)
        rc |= buf_append_str(b, "id: ") | buf_append(b, ev->id.ptr, ev->id.len) |
              buf_append(b, "\n", 1);
    if (ev->has_retry) /* zero means no retry line: a {0} event sets none */
        rc |= buf_printf(b, "retry: %lld\n", (long long)ev->retry);
    rc |= append_lines(b, "data: ", ev->data);
    rc |= buf_append(b, "\n", 1);
    return rc ? -1 : 0;
}

static int send_dispatch(pagi_scope *s, sse_stream *st, const pagi_event *ev, pagi_send_cb cb,
                         void *ud)
{
    if (has_newline(ev->event))
        return scope_fail(s, "sse.send: event must not contain a newline");
    if (has_newline(ev->id))
        return scope_fail(s, "sse.send: id must not contain a newline");
    if (ev->has_retry && ev->retry < 0)
        return scope_fail(s, "sse.send: retry must be a non-negative integer");
    buf *b = &st->w->scratch;
    buf_reset(b);
    if (sse_format_send(b, ev) < 0)
        return scope_fail(s, "sse.send: out of memory");
    if (sse_write(s, st, buf_head(b), buf_size(b), 1, cb, ud) < 0)
        return -1;
    sse_touch(st);
    return 0;
}

static void sse_on_keepalive(struct ev_loop *ev, ev_timer *t, int revents)
{
    sse_stream *st = t->data;
    pagi_scope *s = st->car->scope(st->owner);
    /* A stream that is already backed up needs no keepalive; skip this beat. */
    if (!s || st->mode != SSE_STREAMING || st->car->queued(st->owner) >= st->w->cfg->low_watermark)
        return;
    sse_write(s, st, st->keepalive_line, st->keepalive_len, 1, NULL, NULL);
    sse_touch(st);
}

static void sse_on_idle(struct ev_loop *ev, ev_timer *t, int revents)
{
    sse_stream *st = t->data;
    st->car->idle(st->owner);
}

static int set_keepalive(pagi_scope *s, sse_stream *st, const pagi_event *ev)
{
    if (ev->interval < 0)
        return scope_fail(s, "sse.keepalive: interval must be >= 0");
    struct ev_loop *loop = st->w->loop.ev;
    ev_timer_stop(loop, &st->keepalive);
    if (ev->interval == 0)
        return 0; /* last wins: 0 stops */
    buf b = BUF_INIT;
    if (format_comment(&b, ev->comment) < 0) {
        buf_free(&b);
        return scope_fail(s, "sse.keepalive: out of memory");
    }
    free(st->keepalive_line);
    st->keepalive_line = b.data; /* the buffer's bytes start at offset 0 */
    st->keepalive_len = buf_size(&b);
    ev_timer_set(&st->keepalive, ev->interval, ev->interval);
    ev_timer_start(loop, &st->keepalive);
    return 0;
}

/* End the stream: the final chunk, then the connection closes once it is written. */
static int sse_end(pagi_scope *s, sse_stream *st, pagi_send_cb cb, void *ud)
{
    st->mode = SSE_CLOSED;
    ev_timer_stop(st->w->loop.ev, &st->keepalive);
    ev_timer_stop(st->w->loop.ev, &st->idle);
    if (st->car->end)
        st->car->end(s);
    return sse_write(s, st, "", 0, 0, cb, ud);
}

/* ---- sse.start ---- */

static int send_start(pagi_scope *s, sse_stream *st, const pagi_event *ev, pagi_send_cb cb,
                      void *ud)
{
    if (ev->header_count && !ev->headers)
        return scope_fail(s, "sse.start: header_count without headers");
    if (ev->header_count > 256)
        return scope_fail(s, "sse.start: too many headers");
    /* The server supplies content-type and cache-control when the app did not. */
    pagi_header hv[258];
    size_t n = 0;
    int has_ct = 0, has_cc = 0;
    for (size_t i = 0; i < ev->header_count; i++) {
        const pagi_str *name = &ev->headers[i].name;
        if (name->len == 12 && name->ptr && !memcmp(name->ptr, "content-type", 12))
            has_ct = 1;
        if (name->len == 13 && name->ptr && !memcmp(name->ptr, "cache-control", 13))
            has_cc = 1;
        hv[n++] = ev->headers[i];
    }
    if (!has_ct)
        hv[n++] = (pagi_header){{"content-type", 12}, {"text/event-stream", 17}};
    if (!has_cc)
        hv[n++] = (pagi_header){{"cache-control", 13}, {"no-cache", 8}};
    pagi_event start = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_START);
    start.status = ev->status ? ev->status : 200;
    start.headers = hv;
    start.header_count = n;
    if (st->car->start(s, &start, cb, ud, 0) < 0)
        return -1;
    st->mode = SSE_STREAMING;
    sse_touch(st);
    return 0;
}

/* ---- the scope ops ---- */

int sse_send_with(const sse_carrier *car, pagi_scope *s, const pagi_event *ev, pagi_send_cb cb,
                  void *ud)
{
    const char *name = pagi_event_type_name(ev->type);
    switch (ev->type) {
    case PAGI_EV_SSE_START:
    case PAGI_EV_SSE_SEND:
    case PAGI_EV_SSE_COMMENT:
    case PAGI_EV_SSE_KEEPALIVE:
    case PAGI_EV_SSE_CLOSE:
    case PAGI_EV_SSE_HTTP_RESPONSE_START:
    case PAGI_EV_SSE_HTTP_RESPONSE_BODY:
        break;
    default:
        return scope_fail(s, "send: '%s' is not an event an sse scope can send", name);
    }
    sse_stream *st = scope_proto(s) ? car->stream(s) : NULL;
    if (!st || !scope_is_connected(s)) {
        if (scope_is_complete(s) && ev->type != PAGI_EV_SSE_CLOSE)
            return scope_fail(s, "%s: the stream is closed", name);
        /* After a disconnect a send is a no-op (and a second sse.close is ignored). */
        scope_complete_send(s, cb, ud, NULL);
        return 0;
    }
    switch (ev->type) {
    case PAGI_EV_SSE_START:
        if (st->mode == SSE_DECLINED)
            return scope_fail(s, "sse.start: the request was already declined");
        if (st->mode != SSE_PENDING)
            return scope_fail(s, "sse.start: the stream was already started");
        return send_start(s, st, ev, cb, ud);
    case PAGI_EV_SSE_HTTP_RESPONSE_START:
        if (st->mode != SSE_PENDING)
            return scope_fail(s, "%s: only before the stream starts", name);
        if (car->start(s, ev, cb, ud, 1) < 0)
            return -1;
        st->mode = SSE_DECLINED;
        return 0;
    case PAGI_EV_SSE_HTTP_RESPONSE_BODY:
        if (st->mode != SSE_DECLINED)
            return scope_fail(s, "%s: needs sse.http.response.start first", name);
        if (ev->file || ev->use_fd)
            return scope_fail(s, "%s: only the body form is allowed", name);
        return car->body(s, ev, cb, ud);
    case PAGI_EV_SSE_CLOSE:
        if (st->mode == SSE_CLOSED) {
            scope_complete_send(s, cb, ud, NULL); /* idempotent */
            return 0;
        }
        if (st->mode != SSE_STREAMING)
            return scope_fail(s, "sse.close: the stream was not started");
        if (ev->reason.len)
            log_debug("sse stream closed by the app: %.*s", (int)ev->reason.len, ev->reason.ptr);
        return sse_end(s, st, cb, ud);
    default:
        break;
    }
    /* sse.send, sse.comment, sse.keepalive */
    if (st->mode == SSE_CLOSED)
        return scope_fail(s, "%s: the stream is closed", name);
    if (st->mode == SSE_DECLINED)
        return scope_fail(s, "%s: the request was declined", name);
    if (ev->type == PAGI_EV_SSE_KEEPALIVE) {
        if (set_keepalive(s, st, ev) < 0)
            return -1;
        scope_complete_send(s, cb, ud, NULL);
        return 0;
    }
    if (st->mode != SSE_STREAMING)
        return scope_fail(s, "%s: sse.start was not sent", name);
    if (ev->type == PAGI_EV_SSE_SEND)
        return send_dispatch(s, st, ev, cb, ud);
    buf *b = &st->w->scratch;
    buf_reset(b);
    if (format_comment(b, ev->comment) < 0)
        return scope_fail(s, "sse.comment: out of memory");
    if (sse_write(s, st, buf_head(b), buf_size(b), 1, cb, ud) < 0)
        return -1;
    sse_touch(st);
    return 0;
}

void sse_finished_with(const sse_carrier *car, pagi_scope *s, const char *error)
{
    sse_stream *st = scope_proto(s) ? car->stream(s) : NULL;
    if (st && scope_is_connected(s) && st->mode == SSE_STREAMING) {
        /* Returning ends the stream like sse.close: flush, terminate, close. */
        if (error)
            log_error("sse app failed on %s: %s; stream ended", pagi_scope_method(s), error);
        sse_end(s, st, NULL, NULL);
        return;
    }
    car->finished(s, error);
}

static int sse_send(pagi_scope *s, const pagi_event *ev, pagi_send_cb cb, void *ud)
{
    return sse_send_with(&sse_h1_carrier, s, ev, cb, ud);
}

static void sse_finished(pagi_scope *s, const char *error)
{
    sse_finished_with(&sse_h1_carrier, s, error);
}

const scope_ops sse_exchange_ops = {
    .send = sse_send,
    .next_event = h1_next,
    .receive_wanted = h1x_receive_wanted,
    .finished = sse_finished,
    .buffered = h1x_buffered,
    .above_high = h1x_above_high,
    .write_now = h1x_write_now,
    .response_timeout = h1x_response_timeout, /* a stream not started yet: 504 as for http */
};

sse_stream *sse_stream_new(worker_ctx *w, const sse_carrier *car, void *owner)
{
    sse_stream *st = calloc(1, sizeof *st);
    if (!st)
        return NULL;
    st->w = w;
    st->car = car;
    st->owner = owner;
    st->mode = SSE_PENDING;
    ev_init(&st->keepalive, sse_on_keepalive);
    st->keepalive.data = st;
    ev_init(&st->idle, sse_on_idle);
    st->idle.data = st;
    return st;
}

void sse_stream_free(sse_stream *st)
{
    if (!st)
        return;
    ev_timer_stop(st->w->loop.ev, &st->keepalive);
    ev_timer_stop(st->w->loop.ev, &st->idle);
    free(st->keepalive_line);
    free(st);
}
