/*
 * lifecycle.c - the integration tests' PAGI module. It records what the
 * server makes it observe, one line per event, in the file named by
 * $PAGID_TEST_LOG: "<reqid> <event> [detail]" (reqid = x-test-id header).
 *
 * Build: cc -std=c11 -Wall -Wextra -Werror -shared -fPIC -I include \
 *        -o lifecycle.so tests/integration/apps/lifecycle.c
 *
 * Routes (by decoded path):
 *   /hello                     200 "ok"
 *   /stream?n=N&size=S[&ignore_disconnect=1]
 *                              chunked; N sends of S bytes, each issued from
 *                              the previous send's completion; logs send_done i,
 *                              high_water, drain; stops at disconnect unless
 *                              ignore_disconnect=1 (then keeps sending no-ops)
 *   /never                     never responds; receives until http.disconnect
 *   /error-before              finish(s, "boom") before any start -> 500
 *   /finish-before             finish(s, NULL) before any start -> 500
 *   /error-after               200 start, "partial" more=1, then finish "boom"
 *   /body                      reads the body, answers "got <total>"
 *   /bad-header                a start with "a\r\nb" in a value must be rejected
 *   /long-poll                 like /never until the worker drains: logs
 *                              server_drain, 0.3 s later cancels its pending
 *                              receive (logs receive_cancel RC, twice) and
 *                              answers 200 "drained"
 * Every http scope logs handle, on_complete / on_disconnect <reason>, release.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pagi/pagi.h>

#include "testlog.h"

typedef struct req {
    char id[64];
    pagi_scope *s;
    long n, size, i;      /* /stream */
    int ignore_disconnect;
    char *chunk;
    size_t total;         /* /body */
    int finished;
    pagi_timer *timer;    /* /long-poll */
} req;

static unsigned long req_counter;

static void tlog(const req *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void tlog(const req *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    testlog_v(r->id, fmt, ap);
    va_end(ap);
}

static int str_eq(pagi_str s, const char *lit)
{
    size_t n = strlen(lit);
    return s.len == n && memcmp(s.ptr, lit, n) == 0;
}

/* Value of a numeric query parameter, or dflt. */
static long query_long(pagi_str q, const char *name, long dflt)
{
    size_t nlen = strlen(name);
    size_t i = 0;
    while (i < q.len) {
        size_t end = i;
        while (end < q.len && q.ptr[end] != '&')
            end++;
        if (end - i > nlen && memcmp(q.ptr + i, name, nlen) == 0 && q.ptr[i + nlen] == '=') {
            char buf[32];
            size_t vlen = end - i - nlen - 1;
            if (vlen >= sizeof buf)
                vlen = sizeof buf - 1;
            memcpy(buf, q.ptr + i + nlen + 1, vlen);
            buf[vlen] = '\0';
            return strtol(buf, NULL, 10);
        }
        i = end + 1;
    }
    return dflt;
}

static void finish(req *r, const char *error)
{
    if (r->finished)
        return;
    r->finished = 1;
    tlog(r, "finish %s", error ? error : "ok");
    pagi_scope_finish(r->s, error);
}

/* ---- connection / transport observers -------------------------------- */

static void on_release(pagi_scope *s, void *data)
{
    (void)s;
    req *r = data;
    tlog(r, "release");
    if (r->timer)
        pagi_timer_stop(r->timer);
    free(r->chunk);
    free(r);
}

static void on_disconnect(pagi_scope *s, const char *reason, void *ud)
{
    (void)s;
    tlog(ud, "on_disconnect %s", reason ? reason : "(null)");
}

static void on_complete(pagi_scope *s, void *ud)
{
    (void)s;
    tlog(ud, "on_complete");
}

static void on_high_water(pagi_scope *s, void *ud)
{
    tlog(ud, "high_water %zu", pagi_transport_buffered_amount(s));
}

static void on_drain(pagi_scope *s, void *ud)
{
    tlog(ud, "drain %zu", pagi_transport_buffered_amount(s));
}

/* ---- helpers ------------------------------------------------------------ */

static int send_start(req *r, int status, const char *ctype, const char *clen,
                      pagi_send_cb cb)
{
    pagi_header h[2];
    size_t nh = 0;
    h[nh].name = (pagi_str){"content-type", 12};
    h[nh].value = (pagi_str){ctype, strlen(ctype)};
    nh++;
    if (clen != NULL) {
        h[nh].name = (pagi_str){"content-length", 14};
        h[nh].value = (pagi_str){clen, strlen(clen)};
        nh++;
    }
    pagi_event ev = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_START);
    ev.status = status;
    ev.headers = h;
    ev.header_count = nh;
    int rc = pagi_send(r->s, &ev, cb, r);
    if (rc != 0)
        tlog(r, "send_failed start %s", pagi_scope_error(r->s));
    return rc;
}

