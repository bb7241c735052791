/*
 * fuzz_http1_parser.c - libFuzzer harness for the HTTP/1.x request parser.
 * Differential: the input (pipelined requests) is parsed once whole and once
 * in pieces of a size taken from the first byte; both runs must produce the
 * same event log, and sanitizers watch every byte. Built by run.sh only.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/http1/http1_parser.h"

typedef struct logbuf {
    char s[1 << 16];
    size_t n;
    uint64_t body_hash;
    uint64_t body_len;
} logbuf;

static void logf_(logbuf *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(logbuf *l, const char *fmt, ...)
{
    if (l->n >= sizeof l->s - 1)
        return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(l->s + l->n, sizeof l->s - l->n, fmt, ap);
    va_end(ap);
    if (k > 0)
        l->n += (size_t)k < sizeof l->s - l->n ? (size_t)k : sizeof l->s - l->n - 1;
}

static uint64_t fnv(uint64_t h, const char *d, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)d[i]) * 1099511628211ULL;
    return h;
}

static int on_request(void *ud, const h1_request *r)
{
    logbuf *l = ud;
    /* touch every string: ASan checks they are in bounds and terminated */
    uint64_t h = fnv(14695981039346656037ULL, r->method, strlen(r->method));
    h = fnv(h, r->path.ptr, r->path.len + 1);
    h = fnv(h, r->raw_path.ptr, r->raw_path.len + 1);
    h = fnv(h, r->query.ptr, r->query.len + 1);
    for (size_t i = 0; i < r->header_count; i++) {
        h = fnv(h, r->headers[i].name.ptr, r->headers[i].name.len + 1);
        h = fnv(h, r->headers[i].value.ptr, r->headers[i].value.len + 1);
        for (size_t k = 0; k < r->headers[i].name.len; k++)
            if (r->headers[i].name.ptr[k] >= 'A' && r->headers[i].name.ptr[k] <= 'Z')
                abort(); /* names must be lower-case */
    }
    logf_(l, "R%016llx/%d/%lld/%d%d%d%d%d/%zu;", (unsigned long long)h, r->http_minor,
          (long long)r->content_length, r->chunked, r->keep_alive, r->expect_continue,
          r->upgrade_websocket, r->accepts_event_stream, r->header_count);
    l->body_hash = 14695981039346656037ULL;
    l->body_len = 0;
    return 0;
}

static int on_body(void *ud, const char *d, size_t n)
{
    logbuf *l = ud;
    if (n == 0)
        abort(); /* the contract: never empty */
    l->body_hash = fnv(l->body_hash, d, n);
    l->body_len += n;
    return 0;
}

static int on_complete(void *ud)
{
    logbuf *l = ud;
    logf_(l, "C%llu/%016llx;", (unsigned long long)l->body_len, (unsigned long long)l->body_hash);
    return 0;
}

static const h1_parser_callbacks cbs = {on_request, on_body, on_complete};

/* Parse everything, pipelined, in pieces of `step` bytes (0 = whole). */
static void run(const char *d, size_t len, size_t step, const h1_limits *lim, logbuf *l)
{
    h1_parser *p = h1_parser_new(lim, &cbs, l);
    if (!p)
        abort();
    size_t off = 0, avail = 0; /* [off, off+avail) is "in the socket buffer" */
    size_t msg_start = 0;
    for (;;) {
        if (avail == 0) {
            if (off >= len)
                break;
            avail = step && step < len - off ? step : len - off;
        }
        size_t used = 0;
        h1_state st = h1_parser_feed(p, d + off, avail, &used);
        if (used > avail)
            abort();
        off += used;
        avail -= used;
        if (st == H1_ERROR) {
            int s = h1_parser_error_status(p);
            if (s < 400 || s > 505)
                abort();
            logf_(l, "E%d;", s);
            break;
        }
        if (st == H1_DONE) {
            logf_(l, "D%zu;", off - msg_start);
            msg_start = off;
            h1_parser_reset(p);
            continue;
        }
        if (avail != 0)
            abort();   /* NEED_MORE must take everything */
        if (off < len) /* grow the window: more bytes arrived */
            avail = step && step < len - off ? step : len - off;
        else
            break;
    }
    logf_(l, "S%d%d;", h1_parser_started(p), h1_parser_head_done(p));
    h1_parser_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    /* The first byte picks the piece size (low part) and the limits (high part). */
    size_t step = data[0] % 17 + 1;
    const char *d = (const char *)data + 1;
    size_t len = size - 1;
    static const h1_limits lims[4] = {
        {256, 512, 16, 4096},           /* small: every limit is reachable */
        {8192, 65536, 100, 1u << 20},   /* the defaults' order of magnitude */
        {16, 32, 2, 0},                 /* tiny: limits hit on the first bytes */
        {4096, 4096, 64, (size_t)-1},   /* no practical body limit */
    };
    const h1_limits *lim = &lims[(data[0] / 17) % 4];
    static logbuf a, b;
    a.n = b.n = 0;
    run(d, len, 0, lim, &a);
    run(d, len, step, lim, &b);
    if (a.n != b.n || memcmp(a.s, b.s, a.n) != 0) {
        fprintf(stderr, "whole: %.*s\nsplit(%zu): %.*s\n", (int)a.n, a.s, step, (int)b.n, b.s);
        abort();
    }
    return 0;
}
