"""HTTP/1.x basics with the built-in apps: hello and echo responses, server
headers (Date, framing), keep-alive, HTTP/1.0 connection management, HEAD,
pipelining, Expect: 100-continue, chunked request bodies (raw and via curl)."""

import os
import re
import socket
import subprocess
import time

from lib import (Conn, SLOW, TestFailure, check, check_eq, request, test)

HTTP_DATE = re.compile(r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|"
                       r"Sep|Oct|Nov|Dec) \d{4} \d\d:\d\d:\d\d GMT$")


def still_serving(port):
    r = request(port, "GET", "/still-serving")
    check(r.status == 200, "server no longer answers: %r" % r)


@test()
def hello_response(ctx):
    srv = ctx.start("hello")
    r = request(srv.port, "GET", "/")
    check_eq(r.status, 200, "status")
    check_eq(r.body, b"Hello from PAGI", "body")
    check(r.header("content-type", "").startswith("text/plain"),
          "content-type: expected text/plain, got %r" % r.header("content-type"))
    date = r.header("date")
    check(date is not None, "no Date header in %r" % r.headers)
    check(HTTP_DATE.match(date), "Date %r is not an IMF-fixdate" % date)
    check_eq(len(r.header_all("date")), 1, "number of Date headers")


@test()
def hello_any_method_and_path(ctx):
    srv = ctx.start("hello")
    for method, path in (("POST", "/a/b?c=d"), ("PUT", "/x"), ("DELETE", "/"), ("OPTIONS", "*")):
        r = request(srv.port, method, path, body=b"ignored" if method in ("POST", "PUT") else b"")
        check_eq(r.status, 200, "%s %s status" % (method, path))
        check_eq(r.body, b"Hello from PAGI", "%s %s body" % (method, path))


@test()
def echo_post_body_and_headers(ctx):
    srv = ctx.start("echo")
    body = bytes(range(256)) * 40  # binary, 10240 bytes
    r = request(srv.port, "POST", "/a%20b/c?x=1&y=%2F", body=body)
    check_eq(r.status, 200, "status")
    check_eq(r.body, body, "echoed body")
    check_eq(r.header("content-length"), str(len(body)), "content-length")
    check_eq(r.header("transfer-encoding"), None, "transfer-encoding")
    check_eq(r.header("x-echo-method"), "POST", "x-echo-method")
    check_eq(r.header("x-echo-path"), "/a%20b/c", "x-echo-path (raw path)")
    check_eq(r.header("x-echo-query"), "x=1&y=%2F", "x-echo-query")


@test()
def echo_get_empty_body(ctx):
    srv = ctx.start("echo")
    r = request(srv.port, "GET", "/nothing")
    check_eq(r.status, 200, "status")
    check_eq(r.body, b"", "body")
    check_eq(r.header("content-length"), "0", "content-length")
    check_eq(r.header("x-echo-method"), "GET", "x-echo-method")
    check_eq(r.header("x-echo-query"), "", "x-echo-query (empty)")


@test()
def echo_large_body(ctx):
    srv = ctx.start("echo")
    body = os.urandom(300 * 1024)
    r = request(srv.port, "PUT", "/big", body=body, timeout=15)
    check_eq(r.status, 200, "status")
    check(r.body == body, "echoed body differs (got %d bytes, sent %d)" % (len(r.body), len(body)))


@test()
def echo_chunked_request_raw(ctx):
    srv = ctx.start("echo")
    c = Conn(srv.port)
    c.send("POST /chunked HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
           "Connection: close\r\n\r\n"
           "5\r\nhello\r\n"
           "6;ext=1\r\n, worl\r\n"
           "1\r\nd\r\n"
           "0\r\nX-Trailer: yes\r\n\r\n")
    r = c.read_response()
    c.close()
    check_eq(r.status, 200, "status")
    check_eq(r.body, b"hello, world", "echoed chunked body")
    check_eq(r.header("content-length"), "12", "content-length of the echo")