static int send_body(req *r, const char *data, size_t len, int more, pagi_send_cb cb)
{
    pagi_event ev = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_BODY);
    ev.body = (pagi_str){data, len};
    ev.more = more;
    int rc = pagi_send(r->s, &ev, cb, r);
    if (rc != 0)
        tlog(r, "send_failed body %s", pagi_scope_error(r->s));
    return rc;
}

/* Complete response with content-length, then finish. */
static void respond(req *r, int status, const char *body)
{
    char clen[32];
    snprintf(clen, sizeof clen, "%zu", strlen(body));
    if (send_start(r, status, "text/plain", clen, NULL) == 0)
        send_body(r, body, strlen(body), 0, NULL);
    finish(r, NULL);
}

/* ---- /stream ------------------------------------------------------------ */

static void stream_next(pagi_scope *s, const char *err, void *ud);

static void stream_send(req *r)
{
    r->i++;
    if (send_body(r, r->chunk, (size_t)r->size, r->i < r->n, stream_next) != 0)
        finish(r, NULL);
}

static void stream_next(pagi_scope *s, const char *err, void *ud)
{
    req *r = ud;
    if (err != NULL) {
        tlog(r, "send_error %ld %s", r->i, err);
        finish(r, NULL);
        return;
    }
    if (r->i > 0)
        tlog(r, "send_done %ld", r->i);
    if (r->i >= r->n) {
        finish(r, NULL);
        return;
    }
    if (!r->ignore_disconnect && !pagi_conn_is_connected(s)) {
        tlog(r, "stopped %ld", r->i);
        finish(r, NULL);
        return;
    }
    stream_send(r);
}

static void route_stream(req *r)
{
    pagi_str q = pagi_scope_query_string(r->s);
    r->n = query_long(q, "n", 10);
    r->size = query_long(q, "size", 1024);
    r->ignore_disconnect = (int)query_long(q, "ignore_disconnect", 0);
    if (r->n < 1 || r->size < 1 || r->size > (64L << 20)) {
        respond(r, 400, "bad n/size");
        return;
    }
    r->chunk = malloc((size_t)r->size);
    if (r->chunk == NULL) {
        respond(r, 500, "oom");
        return;
    }
    memset(r->chunk, 'x', (size_t)r->size);
    pagi_transport_on_high_water(r->s, on_high_water, r);
    pagi_transport_on_drain(r->s, on_drain, r);
    if (send_start(r, 200, "application/octet-stream", NULL, stream_next) != 0)
        finish(r, NULL);
}

/* ---- receive loops (/never, /body) -------------------------------------- */

static void never_recv(pagi_scope *s, const pagi_event *ev, void *ud);
static void body_recv(pagi_scope *s, const pagi_event *ev, void *ud);

static int log_recv(req *r, const pagi_event *ev)
{
    if (ev->type == PAGI_EV_HTTP_REQUEST) {
        tlog(r, "recv http.request %zu more=%d", ev->body.len, ev->more);
        return 0;
    }
    if (ev->type == PAGI_EV_HTTP_DISCONNECT) {
        tlog(r, "recv http.disconnect");
        return 1;
    }
    const char *name = pagi_event_type_name(ev->type);
    tlog(r, "recv other %s", name ? name : "?");
    return 1;
}

