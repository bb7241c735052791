/*
 * scope.h - the pagi_scope object seen from the server side: creation,
 * reference counting, and the hooks the protocol drivers (http1_conn.c,
 * lifespan.c) use to feed it events and report how the exchange ended.
 *
 * Lifetime: a scope holds one reference for the connection side (dropped by
 * scope_detach) and one for the app side (dropped by pagi_scope_finish);
 * each queued callback holds one more. At zero the app's release callback
 * runs and the scope is freed: exactly one release per scope.
 */
#ifndef PAGID_SCOPE_H
#define PAGID_SCOPE_H

#include <pagi/pagi.h>

#include "common/buf.h"
#include "worker/worker_ctx.h"

struct tls_info;

/** What the protocol driver implements for a scope type. */
typedef struct scope_ops {
    /** Validate and perform a send; 0 accepted (completion queued/parked) or -1 (error set). */
    int (*send)(pagi_scope *s, const pagi_event *ev, pagi_send_cb cb, void *ud);
    /**
     * Is a receive event available now (1) or must the receive wait (0)?
     * With take, also fill ev and consume the event; bytes it points to
     * must live in scope_delivery_buf so they outlive the connection.
     */
    int (*next_event)(pagi_scope *s, pagi_event *ev, int take);
    /** The app called pagi_receive (e.g. send 100 Continue, resume reading). */
    void (*receive_wanted)(pagi_scope *s);
    /** The app finished (error may be NULL). */
    void (*finished)(pagi_scope *s, const char *error);
    /** pagi.transport: bytes queued, and whether the high mark is engaged. */
    size_t (*buffered)(const pagi_scope *s);
    int (*above_high)(const pagi_scope *s);
    /** Optional: see scope_write_now. */
    int (*write_now)(pagi_scope *s, int block);
    /**
     * timeouts.response passed before the app started its response (NULL:
     * not for this scope type). The driver answers 504 and ends the
     * exchange with reason_response_timeout; the scope has logged and
     * counted it already.
     */
    void (*response_timeout)(pagi_scope *s);
} scope_ops;

/**
 * Write the scope's queued response bytes to the client now, from inside a
 * callback that holds the loop (the PSGI host's streaming writer: a PSGI
 * app is synchronous, so its writes would otherwise wait for the app to
 * return). One non-blocking write; with block, while more than the high
 * watermark stays queued, wait in poll(2) and write again, for at most
 * min(timeouts.write, timeouts.heartbeat / 2) (a longer wait would get the
 * worker killed as stuck), then close the connection (write_timeout).
 * Returns 0, or -1 when the client is gone or the carrier cannot do it
 * (HTTP/2: its flow control needs the loop), in which case the bytes wait
 * in the buffer as for any send.
 */
int scope_write_now(pagi_scope *s, int block);

/** Request facts copied into the scope (the parser's buffers are reused). */
typedef struct scope_request {
    const char *method, *http_version, *scheme;
    pagi_str path, raw_path, query;
    const pagi_header *headers;
    size_t header_count;
    const char *client_host;
    int client_port;
    const char *server_host;
    int server_port;
    const pagi_str *subprotocols; /* websocket: offered subprotocols, in order */
    size_t subprotocol_count;
    unsigned extensions;          /* SCOPE_EXT_* advertised on this scope */
    struct tls_info *tls;         /* the TLS connection's shared facts (tls_info.h; the
                                   * scope takes a reference), NULL on cleartext */
} scope_request;

#define SCOPE_EXT_WEBSOCKET_HTTP_RESPONSE 1u /* "websocket.http.response" */

pagi_scope *scope_new(worker_ctx *w, pagi_scope_type type, const scope_ops *ops, void *proto,
                      const scope_request *req);
void scope_ref(pagi_scope *s);
void scope_unref(pagi_scope *s);
/** The protocol driver's per-scope data (the HTTP exchange, ...). */
void *scope_proto(const pagi_scope *s);
worker_ctx *scope_worker(const pagi_scope *s);
/** The head of s's list of subscriptions, kept by pubsub.c. */
struct pagi_subscription **scope_subs(pagi_scope *s);
/**
 * The convenience layer's per-scope data (pagi_easy.c): a slot of its own,
 * so it never clashes with the app's pagi_scope_set_userdata, and freed
 * however the scope ends (also when the server finishes it on the app's
 * behalf). release(data) runs once, when the scope is freed, before the
 * app's release.
 */
void scope_set_layer_data(pagi_scope *s, void *data, void (*release)(void *data));
void *scope_layer_data(const pagi_scope *s);
/**
 * The mount dispatcher matched the first prefix_len bytes of the decoded
 * path: they become root_path, the rest (or "/") becomes path. raw_path is
 * untouched.
 */
void scope_set_mount(pagi_scope *s, size_t prefix_len);
/** Start the app on this scope (app->handle), and timeouts.response for
 * its response start when the driver has a response_timeout. */
