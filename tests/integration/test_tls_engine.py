"""The TLS connection engine (issue 13): HTTPS keep-alive, HTTP/1.0 and
pipelining, big bodies both ways (the upload through flow control, the
download through the sendfile path), wss and SSE over TLS, the handshake
under timeouts.header with its counters, plain HTTP on a TLS port, a client
that stops reading, 200 concurrent connections, the access log's TLS atoms,
the drain, the linger after an error response, and memory per idle TLS
connection. Certificates come from a throwaway CA (lib.TestPKI)."""

import asyncio
import hashlib
import os
import re
import select
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time

from lib import (SLOW, Conn, TestPKI, app_events, check, check_eq, free_port, test, tls_listen,
                 wait_event, wait_for)
from test_memory import per_conn, raise_nofile, read_response
from test_metrics import scrape

try:
    import websockets  # noqa: F401
except ImportError:  # Debian's package lives outside a pyenv/venv interpreter's path
    sys.path.append("/usr/lib/python3/dist-packages")
    try:
        import websockets  # noqa: F401
    except ImportError:
        websockets = None


class TLSServer:
    """pagid with one TLS listener (port), a cleartext one (cport) and the
    status listener (sport), app and extra YAML as given."""

    def __init__(self, ctx, app="echo", workers=1, extra="", cleartext=True):
        self.pki = TestPKI(ctx)
        self.cert, self.key = self.pki.issue("server")
        self.client = self.pki.client_context()
        self.port, self.cport, self.sport = free_port(), free_port(), free_port()
        conf = "listen:\n" + tls_listen(self.port, self.cert, self.key)
        if cleartext:
            conf += "  - 127.0.0.1:%d\n" % self.cport
        conf += "status:\n  listen: 127.0.0.1:%d\n" % self.sport + extra
        self.srv = ctx.start(app, workers=workers, config=conf, listen=False, port=self.port)
        ok = wait_for(lambda: self.metrics_quiet().get("pagid_workers_ready") == workers, 10)
        check(ok, "workers never ready")

    def metrics(self):
        return scrape(self.sport)[0]

    def metrics_quiet(self):
        try:
            return self.metrics()
        except OSError:
            return {}

    def handshakes(self, result):
        return self.metrics().get('pagid_tls_handshakes_total{result="%s"}' % result)

    def conn(self, **kw):
        return Conn(self.port, tls=self.client, **kw)

    def url(self, path):
        return "https://localhost:%d%s" % (self.port, path)

    def curl(self, *args, timeout=60):
        return subprocess.run(["curl", "-sS", "--cacert", self.pki.ca_cert] + list(args),
                              capture_output=True, timeout=timeout * SLOW)


def worker_cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def closed_within(sock, seconds):
    """Seconds until the peer closed sock (EOF or reset), None if it did not."""
    sock.settimeout(0.2)
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        try:
            d = sock.recv(65536)
        except socket.timeout:
            continue
        except (ConnectionResetError, ssl.SSLError):
            return time.monotonic() - t0
        if not d:
            return time.monotonic() - t0
    return None


def client_hello():
    """A real ClientHello's bytes, from an in-memory TLS client."""
    c = ssl.create_default_context()
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = c.wrap_bio(inc, out, server_hostname="localhost")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


def sha_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def random_file(path, size):
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(left, 1 << 20)
            f.write(os.urandom(n))
            left -= n
    return path


# ---------------------------------------------------------------------------
# HTTP/1.x over TLS
# ---------------------------------------------------------------------------


