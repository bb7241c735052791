/*
 * demo.c - the `demo` app, pagid's default: a page (GET /) that shows three
 * scopes working in a browser: GET /stream (a chunked line every 200 ms),
 * GET /clock (SSE, `event: time` every second) and /ws (a WebSocket chat:
 * every message goes to every demo client of this worker, the sender too).
 * When the worker starts draining (stop, reload), /clock sends a last
 * `event: shutdown` and ends and /ws clients get a 1001 close.
 * It uses only pagi.h, like any module. Everything else is 404.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "builtin.h"
#include "demo_page.h"

#define STREAM_LINES 10
#define STREAM_INTERVAL 0.2
#define CLOCK_INTERVAL 1.0

/* The chat room: per worker, so a broadcast never crosses processes. */
typedef struct demo_client demo_client;

typedef struct demo {
    demo_client *clients; /* accepted WebSocket sessions, newest first */
    unsigned next_id;
} demo;

struct demo_client {
    demo *d;
    pagi_scope *s;
    unsigned id;
    int joined;
    demo_client *prev, *next;
};

/* Per-request state of /stream and /clock. */
typedef struct demo_timed {
    pagi_timer *timer;
    int n;
    int started; /* /clock: sse.start sent */
    int done;    /* the app side finished: the timer must not touch the scope */
} demo_timed;

static pagi_str S(const char *lit)
{
    return (pagi_str){lit, strlen(lit)};
}

static int str_eq(pagi_str s, const char *lit)
{
    size_t n = strlen(lit);
    return s.len == n && memcmp(s.ptr, lit, n) == 0;
}

static void finish_on_error(pagi_scope *s, int rc)
{
    if (rc < 0)
        pagi_scope_finish(s, pagi_scope_error(s));
}

/* "HH:MM:SS.mmm UTC" (with_ms) or "YYYY-MM-DD HH:MM:SS UTC". */
static int format_now(char *out, size_t cap, int with_ms)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    if (with_ms)
        return snprintf(out, cap, "%02d:%02d:%02d.%03d UTC", tm.tm_hour, tm.tm_min, tm.tm_sec,
                        (int)(tv.tv_usec / 1000));
    return snprintf(out, cap, "%04d-%02d-%02d %02d:%02d:%02d UTC", tm.tm_year + 1900, tm.tm_mon + 1,
                    tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

/* ---- plain responses -------------------------------------------------------- */

static void respond(pagi_scope *s, int status, const char *ctype, const char *body, size_t len)
{
    char clen[24];
    int n = snprintf(clen, sizeof clen, "%zu", len);
    pagi_header h[] = {
        {S("content-type"), S(ctype)},
        {S("content-length"), {clen, (size_t)n}},
        {S("cache-control"), S("no-cache")},
    };
    pagi_event start = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_START);
    start.status = status;
    start.headers = h;
    start.header_count = sizeof h / sizeof h[0];
    pagi_event ev = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_BODY);
    ev.body = (pagi_str){body, len};
    if (pagi_send(s, &start, NULL, NULL) < 0 || pagi_send(s, &ev, NULL, NULL) < 0) {
        pagi_scope_finish(s, pagi_scope_error(s));
        return;
    }
    pagi_scope_finish(s, NULL);
}

static void not_found(pagi_scope *s)
{
    respond(s, 404, "text/plain; charset=utf-8", "not found\n", 10);
}

/* ---- timers shared by /stream and /clock ------------------------------------- */

static void timed_release(pagi_scope *s, void *data)
{
    demo_timed *t = data;
    if (t->timer)
        pagi_timer_stop(t->timer);
    free(t);
}

static demo_timed *timed_new(pagi_scope *s)
{
    demo_timed *t = calloc(1, sizeof *t);
    if (!t) {
        pagi_scope_finish(s, "demo: out of memory");
        return NULL;
    }
    pagi_scope_set_userdata(s, t, timed_release);
    return t;
}

/* Finish once; the timer dies with it so no tick runs on a finished scope. */
static void timed_finish(pagi_scope *s, demo_timed *t, const char *err)
{
    if (t->done)
        return;
    t->done = 1;
    if (t->timer) {
        pagi_timer_stop(t->timer);
        t->timer = NULL;
    }
    pagi_scope_finish(s, err);
}

/* ---- GET /stream: STREAM_LINES lines, STREAM_INTERVAL apart, chunked --------- */

static void stream_tick(pagi_timer *tm, void *ud);

