"""Zero-copy sends (pagi_send_buf, pagi(3) "Zero-copy sends"): a body or a
WebSocket message handed over arrives intact with either framing, the app's
free function runs exactly once however the connection ends (written, client
gone mid-body, worker stopping), and a rejected send leaves the buffer the
app's. The app is apps/zcapp.c; it logs each free in the test log."""

import hashlib
import os
import socket
import time
import zlib

import lib
from lib import Conn, app_events, build_request, check, check_eq, request, test, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
MIB8 = 8 << 20


def zcapp(ctx):
    """apps/zcapp.c compiled once per session."""
    return lib.app_so(ctx, "zcapp")


def pattern(n):
    """What zcapp sends: 4096-byte blocks, block k = "%08x" % k then k & 0xff."""
    blocks = []
    for k in range((n + 4095) // 4096):
        blocks.append((b"%08x" % k) + bytes([k & 0xFF]) * 4088)
    return b"".join(blocks)[:n]


def sha(b):
    return hashlib.sha256(b).hexdigest()


def slow_conn(port):
    """A Conn with a small receive window: most of an 8 MiB body stays queued
    in the server (loopback buffers would otherwise take it all)."""
    c = Conn.__new__(Conn)
    c.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
    c.sock.settimeout(30 * lib.SLOW)
    c.sock.connect(("127.0.0.1", port))
    c.buf = b""
    c.eof = False
    return c


def frees(ctx, tid):
    return sum(1 for e in app_events(ctx, tid) if e == "freed")


@test(timeout=120)
def handed_over_body_arrives_intact(ctx):
    srv = ctx.start(zcapp(ctx), workers=1)
    for framing in ("cl", "chunked"):
        for mode, size in (("own", MIB8), ("buf", MIB8), ("copy", MIB8), ("own", MIB8 - 4097),
                           ("own", 1)):
            tid = "%s-%s-%d" % (framing, mode, size)
            r = request(srv.port, "GET", "/body?id=%s&mode=%s&size=%d&framing=%s"
                        % (tid, mode, size, framing), timeout=30)
            check_eq(r.status, 200, tid)
            if framing == "cl":
                check_eq(r.header("content-length"), str(size), tid + " content-length")
            else:
                check_eq(r.header("transfer-encoding"), "chunked", tid + " framing")
            check_eq(len(r.body), size, tid + " length")
            check_eq(sha(r.body), sha(pattern(size)), tid + " sha256")
            check(wait_for(lambda: "release" in app_events(ctx, tid), 5 * lib.SLOW),
                  tid + ": the scope was released")
            want = 1 if mode == "own" else 0
            check(wait_for(lambda: frees(ctx, tid) == want, 5 * lib.SLOW),
                  "%s: freed %d times, want %d" % (tid, frees(ctx, tid), want))
    # keep-alive: two handed-over bodies back to back on one connection
    c = Conn(srv.port, timeout=30)
    try:
        req = build_request("GET", "/body?id=ka&mode=own&size=300000", {"Host": "t"})
        c.send(req + req)
        for _ in range(2):
            r = c.read_response()
            check_eq(sha(r.body), sha(pattern(300000)), "keep-alive body")
    finally:
        c.close()
    check(wait_for(lambda: frees(ctx, "ka") == 2, 5 * lib.SLOW),
          "keep-alive: freed %d times, want 2" % frees(ctx, "ka"))


@test(timeout=120)
def client_gone_mid_body_frees_once(ctx):
    srv = ctx.start(zcapp(ctx), workers=1)
    for how in ("close", "reset"):
        tid = "gone-" + how
        c = slow_conn(srv.port)
        c.send(build_request("GET", "/body?id=%s&mode=own&size=%d" % (tid, MIB8), {"Host": "t"}))
        c.read_head()
        c.read_exact(200000)
        check_eq(frees(ctx, tid), 0, tid + ": not freed while queued")
        if how == "reset":
            c.reset()
        else:
            c.close()
        check(wait_for(lambda: "release" in app_events(ctx, tid), 10 * lib.SLOW),
              tid + ": the scope was released: %r" % app_events(ctx, tid))
        time.sleep(0.2)
        ev = app_events(ctx, tid)
        check_eq(frees(ctx, tid), 1, tid + ": frees in %r" % ev)
        # the parked send completes (a send after a disconnect is a no-op)
        check_eq(sum(1 for e in ev if e.startswith("sent ")), 1, tid + ": completions in %r" % ev)
    # A client that reads nothing while the worker stops: the stop closes the
    # connection after timeouts.shutdown and the buffer is freed then, once.
    srv2 = ctx.start(zcapp(ctx), workers=1, config="timeouts: {shutdown: 1s}\n")
    c = slow_conn(srv2.port)
    c.send(build_request("GET", "/body?id=stop&mode=own&size=%d" % MIB8, {"Host": "t"}))
    c.read_head()
    check(wait_for(lambda: "freed" not in app_events(ctx, "stop"), 1), "queued, not freed")
    srv2.stop(timeout=20)
    c.close()
    check_eq(frees(ctx, "stop"), 1, "freed at the worker's stop: %r" % app_events(ctx, "stop"))


@test(timeout=60)
def rejected_send_keeps_ownership(ctx):
    srv = ctx.start(zcapp(ctx), workers=1)
    r = request(srv.port, "GET", "/reject?id=rj")
    check_eq((r.status, r.body), (200, b"rejected as documented\n"), "response")
    check(wait_for(lambda: "release" in app_events(ctx, "rj"), 5 * lib.SLOW), "released")
    ev = app_events(ctx, "rj")
    check(ev[0].startswith("early -1 ") and "http.response.start was not sent" in ev[0],
          "body before start refused: %r" % ev)
    check(ev[1].startswith("start -1 ") and "carries no body" in ev[1],
          "a start event refused: %r" % ev)
    # the buffer was still the app's after both refusals, freed by its own unref
    check_eq(ev[2], "rejected len=4096 head=00000000", "buffer intact after the refusals")
    check_eq(ev[3], "freed", "freed by the app's unref, right after")
    check_eq(frees(ctx, "rj"), 1, "frees: %r" % ev)


@test(timeout=90)
def websocket_message_handed_over(ctx):
    from test_websocket import RawWS

    srv = ctx.start(zcapp(ctx), workers=1)
    size = (1 << 20) + 5
    for deflate in (False, True):
        tid = "ws-deflate" if deflate else "ws"
        hdrs = {"Sec-WebSocket-Extensions": "permessage-deflate"} if deflate else None
        ws = RawWS(srv.port, "/ws?id=%s&size=%d" % (tid, size), headers=hdrs, timeout=30)
        check_eq("sec-websocket-extensions" in ws.headers, deflate, tid + " negotiated")
        got = []
        for op in (0x2, 0x1):
            f = ws.recv_frame()
            check_eq((f.opcode, f.fin, f.rsv), (op, 1, 4 if deflate else 0), tid + " frame")
            data = f.payload
            if deflate:
                data = zlib.decompressobj(-15).decompress(data + b"\x00\x00\xff\xff")
            got.append(data)
        check_eq(sha(got[0]), sha(pattern(size)), tid + " binary message sha256")
        check_eq(got[1], b"hello, world", tid + " text message")
        ws.send_close(1000)
        check(wait_for(lambda: "release" in app_events(ctx, tid), 5 * lib.SLOW),
              tid + " released: %r" % app_events(ctx, tid))
        ws.sock.close()
        check_eq(frees(ctx, tid), 1, tid + " frees: %r" % app_events(ctx, tid))


@test(timeout=60)
def sse_send_buf_copies_and_decline_borrows(ctx):
    srv = ctx.start(zcapp(ctx), workers=1)
    r = request(srv.port, "GET", "/sse?id=sse", headers={"Accept": "text/event-stream"})
    check_eq(r.status, 200, "sse status")
    check(b"data: line one\ndata: line two\n\n" in r.body, "formatted from the buffer: %r" % r.body)
    check(wait_for(lambda: "release" in app_events(ctx, "sse"), 5 * lib.SLOW), "sse released")
    ev = app_events(ctx, "sse")
    # copied during the call: the app's unref right after it was the last reference
    check_eq(ev[:2], ["sse send 0", "freed"], "copied, freed by the app's unref: %r" % ev)
    check_eq(frees(ctx, "sse"), 1, "sse frees: %r" % ev)
    size = 3 << 20
    r = request(srv.port, "GET", "/sse-decline?id=dec&size=%d" % size,
                headers={"Accept": "text/event-stream"}, timeout=30)
    check_eq(r.status, 503, "decline status")
    check_eq(sha(r.body), sha(pattern(size)), "decline body sha256")
    check(wait_for(lambda: frees(ctx, "dec") == 1, 5 * lib.SLOW),
          "decline body freed once: %r" % app_events(ctx, "dec"))
