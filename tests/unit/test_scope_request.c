/*
 * test_scope_request.c - Check suite for src/worker/scope/scope_request.c:
 * a scope's copy of its request is its own (the caller's strings may go
 * away), exact for small and large requests, and the blocks of small ones
 * wait for reuse, at most 256 a worker, until the worker lets go.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "worker/scope/scope.h"
#include "worker/core/state_table.h"
#include "worker/worker_ctx.h"

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
    scope_quarantine_free(&w); /* the shells and the blocks kept */
    ck_assert_uint_eq(w.n_req_blocks, 0);
    ck_assert_ptr_null(w.req_blocks);
    loop_drain_all(&w.loop);
    loop_destroy(&w.loop);
    ev_loop_destroy(ev);
    state_table_unref(w.state);
    config_free(&cfg);
}

static int fake_send(pagi_scope *s, const pagi_event *e, pagi_send_cb cb, void *ud)
{
    (void)e;
    scope_complete_send(s, cb, ud, NULL);
    return 0;
}

static int fake_next_event(pagi_scope *s, pagi_event *e, int take)
{
    (void)s;
    if (take)
        e->type = PAGI_EV_HTTP_DISCONNECT;
    return 1;
}

static void fake_receive_wanted(pagi_scope *s)
{
    (void)s;
}

static void fake_finished(pagi_scope *s, const char *error)
{
    (void)s;
    (void)error;
}

static size_t fake_buffered(const pagi_scope *s)
{
    (void)s;
    return 0;
}

static int fake_above_high(const pagi_scope *s)
{
    (void)s;
    return 0;
}

static const scope_ops fake_ops = {
    .send = fake_send,
    .next_event = fake_next_event,
    .receive_wanted = fake_receive_wanted,
    .finished = fake_finished,
    .buffered = fake_buffered,
    .above_high = fake_above_high,
};
static int fake_proto;

/* A request whose strings live in memory overwritten once the scope is made. */
static pagi_scope *make(size_t value_len)
{
    char *value = malloc(value_len + 1);
    memset(value, 'v', value_len);
    value[value_len] = 0;
    char method[] = "GET", path[] = "/a b", raw[] = "/a%20b", query[] = "x=1";
    pagi_header h[] = {{{"host", 4}, {"example.com", 11}}, {{"x-long", 6}, {value, value_len}}};
    scope_request r = {.method = method,
                       .http_version = "2",
                       .scheme = "https",
                       .path = {path, 4},
                       .raw_path = {raw, 6},
                       .query = {query, 3},
                       .headers = h,
                       .header_count = 2};
    pagi_scope *s = scope_new(&w, PAGI_SCOPE_HTTP, &fake_ops, &fake_proto, &r);
    ck_assert_ptr_nonnull(s);
    memset(value, 'X', value_len);
    free(value);
    memset(method, 'X', 3);
    memset(path, 'X', 4);
    return s;
}

static void check_copy(pagi_scope *s, size_t value_len)
{
    ck_assert_str_eq(pagi_scope_method(s), "GET");
    pagi_str p = pagi_scope_path(s);
    ck_assert(p.len == 4 && !memcmp(p.ptr, "/a b", 4));
    pagi_str q = pagi_scope_query_string(s);
    ck_assert(q.len == 3 && !memcmp(q.ptr, "x=1", 3));
    size_t n = 0;
    const pagi_header *h = pagi_scope_headers(s, &n);
    ck_assert_uint_eq(n, 2);
    ck_assert(h[1].name.len == 6 && !memcmp(h[1].name.ptr, "x-long", 6));
    ck_assert_uint_eq(h[1].value.len, value_len);
    for (size_t i = 0; i < value_len; i++)
        ck_assert_int_eq(h[1].value.ptr[i], 'v');
}

static void end(pagi_scope *s)
{
    pagi_scope_finish(s, NULL);
    scope_detach(s);
    loop_drain_all(&w.loop); /* the release runs at the safe point */
}

#define MANY 300 /* more than the 256 blocks kept */

START_TEST(small_blocks_wait_for_reuse_and_are_bounded)
{
    static pagi_scope *v[MANY];
    for (int i = 0; i < MANY; i++)
        v[i] = make(10);
    for (int i = 0; i < MANY; i++)
        check_copy(v[i], 10);
    ck_assert_uint_eq(w.n_req_blocks, 0);
    for (int i = 0; i < MANY; i++)
        end(v[i]);
#if defined(__SANITIZE_ADDRESS__)
    ck_assert_uint_eq(w.n_req_blocks, 0); /* every block freed: ASan sees a use after free */
#else
    ck_assert_uint_eq(w.n_req_blocks, 256);
    for (int i = 0; i < 5; i++)
        v[i] = make(100); /* still small: from the list, each a whole copy */
    ck_assert_uint_eq(w.n_req_blocks, 251);
    for (int i = 0; i < 5; i++) {
        check_copy(v[i], 100);
        end(v[i]);
    }
    ck_assert_uint_eq(w.n_req_blocks, 256);
#endif
}
END_TEST

START_TEST(large_requests_have_blocks_of_their_own)
{
    pagi_scope *s = make(5000);
    check_copy(s, 5000);
    ck_assert_uint_eq(w.n_req_blocks, 0);
    end(s);
    ck_assert_uint_eq(w.n_req_blocks, 0); /* freed, never kept */
    pagi_scope *small = make(10);
    end(small);
#if !defined(__SANITIZE_ADDRESS__)
    ck_assert_uint_eq(w.n_req_blocks, 1);
#endif
    s = make(2000); /* a large one does not take a small block */
    check_copy(s, 2000);
#if !defined(__SANITIZE_ADDRESS__)
    ck_assert_uint_eq(w.n_req_blocks, 1);
#endif
    end(s);
}
END_TEST

static Suite *scope_request_suite(void)
{
    Suite *s = suite_create("scope_request");
    TCase *tc = tcase_create("blocks");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, small_blocks_wait_for_reuse_and_are_bounded);
    tcase_add_test(tc, large_requests_have_blocks_of_their_own);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(scope_request_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
