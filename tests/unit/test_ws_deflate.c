/*
 * test_ws_deflate.c - Check suite for src/worker/ws_deflate.c: offer
 * negotiation (accepted parameters, declined offers, fallbacks), round trips
 * through our deflater and inflater, context takeover and its absence, the
 * RFC 7692 sample message, and the decompression-bomb cap.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "worker/ws/ws_deflate.h"

static int nego(const char *v, ws_deflate_params *p)
{
    return ws_deflate_negotiate(v, strlen(v), p);
}

START_TEST(negotiate_plain)
{
    ws_deflate_params p;
    ck_assert(nego("permessage-deflate", &p));
    ck_assert(!p.server_no_context_takeover && !p.client_no_context_takeover);
    ck_assert_int_eq(p.server_max_window_bits, 15);
    char out[128];
    ck_assert_int_gt(ws_deflate_response(&p, out, sizeof out), 0);
    ck_assert_str_eq(out, "permessage-deflate");
}
END_TEST

START_TEST(negotiate_params)
{
    ws_deflate_params p;
    char out[128];
    ck_assert(nego("permessage-deflate; client_max_window_bits", &p));
    ck_assert(
        nego("permessage-deflate; server_no_context_takeover; client_no_context_takeover", &p));
    ws_deflate_response(&p, out, sizeof out);
    ck_assert_str_eq(out, "permessage-deflate; server_no_context_takeover; "
                          "client_no_context_takeover");
    ck_assert(nego("permessage-deflate; server_max_window_bits=10", &p));
    ck_assert_int_eq(p.server_max_window_bits, 10);
    ws_deflate_response(&p, out, sizeof out);
    ck_assert_str_eq(out, "permessage-deflate; server_max_window_bits=10");
    ck_assert(nego("permessage-deflate; server_max_window_bits=\"12\"", &p));
    ck_assert_int_eq(p.server_max_window_bits, 12);
    ck_assert(nego("PerMessage-Deflate ;client_max_window_bits=9", &p));
}
END_TEST

START_TEST(negotiate_declines)
{
    ws_deflate_params p;
    ck_assert(!nego("x-webkit-deflate-frame", &p));
    ck_assert(!nego("permessage-deflate; unknown_param", &p));
    ck_assert(
        !nego("permessage-deflate; server_no_context_takeover; server_no_context_takeover", &p));
    ck_assert(!nego("permessage-deflate; server_no_context_takeover=1", &p));
    ck_assert(!nego("permessage-deflate; server_max_window_bits", &p));
    ck_assert(!nego("permessage-deflate; server_max_window_bits=16", &p));
    ck_assert(!nego("permessage-deflate; server_max_window_bits=7", &p));
    ck_assert(!nego("permessage-deflate; server_max_window_bits=8", &p)); /* zlib cannot */
    ck_assert(!nego("permessage-deflate; client_max_window_bits=0", &p));
    ck_assert(!nego("permessage-deflate; client_max_window_bits=08", &p));
    /* A declined offer falls back to the next one. */
    ck_assert(nego("permessage-deflate; foo, permessage-deflate; client_no_context_takeover", &p));
    ck_assert(p.client_no_context_takeover);
    ck_assert(nego("other, permessage-deflate", &p));
}
END_TEST

/* Compress with one endpoint's deflater, inflate with another's inflater. */
static void round_trip(ws_deflate *tx, ws_deflate *rx, const char *msg, size_t n, size_t *wire)
{
    buf z = BUF_INIT, out = BUF_INIT;
    ck_assert_int_eq(ws_deflate_message(tx, msg, n, &z), 0);
    *wire = buf_size(&z);
    /* Feed the compressed bytes in small pieces, as frames arrive. */
    for (size_t off = 0; off < buf_size(&z); off += 3) {
        size_t k = buf_size(&z) - off < 3 ? buf_size(&z) - off : 3;
        ck_assert_int_eq(ws_inflate_feed(rx, buf_head(&z) + off, k, &out, 1 << 24), WS_INFLATE_OK);
    }
    ck_assert_int_eq(ws_inflate_end(rx, &out, 1 << 24), WS_INFLATE_OK);
    ck_assert_uint_eq(buf_size(&out), n);
    ck_assert(n == 0 || memcmp(buf_head(&out), msg, n) == 0);
    buf_free(&z);
    buf_free(&out);
}

START_TEST(round_trips)
{
    ws_deflate_params p = {0, 0, 15, 0};
    ws_deflate *a = ws_deflate_new(&p), *b = ws_deflate_new(&p);
    ck_assert_ptr_nonnull(a);
    size_t wire;
    round_trip(a, b, "", 0, &wire);
    ck_assert_uint_eq(wire, 1); /* RFC 7692 7.2.3.6: an empty message is one 0x00 byte */
    /* Again: zlib writes nothing for a second flush in a row, the 0x00 must still be sent. */
    round_trip(a, b, "", 0, &wire);
    ck_assert_uint_eq(wire, 1);
    round_trip(a, b, "", 0, &wire);
    round_trip(a, b, "Hello", 5, &wire);
    char *big = malloc(300000);
    for (size_t i = 0; i < 300000; i++)
        big[i] = (char)("abcdefgh"[i % 8] + (i % 1000 == 0));
    round_trip(a, b, big, 300000, &wire);
    ck_assert_uint_lt(wire, 300000 / 10);
    free(big);
    ws_deflate_free(a);
    ws_deflate_free(b);
}
END_TEST

