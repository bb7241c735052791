/*
 * test_http1_response.c - Check suite for src/worker/http1_response.c:
 * exact response heads for every framing case, header injection refusal,
 * chunk framing, error responses, reason phrases and the date cache.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "worker/http1/http1_response.h"

#define D "Sun, 06 Nov 1994 08:49:37 GMT"
#define HDR(n, v)                                                                                  \
    {                                                                                              \
        {n, sizeof(n) - 1},                                                                        \
        {                                                                                          \
            v, sizeof(v) - 1                                                                       \
        }                                                                                          \
    }

static const h1_response_ctx ctx11 = {.http_minor = 1, .keep_alive = 1, .date = D};
static const h1_response_ctx ctx10 = {.http_minor = 0, .keep_alive = 0, .date = D};

/* The buffer's unread bytes as a NUL-terminated string (tests only). */
static const char *str(buf *b)
{
    buf_append(b, "", 1);
    b->len--;
    return buf_head(b);
}

static void head_eq(int status, const pagi_header *h, size_t n, const h1_response_ctx *ctx,
                    const char *want, h1_response_plan *plan)
{
    buf b = BUF_INIT;
    const char *err = NULL;
    ck_assert_int_eq(h1_response_head(&b, status, h, n, ctx, plan, &err), 0);
    ck_assert_ptr_null(err);
    ck_assert_str_eq(str(&b), want);
    buf_free(&b);
}

START_TEST(header_check_ok)
{
    const char *err = NULL;
    pagi_header ok[] = {HDR("x-a", "v"), HDR("X-Upper", "any \t\x80\xff bytes"),
                        HDR("!#$%&'*+-.^_`|~09", ""), HDR("content-type", "text/html")};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
        ck_assert_int_eq(h1_header_check(&ok[i], &err), 0);
}
END_TEST

START_TEST(header_check_bad_names)
{
    pagi_header bad[] = {HDR("", "v"),    HDR("x y", "v"),  HDR("x:y", "v"),   HDR("x\r", "v"),
                         HDR("x\n", "v"), HDR("x\0y", "v"), HDR("x\x01", "v"), HDR("x\x7f", "v"),
                         HDR("x\t", "v"), HDR("x(y)", "v"), HDR("x\x80", "v"), HDR("x\"", "v")};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *err = NULL;
        ck_assert_msg(h1_header_check(&bad[i], &err) == -1, "case %zu", i);
        ck_assert_ptr_nonnull(err);
    }
}
END_TEST

START_TEST(header_check_bad_values)
{
    pagi_header bad[] = {HDR("x", "a\rb"), HDR("x", "a\nb"), HDR("x", "a\0b"),
                         HDR("x", "a\r\nset-cookie: evil=1")};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *err = NULL;
        ck_assert_int_eq(h1_header_check(&bad[i], &err), -1);
        ck_assert_str_eq(err, "header value contains CR/LF/NUL");
    }
}
END_TEST

/* Every length and every position: the checks go several bytes a step
 * (names four, values eight, with an overlapping last word), so a bad
 * byte must be found wherever it falls, in a step or in the tail. */
START_TEST(header_check_every_position)
{
    char name[24], value[24];
    const char bad_name[] = {' ', ':', '\r', '\0', '\x80', '('};
    const char bad_value[] = {'\r', '\n', '\0'};
    for (size_t n = 1; n <= sizeof name; n++) {
        memset(name, 'a', n);
        memset(value, 'v', n);
        const char *err = NULL;
        pagi_header h = {{name, n}, {value, n}};
        ck_assert_int_eq(h1_header_check(&h, &err), 0);
        for (size_t at = 0; at < n; at++) {
            for (size_t b = 0; b < sizeof bad_name; b++) {
                name[at] = bad_name[b];
                err = NULL;
                ck_assert_msg(h1_header_check(&h, &err) == -1, "name len %zu at %zu", n, at);
                ck_assert_str_eq(err, "header name is not a token");
            }
            name[at] = 'a';
            for (size_t b = 0; b < sizeof bad_value; b++) {
                value[at] = bad_value[b];
                err = NULL;
                ck_assert_msg(h1_header_check(&h, &err) == -1, "value len %zu at %zu", n, at);
                ck_assert_str_eq(err, "header value contains CR/LF/NUL");
            }
            value[at] = '\x01'; /* below 14 but allowed: a false alarm, then accepted */
            ck_assert_int_eq(h1_header_check(&h, &err), 0);
            value[at] = 'v';
        }
    }
}
END_TEST

