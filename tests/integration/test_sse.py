"""Server-Sent Events (Www.pod "Server-Sent Events"): detection, sse.request,
sse.start's server-supplied headers, sse.send/sse.comment framing and
validation, sse.keepalive timing, sse.close, returning, declining, the
disconnect reasons (client_closed, server_shutdown, idle_timeout,
write_timeout), pagi.transport on an sse scope, sends after a disconnect.

The streams are read with a WHATWG EventSource-style parser (below) over raw
sockets, and once with `curl -N`. Scripted app behaviours come from
apps/sseapp.c, compiled once per session like lifecycle.c."""

import os
import re
import shutil
import signal
import socket
import subprocess
import time

import lib
from lib import (SLOW, TestFailure, app_events, check, check_eq, request, test, wait_event,
                 wait_for)

HERE = os.path.dirname(os.path.abspath(__file__))
ACCEPT_SSE = "text/event-stream"

# ---------------------------------------------------------------------------
# The test module
# ---------------------------------------------------------------------------


def sseapp(ctx):
    """Path of apps/sseapp.c compiled into this session's temp dir."""
    return lib.app_so(ctx, "sseapp")


# ---------------------------------------------------------------------------
# An EventSource-style parser (WHATWG HTML, "Server-sent events", 9.2.6)
# ---------------------------------------------------------------------------


class Event:
    def __init__(self, type, data, last_event_id, t):
        self.type = type
        self.data = data
        self.last_event_id = last_event_id
        self.t = t  # monotonic arrival time

    def __repr__(self):
        return "<Event %s %r id=%r>" % (self.type, self.data, self.last_event_id)


class EventStreamParser:
    """Feed bytes, get dispatched events. Follows the spec's algorithm:
    UTF-8 decode, lines end in CRLF, LF or CR, fields name[: value],
    comments (kept in .comments for the tests; a browser drops them),
    data buffer joined with LF, dispatch on an empty line, id without NUL
    sets the last event id, retry with ASCII digits only."""

    def __init__(self):
        self.pending = b""
        self.first = True
        self.data = ""
        self.type = ""
        self.last_event_id = ""
        self.id_buffer = ""
        self.retry = None
        self.events = []
        self.comments = []  # (text after ':', time)

    def feed(self, data, t=None):
        t = time.monotonic() if t is None else t
        self.pending += data
        while True:
            m = re.search(rb"\r\n|\r|\n", self.pending)
            if not m:
                break
            # A lone CR at the end may be the first half of CRLF: wait for more.
            if m.group() == b"\r" and m.end() == len(self.pending):
                break
            line, self.pending = self.pending[:m.start()], self.pending[m.end():]
            self._line(line.decode("utf-8", "replace"), t)

    def _line(self, line, t):
        if self.first:
            self.first = False
            if line.startswith("\ufeff"):
                line = line[1:]
        if line == "":
            self._dispatch(t)
            return
        if line.startswith(":"):
            self.comments.append((line[1:], t))
            return
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "event":
            self.type = value
        elif name == "data":
            self.data += value + "\n"
        elif name == "id":
            if "\0" not in value:
                self.id_buffer = value
        elif name == "retry":
            if value and value.isascii() and value.isdigit():
                self.retry = int(value)
        # other field names are ignored

    def _dispatch(self, t):
        self.last_event_id = self.id_buffer
        if self.data == "":
            self.type = ""
            return
        data = self.data[:-1] if self.data.endswith("\n") else self.data
        self.events.append(Event(self.type or "message", data, self.last_event_id, t))
        self.data = ""
        self.type = ""


# ---------------------------------------------------------------------------
# A streaming client: raw socket, chunked decoding as bytes arrive
# ---------------------------------------------------------------------------


