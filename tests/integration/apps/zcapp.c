/*
 * zcapp.c - the zero-copy tests' and bench's module: bodies and WebSocket
 * messages sent copied (pagi_send) or handed over (pagi_send_buf), logging
 * every free of a handed-over buffer in $PAGID_TEST_LOG ("<id> freed LEN").
 *
 * Routes (parameters in the query; id= names the log lines):
 *   /body?size=N&mode=M[&framing=chunked]  N bytes of pattern (see below) as one
 *       body; M: copy (pagi_send of the worker's blob), buf (pagi_send_buf of the
 *       worker's blob, shared by every request), own (a fresh buffer per request,
 *       handed over and freed by its free_fn). Content-Length unless chunked.
 *   /reject   pagi_send_buf refused (before http.response.start; a start event):
 *       the buffer stays the app's; logs "rejected freed=F" then unrefs it.
 *   /ws?size=N  accept, send N bytes of pattern as a binary message and "hello,
 *       world" as a text message, both handed over; receive until the disconnect.
 *   /sse (an SSE scope)  sse.start, sse.send of a handed-over two-line buffer
 *       (the server formats it: copied), sse.close.
 *   /sse-decline (an SSE scope)  503 with a body of N pattern bytes handed over.
 * The pattern: 4096-byte blocks, block k = "%08x" of k, then k & 0xff repeated.
 * The create argument is the blob's size (default 8 MiB).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pagi/pagi.h>

#include "testlog.h"

typedef struct zc_app {
    char *blob; /* the worker's response body, built once */
    size_t blob_len;
    pagi_buf *blob_buf; /* the blob lent to pagi_send_buf (mode=buf) */
} zc_app;

typedef struct zc_req {
    char id[64];
} zc_req;

static void tlog(const char *id, const char *fmt, ...) PAGI_PRINTF_LIKE(2, 3);

static void tlog(const char *id, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    testlog_v(id, fmt, ap);
    va_end(ap);
}

static void fill_pattern(char *p, size_t n)
{
    for (size_t off = 0; off < n; off += 4096) {
        size_t k = off / 4096, len = n - off < 4096 ? n - off : 4096;
        char head[16];
        snprintf(head, sizeof head, "%08zx", k & 0xffffffffu);
        memset(p + off, (int)(k & 0xff), len);
        memcpy(p + off, head, len < 8 ? len : 8);
    }
}

/* The value of key in the query string, or "" (tests use plain values). */
static void qparam(pagi_str q, const char *key, char *out, size_t size)
{
    out[0] = '\0';
    size_t kl = strlen(key);
    const char *p = q.ptr, *end = q.ptr + q.len;
    while (p && p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *stop = amp ? amp : end;
        if ((size_t)(stop - p) > kl && memcmp(p, key, kl) == 0 && p[kl] == '=') {
            size_t n = (size_t)(stop - p) - kl - 1;
            if (n >= size)
                n = size - 1;
            memcpy(out, p + kl + 1, n);
            out[n] = '\0';
            return;
        }
        p = stop + 1;
    }
}

/* free_fn of a handed-over buffer: ud is the request id, malloc'd for it. */
static void freed(void *ptr, void *ud)
{
    char *id = ud;
    tlog(id, "freed");
    free(ptr);
    free(id);
}

static pagi_buf *own_buffer(const char *id, size_t n)
{
    char *p = malloc(n ? n : 1), *idc = strdup(id);
    if (!p || !idc) {
        free(p);
        free(idc);
        return NULL;
    }
    fill_pattern(p, n);
    pagi_buf *b = pagi_buf_wrap(p, n, freed, idc);
    if (!b) {
        free(p);
        free(idc);
    }
    return b;
}

static void release(pagi_scope *s, void *data)
{
    zc_req *r = data;
    (void)s;
    tlog(r->id, "release");
    free(r);
}

static void body_sent(pagi_scope *s, const char *err, void *ud)
{
    zc_req *r = ud;
    tlog(r->id, "sent %s", err ? err : "ok");
    pagi_scope_finish(s, NULL);
}

