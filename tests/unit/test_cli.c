/*
 * test_cli.c - Check suite for src/master/cli.c: option parsing, usage
 * errors, the help text, and the effective config (defaults, file,
 * overrides, finalize) with the exact error lines.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "master/cli.h"

#define ARGC(v) ((int)(sizeof(v) / sizeof((v)[0])) - 1)

static char *out_text;
static size_t out_len;

static FILE *capture(void)
{
    free(out_text);
    out_text = NULL;
    FILE *f = open_memstream(&out_text, &out_len);
    ck_assert_ptr_nonnull(f);
    return f;
}

static void teardown(void)
{
    free(out_text);
    out_text = NULL;
}

/* Parse argv, expect failure with exactly this message. */
static void expect_usage_error(char **argv, int argc, const char *first_line)
{
    cli_options o;
    FILE *f = capture();
    ck_assert_int_eq(cli_parse(argc, argv, &o, f), -1);
    fclose(f);
    char want[256];
    snprintf(want, sizeof want, "%s\nTry 'pagid --help' for more information.\n", first_line);
    ck_assert_str_eq(out_text, want);
    ck_assert_ptr_null(o.listens); /* freed on the error path */
}

/* A config file in /tmp; the caller unlinks it. */
static void write_file(char *path, const char *text)
{
    strcpy(path, "/tmp/pagid-cli-XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

/* ---- parsing ----------------------------------------------------------- */

START_TEST(test_parse_nothing)
{
    char *argv[] = {"pagid", NULL};
    cli_options o;
    ck_assert_int_eq(cli_parse(ARGC(argv), argv, &o, stderr), 0);
    ck_assert_ptr_null(o.config_file);
    ck_assert_int_eq(o.test_only, 0);
    ck_assert_int_eq(o.show_version, 0);
    ck_assert_int_eq(o.show_help, 0);
    ck_assert_uint_eq(o.n_listens, 0);
    ck_assert_ptr_null(o.workers);
    ck_assert_ptr_null(o.app);
    cli_options_free(&o);
}
END_TEST

START_TEST(test_parse_short)
{
    char *argv[] = {"pagid", "-t", "-c", "/etc/p.yaml", "-l", ":80", "-l", "unix:/s",
                    "-w",    "4",  "-a", "hello",       "-v", "-h",  NULL};
    cli_options o;
    ck_assert_int_eq(cli_parse(ARGC(argv), argv, &o, stderr), 0);
    ck_assert_str_eq(o.config_file, "/etc/p.yaml");
    ck_assert_int_eq(o.test_only, 1);
    ck_assert_uint_eq(o.n_listens, 2);
    ck_assert_str_eq(o.listens[0], ":80");
    ck_assert_str_eq(o.listens[1], "unix:/s");
    ck_assert_str_eq(o.workers, "4");
    ck_assert_str_eq(o.app, "hello");
    ck_assert_int_eq(o.show_version, 1);
    ck_assert_int_eq(o.show_help, 1);
    cli_options_free(&o);
    ck_assert_ptr_null(o.listens);
}
END_TEST

START_TEST(test_parse_long_and_clustered)
{
    char *argv[] = {"pagid",    "--config=a.yaml", "--test",         "--listen",
                    "[::1]:81", "--listen=:82",    "--workers=auto", "--app",
                    "echo",     "--version",       "--help",         NULL};
    cli_options o;
    ck_assert_int_eq(cli_parse(ARGC(argv), argv, &o, stderr), 0);
    ck_assert_str_eq(o.config_file, "a.yaml");
    ck_assert_int_eq(o.test_only, 1);
    ck_assert_uint_eq(o.n_listens, 2);
    ck_assert_str_eq(o.listens[0], "[::1]:81");
    ck_assert_str_eq(o.listens[1], ":82");
    ck_assert_str_eq(o.workers, "auto");
    ck_assert_str_eq(o.app, "echo");
    ck_assert_int_eq(o.show_version, 1);
    ck_assert_int_eq(o.show_help, 1);
    cli_options_free(&o);

    /* Parsing again starts from scratch (getopt state is reset). */
    char *argv2[] = {"pagid", "-tc", "b.yaml", "-w0", NULL};
    ck_assert_int_eq(cli_parse(ARGC(argv2), argv2, &o, stderr), 0);
    ck_assert_int_eq(o.test_only, 1);
    ck_assert_str_eq(o.config_file, "b.yaml");
    ck_assert_str_eq(o.workers, "0");
    ck_assert_uint_eq(o.n_listens, 0);
    ck_assert_int_eq(o.show_help, 0);
    cli_options_free(&o);
}
END_TEST

START_TEST(test_parse_errors)
{
    char *a1[] = {"pagid", "-x", NULL};
    expect_usage_error(a1, ARGC(a1), "pagid: unknown option '-x'");
    char *a2[] = {"pagid", "--test", "-tq", NULL};
    expect_usage_error(a2, ARGC(a2), "pagid: unknown option '-q'");
    char *a3[] = {"pagid", "-l", ":80", "--bogus=1", NULL};
    expect_usage_error(a3, ARGC(a3), "pagid: unknown option '--bogus'");
    char *a4[] = {"pagid", "-t", "-c", NULL};
    expect_usage_error(a4, ARGC(a4), "pagid: missing argument for option '-c'");
    char *a5[] = {"pagid", "--workers", NULL};
    expect_usage_error(a5, ARGC(a5), "pagid: missing argument for option '--workers'");
    char *a6[] = {"pagid", "-t", "app.pl", "extra", NULL}; /* one positional: the app */
    expect_usage_error(a6, ARGC(a6), "pagid: an app is already given; unexpected argument 'extra'");
    char *a7[] = {"pagid", "--test=yes", NULL};
    expect_usage_error(a7, ARGC(a7), "pagid: option takes no argument '--test'");
    char *a8[] = {"pagid", "--test", "-xt", NULL}; /* 'x' mid-cluster, after a long option */
    expect_usage_error(a8, ARGC(a8), "pagid: unknown option '-x'");
    char *a9[] = {"pagid", "--conf", "a.yaml", "-w", NULL}; /* unique prefixes are fine */
    expect_usage_error(a9, ARGC(a9), "pagid: missing argument for option '-w'");
}
END_TEST

START_TEST(test_usage_lists_every_option)
{
    static const char *const opts[] = {
        "-c, --config FILE", "-t, --test",
        "-l, --listen ADDR", "-w, --workers N",
        "-a, --app SPEC",    "-v, --version",
        "-h, --help",        "-u, --user USER[:GROUP]",
        "--cert FILE",       "--key FILE",
        "-p, --port PORT",   "-o, --host HOST",
        "-E, --env MODE",    "--dev",
        "-e CODE",           "-M MODULE",
        "--access-log FILE", "--access-log-format FORMAT",
        "--max-requests N",  "--timeout SECONDS",
        "--log-level LEVEL", "--pool N",
    };
    FILE *f = capture();
    cli_usage(f);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(out_text, "Usage: pagid"));
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
        const char *line = strstr(out_text, opts[i]);
        ck_assert_msg(line != NULL, "usage lacks '%s'", opts[i]);
        /* ...with a description on the same line. */
        const char *eol = strchr(line, '\n');
        ck_assert_msg(eol && eol - line > (long)strlen(opts[i]) + 5, "'%s' has no description",
                      opts[i]);
    }
}
END_TEST

