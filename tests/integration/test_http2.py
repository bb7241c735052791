"""HTTP/2 (issue 15): h2 by ALPN on TLS listeners and h2c with prior
knowledge, driven by independent clients: curl (--http2, --parallel,
--http2-prior-knowledge), h2load, and Python's h2 package writing frames by
hand for what curl never does (a reset mid-upload, a flood of resets,
oversized headers, a bad preface, a body nobody reads). The app is
apps/h2app.c (built once per session)."""

import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import time

import lib
from lib import (SLOW, TestPKI, check, check_eq, free_port, test, tls_listen,
                 wait_event, wait_for, app_events)
from test_metrics import scrape
from test_tls_config import run_pagid
from test_memory import sanitized

try:
    import h2.config
    import h2.connection
    import h2.events
    import h2.exceptions
except ImportError:  # Debian's package lives outside a pyenv/venv interpreter's path
    sys.path.append("/usr/lib/python3/dist-packages")
    try:
        import h2.config
        import h2.connection
        import h2.events
        import h2.exceptions
    except ImportError:
        h2 = None

HERE = os.path.dirname(os.path.abspath(__file__))


def h2app(ctx):
    """apps/h2app.c compiled once per session."""
    return lib.app_so(ctx, "h2app")


class H2Server:
    """pagid with a TLS listener (port, h2 by ALPN unless tls_http2 says
    otherwise), an h2c prior-knowledge listener (cport), a plain HTTP/1
    listener (hport) and the status listener (sport)."""

    def __init__(self, ctx, app=None, tls_http2=None, extra="", workers=1):
        self.pki = TestPKI(ctx)
        self.cert, self.key = self.pki.issue("server", sans=["DNS:localhost", "IP:127.0.0.1"])
        self.port, self.cport, self.hport, self.sport = (free_port(), free_port(), free_port(),
                                                         free_port())
        conf = "listen:\n" + tls_listen(self.port, self.cert, self.key)
        if tls_http2 is not None:
            conf += "    http2: %s\n" % tls_http2
        conf += "  - {address: 127.0.0.1:%d, http2: prior-knowledge}\n" % self.cport
        conf += "  - 127.0.0.1:%d\n" % self.hport
        conf += "status:\n  listen: 127.0.0.1:%d\n" % self.sport + extra
        self.srv = ctx.start(app or h2app(ctx), workers=workers, config=conf, listen=False,
                             port=self.port)
        ok = wait_for(lambda: self.metrics_quiet().get("pagid_workers_ready") == workers, 10)
        check(ok, "workers never ready")

    def metrics(self):
        return scrape(self.sport)[0]

    def metrics_quiet(self):
        try:
            return self.metrics()
        except OSError:
            return {}

    def curl(self, *args, timeout=60):
        return subprocess.run(["curl", "-sS", "--cacert", self.pki.ca_cert] + list(args),
                              capture_output=True, timeout=timeout * SLOW)

    def url(self, path):
        return "https://localhost:%d%s" % (self.port, path)

    def curl_ok(self, *args, timeout=60):
        r = self.curl(*args, timeout=timeout)
        check(r.returncode == 0, "curl %s: exit %d: %s" % (args, r.returncode,
                                                          r.stderr.decode(errors="replace")))
        return r.stdout

    def tls_socket(self, alpn=("h2",)):
        ctx = ssl.create_default_context(cafile=self.pki.ca_cert)
        ctx.set_alpn_protocols(list(alpn))
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=5 * SLOW)
        return ctx.wrap_socket(raw, server_hostname="localhost")


