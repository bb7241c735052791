/*
 * sse.h - Server-Sent Events scopes: an HTTP/1.1 response that carries an
 * event stream (sse.start, sse.send, sse.comment, sse.keepalive,
 * sse.close), or is declined with an ordinary response.
 */
#ifndef PAGID_SSE_H
#define PAGID_SSE_H

#include "../common/buf.h"
#include "pagi/pagi.h"

typedef struct conn conn;
typedef struct sse_stream sse_stream;
struct scope_ops;

/** The sse scope's ops (on the HTTP/1.1 exchange). */
extern const struct scope_ops sse_exchange_ops;

/** Per-request stream state for an sse scope; NULL on allocation failure. */
sse_stream *sse_stream_new(conn *c);
/** Stop the stream's timers and free it (the exchange ended, any way). */
void sse_stream_free(sse_stream *st);

/** Append one validated sse.send event's wire form (event, id, retry: only
 *  with has_retry, data lines, blank line) to b; 0, or -1 out of memory. */
int sse_format_send(buf *b, const pagi_event *ev);

#endif