/* -V, -T and -s: parsed, checked, and in the help with a description. */
START_TEST(test_parse_operator_options)
{
    char *a1[] = {"pagid", "-V", "-T", "-c", "f.yaml", NULL};
    cli_options o;
    ck_assert_int_eq(cli_parse(ARGC(a1), a1, &o, stderr), 0);
    ck_assert_int_eq(o.show_build, 1);
    ck_assert_int_eq(o.dump_config, 1);
    ck_assert_int_eq(o.test_only, 1); /* -T is -t plus the dump */
    ck_assert_ptr_null(o.signal_name);
    cli_options_free(&o);

    static const char *const names[] = {"reload", "reopen", "quit", "stop", "upgrade"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char *a2[] = {"pagid", "-s", (char *)names[i], "-c", "f.yaml", NULL};
        ck_assert_int_eq(cli_parse(ARGC(a2), a2, &o, stderr), 0);
        ck_assert_str_eq(o.signal_name, names[i]);
        cli_options_free(&o);
    }
    char *a3[] = {"pagid", "--signal=reload", "--build-info", "--dump-config", NULL};
    expect_usage_error(a3, ARGC(a3), "pagid: -s cannot be combined with '-t/-T'");
    char *a4[] = {"pagid", "--signal=reload", "--build-info", NULL};
    ck_assert_int_eq(cli_parse(ARGC(a4), a4, &o, stderr), 0);
    ck_assert_str_eq(o.signal_name, "reload");
    ck_assert_int_eq(o.show_build, 1);
    cli_options_free(&o);

    char *e1[] = {"pagid", "-s", "restart", NULL};
    FILE *f = capture();
    ck_assert_int_eq(cli_parse(ARGC(e1), e1, &o, f), -1);
    fclose(f);
    ck_assert_str_eq(out_text, "pagid: -s: unknown signal 'restart' (expected reload, reopen, "
                               "quit, stop or upgrade)\n"
                               "Try 'pagid --help' for more information.\n");
    char *e2[] = {"pagid", "-t", "-s", "reload", NULL};
    expect_usage_error(e2, ARGC(e2), "pagid: -s cannot be combined with '-t/-T'");
    char *e3[] = {"pagid", "-s", NULL};
    expect_usage_error(e3, ARGC(e3), "pagid: missing argument for option '-s'");

    static const char *const opts[] = {"-T, --dump-config", "-s, --signal SIGNAL",
                                       "-V, --build-info"};
    f = capture();
    cli_usage(f);
    fclose(f);
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
        const char *line = strstr(out_text, opts[i]);
        ck_assert_msg(line != NULL, "usage lacks '%s'", opts[i]);
        const char *eol = strchr(line, '\n');
        ck_assert_msg(eol && eol - line > (long)strlen(opts[i]) + 5, "'%s' has no description",
                      opts[i]);
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        ck_assert_msg(strstr(out_text, names[i]), "usage does not name -s %s", names[i]);
}
END_TEST

/* ---- the effective config ----------------------------------------------- */

