/*
 * test_config.c - Check suite for src/common/config.c: the value parsers
 * (sizes, durations, workers, listen addresses), defaults, finalize, and
 * the app checks, the `group` needs `user` rule, the positions kept for
 * messages after loading, and room reserved for mounts. The YAML loader has its own suite,
 * test_config_yaml.c.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"

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

/* ---- sizes, durations, workers ----------------------------------------- */

START_TEST(test_parse_size_valid)
{
    size_t v;
    ck_assert_int_eq(config_parse_size("0", &v), 0);
    ck_assert_uint_eq(v, 0);
    ck_assert_int_eq(config_parse_size("512", &v), 0);
    ck_assert_uint_eq(v, 512);
    ck_assert_int_eq(config_parse_size("64k", &v), 0);
    ck_assert_uint_eq(v, 65536);
    ck_assert_int_eq(config_parse_size("64K", &v), 0);
    ck_assert_uint_eq(v, 65536);
    ck_assert_int_eq(config_parse_size("10m", &v), 0);
    ck_assert_uint_eq(v, 10u * 1024 * 1024);
    ck_assert_int_eq(config_parse_size("1g", &v), 0);
    ck_assert_uint_eq(v, 1024u * 1024 * 1024);
}
END_TEST

START_TEST(test_parse_size_invalid)
{
    static const char *const bad[] = {
        "",
        "k",
        "-1",
        " 1",
        "+5",
        "1.5k",
        "10kb",
        "0x10",
        "10 k",
        "1t",
        "1k ",
        "99999999999999999999",
        "18014398509481984k",
        "17179869184g",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t v = 12345;
        ck_assert_msg(config_parse_size(bad[i], &v) == -1, "accepted '%s'", bad[i]);
        ck_assert_uint_eq(v, 12345); /* untouched on failure */
    }
    size_t v;
    ck_assert_int_eq(config_parse_size(NULL, &v), -1);
}
END_TEST

START_TEST(test_parse_duration_valid)
{
    double v;
    ck_assert_int_eq(config_parse_duration("0", &v), 0);
    ck_assert_double_eq(v, 0);
    ck_assert_int_eq(config_parse_duration("30", &v), 0);
    ck_assert_double_eq(v, 30);
    ck_assert_int_eq(config_parse_duration("30s", &v), 0);
    ck_assert_double_eq(v, 30);
    ck_assert_int_eq(config_parse_duration("500ms", &v), 0);
    ck_assert_double_eq_tol(v, 0.5, 1e-9);
    ck_assert_int_eq(config_parse_duration("5m", &v), 0);
    ck_assert_double_eq(v, 300);
    ck_assert_int_eq(config_parse_duration("1h", &v), 0);
    ck_assert_double_eq(v, 3600);
    ck_assert_int_eq(config_parse_duration("1.5s", &v), 0);
    ck_assert_double_eq_tol(v, 1.5, 1e-9);
    ck_assert_int_eq(config_parse_duration("8760h", &v), 0); /* the one-year ceiling */
    ck_assert_double_eq(v, 8760.0 * 3600);
}
END_TEST

START_TEST(test_parse_duration_invalid)
{
    static const char *const bad[] = {
        "",   "s",  "-1",   "1x",  "inf",   "nan",  "1e3",
        "1.", ".5", "1.5.", "5 s", "8761h", "1sec", "99999999999999999999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        double v = 7;
        ck_assert_msg(config_parse_duration(bad[i], &v) == -1, "accepted '%s'", bad[i]);
        ck_assert_double_eq(v, 7);
    }
}
END_TEST

