"""Publish/subscribe across workers (docs/pubsub.md), through the `pubsub`
built-in: a websocket on /CHANNEL is told "worker N", publishes each text
message it sends and receives every message on CHANNEL. With 2 and 4
workers (and 2 forked by a preloading zygote), 20 clients spread over them each receive every message once, in
order per publisher; a worker killed mid-stream does not stop the others,
and its replacement's clients receive; across a reload the old and new
generations reach each other; a client that never reads, and a worker that
does not read its channel (stopped), leave the worker's and the master's
memory bounded, with the drops counted in the metrics."""

import base64
import os
import re
import select
import signal
import socket
import struct
import threading
import time

from lib import SLOW, TestFailure, check, check_eq, free_port, request, test, wait_for
from test_metrics import scrape


class WS:
    """A minimal websocket client: text frames, masked, no extensions."""

    def __init__(self, port, path, rcvbuf=None, timeout=5):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout * SLOW)
        self.sock.connect(("127.0.0.1", port))
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(("GET %s HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\n"
                           "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n" % (path, key)).encode())
        self.buf = bytearray()
        self.pos = 0  # first unread byte of buf (after the handshake)
        self.kept = []  # frames a sync read past: collect() sees them first
        while b"\r\n\r\n" not in self.buf:
            self._more()
        head, rest = bytes(self.buf).split(b"\r\n\r\n", 1)
        self.buf = bytearray(rest)
        check(head.startswith(b"HTTP/1.1 101"), "handshake answered %r" % head[:40])
        op, hello = self.recv()
        check(op == 1 and hello.startswith(b"worker "), "first message %r" % hello)
        self.worker = int(hello.split()[1])

    def _more(self):
        d = self.sock.recv(262144)
        if not d:
            raise EOFError("connection closed")
        if self.pos:  # consumed bytes go only when more come: no copy per frame
            del self.buf[:self.pos]
            self.pos = 0
        self.buf += d

    def send(self, text):
        p = text.encode()
        n = len(p)
        h = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else
                             bytes([0x80 | 126]) + struct.pack("!H", n))
        # A zero masking key: valid, and the payload needs no rewriting.
        self.sock.sendall(h + b"\0\0\0\0" + p)

    def frame(self):
        """A whole frame from the buffer, or None."""
        b, i = self.buf, self.pos
        have = len(b) - i
        if have < 2:
            return None
        n, off = b[i + 1] & 0x7f, 2
        if n == 126:
            if have < 4:
                return None
            n, off = struct.unpack_from("!H", b, i + 2)[0], 4
        elif n == 127:
            if have < 10:
                return None
            n, off = struct.unpack_from("!Q", b, i + 2)[0], 10
        if have < off + n:
            return None
        op, p = b[i] & 0xf, bytes(b[i + off:i + off + n])
        self.pos = i + off + n
        return op, p

    def recv(self):
        while True:
            f = self.frame()
            if f:
                return f
            self._more()

    def poll(self, wait):
        """Frames available within wait seconds (possibly none)."""
        out = []
        end = time.time() + wait
        while True:
            f = self.frame()
            if f:
                out.append(f)
                continue
            left = max(0.0, end - time.time())
            if (out and left == 0) or not select.select([self.sock], [], [], left)[0]:
                return out
            self._more()

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def connect_spread(port, n, path="/room"):
    clients = [WS(port, path) for _ in range(n)]
    return clients


def sync(clients, publisher, tag):
    """Publish tag-k from publisher until every client has seen one: every
    subscription is known to the master then (SUB precedes the PUBs that
    reach it). Messages of the sync are ignored later."""
    waiting = set(range(len(clients)))
    for k in range(int(200 * SLOW)):
        publisher.send("%s-%d" % (tag, k))
        for i in list(waiting):
            for op, p in clients[i].poll(0.05):
                if p.startswith(tag.encode()):
                    waiting.discard(i)
                else:
                    clients[i].kept.append((op, p))
        if not waiting:
            return
    raise TestFailure("clients %r never saw a %s message" % (sorted(waiting), tag))


def collect(client, want, prefixes, timeout):
    """Messages of client starting with one of prefixes until want of them came."""
    got = []
    end = time.time() + timeout * SLOW
    while len(got) < want and time.time() < end:
        frames, client.kept = client.kept + client.poll(0.2), []
        for op, p in frames:
            if any(p.startswith(x) for x in prefixes):
                got.append(p.decode())
    return got


def check_in_order(got, publishers, per, who):
    """Exactly per messages of each publisher, each once, in its order."""
    for pub in publishers:
        seq = [int(m.split(":")[1]) for m in got if m.split(":")[0] == pub]
        check(seq == list(range(per)),
              "%s: messages of %s arrived as %r (want 0..%d once, in order)"
              % (who, pub, seq[:20], per - 1))


