/*
 * test_access_format.c - Check suite for src/common/access_format.c: the
 * built-in formats, every custom atom, compile errors with their offsets,
 * escaping (text and json), and lines that do not fit.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "common/access_format.h"

static int hdr(void *ud, const char *name, const char **value, size_t *len)
{
    (void)ud;
    static const struct {
        const char *name, *value;
    } h[] = {
        {"user-agent", "curl/8"},
        {"referer", "http://x/"},
        {"x-evil", "a\"b\\c\nd\x01\xff"},
    };
    for (size_t i = 0; i < sizeof h / sizeof h[0]; i++) {
        if (strcmp(h[i].name, name) == 0) {
            *value = h[i].value;
            *len = strlen(h[i].value);
            return 1;
        }
    }
    return 0;
}

static access_record sample(void)
{
    access_record r = {
        .client = "10.0.0.1",
        .time_clf = "10/Oct/2000:13:55:36 +0000",
        .time_iso = "2000-10-10T13:55:36.123+00:00",
        .time = 971186136.123,
        .duration = 0.0125,
        .method = "GET",
        .path = "/a/b",
        .path_len = 4,
        .query = "x=1",
        .query_len = 3,
        .protocol = "HTTP/1.1",
        .status = 200,
        .bytes = 15,
        .type = "http",
        .pid = 42,
        .req_header = hdr,
    };
    return r;
}

/* Compile spec, render r, compare with want (without the newline). */
static void expect(const char *spec, const access_record *r, const char *want)
{
    access_format f;
    const char *msg = NULL;
    size_t off = 0;
    ck_assert_msg(access_format_compile(&f, spec, &msg, &off) == 0, "%s: %s", spec, msg);
    char line[ACCESS_FORMAT_LINE_MAX];
    size_t n = access_format_render(&f, r, line, sizeof line);
    ck_assert_uint_gt(n, 0);
    ck_assert_int_eq(line[n - 1], '\n');
    line[n - 1] = '\0';
    ck_assert_str_eq(line, want);
    access_format_free(&f);
}

static void expect_error(const char *spec, size_t want_off)
{
    access_format f;
    const char *msg = NULL;
    size_t off = 99;
    ck_assert_int_eq(access_format_compile(&f, spec, &msg, &off), -1);
    ck_assert_ptr_nonnull(msg);
    ck_assert_uint_eq(off, want_off);
}

START_TEST(test_clf)
{
    access_record r = sample();
    expect("clf", &r, "10.0.0.1 - - [10/Oct/2000:13:55:36 +0000] \"GET /a/b?x=1 HTTP/1.1\" 200 15");
    r.bytes = 0;
    r.query_len = 0;
    expect("clf", &r, "10.0.0.1 - - [10/Oct/2000:13:55:36 +0000] \"GET /a/b HTTP/1.1\" 200 -");
}
END_TEST

START_TEST(test_combined)
{
    access_record r = sample();
    expect("combined", &r,
           "10.0.0.1 - - [10/Oct/2000:13:55:36 +0000] \"GET /a/b?x=1 HTTP/1.1\" 200 15 "
           "\"http://x/\" \"curl/8\"");
    r.req_header = NULL; /* no headers at all: "-" */
    expect(
        "combined", &r,
        "10.0.0.1 - - [10/Oct/2000:13:55:36 +0000] \"GET /a/b?x=1 HTTP/1.1\" 200 15 \"-\" \"-\"");
}
END_TEST

START_TEST(test_no_request_line)
{
    /* A request refused before it had a scope (400, 408, 431...). */
    access_record r = sample();
    r.method = NULL;
    r.path = r.query = NULL;
    r.path_len = r.query_len = 0;
    r.status = 400;
    r.bytes = 0;
    expect("clf", &r, "10.0.0.1 - - [10/Oct/2000:13:55:36 +0000] \"-\" 400 -");
    expect("%m %U %q|", &r, "- - |");
    /* Refused after the request line: method and target known, the version not. */
    r = sample();
    r.protocol = NULL;
    r.status = 413;
    expect("%r|%H", &r, "GET /a/b?x=1 -|-");
}
END_TEST