START_TEST(test_parse_workers)
{
    int w;
    const char *msg = NULL;
    ck_assert_int_eq(config_parse_workers("auto", &w, &msg), 0);
    ck_assert_int_eq(w, CONFIG_WORKERS_AUTO);
    ck_assert_int_eq(config_parse_workers("0", &w, &msg), 0);
    ck_assert_int_eq(w, 0);
    ck_assert_int_eq(config_parse_workers("1024", &w, &msg), 0);
    ck_assert_int_eq(w, 1024);
    ck_assert_int_eq(config_parse_workers("1025", &w, &msg), -1);
    ck_assert_str_eq(msg, "out of range (0..1024)");
    ck_assert_int_eq(config_parse_workers("99999999999999999999999", &w, &msg), -1);
    ck_assert_str_eq(msg, "out of range (0..1024)");
    ck_assert_int_eq(config_parse_workers("-1", &w, &msg), -1);
    ck_assert_str_eq(msg, "expected a number or 'auto'");
    ck_assert_int_eq(config_parse_workers("4x", &w, &msg), -1);
    ck_assert_int_eq(config_parse_workers("", &w, &msg), -1);
    ck_assert_int_eq(w, 1024);
}
END_TEST

/* ---- listen specs ------------------------------------------------------ */

START_TEST(test_listen_valid)
{
    pagid_listen l;
    const char *msg = NULL;

    ck_assert_int_eq(config_parse_listen("127.0.0.1:8080", &l, &msg), 0);
    ck_assert_int_eq(l.kind, LISTEN_TCP);
    ck_assert_str_eq(l.spec, "127.0.0.1:8080");
    ck_assert_str_eq(l.host, "127.0.0.1");
    ck_assert_int_eq(l.port, 8080);
    ck_assert_ptr_null(l.path);
    config_listen_free(&l);

    ck_assert_int_eq(config_parse_listen("[::1]:443", &l, &msg), 0);
    ck_assert_str_eq(l.host, "::1");
    ck_assert_int_eq(l.port, 443);
    config_listen_free(&l);

    ck_assert_int_eq(config_parse_listen("[fe80::1:2]:65535", &l, &msg), 0);
    ck_assert_str_eq(l.host, "fe80::1:2");
    ck_assert_int_eq(l.port, 65535);
    config_listen_free(&l);

    ck_assert_int_eq(config_parse_listen(":9000", &l, &msg), 0);
    ck_assert_ptr_null(l.host);
    ck_assert_int_eq(l.port, 9000);
    config_listen_free(&l);

    ck_assert_int_eq(config_parse_listen("*:1", &l, &msg), 0);
    ck_assert_ptr_null(l.host);
    ck_assert_int_eq(l.port, 1);
    config_listen_free(&l);

    ck_assert_int_eq(config_parse_listen("8080", &l, &msg), 0);
    ck_assert_ptr_null(l.host);
    ck_assert_int_eq(l.port, 8080);
    config_listen_free(&l);

    ck_assert_int_eq(config_parse_listen("localhost:80", &l, &msg), 0);
    ck_assert_str_eq(l.host, "localhost");
    config_listen_free(&l);

    ck_assert_int_eq(config_parse_listen("unix:/run/pagid.sock", &l, &msg), 0);
    ck_assert_int_eq(l.kind, LISTEN_UNIX);
    ck_assert_str_eq(l.path, "/run/pagid.sock");
    ck_assert_str_eq(l.spec, "unix:/run/pagid.sock");
    ck_assert_ptr_null(l.host);
    config_listen_free(&l);
}
END_TEST

static void expect_listen_error(const char *spec, const char *expected)
{
    pagid_listen l;
    const char *msg = NULL;
    ck_assert_msg(config_parse_listen(spec, &l, &msg) == -1, "accepted '%s'", spec);
    ck_assert_msg(msg && strcmp(msg, expected) == 0, "'%s': got '%s', want '%s'", spec,
                  msg ? msg : "(null)", expected);
    ck_assert_ptr_null(l.spec);
}

