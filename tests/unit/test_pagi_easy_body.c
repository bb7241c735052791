/*
 * test_pagi_easy_body.c - Check suite for the one-call parts of pagi_easy.h
 * (src/worker/pagi_easy.c) over a fake http driver: callbacks never nest in
 * pagi_read_body, misuse is refused without finishing, no finish before the
 * layer's last send callback, and nothing leaks when the server ends a scope.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pagi/pagi_easy.h>

#include "worker/core/reason.h"
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
    loop_drain_all(&w.loop);
    loop_destroy(&w.loop);
    ev_loop_destroy(ev);
    state_table_unref(w.state);
    config_free(&cfg);
}

static void drain(void)
{
    while (runq_drain(&w.loop.rq) > 0)
        ;
}

/* ---- a fake driver: request body chunks in, sends recorded ---- */

#define MAX_HELD 8

typedef struct fake {
    pagi_scope *s;
    pagi_scope_type type;
    const char *chunks[4]; /* request body chunks, delivered in order */
    int nchunks, next_chunk, lifespan_step;
    int stall_at; /* > 0: chunk number stall_at never arrives */
    int hold;     /* 1: send completions wait for release_held */
    pagi_send_cb held_cb[MAX_HELD];
    void *held_ud[MAX_HELD];
    int held;
    int status, sends, finished;
    char ctype[64], resp_body[64], extra[64]; /* the response's content-type, body, 3rd header */
    char log[128]; /* the order of what happened: s(tatus) c(allback) f(inish) */
} fake;

static void note(fake *f, char c)
{
    size_t n = strlen(f->log);
    if (n + 1 < sizeof f->log)
        f->log[n] = c;
}

static int fake_send(pagi_scope *s, const pagi_event *e, pagi_send_cb cb, void *ud)
{
    fake *f = scope_proto(s);
    f->sends++;
    if (e->type == PAGI_EV_HTTP_RESPONSE_START) {
        if (f->status != 0)
            return scope_fail(s, "send: the response already started");
        f->status = e->status;
        note(f, 's');
        for (size_t i = 0; i < e->header_count; i++) {
            const pagi_header *h = &e->headers[i];
            if (h->name.len == 12 && memcmp(h->name.ptr, "content-type", 12) == 0)
                snprintf(f->ctype, sizeof f->ctype, "%.*s", (int)h->value.len, h->value.ptr);
            else if (i == 2)
                snprintf(f->extra, sizeof f->extra, "%.*s: %.*s", (int)h->name.len, h->name.ptr,
                         (int)h->value.len, h->value.ptr);
        }
    }
    if (e->type == PAGI_EV_HTTP_RESPONSE_BODY)
        snprintf(f->resp_body, sizeof f->resp_body, "%.*s", (int)e->body.len, e->body.ptr);
    if (f->hold && f->held < MAX_HELD) {
        f->held_cb[f->held] = cb;
        f->held_ud[f->held++] = ud;
        return 0;
    }
    scope_complete_send(s, cb, ud, NULL);
    return 0;
}

static void release_held(fake *f)
{
    for (int i = 0; i < f->held; i++)
        scope_complete_send(f->s, f->held_cb[i], f->held_ud[i], NULL);
    f->held = 0;
    drain();
}

static int fake_next_event(pagi_scope *s, pagi_event *e, int take)
{
    fake *f = scope_proto(s);
    if (f->type == PAGI_SCOPE_LIFESPAN) {
        if (f->lifespan_step != 0 && f->lifespan_step != 2)
            return 0;
        if (take)
            e->type =
                f->lifespan_step++ == 0 ? PAGI_EV_LIFESPAN_STARTUP : PAGI_EV_LIFESPAN_SHUTDOWN;
        return 1;
    }
    if (!scope_is_connected(s)) {
        if (take)
            e->type = PAGI_EV_HTTP_DISCONNECT;
        return 1;
    }
    if (f->next_chunk >= f->nchunks || (f->stall_at > 0 && f->next_chunk >= f->stall_at))
        return 0;
    if (take) {
        const char *c = f->chunks[f->next_chunk++];
        e->type = PAGI_EV_HTTP_REQUEST;
        e->body = (pagi_str){c, strlen(c)};
        e->more = f->next_chunk < f->nchunks;
    }
    return 1;
}

static void fake_receive_wanted(pagi_scope *s)
{
    (void)s;
}

