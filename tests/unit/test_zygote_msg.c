/*
 * test_zygote_msg.c - Check suite for src/master/zygote_msg.c: each message
 * survives a round trip, and a datagram of the wrong size, magic or type,
 * or with fields its type forbids, is refused whole.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "master/zygote_msg.h"

static zygote_msg round_trip(zygote_msg m)
{
    unsigned char b[ZMSG_SIZE];
    ck_assert_uint_eq(zmsg_encode(&m, b), ZMSG_SIZE);
    zygote_msg out;
    memset(&out, 0xa5, sizeof out);
    ck_assert_int_eq(zmsg_decode(b, sizeof b, &out), 0);
    return out;
}

START_TEST(each_type_round_trips)
{
    zygote_msg m = round_trip((zygote_msg){.type = ZMSG_SPAWN, .seq = 7, .num = 3});
    ck_assert_int_eq(m.type, ZMSG_SPAWN);
    ck_assert_uint_eq(m.seq, 7);
    ck_assert_int_eq(m.num, 3);
    ck_assert_int_eq(m.pid, 0);
    ck_assert_int_eq(m.err, 0);
    m = round_trip((zygote_msg){.type = ZMSG_SPAWNED, .seq = 0xffffffffu, .num = 1, .pid = 4242});
    ck_assert_int_eq(m.type, ZMSG_SPAWNED);
    ck_assert_uint_eq(m.seq, 0xffffffffu);
    ck_assert_int_eq(m.pid, 4242);
    m = round_trip((zygote_msg){.type = ZMSG_FAILED, .seq = 1, .num = ZMSG_MAX_NUM, .err = 11});
    ck_assert_int_eq(m.type, ZMSG_FAILED);
    ck_assert_int_eq(m.num, ZMSG_MAX_NUM);
    ck_assert_int_eq(m.err, 11);
}
END_TEST

START_TEST(invalid_messages_are_not_encoded)
{
    unsigned char b[ZMSG_SIZE];
    const zygote_msg bad[] = {
        {.type = ZMSG_SPAWN, .num = 0},
        {.type = ZMSG_SPAWN, .num = ZMSG_MAX_NUM + 1},
        {.type = ZMSG_SPAWN, .num = 1, .pid = 5},
        {.type = ZMSG_SPAWNED, .num = 1, .pid = 0},
        {.type = ZMSG_SPAWNED, .num = 1, .pid = -3},
        {.type = ZMSG_FAILED, .num = 1, .err = 0},
        {.type = ZMSG_FAILED, .num = 1, .err = 4, .pid = 9},
        {.type = (zmsg_type)9, .num = 1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(zmsg_encode(&bad[i], b) == 0, "message %zu encoded", i);
}
END_TEST

START_TEST(bad_datagrams_are_refused)
{
    unsigned char b[ZMSG_SIZE + 1];
    zygote_msg m = {.type = ZMSG_SPAWNED, .seq = 2, .num = 2, .pid = 77}, out = {0};
    ck_assert_uint_eq(zmsg_encode(&m, b), ZMSG_SIZE);
    /* Truncated, or longer than one message. */
    ck_assert_int_eq(zmsg_decode(b, ZMSG_SIZE - 1, &out), -1);
    ck_assert_int_eq(zmsg_decode(b, ZMSG_SIZE + 1, &out), -1);
    ck_assert_int_eq(zmsg_decode(b, 0, &out), -1);
    /* A wrong magic word. */
    unsigned char c[ZMSG_SIZE];
    memcpy(c, b, ZMSG_SIZE);
    c[0] = 'X';
    ck_assert_int_eq(zmsg_decode(c, ZMSG_SIZE, &out), -1);
    /* An unknown type. */
    memcpy(c, b, ZMSG_SIZE);
    uint32_t t = 4;
    memcpy(c + 4, &t, 4);
    ck_assert_int_eq(zmsg_decode(c, ZMSG_SIZE, &out), -1);
    /* A pid where the type allows none (SPAWN carrying a pid). */
    memcpy(c, b, ZMSG_SIZE);
    t = ZMSG_SPAWN;
    memcpy(c + 4, &t, 4);
    ck_assert_int_eq(zmsg_decode(c, ZMSG_SIZE, &out), -1);
    /* A negative pid or number (high bit set). */
    memcpy(c, b, ZMSG_SIZE);
    uint32_t neg = 0x80000001u;
    memcpy(c + 16, &neg, 4);
    ck_assert_int_eq(zmsg_decode(c, ZMSG_SIZE, &out), -1);
    memcpy(c, b, ZMSG_SIZE);
    memcpy(c + 12, &neg, 4);
    ck_assert_int_eq(zmsg_decode(c, ZMSG_SIZE, &out), -1);
    /* Nothing was written on failure; the original still decodes. */
    ck_assert_int_eq(out.pid, 0);
    ck_assert_int_eq(zmsg_decode(b, ZMSG_SIZE, &out), 0);
    ck_assert_int_eq(out.pid, 77);
}
END_TEST

static Suite *zygote_msg_suite(void)
{
    Suite *s = suite_create("zygote_msg");
    TCase *tc = tcase_create("codec");
    tcase_add_test(tc, each_type_round_trips);
    tcase_add_test(tc, invalid_messages_are_not_encoded);
    tcase_add_test(tc, bad_datagrams_are_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(zygote_msg_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
