/*
 * h2_int.h - between the files of the HTTP/2 module: the session
 * (h2_conn.c: nghttp2, connection I/O, limits), its streams (h2_stream.c:
 * each a PAGI scope), their responses (h2_response.c) and the websockets
 * on streams (h2_websocket.c, RFC 8441). The request head's parsing
 * (h2_request.h) needs none of this.
 */
#ifndef PAGID_H2_INT_H
#define PAGID_H2_INT_H

#include <nghttp2/nghttp2.h>
#include <stdint.h>
#include <sys/types.h>
#include <unistd.h>

#include "common/buf.h"
#include "worker/core/conn.h"
#include "h2_request.h"
#include "worker/http/http_exchange.h"
#include "worker/sse/sse.h"

typedef struct h2_stream h2_stream;
struct ws_conn;

typedef struct h2_session {
    conn *c;
    nghttp2_session *ng;
    h2_stream *streams;                 /* every stream nghttp2 still knows of */
    h2_stream *ready_head, *ready_tail; /* heads whole, to start after the read, oldest first */
    h2_stream *in_head;                 /* the stream whose header block is being read (on_header's
                                         * lookup without nghttp2's map), or NULL; cleared when freed */
    size_t n_streams;
    size_t pending;    /* response bytes the streams hold, not yet framed */
    size_t open_files; /* streams' file bodies open (limits.http2_max_open_files) */
    int goaway;        /* a GOAWAY was queued: no new streams, close when idle */
    int in_pump;
    int send_paused;        /* h2_stream_send_data stopped mem_send at the high watermark */
    int calm_counted;       /* pagid_http2_calm_total has this connection */
    ev_timer deadline;      /* the earliest stream deadline (timeouts.header, .request) */
    ev_timer stall;         /* timeouts.write while streams hold bytes and none are framed */
    double data_at;         /* when DATA was last framed (or the stall clock started) */
    ev_timer peer;          /* after the client's FIN: gone for good, or still reading? */
    double eof_at;          /* when the FIN came (0: not yet) */
    double peer_every;      /* the next look's delay (doubles up to PEER_LOOK_MAX) */
    const char *end_reason; /* why we terminated the session (protocol_error), else NULL */
    double reset_window;    /* rapid reset: start of the current second */
    unsigned resets;        /* client resets of streams not complete in it */
    int32_t max_stream_id;  /* the highest stream the client opened (HEADERS) */
    double rst_sent_at;     /* when we last sent RST_STREAM: frames in flight may follow it */
    double idle_window;     /* empty DATA / PRIORITY floods: start of the current second */
    unsigned idle_frames;   /* such frames in it */
    /* Scopes whose stream ended (reset) while their app runs on: held (one
     * reference each) so they count against the concurrent stream limit
     * until their apps finish; pruned at each read. */
    pagi_scope **gone;
    size_t n_gone, cap_gone;
} h2_session;

/** A new stream (HEADERS began); NULL when out of memory. */
h2_stream *h2_stream_new(h2_session *h, int32_t id);
/** One request header field. 0, or an nghttp2 error to return from the callback. */
int h2_stream_header(h2_stream *st, const uint8_t *name, size_t nl, const uint8_t *value,
                     size_t vl);
/** The header block is whole (end_stream: no body follows). */
void h2_stream_headers_done(h2_stream *st, int end_stream);
/** Request body bytes (a DATA frame's payload). 0 or -1. */
int h2_stream_data(h2_stream *st, const uint8_t *data, size_t len);
/** END_STREAM from the client. */
void h2_stream_request_end(h2_stream *st);
/** After a read: create the scope and start the app of a stream whose head is whole. */
void h2_stream_start_ready(h2_session *h);
/** The last frame of the response (END_STREAM) went into the output. */
void h2_stream_response_sent(h2_stream *st);
/** nghttp2 closed the stream (error_code from RST_STREAM/GOAWAY): end its
 * scope if it has one, then free it. */
