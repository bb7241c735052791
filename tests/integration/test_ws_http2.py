"""WebSockets over HTTP/2 (RFC 8441, issue 15): extended CONNECT driven by
hand with python3-h2 on the h2c prior-knowledge and TLS listeners, frames
written into DATA with RawWS's framing (client frames masked). The app is
apps/wsapp.c, the same one the HTTP/1.1 websocket tests use."""

import signal
import socket
import struct
import time
import zlib

import lib
from lib import SLOW, check, check_eq, test, wait_for
from test_http2 import H2Client, H2Server, h2, read_frames
from test_websocket import RawWS, check_disconnect, events_for, wsapp


class StreamSock:
    """What RawWS needs of a socket, on one HTTP/2 stream: DATA both ways."""

    def __init__(self, cl, sid):
        self.cl, self.sid = cl, sid
        self.seen = 0  # events of cl already looked at
        self.timeout = 5 * SLOW
        self.ended = False

    def settimeout(self, t):
        self.timeout = t

    def sendall(self, data):
        data = bytes(data)
        end = time.time() + (self.timeout or 5)
        while data:
            n = min(len(data), self.cl.c.local_flow_control_window(self.sid),
                    self.cl.c.max_outbound_frame_size)
            if n <= 0:
                if time.time() > end or self.cl.closed:
                    raise socket.timeout()
                self.cl.pump(0.05)
                continue
            self.cl.c.send_data(self.sid, data[:n])
            self.cl.flush()
            data = data[n:]

    def _take(self):
        out = b""
        while self.seen < len(self.cl.events):
            e = self.cl.events[self.seen]
            self.seen += 1
            if getattr(e, "stream_id", None) != self.sid:
                continue
            if isinstance(e, h2.events.DataReceived):
                out += e.data
                self.cl.c.acknowledge_received_data(e.flow_controlled_length, self.sid)
            elif isinstance(e, (h2.events.StreamEnded, h2.events.StreamReset)):
                self.ended = True
        self.cl.flush_quiet()
        return out

    def recv(self, n):
        end = time.time() + (self.timeout or 5)
        while True:
            d = self._take()
            if d:
                return d
            if self.ended or self.cl.closed:
                return b""
            if time.time() > end:
                raise socket.timeout()
            self.cl.pump(0.05)

    def close(self):
        pass


def connect_ws(cl, path, headers=(), expect=200):
    """Extended CONNECT on cl; returns (RawWS on the stream, status, response headers)."""
    sid = cl.c.get_next_available_stream_id()
    hdrs = [(":method", "CONNECT"), (":protocol", "websocket"), (":scheme", "https"),
            (":path", path), (":authority", "localhost"),
            ("sec-websocket-version", "13")] + list(headers)
    cl.c.send_headers(sid, hdrs, end_stream=False)
    cl.flush()
    got = []

    def answered():
        for e in cl.events:
            if isinstance(e, h2.events.ResponseReceived) and e.stream_id == sid:
                got.append(dict(e.headers))
                return True
            if isinstance(e, h2.events.StreamReset) and e.stream_id == sid:
                got.append({":status": "reset"})
                return True
        return False

    check(cl.wait(answered, 10), "no answer to the extended CONNECT on %s" % path)
    h = got[0]
    ws = object.__new__(RawWS)
    ws.sock = StreamSock(cl, sid)
    ws.buf = bytearray()
    ws.eof = False
    ws.key = None
    ws.status = int(h[":status"]) if h[":status"] != "reset" else None
    ws.headers = h
    ws.sid = sid
    if expect is not None:
        check_eq(ws.status, expect, "extended CONNECT status (%r)" % h)
    return ws


def settings_of(cl):
    for e in cl.events:
        if isinstance(e, h2.events.RemoteSettingsChanged):
            return {int(k): v.new_value for k, v in e.changed_settings.items()}
    return {}


