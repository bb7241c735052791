/*
 * static_http.h - the HTTP semantics of the static app, without I/O: ETag
 * and HTTP-date formatting and parsing, the conditional request rules of
 * RFC 9110 section 13, and single byte ranges (section 14).
 */
#ifndef PAGID_STATIC_HTTP_H
#define PAGID_STATIC_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <pagi/pagi.h>

#define STATIC_ETAG_MAX 48
#define STATIC_DATE_MAX 32

/**
 * Strong ETag "<hex mtime>-<hex size>" (with the quotes; the static app
 * gives the mtime in nanoseconds); returns its length.
 */
size_t static_etag(char out[STATIC_ETAG_MAX], int64_t mtime, int64_t size);
/** IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"); returns its length. */
size_t static_http_date(char out[STATIC_DATE_MAX], int64_t t);
/** Parse IMF-fixdate, RFC 850 or asctime; 0 with *t, or -1. */
int static_parse_http_date(const char *s, size_t len, int64_t *t);

/**
 * Does an If-None-Match / If-Match list ("*", or comma-separated entity
 * tags) match etag? weak = 1 compares W/"x" equal to "x" (If-None-Match);
 * weak = 0 needs both strong (If-Match).
 */
int static_etag_list_match(pagi_str list, const char *etag, size_t etag_len, int weak);

typedef enum static_range_rc {
    STATIC_RANGE_NONE,          /* no usable Range: send the whole file */
    STATIC_RANGE_OK,            /* one satisfiable range: 206 */
    STATIC_RANGE_UNSATISFIABLE, /* 416 */
} static_range_rc;

/**
 * Parse a Range header value against a file of size bytes. Only one
 * "bytes=" range-spec is honoured: several ranges, other units and syntax
 * errors all yield STATIC_RANGE_NONE (the whole file, as RFC 9110 allows).
 * On OK, [*first, *last] is the inclusive byte range.
 */
static_range_rc static_parse_range(pagi_str value, int64_t size, int64_t *first, int64_t *last);

/** What the request's validators say (RFC 9110 section 13.2.2 order). */
typedef enum static_cond {
    STATIC_COND_FULL,          /* 200 with the whole file */
    STATIC_COND_RANGE_ALLOWED, /* a Range, if any, may be honoured */
    STATIC_COND_NOT_MODIFIED,  /* 304 */
    STATIC_COND_PRECONDITION,  /* 412 */
} static_cond;

typedef struct static_validators {
    int has_if_match, has_if_unmodified, has_if_none_match, has_if_modified, has_if_range;
    pagi_str if_match, if_unmodified, if_none_match, if_modified, if_range;
    /* Wall-clock seconds: a Last-Modified less than a second old is only a
     * weak validator (RFC 9110 section 8.8.2.2), so no If-Range date matches it. */
    int64_t now;
} static_validators;

/**
 * Evaluate the preconditions for a GET/HEAD of a file with this etag and
 * mtime. Returns NOT_MODIFIED, PRECONDITION, or RANGE_ALLOWED / FULL
 * (whether an If-Range lets a Range apply).
 */
static_cond static_evaluate(const static_validators *v, const char *etag, size_t etag_len,
                            int64_t mtime);

#endif
