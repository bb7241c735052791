"""The demo app (pagid's default) over raw sockets: the page is one
self-contained document, /stream is a chunked response of 10 lines 200 ms
apart, /clock is an SSE stream of `event: time` once a second, /ws is a
chat where every message reaches every client, everything else is 404.
Across workers: test_demo_pubsub.py. The browser's view of the same is
test_browser.py."""

import base64
import os
import re
import socket
import struct
import time

from lib import SLOW, Conn, build_request, check, check_eq, request, test
from test_sse import SSEClient


@test()
def is_default_and_page_is_self_contained(ctx):
    srv = ctx.start(app=None)
    r = request(srv.port, "GET", "/")
    check_eq(r.status, 200, "GET / status")
    check(r.header("content-type", "").startswith("text/html"), "content-type %r"
          % r.header("content-type"))
    page = r.body.decode("utf-8")
    check("<title>pagid demo</title>" in page, "not the demo page: %r" % page[:200])
    # Offline: no external scripts, styles, images or fonts.
    refs = re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)""", page)
    check_eq(refs, [], "external resources referenced by the page")
    check("@import" not in page and "url(" not in page, "CSS loads something")
    for needle in ('fetch("/stream"', 'new EventSource("/clock")', '"/ws"'):
        check(needle in page, "the page does not use %s" % needle)
    for path in ("/nope", "/stream/x", "/index.htm"):
        check_eq(request(srv.port, "GET", path).status, 404, "GET %s" % path)
    r = request(srv.port, "GET", "/clock")
    check_eq(r.status, 406, "/clock without Accept: text/event-stream")
    r = request(srv.port, "GET", "/other", headers={"Accept": "text/event-stream"})
    check_eq(r.status, 404, "an event stream elsewhere is declined with 404")


@test()
def stream_lines(ctx):
    srv = ctx.start("demo")
    c = Conn(srv.port)
    c.send(build_request("GET", "/stream", {"Host": "t"}))
    head = c.read_head()
    check_eq(head.status, 200, "status")
    check_eq(head.header("transfer-encoding"), "chunked", "framing")
    t0 = time.monotonic()
    lines, stamps = [], []
    while True:
        size = int(c.read_until(b"\r\n").strip(), 16)
        if size == 0:
            c.read_until(b"\r\n")
            break
        lines.append(c.read_exact(size + 2)[:-2].decode())
        stamps.append(time.monotonic() - t0)
    check_eq(len(lines), 10, "chunks")
    check(all(re.match(r"line %d of 10 at \d\d:\d\d:\d\d\.\d{3} UTC\n$" % (i + 1), l)
              for i, l in enumerate(lines)), "lines: %r" % lines)
    # The server's own timestamps are 200 ms apart; on the client side the
    # lines must spread over time (streamed, not buffered to the end).
    ms = [int(h) * 3600000 + int(m) * 60000 + int(sec) * 1000 + int(f) for h, m, sec, f in
          (re.search(r"(\d\d):(\d\d):(\d\d)\.(\d{3})", l).groups() for l in lines)]
    server_gaps = [b - a for a, b in zip(ms, ms[1:])]
    check(all(150 <= g <= 600 * SLOW for g in server_gaps), "server-side gaps: %r" % server_gaps)
    check(stamps[-1] - stamps[0] >= 1.2, "lines arrived within %.2fs: %r"
          % (stamps[-1] - stamps[0], stamps))
    # Keep-alive: the connection serves the next request.
    c.send(build_request("GET", "/nope", {"Host": "t"}))
    check_eq(c.read_response().status, 404, "next request on the connection")
    c.close()


@test()
def clock_ticks(ctx):
    srv = ctx.start("demo")
    c = SSEClient(srv.port, "/clock")
    head = c.read_head()
    check_eq(head.header("content-type"), "text/event-stream", "content-type")
    c.wait_events(3, timeout=5)
    ev = c.events[:3]
    check(all(e.type == "time" for e in ev), "event types: %r" % ev)
    check(all(re.match(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$", e.data) for e in ev),
          "clock data: %r" % ev)
    check_eq([e.last_event_id for e in ev], ["1", "2", "3"], "ids")
    span = ev[2].t - ev[0].t
    check(1.4 <= span <= 3.5 * SLOW, "3 ticks one second apart spanned %.2fs" % span)
    check_eq(c.parser.retry, 2000, "retry")
    c.close()  # the fd check after the test: the clock stops with its client


class WSClient:
    """A minimal RFC 6455 client: handshake, masked text frames, unmasked reads."""

    def __init__(self, port, path="/ws"):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5 * SLOW)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(build_request("GET", path, {
            "Host": "127.0.0.1:%d" % port, "Upgrade": "websocket", "Connection": "Upgrade",
            "Sec-WebSocket-Key": key, "Sec-WebSocket-Version": "13"}))
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            data = self.sock.recv(4096)
            check(data, "connection closed during the handshake: %r" % self.buf)
            self.buf += data
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        self.status = int(head.split(b" ", 2)[1])

    def send_text(self, text):
        payload = text.encode()
        mask = os.urandom(4)
        n = len(payload)
        hdr = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else
                               bytes([0x80 | 126]) + struct.pack("!H", n))
        self.sock.sendall(hdr + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def _need(self, n):
        while len(self.buf) < n:
            data = self.sock.recv(65536)
            check(data, "connection closed while reading a frame")
            self.buf += data

    def recv(self):
        self._need(2)
        op, n = self.buf[0] & 0x0F, self.buf[1] & 0x7F
        off = 2
        if n == 126:
            self._need(4)
            n, off = struct.unpack("!H", self.buf[2:4])[0], 4
        elif n == 127:
            self._need(10)
            n, off = struct.unpack("!Q", self.buf[2:10])[0], 10
        self._need(off + n)
        payload, self.buf = self.buf[off:off + n], self.buf[off + n:]
        return op, payload

    def close(self):
        self.sock.close()


@test()
def ws_chat_broadcast(ctx):
    srv = ctx.start("demo")
    a, b = WSClient(srv.port), WSClient(srv.port)
    check_eq((a.status, b.status), (101, 101), "handshake statuses")
    time.sleep(0.2 * SLOW)  # both joined the room
    a.send_text("hi from a")
    for name, cl in (("sender", a), ("other client", b)):
        op, payload = cl.recv()
        check_eq(op, 1, "%s: opcode" % name)
        check(payload.endswith(b"hi from a"), "%s got %r" % (name, payload))
    b.send_text("and b")
    check(a.recv()[1].endswith(b"and b"), "a did not get b's message")
    check(b.recv()[1].endswith(b"and b"), "b did not get its own message")
    a.close()
    time.sleep(0.2 * SLOW)
    b.send_text("after a left")
    check(b.recv()[1].endswith(b"after a left"), "the room broke when a client left")
    b.close()
    # Elsewhere a WebSocket is refused.
    c = WSClient(srv.port, "/elsewhere")
    check(c.status >= 400, "WebSocket on /elsewhere: status %d" % c.status)
    c.close()
