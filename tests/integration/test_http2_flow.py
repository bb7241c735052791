"""HTTP/2 flow control and disconnect reasons under hostile or stalled
clients (the review of issue 15): windows given back for bodies nobody
will read, one stalled stream not stalling the others' send completions,
protocol errors reaching every in-flight app with the right reason.
Drives python3-h2 by hand against apps/h2app.c (see test_http2.py)."""

import os
import socket
import time

from lib import SLOW, check, check_eq, test, wait_event, wait_for, app_events
from test_http2 import H2Client, H2Server, h2_frame, read_frames

try:
    import h2.events
    import h2.settings
    import hpack
except ImportError:
    h2 = None


def send_body(c, sid, total, end=True, timeout=20):
    """Send total bytes on sid as the windows allow; returns bytes left unsent."""
    left = total
    deadline = time.time() + timeout * SLOW
    while left > 0 and time.time() < deadline and not c.closed:
        room = min(c.c.local_flow_control_window(sid), c.c.max_outbound_frame_size, left)
        if room <= 0:
            c.pump(0.1)
            continue
        c.c.send_data(sid, b"u" * room, end_stream=end and room == left)
        c.flush()
        left -= room
    return left


def ended(c, sid):
    return any(isinstance(e, (h2.events.StreamEnded, h2.events.StreamReset)) and e.stream_id == sid
               for e in c.events)


@test(timeout=90)
def http2_abandoned_uploads_return_the_window(ctx):
    """Bodies buffered for an app that never read them, then abandoned by
    the client's RST_STREAM: the connection window gets those bytes back,
    so 17 abandoned 60 KB uploads (more than the 1 MiB connection window in
    all) do not stall a 200 KB upload after them."""
    s = H2Server(ctx)
    c = H2Client(s.tls_socket())
    c.pump(0.3)  # our SETTINGS and the connection's WINDOW_UPDATE
    for i in range(17):
        sid = c.request("/hold?id=ab%d" % i, method="POST", end=False)
        check_eq(send_body(c, sid, 60000, end=False), 0, "upload %d not sent" % i)
        wait_event(ctx, "ab%d" % i, "start")
        c.c.reset_stream(sid, error_code=8)  # CANCEL
        c.flush()
    b = c.request("/upload?id=after", method="POST", end=False)
    left = send_body(c, b, 200000, timeout=10)
    check_eq(left, 0, "bytes of the 200 KB upload the connection window held back")
    status, body, _, _ = c.response(b, timeout=10)
    check_eq((status, body), (200, b"200000"), "the upload after the abandoned ones")
    c.close()


@test(timeout=90)
def http2_stalled_stream_does_not_stall_others(ctx):
    """A stream whose send window the client keeps shut (500 KB response,
    its stream window never reopened) parks only its own sends: another
    stream on the connection, whose app waits for each send's completion,
    gets its whole response."""
    s = H2Server(ctx)
    c = H2Client(s.tls_socket())
    c.c.increment_flow_control_window(8 << 20)  # the connection's window is not the limit
    c.flush()
    a = c.request("/big?id=stall&kb=500")
    wait_event(ctx, "stall", "start")
    c.pump(0.5)  # A's first 64 KB arrive; its window stays shut (never acknowledged)
    b = c.request("/big?id=other&kb=32")
    c.wait(lambda: ended(c, b), 10)
    body = b"".join(e.data for e in c.events
                    if isinstance(e, h2.events.DataReceived) and e.stream_id == b)
    check(ended(c, b), "the other stream never ended (%d bytes of 32768 came)" % len(body))
    check_eq(len(body), 32768, "the other stream's body")
    check_eq(app_events(ctx, "other"), ["start", "done"], "the other app's events")
    check(not ended(c, a), "the stalled stream ended although its window is shut")
    # Reopening A's window lets it finish too.
    got = sum(e.flow_controlled_length for e in c.events
              if isinstance(e, h2.events.DataReceived) and e.stream_id == a)
    total = got
    c.c.acknowledge_received_data(got, a)
    c.flush()
    deadline = time.time() + 20 * SLOW
    while not ended(c, a) and time.time() < deadline and not c.closed:
        new = c.pump(0.2)
        n = sum(e.flow_controlled_length for e in new
                if isinstance(e, h2.events.DataReceived) and e.stream_id == a)
        if n:
            total += n
            c.c.acknowledge_received_data(n, a)
            c.flush_quiet()
    check(ended(c, a), "the stalled stream did not finish once its window opened (%d bytes)"
          % total)
    check_eq(total, 500 * 1024, "the stalled stream's body")
    c.close()


