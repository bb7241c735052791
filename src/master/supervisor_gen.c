/*
 * supervisor_gen.c - which generation serves: a new one (the first, or one
 * SIGHUP or --dev built from a fresh config) starts beside the serving one,
 * becomes active once every worker is ready (the old one then drains), or
 * fails and leaves the serving one alone.
 */
#include "supervisor_int.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/pidfile.h"
#include "common/proctitle.h"
#include "gen_logs.h"
#include "notify.h"
#include "privileges.h"
#include "pubsub_broker.h"
#include "shdicts.h"

void supervisor_push_generation(supervisor *s, generation *g)
{
    g->next = s->env.all;
    s->env.all = g;
    if (s->env.shm)
        atomic_store(&s->env.shm->generation, g->id);
}

static double start_deadline(const pagid_config *cfg, double now)
{
    double t = cfg->timeouts.lifespan_startup > 0 ? cfg->timeouts.lifespan_startup : 60.0;
    return now + t + SUPERVISOR_START_GRACE_S;
}

static int any_starting(const supervisor *s)
{
    for (const generation *g = s->env.all; g; g = g->next)
        if (g->state == GEN_STARTING)
            return 1;
    return 0;
}

static void reload_settled(supervisor *s)
{
    if (s->reloading && !any_starting(s)) {
        s->reloading = 0;
        notify_send("READY=1");
    }
}

static void fail_generation(supervisor *s, generation *g, const char *why)
{
    log_error("reload failed: generation %u %s; generation %u keeps serving", g->id, why,
              s->active ? s->active->id : 0);
    g->state = GEN_FAILED;
    gen_drain(g, supervisor_now());
    reload_settled(s);
}

/* g is ready: it serves from now on, and the one it replaces drains. */
static void activate(supervisor *s, generation *g)
{
    generation *old = s->active;
    g->state = GEN_ACTIVE;
    s->active = g;
    /* The serving generation's `pubsub:` is the one in force (a reload
     * with another url reconnects now, not before its workers are ready). */
    broker_set_backend(s->env.broker, &g->cfg->pubsub, s->env.shm);
    /* An older generation still starting (SIGHUP during startup) lost. */
    for (generation *o = s->env.all; o; o = o->next)
        if (o->state == GEN_STARTING && o->id < g->id)
            gen_drain(o, supervisor_now());
    if (old) {
        int pool = 0;
        for (int i = 0; i < g->n; i++)
            pool += gen_is_pool_slot(&g->slots[i]);
        char counts[96];
        log_info("generation %u ready (%s): draining generation %u", g->id,
                 gen_describe_counts(g->n - pool, pool, counts, sizeof counts), old->id);
        gen_drain(old, supervisor_now());
        if (s->env.shm)
            atomic_fetch_add(&s->env.shm->reloads, 1);
        reload_settled(s);
        return;
    }
    log_info("all workers ready");
    if (s->opts && s->opts->upgrade_parent > 0) {
        /* The new master of an upgrade: our predecessor drains once told. */
        if (getppid() == s->opts->upgrade_parent && kill(s->opts->upgrade_parent, SIGWINCH) == 0)
            log_info("upgrade: ready; told the old master (pid %d) to hand over",
                     (int)s->opts->upgrade_parent);
        else {
            log_warn("upgrade: the old master (pid %d) is gone", (int)s->opts->upgrade_parent);
            /* Its .oldbin would name a pid that may be reused, and block pagid -s upgrade. */
            if (s->opts->pid_file && *s->opts->pid_file) {
                char oldbin[4096];
                snprintf(oldbin, sizeof oldbin, "%s.oldbin", s->opts->pid_file);
                pidfile_remove(oldbin, s->opts->upgrade_parent);
            }
        }
        s->owns_files = 1;
        proctitle_master(NULL);
    }
    if (!any_starting(s))
        s->reloading = 0; /* this READY=1 also ends a reload begun during startup */
    notify_sendf("READY=1\nMAINPID=%d", (int)s->pid);
}

/* The serving generation lost every worker to fatal startup failures
 * (its app cannot start any more) and no reload is on its way. */
int supervisor_nothing_left(const supervisor *s)
{
    const generation *g = s->active;
    return g && !any_starting(s) && gen_live(g) == 0 && gen_count(g, WS_FATAL) > 0;
}

/* Readiness of starting generations: activate, or give up on them. */
int supervisor_progress_starting(supervisor *s, double now)
{
    for (generation *g = s->env.all; g; g = g->next) {
        if (g->state != GEN_STARTING)
            continue;
        int fatal = gen_count(g, WS_FATAL);
        int running = gen_count(g, WS_RUNNING);
        int pending = gen_count(g, WS_BACKOFF) + gen_count(g, WS_EMPTY);
        if (s->active && fatal) {
            fail_generation(s, g, "has a worker that could not start");
        } else if (s->active && now >= g->deadline) {
            fail_generation(s, g, "was not ready in time");
        } else if (gen_poll_ready(&s->env, g) && running > 0 && pending == 0) {
            if (fatal)
                log_warn("%d of %d workers could not start", fatal, g->n);
            activate(s, g);
        } else if (!s->active && running == 0 && pending == 0) {
            return -1;
        }
    }
    return 0;
}

