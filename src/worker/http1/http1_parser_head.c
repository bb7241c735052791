/*
 * http1_parser_head.c - what a syntactically valid request head means: body
 * framing (Content-Length / Transfer-Encoding, RFC 9112 §6), Host, the
 * Connection / Expect / Upgrade flags, the request-target forms and the
 * Cookie merge. Everything ambiguous is refused here, before the app runs.
 */
#include "http1_parser_int.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define NAME_IS(p, f, lit)                                                                         \
    ((f)->name_len == sizeof(lit) - 1 &&                                                           \
     memcmp((p)->arena.data + (f)->name_off, lit, sizeof(lit) - 1) == 0)

static inline int is_ows(char c)
{
    return c == ' ' || c == '\t';
}

/*
 * Next element of a comma-separated list (RFC 9110 §5.6.1), skipping empty
 * ones. Returns 0 at the end.
 */
static int next_elem(const char **cur, const char *end, const char **e, size_t *elen)
{
    const char *s = *cur;
    while (s < end && (*s == ',' || is_ows(*s)))
        s++;
    if (s == end) {
        *cur = s;
        return 0;
    }
    const char *t = s;
    while (t < end && *t != ',')
        t++;
    *cur = t;
    while (t > s && is_ows(t[-1]))
        t--;
    *e = s;
    *elen = (size_t)(t - s);
    return 1;
}

static int elem_is(const char *e, size_t n, const char *tok)
{
    size_t tl = strlen(tok);
    return n == tl && strncasecmp(e, tok, tl) == 0;
}

static int list_has(const char *v, size_t len, const char *tok)
{
    const char *cur = v, *e;
    size_t n;
    while (next_elem(&cur, v + len, &e, &n))
        if (elem_is(e, n, tok))
            return 1;
    return 0;
}

/* Content-Length: 1*DIGIT and nothing else (no lists, no sign). */
static int parse_length(const char *v, size_t len, int64_t *out)
{
    if (len == 0)
        return -1;
    int64_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (v[i] < '0' || v[i] > '9')
            return -1;
        int d = v[i] - '0';
        if (n > (INT64_MAX - d) / 10)
            return -1;
        n = n * 10 + d;
    }
    *out = n;
    return 0;
}

typedef struct te_state {
    int seen, elems, chunked, last_chunked, other;
} te_state;

static void te_scan(te_state *te, const char *v, size_t len)
{
    const char *cur = v, *e;
    size_t n;
    te->seen = 1;
    while (next_elem(&cur, v + len, &e, &n)) {
        te->elems++;
        if (elem_is(e, n, "chunked")) {
            te->chunked++;
            te->last_chunked = 1;
        } else {
            te->other = 1;
            te->last_chunked = 0;
        }
    }
}

static int add_field(h1_parser *p, const char *name, size_t name_len, size_t val_off,
                     size_t val_len)
{
    size_t off = p->arena.len;
    if (h1_arena_put(&p->arena, name, name_len) < 0 || h1_arena_put(&p->arena, "", 1) < 0)
        return -1;
    return h1_fields_push(p, (h1_field){off, name_len, val_off, val_len});
}

/* Append a NUL-terminated copy of arena bytes [off, off+len); its offset. */
static int arena_copy(h1_parser *p, size_t off, size_t len, size_t *out)
{
    if (h1_arena_reserve(&p->arena, len + 1) < 0)
        return -1;
    *out = p->arena.len;
    memmove(p->arena.data + p->arena.len, p->arena.data + off, len);
    p->arena.data[p->arena.len + len] = 0;
    p->arena.len += len + 1;
    return 0;
}

/* Merge every cookie field into the first one, "; "-joined (PAGI Www). */
static int merge_cookies(h1_parser *p)
{
    size_t first = SIZE_MAX, count = 0, total = 0;
    for (size_t i = 0; i < p->nfields; i++) {
        h1_field *f = &p->fields[i];
        if (NAME_IS(p, f, "cookie")) {
            if (first == SIZE_MAX)
                first = i;
            count++;
            total += f->val_len + 2;
        }
    }
    if (count < 2)
        return 0;
    if (h1_arena_reserve(&p->arena, total + 1) < 0)
        return -1;
    size_t base = p->arena.len, o = base, w = 0;
    for (size_t i = 0; i < p->nfields; i++) {
        h1_field *f = &p->fields[i];
        if (!NAME_IS(p, f, "cookie")) {
            p->fields[w++] = *f;
            continue;
        }
        if (f->val_len) { /* an empty Cookie line adds nothing, not "; ; " */
            if (o != base) {
                memcpy(p->arena.data + o, "; ", 2);
                o += 2;
            }
            memcpy(p->arena.data + o, p->arena.data + f->val_off, f->val_len);
            o += f->val_len;
        }
        if (i == first)
            p->fields[w++] = *f;
    }
    p->arena.data[o] = 0;
    /* first is still at its index: only later cookie fields were dropped */
    p->fields[first].val_off = base;
    p->fields[first].val_len = o - base;
    p->arena.len = o + 1;
    p->nfields = w;
    return 0;
}