START_TEST(head_content_length_11)
{
    pagi_header h[] = {HDR("content-type", "text/plain"), HDR("content-length", "5")};
    h1_response_plan p;
    head_eq(200, h, 2, &ctx11,
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 5\r\n"
            "date: " D "\r\n\r\n",
            &p);
    ck_assert_int_eq(p.chunked, 0);
    ck_assert_int_eq(p.keep_alive, 1);
    ck_assert_int_eq(p.no_body, 0);
    ck_assert_int_eq(p.content_length, 5);
}
END_TEST

START_TEST(head_chunked_11)
{
    pagi_header h[] = {HDR("x-a", "1")};
    h1_response_plan p;
    head_eq(200, h, 1, &ctx11,
            "HTTP/1.1 200 OK\r\nx-a: 1\r\ndate: " D "\r\ntransfer-encoding: chunked\r\n\r\n", &p);
    ck_assert_int_eq(p.chunked, 1);
    ck_assert_int_eq(p.keep_alive, 1);
    ck_assert_int_eq(p.content_length, -1);
}
END_TEST

START_TEST(head_close_11)
{
    h1_response_ctx c = ctx11;
    c.keep_alive = 0;
    pagi_header h[] = {HDR("content-length", "0")};
    h1_response_plan p;
    head_eq(404, h, 1, &c,
            "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\ndate: " D
            "\r\nconnection: close\r\n\r\n",
            &p);
    ck_assert_int_eq(p.keep_alive, 0);
}
END_TEST

/* An event stream says keep-alive out loud on 1.1 (Www.pod, sse.start); a closing one does not. */
START_TEST(head_announce_keep_alive_11)
{
    h1_response_ctx c = ctx11;
    c.announce_keep_alive = 1;
    pagi_header h[] = {HDR("content-type", "text/event-stream")};
    h1_response_plan p;
    head_eq(200, h, 1, &c,
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ndate: " D
            "\r\ntransfer-encoding: chunked\r\nconnection: keep-alive\r\n\r\n",
            &p);
    ck_assert_int_eq(p.keep_alive, 1);
    c.keep_alive = 0;
    head_eq(200, h, 1, &c,
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ndate: " D
            "\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n",
            &p);
}
END_TEST

START_TEST(head_10_no_length)
{
    h1_response_ctx c = ctx10;
    c.keep_alive = 1; /* asked for keep-alive, but the close must delimit the body */
    h1_response_plan p;
    head_eq(200, NULL, 0, &c, "HTTP/1.1 200 OK\r\ndate: " D "\r\nconnection: close\r\n\r\n", &p);
    ck_assert_int_eq(p.chunked, 0);
    ck_assert_int_eq(p.keep_alive, 0);
    ck_assert_int_eq(p.no_body, 0);
}
END_TEST

START_TEST(head_10_keep_alive)
{
    h1_response_ctx c = ctx10;
    c.keep_alive = 1;
    pagi_header h[] = {HDR("content-length", "3")};
    h1_response_plan p;
    head_eq(200, h, 1, &c,
            "HTTP/1.1 200 OK\r\ncontent-length: 3\r\ndate: " D "\r\nconnection: keep-alive\r\n\r\n",
            &p);
    ck_assert_int_eq(p.keep_alive, 1);
    c.keep_alive = 0;
    head_eq(200, h, 1, &c,
            "HTTP/1.1 200 OK\r\ncontent-length: 3\r\ndate: " D "\r\nconnection: close\r\n\r\n", &p);
    ck_assert_int_eq(p.keep_alive, 0);
}
END_TEST

