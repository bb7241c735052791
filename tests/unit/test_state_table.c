/*
 * test_state_table.c - Check suite for src/worker/state_table.c: set/get,
 * copy on write (a reference taken before a set keeps the old contents),
 * replacing a key, NULL tables and keys, and refcounting (leaks show under ASan).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/core/state_table.h"

static int v1, v2, v3;

START_TEST(null_table)
{
    ck_assert_ptr_null(state_table_get(NULL, "k"));
    ck_assert_ptr_null(state_table_ref(NULL));
    state_table_unref(NULL); /* no-op */
}
END_TEST

START_TEST(set_get)
{
    state_table *t = state_table_set(NULL, "db", &v1);
    ck_assert_ptr_nonnull(t);
    t = state_table_set(t, "cache", &v2);
    ck_assert_ptr_nonnull(t);
    ck_assert_ptr_eq(state_table_get(t, "db"), &v1);
    ck_assert_ptr_eq(state_table_get(t, "cache"), &v2);
    ck_assert_ptr_null(state_table_get(t, "missing"));
    ck_assert_ptr_null(state_table_get(t, "d"));
    ck_assert_ptr_null(state_table_get(t, "dbx"));
    ck_assert_ptr_null(state_table_get(t, NULL));
    /* A NULL value is a value. */
    t = state_table_set(t, "nothing", NULL);
    ck_assert_ptr_nonnull(t);
    ck_assert_ptr_null(state_table_get(t, "nothing"));
    ck_assert_ptr_eq(state_table_get(t, "db"), &v1);
    state_table_unref(t);
}
END_TEST

START_TEST(keys_are_copied)
{
    char key[8];
    strcpy(key, "name");
    state_table *t = state_table_set(NULL, key, &v1);
    strcpy(key, "XXXX");
    ck_assert_ptr_eq(state_table_get(t, "name"), &v1);
    ck_assert_ptr_null(state_table_get(t, "XXXX"));
    state_table_unref(t);
}
END_TEST

START_TEST(replace_existing_key)
{
    state_table *t = state_table_set(NULL, "a", &v1);
    t = state_table_set(t, "b", &v2);
    t = state_table_set(t, "a", &v3);
    ck_assert_ptr_nonnull(t);
    ck_assert_ptr_eq(state_table_get(t, "a"), &v3);
    ck_assert_ptr_eq(state_table_get(t, "b"), &v2);
    /* Replacing again, many times: no growth, no duplicates. */
    for (int i = 0; i < 100; i++)
        t = state_table_set(t, "b", (i & 1) ? &v1 : &v3);
    ck_assert_ptr_eq(state_table_get(t, "b"), &v1);
    ck_assert_ptr_eq(state_table_get(t, "a"), &v3);
    state_table_unref(t);
}
END_TEST

START_TEST(copy_on_write)
{
    state_table *t = state_table_set(NULL, "a", &v1);
    state_table *old = state_table_ref(t); /* e.g. a request scope's snapshot */
    ck_assert_ptr_eq(old, t);
    t = state_table_set(t, "a", &v2); /* consumes one reference of the old table */
    t = state_table_set(t, "new", &v3);
    ck_assert_ptr_ne(t, old);
    ck_assert_ptr_eq(state_table_get(old, "a"), &v1);
    ck_assert_ptr_null(state_table_get(old, "new"));
    ck_assert_ptr_eq(state_table_get(t, "a"), &v2);
    ck_assert_ptr_eq(state_table_get(t, "new"), &v3);
    /* And the other way: the snapshot's writer does not touch the original. */
    state_table *mine = state_table_set(state_table_ref(t), "private", &v1);
    ck_assert_ptr_ne(mine, t);
    ck_assert_ptr_eq(state_table_get(mine, "private"), &v1);
    ck_assert_ptr_null(state_table_get(t, "private"));
    ck_assert_ptr_eq(state_table_get(mine, "a"), &v2);
    state_table_unref(mine);
    state_table_unref(old);
    /* t survived both unrefs of other tables. */
    ck_assert_ptr_eq(state_table_get(t, "new"), &v3);
    state_table_unref(t);
}
END_TEST

START_TEST(refcounting)
{
    state_table *t = state_table_set(NULL, "k", &v1);
    state_table *r1 = state_table_ref(t), *r2 = state_table_ref(t);
    state_table_unref(r1);
    state_table_unref(t);
    /* Still alive through r2 (ASan would flag a use after free). */
    ck_assert_ptr_eq(state_table_get(r2, "k"), &v1);
    state_table_unref(r2);
}
END_TEST

START_TEST(many_keys)
{
    state_table *t = NULL;
    static int vals[200];
    char key[16];
    for (int i = 0; i < 200; i++) {
        snprintf(key, sizeof key, "key%d", i);
        t = state_table_set(t, key, &vals[i]);
        ck_assert_ptr_nonnull(t);
    }
    for (int i = 0; i < 200; i++) {
        snprintf(key, sizeof key, "key%d", i);
        ck_assert_ptr_eq(state_table_get(t, key), &vals[i]);
    }
    state_table_unref(t);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("state_table");
    TCase *t = tcase_create("core");
    tcase_add_test(t, null_table);
    tcase_add_test(t, set_get);
    tcase_add_test(t, keys_are_copied);
    tcase_add_test(t, replace_existing_key);
    tcase_add_test(t, copy_on_write);
    tcase_add_test(t, refcounting);
    tcase_add_test(t, many_keys);
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
