/*
 * test_pubsub_redis.c - Check suite for the pure parts of
 * src/master/pubsub_redis.c: the backoff schedule, and the instance tag
 * that keeps an instance from delivering its own messages twice. The
 * sockets are exercised against a real redis-server by
 * tests/integration/test_pubsub_redis.py.
 */
#include <check.h>
#include <hiredis/hiredis.h>
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

/* A bulk streamed in chunks: the partial reply goes over the bound as soon
 * as more than limit bytes wait, long before the announced size. */
START_TEST(reader_bounds_streamed_bulk)
{
    const size_t limit = 1u << 20;
    struct redisReader *rd = redis_reader_new();
    ck_assert_ptr_nonnull(rd);
    const char *head = "*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1000000000\r\n";
    ck_assert_int_eq(redisReaderFeed(rd, head, strlen(head)), REDIS_OK);
    void *reply = NULL;
    ck_assert_int_eq(redisReaderGetReply(rd, &reply), REDIS_OK);
    ck_assert_ptr_null(reply);
    /* the announced length alone is over the bound */
    ck_assert_int_eq(redis_reader_over(rd, limit), 1);
    ck_assert_int_eq(redis_reader_over(rd, 2000000000u), 0);
    static char chunk[65536];
    memset(chunk, 'x', sizeof chunk);
    size_t fed = 0;
    while (!redis_reader_over(rd, 2 * limit) && fed < 64 * limit) {
        ck_assert_int_eq(redisReaderFeed(rd, chunk, sizeof chunk), REDIS_OK);
        ck_assert_int_eq(redisReaderGetReply(rd, &reply), REDIS_OK);
        ck_assert_ptr_null(reply);
        fed += sizeof chunk;
    }
    ck_assert_uint_le(fed, 2 * limit + sizeof chunk);
    redisReaderFree(rd);
}
END_TEST

START_TEST(reader_bounds_huge_bulk_header)
{
    struct redisReader *rd = redis_reader_new();
    const char *h = "$9223372036854775807\r\nab";
    ck_assert_int_eq(redisReaderFeed(rd, h, strlen(h)), REDIS_OK);
    void *reply = NULL;
    ck_assert_int_eq(redisReaderGetReply(rd, &reply), REDIS_OK);
    ck_assert_ptr_null(reply);
    ck_assert_int_eq(redis_reader_over(rd, 1u << 20), 1);
    redisReaderFree(rd);
}
END_TEST

START_TEST(reader_refuses_big_and_nested_arrays)
{
    void *reply = NULL;
    struct redisReader *rd = redis_reader_new();
    const char *big = "*200000000\r\n";
    ck_assert_int_eq(redisReaderFeed(rd, big, strlen(big)), REDIS_OK);
    ck_assert_int_eq(redisReaderGetReply(rd, &reply), REDIS_ERR);
    redisReaderFree(rd);

    rd = redis_reader_new();
    const char *nested = "*2\r\n*1\r\n:1\r\n:2\r\n";
    ck_assert_int_eq(redisReaderFeed(rd, nested, strlen(nested)), REDIS_OK);
    ck_assert_int_eq(redisReaderGetReply(rd, &reply), REDIS_ERR);
    redisReaderFree(rd);

    /* what the links do receive still parses */
    rd = redis_reader_new();
    const char *msg = "*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n+PONG\r\n";
    ck_assert_int_eq(redisReaderFeed(rd, msg, strlen(msg)), REDIS_OK);
    ck_assert_int_eq(redisReaderGetReply(rd, &reply), REDIS_OK);
    ck_assert_ptr_nonnull(reply);
    redisReply *x = reply;
    ck_assert_int_eq(x->type, REDIS_REPLY_ARRAY);
    ck_assert_uint_eq(x->elements, 3);
    ck_assert_int_eq(memcmp(x->element[2]->str, "hi", 2), 0);
    freeReplyObject(reply);
    ck_assert_int_eq(redisReaderGetReply(rd, &reply), REDIS_OK);
    ck_assert_int_eq(((redisReply *)reply)->type, REDIS_REPLY_STATUS);
    freeReplyObject(reply);
    ck_assert_int_eq(redis_reader_over(rd, 1u << 20), 0);
    redisReaderFree(rd);
}
END_TEST

/* A message whose payload is over the bound, fed in pieces of every size:
 * the reply parses with a nil payload, nothing of the payload is held, and
 * the replies around it come through whole. */
