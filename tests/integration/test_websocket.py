"""WebSocket (RFC 6455; Www.pod "WebSocket"): the opening handshake, framing,
ping/pong, reserved bits and opcodes, fragmentation, UTF-8, the close
handshake and its timeouts, limits (1009, 1008 queue overflow), the denial
response and 403, subprotocols, keepalive, ws_idle, permessage-deflate,
backpressure, server shutdown, and peers vanishing at every step of the close.

Test groups follow the Autobahn testsuite's categories (1 framing, 2 ping/pong,
3 reserved bits, 4 opcodes, 5 fragmentation, 6 UTF-8, 7 close, 9 limits and
performance, 10 misc/autofragmentation); docs/websocket.md maps them.

Two independent clients: Debian's python3-websockets (asyncio API) for
interoperability, and a raw-socket client (below) for malformed traffic.
Scripted app behaviour comes from apps/wsapp.c, compiled once per session."""

import asyncio
import base64
import hashlib
import os
import signal
import socket
import struct
import sys
import time
import zlib

import lib
from lib import SLOW, TestFailure, app_events, check, check_eq, test, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

try:
    import websockets  # noqa: F401
except ImportError:  # Debian's package lives outside a pyenv/venv interpreter's path
    sys.path.append("/usr/lib/python3/dist-packages")
    try:
        import websockets  # noqa: F401
    except ImportError:
        websockets = None

# ---------------------------------------------------------------------------
# The test module
# ---------------------------------------------------------------------------


def wsapp(ctx):
    """Path of apps/wsapp.c compiled into this session's temp dir."""
    return lib.app_so(ctx, "wsapp")


def need_websockets():
    if websockets is None:
        raise lib.Skip("python3-websockets is not installed")


# ---------------------------------------------------------------------------
# A raw WebSocket client: exact bytes, malformed frames on purpose
# ---------------------------------------------------------------------------

class Frame:
    def __init__(self, fin, rsv, opcode, payload):
        self.fin, self.rsv, self.opcode, self.payload = fin, rsv, opcode, payload

    def close_code(self):
        if len(self.payload) >= 2:
            return struct.unpack("!H", self.payload[:2])[0]
        return 1005

    def close_reason(self):
        return self.payload[2:].decode("utf-8", "replace")

    def __repr__(self):
        return "Frame(op=%d fin=%d rsv=%d len=%d %r)" % (
            self.opcode, self.fin, self.rsv, len(self.payload), self.payload[:40])