@test(timeout=60)
def curl_keepalive_and_http10(ctx):
    """curl --http1.1 fetches three URLs over one TLS connection (it says
    "Re-using"), then HTTP/1.0 with a body; TLS 1.3 and ALPN http/1.1 are
    negotiated (without --http1.1 curl offers h2 first, and gets it:
    test_http2.py)."""
    t = TLSServer(ctx)
    r = t.curl("-v", "--http1.1", t.url("/a"), t.url("/b?x=1"), t.url("/c"))
    err = r.stderr.decode("utf-8", "replace")
    check(r.returncode == 0, "curl failed: %s" % err[-500:])
    check("Re-using existing connection" in err, "curl opened new connections: %s" % err[-800:])
    for path in ("/a", "/b", "/c"):
        check("< x-echo-path: %s" % path in err, "no response for %s: %s" % (path, err[-800:]))
    check("TLSv1.3" in err, "not TLS 1.3: %s" % err[:800])
    check("ALPN: server accepted http/1.1" in err or "ALPN, server accepted to use http/1.1" in err,
          "ALPN http/1.1 not accepted: %s" % err[:1500])
    check_eq(t.handshakes("ok") >= 1, True, "handshakes counted ok")
    r = t.curl("-v", "--http1.0", "--data-binary", "ten bytes!", t.url("/old"))
    err = r.stderr.decode("utf-8", "replace")
    check(r.returncode == 0, "curl --http1.0 failed: %s" % err[-500:])
    check_eq(r.stdout, b"ten bytes!", "HTTP/1.0 echo body")
    check("> POST /old HTTP/1.0" in err and "< x-echo-path: /old" in err,
          "HTTP/1.0 exchange: %s" % err[-800:])


@test(timeout=30)
def pipelining(ctx):
    """Three requests in one TLS write (one record): three responses, in order."""
    t = TLSServer(ctx)
    c = t.conn()
    c.send(b"GET /p1 HTTP/1.1\r\nHost: t\r\n\r\n"
           b"POST /p2 HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello"
           b"GET /p3 HTTP/1.1\r\nHost: t\r\n\r\n")
    for path, body in (("/p1", b""), ("/p2", b"hello"), ("/p3", b"")):
        r = c.read_response()
        check_eq(r.status, 200, "status of %s" % path)
        check_eq(r.header("x-echo-path"), path, "response order")
        check_eq(r.body, body, "body of %s" % path)
    c.send(b"GET /p4 HTTP/1.1\r\nHost: t\r\n\r\n")
    check_eq(c.read_response().header("x-echo-path"), "/p4", "keep-alive after the pipeline")
    c.close()


@test(timeout=120)
def large_upload_and_download(ctx):
    """8 MiB up through the echo app (flow control pauses and resumes the TLS
    reads) and 20 MiB down from the static app (the file path: SSL_sendfile
    with kernel TLS, else read and encrypted), each checked by sha256; a
    range of the file too."""
    docroot = os.path.join(ctx.tmpdir, "www")
    os.makedirs(docroot)
    big = random_file(os.path.join(docroot, "big.bin"), 20 << 20)
    up = random_file(os.path.join(ctx.tmpdir, "up.bin"), 8 << 20)
    extra = "limits:\n  max_body_size: 16m\nmounts:\n  - path: /files\n    app: static:%s\n" % docroot
    t = TLSServer(ctx, extra=extra)
    out = os.path.join(ctx.tmpdir, "echoed.bin")
    r = t.curl("--data-binary", "@" + up, "-H", "Content-Type: application/octet-stream",
               "-o", out, t.url("/upload"))
    check(r.returncode == 0, "upload failed: %s" % r.stderr[-300:])
    check_eq(sha_file(out), sha_file(up), "sha256 of the 8 MiB echo")
    got = os.path.join(ctx.tmpdir, "got.bin")
    r = t.curl("-o", got, t.url("/files/big.bin"))
    check(r.returncode == 0, "download failed: %s" % r.stderr[-300:])
    check_eq(os.path.getsize(got), 20 << 20, "downloaded size")
    check_eq(sha_file(got), sha_file(big), "sha256 of the 20 MiB download")
    c = t.conn()
    c.send(b"GET /files/big.bin HTTP/1.1\r\nHost: t\r\nRange: bytes=1000000-1099999\r\n\r\n")
    r = c.read_response()
    check_eq(r.status, 206, "range status")
    with open(big, "rb") as f:
        f.seek(1000000)
        check(r.body == f.read(100000), "range bytes differ")
    c.close()


