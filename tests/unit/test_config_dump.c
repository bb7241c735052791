/*
 * test_config_dump.c - Check suite for src/common/config_dump.c: a config
 * that sets every key (and one that sets none) is loaded, dumped, the dump
 * loaded again, and the two models compared field by field; strings that
 * YAML would misread are quoted; sizes and durations come back exact.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"
#include "common/config_dump.h"
#include "common/redis_url.h"
#include "common/tls_server.h"

static char *text; /* the last dump, or the last loader messages */

static void teardown(void)
{
    free(text);
    text = NULL;
}

/* Load yaml over defaults and finalize; every error fails the test. */
static void load_ok(pagid_config *c, const char *yaml, const char *name)
{
    size_t len;
    char *msgs = NULL;
    FILE *f = open_memstream(&msgs, &len);
    ck_assert_ptr_nonnull(f);
    config_init_defaults(c);
    int n = config_load_string(c, yaml, name, f);
    int fin = config_finalize(c, f);
    fclose(f);
    ck_assert_msg(n == 0 && fin == 0, "%s does not load:\n%s\n--- input ---\n%s", name, msgs, yaml);
    free(msgs);
}

/* config_dump into text. */
static void dump(const pagid_config *c)
{
    size_t len;
    free(text);
    text = NULL;
    FILE *f = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(config_dump(c, f), 0);
    fclose(f);
}

