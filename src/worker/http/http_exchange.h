/*
 * http_exchange.h - one HTTP request/response exchange, whatever protocol
 * carries it: send validation and the response state machine, send
 * completion under the watermarks, the 500 and 504 backstops and the access
 * log's facts, written once over an http_carrier that HTTP/1.1
 * (http1/http1_exchange.c) and HTTP/2 (http2/h2_response.c) implement, as
 * ws_carrier is for WebSocket. New response sources plug in here.
 */
#ifndef PAGID_HTTP_EXCHANGE_H
#define PAGID_HTTP_EXCHANGE_H

#include <pagi/pagi.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct conn conn;
typedef struct http_exchange http_exchange;

/* Where a response is. The one transition function is http_exchange_set_state. */
typedef enum http_resp_state {
    HX_NONE,     /* nothing sent */
    HX_STARTED,  /* head queued, body may follow */
    HX_TRAILERS, /* the body ended, trailers announced and awaited */
    HX_FINAL     /* everything queued (or the server's own answer): complete once written */
} http_resp_state;

/*
 * What an exchange needs of the protocol carrying it. Every function gets
 * the exchange; x->owner is the carrier's object (a conn, an h2_stream).
 * Functions returning int give 0, or scope_fail's -1 (nothing queued).
 */
typedef struct http_carrier {
    const char *name;
    /* A final body short of its content-length is refused (HTTP/2: the
     * stream would end as if whole); else it goes out and the carrier's
     * body_end hears of it (HTTP/1.1 closes the connection after it). */
    int strict_length;
    /* What abort does, for the log: "connection closed", "stream reset". */
    const char *abort_says;
    /* The exchange of s, or NULL once it ended (the scope was detached). */
    http_exchange *(*exchange)(const pagi_scope *s);
    /* Check the head's fields as the protocol must, then queue or submit
     * it; set x->content_length (-1 none), x->no_body and x->framed. what
     * names the event in errors (http.response.start, websocket.accept). */
    int (*start)(http_exchange *x, pagi_scope *s, const pagi_event *ev, const char *what);
    /* Queue body bytes (p/n may be a pagi_send_buf's, scope_send_buf). */
    int (*body_mem)(http_exchange *x, pagi_scope *s, const char *p, size_t n);
    /* Queue n bytes of the file fd from off; fd is the carrier's from here,
     * closed by it also on failure. */
    int (*body_file)(http_exchange *x, pagi_scope *s, int fd, off_t off, size_t n);
    /* The body ended: trailers follow, or the response is whole; short: it
     * fell short of the content-length (only on a carrier not strict_length). */
    int (*body_end)(http_exchange *x, pagi_scope *s, int trailers_follow, int short_of_length);
    /* Check and queue the trailers (the state is HX_TRAILERS). */
    int (*trailers)(http_exchange *x, pagi_scope *s, const pagi_event *ev);
    /* Bytes were queued: write (or frame) them soon. */
    void (*pushed)(http_exchange *x);
    /* Response bytes held for the client, for the watermarks. */
    size_t (*queued)(const http_exchange *x);
    /* The server answers status in the app's place (the 500 backstop, the
     * 504 of timeouts.response): end the scope with reason, queue the
     * answer, and end the request as the protocol does (may_keep: the
     * connection may stay for the next request). */
    void (*answer)(http_exchange *x, pagi_scope *s, int status, const char *text,
                   const char *reason, int may_keep);
    /* End a started response that will not be whole (reason): close the
     * connection after what was queued, or reset the stream. */
    void (*abort)(http_exchange *x, pagi_scope *s, const char *reason);
} http_carrier;

typedef struct http_parked_send {
    pagi_send_cb cb;
    void *ud;
} http_parked_send;

/* The exchange's state, embedded in the carrier's object (h1_conn,
 * h2_stream); packed, as every busy HTTP/1.1 connection holds one. */
