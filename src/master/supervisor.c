/*
 * supervisor.c - the master cycle, after nginx: signal handlers only set
 * flags, the master sleeps in ppoll() with its signals unblocked, then acts
 * on the flags with everything blocked again. Workers live in generations
 * (generation.c): SIGHUP builds a whole new config and generation beside
 * the serving one, which drains only once every new worker passed lifespan
 * startup; a failed reload leaves the serving one alone (supervisor_gen.c).
 *
 * Workers start with default dispositions and an empty mask, except SIGPIPE,
 * SIGINT, SIGHUP and the operator signals, which stay ignored: a peer reset
 * must not kill a worker, and a terminal's Ctrl-C or hang-up, which reaches
 * the whole process group, must reach workers only through the master.
 */
#include "supervisor_int.h"
#include "devwatch.h"
#include "pubsub_broker.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
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
#include "common/proctitle.h"
#include "gen_logs.h"
#include "notify.h"
#include "shdicts.h"

/* Worker heartbeats, the watchdog and STATUS are looked at this often. */
#define TICK_S 0.25
/* While a generation starts, its readiness is polled this often. */
#define STARTING_POLL_S 0.02
/* Zygote channels watched at once (one per live generation; more are read
 * at each wake-up anyway). */
#define ZYGOTE_POLL_MAX 16
/* How soon a reported worker is looked at again while it is reparented. */
#define SETTLE_POLL_NS 5000000L
/* Slots in the shared region: every generation's workers at once. */
#define SHM_SLOTS (2 * (CONFIG_MAX_WORKERS + CONFIG_POOL_MAX_PROCESSES) + 64)

/* The only state signal handlers touch. */
static volatile sig_atomic_t sig_reap, sig_terminate, sig_quit, sig_reconfigure, sig_reopen,
    sig_upgrade, sig_more, sig_fewer, sig_handover_pid;

static const int master_signals[] = {SIGCHLD, SIGTERM, SIGINT,   SIGQUIT, SIGHUP,
                                     SIGUSR1, SIGUSR2, SIGWINCH, SIGTTIN, SIGTTOU};
#define N_MASTER_SIGNALS (sizeof master_signals / sizeof master_signals[0])

static void on_signal(int signo, siginfo_t *info, void *uctx)
{
    (void)uctx;
    switch (signo) {
    case SIGCHLD:
        sig_reap = 1;
        break;
    case SIGTERM:
    case SIGINT:
        sig_terminate = 1;
        break;
    case SIGQUIT:
        sig_quit = 1;
        break;
    case SIGHUP:
        sig_reconfigure = 1;
        break;
    case SIGUSR1:
        sig_reopen = 1;
        break;
    case SIGUSR2:
        sig_upgrade = 1;
        break;
    case SIGTTIN:
        sig_more++;
        break;
    case SIGTTOU:
        sig_fewer++;
        break;
    case SIGWINCH:
        /* "I am ready", from the new master of an upgrade; who sent it matters. */
        sig_handover_pid = info ? (sig_atomic_t)info->si_pid : -1;
        break;
    }
}

