/*
 * test_proctitle.c - Check suite for src/common/proctitle.c: the title
 * area spans argv's strings and the environment strings right behind them,
 * both are moved to the heap first (argv[i], environ, getenv and
 * program_invocation_name keep their values), titles are NUL-padded and
 * truncated to the area. Each test runs in its own process (Check forks).
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/proctitle.h"

extern char **environ;

/* What the kernel lays out at exec: argv's strings, then the environment's. */
static char block[] = "prog\0-c\0file.yaml\0A=1\0BB=22";
static char *argv_v[4], *env_v[3];

static void layout(int env_adjacent)
{
    static char elsewhere[] = "A=1";
    argv_v[0] = block;
    argv_v[1] = block + 5;
    argv_v[2] = block + 8;
    argv_v[3] = NULL;
    env_v[0] = env_adjacent ? block + 18 : elsewhere;
    env_v[1] = block + 22;
    env_v[2] = NULL;
    environ = env_v;
}

static int in_block(const char *p)
{
    return p >= block && p < block + sizeof block;
}

START_TEST(test_strings_moved_first)
{
    layout(1);
    ck_assert_int_eq(proctitle_init(3, argv_v), 0);
    ck_assert_str_eq(argv_v[0], "prog");
    ck_assert_str_eq(argv_v[1], "-c");
    ck_assert_str_eq(argv_v[2], "file.yaml");
    for (int i = 0; i < 3; i++)
        ck_assert(!in_block(argv_v[i]));
    ck_assert_ptr_ne(environ, env_v);
    ck_assert(!in_block(environ[0]) && !in_block(environ[1]));
    ck_assert_ptr_null(environ[2]);
    ck_assert_str_eq(getenv("A"), "1");
    ck_assert_str_eq(getenv("BB"), "22");
    ck_assert_str_eq(program_invocation_name, "prog");
    ck_assert_int_eq(setenv("C", "3", 1), 0); /* the copied environment is a normal one */
    ck_assert_str_eq(getenv("C"), "3");
    ck_assert_int_eq(unsetenv("A"), 0); /* (and LeakSanitizer sees no lost string) */
    ck_assert_ptr_null(getenv("A"));
    ck_assert_int_eq(proctitle_init(3, argv_v), 0); /* once only */
}
END_TEST

START_TEST(test_title_fills_area_with_padding)
{
    layout(1);
    ck_assert_int_eq(proctitle_init(3, argv_v), 0);
    proctitle_set("pagid: %s", "x");
    ck_assert_str_eq(block, "pagid: x");
    for (size_t i = strlen("pagid: x"); i < sizeof block; i++)
        ck_assert_msg(block[i] == '\0', "byte %zu is %d", i, block[i]);
    /* The copies are untouched by the title. */
    ck_assert_str_eq(argv_v[2], "file.yaml");
    ck_assert_str_eq(getenv("BB"), "22");
}
END_TEST

START_TEST(test_title_truncated)
{
    layout(1);
    ck_assert_int_eq(proctitle_init(3, argv_v), 0);
    proctitle_set("%s", "pagid: a title far longer than the whole area of argv and environ");
    ck_assert_uint_eq(strlen(block), sizeof block - 1);
    ck_assert(strncmp(block, "pagid: a title far", 18) == 0);
}
END_TEST

START_TEST(test_area_stops_at_a_gap)
{
    /* The first environment string lives elsewhere: only argv's bytes are ours. */
    layout(0);
    ck_assert_int_eq(proctitle_init(3, argv_v), 0);
    proctitle_set("%s", "pagid: longer than argv alone");
    ck_assert_uint_eq(strlen(block), 17); /* "prog -c file.yaml" is 18 bytes with its NUL */
    ck_assert_str_eq(block + 18, "A=1");  /* not ours, not touched */
}
END_TEST

START_TEST(test_master_and_worker_titles)
{
    static char big[256] = "/usr/sbin/pagid\0-c\0/etc/pagid/pagid.yaml\0HOME=/root";
    static char *av[] = {big, big + 16, big + 19, NULL};
    static char *ev[] = {big + 41, NULL};
    memset(big + 51, 'x', sizeof big - 52); /* HOME's value runs to the end */
    environ = ev;
    ck_assert_int_eq(proctitle_init(3, av), 0);
    proctitle_master(NULL);
    ck_assert_str_eq(big, "pagid: master process /usr/sbin/pagid -c /etc/pagid/pagid.yaml");
    proctitle_master("old, upgrading");
    ck_assert_str_eq(big, "pagid: master process (old, upgrading) /usr/sbin/pagid -c "
                          "/etc/pagid/pagid.yaml");
    proctitle_worker(2, 3, 0);
    ck_assert_str_eq(big, "pagid: worker 2 (generation 3)");
    proctitle_worker(2, 3, 1);
    ck_assert_str_eq(big, "pagid: worker 2 (generation 3, draining)");
}
END_TEST

START_TEST(test_no_init_no_write)
{
    layout(1);
    proctitle_set("pagid: nothing");
    proctitle_master(NULL);
    ck_assert_str_eq(block, "prog");
    ck_assert_int_eq(proctitle_init(0, argv_v), -1);
}
END_TEST

static Suite *proctitle_suite(void)
{
    Suite *s = suite_create("proctitle");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_strings_moved_first);
    tcase_add_test(tc, test_title_fills_area_with_padding);
    tcase_add_test(tc, test_title_truncated);
    tcase_add_test(tc, test_area_stops_at_a_gap);
    tcase_add_test(tc, test_master_and_worker_titles);
    tcase_add_test(tc, test_no_init_no_write);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(proctitle_suite());
    /* Every test needs a fresh process: init happens once per process. */
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
