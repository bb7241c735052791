"""TLS configuration and the master's side of it: the tls: mapping (SNI
certificates, protocols, ciphers, session tickets), pagid -t on certificate
files, reload of renewed and broken certificates, a root-only key with
`user:`, -l https:// on the command line. Certificates come from a test CA
made at test time (lib.TestPKI)."""

import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import threading
import time

import lib
from lib import (SLOW, Conn, TestFailure, TestPKI, check, check_eq, free_port, test, tls_listen,
                 wait_for, write_config)


def run_pagid(ctx, *args, timeout=15):
    p = subprocess.run([ctx.pagid] + list(args) + lib.root_user_args(args),
                       stdin=subprocess.DEVNULL, capture_output=True, cwd=ctx.tmpdir,
                       timeout=timeout * SLOW)
    out = (p.stdout + p.stderr).decode("utf-8", "replace")
    check("Sanitizer" not in out and "runtime error" not in out, "sanitizer report: %s" % out)
    check(p.returncode >= 0, "pagid died from signal %d" % -p.returncode)
    return p.returncode, out


def check_config(ctx, text):
    """pagid -t on a config; (exit status, output, the file's path)."""
    path = write_config(ctx, text, "check-%d.yaml" % time.monotonic_ns())
    rc, out = run_pagid(ctx, "-t", "-c", path)
    return rc, out, path


def start(ctx, text, port, default_user=True):
    path = write_config(ctx, text, "pagid-%d.yaml" % len(ctx.servers))
    srv = lib.Server(ctx, ["-c", path], port, name="pagid%d" % len(ctx.servers),
                     default_user=default_user)
    ctx.servers.append(srv)
    srv.wait_ready()
    check(wait_for(lambda: "all workers ready" in srv.stderr(), 10), "workers never ready")
    return srv, path


def base(port, cert, key, extra="", workers=1, tail=""):
    return "listen:\n" + tls_listen(port, cert, key, extra) + \
        "app: hello\nworkers: %d\n%s" % (workers, tail)


def peer_cn(sock):
    """The commonName of the certificate the server presented."""
    subject = dict(x[0] for x in sock.getpeercert()["subject"])
    return subject.get("commonName")


def handshake(pki, port, server_hostname="localhost", ctx=None):
    """A TLS connection (no request); the caller closes it."""
    c = ctx or pki.client_context()
    c.check_hostname = False
    s = socket.create_connection(("127.0.0.1", port), timeout=5 * SLOW)
    return c.wrap_socket(s, server_hostname=server_hostname)


def https_get(pki, port, ctx=None, session=None, server_hostname="localhost"):
    """One GET / on a new connection; (status, ssl socket after the response)."""
    c = ctx or pki.client_context()
    s = socket.create_connection(("127.0.0.1", port), timeout=5 * SLOW)
    t = c.wrap_socket(s, server_hostname=server_hostname, session=session)
    t.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    data = b""
    while True:
        chunk = t.recv(65536)
        if not chunk:
            break
        data += chunk
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else 0
    return status, t


# ---------------------------------------------------------------------------
# SNI, protocols, ciphers
# ---------------------------------------------------------------------------


@test(timeout=40)
def sni_chooses_certificate(ctx):
    pki = TestPKI(ctx)
    dflt = pki.issue("default", cn="default cert", sans=["DNS:localhost", "IP:127.0.0.1"])
    exact = pki.issue("exact", cn="exact cert", sans=["DNS:a.test", "DNS:www.a.test"])
    wild = pki.issue("wild", cn="wildcard cert", sans=["DNS:*.example.com"])
    cnonly = pki.issue("cnonly", cn="cn.test", sans=[])
    port = free_port()
    extra = ("      certificates:\n"
             "        - {cert: %s, key: %s}\n"
             "        - {cert: %s, key: %s}\n"
             "        - {cert: %s, key: %s}\n" % (wild + exact + cnonly))
    start(ctx, base(port, dflt[0], dflt[1], extra), port)
    cases = [("a.test", "exact cert"), ("www.a.test", "exact cert"),
             ("b.example.com", "wildcard cert"), ("B.Example.COM", "wildcard cert"),
             ("x.b.example.com", "default cert"),  # a wildcard matches one label only
             ("example.com", "default cert"), ("cn.test", "cn.test"),
             ("other.test", "default cert"), (None, "default cert"),
             # a fully qualified name (one trailing dot) is the same host
             ("a.test.", "exact cert"), ("b.example.com.", "wildcard cert")]
    for name, want in cases:
        s = handshake(pki, port, server_hostname=name)
        try:
            check_eq(peer_cn(s), want, "certificate for SNI %r" % name)
        finally:
            s.close()
    # The SNI certificate serves requests like the default one.
    status, s = https_get(pki, port, server_hostname="a.test")
    check_eq((status, peer_cn(s)), (200, "exact cert"), "request on the SNI certificate")
    s.close()


@test(timeout=30)
def only_certificates_first_is_default(ctx):
    pki = TestPKI(ctx)
    one = pki.issue("one", cn="first", sans=["DNS:one.test"])
    two = pki.issue("two", cn="second", sans=["DNS:two.test"])
    port = free_port()
    cfg = ("listen:\n  - address: 127.0.0.1:%d\n    tls:\n      certificates:\n"
           "        - {cert: %s, key: %s}\n        - {cert: %s, key: %s}\napp: hello\n"
           "workers: 1\n" % ((port,) + one + two))
    start(ctx, cfg, port)
    for name, want in (("two.test", "second"), ("one.test", "first"), ("zzz.test", "first")):
        s = handshake(pki, port, server_hostname=name)
        check_eq(peer_cn(s), want, "certificate for SNI %r" % name)
        s.close()


