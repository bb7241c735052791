"""Request lifecycle with the lifecycle test app (apps/lifecycle.c): exactly one
of on_complete / on_disconnect with the spec's reason, one release, abandoned
uploads, slow readers, timeouts, the 500 backstop, failures after the start,
sends after a disconnect, and header validation on send."""

import select
import socket
import subprocess
import time

from lib import (SLOW, Conn, TestFailure, app_events, check, check_eq, count_events,
                 request, test, wait_event, wait_for)


def settle(ctx, tid, timeout=8):
    """Wait for the scope's release, then give late (duplicate) callbacks a moment."""
    if not wait_event(ctx, tid, "release", timeout):
        raise TestFailure("no release logged for %s within %ss; events: %r"
                          % (tid, timeout, app_events(ctx, tid)))
    time.sleep(0.2)
    return app_events(ctx, tid)


def check_terminal(events, outcome, reason=None):
    """outcome 'complete': one on_complete, no on_disconnect; 'disconnect': the reverse."""
    n_complete = count_events(events, "on_complete")
    disc = [e for e in events if e.startswith("on_disconnect")]
    if outcome == "complete":
        check(n_complete == 1 and not disc,
              "expected exactly one on_complete and no on_disconnect, got %r" % events)
    else:
        check(n_complete == 0, "on_complete fired for an interrupted request: %r" % events)
        check(len(disc) == 1, "expected exactly one on_disconnect, got %r" % events)
        if reason is not None:
            got = disc[0].split(" ", 1)[1] if " " in disc[0] else ""
            want = reason if isinstance(reason, tuple) else (reason,)
            check(got in want, "disconnect reason: expected %s, got %r" % (" or ".join(want), got))
    check_eq(count_events(events, "release"), 1, "number of release calls")
    check_eq(events[-1], "release", "release is the last event")


def still_serving(port):
    """A fresh request is answered (lifecycle app: "ok", hello app: its greeting)."""
    t0 = time.monotonic()
    r = request(port, "GET", "/hello")
    check(r.status == 200 and r.body in (b"ok", b"Hello from PAGI"),
          "a normal request afterwards: %r" % r)
    return time.monotonic() - t0


def closed_after(c, limit):
    """Seconds until the server closes c (fails after limit); returns (secs, bytes)."""
    t0 = time.monotonic()
    data = c.expect_closed(limit)
    return time.monotonic() - t0, data


@test()
def app_compiles_cleanly(ctx):
    # run.py builds apps/lifecycle.c with -std=c11 -Wall -Wextra -Werror.
    ctx.lifecycle_so


@test()
def normal_request_completes(ctx):
    srv = ctx.start("lifecycle")
    r = request(srv.port, "GET", "/hello", headers={"x-test-id": "n1"})
    check_eq((r.status, r.body), (200, b"ok"), "response")
    ev = settle(ctx, "n1")
    check_terminal(ev, "complete")
    check(ev.index("on_complete") < ev.index("release"), "on_complete after release: %r" % ev)


@test()
def keep_alive_requests_each_complete(ctx):
    srv = ctx.start("lifecycle")
    c = Conn(srv.port)
    for i in range(3):
        c.send("GET /hello HTTP/1.1\r\nHost: t\r\nx-test-id: ka%d\r\n\r\n" % i)
        r = c.read_response()
        check_eq(r.status, 200, "status %d" % i)
    c.close()
    for i in range(3):
        check_terminal(settle(ctx, "ka%d" % i), "complete")


@test()
def streamed_response_completes(ctx):
    srv = ctx.start("lifecycle")
    r = request(srv.port, "GET", "/stream?n=5&size=100", headers={"x-test-id": "s1"})
    check_eq(len(r.body), 500, "body length")
    ev = settle(ctx, "s1")
    check_eq(count_events(ev, "send_done"), 5, "send completions")
    check_terminal(ev, "complete")


@test()
def body_upload_completes(ctx):
    srv = ctx.start("lifecycle")
    body = b"u" * 50000
    r = request(srv.port, "POST", "/body", headers={"x-test-id": "b1"}, body=body)
    check_eq((r.status, r.body), (200, b"got 50000"), "response")
    ev = settle(ctx, "b1")
    reqs = [e for e in ev if e.startswith("recv http.request")]
    check(reqs and reqs[-1].endswith("more=0"), "last body event not more=0: %r" % reqs)
    check(all(e.endswith("more=1") for e in reqs[:-1]), "more=0 before the end: %r" % reqs)
    check_eq(sum(int(e.split()[2]) for e in reqs), 50000, "sum of body event lengths")
    check_terminal(ev, "complete")