void h2_stream_closed(h2_stream *st, uint32_t error_code);
/** The client sent RST_STREAM on st (its scope's disconnect says client_closed). */
void h2_stream_peer_reset(h2_stream *st);
/** The client half-closed TCP: streams whose request is not whole, and
 * event streams (they have no end to wait for), end (client_closed,
 * reset); whole requests are still answered. */
void h2_stream_peer_eof(h2_session *h);
/** Shutdown: queue a Close 1001 on every open websocket stream; how many. */
int h2_stream_going_away(h2_session *h);
/** The connection is ending: every scope gets the reason (NULL: normal). */
void h2_stream_abort_all(h2_session *h, const char *reason);
/** Free every stream left (the session is going away). */
void h2_stream_free_all(h2_session *h);
/** Framing lowered what streams hold: settle the parked sends of each under the low mark. */
void h2_stream_after_write(h2_session *h);
/** Streams open plus scopes whose stream was reset but whose app still
 * runs: what the concurrent stream limit bounds. */
size_t h2_session_busy(const h2_session *h);
/** Drop the held scopes whose apps finished (not inside nghttp2's callbacks). */
void h2_session_prune_gone(h2_session *h);
/** timeouts.write passed with no DATA framed: reset the streams holding bytes (write_timeout). */
void h2_stream_timeout_stalled(h2_session *h);
/** Each stream's own deadline: a header block past timeouts.header closes
 * the connection, a body the app waits for that has not come within
 * timeouts.request resets its stream (client_timeout). Returns the earliest
 * deadline still ahead (ev_now time), or 0 for none. */
double h2_stream_deadlines(h2_session *h, double now);

/* h2_conn.c, for the streams. */
/** Frames are waiting to be written: pump them at the next safe point. */
void h2_session_kick(h2_session *h);
/** h2_response.c: the data source reading a stream's response body. */
ssize_t h2_stream_read(nghttp2_session *ng, int32_t id, uint8_t *dst, size_t len, uint32_t *flags,
                       nghttp2_data_source *src, void *ud);
/** h2_response.c: a DATA frame's header and payload (NGHTTP2_DATA_FLAG_NO_COPY) into c->out. */
int h2_stream_send_data(nghttp2_session *ng, nghttp2_frame *frame, const uint8_t *framehd,
                        size_t length, nghttp2_data_source *src, void *ud);
/** A stream's deadline may have changed: run h2_stream_deadlines, arm the timer. */
void h2_session_arm_deadlines(h2_session *h);
/** A stream count changed: the connection's state (idle or active) follows. */
void h2_session_streams_changed(h2_session *h);

struct h2_stream {
    h2_session *h;
    int32_t id;
    h2_stream *prev, *next;
    h2_stream *ready_next; /* in the session's ready queue */
    int queued;
    pagi_scope *scope;
    int ready;       /* the head is whole: start it after the read */
    int peer_reset;  /* the client's RST_STREAM ended it */
    int started;     /* its scope was made (or it was refused): no longer waiting to start */
    int refuse;      /* answer this status without the app (431, 400, 501) */
    h2_head head;    /* the request head while it comes */
    double input_at; /* its last body bytes, or when its app began waiting for them */
    /* request body */
    buf body;
    int req_end, end_delivered;
    int too_large;       /* past limits.max_body_size: answered 413 or reset */
    uint64_t body_total; /* request body bytes received, for that limit */
    /* response: the exchange's protocol-neutral state (response state,
     * counts, parked sends; x.log_start: when its HEADERS began, which the
     * header block's deadline counts from too), then the framing's own */
    http_exchange x;
    int submitted, deferred;
    char *kept_head; /* a bodiless response's head until its final body (owned) */
    size_t n_kept;
    int kept_status;
    buf out; /* body bytes not yet framed */
    /* after them: an app's pagi_buf body (pagi_send_buf), held by reference,
     * not copied, so N streams sending one cached file hold it once */
    pagi_buf *held;
    size_t held_off, held_left;
    int file_fd; /* a file body after them, or -1 */
    off_t file_off;
    size_t file_left;
    buf trailers; /* name NUL value NUL ..., once sent by the app */
    size_t n_trailers;
    int trailers_ready;
    sse_stream *sse; /* the event stream of an sse scope (owned), else NULL */
    /* a websocket (RFC 8441): its state (released at stream_free), the
     * frames' bytes in body; input received and credited back so far */
    struct ws_conn *ws;
    uint64_t ws_in, ws_credited;
};