START_TEST(test_listen_invalid)
{
    expect_listen_error("", "empty address");
    expect_listen_error("127.0.0.1", "missing port (use HOST:PORT)");
    expect_listen_error("localhost", "missing port (use HOST:PORT)");
    expect_listen_error("127.0.0.1:", "missing port");
    expect_listen_error("127.0.0.1:0", "invalid port (expected 1..65535)");
    expect_listen_error("127.0.0.1:65536", "invalid port (expected 1..65535)");
    expect_listen_error("127.0.0.1:80x", "invalid port (expected 1..65535)");
    expect_listen_error("127.0.0.1:-80", "invalid port (expected 1..65535)");
    expect_listen_error("127.0.0.1:000080", "invalid port (expected 1..65535)");
    expect_listen_error("80x", "missing port (use HOST:PORT)");
    expect_listen_error("0", "invalid port (expected 1..65535)");
    expect_listen_error("[::1:80", "unbalanced '[' (use [ADDR]:PORT)");
    expect_listen_error("::1]:80", "unbalanced ']'");
    expect_listen_error("[::1]80", "expected ':' after ']' (use [ADDR]:PORT)");
    expect_listen_error("[::1]", "missing port");
    expect_listen_error("[::1]:", "missing port");
    expect_listen_error("[]:80", "invalid IPv6 address");
    expect_listen_error("[zz]:80", "invalid IPv6 address");
    expect_listen_error("::1:80", "IPv6 addresses need brackets ([ADDR]:PORT)");
    expect_listen_error("ho st:80", "invalid host name");
    /* Digits and dots only: an IPv4 address or a typo, never a name to resolve. */
    expect_listen_error("300.1.2.3:80", "invalid IPv4 address");
    expect_listen_error("1.2.3.4.5:80", "invalid IPv4 address");
    expect_listen_error("10..1:80", "invalid IPv4 address");
    expect_listen_error("unix:run/p.sock", "unix socket path must be absolute (unix:/PATH)");
    expect_listen_error("unix:", "unix socket path must be absolute (unix:/PATH)");

    char long_path[200] = "unix:/";
    memset(long_path + 6, 'a', 150);
    long_path[156] = '\0';
    expect_listen_error(long_path, "unix socket path is too long");
}
END_TEST

START_TEST(test_add_listen_appends_and_rejects_duplicates)
{
    pagid_config c;
    const char *msg = NULL;
    config_init_defaults(&c);
    ck_assert_int_eq(config_add_listen(&c, ":8080", &msg), 0);
    ck_assert_int_eq(config_add_listen(&c, "unix:/tmp/a.sock", &msg), 0);
    ck_assert_uint_eq(c.n_listens, 2);
    ck_assert_int_eq(config_add_listen(&c, "*:8080", &msg), -1); /* same as :8080 */
    ck_assert_str_eq(msg, "duplicate listen address");
    ck_assert_int_eq(config_add_listen(&c, "unix:/tmp/a.sock", &msg), -1);
    ck_assert_int_eq(config_add_listen(&c, "nope", &msg), -1);
    ck_assert_uint_eq(c.n_listens, 2);
    ck_assert_int_eq(config_add_listen(&c, "127.0.0.1:8080", &msg), 0);
    ck_assert_uint_eq(c.n_listens, 3);
    config_clear_listens(&c);
    ck_assert_uint_eq(c.n_listens, 0);
    ck_assert_ptr_null(c.listens);
    config_free(&c);
}
END_TEST

/* ---- defaults, finalize, apps ------------------------------------------- */

