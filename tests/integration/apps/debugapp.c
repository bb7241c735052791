/*
 * debugapp.c - a module that misuses the C interface on purpose, one route
 * per mistake, for the debug-mode tests (test_debug.py): each must be
 * logged with its request under --debug while other requests are served.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "pagi/pagi.h"

/* The handle a /stale request keeps after its scope was released. */
static pagi_scope *kept;

static void finish_sent(pagi_scope *s, const char *err, void *ud)
{
    (void)ud;
    pagi_scope_finish(s, err);
}

static void sent_only(pagi_scope *s, const char *err, void *ud)
{
    (void)s, (void)err, (void)ud;
}

static void finish_twice(pagi_scope *s, const char *err, void *ud)
{
    (void)ud;
    pagi_scope_finish(s, err);
    pagi_scope_finish(s, err);
}

static void keep_and_finish(pagi_scope *s, const char *err, void *ud)
{
    (void)ud;
    kept = s;
    pagi_scope_finish(s, err);
}

static void ignore_event(pagi_scope *s, const pagi_event *ev, void *ud)
{
    (void)s, (void)ev, (void)ud;
}

/* 200 with body; done (may be NULL) is the body's send callback. */
static int respond(pagi_scope *s, const char *text, size_t len, pagi_send_cb done)
{
    pagi_header h[] = {{{"content-type", 12}, {"text/plain", 10}}};
    pagi_event start = pagi_event_init(PAGI_EV_HTTP_RESPONSE_START);
    start.status = 200;
    start.headers = h;
    start.header_count = 1;
    pagi_event body = pagi_event_init(PAGI_EV_HTTP_RESPONSE_BODY);
    body.body.ptr = text;
    body.body.len = len;
    return pagi_send(s, &start, NULL, NULL) == 0 && pagi_send(s, &body, done, NULL) == 0 ? 0 : -1;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static void handle(pagi_scope *s, void *instance)
{
    (void)instance;
    if (pagi_scope_type_of(s) != PAGI_SCOPE_HTTP) {
        pagi_scope_finish(s, "debugapp serves http only");
        return;
    }
    pagi_str p = pagi_scope_path(s);
    char path[128];
    snprintf(path, sizeof path, "%.*s", (int)p.len, p.ptr);
    int rc = 0;
    if (strcmp(path, "/double") == 0) {
        rc = respond(s, "double", 6, finish_twice);
    } else if (strcmp(path, "/pending") == 0) {
        rc = respond(s, "pending", 7, NULL);
        pagi_receive(s, ignore_event, NULL);
        pagi_scope_finish(s, NULL); /* the receive is still pending */
        return;
    } else if (strcmp(path, "/early") == 0) {
        rc = respond(s, "early", 5, sent_only);
        pagi_scope_finish(s, NULL); /* before sent_only ran */
        return;
    } else if (strcmp(path, "/rejected") == 0) {
        pagi_event accept = pagi_event_init(PAGI_EV_WEBSOCKET_ACCEPT);
        pagi_send(s, &accept, NULL, NULL); /* not on an http scope */
        rc = respond(s, "rejected", 8, finish_sent);
    } else if (strcmp(path, "/stale") == 0) {
        rc = respond(s, "kept", 4, keep_and_finish);
    } else if (strcmp(path, "/stale-read") == 0) {
        /* Reads the released /stale scope's path: "" and a log line in
         * debug mode; without it, undefined behaviour (not tested). */
        pagi_str old = kept ? pagi_scope_path(kept) : (pagi_str){"", 0};
        static char answer[160];
        int n = snprintf(answer, sizeof answer, "[%.*s]", (int)old.len, old.ptr ? old.ptr : "");
        rc = respond(s, answer, (size_t)n, finish_sent);
    } else if (strcmp(path, "/leak") == 0) {
        respond(s, "leak", 4, NULL); /* and never finished */
        return;
    } else if (strcmp(path, "/block") == 0) {
        sleep_ms(300);
        rc = respond(s, "blocked", 7, finish_sent);
    } else if (strcmp(path, "/crash") == 0) {
        int *volatile nowhere = NULL;
        *nowhere = 1;
    } else {
        rc = respond(s, "ok", 2, finish_sent);
    }
    if (rc != 0)
        pagi_scope_finish(s, pagi_scope_error(s));
}

const pagi_app pagi_module = PAGI_APP_INIT("debugapp", NULL, handle, NULL);