START_TEST(test_build_defaults)
{
    char *argv[] = {"pagid", NULL};
    cli_options o;
    pagid_config c;
    ck_assert_int_eq(cli_parse(ARGC(argv), argv, &o, stderr), 0);
    FILE *f = capture();
    ck_assert_int_eq(cli_build_config(&o, &c, f), 0);
    fclose(f);
    ck_assert_str_eq(out_text, "");
    ck_assert_ptr_null(c.source); /* no file read */
    ck_assert_uint_eq(c.n_listens, 1);
    ck_assert_str_eq(c.listens[0].spec, CONFIG_DEFAULT_LISTEN);
    ck_assert_str_eq(c.app, CONFIG_DEFAULT_APP);
    ck_assert_int_ge(c.workers, 1); /* auto resolved */
    ck_assert_int_le(c.workers, CONFIG_MAX_WORKERS);
    config_free(&c);
    cli_options_free(&o);
}
END_TEST

START_TEST(test_build_file_then_overrides)
{
    char path[64];
    write_file(path, "listen: [':9001', ':9002']\nworkers: 2\napp: hello\n"
                     "limits: {max_header_count: 7}\n");

    /* The file alone. */
    char *a1[] = {"pagid", "-c", path, NULL};
    cli_options o;
    pagid_config c;
    ck_assert_int_eq(cli_parse(ARGC(a1), a1, &o, stderr), 0);
    ck_assert_int_eq(cli_build_config(&o, &c, stderr), 0);
    ck_assert_str_eq(c.source, path);
    ck_assert_uint_eq(c.n_listens, 2);
    ck_assert_int_eq(c.listens[1].port, 9002);
    ck_assert_int_eq(c.workers, 2);
    ck_assert_str_eq(c.app, "hello");
    ck_assert_uint_eq(c.limits.max_header_count, 7);
    config_free(&c);
    cli_options_free(&o);

    /* -l replaces the file's list; -w and -a override; the rest stays. */
    char *a2[] = {"pagid", "-c", path,   "-l", "127.0.0.1:7000", "-l", "unix:/tmp/p.sock", "-w",
                  "0",     "-a", "echo", NULL};
    ck_assert_int_eq(cli_parse(ARGC(a2), a2, &o, stderr), 0);
    ck_assert_int_eq(cli_build_config(&o, &c, stderr), 0);
    ck_assert_uint_eq(c.n_listens, 2);
    ck_assert_str_eq(c.listens[0].host, "127.0.0.1");
    ck_assert_int_eq(c.listens[0].port, 7000);
    ck_assert_int_eq(c.listens[1].kind, LISTEN_UNIX);
    ck_assert_int_eq(c.workers, 0);
    ck_assert_str_eq(c.app, "echo");
    ck_assert_uint_eq(c.limits.max_header_count, 7);
    config_free(&c);
    cli_options_free(&o);
    unlink(path);
}
END_TEST

/* -u replaces the file's user and group (both), which also satisfies
 * "group needs user"; a malformed value is an error. */
START_TEST(test_build_user_override)
{
    char path[64];
    write_file(path, "user: www-data\ngroup: adm\n");
    char *a1[] = {"pagid", "-c", path, "-u", "root", NULL};
    cli_options o;
    pagid_config c;
    ck_assert_int_eq(cli_parse(ARGC(a1), a1, &o, stderr), 0);
    ck_assert_int_eq(cli_build_config(&o, &c, stderr), 0);
    ck_assert_str_eq(c.user, "root");
    ck_assert_ptr_null(c.group);
    ck_assert_uint_eq(c.user_pos.line, 0); /* from the command line now */
    config_free(&c);
    cli_options_free(&o);
    unlink(path);

    write_file(path, "group: adm\n"); /* an error alone; -u completes it */
    char *a2[] = {"pagid", "-c", path, "--user", "nobody:nogroup", NULL};
    ck_assert_int_eq(cli_parse(ARGC(a2), a2, &o, stderr), 0);
    ck_assert_int_eq(cli_build_config(&o, &c, stderr), 0);
    ck_assert_str_eq(c.user, "nobody");
    ck_assert_str_eq(c.group, "nogroup");
    config_free(&c);
    cli_options_free(&o);
    unlink(path);

    static const char *const bad[] = {"", ":adm", "root:", "a:b:c"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *a3[] = {"pagid", "-u", (char *)bad[i], NULL};
        ck_assert_int_eq(cli_parse(ARGC(a3), a3, &o, stderr), 0);
        FILE *f = capture();
        ck_assert_int_eq(cli_build_config(&o, &c, f), 1);
        fclose(f);
        char want[128];
        snprintf(want, sizeof want, "pagid: -u: expected USER or USER:GROUP, not '%s'\n", bad[i]);
        ck_assert_str_eq(out_text, want);
        config_free(&c);
        cli_options_free(&o);
    }
}
END_TEST

/* -l https://ADDR with --cert/--key: a TLS listener with that pair; http://
 * is plain; https without the pair, or the pair without https, is an error. */