START_TEST(test_defaults)
{
    pagid_config c;
    config_init_defaults(&c);
    ck_assert_int_eq(c.workers, CONFIG_WORKERS_AUTO);
    ck_assert_str_eq(c.app, "demo");
    ck_assert_uint_eq(c.n_listens, 0);
    ck_assert_ptr_null(c.source);
    ck_assert_uint_eq(c.limits.max_connections, 10000);
    ck_assert_uint_eq(c.limits.max_request_line, 8192);
    ck_assert_uint_eq(c.limits.max_header_size, 32768);
    ck_assert_uint_eq(c.limits.max_header_count, 100);
    ck_assert_uint_eq(c.limits.max_body_size, 10485760);
    ck_assert_uint_eq(c.limits.max_ws_message_size, 1048576);
    ck_assert_uint_eq(c.limits.max_receive_queue, 1000);
    ck_assert_uint_eq(c.limits.max_receive_queue_size, 1048576);
    ck_assert_uint_eq(c.limits.http2_max_streams, 100);
    ck_assert_uint_eq(c.limits.http2_stream_window, 65535);
    ck_assert_uint_eq(c.limits.http2_connection_window, 1048576);
    ck_assert_uint_eq(c.limits.http2_max_resets, 100);
    ck_assert_uint_eq(c.limits.http2_max_open_files, 32);
    ck_assert_double_eq(c.timeouts.header, 30);
    ck_assert_double_eq(c.timeouts.idle, 60);
    ck_assert_double_eq(c.timeouts.keepalive, 75);
    ck_assert_double_eq(c.timeouts.request, 60);
    ck_assert_double_eq(c.timeouts.write, 60);
    ck_assert_double_eq(c.timeouts.ws_idle, 0);
    ck_assert_double_eq(c.timeouts.sse_idle, 0);
    ck_assert_double_eq(c.timeouts.ws_close, 5);
    ck_assert_double_eq(c.timeouts.shutdown, 30);
    ck_assert_double_eq(c.timeouts.heartbeat, 10);
    ck_assert_double_eq(c.timeouts.lifespan_startup, 30);
    ck_assert_uint_eq(c.high_watermark, 65536);
    ck_assert_uint_eq(c.low_watermark, 16384);
    ck_assert_ptr_null(c.access_log_path);
    ck_assert_str_eq(c.access_log_format, "combined");
    ck_assert_ptr_null(c.error_log_path);
    ck_assert_int_eq(c.error_log_level, LOG_LVL_INFO);
    ck_assert_ptr_null(c.pid_file);
    ck_assert_ptr_null(c.user);
    ck_assert_ptr_null(c.group);
    config_free(&c);
}
END_TEST

START_TEST(test_finalize)
{
    pagid_config c;
    config_init_defaults(&c);
    ck_assert_int_eq(config_finalize(&c, stderr), 0);
    ck_assert_uint_eq(c.n_listens, 1);
    ck_assert_str_eq(c.listens[0].spec, CONFIG_DEFAULT_LISTEN);
    ck_assert_str_eq(c.listens[0].host, "127.0.0.1");
    ck_assert_int_eq(c.listens[0].port, 8080);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    ck_assert_int_eq(c.workers, n < 1 ? 1 : n > 1024 ? 1024 : (int)n);
    config_free(&c);

    /* Explicit values are left alone. */
    const char *msg;
    config_init_defaults(&c);
    c.workers = 0;
    ck_assert_int_eq(config_add_listen(&c, "unix:/tmp/x.sock", &msg), 0);
    ck_assert_int_eq(config_finalize(&c, stderr), 0);
    ck_assert_uint_eq(c.n_listens, 1);
    ck_assert_int_eq(c.listens[0].kind, LISTEN_UNIX);
    ck_assert_int_eq(c.workers, 0);
    config_free(&c);
}
END_TEST

/* Load yaml as "t.yaml" and finalize it; what was printed goes to *out. */
static int load_finalize(pagid_config *c, const char *yaml, char **out)
{
    size_t len;
    FILE *f = open_memstream(out, &len);
    ck_assert_ptr_nonnull(f);
    config_init_defaults(c);
    int errors = config_load_string(c, yaml, "t.yaml", f);
    if (config_finalize(c, f) < 0)
        errors++;
    fclose(f);
    return errors;
}

/* A group alone would leave the workers with the master's user: an error
 * at the group's line and column (nginx's rule). */
START_TEST(test_group_needs_user)
{
    pagid_config c;
    char *out = NULL;
    ck_assert_int_eq(load_finalize(&c, "workers: 1\n\ngroup: www-data\n", &out), 1);
    ck_assert_str_eq(out, "t.yaml:3:8: 'group' needs 'user': set the user the workers run as (a "
                          "group alone would leave them with the master's user)\n");
    config_free(&c);
    free(out);

    ck_assert_int_eq(load_finalize(&c, "user: nobody\ngroup: nogroup\n", &out), 0);
    ck_assert_str_eq(out, "");
    config_free(&c);
    free(out);

    ck_assert_int_eq(load_finalize(&c, "user: nobody\n", &out), 0);
    config_free(&c);
    free(out);

    /* Without a file: the message has no position. */
    config_init_defaults(&c);
    c.group = strdup("adm");
    size_t len;
    FILE *f = open_memstream(&out, &len);
    ck_assert_int_eq(config_finalize(&c, f), -1);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(out, "pagid: 'group' needs 'user'"));
    config_free(&c);
    free(out);
}
END_TEST

