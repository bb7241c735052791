/*
 * test_mount.c - Check suite for src/worker/mount.c and the root_path/path
 * split in scope_api.c: prefix matching at segment boundaries, longest
 * prefix first, dispatch through a hand-built table of recording apps,
 * lifespan to the top-level app, and loading a table from a config.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/scope/lifespan.h"
#include "worker/scope/mount.h"
#include "worker/scope/scope.h"
#include "worker/core/state_table.h"

static pagid_config cfg;
static struct ev_loop *ev;
static worker_ctx w;

static void setup(void)
{
    config_init_defaults(&cfg);
    memset(&w, 0, sizeof w);
    w.cfg = &cfg;
    ev = ev_loop_new(0);
    ck_assert_ptr_nonnull(ev);
    loop_init(&w.loop, ev);
}

static void teardown(void)
{
    loop_drain_all(&w.loop);
    loop_destroy(&w.loop);
    ev_loop_destroy(ev);
    state_table_unref(w.state);
    config_free(&cfg);
}

/* ---- matching ---- */

START_TEST(test_prefix_boundaries)
{
    ck_assert(mount_prefix_matches("/static", 7, "/static", 7));
    ck_assert(mount_prefix_matches("/static", 7, "/static/", 8));
    ck_assert(mount_prefix_matches("/static", 7, "/static/x/y", 11));
    ck_assert(!mount_prefix_matches("/static", 7, "/staticx", 8));
    ck_assert(!mount_prefix_matches("/static", 7, "/stat", 5));
    ck_assert(!mount_prefix_matches("/static", 7, "/", 1));
    ck_assert(!mount_prefix_matches("/static", 7, "/Static/x", 9)); /* case matters */
}
END_TEST

/* ---- dispatch through recording apps ---- */

static char seen[8][128];
static int n_seen;

static void record(pagi_scope *s, const char *who)
{
    pagi_str r = pagi_scope_root_path(s), p = pagi_scope_path(s), raw = pagi_scope_raw_path(s);
    snprintf(seen[n_seen++ % 8], 128, "%s root=%.*s path=%.*s raw=%.*s", who, (int)r.len, r.ptr,
             (int)p.len, p.ptr, (int)raw.len, raw.ptr);
}

static void h_default(pagi_scope *s, void *i)
{
    record(s, i);
}

static const pagi_app rec_app = PAGI_APP_INIT("rec", NULL, h_default, NULL);

static int nop_send(pagi_scope *s, const pagi_event *e, pagi_send_cb cb, void *ud)
{
    return 0;
}
static int nop_next(pagi_scope *s, pagi_event *e, int take)
{
    return 0;
}
static void nop_finished(pagi_scope *s, const char *error) {}
static const scope_ops nop_ops = {
    .send = nop_send, .next_event = nop_next, .finished = nop_finished};

static void run_path(const char *path)
{
    scope_request r = {.method = "GET",
                       .http_version = "1.1",
                       .path = {path, strlen(path)},
                       .raw_path = {path, strlen(path)},
                       .query = {"", 0}};
    pagi_scope *s = scope_new(&w, PAGI_SCOPE_HTTP, &nop_ops, NULL, &r);
    ck_assert_ptr_nonnull(s);
    scope_start_app(s);
    pagi_scope_finish(s, NULL);
    scope_detach(s);
    loop_drain_all(&w.loop);
}

START_TEST(test_dispatch)
{
    mount_entry v[4];
    memset(v, 0, sizeof v);
    /* as mount_table_load leaves it: [0] the top-level app, then longest first */
    v[0] = (mount_entry){.prefix = "", .len = 0, .instance = "default"};
    v[1] = (mount_entry){.prefix = "/static/img", .len = 11, .instance = "img"};
    v[2] = (mount_entry){.prefix = "/static", .len = 7, .instance = "static"};
    v[3] = (mount_entry){.prefix = "/api", .len = 4, .instance = "api"};
    for (int i = 0; i < 4; i++)
        v[i].h.app = &rec_app;
    mount_table t = {v, 4};
    mount_table_install(&t, &w);
    ck_assert_ptr_ne(w.app, &rec_app); /* the dispatcher */
    ck_assert_ptr_eq(w.app_instance, &t);
    ck_assert_uint_eq(mount_match(&t, "/static/img/a.png", 17), 1);
    ck_assert_uint_eq(mount_match(&t, "/static/imgx", 12), 2);
    ck_assert_uint_eq(mount_match(&t, "/apix", 5), 0);

    n_seen = 0;
    run_path("/static/a.css");
    run_path("/static");
    run_path("/static/");
    run_path("/staticx");
    run_path("/static/img/b/c.png");
    run_path("/api/v1?x");
    run_path("/");
    ck_assert_int_eq(n_seen, 7);
    ck_assert_str_eq(seen[0], "static root=/static path=/static/a.css raw=/static/a.css");
    ck_assert_str_eq(seen[1], "static root=/static path=/static raw=/static");
    ck_assert_str_eq(seen[2], "static root=/static path=/static/ raw=/static/");
    ck_assert_str_eq(seen[3], "default root= path=/staticx raw=/staticx");
    ck_assert_str_eq(seen[4], "img root=/static/img path=/static/img/b/c.png raw=/static/img/b/c.png");
    ck_assert_str_eq(seen[5], "api root=/api path=/api/v1?x raw=/api/v1?x");
    ck_assert_str_eq(seen[6], "default root= path=/ raw=/");
}
END_TEST

