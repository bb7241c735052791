/*
 * mount_lifespan.c - lifespan for a mount table. The worker's one lifespan
 * scope is driven here, as an app would, and every app of the table gets a
 * lifespan scope of its own: startup in table order, one app at a time (so
 * each sees the state the previous ones set), shutdown in reverse. A failed
 * startup shuts down the apps already started, then fails the worker's.
 */
#include "mount.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "scope.h"

typedef enum child_phase {
    CH_IDLE,     /* not started yet */
    CH_STARTING, /* lifespan.startup offered */
    CH_RUNNING,  /* startup.complete */
    CH_DECLINED, /* finished without answering: no lifespan for this app */
    CH_FAILED,   /* startup.failed */
    CH_STOPPING, /* lifespan.shutdown offered */
    CH_STOPPED,
} child_phase;

typedef struct mount_lifespan mount_lifespan;

typedef struct lchild {
    mount_lifespan *ml;
    size_t index;
    pagi_scope *scope; /* our (driver) reference until detached */
    child_phase phase;
    int delivered; /* the phase's event went out */
} lchild;

struct mount_lifespan {
    pagi_scope *parent;
    const mount_table *t;
    lchild *c;
    size_t n, cur;
    int stopping;       /* shutting down (requested, or rolling back a failed startup) */
    int rollback;       /* ... because a startup failed */
    int shutdown_error; /* some app's shutdown failed */
    int advance_queued, done;
    char msg[256];
};

static void ml_advance_later(mount_lifespan *ml);

/* ---- the children's scope ops ---- */

static lchild *child_of(pagi_scope *s)
{
    return scope_proto(s);
}

static int child_send(pagi_scope *s, const pagi_event *ev, pagi_send_cb cb, void *ud)
{
    lchild *ch = child_of(s);
    const char *name = pagi_event_type_name(ev->type);
    int starting = ch && ch->phase == CH_STARTING, stopping = ch && ch->phase == CH_STOPPING;
    switch (ev->type) {
    case PAGI_EV_LIFESPAN_STARTUP_COMPLETE:
    case PAGI_EV_LIFESPAN_STARTUP_FAILED:
        if (!starting)
            return scope_fail(s, "%s: not expected now", name);
        ch->phase = ev->type == PAGI_EV_LIFESPAN_STARTUP_COMPLETE ? CH_RUNNING : CH_FAILED;
        if (ch->phase == CH_FAILED)
            snprintf(ch->ml->msg, sizeof ch->ml->msg, "%s: %.*s", ch->ml->t->v[ch->index].spec,
                     (int)ev->message.len, ev->message.ptr ? ev->message.ptr : "");
        break;
    case PAGI_EV_LIFESPAN_SHUTDOWN_COMPLETE:
    case PAGI_EV_LIFESPAN_SHUTDOWN_FAILED:
        if (!stopping)
            return scope_fail(s, "%s: not expected now", name);
        if (ev->type == PAGI_EV_LIFESPAN_SHUTDOWN_FAILED) {
            log_error("lifespan shutdown of %s failed: %.*s", ch->ml->t->v[ch->index].spec,
                      (int)ev->message.len, ev->message.ptr ? ev->message.ptr : "");
            ch->ml->shutdown_error = 1;
        }
        ch->phase = CH_STOPPED;
        break;
    default:
        return scope_fail(s, "send: '%s' is not an event a lifespan scope can send", name);
    }
    scope_complete_send(s, cb, ud, NULL);
    ml_advance_later(ch->ml); /* never inside the app's pagi_send */
    return 0;
}

static int child_next_event(pagi_scope *s, pagi_event *ev, int take)
{
    lchild *ch = child_of(s);
    if (!ch || ch->delivered || (ch->phase != CH_STARTING && ch->phase != CH_STOPPING))
        return 0;
    if (take) {
        ev->type = ch->phase == CH_STARTING ? PAGI_EV_LIFESPAN_STARTUP : PAGI_EV_LIFESPAN_SHUTDOWN;
        ch->delivered = 1;
    }
    return 1;
}

