/*
 * test_static_http.c - Check suite for src/worker/apps/static_http.c: ETag
 * and date formats, the three HTTP-date forms, entity-tag lists, single
 * byte ranges (64-bit sizes included) and the precondition order.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "worker/apps/static_http.h"

static pagi_str S(const char *s)
{
    return (pagi_str){s, strlen(s)};
}

START_TEST(test_etag_and_date)
{
    char e[STATIC_ETAG_MAX], d[STATIC_DATE_MAX];
    size_t n = static_etag(e, 0x5f5e100, 0x1234);
    ck_assert_str_eq(e, "\"5f5e100-1234\"");
    ck_assert_uint_eq(n, strlen(e));
    static_etag(e, 1, INT64_C(5) << 32);
    ck_assert_str_eq(e, "\"1-500000000\"");
    n = static_http_date(d, 784111777);
    ck_assert_str_eq(d, "Sun, 06 Nov 1994 08:49:37 GMT");
    ck_assert_uint_eq(n, 29);
}
END_TEST

START_TEST(test_parse_dates)
{
    int64_t t = 0;
    ck_assert_int_eq(static_parse_http_date(S("Sun, 06 Nov 1994 08:49:37 GMT").ptr, 29, &t), 0);
    ck_assert_int_eq(t, 784111777);
    const char *rfc850 = "Sunday, 06-Nov-94 08:49:37 GMT";
    ck_assert_int_eq(static_parse_http_date(rfc850, strlen(rfc850), &t), 0);
    ck_assert_int_eq(t, 784111777);
    const char *asc = "Sun Nov  6 08:49:37 1994";
    ck_assert_int_eq(static_parse_http_date(asc, strlen(asc), &t), 0);
    ck_assert_int_eq(t, 784111777);
    const char *bad[] = {"",
                         "yesterday",
                         "Sun, 06 Nov 1994 08:49:37",
                         "Sun, 6 Nov 1994 08:49:37 GMT",
                         "Sun, 06 Foo 1994 08:49:37 GMT",
                         "Sun, 06 Nov 1994 25:49:37 GMT",
                         "Sun, 06 Nov 1994 08:49:37 GMTx",
                         "Sun, 32 Nov 1994 08:49:37 GMT"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(static_parse_http_date(bad[i], strlen(bad[i]), &t) == -1, "accepted '%s'",
                      bad[i]);
}
END_TEST

START_TEST(test_etag_lists)
{
    const char *e = "\"abc-1\"";
    size_t n = strlen(e);
    ck_assert(static_etag_list_match(S("\"abc-1\""), e, n, 1));
    ck_assert(static_etag_list_match(S("*"), e, n, 1));
    ck_assert(static_etag_list_match(S("\"x\", \"abc-1\""), e, n, 1));
    ck_assert(static_etag_list_match(S("\"x\",W/\"abc-1\""), e, n, 1));
    ck_assert(!static_etag_list_match(S("\"x\",W/\"abc-1\""), e, n, 0)); /* If-Match: strong */
    ck_assert(static_etag_list_match(S("*"), e, n, 0));
    ck_assert(!static_etag_list_match(S("\"abc-2\""), e, n, 1));
    ck_assert(!static_etag_list_match(S("abc-1"), e, n, 1));
    ck_assert(!static_etag_list_match(S("\"abc-1"), e, n, 1));
    ck_assert(!static_etag_list_match(S(""), e, n, 1));
}
END_TEST

static void expect_range(const char *v, int64_t size, static_range_rc want, int64_t a, int64_t b)
{
    int64_t f = -7, l = -7;
    static_range_rc rc = static_parse_range(S(v), size, &f, &l);
    ck_assert_msg(rc == want, "range '%s' of %lld: rc %d, want %d", v, (long long)size, rc, want);
    if (want == STATIC_RANGE_OK)
        ck_assert_msg(f == a && l == b, "range '%s' of %lld: %lld-%lld, want %lld-%lld", v,
                      (long long)size, (long long)f, (long long)l, (long long)a, (long long)b);
}

