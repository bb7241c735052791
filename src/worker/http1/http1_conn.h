/*
 * http1_conn.h - HTTP/1.1 on a connection: the parser, the request being
 * served (its scope and exchange state), request body buffering with flow
 * control, response framing, keep-alive and pipelining (one request at a
 * time, responses in order).
 */
#ifndef PAGID_HTTP1_CONN_H
#define PAGID_HTTP1_CONN_H

#include <pagi/pagi.h>
#include "common/buf.h"
#include "http1_parser.h"
#include "http1_response.h"
#include "worker/http/http_exchange.h"

#include "worker/core/conn.h"

typedef struct h1_conn {
    h1_parser *parser;
    pagi_scope *scope;      /* the request being served; NULL between requests */
    buf body;               /* received body bytes not yet delivered to the app */
    int parse_error;        /* status of a parse error after the head (0 = none) */
    /* Flags (0/1), packed: every busy connection holds them. */
    unsigned char start_app;          /* scope created during a feed: start the app after it */
    unsigned char msg_complete;       /* the parser saw the whole request */
    unsigned char body_end_delivered; /* the app got more=0 */
    unsigned char continue_pending;   /* Expect: 100-continue not answered yet */
    unsigned char req_keep_alive;
    unsigned char close_after; /* the server closes after this response whatever the request says */
    unsigned char announce_keep_alive; /* the response says "connection: keep-alive" (sse.start) */
    unsigned char http_minor;          /* 0 or 1 */
    unsigned char head_request;
    h1_response_plan plan;  /* the response's framing (chunked, keep-alive, ...) */
    struct sse_stream *sse; /* the event stream of an sse scope (owned), else NULL */
    struct ws_conn *ws;     /* set once the connection is a WebSocket (owned) */
    /* The exchange's protocol-neutral state: response state, body counts,
     * parked sends, access log facts (worker/http/http_exchange.h). */
    http_exchange x;
} h1_conn;

struct conn_proto;
/** HTTP/1.1 as a connection protocol (the one every connection starts with). */
extern const struct conn_proto h1_proto;

/**
 * c's HTTP/1.1 state (c->proto_state): made at the first byte of a request
 * (h1_conn_on_input), freed when the connection waits for the next one
 * (h1_exchange_next) and by release; NULL while it holds none, so an idle
 * keep-alive connection costs only its conn.
 */
static inline h1_conn *h1_of(const conn *c)
{
    return (h1_conn *)c->proto_state;
}
/** Release c's HTTP/1.1 state (h1_proto's and ws_proto's release): what it
 *  holds now, the struct at the next safe point (stale pointers up the
 *  stack stay readable until then, as the conn does). */
void h1_conn_free(conn *c);
/** The request line read so far, for a log line of a request refused before any scope. */
int h1_conn_request_line(const conn *c, pagi_str *method, pagi_str *target);
/** The connection left HTTP/1 for good (a WebSocket): free the request parser. Safe point only. */
void h1_conn_drop_parser(conn *c);
/** New input is in c->in: parse and act. */
CONN_MUST_CHECK conn_fate h1_conn_on_input(conn *c);
/** The peer closed its side (read returned 0). */
CONN_MUST_CHECK conn_fate h1_conn_on_eof(conn *c);
/** Bytes were written; settle watermarks, completions, response end. */
CONN_MUST_CHECK conn_fate h1_conn_on_written(conn *c);
/** Should the connection read now (flow control)? */
int h1_conn_wants_read(const conn *c);
/** Is a body read pending for a waiting app (request timeout applies)? */
int h1_conn_waiting_for_body(const conn *c);
/** The connection is ending: end the exchange with reason (NULL = normal). */
void h1_conn_on_close(conn *c, const char *reason);
/** Timeout while reading the request head: answer 408 and close. */
void h1_conn_header_timeout(conn *c);
/* Cleartext HTTP on a TLS port: a 400 in clear, then close. */
void h1_conn_plain_http(conn *c);

/* Between http1_conn.c and http1_exchange.c. */
struct scope_ops;
extern const struct scope_ops h1_exchange_ops;
/** HTTP/1.1 as an http_carrier: the exchange's owner is the conn. */
extern const http_carrier h1_http_carrier;
CONN_MUST_CHECK conn_fate h1_exchange_end(conn *c);
/** After an exchange that ended with the request read whole: keep-alive
 * (wait for the next request, serve pipelined bytes) or close, as keep says. */
CONN_MUST_CHECK conn_fate h1_exchange_next(conn *c, int keep);
/** End the exchange abnormally: on_disconnect(reason), then detach the scope. */
void h1_abort_exchange(conn *c, const char *reason);
/** Start serving s for req: reset the per-request state, enter CONN_ACTIVE. */
void h1_exchange_begin(conn *c, pagi_scope *s, const h1_request *req);
/** Let go of the scope and per-request state (after complete or abort). */
void h1_exchange_release(conn *c);

#endif