@test(timeout=30)
def protocols_restrict_versions(ctx):
    pki = TestPKI(ctx)
    cert, key = pki.issue("srv")
    p13, p12 = free_port(), free_port()
    cfg = ("listen:\n" + tls_listen(p13, cert, key, "      protocols: [TLSv1.3]\n") +
           tls_listen(p12, cert, key, "      protocols: TLSv1.2\n") + "app: hello\nworkers: 1\n")
    start(ctx, cfg, p13)
    old = pki.client_context()
    old.maximum_version = ssl.TLSVersion.TLSv1_2
    try:
        handshake(pki, p13, ctx=old).close()
        raise TestFailure("a TLS 1.2-only client got through protocols: [TLSv1.3]")
    except ssl.SSLError as e:
        check("version" in str(e).lower(), "refused for another reason: %s" % e)
    s = handshake(pki, p13)
    check_eq(s.version(), "TLSv1.3", "version on the TLSv1.3 listener")
    s.close()
    s = handshake(pki, p12)
    check_eq(s.version(), "TLSv1.2", "version on the TLSv1.2 listener (client offers 1.3)")
    s.close()


@test(timeout=30)
def ciphers_and_ciphersuites(ctx):
    pki = TestPKI(ctx)
    cert, key = pki.issue("srv")
    p12, p13 = free_port(), free_port()
    cfg = ("listen:\n" +
           tls_listen(p12, cert, key, "      protocols: [TLSv1.2]\n"
                      "      ciphers: ECDHE-ECDSA-CHACHA20-POLY1305\n") +
           tls_listen(p13, cert, key, "      ciphersuites: TLS_CHACHA20_POLY1305_SHA256\n") +
           "app: hello\nworkers: 1\n")
    start(ctx, cfg, p12)
    s = handshake(pki, p12)
    check_eq(s.cipher()[0], "ECDHE-ECDSA-CHACHA20-POLY1305", "TLS 1.2 cipher")
    s.close()
    s = handshake(pki, p13)
    check_eq((s.version(), s.cipher()[0]), ("TLSv1.3", "TLS_CHACHA20_POLY1305_SHA256"),
             "TLS 1.3 suite")
    s.close()
    # Defaults: nothing weak is offered (only AEAD ECDHE suites in TLS 1.2).
    p = free_port()
    start(ctx, "listen:\n" + tls_listen(p, cert, key) + "app: hello\nworkers: 1\n", p)
    weak = pki.client_context()
    weak.maximum_version = ssl.TLSVersion.TLSv1_2
    weak.set_ciphers("ECDHE-ECDSA-AES128-SHA:AES128-SHA:AES128-GCM-SHA256")
    try:
        handshake(pki, p, ctx=weak).close()
        raise TestFailure("a CBC or non-forward-secret cipher was accepted by default")
    except ssl.SSLError:
        pass


@test(timeout=30)
def tls13_default_suite_order(ctx):
    """By default the server's order picks AES-128-GCM even for a client
    listing AES-256-GCM first (Mozilla's order; what h2o and nginx end up
    with), and a client listing ChaCha20 first (no AES instructions) gets
    ChaCha20."""
    pki = TestPKI(ctx)
    cert, key = pki.issue("srv")
    p = free_port()
    start(ctx, "listen:\n" + tls_listen(p, cert, key) + "app: hello\nworkers: 1\n", p)

    def suite(offer):
        r = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % p,
                            "-servername", "localhost", "-tls1_3", "-ciphersuites", offer],
                           input=b"", capture_output=True, timeout=20 * SLOW)
        m = re.search(r"Cipher is (TLS_\w+)", r.stdout.decode("utf-8", "replace"))
        return m.group(1) if m else r.stdout.decode("utf-8", "replace")[-400:]

    check_eq(suite("TLS_AES_256_GCM_SHA384:TLS_AES_128_GCM_SHA256"), "TLS_AES_128_GCM_SHA256",
             "suite for a client preferring AES-256")
    check_eq(suite("TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256"),
             "TLS_CHACHA20_POLY1305_SHA256", "suite for a client preferring ChaCha20")
    check_eq(suite("TLS_AES_256_GCM_SHA384"), "TLS_AES_256_GCM_SHA384",
             "suite for a client offering only AES-256")


# ---------------------------------------------------------------------------
# Config errors (pagid -t)
# ---------------------------------------------------------------------------


@test(timeout=60)
def tls_config_errors_have_positions(ctx):
    pki = TestPKI(ctx)
    cert, key = pki.issue("srv")
    short = os.path.join(ctx.tmpdir, "short.key")
    with open(short, "wb") as f:
        f.write(os.urandom(20))
    port = free_port()
    head = "listen:\n  - address: 127.0.0.1:%d\n    tls:\n" % port
    cases = [
        # (tls lines, line, column, message pattern)
        ("      cert: %s\n      key: %s\n      certs: []\n" % (cert, key), 6, 7,
         r"unknown key 'certs' in 'listen.tls' \(did you mean 'cert'"),
        ("      cert: %s\n      key: %s\n      protocol: [TLSv1.3]\n" % (cert, key), 6, 7,
         r"did you mean 'protocols'"),
        ("      cert: %s\n" % cert, 4, 7, r"needs both 'cert' and 'key'.*'key' is missing"),
        ("      cert: %s\n      key: %s\n      protocols: [TLSv1.1]\n" % (cert, key), 6, 19,
         r"protocol 'TLSv1.1' is not supported"),
        ("      cert: %s\n      key: %s\n      protocols: [TLSv1.4]\n" % (cert, key), 6, 19,
         r"unknown protocol 'TLSv1.4'.*did you mean 'TLSv1.[23]'"),
        ("      cert: %s\n      key: %s\n      client_auth: {mode: require}\n" % (cert, key),
         6, 20, r"needs a 'ca' file"),
        ("      cert: %s\n      key: %s\n      client_auth: {ca: %s, mode: sometimes}\n"
         % (cert, key, pki.ca_cert), 6, 0, r"invalid client_auth mode 'sometimes'"),
        ("      cert: %s\n      key: %s\n      client_auth: {ca: /nonexistent/ca.pem}\n"
         % (cert, key), 6, 25, r"cannot load client CA '/nonexistent/ca.pem'"),
        ("      cert: %s\n      key: %s\n      session_tickets: maybe\n" % (cert, key), 6, 24,
         r"must be true or false"),
        ("      cert: %s\n      key: %s\n      session_tickets: off\n"
         "      session_ticket_key: %s\n" % (cert, key, short), 7, 7,
         r"session_ticket_key' given with session_tickets: false"),
        ("      cert: %s\n      key: %s\n      session_ticket_key: %s\n" % (cert, key, short),
         6, 27, r"must be 48 or 80 bytes.*not 20"),
        ("      cert: %s\n      key: %s\n      ciphers: NOT-A-CIPHER\n" % (cert, key), 6, 16,
         r"no usable cipher in 'NOT-A-CIPHER'"),
        ("      cert: %s\n      key: %s\n      ciphersuites: TLS_NOPE\n" % (cert, key), 6, 21,
         r"no usable TLS 1.3 cipher suite"),
        ("      cert: %s\n      key: %s\n      certificates: [{cert: %s}]\n" % (cert, key, cert),
         6, 22, r"'listen.tls.certificates' needs both 'cert' and 'key'"),
        ("      certificates: {cert: %s, key: %s}\n" % (cert, key), 4, 21,
         r"must be a list of \{cert, key\} mappings"),
    ]
    for tls, line, col, pattern in cases:
        rc, out, path = check_config(ctx, head + tls + "app: hello\n")
        check_eq(rc, 1, "exit status for %r (output %r)" % (pattern, out))
        if col:
            where = r"%s:%d:%d: " % (re.escape(path), line, col)
        else:
            where = r"%s:%d:\d+: " % (re.escape(path), line)
        check(re.search(where + ".*" + pattern, out),
              "expected %s%s in %r" % (where, pattern, out))


