/*
 * hello.c - the `hello` app: 200 text/plain "Hello from PAGI" for any
 * request; the benchmark's counterpart of nginx's `return 200`.
 */
#include "builtin.h"

static const char hello_body[] = "Hello from PAGI";

static const pagi_header hello_headers[] = {
    {{"content-type", 12}, {"text/plain", 10}},
    {{"content-length", 14}, {"15", 2}},
};

static void hello_handle(pagi_scope *s, void *instance)
{
    if (pagi_scope_type_of(s) != PAGI_SCOPE_HTTP) {
        pagi_scope_finish(s, "hello: unsupported scope type");
        return;
    }
    pagi_event start = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_START);
    start.status = 200;
    start.headers = hello_headers;
    start.header_count = 2;
    pagi_event body = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_BODY);
    body.body.ptr = hello_body;
    body.body.len = sizeof hello_body - 1;
    /* Both sends are copied at once; this app has nothing to wait for. */
    if (pagi_send(s, &start, NULL, NULL) < 0 || pagi_send(s, &body, NULL, NULL) < 0) {
        pagi_scope_finish(s, pagi_scope_error(s));
        return;
    }
    pagi_scope_finish(s, NULL);
}

const pagi_app app_hello = {
    .abi_version = PAGI_ABI_VERSION,
    .name = "hello",
    .handle = hello_handle,
};
