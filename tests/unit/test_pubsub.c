/*
 * test_pubsub.c - Check suite for src/worker/pubsub.c on a hand-built
 * worker_ctx: delivery through the run queue (never inside pagi_publish),
 * the per-subscription policies, subscriptions ending with their scope or
 * inside their own callback, and the frames sent to (and read from) a
 * socketpair standing in for the master.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/pubsub_msg.h"
#include "worker/scope/pubsub.h"
#include "worker/scope/scope.h"
#include "worker/worker_ctx.h"

static pagid_config cfg;
static struct ev_loop *ev;
static worker_ctx w;
static int master_fd = -1;

static int fake_send(pagi_scope *s, const pagi_event *e, pagi_send_cb cb, void *ud)
{
    (void)e;
    scope_complete_send(s, cb, ud, NULL);
    return 0;
}
static int fake_next_event(pagi_scope *s, pagi_event *e, int take)
{
    (void)s;
    (void)e;
    (void)take;
    return 0;
}
static void fake_receive_wanted(pagi_scope *s)
{
    (void)s;
}
static void fake_finished(pagi_scope *s, const char *error)
{
    (void)s;
    (void)error;
}
static size_t fake_buffered(const pagi_scope *s)
{
    (void)s;
    return 0;
}
static int fake_above_high(const pagi_scope *s)
{
    (void)s;
    return 0;
}
static const scope_ops fake_ops = {
    .send = fake_send,
    .next_event = fake_next_event,
    .receive_wanted = fake_receive_wanted,
    .finished = fake_finished,
    .buffered = fake_buffered,
    .above_high = fake_above_high,
};

static void setup_with(int with_master)
{
    config_init_defaults(&cfg);
    memset(&w, 0, sizeof w);
    w.cfg = &cfg;
    w.worker_num = 1;
    ev = ev_loop_new(0);
    loop_init(&w.loop, ev);
    int fd = -1;
    master_fd = -1;
    if (with_master) {
        int sv[2];
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
        master_fd = sv[0];
        fd = sv[1];
    }
    w.pubsub = pubsub_new(&w, fd);
    ck_assert_ptr_nonnull(w.pubsub);
}
static void setup(void)
{
    setup_with(0);
}
static void setup_master(void)
{
    setup_with(1);
}

static void teardown(void)
{
    loop_drain_all(&w.loop);
    pubsub_free(w.pubsub);
    loop_destroy(&w.loop);
    ev_loop_destroy(ev);
    config_free(&cfg);
    if (master_fd >= 0)
        close(master_fd);
}

static pagi_scope *new_scope(void)
{
    scope_request r = {.method = "GET",
                       .http_version = "1.1",
                       .path = {"/", 1},
                       .raw_path = {"/", 1},
                       .query = {"", 0}};
    pagi_scope *s = scope_new(&w, PAGI_SCOPE_WEBSOCKET, &fake_ops, NULL, &r);
    ck_assert_ptr_nonnull(s);
    return s;
}

static void end_scope(pagi_scope *s)
{
    scope_detach(s);
    pagi_scope_finish(s, NULL);
    loop_drain_all(&w.loop);
}

/* What the callbacks saw, in order: "ud:message,..." */
static char seen[4096];
static pagi_subscription *unsub_in_cb;

static void on_msg(pagi_subscription *sub, pagi_str channel, const void *data, size_t len, void *ud)
{
    (void)channel;
    char one[64];
    snprintf(one, sizeof one, "%s%s:%.*s", seen[0] ? "," : "", (const char *)ud, (int)len,
             (const char *)data);
    strcat(seen, one);
    if (unsub_in_cb == sub) {
        pagi_unsubscribe(sub);
        unsub_in_cb = NULL;
    }
}

START_TEST(delivery_is_queued_and_ordered)
{
    seen[0] = 0;
    pagi_scope *s = new_scope();
    ck_assert_ptr_nonnull(pagi_subscribe(s, "chat", on_msg, "a"));
    ck_assert_ptr_nonnull(pagi_subscribe(s, "other", on_msg, "b"));
    ck_assert_int_eq(pagi_publish(s, "chat", "1", 1), 0);
    ck_assert_int_eq(pagi_publish(s, "chat", "2", 1), 0);
    ck_assert_int_eq(pagi_publish(s, "nobody", "x", 1), 0);
    ck_assert_str_eq(seen, ""); /* never inside pagi_publish */
    loop_drain_all(&w.loop);
    ck_assert_str_eq(seen, "a:1,a:2");
    end_scope(s);
}
END_TEST

