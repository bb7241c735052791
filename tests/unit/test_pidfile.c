/*
 * test_pidfile.c - Check suite for src/common/pidfile.c: the strict reader
 * (digits and one newline, nothing else) and removal that only ever
 * deletes a pid file still naming the caller.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/pidfile.h"

static char dir[64], path[128], oldbin[160];

static void setup(void)
{
    strcpy(dir, "/tmp/pagid-pidfile-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/p.pid", dir);
    snprintf(oldbin, sizeof oldbin, "%s/p.pid.oldbin", dir);
}

static void teardown(void)
{
    unlink(path);
    unlink(oldbin);
    rmdir(dir);
}

static void put(const char *p, const char *text)
{
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

START_TEST(test_read_valid)
{
    static const struct {
        const char *text;
        long pid;
    } ok[] = {
        {"1234\n", 1234}, {"1234", 1234}, {"0\n", 0}, {"1\n", 1}, {"2147483647\n", 2147483647}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        pid_t pid = -1;
        put(path, ok[i].text);
        ck_assert_int_eq(pidfile_read(path, &pid), 0);
        ck_assert_int_eq(pid, ok[i].pid);
    }
}
END_TEST

START_TEST(test_read_invalid)
{
    static const char *const bad[] = {"",     "\n",   "\n1",  " 1\n", "1 \n",         "1\n\n",
                                      "-1\n", "+1\n", "0x10", "12a",  "2147483648\n", "99999999999",
                                      "1\r\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pid_t pid = -1;
        put(path, bad[i]);
        errno = 0;
        ck_assert_msg(pidfile_read(path, &pid) == -1 && errno == EINVAL, "'%s' accepted", bad[i]);
        ck_assert_int_eq(pid, -1);
    }
    unlink(path);
    ck_assert_int_eq(pidfile_read(path, &(pid_t){0}), -1);
    ck_assert_int_eq(errno, ENOENT);
    ck_assert_int_eq(pidfile_read(dir, &(pid_t){0}), -1); /* a directory: read fails */
    ck_assert_int_eq(errno, EISDIR);
}
END_TEST

START_TEST(test_remove_only_own)
{
    put(path, "100\n");
    put(oldbin, "200\n");
    ck_assert_int_eq(pidfile_unlink_if(path, 101), -1);
    ck_assert_int_eq(access(path, F_OK), 0);
    /* After a handover: the pid file is the new master's, .oldbin gone already. */
    pidfile_remove_own(path, 200);
    ck_assert_int_eq(access(path, F_OK), 0);
    ck_assert_int_eq(access(oldbin, F_OK), -1);
    pidfile_remove_own(path, 100);
    ck_assert_int_eq(access(path, F_OK), -1);
    pidfile_remove_own(path, 100); /* nothing left: harmless */
}
END_TEST

static Suite *pidfile_suite(void)
{
    Suite *s = suite_create("pidfile");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_read_valid);
    tcase_add_test(tc, test_read_invalid);
    tcase_add_test(tc, test_remove_only_own);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(pidfile_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
