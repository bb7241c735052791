/*
 * h2app.c - the HTTP/2 integration tests' PAGI module (test_http2.py
 * builds it). Paths:
 *
 *   /trailers           200 "hello" then trailers x-checksum: abc
 *   /upload?id=ID       reads the whole body, answers its length; logs
 *                       "ID start" and "ID disconnect REASON" if the client goes
 *   /hold?id=ID         logs "ID start", reads nothing and never answers;
 *                       logs "ID disconnect REASON" once told
 *   /slow?id=ID&ms=N    reads one body event every N ms, then answers the length
 *   /big?id=ID&kb=N     answers N KiB (after ms=M if given) in 16 KiB body
 *                       events, each sent on the previous one's completion;
 *                       logs "ID done" at the end, or "ID gone REASON" when
 *                       the stream ends first
 *   /deaf?id=ID&ms=N    logs "ID start", ignores a disconnect, finishes N ms later
 *   /scheme             200 with the scope's scheme
 *   /short              content-length: 10 then a final body of 3 bytes
 *   /padded             a response header value with a leading space
 *   /sse?id=ID          (an sse scope) logs "ID start", sends one event and
 *                       waits: a receive pending logs "ID recv TYPE REASON",
 *                       the disconnect callback "ID disconnect REASON"; it
 *                       finishes once both came
 *   anything else       200 "ok PATH HTTP_VERSION"
 */
#define _POSIX_C_SOURCE 200809L

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pagi/pagi.h>

#include "testlog.h"

static void tlog(const char *id, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tlog(const char *id, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    testlog_v(id, fmt, ap);
    va_end(ap);
}

typedef struct req {
    char id[64];
    size_t len, left;
    double ms;
    pagi_timer *timer;
} req;

static void req_release(pagi_scope *s, void *data)
{
    (void)s;
    req *r = data;
    if (r->timer)
        pagi_timer_stop(r->timer);
    free(r);
}

static void query_param(pagi_scope *s, const char *name, char *out, size_t n)
{
    pagi_str q = pagi_scope_query_string(s);
    size_t nl = strlen(name);
    out[0] = 0;
    for (size_t i = 0; i + nl < q.len; i++) {
        if ((i == 0 || q.ptr[i - 1] == '&') && !memcmp(q.ptr + i, name, nl) &&
            q.ptr[i + nl] == '=') {
            size_t j = i + nl + 1, k = 0;
            while (j < q.len && q.ptr[j] != '&' && k + 1 < n)
                out[k++] = q.ptr[j++];
            out[k] = 0;
            return;
        }
    }
}

static void respond(pagi_scope *s, const char *text)
{
    static const pagi_header h[] = {{{"content-type", 12}, {"text/plain", 10}}};
    pagi_event start = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_START);
    start.status = 200;
    start.headers = h;
    start.header_count = 1;
    pagi_event body = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_BODY);
    body.body.ptr = text;
    body.body.len = strlen(text);
    pagi_send(s, &start, NULL, NULL);
    pagi_send(s, &body, NULL, NULL);
    pagi_scope_finish(s, NULL);
}

static void on_body(pagi_scope *s, const pagi_event *ev, void *ud);

static void slow_tick(pagi_timer *t, void *ud)
{
    (void)t;
    pagi_scope *s = ud;
    req *r = pagi_scope_userdata(s);
    r->timer = NULL;
    if (pagi_receive(s, on_body, r) < 0)
        pagi_scope_finish(s, pagi_scope_error(s));
}

static void on_body(pagi_scope *s, const pagi_event *ev, void *ud)
{
    req *r = ud;
    if (ev->type == PAGI_EV_HTTP_DISCONNECT) {
        tlog(r->id, "disconnect %.*s", (int)ev->reason.len, ev->reason.ptr);
        pagi_scope_finish(s, NULL);
        return;
    }
    r->len += ev->body.len;
    if (ev->more) {
        if (r->ms > 0) {
            r->timer = pagi_timer_start(pagi_scope_loop(s), r->ms / 1000.0, 0, slow_tick, s);
            return;
        }
        if (pagi_receive(s, on_body, r) < 0)
            pagi_scope_finish(s, pagi_scope_error(s));
        return;
    }
    char text[64];
    snprintf(text, sizeof text, "%zu", r->len);
    tlog(r->id, "done %zu", r->len);
    respond(s, text);
}

static void on_hold_gone(pagi_scope *s, const char *why, void *ud)
{
    req *r = ud;
    tlog(r->id, "disconnect %s", why ? why : "");
    pagi_scope_finish(s, NULL);
}

