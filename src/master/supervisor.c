/*
 * supervisor.c - the master cycle, after nginx: signal handlers only set
 * flags, the master sleeps in ppoll() with its signals unblocked, then acts
 * on the flags with everything blocked again. A process table keeps one
 * slot per worker number; a crashed worker is restarted under the same
 * number with backoff, a fatal one is not, and a stop escalates TERM ->
 * KILL (graceful) or QUIT -> KILL (fast).
 *
 * What the master sends a worker (worker_run must match):
 *   SIGTERM  drain: stop accepting, finish in-flight work within
 *            timeouts.shutdown, lifespan shutdown, exit 0.
 *   SIGQUIT  stop now, exit 0.
 *   SIGKILL  straggler still alive at the deadline.
 * Workers start with default dispositions and an empty mask, except
 * SIGPIPE, SIGINT and SIGHUP, which stay ignored: a peer reset must not kill
 * a worker, and a terminal's Ctrl-C or hang-up, which reaches the whole
 * process group, must reach workers only through the master's ordered stop.
 */
#include "supervisor.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "../common/exitcodes.h"
#include "../common/log.h"
#include "../worker/worker.h"

typedef enum worker_state {
    WS_EMPTY,   /* not started yet */
    WS_RUNNING, /* pid is alive (or not reaped yet) */
    WS_BACKOFF, /* crashed; restart at restart_at */
    WS_FATAL,   /* exited with EXIT_WORKER_FATAL: never restarted */
    WS_EXITED,  /* exited during a stop */
} worker_state;

typedef enum master_state {
    MS_RUNNING,  /* keep every slot running */
    MS_DRAINING, /* SIGTERM sent, waiting up to timeouts.shutdown + grace */
    MS_FAST,     /* SIGQUIT sent, waiting up to SUPERVISOR_FAST_STOP_S */
} master_state;

typedef struct worker_slot {
    pid_t pid;
    int num; /* 1..N, kept by the replacement */
    worker_state state;
    double started;        /* monotonic seconds at fork */
    int last_status;       /* waitpid status of the previous process */
    int respawn;           /* restart it when it exits */
    unsigned fast_crashes; /* consecutive deaths within FAST_CRASH_MS of start */
    double restart_at;     /* WS_BACKOFF: monotonic time of the restart */
} worker_slot;

typedef struct supervisor {
    const pagid_config *cfg;
    listener_set *ls;
    worker_slot *slots;
    int n;
    master_state state;
    double kill_at; /* stopping: SIGKILL whatever is still running then */
    int killed;     /* SIGKILL already sent; kill_at is now the give-up time */
    pid_t pid;
} supervisor;

/* The only state signal handlers touch. */
static volatile sig_atomic_t sig_reap, sig_terminate, sig_quit, sig_reconfigure;

static const int master_signals[] = {SIGCHLD, SIGTERM, SIGINT, SIGQUIT, SIGHUP};
#define N_MASTER_SIGNALS (sizeof master_signals / sizeof master_signals[0])

static void on_signal(int signo)
{
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
    }
}

static double now_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

unsigned supervisor_backoff_ms(unsigned fast_crashes)
{
    if (fast_crashes <= 1)
        return 0;
    unsigned ms = SUPERVISOR_BACKOFF_MIN_MS;
    for (unsigned i = 2; i < fast_crashes && ms < SUPERVISOR_BACKOFF_MAX_MS; i++)
        ms *= 2;
    return ms < SUPERVISOR_BACKOFF_MAX_MS ? ms : SUPERVISOR_BACKOFF_MAX_MS;
}

static void describe_status(int status, char *buf, size_t len)
{
    if (WIFSIGNALED(status))
        snprintf(buf, len, "signal %d%s", WTERMSIG(status),
                 WCOREDUMP(status) ? ", core dumped" : "");
    else
        snprintf(buf, len, "exit status %d", WEXITSTATUS(status));
}

static void notify(const char *state)
{
    /* sd_notify is a no-op returning 0 when NOTIFY_SOCKET is unset. */
    if (sd_notify(0, state) < 0)
        log_warn("sd_notify failed");
}

