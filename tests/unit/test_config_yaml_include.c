/*
 * test_config_yaml_include.c - Check suite for src/common/config_yaml_include.c
 * and the merge rules of one load across files: each test writes a few files
 * into a fresh temp dir and loads the main one with config_load_file.
 */
#include <check.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/config.h"

/* ---- helpers ---------------------------------------------------------- */

static char dir[128];  /* this test's temp dir */
static char *out_text; /* what the last load printed */
static pagid_config cfg;
static int cfg_loaded;

static void setup(void)
{
    strcpy(dir, "/tmp/pagid-include-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
    free(out_text);
    out_text = NULL;
    if (cfg_loaded)
        config_free(&cfg);
    cfg_loaded = 0;
}

/* dir + "/" + name, in a static ring so a few can be used at once. */
static const char *at(const char *name)
{
    static char ring[4][512];
    static int next;
    char *p = ring[next++ % 4];
    snprintf(p, sizeof ring[0], "%s/%s", dir, name);
    return p;
}

/* Write a file (and its directories) under dir. */
static void put(const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    for (char *s = strchr(path + strlen(dir) + 1, '/'); s; s = strchr(s + 1, '/')) {
        *s = '\0';
        ck_assert(mkdir(path, 0700) == 0 || errno == EEXIST);
        *s = '/';
    }
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* Load dir/name over fresh defaults; the error count. */
static int load(const char *name)
{
    size_t len;
    if (cfg_loaded)
        config_free(&cfg);
    free(out_text);
    FILE *f = open_memstream(&out_text, &len);
    ck_assert_ptr_nonnull(f);
    config_init_defaults(&cfg);
    cfg_loaded = 1;
    int n = config_load_file(&cfg, at(name), f);
    fclose(f);
    return n;
}

/* The expected output: every '@' stands for the temp dir. */
static const char *expand(const char *tmpl)
{
    static char out[4096];
    size_t j = 0;
    for (const char *s = tmpl; *s && j + strlen(dir) + 1 < sizeof out; s++) {
        if (*s == '@') {
            memcpy(out + j, dir, strlen(dir));
            j += strlen(dir);
        } else {
            out[j++] = *s;
        }
    }
    out[j] = '\0';
    return out;
}

/* Loading main.yaml gives exactly these lines ('@' = the dir). */
static void expect_errors(int count, const char *lines)
{
    int n = load("main.yaml");
    ck_assert_str_eq(out_text, expand(lines));
    ck_assert_int_eq(n, count);
}

/* ---- merging ---------------------------------------------------------- */

START_TEST(test_merge_and_append)
{
    put("main.yaml", "listen: 127.0.0.1:8001\n"
                     "limits:\n"
                     "  max_body_size: 1k\n"
                     "mounts:\n"
                     "  - {path: /a, app: echo}\n"
                     "include: conf.d/*.yaml\n");
    put("conf.d/10-net.yaml", "listen:\n"
                              "  - 127.0.0.1:8002\n"
                              "  - 127.0.0.1:8003\n"
                              "limits: {max_header_count: 7}\n"
                              "timeouts: {idle: 5s}\n");
    put("conf.d/20-app.yaml", "workers: 3\n"
                              "app: hello\n"
                              "timeouts: {keepalive: 6s}\n"
                              "mounts:\n"
                              "  - {path: /b, app: hello}\n");
    put("conf.d/README", "not yaml: [\n"); /* not matched by the glob */
    ck_assert_int_eq(load("main.yaml"), 0);
    ck_assert_str_eq(out_text, "");
    ck_assert_str_eq(cfg.source, at("main.yaml"));
    ck_assert_uint_eq(cfg.n_listens, 3);
    ck_assert_int_eq(cfg.listens[0].port, 8001);
    ck_assert_int_eq(cfg.listens[1].port, 8002);
    ck_assert_int_eq(cfg.listens[2].port, 8003);
    ck_assert_uint_eq(cfg.limits.max_body_size, 1024);
    ck_assert_uint_eq(cfg.limits.max_header_count, 7);
    ck_assert_double_eq(cfg.timeouts.idle, 5);
    ck_assert_double_eq(cfg.timeouts.keepalive, 6);
    ck_assert_int_eq(cfg.workers, 3);
    ck_assert_str_eq(cfg.app, "hello");
    ck_assert_uint_eq(cfg.n_mounts, 2);
    ck_assert_str_eq(cfg.mounts[0].path, "/a");
    ck_assert_str_eq(cfg.mounts[1].path, "/b");
}
END_TEST

/* Files are loaded where `include:` stands; globs in byte order. */
START_TEST(test_order)
{
    put("main.yaml", "include: [d/*.yaml, last.yaml]\nlisten: ':9000'\n");
    put("d/b.yaml", "listen: ':9003'\n");
    put("d/a.yaml", "listen: ':9002'\n");
    put("d/B.yaml", "listen: ':9001'\n");
    put("last.yaml", "listen: ':9004'\n");
    ck_assert_int_eq(load("main.yaml"), 0);
    ck_assert_uint_eq(cfg.n_listens, 5);
    ck_assert_int_eq(cfg.listens[0].port, 9001); /* 'B' < 'a' < 'b' */
    ck_assert_int_eq(cfg.listens[1].port, 9002);
    ck_assert_int_eq(cfg.listens[2].port, 9003);
    ck_assert_int_eq(cfg.listens[3].port, 9004);
    ck_assert_int_eq(cfg.listens[4].port, 9000);
}
END_TEST

/* Relative paths are relative to the including file, wherever the process is. */
START_TEST(test_relative_to_including_file)
{
    put("main.yaml", "include: sub/a.yaml\n");
    put("sub/a.yaml", "include: b.yaml\nworkers: 1\n");
    put("sub/b.yaml", "include: ../c.yaml\napp: echo\n");
    put("c.yaml", "user: nobody\n");
    ck_assert_int_eq(load("main.yaml"), 0);
    ck_assert_int_eq(cfg.workers, 1);
    ck_assert_str_eq(cfg.app, "echo");
    ck_assert_str_eq(cfg.user, "nobody");

    /* An absolute path is taken as it is. */
    char text[600];
    snprintf(text, sizeof text, "include: '%s'\n", at("c.yaml"));
    put("main.yaml", text);
    ck_assert_int_eq(load("main.yaml"), 0);
    ck_assert_str_eq(cfg.user, "nobody");
}
END_TEST

START_TEST(test_value_forms)
{
    put("a.yaml", "workers: 2\n");
    put("main.yaml", "include: ~\n");
    expect_errors(0, "");
    put("main.yaml", "include: []\n");
    expect_errors(0, "");
    put("main.yaml", "include:\n  - a.yaml\n  - none/*.yaml\n");
    expect_errors(0, "");
    ck_assert_int_eq(cfg.workers, 2);
    put("main.yaml", "include: {a: b}\n");
    expect_errors(1, "@/main.yaml:1:10: 'include' must be a path or a list of paths, not a "
                     "mapping\n");
    put("main.yaml", "include: [[a.yaml]]\n");
    expect_errors(1, "@/main.yaml:1:11: 'include' must be a single value, not a list\n");
    put("main.yaml", "include: ''\n");
    expect_errors(1, "@/main.yaml:1:10: 'include' needs a path\n");
    /* One include: per file, like any key. */
    put("main.yaml", "include: a.yaml\ninclude: b.yaml\n");
    expect_errors(1, "@/main.yaml:2:1: duplicate key 'include' (first set at @/main.yaml:1:1)\n");
    /* An empty included file (or only comments) adds nothing. */
    put("empty.yaml", "# nothing yet\n");
    put("main.yaml", "include: empty.yaml\n");
    expect_errors(0, "");
}
END_TEST

/* ---- errors ----------------------------------------------------------- */

START_TEST(test_duplicate_across_files)
{
    put("main.yaml", "workers: 2\ninclude: conf.d/*.yaml\n");
    put("conf.d/a.yaml", "timeouts:\n  idle: 5s\n");
    put("conf.d/b.yaml", "workers: 3\ntimeouts: {idle: 6s}\n");
    expect_errors(2, "@/conf.d/b.yaml:1:1: duplicate key 'workers' (first set at @/main.yaml:1:1)\n"
                     "@/conf.d/b.yaml:2:12: duplicate key 'idle' in 'timeouts' (first set at "
                     "@/conf.d/a.yaml:2:3)\n");
    /* The first value stands. */
    ck_assert_int_eq(cfg.workers, 2);
    ck_assert_double_eq(cfg.timeouts.idle, 5);

    /* A section twice in one included file is still a duplicate. */
    put("conf.d/b.yaml", "limits: {max_body_size: 1k}\nlimits: {max_header_count: 5}\n");
    expect_errors(1, "@/conf.d/b.yaml:2:1: duplicate key 'limits' (first set at "
                     "@/conf.d/b.yaml:1:1)\n");

    /* ... and so is a section given twice in the main file around an include of it. */
    put("main.yaml", "limits: {max_body_size: 1k}\ninclude: conf.d/b.yaml\n"
                     "limits: {max_header_count: 5}\n");
    put("conf.d/b.yaml", "limits: {max_request_line: 1k}\n");
    expect_errors(1, "@/main.yaml:3:1: duplicate key 'limits' (first set at @/main.yaml:1:1)\n");

    /* The same listen address or mount path in two files. */
    put("main.yaml", "listen: ':8080'\nmounts: [{path: /x, app: echo}]\ninclude: conf.d/*.yaml\n");
    put("conf.d/a.yaml", "listen: ['*:8080']\n");
    put("conf.d/b.yaml", "mounts: [{path: /x/, app: hello}]\n");
    expect_errors(2, "@/conf.d/a.yaml:1:10: invalid listen address '*:8080': duplicate listen "
                     "address\n"
                     "@/conf.d/b.yaml:1:17: mount path '/x/' is mounted twice\n");
}
END_TEST

START_TEST(test_missing_and_empty)
{
    put("main.yaml", "include: nope.yaml\n");
    expect_errors(1, "@/main.yaml:1:10: cannot include '@/nope.yaml': No such file or "
                     "directory\n");
    /* A glob that matches nothing is fine, as in nginx, even in a missing directory. */
    put("main.yaml", "include: [conf.d/*.yaml, missing/*.yaml]\n");
    ck_assert_int_eq(mkdir(at("conf.d"), 0700), 0);
    expect_errors(0, "");
    /* A directory or a FIFO is not a config file (and a FIFO must not hang -t). */
    put("main.yaml", "include: conf.d\n");
    expect_errors(1, "@/main.yaml:1:10: cannot include '@/conf.d': Is a directory\n");
    ck_assert_int_eq(mkfifo(at("conf.d/fifo.yaml"), 0600), 0);
    put("main.yaml", "include: conf.d/*.yaml\n");
    expect_errors(1, "@/main.yaml:1:10: cannot include '@/conf.d/fifo.yaml': not a regular "
                     "file\n");
    /* A device is not even opened. */
    put("main.yaml", "include: /dev/null\n");
    expect_errors(1, "@/main.yaml:1:10: cannot include '/dev/null': not a regular file\n");
    /* Too large is refused by its size, before anything is read. */
    put("big.yaml", "");
    ck_assert_int_eq(truncate(at("big.yaml"), 16 * 1024 * 1024 + 1), 0);
    put("main.yaml", "include: big.yaml\n");
    expect_errors(1, "@/main.yaml:1:10: cannot include '@/big.yaml': too large for a config "
                     "file (over 16 MiB)\n");
}
END_TEST

START_TEST(test_cycle)
{
    put("main.yaml", "include: a.yaml\n");
    put("a.yaml", "include: b.yaml\n");
    put("b.yaml", "workers: 1\ninclude: main.yaml\n");
    expect_errors(1, "@/b.yaml:2:10: include cycle: @/main.yaml -> @/a.yaml -> @/b.yaml -> "
                     "@/main.yaml\n");
    ck_assert_int_eq(cfg.workers, 1); /* the rest of the files still loaded */

    /* The commonest one: a glob that matches the main file itself. */
    put("main.yaml", "include: '*.yaml'\n");
    put("a.yaml", "workers: 2\n");
    put("b.yaml", "app: echo\n");
    expect_errors(1, "@/main.yaml:1:10: include cycle: @/main.yaml -> @/main.yaml\n");
    ck_assert_int_eq(cfg.workers, 2);
    ck_assert_str_eq(cfg.app, "echo");

    /* The same file by another name is the same file. */
    put("main.yaml", "include: sub/../main.yaml\n");
    ck_assert_int_eq(mkdir(at("sub"), 0700), 0);
    expect_errors(1, "@/main.yaml:1:10: include cycle: @/main.yaml -> @/sub/../main.yaml\n");

    /* Included twice, but not a cycle: said once, with where it was first. */
    put("main.yaml", "include: [a.yaml, b.yaml]\n");
    put("a.yaml", "include: b.yaml\n");
    put("b.yaml", "workers: 4\n");
    expect_errors(1, "@/main.yaml:1:19: '@/b.yaml' is already included (at @/a.yaml:1:10)\n");
}
END_TEST

START_TEST(test_depth)
{
    /* main -> f1 -> ... -> f8: eight levels are fine. */
    char name[32], text[64];
    put("main.yaml", "include: f1.yaml\n");
    for (int i = 1; i <= 8; i++) {
        snprintf(name, sizeof name, "f%d.yaml", i);
        snprintf(text, sizeof text, i < 8 ? "include: f%d.yaml\n" : "workers: %d\n", i + 1);
        put(name, text);
    }
    expect_errors(0, "");
    ck_assert_int_eq(cfg.workers, 9);
    /* One more is refused, at the include that goes too deep. */
    put("f8.yaml", "include: f9.yaml\n");
    put("f9.yaml", "workers: 1\n");
    expect_errors(1, "@/f8.yaml:1:10: cannot include '@/f9.yaml': includes nested more than 8 "
                     "levels deep\n");
}
END_TEST

/* Every problem inside an included file carries that file's own position. */
START_TEST(test_error_location)
{
    put("main.yaml", "workers: 2\n"
                     "include:\n"
                     "  - conf.d/*.yaml\n");
    put("conf.d/a.yaml", "\n"
                         "timeouts:\n"
                         "  idle: forever\n"
                         "limts: {}\n");
    put("conf.d/b.yaml", "listen: [unclosed\n");
    put("conf.d/c.yaml", "- a list\n");
    put("conf.d/d.yaml", "app: x\n---\napp: y\n");
    expect_errors(6, "@/conf.d/a.yaml:3:9: invalid duration 'forever' for 'timeouts.idle' "
                     "(expected e.g. 500ms, 30s, 5m, 1h, at most 1 year; 0 disables)\n"
                     "@/conf.d/a.yaml:4:1: unknown key 'limts' (did you mean 'limits'?)\n"
                     "@/conf.d/b.yaml:2:1: did not find expected ',' or ']' (while parsing a "
                     "flow sequence)\n"
                     "@/conf.d/c.yaml:1:1: the top level must be a mapping of keys, not a list\n"
                     "@/conf.d/d.yaml:1:6: unknown app 'x' (expected hello, echo, demo, "
                     "pubsub, static:DIR, a .so module, a PAGI app FILE.pl or a PSGI app "
                     "FILE.psgi)\n"
                     "@/conf.d/d.yaml:3:1: more than one YAML document; a config file holds "
                     "one\n");
    ck_assert_int_eq(cfg.workers, 2);

    /* A check over the whole load points where the value was written. */
    put("main.yaml", "flow_control: {high_watermark: 8k}\ninclude: low.yaml\n");
    put("low.yaml", "flow_control:\n  low_watermark: 8k\n");
    expect_errors(1, "@/low.yaml:2:18: 'flow_control.low_watermark' (8192) must be less than "
                     "'flow_control.high_watermark' (8192)\n");
}
END_TEST

/* A directory whose name holds glob characters is not a pattern itself. */
START_TEST(test_glob_in_directory_name)
{
    put("we[i]rd*/main.yaml", "include: conf.d/*.yaml\n");
    put("we[i]rd*/conf.d/a.yaml", "workers: 5\n");
    put("weird/conf.d/a.yaml", "workers: 6\n"); /* what the unescaped pattern would match */
    ck_assert_int_eq(load("we[i]rd*/main.yaml"), 0);
    ck_assert_int_eq(cfg.workers, 5);
}
END_TEST

START_TEST(test_too_many_files)
{
    char name[32];
    for (int i = 0; i <= 1024; i++) {
        snprintf(name, sizeof name, "d/%04d.yaml", i);
        put(name, "");
    }
    put("main.yaml", "include: d/*.yaml\n");
    expect_errors(1, "@/main.yaml:1:10: '@/d/*.yaml' matches more than 1024 files\n");
}
END_TEST

/* Nothing is remembered between loads: a reload sees files added since. */
START_TEST(test_reload_rereads)
{
    put("main.yaml", "listen: ':7001'\ninclude: conf.d/*.yaml\n");
    ck_assert_int_eq(load("main.yaml"), 0);
    ck_assert_uint_eq(cfg.n_listens, 1);
    put("conf.d/extra.yaml", "listen: ':7002'\nworkers: 2\n");
    ck_assert_int_eq(load("main.yaml"), 0);
    ck_assert_uint_eq(cfg.n_listens, 2);
    ck_assert_int_eq(cfg.workers, 2);
    ck_assert_int_eq(unlink(at("conf.d/extra.yaml")), 0);
    ck_assert_int_eq(load("main.yaml"), 0);
    ck_assert_uint_eq(cfg.n_listens, 1);
}
END_TEST

/* config_load_string has no directory: relative includes are from the working directory. */
START_TEST(test_from_string)
{
    put("a.yaml", "workers: 7\n");
    char cwd[512];
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
    ck_assert_int_eq(chdir(dir), 0);
    FILE *null = fopen("/dev/null", "w");
    config_init_defaults(&cfg);
    cfg_loaded = 1;
    ck_assert_int_eq(config_load_string(&cfg, "include: a.yaml\n", "t.yaml", null), 0);
    fclose(null);
    ck_assert_int_eq(chdir(cwd), 0);
    ck_assert_int_eq(cfg.workers, 7);
}
END_TEST

/* Positions kept for checks after loading (pagid -t's look at the host)
 * name the file the value came from, main or included. */
START_TEST(test_kept_positions_name_their_file)
{
    put("main.yaml", "user: nobody\ninclude: conf.d/*.yaml\n");
    put("conf.d/a.yaml", "\npid_file: /run/x.pid\nlisten:\n  - 127.0.0.1:8080\n");
    ck_assert_int_eq(load("main.yaml"), 0);
    ck_assert_uint_eq(cfg.user_pos.line, 1);
    ck_assert_ptr_null(cfg.user_pos.file); /* the main file: c->source */
    ck_assert_ptr_nonnull(cfg.pid_file_pos.file);
    ck_assert_str_eq(cfg.pid_file_pos.file, at("conf.d/a.yaml"));
    ck_assert_uint_eq(cfg.pid_file_pos.line, 2);
    ck_assert_uint_eq(cfg.pid_file_pos.col, 11);
    ck_assert_uint_eq(cfg.n_listens, 1);
    ck_assert_ptr_eq(cfg.listens[0].pos.file, cfg.pid_file_pos.file); /* kept once */

    char *text = NULL;
    size_t len;
    FILE *f = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(f);
    config_report(&cfg, cfg.pid_file_pos, f, "cannot write it");
    config_report(&cfg, cfg.user_pos, f, "unknown");
    fclose(f);
    char want[1200];
    snprintf(want, sizeof want, "%s:2:11: cannot write it\n%s:1:7: unknown\n", at("conf.d/a.yaml"),
             at("main.yaml"));
    ck_assert_str_eq(text, want);
    free(text);
}
END_TEST

/* A conf.d the loader may not read is an error, not an empty glob: under
 * the packaged unit root has no CAP_DAC_OVERRIDE, and the drop-ins (their
 * listeners) would vanish without a word. Checked as nobody when root. */
START_TEST(test_unreadable_glob_directory)
{
    put("main.yaml", "workers: 1\ninclude: conf.d/*.yaml\n");
    put("conf.d/a.yaml", "listen:\n  - 127.0.0.1:8080\n");
    ck_assert_int_eq(chmod(at("conf.d"), 0), 0);
    if (geteuid() != 0) {
        ck_assert_int_eq(load("main.yaml"), 1);
        ck_assert_ptr_nonnull(strstr(out_text, "conf.d: Permission denied"));
        ck_assert_int_eq(chmod(at("conf.d"), 0700), 0);
        return;
    }
    ck_assert_int_eq(chmod(dir, 0711), 0);
    ck_assert_int_eq(chmod(at("main.yaml"), 0644), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (setgid(65534) < 0 || setuid(65534) < 0)
            _exit(10);
        int n = load("main.yaml");
        _exit(n == 1 && strstr(out_text, "conf.d: Permission denied") ? 0 : 11);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_int_eq(chmod(at("conf.d"), 0700), 0);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "as nobody: status %d", status);
}
END_TEST

static Suite *config_yaml_include_suite(void)
{
    Suite *s = suite_create("config_yaml_include");
    TCase *tc = tcase_create("merge");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_merge_and_append);
    tcase_add_test(tc, test_order);
    tcase_add_test(tc, test_relative_to_including_file);
    tcase_add_test(tc, test_value_forms);
    tcase_add_test(tc, test_reload_rereads);
    tcase_add_test(tc, test_from_string);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_duplicate_across_files);
    tcase_add_test(tc, test_missing_and_empty);
    tcase_add_test(tc, test_cycle);
    tcase_add_test(tc, test_depth);
    tcase_add_test(tc, test_error_location);
    tcase_add_test(tc, test_glob_in_directory_name);
    tcase_add_test(tc, test_too_many_files);
    tcase_add_test(tc, test_kept_positions_name_their_file);
    tcase_add_test(tc, test_unreadable_glob_directory);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(config_yaml_include_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
