/*
 * test_pagi_easy.c - Check suite for the broadcast groups of pagi_easy.h
 * (src/worker/pagi_easy_group.c) on websocket scopes with a fake driver
 * whose sends can be held in flight: the slow-member policy table, DROP,
 * CONFLATE and DISCONNECT, no member finished before its last send, one
 * shared buffer per broadcast, pagi_group_leave, the drain notice, and a
 * group fed from a pub/sub channel.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/shm.h"
#include "worker/scope/pagi_easy_policy.h"
#include "worker/scope/pubsub.h"
#include "worker/core/reason.h"
#include "worker/scope/scope.h"
#include "worker/core/state_table.h"
#include "worker/worker_ctx.h"

static pagid_config cfg;
static struct ev_loop *ev;
static worker_ctx w;

static void setup(void)
{
    config_init_defaults(&cfg);
    memset(&w, 0, sizeof w);
    w.cfg = &cfg;
    ev = ev_loop_new(0);
    ck_assert_ptr_nonnull(ev);
    loop_init(&w.loop, ev);
}

static void teardown(void)
{
    loop_drain_all(&w.loop);
    loop_destroy(&w.loop);
    ev_loop_destroy(ev);
    state_table_unref(w.state);
    config_free(&cfg);
}

static void drain(void)
{
    while (runq_drain(&w.loop.rq) > 0)
        ;
}

/* ---- a fake websocket driver: one per member ---- */

#define MAX_HELD 16

typedef struct fake_ws {
    pagi_scope *s;
    int connect_pending; /* websocket.connect not yet delivered */
    int hold;            /* 1: websocket.send completions wait for release_held */
    size_t buffered;
    int sends, closes, close_code, finished;
    char last[64];
    const char *last_ptr; /* the payload's address: shared across members? */
    pagi_send_cb held_cb[MAX_HELD];
    void *held_ud[MAX_HELD];
    int held;
} fake_ws;

static int fake_send(pagi_scope *s, const pagi_event *e, pagi_send_cb cb, void *ud)
{
    fake_ws *f = scope_proto(s);
    if (e->type == PAGI_EV_WEBSOCKET_SEND) {
        f->sends++;
        snprintf(f->last, sizeof f->last, "%.*s", (int)e->text.len, e->text.ptr);
        f->last_ptr = e->text.ptr;
        if (f->hold && f->held < MAX_HELD) {
            f->held_cb[f->held] = cb;
            f->held_ud[f->held++] = ud;
            return 0;
        }
    } else if (e->type == PAGI_EV_WEBSOCKET_CLOSE) {
        f->closes++;
        f->close_code = e->code;
    }
    scope_complete_send(s, cb, ud, NULL);
    return 0;
}

static void release_held(fake_ws *f)
{
    for (int i = 0; i < f->held; i++)
        scope_complete_send(f->s, f->held_cb[i], f->held_ud[i], NULL);
    f->held = 0;
    drain();
}

static int fake_next_event(pagi_scope *s, pagi_event *e, int take)
{
    fake_ws *f = scope_proto(s);
    if (!scope_is_connected(s)) {
        if (take) {
            e->type = PAGI_EV_WEBSOCKET_DISCONNECT;
            e->code = 1006;
        }
        return 1;
    }
    if (!f->connect_pending)
        return 0;
    if (take) {
        e->type = PAGI_EV_WEBSOCKET_CONNECT;
        f->connect_pending = 0;
    }
    return 1;
}

static void fake_receive_wanted(pagi_scope *s)
{
    (void)s;
}

static void fake_finished(pagi_scope *s, const char *error)
{
    (void)error;
    ((fake_ws *)scope_proto(s))->finished++;
}