int supervisor_drop_privileges(const pagid_config *cfg)
{
    const char *user = cfg->user && *cfg->user ? cfg->user : NULL;
    const char *group = cfg->group && *cfg->group ? cfg->group : NULL;
    if ((!user && !group) || geteuid() != 0)
        return 0;
    struct passwd *pw = NULL;
    gid_t gid = getgid();
    if (user) {
        errno = 0;
        pw = getpwnam(user);
        if (!pw) {
            log_error("unknown user '%s'", user);
            return -1;
        }
        gid = pw->pw_gid;
    }
    if (group) {
        errno = 0;
        struct group *gr = getgrnam(group);
        if (!gr) {
            log_error("unknown group '%s'", group);
            return -1;
        }
        gid = gr->gr_gid;
    }
    /* Group first: after setuid() we could no longer change it. */
    if (setgid(gid) < 0 || (pw ? initgroups(pw->pw_name, gid) : setgroups(1, &gid)) < 0 ||
        (pw && setuid(pw->pw_uid) < 0)) {
        log_error("cannot drop privileges to %s:%s: %s", user ? user : "-", group ? group : "-",
                  strerror(errno));
        return -1;
    }
    return 0;
}

/* The worker process: never returns into the master's code. */
static void __attribute__((noreturn)) child_main(const supervisor *s, const worker_slot *w)
{
    struct sigaction dfl = {.sa_handler = SIG_DFL}, ign = {.sa_handler = SIG_IGN};
    sigemptyset(&dfl.sa_mask);
    sigemptyset(&ign.sa_mask);
    sigaction(SIGCHLD, &dfl, NULL);
    sigaction(SIGTERM, &dfl, NULL);
    sigaction(SIGQUIT, &dfl, NULL);
    sigaction(SIGINT, &ign, NULL);
    sigaction(SIGHUP, &ign, NULL);
    sigaction(SIGPIPE, &ign, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);

    char role[32];
    snprintf(role, sizeof role, "worker %d", w->num);
    log_set_role(role);

    /* A worker must not outlive its master (kill -9 of the master): the
     * kernel sends SIGTERM then. If the master died before prctl took
     * effect, getppid() has already changed. */
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0)
        log_warn("prctl(PR_SET_PDEATHSIG): %s", strerror(errno));
    if (getppid() != s->pid)
        _exit(EXIT_OK);

    /* The master keeps root (to bind again on reload); workers never
     * run application code with it. Failing to drop is fatal: a respawn
     * would fail the same way. */
    if (supervisor_drop_privileges(s->cfg) < 0)
        _exit(EXIT_WORKER_FATAL);

    int rc = worker_run(s->cfg, s->ls->items, s->ls->n, w->num, 1, NULL, 1);
    fflush(NULL);
    _exit(rc);
}

static void spawn(supervisor *s, worker_slot *w)
{
    /* Buffered stdio written before the fork would be flushed twice. */
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0)
        child_main(s, w);
    double now = now_mono();
    if (pid < 0) {
        /* Out of processes or memory: retry, do not give up on the slot. */
        log_error("cannot fork worker %d: %s; retrying in 1s", w->num, strerror(errno));
        w->state = WS_BACKOFF;
        w->restart_at = now + 1.0;
        return;
    }
    w->pid = pid;
    w->state = WS_RUNNING;
    w->started = now;
    w->respawn = 1;
    log_info("worker %d started (pid %d)", w->num, (int)pid);
}

static worker_slot *find_slot(supervisor *s, pid_t pid)
{
    for (int i = 0; i < s->n; i++)
        if (s->slots[i].state == WS_RUNNING && s->slots[i].pid == pid)
            return &s->slots[i];
    return NULL;
}

