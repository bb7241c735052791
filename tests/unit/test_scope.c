/*
 * test_scope.c - Check suite for src/worker/scope.c and scope_api.c on a
 * hand-built worker_ctx with a fake protocol driver (scope_ops): request
 * copy, receive delivery, disconnect/complete ordering, lifetimes, state.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/core/reason.h"
#include "worker/scope/scope.h"
#include "worker/core/state_table.h"
#include "worker/worker_ctx.h"

/* ---- the fixture: a worker context on a real ev loop ---- */

static pagid_config cfg;
static struct ev_loop *ev;
static worker_ctx w;

static void setup(void)
{
    config_init_defaults(&cfg);
    memset(&w, 0, sizeof w);
    w.cfg = &cfg;
    w.worker_num = 3;
    w.under_master = 1;
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

static size_t drain(void)
{
    return runq_drain(&w.loop.rq);
}

/* ---- a log of what ran, in order ---- */

static char trail[1024];

static void note(const char *what)
{
    if (trail[0])
        strcat(trail, ",");
    strcat(trail, what);
}

/* ---- the fake protocol driver ---- */

typedef struct fake_proto {
    int chunks; /* body chunks available to receive */
    int sends, wanted, finished_calls;
    const char *finished_error;
    size_t buffered;
    int above_high;
} fake_proto;

static fake_proto fp;

static int fake_send(pagi_scope *s, const pagi_event *e, pagi_send_cb cb, void *ud)
{
    fp.sends++;
    if (e->type == PAGI_EV_LIFESPAN_STARTUP) /* what this driver rejects */
        return scope_fail(s, "send: not sendable");
    scope_complete_send(s, cb, ud, NULL);
    return 0;
}

/* As http1_exchange.c: a scope no longer connected (or complete) only has a disconnect left. */
static int fake_next_event(pagi_scope *s, pagi_event *e, int take)
{
    if (!scope_is_connected(s) || scope_is_complete(s)) {
        if (take)
            e->type = PAGI_EV_HTTP_DISCONNECT;
        return 1;
    }
    if (fp.chunks == 0)
        return 0;
    if (!take)
        return 1;
    fp.chunks--;
    buf *d = scope_delivery_buf(s);
    buf_reset(d);
    buf_append_str(d, "chunk");
    e->type = PAGI_EV_HTTP_REQUEST;
    e->body.ptr = buf_head(d);
    e->body.len = buf_size(d);
    e->more = fp.chunks > 0;
    return 1;
}

static void fake_receive_wanted(pagi_scope *s)
{
    fp.wanted++;
}

static void fake_finished(pagi_scope *s, const char *error)
{
    fp.finished_calls++;
    fp.finished_error = error;
}

static size_t fake_buffered(const pagi_scope *s)
{
    return fp.buffered;
}
static int fake_above_high(const pagi_scope *s)
{
    return fp.above_high;
}

static const scope_ops fake_ops = {
    .send = fake_send,
    .next_event = fake_next_event,
    .receive_wanted = fake_receive_wanted,
    .finished = fake_finished,
    .buffered = fake_buffered,
    .above_high = fake_above_high,
};

static pagi_scope *new_http(void)
{
    static const pagi_header h[] = {{{"host", 4}, {"example.com", 11}}};
    scope_request r = {.method = "GET",
                       .http_version = "1.1",
                       .path = {"/", 1},
                       .raw_path = {"/", 1},
                       .query = {"", 0},
                       .headers = h,
                       .header_count = 1};
    pagi_scope *s = scope_new(&w, PAGI_SCOPE_HTTP, &fake_ops, &fp, &r);
    ck_assert_ptr_nonnull(s);
    return s;
}

static void end_scope(pagi_scope *s)
{
    scope_detach(s);
    pagi_scope_finish(s, NULL);
    drain();
}

static int n_release;
static char released[] = "released";

static void release_cb(pagi_scope *s, void *data)
{
    ck_assert_ptr_nonnull(s);
    ck_assert_ptr_nonnull(data);
    n_release++;
    note((const char *)data);
}

/* ---- request copy and accessors ---- */

START_TEST(request_is_copied)
{
    char *method = strdup("PATCH"), *ver = strdup("1.0"), *scheme = strdup("http");
    char *path = malloc(8), *raw = strdup("/a%00b/c"), *query = strdup("x=1&y=%20");
    memcpy(path, "/a\0b/c", 6);
    char *client = strdup("192.0.2.7"), *server = strdup("/run/pagid.sock");
    pagi_header *hv = calloc(3, sizeof *hv);
    char *names[3] = {strdup("host"), strdup("cookie"), strdup("x-empty")};
    char *values[3] = {strdup("example.com"), strdup("a=1; b=2"), strdup("")};
    for (int i = 0; i < 3; i++) {
        hv[i].name = (pagi_str){names[i], strlen(names[i])};
        hv[i].value = (pagi_str){values[i], strlen(values[i])};
    }
    scope_request r = {.method = method,
                       .http_version = ver,
                       .scheme = scheme,
                       .path = {path, 6},
                       .raw_path = {raw, strlen(raw)},
                       .query = {query, strlen(query)},
                       .headers = hv,
                       .header_count = 3,
                       .client_host = client,
                       .client_port = 54321,
                       .server_host = server,
                       .server_port = -1};
    pagi_scope *s = scope_new(&w, PAGI_SCOPE_HTTP, &fake_ops, &fp, &r);
    ck_assert_ptr_nonnull(s);

    /* Scribble over the source, then free it. */
    memset(method, 'X', 5);
    memset(path, 'X', 6);
    memset(raw, 'X', strlen(raw));
    memset(client, 'X', strlen(client));
    for (int i = 0; i < 3; i++) {
        memset(names[i], 'X', strlen(names[i]));
        memset(values[i], 'X', strlen(values[i]));
    }
    hv[0].name.len = 1;
    char *owned[] = {method, ver,      scheme,   path,     raw,       query,     client,
                     server, names[0], names[1], names[2], values[0], values[1], values[2]};
    for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++)
        free(owned[i]);
    free(hv);

    ck_assert_int_eq(pagi_scope_type_of(s), PAGI_SCOPE_HTTP);
    ck_assert_str_eq(pagi_scope_type_name(s), "http");
    ck_assert_str_eq(pagi_scope_method(s), "PATCH");
    ck_assert_str_eq(pagi_scope_http_version(s), "1.0");
    ck_assert_str_eq(pagi_scope_scheme(s), "http");
    pagi_str p = pagi_scope_path(s);
    ck_assert_uint_eq(p.len, 6);
    ck_assert(memcmp(p.ptr, "/a\0b/c", 6) == 0);
    p = pagi_scope_raw_path(s);
    ck_assert_uint_eq(p.len, 8);
    ck_assert(memcmp(p.ptr, "/a%00b/c", 8) == 0);
    p = pagi_scope_query_string(s);
    ck_assert_uint_eq(p.len, 9);
    ck_assert(memcmp(p.ptr, "x=1&y=%20", 9) == 0);
    p = pagi_scope_root_path(s);
    ck_assert_uint_eq(p.len, 0);
    ck_assert_ptr_nonnull(p.ptr);
    size_t n = 0;
    const pagi_header *h = pagi_scope_headers(s, &n);
    ck_assert_uint_eq(n, 3);
    ck_assert_uint_eq(h[0].name.len, 4);
    ck_assert(memcmp(h[0].name.ptr, "host", 4) == 0);
    ck_assert(memcmp(h[0].value.ptr, "example.com", 11) == 0);
    ck_assert(memcmp(h[1].value.ptr, "a=1; b=2", 8) == 0);
    ck_assert_uint_eq(h[2].value.len, 0);
    int port = 0;
    ck_assert_str_eq(pagi_scope_client(s, &port), "192.0.2.7");
    ck_assert_int_eq(port, 54321);
    ck_assert_str_eq(pagi_scope_server(s, &port), "/run/pagid.sock");
    ck_assert_int_eq(port, -1);
    ck_assert_ptr_eq(pagi_scope_loop(s), &w.loop);
    int is_worker = 0;
    ck_assert_int_eq(pagi_scope_worker_num(s, &is_worker), 3);
    ck_assert_int_eq(is_worker, 1);
    end_scope(s);
}
END_TEST

