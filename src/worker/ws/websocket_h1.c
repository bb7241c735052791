/*
 * websocket_h1.c - a websocket on an HTTP/1.1 connection: the upgrade
 * request's checks, the 101 and the refusals written as HTTP/1.1, and the
 * connection protocol (ws_proto) that feeds websocket_io.c after the
 * upgrade. This is the ws carrier for HTTP/1.1 (see websocket_int.h).
 */
#include <nettle/base64.h>
#include <nettle/sha1.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/log.h"
#include "worker/core/access_log.h"
#include "worker/http1/http1_conn.h"
#include "worker/http1/http1_exchange.h"
#include "worker/core/memtrim.h"
#include "worker/core/reason.h"
#include "websocket_int.h"

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

static const ws_carrier ws_h1_carrier;

static conn *ws_c(const ws_conn *ws)
{
    return ws->owner;
}

/* ---- the handshake request ---- */

static int is_b64(char ch)
{
    return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
           ch == '+' || ch == '/';
}

/* RFC 6455 4.2.1: the key is the base64 form of 16 bytes: 22 characters and "==". */
static int key_valid(pagi_str k)
{
    if (k.len != 24 || k.ptr[22] != '=' || k.ptr[23] != '=')
        return 0;
    for (size_t i = 0; i < 22; i++)
        if (!is_b64(k.ptr[i]))
            return 0;
    return 1;
}

static void accept_key(pagi_str key, char out[29])
{
    struct sha1_ctx ctx;
    uint8_t digest[SHA1_DIGEST_SIZE];
    sha1_init(&ctx);
    sha1_update(&ctx, key.len, (const uint8_t *)key.ptr);
    sha1_update(&ctx, sizeof WS_GUID - 1, (const uint8_t *)WS_GUID);
    sha1_digest(&ctx, sizeof digest, digest);
    base64_encode_raw(out, sizeof digest, digest);
    out[28] = '\0';
}

/* A refused handshake never reaches the app: answer and close. */
static void ws_reject(conn *c, int status, const char *text)
{
    log_info("websocket handshake from %s:%d refused with %d: %s", conn_peer_host(c), c->peer_port,
             status, text);
    buf *tmp = &c->w->scratch;
    buf_reset(tmp);
    const char *date = h1_date_now((long)ev_now(c->w->loop.ev));
    if (status == 426) {
        buf_printf(tmp,
                   "HTTP/1.1 426 Upgrade Required\r\nDate: %s\r\nSec-WebSocket-Version: 13\r\n"
                   "Content-Type: text/plain\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n"
                   "%s\n",
                   date, strlen(text) + 1, text);
    } else if (h1_error_response(tmp, status, text, date, 0) < 0) {
        buf_reset(tmp);
    }
    outq_append(&c->out, buf_head(tmp), buf_size(tmp));
    if (c->w->alog) /* no scope: the line has the status only */
        access_log_request(c->w->alog, c, NULL, h1_of(c)->x.log_start, status, 0, NULL);
    conn_close_after_write(c);
}

int ws_on_upgrade_request(conn *c, const h1_request *req, const scope_request *base)
{
    ws_handshake hs;
    ws_handshake_read(req->headers, req->header_count, &hs);
    if (strcmp(req->method, "GET") != 0) {
        ws_reject(c, 400, "websocket handshake must use GET");
        return 0;
    }
    if (!hs.version_ok) {
        ws_reject(c, 426, "websocket version 13 required");
        return 0;
    }
    if (hs.keys != 1 || !key_valid(hs.key)) {
        ws_reject(c, 400, "invalid Sec-WebSocket-Key");
        return 0;
    }
    if (req->chunked || req->content_length > 0) {
        ws_reject(c, 400, "websocket handshake with a body");
        return 0;
    }
    if (hs.too_many) {
        ws_reject(c, 400, "too many subprotocols offered");
        return 0;
    }

    scope_request sr = *base;
    sr.scheme = c->tls ? "wss" : "ws";
    sr.subprotocols = hs.protos;
    sr.subprotocol_count = hs.nprotos;
    ws_conn *ws = ws_conn_new(c->w, &ws_h1_carrier, c, &sr, &hs.pmd, hs.pmd_ok);
    if (!ws)
        return -1;
    accept_key(hs.key, ws->accept_key);
    h1_of(c)->ws = ws;

    /* The HTTP/1 side only starts the app and lends its send-completion parking;
       the connection speaks ws_proto from here (before CONN_ACTIVE sets read interest). */
    c->proto = &ws_proto;
    h1_exchange_begin(c, ws->s, req);
    h1_of(c)->req_keep_alive = 0; /* the connection never goes back to HTTP/1 requests */
    return 0;
}

/* ---- the carrier ---- */