@test()
def abandoned_upload(ctx):
    srv = ctx.start("lifecycle")
    c = Conn(srv.port)
    c.send("POST /body HTTP/1.1\r\nHost: t\r\nx-test-id: up1\r\nContent-Length: 100000\r\n\r\n"
           "0123456789")
    check(wait_event(ctx, "up1", "handle", 5), "app never invoked for the upload")
    wait_event(ctx, "up1", "recv http.request", 1)
    c.close()
    ev = settle(ctx, "up1")
    check_eq(count_events(ev, "recv http.disconnect"), 1, "http.disconnect events received")
    check_terminal(ev, "disconnect", "client_closed")
    check(ev.index(next(e for e in ev if e.startswith("on_disconnect")))
          < ev.index("recv http.disconnect"),
          "state transition order: on_disconnect must run before http.disconnect is "
          "delivered: %r" % ev)
    still_serving(srv.port)


@test()
def never_answering_app_client_closes(ctx):
    srv = ctx.start("lifecycle")
    c = Conn(srv.port)
    c.send("GET /never HTTP/1.1\r\nHost: t\r\nx-test-id: nv1\r\n\r\n")
    check(wait_event(ctx, "nv1", "recv http.request", 5), "app got no http.request: %r"
          % app_events(ctx, "nv1"))
    time.sleep(0.3)
    check(not wait_event(ctx, "nv1", "recv http.disconnect", 0.01),
          "http.disconnect delivered while the client is still connected")
    c.close()
    ev = settle(ctx, "nv1")
    check_eq(count_events(ev, "recv http.disconnect"), 1, "http.disconnect events received")
    check_terminal(ev, "disconnect", "client_closed")
    still_serving(srv.port)


@test()
def slow_reader_write_timeout(ctx):
    srv = ctx.start("lifecycle", config="timeouts:\n  write: 1s\n"
                    "flow_control:\n  high_watermark: 64k\n  low_watermark: 16k\n")
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(5)
    s.connect(("127.0.0.1", srv.port))
    s.sendall(b"GET /stream?n=2000&size=65536 HTTP/1.1\r\nHost: t\r\nx-test-id: wt1\r\n\r\n")
    t0 = time.monotonic()
    # The client never reads.
    got = wait_event(ctx, "wt1", "on_disconnect", 10)
    elapsed = time.monotonic() - t0
    check(got, "no on_disconnect within 10s of a client that never reads: %r"
          % app_events(ctx, "wt1")[-5:])
    check(elapsed < 6 * SLOW, "write timeout (1s) took %.1fs" % elapsed)
    ev = settle(ctx, "wt1")
    s.close()
    check(count_events(ev, "send_done") < 2000, "all sends completed although nobody read")
    check(any(e.startswith("high_water") for e in ev), "no high_water callback: %r" % ev[-5:])
    hw = next(i for i, e in enumerate(ev) if e.startswith("high_water"))
    od = next(i for i, e in enumerate(ev) if e.startswith("on_disconnect"))
    check(hw < od, "high_water logged after the disconnect")
    check_terminal(ev, "disconnect", "write_timeout")
    still_serving(srv.port)


@test()
def high_water_and_drain_alternate(ctx):
    srv = ctx.start("lifecycle", config="flow_control:\n  high_watermark: 64k\n"
                    "  low_watermark: 16k\n")
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    s.sendall(b"GET /stream?n=200&size=65536 HTTP/1.1\r\nHost: t\r\nx-test-id: hw1\r\n"
              b"Connection: close\r\n\r\n")
    check(wait_event(ctx, "hw1", "high_water", 5), "no high_water while the client pauses")
    time.sleep(0.5)
    total = 0
    while True:
        data = s.recv(1 << 20)
        if not data:
            break
        total += len(data)
    s.close()
    check(total > 200 * 65536, "response truncated: %d bytes" % total)
    ev = settle(ctx, "hw1")
    marks = [e.split()[0] for e in ev if e.startswith(("high_water", "drain"))]
    check(marks and marks[0] == "high_water", "first watermark event: %r" % marks[:3])
    check(all(a != b for a, b in zip(marks, marks[1:])),
          "high_water/drain do not alternate (hysteresis): %r" % marks[:20])
    check("drain" in marks, "no drain after the client read everything")
    check_eq(count_events(ev, "send_done"), 200, "send completions")
    check_terminal(ev, "complete")