void scope_start_app(pagi_scope *s);

/** New input may satisfy a waiting receive: re-check and deliver. */
void scope_poke_receive(pagi_scope *s);
/** Is a receive waiting? */
int scope_receive_waiting(const pagi_scope *s);

/** Scope-owned storage for the bytes of the event being delivered. */
buf *scope_delivery_buf(pagi_scope *s);

/**
 * A driver's buffered request body becomes one receive event of type:
 * its bytes move into the scope's delivery buffer (a swap, no copy, so they
 * outlive the connection) and body is left empty; complete says the body
 * ends with them (ev->more = 0). HTTP/1.1 and HTTP/2 deliver bodies so.
 */
void scope_deliver_body(pagi_scope *s, buf *body, int complete, pagi_event_type type,
                        pagi_event *ev);

/** Scope-owned storage for the response header values its access log line
 * shows (access_log_response_start), whatever protocol carries it. */
buf *scope_log_resp_buf(pagi_scope *s);

/** During pagi_send_buf, the buffer whose bytes are the event's payload, if
 * p/n are exactly those bytes (a driver queueing them as they are takes a
 * reference, pagi_buf_queue); NULL in a plain pagi_send, and for bytes the
 * driver made itself (an SSE event formatted from them). */
pagi_buf *scope_send_buf(const pagi_scope *s, const void *p, size_t n);
/** Queue a send completion for the app. */
void scope_complete_send(pagi_scope *s, pagi_send_cb cb, void *ud, const char *err);
/** Record a rejected call's message; returns -1 for convenience. */
int scope_fail(pagi_scope *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/**
 * What every protocol's http send checks first: the event is one an http
 * scope sends, the response is not complete, and the exchange is still
 * there (has_exchange) and connected. Returns 1 to go on, 0 when the send
 * was the spec's no-op after a disconnect (completed already), -1 refused.
 */
int scope_http_send_gate(pagi_scope *s, const pagi_event *ev, int has_exchange, pagi_send_cb cb,
                         void *ud);

/**
 * Abnormal end, in the spec's order: is_connected false, reason set,
 * on_disconnect callbacks queued in registration order, then the waiting
 * receive (if any) gets the disconnect event. Idempotent; never after
 * scope_mark_complete.
 */
void scope_disconnect(pagi_scope *s, const char *reason);
/** Normal end: response_complete, on_complete callbacks queued. */
void scope_mark_complete(pagi_scope *s);
void scope_mark_started(pagi_scope *s);
int scope_is_connected(const pagi_scope *s);
int scope_is_finished(const pagi_scope *s);
int scope_is_complete(const pagi_scope *s);
int scope_is_started(const pagi_scope *s);
/** The connection side is done with the scope (drops its reference). */
void scope_detach(pagi_scope *s);
/* At exit: pagi_scope_finish every request scope its app never finished. */
void scope_abandon_all(worker_ctx *w);
/** At exit: free debug mode's quarantine and the pool of scope shells (handle.h). */
void scope_quarantine_free(worker_ctx *w);
/**
 * Is s a live scope? The check of every public entry (a NULL test and one
 * compare); otherwise fn's misuse is logged (handle.h) and 0 returned.
 */
int scope_live(const pagi_scope *s, const char *fn);
/**
 * A part of the server that drives s on the app's behalf (a pagi_easy
 * group member): on_finish(s, ud) runs inside pagi_scope_finish when the
 * scope is finished by anyone else, before the scope can be released, so
 * the owner lets go of it. The owner clears it (NULL) before finishing s
 * itself or handing it back. scope_owner gives ud, or NULL when none.
 */
/**
 * Log a misuse of fn on the live scope s, with its request: each time in
 * debug mode, else once per fn (handle.h). fmt names what was wrong.
 */
void scope_misuse_call(const pagi_scope *s, const char *fn, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void scope_set_owner(pagi_scope *s, void (*on_finish)(pagi_scope *s, void *ud), void *ud);
void *scope_owner(const pagi_scope *s);
/**
 * Is a handler still running whose exchange completed normally (work after
 * the response: it was never told of a disconnect)? The drain's short grace
 * is only for handlers whose client is gone.
 */
int scope_any_past_response(const worker_ctx *w);
/**
 * Log what a stop waits for: how many request scopes are not released, and
 * the first few the app has not finished, by method and path (what begins
 * the line, e.g. "shutdown waits for").
 */
void scope_log_unfinished(const worker_ctx *w, const char *what);

/**
 * The worker started draining: queue every unfinished request scope's
 * server-drain callbacks (once; later registrations are queued at once).
 */
void scope_notice_server_drain(worker_ctx *w);

/** Transport watermarks crossed (edge-triggered; hysteresis kept by caller). */
void scope_notify_high_water(pagi_scope *s);
void scope_notify_drain(pagi_scope *s);

#endif
