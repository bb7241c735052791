/*
 * test_http_exchange.c - Check suite for src/worker/http/http_exchange.c's
 * choice of a response body's source: a zero-initialised event (ABI 2) with
 * only body set is memory, never stdin; fd 0 is reached only with use_fd.
 */
#include <check.h>
#include <stdlib.h>

#include "worker/http/http_exchange.h"

START_TEST(zero_body_event_is_memory)
{
    pagi_event ev = {0};
    ev.type = PAGI_EV_HTTP_RESPONSE_BODY;
    ev.body = (pagi_str){"exactly this", 12};
    ck_assert_int_eq(http_body_source_of(&ev), HX_BODY_MEMORY);
    pagi_event empty = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_BODY);
    ck_assert_int_eq(http_body_source_of(&empty), HX_BODY_MEMORY);
}
END_TEST

START_TEST(stdin_only_with_use_fd)
{
    pagi_event in = {.type = PAGI_EV_HTTP_RESPONSE_BODY, .use_fd = 1, .fd = 0};
    ck_assert_int_eq(http_body_source_of(&in), HX_BODY_FD);
    pagi_event f = {.type = PAGI_EV_HTTP_RESPONSE_BODY, .file = "/etc/hostname"};
    ck_assert_int_eq(http_body_source_of(&f), HX_BODY_FILE);
    f.use_fd = 1;
    ck_assert_int_eq(http_body_source_of(&f), HX_BODY_CONFLICT);
    in.body = (pagi_str){"x", 1};
    ck_assert_int_eq(http_body_source_of(&in), HX_BODY_CONFLICT);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("http_exchange");
    TCase *t = tcase_create("body_source");
    tcase_add_test(t, zero_body_event_is_memory);
    tcase_add_test(t, stdin_only_with_use_fd);
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
