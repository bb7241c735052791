/*
 * test_static_path.c - Check suite for src/worker/apps/static_path.c:
 * normalisation (dot segments, empty segments, NUL, hidden names, the root)
 * and containment of opens, through openat2 and through the fallback walk,
 * against a scratch tree with symlinks inside and out.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "worker/apps/static_path.h"

static static_path_rc norm(const char *p, char *out, int *dir_form)
{
    return static_path_normalize(p, strlen(p), out, dir_form);
}

static void expect_norm(const char *in, const char *want, int want_dir)
{
    char out[STATIC_PATH_MAX];
    int d = -1;
    ck_assert_msg(norm(in, out, &d) == STATIC_PATH_OK, "normalize(%s) failed", in);
    ck_assert_msg(strcmp(out, want) == 0, "normalize(%s) = '%s', want '%s'", in, out, want);
    ck_assert_msg(d == want_dir, "normalize(%s) dir_form %d, want %d", in, d, want_dir);
}

START_TEST(test_normalize_plain)
{
    expect_norm("/", "", 1);
    expect_norm("", "", 1);
    expect_norm("/a.txt", "a.txt", 0);
    expect_norm("/a/b/c.html", "a/b/c.html", 0);
    expect_norm("/a/b/", "a/b", 1);
    expect_norm("//a///b//", "a/b", 1);
    expect_norm("/a/./b", "a/b", 0);
    expect_norm("/a/.", "a", 1);
    expect_norm("/a/b/../c", "a/c", 0);
    expect_norm("/a/b/..", "a", 1);
    expect_norm("/a/..", "", 1);
    expect_norm("/a\\..\\b", "a\\..\\b", 0); /* backslashes are ordinary bytes */
    expect_norm("/a..b/c", "a..b/c", 0);
}
END_TEST

START_TEST(test_normalize_rejects)
{
    char out[STATIC_PATH_MAX];
    int d;
    ck_assert_int_eq(norm("/..", out, &d), STATIC_PATH_BAD);
    ck_assert_int_eq(norm("/../etc/passwd", out, &d), STATIC_PATH_BAD);
    ck_assert_int_eq(norm("/a/../../etc", out, &d), STATIC_PATH_BAD);
    ck_assert_int_eq(norm("/a/../..", out, &d), STATIC_PATH_BAD);
    ck_assert_int_eq(static_path_normalize("/a\0b", 4, out, &d), STATIC_PATH_BAD);
    ck_assert_int_eq(norm("/.git/config", out, &d), STATIC_PATH_HIDDEN);
    ck_assert_int_eq(norm("/a/.env", out, &d), STATIC_PATH_HIDDEN);
    ck_assert_int_eq(norm("/...", out, &d), STATIC_PATH_HIDDEN);
    /* Judged after normalisation: the hidden segment is gone. */
    ck_assert_int_eq(norm("/.x/../y", out, &d), STATIC_PATH_OK);
    ck_assert_str_eq(out, "y");
    char *big = malloc(STATIC_PATH_MAX + 10);
    big[0] = '/';
    memset(big + 1, 'a', STATIC_PATH_MAX + 5);
    big[STATIC_PATH_MAX + 6] = '\0';
    ck_assert_int_eq(norm(big, out, &d), STATIC_PATH_TOOLONG);
    free(big);
}
END_TEST

/* ---- opens against a scratch tree ---- */

static char root[128], outside[128];

static void mkfile(const char *dir, const char *name, const char *text)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static void at(const char *dir, const char *name, char *out, size_t n)
{
    snprintf(out, n, "%s/%s", dir, name);
}

