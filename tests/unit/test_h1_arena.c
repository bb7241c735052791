/*
 * test_h1_arena.c - Check suite for src/worker/h1_arena.c: appends keep their
 * bytes and offsets, growth doubles but never past grow_limit, then grows
 * only to what is needed, and nothing goes past the hard max.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "worker/http1/h1_arena.h"

START_TEST(empty_holds_nothing)
{
    h1_arena a;
    h1_arena_init(&a, 4096, 8192);
    ck_assert_ptr_null(a.data);
    ck_assert_int_eq(h1_arena_put(&a, "x", 0), 0);
    ck_assert_uint_eq(a.len, 0);
    h1_arena_free(&a);
    ck_assert_ptr_null(a.data);
}
END_TEST

START_TEST(put_keeps_bytes)
{
    h1_arena a;
    h1_arena_init(&a, 1 << 20, 0);
    char want[10000];
    for (size_t i = 0; i < sizeof want; i++)
        want[i] = (char)(i * 7);
    for (size_t i = 0; i < sizeof want; i += 100)
        ck_assert_int_eq(h1_arena_put(&a, want + i, 100), 0);
    ck_assert_uint_eq(a.len, sizeof want);
    ck_assert_int_eq(memcmp(a.data, want, sizeof want), 0);
    h1_arena_reset(&a);
    ck_assert_uint_eq(a.len, 0);
    ck_assert_uint_ge(a.cap, sizeof want); /* reset keeps the memory */
    h1_arena_free(&a);
    ck_assert_uint_eq(a.cap, 0);
}
END_TEST

START_TEST(growth_clamped_at_limit)
{
    /* 30000 bytes a byte at a time against a 33000 limit: doubling would
     * reach 32768, the next step would be 65536: the clamp gives 33000. */
    h1_arena a;
    h1_arena_init(&a, 33000, 100000);
    for (size_t i = 0; i < 30000; i++)
        ck_assert_int_eq(h1_arena_put(&a, "y", 1), 0);
    ck_assert_uint_le(a.cap, 32768);
    for (size_t i = 0; i < 3000; i++)
        ck_assert_int_eq(h1_arena_put(&a, "y", 1), 0);
    ck_assert_uint_eq(a.cap, 33000);
    /* Past the limit: exact growth (rounded), never another doubling. */
    ck_assert_int_eq(h1_arena_put(&a, "z", 1), 0);
    ck_assert_uint_ge(a.cap, 33001);
    ck_assert_uint_le(a.cap, 33001 + 256);
    h1_arena_free(&a);
}
END_TEST

START_TEST(max_is_hard)
{
    h1_arena a;
    h1_arena_init(&a, 1000, 2000);
    char big[2001];
    memset(big, 'q', sizeof big);
    ck_assert_int_eq(h1_arena_put(&a, big, 2000), 0);
    ck_assert_uint_le(a.cap, 2000);
    ck_assert_int_eq(h1_arena_put(&a, "x", 1), -1);
    ck_assert_uint_eq(a.len, 2000); /* a refused put changes nothing */
    ck_assert_int_eq(h1_arena_reserve(&a, (size_t)-1), -1);
    h1_arena_free(&a);
}
END_TEST

START_TEST(small_limit)
{
    /* A limit below the first allocation: the first block is the limit. */
    h1_arena a;
    h1_arena_init(&a, 100, 100);
    ck_assert_int_eq(h1_arena_put(&a, "abc", 3), 0);
    ck_assert_uint_eq(a.cap, 100);
    h1_arena_free(&a);
}
END_TEST

static Suite *arena_suite(void)
{
    Suite *s = suite_create("h1_arena");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, empty_holds_nothing);
    tcase_add_test(tc, put_keeps_bytes);
    tcase_add_test(tc, growth_clamped_at_limit);
    tcase_add_test(tc, max_is_hard);
    tcase_add_test(tc, small_limit);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(arena_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