@test(timeout=60)
def http2_protocol_error_reason(ctx):
    """A protocol error ends the connection: every in-flight app hears
    protocol_error (not server_shutdown), and a GOAWAY PROTOCOL_ERROR goes out."""
    s = H2Server(ctx)
    c = H2Client(s.tls_socket())
    for i in range(3):
        c.request("/hold?id=pe%d" % i, method="POST", end=False)
    for i in range(3):
        wait_event(ctx, "pe%d" % i, "start")
    c.sock.sendall(h2_frame(0, 0, 0, b"x"))  # DATA on stream 0: a connection error
    c.wait(lambda: c.goaway() is not None, 5)
    for i in range(3):
        wait_event(ctx, "pe%d" % i, "disconnect")
        check_eq(app_events(ctx, "pe%d" % i), ["start", "disconnect protocol_error"],
                 "stream %d's events" % i)
    g = c.goaway()
    check(g is not None, "no GOAWAY")
    check_eq(int(g.error_code), 1, "GOAWAY code (PROTOCOL_ERROR)")
    c.close()


@test(timeout=60)
def http2_body_and_path_limits(ctx):
    """limits.max_body_size over HTTP/2: a content-length past it is
    answered 413 without the app; a body that grows past it (no
    content-length) gets 413 and the app hears body_too_large.
    limits.max_request_line bounds :path (414)."""
    s = H2Server(ctx, extra="limits:\n  max_body_size: 1k\n  max_request_line: 1k\n")
    c = H2Client(s.tls_socket())
    c.pump(0.3)
    a = c.request("/upload?id=cl", method="POST", headers=[("content-length", "100000")],
                  end=False)
    status, _, _, _ = c.response(a)
    check_eq(status, 413, "a content-length past max_body_size")
    check_eq(app_events(ctx, "cl"), [], "the app of a refused request")
    b = c.request("/upload?id=grow", method="POST", end=False)
    wait_event(ctx, "grow", "start")
    c.c.send_data(b, b"g" * 16000)
    c.flush()
    status, _, _, _ = c.response(b)
    check_eq(status, 413, "a body growing past max_body_size")
    wait_event(ctx, "grow", "disconnect")
    check_eq(app_events(ctx, "grow"), ["start", "disconnect body_too_large"], "app events")
    d = c.request("/" + "p" * 2000)
    status, _, _, _ = c.response(d)
    check_eq(status, 414, "a :path past max_request_line")
    e = c.request("/upload?id=small", method="POST", end=False)
    c.c.send_data(e, b"s" * 1000, end_stream=True)
    c.flush()
    status, body, _, _ = c.response(e)
    check_eq((status, body), (200, b"1000"), "a body within the limit")
    c.close()


@test(timeout=60)
def http2_zero_window_write_timeout(ctx):
    """A client that keeps its send windows shut (SETTINGS_INITIAL_WINDOW_SIZE
    0, never a WINDOW_UPDATE) does not hold a stream forever: after
    timeouts.http2_window (here its default, timeouts.write) without a DATA
    byte framed the stream is reset, its app hears write_timeout; a stream
    with nothing to send is left alone."""
    zero_window_resets_after(ctx, "timeouts:\n  write: 1\n")


@test(timeout=60)
def http2_zero_window_follows_http2_window(ctx):
    """timeouts.http2_window set on its own governs a shut window, although
    timeouts.write is a minute."""
    zero_window_resets_after(ctx, "timeouts:\n  write: 60s\n  http2_window: 1\n")