static int str_same(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

#define SAME_STR(field)                                                                            \
    ck_assert_msg(str_same(a->field, b->field), #field ": '%s' vs '%s'\n%s",                       \
                  a->field ? a->field : "(null)", b->field ? b->field : "(null)", text)
#define SAME_NUM(field) ck_assert_msg(a->field == b->field, #field " differs\n%s", text)

static void same_listen(const pagid_listen *a, const pagid_listen *b)
{
    SAME_NUM(kind);
    SAME_STR(spec);
    SAME_STR(host);
    SAME_NUM(port);
    SAME_STR(path);
    SAME_NUM(status);
    SAME_NUM(has_mode);
    SAME_NUM(has_uid);
    SAME_NUM(has_gid);
    SAME_NUM(mode);
    SAME_NUM(uid);
    SAME_NUM(gid);
}

/* Every field of the model except source (the file name). */
static void same_config(const pagid_config *a, const pagid_config *b)
{
    SAME_NUM(n_listens);
    for (size_t i = 0; i < a->n_listens; i++)
        same_listen(&a->listens[i], &b->listens[i]);
    SAME_NUM(workers);
    SAME_NUM(max_requests);
    SAME_STR(app);
    SAME_NUM(app_static.listing);
    SAME_NUM(app_static.follow_symlinks);
    SAME_STR(perl_lib);
    SAME_NUM(n_mounts);
    for (size_t i = 0; i < a->n_mounts; i++) {
        SAME_STR(mounts[i].path);
        SAME_STR(mounts[i].app);
        SAME_NUM(mounts[i].static_opts.listing);
        SAME_NUM(mounts[i].static_opts.follow_symlinks);
    }
    SAME_NUM(limits.max_connections);
    SAME_NUM(limits.max_request_line);
    SAME_NUM(limits.max_header_size);
    SAME_NUM(limits.max_header_count);
    SAME_NUM(limits.max_body_size);
    SAME_NUM(limits.max_ws_message_size);
    SAME_NUM(limits.max_receive_queue);
    SAME_NUM(limits.max_receive_queue_size);
    SAME_NUM(limits.http2_max_streams);
    SAME_NUM(limits.http2_stream_window);
    SAME_NUM(limits.http2_connection_window);
    SAME_NUM(limits.http2_max_resets);
    SAME_NUM(limits.http2_max_open_files);
    SAME_NUM(timeouts.header);
    SAME_NUM(timeouts.idle);
    SAME_NUM(timeouts.keepalive);
    SAME_NUM(timeouts.request);
    SAME_NUM(timeouts.write);
    SAME_NUM(timeouts.ws_idle);
    SAME_NUM(timeouts.sse_idle);
    SAME_NUM(timeouts.ws_close);
    SAME_NUM(timeouts.shutdown);
    SAME_NUM(timeouts.heartbeat);
    SAME_NUM(timeouts.lifespan_startup);
    SAME_NUM(high_watermark);
    SAME_NUM(low_watermark);
    SAME_STR(access_log_path);
    SAME_STR(access_log_format);
    SAME_STR(error_log_path);
    SAME_NUM(error_log_level);
    ck_assert_msg((a->status_listen == NULL) == (b->status_listen == NULL), "status.listen\n%s",
                  text);
    if (a->status_listen)
        same_listen(a->status_listen, b->status_listen);
    SAME_STR(status_path);
    SAME_NUM(pubsub.backend);
    /* The dump masks the password: b has "***" where a has it. */
    char *masked = a->pubsub.url ? redis_url_masked(a->pubsub.url) : NULL;
    ck_assert_msg(str_same(masked, b->pubsub.url), "pubsub.url: '%s' vs '%s'\n%s",
                  masked ? masked : "(null)", b->pubsub.url ? b->pubsub.url : "(null)", text);
    free(masked);
    SAME_STR(pubsub.prefix);
    SAME_NUM(pubsub.buffer);
    /* The dump spells the default groups out: the same groups either way. */
    ck_assert_msg(str_same(a->tls_groups ? a->tls_groups : PAGID_TLS_DEFAULT_GROUPS,
                           b->tls_groups ? b->tls_groups : PAGID_TLS_DEFAULT_GROUPS),
                  "tls_groups: '%s' vs '%s'\n%s", a->tls_groups ? a->tls_groups : "(null)",
                  b->tls_groups ? b->tls_groups : "(null)", text);
    SAME_STR(pid_file);
    SAME_STR(user);
    SAME_STR(group);
}

/* load yaml, dump, load the dump, compare; the dump stays in text. */
static void round_trip(const char *yaml)
{
    pagid_config a, b;
    load_ok(&a, yaml, "in.yaml");
    dump(&a);
    load_ok(&b, text, "dump.yaml");
    same_config(&a, &b);
    /* And the dump of the dump is the same text: nothing drifts. */
    char *first = strdup(text);
    dump(&b);
    ck_assert_str_eq(text, first);
    free(first);
    config_free(&a);
    config_free(&b);
}

/* ---- tests ---------------------------------------------------------------- */

START_TEST(test_defaults_round_trip)
{
    round_trip("");
    /* Every section and top-level key is present even when nothing was set. */
    static const char *const keys[] = {
        "listen:",
        "workers:",
        "max_requests:",
        "app: demo",
        "mounts: []",
        "limits:",
        "timeouts:",
        "flow_control:",
        "access_log:",
        "error_log:",
        "status:",
        "pubsub:",
        "  backend: local",
        "  buffer: 1m",
        "pid_file: ~",
        "user: ~",
        "group: ~",
        "  path: off",
        "  path: stderr",
        "  listen: off",
        "  header: 30s",
        "  ws_idle: 0",
        "  max_body_size: 10m",
        "  high_watermark: 64k",
        "- 127.0.0.1:8080",
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        ck_assert_msg(strstr(text, keys[i]), "dump lacks '%s':\n%s", keys[i], text);
    ck_assert_msg(!strstr(text, "---"), "a document marker in:\n%s", text);
}
END_TEST

static const char every_key[] =
    "listen:\n"
    "  - 127.0.0.1:9001\n"
    "  - '[::1]:9002'\n"
    "  - :9003\n"
    "  - unix:/tmp/pagid-dump-a.sock\n"
    "  - {address: unix:/tmp/pagid-dump-b.sock, mode: 0660, owner: 12345, group: 54321}\n"
    "  - {address: unix:/tmp/pagid-dump-c.sock, mode: '600'}\n"
    "  - {address: unix:/tmp/pagid-dump-d.sock, group: 0}\n"
    "workers: 3\n"
    "max_requests: 1000\n"
    "app: {static: /tmp, listing: true}\n"
    "mounts:\n"
    "  - {path: /hello, app: hello}\n"
    "  - {path: /files/, app: {static: /tmp, follow_symlinks: yes}}\n"
    "  - {path: /e, app: echo}\n"
    "limits:\n"
    "  max_connections: 123\n"
    "  max_request_line: 4k\n"
    "  max_header_size: 3000\n"
    "  max_header_count: 7\n"
    "  max_body_size: 0\n"
    "  max_ws_message_size: 2g\n"
    "  max_receive_queue: 9\n"
    "  max_receive_queue_size: 3m\n"
    "  http2_max_streams: 7\n"
    "  http2_stream_window: 128k\n"
    "  http2_connection_window: 2m\n"
    "  http2_max_resets: 30\n"
    "  http2_max_open_files: 9\n"
    "timeouts:\n"
    "  header: 500ms\n"
    "  idle: 1.5m\n"
    "  keepalive: 2h\n"
    "  request: 0.25\n"
    "  write: 1500ms\n"
    "  ws_idle: 0\n"
    "  sse_idle: 61s\n"
    "  ws_close: 0.001s\n"
    "  shutdown: 1.05s\n"
    "  heartbeat: 3m\n"
    "  lifespan_startup: 0.3333\n"
    "flow_control: {high_watermark: 128k, low_watermark: 1000}\n"
    "access_log:\n"
    "  path: '/var/log/pagid access: log #1'\n"
    "  format: '%h \"%r\" %>s # %{x-y}i: %X'\n"
    "error_log: {path: /tmp/pagid err.log, level: debug}\n"
    "status: {listen: 127.0.0.1:9100, path: /stats}\n"
    "pubsub: {backend: redis, url: 'redis://:p%40w@[::1]:7000/2', prefix: '', buffer: 0}\n"
    "pid_file: /run/pagid/pagid.pid\n"
    "user: 'null'\n"
    "group: '- odd'\n";

START_TEST(test_every_key_round_trip)
{
    round_trip(every_key);
    /* The forms an operator reads: units, the mapping forms, numeric ids. */
    static const char *const forms[] = {
        "  header: 500ms",
        "  idle: 90s",
        "  keepalive: 2h",
        "  request: 250ms",
        "  heartbeat: 3m",
        "  max_ws_message_size: 2g",
        "  max_request_line: 4k",
        "  max_header_size: 3000",
        "  low_watermark: 1000",
        "  mode: '0660'",
        "  owner: 12345",
        "  group: 54321",
        "  mode: '0600'",
        "  listing: true",
        "  follow_symlinks: true",
        "  static: /tmp",
        "  listen: 127.0.0.1:9100",
        "user: 'null'",
        "workers: 3",
        "  level: debug",
    };
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++)
        ck_assert_msg(strstr(text, forms[i]), "dump lacks '%s':\n%s", forms[i], text);
    /* The status listener is under status only, not in the listen list. */
    ck_assert_msg(!strstr(text, "- 127.0.0.1:9100"), "status listener in listen:\n%s", text);
    /* The url's password is masked, the rest kept. */
    ck_assert_msg(!strstr(text, "p%40w"), "password dumped:\n%s", text);
    ck_assert_msg(strstr(text, "redis://:***@[::1]:7000/2"), "masked url missing:\n%s", text);
}
END_TEST

START_TEST(test_overrides_are_dumped)
{
    /* What -l/-w/-a do to a loaded config shows in the dump. */
    pagid_config a, b;
    const char *msg;
    load_ok(&a, "listen: 127.0.0.1:9001\nworkers: 2\napp: hello\n", "in.yaml");
    config_clear_listens(&a);
    ck_assert_int_eq(config_add_listen(&a, "unix:/tmp/pagid-dump-o.sock", &msg), 0);
    ck_assert_int_eq(config_set_app(&a, "echo", &msg), 0);
    a.workers = 0;
    dump(&a);
    ck_assert_msg(strstr(text, "- unix:/tmp/pagid-dump-o.sock\n"), "%s", text);
    ck_assert_msg(!strstr(text, "9001"), "%s", text);
    ck_assert_msg(strstr(text, "workers: 0\n"), "%s", text);
    ck_assert_msg(strstr(text, "app: echo\n"), "%s", text);
    load_ok(&b, text, "dump.yaml");
    same_config(&a, &b);
    config_free(&a);
    config_free(&b);
}
END_TEST

#ifdef PAGID_WITH_PERL
START_TEST(test_perl_app_and_lib)
{
    char path[] = "/tmp/pagid-dump-XXXXXX.pl";
    int fd = mkstemps(path, 3);
    ck_assert_int_ge(fd, 0);
    close(fd);
    char yaml[512];
    snprintf(yaml, sizeof yaml,
             "app: {perl: %s, lib: [/opt/a, 'lib dir']}\n"
             "mounts: [{path: /p, app: {perl: %s, lib: /opt/c}}]\n",
             path, path);
    round_trip(yaml);
    ck_assert_msg(strstr(text, "  perl: "), "%s", text);
    /* One list for the whole config, shown once with the first Perl app. */
    ck_assert_msg(strstr(text, "  - /opt/a\n  - lib dir\n  - /opt/c\n"), "%s", text);
    unlink(path);
}
END_TEST
#endif

START_TEST(test_format_size)
{
    char buf[32];
    static const struct {
        size_t v;
        const char *s;
    } cases[] = {{0, "0"},
                 {1, "1"},
                 {1000, "1000"},
                 {1024, "1k"},
                 {1536, "1536"},
                 {64 * 1024, "64k"},
                 {1 << 20, "1m"},
                 {3 << 20, "3m"},
                 {(size_t)5 << 30, "5g"},
                 {(size_t)-1, "18446744073709551615"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        config_format_size(cases[i].v, buf, sizeof buf);
        ck_assert_str_eq(buf, cases[i].s);
        size_t back;
        ck_assert_int_eq(config_parse_size(buf, &back), 0);
        ck_assert_uint_eq(back, cases[i].v);
    }
}
END_TEST

START_TEST(test_format_duration_reads_back_exactly)
{
    static const char *const inputs[] = {
        "0",     "1",      "59s",        "60",       "3600",
        "86400", "90s",    "500ms",      "1ms",      "1500ms",
        "0.1",   "0.3",    "0.3333",     "1.05",     "2.5m",
        "1.5ms", "0.0001", "123456.789", "31536000", "0.000000000000000000001"};
    char buf[64];
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
        double v, back;
        ck_assert_int_eq(config_parse_duration(inputs[i], &v), 0);
        config_format_duration(v, buf, sizeof buf);
        ck_assert_msg(config_parse_duration(buf, &back) == 0, "'%s' -> '%s' does not parse",
                      inputs[i], buf);
        ck_assert_msg(back == v, "'%s' -> '%s' reads back as %.17g, not %.17g", inputs[i], buf,
                      back, v);
    }
    config_format_duration(30, buf, sizeof buf);
    ck_assert_str_eq(buf, "30s");
    config_format_duration(60, buf, sizeof buf);
    ck_assert_str_eq(buf, "60s");
    config_format_duration(300, buf, sizeof buf);
    ck_assert_str_eq(buf, "5m");
    config_format_duration(7200, buf, sizeof buf);
    ck_assert_str_eq(buf, "2h");
    config_format_duration(0.5, buf, sizeof buf);
    ck_assert_str_eq(buf, "500ms");
}
END_TEST

START_TEST(test_write_error_reported)
{
    pagid_config c;
    load_ok(&c, "", "in.yaml");
    FILE *full = fopen("/dev/full", "w");
    if (full) {
        setvbuf(full, NULL, _IONBF, 0);
        ck_assert_int_eq(config_dump(&c, full), -1);
        fclose(full);
    }
    config_free(&c);
}
END_TEST

/* Groups in OpenSSL's names: each listener's effective list (its own, else
 * tls.groups), and tls.groups itself with the default spelled out. */
START_TEST(test_tls_groups_dumped)
{
    pagid_config a, b;
    load_ok(&a, "", "in.yaml");
    dump(&a);
    ck_assert_msg(strstr(text, "\ntls:\n  groups: [X25519, prime256v1, secp384r1]\n"), "%s", text);
    config_free(&a);
    static const char yaml[] = "listen:\n"
                               "  - address: 127.0.0.1:8443\n"
                               "    tls: {cert: c.pem, key: k.pem, groups: [p-256, x25519]}\n"
                               "  - address: 127.0.0.1:8444\n"
                               "    tls: {cert: c.pem, key: k.pem}\n"
                               "tls: {groups: [P-384, ffdhe3072]}\n";
    round_trip(yaml);
    ck_assert_msg(strstr(text, "    groups: [prime256v1, X25519]\n"), "%s", text);
    ck_assert_msg(strstr(text, "    groups: [secp384r1, ffdhe3072]\n"), "%s", text);
    ck_assert_msg(strstr(text, "\ntls:\n  groups: [secp384r1, ffdhe3072]\n"), "%s", text);
    /* Read back, every listener has its groups as they were in effect. */
    load_ok(&a, yaml, "in.yaml");
    dump(&a);
    load_ok(&b, text, "dump.yaml");
    ck_assert_str_eq(b.listens[0].tls->groups, "prime256v1:X25519");
    ck_assert_str_eq(b.listens[1].tls->groups, "secp384r1:ffdhe3072");
    config_free(&a);
    config_free(&b);
}
END_TEST

static Suite *config_dump_suite(void)
{
    Suite *s = suite_create("config_dump");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_add_test(tc, test_defaults_round_trip);
    tcase_add_test(tc, test_every_key_round_trip);
    tcase_add_test(tc, test_overrides_are_dumped);
    tcase_add_test(tc, test_tls_groups_dumped);
#ifdef PAGID_WITH_PERL
    tcase_add_test(tc, test_perl_app_and_lib);
#endif
    tcase_add_test(tc, test_format_size);
    tcase_add_test(tc, test_format_duration_reads_back_exactly);
    tcase_add_test(tc, test_write_error_reported);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(config_dump_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
