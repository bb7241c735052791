/*
 * pagi.h - the C form of the PAGI application interface (see pagi(3)).
 *
 * An application is a pagi_app table. The server calls app->handle once per
 * scope (an HTTP request, a WebSocket session, an SSE stream, the worker's
 * lifespan). The app pulls events with pagi_receive(), pushes events with
 * pagi_send(), and says it is done with pagi_scope_finish(). Every callback
 * the server makes runs from the worker's run queue, never inside the
 * interface call that caused it, so callbacks never nest.
 *
 * Nothing in this header exposes a server-internal type: every object is an
 * opaque handle that is valid until the scope's release callback runs.
 * A handle used after its release (a scope, subscription or buffer) is
 * recognised and the call refused (-1, NULL or a no-op) with a message
 * naming the call, never a use-after-free in the server: see HANDLES in
 * pagi(3) for how long that holds.
 */
#ifndef PAGI_PAGI_H
#define PAGI_PAGI_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#define PAGI_PRINTF_LIKE(fmt, args) __attribute__((format(printf, fmt, args)))
/* The result is a resource (dropping it leaks) or a must-check outcome. */
#define PAGI_WARN_UNUSED __attribute__((warn_unused_result))
#else
#define PAGI_PRINTF_LIKE(fmt, args)
#define PAGI_WARN_UNUSED
#endif
/*
 * Pointer parameters the contract requires non-NULL: an app passing a
 * literal NULL gets a compile-time warning (-Wnonnull). The server still
 * refuses a NULL at run time (-1 and a message, see HANDLES in pagi(3)): it
 * is built with PAGI_SERVER_BUILD, where the attribute is left out, because
 * with it the compiler may delete those very NULL checks.
 */
#if (defined(__GNUC__) || defined(__clang__)) && !defined(PAGI_SERVER_BUILD)
#define PAGI_NONNULL(...) __attribute__((nonnull(__VA_ARGS__)))
#else
#define PAGI_NONNULL(...)
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*
 * ABI version, major.minor (see "Versioning" in pagi(3)). A minor adds
 * functions, event types or fields carved out of the reserved space at the
 * end of pagi_event and pagi_app, never changing a struct's size or the
 * meaning of a zero field (pagi_tls_info, which the server fills, grows the
 * same way); anything else takes a new major. The server loads
 * a module of its own major whose minor is at most its own, and refuses any
 * other, naming both versions. pagi_app.abi_version stores PAGI_ABI_VERSION.
 */
#define PAGI_ABI(major, minor) (((major) << 16) | (minor))
#define PAGI_ABI_MAJOR 2
/* 2.2: the tls extension (pagi_scope_tls); 2.3: publish/subscribe;
 * 2.4: pagi_easy's pagi_group_join_headers and pagi_read_body_opts;
 * 2.5: pagi_easy's path router (pagi_router_*, pagi_route_param). */
#define PAGI_ABI_MINOR 5
#define PAGI_ABI_VERSION PAGI_ABI(PAGI_ABI_MAJOR, PAGI_ABI_MINOR)
/** The parts of a PAGI_ABI() value (ABI 1 stored a bare 1: major 0 here). */
#define PAGI_ABI_MAJOR_OF(v) (((unsigned)(v) >> 16) & 0xffffu)
#define PAGI_ABI_MINOR_OF(v) ((unsigned)(v) & 0xffffu)
/** The PAGI core and Www spec version this server implements. */
#define PAGI_SPEC_VERSION "0.3"

/** Opaque handles. */
typedef struct pagi_scope pagi_scope;
typedef struct pagi_loop pagi_loop;
typedef struct pagi_timer pagi_timer;
typedef struct pagi_io pagi_io;

/** A byte string: not NUL-terminated unless said otherwise. */
typedef struct pagi_str {
    const char *ptr;
    size_t len;
} pagi_str;

/**
 * A pagi_str of a string literal, its length from sizeof (no strlen, no
 * miscounted length): PAGI_STR("content-type"). Only for literals: the ""
 * before lit refuses anything else at compile time. PAGI_STR_INIT is the
 * brace form for static initializers ({PAGI_STR_INIT("a"), ...}).
 */
#define PAGI_STR_INIT(lit) {"" lit, sizeof(lit) - 1}
#ifdef __cplusplus
#define PAGI_STR(lit) (pagi_str PAGI_STR_INIT(lit))
#else
#define PAGI_STR(lit) ((pagi_str)PAGI_STR_INIT(lit))
#endif