@test()
def echo_chunked_request_curl(ctx):
    srv = ctx.start("echo")
    payload = os.urandom(100 * 1024)
    src = os.path.join(ctx.tmpdir, "payload.bin")
    with open(src, "wb") as f:
        f.write(payload)
    out = os.path.join(ctx.tmpdir, "out.bin")
    hdrs = os.path.join(ctx.tmpdir, "headers.txt")
    p = subprocess.run(
        ["curl", "-sS", "--max-time", str(int(10 * SLOW)), "-o", out, "-D", hdrs,
         "-H", "Transfer-Encoding: chunked", "--data-binary", "@" + src,
         "http://127.0.0.1:%d/curl/upload?via=curl" % srv.port],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30 * SLOW)
    check_eq(p.returncode, 0, "curl exit status (stderr %r)" % p.stderr)
    with open(hdrs, "rb") as f:
        head = f.read().decode("latin-1")
    check(head.startswith("HTTP/1.1 200"), "status line: %r" % head[:40])
    check(re.search(r"(?im)^x-echo-path: /curl/upload\r?$", head), "x-echo-path missing: %r" % head)
    check(re.search(r"(?im)^x-echo-query: via=curl\r?$", head), "x-echo-query missing: %r" % head)
    with open(out, "rb") as f:
        got = f.read()
    check(got == payload, "echoed body differs: %d bytes back, %d sent" % (len(got), len(payload)))


