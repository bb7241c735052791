/*
 * pagi_easy.h - a convenience layer over pagi.h (see pagi_easy(3)): one-call
 * responses, a bounded body reader, broadcast groups with flow control for
 * slow members, a path router (pagi_router(3)), and lifespan with one
 * create/destroy pair. Built on the public pagi.h calls, plus a per-scope
 * slot of the server's own for the layer's state (it never uses the app's
 * pagi_scope_set_userdata).
 */
#ifndef PAGI_PAGI_EASY_H
#define PAGI_PAGI_EASY_H

#include <pagi/pagi.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Misuse (pagi_easy(3), HANDLES): a call on a released scope, or with NULL
 * where a pointer is required, returns -1 (or the documented NULL/0) with a
 * message naming the call in pagi_scope_error() and, once per call name
 * (each time under --debug), in the error log; pagid never touches freed
 * memory for it. Such a refusal does not finish the scope.
 */

/* ------------------------------------------------------------------ */
/* One-call responses                                                  */
/* ------------------------------------------------------------------ */

/**
 * Answer the request and finish the scope: response start (status,
 * content-type unless NULL, content-length, then the extra headers) and the
 * whole body, copied before return (the caller keeps its buffers). The scope
 * is finished from the body's send callback, with its error if any; a
 * rejected send finishes it with pagi_scope_error(), after the callbacks of
 * the layer's sends still in flight. Either way the app must not use s
 * afterwards, and must have no receive pending. On an sse scope this is the
 * decline (sse.http.response.*), on a websocket scope the
 * websocket.http.response extension. Returns 0, or -1 when a send was
 * rejected (the scope is then finished, or will be once the layer's sends
 * in flight complete). Returns -1 without finishing (the scope is still
 * the app's) for a second response on s ("pagi_respond_text: a response
 * was already sent on this scope": messages name the call), while the body reader is active on s (answer
 * from its callback), for a member of a group (pagi_group_leave hands it
 * back first), and for a NULL body with a length or NULL headers with a
 * count.
 */
int pagi_respond(pagi_scope *s, int status, const char *content_type, const void *body, size_t len);
int pagi_respond_headers(pagi_scope *s, int status, const char *content_type,
                         const pagi_header *headers, size_t header_count, const void *body,
                         size_t len);
/** pagi_respond with a NUL-terminated text/plain body; NULL text is refused (-1, not finished). */
int pagi_respond_text(pagi_scope *s, int status, const char *text) PAGI_NONNULL(3);

/* ------------------------------------------------------------------ */
/* Request body                                                        */
/* ------------------------------------------------------------------ */

/**
 * Called exactly once by pagi_read_body. On success err is NULL and body
 * holds all len bytes plus a terminating NUL (the layer owns body and frees
 * it when the callback returns); the app answers, e.g. with pagi_respond.
 * Otherwise body is NULL and err says why ("request body too large",
 * "client disconnected", ...): over the limit the layer has queued a 413
 * before cb; it finishes the scope after cb returns (and after the 413's
 * send callback), so the app must not use s after cb, only free what it
 * owns. cb never runs inside pagi_read_body, and not at all when the server
 * ends the scope first (a worker stopping at once).
 */
typedef void (*pagi_body_cb)(pagi_scope *s, const char *body, size_t len, const char *err,
                             void *ud);

/**
 * Read the whole request body of an http (or sse) scope incrementally, at
 * most limit bytes. A Content-Length above limit is refused before any
 * byte is read (from the run queue), a chunked body as soon as it passes
 * limit: 413 queued, then cb with the error, then the scope finished.
 * Returns 0; or -1 without finishing (pagi_scope_error says why) for a scope
 * that is not http or sse, or while another reader is active on s; or -1
 * when the first receive was refused or memory ran out (the scope is then
 * finished with the error and cb is not called).
 */
int pagi_read_body(pagi_scope *s, size_t limit, pagi_body_cb cb, void *ud);

/**
 * pagi_read_body with options (ABI 2.4): the limit, and the answer to a
 * body over it in place of the plain-text 413 (e.g. a JSON error, or a CORS
 * header the browser needs to read it). Zero fields keep the defaults. The
 * answer's bytes are copied during the call.
 */
