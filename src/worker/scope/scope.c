/*
 * scope.c - the scope engine: creation with a private copy of the request,
 * reference counting, pull-receive delivery through the run queue, and the
 * two ways an exchange ends (disconnect / complete) with their callbacks in
 * the spec's order. Protocol specifics sit behind scope_ops.
 */
#include "scope_internal.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/shm.h"
#include "pubsub.h"
#include "worker/core/tls_info.h"

static int shm_kind(pagi_scope_type t)
{
    return t == PAGI_SCOPE_WEBSOCKET ? SHM_SCOPE_WEBSOCKET
           : t == PAGI_SCOPE_SSE     ? SHM_SCOPE_SSE
                                     : SHM_SCOPE_HTTP;
}

/* ---- creation (the request's copy: scope_request.c) ---- */

/* Shells reused only after this many more were released: a handle kept
 * past its release is recognised at least that long. The released shells
 * wait in memory: 256 of ~580 B is ~150 KB a worker (1024 doubled the
 * memory an idle keep-alive connection seemed to cost in bench/memory.sh). */
#define SCOPE_REUSE_AFTER 256

pagi_scope *scope_new(worker_ctx *w, pagi_scope_type type, const scope_ops *ops, void *proto,
                      const scope_request *req)
{
    if (!w->scope_pool) {
        w->scope_pool = malloc(sizeof *w->scope_pool);
        if (!w->scope_pool)
            return NULL;
        *w->scope_pool = (handle_pool)HANDLE_POOL_INIT("scope", pagi_scope, SCOPE_REUSE_AFTER);
    }
    pagi_scope *s = handle_get(w->scope_pool, SCOPE_MAGIC);
    if (!s)
        return NULL;
    s->type = type;
    s->refs = 2; /* connection side + app side */
    s->w = w;
    s->ops = ops;
    s->proto = proto;
    s->connected = 1;
    if (req && scope_copy_request(s, req) < 0) {
        handle_put(w->scope_pool, s);
        return NULL;
    }
    s->state = state_table_ref(w->state);
    if (type != PAGI_SCOPE_LIFESPAN) {
        s->next = w->scopes;
        if (w->scopes)
            w->scopes->prev = s;
        w->scopes = s;
        w->n_scopes++;
        if (w->stats)
            atomic_fetch_add_explicit(&w->stats->open_scopes[shm_kind(type)], 1,
                                      memory_order_relaxed);
    }
    return s;
}

void scope_ref(pagi_scope *s)
{
    s->refs++;
}

static void cb_list_free(scope_cb_list *l)
{
    if (!l->v)
        return; /* five lists a scope, most never used: skip the calls */
    free(l->v);
    l->v = NULL;
    l->n = l->cap = 0;
}

static void scope_free(pagi_scope *s)
{
    worker_ctx *w = s->w;
    scope_response_timer_stop(s); /* detach stopped it; a scope freed without one too */
    /* Subscriptions first: no message may reach an app whose data the
     * release below frees. */
    if (s->subs)
        pubsub_scope_released(s);
    /* The layer first: what it calls back (a lifespan destroy) may use the app's data. */
    if (s->layer_release)
        s->layer_release(s->layer);
    if (s->release) {
        double t0 = scope_app_enter(s, "release");
        s->release(s, s->userdata);
        scope_app_leave(s, t0, "release");
    }
    if (s->subs)
        pubsub_scope_free_subs(s);
    state_table_unref(s->state);
    tls_info_unref(s->req.tls); /* after release: the app may still have read it there */
    s->req.tls = NULL;
    cb_list_free(&s->on_disconnect);
    cb_list_free(&s->on_complete);
    cb_list_free(&s->on_high);
    cb_list_free(&s->on_drain);
    cb_list_free(&s->on_server_drain);
    buf_free(&s->delivery);
    buf_free(&s->log_resp);
    free(s->error);
    s->error = NULL;
    pagi_scope_type type = s->type;
    if (type != PAGI_SCOPE_LIFESPAN) {
        if (s->prev)
            s->prev->next = s->next;
        else
            w->scopes = s->next;
        if (s->next)
            s->next->prev = s->prev;
    }
    if (w->loop.debug)
        scope_quarantine_put(s); /* its request copy too: stale-handle messages name it */
    else
        scope_shell_put(s);
    if (type != PAGI_SCOPE_LIFESPAN) {
        w->n_scopes--;
        if (w->stats)
            atomic_fetch_sub_explicit(&w->stats->open_scopes[shm_kind(type)], 1,
                                      memory_order_relaxed);
        if (w->on_conn_count)
            w->on_conn_count(w);
    }
}

