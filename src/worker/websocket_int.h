/*
 * websocket_int.h - the state shared by websocket.c (handshake, the scope's
 * send/receive side) and websocket_io.c (the connection protocol: frames,
 * close handshake, timers). Nothing outside those two files includes it.
 *
 * Ownership: a ws_conn is created with the websocket scope and is the
 * scope's proto pointer. The connection side (c->ws) lets go of it in
 * ws_conn_free (conn_close); the app side lets go when it finished or took
 * the websocket.disconnect. The last one frees it and detaches the scope, so
 * messages that arrived before the end are still delivered, then the
 * disconnect with its code and reason, even after the TCP connection closed.
 */
#ifndef PAGID_WEBSOCKET_INT_H
#define PAGID_WEBSOCKET_INT_H

#include <ev.h>

#include "conn.h"
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
    WS_CLOSING,    /* handshake over or connection failed: last bytes out, then TCP close */
    WS_GONE        /* the connection is closed; only the app side is left */
} ws_state;

/* One complete message waiting for the app. */
typedef struct ws_msg {
    struct ws_msg *next;
    int is_text;
    size_t len;
    char data[];
} ws_msg;

typedef struct ws_conn {
    conn *c;       /* NULL once the connection is closed */
    pagi_scope *s; /* NULL once released */
    ws_state state;
    int connect_delivered;
    int app_finished;
    int input_pending; /* frames wait in c->in: read them at the next flush (not in an app call) */
    int paused;        /* the queue is full but a receive is pending: the next message waits */
    int stalled;       /* paused on the byte bound: the timer waits timeouts.write for a take */
    char accept_key[29];

    /* permessage-deflate: what the client offered that we can accept, and the streams */
    int pmd_offered;
    ws_deflate_params pmd_params;
    ws_deflate *pmd;

    h1_response_plan plan; /* denial response framing */

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
} ws_conn;

/* websocket.c */
extern const scope_ops ws_scope_ops;

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

#endif
