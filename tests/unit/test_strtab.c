/*
 * test_strtab.c - Check suite for src/common/strtab.c: insertion and lookup
 * of byte strings (embedded NUL, empty key), values, growth past many keys,
 * room reserved ahead.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strtab.h"

START_TEST(test_get_add)
{
    strtab t = STRTAB_INIT;
    int added = -1;
    ck_assert_ptr_null(strtab_get(&t, "a", 1, 0, &added));
    ck_assert_int_eq(added, 0);
    size_t *v = strtab_get(&t, "a", 1, 1, &added);
    ck_assert_ptr_nonnull(v);
    ck_assert_int_eq(added, 1);
    ck_assert_uint_eq(*v, 0);
    *v = 42;
    v = strtab_get(&t, "a", 1, 1, &added);
    ck_assert_int_eq(added, 0);
    ck_assert_uint_eq(*v, 42);
    /* Lengths count: "a\0b" and "a" and "" are three keys. */
    ck_assert_ptr_nonnull(strtab_get(&t, "a\0b", 3, 1, &added));
    ck_assert_int_eq(added, 1);
    ck_assert_ptr_nonnull(strtab_get(&t, "", 0, 1, &added));
    ck_assert_int_eq(added, 1);
    ck_assert_uint_eq(t.n, 3);
    strtab_free(&t);
    ck_assert_ptr_null(t.slots);
    ck_assert_uint_eq(t.n, 0);
}
END_TEST

START_TEST(test_many)
{
    strtab t = STRTAB_INIT;
    char key[32];
    for (size_t i = 0; i < 100000; i++) {
        int n = snprintf(key, sizeof key, "/srv/lib/%zu", i);
        size_t *v = strtab_get(&t, key, (size_t)n, 1, NULL);
        ck_assert_ptr_nonnull(v);
        *v = i;
    }
    ck_assert_uint_eq(t.n, 100000);
    ck_assert_uint_le(2 * t.n, t.cap); /* grown at half load */
    for (size_t i = 0; i < 100000; i += 997) {
        int n = snprintf(key, sizeof key, "/srv/lib/%zu", i);
        size_t *v = strtab_get(&t, key, (size_t)n, 0, NULL);
        ck_assert_ptr_nonnull(v);
        ck_assert_uint_eq(*v, i);
    }
    ck_assert_ptr_null(strtab_get(&t, "/srv/lib/x", 10, 0, NULL));
    strtab_free(&t);
}
END_TEST

START_TEST(test_reserve)
{
    strtab t = STRTAB_INIT;
    char key[32];
    ck_assert_int_eq(strtab_reserve(&t, 0), 0);
    ck_assert_ptr_nonnull(strtab_get(&t, "kept", 4, 1, NULL));
    *strtab_get(&t, "kept", 4, 0, NULL) = 7;
    ck_assert_int_eq(strtab_reserve(&t, 1000), 0);
    size_t cap = t.cap;
    ck_assert_uint_ge(cap, 2 * 1001);
    /* What was there survives the rehash. */
    ck_assert_uint_eq(*strtab_get(&t, "kept", 4, 0, NULL), 7);
    for (size_t i = 0; i < 1000; i++) {
        int n = snprintf(key, sizeof key, "/m%zu", i);
        ck_assert_ptr_nonnull(strtab_get(&t, key, (size_t)n, 1, NULL));
    }
    ck_assert_uint_eq(t.cap, cap); /* no rehash while adding what was reserved */
    ck_assert_int_eq(strtab_reserve(&t, 0), 0);
    ck_assert_uint_eq(t.cap, cap);
    ck_assert_int_eq(strtab_reserve(&t, (size_t)-1), -1);
    strtab_free(&t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("strtab");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_get_add);
    tcase_add_test(tc, test_many);
    tcase_add_test(tc, test_reserve);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
