/*
 * test_http1_parser.c - Check suite for src/worker/http1_parser.c: request
 * heads, bodies, pipelining, split feeding, every smuggling vector and every
 * limit at and one past its value.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/http1/http1_parser.h"

/* What the callbacks saw, flattened to text so two runs compare with strcmp. */
typedef struct rec {
    int requests, completes, abort_request, abort_body;
    size_t body_calls;
    char head[8192];
    char body[1 << 16];
    size_t body_len;
    h1_request req; /* shallow: its strings die when on_request returns */
    int nul_ok;     /* every string of the head was NUL-terminated */
    char path[64];  /* a copy of req.path */
} rec;

static const h1_limits deflim = {8192, 16384, 100, 1 << 20};

static int on_request(void *ud, const h1_request *r)
{
    rec *c = ud;
    c->requests++;
    c->req = *r;
    c->nul_ok = r->raw_path.ptr[r->raw_path.len] == 0 && r->path.ptr[r->path.len] == 0 &&
                r->query.ptr[r->query.len] == 0;
    for (size_t i = 0; i < r->header_count; i++)
        c->nul_ok &= r->headers[i].name.ptr[r->headers[i].name.len] == 0 &&
                     r->headers[i].value.ptr[r->headers[i].value.len] == 0;
    snprintf(c->path, sizeof c->path, "%.*s", (int)r->path.len, r->path.ptr);
    int n = snprintf(c->head, sizeof c->head, "%s|%d|%.*s|%.*s|%.*s|%lld|%d|%d|%d|%d|%d", r->method,
                     r->http_minor, (int)r->raw_path.len, r->raw_path.ptr, (int)r->path.len,
                     r->path.ptr, (int)r->query.len, r->query.ptr, (long long)r->content_length,
                     r->chunked, r->keep_alive, r->expect_continue, r->upgrade_websocket,
                     r->accepts_event_stream);
    for (size_t i = 0; i < r->header_count && n < (int)sizeof c->head; i++)
        n += snprintf(c->head + n, sizeof c->head - (size_t)n, "|%.*s=%.*s",
                      (int)r->headers[i].name.len, r->headers[i].name.ptr,
                      (int)r->headers[i].value.len, r->headers[i].value.ptr);
    return c->abort_request ? -1 : 0;
}

static int on_body(void *ud, const char *d, size_t n)
{
    rec *c = ud;
    ck_assert_uint_gt(n, 0);
    ck_assert_uint_le(c->body_len + n, sizeof c->body);
    memcpy(c->body + c->body_len, d, n);
    c->body_len += n;
    c->body_calls++;
    return c->abort_body ? -1 : 0;
}

static int on_complete(void *ud)
{
    rec *c = ud;
    c->completes++;
    return 0;
}

static const h1_parser_callbacks cbs = {on_request, on_body, on_complete};

/*
 * Feed `in` in pieces of `step` bytes (0 = all at once) until the parser
 * stops. Returns the final state; *used = bytes consumed in total.
 */
static h1_state feed_steps(h1_parser *p, const char *in, size_t len, size_t step, size_t *used)
{
    size_t off = 0;
    h1_state st = H1_NEED_MORE;
    while (off < len) {
        size_t n = step && step < len - off ? step : len - off;
        size_t c = 0;
        st = h1_parser_feed(p, in + off, n, &c);
        ck_assert_uint_le(c, n);
        off += c;
        if (st != H1_NEED_MORE)
            break;
        ck_assert_uint_eq(c, n); /* NEED_MORE means everything was taken */
    }
    *used = off;
    return st;
}

typedef struct result {
    h1_state st;
    int status;
    size_t used;
    rec r;
} result;

static void run_with(const h1_limits *lim, const char *in, size_t len, size_t step, result *out)
{
    memset(out, 0, sizeof *out);
    h1_parser *p = h1_parser_new(lim, &cbs, &out->r);
    ck_assert_ptr_nonnull(p);
    out->st = feed_steps(p, in, len, step, &out->used);
    out->status = out->st == H1_ERROR ? h1_parser_error_status(p) : 0;
    if (out->st == H1_ERROR)
        ck_assert_str_ne(h1_parser_error_text(p), "");
    out->r.req.headers = NULL; /* the arena dies with the parser */
    h1_parser_free(p);
}

/* Whole, in 7-byte pieces and byte by byte must all agree. */
static result *run3(const h1_limits *lim, const char *in, size_t len)
{
    static result a, b, c;
    run_with(lim, in, len, 0, &a);
    run_with(lim, in, len, 7, &b);
    run_with(lim, in, len, 1, &c);
    ck_assert_int_eq(a.st, c.st);
    ck_assert_int_eq(a.st, b.st);
    ck_assert_int_eq(a.status, c.status);
    ck_assert_int_eq(a.status, b.status);
    if (a.st == H1_DONE) {
        ck_assert_uint_eq(a.used, c.used);
        ck_assert_str_eq(a.r.head, c.r.head);
        ck_assert_str_eq(a.r.head, b.r.head);
        ck_assert_uint_eq(a.r.body_len, c.r.body_len);
        ck_assert_mem_eq(a.r.body, c.r.body, a.r.body_len);
        ck_assert_int_eq(c.r.completes, 1);
    }
    return &a;
}

#define REQ(s) (s), (sizeof(s) - 1)

static result *ok_lim(const h1_limits *lim, const char *in, size_t len)
{
    result *r = run3(lim, in, len);
    ck_assert_msg(r->st == H1_DONE, "expected DONE, got state %d status %d for [%s]", r->st,
                  r->status, in);
    ck_assert_int_eq(r->r.requests, 1);
    ck_assert_int_eq(r->r.completes, 1);
    return r;
}

static result *ok(const char *in, size_t len)
{
    return ok_lim(&deflim, in, len);
}

static void bad_lim(const h1_limits *lim, const char *in, size_t len, int status)
{
    result *r = run3(lim, in, len);
    ck_assert_msg(r->st == H1_ERROR && r->status == status,
                  "expected %d, got state %d status %d for [%s]", status, r->st, r->status, in);
    ck_assert_int_eq(r->r.completes, 0);
}

static void bad(const char *in, size_t len, int status)
{
    bad_lim(&deflim, in, len, status);
}

/* ------------------------------------------------------------------ */
/* Heads                                                               */
/* ------------------------------------------------------------------ */

