"""Interface misuse in a release build (issue 26): the mistakes a new C
developer made (apps/misuseapp.c) are refused with -1 and a message naming
the call, logged once per call, and never make pagid touch freed memory (the
runner checks the ASan build's stderr for sanitizer reports, and that the
server stayed up). Each test drives the app over real sockets: joining a
group twice, answering a group's SSE member, unsubscribing in a release
callback and after it, one pagi_buf_unref too many, a NULL body, a released
scope handle, answering while the body reader runs, a forgotten finish; and
header names go out lower-cased over HTTP/1.1."""

import os
import re
import socket
import subprocess

import lib
from lib import Conn, check, check_eq, request, test, wait_for
from test_attack import ws_connect, ws_read_frame

HERE = os.path.dirname(os.path.abspath(__file__))
INCLUDE = os.environ.get("PAGI_TEST_INCLUDE", os.path.join(lib.REPO, "include"))


def start(ctx, config=None):
    so = os.path.join(ctx.tmpdir, "misuseapp.so")
    cmd = [os.environ.get("CC", "cc"), "-std=c11", "-Wall", "-Wextra", "-Werror", "-shared",
           "-fPIC", "-I", INCLUDE, "-o", so, os.path.join(HERE, "apps", "misuseapp.c")]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    check_eq(p.returncode, 0, "building misuseapp.so: %s" % p.stdout.decode())
    return ctx.start(so, workers=1, config=config)


def body(srv, path, method="GET", data=b""):
    r = request(srv.port, method, path, body=data)
    check_eq(r.status, 200, "%s %s" % (method, path))
    return r.body.decode()


def logged(srv, pattern, timeout=3):
    """The first match of pattern in the server's log (waited for), or a failure."""
    wait_for(lambda: re.search(pattern, srv.stderr()), timeout * lib.SLOW)
    m = re.search(pattern, srv.stderr())
    check(m is not None, "not logged: %r\n--- log:\n%s" % (pattern, srv.stderr()[-3000:]))
    return m


def still_up(srv):
    check_eq(body(srv, "/ok"), "ok", "an ordinary request afterwards")
    check(srv.alive(), "pagid died")


def sse_connect(port, path):
    c = Conn(port)
    c.send(("GET %s HTTP/1.1\r\nHost: t\r\nAccept: text/event-stream\r\n\r\n" % path).encode())
    return c, c.read_head()


@test(timeout=60)
def misuse_group_join_twice_is_refused(ctx):
    srv = start(ctx)
    ws = ws_connect(srv.port, "/ws")
    try:
        wait_for(lambda: "join2=-1" in body(srv, "/state"), 3 * lib.SLOW)
        check("join2=-1 " in body(srv, "/state") and "members=1" in body(srv, "/state"),
              "the second join: %r" % body(srv, "/state"))
        logged(srv, r"pagi_group_join: scope 0x[0-9a-f]+ is already a member of a group")
        # Still the group's member: the next broadcast reaches it.
        check_eq(body(srv, "/broadcast"), "sent=1", "broadcast after the second join")
        check_eq(ws_read_frame(ws), (1, 0x1, b"hello"), "the member's message")
        check_eq(body(srv, "/group-free"), "freed", "freeing the group")
        fin, op, payload = ws_read_frame(ws)
        check_eq((op, payload[:2]), (0x8, b"\x03\xe9"), "the member closed with 1001")
    finally:
        ws.close()
    still_up(srv)


@test(timeout=60)
def misuse_respond_on_sse_member_is_refused(ctx):
    srv = start(ctx)
    c, head = sse_connect(srv.port, "/sse-respond")
    try:
        check_eq(head.status, 200, "the sse member's start")
        check_eq(head.header("access-control-allow-origin"), "*",
                 "pagi_group_join_headers' header on the sse start")
        wait_for(lambda: "respond=-1" in body(srv, "/state"), 3 * lib.SLOW)
        check("respond=-1 " in body(srv, "/state") and "members=1" in body(srv, "/state"),
              "pagi_respond_text on a member: %r" % body(srv, "/state"))
        logged(srv, r"pagi_respond_text: the scope is a member of a group")
        check_eq(body(srv, "/broadcast"), "sent=1", "broadcast after the refused respond")
        check(b"event: news\ndata: hello\n\n" in c.read_until(b"data: hello\n\n"),
              "the member's event")
        check_eq(body(srv, "/group-free"), "freed", "freeing the group")
        c.expect_closed(3 * lib.SLOW)
    finally:
        c.close()
    check_eq(body(srv, "/broadcast"), "sent=0", "the new group is empty")
    still_up(srv)


