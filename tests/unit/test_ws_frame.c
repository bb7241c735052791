/*
 * test_ws_frame.c - Check suite for src/worker/ws_frame.c: header parsing at
 * every length form and every split point, the receiver's rules (mask, RSV
 * bits, reserved opcodes, control frames, fragmentation order), unmasking at
 * any offset, writing headers, and close payloads and codes (Autobahn 7.x).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "worker/ws/ws_frame.h"

static const uint8_t MASK[4] = {0x37, 0xfa, 0x21, 0x3d};

START_TEST(parse_length_forms)
{
    static const uint64_t lens[] = {0, 1, 125, 126, 127, 65535, 65536, 1u << 20, 0x7fffffffffffull};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        uint8_t b[WS_MAX_HEADER];
        size_t n = ws_frame_write_header_masked(b, 1, 0, WS_OP_BINARY, lens[i], MASK);
        ws_frame_hdr h;
        ck_assert_int_eq(ws_frame_parse_header(b, n, &h), (int)n);
        ck_assert_uint_eq(h.len, lens[i]);
        ck_assert_uint_eq(h.opcode, WS_OP_BINARY);
        ck_assert(h.fin && h.masked);
        ck_assert_int_eq(memcmp(h.mask, MASK, 4), 0);
        /* Every proper prefix asks for more. */
        for (size_t k = 0; k < n; k++)
            ck_assert_int_eq(ws_frame_parse_header(b, k, &h), 0);
    }
}
END_TEST

START_TEST(parse_rejects_non_minimal_lengths)
{
    ws_frame_hdr h;
    uint8_t a[] = {0x82, 0x80 | 126, 0x00, 0x7d, 1, 2, 3, 4}; /* 125 in the 16-bit form */
    ck_assert_int_eq(ws_frame_parse_header(a, sizeof a, &h), -1);
    uint8_t b[] = {0x82, 0x80 | 127, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 1, 2, 3, 4};
    ck_assert_int_eq(ws_frame_parse_header(b, sizeof b, &h), -1);
    uint8_t c[] = {0x82, 0x80 | 127, 0x80, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4}; /* top bit */
    ck_assert_int_eq(ws_frame_parse_header(c, sizeof c, &h), -1);
}
END_TEST

static int check(unsigned op, int fin, int rsv1, int rsv2, int rsv3, int masked, uint64_t len,
                 int deflate, int in_message)
{
    ws_frame_hdr h = {.fin = fin,
                      .rsv1 = rsv1,
                      .rsv2 = rsv2,
                      .rsv3 = rsv3,
                      .masked = masked,
                      .opcode = op,
                      .len = len};
    ws_frame_ctx ctx = {.deflate = deflate, .in_message = in_message};
    const char *why = NULL;
    int rc = ws_frame_check(&h, &ctx, &why);
    if (rc)
        ck_assert_ptr_nonnull(why);
    return rc;
}

START_TEST(rules)
{
    /* Autobahn 1.x/2.x: the ordinary frames pass. */
    ck_assert_int_eq(check(WS_OP_TEXT, 1, 0, 0, 0, 1, 10, 0, 0), 0);
    ck_assert_int_eq(check(WS_OP_BINARY, 0, 0, 0, 0, 1, 10, 0, 0), 0);
    ck_assert_int_eq(check(WS_OP_PING, 1, 0, 0, 0, 1, 125, 0, 0), 0);
    ck_assert_int_eq(check(WS_OP_PONG, 1, 0, 0, 0, 1, 0, 0, 1), 0); /* between fragments */
    /* Unmasked client frame. */
    ck_assert_int_eq(check(WS_OP_TEXT, 1, 0, 0, 0, 0, 10, 0, 0), 1002);
    /* 3.x: reserved bits. */
    ck_assert_int_eq(check(WS_OP_TEXT, 1, 1, 0, 0, 1, 10, 0, 0), 1002);
    ck_assert_int_eq(check(WS_OP_TEXT, 1, 0, 1, 0, 1, 10, 0, 0), 1002);
    ck_assert_int_eq(check(WS_OP_TEXT, 1, 0, 0, 1, 1, 10, 0, 0), 1002);
    ck_assert_int_eq(check(WS_OP_PING, 1, 0, 1, 1, 1, 0, 1, 0), 1002);
    /* RSV1 only with deflate, only on a message's first frame, never on control frames. */
    ck_assert_int_eq(check(WS_OP_TEXT, 0, 1, 0, 0, 1, 10, 1, 0), 0);
    ck_assert_int_eq(check(WS_OP_CONT, 1, 1, 0, 0, 1, 10, 1, 1), 1002);
    ck_assert_int_eq(check(WS_OP_PING, 1, 1, 0, 0, 1, 0, 1, 0), 1002);
    /* 4.x: reserved opcodes. */
    for (unsigned op = 3; op <= 7; op++)
        ck_assert_int_eq(check(op, 1, 0, 0, 0, 1, 0, 0, 0), 1002);
    for (unsigned op = 0xB; op <= 0xF; op++)
        ck_assert_int_eq(check(op, 1, 0, 0, 0, 1, 0, 0, 0), 1002);
    /* 2.5 / 5.1-5.2: control frames are short and whole. */
    ck_assert_int_eq(check(WS_OP_PING, 1, 0, 0, 0, 1, 126, 0, 0), 1002);
    ck_assert_int_eq(check(WS_OP_PING, 0, 0, 0, 0, 1, 0, 0, 0), 1002);
    ck_assert_int_eq(check(WS_OP_PONG, 0, 0, 0, 0, 1, 0, 0, 0), 1002);
    ck_assert_int_eq(check(WS_OP_CLOSE, 1, 0, 0, 0, 1, 1, 0, 0), 1002);
    /* 5.x: fragmentation order. */
    ck_assert_int_eq(check(WS_OP_CONT, 1, 0, 0, 0, 1, 5, 0, 0), 1002);
    ck_assert_int_eq(check(WS_OP_CONT, 0, 0, 0, 0, 1, 5, 0, 1), 0);
    ck_assert_int_eq(check(WS_OP_TEXT, 1, 0, 0, 0, 1, 5, 0, 1), 1002);
    ck_assert_int_eq(check(WS_OP_BINARY, 0, 0, 0, 0, 1, 5, 0, 1), 1002);
}
END_TEST

