/*
 * supervisor.h - the master cycle: generations of workers (reload on
 * SIGHUP), restart with backoff, heartbeat, binary upgrade (SIGUSR2), and
 * the graceful or fast stop; sd_notify along the way.
 */
#ifndef PAGID_SUPERVISOR_H
#define PAGID_SUPERVISOR_H

#include <sys/types.h>

#include "common/config.h"
#include "cli.h"
#include "listeners.h"

/* Restart backoff: a worker that dies within SUPERVISOR_FAST_CRASH_MS of
 * its start counts as a fast crash. */
#define SUPERVISOR_FAST_CRASH_MS 1000
#define SUPERVISOR_BACKOFF_MIN_MS 100
#define SUPERVISOR_BACKOFF_MAX_MS 10000
/* Grace added to timeouts.shutdown before stragglers are SIGKILLed. */
#define SUPERVISOR_DRAIN_GRACE_S 5.0
/* How long a fast stop (SIGQUIT) waits before SIGKILL. */
#define SUPERVISOR_FAST_STOP_S 1.0
/* A new generation (or new master) not ready this long after
 * timeouts.lifespan_startup is given up. */
#define SUPERVISOR_START_GRACE_S 10.0
/* The variable that tells a re-executed master who its predecessor is. */
#define SUPERVISOR_UPGRADE_ENV "PAGID_UPGRADE_PARENT"

/** What the master needs beyond its first config; every field optional. */
typedef struct master_opts {
    const cli_options *cli; /* SIGHUP rebuilds the config from these (NULL: no reload) */
    char *const *argv;      /* SIGUSR2 re-executes exe with these */
    const char *exe;        /* the resolved binary (NULL: no upgrade) */
    const char *pid_file;   /* renamed to .oldbin during an upgrade */
    pid_t upgrade_parent;   /* we are an upgrade's new master: tell it when ready */
    int handed_over;        /* out: a new master took over (keep its pid file) */
} master_opts;

/**
 * Delay in milliseconds before restarting a worker that has just crashed
 * for the n-th time in a row within SUPERVISOR_FAST_CRASH_MS of starting
 * (n >= 1): 0 for the first, then 100, 200, 400 ... capped at 10 s.
 */
unsigned supervisor_backoff_ms(unsigned fast_crashes);

/**
 * How long after SIGUSR2 the old master waits for the new one to be ready
 * before it gives up on the upgrade: timeouts.lifespan_startup (60 s when
 * 0) + 30 s for exec, config and the start grace. pagid -s upgrade waits
 * a little longer, so it hears the master's verdict.
 */
static inline double supervisor_upgrade_timeout(const pagid_config *cfg)
{
    double t = cfg->timeouts.lifespan_startup;
    return (t > 0 ? t : 60.0) + SUPERVISOR_START_GRACE_S + 20.0;
}

/** cfg->workers with "auto" resolved to the number of online CPUs. */
int supervisor_resolve_workers(const pagid_config *cfg);

/**
 * Run the master until it is told to stop. Forks nworkers (>= 1) workers
 * that run worker_run() on ls, supervises them and handles the signals of
 * pagid(8). Takes ls over (it is empty on return); cfg is borrowed and must
 * outlive the call. opts may be NULL (no reload, no upgrade). Returns the
 * master's exit code: EXIT_OK after a stop, EXIT_STARTUP when no worker
 * could start.
 */
int supervisor_run(const pagid_config *cfg, listener_set *ls, int nworkers, master_opts *opts);

#endif
