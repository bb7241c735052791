/*
 * test_scope_drain.c - Check suite for the scope engine's drain notice
 * (pagi_scope_on_server_drain, scope_notice_server_drain) and
 * pagi_receive_cancel, on a hand-built worker_ctx with a fake driver.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/scope/scope.h"
#include "worker/core/state_table.h"
#include "worker/worker_ctx.h"

static pagid_config cfg;
static struct ev_loop *ev;
static worker_ctx w;

static int chunks; /* body chunks the fake driver has for the app */
static int n_recv, n_notice, n_release;
static char last_body[16];

static size_t drain(void)
{
    return runq_drain(&w.loop.rq);
}

static int fake_send(pagi_scope *s, const pagi_event *e, pagi_send_cb cb, void *ud)
{
    (void)e;
    scope_complete_send(s, cb, ud, NULL);
    return 0;
}

static int fake_next_event(pagi_scope *s, pagi_event *e, int take)
{
    if (!scope_is_connected(s)) {
        if (take)
            e->type = PAGI_EV_HTTP_DISCONNECT;
        return 1;
    }
    if (chunks == 0)
        return 0;
    if (!take)
        return 1;
    buf *d = scope_delivery_buf(s);
    buf_reset(d);
    char text[16];
    snprintf(text, sizeof text, "chunk%d", chunks);
    buf_append_str(d, text);
    chunks--;
    e->type = PAGI_EV_HTTP_REQUEST;
    e->body.ptr = buf_head(d);
    e->body.len = buf_size(d);
    e->more = chunks > 0;
    return 1;
}

static void fake_finished(pagi_scope *s, const char *error)
{
    (void)s;
    (void)error;
}

static const scope_ops fake_ops = {
    .send = fake_send,
    .next_event = fake_next_event,
    .finished = fake_finished,
};

static void setup(void)
{
    config_init_defaults(&cfg);
    memset(&w, 0, sizeof w);
    w.cfg = &cfg;
    ev = ev_loop_new(0);
    ck_assert_ptr_nonnull(ev);
    loop_init(&w.loop, ev);
    chunks = n_recv = n_notice = n_release = 0;
    last_body[0] = '\0';
}

static void teardown(void)
{
    loop_drain_all(&w.loop);
    loop_destroy(&w.loop);
    ev_loop_destroy(ev);
    state_table_unref(w.state);
    config_free(&cfg);
}

static pagi_scope *new_scope(pagi_scope_type type)
{
    scope_request r = {.method = "GET",
                       .http_version = "1.1",
                       .path = {"/", 1},
                       .raw_path = {"/", 1},
                       .query = {"", 0}};
    pagi_scope *s = scope_new(&w, type, &fake_ops, NULL, &r);
    ck_assert_ptr_nonnull(s);
    return s;
}

static void end_scope(pagi_scope *s)
{
    scope_detach(s);
    pagi_scope_finish(s, NULL);
    drain();
}

static void recv_cb(pagi_scope *s, const pagi_event *e, void *ud)
{
    (void)s;
    (void)ud;
    snprintf(last_body, sizeof last_body, "%.*s", (int)e->body.len, e->body.ptr ? e->body.ptr : "");
    n_recv++;
}

static void notice_cb(pagi_scope *s, void *ud)
{
    ck_assert_int_eq(pagi_server_draining(s), 1);
    ck_assert_ptr_eq(ud, &n_notice);
    n_notice++;
}

static void release_cb(pagi_scope *s, void *data)
{
    (void)s;
    (void)data;
    n_release++;
}

/* ---- pagi_receive_cancel ---- */

START_TEST(cancel_without_pending_receive_fails)
{
    pagi_scope *s = new_scope(PAGI_SCOPE_HTTP);
    ck_assert_int_eq(pagi_receive_cancel(s), -1);
    ck_assert_str_eq(pagi_scope_error(s), "receive cancel: no receive is pending");
    ck_assert_int_eq(pagi_receive_cancel(NULL), -1);
    end_scope(s);
}
END_TEST

START_TEST(cancel_waiting_receive_then_receive_again)
{
    pagi_scope *s = new_scope(PAGI_SCOPE_HTTP);
    ck_assert_int_eq(pagi_receive(s, recv_cb, NULL), 0);
    drain();
    ck_assert_int_eq(scope_receive_waiting(s), 1);
    ck_assert_int_eq(pagi_receive_cancel(s), 0);
    ck_assert_int_eq(scope_receive_waiting(s), 0);
    ck_assert_int_eq(pagi_receive_cancel(s), -1); /* once */
    chunks = 1;
    scope_poke_receive(s); /* nobody waits: nothing queued */
    ck_assert_uint_eq(drain(), 0);
    ck_assert_int_eq(n_recv, 0);
    ck_assert_int_eq(pagi_receive(s, recv_cb, NULL), 0);
    drain();
    ck_assert_int_eq(n_recv, 1);
    ck_assert_str_eq(last_body, "chunk1");
    end_scope(s);
}
END_TEST

/* A delivery already queued is withdrawn, and its event kept for the next receive. */
START_TEST(cancel_with_delivery_queued_keeps_the_event)
{
    pagi_scope *s = new_scope(PAGI_SCOPE_HTTP);
    chunks = 2;
    ck_assert_int_eq(pagi_receive(s, recv_cb, NULL), 0); /* delivery queued, not yet run */
    ck_assert_int_eq(pagi_receive_cancel(s), 0);
    drain();
    ck_assert_int_eq(n_recv, 0);
    ck_assert_int_eq(chunks, 2); /* nothing taken */
    ck_assert_int_eq(pagi_receive(s, recv_cb, NULL), 0);
    drain();
    ck_assert_int_eq(n_recv, 1);
    ck_assert_str_eq(last_body, "chunk2"); /* the first chunk, not lost */
    /* Cancel then receive again before the stale job runs: one delivery. */
    ck_assert_int_eq(pagi_receive(s, recv_cb, NULL), 0);
    ck_assert_int_eq(pagi_receive_cancel(s), 0);
    ck_assert_int_eq(pagi_receive(s, recv_cb, NULL), 0);
    drain();
    ck_assert_int_eq(n_recv, 2);
    ck_assert_str_eq(last_body, "chunk1");
    end_scope(s);
}
END_TEST