typedef struct pagi_body_opts {
    size_t limit;                 /* bytes, as pagi_read_body's limit */
    int status;                   /* the answer's status (200-599); 0: 413 */
    const char *content_type;     /* NULL: "text/plain; charset=utf-8" */
    pagi_str body;                /* {NULL, 0}: "request body too large\n" */
    const pagi_header *headers;   /* extra headers of the answer (lower-case names) */
    size_t header_count;
    const void *reserved[4];      /* must be zero */
} pagi_body_opts;
int pagi_read_body_opts(pagi_scope *s, const pagi_body_opts *opts, pagi_body_cb cb, void *ud);

/* ------------------------------------------------------------------ */
/* Broadcast groups                                                    */
/* ------------------------------------------------------------------ */

typedef struct pagi_group pagi_group;

/**
 * What happens to a member that cannot keep up: a member is "slow" while its
 * send buffer is at or above the transport's high water mark.
 *   CONFLATE    keep only the latest message for it, sent once it drains
 *               (a state feed: the newest value is all that matters);
 *   DROP        drop messages while it is slow (a lossy feed);
 *   DISCONNECT  close it: websocket close 1008 "too slow", sse stream ended
 *               (a feed where a gap is worse than a reconnect).
 * Fast members are never held up by slow ones in any policy.
 */
typedef enum pagi_group_policy {
    PAGI_GROUP_CONFLATE = 1,
    PAGI_GROUP_DROP,
    PAGI_GROUP_DISCONNECT
} pagi_group_policy;

/** A websocket text (is_text 1) or binary message from a member. */
typedef void (*pagi_group_msg_cb)(pagi_group *g, pagi_scope *member, pagi_str msg, int is_text,
                                  void *ud);

/** A new, empty group owned by the caller (free with pagi_group_free); NULL on OOM. */
pagi_group *pagi_group_new(pagi_group_policy policy) PAGI_WARN_UNUSED;

/**
 * Free the group. Remaining members are closed (websocket 1001, sse stream
 * ended) and finish on their own as their disconnects arrive.
 */
void pagi_group_free(pagi_group *g);

/**
 * Hand a fresh websocket or sse scope to the group (call it from the app's
 * handle, before any receive on s). From then on the group owns the scope's
 * event loop: it accepts the websocket (or sends sse.start, 200), keeps a
 * receive pending, passes each websocket message to on_message (may be
 * NULL; msg is valid during the call), counts the member's sends in flight,
 * and on the disconnect leaves the group and finishes the scope after the
 * last send callback ran. The app must not receive on or finish s itself;
 * it may send to it through the group only (or take it back with
 * pagi_group_leave). When the worker starts draining (stop, reload,
 * max_requests) every member of every group is closed at once: websocket
 * 1001 "server shutting down", sse stream ended (after the group's drain
 * event, if set); a scope joining while the worker drains is refused the
 * same way (a websocket not yet accepted gets a 403). Returns 0, or -1 (s
 * finished with the error) for another scope type, a NULL group or a
 * refused call; -1 without finishing for a scope that is already a member
 * of a group (it stays that member). A member the app finishes or answers
 * behind the group's back is dropped by the group at once (and the misuse
 * logged); pagi_respond on a member is refused.
 */
int pagi_group_join(pagi_group *g, pagi_scope *s, pagi_group_msg_cb on_message, void *ud);
/**
 * pagi_group_join with response headers (ABI 2.4): sent with the sse
 * stream's start (e.g. access-control-allow-origin for an EventSource from
 * another origin) or with the websocket's accept (copied during the call).
 */
int pagi_group_join_headers(pagi_group *g, pagi_scope *s, const pagi_header *headers,
                            size_t header_count, pagi_group_msg_cb on_message, void *ud);

/** Called once when a member handed back by pagi_group_leave is the app's again. */
typedef void (*pagi_group_left_cb)(pagi_scope *s, void *ud);

/**
 * Take a member back from the group without closing it: it leaves at once
 * (no more messages, a held CONFLATE message is dropped), its pending
 * receive is withdrawn (pagi_receive_cancel), and cb runs once the group's
 * sends to it in flight have completed; it may run before this returns.
 * From cb on the app owns s again as if it had never joined: it receives
 * (an event not yet delivered, e.g. websocket.connect, is not lost), sends
 * and finishes it, and the group no longer closes it on a drain. Callable
 * from on_message. Returns 0, or -1 when s is not a member of g (already
 * closed or disconnected) or cb is NULL.
 */
int pagi_group_leave(pagi_group *g, pagi_scope *member, pagi_group_left_cb cb, void *ud);

/** Close one member (websocket code and reason, sse: end the stream); it leaves at once. */
void pagi_group_close(pagi_group *g, pagi_scope *member, int code, const char *reason);

