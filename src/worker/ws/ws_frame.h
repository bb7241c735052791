/*
 * ws_frame.h - RFC 6455 framing: parsing and checking frame headers from a
 * client, unmasking payloads, writing (unmasked) server frame headers, and
 * the close-code rules. Pure functions over bytes: no I/O, no allocation.
 */
#ifndef PAGID_WS_FRAME_H
#define PAGID_WS_FRAME_H

#include <stddef.h>
#include <stdint.h>

enum {
    WS_OP_CONT = 0x0,
    WS_OP_TEXT = 0x1,
    WS_OP_BINARY = 0x2,
    WS_OP_CLOSE = 0x8,
    WS_OP_PING = 0x9,
    WS_OP_PONG = 0xA,
};

/* Close codes the server itself uses. */
enum {
    WS_CLOSE_NORMAL = 1000,
    WS_CLOSE_GOING_AWAY = 1001,
    WS_CLOSE_PROTOCOL_ERROR = 1002,
    WS_CLOSE_NO_STATUS = 1005,
    WS_CLOSE_ABNORMAL = 1006,
    WS_CLOSE_INVALID_PAYLOAD = 1007,
    WS_CLOSE_POLICY = 1008,
    WS_CLOSE_TOO_BIG = 1009,
    WS_CLOSE_INTERNAL_ERROR = 1011,
};

#define WS_MAX_HEADER 14 /* 2 + 8 (64-bit length) + 4 (mask) */
#define WS_MAX_CONTROL_PAYLOAD 125
#define WS_MAX_CLOSE_REASON 123 /* 125 minus the 2-byte code */

typedef struct ws_frame_hdr {
    unsigned fin : 1, rsv1 : 1, rsv2 : 1, rsv3 : 1, masked : 1;
    unsigned opcode;
    uint8_t mask[4];
    uint64_t len;   /* payload length */
    size_t hdr_len; /* bytes of header */
} ws_frame_hdr;

/** What the receiver knows when it checks a frame. */
typedef struct ws_frame_ctx {
    int deflate;    /* permessage-deflate was negotiated: RSV1 allowed on a message's first frame */
    int in_message; /* a fragmented data message is open: continuations expected */
} ws_frame_ctx;

/**
 * Parse a frame header from the start of p. Returns the header length (> 0),
 * 0 when more bytes are needed, or -1 for an invalid length encoding (a
 * non-minimal length, or a 64-bit length with the top bit set).
 */
int ws_frame_parse_header(const uint8_t *p, size_t n, ws_frame_hdr *h);

/**
 * Check a client frame header against RFC 6455 (mask, RSV bits, opcodes,
 * control frame rules, fragmentation order). Returns 0 when acceptable, else
 * the close code to fail with (1002) and *why a static explanation.
 */
int ws_frame_check(const ws_frame_hdr *h, const ws_frame_ctx *ctx, const char **why);

/** XOR n bytes with the mask; offset is how many payload bytes came before. */
void ws_unmask(uint8_t *p, size_t n, const uint8_t mask[4], uint64_t offset);

/** Write an unmasked (server) frame header; returns its length (2, 4 or 10). */
size_t ws_frame_write_header(uint8_t out[WS_MAX_HEADER], int fin, int rsv1, unsigned opcode,
                             uint64_t len);
/** Write a masked (client) frame header, for tests and tools; returns its length. */
size_t ws_frame_write_header_masked(uint8_t out[WS_MAX_HEADER], int fin, int rsv1, unsigned opcode,
                                    uint64_t len, const uint8_t mask[4]);

/** May a received Close frame carry this code? (1000-1003, 1007-1014, 3000-4999) */
int ws_close_code_valid(int code);
/** May an application send this code? (the same set, minus 1010 which is client-only) */
int ws_close_code_sendable(int code);

/**
 * Parse a Close frame payload (already unmasked). Returns 0 and sets *code
 * (1005 when the payload is empty) and the reason bytes; or the close code to
 * fail with: 1002 (1-byte payload, invalid code), 1007 (reason not UTF-8).
 */
int ws_close_parse(const uint8_t *p, size_t n, int *code, const uint8_t **reason,
                   size_t *reason_len);

#endif