def status_conf(sport, extra=""):
    return "status:\n  listen: 127.0.0.1:%d\n%s" % (sport, extra)


def metrics(sport):
    return scrape(sport)[0]


PUBLISHED = "pagid_pubsub_published_total"
DELIVERED = "pagid_pubsub_delivered_total"
DROPPED_W = 'pagid_pubsub_dropped_total{where="worker"}'
DROPPED_M = 'pagid_pubsub_dropped_total{where="master"}'


def fan_out(ctx, workers, args=None):
    sport = free_port()
    srv = ctx.start("pubsub", workers=workers, config=status_conf(sport), args=args)
    check(wait_for(lambda: len(srv.workers()) == workers, 10 * SLOW), "workers never all up")
    if args and "--preload" in args:
        check(len(srv.zygotes()) == 1, "no zygote: %r" % srv.zygotes())
    clients = connect_spread(srv.port, 20)
    by_worker = {}
    for c in clients:
        by_worker.setdefault(c.worker, []).append(c)
    ctx.note("%d workers: clients per worker %r" % (
        workers, {k: len(v) for k, v in sorted(by_worker.items())}))
    check(len(by_worker) >= 2, "20 clients all landed on one worker: %r" % list(by_worker))
    # One publisher per worker that has clients (up to 4): cross-worker and local.
    pubs = [v[0] for k, v in sorted(by_worker.items())][:4]
    sync(clients, pubs[0], "sync")
    time.sleep(0.5 * SLOW)  # late sync messages are delivered before the count
    before = metrics(sport)
    per = 50
    names = ["p%d" % i for i in range(len(pubs))]
    for k in range(per):  # interleaved publishers
        for name, p in zip(names, pubs):
            p.send("%s:%d" % (name, k))
    want = per * len(pubs)
    for i, c in enumerate(clients):
        got = collect(c, want, [n.encode() + b":" for n in names], 20)
        check_in_order(got, names, per, "client %d (worker %d)" % (i, c.worker))
        extra = [m for op, m in c.poll(0.05) if not m.startswith(b"sync")]
        check(not extra, "client %d got more: %r" % (i, extra[:5]))
    ok = wait_for(lambda: metrics(sport).get(DELIVERED, 0) - before.get(DELIVERED, 0) >= want * 20,
                  5 * SLOW)
    after = metrics(sport)
    check_eq(after[PUBLISHED] - before[PUBLISHED], want, "published messages (metrics)")
    check(ok, "delivered %r, want %d" % (after[DELIVERED] - before[DELIVERED], want * 20))
    check_eq(after[DELIVERED] - before[DELIVERED], want * 20, "delivered messages (metrics)")
    check_eq(after[DROPPED_W] + after[DROPPED_M], 0, "dropped messages")
    for c in clients:
        c.close()


@test(timeout=60)
def fan_out_over_2_workers(ctx):
    fan_out(ctx, 2)


@test(timeout=60)
def fan_out_over_4_workers(ctx):
    fan_out(ctx, 4)


@test(timeout=60)
def fan_out_over_workers_forked_by_the_zygote(ctx):
    # The zygote hands each worker the channel the master made for it (SCM_RIGHTS).
    fan_out(ctx, 2, args=["--preload"])


@test(timeout=30)
def single_process_is_local(ctx):
    # -w 0: no master, no channel; the worker's own subscriptions still receive.
    srv = ctx.start("pubsub", workers=0)
    clients = [WS(srv.port, "/solo") for _ in range(3)]
    check_eq({c.worker for c in clients}, {0}, "worker numbers without a master")
    sync(clients, clients[0], "sync")
    for k in range(30):
        clients[1].send("x:%d" % k)
    for i, c in enumerate(clients):
        check_in_order(collect(c, 30, [b"x:"], 10), ["x"], 30, "client %d" % i)
    for c in clients:
        c.close()


def client_on(port, worker, tries=40, path="/room"):
    """A client held by worker number worker (connections land where they land)."""
    others = []
    try:
        for _ in range(tries):
            c = WS(port, path)
            if c.worker == worker:
                return c
            others.append(c)
            time.sleep(0.05)
    finally:
        for o in others:
            o.close()
    raise TestFailure("no connection landed on worker %d in %d tries" % (worker, tries))