class H2Client:
    """A hand-driven HTTP/2 client (python3-h2) over a TLS or plain socket."""

    def __init__(self, sock, settings=None):
        if h2 is None:
            raise lib.Skip("python3-h2 is not installed")
        self.sock = sock
        cfg = h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
        self.c = h2.connection.H2Connection(config=cfg)
        self.c.initiate_connection()
        if settings:
            self.c.update_settings(settings)
        self.flush()
        self.events = []
        self.closed = False

    def flush(self):
        data = self.c.data_to_send()
        if data:
            self.sock.sendall(data)

    def request(self, path, method="GET", headers=(), end=True):
        sid = self.c.get_next_available_stream_id()
        hdrs = [(":method", method), (":path", path), (":scheme", "https"),
                (":authority", "localhost")] + list(headers)
        self.c.send_headers(sid, hdrs, end_stream=end)
        self.flush()
        return sid

    def pump(self, timeout=0.2):
        """Read what arrives within timeout; returns the new events."""
        self.sock.settimeout(timeout)
        new = []
        try:
            data = self.sock.recv(65536)
        except (socket.timeout, ssl.SSLWantReadError):
            return new
        except (ConnectionResetError, ssl.SSLError, OSError):
            self.closed = True
            return new
        if not data:
            self.closed = True
            return new
        try:
            new = self.c.receive_data(data)
        except h2.exceptions.ProtocolError:
            self.closed = True
        self.flush_quiet()
        self.events += new
        return new

    def flush_quiet(self):
        try:
            self.flush()
        except OSError:
            self.closed = True

    def wait(self, pred, timeout=5):
        end = time.time() + timeout * SLOW
        while time.time() < end:
            if pred():
                return True
            if self.closed:
                return pred()
            self.pump()
        return pred()

    def response(self, sid, timeout=5):
        """(status, body, trailers, ended) of stream sid."""
        def ended():
            return any(isinstance(e, (h2.events.StreamEnded, h2.events.StreamReset))
                       and e.stream_id == sid for e in self.events)
        self.wait(ended, timeout)
        status, body, trailers = None, b"", []
        for e in self.events:
            if getattr(e, "stream_id", None) != sid:
                continue
            if isinstance(e, h2.events.ResponseReceived):
                status = int(dict(e.headers)[":status"])
            elif isinstance(e, h2.events.DataReceived):
                body += e.data
                self.c.acknowledge_received_data(e.flow_controlled_length, sid)
            elif isinstance(e, h2.events.TrailersReceived):
                trailers = e.headers
        self.flush_quiet()
        return status, body, trailers, ended()

    def goaway(self):
        for e in self.events:
            if isinstance(e, h2.events.ConnectionTerminated):
                return e
        return None

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


# ---- curl ----


@test(timeout=90)
def http2_curl_tls(ctx):
    """curl --http2 over TLS: ALPN h2, keep-alive (two requests, one
    connection), an upload through flow control, trailers, the access
    log's HTTP/2.0 and the stream counter."""
    s = H2Server(ctx)
    out = s.curl_ok("--http2", "-w", " %{http_version} %{num_connects}", s.url("/a"), s.url("/b"))
    check_eq(out, b"ok /a 2 2 1ok /b 2 2 0", "two requests on one h2 connection")
    body = os.urandom(3 * 1024 * 1024)
    path = os.path.join(ctx.tmpdir, "up.bin")
    with open(path, "wb") as f:
        f.write(body)
    out = s.curl_ok("--http2", "--data-binary", "@" + path, s.url("/upload?id=up"))
    check_eq(out, str(len(body)).encode(), "upload length seen by the app")
    hdr = os.path.join(ctx.tmpdir, "trailers.txt")
    out = s.curl_ok("--http2", "-D", hdr, s.url("/trailers"))
    check_eq(out, b"hello", "body before the trailers")
    with open(hdr, "rb") as f:
        check(b"x-checksum: abc" in f.read().lower(), "trailer x-checksum came")
    m = s.metrics()
    check(m.get("pagid_http2_streams_total", 0) >= 4, "streams counted: %r" %
          m.get("pagid_http2_streams_total"))
    check(m.get("pagid_http2_connections_total", 0) >= 3, "connections counted")


@test(timeout=60)
def http2_h2c_prior_knowledge(ctx):
    """h2c with prior knowledge on a listener that allows it; HTTP/1.1 on the
    same listener still works; a listener without it answers HTTP/1 only."""
    s = H2Server(ctx)
    out = s.curl_ok("--http2-prior-knowledge", "-w", " %{http_version}",
                    "http://127.0.0.1:%d/x" % s.cport)
    check_eq(out, b"ok /x 2 2", "h2c")
    out = s.curl_ok("--http1.1", "-w", " %{http_version}", "http://127.0.0.1:%d/y" % s.cport)
    check_eq(out, b"ok /y 1.1 1.1", "HTTP/1.1 beside h2c")
    body = b"z" * 200000
    p = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "--data-binary", "@-",
                        "http://127.0.0.1:%d/upload?id=c" % s.cport], input=body,
                       capture_output=True, timeout=30 * SLOW)
    check_eq(p.stdout, b"200000", "h2c upload")
    r = s.curl("--http2-prior-knowledge", "http://127.0.0.1:%d/z" % s.hport)
    check(r.returncode != 0 or not r.stdout.startswith(b"ok"),
          "a listener without http2 must not speak h2c: %r" % r.stdout[:80])
    check(s.srv.alive(), "server alive")