START_TEST(test_build_https_listener)
{
    char *a1[] = {"pagid", "-l", "https://127.0.0.1:8443", "-l", "http://127.0.0.1:8080",
                  "--cert", "c.pem", "--key", "k.pem", NULL};
    cli_options o;
    pagid_config c;
    ck_assert_int_eq(cli_parse(ARGC(a1), a1, &o, stderr), 0);
    ck_assert_int_eq(cli_build_config(&o, &c, stderr), 0);
    ck_assert_uint_eq(c.n_listens, 2);
    ck_assert_str_eq(c.listens[0].spec, "127.0.0.1:8443");
    ck_assert_ptr_nonnull(c.listens[0].tls);
    ck_assert_uint_eq(c.listens[0].tls->n_certs, 1);
    ck_assert_str_eq(c.listens[0].tls->certs[0].cert, "c.pem");
    ck_assert_str_eq(c.listens[0].tls->certs[0].key, "k.pem");
    ck_assert_int_eq(c.listens[0].tls->session_tickets, 1);
    ck_assert_str_eq(c.listens[1].spec, "127.0.0.1:8080");
    ck_assert_ptr_null(c.listens[1].tls);
    config_free(&c);
    cli_options_free(&o);

    char *a2[] = {"pagid", "-l", "https://127.0.0.1:8443", "--cert", "c.pem", NULL};
    ck_assert_int_eq(cli_parse(ARGC(a2), a2, &o, stderr), 0);
    FILE *f = capture();
    ck_assert_int_eq(cli_build_config(&o, &c, f), 1);
    fclose(f);
    ck_assert_str_eq(out_text, "pagid: -l https://127.0.0.1:8443: an https listener needs --cert "
                               "FILE and --key FILE\n");
    config_free(&c);
    cli_options_free(&o);

    char *a3[] = {"pagid", "-l", "127.0.0.1:8443", "--cert", "c.pem", "--key", "k.pem", NULL};
    ck_assert_int_eq(cli_parse(ARGC(a3), a3, &o, stderr), 0);
    f = capture();
    ck_assert_int_eq(cli_build_config(&o, &c, f), 1);
    fclose(f);
    ck_assert_str_eq(out_text, "pagid: --cert and --key are for -l https://HOST:PORT listeners, "
                               "and none is given\n");
    config_free(&c);
    cli_options_free(&o);
}
END_TEST

/* Socket activation: with no listener in the file or on the command line
 * the passed sockets' addresses are the listeners, not the default; any
 * listener named anywhere wins; the status listener's address stays its own. */
START_TEST(test_build_activated_listeners)
{
    char *specs[] = {"127.0.0.1:9000", "unix:/run/p.sock", "127.0.0.1:9100"};
    char *argv[] = {"pagid", NULL};
    cli_options o;
    pagid_config c;
    ck_assert_int_eq(cli_parse(ARGC(argv), argv, &o, stderr), 0);
    o.activated = specs;
    o.n_activated = 3;
    ck_assert_int_eq(cli_build_config(&o, &c, stderr), 0);
    ck_assert_uint_eq(c.n_listens, 3);
    ck_assert_str_eq(c.listens[0].spec, "127.0.0.1:9000");
    ck_assert_str_eq(c.listens[1].spec, "unix:/run/p.sock");
    ck_assert_str_eq(c.listens[2].spec, "127.0.0.1:9100");
    config_free(&c);

    char path[64];
    write_file(path, "status: {listen: '127.0.0.1:9100'}\n");
    o.config_file = path;
    ck_assert_int_eq(cli_build_config(&o, &c, stderr), 0);
    ck_assert_uint_eq(c.n_listens, 3); /* two activated, then the status one */
    ck_assert_str_eq(c.listens[1].spec, "unix:/run/p.sock");
    ck_assert(c.listens[2].status);
    config_free(&c);
    unlink(path);

    write_file(path, "listen: ['127.0.0.1:7000']\n");
    ck_assert_int_eq(cli_build_config(&o, &c, stderr), 0);
    ck_assert_uint_eq(c.n_listens, 1);
    ck_assert_str_eq(c.listens[0].spec, "127.0.0.1:7000");
    config_free(&c);
    unlink(path);

    o.activated = NULL; /* not ours to free */
    o.n_activated = 0;
    o.config_file = NULL;
    ck_assert_int_eq(cli_build_config(&o, &c, stderr), 0);
    ck_assert_str_eq(c.listens[0].spec, CONFIG_DEFAULT_LISTEN);
    config_free(&c);
    cli_options_free(&o);
}
END_TEST

START_TEST(test_build_override_errors)
{
    char *argv[] = {"pagid", "-l", "localhost", "-l", ":80",   "-l",
                    "*:80",  "-w", "2000",      "-a", "bogus", NULL};
    cli_options o;
    pagid_config c;
    ck_assert_int_eq(cli_parse(ARGC(argv), argv, &o, stderr), 0);
    FILE *f = capture();
    ck_assert_int_eq(cli_build_config(&o, &c, f), 4);
    fclose(f);
    ck_assert_str_eq(out_text,
                     "pagid: -l: invalid listen address 'localhost': missing port (use HOST:PORT)\n"
                     "pagid: -l: invalid listen address '*:80': duplicate listen address\n"
                     "pagid: -w: invalid workers '2000': out of range (0..1024)\n"
                     "pagid: -a: unknown app 'bogus' (expected hello, echo, demo, pubsub, "
                     "static:DIR, a .so module, a PAGI app FILE.pl or a PSGI app FILE.psgi)\n");
    /* The valid -l survived; nothing else was touched. */
    ck_assert_uint_eq(c.n_listens, 1);
    ck_assert_int_eq(c.listens[0].port, 80);
    ck_assert_str_eq(c.app, CONFIG_DEFAULT_APP);
    config_free(&c);
    cli_options_free(&o);
}
END_TEST

