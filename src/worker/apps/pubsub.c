/*
 * pubsub.c - the `pubsub` built-in app, a publish/subscribe endpoint for
 * tests, demos and operators with curl. On /CHANNEL:
 *  - a websocket is accepted, sent the text "worker N" (which worker holds
 *    it), then every message published on CHANNEL (by any worker); each
 *    text message it receives is published on CHANNEL;
 *  - an event stream (GET, Accept: text/event-stream) gets `event: hello`
 *    with data "worker N", then each message on CHANNEL as one unnamed
 *    event (its lines as data: lines);
 *  - POST publishes its body on CHANNEL and answers 202.
 * When the worker drains, the websocket is closed with 1001 and the event
 * stream ends, unless the query is stay=1 (they then serve until the
 * drain's deadline or their client goes). A client that does not read has
 * messages dropped once its output holds more than MAX_BUFFERED (counted in
 * the worker's pubsub_dropped), so it never grows the worker without bound.
 * With ?policy=conflate|drop|disconnect a websocket or event stream joins a
 * broadcast group fed from CHANNEL instead (pubsub_group.c), whose policy
 * handles a slow client.
 * A request whose Origin is another site's (not its own scheme://Host, nor
 * in pubsub.allowed_origins) is refused with 403 before any of that: a
 * websocket and a text/plain POST need no CORS preflight, so without it any
 * page a visitor opens could read and publish on every channel.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin.h"
#include "common/origin.h"
#include "pubsub_group.h"

/* Not the transport's high-water mark (64 KiB): one loop round may deliver
 * a burst larger than that to a client that reads perfectly well, before
 * the output is flushed at the end of the round. */
#define MAX_BUFFERED (1u << 20)

/* The app instance: the group mode's table and the origins it allows. */
typedef struct ps_app {
    ps_groups *groups;
    char **origins;
    size_t n_origins;
    unsigned long refused; /* requests refused for their origin, for the debug log */
} ps_app;

typedef struct ps_client {
    pagi_subscription *sub;
    int stay;            /* ?stay=1: keep serving while the worker drains (tests of a reload) */
    int started;         /* sse: the stream is open; the pending receive waits for the disconnect */
    int done;            /* pagi_scope_finish was called */
    char *body;          /* POST: the message so far */
    const char *refusal; /* refused (ps_refuse): the answer's text */
    int refusal_status;
    size_t len, cap;
    char channel[PAGI_CHANNEL_MAX + 1];
} ps_client;

static void ps_release(pagi_scope *s, void *data)
{
    (void)s;
    ps_client *c = data;
    free(c->body);
    free(c); /* the subscription died with the scope, just before */
}

/* The app is done with s: its subscription ends first, so no message
 * callback touches a finished scope. */
static void ps_finish(pagi_scope *s, ps_client *c, const char *err)
{
    if (c->done)
        return;
    c->done = 1;
    pagi_unsubscribe(c->sub);
    c->sub = NULL;
    pagi_scope_finish(s, err);
}

static int hello_text(pagi_scope *s, char *out, size_t cap)
{
    int is_worker = 0, num = pagi_scope_worker_num(s, &is_worker);
    return snprintf(out, cap, "worker %d", is_worker ? num : 0);
}

/* A reader whose output is not draining loses the message (counted). */
static int too_far_behind(pagi_scope *s, pagi_subscription *sub)
{
    if (pagi_transport_buffered_amount(s) <= MAX_BUFFERED)
        return 0;
    pagi_subscription_count_dropped(sub, 1);
    return 1;
}

/* ---- websocket ---------------------------------------------------------------- */

static void ps_ws_on_message(pagi_subscription *sub, pagi_str channel, const void *data, size_t len,
                             void *ud)
{
    (void)channel;
    pagi_scope *s = ud;
    if (!pagi_conn_is_connected(s) || too_far_behind(s, sub))
        return;
    pagi_event out = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_SEND);
    out.is_text = 1;
    out.text = (pagi_str){data, len};
    pagi_send(s, &out, NULL, NULL); /* refused only once the client is gone */
}

