#!/usr/bin/env python3
"""soak_client.py - the soak test's traffic: a deterministic mix of requests
against pagid's echo app, every answer checked byte for byte.

usage: soak_client.py PORT TOTAL [--procs N] [--seconds S] [--seed K]

Mix, per 100 operations (each counts as one request; a WebSocket or SSE
session counts as one):
  52  GET on a kept-alive connection (echo: empty body, x-echo-path checked)
  20  GET on a fresh connection with Connection: close
  20  POST 1..8 KiB on a kept-alive connection, body echoed
   2  POST of 1 MiB on a kept-alive connection, body echoed
   1  POST of 1 MiB chunked on a fresh connection, body echoed
   2  SSE session (?count=5): five tick events, then the stream ends
   2  WebSocket session: 5 messages echoed (text and binary), clean close
   1  WebSocket session with permessage-deflate offered: 3 messages, close
Kept-alive connections are dropped and reopened every 100 requests.
Runs N processes (default 4); stops at TOTAL or after S seconds. Prints
"soak-client: done D requests in T s (R req/s), E errors" and one line per
kind; exit 1 on any error.
"""

import argparse
import base64
import hashlib
import multiprocessing as mp
import os
import random
import socket
import struct
import sys
import time
import zlib

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
MIB = 1 << 20


class Err(Exception):
    pass


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def close(self):
        self.s.close()

    def fill(self):
        d = self.s.recv(1 << 18)
        if not d:
            raise Err("connection closed by server")
        self.buf += d

    def until(self, marker):
        while True:
            i = self.buf.find(marker)
            if i >= 0:
                out, self.buf = self.buf[:i + len(marker)], self.buf[i + len(marker):]
                return out
            self.fill()

    def exact(self, n):
        while len(self.buf) < n:
            self.fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def response(self):
        head = self.until(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        status = int(lines[0].split()[1])
        h = {}
        for ln in lines[1:]:
            if b":" in ln:
                k, v = ln.split(b":", 1)
                h[k.strip().lower()] = v.strip()
        if b"content-length" in h:
            body = self.exact(int(h[b"content-length"]))
        elif h.get(b"transfer-encoding", b"").lower() == b"chunked":
            body = b""
            while True:
                size = int(self.until(b"\r\n").split(b";")[0], 16)
                if size == 0:
                    while self.until(b"\r\n") != b"\r\n":
                        pass
                    break
                body += self.exact(size + 2)[:-2]
        else:
            body = b""
            try:
                while True:
                    self.fill()
            except Err:
                pass
            body, self.buf = self.buf, b""
        return status, h, body


def req_bytes(method, path, body=b"", close=False, chunked=False, extra=b""):
    h = b"%s %s HTTP/1.1\r\nHost: soak\r\n" % (method, path)
    if close:
        h += b"Connection: close\r\n"
    if chunked:
        h += b"Transfer-Encoding: chunked\r\n"
        parts = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 65536]), body[i:i + 65536])
                         for i in range(0, len(body), 65536))
        return h + extra + b"\r\n" + parts + b"0\r\n\r\n"
    if body:
        h += b"Content-Length: %d\r\n" % len(body)
    return h + extra + b"\r\n" + body


def check_echo(status, h, body, want_body, path):
    if status != 200:
        raise Err("status %d" % status)
    if body != want_body:
        raise Err("body mismatch (%d vs %d bytes)" % (len(body), len(want_body)))
    if h.get(b"x-echo-path") != path:
        raise Err("x-echo-path %r" % h.get(b"x-echo-path"))