def zero_window_resets_after(ctx, timeouts):
    s = H2Server(ctx, extra=timeouts)
    c = H2Client(s.tls_socket(), settings={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
    c.pump(0.3)
    h = c.request("/hold?id=zwhold", method="POST", end=False)
    a = c.request("/big?id=zw&kb=80")
    wait_event(ctx, "zw", "start")
    t0 = time.time()
    c.wait(lambda: ended(c, a), 10)
    check(ended(c, a), "the stream the client never opened a window for is still open after %.1fs"
          % (time.time() - t0))
    check(any(isinstance(e, h2.events.StreamReset) and e.stream_id == a for e in c.events),
          "the stalled stream was not reset")
    wait_event(ctx, "zw", "gone")
    check_eq(app_events(ctx, "zw"), ["start", "gone write_timeout"], "the stalled app's events")
    check_eq(app_events(ctx, "zwhold"), ["start"], "the stream with nothing to send")
    c.close()


@test(timeout=60)
def http2_request_timeout_per_stream(ctx):
    """timeouts.request is each stream's own: a PING a second on the
    connection does not keep a stalled upload alive (its app hears
    client_timeout within a few seconds); timeouts.header bounds a header
    block as a whole, however slowly its CONTINUATION frames trickle in."""
    s = H2Server(ctx, extra="timeouts:\n  request: 2\n  header: 2\n")
    c = H2Client(s.tls_socket())
    a = c.request("/upload?id=pingkept", method="POST", end=False)
    c.c.send_data(a, b"x" * 100)
    c.flush()
    wait_event(ctx, "pingkept", "start")
    t0 = time.time()
    while time.time() - t0 < 10 * SLOW and len(app_events(ctx, "pingkept")) < 2 and not c.closed:
        c.c.ping(b"12345678")
        c.flush_quiet()
        c.pump(0.5)
    check_eq(app_events(ctx, "pingkept"), ["start", "disconnect client_timeout"],
             "a stalled upload kept company by PINGs (after %.1fs)" % (time.time() - t0))
    c.close()
    # A header block in 8 fragments (HEADERS, then 7 CONTINUATION frames:
    # within nghttp2's CONTINUATION cap), one every 0.7 s: 4.9 s in all.
    enc = hpack.Encoder()
    block = enc.encode([(":method", "GET"), (":path", "/slowhead"), (":scheme", "https"),
                        (":authority", "localhost"), ("x-pad", "p" * 200)])
    k = (len(block) + 7) // 8
    parts = [block[i:i + k] for i in range(0, len(block), k)]
    sock = s.tls_socket()
    sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + h2_frame(4, 0, 0, b"")
                 + h2_frame(1, 0, 1, parts[0]))
    t0 = time.time()
    closed = False
    for n, part in enumerate(parts[1:]):
        time.sleep(0.7)
        try:
            sock.sendall(h2_frame(9, 4 if n == len(parts) - 2 else 0, 1, part))
        except OSError:
            closed = True
            break
    frames = read_frames(sock, timeout=1)
    sock.close()
    closed = closed or any(f[0] == 7 for f in frames)  # GOAWAY
    headers = [f for f in frames if f[0] == 1 and f[2] == 1]
    check(closed and not headers, "a header block trickling in for %.1fs was answered, not cut "
          "(timeouts.header 2s)" % (time.time() - t0))


@test(timeout=90)
def http2_rapid_reset_of_answered_streams(ctx):
    """Rapid reset counts every client reset of a stream whose response is
    not complete, not only of unanswered ones: batches of 50 streams whose
    responses have started (HEADERS seen), each batch reset at once, end
    the connection with GOAWAY ENHANCE_YOUR_CALM; the apps hear
    protocol_error or client_closed, and the worker serves on."""
    s = H2Server(ctx)
    c = H2Client(s.tls_socket())
    batches = 0
    t0 = time.time()
    while c.goaway() is None and not c.closed and time.time() - t0 < 15 * SLOW:
        sids = [c.request("/big?id=ans&kb=200") for _ in range(50)]
        c.wait(lambda: all(any(isinstance(e, h2.events.ResponseReceived) and e.stream_id == sid
                               for e in c.events) for sid in sids) or c.goaway() is not None, 5)
        try:
            for sid in sids:
                c.c.reset_stream(sid, error_code=8)
            c.flush()
        except Exception:
            break
        batches += 1
        c.pump(0.01)
    c.wait(lambda: c.goaway() is not None, 5)
    g = c.goaway()
    check(g is not None, "no GOAWAY after %d batches of 50 resets of answered streams" % batches)
    check_eq(int(g.error_code), 11, "GOAWAY code (ENHANCE_YOUR_CALM)")
    c.close()
    out = s.curl_ok("--http2", s.url("/after"))
    check_eq(out, b"ok /after 2", "served after the flood")


@test(timeout=90, serial=True)
def http2_reset_scopes_count_against_stream_limit(ctx):
    """Streams reset by the client whose apps ignore the disconnect and run
    on still count against the 100 concurrent streams: 80 such streams,
    reset, then 80 more: at most 100 apps run at once, the rest are
    refused (RST_STREAM REFUSED_STREAM), and once the deaf apps finish new
    streams are served again."""
    s = H2Server(ctx)
    c = H2Client(s.tls_socket())
    first = [c.request("/deaf?id=d%d&ms=%d" % (i, 4000 * SLOW)) for i in range(80)]
    check(wait_for(lambda: all(app_events(ctx, "d%d" % i) for i in range(80)), 10 * SLOW),
          "not every first stream started")
    for sid in first:
        c.c.reset_stream(sid, error_code=8)
    c.flush()
    c.pump(0.3)
    second = [c.request("/deaf?id=e%d&ms=100" % i) for i in range(80)]
    c.wait(lambda: all(ended(c, sid) for sid in second), 5)
    refused = [e.stream_id for e in c.events if isinstance(e, h2.events.StreamReset)
               and e.stream_id in second and int(e.error_code) == 7]
    started = sum(1 for i in range(80) if app_events(ctx, "e%d" % i))
    check(started <= 20 + 2, "%d of the second 80 started beside 80 reset-but-running apps"
          % started)
    check(len(refused) >= 58, "only %d of the second 80 refused" % len(refused))
    check(s.metrics().get("pagid_http2_refused_total", 0) >= 58, "refusals counted")
    check(wait_for(lambda: all("finish" in app_events(ctx, "d%d" % i) for i in range(80)),
                   15 * SLOW), "the deaf apps did not finish")
    a = c.request("/later")
    status, body, _, _ = c.response(a)
    check_eq((status, body), (200, b"ok /later 2"), "served once the deaf apps finished")
    c.close()


@test(timeout=60)
def http2_scheme_from_the_connection(ctx):
    """The scope's scheme is the connection's (https over TLS, http on h2c),
    whatever :scheme the client claims."""
    s = H2Server(ctx)
    c = H2Client(s.tls_socket())
    sid = c.c.get_next_available_stream_id()
    c.c.send_headers(sid, [(":method", "GET"), (":path", "/scheme"), (":scheme", "http"),
                           (":authority", "localhost")], end_stream=True)
    c.flush()
    status, body, _, _ = c.response(sid)
    check_eq((status, body), (200, b"https"), ":scheme http over TLS")
    c.close()
    c = H2Client(socket.create_connection(("127.0.0.1", s.cport), timeout=5 * SLOW))
    status, body, _, _ = c.response(c.request("/scheme"))  # the helper says :scheme https
    check_eq((status, body), (200, b"http"), ":scheme https on h2c")
    c.close()


@test(timeout=60)
def http2_half_close_finishes_complete_requests(ctx):
    """A client that half-closes TCP after its requests (h2c): a stream
    whose request was whole still gets its whole response, one whose body
    can no longer come ends with client_closed, and the connection closes
    after."""
    s = H2Server(ctx)
    c = H2Client(socket.create_connection(("127.0.0.1", s.cport), timeout=5 * SLOW))
    a = c.request("/big?id=hc&kb=32&ms=500")  # answered after the half-close
    b = c.request("/upload?id=hcup", method="POST", end=False)
    wait_event(ctx, "hcup", "start")
    c.sock.shutdown(socket.SHUT_WR)
    # Read to the close without writing (the client can no longer send);
    # frames by hand, as python-h2 stops at the GOAWAY.
    frames = read_frames(c.sock, timeout=10)
    data = [f for f in frames if f[0] == 0 and f[2] == a]
    body = sum(len(f[3]) for f in data)
    check(body == 32768 and data and data[-1][1] & 1,
          "the whole request's response after a half-close: %d bytes, END_STREAM %s"
          % (body, bool(data and data[-1][1] & 1)))
    wait_event(ctx, "hcup", "disconnect")
    check_eq(app_events(ctx, "hcup"), ["start", "disconnect client_closed"], "the upload's app")
    check(any(f[0] == 7 for f in frames), "no GOAWAY before the close")
    c.close()


@test(timeout=60)
def http2_streams_start_in_order(ctx):
    """Streams whose heads come in one read start in the order the client
    opened them (oldest first), not newest first."""
    s = H2Server(ctx)
    c = H2Client(s.tls_socket())
    c.pump(0.3)
    for i in range(10):
        sid = c.c.get_next_available_stream_id()
        c.c.send_headers(sid, [(":method", "POST"), (":path", "/hold?id=ord%d" % i),
                               (":scheme", "https"), (":authority", "localhost")])
    c.flush()  # all ten HEADERS in one write
    check(wait_for(lambda: all(app_events(ctx, "ord%d" % i) for i in range(10)), 10 * SLOW),
          "not every stream started")
    with open(ctx.app_log, "rb") as f:
        order = [ln.split()[0].decode() for ln in f.read().splitlines()
                 if ln.startswith(b"ord") and ln.endswith(b" start")]
    check_eq(order, ["ord%d" % i for i in range(10)], "the order the apps started in")
    c.close()


@test(timeout=60)
def http2_settings_flood_counted(ctx):
    """A SETTINGS frame of 100 entries (past the 32 allowed) ends the
    connection with GOAWAY ENHANCE_YOUR_CALM, and pagid_http2_calm_total
    counts it (every ENHANCE_YOUR_CALM exit is counted, not only the ones
    nghttp2 reports as FLOODED)."""
    s = H2Server(ctx)
    before = s.metrics().get("pagid_http2_calm_total", 0)
    t = s.tls_socket()
    entries = b"".join(b"\x00\x03" + (1000 + i).to_bytes(4, "big") for i in range(100))
    t.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + h2_frame(4, 0, 0, entries))
    frames = read_frames(t)
    t.close()
    goaways = [f for f in frames if f[0] == 7 and len(f[3]) >= 8]
    check(goaways, "no GOAWAY after a SETTINGS flood: %r" % [f[:3] for f in frames])
    check_eq(int.from_bytes(goaways[0][3][4:8], "big"), 11, "GOAWAY code (ENHANCE_YOUR_CALM)")
    check(wait_for(lambda: s.metrics().get("pagid_http2_calm_total", 0) >= before + 1, 5),
          "the SETTINGS flood not counted in pagid_http2_calm_total")