static size_t fake_buffered(const pagi_scope *s)
{
    return ((fake_ws *)scope_proto(s))->buffered;
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

/* A member: a websocket scope joined to g and accepted. */
static void join(pagi_group *g, fake_ws *f)
{
    memset(f, 0, sizeof *f);
    f->connect_pending = 1;
    scope_request r = {.method = "GET",
                       .http_version = "1.1",
                       .path = {"/ws", 3},
                       .raw_path = {"/ws", 3},
                       .query = {"", 0}};
    f->s = scope_new(&w, PAGI_SCOPE_WEBSOCKET, &fake_ops, f, &r);
    ck_assert_ptr_nonnull(f->s);
    ck_assert_int_eq(pagi_group_join(g, f->s, NULL, NULL), 0);
    drain(); /* websocket.connect delivered, accept sent */
}

/* The client goes away: the member leaves and (sends done) finishes. */
static void hang_up(fake_ws *f)
{
    scope_disconnect(f->s, reason_client_closed);
    drain();
}

static void gone(fake_ws *f)
{
    scope_detach(f->s);
    drain();
}

static const size_t slow_bytes = 1u << 30; /* far above any high water mark */

START_TEST(policy_table)
{
    ck_assert_int_eq(easy_policy_decide(PAGI_GROUP_DROP, 0, 0), EASY_SEND);
    ck_assert_int_eq(easy_policy_decide(PAGI_GROUP_DROP, 1, 0), EASY_DROP);
    ck_assert_int_eq(easy_policy_decide(PAGI_GROUP_CONFLATE, 0, 0), EASY_SEND);
    ck_assert_int_eq(easy_policy_decide(PAGI_GROUP_CONFLATE, 1, 0), EASY_HOLD);
    /* Behind a held message a newer one replaces it, even once drained. */
    ck_assert_int_eq(easy_policy_decide(PAGI_GROUP_CONFLATE, 0, 1), EASY_HOLD);
    ck_assert_int_eq(easy_policy_decide(PAGI_GROUP_DISCONNECT, 0, 0), EASY_SEND);
    ck_assert_int_eq(easy_policy_decide(PAGI_GROUP_DISCONNECT, 1, 0), EASY_CLOSE);
}
END_TEST

START_TEST(drop_skips_only_the_slow_member)
{
    pagi_group *g = pagi_group_new(PAGI_GROUP_DROP);
    fake_ws a, b;
    join(g, &a);
    join(g, &b);
    ck_assert_uint_eq(pagi_group_size(g), 2);
    b.buffered = slow_bytes;
    ck_assert_int_eq(pagi_group_send_text(g, "one", 3), 1);
    drain();
    ck_assert_int_eq(a.sends, 1);
    ck_assert_int_eq(b.sends, 0);
    ck_assert_uint_eq(pagi_group_slow_count(g), 1);
    b.buffered = 0;
    ck_assert_int_eq(pagi_group_send_text(g, "two", 3), 2);
    ck_assert_str_eq(b.last, "two");
    hang_up(&a);
    hang_up(&b);
    ck_assert_uint_eq(pagi_group_size(g), 0);
    ck_assert_int_eq(a.finished + b.finished, 2);
    pagi_group_free(g);
    gone(&a);
    gone(&b);
}
END_TEST

START_TEST(conflate_sends_the_latest_once_drained)
{
    pagi_group *g = pagi_group_new(PAGI_GROUP_CONFLATE);
    fake_ws a;
    join(g, &a);
    a.hold = 1;
    pagi_group_send_text(g, "v1", 2); /* goes out, completion held */
    a.buffered = slow_bytes;
    pagi_group_send_text(g, "v2", 2);
    pagi_group_send_text(g, "v3", 2);
    ck_assert_int_eq(a.sends, 1);
    ck_assert_str_eq(a.last, "v1");
    a.buffered = 0;
    a.hold = 0;
    release_held(&a); /* the drain: only the latest follows */
    ck_assert_int_eq(a.sends, 2);
    ck_assert_str_eq(a.last, "v3");
    ck_assert_uint_eq(pagi_group_slow_count(g), 1); /* v2 was replaced */
    hang_up(&a);
    ck_assert_int_eq(a.finished, 1);
    pagi_group_free(g);
    gone(&a);
}
END_TEST

START_TEST(disconnect_closes_the_slow_member_with_1008)
{
    pagi_group *g = pagi_group_new(PAGI_GROUP_DISCONNECT);
    fake_ws a, b;
    join(g, &a);
    join(g, &b);
    b.buffered = slow_bytes;
    ck_assert_int_eq(pagi_group_send_text(g, "x", 1), 1);
    drain();
    ck_assert_int_eq(b.closes, 1);
    ck_assert_int_eq(b.close_code, 1008);
    ck_assert_uint_eq(pagi_group_size(g), 1);
    ck_assert_int_eq(b.finished, 0); /* until its disconnect arrives */
    hang_up(&b);
    ck_assert_int_eq(b.finished, 1);
    /* Freeing the group closes the rest with 1001; they finish on their own. */
    pagi_group_free(g);
    drain();
    ck_assert_int_eq(a.close_code, 1001);
    hang_up(&a);
    ck_assert_int_eq(a.finished, 1);
    gone(&a);
    gone(&b);
}
END_TEST

START_TEST(no_finish_before_the_last_send_callback)
{
    pagi_group *g = pagi_group_new(PAGI_GROUP_DROP);
    fake_ws a;
    join(g, &a);
    a.hold = 1;
    pagi_group_send_text(g, "m1", 2);
    pagi_group_send_text(g, "m2", 2);
    hang_up(&a);
    ck_assert_uint_eq(pagi_group_size(g), 0); /* left at the disconnect */
    ck_assert_int_eq(a.finished, 0);          /* but two sends are in flight */
    pagi_group_free(g);                       /* the member outlives its group */
    release_held(&a);
    ck_assert_int_eq(a.finished, 1);
    gone(&a);
}
END_TEST

START_TEST(broadcast_shares_one_buffer)
{
    pagi_group *g = pagi_group_new(PAGI_GROUP_DROP);
    fake_ws a, b;
    join(g, &a);
    join(g, &b);
    char msg[] = "shared";
    ck_assert_int_eq(pagi_group_send_text(g, msg, 6), 2);
    ck_assert_str_eq(a.last, "shared");
    ck_assert_ptr_eq(a.last_ptr, b.last_ptr); /* one copy for both members */
    ck_assert_ptr_ne(a.last_ptr, msg);        /* ... and not the caller's bytes */
    hang_up(&a);
    hang_up(&b);
    pagi_group_free(g);
    gone(&a);
    gone(&b);
}
END_TEST

static int left_calls;
static pagi_scope *left_scope;

static void on_left(pagi_scope *s, void *ud)
{
    ck_assert_ptr_eq(ud, &left_calls);
    left_calls++;
    left_scope = s;
}

static int app_disconnects;

static void app_recv(pagi_scope *s, const pagi_event *e, void *ud)
{
    (void)ud;
    if (e->type == PAGI_EV_WEBSOCKET_DISCONNECT) {
        app_disconnects++;
        pagi_scope_finish(s, NULL);
    }
}

START_TEST(leave_hands_the_member_back_after_its_sends)
{
    pagi_group *g = pagi_group_new(PAGI_GROUP_CONFLATE);
    fake_ws a, b;
    join(g, &a);
    join(g, &b);
    left_calls = app_disconnects = 0;
    left_scope = NULL;
    a.hold = 1;
    pagi_group_send_text(g, "m1", 2); /* a's completion held: in flight */
    ck_assert_int_eq(pagi_group_leave(g, a.s, on_left, &left_calls), 0);
    ck_assert_uint_eq(pagi_group_size(g), 1);
    drain();
    ck_assert_int_eq(left_calls, 0); /* not before the group's send completed */
    ck_assert_int_eq(pagi_group_leave(g, a.s, on_left, &left_calls), -1); /* no longer a member */
    a.hold = 0;
    release_held(&a);
    ck_assert_int_eq(left_calls, 1);
    ck_assert_ptr_eq(left_scope, a.s);
    /* The app's again: the group's receive was withdrawn, broadcasts skip it. */
    ck_assert_int_eq(pagi_receive(a.s, app_recv, NULL), 0);
    ck_assert_int_eq(pagi_group_send_text(g, "m2", 2), 1);
    ck_assert_str_eq(a.last, "m1");
    pagi_event snd = pagi_event_init(PAGI_EV_WEBSOCKET_SEND);
    snd.is_text = 1;
    snd.text = (pagi_str){"mine", 4};
    ck_assert_int_eq(pagi_send(a.s, &snd, NULL, NULL), 0);
    ck_assert_str_eq(a.last, "mine");
    drain(); /* b's m2 completes */
    /* Nothing in flight: handed back before pagi_group_leave returns. */
    ck_assert_int_eq(pagi_group_leave(g, b.s, on_left, &left_calls), 0);
    ck_assert_int_eq(left_calls, 2);
    ck_assert_uint_eq(pagi_group_size(g), 0);
    ck_assert_int_eq(pagi_receive(b.s, app_recv, NULL), 0);
    hang_up(&a);
    hang_up(&b);
    ck_assert_int_eq(app_disconnects, 2);
    ck_assert_int_eq(a.finished + b.finished, 2);
    /* A drain now is the app's business: the group closes neither. */
    ck_assert_int_eq(a.closes + b.closes, 0);
    pagi_group_free(g);
    gone(&a);
    gone(&b);
}
END_TEST

START_TEST(drain_closes_every_member_of_every_group)
{
    pagi_group *g1 = pagi_group_new(PAGI_GROUP_DROP);
    pagi_group *g2 = pagi_group_new(PAGI_GROUP_CONFLATE);
    ck_assert_int_eq(pagi_group_set_drain_event(g2, "bye", "x", 1), 0);
    fake_ws a, b, c;
    join(g1, &a);
    join(g2, &b);
    w.draining = 1;
    scope_notice_server_drain(&w);
    drain();
    ck_assert_int_eq(a.closes, 1);
    ck_assert_int_eq(a.close_code, 1001);
    ck_assert_int_eq(b.closes, 1);
    ck_assert_int_eq(b.close_code, 1001);
    ck_assert_int_eq(b.sends, 0); /* the drain event is for sse members only */
    ck_assert_uint_eq(pagi_group_size(g1) + pagi_group_size(g2), 0);
    /* Joining while draining: closed the same way, never accepted. */
    join(g1, &c);
    ck_assert_int_eq(c.closes, 1);
    ck_assert_int_eq(c.close_code, 1001);
    ck_assert_uint_eq(pagi_group_size(g1), 0);
    hang_up(&a);
    hang_up(&b);
    hang_up(&c);
    ck_assert_int_eq(a.finished + b.finished + c.finished, 3);
    pagi_group_free(g1);
    pagi_group_free(g2);
    gone(&a);
    gone(&b);
    gone(&c);
    w.draining = 0;
}
END_TEST

/* A message for a websocket member offered before its accept (the snapshot
 * sent right after join) waits for the accept instead of being dropped. */
START_TEST(send_to_before_the_accept_waits_for_it)
{
    pagi_group *g = pagi_group_new(PAGI_GROUP_DROP);
    fake_ws a;
    memset(&a, 0, sizeof a);
    a.connect_pending = 1;
    scope_request r = {.method = "GET",
                       .http_version = "1.1",
                       .path = {"/ws", 3},
                       .raw_path = {"/ws", 3},
                       .query = {"", 0}};
    a.s = scope_new(&w, PAGI_SCOPE_WEBSOCKET, &fake_ops, &a, &r);
    ck_assert_ptr_nonnull(a.s);
    ck_assert_int_eq(pagi_group_join(g, a.s, NULL, NULL), 0);
    ck_assert_int_eq(pagi_group_send_to(g, a.s, NULL, "snapshot", 8), 1);
    ck_assert_int_eq(pagi_group_send_text(g, "second", 6), 1);
    ck_assert_int_eq(a.sends, 0); /* not accepted yet: nothing on the wire */
    drain();                      /* websocket.connect delivered, accept sent */
    ck_assert_int_eq(a.sends, 2);
    ck_assert_str_eq(a.last, "second"); /* in order: snapshot, then second */
    hang_up(&a);
    pagi_group_free(g);
    gone(&a);
}
END_TEST

/* A group fed from a channel: every publish is one broadcast under the
 * group's policy; what a slow member misses is counted in the metrics; the
 * subscription is the group's (it outlives the scope that made it). */
START_TEST(a_group_fed_from_a_channel)
{
    shm_worker stats;
    memset(&stats, 0, sizeof stats);
    w.stats = &stats;
    w.pubsub = pubsub_new(&w, -1);
    ck_assert_ptr_nonnull(w.pubsub);
    pagi_group *g = pagi_group_new(PAGI_GROUP_DROP), *other = pagi_group_new(PAGI_GROUP_DROP);
    fake_ws a, b, p;
    join(g, &a);
    join(g, &b);
    join(other, &p); /* the publisher, outside g */
    ck_assert_int_eq(pagi_group_subscribe(g, p.s, "", NULL), -1);
    ck_assert_ptr_nonnull(pagi_scope_error(p.s));
    ck_assert_int_eq(pagi_group_subscribe(g, a.s, "feed", NULL), 0);
    ck_assert_int_eq(pagi_group_subscribe(g, a.s, "feed", NULL), 0); /* once */
    pagi_publish(p.s, "feed", "m1", 2);
    ck_assert_int_eq(a.sends + b.sends, 0); /* never inside pagi_publish */
    drain();
    ck_assert_int_eq(a.sends, 1);
    ck_assert_int_eq(b.sends, 1);
    ck_assert_str_eq(b.last, "m1");
    b.buffered = slow_bytes;
    pagi_publish(p.s, "feed", "m2", 2);
    pagi_publish(p.s, "feed", "m3", 2);
    drain();
    ck_assert_int_eq(a.sends, 3);
    ck_assert_str_eq(a.last, "m3");
    ck_assert_int_eq(b.sends, 1);
    ck_assert_uint_eq(pagi_group_slow_count(g), 2);
    ck_assert_uint_eq(atomic_load(&stats.pubsub_dropped), 2);
    /* a made the subscription; it leaves, the group is still fed. */
    hang_up(&a);
    gone(&a);
    b.buffered = 0;
    pagi_publish(p.s, "feed", "m4", 2);
    drain();
    ck_assert_str_eq(b.last, "m4");
    ck_assert_int_eq(pagi_group_unsubscribe(g, "feed"), 0);
    ck_assert_int_eq(pagi_group_unsubscribe(g, "feed"), -1);
    pagi_publish(p.s, "feed", "m5", 2);
    drain();
    ck_assert_str_eq(b.last, "m4");
    /* Freed with a feed queued: its message is never delivered. */
    ck_assert_int_eq(pagi_group_subscribe(g, b.s, "feed", "tick"), 0);
    pagi_publish(p.s, "feed", "m6", 2);
    pagi_group_free(g);
    drain();
    ck_assert_str_eq(b.last, "m4");
    hang_up(&b);
    hang_up(&p);
    pagi_group_free(other);
    gone(&b);
    gone(&p);
    pubsub_free(w.pubsub);
    w.pubsub = NULL;
    w.stats = NULL;
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("pagi_easy");
    TCase *tc = tcase_create("group");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, policy_table);
    tcase_add_test(tc, drop_skips_only_the_slow_member);
    tcase_add_test(tc, conflate_sends_the_latest_once_drained);
    tcase_add_test(tc, disconnect_closes_the_slow_member_with_1008);
    tcase_add_test(tc, no_finish_before_the_last_send_callback);
    tcase_add_test(tc, broadcast_shares_one_buffer);
    tcase_add_test(tc, leave_hands_the_member_back_after_its_sends);
    tcase_add_test(tc, drain_closes_every_member_of_every_group);
    tcase_add_test(tc, send_to_before_the_accept_waits_for_it);
    tcase_add_test(tc, a_group_fed_from_a_channel);
    suite_add_tcase(s, tc);
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