struct http_exchange {
    const http_carrier *car;
    void *owner;
    int64_t content_length;   /* the head's, or -1 */
    int64_t body_sent;        /* body bytes the app sent (the access log's bytes) */
    double log_start;         /* ev_now when the request head began */
    http_parked_send *parked; /* sends waiting for the buffer to drain (owned) */
    uint32_t n_parked, cap_parked;
    int status; /* sent, or the server's own (413, 500, 504); 0 none: access log */
    http_resp_state resp;
    unsigned char trailers_announced; /* http.response.start had trailers => 1 */
    unsigned char framed;             /* the response can carry trailers (chunked, HTTP/2) */
    unsigned char no_body;            /* HEAD, 204, 304: body bytes are counted, not sent */
    unsigned char above_high;         /* transport hysteresis: the high mark is engaged */
};

/** A new exchange on owner: every field starts over (the parked array is kept). */
void http_exchange_begin(http_exchange *x, const http_carrier *car, void *owner, double log_start);
/** Free what the exchange holds (the parked array); it may begin again. */
void http_exchange_free(http_exchange *x);
/** The one transition function of x->resp; a move the machine has no arrow for is logged. */
void http_exchange_set_state(http_exchange *x, http_resp_state to);

/** scope_ops.send for an http scope on car: the gate, then start/body/trailers. */
int http_exchange_send(const http_carrier *car, pagi_scope *s, const pagi_event *ev,
                       pagi_send_cb cb, void *ud);
/** http.response.start semantics on x (ev->type is not looked at; what names it in errors). */
int http_exchange_start(http_exchange *x, pagi_scope *s, const pagi_event *ev, pagi_send_cb cb,
                        void *ud, const char *what);
/** http.response.body semantics on x. */
int http_exchange_body(http_exchange *x, pagi_scope *s, const pagi_event *ev, pagi_send_cb cb,
                       void *ud);
/** http.response.trailers semantics on x. */
int http_exchange_trailers(http_exchange *x, pagi_scope *s, const pagi_event *ev, pagi_send_cb cb,
                           void *ud);

/** Bytes were queued for s: push them, raise the high mark if crossed,
 *  complete cb now or park it until the buffer drains (cb may be NULL). */
void http_exchange_after_append(http_exchange *x, pagi_scope *s, pagi_send_cb cb, void *ud);
/** Output was written: below the low watermark, drain notice and parked sends complete. */
void http_exchange_written(http_exchange *x, pagi_scope *s, size_t low_watermark);
/** Complete every parked send (err: NULL, or why it failed). */
void http_exchange_settle_parked(http_exchange *x, pagi_scope *s, const char *err);

/** The app finished (error may be NULL): the 500 backstop, a truncation, or nothing. */
void http_exchange_finished(const http_carrier *car, pagi_scope *s, const char *error);
/** timeouts.response passed with no response started: 504 in its place. */
void http_exchange_response_timeout(const http_carrier *car, pagi_scope *s);
/** pagi.transport for s on car. */
size_t http_exchange_buffered(const http_carrier *car, const pagi_scope *s);
int http_exchange_above_high(const http_carrier *car, const pagi_scope *s);

/** The exchange's access log line on c (reason NULL: completed). */
void http_exchange_log(const http_exchange *x, conn *c, pagi_scope *s, const char *reason);

/** Where a response body event's bytes come from. Zero fields name memory:
 *  an fd only with use_fd (ABI 2), so a {0} event is never stdin. */
typedef enum http_body_source {
    HX_BODY_MEMORY,
    HX_BODY_FILE,
    HX_BODY_FD,
    HX_BODY_CONFLICT /* more than one of body, file, fd */
} http_body_source;
http_body_source http_body_source_of(const pagi_event *ev);
/**
 * Why an http.response.trailers send is refused, saying what the app did:
 * not_started (no http.response.start), !announced (the start lacked
 * trailers => 1), !framed (the response cannot carry trailers), else they
 * were already sent. A static string.
 */
const char *http_trailers_refusal(int not_started, int announced, int framed);

#endif
