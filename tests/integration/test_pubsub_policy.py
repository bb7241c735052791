"""Slow subscribers under a documented policy (docs/pubsub.md, "Slow
clients"): the `pubsub` built-in with ?policy=conflate|drop|disconnect puts
WebSocket and SSE clients of /CHANNEL in a pagi_easy group fed from the
channel. With 2 workers, a publisher on worker 1 pushes a steady stream of
8,000 messages of 2 KB; on worker 2 a fast WebSocket and a fast SSE client
get every message in order, while a WebSocket and an SSE client that never
read (4 KiB receive buffers) get the policy: an ordered subset ending with
the last message (conflate), an ordered subset (drop), or a close with 1008
"too slow" / the end of the stream (disconnect). What they missed is counted
in pagid_pubsub_dropped_total{where="worker"}, exactly; worker 2's RSS stays
within 16 MiB of where it started (16 MB per slow client if it buffered)."""

import select
import socket
import struct
import threading
import time

from lib import SLOW, TestFailure, check, check_eq, free_port, test, wait_for
from test_pubsub import DROPPED_W, WS, client_on, metrics, rss_kb, sanitized, status_conf, sync

TOTAL = 8000
PAYLOAD = "x" * 2000
RSS_BOUND_KB = 16 * 1024
# The slow clients go unread for the whole stream: no timeout may end them
# first, and a disconnected WebSocket waits for its reader to see the close.
CONF_EXTRA = ("timeouts:\n  heartbeat: 60s\n  idle: 600s\n  write: 600s\n"
              "  ws_close: 600s\n")


class SSESub:
    """An SSE client with the WS class's poll/kept interface: de-chunks as
    bytes arrive, returns each event's data (comments skipped) as (1, data)."""

    def __init__(self, port, path, rcvbuf=None, timeout=5):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout * SLOW)
        self.sock.connect(("127.0.0.1", port))
        self.sock.sendall(("GET %s HTTP/1.1\r\nHost: t\r\nAccept: text/event-stream\r\n\r\n"
                           % path).encode())
        self.buf = bytearray()
        self.body = bytearray()
        self.chunk_left = None
        self.ended = False  # the zero-length chunk came
        self.eof = False
        self.kept = []
        self.events = []
        self.head = False  # the body is decoded once the head is read
        while b"\r\n\r\n" not in self.buf:
            self._more(timeout * SLOW)
            check(not self.eof, "sse: closed before the response head")
        head, rest = bytes(self.buf).split(b"\r\n\r\n", 1)
        check(head.startswith(b"HTTP/1.1 200"), "sse answered %r" % head[:60])
        check(b"chunked" in head.lower(), "sse response not chunked: %r" % head)
        self.buf = bytearray(rest)
        self.head = True
        self._decode()
        end = time.time() + timeout * SLOW
        while not self.events and time.time() < end and not self.eof:
            self._more(0.2)
        check(self.events and self.events[0].startswith(b"worker "),
              "first sse event %r" % self.events[:1])
        self.worker = int(self.events.pop(0).split()[1])

    def _more(self, wait):
        if not select.select([self.sock], [], [], max(0.0, wait))[0]:
            return False
        try:
            d = self.sock.recv(262144)
        except ConnectionResetError:
            d = b""
        if not d:
            self.eof = True
            return True
        self.buf += d
        if self.head:
            self._decode()
        return True

    def _decode(self):
        b, i = self.buf, 0
        while not self.ended:
            if self.chunk_left is None:
                j = b.find(b"\r\n", i)
                if j < 0:
                    break
                size = int(bytes(b[i:j]).split(b";")[0], 16)
                if size == 0:
                    if len(b) < j + 4:
                        break
                    self.ended = True
                    i = j + 4
                    break
                self.chunk_left, i = size, j + 2
            if len(b) - i < self.chunk_left + 2:
                break
            self.body += b[i:i + self.chunk_left]
            i += self.chunk_left + 2
            self.chunk_left = None
        del b[:i]
        while True:
            k = self.body.find(b"\n\n")
            if k < 0:
                break
            ev = bytes(self.body[:k])
            del self.body[:k + 2]
            data = [ln[6:] if ln.startswith(b"data: ") else ln[5:]
                    for ln in ev.split(b"\n") if ln.startswith(b"data:")]
            if data:
                self.events.append(b"\n".join(data))

    def poll(self, wait):
        end = time.time() + wait
        while not self.events and not self.eof and self._more(max(0.0, end - time.time())):
            pass
        out = [(1, e) for e in self.events]
        self.events = []
        return out

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def on_worker(make, worker, tries=40):
    """A client (make() builds one) held by worker number worker."""
    others = []
    try:
        for _ in range(tries):
            c = make()
            if c.worker == worker:
                return c
            others.append(c)
            time.sleep(0.05)
    finally:
        for o in others:
            o.close()
    raise TestFailure("no connection landed on worker %d in %d tries" % (worker, tries))