@test()
def header_timeout_slowloris(ctx):
    srv = ctx.start("hello", config="timeouts:\n  header: 1s\n  idle: 10s\n  request: 10s\n")
    c = Conn(srv.port)
    c.send("GET /hel")
    secs, data = closed_after(c, 5 * SLOW)
    check(0.5 < secs < 3.5 * SLOW, "closed after %.1fs (header timeout 1s)" % secs)
    check(data == b"" or data.startswith(b"HTTP/1.1 408"), "unexpected bytes %r" % data[:60])
    still_serving(srv.port)


@test()
def header_timeout_trickle(ctx):
    # One byte every 200ms: a per-read timer would never fire; the header
    # timeout bounds the whole head.
    srv = ctx.start("hello", config="timeouts:\n  header: 1s\n  idle: 10s\n  request: 10s\n")
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    s.sendall(b"GET / HTTP/1.1\r\nHost: t\r\nX-Slow: ")
    t0 = time.monotonic()
    closed = None
    while time.monotonic() - t0 < 6 * SLOW:
        try:
            s.sendall(b"a")
        except OSError:
            closed = time.monotonic() - t0
            break
        r, _, _ = select.select([s], [], [], 0.2)
        if r:
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            if not data or data.startswith(b"HTTP/1.1 408"):
                closed = time.monotonic() - t0
                break
            raise TestFailure("unexpected response to an unfinished head: %r" % data[:60])
    s.close()
    check(closed is not None, "trickling client still connected after 6s (header timeout 1s)")
    check(closed < 3.5 * SLOW, "closed after %.1fs (header timeout 1s)" % closed)
    still_serving(srv.port)


@test()
def idle_timeout(ctx):
    srv = ctx.start("hello", config="timeouts:\n  idle: 2s\n  header: 10s\n  request: 10s\n")
    c = Conn(srv.port)
    secs, data = closed_after(c, 6 * SLOW)
    check(1.0 < secs < 4.5 * SLOW, "idle connection closed after %.1fs (idle 2s)" % secs)
    check(data == b"" or data.startswith(b"HTTP/1.1 408"), "unexpected bytes %r" % data[:60])
    still_serving(srv.port)


@test()
def keepalive_timeout(ctx):
    srv = ctx.start("hello", config="timeouts:\n  keepalive: 1s\n  idle: 10s\n  header: 10s\n")
    c = Conn(srv.port)
    c.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n")
    r = c.read_response()
    check_eq(r.status, 200, "status")
    secs, data = closed_after(c, 5 * SLOW)
    check_eq(data, b"", "bytes after the response")
    check(0.5 < secs < 3.5 * SLOW, "keep-alive connection closed after %.1fs (keepalive 1s)" % secs)


@test()
def error_before_start_500(ctx):
    srv = ctx.start("lifecycle")
    c = Conn(srv.port)
    c.send("GET /error-before HTTP/1.1\r\nHost: t\r\nx-test-id: eb1\r\n\r\n")
    r = c.read_response()
    check_eq(r.status, 500, "status")
    check_eq((r.header("connection") or "").lower(), "close", "connection header")
    c.expect_closed(3)
    c.close()
    check_terminal(settle(ctx, "eb1"), "disconnect", "server_error")
    still_serving(srv.port)


@test()
def finish_without_response_500(ctx):
    srv = ctx.start("lifecycle")
    c = Conn(srv.port)
    c.send("GET /finish-before HTTP/1.1\r\nHost: t\r\nx-test-id: fb1\r\n\r\n")
    r = c.read_response()
    check_eq(r.status, 500, "status (backstop)")
    check_eq((r.header("connection") or "").lower(), "close", "connection header")
    c.expect_closed(3)
    c.close()
    check_terminal(settle(ctx, "fb1"), "disconnect", "server_error")
    still_serving(srv.port)


