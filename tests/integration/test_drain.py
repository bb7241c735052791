"""The drain notice (issue 12): when a worker starts draining (stop, reload,
max_requests), long-lived scopes hear of it (pagi_scope_on_server_drain) and
end at once: the echo and demo apps close WebSockets with 1001 and end SSE
streams, while ordinary in-flight requests still complete. Also
pagi_receive_cancel and the order of releases and lifespan shutdown."""

import base64
import os
import signal
import socket
import struct
import time

import lib
from lib import SLOW, Conn, app_events, check, check_eq, test, wait_event, wait_for

# A long shutdown deadline: the worker must exit long before it.
LONG_SHUTDOWN = "timeouts:\n  shutdown: 30\n"


class WS:
    """A minimal WebSocket client (masked frames, answers the close)."""

    def __init__(self, port, path="/ws", timeout=5):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout * SLOW)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(("GET %s HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\n"
                           "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n" % (path, key)).encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        check(head.startswith(b"HTTP/1.1 101"), "handshake: %r" % head[:80])

    def _fill(self):
        d = self.sock.recv(65536)
        if not d:
            raise lib.Closed()
        self.buf += d

    def _take(self, n):
        while len(self.buf) < n:
            self._fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def send(self, opcode, payload):
        mask = os.urandom(4)
        body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(struct.pack("!BB", 0x80 | opcode, 0x80 | len(payload)) + mask + body)

    def recv(self):
        """(opcode, payload) of the next frame."""
        b0, b1 = self._take(2)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", self._take(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", self._take(8))[0]
        return b0 & 0x0F, self._take(n)

    def expect_close(self):
        """Wait for the server's close frame, answer it; returns (code, reason)."""
        while True:
            op, payload = self.recv()
            if op == 0x8:
                self.send(0x8, payload[:2])
                return struct.unpack("!H", payload[:2])[0], payload[2:].decode()

    def at_eof(self, timeout):
        self.sock.settimeout(timeout * SLOW)
        try:
            while self.sock.recv(65536):
                pass
            return True
        except (socket.timeout, ConnectionResetError):
            return False

    def close(self):
        self.sock.close()


def echo_roundtrip(ws):
    ws.send(0x1, b"hi")
    check_eq(ws.recv(), (0x1, b"hi"), "echoed message")


@test(timeout=60)
def ws_gets_1001_on_stop_while_http_drains(ctx):
    srv = ctx.start("echo", workers=1, config=LONG_SHUTDOWN)
    ws = WS(srv.port)
    echo_roundtrip(ws)
    # A slow upload in flight: half its body now, the rest after the stop.
    up = Conn(srv.port, timeout=10)
    up.send("POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabcde")
    time.sleep(0.2)
    t0 = time.monotonic()
    srv.signal(signal.SIGTERM)
    code, reason = ws.expect_close()
    took = time.monotonic() - t0
    check_eq(code, 1001, "close code after SIGTERM")
    check_eq(reason, "server shutting down", "close reason")
    check(took < 1.0 * SLOW, "the 1001 close came %.2f s after SIGTERM (want < 1 s)" % took)
    check(ws.at_eof(5), "the server did not close the WebSocket after the close handshake")
    ws.close()
    # The upload is not cut: it completes 1.5 s into the drain.
    time.sleep(1.5)
    check(srv.alive(), "pagid exited with an upload in flight")
    up.send("fghij")
    r = up.read_response("POST")
    check_eq(r.status, 200, "status of the upload that spanned the stop")
    check_eq(r.body, b"abcdefghij", "echoed upload")
    up.close()
    check(srv.wait_exit(10), "pagid still running 10 s after its last client left")
    took = time.monotonic() - t0
    check_eq(srv.returncode, 0, "exit status")
    check(took < 15 * SLOW, "stop took %.1f s: it waited for timeouts.shutdown (30 s)" % took)


@test(timeout=60)
def ws_gets_1001_on_reload(ctx):
    srv = ctx.start("echo", workers=1, config=LONG_SHUTDOWN)
    check(wait_for(lambda: len(srv.workers()) == 1, 10), "workers: %r" % srv.workers())
    old = srv.workers()
    ws = WS(srv.port)
    echo_roundtrip(ws)
    t0 = time.monotonic()
    srv.signal(signal.SIGHUP)
    code, _ = ws.expect_close()
    took = time.monotonic() - t0
    check_eq(code, 1001, "close code after SIGHUP")
    check(took < 10 * SLOW, "the 1001 close came %.1f s after SIGHUP" % took)
    ws.close()
    # The old worker goes without waiting for timeouts.shutdown; the new one serves.
    check(wait_for(lambda: not any(lib.pid_alive(p) for p in old), 10),
          "the old generation's worker %r still runs" % old)
    ws2 = WS(srv.port)
    echo_roundtrip(ws2)
    ws2.close()
    check(all(p not in old for p in srv.workers()), "workers %r after the reload" % srv.workers())


