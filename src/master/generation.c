/*
 * generation.c - the process table of one generation: fork workers, decide
 * what a dead worker's slot becomes (respawn at once, after a backoff, or
 * never), read readiness and heartbeats from the shared region, add and
 * remove workers. No signal handling and no policy across generations here:
 * that is supervisor.c's.
 *
 * What the master sends a worker (worker_run must match):
 *   SIGTERM  drain: stop accepting, finish in-flight work within
 *            timeouts.shutdown, lifespan shutdown, exit 0.
 *   SIGQUIT  stop now, exit 0.
 *   SIGUSR1  reopen the log files.
 *   SIGKILL  straggler still alive at the deadline, or a blocked event loop.
 */
#include "generation.h"
#include "shdicts.h"
#include "pubsub_broker.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/exitcodes.h"
#include "common/log.h"
#include "gen_logs.h"
#include "common/pool.h"
#include "worker/worker.h"
#include "privileges.h"
#include "respawn.h"
#include "supervisor.h"

/* A heartbeat younger than this counts as fresh (beats come every 500 ms). */
#define GEN_FRESH_MS 2000

static double now_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

const char *gen_state_name(gen_state st)
{
    static const char *const names[] = {"starting", "active", "draining", "failed"};
    return names[st];
}

generation *gen_new(unsigned id, pagid_config *cfg, int owns_cfg, listener_set *ls, int nworkers)
{
    generation *g = calloc(1, sizeof *g);
    int cap = nworkers < 1 ? 1 : nworkers;
    if (!g || !(g->slots = calloc((size_t)cap, sizeof *g->slots))) {
        free(g);
        return NULL;
    }
    g->id = id;
    g->state = GEN_STARTING;
    g->cfg = cfg;
    g->owns_cfg = owns_cfg;
    g->ls = *ls;
    *ls = (listener_set){0};
    g->n = nworkers;
    g->cap = cap;
    g->preload = config_preload_wanted(cfg);
    g->access_fd = -1;
    zygote_init(&g->zy);
    for (int i = 0; i < nworkers; i++) {
        g->slots[i].num = i + 1;
        g->slots[i].respawn = 1;
    }
    if (gen_pool_open(g) < 0 || gen_pool_add_slots(g) < 0) {
        gen_pool_close(g);
        *ls = g->ls; /* the caller keeps its sockets */
        free(g->slots);
        free(g);
        return NULL;
    }
    return g;
}

void gen_free(generation *g, const generation *others, int unlink_files)
{
    for (size_t i = 0; g->ls.unix_ino && i < g->ls.n; i++) {
        int shared = 0;
        for (const generation *o = others; o && !shared; o = o->next)
            shared = o != g && listeners_has_unix(&o->ls, g->ls.unix_dev[i], g->ls.unix_ino[i]);
        if (shared || !unlink_files)
            g->ls.unix_ino[i] = 0; /* still served by someone: keep the file */
    }
    listeners_destroy(&g->ls);
    zygote_close(&g->zy);
    shdicts_detach(g->cfg, others);
    gen_logs_close(g);
    for (int i = 0; i < g->n; i++)
        gen_slot_logs_close(&g->slots[i]);
    gen_pool_close(g);
    if (g->owns_cfg) {
        config_free(g->cfg);
        free(g->cfg);
    }
    free(g->slots);
    free(g);
}