# ---------------------------------------------------------------------------
# pagid -t on the certificate files
# ---------------------------------------------------------------------------


def chain_pki(pki, ctx):
    """An intermediate CA under pki's root and a leaf under it: (leaf cert,
    leaf key, intermediate cert)."""
    d = pki.dir
    ikey, icsr, icert = (os.path.join(d, "inter" + s) for s in (".key", ".csr", ".pem"))
    iext = os.path.join(d, "inter.ext")
    pki._openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                 "-keyout", ikey, "-out", icsr, "-subj", "/CN=pagid test intermediate")
    with open(iext, "w") as f:
        f.write("basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n")
    pki._openssl("x509", "-req", "-in", icsr, "-CA", pki.ca_cert, "-CAkey", pki.ca_key,
                 "-set_serial", "900", "-extfile", iext, "-days", "30", "-out", icert)
    lkey, lcsr, lcert = (os.path.join(d, "leaf" + s) for s in (".key", ".csr", ".pem"))
    lext = os.path.join(d, "leaf.ext")
    pki._openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                 "-keyout", lkey, "-out", lcsr, "-subj", "/CN=chained leaf")
    with open(lext, "w") as f:
        f.write("basicConstraints=CA:FALSE\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n")
    pki._openssl("x509", "-req", "-in", lcsr, "-CA", icert, "-CAkey", ikey, "-set_serial", "901",
                 "-extfile", lext, "-days", "30", "-out", lcert)
    return lcert, lkey, icert


def cat(ctx, name, *files):
    out = os.path.join(ctx.tmpdir, name)
    with open(out, "wb") as o:
        for f in files:
            with open(f, "rb") as i:
                o.write(i.read())
    return out


@test(timeout=60)
def check_certificate_files(ctx):
    pki = TestPKI(ctx)
    good = pki.issue("good")
    other = pki.issue("other")
    expired = pki.issue("expired", start_offset_days=-40, days=10)
    future = pki.issue("future", start_offset_days=3, days=30)
    soon = pki.issue("soon", days=5)
    lcert, lkey, icert = chain_pki(pki, ctx)
    ordered = cat(ctx, "ordered.pem", lcert, icert)
    misordered = cat(ctx, "misordered.pem", icert, lcert)
    port = free_port()

    def cfg(cert, key):
        return "listen:\n" + tls_listen(port, cert, key) + "app: hello\n"

    rc, out, path = check_config(ctx, cfg(*good))
    check_eq((rc, out.count("warning: certificate")), (0, 0), "a good certificate: %r" % out)
    where = re.escape(path) + r":4:13: "  # the cert value of the listen entry

    rc, out, path = check_config(ctx, cfg(good[0], other[1]))
    check_eq(rc, 1, "mismatched key: exit status")
    check(re.search(re.escape(path) + r":5:12: private key '%s' does not match certificate '%s'"
                    % (re.escape(other[1]), re.escape(good[0])), out), "mismatch message: %r" % out)

    rc, out, path = check_config(ctx, cfg(*expired))
    check_eq(rc, 1, "expired: exit status")
    check(re.search(re.escape(path) + r":4:13: certificate .*expired\.pem \(CN=expired\) "
                    r"expired on \d{4}-\d\d-\d\d", out), "expired message: %r" % out)

    rc, out, path = check_config(ctx, cfg(*future))
    check_eq(rc, 1, "not yet valid: exit status")
    check(re.search(re.escape(path) + r":4:13: certificate .* is not valid before", out),
          "not-yet-valid message: %r" % out)

    rc, out, path = check_config(ctx, cfg(*soon))
    check_eq(rc, 0, "expiring soon is only a warning: %r" % out)
    check(re.search(re.escape(path) + r":4:13: warning: certificate .*soon\.pem \(CN=soon\) "
                    r"expires on .* \(in [45] days\)", out), "expiry warning: %r" % out)

    rc, out, path = check_config(ctx, cfg(ordered, lkey))
    check_eq((rc, "chain" in out), (0, False), "an ordered chain: %r" % out)

    rc, out, path = check_config(ctx, cfg(misordered, lkey))
    check_eq(rc, 1, "misordered chain: exit status (%r)" % out)
    check(re.search(re.escape(path) + r":4:13: the server's certificate must come first in "
                    r"%s; it is certificate 2" % re.escape(misordered), out),
          "misordered chain message: %r" % out)
    check("does not match" not in out and "broken" not in out,
          "misleading messages beside it: %r" % out)
    check_eq(out.count(path + ":"), 1, "one message: %r" % out)
    # The leaf after its issuer: OpenSSL takes the first as the leaf, so the
    # key does not match it; a leaf, an unrelated certificate, its issuer:
    wrong = cat(ctx, "wrong.pem", lcert, good[0], icert)
    rc, out, path = check_config(ctx, cfg(wrong, lkey))
    check_eq(rc, 1, "chain with a stray certificate: exit status (%r)" % out)
    check(re.search(re.escape(path) + r":4:13: certificate chain of .*wrong\.pem is out of order: "
                    r"certificate 1 \(CN=chained leaf\) is followed by CN=good, but its issuer is "
                    r"certificate 3", out), "out-of-order message: %r" % out)

    rc, out, path = check_config(ctx, cfg("/nonexistent/cert.pem", good[1]))
    check_eq(rc, 1, "missing file: exit status")
    check(re.search(re.escape(path) + r":4:13: cannot load certificate '/nonexistent/cert.pem'",
                    out), "missing file message: %r" % out)

    os.chmod(good[1], 0o644)
    rc, out, path = check_config(ctx, cfg(*good))
    check_eq(rc, 0, "a world-readable key is a warning: %r" % out)
    check(re.search(re.escape(path) + r":5:12: warning: private key .* readable by every user",
                    out), "key mode warning: %r" % out)


