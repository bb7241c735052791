/*
 * app_call.h - the worker enters and leaves app code: the crash line's note
 * (crash.h) and, for the master's blocked-loop kill, the record of the
 * outermost app call in the worker's shared slot (shm_app_call): its kind,
 * the request it serves and when it began. No system call, no allocation.
 */
#ifndef PAGID_APP_CALL_H
#define PAGID_APP_CALL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/shm.h"
#include "worker/core/crash.h"
#include "worker/core/loop.h"

/** The request an app call serves, as the record shows it; NULL: none. */
typedef struct app_call_request {
    const void *id; /* with gen, who it is: its text is written once per request */
    uint32_t gen;
    const char *method;
    const char *path; /* the raw path */
    size_t path_len;
    const char *query;
    size_t query_len;
    const char *client; /* the crash line's */
    int client_port;
    const char *crash_path; /* the crash line's (the decoded path) */
    size_t crash_path_len;
} app_call_request;

/* The slow part of app_call_enter: the record rewritten (app_call.c). */
void app_call_publish(pagi_loop *l, const char *kind, const app_call_request *req);

/**
 * Around every call into app code. Only the outermost call of a nest is
 * recorded (a callback run inside another is part of it); the record's
 * request text is rewritten only when the request changes.
 */
static inline void app_call_enter(pagi_loop *l, const char *kind, const app_call_request *req)
{
    if (req)
        crash_enter(kind, req->method, req->crash_path, req->crash_path_len, req->client,
                    req->client_port);
    else
        crash_enter(kind, NULL, NULL, 0, NULL, 0);
    if (l->app_call_depth++ == 0 && l->app_call)
        app_call_publish(l, kind, req);
}

static inline void app_call_leave(pagi_loop *l)
{
    crash_leave();
    if (--l->app_call_depth == 0 && l->app_call)
        atomic_store_explicit(&l->app_call->started_ms, 0, memory_order_release);
}

/**
 * The heartbeat's moment (now_ms: CLOCK_MONOTONIC): keeps the offset that
 * turns the loop's cached time (ev_now, no system call) into the master's
 * clock for the record's start time.
 */
void app_call_clock_sync(pagi_loop *l, uint64_t now_ms);

#endif
