/*
 * loop.h - the worker's loop: a libev loop plus the run queue, and the
 * public loop services (timers, fd watches, deferred calls) apps use.
 *
 * Each iteration, just before the loop would block, loop_before_sleep runs
 * one round of the run queue and then the flush hook (which writes every
 * connection's pending output, so a response's head and body leave in one
 * write). If the round queued more work, an idle watcher keeps the next
 * poll from blocking.
 */
#ifndef PAGID_LOOP_H
#define PAGID_LOOP_H

#include <ev.h>
#include <pagi/pagi.h>

#include "runq.h"

struct pagi_loop {
    struct ev_loop *ev;
    runq rq;
    ev_prepare prepare;
    ev_idle idle;
    void (*flush)(void *ud); /* runs after each run-queue round */
    void *flush_ud;
    /* Set by the worker: end this process after its work (loop_recycle). */
    int (*recycle)(struct pagi_loop *l, const char *why);
    /* The config's `shared_dicts` (their mappings), for pagi_shared_dict. */
    const struct pagid_shared_dict *shared_dicts;
    size_t n_shared_dicts;
    /* Set by the worker: its generation's worker pool (common/pool.h), or
     * NULL; the Perl host dispatches to it, or serves it in a pool process. */
    const struct pool_info *pool;
    /* Debug mode (pagid --debug): app callbacks are timed. */
    int debug;
    unsigned hold_depth; /* timed callbacks now running (nested) */
    int hold_reported;   /* an inner one was reported: the outer ones are not */
    /* Debug mode: stopped timers and fd watches kept (not freed) so a stale
     * handle is recognised; the oldest is freed past LOOP_KEPT_MAX. */
    void **kept;
    size_t kept_head, kept_n;
    /* The app call in progress, recorded for the master (app_call.h): the
     * worker's record in its shared slot (NULL: none), how deep the calls
     * nest, whose request the record names, and ev_now's offset to
     * CLOCK_MONOTONIC. */
    struct shm_app_call *app_call;
    unsigned app_call_depth;
    const void *app_call_id;
    uint32_t app_call_gen;
    double app_call_clock_offset;
};

#define LOOP_KEPT_MAX 256

/* A callback holding the loop this long is reported in debug mode. */
#define LOOP_HOLD_WARN_MS 100.0

int loop_init(pagi_loop *l, struct ev_loop *ev);
/**
 * Ask the process that owns the loop to drain and exit so that its master
 * replaces it (psgix.harakiri.commit); -1 when nothing would replace it.
 * Through a hook, so hosts (Perl) need not link the worker itself.
 */
int loop_recycle(pagi_loop *l, const char *why);
void loop_destroy(pagi_loop *l);
/** Queue a closure on the run queue and make sure the loop will run it. */
int loop_queue(pagi_loop *l, runq_fn fn, runq_any_fn cb, void *a, void *b, void *c);
/** Run queue rounds until empty (used at shutdown). */
void loop_drain_all(pagi_loop *l);
/** The libev loop under l: the Perl host's IO::Async/AnyEvent watchers
 * (signals, child processes) go on it directly. */
struct ev_loop *loop_ev(pagi_loop *l);

/**
 * Debug mode's loop-hold check, around each call into app code:
 * loop_hold_begin gives a start time (0 when debug mode is off), and
 * loop_hold_end the milliseconds the call held the loop when that is worth
 * a warning (>= LOOP_HOLD_WARN_MS, the innermost timed call only), else 0.
 * The clock is CLOCK_MONOTONIC, not ev_now (frozen during a callback).
 */
double loop_hold_start(pagi_loop *l);
double loop_hold_finish(pagi_loop *l, double t0);
static inline double loop_hold_begin(pagi_loop *l)
{
    return l->debug ? loop_hold_start(l) : 0;
}
static inline double loop_hold_end(pagi_loop *l, double t0)
{
    return t0 == 0 ? 0 : loop_hold_finish(l, t0);
}

#endif
