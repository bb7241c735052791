/*
 * test_h2_request.c - Check suite for src/worker/h2_request.c: an HTTP/2
 * request head collected field by field under the limits (431 past
 * max_header_size or max_header_count, a reset far past them, 400 for an
 * unknown pseudo-header), and turned into a scope's facts (decoded path,
 * query, :authority as host, cookies joined, event-stream detection,
 * CONNECT and %00 refused), held in the request itself or, when too
 * large, in one block.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/http2/h2_request.h"

static int add(h2_head *hd, const char *n, const char *v, size_t max_size, size_t max_count)
{
    return h2_head_add(hd, (const uint8_t *)n, strlen(n), (const uint8_t *)v, strlen(v), max_size,
                       max_count);
}

static void std_head(h2_head *hd, const char *method, const char *path)
{
    h2_head_init(hd);
    ck_assert_int_eq(add(hd, ":method", method, 8192, 100), 0);
    ck_assert_int_eq(add(hd, ":scheme", "https", 8192, 100), 0);
    ck_assert_int_eq(add(hd, ":authority", "example.org:8443", 8192, 100), 0);
    ck_assert_int_eq(add(hd, ":path", path, 8192, 100), 0);
}

static int streq(pagi_str s, const char *want)
{
    return s.len == strlen(want) && !memcmp(s.ptr, want, s.len);
}

START_TEST(test_request_facts)
{
    h2_head hd;
    std_head(&hd, "GET", "/a%20b/c?x=1&y=%41");
    ck_assert_int_eq(add(&hd, "host", "ignored.example", 8192, 100), 0);
    ck_assert_int_eq(add(&hd, "cookie", "a=1", 8192, 100), 0);
    ck_assert_int_eq(add(&hd, "x-one", "1", 8192, 100), 0);
    ck_assert_int_eq(add(&hd, "cookie", "b=2", 8192, 100), 0);
    ck_assert_int_eq(add(&hd, "accept", "text/html, TEXT/Event-Stream", 8192, 100), 0);
    h2_request r;
    ck_assert_int_eq(h2_head_request(&hd, &r), 0);
    ck_assert_str_eq(r.method, "GET");
    ck_assert_str_eq(r.scheme, "https");
    ck_assert(streq(r.path, "/a b/c"));
    ck_assert(streq(r.raw_path, "/a%20b/c"));
    ck_assert(streq(r.query, "x=1&y=%41"));
    ck_assert_int_eq(r.event_stream, 1);
    /* host from :authority first, the client's host dropped, one cookie joined */
    ck_assert_uint_eq(r.header_count, 4);
    ck_assert(streq(r.headers[0].name, "host"));
    ck_assert(streq(r.headers[0].value, "example.org:8443"));
    ck_assert(streq(r.headers[1].name, "cookie"));
    ck_assert(streq(r.headers[1].value, "a=1; b=2"));
    ck_assert(streq(r.headers[2].name, "x-one"));
    ck_assert(streq(r.headers[3].name, "accept"));
    h2_request_free(&r);
    h2_head_free(&hd);
    h2_head_free(&hd); /* idempotent */
}
END_TEST

START_TEST(test_no_query_no_authority)
{
    h2_head hd;
    h2_head_init(&hd);
    ck_assert_int_eq(add(&hd, ":method", "POST", 8192, 100), 0);
    ck_assert_int_eq(add(&hd, ":path", "/p", 8192, 100), 0);
    ck_assert_int_eq(add(&hd, "host", "h", 8192, 100), 0);
    h2_request r;
    ck_assert_int_eq(h2_head_request(&hd, &r), 0);
    ck_assert_ptr_null(r.scheme);
    ck_assert(streq(r.query, ""));
    ck_assert_int_eq(r.event_stream, 0);
    ck_assert_uint_eq(r.header_count, 1);
    ck_assert(streq(r.headers[0].value, "h"));
    h2_request_free(&r);
    h2_head_free(&hd);
}
END_TEST

/* A cookie field with an empty value (HPACK static entry 32 as it is):
 * one empty cookie header, no read through an unallocated buffer. */
START_TEST(test_empty_cookie)
{
    h2_head hd;
    std_head(&hd, "GET", "/");
    ck_assert_int_eq(add(&hd, "cookie", "", 8192, 100), 0);
    h2_request r;
    ck_assert_int_eq(h2_head_request(&hd, &r), 0);
    ck_assert_uint_eq(r.header_count, 2);
    ck_assert(streq(r.headers[1].name, "cookie"));
    ck_assert(streq(r.headers[1].value, ""));
    ck_assert_ptr_nonnull(r.headers[1].value.ptr);
    h2_request_free(&r);
    h2_head_free(&hd);
}
END_TEST