/** Members currently in the group (joined and not yet disconnected). */
size_t pagi_group_size(const pagi_group *g);

/**
 * Send to every member, applying the policy to slow ones. text: a websocket
 * text message, an sse "data:" event. bytes: a websocket binary message
 * (sse members are skipped). event: an sse event named event (NULL: none)
 * with data; websocket members get data as text. The bytes are copied
 * once, into one pagi_buf that every websocket member's send (and a held
 * CONFLATE message) references: N members hold the message once.
 * Returns how many members it was sent or queued to, or -1 on OOM.
 */
int pagi_group_send_text(pagi_group *g, const char *data, size_t len);
int pagi_group_send_bytes(pagi_group *g, const void *data, size_t len);
int pagi_group_send_event(pagi_group *g, const char *event, const char *data, size_t len);
/** The same to one member only (the policy applies): e.g. a snapshot for a
 * newcomer; a websocket member's messages before its accept wait for it. */
int pagi_group_send_to(pagi_group *g, pagi_scope *member, const char *event, const char *data,
                       size_t len);

/**
 * The last sse event the members get when the worker drains, before their
 * stream ends (event NULL: a data-only event); copied. Websocket members
 * get their 1001 close only. Returns 0, or -1 on OOM.
 */
int pagi_group_set_drain_event(pagi_group *g, const char *event, const char *data, size_t len);

/** Messages dropped (DROP), replaced (CONFLATE) or members closed (DISCONNECT) so far. */
unsigned long pagi_group_slow_count(const pagi_group *g);

/**
 * Feed the group from a publish/subscribe channel (ABI 2.3): every message
 * published on channel by any worker of this pagid (pagi_publish) is
 * broadcast to the members as pagi_group_send_event(g, event, data, len)
 * would (event NULL: as pagi_group_send_text), under the group's policy, in
 * the order each publisher published. A member whose send is refused (a
 * websocket member and a message that is not UTF-8) misses that message.
 * What slow members miss is counted in pagi_group_slow_count and in the
 * server's pub/sub drop metrics. The subscription is the group's, not s's
 * (s is any live scope of the worker, e.g. the joining one, and gets the
 * error): it lasts until pagi_group_unsubscribe or pagi_group_free. Returns
 * 0, also when g is already fed from channel (nothing changes), or -1
 * (pagi_scope_error(s) says why: a bad channel name, no publish/subscribe)
 * without finishing s.
 */
int pagi_group_subscribe(pagi_group *g, pagi_scope *s, const char *channel, const char *event);
/** Stop feeding g from channel (messages not yet broadcast are lost); 0, or -1 if it was not. */
int pagi_group_unsubscribe(pagi_group *g, const char *channel);

/* ------------------------------------------------------------------ */
/* Routing (ABI 2.5, pagi_router(3))                                   */
/* ------------------------------------------------------------------ */

/**
 * A table of routes: a method and a path pattern each, matched against the
 * scope's path below its mount point (path minus root_path). A pattern is
 * '/'-separated segments: a literal ("polls"), matched exactly against the
 * percent-decoded segment; a named segment (":id"), one non-empty segment;
 * and, last only, a wildcard ("*rest"), the rest of the path (zero or more
 * segments). Segments are split where the client wrote '/', so an encoded
 * "%2F" stays inside a segment and a named segment never spans a '/' (only
 * the '/' ending the mount point is matched decoded, as mounts are). The
 * most specific route wins, segment by segment from the left (literal, then
 * named, then wildcard); then an exact method over GET-serving-HEAD over
 * any method (no tie is left: a route of an earlier one's method and shape
 * is refused, so the order of adding never matters). A trailing '/' is
 * significant ("/polls/" is not "/polls"), except that the mount point
 * itself ("/api" under a mount at /api) is "/". The router is the app's: no
 * allocation per dispatch, not thread-safe, free it when no dispatch runs.
 */
typedef struct pagi_router pagi_router;
/** The values of one match: valid during the route callback only. */
typedef struct pagi_route_params pagi_route_params;
typedef void (*pagi_route_cb)(pagi_scope *s, const pagi_route_params *params, void *ud);

/** Pseudo-methods: routes for websocket and sse scopes (pagi_router_add). */
#define PAGI_ROUTE_WEBSOCKET "WEBSOCKET"
#define PAGI_ROUTE_SSE "SSE"
/** Bounds of a pattern: segments, and named plus wildcard segments. */
#define PAGI_ROUTE_MAX_SEGMENTS 32
#define PAGI_ROUTE_MAX_PARAMS 16