class SSEClient:
    def __init__(self, port, path, method="GET", body=b"", test_id=None, accept=ACCEPT_SSE,
                 version="1.1", headers=None, rcvbuf=None, timeout=5):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout * SLOW)
        self.sock.connect(("127.0.0.1", port))
        h = {"Host": "127.0.0.1:%d" % port}
        if accept:
            h["Accept"] = accept
        if test_id:
            h["x-test-id"] = test_id
        if body:
            h["Content-Length"] = str(len(body))
        h.update(headers or {})
        self.sock.sendall(lib.build_request(method, path, h, version) + body)
        self.buf = b""
        self.raw = b""  # de-chunked body bytes
        self.parser = EventStreamParser()
        self.head = None
        self.chunked = False
        self.ended = False  # saw the zero-length chunk (or EOF on an unframed body)
        self.eof = False
        self.eof_time = None
        self.end_time = None
        self._chunk_left = None

    # -- low level --
    def _recv(self, timeout):
        self.sock.settimeout(max(0.01, timeout))
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            return False
        except ConnectionResetError:
            data = b""
        if not data:
            self.eof = True
            self.eof_time = time.monotonic()
            if not self.chunked and self.head is not None:
                self.ended = True
                self.end_time = self.eof_time
            return True
        self.buf += data
        return True

    def read_head(self, timeout=5):
        deadline = time.monotonic() + timeout * SLOW
        while b"\r\n\r\n" not in self.buf:
            if self.eof or time.monotonic() > deadline:
                raise TestFailure("no response head (eof=%s, got %r)" % (self.eof, self.buf[:200]))
            self._recv(deadline - time.monotonic())
        i = self.buf.index(b"\r\n\r\n")
        conn = lib.Conn.__new__(lib.Conn)
        conn.buf, conn.eof, conn.sock = self.buf[:i + 4], False, None
        self.head = conn.read_head()
        self.buf = self.buf[i + 4:]
        te = self.head.header("transfer-encoding")
        self.chunked = te is not None and "chunked" in te.lower()
        self._decode()
        return self.head

    def _decode(self):
        now = time.monotonic()
        if not self.chunked:
            if self.buf:
                self.raw += self.buf
                self.parser.feed(self.buf, now)
                self.buf = b""
            return
        while not self.ended:
            if self._chunk_left is None:
                if b"\r\n" not in self.buf:
                    return
                line, self.buf = self.buf.split(b"\r\n", 1)
                size = int(line.split(b";")[0].strip(), 16)
                if size == 0:
                    if not self.buf.startswith(b"\r\n"):
                        if len(self.buf) < 2:
                            self.buf = line + b"\r\n" + self.buf  # wait for the final CRLF
                            return
                        raise TestFailure("trailers after an event stream: %r" % self.buf[:100])
                    self.buf = self.buf[2:]
                    self.ended = True
                    self.end_time = now
                    return
                self._chunk_left = size
            if len(self.buf) < self._chunk_left + 2:
                return
            chunk = self.buf[:self._chunk_left]
            check(self.buf[self._chunk_left:self._chunk_left + 2] == b"\r\n",
                  "chunk not followed by CRLF: %r" % self.buf[:self._chunk_left + 10])
            self.buf = self.buf[self._chunk_left + 2:]
            self._chunk_left = None
            self.raw += chunk
            self.parser.feed(chunk, now)

    def pump(self, timeout):
        """Read for up to timeout seconds (or until the stream ends / EOF)."""
        deadline = time.monotonic() + timeout
        while not self.eof and time.monotonic() < deadline:
            if self._recv(deadline - time.monotonic()):
                self._decode()
            if self.ended and self.chunked:
                break

    # -- what tests use --
    @property
    def events(self):
        return self.parser.events

    def wait_events(self, n, timeout=5):
        deadline = time.monotonic() + timeout * SLOW
        while len(self.events) < n and not self.eof and time.monotonic() < deadline:
            self.pump(min(0.2, max(0.0, deadline - time.monotonic())))
        check(len(self.events) >= n, "expected %d events within %ss, got %r (raw %r)"
              % (n, timeout, self.events, self.raw[-300:]))
        return self.events

    def read_to_end(self, timeout=5):
        """Until the end-of-stream marker; returns the decoded body bytes."""
        deadline = time.monotonic() + timeout * SLOW
        while not self.ended and not self.eof and time.monotonic() < deadline:
            self.pump(deadline - time.monotonic())
        check(self.ended, "stream not terminated within %ss (eof=%s, raw tail %r)"
              % (timeout, self.eof, self.raw[-200:]))
        return self.raw

    def wait_eof(self, timeout=3):
        deadline = time.monotonic() + timeout * SLOW
        while not self.eof and time.monotonic() < deadline:
            if self._recv(deadline - time.monotonic()):
                self._decode()
        check(self.eof, "connection still open %ss after the stream ended" % timeout)
        return self.buf

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def settle(ctx, test_id, timeout=5):
    """The module's log for test_id once the scope was released."""
    check(wait_event(ctx, test_id, "release", timeout),
          "scope %s not released within %ss: %r" % (test_id, timeout, app_events(ctx, test_id)))
    return app_events(ctx, test_id)


def terminal(events):
    """on_complete / on_disconnect lines: exactly one must be there."""
    ends = [e for e in events if e == "on_complete" or e.startswith("on_disconnect")]
    check(len(ends) == 1, "expected exactly one of on_complete / on_disconnect, got %r" % events)
    return ends[0]


def still_serving(port):
    r = request(port, "GET", "/still-serving")
    check_eq(r.status, 200, "a plain request after the test")


# ---------------------------------------------------------------------------
# Detection and sse.request
# ---------------------------------------------------------------------------


