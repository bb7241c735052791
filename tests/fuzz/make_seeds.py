#!/usr/bin/env python3
"""make_seeds.py - write the hand-made seed corpora of the fuzz harnesses
http1_parser, config, ws_frame, ws_deflate and tls (the utf8 and static
harnesses keep their own seeds).

Each seed is one meaningful input (a valid case or a known-tricky one), named
for what it is; the files are committed, this script documents how they were
made and re-creates them: tests/fuzz/make_seeds.py [DIR] (default: corpus/).
Seeds named regress-* are reproducers of bugs the fuzzers found: keep them.
"""
import os
import ssl
import struct
import sys
import zlib

here = os.path.dirname(os.path.abspath(__file__))
root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "corpus")


def put(harness, name, data):
    d = os.path.join(root, harness)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("latin-1")
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---------------------------------------------------------------- http1_parser
# First byte: piece size (byte % 17 + 1) and limit set ((byte / 17) % 4).
H = {
    "cl-body": "POST /up HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello",
    "chunked-trailers": "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                        "5;a=b\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-T: 1\r\n\r\n",
    "chunked-then-get": "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
                        "GET /next HTTP/1.1\r\nHost: h\r\n\r\n",
    "smuggle-cl-te": "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "smuggle-two-cl": "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcde",
    "smuggle-te-gzip": "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
    "chunk-size-overflow": "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFF\r\n",
    "chunk-bare-lf": "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\n0\n\n",
    "expect-continue": "PUT /f HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc",
    "http10-keepalive": "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET / HTTP/1.0\r\n\r\n",
    "absolute-form": "GET http://example.com/a%20b?q=1 HTTP/1.1\r\nHost: example.com\r\n\r\n",
    "percent-path": "GET /a%2Fb/%zz/%00/../x?%41=%42 HTTP/1.1\r\nHost: h\r\n\r\n",
    "cookies": "GET / HTTP/1.1\r\nHost: h\r\nCookie: a=1\r\nCOOKIE: b=2\r\ncookie: c=3\r\n\r\n",
    "obs-fold": "GET / HTTP/1.1\r\nHost: h\r\nX-A: one\r\n two\r\n\r\n",
    "space-before-colon": "GET / HTTP/1.1\r\nHost : h\r\n\r\n",
    "websocket-upgrade": "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                         "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    "sse": "GET /events HTTP/1.1\r\nHost: h\r\nAccept: text/html, text/event-stream;q=0.9\r\n\r\n",
    "http2-preface": "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    "version-bad": "GET / HTTP/1.2\r\nHost: h\r\n\r\n",
    "many-headers": "GET / HTTP/1.1\r\n" + "".join("X-%d: v\r\n" % i for i in range(20)) + "\r\n",
    "long-target": "GET /" + "a" * 300 + " HTTP/1.1\r\nHost: h\r\n\r\n",
    "nul-in-header": "GET / HTTP/1.1\r\nHost: h\r\nX-A: a\x00b\r\n\r\n",
    "options-star": "OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n",
    "head-with-cl": "HEAD / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n",
}
for i, (name, text) in enumerate(sorted(H.items())):
    put("http1_parser", name, bytes([(i * 5) % 68]) + text.encode("latin-1"))

# ---------------------------------------------------------------- config
with open(os.path.join(here, "..", "..", "conf", "pagid.yaml"), "rb") as f:
    put("config", "example", f.read())