START_TEST(request_without_facts)
{
    /* Lifespan scopes have no request. */
    pagi_scope *s = scope_new(&w, PAGI_SCOPE_LIFESPAN, &fake_ops, &fp, NULL);
    ck_assert_ptr_nonnull(s);
    ck_assert_str_eq(pagi_scope_type_name(s), "lifespan");
    ck_assert_str_eq(pagi_scope_method(s), "");
    ck_assert_str_eq(pagi_scope_http_version(s), "");
    ck_assert_str_eq(pagi_scope_scheme(s), "http");
    ck_assert_uint_eq(pagi_scope_path(s).len, 0);
    size_t n = 9;
    pagi_scope_headers(s, &n);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(pagi_scope_header(s, "host", NULL), 0);
    ck_assert_ptr_null(pagi_scope_client(s, NULL));
    end_scope(s);
}
END_TEST

START_TEST(header_lookup)
{
    static const pagi_header h[] = {
        {{"content-type", 12}, {"text/plain", 10}},
        {{"x-dup", 5}, {"first", 5}},
        {{"x-dup", 5}, {"second", 6}},
        {{"x-empty", 7}, {"", 0}},
    };
    scope_request r = {.method = "GET", .headers = h, .header_count = 4};
    pagi_scope *s = scope_new(&w, PAGI_SCOPE_HTTP, &fake_ops, &fp, &r);
    pagi_str v = {"untouched", 9};
    ck_assert_int_eq(pagi_scope_header(s, "content-type", &v), 1);
    ck_assert_uint_eq(v.len, 10);
    ck_assert(memcmp(v.ptr, "text/plain", 10) == 0);
    ck_assert_int_eq(pagi_scope_header(s, "x-dup", &v), 1);
    ck_assert_uint_eq(v.len, 5);
    ck_assert(memcmp(v.ptr, "first", 5) == 0);
    ck_assert_int_eq(pagi_scope_header(s, "x-empty", &v), 1);
    ck_assert_uint_eq(v.len, 0);
    v = (pagi_str){"untouched", 9};
    ck_assert_int_eq(pagi_scope_header(s, "content", &v), 0);
    ck_assert_int_eq(pagi_scope_header(s, "content-type-x", &v), 0);
    ck_assert_int_eq(pagi_scope_header(s, "x-missing", &v), 0);
    ck_assert_int_eq(pagi_scope_header(s, "", &v), 0);
    ck_assert_uint_eq(v.len, 9);
    ck_assert_int_eq(pagi_scope_header(s, "content-type", NULL), 1);
    end_scope(s);
}
END_TEST

