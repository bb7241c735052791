/*
 * opsapp.c - the operations tests' PAGI module (test_ops.py builds it): it
 * answers every request with "ok PID GEN" so a client can tell which worker
 * served it, and misbehaves on purpose where a test needs a worker to die.
 *
 *   GET /crash            abort() in handle: the worker dies with SIGABRT
 *   GET /block            never returns from handle (pause() forever, whatever
 *                         the signal): a blocked event loop, deaf to SIGTERM
 *   GET /block-timer      answers, and a timer 0.1s later blocks the same way:
 *                         the loop is held outside any request's app call
 *   OPSAPP_CRASH=startup  abort() in the lifespan scope: a crash loop
 *   OPSAPP_CRASH=fail     lifespan.startup.failed: the worker must not serve
 *   OPSAPP_SLOW_START=MS  lifespan startup completes after MS milliseconds
 *   OPSAPP_FAIL_IF=PATH   lifespan.startup.failed while PATH exists (per generation)
 *   OPSAPP_TAG=x          appended to every answer (tells configs apart)
 */
#define _DEFAULT_SOURCE

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <unistd.h>

#include <pagi/pagi.h>

static void block_forever(pagi_timer *t, void *ud)
{
    (void)t;
    (void)ud;
    for (;;)
        pause();
}

static void done(pagi_scope *s, const char *err, void *ud)
{
    (void)err;
    (void)ud;
    pagi_scope_finish(s, NULL);
}

static void lifespan_done(pagi_scope *s, const char *err, void *ud)
{
    (void)err;
    (void)ud;
    pagi_scope_finish(s, NULL);
}

static void lifespan_recv(pagi_scope *s, const pagi_event *ev, void *ud)
{
    (void)ud;
    if (ev->type == PAGI_EV_LIFESPAN_STARTUP) {
        const char *crash = getenv("OPSAPP_CRASH");
        const char *slow = getenv("OPSAPP_SLOW_START");
        const char *fail_if = getenv("OPSAPP_FAIL_IF");
        if (fail_if && access(fail_if, F_OK) == 0)
            crash = "fail";
        if (slow) {
            /* Blocking on purpose: a slow startup, as a real app's may be. */
            long ms = atol(slow);
            struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
            nanosleep(&ts, NULL);
        }
        pagi_event out = PAGI_EVENT_INIT(crash && strcmp(crash, "fail") == 0
                                             ? PAGI_EV_LIFESPAN_STARTUP_FAILED
                                             : PAGI_EV_LIFESPAN_STARTUP_COMPLETE);
        if (crash && strcmp(crash, "fail") == 0)
            out.message = (pagi_str){"opsapp: told to fail", 20};
        if (pagi_send(s, &out, NULL, NULL) != 0 || pagi_receive(s, lifespan_recv, NULL) != 0)
            pagi_scope_finish(s, NULL);
        return;
    }
    pagi_event out = PAGI_EVENT_INIT(PAGI_EV_LIFESPAN_SHUTDOWN_COMPLETE);
    if (pagi_send(s, &out, lifespan_done, NULL) != 0)
        pagi_scope_finish(s, NULL);
}

static void handle(pagi_scope *s, void *instance)
{
    (void)instance;
    const char *crash = getenv("OPSAPP_CRASH");
    if (pagi_scope_type_of(s) == PAGI_SCOPE_LIFESPAN) {
        if (crash && strcmp(crash, "startup") == 0)
            abort();
        if (pagi_receive(s, lifespan_recv, NULL) != 0)
            pagi_scope_finish(s, pagi_scope_error(s));
        return;
    }
    if (pagi_scope_type_of(s) != PAGI_SCOPE_HTTP) {
        pagi_scope_finish(s, "unsupported scope type");
        return;
    }
    pagi_str path = pagi_scope_path(s);
    if (path.len == 6 && memcmp(path.ptr, "/crash", 6) == 0)
        abort();
    if (path.len == 6 && memcmp(path.ptr, "/block", 6) == 0)
        for (;;)
            pause();
    if (path.len == 12 && memcmp(path.ptr, "/block-timer", 12) == 0 &&
        pagi_timer_start(pagi_scope_loop(s), 0.1, 0, block_forever, NULL) == NULL)
        abort();
    static char body[128];
    const char *tag = getenv("OPSAPP_TAG");
    int n = snprintf(body, sizeof body, "ok %d %s", (int)getpid(), tag ? tag : "");
    char len[16];
    snprintf(len, sizeof len, "%d", n);
    pagi_header h[] = {{{"content-type", 12}, {"text/plain", 10}},
                       {{"content-length", 14}, {len, strlen(len)}}};
    pagi_event start = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_START);
    start.status = 200;
    start.headers = h;
    start.header_count = 2;
    pagi_event b = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_BODY);
    b.body.ptr = body;
    b.body.len = (size_t)n;
    if (pagi_send(s, &start, NULL, NULL) != 0 || pagi_send(s, &b, done, NULL) != 0)
        pagi_scope_finish(s, pagi_scope_error(s));
}

const pagi_app pagi_module = PAGI_APP_INIT("opsapp", NULL, handle, NULL);
