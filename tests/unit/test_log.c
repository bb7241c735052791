/*
 * test_log.c - Check suite for src/common/log.c: log_open_append, the way
 * every log file is opened, and its rules for root in a directory other
 * users can write (no symlink followed, no hard link, no FIFO: a planted
 * name never redirects root's appends). The root cases run when the suite
 * does.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"

static char dir[64], path[128], target[128];

static void setup(void)
{
    strcpy(dir, "/tmp/pagid-logtest-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/error.log", dir);
    snprintf(target, sizeof target, "%s/target", dir);
}

static void teardown(void)
{
    unlink(path);
    unlink(target);
    rmdir(dir);
}

static void write_file(const char *p, const char *text)
{
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static char *read_file(const char *p, char *buf, size_t len)
{
    FILE *f = fopen(p, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

START_TEST(creates_and_appends)
{
    ck_assert_int_eq(log_open_append(path, 0, 0), -1); /* create 0: nothing made */
    ck_assert_int_eq(errno, ENOENT);
    ck_assert_int_eq(access(path, F_OK), -1);
    int fd = log_open_append(path, 1, 0);
    ck_assert_int_ge(fd, 0);
    ck_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    ck_assert(fcntl(fd, F_GETFL) & O_APPEND);
    ck_assert(!(fcntl(fd, F_GETFL) & O_NONBLOCK));
    ck_assert_int_eq(write(fd, "a\n", 2), 2);
    close(fd);
    fd = log_open_append(path, 0, O_NONBLOCK);
    ck_assert_int_ge(fd, 0);
    ck_assert(fcntl(fd, F_GETFL) & O_NONBLOCK);
    ck_assert_int_eq(write(fd, "b\n", 2), 2);
    close(fd);
    char buf[64];
    ck_assert_str_eq(read_file(path, buf, sizeof buf), "a\nb\n");
}
END_TEST

/* Root, in a directory anyone can write: a planted name is refused. */
START_TEST(root_refuses_planted_names)
{
    if (geteuid() != 0)
        return;
    ck_assert_int_eq(chmod(dir, 01777), 0); /* like /tmp, or a log dir owned by a worker user */
    write_file(target, "precious\n");

    ck_assert_int_eq(symlink(target, path), 0);
    ck_assert_int_eq(log_open_append(path, 1, 0), -1);
    ck_assert_int_eq(errno, ELOOP);
    ck_assert_ptr_nonnull(strstr(log_open_strerror(ELOOP), "symbolic link"));
    unlink(path);

    ck_assert_int_eq(link(target, path), 0);
    ck_assert_int_eq(log_open_append(path, 1, 0), -1);
    ck_assert_int_eq(errno, EMLINK);
    unlink(path);

    ck_assert_int_eq(mkfifo(path, 0600), 0);
    ck_assert_int_eq(log_open_append(path, 1, 0), -1); /* and it did not block */
    ck_assert(errno == EINVAL || errno == ENXIO);
    unlink(path);

    char buf[64];
    ck_assert_str_eq(read_file(target, buf, sizeof buf), "precious\n");

    /* A plain file there is fine, and the fd blocks as asked. */
    int fd = log_open_append(path, 1, 0);
    ck_assert_int_ge(fd, 0);
    ck_assert(!(fcntl(fd, F_GETFL) & O_NONBLOCK));
    close(fd);
}
END_TEST

/* Root, in a directory only root can write: a symlink is the operator's own
 * (e.g. /dev/stdout) and is followed. */
START_TEST(root_follows_own_symlinks)
{
    if (geteuid() != 0)
        return;
    ck_assert_int_eq(chmod(dir, 0755), 0);
    write_file(target, "");
    ck_assert_int_eq(symlink(target, path), 0);
    int fd = log_open_append(path, 1, 0);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "x\n", 2), 2);
    close(fd);
    char buf[64];
    ck_assert_str_eq(read_file(target, buf, sizeof buf), "x\n");
}
END_TEST

/* Root: a link planted in a directory others can write sends no append
 * elsewhere, also when it stands for a directory on the way to the file. */
START_TEST(root_refuses_planted_directory_links)
{
    if (geteuid() != 0)
        return;
    char safe[128], sub[128], through[160], victim[160];
    snprintf(safe, sizeof safe, "%s/safe", dir);
    snprintf(sub, sizeof sub, "%s/sub", dir);
    snprintf(through, sizeof through, "%s/sub/x.log", dir);
    snprintf(victim, sizeof victim, "%s/safe/x.log", dir);
    ck_assert_int_eq(mkdir(safe, 0755), 0);
    ck_assert_int_eq(chmod(dir, 01777), 0);
    ck_assert_int_eq(symlink(safe, sub), 0);
    ck_assert_int_eq(log_open_append(through, 1, 0), -1);
    ck_assert_int_eq(errno, ELOOP);
    ck_assert_int_eq(access(victim, F_OK), -1); /* nothing created through the link */

    /* The same link in a directory only root writes is the operator's own. */
    ck_assert_int_eq(chmod(dir, 0755), 0);
    int fd = log_open_append(through, 1, 0);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(access(victim, F_OK), 0);
    unlink(victim);
    unlink(sub);
    rmdir(safe);
}
END_TEST

static Suite *log_suite(void)
{
    Suite *s = suite_create("log");
    TCase *tc = tcase_create("open_append");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, creates_and_appends);
    tcase_add_test(tc, root_refuses_planted_names);
    tcase_add_test(tc, root_follows_own_symlinks);
    tcase_add_test(tc, root_refuses_planted_directory_links);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(log_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
