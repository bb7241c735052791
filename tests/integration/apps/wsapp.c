/*
 * wsapp.c - the WebSocket integration tests' PAGI module. It records what the
 * server makes it observe, one line per event, in $PAGID_TEST_LOG:
 * "<id> <event> [detail]", where id is the query's id= value.
 *
 * Routes (by path; parameters in the query):
 *   /echo[?proto=P][&padded=1] accept (with subprotocol P if given; padded=1: with the header
 *                          x-note "padded ", fine over HTTP/1.1), echo each message with its type
 *   /noreceive             accept, never receive (the queue overflows)
 *   /reject                websocket.close before accept (403)
 *   /deny[?code=N]         denial response: 401 (or N) + www-authenticate, body in two events
 *   /close?code=N&reason=R[&again=1] accept, close with N/R at once (again=1: then a second
 *                          close and a send, both logged as rejected), receive until the disconnect
 *   /keepalive?interval=S&timeout=T   accept, websocket.keepalive, receive until the disconnect
 *   /badsends              invalid sends are rejected with clear errors; then accept and echo
 *   /finish[?error=1]      accept, then finish (normally or with an error)
 *   /big?size=N            accept, send N bytes, log high_water/drain, then receive
 *   /unaccepted            never answers the handshake; receives until the disconnect
 * Every scope logs connect, receive text|bytes LEN, disconnect CODE REASON,
 * on_disconnect REASON, release.
 */
#define _POSIX_C_SOURCE 200809L
#define UNUSED __attribute__((unused))

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pagi/pagi.h>

#include "testlog.h"

typedef struct wsr {
    char id[64];
    char route[32];
    char proto[64];
    int code;
    char reason[200];
    double interval, timeout;
    long size;
    int error;
    int again;
    int padded;
    char *big;
} wsr;

static void tlog(const wsr *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void tlog(const wsr *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    testlog_v(r->id, fmt, ap);
    va_end(ap);
}

/* Value of key in the query string (no decoding; tests use plain values). */
static void qparam(pagi_str q, const char *key, char *out, size_t size)
{
    out[0] = '\0';
    size_t kl = strlen(key);
    const char *p = q.ptr, *end = q.ptr + q.len;
    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *stop = amp ? amp : end;
        if ((size_t)(stop - p) > kl && memcmp(p, key, kl) == 0 && p[kl] == '=') {
            size_t n = (size_t)(stop - p - (long)kl - 1);
            if (n >= size)
                n = size - 1;
            memcpy(out, p + kl + 1, n);
            out[n] = '\0';
            for (char *c = out; *c; c++)
                if (*c == '+')
                    *c = ' ';
            return;
        }
        p = stop + 1;
    }
}

static void on_event(pagi_scope *s, const pagi_event *ev, void *ud);

static void release(UNUSED pagi_scope *s, void *data)
{
    wsr *r = data;
    tlog(r, "release");
    free(r->big);
    free(r);
}

static void on_disconnect(pagi_scope *s, const char *reason, void *ud)
{
    wsr *r = ud;
    tlog(r, "on_disconnect %s", reason ? reason : "-");
    if (strcmp(r->route, "noreceive") == 0)
        pagi_scope_finish(s, NULL);
}

static void receive_next(pagi_scope *s, wsr *r)
{
    if (pagi_receive(s, on_event, r) < 0) {
        tlog(r, "receive_failed %s", pagi_scope_error(s));
        pagi_scope_finish(s, pagi_scope_error(s));
    }
}

static void after_send(pagi_scope *s, const char *err, void *ud)
{
    wsr *r = ud;
    if (err) {
        tlog(r, "send_error %s", err);
        pagi_scope_finish(s, err);
        return;
    }
    receive_next(s, r);
}

static void log_send(UNUSED pagi_scope *s, const char *err, void *ud)
{
    wsr *r = ud;
    tlog(r, "send_done %s", err ? err : "ok");
}

static void high_water(pagi_scope *s, void *ud)
{
    tlog(ud, "high_water %zu", pagi_transport_buffered_amount(s));
}

static void drained(pagi_scope *s, void *ud)
{
    tlog(ud, "drain %zu", pagi_transport_buffered_amount(s));
}

static int send_or_log(pagi_scope *s, wsr *r, const pagi_event *ev, pagi_send_cb cb)
{
    int rc = pagi_send(s, ev, cb, r);
    if (rc < 0)
        tlog(r, "rejected %s: %s", pagi_event_type_name(ev->type), pagi_scope_error(s));
    return rc;
}

