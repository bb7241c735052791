/*
 * sseapp.c - the SSE integration tests' PAGI module (test_sse.py builds it
 * like lifecycle.c). Each route scripts one corner of the sse scope and logs
 * what the server let it observe to $PAGID_TEST_LOG: "<reqid> <event> [detail]".
 *
 * Routes (sse scopes; an http scope answers 200 "http" on any path):
 *   /type                 reads the body, one event "sse METHOD LEN BODY"
 *   /headers?ct=&cc=&xh=  sse.start with app-supplied headers, one event
 *   /format               sse.send field/line formatting, then rejected sends
 *   /comment              sse.comment variants, then event "end"
 *   /keepalive?mode=      basic | lastwins | stop | empty keepalive scripts
 *   /close?delay=MS       sse.close, then sends that must raise; finish later
 *   /decline?status=N     sse.http.response.* in two body parts; stream events raise
 *   /start-then-decline   sse.start, then the decline events must raise
 *   /wait                 event "ready", then receive until sse.disconnect
 *   /flood?size=N         events of N bytes from each completion, until disconnect
 *   /early                stream events before sse.start must raise; then a stream
 *   /finish-before        finishes without sending anything (-> 500 backstop)
 *   /error-after          sse.start, one event, then finishes with an error
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pagi/pagi.h>

#include "testlog.h"

typedef struct req {
    char id[64];
    pagi_scope *s;
    char *body;
    size_t body_len;
    long i, size, delay_ms;
    char mode[16];
    char *chunk;
    pagi_timer *timer;
    int phase;
    int finished;
} req;

static unsigned long req_counter;

static void tlog(const req *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void tlog(const req *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    testlog_v(r->id, fmt, ap);
    va_end(ap);
}

static int str_eq(pagi_str s, const char *lit)
{
    size_t n = strlen(lit);
    return s.len == n && memcmp(s.ptr, lit, n) == 0;
}

static pagi_str S(const char *lit)
{
    return (pagi_str){lit, strlen(lit)};
}

/* A query parameter's raw value copied into out; 1 when present. */
static int query_param(pagi_str q, const char *name, char *out, size_t cap)
{
    size_t nlen = strlen(name), i = 0;
    while (i < q.len) {
        size_t end = i;
        while (end < q.len && q.ptr[end] != '&')
            end++;
        if (end - i > nlen && memcmp(q.ptr + i, name, nlen) == 0 && q.ptr[i + nlen] == '=') {
            size_t vlen = end - i - nlen - 1;
            if (vlen >= cap)
                vlen = cap - 1;
            memcpy(out, q.ptr + i + nlen + 1, vlen);
            out[vlen] = '\0';
            return 1;
        }
        i = end + 1;
    }
    return 0;
}

static long query_long(pagi_str q, const char *name, long dflt)
{
    char buf[32];
    return query_param(q, name, buf, sizeof buf) ? strtol(buf, NULL, 10) : dflt;
}

static void finish(req *r, const char *error)
{
    if (r->finished)
        return;
    r->finished = 1;
    tlog(r, "finish %s", error ? error : "ok");
    pagi_scope_finish(r->s, error);
}

static void finish_cb(pagi_scope *s, const char *err, void *ud)
{
    (void)s;
    if (err != NULL)
        tlog(ud, "send_error %s", err);
    finish(ud, NULL);
}

/* ---- sending helpers ----------------------------------------------------- */

static int send_event(req *r, pagi_event *ev, const char *what, pagi_send_cb cb)
{
    int rc = pagi_send(r->s, ev, cb, r);
    if (rc != 0)
        tlog(r, "send_failed %s %s", what, pagi_scope_error(r->s));
    return rc;
}

static int sse_start(req *r, const pagi_header *h, size_t nh, int status, pagi_send_cb cb)
{
    pagi_event ev = PAGI_EVENT_INIT(PAGI_EV_SSE_START);
    ev.status = status;
    ev.headers = h;
    ev.header_count = nh;
    return send_event(r, &ev, "sse.start", cb);
}

static int sse_data(req *r, const char *event, const char *data, pagi_send_cb cb)
{
    pagi_event ev = PAGI_EVENT_INIT(PAGI_EV_SSE_SEND);
    if (event != NULL)
        ev.event = S(event);
    ev.data = S(data);
    return send_event(r, &ev, "sse.send", cb);
}

