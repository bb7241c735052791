/*
 * crash.h - the worker's crash line: when a fatal signal (SIGSEGV, SIGBUS,
 * SIGFPE, SIGABRT, SIGILL) kills the worker inside app code, one log line
 * names the callback and the request it was serving; the signal then kills
 * the worker as before, so the master logs and restarts it as usual.
 */
#ifndef PAGID_CRASH_H
#define PAGID_CRASH_H

#include <stddef.h>

/** Install the handlers (once per worker process). */
void crash_install(void);
/**
 * The worker enters app code: kind ("handle", "timer", ...) and, when it
 * serves a request, its method, path and client. Only pointers are stored
 * (they must stay valid until crash_leave); the handler formats them.
 */
void crash_enter(const char *kind, const char *method, const char *path, size_t path_len,
                 const char *client, int port);
/** Back in server code. */
void crash_leave(void);

#endif