static void bad_sends(pagi_scope *s, wsr *r)
{
    pagi_event ev = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_SEND);
    ev.is_text = 1;
    ev.text = (pagi_str){"ok", 2};
    send_or_log(s, r, &ev, log_send); /* before accept */
    ev = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_ACCEPT);
    ev.subprotocol = (pagi_str){"never-offered", 13};
    send_or_log(s, r, &ev, log_send);
    pagi_header bad = {{"x-bad", 5}, {"a\r\nb", 4}};
    ev = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_ACCEPT);
    ev.headers = &bad;
    ev.header_count = 1;
    send_or_log(s, r, &ev, log_send);
    ev = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_START);
    ev.status = 200;
    send_or_log(s, r, &ev, log_send);
    pagi_header extra = {{"x-extra", 7}, {"yes", 3}};
    ev = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_ACCEPT);
    ev.headers = &extra;
    ev.header_count = 1;
    if (send_or_log(s, r, &ev, log_send) < 0)
        return;
    ev = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_SEND);
    ev.is_text = 1;
    ev.text = (pagi_str){"\xed\xa0\x80", 3};
    send_or_log(s, r, &ev, log_send);
    ev = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_SEND);
    ev.is_text = 1;
    ev.text = (pagi_str){"a", 1};
    ev.bytes = (pagi_str){"b", 1};
    send_or_log(s, r, &ev, log_send);
    ev = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_SEND);
    send_or_log(s, r, &ev, log_send);
    ev = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_CLOSE);
    ev.code = 1005;
    send_or_log(s, r, &ev, log_send);
    char longr[130];
    memset(longr, 'r', sizeof longr);
    ev = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_CLOSE);
    ev.reason = (pagi_str){longr, sizeof longr};
    send_or_log(s, r, &ev, log_send);
    ev = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_KEEPALIVE);
    ev.interval = -1;
    send_or_log(s, r, &ev, log_send);
    /* Denial events after the accept are ignored (accepted and completed, nothing sent). */
    ev = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_HTTP_RESPONSE_START);
    ev.status = 401;
    send_or_log(s, r, &ev, log_send);
    ev = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_SEND);
    ev.is_text = 1;
    ev.text = (pagi_str){"ready", 5};
    send_or_log(s, r, &ev, after_send);
}

static void on_connect(pagi_scope *s, wsr *r)
{
    pagi_event ev = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_ACCEPT);
    if (strcmp(r->route, "reject") == 0) {
        ev = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_CLOSE);
        if (send_or_log(s, r, &ev, log_send) == 0)
            tlog(r, "closed_before_accept");
        receive_next(s, r);
        return;
    }
    if (strcmp(r->route, "deny") == 0) {
        pagi_header h[] = {{{"www-authenticate", 16}, {"Bearer", 6}},
                           {{"content-type", 12}, {"text/plain", 10}}};
        ev = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_HTTP_RESPONSE_START);
        ev.status = r->code ? r->code : 401;
        ev.headers = h;
        ev.header_count = 2;
        if (send_or_log(s, r, &ev, NULL) < 0) {
            pagi_scope_finish(s, NULL); /* unanswered: the server's 403 */
            return;
        }
        ev = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_HTTP_RESPONSE_BODY);
        ev.body = (pagi_str){"denied ", 7};
        ev.more = 1;
        send_or_log(s, r, &ev, NULL);
        ev = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_HTTP_RESPONSE_BODY);
        ev.body = (pagi_str){"here", 4};
        /* A second accept after a denial started is an error. */
        send_or_log(s, r, &ev, log_send);
        pagi_event acc = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_ACCEPT);
        send_or_log(s, r, &acc, log_send);
        pagi_scope_finish(s, NULL);
        return;
    }
    if (strcmp(r->route, "badsends") == 0) {
        bad_sends(s, r);
        return;
    }
    if (strcmp(r->route, "unaccepted") == 0) {
        receive_next(s, r);
        return;
    }
    if (r->proto[0])
        ev.subprotocol = (pagi_str){r->proto, strlen(r->proto)};
    pagi_header note = {{"x-note", 6}, {"padded ", 7}};
    if (r->padded) {
        ev.headers = &note;
        ev.header_count = 1;
    }
    if (send_or_log(s, r, &ev, NULL) < 0) {
        pagi_scope_finish(s, pagi_scope_error(s));
        return;
    }
    tlog(r, "accepted");
    if (strcmp(r->route, "noreceive") == 0)
        return; /* finishes from on_disconnect */
    if (strcmp(r->route, "finish") == 0) {
        pagi_scope_finish(s, r->error ? "boom" : NULL);
        return;
    }
    if (strcmp(r->route, "close") == 0) {
        ev = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_CLOSE);
        ev.code = r->code;
        ev.reason = (pagi_str){r->reason, strlen(r->reason)};
        send_or_log(s, r, &ev, log_send);
        if (r->again) {
            send_or_log(s, r, &ev, log_send);
            ev = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_SEND);
            ev.is_text = 1;
            ev.text = (pagi_str){"late", 4};
            send_or_log(s, r, &ev, log_send);
        }
    } else if (strcmp(r->route, "keepalive") == 0) {
        ev = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_KEEPALIVE);
        ev.interval = r->interval;
        ev.timeout = r->timeout;
        send_or_log(s, r, &ev, log_send);
    } else if (strcmp(r->route, "big") == 0) {
        pagi_transport_on_high_water(s, high_water, r);
        pagi_transport_on_drain(s, drained, r);
        r->big = malloc((size_t)r->size);
        memset(r->big, 'b', (size_t)r->size);
        ev = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_SEND);
        ev.bytes = (pagi_str){r->big, (size_t)r->size};
        send_or_log(s, r, &ev, log_send);
        tlog(r, "buffered %zu", pagi_transport_buffered_amount(s));
    }
    receive_next(s, r);
}