@test(timeout=90)
def http2_parallel_streams(ctx):
    """curl --parallel: 100 concurrent streams over one connection, all 200."""
    s = H2Server(ctx)
    urls = [s.url("/p%d" % i) for i in range(100)]
    out = s.curl_ok("--http2", "--parallel", "--parallel-max", "100", "-w",
                    "\ncode=%{http_code} v=%{http_version}\n", *urls, timeout=60)
    lines = out.decode().split("\n")
    codes = [ln for ln in lines if ln.startswith("code=")]
    check_eq(len(codes), 100, "responses")
    check(all(c == "code=200 v=2" for c in codes), "all 200 over h2: %r" % codes[:10])
    bodies = sorted(re.findall(r"ok /p\d+ 2", out.decode()))
    check_eq(bodies, sorted("ok /p%d 2" % i for i in range(100)), "every stream its own answer")


@test(timeout=90)
def http2_h2load(ctx):
    """h2load -n 2000 -c 10 -m 10 over TLS and h2c: every request 2xx."""
    s = H2Server(ctx)
    for url in (s.url("/"), "http://127.0.0.1:%d/" % s.cport):
        p = subprocess.run(["h2load", "-n", "2000", "-c", "10", "-m", "10", url],
                           capture_output=True, timeout=60 * SLOW)
        text = p.stdout.decode(errors="replace")
        check("status codes: 2000 2xx" in text, "h2load %s: %s" % (url, text[-600:]))


@test(timeout=60)
def http2_alpn(ctx):
    """ALPN offers h2 by default; http2: false on the listener leaves http/1.1."""
    s = H2Server(ctx)
    t = s.tls_socket(alpn=("h2", "http/1.1"))
    check_eq(t.selected_alpn_protocol(), "h2", "ALPN by default")
    t.close()
    s2 = H2Server(ctx, tls_http2="false")
    t = s2.tls_socket(alpn=("h2", "http/1.1"))
    check_eq(t.selected_alpn_protocol(), "http/1.1", "ALPN with http2: false")
    t.close()
    out = s2.curl_ok("--http2", "-w", " %{http_version}", s2.url("/q"))
    check_eq(out, b"ok /q 1.1 1.1", "curl --http2 falls back to HTTP/1.1")


@test(timeout=30)
def http2_config_errors(ctx):
    """listen.http2: true without TLS, prior-knowledge with TLS, and a bad
    word are refused at FILE:LINE:COLUMN."""
    pki = TestPKI(ctx)
    cert, key = pki.issue("server")
    port = free_port()
    cases = [
        ("listen:\n  - {address: 127.0.0.1:%d, http2: true}\n" % port, ":2:", "needs TLS"),
        ("listen:\n  - {address: 127.0.0.1:%d, http2: maybe}\n" % port, ":2:",
         "must be true, false or prior-knowledge"),
        ("listen:\n" + tls_listen(port, cert, key) + "    http2: prior-knowledge\n", ":6:",
         "for cleartext listeners"),
    ]
    for text, pos, words in cases:
        path = lib.write_config(ctx, text, "bad.yaml")
        rc, out = run_pagid(ctx, "-t", "-c", path)
        check(rc != 0, "pagid -t accepted %r" % text)
        check(words in out and ("bad.yaml" + pos) in out, "message for %r: %s" % (text, out))


# ---- frames by hand ----


@test(timeout=60)
def http2_reset_mid_upload(ctx):
    """A client's RST_STREAM mid-upload: the app gets http.disconnect with
    client_closed, and another stream on the connection completes."""
    s = H2Server(ctx)
    c = H2Client(s.tls_socket())
    a = c.request("/upload?id=rst", method="POST", end=False)
    c.c.send_data(a, b"x" * 1000)
    c.flush()
    wait_event(ctx, "rst", "start")
    b = c.request("/other")
    c.c.reset_stream(a, error_code=8)  # CANCEL
    c.flush()
    wait_event(ctx, "rst", "disconnect")
    check_eq(app_events(ctx, "rst"), ["start", "disconnect client_closed"], "app events")
    status, body, _, ended = c.response(b)
    check_eq((status, body), (200, b"ok /other 2"), "the other stream")
    c.close()
    check(s.metrics().get("pagid_http2_resets_total", 0) >= 1, "reset counted")


@test(timeout=60)
def http2_field_names_lower_case(ctx):
    """Response field names go out in lower case whatever case the app wrote
    them in, common ones (given to nghttp2 as static names) or not, each
    with its own value (python3-h2 refuses an upper-case name)."""
    s = H2Server(ctx)
    c = H2Client(s.tls_socket())
    sid = c.request("/names")
    status, body, _, ended = c.response(sid)
    check_eq((status, body, ended), (200, b"names", True), "response")
    got = [f for e in c.events if isinstance(e, h2.events.ResponseReceived) for f in e.headers]
    for want in [("content-type", "text/plain"), ("etag", '"v1"'), ("x-custom-name", "a"),
                 ("cache-control", "no-store"), ("vary", "accept"),
                 ("last-modified", "Mon, 01 Jan 2024 00:00:00 GMT")]:
        check(want in got, "%r in %r" % (want, got))
    c.close()


