/*
 * test_pubsub_routes.c - Check suite for src/master/pubsub_routes.c: the
 * broker's channel -> peers table: add/remove are idempotent, an emptied
 * channel goes, a closed peer leaves every channel, and the table keeps
 * working as it grows past its first buckets.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "master/pubsub_routes.h"

static int has(const pubsub_routes *r, const char *ch, int peer)
{
    size_t n;
    const int *ids = routes_find(r, ch, strlen(ch), &n);
    for (size_t i = 0; i < n; i++)
        if (ids[i] == peer)
            return 1;
    return 0;
}

static size_t peers(const pubsub_routes *r, const char *ch)
{
    size_t n;
    routes_find(r, ch, strlen(ch), &n);
    return n;
}

START_TEST(add_and_remove)
{
    pubsub_routes *r = routes_new();
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(routes_add(r, "chat", 4, 0), 1);
    ck_assert_int_eq(routes_add(r, "chat", 4, 0), 0); /* already there */
    ck_assert_int_eq(routes_add(r, "chat", 4, 3), 1);
    ck_assert_int_eq(routes_add(r, "news", 4, 3), 1);
    ck_assert_uint_eq(routes_channels(r), 2);
    ck_assert_uint_eq(peers(r, "chat"), 2);
    ck_assert(has(r, "chat", 0) && has(r, "chat", 3) && !has(r, "chat", 1));
    ck_assert_uint_eq(peers(r, "cha"), 0); /* a prefix is another channel */
    ck_assert_int_eq(routes_remove(r, "chat", 4, 1), 0);
    ck_assert_int_eq(routes_remove(r, "chat", 4, 0), 1);
    ck_assert(!has(r, "chat", 0) && has(r, "chat", 3));
    ck_assert_int_eq(routes_remove(r, "chat", 4, 3), 1);
    ck_assert_uint_eq(routes_channels(r), 1); /* emptied: gone */
    ck_assert_int_eq(routes_remove(r, "chat", 4, 3), 0);
    routes_free(r);
}
END_TEST

START_TEST(a_closed_peer_leaves_every_channel)
{
    pubsub_routes *r = routes_new();
    ck_assert_int_eq(routes_add(r, "a", 1, 1), 1);
    ck_assert_int_eq(routes_add(r, "b", 1, 1), 1);
    ck_assert_int_eq(routes_add(r, "b", 1, 2), 1);
    ck_assert_int_eq(routes_add(r, "c", 1, 2), 1);
    ck_assert_uint_eq(routes_remove_peer(r, 1), 2);
    ck_assert_uint_eq(routes_channels(r), 2); /* "a" had only peer 1 */
    ck_assert(!has(r, "b", 1) && has(r, "b", 2) && has(r, "c", 2));
    ck_assert_uint_eq(routes_remove_peer(r, 1), 0);
    routes_free(r);
}
END_TEST

/* Collects channel names as "name," for the callbacks below. */
static void collect(void *ud, const char *channel, size_t len)
{
    char *out = ud;
    strncat(out, channel, len);
    strcat(out, ",");
}

/* The backend unsubscribes exactly the channels a closing peer was last on,
 * and resubscribes every channel after a reconnect. */
START_TEST(emptied_channels_and_each)
{
    pubsub_routes *r = routes_new();
    ck_assert_int_eq(routes_add(r, "a", 1, 1), 1);
    ck_assert_int_eq(routes_add(r, "b", 1, 1), 1);
    ck_assert_int_eq(routes_add(r, "b", 1, 2), 1);
    ck_assert_int_eq(routes_add(r, "c", 1, 2), 1);
    char all[64] = "";
    routes_each(r, collect, all);
    ck_assert_uint_eq(strlen(all), 6);
    ck_assert(strstr(all, "a,") && strstr(all, "b,") && strstr(all, "c,"));
    char gone[64] = "";
    ck_assert_uint_eq(routes_drop_peer(r, 1, collect, gone), 2);
    ck_assert_str_eq(gone, "a,"); /* b still has peer 2 */
    gone[0] = '\0';
    ck_assert_uint_eq(routes_drop_peer(r, 2, collect, gone), 2);
    ck_assert(strlen(gone) == 4 && strstr(gone, "b,") && strstr(gone, "c,"));
    all[0] = '\0';
    routes_each(r, collect, all);
    ck_assert_str_eq(all, "");
    routes_free(r);
}
END_TEST

START_TEST(many_channels_and_peers)
{
    pubsub_routes *r = routes_new();
    char name[32];
    for (int i = 0; i < 5000; i++) {
        int n = snprintf(name, sizeof name, "channel-%d", i);
        for (int p = 0; p < 1 + i % 7; p++)
            ck_assert_int_eq(routes_add(r, name, (size_t)n, p), 1);
    }
    ck_assert_uint_eq(routes_channels(r), 5000);
    for (int i = 0; i < 5000; i++) {
        snprintf(name, sizeof name, "channel-%d", i);
        ck_assert_uint_eq(peers(r, name), (size_t)(1 + i % 7));
    }
    ck_assert_uint_eq(routes_remove_peer(r, 0), 5000);
    ck_assert_uint_eq(routes_channels(r), 5000 - 5000 / 7 - (5000 % 7 > 0));
    routes_free(r);
}
END_TEST

START_TEST(names_are_bytes)
{
    pubsub_routes *r = routes_new();
    ck_assert_int_eq(routes_add(r, "a\0b", 3, 1), 1);
    ck_assert_int_eq(routes_add(r, "a\0c", 3, 2), 1);
    size_t n;
    const int *ids = routes_find(r, "a\0b", 3, &n);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(ids[0], 1);
    routes_free(r);
}
END_TEST

static Suite *routes_suite(void)
{
    Suite *s = suite_create("pubsub_routes");
    TCase *tc = tcase_create("routes");
    tcase_add_test(tc, add_and_remove);
    tcase_add_test(tc, a_closed_peer_leaves_every_channel);
    tcase_add_test(tc, emptied_channels_and_each);
    tcase_add_test(tc, many_channels_and_peers);
    tcase_add_test(tc, names_are_bytes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(routes_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
