/*
 * test_privileges.c - Check suite for src/master/privileges.c: who the
 * workers run as (configured user and group, the `nobody` fallback as root,
 * root kept only when asked, nothing switched when not root), the messages
 * about it, and, when the suite runs as root, the switch itself.
 */
#include <check.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "master/privileges.h"

static pagid_config cfg;

static void setup(void)
{
    log_open(NULL, LOG_LVL_ERROR);
    config_init_defaults(&cfg);
}

static void teardown(void)
{
    config_free(&cfg);
}

static void set(char **field, const char *v)
{
    free(*field);
    *field = v ? strdup(v) : NULL;
}

/* nobody's ids from the system database, or skip the test without it. */
static int nobody_ids(uid_t *uid, gid_t *gid)
{
    struct passwd *pw = getpwnam(PRIV_FALLBACK_USER);
    if (!pw)
        return 0;
    *uid = pw->pw_uid;
    *gid = pw->pw_gid;
    return 1;
}

START_TEST(root_without_user_falls_back_to_nobody)
{
    uid_t uid;
    gid_t gid;
    if (!nobody_ids(&uid, &gid))
        return; /* no such account here: nothing to fall back to */
    priv_identity id;
    priv_problem p;
    char err[256] = "";
    ck_assert_int_eq(priv_resolve(&cfg, 0, &id, &p, err, sizeof err), 0);
    ck_assert_int_eq(p, PRIV_OK);
    ck_assert(id.change);
    ck_assert(id.fallback);
    ck_assert(!id.keeps_root);
    ck_assert_uint_eq(id.uid, uid);
    ck_assert_uint_eq(id.gid, gid); /* nobody's own group (nogroup on Debian) */
    ck_assert_str_eq(id.user, "nobody");
    char line[256];
    int warn = -1;
    priv_describe(&id, line, sizeof line, &warn);
    ck_assert_int_eq(warn, 0);
    ck_assert_msg(strstr(line, "no 'user' is set: workers run as nobody:") == line, "%s", line);
}
END_TEST

START_TEST(explicit_root_is_kept_with_a_warning)
{
    set(&cfg.user, "root");
    priv_identity id;
    priv_problem p;
    char err[256];
    ck_assert_int_eq(priv_resolve(&cfg, 0, &id, &p, err, sizeof err), 0);
    ck_assert(id.keeps_root);
    ck_assert(!id.fallback);
    ck_assert(!id.change); /* root with root's group: nothing to switch */
    ck_assert_uint_eq(id.uid, 0);
    char line[256];
    int warn = 0;
    priv_describe(&id, line, sizeof line, &warn);
    ck_assert_int_eq(warn, 1);
    ck_assert_ptr_nonnull(strstr(line, "workers run as root ('user: root')"));

    /* root with another group does switch the group. */
    set(&cfg.group, "daemon");
    if (getgrnam("daemon")) {
        ck_assert_int_eq(priv_resolve(&cfg, 0, &id, &p, err, sizeof err), 0);
        ck_assert(id.change);
        ck_assert(id.keeps_root);
        ck_assert_uint_eq(id.gid, getgrnam("daemon")->gr_gid);
    }
}
END_TEST

START_TEST(configured_user_and_group)
{
    uid_t uid;
    gid_t gid;
    if (!nobody_ids(&uid, &gid) || !getgrnam("daemon"))
        return;
    set(&cfg.user, "nobody");
    set(&cfg.group, "daemon");
    priv_identity id;
    priv_problem p;
    char err[256];
    ck_assert_int_eq(priv_resolve(&cfg, 0, &id, &p, err, sizeof err), 0);
    ck_assert(id.change && !id.fallback && !id.keeps_root);
    ck_assert_uint_eq(id.uid, uid);
    ck_assert_uint_eq(id.gid, getgrnam("daemon")->gr_gid);
    ck_assert_str_eq(id.group, "daemon");
    char line[256];
    int warn = 1;
    priv_describe(&id, line, sizeof line, &warn);
    ck_assert_str_eq(line, ""); /* what was asked: nothing to say */
}
END_TEST

START_TEST(unknown_names_are_errors_for_anyone)
{
    priv_identity id;
    priv_problem p;
    char err[256];
    set(&cfg.user, "no-such-user-pagid");
    ck_assert_int_eq(priv_resolve(&cfg, 1000, &id, &p, err, sizeof err), -1);
    ck_assert_int_eq(p, PRIV_BAD_USER);
    ck_assert_str_eq(err, "unknown user 'no-such-user-pagid'");
    ck_assert_int_eq(priv_resolve(&cfg, 0, &id, &p, err, sizeof err), -1);

    set(&cfg.user, "root");
    set(&cfg.group, "no-such-group-pagid");
    ck_assert_int_eq(priv_resolve(&cfg, 0, &id, &p, err, sizeof err), -1);
    ck_assert_int_eq(p, PRIV_BAD_GROUP);
    ck_assert_str_eq(err, "unknown group 'no-such-group-pagid'");
}
END_TEST

START_TEST(not_root_switches_nothing)
{
    priv_identity id;
    priv_problem p;
    char err[256];
    ck_assert_int_eq(priv_resolve(&cfg, 1000, &id, &p, err, sizeof err), 0);
    ck_assert(!id.change && !id.fallback && !id.ignored);

    set(&cfg.user, "root");
    ck_assert_int_eq(priv_resolve(&cfg, 1000, &id, &p, err, sizeof err), 0);
    ck_assert(!id.change && id.ignored && !id.keeps_root);
    char line[256];
    int warn = 0;
    priv_describe(&id, line, sizeof line, &warn);
    ck_assert_int_eq(warn, 1);
    ck_assert_ptr_nonnull(strstr(line, "'user' ignored"));
}
END_TEST

/* As root, the switch itself, in a child: uid, gid and groups all change,
 * and there is no way back. */
START_TEST(drop_switches_for_good)
{
    uid_t uid;
    gid_t gid;
    if (geteuid() != 0 || !nobody_ids(&uid, &gid))
        return;
    priv_identity id;
    priv_problem p;
    char err[256];
    ck_assert_int_eq(priv_resolve(&cfg, 0, &id, &p, err, sizeof err), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (priv_drop(&id) < 0)
            _exit(10);
        if (getuid() != uid || geteuid() != uid || getgid() != gid || getegid() != gid)
            _exit(11);
        gid_t groups[64];
        int n = getgroups(64, groups);
        for (int i = 0; i < n; i++)
            if (groups[i] == 0)
                _exit(12);
        if (setuid(0) == 0)
            _exit(13);
        _exit(0);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), 0);
}
END_TEST

static Suite *privileges_suite(void)
{
    Suite *s = suite_create("privileges");
    TCase *tc = tcase_create("resolve");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, root_without_user_falls_back_to_nobody);
    tcase_add_test(tc, explicit_root_is_kept_with_a_warning);
    tcase_add_test(tc, configured_user_and_group);
    tcase_add_test(tc, unknown_names_are_errors_for_anyone);
    tcase_add_test(tc, not_root_switches_nothing);
    tcase_add_test(tc, drop_switches_for_good);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(privileges_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
