/*
 * test_pagi_easy_router.c - Check suite for the path router of pagi_easy.h
 * (src/worker/scope/pagi_easy_router.c) over a fake driver that records the
 * answer: matching and parameters, precedence, 404 and 405 + allow, mount-
 * relative paths, the trailing slash rule, percent-encoded bytes, very long
 * paths, sse and websocket routes, refusals, and no allocation per match.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pagi/pagi_easy.h>

#include "worker/core/state_table.h"
#include "worker/scope/scope.h"
#include "worker/worker_ctx.h"

/* ---- allocations counted while `counting` (the test links with --wrap) ---- */

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);
static int counting, allocations;
void *__wrap_malloc(size_t n)
{
    allocations += counting;
    return __real_malloc(n);
}
void *__wrap_calloc(size_t n, size_t m)
{
    allocations += counting;
    return __real_calloc(n, m);
}
void *__wrap_realloc(void *p, size_t n)
{
    allocations += counting;
    return __real_realloc(p, n);
}

static pagid_config cfg;
static struct ev_loop *ev;
static worker_ctx w;
static pagi_router *r;

static void setup(void)
{
    config_init_defaults(&cfg);
    memset(&w, 0, sizeof w);
    w.cfg = &cfg;
    ev = ev_loop_new(0);
    ck_assert_ptr_nonnull(ev);
    loop_init(&w.loop, ev);
    r = pagi_router_new();
    ck_assert_ptr_nonnull(r);
}