START_TEST(unmask_any_offset)
{
    uint8_t plain[301], buf[301];
    for (size_t i = 0; i < sizeof plain; i++)
        plain[i] = (uint8_t)(i * 7 + 3);
    uint8_t masked[301];
    for (size_t i = 0; i < sizeof plain; i++)
        masked[i] = plain[i] ^ MASK[i & 3];
    /* Unmask in two pieces cut at every point: the mask phase must carry over. */
    for (size_t cut = 0; cut <= sizeof plain; cut += 7) {
        memcpy(buf, masked, sizeof buf);
        ws_unmask(buf, cut, MASK, 0);
        ws_unmask(buf + cut, sizeof buf - cut, MASK, cut);
        ck_assert_int_eq(memcmp(buf, plain, sizeof plain), 0);
    }
}
END_TEST

START_TEST(write_header_forms)
{
    uint8_t b[WS_MAX_HEADER];
    ck_assert_uint_eq(ws_frame_write_header(b, 1, 0, WS_OP_TEXT, 5), 2);
    ck_assert_uint_eq(b[0], 0x81);
    ck_assert_uint_eq(b[1], 5);
    ck_assert_uint_eq(ws_frame_write_header(b, 1, 1, WS_OP_BINARY, 126), 4);
    ck_assert_uint_eq(b[0], 0xC2);
    ck_assert_uint_eq(b[1], 126);
    ck_assert_uint_eq(b[2], 0);
    ck_assert_uint_eq(b[3], 126);
    ck_assert_uint_eq(ws_frame_write_header(b, 0, 0, WS_OP_CONT, 65536), 10);
    ck_assert_uint_eq(b[0], 0x00);
    ck_assert_uint_eq(b[1], 127);
    ck_assert_uint_eq(b[7], 1);
    ck_assert_uint_eq(b[8], 0);
}
END_TEST

START_TEST(close_codes)
{
    /* Autobahn 7.7 (valid) and 7.9 (invalid). */
    static const int ok[] = {1000, 1001, 1002, 1003, 1007, 1008, 1009,
                             1010, 1011, 3000, 3999, 4000, 4999};
    static const int bad[] = {0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        ck_assert_msg(ws_close_code_valid(ok[i]), "%d", ok[i]);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(!ws_close_code_valid(bad[i]), "%d", bad[i]);
    ck_assert(!ws_close_code_sendable(1010));
    ck_assert(ws_close_code_sendable(1000));
    ck_assert(!ws_close_code_sendable(1005));
}
END_TEST

START_TEST(close_payloads)
{
    int code;
    const uint8_t *r;
    size_t rl;
    ck_assert_int_eq(ws_close_parse(NULL, 0, &code, &r, &rl), 0);
    ck_assert_int_eq(code, 1005);
    ck_assert_int_eq(ws_close_parse((const uint8_t *)"\x03", 1, &code, &r, &rl), 1002);
    ck_assert_int_eq(ws_close_parse((const uint8_t *)"\x03\xe8", 2, &code, &r, &rl), 0);
    ck_assert_int_eq(code, 1000);
    ck_assert_uint_eq(rl, 0);
    ck_assert_int_eq(ws_close_parse((const uint8_t *)"\x03\xe8"
                                                     "bye",
                                    5, &code, &r, &rl),
                     0);
    ck_assert_uint_eq(rl, 3);
    ck_assert_int_eq(memcmp(r, "bye", 3), 0);
    ck_assert_int_eq(ws_close_parse((const uint8_t *)"\x03\xed", 2, &code, &r, &rl), 1002);
    ck_assert_int_eq(ws_close_parse((const uint8_t *)"\x03\xe8\xed\xa0\x80", 5, &code, &r, &rl),
                     1007);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("ws_frame");
    TCase *t = tcase_create("frame");
    tcase_add_test(t, parse_length_forms);
    tcase_add_test(t, parse_rejects_non_minimal_lengths);
    tcase_add_test(t, rules);
    tcase_add_test(t, unmask_any_offset);
    tcase_add_test(t, write_header_forms);
    suite_add_tcase(s, t);
    t = tcase_create("close");
    tcase_add_test(t, close_codes);
    tcase_add_test(t, close_payloads);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
