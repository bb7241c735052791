"""The Redis backend at its bounds (docs/pubsub.md, "Across machines:
Redis"), each with a redis-server of the test's own on a free loopback
port: 10,000 long channel names subscribed again after Redis restarts (in
batches that flush as they go, not one queue past its bound); a message
from Redis larger than any pagid message is skipped and counted without
failing the link; publishes lost in a link to a Redis that froze (SIGSTOP)
are counted, so `sent` is only what Redis confirmed."""

import os
import select
import signal
import socket
import time

from lib import SLOW, TestFailure, check, check_eq, free_port, request, test, wait_for, write_config
from test_header import build_app
from test_pubsub import WS, check_in_order, collect, metrics
from test_pubsub_redis import DROPPED_B, RECONNECTS, SENT, UP, Instance, Redis, pubsub_conf
from test_pubsub_sse import Publisher

TOO_LARGE = 'pagid_pubsub_dropped_total{where="backend_too_large"}'


def resp(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class RawRedis:
    """A Redis connection on a plain socket: pipelined commands, and a RESP
    reader just good enough for replies and pushed messages."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10 * SLOW)
        self.buf = b""

    def send(self, *cmds):
        self.sock.sendall(b"".join(cmds))

    def _line(self):
        while b"\r\n" not in self.buf:
            self._more()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _more(self):
        d = self.sock.recv(1 << 20)
        if not d:
            raise EOFError("redis closed the connection")
        self.buf += d

    def reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind in (b"+", b":"):
            return int(rest) if kind == b":" else rest
        if kind == b"-":
            raise TestFailure("redis said %r" % rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self._more()
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return data
        if kind == b"*":
            return [self.reply() for _ in range(int(rest))]
        raise TestFailure("unexpected reply %r" % line[:40])

    def replies(self, wait):
        """Whole replies that arrive within wait seconds of quiet."""
        out = []
        while True:
            while self.buf.count(b"\r\n") and self._whole():
                out.append(self.reply())
            if not select.select([self.sock], [], [], wait)[0]:
                return out
            self._more()

    def _whole(self):
        """A whole reply is buffered (cheap check: parse a copy)."""
        saved = self.buf
        try:
            self.sock.setblocking(False)
            self.reply()
            return True
        except (BlockingIOError, EOFError):
            return False
        finally:
            self.sock.setblocking(True)
            self.sock.settimeout(10 * SLOW)
            self.buf = saved

    def command(self, *args):
        self.send(resp(*args))
        return self.reply()

    def close(self):
        self.sock.close()


def numsub(port, channels):
    """How many subscribers Redis counts for each of channels."""
    r = RawRedis(port)
    try:
        out = r.command("PUBSUB", "NUMSUB", *channels)
        return [out[i + 1] for i in range(0, len(out), 2)]
    finally:
        r.close()


def channel_name(i, length):
    """The name manysubs.c gives channel i."""
    s = "ch%d" % i
    return s + "." * (length - len(s))


@test(timeout=180)
def ten_thousand_channels_resubscribe_after_restart(ctx):
    """10,000 channels of 250 bytes (2.6 MB of SUBSCRIBE): after Redis
    restarts, every one is subscribed again, the backend is up, and a
    message on the last channel arrives."""
    n, length = 10000, 250
    so = build_app(ctx, "manysubs")
    redis = Redis(ctx)
    try:
        sport = free_port()
        path = write_config(ctx, pubsub_conf(sport, redis.port), "many.yaml")
        srv = ctx.start("%s:%d:%d" % (so, n, length), workers=1, args=["-c", path])
        names = ["pagid:" + channel_name(i, length) for i in range(n)]
        last = channel_name(n - 1, length)

        def all_subscribed():
            return min(numsub(redis.port, names)) == 1

        def heard(tag):
            """Publish tag on the last channel until the app says it heard it."""
            end = time.time() + 20 * SLOW
            r = RawRedis(redis.port)
            try:
                while time.time() < end:
                    r.command("PUBLISH", "pagid:" + last, tag)
                    body = request(srv.port, "GET", "/").body.decode()
                    if body.endswith(" %s %s" % (last, tag)):
                        return True
                    time.sleep(0.1)
            finally:
                r.close()
            return False

        check(wait_for(lambda: metrics(sport).get(UP) == 1, 20 * SLOW), "backend never up")
        check(wait_for(all_subscribed, 30 * SLOW), "not every channel subscribed at start")
        check(heard("first"), "the last channel's message did not arrive")
        redis.stop()
        check(wait_for(lambda: metrics(sport).get(UP) == 0, 10 * SLOW), "still up after stop")
        t0 = time.time()
        redis = Redis(ctx, port=redis.port, name="redis2")
        check(wait_for(lambda: metrics(sport).get(UP) == 1, 30 * SLOW),
              "backend not up again after the restart (log: %r)" % srv.stderr()[-400:])
        check(wait_for(all_subscribed, 30 * SLOW),
              "not every channel subscribed again: %d of %d" % (
                  sum(numsub(redis.port, names)), n))
        ctx.note("10,000 channels subscribed again %.1f s after the restart" % (time.time() - t0))
        check(heard("again"), "the last channel's message did not arrive after the restart")
        check("does not read the subscriptions" not in srv.stderr(),
              "the subscribe link failed on its own queue")
    finally:
        redis.stop()


@test(timeout=120)
def too_large_message_from_redis_is_skipped(ctx):
    """Another program publishes 1 MiB + 8 KiB straight into Redis between
    999 small messages: it is dropped and counted, the small ones all
    arrive in order, the link stays (no reconnect)."""
    redis = Redis(ctx)
    try:
        a = Instance(ctx, redis.port, workers=1)
        check(a.wait_up(), "backend never up")
        c = WS(a.srv.port, "/big")
        check(wait_for(lambda: numsub(redis.port, ["pagid:big"]) == [1], 10 * SLOW),
              "pagid never subscribed to pagid:big")
        r = RawRedis(redis.port)
        half = 500
        big = b"B" * ((1 << 20) + 8192)
        cmds = [resp("PUBLISH", "pagid:big", "s:%d" % k) for k in range(half)]
        cmds.append(resp("PUBLISH", "pagid:big", big))
        cmds += [resp("PUBLISH", "pagid:big", "s:%d" % k) for k in range(half, 2 * half - 1)]
        r.send(*cmds)
        for _ in cmds:
            r.reply()
        r.close()
        got = collect(c, 2 * half - 1, [b"s:"], 30)
        check_in_order(got, ["s"], 2 * half - 1, "a subscriber around a too-large message")
        m = a.m()
        check_eq(m.get(TOO_LARGE), 1, "too-large messages counted")
        check_eq(m.get(RECONNECTS, 0), 0, "reconnects")
        check_eq(m.get(UP), 1, "backend up")
        check("reply too large" not in a.srv.stderr(), "the link failed on the large message")
        c.close()
    finally:
        redis.stop()


@test(timeout=180)
def frozen_redis_losses_are_counted(ctx):
    """Redis frozen (SIGSTOP) for 21 s while 50 messages a second are
    published: every publish ends up sent (Redis answered it) or counted
    dropped, and every message counted as sent reached a subscriber whose
    connection to Redis lasted through the freeze."""
    redis = Redis(ctx)
    try:
        a = Instance(ctx, redis.port, workers=1)
        check(a.wait_up(), "backend never up")
        watch = RawRedis(redis.port)
        watch.command("SUBSCRIBE", "pagid:stall")
        pub = Publisher(a.srv.port, "stall")
        for k in range(int(100 * SLOW)):  # the link works end to end
            pub.send("sync")
            if watch.replies(0.1):
                break
        else:
            raise TestFailure("the watcher never heard pagid")
        watch.replies(0.5)
        before = a.m()
        os.kill(redis.proc.pid, signal.SIGSTOP)
        n = 0
        try:
            t0 = time.time()
            while time.time() - t0 < 21:
                pub.send("t:%d" % n)
                n += 1
                time.sleep(max(0.0, t0 + n / 50.0 - time.time()))
        finally:
            os.kill(redis.proc.pid, signal.SIGCONT)
        check(a.wait_up(1, 30 * SLOW), "backend not back after SIGCONT")

        def settled():
            m = a.m()
            return m[SENT] - before[SENT] + m[DROPPED_B] - before[DROPPED_B] >= n
        check(wait_for(settled, 20 * SLOW), "publishes neither sent nor dropped: %r" % a.m())
        got = []
        for msg in watch.replies(2 * SLOW):
            if isinstance(msg, list) and msg[0] == b"message" and b"t:" in msg[2]:
                got.append(int(msg[2].split(b"t:")[1]))
        watch.close()
        m = a.m()
        sent, dropped = m[SENT] - before[SENT], m[DROPPED_B] - before[DROPPED_B]
        ctx.note("%d published while frozen: %d sent, %d dropped, %d heard" % (
            n, sent, dropped, len(got)))
        check(got == sorted(set(got)), "heard out of order or twice")
        check_eq(sent + dropped, n, "sent + dropped")
        check(sent <= len(got), "%d counted as sent, %d heard" % (sent, len(got)))
        check(len(got) + dropped >= n,
              "%d lost without being counted (%d heard, %d dropped of %d)" % (
                  n - len(got) - dropped, len(got), dropped, n))
    finally:
        redis.stop()
