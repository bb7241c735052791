/*
 * counter.c - a small but complete PAGI application module for pagid, built
 * only against the installed <pagi/pagi.h> (see README.md and pagi(3)).
 * It counts requests per worker and reports how many body bytes it read.
 *
 * Shape of the module:
 *   lifespan  startup: put a pointer to the worker's shared counter into the
 *             lifespan state (pagi_state_set), reply lifespan.startup.complete;
 *             shutdown: log the total, reply lifespan.shutdown.complete.
 *   http      read the whole request body (one pagi_receive per event until
 *             more == 0), answer 200 text/plain "request #N, M body bytes\n"
 *             with a content-length, log the outcome from on_complete /
 *             on_disconnect (exactly one of the two runs).
 *   other     declined with pagi_scope_finish(s, "unsupported scope type").
 *
 * Every step continues from a callback: the server never calls back inside
 * the call that caused the callback, so this chain uses constant stack.
 */
#include <pagi/pagi.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The state key under which the lifespan publishes the shared counter. */
#define COUNTER_KEY "counter.hits"

/* Log levels of pagi_log(). */
enum { LOG_ERROR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 };

/* One per worker: created by create(), freed by destroy(). */
typedef struct counter_app {
    uint64_t hits;   /* shared with every request through the lifespan state */
    pagi_loop *loop; /* for logging */
} counter_app;

/* One per http scope: freed by the release callback, never before. */
typedef struct counter_req {
    counter_app *app;
    uint64_t *hits;     /* from the state copy, else &app->hits */
    uint64_t number;    /* this request's number, set when answering */
    size_t body_bytes;  /* request body bytes read so far */
    char body[96];      /* response body */
    size_t body_len;
    char length[24];    /* content-length value */
} counter_req;

/* ------------------------------------------------------------------ */
/* lifespan                                                            */
/* ------------------------------------------------------------------ */

static void lifespan_event(pagi_scope *s, const pagi_event *ev, void *ud);

/* Finish the lifespan scope once the last lifespan send completed. */
static void lifespan_done(pagi_scope *s, const char *err, void *ud)
{
    (void)ud;
    pagi_scope_finish(s, err);
}

/* After startup.complete went out: wait for lifespan.shutdown. */
static void lifespan_started(pagi_scope *s, const char *err, void *ud)
{
    if (err != NULL) {
        pagi_scope_finish(s, err);
        return;
    }
    if (pagi_receive(s, lifespan_event, ud) != 0)
        pagi_scope_finish(s, pagi_scope_error(s));
}

static void lifespan_reply(pagi_scope *s, pagi_event *reply, pagi_send_cb cb,
                           void *ud)
{
    if (pagi_send(s, reply, cb, ud) != 0)
        pagi_scope_finish(s, pagi_scope_error(s));
}

static void lifespan_event(pagi_scope *s, const pagi_event *ev, void *ud)
{
    counter_app *app = ud;

    switch (ev->type) {
    case PAGI_EV_LIFESPAN_STARTUP: {
        if (pagi_state_set(s, COUNTER_KEY, &app->hits) != 0) {
            static const char msg[] = "counter: cannot store state";
            pagi_event failed = PAGI_EVENT_INIT(PAGI_EV_LIFESPAN_STARTUP_FAILED);
            failed.message = (pagi_str){msg, sizeof msg - 1};
            lifespan_reply(s, &failed, lifespan_done, app);
            return;
        }
        int is_worker = 0;
        int num = pagi_scope_worker_num(s, &is_worker);
        pagi_log(app->loop, LOG_INFO, "counter: started (worker %d%s)", num,
                 is_worker ? "" : ", single process");
        pagi_event done = PAGI_EVENT_INIT(PAGI_EV_LIFESPAN_STARTUP_COMPLETE);
        lifespan_reply(s, &done, lifespan_started, app);
        return;
    }
    case PAGI_EV_LIFESPAN_SHUTDOWN: {
        pagi_log(app->loop, LOG_INFO, "counter: shutting down after %" PRIu64
                 " requests", app->hits);
        pagi_event done = PAGI_EVENT_INIT(PAGI_EV_LIFESPAN_SHUTDOWN_COMPLETE);
        lifespan_reply(s, &done, lifespan_done, app);
        return;
    }
    default:
        /* Not ours to handle: keep waiting for the next lifespan event. */
        if (pagi_receive(s, lifespan_event, app) != 0)
            pagi_scope_finish(s, pagi_scope_error(s));
        return;
    }
}

/* ------------------------------------------------------------------ */
/* http                                                                */
/* ------------------------------------------------------------------ */

static void http_event(pagi_scope *s, const pagi_event *ev, void *ud);

static void req_release(pagi_scope *s, void *data)
{
    (void)s;
    free(data);
}