def ws_frame(op, payload, rsv1=False):
    n = len(payload)
    b0 = 0x80 | (0x40 if rsv1 else 0) | op
    if n < 126:
        hd = struct.pack("!BB", b0, 0x80 | n)
    elif n <= 0xFFFF:
        hd = struct.pack("!BBH", b0, 0x80 | 126, n)
    else:
        hd = struct.pack("!BBQ", b0, 0x80 | 127, n)
    m = os.urandom(4)
    rep = (m * (n // 4 + 1))[:n]
    masked = (int.from_bytes(payload, "big") ^ int.from_bytes(rep, "big")).to_bytes(n, "big") if n else b""
    return hd + m + masked


def ws_read(c):
    h = c.exact(2)
    n = h[1] & 0x7F
    if n == 126:
        n = struct.unpack("!H", c.exact(2))[0]
    elif n == 127:
        n = struct.unpack("!Q", c.exact(8))[0]
    return h[0] & 0x0F, bool(h[0] & 0x40), c.exact(n)


def ws_session(port, rng, deflate):
    c = Conn(port)
    try:
        key = base64.b64encode(os.urandom(16))
        extra = b"Sec-WebSocket-Extensions: permessage-deflate\r\n" if deflate else b""
        c.s.sendall(b"GET /ws HTTP/1.1\r\nHost: soak\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                    b"Sec-WebSocket-Key: " + key + b"\r\nSec-WebSocket-Version: 13\r\n" + extra + b"\r\n")
        head = c.until(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 101"):
            raise Err("ws handshake: %r" % head[:40])
        want = base64.b64encode(hashlib.sha1(key + GUID.encode()).digest())
        if want not in head:
            raise Err("bad Sec-WebSocket-Accept")
        pmd = deflate and b"permessage-deflate" in head.lower()
        inflater = zlib.decompressobj(-15) if pmd else None
        deflater = zlib.compressobj(6, zlib.DEFLATED, -15) if pmd else None
        for i in range(3 if deflate else 5):
            op = 1 if i % 2 == 0 else 2
            payload = (b"soak message %d " % i) * rng.randint(1, 200)
            if pmd:
                if b"client_no_context_takeover" in head.lower():
                    deflater = zlib.compressobj(6, zlib.DEFLATED, -15)  # afresh per message
                z = deflater.compress(payload) + deflater.flush(zlib.Z_SYNC_FLUSH)
                c.s.sendall(ws_frame(op, z[:-4], rsv1=True))
            else:
                c.s.sendall(ws_frame(op, payload))
            rop, rsv1, data = ws_read(c)
            if rsv1:
                if not pmd:
                    raise Err("RSV1 without deflate")
                data = inflater.decompress(data + b"\x00\x00\xff\xff")
            if rop != op or data != payload:
                raise Err("ws echo mismatch (op %d/%d, %d/%d bytes)" % (rop, op, len(data), len(payload)))
        c.s.sendall(ws_frame(8, struct.pack("!H", 1000)))
        rop, _, data = ws_read(c)
        if rop != 8 or data[:2] != struct.pack("!H", 1000):
            raise Err("ws close reply %d %r" % (rop, data[:10]))
        try:
            while True:
                c.fill()
        except Err:
            pass  # the server closes TCP after the handshake
    finally:
        c.close()


def sse_session(port):
    c = Conn(port)
    try:
        c.s.sendall(req_bytes(b"GET", b"/?count=5", close=True, extra=b"Accept: text/event-stream\r\n"))
        status, h, body = c.response()
        if status != 200 or body.count(b"event: tick") != 5 or not h.get(b"content-type", b"").startswith(b"text/event-stream"):
            raise Err("sse: %d %r" % (status, body[:80]))
    finally:
        c.close()


KINDS = ["ka_get", "close_get", "ka_post", "ka_1mib", "close_1mib_chunked", "sse", "ws", "ws_deflate"]
WEIGHTS = [52, 20, 20, 2, 1, 2, 2, 1]


def worker(args):
    port, n, seconds, seed, idx = args
    rng = random.Random(seed * 1000 + idx)
    plan = [k for k, w in zip(KINDS, WEIGHTS) for _ in range(w)]
    big = bytes(rng.getrandbits(8) for _ in range(4096)) * 256  # 1 MiB
    counts = dict((k, 0) for k in KINDS)
    errors = []
    ka = None
    ka_uses = 0
    end = time.monotonic() + seconds
    done = 0
    while done < n and time.monotonic() < end:
        kind = plan[rng.randrange(len(plan))]
        try:
            if kind in ("ka_get", "ka_post", "ka_1mib"):
                if ka is None or ka_uses >= 100:
                    if ka:
                        ka.close()
                    ka = Conn(port)
                    ka_uses = 0
                ka_uses += 1
                path = b"/k/%d" % done
                if kind == "ka_get":
                    body = b""
                elif kind == "ka_post":
                    body = os.urandom(rng.randint(1, 8192))
                else:
                    body = big
                ka.s.sendall(req_bytes(b"POST" if body else b"GET", path, body))
                check_echo(*ka.response(), body, path)
            elif kind == "close_get":
                c = Conn(port)
                try:
                    c.s.sendall(req_bytes(b"GET", b"/c", close=True))
                    check_echo(*c.response(), b"", b"/c")
                finally:
                    c.close()
            elif kind == "close_1mib_chunked":
                c = Conn(port)
                try:
                    c.s.sendall(req_bytes(b"POST", b"/big", big, close=True, chunked=True))
                    check_echo(*c.response(), big, b"/big")
                finally:
                    c.close()
            elif kind == "sse":
                sse_session(port)
            elif kind == "ws":
                ws_session(port, rng, False)
            else:
                ws_session(port, rng, True)
            counts[kind] += 1
        except (Err, OSError, ValueError, IndexError) as e:
            errors.append("%s: %s" % (kind, e))
            if ka is not None and kind.startswith("ka"):
                ka.close()
                ka = None
            if len(errors) > 20:
                break
        done += 1
    if ka:
        ka.close()
    return counts, errors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("total", type=int)
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=1e9)
    ap.add_argument("--seed", type=int, default=1)
    o = ap.parse_args()
    per = [o.total // o.procs + (1 if i < o.total % o.procs else 0) for i in range(o.procs)]
    t0 = time.monotonic()
    with mp.Pool(o.procs) as pool:
        results = pool.map(worker, [(o.port, per[i], o.seconds, o.seed, i) for i in range(o.procs)])
    dt = time.monotonic() - t0
    counts = dict((k, 0) for k in KINDS)
    errors = []
    for c, e in results:
        for k in KINDS:
            counts[k] += c[k]
        errors += e
    done = sum(counts.values())
    for k in KINDS:
        print("soak-client:   %-20s %d" % (k, counts[k]))
    for e in errors[:10]:
        print("soak-client: error: %s" % e)
    print("soak-client: done %d requests in %.1f s (%.0f req/s), %d errors"
          % (done, dt, done / dt if dt else 0, len(errors)), flush=True)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