/* Where values were written is kept for checks after loading (pagid -t). */
START_TEST(test_positions_kept)
{
    pagid_config c;
    char *out = NULL;
    ck_assert_int_eq(load_finalize(&c,
                                   "listen:\n"
                                   "  - 127.0.0.1:8080\n"
                                   "  - {address: 'unix:/tmp/p.sock', mode: '0600'}\n"
                                   "user: nobody\n"
                                   "group:   nogroup\n"
                                   "pid_file: /run/p.pid\n"
                                   "error_log: {path: /var/log/e.log}\n"
                                   "access_log:\n"
                                   "  path: /var/log/a.log\n"
                                   "status: {listen: 127.0.0.1:9100}\n",
                                   &out),
                     0);
    ck_assert_uint_eq(c.n_listens, 3);
    ck_assert_uint_eq(c.listens[0].pos.line, 2);
    ck_assert_uint_eq(c.listens[0].pos.col, 5);
    ck_assert_uint_eq(c.listens[1].pos.line, 3);
    ck_assert_uint_eq(c.listens[1].pos.col, 15);
    ck_assert_uint_eq(c.listens[2].pos.line, 10); /* the status listener */
    ck_assert_uint_eq(c.listens[2].pos.col, 18);
    ck_assert_uint_eq(c.user_pos.line, 4);
    ck_assert_uint_eq(c.user_pos.col, 7);
    ck_assert_uint_eq(c.group_pos.line, 5);
    ck_assert_uint_eq(c.group_pos.col, 10);
    ck_assert_uint_eq(c.pid_file_pos.line, 6);
    ck_assert_uint_eq(c.error_log_pos.line, 7);
    ck_assert_uint_eq(c.error_log_pos.col, 19);
    ck_assert_uint_eq(c.access_log_pos.line, 9);
    ck_assert_uint_eq(c.access_log_pos.col, 9);

    size_t len;
    free(out);
    FILE *f = open_memstream(&out, &len);
    config_report(&c, c.user_pos, f, "bad %s", "user");
    config_report(&c, (pagid_pos){0}, f, "from the command line");
    fclose(f);
    ck_assert_str_eq(out, "t.yaml:4:7: bad user\npagid: from the command line\n");
    config_free(&c);
    free(out);

    /* "off" unsets a path, and its position with it. */
    ck_assert_int_eq(load_finalize(&c, "access_log: {path: /a.log}\naccess_log2: 1\n", &out), 1);
    config_free(&c);
    free(out);
    ck_assert_int_eq(load_finalize(&c, "access_log: {path: 'off'}\n", &out), 0);
    ck_assert_ptr_null(c.access_log_path);
    ck_assert_uint_eq(c.access_log_pos.line, 0);
    config_free(&c);
    free(out);
}
END_TEST

