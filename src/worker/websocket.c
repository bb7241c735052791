/*
 * websocket.c - the WebSocket opening handshake and the websocket scope's
 * side of the PAGI interface: checking the upgrade request before any scope
 * exists, websocket.connect, the accept (101) or a refusal (403, or the
 * denial-response extension), send validation against the session state,
 * message delivery to pull receives, and what the app finishing means.
 * Frames and the close handshake live in websocket_io.c.
 */
#include <math.h>
#include <nettle/base64.h>
#include <nettle/sha1.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../common/log.h"
#include "access_log.h"
#include "memtrim.h"
#include "reason.h"
#include "websocket_int.h"

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#define MAX_SUBPROTOCOLS 64

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

static int str_is(pagi_str s, const char *lit)
{
    size_t n = strlen(lit);
    return s.len == n && memcmp(s.ptr, lit, n) == 0;
}

/* Split one Sec-WebSocket-Protocol value on commas, trimming blanks; -1 if too many. */
static int add_subprotocols(pagi_str v, pagi_str *out, size_t *n)
{
    const char *p = v.ptr, *end = v.ptr + v.len;
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *a = p, *b = comma ? comma : end;
        while (a < b && (*a == ' ' || *a == '\t'))
            a++;
        while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
            b--;
        if (b > a) {
            if (*n == MAX_SUBPROTOCOLS)
                return -1;
            out[(*n)++] = (pagi_str){a, (size_t)(b - a)};
        }
        if (!comma)
            break;
        p = comma + 1;
    }
    return 0;
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
        access_log_request(c->w->alog, c, NULL, c->h1.log_start, status, 0, NULL);
    conn_close_after_write(c);
}

int ws_on_upgrade_request(conn *c, const h1_request *req, const scope_request *base)
{
    pagi_str key = {NULL, 0}, version = {NULL, 0};
    int keys = 0, versions = 0, too_many = 0;
    pagi_str protos[MAX_SUBPROTOCOLS];
    size_t nprotos = 0;
    ws_deflate_params pmd;
    int pmd_ok = 0;
    for (size_t i = 0; i < req->header_count; i++) {
        const pagi_header *h = &req->headers[i];
        if (str_is(h->name, "sec-websocket-key")) {
            key = h->value;
            keys++;
        } else if (str_is(h->name, "sec-websocket-version")) {
            version = h->value;
            versions++;
        } else if (str_is(h->name, "sec-websocket-protocol")) {
            too_many |= add_subprotocols(h->value, protos, &nprotos) < 0;
        } else if (str_is(h->name, "sec-websocket-extensions") && !pmd_ok) {
            pmd_ok = ws_deflate_negotiate(h->value.ptr, h->value.len, &pmd);
        }
    }
    if (strcmp(req->method, "GET") != 0) {
        ws_reject(c, 400, "websocket handshake must use GET");
        return 0;
    }
    if (versions != 1 || !str_is(version, "13")) {
        ws_reject(c, 426, "websocket version 13 required");
        return 0;
    }
    if (keys != 1 || !key_valid(key)) {
        ws_reject(c, 400, "invalid Sec-WebSocket-Key");
        return 0;
    }
    if (req->chunked || req->content_length > 0) {
        ws_reject(c, 400, "websocket handshake with a body");
        return 0;
    }
    if (too_many) {
        ws_reject(c, 400, "too many subprotocols offered");
        return 0;
    }

    ws_conn *ws = calloc(1, sizeof *ws);
    if (!ws)
        return -1;
    accept_key(key, ws->accept_key);
    ws->pmd_offered = pmd_ok;
    if (pmd_ok)
        ws->pmd_params = pmd;
    scope_request sr = *base;
    sr.scheme = c->tls ? "wss" : "ws";
    sr.subprotocols = protos;
    sr.subprotocol_count = nprotos;
    sr.extensions = SCOPE_EXT_WEBSOCKET_HTTP_RESPONSE;
    pagi_scope *s = scope_new(c->w, PAGI_SCOPE_WEBSOCKET, &ws_scope_ops, ws, &sr);
    if (!s) {
        free(ws);
        return -1;
    }
    ws->c = c;
    ws->s = s;
    ws->state = WS_HANDSHAKE;
    utf8_reset(&ws->u8);
    ws_timers_init(ws);
    c->ws = ws;

    /* The HTTP/1 side only starts the app and lends its send-completion parking;
       the connection speaks ws_proto from here (before CONN_ACTIVE sets read interest). */
    c->proto = &ws_proto;
    h1_exchange_begin(c, s, req);
    c->h1.req_keep_alive = 0; /* the connection never goes back to HTTP/1 requests */
    return 0;
}