@test(timeout=60)
def http2_response_framing_errors(ctx):
    """A final body shorter than the response's content-length resets the
    stream (INTERNAL_ERROR) rather than ending it as if whole; a response
    header value with leading whitespace (RFC 9113 8.2.1) is the app's
    error: 500."""
    s = H2Server(ctx)
    c = H2Client(s.tls_socket())
    a = c.request("/short")
    c.wait(lambda: ended(c, a), 5)
    resets = [e for e in c.events if isinstance(e, h2.events.StreamReset) and e.stream_id == a]
    check(resets and int(resets[0].error_code) == 2,
          "a body short of its content-length: %r" % [type(e).__name__ for e in c.events
                                                      if getattr(e, "stream_id", 0) == a])
    b = c.request("/padded")
    status, _, _, _ = c.response(b)
    check_eq(status, 500, "a header value with a leading space")
    c.close()


@test(timeout=60)
def http2_head_ends_on_headers(ctx):
    """A response without a body (HEAD here) ends the stream on its HEADERS
    frame (END_STREAM), with no empty DATA frame after it."""
    s = H2Server(ctx)
    c = H2Client(s.tls_socket())
    a = c.request("/head-me", method="HEAD")
    status, body, _, ended_ = c.response(a)
    check_eq((status, body, ended_), (200, b"", True), "HEAD's answer")
    resp = [e for e in c.events if isinstance(e, h2.events.ResponseReceived) and e.stream_id == a]
    check(resp and resp[0].stream_ended is not None, "END_STREAM not on the HEADERS frame")
    check(not any(isinstance(e, h2.events.DataReceived) and e.stream_id == a for e in c.events),
          "a DATA frame after a HEAD's HEADERS")
    b = c.request("/after")
    check_eq(c.response(b)[:2], (200, b"ok /after 2"), "the connection goes on")
    c.close()


