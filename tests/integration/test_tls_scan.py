"""What a TLS listener offers with the default settings, as a scanner sees
it: sslscan (the Debian package; dev.sh installs it, and without it these
tests fail rather than pass) against an ECDSA and an RSA listener: only
TLS 1.2 and 1.3, no cipher under 128 bits, nothing anonymous, NULL, export,
RC4, (3)DES or CBC with SHA-1, no renegotiation, no Heartbleed. OpenSSL 3
as Debian builds it cannot offer compression, so sslscan cannot test it:
compression is checked with ClientHellos of our own that offer DEFLATE."""

import os
import re
import shutil
import socket
import struct
import subprocess
import xml.etree.ElementTree as ET

import lib
from lib import SLOW, TestFailure, check, free_port, test


def sslscan(port):
    exe = shutil.which("sslscan")
    if exe is None:
        raise TestFailure("sslscan is not installed (Debian: apt-get install sslscan;"
                          " ./dev.sh installs it)")
    r = subprocess.run([exe, "--xml=-", "--no-colour", "--sni-name=localhost",
                        "127.0.0.1:%d" % port], capture_output=True, timeout=120 * SLOW)
    text = r.stdout.decode("utf-8", "replace")
    start = text.find("<?xml")
    if r.returncode != 0 or start < 0:
        raise TestFailure("sslscan failed (status %d): %s %s"
                          % (r.returncode, text[-500:], r.stderr.decode(errors="replace")[-500:]))
    return text[start:]


WEAK_CIPHER = re.compile(r"NULL|EXP|RC4|DES|ADH|AECDH|ANON|MD5|PSK|SRP|IDEA|SEED|"
                         r"-SHA$|^AES\d+-SHA|CBC", re.I)


def weaknesses(xml_text):
    """Everything in an sslscan XML report that the defaults must not offer,
    as a list of strings; raises TestFailure when the report is incomplete
    (a scan that did not really run must not look clean)."""
    root = ET.fromstring(xml_text)
    test_el = root.find("ssltest")
    check(test_el is not None, "no <ssltest> in sslscan's report")
    found = []
    protos = {(p.get("type"), p.get("version")): p.get("enabled")
              for p in test_el.findall("protocol")}
    for key in (("ssl", "2"), ("ssl", "3"), ("tls", "1.0"), ("tls", "1.1"),
                ("tls", "1.2"), ("tls", "1.3")):
        check(key in protos, "sslscan did not test %s %s: %r" % (key[0], key[1], protos))
    for key, enabled in sorted(protos.items()):
        if enabled == "1" and key not in (("tls", "1.2"), ("tls", "1.3")):
            found.append("protocol %s %s accepted" % key)
    reneg = test_el.find("renegotiation")
    check(reneg is not None, "sslscan did not test renegotiation")
    if reneg.get("supported") != "0":
        found.append("renegotiation supported (secure=%s)" % reneg.get("secure"))
    comp = test_el.find("compression")
    if comp is not None and comp.get("supported") != "0":
        found.append("compression supported")
    for hb in test_el.findall("heartbleed"):
        if hb.get("vulnerable") != "0":
            found.append("heartbleed on %s" % hb.get("sslversion"))
    ciphers = test_el.findall("cipher")
    check(ciphers, "sslscan found no cipher at all")
    for c in ciphers:
        name, bits = c.get("cipher"), int(c.get("bits") or 0)
        if bits < 128:
            found.append("%s %s: %d bits" % (c.get("sslversion"), name, bits))
        elif WEAK_CIPHER.search(name) or c.get("strength") in ("null", "anonymous", "weak",
                                                               "medium"):
            found.append("%s %s (%s)" % (c.get("sslversion"), name, c.get("strength")))
    return found


def scan_summary(xml_text):
    root = ET.fromstring(xml_text).find("ssltest")
    return ["%s %s%s" % (c.get("sslversion"), c.get("cipher"),
                         " (preferred)" if c.get("status") == "preferred" else "")
            for c in root.findall("cipher")]


# ---------------------------------------------------------------- compression

def client_hello(compression_methods, ciphers=(0xC02B, 0xC02F)):
    """A TLS 1.2 ClientHello record offering the given compression methods."""
    def ext(kind, body):
        return struct.pack("!HH", kind, len(body)) + body

    host = b"localhost"
    sni = struct.pack("!HBH", len(host) + 3, 0, len(host)) + host
    groups = struct.pack("!HHH", 4, 0x0017, 0x001D)
    sigalgs = struct.pack("!HHHH", 6, 0x0403, 0x0804, 0x0401)
    exts = (ext(0, sni) + ext(10, groups) + ext(11, b"\x01\x00") + ext(13, sigalgs) +
            ext(0xFF01, b"\x00"))
    body = (b"\x03\x03" + os.urandom(32) + b"\x00" +
            struct.pack("!H", 2 * len(ciphers)) + b"".join(struct.pack("!H", c) for c in ciphers) +
            bytes([len(compression_methods)]) + bytes(compression_methods) +
            struct.pack("!H", len(exts)) + exts)
    hs = b"\x01" + struct.pack("!I", len(body))[1:] + body
    return b"\x16\x03\x01" + struct.pack("!H", len(hs)) + hs