/* ---- receive ---- */

static int in_api_call;
static int n_recv;
static pagi_event_type recv_type[16];
static char recv_body[16][16];

static void recv_cb(pagi_scope *s, const pagi_event *e, void *ud)
{
    ck_assert_int_eq(in_api_call, 0);
    ck_assert_ptr_eq(ud, &n_recv);
    recv_type[n_recv] = e->type;
    snprintf(recv_body[n_recv], sizeof recv_body[0], "%.*s", (int)e->body.len,
             e->body.ptr ? e->body.ptr : "");
    n_recv++;
    note(e->type == PAGI_EV_HTTP_DISCONNECT ? "recv:disconnect" : "recv");
}

START_TEST(receive_never_nested)
{
    pagi_scope *s = new_http();
    fp.chunks = 2;
    in_api_call = 1;
    ck_assert_int_eq(pagi_receive(s, recv_cb, &n_recv), 0);
    in_api_call = 0;
    ck_assert_int_eq(n_recv, 0); /* the event was available, yet not delivered inline */
    ck_assert_int_eq(fp.wanted, 1);
    ck_assert_int_eq(scope_receive_waiting(s), 1);
    ck_assert_uint_eq(drain(), 1);
    ck_assert_int_eq(n_recv, 1);
    ck_assert_int_eq(recv_type[0], PAGI_EV_HTTP_REQUEST);
    ck_assert_str_eq(recv_body[0], "chunk");
    ck_assert_int_eq(scope_receive_waiting(s), 0);
    ck_assert_int_eq(fp.chunks, 1); /* exactly one event per receive */
    /* Driven by the real loop this time. */
    ck_assert_int_eq(pagi_receive(s, recv_cb, &n_recv), 0);
    ck_assert_int_eq(n_recv, 1);
    ev_run(ev, EVRUN_NOWAIT);
    ck_assert_int_eq(n_recv, 2);
    ck_assert_int_eq(fp.chunks, 0);
    end_scope(s);
}
END_TEST

START_TEST(receive_waits_for_input)
{
    pagi_scope *s = new_http();
    ck_assert_int_eq(pagi_receive(s, recv_cb, &n_recv), 0);
    drain();
    ck_assert_int_eq(n_recv, 0);
    ck_assert_int_eq(scope_receive_waiting(s), 1);
    /* Input arrives: the driver pokes; delivery is queued, not inline. */
    fp.chunks = 1;
    in_api_call = 1;
    scope_poke_receive(s);
    scope_poke_receive(s); /* a second poke does not queue a second delivery */
    in_api_call = 0;
    ck_assert_int_eq(n_recv, 0);
    ck_assert_uint_eq(drain(), 1);
    ck_assert_int_eq(n_recv, 1);
    ck_assert_str_eq(recv_body[0], "chunk");
    /* A poke with nobody waiting does nothing. */
    fp.chunks = 1;
    scope_poke_receive(s);
    ck_assert_uint_eq(runq_pending(&w.loop.rq), 0);
    end_scope(s);
}
END_TEST

START_TEST(second_receive_while_pending_fails)
{
    pagi_scope *s = new_http();
    ck_assert_int_eq(pagi_receive(s, recv_cb, &n_recv), 0);
    ck_assert_str_eq(pagi_scope_error(s), "");
    ck_assert_int_eq(pagi_receive(s, recv_cb, &n_recv), -1);
    ck_assert_ptr_nonnull(strstr(pagi_scope_error(s), "pending"));
    /* A NULL callback says so (it reported the previous call's "pending"). */
    ck_assert_int_eq(pagi_receive(s, NULL, NULL), -1);
    ck_assert_str_eq(pagi_scope_error(s), "receive: no callback");
    ck_assert_int_eq(pagi_receive(NULL, recv_cb, NULL), -1);
    fp.chunks = 1;
    scope_poke_receive(s);
    drain();
    ck_assert_int_eq(n_recv, 1);
    /* Once delivered, the next receive is fine again. */
    ck_assert_int_eq(pagi_receive(s, recv_cb, &n_recv), 0);
    end_scope(s);
}
END_TEST

START_TEST(receive_after_finish_fails)
{
    pagi_scope *s = new_http();
    pagi_scope_finish(s, NULL); /* the connection side still holds the scope */
    ck_assert_int_eq(fp.finished_calls, 1);
    ck_assert_int_eq(scope_is_finished(s), 1);
    ck_assert_int_eq(pagi_receive(s, recv_cb, &n_recv), -1);
    ck_assert_ptr_nonnull(strstr(pagi_scope_error(s), "finished"));
    drain();
    ck_assert_int_eq(n_recv, 0);
    scope_detach(s);
}
END_TEST

/* A receive pending at finish is dropped, never delivered. */
START_TEST(pending_receive_dropped_at_finish)
{
    pagi_scope *s = new_http();
    fp.chunks = 1;
    ck_assert_int_eq(pagi_receive(s, recv_cb, &n_recv), 0);
    pagi_scope_finish(s, "boom");
    ck_assert_int_eq(fp.finished_calls, 1);
    ck_assert_str_eq(fp.finished_error, "boom");
    drain();
    ck_assert_int_eq(n_recv, 0);
    /* Finishing twice is a no-op. */
    pagi_scope_finish(s, NULL);
    ck_assert_int_eq(fp.finished_calls, 1);
    scope_detach(s);
    drain();
}
END_TEST