/**
 * One header. Names the server delivers are lower case. Names the app sends
 * go out lower-cased on every protocol (HTTP/2 requires it, and HTTP/1.1
 * names are case-insensitive): "X-Upper" is written "x-upper".
 */
typedef struct pagi_header {
    pagi_str name;
    pagi_str value;
} pagi_header;

typedef enum pagi_scope_type {
    PAGI_SCOPE_HTTP = 1,
    PAGI_SCOPE_WEBSOCKET,
    PAGI_SCOPE_SSE,
    PAGI_SCOPE_LIFESPAN
} pagi_scope_type;

/** Event types, in the spec's names (pagi_event_type_name gives the string). */
typedef enum pagi_event_type {
    PAGI_EV_NONE = 0,
    /* http */
    PAGI_EV_HTTP_REQUEST,          /* receive: body, more */
    PAGI_EV_HTTP_DISCONNECT,       /* receive */
    PAGI_EV_HTTP_RESPONSE_START,   /* send: status, headers, trailers */
    PAGI_EV_HTTP_RESPONSE_BODY,    /* send: body+more | file | fd (+offset, length) */
    PAGI_EV_HTTP_RESPONSE_TRAILERS,/* send: headers */
    /* websocket */
    PAGI_EV_WEBSOCKET_CONNECT,     /* receive */
    PAGI_EV_WEBSOCKET_ACCEPT,      /* send: subprotocol, headers */
    PAGI_EV_WEBSOCKET_RECEIVE,     /* receive: bytes | text */
    PAGI_EV_WEBSOCKET_SEND,        /* send: bytes | text */
    PAGI_EV_WEBSOCKET_KEEPALIVE,   /* send: interval, timeout */
    PAGI_EV_WEBSOCKET_CLOSE,       /* send: code, reason */
    PAGI_EV_WEBSOCKET_DISCONNECT,  /* receive: code, reason */
    PAGI_EV_WEBSOCKET_HTTP_RESPONSE_START, /* send (extension) */
    PAGI_EV_WEBSOCKET_HTTP_RESPONSE_BODY,  /* send (extension) */
    /* sse */
    PAGI_EV_SSE_REQUEST,           /* receive: body, more */
    PAGI_EV_SSE_START,             /* send: status, headers */
    PAGI_EV_SSE_SEND,              /* send: data, event, id, retry */
    PAGI_EV_SSE_COMMENT,           /* send: comment */
    PAGI_EV_SSE_KEEPALIVE,         /* send: interval, comment */
    PAGI_EV_SSE_CLOSE,             /* send */
    PAGI_EV_SSE_DISCONNECT,        /* receive: reason */
    PAGI_EV_SSE_HTTP_RESPONSE_START, /* send: decline */
    PAGI_EV_SSE_HTTP_RESPONSE_BODY,  /* send: decline body */
    /* lifespan */
    PAGI_EV_LIFESPAN_STARTUP,          /* receive */
    PAGI_EV_LIFESPAN_STARTUP_COMPLETE, /* send */
    PAGI_EV_LIFESPAN_STARTUP_FAILED,   /* send: message */
    PAGI_EV_LIFESPAN_SHUTDOWN,         /* receive */
    PAGI_EV_LIFESPAN_SHUTDOWN_COMPLETE,/* send */
    PAGI_EV_LIFESPAN_SHUTDOWN_FAILED,  /* send: message */
    /* Not an event: grows when a minor adds event types, so an array sized
     * by it is sized for the header built against, not the server's. */
    PAGI_EV__COUNT
} pagi_event_type;

/**
 * An event, received or sent. Only the fields of the event's type are
 * meaningful, and a zero field always means "not set": there are no sentinel
 * values, so `pagi_event ev = {0}` plus `ev.type` (`= {}` in C++),
 * `{.type = T, ...}`, memset, PAGI_EVENT_INIT(T) and pagi_event_init(T) all
 * make a correct event.
 * An fd body needs use_fd = 1 (fd 0 is then really stdin); length 0 means "to
 * EOF"; an SSE retry: line needs has_retry = 1. Events the server delivers
 * are valid only during the receive callback; events the app sends are
 * copied before pagi_send() returns.
 */
