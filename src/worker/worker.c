/*
 * worker.c - a worker process: load the app, run lifespan startup, accept
 * on the inherited listeners (core/acceptors.c), and on SIGTERM drain (stop
 * accepting, close idle connections, let in-flight requests finish within
 * timeouts.shutdown, then end what is left with server_shutdown and run
 * lifespan shutdown).
 */
#include "worker.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/exitcodes.h"
#include "common/log.h"
#include "common/pool.h"
#include "common/proctitle.h"
#include "common/shm.h"
#include "worker/core/acceptors.h"
#include "worker/core/access_log.h"
#include "worker/core/app_call.h"
#include "app_registry.h"
#include "worker/core/conn.h"
#include "worker/core/crash.h"
#include "worker/http1/http1_parser.h"
#include "worker/core/log_channel.h"
#include "worker/scope/lifespan.h"
#include "worker/core/memtrim.h"
#include "worker/scope/mount.h"
#include "worker/scope/pubsub.h"
#include "worker/core/reason.h"
#include "worker/scope/scope.h"
#include "worker/core/state_table.h"

#define SHUTDOWN_GRACE 1.0   /* seconds for handlers once no connection is left */
#define DRAIN_IDLE_GRACE 1.0 /* draining: an idle keep-alive connection's last chance */
#define DRAIN_IDLE_TICK 0.1

typedef struct worker_run_ctx {
    worker_ctx w;
    acceptors acc; /* the listening sockets (core/acceptors.c) */
    int exit_code;
    int stopping;       /* lifespan shutdown started */
    int grace_over;     /* past the shutdown deadline plus the apps' grace */
    int wait_named;     /* the scopes the shutdown waits for were logged */
    mount_table mounts; /* the app, and the apps under path prefixes */
    pool_info pool;     /* the generation's worker pool (loop.pool), when it has one */
    ev_signal sig_term, sig_int, sig_quit, sig_usr1;
    ev_timer shutdown_timer, grace_timer, heartbeat;
    ev_timer drain_idle; /* draining: closes keep-alive connections idle long enough */
    ev_timer recycle;    /* max_requests reached: drain at the next loop turn */
    log_channel logs;    /* the master's log channel: our files come there */
    size_t requests_done;
    int stop_asked; /* a stop signal came (not just our own max_requests drain) */
    double drain_started;
    unsigned generation; /* for the process title */
} worker_run_ctx;

static worker_run_ctx *run_of(worker_ctx *w)
{
    return (worker_run_ctx *)w;
}

static void worker_on_lifespan_stopped(worker_ctx *w)
{
    ev_break(w->loop.ev, EVBREAK_ALL);
}

/*
 * Lifespan shutdown waits until every connection is gone and every request
 * scope released (its handler may still need what shutdown tears down),
 * but no longer than the shutdown deadline plus a short grace. Once no
 * connection is left, the handlers still running have all been told their
 * client is gone: they get that same short grace (SHUTDOWN_GRACE), not the
 * rest of timeouts.shutdown (with timeouts.shutdown 0, no deadline, they
 * are waited for).
 */
static void worker_maybe_finish(worker_run_ctx *r)
{
    if (!r->w.draining || r->stopping || r->w.n_conns > 0)
        return;
    if (r->w.n_scopes > 0 && !r->grace_over) {
        /* Handlers told their client is gone get the short grace; one still
         * working after a completed response keeps the shutdown deadline
         * (armed by worker_drain; no longer active once it has passed). */
        int deadline_passed = !ev_is_active(&r->shutdown_timer);
        if (!r->wait_named) {
            r->wait_named = 1;
            scope_log_unfinished(&r->w, "shutdown waits for");
        }
        if (r->w.cfg->timeouts.shutdown > 0 && !ev_is_active(&r->grace_timer) &&
            (deadline_passed || !scope_any_past_response(&r->w))) {
            ev_timer_set(&r->grace_timer, SHUTDOWN_GRACE, 0.);
            ev_timer_start(r->w.loop.ev, &r->grace_timer);
        }
        return;
    }
    if (r->w.n_scopes > 0)
        scope_log_unfinished(&r->w, "still running at shutdown:");
    r->stopping = 1;
    ev_timer_stop(r->w.loop.ev, &r->shutdown_timer);
    ev_timer_stop(r->w.loop.ev, &r->grace_timer);
    lifespan_stop(&r->w, worker_on_lifespan_stopped);
}