START_TEST(head_10_trailers_not_chunked)
{
    h1_response_ctx c = ctx10;
    c.trailers = 1; /* HTTP/1.0 has no chunked coding: trailers can't go out */
    h1_response_plan p;
    head_eq(200, NULL, 0, &c, "HTTP/1.1 200 OK\r\ndate: " D "\r\nconnection: close\r\n\r\n", &p);
    ck_assert_int_eq(p.chunked, 0);
}
END_TEST

START_TEST(head_head_request)
{
    h1_response_ctx c = ctx11;
    c.head_request = 1;
    pagi_header h[] = {HDR("content-length", "1234")};
    h1_response_plan p;
    head_eq(200, h, 1, &c, "HTTP/1.1 200 OK\r\ncontent-length: 1234\r\ndate: " D "\r\n\r\n", &p);
    ck_assert_int_eq(p.no_body, 1);
    ck_assert_int_eq(p.chunked, 0);
    ck_assert_int_eq(p.keep_alive, 1);
    ck_assert_int_eq(p.content_length, 1234);
    /* no length: still no chunked framing, and keep-alive holds */
    head_eq(200, NULL, 0, &c, "HTTP/1.1 200 OK\r\ndate: " D "\r\n\r\n", &p);
    ck_assert_int_eq(p.chunked, 0);
    ck_assert_int_eq(p.keep_alive, 1);
    c.trailers = 1;
    head_eq(200, h, 1, &c, "HTTP/1.1 200 OK\r\ncontent-length: 1234\r\ndate: " D "\r\n\r\n", &p);
    ck_assert_int_eq(p.chunked, 0);
}
END_TEST

START_TEST(head_204_304)
{
    pagi_header h[] = {HDR("content-length", "10"), HDR("etag", "\"x\"")};
    h1_response_plan p;
    head_eq(204, h, 2, &ctx11, "HTTP/1.1 204 No Content\r\netag: \"x\"\r\ndate: " D "\r\n\r\n", &p);
    ck_assert_int_eq(p.no_body, 1);
    ck_assert_int_eq(p.chunked, 0);
    ck_assert_int_eq(p.content_length, -1);
    head_eq(304, h, 2, &ctx11,
            "HTTP/1.1 304 Not Modified\r\ncontent-length: 10\r\netag: \"x\"\r\ndate: " D "\r\n\r\n",
            &p);
    ck_assert_int_eq(p.no_body, 1);
    ck_assert_int_eq(p.chunked, 0);
    ck_assert_int_eq(p.content_length, 10);
    ck_assert_int_eq(p.keep_alive, 1);
    /* 1.0 without length on 204: nothing to delimit, keep-alive stays */
    h1_response_ctx c = ctx10;
    c.keep_alive = 1;
    head_eq(204, NULL, 0, &c,
            "HTTP/1.1 204 No Content\r\ndate: " D "\r\nconnection: keep-alive\r\n\r\n", &p);
    ck_assert_int_eq(p.keep_alive, 1);
}
END_TEST

START_TEST(head_1xx)
{
    h1_response_plan p;
    head_eq(100, NULL, 0, &ctx11, "HTTP/1.1 100 Continue\r\n\r\n", &p);
    ck_assert_int_eq(p.no_body, 1);
    pagi_header link[] = {HDR("link", "</s.css>; rel=preload")};
    head_eq(103, link, 1, &ctx11, "HTTP/1.1 103 Early Hints\r\nlink: </s.css>; rel=preload\r\n\r\n",
            &p);
    pagi_header up[] = {HDR("upgrade", "websocket"), HDR("connection", "Upgrade"),
                        HDR("sec-websocket-accept", "abc=")};
    head_eq(101, up, 3, &ctx11,
            "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\n"
            "sec-websocket-accept: abc=\r\ndate: " D "\r\n\r\n",
            &p);
    ck_assert_int_eq(p.no_body, 1);
    ck_assert_int_eq(p.keep_alive, 1);
}
END_TEST