START_TEST(basic_get)
{
    result *r = ok(REQ("GET /a/b?x=1&y=2 HTTP/1.1\r\nHost: example.com\r\n"
                       "X-Mixed-Case:   padded value \t\r\nAccept: */*\r\n\r\n"));
    ck_assert_str_eq(r->r.head, "GET|1|/a/b|/a/b|x=1&y=2|-1|0|1|0|0|0"
                                "|host=example.com|x-mixed-case=padded value|accept=*/*");
    ck_assert_uint_eq(r->r.body_len, 0);
    ck_assert_uint_eq(r->used, strlen("GET /a/b?x=1&y=2 HTTP/1.1\r\nHost: example.com\r\n"
                                      "X-Mixed-Case:   padded value \t\r\nAccept: */*\r\n\r\n"));
}
END_TEST

START_TEST(strings_nul_terminated)
{
    rec c = {0};
    h1_parser *p = h1_parser_new(&deflim, &cbs, &c);
    const char in[] = "POST /p%20q?a=b HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n";
    size_t used;
    ck_assert_int_eq(h1_parser_feed(p, in, sizeof in - 1, &used), H1_DONE);
    ck_assert_int_eq(c.nul_ok, 1);
    ck_assert(strncmp(c.head, "POST|1|/p%20q|/p q|a=b|", 23) == 0);
    ck_assert_int_eq(c.req.content_length, 0);
    h1_parser_free(p);
}
END_TEST

START_TEST(request_line_of_a_refused_request)
{
    /* The access log of a refused request shows what the parser had read. */
    h1_limits lim = deflim;
    lim.max_body_size = 10;
    rec c = {0};
    h1_parser *p = h1_parser_new(&lim, &cbs, &c);
    pagi_str m, t;
    ck_assert_int_eq(h1_parser_request_line(p, &m, &t), 0);
    const char in[] = "POST /up?x=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 99\r\n\r\n";
    size_t used;
    ck_assert_int_eq(h1_parser_feed(p, in, sizeof in - 1, &used), H1_ERROR);
    ck_assert_int_eq(h1_parser_error_status(p), 413);
    ck_assert_int_eq(h1_parser_request_line(p, &m, &t), 1);
    ck_assert_int_eq(m.len, 4);
    ck_assert_int_eq(memcmp(m.ptr, "POST", 4), 0);
    ck_assert_int_eq(t.len, 7);
    ck_assert_int_eq(memcmp(t.ptr, "/up?x=1", 7), 0);
    h1_parser_reset(p); /* nothing stale for the next request */
    ck_assert_int_eq(h1_parser_request_line(p, &m, &t), 0);
    const char half[] = "GET /only-the-method";
    ck_assert_int_eq(h1_parser_feed(p, half, sizeof half - 1, &used), H1_NEED_MORE);
    ck_assert_int_eq(h1_parser_request_line(p, &m, &t), 0); /* the target has not ended */
    h1_parser_free(p);
}
END_TEST

START_TEST(empty_query_and_value)
{
    result *r = ok(REQ("GET /? HTTP/1.1\r\nHost: h\r\nX-Empty:\r\nX-Sp:   \r\n\r\n"));
    ck_assert_str_eq(r->r.head, "GET|1|/|/||-1|0|1|0|0|0|host=h|x-empty=|x-sp=");
}
END_TEST

START_TEST(http10_without_host)
{
    result *r = ok(REQ("GET / HTTP/1.0\r\n\r\n"));
    ck_assert_str_eq(r->r.head, "GET|0|/|/||-1|0|0|0|0|0");
}
END_TEST

START_TEST(extension_methods_accepted)
{
    const char *m[] = {"PURGE", "FOO-BAR", "M-SEARCH", "X_1.2!", "PROPFIND"};
    for (size_t i = 0; i < sizeof m / sizeof *m; i++) {
        char in[256];
        int n = snprintf(in, sizeof in, "%s / HTTP/1.1\r\nHost: h\r\n\r\n", m[i]);
        result *r = ok(in, (size_t)n);
        ck_assert_str_eq(r->r.req.method == NULL ? "" : m[i], m[i]);
        ck_assert_int_eq(strncmp(r->r.head, m[i], strlen(m[i])), 0);
    }
}
END_TEST