C = {
    "minimal": "listen: 127.0.0.1:8080\napp: hello\n",
    "listen-forms": "listen:\n  - '[::1]:8080'\n  - ':9000'\n  - unix:/tmp/p.sock\n  - 8081\nworkers: 2\n",
    "listen-dup": "listen: [127.0.0.1:1, 127.0.0.1:1]\n",
    "sizes": "limits:\n  max_body_size: 10m\n  max_header_size: 64k\n  max_connections: 1g\n"
             "  max_request_line: 0\n  max_ws_message_size: 99999999999999999999\n",
    "durations": "timeouts:\n  header: 500ms\n  idle: 5m\n  keepalive: 1h\n  write: 0\n  ws_close: -1s\n  request: 1.5s\n",
    "watermarks": "flow_control:\n  high_watermark: 16k\n  low_watermark: 64k\n",
    "logs": "access_log:\n  path: /tmp/a.log\n  format: '%h %r %s %{x-a}i'\nerror_log: {path: stderr, level: debug}\n",
    "app-mapping": "app: {static: /tmp, listing: true, follow_symlinks: no}\n",
    "mounts": "app: {static: /tmp, listing: yes, follow_symlinks: off}\nmounts:\n  - path: /static/\n"
              "    app: static:/tmp\n  - {path: /api, app: echo}\n"
              "  - {path: /a/../b, app: {module: x.so, listing: true}}\n  - [x]\n"
              "  - {path: /api, app: hello, extra: 1}\n",
    "unknown-key": "limits:\n  max_bogus: 1\nbogus: [1, {a: b}]\n",
    "wrong-types": "workers: [1]\nlisten: {a: b}\nlimits: 3\ntimeouts: [1,2]\n",
    "anchors": "base: &b {header: 1s}\ntimeouts: *b\nlimits: &l\n  max_connections: 5\n",
    "alias-bomb": "a: &a [x, x, x, x]\nb: &b [*a, *a, *a, *a]\nc: &c [*b, *b, *b, *b]\nd: [*c, *c, *c, *c]\n",
    "deep-nesting": "a: " + "[" * 60 + "]" * 60 + "\n",
    "multi-doc": "app: hello\n---\napp: echo\n",
    "tags": "workers: !!str 3\napp: !custom hello\n",
    "null-values": "pid_file: ~\nuser: null\ngroup:\napp: ~\n",
    "dup-keys": "app: hello\napp: echo\nworkers: 1\nworkers: auto\n",
    "bad-utf8": "app: \"\xff\xfe\"\n",
    "flow-style": "{listen: [127.0.0.1:8080], workers: 0, app: echo, limits: {max_connections: 50}}\n",
    "tabs-and-errors": "listen:\n\t- x\n  : :\n",
    "workers-huge": "workers: 100000\n",
    # include: the harness loads the input as DIR/fuzz.yaml beside the files
    # fuzz_config.c's make_files writes (a.yaml <-> b.yaml cycle, conf.d/,
    # d1..d10 past the depth limit, mounts.yaml, empty.yaml, a fifo).
    "include-glob": "listen: ':8080'\ninclude: conf.d/*.yaml\nworkers: 3\n",
    "include-cycle": "include: [a.yaml, empty.yaml]\nlimits: {max_header_count: 9}\n",
    "include-forms": "include: [missing.yaml, 'conf.d/[12]*.yaml', fifo, d1.yaml, mounts.yaml,"
                     " nothing/*.yaml, conf.d]\nmounts: [{path: /m, app: hello}]\n",
    "include-bad": "include: {a: b}\ninclude: ''\nincludes: [[x]]\n",
    # Found by the fuzzer: a folded plain scalar put a newline into "unknown app '...'".
    "regress-app-newline": "app: h':9000'\n  - ':9000'\n \n  - ':9000'\n  - &u\x00\x14",
    "did-you-mean": "limts: {}\ntimeouts: {idel: 5s}\nworkrs: 2\nidle: 1s\nerror_log: {level: wran}\n"
                    "access_log: {format: combind}\napp: helo\n",
}
for name, text in C.items():
    put("config", name, text)

# ---------------------------------------------------------------- ws_frame
# First byte: piece size (low 5 bits + 1), bit 5 = deflate negotiated.
MASK = b"\x37\xfa\x21\x3d"


def frame(op, payload, fin=True, rsv1=False, mask=MASK, masked=True, lenform=None):
    b0 = (0x80 if fin else 0) | (0x40 if rsv1 else 0) | op
    n = len(payload)
    mbit = 0x80 if masked else 0
    if lenform == 127 or (lenform is None and n > 0xFFFF):
        h = bytes([b0, mbit | 127]) + struct.pack(">Q", n)
    elif lenform == 126 or (lenform is None and n >= 126):
        h = bytes([b0, mbit | 126]) + struct.pack(">H", n)
    else:
        h = bytes([b0, mbit | n])
    if not masked:
        return h + payload
    return h + mask + bytes(c ^ mask[i % 4] for i, c in enumerate(payload))


