"""The demo (pagid's default app) across workers: its chat and its clock go
through publish/subscribe (docs/pubsub.md, "The demo"). A chat message from
a client on one worker reaches every client on every worker exactly once,
the sender too, in order per sender; the clock is one tick a second for
every client, the same tick on every worker, published by one worker, not
one tick per worker."""

import base64
import calendar
import os
import re
import socket
import struct
import time

from lib import SLOW, build_request, check, check_eq, free_port, test, wait_for
from test_demo import WSClient
from test_fairness import holdings
from test_pubsub import PUBLISHED, metrics, status_conf
from test_sse import SSEClient

ME = re.compile(rb"you are (\[\d+\.\d+\]) on worker (\d+)$")


def join(port):
    """A chat client that offered the subprotocol whoami (as the page does)
    and was told its name and worker."""
    c = WSClient.__new__(WSClient)
    c.sock = socket.create_connection(("127.0.0.1", port), timeout=5 * SLOW)
    key = base64.b64encode(os.urandom(16)).decode()
    c.sock.sendall(build_request("GET", "/ws", {
        "Host": "127.0.0.1:%d" % port, "Upgrade": "websocket", "Connection": "Upgrade",
        "Sec-WebSocket-Key": key, "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Protocol": "chat, whoami"}))
    c.buf = b""
    while b"\r\n\r\n" not in c.buf:
        data = c.sock.recv(4096)
        check(data, "connection closed during the handshake: %r" % c.buf)
        c.buf += data
    head, c.buf = c.buf.split(b"\r\n\r\n", 1)
    check(head.startswith(b"HTTP/1.1 101"), "chat handshake: %r" % head[:60])
    check(b"\r\nsec-websocket-protocol: whoami" in head.lower(), "subprotocol: %r" % head)
    op, p = c.recv()
    m = ME.match(p)
    check(op == 1 and m, "first message with the subprotocol whoami: %r" % p)
    c.name, c.worker = m.group(1).decode(), int(m.group(2))
    return c


def frames(c, wait):
    """(opcode, payload) of the frames that came within wait seconds."""
    out = []
    end = time.monotonic() + wait
    try:
        while True:
            left = end - time.monotonic()
            if left <= 0:
                break
            c.sock.settimeout(left)
            out.append(c.recv())
    except socket.timeout:
        pass  # a partial frame stays in c.buf for the next call
    finally:
        c.sock.settimeout(5 * SLOW)
    return out


def send_binary(c, payload):
    mask = os.urandom(4)
    c.sock.sendall(struct.pack("!BB", 0x82, 0x80 | len(payload)) + mask +
                   bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))


def spread_clients(port, workers, want_each=1, tries=40):
    """Chat clients until every worker holds want_each (bounded); all kept."""
    clients = []
    for _ in range(tries):
        clients.append(join(port))
        per = {}
        for c in clients:
            per[c.worker] = per.get(c.worker, 0) + 1
        if len(per) == workers and min(per.values()) >= want_each:
            return clients
    check(False, "%d connections did not reach every one of %d workers: %r"
          % (tries, workers, sorted(c.worker for c in clients)))


@test(timeout=60)
def chat_across_two_workers(ctx):
    srv = ctx.start("demo", workers=2)
    check(wait_for(lambda: "all workers ready" in srv.stderr(), 10 * SLOW), "workers never all ready")
    clients = spread_clients(srv.port, 2, want_each=2)
    ctx.note("chat clients on workers %r" % sorted(c.worker for c in clients))
    check_eq(len({c.name for c in clients}), len(clients), "distinct names")
    a = next(c for c in clients if c.worker == 1)
    b = next(c for c in clients if c.worker == 2)
    # Until every client saw one: each subscription is known to the master.
    waiting = set(range(len(clients)))
    for k in range(int(100 * SLOW)):
        a.send_text("sync-%d" % k)
        for i in list(waiting):
            if frames(clients[i], 0.05):
                waiting.discard(i)
        if not waiting:
            break
    check(not waiting, "clients %r never saw a sync message" % sorted(waiting))
    time.sleep(0.3 * SLOW)
    for c in clients:
        frames(c, 0.05)
    # Both senders, interleaved; every client gets each message once, in order.
    per = 20
    for k in range(per):
        a.send_text("A:%d" % k)
        b.send_text("B:%d" % k)
    send_binary(b, b"\x00\x01bin")
    for i, c in enumerate(clients):
        got = []
        end = time.monotonic() + 10 * SLOW
        while len(got) < 2 * per + 1 and time.monotonic() < end:
            # (a late sync message may still come: not counted)
            got += [f for f in frames(c, 0.2) if b"] sync-" not in f[1]]
        who = "client %s on worker %d" % (c.name, c.worker)
        texts = [p.decode() for op, p in got if op == 1]
        for sender, tag in ((a, "A"), (b, "B")):
            seq = [int(t.split(":")[1]) for t in texts if t.startswith("%s %s:" % (sender.name, tag))]
            check_eq(seq, list(range(per)), "%s: messages of %s (worker %d)"
                     % (who, sender.name, sender.worker))
        check_eq([t for t in texts if not re.match(r"\[\d+\.\d+\] [AB]:\d+$", t)], [],
                 "%s: other text messages" % who)
        check_eq([(op, p) for op, p in got if op != 1],
                 [(2, ("%s " % b.name).encode() + b"\x00\x01bin")], "%s: the binary message" % who)
        check_eq([f for f in frames(c, 0.1) if b"] sync-" not in f[1]], [],
                 "%s: more messages" % who)
    for c in clients:
        c.close()