START_TEST(test_build_file_errors_counted)
{
    char path[64];
    write_file(path, "workers: many\nbogus: 1\n");
    char *argv[] = {"pagid", "-t", "-c", path, "-a", "x.pl", NULL};
    cli_options o;
    pagid_config c;
    ck_assert_int_eq(cli_parse(ARGC(argv), argv, &o, stderr), 0);
    FILE *f = capture();
    ck_assert_int_eq(cli_build_config(&o, &c, f), 3);
    fclose(f);
    char want[512];
    snprintf(want, sizeof want,
             "%s:1:10: invalid workers 'many': expected a number or 'auto'\n"
             "%s:2:1: unknown key 'bogus'\n"
#ifdef PAGID_WITH_PERL
             "pagid: -a: Perl app 'x.pl': No such file or directory\n",
#else
             "pagid: -a: Perl applications need pagid built with the Perl host\n",
#endif
             path, path);
    ck_assert_str_eq(out_text, want);
    config_free(&c);
    cli_options_free(&o);
    unlink(path);

    /* A missing file is one error; the defaults still finalize. */
    char *a2[] = {"pagid", "-c", "/nonexistent-pagid.yaml", NULL};
    ck_assert_int_eq(cli_parse(ARGC(a2), a2, &o, stderr), 0);
    f = capture();
    ck_assert_int_eq(cli_build_config(&o, &c, f), 1);
    fclose(f);
    ck_assert_str_eq(out_text, "/nonexistent-pagid.yaml: cannot open: No such file or directory\n");
    ck_assert_uint_eq(c.n_listens, 1);
    config_free(&c);
    cli_options_free(&o);
}
END_TEST

START_TEST(test_build_example_config)
{
    char *argv[] = {"pagid", "-t", "-c", TOP_SRCDIR "/conf/pagid.yaml", NULL};
    cli_options o;
    pagid_config c;
    ck_assert_int_eq(cli_parse(ARGC(argv), argv, &o, stderr), 0);
    FILE *f = capture();
    ck_assert_int_eq(cli_build_config(&o, &c, f), 0);
    fclose(f);
    ck_assert_str_eq(out_text, "");
    ck_assert_str_eq(c.listens[0].spec, CONFIG_DEFAULT_LISTEN);
    config_free(&c);
    cli_options_free(&o);
}
END_TEST

/* --preload and --no-preload replace the file's preload; neither keeps it. */

/* ---- the Perl developer's command line (cli_dev.c) ---------------------- */

START_TEST(test_parse_positional_app)
{
    char *a1[] = {"pagid", "app.pl", "-p", "5000", NULL};
    cli_options o;
    ck_assert_int_eq(cli_parse(ARGC(a1), a1, &o, stderr), 0);
    ck_assert_str_eq(o.app, "app.pl");
    ck_assert_str_eq(o.port, "5000");
    cli_options_free(&o);
    char *a2[] = {"pagid", "-a", "hello", "app.pl", NULL};
    expect_usage_error(a2, ARGC(a2),
                       "pagid: an app is already given; unexpected argument 'app.pl'");
    char *a3[] = {"pagid", "a.pl", "b.pl", NULL};
    expect_usage_error(a3, ARGC(a3), "pagid: an app is already given; unexpected argument 'b.pl'");
    char *a4[] = {"pagid", "-e", "sub {}", "app.pl", NULL};
    expect_usage_error(a4, ARGC(a4),
                       "pagid: an app is already given; unexpected argument 'app.pl'");
    char *a5[] = {"pagid", "-MFoo", "app.pl", NULL};
    expect_usage_error(a5, ARGC(a5), "pagid: -M is for -e's code; an app file says 'use MODULE'");
}
END_TEST

START_TEST(test_build_host_port_and_bare_port)
{
    char *a1[] = {"pagid", "-a", "hello", "-p", "5000", "-l", "19297", NULL};
    cli_options o;
    pagid_config c;
    ck_assert_int_eq(cli_parse(ARGC(a1), a1, &o, stderr), 0);
    ck_assert_int_eq(cli_build_config(&o, &c, stderr), 0);
    ck_assert_uint_eq(c.n_listens, 2);
    ck_assert_str_eq(c.listens[0].spec, "127.0.0.1:19297"); /* a bare port is loopback */
    ck_assert_str_eq(c.listens[0].host, "127.0.0.1");
    ck_assert_str_eq(c.listens[1].spec, "127.0.0.1:5000");
    config_free(&c);
    cli_options_free(&o);

    char *a2[] = {"pagid", "--host", "::1", "-a", "hello", NULL};
    ck_assert_int_eq(cli_parse(ARGC(a2), a2, &o, stderr), 0);
    ck_assert_int_eq(cli_build_config(&o, &c, stderr), 0);
    ck_assert_uint_eq(c.n_listens, 1);
    ck_assert_str_eq(c.listens[0].spec, "[::1]:8080");
    config_free(&c);
    cli_options_free(&o);

    char *a3[] = {"pagid", "-l", ":7000", "-a", "hello", NULL}; /* still every address */
    ck_assert_int_eq(cli_parse(ARGC(a3), a3, &o, stderr), 0);
    ck_assert_int_eq(cli_build_config(&o, &c, stderr), 0);
    ck_assert_ptr_null(c.listens[0].host);
    config_free(&c);
    cli_options_free(&o);

    char *a4[] = {"pagid", "-p", "http", "-a", "hello", NULL};
    ck_assert_int_eq(cli_parse(ARGC(a4), a4, &o, stderr), 0);
    FILE *f = capture();
    ck_assert_int_eq(cli_build_config(&o, &c, f), 1);
    fclose(f);
    ck_assert_str_eq(out_text, "pagid: -o/-p: invalid listen address '127.0.0.1:http': invalid "
                               "port (expected 1..65535)\n");
    config_free(&c);
    cli_options_free(&o);
}
END_TEST