static void ps_ws_on_event(pagi_scope *s, const pagi_event *ev, void *ud)
{
    ps_client *c = ud;
    pagi_event out;
    switch (ev->type) {
    case PAGI_EV_WEBSOCKET_CONNECT: {
        if (pagi_server_draining(s) && !c->stay) {
            ps_finish(s, c, NULL);
            return;
        }
        out = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_ACCEPT);
        if (pagi_send(s, &out, NULL, NULL) < 0)
            break;
        c->sub = pagi_subscribe(s, c->channel, ps_ws_on_message, s);
        if (!c->sub)
            break;
        char hello[32];
        int n = hello_text(s, hello, sizeof hello);
        out = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_SEND);
        out.is_text = 1;
        out.text = (pagi_str){hello, (size_t)n};
        if (pagi_send(s, &out, NULL, NULL) < 0)
            break;
        if (pagi_receive(s, ps_ws_on_event, c) < 0)
            break;
        return;
    }
    case PAGI_EV_WEBSOCKET_RECEIVE:
        if (ev->is_text && (c->stay || !pagi_server_draining(s)) &&
            pagi_publish(s, c->channel, ev->text.ptr, ev->text.len) < 0)
            break;
        if (pagi_receive(s, ps_ws_on_event, c) < 0)
            break;
        return;
    default: /* websocket.disconnect */
        ps_finish(s, c, NULL);
        return;
    }
    ps_finish(s, c, pagi_scope_error(s));
}

static void ps_ws_on_server_drain(pagi_scope *s, void *ud)
{
    (void)ud;
    pagi_event close = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_CLOSE);
    close.code = 1001;
    close.reason = (pagi_str){"server shutting down", 20};
    pagi_send(s, &close, NULL, NULL);
}

/* ---- sse ---------------------------------------------------------------------- */

static void ps_sse_on_message(pagi_subscription *sub, pagi_str channel, const void *data,
                              size_t len, void *ud)
{
    (void)channel;
    pagi_scope *s = ud;
    if (!pagi_conn_is_connected(s) || too_far_behind(s, sub))
        return;
    pagi_event out = PAGI_EVENT_INIT(PAGI_EV_SSE_SEND);
    out.data = (pagi_str){data, len};
    pagi_send(s, &out, NULL, NULL); /* refused only once the client is gone */
}

/* Before the stream starts: an answer that is not a stream. */
static void ps_sse_decline(pagi_scope *s, ps_client *c, int status, const char *text)
{
    static const pagi_header h[] = {{{"content-type", 12}, {"text/plain; charset=utf-8", 25}}};
    pagi_event start = PAGI_EVENT_INIT(PAGI_EV_SSE_HTTP_RESPONSE_START);
    start.status = status;
    start.headers = h;
    start.header_count = 1;
    pagi_event body = PAGI_EVENT_INIT(PAGI_EV_SSE_HTTP_RESPONSE_BODY);
    body.body = (pagi_str){text, strlen(text)};
    if (pagi_send(s, &start, NULL, NULL) < 0 || pagi_send(s, &body, NULL, NULL) < 0)
        ps_finish(s, c, pagi_scope_error(s));
    else
        ps_finish(s, c, NULL);
}

static void ps_sse_on_event(pagi_scope *s, const pagi_event *ev, void *ud)
{
    ps_client *c = ud;
    if (ev->type == PAGI_EV_SSE_DISCONNECT) {
        ps_finish(s, c, NULL);
        return;
    }
    if (ev->more || c->started) { /* a body nobody needs, or the wait for the disconnect */
        if (pagi_receive(s, ps_sse_on_event, c) < 0)
            ps_finish(s, c, pagi_scope_error(s));
        return;
    }
    if (pagi_server_draining(s) && !c->stay) {
        ps_sse_decline(s, c, 503, "server shutting down\n");
        return;
    }
    pagi_event start = PAGI_EVENT_INIT(PAGI_EV_SSE_START);
    start.status = 200;
    if (pagi_send(s, &start, NULL, NULL) < 0) {
        ps_finish(s, c, pagi_scope_error(s));
        return;
    }
    c->started = 1;
    char hello[32];
    int n = hello_text(s, hello, sizeof hello);
    pagi_event out = PAGI_EVENT_INIT(PAGI_EV_SSE_SEND);
    out.event = (pagi_str){"hello", 5};
    out.data = (pagi_str){hello, (size_t)n};
    /* Subscribed before the hello goes out: once a client saw it, its worker
     * delivers, and the SUB towards the master has left before it. */
    c->sub = pagi_subscribe(s, c->channel, ps_sse_on_message, s);
    if (!c->sub || pagi_send(s, &out, NULL, NULL) < 0 || pagi_receive(s, ps_sse_on_event, c) < 0)
        ps_finish(s, c, pagi_scope_error(s));
}