static void worker_on_grace_over(struct ev_loop *ev, ev_timer *t, int revents)
{
    worker_run_ctx *r = t->data;
    r->grace_over = 1;
    worker_maybe_finish(r);
}

static void worker_on_conn_count(worker_ctx *w)
{
    worker_run_ctx *r = run_of(w);
    if (w->draining) {
        worker_maybe_finish(r);
        return;
    }
    acceptors_on_conn_closed(&r->acc);
}

static void worker_on_shutdown_deadline(struct ev_loop *ev, ev_timer *t, int revents)
{
    worker_run_ctx *r = t->data;
    if (r->w.n_conns)
        log_info("shutdown timeout: closing %zu connection(s) with server_shutdown", r->w.n_conns);
    while (r->w.conns)
        conn_close(r->w.conns, reason_server_shutdown);
    /* Handlers just told server_shutdown get a moment to finish (armed by
     * worker_maybe_finish, or already running since the last connection went). */
    worker_maybe_finish(r);
}

/* Since when c has been waiting for a request (its keep-alive or idle
 * deadline minus the timeout that armed it), at least since the drain began. */
static double conn_idle_since(const conn *c, const worker_run_ctx *r)
{
    const pagid_timeouts *t = &r->w.cfg->timeouts;
    double since = r->drain_started;
    if (c->tmo == TMO_KEEPALIVE && t->keepalive > 0)
        since = c->deadline - t->keepalive;
    else if (c->tmo == TMO_IDLE && t->idle > 0)
        since = c->deadline - t->idle;
    return since > r->drain_started ? since : r->drain_started;
}

static void worker_close_idle(worker_run_ctx *r)
{
    double now = ev_now(r->w.loop.ev);
    conn *c = r->w.conns;
    while (c) {
        conn *next = c->next;
        if (c->state == CONN_WAIT_REQUEST && buf_size(&c->in) == 0 &&
            now - conn_idle_since(c, r) >= DRAIN_IDLE_GRACE)
            conn_close(c, NULL);
        c = next;
    }
    if (!r->w.conns)
        ev_timer_stop(r->w.loop.ev, &r->drain_idle);
}

static void worker_on_drain_idle(struct ev_loop *ev, ev_timer *t, int revents)
{
    worker_close_idle(t->data);
}

static void worker_drain(worker_run_ctx *r)
{
    worker_ctx *w = &r->w;
    if (w->draining)
        return;
    w->draining = 1;
    log_info("draining: %zu connection(s) open", w->n_conns);
    conn_notice_drain(w);
    if (w->under_master)
        proctitle_worker(w->worker_num, r->generation, 1);
    acceptors_close(&r->acc); /* the slot no longer ready; the gated peers woken */
    /* Long-lived scopes hear of it now and may end at once (a 1001 close, a
     * final event) rather than hold the stop for timeouts.shutdown. */
    scope_notice_server_drain(w);
    /* Idle keep-alive connections have nothing in flight, but a client may
     * have its next request on the way: closing now would race it. They
     * get DRAIN_IDLE_GRACE; a request that comes is served with
     * connection: close. */
    r->drain_started = ev_now(w->loop.ev);
    ev_timer_set(&r->drain_idle, 0., DRAIN_IDLE_TICK);
    ev_timer_again(w->loop.ev, &r->drain_idle);
    worker_close_idle(r);
    if (w->cfg->timeouts.shutdown > 0) { /* 0: no deadline, wait for in-flight work */
        ev_timer_set(&r->shutdown_timer, w->cfg->timeouts.shutdown, 0.);
        ev_timer_start(w->loop.ev, &r->shutdown_timer);
    }
    worker_maybe_finish(r);
}

static void worker_on_recycle(struct ev_loop *ev, ev_timer *t, int revents)
{
    worker_run_ctx *r = t->data;
    worker_drain(r);
    /* The master starts the replacement as soon as it sees our slot stop
     * being ready; SIGCHLD ("a child changed state") makes it look now. */
    if (r->w.stats)
        kill(getppid(), SIGCHLD);
}

static void worker_recycle_soon(worker_run_ctx *r)
{
    r->exit_code = EXIT_RECYCLE;
    /* Not from inside the exchange that just ended: at the next loop turn. */
    ev_timer_set(&r->recycle, 0., 0.);
    ev_timer_start(r->w.loop.ev, &r->recycle);
}

/* max_requests: past the limit the worker drains itself and exits
 * EXIT_RECYCLE; the master starts a fresh one in its place. */