# ---------------------------------------------------------------------------
# Reload
# ---------------------------------------------------------------------------


class Loop(threading.Thread):
    """New-connection HTTPS requests in a loop until stopped; counts failures."""

    def __init__(self, pki, port):
        super().__init__(daemon=True)
        self.pki, self.port = pki, port
        self.ok = self.failed = 0
        self.errors = []
        self.halt = threading.Event()

    def run(self):
        ctx = self.pki.client_context()
        while not self.halt.is_set():
            try:
                status, s = https_get(self.pki, self.port, ctx=ctx)
                s.close()
                if status == 200:
                    self.ok += 1
                else:
                    self.failed += 1
                    self.errors.append("status %d" % status)
            except (OSError, ssl.SSLError) as e:
                self.failed += 1
                self.errors.append(repr(e))


def served_serial(pki, port):
    s = handshake(pki, port)
    try:
        return s.getpeercert()["serialNumber"]
    finally:
        s.close()


@test(timeout=60)
def reload_picks_up_renewed_certificate(ctx):
    pki = TestPKI(ctx)
    cert, key = pki.issue("live")
    port = free_port()
    srv, path = start(ctx, base(port, cert, key, workers=2), port)
    first = served_serial(pki, port)
    client = pki.client_context()
    status, s = https_get(pki, port, ctx=client)
    saved = s.session
    s.close()
    loop = Loop(pki, port)
    loop.start()
    try:
        time.sleep(0.3)
        # Renewal as certbot does it: new files, same names.
        ncert, nkey = pki.issue("renewed")
        shutil.copy(ncert, cert + ".new")
        shutil.copy(nkey, key + ".new")
        os.rename(key + ".new", key)
        os.rename(cert + ".new", cert)
        srv.signal(signal.SIGHUP)
        check(wait_for(lambda: "generation 2 ready" in srv.stderr(), 15),
              "the reload never became ready")
        check(wait_for(lambda: served_serial(pki, port) != first, 10),
              "still serving the old certificate after the reload")
        time.sleep(0.3)
    finally:
        loop.halt.set()
        loop.join(10)
    check(loop.ok > 10, "too few requests in the loop: %d" % loop.ok)
    check_eq(loop.failed, 0, "failed requests across the reload (%s)" % loop.errors[:3])
    renewed = served_serial(pki, port)
    # A session is bound to the certificates it was made with: after the
    # renewal the client gets a full handshake (and sees the new one).
    status, s = https_get(pki, port, ctx=client, session=saved)
    check_eq((status, s.session_reused), (200, False), "a session of the old certificate")
    check_eq(s.getpeercert()["serialNumber"], renewed, "certificate of the new handshake")
    s.close()

    # A broken certificate: the reload fails where the listen entry says,
    # and generation 2 keeps serving the renewed one.
    with open(cert, "w") as f:
        f.write("-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n")
    srv.signal(signal.SIGHUP)
    check(wait_for(lambda: "reload failed" in srv.stderr(), 10), "no 'reload failed' logged")
    err = srv.stderr()
    check(re.search(r"error: %s:4:13: cannot load certificate '%s'" %
                    (re.escape(path), re.escape(cert)), err),
          "the failure is not logged with FILE:LINE:COLUMN: %r" % err[-800:])
    check("pagid: " + path not in err, "a 'pagid: ' prefix glued before the position")
    check(re.search(r"reload failed; generation 2 keeps serving", err), "no 'keeps serving' line")
    check_eq(served_serial(pki, port), renewed, "certificate served after the failed reload")
    status, s = https_get(pki, port)
    s.close()
    check_eq(status, 200, "request after the failed reload")


@test(timeout=30)
def broken_certificate_at_start_names_the_entry(ctx):
    pki = TestPKI(ctx)
    cert, _ = pki.issue("a")
    _, other_key = pki.issue("b")
    port = free_port()
    path = write_config(ctx, base(port, cert, other_key, workers=1))
    for extra in ([], ["-w", "0"]):
        srv = lib.Server(ctx, ["-c", path] + extra, port, name="pagid%d" % len(ctx.servers))
        ctx.servers.append(srv)
        check(srv.wait_exit(10), "pagid started with a key that does not match")
        err = srv.stderr()
        check_eq(srv.returncode, 3, "exit status (%r)" % err)
        check(re.search(r"^%s:5:12: private key .* does not match" % re.escape(path), err, re.M),
              "no FILE:LINE:COLUMN line at the start of the message: %r" % err)


@test(timeout=30)
def start_logs_expiring_certificate(ctx):
    pki = TestPKI(ctx)
    cert, key = pki.issue("soon", days=3)
    port = free_port()
    srv, path = start(ctx, base(port, cert, key), port)
    check(re.search(r"warn: %s:4:13: certificate .*soon\.pem \(CN=soon\) expires on .* "
                    r"\(in [23] days\)" % re.escape(path), srv.stderr()),
          "no expiry warning in the log: %r" % srv.stderr()[-600:])
    status, s = https_get(pki, port)
    s.close()
    check_eq(status, 200, "served anyway")


