/*
 * http1_parser_int.h - the parser's private state, shared between the byte
 * state machine (http1_parser.c) and the head semantics (http1_parser_head.c);
 * http1_response.c takes only h1_tchar from it. Not part of the
 * contract: use http1_parser.h.
 */
#ifndef PAGID_HTTP1_PARSER_INT_H
#define PAGID_HTTP1_PARSER_INT_H

#include <http_parser.h>
#include <stdint.h>

#include "h1_arena.h"
#include "http1_parser.h"

/* The request line never reaches http-parser, so it needs a cap of its own
 * even when the configured limit is 0 (unlimited) or absurd. */
#define H1_HARD_REQUEST_LINE (64 * 1024)
/* The part of a request line that is free; bytes past it count against
 * max_header_size (as nginx's header buffers hold both), so a head being
 * read holds at most max_header_size plus this and a small constant. */
#define H1_REQUEST_LINE_FREE 1024
/* Chunk extensions are ignored; bound what a client can make us skip. */
#define H1_MAX_CHUNK_EXT 4096
#define H1_MAX_CHUNK_EXT_TOTAL (64 * 1024)
/* How much of a header section our parser reads alone before http-parser
 * catches up (http1_parser.c): well below http-parser's 80 KiB ceiling. */
#define H1_ALONE_MAX 8192

typedef enum h1_pstate {
    PS_IDLE,    /* before the request line: empty lines are skipped */
    PS_IDLE_LF, /* CR of a leading empty line */
    PS_METHOD,
    PS_TARGET,
    PS_VERSION,
    PS_RL_LF,    /* CR ending the request line */
    PS_HDR_LINE, /* start of a field line, or of the empty line */
    PS_HDR_NAME,
    PS_HDR_OWS, /* after the colon */
    PS_HDR_VALUE,
    PS_HDR_LF,      /* CR ending a field line */
    PS_HEAD_END_LF, /* CR of the empty line (head or trailer section) */
    PS_HEAD_READ,   /* the head's empty line read alone (no second opinion yet): not handed over */
    PS_BODY_LENGTH,
    PS_CHUNK_SIZE_START,
    PS_CHUNK_SIZE,
    PS_CHUNK_BWS, /* whitespace after the size: only ';' may follow */
    PS_CHUNK_EXT,
    PS_CHUNK_SIZE_LF,
    PS_CHUNK_DATA,
    PS_CHUNK_DATA_CR,
    PS_CHUNK_DATA_LF,
    PS_DONE,
    PS_ERROR
} h1_pstate;

/* Field positions are arena offsets: the arena moves while it grows. A head
 * is at most 80 KiB (http-parser's ceiling), so 32 bits are plenty. */
typedef struct h1_field {
    uint32_t name_off, name_len, val_off, val_len;
} h1_field;

struct h1_parser {
    h1_limits lim;
    h1_parser_callbacks cb;
    void *ud;
    h1_pstate st;

    /* Head memory: allocated as the head arrives, released once the head
     * was handed over (on_request), so a request being served holds none. */
    h1_arena arena; /* every string of the request, NUL-terminated */
    h1_field *fields;
    size_t nfields, fields_cap;
    size_t nfields_seen; /* field lines in the current section, for the limit */
    pagi_header *headers;
    size_t headers_cap;
    h1_request req;

    size_t line_len;   /* request line bytes so far */
    size_t head_bytes; /* name + value bytes of the current section */
    size_t method_off, method_len, target_off, target_len;
    size_t name_off, name_len, val_off;
    char vers[8];
    size_t vers_len;

    int in_trailers;
    int started, head_done;
    int error_status;
    const char *error_text;

    uint64_t body_left;  /* of the Content-Length body, or of the chunk */
    uint64_t body_total; /* chunked: declared so far, against max_body_size */
    size_t chunk_digits, line_ext, ext_total;

    http_parser hp; /* the second opinion */
    http_parser_settings hs;
    int hp_done;
    /* http-parser has been given this message's synthetic request line: it
     * runs in lockstep from here to the message's end. Until then, our
     * parser reads the header section alone (see h1_parser_feed). */
    int hp_fed;
    /* A Content-Length or Transfer-Encoding field was read: the framing is
     * the parsers' to agree on, so the second opinion is asked. */
    int framing_field;
};

/* 1 for an RFC 9110 token character, else 0 (http1_response.c ANDs four
 * entries a step over every name of every response head). */
extern const unsigned char h1_tchar[256];
static inline int h1_is_tchar(unsigned char c)
{
    return h1_tchar[c];
}
/** Append a field (offsets into the arena); 0 or -1 (out of memory). */
int h1_fields_push(h1_parser *p, h1_field f);
/** Record the first error: status + static text; returns -1. */
int h1_fail(h1_parser *p, int status, const char *text);
/** The head is complete: validate it and fill p->req. 0 or -1 (h1_fail). */
int h1_head_finish(h1_parser *p);
/** Run our state machine over len bytes (0: end of the head's bytes, see
 * h1_parser_feed); the bytes it took (it stops at an error or the end). */
size_t h1_run(h1_parser *p, const char *d, size_t len);
/** http-parser's settings (once per parser) and a fresh message. */
void h1_hp_init(h1_parser *p);
void h1_hp_start(h1_parser *p);

#endif
