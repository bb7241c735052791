"""The pagi.pubsub extension of the Perl host (docs/perl.md, "Publish and
subscribe"): a Perl WebSocket chat on 2 workers with 20 clients spread over
them, each receiving every message once and in order per publisher; SSE
subscribers in Perl reading with `next`; a subscription that ends with its
scope (no delivery after the client left, its callback freed, memory flat);
unsubscribe; nothing delivered after the app returned; the drop_oldest and
conflate policies seen from Perl; a dying callback; refused arguments; a
lifespan subscription; an app in IO::Async style. Apps: tests/integration/perl/pubsub_*.pl. Skipped when pagid was
built without Perl."""

import base64
import os
import socket
import time

from lib import SLOW, Conn, build_request, check, check_eq, free_port, request, test, wait_for
from test_perl import app
from test_pubsub import (DELIVERED, DROPPED_M, DROPPED_W, PUBLISHED, WS, check_in_order,
                         client_on, collect, metrics, rss_kb, sanitized, status_conf, sync)
from test_sse import SSEClient

HERE = os.path.dirname(os.path.abspath(__file__))


def spread(ctx, srv, n, path):
    """n websocket clients of srv, checked to be on both workers."""
    clients = [WS(srv.port, path) for _ in range(n)]
    by_worker = {}
    for c in clients:
        by_worker.setdefault(c.worker, []).append(c)
    ctx.note("clients per worker %r" % {k: len(v) for k, v in sorted(by_worker.items())})
    check(len(by_worker) >= 2, "%d clients all landed on one worker: %r" % (n, list(by_worker)))
    return clients, by_worker


@test(timeout=90)
def chat_over_2_workers(ctx):
    sport = free_port()
    srv = ctx.start(app(ctx, "pubsub_chat"), workers=2, config=status_conf(sport))
    check(wait_for(lambda: "all workers ready" in srv.stderr(), 10 * SLOW), "workers never all ready")
    clients, by_worker = spread(ctx, srv, 20, "/room")
    pubs = [v[0] for k, v in sorted(by_worker.items())]
    sync(clients, pubs[0], "sync")
    sync(clients, pubs[1], "sync")
    time.sleep(0.5 * SLOW)  # late sync messages are counted before the measure
    before = metrics(sport)
    per = 50
    names = ["p%d" % i for i in range(len(pubs))]
    for k in range(per):
        for name, p in zip(names, pubs):
            p.send("%s:%d" % (name, k))
    want = per * len(pubs)
    for i, c in enumerate(clients):
        got = collect(c, want, [n.encode() + b":" for n in names], 20)
        check_in_order(got, names, per, "client %d (worker %d)" % (i, c.worker))
    # Text goes through as UTF-8 bytes (the app encodes and decodes).
    pubs[1].send("utf8:h\u00e9llo \u20ac")
    for i, c in enumerate(clients):
        got = collect(c, 1, [b"utf8:"], 10)
        check_eq(got, ["utf8:h\u00e9llo \u20ac"], "client %d's text message" % i)
        extra = [m for op, m in c.poll(0.05) if not m.startswith(b"sync")]
        check(not extra, "client %d got more: %r" % (i, extra[:5]))
    want += 1
    ok = wait_for(lambda: metrics(sport).get(DELIVERED, 0) - before.get(DELIVERED, 0)
                  >= want * 20, 5 * SLOW)
    after = metrics(sport)
    check_eq(after[PUBLISHED] - before[PUBLISHED], want, "published messages (metrics)")
    check(ok, "delivered %r, want %d" % (after[DELIVERED] - before[DELIVERED], want * 20))
    check_eq(after[DELIVERED] - before[DELIVERED], want * 20, "delivered messages (metrics)")
    check_eq(after[DROPPED_W] + after[DROPPED_M], 0, "dropped messages")
    for c in clients:
        c.close()


def sse_subscriber(port, path):
    c = SSEClient(port, path)
    c.read_head()
    check_eq(c.head.status, 200, "event stream status")
    hello = c.wait_events(1)[0]
    check_eq(hello.type, "hello", "first event")
    c.worker = int(hello.data.split()[1])
    c.seen = 0  # events already looked at
    return c


def post(conn, path, body):
    conn.send(build_request("POST", path, {"Host": "t", "Content-Length": str(len(body))})
              + body)
    r = conn.read_response("POST")
    check_eq(r.status, 200, "publish through POST %s: %r" % (path, r.body))
    return r


def new_events(c, wait):
    c.pump(wait)
    out = c.events[c.seen:]
    c.seen = len(c.events)
    return [e.data for e in out]


