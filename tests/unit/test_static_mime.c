/*
 * test_static_mime.c - Check suite for src/worker/apps/static_mime.c: a
 * mime.types file (comments, several extensions, case, first mapping wins),
 * the built-in fallback, the charset on text types, and names without extensions.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "worker/apps/static_mime.h"

static const char *look(const static_mime *m, const char *name)
{
    return static_mime_lookup(m, name, strlen(name));
}

START_TEST(test_file)
{
    char path[] = "/tmp/pagid-mime-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    FILE *f = fdopen(fd, "w");
    fputs("# comment line\n"
          "\n"
          "text/x-one\tone uno   # trailing comment\n"
          "application/x-two two ONE\n"
          "image/x-noext\n"
          "notatype foo\n"
          "application/x-long "
          "abcdefghijklmnopqrstuvwxyzabcdefghijkl\n",
          f);
    fclose(f);
    static_mime *m = static_mime_load(path);
    unlink(path);
    ck_assert_ptr_nonnull(m);
    ck_assert_uint_eq(static_mime_file_count(m), 3); /* one, uno, two */
    ck_assert_str_eq(look(m, "a.one"), "text/x-one; charset=utf-8");
    ck_assert_str_eq(look(m, "dir/a.UNO"), "text/x-one; charset=utf-8");
    ck_assert_str_eq(look(m, "x.two"), "application/x-two");
    ck_assert_str_eq(look(m, "x.foo"), STATIC_MIME_DEFAULT);
    /* not in the file: the built-in table still answers */
    ck_assert_str_eq(look(m, "index.html"), "text/html; charset=utf-8");
    static_mime_free(m);
}
END_TEST

START_TEST(test_builtin_only)
{
    static_mime *m = static_mime_load("/nonexistent-pagid/mime.types");
    ck_assert_ptr_nonnull(m);
    ck_assert_uint_eq(static_mime_file_count(m), 0);
    ck_assert_str_eq(look(m, "a.html"), "text/html; charset=utf-8");
    ck_assert_str_eq(look(m, "a.CSS"), "text/css; charset=utf-8");
    ck_assert_str_eq(look(m, "a.png"), "image/png");
    ck_assert_str_eq(look(m, "a.json"), "application/json");
    ck_assert_str_eq(look(m, "archive.tar.gz"), "application/gzip");
    ck_assert_str_eq(look(m, "README"), STATIC_MIME_DEFAULT);
    ck_assert_str_eq(look(m, "dir.d/README"), STATIC_MIME_DEFAULT);
    ck_assert_str_eq(look(m, "trailing."), STATIC_MIME_DEFAULT);
    ck_assert_str_eq(look(m, "a.unknownext"), STATIC_MIME_DEFAULT);
    static_mime_free(m);
    ck_assert_str_eq(static_mime_lookup(NULL, "a.txt", 5), "text/plain; charset=utf-8");
}
END_TEST

START_TEST(test_system_file)
{
    if (access(STATIC_MIME_SYSTEM_FILE, R_OK) != 0)
        return;
    static_mime *m = static_mime_load(STATIC_MIME_SYSTEM_FILE);
    ck_assert_ptr_nonnull(m);
    ck_assert_uint_gt(static_mime_file_count(m), 100);
    ck_assert_str_eq(look(m, "x.html"), "text/html; charset=utf-8");
    ck_assert_str_eq(look(m, "x.png"), "image/png");
    ck_assert_str_eq(look(m, "x.pdf"), "application/pdf");
    static_mime_free(m);
}
END_TEST

static Suite *static_mime_suite(void)
{
    Suite *s = suite_create("static_mime");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_file);
    tcase_add_test(tc, test_builtin_only);
    tcase_add_test(tc, test_system_file);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(static_mime_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