static void stream_sent(pagi_scope *s, const char *err, void *ud)
{
    demo_timed *t = ud;
    if (err || !pagi_conn_is_connected(s) || t->n >= STREAM_LINES) {
        timed_finish(s, t, err);
        return;
    }
    /* The next line waits for this one's completion: a slow reader slows us down. */
    t->timer = pagi_timer_start(pagi_scope_loop(s), STREAM_INTERVAL, 0, stream_tick, s);
}

static void stream_line(pagi_scope *s, demo_timed *t)
{
    char now[40], line[96];
    format_now(now, sizeof now, 1);
    t->n++;
    int n = snprintf(line, sizeof line, "line %d of %d at %s\n", t->n, STREAM_LINES, now);
    pagi_event ev = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_BODY);
    ev.body = (pagi_str){line, (size_t)n};
    ev.more = t->n < STREAM_LINES;
    if (pagi_send(s, &ev, stream_sent, t) < 0)
        timed_finish(s, t, pagi_scope_error(s));
}

static void stream_tick(pagi_timer *tm, void *ud)
{
    pagi_scope *s = ud;
    demo_timed *t = pagi_scope_userdata(s);
    pagi_timer_stop(tm);
    t->timer = NULL;
    stream_line(s, t);
}

static void route_stream(pagi_scope *s)
{
    demo_timed *t = timed_new(s);
    if (!t)
        return;
    /* nosniff: browsers would otherwise hold back the first bytes to sniff them. */
    static const pagi_header h[] = {
        {{"content-type", 12}, {"text/plain; charset=utf-8", 25}},
        {{"cache-control", 13}, {"no-cache", 8}},
        {{"x-content-type-options", 22}, {"nosniff", 7}},
    };
    pagi_event start = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_START);
    start.status = 200;
    start.headers = h;
    start.header_count = sizeof h / sizeof h[0];
    if (pagi_send(s, &start, NULL, NULL) < 0) {
        timed_finish(s, t, pagi_scope_error(s));
        return;
    }
    stream_line(s, t);
}

/* ---- GET /clock (sse): `event: time` every CLOCK_INTERVAL until disconnect -- */

static void clock_tick(pagi_timer *tm, void *ud);

static void clock_send(pagi_scope *s, demo_timed *t)
{
    char now[40], id[16];
    int n = format_now(now, sizeof now, 0);
    int k = snprintf(id, sizeof id, "%d", ++t->n);
    pagi_event ev = PAGI_EVENT_INIT(PAGI_EV_SSE_SEND);
    ev.event = S("time");
    ev.id = (pagi_str){id, (size_t)k};
    ev.data = (pagi_str){now, (size_t)n};
    if (t->n == 1) {
        ev.has_retry = 1;
        ev.retry = 2000; /* a dropped clock comes back after 2 s */
    }
    /* A client that fell behind skips ticks rather than piling them up. */
    if (pagi_transport_buffered_amount(s) >= pagi_transport_high_water_mark(s))
        return;
    if (pagi_send(s, &ev, NULL, NULL) < 0)
        timed_finish(s, t, pagi_scope_error(s));
}

static void clock_tick(pagi_timer *tm, void *ud)
{
    pagi_scope *s = ud;
    demo_timed *t = pagi_scope_userdata(s);
    if (!pagi_conn_is_connected(s)) {
        timed_finish(s, t, NULL);
        return;
    }
    clock_send(s, t);
}

static void clock_bye_sent(pagi_scope *s, const char *err, void *ud)
{
    timed_finish(s, ud, err);
}

/* Draining: a last event, then the end of the stream. The receive kept for
 * the disconnect is withdrawn, so the scope may finish. */
static void clock_bye(pagi_scope *s, demo_timed *t)
{
    if (t->timer) {
        pagi_timer_stop(t->timer);
        t->timer = NULL;
    }
    pagi_receive_cancel(s); /* -1 when none was pending: nothing to withdraw */
    pagi_event ev = PAGI_EVENT_INIT(PAGI_EV_SSE_SEND);
    ev.event = S("shutdown");
    ev.data = S("server shutting down");
    if (pagi_send(s, &ev, clock_bye_sent, t) < 0)
        timed_finish(s, t, pagi_scope_error(s));
}

static void clock_on_server_drain(pagi_scope *s, void *ud)
{
    demo_timed *t = ud;
    /* Not started: the request's arrival sees the drain (clock_recv). */
    if (!t->done && t->started)
        clock_bye(s, t);
}

