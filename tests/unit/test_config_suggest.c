/*
 * test_config_suggest.c - Check suite for src/common/config_suggest.c: the
 * edit distance, the "close enough" rule, and the loader's "did you mean"
 * at every level of the schema (top level, sections, listen/app/mounts
 * mappings) and for enumerated values.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/config_suggest.h"
#include "config_load_check.h"

static size_t dist(const char *a, const char *b)
{
    return config_edit_distance(a, strlen(a), b, strlen(b));
}

/* ---- the distance -------------------------------------------------------- */

START_TEST(test_distance)
{
    ck_assert_uint_eq(dist("", ""), 0);
    ck_assert_uint_eq(dist("", "abc"), 3);
    ck_assert_uint_eq(dist("abc", ""), 3);
    ck_assert_uint_eq(dist("limits", "limits"), 0);
    ck_assert_uint_eq(dist("limts", "limits"), 1);   /* deletion */
    ck_assert_uint_eq(dist("limiits", "limits"), 1); /* insertion */
    ck_assert_uint_eq(dist("limitz", "limits"), 1);  /* substitution */
    ck_assert_uint_eq(dist("idel", "idle"), 1);      /* adjacent swap: one edit */
    ck_assert_uint_eq(dist("workrs", "workers"), 1);
    ck_assert_uint_eq(dist("kitten", "sitting"), 3);
    ck_assert_uint_eq(dist("ca", "abc"), 3); /* optimal string alignment, not full D-L */
    /* Symmetric. */
    ck_assert_uint_eq(dist("timeout", "timeouts"), dist("timeouts", "timeout"));
    /* Case and '-' against '_' are no difference. */
    ck_assert_uint_eq(dist("Max-Body-Size", "max_body_size"), 0);
    ck_assert_uint_eq(dist("WORKERS", "workers"), 0);
    /* Bytes past a NUL count: lengths are explicit. */
    ck_assert_uint_eq(config_edit_distance("ab\0c", 4, "abc", 3), 1);
    /* Too long to be a typo of ours. */
    char longw[SUGGEST_MAX_LEN + 2];
    memset(longw, 'a', sizeof longw - 1);
    longw[sizeof longw - 1] = '\0';
    ck_assert_uint_eq(dist(longw, "a"), SIZE_MAX);
    longw[SUGGEST_MAX_LEN] = '\0';
    ck_assert_uint_eq(dist(longw, longw), 0);
}
END_TEST

START_TEST(test_suggest_rule)
{
    static const char *const top[] = {"listen",   "workers", "app", "limits",
                                      "timeouts", "include", NULL};
    ck_assert_str_eq(config_suggest_among("limts", 5, top), "limits");
    ck_assert_str_eq(config_suggest_among("workrs", 6, top), "workers");
    ck_assert_str_eq(config_suggest_among("Listen", 6, top), "listen");
    ck_assert_str_eq(config_suggest_among("timeout", 7, top), "timeouts");
    ck_assert_str_eq(config_suggest_among("inclued", 7, top), "include");
    ck_assert_str_eq(config_suggest_among("ap", 2, top), "app");      /* 1 edit of 3 */
    ck_assert_str_eq(config_suggest_among("lmts", 4, top), "limits"); /* 2 edits of 6 */
    /* Nothing close: no guess. */
    ck_assert_ptr_null(config_suggest_among("foo", 3, top));
    ck_assert_ptr_null(config_suggest_among("a", 1, top)); /* 2 edits of 3: too many */
    ck_assert_ptr_null(config_suggest_among("", 0, top));
    ck_assert_ptr_null(config_suggest_among("listenxyz", 9, top)); /* 3 edits */

    /* The closest wins; the first among equals. */
    static const char *const levels[] = {"error", "warn", "info", "debug", NULL};
    ck_assert_str_eq(config_suggest_among("wran", 4, levels), "warn");
    ck_assert_str_eq(config_suggest_among("INFO", 4, levels), "info");
    ck_assert_ptr_null(config_suggest_among("loud", 4, levels));
    static const char *const ab[] = {"abcd", "abce", "abcf", NULL};
    ck_assert_str_eq(config_suggest_among("abcx", 4, ab), "abcd");
    static const char *const near_far[] = {"idle_x", "idle", NULL};
    ck_assert_str_eq(config_suggest_among("idel", 4, near_far), "idle");

    config_suggest s;
    config_suggest_init(&s, "grop", 4);
    config_suggest_add(&s, NULL); /* ignored */
    ck_assert_ptr_null(config_suggest_best(&s));
    config_suggest_add(&s, "user");
    config_suggest_add(&s, "group");
    ck_assert_str_eq(config_suggest_best(&s), "group");
}
END_TEST

/* ---- through the loader ---------------------------------------------------- */

