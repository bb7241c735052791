/*
 * loop.c - the worker loop's safe point (run queue + flush) and the public
 * loop services of pagi.h: timers, fd watches, deferred calls, logging;
 * and pagi_shared_dict (pagi_shared.h), a lookup in the loop's dict list.
 */
#include "loop.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pagi/pagi_shared.h>

#include "common/config.h"
#include "common/log.h"
#include "app_call.h"
#include "memtrim.h"

/* Run-queue items kept between rounds (40 B each): what a busy worker reuses. */
#define LOOP_RUNQ_KEEP 4096

/* A live timer or fd watch; a stopped one has HANDLE_STOPPED until it is
 * freed (at the next safe point, or later in debug mode). */
#define TIMER_MAGIC 0x71AE4u
#define IO_MAGIC 0x10AA7u
#define HANDLE_STOPPED 0xDEAD71u

struct pagi_timer {
    unsigned magic;
    ev_timer w;
    pagi_loop *loop;
    pagi_timer_cb cb;
    void *ud;
};

struct pagi_io {
    unsigned magic;
    ev_io w;
    pagi_loop *loop;
    pagi_io_cb cb;
    void *ud;
};

static void loop_on_idle(struct ev_loop *ev, ev_idle *w, int revents)
{
    /* Nothing to do: being active is what keeps the poll from blocking. */
}

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double loop_hold_start(pagi_loop *l)
{
    l->hold_depth++;
    return mono_now();
}

double loop_hold_finish(pagi_loop *l, double t0)
{
    double ms = (mono_now() - t0) * 1000.0;
    int report = ms >= LOOP_HOLD_WARN_MS && !l->hold_reported;
    if (report)
        l->hold_reported = 1;
    if (--l->hold_depth == 0)
        l->hold_reported = 0;
    return report ? ms : 0;
}

static void defer_run(const runq_item *it);

/* Debug mode: each job timed. A scope's callbacks report themselves (with
 * the request); what is left is a server job or one the timing missed. */
static void loop_round(pagi_loop *l)
{
    if (!l->debug) {
        runq_drain(&l->rq);
        return;
    }
    for (size_t n = runq_pending(&l->rq); n > 0; n--) {
        runq_item it;
        if (!runq_pop(&l->rq, &it))
            break;
        double t0 = loop_hold_begin(l);
        it.fn(&it);
        double ms = loop_hold_end(l, t0);
        if (ms > 0)
            log_warn("debug: %s held the loop for %.0f ms",
                     it.fn == defer_run ? "an app's defer callback" : "a run-queue job", ms);
    }
}

static void loop_on_prepare(struct ev_loop *ev, ev_prepare *w, int revents)
{
    pagi_loop *l = w->data;
    loop_round(l);
    if (l->flush)
        l->flush(l->flush_ud);
    if (runq_pending(&l->rq)) {
        ev_idle_start(ev, &l->idle);
    } else {
        ev_idle_stop(ev, &l->idle);
        /* After a burst (thousands of callbacks in one round: many connections
         * closing at once, an app sending in a tight loop) the ring goes. */
        size_t freed = runq_shrink(&l->rq, LOOP_RUNQ_KEEP);
        if (freed)
            memtrim_note(ev, freed);
    }
}

int loop_recycle(pagi_loop *l, const char *why)
{
    return l->recycle ? l->recycle(l, why) : -1;
}

int loop_init(pagi_loop *l, struct ev_loop *ev)
{
    l->ev = ev;
    runq_init(&l->rq);
    l->flush = NULL;
    l->flush_ud = NULL;
    l->recycle = NULL;
    l->shared_dicts = NULL;
    l->n_shared_dicts = 0;
    l->debug = 0;
    l->hold_depth = 0;
    l->hold_reported = 0;
    l->kept = NULL;
    l->kept_head = l->kept_n = 0;
    ev_prepare_init(&l->prepare, loop_on_prepare);
    l->prepare.data = l;
    ev_prepare_start(ev, &l->prepare);
    ev_unref(ev); /* the safe-point watcher alone must not keep the loop alive */
    ev_idle_init(&l->idle, loop_on_idle);
    return 0;
}

struct ev_loop *loop_ev(pagi_loop *l) { return l->ev; }

pagi_shared *pagi_shared_dict(pagi_loop *l, const char *name)
{
    for (size_t i = 0; l && name && i < l->n_shared_dicts; i++)
        if (!strcmp(l->shared_dicts[i].name, name))
            return l->shared_dicts[i].dict;
    return NULL;
}

void loop_destroy(pagi_loop *l)
{
    ev_ref(l->ev);
    ev_prepare_stop(l->ev, &l->prepare);
    ev_idle_stop(l->ev, &l->idle);
    runq_free(&l->rq);
    for (size_t i = 0; i < l->kept_n; i++)
        free(l->kept[(l->kept_head + i) % LOOP_KEPT_MAX]);
    free(l->kept);
    l->kept = NULL;
    l->kept_n = 0;
}

int loop_queue(pagi_loop *l, runq_fn fn, runq_any_fn cb, void *a, void *b, void *c)
{
    if (runq_push(&l->rq, fn, cb, a, b, c) < 0)
        return -1;
    ev_idle_start(l->ev, &l->idle);
    return 0;
}

void loop_drain_all(pagi_loop *l)
{
    for (int rounds = 0; runq_pending(&l->rq) && rounds < 10000; rounds++) {
        loop_round(l);
        if (l->flush)
            l->flush(l->flush_ud);
    }
}

