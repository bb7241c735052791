/*
 * h2_websocket.c - a websocket on an HTTP/2 stream (RFC 8441): the extended
 * CONNECT turned into a websocket scope, and the ws carrier over the stream
 * (frames in DATA both ways, the accept as :status 200 without END_STREAM,
 * the end as END_STREAM or RST_STREAM of this stream only). Flow control is
 * the stream's window: input bytes are credited back only as the frame
 * reader consumes them.
 */
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/shm.h"
#include "worker/core/access_log.h"
#include "h2_int.h"
#include "worker/core/reason.h"
#include "worker/scope/scope.h"
#include "worker/ws/websocket_int.h"

static const ws_carrier h2_ws_carrier;

static h2_stream *ws_st(const ws_conn *ws)
{
    return ws->owner;
}

int h2_ws_make(h2_stream *st, const h2_request *r, const scope_request *base)
{
    conn *c = st_conn(st);
    ws_handshake hs;
    ws_handshake_read(r->headers, r->header_count, &hs);
    if (!hs.version_ok)
        return 426; /* as over HTTP/1.1 (RFC 8441 5 keeps the field) */
    if (hs.too_many)
        return 400;
    scope_request sr = *base;
    sr.method = "GET"; /* the scope is the same as over HTTP/1.1's upgrade */
    sr.scheme = c->tls ? "wss" : "ws";
    sr.subprotocols = hs.protos;
    sr.subprotocol_count = hs.nprotos;
    ws_conn *ws = ws_conn_new(c->w, &h2_ws_carrier, st, &sr, &hs.pmd, hs.pmd_ok);
    if (!ws)
        return 500;
    st->ws = ws;
    st->scope = ws->s;
    if (c->w->stats)
        shm_add(&c->w->stats->h2_websockets, 1);
    st->ws_in = buf_size(&st->body); /* frames that came with the CONNECT */
    return 0;
}

/* ---- the stream's events ---- */

/* The frame reader read all there was: an idle websocket keeps no input
 * buffer (it grew to the largest DATA chunk), as HTTP/1.1 lends c->in back. */
static void release_read_input(h2_stream *st)
{
    if (st->body.cap && !buf_size(&st->body))
        buf_free(&st->body);
}

void h2_ws_data(h2_stream *st, size_t len)
{
    st->ws_in += len;
    ws_input(st->ws);
    if (st->scope) {
        h2_ws_carrier.refresh(st->ws);
        release_read_input(st);
    }
}

void h2_ws_peer_end(h2_stream *st)
{
    /* END_STREAM from the client is its half of the end: like TCP's FIN under HTTP/1.1. */
    ws_peer_gone(st->ws);
}

void h2_ws_after_write(h2_stream *st)
{
    ws_flushed(st->ws);
    if (st->scope) {
        h2_ws_carrier.refresh(st->ws);
        release_read_input(st);
    }
}

void h2_ws_end(h2_stream *st, const char *reason)
{
    ws_transport_closed(st->ws, reason);
}

void h2_ws_free(h2_stream *st)
{
    /* Only now: the frame reader may still be on the stack when the scope ends. */
    ws_detach(st->ws);
    st->ws = NULL;
}

int h2_ws_going_away(h2_stream *st)
{
    ws_conn *ws = st->ws;
    if (ws->state != WS_OPEN || st_pending(st))
        return 0; /* only when it lands on a frame boundary */
    ws_queue_close(ws, WS_CLOSE_GOING_AWAY, NULL, 0);
    return 1;
}

/* ---- the carrier ---- */

static int h2ws_accept(ws_conn *ws, const pagi_event *ev, const char *extensions)
{
    h2_stream *st = ws_st(ws);
    size_t n = ev->header_count + 2, k = 0;
    pagi_header *hv = calloc(n, sizeof *hv);
    if (!hv)
        return scope_fail(ws->s, "websocket.accept: out of memory");
    if (ev->subprotocol.len)
        hv[k++] = (pagi_header){{"sec-websocket-protocol", 22}, ev->subprotocol};
    if (extensions)
        hv[k++] = (pagi_header){{"sec-websocket-extensions", 24}, {extensions, strlen(extensions)}};
    for (size_t i = 0; i < ev->header_count; i++)
        hv[k++] = ev->headers[i];
    pagi_event start = {.type = PAGI_EV_HTTP_RESPONSE_START, .status = 200};
    start.headers = hv;
    start.header_count = k;
    int rc = http_exchange_start(&st->x, ws->s, &start, NULL, NULL, "websocket.accept");
    free(hv);
    return rc;
}

static void h2ws_refuse(ws_conn *ws, int status)
{
    h2_resp_refuse(ws_st(ws), status, status == 403 ? "Forbidden" : "Internal Server Error", 0);
}