double supervisor_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int supervisor_resolve_workers(const pagid_config *cfg)
{
    if (cfg->workers != CONFIG_WORKERS_AUTO)
        return cfg->workers;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* ---- stopping ---- */

void supervisor_begin_drain(supervisor *s, int announce)
{
    double now = supervisor_now();
    if (announce)
        notify_send("STOPPING=1\nSTATUS=stopping");
    s->state = MS_DRAINING;
    proctitle_master(s->up == UP_HANDED_OVER ? "old, draining" : "draining");
    for (generation *g = s->env.all; g; g = g->next) {
        gen_drain(g, now);
        /* The workers close their copies when they stop accepting; once the
         * master's are gone too, new clients are refused instead of waiting
         * in a queue nobody will serve. */
        listeners_close(&g->ls);
    }
    log_info("draining every worker (up to timeouts.shutdown + %.0fs)", SUPERVISOR_DRAIN_GRACE_S);
}

static void begin_fast_stop(supervisor *s)
{
    log_info("shutting down fast");
    if (s->state == MS_RUNNING)
        notify_send("STOPPING=1\nSTATUS=stopping");
    s->state = MS_FAST;
    proctitle_master("stopping");
    broker_stopping(s->env.broker); /* no Redis reconnects in a fast stop */
    double at = supervisor_now() + SUPERVISOR_FAST_STOP_S;
    for (generation *g = s->env.all; g; g = g->next) {
        for (int i = 0; i < g->n; i++) {
            g->slots[i].respawn = 0;
            if (g->slots[i].state == WS_BACKOFF)
                g->slots[i].state = WS_EXITED;
        }
        if (g->state != GEN_FAILED)
            g->state = GEN_DRAINING;
        if (!g->killed && (g->deadline == 0 || at < g->deadline))
            g->deadline = at;
        listeners_close(&g->ls);
        gen_zygote_end(g);
        gen_signal(g, SIGQUIT);
    }
}

/* Draining generations: SIGKILL stragglers at the deadline, free the empty ones. */
static void collect_generations(supervisor *s, double now)
{
    for (generation **pp = &s->env.all; *pp;) {
        generation *g = *pp;
        if (g->state != GEN_DRAINING && g->state != GEN_FAILED) {
            pp = &g->next;
            continue;
        }
        gen_pool_drain_step(g);
        int workers = gen_count(g, WS_RUNNING), zy_alive = g->zy.pid > 0;
        int running = workers + zy_alive;
        if (running && now >= g->deadline) {
            if (!g->killed) {
                if (workers)
                    log_warn("generation %u: %d worker(s)%s still running at the deadline; "
                             "sending SIGKILL",
                             g->id, workers, zy_alive ? " and the zygote" : "");
                else
                    log_warn("generation %u: the zygote (pid %d) still running at the deadline; "
                             "sending SIGKILL",
                             g->id, (int)g->zy.pid);
                gen_signal(g, SIGKILL);
                g->killed = 1;
                g->deadline = now + SUPERVISOR_DRAIN_GRACE_S;
            } else {
                int eperm = gen_count_unkillable(g);
                if (eperm)
                    log_error("generation %u: %d worker(s) could not be killed (EPERM: the master "
                              "lacks CAP_KILL); forgetting them: they may still be running",
                              g->id, eperm);
                if (workers > eperm)
                    log_error("generation %u: %d worker(s) did not die after SIGKILL; forgetting "
                              "them",
                              g->id, workers - eperm);
                if (zy_alive)
                    log_error("generation %u: the zygote (pid %d) did not die after SIGKILL; "
                              "forgetting it",
                              g->id, (int)g->zy.pid);
                running = 0;
            }
        }
        if (running) {
            pp = &g->next;
            continue;
        }
        *pp = g->next;
        if (g == s->active)
            s->active = NULL;
        log_info("generation %u: all workers gone", g->id);
        gen_free(g, s->env.all, s->owns_files);
    }
}

/* ---- periodic: heartbeats, watchdog, STATUS ---- */

static void tick(supervisor *s, double now)
{
    uint64_t now_ms = shm_now_ms();
    int fresh_active = 0, running_active = 0;
    for (generation *g = s->env.all; g; g = g->next) {
        int fresh = gen_check_heartbeats(&s->env, g, now_ms);
        if (g == s->active) {
            fresh_active = fresh;
            running_active = gen_count(g, WS_RUNNING);
        }
    }
    if (s->state != MS_RUNNING || s->up == UP_HANDED_OVER)
        return;
    if (s->active)
        gen_poll_recycling(&s->env, s->active);
    /* The watchdog watches this loop, which watches the workers: a blocked
     * worker is the heartbeat's to kill and replace, and must never make
     * systemd restart the whole service (and every healthy worker). */
    double wd = notify_watchdog_interval();
    if (wd > 0 && now >= s->next_watchdog) {
        notify_watchdog_ping();
        s->next_watchdog = now + wd / 2;
    }
    if (!notify_enabled() || !s->active)
        return;
    long long conns = 0;
    int ready = 0;
    for (size_t i = 0; s->env.shm && i < s->env.shm->n_slots; i++) {
        shm_worker *w = &s->env.shm->slots[i];
        if (atomic_load(&w->pid) > 0) {
            conns += (long long)atomic_load(&w->open_connections);
            ready += atomic_load(&w->ready) && atomic_load(&w->generation) == s->active->id;
        }
    }
    char status[256];
    char stuck[32] = "";
    if (fresh_active < running_active)
        snprintf(stuck, sizeof stuck, ", %d blocked", running_active - fresh_active);
    snprintf(status, sizeof status,
             "STATUS=generation %u: %d workers (%d ready%s), %lld connections", s->active->id,
             running_active, ready, stuck, conns);
    if (strcmp(status, s->status) != 0) {
        notify_send(status);
        snprintf(s->status, sizeof s->status, "%s", status);
    }
}

void supervisor_block_signals(void)
{
    sigset_t block;
    sigemptyset(&block);
    for (size_t i = 0; i < N_MASTER_SIGNALS; i++)
        sigaddset(&block, master_signals[i]);
    sigprocmask(SIG_BLOCK, &block, NULL);
}

static int install_signals(sigset_t *unblocked)
{
    struct sigaction sa = {.sa_sigaction = on_signal, .sa_flags = SA_SIGINFO};
    sigemptyset(&sa.sa_mask);
    sigset_t block;
    sigemptyset(&block);
    for (size_t i = 0; i < N_MASTER_SIGNALS; i++) {
        sigaddset(&block, master_signals[i]);
        sigaddset(&sa.sa_mask, master_signals[i]);
    }
    /* Blocked everywhere but inside ppoll(), so a flag can never be set
     * between the check and the sleep. */
    if (sigprocmask(SIG_BLOCK, &block, unblocked) < 0)
        return -1;
    for (size_t i = 0; i < N_MASTER_SIGNALS; i++)
        if (sigaction(master_signals[i], &sa, NULL) < 0)
            return -1;
    for (size_t i = 0; i < N_MASTER_SIGNALS; i++)
        sigdelset(unblocked, master_signals[i]);
    return 0;
}

/* Reports waiting on every zygote's channel. */
static void read_zygotes(supervisor *s)
{
    for (generation *g = s->env.all; g; g = g->next)
        if (g->zy.fd >= 0)
            gen_zygote_input(&s->env, g);
}

/* Reported pids verified (or dropped); 1 when some still wait. */
static int settle_zygotes(supervisor *s)
{
    int waiting = 0;
    for (generation *g = s->env.all; g; g = g->next)
        waiting += gen_zygote_settle(&s->env, g);
    return waiting > 0;
}

static int respawn_ok(const supervisor *s, const generation *g)
{
    return s->state == MS_RUNNING && (g == s->active || g->state == GEN_STARTING);
}

static void reap(supervisor *s)
{
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        if (s->up != UP_NONE && pid == s->up_pid) {
            upgrade_child_exited(s, status);
            continue;
        }
        generation *g = gen_find_zygote(s->env.all, pid);
        if (g) {
            gen_zygote_exited(&s->env, g, status, supervisor_now(), respawn_ok(s, g));
            continue;
        }
        worker_slot *w = gen_find(s->env.all, pid, &g);
        if (!w) {
            /* A zygote's worker that exited before its pid was read: the
             * report was written before the worker could be ours to reap. */
            read_zygotes(s);
            w = gen_zygote_claim(s->env.all, pid, &g);
        }
        if (w)
            gen_on_exit(&s->env, g, w, status, supervisor_now(), respawn_ok(s, g));
        /* Anything else is an orphan the subreaper adopted: reaped, that is all. */
    }
}