@test(timeout=60)
def wss_echo(ctx):
    """The websockets client over wss: a text message and a 1 MiB binary one."""
    if websockets is None:
        from lib import Skip
        raise Skip("python3-websockets is not installed")
    t = TLSServer(ctx, extra="limits:\n  max_ws_message_size: 4m\n")

    async def run():
        async with websockets.connect("wss://localhost:%d/ws" % t.port, ssl=t.client,
                                      max_size=None) as ws:
            await ws.send("hello over wss")
            check_eq(await ws.recv(), "hello over wss", "text echo")
            blob = os.urandom(1 << 20)
            await ws.send(blob)
            back = await ws.recv()
            check(back == blob, "binary echo differs (%d bytes back)" % len(back))
    asyncio.run(asyncio.wait_for(run(), 30 * SLOW))


@test(timeout=30)
def sse_over_https(ctx):
    """The echo app's event stream over TLS: every event, then the end."""
    t = TLSServer(ctx)
    c = t.conn()
    c.send(b"GET /events?count=5 HTTP/1.1\r\nHost: t\r\nAccept: text/event-stream\r\n\r\n")
    r = c.read_response()
    check_eq(r.status, 200, "status")
    check(r.header("content-type", "").startswith("text/event-stream"), "content type")
    ids = [int(i) for i in re.findall(rb"^id: (\d+)$", r.body, re.M)]
    check_eq(len(ids), 5, "events (%r)" % r.body[:300])
    check_eq(ids, list(range(ids[0], ids[0] + 5)), "event ids in order")
    check_eq(r.body.count(b"event: tick"), 5, "tick events")
    c.close()


# ---------------------------------------------------------------------------
# The handshake: bounded, counted, never spinning
# ---------------------------------------------------------------------------