static int respond(pagi_scope *s, zc_app *app, zc_req *r)
{
    char v[32], mode[16], framing[16];
    qparam(pagi_scope_query_string(s), "size", v, sizeof v);
    qparam(pagi_scope_query_string(s), "mode", mode, sizeof mode);
    qparam(pagi_scope_query_string(s), "framing", framing, sizeof framing);
    size_t n = v[0] ? (size_t)strtoull(v, NULL, 10) : app->blob_len;
    if (strcmp(mode, "own") != 0 && n > app->blob_len)
        n = app->blob_len;
    char clen[32];
    snprintf(clen, sizeof clen, "%zu", n);
    pagi_header h[] = {{{"content-type", 12}, {"application/octet-stream", 24}},
                       {{"content-length", 14}, {clen, strlen(clen)}}};
    pagi_event start = pagi_event_init(PAGI_EV_HTTP_RESPONSE_START);
    start.status = 200;
    start.headers = h;
    start.header_count = strcmp(framing, "chunked") == 0 ? 1 : 2;
    if (pagi_send(s, &start, NULL, NULL) != 0)
        return -1;
    pagi_event body = pagi_event_init(PAGI_EV_HTTP_RESPONSE_BODY);
    if (strcmp(mode, "copy") == 0) {
        body.body.ptr = app->blob;
        body.body.len = n;
        return pagi_send(s, &body, body_sent, r);
    }
    pagi_buf *b;
    if (strcmp(mode, "own") == 0)
        b = own_buffer(r->id, n);
    else if (n == app->blob_len)
        b = pagi_buf_ref(app->blob_buf);
    else
        b = pagi_buf_wrap(app->blob, n, NULL, NULL);
    if (!b)
        return -1;
    int rc = pagi_send_buf(s, &body, b, body_sent, r);
    pagi_buf_unref(b); /* accepted or not, the app is done with its handle */
    return rc;
}

/* pagi_send_buf refused: the caller's reference is untouched. */
static int reject(pagi_scope *s, zc_req *r)
{
    static const char msg[] = "rejected as documented\n";
    pagi_buf *b = own_buffer(r->id, 4096);
    if (!b)
        return -1;
    pagi_event body = pagi_event_init(PAGI_EV_HTTP_RESPONSE_BODY);
    int rc1 = pagi_send_buf(s, &body, b, body_sent, r);
    tlog(r->id, "early %d %s", rc1, pagi_scope_error(s));
    pagi_event start = pagi_event_init(PAGI_EV_HTTP_RESPONSE_START);
    start.status = 200;
    int rc2 = pagi_send_buf(s, &start, b, NULL, NULL);
    tlog(r->id, "start %d %s", rc2, pagi_scope_error(s));
    /* still readable: a rejected send took nothing */
    tlog(r->id, "rejected len=%zu head=%.8s", pagi_buf_len(b), (const char *)pagi_buf_data(b));
    pagi_buf_unref(b);
    if (pagi_send(s, &start, NULL, NULL) != 0)
        return -1;
    body.body.ptr = msg;
    body.body.len = sizeof msg - 1;
    return pagi_send(s, &body, body_sent, r);
}

/* ---- websocket ---- */

static void ws_receive(pagi_scope *s, const pagi_event *ev, void *ud);

static void ws_next(pagi_scope *s, zc_req *r)
{
    if (pagi_receive(s, ws_receive, r) != 0)
        pagi_scope_finish(s, pagi_scope_error(s));
}

static void ws_receive(pagi_scope *s, const pagi_event *ev, void *ud)
{
    zc_req *r = ud;
    if (ev->type == PAGI_EV_WEBSOCKET_CONNECT) {
        char v[32];
        qparam(pagi_scope_query_string(s), "size", v, sizeof v);
        size_t n = (size_t)strtoull(v, NULL, 10);
        pagi_event acc = pagi_event_init(PAGI_EV_WEBSOCKET_ACCEPT);
        pagi_buf *b = own_buffer(r->id, n);
        static const char hello[] = "hello, world";
        pagi_buf *t = pagi_buf_wrap(hello, sizeof hello - 1, NULL, NULL);
        pagi_event bin = pagi_event_init(PAGI_EV_WEBSOCKET_SEND);
        pagi_event txt = pagi_event_init(PAGI_EV_WEBSOCKET_SEND);
        txt.is_text = 1;
        int ok = b && t && pagi_send(s, &acc, NULL, NULL) == 0 &&
                 pagi_send_buf(s, &bin, b, NULL, NULL) == 0 &&
                 pagi_send_buf(s, &txt, t, NULL, NULL) == 0;
        pagi_buf_unref(b);
        pagi_buf_unref(t);
        if (!ok) {
            tlog(r->id, "ws error %s", pagi_scope_error(s));
            pagi_scope_finish(s, pagi_scope_error(s));
            return;
        }
        ws_next(s, r);
    } else if (ev->type == PAGI_EV_WEBSOCKET_DISCONNECT) {
        tlog(r->id, "disconnect %d", ev->code);
        pagi_scope_finish(s, NULL);
    } else {
        ws_next(s, r);
    }
}