void gen_child_prepare(const gen_env *e, generation *g, const char *role)
{
    struct sigaction dfl = {.sa_handler = SIG_DFL}, ign = {.sa_handler = SIG_IGN};
    sigemptyset(&dfl.sa_mask);
    sigemptyset(&ign.sa_mask);
    sigaction(SIGCHLD, &dfl, NULL);
    sigaction(SIGTERM, &dfl, NULL);
    sigaction(SIGQUIT, &dfl, NULL);
    /* The master's operator signals mean nothing to a worker; SIGUSR1 is
     * ignored until worker_run installs its handler (log reopen). */
    static const int ignored[] = {SIGINT,  SIGHUP,   SIGPIPE, SIGUSR1,
                                  SIGUSR2, SIGWINCH, SIGTTIN, SIGTTOU};
    for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++)
        sigaction(ignored[i], &ign, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);

    log_set_role(role);

    /* Only this generation's sockets: a removed address must really close
     * once the generation that had it is gone, and an old zygote must see
     * its channel close when the master closes it. */
    for (generation *o = e->all; o; o = o->next) {
        if (o != g) {
            listeners_close(&o->ls);
            gen_pool_close(o);
        }
        zygote_close(&o->zy);
        /* The master's ends of the log channels, and its own copies of
         * the access logs: a child gets its files over its own channel. */
        gen_logs_close(o);
        for (int i = 0; i < o->n; i++)
            gen_slot_logs_close(&o->slots[i]);
    }
    broker_child_close(e->broker);
}

void gen_child_attach(const gen_env *e)
{
    /* A worker must not outlive its master (kill -9 of the master): the
     * kernel sends SIGTERM then. Only after the switch of user: the kernel
     * clears the death signal when the credentials change. If the master
     * died before prctl took effect, getppid() has already changed. */
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0)
        log_warn("prctl(PR_SET_PDEATHSIG): %s", strerror(errno));
    if (getppid() != e->master_pid)
        _exit(EXIT_OK);
}

void gen_child_work(const gen_env *e, generation *g, int num, int pubsub_fd, int log_chan)
{
    worker_logs logs = {.chan = log_chan, .access_fd = -1};
    int rc = worker_run(g->cfg, g->ls.items, g->ls.n, num, 1, e->shm, g->id, pubsub_fd, &logs);
    fflush(NULL);
    _exit(rc);
}

/* The worker process: never returns into the master's code. */
static void __attribute__((noreturn))
child_main(const gen_env *e, generation *g, worker_slot *w, int pubsub_fd, int log_chan)
{
    char role[32];
    gen_slot_label(w, role, sizeof role);
    gen_child_prepare(e, g, role);

    /* The master keeps root (to bind again on reload); workers never
     * run application code with it. Failing to drop is fatal: a respawn
     * would fail the same way. */
    if (priv_drop_for(g->cfg) < 0)
        _exit(EXIT_WORKER_FATAL);
    gen_child_attach(e);
    gen_child_work(e, g, w->num, pubsub_fd, log_chan);
}

void gen_slot_started(worker_slot *w, pid_t pid, double now)
{
    w->pid = pid;
    w->state = WS_RUNNING;
    w->started = now;
    w->ready = 0;
    w->hb_killed = 0;
    w->hb_reported = 0;
    w->kill_errno = 0;
    w->draining = 0;
}

void gen_slot_pubsub_close(const gen_env *e, worker_slot *w)
{
    if (w->pubsub_peer && e->broker)
        broker_peer_close(e->broker, w->pubsub_peer - 1);
    w->pubsub_peer = 0;
}

void gen_spawn(const gen_env *e, generation *g, worker_slot *w)
{
    double now = now_mono();
    gen_slot_pubsub_close(e, w); /* a slot given up before its worker ran */
    gen_slot_logs_close(w);
    if (gen_zygote_spawn(e, g, w, now) == 0)
        return;
    /* Its log files come over its own channel, sent before the fork. */
    int log_master, log_chan = gen_logs_channel(g, &log_master);
    if (log_chan < 0) {
        w->state = WS_BACKOFF;
        w->restart_at = now + 1.0;
        return;
    }
    w->log_chan = log_master + 1;
    /* Its pub/sub channel is made before the fork, so the worker has it
     * from its first instruction (docs/pubsub.md). */
    int pubsub_fd = -1, peer = e->broker ? broker_peer_new(e->broker, &pubsub_fd) : -1;
    /* Buffered stdio written before the fork would be flushed twice. */
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0)
        child_main(e, g, w, pubsub_fd, log_chan);
    close(log_chan);
    if (peer >= 0) {
        broker_peer_forked(e->broker, peer, pubsub_fd, pid);
        if (pid < 0)
            broker_peer_close(e->broker, peer);
    }
    if (pid < 0) {
        /* Out of processes or memory: retry, do not give up on the slot. */
        log_error("cannot fork worker %d: %s; retrying in %.0fs", w->num, strerror(errno),
                  RESPAWN_FORK_RETRY_S);
        gen_slot_logs_close(w);
        w->state = WS_BACKOFF;
        w->restart_at = now + RESPAWN_FORK_RETRY_S;
        return;
    }
    gen_slot_started(w, pid, now);
    w->pubsub_peer = peer + 1;
    char label[32];
    log_info("%s started (pid %d, generation %u)", gen_slot_label(w, label, sizeof label),
             (int)pid, g->id);
}