typedef struct pagi_event {
    pagi_event_type type;
    int status;                 /* response/decline start */
    const pagi_header *headers; /* start, trailers, accept */
    size_t header_count;
    int trailers;               /* http.response.start: 1 = trailers follow */
    pagi_str body;              /* http.request, response body, sse.request */
    int more;                   /* 1 = more body follows */
    const char *file;           /* response body from a file path (NUL-terminated); NULL = none */
    int use_fd;                 /* 1 = response body from the open fd below; 0 = no fd */
    int fd;                     /* with use_fd: the fd (duplicated; the app keeps its own) */
    int64_t offset;             /* file/fd: start offset */
    int64_t length;             /* file/fd: bytes to send; 0 = to EOF */
    pagi_str bytes;             /* websocket binary message */
    pagi_str text;              /* websocket text message (UTF-8) */
    int is_text;                /* websocket receive/send: which of the two */
    int code;                   /* websocket close/disconnect code */
    pagi_str reason;            /* websocket close reason; disconnect reason word */
    pagi_str subprotocol;       /* websocket.accept */
    pagi_str data;              /* sse.send */
    pagi_str event;             /* sse.send: event name (no newline) */
    pagi_str id;                /* sse.send: id (no newline) */
    int has_retry;              /* sse.send: 1 = write a retry: line; 0 = none */
    int64_t retry;              /* sse.send, with has_retry: milliseconds (>= 0) */
    pagi_str comment;           /* sse.comment, sse.keepalive */
    double interval;            /* keepalive interval seconds; 0 = stop */
    double timeout;             /* websocket.keepalive pong timeout */
    pagi_str message;           /* lifespan *.failed */
    /* Must be zero. Later minors take their fields from here, so the size
     * stays the same and an older module's zeros mean "not set". */
    uint64_t reserved[8];
} pagi_event;

/** An event of type t with every field "not set": usable from C and C++. */
static inline pagi_event pagi_event_init(pagi_event_type t)
{
    pagi_event e;
    memset(&e, 0, sizeof e);
    e.type = t;
    return e;
}

#ifdef __cplusplus
/* C++ before C++20 has no designated initializers. */
#define PAGI_EVENT_INIT(t) pagi_event_init(t)
#else
#define PAGI_EVENT_INIT(t) ((pagi_event){.type = (t)})
#endif

/** The spec's name of an event type ("http.response.start"), or NULL. */
const char *pagi_event_type_name(pagi_event_type type);

/* ------------------------------------------------------------------ */
/* Scope                                                               */
/* ------------------------------------------------------------------ */

pagi_scope_type pagi_scope_type_of(const pagi_scope *s);
/** "http", "websocket", "sse" or "lifespan". */
const char *pagi_scope_type_name(const pagi_scope *s);
/** "1.0", "1.1" or "2" (NUL-terminated), as the spec's http_version. */
const char *pagi_scope_http_version(const pagi_scope *s);
/** Upper-case method, NUL-terminated. */
const char *pagi_scope_method(const pagi_scope *s);
/** "http" (or "https", "ws", "wss"). */
const char *pagi_scope_scheme(const pagi_scope *s);
/** Percent-decoded path, the mount prefix included (see root_path); a %00 is refused with 400. */
pagi_str pagi_scope_path(const pagi_scope *s);
/** Path bytes exactly as the client sent them. */
pagi_str pagi_scope_raw_path(const pagi_scope *s);
/** Query string without the '?', still percent-encoded. */
pagi_str pagi_scope_query_string(const pagi_scope *s);
/** Mount path ("" by default): the matched prefix, which path still starts with. */
pagi_str pagi_scope_root_path(const pagi_scope *s);
/** Request headers, names lower-cased, Cookie headers merged into one. */
const pagi_header *pagi_scope_headers(const pagi_scope *s, size_t *count);
/** First header with that name, compared case-insensitively; 1 when found, else 0 (also for NULL name). */
int pagi_scope_header(const pagi_scope *s, const char *name, pagi_str *value) PAGI_NONNULL(2);
/** Client address ("127.0.0.1", port); host is NULL when unknown. */
const char *pagi_scope_client(const pagi_scope *s, int *port);
/** Server address; port is -1 for a unix socket (host is then the path). */
const char *pagi_scope_server(const pagi_scope *s, int *port);
/** WebSocket subprotocols offered by the client, in order. */
size_t pagi_scope_subprotocol_count(const pagi_scope *s);
pagi_str pagi_scope_subprotocol(const pagi_scope *s, size_t i);
/** 1 if the server advertises that extension on s ("websocket.http.response", "tls"). */
int pagi_scope_has_extension(const pagi_scope *s, const char *name);
/** For lifespan scopes: worker number (1..N) and whether it runs under a master. */
int pagi_scope_worker_num(const pagi_scope *s, int *is_worker);
/** The worker's event loop, for the loop services below. */
pagi_loop *pagi_scope_loop(const pagi_scope *s);