/* ---- disconnect / complete ---- */

static int n_disc;
static const char *disc_reason;

static void disc_cb(pagi_scope *s, const char *reason, void *ud)
{
    ck_assert_int_eq(in_api_call, 0);
    n_disc++;
    disc_reason = reason;
    ck_assert_int_eq(pagi_conn_is_connected(s), 0);
    ck_assert_ptr_eq(pagi_conn_disconnect_reason(s), reason);
    note((const char *)ud);
}

static int n_complete;

static void complete_cb(pagi_scope *s, void *ud)
{
    ck_assert_int_eq(in_api_call, 0);
    n_complete++;
    note((const char *)ud);
}

START_TEST(disconnect_order)
{
    pagi_scope *s = new_http();
    ck_assert_int_eq(pagi_conn_is_connected(s), 1);
    ck_assert_ptr_null(pagi_conn_disconnect_reason(s));
    ck_assert_int_eq(pagi_conn_on_disconnect(s, disc_cb, "d1"), 0);
    ck_assert_int_eq(pagi_conn_on_disconnect(s, disc_cb, "d2"), 0);
    ck_assert_int_eq(pagi_conn_on_disconnect(s, disc_cb, "d3"), 0);
    ck_assert_int_eq(pagi_conn_on_complete(s, complete_cb, "c"), 0);
    ck_assert_int_eq(pagi_receive(s, recv_cb, &n_recv), 0);
    drain();
    ck_assert_int_eq(n_recv, 0);

    in_api_call = 1;
    scope_disconnect(s, reason_client_closed);
    in_api_call = 0;
    /* State first, at once. */
    ck_assert_int_eq(pagi_conn_is_connected(s), 0);
    ck_assert_int_eq(scope_is_connected(s), 0);
    ck_assert_ptr_eq(pagi_conn_disconnect_reason(s), reason_client_closed);
    ck_assert_int_eq(n_disc, 0);
    ck_assert_int_eq(n_recv, 0);
    /* Idempotent: a second disconnect changes nothing. */
    scope_disconnect(s, reason_write_error);
    ck_assert_ptr_eq(pagi_conn_disconnect_reason(s), reason_client_closed);
    scope_mark_complete(s); /* and a completion after it is refused */
    ck_assert_int_eq(pagi_conn_response_complete(s), 0);

    drain();
    ck_assert_str_eq(trail, "d1,d2,d3,recv:disconnect");
    ck_assert_int_eq(n_disc, 3);
    ck_assert_ptr_eq(disc_reason, reason_client_closed);
    ck_assert_int_eq(recv_type[0], PAGI_EV_HTTP_DISCONNECT);
    ck_assert_int_eq(n_complete, 0);
    /* A receive after the disconnect gets the disconnect again. */
    ck_assert_int_eq(pagi_receive(s, recv_cb, &n_recv), 0);
    ck_assert_int_eq(fp.wanted, 1); /* not asked of a gone connection */
    drain();
    ck_assert_int_eq(n_recv, 2);
    ck_assert_int_eq(recv_type[1], PAGI_EV_HTTP_DISCONNECT);
    end_scope(s);
    ck_assert_int_eq(n_disc, 3);
    ck_assert_int_eq(n_complete, 0);
}
END_TEST

/*
 * The spec's order holds even when the input that satisfies a waiting
 * receive and the disconnect arrive in the same loop iteration (body bytes
 * and FIN in one read): on_disconnect callbacks first, then the receive
 * sees http.disconnect.
 */
START_TEST(disconnect_order_with_delivery_queued)
{
    pagi_scope *s = new_http();
    ck_assert_int_eq(pagi_conn_on_disconnect(s, disc_cb, "d1"), 0);
    ck_assert_int_eq(pagi_receive(s, recv_cb, &n_recv), 0);
    fp.chunks = 1;
    scope_poke_receive(s); /* delivery queued */
    scope_disconnect(s, reason_client_closed);
    drain();
    drain();
    ck_assert_int_eq(n_recv, 1);
    ck_assert_int_eq(n_disc, 1);
    /* Either the bytes went out before the disconnect was noticed, or the
       receive sees the disconnect after every on_disconnect callback. */
    ck_assert_msg(strcmp(trail, "d1,recv:disconnect") == 0 || strcmp(trail, "recv,d1") == 0,
                  "order was %s", trail);
    end_scope(s);
}
END_TEST