static inline conn *st_conn(const h2_stream *st)
{
    return st->h->c;
}

/* A stream's file body is done with (all read, or the stream ends). */
static inline void st_close_file(h2_stream *st)
{
    if (st->file_fd < 0)
        return;
    close(st->file_fd);
    st->file_fd = -1;
    st->h->open_files--;
}

/* A stream's held buffer is done with (all framed, copied out, or the stream ends). */
static inline void st_release_held(h2_stream *st)
{
    pagi_buf_unref(st->held);
    st->held = NULL;
    st->held_off = st->held_left = 0;
}

/* Response bytes the stream holds, not yet framed. */
static inline size_t st_pending(const h2_stream *st)
{
    return buf_size(&st->out) + st->held_left + st->file_left;
}

/* h2_response.c: the response side of a stream, h2_http_carrier's
 * framing half (http_exchange.h says what each does; x->owner is the stream). */
int h2_resp_start(http_exchange *x, pagi_scope *s, const pagi_event *ev, const char *what);
int h2_resp_body_mem(http_exchange *x, pagi_scope *s, const char *p, size_t n);
int h2_resp_body_file(http_exchange *x, pagi_scope *s, int fd, off_t off, size_t n);
int h2_resp_body_end(http_exchange *x, pagi_scope *s, int trailers_follow, int short_of_length);
int h2_resp_trailers(http_exchange *x, pagi_scope *s, const pagi_event *ev);
void h2_resp_pushed(http_exchange *x);
size_t h2_resp_queued(const http_exchange *x);
/** Answer status with a short text body without the app (or no longer with it). */
void h2_resp_refuse(h2_stream *st, int status, const char *text, int log_line);

/* h2_stream.c: HTTP/2 as an http_carrier (the exchange's owner is the stream). */
extern const http_carrier h2_http_carrier;
/** Bytes were queued on st: frame them, complete cb now or park it (cb may be NULL). */
static inline void h2_resp_after_append(h2_stream *st, pagi_send_cb cb, void *ud)
{
    http_exchange_after_append(&st->x, st->scope, cb, ud);
}

/* h2_stream.c, for h2_websocket.c */
/** End st's scope for reason, and reset the stream (CANCEL); the connection goes on. */
void h2_stream_reset(h2_stream *st, const char *reason);

/* h2_websocket.c: a stream that is a websocket (RFC 8441). */
struct scope_request;
/** Make st's websocket scope from the extended CONNECT r; 0, or a status to refuse with. */
int h2_ws_make(h2_stream *st, const h2_request *r, const struct scope_request *sr);
/** len new frame bytes were appended to st->body. */
void h2_ws_data(h2_stream *st, size_t len);
/** The client ended its side (END_STREAM). */
void h2_ws_peer_end(h2_stream *st);
/** A safe point after framing: read input held back, credit the window. */
void h2_ws_after_write(h2_stream *st);
/** The scope ends (stream_end_scope; reason NULL: normally). */
void h2_ws_end(h2_stream *st, const char *reason);
/** The stream is freed: let go of the websocket. */
void h2_ws_free(h2_stream *st);
/** The connection is closing under the server's shutdown: a Close 1001 when open (1), else 0. */
int h2_ws_going_away(h2_stream *st);

#endif