START_TEST(test_loader_keys)
{
    /* The three: top level, a section, a top-level typo. */
    expect_error("limts:\n  max_body_size: 1k\n",
                 "t.yaml:1:1: unknown key 'limts' (did you mean 'limits'?)");
    expect_error("timeouts: {idel: 5s}\n",
                 "t.yaml:1:12: unknown key 'idel' in 'timeouts' (did you mean 'idle'?)");
    expect_error("workrs: 2\n", "t.yaml:1:1: unknown key 'workrs' (did you mean 'workers'?)");
    /* Every section suggests from its own keys. */
    expect_error("limits:\n  max_body_sise: 1k\n",
                 "t.yaml:2:3: unknown key 'max_body_sise' in 'limits' (did you mean "
                 "'max_body_size'?)");
    expect_error("flow_control: {high-watermark: 1m}\n",
                 "t.yaml:1:16: unknown key 'high-watermark' in 'flow_control' (did you mean "
                 "'high_watermark'?)");
    expect_error("access_log: {fromat: json}\n",
                 "t.yaml:1:14: unknown key 'fromat' in 'access_log' (did you mean 'format'?)");
    expect_error("status: {lisen: ':9100'}\n",
                 "t.yaml:1:10: unknown key 'lisen' in 'status' (did you mean 'listen'?)");
    expect_error("includ: x.yaml\n", "t.yaml:1:1: unknown key 'includ' (did you mean 'include'?)");
    expect_error("Pid_File: /run/p.pid\n",
                 "t.yaml:1:1: unknown key 'Pid_File' (did you mean 'pid_file'?)");
    /* A section's key at the top level: where it belongs, when that is one place. */
    expect_error("keepalive: 5s\n",
                 "t.yaml:1:1: unknown key 'keepalive' (did you mean 'timeouts.keepalive'?)");
    expect_error("max_body_size: 1m\n",
                 "t.yaml:1:1: unknown key 'max_body_size' (did you mean 'limits.max_body_size'?)");
    expect_error("path: /x\n", "t.yaml:1:1: unknown key 'path'"); /* in three sections */
    /* Only from the same level: 'workers' is not a key of 'limits'. */
    expect_error("limits: {workers: 2}\n", "t.yaml:1:10: unknown key 'workers' in 'limits'");
    /* Nothing close: no suggestion. */
    expect_error("bogus: 1\n", "t.yaml:1:1: unknown key 'bogus'");
    expect_error("timeouts: {forever: 1}\n", "t.yaml:1:12: unknown key 'forever' in 'timeouts'");
}
END_TEST

START_TEST(test_loader_mappings)
{
    expect_error("listen:\n  - {adress: ':80'}\n",
                 "t.yaml:2:6: unknown key 'adress' in a 'listen' entry (did you mean 'address'?)");
    expect_error("listen:\n  - {address: 'unix:/a.sock', user: root}\n",
                 "t.yaml:2:31: unknown key 'user' in a 'listen' entry (expected address, mode, "
                 "owner, group, tls or http2)");
    expect_error("app: {statik: /tmp}\n",
                 "t.yaml:1:7: unknown key 'statik' in 'app' (did you mean 'static'?)");
    expect_error("app: {static: /tmp, listin: true}\n",
                 "t.yaml:1:21: unknown key 'listin' in 'app' (did you mean 'listing'?)");
    expect_error("mounts:\n  - {pth: /x, app: hello}\n",
                 "t.yaml:2:6: unknown key 'pth' in a 'mounts' entry (did you mean 'path'?)");
}
END_TEST

START_TEST(test_loader_enum_values)
{
    expect_error("error_log: {level: wran}\n",
                 "t.yaml:1:20: invalid log level 'wran' (did you mean 'warn'?)");
    expect_error("error_log: {level: DEBUG}\n",
                 "t.yaml:1:20: invalid log level 'DEBUG' (did you mean 'debug'?)");
    expect_error("error_log: {level: loud}\n",
                 "t.yaml:1:20: invalid log level 'loud' (expected error, warn, info or debug)");
    expect_error("access_log: {format: combind}\n",
                 "t.yaml:1:22: invalid access log format 'combind' (did you mean 'combined'?)");
    expect_error("access_log: {format: JSON}\n",
                 "t.yaml:1:22: invalid access log format 'JSON' (did you mean 'json'?)");
    expect_error("access_log: {format: fancy}\n",
                 "t.yaml:1:22: invalid access log format 'fancy' (expected clf, combined, json or "
                 "a custom format containing %)");
    expect_error("workers: atuo\n",
                 "t.yaml:1:10: invalid workers 'atuo': expected a number or 'auto' (did you mean "
                 "'auto'?)");
    expect_error("app: {static: /tmp, listing: ture}\n",
                 "t.yaml:1:30: 'app.listing' must be true or false, not 'ture' (did you mean "
                 "'true'?)");
    expect_error("app: helo\n", "t.yaml:1:6: unknown app 'helo' (did you mean 'hello'?)");
    expect_error("app: Echo\n", "t.yaml:1:6: unknown app 'Echo' (did you mean 'echo'?)");
    expect_error("app: bogus\n", "t.yaml:1:6: unknown app 'bogus' (expected hello, echo, demo, "
                                 "pubsub, static:DIR, a .so module, a PAGI app FILE.pl or a PSGI "
                                 "app FILE.psgi)");
}
END_TEST

static Suite *config_suggest_suite(void)
{
    Suite *s = suite_create("config_suggest");
    TCase *tc = tcase_create("distance");
    tcase_add_test(tc, test_distance);
    tcase_add_test(tc, test_suggest_rule);
    suite_add_tcase(s, tc);

    tc = tcase_create("loader");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_add_test(tc, test_loader_keys);
    tcase_add_test(tc, test_loader_mappings);
    tcase_add_test(tc, test_loader_enum_values);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(config_suggest_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