START_TEST(test_refusals)
{
    h2_head hd;
    h2_request r;
    std_head(&hd, "CONNECT", "/");
    ck_assert_int_eq(h2_head_request(&hd, &r), 501);
    h2_request_free(&r);
    h2_head_free(&hd);

    std_head(&hd, "GET", "/a%00b");
    ck_assert_int_eq(h2_head_request(&hd, &r), 400);
    h2_request_free(&r);
    h2_head_free(&hd);

    h2_head_init(&hd);
    ck_assert_int_eq(add(&hd, ":method", "GET", 8192, 100), 0);
    ck_assert_int_eq(h2_head_request(&hd, &r), 400); /* no :path */
    h2_request_free(&r);
    h2_head_free(&hd);

    /* :protocol is RFC 8441's, only with CONNECT */
    std_head(&hd, "GET", "/");
    ck_assert_int_eq(add(&hd, ":protocol", "websocket", 8192, 100), 0);
    ck_assert_int_eq(h2_head_request(&hd, &r), 400);
    h2_request_free(&r);
    h2_head_free(&hd);

    /* extended CONNECT: a websocket; another :protocol stays 501 */
    std_head(&hd, "CONNECT", "/chat?room=1");
    ck_assert_int_eq(add(&hd, ":protocol", "websocket", 8192, 100), 0);
    ck_assert_int_eq(h2_head_request(&hd, &r), 0);
    ck_assert_int_eq(r.websocket, 1);
    ck_assert_int_eq((int)r.query.len, 6);
    h2_request_free(&r);
    h2_head_free(&hd);
    std_head(&hd, "CONNECT", "/");
    ck_assert_int_eq(add(&hd, ":protocol", "connect-udp", 8192, 100), 0);
    ck_assert_int_eq(h2_head_request(&hd, &r), 501);
    h2_request_free(&r);
    h2_head_free(&hd);

    /* an unknown pseudo-header, of a known one's length or not: 400 */
    const char *unknown[] = {":status", ":methox", ":pathx", ":", ":authoritx", ":protocox"};
    for (size_t i = 0; i < sizeof unknown / sizeof *unknown; i++) {
        std_head(&hd, "GET", "/");
        ck_assert_int_eq(add(&hd, unknown[i], "x", 8192, 100), 0);
        ck_assert_int_eq(hd.refuse, 400);
        ck_assert_int_eq(h2_head_request(&hd, &r), 400);
        h2_request_free(&r);
        h2_head_free(&hd);
    }
}
END_TEST

START_TEST(test_limits)
{
    h2_head hd;
    h2_request r;
    /* size: each field counts name + value + 32 */
    h2_head_init(&hd);
    char v[200];
    memset(v, 'v', sizeof v - 1);
    v[sizeof v - 1] = 0;
    int i = 0;
    while (hd.refuse == 0 && i < 100) {
        ck_assert_int_eq(add(&hd, "x-long", v, 1024, 100), 0);
        i++;
    }
    ck_assert_int_eq(hd.refuse, 431);
    ck_assert_int_eq(i, 5);      /* 4 fit in 1024: 4 x 237 = 948, the 5th passes it */
    ck_assert_uint_eq(hd.nf, 0); /* storage freed at the refusal */
    ck_assert_ptr_null(hd.fv);
    ck_assert_int_eq(h2_head_request(&hd, &r), 431);
    h2_request_free(&r);
    /* far past the limit: reset the stream rather than decode on */
    int rc = 0;
    for (i = 0; i < 1000 && rc == 0; i++)
        rc = add(&hd, "x-long", v, 1024, 100);
    ck_assert_int_eq(rc, 1);
    h2_head_free(&hd);
    /* count */
    h2_head_init(&hd);
    for (i = 0; i < 3; i++)
        ck_assert_int_eq(add(&hd, "a", "b", 8192, 3), 0);
    ck_assert_int_eq(hd.refuse, 0);
    ck_assert_int_eq(add(&hd, "a", "b", 8192, 3), 0);
    ck_assert_int_eq(hd.refuse, 431);
    h2_head_free(&hd);
}
END_TEST

/* The header array and decoded path live in the request itself while
 * they fit, else in one block: the facts are the same either way. */
START_TEST(test_inline_and_block_storage)
{
    char path[2 * H2_REQUEST_INLINE_PATH + 8];
    for (int round = 0; round < 3; round++) {
        /* round 0: fits; 1: too many fields; 2: a path too long */
        int fields = round == 1 ? H2_REQUEST_INLINE_FIELDS + 3 : 5;
        size_t plen = round == 2 ? sizeof path - 1 : 20;
        path[0] = '/';
        memset(path + 1, 'p', plen - 1);
        path[plen] = 0;
        memcpy(path + plen - 3, "%41", 3); /* decoded to 'A' */
        h2_head hd;
        std_head(&hd, "GET", path);
        char name[16];
        for (int i = 0; i < fields; i++) {
            snprintf(name, sizeof name, "x-f%d", i);
            ck_assert_int_eq(add(&hd, name, name + 2, 8192, 100), 0);
        }
        h2_request r;
        ck_assert_int_eq(h2_head_request(&hd, &r), 0);
        int inline_ok = round == 0;
        ck_assert_int_eq(r.headers == r.headers_inline, inline_ok);
        ck_assert_int_eq(r.block == NULL, inline_ok);
        ck_assert_uint_eq(r.header_count, (size_t)fields + 1);
        ck_assert(streq(r.headers[0].value, "example.org:8443"));
        snprintf(name, sizeof name, "x-f%d", fields - 1);
        ck_assert(streq(r.headers[fields].name, name));
        ck_assert(streq(r.headers[fields].value, name + 2));
        ck_assert_uint_eq(r.path.len, plen - 2);
        ck_assert_int_eq(r.path.ptr[plen - 3], 'A');
        ck_assert_int_eq(r.path.ptr[r.path.len], 0);
        h2_request_free(&r);
        ck_assert_ptr_null(r.block);
        h2_head_free(&hd);
    }
}
END_TEST

static Suite *h2_request_suite(void)
{
    Suite *s = suite_create("h2_request");
    TCase *tc = tcase_create("head");
    tcase_add_test(tc, test_request_facts);
    tcase_add_test(tc, test_no_query_no_authority);
    tcase_add_test(tc, test_empty_cookie);
    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_limits);
    tcase_add_test(tc, test_inline_and_block_storage);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(h2_request_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