void gen_spawn_all(const gen_env *e, generation *g)
{
    for (int i = 0; i < g->n; i++)
        if (g->slots[i].respawn && g->slots[i].state == WS_EMPTY)
            gen_spawn(e, g, &g->slots[i]);
}

worker_slot *gen_find(generation *list, pid_t pid, generation **owner)
{
    for (generation *g = list; g; g = g->next)
        for (int i = 0; i < g->n; i++)
            if (g->slots[i].state == WS_RUNNING && g->slots[i].pid == pid) {
                *owner = g;
                return &g->slots[i];
            }
    return NULL;
}

static void describe_status(int status, char *buf, size_t len)
{
    if (WIFSIGNALED(status))
        snprintf(buf, len, "signal %d%s", WTERMSIG(status),
                 WCOREDUMP(status) ? ", core dumped" : "");
    else
        snprintf(buf, len, "exit status %d", WEXITSTATUS(status));
}

void gen_on_exit(const gen_env *e, generation *g, worker_slot *w, int status, double now,
                 int respawn_ok)
{
    char how[48];
    describe_status(status, how, sizeof how);
    pid_t pid = w->pid;
    shm_release(e->shm, (int)pid);
    gen_slot_pubsub_close(e, w);
    gen_slot_logs_close(w);
    w->pid = 0;
    w->ready = 0;
    int wanted = respawn_ok && w->respawn && g->state != GEN_DRAINING && g->state != GEN_FAILED;
    respawn_verdict v = respawn_decide(&(respawn_facts){.status = status,
                                                        .wanted = wanted,
                                                        .uptime_s = now - w->started,
                                                        .fast_crashes = w->fast_crashes});
    w->fast_crashes = v.fast_crashes;
    const char *what = w->hb_killed ? "was killed for a stale heartbeat"
                       : WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "exited unexpectedly"
                                                                       : "crashed";
    char label[32];
    gen_slot_label(w, label, sizeof label);
    switch (v.action) {
    case RESPAWN_FATAL:
        w->state = WS_FATAL;
        log_error("%s (pid %d) could not start (%s: fatal); not restarting", label,
                  (int)pid, how);
        break;
    case RESPAWN_NONE:
        w->state = WS_EXITED;
        if (v.as_asked)
            log_info("%s (pid %d, generation %u) exited", label, (int)pid, g->id);
        else
            log_warn("%s (pid %d, generation %u) exited (%s)", label, (int)pid, g->id, how);
        break;
    case RESPAWN_RECYCLE:
        log_info("%s (pid %d) recycled after max_requests; starting its replacement", label,
                 (int)pid);
        gen_spawn(e, g, w);
        break;
    case RESPAWN_NOW:
        log_error("%s (pid %d) %s (%s); restarting now", label, (int)pid, what, how);
        gen_spawn(e, g, w);
        break;
    case RESPAWN_LATER:
        log_error("%s (pid %d) %s (%s); crash loop: restarting in %ums (%u fast crashes "
                  "in a row)",
                  label, (int)pid, what, how, v.delay_ms, w->fast_crashes);
        w->state = WS_BACKOFF;
        w->restart_at = now + v.delay_ms / 1000.0;
        break;
    }
}

/* For messages: the signals the master sends. */
static const char *sig_name(int signo)
{
    switch (signo) {
    case SIGTERM:
        return "SIGTERM";
    case SIGQUIT:
        return "SIGQUIT";
    case SIGKILL:
        return "SIGKILL";
    case SIGUSR1:
        return "SIGUSR1";
    default:
        return "a signal";
    }
}