@test(timeout=60)
def http2_flow_control_holds_client(ctx):
    """A body nobody reads holds the client back: the stream window is not
    given back (no WINDOW_UPDATE for it), so the client can send no more
    than the window; a slow reader gets its whole body as it reads."""
    s = H2Server(ctx)
    c = H2Client(s.tls_socket())
    a = c.request("/hold?id=hold", method="POST", end=False)
    wait_event(ctx, "hold", "start")
    sent = 0
    chunk = b"h" * 16384
    for _ in range(200):
        room = min(c.c.local_flow_control_window(a), c.c.max_outbound_frame_size)
        if room <= 0:
            c.pump(0.3)
            if c.c.local_flow_control_window(a) <= 0:
                break
            continue
        c.c.send_data(a, chunk[:room])
        c.flush()
        sent += room
    c.pump(1.0 * SLOW)
    check(c.c.local_flow_control_window(a) <= 0, "window given back for an unread body")
    check(sent <= 65535 + 16384, "client sent %d bytes beyond the window" % sent)
    # A slow reader (20 ms per event) gets 1 MiB, the windows reopening as it reads.
    total = 1 << 20
    b = c.request("/slow?id=slow&ms=20", method="POST", end=False)
    left = total
    end = time.time() + 30 * SLOW
    while left > 0 and time.time() < end:
        room = min(c.c.local_flow_control_window(b), c.c.max_outbound_frame_size, left)
        if room <= 0:
            c.pump(0.1)
            continue
        c.c.send_data(b, b"s" * room, end_stream=(room == left))
        c.flush()
        left -= room
    check_eq(left, 0, "bytes the client could not send")
    status, body, _, _ = c.response(b, timeout=30)
    check_eq((status, body), (200, str(total).encode()), "slow reader's answer")
    c.close()
    wait_event(ctx, "hold", "disconnect")


@test(timeout=60)
def http2_rapid_reset(ctx):
    """CVE-2023-44487: streams opened and reset at once, faster than they
    are served, end the connection with GOAWAY ENHANCE_YOUR_CALM."""
    s = H2Server(ctx)
    c = H2Client(s.tls_socket())
    hdrs = [(":method", "GET"), (":path", "/hold?id=rr"), (":scheme", "https"),
            (":authority", "localhost")]
    # Batches of 100 open+reset pairs in one write each: the rate is the
    # client's to set, whatever the machine's load does to Python.
    for _ in range(30):
        if c.closed or c.goaway() is not None:
            break
        try:
            for _ in range(100):
                sid = c.c.get_next_available_stream_id()
                c.c.send_headers(sid, hdrs, end_stream=False)
                c.c.reset_stream(sid, error_code=8)
            c.flush()
        except (OSError, h2.exceptions.ProtocolError):
            break
        c.pump(0.01)  # see a GOAWAY as soon as it comes
    c.wait(lambda: c.goaway() is not None, 5)
    g = c.goaway()
    check(g is not None, "no GOAWAY after a rapid reset flood")
    check_eq(int(g.error_code), 11, "GOAWAY code (ENHANCE_YOUR_CALM)")
    check(s.metrics().get("pagid_http2_calm_total", 0) >= 1, "calm counted")
    c.close()
    out = s.curl_ok("--http2", s.url("/after"))
    check_eq(out, b"ok /after 2", "served after the flood")


@test(timeout=60)
def http2_oversized_headers(ctx):
    """A header list over limits.max_header_size gets 431 on its stream
    (or the stream reset), never a crash; the connection goes on."""
    s = H2Server(ctx, extra="limits:\n  max_header_size: 8k\n")
    c = H2Client(s.tls_socket())
    big = c.request("/big", headers=[("x-big", "v" * 16000)])
    status, _, _, ended = c.response(big)
    check(status == 431 or (ended and status is None), "oversized headers: status %r" % status)
    ok = c.request("/small")
    status, body, _, _ = c.response(ok)
    check_eq((status, body), (200, b"ok /small 2"), "the next stream")
    c.close()
    check(s.srv.alive(), "alive")


