"""WebSocket memory bounds (issue 10, "every byte bounded"): the receive
queue is bounded in inflated bytes (limits.max_receive_queue_size), floods
from peers that never read stay within a few MiB per connection and the
memory goes back afterwards, an idle connection costs a few KiB (with
permessage-deflate too: no zlib stream is held between messages), and a peer
that sends a backlog, never reads, then sends a Close is released within the
configured timeouts.

RSS bounds are skipped under ASan (its quarantine keeps freed memory
resident); the scenarios and their other checks still run there."""

import os
import socket
import struct
import threading
import time
import zlib

import lib
from lib import SLOW, check, check_eq, test, wait_for
from test_attack import raise_nofile, rss_bound_kib, rss_kib
from test_websocket import RawWS, check_disconnect, masked_frame, still_serving, wsapp

MiB = 1024  # in KiB, as VmRSS counts


def deflate_payload(data):
    """data compressed without context takeover, the 00 00 ff ff tail removed."""
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    out = c.compress(data) + c.flush(zlib.Z_SYNC_FLUSH)
    check_eq(out[-4:], b"\x00\x00\xff\xff", "sync flush tail")
    return out[:-4]


def deflate_ws(port, path="/echo", rcvbuf=None):
    ws = RawWS(port, path, headers={"Sec-WebSocket-Extensions": "permessage-deflate"},
               rcvbuf=rcvbuf)
    check("permessage-deflate" in ws.headers.get("sec-websocket-extensions", ""),
          "deflate negotiated: %r" % ws.headers)
    return ws


class PeakRSS:
    """Samples a process's RSS in a thread; .peak in KiB."""

    def __init__(self, pid):
        self.pid, self.peak, self.stop = pid, rss_kib(pid) or 0, False
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        while not self.stop:
            self.peak = max(self.peak, rss_kib(self.pid) or 0)
            time.sleep(0.05)

    def end(self):
        self.stop = True
        self.t.join()
        return self.peak


def check_returns(ctx, srv, base, what, within=16 * MiB, seconds=10):
    """RSS comes back within `within` KiB of base in about `seconds`."""
    if rss_bound_kib(ctx, within) is None:
        return None
    wait_for(lambda: (rss_kib(srv.pid) or 0) - base < within, seconds * SLOW + 2, interval=0.2)
    after = (rss_kib(srv.pid) or 0) - base
    check(after < within, "RSS still %d KiB above the baseline %ds after %s (bound %d KiB)"
          % (after, seconds, what, within))
    return after


@test(timeout=120, serial=True)
def deflate_flood_is_bounded_in_bytes(ctx):
    """999 messages of 1 MiB that are about 1 KB each on the wire, from a peer
    that never reads the echoes: the queue holds at most max_receive_queue_size
    inflated bytes (then reading pauses), so the worker grows by a few MiB, not
    by the 999 MiB the messages inflate to; and the memory goes back."""
    srv = ctx.start("echo")
    base = rss_kib(srv.pid)
    msg = masked_frame(0x2, deflate_payload(b"a" * (1 << 20)))
    msg = bytes([msg[0] | 0x40]) + msg[1:]  # RSV1: compressed
    check(len(msg) < 2048, "about 1 KB on the wire (%d)" % len(msg))
    ws = deflate_ws(srv.port, rcvbuf=4096)
    peak = PeakRSS(srv.pid)
    ws.sock.settimeout(3 * SLOW)
    sent = 0
    try:
        for _ in range(999):
            ws.sock.sendall(msg)
            sent += 1
    except socket.timeout:
        pass  # pushed back: the server stopped reading
    time.sleep(2 * SLOW)
    top = peak.end() - base
    ctx.note("deflate flood: %d messages sent, RSS +%d KiB at the peak" % (sent, top))
    bound = rss_bound_kib(ctx, 64 * MiB)
    if bound is not None:
        check(top < bound, "RSS grew by %d KiB during the deflate flood (bound %d)" % (top, bound))
    ws.reset()
    after = check_returns(ctx, srv, base, "the deflate flood")
    ctx.note("deflate flood: RSS +%s KiB 10 s after" % after)
    still_serving(srv.port)