static void scope_free_job(const runq_item *it)
{
    scope_free(it->a);
}

void scope_unref(pagi_scope *s)
{
    if (--s->refs > 0)
        return;
    /* The release callback is a callback too: never inside the call that dropped the last ref. */
    if (loop_queue(&s->w->loop, scope_free_job, NULL, s, NULL, NULL) < 0)
        scope_free(s);
}

void *scope_proto(const pagi_scope *s)
{
    return s->proto;
}

void scope_set_layer_data(pagi_scope *s, void *data, void (*release)(void *data))
{
    s->layer = data;
    s->layer_release = release;
}

void *scope_layer_data(const pagi_scope *s)
{
    return s->layer;
}
buf *scope_delivery_buf(pagi_scope *s)
{
    return &s->delivery;
}

void scope_deliver_body(pagi_scope *s, buf *body, int complete, pagi_event_type type,
                        pagi_event *ev)
{
    buf *d = &s->delivery;
    buf tmp = *d;
    *d = *body;
    *body = tmp;
    buf_reset(body);
    ev->type = type;
    ev->body.ptr = buf_size(d) ? buf_head(d) : "";
    ev->body.len = buf_size(d);
    ev->more = !complete;
}

buf *scope_log_resp_buf(pagi_scope *s)
{
    return &s->log_resp;
}
worker_ctx *scope_worker(const pagi_scope *s)
{
    return s->w;
}
struct pagi_subscription **scope_subs(pagi_scope *s)
{
    return &s->subs;
}

void scope_set_mount(pagi_scope *s, size_t prefix_len)
{
    s->mount_len = prefix_len <= s->req.path.len ? prefix_len : s->req.path.len;
}

int scope_live(const pagi_scope *s, const char *fn)
{
    return __builtin_expect(s != NULL && s->h.magic == SCOPE_MAGIC, 1) || scope_stale(s, fn);
}

void scope_set_owner(pagi_scope *s, void (*on_finish)(pagi_scope *s, void *ud), void *ud)
{
    s->owner_finish = on_finish;
    s->owner = on_finish ? ud : NULL;
}

void *scope_owner(const pagi_scope *s)
{
    return s->owner;
}

void scope_shell_put(pagi_scope *s)
{
    scope_request_free(s);
    handle_put(s->w->scope_pool, s);
}

void scope_start_app(pagi_scope *s)
{
    /* Armed before the handler runs: a response it starts at once stops it. */
    scope_response_timer_arm(s);
    double t0 = scope_app_enter(s, "handle");
    s->w->app->handle(s, s->w->app_instance);
    scope_app_leave(s, t0, "handle");
}

