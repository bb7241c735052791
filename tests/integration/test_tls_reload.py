"""Certificate renewal on a TLS listener by SIGHUP while clients keep the
server busy: not one failed request, new connections get the renewed
certificate once the new generation serves, and a broken replacement (a
file that is no certificate, a key that does not match) leaves the old
generation serving with the error logged by the master."""

import os
import re
import signal
import threading
import time

import lib
from lib import Conn, check, free_port, test, wait_for
from test_ops import log_count, start_with_config, wait_workers, write

BODY = b"Hello from PAGI"


class TlsLoad:
    """Client threads until stopped: some reuse keep-alive TLS connections
    (a response with connection: close ends one, as HTTP says), some make a
    new TLS connection per request. Each handshake's certificate serial is
    kept with its time; every failure is kept with its reason."""

    def __init__(self, port, ssl_ctx, keepalive=3, fresh=3):
        self.port = port
        self.ssl_ctx = ssl_ctx
        self.ok = 0
        self.handshakes = []  # (monotonic time, serial) per new connection
        self.failures = []
        self.lock = threading.Lock()
        self.stop_flag = threading.Event()
        self.threads = [threading.Thread(target=self.keepalive_loop, daemon=True)
                        for _ in range(keepalive)]
        self.threads += [threading.Thread(target=self.fresh_loop, daemon=True)
                         for _ in range(fresh)]

    def connect(self):
        c = Conn(self.port, timeout=10, tls=self.ssl_ctx)
        serial = c.sock.getpeercert()["serialNumber"]
        with self.lock:
            self.handshakes.append((time.monotonic(), serial))
        return c

    def record(self, r, how):
        with self.lock:
            if r.status == 200 and r.body == BODY:
                self.ok += 1
            else:
                self.failures.append((time.monotonic(), how, repr(r)[:200]))

    def fail(self, how, e):
        with self.lock:
            self.failures.append((time.monotonic(), how, repr(e)[:200]))

    def keepalive_loop(self):
        c = None
        while not self.stop_flag.is_set():
            try:
                if c is None:
                    c = self.connect()
                c.send(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
                r = c.read_response()
                self.record(r, "keep-alive")
                if (r.header("connection") or "").lower() == "close":
                    c.close()
                    c = None
            except Exception as e:  # noqa: BLE001 - every failure counts
                self.fail("keep-alive", e)
                if c:
                    c.close()
                c = None
        if c:
            c.close()

    def fresh_loop(self):
        while not self.stop_flag.is_set():
            try:
                c = self.connect()
                try:
                    c.send(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                    self.record(c.read_response(), "new connection")
                finally:
                    c.close()
            except Exception as e:  # noqa: BLE001
                self.fail("new connection", e)

    def serials_since(self, t):
        with self.lock:
            return [s for when, s in self.handshakes if when >= t]

    def start(self):
        for t in self.threads:
            t.start()
        return self

    def stop(self):
        self.stop_flag.set()
        for t in self.threads:
            t.join(15)


def serial_of(cert):
    """The serial as Python's getpeercert() spells it (upper-case hex)."""
    import subprocess

    out = subprocess.run(["openssl", "x509", "-in", cert, "-noout", "-serial"],
                         capture_output=True, timeout=30, check=True).stdout.decode()
    return out.strip().split("=", 1)[1].upper()


def fresh_serials(port, ssl_ctx, n=6):
    """The certificate serials of n new connections (each one request)."""
    out = []
    for _ in range(n):
        c = Conn(port, timeout=10, tls=ssl_ctx)
        try:
            out.append(c.sock.getpeercert()["serialNumber"])
            c.send(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            r = c.read_response()
            check(r.status == 200 and r.body == BODY, "response: %r" % r)
        finally:
            c.close()
    return out


def install(src_cert, src_key, live_cert, live_key):
    """Replace the live files as a renewal tool would (each by a rename)."""
    with open(src_key) as f:
        write(live_key, f.read())
    with open(src_cert) as f:
        write(live_cert, f.read())


def hup_and_wait_failed(srv, before):
    """SIGHUP; wait for the master's next 'reload failed' line; returns it
    with the error lines logged just before it (a problem with a listen
    entry is logged at its FILE:LINE:COLUMN, one line each, then the
    'reload failed; generation N keeps serving' line), joined by ' | '."""
    os.kill(srv.pid, signal.SIGHUP)
    check(wait_for(lambda: log_count(srv, r"reload failed") > before, 10),
          "no 'reload failed' after SIGHUP with a broken certificate: %s"
          % srv.stderr()[-800:])
    lines = srv.stderr().splitlines()
    last = max(i for i, line in enumerate(lines) if "reload failed" in line)
    first = last
    while first > 0 and "error:" in lines[first - 1] and "reload failed" not in lines[first - 1]:
        first -= 1
    return " | ".join(lines[first:last + 1])


@test(timeout=150)
def renewed_certificate_by_sighup_under_load(ctx):
    pki = lib.TestPKI(ctx)
    cert1, key1 = pki.issue("gen1", cn="localhost")
    cert2, key2 = pki.issue("gen2", cn="localhost")
    s1, s2 = serial_of(cert1), serial_of(cert2)
    check(s1 != s2, "the renewed certificate has the same serial %s" % s1)
    live_cert = os.path.join(ctx.tmpdir, "live.pem")
    live_key = os.path.join(ctx.tmpdir, "live.key")
    install(cert1, key1, live_cert, live_key)
    port = free_port()
    config = ("listen:\n" + lib.tls_listen(port, live_cert, live_key) +
              "workers: 2\napp: hello\ntimeouts: {keepalive: 5s, shutdown: 10s}\n")
    srv, _ = start_with_config(ctx, config, port)
    wait_workers(srv, 2)
    ssl_ctx = pki.client_context()
    check(set(fresh_serials(port, ssl_ctx, 3)) == {s1}, "the first certificate is not served")

    load = TlsLoad(port, ssl_ctx).start()
    try:
        time.sleep(1.0 * lib.SLOW)
        ok_before = load.ok
        check(ok_before > 20, "the load is not running: %d requests in 1s" % ok_before)

        # Phase 1: the renewed certificate and key, then SIGHUP.
        install(cert2, key2, live_cert, live_key)
        ready = log_count(srv, r"generation \d+ ready")
        os.kill(srv.pid, signal.SIGHUP)
        check(wait_for(lambda: log_count(srv, r"generation \d+ ready") > ready, 15),
              "no new generation after SIGHUP: %s" % srv.stderr()[-800:])
        t_ready = time.monotonic()
        wait_workers(srv, 2, timeout=20)  # the old generation has drained
        time.sleep(0.5 * lib.SLOW)
        check(set(fresh_serials(port, ssl_ctx)) == {s2},
              "new connections after the reload do not all get serial %s" % s2)
        seen = load.serials_since(t_ready)
        check(s2 in seen, "the load saw no handshake with the renewed certificate")
        ok_mid = load.ok
        check(ok_mid > ok_before, "no request completed across the reload")

        # Phase 2: a file that is no certificate: the reload fails, the
        # renewed certificate keeps being served.
        with open(live_cert) as f:
            good_cert = f.read()
        write(live_cert, "-----BEGIN CERTIFICATE-----\nnot a certificate\n"
                         "-----END CERTIFICATE-----\n")
        line = hup_and_wait_failed(srv, log_count(srv, r"reload failed"))
        check(live_cert in line and "keeps serving" in line,
              "the error does not name the file or say the old generation serves: %r" % line)
        check(re.search(r"pagid\.yaml:\d+:\d+: ", line),
              "the error does not point at the listen entry (FILE:LINE:COL): %r" % line)
        t_bad = time.monotonic()
        time.sleep(1.0 * lib.SLOW)

        # Phase 3: a valid certificate with a key that does not match it.
        write(live_cert, good_cert)
        with open(key1) as f:
            write(live_key, f.read())
        line = hup_and_wait_failed(srv, log_count(srv, r"reload failed"))
        check(live_key in line and "match" in line and "keeps serving" in line,
              "key mismatch not reported as such: %r" % line)
        time.sleep(1.0 * lib.SLOW)
        check(set(fresh_serials(port, ssl_ctx)) == {s2},
              "after the broken reloads new connections do not get serial %s" % s2)
        late = load.serials_since(t_bad)
        check(late and set(late) == {s2},
              "handshakes after the broken reloads: %r" % sorted(set(late)))
        check(load.ok > ok_mid, "no request completed across the broken reloads")
    finally:
        load.stop()
    ctx.note("%d requests, %d handshakes, %d failed"
             % (load.ok, len(load.handshakes), len(load.failures)))
    check(not load.failures, "%d of %d requests failed; first: %r"
          % (len(load.failures), load.ok + len(load.failures), load.failures[:3]))
    check(load.ok > 300, "only %d requests completed under load" % load.ok)
    check(len(lib.children_of(srv.pid)) == 2, "workers after the broken reloads: %r"
          % lib.children_of(srv.pid))
    check(log_count(srv, r"crashed|blocked") == 0, "a worker crashed during the test")


@test(timeout=90)
def renewals_under_wrk(ctx):
    # Two wrk runs over TLS at once, one on 32 keep-alive connections, one
    # making a new handshake per request (it counts a connection closed under
    # a request it sent as an error), while the certificate is renewed and
    # reloaded 6 times.
    import shutil
    import subprocess

    wrk = shutil.which("wrk")
    check(wrk, "wrk is not installed (./dev.sh installs it)")
    pki = lib.TestPKI(ctx)
    certs = [pki.issue("gen%d" % i, cn="localhost") for i in range(7)]
    live_cert = os.path.join(ctx.tmpdir, "live.pem")
    live_key = os.path.join(ctx.tmpdir, "live.key")
    install(certs[0][0], certs[0][1], live_cert, live_key)
    port = free_port()
    config = ("listen:\n" + lib.tls_listen(port, live_cert, live_key) +
              "workers: 2\napp: hello\ntimeouts: {shutdown: 10s}\n")
    srv, _ = start_with_config(ctx, config, port)
    wait_workers(srv, 2)
    url = "https://127.0.0.1:%d/" % port
    runs = {"keep-alive": [wrk, "-t1", "-c32", "-d12s", url],
            "connection: close": [wrk, "-t1", "-c8", "-d12s", "-H", "Connection: close", url]}
    procs = {}
    for name, argv in runs.items():
        f = open(os.path.join(ctx.tmpdir, "wrk-%d.out" % len(procs)), "w+")
        procs[name] = (subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT), f)
    try:
        time.sleep(1.5)
        for i in range(1, 7):
            install(certs[i][0], certs[i][1], live_cert, live_key)
            ready = log_count(srv, r"generation \d+ ready")
            os.kill(srv.pid, signal.SIGHUP)
            check(wait_for(lambda: log_count(srv, r"generation \d+ ready") > ready, 10),
                  "reload %d: no new generation" % i)
            time.sleep(0.5)
        for p, _ in procs.values():
            p.wait(40)
    finally:
        for p, f in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
    wait_workers(srv, 2, timeout=20)
    check(set(fresh_serials(port, pki.client_context(), 3)) == {serial_of(certs[6][0])},
          "new connections do not get the last renewed certificate")
    for name, (p, f) in procs.items():
        f.seek(0)
        text = f.read()
        f.close()
        ctx.note("%s: %s" % (name, text.strip().replace("\n", " | ")))
        m = re.search(r"(\d+) requests in", text)
        check(m and int(m.group(1)) > 200, "wrk (%s) did not run: %r" % (name, text))
        check("Socket errors" not in text, "wrk (%s) saw socket errors: %r" % (name, text))
        check("Non-2xx" not in text, "wrk (%s) saw non-2xx responses: %r" % (name, text))
