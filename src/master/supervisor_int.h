/*
 * supervisor_int.h - the master's state, shared by supervisor.c (the loop,
 * signals, stop), supervisor_gen.c (which generation serves; reload) and
 * upgrade.c (SIGUSR2). Not for anything else.
 */
#ifndef PAGID_SUPERVISOR_INT_H
#define PAGID_SUPERVISOR_INT_H

#include "generation.h"
#include "supervisor.h"

typedef enum master_state {
    MS_RUNNING,  /* keep the active generation's workers running */
    MS_DRAINING, /* every generation drains (SIGTERM, or handed over to a new master) */
    MS_FAST,     /* SIGQUIT sent, waiting up to SUPERVISOR_FAST_STOP_S */
} master_state;

typedef enum upgrade_state {
    UP_NONE,       /* no upgrade in progress */
    UP_STARTING,   /* a new master runs, not ready yet: we keep serving */
    UP_ABANDONED,  /* it failed or timed out: waiting to reap it */
    UP_HANDED_OVER /* it took over: we drain and exit */
} upgrade_state;

typedef struct supervisor {
    master_opts *opts;
    gen_env env;        /* env.all: every live generation, newest first */
    generation *active; /* the serving generation; NULL until the first is ready */
    unsigned last_id;
    master_state state;
    int reloading;  /* RELOADING=1 sent, READY=1 owed */
    int owns_files; /* may unlink unix socket files (not before an upgrade's handover) */
    upgrade_state up;
    pid_t up_pid;
    double up_deadline;
    double next_tick; /* heartbeats, watchdog, STATUS */
    double next_watchdog;
    char status[256]; /* last STATUS= sent */
    pid_t pid;
    struct devwatch *dev; /* --dev: reload on change (devwatch.c), else NULL */
} supervisor;

double supervisor_now(void);

/* upgrade.c */
void upgrade_start(supervisor *s);
void upgrade_on_ready_signal(supervisor *s, pid_t from);
void upgrade_child_exited(supervisor *s, int status);
void upgrade_check_deadline(supervisor *s, double now);
/* supervisor.c: every generation drains; announce says STOPPING=1. */
void supervisor_begin_drain(supervisor *s, int announce);

/* supervisor_gen.c */
/* g joins the live generations, as the newest. */
void supervisor_push_generation(supervisor *s, generation *g);
/* Starting generations that became ready are activated (the one they
 * replace drains), those that cannot start fail; -1 when the very first
 * generation has no worker left to wait for. */
int supervisor_progress_starting(supervisor *s, double now);
/* 1 when the serving generation lost every worker to fatal startup
 * failures and no reload is on its way. */
int supervisor_nothing_left(const supervisor *s);
/* SIGHUP, or a change --dev saw (why: the changed file; NULL for SIGHUP):
 * a new config and generation beside the serving one; on any error the
 * serving one keeps serving. */
void supervisor_reload(supervisor *s, const char *why);

#endif
