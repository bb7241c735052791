/*
 * conn.h - one client connection: its socket, input buffer, output queue,
 * watchers and its single timer, driven through an explicit state machine
 * (conn_set_state is the one transition function). Whatever ends a
 * connection goes through conn_close, the one release path.
 *
 * conn.c moves bytes and knows no protocol: the protocol speaking on the
 * connection (conn_proto: HTTP/1.1, WebSocket, HTTP/2) gives them meaning
 * and owns its state behind c->proto_state.
 */
#ifndef PAGID_CONN_H
#define PAGID_CONN_H

#include <ev.h>
#include <pagi/pagi.h>
#include <sys/socket.h>

#include "common/buf.h"
#include "outq.h"
#include "worker/worker_ctx.h"

typedef enum conn_state {
    CONN_HANDSHAKE,    /* TLS handshake in progress (TLS listeners only) */
    CONN_WAIT_REQUEST, /* nothing of the next request read yet (idle / keep-alive) */
    CONN_READ_HEAD,    /* part of a request head read */
    CONN_ACTIVE,       /* a request is being served */
    CONN_CLOSING,      /* writing the last bytes, then close */
    CONN_LINGER, /* write side shut; discarding input for a moment so no RST eats the answer */
    CONN_CLOSED  /* released; memory freed at the next safe point */
} conn_state;

typedef enum conn_timeout {
    TMO_NONE,
    TMO_IDLE,
    TMO_KEEPALIVE,
    TMO_HEADER,
    TMO_REQUEST,
    TMO_WRITE,
    TMO_LINGER,
    TMO_HANDSHAKE
} conn_timeout;

/*
 * Calls that may close the connection say whether it is still there, and
 * the compiler makes every caller look (CONN_MUST_CHECK: warn_unused_result,
 * an error under -Werror; a (void) cast does not silence it). After
 * CONN_GONE the connection is closed: its protocol state is released, its
 * memory stays readable until the safe point; the caller touches neither
 * and returns CONN_GONE (or stops) in turn. docs/ARCHITECTURE.md,
 * "Calls that may close a connection", has the rule.
 */
typedef enum conn_fate { CONN_ALIVE, CONN_GONE } conn_fate;
#define CONN_MUST_CHECK __attribute__((warn_unused_result))

/* What an alternative protocol says when asked to take a connection over. */
typedef enum conn_claim {
    CONN_CLAIM_DECLINED,  /* not this protocol: the connection keeps its own */
    CONN_CLAIM_TAKEN,     /* c->proto is the claimant now */
    CONN_CLAIM_UNDECIDED, /* too few bytes to tell: ask again with more */
    CONN_CLAIM_FAILED     /* it is this protocol, but it could not start (out of memory) */
} conn_claim;

/* When the claim is asked: the TLS handshake finished (ALPN chose), or
 * the first bytes of a cleartext connection came (a preface). */
typedef enum conn_claim_point { CONN_CLAIM_AT_HANDSHAKE, CONN_CLAIM_AT_INPUT } conn_claim_point;

/*
 * The protocol spoken on a connection. HTTP/1.1 is where every connection
 * starts; a WebSocket upgrade switches c->proto after the 101, and a
 * connection's alt_proto (HTTP/2) may claim it before its first request.
 */
typedef struct conn_proto {
    const char *name;
    /* Bytes are in c->in. */
    conn_fate (*on_input)(conn *c) CONN_MUST_CHECK;
    /* The peer closed its side. */
    conn_fate (*on_eof)(conn *c) CONN_MUST_CHECK;
    /* Output made progress. */
    conn_fate (*on_written)(conn *c) CONN_MUST_CHECK;
    int (*wants_read)(const conn *c);              /* flow control, while active */
    int (*waiting_for_input)(const conn *c);       /* the request timeout applies */
    void (*on_close)(conn *c, const char *reason); /* end whatever is in flight */
    void (*on_header_timeout)(conn *c);
    /* timeouts.request passed while waiting_for_input (NULL: the connection
     * closes with client_timeout; HTTP/2 resets only the streams waiting). */
    void (*on_request_timeout)(conn *c);
    /* Cleartext HTTP came to a TLS port: the connection is cleartext now;
     * answer (400) and close. NULL: just close. */
    void (*on_plain_http)(conn *c);
    /* Our last bytes are written: may the peer still be sending what we
     * answered (then the connection lingers, so no RST eats the answer)? */
    int (*peer_may_send)(const conn *c);
    /* The worker started draining (NULL: the drain's usual course): HTTP/2
     * says GOAWAY so the client opens no more streams. */
    void (*on_drain)(conn *c);
    /* timeouts.idle or timeouts.keepalive passed with nothing in flight
     * (NULL: close with reason). HTTP/2 says GOAWAY first, so the client
     * knows the close lost no request of its. */
    void (*on_idle_timeout)(conn *c, const char *reason);
    /* Set up the protocol's state on a new connection (NULL: nothing to do). */
    int (*init)(conn *c);
    /* Free every byte of protocol state. conn_close calls it exactly once,
     * after on_close and after the socket is closed; nothing runs after it. */
    void (*release)(conn *c);
    /* As a connection's alt_proto: take the connection over at point?
     * conn.c asks after the TLS handshake, and on cleartext at each read
     * until the answer is not CONN_CLAIM_UNDECIDED; bytes are given to no
     * protocol while it is undecided. */
    conn_claim (*claim)(conn *c, conn_claim_point point);
    /* For the access log line of a request refused before any scope: the
     * request line read so far (1), or 0 (NULL: never any). */
    int (*request_line)(const conn *c, pagi_str *method, pagi_str *target);
} conn_proto;