@test()
def error_after_start_truncates(ctx):
    srv = ctx.start("lifecycle")
    c = Conn(srv.port)
    c.send("GET /error-after HTTP/1.1\r\nHost: t\r\nx-test-id: ea1\r\n\r\n")
    r = c.read_response(allow_truncated=True)
    check_eq(r.status, 200, "status")
    check(r.chunked, "response not chunked: %r" % r.headers)
    check(not r.complete, "chunked body was terminated properly; must be truncated: %r" % r)
    check_eq(r.body, b"partial", "body before the truncation")
    c.close()
    ev = settle(ctx, "ea1")
    check_terminal(ev, "disconnect")
    # A real client sees a broken transfer too.
    p = subprocess.run(["curl", "-sS", "--max-time", "10", "http://127.0.0.1:%d/error-after" % srv.port],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=20)
    check(p.returncode != 0, "curl accepted a truncated chunked body (exit 0, %r)" % p.stdout)
    still_serving(srv.port)


@test()
def send_after_disconnect(ctx):
    srv = ctx.start("lifecycle")
    c = Conn(srv.port)
    n = 300
    c.send("GET /stream?n=%d&size=65536&ignore_disconnect=1 HTTP/1.1\r\nHost: t\r\n"
           "x-test-id: sad1\r\n\r\n" % n)
    c.read_exact(100000)
    c.reset()
    # Sends go on after the client vanished: they must be harmless no-ops and
    # must not starve other clients.
    secs = still_serving(srv.port)
    check(secs < 1.0 * SLOW, "another client waited %.2fs while sends went to a dead peer" % secs)
    ev = settle(ctx, "sad1", timeout=15)
    check(not any(e.startswith("send_failed") for e in ev),
          "pagi_send returned -1 after the disconnect: %r"
          % [e for e in ev if e.startswith("send_failed")][:2])
    errors = count_events(ev, "send_error")
    check(count_events(ev, "send_done") == n or errors == 1,
          "sends after the disconnect did not all complete: %d of %d, %d errors"
          % (count_events(ev, "send_done"), n, errors))
    check_terminal(ev, "disconnect", ("client_closed", "write_error"))
    still_serving(srv.port)


@test()
def bad_header_rejected_by_send(ctx):
    srv = ctx.start("lifecycle")
    r = request(srv.port, "GET", "/bad-header", headers={"x-test-id": "bh1"})
    check_eq((r.status, r.body), (200, b"ok"), "response after the rejected start")
    check_eq(r.header("x-bad"), None, "x-bad header was sent")
    ev = settle(ctx, "bh1")
    check(any(e.startswith("send_rejected") for e in ev),
          "pagi_send accepted a header value with CR LF: %r" % ev)
    rej = next(e for e in ev if e.startswith("send_rejected"))
    check(len(rej) > len("send_rejected "), "pagi_scope_error is empty after the rejection")
    check_terminal(ev, "complete")


@test()
def backstop_line_names_the_refused_call(ctx):
    """An app that finishes without responding after a refused send: the
    500 backstop's log line carries the refusal (issue 12: it gave no cause)."""
    srv = ctx.start("lifecycle")
    r = request(srv.port, "GET", "/refused-then-finish", headers={"x-test-id": "rf1"})
    check_eq(r.status, 500, "status")
    ev = settle(ctx, "rf1")
    rej = next((e for e in ev if e.startswith("send_rejected ")), None)
    check(rej, "the send was not refused: %r" % ev)
    why = rej[len("send_rejected "):]
    check(wait_for(lambda: "its last refused call: %s); sent 500" % why in srv.stderr(), 5),
          "no cause in the backstop line:\n" + srv.stderr()[-1500:])


@test()
def many_abandoned_streams(ctx):
    # 20 clients drop streamed responses at once; all scopes settle.
    srv = ctx.start("lifecycle")
    conns = []
    for i in range(20):
        c = Conn(srv.port)
        c.send("GET /stream?n=1000&size=16384 HTTP/1.1\r\nHost: t\r\nx-test-id: ab%d\r\n\r\n" % i)
        conns.append(c)
    for c in conns:
        c.read_exact(1000)
    for i, c in enumerate(conns):
        c.reset() if i % 2 else c.close()
    for i in range(20):
        check_terminal(settle(ctx, "ab%d" % i), "disconnect",
                       ("client_closed", "write_error", "read_error"))
    still_serving(srv.port)


@test()
def lifespan_runs(ctx):
    srv = ctx.start("lifecycle")
    check(wait_event(ctx, "lifespan", "lifespan startup", 5),
          "lifespan.startup not delivered: %r" % app_events(ctx, "lifespan"))
    still_serving(srv.port)
    rc = srv.stop()
    check_eq(rc, 0, "exit status after SIGTERM")
    check(wait_for(lambda: "lifespan shutdown" in app_events(ctx, "lifespan"), 1),
          "lifespan.shutdown not delivered before exit: %r" % app_events(ctx, "lifespan"))