static void teardown(void)
{
    pagi_router_free(r);
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

/* ---- a fake driver: records the answer ---- */

typedef struct fake {
    pagi_scope *s;
    int status, finished;
    char allow[128], body[64];
} fake;

static int fake_send(pagi_scope *s, const pagi_event *e, pagi_send_cb cb, void *ud)
{
    fake *f = scope_proto(s);
    if (e->type == PAGI_EV_HTTP_RESPONSE_START || e->type == PAGI_EV_SSE_HTTP_RESPONSE_START ||
        e->type == PAGI_EV_WEBSOCKET_HTTP_RESPONSE_START) {
        f->status = e->status;
        for (size_t i = 0; i < e->header_count; i++)
            if (e->headers[i].name.len == 5 && memcmp(e->headers[i].name.ptr, "allow", 5) == 0)
                snprintf(f->allow, sizeof f->allow, "%.*s", (int)e->headers[i].value.len,
                         e->headers[i].value.ptr);
    } else {
        snprintf(f->body, sizeof f->body, "%.*s", (int)e->body.len, e->body.ptr);
    }
    scope_complete_send(s, cb, ud, NULL);
    return 0;
}

static int fake_next_event(pagi_scope *s, pagi_event *e, int take)
{
    (void)s;
    (void)e;
    (void)take;
    return 0;
}

static void fake_receive_wanted(pagi_scope *s)
{
    (void)s;
}

static void fake_finished(pagi_scope *s, const char *error)
{
    (void)error;
    fake *f = scope_proto(s);
    if (f != NULL)
        f->finished++;
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

/* A scope of type t for method and raw path (decoded as the server does),
 * mounted at the decoded path's first mount bytes. */
static void open_scope_ext(fake *f, pagi_scope_type t, const char *method, const char *raw,
                           size_t mount, unsigned extensions)
{
    memset(f, 0, sizeof *f);
    size_t rl = strlen(raw);
    char *dec = malloc(rl + 1);
    size_t dl = 0;
    for (size_t i = 0; i < rl; i++) {
        unsigned v;
        if (raw[i] == '%' && i + 2 < rl && sscanf(raw + i + 1, "%2x", &v) == 1 &&
            strchr("0123456789abcdefABCDEF", raw[i + 2])) {
            dec[dl++] = (char)v;
            i += 2;
        } else {
            dec[dl++] = raw[i];
        }
    }
    scope_request rq = {.method = method,
                        .http_version = "1.1",
                        .path = {dec, dl},
                        .raw_path = {raw, rl},
                        .query = {"", 0},
                        .extensions = extensions};
    f->s = scope_new(&w, t, &fake_ops, f, t == PAGI_SCOPE_LIFESPAN ? NULL : &rq);
    free(dec); /* the scope keeps its own copy */
    ck_assert_ptr_nonnull(f->s);
    if (mount)
        scope_set_mount(f->s, mount);
}

static void open_scope(fake *f, const char *method, const char *raw, size_t mount)
{
    open_scope_ext(f, PAGI_SCOPE_HTTP, method, raw, mount, 0);
}

static void gone(fake *f)
{
    scope_detach(f->s);
    drain();
}

/* ---- routes that record what matched ---- */

typedef struct hit {
    const char *route; /* which route ran */
    char a[128], b[128];
    int a_null;
    const char *a_ptr;
} hit;
static hit last;

/* Each route's ud is its name; params "a" and "b" are recorded. */
static void on_route(pagi_scope *s, const pagi_route_params *p, void *ud)
{
    memset(&last, 0, sizeof last);
    last.route = ud;
    pagi_str a = pagi_route_param(p, "a"), b = pagi_route_param(p, "b");
    last.a_null = a.ptr == NULL;
    last.a_ptr = a.ptr;
    snprintf(last.a, sizeof last.a, "%.*s", (int)a.len, a.ptr ? a.ptr : "");
    snprintf(last.b, sizeof last.b, "%.*s", (int)b.len, b.ptr ? b.ptr : "");
    pagi_respond_text(s, 200, "ok\n");
}

static void add_as(const char *method, const char *pattern, const char *name)
{
    ck_assert_msg(pagi_router_add(r, method, pattern, on_route, (void *)name) == 0, "%s",
                  pagi_router_error(r));
}

static void add(const char *method, const char *pattern)
{
    add_as(method, pattern, pattern);
}

/* Dispatch method raw (mounted at mount bytes): the route that ran, or NULL
 * with the status answered in *status. */
static const char *route_of(const char *method, const char *raw, size_t mount, int *status)
{
    fake f;
    open_scope(&f, method, raw, mount);
    memset(&last, 0, sizeof last);
    int rc = pagi_router_dispatch(r, f.s);
    drain();
    ck_assert_int_eq(f.finished, 1);
    ck_assert_int_eq(rc, last.route ? 0 : 1);
    if (status)
        *status = f.status;
    gone(&f);
    return last.route;
}

static const char *route(const char *method, const char *raw)
{
    return route_of(method, raw, 0, NULL);
}

START_TEST(literal_named_and_wildcard_segments)
{
    add("GET", "/polls");
    add("GET", "/polls/:a");
    add("POST", "/polls/:a/vote/:b");
    add("GET", "/files/*a");
    ck_assert_str_eq(route("GET", "/polls"), "/polls");
    ck_assert_str_eq(route("GET", "/polls/42"), "/polls/:a");
    ck_assert_str_eq(last.a, "42");
    ck_assert_int_eq(last.b[0], 0); /* no such name: {NULL, 0} */
    ck_assert_str_eq(route("POST", "/polls/7/vote/yes"), "/polls/:a/vote/:b");
    ck_assert_str_eq(last.a, "7");
    ck_assert_str_eq(last.b, "yes");
    ck_assert_str_eq(route("GET", "/files/a/b/c.txt"), "/files/*a");
    ck_assert_str_eq(last.a, "a/b/c.txt");
    ck_assert_str_eq(route("GET", "/files/"), "/files/*a"); /* zero segments: empty, not NULL */
    ck_assert_str_eq(last.a, "");
    ck_assert_int_eq(last.a_null, 0);
    ck_assert_ptr_null(route("GET", "/files")); /* the '/' before the wildcard is literal */
    ck_assert_ptr_null(route("GET", "/polls/42/vote"));
    ck_assert_ptr_null(route("GET", "/pollsx"));
    ck_assert_ptr_null(route("GET", "/"));
}
END_TEST

/* Segments split at the client's '/': %2F is data; literals match decoded
 * bytes; values are decoded and point into the scope's decoded path. */
START_TEST(percent_encoded_bytes)
{
    add("GET", "/kv/:a");
    add("GET", "/polls/:a/x");
    ck_assert_str_eq(route("GET", "/kv/a%2Fb"), "/kv/:a");
    ck_assert_str_eq(last.a, "a/b");
    ck_assert_str_eq(route("GET", "/kv/caf%C3%A9%20au%20lait"), "/kv/:a");
    ck_assert_str_eq(last.a, "caf\xc3\xa9 au lait");
    ck_assert_str_eq(route("GET", "/p%6Flls/%2F%2F/x"), "/polls/:a/x"); /* literal, decoded */
    ck_assert_str_eq(last.a, "//");
    ck_assert_str_eq(route("GET", "/kv/100%"), "/kv/:a"); /* not an escape: as it is */
    ck_assert_str_eq(last.a, "100%");
    ck_assert_ptr_null(route("GET", "/kv%2Fa")); /* one segment "kv/a" */
    ck_assert_ptr_null(route("GET", "/kv/a/b"));

    fake f;
    open_scope(&f, "GET", "/kv/x%2Fy", 0);
    ck_assert_int_eq(pagi_router_dispatch(r, f.s), 0);
    pagi_str path = pagi_scope_path(f.s);
    ck_assert_ptr_eq(last.a_ptr, path.ptr + 4); /* valid as long as the scope */
    drain();
    gone(&f);
}
END_TEST

START_TEST(literal_beats_named_beats_wildcard_whatever_the_order)
{
    add("GET", "/*a");
    add("GET", "/polls/*a");
    add("GET", "/polls/:a");
    add("GET", "/polls/new");
    add("GET", "/:a/new");
    ck_assert_str_eq(route("GET", "/polls/new"), "/polls/new");
    ck_assert_str_eq(route("GET", "/polls/9"), "/polls/:a");
    ck_assert_str_eq(route("GET", "/polls/9/x"), "/polls/*a");
    ck_assert_str_eq(route("GET", "/users/new"), "/:a/new");
    ck_assert_str_eq(route("GET", "/anything/else/here"), "/*a");
    ck_assert_str_eq(last.a, "anything/else/here");
}
END_TEST

/* The same specificity: an exact method beats GET-for-HEAD beats any,
 * whatever the order they were added in. */
START_TEST(ties_go_to_the_exact_method)
{
    add_as(NULL, "/x/:a", "any x");
    add_as("GET", "/x/:b", "get x");
    add_as(NULL, "/h", "any h");
    add_as("GET", "/h", "get h");
    add_as("HEAD", "/h", "head h");
    ck_assert_str_eq(route("GET", "/x/1"), "get x");
    ck_assert_str_eq(route("PUT", "/x/1"), "any x");
    ck_assert_str_eq(route("HEAD", "/x/1"), "get x");
    ck_assert_str_eq(route("HEAD", "/h"), "head h");
    ck_assert_str_eq(route("GET", "/h"), "get h");
    ck_assert_str_eq(route("OPTIONS", "/h"), "any h");
    /* No tie is left to break: a route of an earlier one's method and shape is refused. */
    ck_assert_int_eq(pagi_router_add(r, "GET", "/x/:c", on_route, NULL), -1);
    ck_assert_int_eq(pagi_router_add(r, NULL, "/x/:c", on_route, NULL), -1);
}
END_TEST

START_TEST(not_found_and_method_not_allowed_with_allow)
{
    add("GET", "/polls/:a");
    add("DELETE", "/polls/:a");
    add("POST", "/polls/:a/vote");
    add("PUT", "/polls/*a");
    add("GET", "/:b/:a"); /* the same method twice: listed once */
    add(PAGI_ROUTE_SSE, "/polls/:a");
    add(PAGI_ROUTE_WEBSOCKET, "/polls/:a");
    fake f;
    open_scope(&f, "PATCH", "/polls/1", 0);
    ck_assert_int_eq(pagi_router_dispatch(r, f.s), 1);
    drain();
    ck_assert_int_eq(f.status, 405);
    ck_assert_str_eq(f.allow, "GET, DELETE, PUT, HEAD"); /* pseudo-methods are not methods */
    ck_assert_str_eq(f.body, "method not allowed\n");
    ck_assert_int_eq(f.finished, 1);
    gone(&f);

    int status;
    ck_assert_ptr_null(route_of("GET", "/nothing", 0, &status));
    ck_assert_int_eq(status, 404);
    ck_assert_ptr_null(route_of("GET", "/polls/1/vote", 0, &status));
    ck_assert_int_eq(status, 405);
    ck_assert_str_eq(route("HEAD", "/polls/1"), "/polls/:a"); /* HEAD where GET is */
}
END_TEST

/* The path below root_path is what matches; the mount point itself is "/". */
START_TEST(mount_relative_paths)
{
    add("GET", "/");
    add("GET", "/polls/:a");
    ck_assert_str_eq(route_of("GET", "/api/polls/3", 4, NULL), "/polls/:a");
    ck_assert_str_eq(last.a, "3");
    ck_assert_str_eq(route_of("GET", "/api", 4, NULL), "/");
    ck_assert_str_eq(route_of("GET", "/api/", 4, NULL), "/");
    ck_assert_ptr_null(route_of("GET", "/api/polls/3", 0, NULL)); /* not mounted: /api is data */
    /* An encoded prefix (the mount matched the decoded "/api") and separator. */
    ck_assert_str_eq(route_of("GET", "/%61pi/polls/x%2Fy", 4, NULL), "/polls/:a");
    ck_assert_str_eq(last.a, "x/y");
    ck_assert_str_eq(route_of("GET", "/api%2Fpolls/7", 4, NULL), "/polls/:a");
    ck_assert_str_eq(last.a, "7");
}
END_TEST

START_TEST(trailing_slash_is_significant)
{
    add("GET", "/polls");
    add("GET", "/dir/");
    add("GET", "/kv/:a");
    ck_assert_ptr_null(route("GET", "/polls/"));
    ck_assert_ptr_null(route("GET", "/dir"));
    ck_assert_str_eq(route("GET", "/dir/"), "/dir/");
    ck_assert_ptr_null(route("GET", "/kv/")); /* a named segment is never empty */
    ck_assert_ptr_null(route("GET", "/kv/a/"));
    ck_assert_ptr_null(route("GET", "/kv//"));
}
END_TEST

/* Far more segments than a pattern holds, and one huge segment. */
START_TEST(very_long_paths)
{
    add("GET", "/a/:a");
    add("GET", "/w/*a");
    size_t n = 64 * 1024;
    char *p = malloc(n + 1);
    for (size_t i = 0; i < n; i += 2)
        memcpy(p + i, "/x", 2);
    p[n] = '\0';
    p[1] = 'w';
    ck_assert_str_eq(route("GET", p), "/w/*a");
    ck_assert_uint_eq(strlen(last.a), sizeof last.a - 1); /* (recorded truncated) */
    p[1] = 'a';
    int status;
    ck_assert_ptr_null(route_of("GET", p, 0, &status));
    ck_assert_int_eq(status, 404);
    memset(p + 3, 'y', n - 3); /* "/a/yyyy...": one segment of 64 KiB */
    ck_assert_str_eq(route("GET", p), "/a/:a");
    fake f;
    open_scope(&f, "GET", p, 0);
    ck_assert_int_eq(pagi_router_dispatch(r, f.s), 0);
    ck_assert_ptr_eq(last.a_ptr, pagi_scope_path(f.s).ptr + 3);
    drain();
    gone(&f);
    free(p);
}
END_TEST

static void count_only(pagi_scope *s, const pagi_route_params *p, void *ud)
{
    (void)s;
    *(size_t *)ud += pagi_route_param(p, "id").len;
}

START_TEST(no_allocation_per_dispatch)
{
    size_t seen = 0;
    for (int i = 0; i < 40; i++) {
        char pat[32];
        snprintf(pat, sizeof pat, "/r%d/:id/*rest", i);
        ck_assert_int_eq(pagi_router_add(r, "GET", pat, count_only, &seen), 0);
    }
    ck_assert_int_eq(pagi_router_add(r, "GET", "/r7/:id/x", count_only, &seen), 0);
    fake f;
    open_scope(&f, "GET", "/r7/abc%2Fdef/x", 0);
    int failed = 0;
    counting = 1; /* (no ck_assert while counting: check allocates for its own records) */
    allocations = 0;
    for (int i = 0; i < 100; i++)
        failed += pagi_router_dispatch(r, f.s) != 0;
    counting = 0;
    ck_assert_int_eq(failed, 0);
    ck_assert_int_eq(allocations, 0);
    ck_assert_uint_eq(seen, 100 * strlen("abc/def"));
    pagi_scope_finish(f.s, NULL);
    drain();
    gone(&f);
}
END_TEST

/* sse scopes: SSE routes first, then as an http request of their method;
 * websocket scopes: WEBSOCKET routes only. */
START_TEST(sse_and_websocket_routes)
{
    add_as(PAGI_ROUTE_SSE, "/feed/:a", "sse feed");
    add_as("GET", "/feed/:a", "get feed");
    add_as("GET", "/page", "get page");
    add_as(PAGI_ROUTE_WEBSOCKET, "/ws/:a", "ws");
    add_as(NULL, "/ws/:a", "any ws");
    fake f;
    open_scope_ext(&f, PAGI_SCOPE_SSE, "GET", "/feed/1", 0, 0);
    ck_assert_int_eq(pagi_router_dispatch(r, f.s), 0);
    ck_assert_str_eq(last.route, "sse feed");
    drain();
    gone(&f);
    open_scope_ext(&f, PAGI_SCOPE_SSE, "GET", "/page", 0, 0);
    ck_assert_int_eq(pagi_router_dispatch(r, f.s), 0);
    ck_assert_str_eq(last.route, "get page"); /* no SSE route: as a GET */
    drain();
    ck_assert_int_eq(f.status, 200); /* pagi_respond declines the stream with a response */
    gone(&f);
    open_scope(&f, "GET", "/feed/1", 0);
    ck_assert_int_eq(pagi_router_dispatch(r, f.s), 0);
    ck_assert_str_eq(last.route, "get feed");
    drain();
    gone(&f);

    open_scope_ext(&f, PAGI_SCOPE_WEBSOCKET, "GET", "/ws/9", 0, 0);
    ck_assert_int_eq(pagi_router_dispatch(r, f.s), 0);
    ck_assert_str_eq(last.route, "ws"); /* NULL routes are http requests' only */
    ck_assert_str_eq(last.a, "9");
    drain();
    gone(&f);
    /* No WEBSOCKET route: 404 through the extension, or refused (403). */
    open_scope_ext(&f, PAGI_SCOPE_WEBSOCKET, "GET", "/page", 0, SCOPE_EXT_WEBSOCKET_HTTP_RESPONSE);
    ck_assert_int_eq(pagi_router_dispatch(r, f.s), 1);
    drain();
    ck_assert_int_eq(f.status, 404);
    ck_assert_str_eq(f.allow, "");
    gone(&f);
    open_scope_ext(&f, PAGI_SCOPE_WEBSOCKET, "GET", "/page", 0, 0);
    ck_assert_int_eq(pagi_router_dispatch(r, f.s), 1);
    drain();
    ck_assert_int_eq(f.status, 0);
    ck_assert_int_eq(f.finished, 1);
    gone(&f);
}
END_TEST

static int which_ran;
static void mark_sse(pagi_scope *s, const pagi_route_params *p, void *ud)
{
    (void)p;
    which_ran = *(int *)ud;
    pagi_respond_text(s, 200, "x");
}

START_TEST(sse_route_before_the_get_route)
{
    static int sse = 1, get = 2;
    ck_assert_int_eq(pagi_router_add(r, "GET", "/feed", mark_sse, &get), 0);
    ck_assert_int_eq(pagi_router_add(r, PAGI_ROUTE_SSE, "/*rest", mark_sse, &sse), 0);
    fake f;
    open_scope_ext(&f, PAGI_SCOPE_SSE, "GET", "/feed", 0, 0);
    ck_assert_int_eq(pagi_router_dispatch(r, f.s), 0);
    ck_assert_int_eq(which_ran, sse); /* less specific, but an SSE route */
    drain();
    gone(&f);
    open_scope(&f, "GET", "/feed", 0);
    ck_assert_int_eq(pagi_router_dispatch(r, f.s), 0);
    ck_assert_int_eq(which_ran, get);
    drain();
    gone(&f);
}
END_TEST

START_TEST(bad_patterns_are_refused_at_add)
{
    static const struct {
        const char *method, *pattern, *why;
    } bad[] = {
        {"GET", "polls", "does not start with '/'"},
        {"GET", "", "does not start with '/'"},
        {"GET", "/a//b", "an empty segment"},
        {"GET", "//", "an empty segment"},
        {"GET", "/:", "a name of 1-63 bytes"},
        {"GET", "/*", "a name of 1-63 bytes"},
        {"GET", "/:a-b", "is not of [A-Za-z0-9_]"},
        {"GET", "/*a/b", "a wildcard must be last"},
        {"GET", "/:id/x/:id", "the name \"id\" twice"},
        {"GET", "/:id/*id", "the name \"id\" twice"},
        {"GET", "/a%20b", "'%' in a literal"},
        {"G T", "/a", "is not an HTTP token"},
        {"get", "/a", "has lower-case letters"},
        {"", "/a", "1-32 bytes"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        errno = 0;
        ck_assert_int_eq(pagi_router_add(r, bad[i].method, bad[i].pattern, on_route, NULL), -1);
        ck_assert_int_eq(errno, EINVAL);
        ck_assert_msg(strstr(pagi_router_error(r), bad[i].why) != NULL, "%s: %s", bad[i].pattern,
                      pagi_router_error(r));
        ck_assert_msg(strncmp(pagi_router_error(r), "pagi_router_add: ", 17) == 0, "%s",
                      pagi_router_error(r));
    }
    add("GET", "/a/:x");
    ck_assert_int_eq(pagi_router_add(r, "GET", "/a/:y", on_route, NULL), -1);
    ck_assert_ptr_nonnull(strstr(pagi_router_error(r), "the same method and shape"));
    add("PUT", "/a/:y");                        /* another method: fine */
    ck_assert_str_eq(pagi_router_error(r), ""); /* cleared by a success */
    pagi_route_cb no_cb = NULL;
    ck_assert_int_eq(pagi_router_add(r, "GET", "/b", no_cb, NULL), -1);
    pagi_router *volatile none = NULL;
    errno = 0;
    ck_assert_int_eq(pagi_router_add(none, "GET", "/b", on_route, NULL), -1);
    ck_assert_int_eq(errno, EINVAL);
}
END_TEST

START_TEST(bounds_of_a_pattern)
{
    char pat[512] = "";
    for (int i = 0; i < PAGI_ROUTE_MAX_SEGMENTS; i++) {
        char seg[8];
        snprintf(seg, sizeof seg, i < PAGI_ROUTE_MAX_PARAMS ? "/:p%d" : "/l", i);
        strcat(pat, seg);
    }
    add("GET", pat);
    ck_assert_int_eq(pagi_router_add(r, "PUT", strcat(pat, "/l"), on_route, NULL), -1);
    ck_assert_ptr_nonnull(strstr(pagi_router_error(r), "more than 32 segments"));
    pat[0] = '\0';
    for (int i = 0; i <= PAGI_ROUTE_MAX_PARAMS; i++) {
        char seg[8];
        snprintf(seg, sizeof seg, "/:p%d", i);
        strcat(pat, seg);
    }
    ck_assert_int_eq(pagi_router_add(r, "GET", pat, on_route, NULL), -1);
    ck_assert_ptr_nonnull(strstr(pagi_router_error(r), "more than 16 names"));
    char name[80] = "/:";
    memset(name + 2, 'n', 64);
    name[66] = '\0';
    ck_assert_int_eq(pagi_router_add(r, "GET", name, on_route, NULL), -1);
    name[65] = '\0'; /* 63 bytes */
    add("GET", name);
}
END_TEST

/* Misuse: refused without finishing, the app still owns s. */
START_TEST(dispatch_refusals)
{
    fake f;
    open_scope_ext(&f, PAGI_SCOPE_LIFESPAN, NULL, "", 0, 0);
    ck_assert_int_eq(pagi_router_dispatch(r, f.s), -1);
    ck_assert_ptr_nonnull(strstr(pagi_scope_error(f.s), "pagi_router_dispatch: a lifespan scope"));
    ck_assert_int_eq(f.finished, 0);
    pagi_scope_finish(f.s, NULL);
    drain();
    gone(&f);
    open_scope(&f, "GET", "/", 0);
    ck_assert_int_eq(pagi_router_dispatch(NULL, f.s), -1);
    ck_assert_str_eq(pagi_scope_error(f.s), "pagi_router_dispatch: NULL router");
    ck_assert_int_eq(f.finished, 0);
    ck_assert_int_eq(pagi_router_dispatch(r, f.s), 1); /* an empty router: 404 */
    drain();
    ck_assert_int_eq(f.status, 404);
    gone(&f);
    pagi_str none = pagi_route_param(NULL, "a");
    ck_assert_ptr_null(none.ptr);
}
END_TEST

/* A scope whose raw path does not decode to its path (made by something
 * other than the HTTP parsers) is routed on the decoded path. */
START_TEST(raw_path_not_matching_falls_back_to_the_decoded_path)
{
    add("GET", "/kv/:a");
    fake f;
    memset(&f, 0, sizeof f);
    scope_request rq = {.method = "GET",
                        .http_version = "1.1",
                        .path = {"/kv/a", 5},
                        .raw_path = {"/other", 6},
                        .query = {"", 0}};
    f.s = scope_new(&w, PAGI_SCOPE_HTTP, &fake_ops, &f, &rq);
    ck_assert_int_eq(pagi_router_dispatch(r, f.s), 0);
    ck_assert_str_eq(last.a, "a");
    drain();
    gone(&f);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("pagi_easy_router");
    TCase *tc = tcase_create("router");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, literal_named_and_wildcard_segments);
    tcase_add_test(tc, percent_encoded_bytes);
    tcase_add_test(tc, literal_beats_named_beats_wildcard_whatever_the_order);
    tcase_add_test(tc, ties_go_to_the_exact_method);
    tcase_add_test(tc, not_found_and_method_not_allowed_with_allow);
    tcase_add_test(tc, mount_relative_paths);
    tcase_add_test(tc, trailing_slash_is_significant);
    tcase_add_test(tc, very_long_paths);
    tcase_add_test(tc, no_allocation_per_dispatch);
    tcase_add_test(tc, sse_and_websocket_routes);
    tcase_add_test(tc, sse_route_before_the_get_route);
    tcase_add_test(tc, bad_patterns_are_refused_at_add);
    tcase_add_test(tc, bounds_of_a_pattern);
    tcase_add_test(tc, dispatch_refusals);
    tcase_add_test(tc, raw_path_not_matching_falls_back_to_the_decoded_path);
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