static int h1_accept(ws_conn *ws, const pagi_event *ev, const char *extensions)
{
    conn *c = ws_c(ws);
    buf *tmp = &c->w->scratch;
    buf_reset(tmp);
    int rc = buf_printf(tmp,
                        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                        "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n",
                        ws->accept_key);
    if (rc >= 0 && ev->subprotocol.len)
        rc = buf_printf(tmp, "Sec-WebSocket-Protocol: %.*s\r\n", (int)ev->subprotocol.len,
                        ev->subprotocol.ptr);
    if (rc >= 0 && extensions)
        rc = buf_printf(tmp, "Sec-WebSocket-Extensions: %s\r\n", extensions);
    for (size_t i = 0; rc >= 0 && i < ev->header_count; i++)
        rc =
            buf_printf(tmp, "%.*s: %.*s\r\n", (int)ev->headers[i].name.len, ev->headers[i].name.ptr,
                       (int)ev->headers[i].value.len, ev->headers[i].value.ptr);
    if (rc >= 0)
        rc = buf_append(tmp, "\r\n", 2);
    if (rc < 0 || outq_append(&c->out, buf_head(tmp), buf_size(tmp)) < 0)
        return scope_fail(ws->s, "websocket.accept: out of memory");
    h1_of(c)->x.status = 101;
    return 0;
}

static void h1_refuse(ws_conn *ws, int status)
{
    conn *c = ws_c(ws);
    buf *tmp = &c->w->scratch;
    buf_reset(tmp);
    const char *text = status == 403 ? "Forbidden" : "Internal Server Error";
    if (h1_error_response(tmp, status, text, h1_date_now((long)ev_now(c->w->loop.ev)), 0) == 0)
        outq_append(&c->out, buf_head(tmp), buf_size(tmp));
    h1_of(c)->x.status = status;
    conn_close_after_write(c);
}

static int h1_deny_start(ws_conn *ws, const pagi_event *ev, pagi_send_cb cb, void *ud)
{
    conn *c = ws_c(ws);
    pagi_scope *s = ws->s;
    h1_response_ctx ctx = {
        .http_minor = 1,
        .keep_alive = 0, /* the connection closes after a refusal */
        .date = h1_date_now((long)ev_now(c->w->loop.ev)),
    };
    buf *head = &c->w->scratch;
    buf_reset(head);
    const char *err = NULL;
    if (h1_response_head(head, ev->status, ev->headers, ev->header_count, &ctx, &ws->plan, &err) <
        0)
        return scope_fail(s, "websocket.http.response.start: %s", err ? err : "invalid response");
    if (outq_append(&c->out, buf_head(head), buf_size(head)) < 0)
        return scope_fail(s, "websocket.http.response.start: out of memory");
    ws->state = WS_DENYING;
    h1_of(c)->x.body_sent = 0;
    h1_of(c)->x.status = ev->status;
    scope_mark_started(s);
    http_exchange_after_append(&h1_of(c)->x, ws->s, cb, ud);
    return 0;
}

static int h1_deny_body(ws_conn *ws, const pagi_event *ev, pagi_send_cb cb, void *ud)
{
    conn *c = ws_c(ws);
    pagi_scope *s = ws->s;
    int64_t cl = ws->plan.content_length;
    if (cl >= 0 && h1_of(c)->x.body_sent + (int64_t)ev->body.len > cl)
        return scope_fail(s, "websocket.http.response.body: body exceeds content-length");
    int rc = 0;
    if (!ws->plan.no_body && ev->body.len) {
        if (ws->plan.chunked)
            rc = h1x_append_chunk_header(c, ev->body.len);
        if (rc == 0)
            rc = outq_append(&c->out, ev->body.ptr, ev->body.len);
        if (rc == 0 && ws->plan.chunked)
            rc = outq_append(&c->out, "\r\n", 2);
    }
    if (rc < 0)
        return scope_fail(s, "websocket.http.response.body: out of memory");
    h1_of(c)->x.body_sent += (int64_t)ev->body.len;
    if (!ev->more) {
        if (ws->plan.chunked && !ws->plan.no_body)
            outq_append(&c->out, "0\r\n\r\n", 5);
        ws->state = WS_DENIED;
        conn_close_after_write(c);
    }
    http_exchange_after_append(&h1_of(c)->x, ws->s, cb, ud);
    return 0;
}

static buf *h1_input(ws_conn *ws)
{
    return &ws_c(ws)->in;
}

static int h1_write(ws_conn *ws, const void *p, size_t n)
{
    return outq_append(&ws_c(ws)->out, p, n);
}

static int h1_write_buf(ws_conn *ws, pagi_buf *b)
{
    return pagi_buf_queue(b, &ws_c(ws)->out);
}

static void h1_kick(ws_conn *ws)
{
    conn_schedule_flush(ws_c(ws));
}

static void h1_after_append(ws_conn *ws, pagi_send_cb cb, void *ud)
{
    http_exchange_after_append(&h1_of(ws_c(ws))->x, ws->s, cb, ud);
}

