"""Malformed and request-smuggling input: each request must get its error status
(400/413/414/431/501/505) and then a closed connection, and the server must
keep answering other clients afterwards. Limits come from a small config."""

from lib import Conn, TestFailure, check, check_eq, request, test

LIMITS = """\
limits:
  max_body_size: 1k
  max_header_size: 1k
  max_request_line: 256
  max_header_count: 10
"""


def expect_error(ctx, raw, status, app="echo", config=LIMITS):
    srv = ctx.start(app, config=config)
    c = Conn(srv.port)
    c.send(raw)
    try:
        r = c.read_response(allow_truncated=True)
    except Exception as e:
        raise TestFailure("expected a %d response, got none (%s)" % (status, e))
    check_eq(r.status, status, "status for %r" % raw[:80])
    conn_hdr = (r.header("connection") or "").lower()
    c.expect_closed(3)
    c.close()
    check(conn_hdr in ("close", ""), "connection header %r on an error response" % conn_hdr)
    r2 = request(srv.port, "POST", "/after", body=b"still here")
    check_eq((r2.status, r2.body), (200, b"still here"), "a normal request afterwards")
    return r


def head(*lines):
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


@test()
def cl_and_te_together(ctx):
    expect_error(ctx, head("POST / HTTP/1.1", "Host: t", "Content-Length: 5",
                           "Transfer-Encoding: chunked") + b"0\r\n\r\n", 400)


@test()
def duplicate_content_length(ctx):
    expect_error(ctx, head("POST / HTTP/1.1", "Host: t", "Content-Length: 5",
                           "Content-Length: 5") + b"hello", 400)


@test()
def content_length_list(ctx):
    expect_error(ctx, head("POST / HTTP/1.1", "Host: t", "Content-Length: 12, 12") + b"x" * 12, 400)


@test()
def content_length_not_a_number(ctx):
    expect_error(ctx, head("POST / HTTP/1.1", "Host: t", "Content-Length: abc"), 400)


@test()
def content_length_negative(ctx):
    expect_error(ctx, head("POST / HTTP/1.1", "Host: t", "Content-Length: -1"), 400)


@test()
def transfer_encoding_not_chunked_last(ctx):
    expect_error(ctx, head("POST / HTTP/1.1", "Host: t", "Transfer-Encoding: gzip") + b"abc", 400)


@test()
def transfer_encoding_unsupported_coding(ctx):
    expect_error(ctx, head("POST / HTTP/1.1", "Host: t", "Transfer-Encoding: gzip, chunked")
                 + b"0\r\n\r\n", 501)


@test()
def space_before_colon(ctx):
    expect_error(ctx, head("GET / HTTP/1.1", "Host: t", "Content-Length : 5"), 400)


@test()
def control_char_in_header_value(ctx):
    expect_error(ctx, head("GET / HTTP/1.1", "Host: t", "X-Evil: a\x01b"), 400)


@test()
def nul_in_header_value(ctx):
    expect_error(ctx, head("GET / HTTP/1.1", "Host: t", "X-Evil: a\x00b"), 400)


@test()
def missing_host_http11(ctx):
    expect_error(ctx, head("GET / HTTP/1.1", "Accept: */*"), 400)


@test()
def duplicate_host(ctx):
    expect_error(ctx, head("GET / HTTP/1.1", "Host: a", "Host: b"), 400)


@test()
def http2_request_line(ctx):
    expect_error(ctx, head("GET / HTTP/2.0", "Host: t"), 505)


@test()
def request_line_too_long(ctx):
    expect_error(ctx, head("GET /" + "a" * 400 + " HTTP/1.1", "Host: t"), 414)


@test()
def too_many_headers(ctx):
    lines = ["GET / HTTP/1.1", "Host: t"] + ["X-H%d: v" % i for i in range(20)]
    expect_error(ctx, head(*lines), 431)


@test()
def header_section_too_big(ctx):
    expect_error(ctx, head("GET / HTTP/1.1", "Host: t", "X-Big: " + "b" * 2000), 431)


@test()
def declared_body_too_large(ctx):
    # 413 as soon as the head is read: the client has not sent the body yet.
    expect_error(ctx, head("POST / HTTP/1.1", "Host: t", "Content-Length: 2000"), 413)


@test()
def chunked_body_too_large(ctx):
    body = b"".join(b"100\r\n" + b"c" * 256 + b"\r\n" for _ in range(8)) + b"0\r\n\r\n"
    expect_error(ctx, head("POST / HTTP/1.1", "Host: t", "Transfer-Encoding: chunked") + body, 413)


@test()
def body_at_limit_is_fine(ctx):
    srv = ctx.start("echo", config=LIMITS)
    r = request(srv.port, "POST", "/", body=b"k" * 1024)
    check_eq((r.status, len(r.body)), (200, 1024), "status and body length at max_body_size")


@test()
def obs_fold(ctx):
    expect_error(ctx, head("GET / HTTP/1.1", "Host: t", "X-Folded: a", " continued"), 400)


@test()
def bare_lf_line_endings(ctx):
    expect_error(ctx, b"GET / HTTP/1.1\nHost: t\n\n", 400)


@test()
def garbage_bytes(ctx):
    expect_error(ctx, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n", 400)


@test()
def bad_chunk_size(ctx):
    expect_error(ctx, head("POST / HTTP/1.1", "Host: t", "Transfer-Encoding: chunked")
                 + b"zz\r\nhello\r\n0\r\n\r\n", 400)


@test()
def invalid_method_token(ctx):
    expect_error(ctx, head("G(T / HTTP/1.1", "Host: t"), 400)


@test()
def smuggled_second_request_not_served(ctx):
    # CL+TE with a hidden request in the body: after the 400 nothing else is answered.
    srv = ctx.start("echo", config=LIMITS)
    c = Conn(srv.port)
    c.send(head("POST / HTTP/1.1", "Host: t", "Content-Length: 44", "Transfer-Encoding: chunked")
           + b"0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: t\r\n\r\n")
    r = c.read_response(allow_truncated=True)
    check_eq(r.status, 400, "status")
    extra = c.expect_closed(3)
    check(b"HTTP/1.1" not in extra, "a second response followed the 400: %r" % extra[:100])
    c.close()


@test(timeout=60)
def max_body_size_zero_sets_no_limit(ctx):
    # As nginx's client_max_body_size 0: no bound, not "no body". 11 MiB is
    # past the 10m default, declared and chunked.
    srv = ctx.start("echo", config="limits:\n  max_body_size: 0\n")
    big = b"z" * (11 << 20)
    r = request(srv.port, "POST", "/", body=big, timeout=30)
    check_eq((r.status, len(r.body)), (200, len(big)), "declared 11 MiB body with no limit")
    chunk = b"y" * 65536
    c = Conn(srv.port, timeout=30)
    c.send(head("POST / HTTP/1.1", "Host: t", "Transfer-Encoding: chunked"))
    for _ in range(176):  # 11 MiB
        c.send(b"10000\r\n" + chunk + b"\r\n")
    c.send(b"0\r\n\r\n")
    r = c.read_response()
    c.close()
    check_eq((r.status, len(r.body)), (200, 176 * 65536), "chunked 11 MiB body with no limit")
