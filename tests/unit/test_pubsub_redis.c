/*
 * test_pubsub_redis.c - Check suite for the pure parts of
 * src/master/pubsub_redis.c: the backoff schedule, and the instance tag
 * that keeps an instance from delivering its own messages twice. The
 * sockets are exercised against a real redis-server by
 * tests/integration/test_pubsub_redis.py.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "master/pubsub_redis.h"

START_TEST(backoff_doubles_to_cap)
{
    ck_assert_uint_eq(redis_backoff_ms(1), 100);
    ck_assert_uint_eq(redis_backoff_ms(2), 200);
    ck_assert_uint_eq(redis_backoff_ms(3), 400);
    ck_assert_uint_eq(redis_backoff_ms(6), 3200);
    ck_assert_uint_eq(redis_backoff_ms(7), 5000);
    ck_assert_uint_eq(redis_backoff_ms(1000), 5000);
}
END_TEST

START_TEST(untag)
{
    const unsigned char me[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    const unsigned char other[8] = {9, 2, 3, 4, 5, 6, 7, 8};
    unsigned char p[64];
    const unsigned char *msg;
    size_t len;
    memcpy(p, REDIS_TAG_MAGIC, 4);
    memcpy(p + 4, me, 8);
    memcpy(p + 12, "hello", 5);
    ck_assert_int_eq(redis_untag(me, p, 17, &msg, &len), 0); /* ours: skipped */
    ck_assert_int_eq(redis_untag(other, p, 17, &msg, &len), 1);
    ck_assert_uint_eq(len, 5);
    ck_assert_int_eq(memcmp(msg, "hello", 5), 0);
    /* an empty message of another instance */
    ck_assert_int_eq(redis_untag(other, p, 12, &msg, &len), 1);
    ck_assert_uint_eq(len, 0);
    /* no tag (another Redis client published): the payload is the message */
    ck_assert_int_eq(redis_untag(me, (const unsigned char *)"plain", 5, &msg, &len), 1);
    ck_assert_uint_eq(len, 5);
    ck_assert_int_eq(memcmp(msg, "plain", 5), 0);
    /* the magic alone, too short for an id: a plain message */
    ck_assert_int_eq(redis_untag(me, p, 8, &msg, &len), 1);
    ck_assert_uint_eq(len, 8);
}
END_TEST

static Suite *pubsub_redis_suite(void)
{
    Suite *s = suite_create("pubsub_redis");
    TCase *tc = tcase_create("pure");
    tcase_add_test(tc, backoff_doubles_to_cap);
    tcase_add_test(tc, untag);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(pubsub_redis_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