/* Act on the flags the handlers set, in a fixed order. */
static void handle_flags(supervisor *s)
{
    if (sig_reap) {
        sig_reap = 0;
        reap(s);
        if (s->active && s->state == MS_RUNNING)
            gen_poll_recycling(&s->env, s->active);
    }
    if (sig_quit) {
        sig_quit = 0;
        if (s->state != MS_FAST)
            begin_fast_stop(s);
    }
    if (sig_terminate) {
        sig_terminate = 0;
        if (s->state == MS_RUNNING) {
            log_info("shutting down gracefully");
            supervisor_begin_drain(s, 1);
        } else if (s->state == MS_DRAINING) {
            begin_fast_stop(s); /* asked twice: the operator is impatient */
        }
    }
    if (sig_reopen) {
        sig_reopen = 0;
        gen_logs_reopen(s->env.all); /* the workers get the files from us: see gen_logs.h */
    }
    if (s->state != MS_RUNNING) {
        sig_reconfigure = sig_upgrade = 0;
        sig_more = sig_fewer = 0;
        return;
    }
    if (sig_reconfigure) {
        sig_reconfigure = 0;
        supervisor_reload(s, NULL);
    }
    if (sig_upgrade) {
        sig_upgrade = 0;
        upgrade_start(s);
    }
    if (sig_handover_pid) {
        pid_t from = (pid_t)sig_handover_pid;
        sig_handover_pid = 0;
        upgrade_on_ready_signal(s, from);
    }
    for (; sig_more > 0; sig_more--) {
        if (!s->active || gen_add_worker(&s->env, s->active) < 0)
            log_warn("SIGTTIN: cannot add a worker now");
        else
            log_info("SIGTTIN: one more worker");
    }
    for (; sig_fewer > 0; sig_fewer--)
        if (!s->active || gen_remove_worker(s->active) < 0)
            log_warn("SIGTTOU: keeping the last worker");
}