START_TEST(complete_runs_on_complete_only)
{
    pagi_scope *s = new_http();
    ck_assert_int_eq(pagi_conn_on_disconnect(s, disc_cb, "d"), 0);
    ck_assert_int_eq(pagi_conn_on_complete(s, complete_cb, "c1"), 0);
    ck_assert_int_eq(pagi_conn_on_complete(s, complete_cb, "c2"), 0);
    scope_mark_started(s);
    ck_assert_int_eq(pagi_conn_response_started(s), 1);
    ck_assert_int_eq(pagi_conn_response_complete(s), 0);
    in_api_call = 1;
    scope_mark_complete(s);
    scope_mark_complete(s); /* idempotent */
    in_api_call = 0;
    ck_assert_int_eq(pagi_conn_response_complete(s), 1);
    ck_assert_int_eq(scope_is_complete(s), 1);
    ck_assert_int_eq(n_complete, 0);
    /* The connection goes away later: no on_disconnect, no reason. */
    scope_disconnect(s, reason_client_closed);
    ck_assert_ptr_null(pagi_conn_disconnect_reason(s));
    drain();
    ck_assert_str_eq(trail, "c1,c2");
    ck_assert_int_eq(n_disc, 0);
    /* A late on_complete still runs, queued; a late on_disconnect never does. */
    ck_assert_int_eq(pagi_conn_on_complete(s, complete_cb, "c3"), 0);
    ck_assert_int_eq(pagi_conn_on_disconnect(s, disc_cb, "d-late"), 0);
    ck_assert_int_eq(n_complete, 2);
    drain();
    ck_assert_str_eq(trail, "c1,c2,c3");
    end_scope(s);
    ck_assert_int_eq(n_disc, 0);
    ck_assert_int_eq(n_complete, 3);
}
END_TEST

START_TEST(late_on_disconnect_runs_queued)
{
    pagi_scope *s = new_http();
    ck_assert_int_eq(pagi_conn_on_complete(s, complete_cb, "c"), 0);
    scope_disconnect(s, reason_write_timeout);
    drain();
    ck_assert_int_eq(n_disc, 0);
    in_api_call = 1;
    ck_assert_int_eq(pagi_conn_on_disconnect(s, disc_cb, "late"), 0);
    in_api_call = 0;
    ck_assert_int_eq(n_disc, 0);
    drain();
    ck_assert_int_eq(n_disc, 1);
    ck_assert_ptr_eq(disc_reason, reason_write_timeout);
    ck_assert_str_eq(trail, "late");
    /* A late on_complete after a disconnect never runs. */
    ck_assert_int_eq(pagi_conn_on_complete(s, complete_cb, "c-late"), 0);
    scope_mark_complete(s);
    end_scope(s);
    ck_assert_int_eq(n_complete, 0);
    ck_assert_int_eq(pagi_conn_on_disconnect(NULL, disc_cb, NULL), -1);
}
END_TEST

/* Registering from inside an on_disconnect callback: queued, runs next round. */
static void disc_registers_cb(pagi_scope *s, const char *reason, void *ud)
{
    note("outer");
    in_api_call = 1;
    ck_assert_int_eq(pagi_conn_on_disconnect(s, disc_cb, "inner"), 0);
    in_api_call = 0;
    note("outer-end");
}

START_TEST(on_disconnect_registered_inside_callback)
{
    pagi_scope *s = new_http();
    pagi_conn_on_disconnect(s, disc_registers_cb, NULL);
    scope_disconnect(s, reason_client_closed);
    drain();
    ck_assert_str_eq(trail, "outer,outer-end");
    drain();
    ck_assert_str_eq(trail, "outer,outer-end,inner");
    end_scope(s);
}
END_TEST

/* ---- lifetimes ---- */

START_TEST(release_after_detach_then_finish)
{
    pagi_scope *s = new_http();
    pagi_scope_set_userdata(s, released, release_cb);
    ck_assert_ptr_eq(pagi_scope_userdata(s), released);
    scope_detach(s);
    drain();
    ck_assert_int_eq(n_release, 0);
    /* The app side still holds a valid handle. */
    ck_assert_str_eq(pagi_scope_method(s), "GET");
    ck_assert_uint_eq(pagi_transport_buffered_amount(s), 0);
    pagi_scope_finish(s, NULL);
    drain();
    ck_assert_int_eq(n_release, 1);
    drain();
    ck_assert_int_eq(n_release, 1);
}
END_TEST

START_TEST(release_after_finish_then_detach)
{
    pagi_scope *s = new_http();
    pagi_scope_set_userdata(s, released, release_cb);
    pagi_scope_finish(s, NULL);
    drain();
    ck_assert_int_eq(n_release, 0);
    scope_detach(s);
    drain();
    ck_assert_int_eq(n_release, 1);
    drain();
    ck_assert_int_eq(n_release, 1);
}
END_TEST

/* The app finishes inside a callback after the connection let go: the
   handle stays valid until that callback returns; release comes after. */
static void finish_in_cb(pagi_scope *s, const pagi_event *e, void *ud)
{
    note("recv");
    pagi_scope_finish(s, NULL);
    ck_assert_str_eq(pagi_scope_method(s), "GET");
    ck_assert_ptr_eq(pagi_scope_userdata(s), released);
    note("recv-end");
}

START_TEST(release_after_finish_inside_callback)
{
    pagi_scope *s = new_http();
    pagi_scope_set_userdata(s, released, release_cb);
    ck_assert_int_eq(pagi_receive(s, finish_in_cb, NULL), 0);
    scope_disconnect(s, reason_client_closed);
    scope_detach(s);
    ck_assert_int_eq(n_release, 0);
    drain();
    drain();
    ck_assert_str_eq(trail, "recv,recv-end,released");
    ck_assert_int_eq(n_release, 1);
}
END_TEST

static int n_sent;
static void send_cb(pagi_scope *s, const char *err, void *ud)
{
    ck_assert_int_eq(in_api_call, 0);
    ck_assert_ptr_null(err);
    n_sent++;
    note("sent");
}