@test(timeout=90)
def worker_killed_mid_stream(ctx):
    srv = ctx.start("pubsub", workers=2)
    check(wait_for(lambda: "all workers ready" in srv.stderr(), 10 * SLOW), "workers never all ready")
    pub = client_on(srv.port, 1)
    a = client_on(srv.port, 1)
    b = client_on(srv.port, 2)
    sync([a, b], pub, "sync")
    victim = [p for p in srv.workers()]
    # The worker holding b: the one that is not pub's (its pid from the titles).
    pids = {}
    for p in srv.workers():
        with open("/proc/%d/cmdline" % p, "rb") as f:
            title = f.read().decode("latin-1")
        pids[int(title.split("worker ")[1].split()[0])] = p
    victim = pids[2]
    for k in range(100):
        pub.send("m:%d" % k)
    os.kill(victim, signal.SIGKILL)
    for k in range(100, 200):
        pub.send("m:%d" % k)
    got = collect(a, 200, [b"m:"], 20)
    check_in_order(got, ["m"], 200, "the surviving worker's client")
    # b's connection died with its worker.
    try:
        b.poll(1)
        b.sock.settimeout(3 * SLOW)
        while True:
            b.recv()
    except (EOFError, OSError):
        pass
    check(wait_for(lambda: 2 in {int(open("/proc/%d/cmdline" % p, "rb").read().decode(
        "latin-1").split("worker ")[1].split()[0]) for p in srv.workers()}
        and victim not in srv.workers(), 10 * SLOW), "worker 2 was not replaced")
    c = client_on(srv.port, 2)
    sync([c], pub, "again")
    for k in range(50):
        pub.send("n:%d" % k)
    check_in_order(collect(c, 50, [b"n:"], 20), ["n"], 50, "the new worker's client")
    check_in_order(collect(a, 50, [b"n:"], 20), ["n"], 50, "the surviving worker's client")
    for x in (pub, a, c):
        x.close()
    srv.allow_crash = True


@test(timeout=90)
def reload_mid_stream(ctx):
    srv = ctx.start("pubsub", workers=2, config="timeouts:\n  shutdown: 30s\n")
    check(wait_for(lambda: "all workers ready" in srv.stderr(), 10 * SLOW), "workers never all ready")
    old_pub = WS(srv.port, "/room?stay=1")
    old_sub = WS(srv.port, "/room?stay=1")
    sync([old_sub], old_pub, "sync")
    old_workers = set(srv.workers())
    for k in range(50):
        old_pub.send("o:%d" % k)
    srv.signal(signal.SIGHUP)
    check(wait_for(lambda: len(set(srv.workers()) - old_workers) == 2, 15 * SLOW),
          "no new generation after SIGHUP: %r" % srv.workers())

    def old_draining():
        for p in old_workers:
            try:
                with open("/proc/%d/cmdline" % p, "rb") as f:
                    if b"draining" not in f.read():
                        return False
            except OSError:
                pass  # gone
        return True

    # Until then an old worker may still accept a new client (and close it
    # with 1001 as it drains).
    check(wait_for(old_draining, 15 * SLOW), "the old generation never drained")
    # The new generation serves now; the old one drains, its clients stay.
    new_sub = WS(srv.port, "/room")
    new_pub = WS(srv.port, "/room")
    sync([new_sub, old_sub], new_pub, "sync2")
    sync([new_sub, old_sub], old_pub, "sync3")
    for k in range(50, 100):
        old_pub.send("o:%d" % k)
        new_pub.send("n:%d" % (k - 50))
    got = collect(old_sub, 150, [b"o:", b"n:"], 20)
    check_in_order(got, ["o"], 100, "an old generation's client")
    check_in_order(got, ["n"], 50, "an old generation's client")
    got = collect(new_sub, 100, [b"o:", b"n:"], 20)
    seq = [int(m.split(":")[1]) for m in got if m.startswith("o:")]
    check_eq(seq, list(range(50, 100)), "old publisher's messages at a new-generation client")
    check_in_order(got, ["n"], 50, "a new generation's client")
    for x in (old_pub, old_sub, new_sub, new_pub):
        x.close()


def sanitized(ctx):
    """An ASan build: its quarantine keeps freed memory resident, so RSS
    bounds are not checked there (the drop counts still are)."""
    with open(ctx.pagid, "rb") as f:
        return b"__asan_init" in f.read()


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


