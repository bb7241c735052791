/*
 * http1_parser.c - strict HTTP/1.x request parser (see http1_parser.h): its
 * lifecycle, the head's memory and the byte state machine (h1_run).
 *
 * Our own byte state machine is authoritative: http-parser 2.9.4 accepts
 * obs-fold, bare LF, "Name :", chunk data not followed by CRLF and rejects
 * extension methods, so it cannot be the judge. It runs as an independent
 * second parser where it can differ (http1_parser_feed.c, which feeds both);
 * the semantic checks of the head (framing, Host, Connection, target forms)
 * live in http1_parser_head.c.
 */
#include "http1_parser_int.h"
#include "common/hexdigit.h"

#include <stdlib.h>
#include <string.h>

/* RFC 9110 tchar (h1_is_tchar in http1_parser_int.h). */
const unsigned char h1_tchar[256] = {
    ['!'] = 1, ['#'] = 1, ['$'] = 1, ['%'] = 1, ['&'] = 1, ['\''] = 1, ['*'] = 1, ['+'] = 1,
    ['-'] = 1, ['.'] = 1, ['^'] = 1, ['_'] = 1, ['`'] = 1, ['|'] = 1,  ['~'] = 1, ['0'] = 1,
    ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1,  ['7'] = 1, ['8'] = 1,
    ['9'] = 1, ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1,  ['F'] = 1, ['G'] = 1,
    ['H'] = 1, ['I'] = 1, ['J'] = 1, ['K'] = 1, ['L'] = 1, ['M'] = 1,  ['N'] = 1, ['O'] = 1,
    ['P'] = 1, ['Q'] = 1, ['R'] = 1, ['S'] = 1, ['T'] = 1, ['U'] = 1,  ['V'] = 1, ['W'] = 1,
    ['X'] = 1, ['Y'] = 1, ['Z'] = 1, ['a'] = 1, ['b'] = 1, ['c'] = 1,  ['d'] = 1, ['e'] = 1,
    ['f'] = 1, ['g'] = 1, ['h'] = 1, ['i'] = 1, ['j'] = 1, ['k'] = 1,  ['l'] = 1, ['m'] = 1,
    ['n'] = 1, ['o'] = 1, ['p'] = 1, ['q'] = 1, ['r'] = 1, ['s'] = 1,  ['t'] = 1, ['u'] = 1,
    ['v'] = 1, ['w'] = 1, ['x'] = 1, ['y'] = 1, ['z'] = 1,
};

/* field-value bytes: HTAB, SP, VCHAR, obs-text. */
static inline int is_vchar(unsigned char c)
{
    return c == '\t' || (c >= 0x20 && c != 0x7f);
}

/* request-target bytes: visible ASCII and (for interop, as nginx) obs-text; no '#'. */
static inline int is_target_char(unsigned char c)
{
    return c > 0x20 && c != 0x7f && c != '#';
}

/* ------------------------------------------------------------------ */
/* Head memory                                                         */
/* ------------------------------------------------------------------ */

int h1_fields_push(h1_parser *p, h1_field f)
{
    if (p->nfields == p->fields_cap) {
        /* Never more entries than the limit allows (+1: the host of an
         * absolute-form target), so a big head costs no doubling slack. */
        size_t cap = p->fields_cap ? p->fields_cap * 2 : 16;
        if (p->lim.max_header_count < SIZE_MAX && cap > p->lim.max_header_count + 1)
            cap = p->lim.max_header_count + 1;
        if (cap <= p->nfields)
            cap = p->nfields + 1;
        h1_field *v = realloc(p->fields, cap * sizeof *v);
        if (!v)
            return -1;
        p->fields = v;
        p->fields_cap = cap;
    }
    p->fields[p->nfields++] = f;
    return 0;
}

/* Head memory kept for the parser's next message (h1_parser_reset) when it
 * is no bigger than an ordinary head needs. */
#define KEEP_ARENA_MAX 2048
#define KEEP_FIELDS_MAX 32

/*
 * The head was handed over: its strings are copied (the scope owns its own),
 * so nothing of it is kept while the request is served. Only a message that
 * ends with its head (no body: the parser is done with it right away) keeps
 * small blocks, for whoever resets the parser for another message (the
 * worker keeps one parser for the next request, http1_conn.c).
 */