START_TEST(test_atoms)
{
    access_record r = sample();
    r.reason = "client_closed";
    r.resp_values = "text/plain\0\0";
    r.resp_values_len = 12;
    expect("%h|%a|%m|%U|%q|%H|%s|%>s|%b|%B|%P|%X|%y", &r,
           "10.0.0.1|10.0.0.1|GET|/a/b|?x=1|HTTP/1.1|200|200|15|15|42|client_closed|http");
    expect("%D|%{us}T|%{ms}T|%T|%{s}T", &r, "12500|12500|12.500|0|0");
    expect("%{iso}t %{msec}t %t %{clf}t", &r,
           "2000-10-10T13:55:36.123+00:00 971186136.123 [10/Oct/2000:13:55:36 +0000] "
           "[10/Oct/2000:13:55:36 +0000]");
    expect("%{User-Agent}i %{X-Missing}i", &r, "curl/8 -");
    expect("%{Content-Type}o %{X-None}o %{etag}o", &r, "text/plain - -");
    expect("100%% %r", &r, "100% GET /a/b?x=1 HTTP/1.1");
}
END_TEST

START_TEST(test_escaping)
{
    access_record r = sample();
    r.path = "/\"q\"";
    r.path_len = 4;
    expect("%U %{x-evil}i", &r, "/\\x22q\\x22 a\\x22b\\x5cc\\x0ad\\x01\\xff");
}
END_TEST

START_TEST(test_tls_atoms)
{
    access_record r = sample();
    expect("%{tls_version}x %{tls_cipher}x %{tls_session_reused}x %H", &r, "- - - HTTP/1.1");
    r.tls_version = "TLSv1.2";
    r.tls_cipher = "ECDHE-ECDSA-AES128-GCM-SHA256";
    expect("%{tls_version}x %{tls_cipher}x", &r, "TLSv1.2 ECDHE-ECDSA-AES128-GCM-SHA256");
    expect("%{SSL_PROTOCOL}x/%{SSL_CIPHER}x", &r, "TLSv1.2/ECDHE-ECDSA-AES128-GCM-SHA256");
    expect("%{tls_session_reused}x", &r, ".");
    r.tls_reused = 1;
    expect("%{tls_session_reused}x", &r, "r");
}
END_TEST

START_TEST(test_json)
{
    access_record r = sample();
    expect("json", &r,
           "{\"time\":\"2000-10-10T13:55:36.123+00:00\",\"client\":\"10.0.0.1\",\"type\":\"http\","
           "\"method\":\"GET\",\"path\":\"/a/b\",\"query\":\"x=1\",\"protocol\":\"HTTP/1.1\","
           "\"tls_version\":null,\"tls_cipher\":null,\"status\":200,\"bytes\":15,\"duration_ms\":"
           "12.500,\"referer\":\"http://x/\","
           "\"user_agent\":\"curl/8\",\"reason\":null,\"pid\":42}");
    r.method = NULL;
    r.client = NULL;
    r.req_header = NULL;
    r.reason = "body_too_large";
    r.status = 413;
    r.protocol = NULL;
    r.tls_version = "TLSv1.3";
    r.tls_cipher = "TLS_AES_128_GCM_SHA256";
    expect("json", &r,
           "{\"time\":\"2000-10-10T13:55:36.123+00:00\",\"client\":null,\"type\":\"http\","
           "\"method\":null,\"path\":null,\"query\":null,\"protocol\":null,"
           "\"tls_version\":\"TLSv1.3\",\"tls_cipher\":\"TLS_AES_128_GCM_SHA256\","
           "\"tls_session_reused\":false,\"status\":413,\"bytes\":15,\"duration_ms\":12.500,"
           "\"referer\":null,"
           "\"user_agent\":null,\"reason\":\"body_too_large\",\"pid\":42}");
}
END_TEST

START_TEST(test_json_escaping)
{
    access_record r = sample();
    r.path = "/a\"\\\n\x7f\xc3\xa9";
    r.path_len = strlen(r.path);
    access_format f;
    const char *msg;
    size_t off;
    ck_assert_int_eq(access_format_compile(&f, "json", &msg, &off), 0);
    char line[ACCESS_FORMAT_LINE_MAX];
    size_t n = access_format_render(&f, &r, line, sizeof line);
    line[n] = '\0';
    ck_assert_ptr_nonnull(strstr(line, "\"path\":\"/a\\\"\\\\\\u000a\\u007f\\u00c3\\u00a9\""));
    access_format_free(&f);
}
END_TEST

