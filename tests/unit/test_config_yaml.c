/*
 * test_config_yaml.c - Check suite for src/common/config_yaml.c: valid files
 * load into the right fields, and every class of error prints exactly
 * "FILE:LINE:COLUMN: message"; malformed input never crashes or leaks.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/config.h"
#include "config_load_check.h"

#ifndef TOP_SRCDIR
#define TOP_SRCDIR "."
#endif

/* ---- helpers ---------------------------------------------------------- */

/* A scratch directory holding a module and a plain file, for app checks. */
static char tmpdir[64];
static char so_path[128], txt_path[128];

static void make_tmpdir(void)
{
    strcpy(tmpdir, "/tmp/pagid-test-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    snprintf(so_path, sizeof so_path, "%s/app.so", tmpdir);
    snprintf(txt_path, sizeof txt_path, "%s/file.txt", tmpdir);
    FILE *f = fopen(so_path, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    f = fopen(txt_path, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
}

static void remove_tmpdir(void)
{
    unlink(so_path);
    unlink(txt_path);
    rmdir(tmpdir);
}

/* ---- the YAML loader: valid input -------------------------------------- */

static const char full_yaml[] = "listen:\n"
                                "  - 0.0.0.0:8081\n"
                                "  - \"[::1]:8082\"\n"
                                "  - unix:/tmp/pagid-test.sock\n"
                                "workers: 3\n"
                                "app: hello\n"
                                "limits:\n"
                                "  max_connections: 500\n"
                                "  max_request_line: 4k\n"
                                "  max_header_size: 16k\n"
                                "  max_header_count: 50\n"
                                "  max_body_size: 1g\n"
                                "  max_ws_message_size: 2m\n"
                                "  max_receive_queue: 10\n"
                                "  max_receive_queue_size: 256k\n"
                                "  http2_max_streams: 20\n"
                                "  http2_stream_window: 1m\n"
                                "  http2_connection_window: 8m\n"
                                "  http2_max_resets: 50\n"
                                "  http2_max_open_files: 12\n"
                                "timeouts:\n"
                                "  header: 1s\n"
                                "  idle: 2\n"
                                "  keepalive: 3s\n"
                                "  request: 4m\n"
                                "  write: 5h\n"
                                "  ws_idle: 600ms\n"
                                "  sse_idle: 7s\n"
                                "  ws_close: 8s\n"
                                "  shutdown: 9s\n"
                                "  heartbeat: 0\n"
                                "  lifespan_startup: 1.5s\n"
                                "flow_control:\n"
                                "  high_watermark: 128k\n"
                                "  low_watermark: 32k\n"
                                "access_log:\n"
                                "  path: /var/log/pagid/access.log\n"
                                "  format: json\n"
                                "error_log:\n"
                                "  path: /var/log/pagid/error.log\n"
                                "  level: debug\n"
                                "pid_file: /run/pagid.pid\n"
                                "user: www-data\n"
                                "group: nogroup\n";

START_TEST(test_load_full)
{
    pagid_config c;
    ck_assert_int_eq(load(&c, full_yaml), 0);
    ck_assert_str_eq(out_text, "");
    ck_assert_str_eq(c.source, "t.yaml");
    ck_assert_uint_eq(c.n_listens, 3);
    ck_assert_str_eq(c.listens[0].host, "0.0.0.0");
    ck_assert_int_eq(c.listens[0].port, 8081);
    ck_assert_str_eq(c.listens[1].host, "::1");
    ck_assert_int_eq(c.listens[1].port, 8082);
    ck_assert_str_eq(c.listens[2].path, "/tmp/pagid-test.sock");
    ck_assert_int_eq(c.workers, 3);
    ck_assert_str_eq(c.app, "hello");
    ck_assert_uint_eq(c.limits.max_connections, 500);
    ck_assert_uint_eq(c.limits.max_request_line, 4096);
    ck_assert_uint_eq(c.limits.max_header_size, 16384);
    ck_assert_uint_eq(c.limits.max_header_count, 50);
    ck_assert_uint_eq(c.limits.max_body_size, 1073741824);
    ck_assert_uint_eq(c.limits.max_ws_message_size, 2097152);
    ck_assert_uint_eq(c.limits.max_receive_queue, 10);
    ck_assert_uint_eq(c.limits.max_receive_queue_size, 262144);
    ck_assert_uint_eq(c.limits.http2_max_streams, 20);
    ck_assert_uint_eq(c.limits.http2_stream_window, 1048576);
    ck_assert_uint_eq(c.limits.http2_connection_window, 8388608);
    ck_assert_uint_eq(c.limits.http2_max_resets, 50);
    ck_assert_uint_eq(c.limits.http2_max_open_files, 12);
    ck_assert_double_eq(c.timeouts.header, 1);
    ck_assert_double_eq(c.timeouts.idle, 2);
    ck_assert_double_eq(c.timeouts.keepalive, 3);
    ck_assert_double_eq(c.timeouts.request, 240);
    ck_assert_double_eq(c.timeouts.write, 18000);
    ck_assert_double_eq_tol(c.timeouts.ws_idle, 0.6, 1e-9);
    ck_assert_double_eq(c.timeouts.sse_idle, 7);
    ck_assert_double_eq(c.timeouts.ws_close, 8);
    ck_assert_double_eq(c.timeouts.shutdown, 9);
    ck_assert_double_eq(c.timeouts.heartbeat, 0);
    ck_assert_double_eq(c.timeouts.lifespan_startup, 1.5);
    ck_assert_uint_eq(c.high_watermark, 131072);
    ck_assert_uint_eq(c.low_watermark, 32768);
    ck_assert_str_eq(c.access_log_path, "/var/log/pagid/access.log");
    ck_assert_str_eq(c.access_log_format, "json");
    ck_assert_str_eq(c.error_log_path, "/var/log/pagid/error.log");
    ck_assert_int_eq(c.error_log_level, LOG_LVL_DEBUG);
    ck_assert_str_eq(c.pid_file, "/run/pagid.pid");
    ck_assert_str_eq(c.user, "www-data");
    ck_assert_str_eq(c.group, "nogroup");
    config_free(&c);
}
END_TEST

/* The shipped example documents every key at its default: it must load to
 * exactly what config_init_defaults gives. */
START_TEST(test_example_file_is_defaults)
{
    pagid_config c, d;
    FILE *err = tmpfile();
    config_init_defaults(&c);
    config_init_defaults(&d);
    int n = config_load_file(&c, TOP_SRCDIR "/conf/pagid.yaml", err);
    rewind(err);
    char line[512] = "";
    ck_assert_msg(n == 0, "conf/pagid.yaml: %d errors, first: %s", n,
                  fgets(line, sizeof line, err) ? line : "");
    fclose(err);
    ck_assert_str_eq(c.source, TOP_SRCDIR "/conf/pagid.yaml");
    ck_assert_uint_eq(c.n_listens, 1);
    ck_assert_str_eq(c.listens[0].spec, CONFIG_DEFAULT_LISTEN);
    ck_assert_int_eq(c.workers, d.workers);
    ck_assert_str_eq(c.app, d.app);
    ck_assert_int_eq(memcmp(&c.limits, &d.limits, sizeof c.limits), 0);
    ck_assert_int_eq(memcmp(&c.timeouts, &d.timeouts, sizeof c.timeouts), 0);
    ck_assert_uint_eq(c.high_watermark, d.high_watermark);
    ck_assert_uint_eq(c.low_watermark, d.low_watermark);
    ck_assert_ptr_null(c.access_log_path);
    ck_assert_str_eq(c.access_log_format, d.access_log_format);
    ck_assert_ptr_null(c.error_log_path);
    ck_assert_int_eq(c.error_log_level, d.error_log_level);
    ck_assert_ptr_null(c.pid_file);
    ck_assert_ptr_null(c.user);
    ck_assert_ptr_null(c.group);
    ck_assert_int_eq(c.pubsub.backend, d.pubsub.backend);
    ck_assert_ptr_null(c.pubsub.url);
    ck_assert_str_eq(c.pubsub.prefix, d.pubsub.prefix);
    ck_assert_uint_eq(c.pubsub.buffer, d.pubsub.buffer);
    config_free(&c);
    config_free(&d);
}

/* http2_window and ws_queue follow write unless set; each can be set (or
 * turned off) on its own. */
START_TEST(test_load_stall_timeouts)
{
    pagid_config c;
    ck_assert_int_eq(load(&c, "timeouts:\n  write: 7s\n"), 0);
    ck_assert_int_eq(config_finalize(&c, stderr), 0);
    ck_assert_double_eq(c.timeouts.write, 7);
    ck_assert_double_eq(c.timeouts.http2_window, 7);
    ck_assert_double_eq(c.timeouts.ws_queue, 7);
    config_free(&c);
    ck_assert_int_eq(load(&c, "timeouts:\n  http2_window: 2s\n  ws_queue: 0\n"), 0);
    ck_assert_int_eq(config_finalize(&c, stderr), 0);
    ck_assert_double_eq(c.timeouts.write, 60);
    ck_assert_double_eq(c.timeouts.http2_window, 2);
    ck_assert_double_eq(c.timeouts.ws_queue, 0);
    config_free(&c);
    ck_assert_int_ne(load(&c, "timeouts:\n  ws_queue: 2x\n"), 0);
    ck_assert_ptr_nonnull(strstr(out_text, "ws_queue"));
    config_free(&c);
}
END_TEST

START_TEST(test_load_pubsub)
{
    pagid_config c;
    ck_assert_int_eq(load(&c, "pubsub:\n  backend: redis\n  url: redis://:s3cret@10.0.0.5:6380/2\n"
                              "  prefix: app1/\n  buffer: 4m\n"),
                     0);
    ck_assert_int_eq(c.pubsub.backend, PUBSUB_BACKEND_REDIS);
    ck_assert_str_eq(c.pubsub.url, "redis://:s3cret@10.0.0.5:6380/2");
    ck_assert_str_eq(c.pubsub.prefix, "app1/");
    ck_assert_uint_eq(c.pubsub.buffer, 4u << 20);
    ck_assert_uint_eq(c.pubsub.url_pos.line, 3);
    ck_assert_int_eq(config_finalize(&c, stderr), 0);
    config_free(&c);
    /* an empty prefix is allowed: channel names go to Redis as they are */
    ck_assert_int_eq(load(&c, "pubsub:\n  prefix: ~\n"), 0);
    ck_assert_str_eq(c.pubsub.prefix, "");
    config_free(&c);
}
END_TEST

START_TEST(test_err_pubsub)
{
    expect_error("pubsub:\n  url: http://x\n",
                 "t.yaml:2:8: invalid 'pubsub.url' 'http://x': expected redis://HOST[:PORT][/DB], "
                 "redis+unix:///PATH or unix:/PATH");
    expect_error("pubsub:\n  url: redis://h:99999\n",
                 "t.yaml:2:8: invalid 'pubsub.url' 'redis://h:99999': the port must be a number "
                 "from 1 to 65535");
    /* the password is never echoed */
    expect_error("pubsub:\n  url: redis://:pw@h:0\n",
                 "t.yaml:2:8: invalid 'pubsub.url' 'redis://...': the port must be a number from 1 "
                 "to 65535");
    expect_error("pubsub:\n  backend: rediss\n",
                 "t.yaml:2:12: invalid 'pubsub.backend' 'rediss' (did you mean 'redis'?)");
    expect_error("pubsub:\n  buffr: 1m\n",
                 "t.yaml:2:3: unknown key 'buffr' in 'pubsub' (did you mean 'buffer'?)");
    /* redis without a url: caught when the whole config is known */
    pagid_config c;
    ck_assert_int_eq(load(&c, "pubsub:\n  backend: redis\n"), 0);
    char *text = NULL;
    size_t len;
    FILE *f = open_memstream(&text, &len);
    ck_assert_int_eq(config_finalize(&c, f), -1);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(text, "t.yaml:2:12: 'pubsub.backend: redis' needs 'pubsub.url'"));
    free(text);
    config_free(&c);
}
END_TEST
END_TEST

START_TEST(test_load_empty_inputs)
{
    static const char *const empty[] = {"",        "\n\n",      "# only a comment\n", "---\n",
                                        "--- ~\n", "limits:\n", "timeouts: ~\n"};
    for (size_t i = 0; i < sizeof empty / sizeof empty[0]; i++) {
        pagid_config c;
        ck_assert_msg(load(&c, empty[i]) == 0, "'%s': %s", empty[i], out_text);
        ck_assert_str_eq(c.app, CONFIG_DEFAULT_APP);
        ck_assert_uint_eq(c.limits.max_header_count, 100);
        config_free(&c);
    }
}
END_TEST

START_TEST(test_load_scalar_forms)
{
    pagid_config c;
    ck_assert_int_eq(load(&c, "listen: ':9000'\nworkers: auto\n"), 0);
    ck_assert_uint_eq(c.n_listens, 1);
    ck_assert_int_eq(c.listens[0].port, 9000);
    ck_assert_int_eq(c.workers, CONFIG_WORKERS_AUTO);
    config_free(&c);

    /* Quoted numbers and flow style are the same to us. */
    ck_assert_int_eq(load(&c, "{workers: \"0\", limits: {max_body_size: '0'}}"), 0);
    ck_assert_int_eq(c.workers, 0);
    ck_assert_uint_eq(c.limits.max_body_size, 0);
    config_free(&c);

    /* Nullable strings: ~ and empty unset them; access_log path 'off' too. */
    ck_assert_int_eq(load(&c, "pid_file: /run/a.pid\npid_file2: x\n"), 1);
    config_free(&c);
    ck_assert_int_eq(load(&c, "pid_file: ~\nuser:\naccess_log:\n  path: off\n"), 0);
    ck_assert_ptr_null(c.pid_file);
    ck_assert_ptr_null(c.user);
    ck_assert_ptr_null(c.access_log_path);
    config_free(&c);

    ck_assert_int_eq(load(&c, "access_log:\n  format: '%h %r %s'\n"), 0);
    ck_assert_str_eq(c.access_log_format, "%h %r %s");
    config_free(&c);
}
END_TEST

START_TEST(test_load_app_mapping)
{
    pagid_config c;
    char yaml[256], want[256];
    make_tmpdir();
    snprintf(yaml, sizeof yaml, "app: {static: %s}\n", tmpdir);
    ck_assert_int_eq(load(&c, yaml), 0);
    snprintf(want, sizeof want, "static:%s", tmpdir);
    ck_assert_str_eq(c.app, want);
    config_free(&c);

    snprintf(yaml, sizeof yaml, "app:\n  module: %s\n", so_path);
    ck_assert_int_eq(load(&c, yaml), 0);
    ck_assert_str_eq(c.app, so_path);
    config_free(&c);

    snprintf(yaml, sizeof yaml, "app: static:%s\n", tmpdir);
    ck_assert_int_eq(load(&c, yaml), 0);
    ck_assert_str_eq(c.app, want);
    config_free(&c);
    remove_tmpdir();

    expect_ok("app: demo\n");
    expect_error("app: {static: /nonexistent-pagid}\n",
                 "t.yaml:1:15: static directory '/nonexistent-pagid': No such file or directory");
    expect_error("app: {module: /nonexistent-pagid/m.so}\n",
                 "t.yaml:1:15: app module '/nonexistent-pagid/m.so': No such file or directory");
    expect_error("app: {perl: x.txt}\n",
                 "t.yaml:1:13: 'app.perl' must name a PAGI Perl app file (.pl)");
    expect_error("app: {static: /tmp, lib: [/x]}\n",
                 "t.yaml:1:21: 'app.lib' applies to perl apps only");
    expect_error("app: {perl: x.pl, lib: [a:b]}\n",
                 "t.yaml:1:25: 'app.lib' entries must be non-empty directories without ':'");
#ifdef PAGID_WITH_PERL
    expect_error("app: {perl: /nonexistent-pagid/x.pl}\n",
                 "t.yaml:1:13: Perl app '/nonexistent-pagid/x.pl': No such file or directory");
    /* A Perl app file with its @INC additions, as a list or a single directory. */
    char pl[128];
    make_tmpdir();
    snprintf(pl, sizeof pl, "%s/app.pl", tmpdir);
    FILE *f = fopen(pl, "w");
    ck_assert_ptr_nonnull(f);
    fputs("sub { }\n", f);
    fclose(f);
    snprintf(yaml, sizeof yaml, "app: {perl: %.120s, lib: [/opt/a, /opt/b]}\n", pl);
    ck_assert_int_eq(load(&c, yaml), 0);
    ck_assert_str_eq(c.app, pl);
    ck_assert_str_eq(c.perl_lib, "/opt/a:/opt/b");
    config_free(&c);
    snprintf(yaml, sizeof yaml, "app:\n  perl: %.120s\n  lib: /opt/c\n", pl);
    ck_assert_int_eq(load(&c, yaml), 0);
    ck_assert_str_eq(c.perl_lib, "/opt/c");
    config_free(&c);
    unlink(pl);
    remove_tmpdir();
#else
    expect_error("app: {perl: x.pl}\n",
                 "t.yaml:1:13: Perl applications need pagid built with the Perl host");
#endif
    expect_error("app: {static: a, module: b}\n",
                 "t.yaml:1:6: 'app' as a mapping takes exactly one of static, module, perl or psgi");
    expect_error("app: {static: [a]}\n",
                 "t.yaml:1:15: 'app.static' must be a single value, not a list");
}
END_TEST

START_TEST(test_load_mounts)
{
    pagid_config c;
    char yaml[1024], want[256];
    make_tmpdir();
    snprintf(yaml, sizeof yaml,
             "app: {static: %s, listing: yes, follow_symlinks: false}\n"
             "mounts:\n"
             "  - path: /static/\n"
             "    app: static:%s\n"
             "  - {path: /files, app: {static: %s, listing: true}}\n"
             "  - path: /api\n"
             "    app: echo\n",
             tmpdir, tmpdir, tmpdir);
    ck_assert_int_eq(load(&c, yaml), 0);
    ck_assert_int_eq(c.app_static.listing, 1);
    ck_assert_int_eq(c.app_static.follow_symlinks, 0);
    ck_assert_uint_eq(c.n_mounts, 3);
    ck_assert_str_eq(c.mounts[0].path, "/static");
    snprintf(want, sizeof want, "static:%s", tmpdir);
    ck_assert_str_eq(c.mounts[0].app, want);
    ck_assert_int_eq(c.mounts[0].static_opts.listing, 0);
    ck_assert_str_eq(c.mounts[1].path, "/files");
    ck_assert_int_eq(c.mounts[1].static_opts.listing, 1);
    ck_assert_str_eq(c.mounts[2].path, "/api");
    ck_assert_str_eq(c.mounts[2].app, "echo");
    config_free(&c);

    /* A plain app spec resets the mapping form's options. */
    snprintf(yaml, sizeof yaml, "app: {static: %s, follow_symlinks: on}\n", tmpdir);
    ck_assert_int_eq(load(&c, yaml), 0);
    ck_assert_int_eq(c.app_static.follow_symlinks, 1);
    const char *msg;
    ck_assert_int_eq(config_set_app(&c, "hello", &msg), 0);
    ck_assert_int_eq(c.app_static.follow_symlinks, 0);
    config_free(&c);
    remove_tmpdir();

    expect_ok("mounts:\n");
    expect_ok("mounts: []\n");
    expect_error("mounts: /x\n",
                 "t.yaml:1:9: 'mounts' must be a list of {path, app} mappings, not a single value");
    expect_error("mounts:\n  - /x\n", "t.yaml:2:5: each entry of 'mounts' must be a mapping with "
                                      "path and app, not a single value");
    expect_error("mounts:\n  - {path: /x}\n",
                 "t.yaml:2:5: a 'mounts' entry needs both path and app");
    expect_error("mounts:\n  - {path: /x, app: hello, extra: 1}\n",
                 "t.yaml:2:28: unknown key 'extra' in a 'mounts' entry (expected path and app)");
    expect_error("mounts:\n  - {path: /x, path: /y, app: hello}\n",
                 "t.yaml:2:16: duplicate key 'path' in a 'mounts' entry");
    expect_error("mounts:\n  - {path: x, app: hello}\n",
                 "t.yaml:2:12: mount path 'x' must start with '/'");
    expect_error("mounts:\n  - {path: /, app: hello}\n",
                 "t.yaml:2:12: mount path '/' is the top-level app's place; mount under a longer "
                 "path");
    expect_error("mounts:\n  - {path: /a/../b, app: hello}\n",
                 "t.yaml:2:12: mount path '/a/../b' must not contain empty, '.' or '..' segments");
    expect_error("mounts:\n  - {path: /a, app: hello}\n  - {path: /a/, app: echo}\n",
                 "t.yaml:3:12: mount path '/a/' is mounted twice");
    expect_error(
        "mounts:\n  - {path: /a, app: bogus}\n",
        "t.yaml:2:21: unknown app 'bogus' (expected hello, echo, demo, pubsub, static:DIR, a .so "
        "module, a PAGI app FILE.pl or a PSGI app FILE.psgi)");
    expect_error("mounts:\n  - {path: /a, app: {module: x.so, listing: true}}\n",
                 "t.yaml:2:36: 'mounts.app.listing' applies to static apps only");
    expect_error("app: {static: /tmp, listing: maybe}\n",
                 "t.yaml:1:30: 'app.listing' must be true or false, not 'maybe'");
    expect_error("app: {listing: true}\n",
                 "t.yaml:1:6: 'app' as a mapping takes exactly one of static, module, perl or psgi");
}
END_TEST

START_TEST(test_load_aliases)
{
    pagid_config c;
    ck_assert_int_eq(load(&c, "timeouts:\n  idle: &t 45s\n  request: *t\n"), 0);
    ck_assert_double_eq(c.timeouts.idle, 45);
    ck_assert_double_eq(c.timeouts.request, 45);
    config_free(&c);

    /* A whole section reused by alias is walked like the original. */
    ck_assert_int_eq(load(&c, "limits: &l {max_header_count: 7}\nx: *l\n"), 1);
    ck_assert_uint_eq(c.limits.max_header_count, 7);
    config_free(&c);

    /* An alias of its own ancestor: the schema bounds the walk. */
    ck_assert_int_gt(load(&c, "listen: &a [*a]\n"), 0);
    config_free(&c);
    ck_assert_int_gt(load(&c, "limits: &a {max_body_size: *a}\n"), 0);
    config_free(&c);
    ck_assert_int_gt(load(&c, "&a {limits: *a}\n"), 0);
    config_free(&c);

    expect_error("workers: *nope\n", "t.yaml:1:10: found undefined alias '*nope'");
}
END_TEST

/* An aliased app mapping or lib list is worked out once and reused: the
 * aliases get the same spec, options and @INC; one that fails is reported
 * at each use, as it always was. */
START_TEST(test_load_aliased_apps)
{
    pagid_config c;
    char yaml[512], want[256];
    make_tmpdir();
    snprintf(yaml, sizeof yaml,
             "app: &s {static: %s, listing: true}\n"
             "mounts: [{path: /a, app: *s}, {path: /b, app: {static: %s}}, {path: /c, app: *s}]\n",
             tmpdir, tmpdir);
    ck_assert_int_eq(load(&c, yaml), 0);
    snprintf(want, sizeof want, "static:%s", tmpdir);
    ck_assert_str_eq(c.app, want);
    ck_assert_int_eq(c.app_static.listing, 1);
    ck_assert_uint_eq(c.n_mounts, 3);
    ck_assert_str_eq(c.mounts[0].app, want);
    ck_assert_int_eq(c.mounts[0].static_opts.listing, 1);
    ck_assert_int_eq(c.mounts[1].static_opts.listing, 0);
    ck_assert_str_eq(c.mounts[2].app, want);
    ck_assert_int_eq(c.mounts[2].static_opts.listing, 1);
    config_free(&c);
    remove_tmpdir();

    ck_assert_int_eq(load(&c, "mounts: [{path: /a, app: &b {static: /nonexistent-pagid}},"
                              " {path: /b, app: *b}]\n"),
                     2);
    ck_assert_str_eq(
        out_text,
        "t.yaml:1:38: static directory '/nonexistent-pagid': No such file or directory\n"
        "t.yaml:1:38: static directory '/nonexistent-pagid': No such file or directory\n");
    config_free(&c);
#ifdef PAGID_WITH_PERL
    char pl[128];
    make_tmpdir();
    snprintf(pl, sizeof pl, "%s/app.pl", tmpdir);
    FILE *f = fopen(pl, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    snprintf(
        yaml, sizeof yaml,
        "app: {perl: %s, lib: &l [/x, /y]}\n"
        "mounts: [{path: /m, app: {perl: %s, lib: *l}}, {path: /n, app: {perl: %s, lib: *l}}]\n",
        pl, pl, pl);
    ck_assert_int_eq(load(&c, yaml), 0);
    ck_assert_str_eq(c.perl_lib, "/x:/y");
    config_free(&c);
    snprintf(
        yaml, sizeof yaml,
        "app: {perl: %s, lib: &l [/x, 'a:b']}\nmounts: [{path: /m, app: {perl: %s, lib: *l}}]\n",
        pl, pl);
    ck_assert_int_eq(load(&c, yaml), 2);
    size_t col = strlen("app: {perl: , lib: &l [/x, ") + strlen(pl) + 1;
    snprintf(want, sizeof want,
             "t.yaml:1:%zu: 'app.lib' entries must be non-empty directories without ':'\n"
             "t.yaml:1:%zu: 'mounts.app.lib' entries must be non-empty directories without ':'\n",
             col, col);
    ck_assert_str_eq(out_text, want);
    config_free(&c);
    unlink(pl);
    remove_tmpdir();
#endif
}
END_TEST

/* Aliases are shared nodes, but the walk visits them in full: their
 * expansion is bounded, at the alias that passes the bound. */
START_TEST(test_load_alias_bounds)
{
    expect_error("listen: &a [*a]\n", "t.yaml:1:13: alias '*a' refers to a node that contains it");
    expect_error("a: &x 1\nlisten: &x [127.0.0.1:1]\n", "t.yaml:2:9: found duplicate anchor '&x'");
    /* "Billion laughs": 10 levels of 10 aliases each; refused before the walk
     * (the unknown keys would otherwise be reported too). */
    buf y = BUF_INIT;
    buf_printf(&y, "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for (int i = 1; i < 10; i++) {
        buf_printf(&y, "a%d: &a%d [", i, i);
        for (int j = 0; j < 10; j++)
            buf_printf(&y, "%s*a%d", j ? ", " : "", i - 1);
        buf_printf(&y, "]\n");
    }
    buf_append(&y, "", 1);
    /* a4 is 111,111 nodes; a1..a4 add 123,440; the 8th *a4 in a5 passes a million. */
    expect_error(buf_head(&y), "t.yaml:6:45: aliases expand to more than 1000000 nodes (at "
                               "'*a4'): refusing a config that repeats itself this much");
    buf_free(&y);

    /* Many aliases of a small node stay well inside the bound. */
    buf z = BUF_INIT;
    buf_printf(&z, "timeouts: &t {idle: 5s}\nmounts:\n");
    for (int i = 0; i < 2000; i++)
        buf_printf(&z, "  - {path: /m%d, app: &a%d hello}\n  - {path: /n%d, app: *a%d}\n", i, i, i,
                   i);
    buf_append(&z, "", 1);
    pagid_config c;
    ck_assert_int_eq(load(&c, buf_head(&z)), 0);
    ck_assert_uint_eq(c.n_mounts, 4000);
    ck_assert_str_eq(c.mounts[3999].path, "/n1999");
    ck_assert_str_eq(c.mounts[3999].app, "hello");
    config_free(&c);
    buf_free(&z);
}
END_TEST

START_TEST(test_load_replaces_listens)
{
    pagid_config c;
    const char *msg;
    config_init_defaults(&c);
    ck_assert_int_eq(config_add_listen(&c, ":1111", &msg), 0);
    FILE *null = fopen("/dev/null", "w");
    ck_assert_int_eq(config_load_string(&c, "listen: [':2222', ':3333']\n", "a", null), 0);
    fclose(null);
    ck_assert_uint_eq(c.n_listens, 2);
    ck_assert_int_eq(c.listens[0].port, 2222);
    ck_assert_int_eq(c.listens[1].port, 3333);
    config_free(&c);
}
END_TEST

START_TEST(test_load_listen_mapping)
{
    pagid_config c;
    ck_assert_int_eq(load(&c, "listen:\n"
                              "  - ':8080'\n"
                              "  - {address: 'unix:/run/a.sock', mode: '0660', owner: root, "
                              "group: root}\n"
                              "  - address: unix:/run/b.sock\n"
                              "    mode: 600\n"
                              "    owner: 4242\n"
                              "  - {address: unix:/run/c.sock, mode: 0o640, group: 77}\n"
                              "  - {address: '127.0.0.1:81'}\n"),
                     0);
    ck_assert_str_eq(out_text, "");
    ck_assert_uint_eq(c.n_listens, 5);
    ck_assert(!c.listens[0].has_mode && !c.listens[0].has_uid && !c.listens[0].has_gid);
    ck_assert_int_eq(c.listens[1].kind, LISTEN_UNIX);
    ck_assert_str_eq(c.listens[1].path, "/run/a.sock");
    ck_assert(c.listens[1].has_mode && c.listens[1].has_uid && c.listens[1].has_gid);
    ck_assert_uint_eq(c.listens[1].mode, 0660);
    ck_assert_uint_eq(c.listens[1].uid, 0);
    ck_assert_uint_eq(c.listens[1].gid, 0);     /* names resolved at load time */
    ck_assert_uint_eq(c.listens[2].mode, 0600); /* octal even without the leading 0 */
    ck_assert(c.listens[2].has_uid && !c.listens[2].has_gid);
    ck_assert_uint_eq(c.listens[2].uid, 4242); /* numeric ids need no passwd entry */
    ck_assert_uint_eq(c.listens[3].mode, 0640);
    ck_assert(!c.listens[3].has_uid && c.listens[3].has_gid);
    ck_assert_uint_eq(c.listens[3].gid, 77);
    ck_assert_int_eq(c.listens[4].kind, LISTEN_TCP);
    ck_assert_int_eq(c.listens[4].port, 81);
    config_free(&c);
    /* A single mapping needs no list around it. */
    ck_assert_int_eq(load(&c, "listen: {address: 'unix:/run/d.sock', mode: 0}\n"), 0);
    ck_assert_uint_eq(c.n_listens, 1);
    ck_assert(c.listens[0].has_mode);
    ck_assert_uint_eq(c.listens[0].mode, 0);
    config_free(&c);
}
END_TEST

/* ---- the YAML loader: every error class, with exact positions ----------- */

START_TEST(test_err_syntax)
{
    expect_error("a: b: c\n", "t.yaml:1:5: mapping values are not allowed in this context");
    expect_error("limits:\n\tmax_body_size: 1\n",
                 "t.yaml:2:1: found character that cannot start any token (while scanning for "
                 "the next token)");
    expect_error("listen: [a, b\n",
                 "t.yaml:2:1: did not find expected ',' or ']' (while parsing a flow sequence)");
    expect_error("workers: \"4\n",
                 "t.yaml:2:1: found unexpected end of stream (while scanning a quoted scalar)");
    /* Reader errors carry only a byte offset; the loader turns it into LINE:COL. */
    expect_error("workers: 1\nuser: \xff\n", "t.yaml:2:7: invalid leading UTF-8 octet");
    /* Deep nesting is refused up front (libyaml is quadratic in depth);
     * the root mapping is level 1, so the 32nd "[" is one too many. */
    static char deep[40010] = "a: ";
    memset(deep + 3, '[', 20000);
    memset(deep + 20003, ']', 20000);
    expect_error(deep, "t.yaml:1:35: nested more than 32 levels deep");
    expect_error("workers: 1\n---\nworkers: 2\n",
                 "t.yaml:3:1: more than one YAML document; a config file holds one");
}
END_TEST

START_TEST(test_err_unknown_key)
{
    expect_error("foo: 1\n", "t.yaml:1:1: unknown key 'foo'");
    expect_error("limits:\n  foo: 1\n", "t.yaml:2:3: unknown key 'foo' in 'limits'");
    /* A close name is suggested (test_config_suggest.c has the cases). */
    expect_error("timeouts:\n  header: 1s\n  idel: 5s\n",
                 "t.yaml:3:3: unknown key 'idel' in 'timeouts' (did you mean 'idle'?)");
    expect_error("error_log: {paht: x}\n",
                 "t.yaml:1:13: unknown key 'paht' in 'error_log' (did you mean 'path'?)");
    /* Control characters in a key are not echoed raw. */
    expect_error("\"a\\tb\\u0007\": 1\n", "t.yaml:1:1: unknown key 'a?b?'");
    expect_error("\"work\\0ers\": 1\n",
                 "t.yaml:1:1: unknown key 'work?ers' (did you mean 'workers'?)");
    expect_error("[a]: 1\n", "t.yaml:1:1: keys must be plain names, not a list");
}
END_TEST

START_TEST(test_err_wrong_type)
{
    expect_error("- a\n- b\n", "t.yaml:1:1: the top level must be a mapping of keys, not a list");
    expect_error("just text\n",
                 "t.yaml:1:1: the top level must be a mapping of keys, not a single value");
    expect_error("limits: 5\n", "t.yaml:1:9: 'limits' must be a mapping, not a single value");
    expect_error("timeouts: [1s]\n", "t.yaml:1:11: 'timeouts' must be a mapping, not a list");
    expect_error("workers: [1]\n", "t.yaml:1:10: 'workers' must be a single value, not a list");
    expect_error("timeouts:\n  idle: {a: 1}\n",
                 "t.yaml:2:9: 'timeouts.idle' must be a single value, not a mapping");
    expect_error("listen: {a: 1}\n",
                 "t.yaml:1:10: unknown key 'a' in a 'listen' entry (expected address, mode, owner, "
                 "group, tls or http2)");
    expect_error("listen: [[':80']]\n", "t.yaml:1:10: 'listen' must be a single value, not a list");
    expect_error("workers:\n", "t.yaml:1:9: 'workers' needs a value");
    expect_error("pid_file: [a]\n", "t.yaml:1:11: 'pid_file' must be a single value, not a list");
    expect_error("user: \"ro\\0ot\"\n", "t.yaml:1:7: 'user' contains a NUL byte");
}
END_TEST

START_TEST(test_err_bad_size_and_duration)
{
    expect_error("limits:\n  max_body_size: 10q\n",
                 "t.yaml:2:18: invalid size '10q' for 'limits.max_body_size' (expected e.g. 512, "
                 "64k, 10m, 1g)");
    expect_error("flow_control: {high_watermark: -1}\n",
                 "t.yaml:1:32: invalid size '-1' for 'flow_control.high_watermark' (expected e.g. "
                 "512, 64k, 10m, 1g)");
    expect_error("limits:\n  max_ws_message_size: 99999999999999999999g\n",
                 "t.yaml:2:24: invalid size '99999999999999999999g' for "
                 "'limits.max_ws_message_size' (expected e.g. 512, 64k, 10m, 1g)");
    expect_error("limits:\n  max_connections: 10k\n",
                 "t.yaml:2:20: invalid number '10k' for 'limits.max_connections' (expected a "
                 "whole number)");
    expect_error("timeouts:\n  header: 30x\n",
                 "t.yaml:2:11: invalid duration '30x' for 'timeouts.header' (expected e.g. 500ms, "
                 "30s, 5m, 1h, at most 1 year; 0 disables)");
    expect_error("timeouts:\n  idle: -5s\n",
                 "t.yaml:2:9: invalid duration '-5s' for 'timeouts.idle' (expected e.g. 500ms, "
                 "30s, 5m, 1h, at most 1 year; 0 disables)");
}
END_TEST

START_TEST(test_err_out_of_range)
{
    expect_error("workers: 2000\n", "t.yaml:1:10: invalid workers '2000': out of range (0..1024)");
    expect_error("workers: many\n",
                 "t.yaml:1:10: invalid workers 'many': expected a number or 'auto'");
    expect_error("limits:\n  max_header_count: 0\n",
                 "t.yaml:2:21: 'limits.max_header_count' must be at least 1");
    expect_error("limits:\n  max_connections: 99999999999999999999999\n",
                 "t.yaml:2:20: 'limits.max_connections' must be at most 10000000");
    expect_error("limits:\n  max_request_line: 8\n",
                 "t.yaml:2:21: 'limits.max_request_line' must be at least 16");
    expect_error("limits:\n  http2_stream_window: 2g\n",
                 "t.yaml:2:24: 'limits.http2_stream_window' must be at most 2147483647");
    expect_error("flow_control:\n  high_watermark: 8k\n",
                 "t.yaml:2:19: 'flow_control.low_watermark' (16384) must be less than "
                 "'flow_control.high_watermark' (8192)");
    expect_error("flow_control:\n  high_watermark: 8k\n  low_watermark: 8k\n",
                 "t.yaml:3:18: 'flow_control.low_watermark' (8192) must be less than "
                 "'flow_control.high_watermark' (8192)");
    expect_ok("flow_control:\n  high_watermark: 8k\n  low_watermark: 0\n");
}
END_TEST

START_TEST(test_err_listen)
{
    expect_error("listen:\n  - 127.0.0.1:8080\n  - localhost\n",
                 "t.yaml:3:5: invalid listen address 'localhost': missing port (use HOST:PORT)");
    expect_error("listen: ':70000'\n",
                 "t.yaml:1:9: invalid listen address ':70000': invalid port (expected 1..65535)");
    expect_error("listen: ['unix:relative.sock']\n",
                 "t.yaml:1:10: invalid listen address 'unix:relative.sock': unix socket path must "
                 "be absolute (unix:/PATH)");
    expect_error("listen: ['[::1:80']\n",
                 "t.yaml:1:10: invalid listen address '[::1:80': unbalanced '[' (use [ADDR]:PORT)");
    expect_error("listen: [':80', '*:80']\n",
                 "t.yaml:1:17: invalid listen address '*:80': duplicate listen address");
    expect_error("listen: []\n", "t.yaml:1:9: 'listen' is an empty list");
}
END_TEST

START_TEST(test_err_app_and_enums)
{
    expect_error("app: bogus\n",
                 "t.yaml:1:6: unknown app 'bogus' (expected hello, echo, demo, pubsub, "
                 "static:DIR, a .so module, a PAGI app FILE.pl or a PSGI app FILE.psgi)");
#ifdef PAGID_WITH_PERL
    expect_error("app: ./app.pl\n", "t.yaml:1:6: Perl app './app.pl': No such file or directory");
#else
    expect_error("app: ./app.pl\n",
                 "t.yaml:1:6: Perl applications need pagid built with the Perl host");
#endif
    expect_error("error_log:\n  level: loud\n",
                 "t.yaml:2:10: invalid log level 'loud' (expected error, warn, info or debug)");
    expect_error("access_log:\n  format: fancy\n",
                 "t.yaml:2:11: invalid access log format 'fancy' (expected clf, combined, json or "
                 "a custom format containing %)");
}
END_TEST

START_TEST(test_err_duplicate_key)
{
    expect_error("workers: 1\nworkers: 2\n",
                 "t.yaml:2:1: duplicate key 'workers' (first set at t.yaml:1:1)");
    expect_error("limits:\n  max_body_size: 1k\n  max_body_size: 2k\n",
                 "t.yaml:3:3: duplicate key 'max_body_size' in 'limits' (first set at t.yaml:2:3)");
    /* Sections and lists merge across files only: in one file, once. */
    expect_error("limits: {max_body_size: 1k}\nlimits: {max_header_count: 5}\n",
                 "t.yaml:2:1: duplicate key 'limits' (first set at t.yaml:1:1)");
    expect_error("listen: ':1'\nlisten: ':2'\n",
                 "t.yaml:2:1: duplicate key 'listen' (first set at t.yaml:1:1)");
    /* The first value stands. */
    pagid_config c;
    ck_assert_int_eq(load(&c, "workers: 1\nworkers: 2\n"), 1);
    ck_assert_int_eq(c.workers, 1);
    config_free(&c);
}
END_TEST

START_TEST(test_err_many_reported_in_order)
{
    pagid_config c;
    int n = load(&c, "workers: x\n"
                     "bogus: 1\n"
                     "limits:\n"
                     "  max_header_count: 0\n"
                     "  max_body_size: 5m\n"
                     "timeouts:\n"
                     "  idle: forever\n");
    ck_assert_int_eq(n, 4);
    ck_assert_str_eq(out_text,
                     "t.yaml:1:10: invalid workers 'x': expected a number or 'auto'\n"
                     "t.yaml:2:1: unknown key 'bogus'\n"
                     "t.yaml:4:21: 'limits.max_header_count' must be at least 1\n"
                     "t.yaml:7:9: invalid duration 'forever' for 'timeouts.idle' (expected e.g. "
                     "500ms, 30s, 5m, 1h, at most 1 year; 0 disables)\n");
    /* What was valid is kept. */
    ck_assert_uint_eq(c.limits.max_body_size, 5u << 20);
    ck_assert_uint_eq(c.limits.max_header_count, 100);
    config_free(&c);
}
END_TEST

START_TEST(test_load_file_errors)
{
    pagid_config c;
    char *text = NULL;
    size_t len;
    FILE *err = open_memstream(&text, &len);
    config_init_defaults(&c);
    ck_assert_int_eq(config_load_file(&c, "/nonexistent-pagid/pagid.yaml", err), 1);
    fflush(err);
    ck_assert_str_eq(text,
                     "/nonexistent-pagid/pagid.yaml: cannot open: No such file or directory\n");
    fclose(err);
    free(text);

    /* A real file: messages carry its path. */
    char path[] = "/tmp/pagid-test-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "workers: 1\nlimits:\n  nope: 1\n", 29), 29);
    close(fd);
    text = NULL;
    err = open_memstream(&text, &len);
    ck_assert_int_eq(config_load_file(&c, path, err), 1);
    fclose(err);
    char want[128];
    snprintf(want, sizeof want, "%s:3:3: unknown key 'nope' in 'limits'\n", path);
    ck_assert_str_eq(text, want);
    ck_assert_str_eq(c.source, path);
    ck_assert_int_eq(c.workers, 1);
    free(text);
    unlink(path);

    /* A directory opens but does not read. */
    text = NULL;
    err = open_memstream(&text, &len);
    ck_assert_int_eq(config_load_file(&c, "/tmp", err), 1);
    fclose(err);
    ck_assert_str_eq(text, "/tmp: cannot read: Is a directory\n");
    free(text);
    config_free(&c);
}
END_TEST

/* Mutations of a valid file must never crash or leak, whatever they report. */
START_TEST(test_load_mutations_never_crash)
{
    static const char alphabet[] = " \n\t:-[]{},&*!|>'\"%@`#?~0123456789kmsgx\\\xff\x01";
    size_t base_len = strlen(full_yaml);
    char *m = malloc(base_len + 64);
    unsigned seed = 12345;
    FILE *null = fopen("/dev/null", "w");
    for (int iter = 0; iter < 3000; iter++) {
        memcpy(m, full_yaml, base_len + 1);
        size_t len = base_len;
        for (int k = 0; k < 1 + iter % 4; k++) {
            seed = seed * 1103515245 + 12345;
            size_t pos = (seed >> 8) % len;
            seed = seed * 1103515245 + 12345;
            char ch = alphabet[(seed >> 8) % (sizeof alphabet - 1)];
            if (iter % 3 == 0 && len > 1) { /* delete */
                memmove(m + pos, m + pos + 1, len - pos);
                len--;
            } else if (iter % 3 == 1 && len < base_len + 60) { /* insert */
                memmove(m + pos + 1, m + pos, len - pos + 1);
                m[pos] = ch;
                len++;
            } else {
                m[pos] = ch;
            }
        }
        pagid_config c;
        config_init_defaults(&c);
        int n = config_load_string(&c, m, "fuzz", null);
        ck_assert_int_ge(n, 0);
        config_free(&c);
    }
    fclose(null);
    free(m);
}
END_TEST
START_TEST(test_err_listen_mapping)
{
    expect_error("listen:\n  - {address: '127.0.0.1:80', mode: '0660'}\n",
                 "t.yaml:2:31: 'listen.mode' applies to unix socket addresses only");
    expect_error("listen:\n  - address: ':80'\n    owner: root\n",
                 "t.yaml:3:5: 'listen.owner' applies to unix socket addresses only");
    expect_error("listen: {address: '[::1]:80', group: daemon}\n",
                 "t.yaml:1:31: 'listen.group' applies to unix socket addresses only");
    expect_error("listen:\n  - {mode: '0600'}\n", "t.yaml:2:5: a 'listen' entry needs an address");
    expect_error("listen:\n  - {address: 'unix:/a.sock', user: root}\n",
                 "t.yaml:2:31: unknown key 'user' in a 'listen' entry (expected address, mode, "
                 "owner, group, tls or http2)");
    expect_error("listen:\n  - {address: 'unix:/a.sock', mode: 1, mode: 2}\n",
                 "t.yaml:2:40: duplicate key 'mode' in a 'listen' entry");
    expect_error("listen:\n  - {address: 'unix:a.sock'}\n",
                 "t.yaml:2:15: invalid listen address 'unix:a.sock': unix socket path must be "
                 "absolute (unix:/PATH)");
    expect_error("listen:\n  - {address: [1]}\n",
                 "t.yaml:2:15: 'listen.address' must be a single value, not a list");
    expect_error("listen:\n  - {address: 'unix:/a.sock', mode: '0999'}\n",
                 "t.yaml:2:37: invalid mode '0999' for 'listen.mode' (expected octal permissions "
                 "such as 0660, at most 0777)");
    expect_error("listen:\n  - address: 'unix:/a.sock'\n    mode: 01777\n",
                 "t.yaml:3:11: invalid mode '01777' for 'listen.mode' (expected octal permissions "
                 "such as 0660, at most 0777)");
    expect_error("listen:\n  - address: 'unix:/a.sock'\n    mode: rw-rw----\n",
                 "t.yaml:3:11: invalid mode 'rw-rw----' for 'listen.mode' (expected octal "
                 "permissions such as 0660, at most 0777)");
    expect_error("listen:\n  - address: 'unix:/a.sock'\n    mode:\n",
                 "t.yaml:3:10: 'listen.mode' needs a value");
    expect_error("listen:\n  - address: 'unix:/a.sock'\n    owner: no-such-user-pagid\n",
                 "t.yaml:3:12: unknown user 'no-such-user-pagid' for 'listen.owner'");
    expect_error("listen:\n  - address: 'unix:/a.sock'\n    group: no-such-group-pagid\n",
                 "t.yaml:3:12: unknown group 'no-such-group-pagid' for 'listen.group'");
    expect_error("listen:\n  - address: 'unix:/a.sock'\n    owner: 4294967295\n",
                 "t.yaml:3:12: unknown user '4294967295' for 'listen.owner'");
    expect_error("listen:\n  - unix:/a.sock\n  - {address: 'unix:/a.sock', mode: 0600}\n",
                 "t.yaml:3:15: invalid listen address 'unix:/a.sock': duplicate listen address");
}
END_TEST

static Suite *config_yaml_suite(void)
{
    Suite *s = suite_create("config_yaml");
    TCase *tc = tcase_create("valid");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_add_test(tc, test_load_full);
    tcase_add_test(tc, test_example_file_is_defaults);
    tcase_add_test(tc, test_load_empty_inputs);
    tcase_add_test(tc, test_load_scalar_forms);
    tcase_add_test(tc, test_load_app_mapping);
    tcase_add_test(tc, test_load_mounts);
    tcase_add_test(tc, test_load_aliases);
    tcase_add_test(tc, test_load_alias_bounds);
    tcase_add_test(tc, test_load_aliased_apps);
    tcase_add_test(tc, test_load_replaces_listens);
    tcase_add_test(tc, test_load_listen_mapping);
    tcase_add_test(tc, test_load_stall_timeouts);
    tcase_add_test(tc, test_load_pubsub);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_err_syntax);
    tcase_add_test(tc, test_err_unknown_key);
    tcase_add_test(tc, test_err_wrong_type);
    tcase_add_test(tc, test_err_bad_size_and_duration);
    tcase_add_test(tc, test_err_out_of_range);
    tcase_add_test(tc, test_err_listen);
    tcase_add_test(tc, test_err_listen_mapping);
    tcase_add_test(tc, test_err_app_and_enums);
    tcase_add_test(tc, test_err_duplicate_key);
    tcase_add_test(tc, test_err_many_reported_in_order);
    tcase_add_test(tc, test_load_file_errors);
    tcase_add_test(tc, test_load_mutations_never_crash);
    tcase_add_test(tc, test_err_pubsub);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(config_yaml_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