@test(timeout=90)
def sse_subscribers_over_2_workers(ctx):
    srv = ctx.start(app(ctx, "pubsub_sse"), workers=2)
    check(wait_for(lambda: "all workers ready" in srv.stderr(), 10 * SLOW), "workers never all ready")
    subs = [sse_subscriber(srv.port, "/news") for _ in range(10)]
    check(len({c.worker for c in subs}) == 2, "subscribers on workers %r" % [c.worker for c in subs])
    # A keep-alive publisher on each worker (GET answers which worker, publishing nothing).
    pubs = {}
    for _ in range(60):
        c = Conn(srv.port)
        c.send(build_request("GET", "/news", {"Host": "t"}))
        w = int(c.read_response("GET").body.split()[1])
        if w in pubs:
            c.close()
        else:
            pubs[w] = c
        if len(pubs) == 2:
            break
    check_eq(sorted(pubs), [1, 2], "publishers' workers")
    waiting = set(range(len(subs)))
    for k in range(int(200 * SLOW)):
        post(pubs[1], "/news", b"sync-%d" % k)
        for i in list(waiting):
            if any(d.startswith("sync") for d in new_events(subs[i], 0.05)):
                waiting.discard(i)
        if not waiting:
            break
    check(not waiting, "subscribers %r never saw a sync message" % sorted(waiting))
    per = 50
    for k in range(per):
        post(pubs[1], "/news", b"a:%d" % k)
        post(pubs[2], "/news", b"b:%d" % k)
    for i, c in enumerate(subs):
        got = []
        end = time.time() + 20 * SLOW
        while len(got) < 2 * per and time.time() < end:
            got += [d for d in new_events(c, 0.2) if d[:2] in ("a:", "b:")]
        check_in_order(got, ["a", "b"], per, "SSE subscriber %d (worker %d)" % (i, c.worker))
    # The stream of a client that left ends its subscription (the app returns).
    subs[0].close()
    post(pubs[1], "/news", b"after")
    for c in subs[1:]:
        check(any(d == "after" for d in new_events(c, 2 * SLOW)), "a later message missing")
        c.close()
    for c in pubs.values():
        c.close()
    check("perl:" not in srv.stderr(), "the app logged: %s" % srv.stderr()[-2000:])


def live(port):
    return int(request(port, path="/stats").body.split(b"=")[1])


@test(timeout=180)
def subscription_dies_with_its_scope(ctx):
    # One worker, so /stats and the metrics speak of the worker the clients are on.
    sport = free_port()
    srv = ctx.start(app(ctx, "pubsub_chat"), workers=1, config=status_conf(sport))
    check(wait_for(lambda: len(srv.workers()) == 1, 10 * SLOW), "worker never up")
    worker = srv.workers()[0]
    clients = [WS(srv.port, "/gone") for _ in range(20)]
    check_eq(live(srv.port), 20, "live subscriptions")
    sync(clients, clients[0], "sync")
    for c in clients[5:]:
        c.close()
    check(wait_for(lambda: live(srv.port) == 5, 10 * SLOW),
          "live subscriptions after 15 clients left: %d" % live(srv.port))
    time.sleep(0.3 * SLOW)
    before = metrics(sport)
    for k in range(30):
        clients[0].send("m:%d" % k)
    for i, c in enumerate(clients[:5]):
        check_in_order(collect(c, 30, [b"m:"], 10), ["m"], 30, "client %d" % i)
    wait_for(lambda: metrics(sport)[DELIVERED] - before[DELIVERED] >= 150, 5 * SLOW)
    time.sleep(0.3 * SLOW)
    after = metrics(sport)
    # Nothing reaches the 15 that left: 30 messages to 5 subscriptions.
    check_eq(after[DELIVERED] - before[DELIVERED], 150, "deliveries after 15 clients left")
    # Clients come and go: their subscriptions and callbacks go with them.
    def churn(n):
        for k in range(n):
            c = WS(srv.port, "/gone")
            if k % 2:
                c.send("churn:%d" % k)
            c.close()
    churn(100)
    check(wait_for(lambda: live(srv.port) == 5, 10 * SLOW), "live after churn: %d" % live(srv.port))
    base = rss_kb(worker)
    churn(600)
    check(wait_for(lambda: live(srv.port) == 5, 10 * SLOW), "live after churn: %d" % live(srv.port))
    grown = rss_kb(worker) - base
    ctx.note("600 more subscribers came and went: worker RSS %+d kB" % grown)
    check(sanitized(ctx) or grown < 2048, "the worker grew by %d kB over 600 subscribers" % grown)
    for c in clients[:5]:
        c.close()
    check(wait_for(lambda: live(srv.port) == 0, 10 * SLOW), "live at the end: %d" % live(srv.port))