@test(timeout=120, serial=True)
def plain_flood_ten_clients_bounded_and_returned(ctx):
    """Ten peers flood 16 KiB messages for 3 s each and never read the
    echoes: the worker grows by less than 64 MiB and is back within 16 MiB
    of its baseline 10 s after they left."""
    srv = ctx.start("echo")
    base = rss_kib(srv.pid)
    peak = PeakRSS(srv.pid)
    frame = masked_frame(0x2, os.urandom(16384))
    sent = [0] * 10

    def flood(i):
        try:
            ws = RawWS(srv.port, "/echo", rcvbuf=4096)
        except (OSError, lib.Closed):
            return
        ws.sock.settimeout(0.5)
        end = time.monotonic() + 3
        while time.monotonic() < end:
            try:
                ws.sock.sendall(frame)
                sent[i] += 1
            except socket.timeout:
                continue
            except OSError:
                break
        ws.reset()

    threads = [threading.Thread(target=flood, args=(i,)) for i in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    top = peak.end() - base
    ctx.note("plain flood: %d messages, RSS +%d KiB at the peak" % (sum(sent), top))
    bound = rss_bound_kib(ctx, 64 * MiB)
    if bound is not None:
        check(top < bound, "RSS grew by %d KiB during the flood (bound %d)" % (top, bound))
    after = check_returns(ctx, srv, base, "the flood")
    ctx.note("plain flood: RSS +%s KiB 10 s after" % after)
    still_serving(srv.port)


@test(timeout=60)
def full_queue_in_bytes_pauses_then_overflows(ctx):
    """An app that does not receive: once the queue holds its bytes
    (max_receive_queue_size 64k) the server stops reading the peer; when the
    app still takes nothing for timeouts.ws_queue (here its default,
    timeouts.write) it closes with 1008 queue_overflow, exactly once, and the
    peer's Close behind the unread messages does not keep the connection."""
    queue_overflows_after(ctx, "timeouts:\n  write: 1s\n  ws_close: 1s\n")


@test(timeout=60)
def full_queue_waits_for_ws_queue_not_write(ctx):
    """timeouts.ws_queue set on its own governs the full queue: 1008 after
    it, although timeouts.write (the socket stall) is a minute."""
    queue_overflows_after(ctx, "timeouts:\n  write: 60s\n  ws_queue: 1s\n  ws_close: 1s\n")


def queue_overflows_after(ctx, timeouts):
    srv = ctx.start(wsapp(ctx), config="limits:\n  max_receive_queue_size: 64k\n" + timeouts)
    ws = RawWS(srv.port, "/noreceive?id=qb", rcvbuf=4096)
    lib.wait_event(ctx, "qb", "accepted")
    ws.sock.settimeout(2 * SLOW)
    try:
        for _ in range(200):  # 3.2 MiB: far more than 64k and the socket buffers
            ws.send_frame(0x2, b"q" * 16384)
    except OSError:
        pass
    try:
        ws.send_close(1000)
    except OSError:
        pass
    f = ws.expect_close(1008, timeout=8)
    check_eq(f.close_reason(), "receive queue overflow", "close reason")
    ws.close()
    # the app never receives: it hears of the end through on_disconnect only
    check(wait_for(lambda: "release" in lib.app_events(ctx, "qb"), 8 * SLOW), "released")
    ev = lib.app_events(ctx, "qb")
    check_eq([e for e in ev if e.startswith("on_disconnect")], ["on_disconnect queue_overflow"],
             "on_disconnect (%r)" % ev)
    check_eq(ev.count("release"), 1, "releases (%r)" % ev)


@test(timeout=60)
def full_queue_in_bytes_waits_for_a_draining_app(ctx):
    """Bigger messages than the byte bound holds, to an app that drains: they
    wait in the socket and all arrive (no 1008): the bound pushes back, it
    does not drop."""
    srv = ctx.start(wsapp(ctx), config="limits:\n  max_receive_queue_size: 16k\n")
    ws = RawWS(srv.port, "/echo?id=qd")
    lib.wait_event(ctx, "qd", "accepted")
    msgs = [bytes([65 + i]) * 20000 for i in range(8)]
    ws.sock.sendall(b"".join(masked_frame(0x2, m) for m in msgs))
    for i, m in enumerate(msgs):
        check_eq(ws.recv_message(), (2, m), "echo %d" % i)
    ws.send_close(1000)
    ws.expect_close(1000)
    check_disconnect(ctx, "qd", 1000, "")


def backlog_then_close(ctx, srv, path, frame, what, limit=16 << 20):
    """Send frames until the server pushes back (or 16 MiB), never read, then a
    Close; the server's side must be gone within write + ws_close + slack."""
    ws = RawWS(srv.port, path, headers=({"Sec-WebSocket-Extensions": "permessage-deflate"}
                                        if frame[0] & 0x40 else None), rcvbuf=4096)
    ws.sock.settimeout(1 * SLOW)
    sent = 0
    try:
        while sent < limit:
            ws.sock.sendall(frame)
            sent += len(frame)
    except OSError:
        pass
    t0 = time.monotonic()
    closer = threading.Thread(target=lambda: _try(ws.send_close, 1000), daemon=True)
    closer.start()
    # timeouts.write 2s, ws_close 1s: the worst state waits for both, one after the other
    released = wait_for(lambda: (srv.fd_count() or 0) <= srv.fd_baseline, 8 * SLOW)
    waited = time.monotonic() - t0
    ctx.note("%s: %d KiB backlog, released after %.1fs" % (what, sent >> 10, waited))
    check(released, "%s: the connection is still open %.0fs after the peer's Close (fds %s, "
                    "idle %s)" % (what, waited, srv.fd_count(), srv.fd_baseline))
    ws.close()


def one_disconnect(ctx, tid):
    """Exactly one websocket.disconnect and one release (the reason depends on which
    deadline came first: write_timeout, client_timeout, the peer's Close, queue_overflow)."""
    check(wait_for(lambda: "release" in lib.app_events(ctx, tid), 8 * SLOW),
          "%s released: %r" % (tid, lib.app_events(ctx, tid)))
    ev = lib.app_events(ctx, tid)
    check_eq(sum(1 for e in ev if e.startswith("on_disconnect")), 1, "on_disconnect %r" % ev)
    check_eq(ev.count("release"), 1, "releases %r" % ev)
    ctx.note("%s: %s" % (tid, [e for e in ev if e.startswith("on_disconnect")]))


def _try(fn, *args):
    try:
        fn(*args)
    except OSError:
        pass


@test(timeout=120)
def close_behind_backlog_is_released(ctx):
    """A peer sends a backlog of messages, never reads, then sends a Close:
    whatever state that leaves the connection in (reading paused on the
    queue's bytes or on unread output, our Close queued behind unread echoes,
    an app not receiving at all), it is released within the configured
    timeouts, with one websocket.disconnect."""
    conf = "timeouts:\n  write: 2s\n  ws_close: 1s\n"
    srv = ctx.start(wsapp(ctx), config=conf)
    backlog_then_close(ctx, srv, "/echo?id=cb1", masked_frame(0x2, b"x" * 60000), "plain echo")
    one_disconnect(ctx, "cb1")
    # 2000 messages of 64 KiB inflated, ~100 bytes each on the wire (more would be a backlog
    # of real work: every message is inflated and the echo compressed, in order)
    big = masked_frame(0x2, deflate_payload(b"b" * 65536))
    big = bytes([big[0] | 0x40]) + big[1:]
    backlog_then_close(ctx, srv, "/echo?id=cb2", big, "deflate echo", limit=2000 * len(big))
    one_disconnect(ctx, "cb2")
    backlog_then_close(ctx, srv, "/noreceive?id=cb3", masked_frame(0x2, b"n" * 16384),
                       "app not receiving")
    one_disconnect(ctx, "cb3")
    still_serving(srv.port)


def idle_cost(ctx, deflate, n=500):
    raise_nofile(4 * n + 256)
    srv = ctx.start("echo")
    time.sleep(0.2)
    base = rss_kib(srv.pid)
    conns = []
    try:
        for i in range(n):
            ws = deflate_ws(srv.port) if deflate else RawWS(srv.port, "/echo")
            conns.append(ws)
        # each connection has carried a message (its compressor and inflater were used)
        for ws in conns:
            if deflate:
                p = masked_frame(0x1, deflate_payload(b"hello idle " * 20))
                ws.sock.sendall(bytes([p[0] | 0x40]) + p[1:])
            else:
                ws.send_frame(0x1, b"hello idle " * 20)
        for ws in conns:
            f = ws.recv_frame()
            check_eq(f.opcode, 1, "echo")
        time.sleep(1.5)  # past memtrim's delay
        per = ((rss_kib(srv.pid) or 0) - base) * 1024 / n
    finally:
        for ws in conns:
            ws.close()
    return per


@test(timeout=120, serial=True)
def idle_websocket_costs_little(ctx):
    """500 idle WebSockets that each carried a message: under 3 KiB each
    (connection, scope and session records; no parser, buffer or timer
    kept)."""
    per = idle_cost(ctx, deflate=False)
    ctx.note("idle plain WebSocket: %.0f bytes each" % per)
    if rss_bound_kib(ctx, 1) is not None:
        check(per < 3 * 1024, "an idle WebSocket costs %.0f bytes (bound 3 KiB)" % per)


@test(timeout=120, serial=True)
def idle_deflate_websocket_costs_little(ctx):
    """500 idle permessage-deflate WebSockets that each carried a compressed
    message: under 12 KiB each (no zlib stream is held between messages)."""
    per = idle_cost(ctx, deflate=True)
    ctx.note("idle deflate WebSocket: %.0f bytes each" % per)
    if rss_bound_kib(ctx, 1) is not None:
        check(per < 12 * 1024, "an idle deflate WebSocket costs %.0f bytes (bound 12 KiB)" % per)