/** A new, empty router owned by the caller (pagi_router_free); NULL on OOM. */
pagi_router *pagi_router_new(void) PAGI_WARN_UNUSED;
/** Free r and its routes (NULL is ignored); not from inside its dispatch. */
void pagi_router_free(pagi_router *r);

/**
 * Add a route: cb(s, params, ud) runs for a scope it matches. method is an
 * HTTP method ("GET": http scopes of that method, and HEAD where no HEAD
 * route matches), NULL for any method of an http request, PAGI_ROUTE_SSE
 * for sse scopes or PAGI_ROUTE_WEBSOCKET for websocket scopes. An sse scope
 * that no SSE route matches is routed as an http request of its method
 * (pagi_respond answers it either way); a websocket scope only matches
 * WEBSOCKET routes. The pattern is copied. Returns 0, or -1 with errno
 * (EINVAL, ENOMEM) and pagi_router_error(r) saying why: a method that is
 * not a token, a pattern not starting with '/', an empty segment other
 * than a trailing one, a name not of [A-Za-z0-9_] (1-63 bytes) or used
 * twice, a wildcard not last, a '%' in a literal (write literals decoded),
 * more than PAGI_ROUTE_MAX_SEGMENTS segments or PAGI_ROUTE_MAX_PARAMS
 * names, or a route with the same method and shape as an earlier one.
 */
int pagi_router_add(pagi_router *r, const char *method, const char *pattern, pagi_route_cb cb,
                    void *ud) PAGI_NONNULL(1, 3, 4) PAGI_WARN_UNUSED;
/** Why the last pagi_router_add failed ("" before any failure); never NULL. */
const char *pagi_router_error(const pagi_router *r);

/**
 * Route the http, sse or websocket scope s (call it from the app's handle):
 * the best route's callback runs before this returns, and from then on owns
 * s as the handle did. Nothing matching: 404, or 405 with an allow header
 * naming the methods of the routes that match the path (HEAD with GET),
 * sent with pagi_respond (a websocket gets its 404 through the
 * websocket.http.response extension, or is refused: 403), which finishes
 * s. Returns 0 (a route ran), 1 (answered 404 or 405), or -1 without
 * finishing s (pagi_scope_error says why) for a NULL router or a lifespan
 * scope; -1 also when the answer was refused (as pagi_respond).
 */
int pagi_router_dispatch(pagi_router *r, pagi_scope *s);

/**
 * The value of the named or wildcard segment called name in the matched
 * pattern (without its ':' or '*'), percent-decoded, not NUL-terminated. It
 * points into pagi_scope_path(s): valid as long as the scope, after the
 * callback too (e.g. in a pagi_read_body callback). A wildcard's value
 * starts after the '/' before it and may be empty; the path is not
 * normalised, so it may still begin with '/' ("//" or "%2F" there) or hold
 * ".." segments: check it before using it as a file name. {NULL, 0} for a
 * name not in the pattern.
 */
pagi_str pagi_route_param(const pagi_route_params *params, const char *name);

/* ------------------------------------------------------------------ */
/* Lifespan                                                            */
/* ------------------------------------------------------------------ */

/**
 * Create the app's worker-wide object. Return it, or set *err (a static
 * string) to fail the startup; s is the lifespan scope (for pagi_scope_loop).
 */
typedef void *(*pagi_lifespan_create_fn)(pagi_scope *s, void *ud, const char **err);
/**
 * Free what create returned: once, on lifespan.shutdown, or when the server
 * releases the lifespan scope without one (a worker stopping at once); not
 * after a failed create.
 */
typedef void (*pagi_lifespan_destroy_fn)(void *obj, void *ud);

/**
 * Run a whole lifespan scope: wait for lifespan.startup, call create, store
 * its result in the lifespan state under key (when key is not NULL, so every
 * request finds it with pagi_state_get), answer startup.complete (or
 * startup.failed with create's error), wait for lifespan.shutdown, call
 * destroy, answer shutdown.complete and finish the scope. Returns 0, or -1
 * when the first receive was refused (the scope is then finished).
 */
int pagi_lifespan_run(pagi_scope *s, const char *key, pagi_lifespan_create_fn create,
                      pagi_lifespan_destroy_fn destroy, void *ud);

#ifdef __cplusplus
}
#endif
#endif /* PAGI_PAGI_EASY_H */
