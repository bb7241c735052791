/*
 * h2_request.h - an HTTP/2 request head as nghttp2 hands it over, field by
 * field: collected under the header limits, then turned into what a PAGI
 * scope holds (method, decoded path, query, headers with :authority as
 * host and cookies joined). Pure: no nghttp2, no connection, unit-tested.
 */
#ifndef PAGID_H2_REQUEST_H
#define PAGID_H2_REQUEST_H

#include <pagi/pagi.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

enum { H2_P_METHOD, H2_P_PATH, H2_P_SCHEME, H2_P_AUTHORITY, H2_P_PROTOCOL, H2_P__COUNT };

/* Offsets of one field in the head's bytes: name NUL value NUL. */
typedef struct h2_field {
    uint32_t name, nlen, value, vlen;
} h2_field;

/* Fields a head holds without an allocation (a browser sends 10 to 20). */
#define H2_HEAD_INLINE_FIELDS 16

/* Field bytes a head holds without an allocation (a client like curl or
 * h2load sends about 150; a browser's cookies go past it). */
#define H2_HEAD_INLINE_BYTES 512

typedef struct h2_head {
    char *bytes;        /* bytes_inline, or (past it) owned */
    uint32_t used, cap; /* of bytes */
    h2_field *fv;       /* fv_inline, or (past it) owned */
    size_t nf, capf;
    size_t list_size;        /* RFC 9113's size of the header list so far */
    int pseudo[H2_P__COUNT]; /* index in fv, or -1 */
    int refuse;              /* status to answer instead (431, 400), 0 = none */
    /* last: not zeroed, written only as far as used */
    h2_field fv_inline[H2_HEAD_INLINE_FIELDS];
    char bytes_inline[H2_HEAD_INLINE_BYTES];
} h2_head;

/** An empty head (no memory until the first field). */
void h2_head_init(h2_head *hd);
/** Free its storage (idempotent); the head is empty again. */
void h2_head_free(h2_head *hd);
/** Whether the head (still held) has a :protocol: an extended CONNECT (RFC 8441). */
int h2_head_has_protocol(const h2_head *hd);

/**
 * Add one field. Past max_size bytes (name + value + 32 each, as RFC 9113
 * counts) or max_count fields the head is refused with 431 and its storage
 * freed; an unknown pseudo-header refuses it with 400. Returns 0 (stored,
 * or ignored after a refusal), 1 when the list is far past the limit
 * (reset the stream rather than read on), -1 out of memory.
 */
int h2_head_add(h2_head *hd, const uint8_t *name, size_t nl, const uint8_t *value, size_t vl,
                size_t max_size, size_t max_count);

/* A request's header array and decoded path without an allocation up to
 * these sizes (the request lives on the stack while its scope is made). */
#define H2_REQUEST_INLINE_FIELDS 24
#define H2_REQUEST_INLINE_PATH 256

/** What a scope is made from; strings point into the head and into r's
 * own storage, so r is never copied (headers may point into r itself). */
typedef struct h2_request {
    const char *method; /* NUL-terminated */
    const char *scheme; /* "http" or "https" as the client said, else NULL */
    pagi_str path, raw_path, query;
    pagi_header *headers; /* headers_inline, or in block */
    size_t header_count;
    int event_stream; /* Accept: text/event-stream */
    int websocket;    /* an extended CONNECT with :protocol websocket (RFC 8441) */
    char *path_mem;   /* the decoded path: path_inline, or in block after the headers */
    void *block;      /* owned: headers and path when either did not fit inline, else NULL */
    buf cookies;      /* owned: the joined cookie value */
    /* last: not zeroed, only written as far as used */
    pagi_header headers_inline[H2_REQUEST_INLINE_FIELDS];
    char path_inline[H2_REQUEST_INLINE_PATH];
} h2_request;

/**
 * Turn a whole head into a request: 0, or the status to refuse it with
 * (400: no :method or :path, a %00 in the path; 501: CONNECT, unless an
 * extended CONNECT for :protocol websocket (RFC 8441), which sets websocket;
 * 500: out of memory). r is freed with h2_request_free either way; the head must
 * outlive it.
 */
int h2_head_request(const h2_head *hd, h2_request *r);
void h2_request_free(h2_request *r);

#endif