static void never_recv(pagi_scope *s, const pagi_event *ev, void *ud)
{
    req *r = ud;
    if (log_recv(r, ev)) {
        finish(r, NULL);
        return;
    }
    if (pagi_receive(s, never_recv, r) != 0) {
        tlog(r, "receive_failed %s", pagi_scope_error(s));
        finish(r, NULL);
    }
}

/* ---- /long-poll: the drain notice on an http scope ---------------------- */

static void long_poll_answer(pagi_timer *t, void *ud)
{
    req *r = ud;
    pagi_timer_stop(t);
    r->timer = NULL;
    if (r->finished)
        return;
    tlog(r, "receive_cancel %d", pagi_receive_cancel(r->s));
    tlog(r, "receive_cancel %d", pagi_receive_cancel(r->s)); /* none pending now: -1 */
    respond(r, 200, "drained");
}

static void long_poll_drain(pagi_scope *s, void *ud)
{
    req *r = ud;
    tlog(r, "server_drain draining=%d", pagi_server_draining(s));
    if (r->finished || r->timer)
        return;
    r->timer = pagi_timer_start(pagi_scope_loop(s), 0.3, 0, long_poll_answer, r);
    if (!r->timer)
        finish(r, "no timer");
}

static void body_recv(pagi_scope *s, const pagi_event *ev, void *ud)
{
    req *r = ud;
    if (log_recv(r, ev)) {
        finish(r, NULL);
        return;
    }
    r->total += ev->body.len;
    if (!ev->more) {
        char msg[64];
        snprintf(msg, sizeof msg, "got %zu", r->total);
        respond(r, 200, msg);
        return;
    }
    if (pagi_receive(s, body_recv, r) != 0) {
        tlog(r, "receive_failed %s", pagi_scope_error(s));
        finish(r, NULL);
    }
}

/* ---- /error-after ------------------------------------------------------- */

static void error_after_sent(pagi_scope *s, const char *err, void *ud)
{
    (void)s;
    req *r = ud;
    if (err != NULL)
        tlog(r, "send_error %s", err);
    finish(r, "boom");
}

static void route_error_after(req *r)
{
    if (send_start(r, 200, "text/plain", NULL, NULL) != 0 ||
        send_body(r, "partial", 7, 1, error_after_sent) != 0)
        finish(r, "boom");
}

/* ---- /bad-header -------------------------------------------------------- */

/* A response start with CR LF in a header value, which pagi_send must refuse. */
static void send_bad_start(req *r)
{
    pagi_header h[1] = {{{"x-bad", 5}, {"a\r\nb", 4}}};
    pagi_event ev = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_START);
    ev.status = 200;
    ev.headers = h;
    ev.header_count = 1;
    if (pagi_send(r->s, &ev, NULL, r) == -1)
        tlog(r, "send_rejected %s", pagi_scope_error(r->s));
    else
        tlog(r, "send_accepted_bad_header");
}

static void route_bad_header(req *r)
{
    send_bad_start(r);
    respond(r, 200, "ok");
}

/* A refused start, then a finish with no error: the server's 500 backstop. */
static void route_refused_then_finish(req *r)
{
    send_bad_start(r);
    finish(r, NULL);
}

/* ---- lifespan ----------------------------------------------------------- */

