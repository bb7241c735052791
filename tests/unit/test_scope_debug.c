/*
 * test_scope_debug.c - Check suite for debug mode in src/worker/scope*.c:
 * each misuse of the interface is logged with the request and does not
 * crash; a released handle is recognised; a callback holding the loop is
 * reported; with debug mode off, none of it is logged.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "worker/scope/scope.h"
#include "worker/core/state_table.h"
#include "worker/worker_ctx.h"

static pagid_config cfg;
static struct ev_loop *ev;
static worker_ctx w;
static char log_path[64];

/* ---- a fake protocol driver (as test_scope.c's) ---- */

static int chunks, finished_calls;

static int fake_send(pagi_scope *s, const pagi_event *e, pagi_send_cb cb, void *ud)
{
    if (e->type == PAGI_EV_LIFESPAN_STARTUP)
        return scope_fail(s, "send: not sendable");
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
    if (take) {
        chunks--;
        e->type = PAGI_EV_HTTP_REQUEST;
    }
    return 1;
}

static void fake_finished(pagi_scope *s, const char *error)
{
    finished_calls++;
}

static const scope_ops fake_ops = {
    .send = fake_send, .next_event = fake_next_event, .finished = fake_finished};

static void setup_mode(int debug)
{
    config_init_defaults(&cfg);
    memset(&w, 0, sizeof w);
    w.cfg = &cfg;
    ev = ev_loop_new(0);
    ck_assert_ptr_nonnull(ev);
    loop_init(&w.loop, ev);
    w.loop.debug = debug;
    chunks = finished_calls = 0;
    snprintf(log_path, sizeof log_path, "/tmp/pagid-scope-debug-XXXXXX");
    int fd = mkstemp(log_path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(log_open(log_path, LOG_LVL_DEBUG), 0);
}

static void setup_debug(void)
{
    setup_mode(1);
}
static void setup_plain(void)
{
    setup_mode(0);
}

static void teardown(void)
{
    scope_abandon_all(&w);
    loop_drain_all(&w.loop);
    scope_quarantine_free(&w);
    loop_destroy(&w.loop);
    ev_loop_destroy(ev);
    state_table_unref(w.state);
    config_free(&cfg);
    log_open(NULL, LOG_LVL_ERROR);
    unlink(log_path);
}

/* Everything logged so far (a static buffer). */
static const char *logged(void)
{
    static char text[16384];
    FILE *f = fopen(log_path, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    return text;
}

static int count_of(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

#define ck_logged(needle)                                                                          \
    ck_assert_msg(strstr(logged(), needle), "not logged: %s\n--\n%s", needle, logged())

static pagi_scope *new_http(void)
{
    scope_request r = {.method = "PUT",
                       .http_version = "1.1",
                       .path = {"/kv/x", 5},
                       .raw_path = {"/kv/x", 5},
                       .query = {"", 0},
                       .client_host = "127.0.0.1",
                       .client_port = 4000};
    pagi_scope *s = scope_new(&w, PAGI_SCOPE_HTTP, &fake_ops, NULL, &r);
    ck_assert_ptr_nonnull(s);
    return s;
}

static void drain(void)
{
    loop_drain_all(&w.loop);
}

static int n_release, n_recv, n_sent;
static void on_release(pagi_scope *s, void *ud)
{
    n_release++;
}
static void on_recv(pagi_scope *s, const pagi_event *e, void *ud)
{
    n_recv++;
}
static void on_sent(pagi_scope *s, const char *err, void *ud)
{
    n_sent++;
}

static pagi_event body_event(void)
{
    pagi_event e = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_BODY);
    e.body = (pagi_str){"hi", 2};
    return e;
}

/* ---- misuse, debug mode on ---- */

START_TEST(double_finish_logged)
{
    pagi_scope *s = new_http();
    pagi_scope_finish(s, NULL);
    pagi_scope_finish(s, NULL); /* the connection still holds it: a live, finished scope */
    ck_logged("debug: pagi_scope_finish called twice (http scope, PUT /kv/x)");
    ck_assert_int_eq(finished_calls, 1);
    scope_detach(s);
    drain();
    ck_assert_int_eq(count_of(logged(), "called twice"), 1);
}
END_TEST

START_TEST(finish_with_pending_receive_logged)
{
    pagi_scope *s = new_http();
    ck_assert_int_eq(pagi_receive(s, on_recv, NULL), 0);
    drain(); /* nothing to deliver: the receive stays pending */
    pagi_scope_finish(s, NULL);
    ck_logged("pagi_scope_finish with a receive pending (its callback will not run) (http scope, "
              "PUT /kv/x)");
    scope_detach(s);
    drain();
    ck_assert_int_eq(n_recv, 0);
}
END_TEST

START_TEST(finish_before_send_callback_logged)
{
    pagi_scope *s = new_http();
    pagi_event e = body_event();
    ck_assert_int_eq(pagi_send(s, &e, on_sent, NULL), 0);
    ck_assert_int_eq(pagi_send(s, &e, on_sent, NULL), 0);
    pagi_scope_finish(s, NULL);
    ck_logged("pagi_scope_finish before 2 send callbacks ran (http scope, PUT /kv/x)");
    scope_detach(s);
    drain();
    ck_assert_int_eq(n_sent, 2); /* they still run: the scope lives until they did */
}
END_TEST

START_TEST(finish_after_send_callback_is_quiet)
{
    pagi_scope *s = new_http();
    pagi_event e = body_event();
    ck_assert_int_eq(pagi_send(s, &e, on_sent, NULL), 0);
    drain();
    ck_assert_int_eq(n_sent, 1);
    pagi_scope_finish(s, NULL);
    scope_detach(s);
    drain();
    ck_assert_ptr_null(strstr(logged(), "debug:"));
}
END_TEST

START_TEST(rejected_calls_logged)
{
    pagi_scope *s = new_http();
    pagi_event bad = PAGI_EVENT_INIT(PAGI_EV_LIFESPAN_STARTUP);
    ck_assert_int_eq(pagi_send(s, &bad, NULL, NULL), -1);
    ck_logged("debug: pagi_send of lifespan.startup refused: send: not sendable (http scope, PUT "
              "/kv/x)");
    ck_assert_int_eq(pagi_send(s, NULL, NULL, NULL), -1);
    ck_logged("pagi_send refused: send: no event (http scope, PUT /kv/x)");
    ck_assert_int_eq(pagi_receive(s, NULL, NULL), -1);
    ck_logged("pagi_receive refused: receive: no callback (http scope, PUT /kv/x)");
    pagi_scope_finish(s, NULL);
    pagi_event e = body_event();
    ck_assert_int_eq(pagi_send(s, &e, NULL, NULL), -1);
    ck_logged("pagi_send of http.response.body refused: send after the scope finished");
    ck_assert_int_eq(pagi_receive(s, on_recv, NULL), -1);
    ck_logged("pagi_receive refused: receive after the scope finished");
    scope_detach(s);
    drain();
}
END_TEST

/* The real release path: the app finishes, the connection detaches, the
 * release callback runs at the safe point; then the app uses the handle. */
START_TEST(stale_handle_after_release)
{
    pagi_scope *s = new_http();
    pagi_scope_set_userdata(s, &n_release, on_release);
    pagi_scope_finish(s, NULL);
    scope_detach(s);
    drain();
    ck_assert_int_eq(n_release, 1);

    /* The next request must not get the stale handle's address. */
    pagi_scope *next = new_http();
    ck_assert_ptr_ne(next, s);

    pagi_str p = pagi_scope_path(s);
    ck_assert_uint_eq(p.len, 0);
    ck_assert_str_eq(pagi_scope_method(s), "");
    ck_logged("debug: pagi_scope_path: stale handle");
    ck_logged("(its scope, http PUT /kv/x, was released)");
    ck_logged("debug: pagi_scope_method: stale handle");
    pagi_event e = body_event();
    ck_assert_int_eq(pagi_send(s, &e, on_sent, NULL), -1);
    ck_logged("pagi_send: stale handle");
    ck_assert_int_eq(pagi_receive(s, on_recv, NULL), -1);
    ck_assert_ptr_null(pagi_scope_userdata(s));
    ck_assert_ptr_null(pagi_scope_loop(s));
    pagi_scope_finish(s, NULL);
    ck_logged("pagi_scope_finish: stale handle");
    drain();
    ck_assert_int_eq(n_release, 1);
    ck_assert_int_eq(n_sent, 0);
    ck_assert_int_eq(n_recv, 0);

    pagi_scope_finish(next, NULL);
    scope_detach(next);
    drain();
}
END_TEST

/* The quarantine is bounded: many releases cost no more than its size (and
 * nothing leaks under ASan when the worker frees it). */
START_TEST(quarantine_is_bounded)
{
    for (int i = 0; i < 3000; i++) {
        pagi_scope *s = new_http();
        pagi_scope_finish(s, NULL);
        scope_detach(s);
        drain();
    }
    ck_assert_uint_eq(w.n_scopes, 0);
}
END_TEST

START_TEST(unfinished_scope_at_detach_logged)
{
    pagi_scope *s = new_http();
    pagi_event e = body_event();
    ck_assert_int_eq(pagi_send(s, &e, NULL, NULL), 0);
    scope_mark_complete(s);
    scope_detach(s); /* the app sent everything and forgot to finish */
    ck_logged("the connection is done with this scope but the app never finished it");
    ck_logged("(http scope, PUT /kv/x)");
    drain();
    pagi_scope_finish(s, NULL); /* late, but still a live scope: no stale-handle line */
    drain();
    ck_assert_ptr_null(strstr(logged(), "stale handle"));
}
END_TEST

START_TEST(abandoned_at_exit_logged)
{
    new_http();
    scope_abandon_all(&w);
    ck_logged("the worker is exiting and the app never finished this scope: finished on its "
              "behalf (http scope, PUT /kv/x)");
    ck_assert_int_eq(finished_calls, 1);
    drain();
}
END_TEST

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static void slow_recv(pagi_scope *s, const pagi_event *e, void *ud)
{
    sleep_ms(150);
    n_recv++;
}

START_TEST(callback_holding_loop_logged)
{
    pagi_scope *s = new_http();
    chunks = 1;
    ck_assert_int_eq(pagi_receive(s, slow_recv, NULL), 0);
    drain();
    ck_assert_int_eq(n_recv, 1);
    const char *t = strstr(logged(), "debug: an app's receive callback held the loop for ");
    ck_assert_msg(t, "no hold warning:\n%s", logged());
    long ms = strtol(t + strlen("debug: an app's receive callback held the loop for "), NULL, 10);
    ck_assert_int_ge(ms, 100);
    ck_logged("ms (http scope, PUT /kv/x)");
    ck_assert_int_eq(count_of(logged(), "held the loop"), 1); /* not again by the run queue */
    pagi_scope_finish(s, NULL);
    scope_detach(s);
    drain();
}
END_TEST

/* ---- debug mode off: the same misuse is not logged ---- */

START_TEST(plain_mode_is_quiet)
{
    pagi_scope *s = new_http();
    chunks = 1;
    ck_assert_int_eq(pagi_receive(s, slow_recv, NULL), 0);
    drain();
    ck_assert_int_eq(pagi_receive(s, on_recv, NULL), 0);
    pagi_event bad = PAGI_EVENT_INIT(PAGI_EV_LIFESPAN_STARTUP);
    ck_assert_int_eq(pagi_send(s, &bad, NULL, NULL), -1);
    pagi_scope_finish(s, NULL);
    pagi_scope_finish(s, NULL);
    scope_detach(s);
    drain();
    ck_assert_int_eq(finished_calls, 1);
    ck_assert_ptr_null(strstr(logged(), "debug:"));
    ck_assert_ptr_null(w.quarantine);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("scope_debug");
    TCase *t = tcase_create("misuse");
    tcase_add_checked_fixture(t, setup_debug, teardown);
    tcase_add_test(t, double_finish_logged);
    tcase_add_test(t, finish_with_pending_receive_logged);
    tcase_add_test(t, finish_before_send_callback_logged);
    tcase_add_test(t, finish_after_send_callback_is_quiet);
    tcase_add_test(t, rejected_calls_logged);
    tcase_add_test(t, unfinished_scope_at_detach_logged);
    tcase_add_test(t, abandoned_at_exit_logged);
    suite_add_tcase(s, t);

    t = tcase_create("stale");
    tcase_add_checked_fixture(t, setup_debug, teardown);
    tcase_add_test(t, stale_handle_after_release);
    tcase_add_test(t, quarantine_is_bounded);
    suite_add_tcase(s, t);

    t = tcase_create("hold");
    tcase_add_checked_fixture(t, setup_debug, teardown);
    tcase_add_test(t, callback_holding_loop_logged);
    suite_add_tcase(s, t);

    t = tcase_create("plain");
    tcase_add_checked_fixture(t, setup_plain, teardown);
    tcase_add_test(t, plain_mode_is_quiet);
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