@test(timeout=60)
def http2_idle_close_says_goaway(ctx):
    """timeouts.keepalive (after a request) and timeouts.idle (before any)
    end an h2 connection with GOAWAY NO_ERROR naming the last stream
    processed, then the close: never a bare FIN."""
    s = H2Server(ctx, extra="timeouts:\n  idle: 1\n  keepalive: 1\n")
    c = H2Client(socket.create_connection(("127.0.0.1", s.cport), timeout=5 * SLOW))
    sid = c.request("/a")
    status, body, _, _ = c.response(sid)
    check_eq((status, body), (200, b"ok /a 2"), "the request before the keep-alive timeout")
    c.wait(lambda: c.goaway() is not None, 10)
    g = c.goaway()
    check(g is not None, "no GOAWAY before the keep-alive close")
    check_eq((int(g.error_code), g.last_stream_id), (0, sid), "GOAWAY code and last stream")
    check(c.wait(lambda: c.closed, 10), "the connection stays open after its GOAWAY")
    c.close()
    c = H2Client(socket.create_connection(("127.0.0.1", s.cport), timeout=5 * SLOW))
    c.wait(lambda: c.goaway() is not None, 10)
    g = c.goaway()
    check(g is not None, "no GOAWAY before the idle close")
    check_eq((int(g.error_code), g.last_stream_id), (0, 0), "GOAWAY of a connection never used")
    c.close()


@test(timeout=60)
def http2_limits_from_config(ctx):
    """limits.http2_*: SETTINGS carry the configured streams and stream
    window, the connection window is opened to its configured size, and the
    configured reset rate ends a connection with ENHANCE_YOUR_CALM (20
    resets: well under the default 100)."""
    s = H2Server(ctx, extra="limits:\n  http2_max_streams: 50\n  http2_stream_window: 128k\n"
                            "  http2_connection_window: 3m\n  http2_max_resets: 10\n")
    c = H2Client(socket.create_connection(("127.0.0.1", s.cport), timeout=5 * SLOW))
    rs = c.c.remote_settings
    c.wait(lambda: rs.max_concurrent_streams == 50 and c.c.outbound_flow_control_window > 65535, 5)
    check_eq((rs.max_concurrent_streams, rs.initial_window_size), (50, 131072),
             "SETTINGS_MAX_CONCURRENT_STREAMS and SETTINGS_INITIAL_WINDOW_SIZE")
    check_eq(c.c.outbound_flow_control_window, 3 << 20, "the connection window")
    hdrs = [(":method", "GET"), (":path", "/hold?id=rr"), (":scheme", "http"),
            (":authority", "localhost")]
    for _ in range(20):
        sid = c.c.get_next_available_stream_id()
        c.c.send_headers(sid, hdrs, end_stream=False)
        c.c.reset_stream(sid, error_code=8)
    c.flush()
    c.wait(lambda: c.goaway() is not None, 5)
    g = c.goaway()
    check(g is not None, "no GOAWAY after 20 resets with http2_max_resets: 10")
    check_eq(int(g.error_code), 11, "GOAWAY code (ENHANCE_YOUR_CALM)")
    c.close()


@test(timeout=60)
def http2_empty_data_and_priority_floods(ctx):
    """Frames that ask for nothing but CPU: 3000 empty DATA frames on an
    open upload (CVE-2019-9518), or 3000 PRIORITY frames (CVE-2019-9513),
    sent in one go end the connection with GOAWAY ENHANCE_YOUR_CALM,
    counted; a few hundred (a slow upload's empty frames) do not."""
    s = H2Server(ctx)
    preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + h2_frame(4, 0, 0, b"")
    post = hpack.Encoder().encode([(":method", "POST"), (":path", "/upload?id=fl"),
                                   (":scheme", "http"), (":authority", "localhost")])

    def flood(frames):
        t = socket.create_connection(("127.0.0.1", s.cport), timeout=5 * SLOW)
        try:
            t.sendall(preface + h2_frame(1, 0x4, 1, post) + frames)
        except OSError:
            pass
        got = read_frames(t, timeout=2)
        t.close()
        return [int.from_bytes(f[3][4:8], "big") for f in got if f[0] == 7]

    calm0 = s.metrics().get("pagid_http2_calm_total", 0)
    check_eq(flood(h2_frame(0, 0, 1, b"") * 300), [], "300 empty DATA frames: GOAWAY")
    check_eq(flood(h2_frame(0, 0, 1, b"") * 3000), [11], "empty DATA flood: GOAWAY codes")
    prio = b"".join(h2_frame(2, 0, 3 + 2 * i, b"\x00\x00\x00\x01\x10") for i in range(3000))
    check_eq(flood(prio), [11], "PRIORITY flood: GOAWAY codes")
    check(wait_for(lambda: s.metrics().get("pagid_http2_calm_total", 0) >= calm0 + 2, 5),
          "floods not counted in pagid_http2_calm_total")
    out = s.curl_ok("--http2", s.url("/after"))
    check_eq(out, b"ok /after 2", "served after")