# ---------------------------------------------------------------------------
# Keys and privileges
# ---------------------------------------------------------------------------


@test(timeout=40)
def root_only_key_with_user_nobody(ctx):
    if os.geteuid() != 0:
        raise lib.Skip("needs root")
    import pwd
    pki = TestPKI(ctx)
    cert, key = pki.issue("srv")
    os.chown(key, 0, 0)
    os.chmod(key, 0o600)
    port = free_port()
    srv, _ = start(ctx, base(port, cert, key, workers=2, tail="user: nobody\n"), port,
                   default_user=False)
    nobody = pwd.getpwnam("nobody").pw_uid
    workers = srv.workers()
    check(len(workers) == 2, "workers: %r" % workers)
    for w in workers:
        with open("/proc/%d/status" % w) as f:
            uid = [ln.split()[1] for ln in f if ln.startswith("Uid:")][0]
        check_eq(int(uid), nobody, "worker %d uid" % w)
    for _ in range(6):
        status, s = https_get(pki, port)
        s.close()
        check_eq(status, 200, "HTTPS request with a root-only key")
    # The key was read once by the master: no copy of it anywhere the
    # workers could reach (their open files hold no key).
    for w in workers:
        for fd in os.listdir("/proc/%d/fd" % w):
            try:
                target = os.readlink("/proc/%d/fd/%s" % (w, fd))
            except OSError:
                continue
            check(not target.endswith(".key"), "worker %d has the key open: %s" % (w, target))


# ---------------------------------------------------------------------------
# Session resumption across workers
# ---------------------------------------------------------------------------


def resumption_across_workers(ctx, extra, tail=""):
    # Its tests are serial: the two workers write their access log lines in
    # the order they end their connections, which load can swap.
    pki = TestPKI(ctx)
    cert, key = pki.issue("srv")
    port = free_port()
    alog = os.path.join(ctx.tmpdir, "access-%d.log" % len(ctx.servers))
    srv, _ = start(ctx, base(port, cert, key, extra, workers=2,
                             tail="access_log: {path: %s, format: json}\n%s" % (alog, tail)),
                   port)
    check(wait_for(lambda: len(srv.workers()) == 2, 5), "two workers")
    if "preload: true" in tail:
        check(srv.zygotes(), "no zygote with preload: true")
    client = pki.client_context()
    status, s = https_get(pki, port, ctx=client)
    check_eq(status, 200, "first request")
    session = s.session
    s.close()
    reused = tries = 0
    # Until both workers resumed sessions they did not make (bounded).
    pids = set()
    while tries < 300 and (tries < 40 or len(pids) < 2):
        status, s = https_get(pki, port, ctx=client, session=session)
        check_eq(status, 200, "request %d" % tries)
        reused += s.session_reused
        s.close()
        tries += 1
        if tries % 20 == 0:
            pids = set()
            with open(alog) as f:
                for line in f:
                    pids.add(json.loads(line)["pid"])
    check_eq(len(pids), 2, "workers that served the resumed connections")
    check_eq(reused, tries, "resumed handshakes with one saved session")
    # The access log says which handshakes resumed: all but the first.
    want = [False] + [True] * tries
    check(wait_for(lambda: len(open(alog).readlines()) == len(want), 5), "access log lines")
    with open(alog) as f:
        check_eq([json.loads(line)["tls_session_reused"] for line in f], want,
                 "tls_session_reused in the access log")
    return reused


@test(timeout=60, serial=True)
def session_resumes_across_workers(ctx):
    resumption_across_workers(ctx, "")


@test(timeout=60, serial=True)
def session_resumes_with_ticket_key_files(ctx):
    k80 = os.path.join(ctx.tmpdir, "ticket80.key")
    k48 = os.path.join(ctx.tmpdir, "ticket48.key")
    with open(k80, "wb") as f:
        f.write(os.urandom(80))
    with open(k48, "wb") as f:
        f.write(os.urandom(48))
    resumption_across_workers(ctx, "      session_ticket_key: [%s, %s]\n" % (k80, k48))
    resumption_across_workers(ctx, "      session_ticket_key: %s\n" % k48)


@test(timeout=60, serial=True)
def session_resumes_across_workers_tls12(ctx):
    # TLS 1.2 tickets (RFC 5077) take the same keys.
    resumption_across_workers(ctx, "      protocols: [TLSv1.2]\n")


@test(timeout=60, serial=True)
def session_resumes_across_preloaded_workers(ctx):
    # The zygote forks the workers: they still share the master's secret.
    resumption_across_workers(ctx, "", tail="preload: true\n")


@test(timeout=40)
def session_tickets_off(ctx):
    pki = TestPKI(ctx)
    cert, key = pki.issue("srv")
    port = free_port()
    start(ctx, base(port, cert, key, "      session_tickets: false\n", workers=1), port)
    client = pki.client_context()
    status, s = https_get(pki, port, ctx=client)
    session = s.session
    s.close()
    for _ in range(5):
        status, s = https_get(pki, port, ctx=client, session=session)
        check_eq((status, s.session_reused), (200, False), "resumed with session_tickets: false")
        s.close()


# ---------------------------------------------------------------------------
# Command line and -T
# ---------------------------------------------------------------------------