static void clock_recv(pagi_scope *s, const pagi_event *ev, void *ud)
{
    demo_timed *t = ud;
    if (ev->type == PAGI_EV_SSE_DISCONNECT) {
        timed_finish(s, t, NULL);
        return;
    }
    if (ev->more) { /* a body nobody needs: drain it */
        finish_on_error(s, pagi_receive(s, clock_recv, t));
        return;
    }
    if (t->started) { /* already streaming: this was the wait for the disconnect */
        finish_on_error(s, pagi_receive(s, clock_recv, t));
        return;
    }
    pagi_event start = PAGI_EVENT_INIT(PAGI_EV_SSE_START);
    start.status = 200;
    if (pagi_send(s, &start, NULL, NULL) < 0) {
        timed_finish(s, t, pagi_scope_error(s));
        return;
    }
    t->started = 1;
    clock_send(s, t);
    if (pagi_server_draining(s)) {
        clock_bye(s, t);
        return;
    }
    t->timer = pagi_timer_start(pagi_scope_loop(s), CLOCK_INTERVAL, CLOCK_INTERVAL, clock_tick, s);
    /* Keep a receive pending: it is how the disconnect arrives. */
    if (pagi_receive(s, clock_recv, t) < 0)
        timed_finish(s, t, pagi_scope_error(s));
}

static void route_clock(pagi_scope *s)
{
    demo_timed *t = timed_new(s);
    if (t && (pagi_scope_on_server_drain(s, clock_on_server_drain, t) < 0 ||
              pagi_receive(s, clock_recv, t) < 0))
        timed_finish(s, t, pagi_scope_error(s));
}

/* An sse request anywhere else: decline with a 404 (an EventSource stops retrying). */
static void sse_decline(pagi_scope *s, const pagi_event *ev, void *ud)
{
    if (ev->type == PAGI_EV_SSE_REQUEST && ev->more) {
        finish_on_error(s, pagi_receive(s, sse_decline, ud));
        return;
    }
    if (ev->type == PAGI_EV_SSE_DISCONNECT) {
        pagi_scope_finish(s, NULL);
        return;
    }
    static const pagi_header h[] = {{{"content-type", 12}, {"text/plain; charset=utf-8", 25}}};
    pagi_event start = PAGI_EVENT_INIT(PAGI_EV_SSE_HTTP_RESPONSE_START);
    start.status = 404;
    start.headers = h;
    start.header_count = 1;
    pagi_event body = PAGI_EVENT_INIT(PAGI_EV_SSE_HTTP_RESPONSE_BODY);
    body.body = S("not found\n");
    if (pagi_send(s, &start, NULL, NULL) < 0 || pagi_send(s, &body, NULL, NULL) < 0)
        pagi_scope_finish(s, pagi_scope_error(s));
    else
        pagi_scope_finish(s, NULL);
}

/* ---- /ws: the chat room ------------------------------------------------------ */

static void room_leave(demo_client *c)
{
    if (!c->joined)
        return;
    c->joined = 0;
    if (c->prev)
        c->prev->next = c->next;
    else
        c->d->clients = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
}

static void client_release(pagi_scope *s, void *data)
{
    demo_client *c = data;
    room_leave(c);
    free(c);
}

static void broadcast(demo *d, const demo_client *from, const pagi_event *in)
{
    char prefix[24];
    int plen = snprintf(prefix, sizeof prefix, "[%u] ", from->id);
    size_t len = in->is_text ? in->text.len : in->bytes.len;
    char *msg = malloc((size_t)plen + len);
    if (!msg)
        return;
    memcpy(msg, prefix, (size_t)plen);
    if (len)
        memcpy(msg + plen, in->is_text ? in->text.ptr : in->bytes.ptr, len);
    pagi_event out = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_SEND);
    out.is_text = in->is_text;
    if (in->is_text)
        out.text = (pagi_str){msg, (size_t)plen + len};
    else
        out.bytes = (pagi_str){msg, (size_t)plen + len};
    for (demo_client *c = d->clients; c; c = c->next) {
        /* A member that stopped reading misses messages instead of growing our memory. */
        if (pagi_transport_buffered_amount(c->s) >= pagi_transport_high_water_mark(c->s))
            continue;
        pagi_send(c->s, &out, NULL, NULL); /* copied at once; a failure only affects c */
    }
    free(msg);
}

static void ws_recv(pagi_scope *s, const pagi_event *ev, void *ud)
{
    demo_client *c = ud;
    switch (ev->type) {
    case PAGI_EV_WEBSOCKET_CONNECT: {
        if (pagi_server_draining(s)) { /* a handshake caught by the drain: refused (403) */
            pagi_scope_finish(s, NULL);
            return;
        }
        pagi_event acc = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_ACCEPT);
        if (pagi_send(s, &acc, NULL, NULL) < 0) {
            pagi_scope_finish(s, pagi_scope_error(s));
            return;
        }
        c->joined = 1;
        c->next = c->d->clients;
        if (c->next)
            c->next->prev = c;
        c->d->clients = c;
        break;
    }
    case PAGI_EV_WEBSOCKET_RECEIVE:
        broadcast(c->d, c, ev);
        break;
    default: /* websocket.disconnect */
        room_leave(c);
        pagi_scope_finish(s, NULL);
        return;
    }
    if (pagi_receive(s, ws_recv, c) < 0) {
        room_leave(c);
        pagi_scope_finish(s, pagi_scope_error(s));
    }
}