/* cli_build_config prints its errors; the error log gets each line. */
static pagid_config *build_config(supervisor *s, int *errors)
{
    pagid_config *c = calloc(1, sizeof *c);
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (!c || !mem) {
        free(c);
        if (mem)
            fclose(mem);
        free(text);
        *errors = -1;
        return NULL;
    }
    *errors = cli_build_config(s->opts->cli, c, mem);
    fclose(mem);
    for (char *line = text, *end; line && *line; line = end + 1) {
        end = strchr(line, '\n');
        if (end)
            *end = '\0';
        if (*line)
            log_error("%s", line);
        if (!end)
            break;
    }
    free(text);
    return c;
}

/* SIGHUP, or a change --dev saw (why: the changed file). */
void supervisor_reload(supervisor *s, const char *why)
{
    if (!s->opts || !s->opts->cli) {
        log_warn("SIGHUP: no command line to rebuild the configuration from; ignored");
        return;
    }
    if (s->up == UP_STARTING) {
        log_warn("SIGHUP ignored: a binary upgrade is in progress");
        return;
    }
    if (why)
        log_info("%s changed: reloading", why);
    else
        log_info("SIGHUP: reloading the configuration");
    notify_reloading();
    s->reloading = 1;
    int errors;
    int access_fd = -1; /* the new generation's, until it has it */
    char err[2048];
    unsigned keep = s->active ? s->active->id : 0;
    pagid_config *c = build_config(s, &errors);
    int nworkers = c && !errors ? supervisor_resolve_workers(c) : 0;
    if (!c || errors) {
        log_error("reload failed: %d error(s) in the configuration; generation %u keeps serving",
                  errors, keep);
        goto fail;
    }
    if (nworkers < 1) {
        log_error("reload failed: workers: 0 (single process) needs a restart; generation %u "
                  "keeps serving",
                  keep);
        goto fail;
    }
    priv_identity id;
    priv_problem problem;
    if (priv_resolve(c, geteuid(), &id, &problem, err, sizeof err) < 0) {
        log_error("reload failed: %s; generation %u keeps serving", err, keep);
        goto fail;
    }
    const pagid_config *cur = s->active ? s->active->cfg : NULL;
    if (cur && ((c->error_log_path == NULL) != (cur->error_log_path == NULL) ||
                (c->error_log_path && strcmp(c->error_log_path, cur->error_log_path)) ||
                c->error_log_level != cur->error_log_level)) {
        if (log_open(c->error_log_path, c->error_log_level) < 0) {
            log_open(cur->error_log_path, cur->error_log_level);
            log_error("reload failed: cannot open error log %s: %s; generation %u keeps serving",
                      c->error_log_path, log_open_strerror(errno), keep);
            goto fail;
        }
    }

    gen_logs_open(c, &access_fd, err, sizeof err); /* as root, for the workers */
    /* Addresses that stay keep their very sockets: nobody is refused. */
    size_t n_reuse = 0;
    for (generation *g = s->env.all; g; g = g->next)
        n_reuse++;
    const listener_set **reuse = calloc(n_reuse ? n_reuse : 1, sizeof *reuse);
    if (!reuse) {
        log_error("reload failed: out of memory");
        goto fail;
    }
    n_reuse = 0;
    for (generation *g = s->env.all; g; g = g->next)
        reuse[n_reuse++] = &g->ls;
    listener_set ls;
    int rc = listeners_open_with(c, &ls, reuse, n_reuse, NULL, err, sizeof err);
    free(reuse);
    if (rc < 0 && config_msg_has_pos(err)) {
        /* The listen entry's FILE:LINE:COLUMN leads each line, as pagid -t says it. */
        for (char *line = strtok(err, "\n"); line; line = strtok(NULL, "\n"))
            log_error("%s", line);
        log_error("reload failed; generation %u keeps serving", keep);
        goto fail;
    }
    if (rc < 0) {
        log_error("reload failed: %s; generation %u keeps serving", err, keep);
        goto fail;
    }
    generation *g =
        shdicts_attach(c, s->env.all) == 0 ? gen_new(++s->last_id, c, 1, &ls, nworkers) : NULL;
    if (!g) {
        shdicts_detach(c, s->env.all);
        listener_set tmp = ls;
        for (size_t i = 0; tmp.unix_ino && i < tmp.n; i++)
            tmp.unix_ino[i] = 0;
        listeners_destroy(&tmp);
        log_error("reload failed: out of memory");
        goto fail;
    }
    g->access_fd = access_fd;
    g->deadline = start_deadline(c, supervisor_now());
    /* A newer SIGHUP supersedes a reload still starting (not the very
     * first generation: until it is ready nothing else would serve). */
    for (generation *o = s->env.all; o && s->active; o = o->next) {
        if (o->state == GEN_STARTING) {
            log_info("generation %u superseded by generation %u before it was ready", o->id, g->id);
            gen_drain(o, supervisor_now());
        }
    }
    supervisor_push_generation(s, g);
    log_info("generation %u: starting %d worker%s", g->id, nworkers, nworkers == 1 ? "" : "s");
    gen_spawn_all(&s->env, g);
    return;

fail:
    if (access_fd >= 0)
        close(access_fd);
    if (c) {
        config_free(c);
        free(c);
    }
    reload_settled(s);
}
