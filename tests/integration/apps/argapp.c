/*
 * argapp.c - a module that answers every request with the argument its
 * create was given (PATH.so:ARG on the command line, {module, arg} in YAML),
 * or "(none)": the create argument reaching a .so app, as pagi(3) says.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "pagi/pagi.h"

static void *create(const char *arg, pagi_loop *loop, const char **err)
{
    (void)loop;
    char *copy = strdup(arg ? arg : "(none)");
    if (!copy)
        *err = "out of memory";
    return copy;
}

static void destroy(void *instance) { free(instance); }

static void sent(pagi_scope *s, const char *err, void *ud)
{
    (void)ud;
    pagi_scope_finish(s, err);
}

static void handle(pagi_scope *s, void *instance)
{
    const char *arg = instance;
    if (pagi_scope_type_of(s) != PAGI_SCOPE_HTTP) {
        pagi_scope_finish(s, "argapp serves http only");
        return;
    }
    pagi_header h[] = {{{"content-type", 12}, {"text/plain", 10}}};
    pagi_event start = pagi_event_init(PAGI_EV_HTTP_RESPONSE_START);
    start.status = 200;
    start.headers = h;
    start.header_count = 1;
    pagi_event body = pagi_event_init(PAGI_EV_HTTP_RESPONSE_BODY);
    body.body.ptr = arg;
    body.body.len = strlen(arg);
    if (pagi_send(s, &start, NULL, NULL) != 0 || pagi_send(s, &body, sent, NULL) != 0)
        pagi_scope_finish(s, pagi_scope_error(s));
}

const pagi_app pagi_module = PAGI_APP_INIT("argapp", create, handle, destroy);