W = {
    "text-hello": b"\x07" + frame(1, b"Hello"),
    "binary-300": b"\x03" + frame(2, bytes(range(256)) + bytes(44)),
    "fragmented-text": b"\x02" + frame(1, "héllo ".encode(), fin=False) + frame(9, b"ping")
                        + frame(0, "wörld €𝄞".encode()),
    "utf8-split-codepoint": b"\x00" + frame(1, b"\xe2\x82", fin=False) + frame(0, b"\xac"),
    "utf8-invalid": b"\x05" + frame(1, b"ok\xed\xa0\x80surrogate\xc0\xafoverlong\xf4\x90toobig"),
    "close-1000-reason": b"\x01" + frame(8, struct.pack(">H", 1000) + "bye ☺".encode()),
    "close-empty": b"\x01" + frame(8, b""),
    "close-1byte": b"\x01" + frame(8, b"\x03"),
    "close-bad-code": b"\x01" + frame(8, struct.pack(">H", 1005)),
    "close-bad-utf8": b"\x01" + frame(8, struct.pack(">H", 4000) + b"\xff"),
    "unmasked": b"\x01" + frame(1, b"x", masked=False),
    "nonminimal-126": b"\x01" + frame(2, b"abc", lenform=126),
    "nonminimal-127": b"\x01" + frame(2, b"a" * 200, lenform=127),
    "len64-topbit": b"\x01" + bytes([0x82, 0xFF]) + b"\x80" + b"\x00" * 7 + MASK,
    "control-too-long": b"\x01" + frame(9, b"p" * 126),
    "control-fragmented": b"\x01" + frame(9, b"p", fin=False),
    "cont-without-start": b"\x01" + frame(0, b"x"),
    "rsv1-deflate": b"\x21" + frame(1, b"\xf2\x48\xcd\xc9\xc9\x07\x00", rsv1=True),
    "rsv1-no-deflate": b"\x01" + frame(1, b"x", rsv1=True),
    "reserved-opcode": b"\x01" + frame(3, b"x"),
    "pong-then-text": b"\x09" + frame(10, b"") + frame(1, b"after pong"),
    "len-65536": b"\x1f" + frame(2, b"z" * 65536),
    "truncated-header": b"\x01" + frame(2, b"a" * 300)[:3],
}
for name, data in W.items():
    put("ws_frame", name, data)

# ---------------------------------------------------------------- ws_deflate
# [flags][offer length][offer][records: 2-byte length, bytes, end-of-message byte]
# flags: bit0 server_no_context_takeover, bit1 client_no_context_takeover,
# bits 2-4 server window (9 + n % 7) -- these three only when no offer -- and
# bits 5-6 the size cap (0, 100, 4096, 1 MiB).


def compress_messages(msgs, reset_each=False):
    out = []
    z = zlib.compressobj(6, zlib.DEFLATED, -15)
    for m in msgs:
        if reset_each:
            z = zlib.compressobj(6, zlib.DEFLATED, -15)
        d = z.compress(m) + z.flush(zlib.Z_SYNC_FLUSH)
        assert d.endswith(b"\x00\x00\xff\xff")
        out.append(d[:-4])
    return out


def records(payloads, split=None):
    r = b""
    for p in payloads:
        pieces = [p] if not split else [p[i:i + split] for i in range(0, len(p), split)] or [b""]
        for j, piece in enumerate(pieces):
            r += struct.pack(">H", len(piece)) + piece + bytes([1 if j == len(pieces) - 1 else 0])
    return r


def dseed(flags, offer, recs):
    return bytes([flags, len(offer)]) + offer + recs


text = [b"Hello", b"Hello", b"Hello, Hello, Hello", b"", "ünïcödé".encode() * 20]
D = {
    "context-takeover": dseed(0x60, b"", records(compress_messages(text))),
    "no-context-takeover": dseed(0x63, b"", records(compress_messages(text, reset_each=True))),
    "split-pieces": dseed(0x40, b"", records(compress_messages([b"abc" * 500]), split=7)),
    "bomb": dseed(0x40, b"", records(compress_messages([b"\x00" * 200000]))),
    "over-cap-100": dseed(0x20, b"", records(compress_messages([b"x" * 101]))),
    "corrupt": dseed(0x60, b"", records([b"\xff\xff\xff\xff"])),
    "bfinal-block": dseed(0x60, b"", records([zlib.compress(b"final", 6)[2:-4]])),
    "empty-payload": dseed(0x60, b"", records([b"", b""])),
    "offer-simple": dseed(0x60, b"permessage-deflate", records(compress_messages([b"hi"]))),
    "offer-params": dseed(0x60, b"permessage-deflate; client_max_window_bits; server_max_window_bits=10;"
                                b" server_no_context_takeover", records(compress_messages([b"hi", b"hi"]))),
    "offer-list": dseed(0x60, b"x-webkit-deflate-frame, permessage-deflate; foo=1, permessage-deflate;"
                              b" client_no_context_takeover", records(compress_messages([b"a", b"b"]))),
    "offer-quoted": dseed(0x60, b'permessage-deflate; server_max_window_bits="12"; client_max_window_bits="015"', b""),
    "offer-window-8": dseed(0x60, b"permessage-deflate; server_max_window_bits=8", b""),
    "offer-dup": dseed(0x60, b"permessage-deflate; server_no_context_takeover; server_no_context_takeover", b""),
    # Bug found by this harness: an empty message sent after another one with
    # context takeover compressed to an empty payload (the peer desynchronised).
    "regress-empty-messages-with-context": bytes([0x20, 0x00]) + b"\x00\x01\x00\x01" * 3,
}
for name, data in D.items():
    put("ws_deflate", name, data)


