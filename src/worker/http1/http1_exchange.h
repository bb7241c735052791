/*
 * http1_exchange.h - the pieces of the HTTP/1.1 exchange that other scope
 * types built on an HTTP response reuse (sse.c, websocket_h1.c): body
 * delivery to receives, the app's completion, transport facts, chunk
 * lines. Sends go through worker/http/http_exchange.h on h1_http_carrier.
 */
#ifndef PAGID_HTTP1_EXCHANGE_H
#define PAGID_HTTP1_EXCHANGE_H

#include <pagi/pagi.h>

typedef struct conn conn;

/** Body delivery with the scope type's event names. */
int h1x_next_body_event(pagi_scope *s, pagi_event *ev, int take, pagi_event_type req_type,
                        pagi_event_type disc_type);
void h1x_receive_wanted(pagi_scope *s);
/** The app finished: 500 backstop, truncation, or nothing (http_exchange_finished). */
void h1x_finished(pagi_scope *s, const char *error);
/** timeouts.response passed with no response started: 504 (http_exchange_response_timeout). */
void h1x_response_timeout(pagi_scope *s);
size_t h1x_buffered(const pagi_scope *s);
/** Queue a chunked body's size line ("%zx\r\n") on c; 0 or -1. */
int h1x_append_chunk_header(conn *c, size_t n);
int h1x_above_high(const pagi_scope *s);
/** scope_ops.write_now for HTTP/1.1 exchanges (scope_write_now). */
int h1x_write_now(pagi_scope *s, int block);

#endif
