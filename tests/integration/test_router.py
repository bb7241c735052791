"""pagi_router(3), the path router of pagi_easy.h (ABI 2.5), in a real
module (apps/routerapp.c) served at the root and mounted under /api in the
same pagid: routes match below the mount point (root_path), named and
wildcard values arrive decoded with %2F kept inside a segment, 404 and 405
with an allow header (HEAD where GET is), an SSE route and a WebSocket
route, over HTTP/1.1 from lib.request, curl and raw WebSocket clients, and
over h2c from curl."""

import subprocess

import lib
from lib import SLOW, check, check_eq, request, test
from test_sse import SSEClient
from test_websocket import RawWS

CONFIG = """app: %(so)s
mounts:
  - path: /api
    app: %(so)s
"""


def start(ctx):
    so = lib.app_so(ctx, "routerapp")
    return ctx.start(app=None, config=CONFIG % {"so": so}, workers=1)


def body(port, method, path, headers=None):
    r = request(port, method, path, headers=headers)
    return r.status, r.body


@test(timeout=120)
def routes_match_below_the_mount_point(ctx):
    srv = start(ctx)
    p = srv.port
    for root in ("", "/api"):
        check_eq(body(p, "GET", root + "/polls/7"), (200, b"poll 7 root=%s\n" % root.encode()),
                 "a named segment under %r" % root)
        check_eq(body(p, "DELETE", root + "/polls/7"),
                 (200, b"delete 7 root=%s\n" % root.encode()), "DELETE under %r" % root)
        check_eq(body(p, "POST", root + "/polls/7/vote/yes"),
                 (200, b"vote 7 yes root=%s\n" % root.encode()), "two named segments")
        check_eq(body(p, "GET", root + "/files/a/b%20c.txt"),
                 (200, b"file a/b c.txt root=%s\n" % root.encode()), "a wildcard, decoded")
        check_eq(body(p, "GET", root + "/polls/a%2Fb"),
                 (200, b"poll a/b root=%s\n" % root.encode()), "%2F inside a segment")
        check_eq(body(p, "GET", root + "/polls/a/b")[0], 404, "a/b: two segments")
        check_eq(body(p, "GET", root + "/polls/7/")[0], 404, "a trailing slash is significant")
        check_eq(body(p, "GET", root + "/nothing")[0], 404, "no route")
    # The mount point itself is the mounted app's "/".
    check_eq(body(p, "GET", "/api"), (200, b"root root=/api\n"), "the mount point")
    check_eq(body(p, "GET", "/api/"), (200, b"root root=/api\n"), "the mount point and '/'")
    check_eq(body(p, "GET", "/"), (200, b"root root=\n"), "the top-level app's /")
    # Not a mount: "/apix" is the top-level app's, which has no such route.
    check_eq(body(p, "GET", "/apix/polls/1")[0], 404, "/apix is not under /api")


@test(timeout=120)
def hostile_paths_reach_routes_as_the_manual_says(ctx):
    """What pagi_router(3) promises an app about values it did not expect:
    pagid does not normalise the path, so a wildcard's value may begin with
    '/' (an empty segment, or a %2F) and may climb with '..'; an empty
    segment never fills a named one; the separator that ends the mount point
    is matched decoded (the mount sees /api%2Fpolls as /api/polls), while
    every %2F after it is data; odd percent-encodings are kept as sent."""
    srv = start(ctx)
    p = srv.port
    for root in ("", "/api"):
        for path, want in (("/files//etc/passwd", b"file /etc/passwd"),
                           ("/files/%2Fetc/passwd", b"file /etc/passwd"),
                           ("/files/../../etc/passwd", b"file ../../etc/passwd"),
                           ("/polls/..", b"poll .."),
                           ("/polls/%", b"poll %"), ("/polls/%2", b"poll %2"),
                           ("/polls/%zz", b"poll %zz"), ("/polls/%252F", b"poll %2F")):
            check_eq(body(p, "GET", root + path),
                     (200, want + b" root=%s\n" % root.encode()), "GET %s%s" % (root, path))
        for path in ("//polls/1", "/polls//", "/polls/./1/", "/polls/../polls/1"):
            check_eq(body(p, "GET", root + path)[0], 404, "GET %s%s" % (root, path))
    check_eq(body(p, "GET", "/api%2Fpolls/1"), (200, b"poll 1 root=/api\n"),
             "%2F ending the mount point")
    check_eq(body(p, "GET", "/api%2Fpolls%2F1")[0], 404, "%2F after the mount point is data")
    check_eq(body(p, "GET", "/api/" + "x/" * 40)[0], 404, "more segments than any pattern")
    check_eq(body(p, "GET", "/api/files/" + "x/" * 40),
             (200, b"file " + b"x/" * 40 + b" root=/api\n"), "a wildcard past 32 segments")