@test(timeout=40)
def stalled_handshake_cut_at_header_timeout(ctx):
    """A TCP connection that sends nothing and one that sends half a
    ClientHello are both cut at timeouts.header (1 s), counted as
    result="timeout"; the gauge of open TLS connections comes back to 0."""
    t = TLSServer(ctx, extra="timeouts:\n  header: 1s\n")
    before = t.handshakes("timeout")
    hello = client_hello()
    check(len(hello) > 100, "no ClientHello made")
    silent = socket.create_connection(("127.0.0.1", t.port))
    half = socket.create_connection(("127.0.0.1", t.port))
    half.sendall(hello[:len(hello) // 2])
    t0 = time.monotonic()
    wait_for(lambda: t.metrics().get("pagid_open_tls_connections") == 2, 3)
    for name, s in (("silent", silent), ("half a ClientHello", half)):
        took = closed_within(s, 10 * SLOW - (time.monotonic() - t0))
        check(took is not None, "%s connection still open after 10 s" % name)
        s.close()
    elapsed = time.monotonic() - t0
    check(elapsed >= 0.8, "cut after %.2f s, before the 1 s header timeout" % elapsed)
    check(wait_for(lambda: t.handshakes("timeout") - before == 2, 3),
          "timeout counter moved by %s, not 2" % (t.handshakes("timeout") - before))
    check(wait_for(lambda: t.metrics().get("pagid_open_tls_connections") == 0, 3),
          "open TLS connections gauge did not return to 0")
    check("handshake" not in t.srv.stderr(), "handshake failures logged above debug")


@test(timeout=30)
def plain_http_on_tls_port(ctx):
    """Cleartext HTTP sent to the TLS port gets a cleartext 400 that says
    so, as from nginx (curl's plain http:// URL, and a POST whose 100 KB
    body is still arriving: the answer lingers instead of being reset), is
    counted result="failed" and logged nowhere above debug; a method OpenSSL
    does not recognise (OPTIONS) is just closed; the worker serves on."""
    t = TLSServer(ctx)
    before = t.handshakes("failed")
    r = subprocess.run(["curl", "-sS", "-i", "--max-time", str(10 * SLOW),
                        "http://127.0.0.1:%d/x" % t.port], capture_output=True)
    out = r.stdout.decode("latin-1")
    check(out.startswith("HTTP/1.1 400 Bad Request\r\n"), "curl got %r (%r)" % (out[:80], r.stderr))
    check(out.endswith("\r\n\r\nplain HTTP request sent to an HTTPS port\n"), "body: %r" % out[-80:])
    check("connection: close" in out.lower(), "no connection: close: %r" % out)
    s = socket.create_connection(("127.0.0.1", t.port), timeout=5 * SLOW)
    s.sendall(b"POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n" + b"x" * 100000)
    got = b""
    while True:
        try:
            d = s.recv(65536)
        except ConnectionResetError:
            break
        if not d:
            break
        got += d
    s.close()
    check(got.startswith(b"HTTP/1.1 400 "), "POST got %r" % got[:60])
    s = socket.create_connection(("127.0.0.1", t.port), timeout=5 * SLOW)
    s.sendall(b"OPTIONS / HTTP/1.1\r\nHost: t\r\n\r\n")
    s.settimeout(5 * SLOW)
    try:
        got = s.recv(100)
    except ConnectionResetError:
        got = b""
    check_eq(got, b"", "answer to OPTIONS")
    s.close()
    check(wait_for(lambda: t.handshakes("failed") - before == 3, 3), "failed counter did not move")
    check(wait_for(lambda: t.metrics().get("pagid_open_tls_connections") == 0, 3),
          "open TLS connections gauge: %r" % t.metrics().get("pagid_open_tls_connections"))
    c = t.conn()
    c.send(b"GET /after HTTP/1.1\r\nHost: t\r\n\r\n")
    check_eq(c.read_response().status, 200, "served after the bad clients")
    c.close()
    check(t.srv.alive(), "pagid died")
    check("TLS" not in t.srv.stderr() and "HTTPS" not in t.srv.stderr(),
          "logged above debug: %s" % t.srv.stderr()[-300:])


@test(timeout=30)
def peer_closes_mid_handshake_counted(ctx):
    """A client that sends its ClientHello and closes: result="closed"."""
    t = TLSServer(ctx)
    before = t.handshakes("closed")
    s = socket.create_connection(("127.0.0.1", t.port), timeout=5 * SLOW)
    s.sendall(client_hello())
    time.sleep(0.2)
    s.close()
    check(wait_for(lambda: t.handshakes("closed") - before >= 1, 3), "closed counter did not move")


@test(timeout=30)
def half_record_does_not_spin(ctx):
    """After the handshake, a client sends half of a TLS record and waits:
    the worker sleeps (OpenSSL holding part of a record is not "pending"
    data); the rest of the record then gets its response."""
    t = TLSServer(ctx, extra="timeouts:\n  idle: 20s\n")
    c = ssl.create_default_context(cafile=t.pki.ca_cert)
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = c.wrap_bio(inc, out, server_hostname="localhost")
    s = socket.create_connection(("127.0.0.1", t.port), timeout=5 * SLOW)
    while True:
        try:
            obj.do_handshake()
            break
        except ssl.SSLWantReadError:
            s.sendall(out.read())
            inc.write(s.recv(65536))
    s.sendall(out.read())
    obj.write(b"GET /half HTTP/1.1\r\nHost: t\r\n\r\n")
    record = out.read()
    s.sendall(record[:len(record) // 2])
    pid = t.srv.workers()[0]
    time.sleep(0.3)
    c0 = worker_cpu_ticks(pid)
    time.sleep(2)
    spent = (worker_cpu_ticks(pid) - c0) / os.sysconf("SC_CLK_TCK")
    check(spent < 0.5, "the worker used %.2f s of CPU in 2 s holding half a record" % spent)
    s.sendall(record[len(record) // 2:])
    data = b""
    while b"x-echo-path" not in data:
        try:
            data += obj.read(65536)
        except ssl.SSLWantReadError:
            d = s.recv(65536)
            check(d, "closed before the response")
            inc.write(d)
    check(b"x-echo-path: /half" in data, "response: %r" % data[:200])
    s.close()


# ---------------------------------------------------------------------------
# Output: a client that stops reading, many clients
# ---------------------------------------------------------------------------


@test(timeout=60)
def stalled_reader_cut_by_write_timeout(ctx):
    """A client that stops reading a 20 MiB response is cut after
    timeouts.write, over TLS as over cleartext (the access log says
    write_timeout for both, with the TLS version only on the TLS one)."""
    docroot = os.path.join(ctx.tmpdir, "www")
    os.makedirs(docroot)
    random_file(os.path.join(docroot, "big.bin"), 20 << 20)
    log = os.path.join(ctx.tmpdir, "access.log")
    extra = ("timeouts:\n  write: 1s\naccess_log:\n  path: %s\n"
             "  format: '%%U %%X %%{tls_version}x'\n" % log)
    t = TLSServer(ctx, app="static:" + docroot, extra=extra)
    got = {}
    for name, port, tls in (("tls", t.port, t.client), ("clear", t.cport, None)):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
        s.settimeout(5 * SLOW)
        s.connect(("127.0.0.1", port))
        if tls:
            s = tls.wrap_socket(s, server_hostname="localhost")
        s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
        time.sleep(3 * SLOW)  # timeouts.write is 1 s: long gone by now
        n = 0
        try:
            while True:
                d = s.recv(1 << 20)
                if not d:
                    break
                n += len(d)
        except (ConnectionResetError, ssl.SSLError, socket.timeout):
            pass
        s.close()
        got[name] = n
        check(n < (20 << 20), "%s: the whole file arrived (%d bytes): never cut" % (name, n))
    def lines():
        try:
            with open(log) as f:  # the status listener's scrapes are logged too
                return [ln for ln in f.read().splitlines() if not ln.startswith("/metrics")]
        except OSError:
            return []
    check(wait_for(lambda: len(lines()) >= 2, 5), "access log lines: %r" % lines())
    ls = lines()
    check(re.match(r"^/big\.bin write_timeout TLSv1\.[23]$", ls[0]), "TLS line: %r" % ls[0])
    check_eq(ls[1], "/big.bin write_timeout -", "cleartext line")
    ctx.note("bytes received before the cut: %r" % got)


@test(timeout=90)
def concurrent_200(ctx):
    """200 TLS connections at once, each served; the gauge counts them."""
    t = TLSServer(ctx)
    raise_nofile(400)
    conns, errors = [None] * 200, []

    def one(i):
        try:
            c = t.conn(timeout=30)
            c.send(b"GET /c%d HTTP/1.1\r\nHost: t\r\n\r\n" % i)
            r = c.read_response()
            if r.status != 200 or r.header("x-echo-path") != "/c%d" % i:
                errors.append("connection %d: %s %r" % (i, r.status, r.header("x-echo-path")))
            conns[i] = c
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append("connection %d: %r" % (i, e))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(200)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60 * SLOW)
    check(not errors, "%d failed: %s" % (len(errors), errors[:3]))
    check_eq(t.metrics().get("pagid_open_tls_connections"), 200.0, "open TLS connections")
    for c in conns:
        c.close()
    check(wait_for(lambda: t.metrics().get("pagid_open_tls_connections") == 0, 5),
          "gauge did not come back to 0")


# ---------------------------------------------------------------------------
# Access log, drain, linger
# ---------------------------------------------------------------------------


@test(timeout=40)
def access_log_tls_atoms(ctx):
    """%{tls_version}x and %{tls_cipher}x: TLS 1.3 and 1.2 as negotiated,
    "-" on cleartext; json carries tls_version and tls_cipher."""
    log = os.path.join(ctx.tmpdir, "access.log")
    extra = ("access_log:\n  path: %s\n  format: '%%U %%{tls_version}x %%{tls_cipher}x'\n" % log)
    t = TLSServer(ctx, extra=extra)
    c = t.conn()
    c.send(b"GET /v13 HTTP/1.1\r\nHost: t\r\n\r\n")
    c.read_response()
    cipher13 = c.sock.cipher()[0]
    c.close()
    ctx12 = t.pki.client_context()
    ctx12.maximum_version = ssl.TLSVersion.TLSv1_2
    c = Conn(t.port, tls=ctx12)
    c.send(b"GET /v12 HTTP/1.1\r\nHost: t\r\n\r\n")
    c.read_response()
    cipher12 = c.sock.cipher()[0]
    c.close()
    c = Conn(t.cport)
    c.send(b"GET /clear HTTP/1.1\r\nHost: t\r\n\r\n")
    c.read_response()
    c.close()

    def lines():
        try:
            with open(log) as f:
                return sorted(ln for ln in f.read().splitlines() if not ln.startswith("/metrics"))
        except OSError:
            return []
    check(wait_for(lambda: len(lines()) == 3, 5), "access log: %r" % lines())
    check_eq(lines(), sorted(["/v13 TLSv1.3 %s" % cipher13, "/v12 TLSv1.2 %s" % cipher12,
                              "/clear - -"]), "access log lines")


@test(timeout=40)
def resumed_handshakes_counted(ctx):
    """pagid_tls_sessions_resumed_total counts the handshakes that resumed a
    ticket's session: one full handshake, then three resumed ones, each with
    the session the previous connection left, then a full one again (no
    session offered). TLS 1.3 tickets are single-use (OpenSSL's client, like
    wrk's and browsers', will not offer a resumed session again), so every
    resumed handshake must bring a fresh ticket: a new session id."""
    t = TLSServer(ctx)
    session = None
    for i, offer in enumerate((False, True, True, True, False)):
        s = socket.create_connection(("127.0.0.1", t.port), timeout=10 * SLOW)
        s = t.client.wrap_socket(s, server_hostname="localhost",
                                 session=session if offer else None)
        s.sendall(b"GET /r%d HTTP/1.1\r\nHost: t\r\n\r\n" % i)
        check(read_response(s).startswith(b"HTTP/1.1 200"), "request %d" % i)
        check_eq(s.version(), "TLSv1.3", "request %d protocol" % i)
        check_eq(s.session_reused, offer, "request %d resumed" % i)
        check(s.session is not None and s.session.has_ticket, "request %d: no ticket" % i)
        if offer:
            check(s.session.id != session.id, "request %d: resumed without a new ticket" % i)
        session = s.session
        s.close()
    check(wait_for(lambda: t.handshakes("ok") == 5, 5), "ok handshakes: %r" % t.handshakes("ok"))
    check_eq(t.metrics().get("pagid_tls_sessions_resumed_total"), 3.0, "resumed handshakes")


@test(timeout=60)
def drain_with_tls_connections(ctx):
    """SIGTERM with an idle keep-alive TLS connection and one stalled in its
    handshake: the idle one gets close_notify within the drain's idle grace,
    the stalled one is cut at timeouts.header (2 s), and the worker exits
    long before timeouts.shutdown (30 s)."""
    t = TLSServer(ctx, extra="timeouts:\n  header: 2s\n  shutdown: 30s\n")
    raw = socket.create_connection(("127.0.0.1", t.port), timeout=10 * SLOW)
    idle = t.client.wrap_socket(raw, server_hostname="localhost", suppress_ragged_eofs=False)
    idle.sendall(b"GET /idle HTTP/1.1\r\nHost: t\r\n\r\n")
    read_response(idle)
    stalled = socket.create_connection(("127.0.0.1", t.port), timeout=10 * SLOW)
    time.sleep(0.2)
    t0 = time.monotonic()
    t.srv.signal(signal.SIGTERM)
    try:
        eof = idle.recv(100)
    except ssl.SSLEOFError:
        eof = None
    check_eq(eof, b"", "the idle connection's end (b'' = close_notify)")
    check(time.monotonic() - t0 < 5 * SLOW, "idle TLS connection kept %.1f s into the drain"
          % (time.monotonic() - t0))
    check(closed_within(stalled, 10 * SLOW) is not None, "stalled handshake never cut")
    check(t.srv.wait_exit(15), "pagid still running %.1f s after SIGTERM" % (time.monotonic() - t0))
    took = time.monotonic() - t0
    check(took < 15 * SLOW, "drain took %.1f s" % took)
    idle.close()
    stalled.close()


def _duplex(sock, payload, done, timeout, nap_every=0):
    """Send payload while reading what comes back, in one thread over the
    now non-blocking socket (an OpenSSL session must not be read and written
    from two threads at once), until done(received) or EOF. Returns
    (received, eof). nap_every: pause 10 ms every that many reads, to be a
    slow reader."""
    sock.setblocking(False)
    view, got, eof, reads = memoryview(payload), bytearray(), False, 0
    deadline = time.monotonic() + timeout
    try:
        while not eof and not done(got) and time.monotonic() < deadline:
            if view:
                try:
                    view = view[sock.send(view[:16384]):]
                except (ssl.SSLWantWriteError, ssl.SSLWantReadError, BlockingIOError):
                    pass
                except OSError:
                    view = view[:0]  # the server may stop reading once it answered
            try:
                d = sock.recv(65536)
                got += d
                eof = not d
                reads += 1
                if nap_every and reads % nap_every == 0:
                    time.sleep(0.01)
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
                select.select([sock], [sock] if view else [], [], 0.05)
    finally:
        sock.setblocking(True)
    return bytes(got), eof


@test(timeout=30)
def error_response_lingers(ctx):
    """A body over max_body_size on TLS: the 413 arrives whole while the
    client is still sending (the connection lingers after close_notify
    instead of resetting under the answer)."""
    t = TLSServer(ctx, extra="limits:\n  max_body_size: 1k\n")
    c = t.conn()
    c.send(b"POST /big HTTP/1.1\r\nHost: t\r\nContent-Length: 400000\r\n\r\n")
    got, eof = _duplex(c.sock, b"x" * 400000, lambda g: b"\r\n\r\n" in g, 10 * SLOW)
    check(got.startswith(b"HTTP/1.1 413 "), "no 413 before %s: %r" % ("EOF" if eof else "the deadline", got[:80]))
    c.close()


# ---------------------------------------------------------------------------
# Memory
# ---------------------------------------------------------------------------


def tls_idle_after(client):
    def open_one(port):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s = client.wrap_socket(s, server_hostname="localhost")
        s.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        head = read_response(s)
        check(head.startswith(b"HTTP/1.1 200"), "got %r" % head[:40])
        return s
    return open_one


@test(timeout=180)
def idle_tls_connection_memory(ctx):
    """1,000 idle keep-alive TLS connections after one request each: worker
    RSS per connection (OpenSSL's session and cipher state; the record
    buffers are released while idle) stays under 20 KB; cleartext beside
    it for the record."""
    t = TLSServer(ctx, extra="timeouts:\n  idle: 60s\n  keepalive: 60s\n")

    class Port:  # per_conn wants srv.port and srv.workers()
        def __init__(self, port):
            self.port = port

        def workers(self):
            return t.srv.workers()

        def alive(self):
            return t.srv.alive()

    each = per_conn(ctx, Port(t.port), 1000, tls_idle_after(t.client), "idle TLS keep-alive")
    if each is not None:
        check(each < 20000, "an idle TLS connection costs %.0f bytes (bound 20000)" % each)


@test(timeout=60)
def flow_control_over_tls(ctx):
    """An SSE flood over TLS to a client that stops reading: pagi.transport
    reaches the high watermark and completions stop (what OpenSSL holds
    after a blocked write still counts as buffered); the client reads a
    while and on_drain fires at or below the low watermark; it stops again
    and the write timeout ends the stream, as over cleartext."""
    from test_sse import settle, sseapp, terminal

    t = TLSServer(ctx, app=sseapp(ctx), extra="timeouts:\n  write: 2s\nflow_control:\n"
                  "  high_watermark: 64k\n  low_watermark: 16k\n")
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(5 * SLOW)
    s.connect(("127.0.0.1", t.port))
    s = t.client.wrap_socket(s, server_hostname="localhost")
    s.sendall(b"GET /flood?size=16384 HTTP/1.1\r\nHost: t\r\nAccept: text/event-stream\r\n"
              b"x-test-id: tf\r\n\r\n")
    check(wait_event(ctx, "tf", "high_water", 5), "no high_water: %r" % app_events(ctx, "tf")[-5:])
    hw = next(e for e in app_events(ctx, "tf") if e.startswith("high_water"))
    check(int(hw.split()[1]) >= 65536, "high_water below the mark: %r" % hw)
    time.sleep(0.3)
    n1 = sum(1 for e in app_events(ctx, "tf") if e.startswith("send_done"))
    time.sleep(0.6)
    n2 = sum(1 for e in app_events(ctx, "tf") if e.startswith("send_done"))
    check_eq(n2, n1, "send completions while the client reads nothing")
    # Read until the server's queue drains below the low watermark.
    got, t0 = 0, time.monotonic()
    while not any(e.startswith("drain") for e in app_events(ctx, "tf")):
        check(time.monotonic() - t0 < 10 * SLOW, "no on_drain after reading %d bytes" % got)
        got += len(s.recv(65536))
    dr = next(e for e in app_events(ctx, "tf") if e.startswith("drain"))
    check(int(dr.split()[1]) <= 16384, "on_drain above the low mark: %r" % dr)
    # Stop reading again: the write timeout ends it.
    check(wait_event(ctx, "tf", "on_disconnect", 10), "no write_timeout: %r"
          % app_events(ctx, "tf")[-5:])
    check_eq(terminal(settle(ctx, "tf")), "on_disconnect write_timeout", "disconnect reason")
    s.close()


@test(timeout=90)
def slow_reader_gets_every_byte(ctx):
    """A client with a tiny receive buffer that reads in small sips, while
    the app keeps queueing: OpenSSL meets a full socket again and again
    (WANT_WRITE with a record held, retried with the queue grown behind
    it), and every byte still arrives once, in order: the echo of 4 MiB
    and a 4 MiB range of a file, checked by sha256."""
    docroot = os.path.join(ctx.tmpdir, "www")
    os.makedirs(docroot)
    big = random_file(os.path.join(docroot, "big.bin"), 8 << 20)
    extra = "limits:\n  max_body_size: 8m\nmounts:\n  - path: /files\n    app: static:%s\n" % docroot
    t = TLSServer(ctx, extra=extra)
    body = os.urandom(4 << 20)
    with open(big, "rb") as f:
        f.seek(1 << 20)
        part = f.read(4 << 20)
    for path, head, want in (
            ("/echo", b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % len(body),
             body),
            ("/files/big.bin", b"GET /files/big.bin HTTP/1.1\r\nHost: t\r\n"
             b"Range: bytes=%d-%d\r\n\r\n" % (1 << 20, (5 << 20) - 1), part)):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
        s.settimeout(20 * SLOW)
        s.connect(("127.0.0.1", t.port))
        s = t.client.wrap_socket(s, server_hostname="localhost")
        s.sendall(head)

        def whole(g):
            hd, sep, rest = g.partition(b"\r\n\r\n")
            return sep and len(rest) >= len(want)

        data, eof = _duplex(s, body if path == "/echo" else b"", whole, 20 * SLOW, nap_every=64)
        hd, _, got = data.partition(b"\r\n\r\n")
        check(not eof or whole(data), "%s: closed after %d of %d bytes" % (path, len(got), len(want)))
        check(hd.split(b"\r\n")[0] in (b"HTTP/1.1 200 OK", b"HTTP/1.1 206 Partial Content"),
              "%s: %r" % (path, hd[:60]))
        check_eq(len(got), len(want), "%s length" % path)
        check(hashlib.sha256(got).digest() == hashlib.sha256(want).digest(),
              "%s: the bytes differ" % path)
        s.close()


@test(timeout=30)
def eof_without_close_notify(ctx):
    """A client that drops the TCP connection without close_notify in the
    middle of an upload is client_closed (not read_error, not a TLS error),
    and one that does the same after its response is just a closed
    keep-alive connection: nothing logged above debug."""
    log = os.path.join(ctx.tmpdir, "access.log")
    extra = "access_log:\n  path: %s\n  format: '%%U %%s %%X'\n" % log
    t = TLSServer(ctx, extra=extra)
    c = t.conn()
    c.send(b"POST /cut HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n" + b"x" * 1000)
    time.sleep(0.2)
    c.close()  # Python closes an SSLSocket without close_notify (only unwrap() sends it)
    c2 = t.conn()
    c2.send(b"GET /done HTTP/1.1\r\nHost: t\r\n\r\n")
    check_eq(c2.read_response().status, 200, "request before the drop")
    c2.close()

    def lines():
        try:
            with open(log) as f:
                return [ln for ln in f.read().splitlines() if not ln.startswith("/metrics")]
        except OSError:
            return []
    check(wait_for(lambda: len(lines()) >= 2, 5), "access log: %r" % lines())
    check("/cut 0 client_closed" in lines(), "the cut upload: %r" % lines())
    check("/done 200 -" in lines(), "the complete request: %r" % lines())
    check("error" not in t.srv.stderr().lower(), "logged: %s" % t.srv.stderr()[-300:])