/* ---- sends ---- */

static ws_conn *ws_of_scope(const pagi_scope *s)
{
    return scope_proto(s);
}

static int subprotocol_offered(const pagi_scope *s, pagi_str p)
{
    size_t n = pagi_scope_subprotocol_count(s);
    for (size_t i = 0; i < n; i++) {
        pagi_str o = pagi_scope_subprotocol(s, i);
        if (o.len == p.len && memcmp(o.ptr, p.ptr, p.len) == 0)
            return 1;
    }
    return 0;
}

static int header_is(const pagi_header *h, const char *name)
{
    size_t n = strlen(name);
    return h->name.len == n && strncasecmp(h->name.ptr, name, n) == 0;
}

static int send_accept(pagi_scope *s, ws_conn *ws, const pagi_event *ev, pagi_send_cb cb, void *ud)
{
    conn *c = ws->c;
    if (ev->subprotocol.len && !subprotocol_offered(s, ev->subprotocol))
        return scope_fail(s, "websocket.accept: subprotocol '%.*s' was not offered by the client",
                          (int)(ev->subprotocol.len > 100 ? 100 : ev->subprotocol.len),
                          ev->subprotocol.ptr);
    if (ev->header_count && !ev->headers)
        return scope_fail(s, "websocket.accept: header_count without headers");
    static const char *const managed[] = {"upgrade",
                                          "connection",
                                          "sec-websocket-accept",
                                          "sec-websocket-protocol",
                                          "sec-websocket-extensions",
                                          "content-length",
                                          "transfer-encoding"};
    for (size_t i = 0; i < ev->header_count; i++) {
        const char *err = NULL;
        if (h1_header_check(&ev->headers[i], &err) < 0)
            return scope_fail(s, "websocket.accept: %s", err ? err : "invalid header");
        for (size_t k = 0; k < sizeof managed / sizeof managed[0]; k++)
            if (header_is(&ev->headers[i], managed[k]))
                return scope_fail(s, "websocket.accept: the server sets the %s header", managed[k]);
    }
    if (ws->pmd_offered) {
        /* Neither side takes context over (RFC 7692 7.1.1.1 and 7.1.1.2: a server may answer
         * both even when not offered): between messages a connection then holds no zlib
         * stream, where context takeover would pin two (~300 KiB) for its whole life. */
        ws->pmd_params.server_no_context_takeover = 1;
        ws->pmd_params.client_no_context_takeover = 1;
        ws->pmd = ws_deflate_new(&ws->pmd_params);
        if (!ws->pmd)
            log_warn("permessage-deflate: cannot set up zlib streams; not negotiated");
    }
    buf *tmp = &c->w->scratch;
    buf_reset(tmp);
    int rc = buf_printf(tmp,
                        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                        "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n",
                        ws->accept_key);
    if (rc >= 0 && ev->subprotocol.len)
        rc = buf_printf(tmp, "Sec-WebSocket-Protocol: %.*s\r\n", (int)ev->subprotocol.len,
                        ev->subprotocol.ptr);
    if (rc >= 0 && ws->pmd) {
        char ext[160];
        if (ws_deflate_response(&ws->pmd_params, ext, sizeof ext) > 0)
            rc = buf_printf(tmp, "Sec-WebSocket-Extensions: %s\r\n", ext);
    }
    for (size_t i = 0; rc >= 0 && i < ev->header_count; i++)
        rc =
            buf_printf(tmp, "%.*s: %.*s\r\n", (int)ev->headers[i].name.len, ev->headers[i].name.ptr,
                       (int)ev->headers[i].value.len, ev->headers[i].value.ptr);
    if (rc >= 0)
        rc = buf_append(tmp, "\r\n", 2);
    if (rc < 0 || outq_append(&c->out, buf_head(tmp), buf_size(tmp)) < 0) {
        ws_deflate_free(ws->pmd);
        ws->pmd = NULL;
        return scope_fail(s, "websocket.accept: out of memory");
    }
    ws->state = WS_OPEN;
    c->h1.log_status = 101;
    scope_mark_started(s);
    h1_exchange_after_append(c, cb, ud);
    ws_opened(ws);
    return 0;
}