static int sse_comment(req *r, const char *text)
{
    pagi_event ev = PAGI_EVENT_INIT(PAGI_EV_SSE_COMMENT);
    ev.comment = S(text);
    return send_event(r, &ev, "sse.comment", NULL);
}

static int sse_keepalive(req *r, double interval, const char *comment)
{
    pagi_event ev = PAGI_EVENT_INIT(PAGI_EV_SSE_KEEPALIVE);
    ev.interval = interval;
    if (comment != NULL)
        ev.comment = S(comment);
    return send_event(r, &ev, "sse.keepalive", NULL);
}

static void must_not_run(pagi_scope *s, const char *err, void *ud)
{
    (void)s;
    tlog(ud, "callback_of_rejected_send_ran %s", err ? err : "ok");
}

/* A send that must raise: logs "rejected WHAT <message>" or "accepted WHAT". */
static void expect_reject(req *r, const pagi_event *ev, const char *what)
{
    if (pagi_send(r->s, ev, must_not_run, r) == -1)
        tlog(r, "rejected %s %s", what, pagi_scope_error(r->s));
    else
        tlog(r, "accepted %s", what);
}

static void stream_events_must_raise(req *r, const char *when)
{
    char what[64];
    pagi_event ev = PAGI_EVENT_INIT(PAGI_EV_SSE_SEND);
    ev.data = S("x");
    snprintf(what, sizeof what, "%s_send", when);
    expect_reject(r, &ev, what);
    ev = PAGI_EVENT_INIT(PAGI_EV_SSE_COMMENT);
    ev.comment = S("x");
    snprintf(what, sizeof what, "%s_comment", when);
    expect_reject(r, &ev, what);
    ev = PAGI_EVENT_INIT(PAGI_EV_SSE_KEEPALIVE);
    ev.interval = 1;
    snprintf(what, sizeof what, "%s_keepalive", when);
    expect_reject(r, &ev, what);
}

static void after(req *r, long ms, pagi_timer_cb cb)
{
    r->timer = pagi_timer_start(pagi_scope_loop(r->s), ms / 1000.0, 0, cb, r);
}

/* ---- /type, /headers ------------------------------------------------------ */

static void route_type(req *r)
{
    char data[300];
    snprintf(data, sizeof data, "sse %s %zu %.*s", pagi_scope_method(r->s), r->body_len,
             (int)(r->body_len > 200 ? 200 : r->body_len), r->body ? r->body : "");
    if (sse_start(r, NULL, 0, 200, NULL) != 0 || sse_data(r, NULL, data, finish_cb) != 0)
        finish(r, NULL);
}

static void route_headers(req *r)
{
    pagi_str q = pagi_scope_query_string(r->s);
    pagi_header h[3];
    size_t nh = 0;
    if (query_long(q, "ct", 0))
        h[nh++] = (pagi_header){S("content-type"), S("text/event-stream; charset=utf-8")};
    if (query_long(q, "cc", 0))
        h[nh++] = (pagi_header){S("cache-control"), S("no-store")};
    if (query_long(q, "xh", 0))
        h[nh++] = (pagi_header){S("x-app"), S("yes")};
    int status = (int)query_long(q, "status", 0);
    if (sse_start(r, nh ? h : NULL, nh, status, NULL) != 0 ||
        sse_data(r, NULL, "hi", finish_cb) != 0)
        finish(r, NULL);
}

/* ---- /format --------------------------------------------------------------- */

