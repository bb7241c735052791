/*
 * ws_deflate.c - permessage-deflate with zlib raw streams. Negotiation
 * accepts the parameters RFC 7692 defines (and declines offers we cannot
 * honour, such as an 8-bit server window zlib's raw deflate lacks);
 * inflation writes into the message buffer in bounded steps so the size cap
 * is checked before memory is spent.
 */
#include "ws_deflate.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define INFLATE_STEP 16384

struct ws_deflate {
    ws_deflate_params p;
    z_stream in, out;
    int in_ok, out_ok;
};

/* ---- negotiation ---- */

typedef struct span {
    const char *p;
    size_t n;
} span;

static span trim(const char *p, size_t n)
{
    while (n && (*p == ' ' || *p == '\t'))
        p++, n--;
    while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
        n--;
    return (span){p, n};
}

static int span_is(span s, const char *word)
{
    size_t k = strlen(word);
    return s.n == k && strncasecmp(s.p, word, k) == 0;
}

/* A window-bits value: 8..15, plain or quoted; -1 if malformed. */
static int parse_bits(span v)
{
    if (v.n >= 2 && v.p[0] == '"' && v.p[v.n - 1] == '"')
        v = (span){v.p + 1, v.n - 2};
    if (v.n == 0 || v.n > 2)
        return -1;
    int x = 0;
    for (size_t i = 0; i < v.n; i++) {
        if (!isdigit((unsigned char)v.p[i]))
            return -1;
        x = x * 10 + (v.p[i] - '0');
    }
    if (v.n == 2 && v.p[0] == '0')
        return -1;
    return x >= 8 && x <= 15 ? x : -1;
}

/* One offer "permessage-deflate; a; b=1": 1 accepted (params filled), 0 declined. */
static int consider_offer(span offer, ws_deflate_params *out)
{
    ws_deflate_params p = {0, 0, 15, 0};
    int seen_snct = 0, seen_cnct = 0, seen_smwb = 0, seen_cmwb = 0;
    const char *s = offer.p, *end = offer.p + offer.n;
    int first = 1;
    while (s <= end) {
        const char *semi = memchr(s, ';', (size_t)(end - s));
        const char *stop = semi ? semi : end;
        span item = trim(s, (size_t)(stop - s));
        if (first) {
            if (!span_is(item, "permessage-deflate"))
                return 0;
            first = 0;
        } else {
            const char *eq = memchr(item.p, '=', item.n);
            span name = trim(item.p, eq ? (size_t)(eq - item.p) : item.n);
            span val = eq ? trim(eq + 1, (size_t)(item.p + item.n - eq - 1)) : (span){NULL, 0};
            if (span_is(name, "server_no_context_takeover")) {
                if (seen_snct++ || eq)
                    return 0;
                p.server_no_context_takeover = 1;
            } else if (span_is(name, "client_no_context_takeover")) {
                if (seen_cnct++ || eq)
                    return 0;
                p.client_no_context_takeover = 1;
            } else if (span_is(name, "server_max_window_bits")) {
                int bits = eq ? parse_bits(val) : -1;
                if (seen_smwb++ || bits < 0)
                    return 0;
                if (bits < 9)
                    return 0; /* zlib's raw deflate has no 256-byte window */
                p.server_max_window_bits = bits;
                p.server_window_requested = 1;
            } else if (span_is(name, "client_max_window_bits")) {
                /* A hint that the client can limit its window; we inflate with 15 bits anyway. */
                if (seen_cmwb++ || (eq && parse_bits(val) < 0))
                    return 0;
            } else {
                return 0; /* unknown parameter: decline this offer */
            }
        }
        if (!semi)
            break;
        s = semi + 1;
    }
    *out = p;
    return 1;
}

int ws_deflate_negotiate(const char *value, size_t len, ws_deflate_params *out)
{
    const char *s = value, *end = value + len;
    while (s < end) {
        /* Offers are comma-separated; a quoted value never holds a comma we care about. */
        const char *comma = memchr(s, ',', (size_t)(end - s));
        const char *stop = comma ? comma : end;
        span offer = trim(s, (size_t)(stop - s));
        if (offer.n && consider_offer(offer, out))
            return 1;
        if (!comma)
            break;
        s = comma + 1;
    }
    return 0;
}

int ws_deflate_response(const ws_deflate_params *p, char *out, size_t size)
{
    int n = snprintf(out, size, "permessage-deflate%s%s",
                     p->server_no_context_takeover ? "; server_no_context_takeover" : "",
                     p->client_no_context_takeover ? "; client_no_context_takeover" : "");
    if (n < 0 || (size_t)n >= size)
        return -1;
    if (p->server_window_requested) {
        int k = snprintf(out + n, size - (size_t)n, "; server_max_window_bits=%d",
                         p->server_max_window_bits);
        if (k < 0 || (size_t)k >= size - (size_t)n)
            return -1;
        n += k;
    }
    return n;
}

/* ---- streams ---- */

/*
 * Streams exist only while they carry something. A stream without context
 * takeover holds nothing between messages: the inflater is set up at a
 * message's first compressed byte and ended with the message; every
 * connection whose server side resets after each message compresses with
 * one stream per process (a message is compressed whole, in one call, so
 * no two connections ever interleave in it). A stream with context
 * takeover lives from its first message to the connection's end.
 */
#define OUT_MEM_LEVEL 8

static struct {
    z_stream z;
    int bits; /* window bits it was set up with; 0 = none */
} shared_out;