static int send_message(pagi_scope *s, ws_conn *ws, const pagi_event *ev, pagi_send_cb cb, void *ud)
{
    int text = ev->is_text || ev->text.ptr != NULL;
    int bytes = ev->bytes.ptr != NULL;
    if (text == bytes)
        return scope_fail(s, "websocket.send: exactly one of bytes or text must be set");
    pagi_str m = text ? ev->text : ev->bytes;
    if (m.len && !m.ptr)
        return scope_fail(s, "websocket.send: a length without data");
    if (text && !utf8_valid(m.ptr, m.len))
        return scope_fail(s, "websocket.send: text is not valid UTF-8");
    if (ws->state == WS_CLOSE_SENT)
        return scope_fail(s, "websocket.send: after websocket.close");
    if (ws->state != WS_OPEN)
        return scope_fail(s, "websocket.send: the connection was not accepted (send "
                             "websocket.accept first)");
    pagi_buf *lent = scope_send_buf(s, m.ptr, m.len);
    unsigned op = text ? WS_OP_TEXT : WS_OP_BINARY;
    if ((lent ? ws_queue_frame_buf(ws, op, lent)
              : ws_queue_frame(ws, op, m.ptr ? m.ptr : "", m.len)) < 0)
        return scope_fail(s, "websocket.send: out of memory");
    h1_exchange_after_append(ws->c, cb, ud);
    return 0;
}

static int send_keepalive(pagi_scope *s, ws_conn *ws, const pagi_event *ev, pagi_send_cb cb,
                          void *ud)
{
    if (!isfinite(ev->interval) || ev->interval < 0 || !isfinite(ev->timeout) || ev->timeout < 0)
        return scope_fail(s, "websocket.keepalive: interval and timeout must be >= 0 seconds");
    if (ws->state < WS_OPEN)
        return scope_fail(s, "websocket.keepalive: the connection was not accepted yet");
    if (ws->state == WS_OPEN)
        ws_set_keepalive(ws, ev->interval, ev->timeout);
    scope_complete_send(s, cb, ud, NULL);
    return 0;
}

/* The bare refusal (403; 500 when the app failed before answering), then close. */
static void deny_status(ws_conn *ws, int status)
{
    conn *c = ws->c;
    buf *tmp = &c->w->scratch;
    buf_reset(tmp);
    const char *text = status == 403 ? "Forbidden" : "Internal Server Error";
    if (h1_error_response(tmp, status, text, h1_date_now((long)ev_now(c->w->loop.ev)), 0) == 0)
        outq_append(&c->out, buf_head(tmp), buf_size(tmp));
    ws->state = WS_DENIED;
    c->h1.log_status = status;
    scope_mark_started(ws->s);
    conn_close_after_write(c);
}

static int send_close(pagi_scope *s, ws_conn *ws, const pagi_event *ev, pagi_send_cb cb, void *ud)
{
    int code = ev->code ? ev->code : WS_CLOSE_NORMAL;
    if (!ws_close_code_sendable(code))
        return scope_fail(s, "websocket.close: %d is not a close code an endpoint may send", code);
    if (ev->reason.len > WS_MAX_CLOSE_REASON)
        return scope_fail(s, "websocket.close: the reason is over 123 bytes");
    if (ev->reason.len && (!ev->reason.ptr || !utf8_valid(ev->reason.ptr, ev->reason.len)))
        return scope_fail(s, "websocket.close: the reason is not valid UTF-8");
    switch (ws->state) {
    case WS_HANDSHAKE:
        deny_status(ws, 403);
        break;
    case WS_DENYING:
        return scope_fail(s, "websocket.close: a denial response was started; finish its body");
    case WS_OPEN:
        ws_close_from_app(ws, code, ev->reason.ptr, ev->reason.len);
        break;
    case WS_CLOSE_SENT:
        /* Like a send after the close: the app's own misuse, not the peer's doing. */
        return scope_fail(s, "websocket.close: already closed");
    default:
        break; /* a refused handshake: nothing more to say */
    }
    scope_complete_send(s, cb, ud, NULL);
    return 0;
}

static int send_denial_start(pagi_scope *s, ws_conn *ws, const pagi_event *ev, pagi_send_cb cb,
                             void *ud)
{
    conn *c = ws->c;
    if (ws->state != WS_HANDSHAKE)
        return scope_fail(s,
                          "websocket.http.response.start: a denial response was already started");
    if (ev->status < 200 || ev->status > 999)
        return scope_fail(s, "websocket.http.response.start: status must be 200-999 (got %d)",
                          ev->status);
    if (ev->header_count && !ev->headers)
        return scope_fail(s, "websocket.http.response.start: header_count without headers");
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
    c->h1.body_sent = 0;
    c->h1.log_status = ev->status;
    scope_mark_started(s);
    h1_exchange_after_append(c, cb, ud);
    return 0;
}

static int append_chunk_size(conn *c, size_t n)
{
    char line[32];
    int k = snprintf(line, sizeof line, "%zx\r\n", n);
    return outq_append(&c->out, line, (size_t)k);
}

