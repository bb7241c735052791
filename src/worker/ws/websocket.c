/*
 * websocket.c - the websocket scope's side of the PAGI interface, whatever
 * carries it: websocket.connect, the accept or a refusal (403, or the
 * denial-response extension) through the carrier, send validation against
 * the session state, message delivery to pull receives, and what the app
 * finishing means. Frames and the close handshake live in websocket_io.c;
 * the HTTP/1.1 handshake in websocket_h1.c, the HTTP/2 one in h2_websocket.c.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "worker/core/access_log.h"
#include "worker/core/memtrim.h"
#include "worker/core/reason.h"
#include "websocket_int.h"


/* ---- the handshake request ---- */

/* Split one Sec-WebSocket-Protocol value; -1 when over max in all. */
static int add_subprotocols(pagi_str v, pagi_str *out, size_t *n, size_t max)
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
            if (*n == max)
                return -1;
            out[(*n)++] = (pagi_str){a, (size_t)(b - a)};
        }
        if (!comma)
            break;
        p = comma + 1;
    }
    return 0;
}

static int str_is(pagi_str s, const char *lit)
{
    size_t n = strlen(lit);
    return s.len == n && memcmp(s.ptr, lit, n) == 0;
}

void ws_handshake_read(const pagi_header *h, size_t n, ws_handshake *out)
{
    pagi_str version = {NULL, 0};
    int versions = 0;
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < n; i++) {
        if (str_is(h[i].name, "sec-websocket-key")) {
            out->key = h[i].value;
            out->keys++;
        } else if (str_is(h[i].name, "sec-websocket-version")) {
            version = h[i].value;
            versions++;
        } else if (str_is(h[i].name, "sec-websocket-protocol")) {
            out->too_many |=
                add_subprotocols(h[i].value, out->protos, &out->nprotos, WS_MAX_SUBPROTOCOLS) < 0;
        } else if (str_is(h[i].name, "sec-websocket-extensions") && !out->pmd_ok) {
            out->pmd_ok = ws_deflate_negotiate(h[i].value.ptr, h[i].value.len, &out->pmd);
        }
    }
    out->version_ok = versions == 1 && str_is(version, "13");
}

ws_conn *ws_conn_new(worker_ctx *w, const ws_carrier *car, void *owner, const scope_request *sr,
                     const ws_deflate_params *pmd, int pmd_offered)
{
    ws_conn *ws = calloc(1, sizeof *ws);
    if (!ws)
        return NULL;
    ws->pmd_offered = pmd_offered;
    if (pmd_offered)
        ws->pmd_params = *pmd;
    scope_request r = *sr;
    r.extensions = SCOPE_EXT_WEBSOCKET_HTTP_RESPONSE;
    pagi_scope *s = scope_new(w, PAGI_SCOPE_WEBSOCKET, &ws_scope_ops, ws, &r);
    if (!s) {
        free(ws);
        return NULL;
    }
    ws->car = car;
    ws->owner = owner;
    ws->w = w;
    ws->s = s;
    ws->state = WS_HANDSHAKE;
    utf8_reset(&ws->u8);
    ws_timers_init(ws);
    return ws;
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
    char ext[160];
    const char *e = NULL;
    if (ws->pmd && ws_deflate_response(&ws->pmd_params, ext, sizeof ext) > 0)
        e = ext;
    if (ws->car->accept(ws, ev, e) < 0) { /* the carrier said why (scope_fail) */
        ws_deflate_free(ws->pmd);
        ws->pmd = NULL;
        return -1;
    }
    ws->state = WS_OPEN;
    scope_mark_started(s);
    ws->car->after_append(ws, cb, ud);
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
    ws->car->after_append(ws, cb, ud);
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

/* The bare refusal (403; 500 when the app failed before answering), then the end. */
static void deny_status(ws_conn *ws, int status)
{
    ws->state = WS_DENIED;
    scope_mark_started(ws->s);
    ws->car->refuse(ws, status);
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
    if (ws->state != WS_HANDSHAKE)
        return scope_fail(s,
                          "websocket.http.response.start: a denial response was already started");
    if (ev->status < 200 || ev->status > 999)
        return scope_fail(s, "websocket.http.response.start: status must be 200-999 (got %d)",
                          ev->status);
    if (ev->header_count && !ev->headers)
        return scope_fail(s, "websocket.http.response.start: header_count without headers");
    return ws->car->deny_start(ws, ev, cb, ud);
}

static int send_denial_body(pagi_scope *s, ws_conn *ws, const pagi_event *ev, pagi_send_cb cb,
                            void *ud)
{
    if (ws->state != WS_DENYING)
        return scope_fail(s, "websocket.http.response.body: %s",
                          ws->state == WS_HANDSHAKE ? "websocket.http.response.start was not sent"
                                                    : "the denial response is already complete");
    if (ev->file || ev->use_fd)
        return scope_fail(s, "websocket.http.response.body: only body applies (no file or fd)");
    if (ev->body.len && !ev->body.ptr)
        return scope_fail(s, "websocket.http.response.body: body length without data");
    return ws->car->deny_body(ws, ev, cb, ud);
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
        ws->car->abort(ws, reason_server_error);
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
    return ws && ws->owner ? ws->car->queued(ws) : 0;
}

static int ws_above_high(const pagi_scope *s)
{
    const ws_conn *ws = ws_of_scope(s);
    return ws && ws->owner ? ws->car->above_high(ws) : 0;
}

const scope_ops ws_scope_ops = {
    .send = ws_send,
    .next_event = ws_next_event,
    .finished = ws_finished,
    .buffered = ws_buffered,
    .above_high = ws_above_high,
};