def api(ctx, workers=1):
    srv = ctx.start(app(ctx, "pubsub_api"), workers=workers)
    if workers:
        check(wait_for(lambda: len(srv.workers()) == workers, 10 * SLOW), "workers never up")
    return srv


def route(srv, path):
    r = request(srv.port, path=path, timeout=10)
    check_eq(r.status, 200, "status of %s (%r)" % (path, r.body[:200]))
    return r.body.decode()


@test(timeout=60)
def callbacks_run_from_the_loop(ctx):
    srv = api(ctx)
    # None ran inside publish; all three came after, in order, with their channel.
    check_eq(route(srv, "/order"), "during=0 got=a@order1 b@order1 c@order1", "/order")


@test(timeout=60)
def unsubscribe(ctx):
    srv = api(ctx)
    check_eq(route(srv, "/unsubscribe"),
             "got=a active=0 witness=a,b waiting=ended after=undef still=0", "/unsubscribe")


@test(timeout=60)
def policies_seen_from_perl(ctx):
    srv = api(ctx)
    cases = [
        # ten in one loop round: the server's queue for the subscription applies the policy
        ("burst", "drop_oldest", 3, "waiting=3 got=8,9,10 dropped=7 policy=drop_oldest max=3"),
        ("burst", "conflate", 1, "waiting=1 got=10 dropped=9 policy=conflate max=1"),
        # one per round, read later: the queue `next` reads applies it
        ("spread", "drop_oldest", 3, "waiting=3 got=8,9,10 dropped=7 policy=drop_oldest max=3"),
        ("spread", "conflate", 5, "waiting=1 got=10 dropped=9 policy=conflate max=5"),
        ("callback", "drop_oldest", 3, "waiting=0 got=8,9,10 dropped=7 policy=drop_oldest max=3"),
        ("callback", "conflate", 1, "waiting=0 got=10 dropped=9 policy=conflate max=1"),
        # five waiting, then the policy changes
        ("switch", "conflate", 1, "waiting=5 got=5 dropped=4 policy=conflate max=1"),
        ("switch", "drop_oldest", 2, "waiting=5 got=4,5 dropped=3 policy=drop_oldest max=2"),
    ]
    for mode, policy, mx, want in cases:
        check_eq(route(srv, "/policy?mode=%s&policy=%s&max=%d" % (mode, policy, mx)), want,
                 "%s under %s, max_pending %d" % (mode, policy, mx))


@test(timeout=60)
def callback_dies(ctx):
    srv = api(ctx)
    pid = route(srv, "/pid")
    # All three messages reached the dying callback; the worker serves on.
    check_eq(route(srv, "/die"), "count=3 " + pid, "/die")
    check_eq(route(srv, "/pid"), pid, "the same worker after the callbacks died")
    log = srv.stderr()
    check("perl: pub/sub callback on channel 'die' died: boom in a callback" in log,
          "the die is logged: %s" % log[-2000:])
    check("perl: pub/sub callback on channel 'die' died: boom in an async callback" in log,
          "the async callback's failure is logged: %s" % log[-2000:])
    check_eq(srv.stop(), 0, "exit status")


@test(timeout=60)
def no_delivery_after_the_app_returned(ctx):
    srv = api(ctx)
    for _ in range(5):
        check_eq(route(srv, "/finish"), "returned", "/finish")
    route(srv, "/pid")
    check("perl:" not in srv.stderr(), "a callback ran after its app returned: %s"
          % srv.stderr()[-2000:])


@test(timeout=60)
def refused_arguments(ctx):
    srv = api(ctx)
    lines = dict(l.split(": ", 1) for l in route(srv, "/errors").splitlines())
    at = " at %s line " % app(ctx, "pubsub_api")
    accepted = ["latin1", "at_limit", "max_channel"]
    for name in accepted:
        check_eq(lines.get(name), "accepted", name)
    channel = "publish: a channel name is 1 to 255 bytes (as UTF-8), without NUL"
    want = {
        "wide": "failed: publish: the message has wide characters: publish bytes "
                "(encode text first, e.g. with Encode::encode_utf8)",
        "over_limit": "failed: publish: 1048577 bytes is over the 1048576-byte limit",
        "empty_channel": "failed: " + channel,
        "long_channel": "failed: " + channel,
        "nul_channel": "failed: " + channel,
        "undef_message": "failed: publish: the message must be a byte string",
        "ref_message": "failed: publish: the message must be a byte string",
        "sub_channel": "died: subscribe: a channel name is 1 to 255 bytes (as UTF-8), without NUL",
        "sub_callback": "died: subscribe: the callback must be a code reference",
        "sub_policy": "died: subscribe: the policy is 'drop_oldest' or 'conflate'",
        "sub_option": "died: subscribe: unknown option 'colour' (policy, max_pending)",
        "sub_max": "died: subscribe: max_pending is a whole number, at least 1",
        "next_callback": "died: next: this subscription has a callback, which gets its messages",
        "set_policy": "died: set_policy: max_pending is a whole number, at least 1",
    }
    for name, msg in want.items():
        got = lines.get(name, "")
        # Each names the app's own line.
        check(got.startswith(msg + at), "%s: %r, want %r + %r..." % (name, got, msg, at))