ws_deflate *ws_deflate_new(const ws_deflate_params *p)
{
    ws_deflate *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->p = *p;
    return d;
}

static void inflate_release(ws_deflate *d)
{
    if (d->in_ok)
        inflateEnd(&d->in);
    d->in_ok = 0;
}

void ws_deflate_free(ws_deflate *d)
{
    if (!d)
        return;
    inflate_release(d);
    if (d->out_ok)
        deflateEnd(&d->out);
    free(d);
}

size_t ws_deflate_held(const ws_deflate *d)
{
    return d ? (size_t)(d->in_ok + d->out_ok) : 0;
}

static z_stream *inflater(ws_deflate *d)
{
    if (!d->in_ok) {
        /* Inflate with the largest window: whatever the client uses fits. */
        memset(&d->in, 0, sizeof d->in);
        if (inflateInit2(&d->in, -15) != Z_OK)
            return NULL;
        d->in_ok = 1;
    }
    return &d->in;
}

static z_stream *deflater(ws_deflate *d)
{
    int bits = d->p.server_max_window_bits;
    if (!d->p.server_no_context_takeover) {
        if (!d->out_ok) {
            memset(&d->out, 0, sizeof d->out);
            if (deflateInit2(&d->out, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -bits, OUT_MEM_LEVEL,
                             Z_DEFAULT_STRATEGY) != Z_OK)
                return NULL;
            d->out_ok = 1;
        }
        return &d->out;
    }
    if (shared_out.bits == bits)
        return deflateReset(&shared_out.z) == Z_OK ? &shared_out.z : NULL;
    if (shared_out.bits)
        deflateEnd(&shared_out.z);
    shared_out.bits = 0;
    memset(&shared_out.z, 0, sizeof shared_out.z);
    if (deflateInit2(&shared_out.z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -bits, OUT_MEM_LEVEL,
                     Z_DEFAULT_STRATEGY) != Z_OK)
        return NULL;
    shared_out.bits = bits;
    return &shared_out.z;
}

int ws_inflate_feed(ws_deflate *d, const void *in, size_t n, buf *out, size_t max)
{
    z_stream *z = inflater(d);
    if (!z)
        return WS_INFLATE_NOMEM;
    z->next_in = (Bytef *)(uintptr_t)in;
    z->avail_in = (uInt)n;
    for (;;) {
        size_t have = buf_size(out);
        /* One byte past the cap is enough to know the message is too big. */
        size_t room = max + 1 - have;
        if (room > INFLATE_STEP)
            room = INFLATE_STEP;
        char *dst = buf_reserve(out, room);
        if (!dst)
            return WS_INFLATE_TOO_BIG;
        z->next_out = (Bytef *)dst;
        z->avail_out = (uInt)room;
        int rc = inflate(z, Z_SYNC_FLUSH);
        size_t made = room - z->avail_out;
        buf_commit(out, made);
        if (buf_size(out) > max)
            return WS_INFLATE_TOO_BIG;
        if (rc == Z_STREAM_END) {
            /* A final block: the stream restarts for whatever follows. */
            inflateReset(z);
            if (z->avail_in == 0)
                return WS_INFLATE_OK;
            continue;
        }
        if (rc == Z_BUF_ERROR)
            return WS_INFLATE_OK; /* no progress possible: needs more input */
        if (rc != Z_OK)
            return WS_INFLATE_CORRUPT;
        if (z->avail_in == 0 && z->avail_out > 0)
            return WS_INFLATE_OK;
    }
}

int ws_inflate_end(ws_deflate *d, buf *out, size_t max)
{
    static const unsigned char tail[4] = {0x00, 0x00, 0xff, 0xff};
    int rc = ws_inflate_feed(d, tail, sizeof tail, out, max);
    /* Without context takeover the next message starts afresh: hold no window until then. */
    if (d->p.client_no_context_takeover)
        inflate_release(d);
    return rc;
}

int ws_deflate_message(ws_deflate *d, const void *in, size_t n, buf *out)
{
    z_stream *z = deflater(d);
    if (!z)
        return -1;
    z->next_in = (Bytef *)(uintptr_t)in;
    z->avail_in = (uInt)n;
    size_t start = buf_size(out);
    for (;;) {
        size_t room = deflateBound(z, z->avail_in) + 16;
        char *dst = buf_reserve(out, room);
        if (!dst)
            return -1;
        z->next_out = (Bytef *)dst;
        z->avail_out = (uInt)room;
        int rc = deflate(z, Z_SYNC_FLUSH);
        buf_commit(out, room - z->avail_out);
        if (rc != Z_OK && rc != Z_BUF_ERROR)
            return -1;
        if (z->avail_in == 0 && z->avail_out > 0)
            break;
    }
    /* RFC 7692 7.2.1: drop the 00 00 ff ff that ends the sync flush. */
    size_t made = buf_size(out) - start;
    const unsigned char *t = (const unsigned char *)buf_head(out) + buf_size(out) - 4;
    /* Nothing to flush (an empty message right after another flush): zlib wrote no block, so
     * send the one byte 0x00 that, with the receiver's 00 00 ff ff, is an empty stored block
     * (RFC 7692 7.2.3.6); an empty payload would leave the peer's stream out of step. */
    if (made >= 4 && t[0] == 0 && t[1] == 0 && t[2] == 0xff && t[3] == 0xff)
        out->len -= 4;
    else if (made == 0 && buf_append(out, "", 1) < 0)
        return -1;
    return 0;
}
