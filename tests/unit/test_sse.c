/*
 * test_sse.c - Check suite for src/worker/sse.c's event formatting: an
 * sse.send made by zero-initialising (ABI 2) writes exactly its data, no
 * retry: line unless has_retry, and has_retry with retry 0 writes "retry: 0".
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "worker/sse/sse.h"

static void expect_wire(const pagi_event *ev, const char *want)
{
    buf b = BUF_INIT;
    ck_assert_int_eq(sse_format_send(&b, ev), 0);
    ck_assert_uint_eq(buf_size(&b), strlen(want));
    ck_assert_mem_eq(buf_head(&b), want, strlen(want));
    buf_free(&b);
}

START_TEST(zero_event_writes_no_retry_line)
{
    pagi_event ev = {0};
    ev.type = PAGI_EV_SSE_SEND;
    ev.data = (pagi_str){"hi", 2};
    expect_wire(&ev, "data: hi\n\n");
    pagi_event d = {.type = PAGI_EV_SSE_SEND, .data = {"x", 1}, .retry = 1500};
    expect_wire(&d, "data: x\n\n"); /* retry without has_retry is not set */
    pagi_event i = PAGI_EVENT_INIT(PAGI_EV_SSE_SEND);
    expect_wire(&i, "data: \n\n");
}
END_TEST

START_TEST(has_retry_writes_retry_even_zero)
{
    pagi_event ev = {.type = PAGI_EV_SSE_SEND, .data = {"hi", 2}, .has_retry = 1};
    expect_wire(&ev, "retry: 0\ndata: hi\n\n");
    ev.retry = 2000;
    ev.event = (pagi_str){"tick", 4};
    ev.id = (pagi_str){"7", 1};
    expect_wire(&ev, "event: tick\nid: 7\nretry: 2000\ndata: hi\n\n");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("sse");
    TCase *t = tcase_create("format");
    tcase_add_test(t, zero_event_writes_no_retry_line);
    tcase_add_test(t, has_retry_writes_retry_even_zero);
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
