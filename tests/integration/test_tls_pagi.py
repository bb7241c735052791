"""The PAGI tls extension (Tls.pod) over real TLS connections: every field of
extensions->{tls} as a C app (pagi_scope_tls, apps/tlsapp.c) and a Perl app
(perl/tls_info.pl) see it, checked against what the Python client itself
negotiated and sent: the server's certificate, the client's chain (leaf
first) and RFC 4514 subject, the verify error under client_auth optional,
TLS 1.3 and 1.2, the cipher suite's IANA number. Absent on cleartext; on
wss and SSE over https too; still readable after the client left."""

import base64
import json
import os
import ssl
import subprocess

import lib
from lib import (Conn, TestFailure, TestPKI, build_request, check, check_eq, test,
                 tls_listen, wait_for)

HERE = os.path.dirname(os.path.abspath(__file__))


def tlsapp(ctx):
    """apps/tlsapp.c compiled once per session."""
    return lib.app_so(ctx, "tlsapp")


_has_perl = {}


def perl_app(ctx, name="tls_info"):
    if ctx.pagid not in _has_perl:
        p = subprocess.run([ctx.pagid, "-t", "-a", os.path.join(HERE, "perl", "hello.pl"),
                            "-l", "127.0.0.1:1"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=30)
        _has_perl[ctx.pagid] = b"built with the Perl host" not in p.stdout
    if not _has_perl[ctx.pagid]:
        raise lib.Skip("pagid was built without the Perl host")
    return os.path.join(HERE, "perl", name + ".pl")


_cipher_ids = {}


def cipher_id(name):
    """IANA number of an OpenSSL cipher name, from `openssl ciphers -V`."""
    if not _cipher_ids:
        out = subprocess.run(["openssl", "ciphers", "-V", "ALL:@SECLEVEL=0"],
                             stdout=subprocess.PIPE, timeout=30).stdout.decode()
        for line in out.splitlines():
            f = line.split()
            if len(f) >= 3 and f[1] == "-":
                hi, lo = f[0].split(",")
                _cipher_ids[f[2]] = (int(hi, 16) << 8) | int(lo, 16)
    check(name in _cipher_ids, "cipher %r not in `openssl ciphers -V`" % name)
    return _cipher_ids[name]


def pem_of(path):
    with open(path) as f:
        return f.read()


class Setup:
    """A CA, the server's certificate, alice's client certificate, and a
    pagid with a TLS listener (client_auth mode) and a cleartext one."""

    def __init__(self, ctx, app, mode=None, workers=1):
        self.pki = TestPKI(ctx)
        self.cert, self.key = self.pki.issue("server")
        self.ccert, self.ckey = self.pki.issue("alice", client=True)
        self.port, self.plain = lib.free_port(), lib.free_port()
        extra = ("      client_auth: {ca: %s, mode: %s}\n" % (self.pki.ca_cert, mode)
                 if mode else "")
        conf = ("listen:\n" + tls_listen(self.port, self.cert, self.key, extra)
                + "  - address: 127.0.0.1:%d\n" % self.plain)
        self.srv = ctx.start(app, workers=workers, listen=False, config=conf, port=self.port)

    def client(self, cert=None, key=None, max_version=None):
        c = self.pki.client_context(cert, key)
        if max_version:
            c.maximum_version = max_version
        return c


class Seen:
    """What the client's side of a TLS connection negotiated and received."""

    def __init__(self, sock):
        self.cipher = sock.cipher()[0]
        self.version = sock.version()
        self.peer_der = sock.getpeercert(binary_form=True)


def ask(port, tls=None, path="/"):
    """GET path; returns (the app's JSON, Seen or None on cleartext)."""
    c = Conn(port, tls=tls)
    try:
        c.send(build_request("GET", path, {"Host": "localhost", "Connection": "close"}))
        r = c.read_response()
        check_eq(r.status, 200, "status of %s" % path)
        return json.loads(r.body.decode()), (Seen(c.sock) if tls else None)
    finally:
        c.close()


def check_negotiated(t, seen, what):
    """tls_version and cipher_suite are what the client negotiated; the
    server's certificate is the one the client received."""
    want_version = {"TLSv1.3": 0x0304, "TLSv1.2": 0x0303}[seen.version]
    check_eq(t["tls_version"], want_version, "%s: tls_version (client saw %s)"
             % (what, seen.version))
    check_eq(t["cipher_suite"], cipher_id(seen.cipher), "%s: cipher_suite (client saw %s)"
             % (what, seen.cipher))
    check_eq(ssl.PEM_cert_to_DER_cert(t["server_cert"]), seen.peer_der,
             "%s: server_cert is the certificate the client received" % what)


def unverified(err):
    """OpenSSL's words for a leaf whose issuer is unknown (the client, not
    trusting that CA either, sends the leaf alone)."""
    return err in ("unable to verify the first certificate",
                   "unable to get local issuer certificate")


def check_no_client_cert(t, what):
    check_eq((t["client_cert_chain"], t["client_cert_name"], t["client_cert_error"]),
             ([], None, None), "%s: chain, name, error without a client certificate" % what)


@test(timeout=120)
def c_app_sees_every_field_with_mtls_required(ctx):
    s = Setup(ctx, tlsapp(ctx), mode="require")
    j, sock = ask(s.port, s.client(s.ccert, s.ckey))
    check_eq((j["scheme"], j["has_tls"]), ("https", 1), "scheme, has_extension(tls)")
    t = j["tls"]
    check(t is not None, "no tls info on a TLS connection: %r" % j)
    check_negotiated(t, sock, "TLS 1.3")
    check_eq(t["server_cert"], pem_of(s.cert), "server_cert is the served certificate's PEM")
    # OpenSSL's client completes a lone leaf with the CA from its trust store.
    check_eq(t["client_cert_chain"], [pem_of(s.ccert), pem_of(s.pki.ca_cert)],
             "client_cert_chain (alice's leaf, then the CA the client added)")
    check_eq(t["client_cert_name"], "CN=alice", "client_cert_name")
    check_eq(t["client_cert_error"], None, "client_cert_error of a verified certificate")
    check_eq(t["same_on_second_ask"], 1, "pagi_scope_tls returns the same facts twice")
    # Without a certificate the handshake is refused: no response at all.
    try:
        j, _ = ask(s.port, s.client())
        raise TestFailure("a client without a certificate was served: %r" % j)
    except (ssl.SSLError, lib.Closed, ConnectionResetError, BrokenPipeError) as e:
        ctx.note("no certificate, require: %s" % e)
    # The cleartext listener of the same server: no extension.
    j, _ = ask(s.plain)
    check_eq(j, {"scheme": "http", "has_tls": 0, "tls": None}, "cleartext scope")


@test(timeout=120)
def c_app_chain_is_leaf_first_and_name_is_rfc4514(ctx):
    s = Setup(ctx, tlsapp(ctx), mode="optional")
    # The client sends its leaf and, after it, a certificate that plays no
    # part in verifying it: the chain is what was sent, in that order, not
    # the chain the server verified.
    other = TestPKI(ctx, name="other", ca_name="unrelated CA")
    bundle = os.path.join(ctx.tmpdir, "alice-chain.pem")
    with open(bundle, "w") as f:
        f.write(pem_of(s.ccert) + pem_of(other.ca_cert))
    j, sock = ask(s.port, s.client(bundle, s.ckey))
    t = j["tls"]
    check_eq(t["client_cert_chain"], [pem_of(s.ccert), pem_of(other.ca_cert)],
             "client_cert_chain: leaf, then what followed it")
    check_eq((t["client_cert_name"], t["client_cert_error"]), ("CN=alice", None),
             "name and error with a chain")
    # A subject of several RDNs, a comma to escape and UTF-8: RFC 4514 puts
    # the most specific first and lets UTF-8 stand.
    key = os.path.join(ctx.tmpdir, "bob.key")
    csr = os.path.join(ctx.tmpdir, "bob.csr")
    crt = os.path.join(ctx.tmpdir, "bob.pem")
    ext = os.path.join(ctx.tmpdir, "bob.ext")
    with open(ext, "w") as f:
        f.write("basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n")
    for args in (["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                  "-keyout", key, "-out", csr, "-utf8",
                  "-subj", "/C=FR/O=Acme, Inc./OU=R\\+D/CN=Bob Müller"],
                 ["x509", "-req", "-in", csr, "-CA", s.pki.ca_cert, "-CAkey", s.pki.ca_key,
                  "-set_serial", "77", "-extfile", ext, "-days", "2", "-out", crt]):
        p = subprocess.run(["openssl"] + args, capture_output=True, timeout=30)
        check_eq(p.returncode, 0, "openssl %s: %s" % (args[0], p.stderr.decode()))
    j, _ = ask(s.port, s.client(crt, key))
    check_eq(j["tls"]["client_cert_name"], "CN=Bob Müller,OU=R\\+D,O=Acme\\, Inc.,C=FR",
             "RFC 4514 subject")


@test(timeout=120)
def c_app_optional_client_auth(ctx):
    s = Setup(ctx, tlsapp(ctx), mode="optional")
    j, sock = ask(s.port, s.client())
    check_negotiated(j["tls"], sock, "optional, no certificate")
    check_no_client_cert(j["tls"], "optional")
    # A certificate from a CA the server does not trust: served, with the reason.
    other = TestPKI(ctx, name="other", ca_name="someone else's CA")
    mcert, mkey = other.issue("mallory", client=True)
    j, sock = ask(s.port, s.client(mcert, mkey))
    t = j["tls"]
    check_eq(t["client_cert_chain"], [pem_of(mcert)], "the untrusted certificate, sent alone")
    check_eq(t["client_cert_name"], "CN=mallory", "its name")
    check(unverified(t["client_cert_error"]),
          "client_cert_error of an unknown issuer: %r" % t["client_cert_error"])
    ctx.note("untrusted CA: %s" % t["client_cert_error"])
    # An expired certificate from the trusted CA.
    ecert, ekey = s.pki.issue("old", client=True, days=1, start_offset_days=-3)
    j, _ = ask(s.port, s.client(ecert, ekey))
    check_eq(j["tls"]["client_cert_error"], "certificate has expired", "expired certificate")
    # And the trusted one verifies.
    j, _ = ask(s.port, s.client(s.ccert, s.ckey))
    check_eq((j["tls"]["client_cert_name"], j["tls"]["client_cert_error"]), ("CN=alice", None),
             "alice under optional")


@test(timeout=120)
def c_app_no_client_auth_and_tls12(ctx):
    s = Setup(ctx, tlsapp(ctx))
    # client_auth none: a client certificate is not even asked for.
    j, sock = ask(s.port, s.client(s.ccert, s.ckey))
    check_no_client_cert(j["tls"], "client_auth none")
    check_eq(j["tls"]["tls_version"], 0x0304, "default TLS version")
    check_negotiated(j["tls"], sock, "TLS 1.3")
    j, sock = ask(s.port, s.client(max_version=ssl.TLSVersion.TLSv1_2))
    check_eq(sock.version, "TLSv1.2", "the client's version")
    check_eq(j["tls"]["tls_version"], 0x0303, "tls_version of TLS 1.2")
    check_negotiated(j["tls"], sock, "TLS 1.2")
    check(j["tls"]["cipher_suite"] >> 8 == 0xC0 or j["tls"]["cipher_suite"] >> 8 == 0xCC,
          "a TLS 1.2 ECDHE suite: 0x%04x" % j["tls"]["cipher_suite"])


def ws_message(port, tls):
    """The first text message of a WebSocket session on /ws over tls."""
    c = Conn(port, tls=tls)
    try:
        key = base64.b64encode(os.urandom(16)).decode()
        c.send(build_request("GET", "/ws", {
            "Host": "localhost", "Upgrade": "websocket", "Connection": "Upgrade",
            "Sec-WebSocket-Key": key, "Sec-WebSocket-Version": "13"}))
        r = c.read_head()
        check_eq(r.status, 101, "WebSocket handshake")
        b0, b1 = c.read_exact(2)
        check_eq(b0, 0x81, "a final text frame")
        n = b1 & 0x7f
        if n == 126:
            n = int.from_bytes(c.read_exact(2), "big")
        elif n == 127:
            n = int.from_bytes(c.read_exact(8), "big")
        return json.loads(c.read_exact(n).decode()), (Seen(c.sock) if tls else None)
    finally:
        c.close()


def sse_event(port, tls):
    c = Conn(port, tls=tls)
    try:
        c.send(build_request("GET", "/sse", {"Host": "localhost", "Accept": "text/event-stream",
                                             "Connection": "close"}))
        raw = c.read_to_eof()
        for line in raw.split(b"\n"):
            if line.startswith(b"data: "):
                return json.loads(line[6:].decode()), (Seen(c.sock) if tls else None)
        raise TestFailure("no data: line in the SSE stream: %r" % raw[-300:])
    finally:
        c.close()


@test(timeout=120)
def c_app_wss_and_sse_over_https(ctx):
    s = Setup(ctx, tlsapp(ctx), mode="optional")
    j, sock = ws_message(s.port, s.client(s.ccert, s.ckey))
    check_eq((j["scheme"], j["has_tls"]), ("wss", 1), "websocket over TLS")
    check_negotiated(j["tls"], sock, "wss")
    check_eq(j["tls"]["client_cert_name"], "CN=alice", "wss: client_cert_name")
    j, _ = ws_message(s.plain, None)
    check_eq(j, {"scheme": "ws", "has_tls": 0, "tls": None}, "websocket over cleartext")
    j, sock = sse_event(s.port, s.client())
    check_eq((j["scheme"], j["has_tls"]), ("https", 1), "SSE over TLS")
    check_negotiated(j["tls"], sock, "sse")
    check_no_client_cert(j["tls"], "sse")
    j, _ = sse_event(s.plain, None)
    check_eq(j, {"scheme": "http", "has_tls": 0, "tls": None}, "SSE over cleartext")


@test(timeout=120)
def c_app_reads_the_facts_after_the_client_left(ctx):
    """The facts outlive the connection: the app first asks in its
    on_disconnect callback, after the session was freed."""
    s = Setup(ctx, tlsapp(ctx), mode="require")
    for rid in ("late1", "late2"):
        c = Conn(s.port, tls=s.client(s.ccert, s.ckey))
        c.send(build_request("GET", "/late?" + rid, {"Host": "localhost"}))
        cipher = cipher_id(Seen(c.sock).cipher)
        c.close()
        lines = wait_for(lambda: lib.app_events(ctx, rid), 10)
        check(lines, "no late line for %s" % rid)
        got = lines[0]
        for want in ("connected=0", "tls=1", "version=772", "cipher=%d" % cipher, "chain=2",
                     "name=CN=alice", "server_cert_len=%d" % len(pem_of(s.cert))):
            check(want in got, "%s: %r missing in %r" % (rid, want, got))


@test(timeout=120)
def perl_app_sees_the_extension(ctx):
    s = Setup(ctx, perl_app(ctx), mode="optional")
    j, sock = ask(s.port, s.client(s.ccert, s.ckey))
    check_eq((j["scheme"], j["exists"]), ("https", 1), "Perl: scheme, exists extensions->{tls}")
    t = j["tls"]
    check_eq(sorted(t), ["cipher_suite", "client_cert_chain", "client_cert_error",
                         "client_cert_name", "server_cert", "tls_version"], "the keys")
    check_negotiated(t, sock, "Perl")
    check_eq(t["server_cert"], pem_of(s.cert), "Perl: server_cert")
    check_eq(t["client_cert_chain"], [pem_of(s.ccert), pem_of(s.pki.ca_cert)],
             "Perl: client_cert_chain")
    check_eq((t["client_cert_name"], t["client_cert_error"]), ("CN=alice", None),
             "Perl: name, error")
    check_eq(j["defined"], {"client_cert_error": 0, "client_cert_name": 1}, "Perl: defined-ness")
    # No certificate: an empty array and undefs.
    j, sock = ask(s.port, s.client(max_version=ssl.TLSVersion.TLSv1_2))
    check_no_client_cert(j["tls"], "Perl, no certificate")
    check_eq(j["defined"], {"client_cert_error": 0, "client_cert_name": 0}, "Perl: undefs")
    check_negotiated(j["tls"], sock, "Perl, TLS 1.2")
    # An untrusted certificate: the connection stays, the error is a string.
    other = TestPKI(ctx, name="other")
    mcert, mkey = other.issue("mallory", client=True)
    j, _ = ask(s.port, s.client(mcert, mkey))
    check(unverified(j["tls"]["client_cert_error"]),
          "Perl: client_cert_error %r" % j["tls"]["client_cert_error"])
    # Cleartext: the key is absent, not undef.
    j, _ = ask(s.plain)
    check_eq((j["scheme"], j["exists"], j["tls"]), ("http", 0, None), "Perl: cleartext")
    # The same app's websocket scope over TLS.
    j, sock = ws_message(s.port, s.client())
    check_eq((j["scheme"], j["exists"]), ("wss", 1), "Perl: wss")
    check_negotiated(j["tls"], sock, "Perl wss")