static void setup_tree(void)
{
    char p[512], q[512];
    strcpy(root, "/tmp/pagid-spath-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(root));
    strcpy(outside, "/tmp/pagid-spath-out-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(outside));
    mkfile(outside, "secret.txt", "secret\n");
    mkfile(root, "a.txt", "A\n");
    at(root, "sub", p, sizeof p);
    ck_assert_int_eq(mkdir(p, 0755), 0);
    mkfile(p, "b.txt", "B\n");
    /* inside links: relative to a file, to a dir, and a relative climb that stays in */
    at(root, "in_file", p, sizeof p);
    ck_assert_int_eq(symlink("a.txt", p), 0);
    at(root, "in_dir", p, sizeof p);
    ck_assert_int_eq(symlink("sub", p), 0);
    at(root, "sub/up", p, sizeof p);
    ck_assert_int_eq(symlink("../a.txt", p), 0);
    /* outside links: absolute, relative climb, absolute to a dir */
    at(root, "out_abs", p, sizeof p);
    at(outside, "secret.txt", q, sizeof q);
    ck_assert_int_eq(symlink(q, p), 0);
    at(root, "out_rel", p, sizeof p);
    ck_assert_int_eq(symlink("../../etc/passwd", p), 0);
    at(root, "etc", p, sizeof p);
    ck_assert_int_eq(symlink("/etc", p), 0);
    at(root, "sub/deep_out", p, sizeof p);
    ck_assert_int_eq(symlink("../../", p), 0);
    at(root, "loop", p, sizeof p);
    ck_assert_int_eq(symlink("loop", p), 0);
    /* links to hidden files: the rule is on what is opened, not on the name asked for */
    mkfile(root, ".env", "SECRET=1\n");
    at(root, ".git", p, sizeof p);
    ck_assert_int_eq(mkdir(p, 0755), 0);
    mkfile(p, "config", "[core]\n");
    at(root, "env_link", p, sizeof p);
    ck_assert_int_eq(symlink(".env", p), 0);
    at(root, "sub/env_up", p, sizeof p);
    ck_assert_int_eq(symlink("../.env", p), 0);
    at(root, "git_link", p, sizeof p);
    ck_assert_int_eq(symlink(".git", p), 0);
    mkfile(outside, ".hidden_out", "hidden\n");
    at(root, "out_hidden", p, sizeof p);
    at(outside, ".hidden_out", q, sizeof q);
    ck_assert_int_eq(symlink(q, p), 0);
}

static void rm_tree(void)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", root, outside);
    ck_assert_int_eq(system(cmd), 0);
}

static int try_open(static_resolve mode, int follow, const char *rel, char *got, size_t n)
{
    static_root r;
    const char *err = NULL;
    ck_assert_int_eq(static_root_open(&r, root, follow, mode, &err), 0);
    int fd = static_open(&r, rel);
    if (fd >= 0 && got) {
        ssize_t k = read(fd, got, n - 1);
        got[k > 0 ? k : 0] = '\0';
    }
    if (fd >= 0)
        close(fd);
    static_root_close(&r);
    return fd >= 0 ? 0 : fd;
}

static void check_containment(static_resolve mode)
{
    char got[64];
    ck_assert_int_eq(try_open(mode, 0, "a.txt", got, sizeof got), 0);
    ck_assert_str_eq(got, "A\n");
    ck_assert_int_eq(try_open(mode, 0, "sub/b.txt", got, sizeof got), 0);
    ck_assert_str_eq(got, "B\n");
    ck_assert_int_eq(try_open(mode, 0, "", NULL, 0), 0);
    ck_assert_int_eq(try_open(mode, 0, "sub", NULL, 0), 0);
    /* links that stay inside are followed */
    ck_assert_int_eq(try_open(mode, 0, "in_file", got, sizeof got), 0);
    ck_assert_str_eq(got, "A\n");
    ck_assert_int_eq(try_open(mode, 0, "in_dir/b.txt", got, sizeof got), 0);
    ck_assert_str_eq(got, "B\n");
    ck_assert_int_eq(try_open(mode, 0, "sub/up", got, sizeof got), 0);
    ck_assert_str_eq(got, "A\n");
    /* links out are refused */
    ck_assert_int_lt(try_open(mode, 0, "out_abs", NULL, 0), 0);
    ck_assert_int_lt(try_open(mode, 0, "out_rel", NULL, 0), 0);
    ck_assert_int_lt(try_open(mode, 0, "etc/passwd", NULL, 0), 0);
    ck_assert_int_lt(try_open(mode, 0, "etc", NULL, 0), 0);
    ck_assert_int_lt(try_open(mode, 0, "sub/deep_out/etc", NULL, 0), 0);
    ck_assert_int_eq(try_open(mode, 0, "loop", NULL, 0), -ELOOP);
    ck_assert_int_eq(try_open(mode, 0, "missing", NULL, 0), -ENOENT);
    ck_assert_int_eq(try_open(mode, 0, "a.txt/x", NULL, 0), -ENOTDIR);
    /* links to hidden files and into hidden directories: as if absent */
    ck_assert_int_eq(try_open(mode, 0, "env_link", NULL, 0), -ENOENT);
    ck_assert_int_eq(try_open(mode, 0, "sub/env_up", NULL, 0), -ENOENT);
    ck_assert_int_eq(try_open(mode, 0, "git_link", NULL, 0), -ENOENT);
    ck_assert_int_eq(try_open(mode, 0, "git_link/config", NULL, 0), -ENOENT);
    ck_assert_int_lt(try_open(mode, 0, "out_hidden", NULL, 0), 0);
}

START_TEST(test_open_walk)
{
    setup_tree();
    check_containment(STATIC_RESOLVE_WALK);
    rm_tree();
}
END_TEST

START_TEST(test_open_openat2)
{
    if (!static_have_openat2())
        return; /* old kernel: the walk is what runs, tested above */
    setup_tree();
    check_containment(STATIC_RESOLVE_OPENAT2);
    rm_tree();
}
END_TEST

START_TEST(test_open_follow_symlinks)
{
    setup_tree();
    char got[64];
    ck_assert_int_eq(try_open(STATIC_RESOLVE_AUTO, 1, "out_abs", got, sizeof got), 0);
    ck_assert_str_eq(got, "secret\n");
    ck_assert_int_eq(try_open(STATIC_RESOLVE_AUTO, 1, "a.txt", got, sizeof got), 0);
    ck_assert_str_eq(got, "A\n");
    /* Links may lead anywhere, but not to a hidden file, outside or in. */
    ck_assert_int_eq(try_open(STATIC_RESOLVE_AUTO, 1, "out_hidden", NULL, 0), -ENOENT);
    ck_assert_int_eq(try_open(STATIC_RESOLVE_AUTO, 1, "env_link", NULL, 0), -ENOENT);
    ck_assert_int_eq(try_open(STATIC_RESOLVE_AUTO, 1, "git_link/config", NULL, 0), -ENOENT);
    ck_assert_int_eq(try_open(STATIC_RESOLVE_AUTO, 1, "in_dir/b.txt", got, sizeof got), 0);
    ck_assert_str_eq(got, "B\n");
    rm_tree();
}
END_TEST

START_TEST(test_root_missing)
{
    static_root r;
    const char *err = NULL;
    ck_assert_int_eq(static_root_open(&r, "/nonexistent-pagid-dir", 0, STATIC_RESOLVE_AUTO, &err),
                     -1);
    ck_assert_ptr_nonnull(err);
}
END_TEST

static Suite *static_path_suite(void)
{
    Suite *s = suite_create("static_path");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_normalize_plain);
    tcase_add_test(tc, test_normalize_rejects);
    tcase_add_test(tc, test_open_walk);
    tcase_add_test(tc, test_open_openat2);
    tcase_add_test(tc, test_open_follow_symlinks);
    tcase_add_test(tc, test_root_missing);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(static_path_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