/*
 * kill(2) one worker. "Already gone" is no failure (it is reaped soon). Any
 * other is logged once per worker and error, EPERM loudly: the master then
 * cannot stop the worker at all, because it runs as another user and the
 * master lacks CAP_KILL (a unit's CapabilityBoundingSet= without it).
 * 0 when sent, -1 when not.
 */
static int kill_worker(worker_slot *w, int signo)
{
    /* Asked of the zygote, no pid yet (never kill(0)): its report sees
     * `draining` and passes the stop on. */
    if (w->pid <= 0)
        return 0;
    if (kill(w->pid, signo) == 0 || errno == ESRCH)
        return 0;
    int e = errno;
    if (w->kill_errno != e) {
        if (e == EPERM)
            log_error("cannot send %s to worker %d (pid %d): %s: the master lacks CAP_KILL and "
                      "the worker runs as another user; it can be neither stopped nor restarted "
                      "(add CAP_KILL to the unit's CapabilityBoundingSet=)",
                      sig_name(signo), w->num, (int)w->pid, strerror(e));
        else
            log_error("cannot send %s to worker %d (pid %d): %s", sig_name(signo), w->num,
                      (int)w->pid, strerror(e));
    }
    w->kill_errno = e;
    return -1;
}

int gen_count_unkillable(const generation *g)
{
    int c = 0;
    for (int i = 0; i < g->n; i++)
        c += g->slots[i].state == WS_RUNNING && g->slots[i].kill_errno == EPERM;
    return c;
}

void gen_signal(generation *g, int signo)
{
    /* The zygote dies of SIGTERM, SIGQUIT and SIGKILL, and reopens its log on SIGUSR1. */
    if (g->zy.pid > 0 && kill(g->zy.pid, signo) < 0 && errno != ESRCH)
        log_error("cannot send a signal to the zygote (pid %d): %s", (int)g->zy.pid,
                  strerror(errno));
    for (int i = 0; i < g->n; i++) {
        worker_slot *w = &g->slots[i];
        if (w->state != WS_RUNNING || w->pid <= 0)
            continue;
        if (signo == SIGTERM) {
            /* A worker takes a second SIGTERM for "stop now": say it once. */
            if (w->draining)
                continue;
            /* The pool serves the workers' requests to their end: its
             * processes drain once the workers are gone (gen_pool_drain_step). */
            if (gen_is_pool_slot(w) && gen_count_workers(g) > 0)
                continue;
            w->draining = 1;
        }
        kill_worker(w, signo);
    }
}

int gen_count(const generation *g, worker_state st)
{
    int c = 0;
    for (int i = 0; i < g->n; i++)
        c += g->slots[i].state == st;
    return c;
}

int gen_live(const generation *g)
{
    return gen_count(g, WS_RUNNING) + gen_count(g, WS_BACKOFF);
}

void gen_restart_due(const gen_env *e, generation *g, double now)
{
    for (int i = 0; i < g->n; i++)
        if (g->slots[i].state == WS_BACKOFF && now >= g->slots[i].restart_at)
            gen_spawn(e, g, &g->slots[i]);
}

int gen_poll_ready(const gen_env *e, generation *g)
{
    int all = 1;
    for (int i = 0; i < g->n; i++) {
        worker_slot *w = &g->slots[i];
        if (w->state != WS_RUNNING)
            continue;
        if (!w->ready) {
            /* Without the shared region nothing can be known: assume ready. */
            shm_worker *sw = shm_find(e->shm, (int)w->pid);
            w->ready = !e->shm || (sw && atomic_load(&sw->ready));
        }
        all &= w->ready;
    }
    return all;
}

/*
 * What the worker's loop is inside, from its record (shm_app_call), for the
 * kill line: "in GET /slow?x=1 (the app's handle callback, started 5.0s ago"
 * or "(in no app call" (the caller closes the parenthesis).
 */