START_TEST(test_check_app)
{
    char msg[512];
    char spec[256];
    make_tmpdir();
    ck_assert_int_eq(config_check_app("hello", msg, sizeof msg), 0);
    ck_assert_int_eq(config_check_app("echo", msg, sizeof msg), 0);
    ck_assert_int_eq(config_check_app("demo", msg, sizeof msg), 0);
    snprintf(spec, sizeof spec, "static:%s", tmpdir);
    ck_assert_int_eq(config_check_app(spec, msg, sizeof msg), 0);
    ck_assert_int_eq(config_check_app(so_path, msg, sizeof msg), 0);

    ck_assert_int_eq(config_check_app("bogus", msg, sizeof msg), -1);
    ck_assert_str_eq(msg, "unknown app 'bogus' (expected hello, echo, demo, pubsub, static:DIR, a "
                          ".so module, a PAGI app FILE.pl or a PSGI app FILE.psgi)");
    /* A spec is echoed on one line: a folded YAML scalar can hold a newline. */
    ck_assert_int_eq(config_check_app("a\nt.yaml:1:1: forged\x7f", msg, sizeof msg), -1);
    ck_assert_str_eq(msg, "unknown app 'a?t.yaml:1:1: forged?' (expected hello, echo, demo, "
                          "pubsub, static:DIR, a .so module, a PAGI app FILE.pl or a PSGI app "
                          "FILE.psgi)");
    /* A directory given as the app (`pagid /srv/www`): the message says static:DIR. */
    char want[1024];
    ck_assert_int_eq(config_check_app(tmpdir, msg, sizeof msg), -1);
    snprintf(want, sizeof want,
             "app '%s' is a directory: to serve its files, use static:%s (an app is hello, echo, "
             "demo, pubsub, static:DIR, a .so module, a PAGI app FILE.pl or a PSGI app FILE.psgi)",
             tmpdir, tmpdir);
    ck_assert_str_eq(msg, want);
    ck_assert_int_eq(config_check_app("static:/nonexistent\n", msg, sizeof msg), -1);
    ck_assert_str_eq(msg, "static directory '/nonexistent?': No such file or directory");
    char longspec[400];
    memset(longspec, 'x', sizeof longspec - 1);
    longspec[sizeof longspec - 1] = '\0';
    ck_assert_int_eq(config_check_app(longspec, msg, sizeof msg), -1);
    ck_assert_ptr_nonnull(strstr(msg, "xxx...' (expected"));
    ck_assert_int_eq(config_check_app("", msg, sizeof msg), -1);
    ck_assert_str_eq(msg, "empty app spec");
    ck_assert_int_eq(config_check_app("app.pl", msg, sizeof msg), -1);
#ifdef PAGID_WITH_PERL
    ck_assert_str_eq(msg, "Perl app 'app.pl': No such file or directory");
#else
    ck_assert_str_eq(msg, "Perl applications need pagid built with the Perl host");
#endif
    ck_assert_int_eq(config_check_app("static:", msg, sizeof msg), -1);
    ck_assert_str_eq(msg, "static app needs a directory (static:DIR)");
    ck_assert_int_eq(config_check_app("static:/nonexistent-pagid", msg, sizeof msg), -1);
    ck_assert_str_eq(msg, "static directory '/nonexistent-pagid': No such file or directory");
    snprintf(spec, sizeof spec, "static:%s", txt_path);
    ck_assert_int_eq(config_check_app(spec, msg, sizeof msg), -1);
    ck_assert_ptr_nonnull(strstr(msg, "is not a directory"));
    ck_assert_int_eq(config_check_app("/nonexistent-pagid/x.so", msg, sizeof msg), -1);
    ck_assert_str_eq(msg, "app module '/nonexistent-pagid/x.so': No such file or directory");
    snprintf(spec, sizeof spec, "%s.so", tmpdir); /* "DIR.so" does not exist */
    ck_assert_int_eq(config_check_app(spec, msg, sizeof msg), -1);
    remove_tmpdir();
}
END_TEST

START_TEST(test_set_app)
{
    pagid_config c;
    const char *msg = NULL;
    config_init_defaults(&c);
    ck_assert_int_eq(config_set_app(&c, "hello", &msg), 0);
    ck_assert_str_eq(c.app, "hello");
    ck_assert_int_eq(config_set_app(&c, "", &msg), -1);
    ck_assert_str_eq(msg, "empty app spec");
    ck_assert_str_eq(c.app, "hello");
    config_free(&c);
}
END_TEST
START_TEST(test_reserve_mounts)
{
    pagid_config c;
    const char *msg = NULL;
    char path[32];
    config_init_defaults(&c);
    ck_assert_int_eq(config_add_mount(&c, "/first", "hello", NULL, &msg), 0);
    ck_assert_int_eq(config_reserve_mounts(&c, 1000), 0);
    pagid_mount *before = c.mounts;
    for (int i = 0; i < 1000; i++) {
        snprintf(path, sizeof path, "/m%d/", i);
        ck_assert_int_eq(config_add_mount(&c, path, "echo", NULL, &msg), 0);
    }
    ck_assert_ptr_eq(c.mounts, before); /* no regrowth while adding what was reserved */
    ck_assert_uint_eq(c.n_mounts, 1001);
    ck_assert_str_eq(c.mounts[0].path, "/first");
    ck_assert_str_eq(c.mounts[1000].path, "/m999");
    /* Duplicates are still seen, before and after the reserve. */
    ck_assert_int_eq(config_add_mount(&c, "/first/", "echo", NULL, &msg), -1);
    ck_assert_str_eq(msg, "is mounted twice");
    ck_assert_int_eq(config_add_mount(&c, "/m500", "echo", NULL, &msg), -1);
    ck_assert_int_eq(config_reserve_mounts(&c, (size_t)-1), -1);
    config_free(&c);
}
END_TEST

