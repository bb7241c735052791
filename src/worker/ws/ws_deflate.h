/*
 * ws_deflate.h - permessage-deflate (RFC 7692) over zlib: choosing an offer
 * from the client's Sec-WebSocket-Extensions, the response parameters, and
 * inflate/deflate streams with context takeover as agreed, held only while
 * they carry context (see ws_deflate.c).
 * Inflation is capped: a message may not grow past the configured maximum
 * however small its compressed form (decompression bombs fail with 1009).
 */
#ifndef PAGID_WS_DEFLATE_H
#define PAGID_WS_DEFLATE_H

#include <stddef.h>

#include "common/buf.h"

typedef struct ws_deflate_params {
    int server_no_context_takeover; /* our compressor resets after each message */
    int client_no_context_takeover; /* the client's compressor resets after each message */
    int server_max_window_bits;     /* our LZ77 window (9..15) */
    int server_window_requested;    /* the client asked for server_max_window_bits: echo it */
} ws_deflate_params;

/**
 * Pick the first acceptable permessage-deflate offer in one header value
 * (comma-separated offers, ';'-separated parameters). An offer with an
 * unknown, repeated or malformed parameter is declined, as RFC 7692 says.
 * Returns 1 and fills *out when an offer was accepted, else 0.
 */
int ws_deflate_negotiate(const char *value, size_t len, ws_deflate_params *out);

/** The Sec-WebSocket-Extensions response value for the accepted offer. */
int ws_deflate_response(const ws_deflate_params *p, char *out, size_t size);

typedef struct ws_deflate ws_deflate;

ws_deflate *ws_deflate_new(const ws_deflate_params *p);
void ws_deflate_free(ws_deflate *d);

/** How many zlib streams d holds now (0 between messages without context takeover). */
size_t ws_deflate_held(const ws_deflate *d);

enum { WS_INFLATE_OK = 0, WS_INFLATE_CORRUPT = -1, WS_INFLATE_TOO_BIG = -2, WS_INFLATE_NOMEM = -3 };

/**
 * Inflate a piece of a compressed message, appending to out; out may not
 * exceed max bytes. Returns WS_INFLATE_OK, _CORRUPT or _TOO_BIG.
 */
int ws_inflate_feed(ws_deflate *d, const void *in, size_t n, buf *out, size_t max);
/** The message ended: inflate the implied 00 00 ff ff tail (and reset if agreed). */
int ws_inflate_end(ws_deflate *d, buf *out, size_t max);
/** Compress one whole message, appending the payload (tail removed) to out; 0 or -1. */
int ws_deflate_message(ws_deflate *d, const void *in, size_t n, buf *out);

#endif
