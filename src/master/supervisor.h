/*
 * supervisor.h - the master cycle: fork the workers, restart the ones that
 * crash (with backoff), and stop them all gracefully or fast on a signal.
 */
#ifndef PAGID_SUPERVISOR_H
#define PAGID_SUPERVISOR_H

#include "../common/config.h"
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

/**
 * Delay in milliseconds before restarting a worker that has just crashed
 * for the n-th time in a row within SUPERVISOR_FAST_CRASH_MS of starting
 * (n >= 1): 0 for the first, then 100, 200, 400 ... capped at 10 s.
 */
unsigned supervisor_backoff_ms(unsigned fast_crashes);

/**
 * Switch to cfg->user / cfg->group (each optional; the user's primary group
 * when no group is given) if running as root; a no-op otherwise. Called in
 * each worker after fork, and by the single process (--workers 0) after
 * binding. 0, or -1 after logging why.
 */
int supervisor_drop_privileges(const pagid_config *cfg);

/**
 * Run the master until it is told to stop. Forks nworkers (>= 1) workers
 * that run worker_run() on ls->items, supervises them and handles
 * SIGTERM/SIGINT (graceful drain), SIGQUIT (fast stop), SIGHUP, SIGCHLD.
 * Closes this process's copies of the listeners when the stop begins (the
 * caller still destroys the set). Returns the master's exit code: EXIT_OK
 * after a stop, EXIT_STARTUP when every worker exited with
 * EXIT_WORKER_FATAL.
 */
int supervisor_run(const pagid_config *cfg, listener_set *ls, int nworkers);

#endif