def first_answer(port, hello):
    """Send hello; returns ("server_hello", compression method) or ("alert",
    description) or ("closed", None)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10 * SLOW)
    try:
        s.sendall(hello)
        buf = b""
        while len(buf) < 5 or len(buf) < 5 + struct.unpack("!H", buf[3:5])[0]:
            try:
                got = s.recv(65536)
            except ConnectionResetError:
                got = b""
            if not got:
                return ("closed", None)
            buf += got
        ctype, length = buf[0], struct.unpack("!H", buf[3:5])[0]
        rec = buf[5:5 + length]
        if ctype == 21:
            return ("alert", rec[1])
        check(ctype == 22 and rec[0] == 2, "first record is not a ServerHello: %r" % buf[:16])
        p = 4 + 2 + 32
        p += 1 + rec[p]   # session id
        p += 2            # cipher suite
        return ("server_hello", rec[p])
    finally:
        s.close()


def start_two_listeners(ctx):
    pki = lib.TestPKI(ctx)
    ec = pki.issue("ec-server")
    rsa = pki.issue("rsa-server", key_type="rsa")
    ports = [free_port(), free_port()]
    config = "listen:\n" + lib.tls_listen(ports[0], *ec) + lib.tls_listen(ports[1], *rsa)
    ctx.start(app="hello", listen=False, port=ports[0], config=config)
    for p in ports[1:]:
        check(lib.wait_for(lambda: not lib.port_is_free(p), 5), "port %d not listening" % p)
    return pki, ports


@test(timeout=120)
def sslscan_finds_nothing_weak_by_default(ctx):
    _, ports = start_two_listeners(ctx)
    for kind, port in zip(("ECDSA", "RSA"), ports):
        report = sslscan(port)
        found = weaknesses(report)
        ctx.note("%s: %s" % (kind, "; ".join(scan_summary(report))))
        check(not found, "%s listener offers: %s" % (kind, "; ".join(found)))
        protos = {p.get("version") for p in ET.fromstring(report).find("ssltest")
                  .findall("protocol") if p.get("enabled") == "1"}
        check(protos == {"1.2", "1.3"}, "%s listener: protocols %r" % (kind, protos))


@test(timeout=30)
def weak_reports_are_recognised(ctx):
    # The check must be able to fail: a report as sslscan writes it for a
    # server with every protocol and cipher on (nginx at SECLEVEL=0).
    report = """<?xml version="1.0" encoding="UTF-8"?>
<document title="SSLScan Results" version="2.0.7"><ssltest host="h" port="1">
  <protocol type="ssl" version="2" enabled="0" /><protocol type="ssl" version="3" enabled="0" />
  <protocol type="tls" version="1.0" enabled="1" /><protocol type="tls" version="1.1" enabled="1" />
  <protocol type="tls" version="1.2" enabled="1" /><protocol type="tls" version="1.3" enabled="1" />
  <renegotiation supported="1" secure="1" />
  <cipher status="preferred" sslversion="TLSv1.3" bits="128" cipher="TLS_AES_128_GCM_SHA256" strength="acceptable" />
  <cipher status="accepted" sslversion="TLSv1.2" bits="256" cipher="ECDHE-ECDSA-AES256-SHA" strength="acceptable" />
  <cipher status="accepted" sslversion="TLSv1.2" bits="128" cipher="AECDH-AES128-SHA" strength="anonymous" />
  <cipher status="accepted" sslversion="TLSv1.2" bits="0" cipher="ECDHE-ECDSA-NULL-SHA" strength="null" />
  <cipher status="accepted" sslversion="TLSv1.2" bits="112" cipher="DES-CBC3-SHA" strength="medium" />
</ssltest></document>"""
    found = " | ".join(weaknesses(report))
    for what in ("tls 1.0", "tls 1.1", "renegotiation", "ECDHE-ECDSA-AES256-SHA",
                 "AECDH-AES128-SHA", "ECDHE-ECDSA-NULL-SHA", "DES-CBC3-SHA: 112 bits"):
        check(what in found, "%r not reported in %r" % (what, found))
    check("TLS_AES_128_GCM_SHA256" not in found, "a strong cipher reported: %r" % found)
    try:
        weaknesses(report.replace('<renegotiation supported="1" secure="1" />', ""))
    except TestFailure:
        pass
    else:
        raise TestFailure("a report without the renegotiation test passed as clean")


@test(timeout=30)
def compression_never_chosen(ctx):
    pki, ports = start_two_listeners(ctx)
    for port in ports:
        # DEFLATE offered first, null second: the server must pick null.
        kind, value = first_answer(port, client_hello([1, 0]))
        check(kind == "server_hello", "ClientHello offering DEFLATE and null: %s %r"
              % (kind, value))
        check(value == 0, "the server chose compression method %d, not null" % value)
        # Only DEFLATE: no ServerHello at all (an alert or a close).
        kind, value = first_answer(port, client_hello([1]))
        check(kind in ("alert", "closed"),
              "a ClientHello offering only DEFLATE got a %s (%r)" % (kind, value))
    # Both listeners serve as before.
    for port in ports:
        c = lib.Conn(port, tls=pki.client_context())
        try:
            c.send(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            check(c.read_response().status == 200, "no answer after the compression probes")
        finally:
            c.close()