@test(timeout=60)
def misuse_unsubscribe_in_release_and_after(ctx):
    srv = start(ctx)
    for i in range(3):
        check_eq(body(srv, "/sub-release"), "subscribed=1", "subscribe #%d" % i)
    wait_for(lambda: "release_unsub=3" in body(srv, "/state"), 3 * lib.SLOW)
    check("release_unsub=3" in body(srv, "/state"), "release callbacks: %r" % body(srv, "/state"))
    check("pagi_unsubscribe" not in srv.stderr(), "unsubscribing in the release callback is "
          "documented as a no-op, yet was logged:\n" + srv.stderr()[-2000:])
    # After the release: the handle is stale, refused and logged once per call.
    for _ in range(2):
        check_eq(body(srv, "/sub-stale"), "set_policy=-1", "a released subscription's policy")
    logged(srv, r"pagi_unsubscribe: subscription 0x[0-9a-f]+ was released")
    logged(srv, r"pagi_subscription_set_policy: subscription 0x[0-9a-f]+ was released")
    check_eq(len(re.findall(r"pagi_unsubscribe: subscription", srv.stderr())), 1,
             "lines for the same misuse (logged once per call)")
    still_up(srv)


@test(timeout=60)
def misuse_buf_unref_twice_is_refused(ctx):
    srv = start(ctx)
    for _ in range(3):
        check_eq(body(srv, "/buf-twice"), "send_buf=-1", "pagi_send_buf of a released buffer")
    logged(srv, r"pagi_buf_unref: buffer 0x[0-9a-f]+ was released")
    check_eq(len(re.findall(r"pagi_buf_unref: buffer", srv.stderr())), 1, "logged once per call")
    still_up(srv)


@test(timeout=60)
def misuse_respond_text_null_is_refused(ctx):
    srv = start(ctx)
    check_eq(body(srv, "/respond-null"), "respond_null=-1 err=pagi_respond_text: NULL text",
             "pagi_respond_text(s, 200, NULL)")
    logged(srv, r"pagi_respond_text: NULL text \(http scope, GET /respond-null\)")
    still_up(srv)


@test(timeout=60)
def misuse_released_scope_handle_is_refused(ctx):
    srv = start(ctx)
    check_eq(body(srv, "/keep-scope"), "kept", "/keep-scope")
    # Its release comes from the run queue once the response is written.
    wait_for(lambda: "send=-1" in body(srv, "/stale-scope"), 3 * lib.SLOW)
    check_eq(body(srv, "/stale-scope"), "send=-1 respond=-1 method=[]", "calls on a released scope")
    logged(srv, r"pagi_send: scope 0x[0-9a-f]+ was released")
    logged(srv, r"pagi_respond_text: scope 0x[0-9a-f]+ was released")
    still_up(srv)


@test(timeout=60)
def misuse_respond_while_reading_body_is_refused(ctx):
    srv = start(ctx)
    check_eq(body(srv, "/read-then-respond", "POST", b"abc"), "respond-while-reading=-1 read=3",
             "pagi_respond_text while the body reader runs, then from its callback")
    logged(srv, r"pagi_respond_text: the body reader is still active")
    still_up(srv)


@test(timeout=60)
def misuse_unfinished_scope_is_counted_and_logged(ctx):
    sport = lib.free_port()
    srv = start(ctx, config="status:\n  listen: 127.0.0.1:%d\ntimeouts:\n  shutdown: 1s\n" % sport)
    for _ in range(2):
        check_eq(body(srv, "/unfinished"), "unfinished", "the response of a scope never finished")
    logged(srv, r"the connection of GET /unfinished is done but its app never finished the scope")
    r = request(sport, "GET", "/metrics")
    m = re.search(rb"\npagid_scopes_unfinished_total (\d+)", r.body)
    check(m is not None, "no pagid_scopes_unfinished_total in %r" % r.body[:300])
    check_eq(int(m.group(1)), 2, "pagid_scopes_unfinished_total")
    still_up(srv)
    # The stop names what it waits for.
    srv.stop(timeout=15)
    logged(srv, r"shutdown waits for \d+ request scope\(s\) not yet released, 2 not finished by the "
                r"app \(GET /unfinished, GET /unfinished\)")


@test(timeout=30)
def header_names_go_out_lower_case(ctx):
    srv = start(ctx)
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    try:
        s.sendall(b"GET /upper HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        got = b""
        while b"upper" not in got.partition(b"\r\n\r\n")[2]:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
    finally:
        s.close()
    check(b"\r\nx-upper: Value\r\n" in got, "X-Upper as sent over HTTP/1.1: %r" % got[:300])
