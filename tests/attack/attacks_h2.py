"""HTTP/2 static-file attacks: resets mid-DATA, zero/tiny windows,
WINDOW_UPDATE floods and overflows, files mutated while served and while
cached, ranges, HEAD, HPACK state across many responses, many streams then an
abrupt close, GOAWAY mid-transfer, TLS writes to a client that stalls."""

import os
import socket
import struct
import threading
import time

from common import H2, SLOW, Server, check, h2_get, make_cert, free_port, wait_for

MIB = 1 << 20


def pattern(n, salt=0):
    """n bytes whose every 4 say their own offset (a misplaced byte shows)."""
    words = (n + 3) // 4
    return b"".join(struct.pack(">I", (i + salt) & 0xFFFFFFFF) for i in range(words))[:n]


FILES = {"big.bin": pattern(MIB), "mid.bin": pattern(40000, 7), "small.txt": b"s" * 999 + b"\n",
         "huge.bin": pattern(4 * MIB, 3)}


class H2Target:
    """One pagid: TLS h2 (port), h2c prior knowledge (cport), HTTP/1 (hport);
    the echo app at / and the static dir at /s."""

    def __init__(self, binary, workdir):
        self.dir = os.path.join(workdir, "www")
        os.makedirs(self.dir, exist_ok=True)
        for name, data in FILES.items():
            with open(os.path.join(self.dir, name), "wb") as f:
                f.write(data)
        cert, key = make_cert(workdir)
        self.port, self.cport, self.hport = free_port(), free_port(), free_port()
        conf = ("listen:\n"
                "  - address: 127.0.0.1:%d\n    tls:\n      cert: %s\n      key: %s\n"
                "  - {address: 127.0.0.1:%d, http2: prior-knowledge}\n"
                "  - 127.0.0.1:%d\n"
                "app: echo\nmounts:\n  - {path: /s, app: 'static:%s'}\n"
                % (self.port, cert, key, self.cport, self.hport, self.dir))
        self.srv = Server(binary, workdir, "h2", conf)

    def path(self, name):
        return os.path.join(self.dir, name)

    def both(self):
        return ((self.cport, False), (self.port, True))


def expect_file(st, name, what):
    data = FILES[name]
    check(st["status"] == 200, "%s: status %r reset %r" % (what, st["status"], st["reset"]))
    check(st["ended"], "%s: stream not ended (reset %r, %d bytes)" % (what, st["reset"], len(st["data"])))
    check(bytes(st["data"]) == data, "%s: body %d bytes, expected %d (match prefix %s)"
          % (what, len(st["data"]), len(data), bytes(st["data"][:64]) == data[:64]))
    cl = dict(st["headers"]).get("content-length")
    check(cl == str(len(data)), "%s: content-length %r" % (what, cl))


def others_unaffected(t):
    """A fresh client on each protocol gets every test file whole."""
    for port, tls in t.both():
        for name in ("small.txt", "mid.bin", "big.bin"):
            expect_file(h2_get(port, "/s/" + name, tls=tls), name, "other client %s tls=%s" % (name, tls))


