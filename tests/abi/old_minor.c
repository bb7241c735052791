/*
 * old_minor.c - a module built against the frozen ABI 2.0 header
 * (tests/abi/pagi-2.0.h, installed as pagi/pagi.h by the test): the current
 * server, of a later minor, must load it and serve it. Events are made the
 * 2.0 way, zero-initialised with only the used fields set.
 */
#include <pagi/pagi.h>

#if PAGI_ABI_VERSION != PAGI_ABI(2, 0)
#error "old_minor.c must be built against tests/abi/pagi-2.0.h"
#endif

static void finish_cb(pagi_scope *s, const char *err, void *ud)
{
    (void)ud;
    pagi_scope_finish(s, err);
}

static void handle(pagi_scope *s, void *instance)
{
    (void)instance;
    if (pagi_scope_type_of(s) != PAGI_SCOPE_HTTP) {
        pagi_scope_finish(s, "old_minor serves http only");
        return;
    }
    static const pagi_header h[] = {{{"content-type", 12}, {"text/plain", 10}}};
    pagi_event start = {0};
    start.type = PAGI_EV_HTTP_RESPONSE_START;
    start.status = 200;
    start.headers = h;
    start.header_count = 1;
    pagi_event body = {.type = PAGI_EV_HTTP_RESPONSE_BODY, .body = {"built against 2.0\n", 18}};
    if (pagi_send(s, &start, NULL, NULL) != 0 || pagi_send(s, &body, finish_cb, NULL) != 0)
        pagi_scope_finish(s, pagi_scope_error(s));
}

const pagi_app pagi_module = PAGI_APP_INIT("old_minor", NULL, handle, NULL);