/**
 * Lifespan state: a namespace of key -> pointer. The lifespan scope owns the
 * worker's table; every later request scope receives a shallow copy (keys
 * private to the scope, pointed-to values shared). Keys are copied. Returns
 * 0, or -1 on allocation failure.
 */
int pagi_state_set(pagi_scope *s, const char *key, void *value);
void *pagi_state_get(const pagi_scope *s, const char *key);

/**
 * Per-scope application data and its release function. release runs exactly
 * once, after both the server side (connection gone) and the app side
 * (pagi_scope_finish) are done with the scope; the handle is invalid after.
 */
void pagi_scope_set_userdata(pagi_scope *s, void *data,
                             void (*release)(pagi_scope *s, void *data));
void *pagi_scope_userdata(const pagi_scope *s);

/* ------------------------------------------------------------------ */
/* Events                                                              */
/* ------------------------------------------------------------------ */

typedef void (*pagi_receive_cb)(pagi_scope *s, const pagi_event *ev, void *ud);
/** err is NULL on success, else a short message; runs from the run queue. */
typedef void (*pagi_send_cb)(pagi_scope *s, const char *err, void *ud);

/**
 * Ask for the next event. Exactly one event is delivered per call, through
 * cb, never before pagi_receive returns. Returns 0, or -1 (with
 * pagi_scope_error) if a receive is already pending or the scope finished.
 */
int pagi_receive(pagi_scope *s, pagi_receive_cb cb, void *ud);

/**
 * Send an event. The event is validated and its bytes copied before return.
 * Returns 0 when accepted: cb (may be NULL) then runs once, with err NULL when
 * the bytes are below the high watermark (at once) or once the buffer drains,
 * or with an error (file unreadable, ...). Returns -1 when rejected (unknown
 * type, wrong order, CR/LF/NUL in a header, newline in an SSE id/event, ...):
 * nothing is written, cb never runs, pagi_scope_error() says why.
 * After a disconnect a send is a no-op that returns 0 and completes cb.
 */
int pagi_send(pagi_scope *s, const pagi_event *ev, pagi_send_cb cb, void *ud);

/** The message of the last rejected call on this scope (never NULL). */
const char *pagi_scope_error(const pagi_scope *s);

/**
 * The app's handler for this scope is done: error NULL for normal
 * completion (the spec's Future resolved), or a message (Future failed).
 * The server then applies the 500 backstop, finishes the stream or closes.
 * Call exactly once; no event call is valid on the scope afterwards.
 */
void pagi_scope_finish(pagi_scope *s, const char *error);

/* ------------------------------------------------------------------ */
/* Zero-copy sends: buffers the server borrows instead of copying      */
/* ------------------------------------------------------------------ */

/**
 * A reference-counted view of bytes the app owns. pagi_buf_wrap makes one
 * with one reference (the caller's); free_fn(ptr, ud) runs exactly once, when
 * the last reference is dropped (free_fn may be NULL for static bytes).
 * pagi_send_buf takes its own reference while the bytes are queued, so one
 * buffer can be sent to many scopes at once (a broadcast holds the bytes
 * once) and the caller may drop its reference right after the call. The
 * bytes must not change while any reference exists. free_fn runs inside the
 * server (while writing, or when a connection ends): it may free memory and
 * call pagi_buf_unref, nothing else of this API. Not thread-safe: use a
 * buffer only from the worker's loop thread. pagi_buf_wrap returns NULL when
 * out of memory (free_fn is then not called: ptr stays the caller's).
 */
typedef struct pagi_buf pagi_buf;
typedef void (*pagi_buf_free_fn)(void *ptr, void *ud);

pagi_buf *pagi_buf_wrap(const void *ptr, size_t len, pagi_buf_free_fn free_fn, void *ud)
    PAGI_WARN_UNUSED;
/** Add a reference; returns b (NULL, logged, for a released buffer). */
pagi_buf *pagi_buf_ref(pagi_buf *b);
/**
 * Drop a reference (NULL is ignored); the last one runs free_fn. One unref
 * too many is refused and logged ("pagi_buf_unref: buffer 0x... was
 * released"), never a use-after-free (HANDLES).
 */
