/*
 * sse.h - Server-Sent Events scopes: an HTTP/1.1 response that carries an
 * event stream (sse.start, sse.send, sse.comment, sse.keepalive,
 * sse.close), or is declined with an ordinary response.
 */
#ifndef PAGID_SSE_H
#define PAGID_SSE_H

#include "common/buf.h"
#include "pagi/pagi.h"
#include "worker/worker_ctx.h"

typedef struct conn conn;
typedef struct sse_stream sse_stream;
struct scope_ops;

/** The sse scope's ops (on the HTTP/1.1 exchange). */
extern const struct scope_ops sse_exchange_ops;

/** Per-request stream state for an sse scope; NULL on allocation failure. */
/*
 * What an sse stream needs of the exchange it rides on: HTTP/1.1's
 * (sse_h1_carrier) or an HTTP/2 stream's (h2_stream.c). owner is the
 * exchange given to sse_stream_new.
 */
typedef struct sse_carrier {
    /** http.response.start semantics; decline: an sse.http.response.start. */
    int (*start)(pagi_scope *s, const pagi_event *ev, pagi_send_cb cb, void *ud, int decline);
    /** http.response.body semantics. */
    int (*body)(pagi_scope *s, const pagi_event *ev, pagi_send_cb cb, void *ud);
    /** Body delivery as sse.request / sse.disconnect. */
    int (*next_event)(pagi_scope *s, pagi_event *ev, int take);
    /** The app finished with no stream started: the http backstop. */
    void (*finished)(pagi_scope *s, const char *error);
    /** The stream is ending (NULL: nothing to do). */
    void (*end)(pagi_scope *s);
    pagi_scope *(*scope)(void *owner);
    sse_stream *(*stream)(const pagi_scope *s);
    /** timeouts.sse_idle passed with nothing sent: end the stream. */
    void (*idle)(void *owner);
    /** Bytes queued for the client (a keepalive beat is skipped when backed up). */
    size_t (*queued)(void *owner);
} sse_carrier;

extern const sse_carrier sse_h1_carrier;

sse_stream *sse_stream_new(worker_ctx *w, const sse_carrier *car, void *owner);
/** The scope ops' halves that depend on the carrier, for another protocol's table. */
int sse_send_with(const sse_carrier *car, pagi_scope *s, const pagi_event *ev, pagi_send_cb cb,
                  void *ud);
void sse_finished_with(const sse_carrier *car, pagi_scope *s, const char *error);
/** Stop the stream's timers and free it (the exchange ended, any way). */
void sse_stream_free(sse_stream *st);

/** Append one validated sse.send event's wire form (event, id, retry: only
 *  with has_retry, data lines, blank line) to b; 0, or -1 out of memory. */
int sse_format_send(buf *b, const pagi_event *ev);

#endif