START_TEST(test_build_server_options)
{
    char *a1[] = {"pagid", "-a",          "hello", "--max-requests", "100", "--timeout",
                  "7",     "--log-level", "debug", "--access-log",   "-",   "--access-log-format",
                  "json",  NULL};
    cli_options o;
    pagid_config c;
    ck_assert_int_eq(cli_parse(ARGC(a1), a1, &o, stderr), 0);
    ck_assert_int_eq(cli_build_config(&o, &c, stderr), 0);
    ck_assert_uint_eq(c.max_requests, 100);
    ck_assert(c.timeouts.keepalive == 7.0);
    ck_assert_int_eq(c.error_log_level, LOG_LVL_DEBUG);
    ck_assert_str_eq(c.access_log_path, "-");
    ck_assert_str_eq(c.access_log_format, "json");
    ck_assert_int_eq(c.workers, 2); /* not development mode */
    ck_assert_int_eq(c.debug, 0);
    config_free(&c);
    cli_options_free(&o);

    char *a2[] = {"pagid", "-a",          "hello", "--max-requests",      "-1", "--timeout",
                  "soon",  "--log-level", "loud",  "--access-log-format", "%Q", NULL};
    ck_assert_int_eq(cli_parse(ARGC(a2), a2, &o, stderr), 0);
    FILE *f = capture();
    ck_assert_int_eq(cli_build_config(&o, &c, f), 4);
    fclose(f);
    ck_assert_ptr_nonnull(
        strstr(out_text, "pagid: --max-requests: expected a whole number, not '-1'\n"));
    ck_assert_ptr_nonnull(strstr(out_text, "pagid: --timeout: expected seconds"));
    ck_assert_ptr_nonnull(strstr(out_text, "pagid: --log-level: 'loud' is not a level (expected "
                                           "debug, info, warn, error)\n"));
    ck_assert_ptr_nonnull(strstr(out_text, "pagid: --access-log-format: "));
    config_free(&c);
    cli_options_free(&o);
}
END_TEST

START_TEST(test_build_dev_and_env)
{
    char *a1[] = {"pagid", "-a", "hello", "--dev", NULL};
    cli_options o;
    pagid_config c;
    unsetenv("PAGI_ENV");
    ck_assert_int_eq(cli_parse(ARGC(a1), a1, &o, stderr), 0);
    ck_assert_int_eq(cli_dev_mode(&o), 1);
    ck_assert_int_eq(cli_build_config(&o, &c, stderr), 0);
    ck_assert_int_eq(c.workers, 1);
    ck_assert_int_eq(c.debug, 1);
    ck_assert_str_eq(c.access_log_path, "-");
    ck_assert_str_eq(getenv("PAGI_ENV"), "development");
    config_free(&c);
    cli_options_free(&o);

    char *a2[] = {"pagid", "-a", "hello", "-E", "development", "-w", "3", NULL};
    ck_assert_int_eq(cli_parse(ARGC(a2), a2, &o, stderr), 0);
    ck_assert_int_eq(cli_dev_mode(&o), 1);
    ck_assert_int_eq(cli_build_config(&o, &c, stderr), 0);
    ck_assert_int_eq(c.workers, 3); /* told otherwise */
    config_free(&c);
    cli_options_free(&o);

    char *a3[] = {"pagid", "-a", "hello", "-E", "staging", NULL};
    ck_assert_int_eq(cli_parse(ARGC(a3), a3, &o, stderr), 0);
    ck_assert_int_eq(cli_dev_mode(&o), 0);
    ck_assert_int_eq(cli_build_config(&o, &c, stderr), 0);
    ck_assert_str_eq(getenv("PAGI_ENV"), "staging");
    ck_assert_ptr_null(c.access_log_path);
    config_free(&c);
    cli_options_free(&o);

    char *a4[] = {"pagid", "-a", "hello", NULL};
    unsetenv("PAGI_ENV");
    ck_assert_int_eq(cli_parse(ARGC(a4), a4, &o, stderr), 0);
    ck_assert_int_eq(cli_build_config(&o, &c, stderr), 0);
    ck_assert_str_eq(getenv("PAGI_ENV"), "production");
    config_free(&c);
    cli_options_free(&o);
}
END_TEST