/* Decide what a dead worker's slot becomes. */
static void on_worker_exit(supervisor *s, worker_slot *w, int status, double now)
{
    char how[48];
    describe_status(status, how, sizeof how);
    pid_t pid = w->pid;
    w->pid = 0;
    w->last_status = status;

    if (s->state != MS_RUNNING || !w->respawn) {
        w->state = WS_EXITED;
        /* A clean exit, or death by the SIGQUIT of a fast stop, is what
         * was asked for; anything else is worth a warning. */
        int expected = (WIFEXITED(status) && WEXITSTATUS(status) == EXIT_OK) ||
                       (WIFSIGNALED(status) && WTERMSIG(status) == SIGQUIT && s->state == MS_FAST);
        if (expected)
            log_info("worker %d (pid %d) exited", w->num, (int)pid);
        else
            log_warn("worker %d (pid %d) exited (%s)", w->num, (int)pid, how);
        return;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == EXIT_WORKER_FATAL) {
        w->state = WS_FATAL;
        log_error("worker %d (pid %d) could not start (%s: fatal); not restarting", w->num,
                  (int)pid, how);
        return;
    }

    double uptime = now - w->started;
    w->fast_crashes = uptime * 1000.0 < SUPERVISOR_FAST_CRASH_MS ? w->fast_crashes + 1 : 0;
    unsigned delay = supervisor_backoff_ms(w->fast_crashes);
    const char *what =
        WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "exited unexpectedly" : "crashed";
    if (delay == 0) {
        log_error("worker %d (pid %d) %s (%s); restarting now", w->num, (int)pid, what, how);
        spawn(s, w);
    } else {
        log_error("worker %d (pid %d) %s (%s); restarting in %ums", w->num, (int)pid, what, how,
                  delay);
        w->state = WS_BACKOFF;
        w->restart_at = now + delay / 1000.0;
    }
}

static void reap(supervisor *s)
{
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        worker_slot *w = find_slot(s, pid);
        if (w)
            on_worker_exit(s, w, status, now_mono());
    }
}

static int count_state(const supervisor *s, worker_state st)
{
    int c = 0;
    for (int i = 0; i < s->n; i++)
        c += s->slots[i].state == st;
    return c;
}

static void signal_workers(supervisor *s, int signo)
{
    for (int i = 0; i < s->n; i++) {
        worker_slot *w = &s->slots[i];
        if (w->state == WS_RUNNING && w->pid > 0 && kill(w->pid, signo) < 0 && errno != ESRCH)
            log_warn("kill(worker %d, pid %d): %s", w->num, (int)w->pid, strerror(errno));
    }
}

/* Common first step of both stops: no restarts from now on. */
static void begin_stop(supervisor *s)
{
    if (s->state == MS_RUNNING)
        notify("STOPPING=1\nSTATUS=stopping");
    for (int i = 0; i < s->n; i++) {
        s->slots[i].respawn = 0;
        if (s->slots[i].state == WS_BACKOFF)
            s->slots[i].state = WS_EXITED;
    }
    /* The workers close their copies when they stop accepting; once the
     * master's copy is gone too, new clients are refused instead of
     * waiting in a queue nobody will serve. */
    listeners_close(s->ls);
}

static void begin_drain(supervisor *s)
{
    double wait = s->cfg->timeouts.shutdown + SUPERVISOR_DRAIN_GRACE_S;
    log_info("shutting down gracefully (waiting up to %.1fs for workers)", wait);
    begin_stop(s);
    s->state = MS_DRAINING;
    s->kill_at = now_mono() + wait;
    signal_workers(s, SIGTERM);
}

static void begin_fast_stop(supervisor *s)
{
    log_info("shutting down fast");
    begin_stop(s);
    s->state = MS_FAST;
    double at = now_mono() + SUPERVISOR_FAST_STOP_S;
    if (!s->killed && (s->kill_at == 0 || at < s->kill_at))
        s->kill_at = at;
    signal_workers(s, SIGQUIT);
}

static void restart_due(supervisor *s, double now)
{
    for (int i = 0; i < s->n; i++)
        if (s->slots[i].state == WS_BACKOFF && now >= s->slots[i].restart_at)
            spawn(s, &s->slots[i]);
}