@test(timeout=60)
def lifespan_subscription(ctx):
    srv = api(ctx)
    for _ in range(3):
        got = route(srv, "/lifespan")
        check(got.startswith("heard=hello"), "the lifespan's subscription heard: %r" % got)
    check(got.endswith("class=PAGI::Server::Pagid::PubSub"), "the lifespan object: %r" % got)
    check_eq(srv.stop(), 0, "exit status with the lifespan's subscription alive")


@test(timeout=60)
def next_loses_a_race(ctx):
    srv = api(ctx, workers=0)
    check_eq(route(srv, "/race"), "winner=timeout lost=cancelled got=m1 channel=race1", "/race")


@test(timeout=90)
def io_async_style_app(ctx):
    srv = ctx.start(app(ctx, "pubsub_io_async"), workers=2)
    check(wait_for(lambda: "all workers ready" in srv.stderr(), 10 * SLOW), "workers never all ready")
    a = client_on(srv.port, 1, path="/")
    b = client_on(srv.port, 2, path="/")
    for c in (a, b):
        end = time.time() + 10 * SLOW
        seqs = {}
        while time.time() < end and not all(len(seqs.get(w, [])) >= 30 for w in ("w1", "w2")):
            for op, p in c.poll(0.2):
                w, _, k = p.decode().partition(":")
                if w in ("w1", "w2"):
                    seqs.setdefault(w, []).append(int(k))
        for w in ("w1", "w2"):
            seq = seqs.get(w, [])
            # Every tick of each worker's timer once, in order, from the first one heard.
            check(len(seq) >= 30 and seq == list(range(seq[0], seq[0] + len(seq))),
                  "worker %d's client: ticks of %s %r" % (c.worker, w, seq[:40]))
    a.send("hi")
    for c in (a, b):
        got = collect(c, 1, [b"echo:"], 10)
        check_eq(got, ["echo:hi"], "worker %d's client: the echo" % c.worker)
    for c in (a, b):
        c.close()
    check("publish failed" not in srv.stderr(), "a publish failed: %s" % srv.stderr()[-2000:])


class PlainWS(WS):
    """test_pubsub's client, for an app that sends no "worker N" first."""

    def __init__(self, port, path):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5 * SLOW)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(("GET %s HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\n"
                           "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n" % (path, key)).encode())
        self.buf, self.pos, self.kept, self.worker = bytearray(), 0, [], None
        while b"\r\n\r\n" not in self.buf:
            self._more()
        head, rest = bytes(self.buf).split(b"\r\n\r\n", 1)
        self.buf = bytearray(rest)
        check(head.startswith(b"HTTP/1.1 101"), "handshake answered %r" % head[:40])


@test(timeout=60)
def doc_example_chat(ctx):
    """The chat app of docs/perl.md, as printed there."""
    app(ctx, "pubsub_chat")  # skips without Perl
    with open(os.path.join(HERE, "..", "..", "docs", "perl.md")) as f:
        doc = f.read()
    code = doc.split("### A chat app", 1)[1].split("```perl\n", 1)[1].split("```", 1)[0]
    path = os.path.join(ctx.tmpdir, "chat.pl")
    with open(path, "w") as f:
        f.write(code)
    srv = ctx.start(path, workers=2)
    check(wait_for(lambda: "all workers ready" in srv.stderr(), 10 * SLOW), "workers never all ready")
    clients = [PlainWS(srv.port, "/lobby") for _ in range(6)]
    other = PlainWS(srv.port, "/elsewhere")
    sync(clients, clients[0], "sync")
    for i, c in enumerate(clients):
        c.send("c%d:0" % i)
    names = ["c%d" % i for i in range(6)]
    for i, c in enumerate(clients):
        check_in_order(collect(c, 6, [b"c"], 10), names, 1, "client %d" % i)
    check_eq(other.poll(0.3 * SLOW), [], "a client of another room")
    for c in clients + [other]:
        c.close()
    check("perl:" not in srv.stderr(), "the app logged: %s" % srv.stderr()[-2000:])
