/*
 * tlsapp.c - the TLS integration tests' PAGI module (test_tls_pagi.py
 * builds it): it answers with what pagi_scope_tls() and the scope say, as
 * one line of JSON, so the test can compare it with what its client saw.
 *
 *   http, any path but /late   200, the JSON as the body
 *   http /late?id=ID            no response; when the client has gone, logs
 *                               "ID late JSON" to $PAGID_TEST_LOG: the facts
 *                               outlive the connection
 *   websocket                   accept, the JSON as one text message, close 1000
 *   sse                         sse.start, the JSON as one event, sse.close
 */
#define _POSIX_C_SOURCE 200809L

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pagi/pagi.h>

#include "testlog.h"

/* A growing string; out of memory aborts the test app, never the server. */
typedef struct out {
    char *p;
    size_t n, cap;
} out;

static void put(out *o, const char *s, size_t n)
{
    if (o->n + n + 1 > o->cap) {
        o->cap = (o->n + n + 1) * 2;
        o->p = realloc(o->p, o->cap);
        if (!o->p)
            abort();
    }
    memcpy(o->p + o->n, s, n);
    o->n += n;
    o->p[o->n] = '\0';
}

static void puts_(out *o, const char *s)
{
    put(o, s, strlen(s));
}

static void putf(out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void putf(out *o, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    put(o, tmp, (size_t)n);
}

/* A JSON string, or null for NULL. */
static void json_str(out *o, const char *s)
{
    if (!s) {
        puts_(o, "null");
        return;
    }
    puts_(o, "\"");
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\')
            putf(o, "\\%c", *c);
        else if (*c < 0x20)
            putf(o, "\\u%04x", *c);
        else
            put(o, (const char *)c, 1);
    }
    puts_(o, "\"");
}

static char *describe(const pagi_scope *s)
{
    out o = {0};
    puts_(&o, "{\"scheme\": ");
    json_str(&o, pagi_scope_scheme(s));
    putf(&o, ", \"has_tls\": %d, \"tls\": ", pagi_scope_has_extension(s, "tls"));
    const pagi_tls_info *t = pagi_scope_tls(s);
    if (!t) {
        puts_(&o, "null}");
        return o.p;
    }
    puts_(&o, "{\"server_cert\": ");
    json_str(&o, t->server_cert);
    puts_(&o, ", \"client_cert_chain\": [");
    for (size_t i = 0; i < t->client_cert_count; i++) {
        if (i)
            puts_(&o, ", ");
        json_str(&o, t->client_cert_chain[i]);
    }
    puts_(&o, "], \"client_cert_name\": ");
    json_str(&o, t->client_cert_name);
    puts_(&o, ", \"client_cert_error\": ");
    json_str(&o, t->client_cert_error);
    putf(&o, ", \"tls_version\": %d, \"cipher_suite\": %d", t->tls_version, t->cipher_suite);
    /* The same pointer on a second ask: made once, not per call. */
    putf(&o, ", \"same_on_second_ask\": %d}}", pagi_scope_tls(s) == t);
    return o.p;
}

static void finish_cb(pagi_scope *s, const char *err, void *ud)
{
    free(ud);
    pagi_scope_finish(s, err);
}

static void fail(pagi_scope *s, char *body)
{
    free(body);
    pagi_scope_finish(s, pagi_scope_error(s));
}

static void http_answer(pagi_scope *s)
{
    char *body = describe(s);
    static const pagi_header h[] = {{{"content-type", 12}, {"application/json", 16}}};
    pagi_event start = {
        .type = PAGI_EV_HTTP_RESPONSE_START, .status = 200, .headers = h, .header_count = 1};
    pagi_event ev = {.type = PAGI_EV_HTTP_RESPONSE_BODY, .body = {body, strlen(body)}};
    if (pagi_send(s, &start, NULL, NULL) != 0 || pagi_send(s, &ev, finish_cb, body) != 0)
        fail(s, body);
}

static void tlog(const char *id, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void tlog(const char *id, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    testlog_v(id, fmt, ap);
    va_end(ap);
}

/* /late: the client leaves first; the facts are read after that. */
static void late_gone(pagi_scope *s, const char *reason, void *ud)
{
    (void)reason;
    char *id = ud;
    char *json = describe(s);
    char line[700];
    /* The log line is bounded: the certificates are summed up by length. */
    const pagi_tls_info *t = pagi_scope_tls(s);
    snprintf(line, sizeof line,
             "connected=%d tls=%d version=%d cipher=%d chain=%zu name=%s "
             "server_cert_len=%zu json_len=%zu",
             pagi_conn_is_connected(s), t != NULL, t ? t->tls_version : -1,
             t ? t->cipher_suite : -1, t ? t->client_cert_count : 0,
             t && t->client_cert_name ? t->client_cert_name : "-",
             t && t->server_cert ? strlen(t->server_cert) : 0, strlen(json));
    tlog(id, "late %s", line);
    free(json);
    free(id);
    pagi_scope_finish(s, NULL);
}

static void ws_connected(pagi_scope *s, const pagi_event *ev, void *ud)
{
    (void)ud;
    if (ev->type != PAGI_EV_WEBSOCKET_CONNECT) {
        pagi_scope_finish(s, NULL);
        return;
    }
    char *text = describe(s);
    pagi_event acc = {.type = PAGI_EV_WEBSOCKET_ACCEPT};
    pagi_event msg = {.type = PAGI_EV_WEBSOCKET_SEND, .is_text = 1, .text = {text, strlen(text)}};
    pagi_event close = {.type = PAGI_EV_WEBSOCKET_CLOSE, .code = 1000};
    if (pagi_send(s, &acc, NULL, NULL) != 0 || pagi_send(s, &msg, NULL, NULL) != 0 ||
        pagi_send(s, &close, finish_cb, text) != 0)
        fail(s, text);
}

static void sse_answer(pagi_scope *s)
{
    char *data = describe(s);
    pagi_event start = {.type = PAGI_EV_SSE_START, .status = 200};
    pagi_event msg = {.type = PAGI_EV_SSE_SEND, .data = {data, strlen(data)}};
    pagi_event close = {.type = PAGI_EV_SSE_CLOSE};
    if (pagi_send(s, &start, NULL, NULL) != 0 || pagi_send(s, &msg, NULL, NULL) != 0 ||
        pagi_send(s, &close, finish_cb, data) != 0)
        fail(s, data);
}

static void handle(pagi_scope *s, void *instance)
{
    (void)instance;
    switch (pagi_scope_type_of(s)) {
    case PAGI_SCOPE_HTTP: {
        pagi_str path = pagi_scope_path(s);
        if (path.len == 5 && memcmp(path.ptr, "/late", 5) == 0) {
            pagi_str q = pagi_scope_query_string(s);
            char *id = malloc(q.len + 1);
            if (!id)
                abort();
            memcpy(id, q.ptr, q.len);
            id[q.len] = '\0';
            if (pagi_conn_on_disconnect(s, late_gone, id) != 0) {
                free(id);
                pagi_scope_finish(s, pagi_scope_error(s));
            }
            return;
        }
        http_answer(s);
        return;
    }
    case PAGI_SCOPE_WEBSOCKET:
        if (pagi_receive(s, ws_connected, NULL) != 0)
            pagi_scope_finish(s, pagi_scope_error(s));
        return;
    case PAGI_SCOPE_SSE:
        sse_answer(s);
        return;
    default:
        /* lifespan: not supported, the server runs without it */
        pagi_scope_finish(s, NULL);
    }
}

const pagi_app pagi_module = PAGI_APP_INIT("tlsapp", NULL, handle, NULL);
