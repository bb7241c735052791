/*
 * http1_exchange.h - the pieces of the HTTP/1.1 exchange that other scope
 * types built on an HTTP response reuse (sse.c): starting a response,
 * sending body bytes, body delivery to receives, and the app's completion.
 */
#ifndef PAGID_HTTP1_EXCHANGE_H
#define PAGID_HTTP1_EXCHANGE_H

#include <pagi/pagi.h>

typedef struct conn conn;

/** http.response.start semantics (ev->type is not looked at). */
int h1x_send_start(pagi_scope *s, conn *c, const pagi_event *ev, pagi_send_cb cb, void *ud);
/** http.response.body semantics (ev->type is not looked at). */
int h1x_send_body(pagi_scope *s, conn *c, const pagi_event *ev, pagi_send_cb cb, void *ud);
/** Where a response body event's bytes come from. Zero fields name memory:
 *  an fd only with use_fd (ABI 2), so a {0} event is never stdin. */
typedef enum h1x_body_source {
    H1X_BODY_MEMORY,
    H1X_BODY_FILE,
    H1X_BODY_FD,
    H1X_BODY_CONFLICT /* more than one of body, file, fd */
} h1x_body_source;
h1x_body_source h1x_body_source_of(const pagi_event *ev);
/**
 * Why an http.response.trailers send is refused, saying what the app did
 * (HTTP/1 and h2 alike): not_started (no http.response.start), !announced
 * (the start lacked trailers => 1), !framed (the response cannot carry
 * trailers), else they were already sent. A static string.
 */
const char *h1x_trailers_refusal(int not_started, int announced, int framed);
/** Body delivery with the scope type's event names. */
int h1x_next_body_event(pagi_scope *s, pagi_event *ev, int take, pagi_event_type req_type,
                        pagi_event_type disc_type);
void h1x_receive_wanted(pagi_scope *s);
/** The app finished: 500 backstop, truncation, or nothing (see http1_exchange.c). */
void h1x_finished(pagi_scope *s, const char *error);
/** timeouts.response passed with no response started: 504 (see http1_exchange.c). */
void h1x_response_timeout(pagi_scope *s);
size_t h1x_buffered(const pagi_scope *s);
/** Queue a chunked body's size line ("%zx\r\n") on c; 0 or -1. */
int h1x_append_chunk_header(conn *c, size_t n);
int h1x_above_high(const pagi_scope *s);
/** scope_ops.write_now for HTTP/1.1 exchanges (scope_write_now). */
int h1x_write_now(pagi_scope *s, int block);

#endif