/* ---- sse ---- */

static int sse(pagi_scope *s, zc_req *r)
{
    pagi_event ev = pagi_event_init(PAGI_EV_SSE_START);
    ev.status = 200;
    if (pagi_send(s, &ev, NULL, NULL) != 0)
        return -1;
    char *p = strdup("line one\nline two"), *idc = strdup(r->id);
    pagi_buf *b = p && idc ? pagi_buf_wrap(p, strlen(p), freed, idc) : NULL;
    if (!b) {
        free(p);
        free(idc);
        return -1;
    }
    ev = pagi_event_init(PAGI_EV_SSE_SEND);
    int rc = pagi_send_buf(s, &ev, b, NULL, NULL);
    tlog(r->id, "sse send %d", rc);
    pagi_buf_unref(b); /* copied: this is the last reference */
    if (rc != 0)
        return -1;
    ev = pagi_event_init(PAGI_EV_SSE_CLOSE);
    return pagi_send(s, &ev, body_sent, r);
}

static int sse_decline(pagi_scope *s, zc_req *r)
{
    char v[32];
    qparam(pagi_scope_query_string(s), "size", v, sizeof v);
    pagi_event ev = pagi_event_init(PAGI_EV_SSE_HTTP_RESPONSE_START);
    ev.status = 503;
    if (pagi_send(s, &ev, NULL, NULL) != 0)
        return -1;
    pagi_buf *b = own_buffer(r->id, (size_t)strtoull(v, NULL, 10));
    if (!b)
        return -1;
    ev = pagi_event_init(PAGI_EV_SSE_HTTP_RESPONSE_BODY);
    int rc = pagi_send_buf(s, &ev, b, body_sent, r);
    pagi_buf_unref(b);
    return rc;
}

/* ---- the app ---- */

static void handle(pagi_scope *s, void *instance)
{
    zc_app *app = instance;
    if (pagi_scope_type_of(s) == PAGI_SCOPE_LIFESPAN) {
        pagi_scope_finish(s, NULL);
        return;
    }
    zc_req *r = calloc(1, sizeof *r);
    if (!r) {
        pagi_scope_finish(s, "out of memory");
        return;
    }
    qparam(pagi_scope_query_string(s), "id", r->id, sizeof r->id);
    if (!r->id[0])
        strcpy(r->id, "-");
    pagi_scope_set_userdata(s, r, release);
    pagi_str path = pagi_scope_path(s);
    if (pagi_scope_type_of(s) == PAGI_SCOPE_WEBSOCKET) {
        ws_next(s, r);
        return;
    }
    int rc;
    if (pagi_scope_type_of(s) == PAGI_SCOPE_SSE)
        rc = path.len == 12 && memcmp(path.ptr, "/sse-decline", 12) == 0 ? sse_decline(s, r)
                                                                         : sse(s, r);
    else if (path.len == 7 && memcmp(path.ptr, "/reject", 7) == 0)
        rc = reject(s, r);
    else
        rc = respond(s, app, r);
    if (rc != 0) {
        tlog(r->id, "error %s", pagi_scope_error(s));
        pagi_scope_finish(s, pagi_scope_error(s));
    }
}

static void *create(const char *arg, pagi_loop *loop, const char **err)
{
    (void)loop;
    zc_app *app = calloc(1, sizeof *app);
    if (!app) {
        *err = "out of memory";
        return NULL;
    }
    app->blob_len = arg ? (size_t)strtoull(arg, NULL, 10) : 8u << 20;
    app->blob = malloc(app->blob_len ? app->blob_len : 1);
    app->blob_buf = app->blob ? pagi_buf_wrap(app->blob, app->blob_len, NULL, NULL) : NULL;
    if (!app->blob_buf) {
        free(app->blob);
        free(app);
        *err = "out of memory";
        return NULL;
    }
    fill_pattern(app->blob, app->blob_len);
    return app;
}

static void destroy(void *instance)
{
    zc_app *app = instance;
    if (!app)
        return;
    pagi_buf_unref(app->blob_buf); /* any still queued was released with its connection */
    free(app->blob);
    free(app);
}

const pagi_app pagi_module = PAGI_APP_INIT("zcapp", create, handle, destroy);