static size_t h1_queued(const ws_conn *ws)
{
    return outq_buffered(&ws_c(ws)->out);
}

static int h1_above_high(const ws_conn *ws)
{
    return h1_of(ws_c(ws))->x.above_high;
}

static void h1_refresh(ws_conn *ws)
{
    conn_refresh(ws_c(ws));
}

static void h1_finish(ws_conn *ws)
{
    conn_close_after_write(ws_c(ws));
}

static void h1_abort(ws_conn *ws, const char *reason)
{
    conn_close(ws_c(ws), reason);
}

static void h1_ended(ws_conn *ws, const char *why)
{
    conn *c = ws_c(ws);
    if (c->w->alog) /* the scope's access log line, at its end: 101, or the refusal */
        access_log_request(c->w->alog, c, ws->s, h1_of(c)->x.log_start, h1_of(c)->x.status,
                           h1_of(c)->x.body_sent > 0 ? (uint64_t)h1_of(c)->x.body_sent : 0, why);
    http_exchange_settle_parked(&h1_of(c)->x, ws->s, NULL);
    h1_of(c)->scope = NULL;
}

static const char *h1_peer(const ws_conn *ws, int *port)
{
    conn *c = ws_c(ws);
    *port = c->peer_port;
    return conn_peer_host(c);
}

static const ws_carrier ws_h1_carrier = {
    .accept = h1_accept,
    .refuse = h1_refuse,
    .deny_start = h1_deny_start,
    .deny_body = h1_deny_body,
    .input = h1_input,
    .write = h1_write,
    .write_buf = h1_write_buf,
    .kick = h1_kick,
    .after_append = h1_after_append,
    .queued = h1_queued,
    .above_high = h1_above_high,
    .refresh = h1_refresh,
    .finish = h1_finish,
    .abort = h1_abort,
    .ended = h1_ended,
    .peer = h1_peer,
};

/* ---- ws_proto ---- */

/* The websocket engine may end the transport (conn_close) in any of these. */
static conn_fate ws_on_input(conn *c)
{
    ws_input(h1_of(c)->ws);
    return conn_fate_of(c);
}

static conn_fate ws_on_eof(conn *c)
{
    ws_peer_gone(h1_of(c)->ws);
    return conn_fate_of(c);
}

static conn_fate ws_on_written(conn *c)
{
    ws_conn *ws = h1_of(c)->ws;
    h1_conn *h = h1_of(c);
    /* Called from a flush (a safe point, never inside the HTTP/1 parser): once the 101 is out
     * the connection never parses HTTP/1 again. */
    if (ws->state >= WS_OPEN && h->parser)
        h1_conn_drop_parser(c);
    if (h->scope)
        http_exchange_written(&h->x, h->scope, c->w->cfg->low_watermark);
    ws_flushed(ws);
    if (conn_fate_of(c) == CONN_GONE)
        return CONN_GONE;
    conn_refresh(c);
    return CONN_ALIVE;
}

static int ws_wants_read(const conn *c)
{
    return ws_wants_input(h1_of(c)->ws);
}

static int ws_waiting_for_input(const conn *c)
{
    return 0;
}

static void ws_on_header_timeout(conn *c)
{
    conn_close(c, NULL);
}

/* The connection ends (conn_close): turn how it ended into the scope's end. */
static void ws_on_close(conn *c, const char *reason)
{
    ws_conn *ws = h1_of(c)->ws;
    if (!ws || ws->state == WS_GONE)
        return;
    if (reason == reason_server_shutdown && ws->state == WS_OPEN && outq_buffered(&c->out) == 0) {
        /* Best effort "going away" before the socket closes under it. */
        static const uint8_t going_away[4] = {0x88, 0x02, 0x03, 0xE9};
        (void)!send(c->fd, going_away, sizeof going_away, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    ws_transport_closed(ws, reason);
}

void ws_conn_free(conn *c)
{
    h1_conn *h = h1_of(c);
    ws_conn *ws = h ? h->ws : NULL;
    if (!ws)
        return;
    h->ws = NULL;
    ws_detach(ws);
}

/* A WebSocket connection began as HTTP/1: both sides' state goes. */
static void ws_release(conn *c)
{
    ws_conn_free(c);
    h1_conn_free(c);
}

/* After the closing handshake nothing more is awaited from the peer; bytes it
 * had already sent still make the connection linger (conn_flush). */
static int ws_peer_may_send(const conn *c)
{
    (void)c;
    return 0;
}

const conn_proto ws_proto = {
    .name = "websocket",
    .on_input = ws_on_input,
    .on_eof = ws_on_eof,
    .on_written = ws_on_written,
    .wants_read = ws_wants_read,
    .waiting_for_input = ws_waiting_for_input,
    .on_close = ws_on_close,
    .on_header_timeout = ws_on_header_timeout,
    .peer_may_send = ws_peer_may_send,
    .release = ws_release,
};