static int send_denial_body(pagi_scope *s, ws_conn *ws, const pagi_event *ev, pagi_send_cb cb,
                            void *ud)
{
    conn *c = ws->c;
    if (ws->state != WS_DENYING)
        return scope_fail(s, "websocket.http.response.body: %s",
                          ws->state == WS_HANDSHAKE ? "websocket.http.response.start was not sent"
                                                    : "the denial response is already complete");
    if (ev->file || ev->use_fd)
        return scope_fail(s, "websocket.http.response.body: only body applies (no file or fd)");
    if (ev->body.len && !ev->body.ptr)
        return scope_fail(s, "websocket.http.response.body: body length without data");
    int64_t cl = ws->plan.content_length;
    if (cl >= 0 && c->h1.body_sent + (int64_t)ev->body.len > cl)
        return scope_fail(s, "websocket.http.response.body: body exceeds content-length");
    int rc = 0;
    if (!ws->plan.no_body && ev->body.len) {
        if (ws->plan.chunked)
            rc = append_chunk_size(c, ev->body.len);
        if (rc == 0)
            rc = outq_append(&c->out, ev->body.ptr, ev->body.len);
        if (rc == 0 && ws->plan.chunked)
            rc = outq_append(&c->out, "\r\n", 2);
    }
    if (rc < 0)
        return scope_fail(s, "websocket.http.response.body: out of memory");
    c->h1.body_sent += (int64_t)ev->body.len;
    if (!ev->more) {
        if (ws->plan.chunked && !ws->plan.no_body)
            outq_append(&c->out, "0\r\n\r\n", 5);
        ws->state = WS_DENIED;
        conn_close_after_write(c);
    }
    h1_exchange_after_append(c, cb, ud);
    return 0;
}

static int ws_send(pagi_scope *s, const pagi_event *ev, pagi_send_cb cb, void *ud)
{
    switch (ev->type) {
    case PAGI_EV_WEBSOCKET_ACCEPT:
    case PAGI_EV_WEBSOCKET_SEND:
    case PAGI_EV_WEBSOCKET_KEEPALIVE:
    case PAGI_EV_WEBSOCKET_CLOSE:
    case PAGI_EV_WEBSOCKET_HTTP_RESPONSE_START:
    case PAGI_EV_WEBSOCKET_HTTP_RESPONSE_BODY:
        break;
    default:
        return scope_fail(s, "send: '%s' is not an event a websocket scope can send",
                          pagi_event_type_name(ev->type));
    }
    ws_conn *ws = ws_of_scope(s);
    int denial = ev->type == PAGI_EV_WEBSOCKET_HTTP_RESPONSE_START ||
                 ev->type == PAGI_EV_WEBSOCKET_HTTP_RESPONSE_BODY;
    /* The spec: after the accept, denial events are ignored; after a disconnect, sends are no-ops.
     */
    if (!ws || ws->state == WS_GONE || ws->state == WS_CLOSING || !scope_is_connected(s) ||
        (denial && ws->state >= WS_OPEN)) {
        if (ev->type == PAGI_EV_WEBSOCKET_SEND) {
            pagi_str m = ev->is_text ? ev->text : ev->bytes;
            if (ev->is_text && m.ptr && !utf8_valid(m.ptr, m.len))
                return scope_fail(s, "websocket.send: text is not valid UTF-8");
        }
        scope_complete_send(s, cb, ud, NULL);
        return 0;
    }
    if (ws->state == WS_DENIED && ev->type != PAGI_EV_WEBSOCKET_CLOSE)
        return scope_fail(s, "%s: the handshake was already refused",
                          pagi_event_type_name(ev->type));
    switch (ev->type) {
    case PAGI_EV_WEBSOCKET_ACCEPT:
        if (ws->state != WS_HANDSHAKE)
            return scope_fail(s, "websocket.accept: %s",
                              ws->state == WS_DENYING ? "a denial response was started"
                                                      : "the connection was already accepted");
        return send_accept(s, ws, ev, cb, ud);
    case PAGI_EV_WEBSOCKET_SEND:
        return send_message(s, ws, ev, cb, ud);
    case PAGI_EV_WEBSOCKET_KEEPALIVE:
        return send_keepalive(s, ws, ev, cb, ud);
    case PAGI_EV_WEBSOCKET_CLOSE:
        return send_close(s, ws, ev, cb, ud);
    case PAGI_EV_WEBSOCKET_HTTP_RESPONSE_START:
        return send_denial_start(s, ws, ev, cb, ud);
    default:
        return send_denial_body(s, ws, ev, cb, ud);
    }
}