static void release_head(h1_parser *p, int keep)
{
    if (!keep || p->arena.cap > KEEP_ARENA_MAX || p->fields_cap > KEEP_FIELDS_MAX ||
        p->headers_cap > KEEP_FIELDS_MAX) {
        h1_arena_free(&p->arena);
        free(p->fields);
        free(p->headers);
        p->fields = NULL;
        p->headers = NULL;
        p->fields_cap = p->headers_cap = 0;
    }
    h1_arena_reset(&p->arena);
    p->nfields = 0;
    p->method_len = p->target_len = 0;
    p->req.method = NULL;
    p->req.headers = NULL;
    p->req.header_count = 0;
    p->req.raw_path = p->req.path = p->req.query = (pagi_str){NULL, 0};
}

int h1_fail(h1_parser *p, int status, const char *text)
{
    if (p->st != PS_ERROR) {
        p->st = PS_ERROR;
        p->error_status = status;
        p->error_text = text;
    }
    return -1;
}

/* ------------------------------------------------------------------ */
/* Lifecycle                                                           */
/* ------------------------------------------------------------------ */

h1_parser *h1_parser_new(const h1_limits *limits, const h1_parser_callbacks *cb, void *ud)
{
    h1_parser *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->lim = *limits;
    /* 0 means "no limit of ours"; the request line still gets a hard cap
     * because http-parser never sees it (it gets a synthetic one). */
    if (p->lim.max_request_line == 0 || p->lim.max_request_line > H1_HARD_REQUEST_LINE)
        p->lim.max_request_line = H1_HARD_REQUEST_LINE;
    if (p->lim.max_header_size == 0)
        p->lim.max_header_size = SIZE_MAX;
    if (p->lim.max_header_count == 0)
        p->lim.max_header_count = SIZE_MAX;
    if (p->lim.max_body_size == 0 || p->lim.max_body_size > (size_t)INT64_MAX)
        p->lim.max_body_size = (size_t)INT64_MAX;
    /* All a valid head can put in the arena: the request line and header
     * bytes (together at most the larger of max_request_line and
     * max_header_size + H1_REQUEST_LINE_FREE, see head_add), two NULs per
     * field, then head_finish's copies (host, raw and decoded path, the
     * merged Cookie). Reading is bounded by the first part. */
    size_t line = p->lim.max_request_line;
    size_t hdr = p->lim.max_header_size < HTTP_MAX_HEADER_SIZE ? p->lim.max_header_size
                                                               : HTTP_MAX_HEADER_SIZE;
    size_t cnt = p->lim.max_header_count < hdr ? p->lim.max_header_count : hdr;
    size_t head = hdr + H1_REQUEST_LINE_FREE > line ? hdr + H1_REQUEST_LINE_FREE : line;
    h1_arena_init(&p->arena, head + 2 * cnt + 64, 4 * line + 2 * hdr + 4 * cnt + 256);
    if (cb)
        p->cb = *cb;
    p->ud = ud;
    h1_hp_init(p);
    h1_parser_reset(p);
    return p;
}

void h1_parser_free(h1_parser *p)
{
    if (!p)
        return;
    release_head(p, 0);
    free(p);
}

void h1_parser_reuse(h1_parser *p, void *ud)
{
    p->ud = ud;
    h1_parser_reset(p);
}

void h1_parser_reset(h1_parser *p)
{
    p->st = PS_IDLE;
    p->arena.len = 0;
    p->nfields = 0;
    p->line_len = 0;
    p->head_bytes = 0;
    p->in_trailers = 0;
    p->started = 0;
    p->head_done = 0;
    p->error_status = 0;
    p->error_text = NULL;
    p->body_left = 0;
    p->body_total = 0;
    p->ext_total = 0;
    p->line_ext = 0;
    p->chunk_digits = 0;
    p->vers_len = 0;
    p->method_len = p->target_len = 0;
    memset(&p->req, 0, sizeof p->req);
    h1_hp_start(p);
}

int h1_parser_started(const h1_parser *p)
{
    return p->started;
}
int h1_parser_is_done(const h1_parser *p)
{
    return p->st == PS_DONE;
}
int h1_parser_head_done(const h1_parser *p)
{
    return p->head_done;
}
int h1_parser_error_status(const h1_parser *p)
{
    return p->error_status;
}
const char *h1_parser_error_text(const h1_parser *p)
{
    return p->error_text ? p->error_text : "";
}