@test()
def detection_by_accept_for_any_method(ctx):
    srv = ctx.start(sseapp(ctx))
    cases = [
        ("GET", b"", ACCEPT_SSE, "sse"),
        ("GET", b"", "text/html, text/event-stream;q=0.9", "sse"),
        ("POST", b"{\"q\":1}", ACCEPT_SSE, "sse"),
        ("PUT", b"put-body", ACCEPT_SSE, "sse"),
        ("GET", b"", None, "http"),
        ("GET", b"", "text/html", "http"),
        ("POST", b"plain", "application/json", "http"),
    ]
    for i, (method, body, accept, want) in enumerate(cases):
        tid = "det%d" % i
        c = SSEClient(srv.port, "/type", method=method, body=body, accept=accept, test_id=tid,
                      headers={"Connection": "close"})
        head = c.read_head()
        check_eq(head.status, 200, "%s Accept=%r status" % (method, accept))
        ev = settle(ctx, tid)
        check(ev and ev[0].startswith("handle %s %s /type" % (want, method)),
              "%s with Accept %r: expected a %s scope, module saw %r" % (method, accept, want, ev))
        if want == "http":
            check(not head.header("content-type", "").startswith(ACCEPT_SSE),
                  "plain request answered as an event stream: %r" % head.headers)
        else:
            c.read_to_end()
            check_eq([e.data for e in c.events],
                     ["sse %s %d %s" % (method, len(body), body.decode())],
                     "%s: the body the app received" % method)
        c.close()