/* ---- receive ---- */

static int ws_next_event(pagi_scope *s, pagi_event *ev, int take)
{
    ws_conn *ws = ws_of_scope(s);
    if (!ws) {
        /* Released after the disconnect was taken: every later ask gets it again. */
        if (take) {
            const char *word = pagi_conn_disconnect_reason(s);
            ev->type = PAGI_EV_WEBSOCKET_DISCONNECT;
            ev->code = WS_CLOSE_ABNORMAL;
            ev->reason = (pagi_str){word ? word : "", word ? strlen(word) : 0};
        }
        return 1;
    }
    if (!ws->connect_delivered) {
        if (take) {
            ev->type = PAGI_EV_WEBSOCKET_CONNECT;
            ws->connect_delivered = 1;
        }
        return 1;
    }
    buf *d = scope_delivery_buf(s);
    if (ws->q_head) {
        if (!take)
            return 1;
        ws_msg *m = ws->q_head;
        ws->q_head = m->next;
        if (!ws->q_head)
            ws->q_tail = NULL;
        ws->q_count--;
        /* A big message's copy is not kept around for the next small one. */
        if (d->cap > 65536 && m->len <= 65536) {
            memtrim_note(NULL, d->cap);
            buf_free(d);
        } else
            buf_reset(d);
        if (m->len && buf_append(d, m->data, m->len) < 0)
            log_error("websocket: out of memory delivering a message; delivered empty");
        ev->type = PAGI_EV_WEBSOCKET_RECEIVE;
        ev->is_text = m->is_text;
        pagi_str body = {buf_size(d) ? buf_head(d) : "", buf_size(d)};
        if (m->is_text)
            ev->text = body;
        else
            ev->bytes = body;
        size_t len = m->len;
        free(m);
        ws_queue_taken(ws, len);
        return 1;
    }
    if (scope_is_connected(s) && !scope_is_complete(s))
        return 0;
    if (!take)
        return 1;
    buf_reset(d);
    ev->type = PAGI_EV_WEBSOCKET_DISCONNECT;
    ev->code = ws->end_set ? ws->end_code : WS_CLOSE_ABNORMAL;
    if (ws->end_word) {
        ev->reason = (pagi_str){ws->end_word, strlen(ws->end_word)};
    } else {
        buf_append(d, ws->end_text, ws->end_text_len);
        ev->reason = (pagi_str){buf_size(d) ? buf_head(d) : "", buf_size(d)};
    }
    ws->disconnect_taken = 1;
    ws_maybe_release(ws);
    return 1;
}

/* ---- the app finished ---- */

static void ws_finished(pagi_scope *s, const char *error)
{
    ws_conn *ws = ws_of_scope(s);
    if (!ws)
        return;
    pagi_str path = pagi_scope_raw_path(s);
    int plen = path.len > 200 ? 200 : (int)path.len;
    switch (ws->state) {
    case WS_HANDSHAKE:
        if (error)
            log_error("websocket app failed before accepting %.*s: %s; sent 500", plen, path.ptr,
                      error);
        else
            log_info("websocket app finished without accepting %.*s; sent 403", plen, path.ptr);
        deny_status(ws, error ? 500 : 403);
        break;
    case WS_DENYING:
        log_error("websocket app %s%s before finishing its denial response to %.*s; closed",
                  error ? "failed: " : "finished", error ? error : "", plen, path.ptr);
        conn_close(ws->c, reason_server_error);
        break;
    case WS_OPEN:
        if (error)
            log_error("websocket app failed on %.*s: %s; closing with 1011", plen, path.ptr, error);
        ws_close_from_app(ws, error ? WS_CLOSE_INTERNAL_ERROR : WS_CLOSE_NORMAL, NULL, 0);
        break;
    default:
        if (error)
            log_info("websocket app error on %.*s after the close: %s", plen, path.ptr, error);
        break;
    }
    /* Only now: a close above may have released the connection side already. */
    ws->app_finished = 1;
    ws_drop_queue(ws);
    ws_maybe_release(ws);
}

static size_t ws_buffered(const pagi_scope *s)
{
    const ws_conn *ws = ws_of_scope(s);
    return ws && ws->c ? outq_buffered(&ws->c->out) : 0;
}

static int ws_above_high(const pagi_scope *s)
{
    const ws_conn *ws = ws_of_scope(s);
    return ws && ws->c ? ws->c->h1.above_high : 0;
}

const scope_ops ws_scope_ops = {
    .send = ws_send,
    .next_event = ws_next_event,
    .finished = ws_finished,
    .buffered = ws_buffered,
    .above_high = ws_above_high,
};
