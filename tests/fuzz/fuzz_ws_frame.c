/*
 * fuzz_ws_frame.c - libFuzzer harness for the WebSocket receive path's pure
 * parts: frame headers (ws_frame_parse_header, ws_frame_check), unmasking,
 * close payloads and the incremental UTF-8 validator.
 *
 * The input is a byte stream from a client, read the way the connection
 * reads it: headers parsed from a window that grows a few bytes at a time
 * (a header must parse the same whether it arrives whole or in pieces),
 * payloads unmasked in pieces at running offsets (compared with a naive
 * unmask), text messages validated fragment by fragment (compared with the
 * whole-string validator and a reference decoder), close payloads parsed.
 * Server headers are round-tripped through the parser. Built by run.sh only.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/ws/utf8.h"
#include "worker/ws/ws_frame.h"

#define MAX_MSG (1 << 16)

/* Reference UTF-8 check (RFC 3629), written plainly, code point by code point. */
static int ref_utf8(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint32_t c = s[i];
        size_t k;
        uint32_t min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            k = 1, c &= 0x1F, min = 0x80;
        } else if ((c & 0xF0) == 0xE0) {
            k = 2, c &= 0x0F, min = 0x800;
        } else if ((c & 0xF8) == 0xF0) {
            k = 3, c &= 0x07, min = 0x10000;
        } else {
            return 0;
        }
        if (n - i <= k) /* the lead byte and k continuation bytes must all be here */
            return 0;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xC0) != 0x80)
                return 0;
            c = (c << 6) | (s[i + j] & 0x3F);
        }
        if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
            return 0;
        i += k + 1;
    }
    return 1;
}

/*
 * Is s[0..n) a prefix of some valid UTF-8 text? True when it is valid, or
 * becomes valid with one to three more continuation bytes (each candidate
 * covers one of the lead bytes' ranges: 80..8F, 90..9F, A0..BF).
 */
static int ref_prefix(const uint8_t *s, size_t n)
{
    static const uint8_t cand[3] = {0x80, 0x90, 0xA0};
    uint8_t tmp[1024 + 3];
    if (n > 1024)
        abort();
    memcpy(tmp, s, n);
    if (ref_utf8(tmp, n))
        return 1;
    for (int a = 0; a < 3; a++) {
        tmp[n] = cand[a];
        if (ref_utf8(tmp, n + 1))
            return 1;
        for (int b = 0; b < 3; b++) {
            tmp[n + 1] = cand[b];
            if (ref_utf8(tmp, n + 2))
                return 1;
            for (int c = 0; c < 3; c++) {
                tmp[n + 2] = cand[c];
                if (ref_utf8(tmp, n + 3))
                    return 1;
            }
        }
    }
    return 0;
}

/* A header parsed from a window of n bytes must agree with one parsed from all. */
static void check_prefixes(const uint8_t *p, size_t avail, int whole, const ws_frame_hdr *hw)
{
    size_t lim = avail < WS_MAX_HEADER ? avail : WS_MAX_HEADER;
    for (size_t n = 0; n <= lim; n++) {
        ws_frame_hdr h;
        int r = ws_frame_parse_header(p, n, &h);
        if (r > 0) {
            if (r != whole || (size_t)r > n)
                abort();
            if (h.len != hw->len || h.opcode != hw->opcode || h.fin != hw->fin ||
                h.masked != hw->masked || memcmp(h.mask, hw->mask, 4) != 0)
                abort();
            return;
        }
        if (r < 0 && whole >= 0)
            abort(); /* a prefix was invalid but the whole header is fine */
        if (r < 0)
            return;
    }
}

