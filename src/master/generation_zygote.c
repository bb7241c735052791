/*
 * generation_zygote.c - the process table's side of a generation's zygote:
 * slots asked of it, the pids it reports, its death (requests retried, the
 * zygote started again, or given up on after repeated crashes: then the
 * generation forks workers that load the apps themselves, as without
 * preload). The zygote process itself is zygote.c's.
 */
#include "generation.h"
#include "pubsub_broker.h"
#include "respawn.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/exitcodes.h"
#include "common/log.h"
#include "gen_logs.h"

static int pending(const worker_slot *w)
{
    return w->state == WS_RUNNING && w->pid == 0;
}

int gen_zygote_spawn(const gen_env *e, generation *g, worker_slot *w, double now)
{
    if (!g->preload || g->zy.fallback || !e->subreaper)
        return -1;
    if (g->zy.pid == 0 && zygote_start(e, g) < 0)
        return -1; /* this worker is forked directly; the zygote is tried again next time */
    /* The worker's log and pub/sub channels go with the request
     * (SCM_RIGHTS): the master holds their ends from now on, bound to this
     * slot. Without a log channel the worker is not asked for. */
    int log_master, log_chan = gen_logs_channel(g, &log_master);
    if (log_chan < 0) {
        w->state = WS_BACKOFF;
        w->restart_at = now + 1.0;
        return 0;
    }
    int child_fd = -1, peer = e->broker ? broker_peer_new(e->broker, &child_fd) : -1;
    uint32_t seq = zygote_request(&g->zy, w->num, log_chan, child_fd);
    close(log_chan);
    if (seq == 0)
        close(log_master);
    else
        w->log_chan = log_master + 1;
    if (peer >= 0) {
        broker_peer_forked(e->broker, peer, child_fd, 0);
        if (seq == 0)
            broker_peer_close(e->broker, peer);
    }
    if (seq == 0) {
        /* The zygote is dying: its exit retries the slot. */
        w->state = WS_BACKOFF;
        w->restart_at = now + RESPAWN_FORK_RETRY_S;
        return 0;
    }
    gen_slot_started(w, 0, now); /* pid 0: the zygote reports it */
    w->spawn_seq = seq;
    w->pubsub_peer = peer + 1;
    return 0;
}

static worker_slot *find_request(generation *g, int num, uint32_t seq)
{
    for (int i = 0; i < g->n; i++)
        if (pending(&g->slots[i]) && g->slots[i].num == num && g->slots[i].spawn_seq == seq)
            return &g->slots[i];
    return NULL;
}

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void keep_report(generation *g, const zygote_msg *m)
{
    zygote *z = &g->zy;
    if (z->n_reports == ZYGOTE_REPORTS) {
        /* Only a zygote writing reports of its own fills the table. */
        log_warn("zygote (pid %d, generation %u): too many unverified reports; dropping the "
                 "report of pid %d",
                 (int)z->pid, g->id, (int)z->reports[0].pid);
        memmove(z->reports, z->reports + 1, (ZYGOTE_REPORTS - 1) * sizeof z->reports[0]);
        z->n_reports--;
    }
    z->reports[z->n_reports++] =
        (zygote_report){.pid = m->pid, .num = m->num, .seq = m->seq, .at = mono_now()};
}

void gen_zygote_input(const gen_env *e, generation *g)
{
    (void)e;
    zygote_msg m;
    int rc;
    while ((rc = zygote_read(&g->zy, &m)) > 0) {
        if (m.type == ZMSG_SPAWNED) {
            /* Trusted only once verified: app code runs in the zygote. */
            keep_report(g, &m);
            continue;
        }
        worker_slot *w = find_request(g, m.num, m.seq);
        if (!w)
            continue;
        log_error("the zygote could not fork worker %d: %s; retrying in %.0fs", w->num,
                  strerror(m.err), RESPAWN_FORK_RETRY_S);
        gen_slot_pubsub_close(e, w);
        gen_slot_logs_close(w);
        w->state = WS_BACKOFF;
        w->restart_at = w->started + RESPAWN_FORK_RETRY_S;
    }
    if (rc < 0)
        zygote_close(&g->zy); /* it is gone, or going: its exit is reaped */
}