START_TEST(test_long_fields_keep_json_whole)
{
    /* Fields are capped so that a json line always fits ACCESS_FORMAT_LINE_MAX. */
    static char big[20000];
    memset(big, '"', sizeof big - 1);
    access_record r = sample();
    r.path = big;
    r.path_len = sizeof big - 1;
    r.query = big;
    r.query_len = sizeof big - 1;
    access_format f;
    const char *msg;
    size_t off;
    ck_assert_int_eq(access_format_compile(&f, "json", &msg, &off), 0);
    char line[ACCESS_FORMAT_LINE_MAX];
    size_t n = access_format_render(&f, &r, line, sizeof line);
    ck_assert_uint_lt(n, sizeof line);
    ck_assert_int_eq(line[n - 1], '\n');
    ck_assert_int_eq(line[n - 2], '}');
    access_format_free(&f);
}
END_TEST

START_TEST(test_truncation)
{
    access_record r = sample();
    access_format f;
    const char *msg;
    size_t off;
    ck_assert_int_eq(access_format_compile(&f, "%h %U %U %U", &msg, &off), 0);
    char line[8];
    size_t n = access_format_render(&f, &r, line, sizeof line);
    ck_assert_uint_eq(n, 8);
    ck_assert_int_eq(memcmp(line, "10.0.0.\n", 8), 0);
    access_format_free(&f);
}
END_TEST

START_TEST(test_needs)
{
    access_format f;
    const char *msg;
    size_t off;
    ck_assert_int_eq(access_format_compile(&f, "%m %{a}o %{B}o", &msg, &off), 0);
    ck_assert_uint_eq(f.needs, AF_NEED_RESP_HEADERS);
    ck_assert_uint_eq(f.n_resp, 2);
    ck_assert_str_eq(f.resp_names[0], "a");
    ck_assert_str_eq(f.resp_names[1], "b"); /* lower-cased */
    access_format_free(&f);
    ck_assert_int_eq(access_format_compile(&f, "combined", &msg, &off), 0);
    ck_assert_uint_eq(f.needs, AF_NEED_TIME_CLF);
    access_format_free(&f);
    ck_assert_int_eq(access_format_compile(&f, "json", &msg, &off), 0);
    ck_assert_uint_eq(f.needs, AF_NEED_TIME_ISO);
    ck_assert_int_eq(f.json, 1);
    access_format_free(&f);
}
END_TEST

START_TEST(test_errors)
{
    expect_error("%{tls_nope}x", 0);
    expect_error("%Z", 0);
    expect_error("abc %", 4);
    expect_error("ab %{User-Agent", 3);
    expect_error("x %{}i", 2);
    expect_error("x %{iso}q", 2);
    expect_error("%m %{fortnight}T", 3);
    expect_error("%m %{iso}", 3);
    expect_error("plain % text", 6);
    expect_error("common", 0); /* no atom, not a built-in name */
    expect_error("", 0);
}
END_TEST

START_TEST(test_too_many_atoms)
{
    char spec[2000];
    size_t n = 0;
    for (int i = 0; i < 600; i++) {
        spec[n++] = '%';
        spec[n++] = 'm';
    }
    spec[n] = '\0';
    access_format f;
    const char *msg = NULL;
    size_t off;
    ck_assert_int_eq(access_format_compile(&f, spec, &msg, &off), -1);
    ck_assert_ptr_nonnull(msg);
}
END_TEST

static Suite *access_format_suite(void)
{
    Suite *s = suite_create("access_format");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_clf);
    tcase_add_test(tc, test_combined);
    tcase_add_test(tc, test_no_request_line);
    tcase_add_test(tc, test_atoms);
    tcase_add_test(tc, test_escaping);
    tcase_add_test(tc, test_tls_atoms);
    tcase_add_test(tc, test_json);
    tcase_add_test(tc, test_json_escaping);
    tcase_add_test(tc, test_long_fields_keep_json_whole);
    tcase_add_test(tc, test_truncation);
    tcase_add_test(tc, test_needs);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_too_many_atoms);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(access_format_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