int h1_parser_request_line(const h1_parser *p, pagi_str *method, pagi_str *target)
{
    /* Both lengths are set only once their token ended; reset clears them. */
    if (!p->method_len || !p->target_len || p->method_off + p->method_len > p->arena.len ||
        p->target_off + p->target_len > p->arena.len)
        return 0;
    *method = (pagi_str){p->arena.data + p->method_off, p->method_len};
    *target = (pagi_str){p->arena.data + p->target_off, p->target_len};
    return 1;
}

/* ------------------------------------------------------------------ */
/* The state machine                                                   */
/* ------------------------------------------------------------------ */

/* Keeps an earlier error (a limit) if there is one. */
static int oom(h1_parser *p)
{
    return h1_fail(p, 500, "out of memory");
}

static int finish_version(h1_parser *p)
{
    const char *v = p->vers;
    if (p->vers_len != 8 || memcmp(v, "HTTP/", 5) != 0 || v[6] != '.' || v[5] < '0' || v[5] > '9' ||
        v[7] < '0' || v[7] > '9')
        return h1_fail(p, 400, "malformed HTTP version");
    if (v[5] != '1' || (v[7] != '0' && v[7] != '1'))
        return h1_fail(p, 505, "HTTP version not supported");
    p->req.http_minor = v[7] - '0';
    return 0;
}

/* Grow the request line counter by n bytes, 414 past the limit. */
static inline int line_add(h1_parser *p, size_t n)
{
    p->line_len += n;
    if (p->line_len > p->lim.max_request_line)
        return h1_fail(p, 414, "request line too long");
    return 0;
}

/* Count header-section bytes (name + value as sent), 431 past the limit.
 * The request line's bytes past H1_REQUEST_LINE_FREE count too. */
static inline int head_add(h1_parser *p, size_t n)
{
    p->head_bytes += n;
    size_t line_excess = !p->in_trailers && p->line_len > H1_REQUEST_LINE_FREE
                             ? p->line_len - H1_REQUEST_LINE_FREE
                             : 0;
    if (p->head_bytes > p->lim.max_header_size ||
        line_excess > p->lim.max_header_size - p->head_bytes)
        return h1_fail(p, 431,
                       p->in_trailers ? "trailer section too large"
                                      : "request header section too large");
    return 0;
}

static int end_field(h1_parser *p)
{
    if (++p->nfields_seen > p->lim.max_header_count)
        return h1_fail(p, 431, "too many header fields");
    if (p->in_trailers)
        return 0; /* trailers are validated, then discarded */
    /* Trim trailing OWS (leading OWS was never stored). */
    while (p->arena.len > p->val_off &&
           (p->arena.data[p->arena.len - 1] == ' ' || p->arena.data[p->arena.len - 1] == '\t'))
        p->arena.len--;
    size_t vlen = p->arena.len - p->val_off;
    const char *name = p->arena.data + p->name_off;
    /* By prefix: http-parser takes any name that begins with
     * transfer-encoding for one (and then refuses a request without chunked). */
    if ((p->name_len >= 14 && !memcmp(name, "content-length", 14)) ||
        (p->name_len >= 17 && !memcmp(name, "transfer-encoding", 17)))
        p->framing_field = 1;
    if (h1_arena_put(&p->arena, "", 1) < 0 ||
        h1_fields_push(p, (h1_field){p->name_off, p->name_len, p->val_off, vlen}) < 0)
        return h1_fail(p, 500, "out of memory");
    return 0;
}

/* The message ended at byte `end` of this slice of length `len`: http-parser
 * (when it was asked) must have ended at exactly the same byte, then tell
 * the app. */
static int message_done(h1_parser *p, size_t end, size_t len)
{
    if (p->hp_fed && (!p->hp_done || end != len))
        return h1_fail(p, 400, "ambiguous message framing");
    p->st = PS_DONE;
    if (p->cb.on_complete && p->cb.on_complete(p->ud) < 0)
        return h1_fail(p, 400, "aborted");
    return 0;
}

static int head_complete(h1_parser *p, size_t end, size_t len)
{
    if (h1_head_finish(p) < 0)
        return -1;
    p->head_done = 1;
    if (p->cb.on_request && p->cb.on_request(p->ud, &p->req) < 0)
        return h1_fail(p, 400, "aborted"); /* the head stays: the log line names it */
    release_head(p, !p->req.chunked && p->req.content_length <= 0);
    if (p->req.chunked) {
        p->st = PS_CHUNK_SIZE_START;
        return 0;
    }
    if (p->req.content_length > 0) {
        p->body_left = (uint64_t)p->req.content_length;
        p->st = PS_BODY_LENGTH;
        return 0;
    }
    return message_done(p, end, len);
}

