/*
 * generation_zygote.c - the process table's side of a generation's zygote:
 * slots asked of it, the pids it reports, its death (requests retried, the
 * zygote started again, or given up on after repeated crashes: then the
 * generation forks workers that load the apps themselves, as without
 * preload). The zygote process itself is zygote.c's.
 */
#include "generation.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include "../common/exitcodes.h"
#include "../common/log.h"

/* A zygote that dies this soon after its start, this many times in a row,
 * is given up on for its generation. Loading a large app takes seconds. */
#define ZYGOTE_FAST_CRASH_S 10.0
#define ZYGOTE_MAX_FAST_CRASHES 3

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
    uint32_t seq = zygote_request(&g->zy, w->num);
    if (seq == 0) {
        /* The zygote is dying: its exit retries the slot. */
        w->state = WS_BACKOFF;
        w->restart_at = now + 1.0;
        return 0;
    }
    w->pid = 0;
    w->spawn_seq = seq;
    w->state = WS_RUNNING;
    w->started = now;
    w->ready = 0;
    w->hb_killed = 0;
    w->hb_reported = 0;
    w->kill_errno = 0;
    w->draining = 0;
    return 0;
}

static worker_slot *find_request(generation *g, const zygote_msg *m)
{
    for (int i = 0; i < g->n; i++)
        if (pending(&g->slots[i]) && g->slots[i].num == m->num && g->slots[i].spawn_seq == m->seq)
            return &g->slots[i];
    return NULL;
}

void gen_zygote_input(const gen_env *e, generation *g)
{
    (void)e;
    zygote_msg m;
    int rc;
    while ((rc = zygote_read(&g->zy, &m)) > 0) {
        worker_slot *w = find_request(g, &m);
        if (!w) {
            /* Asked for and then forgotten (its zygote was replaced): no
             * slot will ever supervise it, so it must not serve. */
            if (m.type == ZMSG_SPAWNED) {
                log_warn("zygote reported worker %d (pid %d) for no waiting slot; killing it",
                         m.num, m.pid);
                kill(m.pid, SIGKILL);
            }
            continue;
        }
        if (m.type == ZMSG_FAILED) {
            log_error("the zygote could not fork worker %d: %s; retrying in 1s", w->num,
                      strerror(m.err));
            w->state = WS_BACKOFF;
            w->restart_at = w->started + 1.0;
            continue;
        }
        w->pid = m.pid;
        log_info("worker %d started (pid %d, generation %u, from the zygote)", w->num, m.pid,
                 g->id);
        /* Told to stop while it was being forked: tell it now. */
        if (w->draining || !w->respawn || g->state == GEN_DRAINING || g->state == GEN_FAILED) {
            w->draining = 1;
            if (kill(w->pid, g->killed ? SIGKILL : SIGTERM) < 0 && errno != ESRCH)
                log_error("cannot stop worker %d (pid %d): %s", w->num, (int)w->pid,
                          strerror(errno));
        }
    }
    if (rc < 0)
        zygote_close(&g->zy); /* it is gone, or going: its exit is reaped */
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
    /* Reports written before it died still count. */
    gen_zygote_input(e, g);
    zygote_close(&g->zy);
    g->zy.pid = 0;
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    int fatal = code == EXIT_WORKER_FATAL;
    if (code == EXIT_NO_PRELOAD)
        g->zy.fallback = 1; /* it said why; its requests are forked directly below */
    int stopping = !respawn_ok || g->state == GEN_DRAINING || g->state == GEN_FAILED;

    int lost = 0;
    for (int i = 0; i < g->n; i++) {
        worker_slot *w = &g->slots[i];
        if (!pending(w))
            continue;
        lost++;
        if (fatal) {
            w->state = WS_FATAL;
        } else if (stopping || !w->respawn) {
            w->state = WS_EXITED;
        } else {
            w->state = WS_BACKOFF;
            w->restart_at = now;
        }
    }
    if (fatal) {
        log_error("zygote (pid %d, generation %u) could not load the apps; %d worker%s will "
                  "not start",
                  (int)pid, g->id, lost, lost == 1 ? "" : "s");
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
    g->zy.fast_crashes = now - g->zy.started < ZYGOTE_FAST_CRASH_S ? g->zy.fast_crashes + 1 : 0;
    if (g->zy.fast_crashes >= ZYGOTE_MAX_FAST_CRASHES) {
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