static void roundtrip(const ws_frame_hdr *h)
{
    uint8_t out[WS_MAX_HEADER];
    ws_frame_hdr g;
    size_t n = ws_frame_write_header_masked(out, h->fin, h->rsv1, h->opcode, h->len, h->mask);
    if (ws_frame_parse_header(out, n, &g) != (int)n)
        abort();
    if (g.len != h->len || g.opcode != h->opcode || g.fin != h->fin || g.rsv1 != h->rsv1 ||
        !g.masked || memcmp(g.mask, h->mask, 4) != 0)
        abort();
    n = ws_frame_write_header(out, h->fin, 0, h->opcode, h->len);
    if (n > 10 || ws_frame_parse_header(out, n, &g) != (int)n || g.masked || g.len != h->len)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    /* First byte: the piece size for unmasking and UTF-8 feeding; deflate negotiated? */
    size_t step = (size_t)(data[0] & 0x1F) + 1;
    ws_frame_ctx ctx = {(data[0] >> 5) & 1, 0};
    const uint8_t *p = data + 1;
    size_t n = size - 1;

    static uint8_t msg[MAX_MSG];
    size_t msg_len = 0;
    int msg_text = 0;
    utf8_validator v = UTF8_VALIDATOR_INIT;
    int utf8_failed_at_once = 0;

    while (n > 0) {
        ws_frame_hdr h;
        int r = ws_frame_parse_header(p, n, &h);
        check_prefixes(p, n, r, &h);
        if (r == 0)
            break;     /* needs more bytes: the stream ends here */
        if (r < 0)
            return 0;  /* the connection fails with 1002 */
        if ((size_t)r > n || h.hdr_len != (size_t)r)
            abort();
        roundtrip(&h);
        const char *why = NULL;
        int code = ws_frame_check(&h, &ctx, &why);
        if (code != 0) {
            if (code != 1002 || !why)
                abort();
            return 0;
        }
        p += r;
        n -= (size_t)r;
        size_t plen = h.len < n ? (size_t)h.len : n;
        uint8_t payload[MAX_MSG];
        if (plen > sizeof payload)
            plen = sizeof payload;
        memcpy(payload, p, plen);
        /* unmask in pieces at running offsets; compare with the naive loop */
        for (size_t off = 0; off < plen; off += step) {
            size_t k = plen - off < step ? plen - off : step;
            ws_unmask(payload + off, k, h.mask, off);
        }
        for (size_t i = 0; i < plen; i++)
            if (payload[i] != (uint8_t)(p[i] ^ h.mask[i & 3]))
                abort();
        int complete = plen == h.len;
        p += plen;
        n -= plen;

        if (h.opcode == WS_OP_CLOSE) {
            if (!complete)
                break;
            int c = 0;
            const uint8_t *reason = NULL;
            size_t rlen = 0;
            int rc = ws_close_parse(payload, plen, &c, &reason, &rlen);
            if (rc == 0) {
                if (plen == 0 ? c != 1005 : !ws_close_code_valid(c))
                    abort();
                if (plen && (reason != payload + 2 || rlen != plen - 2 || !ref_utf8(reason, rlen)))
                    abort();
            } else if (rc == 1007) {
                if (ref_utf8(payload + 2, plen - 2))
                    abort();
            } else if (rc != 1002) {
                abort();
            }
            return 0; /* nothing is read after a close */
        }
        if (h.opcode == WS_OP_PING || h.opcode == WS_OP_PONG)
            continue;
        if (h.opcode != WS_OP_CONT) {
            msg_len = 0;
            msg_text = h.opcode == WS_OP_TEXT && !h.rsv1; /* compressed text is checked after inflate */
            utf8_reset(&v);
            utf8_failed_at_once = 0;
        }
        if (msg_len + plen > MAX_MSG)
            return 0; /* message too big: 1009 */
        memcpy(msg + msg_len, payload, plen);
        if (msg_text) {
            for (size_t off = 0; off < plen; off += step) {
                size_t k = plen - off < step ? plen - off : step;
                int rc = utf8_feed(&v, payload + off, k);
                if (rc < 0)
                    utf8_failed_at_once = 1;
                /* It fails at once: exactly when the bytes so far are no valid prefix. */
                size_t seen = msg_len + off + k;
                if (seen <= 1024 && (rc == 0) != ref_prefix(msg, seen)) {
                    fprintf(stderr, "utf8_feed %d after %zu bytes, reference prefix %d\n", rc,
                            seen, ref_prefix(msg, seen));
                    abort();
                }
            }
        }
        msg_len += plen;
        ctx.in_message = !h.fin;
        if (h.fin && complete && msg_text) {
            int inc = utf8_complete(&v);
            int whole = utf8_valid(msg, msg_len);
            int ref = ref_utf8(msg, msg_len);
            if (inc != whole || whole != ref) {
                fprintf(stderr, "utf8 disagree: incremental %d whole %d reference %d (len %zu)\n",
                        inc, whole, ref, msg_len);
                abort();
            }
            if (utf8_failed_at_once && inc)
                abort();
        }
        if (!complete)
            break;
    }
    return 0;
}