static int h2ws_deny_start(ws_conn *ws, const pagi_event *ev, pagi_send_cb cb, void *ud)
{
    /* RFC 8441 5: a 2xx answer to the extended CONNECT opens the websocket;
     * the client would read the denial's body as frames. */
    if (ev->status < 300)
        return scope_fail(ws->s,
                          "websocket.http.response.start: status %d would accept the websocket "
                          "over HTTP/2 (a 2xx answer opens it, RFC 8441); deny with 300-999",
                          ev->status);
    ws->state = WS_DENYING;
    int rc = http_exchange_start(&ws_st(ws)->x, ws->s, ev, cb, ud, "websocket.http.response.start");
    if (rc < 0)
        ws->state = WS_HANDSHAKE;
    return rc;
}

static int h2ws_deny_body(ws_conn *ws, const pagi_event *ev, pagi_send_cb cb, void *ud)
{
    if (!ev->more)
        ws->state = WS_DENIED;
    int rc = http_exchange_body(&ws_st(ws)->x, ws->s, ev, cb, ud);
    if (rc < 0)
        ws->state = WS_DENYING;
    return rc;
}

static buf *h2ws_input(ws_conn *ws)
{
    return &ws_st(ws)->body;
}

static int h2ws_write(ws_conn *ws, const void *p, size_t n)
{
    h2_stream *st = ws_st(ws);
    if (buf_append(&st->out, p, n) < 0)
        return -1;
    st->h->pending += n;
    return 0;
}

static void h2ws_kick(ws_conn *ws)
{
    h2_resp_after_append(ws_st(ws), NULL, NULL);
}

static void h2ws_after_append(ws_conn *ws, pagi_send_cb cb, void *ud)
{
    h2_resp_after_append(ws_st(ws), cb, ud);
}

static size_t h2ws_queued(const ws_conn *ws)
{
    return st_pending(ws_st(ws));
}

static int h2ws_above_high(const ws_conn *ws)
{
    return ws_st(ws)->x.above_high;
}

/* Credit the windows with the input the frame reader consumed; 1 if there was any. Bytes it
 * left unread (the websocket wants no input: websocket_io.c's read_now) stay in st->body
 * uncredited, so the client is held at its stream window, as TCP would hold it. */
static int credit_consumed(h2_stream *st)
{
    uint64_t read = st->ws_in - buf_size(&st->body);
    if (read <= st->ws_credited)
        return 0;
    nghttp2_session_consume(st->h->ng, st->id, (size_t)(read - st->ws_credited));
    st->ws_credited = read;
    return 1;
}

static void h2ws_refresh(ws_conn *ws)
{
    h2_stream *st = ws_st(ws);
    if (credit_consumed(st))
        h2_session_kick(st->h);
}

static void h2ws_finish(ws_conn *ws)
{
    h2_stream *st = ws_st(ws);
    if (st->x.resp == HX_STARTED) /* END_STREAM after the last DATA (h2_stream_read) */
        http_exchange_set_state(&st->x, HX_FINAL);
    h2_resp_after_append(st, NULL, NULL);
}

static void h2ws_abort(ws_conn *ws, const char *reason)
{
    h2_stream_reset(ws_st(ws), reason);
}

static void h2ws_ended(ws_conn *ws, const char *why)
{
    h2_stream *st = ws_st(ws);
    conn *c = st_conn(st);
    /* Bytes read in the call that ended it were not credited yet; the
     * connection's window would lose them for good (the unread rest goes
     * back with the body, drop_body). */
    credit_consumed(st);
    /* Bytes: a denial's body, as over HTTP/1.1 (frames are not counted). */
    if (c->w->alog)
        access_log_request(c->w->alog, c, ws->s, st->x.log_start, st->x.status,
                           st->x.body_sent > 0 ? (uint64_t)st->x.body_sent : 0, why);
    http_exchange_settle_parked(&st->x, ws->s, NULL);
    st->scope = NULL;
}

static const char *h2ws_peer(const ws_conn *ws, int *port)
{
    conn *c = st_conn(ws_st(ws));
    *port = c->peer_port;
    return conn_peer_host(c);
}

static const ws_carrier h2_ws_carrier = {
    .accept = h2ws_accept,
    .refuse = h2ws_refuse,
    .deny_start = h2ws_deny_start,
    .deny_body = h2ws_deny_body,
    .input = h2ws_input,
    .write = h2ws_write,
    .write_buf = NULL, /* frames are copied into the stream's output */
    .kick = h2ws_kick,
    .after_append = h2ws_after_append,
    .queued = h2ws_queued,
    .above_high = h2ws_above_high,
    .refresh = h2ws_refresh,
    .finish = h2ws_finish,
    .abort = h2ws_abort,
    .ended = h2ws_ended,
    .peer = h2ws_peer,
};
