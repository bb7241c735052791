"""The `pubsub` app refuses browsers of other sites (docs/pubsub.md, "The
built-in endpoint"): a WebSocket handshake, an event stream or a POST whose
Origin is not the request's own (scheme://Host), nor listed in
pubsub.allowed_origins, nor allowed by "*", is answered 403; no Origin (curl,
other programs) is allowed; a malformed origin is a config error at its
FILE:LINE:COLUMN."""

import socket
import subprocess

import lib
from lib import SLOW, build_request, check, check_eq, request, test, write_config


def ws_status(port, origin):
    """The status of a websocket handshake on /room with that Origin (None: none)."""
    h = {"Host": "127.0.0.1:%d" % port, "Upgrade": "websocket", "Connection": "Upgrade",
         "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version": "13"}
    if origin:
        h["Origin"] = origin
    with socket.create_connection(("127.0.0.1", port), timeout=5 * SLOW) as s:
        s.sendall(build_request("GET", "/room", h))
        head = b""
        while b"\r\n" not in head:
            d = s.recv(4096)
            if not d:
                break
            head += d
        return int(head.split(b" ")[1])


def post(port, origin, path="/room"):
    h = {"Host": "127.0.0.1:%d" % port, "Content-Type": "text/plain"}
    if origin:
        h["Origin"] = origin
    return request(port, "POST", path, headers=h, body=b"hello")


@test(timeout=60)
def cross_site_pages_are_refused(ctx):
    srv = ctx.start("pubsub", workers=1)
    own = "http://127.0.0.1:%d" % srv.port
    for origin, want in ((None, 101), (own, 101), ("http://evil.example", 403),
                         ("http://127.0.0.1:1", 403), ("https://127.0.0.1:%d" % srv.port, 403),
                         ("null", 403)):
        check_eq(ws_status(srv.port, origin), want, "websocket, Origin %r" % origin)
    for origin, want in ((None, 202), (own, 202), ("http://evil.example", 403)):
        r = post(srv.port, origin)
        check_eq(r.status, want, "POST, Origin %r" % origin)
        if want == 403:
            check(b"origin" in r.body.lower(), "the 403 says why: %r" % r.body)
    r = request(srv.port, "GET", "/room", headers={
        "Host": "127.0.0.1:%d" % srv.port, "Accept": "text/event-stream",
        "Origin": "http://evil.example"})
    check_eq(r.status, 403, "event stream from another site")


@test(timeout=60)
def allowed_origins_are_configured(ctx):
    srv = ctx.start("pubsub", workers=1, config=(
        "pubsub:\n  allowed_origins: [\"https://App.Example\", \"http://x.example:8080\"]\n"))
    for origin, want in (("https://app.example", 202), ("https://app.example:443", 202),
                         ("http://x.example:8080", 202), ("http://x.example", 403),
                         ("http://127.0.0.1:%d" % srv.port, 202), ("http://evil.example", 403)):
        check_eq(post(srv.port, origin).status, want, "POST, Origin %r" % origin)
    check_eq(ws_status(srv.port, "https://app.example"), 101, "listed websocket origin")
    srv2 = ctx.start("pubsub", workers=1, config="pubsub:\n  allowed_origins: ['*']\n")
    check_eq(post(srv2.port, "http://evil.example").status, 202, "'*' allows any origin")
    check_eq(ws_status(srv2.port, "http://evil.example"), 101, "'*' allows any websocket")


@test(timeout=30)
def malformed_origin_is_a_config_error(ctx):
    cases = [
        ("pubsub:\n  allowed_origins: [\"ftp://x.example\"]\n", ":2:21: invalid origin"),
        ("pubsub:\n  allowed_origins:\n    - https://x.example/app\n", ":3:7: invalid origin"),
        ("pubsub:\n  allowed_origins:\n    - https://x.example:99999\n", ":3:7: invalid origin"),
        ("pubsub:\n  allowed_origins: https://x.example\n", ":2:20: 'pubsub.allowed_origins' must be a list"),
    ]
    for i, (text, want) in enumerate(cases):
        path = write_config(ctx, text, "bad-%d.yaml" % i)
        p = subprocess.run([ctx.pagid, "-t", "-c", path] + lib.root_user_args(),
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=10 * SLOW)
        out = p.stdout.decode()
        check(p.returncode != 0, "pagid -t accepted %r" % text)
        check(path + want in out, "pagid -t on %r said %r, want %r" % (text, out, path + want))