@test()
def disconnect_order_burst(ctx):
    # Head, part of the body and the FIN arrive together: the disconnect can
    # race with queued body deliveries. Whatever got dispatched must still see
    # on_disconnect before http.disconnect, and exactly one terminal callback.
    srv = ctx.start("lifecycle")
    ids = ["bo%d" % i for i in range(20)]
    for i, tid in enumerate(ids):
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        route = "/never" if i % 2 else "/body"
        s.sendall(("POST %s HTTP/1.1\r\nHost: t\r\nx-test-id: %s\r\nContent-Length: 100000\r\n\r\n"
                   % (route, tid)).encode() + b"x" * 3000)
        s.shutdown(socket.SHUT_WR)
        s.close()
    time.sleep(0.5)
    dispatched = [tid for tid in ids if app_events(ctx, tid)]
    for tid in dispatched:
        ev = settle(ctx, tid)
        check_terminal(ev, "disconnect", "client_closed")
        check_eq(count_events(ev, "recv http.disconnect"), 1, "%s: http.disconnect events" % tid)
        d = next(i for i, e in enumerate(ev) if e.startswith("on_disconnect"))
        check(d < ev.index("recv http.disconnect"),
              "%s: http.disconnect delivered before on_disconnect ran: %r" % (tid, ev))
        after = ev[ev.index("recv http.disconnect"):]
        check(not any(e.startswith("recv http.request") for e in after),
              "%s: body delivered after http.disconnect: %r" % (tid, ev))
    ctx.note("%d of %d requests reached the app" % (len(dispatched), len(ids)))
    still_serving(srv.port)


@test(timeout=40)
def response_timeout_http1(ctx):
    """timeouts.response: an app that has not started its response gets a
    504 sent on its behalf, its scope hears http.disconnect with
    x-response-timeout, the error log names the request and the app, and
    the connection goes on (keep-alive) when the request was read whole,
    closes when it was not."""
    from test_metrics import scrape
    sport = ctx.lib.free_port()
    srv = ctx.start("lifecycle", workers=1, config="timeouts:\n  response: 500ms\nstatus:\n"
                    "  listen: 127.0.0.1:%d\n" % sport)
    c = Conn(srv.port)
    t0 = time.monotonic()
    c.send("GET /never?q=1 HTTP/1.1\r\nHost: t\r\nx-test-id: rt1\r\n\r\n")
    r = c.read_response()
    elapsed = time.monotonic() - t0
    check_eq(r.status, 504, "status after timeouts.response")
    check((r.header("content-type") or "").startswith("text/plain"), "content type: %r" % r)
    check(0.4 < elapsed < 3 * SLOW, "504 after %.2fs (timeouts.response 500ms)" % elapsed)
    ev = settle(ctx, "rt1")
    check("recv http.disconnect" in ev, "the app was told: %r" % ev)
    check_terminal(ev, "disconnect", "x-response-timeout")
    # The request was read whole: the same connection serves the next one.
    c.send("GET /hello HTTP/1.1\r\nHost: t\r\nx-test-id: rt2\r\n\r\n")
    r = c.read_response()
    check_eq((r.status, r.body), (200, b"ok"), "keep-alive after the 504")
    c.close()
    lines = [ln for ln in srv.stderr().splitlines() if "timeouts.response" in ln]
    check_eq(len(lines), 1, "error log lines: %r" % lines)
    check("GET /never" in lines[0] and "lifecycle.so" in lines[0] and "504" in lines[0],
          "the line names method, path and app: %r" % lines[0])
    # A body still arriving: 504, then the connection closes.
    c = Conn(srv.port)
    c.send("POST /never HTTP/1.1\r\nHost: t\r\nx-test-id: rt3\r\nContent-Length: 100\r\n\r\n"
           + "x" * 10)
    r = c.read_response()
    check_eq(r.status, 504, "status with the body unread")
    check_eq(r.header("connection"), "close", "connection header with the body unread")
    c.expect_closed(3)
    check_terminal(settle(ctx, "rt3"), "disconnect", "x-response-timeout")
    check_eq(scrape(sport)[0].get("pagid_response_timeouts_total"), 2.0, "metric")
    # A response started in time is not cut: /hello answers at once, nothing more counted.
    check_eq(request(srv.port, "GET", "/hello").status, 200, "normal request")
    still_serving(srv.port)
