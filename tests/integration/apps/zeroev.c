/*
 * zeroev.c - events made by zero-initialising (ABI 2): `= {0}`, memset and
 * designated initializers with only the used fields set must mean exactly
 * those fields. Routes: /body (a memory body, not stdin), /sse (no retry:
 * line unless has_retry), /stdin (use_fd = 1, fd = 0: stdin, which create
 * points at the file named by the argument), /file?OFFSET (length 0 = EOF).
 */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pagi/pagi.h"

#define S(lit) ((pagi_str){(lit), sizeof(lit) - 1})

static void *create(const char *arg, pagi_loop *loop, const char **err)
{
    (void)loop;
    if (!arg) {
        *err = "zeroev needs a file path argument";
        return NULL;
    }
    int fd = open(arg, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || dup2(fd, 0) < 0) {
        *err = "zeroev: cannot open its file on stdin";
        return NULL;
    }
    close(fd);
    return strdup(arg);
}

static void destroy(void *instance)
{
    free(instance);
}

static void sent(pagi_scope *s, const char *err, void *ud)
{
    (void)ud;
    pagi_scope_finish(s, err);
}

static int start(pagi_scope *s, pagi_event_type type)
{
    pagi_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = type;
    ev.status = 200;
    return pagi_send(s, &ev, NULL, NULL);
}

static void handle_sse(pagi_scope *s)
{
    pagi_event plain = {0};
    plain.type = PAGI_EV_SSE_SEND;
    plain.data = S("no retry");
    pagi_event zero = {.type = PAGI_EV_SSE_SEND, .data = S("retry zero"), .has_retry = 1};
    pagi_event close_ev = {.type = PAGI_EV_SSE_CLOSE};
    if (start(s, PAGI_EV_SSE_START) != 0 || pagi_send(s, &plain, NULL, NULL) != 0 ||
        pagi_send(s, &zero, NULL, NULL) != 0 || pagi_send(s, &close_ev, sent, NULL) != 0)
        pagi_scope_finish(s, pagi_scope_error(s));
}

static void handle(pagi_scope *s, void *instance)
{
    const char *file = instance;
    if (pagi_scope_type_of(s) == PAGI_SCOPE_SSE) {
        handle_sse(s);
        return;
    }
    if (pagi_scope_type_of(s) != PAGI_SCOPE_HTTP) {
        pagi_scope_finish(s, "zeroev serves http and sse only");
        return;
    }
    pagi_str path = pagi_scope_path(s), q = pagi_scope_query_string(s);
    pagi_event body = {0};
    body.type = PAGI_EV_HTTP_RESPONSE_BODY;
    if (path.len == 5 && memcmp(path.ptr, "/body", 5) == 0) {
        body.body = S("exactly this body");
    } else if (path.len == 6 && memcmp(path.ptr, "/stdin", 6) == 0) {
        body = (pagi_event){.type = PAGI_EV_HTTP_RESPONSE_BODY, .use_fd = 1, .fd = 0};
    } else if (path.len == 5 && memcmp(path.ptr, "/file", 5) == 0) {
        body.file = file;
        for (size_t i = 0; i < q.len && q.ptr[i] >= '0' && q.ptr[i] <= '9'; i++)
            body.offset = body.offset * 10 + (q.ptr[i] - '0');
    } else {
        body.body = S("routes: /body /stdin /file?OFFSET (sse: any path)");
    }
    if (start(s, PAGI_EV_HTTP_RESPONSE_START) != 0 || pagi_send(s, &body, sent, NULL) != 0)
        pagi_scope_finish(s, pagi_scope_error(s));
}

const pagi_app pagi_module = PAGI_APP_INIT("zeroev", create, handle, destroy);