static void child_detach(lchild *ch)
{
    if (!ch->scope)
        return;
    pagi_scope *s = ch->scope;
    ch->scope = NULL;
    scope_detach(s); /* the app side keeps its reference until it finishes */
}

static void child_finished(pagi_scope *s, const char *error)
{
    lchild *ch = child_of(s);
    if (!ch)
        return;
    const char *spec = ch->ml->t->v[ch->index].spec;
    switch (ch->phase) {
    case CH_STARTING:
        log_info("app %s does not support lifespan%s%s", spec, error ? ": " : "",
                 error ? error : "");
        ch->phase = CH_DECLINED;
        break;
    case CH_RUNNING:
        if (error)
            log_error("lifespan task of %s failed after startup: %s", spec, error);
        ch->phase = CH_DECLINED; /* nobody left to tell about shutdown */
        break;
    case CH_STOPPING:
        if (error) {
            log_error("lifespan shutdown of %s failed: %s", spec, error);
            ch->ml->shutdown_error = 1;
        }
        ch->phase = CH_STOPPED;
        break;
    default:
        if (ch->ml->done)
            child_detach(ch); /* finished after the table's end: let it go now */
        return;
    }
    if (ch->ml->done)
        child_detach(ch);
    else
        ml_advance_later(ch->ml);
}

static const scope_ops child_ops = {
    .send = child_send,
    .next_event = child_next_event,
    .finished = child_finished,
};

/* ---- the coordinator ---- */

/* The table's scope is released (worker exit, after every handler's chance):
 * a child whose handler is still running is finished on its behalf, or its
 * scope would outlive the app. After the detach: child_finished sees no child. */
static void child_abandon(lchild *ch)
{
    if (!ch->scope)
        return;
    pagi_scope *s = ch->scope;
    int unfinished = !scope_is_finished(s);
    child_detach(ch);
    if (unfinished)
        pagi_scope_finish(s, NULL);
}

/* The end of the worker's lifespan scope: answer it, let the children go. */
static void ml_finish(mount_lifespan *ml, pagi_event_type answer, const char *message)
{
    ml->done = 1;
    if (answer != PAGI_EV_NONE) {
        pagi_event ev = PAGI_EVENT_INIT(answer);
        if (message)
            ev.message = (pagi_str){message, strlen(message)};
        if (pagi_send(ml->parent, &ev, NULL, NULL) < 0)
            log_error("lifespan: %s", pagi_scope_error(ml->parent));
    }
    /* A child still running keeps our reference until ml_release (or its own
     * finish, child_finished): only then may it be finished on its behalf. */
    for (size_t i = 0; i < ml->n; i++)
        if (ml->c[i].scope && scope_is_finished(ml->c[i].scope))
            child_detach(&ml->c[i]);
    pagi_scope_finish(ml->parent, NULL);
}

static void on_parent_event(pagi_scope *s, const pagi_event *ev, void *ud);

static int child_start(mount_lifespan *ml, lchild *ch)
{
    worker_ctx *w = scope_worker(ml->parent);
    /* Created now, not earlier: its state starts from what the apps before it set. */
    ch->scope = scope_new(w, PAGI_SCOPE_LIFESPAN, &child_ops, ch, NULL);
    if (!ch->scope)
        return -1;
    ch->phase = CH_STARTING;
    const mount_entry *e = &ml->t->v[ch->index];
    e->h.app->handle(ch->scope, e->instance);
    return 0;
}

static void child_stop(lchild *ch)
{
    ch->phase = CH_STOPPING;
    ch->delivered = 0;
    scope_poke_receive(ch->scope);
}

