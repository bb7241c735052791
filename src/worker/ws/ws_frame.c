/*
 * ws_frame.c - RFC 6455 frame headers and close payloads. The receiver's
 * rules (section 5): client frames are masked, RSV bits are zero unless an
 * extension gave them meaning, control frames are short and unfragmented,
 * continuations belong to an open message, lengths use the shortest form.
 */
#include "ws_frame.h"

#include <string.h>

#include "utf8.h"

int ws_frame_parse_header(const uint8_t *p, size_t n, ws_frame_hdr *h)
{
    if (n < 2)
        return 0;
    memset(h, 0, sizeof *h);
    h->fin = (p[0] >> 7) & 1;
    h->rsv1 = (p[0] >> 6) & 1;
    h->rsv2 = (p[0] >> 5) & 1;
    h->rsv3 = (p[0] >> 4) & 1;
    h->opcode = p[0] & 0x0F;
    h->masked = (p[1] >> 7) & 1;
    uint64_t len = p[1] & 0x7F;
    size_t need = 2;
    if (len == 126) {
        need += 2;
        if (n < need)
            return 0;
        len = ((uint64_t)p[2] << 8) | p[3];
        if (len < 126)
            return -1; /* RFC 6455 5.2: the minimal number of bytes MUST be used */
    } else if (len == 127) {
        need += 8;
        if (n < need)
            return 0;
        if (p[2] & 0x80)
            return -1; /* the most significant bit MUST be 0 */
        len = 0;
        for (int i = 0; i < 8; i++)
            len = (len << 8) | p[2 + i];
        if (len <= 0xFFFF)
            return -1;
    }
    if (h->masked) {
        if (n < need + 4)
            return 0;
        memcpy(h->mask, p + need, 4);
        need += 4;
    }
    h->len = len;
    h->hdr_len = need;
    return (int)need;
}

static int is_control(unsigned op)
{
    return (op & 0x8) != 0;
}

int ws_frame_check(const ws_frame_hdr *h, const ws_frame_ctx *ctx, const char **why)
{
    const char *dummy;
    if (!why)
        why = &dummy;
    if (!h->masked) {
        *why = "client frame not masked";
        return 1002;
    }
    if (h->rsv2 || h->rsv3) {
        *why = "reserved bit set";
        return 1002;
    }
    switch (h->opcode) {
    case WS_OP_CONT:
    case WS_OP_TEXT:
    case WS_OP_BINARY:
    case WS_OP_CLOSE:
    case WS_OP_PING:
    case WS_OP_PONG:
        break;
    default:
        *why = "reserved opcode";
        return 1002;
    }
    if (is_control(h->opcode)) {
        if (!h->fin) {
            *why = "fragmented control frame";
            return 1002;
        }
        if (h->len > WS_MAX_CONTROL_PAYLOAD) {
            *why = "control frame payload over 125 bytes";
            return 1002;
        }
        if (h->rsv1) {
            *why = "RSV1 on a control frame";
            return 1002;
        }
        if (h->opcode == WS_OP_CLOSE && h->len == 1) {
            *why = "close frame with a 1-byte payload";
            return 1002;
        }
        return 0;
    }
    if (h->opcode == WS_OP_CONT) {
        if (!ctx->in_message) {
            *why = "continuation frame without a message to continue";
            return 1002;
        }
        if (h->rsv1) {
            *why = "RSV1 on a continuation frame";
            return 1002;
        }
        return 0;
    }
    if (ctx->in_message) {
        *why = "new data frame while a fragmented message is open";
        return 1002;
    }
    if (h->rsv1 && !ctx->deflate) {
        *why = "RSV1 set without a negotiated extension";
        return 1002;
    }
    return 0;
}

void ws_unmask(uint8_t *p, size_t n, const uint8_t mask[4], uint64_t offset)
{
    size_t k = (size_t)(offset & 3);
    size_t i = 0;
    /* Align to the mask phase, then eight bytes at a time. */
    while (i < n && k != 0) {
        p[i++] ^= mask[k];
        k = (k + 1) & 3;
    }
    uint8_t m8[8] = {mask[0], mask[1], mask[2], mask[3], mask[0], mask[1], mask[2], mask[3]};
    uint64_t m;
    memcpy(&m, m8, 8);
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        w ^= m;
        memcpy(p + i, &w, 8);
    }
    for (k = 0; i < n; i++, k++)
        p[i] ^= mask[k & 3];
}

static size_t write_header(uint8_t *out, int fin, int rsv1, unsigned opcode, uint64_t len,
                           int masked)
{
    out[0] = (uint8_t)((fin ? 0x80 : 0) | (rsv1 ? 0x40 : 0) | (opcode & 0x0F));
    uint8_t mbit = masked ? 0x80 : 0;
    if (len < 126) {
        out[1] = (uint8_t)(mbit | len);
        return 2;
    }
    if (len <= 0xFFFF) {
        out[1] = mbit | 126;
        out[2] = (uint8_t)(len >> 8);
        out[3] = (uint8_t)len;
        return 4;
    }
    out[1] = mbit | 127;
    for (int i = 0; i < 8; i++)
        out[2 + i] = (uint8_t)(len >> (56 - 8 * i));
    return 10;
}

size_t ws_frame_write_header(uint8_t out[WS_MAX_HEADER], int fin, int rsv1, unsigned opcode,
                             uint64_t len)
{
    return write_header(out, fin, rsv1, opcode, len, 0);
}

size_t ws_frame_write_header_masked(uint8_t out[WS_MAX_HEADER], int fin, int rsv1, unsigned opcode,
                                    uint64_t len, const uint8_t mask[4])
{
    size_t n = write_header(out, fin, rsv1, opcode, len, 1);
    memcpy(out + n, mask, 4);
    return n + 4;
}

int ws_close_code_valid(int code)
{
    if (code >= 1000 && code <= 1003)
        return 1;
    if (code >= 1007 && code <= 1014)
        return 1; /* 1012-1014 are IANA-registered since RFC 6455 */
    return code >= 3000 && code <= 4999;
}

int ws_close_code_sendable(int code)
{
    return code != 1010 && ws_close_code_valid(code);
}

int ws_close_parse(const uint8_t *p, size_t n, int *code, const uint8_t **reason,
                   size_t *reason_len)
{
    *reason = p;
    *reason_len = 0;
    if (n == 0) {
        *code = WS_CLOSE_NO_STATUS;
        return 0;
    }
    if (n == 1 || n > WS_MAX_CONTROL_PAYLOAD)
        return 1002;
    int c = (p[0] << 8) | p[1];
    if (!ws_close_code_valid(c))
        return 1002;
    if (!utf8_valid(p + 2, n - 2))
        return 1007;
    *code = c;
    *reason = p + 2;
    *reason_len = n - 2;
    return 0;
}