void pagi_buf_unref(pagi_buf *b);
const void *pagi_buf_data(const pagi_buf *b);
size_t pagi_buf_len(const pagi_buf *b);

/**
 * pagi_send with b's bytes as the event's payload: body for
 * http.response.body and *.http.response.body, text (is_text = 1) or bytes
 * for websocket.send, data for sse.send; ev's own payload fields are ignored.
 * Any other event type is rejected. Returns 0 when accepted, as pagi_send:
 * for http.response.body, sse.http.response.body and an uncompressed
 * websocket.send the server then holds its own reference to b until the
 * bytes are written or the connection ends (any way: completed, error,
 * client gone, worker stopping). Otherwise the bytes are copied (or dropped)
 * during the call and no reference is kept: sse.send (data lines are
 * formatted), websocket.send with permessage-deflate (compressed),
 * websocket.http.response.body, a HEAD body, a send after a disconnect. Returns -1 when rejected (as
 * pagi_send): no reference is taken. Either way the caller's reference is
 * untouched: it drops it with pagi_buf_unref when done with it.
 */
int pagi_send_buf(pagi_scope *s, const pagi_event *ev, pagi_buf *b, pagi_send_cb cb, void *ud);

/* ------------------------------------------------------------------ */
/* pagi.connection (http scopes)                                       */
/* ------------------------------------------------------------------ */

typedef void (*pagi_disconnect_cb)(pagi_scope *s, const char *reason, void *ud);
typedef void (*pagi_notify_cb)(pagi_scope *s, void *ud);

int pagi_conn_is_connected(const pagi_scope *s);
/** Abnormal-end reason word ("client_closed", ...), or NULL. */
const char *pagi_conn_disconnect_reason(const pagi_scope *s);
/** Register callbacks; a late registration after the fact runs (from the run queue). */
int pagi_conn_on_disconnect(pagi_scope *s, pagi_disconnect_cb cb, void *ud);
int pagi_conn_on_complete(pagi_scope *s, pagi_notify_cb cb, void *ud);
int pagi_conn_response_started(const pagi_scope *s);
int pagi_conn_response_complete(const pagi_scope *s);

/* ------------------------------------------------------------------ */
/* pagi.transport (http, websocket, sse)                               */
/* ------------------------------------------------------------------ */

size_t pagi_transport_buffered_amount(const pagi_scope *s);
size_t pagi_transport_high_water_mark(const pagi_scope *s);
size_t pagi_transport_low_water_mark(const pagi_scope *s);
/** Edge-triggered, hysteresis; on_high_water runs at once (queued) if already high. */
int pagi_transport_on_high_water(pagi_scope *s, pagi_notify_cb cb, void *ud);
int pagi_transport_on_drain(pagi_scope *s, pagi_notify_cb cb, void *ud);

/* ------------------------------------------------------------------ */
/* Server drain notice, cancelling a receive                           */
/* ------------------------------------------------------------------ */

/**
 * The worker serving s has started draining (pagid stop or SIGTERM, a
 * reload's old generation, a max_requests recycle): it accepts nothing new
 * and waits up to timeouts.shutdown for open scopes to end. A long-lived
 * scope (websocket, sse, a long poll) can end at once instead: send a
 * websocket.close with code 1001, a final SSE event, a response. cb runs
 * once, from the run queue, when the drain begins; registered after that,
 * it is queued at once. Not run for a scope the app already finished.
 * Any request scope (http, websocket, sse); -1 for lifespan (which gets
 * lifespan.shutdown) or a NULL callback. Unrelated to
 * pagi_transport_on_drain (the send buffer emptying).
 */
int pagi_scope_on_server_drain(pagi_scope *s, pagi_notify_cb cb, void *ud);
/** 1 once the worker serving s has started draining, else 0. */
int pagi_server_draining(const pagi_scope *s);

/**
 * Withdraw the pending pagi_receive: its callback will not run. An event
 * already waiting for it is not lost: it stays for the next pagi_receive.
 * Afterwards a new pagi_receive, and pagi_scope_finish, are allowed.
 * Returns 0, or -1 (pagi_scope_error) when no receive was pending.
 */
int pagi_receive_cancel(pagi_scope *s);

/* ------------------------------------------------------------------ */
/* Loop services                                                       */
/* ------------------------------------------------------------------ */