static void worker_on_request_done(worker_ctx *w)
{
    worker_run_ctx *r = run_of(w);
    size_t max = w->cfg->max_requests;
    if (!max || !w->under_master || w->draining || ++r->requests_done < max ||
        r->exit_code == EXIT_RECYCLE)
        return;
    log_info("served %zu requests (max_requests): recycling this worker", r->requests_done);
    worker_recycle_soon(r);
}

int worker_recycle(struct pagi_loop *loop, const char *why)
{
    /* Apps are created with the worker's own loop (mount_table_load gets
     * &w->loop), so the loop leads back to its worker. */
    worker_ctx *w = (worker_ctx *)(void *)((char *)loop - offsetof(worker_ctx, loop));
    worker_run_ctx *r = run_of(w);
    if (!w->under_master)
        return -1;
    if (w->draining || r->exit_code == EXIT_RECYCLE)
        return 0; /* already on its way out */
    log_info("%s: recycling this worker", why);
    worker_recycle_soon(r);
    return 0;
}

/* SIGUSR1 (logrotate in single-process mode): reopen the log files by path.
 * Under a master its log channel does that, and a stray signal is ignored. */
static void worker_on_reopen(struct ev_loop *ev, ev_signal *s, int revents)
{
    worker_run_ctx *r = s->data;
    if (r->logs.fd >= 0)
        return;
    if (log_reopen() < 0)
        log_error("cannot reopen the error log");
    access_log_reopen(r->w.alog);
}

static void worker_on_signal(struct ev_loop *ev, ev_signal *s, int revents)
{
    worker_run_ctx *r = s->data;
    if (s->signum == SIGQUIT) {
        log_info("SIGQUIT: stopping now");
        ev_break(ev, EVBREAK_ALL);
        return;
    }
    /* Recycling (max_requests) is a drain already: the master's first
     * SIGTERM asks for what is happening; only a second one means "now". */
    if (r->w.draining && (r->stop_asked || r->exit_code != EXIT_RECYCLE)) {
        log_info("second stop signal: stopping now");
        ev_break(ev, EVBREAK_ALL);
        return;
    }
    r->stop_asked = 1;
    worker_drain(r);
}

/* ---- starting ---- */

static void worker_on_lifespan_started(worker_ctx *w, lifespan_outcome o, const char *msg)
{
    worker_run_ctx *r = run_of(w);
    if (o == LIFESPAN_FAILED) {
        log_error("lifespan startup failed: %s; this worker will not serve", msg ? msg : "");
        r->exit_code = EXIT_WORKER_FATAL;
        ev_break(w->loop.ev, EVBREAK_ALL);
        return;
    }
    if (w->draining) {
        worker_maybe_finish(r);
        return;
    }
    if (pool_is_process_num(w->worker_num) && w->under_master)
        log_info("pool process %d ready", w->worker_num - POOL_NUM_BASE);
    else
        log_info("worker %d ready", w->worker_num);
    if (w->stats)
        atomic_store(&w->stats->ready, 1);
    acceptors_set_accepting(&r->acc, 1);
}

static void worker_flush(void *ud)
{
    conn_flush_all(ud);
}

/* The heartbeat only advances while the loop turns: a blocked loop shows as a stale stamp.
 * A pool process's stamp stays at the start of the request it runs (set when
 * it takes it): its loop can turn while that request never ends (a PSGI
 * responder kept and never called), and the master's worker_pool.timeout
 * counts from that start, as the worker's 504 does. */
static void worker_on_heartbeat(struct ev_loop *ev, ev_timer *t, int revents)
{
    worker_run_ctx *r = t->data;
    uint64_t now = shm_now_ms();
    if (!atomic_load_explicit(&r->w.stats->pool_busy, memory_order_relaxed))
        atomic_store_explicit(&r->w.stats->heartbeat_ms, now, memory_order_relaxed);
    app_call_clock_sync(&r->w.loop, now); /* ev_now drifts from CLOCK_MONOTONIC */
}