def client(s, tls=False):
    if tls:
        cl = H2Client(s.tls_socket())
    else:
        cl = H2Client(socket.create_connection(("127.0.0.1", s.cport), timeout=5 * SLOW))
    check(cl.wait(lambda: settings_of(cl), 5), "no server SETTINGS")
    return cl


def disconnected(ctx, cl, tid, code, reason):
    """check_disconnect, with the connection read meanwhile (a PING): a
    stream's held scope is let go at the connection's next read."""
    wait_for(lambda: any(e.startswith("disconnect") for e in events_for(ctx, tid)), 5 * SLOW)
    cl.c.ping(b"pagidtst")
    cl.flush()
    cl.pump(0.2)
    check_disconnect(ctx, tid, code, reason)


def echo_round_trips(cl, tid):
    ws = connect_ws(cl, "/echo?id=%s" % tid)
    ws.send_frame(0x1, "hello over h2")
    check_eq(ws.recv_message(), (1, b"hello over h2"), "text echo")
    blob = bytes(range(256)) * 300
    ws.send_frame(0x2, blob)
    check_eq(ws.recv_message(), (2, blob), "binary echo")
    ws.send_close(4001, b"bye")
    f = ws.expect_close(4001)
    check_eq(f.close_reason(), "bye", "close reason echoed")
    check(cl.wait(lambda: ws.sock._take() == b"" and ws.sock.ended, 5), "stream not ended")
    disconnected(ctx_of[0], cl, tid, 4001, "bye")
    return ws


ctx_of = [None]


@test(timeout=90)
def ws_h2_echo_cleartext_and_tls(ctx):
    """SETTINGS_ENABLE_CONNECT_PROTOCOL=1; text and binary echo, the close
    handshake with the client's code and reason, on h2c and on TLS."""
    ctx_of[0] = ctx
    s = H2Server(ctx, app=wsapp(ctx))
    for tls in (False, True):
        cl = client(s, tls)
        check_eq(settings_of(cl).get(0x8), 1, "SETTINGS_ENABLE_CONNECT_PROTOCOL")
        echo_round_trips(cl, "e%d" % tls)
        # the connection stays usable for a plain request
        cl.close()
    check_eq(s.metrics().get("pagid_http2_websockets_total"), 2, "pagid_http2_websockets_total")
    check_eq(events_for(ctx, "e0")[0], "scheme ws ext 1", "scheme on h2c")
    check_eq(events_for(ctx, "e1")[0], "scheme wss ext 1", "scheme on TLS")


