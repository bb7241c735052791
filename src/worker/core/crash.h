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
/* What the worker is doing: written on entering/leaving app code, read only
 * by the handler (same thread), so volatile stores are enough. */
typedef struct crash_note {
    const char *volatile kind;
    const char *volatile method;
    const char *volatile path;
    volatile size_t path_len;
    const char *volatile client;
    volatile int port;
} crash_note;
extern crash_note crash_current;

/**
 * The worker enters app code: kind ("handle", "timer", ...) and, when it
 * serves a request, its method, path and client. Only pointers are stored
 * (they must stay valid until crash_leave); the handler formats them.
 */
static inline void crash_enter(const char *kind, const char *method, const char *path,
                               size_t path_len, const char *client, int port)
{
    crash_current.method = method;
    crash_current.path = path;
    crash_current.path_len = path_len;
    crash_current.client = client;
    crash_current.port = port;
    crash_current.kind = kind;
}

/** Back in server code. */
static inline void crash_leave(void)
{
    crash_current.kind = NULL;
}

#endif