START_TEST(bad_arguments_are_refused)
{
    pagi_scope *s = new_scope();
    char longname[300];
    memset(longname, 'c', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    ck_assert_ptr_null(pagi_subscribe(s, "", on_msg, NULL));
    ck_assert_ptr_null(pagi_subscribe(s, longname, on_msg, NULL));
    ck_assert_ptr_null(pagi_subscribe(s, "c", NULL, NULL));
    ck_assert_int_eq(pagi_publish(s, "", "x", 1), -1);
    ck_assert_int_eq(pagi_publish(s, "c", NULL, 3), -1);
    ck_assert_int_eq(pagi_publish(s, "c", "x", (size_t)PAGI_MESSAGE_MAX + 1), -1);
    ck_assert_ptr_nonnull(strstr(pagi_scope_error(s), "limit"));
    end_scope(s);
}
END_TEST

START_TEST(policies_bound_the_pending_queue)
{
    seen[0] = 0;
    pagi_scope *s = new_scope();
    pagi_subscription *old = pagi_subscribe(s, "c", on_msg, "o");
    pagi_subscription *lat = pagi_subscribe(s, "c", on_msg, "l");
    ck_assert_int_eq(pagi_subscription_set_policy(old, PAGI_SUB_DROP_OLDEST, 2), 0);
    ck_assert_int_eq(pagi_subscription_set_policy(lat, PAGI_SUB_CONFLATE, 5), 0);
    ck_assert_int_eq(pagi_subscription_set_policy(lat, PAGI_SUB_CONFLATE, 0), -1);
    for (int i = 1; i <= 5; i++) {
        char m[2] = {(char)('0' + i), 0};
        pagi_publish(s, "c", m, 1);
    }
    loop_drain_all(&w.loop);
    /* Both subscriptions' jobs were queued by the first message. */
    ck_assert_ptr_nonnull(strstr(seen, "o:4,o:5"));
    ck_assert_ptr_null(strstr(seen, "o:3"));
    ck_assert_ptr_nonnull(strstr(seen, "l:5"));
    ck_assert_ptr_null(strstr(seen, "l:4"));
    ck_assert_uint_eq(pagi_subscription_dropped(old), 3);
    ck_assert_uint_eq(pagi_subscription_dropped(lat), 4);
    pagi_subscription_count_dropped(old, 2);
    ck_assert_uint_eq(pagi_subscription_dropped(old), 5);
    end_scope(s);
}
END_TEST

START_TEST(unsubscribe_inside_the_callback_and_with_the_scope)
{
    seen[0] = 0;
    pagi_scope *s = new_scope(), *t = new_scope();
    pagi_subscription *a = pagi_subscribe(s, "c", on_msg, "a");
    ck_assert_ptr_nonnull(pagi_subscribe(t, "c", on_msg, "t"));
    unsub_in_cb = a;
    pagi_publish(s, "c", "1", 1);
    pagi_publish(s, "c", "2", 1); /* pending for a when it unsubscribes: dropped */
    loop_drain_all(&w.loop);
    ck_assert_ptr_nonnull(strstr(seen, "a:1"));
    ck_assert_ptr_null(strstr(seen, "a:2"));
    ck_assert_ptr_nonnull(strstr(seen, "t:1,t:2"));
    /* t's subscription ends when t is released: a message queued before
     * that is still delivered (in queue order), none after. */
    pagi_publish(s, "c", "3", 1);
    seen[0] = 0;
    end_scope(t);
    ck_assert_str_eq(seen, "t:3");
    pagi_publish(s, "c", "4", 1);
    loop_drain_all(&w.loop);
    ck_assert_str_eq(seen, "t:3");
    end_scope(s);
}
END_TEST

static void read_frames(char *out, size_t n);

/* pagid's own code (pagi_easy's groups) holds subscriptions that belong to
 * no scope: they end with pagi_unsubscribe only. */
START_TEST(an_owned_subscription_outlives_its_scope)
{
    seen[0] = 0;
    pagi_scope *s = new_scope(), *t = new_scope();
    ck_assert_ptr_null(pubsub_subscribe_owned(s, "", on_msg, "o"));
    pagi_subscription *sub = pubsub_subscribe_owned(s, "c", on_msg, "o");
    ck_assert_ptr_nonnull(sub);
    end_scope(s);
    pagi_publish(t, "c", "1", 1);
    loop_drain_all(&w.loop);
    ck_assert_str_eq(seen, "o:1");
    pagi_unsubscribe(sub);
    pagi_publish(t, "c", "2", 1);
    loop_drain_all(&w.loop);
    ck_assert_str_eq(seen, "o:1");
    end_scope(t);
}
END_TEST

static int big_seen;

static void on_big(pagi_subscription *sub, pagi_str channel, const void *data, size_t len, void *ud)
{
    (void)sub;
    (void)channel;
    (void)data;
    (void)ud;
    ck_assert_uint_eq(len, 1000);
    big_seen++;
}

/* One wakeup reads at most half the high-water mark from the master: what
 * it delivers in one loop round stays below the mark for a client that
 * reads (the broadcast groups' test of a slow member). */
START_TEST(one_wakeup_reads_at_most_half_the_high_water_mark)
{
    static unsigned char payload[1000];
    pagi_scope *s = new_scope();
    ck_assert_ptr_nonnull(pagi_subscribe(s, "big", on_big, NULL));
    char frames[64];
    read_frames(frames, sizeof frames); /* the SUB */
    buf b = BUF_INIT;
    pubsub_frame f = {
        .type = PUBSUB_PUB, .channel = "big", .channel_len = 3, .data = payload, .len = 1000};
    for (int i = 0; i < 100; i++)
        ck_assert_int_eq(pubsub_encode(&f, &b), 0);
    ck_assert_int_eq(send(master_fd, b.data, b.len, 0), (ssize_t)b.len);
    buf_free(&b);
    big_seen = 0;
    ev_run(ev, EVRUN_NOWAIT);
    loop_drain_all(&w.loop);
    ck_assert_int_gt(big_seen, 0);
    ck_assert_int_le(big_seen * 1000, (int)(cfg.high_watermark / 2));
    for (int i = 0; i < 50 && big_seen < 100; i++) {
        ev_run(ev, EVRUN_NOWAIT);
        loop_drain_all(&w.loop);
    }
    ck_assert_int_eq(big_seen, 100);
    end_scope(s);
}
END_TEST

/* Every whole frame the "master" has received, as "S:chan", "U:chan", "P:chan=data". */
static void read_frames(char *out, size_t n)
{
    static unsigned char b[1 << 16];
    ssize_t got = recv(master_fd, b, sizeof b, 0);
    out[0] = 0;
    size_t off = 0;
    while (got > 0 && off < (size_t)got) {
        pubsub_frame f;
        long used = pubsub_decode(b + off, (size_t)got - off, &f);
        ck_assert_int_gt(used, 0);
        char one[128];
        snprintf(one, sizeof one, "%s%c:%.*s%s%.*s", out[0] ? "," : "",
                 f.type == PUBSUB_SUB     ? 'S'
                 : f.type == PUBSUB_UNSUB ? 'U'
                                          : 'P',
                 (int)f.channel_len, f.channel, f.len ? "=" : "", (int)f.len, (const char *)f.data);
        strncat(out, one, n - strlen(out) - 1);
        off += (size_t)used;
    }
}

START_TEST(frames_to_and_from_the_master)
{
    char frames[512];
    seen[0] = 0;
    pagi_scope *s = new_scope(), *t = new_scope();
    pagi_subscription *a = pagi_subscribe(s, "chat", on_msg, "a");
    ck_assert_ptr_nonnull(pagi_subscribe(t, "chat", on_msg, "t"));
    pagi_publish(s, "chat", "hi", 2);
    read_frames(frames, sizeof frames);
    ck_assert_str_eq(frames, "S:chat,P:chat=hi"); /* one SUB for two local subscriptions */
    /* A message from another worker, through the master. */
    buf b = BUF_INIT;
    pubsub_frame f = {.type = PUBSUB_PUB,
                      .channel = "chat",
                      .channel_len = 4,
                      .data = (const void *)"yo",
                      .len = 2};
    ck_assert_int_eq(pubsub_encode(&f, &b), 0);
    ck_assert_int_eq(send(master_fd, b.data, b.len, 0), (ssize_t)b.len);
    buf_free(&b);
    ev_run(ev, EVRUN_NOWAIT);
    loop_drain_all(&w.loop);
    ck_assert_ptr_nonnull(strstr(seen, "a:yo"));
    ck_assert_ptr_nonnull(strstr(seen, "t:yo"));
    pagi_unsubscribe(a);
    read_frames(frames, sizeof frames);
    ck_assert_str_eq(frames, ""); /* t still listens */
    end_scope(t);
    read_frames(frames, sizeof frames);
    ck_assert_str_eq(frames, "U:chat");
    end_scope(s);
}
END_TEST

static Suite *pubsub_suite(void)
{
    Suite *s = suite_create("pubsub");
    TCase *tc = tcase_create("local");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, delivery_is_queued_and_ordered);
    tcase_add_test(tc, bad_arguments_are_refused);
    tcase_add_test(tc, policies_bound_the_pending_queue);
    tcase_add_test(tc, unsubscribe_inside_the_callback_and_with_the_scope);
    tcase_add_test(tc, an_owned_subscription_outlives_its_scope);
    suite_add_tcase(s, tc);
    TCase *tm = tcase_create("master");
    tcase_add_checked_fixture(tm, setup_master, teardown);
    tcase_add_test(tm, frames_to_and_from_the_master);
    tcase_add_test(tm, one_wakeup_reads_at_most_half_the_high_water_mark);
    suite_add_tcase(s, tm);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(pubsub_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
