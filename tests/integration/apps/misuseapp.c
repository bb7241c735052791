/*
 * misuseapp.c - a module that makes, in a release build, the mistakes a new
 * C developer made with pagi.h and pagi_easy.h (issue 26), one route each,
 * for test_misuse.py: each call must be refused (-1, logged) and none may
 * make pagid touch freed memory. Answers say what the calls returned.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pagi/pagi.h"
#include "pagi/pagi_easy.h"

/* Built against an ABI 2.3 header too, to see each case fail before 2.4. */
#ifndef PAGI_STR
#define PAGI_STR(lit) ((pagi_str){"" lit, sizeof(lit) - 1})
#define PAGI_STR_INIT(lit)                                                                         \
    {                                                                                              \
        "" lit, sizeof(lit) - 1                                                                    \
    }
#endif
#if PAGI_ABI_MINOR < 4
#define pagi_group_join_headers(g, s, h, n, cb, ud) ((void)(h), pagi_group_join(g, s, cb, ud))
#endif

typedef struct app {
    pagi_group *g;
    pagi_subscription *kept_sub; /* a subscription kept past its scope's release */
    pagi_scope *kept_scope;      /* a scope handle kept past its release */
    int join2_rc;                /* what the second pagi_group_join returned */
    int respond_rc;              /* pagi_respond_text on an sse member */
    int release_unsub;           /* pagi_unsubscribe ran in a release callback */
    pagi_loop *loop;
} app;

/* A NULL the compiler cannot see: the declarations carry nonnull, which
 * would make a literal NULL a compile-time error under -Werror. */
static const char *volatile null_text;

static void *create(const char *arg, pagi_loop *loop, const char **err)
{
    (void)arg;
    app *a = calloc(1, sizeof *a);
    if (a == NULL || (a->g = pagi_group_new(PAGI_GROUP_DROP)) == NULL) {
        free(a);
        *err = "out of memory";
        return NULL;
    }
    a->join2_rc = a->respond_rc = 99;
    a->loop = loop;
    return a;
}

static void destroy(void *instance)
{
    app *a = instance;
    pagi_group_free(a->g);
    free(a);
}

