/*
 * websocket_int.h - the state shared by websocket.c (the scope's
 * send/receive side), websocket_io.c (frames, close handshake, timers) and
 * the carriers a websocket rides on: websocket_h1.c (an upgraded HTTP/1.1
 * connection) and h2_websocket.c (an HTTP/2 stream, RFC 8441). Nothing
 * else includes it.
 *
 * Ownership: a ws_conn is created with the websocket scope and is the
 * scope's proto pointer. The transport side (owner) lets go of it in
 * ws_detach (conn_close, or the h2 stream's end); the app side lets go when
 * it finished or took the websocket.disconnect. The last one frees it and
 * detaches the scope, so messages that arrived before the end are still
 * delivered, then the disconnect with its code and reason, even after the
 * transport closed.
 */
#ifndef PAGID_WEBSOCKET_INT_H
#define PAGID_WEBSOCKET_INT_H

#include <ev.h>

#include "worker/core/conn.h"
#include "worker/core/pagi_buf.h"
#include "worker/http1/http1_response.h"
#include "utf8.h"
#include "websocket.h"
#include "ws_deflate.h"
#include "ws_frame.h"

typedef enum ws_state {
    WS_HANDSHAKE,  /* upgrade request read; the app has not answered */
    WS_DENYING,    /* websocket.http.response.start queued; body events follow */
    WS_DENIED,     /* a 403 or a whole denial response queued; closing after the write */
    WS_OPEN,       /* 101 queued: messages both ways */
    WS_CLOSE_SENT, /* our Close is queued; waiting up to ws_close for the peer's */
    WS_CLOSING,    /* handshake over or failed: last bytes out, then the transport ends */
    WS_GONE        /* the transport is closed; only the app side is left */
} ws_state;

typedef struct ws_conn ws_conn;

/*
 * What a websocket needs of the transport it rides on. Every function gets
 * the ws_conn; ws->owner is the transport's object (a conn, an h2_stream),
 * never NULL while these are called.
 */
typedef struct ws_carrier {
    /* The handshake's answer: the accept's head (extensions: the negotiated
     * permessage-deflate response, or NULL); 0, or scope_fail's -1. */
    int (*accept)(ws_conn *ws, const pagi_event *ev, const char *extensions);
    /* A bare refusal (403, or 500 when the app failed); the transport ends after it. */
    void (*refuse)(ws_conn *ws, int status);
    /* The denial response extension (state WS_HANDSHAKE / WS_DENYING); 0, or scope_fail's -1. */
    int (*deny_start)(ws_conn *ws, const pagi_event *ev, pagi_send_cb cb, void *ud);
    int (*deny_body)(ws_conn *ws, const pagi_event *ev, pagi_send_cb cb, void *ud);
    /* Bytes from the peer not read yet (frames are parsed in place and consumed from it). */
    buf *(*input)(ws_conn *ws);
    /* Queue bytes for the peer (copied), or a lent buffer by reference. 0 or -1. */
    int (*write)(ws_conn *ws, const void *p, size_t n);
    int (*write_buf)(ws_conn *ws, pagi_buf *b);
    /* Frames were queued: write them soon. */
    void (*kick)(ws_conn *ws);
    /* After a send's bytes were queued: complete it now, or park it under the watermark. */
    void (*after_append)(ws_conn *ws, pagi_send_cb cb, void *ud);
    size_t (*queued)(const ws_conn *ws);
    int (*above_high)(const ws_conn *ws);
    /* Input was consumed or reading paused/resumed: the transport lets the peer send (or not). */
    void (*refresh)(ws_conn *ws);
    /* End once the queued bytes are out (TCP close; END_STREAM). */
    void (*finish)(ws_conn *ws);
    /* End now for reason; ws_transport_closed has run when it returns. */
    void (*abort)(ws_conn *ws, const char *reason);
    /* The scope ended (ws_transport_closed): its log line (why NULL = complete), detach. */
    void (*ended)(ws_conn *ws, const char *why);
    const char *(*peer)(const ws_conn *ws, int *port);
} ws_carrier;

/* One complete message waiting for the app. */
typedef struct ws_msg {
    struct ws_msg *next;
    int is_text;
    size_t len;
    char data[];
} ws_msg;

struct ws_conn {
    const ws_carrier *car;
    void *owner;   /* the transport (car's object); NULL once it is closed */
    worker_ctx *w;
    pagi_scope *s; /* NULL once released */
    ws_state state;
    int connect_delivered;
    int app_finished;
    int input_pending; /* frames wait in the input: read at the next flush (not in an app call) */
    int paused;        /* the queue is full but a receive is pending: the next message waits */
    int stalled;       /* paused on the byte bound: the timer waits timeouts.write for a take */
    char accept_key[29];

    /* permessage-deflate: what the client offered that we can accept, and the streams */
    int pmd_offered;
    ws_deflate_params pmd_params;
    ws_deflate *pmd;

    h1_response_plan plan; /* denial response framing (HTTP/1.1) */