static void route_format(req *r)
{
    if (sse_start(r, NULL, 0, 200, NULL) != 0) {
        finish(r, NULL);
        return;
    }
    pagi_event ev = PAGI_EVENT_INIT(PAGI_EV_SSE_SEND);
    ev.event = S("update");
    ev.id = S("7");
    ev.has_retry = 1;
    ev.retry = 1500;
    ev.data = S("payload");
    send_event(r, &ev, "full", NULL);

    ev = PAGI_EVENT_INIT(PAGI_EV_SSE_SEND);
    ev.data = S("l1\nl2\r\nl3\rl4");
    send_event(r, &ev, "multiline", NULL);

    ev = PAGI_EVENT_INIT(PAGI_EV_SSE_SEND);
    ev.data = S("");
    send_event(r, &ev, "empty", NULL);

    ev = PAGI_EVENT_INIT(PAGI_EV_SSE_SEND);
    ev.data = S("trailing\n");
    send_event(r, &ev, "trailing", NULL);

    ev = PAGI_EVENT_INIT(PAGI_EV_SSE_SEND);
    ev.data = S("h\xc3\xa9llo \xe2\x9c\x93");
    ev.has_retry = 1; /* retry 0 is a real value once has_retry says so */
    ev.retry = 0;
    send_event(r, &ev, "utf8", NULL);

    /* Each of these must raise and write nothing. */
    static const struct {
        const char *what, *event, *id;
        long retry;
    } bad[] = {
        {"event_lf", "a\nb", NULL, 0},
        {"event_cr", "a\rdata: forged", NULL, 0},
        {"event_crlf", "a\r\n", NULL, 0},
        {"id_lf", NULL, "1\n2", 0},
        {"id_cr", NULL, "1\r", 0},
        {"retry_negative", NULL, NULL, -2},
        {"retry_very_negative", NULL, NULL, -1000},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        ev = PAGI_EVENT_INIT(PAGI_EV_SSE_SEND);
        ev.data = S("must not be written");
        if (bad[k].event)
            ev.event = S(bad[k].event);
        if (bad[k].id)
            ev.id = S(bad[k].id);
        ev.has_retry = bad[k].retry != 0;
        ev.retry = bad[k].retry;
        expect_reject(r, &ev, bad[k].what);
    }
    if (sse_data(r, "last", "end", finish_cb) != 0)
        finish(r, NULL);
}

/* ---- /comment -------------------------------------------------------------- */

static void route_comment(req *r)
{
    if (sse_start(r, NULL, 0, 200, NULL) != 0) {
        finish(r, NULL);
        return;
    }
    sse_comment(r, "hello");
    sse_comment(r, ":already");
    sse_comment(r, "two\nlines");
    sse_comment(r, "evil\n\ndata: forged\r\n\r\nevent: x");
    sse_comment(r, "");
    if (sse_data(r, NULL, "end", finish_cb) != 0)
        finish(r, NULL);
}

/* ---- /keepalive ------------------------------------------------------------ */

static void close_and_finish(req *r)
{
    pagi_event ev = PAGI_EVENT_INIT(PAGI_EV_SSE_CLOSE);
    if (send_event(r, &ev, "sse.close", finish_cb) != 0)
        finish(r, NULL);
}

static void keepalive_step(pagi_timer *t, void *ud)
{
    req *r = ud;
    pagi_timer_stop(t);
    r->timer = NULL;
    if (!pagi_conn_is_connected(r->s)) {
        finish(r, NULL);
        return;
    }
    if (strcmp(r->mode, "stop") == 0 && r->phase == 0) {
        r->phase = 1;
        sse_keepalive(r, 0, NULL);
        sse_data(r, NULL, "stopped", NULL);
        after(r, 700, keepalive_step);
        return;
    }
    close_and_finish(r);
}

static void route_keepalive(req *r)
{
    pagi_str q = pagi_scope_query_string(r->s);
    if (!query_param(q, "mode", r->mode, sizeof r->mode))
        strcpy(r->mode, "basic");
    if (sse_start(r, NULL, 0, 200, NULL) != 0) {
        finish(r, NULL);
        return;
    }
    long run_ms = 1100;
    if (strcmp(r->mode, "lastwins") == 0) {
        sse_keepalive(r, 0.1, "a");
        sse_keepalive(r, 0.3, "b");
    } else if (strcmp(r->mode, "stop") == 0) {
        sse_keepalive(r, 0.1, "k");
        run_ms = 550;
    } else if (strcmp(r->mode, "empty") == 0) {
        sse_keepalive(r, 0.2, NULL);
        run_ms = 700;
    } else {
        sse_keepalive(r, 0.2, "ping");
    }
    sse_data(r, NULL, "started", NULL);
    after(r, run_ms, keepalive_step);
}

/* ---- /close ----------------------------------------------------------------- */

static void close_later(pagi_timer *t, void *ud)
{
    req *r = ud;
    pagi_timer_stop(t);
    r->timer = NULL;
    /* Returning after sse.close is a no-op on the wire. */
    finish(r, NULL);
}

