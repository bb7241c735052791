/*
 * test_pubsub_msg.c - Check suite for src/common/pubsub_msg.c: frames round
 * trip, a frame split anywhere asks for more bytes, and bytes that can
 * never be a valid frame are refused as soon as they are seen.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "common/pubsub_msg.h"

START_TEST(frames_round_trip)
{
    buf b = BUF_INIT;
    pubsub_frame in[] = {
        {.type = PUBSUB_SUB, .channel = "chat", .channel_len = 4},
        {.type = PUBSUB_PUB,
         .channel = "chat",
         .channel_len = 4,
         .data = (const void *)"hi",
         .len = 2},
        {.type = PUBSUB_PUB, .channel = "c", .channel_len = 1}, /* an empty message is one */
        {.type = PUBSUB_UNSUB, .channel = "chat", .channel_len = 4},
    };
    for (size_t i = 0; i < 4; i++)
        ck_assert_int_eq(pubsub_encode(&in[i], &b), 0);
    size_t off = 0;
    for (size_t i = 0; i < 4; i++) {
        pubsub_frame f;
        long used = pubsub_decode(b.data + off, b.len - off, &f);
        ck_assert_int_eq(used, (long)pubsub_frame_size(&in[i]));
        ck_assert_int_eq(f.type, in[i].type);
        ck_assert_uint_eq(f.channel_len, in[i].channel_len);
        ck_assert(memcmp(f.channel, in[i].channel, f.channel_len) == 0);
        ck_assert_uint_eq(f.len, in[i].len);
        if (f.len)
            ck_assert(memcmp(f.data, in[i].data, f.len) == 0);
        off += (size_t)used;
    }
    ck_assert_uint_eq(off, b.len);
    buf_free(&b);
}
END_TEST

START_TEST(a_split_frame_needs_more)
{
    buf b = BUF_INIT;
    unsigned char payload[1000];
    for (size_t i = 0; i < sizeof payload; i++)
        payload[i] = (unsigned char)i;
    pubsub_frame in = {.type = PUBSUB_PUB,
                       .channel = "news",
                       .channel_len = 4,
                       .data = payload,
                       .len = sizeof payload};
    ck_assert_int_eq(pubsub_encode(&in, &b), 0);
    pubsub_frame f;
    for (size_t n = 0; n < b.len; n++)
        ck_assert_int_eq(pubsub_decode(b.data, n, &f), 0);
    ck_assert_int_eq(pubsub_decode(b.data, b.len, &f), (long)b.len);
    ck_assert(memcmp(f.data, payload, sizeof payload) == 0);
    buf_free(&b);
}
END_TEST

START_TEST(the_largest_message_passes_and_one_more_byte_does_not)
{
    buf b = BUF_INIT;
    unsigned char *big = calloc(1, PUBSUB_MAX_MESSAGE + 1);
    ck_assert_ptr_nonnull(big);
    char name[PUBSUB_MAX_CHANNEL + 1];
    memset(name, 'x', sizeof name);
    pubsub_frame in = {.type = PUBSUB_PUB,
                       .channel = name,
                       .channel_len = PUBSUB_MAX_CHANNEL,
                       .data = big,
                       .len = PUBSUB_MAX_MESSAGE};
    ck_assert_int_eq(pubsub_encode(&in, &b), 0);
    pubsub_frame f;
    ck_assert_int_eq(pubsub_decode(b.data, b.len, &f), (long)PUBSUB_MAX_FRAME);
    size_t before = b.len;
    in.len++;
    ck_assert_int_eq(pubsub_encode(&in, &b), -1);
    in.len--;
    in.channel_len++;
    ck_assert_int_eq(pubsub_encode(&in, &b), -1);
    ck_assert_uint_eq(b.len, before); /* unchanged by a refused frame */
    free(big);
    buf_free(&b);
}
END_TEST

START_TEST(invalid_frames_are_not_encoded)
{
    buf b = BUF_INIT;
    pubsub_frame bad[] = {
        {.type = PUBSUB_SUB, .channel = "", .channel_len = 0},
        {.type = PUBSUB_SUB, .channel = "a", .channel_len = 1, .data = (const void *)"x", .len = 1},
        {.type = PUBSUB_UNSUB,
         .channel = "a",
         .channel_len = 1,
         .data = (const void *)"x",
         .len = 1},
        {.type = (pubsub_type)9, .channel = "a", .channel_len = 1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(pubsub_encode(&bad[i], &b) == -1, "frame %zu encoded", i);
    ck_assert_uint_eq(b.len, 0);
    buf_free(&b);
}
END_TEST

/* Refused from the head alone: a peer cannot make the reader wait for (and
 * buffer) megabytes that will be thrown away. */
START_TEST(bad_bytes_are_refused_early)
{
    pubsub_frame f;
    /* length beyond the largest frame */
    unsigned char huge[] = {0x7f, 0xff, 0xff, 0xff};
    ck_assert_int_eq(pubsub_decode(huge, sizeof huge, &f), -1);
    /* length too short for a type and a channel length */
    unsigned char tiny[] = {0, 0, 0, 1, PUBSUB_SUB};
    ck_assert_int_eq(pubsub_decode(tiny, sizeof tiny, &f), -1);
    /* unknown type, with most of the frame still missing */
    unsigned char type[] = {0, 0, 1, 0, 7, 1};
    ck_assert_int_eq(pubsub_decode(type, sizeof type, &f), -1);
    /* empty channel */
    unsigned char empty[] = {0, 0, 0, 2, PUBSUB_PUB, 0};
    ck_assert_int_eq(pubsub_decode(empty, sizeof empty, &f), -1);
    /* channel longer than the frame */
    unsigned char chlong[] = {0, 0, 0, 4, PUBSUB_PUB, 9, 'a', 'b'};
    ck_assert_int_eq(pubsub_decode(chlong, sizeof chlong, &f), -1);
    /* SUB with a payload */
    unsigned char subdata[] = {0, 0, 0, 4, PUBSUB_SUB, 1, 'a', 'b'};
    ck_assert_int_eq(pubsub_decode(subdata, sizeof subdata, &f), -1);
}
END_TEST

static Suite *pubsub_msg_suite(void)
{
    Suite *s = suite_create("pubsub_msg");
    TCase *tc = tcase_create("codec");
    tcase_add_test(tc, frames_round_trip);
    tcase_add_test(tc, a_split_frame_needs_more);
    tcase_add_test(tc, the_largest_message_passes_and_one_more_byte_does_not);
    tcase_add_test(tc, invalid_frames_are_not_encoded);
    tcase_add_test(tc, bad_bytes_are_refused_early);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(pubsub_msg_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
