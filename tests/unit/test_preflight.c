/*
 * test_preflight.c - Check suite for src/master/preflight.c, pagid -t's
 * look at the host: names that do not resolve, addresses that are not
 * this host's, missing socket and log directories, a pid file that is a
 * symlink, each reported at its FILE:LINE:COLUMN; a valid configuration
 * passes and nothing is created or bound on the way.
 */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "master/preflight.h"

static char dir[64];
static char *out_text, *err_text;

static void setup(void)
{
    log_open(NULL, LOG_LVL_ERROR);
    strcpy(dir, "/tmp/pagid-pftest-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    out_text = err_text = NULL;
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
    free(out_text);
    free(err_text);
}

/* Load yaml (as "t.yaml"), finalize, preflight; the error count. The
 * workers' user is root here (-u root's effect), so the worker-side checks
 * run as this process. */
static int preflight(const char *yaml)
{
    pagid_config c;
    config_init_defaults(&c);
    ck_assert_int_eq(config_load_string(&c, yaml, "t.yaml", stderr), 0);
    free(c.user);
    c.user = strdup("root");
    ck_assert_int_eq(config_finalize(&c, stderr), 0);
    size_t ol, el;
    free(out_text);
    free(err_text);
    FILE *out = open_memstream(&out_text, &ol), *err = open_memstream(&err_text, &el);
    int n = preflight_check(&c, out, err);
    fclose(out);
    fclose(err);
    config_free(&c);
    return n;
}

static void has(const char *want)
{
    ck_assert_msg(strstr(err_text, want) != NULL, "missing '%s' in:\n%s", want, err_text);
}

/* How many entries dir holds (nothing may be created). */
static int entries(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", dir);
    FILE *p = popen(cmd, "r");
    int n = -1;
    ck_assert_int_eq(fscanf(p, "%d", &n), 1);
    pclose(p);
    return n;
}

START_TEST(valid_config_passes_and_creates_nothing)
{
    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             "listen: ['127.0.0.1:18080', 'unix:%s/p.sock', 'localhost:18081']\n"
             "error_log: {path: %s/error.log}\n"
             "access_log: {path: %s/access.log}\n"
             "pid_file: %s/p.pid\n",
             dir, dir, dir, dir);
    ck_assert_int_eq(preflight(yaml), 0);
    ck_assert_msg(!strstr(err_text, "error") && !strstr(err_text, "cannot"), "%s", err_text);
    ck_assert_int_eq(entries(), 0);
}
END_TEST

START_TEST(unresolvable_and_foreign_addresses)
{
    ck_assert_int_eq(preflight("listen:\n  - no-such-host.invalid:8080\n"), 1);
    has("t.yaml:2:5: cannot resolve listen address 'no-such-host.invalid:8080': ");

    /* TEST-NET-3: no host has it, unless it binds anything (ip_nonlocal_bind). */
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET};
    inet_pton(AF_INET, "203.0.113.77", &sin.sin_addr);
    int bindable = bind(s, (struct sockaddr *)&sin, sizeof sin) == 0;
    close(s);
    if (bindable)
        return;
    ck_assert_int_eq(preflight("app: hello\nlisten: {address: '203.0.113.77:8080'}\n"), 1);
    has("t.yaml:2:19: listen address '203.0.113.77:8080': 203.0.113.77 is not an address of "
        "this host");
}
END_TEST

/* Who runs the check: the log files are checked as the master that opens them. */
static const char *me(void)
{
    struct passwd *pw = getpwuid(geteuid());
    return pw ? pw->pw_name : "?";
}

START_TEST(missing_directories)
{
    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             "listen: ['unix:%s/a/p.sock']\n"
             "error_log:\n  path: %s/b/error.log\n"
             "access_log: {path: %s/c/access.log}\n"
             "pid_file: %s/d/p.pid\n",
             dir, dir, dir, dir);
    ck_assert_int_eq(preflight(yaml), 4);
    char want[512];
    snprintf(want, sizeof want,
             "t.yaml:1:10: listen address 'unix:%s/a/p.sock': directory %s/a: No such file or "
             "directory",
             dir, dir);
    has(want);
    snprintf(want, sizeof want,
             "t.yaml:3:9: error_log.path %s/b/error.log: cannot open for append as user %s: "
             "directory %s/b: No such file or directory",
             dir, me(), dir);
    has(want);
    snprintf(want, sizeof want,
             "t.yaml:4:20: access_log.path %s/c/access.log: cannot open for append as user %s: "
             "directory %s/c: ",
             dir, me(), dir);
    has(want);
    snprintf(want, sizeof want, "t.yaml:5:11: pid_file %s/d/p.pid: directory %s/d: ", dir, dir);
    has(want);
    ck_assert_int_eq(entries(), 0);
}
END_TEST

START_TEST(files_in_the_way)
{
    char yaml[1024], p[128];
    snprintf(p, sizeof p, "%s/p.pid", dir);
    ck_assert_int_eq(symlink("/etc/passwd", p), 0);
    snprintf(p, sizeof p, "%s/s.sock", dir);
    FILE *f = fopen(p, "w");
    fclose(f);
    snprintf(p, sizeof p, "%s/logdir", dir);
    ck_assert_int_eq(mkdir(p, 0700), 0);
    snprintf(yaml, sizeof yaml,
             "listen: ['unix:%s/s.sock']\n"
             "error_log: {path: %s/logdir}\n"
             "pid_file: %s/p.pid\n",
             dir, dir, dir);
    ck_assert_int_eq(preflight(yaml), 3);
    char want[512];
    snprintf(want, sizeof want,
             "t.yaml:1:10: listen address 'unix:%s/s.sock': %s/s.sock exists "
             "and is not a socket",
             dir, dir);
    has(want);
    snprintf(want, sizeof want,
             "t.yaml:2:19: error_log.path %s/logdir: cannot open for append as user %s: ", dir,
             me());
    has(want);
    snprintf(want, sizeof want,
             "t.yaml:3:11: pid_file %s/p.pid: is a symbolic link (a pid file "
             "is never written through one)",
             dir);
    has(want);
}
END_TEST

/* An existing log is opened for appending and left as it was. */
START_TEST(existing_log_untouched)
{
    char p[128], yaml[512];
    snprintf(p, sizeof p, "%s/error.log", dir);
    FILE *f = fopen(p, "w");
    fputs("old\n", f);
    fclose(f);
    struct stat before, after;
    ck_assert_int_eq(stat(p, &before), 0);
    snprintf(yaml, sizeof yaml, "error_log: {path: %s}\n", p);
    ck_assert_int_eq(preflight(yaml), 0);
    ck_assert_int_eq(stat(p, &after), 0);
    ck_assert_int_eq(after.st_size, 4);
    ck_assert_int_eq(after.st_mtime, before.st_mtime);
}
END_TEST

static Suite *preflight_suite(void)
{
    Suite *s = suite_create("preflight");
    TCase *tc = tcase_create("host");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30); /* name lookups */
    tcase_add_test(tc, valid_config_passes_and_creates_nothing);
    tcase_add_test(tc, unresolvable_and_foreign_addresses);
    tcase_add_test(tc, missing_directories);
    tcase_add_test(tc, files_in_the_way);
    tcase_add_test(tc, existing_log_untouched);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(preflight_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
