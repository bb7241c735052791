/*
 * demo.c - the `demo` app, pagid's default: a page (GET /) that shows three
 * scopes working in a browser: GET /stream (a chunked line every 200 ms),
 * GET /clock (SSE, `event: time` every second) and /ws (a WebSocket chat).
 * The chat and the clock go through publish/subscribe (docs/pubsub.md), so
 * they span every worker of the pagid: a chat message reaches every chat
 * client once, the sender too, whichever worker holds it; every clock shows
 * the same tick, published once a second for all of them.
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

/* The channels: one chat room and one clock for the whole pagid. */
#define CHAT_CHANNEL "demo.chat"
#define CLOCK_CHANNEL "demo.clock"
/* The chat's subprotocol for a client that wants to know its name and
 * worker first (the page does; plain clients get chat lines only). */
#define WHOAMI "whoami"

/* When a worker's clock ticker fires, after each whole second: the first
 * worker at TICK_FIRST, each next one TICK_STEP later (up to TICK_SLOTS
 * slots), so the lowest-numbered worker with clock clients normally ticks
 * and the others hear it before their turn. */
#define TICK_FIRST 0.02
#define TICK_STEP 0.1
#define TICK_SLOTS 8
/* A tick further than this from our own clock is not ours (or the clock
 * was set): not taken as the latest second. */
#define TICK_SKEW 5

typedef struct demo_timed demo_timed;

typedef struct demo {
    pagi_loop *loop;
    int worker;       /* this worker's number, 0 without a master */
    unsigned next_id; /* chat names of this worker's clients: [worker.id] */
    /* The clock (see "the clock's ticker" below). */
    demo_timed *clocks; /* streaming /clock clients of this worker */
    pagi_timer *ticker; /* armed while clocks is not empty */
    long long heard;    /* the latest second ticked, by any worker */
} demo;

/* A /ws client. */
typedef struct demo_client {
    demo *d;
    pagi_scope *s;
    pagi_subscription *sub; /* CHAT_CHANNEL, from the accept on */
    int done;               /* pagi_scope_finish was called */
    int whoami;             /* offered the subprotocol "whoami": told its name first */
    char name[32];          /* "[2.7]": worker 2, its 7th client */
} demo_client;

/* Per-request state of /stream and /clock. */
struct demo_timed {
    demo *d;
    pagi_scope *s;
    pagi_timer *timer; /* /stream: the next line */
    int n;
    int started; /* /clock: sse.start sent */
    int done;    /* the app side finished: no timer or message may touch the scope */
    /* /clock: subscribed, linked in d->clocks, the latest second sent */
    pagi_subscription *sub;
    int joined;
    long long last;
    demo_timed *prev, *next;
};

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

/* "HH:MM:SS.mmm UTC". */
static int format_now_ms(char *out, size_t cap)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    return snprintf(out, cap, "%02d:%02d:%02d.%03d UTC", tm.tm_hour, tm.tm_min, tm.tm_sec,
                    (int)(tv.tv_usec / 1000));
}