@test(timeout=30)
def cli_https_listener(ctx):
    pki = TestPKI(ctx)
    cert, key = pki.issue("srv")
    port, plain = free_port(), free_port()
    srv = lib.Server(ctx, ["-w", "1", "-a", "hello", "-l", "https://127.0.0.1:%d" % port,
                           "-l", "127.0.0.1:%d" % plain, "--cert", cert, "--key", key], port)
    ctx.servers.append(srv)
    srv.wait_ready()
    status, s = https_get(pki, port)
    check_eq((status, s.version()), (200, "TLSv1.3"), "https:// listener")
    s.close()
    check_eq(lib.request(plain, "GET", "/").status, 200, "the cleartext listener beside it")

    # Single process (-w 0): the same context, built in main.
    single = free_port()
    srv0 = lib.Server(ctx, ["-w", "0", "-a", "hello", "-l", "https://127.0.0.1:%d" % single,
                            "--cert", cert, "--key", key], single, name="single")
    ctx.servers.append(srv0)
    srv0.wait_ready()
    status, s = https_get(pki, single)
    check_eq(status, 200, "https:// with -w 0")
    s.close()

    rc, out = run_pagid(ctx, "-t", "-l", "https://127.0.0.1:%d" % port)
    check_eq(rc, 1, "https without --cert: exit status")
    check("needs --cert FILE and --key FILE" in out, "message: %r" % out)
    rc, out = run_pagid(ctx, "-t", "-l", "127.0.0.1:%d" % port, "--cert", cert, "--key", key)
    check_eq(rc, 1, "--cert without an https listener: exit status")
    check("--cert and --key are for -l https://" in out, "message: %r" % out)
    rc, out = run_pagid(ctx, "-t", "-l", "https://127.0.0.1:%d" % port, "--cert", cert,
                        "--key", pki.issue("x")[1])
    check_eq(rc, 1, "mismatched --key: exit status")
    check("does not match certificate" in out, "message: %r" % out)
    rc, out = run_pagid(ctx, "--help")
    check("--cert FILE" in out and "https://HOST:PORT" in out, "--help: %r" % out)


@test(timeout=30)
def dump_config_shows_tls(ctx):
    pki = TestPKI(ctx)
    cert, key = pki.issue("srv")
    wild = pki.issue("wild", sans=["DNS:*.example.com"])
    k80 = os.path.join(ctx.tmpdir, "t.key")
    with open(k80, "wb") as f:
        f.write(os.urandom(80))
    port = free_port()
    cfg = base(port, cert, key, "      certificates: [{cert: %s, key: %s}]\n"
               "      protocols: [TLSv1.3]\n      client_auth: {ca: %s, mode: optional}\n"
               "      session_ticket_key: %s\n" % (wild + (pki.ca_cert, k80)))
    path = write_config(ctx, cfg)
    rc, out = run_pagid(ctx, "-T", "-c", path)
    check_eq(rc, 0, "pagid -T: %r" % out)
    for want in ("tls:", "cert: " + cert, "key: " + key, "certificates:", "cert: " + wild[0],
                 "protocols: [TLSv1.3]", "ciphers: ECDHE-", "ciphersuites: TLS_AES_",
                 "client_auth:", "ca: " + pki.ca_cert, "mode: optional", "session_tickets: true",
                 "- " + k80):
        check(want in out, "-T lacks %r: %s" % (want, out))
    # The dump is a config that loads to the same thing.
    dumped = "\n".join(ln for ln in out.splitlines() if not ln.startswith("#"))
    dumped = dumped[:dumped.index("pagid: ")] if "pagid: " in dumped else dumped
    rc2, out2 = run_pagid(ctx, "-T", "-c", write_config(ctx, dumped + "\n", "dumped.yaml"))
    check_eq(rc2, 0, "the dump loads: %r" % out2)
    strip = lambda t: [ln for ln in t.splitlines() if not ln.startswith(("#", "pagid:"))]
    check_eq(strip(out2), strip(out), "the dump of the dump")


# ---------------------------------------------------------------------------
# Session resumption never skips a listener's client certificate checks
# ---------------------------------------------------------------------------


def try_resume(pki, port, client, saved):
    """A GET offering saved; (status or the TLS error's class name, reused)."""
    try:
        status, s = https_get(pki, port, ctx=client, session=saved)
    except (ssl.SSLError, OSError) as e:
        return type(e).__name__, False
    reused = s.session_reused
    s.close()
    return status, reused


def client_for(pki, version, cert=None, key=None):
    c = pki.client_context(cert, key)
    c.maximum_version = c.minimum_version = version
    return c


def reload_ok(srv):
    """SIGHUP and wait until the new generation serves."""
    n = len(re.findall(r"generation \d+ ready", srv.stderr()))
    srv.signal(signal.SIGHUP)
    check(wait_for(lambda: len(re.findall(r"generation \d+ ready", srv.stderr())) > n, 15),
          "the reload never became ready: %r" % srv.stderr()[-600:])
    time.sleep(0.3)


@test(timeout=90)
def resumption_respects_client_auth(ctx):
    pki = TestPKI(ctx)
    other = TestPKI(ctx, name="other", ca_name="untrusted CA")
    cert, key = pki.issue("srv")
    ccert, ckey = pki.issue("client", client=True)
    bad_cert, bad_key = other.issue("stranger", client=True)
    ca = os.path.join(ctx.tmpdir, "clients-ca.pem")
    shutil.copy(pki.ca_cert, ca)
    open_port, opt_port, req_port = free_port(), free_port(), free_port()
    text = ("listen:\n" + tls_listen(open_port, cert, key) +
            tls_listen(opt_port, cert, key, "      client_auth: {ca: %s, mode: optional}\n" % ca) +
            tls_listen(req_port, cert, key, "      client_auth: {ca: %s, mode: require}\n" % ca) +
            "app: hello\nworkers: 1\n")
    srv, _ = start(ctx, text, req_port)
    for version in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
        # 1. A session of a listener without client_auth, offered to `require`.
        anon = client_for(pki, version)
        status, s = https_get(pki, open_port, ctx=anon)
        check_eq(status, 200, "%s: no client_auth listener" % version)
        saved = s.session
        s.close()
        status, reused = try_resume(pki, open_port, anon, saved)
        check_eq((status, reused), (200, True), "%s: resumes where it was made" % version)
        status, reused = try_resume(pki, req_port, anon, saved)
        check(status != 200 and not reused,
              "%s: a session without a certificate got into `require`: %r" % (version, status))

        # 2. A session with an untrusted certificate on `optional`, offered to `require`.
        stranger = client_for(pki, version, bad_cert, bad_key)
        status, s = https_get(pki, opt_port, ctx=stranger)
        check_eq(status, 200, "%s: optional keeps an unverified client" % version)
        saved = s.session
        s.close()
        status, reused = try_resume(pki, req_port, stranger, saved)
        check(status != 200 and not reused,
              "%s: an unverified session got into `require`: %r" % (version, status))

    # 3. The client CA changes: sessions verified by the old one are gone.
    for version in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
        shutil.copy(pki.ca_cert, ca)
        reload_ok(srv)
        trusted = client_for(pki, version, ccert, ckey)
        status, s = https_get(pki, req_port, ctx=trusted)
        check_eq(status, 200, "%s: trusted client on `require`" % version)
        saved = s.session
        s.close()
        # An unchanged listener across a reload: the session still resumes.
        reload_ok(srv)
        check_eq(try_resume(pki, req_port, trusted, saved), (200, True),
                 "%s: resumption across a reload that changed nothing" % version)
        shutil.copy(other.ca_cert, ca)
        reload_ok(srv)
        status, reused = try_resume(pki, req_port, trusted, saved)
        check(status != 200 and not reused,
              "%s: a session of the replaced CA resumed: %r" % (version, status))