    /* frame reader */
    int in_frame;
    ws_frame_hdr fh;
    uint64_t frame_done; /* payload bytes of fh already consumed */
    int in_message;      /* a data message is open (fragments expected) */
    int msg_text, msg_compressed;
    uint64_t msg_wire; /* payload bytes of the message on the wire (compressed size) */
    buf msg;           /* the message being assembled (inflated if compressed) */
    utf8_validator u8;
    size_t ctl_len;
    uint8_t *ctl; /* a control frame's payload (WS_MAX_CONTROL_PAYLOAD), owned only while one is read */

    /* messages for the app */
    ws_msg *q_head, *q_tail;
    size_t q_count;
    size_t q_bytes; /* payload bytes queued (inflated): bounded by limits.max_receive_queue_size */

    /* how it ended: the first cause recorded wins */
    int end_set;
    int end_code;         /* websocket.disconnect code */
    const char *end_word; /* reason word (reason.h); NULL when the peer's text applies */
    size_t end_text_len;  /* the peer's close reason */
    char *end_text;       /* owned; NULL when the reason is empty */
    int disconnect_taken;

    /* Timers (the connection's own timer keeps the write timeout). One timer is ws_idle while
     * open (or, while stalled, how long the app may leave a full queue undrained) and ws_close
     * once closing, never two at once; keepalive's two exist only once the app asked. */
    ev_timer timer;
    int timers_init;
    struct ws_keepalive *ka; /* owned; NULL until a websocket.keepalive with an interval */
};

/* The handshake's fields, read the same way for every carrier (names lower case). */
#define WS_MAX_SUBPROTOCOLS 64
typedef struct ws_handshake {
    pagi_str protos[WS_MAX_SUBPROTOCOLS]; /* offered subprotocols, in order */
    size_t nprotos;
    int too_many;          /* more than WS_MAX_SUBPROTOCOLS offered */
    ws_deflate_params pmd; /* the first permessage-deflate offer we can accept */
    int pmd_ok;
    pagi_str key; /* Sec-WebSocket-Key (HTTP/1.1 only) */
    int keys;
    int version_ok; /* exactly one Sec-WebSocket-Version, and it is 13 (else 426) */
} ws_handshake;

/* websocket.c */
extern const scope_ops ws_scope_ops;
/** Read the handshake's fields from the request's headers. */
void ws_handshake_read(const pagi_header *h, size_t n, ws_handshake *out);
/** A new ws_conn for a validated handshake and its scope (sr: the scope's
 * request, subprotocols filled in); NULL when out of memory. */
ws_conn *ws_conn_new(worker_ctx *w, const ws_carrier *car, void *owner, const scope_request *sr,
                     const ws_deflate_params *pmd, int pmd_offered);

/* websocket_io.c */
void ws_timers_init(ws_conn *ws);
/** Queue one frame (data messages compressed when negotiated). 0 or -1. */
int ws_queue_frame(ws_conn *ws, unsigned opcode, const void *data, size_t len);
/** A data frame whose payload is b's bytes, queued by reference; with
 * permessage-deflate they are compressed (copied) and no reference is kept. */
int ws_queue_frame_buf(ws_conn *ws, unsigned opcode, pagi_buf *b);
/** Queue a Close frame with code (0 = no payload) and reason. */
int ws_queue_close(ws_conn *ws, int code, const void *reason, size_t reason_len);
/** Record how the connection ended, unless already recorded. */
void ws_record_end(ws_conn *ws, int code, const char *word, const void *text, size_t text_len);
/** The 101 is queued: start frames, timers and whatever already arrived. */
void ws_opened(ws_conn *ws);
/** The app asked to close (or finished): send Close, wait up to ws_close. */
void ws_close_from_app(ws_conn *ws, int code, const char *reason, size_t reason_len);
/** Apply a websocket.keepalive (interval 0 stops; timeout 0 = no pong check). */
void ws_set_keepalive(ws_conn *ws, double interval, double timeout);
/** A message of len bytes was taken from the queue: read again if reading paused for room. */
void ws_queue_taken(ws_conn *ws, size_t len);
/** Free queued messages. */
void ws_drop_queue(ws_conn *ws);
/** Free the ws_conn once neither side needs it (and detach the scope). */
void ws_maybe_release(ws_conn *ws);

/* websocket_io.c, for the carriers */
/** New bytes are in the input. */
void ws_input(ws_conn *ws);
/** The peer is gone without (finishing) the close handshake: 1006 client_closed. */
void ws_peer_gone(ws_conn *ws);
/** A safe point after output was written: read input held back. */
void ws_flushed(ws_conn *ws);
/** Whether the transport should take more input from the peer now. */
int ws_wants_input(const ws_conn *ws);
/** The transport ends (reason NULL: normally): the scope's end, once. */
void ws_transport_closed(ws_conn *ws, const char *reason);
/** The transport lets go of ws (idempotent through owner). */
void ws_detach(ws_conn *ws);

#endif
