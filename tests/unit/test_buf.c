/*
 * test_buf.c - Check suite for src/common/buf.c: appends, the read cursor,
 * prefix reclamation on reserve, formatted appends of any length.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"

START_TEST(test_empty)
{
    buf b = BUF_INIT;
    ck_assert_uint_eq(buf_size(&b), 0);
    ck_assert_int_eq(buf_append(&b, "x", 0), 0);
    ck_assert_ptr_null(b.data); /* a zero-length append allocates nothing */
    buf_free(&b);
}
END_TEST

START_TEST(test_append_and_consume)
{
    buf b = BUF_INIT;
    ck_assert_int_eq(buf_append_str(&b, "hello "), 0);
    ck_assert_int_eq(buf_append(&b, "world", 5), 0);
    ck_assert_uint_eq(buf_size(&b), 11);
    ck_assert_int_eq(memcmp(buf_head(&b), "hello world", 11), 0);

    buf_consume(&b, 6);
    ck_assert_uint_eq(buf_size(&b), 5);
    ck_assert_int_eq(memcmp(buf_head(&b), "world", 5), 0);

    /* Consuming everything rewinds the cursor so the space is reused. */
    buf_consume(&b, 5);
    ck_assert_uint_eq(b.off, 0);
    ck_assert_uint_eq(b.len, 0);
    buf_free(&b);
    ck_assert_ptr_null(b.data);
    ck_assert_uint_eq(b.cap, 0);
}
END_TEST

START_TEST(test_growth_keeps_content)
{
    buf b = BUF_INIT;
    char chunk[100];
    for (int i = 0; i < 1000; i++) {
        memset(chunk, 'a' + i % 26, sizeof chunk);
        ck_assert_int_eq(buf_append(&b, chunk, sizeof chunk), 0);
    }
    ck_assert_uint_eq(buf_size(&b), 100000);
    ck_assert_uint_ge(b.cap, 100000);
    for (int i = 0; i < 1000; i++)
        ck_assert_int_eq(buf_head(&b)[i * 100 + 99], 'a' + i % 26);
    buf_free(&b);
}
END_TEST

START_TEST(test_reserve_reclaims_prefix)
{
    buf b = BUF_INIT;
    char *w = buf_reserve(&b, 200);
    ck_assert_ptr_nonnull(w);
    size_t cap = b.cap;
    memset(w, 'x', 200);
    buf_commit(&b, 200);
    buf_append(&b, "TAIL", 4);
    buf_consume(&b, 200);
    /* The tail has no room for cap-10 more bytes, but the consumed prefix does. */
    w = buf_reserve(&b, cap - 10);
    ck_assert_ptr_nonnull(w);
    ck_assert_uint_eq(b.cap, cap);
    ck_assert_uint_eq(b.off, 0);
    ck_assert_int_eq(memcmp(buf_head(&b), "TAIL", 4), 0);
    buf_free(&b);
}
END_TEST

START_TEST(test_reserve_overflow)
{
    buf b = BUF_INIT;
    buf_append(&b, "abc", 3);
    ck_assert_ptr_null(buf_reserve(&b, (size_t)-1));
    ck_assert_uint_eq(buf_size(&b), 3); /* unchanged after the failure */
    buf_free(&b);
}
END_TEST

START_TEST(test_printf)
{
    buf b = BUF_INIT;
    ck_assert_int_eq(buf_printf(&b, "%d-%s", 42, "x"), 0);
    ck_assert_uint_eq(buf_size(&b), 4);
    ck_assert_int_eq(memcmp(buf_head(&b), "42-x", 4), 0);

    /* Longer than the 256-byte stack buffer: formatted straight into b. */
    char big[1000];
    memset(big, 'z', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    ck_assert_int_eq(buf_printf(&b, "[%s]", big), 0);
    ck_assert_uint_eq(buf_size(&b), 4 + 1001);
    ck_assert_int_eq(buf_head(&b)[4], '[');
    ck_assert_int_eq(buf_head(&b)[4 + 1000], ']');
    buf_free(&b);
}
END_TEST

START_TEST(test_reset)
{
    buf b = BUF_INIT;
    buf_append_str(&b, "data");
    size_t cap = b.cap;
    buf_reset(&b);
    ck_assert_uint_eq(buf_size(&b), 0);
    ck_assert_uint_eq(b.cap, cap); /* memory kept for reuse */
    buf_free(&b);
}
END_TEST

static Suite *buf_suite(void)
{
    Suite *s = suite_create("buf");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_empty);
    tcase_add_test(tc, test_append_and_consume);
    tcase_add_test(tc, test_growth_keeps_content);
    tcase_add_test(tc, test_reserve_reclaims_prefix);
    tcase_add_test(tc, test_reserve_overflow);
    tcase_add_test(tc, test_printf);
    tcase_add_test(tc, test_reset);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(buf_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
