/*
 * test_loop.c - Check suite for src/worker/loop.c on a real libev loop: pagi_defer,
 * timers, fd watches, the flush hook, and a million-link defer chain that keeps
 * constant stack and lets I/O in.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "worker/core/loop.h"

static struct ev_loop *ev;
static pagi_loop L;

static void setup(void)
{
    ev = ev_loop_new(0);
    ck_assert_ptr_nonnull(ev);
    ck_assert_int_eq(loop_init(&L, ev), 0);
}

static void teardown(void)
{
    loop_drain_all(&L); /* frees stopped timers/watchers */
    loop_destroy(&L);
    ev_loop_destroy(ev);
}

/* ---- pagi_defer ---- */

static int in_defer_call;
static int log_v[64];
static size_t log_n;

static void defer_rec(void *ud)
{
    ck_assert_int_eq(in_defer_call, 0);
    log_v[log_n++] = (int)(intptr_t)ud;
}

START_TEST(defer_runs_from_loop_not_inline)
{
    log_n = 0;
    in_defer_call = 1;
    ck_assert_int_eq(pagi_defer(&L, defer_rec, (void *)1), 0);
    ck_assert_int_eq(pagi_defer(&L, defer_rec, (void *)2), 0);
    ck_assert_int_eq(pagi_defer(&L, defer_rec, (void *)3), 0);
    in_defer_call = 0;
    ck_assert_uint_eq(log_n, 0);
    ck_assert_uint_eq(runq_pending(&L.rq), 3);
    /* Nothing else keeps the loop alive: run returns once the queue is empty. */
    ev_run(ev, 0);
    ck_assert_uint_eq(log_n, 3);
    ck_assert_int_eq(log_v[0], 1);
    ck_assert_int_eq(log_v[1], 2);
    ck_assert_int_eq(log_v[2], 3);
    ck_assert_uint_eq(runq_pending(&L.rq), 0);
}
END_TEST

START_TEST(defer_bad_args)
{
    ck_assert_int_eq(pagi_defer(NULL, defer_rec, NULL), -1);
    ck_assert_int_eq(pagi_defer(&L, NULL, NULL), -1);
    ck_assert_uint_eq(runq_pending(&L.rq), 0);
}
END_TEST

/* A deferred call that defers another: the second runs in a later round. */
static void defer_outer(void *ud)
{
    log_v[log_n++] = 10;
    in_defer_call = 1;
    pagi_defer(&L, defer_rec, (void *)11);
    in_defer_call = 0;
    log_v[log_n++] = 12;
}

static int flush_calls;
static size_t flush_seen_at[16];

static void flush_hook(void *ud)
{
    ck_assert_ptr_eq(ud, &flush_calls);
    if (flush_calls < 16)
        flush_seen_at[flush_calls] = log_n;
    flush_calls++;
}

START_TEST(flush_hook_after_each_round)
{
    log_n = 0;
    flush_calls = 0;
    L.flush = flush_hook;
    L.flush_ud = &flush_calls;
    pagi_defer(&L, defer_outer, NULL);
    ev_run(ev, 0);
    ck_assert_uint_eq(log_n, 3);
    ck_assert_int_eq(log_v[0], 10);
    ck_assert_int_eq(log_v[1], 12);
    ck_assert_int_eq(log_v[2], 11);
    /* Round 1 ran the outer call (2 log entries), then flush; round 2 ran the inner one. */
    ck_assert_int_ge(flush_calls, 2);
    ck_assert_uint_eq(flush_seen_at[0], 2);
    ck_assert_uint_eq(flush_seen_at[1], 3);
    L.flush = NULL;
}
END_TEST

/* ---- timers ---- */

static int timer_fired;
static pagi_timer *timer_h;

static void oneshot_cb(pagi_timer *t, void *ud)
{
    ck_assert_ptr_eq(t, timer_h);
    ck_assert_ptr_eq(ud, &timer_fired);
    timer_fired++;
}