START_TEST(finish_after_cancel_releases)
{
    pagi_scope *s = new_scope(PAGI_SCOPE_HTTP);
    pagi_scope_set_userdata(s, &n_release, release_cb);
    chunks = 1;
    ck_assert_int_eq(pagi_receive(s, recv_cb, NULL), 0);
    ck_assert_int_eq(pagi_receive_cancel(s), 0);
    pagi_scope_finish(s, NULL);
    scope_detach(s);
    while (drain()) /* the withdrawn delivery's job drops the last reference */
        ;
    ck_assert_int_eq(n_recv, 0);
    ck_assert_int_eq(n_release, 1);
}
END_TEST

/* ---- the drain notice ---- */

START_TEST(notice_runs_once_from_the_queue)
{
    pagi_scope *a = new_scope(PAGI_SCOPE_WEBSOCKET), *b = new_scope(PAGI_SCOPE_SSE);
    ck_assert_int_eq(pagi_server_draining(a), 0);
    ck_assert_int_eq(pagi_scope_on_server_drain(a, notice_cb, &n_notice), 0);
    ck_assert_int_eq(pagi_scope_on_server_drain(a, notice_cb, &n_notice), 0);
    ck_assert_int_eq(pagi_scope_on_server_drain(b, notice_cb, &n_notice), 0);
    ck_assert_int_eq(pagi_scope_on_server_drain(b, NULL, NULL), -1);
    w.draining = 1;
    scope_notice_server_drain(&w);
    ck_assert_int_eq(n_notice, 0); /* never inline */
    drain();
    ck_assert_int_eq(n_notice, 3);
    scope_notice_server_drain(&w); /* a second call runs nothing again */
    drain();
    ck_assert_int_eq(n_notice, 3);
    /* Registered after the drain began: queued at once. */
    ck_assert_int_eq(pagi_scope_on_server_drain(b, notice_cb, &n_notice), 0);
    ck_assert_int_eq(n_notice, 3);
    drain();
    ck_assert_int_eq(n_notice, 4);
    end_scope(a);
    end_scope(b);
}
END_TEST

START_TEST(notice_skips_finished_scopes_and_lifespan)
{
    pagi_scope *h = new_scope(PAGI_SCOPE_HTTP);
    pagi_scope *l = new_scope(PAGI_SCOPE_LIFESPAN);
    ck_assert_int_eq(pagi_scope_on_server_drain(l, notice_cb, &n_notice), -1);
    ck_assert_ptr_nonnull(strstr(pagi_scope_error(l), "lifespan"));
    ck_assert_int_eq(pagi_scope_on_server_drain(h, notice_cb, &n_notice), 0);
    pagi_scope_finish(h, NULL); /* the connection side still holds it */
    w.draining = 1;
    scope_notice_server_drain(&w);
    drain();
    ck_assert_int_eq(n_notice, 0);
    scope_detach(h);
    end_scope(l);
}
END_TEST

/* The app finishes a scope after the notice was queued but before it ran:
 * the notice must not run (the app may have freed what ud points at). */
START_TEST(notice_not_run_for_scope_finished_after_queueing)
{
    pagi_scope *a = new_scope(PAGI_SCOPE_WEBSOCKET), *b = new_scope(PAGI_SCOPE_SSE);
    pagi_scope_set_userdata(a, &n_release, release_cb);
    ck_assert_int_eq(pagi_scope_on_server_drain(a, notice_cb, &n_notice), 0);
    ck_assert_int_eq(pagi_scope_on_server_drain(b, notice_cb, &n_notice), 0);
    w.draining = 1;
    scope_notice_server_drain(&w);
    pagi_scope_finish(a, NULL);
    scope_detach(a); /* only the queued job still holds it */
    drain();
    ck_assert_int_eq(n_notice, 1); /* b's only */
    while (drain())
        ;
    ck_assert_int_eq(n_release, 1); /* the job's reference was dropped */
    end_scope(b);
}
END_TEST

START_TEST(notice_registered_during_drain_not_run_once_finished)
{
    pagi_scope *a = new_scope(PAGI_SCOPE_WEBSOCKET);
    w.draining = 1;
    scope_notice_server_drain(&w);
    drain();
    ck_assert_int_eq(pagi_scope_on_server_drain(a, notice_cb, &n_notice), 0);
    pagi_scope_finish(a, NULL);
    drain();
    ck_assert_int_eq(n_notice, 0);
    scope_detach(a);
    while (drain())
        ;
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("scope_drain");
    TCase *t = tcase_create("receive_cancel");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, cancel_without_pending_receive_fails);
    tcase_add_test(t, cancel_waiting_receive_then_receive_again);
    tcase_add_test(t, cancel_with_delivery_queued_keeps_the_event);
    tcase_add_test(t, finish_after_cancel_releases);
    suite_add_tcase(s, t);
    t = tcase_create("server_drain");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, notice_runs_once_from_the_queue);
    tcase_add_test(t, notice_skips_finished_scopes_and_lifespan);
    tcase_add_test(t, notice_not_run_for_scope_finished_after_queueing);
    tcase_add_test(t, notice_registered_during_drain_not_run_once_finished);
    suite_add_tcase(s, t);
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