class RawWS:
    def __init__(self, port, path="/echo", headers=None, timeout=5, handshake=True, rcvbuf=None):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout * SLOW)
        self.sock.connect(("127.0.0.1", port))
        self.buf = bytearray()
        self.eof = False
        self.key = base64.b64encode(os.urandom(16)).decode()
        self.status = None
        self.headers = {}
        if handshake:
            self.handshake(path, headers)

    def handshake(self, path, headers=None, expect=101):
        hdrs = {"Host": "t", "Upgrade": "websocket", "Connection": "Upgrade",
                "Sec-WebSocket-Key": self.key, "Sec-WebSocket-Version": "13"}
        for k, v in (headers or {}).items():
            if v is None:
                hdrs.pop(k, None)
            else:
                hdrs[k] = v
        req = "GET %s HTTP/1.1\r\n" % path + "".join("%s: %s\r\n" % kv for kv in hdrs.items())
        self.sock.sendall(req.encode() + b"\r\n")
        head = self.read_until(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split(" ")[1])
        for ln in lines[1:]:
            if ":" in ln:
                k, v = ln.split(":", 1)
                self.headers[k.strip().lower()] = v.strip()
        if expect is not None:
            check_eq(self.status, expect, "handshake status")
        if self.status == 101:
            want = base64.b64encode(hashlib.sha1(self.key.encode() + GUID).digest()).decode()
            check_eq(self.headers.get("sec-websocket-accept"), want, "Sec-WebSocket-Accept")
        return self.status

    def read_body(self):
        n = int(self.headers.get("content-length", "0"))
        return self.read_exact(n)

    def _fill(self):
        try:
            d = self.sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            d = b""
        if not d:
            self.eof = True
            raise lib.Closed()
        self.buf += d

    def read_until(self, marker):
        while marker not in self.buf:
            self._fill()
        i = self.buf.index(marker) + len(marker)
        out = bytes(self.buf[:i])
        del self.buf[:i]
        return out

    def read_exact(self, n):
        while len(self.buf) < n:
            self._fill()
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def send_frame(self, opcode, payload=b"", fin=True, rsv=0, mask=True, length=None):
        if isinstance(payload, str):
            payload = payload.encode()
        b0 = (0x80 if fin else 0) | (rsv << 4) | opcode
        n = len(payload) if length is None else length
        mbit = 0x80 if mask else 0
        if n < 126:
            hdr = struct.pack("!BB", b0, mbit | n)
        elif n < 65536:
            hdr = struct.pack("!BBH", b0, mbit | 126, n)
        else:
            hdr = struct.pack("!BBQ", b0, mbit | 127, n)
        if mask:
            key = os.urandom(4)
            body = bytes(c ^ key[i % 4] for i, c in enumerate(payload)) if len(payload) < 4096 \
                else _xor(payload, key)
            self.sock.sendall(hdr + key + body)
        else:
            self.sock.sendall(hdr + payload)

    def send_close(self, code=None, reason=b""):
        p = b"" if code is None else struct.pack("!H", code) + reason
        self.send_frame(0x8, p)

    def recv_frame(self):
        h = self.read_exact(2)
        fin, rsv, op = h[0] >> 7, (h[0] >> 4) & 7, h[0] & 0xF
        check(not (h[1] & 0x80), "server frame is masked")
        n = h[1] & 0x7F
        if n == 126:
            n = struct.unpack("!H", self.read_exact(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", self.read_exact(8))[0]
        return Frame(fin, rsv, op, self.read_exact(n))

    def recv_message(self):
        """Next data message (pongs skipped; pings answered)."""
        parts, first = [], None
        while True:
            f = self.recv_frame()
            if f.opcode == 0x9:
                self.send_frame(0xA, f.payload)
                continue
            if f.opcode == 0xA:
                continue
            if f.opcode == 0x8:
                raise TestFailure("close %d %r instead of a message" % (f.close_code(), f.payload))
            if first is None:
                first = f.opcode
            parts.append(f.payload)
            if f.fin:
                return first, b"".join(parts)

    def expect_close(self, code, timeout=5):
        """The next non-ping frame is a Close with this code."""
        self.sock.settimeout(timeout * SLOW)
        while True:
            try:
                f = self.recv_frame()
            except lib.Closed:
                raise TestFailure("connection closed without a Close frame (wanted %d)" % code)
            if f.opcode in (0x9, 0xA):
                continue
            if f.opcode != 0x8:
                continue  # data the server sent before failing
            check_eq(f.close_code(), code, "close code (reason %r)" % f.close_reason())
            return f

    def expect_eof(self, timeout=5):
        self.sock.settimeout(timeout * SLOW)
        t0 = time.monotonic()
        try:
            while True:
                self._fill()
                del self.buf[:]
        except lib.Closed:
            return time.monotonic() - t0
        except socket.timeout:
            raise TestFailure("server did not close the TCP connection within %ss" % timeout)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def reset(self):
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()


def _xor(data, key):
    k = (key * ((len(data) + 3) // 4))[:len(data)]
    return (int.from_bytes(data, "big") ^ int.from_bytes(k, "big")).to_bytes(len(data), "big")


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------

def events_for(ctx, tid):
    return app_events(ctx, tid)


def settle(ctx, tid, timeout=5):
    """Wait for the scope's release; return its log."""
    wait_for(lambda: "release" in events_for(ctx, tid), timeout)
    return events_for(ctx, tid)


def check_disconnect(ctx, tid, code, reason, timeout=5):
    """Exactly one websocket.disconnect, with this code and reason, then the release."""
    ev = settle(ctx, tid, timeout)
    disc = [e for e in ev if e.startswith("disconnect ")]
    check_eq(len(disc), 1, "websocket.disconnect deliveries (%r)" % ev)
    want = ("disconnect %d %s" % (code, reason)).rstrip()
    check_eq(disc[0].rstrip(), want, "disconnect event")
    check_eq(ev.count("release"), 1, "releases (%r)" % ev)
    return ev


def run_async(coro, timeout=20):
    return asyncio.run(asyncio.wait_for(coro, timeout * SLOW))


def still_serving(port):
    ws = RawWS(port, "/echo?id=alive")
    ws.send_frame(0x1, "still here")
    check_eq(ws.recv_message(), (1, b"still here"), "echo after the test")
    ws.send_close(1000)
    ws.expect_close(1000)
    ws.close()


# ---------------------------------------------------------------------------
# Handshake
# ---------------------------------------------------------------------------

@test()
def handshake_accept_headers_and_scope(ctx):
    srv = ctx.start(wsapp(ctx))
    ws = RawWS(srv.port, "/echo?id=hs", headers={"Sec-WebSocket-Protocol": " a , b,c "})
    check_eq(ws.headers.get("upgrade", "").lower(), "websocket", "Upgrade")
    check_eq(ws.headers.get("connection", "").lower(), "upgrade", "Connection")
    check("sec-websocket-protocol" not in ws.headers, "no subprotocol unless the app picks one")
    ws.send_frame(0x1, "hi")
    check_eq(ws.recv_message(), (1, b"hi"), "echo")
    ws.send_close(1000)
    ws.expect_close(1000)
    ev = check_disconnect(ctx, "hs", 1000, "")
    check("subprotocols a,b,c" in ev, "subprotocols parsed: %r" % ev)
    check("scheme ws ext 1" in ev, "scheme ws and the denial extension advertised: %r" % ev)
    check(ev.index("connect") < ev.index("receive text 2"), "connect first: %r" % ev)


@test()
def handshake_rejections(ctx):
    srv = ctx.start(wsapp(ctx))
    for hdrs, status in (({"Sec-WebSocket-Version": None}, 426),
                         ({"Sec-WebSocket-Version": "8"}, 426),
                         ({"Sec-WebSocket-Key": "short"}, 400),
                         ({"Sec-WebSocket-Key": None}, 400)):
        ws = RawWS(srv.port, handshake=False)
        ws.handshake("/echo?id=rej", hdrs, expect=status)
        if status == 426:
            check_eq(ws.headers.get("sec-websocket-version"), "13", "426 names version 13")
        ws.read_body()
        ws.expect_eof()
        ws.close()
    # POST with the upgrade headers
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    s.sendall(b"POST /echo HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
              b"Content-Length: 0\r\n\r\n")
    check(s.recv(100).startswith(b"HTTP/1.1 400"), "POST upgrade -> 400")
    s.close()
    check(not events_for(ctx, "rej"), "a refused handshake never reaches the app")
    still_serving(srv.port)


def masked_frame(opcode, payload, fin=True):
    key = os.urandom(4)
    n = len(payload)
    hdr = struct.pack("!BB", (0x80 if fin else 0) | opcode, 0x80 | n) if n < 126 else \
        struct.pack("!BBH", (0x80 if fin else 0) | opcode, 0x80 | 126, n)
    return hdr + key + _xor(payload, key)


@test()
def frames_sent_with_the_handshake(ctx):
    """A client that does not wait for the 101: its frames wait, then count, in order."""
    srv = ctx.start(wsapp(ctx))
    for tid, half_close in (("early", False), ("early_fin", True)):
        ws = RawWS(srv.port, handshake=False)
        ws.sock.sendall(("GET /echo?id=%s HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\n"
                         "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                         "Sec-WebSocket-Version: 13\r\n\r\n" % (tid, ws.key)).encode()
                        + masked_frame(0x1, b"early bird") + masked_frame(0x8, b"\x03\xe8"))
        if half_close:
            ws.sock.shutdown(socket.SHUT_WR)
        head = ws.read_until(b"\r\n\r\n")
        check(head.startswith(b"HTTP/1.1 101"), "101 first: %r" % head[:40])
        # The peer's Close is answered at once; the app still gets the message first.
        ws.expect_close(1000)
        ws.expect_eof()
        ws.close()
        ev = check_disconnect(ctx, tid, 1000, "")
        check(ev.index("receive text 10") < ev.index("disconnect 1000 "),
              "the early message is delivered before the disconnect: %r" % ev)


@test()
def subprotocol_negotiation(ctx):
    need_websockets()
    srv = ctx.start(wsapp(ctx))

    async def go():
        async with websockets.connect("ws://127.0.0.1:%d/echo?id=sp&proto=b" % srv.port,
                                      subprotocols=["a", "b"]) as c:
            check_eq(c.subprotocol, "b", "chosen subprotocol")
            await c.send("x")
            check_eq(await c.recv(), "x", "echo")
    run_async(go())
    # echo (the built-in) picks the first offered
    srv2 = ctx.start("echo")

    async def go2():
        async with websockets.connect("ws://127.0.0.1:%d/" % srv2.port,
                                      subprotocols=["chat", "other"]) as c:
            check_eq(c.subprotocol, "chat", "echo picks the first offered")
    run_async(go2())


@test()
def bad_sends_are_rejected_with_clear_errors(ctx):
    srv = ctx.start(wsapp(ctx))
    ws = RawWS(srv.port, "/badsends?id=bad")
    check_eq(ws.headers.get("x-extra"), "yes", "accept's extra header")
    check_eq(ws.recv_message(), (1, b"ready"), "the valid send after the rejected ones")
    ws.send_close(1000)
    ws.expect_close(1000)
    ev = check_disconnect(ctx, "bad", 1000, "")
    rej = [e for e in ev if e.startswith("rejected")]
    wanted = ["websocket.send: the connection was not accepted",
              "subprotocol 'never-offered' was not offered",
              "websocket.accept:",  # CR/LF in a header value
              "'http.response.start' is not an event a websocket scope can send",
              "text is not valid UTF-8",
              "exactly one of bytes or text",
              "exactly one of bytes or text",
              "1005 is not a close code",
              "over 123 bytes",
              "websocket.keepalive: interval"]
    check_eq(len(rej), len(wanted), "rejections (%r)" % rej)
    for got, want in zip(rej, wanted):
        check(want in got, "rejection %r should mention %r" % (got, want))
    check("send_done ok" in ev, "the ignored denial start after accept completes: %r" % ev)


# ---------------------------------------------------------------------------
# 1.x framing, 9.x sizes (python websockets against the built-in echo)
# ---------------------------------------------------------------------------

@test(timeout=60)
def framing_text_and_binary_sizes(ctx):
    need_websockets()
    srv = ctx.start("echo")
    sizes = [0, 125, 126, 65535, 65536, 1 << 20]

    async def go():
        async with websockets.connect("ws://127.0.0.1:%d/" % srv.port, max_size=None,
                                      compression=None) as c:
            for n in sizes:
                t = ("\u00e9x" * (n // 3 + 1)).encode()[:n].decode("utf-8", "ignore")
                await c.send(t)
                check_eq(await c.recv(), t, "text echo of %d bytes" % len(t.encode()))
                b = os.urandom(n)
                await c.send(b)
                check(await c.recv() == b, "binary echo of %d bytes" % n)
    run_async(go(), 40)


@test()
def framing_raw_lengths_and_masking(ctx):
    srv = ctx.start(wsapp(ctx))
    ws = RawWS(srv.port, "/echo?id=raw")
    for n in (0, 125, 126, 127, 65535, 65536):
        p = bytes((i * 7) & 0xFF for i in range(n))
        ws.send_frame(0x2, p)
        check(ws.recv_message() == (2, p), "binary echo of %d" % n)
    # an unmasked client frame fails the connection
    ws.send_frame(0x1, "x", mask=False)
    ws.expect_close(1002)
    ws.expect_eof()
    check_disconnect(ctx, "raw", 1002, "protocol_error")


# ---------------------------------------------------------------------------
# 2.x ping/pong
# ---------------------------------------------------------------------------

@test()
def ping_pong(ctx):
    srv = ctx.start(wsapp(ctx))
    ws = RawWS(srv.port, "/echo?id=pp")
    for p in (b"", b"hello", b"\xff" * 125):
        ws.send_frame(0x9, p)
        f = ws.recv_frame()
        check_eq((f.opcode, f.payload), (0xA, p), "pong with the ping's payload")
    ws.send_frame(0xA, b"unsolicited")  # ignored
    ws.send_frame(0x1, "after")
    check_eq(ws.recv_message(), (1, b"after"), "echo after an unsolicited pong")
    ws.send_frame(0x9, b"x" * 126)
    ws.expect_close(1002)
    check_disconnect(ctx, "pp", 1002, "protocol_error")


# ---------------------------------------------------------------------------
# 3.x reserved bits, 4.x opcodes
# ---------------------------------------------------------------------------

@test()
def reserved_bits_fail_with_1002(ctx):
    srv = ctx.start(wsapp(ctx))
    for i, (op, rsv) in enumerate(((0x1, 4), (0x1, 2), (0x2, 1), (0x9, 4), (0x1, 7))):
        tid = "rsv%d" % i
        ws = RawWS(srv.port, "/echo?id=" + tid)
        ws.send_frame(0x1, "ok")
        check_eq(ws.recv_message(), (1, b"ok"), "echo first")
        ws.send_frame(op, b"x", rsv=rsv)
        ws.expect_close(1002)
        ws.expect_eof()
        ws.close()
        check_disconnect(ctx, tid, 1002, "protocol_error")


@test()
def reserved_opcodes_fail_with_1002(ctx):
    srv = ctx.start(wsapp(ctx))
    for op in (3, 4, 5, 6, 7, 0xB, 0xC, 0xD, 0xE, 0xF):
        tid = "op%x" % op
        ws = RawWS(srv.port, "/echo?id=" + tid)
        ws.send_frame(op, b"payload")
        ws.expect_close(1002)
        ws.close()
        check_disconnect(ctx, tid, 1002, "protocol_error")


# ---------------------------------------------------------------------------
# 5.x fragmentation
# ---------------------------------------------------------------------------

@test()
def fragmentation_with_interleaved_control_frames(ctx):
    srv = ctx.start(wsapp(ctx))
    ws = RawWS(srv.port, "/echo?id=frag")
    ws.send_frame(0x1, "frag", fin=False)
    ws.send_frame(0x9, b"p1")
    ws.send_frame(0x0, "men", fin=False)
    ws.send_frame(0xA, b"unsolicited")
    ws.send_frame(0x9, b"p2")
    ws.send_frame(0x0, "ted", fin=True)
    check_eq((ws.recv_frame().payload, ws.recv_frame().payload), (b"p1", b"p2"),
             "pongs answered while the message is open")
    check_eq(ws.recv_message(), (1, b"fragmented"), "reassembled message")
    # a binary message in many 1-byte fragments
    data = bytes(range(50))
    for i, b in enumerate(data):
        ws.send_frame(0x2 if i == 0 else 0x0, bytes([b]), fin=i == len(data) - 1)
    check_eq(ws.recv_message(), (2, data), "50 fragments")
    # empty fragments
    ws.send_frame(0x1, "", fin=False)
    ws.send_frame(0x0, "", fin=False)
    ws.send_frame(0x0, "", fin=True)
    check_eq(ws.recv_message(), (1, b""), "empty fragments")
    ws.send_close(1000)
    ws.expect_close(1000)
    ev = check_disconnect(ctx, "frag", 1000, "")
    check("receive text 10" in ev and "receive bytes 50" in ev, "delivered whole: %r" % ev)


@test()
def fragmentation_violations_fail_with_1002(ctx):
    srv = ctx.start(wsapp(ctx))
    cases = {
        "cont_first": [(0x0, b"x", True)],
        "new_msg_inside": [(0x1, b"a", False), (0x1, b"b", True)],
        "frag_ping": [(0x9, b"a", False)],
        "frag_close": [(0x8, b"\x03\xe8", False)],
    }
    for tid, frames in cases.items():
        ws = RawWS(srv.port, "/echo?id=" + tid)
        for op, p, fin in frames:
            ws.send_frame(op, p, fin=fin)
        ws.expect_close(1002)
        ws.close()
        check_disconnect(ctx, tid, 1002, "protocol_error")


# ---------------------------------------------------------------------------
# 6.x UTF-8
# ---------------------------------------------------------------------------

@test()
def utf8_valid_across_fragment_boundaries(ctx):
    srv = ctx.start(wsapp(ctx))
    ws = RawWS(srv.port, "/echo?id=u8")
    text = "\u03ba\u1f79\u03c3\u03bc\u03b5 \U0001F600 \u00e9".encode()
    # split inside every multi-byte sequence: one byte per fragment
    for i in range(len(text)):
        ws.send_frame(0x1 if i == 0 else 0x0, text[i:i + 1], fin=i == len(text) - 1)
    check_eq(ws.recv_message(), (1, text), "reassembled UTF-8")
    ws.send_close(1000)
    ws.expect_close(1000)
    check_disconnect(ctx, "u8", 1000, "")


@test()
def utf8_invalid_fails_with_1007(ctx):
    srv = ctx.start(wsapp(ctx))
    bad = [b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xff", b"ab\x80", b"\xe0\x9f\xbf",
           b"\xce\xba\xe1"]  # the last: truncated at the message end
    for i, p in enumerate(bad):
        tid = "bad%d" % i
        ws = RawWS(srv.port, "/echo?id=" + tid)
        ws.send_frame(0x1, p)
        ws.expect_close(1007)
        ws.close()
        check_disconnect(ctx, tid, 1007, "protocol_error")


@test()
def utf8_fails_fast_on_the_first_fragment(ctx):
    """Autobahn 6.4.x: the invalid bytes come in a first fragment whose rest never comes."""
    srv = ctx.start(wsapp(ctx))
    ws = RawWS(srv.port, "/echo?id=ff")
    ws.send_frame(0x1, b"\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5\xf4\x90\x80\x80", fin=False)
    t0 = time.monotonic()
    ws.expect_close(1007, timeout=2)
    check(time.monotonic() - t0 < 1.5, "1007 came only after waiting")
    ws.close()
    check_disconnect(ctx, "ff", 1007, "protocol_error")
    # ... and inside a frame whose payload is still arriving
    ws = RawWS(srv.port, "/echo?id=ff2")
    payload = b"abc\xf5" + b"x" * 1000
    key = os.urandom(4)
    hdr = struct.pack("!BBH", 0x81, 0x80 | 126, len(payload)) + key
    ws.sock.sendall(hdr + _xor(payload[:10], key))  # the rest of the frame never comes
    ws.expect_close(1007, timeout=2)
    ws.close()
    check_disconnect(ctx, "ff2", 1007, "protocol_error")


@test()
def close_reason_must_be_utf8(ctx):
    srv = ctx.start(wsapp(ctx))
    ws = RawWS(srv.port, "/echo?id=cr")
    ws.send_close(1000, b"\xed\xa0\x80")
    ws.expect_close(1007)
    ws.close()
    check_disconnect(ctx, "cr", 1007, "protocol_error")


# ---------------------------------------------------------------------------
# 7.x close handling
# ---------------------------------------------------------------------------

@test()
def peer_close_codes_and_reason(ctx):
    srv = ctx.start(wsapp(ctx))
    for code, reason in ((1000, b"bye"), (1001, b""), (1003, b"x"), (1007, b""), (1011, b""),
                         (3000, b"app"), (4999, "r\u00e9".encode())):
        tid = "pc%d" % code
        ws = RawWS(srv.port, "/echo?id=" + tid)
        ws.send_close(code, reason)
        f = ws.expect_close(code)
        check_eq(f.payload[2:], reason, "echo carries the peer's code and reason")
        ws.expect_eof()
        ws.close()
        check_disconnect(ctx, tid, code, reason.decode())
    # no status code
    ws = RawWS(srv.port, "/echo?id=pc1005")
    ws.send_close()
    f = ws.recv_frame()
    check_eq((f.opcode, f.payload), (0x8, b""), "an empty close is answered with an empty close")
    ws.close()
    check_disconnect(ctx, "pc1005", 1005, "")


@test()
def peer_close_invalid_codes_fail_with_1002(ctx):
    srv = ctx.start(wsapp(ctx))
    for code in (0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535):
        tid = "ic%d" % code
        ws = RawWS(srv.port, "/echo?id=" + tid)
        ws.send_close(code)
        ws.expect_close(1002)
        ws.close()
        check_disconnect(ctx, tid, 1002, "protocol_error")
    ws = RawWS(srv.port, "/echo?id=ic1b")
    ws.send_frame(0x8, b"\x03")
    ws.expect_close(1002)
    ws.close()
    check_disconnect(ctx, "ic1b", 1002, "protocol_error")


@test()
def app_close_then_peer_answers(ctx):
    srv = ctx.start(wsapp(ctx))
    ws = RawWS(srv.port, "/close?id=ac&code=4001&reason=done")
    f = ws.expect_close(4001)
    check_eq(f.close_reason(), "done", "our close reason")
    ws.send_close(4001, b"ack")
    ws.expect_eof()
    ws.close()
    check_disconnect(ctx, "ac", 4001, "ack")
    # code 0 means the default 1000
    ws = RawWS(srv.port, "/close?id=ac0&code=0")
    ws.expect_close(1000)
    ws.send_close(1000)
    ws.expect_eof()
    ws.close()
    check_disconnect(ctx, "ac0", 1000, "")


@test()
def second_close_and_send_after_close_are_rejected(ctx):
    srv = ctx.start(wsapp(ctx))
    ws = RawWS(srv.port, "/close?id=again&code=4002&again=1")
    ws.expect_close(4002)  # one close frame, nothing after it
    ws.send_close(4002)
    ws.expect_eof()
    ws.close()
    ev = check_disconnect(ctx, "again", 4002, "")
    rej = [e for e in ev if e.startswith("rejected")]
    check_eq(len(rej), 2, "rejections (%r)" % rej)
    check("websocket.close: already closed" in rej[0], "second close: %r" % rej[0])
    check("after websocket.close" in rej[1], "send after close: %r" % rej[1])


@test()
def app_close_with_python_client(ctx):
    need_websockets()
    srv = ctx.start(wsapp(ctx))

    async def go():
        c = await websockets.connect("ws://127.0.0.1:%d/close?id=pyc&code=1001&reason=bye"
                                     % srv.port)
        await c.wait_closed()
        check_eq((c.close_code, c.close_reason), (1001, "bye"), "python client saw our close")
    run_async(go())
    check_disconnect(ctx, "pyc", 1001, "bye")


@test()
def peer_close_reason_echoed_to_python_client(ctx):
    """A client-initiated close is answered with the client's own code and reason
    (RFC 6455 5.5.1; what the reference server does), and the app sees them too."""
    need_websockets()
    srv = ctx.start(wsapp(ctx))

    async def go():
        c = await websockets.connect("ws://127.0.0.1:%d/echo?id=pyr" % srv.port)
        await c.send("hi")
        check_eq(await c.recv(), "hi", "echo before the close")
        await c.close(4001, "bye")
        rcvd = getattr(c, "close_rcvd", None)
        got = (rcvd.code, rcvd.reason) if rcvd else (c.close_code, c.close_reason)
        check_eq(got, (4001, "bye"), "the server's close reply")
    run_async(go())
    check_disconnect(ctx, "pyr", 4001, "bye")


@test()
def close_before_accept_is_403(ctx):
    srv = ctx.start(wsapp(ctx))
    ws = RawWS(srv.port, handshake=False)
    ws.handshake("/reject?id=r403", expect=403)
    ws.read_body()
    ws.expect_eof()
    ws.close()
    ev = settle(ctx, "r403")
    check("closed_before_accept" in ev, "close before accept accepted: %r" % ev)
    # the app asked to receive after refusing: it gets a disconnect (1006) once the refusal is out
    disc = [e.rstrip() for e in ev if e.startswith("disconnect")]
    check_eq(disc, ["disconnect 1006"], "after a refusal a waiting receive ends with 1006: %r" % ev)
    check("on_disconnect" not in " ".join(ev), "a completed refusal is no disconnect: %r" % ev)


@test()
def denial_response(ctx):
    srv = ctx.start(wsapp(ctx))
    ws = RawWS(srv.port, handshake=False)
    ws.handshake("/deny?id=deny", expect=401)
    check_eq(ws.headers.get("www-authenticate"), "Bearer", "denial header")
    if ws.headers.get("transfer-encoding") == "chunked":
        body = b""
        while True:
            n = int(ws.read_until(b"\r\n")[:-2], 16)
            if n == 0:
                ws.read_until(b"\r\n")
                break
            body += ws.read_exact(n)
            ws.read_exact(2)
    else:
        body = ws.read_body()
    check_eq(body, b"denied here", "denial body")
    ws.expect_eof()
    ws.close()
    ev = settle(ctx, "deny")
    check(any("websocket.accept: the handshake was already refused" in e for e in ev),
          "accept after a denial start is rejected: %r" % ev)
    check(not any(e.startswith("disconnect") for e in ev), "no websocket.disconnect: %r" % ev)


@test()
def app_finish_closes_with_1000_or_1011(ctx):
    srv = ctx.start(wsapp(ctx))
    for tid, q, code in (("fin", "", 1000), ("fine", "&error=1", 1011)):
        ws = RawWS(srv.port, "/finish?id=%s%s" % (tid, q))
        ws.expect_close(code)
        ws.send_close(code)
        ws.expect_eof()
        ws.close()
        ev = settle(ctx, tid)
        check_eq(ev.count("release"), 1, "released once")


# ---------------------------------------------------------------------------
# Close handshake timeouts and peers vanishing at each step
# ---------------------------------------------------------------------------

WS_CLOSE_CFG = "timeouts:\n  ws_close: 1s\n"


@test()
def ws_close_timeout_peer_never_answers(ctx):
    srv = ctx.start(wsapp(ctx), config=WS_CLOSE_CFG)
    ws = RawWS(srv.port, "/close?id=silent&code=1000")
    ws.expect_close(1000)
    t = ws.expect_eof(timeout=5)  # we never answer and never close
    check(t >= 0.5, "closed after %.2fs, before ws_close" % t)
    ws.close()
    check_disconnect(ctx, "silent", 1006, "client_timeout")


@test()
def ws_close_peer_keeps_tcp_open_after_its_close(ctx):
    srv = ctx.start(wsapp(ctx), config=WS_CLOSE_CFG)
    ws = RawWS(srv.port, "/echo?id=keep")
    ws.send_close(1000, b"bye")
    ws.expect_close(1000)
    t = ws.expect_eof(timeout=3)  # the server closes TCP first (RFC 6455 7.1.1)
    check(t < 1.5, "server took %.2fs to close TCP" % t)
    ws.close()
    check_disconnect(ctx, "keep", 1000, "bye")


@test()
def peer_vanishes_at_each_step(ctx):
    srv = ctx.start(wsapp(ctx), config=WS_CLOSE_CFG)
    # before any frame: FIN
    ws = RawWS(srv.port, "/echo?id=v1")
    ws.close()
    check_disconnect(ctx, "v1", 1006, "client_closed")
    # RST in the middle of a message
    ws = RawWS(srv.port, "/echo?id=v2")
    ws.send_frame(0x1, "part", fin=False)
    ws.reset()
    check_disconnect(ctx, "v2", 1006, "client_closed")
    # after our close arrived, without answering
    ws = RawWS(srv.port, "/close?id=v3&code=1000")
    ws.expect_close(1000)
    ws.close()
    check_disconnect(ctx, "v3", 1006, "client_closed")
    # after our close, RST
    ws = RawWS(srv.port, "/close?id=v4&code=1000")
    ws.expect_close(1000)
    ws.reset()
    check_disconnect(ctx, "v4", 1006, "client_closed")
    # its own close, then gone before reading the answer
    ws = RawWS(srv.port, "/echo?id=v5")
    ws.send_close(1000, b"x")
    ws.reset()
    ev = settle(ctx, "v5")
    disc = [e for e in ev if e.startswith("disconnect ")]
    check(disc in (["disconnect 1000 x"], ["disconnect 1006 client_closed"]),
          "one disconnect, the peer's close or an abnormal drop: %r" % ev)
    # before the app accepted
    ws = RawWS(srv.port, handshake=False)
    ws.sock.sendall(b"GET /unaccepted?id=v6 HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\n"
                    b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                    b"Sec-WebSocket-Version: 13\r\n\r\n")
    lib.wait_event(ctx, "v6", "connect")
    ws.close()
    check_disconnect(ctx, "v6", 1006, "client_closed")
    still_serving(srv.port)


# ---------------------------------------------------------------------------
# 9.x limits
# ---------------------------------------------------------------------------

@test()
def message_too_big_1009(ctx):
    srv = ctx.start(wsapp(ctx), config="limits:\n  max_ws_message_size: 64k\n")
    ws = RawWS(srv.port, "/echo?id=big1")
    ws.send_frame(0x2, b"x" * 65536)
    check_eq(ws.recv_message(), (2, b"x" * 65536), "exactly the limit is fine")
    ws.send_frame(0x2, b"x" * 65537)
    ws.expect_close(1009)
    ws.close()
    check_disconnect(ctx, "big1", 1009, "body_too_large")
    # assembled from fragments
    ws = RawWS(srv.port, "/echo?id=big2")
    for i in range(3):
        ws.send_frame(0x2 if i == 0 else 0x0, b"y" * 30000, fin=False)
    ws.expect_close(1009)
    ws.close()
    check_disconnect(ctx, "big2", 1009, "body_too_large")
    # a frame header announcing far too much fails before any payload
    ws = RawWS(srv.port, "/echo?id=big3")
    key = os.urandom(4)
    ws.sock.sendall(struct.pack("!BBQ", 0x82, 0xFF, 1 << 40) + key)
    ws.expect_close(1009)
    ws.close()
    check_disconnect(ctx, "big3", 1009, "body_too_large")


@test()
def queue_overflow_1008(ctx):
    srv = ctx.start(wsapp(ctx), config="limits:\n  max_receive_queue: 5\n")
    ws = RawWS(srv.port, "/noreceive?id=qo")
    for i in range(8):
        try:
            ws.send_frame(0x1, "m%d" % i)
        except OSError:
            break
    f = ws.expect_close(1008)
    check_eq(f.close_reason(), "receive queue overflow", "close reason")
    ws.close()
    ev = settle(ctx, "qo")
    check("on_disconnect queue_overflow" in ev, "on_disconnect queue_overflow: %r" % ev)


@test()
def full_queue_waits_while_a_receive_is_pending(ctx):
    """A burst larger than the queue, to an app that is draining (a receive is pending): the
    message that does not fit waits for room instead of counting as an overflow."""
    srv = ctx.start(wsapp(ctx), config="limits:\n  max_receive_queue: 3\n")
    ws = RawWS(srv.port, "/echo?id=burst")
    lib.wait_event(ctx, "burst", "accepted")
    time.sleep(0.1)
    ws.sock.sendall(b"".join(masked_frame(0x1, b"m%d" % i) for i in range(4)))
    for i in range(4):
        check_eq(ws.recv_message(), (1, b"m%d" % i), "echo %d of the burst" % i)
    ws.send_close(1000)
    ws.expect_close(1000)
    check_disconnect(ctx, "burst", 1000, "")


@test(timeout=60)
def backpressure_high_water_and_drain(ctx):
    srv = ctx.start(wsapp(ctx))
    size = 32 << 20  # more than the kernel's socket buffers can swallow
    ws = RawWS(srv.port, "/big?id=bp&size=%d" % size, rcvbuf=4096)
    check(lib.wait_event(ctx, "bp", "high_water"), "high_water: %r" % events_for(ctx, "bp"))
    time.sleep(0.3)
    ev = events_for(ctx, "bp")
    check("send_done ok" not in ev, "the send completed above the high watermark: %r" % ev)
    check(any(e.startswith("buffered ") and int(e.split()[1]) > size for e in ev),
          "buffered_amount counts the queued message: %r" % ev)
    op, data = ws.recv_message()
    check_eq((op, len(data)), (2, size), "the big message")
    check(lib.wait_event(ctx, "bp", "send_done ok"), "send completed after the drain")
    check(lib.wait_event(ctx, "bp", "drain"), "drain")
    ws.send_close(1000)
    ws.expect_close(1000)
    check_disconnect(ctx, "bp", 1000, "")


@test()
def write_timeout_on_a_peer_that_never_reads(ctx):
    srv = ctx.start(wsapp(ctx), config="timeouts:\n  write: 1s\n")
    ws = RawWS(srv.port, "/big?id=wt&size=%d" % (32 << 20), rcvbuf=4096)
    check(lib.wait_event(ctx, "wt", "high_water"), "high_water")
    check_disconnect(ctx, "wt", 1006, "write_timeout", timeout=8)
    ev = events_for(ctx, "wt")
    check("send_done ok" in ev, "the parked send is settled at the disconnect: %r" % ev)
    ws.close()


# ---------------------------------------------------------------------------
# Keepalive, idle, shutdown
# ---------------------------------------------------------------------------

@test()
def keepalive_pings_and_pong_timeout(ctx):
    srv = ctx.start(wsapp(ctx))
    ws = RawWS(srv.port, "/keepalive?id=ka&interval=0.2&timeout=0.5")
    for _ in range(3):  # answered: the connection stays
        f = ws.recv_frame()
        check_eq(f.opcode, 0x9, "ping")
        ws.send_frame(0xA, f.payload)
    f = ws.recv_frame()
    check_eq(f.opcode, 0x9, "ping")
    # now silent: 1006 keepalive_timeout, TCP closed without a Close frame
    t0 = time.monotonic()
    try:
        while True:
            f = ws.recv_frame()
            check(f.opcode == 0x9, "only pings before the drop, got %r" % f)
    except lib.Closed:
        pass
    check(time.monotonic() - t0 < 3 * SLOW, "pong timeout took too long")
    ws.close()
    check_disconnect(ctx, "ka", 1006, "keepalive_timeout")


@test()
def keepalive_with_python_client_stays_up(ctx):
    need_websockets()
    srv = ctx.start(wsapp(ctx))

    async def go():
        async with websockets.connect("ws://127.0.0.1:%d/keepalive?id=kap&interval=0.1&timeout=0.3"
                                      % srv.port) as c:
            await asyncio.sleep(1.0)
            await c.send("still")
            check_eq(await c.recv(), "still", "echo after a second of pings")
    run_async(go())
    check_disconnect(ctx, "kap", 1000, "")


@test()
def ws_idle_closes_with_1001(ctx):
    srv = ctx.start(wsapp(ctx), config="timeouts:\n  ws_idle: 500ms\n  ws_close: 1s\n")
    ws = RawWS(srv.port, "/echo?id=idle")
    t0 = time.monotonic()
    ws.expect_close(1001, timeout=3)
    check(time.monotonic() - t0 >= 0.4, "idle close too early")
    ws.close()
    check_disconnect(ctx, "idle", 1006, "idle_timeout")


@test()
def server_shutdown_ends_websockets(ctx):
    srv = ctx.start(wsapp(ctx), config="timeouts:\n  shutdown: 1s\n")
    ws = RawWS(srv.port, "/echo?id=sd")
    ws.send_frame(0x1, "x")
    check_eq(ws.recv_message(), (1, b"x"), "echo")
    t0 = time.monotonic()
    srv.signal(signal.SIGTERM)
    ws.sock.settimeout(5 * SLOW)
    try:
        f = ws.recv_frame()
        check_eq((f.opcode, f.close_code()), (0x8, 1001), "going away")
    except lib.Closed:
        pass
    check(time.monotonic() - t0 >= 0.5, "websocket cut before the shutdown deadline")
    check(srv.wait_exit(5), "pagid did not exit after SIGTERM")
    ws.close()
    check_disconnect(ctx, "sd", 1006, "server_shutdown")


# ---------------------------------------------------------------------------
# permessage-deflate (RFC 7692)
# ---------------------------------------------------------------------------

@test(timeout=60)
def deflate_with_python_client(ctx):
    need_websockets()
    srv = ctx.start("echo")

    async def go():
        async with websockets.connect("ws://127.0.0.1:%d/" % srv.port, compression="deflate",
                                      max_size=None) as c:
            names = [e.name for e in c.extensions]
            check_eq(names, ["permessage-deflate"], "negotiated extensions")
            for m in ["", "", "hello", "a" * 100000, b"\x00" * 70000, os.urandom(5000),
                      "\u00e9\U0001F600" * 1000]:
                await c.send(m)
                check(await c.recv() == m, "round trip of %d" % len(m))
    run_async(go(), 40)


def deflate_raw(ctx, offer):
    srv = ctx.start(wsapp(ctx), config="limits:\n  max_ws_message_size: 64k\n")
    return srv, RawWS(srv.port, "/echo?id=dr", headers={"Sec-WebSocket-Extensions": offer})


@test()
def deflate_negotiation_and_raw_frames(ctx):
    srv, ws = deflate_raw(ctx, "permessage-deflate; unknown=1, permessage-deflate; "
                               "server_no_context_takeover; client_max_window_bits")
    # Neither side takes context over: a server may say so for both (RFC 7692 7.1.1), and
    # an idle connection then holds no zlib stream.
    check_eq(ws.headers.get("sec-websocket-extensions"),
             "permessage-deflate; server_no_context_takeover; client_no_context_takeover",
             "response parameters")
    for msg in (b"hello hello hello", b"hello hello hello"):
        comp = zlib.compressobj(wbits=-15)  # client_no_context_takeover: afresh each message
        data = comp.compress(msg) + comp.flush(zlib.Z_SYNC_FLUSH)
        check_eq(data[-4:], b"\x00\x00\xff\xff", "sync flush tail")
        ws.send_frame(0x1, data[:-4], rsv=4)  # RSV1
        f = ws.recv_frame()
        check_eq((f.opcode, f.rsv), (1, 4), "compressed answer")
        out = zlib.decompressobj(wbits=-15).decompress(f.payload + b"\x00\x00\xff\xff")
        check_eq(out, msg, "decompressed echo (no server context takeover)")
    # a compressed message split over fragments
    data = zlib.compressobj(wbits=-15)
    raw = data.compress(b"frag" * 100) + data.flush(zlib.Z_SYNC_FLUSH)
    raw = raw[:-4]
    ws.send_frame(0x2, raw[:5], fin=False, rsv=4)
    ws.send_frame(0x0, raw[5:], fin=True)
    f = ws.recv_frame()
    check_eq(zlib.decompressobj(wbits=-15).decompress(f.payload + b"\x00\x00\xff\xff"),
             b"frag" * 100, "fragmented compressed message")
    # RSV1 on a continuation frame is a protocol error
    ws.send_frame(0x1, raw[:5], fin=False, rsv=4)
    ws.send_frame(0x0, raw[5:], fin=True, rsv=4)
    ws.expect_close(1002)
    ws.close()


@test()
def deflate_bomb_is_1009(ctx):
    srv, ws = deflate_raw(ctx, "permessage-deflate")
    comp = zlib.compressobj(wbits=-15)
    bomb = comp.compress(b"\x00" * (16 << 20)) + comp.flush(zlib.Z_SYNC_FLUSH)
    check(len(bomb) < 64 * 1024, "the bomb is small on the wire (%d)" % len(bomb))
    ws.send_frame(0x2, bomb[:-4], rsv=4)
    ws.expect_close(1009)
    ws.close()
    check_disconnect(ctx, "dr", 1009, "body_too_large")
    # a compressed frame far longer on the wire than the limit fails from its header
    ws = RawWS(srv.port, "/echo?id=dr2", headers={"Sec-WebSocket-Extensions": "permessage-deflate"})
    ws.sock.sendall(struct.pack("!BBQ", 0xC2, 0xFF, 1 << 30) + os.urandom(4))
    ws.expect_close(1009)
    ws.close()
    check_disconnect(ctx, "dr2", 1009, "body_too_large")


@test()
def deflate_declined_when_offer_unsupported(ctx):
    srv = ctx.start(wsapp(ctx))
    ws = RawWS(srv.port, "/echo?id=nd",
               headers={"Sec-WebSocket-Extensions": "permessage-deflate; server_max_window_bits=8"})
    check("sec-websocket-extensions" not in ws.headers, "an offer we cannot honour is declined")
    ws.send_frame(0x1, "x", rsv=4)  # so RSV1 stays reserved
    ws.expect_close(1002)
    ws.close()