/* How long ppoll may sleep: until the next restart or stop deadline. */
static int next_timeout(const supervisor *s, double now, struct timespec *ts)
{
    double at = INFINITY;
    for (int i = 0; i < s->n; i++)
        if (s->slots[i].state == WS_BACKOFF && s->slots[i].restart_at < at)
            at = s->slots[i].restart_at;
    if (s->state != MS_RUNNING && s->kill_at < at)
        at = s->kill_at;
    if (isinf(at))
        return 0;
    double d = at - now;
    if (d < 0)
        d = 0;
    ts->tv_sec = (time_t)d;
    ts->tv_nsec = (long)((d - (double)ts->tv_sec) * 1e9);
    return 1;
}

static int install_signals(sigset_t *unblocked)
{
    struct sigaction sa = {.sa_handler = on_signal};
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

int supervisor_run(const pagid_config *cfg, listener_set *ls, int nworkers)
{
    supervisor s = {.cfg = cfg, .ls = ls, .n = nworkers, .pid = getpid()};
    s.slots = calloc((size_t)nworkers, sizeof *s.slots);
    if (!s.slots) {
        log_error("out of memory");
        return EXIT_STARTUP;
    }
    sigset_t unblocked;
    if (install_signals(&unblocked) < 0) {
        log_error("cannot install signal handlers: %s", strerror(errno));
        free(s.slots);
        return EXIT_STARTUP;
    }

    log_info("master started (pid %d), %d worker%s", (int)s.pid, nworkers,
             nworkers == 1 ? "" : "s");
    if (((cfg->user && *cfg->user) || (cfg->group && *cfg->group)) && geteuid() != 0)
        log_warn("user/group ignored: the master does not run as root");
    for (int i = 0; i < nworkers; i++) {
        s.slots[i].num = i + 1;
        spawn(&s, &s.slots[i]);
    }
    char status[256];
    snprintf(status, sizeof status, "READY=1\nMAINPID=%d\nSTATUS=%d workers, listening on %s%s",
             (int)s.pid, nworkers, cfg->n_listens ? cfg->listens[0].spec : "-",
             cfg->n_listens > 1 ? " ..." : "");
    notify(status);

    int code = EXIT_OK;
    for (;;) {
        if (sig_reap) {
            sig_reap = 0;
            reap(&s);
        }
        if (sig_quit) {
            sig_quit = 0;
            if (s.state != MS_FAST)
                begin_fast_stop(&s);
        }
        if (sig_terminate) {
            sig_terminate = 0;
            if (s.state == MS_RUNNING)
                begin_drain(&s);
            else if (s.state == MS_DRAINING)
                begin_fast_stop(&s); /* asked twice: the operator is impatient */
        }
        if (sig_reconfigure) {
            sig_reconfigure = 0;
            log_warn("reload is not supported yet; SIGHUP ignored");
        }

        double now = now_mono();
        if (s.state == MS_RUNNING) {
            restart_due(&s, now);
            if (count_state(&s, WS_FATAL) == s.n) {
                log_error("no worker could start");
                code = EXIT_STARTUP;
                break;
            }
        } else if (count_state(&s, WS_RUNNING) == 0) {
            log_info("all workers stopped");
            break;
        } else if (now >= s.kill_at) {
            if (s.killed) {
                log_error("%d worker(s) did not die after SIGKILL; exiting anyway",
                          count_state(&s, WS_RUNNING));
                break;
            }
            log_warn("%d worker(s) still running after the stop timeout; sending SIGKILL",
                     count_state(&s, WS_RUNNING));
            signal_workers(&s, SIGKILL);
            s.killed = 1;
            s.kill_at = now + SUPERVISOR_DRAIN_GRACE_S;
        }

        struct timespec ts;
        int timed = next_timeout(&s, now, &ts);
        if (ppoll(NULL, 0, timed ? &ts : NULL, &unblocked) < 0 && errno != EINTR) {
            log_error("ppoll: %s", strerror(errno));
            break;
        }
    }
    free(s.slots);
    return code;
}