/* Draining: the stream ends (the receive kept for the disconnect is withdrawn). */
static void ps_sse_on_server_drain(pagi_scope *s, void *ud)
{
    ps_client *c = ud;
    if (!c->started || c->done) /* not started: the request's arrival sees the drain */
        return;
    pagi_receive_cancel(s);
    ps_finish(s, c, NULL);
}

/* ---- http: POST publishes ------------------------------------------------------ */

static void ps_respond(pagi_scope *s, ps_client *c, int status, const char *text,
                       const pagi_header *extra)
{
    size_t len = strlen(text);
    char clen[24];
    int n = snprintf(clen, sizeof clen, "%zu", len);
    pagi_header h[3] = {
        {{"content-type", 12}, {"text/plain; charset=utf-8", 25}},
        {{"content-length", 14}, {clen, (size_t)n}},
    };
    size_t count = 2;
    if (extra)
        h[count++] = *extra;
    pagi_event start = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_START);
    start.status = status;
    start.headers = h;
    start.header_count = count;
    pagi_event body = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_BODY);
    body.body = (pagi_str){text, len};
    if (pagi_send(s, &start, NULL, NULL) < 0 || pagi_send(s, &body, NULL, NULL) < 0)
        ps_finish(s, c, pagi_scope_error(s));
    else
        ps_finish(s, c, NULL);
}

static int ps_append(ps_client *c, pagi_str chunk)
{
    if (chunk.len == 0)
        return 0;
    if (c->cap - c->len < chunk.len) {
        size_t ncap = c->cap ? c->cap : 4096;
        while (ncap - c->len < chunk.len)
            ncap *= 2;
        char *nb = realloc(c->body, ncap);
        if (!nb)
            return -1;
        c->body = nb;
        c->cap = ncap;
    }
    memcpy(c->body + c->len, chunk.ptr, chunk.len);
    c->len += chunk.len;
    return 0;
}

static void ps_post_on_event(pagi_scope *s, const pagi_event *ev, void *ud)
{
    ps_client *c = ud;
    if (ev->type == PAGI_EV_HTTP_DISCONNECT) {
        ps_finish(s, c, NULL);
        return;
    }
    if (c->len + ev->body.len > PAGI_MESSAGE_MAX) {
        ps_respond(s, c, 413, "a message is at most 1048576 bytes\n", NULL);
        return;
    }
    if (ps_append(c, ev->body) < 0) {
        ps_finish(s, c, "pubsub: out of memory");
        return;
    }
    if (ev->more) {
        if (pagi_receive(s, ps_post_on_event, c) < 0)
            ps_finish(s, c, pagi_scope_error(s));
        return;
    }
    if (pagi_publish(s, c->channel, c->body, c->len) < 0) {
        ps_finish(s, c, pagi_scope_error(s));
        return;
    }
    ps_respond(s, c, 202, "", NULL);
}

static const char not_a_stream[] =
    "GET /CHANNEL is an event stream: send Accept: text/event-stream"
    " (or open a websocket); POST /CHANNEL publishes the request body\n";

static void ps_http(pagi_scope *s, ps_client *c)
{
    static const pagi_header allow = {{"allow", 5}, {"GET, POST", 9}};
    const char *method = pagi_scope_method(s);
    if (!strcmp(method, "POST")) {
        if (pagi_receive(s, ps_post_on_event, c) < 0)
            ps_finish(s, c, pagi_scope_error(s));
    } else if (!strcmp(method, "GET") || !strcmp(method, "HEAD"))
        ps_respond(s, c, 406, not_a_stream, NULL);
    else
        ps_respond(s, c, 405, not_a_stream, &allow);
}