START_TEST(head_trailers_force_chunked)
{
    h1_response_ctx c = ctx11;
    c.trailers = 1;
    pagi_header h[] = {HDR("content-length", "5"), HDR("trailer", "x-checksum")};
    h1_response_plan p;
    head_eq(200, h, 2, &c,
            "HTTP/1.1 200 OK\r\ntrailer: x-checksum\r\ndate: " D
            "\r\ntransfer-encoding: chunked\r\n\r\n",
            &p);
    ck_assert_int_eq(p.chunked, 1);
    ck_assert_int_eq(p.content_length, -1);
}
END_TEST

START_TEST(head_drops_server_managed)
{
    pagi_header h[] = {HDR("transfer-encoding", "gzip"), HDR("connection", "keep-alive"),
                       HDR("content-length", "2"), HDR("Connection", "close"),
                       HDR("date", "Mon, 01 Jan 2001 00:00:00 GMT")};
    h1_response_plan p;
    head_eq(200, h, 5, &ctx11,
            "HTTP/1.1 200 OK\r\ncontent-length: 2\r\ndate: Mon, 01 Jan 2001 00:00:00 GMT\r\n\r\n",
            &p);
    ck_assert_int_eq(p.chunked, 0);
    ck_assert_int_eq(p.keep_alive, 1);
}
END_TEST

/* Names go out lower case, as over HTTP/2 (pagi(3)); values as given. */
START_TEST(head_names_lower_cased)
{
    pagi_header h[] = {HDR("X-Custom", "V"), HDR("Content-Length", "0")};
    h1_response_plan p;
    head_eq(200, h, 2, &ctx11,
            "HTTP/1.1 200 OK\r\nx-custom: V\r\ncontent-length: 0\r\ndate: " D "\r\n\r\n", &p);
}
END_TEST

START_TEST(head_unknown_status)
{
    h1_response_plan p;
    pagi_header h[] = {HDR("content-length", "0")};
    head_eq(599, h, 1, &ctx11, "HTTP/1.1 599 Unknown\r\ncontent-length: 0\r\ndate: " D "\r\n\r\n",
            &p);
}
END_TEST

/* On any error, nothing is appended and the earlier bytes are untouched. */
static void head_fails(int status, const pagi_header *h, size_t n, const char *want_err)
{
    buf b = BUF_INIT;
    buf_append_str(&b, "previous");
    const char *err = NULL;
    h1_response_plan p;
    ck_assert_int_eq(h1_response_head(&b, status, h, n, &ctx11, &p, &err), -1);
    ck_assert_str_eq(err, want_err);
    ck_assert_str_eq(str(&b), "previous");
    buf_free(&b);
}

START_TEST(head_invalid_status)
{
    head_fails(99, NULL, 0, "invalid status");
    head_fails(1000, NULL, 0, "invalid status");
    head_fails(0, NULL, 0, "invalid status");
    head_fails(-200, NULL, 0, "invalid status");
}
END_TEST

START_TEST(head_injection_refused)
{
    pagi_header h[] = {HDR("x-ok", "1"), HDR("location", "/a\r\nset-cookie: x=1")};
    head_fails(302, h, 2, "header value contains CR/LF/NUL");
    pagi_header n[] = {HDR("x-ok", "1"), HDR("x\r\nevil", "1")};
    head_fails(200, n, 2, "header name is not a token");
    pagi_header z[] = {HDR("x", "a\0b")};
    head_fails(200, z, 1, "header value contains CR/LF/NUL");
}
END_TEST

START_TEST(head_invalid_content_length)
{
    pagi_header a[] = {HDR("content-length", "abc")};
    head_fails(200, a, 1, "invalid content-length");
    pagi_header b[] = {HDR("content-length", "")};
    head_fails(200, b, 1, "invalid content-length");
    pagi_header c[] = {HDR("content-length", "-1")};
    head_fails(200, c, 1, "invalid content-length");
    pagi_header d[] = {HDR("content-length", "99999999999999999999")};
    head_fails(200, d, 1, "invalid content-length");
    pagi_header e[] = {HDR("content-length", "1"), HDR("content-length", "2")};
    head_fails(200, e, 2, "conflicting content-length headers");
}
END_TEST

