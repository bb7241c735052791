/*
 * http1_response.h - serialising HTTP/1.1 responses: the status line, the
 * application's headers (validated against CR/LF/NUL injection) plus the
 * server-supplied ones (Date, framing, Connection), chunk framing and
 * server-generated error responses.
 */
#ifndef PAGID_HTTP1_RESPONSE_H
#define PAGID_HTTP1_RESPONSE_H

#include <stddef.h>
#include <stdint.h>
#include <pagi/pagi.h>
#include "common/buf.h"

/** What the request says about how the response may be framed. */
typedef struct h1_response_ctx {
    int http_minor;          /* of the request */
    int head_request;        /* HEAD: headers only */
    int keep_alive;          /* the request allows keep-alive */
    int trailers;            /* app announced trailers: forces chunked */
    int announce_keep_alive; /* say "connection: keep-alive" on HTTP/1.1 too (event streams) */
    const char *date;        /* current HTTP-date (from the date cache) */
} h1_response_ctx;

/** The framing decided for the response. */
typedef struct h1_response_plan {
    int chunked;            /* body is chunk-framed */
    int keep_alive;         /* connection stays open after the response */
    int no_body;            /* HEAD, 1xx, 204, 304: no body bytes are written */
    int64_t content_length; /* from the app's header, -1 if none */
} h1_response_plan;

/**
 * Check one header the app wants to send: name a non-empty token without
 * CR/LF/NUL/control chars, value without CR/LF/NUL. 0 if fine, else -1 and
 * *err set to a static message.
 */
int h1_header_check(const pagi_header *h, const char **err);

/**
 * Append the status line and headers to out. Validates status (100-999) and
 * every header first; on error nothing is appended, -1 with *err. App
 * Transfer-Encoding headers are dropped, Connection is managed by the server,
 * Date added unless the app gave one.
 */
int h1_response_head(buf *out, int status, const pagi_header *headers, size_t n,
                     const h1_response_ctx *ctx, h1_response_plan *plan, const char **err);

/** Append one chunk (size line, data, CRLF); n == 0 appends nothing. */
int h1_chunk_append(buf *out, const char *data, size_t n);
/** Append the chunk-size line for n bytes that will follow (for sendfile). */
int h1_chunk_header(buf *out, size_t n);
/** Append the last chunk with optional trailers (validated like headers). */
int h1_chunk_last(buf *out, const pagi_header *trailers, size_t n, const char **err);

/** A complete server-generated response with a short text/plain body. */
int h1_error_response(buf *out, int status, const char *text, const char *date, int keep_alive);

/** Reason phrase for a status code ("OK"); "Unknown" when none. */
const char *h1_reason_phrase(int status);

/** Current HTTP-date, rebuilt at most once a second. now = time(NULL).
 * One buffer for the worker's life, always H1_DATE_LEN characters. */
const char *h1_date_now(long now);
#define H1_DATE_LEN 29 /* "Sun, 06 Nov 1994 08:49:37 GMT" (years 1000-9999) */

#endif