/* "YYYY-MM-DD HH:MM:SS UTC" of a second since the epoch. */
static int format_second(char *out, size_t cap, long long sec)
{
    time_t t = (time_t)sec;
    struct tm tm;
    gmtime_r(&t, &tm);
    return snprintf(out, cap, "%04d-%02d-%02d %02d:%02d:%02d UTC", tm.tm_year + 1900, tm.tm_mon + 1,
                    tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

static double wall_now(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + tv.tv_usec / 1e6;
}

static int worker_of(const pagi_scope *s)
{
    int is_worker = 0, num = pagi_scope_worker_num(s, &is_worker);
    return is_worker && num > 0 ? num : 0;
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

/* ---- state shared by /stream and /clock -------------------------------------- */

static void clock_leave(demo_timed *t);

static void timed_release(pagi_scope *s, void *data)
{
    demo_timed *t = data;
    clock_leave(t); /* the subscription died with the scope, just before */
    if (t->timer)
        pagi_timer_stop(t->timer);
    free(t);
}

static demo_timed *timed_new(pagi_scope *s, demo *d)
{
    demo_timed *t = calloc(1, sizeof *t);
    if (!t) {
        pagi_scope_finish(s, "demo: out of memory");
        return NULL;
    }
    t->d = d;
    t->s = s;
    pagi_scope_set_userdata(s, t, timed_release);
    return t;
}

/* Finish once; the timer and the subscription die with it, so nothing runs
 * on a finished scope. */
static void timed_finish(pagi_scope *s, demo_timed *t, const char *err)
{
    if (t->done)
        return;
    t->done = 1;
    if (t->timer) {
        pagi_timer_stop(t->timer);
        t->timer = NULL;
    }
    pagi_unsubscribe(t->sub);
    t->sub = NULL;
    clock_leave(t);
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
    format_now_ms(now, sizeof now);
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

static void route_stream(pagi_scope *s, demo *d)
{
    demo_timed *t = timed_new(s, d);
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

/* ---- the clock's ticker: one tick a second for the whole pagid ------------------
 *
 * Each worker with clock clients arms a timer for just after each whole
 * second, at its slot (TICK_FIRST, then TICK_STEP later per worker number).
 * When it fires and nobody has ticked that second yet, as far as this
 * worker heard, it publishes "SECOND WORKER" on CLOCK_CHANNEL. The
 * lowest-numbered worker with clients ticks; the others hear its tick before
 * their slot comes and stay quiet, and the next one takes over by itself
 * when it has no clients left: no election, no state shared between
 * workers. If a tick comes late (a loaded machine) and a second one is
 * published for the same second, each client still shows it once (it sends
 * a second only if later than the last it sent), so a client gets one tick
 * a second however many workers there are, and every client the same.
 */

static double tick_slot(const demo *d)
{
    int k = d->worker > 1 ? d->worker - 1 : 0;
    return TICK_FIRST + TICK_STEP * (k < TICK_SLOTS ? k : TICK_SLOTS - 1);
}

static void ticker_fire(pagi_timer *tm, void *ud);

/* Arm the ticker for the slot of the second after sec. */
static void ticker_arm(demo *d, long long sec)
{
    double wait = (double)(sec + 1) + tick_slot(d) - wall_now();
    d->ticker = pagi_timer_start(d->loop, wait > 0.001 ? wait : 0.001, 0, ticker_fire, d);
}

/* A second heard (or published): is it newer than the latest? A tick from
 * far behind is newer too, since the clock was set back. */
static int tick_is_new(long long sec, long long latest)
{
    return sec > latest || latest - sec > TICK_SKEW;
}

static void ticker_fire(pagi_timer *tm, void *ud)
{
    demo *d = ud;
    pagi_timer_stop(tm);
    d->ticker = NULL;
    if (!d->clocks)
        return;
    /* The second whose slot this is: the timer may fire a little early (a
     * wall clock against the loop's monotonic one), or late. The time is
     * positive, so the cast rounds down. */
    long long sec = (long long)(wall_now() - tick_slot(d) + 0.05);
    if (tick_is_new(sec, d->heard)) {
        char msg[48];
        int n = snprintf(msg, sizeof msg, "%lld %d", sec, d->worker);
        d->heard = sec;
        /* Any clock client's scope serves: the message is the worker's. A
         * failure (out of memory) costs this tick only. */
        pagi_publish(d->clocks->s, CLOCK_CHANNEL, msg, (size_t)n);
    }
    ticker_arm(d, sec);
}

/* t streams the clock: linked in, the ticker runs. */
static void clock_join(demo_timed *t)
{
    demo *d = t->d;
    t->joined = 1;
    t->prev = NULL;
    t->next = d->clocks;
    if (d->clocks)
        d->clocks->prev = t;
    d->clocks = t;
    if (!d->ticker)
        ticker_arm(d, (long long)(wall_now() - tick_slot(d)));
}

static void clock_leave(demo_timed *t)
{
    if (!t->joined)
        return;
    demo *d = t->d;
    t->joined = 0;
    if (t->prev)
        t->prev->next = t->next;
    else
        d->clocks = t->next;
    if (t->next)
        t->next->prev = t->prev;
    t->prev = t->next = NULL;
    if (!d->clocks && d->ticker) {
        pagi_timer_stop(d->ticker);
        d->ticker = NULL;
    }
}

/* "SECOND WORKER" -> SECOND, if it is one and near our own clock; else -1. */
static long long parse_tick(const void *data, size_t len)
{
    char text[48];
    if (len == 0 || len >= sizeof text)
        return -1;
    memcpy(text, data, len);
    text[len] = '\0';
    char *end;
    long long sec = strtoll(text, &end, 10);
    if (end == text || (*end != ' ' && *end != '\0') || sec <= 0)
        return -1;
    double off = (double)sec - wall_now();
    return off > TICK_SKEW || off < -TICK_SKEW ? -1 : sec;
}

/* ---- GET /clock (sse): `event: time` for each tick until disconnect ------------ */

static void clock_send(pagi_scope *s, demo_timed *t, long long sec)
{
    char now[40], id[16];
    int n = format_second(now, sizeof now, sec);
    int k = snprintf(id, sizeof id, "%d", t->n + 1);
    pagi_event ev = PAGI_EVENT_INIT(PAGI_EV_SSE_SEND);
    ev.event = S("time");
    ev.id = (pagi_str){id, (size_t)k};
    ev.data = (pagi_str){now, (size_t)n};
    if (t->n == 0) {
        ev.has_retry = 1;
        ev.retry = 2000; /* a dropped clock comes back after 2 s */
    }
    /* A client that fell behind skips ticks rather than piling them up. */
    if (pagi_transport_buffered_amount(s) >= pagi_transport_high_water_mark(s)) {
        pagi_subscription_count_dropped(t->sub, 1);
        return;
    }
    t->n++;
    if (pagi_send(s, &ev, NULL, NULL) < 0)
        timed_finish(s, t, pagi_scope_error(s));
}

static void clock_on_tick(pagi_subscription *sub, pagi_str channel, const void *data, size_t len,
                          void *ud)
{
    (void)sub;
    (void)channel;
    demo_timed *t = ud;
    long long sec = parse_tick(data, len);
    if (t->done || sec < 0)
        return;
    if (tick_is_new(sec, t->d->heard))
        t->d->heard = sec;
    if (!tick_is_new(sec, t->last)) /* this second again, from a late ticker */
        return;
    t->last = sec;
    if (pagi_conn_is_connected(t->s))
        clock_send(t->s, t, sec);
}

static void clock_bye_sent(pagi_scope *s, const char *err, void *ud)
{
    timed_finish(s, ud, err);
}

/* Draining: a last event, then the end of the stream. The receive kept for
 * the disconnect is withdrawn, so the scope may finish. */
static void clock_bye(pagi_scope *s, demo_timed *t)
{
    pagi_unsubscribe(t->sub);
    t->sub = NULL;
    clock_leave(t);
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
    /* A body nobody needs (drained), or, streaming, the wait for the disconnect. */
    if (ev->more || t->started) {
        if (pagi_receive(s, clock_recv, t) < 0)
            timed_finish(s, t, pagi_scope_error(s));
        return;
    }
    pagi_event start = PAGI_EVENT_INIT(PAGI_EV_SSE_START);
    start.status = 200;
    if (pagi_send(s, &start, NULL, NULL) < 0) {
        timed_finish(s, t, pagi_scope_error(s));
        return;
    }
    t->started = 1;
    if (pagi_server_draining(s)) {
        clock_bye(s, t);
        return;
    }
    /* The first tick comes with the next second, from whichever worker ticks. */
    t->d->worker = worker_of(s);
    t->sub = pagi_subscribe(s, CLOCK_CHANNEL, clock_on_tick, t);
    if (!t->sub) {
        timed_finish(s, t, pagi_scope_error(s));
        return;
    }
    clock_join(t);
    /* Keep a receive pending: it is how the disconnect arrives. */
    if (pagi_receive(s, clock_recv, t) < 0)
        timed_finish(s, t, pagi_scope_error(s));
}

static void route_clock(pagi_scope *s, demo *d)
{
    demo_timed *t = timed_new(s, d);
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

/* ---- /ws: the chat room, CHAT_CHANNEL ------------------------------------------ *
 *
 * Each client subscribes to the channel when accepted; a message it sends
 * is published there as one byte ('t' text, 'b' binary) then "[name] "
 * and the message, and every subscriber in every worker sends it to its
 * client: each client is in one worker, so each gets it once. */

static void client_release(pagi_scope *s, void *data)
{
    (void)s;
    free(data); /* the subscription died with the scope, just before */
}

static void client_finish(demo_client *c, const char *err)
{
    if (c->done)
        return;
    c->done = 1;
    pagi_unsubscribe(c->sub);
    c->sub = NULL;
    pagi_scope_finish(c->s, err);
}

static void chat_on_message(pagi_subscription *sub, pagi_str channel, const void *data, size_t len,
                            void *ud)
{
    (void)channel;
    demo_client *c = ud;
    const char *p = data;
    if (c->done || len == 0 || (p[0] != 't' && p[0] != 'b') || !pagi_conn_is_connected(c->s))
        return;
    /* A member that stopped reading misses messages instead of growing our memory. */
    if (pagi_transport_buffered_amount(c->s) >= pagi_transport_high_water_mark(c->s)) {
        pagi_subscription_count_dropped(sub, 1);
        return;
    }
    pagi_event out = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_SEND);
    out.is_text = p[0] == 't';
    if (out.is_text)
        out.text = (pagi_str){p + 1, len - 1};
    else
        out.bytes = (pagi_str){p + 1, len - 1};
    pagi_send(c->s, &out, NULL, NULL); /* copied at once; a failure only affects c */
}

static void chat_publish(demo_client *c, const pagi_event *in)
{
    char prefix[48];
    int plen = snprintf(prefix, sizeof prefix, "%c%s ", in->is_text ? 't' : 'b', c->name);
    pagi_str body = in->is_text ? in->text : in->bytes;
    if (body.len > PAGI_MESSAGE_MAX - (size_t)plen)
        return; /* too long for the channel: not relayed */
    char *msg = malloc((size_t)plen + body.len);
    if (!msg)
        return;
    memcpy(msg, prefix, (size_t)plen);
    if (body.len)
        memcpy(msg + plen, body.ptr, body.len);
    pagi_publish(c->s, CHAT_CHANNEL, msg, (size_t)plen + body.len); /* -1: out of memory */
    free(msg);
}

/* Accepted: joins the room, then (subprotocol whoami) is told its name and worker. */
static int chat_join(demo_client *c)
{
    pagi_event acc = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_ACCEPT);
    if (c->whoami)
        acc.subprotocol = S(WHOAMI);
    if (pagi_send(c->s, &acc, NULL, NULL) < 0)
        return -1;
    c->sub = pagi_subscribe(c->s, CHAT_CHANNEL, chat_on_message, c);
    if (!c->sub)
        return -1;
    if (!c->whoami)
        return 0;
    char hello[80];
    int worker = c->d->worker, n;
    if (worker)
        n = snprintf(hello, sizeof hello, "you are %s on worker %d", c->name, worker);
    else
        n = snprintf(hello, sizeof hello, "you are %s", c->name);
    pagi_event out = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_SEND);
    out.is_text = 1;
    out.text = (pagi_str){hello, (size_t)n};
    return pagi_send(c->s, &out, NULL, NULL);
}

static void ws_recv(pagi_scope *s, const pagi_event *ev, void *ud)
{
    demo_client *c = ud;
    switch (ev->type) {
    case PAGI_EV_WEBSOCKET_CONNECT:
        if (pagi_server_draining(s)) { /* a handshake caught by the drain: refused (403) */
            client_finish(c, NULL);
            return;
        }
        if (chat_join(c) < 0) {
            client_finish(c, pagi_scope_error(s));
            return;
        }
        break;
    case PAGI_EV_WEBSOCKET_RECEIVE:
        if (c->sub) /* not once the drain closed it */
            chat_publish(c, ev);
        break;
    default: /* websocket.disconnect */
        client_finish(c, NULL);
        return;
    }
    if (pagi_receive(s, ws_recv, c) < 0)
        client_finish(c, pagi_scope_error(s));
}

/* Draining: every client leaves the room and gets a 1001 close; its
 * disconnect finishes it. */
static void ws_on_server_drain(pagi_scope *s, void *ud)
{
    demo_client *c = ud;
    pagi_unsubscribe(c->sub);
    c->sub = NULL;
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
    d->worker = worker_of(s);
    unsigned id = ++d->next_id;
    if (d->worker)
        snprintf(c->name, sizeof c->name, "[%d.%u]", d->worker, id);
    else
        snprintf(c->name, sizeof c->name, "[%u]", id);
    for (size_t i = 0; i < pagi_scope_subprotocol_count(s); i++)
        if (str_eq(pagi_scope_subprotocol(s, i), WHOAMI))
            c->whoami = 1;
    pagi_scope_set_userdata(s, c, client_release);
    if (pagi_scope_on_server_drain(s, ws_on_server_drain, c) < 0 || pagi_receive(s, ws_recv, c) < 0)
        client_finish(c, pagi_scope_error(s));
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
    (void)arg;
    demo *d = calloc(1, sizeof *d);
    if (!d)
        *err = "demo: out of memory";
    else
        d->loop = loop;
    return d;
}

static void demo_destroy(void *instance)
{
    demo *d = instance;
    if (d && d->ticker) /* every clock client is gone by now; this is a safety net */
        pagi_timer_stop(d->ticker);
    free(d);
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
            route_clock(s, d);
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
        route_stream(s, d);
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
