/*
 * exitcodes.h - process exit codes shared by the master, the workers and
 * the documentation (pagid(8) EXIT STATUS).
 */
#ifndef PAGID_EXITCODES_H
#define PAGID_EXITCODES_H

enum pagid_exit {
    EXIT_OK = 0,           /* clean stop */
    EXIT_CONFIG = 1,       /* invalid configuration (pagid -t, startup) */
    EXIT_USAGE = 2,        /* bad command line */
    EXIT_STARTUP = 3,      /* could not bind, fork, load the app ... */
    EXIT_WORKER_FATAL = 4, /* worker: lifespan startup failed / app unusable: never respawn */
    EXIT_RECYCLE = 5,      /* worker: served max_requests and drained itself: replace it */
    EXIT_NOT_RUNNING = 6,  /* pagid -s: no pid file, or its pid is not a running pagid */
    EXIT_SIGNAL = 7,       /* pagid -s: unusable pid file, signal refused, upgrade not completed */
    EXIT_NO_PRELOAD = 8    /* zygote: an app cannot be preloaded: load it in each worker */
};

#endif