@test(timeout=60)
def demo_clock_and_chat_end_on_stop(ctx):
    srv = ctx.start("demo", workers=1, config=LONG_SHUTDOWN)
    ws = WS(srv.port, "/ws")
    clock = Conn(srv.port, timeout=10)
    clock.send("GET /clock HTTP/1.1\r\nHost: t\r\nAccept: text/event-stream\r\n\r\n")
    clock.read_until(b"event: time")
    t0 = time.monotonic()
    srv.signal(signal.SIGTERM)
    code, _ = ws.expect_close()
    check_eq(code, 1001, "demo /ws close code after SIGTERM")
    ws.close()
    # The stream's last event, then its end (chunked terminator, then close).
    rest = clock.read_until(b"0\r\n\r\n")
    took = time.monotonic() - t0
    check(b"event: shutdown" in rest and b"data: server shutting down" in rest,
          "no final shutdown event in %r" % rest[-200:])
    check(took < 3 * SLOW, "the clock ended %.1f s after SIGTERM" % took)
    clock.close()
    check(srv.wait_exit(10), "pagid still running after its streams ended")
    check_eq(srv.returncode, 0, "exit status")
    check(time.monotonic() - t0 < 12 * SLOW, "stop waited for timeouts.shutdown")


@test(timeout=60)
def long_poll_drains_and_releases_before_lifespan_shutdown(ctx):
    # An http scope gets the notice too; it cancels its pending receive and
    # answers. Every scope is released before lifespan.shutdown is delivered.
    srv = ctx.start("lifecycle", workers=1, config=LONG_SHUTDOWN)
    check(wait_event(ctx, "lifespan", "lifespan startup", 5), "no lifespan startup")
    c = Conn(srv.port, timeout=10)
    c.send("GET /long-poll HTTP/1.1\r\nHost: t\r\nx-test-id: lp\r\n\r\n")
    check(wait_event(ctx, "lp", "recv http.request", 5), "long poll not started: %r"
          % app_events(ctx, "lp"))
    t0 = time.monotonic()
    srv.signal(signal.SIGTERM)
    r = c.read_response()
    check_eq(r.status, 200, "long poll status")
    check_eq(r.body, b"drained", "long poll body")
    check(time.monotonic() - t0 < 3 * SLOW, "long poll answered late")
    c.close()
    check(srv.wait_exit(10), "pagid still running")
    check_eq(srv.returncode, 0, "exit status")
    ev = app_events(ctx, "lp")
    check("draining=0" in ev, "draining before the stop: %r" % ev)
    check("server_drain draining=1" in ev, "no drain notice: %r" % ev)
    check_eq([e for e in ev if e.startswith("receive_cancel")],
             ["receive_cancel 0", "receive_cancel -1"], "receive_cancel results")
    check(not any(e.startswith("recv http.disconnect") for e in ev),
          "the cancelled receive's callback ran: %r" % ev)
    with open(ctx.app_log) as f:
        lines = [ln.strip() for ln in f]
    i_rel = lines.index("lp release")
    i_shut = lines.index("lifespan lifespan shutdown")
    check(i_rel < i_shut, "lifespan shutdown before the scope's release: %r" % lines)


@test(timeout=60)
def echo_sse_ends_on_drain_when_asked(ctx):
    srv = ctx.start("echo", workers=1, config=LONG_SHUTDOWN)
    sse = Conn(srv.port, timeout=10)
    sse.send("GET /?count=600&interval=100&drain=1 HTTP/1.1\r\nHost: t\r\n"
             "Accept: text/event-stream\r\n\r\n")
    sse.read_until(b"data: 2\n")
    t0 = time.monotonic()
    srv.signal(signal.SIGTERM)
    rest = sse.read_until(b"0\r\n\r\n")
    check(b"data: 600" not in rest, "the stream ran to its end: %r" % rest[-100:])
    check(time.monotonic() - t0 < 3 * SLOW, "the stream ended %.1f s after SIGTERM"
          % (time.monotonic() - t0))
    sse.close()
    check(srv.wait_exit(10), "pagid still running after the stream ended")
    check_eq(srv.returncode, 0, "exit status")


@test(timeout=60)
def perl_app_hears_the_drain(ctx):
    import test_perl
    srv = ctx.start(test_perl.app(ctx, "drain_notice"), workers=1, config=LONG_SHUTDOWN)
    r = lib.request(srv.port, "GET", "/")
    check_eq(r.body, b"draining=0", "pagid.server->draining before the stop")
    ws = WS(srv.port)
    echo_roundtrip(ws)
    sse = Conn(srv.port, timeout=10)
    sse.send("GET / HTTP/1.1\r\nHost: t\r\nAccept: text/event-stream\r\n\r\n")
    sse.read_until(b"data: draining=0\n")
    t0 = time.monotonic()
    srv.signal(signal.SIGTERM)
    code, reason = ws.expect_close()
    check_eq((code, reason), (1001, "drain in perl"), "close after SIGTERM")
    check(time.monotonic() - t0 < 1.0 * SLOW, "the 1001 close came late")
    ws.close()
    rest = sse.read_until(b"0\r\n\r\n")
    check(b"event: bye\ndata: draining=1\n" in rest, "no final event: %r" % rest[-200:])
    sse.close()
    check(srv.wait_exit(10), "pagid still running after its streams ended")
    check_eq(srv.returncode, 0, "exit status")