struct tls_conn;
struct tls_server;

struct conn {
    worker_ctx *w;
    conn *prev, *next; /* worker's list of live connections */
    conn *flush_next;  /* worker's flush list */
    int in_flush_list;
    int fd;
    conn_state state;
    unsigned served; /* responses completed on this connection */
    ev_io rio, wio;
    ev_timer timer;
    conn_timeout tmo;
    double deadline; /* when tmo fires (absolute, ev_now based) */
    double timer_at; /* when the running timer fires: <= deadline (moved lazily, conn.c) */
    int reading, write_blocked, eof;
    /* A TLS handshake step or read waits for writability (OpenSSL must send
     * before it can go on): the write watcher serves it as well. */
    int tls_want_write;
    int in_lent; /* c->in is the worker's read buffer, lent for this read callback */
    buf in;      /* unconsumed input only: empty means no memory (see conn_on_read) */
    outq out;
    const char *server_host; /* owned by the config */
    int server_port;
    const conn_proto *proto;
    int status_listener; /* accepted on status.listen: every request gets the metrics app */
    /* The peer in binary; conn_peer_host formats it when someone asks. */
    unsigned char peer_addr[16];
    unsigned short peer_family; /* AF_INET, AF_INET6, or 0 (unix socket) */
    unsigned short peer_port;
    struct tls_conn *tls; /* the TLS session on a TLS listener (owned), else NULL */
    /* The protocol's own state (HTTP/1.1's h1_conn, HTTP/2's session), owned
     * by c->proto: made by it when it needs it, freed by its release (at the
     * latest in conn_close); NULL when it holds none. */
    void *proto_state;
    /* A protocol that may claim the connection before its first request
     * (HTTP/2 on a listener that allows it: ALPN h2, or an h2c preface);
     * NULL once it declined or took it. */
    const conn_proto *alt_proto;
};

/** CONN_GONE once conn_close ran on c (it may have, inside the last call). */
static inline conn_fate conn_fate_of(const conn *c)
{
    return c->state == CONN_CLOSED ? CONN_GONE : CONN_ALIVE;
}

/** Take an accepted socket speaking proto first, through TLS when tls is
 * set (the handshake comes first); returns NULL (socket closed) on failure. */
conn *conn_new(worker_ctx *w, int fd, const struct sockaddr *peer, const char *server_host,
               int server_port, const conn_proto *proto, const struct tls_server *tls);
/** Tell every live connection's protocol that the worker drains. */
void conn_notice_drain(worker_ctx *w);
/**
 * The peer's address as text ("127.0.0.1", "::1"), "" on a unix socket.
 * The string lives in the worker and is valid until the next call.
 */
const char *conn_peer_host(const conn *c);
/** The one transition function; also re-arms the timer and read interest. */
void conn_set_state(conn *c, conn_state s);
/** Recompute timer and read interest after the protocol's needs changed. */
void conn_refresh(conn *c);
/** Queue the connection for writing at the next safe point. */
void conn_schedule_flush(conn *c);
/** Write now; may complete responses and start pipelined requests, or close. */
CONN_MUST_CHECK conn_fate conn_flush(conn *c);
/** Inside on_close: one best-effort non-blocking write of the queued
 * output (no callbacks, errors ignored), and the input waiting read away:
 * last words before the close. */
void conn_write_last(conn *c);
/**
 * End the connection. reason NULL is a normal close; otherwise the active
 * exchange (if any) ends abnormally with that reason word. Idempotent.
 */
void conn_close(conn *c, const char *reason);
/**
 * After the peer's FIN: has its TCP reset the connection since (it closed
 * for good and answered our later bytes with RST), rather than merely
 * half-closed? Looks without reading or clearing anything.
 */
int conn_peer_reset(const conn *c);
/** Close after the queued output is written (server-initiated, lingering). */
void conn_close_after_write(conn *c);
/** Worker hook: flush every connection on the flush list. */
void conn_flush_all(worker_ctx *w);

#endif