typedef void (*pagi_timer_cb)(pagi_timer *t, void *ud);
typedef void (*pagi_io_cb)(pagi_io *w, int fd, int events, void *ud);
typedef void (*pagi_defer_cb)(void *ud);

#define PAGI_IO_READ 1
#define PAGI_IO_WRITE 2

/** One-shot (repeat 0) or repeating timer, seconds. Stop it to free it. */
pagi_timer *pagi_timer_start(pagi_loop *l, double after, double repeat,
                             pagi_timer_cb cb, void *ud);
/** Stop and free; safe inside its own callback. */
void pagi_timer_stop(pagi_timer *t);
/** Watch fd for PAGI_IO_READ and/or PAGI_IO_WRITE until stopped. */
pagi_io *pagi_io_watch(pagi_loop *l, int fd, int events, pagi_io_cb cb, void *ud)
    PAGI_WARN_UNUSED;
void pagi_io_stop(pagi_io *w);
/** Run cb from the run queue at the next safe point. Returns 0 or -1. */
int pagi_defer(pagi_loop *l, pagi_defer_cb cb, void *ud);
/** Seconds since an arbitrary origin, cached once per loop iteration. */
double pagi_loop_now(const pagi_loop *l);
/** pagi_log() levels (lines below error_log.level in pagid.yaml are dropped). */
enum { PAGI_LOG_ERROR = 0, PAGI_LOG_WARN = 1, PAGI_LOG_INFO = 2, PAGI_LOG_DEBUG = 3 };
/** Log a line to the server's error log at a PAGI_LOG_* level. */
void pagi_log(pagi_loop *l, int level, const char *fmt, ...) PAGI_PRINTF_LIKE(3, 4);

/* ------------------------------------------------------------------ */
/* Publish/subscribe across workers (ABI 2.3)                          */
/* ------------------------------------------------------------------ */

typedef struct pagi_subscription pagi_subscription;
/**
 * A message on a channel the subscription listens to, from the run queue.
 * data is valid during the call only. The callback may unsubscribe (any
 * subscription), publish, and send on its scope.
 */
typedef void (*pagi_message_cb)(pagi_subscription *sub, pagi_str channel, const void *data,
                                size_t len, void *ud);

/** Longest channel name, bytes; the largest message, bytes. */
#define PAGI_CHANNEL_MAX 255
#define PAGI_MESSAGE_MAX (1 << 20)

/**
 * Subscribe to channel (1..PAGI_CHANNEL_MAX bytes, NUL-terminated): cb runs
 * for every message published on it, by any worker of this pagid, from now
 * on, until pagi_unsubscribe or until s is released (the subscription dies
 * with its scope; one made with the lifespan scope lives as long as the
 * app instance). Messages from one publisher arrive in the order published.
 * NULL (pagi_scope_error) on a bad channel, a NULL cb, a finished scope,
 * or out of memory.
 */
pagi_subscription *pagi_subscribe(pagi_scope *s, const char *channel, pagi_message_cb cb,
                                  void *ud) PAGI_NONNULL(2, 3);
/**
 * End sub now: its callback will not run again, pending messages are
 * dropped. In s's release callback a subscription of s is already ended
 * (no message reaches it there) but still a valid handle: unsubscribing it
 * there is a no-op, so a release callback may unsubscribe what it owns.
 * After that callback returns, sub is released: a call on it is refused and
 * logged (HANDLES), as is a second pagi_unsubscribe.
 */
void pagi_unsubscribe(pagi_subscription *sub);

/** What a subscription does when more than max_pending messages wait for its callback. */
typedef enum pagi_sub_policy {
    PAGI_SUB_DROP_OLDEST = 0, /* the oldest waiting message goes (counted); the default */
    PAGI_SUB_CONFLATE = 1,    /* only the latest message is kept (the rest counted) */
} pagi_sub_policy;
/** Set sub's policy and bound (max_pending >= 1; the default is 1024). 0 or -1. */
int pagi_subscription_set_policy(pagi_subscription *sub, pagi_sub_policy policy,
                                 size_t max_pending);
/** Messages sub dropped: under its policy, plus what the app counted below. */
unsigned long long pagi_subscription_dropped(const pagi_subscription *sub);
/**
 * The app dropped n messages of sub itself (a client whose output is not
 * draining): counted with sub's own drops and in the server's metrics.
 */