# ---- hostile clients, round three (issue 25) ----


def worker_fds(s):
    """Descriptors the (one) worker holds now."""
    pids = s.srv.workers()
    check(len(pids) == 1, "workers: %r" % pids)
    try:
        return len(os.listdir("/proc/%d/fd" % pids[0]))
    except OSError:
        return 0


def wait_worker_fds(s, base, timeout, what):
    ok = wait_for(lambda: worker_fds(s) <= base, timeout)
    check(ok, "the worker holds %d fds %s, %d before" % (worker_fds(s), what, base))


def h2c_raw(s, settings=b""):
    """A cleartext socket past the preface and our SETTINGS."""
    t = socket.create_connection(("127.0.0.1", s.cport), timeout=5 * SLOW)
    t.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + h2_frame(4, 0, 0, settings))
    return t


def headers_block(path, method="GET"):
    return hpack.Encoder().encode([(":method", method), (":path", path), (":scheme", "http"),
                                   (":authority", "localhost")])


@test(timeout=60, serial=True)
def http2_fin_releases_event_streams_and_long_polls(ctx):
    """SSE streams and long polls (whole GETs the app holds) over h2c, then
    the client closes (FIN, nothing unread): every app hears client_closed
    within about a second, once each way (sse.disconnect and on_disconnect
    for the streams), and the worker's fds are back to their count before.
    Fifty such cycles on max_connections: 50 leave the server serving."""
    s = H2Server(ctx, extra="limits:\n  max_connections: 50\n")
    time.sleep(0.3)
    base = worker_fds(s)
    for cycle in range(3):
        c = H2Client(socket.create_connection(("127.0.0.1", s.cport), timeout=5 * SLOW))
        sse = ["f%dsse%d" % (cycle, i) for i in range(10)]
        poll = ["f%dlp%d" % (cycle, i) for i in range(10)]
        for tid in sse:
            c.request("/sse?id=" + tid, headers=[("accept", "text/event-stream")])
        for tid in poll:
            c.request("/hold?id=" + tid)
        check(wait_for(lambda: all(app_events(ctx, t) for t in sse + poll), 10 * SLOW),
              "not every stream started")
        c.wait(lambda: sum(isinstance(e, h2.events.ResponseReceived) for e in c.events) >= 10, 5)
        c.pump(0.2)  # read what came: the close is a FIN, not a reset
        c.close()
        t0 = time.time()
        done = wait_for(lambda: all(len(app_events(ctx, t)) >= 3 for t in sse) and
                        all(len(app_events(ctx, t)) >= 2 for t in poll), 5 * SLOW)
        took = time.time() - t0
        check(done, "apps still held %.1fs after the client's FIN: %r" % (
            took, {t: app_events(ctx, t) for t in sse[:1] + poll[:1]}))
        check(took < 1.5 * SLOW, "the apps heard the FIN after %.1fs" % took)
        for t in sse:
            check_eq(sorted(app_events(ctx, t)), ["disconnect client_closed",
                                                  "recv sse.disconnect client_closed", "start"],
                     "%s's events" % t)
        for t in poll:
            check_eq(app_events(ctx, t), ["start", "disconnect client_closed"], "%s's events" % t)
        wait_worker_fds(s, base, 2 * SLOW, "after the FIN")
    # The adversary's cycles: 50 connections' worth, each opened, its
    # streams started, and left with a FIN.
    for cycle in range(50):
        t = h2c_raw(s)
        frames = b"".join(h2_frame(1, 0x5, 1 + 2 * i, headers_block("/hold?id=x"))
                          for i in range(5))
        t.sendall(frames)
        t.settimeout(0.2)
        try:
            t.recv(65536)
        except OSError:
            pass
        t.close()
    wait_worker_fds(s, base, 3 * SLOW, "after 50 abandoned connections")
    c = H2Client(socket.create_connection(("127.0.0.1", s.cport), timeout=5 * SLOW))
    check_eq(c.response(c.request("/after"))[:2], (200, b"ok /after 2"), "served after")
    c.close()


