/*
 * lifespan.c - the lifespan scope. Startup: deliver lifespan.startup and
 * wait (bounded by timeouts.lifespan_startup) for startup.complete or
 * startup.failed; an app that finishes without either, or refuses the scope
 * before taking lifespan.startup, declined lifespan and the worker starts
 * anyway; one that fails after taking it failed its startup. Shutdown
 * mirrors it, bounded by the same time.
 */
#include "lifespan.h"

#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "scope.h"

typedef enum lifespan_phase {
    LS_STARTING,    /* startup sent (or about to be), awaiting the answer */
    LS_RUNNING,     /* startup.complete received */
    LS_UNSUPPORTED, /* the app declined */
    LS_STOPPING,    /* shutdown sent, awaiting the answer */
    LS_DONE
} lifespan_phase;

struct lifespan {
    pagi_scope *scope;
    lifespan_phase phase;
    int startup_delivered, shutdown_delivered;
    lifespan_done_fn on_started;
    void (*on_stopped)(worker_ctx *w);
    ev_timer timer;
    worker_ctx *w;
};

static lifespan *the_lifespan(pagi_scope *s) { return scope_proto(s); }

static void lifespan_started(lifespan *ls, lifespan_outcome o, const char *msg)
{
    ev_timer_stop(ls->w->loop.ev, &ls->timer);
    lifespan_done_fn done = ls->on_started;
    ls->on_started = NULL;
    if (done)
        done(ls->w, o, msg);
}

static void lifespan_stopped(lifespan *ls)
{
    ev_timer_stop(ls->w->loop.ev, &ls->timer);
    ls->phase = LS_DONE;
    void (*done)(worker_ctx *) = ls->on_stopped;
    ls->on_stopped = NULL;
    if (done)
        done(ls->w);
}

static int ls_send(pagi_scope *s, const pagi_event *ev, pagi_send_cb cb, void *ud)
{
    lifespan *ls = the_lifespan(s);
    char msg[256];
    switch (ev->type) {
    case PAGI_EV_LIFESPAN_STARTUP_COMPLETE:
    case PAGI_EV_LIFESPAN_STARTUP_FAILED:
        if (!ls || ls->phase != LS_STARTING)
            return scope_fail(s, "%s: not expected now", pagi_event_type_name(ev->type));
        scope_complete_send(s, cb, ud, NULL);
        if (ev->type == PAGI_EV_LIFESPAN_STARTUP_COMPLETE) {
            ls->phase = LS_RUNNING;
            lifespan_started(ls, LIFESPAN_OK, NULL);
        } else {
            snprintf(msg, sizeof msg, "%.*s", (int)ev->message.len,
                     ev->message.ptr ? ev->message.ptr : "");
            ls->phase = LS_DONE;
            lifespan_started(ls, LIFESPAN_FAILED, msg);
        }
        return 0;
    case PAGI_EV_LIFESPAN_SHUTDOWN_COMPLETE:
    case PAGI_EV_LIFESPAN_SHUTDOWN_FAILED:
        if (!ls || ls->phase != LS_STOPPING)
            return scope_fail(s, "%s: not expected now", pagi_event_type_name(ev->type));
        if (ev->type == PAGI_EV_LIFESPAN_SHUTDOWN_FAILED)
            log_error("lifespan shutdown failed: %.*s", (int)ev->message.len,
                      ev->message.ptr ? ev->message.ptr : "");
        scope_complete_send(s, cb, ud, NULL);
        lifespan_stopped(ls);
        return 0;
    default:
        return scope_fail(s, "send: '%s' is not an event a lifespan scope can send",
                          pagi_event_type_name(ev->type));
    }
}

static int ls_next_event(pagi_scope *s, pagi_event *ev, int take)
{
    lifespan *ls = the_lifespan(s);
    if (!ls)
        return 0;
    pagi_event_type t = PAGI_EV_NONE;
    if (ls->phase == LS_STARTING && !ls->startup_delivered)
        t = PAGI_EV_LIFESPAN_STARTUP;
    else if (ls->phase == LS_STOPPING && !ls->shutdown_delivered)
        t = PAGI_EV_LIFESPAN_SHUTDOWN;
    if (t == PAGI_EV_NONE)
        return 0;
    if (take) {
        ev->type = t;
        if (t == PAGI_EV_LIFESPAN_STARTUP)
            ls->startup_delivered = 1;
        else
            ls->shutdown_delivered = 1;
    }
    return 1;
}