# ---------------------------------------------------------------- tls
# First byte even: raw client bytes, fed in pieces of 1 << (byte >> 2 & 7)
# (0: all at once), a FIN at the end when byte & 2. First byte odd: a real
# client makes the handshake (TLS 1.2 only when byte & 2, a small server
# send buffer when byte & 4), then a script of steps (see fuzz_tls.c):
# 0 LEN16 client writes, 1 deliver, 2 LEN16 deliver part, 3 N BYTES splice,
# 4 LEN16 server reads, 5 LEN16 CUTS16 server writev, 6 LEN16 sendfile,
# 7 client reads, 8 pending check, 9 B key update, 10 B end (B&1:
# close_notify, else FIN), 11 server close_notify.
def hello_and_outgoing(**kw):
    """A ClientHello from Python's ssl (OpenSSL): what a real client sends."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if kw.get("max_version"):
        ctx.maximum_version = kw["max_version"]
    ctx.set_alpn_protocols(["http/1.1"])
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname="localhost")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


def rec(ctype, payload, version=b"\x03\x03"):
    return bytes([ctype]) + version + struct.pack(">H", len(payload)) + payload


def u16(n):
    return struct.pack("<H", n)


ch13 = hello_and_outgoing()
ch12 = hello_and_outgoing(max_version=ssl.TLSVersion.TLSv1_2)
T = {
    "raw-clienthello-tls13": b"\x00" + ch13,
    "raw-clienthello-tls12": b"\x00" + ch12,
    "raw-clienthello-fin": b"\x02" + ch13,
    "raw-clienthello-bytewise": b"\x04" + ch13,
    "raw-clienthello-then-records": b"\x00" + ch13 + rec(20, b"\x01") + rec(23, bytes(range(64)))
                                    + rec(21, b"\x01\x00"),
    "raw-clienthello-split-16": b"\x10" + ch12 + rec(22, b"\x14\x00\x00\x0c" + b"\x00" * 12),
    "raw-alert": b"\x00" + rec(21, b"\x02\x28"),
    "raw-plain-connect": b"\x04CONNECT a:443 HTTP/1.1\r\n\r\n",
    "raw-heartbeat": b"\x00" + rec(24, b"\x01\x40\x00" + b"A" * 16),
    "raw-oversized-record": b"\x00" + b"\x16\x03\x01\xff\xff" + b"\x01" * 64,
    "raw-sslv2-hello": b"\x00" + b"\x80\x2e\x01\x00\x02\x00\x15\x00\x00\x00\x10" + b"\x00\x00\x2f" * 7
                       + b"R" * 16,
    "raw-plain-http": b"\x02" + b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",
    "raw-empty-fin": b"\x02",
    # scripted
    "script-request-response": b"\x01" + b"\x00" + u16(300) + b"\x01" + b"\x04" + u16(4096)
                               + b"\x05" + u16(5000) + u16(0x1234) + b"\x07",
    "script-tls12": b"\x03" + b"\x00" + u16(100) + b"\x01\x04" + u16(100) + b"\x05" + u16(300)
                    + u16(7) + b"\x07" + b"\x0a\x01\x01\x04" + u16(10),
    "script-pending": b"\x01" + b"\x00" + u16(16000) + b"\x01" + b"\x04" + u16(10) + b"\x08\x08\x08",
    "script-partial-record": b"\x01" + b"\x00" + u16(3000) + b"\x02" + u16(1000) + b"\x04" + u16(3000)
                             + b"\x08\x01\x04" + u16(3000),
    "script-small-sndbuf-writes": b"\x05" + (b"\x05" + u16(39000) + u16(0xffff)) * 6 + b"\x07"
                                  + (b"\x06" + u16(30000)) * 4 + b"\x07" + b"\x05" + u16(100) + u16(3),
    "script-sendfile": b"\x01" + (b"\x06" + u16(20000) + b"\x07") * 3,
    "script-splice-garbage": b"\x01" + b"\x00" + u16(50) + b"\x02" + u16(20) + b"\x03\x07" + b"garbage!"
                             + b"\x01\x04" + u16(100) + b"\x05" + u16(10) + u16(0),
    "script-key-update": b"\x01" + b"\x09\x01" + b"\x00" + u16(10) + b"\x01\x04" + u16(10)
                         + b"\x05" + u16(10) + u16(0) + b"\x07",
    "script-fin": b"\x01" + b"\x00" + u16(10) + b"\x0a\x00" + b"\x04" + u16(100) + b"\x04" + u16(100),
    "script-close-notify-both": b"\x01" + b"\x0b\x07" + b"\x0a\x01\x01\x04" + u16(10)
                                + b"\x05" + u16(10) + u16(0),
}
for name, data in T.items():
    put("tls", name, data)