/* Draining: every client gets a 1001 close; its disconnect finishes it. */
static void ws_on_server_drain(pagi_scope *s, void *ud)
{
    pagi_event close = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_CLOSE);
    close.code = 1001;
    close.reason = S("server shutting down");
    pagi_send(s, &close, NULL, NULL); /* refused only if already closed */
}

static void route_ws(pagi_scope *s, demo *d)
{
    demo_client *c = calloc(1, sizeof *c);
    if (!c) {
        pagi_scope_finish(s, "demo: out of memory");
        return;
    }
    c->d = d;
    c->s = s;
    c->id = ++d->next_id;
    pagi_scope_set_userdata(s, c, client_release);
    if (pagi_scope_on_server_drain(s, ws_on_server_drain, c) < 0 || pagi_receive(s, ws_recv, c) < 0)
        pagi_scope_finish(s, pagi_scope_error(s));
}

/* A WebSocket anywhere else: refuse the handshake (403). */
static void ws_refuse(pagi_scope *s, const pagi_event *ev, void *ud)
{
    if (ev->type == PAGI_EV_WEBSOCKET_CONNECT) {
        pagi_event close = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_CLOSE);
        close.code = 1000;
        if (pagi_send(s, &close, NULL, NULL) < 0) {
            pagi_scope_finish(s, pagi_scope_error(s));
            return;
        }
    }
    pagi_scope_finish(s, NULL);
}

/* ---- lifespan ----------------------------------------------------------------- */

static void lifespan_recv(pagi_scope *s, const pagi_event *ev, void *ud)
{
    pagi_event out;
    if (ev->type == PAGI_EV_LIFESPAN_STARTUP) {
        out = PAGI_EVENT_INIT(PAGI_EV_LIFESPAN_STARTUP_COMPLETE);
        if (pagi_send(s, &out, NULL, NULL) < 0 || pagi_receive(s, lifespan_recv, ud) < 0)
            pagi_scope_finish(s, pagi_scope_error(s));
        return;
    }
    out = PAGI_EVENT_INIT(PAGI_EV_LIFESPAN_SHUTDOWN_COMPLETE);
    pagi_send(s, &out, NULL, NULL);
    pagi_scope_finish(s, NULL);
}

/* ---- the app ---------------------------------------------------------------------- */

static void *demo_create(const char *arg, pagi_loop *loop, const char **err)
{
    demo *d = calloc(1, sizeof *d);
    if (!d)
        *err = "demo: out of memory";
    return d;
}

static void demo_destroy(void *instance)
{
    free(instance);
}

static const char clock_not_sse[] = "/clock is an event stream: send Accept: text/event-stream\n";

static void demo_handle(pagi_scope *s, void *instance)
{
    demo *d = instance;
    pagi_str path = pagi_scope_path(s);
    switch (pagi_scope_type_of(s)) {
    case PAGI_SCOPE_LIFESPAN:
        finish_on_error(s, pagi_receive(s, lifespan_recv, d));
        return;
    case PAGI_SCOPE_WEBSOCKET:
        if (str_eq(path, "/ws"))
            route_ws(s, d);
        else
            finish_on_error(s, pagi_receive(s, ws_refuse, d));
        return;
    case PAGI_SCOPE_SSE:
        if (str_eq(path, "/clock"))
            route_clock(s);
        else
            finish_on_error(s, pagi_receive(s, sse_decline, d));
        return;
    case PAGI_SCOPE_HTTP:
        break;
    }
    const char *method = pagi_scope_method(s);
    int get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
    if (get && (str_eq(path, "/") || str_eq(path, "/index.html")))
        respond(s, 200, "text/html; charset=utf-8", demo_page, sizeof demo_page - 1);
    else if (get && str_eq(path, "/stream"))
        route_stream(s);
    else if (get && str_eq(path, "/clock"))
        respond(s, 406, "text/plain; charset=utf-8", clock_not_sse, sizeof clock_not_sse - 1);
    else
        not_found(s);
}

const pagi_app app_demo = {
    .abi_version = PAGI_ABI_VERSION,
    .name = "demo",
    .create = demo_create,
    .handle = demo_handle,
    .destroy = demo_destroy,
};
