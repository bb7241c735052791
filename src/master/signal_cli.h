/*
 * signal_cli.h - pagid -s SIGNAL, like nginx -s: find the running master
 * through the pid file of the configuration and signal it; for an upgrade,
 * wait until the new master serves.
 */
#ifndef PAGID_SIGNAL_CLI_H
#define PAGID_SIGNAL_CLI_H

#include <stdio.h>
#include <sys/types.h>

#include "cli.h"

#define SIGNAL_CLI_NAMES "reload, reopen, quit, stop or upgrade"

/** The signal a -s name stands for in pagid (see pagid(8)), or -1. */
int signal_cli_signo(const char *name);

/**
 * Run pagid -s o->signal_name: build the config like the master would,
 * read its pid_file, check the pid (a running pagid, not pid 0 or 1), send
 * the signal; for upgrade, wait for the handover. Messages go to out
 * (success of an upgrade) and err. Returns an exit code of exitcodes.h.
 */
int signal_cli_run(const cli_options *o, FILE *out, FILE *err);

/* ---- the upgrade wait, as a pure step so tests can drive it ---- */

/** What -s upgrade sees at one poll. */
typedef struct upgrade_view {
    int old_alive;     /* the master we sent SIGUSR2 still runs */
    int oldbin_is_old; /* PID_FILE.oldbin exists and names it: the upgrade began */
    pid_t current;     /* the pid in PID_FILE, 0 when missing or unreadable */
    int current_alive; /* and that pid is a running process */
    int pidfile_moved; /* PID_FILE's inode or ctime differs from before the signal: it was
                          renamed away and back (an upgrade that failed between two looks) */
} upgrade_view;

typedef enum upgrade_verdict { UPGRADE_WAIT, UPGRADE_DONE, UPGRADE_FAILED } upgrade_verdict;

typedef struct upgrade_watch {
    pid_t old;          /* the master signalled */
    double start_grace; /* seconds for the .oldbin rename to show before giving up */
    double deadline;    /* seconds for the whole handover */
    int started;        /* .oldbin seen */
    char why[256];      /* UPGRADE_FAILED: what happened */
} upgrade_watch;

/**
 * One poll, elapsed seconds after the signal. The old master renames the
 * pid file to .oldbin at SIGUSR2, the new master writes the pid file, and
 * the old one removes .oldbin when it hands over (or renames it back when
 * the new one fails): so .oldbin gone and a live new pid in the pid file
 * means the new master serves.
 */
upgrade_verdict upgrade_watch_step(upgrade_watch *w, const upgrade_view *v, double elapsed);

#endif