START_TEST(test_ranges)
{
    expect_range("bytes=0-9", 100, STATIC_RANGE_OK, 0, 9);
    expect_range("bytes=10-", 100, STATIC_RANGE_OK, 10, 99);
    expect_range("bytes=-10", 100, STATIC_RANGE_OK, 90, 99);
    expect_range("bytes=-1000", 100, STATIC_RANGE_OK, 0, 99);
    expect_range("bytes=90-1000", 100, STATIC_RANGE_OK, 90, 99);
    expect_range("BYTES = 5-5", 100, STATIC_RANGE_NONE, 0, 0); /* no OWS around '=' */
    expect_range("Bytes=5-5", 100, STATIC_RANGE_OK, 5, 5);
    expect_range("bytes=99-99", 100, STATIC_RANGE_OK, 99, 99);
    expect_range("bytes=100-", 100, STATIC_RANGE_UNSATISFIABLE, 0, 0);
    expect_range("bytes=100-200", 100, STATIC_RANGE_UNSATISFIABLE, 0, 0);
    expect_range("bytes=-0", 100, STATIC_RANGE_UNSATISFIABLE, 0, 0);
    expect_range("bytes=5-4", 100, STATIC_RANGE_NONE, 0, 0);
    expect_range("bytes=0-1,5-6", 100, STATIC_RANGE_NONE, 0, 0);
    expect_range("items=0-1", 100, STATIC_RANGE_NONE, 0, 0);
    expect_range("bytes=", 100, STATIC_RANGE_NONE, 0, 0);
    expect_range("bytes=-", 100, STATIC_RANGE_NONE, 0, 0);
    expect_range("bytes=a-b", 100, STATIC_RANGE_NONE, 0, 0);
    expect_range("bytes=1-2x", 100, STATIC_RANGE_NONE, 0, 0);
    expect_range("bytes=0-0", 0, STATIC_RANGE_NONE, 0, 0); /* empty file: the whole (empty) 200 */
    expect_range("bytes=99999999999999999999999-", 100, STATIC_RANGE_UNSATISFIABLE, 0, 0);
    expect_range("bytes=0-99999999999999999999999", 100, STATIC_RANGE_OK, 0, 99);
    /* past 4 GiB */
    int64_t big = (INT64_C(5) << 30) + 123;
    expect_range("bytes=5368709000-", big, STATIC_RANGE_OK, 5368709000, big - 1);
    expect_range("bytes=-100", big, STATIC_RANGE_OK, big - 100, big - 1);
}
END_TEST

START_TEST(test_preconditions)
{
    const char *e = "\"10-20\"";
    size_t n = strlen(e);
    int64_t mtime = 784111777;
    static_validators v;
    memset(&v, 0, sizeof v);
    ck_assert_int_eq(static_evaluate(&v, e, n, mtime), STATIC_COND_RANGE_ALLOWED);

    v.has_if_none_match = 1;
    v.if_none_match = S("\"10-20\"");
    ck_assert_int_eq(static_evaluate(&v, e, n, mtime), STATIC_COND_NOT_MODIFIED);
    /* If-Modified-Since is ignored while If-None-Match is present */
    v.if_none_match = S("\"other\"");
    v.has_if_modified = 1;
    v.if_modified = S("Sun, 06 Nov 1994 08:49:37 GMT");
    ck_assert_int_eq(static_evaluate(&v, e, n, mtime), STATIC_COND_RANGE_ALLOWED);
    v.has_if_none_match = 0;
    ck_assert_int_eq(static_evaluate(&v, e, n, mtime), STATIC_COND_NOT_MODIFIED);
    ck_assert_int_eq(static_evaluate(&v, e, n, mtime + 1), STATIC_COND_RANGE_ALLOWED);
    v.if_modified = S("garbage");
    ck_assert_int_eq(static_evaluate(&v, e, n, mtime), STATIC_COND_RANGE_ALLOWED);

    memset(&v, 0, sizeof v);
    v.has_if_match = 1;
    v.if_match = S("\"nope\"");
    ck_assert_int_eq(static_evaluate(&v, e, n, mtime), STATIC_COND_PRECONDITION);
    v.if_match = S("*");
    ck_assert_int_eq(static_evaluate(&v, e, n, mtime), STATIC_COND_RANGE_ALLOWED);
    memset(&v, 0, sizeof v);
    v.has_if_unmodified = 1;
    v.if_unmodified = S("Sun, 06 Nov 1994 08:49:36 GMT");
    ck_assert_int_eq(static_evaluate(&v, e, n, mtime), STATIC_COND_PRECONDITION);

    memset(&v, 0, sizeof v);
    v.now = mtime + 3600;
    v.has_if_range = 1;
    v.if_range = S("\"10-20\"");
    ck_assert_int_eq(static_evaluate(&v, e, n, mtime), STATIC_COND_RANGE_ALLOWED);
    v.if_range = S("W/\"10-20\""); /* weak never matches If-Range */
    ck_assert_int_eq(static_evaluate(&v, e, n, mtime), STATIC_COND_FULL);
    v.if_range = S("\"10-21\"");
    ck_assert_int_eq(static_evaluate(&v, e, n, mtime), STATIC_COND_FULL);
    v.if_range = S("Sun, 06 Nov 1994 08:49:37 GMT");
    ck_assert_int_eq(static_evaluate(&v, e, n, mtime), STATIC_COND_RANGE_ALLOWED);
    ck_assert_int_eq(static_evaluate(&v, e, n, mtime + 5), STATIC_COND_FULL);
    v.now = mtime; /* modified within the last second: the date is a weak validator */
    ck_assert_int_eq(static_evaluate(&v, e, n, mtime), STATIC_COND_FULL);
    v.now = mtime + 1;
    ck_assert_int_eq(static_evaluate(&v, e, n, mtime), STATIC_COND_RANGE_ALLOWED);
}
END_TEST

static Suite *static_http_suite(void)
{
    Suite *s = suite_create("static_http");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_etag_and_date);
    tcase_add_test(tc, test_parse_dates);
    tcase_add_test(tc, test_etag_lists);
    tcase_add_test(tc, test_ranges);
    tcase_add_test(tc, test_preconditions);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(static_http_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