/*
 * request-target forms (RFC 9112 §3.2): origin-form, absolute-form (whose
 * authority replaces Host, §3.2.2) and asterisk-form for OPTIONS only.
 * Authority-form is CONNECT's, refused earlier. Sets raw_path/query/path
 * offsets; may add or rewrite the host field.
 */
typedef struct target_parts {
    size_t raw_off, raw_len, query_off, query_len, path_off, path_len;
} target_parts;

static int split_target(h1_parser *p, size_t host_idx, target_parts *tp)
{
    size_t t = p->target_off, tl = p->target_len;
    const char *s = p->arena.data + t;
    size_t start; /* offset of the path within the target */

    if (tl == 1 && s[0] == '*') {
        if (strcmp(p->arena.data + p->method_off, "OPTIONS") != 0)
            return h1_fail(p, 400, "asterisk-form target only for OPTIONS");
        start = 0;
    } else if (s[0] == '/') {
        start = 0;
    } else {
        size_t sch;
        if (tl > 7 && strncasecmp(s, "http://", 7) == 0)
            sch = 7;
        else if (tl > 8 && strncasecmp(s, "https://", 8) == 0)
            sch = 8;
        else
            return h1_fail(p, 400, "malformed request target");
        size_t a = sch;
        while (a < tl && s[a] != '/' && s[a] != '?')
            a++;
        if (a == sch || memchr(s + sch, '@', a - sch))
            return h1_fail(p, 400, "invalid authority in request target");
        size_t host_val;
        if (arena_copy(p, t + sch, a - sch, &host_val) < 0)
            return h1_fail(p, 500, "out of memory");
        if (host_idx != SIZE_MAX) {
            p->fields[host_idx].val_off = host_val;
            p->fields[host_idx].val_len = a - sch;
        } else if (add_field(p, "host", 4, host_val, a - sch) < 0) {
            return h1_fail(p, 500, "out of memory");
        }
        start = a;
    }

    s = p->arena.data + t; /* the arena may have moved */
    const char *q = memchr(s + start, '?', tl - start);
    size_t raw_len = q ? (size_t)(q - s) - start : tl - start;
    tp->query_off = q ? t + (size_t)(q - s) + 1 : t + tl; /* the target's NUL */
    tp->query_len = q ? tl - (size_t)(q - s) - 1 : 0;
    if (raw_len == 0) {
        /* "http://host" or "http://host?q": the path is "/" (RFC 9112 §3.2.2) */
        tp->raw_off = p->arena.len;
        tp->raw_len = 1;
        if (h1_arena_put(&p->arena, "/", 2) < 0)
            return h1_fail(p, 500, "out of memory");
    } else if (!q && start == 0) {
        tp->raw_off = t; /* already NUL-terminated */
        tp->raw_len = raw_len;
    } else if (arena_copy(p, t + start, raw_len, &tp->raw_off) < 0) {
        return h1_fail(p, 500, "out of memory");
    } else {
        tp->raw_len = raw_len;
    }

    if (!memchr(p->arena.data + tp->raw_off, '%', tp->raw_len)) {
        tp->path_off = tp->raw_off;
        tp->path_len = tp->raw_len;
        return 0;
    }
    if (arena_copy(p, tp->raw_off, tp->raw_len, &tp->path_off) < 0)
        return h1_fail(p, 500, "out of memory");
    char *d = p->arena.data + tp->path_off;
    tp->path_len = h1_percent_decode(d, d, tp->raw_len);
    d[tp->path_len] = 0;
    /* A decoded NUL would cut the path short wherever it is used as a C
     * string (a file name, a mount prefix): refused before any app. */
    if (memchr(d, 0, tp->path_len))
        return h1_fail(p, 400, "%00 (NUL) in the request path");
    return 0;
}