static void route_close(req *r)
{
    r->delay_ms = query_long(pagi_scope_query_string(r->s), "delay", 1000);
    if (sse_start(r, NULL, 0, 200, NULL) != 0 || sse_data(r, NULL, "one", NULL) != 0) {
        finish(r, NULL);
        return;
    }
    pagi_event ev = PAGI_EVENT_INIT(PAGI_EV_SSE_CLOSE);
    ev.reason = S("job_complete");
    tlog(r, "close1 rc=%d", pagi_send(r->s, &ev, NULL, NULL));
    ev = PAGI_EVENT_INIT(PAGI_EV_SSE_CLOSE);
    tlog(r, "close2 rc=%d", pagi_send(r->s, &ev, NULL, NULL));
    stream_events_must_raise(r, "after_close");
    ev = PAGI_EVENT_INIT(PAGI_EV_SSE_HTTP_RESPONSE_START);
    ev.status = 404;
    expect_reject(r, &ev, "after_close_decline");
    after(r, r->delay_ms, close_later);
}

/* ---- /decline, /start-then-decline ------------------------------------------ */

static void route_decline(req *r)
{
    int status = (int)query_long(pagi_scope_query_string(r->s), "status", 401);
    pagi_header h[] = {{S("content-type"), S("text/plain")}, {S("www-authenticate"), S("Bearer")}};
    pagi_event ev = PAGI_EVENT_INIT(PAGI_EV_SSE_HTTP_RESPONSE_START);
    ev.status = status;
    ev.headers = h;
    ev.header_count = 2;
    if (send_event(r, &ev, "decline_start", NULL) != 0) {
        finish(r, NULL);
        return;
    }
    stream_events_must_raise(r, "after_decline");
    ev = PAGI_EVENT_INIT(PAGI_EV_SSE_START);
    expect_reject(r, &ev, "after_decline_start");
    ev = PAGI_EVENT_INIT(PAGI_EV_SSE_CLOSE);
    expect_reject(r, &ev, "after_decline_close");
    ev = PAGI_EVENT_INIT(PAGI_EV_SSE_HTTP_RESPONSE_BODY);
    ev.body = S("Unauth");
    ev.more = 1;
    send_event(r, &ev, "decline_body1", NULL);
    ev = PAGI_EVENT_INIT(PAGI_EV_SSE_HTTP_RESPONSE_BODY);
    ev.body = S("orized");
    if (send_event(r, &ev, "decline_body2", finish_cb) != 0)
        finish(r, NULL);
}

static void route_start_then_decline(req *r)
{
    if (sse_start(r, NULL, 0, 200, NULL) != 0) {
        finish(r, NULL);
        return;
    }
    pagi_event ev = PAGI_EVENT_INIT(PAGI_EV_SSE_HTTP_RESPONSE_START);
    ev.status = 403;
    expect_reject(r, &ev, "decline_after_start");
    ev = PAGI_EVENT_INIT(PAGI_EV_SSE_HTTP_RESPONSE_BODY);
    ev.body = S("no");
    expect_reject(r, &ev, "decline_body_after_start");
    ev = PAGI_EVENT_INIT(PAGI_EV_SSE_START);
    expect_reject(r, &ev, "second_start");
    if (sse_data(r, NULL, "ok", finish_cb) != 0)
        finish(r, NULL);
}

/* ---- /wait: receive until sse.disconnect, then a send that must be a no-op ---- */

static void late_cb(pagi_scope *s, const char *err, void *ud)
{
    (void)s;
    req *r = ud;
    tlog(r, "late_cb %s", err ? err : "ok");
    finish(r, NULL);
}

static void send_after_disconnect(req *r)
{
    tlog(r, "connected=%d reason=%s", pagi_conn_is_connected(r->s),
         pagi_conn_disconnect_reason(r->s) ? pagi_conn_disconnect_reason(r->s) : "(null)");
    int rc = sse_data(r, NULL, "late", late_cb);
    tlog(r, "late_send rc=%d", rc);
    if (rc != 0)
        finish(r, NULL);
}

static void wait_recv(pagi_scope *s, const pagi_event *ev, void *ud)
{
    req *r = ud;
    const char *name = pagi_event_type_name(ev->type);
    if (ev->type == PAGI_EV_SSE_DISCONNECT) {
        tlog(r, "recv sse.disconnect %.*s", (int)ev->reason.len,
             ev->reason.ptr ? ev->reason.ptr : "");
        send_after_disconnect(r);
        return;
    }
    tlog(r, "recv %s", name ? name : "?");
    if (pagi_receive(s, wait_recv, r) != 0) {
        tlog(r, "receive_failed %s", pagi_scope_error(s));
        finish(r, NULL);
    }
}