@test(timeout=60)
def http1_fin_releases_event_stream(ctx):
    """The same over HTTP/1.1: an SSE response whose client closes is let go
    at once (client_closed, once each way) and its fd closed."""
    s = H2Server(ctx)
    time.sleep(0.3)
    base = worker_fds(s)
    socks = []
    for i in range(5):
        t = socket.create_connection(("127.0.0.1", s.hport), timeout=5 * SLOW)
        t.sendall(b"GET /sse?id=h1sse%d HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n"
                  % i)
        socks.append(t)
    check(wait_for(lambda: all(app_events(ctx, "h1sse%d" % i) for i in range(5)), 5 * SLOW),
          "not every stream started")
    for t in socks:
        t.settimeout(2)
        t.recv(65536)
        t.close()
    check(wait_for(lambda: all(len(app_events(ctx, "h1sse%d" % i)) >= 3 for i in range(5)),
                   1.5 * SLOW), "SSE apps still held after the client's FIN")
    for i in range(5):
        check_eq(sorted(app_events(ctx, "h1sse%d" % i)),
                 ["disconnect client_closed", "recv sse.disconnect client_closed", "start"],
                 "h1sse%d's events" % i)
    wait_worker_fds(s, base, 2 * SLOW, "after the FIN")


@test(timeout=60, serial=True)
def http2_half_close_is_bounded(ctx):
    """A client that half-closes (shutdown SHUT_WR) and keeps reading: its
    event stream ends at the FIN (an event stream has no end to wait for),
    a long poll whose request was whole is waited for at most
    timeouts.write (2 s here), then its app hears client_closed."""
    s = H2Server(ctx, extra="timeouts:\n  write: 2\n")
    c = H2Client(socket.create_connection(("127.0.0.1", s.cport), timeout=5 * SLOW))
    c.request("/sse?id=hcsse", headers=[("accept", "text/event-stream")])
    c.request("/hold?id=hclp")
    check(wait_for(lambda: app_events(ctx, "hcsse") and app_events(ctx, "hclp"), 5 * SLOW),
          "streams did not start")
    c.pump(0.3)
    c.sock.shutdown(socket.SHUT_WR)
    t0 = time.time()
    check(wait_for(lambda: len(app_events(ctx, "hcsse")) >= 3, 1.5 * SLOW),
          "the event stream outlived the half-close: %r" % app_events(ctx, "hcsse"))
    check_eq(app_events(ctx, "hclp"), ["start"], "the long poll right after the half-close")
    check(wait_for(lambda: len(app_events(ctx, "hclp")) >= 2, 6 * SLOW),
          "the long poll still held %.1fs after the half-close" % (time.time() - t0))
    took = time.time() - t0
    check(1.5 < took < 4 * SLOW, "the long poll ended %.1fs after the half-close" % took)
    check_eq(app_events(ctx, "hclp"), ["start", "disconnect client_closed"], "the long poll")
    frames = read_frames(c.sock, timeout=3)
    check(any(f[0] == 7 for f in frames), "no GOAWAY before the close")
    c.close()


@test(timeout=90)
def http2_zero_window_files_freed_at_fin(ctx):
    """SETTINGS_INITIAL_WINDOW_SIZE 0, a large static file asked on 100
    streams, then the close, ten times over: the streams' files are closed
    within a second or two of each close (not at timeouts.write), so the
    worker's fds never pile up."""
    www = os.path.join(ctx.tmpdir, "www")
    os.makedirs(www)
    with open(os.path.join(www, "big.bin"), "wb") as f:
        f.write(b"z" * (1 << 20))
    s = H2Server(ctx, app="static:" + www)
    time.sleep(0.3)
    base = worker_fds(s)
    settings = (4).to_bytes(2, "big") + (0).to_bytes(4, "big")  # INITIAL_WINDOW_SIZE 0
    for cycle in range(10):
        t = h2c_raw(s, settings)
        t.sendall(b"".join(h2_frame(1, 0x5, 1 + 2 * i, headers_block("/big.bin"))
                           for i in range(100)))
        frames = read_frames(t, timeout=0.5)
        heads = len(set(f[2] for f in frames if f[0] in (1, 3)))  # HEADERS or RST_STREAM
        check(heads >= 90, "cycle %d: %d streams answered" % (cycle, heads))
        t.close()
        wait_worker_fds(s, base, 2 * SLOW, "2 s after cycle %d's close" % cycle)
    out = s.curl_ok("--http2", s.url("/big.bin"))
    check_eq(len(out), 1 << 20, "the file served after")


@test(timeout=60)
def http2_server_resets_count_toward_rapid_reset(ctx):
    """Resets the server sends because of the client (here RST_STREAM
    FLOW_CONTROL_ERROR for a WINDOW_UPDATE that overflows a stream's
    window) spend the same limits.http2_max_resets budget as the client's
    own: 300 such streams in one go end the connection with GOAWAY
    ENHANCE_YOUR_CALM, counted in pagid_http2_calm_total."""
    s = H2Server(ctx)
    calm0 = s.metrics().get("pagid_http2_calm_total", 0)
    t = h2c_raw(s)
    over = (0x7fffffff).to_bytes(4, "big")
    t.sendall(b"".join(h2_frame(1, 0x4, 1 + 2 * i, headers_block("/hold?id=wu", "POST"))
                       + h2_frame(8, 0, 1 + 2 * i, over) for i in range(300)))
    frames = read_frames(t, timeout=2)
    t.close()
    resets = [f for f in frames if f[0] == 3]
    goaways = [int.from_bytes(f[3][4:8], "big") for f in frames if f[0] == 7]
    check(goaways == [11], "GOAWAY codes after 300 streams reset by the server: %r (%d resets)"
          % (goaways, len(resets)))
    check(len(resets) <= 150, "%d resets before the GOAWAY" % len(resets))
    check(wait_for(lambda: s.metrics().get("pagid_http2_calm_total", 0) >= calm0 + 1, 5),
          "not counted in pagid_http2_calm_total")