@test(timeout=60)
def ws_h2_subprotocol_and_deflate(ctx):
    ctx_of[0] = ctx
    s = H2Server(ctx, app=wsapp(ctx))
    cl = client(s)
    ws = connect_ws(cl, "/echo?id=sp&proto=chat",
                    [("sec-websocket-protocol", "other, chat"),
                     ("sec-websocket-extensions", "permessage-deflate")])
    check_eq(ws.headers.get("sec-websocket-protocol"), "chat", "subprotocol")
    check("permessage-deflate" in ws.headers.get("sec-websocket-extensions", ""),
          "extension answer %r" % ws.headers)
    check("sec-websocket-accept" not in ws.headers, "no Sec-WebSocket-Accept on h2")
    msg = b"compress me " * 500
    co = zlib.compressobj(wbits=-15)
    data = co.compress(msg) + co.flush(zlib.Z_SYNC_FLUSH)
    ws.send_frame(0x1, data[:-4], rsv=4)
    f = ws.recv_frame()
    check_eq((f.opcode, f.rsv), (1, 4), "compressed echo frame")
    got = zlib.decompressobj(wbits=-15).decompress(f.payload + b"\x00\x00\xff\xff")
    check_eq(got, msg, "inflated echo")
    check(len(f.payload) < len(msg) // 4, "echo not compressed: %d" % len(f.payload))
    ev = events_for(ctx, "sp")
    check(any(e.startswith("receive text %d" % len(msg)) for e in ev), "app saw %r" % ev)
    ws.send_close(1000)
    ws.expect_close(1000)


@test(timeout=60)
def ws_h2_refusals(ctx):
    """websocket.close before accept: 403 ending the stream; a plain CONNECT
    and another :protocol stay refused (501); the connection goes on."""
    ctx_of[0] = ctx
    s = H2Server(ctx, app=wsapp(ctx))
    cl = client(s)
    ws = connect_ws(cl, "/reject?id=rj", expect=403)
    check(cl.wait(lambda: ws.sock._take() is not None and ws.sock.ended, 5), "403 did not end")
    ws = connect_ws(cl, "/deny?id=dn", expect=401)
    sid = cl.c.get_next_available_stream_id()
    cl.c.config.validate_outbound_headers = False  # python3-h2 would not send a plain CONNECT
    cl.c.send_headers(sid, [(":method", "CONNECT"), (":authority", "localhost:1")],
                      end_stream=False)
    cl.flush()
    status, _, _, _ = cl.response(sid)
    check_eq(status, 501, "plain CONNECT")
    ws = connect_ws(cl, "/echo?id=after")
    ws.send_frame(0x1, "x")
    check_eq(ws.recv_message(), (1, b"x"), "echo after refusals")


@test(timeout=60)
def ws_h2_reset_and_invalid_frames(ctx):
    """Client RST_STREAM: disconnect 1006 client_closed; an unmasked frame
    and bad UTF-8 fail that stream with 1002 / 1007, the connection and its
    other streams go on; two websockets and a request at once."""
    ctx_of[0] = ctx
    s = H2Server(ctx, app=wsapp(ctx))
    cl = client(s)
    a = connect_ws(cl, "/echo?id=ra")
    b = connect_ws(cl, "/echo?id=rb")
    c = connect_ws(cl, "/echo?id=rc")
    rid = cl.request("/hello")
    a.send_frame(0x1, "a1")
    b.send_frame(0x1, "b1")
    check_eq(b.recv_message(), (1, b"b1"), "b echo")
    check_eq(a.recv_message(), (1, b"a1"), "a echo")
    status, _, _, _ = cl.response(rid)
    check(status is not None, "http request beside the websockets")
    cl.c.reset_stream(a.sid)
    cl.flush()
    disconnected(ctx, cl, "ra", 1006, "client_closed")
    b.send_frame(0x1, "unmasked", mask=False)
    b.expect_close(1002)
    disconnected(ctx, cl, "rb", 1002, "protocol_error")
    c.send_frame(0x1, b"\xff\xfe")
    c.expect_close(1007)
    disconnected(ctx, cl, "rc", 1007, "protocol_error")
    d = connect_ws(cl, "/echo?id=rd")
    d.send_frame(0x1, "still")
    check_eq(d.recv_message(), (1, b"still"), "connection still usable")


@test(timeout=60)
def ws_h2_unread_holds_client_at_window(ctx):
    """An app that does not receive: the stream's window holds the client
    (bytes in flight bounded), while another stream still works."""
    ctx_of[0] = ctx
    s = H2Server(ctx, app=wsapp(ctx),
                 extra="limits:\n  max_receive_queue: 1000\n  max_receive_queue_size: 1000\n")
    cl = client(s)
    ws = connect_ws(cl, "/noreceive?id=nr")
    sent = 0
    chunk = b"z" * 1000
    for _ in range(400):
        if cl.c.local_flow_control_window(ws.sid) < 2000:
            cl.pump(0.05)
            if cl.c.local_flow_control_window(ws.sid) < 2000:
                break
        ws.send_frame(0x2, chunk)
        sent += len(chunk) + 8
        cl.pump(0.01)
    cl.pump(0.5)
    win = cl.c.local_flow_control_window(ws.sid)
    check(sent < 200000, "client was never held: sent %d, window %d" % (sent, win))
    check(win < 2000, "window not shut: %d after %d bytes" % (win, sent))
    other = connect_ws(cl, "/echo?id=nro")
    other.send_frame(0x1, "other")
    check_eq(other.recv_message(), (1, b"other"), "another stream works")
    rid = cl.request("/hello")
    status, _, _, _ = cl.response(rid)
    check(status is not None, "http request on the held connection")


@test(timeout=60)
def ws_h2_shutdown_going_away(ctx):
    """SIGTERM: GOAWAY, then at the deadline a Close 1001 on the stream and
    the app's disconnect server_shutdown, once."""
    ctx_of[0] = ctx
    s = H2Server(ctx, app=wsapp(ctx), extra="timeouts:\n  shutdown: 1s\n")
    cl = client(s)
    ws = connect_ws(cl, "/echo?id=sd")
    ws.send_frame(0x1, "x")
    check_eq(ws.recv_message(), (1, b"x"), "echo")
    s.srv.signal(signal.SIGTERM)
    check(cl.wait(lambda: cl.goaway() is not None, 5), "no GOAWAY")
    # python3-h2 takes nothing after a GOAWAY: the last frames are read raw.
    t0 = time.monotonic()
    frames = read_frames(cl.sock, 10)
    data = [f[3] for f in frames if f[0] == 0 and f[2] == ws.sid]
    check_eq(data, [b"\x88\x02\x03\xe9"], "Close 1001 on the stream (frames %r)" % frames)
    check(time.monotonic() - t0 >= 0.5, "websocket cut before the shutdown deadline")
    check(s.srv.wait_exit(10), "pagid did not exit after SIGTERM")
    check_disconnect(ctx, "sd", 1006, "server_shutdown")


@test(timeout=60)
def ws_h2_outlives_request_timeout(ctx):
    """An accepted websocket stream is not a request body the app waits for:
    timeouts.request and timeouts.header do not end it (ws_idle does)."""
    ctx_of[0] = ctx
    s = H2Server(ctx, app=wsapp(ctx),
                 extra="timeouts:\n  request: 1s\n  header: 1s\n  ws_idle: 30s\n")
    cl = client(s)
    ws = connect_ws(cl, "/echo?id=lt")
    ws.send_frame(0x1, "first")
    check_eq(ws.recv_message(), (1, b"first"), "echo")
    end = time.time() + 3
    while time.time() < end:
        cl.pump(0.2)
    check(not any(e.startswith("disconnect") for e in events_for(ctx, "lt")),
          "websocket ended by a request timeout: %r" % events_for(ctx, "lt"))
    ws.send_frame(0x1, "after 3s")
    check_eq(ws.recv_message(), (1, b"after 3s"), "echo after the request timeout")


def conn_window(cl):
    """The client's send window on the connection (the server's receive window)."""
    return cl.c.outbound_flow_control_window


def ping_roundtrip(cl):
    cl.c.ping(b"pagidwin")
    cl.flush()
    check(cl.wait(lambda: any(isinstance(e, h2.events.PingAckReceived) and
                              e.ping_data == b"pagidwin" for e in cl.events[-20:]), 5 * SLOW),
          "no PING ACK")
    cl.pump(0.2)


def held_then_reset(cl, n, open_and_send):
    """n websockets, each sent frames the server holds (unread or uncredited),
    then reset by the client; the connection window after each."""
    cl.c.increment_flow_control_window(50 * 1024 * 1024)  # ours is not the limit
    cl.flush()
    ping_roundtrip(cl)
    w0 = conn_window(cl)
    history = []
    for i in range(n):
        if conn_window(cl) < 61000:
            break  # shut: the check below says so
        ws = open_and_send(i)
        cl.pump(0.3)
        cl.c.reset_stream(ws.sid)
        cl.flush()
        ping_roundtrip(cl)
        history.append(conn_window(cl))
    print("connection window: %d at start, after each reset %r" % (w0, history))
    return w0, history


def upload_still_works(cl, tid):
    ws = connect_ws(cl, "/echo?id=%s" % tid)
    ws.sock.settimeout(5 * SLOW)
    try:
        ws.send_frame(0x2, b"x" * 70000)
        got = ws.recv_message()
    except socket.timeout:
        got = None
    check_eq(got and len(got[1]), 70000, "a 70000-byte message on the connection afterwards "
             "(connection window %d)" % conn_window(cl))


@test(timeout=120)
def ws_h2_conn_window_after_resets(ctx):
    """Frames the server holds when a websocket stream is reset go back to
    the connection's window, or 20 such streams would shut it (1 MiB):
    a client that does not read /big's output (above 4 x high_watermark,
    frames left unread), then one whose app does not receive (paused on the
    receive queue's byte bound), on a 256 KiB connection window; each time a 70000-byte message on a new
    websocket of the same connection still gets through."""
    small = "limits:\n  http2_connection_window: 256k\n"
    s = H2Server(ctx, app=wsapp(ctx), extra=small)
    cl = client(s)

    def unread_output(i):
        ws = connect_ws(cl, "/big?id=wo%d&size=1000000" % i)
        cl.pump(0.2)
        for _ in range(4):  # 60032 bytes: within the stream window
            ws.send_frame(0x2, b"m" * 15000)
        return ws

    w0, hist = held_then_reset(cl, 20, unread_output)
    # nghttp2 gives the window back in WINDOW_UPDATEs once half of it is consumed
    check(min(hist) >= w0 // 2 - 61000, "connection window leaked: %r" % hist)
    upload_still_works(cl, "woafter")
    cl.close()

    s = H2Server(ctx, app=wsapp(ctx),
                 extra=small + "  max_receive_queue_size: 20000\ntimeouts:\n  write: 60s\n")
    cl = client(s)

    def paused(i):
        ws = connect_ws(cl, "/noreceive?id=wp%d" % i)
        payload = b""
        for _ in range(5):  # two fill the queue's 20000 bytes, three wait
            m = b"p" * 12000
            payload += bytes([0x82, 0xFE]) + struct.pack("!H", len(m)) + b"\0\0\0\0" + m
        ws.sock.sendall(payload)
        return ws

    w0, hist = held_then_reset(cl, 20, paused)
    check(min(hist) >= w0 // 2 - 61000, "connection window leaked (paused): %r" % hist)
    upload_still_works(cl, "wpafter")


@test(timeout=60)
def ws_h2_denial_2xx_refused(ctx):
    """A denial response with a 2xx status would be the accept over h2 (RFC
    8441 5): the app's websocket.http.response.start fails with a clear
    error and the client gets the 403, never :status 200; over HTTP/1.1
    (only 101 accepts) the same denial goes out as it is."""
    ctx_of[0] = ctx
    s = H2Server(ctx, app=wsapp(ctx))
    cl = client(s)
    ws = connect_ws(cl, "/deny?id=d2x&code=200", expect=None)
    cl.pump(0.3)
    print("denial with status 200 over h2:", ws.status, ws.sock._take())
    check_eq(ws.status, 403, "the answer to a 2xx denial over h2")
    ev = events_for(ctx, "d2x")
    rej = [e for e in ev if e.startswith("rejected websocket.http.response.start")]
    check(rej and "would accept the websocket over HTTP/2" in rej[0], "the app's error: %r" % ev)
    sk = socket.create_connection(("127.0.0.1", s.hport), timeout=5 * SLOW)
    sk.sendall(b"GET /deny?id=d1x&code=200 HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
               b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
               b"Sec-WebSocket-Version: 13\r\n\r\n")
    head = sk.recv(4096)
    sk.close()
    check(head.startswith(b"HTTP/1.1 200 "), "HTTP/1.1 denial with 200: %r" % head[:60])


@test(timeout=60)
def ws_h2_accept_header_error(ctx):
    """websocket.accept with a header value ending in a blank: HTTP/2 does
    not allow it (RFC 9113 8.2.1), and the app is told so in a
    websocket.accept error, not 'out of memory'; the client gets the 500 of
    an app that failed before accepting. HTTP/1.1 accepts the same app."""
    ctx_of[0] = ctx
    s = H2Server(ctx, app=wsapp(ctx))
    cl = client(s)
    ws = connect_ws(cl, "/echo?id=ahe&padded=1", expect=None)
    check_eq(ws.status, 500, "answer to the failed accept (%r)" % ws.headers)
    ev = events_for(ctx, "ahe")
    rej = [e for e in ev if e.startswith("rejected websocket.accept")]
    check(rej and "websocket.accept: header x-note: the value begins or ends with whitespace"
          in rej[0], "the app's error: %r" % ev)
    check("out of memory" not in rej[0], "the app's error: %r" % rej)
    sk = socket.create_connection(("127.0.0.1", s.hport), timeout=5 * SLOW)
    sk.sendall(b"GET /echo?id=ah1&padded=1 HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
               b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
               b"Sec-WebSocket-Version: 13\r\n\r\n")
    head = sk.recv(4096)
    sk.close()
    check(head.startswith(b"HTTP/1.1 101 "), "HTTP/1.1 accept: %r" % head[:60])


def connect_answer(cl, path, extra):
    """An extended CONNECT with exactly the extra fields given: its response headers."""
    sid = cl.c.get_next_available_stream_id()
    cl.c.send_headers(sid, [(":method", "CONNECT"), (":protocol", "websocket"),
                            (":scheme", "http"), (":path", path),
                            (":authority", "localhost")] + list(extra), end_stream=False)
    cl.flush()
    got = []

    def answered():
        got[:] = [dict(e.headers) for e in cl.events
                  if isinstance(e, h2.events.ResponseReceived) and e.stream_id == sid]
        return bool(got)

    check(cl.wait(answered, 5 * SLOW), "no answer to the extended CONNECT on %s" % path)
    return got[0]


@test(timeout=60)
def ws_h2_version_rule(ctx):
    """sec-websocket-version over h2 follows HTTP/1.1's rule: exactly one,
    13; a missing, wrong or doubled one is 426 with sec-websocket-version:
    13, and no app runs."""
    ctx_of[0] = ctx
    s = H2Server(ctx, app=wsapp(ctx))
    cl = client(s)
    for tid, extra in (("vnone", []), ("v8", [("sec-websocket-version", "8")]),
                       ("v2x", [("sec-websocket-version", "13"), ("sec-websocket-version", "13")])):
        h = connect_answer(cl, "/echo?id=%s" % tid, extra)
        check_eq(h.get(":status"), "426", "%s: status" % tid)
        check_eq(h.get("sec-websocket-version"), "13", "%s: the version we speak" % tid)
        check_eq(events_for(ctx, tid), [], "%s: no app ran" % tid)
    h = connect_answer(cl, "/echo?id=vok", [("sec-websocket-version", "13")])
    check_eq(h.get(":status"), "200", "version 13 accepted")


@test(timeout=120)
def ws_h2_idle_input_released(ctx):
    """Idle websockets on one h2c connection keep no input buffer: 90 of
    them after one 60 KB message each cost the worker about what they cost
    after a 10-byte message each (the stream's input grew to its largest
    DATA chunk, ~17 KiB, and was kept)."""
    from test_http2 import worker_rss_kib
    from test_memory import sanitized
    ctx_of[0] = ctx
    res = {}
    for size in (10, 60000):
        s = H2Server(ctx, app=wsapp(ctx))
        cl = client(s)
        cl.c.increment_flow_control_window(50 * 1024 * 1024)
        cl.flush()
        for i in range(90):
            ws = connect_ws(cl, "/echo?id=m%d_%d" % (size, i))
            ws.send_frame(0x2, b"q" * size)
            check_eq(len(ws.recv_message()[1]), size, "echo")
        cl.pump(0.5)
        time.sleep(1.5)  # memtrim's delay
        res[size] = worker_rss_kib(s.srv)
        s.srv.stop()
        cl.close()
    print("worker VmRSS KiB, 90 idle h2 websockets after one message of 10 B / 60 KB each:", res)
    if sanitized(ctx):
        ctx.note("idle h2 websockets: RSS not judged under ASan (its quarantine)")
        return
    check(res[60000] - res[10] < 900, "idle websockets hold %d KiB more after one 60 KB message"
          % (res[60000] - res[10]))


@test(timeout=60)
def ws_h2_access_log(ctx):
    """The access log over h2: a denial's body bytes as over HTTP/1.1 (401,
    'denied here' = 11 bytes), and an accepted websocket as GET with 200."""
    import os
    ctx_of[0] = ctx
    log = os.path.join(ctx.tmpdir, "access.log")
    s = H2Server(ctx, app=wsapp(ctx), extra="access_log:\n  path: %s\n" % log)
    sk = socket.create_connection(("127.0.0.1", s.hport), timeout=5 * SLOW)
    sk.sendall(b"GET /deny?id=al1 HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
               b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
               b"Sec-WebSocket-Version: 13\r\n\r\n")
    wait_for(lambda: sk.recv(4096) == b"", 5 * SLOW)
    sk.close()
    cl = client(s)
    connect_ws(cl, "/deny?id=al2", expect=401)
    cl.pump(0.3)
    e = connect_ws(cl, "/echo?id=al3")
    e.send_frame(0x1, "hello")
    e.recv_message()
    e.send_close(1000)
    e.expect_close(1000)
    cl.pump(0.3)
    s.srv.stop()
    text = open(log).read()
    check('"GET /deny?id=al1 HTTP/1.1" 401 11 ' in text, "HTTP/1.1 denial line")
    check('"GET /deny?id=al2 HTTP/2.0" 401 11 ' in text, "h2 denial line: the body's bytes")
    check('"GET /echo?id=al3 HTTP/2.0" 200 ' in text, "h2 websocket line: GET, 200")


@test(timeout=60)
def ws_h2_early_frames_not_a_body(ctx):
    """limits.max_body_size: 1000, and a 1500-byte frame sent in the same
    flight as the extended CONNECT (before its scope exists): it is a
    websocket message, echoed, not a request body refused 413."""
    ctx_of[0] = ctx
    s = H2Server(ctx, app=wsapp(ctx), extra="limits:\n  max_body_size: 1000\n")
    cl = client(s)
    sid = cl.c.get_next_available_stream_id()
    cl.c.send_headers(sid, [(":method", "CONNECT"), (":protocol", "websocket"),
                            (":scheme", "http"), (":path", "/echo?id=emb"),
                            (":authority", "localhost"), ("sec-websocket-version", "13")])
    m = b"e" * 1500
    cl.c.send_data(sid, bytes([0x82, 0xFE]) + struct.pack("!H", len(m)) + b"\0\0\0\0" + m)
    cl.flush()
    ws = object.__new__(RawWS)
    ws.sock = StreamSock(cl, sid)
    ws.buf = bytearray()
    ws.eof = False
    check(cl.wait(lambda: any(isinstance(e, (h2.events.ResponseReceived, h2.events.StreamReset))
                              and e.stream_id == sid for e in cl.events), 5 * SLOW), "no answer")
    st = [dict(e.headers).get(":status") for e in cl.events
          if isinstance(e, h2.events.ResponseReceived) and e.stream_id == sid]
    check_eq(st, ["200"], "status of the extended CONNECT with an early 1500-byte frame")
    check_eq(ws.recv_message(), (2, m), "the early frame echoed")
    # a plain request body is still bound by the limit
    rid = cl.request("/hello", method="POST", headers=[("content-length", "1500")], end=False)
    status, _, _, _ = cl.response(rid)
    check_eq(status, 413, "a 1500-byte request body")