static void route_wait(req *r)
{
    if (sse_start(r, NULL, 0, 200, NULL) != 0 || sse_data(r, NULL, "ready", NULL) != 0) {
        finish(r, NULL);
        return;
    }
    if (pagi_receive(r->s, wait_recv, r) != 0) {
        tlog(r, "receive_failed %s", pagi_scope_error(r->s));
        finish(r, NULL);
    }
}

/* ---- /flood: backpressure on an sse scope ---------------------------------- */

static void on_high_water(pagi_scope *s, void *ud)
{
    tlog(ud, "high_water %zu", pagi_transport_buffered_amount(s));
}

static void on_drain(pagi_scope *s, void *ud)
{
    tlog(ud, "drain %zu", pagi_transport_buffered_amount(s));
}

static void flood_next(pagi_scope *s, const char *err, void *ud)
{
    req *r = ud;
    if (err != NULL) {
        tlog(r, "send_error %ld %s", r->i, err);
        finish(r, NULL);
        return;
    }
    if (r->i > 0)
        tlog(r, "send_done %ld buffered=%zu", r->i, pagi_transport_buffered_amount(s));
    if (!pagi_conn_is_connected(s)) {
        tlog(r, "stopped %ld", r->i);
        send_after_disconnect(r);
        return;
    }
    r->i++;
    pagi_event ev = PAGI_EVENT_INIT(PAGI_EV_SSE_SEND);
    ev.data = (pagi_str){r->chunk, (size_t)r->size};
    if (send_event(r, &ev, "flood", flood_next) != 0)
        finish(r, NULL);
}

static void route_flood(req *r)
{
    r->size = query_long(pagi_scope_query_string(r->s), "size", 16384);
    if (r->size < 1 || r->size > (1L << 24) || !(r->chunk = malloc((size_t)r->size))) {
        finish(r, "bad size");
        return;
    }
    memset(r->chunk, 'x', (size_t)r->size);
    tlog(r, "transport buffered=%zu high=%zu low=%zu", pagi_transport_buffered_amount(r->s),
         pagi_transport_high_water_mark(r->s), pagi_transport_low_water_mark(r->s));
    pagi_transport_on_high_water(r->s, on_high_water, r);
    pagi_transport_on_drain(r->s, on_drain, r);
    if (sse_start(r, NULL, 0, 200, flood_next) != 0)
        finish(r, NULL);
}

/* ---- /early, /finish-before, /error-after ------------------------------------ */

static void route_early(req *r)
{
    pagi_event ev = PAGI_EVENT_INIT(PAGI_EV_SSE_SEND);
    ev.data = S("too early");
    expect_reject(r, &ev, "send_before_start");
    ev = PAGI_EVENT_INIT(PAGI_EV_SSE_COMMENT);
    ev.comment = S("too early");
    expect_reject(r, &ev, "comment_before_start");
    ev = PAGI_EVENT_INIT(PAGI_EV_SSE_CLOSE);
    expect_reject(r, &ev, "close_before_start");
    ev = PAGI_EVENT_INIT(PAGI_EV_SSE_HTTP_RESPONSE_BODY);
    ev.body = S("too early");
    expect_reject(r, &ev, "decline_body_before_decline_start");
    ev = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_START);
    ev.status = 200;
    expect_reject(r, &ev, "http_start_on_sse_scope");
    ev = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_SEND);
    ev.is_text = 1;
    ev.text = S("x");
    expect_reject(r, &ev, "websocket_send_on_sse_scope");
    if (sse_start(r, NULL, 0, 200, NULL) != 0 || sse_data(r, NULL, "ok", finish_cb) != 0)
        finish(r, NULL);
}

static void error_after_sent(pagi_scope *s, const char *err, void *ud)
{
    (void)s;
    (void)err;
    finish(ud, "boom");
}

static void route_error_after(req *r)
{
    if (sse_start(r, NULL, 0, 200, NULL) != 0 ||
        sse_data(r, NULL, "partial", error_after_sent) != 0)
        finish(r, "boom");
}

/* ---- dispatch --------------------------------------------------------------- */