/* ---- the app ---------------------------------------------------------------------- */

static const char bad_channel[] = "the path names a channel of 1 to 255 bytes\n";
static const char bad_origin[] =
    "pubsub: requests from this origin are refused: a page of another site may not use "
    "this endpoint (allow it with pubsub.allowed_origins in pagid.yaml; a site served "
    "under a DNS name lists its own origin there too)\n";

/* A websocket refused with a status and a body (the websocket.http.response
 * extension), or with a plain 403 where the server does not offer it. */
static void ps_ws_deny(pagi_scope *s, ps_client *c, int status, const char *text)
{
    static const pagi_header h[] = {{{"content-type", 12}, {"text/plain; charset=utf-8", 25}}};
    pagi_event start = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_HTTP_RESPONSE_START);
    start.status = status;
    start.headers = h;
    start.header_count = 1;
    pagi_event body = PAGI_EVENT_INIT(PAGI_EV_WEBSOCKET_HTTP_RESPONSE_BODY);
    body.body = (pagi_str){text, strlen(text)};
    if (pagi_send(s, &start, NULL, NULL) == 0)
        pagi_send(s, &body, NULL, NULL);
    ps_finish(s, c, NULL); /* nothing accepted: the server answers 403 */
}

/* A request refused (bad channel: 400, bad origin: 403) in the way of its
 * scope's type, once its first event came. */
static void ps_refuse(pagi_scope *s, const pagi_event *ev, void *ud)
{
    ps_client *c = ud;
    if (ev->type == PAGI_EV_SSE_REQUEST && ev->more) {
        if (pagi_receive(s, ps_refuse, c) < 0)
            ps_finish(s, c, pagi_scope_error(s));
        return;
    }
    if (ev->type == PAGI_EV_SSE_REQUEST)
        ps_sse_decline(s, c, c->refusal_status, c->refusal);
    else if (ev->type == PAGI_EV_WEBSOCKET_CONNECT && c->refusal_status == 403)
        ps_ws_deny(s, c, 403, c->refusal);
    else /* websocket.connect (refused: 403), or a disconnect */
        ps_finish(s, c, NULL);
}

/* The request's Origin is its own site's or an allowed one (none: not a
 * browser, allowed). 1 when it may go on. */
static int ps_origin_ok(ps_app *app, pagi_scope *s)
{
    pagi_str origin, host = {"", 0};
    if (!pagi_scope_header(s, "origin", &origin))
        return 1;
    pagi_scope_header(s, "host", &host);
    if (origin_allowed(origin.ptr, origin.len, pagi_scope_scheme(s), host.ptr, host.len,
                       app->origins, app->n_origins))
        return 1;
    app->refused++;
    pagi_log(pagi_scope_loop(s), PAGI_LOG_DEBUG,
             "pubsub: refused a %s request from origin '%.*s' for host '%.*s' (%lu so far)",
             pagi_scope_type_name(s), (int)(origin.len < 200 ? origin.len : 200), origin.ptr,
             (int)(host.len < 200 ? host.len : 200), host.ptr, app->refused);
    return 0;
}