@test(timeout=120, serial=True)
def slow_subscribers_are_bounded(ctx):
    sport = free_port()
    conf = status_conf(sport, "timeouts:\n  heartbeat: 60s\n")
    srv = ctx.start("pubsub", workers=2, config=conf)
    check(wait_for(lambda: "all workers ready" in srv.stderr(), 10 * SLOW), "workers never all ready")
    pids = {}
    for p in srv.workers():
        with open("/proc/%d/cmdline" % p, "rb") as f:
            pids[int(f.read().decode("latin-1").split("worker ")[1].split()[0])] = p
    pub = client_on(srv.port, 1)
    sleeper = WS(srv.port, "/room", rcvbuf=4096)
    while sleeper.worker != 2:
        sleeper.close()
        sleeper = WS(srv.port, "/room", rcvbuf=4096)
    reader = client_on(srv.port, 2)
    sync([reader, sleeper], pub, "sync")
    base_w, base_m = rss_kb(pids[2]), rss_kb(srv.pid)
    payload = "x" * 4000
    # Both reading clients are drained by threads, so every drop is the sleeper's.
    counts = {}
    stop = threading.Event()

    def drain(name, c):
        n = 0
        while not stop.is_set():
            n += sum(1 for op, p in c.poll(0.1) if p[:1].isdigit())
            counts[name] = n

    threads = [threading.Thread(target=drain, args=(n, c)) for n, c in
               (("reader", reader), ("pub", pub))]
    for t in threads:
        t.start()
    # 1: a client that never reads: the worker drops for it past the high-water mark.
    total = 8000
    try:
        for k in range(total):
            pub.send("%d:%s" % (k, payload))
            # The readers keep up (a Python thread is no fast client); a reader
            # that lost messages never catches up: the check below says so.
            if k % 100 == 99 and not wait_for(
                    lambda: min(counts.get("reader", 0), counts.get("pub", 0)) >= k - 200,
                    10 * SLOW):
                break
        wait_for(lambda: counts.get("reader", 0) >= total and counts.get("pub", 0) >= total,
                 30 * SLOW)
    finally:
        stop.set()
        for t in threads:
            t.join()
    check(counts.get("reader", 0) == total and counts.get("pub", 0) == total,
          "the reading clients got %r of %d" % (counts, total))
    m = metrics(sport)
    ctx.note("never-reading client: %d dropped for it, worker RSS %d -> %d kB" % (
        m[DROPPED_W], base_w, rss_kb(pids[2])))
    check(m[DROPPED_W] > total / 2, "drops for the sleeping client: %r" % m[DROPPED_W])
    asan = sanitized(ctx)
    check(asan or rss_kb(pids[2]) - base_w < 64 * 1024,
          "worker 2 grew from %d to %d kB" % (base_w, rss_kb(pids[2])))
    # 2: a worker that does not read its channel: the master's queue is bounded.
    # pub's own worker stops reading a client whose output is not drained:
    # pub is drained meanwhile.
    stop2 = threading.Event()

    def drain_pub():
        while not stop2.is_set():
            pub.poll(0.1)

    t2 = threading.Thread(target=drain_pub)
    t2.start()
    os.kill(pids[2], signal.SIGSTOP)
    try:
        for k in range(total):
            pub.send("s%d:%s" % (k, payload))
        time.sleep(1 * SLOW)
        m = metrics(sport)
        grown = rss_kb(srv.pid) - base_m
        ctx.note("stopped worker: master dropped %d, master RSS +%d kB" % (m[DROPPED_M], grown))
        check(m[DROPPED_M] > 0, "the master dropped nothing for a stopped worker")
        check(asan or grown < 32 * 1024, "the master grew by %d kB" % grown)
    finally:
        os.kill(pids[2], signal.SIGCONT)
        stop2.set()
        t2.join()
    # It goes on: the stopped worker reads again and later messages arrive.
    sync([reader], pub, "after")
    for x in (pub, sleeper, reader):
        x.close()


@test(timeout=90)
def recycled_worker_keeps_its_channel(ctx):
    # A worker recycled by max_requests hands its number to a replacement
    # while it drains. The old process keeps its own pub/sub channel until
    # it exits; its exit once closed the channel id the broker had given
    # again to the replacement, which then published to nobody else.
    srv = ctx.start("pubsub", workers=2, config="max_requests: 10\n")
    check(wait_for(lambda: "all workers ready" in srv.stderr(), 10 * SLOW), "workers never all ready")
    first = set(srv.workers())
    # Plain requests until both first workers were recycled and are gone.
    def recycled():  # the master starts the replacement before or after the exit
        return len(re.findall(r"is recycling itself|recycled after max_requests", srv.stderr()))

    for _ in range(300):
        if recycled() >= 2 and not first & set(srv.workers()):
            break
        try:
            request(srv.port, "GET", "/", headers={"Connection": "close"}, timeout=5 * SLOW)
        except OSError:
            time.sleep(0.05)
    check(recycled() >= 2, "the workers were never recycled")
    check(wait_for(lambda: not first & set(srv.workers()), 10 * SLOW),
          "recycled workers still running: %r" % (first & set(srv.workers())))
    log = srv.stderr()
    check("pub/sub channel to the master closed" not in log,
          "a worker lost its pub/sub channel in a recycling: %r"
          % [ln for ln in log.splitlines() if "channel to the master closed" in ln])
    # And messages still cross between the replacements (at most 6
    # connections below: under the 10 that would recycle one again).
    a = client_on(srv.port, 1, tries=3)
    b = client_on(srv.port, 2, tries=3)
    sync([a, b], a, "sync")
    for k in range(20):
        a.send("m:%d" % k)
    check_in_order(collect(b, 20, [b"m:"], 10), ["m"], 20, "the other replacement's client")
    for x in (a, b):
        x.close()