START_TEST(test_build_eval_app)
{
    char *a1[] = {"pagid", "-MFoo::Bar", "-MBaz=a,b", "-e", "sub { 42 }", NULL};
    cli_options o;
    pagid_config c;
    ck_assert_int_eq(cli_parse(ARGC(a1), a1, &o, stderr), 0);
    ck_assert_int_eq(cli_build_config(&o, &c, stderr), 0);
    ck_assert_ptr_nonnull(strstr(c.app, "/eval.pl"));
    FILE *f = fopen(c.app, "r");
    ck_assert_ptr_nonnull(f);
    char text[512] = "";
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    ck_assert_ptr_nonnull(strstr(text, "use Foo::Bar;\n"));
    ck_assert_ptr_nonnull(strstr(text, "use Baz split(/,/, q\001a,b\001);\n"));
    ck_assert_ptr_nonnull(strstr(text, "#line 1 \"-e\"\nsub { 42 }\n"));
    config_free(&c);
    cli_options_free(&o);
}
END_TEST

START_TEST(test_preload_options)
{
    char path[64];
    write_file(path, "preload: true\n");
    cli_options o;
    pagid_config c;
    char *a1[] = {"pagid", "-c", path, "--no-preload", NULL};
    ck_assert_int_eq(cli_parse(ARGC(a1), a1, &o, stderr), 0);
    ck_assert_int_eq(cli_build_config(&o, &c, stderr), 0);
    ck_assert_int_eq(c.preload, 0);
    config_free(&c);
    cli_options_free(&o);

    char *a2[] = {"pagid", "-c", path, NULL};
    ck_assert_int_eq(cli_parse(ARGC(a2), a2, &o, stderr), 0);
    ck_assert_int_eq(cli_build_config(&o, &c, stderr), 0);
    ck_assert_int_eq(c.preload, 1);
    config_free(&c);
    cli_options_free(&o);
    unlink(path);

    char *a3[] = {"pagid", "--no-preload", "--preload", NULL};
    ck_assert_int_eq(cli_parse(ARGC(a3), a3, &o, stderr), 0);
    ck_assert_int_eq(cli_build_config(&o, &c, stderr), 0);
    ck_assert_int_eq(c.preload, 1); /* the last one wins */
    config_free(&c);
    cli_options_free(&o);

    char *a4[] = {"pagid", NULL};
    ck_assert_int_eq(cli_parse(ARGC(a4), a4, &o, stderr), 0);
    ck_assert_int_eq(cli_build_config(&o, &c, stderr), 0);
    ck_assert_int_eq(c.preload, CONFIG_PRELOAD_AUTO);
    config_free(&c);
    cli_options_free(&o);

    char *a5[] = {"pagid", "--preload=yes", NULL};
    expect_usage_error(a5, ARGC(a5), "pagid: option takes no argument '--preload'");
}
END_TEST

/* --pool N: the PSGI app's worker_pool.processes over the file's (its other
 * keys kept); not for other apps nor -w 0; N checked when parsed. */
START_TEST(test_pool_option)
{
    char *b1[] = {"pagid", "--pool", "many", NULL};
    expect_usage_error(b1, ARGC(b1),
                       "pagid: --pool: expected a number of pool processes from 0 (no pool) to "
                       "256, not 'many'");
    char *b2[] = {"pagid", "--pool", "257", NULL};
    expect_usage_error(b2, ARGC(b2),
                       "pagid: --pool: expected a number of pool processes from 0 (no pool) to "
                       "256, not '257'");
    char *b3[] = {"pagid", "--pool=-1", NULL};
    expect_usage_error(b3, ARGC(b3),
                       "pagid: --pool: expected a number of pool processes from 0 (no pool) to "
                       "256, not '-1'");
    char *b4[] = {"pagid", "--pool", "", NULL};
    expect_usage_error(b4, ARGC(b4),
                       "pagid: --pool: expected a number of pool processes from 0 (no pool) to "
                       "256, not ''");
#ifdef PAGID_WITH_PERL
    const char *app = TOP_SRCDIR "/tests/integration/psgi/pool.psgi";
    cli_options o;
    pagid_config c;
    char *a1[] = {"pagid", "-w", "2", "--pool", "3", (char *)app, NULL};
    ck_assert_int_eq(cli_parse(ARGC(a1), a1, &o, stderr), 0);
    ck_assert_int_eq(cli_build_config(&o, &c, stderr), 0);
    ck_assert_int_eq(c.workers, 2);
    ck_assert_int_eq(c.worker_pool.processes, 3);
    ck_assert_int_eq(c.worker_pool.queue_limit, CONFIG_POOL_DEFAULT_QUEUE);
    ck_assert(c.worker_pool.timeout == CONFIG_POOL_DEFAULT_TIMEOUT);
    config_free(&c);
    cli_options_free(&o);

    /* Over the file's pool: processes only. */
    char path[64], text[512];
    snprintf(text, sizeof text,
             "app: {psgi: %s, worker_pool: {processes: 5, queue_limit: 7, timeout: 2s}}\n", app);
    write_file(path, text);
    char *a2[] = {"pagid", "-c", path, "--pool", "0", NULL};
    ck_assert_int_eq(cli_parse(ARGC(a2), a2, &o, stderr), 0);
    ck_assert_int_eq(cli_build_config(&o, &c, stderr), 0);
    ck_assert_int_eq(c.worker_pool.processes, 0);
    ck_assert_int_eq(c.worker_pool.set, 1); /* not the default pool after all */
    ck_assert_int_eq(c.worker_pool.queue_limit, 7);
    ck_assert(c.worker_pool.timeout == 2.0);
    config_free(&c);
    cli_options_free(&o);
    unlink(path);

    char *a3[] = {"pagid", "-w", "0", "--pool", "2", (char *)app, NULL};
    ck_assert_int_eq(cli_parse(ARGC(a3), a3, &o, stderr), 0);
    FILE *f = capture();
    ck_assert_int_eq(cli_build_config(&o, &c, f), 1);
    fclose(f);
    ck_assert_str_eq(out_text, "pagid: --pool 2: -w 0 runs a single process without a master, "
                               "and so without a worker pool\n");
    config_free(&c);
    cli_options_free(&o);
#endif
    char *a4[] = {"pagid", "-a", "hello", "--pool", "2", NULL};
    cli_options o4;
    pagid_config c4;
    ck_assert_int_eq(cli_parse(ARGC(a4), a4, &o4, stderr), 0);
    FILE *f4 = capture();
    ck_assert_int_eq(cli_build_config(&o4, &c4, f4), 1);
    fclose(f4);
    ck_assert_str_eq(out_text,
                     "pagid: --pool: the app 'hello' is not a PSGI app (FILE.psgi), nor is any "
                     "mounted one; only PSGI apps run in a worker pool sized by --pool (a PAGI "
                     "app's pool is the YAML's worker_pool: {processes: N, handlers: FILE})\n");
    ck_assert_int_eq(c4.worker_pool.processes, 0);
    config_free(&c4);
    cli_options_free(&o4);
}
END_TEST