/* How long ppoll may sleep: until the next restart, deadline or tick. */
static int next_timeout(const supervisor *s, double now, struct timespec *ts)
{
    double at = s->next_tick;
    for (const generation *g = s->env.all; g; g = g->next) {
        double r = gen_next_restart(g);
        if (r < at)
            at = r;
        if (g->state != GEN_ACTIVE && g->deadline > 0 && g->deadline < at)
            at = g->deadline;
        if (g->state == GEN_STARTING && now + STARTING_POLL_S < at)
            at = now + STARTING_POLL_S;
    }
    if (s->up == UP_STARTING && s->up_deadline < at)
        at = s->up_deadline;
    if (devwatch_deadline(s->dev) < at)
        at = devwatch_deadline(s->dev);
    double backend = broker_next_timer(s->env.broker);
    if (backend < at)
        at = backend;
    if (isinf(at))
        return 0;
    double d = at - now;
    if (d < 0)
        d = 0;
    ts->tv_sec = (time_t)d;
    ts->tv_nsec = (long)((d - (double)ts->tv_sec) * 1e9);
    return 1;
}

int supervisor_run(const pagid_config *cfg, listener_set *ls, int nworkers, master_opts *opts)
{
    supervisor s = {.opts = opts, .pid = getpid(), .owns_files = 1};
    s.env.master_pid = s.pid;
    if (opts && opts->upgrade_parent > 0)
        s.owns_files = 0; /* the old master's files until it hands over */
    proctitle_master(opts && opts->upgrade_parent > 0 ? "new, starting" : NULL);
    char err[4200];
    int access_fd; /* opened as root, for the workers (gen_logs.h) */
    gen_logs_open(cfg, &access_fd, err, sizeof err);
    sigset_t unblocked;
    if (install_signals(&unblocked) < 0) {
        log_error("cannot install signal handlers: %s", strerror(errno));
        return EXIT_STARTUP;
    }
    notify_init();
    /* Workers forked by a zygote are reparented here when their middle
     * process exits, and supervised as if forked here. */
    s.env.subreaper = prctl(PR_SET_CHILD_SUBREAPER, 1) == 0;
    if (!s.env.subreaper && config_preload_wanted(cfg))
        log_warn("prctl(PR_SET_CHILD_SUBREAPER): %s; preload is off, each worker loads the apps",
                 strerror(errno));
    s.env.shm = shm_create(SHM_SLOTS);
    if (!s.env.shm)
        log_warn("cannot map the shared region: no heartbeat or readiness from workers");
    s.env.broker = broker_new(s.env.shm ? &s.env.shm->pubsub_master_dropped : NULL);
    if (!s.env.broker)
        log_warn("out of memory for the pub/sub broker: pub/sub stays within each worker");
    broker_set_backend(s.env.broker, &cfg->pubsub, s.env.shm);
    generation *g = shdicts_attach((pagid_config *)cfg, NULL) == 0
                        ? gen_new(++s.last_id, (pagid_config *)cfg, 0, ls, nworkers)
                        : NULL;
    if (!g) {
        shdicts_detach((pagid_config *)cfg, NULL);
        log_error("cannot start the first generation");
        if (access_fd >= 0)
            close(access_fd);
        broker_free(s.env.broker);
        shm_destroy(s.env.shm);
        return EXIT_STARTUP;
    }
    g->access_fd = access_fd;
    supervisor_push_generation(&s, g);
    if (opts && opts->cli && cli_dev_mode(opts->cli))
        s.dev = devwatch_new(cfg, opts->cli);

    log_info("master started (pid %d), %d worker%s", (int)s.pid, nworkers,
             nworkers == 1 ? "" : "s");
    gen_spawn_all(&s.env, g);
    notify_sendf("MAINPID=%d\nSTATUS=starting %d workers", (int)s.pid, nworkers);

    int code = EXIT_OK;
    struct pollfd *pfd = malloc((ZYGOTE_POLL_MAX + 2) * sizeof *pfd);
    size_t pfd_cap = pfd ? ZYGOTE_POLL_MAX + 2 : 0; /* + 2: devwatch */
    if (!pfd) {
        log_error("out of memory");
        code = EXIT_STARTUP;
        supervisor_begin_drain(&s, 0);
    }
    for (;;) {
        handle_flags(&s);
        double now = supervisor_now();
        if (s.state == MS_RUNNING) {
            for (generation *x = s.env.all; x; x = x->next)
                if (x->state == GEN_ACTIVE || x->state == GEN_STARTING)
                    gen_restart_due(&s.env, x, now);
            if (supervisor_progress_starting(&s, now) < 0 || supervisor_nothing_left(&s)) {
                log_error("no worker could start");
                code = EXIT_STARTUP;
                supervisor_begin_drain(&s, 0);
            }
            upgrade_check_deadline(&s, now);
            const char *changed = devwatch_due(s.dev, now);
            if (changed)
                supervisor_reload(&s, changed);
        }
        if (now >= s.next_tick) {
            tick(&s, now);
            /* A short WatchdogSec needs pings more often than the tick. */
            double wd = notify_watchdog_interval();
            s.next_tick = now + (wd > 0 && wd / 4 < TICK_S ? wd / 4 : TICK_S);
        }
        broker_tick(s.env.broker, now);
        /* A reported worker is the master's child once its middle process
         * has exited, a moment after the report: look again soon. */
        int unsettled = settle_zygotes(&s);
        collect_generations(&s, now);
        if (s.state != MS_RUNNING && !s.env.all) {
            log_info("all workers stopped");
            break;
        }

        struct timespec ts;
        int timed = next_timeout(&s, now, &ts);
        if (unsettled && (!timed || ts.tv_sec > 0 || ts.tv_nsec > SETTLE_POLL_NS)) {
            ts = (struct timespec){0, SETTLE_POLL_NS};
            timed = 1;
        }
        /* The zygotes' channels first, then every worker's pub/sub channel. */
        size_t want = ZYGOTE_POLL_MAX + 2 + broker_npeers(s.env.broker);
        if (want > pfd_cap) {
            struct pollfd *np = realloc(pfd, want * sizeof *np);
            if (np) {
                pfd = np;
                pfd_cap = want;
            }
        }
        nfds_t npfd = 0;
        for (generation *x = s.env.all; x && npfd < ZYGOTE_POLL_MAX && npfd < pfd_cap; x = x->next)
            if (x->zy.fd >= 0)
                pfd[npfd++] = (struct pollfd){.fd = x->zy.fd, .events = POLLIN};
        nfds_t nzy = npfd;
        nfds_t ndev = (nfds_t)devwatch_pollfds(s.dev, pfd + nzy);
        nzy += ndev;
        npfd = nzy;
        npfd += broker_pollfds(s.env.broker, pfd + nzy, pfd_cap - nzy);
        int n = ppoll(pfd, npfd, timed ? &ts : NULL, &unblocked);
        if (n < 0 && errno != EINTR) {
            log_error("ppoll: %s", strerror(errno));
            break;
        }
        if (n > 0) {
            if (ndev)
                devwatch_io(s.dev, supervisor_now());
            read_zygotes(&s);
            broker_io(s.env.broker, pfd + nzy, npfd - nzy);
        }
    }
    free(pfd);
    devwatch_free(s.dev);
    broker_free(s.env.broker);
    /* Whatever is left (ppoll failure) goes without unlinking anything live. */
    while (s.env.all) {
        generation *x = s.env.all;
        s.env.all = x->next;
        gen_free(x, s.env.all, s.owns_files);
    }
    shm_destroy(s.env.shm);
    if (opts && s.up == UP_HANDED_OVER)
        opts->handed_over = 1;
    return code;
}
