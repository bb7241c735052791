/*
 * http1_parser.h - strict HTTP/1.x request parsing: pagid's own state
 * machine, with http-parser run beside it as a second opinion on framing
 * (see http1_parser.c).
 *
 * Turns socket bytes into a validated request head and de-chunked body
 * pieces, rejecting anything RFC 9112 calls ambiguous (request smuggling
 * vectors) with the status the server must answer. One parser per
 * connection, reset between requests; it stops (pauses) after each complete
 * message so pipelined requests are handled one at a time, in order.
 */
#ifndef PAGID_HTTP1_PARSER_H
#define PAGID_HTTP1_PARSER_H

#include <stddef.h>
#include <stdint.h>
#include <pagi/pagi.h>

typedef struct h1_limits {
    size_t max_request_line; /* method SP target SP version: 414 when over */
    size_t max_header_size;  /* sum of all header lines: 431 when over */
    size_t max_header_count; /* 431 when over */
    size_t max_body_size;    /* declared or received body: 413 when over */
} h1_limits;

/**
 * A parsed, validated request head, handed to on_request. Its strings live
 * in the parser's arena and are valid only during that callback (copy what
 * you keep): the parser releases the head's memory when it returns, so a
 * request being served holds none of it.
 */
typedef struct h1_request {
    const char *method;   /* upper-case, NUL-terminated */
    int http_minor;       /* 0 or 1 (HTTP/1.x only; others -> 505) */
    pagi_str raw_path;    /* target before '?', as sent */
    pagi_str path;        /* percent-decoded raw_path */
    pagi_str query;       /* after '?', without it; empty if none */
    pagi_header *headers; /* names lower-cased; all Cookie lines merged into one "; "-joined */
    size_t header_count;
    int64_t content_length;   /* -1 when absent */
    int chunked;              /* Transfer-Encoding: chunked */
    int keep_alive;           /* per version and Connection header */
    int expect_continue;      /* Expect: 100-continue (HTTP/1.1) */
    int upgrade_websocket;    /* Upgrade: websocket + Connection: upgrade */
    int accepts_event_stream; /* Accept contains text/event-stream */
} h1_request;

typedef struct h1_parser_callbacks {
    /** Head complete and valid. Return 0 to go on, -1 to abort the parse. */
    int (*on_request)(void *ud, const h1_request *req);
    /** A de-chunked body piece (never empty). Return 0 or -1. */
    int (*on_body)(void *ud, const char *data, size_t len);
    /** Body complete (trailers of a chunked body are discarded). */
    int (*on_complete)(void *ud);
} h1_parser_callbacks;

typedef enum h1_state {
    H1_NEED_MORE = 0, /* all input consumed, the message is not complete */
    H1_DONE,          /* a message completed; bytes after it were not consumed */
    H1_ERROR          /* h1_parser_error_status says which response to send */
} h1_state;

typedef struct h1_parser h1_parser;

h1_parser *h1_parser_new(const h1_limits *limits, const h1_parser_callbacks *cb, void *ud);
void h1_parser_free(h1_parser *p);
/** Ready for the next request on the same connection. */
void h1_parser_reset(h1_parser *p);
/** 1 once a whole message was parsed (H1_DONE), until a reset. */
int h1_parser_is_done(const h1_parser *p);
/** Ready for a request on another connection (same limits and callbacks,
 * callback data ud): a finished parser reused instead of a new one. */
void h1_parser_reuse(h1_parser *p, void *ud);

/**
 * Feed bytes. *consumed is set to how many were used; on H1_DONE the
 * remaining bytes belong to the next request (feed them after reset).
 */
h1_state h1_parser_feed(h1_parser *p, const char *data, size_t len, size_t *consumed);

/** Has any byte of a request been seen since the last reset? */
int h1_parser_started(const h1_parser *p);
/** Is the head of the current request complete (body may be pending)? */
int h1_parser_head_done(const h1_parser *p);

/** After H1_ERROR: 400, 413, 414, 431, 501 or 505. */
int h1_parser_error_status(const h1_parser *p);
/** After H1_ERROR: a short description, for the log and the response body. */
const char *h1_parser_error_text(const h1_parser *p);

/**
 * The method and target of the current request line as read so far (for
 * the access log line of a request refused before it had a scope): 1 when
 * both tokens were complete, else 0. Valid until the next feed or reset.
 */
int h1_parser_request_line(const h1_parser *p, pagi_str *method, pagi_str *target);

/** Percent-decode src into dst (dst may alias src; needs src.len bytes); returns length. */
size_t h1_percent_decode(char *dst, const char *src, size_t len);

#endif