START_TEST(timer_oneshot)
{
    timer_fired = 0;
    double t0 = pagi_loop_now(&L);
    timer_h = pagi_timer_start(&L, 0.01, 0, oneshot_cb, &timer_fired);
    ck_assert_ptr_nonnull(timer_h);
    ck_assert_int_eq(timer_fired, 0);
    ev_run(ev, 0); /* returns when the one-shot timer is no longer active */
    ck_assert_int_eq(timer_fired, 1);
    ck_assert(pagi_loop_now(&L) >= t0 + 0.009);
    ev_run(ev, EVRUN_NOWAIT);
    ck_assert_int_eq(timer_fired, 1);
    pagi_timer_stop(timer_h); /* stopping an expired one-shot timer frees it */
}
END_TEST

static void repeat_cb(pagi_timer *t, void *ud)
{
    int *n = ud;
    (*n)++;
    if (*n == 3) {
        pagi_timer_stop(t); /* inside its own callback */
        /* Under ASan, a free of t before the callback returned would be caught below. */
    }
}

START_TEST(timer_repeat_and_stop_inside_cb)
{
    int n = 0;
    pagi_timer *t = pagi_timer_start(&L, 0.002, 0.002, repeat_cb, &n);
    ck_assert_ptr_nonnull(t);
    ev_run(ev, 0); /* returns once the timer was stopped and freed */
    ck_assert_int_eq(n, 3);
    usleep(10000);
    ev_run(ev, EVRUN_NOWAIT);
    ck_assert_int_eq(n, 3);
    ck_assert_uint_eq(runq_pending(&L.rq), 0);
}
END_TEST

START_TEST(timer_bad_args)
{
    ck_assert_ptr_null(pagi_timer_start(&L, -1, 0, oneshot_cb, NULL));
    ck_assert_ptr_null(pagi_timer_start(&L, 1, -1, oneshot_cb, NULL));
    ck_assert_ptr_null(pagi_timer_start(&L, 1, 0, NULL, NULL));
    ck_assert_ptr_null(pagi_timer_start(NULL, 1, 0, oneshot_cb, NULL));
    pagi_timer_stop(NULL); /* no-op */
}
END_TEST

/* ---- fd watches ---- */

static int io_fired, io_fd, io_events;

static void io_cb(pagi_io *w, int fd, int events, void *ud)
{
    ck_assert_ptr_eq(ud, &io_fired);
    io_fired++;
    io_fd = fd;
    io_events = events;
    pagi_io_stop(w); /* inside its own callback */
}

START_TEST(io_watch_pipe_read)
{
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    io_fired = 0;
    pagi_io *w = pagi_io_watch(&L, p[0], PAGI_IO_READ, io_cb, &io_fired);
    ck_assert_ptr_nonnull(w);
    ev_run(ev, EVRUN_NOWAIT);
    ck_assert_int_eq(io_fired, 0); /* nothing written yet */
    ck_assert_int_eq(write(p[1], "x", 1), 1);
    ev_run(ev, 0); /* returns when the watcher stopped */
    ck_assert_int_eq(io_fired, 1);
    ck_assert_int_eq(io_fd, p[0]);
    ck_assert_int_eq(io_events, PAGI_IO_READ);
    ev_run(ev, EVRUN_NOWAIT);
    ck_assert_int_eq(io_fired, 1);
    close(p[0]);
    close(p[1]);
}
END_TEST

START_TEST(io_watch_pipe_write)
{
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    io_fired = 0;
    pagi_io *w = pagi_io_watch(&L, p[1], PAGI_IO_WRITE, io_cb, &io_fired);
    ck_assert_ptr_nonnull(w);
    ev_run(ev, 0);
    ck_assert_int_eq(io_fired, 1);
    ck_assert_int_eq(io_fd, p[1]);
    ck_assert_int_eq(io_events, PAGI_IO_WRITE);
    close(p[0]);
    close(p[1]);
}
END_TEST