def raw_frame(ftype, flags, sid, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", sid) + payload


# ---------------------------------------------------------------------------


def rst_mid_data(t):
    """RST_STREAM(CANCEL) in the middle of a 1 MiB file's DATA (the window
    stalls it at 64 KiB; and again after part of it was acknowledged), on TLS
    and h2c; the same connection then serves the file whole."""
    base = t.srv.baseline()
    for port, tls in t.both():
        for _ in range(5):
            c = H2(port, tls=tls)
            c.auto_ack = False
            sid = c.request("/s/big.bin")
            c.run_until(lambda: len(c.streams[sid]["data"]) >= 16384, 5)
            got = len(c.streams[sid]["data"])
            check(0 < got <= 65535, "tls=%s: %d bytes before the window stalled it" % (tls, got))
            c.conn.reset_stream(sid, 8)
            c.conn.increment_flow_control_window(got)  # give back the connection window it used
            c.flush()
            c.auto_ack = True
            sid2 = c.request("/s/big.bin")
            c.run_until(lambda: c.done(sid2), 20)
            expect_file(c.streams[sid2], "big.bin", "after a reset, same connection tls=%s" % tls)
            # a reset while the window is open and DATA flows
            sid3 = c.request("/s/huge.bin")
            c.run_until(lambda: len(c.streams[sid3]["data"]) > 200000, 10)
            c.conn.reset_stream(sid3, 8)
            c.flush()
            sid4 = c.request("/s/mid.bin")
            c.run_until(lambda: c.done(sid4), 10)
            expect_file(c.streams[sid4], "mid.bin", "after a reset mid-flow tls=%s" % tls)
            c.close()
    others_unaffected(t)
    t.srv.check_back_to(base)
    return "40 resets mid-DATA on TLS and h2c; same-connection files whole; fds/RSS back"


def zero_window(t):
    """INITIAL_WINDOW_SIZE 0: headers come, no DATA; other clients are served
    meanwhile; a connection+stream WINDOW_UPDATE then brings the file whole."""
    base = t.srv.baseline()
    for port, tls in t.both():
        c = H2(port, tls=tls, window=0)
        sids = [c.request("/s/" + n) for n in ("big.bin", "mid.bin", "small.txt")]
        c.run_until(lambda: all(c.streams[s]["status"] for s in sids), 5)
        c.run_until(lambda: False, 1.0)
        for s in sids:
            st = c.streams[s]
            check(st["status"] == 200, "zero window tls=%s: status %r" % (tls, st["status"]))
            check(len(st["data"]) == 0 and not st["reset"],
                  "zero window tls=%s: %d DATA bytes sent past a 0 window" % (tls, len(st["data"])))
        others_unaffected(t)
        c.conn.update_settings({4: 65535})  # SETTINGS_INITIAL_WINDOW_SIZE back up
        c.flush()
        c.run_until(lambda: all(c.done(s) for s in sids), 30)
        for s, n in zip(sids, ("big.bin", "mid.bin", "small.txt")):
            expect_file(c.streams[s], n, "after the window opened tls=%s" % tls)
        c.close()
    t.srv.check_back_to(base)
    return "no DATA past a 0 window on TLS/h2c; others served; whole after SETTINGS raise"


def tiny_window(t):
    """Stream windows of 1 byte, opened by 1-byte WINDOW_UPDATEs: the server
    sends exactly what the window allows, and the bytes are the file's."""
    base = t.srv.baseline()
    for port, tls in t.both():
        c = H2(port, tls=tls, window=1)
        c.auto_ack = False
        sid = c.request("/s/mid.bin")
        sid2 = c.request("/s/big.bin")
        c.run_until(lambda: len(c.streams[sid]["data"]) >= 1 and len(c.streams[sid2]["data"]) >= 1, 5)
        for i in range(300):
            c.conn.increment_flow_control_window(1, stream_id=sid)
            c.conn.increment_flow_control_window(1)
            c.flush()
            if i % 50 == 0:
                c.run_until(lambda: False, 0.05)
        c.run_until(lambda: len(c.streams[sid]["data"]) >= 301, 5)
        c.run_until(lambda: False, 0.3)
        got = len(c.streams[sid]["data"])
        check(got == 301, "tls=%s: 301 bytes of window, %d bytes sent" % (tls, got))
        check(bytes(c.streams[sid]["data"]) == FILES["mid.bin"][:got], "tls=%s: tiny-window bytes wrong" % tls)
        c.conn.increment_flow_control_window(4 * MIB, stream_id=sid)
        c.conn.increment_flow_control_window(4 * MIB, stream_id=sid2)
        c.conn.increment_flow_control_window(8 * MIB)
        c.auto_ack = True
        c.flush()
        c.run_until(lambda: c.done(sid) and c.done(sid2), 30)
        expect_file(c.streams[sid], "mid.bin", "tiny window then opened tls=%s" % tls)
        expect_file(c.streams[sid2], "big.bin", "tiny window then opened tls=%s" % tls)
        c.close()
    t.srv.check_back_to(base)
    return "1-byte windows honoured exactly (301 bytes), bytes right, then whole"


def window_update_flood(t):
    """20000 WINDOW_UPDATE frames (connection and stream) while a file is
    served; then windows pushed past 2^31-1 (a FLOW_CONTROL_ERROR by RFC 9113):
    the server survives, answers with RST/GOAWAY, and serves other clients."""
    base = t.srv.baseline()
    for port, tls in t.both():
        c = H2(port, tls=tls)
        sid = c.request("/s/big.bin")
        frames = b"".join(raw_frame(8, 0, 0, struct.pack(">I", 1)) +
                          raw_frame(8, 0, sid, struct.pack(">I", 1)) for _ in range(10000))
        try:
            c.sock.sendall(frames)
        except OSError:
            pass
        # h2's own window bookkeeping is now off; read raw, count bytes only
        end = time.monotonic() + 5 * SLOW
        c.sock.settimeout(0.5)
        total = 0
        while time.monotonic() < end:
            try:
                b = c.sock.recv(1 << 20)
            except (socket.timeout, OSError):
                break
            if not b:
                break
            total += len(b)
        check(total > 0, "tls=%s: nothing came back after the WINDOW_UPDATE flood" % tls)
        c.close(rst=True)
        # overflow: a stream window past 2^31-1
        c = H2(port, tls=tls)
        sid = c.request("/s/big.bin")
        c.sock.sendall(raw_frame(8, 0, sid, struct.pack(">I", 0x7FFFFFFF)) +
                       raw_frame(8, 0, 0, struct.pack(">I", 0x7FFFFFFF)))
        c.sock.settimeout(3 * SLOW)
        got = b""
        try:
            while True:
                b = c.sock.recv(1 << 20)
                if not b:
                    break
                got += b
        except (socket.timeout, OSError):
            pass
        # a GOAWAY (type 7) or RST_STREAM (type 3) with FLOW_CONTROL_ERROR (3)
        check(b"\x00\x00\x00\x03" in got, "tls=%s: no FLOW_CONTROL_ERROR after a window overflow" % tls)
        c.close()
    check(t.srv.alive(), "master died")
    others_unaffected(t)
    t.srv.check_back_to(base)
    return "flood survived, overflow answered FLOW_CONTROL_ERROR, others served"


def file_truncated_while_served(t):
    """A 1 MiB file stalled by the window, truncated to 100 KiB, then the
    window opened: the stream must not END normally short of its
    content-length (reset or connection closed), the bytes it got must be the
    old file's; a new request sees 100 KiB."""
    base = t.srv.baseline()
    for port, tls in t.both():
        p = t.path("trunc.bin")
        with open(p, "wb") as f:
            f.write(FILES["big.bin"])
        c = H2(port, tls=tls)
        c.auto_ack = False
        sid = c.request("/s/trunc.bin")
        c.run_until(lambda: len(c.streams[sid]["data"]) >= 30000, 5)
        with open(p, "r+b") as f:
            f.truncate(100000)
        c.auto_ack = True
        c.conn.increment_flow_control_window(4 * MIB, stream_id=sid)
        c.conn.increment_flow_control_window(4 * MIB)
        c.flush()
        c.run_until(lambda: c.done(sid) or c.closed, 15)
        st = c.streams[sid]
        cl = int(dict(st["headers"])["content-length"])
        check(cl == MIB, "tls=%s: content-length %d" % (tls, cl))
        n = len(st["data"])
        check(c.done(sid) or c.closed, "tls=%s: truncated file's stream hung (%d bytes)" % (tls, n))
        check(not (st["ended"] and n != cl),
              "tls=%s: stream ENDED normally with %d bytes of a %d content-length" % (tls, n, cl))
        check(bytes(st["data"]) == FILES["big.bin"][:n], "tls=%s: wrong bytes in the truncated stream" % tls)
        c.close()
        st2 = h2_get(port, "/s/trunc.bin", tls=tls)
        check(st2["status"] == 200 and bytes(st2["data"]) == FILES["big.bin"][:100000]
              and dict(st2["headers"]).get("content-length") == "100000",
              "tls=%s: after truncation: %r %d bytes" % (tls, st2["status"], len(st2["data"])))
    t.srv.check_back_to(base)
    return "truncation mid-stream: never a short normal END, bytes right, new length seen"


def file_grown_and_replaced(t):
    """A file grown while stalled in flight sends exactly its old length;
    a cached (<=64 KiB) file rewritten in place with the same size, or renamed
    over, is served new on the next request, with a new ETag, while a stream
    that started on the old content finishes with the old bytes whole."""
    base = t.srv.baseline()
    for port, tls in t.both():
        p = t.path("grow.bin")
        with open(p, "wb") as f:
            f.write(FILES["big.bin"][:300000])
        c = H2(port, tls=tls)
        c.auto_ack = False
        sid = c.request("/s/grow.bin")
        c.run_until(lambda: len(c.streams[sid]["data"]) >= 30000, 5)
        with open(p, "ab") as f:
            f.write(FILES["big.bin"][300000:])
        c.auto_ack = True
        c.conn.increment_flow_control_window(4 * MIB, stream_id=sid)
        c.conn.increment_flow_control_window(4 * MIB)
        c.flush()
        c.run_until(lambda: c.done(sid), 15)
        st = c.streams[sid]
        check(st["ended"] and bytes(st["data"]) == FILES["big.bin"][:300000],
              "tls=%s: grown file: ended=%s %d bytes (expected 300000)" % (tls, st["ended"], len(st["data"])))
        c.close()
        # cached small file: warm the cache, stall a stream on it, rewrite it
        q = t.path("swap.txt")
        old, new = b"A" * 20000, b"B" * 20000
        with open(q, "wb") as f:
            f.write(old)
        for _ in range(3):
            s0 = h2_get(port, "/s/swap.txt", tls=tls)
            check(bytes(s0["data"]) == old, "tls=%s: swap.txt warm-up" % tls)
        etag_old = dict(s0["headers"]).get("etag")
        c = H2(port, tls=tls, window=0)
        sid = c.request("/s/swap.txt")
        c.run_until(lambda: c.streams[sid]["status"], 5)
        time.sleep(0.02)
        with open(q, "r+b") as f:  # same size, in place
            f.write(new)
        s1 = h2_get(port, "/s/swap.txt", tls=tls)
        check(bytes(s1["data"]) == new, "tls=%s: rewritten in place, served %r..." % (tls, bytes(s1["data"][:8])))
        check(dict(s1["headers"]).get("etag") != etag_old, "tls=%s: same ETag after a rewrite" % tls)
        c.conn.update_settings({4: 65535})
        c.flush()
        c.run_until(lambda: c.done(sid), 10)
        st = c.streams[sid]
        check(st["ended"] and len(st["data"]) == 20000 and len(set(st["data"])) == 1,
              "tls=%s: stalled stream on the old cached content: %d bytes, mixed=%s"
              % (tls, len(st["data"]), len(set(st["data"])) > 1))
        c.close()
        tmp = t.path(".swap.tmp")
        with open(tmp, "wb") as f:
            f.write(b"C" * 30000)
        os.rename(tmp, q)
        s2 = h2_get(port, "/s/swap.txt", tls=tls)
        check(bytes(s2["data"]) == b"C" * 30000 and dict(s2["headers"]).get("content-length") == "30000",
              "tls=%s: renamed over: %d bytes" % (tls, len(s2["data"])))
        os.unlink(q)
        s3 = h2_get(port, "/s/swap.txt", tls=tls)
        check(s3["status"] == 404, "tls=%s: deleted cached file answered %r" % (tls, s3["status"]))
    t.srv.check_back_to(base)
    return "growth sends old length; cached rewrite/rename/unlink seen at once; stalled old stream consistent"


def ranges_and_head(t):
    """Range and HEAD over h2 on cached and sendfile'd files."""
    for port, tls in t.both():
        for name in ("mid.bin", "big.bin"):
            data = FILES[name]
            for rng, lo, hi in (("bytes=100-199", 100, 200), ("bytes=-10", len(data) - 10, len(data)),
                                ("bytes=%d-" % (len(data) - 5), len(data) - 5, len(data)),
                                ("bytes=0-0", 0, 1), ("bytes=70000-", 70000, len(data))):
                if lo >= len(data):
                    continue
                st = h2_get(port, "/s/" + name, tls=tls, extra=[("range", rng)])
                h = dict(st["headers"])
                check(st["status"] == 206, "%s %s tls=%s: status %r" % (name, rng, tls, st["status"]))
                check(bytes(st["data"]) == data[lo:hi] and h.get("content-length") == str(hi - lo)
                      and h.get("content-range") == "bytes %d-%d/%d" % (lo, hi - 1, len(data)),
                      "%s %s tls=%s: %d bytes, headers %r" % (name, rng, tls, len(st["data"]), h))
            st = h2_get(port, "/s/" + name, tls=tls, extra=[("range", "bytes=%d-" % (len(data) + 10))])
            check(st["status"] == 416 and dict(st["headers"]).get("content-range") == "bytes */%d" % len(data),
                  "%s unsatisfiable tls=%s: %r %r" % (name, tls, st["status"], st["headers"]))
            st = h2_get(port, "/s/" + name, tls=tls, method="HEAD")
            h = dict(st["headers"])
            check(st["status"] == 200 and st["ended"] and len(st["data"]) == 0
                  and h.get("content-length") == str(len(data)),
                  "HEAD %s tls=%s: %r, %d body bytes, cl %r" % (name, tls, st["status"], len(st["data"]),
                                                               h.get("content-length")))
            etag = h.get("etag")
            st = h2_get(port, "/s/" + name, tls=tls, extra=[("if-none-match", etag)])
            check(st["status"] == 304 and len(st["data"]) == 0, "If-None-Match %s tls=%s: %r"
                  % (name, tls, st["status"]))
    return "206 bodies/content-range right, 416, HEAD has no DATA and the right length, 304"


def hpack_many_responses(t):
    """300 responses of mixed kinds (200 cached/sendfile, 206, 304, 404, HEAD)
    on one connection, with header table sizes 4096, 0 and 64: every
    response's headers decode to what its file says (a prepared header block
    that breaks the HPACK dynamic table shows here)."""
    for port, tls in t.both():
        for table in (None, 0, 64):
            c = H2(port, tls=tls)
            if table is not None:
                c.conn.update_settings({1: table})
                c.flush()
            etags = {}
            reqs = []
            for i in range(300):
                name = ("small.txt", "mid.bin", "big.bin", "nope.txt")[i % 4]
                kind = (i // 4) % 4
                extra = []
                method = "GET"
                if kind == 1 and name != "nope.txt":
                    extra = [("range", "bytes=1-10")]
                elif kind == 2 and name in etags:
                    extra = [("if-none-match", etags[name])]
                elif kind == 3:
                    method = "HEAD"
                sid = c.request("/s/" + name, method=method, extra=extra)
                reqs.append((sid, name, kind, method, extra))
                if len(reqs) % 20 == 0:
                    c.run_until(lambda: all(c.done(r[0]) for r in reqs), 30)
                    for r in reqs:
                        h = dict(c.streams[r[0]]["headers"])
                        if r[1] != "nope.txt" and h.get("etag"):
                            etags[r[1]] = h["etag"]
            c.run_until(lambda: all(c.done(r[0]) for r in reqs), 30)
            for sid, name, kind, method, extra in reqs:
                st = c.streams[sid]
                h = dict(st["headers"])
                what = "tls=%s table=%s stream %d %s %s %r" % (tls, table, sid, method, name, extra)
                check(c.done(sid), what + ": not done")
                if name == "nope.txt":
                    check(st["status"] == 404, what + ": %r" % st["status"])
                    continue
                size = len(FILES[name])
                ctype = {"small.txt": "text/plain", "mid.bin": "application/octet-stream",
                         "big.bin": "application/octet-stream"}[name]
                if not (extra and extra[0][0] == "if-none-match"):
                    check(h.get("content-type", "").startswith(ctype),
                          what + ": content-type %r" % h.get("content-type"))
                if extra and extra[0][0] == "range":
                    check(st["status"] == 206 and h.get("content-range") == "bytes 1-10/%d" % size
                          and bytes(st["data"]) == FILES[name][1:11], what + ": %r %r" % (st["status"], h))
                elif extra:
                    check(st["status"] == 304 and h.get("etag") == extra[0][1], what + ": %r %r" % (st["status"], h))
                else:
                    check(st["status"] == 200 and h.get("content-length") == str(size)
                          and "content-range" not in h, what + ": %r %r" % (st["status"], h))
                    if method == "GET":
                        check(bytes(st["data"]) == FILES[name], what + ": body %d bytes" % len(st["data"]))
                names = [k for k, _ in st["headers"]]
                check(len(names) == len(set(names)), what + ": duplicate headers %r" % names)
            c.close()
    return "1800 mixed responses decode right with header tables 4096/0/64"


def many_streams_abrupt_close(t):
    """5 connections x 100 streams of 1-4 MiB files, read a little, then
    closed with RST (and once with the window stalled): fds and RSS back to
    the baseline, the worker the same, other clients served."""
    base = t.srv.baseline()
    for round_ in range(2):
        for port, tls in t.both():
            conns = []
            for k in range(5):
                c = H2(port, tls=tls)
                c.auto_ack = (k % 2 == 0)
                for i in range(100):
                    c.request("/s/" + ("big.bin", "huge.bin", "mid.bin")[i % 3])
                c.run_until(lambda: sum(len(s["data"]) for s in c.streams.values()) > 60000, 5)
                conns.append(c)
            for c in conns:
                c.close(rst=True)
    others_unaffected(t)
    t.srv.check_back_to(base, rss_slack_kib=24576)
    return "1000 streams cut by RST; fds/RSS back, worker kept, others whole"


def goaway_mid_transfer(t):
    """The client sends GOAWAY while three large streams are in flight and
    keeps reading: the server finishes them whole (or closes); then a client
    that sends GOAWAY and closes at once leaves nothing behind."""
    base = t.srv.baseline()
    for port, tls in t.both():
        c = H2(port, tls=tls)
        sids = [c.request("/s/" + n) for n in ("big.bin", "huge.bin", "mid.bin")]
        c.run_until(lambda: sum(len(c.streams[s]["data"]) for s in sids) > 100000, 5)
        c.sock.sendall(raw_frame(7, 0, 0, struct.pack(">II", 0, 0)))  # GOAWAY, h2 lib unaware
        c.run_until(lambda: all(c.done(s) for s in sids) or c.closed, 30)
        for s, n in zip(sids, ("big.bin", "huge.bin", "mid.bin")):
            st = c.streams[s]
            if st["ended"]:
                expect_file(st, n, "after client GOAWAY tls=%s" % tls)
            else:
                check(c.closed or st["reset"] is not None, "tls=%s: stream %d hung after GOAWAY" % (tls, s))
        c.close()
        for _ in range(10):
            c = H2(port, tls=tls)
            for n in ("big.bin", "huge.bin"):
                c.request("/s/" + n)
            c.conn.close_connection()
            c.flush()
            c.close()
    others_unaffected(t)
    t.srv.check_back_to(base)
    return "streams finish whole or cleanly after client GOAWAY; abrupt GOAWAY+close leaks nothing"


def tls_stalled_reader(t):
    """Over TLS, 6 clients x 4 streams of big files with a 4 KiB receive
    buffer that do not read for 1.5 s (the server's SSL_write retries on a
    full socket), then read: every byte in order, each file whole."""
    base = t.srv.baseline()
    results = []

    def one(k):
        try:
            c = H2(t.port, tls=True, rcvbuf=4096)
            c.conn.increment_flow_control_window(64 * MIB)
            c.flush()
            names = ("huge.bin", "big.bin", "mid.bin", "big.bin")
            sids = []
            for n in names:
                sid = c.request("/s/" + n)
                c.conn.increment_flow_control_window(16 * MIB, stream_id=sid)
                sids.append(sid)
            c.flush()
            time.sleep(1.5 * SLOW)
            c.run_until(lambda: all(c.done(s) for s in sids), 60)
            for s, n in zip(sids, names):
                expect_file(c.streams[s], n, "stalled TLS reader %d" % k)
            c.close()
            results.append(None)
        except Exception as e:
            results.append("%s: %s" % (type(e).__name__, e))

    th = [threading.Thread(target=one, args=(k,)) for k in range(6)]
    for x in th:
        x.start()
    for x in th:
        x.join(120)
    errs = [r for r in results if r]
    check(len(results) == 6 and not errs, "stalled TLS readers: %r" % errs[:2])
    t.srv.check_back_to(base, rss_slack_kib=24576)
    return "24 TLS streams to stalled small-buffer readers arrive byte-exact"


def interleaved_many_files(t):
    """40 concurrent streams over 8 connections per protocol, files of every
    size, client windows of odd sizes (16383, 100001): every body exact (DATA
    from files at the wrong offset, or a frame of another stream, shows)."""
    base = t.srv.baseline()
    for port, tls in t.both():
        for win in (16383, 100001):
            conns = []
            for _ in range(4):
                c = H2(port, tls=tls, window=win, max_frame=16384)
                names = [("big.bin", "mid.bin", "small.txt", "huge.bin", "mid.bin")[i % 5] for i in range(10)]
                c.want = list(zip([c.request("/s/" + n) for n in names], names))
                conns.append(c)
            for c in conns:
                c.run_until(lambda: all(c.done(s) for s, _ in c.want), 60)
                for s, n in c.want:
                    expect_file(c.streams[s], n, "interleaved win=%d tls=%s" % (win, tls))
                c.close()
    t.srv.check_back_to(base)
    return "80 interleaved streams per protocol byte-exact with odd windows"


ATTACKS = [rst_mid_data, zero_window, tiny_window, window_update_flood, file_truncated_while_served,
           file_grown_and_replaced, ranges_and_head, hpack_many_responses, many_streams_abrupt_close,
           goaway_mid_transfer, tls_stalled_reader, interleaved_many_files]