@test()
def keep_alive_several_requests(ctx):
    srv = ctx.start("echo")
    c = Conn(srv.port)
    for i in range(5):
        body = ("request %d" % i).encode()
        c.send("POST /k%d HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % (i, len(body)))
        c.send(body)
        r = c.read_response()
        check_eq(r.status, 200, "status of request %d" % i)
        check_eq(r.body, body, "body of request %d" % i)
        check_eq(r.header("x-echo-path"), "/k%d" % i, "x-echo-path of request %d" % i)
        check(r.header("connection", "").lower() != "close",
              "request %d: server announced close on a keep-alive connection" % i)
    check(c.is_open(), "keep-alive connection closed after 5 requests")
    c.close()


@test()
def connection_close_honoured(ctx):
    srv = ctx.start("hello")
    c = Conn(srv.port)
    c.send("GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    r = c.read_response()
    check_eq(r.status, 200, "status")
    check_eq((r.header("connection") or "").lower(), "close", "connection header")
    c.expect_closed(3)
    c.close()


@test()
def http10_closes_by_default(ctx):
    srv = ctx.start("echo")
    c = Conn(srv.port)
    c.send("GET /ten HTTP/1.0\r\n\r\n")
    r = c.read_response()
    check_eq(r.status, 200, "status")
    check(r.version in ("1.0", "1.1"), "version %r" % r.version)
    check_eq(r.header("transfer-encoding"), None, "transfer-encoding on a 1.0 response")
    check((r.header("connection") or "close").lower() == "close",
          "connection header %r on a 1.0 response without keep-alive" % r.header("connection"))
    c.expect_closed(3)
    c.close()


@test()
def http10_keep_alive_when_asked(ctx):
    srv = ctx.start("echo")
    c = Conn(srv.port)
    for i in range(3):
        c.send("POST /ten%d HTTP/1.0\r\nConnection: keep-alive\r\nContent-Length: 3\r\n\r\nabc" % i)
        r = c.read_response()
        check_eq(r.status, 200, "status of request %d" % i)
        check_eq(r.body, b"abc", "body of request %d" % i)
        check_eq(r.header("content-length"), "3", "content-length")
        check_eq((r.header("connection") or "").lower(), "keep-alive",
                 "connection header of request %d" % i)
    check(c.is_open(), "HTTP/1.0 keep-alive connection was closed")
    c.close()


@test()
def head_has_no_body(ctx):
    srv = ctx.start("hello")
    c = Conn(srv.port)
    c.send("HEAD / HTTP/1.1\r\nHost: t\r\n\r\n")
    r = c.read_response("HEAD")
    check_eq(r.status, 200, "HEAD status")
    # If any body bytes followed the head, the next response would not start
    # with a status line.
    c.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n")
    r2 = c.read_response()
    check_eq(r2.status, 200, "status of the GET after HEAD")
    check_eq(r2.body, b"Hello from PAGI", "body of the GET after HEAD")
    cl = r.header("content-length")
    check(cl in (None, "15"), "HEAD content-length %r (GET has 15)" % cl)
    c.close()


@test()
def pipelining_in_order(ctx):
    srv = ctx.start("echo")
    c = Conn(srv.port)
    c.send("GET /one HTTP/1.1\r\nHost: t\r\n\r\n"
           "POST /two HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\n222"
           "GET /three?q=3 HTTP/1.1\r\nHost: t\r\n\r\n")
    got = []
    for _ in range(3):
        r = c.read_response()
        got.append((r.status, r.header("x-echo-path"), r.body))
    check_eq(got, [(200, "/one", b""), (200, "/two", b"222"), (200, "/three", b"")],
             "pipelined responses")
    check(c.is_open(), "connection closed after pipelined requests")
    c.close()


@test()
def pipelining_many_hello(ctx):
    srv = ctx.start("hello")
    c = Conn(srv.port)
    n = 50
    c.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n" * n)
    for i in range(n):
        r = c.read_response()
        check_eq((r.status, r.body), (200, b"Hello from PAGI"), "pipelined response %d" % i)
    c.close()


@test()
def expect_100_continue(ctx):
    srv = ctx.start("echo")
    c = Conn(srv.port, timeout=3)
    c.send("POST /cont HTTP/1.1\r\nHost: t\r\nContent-Length: 11\r\n"
           "Expect: 100-continue\r\n\r\n")
    try:
        interim = c.read_head()
    except Exception as e:
        raise TestFailure("no interim response before the body was sent: %s" % e)
    check_eq(interim.status, 100, "interim status (expected 100 Continue before the body)")
    c.send("hello world")
    r = c.read_response()
    check_eq(r.status, 200, "final status")
    check_eq(r.body, b"hello world", "echoed body")
    c.close()


@test()
def expect_100_continue_curl(ctx):
    srv = ctx.start("echo")
    src = os.path.join(ctx.tmpdir, "payload.bin")
    payload = b"z" * 5000
    with open(src, "wb") as f:
        f.write(payload)
    t0 = time.monotonic()
    # curl waits up to --expect100-timeout for the 100 before sending anyway.
    p = subprocess.run(
        ["curl", "-sS", "--max-time", "20", "--expect100-timeout", "5", "-H", "Expect: 100-continue",
         "--data-binary", "@" + src, "http://127.0.0.1:%d/c" % srv.port],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    elapsed = time.monotonic() - t0
    check_eq(p.returncode, 0, "curl exit status (stderr %r)" % p.stderr)
    check(p.stdout == payload, "echoed body differs (%d bytes)" % len(p.stdout))
    check(elapsed < 4, "curl needed %.1fs: no 100 Continue, it waited for its timeout" % elapsed)


@test()
def no_100_continue_without_expect(ctx):
    srv = ctx.start("echo")
    c = Conn(srv.port)
    c.send("POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi")
    r = c.read_response()
    check_eq(r.interim, [], "interim responses without Expect")
    check_eq(r.body, b"hi", "body")
    c.close()


@test()
def chunked_response_framing(ctx):
    # The lifecycle app streams without content-length: HTTP/1.1 gets chunked.
    srv = ctx.start("lifecycle")
    c = Conn(srv.port)
    c.send("GET /stream?n=3&size=1000 HTTP/1.1\r\nHost: t\r\n\r\n")
    r = c.read_response()
    check_eq(r.status, 200, "status")
    check(r.chunked, "streamed 1.1 response is not chunked: %r" % r.headers)
    check_eq(len(r.body), 3000, "body length")
    check(c.is_open(), "connection closed after a complete chunked response")
    c.close()


@test()
def http10_streamed_response_closes(ctx):
    # No content-length on a 1.0 response: the close delimits the body.
    srv = ctx.start("lifecycle")
    c = Conn(srv.port)
    c.send("GET /stream?n=3&size=1000 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
    r = c.read_response()
    check_eq(r.status, 200, "status")
    check_eq(r.header("transfer-encoding"), None, "transfer-encoding on HTTP/1.0")
    check_eq(len(r.body), 3000, "body length (read to close)")
    check((r.header("connection") or "close").lower() == "close",
          "connection header %r" % r.header("connection"))


@test()
def many_sequential_connections(ctx):
    srv = ctx.start("hello")
    for i in range(200):
        r = request(srv.port, "GET", "/")
        check_eq(r.status, 200, "status of request %d" % i)
    still_serving(srv.port)


@test()
def unread_body_is_skipped_on_keep_alive(ctx):
    # /hello (lifecycle app) answers without reading the body: the next request
    # on the connection must be parsed after the body, never from inside it.
    srv = ctx.start("lifecycle")
    c = Conn(srv.port)
    trap = b"GET /never HTTP/1.1\r\nHost: t\r\n\r\n"
    body = trap * 100
    c.send(b"POST /hello HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    r = c.read_response()
    check_eq((r.status, r.body), (200, b"ok"), "first response")
    try:
        c.send(b"GET /hello HTTP/1.1\r\nHost: t\r\n\r\n")
        r2 = c.read_response()
    except Exception:
        return  # closing instead of draining the unread body is fine
    check_eq((r2.status, r2.body), (200, b"ok"), "second response (body bytes parsed as a request?)")


@test()
def unread_chunked_body_is_skipped(ctx):
    srv = ctx.start("lifecycle")
    c = Conn(srv.port)
    trap = b"GET /never HTTP/1.1\r\nHost: t\r\n\r\n"
    c.send(b"POST /hello HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
           + b"%x\r\n" % len(trap) + trap + b"\r\n0\r\n\r\n"
           + b"GET /hello HTTP/1.1\r\nHost: t\r\n\r\n")
    r = c.read_response()
    check_eq((r.status, r.body), (200, b"ok"), "first response")
    try:
        r2 = c.read_response()
    except Exception:
        return  # closed: acceptable
    check_eq((r2.status, r2.body), (200, b"ok"), "second response")


@test()
def pipelined_stream_then_hello(ctx):
    srv = ctx.start("lifecycle")
    c = Conn(srv.port)
    c.send("GET /stream?n=20&size=1000 HTTP/1.1\r\nHost: t\r\n\r\n"
           "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n"
           "GET /stream?n=2&size=10 HTTP/1.1\r\nHost: t\r\n\r\n")
    r1, r2, r3 = c.read_response(), c.read_response(), c.read_response()
    check_eq(len(r1.body), 20000, "first (streamed) body length")
    check_eq(r2.body, b"ok", "second body")
    check_eq(len(r3.body), 20, "third body length")
    c.close()


@test()
def head_on_streamed_response(ctx):
    srv = ctx.start("lifecycle")
    c = Conn(srv.port)
    c.send("HEAD /stream?n=3&size=100 HTTP/1.1\r\nHost: t\r\n\r\n")
    r = c.read_response("HEAD")
    check_eq(r.status, 200, "HEAD status")
    c.send("GET /hello HTTP/1.1\r\nHost: t\r\n\r\n")
    r2 = c.read_response()
    check_eq((r2.status, r2.body), (200, b"ok"), "response after HEAD (body bytes leaked?)")
    c.close()


@test()
def expect_100_not_sent_when_body_unread(ctx):
    # The app answers without reading: no 100 Continue, the final response at once.
    srv = ctx.start("lifecycle")
    c = Conn(srv.port, timeout=3)
    c.send("POST /hello HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\n")
    r = c.read_response()
    check_eq((r.status, r.body), (200, b"ok"), "final response")
    check_eq([i.status for i in r.interim], [], "interim responses although the body was never read")
    c.close()


@test()
def path_is_percent_decoded(ctx):
    srv = ctx.start("lifecycle")
    r = request(srv.port, "GET", "/hel%6C%6f")
    check_eq((r.status, r.body), (200, b"ok"), "/hel%6C%6f routed as /hello")


@test()
def nul_in_path_refused(ctx):
    """%00 decodes to a NUL, which would cut the path short wherever it is a
    C string (file names, mount prefixes): 400 from the server, before any
    app (echo would answer with the raw path). The query is not decoded."""
    srv = ctx.start("echo")
    for target, headers in (("/a%00b", ""), ("/%00", ""), ("/x%00?y=1", ""),
                            ("http://t/a%00", ""),
                            ("/ws%00", "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                                       "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                                       "Sec-WebSocket-Version: 13\r\n"),
                            ("/sse%00", "Accept: text/event-stream\r\n")):
        c = Conn(srv.port)
        try:
            c.send("GET %s HTTP/1.1\r\nHost: t\r\n%sConnection: close\r\n\r\n" % (target, headers))
            r = c.read_response("GET")
        finally:
            c.close()
        check_eq(r.status, 400, "status for %s" % target)
        check(r.header("x-echo-path") is None, "%s reached the app: %r" % (target, r.headers))
        check(b"%00 (NUL) in the request path" in r.body, "reason for %s: %r" % (target, r.body))
    r = request(srv.port, "GET", "/a%01b?q=%00")
    check_eq((r.status, r.header("x-echo-path"), r.header("x-echo-query")),
             (200, "/a%01b", "q=%00"), "other escapes, and %00 in the query")
    still_serving(srv.port)


@test()
def unread_body_keeps_or_closes_as_documented(ctx):
    """pagi(3): an unread body that arrived whole is skipped and the
    connection kept; one still arriving when the response starts (here
    larger than high_watermark) gets Connection: close, and the client
    still reads the whole response."""
    srv = ctx.start("hello")
    for size, keep in ((10, True), (1 << 20, False)):
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        try:
            s.sendall(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % size
                      + b"x" * min(size, 65536))
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
            head = data.split(b"\r\n\r\n")[0].lower()
            check(head.startswith(b"http/1.1 200"), "%d-byte body: %r" % (size, head[:80]))
            check_eq(b"connection: close" not in head, keep,
                     "%d-byte unread body: connection kept" % size)
        finally:
            s.close()