START_TEST(io_watch_bad_args)
{
    ck_assert_ptr_null(pagi_io_watch(&L, -1, PAGI_IO_READ, io_cb, NULL));
    ck_assert_ptr_null(pagi_io_watch(&L, 0, 0, io_cb, NULL));
    ck_assert_ptr_null(pagi_io_watch(&L, 0, PAGI_IO_READ, NULL, NULL));
    pagi_io_stop(NULL);
}
END_TEST

/* ---- a million-link defer chain ---- */

#define CHAIN_LEN 1000000

static long chain_n;
static intptr_t chain_first_sp, chain_last_sp;
static long io_seen_at = -1;
static pagi_timer *chain_guard;
static int chain_pipe[2];
static long chain_defer_failed;

static void chain_cb(void *ud)
{
    volatile char marker = 0;
    intptr_t sp = (intptr_t)&marker;
    chain_n++;
    if (chain_n == 1)
        chain_first_sp = sp;
    if (chain_n < CHAIN_LEN) {
        /* No ck_assert here: each one records a mark point (a write). */
        if (pagi_defer(&L, chain_cb, ud) < 0)
            chain_defer_failed++;
        return;
    }
    chain_last_sp = sp;
    pagi_timer_stop(chain_guard);
}

static void chain_io_cb(pagi_io *w, int fd, int events, void *ud)
{
    char c;
    ck_assert_int_eq(read(fd, &c, 1), 1);
    io_seen_at = chain_n;
    pagi_io_stop(w);
}

static void never_cb(pagi_timer *t, void *ud)
{
    ck_abort_msg("the loop blocked on a timer while the defer chain had work");
}

START_TEST(defer_chain_constant_stack_no_starvation)
{
    chain_n = 0;
    chain_defer_failed = 0;
    io_seen_at = -1;
    ck_assert_int_eq(pipe(chain_pipe), 0);
    /* A long timer keeps the loop alive: if the queue did not keep the poll
       non-blocking, the chain would stall for 60 s (the test times out). */
    chain_guard = pagi_timer_start(&L, 60, 0, never_cb, NULL);
    ck_assert_int_eq(pagi_defer(&L, chain_cb, NULL), 0);
    ck_assert_ptr_nonnull(pagi_io_watch(&L, chain_pipe[0], PAGI_IO_READ, chain_io_cb, NULL));
    ck_assert_int_eq(write(chain_pipe[1], "!", 1), 1);
    ev_run(ev, 0);
    ck_assert_int_eq(chain_n, CHAIN_LEN);
    ck_assert_int_eq(chain_defer_failed, 0);
    intptr_t d = chain_last_sp - chain_first_sp;
    if (d < 0)
        d = -d;
    ck_assert_msg(d < 1024, "stack moved %ld bytes over the chain", (long)d);
    /* The pipe's readiness was observed while the chain was still running. */
    ck_assert_int_ge(io_seen_at, 1);
    ck_assert_int_lt(io_seen_at, 10);
    close(chain_pipe[0]);
    close(chain_pipe[1]);
}
END_TEST

/* ---- stale handles and loop holds (debug mode) ---- */

static char log_path[64];