static void on_event(pagi_scope *s, const pagi_event *ev, void *ud)
{
    wsr *r = ud;
    switch (ev->type) {
    case PAGI_EV_WEBSOCKET_CONNECT:
        tlog(r, "connect");
        on_connect(s, r);
        return;
    case PAGI_EV_WEBSOCKET_RECEIVE: {
        tlog(r, "receive %s %zu", ev->is_text ? "text" : "bytes",
             ev->is_text ? ev->text.len : ev->bytes.len);
        pagi_event out = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_SEND);
        out.is_text = ev->is_text;
        if (ev->is_text)
            out.text = ev->text;
        else
            out.bytes = ev->bytes;
        if (send_or_log(s, r, &out, after_send) < 0)
            pagi_scope_finish(s, pagi_scope_error(s));
        return;
    }
    case PAGI_EV_WEBSOCKET_DISCONNECT: {
        tlog(r, "disconnect %d %.*s", ev->code, (int)ev->reason.len, ev->reason.ptr);
        /* A send after the disconnect is a no-op that completes. */
        pagi_event out = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_SEND);
        out.is_text = 1;
        out.text = (pagi_str){"late", 4};
        int rc = pagi_send(s, &out, NULL, NULL);
        tlog(r, "send_after_disconnect %d", rc);
        pagi_scope_finish(s, NULL);
        return;
    }
    default:
        tlog(r, "unexpected %s", pagi_event_type_name(ev->type));
        pagi_scope_finish(s, "unexpected event");
    }
}

static void handle(pagi_scope *s, UNUSED void *instance)
{
    if (pagi_scope_type_of(s) != PAGI_SCOPE_WEBSOCKET) {
        if (pagi_scope_type_of(s) == PAGI_SCOPE_HTTP) {
            pagi_event ev = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_START);
            ev.status = 200;
            pagi_send(s, &ev, NULL, NULL);
            ev = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_BODY);
            ev.body = (pagi_str){"http", 4};
            pagi_send(s, &ev, NULL, NULL);
            pagi_scope_finish(s, NULL);
            return;
        }
        pagi_scope_finish(s, "wsapp: websocket only");
        return;
    }
    wsr *r = calloc(1, sizeof *r);
    pagi_str q = pagi_scope_query_string(s), path = pagi_scope_path(s);
    char buf[64];
    qparam(q, "id", r->id, sizeof r->id);
    if (!r->id[0])
        strcpy(r->id, "-");
    size_t pl = path.len > 1 ? path.len - 1 : 0;
    if (pl >= sizeof r->route)
        pl = sizeof r->route - 1;
    memcpy(r->route, path.ptr + (path.len ? 1 : 0), pl);
    qparam(q, "proto", r->proto, sizeof r->proto);
    qparam(q, "code", buf, sizeof buf);
    r->code = atoi(buf);
    qparam(q, "reason", r->reason, sizeof r->reason);
    qparam(q, "interval", buf, sizeof buf);
    r->interval = atof(buf);
    qparam(q, "timeout", buf, sizeof buf);
    r->timeout = atof(buf);
    qparam(q, "size", buf, sizeof buf);
    r->size = atol(buf);
    qparam(q, "error", buf, sizeof buf);
    r->error = atoi(buf);
    qparam(q, "again", buf, sizeof buf);
    r->again = atoi(buf);
    qparam(q, "padded", buf, sizeof buf);
    r->padded = atoi(buf);
    pagi_scope_set_userdata(s, r, release);
    pagi_conn_on_disconnect(s, on_disconnect, r);
    size_t n = pagi_scope_subprotocol_count(s);
    if (n) {
        char line[300] = "";
        for (size_t i = 0; i < n && strlen(line) < 200; i++) {
            pagi_str p = pagi_scope_subprotocol(s, i);
            snprintf(line + strlen(line), sizeof line - strlen(line), "%s%.*s", i ? "," : "",
                     (int)p.len, p.ptr);
        }
        tlog(r, "subprotocols %s", line);
    }
    tlog(r, "scheme %s ext %d", pagi_scope_scheme(s),
         pagi_scope_has_extension(s, "websocket.http.response"));
    receive_next(s, r);
}

const pagi_app pagi_module = {
    .abi_version = PAGI_ABI_VERSION,
    .name = "wsapp",
    .handle = handle,
};