START_TEST(skipper_drops_a_bulk_over_the_bound)
{
    static const char before[] = "*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n";
    static const char head[] = "*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$70000\r\n";
    static const char after[] = "\r\n:7\r\n$-1\r\n+OK\r\n";
    size_t big = 70000, total = strlen(before) + strlen(head) + big + strlen(after);
    char *stream = malloc(total);
    ck_assert_ptr_nonnull(stream);
    size_t at = 0;
    memcpy(stream + at, before, strlen(before));
    at += strlen(before);
    memcpy(stream + at, head, strlen(head));
    at += strlen(head);
    memset(stream + at, 'x', big);
    at += big;
    memcpy(stream + at, after, strlen(after));
    size_t steps[] = {1, 3, 7, 4096, 65536, total};
    for (size_t si = 0; si < sizeof steps / sizeof *steps; si++) {
        struct redisReader *rd = redis_reader_new();
        redis_skipper k = {0};
        long skipped = 0;
        int replies = 0;
        for (size_t off = 0; off < total; off += steps[si]) {
            size_t n = total - off < steps[si] ? total - off : steps[si];
            long r = redis_skip_feed(&k, rd, stream + off, n, 1u << 16);
            ck_assert_int_ge(r, 0);
            skipped += r;
            ck_assert_int_eq(redis_reader_over(rd, 1u << 16), 0);
            void *reply;
            while (redisReaderGetReply(rd, &reply) == REDIS_OK && reply) {
                redisReply *x = reply;
                switch (replies++) {
                case 0:
                    ck_assert_int_eq(x->type, REDIS_REPLY_ARRAY);
                    ck_assert_str_eq(x->element[2]->str, "hi");
                    break;
                case 1:
                    ck_assert_int_eq(x->type, REDIS_REPLY_ARRAY);
                    ck_assert_uint_eq(x->elements, 3);
                    ck_assert_str_eq(x->element[1]->str, "ch");
                    ck_assert_int_eq(x->element[2]->type, REDIS_REPLY_NIL);
                    break;
                case 2:
                    ck_assert_int_eq(x->type, REDIS_REPLY_INTEGER);
                    ck_assert_int_eq(x->integer, 7);
                    break;
                case 3:
                    ck_assert_int_eq(x->type, REDIS_REPLY_NIL); /* a real null bulk stays one */
                    break;
                default:
                    ck_assert_int_eq(x->type, REDIS_REPLY_STATUS);
                }
                freeReplyObject(reply);
            }
        }
        ck_assert_int_eq(replies, 5);
        ck_assert_int_eq(skipped, 1);
        redisReaderFree(rd);
    }
    free(stream);
}
END_TEST

START_TEST(skipper_refuses_a_bad_bulk_header)
{
    struct redisReader *rd = redis_reader_new();
    redis_skipper k = {0};
    ck_assert_int_eq(redis_skip_feed(&k, rd, "$12x\r\n", 7, 100), -1);
    redisReaderFree(rd);
    rd = redis_reader_new();
    k = (redis_skipper){0};
    ck_assert_int_eq(redis_skip_feed(&k, rd, "$123456789012345678901234567\r\n", 31, 100), -1);
    redisReaderFree(rd);
}
END_TEST

START_TEST(escape_for_the_log)
{
    char out[64];
    ck_assert_uint_eq(redis_escape(out, sizeof out, "NOPERM no", 9, 120), 9);
    ck_assert_str_eq(out, "NOPERM no");
    redis_escape(out, sizeof out, "a\r\nb\x1b[2J\\", 9, 120);
    ck_assert_str_eq(out, "a\\x0d\\x0ab\\x1b[2J\\x5c");
    /* cut at max bytes of input, and to fit out, never mid-escape */
    redis_escape(out, sizeof out, "abcdef", 6, 3);
    ck_assert_str_eq(out, "abc");
    char small[6];
    redis_escape(small, sizeof small, "a\x01", 2, 120);
    ck_assert_str_eq(small, "a\\x01");
    redis_escape(small, sizeof small, "ab\x01", 3, 120);
    ck_assert_str_eq(small, "ab");
}
END_TEST

static Suite *pubsub_redis_suite(void)
{
    Suite *s = suite_create("pubsub_redis");
    TCase *tc = tcase_create("pure");
    tcase_add_test(tc, backoff_doubles_to_cap);
    tcase_add_test(tc, untag);
    tcase_add_test(tc, escape_for_the_log);
    tcase_add_test(tc, reader_bounds_streamed_bulk);
    tcase_add_test(tc, reader_bounds_huge_bulk_header);
    tcase_add_test(tc, reader_refuses_big_and_nested_arrays);
    tcase_add_test(tc, skipper_drops_a_bulk_over_the_bound);
    tcase_add_test(tc, skipper_refuses_a_bad_bulk_header);
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