static void log_to_file(void)
{
    snprintf(log_path, sizeof log_path, "/tmp/pagid-test-loop-XXXXXX");
    int fd = mkstemp(log_path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(log_open(log_path, LOG_LVL_DEBUG), 0);
}

static const char *logged(void)
{
    static char text[8192];
    FILE *f = fopen(log_path, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    return text;
}

static void log_done(void)
{
    log_open(NULL, LOG_LVL_ERROR);
    unlink(log_path);
}

static void never(pagi_timer *t, void *ud)
{
    ck_abort_msg("timer fired");
}
static void never_io(pagi_io *w, int fd, int events, void *ud)
{
    ck_abort_msg("io fired");
}

/* Without debug mode, a second stop in the same round is still caught. */
START_TEST(timer_double_stop_refused)
{
    log_to_file();
    pagi_timer *t = pagi_timer_start(&L, 10, 0, never, NULL);
    ck_assert_ptr_nonnull(t);
    pagi_timer_stop(t);
    pagi_timer_stop(t);
    ck_assert_ptr_nonnull(strstr(logged(), "pagi_timer_stop: stale handle"));
    ck_assert_ptr_nonnull(strstr(logged(), "(already stopped)"));
    loop_drain_all(&L); /* freed once */
    log_done();
}
END_TEST

/* In debug mode, also after the stopped handle's memory would be freed. */
START_TEST(debug_stop_after_free_refused)
{
    log_to_file();
    L.debug = 1;
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pagi_timer *t = pagi_timer_start(&L, 10, 0, never, NULL);
    pagi_io *io = pagi_io_watch(&L, fds[0], PAGI_IO_READ, never_io, NULL);
    pagi_timer_stop(t);
    pagi_io_stop(io);
    loop_drain_all(&L);
    pagi_timer_stop(t);
    pagi_io_stop(io);
    ck_assert_ptr_nonnull(strstr(logged(), "pagi_timer_stop: stale handle"));
    ck_assert_ptr_nonnull(strstr(logged(), "pagi_io_stop: stale handle"));
    /* Bounded: more stops than kept free the oldest (ASan checks the rest). */
    for (int i = 0; i < LOOP_KEPT_MAX + 10; i++)
        pagi_timer_stop(pagi_timer_start(&L, 10, 0, never, NULL));
    loop_drain_all(&L);
    ck_assert_uint_eq(L.kept_n, LOOP_KEPT_MAX);
    close(fds[0]);
    close(fds[1]);
    log_done();
}
END_TEST

static void slow_timer(pagi_timer *t, void *ud)
{
    struct timespec ts = {0, 150 * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
    pagi_timer_stop(t);
    *(int *)ud = 1;
}

START_TEST(debug_timer_holding_loop_reported)
{
    log_to_file();
    L.debug = 1;
    int fired = 0;
    pagi_timer_start(&L, 0.001, 0, slow_timer, &fired);
    while (!fired)
        ev_run(ev, EVRUN_ONCE);
    const char *t = strstr(logged(), "debug: an app's timer callback held the loop for ");
    ck_assert_msg(t, "no warning: %s", logged());
    ck_assert_int_ge(
        strtol(t + strlen("debug: an app's timer callback held the loop for "), NULL, 10), 100);
    log_done();
}
END_TEST

START_TEST(plain_timer_holding_loop_quiet)
{
    log_to_file();
    int fired = 0;
    pagi_timer_start(&L, 0.001, 0, slow_timer, &fired);
    while (!fired)
        ev_run(ev, EVRUN_ONCE);
    ck_assert_ptr_null(strstr(logged(), "held the loop"));
    log_done();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("loop");
    TCase *t = tcase_create("defer");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, defer_runs_from_loop_not_inline);
    tcase_add_test(t, defer_bad_args);
    tcase_add_test(t, flush_hook_after_each_round);
    suite_add_tcase(s, t);

    t = tcase_create("timer");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, timer_oneshot);
    tcase_add_test(t, timer_repeat_and_stop_inside_cb);
    tcase_add_test(t, timer_bad_args);
    suite_add_tcase(s, t);

    t = tcase_create("io");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, io_watch_pipe_read);
    tcase_add_test(t, io_watch_pipe_write);
    tcase_add_test(t, io_watch_bad_args);
    suite_add_tcase(s, t);

    t = tcase_create("debug");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, timer_double_stop_refused);
    tcase_add_test(t, debug_stop_after_free_refused);
    tcase_add_test(t, debug_timer_holding_loop_reported);
    tcase_add_test(t, plain_timer_holding_loop_quiet);
    suite_add_tcase(s, t);

    t = tcase_create("chain");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 30); /* a million loop iterations under ASan */
    tcase_add_test(t, defer_chain_constant_stack_no_starvation);
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