static void fake_finished(pagi_scope *s, const char *error)
{
    (void)error;
    fake *f = scope_proto(s);
    if (f != NULL) {
        f->finished++;
        note(f, 'f');
    }
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

static void open_scope(fake *f, pagi_scope_type type, const char *content_length)
{
    memset(f, 0, sizeof *f);
    f->type = type;
    pagi_header h[1] = {
        {{"content-length", 14}, {content_length, content_length ? strlen(content_length) : 0}}};
    scope_request r = {.method = "PUT",
                       .http_version = "1.1",
                       .path = {"/kv/a", 5},
                       .raw_path = {"/kv/a", 5},
                       .query = {"", 0},
                       .headers = h,
                       .header_count = content_length ? 1 : 0};
    f->s = scope_new(&w, type, &fake_ops, f, type == PAGI_SCOPE_LIFESPAN ? NULL : &r);
    ck_assert_ptr_nonnull(f->s);
}

/* The connection side lets go: the scope is released once the app side has finished. */
static void gone(fake *f)
{
    scope_detach(f->s);
    drain();
}

/* ---- an app's body callback ---- */

typedef struct seen {
    fake *f;
    int calls;
    size_t len;
    char err[64], body[64];
} seen;

static void on_body(pagi_scope *s, const char *body, size_t len, const char *err, void *ud)
{
    (void)s;
    seen *b = ud;
    b->calls++;
    b->len = len;
    snprintf(b->err, sizeof b->err, "%s", err ? err : "");
    snprintf(b->body, sizeof b->body, "%s", body ? body : "");
    note(b->f, 'c');
}

START_TEST(announced_length_over_limit_calls_back_later)
{
    fake f;
    open_scope(&f, PAGI_SCOPE_HTTP, "100");
    seen b = {.f = &f};
    ck_assert_int_eq(pagi_read_body(f.s, 10, on_body, &b), 0);
    ck_assert_int_eq(b.calls, 0); /* never from inside the call */
    ck_assert_int_eq(f.finished, 0);
    drain();
    ck_assert_int_eq(b.calls, 1);
    ck_assert_str_eq(b.err, "request body too large");
    ck_assert_int_eq(f.status, 413);
    ck_assert_str_eq(f.log, "scf"); /* 413 sent, then cb, then the finish */
    gone(&f);
}
END_TEST

START_TEST(chunked_body_over_limit_calls_back_later)
{
    fake f;
    open_scope(&f, PAGI_SCOPE_HTTP, NULL);
    f.chunks[0] = "12345678";
    f.chunks[1] = "12345678";
    f.nchunks = 2;
    seen b = {.f = &f};
    ck_assert_int_eq(pagi_read_body(f.s, 10, on_body, &b), 0);
    ck_assert_int_eq(b.calls, 0);
    drain();
    ck_assert_int_eq(b.calls, 1);
    ck_assert_str_eq(b.err, "request body too large");
    ck_assert_int_eq(f.status, 413);
    ck_assert_str_eq(f.log, "scf");
    gone(&f);
}
END_TEST

/* pagi_read_body_opts: the app's answer to a body over the limit, copied
 * during the call (the caller's buffers are gone before it is sent). */
START_TEST(custom_answer_over_limit)
{
    fake f;
    open_scope(&f, PAGI_SCOPE_HTTP, "100");
    seen b = {.f = &f};
    char type[] = "application/json", json[] = "{\"error\":\"too big\"}", v[] = "*";
    pagi_header h[] = {{PAGI_STR_INIT("access-control-allow-origin"), {v, 1}}};
    pagi_body_opts o = {.limit = 10,
                        .status = 422,
                        .content_type = type,
                        .body = {json, strlen(json)},
                        .headers = h,
                        .header_count = 1};
    ck_assert_int_eq(pagi_read_body_opts(f.s, &o, on_body, &b), 0);
    memset(type, 'x', sizeof type - 1);
    memset(json, 'x', sizeof json - 1);
    v[0] = 'x';
    drain();
    ck_assert_int_eq(b.calls, 1);
    ck_assert_str_eq(b.err, "request body too large");
    ck_assert_int_eq(f.status, 422);
    ck_assert_str_eq(f.ctype, "application/json");
    ck_assert_str_eq(f.resp_body, "{\"error\":\"too big\"}");
    ck_assert_str_eq(f.extra, "access-control-allow-origin: *");
    ck_assert_str_eq(f.log, "scf");
    gone(&f);
}
END_TEST

START_TEST(custom_answer_defaults_and_bad_options)
{
    fake f;
    open_scope(&f, PAGI_SCOPE_HTTP, "100");
    seen b = {.f = &f};
    pagi_body_opts bad = {.limit = 10, .header_count = 1};
    ck_assert_int_eq(pagi_read_body_opts(f.s, &bad, on_body, &b), -1);
    ck_assert_ptr_nonnull(strstr(pagi_scope_error(f.s), "pagi_read_body_opts: bad options"));
    ck_assert_int_eq(pagi_read_body_opts(f.s, NULL, on_body, &b), -1);
    pagi_body_opts o = {.limit = 10};
    ck_assert_int_eq(pagi_read_body_opts(f.s, &o, on_body, &b), 0);
    drain();
    ck_assert_int_eq(f.status, 413);
    ck_assert_str_eq(f.resp_body, "request body too large\n");
    gone(&f);
}
END_TEST

/* Misuse is refused without finishing: the app still answers properly. */
START_TEST(respond_while_reading_and_null_text_are_refused)
{
    fake f;
    open_scope(&f, PAGI_SCOPE_HTTP, NULL);
    f.chunks[0] = "abc";
    f.nchunks = 1;
    seen b = {.f = &f};
    ck_assert_int_eq(pagi_read_body(f.s, 10, on_body, &b), 0);
    ck_assert_int_eq(pagi_respond_text(f.s, 200, "early"), -1);
    ck_assert_str_eq(pagi_scope_error(f.s), "pagi_respond_text: the body reader is still active "
                                            "(answer from its callback)");
    const char *volatile nul = NULL;
    ck_assert_int_eq(pagi_respond_text(f.s, 200, nul), -1);
    ck_assert_str_eq(pagi_scope_error(f.s), "pagi_respond_text: NULL text");
    ck_assert_int_eq(pagi_respond(f.s, 200, NULL, NULL, 3), -1);
    ck_assert_int_eq(f.sends, 0);
    ck_assert_int_eq(f.finished, 0);
    drain();
    ck_assert_int_eq(b.calls, 1);
    ck_assert_int_eq(pagi_respond_text(f.s, 200, "ok"), 0);
    drain();
    ck_assert_int_eq(f.finished, 1);
    gone(&f);
}
END_TEST

START_TEST(read_body_refuses_a_websocket_scope)
{
    fake f;
    open_scope(&f, PAGI_SCOPE_WEBSOCKET, NULL);
    seen b = {.f = &f};
    ck_assert_int_eq(pagi_read_body(f.s, 10, on_body, &b), -1);
    ck_assert_str_eq(pagi_scope_error(f.s), "pagi_read_body: not an http or sse scope");
    drain();
    ck_assert_int_eq(b.calls, 0);
    ck_assert_int_eq(f.finished, 0); /* still the app's */
    pagi_scope_finish(f.s, NULL);
    gone(&f);
}
END_TEST

START_TEST(second_reader_is_refused_and_the_first_goes_on)
{
    fake f;
    open_scope(&f, PAGI_SCOPE_HTTP, NULL);
    f.chunks[0] = "hello";
    f.nchunks = 1;
    seen b1 = {.f = &f}, b2 = {.f = &f};
    ck_assert_int_eq(pagi_read_body(f.s, 10, on_body, &b1), 0);
    ck_assert_int_eq(pagi_read_body(f.s, 10, on_body, &b2), -1);
    ck_assert_str_eq(pagi_scope_error(f.s), "pagi_read_body: a body reader is already active");
    ck_assert_int_eq(f.finished, 0);
    drain();
    ck_assert_int_eq(b1.calls, 1);
    ck_assert_str_eq(b1.body, "hello");
    ck_assert_int_eq(b2.calls, 0);
    ck_assert_int_eq(pagi_respond_text(f.s, 200, "ok"), 0);
    drain();
    ck_assert_int_eq(f.finished, 1);
    gone(&f);
}
END_TEST

START_TEST(second_respond_is_refused_and_finishes_once_after_the_sends)
{
    fake f;
    open_scope(&f, PAGI_SCOPE_HTTP, NULL);
    f.hold = 1;
    ck_assert_int_eq(pagi_respond_text(f.s, 200, "one"), 0);
    ck_assert_int_eq(pagi_respond_text(f.s, 200, "two"), -1);
    ck_assert_str_eq(pagi_scope_error(f.s),
                     "pagi_respond_text: a response was already sent on this scope");
    drain();
    ck_assert_int_eq(f.finished, 0); /* the first body's callback has not run */
    ck_assert_int_eq(f.sends, 2);
    release_held(&f);
    ck_assert_int_eq(f.finished, 1);
    gone(&f);
}
END_TEST

START_TEST(body_reader_413_finishes_after_its_send_callback)
{
    fake f;
    open_scope(&f, PAGI_SCOPE_HTTP, "100");
    f.hold = 1;
    seen b = {.f = &f};
    ck_assert_int_eq(pagi_read_body(f.s, 10, on_body, &b), 0);
    drain();
    ck_assert_int_eq(b.calls, 1);
    ck_assert_int_eq(f.finished, 0); /* the 413's body is still in flight */
    release_held(&f);
    ck_assert_int_eq(f.finished, 1);
    ck_assert_str_eq(f.log, "scf");
    gone(&f);
}
END_TEST

/* Server-side end with the reader's receive pending: nothing leaks (ASan/valgrind). */
START_TEST(server_finish_with_a_reader_pending_frees_it)
{
    fake f;
    open_scope(&f, PAGI_SCOPE_HTTP, NULL);
    f.chunks[0] = "part";
    f.chunks[1] = "rest";
    f.nchunks = 2;
    f.stall_at = 1; /* the second chunk never arrives */
    seen b = {.f = &f};
    ck_assert_int_eq(pagi_read_body(f.s, 100, on_body, &b), 0);
    drain();
    ck_assert_int_eq(b.calls, 0);
    scope_abandon_all(&w); /* as a worker exiting past its grace */
    ck_assert_int_eq(f.finished, 1);
    gone(&f);
    ck_assert_int_eq(b.calls, 0);
}
END_TEST

/* ---- lifespan ---- */

static int created, destroyed;

static void *make_obj(pagi_scope *s, void *ud, const char **err)
{
    (void)s;
    (void)ud;
    (void)err;
    created++;
    return malloc(32);
}

static void free_obj(void *obj, void *ud)
{
    (void)ud;
    destroyed++;
    free(obj);
}

START_TEST(lifespan_destroys_when_the_server_finishes_it)
{
    created = destroyed = 0;
    fake f;
    open_scope(&f, PAGI_SCOPE_LIFESPAN, NULL);
    ck_assert_int_eq(pagi_lifespan_run(f.s, "obj", make_obj, free_obj, NULL), 0);
    drain(); /* startup delivered, complete sent, the next receive pending */
    ck_assert_int_eq(created, 1);
    ck_assert_int_eq(destroyed, 0);
    /* The worker exits without a lifespan.shutdown (a second stop signal). */
    pagi_scope_finish(f.s, NULL);
    gone(&f);
    ck_assert_int_eq(destroyed, 1);
}
END_TEST

START_TEST(lifespan_destroys_once_on_shutdown)
{
    created = destroyed = 0;
    fake f;
    open_scope(&f, PAGI_SCOPE_LIFESPAN, NULL);
    ck_assert_int_eq(pagi_lifespan_run(f.s, "obj", make_obj, free_obj, NULL), 0);
    drain();
    f.lifespan_step = 2;
    scope_poke_receive(f.s);
    drain();
    ck_assert_int_eq(destroyed, 1);
    ck_assert_int_eq(f.finished, 1);
    gone(&f);
    ck_assert_int_eq(destroyed, 1);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("pagi_easy_body");
    TCase *tc = tcase_create("body");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, announced_length_over_limit_calls_back_later);
    tcase_add_test(tc, chunked_body_over_limit_calls_back_later);
    tcase_add_test(tc, read_body_refuses_a_websocket_scope);
    tcase_add_test(tc, second_reader_is_refused_and_the_first_goes_on);
    tcase_add_test(tc, second_respond_is_refused_and_finishes_once_after_the_sends);
    tcase_add_test(tc, body_reader_413_finishes_after_its_send_callback);
    tcase_add_test(tc, custom_answer_over_limit);
    tcase_add_test(tc, custom_answer_defaults_and_bad_options);
    tcase_add_test(tc, respond_while_reading_and_null_text_are_refused);
    tcase_add_test(tc, server_finish_with_a_reader_pending_frees_it);
    tcase_add_test(tc, lifespan_destroys_when_the_server_finishes_it);
    tcase_add_test(tc, lifespan_destroys_once_on_shutdown);
    suite_add_tcase(s, tc);
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