/* preload: a YAML boolean; unset, it follows the apps (on for a Perl app). */
/* Lines of config_report's form are printed as they are, without "pagid: ". */
START_TEST(test_msg_has_pos)
{
    ck_assert_int_eq(config_msg_has_pos("/etc/pagid.yaml:4:13: cannot load certificate"), 1);
    ck_assert_int_eq(config_msg_has_pos("t.yaml:1:1: x\nt.yaml:2:2: y"), 1);
    ck_assert_int_eq(config_msg_has_pos("cannot listen on 127.0.0.1:80: in use"), 0);
    ck_assert_int_eq(config_msg_has_pos("t.yaml:4: no column"), 0);
    ck_assert_int_eq(config_msg_has_pos("t.yaml:4:5 no colon"), 0);
    ck_assert_int_eq(config_msg_has_pos(":4:5: no file"), 0);
    ck_assert_int_eq(config_msg_has_pos(""), 0);
}
END_TEST

START_TEST(test_preload)
{
    pagid_config c;
    char *out = NULL;
    ck_assert_int_eq(load_finalize(&c, "preload: false\n", &out), 0);
    ck_assert_int_eq(c.preload, 0);
    ck_assert_int_eq(config_preload_wanted(&c), 0);
    config_free(&c);
    free(out);

    ck_assert_int_eq(load_finalize(&c, "preload: yes\n", &out), 0);
    ck_assert_int_eq(config_preload_wanted(&c), 1); /* even for the built-in demo app */
    config_free(&c);
    free(out);

    ck_assert_int_eq(load_finalize(&c, "preload: maybe\n", &out), 1);
    ck_assert_ptr_nonnull(strstr(out, "t.yaml:1:10: 'preload' must be true or false, not 'maybe'"));
    config_free(&c);
    free(out);

    ck_assert_int_eq(load_finalize(&c, "workers: 2\n", &out), 0);
    ck_assert_int_eq(c.preload, CONFIG_PRELOAD_AUTO);
    ck_assert_int_eq(config_preload_wanted(&c), 0); /* demo: nothing to share */
    free(c.app);
    c.app = strdup("/srv/app/module.so");
    ck_assert_int_eq(config_preload_wanted(&c), 0); /* shared by the page cache already */
    free(c.app);
    c.app = strdup("/srv/app/app.pl");
    ck_assert_int_eq(config_preload_wanted(&c), 1);
    c.preload = 0;
    ck_assert_int_eq(config_preload_wanted(&c), 0);
    config_free(&c);
    free(out);
}
END_TEST

static Suite *config_suite(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("values");
    tcase_add_test(tc, test_parse_size_valid);
    tcase_add_test(tc, test_parse_size_invalid);
    tcase_add_test(tc, test_parse_duration_valid);
    tcase_add_test(tc, test_parse_duration_invalid);
    tcase_add_test(tc, test_parse_workers);
    tcase_add_test(tc, test_listen_valid);
    tcase_add_test(tc, test_listen_invalid);
    tcase_add_test(tc, test_add_listen_appends_and_rejects_duplicates);
    suite_add_tcase(s, tc);

    tc = tcase_create("model");
    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_finalize);
    tcase_add_test(tc, test_group_needs_user);
    tcase_add_test(tc, test_positions_kept);
    tcase_add_test(tc, test_check_app);
    tcase_add_test(tc, test_set_app);
    tcase_add_test(tc, test_preload);
    tcase_add_test(tc, test_reserve_mounts);
    tcase_add_test(tc, test_msg_has_pos);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(config_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
