/*
 * echo.c - the `echo` app: answers 200 with the request body (read as a
 * stream of http.request events), content-length set, and headers
 * x-echo-method, x-echo-path (raw path) and x-echo-query.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin.h"

typedef struct echo_req {
    char *body;
    size_t len, cap;
} echo_req;

static void echo_release(pagi_scope *s, void *data)
{
    echo_req *r = data;
    free(r->body);
    free(r);
}

static int echo_append(echo_req *r, pagi_str chunk)
{
    if (chunk.len == 0)
        return 0;
    if (r->cap - r->len < chunk.len) {
        size_t ncap = r->cap ? r->cap : 4096;
        while (ncap - r->len < chunk.len)
            ncap *= 2;
        char *n = realloc(r->body, ncap);
        if (!n)
            return -1;
        r->body = n;
        r->cap = ncap;
    }
    memcpy(r->body + r->len, chunk.ptr, chunk.len);
    r->len += chunk.len;
    return 0;
}

static void echo_respond(pagi_scope *s, echo_req *r)
{
    char clen[24];
    int clen_n = snprintf(clen, sizeof clen, "%zu", r->len);
    pagi_str raw = pagi_scope_raw_path(s), query = pagi_scope_query_string(s);
    const char *method = pagi_scope_method(s);
    pagi_header headers[] = {
        {{"content-type", 12}, {"application/octet-stream", 24}},
        {{"content-length", 14}, {clen, (size_t)clen_n}},
        {{"x-echo-method", 13}, {method, strlen(method)}},
        {{"x-echo-path", 11}, raw},
        {{"x-echo-query", 12}, query},
    };
    pagi_str ct;
    if (pagi_scope_header(s, "content-type", &ct))
        headers[0].value = ct;
    pagi_event start = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_START);
    start.status = 200;
    start.headers = headers;
    start.header_count = sizeof headers / sizeof headers[0];
    pagi_event body = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_BODY);
    body.body.ptr = r->body ? r->body : "";
    body.body.len = r->len;
    if (pagi_send(s, &start, NULL, NULL) < 0 || pagi_send(s, &body, NULL, NULL) < 0) {
        pagi_scope_finish(s, pagi_scope_error(s));
        return;
    }
    pagi_scope_finish(s, NULL);
}

static void echo_on_event(pagi_scope *s, const pagi_event *ev, void *ud)
{
    echo_req *r = ud;
    if (ev->type == PAGI_EV_HTTP_DISCONNECT) {
        pagi_scope_finish(s, NULL);
        return;
    }
    if (echo_append(r, ev->body) < 0) {
        pagi_scope_finish(s, "echo: out of memory");
        return;
    }
    if (ev->more) {
        if (pagi_receive(s, echo_on_event, r) < 0)
            pagi_scope_finish(s, pagi_scope_error(s));
        return;
    }
    echo_respond(s, r);
}

static void echo_handle(pagi_scope *s, void *instance)
{
    if (pagi_scope_type_of(s) != PAGI_SCOPE_HTTP) {
        pagi_scope_finish(s, "echo: unsupported scope type");
        return;
    }
    echo_req *r = calloc(1, sizeof *r);
    if (!r) {
        pagi_scope_finish(s, "echo: out of memory");
        return;
    }
    pagi_scope_set_userdata(s, r, echo_release);
    if (pagi_receive(s, echo_on_event, r) < 0)
        pagi_scope_finish(s, pagi_scope_error(s));
}

const pagi_app app_echo = {
    .abi_version = PAGI_ABI_VERSION,
    .name = "echo",
    .handle = echo_handle,
};