static void describe_app_call(const shm_app_call *rec, uint64_t now_ms, char *out, size_t n)
{
    shm_app_call c;
    uint64_t started = 0;
    if (shm_app_call_read(rec, &c) == 0)
        started = atomic_load_explicit(&c.started_ms, memory_order_relaxed);
    if (!started) {
        snprintf(out, n, "(in no app call");
        return;
    }
    double ago = now_ms > started ? (double)(now_ms - started) / 1000.0 : 0.0;
    if (c.method[0])
        snprintf(out, n, "in %s %s (the app's %s callback, started %.1fs ago", c.method, c.target,
                 c.kind, ago);
    else if (c.target[0])
        snprintf(out, n, "in the %s (the app's %s callback, started %.1fs ago", c.target, c.kind,
                 ago);
    else
        snprintf(out, n, "in the app's %s callback (started %.1fs ago", c.kind, ago);
}

int gen_check_heartbeats(const gen_env *e, generation *g, uint64_t now_ms)
{
    const pagid_timeouts *t = &g->cfg->timeouts;
    int fresh = 0;
    gen_zygote_check(g, now_mono());
    for (int i = 0; i < g->n; i++) {
        worker_slot *w = &g->slots[i];
        if (w->state != WS_RUNNING || w->hb_killed)
            continue;
        /* Lifespan startup may block the loop (loading a model, say); it has
         * its own deadline, so a worker never seen ready gets the longer. */
        double limit = t->heartbeat;
        if (limit > 0 && !w->ready && t->lifespan_startup > limit)
            limit = t->lifespan_startup;
        /* A pool process's loop is held by each request it runs: its limit
         * is worker_pool.timeout, past which the worker has answered 504. */
        int pool = gen_is_pool_slot(w);
        if (pool)
            limit = g->cfg->worker_pool.timeout > 0 ? g->cfg->worker_pool.timeout + 1.0 : 0;
        shm_worker *sw = shm_find(e->shm, (int)w->pid);
        if (!sw) {
            fresh++; /* not monitored (yet): nothing to judge */
            continue;
        }
        uint64_t hb = atomic_load_explicit(&sw->heartbeat_ms, memory_order_relaxed);
        uint64_t age = now_ms > hb ? now_ms - hb : 0;
        if (limit > 0 && (double)age > limit * 1000.0) {
            if (!w->hb_reported && pool)
                log_error("pool process %d (pid %d): one request or call ran for %.1fs (limit "
                          "%.1fs: worker_pool.timeout); killing it",
                          w->num - POOL_NUM_BASE, (int)w->pid, (double)age / 1000.0,
                          limit - 1.0);
            else if (!w->hb_reported) {
                char in[256];
                describe_app_call(&sw->app_call, now_ms, in, sizeof in);
                log_error("worker %d (pid %d): event loop blocked for %.1fs %s; limit %.1fs: "
                          "timeouts.heartbeat%s); killing it",
                          w->num, (int)w->pid, (double)age / 1000.0, in, limit,
                          w->ready ? "" : ", lifespan_startup before it is ready");
            }
            w->hb_reported = 1;
            /* SIGKILL at once: a blocked loop never acts on SIGTERM, and a
             * stopped process dies of it too. Retried each tick if refused. */
            if (kill_worker(w, SIGKILL) == 0)
                w->hb_killed = 1;
            continue;
        }
        /* For the watchdog a loop four beats late is already unwell. */
        fresh += age <= GEN_FRESH_MS;
    }
    return fresh;
}

void gen_drain(generation *g, double now)
{
    for (int i = 0; i < g->n; i++) {
        g->slots[i].respawn = 0;
        if (g->slots[i].state == WS_BACKOFF || g->slots[i].state == WS_EMPTY)
            g->slots[i].state = WS_EXITED;
    }
    if (g->state != GEN_FAILED)
        g->state = GEN_DRAINING;
    g->deadline = now + g->cfg->timeouts.shutdown + SUPERVISOR_DRAIN_GRACE_S;
    g->killed = 0;
    /* No worker is asked of the zygote any more: it reads EOF and exits,
     * even when the app took SIGTERM over while it was loading. */
    gen_zygote_end(g);
    gen_signal(g, SIGTERM); /* a zygote still loading stops on its signal */
}