/* Queued callbacks hold the scope: release comes after them. */
START_TEST(release_after_queued_callbacks)
{
    for (int order = 0; order < 2; order++) {
        trail[0] = '\0';
        n_release = 0;
        n_disc = 0;
        n_sent = 0;
        pagi_scope *s = new_http();
        pagi_scope_set_userdata(s, "release", release_cb);
        pagi_conn_on_disconnect(s, disc_cb, "d");
        pagi_event e = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_START);
        ck_assert_int_eq(pagi_send(s, &e, send_cb, NULL), 0);
        scope_disconnect(s, reason_client_closed);
        if (order == 0) {
            scope_detach(s);
            pagi_scope_finish(s, NULL);
        } else {
            pagi_scope_finish(s, NULL);
            scope_detach(s);
        }
        ck_assert_int_eq(n_release, 0);
        drain();
        drain(); /* release is itself queued: it never runs inside the call that let go */
        ck_assert_str_eq(trail, "sent,d,release");
        ck_assert_int_eq(n_release, 1);
        drain();
        ck_assert_int_eq(n_release, 1);
    }
}
END_TEST

/* ---- send ---- */

START_TEST(send_completes_from_queue)
{
    pagi_scope *s = new_http();
    pagi_event e = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_START);
    in_api_call = 1;
    ck_assert_int_eq(pagi_send(s, &e, send_cb, NULL), 0);
    in_api_call = 0;
    ck_assert_int_eq(fp.sends, 1);
    ck_assert_int_eq(n_sent, 0);
    drain();
    ck_assert_int_eq(n_sent, 1);
    /* cb may be NULL. */
    ck_assert_int_eq(pagi_send(s, &e, NULL, NULL), 0);
    ck_assert_uint_eq(drain(), 0);
    /* The driver's own rejection reaches the app. */
    e.type = PAGI_EV_LIFESPAN_STARTUP;
    ck_assert_int_eq(pagi_send(s, &e, send_cb, NULL), -1);
    ck_assert_str_eq(pagi_scope_error(s), "send: not sendable");
    drain();
    ck_assert_int_eq(n_sent, 1);
    end_scope(s);
}
END_TEST

START_TEST(send_bad_type_fails)
{
    pagi_scope *s = new_http();
    static const int bad[] = {PAGI_EV_NONE, PAGI_EV__COUNT, PAGI_EV__COUNT + 1, -1, 1000};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pagi_event e = PAGI_EVENT_INIT(PAGI_EV_NONE);
        e.type = (pagi_event_type)bad[i];
        ck_assert_int_eq(pagi_send(s, &e, send_cb, NULL), -1);
        ck_assert_ptr_nonnull(strstr(pagi_scope_error(s), "unknown event type"));
    }
    ck_assert_int_eq(pagi_send(s, NULL, send_cb, NULL), -1);
    ck_assert_int_eq(pagi_send(NULL, NULL, send_cb, NULL), -1);
    ck_assert_int_eq(fp.sends, 0); /* never reached the driver */
    drain();
    ck_assert_int_eq(n_sent, 0);
    end_scope(s);
}
END_TEST

START_TEST(send_with_reserved_set_fails)
{
    pagi_scope *s = new_http();
    for (size_t i = 0; i < 8; i++) {
        pagi_event e = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_BODY);
        e.reserved[i] = 1;
        ck_assert_int_eq(pagi_send(s, &e, send_cb, NULL), -1);
        ck_assert_str_eq(pagi_scope_error(s),
                         "event: reserved fields must be zero (see VERSIONING in pagi(3))");
        pagi_buf *b = pagi_buf_wrap("x", 1, NULL, NULL);
        ck_assert_ptr_nonnull(b);
        ck_assert_int_eq(pagi_send_buf(s, &e, b, send_cb, NULL), -1);
        ck_assert_str_eq(pagi_scope_error(s),
                         "event: reserved fields must be zero (see VERSIONING in pagi(3))");
        pagi_buf_unref(b);
    }
    ck_assert_int_eq(fp.sends, 0); /* never reached the driver */
    drain();
    ck_assert_int_eq(n_sent, 0);
    end_scope(s);
}
END_TEST

START_TEST(send_after_finish_fails)
{
    pagi_scope *s = new_http();
    pagi_scope_finish(s, NULL);
    pagi_event e = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_START);
    ck_assert_int_eq(pagi_send(s, &e, send_cb, NULL), -1);
    ck_assert_ptr_nonnull(strstr(pagi_scope_error(s), "finished"));
    ck_assert_int_eq(fp.sends, 0);
    drain();
    ck_assert_int_eq(n_sent, 0);
    scope_detach(s);
}
END_TEST

/* ---- zero-initialised events (ABI 2: no sentinel fields) ---- */

static const pagi_event *last_sent;

static int keep_send(pagi_scope *s, const pagi_event *e, pagi_send_cb cb, void *ud)
{
    last_sent = e;
    scope_complete_send(s, cb, ud, NULL);
    return 0;
}