@test(timeout=60)
def http2_stream_ids_exhausted(ctx):
    """RFC 9113 5.1.1: a client that opened stream 2^31-1 can open no more;
    the server says GOAWAY at once (NO_ERROR, last stream 2^31-1) and
    answers that stream; a HEADERS after it, whose id cannot grow, is a
    connection error (GOAWAY PROTOCOL_ERROR), never silently ignored; so
    is a new stream whose id does not increase (5 after 7)."""
    s = H2Server(ctx)
    top = 0x7fffffff

    def goaways(frames):
        return [(int.from_bytes(f[3][0:4], "big") & top, int.from_bytes(f[3][4:8], "big"))
                for f in frames if f[0] == 7]

    t = h2c_raw(s)
    t.sendall(h2_frame(1, 0x5, top, headers_block("/last")))
    frames = read_frames(t, timeout=1)
    check_eq(goaways(frames)[:1], [(top, 0)], "GOAWAY after stream 2^31-1")
    check(any(f[0] == 1 and f[2] == top for f in frames), "stream 2^31-1 not answered")
    t.close()
    t = h2c_raw(s)
    t.sendall(h2_frame(1, 0x5, top, headers_block("/last"))
              + h2_frame(1, 0x5, 1, headers_block("/again")))
    frames = read_frames(t, timeout=2)
    t.close()
    check(goaways(frames) and goaways(frames)[-1][1] == 1,
          "HEADERS on stream 1 after 2^31-1: GOAWAYs %r" % goaways(frames))
    check(not any(f[0] == 1 and f[2] == 1 for f in frames), "stream 1 answered after 2^31-1")
    t = h2c_raw(s)
    t.sendall(h2_frame(1, 0x5, 7, headers_block("/seven")))
    time.sleep(0.3)
    t.sendall(h2_frame(1, 0x5, 5, headers_block("/five")))
    frames = read_frames(t, timeout=2)
    t.close()
    check(any(f[0] == 1 and f[2] == 7 for f in frames), "stream 7 not answered")
    check_eq([g[1] for g in goaways(frames)], [1], "GOAWAY codes after stream 5 came after 7")
    check(not any(f[0] == 1 and f[2] == 5 for f in frames), "stream 5 answered after 7")



@test(timeout=60)
def http2_open_file_bodies_capped(ctx):
    """limits.http2_max_open_files bounds the files one connection holds
    open: 20 streams of a large file behind a shut window hold at most 8
    (the limit here), the other 12 are refused to their apps (stream
    reset); past the limit, files no larger than high_watermark are read at
    once and hold none (20 of them all arrive whole once the window opens)."""
    www = os.path.join(ctx.tmpdir, "www")
    os.makedirs(www)
    with open(os.path.join(www, "big.bin"), "wb") as f:
        f.write(b"z" * (1 << 20))
    with open(os.path.join(www, "small.txt"), "wb") as f:
        f.write(b"s" * 30000)
    s = H2Server(ctx, app="static:" + www, extra="limits:\n  http2_max_open_files: 8\n")
    time.sleep(0.3)
    base = worker_fds(s)
    c = H2Client(socket.create_connection(("127.0.0.1", s.cport), timeout=5 * SLOW),
                 settings={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
    c.pump(0.2)
    big = [c.request("/big.bin") for _ in range(20)]
    c.pump(0.2)
    small = [c.request("/small.txt") for _ in range(20)]
    c.wait(lambda: all(any(getattr(e, "stream_id", 0) == sid and
                           isinstance(e, (h2.events.ResponseReceived, h2.events.StreamReset))
                           for e in c.events) for sid in small + big), 5)
    c.pump(0.3)
    held = worker_fds(s) - base
    check(held <= 1 + 8, "one connection holds %d fds (its socket and 8 files at most)" % held)
    reset = [sid for sid in big if any(isinstance(e, h2.events.StreamReset) and e.stream_id == sid
                                       for e in c.events)]
    check_eq(len(reset), 12, "large files refused past the limit")
    c.c.increment_flow_control_window(8 << 20)  # the connection's window is not the limit
    c.c.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 65535})
    c.flush()
    for sid in small:
        status, body, _, done = c.response(sid, timeout=5)
        check_eq((status, len(body), done), (200, 30000, True), "a small file's response")
    c.close()
    wait_worker_fds(s, base, 2 * SLOW, "after the close")