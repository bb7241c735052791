"""HTTP/2 request heads and response fields at their inline limits (24 scope
fields, 256 path bytes, 512 field bytes), header blocks split by CONTINUATION
at every byte, interleaved, reset, cut by GOAWAY, trailers, churn of reset
streams; response field names and values of every short length with CR/LF/NUL
at each position over HTTP/1.1 and HTTP/2. A raw frame client (hpack from
python3-h2) so that malformed sequences can be sent."""

import os
import socket
import struct

import hpack

from common import SLOW, Server, check, free_port, h1_raw

HERE = os.path.dirname(os.path.abspath(__file__))
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST, SETTINGS, PING, GOAWAY, WINUPD, CONT = 0, 1, 3, 4, 6, 7, 8, 9
END_STREAM, END_HEADERS = 1, 4


class FieldsTarget:
    def __init__(self, binary, workdir):
        self.cport, self.hport = free_port(), free_port()
        conf = ("listen:\n  - {address: 127.0.0.1:%d, http2: prior-knowledge}\n  - 127.0.0.1:%d\n"
                "app: %s\n" % (self.cport, self.hport, os.path.join(HERE, "fields.pl")))
        self.srv = Server(binary, workdir, "fields", conf)


def frame(ftype, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", sid) + payload


class Raw:
    """Prior-knowledge h2c with hand-made frames; responses decoded per stream."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10 * SLOW)
        # A HEADERS right after a WINDOW_UPDATE would wait for the server's
        # delayed ACK (Nagle): 40 ms a request otherwise.
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.enc, self.dec = hpack.Encoder(), hpack.Decoder()
        self.dec.max_allowed_table_size = 65536
        self.buf = b""
        self.streams, self.goaway, self.closed = {}, None, False
        self.block, self.block_sid = b"", None
        self.sock.sendall(PREFACE + frame(SETTINGS, 0, 0))

    def block_for(self, path, extra=(), method="GET"):
        return self.enc.encode([(":method", method), (":path", path), (":scheme", "http"),
                                (":authority", "localhost")] + list(extra))

    def send(self, data):
        try:
            self.sock.sendall(data)
        except OSError:
            self.closed = True

    def st(self, sid):
        return self.streams.setdefault(sid, {"headers": None, "data": b"", "ended": False, "reset": None})

    def pump(self, timeout=0.5):
        self.sock.settimeout(timeout * SLOW)
        try:
            d = self.sock.recv(1 << 20)
        except socket.timeout:
            return True
        except OSError:
            self.closed = True
            return False
        if not d:
            self.closed = True
            return False
        self.buf += d
        while len(self.buf) >= 9:
            n = int.from_bytes(self.buf[:3], "big")
            if len(self.buf) < 9 + n:
                break
            t, fl, sid = self.buf[3], self.buf[4], int.from_bytes(self.buf[5:9], "big") & 0x7FFFFFFF
            p, self.buf = self.buf[9:9 + n], self.buf[9 + n:]
            if t == SETTINGS and not fl & 1:
                self.send(frame(SETTINGS, 1, 0))
            elif t == PING and not fl & 1:
                self.send(frame(PING, 1, 0, p))
            elif t in (HEADERS, CONT):
                if t == HEADERS and fl & 8:
                    p = p[1:len(p) - p[0]]
                if t == HEADERS and fl & 0x20:
                    p = p[5:]
                self.block += p
                if fl & END_HEADERS:
                    hs = self.dec.decode(self.block, raw=True)
                    self.block = b""
                    s = self.st(sid)
                    if s["headers"] is None:
                        s["headers"] = hs
                    if fl & END_STREAM:
                        s["ended"] = True
                elif t == HEADERS:
                    self.block_fl = fl
            elif t == DATA:
                self.st(sid)["data"] += p
                if n:
                    self.send(frame(WINUPD, 0, 0, struct.pack(">I", n)) + frame(WINUPD, 0, sid, struct.pack(">I", n)))
                if fl & END_STREAM:
                    self.st(sid)["ended"] = True
            elif t == RST:
                self.st(sid)["reset"] = int.from_bytes(p[:4], "big")
            elif t == GOAWAY:
                self.goaway = (int.from_bytes(p[:4], "big") & 0x7FFFFFFF, int.from_bytes(p[4:8], "big"))
        return True

    def until(self, pred, timeout=10):
        for _ in range(int(timeout * 5)):
            if pred() or self.closed:
                break
            self.pump(0.2)
        return pred()

    def done(self, sid):
        s = self.streams.get(sid)
        return s is not None and (s["ended"] or s["reset"] is not None)

    def close(self):
        self.sock.close()


def status_of(s):
    return int(dict(s["headers"])[b":status"]) if s and s["headers"] else None


def parse_body(b):
    out = []
    for line in b.decode().splitlines():
        k, _, v = line.partition("=")
        out.append((k, v))
    return out


def expect_echo(c, sid, path, fields, what):
    check(c.until(lambda: c.done(sid)), "%s: no answer (goaway %r)" % (what, c.goaway))
    s = c.streams[sid]
    check(status_of(s) == 200 and s["ended"], "%s: status %r reset %r" % (what, status_of(s), s["reset"]))
    got = parse_body(s["data"])
    raw = path.split("?")[0]
    check(("raw_path", raw) in got, "%s: raw_path wrong in %r" % (what, got[:3]))
    want = [("host", b"localhost".hex())] + [(n, v.encode().hex()) for n, v in fields]
    have = [kv for kv in got if kv[0] not in ("path", "raw_path", "query")]
    check(have == want, "%s: headers %d, expected %d; first diff %r" % (
        what, len(have), len(want), next(((a, b) for a, b in zip(have, want) if a != b), None)))


def used_bytes(path, fields):
    return sum(len(n) + len(v) + 2 for n, v in
               [(":method", "GET"), (":path", path), (":scheme", "http"), (":authority", "localhost")] + fields)


def inline_limits(t):
    """23/24/25 scope fields, 255/256/257-byte paths (and with a query), and
    field areas of 510..514 bytes, in one connection each combination."""
    c = Raw(t.cport)
    n = 0
    for nfields in range(19, 24):  # scope fields = host + these: 20..24 .. nf+1 = 24..28
        for plen in (254, 255, 256, 257, 300):
            for q in ("", "?q=1"):
                path = "/" + "p" * (plen - 1) + q
                fields = [("x-f%02d" % i, "v%d" % i) for i in range(nfields)]
                sid = 1 + 2 * n
                c.send(frame(HEADERS, END_STREAM | END_HEADERS, sid, c.block_for(path, fields)))
                expect_echo(c, sid, path, fields, "fields=%d path=%d%s" % (nfields, plen, q))
                n += 1
    for target in range(506, 520):
        fields = [("x-a", "b")]
        base = used_bytes("/u", fields)
        fields.append(("x-pad", "z" * (target - base - len("x-pad") - 2)))
        check(used_bytes("/u", fields) == target, "area arithmetic")
        sid = 1 + 2 * n
        c.send(frame(HEADERS, END_STREAM | END_HEADERS, sid, c.block_for("/u", fields)))
        expect_echo(c, sid, "/u", fields, "area=%d" % target)
        n += 1
    c.close()
    return "%d requests at the inline limits echoed exactly" % n


def block(path, fields):
    return hpack.Encoder().encode([(":method", "GET"), (":path", path), (":scheme", "http"),
                                   (":authority", "localhost")] + [(n, v, True) for n, v in fields])


def big_head_fields():
    return [("x-h%02d" % i, "%02d" % i + "w" * 17) for i in range(26)]  # ~26 fields, > 512 bytes


def continuation_every_split(t):
    """One head past every inline limit, its block cut into HEADERS +
    CONTINUATION at each of its first and last 40 bytes and every 7th between,
    then into eight pieces."""
    fields = big_head_fields()
    path = "/" + "c" * 260
    c = Raw(t.cport)
    sid = 1
    k = 1
    while True:
        blk = block(path, fields)  # literals never indexed: every block the same
        blk_len = len(blk)
        if k >= blk_len:
            break
        c.send(frame(HEADERS, END_STREAM, sid, blk[:k]) + frame(CONT, END_HEADERS, sid, blk[k:]))
        expect_echo(c, sid, path, fields, "split at %d of %d" % (k, blk_len))
        sid += 2
        k += 1 if k < 40 or k > blk_len - 40 else 7
    for step in (1, 3, 64):  # eight pieces (nghttp2 refuses more CONTINUATIONs: a flood)
        cuts = [0] + [step * i for i in range(1, 8)] + [blk_len]
        frames = frame(HEADERS, END_STREAM, sid, blk[:cuts[1]])
        for i in range(1, 8):
            frames += frame(CONT, END_HEADERS if i == 7 else 0, sid, blk[cuts[i]:cuts[i + 1]])
        c.send(frames)
        expect_echo(c, sid, path, fields, "eight pieces, %d bytes each" % step)
        sid += 2
    c.close()
    return "block of %d bytes split at %d places, then in eight pieces" % (blk_len, (sid - 1) // 2)


def mid_block(t):
    """A header block left open (past 512 bytes of fields), then: HEADERS of
    another stream, DATA of another stream, RST_STREAM of itself, PING,
    GOAWAY, a CONTINUATION for another stream, EOF: each a connection error
    (GOAWAY PROTOCOL_ERROR) or a clean close; a second connection is served
    meanwhile and after."""
    fields = big_head_fields()
    blk = block("/x", fields)
    half = len(blk) // 2 + 100
    cases = {
        "headers_other": frame(HEADERS, END_STREAM | END_HEADERS, 3, block("/y", [])),
        "data_other": frame(DATA, 0, 3, b"zz"),
        "rst_self": frame(RST, 0, 1, struct.pack(">I", 8)),
        "ping": frame(PING, 0, 0, b"12345678"),
        "goaway": frame(GOAWAY, 0, 0, struct.pack(">II", 0, 0)),
        "cont_other": frame(CONT, END_HEADERS, 3, blk[half:]),
        "settings": frame(SETTINGS, 0, 0),
        "eof": b"",
    }
    bystander = Raw(t.cport)
    bsid = 1
    for name, bad in cases.items():
        c = Raw(t.cport)
        c.send(frame(HEADERS, END_STREAM, 1, blk[:half]) + bad)
        if name == "eof":
            c.sock.shutdown(socket.SHUT_WR)
        ok = c.until(lambda: c.closed, 10)
        check(ok, "%s: connection still open (goaway %r, streams %r)" % (name, c.goaway, list(c.streams)))
        if name not in ("eof", "goaway"):
            check(c.goaway and c.goaway[1] == 1, "%s: goaway %r" % (name, c.goaway))
        check(1 not in c.streams or c.streams[1]["headers"] is None, "%s: stream 1 answered" % name)
        c.close()
        bystander.send(frame(HEADERS, END_STREAM | END_HEADERS, bsid, block("/b", fields)))
        expect_echo(bystander, bsid, "/b", fields, "bystander after " + name)
        bsid += 2
    bystander.close()
    return "%d interruptions of an open block: each a connection error, a bystander served" % len(cases)


def trailers(t):
    """Requests with a body and trailers (a second header block, past 24
    fields and 512 bytes), interleaved with other streams' heads; trailers of
    a stream opened before the current one."""
    c = Raw(t.cport)
    fields = big_head_fields()
    tblk = hpack.Encoder().encode([("x-t%02d" % i, "t" * 30, True) for i in range(30)])
    for round_ in range(20):
        a, b = 1 + 4 * round_, 3 + 4 * round_
        c.send(frame(HEADERS, END_HEADERS, a, block("/a%d" % round_, fields)))
        c.send(frame(DATA, 0, a, b"body"))
        c.send(frame(HEADERS, END_HEADERS, b, block("/b%d" % round_, fields[:3])))
        c.send(frame(HEADERS, END_STREAM, a, tblk[:50]) + frame(CONT, END_HEADERS, a, tblk[50:]))
        c.send(frame(DATA, END_STREAM, b, b""))
        expect_echo(c, a, "/a%d" % round_, fields, "trailers stream %d" % a)
        expect_echo(c, b, "/b%d" % round_, fields[:3], "stream %d beside trailers" % b)
    c.close()
    return "20 rounds of trailers beside another stream's head"


def reset_churn(t):
    """3000 streams with heads past every inline limit opened and reset at
    once (RST_STREAM right after END_HEADERS, some mid-body), ten connections;
    then fds back to baseline and requests served right."""
    base = t.srv.baseline()
    fields = big_head_fields()
    blk = block("/" + "r" * 300, fields)
    for conn_i in range(10):
        c = Raw(t.cport)
        out = b""
        for i in range(300):
            sid = 1 + 2 * i
            end = END_STREAM if i % 2 else 0
            out += frame(HEADERS, END_HEADERS | end, sid, blk) + frame(RST, 0, sid, struct.pack(">I", 8))
            if len(out) > 60000:
                c.send(out)
                out = b""
                c.pump(0.01)
        c.send(out)
        c.until(lambda: c.closed or c.goaway is not None, 2)
        c.close()
    t.srv.check_back_to(base, timeout=20)
    c = Raw(t.cport)
    c.send(frame(HEADERS, END_STREAM | END_HEADERS, 1, block("/after", fields)))
    expect_echo(c, 1, "/after", fields, "after churn")
    c.close()
    return "3000 reset streams; fds back to baseline"


NAMES = ["a", "B", "Ab", "ETag", "vary", "Vary", "LINK", "x-Ab", "Server", "etag", "e-tag12",
         "Location", "location", "X-abcdEF"]
BAD = {0: "NUL", 10: "LF", 13: "CR"}
BAD_NAMES = ("a", "ETag", "x-Ab", "X-abcdEF")  # every position; the other names first and last


def response_fields(t):
    """Response fields of names 1-8 bytes (common ones in every case) with
    values of every length 0-17, clean and with CR, LF or NUL at each
    position: clean ones go out as written (lower case on HTTP/2), bad ones
    make a 500, on HTTP/1.1 and HTTP/2."""
    cases = []
    for name in NAMES:
        for vlen in range(18):
            val = bytes(0x61 + (i % 26) for i in range(vlen))
            cases.append((name, val, True))
            for pos in range(vlen) if name in BAD_NAMES else (0, vlen - 1)[:vlen]:
                for b in BAD:
                    v = bytearray(val)
                    v[pos] = b
                    cases.append((name, bytes(v), False))
            if vlen:
                cases.append((name, val[:1] + b"\t" + val[2:] if vlen > 2 else val, True))
                cases.append((name, val[:-1] + b"\xc3", True))
    c = Raw(t.cport)
    sid = 1
    for name, val, good in cases:
        path = "/?h=%s:%s" % (name.encode().hex(), val.hex())
        c.send(frame(HEADERS, END_STREAM | END_HEADERS, sid, block(path, [])))
        check(c.until(lambda: c.done(sid)), "h2 %r=%r: no answer" % (name, val))
        s = c.streams[sid]
        st = status_of(s)
        if good:
            hs = [(k, v) for k, v in s["headers"] if k == name.lower().encode()]
            check(st == 200 and hs == [(name.lower().encode(), val)], "h2 %r=%r: %r %r" % (name, val, st, s["headers"]))
        else:
            check(st == 500 or s["reset"] is not None, "h2 %r=%r: status %r" % (name, val, st))
        sid += 2
        if sid > 1999:
            c.close()
            c, sid = Raw(t.cport), 1
    c.close()
    n1 = 0
    for name, val, good in cases[::4] + [x for x in cases if not x[2]][::7]:
        path = "/?h=%s:%s" % (name.encode().hex(), val.hex())
        got = h1_raw(t.hport, b"GET " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        head = got.split(b"\r\n\r\n")[0]
        if good:
            check(got.startswith(b"HTTP/1.1 200 ") and (b"\r\n" + name.lower().encode() + b": " + val + b"\r\n") in head.lower() + b"\r\n"
                  or (b"\r\n" + name.encode() + b": " + val + b"\r\n") in head + b"\r\n",
                  "h1 %r=%r: %r" % (name, val, head[:200]))
        else:
            check(got.startswith(b"HTTP/1.1 500 "), "h1 %r=%r: %r" % (name, val, head[:100]))
        n1 += 1
    return "%d field cases on h2, %d on HTTP/1.1" % (len(cases), n1)


ATTACKS = [inline_limits, continuation_every_split, mid_block, trailers, reset_churn, response_fields]