/* An event stream that only waits for its end, heard both ways (the
 * receive's sse.disconnect and on_disconnect): each must come once. */
static void sse_maybe_finish(pagi_scope *s, req *r)
{
    if (++r->len == 2)
        pagi_scope_finish(s, NULL);
}

static void sse_on_event(pagi_scope *s, const pagi_event *ev, void *ud)
{
    req *r = ud;
    if (ev->type != PAGI_EV_SSE_DISCONNECT) {
        if (pagi_receive(s, sse_on_event, r) < 0)
            pagi_scope_finish(s, pagi_scope_error(s));
        return;
    }
    tlog(r->id, "recv sse.disconnect %.*s", (int)ev->reason.len, ev->reason.ptr);
    sse_maybe_finish(s, r);
}

static void sse_on_gone(pagi_scope *s, const char *why, void *ud)
{
    req *r = ud;
    tlog(r->id, "disconnect %s", why ? why : "");
    sse_maybe_finish(s, r);
}

static void sse_hold(pagi_scope *s, req *r)
{
    pagi_event start = PAGI_EVENT_INIT(PAGI_EV_SSE_START);
    start.status = 200;
    pagi_event ev = PAGI_EVENT_INIT(PAGI_EV_SSE_SEND);
    ev.data.ptr = "hello";
    ev.data.len = 5;
    if (pagi_send(s, &start, NULL, NULL) < 0 || pagi_send(s, &ev, NULL, NULL) < 0 ||
        pagi_conn_on_disconnect(s, sse_on_gone, r) < 0 || pagi_receive(s, sse_on_event, r) < 0)
        pagi_scope_finish(s, pagi_scope_error(s));
}

static void send_trailers(pagi_scope *s)
{
    pagi_event start = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_START);
    start.status = 200;
    start.trailers = 1;
    pagi_event body = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_BODY);
    body.body.ptr = "hello";
    body.body.len = 5;
    static const pagi_header t[] = {{{"X-Checksum", 10}, {"abc", 3}}};
    pagi_event tr = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_TRAILERS);
    tr.headers = t;
    tr.header_count = 1;
    if (pagi_send(s, &start, NULL, NULL) < 0 || pagi_send(s, &body, NULL, NULL) < 0 ||
        pagi_send(s, &tr, NULL, NULL) < 0)
        pagi_scope_finish(s, pagi_scope_error(s));
    else
        pagi_scope_finish(s, NULL);
}

static char big_chunk[16384];

static void big_next(pagi_scope *s, const char *error, void *ud)
{
    req *r = ud;
    if (!error && !r->left) {
        tlog(r->id, "done");
        pagi_scope_finish(s, NULL);
        return;
    }
    if (error || !pagi_conn_is_connected(s)) {
        const char *why = error ? error : pagi_conn_disconnect_reason(s);
        tlog(r->id, "gone %s", why ? why : "");
        pagi_scope_finish(s, NULL);
        return;
    }
    size_t n = r->left < sizeof big_chunk ? r->left : sizeof big_chunk;
    r->left -= n;
    pagi_event body = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_BODY);
    body.body.ptr = big_chunk;
    body.body.len = n;
    body.more = r->left > 0;
    if (pagi_send(s, &body, big_next, r) < 0)
        pagi_scope_finish(s, pagi_scope_error(s));
}

static void big_start(pagi_scope *s, req *r);

static void big_later(pagi_timer *t, void *ud)
{
    (void)t;
    pagi_scope *s = ud;
    req *r = pagi_scope_userdata(s);
    r->timer = NULL;
    r->ms = 0;
    big_start(s, r);
}

static void big_start(pagi_scope *s, req *r)
{
    if (r->ms > 0) {
        r->timer = pagi_timer_start(pagi_scope_loop(s), r->ms / 1000.0, 0, big_later, s);
        return;
    }
    char kb[16];
    query_param(s, "kb", kb, sizeof kb);
    r->left = (size_t)atol(kb) * 1024;
    memset(big_chunk, 'b', sizeof big_chunk);
    pagi_event start = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_START);
    start.status = 200;
    if (pagi_send(s, &start, big_next, r) < 0)
        pagi_scope_finish(s, pagi_scope_error(s));
}

static void deaf_done(pagi_timer *t, void *ud)
{
    (void)t;
    pagi_scope *s = ud;
    req *r = pagi_scope_userdata(s);
    r->timer = NULL;
    tlog(r->id, "finish");
    pagi_scope_finish(s, NULL);
}