START_TEST(event_init_is_zero_and_type)
{
    pagi_event zero;
    memset(&zero, 0, sizeof zero);
    zero.type = PAGI_EV_SSE_SEND;
    pagi_event a = pagi_event_init(PAGI_EV_SSE_SEND), b = PAGI_EVENT_INIT(PAGI_EV_SSE_SEND);
    pagi_event c = {0}, d = {.type = PAGI_EV_SSE_SEND};
    c.type = PAGI_EV_SSE_SEND;
    ck_assert_mem_eq(&a, &zero, sizeof zero);
    const pagi_event *all[] = {&b, &c, &d};
    for (size_t i = 0; i < 3; i++) {
        const pagi_event *e = all[i];
        ck_assert_int_eq(e->type, PAGI_EV_SSE_SEND);
        ck_assert_int_eq(e->use_fd, 0);
        ck_assert_int_eq(e->fd, 0);
        ck_assert_int_eq(e->length, 0);
        ck_assert_int_eq(e->has_retry, 0);
        ck_assert_ptr_null(e->file);
        for (size_t k = 0; k < sizeof e->reserved / sizeof e->reserved[0]; k++)
            ck_assert_uint_eq(e->reserved[k], 0);
    }
}
END_TEST

START_TEST(zero_body_event_reaches_the_driver_as_is)
{
    /* pagi_send hands the app's event to the protocol driver unchanged: a
     * {0} body event carries its body and no fd (sse.c and http1_exchange.c
     * pick an fd body only on use_fd, a retry: line only on has_retry). */
    static const scope_ops keep_ops = {
        .send = keep_send,
        .next_event = fake_next_event,
        .receive_wanted = fake_receive_wanted,
        .finished = fake_finished,
        .buffered = fake_buffered,
        .above_high = fake_above_high,
    };
    scope_request r = {.method = "GET", .http_version = "1.1", .path = {"/", 1},
                       .raw_path = {"/", 1}, .query = {"", 0}};
    pagi_scope *s = scope_new(&w, PAGI_SCOPE_HTTP, &keep_ops, &fp, &r);
    ck_assert_ptr_nonnull(s);
    pagi_event e = {0};
    e.type = PAGI_EV_HTTP_RESPONSE_BODY;
    e.body = (pagi_str){"only this", 9};
    ck_assert_int_eq(pagi_send(s, &e, NULL, NULL), 0);
    ck_assert_ptr_nonnull(last_sent);
    ck_assert_int_eq(last_sent->use_fd, 0);
    ck_assert_ptr_null(last_sent->file);
    ck_assert_uint_eq(last_sent->body.len, 9);
    ck_assert_int_eq(last_sent->has_retry, 0);
    /* stdin stays reachable: use_fd = 1 with fd 0. */
    pagi_event in = {.type = PAGI_EV_HTTP_RESPONSE_BODY, .use_fd = 1, .fd = 0};
    ck_assert_int_eq(pagi_send(s, &in, NULL, NULL), 0);
    ck_assert_int_eq(last_sent->use_fd, 1);
    ck_assert_int_eq(last_sent->fd, 0);
    drain();
    end_scope(s);
}
END_TEST

/* ---- lifespan state ---- */

static int v1, v2, v3;

START_TEST(state_shallow_copy)
{
    pagi_scope *life = scope_new(&w, PAGI_SCOPE_LIFESPAN, &fake_ops, &fp, NULL);
    pagi_scope *early = new_http();
    ck_assert_int_eq(pagi_state_set(life, "db", &v1), 0);
    ck_assert_ptr_eq(pagi_state_get(life, "db"), &v1);
    ck_assert_ptr_null(pagi_state_get(early, "db")); /* created before the set */
    pagi_scope *r1 = new_http();
    ck_assert_ptr_eq(pagi_state_get(r1, "db"), &v1);

    /* A request scope's own writes stay its own. */
    ck_assert_int_eq(pagi_state_set(r1, "mine", &v2), 0);
    ck_assert_int_eq(pagi_state_set(r1, "db", &v3), 0);
    ck_assert_ptr_eq(pagi_state_get(r1, "mine"), &v2);
    ck_assert_ptr_eq(pagi_state_get(r1, "db"), &v3);
    pagi_scope *r2 = new_http();
    ck_assert_ptr_null(pagi_state_get(r2, "mine"));
    ck_assert_ptr_eq(pagi_state_get(r2, "db"), &v1);
    ck_assert_ptr_null(pagi_state_get(life, "mine"));
    ck_assert_ptr_eq(pagi_state_get(life, "db"), &v1);

    /* A later lifespan write: existing scopes keep their snapshot. */
    ck_assert_int_eq(pagi_state_set(life, "db", &v2), 0);
    ck_assert_ptr_eq(pagi_state_get(r2, "db"), &v1);
    pagi_scope *r3 = new_http();
    ck_assert_ptr_eq(pagi_state_get(r3, "db"), &v2);
    ck_assert_int_eq(pagi_state_set(NULL, "k", &v1), -1);
    ck_assert_int_eq(pagi_state_set(r3, NULL, &v1), -1);

    end_scope(r3);
    end_scope(r2);
    end_scope(r1);
    end_scope(early);
    end_scope(life);
}
END_TEST

/* ---- pagi.transport ---- */