worker_slot *gen_append_slot(generation *g)
{
    if (g->n == g->cap) {
        int cap = g->cap * 2;
        worker_slot *v = realloc(g->slots, (size_t)cap * sizeof *v);
        if (!v)
            return NULL;
        g->slots = v;
        g->cap = cap;
    }
    worker_slot *w = &g->slots[g->n];
    *w = (worker_slot){.num = g->n + 1};
    g->n++;
    return w;
}

void gen_poll_recycling(const gen_env *e, generation *g)
{
    for (int i = 0; i < g->n; i++) {
        worker_slot *w = &g->slots[i];
        if (w->state != WS_RUNNING || !w->respawn || w->retired)
            continue;
        shm_worker *sw = shm_find(e->shm, (int)w->pid);
        if (!sw)
            continue;
        if (atomic_load(&sw->ready)) {
            w->ready = 1;
            continue;
        }
        /* Not ready: still starting, unless it was seen ready or has served. */
        uint64_t served = 0;
        for (size_t k = 0; k < sizeof sw->requests / sizeof sw->requests[0]; k++)
            served += atomic_load_explicit(&sw->requests[k], memory_order_relaxed);
        if (!w->ready && served == 0)
            continue;
        worker_slot *old = NULL;
        for (int k = 0; k < g->n && !old; k++)
            if (g->slots[k].retired && g->slots[k].state != WS_RUNNING)
                old = &g->slots[k];
        if (!old && !(old = gen_append_slot(g)))
            continue;     /* it is replaced when it exits, then */
        w = &g->slots[i]; /* append_slot may have moved the table */
        *old = *w;
        w->log_chan = 0; /* the old process keeps its log channel; gen_spawn makes another */
        /* and its pub/sub channel, closed when it exits: gen_spawn would
         * close it now, and its exit then a peer id reused by the new one */
        w->pubsub_peer = 0;
        old->retired = 1;
        old->respawn = 0;
        old->draining = 1;
        log_info("worker %d (pid %d) is recycling itself (max_requests); starting its "
                 "replacement",
                 w->num, (int)w->pid);
        w->fast_crashes = 0;
        gen_spawn(e, g, w);
    }
}

int gen_add_worker(const gen_env *e, generation *g)
{
    worker_slot *w = NULL;
    for (int i = 0; i < g->n && !w; i++)
        if (g->slots[i].state == WS_EXITED && !g->slots[i].respawn && !g->slots[i].retired &&
            !gen_is_pool_slot(&g->slots[i]))
            w = &g->slots[i]; /* a number SIGTTOU freed */
    if (!w) {
        int live = 0;
        for (int i = 0; i < g->n; i++)
            live += !g->slots[i].retired && !gen_is_pool_slot(&g->slots[i]);
        if (live >= CONFIG_MAX_WORKERS || !(w = gen_append_slot(g)))
            return -1;
        w->num = live + 1;
    }
    w->respawn = 1;
    w->fast_crashes = 0;
    gen_spawn(e, g, w);
    return 0;
}

int gen_remove_worker(generation *g)
{
    int live = 0;
    worker_slot *last = NULL;
    for (int i = 0; i < g->n; i++) {
        worker_slot *w = &g->slots[i];
        if (w->respawn && !gen_is_pool_slot(w) &&
            (w->state == WS_RUNNING || w->state == WS_BACKOFF)) {
            live++;
            last = w;
        }
    }
    if (live <= 1 || !last)
        return -1;
    last->respawn = 0;
    if (last->state == WS_BACKOFF) {
        last->state = WS_EXITED;
    } else {
        last->draining = 1;
        kill_worker(last, SIGTERM);
    }
    log_info("worker %d (pid %d) told to drain: %d worker%s left", last->num, (int)last->pid,
             live - 1, live - 1 == 1 ? "" : "s");
    return 0;
}

double gen_next_restart(const generation *g)
{
    double at = INFINITY;
    for (int i = 0; i < g->n; i++)
        if (g->slots[i].state == WS_BACKOFF && g->slots[i].restart_at < at)
            at = g->slots[i].restart_at;
    return at;
}