def seqs(frames):
    """The numbers of the stream's messages ("m:K:...") among frames."""
    return [int(p.split(b":")[1]) for op, p in frames if op == 1 and p.startswith(b"m:")]


def read_rest_ws(c, quiet):
    """What a WebSocket that did not read gets now: (message numbers, close)."""
    got, close = [], None
    c.sock.settimeout(quiet)
    try:
        while close is None:
            frames = c.poll(quiet)
            if not frames:
                break
            got += seqs(frames)
            for op, p in frames:
                if op == 8:
                    close = (struct.unpack("!H", p[:2])[0] if len(p) >= 2 else None, p[2:])
    except (EOFError, OSError):
        pass
    return got, close


def read_rest_sse(c, quiet):
    got = []
    while not c.ended and not c.eof:
        frames = c.poll(quiet)
        if not frames and not c.ended:
            if not c._more(quiet):
                break
        got += seqs(frames)
    got += seqs(c.poll(0))
    return got


def increasing(seq, who):
    check(all(a < b for a, b in zip(seq, seq[1:])),
          "%s: messages out of order or twice: %r" % (who, seq[:30]))


def slow_clients_under(ctx, policy):
    sport = free_port()
    srv = ctx.start("pubsub", workers=2, config=status_conf(sport, CONF_EXTRA))
    check(wait_for(lambda: "all workers ready" in srv.stderr(), 10 * SLOW), "workers never all ready")
    pids = {}
    for p in srv.workers():
        with open("/proc/%d/cmdline" % p, "rb") as f:
            pids[int(f.read().decode("latin-1").split("worker ")[1].split()[0])] = p
    path = "/room?policy=" + policy
    # The publisher is a plain client on worker 1 (it hears its own messages
    # and is drained); the group's members are all on worker 2.
    pub = client_on(srv.port, 1)
    fast_ws = on_worker(lambda: WS(srv.port, path), 2)
    slow_ws = on_worker(lambda: WS(srv.port, path, rcvbuf=4096), 2)
    fast_sse = on_worker(lambda: SSESub(srv.port, path), 2)
    slow_sse = on_worker(lambda: SSESub(srv.port, path, rcvbuf=4096), 2)
    sync([pub, fast_ws, slow_ws, fast_sse, slow_sse], pub, "sync")
    time.sleep(0.5 * SLOW)  # late sync messages are delivered before the count
    for c in (fast_ws, slow_ws, fast_sse, slow_sse):
        c.poll(0.1)
        c.kept = []
    before = metrics(sport)
    base_rss = rss_kb(pids[2])

    got = {"pub": [], "ws": [], "sse": []}
    stop = threading.Event()

    def drain(name, c):
        while not stop.is_set():
            got[name] += seqs(c.poll(0.1))

    threads = [threading.Thread(target=drain, args=a) for a in
               (("pub", pub), ("ws", fast_ws), ("sse", fast_sse))]
    for t in threads:
        t.start()
    try:
        for k in range(TOTAL):
            pub.send("m:%d:%s" % (k, PAYLOAD))
            # A steady stream the fast readers (Python threads) keep up with.
            if k % 20 == 19 and not wait_for(
                    lambda: min(len(v) for v in got.values()) >= k - 200, 20 * SLOW):
                break
        wait_for(lambda: min(len(v) for v in got.values()) >= TOTAL, 30 * SLOW)
        rss = rss_kb(pids[2])
    finally:
        stop.set()
        for t in threads:
            t.join()
    for name in ("ws", "sse"):
        check(got[name] == list(range(TOTAL)),
              "the fast %s client got %d of %d messages (first %r)"
              % (name, len(got[name]), TOTAL, got[name][:10]))
    check_eq(len(got["pub"]), TOTAL, "messages the publisher heard back")
    # Now the slow clients read what the policy left them.
    quiet = 2 * SLOW
    ws_seq, ws_close = read_rest_ws(slow_ws, quiet)
    sse_seq = read_rest_sse(slow_sse, quiet)
    time.sleep(0.2 * SLOW)
    after = metrics(sport)
    dropped = after[DROPPED_W] - before[DROPPED_W]
    ctx.note("%s: slow websocket got %d, slow sse %d of %d; dropped %d; close %r; "
             "worker RSS %d -> %d kB" % (policy, len(ws_seq), len(sse_seq), TOTAL, dropped,
                                         ws_close, base_rss, rss))
    increasing(ws_seq, "the slow websocket")
    increasing(sse_seq, "the slow sse client")
    if policy == "disconnect":
        check(ws_close is not None and ws_close[0] == 1008 and ws_close[1] == b"too slow",
              "the slow websocket was closed with %r, not 1008 'too slow'" % (ws_close,))
        check(slow_sse.ended, "the slow sse stream did not end (eof=%s)" % slow_sse.eof)
        check(len(ws_seq) < TOTAL and len(sse_seq) < TOTAL, "nothing was cut off")
        check_eq(dropped, 2, "drops counted (one per client closed)")
    else:
        check(ws_close is None, "the slow websocket was closed: %r" % (ws_close,))
        check(not slow_sse.ended and not slow_sse.eof, "the slow sse stream ended")
        missed = (TOTAL - len(ws_seq)) + (TOTAL - len(sse_seq))
        check(len(ws_seq) < TOTAL / 2 and len(sse_seq) < TOTAL / 2,
              "the slow clients were not slowed: %d, %d" % (len(ws_seq), len(sse_seq)))
        check_eq(dropped, missed, "drops counted (the messages the slow clients missed)")
        if policy == "conflate":
            check(ws_seq and ws_seq[-1] == TOTAL - 1,
                  "the slow websocket's last message is %r, not the latest" % ws_seq[-1:])
            check(sse_seq and sse_seq[-1] == TOTAL - 1,
                  "the slow sse client's last message is %r, not the latest" % sse_seq[-1:])
    check_eq(after['pagid_pubsub_dropped_total{where="master"}'],
             before['pagid_pubsub_dropped_total{where="master"}'], "drops in the master")
    check(sanitized(ctx) or rss - base_rss < RSS_BOUND_KB,
          "worker 2 grew from %d to %d kB" % (base_rss, rss))
    for c in (pub, fast_ws, slow_ws, fast_sse, slow_sse):
        c.close()


@test(timeout=180, serial=True)
def slow_subscribers_conflate(ctx):
    slow_clients_under(ctx, "conflate")


@test(timeout=180, serial=True)
def slow_subscribers_drop(ctx):
    slow_clients_under(ctx, "drop")


@test(timeout=180, serial=True)
def slow_subscribers_disconnect(ctx):
    slow_clients_under(ctx, "disconnect")


@test(timeout=30)
def policy_query_is_checked(ctx):
    srv = ctx.start("pubsub", workers=1)
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=5 * SLOW)
    s.sendall(b"GET /room?policy=never HTTP/1.1\r\nHost: t\r\nAccept: text/event-stream\r\n"
              b"Connection: close\r\n\r\n")
    data = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        data += d
    s.close()
    check(data.startswith(b"HTTP/1.1 500"), "an unknown policy answered %r" % data[:60])
    # The server goes on: a known policy works.
    c = SSESub(srv.port, "/room?policy=drop")
    c.close()