static int path_is(pagi_scope *s, const char *p)
{
    pagi_str path = pagi_scope_path(s);
    return path.len == strlen(p) && !memcmp(path.ptr, p, path.len);
}

static void handle(pagi_scope *s, void *app_data)
{
    (void)app_data;
    if (pagi_scope_type_of(s) == PAGI_SCOPE_SSE && path_is(s, "/sse")) {
        req *r = calloc(1, sizeof *r);
        if (!r) {
            pagi_scope_finish(s, "h2app: out of memory");
            return;
        }
        pagi_scope_set_userdata(s, r, req_release);
        query_param(s, "id", r->id, sizeof r->id);
        tlog(r->id, "start");
        sse_hold(s, r);
        return;
    }
    if (pagi_scope_type_of(s) != PAGI_SCOPE_HTTP) {
        pagi_scope_finish(s, "h2app: http and /sse only");
        return;
    }
    if (path_is(s, "/short") || path_is(s, "/padded")) {
        int shrt = path_is(s, "/short");
        static const pagi_header cl[] = {{{"content-length", 14}, {"10", 2}}};
        static const pagi_header pad[] = {{{"x-pad", 5}, {" v", 2}}};
        pagi_event start = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_START);
        start.status = 200;
        start.headers = shrt ? cl : pad;
        start.header_count = 1;
        pagi_event body = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_BODY);
        body.body.ptr = "abc";
        body.body.len = 3;
        if (pagi_send(s, &start, NULL, NULL) < 0 || pagi_send(s, &body, NULL, NULL) < 0) {
            pagi_scope_finish(s, pagi_scope_error(s));
            return;
        }
        pagi_scope_finish(s, NULL);
        return;
    }
    if (path_is(s, "/names")) {
        /* Field names as apps write them: common and not, lower and mixed case. */
        static const pagi_header h[] = {
            {{"Content-Type", 12}, {"text/plain", 10}},
            {{"etag", 4}, {"\"v1\"", 4}},
            {{"X-Custom-Name", 13}, {"a", 1}},
            {{"cache-control", 13}, {"no-store", 8}},
            {{"Last-Modified", 13}, {"Mon, 01 Jan 2024 00:00:00 GMT", 29}},
            {{"vary", 4}, {"accept", 6}}};
        pagi_event start = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_START);
        start.status = 200;
        start.headers = h;
        start.header_count = sizeof h / sizeof h[0];
        pagi_event body = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_BODY);
        body.body = (pagi_str){"names", 5};
        if (pagi_send(s, &start, NULL, NULL) < 0 || pagi_send(s, &body, NULL, NULL) < 0) {
            pagi_scope_finish(s, pagi_scope_error(s));
            return;
        }
        pagi_scope_finish(s, NULL);
        return;
    }
    if (path_is(s, "/scheme")) {
        respond(s, pagi_scope_scheme(s));
        return;
    }
    if (path_is(s, "/trailers")) {
        send_trailers(s);
        return;
    }
    int upload = path_is(s, "/upload"), hold = path_is(s, "/hold"), slow = path_is(s, "/slow");
    int big = path_is(s, "/big"), deaf = path_is(s, "/deaf");
    if (!upload && !hold && !slow && !big && !deaf) {
        char text[300];
        pagi_str p = pagi_scope_path(s);
        snprintf(text, sizeof text, "ok %.*s %s", (int)(p.len > 200 ? 200 : p.len), p.ptr,
                 pagi_scope_http_version(s));
        respond(s, text);
        return;
    }
    req *r = calloc(1, sizeof *r);
    if (!r) {
        pagi_scope_finish(s, "h2app: out of memory");
        return;
    }
    pagi_scope_set_userdata(s, r, req_release);
    query_param(s, "id", r->id, sizeof r->id);
    char ms[16];
    query_param(s, "ms", ms, sizeof ms);
    r->ms = atof(ms);
    tlog(r->id, "start");
    if (big) {
        big_start(s, r);
        return;
    }
    if (deaf) {
        r->timer = pagi_timer_start(pagi_scope_loop(s), r->ms / 1000.0, 0, deaf_done, s);
        return;
    }
    if (hold) {
        /* Nothing read: the body stays with the server, whose flow control
         * holds the client back; the disconnect comes by the callback. */
        pagi_conn_on_disconnect(s, on_hold_gone, r);
        return;
    }
    if (pagi_receive(s, on_body, r) < 0)
        pagi_scope_finish(s, pagi_scope_error(s));
}

const pagi_app pagi_module = PAGI_APP_INIT("h2app", NULL, handle, NULL);