static void req_complete(pagi_scope *s, void *ud)
{
    counter_req *req = ud;
    pagi_log(pagi_scope_loop(s), LOG_DEBUG,
             "counter: request #%" PRIu64 " delivered (%zu body bytes)",
             req->number, req->body_bytes);
}

static void req_disconnect(pagi_scope *s, const char *reason, void *ud)
{
    counter_req *req = ud;
    pagi_log(pagi_scope_loop(s), LOG_INFO,
             "counter: request %s interrupted: %s (after %zu body bytes)",
             pagi_scope_method(s), reason, req->body_bytes);
}

/* The response body went out (or the client left): the handler is done. */
static void body_sent(pagi_scope *s, const char *err, void *ud)
{
    (void)ud;
    pagi_scope_finish(s, err);
}

/* The response head was accepted: send the body, all of it at once. */
static void start_sent(pagi_scope *s, const char *err, void *ud)
{
    counter_req *req = ud;

    if (err != NULL) {
        pagi_scope_finish(s, err);
        return;
    }
    pagi_event body = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_BODY);
    body.body = (pagi_str){req->body, req->body_len};
    body.more = 0;
    if (pagi_send(s, &body, body_sent, req) != 0)
        pagi_scope_finish(s, pagi_scope_error(s));
}

static void respond(pagi_scope *s, counter_req *req)
{
    req->number = ++*req->hits;
    int n = snprintf(req->body, sizeof req->body,
                     "request #%" PRIu64 ", %zu body bytes\n", req->number,
                     req->body_bytes);
    req->body_len = n < 0 ? 0 : (size_t)n;
    snprintf(req->length, sizeof req->length, "%zu", req->body_len);

    const pagi_header headers[] = {
        {{"content-type", 12}, {"text/plain", 10}},
        {{"content-length", 14}, {req->length, strlen(req->length)}},
    };
    pagi_event start = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_START);
    start.status = 200;
    start.headers = headers;
    start.header_count = sizeof headers / sizeof headers[0];
    /* The event and its headers are copied before pagi_send returns. */
    if (pagi_send(s, &start, start_sent, req) != 0)
        pagi_scope_finish(s, pagi_scope_error(s));
}

/* One event per pagi_receive: body chunks until more == 0, or a disconnect. */
static void http_event(pagi_scope *s, const pagi_event *ev, void *ud)
{
    counter_req *req = ud;

    switch (ev->type) {
    case PAGI_EV_HTTP_REQUEST:
        /* ev->body is valid only during this callback: count, don't keep. */
        req->body_bytes += ev->body.len;
        if (ev->more) {
            if (pagi_receive(s, http_event, req) != 0)
                pagi_scope_finish(s, pagi_scope_error(s));
            return;
        }
        respond(s, req);
        return;
    case PAGI_EV_HTTP_DISCONNECT:
        /* The client is gone: nothing to answer, and no 500 backstop. */
        pagi_scope_finish(s, NULL);
        return;
    default:
        pagi_scope_finish(s, "counter: unexpected event");
        return;
    }
}

static void http_start(pagi_scope *s, counter_app *app)
{
    counter_req *req = calloc(1, sizeof *req);
    if (req == NULL) {
        pagi_scope_finish(s, "counter: out of memory");
        return;
    }
    req->app = app;
    /* The state copy holds the pointer stored at startup; without a lifespan
     * (or with state unsupported) fall back to the instance's counter. */
    req->hits = pagi_state_get(s, COUNTER_KEY);
    if (req->hits == NULL)
        req->hits = &app->hits;
    /* From here on req lives until the server says the scope is released. */
    pagi_scope_set_userdata(s, req, req_release);

    pagi_conn_on_complete(s, req_complete, req);
    pagi_conn_on_disconnect(s, req_disconnect, req);

    if (pagi_receive(s, http_event, req) != 0)
        pagi_scope_finish(s, pagi_scope_error(s));
}

/* ------------------------------------------------------------------ */
/* module                                                              */
/* ------------------------------------------------------------------ */

static void *create(const char *arg, pagi_loop *loop, const char **err)
{
    (void)arg;
    counter_app *app = calloc(1, sizeof *app);
    if (app == NULL) {
        *err = "counter: out of memory";
        return NULL;
    }
    app->loop = loop;
    return app;
}

static void handle(pagi_scope *s, void *instance)
{
    counter_app *app = instance;

    switch (pagi_scope_type_of(s)) {
    case PAGI_SCOPE_LIFESPAN:
        if (pagi_receive(s, lifespan_event, app) != 0)
            pagi_scope_finish(s, pagi_scope_error(s));
        return;
    case PAGI_SCOPE_HTTP:
        http_start(s, app);
        return;
    default:
        /* The spec: an app must refuse scope types it does not support. */
        pagi_scope_finish(s, "unsupported scope type");
        return;
    }
}

static void destroy(void *instance)
{
    free(instance);
}

const pagi_app pagi_module = PAGI_APP_INIT("counter", create, handle, destroy);