void pagi_subscription_count_dropped(pagi_subscription *sub, unsigned n);

/**
 * Publish len bytes (at most PAGI_MESSAGE_MAX) to channel: every
 * subscriber in this worker (after this call returns, from the run queue)
 * and in every other worker of this pagid receives it once. Returns 0, or
 * -1 (pagi_scope_error) on a bad channel or size, or out of memory. A
 * message that cannot be queued towards the other workers (the channel to
 * the master is full) is dropped and counted, not refused.
 */
int pagi_publish(pagi_scope *s, const char *channel, const void *data, size_t len)
    PAGI_NONNULL(2);

/* ------------------------------------------------------------------ */
/* Applications                                                        */
/* ------------------------------------------------------------------ */

typedef struct pagi_app {
    int abi_version;   /* PAGI_ABI_VERSION: PAGI_ABI(major, minor) of the header built against */
    const char *name;
    /**
     * Once per worker, after fork, before lifespan: create the app's
     * instance. arg is what followed ':' in the app spec (or NULL). Return
     * the instance (may be NULL when the app has no state) and set *err
     * (static string) on failure; create may be NULL.
     */
    void *(*create)(const char *arg, pagi_loop *loop, const char **err);
    /** Start handling a scope; call pagi_scope_finish when done. */
    void (*handle)(pagi_scope *s, void *instance);
    /** Worker exit: free the instance (may be NULL). */
    void (*destroy)(void *instance);
    /* Must be zero (a positional initializer leaves them so). Later minors
     * take their members from here without changing the size. */
    const void *reserved[8];
} pagi_app;

/** A .so module exports this symbol (see examples/). */
#define PAGI_MODULE_SYMBOL "pagi_module"

/**
 * The app table's initializer, C and C++ alike:
 *   const pagi_app pagi_module = PAGI_APP_INIT("name", create, handle, destroy);
 * It names every member, so -Wextra's missing-initializer check stays quiet
 * (a designated initializer, {.abi_version = PAGI_ABI_VERSION, ...}, too).
 */
#define PAGI_APP_INIT(name, create, handle, destroy) \
    {PAGI_ABI_VERSION, (name), (create), (handle), (destroy), {0}}

/* ------------------------------------------------------------------ */
/* TLS: the PAGI tls extension (ABI 2.2)                               */
/* ------------------------------------------------------------------ */

/**
 * What the TLS connection under a scope negotiated (the spec's Tls.pod).
 * Strings are NUL-terminated; NULL stands for the spec's undef, 0 for an
 * unknown number. Filled by the server: a later minor gives the reserved
 * words a meaning (zero = "not set"), never changes the size.
 */
typedef struct pagi_tls_info {
    const char *server_cert;              /* PEM of the certificate the server sent */
    const char *const *client_cert_chain; /* PEMs the client sent, leaf first */
    size_t client_cert_count;             /* 0 when the client sent none */
    const char *client_cert_name;         /* RFC 4514 subject DN of the leaf; NULL: none */
    const char *client_cert_error;        /* why the client's certificate did not verify
                                           * (client_auth optional); NULL: verified, or none */
    int tls_version;                      /* 0x0303 TLS 1.2, 0x0304 TLS 1.3; 0: unknown */
    int cipher_suite;                     /* IANA number, 0x1301 TLS_AES_128_GCM_SHA256 */
    const void *reserved[8];              /* zero in this minor */
} pagi_tls_info;

/**
 * The tls extension of an http, websocket or sse scope on a TLS connection;
 * NULL on a cleartext one (and for lifespan), exactly when
 * pagi_scope_has_extension(s, "tls") is 0 (or, on TLS, when out of memory).
 * Made on the first call for the connection and shared by its scopes; valid
 * as long as the scope is, also after the client left. New in 2.2.
 */
const pagi_tls_info *pagi_scope_tls(const pagi_scope *s);

/* ------------------------------------------------------------------ */
/* Versions (ABI 2.1)                                                  */
/* ------------------------------------------------------------------ */

/**
 * What the running server offers, for a module that wants to know at run
 * time (the loader already guarantees the same major and a minor at least
 * the module's): PAGI_ABI(major, minor) of the server, and its version
 * string ("pagid 1.2.3", static). Both are new in 2.1.
 */
unsigned pagi_abi_version(void);
const char *pagi_server_version(void);

#ifdef __cplusplus
}
#endif
#endif /* PAGI_PAGI_H */