static void ls_finished(pagi_scope *s, const char *error)
{
    lifespan *ls = the_lifespan(s);
    if (!ls)
        return;
    switch (ls->phase) {
    case LS_STARTING:
        if (error && ls->startup_delivered) {
            /* It took lifespan.startup and then died (its database is down):
             * its state is not there, so serving without it would fail every
             * request. A startup failure, as lifespan.startup.failed. */
            char msg[512];
            snprintf(msg, sizeof msg, "the startup handler died: %s", error);
            ls->phase = LS_DONE;
            lifespan_started(ls, LIFESPAN_FAILED, msg);
            break;
        }
        log_info("the app does not support lifespan%s%s; starting without it",
                 error ? ": " : "", error ? error : "");
        ls->phase = LS_UNSUPPORTED;
        lifespan_started(ls, LIFESPAN_OK, NULL);
        break;
    case LS_RUNNING:
        if (error)
            log_error("lifespan task failed after startup: %s", error);
        ls->phase = LS_UNSUPPORTED; /* nobody left to tell about shutdown */
        break;
    case LS_STOPPING:
        if (error)
            log_error("lifespan shutdown failed: %s", error);
        lifespan_stopped(ls);
        break;
    default:
        break;
    }
}

static const scope_ops lifespan_ops = {
    .send = ls_send,
    .next_event = ls_next_event,
    .finished = ls_finished,
};

static void ls_on_timeout(struct ev_loop *ev, ev_timer *t, int revents)
{
    lifespan *ls = t->data;
    if (ls->phase == LS_STARTING) {
        log_error("lifespan startup did not finish within timeouts.lifespan_startup");
        ls->phase = LS_DONE;
        lifespan_started(ls, LIFESPAN_FAILED, "lifespan startup timed out");
    } else if (ls->phase == LS_STOPPING) {
        log_warn("lifespan shutdown did not finish in time");
        lifespan_stopped(ls);
    }
}

int lifespan_start(worker_ctx *w, lifespan_done_fn done)
{
    lifespan *ls = calloc(1, sizeof *ls);
    if (!ls)
        return -1;
    ls->w = w;
    ls->phase = LS_STARTING;
    ls->on_started = done;
    ev_init(&ls->timer, ls_on_timeout);
    ls->timer.data = ls;
    ls->scope = scope_new(w, PAGI_SCOPE_LIFESPAN, &lifespan_ops, ls, NULL);
    if (!ls->scope) {
        free(ls);
        return -1;
    }
    w->lifespan = ls;
    if (w->cfg->timeouts.lifespan_startup > 0) {
        ev_timer_set(&ls->timer, w->cfg->timeouts.lifespan_startup, 0.);
        ev_timer_start(w->loop.ev, &ls->timer);
    }
    scope_start_app(ls->scope);
    return 0;
}

void lifespan_stop(worker_ctx *w, void (*done)(worker_ctx *w))
{
    lifespan *ls = w->lifespan;
    if (!ls || ls->phase != LS_RUNNING || scope_is_finished(ls->scope)) {
        done(w);
        return;
    }
    ls->phase = LS_STOPPING;
    ls->on_stopped = done;
    /* Bounded well inside the master's patience (shutdown + 5 s) after the deadline. */
    double t = w->cfg->timeouts.lifespan_startup > 0 ? w->cfg->timeouts.lifespan_startup : 3.;
    if (t > 3.)
        t = 3.;
    ev_timer_set(&ls->timer, t, 0.);
    ev_timer_start(w->loop.ev, &ls->timer);
    scope_poke_receive(ls->scope);
}

void lifespan_free(worker_ctx *w)
{
    lifespan *ls = w->lifespan;
    if (!ls)
        return;
    w->lifespan = NULL;
    ev_timer_stop(w->loop.ev, &ls->timer);
    pagi_scope *s = ls->scope;
    int unfinished = !scope_is_finished(s);
    scope_detach(s); /* the app side's reference stays until it finishes */
    /* The worker is exiting: a handler still running (it never answered, or
     * missed its shutdown limit) is finished on its behalf, as
     * scope_abandon_all does for requests, so the scope's release runs while
     * the app is loaded. After the detach: ls_finished sees no lifespan. */
    if (unfinished)
        pagi_scope_finish(s, NULL);
    free(ls);
}