static void route(req *r)
{
    pagi_str path = pagi_scope_path(r->s);
    if (str_eq(path, "/type"))
        route_type(r);
    else if (str_eq(path, "/headers"))
        route_headers(r);
    else if (str_eq(path, "/format"))
        route_format(r);
    else if (str_eq(path, "/comment"))
        route_comment(r);
    else if (str_eq(path, "/keepalive"))
        route_keepalive(r);
    else if (str_eq(path, "/close"))
        route_close(r);
    else if (str_eq(path, "/decline"))
        route_decline(r);
    else if (str_eq(path, "/start-then-decline"))
        route_start_then_decline(r);
    else if (str_eq(path, "/wait"))
        route_wait(r);
    else if (str_eq(path, "/flood"))
        route_flood(r);
    else if (str_eq(path, "/early"))
        route_early(r);
    else if (str_eq(path, "/finish-before"))
        finish(r, NULL);
    else if (str_eq(path, "/error-after"))
        route_error_after(r);
    else
        finish(r, "unknown route");
}

/* The request body first (every sse scope gets at least one sse.request). */
static void body_recv(pagi_scope *s, const pagi_event *ev, void *ud)
{
    req *r = ud;
    if (ev->type == PAGI_EV_SSE_DISCONNECT) {
        tlog(r, "recv sse.disconnect %.*s", (int)ev->reason.len,
             ev->reason.ptr ? ev->reason.ptr : "");
        finish(r, NULL);
        return;
    }
    if (ev->type != PAGI_EV_SSE_REQUEST) {
        const char *name = pagi_event_type_name(ev->type);
        tlog(r, "recv unexpected %s", name ? name : "?");
        finish(r, "unexpected event");
        return;
    }
    tlog(r, "recv sse.request %zu more=%d", ev->body.len, ev->more);
    if (ev->body.len > 0) {
        char *n = realloc(r->body, r->body_len + ev->body.len);
        if (n == NULL) {
            finish(r, "out of memory");
            return;
        }
        memcpy(n + r->body_len, ev->body.ptr, ev->body.len);
        r->body = n;
        r->body_len += ev->body.len;
    }
    if (ev->more) {
        if (pagi_receive(s, body_recv, r) != 0)
            finish(r, pagi_scope_error(s));
        return;
    }
    route(r);
}

static void on_release(pagi_scope *s, void *data)
{
    (void)s;
    req *r = data;
    if (r->timer != NULL)
        pagi_timer_stop(r->timer);
    tlog(r, "release");
    free(r->body);
    free(r->chunk);
    free(r);
}

static void on_disconnect(pagi_scope *s, const char *reason, void *ud)
{
    (void)s;
    tlog(ud, "on_disconnect %s", reason ? reason : "(null)");
}

static void on_complete(pagi_scope *s, void *ud)
{
    (void)s;
    tlog(ud, "on_complete");
}

static void handle(pagi_scope *s, void *instance)
{
    (void)instance;
    if (pagi_scope_type_of(s) == PAGI_SCOPE_LIFESPAN) {
        pagi_scope_finish(s, "unsupported scope type");
        return;
    }
    req *r = calloc(1, sizeof *r);
    if (r == NULL) {
        pagi_scope_finish(s, "out of memory");
        return;
    }
    r->s = s;
    pagi_str id;
    if (pagi_scope_header(s, "x-test-id", &id) && id.len > 0 && id.len < sizeof r->id)
        memcpy(r->id, id.ptr, id.len);
    else
        snprintf(r->id, sizeof r->id, "r%lu", ++req_counter);
    pagi_scope_set_userdata(s, r, on_release);
    pagi_str path = pagi_scope_path(s);
    tlog(r, "handle %s %s %.*s", pagi_scope_type_name(s), pagi_scope_method(s), (int)path.len,
         path.ptr);
    pagi_conn_on_disconnect(s, on_disconnect, r);
    pagi_conn_on_complete(s, on_complete, r);

    if (pagi_scope_type_of(s) == PAGI_SCOPE_HTTP) {
        pagi_header h[] = {{S("content-type"), S("text/plain")}, {S("content-length"), S("4")}};
        pagi_event ev = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_START);
        ev.status = 200;
        ev.headers = h;
        ev.header_count = 2;
        pagi_event body = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_BODY);
        body.body = S("http");
        if (send_event(r, &ev, "http.response.start", NULL) != 0 ||
            send_event(r, &body, "http.response.body", finish_cb) != 0)
            finish(r, NULL);
        return;
    }
    if (pagi_scope_type_of(s) != PAGI_SCOPE_SSE) {
        finish(r, "unsupported scope type");
        return;
    }
    if (pagi_receive(s, body_recv, r) != 0)
        finish(r, pagi_scope_error(s));
}

const pagi_app pagi_module = PAGI_APP_INIT("sseapp", NULL, handle, NULL);
