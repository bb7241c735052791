/*
 * test_memtrim.c - Check suite for src/worker/memtrim.c: small frees only
 * add up, the threshold arms one trim on the loop, the trim runs after its
 * delay and starts the count afresh.
 */
#include <check.h>
#include <ev.h>
#include <stdlib.h>

#include "worker/core/memtrim.h"

START_TEST(trims_once_enough_was_freed)
{
    struct ev_loop *ev = ev_loop_new(EVFLAG_AUTO);
    ck_assert_ptr_nonnull(ev);
    size_t before = memtrim_pending();
    memtrim_note(ev, 100);
    ck_assert_uint_eq(memtrim_pending(), before + 100);
    /* Below the threshold nothing waits on the loop: it has nothing to run. */
    ck_assert_int_eq(ev_run(ev, EVRUN_NOWAIT), 0);
    memtrim_note(NULL, MEMTRIM_THRESHOLD); /* no loop known yet: only counted */
    ck_assert_int_eq(ev_run(ev, EVRUN_NOWAIT), 0);
    memtrim_note(ev, 1); /* over the threshold: a trim is armed */
    ck_assert_int_ne(ev_run(ev, EVRUN_NOWAIT), 0);
    ev_run(ev, 0); /* runs until the trim's timer fired and nothing is left */
    ck_assert_uint_eq(memtrim_pending(), 0);
    double first = ev_now(ev);
    /* Freed after a connection closed: the loop last seen arms it, but never
     * sooner than MEMTRIM_MIN_INTERVAL after the last trim (libev's timers
     * never fire early, so this cannot flake on a slow machine). */
    memtrim_note(NULL, MEMTRIM_THRESHOLD);
    ck_assert_int_ne(ev_run(ev, EVRUN_NOWAIT), 0);
    ev_run(ev, 0);
    ck_assert_uint_eq(memtrim_pending(), 0);
    ck_assert(ev_now(ev) >= first + MEMTRIM_MIN_INTERVAL - 0.01);
    /* Stopped with the worker's loop: nothing stays armed on it. */
    memtrim_note(ev, MEMTRIM_THRESHOLD);
    ck_assert_int_ne(ev_run(ev, EVRUN_NOWAIT), 0);
    memtrim_stop();
    ck_assert_uint_eq(memtrim_pending(), 0);
    ck_assert_int_eq(ev_run(ev, EVRUN_NOWAIT), 0);
    ev_loop_destroy(ev);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("memtrim");
    TCase *t = tcase_create("memtrim");
    tcase_set_timeout(t, 30);
    tcase_add_test(t, trims_once_enough_was_freed);
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