@test(timeout=60)
def ws_gets_1001_on_max_requests_recycle(ctx):
    srv = ctx.start("echo", workers=1, config=LONG_SHUTDOWN + "max_requests: 2\n")
    check(wait_for(lambda: len(srv.workers()) == 1, 10), "workers: %r" % srv.workers())
    old = srv.workers()
    ws = WS(srv.port)
    echo_roundtrip(ws)
    for _ in range(2):
        check_eq(lib.request(srv.port, "GET", "/").status, 200, "status")
    code, _ = ws.expect_close()
    check_eq(code, 1001, "close code when the worker recycles")
    ws.close()
    check(wait_for(lambda: not any(lib.pid_alive(p) for p in old), 10),
          "the recycled worker %r still runs" % old)
    check(wait_for(lambda: lib.request(srv.port, "GET", "/").status == 200, 10),
          "the replacement worker does not serve")


@test(timeout=60)
def ws_handshake_during_the_drain_is_refused_quietly(ctx):
    # A handshake reaching a draining worker on an open keep-alive
    # connection: echo refuses it (403) instead of accepting a doomed stream.
    srv = ctx.start("echo", workers=1, config=LONG_SHUTDOWN)
    c = Conn(srv.port, timeout=10)
    c.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n")
    check_eq(c.read_response().status, 200, "first request")
    srv.signal(signal.SIGTERM)
    check(wait_for(lambda: "draining" in srv.stderr(), 5), "the worker did not start draining")
    key = base64.b64encode(os.urandom(16)).decode()
    c.send("GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % key)
    check_eq(c.read_response().status, 403, "handshake during the drain")
    c.close()
    check(srv.wait_exit(10), "pagid still running")
    check_eq(srv.returncode, 0, "exit status")
    check("app error" not in srv.stderr() and "app failed" not in srv.stderr(),
          "an error was logged: %s" % srv.stderr()[-500:])


# The app's drain callback for one scope finishes every waiting scope and
# frees their contexts: the notices already queued for the others must not
# run (pagi(3): "not run for a scope the app already finished"), or they
# would run on freed memory (ASan: heap-use-after-free).
FINISH_ALL = r'''
#include <stdio.h>
#include <stdlib.h>
#include <pagi/pagi.h>
typedef struct waiter { pagi_scope *s; struct waiter *next; } waiter;
static waiter *waiting;
static void note(const char *what)
{
    FILE *f = fopen("MARKER", "a");
    if (f) { fprintf(f, "%s\n", what); fclose(f); }
}
static void on_drain(pagi_scope *s, void *ud)
{
    waiter *me = ud;
    note(me->s == s ? "drain" : "drain on a stale context");
    while (waiting) {
        waiter *w = waiting;
        waiting = w->next;
        pagi_scope_finish(w->s, "drained");
        free(w);
    }
}
static void handle(pagi_scope *s, void *inst)
{
    (void)inst;
    if (pagi_scope_type_of(s) != PAGI_SCOPE_HTTP) {
        pagi_scope_finish(s, "http only");
        return;
    }
    waiter *w = calloc(1, sizeof *w);
    w->s = s;
    w->next = waiting;
    waiting = w;
    pagi_scope_on_server_drain(s, on_drain, w);
    note("waiting");
}
const pagi_app pagi_module = PAGI_APP_INIT("finishall", 0, handle, 0);
'''


@test(timeout=90)
def drain_notice_skips_scopes_another_notice_finished(ctx):
    import subprocess
    marker = os.path.join(ctx.tmpdir, "finishall.log")
    src = os.path.join(ctx.tmpdir, "finishall.c")
    with open(src, "w") as f:
        f.write(FINISH_ALL.replace("MARKER", marker))
    so = os.path.join(ctx.tmpdir, "finishall.so")
    p = subprocess.run([os.environ.get("CC", "cc"), "-std=c11", "-Wall", "-Wextra", "-Werror",
                        "-shared", "-fPIC", "-I", os.path.join(lib.REPO, "include"), "-o", so, src],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    check_eq(p.returncode, 0, "building finishall.so: %s" % p.stdout.decode())
    srv = ctx.start(so, workers=1, config=LONG_SHUTDOWN)
    conns = []
    for i in range(2):
        c = Conn(srv.port, timeout=10)
        c.send("GET /wait/%d HTTP/1.1\r\nHost: t\r\n\r\n" % i)
        conns.append(c)

    def lines():
        try:
            with open(marker) as f:
                return f.read().split()
        except FileNotFoundError:
            return []
    check(wait_for(lambda: lines().count("waiting") == 2, 5 * SLOW),
          "both requests waiting: %r" % lines())
    srv.signal(signal.SIGTERM)
    for c in conns:
        r = c.read_response()
        check_eq(r.status, 500, "a request the app finished with an error")
        c.close()
    check(srv.wait_exit(10 * SLOW), "pagid still running")
    check_eq(srv.returncode, 0, "exit status (a worker crash makes it non-zero)")
    check_eq(lines(), ["waiting", "waiting", "drain"], "app log")
