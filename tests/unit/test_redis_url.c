/*
 * test_redis_url.c - Check suite for src/common/redis_url.c: every url form
 * pubsub.url accepts (TCP, IPv6, credentials, percent-encoding, unix
 * sockets) and each malformed one refused with a reason.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "common/redis_url.h"

static redis_url parse_ok(const char *s)
{
    redis_url u;
    const char *msg = NULL;
    ck_assert_msg(redis_url_parse(s, &u, &msg) == 0, "%s: %s", s, msg ? msg : "");
    return u;
}

static const char *parse_bad(const char *s)
{
    redis_url u;
    const char *msg = NULL;
    ck_assert_msg(redis_url_parse(s, &u, &msg) < 0, "%s was accepted", s);
    ck_assert_ptr_nonnull(msg);
    return msg;
}

START_TEST(tcp_forms)
{
    redis_url u = parse_ok("redis://127.0.0.1:6380/3");
    ck_assert_int_eq(u.is_unix, 0);
    ck_assert_str_eq(u.host, "127.0.0.1");
    ck_assert_int_eq(u.port, 6380);
    ck_assert_int_eq(u.db, 3);
    ck_assert_str_eq(u.password, "");
    u = parse_ok("redis://cache.example.org");
    ck_assert_str_eq(u.host, "cache.example.org");
    ck_assert_int_eq(u.port, REDIS_DEFAULT_PORT);
    ck_assert_int_eq(u.db, 0);
    u = parse_ok("redis://h/");
    ck_assert_int_eq(u.db, 0);
    u = parse_ok("redis://[::1]:7000/1");
    ck_assert_str_eq(u.host, "::1");
    ck_assert_int_eq(u.port, 7000);
    ck_assert_int_eq(u.db, 1);
    char where[300];
    redis_url_where(&u, where, sizeof where);
    ck_assert_str_eq(where, "[::1]:7000");
}
END_TEST

START_TEST(credentials)
{
    redis_url u = parse_ok("redis://:s3cret@10.0.0.5:6379/0");
    ck_assert_str_eq(u.user, "");
    ck_assert_str_eq(u.password, "s3cret");
    ck_assert_str_eq(u.host, "10.0.0.5");
    u = parse_ok("redis://app:p%40ss%3Aw@h:1");
    ck_assert_str_eq(u.user, "app");
    ck_assert_str_eq(u.password, "p@ss:w");
    /* a raw '@' in a password: the last '@' ends the credentials */
    u = parse_ok("redis://:a@b@h");
    ck_assert_str_eq(u.password, "a@b");
    ck_assert_str_eq(u.host, "h");
    char where[300];
    redis_url_where(&u, where, sizeof where);
    ck_assert_ptr_null(strstr(where, "a@b")); /* never the password */
}
END_TEST

START_TEST(unix_forms)
{
    redis_url u = parse_ok("unix:/run/redis/redis.sock");
    ck_assert_int_eq(u.is_unix, 1);
    ck_assert_str_eq(u.path, "/run/redis/redis.sock");
    u = parse_ok("redis+unix:///tmp/r.sock?db=2");
    ck_assert_str_eq(u.path, "/tmp/r.sock");
    ck_assert_int_eq(u.db, 2);
    u = parse_ok("redis+unix://:pw@/tmp/r.sock");
    ck_assert_str_eq(u.password, "pw");
    ck_assert_str_eq(u.path, "/tmp/r.sock");
    char where[300];
    redis_url_where(&u, where, sizeof where);
    ck_assert_str_eq(where, "unix:/tmp/r.sock");
}
END_TEST

START_TEST(refused)
{
    parse_bad("");
    parse_bad("http://h");
    parse_bad("rediss://h"); /* TLS is not supported */
    parse_bad("redis://");
    parse_bad("redis://:6379");
    parse_bad("redis://h:0");
    parse_bad("redis://h:65536");
    parse_bad("redis://h:12x");
    parse_bad("redis://h:");
    parse_bad("redis://h/x");
    parse_bad("redis://h/-1");
    parse_bad("redis://[::1");
    parse_bad("redis://[::1]x");
    parse_bad("redis://pw@h");       /* credentials need ':' */
    parse_bad("redis://:@h");        /* empty password */
    parse_bad("redis://:p%4@h");     /* bad escape */
    parse_bad("redis://:p%00@h");    /* NUL */
    parse_bad("redis://:p%0d%0a@h"); /* a line break would split the AUTH command */
    parse_bad("redis://h h");
    parse_bad("unix:relative.sock");
    parse_bad("unix:");
    parse_bad("redis+unix:///tmp/r.sock?x=1");
    char longpath[200];
    memset(longpath, 'a', sizeof longpath);
    memcpy(longpath, "unix:/", 6);
    longpath[sizeof longpath - 1] = '\0';
    parse_bad(longpath);
    char longhost[300] = "redis://";
    memset(longhost + 8, 'h', 280);
    longhost[288] = '\0';
    parse_bad(longhost);
}
END_TEST

static void masked_is(const char *url, const char *want)
{
    char *m = redis_url_masked(url);
    ck_assert_ptr_nonnull(m);
    ck_assert_str_eq(m, want);
    free(m);
}

START_TEST(masked)
{
    masked_is("redis://:hunter2@h:1/0", "redis://:***@h:1/0");
    masked_is("redis://bob:hunter2@[::1]:7000/2", "redis://bob:***@[::1]:7000/2");
    masked_is("redis://:p@ss@h", "redis://:***@h");
    masked_is("redis+unix://u:pw@/run/redis.sock?db=1", "redis+unix://u:***@/run/redis.sock?db=1");
    masked_is("redis://h:6379/0", "redis://h:6379/0");
    masked_is("unix:/run/redis.sock", "unix:/run/redis.sock");
    masked_is("redis://secret@h", "redis://***@h");
}
END_TEST

static Suite *redis_url_suite(void)
{
    Suite *s = suite_create("redis_url");
    TCase *tc = tcase_create("parse");
    tcase_add_test(tc, tcp_forms);
    tcase_add_test(tc, credentials);
    tcase_add_test(tc, unix_forms);
    tcase_add_test(tc, refused);
    tcase_add_test(tc, masked);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(redis_url_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