static int chunk_size_line_done(h1_parser *p)
{
    if (p->body_left == 0) {
        /* last-chunk: the trailer section follows, under the header limits */
        p->in_trailers = 1;
        p->head_bytes = 0;
        p->nfields_seen = 0;
        p->st = PS_HDR_LINE;
    } else {
        p->st = PS_CHUNK_DATA;
    }
    return 0;
}

static int deliver(h1_parser *p, const char *d, size_t n)
{
    if (n && p->cb.on_body && p->cb.on_body(p->ud, d, n) < 0)
        return h1_fail(p, 400, "aborted");
    return 0;
}

/*
 * Run over d[0..len). Stops after the request line (so the caller can feed
 * http-parser its synthetic request line), at the end of the message, or on
 * error. Returns the bytes consumed.
 */
size_t h1_run(h1_parser *p, const char *d, size_t len)
{
    size_t i = 0;
    /* A head read alone is handed over now: the message may end right here. */
    if (p->st == PS_HEAD_READ && (head_complete(p, 0, len) < 0 || p->st == PS_DONE))
        return 0;
    while (i < len) {
        unsigned char c = (unsigned char)d[i];
        switch (p->st) {
        case PS_IDLE:
            /* RFC 9112 §2.2: empty lines before a request are ignored. */
            if (c == '\r') {
                p->st = PS_IDLE_LF;
                i++;
                break;
            }
            p->started = 1;
            if (!h1_tchar[c]) {
                h1_fail(p, 400, "malformed request line");
                return i;
            }
            p->method_off = p->arena.len;
            p->st = PS_METHOD;
            break;
        case PS_IDLE_LF:
            if (c != '\n') {
                p->started = 1;
                h1_fail(p, 400, "bare CR");
                return i;
            }
            p->st = PS_IDLE;
            i++;
            break;
        case PS_METHOD: {
            size_t s = i;
            while (i < len && h1_tchar[(unsigned char)d[i]])
                i++;
            if (line_add(p, i - s) < 0 || h1_arena_put(&p->arena, d + s, i - s) < 0) {
                oom(p);
                return i;
            }
            if (i == len)
                break;
            if (d[i] != ' ' || p->arena.len == p->method_off) {
                h1_fail(p, 400, "invalid method");
                return i;
            }
            p->method_len = p->arena.len - p->method_off;
            for (size_t k = 0; k < p->method_len; k++)
                if (p->arena.data[p->method_off + k] >= 'a' &&
                    p->arena.data[p->method_off + k] <= 'z') {
                    /* methods are case-sensitive; we only take upper-case ones, as nginx */
                    h1_fail(p, 400, "invalid method");
                    return i;
                }
            if (h1_arena_put(&p->arena, "", 1) < 0 || line_add(p, 1) < 0) {
                oom(p);
                return i;
            }
            p->target_off = p->arena.len;
            p->st = PS_TARGET;
            i++;
            break;
        }
        case PS_TARGET: {
            size_t s = i;
            while (i < len && is_target_char((unsigned char)d[i]))
                i++;
            if (line_add(p, i - s) < 0 || h1_arena_put(&p->arena, d + s, i - s) < 0) {
                oom(p);
                return i;
            }
            if (i == len)
                break;
            c = (unsigned char)d[i];
            if (c == '\r' && p->arena.len > p->target_off) {
                h1_fail(p, 505, "HTTP/0.9 not supported");
                return i;
            }
            if (c != ' ' || p->arena.len == p->target_off) {
                h1_fail(p, 400, "malformed request target");
                return i;
            }
            p->target_len = p->arena.len - p->target_off;
            if (h1_arena_put(&p->arena, "", 1) < 0 || line_add(p, 1) < 0) {
                oom(p);
                return i;
            }
            p->st = PS_VERSION;
            i++;
            break;
        }
        case PS_VERSION:
            if (c == '\r') {
                if (finish_version(p) < 0)
                    return i;
                p->st = PS_RL_LF;
                i++;
                break;
            }
            if (line_add(p, 1) < 0)
                return i;
            if (p->vers_len == sizeof p->vers) {
                h1_fail(p, 400, "malformed HTTP version");
                return i;
            }
            p->vers[p->vers_len++] = (char)c;
            i++;
            break;
        case PS_RL_LF:
            if (c != '\n') {
                h1_fail(p, 400, "bare CR in request line");
                return i;
            }
            /* The line's bytes past its free KiB count now, so a head with no
             * fields (HTTP/1.0) is held to the same bound. */
            if (head_add(p, 0) < 0)
                return i;
            p->st = PS_HDR_LINE;
            p->nfields_seen = 0;
            return i + 1; /* the caller now starts http-parser */
        case PS_HDR_LINE:
            if (c == '\r') {
                p->st = PS_HEAD_END_LF;
                i++;
                break;
            }
            if (c == ' ' || c == '\t') {
                h1_fail(p, 400, "obsolete line folding");
                return i;
            }
            if (!h1_tchar[c]) {
                h1_fail(p, 400, "invalid header field name");
                return i;
            }
            p->name_off = p->arena.len;
            p->st = PS_HDR_NAME;
            break;
        case PS_HDR_NAME: {
            size_t s = i;
            while (i < len && h1_tchar[(unsigned char)d[i]])
                i++;
            if (head_add(p, i - s) < 0)
                return i;
            if (!p->in_trailers) {
                /* copied lower-cased, in one pass */
                size_t n = i - s;
                if (h1_arena_reserve(&p->arena, n) < 0) {
                    h1_fail(p, 500, "out of memory");
                    return i;
                }
                char *to = p->arena.data + p->arena.len;
                for (size_t k = 0; k < n; k++) {
                    unsigned char ch = (unsigned char)d[s + k];
                    to[k] = (char)(ch >= 'A' && ch <= 'Z' ? ch | 0x20 : ch);
                }
                p->arena.len += n;
            }
            if (i == len)
                break;
            if (d[i] != ':') {
                h1_fail(p, 400,
                        d[i] == ' ' || d[i] == '\t' ? "whitespace before colon"
                                                    : "invalid header field name");
                return i;
            }
            if (!p->in_trailers) {
                p->name_len = p->arena.len - p->name_off;
                if (h1_arena_put(&p->arena, "", 1) < 0) {
                    h1_fail(p, 500, "out of memory");
                    return i;
                }
                p->val_off = p->arena.len;
            }
            p->st = PS_HDR_OWS;
            i++;
            break;
        }
        case PS_HDR_OWS:
            if (c == ' ' || c == '\t') {
                if (head_add(p, 1) < 0)
                    return i;
                i++;
                break;
            }
            p->st = PS_HDR_VALUE;
            break;
        case PS_HDR_VALUE: {
            size_t s = i;
            while (i < len && is_vchar((unsigned char)d[i]))
                i++;
            if (head_add(p, i - s) < 0)
                return i;
            if (!p->in_trailers && h1_arena_put(&p->arena, d + s, i - s) < 0) {
                h1_fail(p, 500, "out of memory");
                return i;
            }
            if (i == len)
                break;
            if (d[i] != '\r') {
                h1_fail(p, 400, d[i] == '\n' ? "bare LF" : "control character in header value");
                return i;
            }
            p->st = PS_HDR_LF;
            i++;
            break;
        }
        case PS_HDR_LF:
            if (c != '\n') {
                h1_fail(p, 400, "bare CR");
                return i;
            }
            i++;
            if (end_field(p) < 0)
                return i;
            p->st = PS_HDR_LINE;
            break;
        case PS_HEAD_END_LF:
            if (c != '\n') {
                h1_fail(p, 400, "bare CR");
                return i;
            }
            i++;
            if (p->in_trailers) {
                message_done(p, i, len);
                return i;
            }
            if (!p->hp_fed) {
                p->st = PS_HEAD_READ; /* the caller decides about http-parser first */
                return i;
            }
            if (head_complete(p, i, len) < 0 || p->st == PS_DONE)
                return i;
            break;
        case PS_BODY_LENGTH: {
            size_t n = len - i;
            if ((uint64_t)n > p->body_left)
                n = (size_t)p->body_left;
            p->body_left -= n;
            if (deliver(p, d + i, n) < 0)
                return i + n;
            i += n;
            if (p->body_left == 0) {
                message_done(p, i, len);
                return i;
            }
            break;
        }
        case PS_CHUNK_SIZE_START:
            if (hex_digit_value((unsigned char)c) < 0) {
                h1_fail(p, 400, "invalid chunk size");
                return i;
            }
            p->body_left = 0;
            p->chunk_digits = 0;
            p->line_ext = 0;
            p->st = PS_CHUNK_SIZE;
            break;
        case PS_CHUNK_SIZE: {
            int h = hex_digit_value((unsigned char)c);
            if (h >= 0) {
                /* leading zeros are legal but bounded, like everything else */
                if (++p->chunk_digits > 16) {
                    h1_fail(p, 400, "invalid chunk size");
                    return i;
                }
                /* checked before shifting, so it can never overflow */
                uint64_t room = (uint64_t)p->lim.max_body_size - p->body_total;
                if (p->body_left > room >> 4 || (p->body_left << 4 | (uint64_t)h) > room) {
                    h1_fail(p, 413, "request body too large");
                    return i;
                }
                p->body_left = p->body_left << 4 | (uint64_t)h;
                i++;
                break;
            }
            if (c == ';') {
                p->st = PS_CHUNK_EXT;
            } else if (c == ' ' || c == '\t') {
                p->st = PS_CHUNK_BWS;
            } else if (c == '\r') {
                p->body_total += p->body_left;
                p->st = PS_CHUNK_SIZE_LF;
            } else {
                h1_fail(p, 400, "invalid chunk size");
                return i;
            }
            i++;
            break;
        }
        case PS_CHUNK_BWS:
            if (c == ';') {
                p->st = PS_CHUNK_EXT;
            } else if (c != ' ' && c != '\t') {
                h1_fail(p, 400, "invalid chunk size");
                return i;
            }
            if (++p->line_ext > H1_MAX_CHUNK_EXT) {
                h1_fail(p, 400, "chunk extension too long");
                return i;
            }
            i++;
            break;
        case PS_CHUNK_EXT: {
            /* Extensions are ignored, but a bare LF or control byte inside
             * one is where front ends and back ends disagree: refuse. Their
             * size is bounded per line and per message (CVE-2023-39326-like
             * floods of tiny chunks with big extensions). */
            size_t s = i;
            while (i < len && is_vchar((unsigned char)d[i]))
                i++;
            p->line_ext += i - s;
            p->ext_total += i - s;
            if (p->line_ext > H1_MAX_CHUNK_EXT || p->ext_total > H1_MAX_CHUNK_EXT_TOTAL) {
                h1_fail(p, 400, "chunk extension too long");
                return i;
            }
            if (i == len)
                break;
            if (d[i] != '\r') {
                h1_fail(p, 400, "invalid chunk extension");
                return i;
            }
            p->body_total += p->body_left;
            p->st = PS_CHUNK_SIZE_LF;
            i++;
            break;
        }
        case PS_CHUNK_SIZE_LF:
            if (c != '\n') {
                h1_fail(p, 400, "bare CR in chunk size line");
                return i;
            }
            i++;
            chunk_size_line_done(p);
            break;
        case PS_CHUNK_DATA: {
            size_t n = len - i;
            if ((uint64_t)n > p->body_left)
                n = (size_t)p->body_left;
            p->body_left -= n;
            if (deliver(p, d + i, n) < 0)
                return i + n;
            i += n;
            if (p->body_left == 0)
                p->st = PS_CHUNK_DATA_CR;
            break;
        }
        case PS_CHUNK_DATA_CR:
            if (c != '\r') {
                h1_fail(p, 400, "chunk data not followed by CRLF");
                return i;
            }
            p->st = PS_CHUNK_DATA_LF;
            i++;
            break;
        case PS_CHUNK_DATA_LF:
            if (c != '\n') {
                h1_fail(p, 400, "chunk data not followed by CRLF");
                return i;
            }
            p->st = PS_CHUNK_SIZE_START;
            i++;
            break;
        case PS_HEAD_READ: /* handled before the loop */
        case PS_DONE:
        case PS_ERROR:
            return i;
        }
        if (p->st == PS_ERROR)
            return i;
    }
    return i;
}

size_t h1_percent_decode(char *dst, const char *src, size_t len)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '%' && i + 2 < len) {
            int hi = hex_digit_value((unsigned char)src[i + 1]);
            int lo = hex_digit_value((unsigned char)src[i + 2]);
            if (hi >= 0 && lo >= 0) {
                dst[o++] = (char)(hi << 4 | lo);
                i += 2;
                continue;
            }
        }
        dst[o++] = src[i];
    }
    return o;
}