@test(timeout=120)
def method_not_allowed_names_the_methods(ctx):
    srv = start(ctx)
    r = request(srv.port, "PUT", "/api/polls/7")
    check_eq(r.status, 405, "PUT on a GET/DELETE route")
    check_eq(r.header("allow"), "GET, DELETE, HEAD", "allow")
    check_eq(r.body, b"method not allowed\n", "405 body")
    r = request(srv.port, "HEAD", "/api/polls/7")
    check_eq((r.status, r.body, r.header("content-length")),
             (200, b"", str(len(b"poll 7 root=/api\n"))), "HEAD served by the GET route")
    r = request(srv.port, "GET", "/api/polls/7/vote/yes")
    check_eq((r.status, r.header("allow")), (405, "POST"), "GET on a POST route")
    # curl, as a client sees it.
    out = subprocess.run(["curl", "-sS", "-i", "-X", "PATCH", "--max-time", str(int(20 * SLOW)),
                          "http://127.0.0.1:%d/polls/1" % srv.port],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60 * SLOW)
    text = out.stdout.decode("latin-1").lower()
    check(text.startswith("http/1.1 405") and "\r\nallow: get, delete, head\r\n" in text,
          "curl -X PATCH: %r" % text[:300])


@test(timeout=120)
def sse_and_websocket_routes(ctx):
    srv = start(ctx)
    p = srv.port
    for root in ("", "/api"):
        c = SSEClient(p, root + "/feed")
        c.read_head()
        check_eq(c.head.status, 200, "sse status under %r" % root)
        ev = c.wait_events(1)[0]
        check_eq((ev.type, ev.data), ("feed", "feed root=%s" % root), "the SSE route's event")
        c.close()
        ws = RawWS(p, root + "/ws/lobby")
        check_eq(ws.recv_message(), (0x1, b"room lobby root=%s" % root.encode()),
                 "the WebSocket route")
        ws.send_frame(0x1, "hello")
        check_eq(ws.recv_message(), (0x1, b"hello"), "echo")
        ws.send_close(1000)
        ws.expect_close(1000)
        ws.close()
    # An sse request where only http routes match is routed as its GET.
    c = SSEClient(p, "/api/polls/3")
    c.read_head()
    check_eq(c.head.status, 200, "sse to a GET route: declined with the GET route's answer")
    c.close()
    # A websocket with no WEBSOCKET route: 404 through websocket.http.response.
    ws = RawWS(p, "/api/polls/3", handshake=False)
    check_eq(ws.handshake("/api/polls/3", expect=None), 404, "websocket to an http route")
    ws.close()
    ws = RawWS(p, "/api/ws", handshake=False)
    check_eq(ws.handshake("/api/ws", expect=None), 404, "websocket without its :room")
    ws.close()


@test(timeout=120)
def routes_over_h2c(ctx):
    """HTTP/2 hands the raw and decoded paths in separate buffers: the
    same routes, values and 405."""
    port = lib.free_port()
    so = lib.app_so(ctx, "routerapp")
    srv = ctx.start(app=None, workers=1, listen=False, port=port, config=(
        CONFIG % {"so": so}) + "listen:\n  - {address: 127.0.0.1:%d, http2: prior-knowledge}\n"
        % port)

    def curl(method, path):
        p = subprocess.run(["curl", "-sS", "-i", "--http2-prior-knowledge", "-X", method,
                            "--max-time", str(int(20 * SLOW)),
                            "http://127.0.0.1:%d%s" % (srv.port, path)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60 * SLOW)
        return p.stdout.decode("latin-1")

    out = curl("GET", "/api/polls/a%2Fb")
    check(out.startswith("HTTP/2 200") and out.endswith("\r\n\r\npoll a/b root=/api\n"),
          "GET over h2c: %r" % out[-300:])
    out = curl("GET", "/files/x/y%20z")
    check(out.endswith("\r\n\r\nfile x/y z root=\n"), "a wildcard over h2c: %r" % out[-300:])
    out = curl("PUT", "/api/polls/7").lower()
    check(out.startswith("http/2 405") and "\r\nallow: get, delete, head\r\n" in out,
          "405 over h2c: %r" % out[:300])


@test(timeout=120)
def what_pagi_router_3_says_of_methods(ctx):
    """The method rules pagi_router(3) states: an SSE route takes an sse
    scope of any method (a POST with Accept: text/event-stream streams), a
    declined stream closes its HTTP/1.1 connection, and a request whose
    method is in lower case never reaches a route (400)."""
    srv = start(ctx)
    p = srv.port
    c = SSEClient(p, "/api/feed", method="POST", body=b"x=1")
    c.read_head()
    check_eq((c.head.status, (c.head.header("content-type") or "").split(";")[0]),
             (200, "text/event-stream"), "POST with Accept: text/event-stream to an SSE route")
    ev = c.wait_events(1)[0]
    check_eq((ev.type, ev.data), ("feed", "feed root=/api"), "the SSE route's event")
    c.close()
    # Declined: answered by the GET route, then the connection closes.
    c = SSEClient(p, "/api/polls/3", headers={"Connection": "keep-alive"})
    c.read_head()
    check_eq((c.head.status, (c.head.header("connection") or "").lower()), (200, "close"),
             "a declined stream's connection header")
    c.close()
    # A plain GET on the same path keeps its connection.
    conn = lib.Conn(p)
    conn.send(lib.build_request("GET", "/api/polls/3", {"Host": "x"}, "1.1"))
    r = conn.read_response("GET")
    check_eq((r.status, r.header("connection")), (200, None), "a plain GET keeps alive")
    conn.close()
    check_eq(body(p, "get", "/api/polls/3")[0], 400, "a lower-case method")