START_TEST(lowercase_method_rejected)
{
    bad(REQ("get / HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
}
END_TEST

START_TEST(invalid_method_token)
{
    bad(REQ("GE(T / HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
    bad(REQ("GET@ / HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
    bad(REQ(" GET / HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
}
END_TEST

START_TEST(connect_not_implemented)
{
    bad(REQ("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"), 501);
}
END_TEST

START_TEST(absolute_form)
{
    result *r = ok(REQ("GET http://Example.com:8080/p/q?z=1 HTTP/1.1\r\nHost: other\r\n\r\n"));
    ck_assert_str_eq(r->r.head, "GET|1|/p/q|/p/q|z=1|-1|0|1|0|0|0|host=Example.com:8080");
    r = ok(REQ("GET https://h.example HTTP/1.1\r\nHost: h.example\r\n\r\n"));
    ck_assert_str_eq(r->r.head, "GET|1|/|/||-1|0|1|0|0|0|host=h.example");
    r = ok(REQ("GET http://h?q HTTP/1.0\r\n\r\n")); /* 1.0: host is added */
    ck_assert_str_eq(r->r.head, "GET|0|/|/|q|-1|0|0|0|0|0|host=h");
}
END_TEST

START_TEST(absolute_form_bad_authority)
{
    bad(REQ("GET http:///p HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
    bad(REQ("GET http://user@h/p HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
    bad(REQ("GET ftp://h/p HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
    bad(REQ("GET p HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
}
END_TEST

START_TEST(asterisk_form)
{
    result *r = ok(REQ("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n"));
    ck_assert_str_eq(r->r.head, "OPTIONS|1|*|*||-1|0|1|0|0|0|host=h");
    bad(REQ("GET * HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
    bad(REQ("OPTIONS *x HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
}
END_TEST

START_TEST(target_bad_bytes)
{
    bad(REQ("GET /a#frag HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
    bad(REQ("GET /a\x01 HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
    bad(REQ("GET /a\x7f HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
    static const char nul[] = "GET /a\0b HTTP/1.1\r\nHost: h\r\n\r\n";
    bad(nul, sizeof nul - 1, 400);
}
END_TEST

START_TEST(percent_decoding)
{
    result *r = ok(REQ("GET /a%2Fb%41%zz%4+c%2 HTTP/1.1\r\nHost: h\r\n\r\n"));
    ck_assert_str_eq(r->r.head, "GET|1|/a%2Fb%41%zz%4+c%2|/a/bA%zz%4+c%2||-1|0|1|0|0|0|host=h");
    /* A decoded NUL never reaches an app; the query is not decoded. */
    bad(REQ("GET /x%00y HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
    bad(REQ("GET /x%00?a HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
    bad(REQ("GET http://h/%00 HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
    r = ok(REQ("GET /x%01y?%00 HTTP/1.1\r\nHost: h\r\n\r\n"));
    ck_assert_uint_eq(r->r.req.path.len, 4);
    ck_assert_uint_eq(r->r.req.query.len, 3);
}
END_TEST

START_TEST(percent_decode_function)
{
    char buf[64];
    size_t n = h1_percent_decode(buf, "%7e%7E+%2", 9);
    ck_assert_uint_eq(n, 5);
    ck_assert_mem_eq(buf, "~~+%2", 5);
    strcpy(buf, "a%20b%");
    n = h1_percent_decode(buf, buf, strlen(buf)); /* in place */
    ck_assert_uint_eq(n, 4);
    ck_assert_mem_eq(buf, "a b%", 4);
    ck_assert_uint_eq(h1_percent_decode(buf, "", 0), 0);
}
END_TEST

START_TEST(cookie_merge)
{
    result *r = ok(REQ("GET / HTTP/1.1\r\nCookie: a=1\r\nHost: h\r\ncookie: b=2; c=3\r\n"
                       "X: y\r\nCOOKIE:   d=4  \r\n\r\n"));
    ck_assert_str_eq(r->r.head, "GET|1|/|/||-1|0|1|0|0|0|cookie=a=1; b=2; c=3; d=4|host=h|x=y");
    r = ok(REQ("GET / HTTP/1.1\r\nHost: h\r\nCookie: \r\nCookie: a=1\r\n\r\n"));
    ck_assert_str_eq(r->r.head, "GET|1|/|/||-1|0|1|0|0|0|host=h|cookie=a=1");
    r = ok(REQ("GET / HTTP/1.1\r\nHost: h\r\nCookie: only=1\r\n\r\n"));
    ck_assert_str_eq(r->r.head, "GET|1|/|/||-1|0|1|0|0|0|host=h|cookie=only=1");
}
END_TEST

START_TEST(keep_alive_matrix)
{
    struct {
        const char *in;
        int ka;
    } t[] = {
        {"GET / HTTP/1.1\r\nHost: h\r\n\r\n", 1},
        {"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", 0},
        {"GET / HTTP/1.1\r\nHost: h\r\nConnection: Keep-Alive, CLOSE\r\n\r\n", 0},
        {"GET / HTTP/1.1\r\nHost: h\r\nConnection: closed\r\n\r\n", 1},
        {"GET / HTTP/1.1\r\nHost: h\r\nConnection: x\r\nConnection: close\r\n\r\n", 0},
        {"GET / HTTP/1.0\r\n\r\n", 0},
        {"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", 1},
        {"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", 1},
        {"GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n", 0},
    };
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        result *r = ok(t[i].in, strlen(t[i].in));
        ck_assert_msg(r->r.req.keep_alive == t[i].ka, "case %zu", i);
    }
}
END_TEST

START_TEST(expect_continue)
{
    result *r = ok(REQ("POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\n"
                       "Content-Length: 2\r\n\r\nhi"));
    ck_assert_int_eq(r->r.req.expect_continue, 1);
    ck_assert_mem_eq(r->r.body, "hi", 2);
    r = ok(REQ("POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n"));
    ck_assert_int_eq(r->r.req.expect_continue, 0);
    r = ok(REQ("POST / HTTP/1.1\r\nHost: h\r\nExpect: 200-ok\r\n\r\n"));
    ck_assert_int_eq(r->r.req.expect_continue, 0);
}
END_TEST

START_TEST(upgrade_websocket)
{
    result *r = ok(REQ("GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: WebSocket\r\n"
                       "Connection: keep-alive, Upgrade\r\n\r\n"));
    ck_assert_int_eq(r->r.req.upgrade_websocket, 1);
    r = ok(REQ("GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n\r\n"));
    ck_assert_int_eq(r->r.req.upgrade_websocket, 0);
    r = ok(REQ("GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: h2c\r\nConnection: upgrade\r\n\r\n"));
    ck_assert_int_eq(r->r.req.upgrade_websocket, 0);
    r = ok(
        REQ("GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocketx\r\nConnection: upgrade\r\n\r\n"));
    ck_assert_int_eq(r->r.req.upgrade_websocket, 0);
}
END_TEST

START_TEST(upgrade_leaves_following_bytes)
{
    /* the frames after the handshake are not HTTP: they must stay unconsumed */
    const char in[] =
        "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n";
    char all[256];
    snprintf(all, sizeof all, "%s\x81\x85XYZW", in);
    result *r = ok(all, strlen(all));
    ck_assert_uint_eq(r->used, sizeof in - 1);
}
END_TEST

START_TEST(event_stream)
{
    result *r =
        ok(REQ("GET / HTTP/1.1\r\nHost: h\r\nAccept: text/html, TEXT/Event-Stream;q=1\r\n\r\n"));
    ck_assert_int_eq(r->r.req.accepts_event_stream, 1);
    r = ok(REQ("GET / HTTP/1.1\r\nHost: h\r\nAccept: text/html\r\n\r\n"));
    ck_assert_int_eq(r->r.req.accepts_event_stream, 0);
}
END_TEST

START_TEST(htab_and_obs_text_in_value)
{
    result *r = ok(REQ("GET / HTTP/1.1\r\nHost: h\r\nX: a\tb \xc3\xa9\r\n\r\n"));
    ck_assert_str_eq(r->r.head, "GET|1|/|/||-1|0|1|0|0|0|host=h|x=a\tb \xc3\xa9");
}
END_TEST

/* ------------------------------------------------------------------ */
/* Bodies, pipelining, splitting                                       */
/* ------------------------------------------------------------------ */

START_TEST(content_length_body)
{
    result *r = ok(REQ("PUT /u HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\nhello world"));
    ck_assert_int_eq(r->r.req.content_length, 11);
    ck_assert_uint_eq(r->r.body_len, 11);
    ck_assert_mem_eq(r->r.body, "hello world", 11);
}
END_TEST

START_TEST(chunked_extensions_trailers)
{
    result *r = ok(REQ("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                       "5;name=value\r\nhello\r\n"
                       "6 ; a ; b=\"q;x\"\r\n world\r\n"
                       "0A\r\n0123456789\r\n"
                       "0;last\r\nX-Trailer: t\r\nX-Other: u\r\n\r\n"));
    ck_assert_int_eq(r->r.req.chunked, 1);
    ck_assert_int_eq(r->r.req.content_length, -1);
    ck_assert_uint_eq(r->r.body_len, 21);
    ck_assert_mem_eq(r->r.body, "hello world0123456789", 21);
    /* trailers are discarded, not added to the head */
    ck_assert_ptr_null(strstr(r->r.head, "x-trailer"));
}
END_TEST

START_TEST(chunked_hex_case)
{
    char in[512];
    char data[0x1f];
    memset(data, 'z', sizeof data);
    int n = snprintf(in, sizeof in,
                     "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: Chunked\r\n\r\n"
                     "1F\r\n%.*s\r\n0000\r\n\r\n",
                     (int)sizeof data, data);
    result *r = ok(in, (size_t)n);
    ck_assert_uint_eq(r->r.body_len, 0x1f);
}
END_TEST

START_TEST(every_split_point)
{
    /* Two-piece feeding at every position gives the same result. */
    static const char in[] = "POST /s?q HTTP/1.1\r\nHost: h\r\nCookie: a\r\nCookie: b\r\n"
                             "Transfer-Encoding: chunked\r\n\r\n3;e=1\r\nabc\r\n2\r\nde\r\n"
                             "0\r\nT: 1\r\n\r\n";
    size_t len = sizeof in - 1;
    result whole;
    run_with(&deflim, in, len, 0, &whole);
    ck_assert_int_eq(whole.st, H1_DONE);
    for (size_t cut = 1; cut < len; cut++) {
        rec c;
        memset(&c, 0, sizeof c);
        h1_parser *p = h1_parser_new(&deflim, &cbs, &c);
        size_t u1 = 0, u2 = 0;
        ck_assert_int_eq(h1_parser_feed(p, in, cut, &u1), H1_NEED_MORE);
        ck_assert_uint_eq(u1, cut);
        ck_assert_int_eq(h1_parser_feed(p, in + cut, len - cut, &u2), H1_DONE);
        ck_assert_uint_eq(u1 + u2, len);
        ck_assert_str_eq(c.head, whole.r.head);
        ck_assert_uint_eq(c.body_len, 5);
        ck_assert_mem_eq(c.body, "abcde", 5);
        h1_parser_free(p);
    }
}
END_TEST

START_TEST(pipelined)
{
    static const char in[] = "GET /1 HTTP/1.1\r\nHost: h\r\n\r\n"
                             "POST /2 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc"
                             "POST /3 HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                             "1\r\nx\r\n0\r\n\r\n"
                             "GET /4 HTTP/1.0\r\n\r\n";
    const char *paths[] = {"/1", "/2", "/3", "/4"};
    const char *bodies[] = {"", "abc", "x", ""};
    rec c;
    memset(&c, 0, sizeof c);
    h1_parser *p = h1_parser_new(&deflim, &cbs, &c);
    size_t off = 0, len = sizeof in - 1;
    for (int i = 0; i < 4; i++) {
        size_t used = 0;
        c.body_len = 0;
        ck_assert_int_eq(h1_parser_feed(p, in + off, len - off, &used), H1_DONE);
        ck_assert_int_eq(c.requests, i + 1);
        ck_assert_int_eq(c.completes, i + 1);
        ck_assert_str_eq(c.path, paths[i]);
        ck_assert_uint_eq(c.body_len, strlen(bodies[i]));
        ck_assert_mem_eq(c.body, bodies[i], c.body_len);
        /* without a reset the parser stays put */
        size_t again = 99;
        ck_assert_int_eq(h1_parser_feed(p, in + off + used, len - off - used, &again), H1_DONE);
        ck_assert_uint_eq(again, 0);
        off += used;
        h1_parser_reset(p);
    }
    ck_assert_uint_eq(off, len);
    h1_parser_free(p);
}
END_TEST

START_TEST(leading_crlf_tolerated)
{
    rec c;
    memset(&c, 0, sizeof c);
    h1_parser *p = h1_parser_new(&deflim, &cbs, &c);
    size_t used;
    ck_assert_int_eq(h1_parser_started(p), 0);
    ck_assert_int_eq(h1_parser_feed(p, "\r\n\r\n\r", 5, &used), H1_NEED_MORE);
    ck_assert_int_eq(h1_parser_started(p), 0);
    ck_assert_int_eq(h1_parser_feed(p, "\nG", 2, &used), H1_NEED_MORE);
    ck_assert_int_eq(h1_parser_started(p), 1);
    ck_assert_int_eq(h1_parser_head_done(p), 0);
    const char rest[] = "ET / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\n";
    ck_assert_int_eq(h1_parser_feed(p, rest, sizeof rest - 1, &used), H1_NEED_MORE);
    ck_assert_int_eq(h1_parser_head_done(p), 1);
    ck_assert_int_eq(c.requests, 1);
    ck_assert_int_eq(c.completes, 0);
    ck_assert_int_eq(h1_parser_feed(p, "!", 1, &used), H1_DONE);
    ck_assert_int_eq(c.completes, 1);
    h1_parser_reset(p);
    ck_assert_int_eq(h1_parser_started(p), 0);
    ck_assert_int_eq(h1_parser_head_done(p), 0);
    /* a bare LF before the request line is not an empty line */
    ck_assert_int_eq(h1_parser_feed(p, "\nGET", 4, &used), H1_ERROR);
    ck_assert_int_eq(h1_parser_error_status(p), 400);
    h1_parser_free(p);
}
END_TEST

START_TEST(empty_feed)
{
    rec c;
    memset(&c, 0, sizeof c);
    h1_parser *p = h1_parser_new(&deflim, &cbs, &c);
    size_t used = 5;
    ck_assert_int_eq(h1_parser_feed(p, "", 0, &used), H1_NEED_MORE);
    ck_assert_uint_eq(used, 0);
    ck_assert_int_eq(h1_parser_feed(p, "GET / HTTP/1.1\r\n", 16, &used), H1_NEED_MORE);
    ck_assert_int_eq(h1_parser_feed(p, "", 0, &used), H1_NEED_MORE);
    ck_assert_int_eq(h1_parser_feed(p, "Host: h\r\n\r\n", 11, &used), H1_DONE);
    h1_parser_free(p);
}
END_TEST

START_TEST(callback_abort)
{
    static const char in[] = "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nab";
    rec c;
    memset(&c, 0, sizeof c);
    c.abort_request = 1;
    h1_parser *p = h1_parser_new(&deflim, &cbs, &c);
    size_t used;
    ck_assert_int_eq(h1_parser_feed(p, in, sizeof in - 1, &used), H1_ERROR);
    ck_assert_int_eq(h1_parser_error_status(p), 400);
    ck_assert_int_eq(c.body_len, 0);
    ck_assert_int_eq(h1_parser_feed(p, "x", 1, &used), H1_ERROR); /* sticky */
    ck_assert_uint_eq(used, 0);
    h1_parser_reset(p);
    c.abort_request = 0;
    c.abort_body = 1;
    ck_assert_int_eq(h1_parser_feed(p, in, sizeof in - 1, &used), H1_ERROR);
    ck_assert_int_eq(h1_parser_error_status(p), 400);
    ck_assert_int_eq(c.completes, 0);
    h1_parser_free(p);
}
END_TEST

START_TEST(reuse_after_reset_many)
{
    /* the arena and tables are reused: many requests, growing and shrinking */
    rec c;
    memset(&c, 0, sizeof c);
    h1_parser *p = h1_parser_new(&deflim, &cbs, &c);
    char in[8192];
    for (int i = 0; i < 200; i++) {
        int n = snprintf(in, sizeof in, "GET /%d HTTP/1.1\r\nHost: h\r\nX-Pad: %0*d\r\n\r\n", i,
                         (i * 37) % 4000 + 1, i);
        size_t used;
        ck_assert_int_eq(h1_parser_feed(p, in, (size_t)n, &used), H1_DONE);
        ck_assert_uint_eq(used, (size_t)n);
        h1_parser_reset(p);
    }
    ck_assert_int_eq(c.completes, 200);
    h1_parser_free(p);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Smuggling vectors (RFC 9112 §6, §11.2): one test each               */
/* ------------------------------------------------------------------ */

#define H "POST / HTTP/1.1\r\nHost: h\r\n"

START_TEST(cl_and_te)
{
    bad(REQ(H "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"), 400);
}
END_TEST
START_TEST(te_and_cl)
{
    bad(REQ(H "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n"), 400);
}
END_TEST
START_TEST(cl_duplicate_equal)
{
    bad(REQ(H "Content-Length: 3\r\nContent-Length: 3\r\n\r\nabc"), 400);
}
END_TEST
START_TEST(cl_duplicate_different)
{
    bad(REQ(H "Content-Length: 3\r\nContent-Length: 4\r\n\r\nabcd"), 400);
}
END_TEST
START_TEST(cl_comma_list)
{
    bad(REQ(H "Content-Length: 3, 3\r\n\r\nabc"), 400);
}
END_TEST
START_TEST(cl_non_digit)
{
    bad(REQ(H "Content-Length: +3\r\n\r\nabc"), 400);
    bad(REQ(H "Content-Length: -1\r\n\r\n"), 400);
    bad(REQ(H "Content-Length: 3a\r\n\r\nabc"), 400);
    bad(REQ(H "Content-Length: 0x3\r\n\r\nabc"), 400);
    bad(REQ(H "Content-Length: 1 2\r\n\r\nabc"), 400);
}
END_TEST
START_TEST(cl_empty)
{
    bad(REQ(H "Content-Length:\r\n\r\n"), 400);
    bad(REQ(H "Content-Length:   \r\n\r\n"), 400);
}
END_TEST
START_TEST(cl_overflow)
{
    bad(REQ(H "Content-Length: 9223372036854775808\r\n\r\n"), 400);
    bad(REQ(H "Content-Length: 99999999999999999999999\r\n\r\n"), 400);
}
END_TEST
START_TEST(cl_with_ows_ok)
{
    result *r = ok(REQ(H "Content-Length:  2  \r\n\r\nab"));
    ck_assert_int_eq(r->r.req.content_length, 2);
    /* http-parser refuses HTAB after the digits; refusing is the safe side */
    bad(REQ(H "Content-Length: 2\t\r\n\r\nab"), 400);
}
END_TEST
START_TEST(framing_field_without_body_cross_checked)
{
    /* A whole head our parser reads alone still goes to http-parser when it
     * has a framing field, even one that frames no body: here http-parser
     * refuses the HTAB that ours trims away as OWS. */
    bad(REQ(H "Content-Length: 0\t\r\n\r\n"), 400);
    bad(REQ("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\t\r\n\r\n"), 400);
    /* http-parser takes a name beginning with transfer-encoding for one and
     * refuses the request for want of chunked; ours sees another field
     * (found by the fuzzer: read whole, it was accepted) */
    bad(REQ("GET / HTTP/1.1\r\nHost: h\r\ntransfer-encodingCookie: a=1\r\n\r\n"), 400);
}
END_TEST
START_TEST(te_not_chunked)
{
    bad(REQ(H "Transfer-Encoding: gzip\r\n\r\n"), 400);
}
END_TEST
START_TEST(te_chunked_then_identity)
{
    bad(REQ(H "Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n"), 400);
}
END_TEST
START_TEST(te_chunked_twice)
{
    bad(REQ(H "Transfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n"), 400);
    bad(REQ(H "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"), 400);
}
END_TEST
START_TEST(te_unknown_before_chunked)
{
    bad(REQ(H "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"), 501);
    bad(REQ(H "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"), 501);
}
END_TEST
START_TEST(te_chunked_with_params)
{
    bad(REQ(H "Transfer-Encoding: chunked;x=1\r\n\r\n0\r\n\r\n"), 400);
}
END_TEST
START_TEST(te_empty)
{
    bad(REQ(H "Transfer-Encoding: ,\r\n\r\n"), 400);
}
END_TEST
START_TEST(te_http10)
{
    bad(REQ("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"), 400);
}
END_TEST
START_TEST(te_list_ows_ok)
{
    result *r = ok(REQ(H "Transfer-Encoding:   CHUNKED  \r\n\r\n0\r\n\r\n"));
    ck_assert_int_eq(r->r.req.chunked, 1);
    /* empty list elements are legal, but http-parser disagrees: refused */
    bad(REQ(H "Transfer-Encoding: chunked,\r\n\r\n0\r\n\r\n"), 400);
    bad(REQ(H "Transfer-Encoding: , chunked\r\n\r\n0\r\n\r\n"), 400);
}
END_TEST
START_TEST(ws_before_colon)
{
    bad(REQ(H "Content-Length : 3\r\n\r\nabc"), 400);
    bad(REQ(H "Transfer-Encoding\t: chunked\r\n\r\n0\r\n\r\n"), 400);
}
END_TEST
START_TEST(obs_fold)
{
    bad(REQ(H "X: a\r\n b\r\n\r\n"), 400);
}
END_TEST
START_TEST(obs_fold_tab)
{
    bad(REQ(H "X: a\r\n\tb\r\n\r\n"), 400);
}
END_TEST
START_TEST(ws_before_first_field)
{
    bad(REQ("GET / HTTP/1.1\r\n Host: h\r\n\r\n"), 400);
}
END_TEST
START_TEST(control_char_in_value)
{
    bad(REQ(H "X: a\x01z\r\n\r\n"), 400);
    bad(REQ(H "X: a\x7fz\r\n\r\n"), 400);
    bad(REQ(H "X: a\x1bz\r\n\r\n"), 400);
    static const char nul[] = H "X: a\0z\r\n\r\n";
    bad(nul, sizeof nul - 1, 400);
}
END_TEST
START_TEST(empty_field_name)
{
    bad(REQ(H ": v\r\n\r\n"), 400);
}
END_TEST
START_TEST(bad_field_name)
{
    bad(REQ(H "X(y): v\r\n\r\n"), 400);
}
END_TEST
START_TEST(field_without_colon)
{
    bad(REQ(H "NoColon\r\n\r\n"), 400);
}
END_TEST
START_TEST(bare_lf_request_line)
{
    bad(REQ("GET / HTTP/1.1\nHost: h\r\n\r\n"), 400);
}
END_TEST
START_TEST(bare_lf_field)
{
    bad(REQ(H "X: a\nContent-Length: 0\r\n\r\n"), 400);
}
END_TEST
START_TEST(bare_lf_end_of_head)
{
    bad(REQ(H "X: a\r\n\n"), 400);
}
END_TEST
START_TEST(bare_cr_field)
{
    bad(REQ(H "X: a\rContent-Length: 5\r\n\r\n"), 400);
}
END_TEST
START_TEST(bare_cr_end_of_head)
{
    bad(REQ(H "X: a\r\n\rx"), 400);
}
END_TEST
START_TEST(bare_cr_request_line)
{
    bad(REQ("GET / HTTP/1.1\rHost: h\r\n\r\n"), 400);
}
END_TEST

#define C H "Transfer-Encoding: chunked\r\n\r\n"
START_TEST(chunk_size_invalid)
{
    bad(REQ(C "zz\r\nab\r\n0\r\n\r\n"), 400);
    bad(REQ(C "-1\r\n\r\n"), 400);
    bad(REQ(C "0x2\r\nab\r\n0\r\n\r\n"), 400);
    bad(REQ(C "\r\n"), 400);
    bad(REQ(C "2\r\nab\r\n\r\n"), 400);
}
END_TEST
START_TEST(chunk_size_too_many_digits)
{
    bad(REQ(C "00000000000000001\r\nx\r\n0\r\n\r\n"), 400);
}
END_TEST
START_TEST(chunk_size_huge)
{
    h1_limits big = deflim;
    big.max_body_size = 0; /* unlimited: the overflow check must still hold */
    bad_lim(&big, REQ(C "ffffffffffffffff\r\nx\r\n"), 413);
}
END_TEST
START_TEST(chunk_size_trailing_space)
{
    bad(REQ(C "2 \r\nab\r\n0\r\n\r\n"), 400);
}
END_TEST
START_TEST(chunk_ext_bare_lf)
{
    bad(REQ(C "2;a\nb\r\nab\r\n0\r\n\r\n"), 400);
}
END_TEST
START_TEST(chunk_ext_control)
{
    bad(REQ(C "2;a\x01\r\nab\r\n0\r\n\r\n"), 400);
}
END_TEST
START_TEST(chunk_ext_too_long)
{
    static char in[8192];
    int n = snprintf(in, sizeof in, C "2;%05000d\r\nab\r\n0\r\n\r\n", 1);
    bad(in, (size_t)n, 400);
}
END_TEST
START_TEST(chunk_ext_flood)
{
    /* many small chunks, each with a legal extension: the total is bounded */
    size_t cap = 200 * 1024;
    char *in = malloc(cap);
    size_t n = (size_t)snprintf(in, cap, C);
    for (int i = 0; i < 40; i++)
        n += (size_t)snprintf(in + n, cap - n, "1;%04000d\r\nx\r\n", i);
    n += (size_t)snprintf(in + n, cap - n, "0\r\n\r\n");
    result r;
    run_with(&deflim, in, n, 0, &r);
    ck_assert_int_eq(r.st, H1_ERROR);
    ck_assert_int_eq(r.status, 400);
    free(in);
}
END_TEST
START_TEST(chunk_data_without_crlf)
{
    bad(REQ(C "5\r\nhelloXX0\r\n\r\n"), 400);
}
END_TEST
START_TEST(chunk_data_bare_lf)
{
    bad(REQ(C "5\r\nhello\n0\r\n\r\n"), 400);
}
END_TEST
START_TEST(chunk_size_bare_lf)
{
    bad(REQ(C "5\nhello\r\n0\r\n\r\n"), 400);
}
END_TEST
START_TEST(chunk_last_bare_lf)
{
    bad(REQ(C "0\r\n\n"), 400);
}
END_TEST
START_TEST(trailer_obs_fold)
{
    bad(REQ(C "0\r\nT: a\r\n b\r\n\r\n"), 400);
}
END_TEST
START_TEST(trailer_bad_name)
{
    bad(REQ(C "0\r\nT x: a\r\n\r\n"), 400);
}
END_TEST
START_TEST(missing_host)
{
    bad(REQ("GET / HTTP/1.1\r\nX: y\r\n\r\n"), 400);
}
END_TEST
START_TEST(two_hosts)
{
    bad(REQ("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), 400);
    bad(REQ("GET / HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n"), 400);
}
END_TEST
START_TEST(malformed_request_line)
{
    bad(REQ("GET  / HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
    bad(REQ("GET /  HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
    bad(REQ("GET\t/ HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
    bad(REQ("GET / HTTP/1.1 \r\nHost: h\r\n\r\n"), 400);
    bad(REQ("GET / http/1.1\r\nHost: h\r\n\r\n"), 400);
    bad(REQ("GET / HTTP/1.10\r\nHost: h\r\n\r\n"), 400);
    bad(REQ("GET / HTTP/11\r\nHost: h\r\n\r\n"), 400);
    bad(REQ("GET / HTTP/a.b\r\nHost: h\r\n\r\n"), 400);
    bad(REQ("GET \r\n\r\n"), 400);
    bad(REQ("GET\r\n\r\n"), 400);
}
END_TEST
START_TEST(version_2_0)
{
    bad(REQ("GET / HTTP/2.0\r\nHost: h\r\n\r\n"), 505);
}
END_TEST
START_TEST(version_1_2)
{
    bad(REQ("GET / HTTP/1.2\r\nHost: h\r\n\r\n"), 505);
}
END_TEST
START_TEST(version_0_9)
{
    bad(REQ("GET /\r\n"), 505);
}
END_TEST
START_TEST(version_0_9_numbered)
{
    bad(REQ("GET / HTTP/0.9\r\n\r\n"), 505);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Limits: exactly at the limit passes, one more fails                 */
/* ------------------------------------------------------------------ */

/* "GET /aaa... HTTP/1.1" of exactly `total` bytes. */
static size_t make_line(char *out, size_t total)
{
    size_t plen = total - strlen("GET  HTTP/1.1");
    size_t n = 0;
    n += (size_t)sprintf(out, "GET /");
    memset(out + n, 'a', plen - 1);
    n += plen - 1;
    n += (size_t)sprintf(out + n, " HTTP/1.1\r\nHost: h\r\n\r\n");
    return n;
}

START_TEST(request_line_limit)
{
    h1_limits lim = deflim;
    lim.max_request_line = 100;
    static char in[512];
    ok_lim(&lim, in, make_line(in, 100));
    bad_lim(&lim, in, make_line(in, 101), 414);
}
END_TEST

START_TEST(request_line_limit_early)
{
    /* 414 fires while the line is still arriving, without waiting for CRLF */
    h1_limits lim = deflim;
    lim.max_request_line = 64;
    h1_parser *p = h1_parser_new(&lim, &cbs, &(rec){0});
    char in[100];
    memset(in, 'a', sizeof in);
    memcpy(in, "GET /", 5);
    size_t used;
    ck_assert_int_eq(h1_parser_feed(p, in, sizeof in, &used), H1_ERROR);
    ck_assert_int_eq(h1_parser_error_status(p), 414);
    h1_parser_free(p);
}
END_TEST

START_TEST(request_line_hard_cap)
{
    h1_limits lim = deflim;
    lim.max_request_line = 0; /* "unlimited" still has the hard cap */
    size_t n = 70 * 1024;
    char *in = malloc(n);
    memset(in, 'a', n);
    memcpy(in, "GET /", 5);
    result r;
    run_with(&lim, in, n, 0, &r);
    ck_assert_int_eq(r.st, H1_ERROR);
    ck_assert_int_eq(r.status, 414);
    free(in);
}
END_TEST

/* Head whose fields count exactly `size` bytes: each field is its name plus
 * everything after the colon, OWS included ("Host: h" counts 6). */
static size_t make_fields(char *out, size_t size)
{
    size_t n = (size_t)sprintf(out, "GET / HTTP/1.1\r\nHost: h\r\nX: ");
    size_t v = size - 6 - 2; /* "Host: h", then "X" and its one OWS byte */
    memset(out + n, 'v', v);
    n += v;
    n += (size_t)sprintf(out + n, "\r\n\r\n");
    return n;
}

START_TEST(header_size_limit)
{
    h1_limits lim = deflim;
    lim.max_header_size = 1000;
    static char in[4096];
    ok_lim(&lim, in, make_fields(in, 1000));
    bad_lim(&lim, in, make_fields(in, 1001), 431);
}
END_TEST

/* A request line past H1_REQUEST_LINE_FREE (1 KiB) counts against
 * max_header_size, so a head being read holds at most about that limit. */
START_TEST(long_request_line_counts_against_header_size)
{
    h1_limits lim = deflim;
    lim.max_request_line = 8192;
    lim.max_header_size = 1000;
    static char in[9000];
    /* fields "Host: h" count 6: the line may pass 1 KiB by 994 bytes */
    ok_lim(&lim, in, make_line(in, 1024 + 994));
    bad_lim(&lim, in, make_line(in, 1024 + 995), 431);
    bad_lim(&lim, in, make_line(in, 8000), 431);
    /* with the default-sized header limit an 8 KiB line is fine */
    ok(in, make_line(in, 8000));
    /* a head without fields (HTTP/1.0) is held to the same bound */
    size_t n = make_line(in, 3000);
    memcpy(in + n - strlen("1.1\r\nHost: h\r\n\r\n"), "1.0\r\n\r\n", strlen("1.0\r\n\r\n") + 1);
    bad_lim(&lim, in, strlen(in), 431);
}
END_TEST

static size_t make_count(char *out, size_t fields)
{
    size_t n = (size_t)sprintf(out, "GET / HTTP/1.1\r\nHost: h\r\n");
    for (size_t i = 1; i < fields; i++)
        n += (size_t)sprintf(out + n, "X-%zu: v\r\n", i);
    n += (size_t)sprintf(out + n, "\r\n");
    return n;
}

START_TEST(header_count_limit)
{
    h1_limits lim = deflim;
    lim.max_header_count = 20;
    static char in[4096];
    ok_lim(&lim, in, make_count(in, 20));
    bad_lim(&lim, in, make_count(in, 21), 431);
}
END_TEST

START_TEST(header_limit_above_http_parser)
{
    /* configured above http-parser's 80 KiB: its ceiling answers, with 431 */
    h1_limits lim = deflim;
    lim.max_header_size = 1 << 20;
    size_t cap = 200 * 1024;
    char *in = malloc(cap);
    size_t n = make_fields(in, 90 * 1024);
    result r;
    run_with(&lim, in, n, 0, &r);
    ck_assert_int_eq(r.st, H1_ERROR);
    ck_assert_int_eq(r.status, 431);
    run_with(&lim, in, n, 1000, &r);
    ck_assert_int_eq(r.status, 431);
    /* below 80 KiB it works */
    n = make_fields(in, 70 * 1024);
    run_with(&lim, in, n, 0, &r);
    ck_assert_int_eq(r.st, H1_DONE);
    free(in);
}
END_TEST

START_TEST(trailer_limits)
{
    h1_limits lim = deflim;
    lim.max_header_size = 100;
    static char in[1024];
    int n = snprintf(in, sizeof in, C "0\r\nT: %099d\r\n\r\n", 0); /* 1 + 1 + 99 */
    bad_lim(&lim, in, (size_t)n, 431);
    n = snprintf(in, sizeof in, C "0\r\nT: %098d\r\n\r\n", 0); /* exactly 100 */
    ok_lim(&lim, in, (size_t)n);
}
END_TEST

START_TEST(body_limit_content_length)
{
    h1_limits lim = deflim;
    lim.max_body_size = 10;
    ok_lim(&lim, REQ(H "Content-Length: 10\r\n\r\n0123456789"));
    rec c = {0};
    h1_parser *p = h1_parser_new(&lim, &cbs, &c);
    size_t used;
    /* refused at head time: the app never sees the request */
    ck_assert_int_eq(h1_parser_feed(p, REQ(H "Content-Length: 11\r\n\r\n"), &used), H1_ERROR);
    ck_assert_int_eq(h1_parser_error_status(p), 413);
    ck_assert_int_eq(c.requests, 0);
    h1_parser_free(p);
}
END_TEST

START_TEST(body_limit_chunked)
{
    h1_limits lim = deflim;
    lim.max_body_size = 10;
    ok_lim(&lim, REQ(C "5\r\n01234\r\n5\r\n56789\r\n0\r\n\r\n"));
    bad_lim(&lim, REQ(C "5\r\n01234\r\n6\r\n567890\r\n0\r\n\r\n"), 413);
    bad_lim(&lim, REQ(C "b\r\n0123456789a\r\n0\r\n\r\n"), 413);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("http1_parser");
    TCase *t = tcase_create("head");
    tcase_add_test(t, basic_get);
    tcase_add_test(t, strings_nul_terminated);
    tcase_add_test(t, request_line_of_a_refused_request);
    tcase_add_test(t, empty_query_and_value);
    tcase_add_test(t, http10_without_host);
    tcase_add_test(t, extension_methods_accepted);
    tcase_add_test(t, lowercase_method_rejected);
    tcase_add_test(t, invalid_method_token);
    tcase_add_test(t, connect_not_implemented);
    tcase_add_test(t, absolute_form);
    tcase_add_test(t, absolute_form_bad_authority);
    tcase_add_test(t, asterisk_form);
    tcase_add_test(t, target_bad_bytes);
    tcase_add_test(t, percent_decoding);
    tcase_add_test(t, percent_decode_function);
    tcase_add_test(t, cookie_merge);
    tcase_add_test(t, keep_alive_matrix);
    tcase_add_test(t, expect_continue);
    tcase_add_test(t, upgrade_websocket);
    tcase_add_test(t, upgrade_leaves_following_bytes);
    tcase_add_test(t, event_stream);
    tcase_add_test(t, htab_and_obs_text_in_value);
    suite_add_tcase(s, t);

    t = tcase_create("body");
    tcase_add_test(t, content_length_body);
    tcase_add_test(t, chunked_extensions_trailers);
    tcase_add_test(t, chunked_hex_case);
    tcase_add_test(t, every_split_point);
    tcase_add_test(t, pipelined);
    tcase_add_test(t, leading_crlf_tolerated);
    tcase_add_test(t, empty_feed);
    tcase_add_test(t, callback_abort);
    tcase_add_test(t, reuse_after_reset_many);
    suite_add_tcase(s, t);

    t = tcase_create("smuggling");
    tcase_add_test(t, cl_and_te);
    tcase_add_test(t, te_and_cl);
    tcase_add_test(t, cl_duplicate_equal);
    tcase_add_test(t, cl_duplicate_different);
    tcase_add_test(t, cl_comma_list);
    tcase_add_test(t, cl_non_digit);
    tcase_add_test(t, cl_empty);
    tcase_add_test(t, cl_overflow);
    tcase_add_test(t, cl_with_ows_ok);
    tcase_add_test(t, framing_field_without_body_cross_checked);
    tcase_add_test(t, te_not_chunked);
    tcase_add_test(t, te_chunked_then_identity);
    tcase_add_test(t, te_chunked_twice);
    tcase_add_test(t, te_unknown_before_chunked);
    tcase_add_test(t, te_chunked_with_params);
    tcase_add_test(t, te_empty);
    tcase_add_test(t, te_http10);
    tcase_add_test(t, te_list_ows_ok);
    tcase_add_test(t, ws_before_colon);
    tcase_add_test(t, obs_fold);
    tcase_add_test(t, obs_fold_tab);
    tcase_add_test(t, ws_before_first_field);
    tcase_add_test(t, control_char_in_value);
    tcase_add_test(t, empty_field_name);
    tcase_add_test(t, bad_field_name);
    tcase_add_test(t, field_without_colon);
    tcase_add_test(t, bare_lf_request_line);
    tcase_add_test(t, bare_lf_field);
    tcase_add_test(t, bare_lf_end_of_head);
    tcase_add_test(t, bare_cr_field);
    tcase_add_test(t, bare_cr_end_of_head);
    tcase_add_test(t, bare_cr_request_line);
    tcase_add_test(t, chunk_size_invalid);
    tcase_add_test(t, chunk_size_too_many_digits);
    tcase_add_test(t, chunk_size_huge);
    tcase_add_test(t, chunk_size_trailing_space);
    tcase_add_test(t, chunk_ext_bare_lf);
    tcase_add_test(t, chunk_ext_control);
    tcase_add_test(t, chunk_ext_too_long);
    tcase_add_test(t, chunk_ext_flood);
    tcase_add_test(t, chunk_data_without_crlf);
    tcase_add_test(t, chunk_data_bare_lf);
    tcase_add_test(t, chunk_size_bare_lf);
    tcase_add_test(t, chunk_last_bare_lf);
    tcase_add_test(t, trailer_obs_fold);
    tcase_add_test(t, trailer_bad_name);
    tcase_add_test(t, missing_host);
    tcase_add_test(t, two_hosts);
    tcase_add_test(t, malformed_request_line);
    tcase_add_test(t, version_2_0);
    tcase_add_test(t, version_1_2);
    tcase_add_test(t, version_0_9);
    tcase_add_test(t, version_0_9_numbered);
    suite_add_tcase(s, t);

    t = tcase_create("limits");
    tcase_add_test(t, request_line_limit);
    tcase_add_test(t, request_line_limit_early);
    tcase_add_test(t, request_line_hard_cap);
    tcase_add_test(t, header_size_limit);
    tcase_add_test(t, long_request_line_counts_against_header_size);
    tcase_add_test(t, header_count_limit);
    tcase_add_test(t, header_limit_above_http_parser);
    tcase_add_test(t, trailer_limits);
    tcase_add_test(t, body_limit_content_length);
    tcase_add_test(t, body_limit_chunked);
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
