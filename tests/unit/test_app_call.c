/*
 * test_app_call.c - Check suite for src/worker/core/app_call.c: the record
 * of the app call a worker is inside (what the master's blocked-loop kill
 * reads): only the outermost call of a nest, cleared on return, the
 * request's target escaped and cut, its start time on the monotonic clock.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "common/shm.h"
#include "worker/core/app_call.h"
#include "worker/core/loop.h"

static struct ev_loop *ev;
static pagi_loop L;
static shm_app_call rec;

static void setup(void)
{
    ev = ev_loop_new(0);
    ck_assert_ptr_nonnull(ev);
    ck_assert_int_eq(loop_init(&L, ev), 0);
    memset(&rec, 0, sizeof rec);
    L.app_call = &rec;
    app_call_clock_sync(&L, shm_now_ms());
}

static void teardown(void)
{
    loop_destroy(&L);
    ev_loop_destroy(ev);
}

static app_call_request request(const void *id, uint32_t gen, const char *path, const char *query)
{
    return (app_call_request){.id = id,
                              .gen = gen,
                              .method = "GET",
                              .path = path,
                              .path_len = strlen(path),
                              .query = query,
                              .query_len = query ? strlen(query) : 0};
}

static shm_app_call read_rec(void)
{
    shm_app_call c;
    ck_assert_int_eq(shm_app_call_read(&rec, &c), 0);
    return c;
}

START_TEST(test_outermost_call_recorded_and_cleared)
{
    int a;
    app_call_request r = request(&a, 1, "/slow", "x=1");
    uint64_t before = shm_now_ms();
    app_call_enter(&L, "handle", &r);
    shm_app_call c = read_rec();
    ck_assert_str_eq(c.kind, "handle");
    ck_assert_str_eq(c.method, "GET");
    ck_assert_str_eq(c.target, "/slow?x=1");
    uint64_t started = atomic_load(&c.started_ms);
    /* ev_now is the loop's cached time: within a second of the clock */
    ck_assert_uint_ge(started + 1000, before);
    ck_assert_uint_le(started, shm_now_ms() + 1000);
    /* a callback inside the handler does not replace it */
    app_call_enter(&L, "timer", NULL);
    c = read_rec();
    ck_assert_str_eq(c.kind, "handle");
    ck_assert_str_eq(c.target, "/slow?x=1");
    app_call_leave(&L);
    ck_assert_uint_ne(atomic_load(&rec.started_ms), 0);
    app_call_leave(&L);
    ck_assert_uint_eq(atomic_load(&rec.started_ms), 0);
    ck_assert_uint_eq(L.app_call_depth, 0);
}
END_TEST

START_TEST(test_request_text_follows_the_request)
{
    int a, b;
    app_call_request r1 = request(&a, 1, "/one", NULL);
    app_call_enter(&L, "handle", &r1);
    app_call_leave(&L);
    /* the same shell, a later life: another request */
    app_call_request r2 = request(&a, 2, "/two", "q");
    app_call_enter(&L, "receive", &r2);
    ck_assert_str_eq(read_rec().target, "/two?q");
    app_call_leave(&L);
    app_call_enter(&L, "timer", NULL);
    shm_app_call c = read_rec();
    ck_assert_str_eq(c.kind, "timer");
    ck_assert_str_eq(c.method, "");
    ck_assert_str_eq(c.target, "");
    app_call_leave(&L);
    app_call_request r3 = request(&b, 1, "/three", NULL);
    app_call_enter(&L, "send", &r3);
    ck_assert_str_eq(read_rec().target, "/three");
    app_call_leave(&L);
}
END_TEST

START_TEST(test_target_escaped_and_cut)
{
    int a;
    app_call_request r = request(&a, 1, "/a\x01\\b\x7f\xc3\xa9", "z=\n");
    app_call_enter(&L, "handle", &r);
    ck_assert_str_eq(read_rec().target, "/a\\x01\\x5cb\\x7f\\xc3\\xa9?z=\\x0a");
    app_call_leave(&L);
    char path[400];
    memset(path, 'p', sizeof path - 1);
    path[0] = '/';
    path[sizeof path - 1] = '\0';
    app_call_request longer = request(&a, 2, path, "q=1");
    app_call_enter(&L, "handle", &longer);
    shm_app_call c = read_rec();
    ck_assert_uint_eq(strlen(c.target), 128 + 3);
    ck_assert_int_eq(strncmp(c.target, path, 128), 0);
    ck_assert_str_eq(c.target + 128, "...");
    app_call_leave(&L);
    /* an escape is never split at the cut */
    memset(path, '\x01', sizeof path - 1);
    app_call_request ctl = request(&a, 3, path, NULL);
    app_call_enter(&L, "handle", &ctl);
    c = read_rec();
    ck_assert_uint_eq(strlen(c.target), 128 + 3);
    ck_assert_str_eq(c.target + 124, "\\x01...");
    app_call_leave(&L);
}
END_TEST

START_TEST(test_no_record_without_a_slot)
{
    L.app_call = NULL;
    int a;
    app_call_request r = request(&a, 1, "/", NULL);
    app_call_enter(&L, "handle", &r);
    ck_assert_uint_eq(L.app_call_depth, 1);
    app_call_leave(&L);
    ck_assert_uint_eq(L.app_call_depth, 0);
    ck_assert_uint_eq(atomic_load(&rec.seq), 0);
}
END_TEST

START_TEST(test_reader_refuses_a_record_being_written)
{
    atomic_store(&rec.seq, 3); /* odd: the worker is in the middle of a write */
    shm_app_call c;
    ck_assert_int_eq(shm_app_call_read(&rec, &c), -1);
}
END_TEST

START_TEST(test_reader_keeps_scribbled_bytes_out_of_the_log)
{
    /* The slot is the worker's memory: an app may write anything there. */
    atomic_store(&rec.started_ms, 5);
    memset(rec.kind, '\n', sizeof rec.kind); /* no NUL at all */
    memcpy(rec.method, "GE\r\nT", 6);
    static const char scribble[] = "/x\x1b[31m\r\n master[1]: fake\xff";
    memcpy(rec.target, scribble, sizeof scribble);
    shm_app_call c = read_rec();
    ck_assert_uint_eq(strlen(c.kind), sizeof c.kind - 1);
    ck_assert_ptr_null(strchr(c.kind, '\n'));
    ck_assert_str_eq(c.method, "GE??T");
    ck_assert_str_eq(c.target, "/x?[31m?? master[1]: fake?");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("app_call");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_outermost_call_recorded_and_cleared);
    tcase_add_test(tc, test_request_text_follows_the_request);
    tcase_add_test(tc, test_target_escaped_and_cut);
    tcase_add_test(tc, test_no_record_without_a_slot);
    tcase_add_test(tc, test_reader_refuses_a_record_being_written);
    tcase_add_test(tc, test_reader_keeps_scribbled_bytes_out_of_the_log);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