START_TEST(head_rollback_after_compaction)
{
    /* consumed bytes in front: a refused head leaves the unread bytes exactly */
    buf b = BUF_INIT;
    for (int i = 0; i < 200; i++)
        buf_append_str(&b, "x");
    buf_consume(&b, 190);
    const char *err;
    h1_response_plan p;
    pagi_header h[] = {HDR("x", "ok"), HDR("y", "bad\n")};
    ck_assert_int_eq(h1_response_head(&b, 200, h, 2, &ctx11, &p, &err), -1);
    ck_assert_uint_eq(buf_size(&b), 10);
    buf_free(&b);
}
END_TEST

START_TEST(chunks)
{
    buf b = BUF_INIT;
    ck_assert_int_eq(h1_chunk_append(&b, "hello", 5), 0);
    ck_assert_int_eq(h1_chunk_append(&b, "", 0), 0);
    char big[300];
    memset(big, 'z', sizeof big);
    ck_assert_int_eq(h1_chunk_append(&b, big, sizeof big), 0);
    ck_assert_int_eq(h1_chunk_header(&b, 0x1234abcd), 0);
    const char *s = str(&b);
    ck_assert_int_eq(strncmp(s, "5\r\nhello\r\n12c\r\n", 15), 0);
    ck_assert_int_eq(strcmp(s + 15 + 300, "\r\n1234abcd\r\n"), 0);
    buf_free(&b);
}
END_TEST

START_TEST(chunk_last)
{
    buf b = BUF_INIT;
    const char *err = NULL;
    ck_assert_int_eq(h1_chunk_last(&b, NULL, 0, &err), 0);
    ck_assert_str_eq(str(&b), "0\r\n\r\n");
    buf_reset(&b);
    pagi_header t[] = {HDR("x-checksum", "abc"), HDR("content-length", "5"), HDR("x-b", "2")};
    ck_assert_int_eq(h1_chunk_last(&b, t, 3, &err), 0);
    ck_assert_str_eq(str(&b), "0\r\nx-checksum: abc\r\nx-b: 2\r\n\r\n");
    buf_reset(&b);
    buf_append_str(&b, "keep");
    pagi_header bad[] = {HDR("x", "1"), HDR("y", "a\r\n\r\nHTTP/1.1 200 OK")};
    ck_assert_int_eq(h1_chunk_last(&b, bad, 2, &err), -1);
    ck_assert_str_eq(err, "header value contains CR/LF/NUL");
    ck_assert_str_eq(str(&b), "keep");
    buf_free(&b);
}
END_TEST

START_TEST(error_response)
{
    buf b = BUF_INIT;
    ck_assert_int_eq(h1_error_response(&b, 400, "bare LF", D, 0), 0);
    ck_assert_str_eq(str(&b), "HTTP/1.1 400 Bad Request\r\n"
                              "content-type: text/plain; charset=utf-8\r\n"
                              "content-length: 8\r\n"
                              "date: " D "\r\n"
                              "connection: close\r\n"
                              "\r\n"
                              "bare LF\n");
    buf_reset(&b);
    ck_assert_int_eq(h1_error_response(&b, 413, "too big", D, 1), 0);
    ck_assert_str_eq(str(&b), "HTTP/1.1 413 Content Too Large\r\n"
                              "content-type: text/plain; charset=utf-8\r\n"
                              "content-length: 8\r\n"
                              "date: " D "\r\n"
                              "\r\n"
                              "too big\n");
    buf_reset(&b);
    /* no date given: one is supplied */
    ck_assert_int_eq(h1_error_response(&b, 505, "x", NULL, 0), 0);
    ck_assert_ptr_nonnull(strstr(str(&b), " GMT\r\n"));
    buf_free(&b);
}
END_TEST