@test()
def request_body_events(ctx):
    srv = ctx.start(sseapp(ctx))
    # GET: exactly one empty sse.request with more=0.
    c = SSEClient(srv.port, "/type", test_id="rb-get")
    c.read_head()
    c.read_to_end()
    ev = settle(ctx, "rb-get")
    check_eq([e for e in ev if e.startswith("recv")], ["recv sse.request 0 more=0"],
             "receive events of a GET sse scope")
    # POST: the body arrives (possibly in several events) and adds up.
    body = b"x" * 200000
    c = SSEClient(srv.port, "/type", method="POST", body=body, test_id="rb-post")
    c.read_head()
    c.read_to_end()
    ev = settle(ctx, "rb-post")
    recvs = [e for e in ev if e.startswith("recv")]
    check(recvs and recvs[-1].endswith("more=0"), "last sse.request has more=1: %r" % recvs)
    check(all(r.endswith("more=1") for r in recvs[:-1]), "more=0 before the end: %r" % recvs)
    total = sum(int(r.split()[2]) for r in recvs)
    check_eq(total, len(body), "body bytes delivered through sse.request")
    check(c.events[0].data.startswith("sse POST 200000 xxx"), "event: %r" % c.events[:1])
    # Chunked request body too.
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=5 * SLOW)
    s.sendall(b"POST /type HTTP/1.1\r\nHost: t\r\nAccept: text/event-stream\r\n"
              b"x-test-id: rb-chunked\r\nTransfer-Encoding: chunked\r\n\r\n"
              b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
    ev = settle(ctx, "rb-chunked")
    s.close()
    check(any(e.startswith("finish ok") for e in ev), "chunked POST not served: %r" % ev)
    total = sum(int(r.split()[2]) for r in ev if r.startswith("recv sse.request"))
    check_eq(total, 11, "chunked body bytes")


# ---------------------------------------------------------------------------
# sse.start
# ---------------------------------------------------------------------------


@test()
def start_server_supplied_headers(ctx):
    srv = ctx.start("echo")
    c = SSEClient(srv.port, "/?count=1")
    head = c.read_head()
    check_eq(head.status, 200, "status")
    check_eq(head.header("content-type"), "text/event-stream", "content-type")
    check_eq(head.header("cache-control"), "no-cache", "cache-control")
    check(head.header("date"), "no Date header: %r" % head.headers)
    check_eq(head.header("transfer-encoding"), "chunked", "transfer-encoding on HTTP/1.1")
    check_eq(head.header("content-length"), None, "content-length on an event stream")
    c.read_to_end()
    check_eq(len(c.events), 1, "events")


@test()
def start_connection_keep_alive_header(ctx):
    # Www.pod, "Start SSE": "Over HTTP/1.1 it additionally sends
    # Connection: keep-alive" (proxies must not treat the stream as closable).
    srv = ctx.start("echo")
    c = SSEClient(srv.port, "/?count=1")
    head = c.read_head()
    c.read_to_end()
    check_eq(head.header("connection"), "keep-alive",
             "Connection header of an HTTP/1.1 event stream (Www.pod: sse.start)")


@test()
def start_app_headers_win(ctx):
    srv = ctx.start(sseapp(ctx))
    c = SSEClient(srv.port, "/headers?ct=1&cc=1&xh=1&status=201", test_id="hd1")
    head = c.read_head()
    c.read_to_end()
    check_eq(head.status, 201, "status from sse.start")
    check_eq(head.header_all("content-type"), ["text/event-stream; charset=utf-8"],
             "the app's content-type, alone")
    check_eq(head.header_all("cache-control"), ["no-store"], "the app's cache-control, alone")
    check_eq(head.header("x-app"), "yes", "app header")
    check_eq([e.data for e in c.events], ["hi"], "events")
    # Without headers and without a status: 200 and the server's defaults.
    c = SSEClient(srv.port, "/headers", test_id="hd2")
    head = c.read_head()
    c.read_to_end()
    check_eq(head.status, 200, "default status")
    check_eq(head.header_all("content-type"), ["text/event-stream"], "default content-type")
    check_eq(head.header_all("cache-control"), ["no-cache"], "default cache-control")


@test()
def http10_stream_is_unframed_and_closes(ctx):
    srv = ctx.start("echo")
    c = SSEClient(srv.port, "/?count=2", version="1.0")
    head = c.read_head()
    check_eq(head.header("transfer-encoding"), None, "chunked on HTTP/1.0")
    c.wait_eof(5)
    c._decode()
    check_eq([(e.type, e.data) for e in c.events], [("tick", "1"), ("tick", "2")],
             "events over HTTP/1.0 (delimited by the close)")


# ---------------------------------------------------------------------------
# sse.send / sse.comment framing and validation
# ---------------------------------------------------------------------------


@test()
def send_formatting_exact_bytes(ctx):
    srv = ctx.start(sseapp(ctx))
    c = SSEClient(srv.port, "/format", test_id="fmt")
    c.read_head()
    raw = c.read_to_end()
    expected = (b"event: update\nid: 7\nretry: 1500\ndata: payload\n\n"
                b"data: l1\ndata: l2\ndata: l3\ndata: l4\n\n"
                b"data: \n\n"
                b"data: trailing\ndata: \n\n"
                b"retry: 0\ndata: h\xc3\xa9llo \xe2\x9c\x93\n\n"
                b"event: last\ndata: end\n\n")
    check_eq(raw, expected, "event-stream bytes (rejected sends must write nothing)")
    p = c.parser
    got = [(e.type, e.data, e.last_event_id) for e in p.events]
    check_eq(got, [("update", "payload", "7"),
                   ("message", "l1\nl2\nl3\nl4", "7"),
                   ("message", "", "7"),
                   ("message", "trailing\n", "7"),
                   ("message", "h\u00e9llo \u2713", "7"),
                   ("last", "end", "7")],
             "events as an EventSource sees them (an empty data: line dispatches \"\")")
    check_eq(p.retry, 0, "last retry")


@test()
def send_rejects_newlines_in_event_and_id(ctx):
    srv = ctx.start(sseapp(ctx))
    c = SSEClient(srv.port, "/format", test_id="rej")
    c.read_head()
    c.read_to_end()
    ev = settle(ctx, "rej")
    for what, field in (("event_lf", "event"), ("event_cr", "event"), ("event_crlf", "event"),
                        ("id_lf", "id"), ("id_cr", "id")):
        line = next((e for e in ev if e.split()[:2] in (["rejected", what], ["accepted", what])),
                    None)
        check(line is not None and line.startswith("rejected"),
              "sse.send with a newline in %s (%s) was not rejected: %r" % (field, what, line))
        check(field in line and "newline" in line,
              "the error of %s should name the field and the newline: %r" % (what, line))
    for what in ("retry_negative", "retry_very_negative"):
        line = next((e for e in ev if e.split()[1:2] == [what]), None)
        check(line is not None and line.startswith("rejected") and "retry" in line,
              "negative retry (%s) not rejected with a retry error: %r" % (what, line))
    check(not any(e.startswith("callback_of_rejected_send_ran") for e in ev),
          "a rejected send's callback ran: %r" % ev)
    check(b"forged" not in c.raw and b"must not be written" not in c.raw,
          "a rejected send wrote bytes: %r" % c.raw)


@test()
def comment_formatting_cannot_forge_events(ctx):
    srv = ctx.start(sseapp(ctx))
    c = SSEClient(srv.port, "/comment", test_id="cm")
    c.read_head()
    raw = c.read_to_end()
    expected = (b":hello\n\n"
                b":already\n\n"
                b":two\n:lines\n\n"
                b":evil\n:\n:data: forged\n:\n:event: x\n\n"
                b":\n\n"
                b"data: end\n\n")
    check_eq(raw, expected, "comment bytes")
    check_eq([(e.type, e.data) for e in c.events], [("message", "end")],
             "dispatched events (comments must dispatch nothing)")
    check_eq([t for t, _ in c.parser.comments][:2], ["hello", "already"], "comment texts")


@test()
def curl_reads_echo_ticks(ctx):
    curl = shutil.which("curl")
    check(curl is not None, "curl is not installed (dev.sh installs it)")
    srv = ctx.start("echo")
    t0 = time.monotonic()
    p = subprocess.run([curl, "-sS", "-N", "--max-time", str(10 * SLOW), "-H",
                        "Accept: text/event-stream",
                        "http://127.0.0.1:%d/ticks?count=4&interval=150" % srv.port],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=20 * SLOW)
    elapsed = time.monotonic() - t0
    check_eq(p.returncode, 0, "curl exit status (stderr %r)" % p.stderr[-300:])
    parser = EventStreamParser()
    parser.feed(p.stdout)
    check_eq([(e.type, e.data, e.last_event_id) for e in parser.events],
             [("tick", str(i), str(i)) for i in range(1, 5)], "echo's ticks via curl")
    check(elapsed >= 0.45, "4 ticks 150 ms apart arrived in %.2fs" % elapsed)
    # Declines via echo's ?status.
    p = subprocess.run([curl, "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-H",
                        "Accept: text/event-stream",
                        "http://127.0.0.1:%d/?status=204" % srv.port],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=20 * SLOW)
    check_eq(p.stdout, b"204", "echo's decline status via curl")


@test()
def echo_ticks_timing(ctx):
    srv = ctx.start("echo")
    c = SSEClient(srv.port, "/?count=5&interval=200")
    c.read_head()
    t0 = time.monotonic()
    c.read_to_end(10)
    ev = c.events
    check_eq([(e.type, e.data, e.last_event_id) for e in ev],
             [("tick", str(i), str(i)) for i in range(1, 6)], "echo ticks")
    # Arrival times on a busy machine jitter; the span and the median do not lie.
    gaps = sorted(b.t - a.t for a, b in zip(ev, ev[1:]))
    span = ev[-1].t - ev[0].t
    check(0.6 <= span <= 2.5 * SLOW and 0.12 <= gaps[len(gaps) // 2] <= 0.4 * SLOW,
          "4 gaps of 200 ms: span %.2fs, gaps %r" % (span, gaps))
    check(c.end_time - t0 < 3 * SLOW, "stream took %.1fs" % (c.end_time - t0))
    c.wait_eof(3)


# ---------------------------------------------------------------------------
# sse.keepalive
# ---------------------------------------------------------------------------


def keepalive_stream(ctx, srv, mode, tid):
    c = SSEClient(srv.port, "/keepalive?mode=%s" % mode, test_id=tid)
    c.read_head()
    c.read_to_end(6)
    c.close()
    check_eq(terminal(settle(ctx, tid)), "on_complete", "%s: stream end" % mode)
    return c


@test()
def keepalive_interval_and_comment(ctx):
    srv = ctx.start(sseapp(ctx))
    c = keepalive_stream(ctx, srv, "basic", "ka1")
    pings = [t for text, t in c.parser.comments if text == "ping"]
    check(3 <= len(pings) <= 6, "0.2 s keepalive over 1.1 s: %d comments %r"
          % (len(pings), c.parser.comments))
    check_eq(len(pings), len(c.parser.comments), "only the configured comment text")
    gaps = sorted(b - a for a, b in zip(pings, pings[1:]))
    check(0.12 <= gaps[len(gaps) // 2] <= 0.4 * SLOW, "median keepalive gap: %r" % gaps)
    check_eq([e.data for e in c.events], ["started"], "keepalive comments dispatch no event")
    # The default comment is empty: just ':'.
    c = keepalive_stream(ctx, srv, "empty", "ka2")
    check(len(c.parser.comments) >= 2 and all(t == "" for t, _ in c.parser.comments),
          "empty keepalive comment: %r" % c.parser.comments)
    check(b":\n\n" in c.raw, "':' then a blank line expected in %r" % c.raw)


@test()
def keepalive_last_wins(ctx):
    srv = ctx.start(sseapp(ctx))
    c = keepalive_stream(ctx, srv, "lastwins", "kl")
    texts = [t for t, _ in c.parser.comments]
    check("a" not in texts, "the replaced keepalive (0.1 s, 'a') still ticks: %r" % texts)
    check(2 <= texts.count("b") <= 4, "0.3 s keepalive over 1.1 s: %r" % texts)


@test()
def keepalive_zero_stops(ctx):
    srv = ctx.start(sseapp(ctx))
    c = keepalive_stream(ctx, srv, "stop", "ks")
    stopped = next(e for e in c.events if e.data == "stopped")
    before = [t for text, t in c.parser.comments if t < stopped.t]
    after = [t for text, t in c.parser.comments if t > stopped.t]
    check(len(before) >= 3, "0.1 s keepalive for 0.55 s: %d comments" % len(before))
    check_eq(after, [], "keepalive comments after interval 0 (0.7 s more)")


# ---------------------------------------------------------------------------
# Ending a stream: sse.close, returning
# ---------------------------------------------------------------------------


@test()
def close_ends_stream_now_and_is_idempotent(ctx):
    srv = ctx.start(sseapp(ctx))
    c = SSEClient(srv.port, "/close?delay=1500", test_id="cl")
    c.read_head()
    t0 = time.monotonic()
    c.read_to_end(5)
    c.wait_eof(1)
    elapsed = c.eof_time - t0
    check(elapsed < 1.0 * SLOW,
          "sse.close did not end the stream before the app returned (EOF after %.2fs)" % elapsed)
    check_eq([e.data for e in c.events], ["one"], "events before sse.close")
    check(not wait_event(ctx, "cl", "finish", 0.3), "the app returned early: %r"
          % app_events(ctx, "cl"))
    ev = settle(ctx, "cl", 5)
    check("close1 rc=0" in ev, "sse.close rejected: %r" % ev)
    check("close2 rc=0" in ev, "a second sse.close must be ignored (rc 0): %r" % ev)
    for what in ("after_close_send", "after_close_comment", "after_close_keepalive",
                 "after_close_decline"):
        line = next((e for e in ev if e.split()[1:2] == [what]), None)
        check(line is not None and line.startswith("rejected"),
              "%s after sse.close must raise: %r" % (what, line))
    check(not any(e.startswith("callback_of_rejected_send_ran") for e in ev),
          "a rejected send's callback ran: %r" % ev)
    check_eq(terminal(ev), "on_complete", "sse.close is a normal end")
    still_serving(srv.port)


@test()
def return_ends_stream_like_close(ctx):
    srv = ctx.start(sseapp(ctx))
    c = SSEClient(srv.port, "/type", test_id="ret")
    c.read_head()
    raw = c.read_to_end()
    check(raw.endswith(b"\n\n"), "last event incomplete: %r" % raw)
    check(c.chunked and c.ended, "no chunked terminator after returning")
    c.wait_eof(2)  # an event-stream client reconnects on a new connection
    check_eq(terminal(settle(ctx, "ret")), "on_complete", "returning is a normal end")


# ---------------------------------------------------------------------------
# Declining
# ---------------------------------------------------------------------------


@test()
def decline_with_http_response(ctx):
    srv = ctx.start(sseapp(ctx))
    c = lib.Conn(srv.port)
    c.send(lib.build_request("GET", "/decline?status=401", {
        "Host": "t", "Accept": ACCEPT_SSE, "x-test-id": "dc"}))
    r = c.read_response()
    check_eq(r.status, 401, "decline status")
    check_eq(r.body, b"Unauthorized", "decline body (two sse.http.response.body events)")
    check_eq(r.header("www-authenticate"), "Bearer", "decline header")
    check_eq(r.header("content-type"), "text/plain", "decline content-type")
    check_eq(r.header("cache-control"), None, "event-stream headers on a decline")
    c.expect_closed(3)  # the spec: the server closes the connection after a decline
    ev = settle(ctx, "dc")
    for what in ("after_decline_send", "after_decline_comment", "after_decline_keepalive",
                 "after_decline_start", "after_decline_close"):
        line = next((e for e in ev if e.split()[1:2] == [what]), None)
        check(line is not None and line.startswith("rejected"),
              "%s after sse.http.response.start must raise: %r" % (what, line))
    check(not any(e.startswith("recv sse.disconnect") for e in ev),
          "sse.disconnect delivered after a decline: %r" % ev)
    check_eq(terminal(ev), "on_complete", "a delivered decline is a normal end")
    # 204 via echo: an EventSource stops reconnecting.
    r = request(srv.port, "GET", "/decline?status=204", headers={"Accept": ACCEPT_SSE})
    check_eq(r.status, 204, "204 decline")
    check_eq(r.body, b"", "204 carries no body")


@test()
def decline_after_start_raises(ctx):
    srv = ctx.start(sseapp(ctx))
    c = SSEClient(srv.port, "/start-then-decline", test_id="sd")
    head = c.read_head()
    c.read_to_end()
    check_eq(head.status, 200, "the stream's status")
    check_eq([e.data for e in c.events], ["ok"], "events")
    ev = settle(ctx, "sd")
    for what in ("decline_after_start", "decline_body_after_start", "second_start"):
        line = next((e for e in ev if e.split()[1:2] == [what]), None)
        check(line is not None and line.startswith("rejected"),
              "%s must raise after sse.start: %r" % (what, line))
    check(b"403" not in c.raw and b"HTTP/1.1" not in c.raw, "decline bytes in the stream")


# ---------------------------------------------------------------------------
# Disconnects
# ---------------------------------------------------------------------------


def check_disconnect(ev, reason):
    check(("recv sse.disconnect %s" % reason) in ev,
          "expected sse.disconnect %s, module saw %r" % (reason, ev))
    check_eq(terminal(ev), "on_disconnect %s" % reason, "pagi.connection end")
    check(("connected=0 reason=%s" % reason) in ev, "is_connected/disconnect_reason: %r" % ev)
    # The spec: a send after disconnect is a no-op that completes.
    check("late_send rc=0" in ev and "late_cb ok" in ev,
          "a send after the disconnect must be a completed no-op: %r" % ev)
    od = ev.index(next(e for e in ev if e.startswith("on_disconnect")))
    rd = ev.index("recv sse.disconnect %s" % reason)
    check(od < rd, "on_disconnect must run before sse.disconnect is delivered: %r" % ev)


@test()
def disconnect_client_closed(ctx):
    srv = ctx.start(sseapp(ctx))
    for i, how in enumerate(("close", "reset")):
        tid = "cc%d" % i
        c = SSEClient(srv.port, "/wait", test_id=tid)
        c.read_head()
        c.wait_events(1)
        if how == "reset":
            lib.Conn.reset(c)
        else:
            c.close()
        ev = settle(ctx, tid)
        if how == "close":
            check_disconnect(ev, "client_closed")
        else:
            check(any(e.startswith("recv sse.disconnect") for e in ev),
                  "no sse.disconnect after a reset: %r" % ev)
    still_serving(srv.port)


@test()
def disconnect_server_shutdown(ctx):
    srv = ctx.start(sseapp(ctx), config="timeouts:\n  shutdown: 1s\n")
    c = SSEClient(srv.port, "/wait", test_id="sh")
    c.read_head()
    c.wait_events(1)
    t0 = time.monotonic()
    srv.signal(signal.SIGTERM)
    c.pump(4 * SLOW)
    check(c.eof, "stream still open 4s after SIGTERM with shutdown: 1s")
    check(c.eof_time - t0 >= 0.5, "stream cut at once (%.2fs), not after the shutdown timeout"
          % (c.eof_time - t0))
    check(srv.wait_exit(5), "pagid did not exit after SIGTERM")
    check_eq(srv.returncode, 0, "exit status")
    ev = app_events(ctx, "sh")
    check_disconnect(ev, "server_shutdown")
    check("release" in ev, "scope not released before exit: %r" % ev)


@test()
def idle_timeout_closes_silent_stream(ctx):
    srv = ctx.start(sseapp(ctx), config="timeouts:\n  sse_idle: 1s\n")
    # A stream that keeps sending is not idle...
    k = SSEClient(srv.port, "/keepalive?mode=basic", test_id="busy")
    k.read_head()
    # ...one that sends nothing is closed after about 1 s.
    c = SSEClient(srv.port, "/wait", test_id="idle")
    c.read_head()
    c.wait_events(1)
    t0 = time.monotonic()
    c.pump(4 * SLOW)
    check(c.eof, "silent stream still open after 4s with sse_idle: 1s")
    check(0.6 <= c.eof_time - t0 <= 2.5 * SLOW, "idle close after %.2fs" % (c.eof_time - t0))
    check_disconnect(settle(ctx, "idle"), "idle_timeout")
    k.read_to_end(5)
    check_eq(terminal(settle(ctx, "busy")), "on_complete",
             "a stream sending keepalives every 0.2 s is not idle")


@test()
def backpressure_transport_and_write_timeout(ctx):
    srv = ctx.start(sseapp(ctx), config="timeouts:\n  write: 2s\n"
                    "flow_control:\n  high_watermark: 64k\n  low_watermark: 16k\n")
    c = SSEClient(srv.port, "/flood?size=16384", test_id="bp", rcvbuf=4096)
    # The client never reads past this point.
    check(wait_event(ctx, "bp", "high_water", 5), "no high_water: %r" % app_events(ctx, "bp")[-5:])
    ev = app_events(ctx, "bp")
    check("transport buffered=0 high=65536 low=16384" in ev,
          "pagi.transport on an sse scope before the start: %r" % ev[:4])
    hw = next(e for e in ev if e.startswith("high_water"))
    check(int(hw.split()[1]) >= 65536, "high_water below the mark: %r" % hw)
    # Completions stop while the buffer is full.
    time.sleep(0.3)
    n1 = sum(1 for e in app_events(ctx, "bp") if e.startswith("send_done"))
    time.sleep(0.8)
    n2 = sum(1 for e in app_events(ctx, "bp") if e.startswith("send_done"))
    check_eq(n2, n1, "send completions while the client reads nothing")
    check(wait_event(ctx, "bp", "on_disconnect", 6), "no write_timeout: %r"
          % app_events(ctx, "bp")[-5:])
    ev = settle(ctx, "bp")
    c.close()
    check_eq(terminal(ev), "on_disconnect write_timeout", "disconnect reason")
    check(any(e.startswith("stopped") for e in ev), "the parked send was not settled: %r"
          % ev[-6:])
    check("late_send rc=0" in ev and "late_cb ok" in ev,
          "a send after the write timeout must be a completed no-op: %r" % ev[-6:])
    still_serving(srv.port)


@test()
def many_streams_then_fds_back(ctx):
    srv = ctx.start("echo")
    clients = []
    for i in range(50):
        c = SSEClient(srv.port, "/?count=1000&interval=50")
        clients.append(c)
    for c in clients:
        c.read_head()
        c.wait_events(2)
    for i, c in enumerate(clients):
        lib.Conn.reset(c) if i % 2 else c.close()
    # ctx.finish checks the fd count returns to the idle baseline.
    still_serving(srv.port)


# ---------------------------------------------------------------------------
# Order, backstop, errors, workers
# ---------------------------------------------------------------------------


@test()
def stream_events_before_start_raise(ctx):
    srv = ctx.start(sseapp(ctx))
    c = SSEClient(srv.port, "/early", test_id="early")
    head = c.read_head()
    raw = c.read_to_end()
    check_eq(head.status, 200, "the stream after the rejected events")
    check_eq(raw, b"data: ok\n\n", "stream bytes (rejected events write nothing)")
    ev = settle(ctx, "early")
    for what in ("send_before_start", "comment_before_start", "close_before_start",
                 "decline_body_before_decline_start", "http_start_on_sse_scope",
                 "websocket_send_on_sse_scope"):
        line = next((e for e in ev if e.split()[1:2] == [what]), None)
        check(line is not None and line.startswith("rejected"), "%s must raise: %r"
              % (what, line))
    check(not any(e.startswith("callback_of_rejected_send_ran") for e in ev),
          "a rejected send's callback ran: %r" % ev)


@test()
def finish_without_start_gets_500_backstop(ctx):
    srv = ctx.start(sseapp(ctx))
    c = lib.Conn(srv.port)
    c.send(lib.build_request("GET", "/finish-before", {
        "Host": "t", "Accept": ACCEPT_SSE, "x-test-id": "fb"}))
    r = c.read_response()
    check_eq(r.status, 500, "an sse app that returns without sse.start")
    c.expect_closed(3)
    ev = settle(ctx, "fb")
    check_eq(terminal(ev), "on_disconnect server_error", "the backstop's end")
    still_serving(srv.port)


@test()
def app_error_after_start_ends_stream(ctx):
    srv = ctx.start(sseapp(ctx))
    c = SSEClient(srv.port, "/error-after", test_id="ea")
    c.read_head()
    c.pump(3 * SLOW)
    check_eq([e.data for e in c.events], ["partial"], "events sent before the failure")
    check(c.ended or c.eof, "the stream stays open after the app failed")
    check(any("boom" in line for line in srv.stderr().splitlines()),
          "the app's error is not logged: %r" % srv.stderr()[-500:])
    settle(ctx, "ea")
    still_serving(srv.port)


@test()
def streams_under_master_with_two_workers(ctx):
    srv = ctx.start("echo", workers=2)
    clients = [SSEClient(srv.port, "/?count=3&interval=100") for _ in range(6)]
    for c in clients:
        c.read_head()
        c.read_to_end(5)
        check_eq([e.data for e in c.events], ["1", "2", "3"], "ticks through a worker")
        c.close()


@test()
def websocket_upgrade_is_not_sse(ctx):
    # Detection rule 2: a request upgraded to WebSocket is not an sse scope,
    # even when it also accepts text/event-stream.
    srv = ctx.start("echo")
    c = lib.Conn(srv.port)
    c.send(lib.build_request("GET", "/?count=1", {
        "Host": "t", "Accept": ACCEPT_SSE, "Upgrade": "websocket", "Connection": "Upgrade",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version": "13"}))
    head = c.read_head()
    check_eq(head.status, 101, "an upgrade that also accepts an event stream")
    check_eq(head.header("sec-websocket-accept"), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", "accept key")
    c.close()


@test()
def backpressure_drain_resumes_completions(ctx):
    srv = ctx.start(sseapp(ctx), config="flow_control:\n  high_watermark: 64k\n"
                    "  low_watermark: 16k\n")
    c = SSEClient(srv.port, "/flood?size=16384", test_id="dr", rcvbuf=4096)
    check(wait_event(ctx, "dr", "high_water", 5), "no high_water: %r" % app_events(ctx, "dr")[-5:])
    time.sleep(0.5)
    n_paused = sum(1 for e in app_events(ctx, "dr") if e.startswith("send_done"))
    # Now read: the buffer drains below the low mark, completions resume.
    c.sock.settimeout(5 * SLOW)
    got, deadline = 0, time.monotonic() + 5 * SLOW
    while got < 4 << 20 and time.monotonic() < deadline:
        data = c.sock.recv(1 << 16)
        check(data, "stream closed while draining")
        got += len(data)
    ev = app_events(ctx, "dr")
    n_after = sum(1 for e in ev if e.startswith("send_done"))
    check(n_after > n_paused + 50, "completions did not resume after reading %d bytes: %d -> %d"
          % (got, n_paused, n_after))
    marks = [e.split()[0] for e in ev if e.startswith(("high_water", "drain"))]
    check(marks[:2] == ["high_water", "drain"], "watermark callbacks: %r" % marks[:6])
    check(all(a != b for a, b in zip(marks, marks[1:])), "no hysteresis: %r" % marks[:20])
    c.close()
    ev = settle(ctx, "dr")
    # Closing with unread bytes makes the kernel answer the server's next
    # write with a reset: either word describes what happened.
    check(terminal(ev) in ("on_disconnect client_closed", "on_disconnect write_error"),
          "end after the client left: %r" % terminal(ev))
    still_serving(srv.port)