START_TEST(transport)
{
    pagi_scope *s = new_http();
    fp.buffered = 1234;
    ck_assert_uint_eq(pagi_transport_buffered_amount(s), 1234);
    ck_assert_uint_eq(pagi_transport_high_water_mark(s), cfg.high_watermark);
    ck_assert_uint_eq(pagi_transport_low_water_mark(s), cfg.low_watermark);
    ck_assert_int_eq(pagi_transport_on_high_water(s, complete_cb, "high"), 0);
    ck_assert_int_eq(pagi_transport_on_drain(s, complete_cb, "drain"), 0);
    drain();
    ck_assert_str_eq(trail, "");
    in_api_call = 1;
    scope_notify_high_water(s);
    in_api_call = 0;
    ck_assert_str_eq(trail, "");
    drain();
    ck_assert_str_eq(trail, "high");
    scope_notify_drain(s);
    drain();
    ck_assert_str_eq(trail, "high,drain");
    /* Registering while already high: runs once, queued. */
    fp.above_high = 1;
    in_api_call = 1;
    ck_assert_int_eq(pagi_transport_on_high_water(s, complete_cb, "high2"), 0);
    in_api_call = 0;
    ck_assert_str_eq(trail, "high,drain");
    drain();
    ck_assert_str_eq(trail, "high,drain,high2");
    scope_detach(s);
    ck_assert_uint_eq(pagi_transport_buffered_amount(s), 0); /* no connection */
    pagi_scope_finish(s, NULL);
    drain();
}
END_TEST

/* ---- event names ---- */

START_TEST(event_type_names)
{
    static const char *const want[PAGI_EV__COUNT] = {
        NULL,
        "http.request",
        "http.disconnect",
        "http.response.start",
        "http.response.body",
        "http.response.trailers",
        "websocket.connect",
        "websocket.accept",
        "websocket.receive",
        "websocket.send",
        "websocket.keepalive",
        "websocket.close",
        "websocket.disconnect",
        "websocket.http.response.start",
        "websocket.http.response.body",
        "sse.request",
        "sse.start",
        "sse.send",
        "sse.comment",
        "sse.keepalive",
        "sse.close",
        "sse.disconnect",
        "sse.http.response.start",
        "sse.http.response.body",
        "lifespan.startup",
        "lifespan.startup.complete",
        "lifespan.startup.failed",
        "lifespan.shutdown",
        "lifespan.shutdown.complete",
        "lifespan.shutdown.failed",
    };
    ck_assert_int_eq(PAGI_EV__COUNT, 30);
    ck_assert_ptr_null(pagi_event_type_name(PAGI_EV_NONE));
    for (int t = 1; t < PAGI_EV__COUNT; t++) {
        const char *n = pagi_event_type_name((pagi_event_type)t);
        ck_assert_msg(n != NULL, "type %d has no name", t);
        ck_assert_str_eq(n, want[t]);
    }
    ck_assert_ptr_null(pagi_event_type_name(PAGI_EV__COUNT));
    ck_assert_ptr_null(pagi_event_type_name((pagi_event_type)-1));
    ck_assert_ptr_null(pagi_event_type_name((pagi_event_type)12345));
}
END_TEST

static void reset_counters(void)
{
    setup();
    memset(&fp, 0, sizeof fp);
    trail[0] = '\0';
    n_recv = n_disc = n_complete = n_release = n_sent = 0;
    in_api_call = 0;
    disc_reason = NULL;
}

static Suite *suite(void)
{
    Suite *s = suite_create("scope");
    TCase *t = tcase_create("request");
    tcase_add_checked_fixture(t, reset_counters, teardown);
    tcase_add_test(t, request_is_copied);
    tcase_add_test(t, request_without_facts);
    tcase_add_test(t, header_lookup);
    tcase_add_test(t, event_type_names);
    suite_add_tcase(s, t);

    t = tcase_create("receive");
    tcase_add_checked_fixture(t, reset_counters, teardown);
    tcase_add_test(t, receive_never_nested);
    tcase_add_test(t, receive_waits_for_input);
    tcase_add_test(t, second_receive_while_pending_fails);
    tcase_add_test(t, receive_after_finish_fails);
    tcase_add_test(t, pending_receive_dropped_at_finish);
    suite_add_tcase(s, t);

    t = tcase_create("ending");
    tcase_add_checked_fixture(t, reset_counters, teardown);
    tcase_add_test(t, disconnect_order);
    tcase_add_test(t, disconnect_order_with_delivery_queued);
    tcase_add_test(t, complete_runs_on_complete_only);
    tcase_add_test(t, late_on_disconnect_runs_queued);
    tcase_add_test(t, on_disconnect_registered_inside_callback);
    suite_add_tcase(s, t);

    t = tcase_create("lifetime");
    tcase_add_checked_fixture(t, reset_counters, teardown);
    tcase_add_test(t, release_after_detach_then_finish);
    tcase_add_test(t, release_after_finish_then_detach);
    tcase_add_test(t, release_after_queued_callbacks);
    tcase_add_test(t, release_after_finish_inside_callback);
    suite_add_tcase(s, t);

    t = tcase_create("send");
    tcase_add_checked_fixture(t, reset_counters, teardown);
    tcase_add_test(t, send_completes_from_queue);
    tcase_add_test(t, send_bad_type_fails);
    tcase_add_test(t, send_with_reserved_set_fails);
    tcase_add_test(t, send_after_finish_fails);
    tcase_add_test(t, event_init_is_zero_and_type);
    tcase_add_test(t, zero_body_event_reaches_the_driver_as_is);
    suite_add_tcase(s, t);

    t = tcase_create("state");
    tcase_add_checked_fixture(t, reset_counters, teardown);
    tcase_add_test(t, state_shallow_copy);
    tcase_add_test(t, transport);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
