"""Event-stream subscribers and HTTP publishers of the `pubsub` built-in
(docs/pubsub.md, "The built-in endpoint"): GET /CHANNEL with Accept:
text/event-stream gets `event: hello` (data "worker N"), then every message
published on CHANNEL as one event; POST /CHANNEL publishes its body (202).
Over 2 and 4 workers, SSE subscribers mixed with websocket ones each receive
every message once, in order per publisher (websocket and HTTP publishers
on several workers); bad requests get clear answers; a stream ends when its
worker drains unless it asked to stay, and one that stays hears the new
generation."""

import signal
import time

from lib import SLOW, Conn, build_request, check, check_eq, free_port, request, test, wait_for
from test_pubsub import (DELIVERED, DROPPED_M, DROPPED_W, PUBLISHED, WS, check_in_order, metrics,
                         status_conf)
from test_sse import SSEClient


class Sub:
    """An event-stream subscriber: the hello event names its worker."""

    def __init__(self, port, channel, query=""):
        self.c = SSEClient(port, "/" + channel + query)
        head = self.c.read_head()
        check_eq(head.status, 200, "GET /%s as an event stream" % channel)
        check_eq(head.header("content-type"), "text/event-stream", "content-type")
        hello = self.c.wait_events(1)[0]
        check(hello.type == "hello" and hello.data.startswith("worker "),
              "first event %r" % hello)
        self.worker = int(hello.data.split()[1])
        self.seen = 1  # events already looked at

    def poll(self, wait):
        """Data of the events that came within wait seconds (possibly none)."""
        self.c.pump(wait)
        evs = self.c.events[self.seen:]
        self.seen += len(evs)
        for e in evs:
            check_eq(e.type, "message", "type of a published message's event")
        return [e.data for e in evs]

    def close(self):
        self.c.close()


class Publisher:
    """POSTs on one keep-alive connection: one worker, so ordered."""

    def __init__(self, port, channel):
        self.conn = Conn(port)
        self.channel = channel

    def send(self, text):
        body = text.encode()
        self.conn.send(build_request("POST", "/" + self.channel, {
            "Host": "t", "Content-Length": str(len(body))}) + body)
        r = self.conn.read_response()
        check_eq(r.status, 202, "POST /%s" % self.channel)

    def close(self):
        self.conn.close()


def texts(client, wait):
    """What a Sub or a WS client received within wait seconds, as text."""
    if isinstance(client, Sub):
        return client.poll(wait)
    out = [p.decode() for op, p in client.kept + client.poll(wait)]
    client.kept = []
    return out


def sync_all(clients, publish, tag):
    """Publish tag-k until every client saw one: every subscription is known
    to the master by then. Other messages seen meanwhile are an error (the
    test publishes nothing else yet)."""
    waiting = set(range(len(clients)))
    for k in range(int(200 * SLOW)):
        publish("%s-%d" % (tag, k))
        for i in list(waiting):
            got = texts(clients[i], 0.05)
            check(all(m.startswith(tag) for m in got), "client %d got %r" % (i, got))
            if got:
                waiting.discard(i)
        if not waiting:
            return
    check(False, "clients %r never saw a %s message" % (sorted(waiting), tag))


def collect(client, want, prefixes, timeout):
    got = []
    end = time.time() + timeout * SLOW
    while len(got) < want and time.time() < end:
        got += [m for m in texts(client, 0.2) if any(m.startswith(x) for x in prefixes)]
    return got


def mixed_fan_out(ctx, workers):
    sport = free_port()
    srv = ctx.start("pubsub", workers=workers, config=status_conf(sport))
    check(wait_for(lambda: len(srv.workers()) == workers, 10 * SLOW), "workers never all up")
    subs = [Sub(srv.port, "feed") for _ in range(12)]
    wss = [WS(srv.port, "/feed") for _ in range(8)]
    by_worker = {}
    for c in subs + wss:
        by_worker.setdefault(c.worker, []).append(c)
    ctx.note("%d workers: SSE subscribers per worker %r, websockets %r" % (
        workers, sorted((w, sum(1 for s in subs if s.worker == w)) for w in by_worker),
        sorted((w, sum(1 for s in wss if s.worker == w)) for w in by_worker)))
    check(len({s.worker for s in subs}) >= 2, "12 SSE subscribers all on one worker")
    # Publishers: one websocket per worker that holds one (up to 3), and POSTs.
    ws_by_worker = {}
    for c in wss:
        ws_by_worker.setdefault(c.worker, c)
    ws_pubs = [c for w, c in sorted(ws_by_worker.items())][:3]
    post = Publisher(srv.port, "feed")
    clients = subs + wss
    sync_all(clients, ws_pubs[0].send, "sync")
    time.sleep(0.3 * SLOW)
    for c in clients:  # the last sync messages
        texts(c, 0.05)
    before = metrics(sport)
    per = 40
    names = ["w%d" % i for i in range(len(ws_pubs))] + ["http"]
    for k in range(per):  # interleaved publishers
        for name, p in zip(names, ws_pubs):
            p.send("%s:%d" % (name, k))
        post.send("http:%d" % k)
    want = per * len(names)
    prefixes = [n + ":" for n in names]
    for i, c in enumerate(clients):
        kind = "SSE" if isinstance(c, Sub) else "websocket"
        got = collect(c, want, prefixes, 20)
        check_in_order(got, names, per, "%s client %d (worker %d)" % (kind, i, c.worker))
        extra = [m for m in texts(c, 0.05) if not m.startswith("sync")]
        check(not extra, "%s client %d got more: %r" % (kind, i, extra[:5]))
    ok = wait_for(lambda: metrics(sport).get(DELIVERED, 0) - before.get(DELIVERED, 0)
                  >= want * len(clients), 5 * SLOW)
    after = metrics(sport)
    check_eq(after[PUBLISHED] - before[PUBLISHED], want, "published messages (metrics)")
    check(ok, "delivered %r, want %d" % (after[DELIVERED] - before[DELIVERED],
                                         want * len(clients)))
    check_eq(after[DELIVERED] - before[DELIVERED], want * len(clients), "delivered (metrics)")
    check_eq(after[DROPPED_W] + after[DROPPED_M], 0, "dropped messages")
    for c in clients:
        c.close()
    post.close()