static void ps_handle(pagi_scope *s, void *instance)
{
    ps_app *app = instance;
    pagi_scope_type type = pagi_scope_type_of(s);
    if (type == PAGI_SCOPE_LIFESPAN) {
        pagi_scope_finish(s, NULL); /* declined: the worker starts without it */
        return;
    }
    if (!ps_origin_ok(app, s)) {
        ps_client *c = calloc(1, sizeof *c);
        if (!c) {
            pagi_scope_finish(s, "pubsub: out of memory");
            return;
        }
        pagi_scope_set_userdata(s, c, ps_release);
        c->refusal = bad_origin;
        c->refusal_status = 403;
        if (type == PAGI_SCOPE_HTTP)
            ps_respond(s, c, 403, bad_origin, NULL);
        else if (pagi_receive(s, ps_refuse, c) < 0)
            ps_finish(s, c, pagi_scope_error(s));
        return;
    }
    pagi_str q = pagi_scope_query_string(s);
    int policy = ps_group_policy(q);
    if (policy < 0) {
        pagi_scope_finish(s, "pubsub: the policy is conflate, drop or disconnect");
        return;
    }
    if (policy > 0) {
        pagi_str path = pagi_scope_path(s);
        while (path.len && path.ptr[0] == '/') {
            path.ptr++;
            path.len--;
        }
        if (path.len == 0 || path.len > PAGI_CHANNEL_MAX || memchr(path.ptr, 0, path.len)) {
            pagi_scope_finish(s, "pubsub: the path names a channel of 1 to 255 bytes");
            return;
        }
        char channel[PAGI_CHANNEL_MAX + 1];
        memcpy(channel, path.ptr, path.len);
        channel[path.len] = 0;
        ps_group_handle(app->groups, s, channel, (pagi_group_policy)policy);
        return;
    }
    ps_client *c = calloc(1, sizeof *c);
    if (!c) {
        pagi_scope_finish(s, "pubsub: out of memory");
        return;
    }
    pagi_scope_set_userdata(s, c, ps_release);
    pagi_str path = pagi_scope_path(s);
    while (path.len && path.ptr[0] == '/') {
        path.ptr++;
        path.len--;
    }
    if (path.len == 0 || path.len > PAGI_CHANNEL_MAX || memchr(path.ptr, 0, path.len)) {
        c->refusal = bad_channel;
        c->refusal_status = 400;
        if (type == PAGI_SCOPE_HTTP)
            ps_respond(s, c, 400, bad_channel, NULL);
        else if (pagi_receive(s, ps_refuse, c) < 0)
            ps_finish(s, c, pagi_scope_error(s));
        return;
    }
    memcpy(c->channel, path.ptr, path.len);
    c->stay = q.len == 6 && memcmp(q.ptr, "stay=1", 6) == 0;
    int rc = 0;
    switch (type) {
    case PAGI_SCOPE_WEBSOCKET:
        if (!c->stay)
            rc = pagi_scope_on_server_drain(s, ps_ws_on_server_drain, NULL);
        if (rc == 0)
            rc = pagi_receive(s, ps_ws_on_event, c);
        break;
    case PAGI_SCOPE_SSE:
        if (!c->stay)
            rc = pagi_scope_on_server_drain(s, ps_sse_on_server_drain, c);
        if (rc == 0)
            rc = pagi_receive(s, ps_sse_on_event, c);
        break;
    default:
        ps_http(s, c);
        return;
    }
    if (rc < 0)
        ps_finish(s, c, pagi_scope_error(s));
}

static void ps_destroy(void *instance)
{
    ps_app *app = instance;
    if (!app)
        return;
    ps_groups_free(app->groups);
    for (size_t i = 0; i < app->n_origins; i++)
        free(app->origins[i]);
    free(app->origins);
    free(app);
}

void *pubsub_app_create(char *const *origins, size_t n, pagi_loop *loop, const char **err)
{
    (void)loop;
    ps_app *app = calloc(1, sizeof *app);
    if (app && (app->groups = ps_groups_new()) != NULL &&
        (n == 0 || (app->origins = calloc(n, sizeof *app->origins)) != NULL)) {
        for (; app->n_origins < n; app->n_origins++)
            if (!(app->origins[app->n_origins] = strdup(origins[app->n_origins])))
                break;
        if (app->n_origins == n)
            return app;
    }
    ps_destroy(app);
    *err = "pubsub: out of memory";
    return NULL;
}

/* Created without a config (the mount table passes pubsub.allowed_origins
 * through pubsub_app_create): only each request's own origin is allowed. */
static void *ps_create(const char *arg, pagi_loop *loop, const char **err)
{
    (void)arg;
    return pubsub_app_create(NULL, 0, loop, err);
}

const pagi_app app_pubsub = {
    .abi_version = PAGI_ABI_VERSION,
    .name = "pubsub",
    .create = ps_create,
    .handle = ps_handle,
    .destroy = ps_destroy,
};