/* The parent of pid from /proc/PID/stat, or -1 when there is no such process. */
static pid_t parent_of(pid_t pid)
{
    char path[32], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* "pid (comm) state ppid ...": comm may hold anything, even ") ". */
    char *p = strrchr(buf, ')');
    int ppid;
    char state;
    if (!p || sscanf(p + 1, " %c %d", &state, &ppid) != 2)
        return -1;
    return (pid_t)ppid;
}

/* pid is already supervised: a worker of a slot, a zygote, the new master. */
static int known_child(const gen_env *e, pid_t pid)
{
    generation *owner;
    if (pid == e->upgrade_pid || gen_find(e->all, pid, &owner) || gen_find_zygote(e->all, pid))
        return 1;
    return 0;
}

static void accept_report(generation *g, worker_slot *w, pid_t pid)
{
    w->pid = pid;
    char label[32];
    log_info("%s started (pid %d, generation %u, from the zygote)",
             gen_slot_label(w, label, sizeof label), (int)pid, g->id);
    /* Told to stop while it was being forked: tell it now. */
    if (w->draining || !w->respawn || g->state == GEN_DRAINING || g->state == GEN_FAILED) {
        w->draining = 1;
        if (kill(w->pid, g->killed ? SIGKILL : SIGTERM) < 0 && errno != ESRCH)
            log_error("cannot stop worker %d (pid %d): %s", w->num, (int)w->pid, strerror(errno));
    }
}

/* A worker's middle process reports, then exits: the worker is the
 * master's child a moment later. A report still unverified after the
 * worker's own wait for that (REPARENT_WAIT_MS) names no worker. */
#define REPORT_WAIT_S 6.0

/* 1 when the report is done with (acted on, or dropped), 0 to wait. */
static int settle_one(const gen_env *e, generation *g, const zygote_report *r, double now)
{
    pid_t ppid = parent_of(r->pid);
    if (ppid == e->master_pid) {
        if (known_child(e, r->pid)) {
            log_warn("zygote (pid %d, generation %u) reported pid %d for worker %d, which is "
                     "another worker or process of the master; ignoring the report",
                     (int)g->zy.pid, g->id, (int)r->pid, r->num);
            return 1;
        }
        worker_slot *w = find_request(g, r->num, r->seq);
        if (w) {
            accept_report(g, w, r->pid);
            return 1;
        }
        /* Ours, so safe to kill, and no slot will ever supervise it. */
        log_warn("zygote reported worker %d (pid %d) for no waiting slot; killing it", r->num,
                 (int)r->pid);
        kill(r->pid, SIGKILL);
        return 1;
    }
    /* Not reparented yet: its parent is the middle process, the zygote's
     * child (or the master's, when the zygote died). Anything else is no
     * worker of ours: never signalled. */
    pid_t gp = ppid > 0 ? parent_of(ppid) : -1;
    int bogus = ppid < 0 || (gp > 0 && gp != g->zy.pid && gp != e->master_pid) ||
                now - r->at > REPORT_WAIT_S;
    if (!bogus)
        return 0;
    log_warn("zygote (pid %d, generation %u) reported pid %d for worker %d, which is %s; "
             "ignoring the report (written by the app?)",
             (int)g->zy.pid, g->id, (int)r->pid, r->num,
             ppid < 0 ? "no process" : "not a child of the master");
    return 1;
}

int gen_zygote_settle(const gen_env *e, generation *g)
{
    zygote *z = &g->zy;
    if (z->n_reports == 0)
        return 0;
    double now = mono_now();
    int kept = 0;
    for (int i = 0; i < z->n_reports; i++)
        if (!settle_one(e, g, &z->reports[i], now))
            z->reports[kept++] = z->reports[i];
    z->n_reports = kept;
    return kept;
}

worker_slot *gen_zygote_claim(generation *list, pid_t pid, generation **owner)
{
    for (generation *g = list; g; g = g->next) {
        zygote *z = &g->zy;
        for (int i = 0; i < z->n_reports; i++) {
            if (z->reports[i].pid != pid)
                continue;
            worker_slot *w = find_request(g, z->reports[i].num, z->reports[i].seq);
            memmove(z->reports + i, z->reports + i + 1,
                    (size_t)(z->n_reports - i - 1) * sizeof z->reports[0]);
            z->n_reports--;
            if (!w)
                return NULL;
            accept_report(g, w, pid);
            *owner = g;
            return w;
        }
    }
    return NULL;
}