static void ml_advance(void *ud)
{
    mount_lifespan *ml = ud;
    ml->advance_queued = 0;
    if (ml->done)
        return;
    if (!ml->stopping) {
        lchild *ch = &ml->c[ml->cur];
        if (ch->phase == CH_STARTING || ch->phase == CH_IDLE)
            return; /* still waiting for this app */
        if (ch->phase == CH_FAILED) {
            ml->stopping = ml->rollback = 1; /* undo what started, then fail */
        } else if (++ml->cur < ml->n) {
            if (child_start(ml, &ml->c[ml->cur]) < 0) {
                snprintf(ml->msg, sizeof ml->msg, "out of memory");
                ml->stopping = ml->rollback = 1;
            } else {
                return;
            }
        } else {
            int any = 0;
            for (size_t i = 0; i < ml->n; i++)
                any |= ml->c[i].phase == CH_RUNNING;
            if (!any) {
                ml_finish(ml, PAGI_EV_NONE, NULL); /* nobody wants lifespan: decline it */
                return;
            }
            pagi_event_type t = PAGI_EV_LIFESPAN_STARTUP_COMPLETE;
            pagi_event ev = PAGI_EVENT_INIT(t);
            if (pagi_send(ml->parent, &ev, NULL, NULL) < 0 ||
                pagi_receive(ml->parent, on_parent_event, ml) < 0) {
                log_error("lifespan: %s", pagi_scope_error(ml->parent));
                ml_finish(ml, PAGI_EV_NONE, NULL);
            }
            return;
        }
    }
    /* Stopping: the running apps in reverse order, one at a time. */
    for (size_t i = ml->n; i-- > 0;) {
        if (ml->c[i].phase == CH_STOPPING)
            return; /* still waiting for this app */
        if (ml->c[i].phase == CH_RUNNING) {
            child_stop(&ml->c[i]);
            return;
        }
    }
    if (ml->rollback)
        ml_finish(ml, PAGI_EV_LIFESPAN_STARTUP_FAILED, ml->msg);
    else if (ml->shutdown_error)
        ml_finish(ml, PAGI_EV_LIFESPAN_SHUTDOWN_FAILED, "an app's lifespan shutdown failed");
    else
        ml_finish(ml, PAGI_EV_LIFESPAN_SHUTDOWN_COMPLETE, NULL);
}

static void ml_advance_later(mount_lifespan *ml)
{
    if (ml->done || ml->advance_queued)
        return;
    if (pagi_defer(pagi_scope_loop(ml->parent), ml_advance, ml) == 0)
        ml->advance_queued = 1;
    else
        log_error("lifespan: out of memory queueing the next step");
}

static void on_parent_event(pagi_scope *s, const pagi_event *ev, void *ud)
{
    mount_lifespan *ml = ud;
    if (ev->type == PAGI_EV_LIFESPAN_STARTUP) {
        ml->cur = 0;
        if (child_start(ml, &ml->c[0]) < 0)
            ml_finish(ml, PAGI_EV_LIFESPAN_STARTUP_FAILED, "out of memory");
    } else if (ev->type == PAGI_EV_LIFESPAN_SHUTDOWN) {
        ml->stopping = 1;
        ml_advance_later(ml);
    } else {
        ml_finish(ml, PAGI_EV_NONE, NULL);
    }
}

static void ml_release(pagi_scope *s, void *data)
{
    mount_lifespan *ml = data;
    for (size_t i = 0; i < ml->n; i++)
        child_abandon(&ml->c[i]);
    free(ml->c);
    free(ml);
}

void mount_lifespan_run(pagi_scope *s, const mount_table *t)
{
    mount_lifespan *ml = calloc(1, sizeof *ml);
    lchild *c = calloc(t->n, sizeof *c);
    if (!ml || !c) {
        free(ml);
        free(c);
        pagi_scope_finish(s, "lifespan: out of memory");
        return;
    }
    ml->parent = s;
    ml->t = t;
    ml->c = c;
    ml->n = t->n;
    for (size_t i = 0; i < t->n; i++) {
        c[i].ml = ml;
        c[i].index = i;
    }
    pagi_scope_set_userdata(s, ml, ml_release);
    if (pagi_receive(s, on_parent_event, ml) < 0)
        pagi_scope_finish(s, pagi_scope_error(s));
}