START_TEST(reason_phrases)
{
    struct {
        int code;
        const char *r;
    } t[] = {{100, "Continue"},
             {101, "Switching Protocols"},
             {200, "OK"},
             {204, "No Content"},
             {206, "Partial Content"},
             {301, "Moved Permanently"},
             {304, "Not Modified"},
             {308, "Permanent Redirect"},
             {400, "Bad Request"},
             {404, "Not Found"},
             {413, "Content Too Large"},
             {414, "URI Too Long"},
             {417, "Expectation Failed"},
             {421, "Misdirected Request"},
             {422, "Unprocessable Content"},
             {426, "Upgrade Required"},
             {431, "Request Header Fields Too Large"},
             {500, "Internal Server Error"},
             {501, "Not Implemented"},
             {505, "HTTP Version Not Supported"},
             {299, "Unknown"},
             {999, "Unknown"}};
    for (size_t i = 0; i < sizeof t / sizeof *t; i++)
        ck_assert_str_eq(h1_reason_phrase(t[i].code), t[i].r);
    /* every RFC 9110 code has a phrase */
    const int rfc9110[] = {100, 101, 200, 201, 202, 203, 204, 205, 206, 300, 301,
                           302, 303, 304, 305, 307, 308, 400, 401, 402, 403, 404,
                           405, 406, 407, 408, 409, 410, 411, 412, 413, 414, 415,
                           416, 417, 421, 422, 426, 500, 501, 502, 503, 504, 505};
    for (size_t i = 0; i < sizeof rfc9110 / sizeof *rfc9110; i++)
        ck_assert_str_ne(h1_reason_phrase(rfc9110[i]), "Unknown");
}
END_TEST

START_TEST(date_cache)
{
    const char *a = h1_date_now(784111777L);
    ck_assert_str_eq(a, "Sun, 06 Nov 1994 08:49:37 GMT");
    ck_assert_ptr_eq(h1_date_now(784111777L), a);
    ck_assert_str_eq(h1_date_now(784111778L), "Sun, 06 Nov 1994 08:49:38 GMT");
    ck_assert_str_eq(h1_date_now(0), "Thu, 01 Jan 1970 00:00:00 GMT");
    ck_assert_str_eq(h1_date_now(951782400L), "Tue, 29 Feb 2000 00:00:00 GMT");
    ck_assert_uint_eq(strlen(h1_date_now(4102444799L)), 29); /* 2099-12-31 */
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("http1_response");
    TCase *t = tcase_create("headers");
    tcase_add_test(t, head_announce_keep_alive_11);
    tcase_add_test(t, header_check_ok);
    tcase_add_test(t, header_check_bad_names);
    tcase_add_test(t, header_check_bad_values);
    tcase_add_test(t, header_check_every_position);
    suite_add_tcase(s, t);

    t = tcase_create("head");
    tcase_add_test(t, head_content_length_11);
    tcase_add_test(t, head_chunked_11);
    tcase_add_test(t, head_close_11);
    tcase_add_test(t, head_10_no_length);
    tcase_add_test(t, head_10_keep_alive);
    tcase_add_test(t, head_10_trailers_not_chunked);
    tcase_add_test(t, head_head_request);
    tcase_add_test(t, head_204_304);
    tcase_add_test(t, head_1xx);
    tcase_add_test(t, head_trailers_force_chunked);
    tcase_add_test(t, head_drops_server_managed);
    tcase_add_test(t, head_names_lower_cased);
    tcase_add_test(t, head_unknown_status);
    tcase_add_test(t, head_invalid_status);
    tcase_add_test(t, head_injection_refused);
    tcase_add_test(t, head_invalid_content_length);
    tcase_add_test(t, head_rollback_after_compaction);
    suite_add_tcase(s, t);

    t = tcase_create("body");
    tcase_add_test(t, chunks);
    tcase_add_test(t, chunk_last);
    tcase_add_test(t, error_response);
    tcase_add_test(t, reason_phrases);
    tcase_add_test(t, date_cache);
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