START_TEST(context_takeover)
{
    const char *msg = "a message long enough to be worth a back-reference, repeated";
    size_t n = strlen(msg), w1, w2;
    ws_deflate_params keep = {0, 0, 15, 0};
    ws_deflate *a = ws_deflate_new(&keep), *b = ws_deflate_new(&keep);
    round_trip(a, b, msg, n, &w1);
    round_trip(a, b, msg, n, &w2);
    ck_assert_uint_lt(w2, w1); /* the second refers back into the first */
    ck_assert_uint_eq(ws_deflate_held(a), 1); /* the compressor keeps its window */
    ck_assert_uint_eq(ws_deflate_held(b), 1); /* the inflater keeps its window */
    ws_deflate_free(a);
    ws_deflate_free(b);

    ws_deflate_params fresh = {1, 1, 15, 0};
    a = ws_deflate_new(&fresh);
    b = ws_deflate_new(&fresh);
    ck_assert_uint_eq(ws_deflate_held(a), 0); /* nothing before the first message */
    round_trip(a, b, msg, n, &w1);
    round_trip(a, b, msg, n, &w2);
    ck_assert_uint_eq(w2, w1); /* each message stands alone */
    /* ... and nothing is held between messages: the streams went with them. */
    ck_assert_uint_eq(ws_deflate_held(a), 0);
    ck_assert_uint_eq(ws_deflate_held(b), 0);
    ws_deflate_free(a);
    /* ... so a brand-new inflater can read the second one. */
    ws_deflate *c = ws_deflate_new(&fresh);
    ws_deflate *tx = ws_deflate_new(&fresh);
    size_t w3;
    round_trip(tx, c, msg, n, &w3);
    round_trip(tx, b, msg, n, &w3);
    ws_deflate_free(b);
    ws_deflate_free(c);
    ws_deflate_free(tx);
}
END_TEST

/* RFC 7692 7.2.3.1: "Hello" compressed by the RFC's example. */
START_TEST(rfc_sample)
{
    static const unsigned char hello[] = {0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00};
    ws_deflate_params p = {0, 0, 15, 0};
    ws_deflate *d = ws_deflate_new(&p);
    buf out = BUF_INIT;
    ck_assert_int_eq(ws_inflate_feed(d, hello, sizeof hello, &out, 100), WS_INFLATE_OK);
    ck_assert_int_eq(ws_inflate_end(d, &out, 100), WS_INFLATE_OK);
    ck_assert_uint_eq(buf_size(&out), 5);
    ck_assert_int_eq(memcmp(buf_head(&out), "Hello", 5), 0);
    buf_free(&out);
    ws_deflate_free(d);
}
END_TEST

START_TEST(bomb_is_capped)
{
    /* 64 MiB of zeros compress to ~64 KiB; the cap stops inflation at 1 MiB + 1. */
    size_t n = 64u << 20;
    char *zeros = calloc(1, n);
    ws_deflate_params p = {0, 0, 15, 0};
    ws_deflate *tx = ws_deflate_new(&p), *rx = ws_deflate_new(&p);
    buf z = BUF_INIT, out = BUF_INIT;
    ck_assert_int_eq(ws_deflate_message(tx, zeros, n, &z), 0);
    ck_assert_uint_lt(buf_size(&z), 1u << 20);
    int rc = ws_inflate_feed(rx, buf_head(&z), buf_size(&z), &out, 1u << 20);
    ck_assert_int_eq(rc, WS_INFLATE_TOO_BIG);
    ck_assert_uint_le(buf_size(&out), (1u << 20) + 1);
    free(zeros);
    buf_free(&z);
    buf_free(&out);
    ws_deflate_free(tx);
    ws_deflate_free(rx);
}
END_TEST

START_TEST(corrupt_input)
{
    static const unsigned char junk[] = {0xff, 0xff, 0xff, 0xff, 0x00, 0x12};
    ws_deflate_params p = {0, 0, 15, 0};
    ws_deflate *d = ws_deflate_new(&p);
    buf out = BUF_INIT;
    ck_assert_int_eq(ws_inflate_feed(d, junk, sizeof junk, &out, 1000), WS_INFLATE_CORRUPT);
    buf_free(&out);
    ws_deflate_free(d);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("ws_deflate");
    TCase *t = tcase_create("negotiate");
    tcase_add_test(t, negotiate_plain);
    tcase_add_test(t, negotiate_params);
    tcase_add_test(t, negotiate_declines);
    suite_add_tcase(s, t);
    t = tcase_create("streams");
    tcase_set_timeout(t, 30);
    tcase_add_test(t, round_trips);
    tcase_add_test(t, context_takeover);
    tcase_add_test(t, rfc_sample);
    tcase_add_test(t, bomb_is_capped);
    tcase_add_test(t, corrupt_input);
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