def second_of(label):
    return calendar.timegm(time.strptime(label, "%Y-%m-%d %H:%M:%S UTC"))


def clock_over(ctx, workers):
    sport = free_port()
    srv = ctx.start("demo", workers=workers, config=status_conf(sport))
    kids = wait_for(lambda: len(srv.workers()) == workers and srv.workers(), 10 * SLOW)
    check(kids, "workers never all up")
    clients = [SSEClient(srv.port, "/clock") for _ in range(3 * workers)]
    for c in clients:
        check_eq(c.read_head().status, 200, "/clock status")
        c.since = time.monotonic()
    held = wait_for(lambda: (lambda h: sum(h.values()) == len(clients) and h)(
        holdings(srv, kids)), 5)
    ctx.note("%d workers: clock clients per worker %r" % (
        workers, sorted(held.values()) if held else "unknown"))
    check(held and sum(1 for n in held.values() if n) >= 2,
          "the clock clients are not on two workers at least: %r" % held)
    # The tickers of several workers are running. The first second may be
    # published by several (a worker's ticker started before it could hear
    # the others), and the metrics lag a little: count after that.
    for c in clients:
        c.wait_events(2, timeout=5)

    def pump_for(secs):
        t = time.monotonic()
        while time.monotonic() - t < secs:
            for c in clients:
                c.pump(0.02)

    pump_for(1.5)
    before = metrics(sport)
    t0 = time.monotonic()
    pump_for(6)
    after = metrics(sport)
    elapsed = time.monotonic() - t0
    published = after[PUBLISHED] - before[PUBLISHED]
    ctx.note("%d workers: %d ticks published in %.1f s" % (workers, published, elapsed))
    spans = []
    for i, c in enumerate(clients):
        ev = c.events
        check(all(e.type == "time" for e in ev), "client %d: event types %r" % (i, ev[:5]))
        secs = [second_of(e.data) for e in ev]
        check(all(b > a for a, b in zip(secs, secs[1:])),
              "client %d: a second shown twice or backwards: %r" % (i, [e.data for e in ev]))
        check_eq([e.last_event_id for e in ev], [str(k + 1) for k in range(len(ev))],
                 "client %d: ids" % i)
        # One a second, not N per second: the count over the client's life.
        life = time.monotonic() - c.since
        check(len(ev) <= life + 1.5, "client %d: %d ticks in %.1f s" % (i, len(ev), life))
        check(len(ev) >= 6, "client %d: only %d ticks" % (i, len(ev)))
        spans.append((secs[0], secs[-1], set(secs)))
    # Every client shows the same ticks (over the seconds all of them saw).
    lo, hi = max(s[0] for s in spans), min(s[1] for s in spans)
    common = [{x for x in s[2] if lo <= x <= hi} for s in spans]
    check(hi - lo >= 3 and all(x == common[0] for x in common),
          "clients saw different ticks: %r" % [sorted(x) for x in common])
    # Published by one worker at a time: about one a second, not one per
    # worker (a late tick may let another worker publish one second again).
    check(published <= 1.5 * elapsed + 1,
          "%d ticks published in %.1f s by %d workers" % (published, elapsed, workers))
    for c in clients:
        c.close()


@test(timeout=60)
def clock_one_tick_per_second_over_2_workers(ctx):
    clock_over(ctx, 2)


@test(timeout=60)
def clock_one_tick_per_second_over_4_workers(ctx):
    clock_over(ctx, 4)