static void lifespan_recv(pagi_scope *s, const pagi_event *ev, void *ud)
{
    req *r = ud;
    if (ev->type == PAGI_EV_LIFESPAN_STARTUP) {
        tlog(r, "lifespan startup");
        pagi_event out = PAGI_EVENT_INIT(PAGI_EV_LIFESPAN_STARTUP_COMPLETE);
        if (pagi_send(s, &out, NULL, r) != 0)
            tlog(r, "send_failed startup.complete %s", pagi_scope_error(s));
        if (pagi_receive(s, lifespan_recv, r) != 0)
            finish(r, NULL);
        return;
    }
    if (ev->type == PAGI_EV_LIFESPAN_SHUTDOWN) {
        tlog(r, "lifespan shutdown");
        pagi_event out = PAGI_EVENT_INIT(PAGI_EV_LIFESPAN_SHUTDOWN_COMPLETE);
        if (pagi_send(s, &out, NULL, r) != 0)
            tlog(r, "send_failed shutdown.complete %s", pagi_scope_error(s));
        finish(r, NULL);
        return;
    }
    const char *name = pagi_event_type_name(ev->type);
    tlog(r, "lifespan other %s", name ? name : "?");
    finish(r, NULL);
}

/* ---- module ------------------------------------------------------------- */

static void *create(const char *arg, pagi_loop *loop, const char **err)
{
    (void)arg;
    (void)loop;
    (void)err;
    return NULL;
}

static void destroy(void *instance)
{
    (void)instance;
}

static void handle(pagi_scope *s, void *instance)
{
    (void)instance;
    req *r = calloc(1, sizeof *r);
    if (r == NULL) {
        pagi_scope_finish(s, "out of memory");
        return;
    }
    r->s = s;
    pagi_str id;
    if (pagi_scope_header(s, "x-test-id", &id) && id.len > 0 && id.len < sizeof r->id) {
        memcpy(r->id, id.ptr, id.len);
        for (size_t j = 0; j < id.len; j++)
            if (r->id[j] == ' ')
                r->id[j] = '_';
    } else if (pagi_scope_type_of(s) == PAGI_SCOPE_LIFESPAN) {
        snprintf(r->id, sizeof r->id, "lifespan");
    } else {
        snprintf(r->id, sizeof r->id, "r%lu", ++req_counter);
    }
    pagi_scope_set_userdata(s, r, on_release);

    if (pagi_scope_type_of(s) == PAGI_SCOPE_LIFESPAN) {
        if (pagi_receive(s, lifespan_recv, r) != 0)
            finish(r, NULL);
        return;
    }
    if (pagi_scope_type_of(s) != PAGI_SCOPE_HTTP) {
        tlog(r, "unsupported %s", pagi_scope_type_name(s));
        finish(r, "unsupported scope type");
        return;
    }

    pagi_str path = pagi_scope_path(s);
    tlog(r, "handle %s %.*s", pagi_scope_method(s), (int)path.len, path.ptr);
    pagi_conn_on_disconnect(s, on_disconnect, r);
    pagi_conn_on_complete(s, on_complete, r);

    if (str_eq(path, "/hello")) {
        respond(r, 200, "ok");
    } else if (str_eq(path, "/stream")) {
        route_stream(r);
    } else if (str_eq(path, "/never")) {
        if (pagi_receive(s, never_recv, r) != 0)
            finish(r, NULL);
    } else if (str_eq(path, "/long-poll")) {
        tlog(r, "draining=%d", pagi_server_draining(s));
        if (pagi_scope_on_server_drain(s, long_poll_drain, r) != 0 ||
            pagi_receive(s, never_recv, r) != 0)
            finish(r, NULL);
    } else if (str_eq(path, "/body")) {
        if (pagi_receive(s, body_recv, r) != 0)
            finish(r, NULL);
    } else if (str_eq(path, "/error-before")) {
        finish(r, "boom");
    } else if (str_eq(path, "/finish-before")) {
        finish(r, NULL);
    } else if (str_eq(path, "/error-after")) {
        route_error_after(r);
    } else if (str_eq(path, "/bad-header")) {
        route_bad_header(r);
    } else if (str_eq(path, "/refused-then-finish")) {
        route_refused_then_finish(r);
    } else {
        respond(r, 404, "not found");
    }
}

const pagi_app pagi_module = PAGI_APP_INIT("lifecycle", create, handle, destroy);