START_TEST(test_no_mounts_no_dispatcher)
{
    mount_entry v[1];
    memset(v, 0, sizeof v);
    v[0] = (mount_entry){.prefix = "", .instance = "default"};
    v[0].h.app = &rec_app;
    mount_table t = {v, 1};
    mount_table_install(&t, &w);
    ck_assert_ptr_eq(w.app, &rec_app);
    ck_assert_ptr_eq(w.app_instance, "default");
}
END_TEST

/* ---- lifespan across the table ---- */

static char trail[512];

static void note(const char *fmt, const char *who)
{
    char line[64];
    snprintf(line, sizeof line, fmt, who);
    if (trail[0])
        strcat(trail, ",");
    strcat(trail, line);
}

/* instance: "name" or "name!" (fails startup) or "name-" (declines) */
static void ls_recv(pagi_scope *s, const pagi_event *e, void *ud)
{
    const char *who = ud;
    size_t n = strlen(who);
    if (e->type == PAGI_EV_LIFESPAN_STARTUP) {
        note("%s:startup", who);
        char key[16];
        snprintf(key, sizeof key, "k-%s", who);
        pagi_state_set(s, key, (void *)who);
        /* each app sees what the apps before it set */
        if (pagi_state_get(s, "k-A"))
            note("%s:sees-A", who);
        pagi_event out = PAGI_EVENT_INIT(who[n - 1] == '!' ? PAGI_EV_LIFESPAN_STARTUP_FAILED
                                                           : PAGI_EV_LIFESPAN_STARTUP_COMPLETE);
        out.message = (pagi_str){"boom", 4};
        ck_assert_int_eq(pagi_send(s, &out, NULL, NULL), 0);
        if (who[n - 1] == '!')
            pagi_scope_finish(s, NULL);
        else
            ck_assert_int_eq(pagi_receive(s, ls_recv, ud), 0);
        return;
    }
    note("%s:shutdown", who);
    pagi_event out = PAGI_EVENT_INIT(PAGI_EV_LIFESPAN_SHUTDOWN_COMPLETE);
    ck_assert_int_eq(pagi_send(s, &out, NULL, NULL), 0);
    pagi_scope_finish(s, NULL);
}

static void ls_handle(pagi_scope *s, void *instance)
{
    const char *who = instance;
    if (pagi_scope_type_of(s) != PAGI_SCOPE_LIFESPAN || who[strlen(who) - 1] == '-') {
        note("%s:declined", who);
        pagi_scope_finish(s, NULL);
        return;
    }
    ck_assert_int_eq(pagi_receive(s, ls_recv, instance), 0);
}

static const pagi_app ls_app = PAGI_APP_INIT("ls", NULL, ls_handle, NULL);

static int started = -1, stopped;
static char start_msg[128];

static void on_started(worker_ctx *wc, lifespan_outcome o, const char *msg)
{
    started = o == LIFESPAN_OK;
    snprintf(start_msg, sizeof start_msg, "%s", msg ? msg : "");
}
static void on_stopped(worker_ctx *wc)
{
    stopped = 1;
}

static void run_lifespan(const char *a, const char *b, const char *c, int stop)
{
    mount_entry v[3];
    memset(v, 0, sizeof v);
    v[0] = (mount_entry){.prefix = "", .spec = "appA", .instance = (void *)a};
    v[1] = (mount_entry){.prefix = "/bb", .len = 3, .spec = "appB", .instance = (void *)b};
    v[2] = (mount_entry){.prefix = "/c", .len = 2, .spec = "appC", .instance = (void *)c};
    for (int i = 0; i < 3; i++)
        v[i].h.app = &ls_app;
    mount_table t = {v, 3};
    mount_table_install(&t, &w);
    trail[0] = '\0';
    started = -1;
    stopped = 0;
    ck_assert_int_eq(lifespan_start(&w, on_started), 0);
    loop_drain_all(&w.loop);
    if (stop) {
        lifespan_stop(&w, on_stopped);
        loop_drain_all(&w.loop);
        ck_assert_int_eq(stopped, 1);
    }
    lifespan_free(&w);
    loop_drain_all(&w.loop);
}

START_TEST(test_lifespan_fan_out)
{
    run_lifespan("A", "B-", "C", 1);
    ck_assert_int_eq(started, 1);
    ck_assert_str_eq(trail,
                     "A:startup,A:sees-A,B-:declined,C:startup,C:sees-A,C:shutdown,A:shutdown");
}
END_TEST

