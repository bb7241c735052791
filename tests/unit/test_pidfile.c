/*
 * test_pidfile.c - Check suite for src/common/pidfile.c: the pid file is
 * written with mode 0644 whatever the umask, replaces an old one of ours,
 * and is never written through a symlink, a hard link or anything but a
 * regular file (nothing is truncated first); the check pagid -t makes; the
 * strict reader pagid -s uses (digits and one newline, nothing else); and
 * removal only while the file still names us.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/pidfile.h"

static char dir[64], path[128], target[128], oldbin[160];

static void setup(void)
{
    strcpy(dir, "/tmp/pagid-pidtest-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/pagid.pid", dir);
    snprintf(target, sizeof target, "%s/target", dir);
    snprintf(oldbin, sizeof oldbin, "%s.oldbin", path);
}

static void teardown(void)
{
    unlink(path);
    rmdir(path); /* one test puts a directory there */
    unlink(target);
    unlink(oldbin);
    rmdir(dir);
}

static void write_file(const char *p, const char *text)
{
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static const char *read_file(const char *p)
{
    static char buf[128];
    FILE *f = fopen(p, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

START_TEST(writes_pid_mode_0644)
{
    char err[256];
    mode_t old = umask(077);
    int rc = pidfile_write(path, 4242, err, sizeof err);
    umask(old);
    ck_assert_int_eq(rc, 0);
    ck_assert_str_eq(read_file(path), "4242\n");
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_uint_eq(st.st_mode & 07777, 0644);

    /* An old, longer one of ours is replaced whole. */
    write_file(path, "123456789\n");
    ck_assert_int_eq(pidfile_write(path, 7, err, sizeof err), 0);
    ck_assert_str_eq(read_file(path), "7\n");
    ck_assert_int_eq(pidfile_check(path, err, sizeof err), 0);
}
END_TEST

START_TEST(symlink_refused_target_untouched)
{
    char err[256];
    write_file(target, "precious\n");
    ck_assert_int_eq(symlink(target, path), 0);
    ck_assert_int_eq(pidfile_write(path, 4242, err, sizeof err), -1);
    ck_assert_str_eq(err, "is a symbolic link (a pid file is never written through one)");
    ck_assert_str_eq(read_file(target), "precious\n");
    ck_assert_int_eq(pidfile_check(path, err, sizeof err), -1);
    ck_assert_str_eq(err, "is a symbolic link (a pid file is never written through one)");
    ck_assert_int_eq(pidfile_remove(path, 4242), -1);
    ck_assert_int_eq(access(target, F_OK), 0);

    /* Dangling: O_CREAT would have created the target. */
    unlink(target);
    ck_assert_int_eq(pidfile_write(path, 4242, err, sizeof err), -1);
    ck_assert_int_eq(access(target, F_OK), -1);
}
END_TEST

START_TEST(hard_link_and_non_files_refused)
{
    char err[256];
    write_file(target, "precious\n");
    ck_assert_int_eq(link(target, path), 0);
    ck_assert_int_eq(pidfile_write(path, 4242, err, sizeof err), -1);
    ck_assert_str_eq(err, "has other hard links");
    ck_assert_str_eq(read_file(target), "precious\n");
    unlink(path);

    ck_assert_int_eq(mkfifo(path, 0600), 0);
    ck_assert_int_eq(pidfile_write(path, 4242, err, sizeof err), -1); /* without blocking */
    ck_assert_int_eq(pidfile_check(path, err, sizeof err), -1);
    ck_assert_str_eq(err, "is not a regular file");
    unlink(path);

    ck_assert_int_eq(mkdir(path, 0700), 0);
    ck_assert_int_eq(pidfile_write(path, 4242, err, sizeof err), -1);
    ck_assert_int_eq(pidfile_check(path, err, sizeof err), -1);
    ck_assert_str_eq(err, "is not a regular file");
}
END_TEST

/* As root: a file someone else owns (planted in a shared directory) is not ours. */
START_TEST(foreign_owner_refused)
{
    if (geteuid() != 0)
        return;
    char err[256];
    write_file(path, "1\n");
    ck_assert_int_eq(chown(path, 65534, 65534), 0);
    ck_assert_int_eq(pidfile_write(path, 4242, err, sizeof err), -1);
    ck_assert_str_eq(err, "belongs to uid 65534, not to this process's uid 0");
    ck_assert_str_eq(read_file(path), "1\n");
}
END_TEST

START_TEST(check_creates_nothing)
{
    char err[256];
    ck_assert_int_eq(pidfile_check(path, err, sizeof err), 0);
    ck_assert_int_eq(access(path, F_OK), -1);
    char missing[160];
    snprintf(missing, sizeof missing, "%s/no/such.pid", dir);
    ck_assert_int_eq(pidfile_check(missing, err, sizeof err), -1);
    char want[256];
    snprintf(want, sizeof want, "directory %s/no: No such file or directory", dir);
    ck_assert_str_eq(err, want);
}
END_TEST

START_TEST(remove_only_our_own)
{
    char err[256];
    ck_assert_int_eq(pidfile_write(path, 4242, err, sizeof err), 0);
    ck_assert_int_eq(pidfile_remove(path, 4243), -1); /* a newer master's by now */
    ck_assert_int_eq(access(path, F_OK), 0);
    ck_assert_int_eq(pidfile_remove(path, 4242), 0);
    ck_assert_int_eq(access(path, F_OK), -1);
}
END_TEST

START_TEST(test_read_valid)
{
    static const struct {
        const char *text;
        long pid;
    } ok[] = {
        {"1234\n", 1234}, {"1234", 1234}, {"0\n", 0}, {"1\n", 1}, {"2147483647\n", 2147483647}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        pid_t pid = -1;
        write_file(path, ok[i].text);
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
        write_file(path, bad[i]);
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
    write_file(path, "100\n");
    write_file(oldbin, "200\n");
    ck_assert_int_eq(pidfile_remove(path, 101), -1);
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
    TCase *tc = tcase_create("pidfile");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, writes_pid_mode_0644);
    tcase_add_test(tc, symlink_refused_target_untouched);
    tcase_add_test(tc, hard_link_and_non_files_refused);
    tcase_add_test(tc, foreign_owner_refused);
    tcase_add_test(tc, check_creates_nothing);
    tcase_add_test(tc, remove_only_our_own);
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