/* debug: in the file, -D/--debug on the command line; a bad value is an
 * error at its FILE:LINE:COLUMN. */
START_TEST(test_debug_key_and_option)
{
    char path[64];
    cli_options o;
    pagid_config c;
    write_file(path, "debug: true\n");
    char *a1[] = {"pagid", "-c", path, NULL};
    ck_assert_int_eq(cli_parse(ARGC(a1), a1, &o, stderr), 0);
    ck_assert_int_eq(cli_build_config(&o, &c, stderr), 0);
    ck_assert_int_eq(c.debug, 1);
    config_free(&c);
    cli_options_free(&o);
    unlink(path);

    char *a2[] = {"pagid", NULL};
    ck_assert_int_eq(cli_parse(ARGC(a2), a2, &o, stderr), 0);
    ck_assert_int_eq(cli_build_config(&o, &c, stderr), 0);
    ck_assert_int_eq(c.debug, 0);
    config_free(&c);
    cli_options_free(&o);

    char *a3[] = {"pagid", "-D", NULL};
    char *a4[] = {"pagid", "--debug", NULL};
    char **both[] = {a3, a4};
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(cli_parse(2, both[i], &o, stderr), 0);
        ck_assert_int_eq(cli_build_config(&o, &c, stderr), 0);
        ck_assert_int_eq(c.debug, 1);
        config_free(&c);
        cli_options_free(&o);
    }

    write_file(path, "app: hello\ndebug: sure\n");
    char *a5[] = {"pagid", "-c", path, NULL};
    ck_assert_int_eq(cli_parse(ARGC(a5), a5, &o, stderr), 0);
    FILE *f = capture();
    ck_assert_int_eq(cli_build_config(&o, &c, f), 1);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(out_text, ":2:8: 'debug' must be true or false, not 'sure'"));
    config_free(&c);
    cli_options_free(&o);
    unlink(path);

    char *a6[] = {"pagid", "--debug=yes", NULL};
    expect_usage_error(a6, ARGC(a6), "pagid: option takes no argument '--debug'");
}
END_TEST

static Suite *cli_suite(void)
{
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("parse");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_add_test(tc, test_parse_nothing);
    tcase_add_test(tc, test_preload_options);
    tcase_add_test(tc, test_debug_key_and_option);
    tcase_add_test(tc, test_parse_short);
    tcase_add_test(tc, test_parse_long_and_clustered);
    tcase_add_test(tc, test_parse_errors);
    tcase_add_test(tc, test_usage_lists_every_option);
    tcase_add_test(tc, test_parse_operator_options);
    suite_add_tcase(s, tc);

    tc = tcase_create("build");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_add_test(tc, test_build_defaults);
    tcase_add_test(tc, test_build_file_then_overrides);
    tcase_add_test(tc, test_build_user_override);
    tcase_add_test(tc, test_build_activated_listeners);
    tcase_add_test(tc, test_build_override_errors);
    tcase_add_test(tc, test_build_file_errors_counted);
    tcase_add_test(tc, test_build_example_config);
    tcase_add_test(tc, test_build_https_listener);
    tcase_add_test(tc, test_parse_positional_app);
    tcase_add_test(tc, test_build_host_port_and_bare_port);
    tcase_add_test(tc, test_build_server_options);
    tcase_add_test(tc, test_build_dev_and_env);
    tcase_add_test(tc, test_build_eval_app);
    tcase_add_test(tc, test_pool_option);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(cli_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