@test(timeout=60)
def http2_bad_preface(ctx):
    """Garbage instead of the client preface after ALPN h2: our SETTINGS
    then GOAWAY PROTOCOL_ERROR, and the close, never a crash (a silent
    close fails); garbage on the h2c listener is HTTP/1's 400."""
    s = H2Server(ctx)
    t = s.tls_socket()
    t.sendall(b"GARBAGE GARBAGE GARBAGE GARBAGE\r\n\r\n")
    frames = read_frames(t)
    t.close()
    goaways = [f for f in frames if f[0] == 7 and f[2] == 0 and len(f[3]) >= 8]
    check(goaways, "no GOAWAY after a bad preface: frames %r" % [f[:3] for f in frames])
    check_eq(int.from_bytes(goaways[0][3][4:8], "big"), 1, "GOAWAY code (PROTOCOL_ERROR)")
    raw = socket.create_connection(("127.0.0.1", s.cport), timeout=5)
    raw.sendall(b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n")
    got = raw.recv(4096)
    raw.close()
    check(got.startswith(b"HTTP/1.1 400") or got.startswith(b"HTTP/1.1 505"),
          "h2c listener, bad preface: HTTP/1's refusal, not %r" % got[:60])
    check(s.srv.alive(), "alive")
    out = s.curl_ok("--http2", s.url("/fine"))
    check_eq(out, b"ok /fine 2", "served after")


@test(timeout=60)
def http2_drain_goaway(ctx):
    """SIGTERM: the client (nghttp) gets GOAWAY, its in-flight stream still
    finishes with the whole answer."""
    s = H2Server(ctx)
    body = os.path.join(ctx.tmpdir, "body.bin")
    with open(body, "wb") as f:
        f.write(b"d" * 200000)
    p = subprocess.Popen(["nghttp", "-v", "-d", body,
                          "http://127.0.0.1:%d/slow?id=dr&ms=100" % s.cport],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_event(ctx, "dr", "start")
        s.srv.signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=30 * SLOW)
    finally:
        if p.poll() is None:
            p.kill()
    text = out.decode(errors="replace")
    check("recv GOAWAY" in text, "no GOAWAY: %s" % text[-1500:])
    check(":status: 200" in text, "in-flight stream did not finish: %s" % text[-1500:])
    check_eq(p.returncode, 0, "nghttp exit")
    check_eq(app_events(ctx, "dr"), ["start", "done 200000"], "app events")
    check(s.srv.wait_exit(15), "server exited after the drain")


@test(timeout=60)
def http2_static_and_access_log(ctx):
    """Static files over h2 (whole, a range, HEAD), and the access log's
    request line says HTTP/2.0."""
    www = os.path.join(ctx.tmpdir, "www")
    os.makedirs(www)
    data = os.urandom(300000)
    with open(os.path.join(www, "f.bin"), "wb") as f:
        f.write(data)
    log = os.path.join(ctx.tmpdir, "access.log")
    s = H2Server(ctx, app="static:" + www, extra="access_log:\n  path: %s\n" % log)
    out = s.curl_ok("--http2", s.url("/f.bin"))
    check(out == data, "file over h2: %d bytes, want %d" % (len(out), len(data)))
    out = s.curl_ok("--http2", "-r", "1000-1999", s.url("/f.bin"))
    check(out == data[1000:2000], "range over h2")
    out = s.curl_ok("--http2", "-I", "-w", "%{http_version}", s.url("/f.bin"))
    check(out.startswith(b"HTTP/2 200") and b"content-length: 300000" in out.lower(),
          "HEAD over h2: %r" % out[:200])
    s.srv.stop()

    def logged():
        try:
            with open(log) as f:
                return f.read()
        except OSError:
            return ""
    check(wait_for(lambda: logged().count("HTTP/2.0") >= 3, 5), "access log: %r" % logged())
    check('"GET /f.bin HTTP/2.0" 200' in logged() and '"GET /f.bin HTTP/2.0" 206' in logged(),
          "access log lines: %r" % logged())


@test(timeout=60)
def http2_access_log_response_headers(ctx):
    """%{name}o shows the response's header values for each h2 stream (they
    are kept with the stream's scope, not the connection), an SSE stream's
    too; two requests on one connection each log their own."""
    log = os.path.join(ctx.tmpdir, "access.log")
    s = H2Server(ctx, app="echo", extra="access_log:\n  path: %s\n  format: '%%U %%H %%s "
                                        "%%{content-type}o'\n" % log)
    s.curl_ok("--http2", s.url("/one"), "--next", "--http2", "--cacert", s.pki.ca_cert, "-H",
              "Accept: text/event-stream", s.url("/two?count=1"))
    s.srv.stop()

    def lines():
        try:
            with open(log) as f:
                return sorted(ln for ln in f.read().splitlines() if "HTTP/2.0" in ln)
        except OSError:
            return []
    check(wait_for(lambda: len(lines()) >= 2, 5), "access log: %r" % lines())
    check_eq(lines(), ["/one HTTP/2.0 200 application/octet-stream",
                      "/two HTTP/2.0 200 text/event-stream"],
             "access log lines")


@test(timeout=60)
def http2_sse_on_streams(ctx):
    """Accept: text/event-stream over HTTP/2 is an sse scope on its stream
    (the echo app's ticks, a decline); timeouts.sse_idle resets only that
    stream, the connection's others go on."""
    s = H2Server(ctx, app="echo", extra="timeouts:\n  sse_idle: 1\n")
    out = s.curl_ok("--http2", "-H", "Accept: text/event-stream", "-w", "%{http_version}",
                    s.url("/?count=3&interval=50"))
    check_eq(out, b"event: tick\nid: 1\ndata: 1\n\nevent: tick\nid: 2\ndata: 2\n\n"
                  b"event: tick\nid: 3\ndata: 3\n\n2", "event stream over h2")
    r = s.curl("--http2", "-H", "Accept: text/event-stream", "-w", " %{http_code}",
               s.url("/?status=404"))
    check(r.stdout.endswith(b" 404"), "declined over h2: %r" % r.stdout)
    c = H2Client(s.tls_socket())
    a = c.request("/?count=2&interval=5000", headers=[("accept", "text/event-stream")])
    c.wait(lambda: any(isinstance(e, h2.events.ResponseReceived) for e in c.events), 5)
    t0 = time.time()
    reset = c.wait(lambda: any(isinstance(e, h2.events.StreamReset) and e.stream_id == a
                               for e in c.events), 10)
    check(reset, "the idle sse stream was not reset")
    check(time.time() - t0 < 4.5 * SLOW, "reset came after %.1fs, sse_idle is 1s" % (time.time() - t0))
    b = c.request("/after", method="POST")
    status, _, _, _ = c.response(b)
    check_eq(status, 200, "the connection goes on after the stream's reset")
    c.close()


@test(timeout=60)
def http2_connection_cut_ends_every_stream_once(ctx):
    """A client that drops the connection with 20 streams in flight: every
    stream's app hears client_closed exactly once, every scope is
    released, and the worker serves on."""
    s = H2Server(ctx)
    c = H2Client(s.tls_socket())
    for i in range(20):
        sid = c.request("/hold?id=cut%d" % i, method="POST", end=False)
        c.c.send_data(sid, b"x" * 100)
    c.flush()
    check(wait_for(lambda: all(app_events(ctx, "cut%d" % i) for i in range(20)), 10 * SLOW),
          "not every stream started")
    c.sock.close()
    for i in range(20):
        wait_event(ctx, "cut%d" % i, "disconnect")
    for i in range(20):
        check_eq(app_events(ctx, "cut%d" % i), ["start", "disconnect client_closed"],
                 "stream %d's events" % i)
    # The scrape's own scope is the one left.
    check(wait_for(lambda: s.metrics().get('pagid_open_scopes{type="http"}') == 1, 5),
          "scopes left open: %r" % s.metrics().get('pagid_open_scopes{type="http"}'))
    out = s.curl_ok("--http2", s.url("/again"))
    check_eq(out, b"ok /again 2", "served after")


@test(timeout=60)
def http2_request_timeout_resets_only_that_stream(ctx):
    """timeouts.request with a body that stops coming: that stream's app
    hears client_timeout and the stream is reset; the connection and its
    other streams go on."""
    s = H2Server(ctx, extra="timeouts:\n  request: 1\n")
    c = H2Client(s.tls_socket())
    a = c.request("/upload?id=slowbody", method="POST", end=False)
    c.c.send_data(a, b"x" * 100)
    c.flush()
    wait_event(ctx, "slowbody", "disconnect", timeout=10)
    check_eq(app_events(ctx, "slowbody"), ["start", "disconnect client_timeout"], "app events")
    reset = c.wait(lambda: any(isinstance(e, h2.events.StreamReset) and e.stream_id == a
                               for e in c.events), 5)
    check(reset, "the stream was not reset")
    b = c.request("/still")
    status, body, _, _ = c.response(b)
    check_eq((status, body), (200, b"ok /still 2"), "the connection goes on")
    c.close()


@test(timeout=60)
def http2_perl_host(ctx):
    """A Perl PAGI app works unchanged over h2: its scope says http_version
    2 and https, :authority is its host header, an upload arrives whole."""
    from test_perl import app as perl_app
    s = H2Server(ctx, app=perl_app(ctx, "body"))
    p = subprocess.run(["curl", "-sS", "--cacert", s.pki.ca_cert, "--http2", "-H", "X-Test: yes",
                        "--data-binary", "@-", s.url("/a%20b?q=1")], input=b"p" * 100000,
                       capture_output=True, timeout=30 * SLOW)
    out = p.stdout.decode(errors="replace")
    for want in ("method=POST", "raw_path=/a%20b", "query=q=1", "http_version=2",
                 "scheme=https", "x_test=yes", "length=100000"):
        check(want in out.split("\n"), "%s missing from the Perl app's answer: %r" % (want, out))
    p = subprocess.run(["h2load", "-n", "500", "-c", "5", "-m", "10", s.url("/")],
                       capture_output=True, timeout=60 * SLOW)
    check("status codes: 500 2xx" in p.stdout.decode(errors="replace"),
          "h2load on the Perl app: %s" % p.stdout.decode(errors="replace")[-400:])


def worker_rss_kib(srv):
    pids = srv.workers()
    with open("/proc/%d/status" % pids[0]) as f:
        for ln in f:
            if ln.startswith("VmRSS:"):
                return int(ln.split()[1])
    return 0


@test(timeout=90)
def http2_control_frame_floods(ctx):
    """PINGs sent by the hundred thousand by a client that never reads the
    acks, and a SETTINGS frame with 100 entries: each connection ends
    (GOAWAY or close), the worker's memory stays bounded, it serves on."""
    s = H2Server(ctx)
    rss0 = worker_rss_kib(s.srv)
    t = s.tls_socket()
    t.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    c = H2Client(t)
    ping = b"\x00\x00\x08\x06\x00\x00\x00\x00\x00" + b"12345678"
    stopped = False
    t.settimeout(3 * SLOW)
    try:
        for _ in range(40000):  # 68 MB of PINGs: far more than the socket buffers hold
            t.sendall(ping * 100)
    except (OSError, ssl.SSLError):
        stopped = True  # reset, or a write that no longer moves: the server stopped reading
    check(stopped, "the server read 4 million PINGs from a client that never reads the acks")
    grow = worker_rss_kib(s.srv) - rss0
    if sanitized(ctx):
        ctx.note("PING flood: RSS grew %d KiB, not judged under ASan (its quarantine)" % grow)
    else:
        check(grow < 32 * 1024, "worker grew by %d KiB under a PING flood" % grow)
    # Usually nghttp2's limit of 1000 unread acks ends the connection (and
    # counts it); on a loaded machine the client's socket may fill before
    # that many acks wait: then the server simply stops reading, as above.
    if not wait_for(lambda: s.metrics().get("pagid_http2_calm_total", 0) >= 1, 5):
        ctx.note("PING flood: the sockets filled before nghttp2's ack limit")
    c.close()
    t2 = s.tls_socket()
    c2 = H2Client(t2)
    frame = b"".join(b"\x00\x03" + (1000 + i).to_bytes(4, "big") for i in range(100))
    t2.sendall(len(frame).to_bytes(3, "big") + b"\x04\x00\x00\x00\x00\x00" + frame)
    c2.wait(lambda: c2.goaway() is not None, 5)
    check(c2.goaway() is not None or c2.closed, "SETTINGS with 100 entries: no GOAWAY, no close")
    c2.close()
    out = s.curl_ok("--http2", s.url("/after"))
    check_eq(out, b"ok /after 2", "served after the floods")


def h2_frame(typ, flags, sid, payload):
    return len(payload).to_bytes(3, "big") + bytes([typ, flags]) + sid.to_bytes(4, "big") + payload


def read_frames(sock, timeout=5):
    """(type, flags, stream, payload) of every frame until EOF or timeout."""
    sock.settimeout(timeout * SLOW)
    data = b""
    try:
        while True:
            d = sock.recv(65536)
            if not d:
                break
            data += d
    except (OSError, ssl.SSLError):
        pass
    frames, i = [], 0
    while i + 9 <= len(data):
        n = int.from_bytes(data[i:i + 3], "big")
        frames.append((data[i + 3], data[i + 4], int.from_bytes(data[i + 5:i + 9], "big") & 0x7fffffff,
                       data[i + 9:i + 9 + n]))
        i += 9 + n
    return frames


@test(timeout=90)
def http2_continuation_flood_and_hpack_bomb(ctx):
    """A header block that never ends (CONTINUATION after CONTINUATION) ends
    the connection with GOAWAY ENHANCE_YOUR_CALM, counted; an HPACK bomb (one 4000-byte dynamic table
    entry referenced thousands of times: megabytes of decoded headers from
    a few KB) is refused on its stream (431 or a reset), never decoded into
    memory; the worker stays small and serves on."""
    s = H2Server(ctx)
    rss0 = worker_rss_kib(s.srv)
    preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + h2_frame(4, 0, 0, b"")
    head = bytes([0x82, 0x87, 0x84, 0x41, 0x09]) + b"localhost"  # GET https / localhost
    # CONTINUATION flood
    t = s.tls_socket()
    t.sendall(preface + h2_frame(1, 0x1, 1, head))  # END_STREAM, no END_HEADERS
    field = b"\x00\x03x-a\x64" + b"a" * 100  # literal, not indexed: x-a: a*100
    t.settimeout(5 * SLOW)
    try:
        for _ in range(2000):
            t.sendall(h2_frame(9, 0, 1, field * 100))
    except (OSError, ssl.SSLError):
        pass
    frames = read_frames(t)
    t.close()
    goaways = [f for f in frames if f[0] == 7]
    check(goaways, "CONTINUATION flood: no GOAWAY: %r" % [f[0] for f in frames][:20])
    check_eq(int.from_bytes(goaways[0][3][4:8], "big"), 11,
             "CONTINUATION flood: GOAWAY code (ENHANCE_YOUR_CALM)")
    check(wait_for(lambda: s.metrics().get("pagid_http2_calm_total", 0) >= 1, 5),
          "CONTINUATION flood not counted in pagid_http2_calm_total")
    # HPACK bomb: insert x-b: 4000 bytes (incremental indexing), then refer to it (index 62).
    t = s.tls_socket()
    insert = b"\x40\x03x-b\x7f\xa1\x1e" + b"b" * 4000  # 4000 = 127 + 3873 (0xa1 0x1e)
    block = head + insert + b"\xbe" * 12000  # 0xbe: indexed field 62
    t.sendall(preface + h2_frame(1, 0x5, 1, block))
    frames = read_frames(t, timeout=3)
    t.close()
    answered = [f for f in frames if f[2] == 1 and f[0] in (1, 3)]
    check(answered, "HPACK bomb: stream 1 got neither an answer nor a reset: %r"
          % [(f[0], f[2]) for f in frames][:20])
    check(not any(f[0] == 1 and f[2] == 1 and b"\x88" in f[3][:1] for f in answered),
          "HPACK bomb answered 200")
    grow = worker_rss_kib(s.srv) - rss0
    if not sanitized(ctx):
        check(grow < 16 * 1024, "worker grew by %d KiB" % grow)
    out = s.curl_ok("--http2", s.url("/after"))
    check_eq(out, b"ok /after 2", "served after")


@test(timeout=60)
def http2_response_timeout(ctx):
    """timeouts.response over HTTP/2: a stream whose app never answers gets a
    504 (text/plain) and its scope http.disconnect (x-response-timeout);
    the connection and its other streams go on."""
    s = H2Server(ctx, app=ctx.lifecycle_so, extra="timeouts:\n  response: 500ms\n")
    cl = H2Client(socket.create_connection(("127.0.0.1", s.cport), timeout=5 * SLOW))
    t0 = time.monotonic()
    sid = cl.request("/never", headers=[("x-test-id", "h2rt")])
    status, body, _, ended = cl.response(sid, timeout=5)
    elapsed = time.monotonic() - t0
    check_eq((status, ended), (504, True), "status of the stream nobody answered")
    check(0.4 < elapsed < 3 * SLOW, "504 after %.2fs (timeouts.response 500ms)" % elapsed)
    # The session lets go of a scope it ended once the app finished, at its
    # next activity: the release is looked for after the next stream.
    check(wait_event(ctx, "h2rt", "finish", 5), "the app never finished: %r"
          % app_events(ctx, "h2rt"))
    ev = app_events(ctx, "h2rt")
    check("recv http.disconnect" in ev, "the app was told: %r" % ev)
    check("on_disconnect x-response-timeout" in ev, "disconnect reason: %r" % ev)
    sid2 = cl.request("/hello", headers=[("x-test-id", "h2ok")])
    status, body, _, _ = cl.response(sid2)
    check_eq((status, body), (200, b"ok"), "the connection's next stream")
    check(wait_event(ctx, "h2rt", "release", 5), "no release: %r" % app_events(ctx, "h2rt"))
    check_eq(sum(e == "release" for e in app_events(ctx, "h2rt")), 1, "one release")
    check(not cl.closed, "connection closed")
    cl.close()
    check_eq(s.metrics().get("pagid_response_timeouts_total"), 1.0, "metric")
    check(any("timeouts.response" in ln and "GET /never" in ln for ln in s.srv.stderr().splitlines()),
          "no error log line: %r" % s.srv.stderr()[-2000:])