@test(timeout=90)
def sse_fan_out_over_2_workers(ctx):
    mixed_fan_out(ctx, 2)


@test(timeout=90)
def sse_fan_out_over_4_workers(ctx):
    mixed_fan_out(ctx, 4)


@test(timeout=30)
def sse_message_lines_and_http_answers(ctx):
    srv = ctx.start("pubsub")  # -w 0: local delivery, same endpoint
    sub = Sub(srv.port, "news")
    check_eq(sub.worker, 0, "worker number without a master")
    pub = Publisher(srv.port, "news")
    # A message of several lines is one event (its lines as data: lines).
    pub.send("first line\nsecond line")
    pub.send("")
    got = []
    end = time.time() + 5 * SLOW
    while len(got) < 2 and time.time() < end:
        got += sub.poll(0.2)
    check_eq(got, ["first line\nsecond line", ""], "events of the two messages")
    # The answers that are not a publish or a stream.
    r = request(srv.port, "GET", "/news")
    check_eq(r.status, 406, "GET without Accept: text/event-stream")
    check(b"text/event-stream" in r.body, "the 406 says what to do: %r" % r.body)
    r = request(srv.port, "PUT", "/news", body=b"x")
    check_eq(r.status, 405, "PUT")
    check_eq(r.header("allow"), "GET, POST", "Allow of the 405")
    check_eq(request(srv.port, "POST", "/", body=b"x").status, 400, "POST without a channel")
    check_eq(request(srv.port, "POST", "/" + "c" * 256, body=b"x").status, 400,
             "POST to a 256-byte channel")
    r = request(srv.port, "GET", "/", headers={"Accept": "text/event-stream"})
    check_eq(r.status, 400, "an event stream without a channel")
    big = request(srv.port, "POST", "/news", body=b"x" * ((1 << 20) + 1))
    check_eq(big.status, 413, "a message over 1 MiB")
    ok = request(srv.port, "POST", "/news", body=b"y" * (1 << 20))
    check_eq(ok.status, 202, "a message of exactly 1 MiB")
    got = []
    end = time.time() + 5 * SLOW
    while not got and time.time() < end:
        got += sub.poll(0.2)
    check_eq([len(m) for m in got], [1 << 20], "the 1 MiB message's event")
    pub.close()
    sub.close()


@test(timeout=90)
def sse_streams_across_a_reload(ctx):
    srv = ctx.start("pubsub", workers=2, config="timeouts:\n  shutdown: 30s\n")
    check(wait_for(lambda: "all workers ready" in srv.stderr(), 10 * SLOW), "workers never all ready")
    leaving = Sub(srv.port, "r")
    staying = Sub(srv.port, "r", "?stay=1")
    old_workers = set(srv.workers())
    srv.signal(signal.SIGHUP)
    check(wait_for(lambda: len(set(srv.workers()) - old_workers) == 2, 15 * SLOW),
          "no new generation after SIGHUP: %r" % srv.workers())
    # The old worker drains: the stream that did not ask to stay ends.
    leaving.c.read_to_end(timeout=10)

    def old_draining():
        for p in old_workers:
            try:
                with open("/proc/%d/cmdline" % p, "rb") as f:
                    if b"draining" not in f.read():
                        return False
            except OSError:
                pass  # gone
        return True

    # Until then an old worker may still take the publisher's connection.
    check(wait_for(old_draining, 15 * SLOW), "the old generation never drained")
    # The new generation's publishes reach the old generation's stream.
    pub = Publisher(srv.port, "r")
    seen = []
    for k in range(int(100 * SLOW)):
        pub.send("n:%d" % k)
        seen += staying.poll(0.05)
        if seen:
            break
    check(seen, "the old generation's staying stream heard nothing from the new one")
    first = int(seen[0].split(":")[1])
    last = k + 20
    for k in range(k + 1, last + 1):
        pub.send("n:%d" % k)
    seen += collect(staying, last + 1 - first - len(seen), ["n:"], 10)
    check_eq([int(m.split(":")[1]) for m in seen], list(range(first, last + 1)),
             "messages at the staying stream")
    pub.close()
    staying.close()
    leaving.close()