/* ---- public loop services ---- */

static void timer_on_fire(struct ev_loop *ev, ev_timer *w, int revents)
{
    pagi_timer *t = w->data;
    pagi_loop *l = t->loop;
    double t0 = loop_hold_begin(l);
    app_call_enter(l, "timer", NULL);
    t->cb(t, t->ud); /* may stop t: freed later, at the safe point */
    app_call_leave(l);
    double ms = loop_hold_end(l, t0);
    if (ms > 0)
        log_warn("debug: an app's timer callback held the loop for %.0f ms", ms);
}

pagi_timer *pagi_timer_start(pagi_loop *l, double after, double repeat, pagi_timer_cb cb,
                             void *ud)
{
    if (!l || !cb || after < 0 || repeat < 0)
        return NULL;
    pagi_timer *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->magic = TIMER_MAGIC;
    t->loop = l;
    t->cb = cb;
    t->ud = ud;
    ev_timer_init(&t->w, timer_on_fire, after, repeat);
    t->w.data = t;
    ev_timer_start(l->ev, &t->w);
    return t;
}

/* A stopped timer or watch: freed, or in debug mode kept a while longer. */
static void free_job(const runq_item *it)
{
    pagi_loop *l = it->b;
    if (!l || !l->debug) {
        free(it->a);
        return;
    }
    if (!l->kept && !(l->kept = calloc(LOOP_KEPT_MAX, sizeof *l->kept))) {
        free(it->a);
        return;
    }
    if (l->kept_n == LOOP_KEPT_MAX) {
        free(l->kept[l->kept_head]);
        l->kept_head = (l->kept_head + 1) % LOOP_KEPT_MAX;
        l->kept_n--;
    }
    l->kept[(l->kept_head + l->kept_n++) % LOOP_KEPT_MAX] = it->a;
}

/* A second stop (or a stop of something else): refused, logged. Seen in
 * any mode until the handle is freed at the safe point; in debug mode for
 * the last LOOP_KEPT_MAX stopped handles. */
static int stale(unsigned magic, unsigned want, const char *fn, const void *h)
{
    if (magic == want)
        return 0;
    log_error("%s: stale handle %p (%s)", fn, h,
              magic == HANDLE_STOPPED ? "already stopped" : "not a live handle");
    return 1;
}

void pagi_timer_stop(pagi_timer *t)
{
    if (!t || stale(t->magic, TIMER_MAGIC, __func__, t))
        return;
    t->magic = HANDLE_STOPPED;
    ev_timer_stop(t->loop->ev, &t->w);
    /* Freed at the safe point: the caller may be inside this timer's callback. */
    if (loop_queue(t->loop, free_job, NULL, t, t->loop, NULL) < 0)
        free(t);
}

static void io_on_ready(struct ev_loop *ev, ev_io *w, int revents)
{
    pagi_io *io = w->data;
    int ev_mask = ((revents & EV_READ) ? PAGI_IO_READ : 0) | ((revents & EV_WRITE) ? PAGI_IO_WRITE : 0);
    pagi_loop *l = io->loop;
    double t0 = loop_hold_begin(l);
    app_call_enter(l, "io watch", NULL);
    io->cb(io, io->w.fd, ev_mask, io->ud);
    app_call_leave(l);
    double ms = loop_hold_end(l, t0);
    if (ms > 0)
        log_warn("debug: an app's io watch callback held the loop for %.0f ms", ms);
}

pagi_io *pagi_io_watch(pagi_loop *l, int fd, int events, pagi_io_cb cb, void *ud)
{
    if (!l || !cb || fd < 0 || !(events & (PAGI_IO_READ | PAGI_IO_WRITE)))
        return NULL;
    pagi_io *io = calloc(1, sizeof *io);
    if (!io)
        return NULL;
    io->magic = IO_MAGIC;
    io->loop = l;
    io->cb = cb;
    io->ud = ud;
    ev_io_init(&io->w, io_on_ready, fd,
               ((events & PAGI_IO_READ) ? EV_READ : 0) | ((events & PAGI_IO_WRITE) ? EV_WRITE : 0));
    io->w.data = io;
    ev_io_start(l->ev, &io->w);
    return io;
}

void pagi_io_stop(pagi_io *io)
{
    if (!io || stale(io->magic, IO_MAGIC, __func__, io))
        return;
    io->magic = HANDLE_STOPPED;
    ev_io_stop(io->loop->ev, &io->w);
    if (loop_queue(io->loop, free_job, NULL, io, io->loop, NULL) < 0)
        free(io);
}

static void defer_run(const runq_item *it)
{
    pagi_loop *l = it->b;
    app_call_enter(l, "defer", NULL);
    ((pagi_defer_cb)it->cb)(it->a);
    app_call_leave(l);
}

int pagi_defer(pagi_loop *l, pagi_defer_cb cb, void *ud)
{
    if (!l || !cb)
        return -1;
    return loop_queue(l, defer_run, (runq_any_fn)cb, ud, l, NULL);
}

double pagi_loop_now(const pagi_loop *l) { return ev_now(l->ev); }

void pagi_log(pagi_loop *l, int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (level < 0)
        level = 0;
    if (level > LOG_LVL_DEBUG)
        level = LOG_LVL_DEBUG;
    log_vmsg((log_level)level, fmt, ap);
    va_end(ap);
}
