"""Publish/subscribe across pagid instances through Redis (docs/pubsub.md,
"Across machines: Redis"), with a redis-server started by the test on a
free loopback port: two instances of 2 workers each, clients spread over
both, every client receives every message once and in order per publisher;
Redis stopped mid-stream: local delivery goes on, publishes for the other
instance are kept up to pubsub.buffer then dropped and counted, and after
Redis comes back on the same port both instances reconnect (the metrics say
so) and cross-instance delivery resumes; a reload with another url moves
an instance to another Redis; a bad url is a config error at its
FILE:LINE:COLUMN."""

import os
import shutil
import signal
import socket
import subprocess
import time

import lib
from lib import SLOW, Skip, TestFailure, check, check_eq, free_port, test, wait_for, write_config
from test_pubsub import WS, check_in_order, collect, metrics

UP = "pagid_pubsub_backend_up"
SENT = 'pagid_pubsub_backend_messages_total{direction="sent"}'
RECEIVED = 'pagid_pubsub_backend_messages_total{direction="received"}'
DROPPED_B = 'pagid_pubsub_dropped_total{where="backend"}'
RECONNECTS = "pagid_pubsub_backend_reconnects_total"


class Redis:
    """A redis-server of the test's own: loopback, no persistence, stopped by its pid."""

    def __init__(self, ctx, port=None, name="redis"):
        exe = shutil.which("redis-server")
        if not exe:
            raise Skip("redis-server is not installed (Debian: redis-server; dev.sh installs it)")
        self.ctx = ctx
        self.port = port or free_port()
        self.log = os.path.join(ctx.tmpdir, "%s-%d.log" % (name, self.port))
        self.proc = subprocess.Popen(
            [exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
             "no", "--dir", ctx.tmpdir, "--logfile", self.log, "--daemonize", "no"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not wait_for(self.ping, 10):
            self.stop()
            raise TestFailure("redis-server on port %d did not answer PING" % self.port)

    def ping(self):
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10 * SLOW)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def pubsub_conf(sport, redis_port, extra="", host="127.0.0.1"):
    return ("status:\n  listen: 127.0.0.1:%d\n"
            "pubsub:\n  backend: redis\n  url: redis://%s:%d/0\n%s"
            % (sport, host, redis_port, extra))


class Instance:
    def __init__(self, ctx, redis_port, extra="", workers=2, host="127.0.0.1"):
        self.sport = free_port()
        self.path = write_config(ctx, pubsub_conf(self.sport, redis_port, extra, host),
                                 "redis-%d.yaml" % self.sport)
        self.srv = ctx.start("pubsub", workers=workers, args=["-c", self.path])
        check(wait_for(lambda: len(self.srv.workers()) == workers, 10 * SLOW),
              "workers never all up")

    def m(self):
        return metrics(self.sport)

    def wait_up(self, up=1, timeout=15):
        return wait_for(lambda: self.m().get(UP) == up, timeout)


def spread(inst, n, path):
    """n clients of inst, over both its workers (connections land where they land)."""
    clients = [WS(inst.srv.port, path) for _ in range(n)]
    for _ in range(40):
        if len({c.worker for c in clients}) >= 2:
            return clients
        clients.append(WS(inst.srv.port, path))
    raise TestFailure("no client landed on a second worker: %r" % [c.worker for c in clients])


def by_worker(clients):
    out = {}
    for c in clients:
        out.setdefault(c.worker, c)
    return [out[k] for k in sorted(out)]


def sync_all(clients, publishers, tag):
    """Each publisher publishes tag-P-k until every client saw one of it: the
    subscriptions are then known to both masters and to Redis."""
    for pi, pub in enumerate(publishers):
        mark = ("%s-%d-" % (tag, pi)).encode()
        waiting = set(range(len(clients)))
        for k in range(int(300 * SLOW)):
            pub.send("%s-%d-%d" % (tag, pi, k))
            for i in list(waiting):
                for op, p in clients[i].poll(0.05):
                    if p.startswith(mark):
                        waiting.discard(i)
                    elif not p.startswith(tag.encode()):
                        clients[i].kept.append((op, p))
            if not waiting:
                break
        check(not waiting, "clients %r never saw %s" % (sorted(waiting), mark.decode()))
    time.sleep(0.5 * SLOW)  # late sync messages arrive before what is counted
    for c in clients:
        c.kept = [(op, p) for op, p in c.kept + c.poll(0.05) if not p.startswith(tag.encode())]


def close_all(clients):
    for c in clients:
        c.close()


@test(timeout=120)
def two_instances_share_one_redis(ctx):
    redis = Redis(ctx)
    try:
        a, b = Instance(ctx, redis.port), Instance(ctx, redis.port)
        check(a.wait_up() and b.wait_up(), "backend never up: %r %r" % (a.m().get(UP), b.m().get(UP)))
        ca, cb = spread(a, 10, "/room"), spread(b, 10, "/room")
        clients = ca + cb
        ctx.note("clients per worker: a %r, b %r" % (
            sorted(c.worker for c in ca), sorted(c.worker for c in cb)))
        pubs = by_worker(ca)[:2] + by_worker(cb)[:2]  # one per worker of each instance
        check_eq(len(pubs), 4, "publishers")
        sync_all(clients, pubs, "sync")
        ma, mb = a.m(), b.m()
        per = 50
        names = ["p%d" % i for i in range(len(pubs))]
        for k in range(per):  # interleaved publishers on both instances
            for name, p in zip(names, pubs):
                p.send("%s:%d" % (name, k))
        want = per * len(pubs)
        for i, c in enumerate(clients):
            got = collect(c, want, [n.encode() + b":" for n in names], 30)
            check_in_order(got, names, per, "client %d (%s, worker %d)" % (
                i, "a" if i < len(ca) else "b", c.worker))
            extra = [m for op, m in c.poll(0.1) if not m.startswith(b"sync")]
            check(not extra, "client %d got more: %r" % (i, extra[:5]))
        # Each instance sent its own 100 and received the other's 100, once.
        check(wait_for(lambda: a.m()[RECEIVED] - ma[RECEIVED] >= 2 * per
                       and b.m()[RECEIVED] - mb[RECEIVED] >= 2 * per, 5), "received counts")
        for name, inst, before in (("a", a, ma), ("b", b, mb)):
            now = inst.m()
            check_eq(now[SENT] - before[SENT], 2 * per, "%s: messages sent to redis" % name)
            check_eq(now[RECEIVED] - before[RECEIVED], 2 * per,
                     "%s: messages received from redis" % name)
            check_eq(now[DROPPED_B], 0, "%s: dropped for the backend" % name)
            check_eq(now[UP], 1, "%s: backend up" % name)
        check("pubsub: connected to redis at 127.0.0.1:%d" % redis.port in a.srv.stderr(),
              "no 'connected' line in the log")
        close_all(clients)
    finally:
        redis.stop()


def redis_cmd(port, *args):
    """One command to the test's Redis, as the default user: its reply's first line."""
    out = b"*%d\r\n" % len(args) + b"".join(
        b"$%d\r\n%s\r\n" % (len(a.encode()), a.encode()) for a in args)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(out)
        return s.recv(256).split(b"\r\n")[0]


@test(timeout=60)
def refused_command_keeps_the_connection(ctx):
    """An ACL that refuses one channel: that SUBSCRIBE is counted and logged
    once (escaped); the connection stays up, no reconnect storm."""
    redis = Redis(ctx)
    try:
        check_eq(redis_cmd(redis.port, "ACL", "SETUSER", "app", "on", ">pw", "resetchannels",
                           "&pagid:room", "~*", "+@all"), b"+OK", "ACL SETUSER")
        a = Instance(ctx, redis.port, host="app:pw@127.0.0.1")
        check(a.wait_up(), "backend never up: %r" % a.m().get(UP))
        ok, no = WS(a.srv.port, "/room"), WS(a.srv.port, "/other")
        check(wait_for(lambda: "refused a command on the subscribe connection" in a.srv.stderr(),
                       10 * SLOW), "no refusal in the log")
        time.sleep(1.5 * SLOW)
        m = a.m()
        check_eq(m.get(UP), 1, "backend up after a refused SUBSCRIBE")
        check_eq(m.get(RECONNECTS, 0), 0, "reconnects after a refused SUBSCRIBE")
        check(m.get(DROPPED_B, 0) >= 1, "refusal not counted: %r" % m.get(DROPPED_B))
        check_eq(a.srv.stderr().count("refused a command"), 1, "refusals logged")
        ok.close()
        no.close()
    finally:
        redis.stop()


@test(timeout=120)
def frozen_redis_is_noticed(ctx):
    """A Redis that stops answering while its kernel keeps TCP alive
    (SIGSTOP): the periodic PING goes unanswered, the links are dropped
    (backend down, logged), and after SIGCONT they come back."""
    redis = Redis(ctx)
    try:
        a = Instance(ctx, redis.port)
        check(a.wait_up(), "backend never up: %r" % a.m().get(UP))
        t0 = time.time()
        os.kill(redis.proc.pid, signal.SIGSTOP)
        try:
            check(a.wait_up(0, 45 * SLOW), "a frozen redis still counts as up")
            ctx.note("noticed after %.1f s" % (time.time() - t0))
            check("no answer to PING" in a.srv.stderr(), "no PING timeout in the log")
        finally:
            os.kill(redis.proc.pid, signal.SIGCONT)
        check(a.wait_up(1, 30 * SLOW), "backend not back after SIGCONT")
    finally:
        redis.stop()


@test(timeout=60)
def host_name_is_looked_up_off_the_loop(ctx):
    """A name (not an address) is looked up in a thread: localhost connects;
    a name that does not resolve is retried and logged while the master
    goes on answering its status endpoint."""
    redis = Redis(ctx)
    try:
        a = Instance(ctx, redis.port, host="localhost")
        check(a.wait_up(), "backend never up with localhost: %r" % a.m().get(UP))
        b = Instance(ctx, redis.port, host="no-such-host.invalid")
        check(wait_for(lambda: "looking up no-such-host.invalid" in b.srv.stderr(), 20 * SLOW),
              "no lookup failure in the log")
        for _ in range(5):
            check_eq(b.m().get(UP), 0, "backend up with a name that does not resolve")
            time.sleep(0.2)
        check_eq(a.m().get(UP), 1, "localhost instance still up")
    finally:
        redis.stop()


@test(timeout=150)
def redis_stopped_and_restarted(ctx):
    redis = Redis(ctx)
    try:
        # buffer: about 10 of the 120-byte messages below (each ~200 bytes queued)
        a = Instance(ctx, redis.port, "  buffer: 2k\n")
        b = Instance(ctx, redis.port)
        check(a.wait_up() and b.wait_up(), "backend never up")
        ca, cb = spread(a, 4, "/live"), spread(b, 4, "/live")
        pa, pb = by_worker(ca)[0], by_worker(cb)[0]
        sync_all(ca + cb, [pa, pb], "sync")

        redis.stop()
        check(a.wait_up(0) and b.wait_up(0), "backend still up after redis stopped")
        check(wait_for(lambda: "pubsub: lost the connection to redis" in a.srv.stderr(), 5),
              "no 'lost' line in the log")
        before = a.m()
        n = 50
        pad = "x" * 110
        for k in range(n):
            pa.send("d:%d:%s" % (k, pad))
        # Local delivery goes on: every client of a (both workers) gets all, in order.
        for i, c in enumerate(ca):
            got = [m.rsplit(":", 1)[0] for m in collect(c, n, [b"d:"], 20)]
            check_in_order(got, ["d"], n, "a's client %d (worker %d), redis down" % (i, c.worker))
        # Past the buffer, publishes for the other instance are dropped and counted.
        dropped = a.m()[DROPPED_B] - before[DROPPED_B]
        check(0 < dropped < n, "dropped for the backend: %r of %d (buffer 2k)" % (dropped, n))
        kept = n - dropped
        ctx.note("redis down: %d of %d publishes kept for it, %d dropped" % (kept, n, dropped))
        for c in cb:
            check(not [m for op, m in c.poll(0.05) if m.startswith(b"d:")],
                  "b got a message while redis was down")

        redis = Redis(ctx, port=redis.port, name="redis2")
        check(a.wait_up(1, 20) and b.wait_up(1, 20), "backend not up again after restart")
        for name, inst in (("a", a), ("b", b)):
            check(inst.m()[RECONNECTS] >= 1, "%s: reconnects %r" % (name, inst.m()[RECONNECTS]))
        check(wait_for(lambda: "pubsub: reconnected to redis" in a.srv.stderr(), 5),
              "no 'reconnected' line in the log")
        # What a kept while down went to redis once it was back (b hears it only
        # if it had subscribed again by then): never twice, in order.
        check(wait_for(lambda: a.m()[SENT] - before[SENT] >= kept, 10),
              "kept messages not sent: %r of %d" % (a.m()[SENT] - before[SENT], kept))
        # a's own clients never see a's messages a second time (back from redis).
        for c in ca:
            again = [m for op, m in c.poll(0.3) if m.startswith(b"d:")]
            check(not again, "a's client got its instance's message twice: %r" % again[:3])
        # Cross-instance delivery resumes, both ways.
        sync_all(ca + cb, [pa, pb], "resync")
        for c in cb:
            late = [m.decode().split(":")[1] for op, m in c.kept if m.startswith(b"d:")]
            seq = [int(x) for x in late]
            check(seq == sorted(set(seq)) and all(x < kept for x in seq),
                  "b's late messages %r (kept %d)" % (seq, kept))
            c.kept = []
        for k in range(20):
            pa.send("e:%d" % k)
            pb.send("f:%d" % k)
        for i, c in enumerate(ca + cb):
            got = collect(c, 40, [b"e:", b"f:"], 20)
            check_in_order(got, ["e", "f"], 20, "client %d after redis came back" % i)
        close_all(ca + cb)
    finally:
        redis.stop()


@test(timeout=120)
def reload_moves_to_another_redis(ctx):
    r1, r2 = Redis(ctx, name="r1"), None
    try:
        r2 = Redis(ctx, name="r2")
        a = Instance(ctx, r1.port)
        b = Instance(ctx, r2.port)
        check(a.wait_up() and b.wait_up(), "backend never up")
        ca, cb = spread(a, 2, "/move"), spread(b, 2, "/move")
        sync_all(ca, [ca[0]], "sa")
        sync_all(cb, [cb[0]], "sb")
        # Apart: a's messages do not reach b.
        ca[0].send("apart")
        for c in ca:
            check(collect(c, 1, [b"apart"], 5) == ["apart"], "a's own client missed it")
        check(not [m for c in cb for op, m in c.poll(0.5) if m == b"apart"],
              "b heard a while they use different redis servers")
        # a's config now names r2; a reload moves it there.
        write_config(ctx, pubsub_conf(a.sport, r2.port), os.path.basename(a.path))
        old_workers = set(a.srv.workers())
        a.srv.signal(signal.SIGHUP)
        check(wait_for(lambda: "url or prefix changed" in a.srv.stderr(), 20),
              "the reload did not change the backend")
        check(a.wait_up(1, 20), "a not connected after the reload")
        # A client that lands on an old worker while it drains is closed (1001):
        # the new clients connect once only the new generation listens.
        check(wait_for(lambda: (lambda w: len(w) == 2 and not w & old_workers)(
            set(a.srv.workers())), 20), "the old workers still run: %r" % a.srv.workers())
        ca2, cb2 = spread(a, 2, "/move"), spread(b, 2, "/move")
        sync_all(ca2 + cb2, [by_worker(ca2)[0], by_worker(cb2)[0]], "sync")
        close_all(ca + cb + ca2 + cb2)
    finally:
        r1.stop()
        if r2:
            r2.stop()


@test(timeout=30)
def bad_url_is_a_config_error(ctx):
    cases = [
        ("pubsub:\n  backend: redis\n  url: redis://127.0.0.1:99999/0\n",
         ":3:8: invalid 'pubsub.url' 'redis://127.0.0.1:99999/0': the port must be a number"),
        ("pubsub:\n  backend: redis\n  url: http://127.0.0.1/\n",
         ":3:8: invalid 'pubsub.url' 'http://127.0.0.1/': expected redis://"),
        ("pubsub:\n  backend: redis\n  url: redis://:hunter2@h:0\n",
         ":3:8: invalid 'pubsub.url' 'redis://...'"),
        ("pubsub:\n  backend: redis\n", ":2:12: 'pubsub.backend: redis' needs 'pubsub.url'"),
        ("pubsub:\n  backend: kafka\n", ":2:12: invalid 'pubsub.backend' 'kafka'"),
    ]
    for i, (text, want) in enumerate(cases):
        path = write_config(ctx, text, "bad-%d.yaml" % i)
        p = subprocess.run([ctx.pagid, "-t", "-c", path] + lib.root_user_args(),
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=10 * SLOW)
        out = p.stdout.decode()
        check(p.returncode != 0, "pagid -t accepted %r" % text)
        check(path + want in out, "pagid -t on %r said %r, want %r" % (text, out, path + want))
        check("hunter2" not in out, "the password was echoed: %r" % out)
    good = write_config(ctx, "pubsub:\n  backend: redis\n  url: redis://:pw@127.0.0.1:6379/0\n"
                        "  prefix: app1/\n  buffer: 4m\n", "good.yaml")
    p = subprocess.run([ctx.pagid, "-t", "-c", good] + lib.root_user_args(),
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=10 * SLOW)
    check_eq(p.returncode, 0, "pagid -t on a good pubsub section (%s)" % p.stdout.decode())
    # pagid -T shows the configuration, never the password.
    p = subprocess.run([ctx.pagid, "-T", "-c", good] + lib.root_user_args(),
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=10 * SLOW)
    out = p.stdout.decode()
    check_eq(p.returncode, 0, "pagid -T (%s)" % out)
    check("redis://:***@127.0.0.1:6379/0" in out, "-T lacks the masked url: %r" % out)
    check(":pw@" not in out, "-T shows the password: %r" % out)
