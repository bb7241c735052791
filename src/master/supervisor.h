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
#include "master_timing.h"

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
 * Block the master's signals from now on, before its listeners exist: a
 * SIGTERM that comes once a client could connect, while the master still
 * starts, waits for supervisor_run's handlers (a graceful stop), instead of
 * killing it by the default action. Forked children reset their mask.
 */
void supervisor_block_signals(void);

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