static void reply(pagi_scope *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void reply(pagi_scope *s, const char *fmt, ...)
{
    char body[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    if (pagi_respond_text(s, 200, body) != 0)
        pagi_scope_finish(s, "reply refused");
}

static void on_message(pagi_subscription *sub, pagi_str ch, const void *d, size_t n, void *ud)
{
    (void)sub, (void)ch, (void)d, (void)n, (void)ud;
}

/* The natural place to let go of a subscription: the scope's release. */
static void release_unsubscribes(pagi_scope *s, void *data)
{
    (void)s;
    app *a = data;
    pagi_unsubscribe(a->kept_sub);
    a->release_unsub++;
}

static void body_read(pagi_scope *s, const char *body, size_t len, const char *err, void *ud)
{
    int *early = ud;
    (void)body;
    if (err == NULL)
        reply(s, "respond-while-reading=%d read=%zu", *early, len);
    free(early);
}

static void finish_ok(pagi_scope *s, const char *err, void *ud)
{
    (void)ud;
    pagi_scope_finish(s, err);
}

static void handle_http(app *a, pagi_scope *s, const char *path)
{
    if (strcmp(path, "/state") == 0) {
        reply(s, "join2=%d respond=%d release_unsub=%d members=%zu", a->join2_rc, a->respond_rc,
              a->release_unsub, pagi_group_size(a->g));
    } else if (strcmp(path, "/broadcast") == 0) {
        int n = pagi_group_send_event(a->g, "news", "hello", 5);
        reply(s, "sent=%d", n);
    } else if (strcmp(path, "/group-free") == 0) {
        pagi_group_free(a->g);
        a->g = pagi_group_new(PAGI_GROUP_DROP);
        reply(s, "freed");
    } else if (strcmp(path, "/sub-release") == 0) {
        /* Subscribe, unsubscribe from the release callback. */
        a->kept_sub = pagi_subscribe(s, "misuse", on_message, a);
        pagi_scope_set_userdata(s, a, release_unsubscribes);
        reply(s, "subscribed=%d", a->kept_sub != NULL);
    } else if (strcmp(path, "/sub-stale") == 0) {
        /* The subscription of an earlier, released scope. */
        pagi_unsubscribe(a->kept_sub);
        int rc = pagi_subscription_set_policy(a->kept_sub, PAGI_SUB_CONFLATE, 1);
        reply(s, "set_policy=%d", rc);
    } else if (strcmp(path, "/buf-twice") == 0) {
        pagi_buf *b = pagi_buf_wrap("bytes", 5, NULL, NULL);
        pagi_buf_unref(b);
        pagi_buf_unref(b);
        pagi_event ev = pagi_event_init(PAGI_EV_HTTP_RESPONSE_BODY);
        reply(s, "send_buf=%d", pagi_send_buf(s, &ev, b, NULL, NULL));
    } else if (strcmp(path, "/respond-null") == 0) {
        int rc = pagi_respond_text(s, 200, null_text);
        reply(s, "respond_null=%d err=%s", rc, pagi_scope_error(s));
    } else if (strcmp(path, "/keep-scope") == 0) {
        a->kept_scope = s;
        reply(s, "kept");
    } else if (strcmp(path, "/stale-scope") == 0) {
        pagi_event ev = pagi_event_init(PAGI_EV_HTTP_RESPONSE_START);
        int rc = pagi_send(a->kept_scope, &ev, NULL, NULL);
        int rr = pagi_respond_text(a->kept_scope, 200, "late");
        reply(s, "send=%d respond=%d method=[%s]", rc, rr, pagi_scope_method(a->kept_scope));
    } else if (strcmp(path, "/read-then-respond") == 0) {
        int *early = malloc(sizeof *early);
        if (early == NULL || pagi_read_body(s, 1024, body_read, early) != 0) {
            free(early);
            return;
        }
        *early = pagi_respond_text(s, 200, "too early");
    } else if (strcmp(path, "/unfinished") == 0) {
        /* Answered, never finished, and nothing pending that would say so. */
        pagi_event start = pagi_event_init(PAGI_EV_HTTP_RESPONSE_START);
        start.status = 200;
        pagi_event body = pagi_event_init(PAGI_EV_HTTP_RESPONSE_BODY);
        body.body = PAGI_STR("unfinished");
        if (pagi_send(s, &start, NULL, NULL) != 0 || pagi_send(s, &body, NULL, NULL) != 0)
            pagi_scope_finish(s, "refused");
    } else if (strcmp(path, "/upper") == 0) {
        pagi_header h[] = {{PAGI_STR_INIT("X-Upper"), PAGI_STR_INIT("Value")}};
        if (pagi_respond_headers(s, 200, "text/plain", h, 1, "upper", 5) != 0)
            pagi_scope_finish(s, "refused");
    } else {
        pagi_event start = pagi_event_init(PAGI_EV_HTTP_RESPONSE_START);
        start.status = 200;
        pagi_event body = pagi_event_init(PAGI_EV_HTTP_RESPONSE_BODY);
        body.body = PAGI_STR("ok");
        if (pagi_send(s, &start, NULL, NULL) != 0 || pagi_send(s, &body, finish_ok, NULL) != 0)
            pagi_scope_finish(s, "refused");
    }
}

static void handle(pagi_scope *s, void *instance)
{
    app *a = instance;
    pagi_str p = pagi_scope_path(s);
    char path[128];
    snprintf(path, sizeof path, "%.*s", (int)p.len, p.ptr);
    switch (pagi_scope_type_of(s)) {
    case PAGI_SCOPE_WEBSOCKET:
        /* Joined twice: the second must be refused, the first stay. */
        if (pagi_group_join(a->g, s, NULL, NULL) == 0)
            a->join2_rc = pagi_group_join(a->g, s, NULL, NULL);
        return;
    case PAGI_SCOPE_SSE: {
        pagi_header cors[] = {{PAGI_STR_INIT("access-control-allow-origin"), PAGI_STR_INIT("*")}};
        /* A member, then answered as if it were a plain request. */
        if (pagi_group_join_headers(a->g, s, cors, 1, NULL, NULL) == 0 &&
            strcmp(path, "/sse-respond") == 0)
            a->respond_rc = pagi_respond_text(s, 200, "not for a member");
        return;
    }
    case PAGI_SCOPE_HTTP:
        handle_http(a, s, path);
        return;
    case PAGI_SCOPE_LIFESPAN:
        if (pagi_lifespan_run(s, NULL, NULL, NULL, NULL) != 0)
            return;
        return;
    }
}

const pagi_app pagi_module = PAGI_APP_INIT("misuseapp", create, handle, destroy);