int h1_head_finish(h1_parser *p)
{
    h1_request *r = &p->req;
    int minor = r->http_minor;
    size_t host_idx = SIZE_MAX, hosts = 0, lengths = 0;
    int64_t clen = -1;
    te_state te = {0};
    int conn_close = 0, conn_keep = 0, conn_upgrade = 0;
    int expect = 0, upgrade_ws = 0, sse = 0;

    if (strcmp(p->arena.data + p->method_off, "CONNECT") == 0)
        return h1_fail(p, 501, "CONNECT not supported");

    for (size_t i = 0; i < p->nfields; i++) {
        h1_field *f = &p->fields[i];
        const char *v = p->arena.data + f->val_off;
        size_t n = f->val_len;
        if (NAME_IS(p, f, "host")) {
            hosts++;
            host_idx = i;
        } else if (NAME_IS(p, f, "content-length")) {
            /* even two equal values are refused: proxies disagree on them */
            if (++lengths > 1)
                return h1_fail(p, 400, "duplicate Content-Length");
            if (parse_length(v, n, &clen) < 0)
                return h1_fail(p, 400, "invalid Content-Length");
        } else if (NAME_IS(p, f, "transfer-encoding")) {
            te_scan(&te, v, n);
        } else if (NAME_IS(p, f, "connection")) {
            conn_close |= list_has(v, n, "close");
            conn_keep |= list_has(v, n, "keep-alive");
            conn_upgrade |= list_has(v, n, "upgrade");
        } else if (NAME_IS(p, f, "expect")) {
            expect |= elem_is(v, n, "100-continue");
        } else if (NAME_IS(p, f, "upgrade")) {
            upgrade_ws |= list_has(v, n, "websocket");
        } else if (NAME_IS(p, f, "accept")) {
            sse |= strcasestr(v, "text/event-stream") != NULL;
        }
    }

    if (hosts > 1)
        return h1_fail(p, 400, "more than one Host");
    if (hosts == 0 && minor == 1)
        return h1_fail(p, 400, "missing Host");
    if (te.seen) {
        if (lengths)
            return h1_fail(p, 400, "both Content-Length and Transfer-Encoding");
        if (minor == 0) /* RFC 9112 §6.1: faulty framing; nginx refuses it too */
            return h1_fail(p, 400, "Transfer-Encoding in an HTTP/1.0 request");
        if (te.chunked > 1)
            return h1_fail(p, 400, "chunked applied twice");
        if (!te.last_chunked)
            return h1_fail(p, 400, "final transfer coding is not chunked");
        if (te.other)
            return h1_fail(p, 501, "unsupported transfer coding");
    }
    if (clen > 0 && (uint64_t)clen > (uint64_t)p->lim.max_body_size)
        return h1_fail(p, 413, "request body too large");

    target_parts tp;
    if (split_target(p, host_idx, &tp) < 0)
        return -1;
    if (merge_cookies(p) < 0)
        return h1_fail(p, 500, "out of memory");

    /* From here on the arena no longer moves: hand out pointers. */
    if (p->nfields > p->headers_cap) {
        size_t cap = p->nfields; /* freed once the head is handed over: no slack */
        pagi_header *h = realloc(p->headers, cap * sizeof *h);
        if (!h)
            return h1_fail(p, 500, "out of memory");
        p->headers = h;
        p->headers_cap = cap;
    }
    for (size_t i = 0; i < p->nfields; i++) {
        h1_field *f = &p->fields[i];
        p->headers[i].name = (pagi_str){p->arena.data + f->name_off, f->name_len};
        p->headers[i].value = (pagi_str){p->arena.data + f->val_off, f->val_len};
    }
    r->method = p->arena.data + p->method_off;
    r->raw_path = (pagi_str){p->arena.data + tp.raw_off, tp.raw_len};
    r->path = (pagi_str){p->arena.data + tp.path_off, tp.path_len};
    r->query = (pagi_str){p->arena.data + tp.query_off, tp.query_len};
    r->headers = p->headers;
    r->header_count = p->nfields;
    r->content_length = clen;
    r->chunked = te.seen;
    r->keep_alive = minor == 1 ? !conn_close : (conn_keep && !conn_close);
    r->expect_continue = minor == 1 && expect;
    r->upgrade_websocket = minor == 1 && upgrade_ws && conn_upgrade;
    r->accepts_event_stream = sse;
    return 0;
}