@test(timeout=60)
def invalid_dates_stop_start_and_reload(ctx):
    pki = TestPKI(ctx)
    good = pki.issue("good")
    expired = pki.issue("expired", start_offset_days=-40, days=10)
    future = pki.issue("future", start_offset_days=3, days=30)
    port = free_port()
    for (cert, key), what in ((expired, r"expired on \d{4}-"), (future, "is not valid before")):
        path = write_config(ctx, base(port, cert, key), "dates-%d.yaml" % len(ctx.servers))
        srv = lib.Server(ctx, ["-c", path], port, name="pagid%d" % len(ctx.servers))
        ctx.servers.append(srv)
        check(srv.wait_exit(10), "pagid started with a certificate %s" % what)
        err = srv.stderr()
        check_eq(srv.returncode, 3, "exit status (%r)" % err)
        check(re.search(r"%s:4:13: certificate .* %s" % (re.escape(path), what), err),
              "no FILE:LINE:COLUMN message: %r" % err)

    cert = os.path.join(ctx.tmpdir, "live.pem")
    key = os.path.join(ctx.tmpdir, "live.key")
    shutil.copy(good[0], cert)
    shutil.copy(good[1], key)
    srv, path = start(ctx, base(port, cert, key), port)
    first = served_serial(pki, port)
    for bad in (expired, future):
        shutil.copy(bad[0], cert)
        shutil.copy(bad[1], key)
        n = srv.stderr().count("reload failed")
        srv.signal(signal.SIGHUP)
        check(wait_for(lambda: srv.stderr().count("reload failed") > n, 10),
              "a reload with an invalid certificate did not fail: %r" % srv.stderr()[-600:])
        check(re.search(r"error: %s:4:13: certificate .*live\.pem" % re.escape(path),
                        srv.stderr()), "no FILE:LINE:COLUMN in the log: %r" % srv.stderr()[-600:])
        check_eq(served_serial(pki, port), first, "the old generation keeps serving")


@test(timeout=30)
def key_errors_point_at_key(ctx):
    pki = TestPKI(ctx)
    cert, key = pki.issue("srv")
    _, other_key = pki.issue("other")
    enc = os.path.join(pki.dir, "enc.key")
    pki._openssl("pkey", "-in", key, "-out", enc, "-aes256", "-passout", "pass:secret")
    port = free_port()
    for k, msg in (("/nonexistent/srv.key", "cannot load private key '/nonexistent/srv.key'"),
                   (enc, "private key '%s' is encrypted" % enc),
                   (other_key, "private key '%s' does not match" % other_key)):
        # cert at line 4 col 13, key at line 5 col 12 (tls_listen's layout)
        rc, out, path = check_config(ctx, "listen:\n" + tls_listen(port, cert, k) + "app: hello\n")
        check_eq(rc, 1, "%s: exit status (%r)" % (k, out))
        check(re.search(r"^%s:5:12: %s" % (re.escape(path), re.escape(msg)), out, re.M),
              "not at the key's position: %r" % out)
        check(":4:13:" not in out, "reported at the cert's position too: %r" % out)


@test(timeout=40)
def file_errors_say_why(ctx):
    pki = TestPKI(ctx)
    cert, key = pki.issue("srv")
    csr = os.path.join(pki.dir, "srv.csr")
    port = free_port()

    def run(c, k, extra=""):
        rc, out, path = check_config(ctx, "listen:\n" + tls_listen(port, c, k, extra) +
                                     "app: hello\n")
        check_eq(rc, 1, "exit status (%r)" % out)
        check("system lib" not in out and "PEM lib" not in out and "unsupported" not in out,
              "OpenSSL's reason instead of ours: %r" % out)
        return out

    out = run("/nonexistent/srv.pem", key)
    check("cannot load certificate '/nonexistent/srv.pem': No such file or directory" in out,
          "missing certificate: %r" % out)
    out = run(cert, key, "      client_auth: {ca: /nonexistent/ca.pem, mode: require}\n")
    check("cannot load client CA '/nonexistent/ca.pem': No such file or directory" in out,
          "missing CA: %r" % out)
    if os.path.exists(csr):
        out = run(csr, key)
        check("cannot load certificate '%s': no CERTIFICATE block in %s" % (csr, csr) in out,
              "a CSR as the certificate: %r" % out)
    out = run(cert, cert)
    check("cannot load private key '%s': no PRIVATE KEY block in %s" % (cert, cert) in out,
          "a certificate as the key: %r" % out)

    if os.geteuid() != 0:
        return
    # Not root: a root-only key cannot be read by this pagid -t.
    import pwd
    nobody = pwd.getpwnam("nobody")
    d = ctx.tmpdir
    while d not in ("/", "/tmp"):
        os.chmod(d, os.stat(d).st_mode | 0o711)
        d = os.path.dirname(d)
    os.chmod(pki.dir, 0o755)
    os.chmod(cert, 0o644)
    os.chown(key, 0, 0)
    os.chmod(key, 0o600)
    path = write_config(ctx, "listen:\n" + tls_listen(port, cert, key) + "app: hello\n",
                        "nobody.yaml")
    os.chmod(path, 0o644)
    if not os.access(ctx.pagid, os.X_OK):
        return

    def as_nobody():
        os.setgid(nobody.pw_gid)
        os.setgroups([])
        os.setuid(nobody.pw_uid)

    p = subprocess.run([ctx.pagid, "-t", "-c", path], stdin=subprocess.DEVNULL,
                       capture_output=True, cwd="/", timeout=15 * SLOW, preexec_fn=as_nobody)
    out = (p.stdout + p.stderr).decode("utf-8", "replace")
    if "cannot load private key" not in out and "Permission denied" in out:
        raise lib.Skip("nobody cannot read the test directory: %r" % out)
    check_eq(p.returncode, 1, "exit status as nobody (%r)" % out)
    check(re.search(r":5:12: cannot load private key '%s': Permission denied \(run pagid -t as "
                    r"the user that starts pagid" % re.escape(key), out),
          "unreadable key as nobody: %r" % out)