START_TEST(test_lifespan_failure_rolls_back)
{
    run_lifespan("A", "B", "C!", 0);
    ck_assert_int_eq(started, 0);
    ck_assert_str_eq(trail, "A:startup,A:sees-A,B:startup,B:sees-A,C!:startup,C!:sees-A,"
                            "B:shutdown,A:shutdown");
    ck_assert_str_eq(start_msg, "appC: boom");
}
END_TEST

START_TEST(test_lifespan_all_decline)
{
    run_lifespan("A-", "B-", "C-", 1);
    ck_assert_int_eq(started, 1); /* declined lifespan: the worker starts anyway */
    ck_assert_str_eq(trail, "A-:declined,B-:declined,C-:declined");
}
END_TEST

/* ---- loading from a config ---- */

START_TEST(test_load_from_config)
{
    const char *msg = NULL;
    ck_assert_int_eq(config_set_app(&cfg, "echo", &msg), 0);
    ck_assert_int_eq(config_add_mount(&cfg, "/s", "static:/tmp", NULL, &msg), 0);
    ck_assert_int_eq(config_add_mount(&cfg, "/hello/world/", "hello", NULL, &msg), 0);
    ck_assert_int_eq(config_add_mount(&cfg, "/hello", "hello", NULL, &msg), 0);
    mount_table t;
    char err[256];
    ck_assert_int_eq(mount_table_load(&t, &cfg, &w.loop, err, sizeof err), 0);
    ck_assert_uint_eq(t.n, 4);
    ck_assert_str_eq(t.v[0].prefix, "");
    ck_assert_str_eq(t.v[1].prefix, "/hello/world");
    ck_assert_str_eq(t.v[2].prefix, "/hello");
    ck_assert_str_eq(t.v[3].prefix, "/s");
    ck_assert_ptr_nonnull(t.v[3].instance); /* the static app's instance */
    mount_table_free(&t);

    /* a failing create is reported and what was built is released */
    ck_assert_int_eq(config_add_mount(&cfg, "/gone", "static:/nonexistent-pagid", NULL, &msg), 0);
    ck_assert_int_eq(mount_table_load(&t, &cfg, &w.loop, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "static:/nonexistent-pagid") != NULL, "err: %s", err);
    mount_table_free(&t);

    config_free(&cfg);
    config_init_defaults(&cfg);
    ck_assert_int_eq(config_set_app(&cfg, "bogus-app", &msg), 0);
    ck_assert_int_eq(mount_table_load(&t, &cfg, &w.loop, err, sizeof err), -1);
    mount_table_free(&t);
}
END_TEST

START_TEST(test_config_mount_paths)
{
    const char *msg = NULL;
    ck_assert_int_eq(config_add_mount(&cfg, "/", "hello", NULL, &msg), -1);
    ck_assert_int_eq(config_add_mount(&cfg, "static", "hello", NULL, &msg), -1);
    ck_assert_int_eq(config_add_mount(&cfg, "", "hello", NULL, &msg), -1);
    ck_assert_int_eq(config_add_mount(&cfg, "/a//b", "hello", NULL, &msg), -1);
    ck_assert_int_eq(config_add_mount(&cfg, "/a/../b", "hello", NULL, &msg), -1);
    ck_assert_int_eq(config_add_mount(&cfg, "/a/./b", "hello", NULL, &msg), -1);
    ck_assert_int_eq(config_add_mount(&cfg, "/a?b", "hello", NULL, &msg), -1);
    ck_assert_int_eq(config_add_mount(&cfg, "/a", "", NULL, &msg), -1);
    ck_assert_int_eq(config_add_mount(&cfg, "/a/", "hello", NULL, &msg), 0);
    ck_assert_str_eq(cfg.mounts[0].path, "/a");
    ck_assert_int_eq(config_add_mount(&cfg, "/a", "echo", NULL, &msg), -1);
    ck_assert_str_eq(msg, "is mounted twice");
    pagid_static_opts o = {.listing = 1, .follow_symlinks = 0};
    ck_assert_int_eq(config_add_mount(&cfg, "/a/b", "static:/tmp", &o, &msg), 0);
    ck_assert_int_eq(cfg.mounts[1].static_opts.listing, 1);
    ck_assert_uint_eq(cfg.n_mounts, 2);
}
END_TEST

static Suite *mount_suite(void)
{
    Suite *s = suite_create("mount");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_prefix_boundaries);
    tcase_add_test(tc, test_dispatch);
    tcase_add_test(tc, test_no_mounts_no_dispatcher);
    tcase_add_test(tc, test_lifespan_fan_out);
    tcase_add_test(tc, test_lifespan_failure_rolls_back);
    tcase_add_test(tc, test_lifespan_all_decline);
    tcase_add_test(tc, test_load_from_config);
    tcase_add_test(tc, test_config_mount_paths);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(mount_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