int scope_fail(pagi_scope *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    /* Most scopes are never refused anything: the message's room is
     * allocated at the first refusal, not carried by every scope. */
    if (!s->error)
        s->error = malloc(SCOPE_ERROR_MAX);
    if (s->error)
        vsnprintf(s->error, SCOPE_ERROR_MAX, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- queued callbacks: each job holds a scope reference ---- */

static int scope_queue(pagi_scope *s, runq_fn fn, runq_any_fn cb, void *b, void *c)
{
    scope_ref(s);
    if (loop_queue(&s->w->loop, fn, cb, s, b, c) < 0) {
        s->refs--;
        log_error("out of memory queueing a callback");
        return -1;
    }
    return 0;
}

static void send_done_job(const runq_item *it)
{
    pagi_scope *s = it->a;
    if (s->sends_pending)
        s->sends_pending--;
    double t0 = scope_app_enter(s, "send");
    ((pagi_send_cb)it->cb)(s, (const char *)it->c, it->b);
    scope_app_leave(s, t0, "send");
    scope_unref(s);
}

void scope_complete_send(pagi_scope *s, pagi_send_cb cb, void *ud, const char *err)
{
    if (!cb)
        return;
    scope_queue(s, send_done_job, (runq_any_fn)cb, ud, (void *)err);
}

static void disconnect_cb_job(const runq_item *it)
{
    pagi_scope *s = it->a;
    double t0 = scope_app_enter(s, "on_disconnect");
    ((pagi_disconnect_cb)it->cb)(s, s->reason, it->b);
    scope_app_leave(s, t0, "on_disconnect");
    scope_unref(s);
}

static void notify_cb_job(const runq_item *it)
{
    pagi_scope *s = it->a;
    const char *kind = it->c ? (const char *)it->c : "notify";
    double t0 = scope_app_enter(s, kind);
    ((pagi_notify_cb)it->cb)(s, it->b);
    scope_app_leave(s, t0, kind);
    scope_unref(s);
}

/* The drain notice is promised only to scopes the app has not finished:
 * the app may finish (and free its context) between the queueing and the
 * run. The job's reference keeps the handle itself alive meanwhile. */
static void server_drain_cb_job(const runq_item *it)
{
    pagi_scope *s = it->a;
    if (!s->finished) {
        double t0 = scope_app_enter(s, "on_server_drain");
        ((pagi_notify_cb)it->cb)(s, it->b);
        scope_app_leave(s, t0, "on_server_drain");
    }
    scope_unref(s);
}

static void queue_all(pagi_scope *s, const scope_cb_list *l, runq_fn job, const char *kind)
{
    for (size_t i = 0; i < l->n; i++)
        scope_queue(s, job, l->v[i].fn, l->v[i].ud, (void *)kind);
}

int scope_cb_add(scope_cb_list *l, runq_any_fn fn, void *ud)
{
    if (l->n == l->cap) {
        size_t ncap = l->cap ? l->cap * 2 : 2;
        scope_cb *v = realloc(l->v, ncap * sizeof *v);
        if (!v)
            return -1;
        l->v = v;
        l->cap = ncap;
    }
    l->v[l->n].fn = fn;
    l->v[l->n].ud = ud;
    l->n++;
    return 0;
}

/* A late registration after the fact runs too (queued, never nested). */
void scope_queue_disconnect_cb(pagi_scope *s, runq_any_fn fn, void *ud)
{
    scope_queue(s, disconnect_cb_job, fn, ud, NULL);
}

void scope_queue_notify_cb(pagi_scope *s, runq_any_fn fn, void *ud, const char *kind)
{
    scope_queue(s, notify_cb_job, fn, ud, (void *)kind);
}

void scope_queue_server_drain_cb(pagi_scope *s, runq_any_fn fn, void *ud)
{
    scope_queue(s, server_drain_cb_job, fn, ud, NULL);
}

/* ---- receive ---- */

static void deliver_job(const runq_item *it)
{
    pagi_scope *s = it->a;
    if ((unsigned long)(uintptr_t)it->b != s->recv_gen) {
        /* Queued before a disconnect: the disconnect's own delivery comes after its callbacks. */
        scope_unref(s);
        return;
    }
    s->recv_queued = 0;
    if (s->recv_waiting) {
        pagi_event ev = PAGI_EVENT_INIT(PAGI_EV_NONE);
        if (s->ops->next_event(s, &ev, 1)) {
            pagi_receive_cb cb = s->recv_cb;
            void *ud = s->recv_ud;
            s->recv_waiting = 0;
            s->recv_cb = NULL;
            double t0 = scope_app_enter(s, "receive");
            cb(s, &ev, ud);
            scope_app_leave(s, t0, "receive");
            /* The event was valid only during cb: with nothing more to
             * deliver, its bytes' copy is not kept (an idle connection holds
             * none); a stream of events reuses it. */
            pagi_event probe = PAGI_EVENT_INIT(PAGI_EV_NONE);
            if (s->delivery.cap && !s->ops->next_event(s, &probe, 0))
                buf_free(&s->delivery);
        }
    }
    scope_unref(s);
}

void scope_poke_receive(pagi_scope *s)
{
    if (!s->recv_waiting || s->recv_queued)
        return;
    /* Only a probe: the job takes the event at delivery time, with what has arrived by then. */
    if (!s->ops->next_event(s, NULL, 0))
        return;
    if (scope_queue(s, deliver_job, NULL, (void *)(uintptr_t)s->recv_gen, NULL) == 0)
        s->recv_queued = 1;
}

int scope_receive_waiting(const pagi_scope *s)
{
    return s->recv_waiting;
}

static int receive_checked(pagi_scope *s, pagi_receive_cb cb, void *ud)
{
    if (!cb)
        return scope_fail(s, "receive: no callback");
    if (s->finished)
        return scope_fail(s, "receive after the scope finished");
    if (s->recv_waiting)
        return scope_fail(s, "a receive is already pending");
    s->recv_waiting = 1;
    s->recv_cb = cb;
    s->recv_ud = ud;
    if (s->connected && s->ops->receive_wanted)
        s->ops->receive_wanted(s);
    scope_poke_receive(s);
    return 0;
}

int pagi_receive(pagi_scope *s, pagi_receive_cb cb, void *ud)
{
    if (!s || !SCOPE_LIVE(s))
        return -1;
    int rc = receive_checked(s, cb, ud);
    if (rc != 0 && scope_debug(s))
        scope_misuse(s, "pagi_receive refused: %s", pagi_scope_error(s));
    return rc;
}

/* The pending receive is withdrawn. A delivery job already queued has not
 * taken its event yet (next_event runs at delivery time), so retiring the
 * job through recv_gen leaves the event with the driver for the next
 * receive: nothing is lost. */
int pagi_receive_cancel(pagi_scope *s)
{
    if (!s || !SCOPE_LIVE(s))
        return -1;
    if (!s->recv_waiting)
        return scope_fail(s, "receive cancel: no receive is pending");
    s->recv_waiting = 0;
    s->recv_cb = NULL;
    s->recv_ud = NULL;
    if (s->recv_queued) {
        s->recv_gen++;
        s->recv_queued = 0;
    }
    return 0;
}

int scope_write_now(pagi_scope *s, int block)
{
    if (!s || !SCOPE_LIVE(s) || s->finished || !s->ops->write_now)
        return -1;
    return s->ops->write_now(s, block);
}

/* ---- send / finish ---- */

static int send_checked(pagi_scope *s, const pagi_event *ev, pagi_send_cb cb, void *ud)
{
    if (!ev)
        return scope_fail(s, "send: no event");
    if (s->finished)
        return scope_fail(s, "send after the scope finished");
    if (ev->type <= PAGI_EV_NONE || ev->type >= PAGI_EV__COUNT)
        return scope_fail(s, "send: unknown event type %d", (int)ev->type);
    /* Refused now so that a later minor can give these words a meaning
     * without an older module's leftovers being taken for it. */
    for (size_t i = 0; i < sizeof ev->reserved / sizeof ev->reserved[0]; i++)
        if (ev->reserved[i])
            return scope_fail(s, "event: reserved fields must be zero (see VERSIONING in pagi(3))");
    return s->ops->send(s, ev, cb, ud);
}

int pagi_send(pagi_scope *s, const pagi_event *ev, pagi_send_cb cb, void *ud)
{
    if (!s || !SCOPE_LIVE(s))
        return -1;
    int rc = send_checked(s, ev, cb, ud);
    if (rc == 0 && cb)
        s->sends_pending++;
    else if (rc != 0 && scope_debug(s))
        scope_misuse(s, "pagi_send%s%s refused: %s", ev ? " of " : "",
                     ev && pagi_event_type_name(ev->type) ? pagi_event_type_name(ev->type) : "",
                     pagi_scope_error(s));
    return rc;
}

/* Debug mode: what a finish says about the app's bookkeeping. */
static void finish_checks(pagi_scope *s)
{
    if (s->finished) {
        scope_misuse(s, "pagi_scope_finish called twice");
        return;
    }
    if (s->recv_waiting)
        scope_misuse(s, "pagi_scope_finish with a receive pending (its callback will not run)");
    if (s->sends_pending)
        scope_misuse(s, "pagi_scope_finish before %u send callback%s ran", s->sends_pending,
                     s->sends_pending == 1 ? "" : "s");
}

pagi_buf *scope_send_buf(const pagi_scope *s, const void *p, size_t n)
{
    pagi_buf *b = s->send_buf;
    if (!b || n == 0 || p != pagi_buf_data(b) || n != pagi_buf_len(b))
        return NULL;
    return b;
}

int pagi_send_buf(pagi_scope *s, const pagi_event *ev, pagi_buf *b, pagi_send_cb cb, void *ud)
{
    if (!s || !SCOPE_LIVE(s))
        return -1;
    if (!ev)
        return scope_fail(s, "send: no event");
    if (!b)
        return scope_fail(s, "pagi_send_buf: no buffer");
    pagi_event e = *ev;
    pagi_str payload = {pagi_buf_data(b), pagi_buf_len(b)};
    if (!payload.ptr)
        payload.ptr = ""; /* an empty buffer is an empty payload, not "none" */
    switch (e.type) {
    case PAGI_EV_HTTP_RESPONSE_BODY:
    case PAGI_EV_WEBSOCKET_HTTP_RESPONSE_BODY:
    case PAGI_EV_SSE_HTTP_RESPONSE_BODY:
        e.body = payload;
        break;
    case PAGI_EV_WEBSOCKET_SEND:
        e.text = e.bytes = (pagi_str){NULL, 0};
        if (e.is_text)
            e.text = payload;
        else
            e.bytes = payload;
        break;
    case PAGI_EV_SSE_SEND:
        e.data = payload;
        break;
    default:
        return scope_fail(s, "pagi_send_buf: '%s' carries no body",
                          pagi_event_type_name(e.type) ? pagi_event_type_name(e.type) : "?");
    }
    /* Drivers that keep the bytes as they are see b (scope_send_buf) and
     * queue a reference; the rest copy e's payload as in any send. */
    s->send_buf = b;
    int rc = pagi_send(s, &e, cb, ud);
    s->send_buf = NULL;
    return rc;
}

void pagi_scope_finish(pagi_scope *s, const char *error)
{
    if (!s || !SCOPE_LIVE(s))
        return;
    if (scope_debug(s))
        finish_checks(s);
    if (s->finished)
        return;
    if (s->owner_finish) {
        /* Finished behind its owner's back (a group member the app
         * finished or answered): the owner lets go of it first. */
        void (*fn)(pagi_scope *, void *) = s->owner_finish;
        void *ud = s->owner;
        s->owner_finish = NULL;
        s->owner = NULL;
        fn(s, ud);
    }
    s->finished = 1;
    s->recv_waiting = 0;
    s->recv_cb = NULL;
    s->ops->finished(s, error);
    scope_unref(s); /* the app side's reference */
}

/* The worker is exiting with handlers still running (past its shutdown
 * grace): finish them on the app's behalf, so their release callbacks run
 * (on the next drain, while the app is still loaded) and nothing leaks. */
void scope_abandon_all(worker_ctx *w)
{
    for (pagi_scope *s = w->scopes, *next; s; s = next) {
        next = s->next;
        if (s->finished)
            continue;
        if (scope_debug(s)) {
            scope_misuse(s, "the worker is exiting and the app never finished this scope: "
                            "finished on its behalf");
        } else {
            char label[256];
            log_warn("the worker is exiting and the app never finished its scope for %s: "
                     "finished on its behalf (pagi_scope_finish missing?)",
                     scope_label(s, label, sizeof label));
        }
        s->finished = 1; /* the app's own finish: the abandoned scope's checks would mislead */
        s->recv_waiting = 0;
        s->recv_cb = NULL;
        s->ops->finished(s, NULL);
        scope_unref(s);
    }
}

int scope_any_past_response(const worker_ctx *w)
{
    for (const pagi_scope *s = w->scopes; s; s = s->next)
        if (!s->finished && s->complete)
            return 1;
    return 0;
}

/* The few named are enough to find the route; the count says the rest. */
#define UNFINISHED_NAMED 5

void scope_log_unfinished(const worker_ctx *w, const char *what)
{
    char list[UNFINISHED_NAMED * 96] = "", label[96];
    size_t unfinished = 0, at = 0;
    for (const pagi_scope *s = w->scopes; s; s = s->next) {
        if (s->finished)
            continue;
        if (unfinished++ < UNFINISHED_NAMED && at < sizeof list) {
            int k = snprintf(list + at, sizeof list - at, "%s%s", at ? ", " : "",
                             scope_label(s, label, sizeof label));
            if (k > 0)
                at += (size_t)k;
        }
    }
    log_warn("%s %zu request scope(s) not yet released, %zu not finished by the app%s%s%s", what,
             w->n_scopes, unfinished, unfinished ? " (" : "", list,
             unfinished > UNFINISHED_NAMED ? ", ...)"
             : unfinished                  ? ")"
                                           : "");
}

/* ---- how an exchange ends ---- */

void scope_disconnect(pagi_scope *s, const char *reason)
{
    if (!s->connected || s->complete)
        return;
    s->connected = 0;
    s->reason = reason;
    scope_response_timer_stop(s);
    shm_count_disconnect(s->w->stats, reason);
    queue_all(s, &s->on_disconnect, disconnect_cb_job, NULL);
    /* The spec's order: callbacks first, then the receive gets the disconnect. */
    s->recv_gen++;
    s->recv_queued = 0;
    scope_poke_receive(s);
}

void scope_mark_complete(pagi_scope *s)
{
    if (s->complete || !s->connected)
        return;
    s->complete = 1;
    scope_response_timer_stop(s);
    queue_all(s, &s->on_complete, notify_cb_job, "on_complete");
    scope_poke_receive(s);
}

void scope_mark_started(pagi_scope *s)
{
    s->started = 1;
    scope_response_timer_stop(s);
}
int scope_is_connected(const pagi_scope *s)
{
    return s->connected;
}
int scope_is_finished(const pagi_scope *s)
{
    return s->finished;
}
int scope_is_complete(const pagi_scope *s)
{
    return s->complete;
}
int scope_is_started(const pagi_scope *s)
{
    return s->started;
}

/* The exchange ended and nothing the app waits for will tell it so (no
 * receive, send callback, on_disconnect or on_complete pending): unless
 * something else of the app's (a timer) finishes the scope, it is leaked.
 * Counted (pagid_scopes_unfinished_total) and logged in every mode; the
 * log thins out past the first hundred so a leaking app cannot flood it. */
static void detach_checks(pagi_scope *s)
{
    if (s->finished || s->type == PAGI_SCOPE_LIFESPAN || s->unfinished_counted)
        return;
    if (s->recv_waiting || s->sends_pending || s->on_disconnect.n || s->on_complete.n)
        return;
    s->unfinished_counted = 1;
    uint64_t n = ++s->w->scopes_unfinished;
    if (s->w->stats)
        shm_add(&s->w->stats->scopes_unfinished, 1);
    if (scope_debug(s)) {
        scope_misuse(s, "the connection is done with this scope but the app never finished it, "
                        "and has no receive, send callback, on_disconnect or on_complete pending "
                        "(leaked unless the app finishes it later)");
    } else if (n <= 100 || (n & (n - 1)) == 0) {
        char label[256];
        log_warn("the connection of %s is done but its app never finished the scope and waits "
                 "for nothing that would tell it (pagi_scope_finish missing? leaked unless the "
                 "app finishes it later; %llu so far)",
                 scope_label(s, label, sizeof label), (unsigned long long)n);
    }
}

void scope_detach(pagi_scope *s)
{
    detach_checks(s);
    s->proto = NULL;
    scope_response_timer_stop(s);
    /* A completed request's connection is no longer its own: report it closed, with no reason. */
    if (s->complete)
        s->connected = 0;
    scope_unref(s);
}

void scope_notice_server_drain(worker_ctx *w)
{
    for (pagi_scope *s = w->scopes; s; s = s->next) {
        if (!s->finished)
            queue_all(s, &s->on_server_drain, server_drain_cb_job, "on_server_drain");
        cb_list_free(&s->on_server_drain);
    }
}

void scope_notify_high_water(pagi_scope *s)
{
    queue_all(s, &s->on_high, notify_cb_job, "on_high_water");
}
void scope_notify_drain(pagi_scope *s)
{
    queue_all(s, &s->on_drain, notify_cb_job, "on_drain");
}

int scope_http_send_gate(pagi_scope *s, const pagi_event *ev, int has_exchange, pagi_send_cb cb,
                         void *ud)
{
    switch (ev->type) {
    case PAGI_EV_HTTP_RESPONSE_START:
    case PAGI_EV_HTTP_RESPONSE_BODY:
    case PAGI_EV_HTTP_RESPONSE_TRAILERS:
        break;
    default:
        return scope_fail(s, "send: '%s' is not an event an http scope can send",
                          pagi_event_type_name(ev->type));
    }
    if (scope_is_complete(s))
        return scope_fail(s, "send: the response is already complete");
    if (!has_exchange || !scope_is_connected(s)) {
        /* The spec: a send after disconnect is a no-op that does not raise. */
        scope_complete_send(s, cb, ud, NULL);
        return 0;
    }
    return 1;
}