void gen_zygote_end(generation *g)
{
    zygote_shutdown(&g->zy);
    gen_zygote_input(NULL, g);
    zygote_close(&g->zy);
}

generation *gen_find_zygote(generation *list, pid_t pid)
{
    for (generation *g = list; g; g = g->next)
        if (g->zy.pid > 0 && g->zy.pid == pid)
            return g;
    return NULL;
}

void gen_zygote_exited(const gen_env *e, generation *g, int status, double now, int respawn_ok)
{
    pid_t pid = g->zy.pid;
    /* Reports written before it died still count; a middle process's
     * send from now on fails, and the middle kills its worker. */
    zygote_shutdown(&g->zy);
    gen_zygote_input(e, g);
    zygote_close(&g->zy);
    gen_zygote_settle(e, g); /* the reparented ones keep their slots */
    g->zy.pid = 0;
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    int fatal = code == EXIT_WORKER_FATAL;
    if (code == EXIT_NO_PRELOAD)
        g->zy.fallback = 1; /* it said why; its requests are forked directly below */
    int stopping = !respawn_ok || g->state == GEN_DRAINING || g->state == GEN_FAILED;

    int lost = 0, lost_pool = 0;
    for (int i = 0; i < g->n; i++) {
        worker_slot *w = &g->slots[i];
        if (!pending(w))
            continue;
        if (gen_is_pool_slot(w))
            lost_pool++;
        else
            lost++;
        gen_slot_pubsub_close(e, w);
        gen_slot_logs_close(w);
        switch (respawn_after_zygote(fatal, !stopping && w->respawn)) {
        case RESPAWN_FATAL:
            w->state = WS_FATAL;
            break;
        case RESPAWN_NOW:
            w->state = WS_BACKOFF; /* restart_due forks it on this pass */
            w->restart_at = now;
            break;
        default:
            w->state = WS_EXITED;
            break;
        }
    }
    if (fatal) {
        char counts[96];
        log_error("zygote (pid %d, generation %u) could not load the apps; %s will not start",
                  (int)pid, g->id, gen_describe_counts(lost, lost_pool, counts, sizeof counts));
        return;
    }
    if (stopping || g->zy.fallback) {
        log_info("zygote (pid %d, generation %u) exited", (int)pid, g->id);
        return;
    }
    char how[48];
    if (WIFSIGNALED(status))
        snprintf(how, sizeof how, "signal %d", WTERMSIG(status));
    else
        snprintf(how, sizeof how, "exit status %d", code);
    g->zy.fast_crashes = respawn_zygote_fast_crashes(g->zy.fast_crashes, now - g->zy.started);
    if (respawn_zygote_given_up(g->zy.fast_crashes)) {
        g->zy.fallback = 1;
        log_error("zygote (pid %d, generation %u) died (%s), %u times in a row soon after "
                  "starting; generation %u now forks its workers directly (each loads the apps "
                  "itself)",
                  (int)pid, g->id, how, g->zy.fast_crashes, g->id);
        return;
    }
    log_error("zygote (pid %d, generation %u) died (%s); its workers keep serving; starting a "
              "new zygote",
              (int)pid, g->id, how);
    if (zygote_start(e, g) < 0)
        log_error("generation %u: no zygote: workers are forked directly until one starts", g->id);
}

void gen_zygote_check(generation *g, double now)
{
    if (g->zy.pid <= 0 || g->zy.hung)
        return;
    /* Loading has the startup's deadline, as a worker's load and lifespan
     * startup have: a zygote that outlives it with a request unanswered is
     * stuck (an app blocking at load time) and is killed, then restarted. */
    const pagid_timeouts *t = &g->cfg->timeouts;
    double limit = t->lifespan_startup > t->heartbeat ? t->lifespan_startup : t->heartbeat;
    if (limit <= 0)
        return;
    for (int i = 0; i < g->n; i++) {
        const worker_slot *w = &g->slots[i];
        if (pending(w) && now - w->started > limit) {
            log_error("zygote (pid %d, generation %u) has not forked worker %d in %.1fs (limit "
                      "%.1fs: timeouts.lifespan_startup); killing it",
                      (int)g->zy.pid, g->id, w->num, now - w->started, limit);
            if (kill(g->zy.pid, SIGKILL) == 0)
                g->zy.hung = 1;
            return;
        }
    }
}