@test(timeout=30)
def check_reports_every_problem_once(ctx):
    pki = TestPKI(ctx)
    cert, key = pki.issue("srv")
    _, other_key = pki.issue("other")
    third, _ = pki.issue("third", sans=["DNS:third.test"])
    short = os.path.join(ctx.tmpdir, "short.tkey")
    with open(short, "wb") as f:
        f.write(b"x" * 10)
    port = free_port()
    # A bad ticket key file, a missing certificate and a mismatched key:
    # three errors, all reported by one run and counted as three.
    text = ("listen:\n" + tls_listen(port, cert, key,
                                     "      session_ticket_key: %s\n"
                                     "      certificates:\n"
                                     "        - {cert: /nonexistent/b.pem, key: %s}\n"
                                     "        - {cert: %s, key: %s}\n"
                                     % (short, key, third, other_key)) + "app: hello\n")
    rc, out, path = check_config(ctx, text)
    check_eq(rc, 1, "exit status (%r)" % out)
    check("must be 48 or 80 bytes" in out, "ticket key message: %r" % out)
    check("/nonexistent/b.pem" in out, "the certificates were not checked: %r" % out)
    check("does not match" in out, "the mismatched key was not reported: %r" % out)
    check("is invalid (3 errors)" in out, "error count: %r" % out)

    # An unknown key at tls: level does not hide the others' problems.
    text = ("listen:\n" + tls_listen(port, cert, key,
                                     "      protocls: [TLSv1.3]\n"
                                     "      client_auth: {ca: %s, mdoe: require}\n"
                                     "      certificates:\n"
                                     "        - {cert: %s, kye: %s}\n"
                                     "      session_tickets: maybe\n" % (pki.ca_cert, cert, key))
            + "app: hello\n")
    rc, out, path = check_config(ctx, text)
    check_eq(rc, 1, "exit status (%r)" % out)
    for what in ("protocls", "mdoe", "kye", "session_tickets"):
        check(re.search(r"%s:\d+:\d+: .*%s" % (re.escape(path), what), out),
              "%s not reported: %r" % (what, out))


@test(timeout=40)
def rsa_and_ecdsa_for_the_same_names(ctx):
    pki = TestPKI(ctx)
    names = ["DNS:localhost", "DNS:both.test", "IP:127.0.0.1"]
    ec = pki.issue("ec", cn="ecdsa cert", sans=names)
    rsa = pki.issue("rsa", cn="rsa cert", sans=names, key_type="rsa")
    other = pki.issue("other", cn="other cert", sans=["DNS:other.test"])
    port = free_port()
    # Twice: as default + SNI entry, and as two SNI entries after another.
    for dflt, more in ((ec, [rsa, other]), (other, [rsa, ec])):
        extra = "      certificates:\n" + "".join(
            "        - {cert: %s, key: %s}\n" % c for c in more)
        srv, _ = start(ctx, base(port, dflt[0], dflt[1], extra), port)
        for name in ("both.test", "localhost"):
            if name == "localhost" and dflt is other:
                continue
            for cipher, want in (("ECDHE-ECDSA-AES128-GCM-SHA256", "ecdsa cert"),
                                 ("ECDHE-RSA-AES128-GCM-SHA256", "rsa cert")):
                c = pki.client_context()
                c.maximum_version = ssl.TLSVersion.TLSv1_2
                c.set_ciphers(cipher)
                s = handshake(pki, port, server_hostname=name, ctx=c)
                try:
                    check_eq(peer_cn(s), want, "SNI %s with %s" % (name, cipher))
                finally:
                    s.close()
        s = handshake(pki, port, server_hostname="other.test")
        check_eq(peer_cn(s), "other cert", "the other name")
        s.close()
        srv.stop()

    # The same names and the same key type: the second could never be served.
    ec2 = pki.issue("ec2", cn="ecdsa again", sans=names)
    rc, out, path = check_config(ctx, base(port, ec[0], ec[1],
                                           "      certificates:\n        - {cert: %s, key: %s}\n"
                                           % ec2))
    check_eq(rc, 1, "exit status (%r)" % out)
    check(re.search(r"%s:7:18: certificate '%s' has the same names and key type"
                    % (re.escape(path), re.escape(ec2[0])), out), "message: %r" % out)


@test(timeout=30)
def ciphers_that_cannot_serve_the_key(ctx):
    pki = TestPKI(ctx)
    cert, key = pki.issue("rsa", key_type="rsa")
    port = free_port()

    def cfg(extra):
        return "listen:\n" + tls_listen(port, cert, key, extra) + "app: hello\n"

    ecdsa_only = "      ciphers: ECDHE-ECDSA-AES128-GCM-SHA256\n"
    rc, out, path = check_config(ctx, cfg(ecdsa_only + "      protocols: [TLSv1.2]\n"))
    check_eq(rc, 1, "exit status (%r)" % out)
    check(re.search(r"%s:4:13: no cipher of the TLS 1.2 list can be used with certificate '%s' "
                    r"\(an RSA key\)" % (re.escape(path), re.escape(cert)), out),
          "message: %r" % out)
    # TLS 1.3 clients can still use it; the default list has RSA ciphers.
    for extra in (ecdsa_only, "      protocols: [TLSv1.2]\n"):
        rc, out, path = check_config(ctx, cfg(extra))
        check_eq(rc, 0, "%r: %r" % (extra, out))