int worker_run(const pagid_config *cfg, const worker_listener *listeners, size_t n, int worker_num,
               int under_master, shm_region *shm, unsigned generation, int pubsub_fd,
               const worker_logs *logs)
{
    signal(SIGPIPE, SIG_IGN);
    signal(SIGUSR1, SIG_IGN); /* until the reopen watcher is in place: never die of it */
    if (under_master)
        signal(SIGINT, SIG_IGN); /* the master turns a terminal ^C into SIGTERM */
    else
        signal(SIGUSR2, SIG_IGN); /* a binary upgrade needs a master; -s upgrade must not kill us */
    /* Reload is the master's (a new generation); a worker, or -w 0, must not die of SIGHUP. */
    signal(SIGHUP, SIG_IGN);
    crash_install(); /* a fatal signal in app code names the request it was serving */
    /* error_log.path set: what app code writes to stderr goes there too. */
    log_capture_stderr();
    char err[512];
    struct ev_loop *ev = ev_default_loop(EVFLAG_AUTO);
    if (!ev) {
        log_error("cannot create the event loop");
        return EXIT_WORKER_FATAL;
    }
    worker_run_ctx *r = calloc(1, sizeof *r);
    if (!r)
        return EXIT_WORKER_FATAL;
    log_channel_init(&r->logs);
    worker_ctx *w = &r->w;
    w->cfg = cfg;
    w->worker_num = worker_num;
    w->under_master = under_master;
    r->generation = generation;
    /* A pool process (common/pool.h) is a worker without listeners or
     * lifespan: its app (the Perl host) serves the pool's socket instead. */
    int pool_process = under_master && pool_is_process_num(worker_num);
    if (pool_process) {
        proctitle_pool(worker_num - POOL_NUM_BASE, generation, "idle");
        n = 0;
    } else if (under_master) { /* alone (-w 0), the command line the developer typed stays */
        proctitle_worker(worker_num, generation, 0);
    }
    w->on_conn_count = worker_on_conn_count;
    w->on_request_done = worker_on_request_done;
    w->stats = shm_claim(shm, (int)getpid(), worker_num, generation);
    w->shm = shm;
    if (shm && !w->stats)
        log_warn("no free slot in the shared region: this worker is not monitored");
    loop_init(&w->loop, ev);
    if (w->stats) { /* the blocked-loop kill names the app call it was in */
        w->loop.app_call = &w->stats->app_call;
        app_call_clock_sync(&w->loop, shm_now_ms());
    }
    w->loop.recycle = worker_recycle;
    w->loop.shared_dicts = cfg->shared_dicts;
    w->loop.n_shared_dicts = cfg->n_shared_dicts;
    if (under_master && cfg->worker_pool.processes > 0 && cfg->worker_pool.fds) {
        const pagid_pool *p = &cfg->worker_pool;
        r->pool = (pool_info){.process = pool_process,
                              .num = pool_process ? worker_num - POOL_NUM_BASE : 0,
                              .fds = p->fds,
                              .processes = p->processes,
                              .queue_limit = p->queue_limit,
                              .timeout = p->timeout,
                              .max_requests = (long)cfg->max_requests,
                              .handlers = p->handlers,
                              .app = cfg->app,
                              .shm = shm,
                              .self = w->stats,
                              .generation = generation};
        w->loop.pool = &r->pool;
    } else if (pool_process) {
        log_error("pool process without its pool's socket");
        r->exit_code = EXIT_WORKER_FATAL;
        loop_destroy(&w->loop);
        free(r);
        ev_loop_destroy(ev);
        return EXIT_WORKER_FATAL;
    }
    w->loop.debug = cfg->debug;
    if (cfg->debug)
        log_info("debug mode: app interface misuse, stale handles and callbacks holding the loop "
                 "over %.0f ms are logged",
                 LOOP_HOLD_WARN_MS);
    w->loop.flush = worker_flush;
    w->loop.flush_ud = w;
    /* Before the apps' create: a lifespan startup may subscribe. */
    w->pubsub = pubsub_new(w, pubsub_fd);
    if (!w->pubsub)
        log_warn("out of memory for publish/subscribe: it is off in this worker");
    r->exit_code = EXIT_OK;
    /* The files the master opened for us (as root) wait on our log channel,
     * sent before the fork: nothing is opened by path under a master. */
    int access_fd = logs ? logs->access_fd : -1;
    if (logs && logs->chan >= 0 &&
        log_channel_start(&r->logs, logs->chan, ev, &w->alog, &access_fd) < 0) {
        r->exit_code = EXIT_WORKER_FATAL;
        goto out;
    }
    if (access_log_open(&w->alog, cfg, access_fd, ev, w->stats, err, sizeof err) < 0) {
        log_error("%s", err);
        r->exit_code = EXIT_WORKER_FATAL;
        goto out;
    }

    /* Load and create every app (the top-level one, then the mounts'). */
    if (mount_table_load(&r->mounts, cfg, &w->loop, err, sizeof err) < 0) {
        log_error("%s", err);
        r->exit_code = EXIT_WORKER_FATAL;
        goto out;
    }
    mount_table_install(&r->mounts, w);

    if (acceptors_init(&r->acc, w, listeners, n) < 0) {
        r->exit_code = EXIT_WORKER_FATAL;
        goto out;
    }
    ev_init(&r->shutdown_timer, worker_on_shutdown_deadline);
    r->shutdown_timer.data = r;
    ev_init(&r->grace_timer, worker_on_grace_over);
    r->grace_timer.data = r;
    ev_init(&r->drain_idle, worker_on_drain_idle);
    r->drain_idle.data = r;
    ev_init(&r->recycle, worker_on_recycle);
    r->recycle.data = r;
    ev_signal_init(&r->sig_term, worker_on_signal, SIGTERM);
    r->sig_term.data = r;
    ev_signal_start(ev, &r->sig_term);
    ev_signal_init(&r->sig_quit, worker_on_signal, SIGQUIT);
    r->sig_quit.data = r;
    ev_signal_start(ev, &r->sig_quit);
    ev_signal_init(&r->sig_usr1, worker_on_reopen, SIGUSR1);
    r->sig_usr1.data = r;
    ev_signal_start(ev, &r->sig_usr1);
    if (!under_master) {
        ev_signal_init(&r->sig_int, worker_on_signal, SIGINT);
        r->sig_int.data = r;
        ev_signal_start(ev, &r->sig_int);
    }

    ev_init(&r->heartbeat, worker_on_heartbeat);
    r->heartbeat.data = r;
    if (w->stats) {
        ev_timer_set(&r->heartbeat, 0., 0.5);
        ev_timer_again(ev, &r->heartbeat);
        ev_unref(ev); /* the heartbeat alone must not keep the loop running */
    }
    if (pool_process) /* no lifespan: the workers run the app's */
        worker_on_lifespan_started(w, LIFESPAN_OK, NULL);
    else if (lifespan_start(w, worker_on_lifespan_started) < 0) {
        log_error("cannot start the lifespan scope");
        r->exit_code = EXIT_WORKER_FATAL;
        goto out;
    }
    ev_run(ev, 0);
    /* The loop is over: nothing may start lifespan shutdown or a grace now. */
    r->stopping = 1;

    /* Whatever is still open ends now; queued callbacks get their turn. */
    while (w->conns)
        conn_close(w->conns, reason_server_shutdown);
    /* First the disconnects just queued: a handler with a receive pending
     * hears its client go and ends as it would any time (a finish would
     * withdraw that receive unheard, and whatever the handler keeps for the
     * scope would outlive it, e.g. a broadcast group's member). */
    loop_drain_all(&w->loop);
    scope_abandon_all(w); /* handlers past the grace: released while their app is loaded */
    loop_drain_all(&w->loop);
    lifespan_free(w);
    loop_drain_all(&w->loop);
    ev_signal_stop(ev, &r->sig_term);
    ev_signal_stop(ev, &r->sig_quit);
    ev_signal_stop(ev, &r->sig_int);
    ev_signal_stop(ev, &r->sig_usr1);
    ev_timer_stop(ev, &r->shutdown_timer);
    ev_timer_stop(ev, &r->grace_timer);
    ev_timer_stop(ev, &r->drain_idle);
    ev_timer_stop(ev, &r->recycle);
    if (ev_is_active(&r->heartbeat)) {
        ev_ref(ev);
        ev_timer_stop(ev, &r->heartbeat);
    }

out:;
    log_channel_stop(&r->logs, ev);
    int code = r->exit_code;
    access_log_close(w->alog); /* after the last connection closed: its lines are in */
    w->alog = NULL;
    mount_table_free(&r->mounts);
    loop_drain_all(&w->loop); /* what the apps' teardown queued (timers they stopped) */
    pubsub_free(w->pubsub);   /* after every scope, so after their subscriptions */
    w->pubsub = NULL;
    state_table_unref(w->state);
    scope_quarantine_free(w);
    buf_free(&w->scratch);
    buf_free(&w->rbuf);
    h1_parser_free(w->h1_spare);
    w->h1_spare = NULL;
    memtrim_stop();
    loop_destroy(&w->loop);
    acceptors_free(&r->acc); /* the listening sockets stay the caller's */
    free(r);
    ev_loop_destroy(ev);
    if (pool_is_process_num(worker_num))
        log_info("pool process %d exiting (%d)", worker_num - POOL_NUM_BASE, code);
    else
        log_info("worker %d exiting (%d)", worker_num, code);
    /* The slot stays ours until the master reaps us and frees it. */
    return code;
}
