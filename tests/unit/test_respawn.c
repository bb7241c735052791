/*
 * test_respawn.c - Check suite for src/master/respawn.c: the verdict on
 * every way a worker can end (fatal, asked for, recycled, crashed once,
 * crash loop), the backoff schedule, and the zygote's give-up rule.
 */
#include <check.h>
#include <signal.h>
#include <stdlib.h>

#include "common/exitcodes.h"
#include "master/respawn.h"

/* wait(2) statuses, built as the kernel encodes them. */
static int exited(int code)
{
    return (code & 0xff) << 8;
}
static int killed(int sig)
{
    return sig & 0x7f;
}

static respawn_verdict decide(int status, int wanted, double uptime, unsigned fast)
{
    respawn_facts f = {
        .status = status, .wanted = wanted, .uptime_s = uptime, .fast_crashes = fast};
    return respawn_decide(&f);
}

START_TEST(fatal_exit_is_never_restarted)
{
    /* Even when wanted: a worker whose lifespan startup failed would fail again. */
    respawn_verdict v = decide(exited(EXIT_WORKER_FATAL), 1, 0.1, 0);
    ck_assert_int_eq(v.action, RESPAWN_FATAL);
    ck_assert_int_eq(decide(exited(EXIT_WORKER_FATAL), 0, 5, 0).action, RESPAWN_FATAL);
}
END_TEST

START_TEST(unwanted_exits_stay_down_and_say_if_asked)
{
    respawn_verdict v = decide(exited(EXIT_OK), 0, 30, 0);
    ck_assert_int_eq(v.action, RESPAWN_NONE);
    ck_assert_int_eq(v.as_asked, 1);
    ck_assert_int_eq(decide(exited(EXIT_RECYCLE), 0, 30, 0).as_asked, 1);
    ck_assert_int_eq(decide(killed(SIGQUIT), 0, 30, 0).as_asked, 1);
    /* A segfault while draining is still worth a warning. */
    v = decide(killed(SIGSEGV), 0, 30, 0);
    ck_assert_int_eq(v.action, RESPAWN_NONE);
    ck_assert_int_eq(v.as_asked, 0);
    ck_assert_int_eq(decide(exited(3), 0, 30, 0).as_asked, 0);
}
END_TEST

START_TEST(recycle_is_immediate_and_resets_the_crash_count)
{
    respawn_verdict v = decide(exited(EXIT_RECYCLE), 1, 0.2, 7);
    ck_assert_int_eq(v.action, RESPAWN_RECYCLE);
    ck_assert_uint_eq(v.fast_crashes, 0);
}
END_TEST

START_TEST(a_crash_after_real_work_restarts_at_once)
{
    respawn_verdict v = decide(killed(SIGSEGV), 1, 5.0, 4);
    ck_assert_int_eq(v.action, RESPAWN_NOW);
    ck_assert_uint_eq(v.fast_crashes, 0); /* it lived: the loop is broken */
    ck_assert_uint_eq(v.delay_ms, 0);
    /* An unexpected clean exit is treated like a crash. */
    ck_assert_int_eq(decide(exited(0), 1, 5.0, 0).action, RESPAWN_NOW);
}
END_TEST

START_TEST(fast_crashes_back_off)
{
    /* The first fast crash restarts at once; the second waits 100 ms, ... */
    respawn_verdict v = decide(killed(SIGABRT), 1, 0.05, 0);
    ck_assert_int_eq(v.action, RESPAWN_NOW);
    ck_assert_uint_eq(v.fast_crashes, 1);
    v = decide(killed(SIGABRT), 1, 0.05, v.fast_crashes);
    ck_assert_int_eq(v.action, RESPAWN_LATER);
    ck_assert_uint_eq(v.fast_crashes, 2);
    ck_assert_uint_eq(v.delay_ms, RESPAWN_BACKOFF_MIN_MS);
    for (int i = 0; i < 20; i++)
        v = decide(exited(3), 1, 0.05, v.fast_crashes);
    ck_assert_int_eq(v.action, RESPAWN_LATER);
    ck_assert_uint_eq(v.delay_ms, RESPAWN_BACKOFF_MAX_MS);
    /* The boundary: just under RESPAWN_FAST_CRASH_MS counts, at it does not. */
    ck_assert_uint_eq(decide(exited(3), 1, (RESPAWN_FAST_CRASH_MS - 1) / 1000.0, 2).fast_crashes,
                      3);
    ck_assert_uint_eq(decide(exited(3), 1, RESPAWN_FAST_CRASH_MS / 1000.0, 2).fast_crashes, 0);
}
END_TEST

START_TEST(backoff_schedule)
{
    ck_assert_uint_eq(respawn_backoff_ms(0), 0);
    ck_assert_uint_eq(respawn_backoff_ms(1), 0);
    ck_assert_uint_eq(respawn_backoff_ms(2), 100);
    ck_assert_uint_eq(respawn_backoff_ms(3), 200);
    ck_assert_uint_eq(respawn_backoff_ms(8), 6400);
    ck_assert_uint_eq(respawn_backoff_ms(9), 10000);
    ck_assert_uint_eq(respawn_backoff_ms(4000000000u), 10000);
}
END_TEST

START_TEST(zygote_rules)
{
    ck_assert_int_eq(respawn_after_zygote(1, 1), RESPAWN_FATAL);
    ck_assert_int_eq(respawn_after_zygote(1, 0), RESPAWN_FATAL);
    ck_assert_int_eq(respawn_after_zygote(0, 1), RESPAWN_NOW);
    ck_assert_int_eq(respawn_after_zygote(0, 0), RESPAWN_NONE);

    unsigned n = 0;
    for (int i = 0; i < RESPAWN_ZYGOTE_MAX_FAST_CRASHES - 1; i++) {
        n = respawn_zygote_fast_crashes(n, 1.0);
        ck_assert_int_eq(respawn_zygote_given_up(n), 0);
    }
    n = respawn_zygote_fast_crashes(n, 1.0);
    ck_assert_int_eq(respawn_zygote_given_up(n), 1);
    /* A zygote that lived past the window starts the count again. */
    ck_assert_uint_eq(respawn_zygote_fast_crashes(2, RESPAWN_ZYGOTE_FAST_CRASH_S + 1), 0);
}
END_TEST

static Suite *respawn_suite(void)
{
    Suite *s = suite_create("respawn");
    TCase *tc = tcase_create("policy");
    tcase_add_test(tc, fatal_exit_is_never_restarted);
    tcase_add_test(tc, unwanted_exits_stay_down_and_say_if_asked);
    tcase_add_test(tc, recycle_is_immediate_and_resets_the_crash_count);
    tcase_add_test(tc, a_crash_after_real_work_restarts_at_once);
    tcase_add_test(tc, fast_crashes_back_off);
    tcase_add_test(tc, backoff_schedule);
    tcase_add_test(tc, zygote_rules);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(respawn_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
