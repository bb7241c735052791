"""Client certificate revocation and chain depth (client_auth's crl and
verify_depth): a revoked client is refused under `require` and served with
client_cert_error "certificate revoked" under `optional`; a reload with a
new CRL refuses a client that was fine, and its earlier session does not
resume past the check; an expired CRL refuses everyone and pagid -t says
so; verify_depth counts intermediate CAs; bad values are config errors at
their position. Certificates and CRLs come from lib.TestPKI (openssl CLI)."""

import os
import re
import shutil
import ssl

from lib import TestPKI, check, check_eq, free_port, test, tls_listen
from test_tls_config import (base, cat, chain_pki, check_config, client_for, https_get, reload_ok,
                             start, try_resume)
from test_tls_pagi import ask, tlsapp

V13 = ssl.TLSVersion.TLSv1_3
V12 = ssl.TLSVersion.TLSv1_2


def refused(status):
    """try_resume's first value for a connection the server did not serve."""
    return status != 200


@test(timeout=90)
def revoked_client_refused_and_reload_revokes(ctx):
    pki = TestPKI(ctx)
    cert, key = pki.issue("srv")
    alice = pki.issue("alice", client=True)
    mallory = pki.issue("mallory", client=True)
    crl = os.path.join(ctx.tmpdir, "clients.crl")
    shutil.copy(pki.crl(["mallory"]), crl)
    port = free_port()
    extra = "      client_auth: {ca: %s, mode: require, crl: %s}\n" % (pki.ca_cert, crl)
    srv, _ = start(ctx, base(port, cert, key, extra), port)
    saved, clients = {}, {}
    for version in (V12, V13):
        ok = clients[version] = client_for(pki, version, *alice)
        status, s = https_get(pki, port, ctx=ok)
        check_eq(status, 200, "%s: alice, not revoked" % version)
        saved[version] = s.session
        s.close()
        check_eq(try_resume(pki, port, ok, saved[version]), (200, True),
                 "%s: alice resumes while the CRL is unchanged" % version)
        status, _ = try_resume(pki, port, client_for(pki, version, *mallory), None)
        check(refused(status), "%s: revoked mallory was served: %r" % (version, status))
    # A new CRL revokes alice too: after the reload she is refused, and her
    # session made under the old CRL does not get her in by resumption.
    shutil.copy(pki.crl(["mallory", "alice"], name="crl2.pem"), crl)
    reload_ok(srv)
    for version in (V12, V13):
        ok = clients[version]
        status, reused = try_resume(pki, port, ok, saved[version])
        check(refused(status) and not reused,
              "%s: alice's old session resumed past the new CRL: %r" % (version, status))
        status, _ = try_resume(pki, port, ok, None)
        check(refused(status), "%s: alice served after her revocation: %r" % (version, status))
    check("worker" in srv.stderr() and srv.alive(), "pagid died")


@test(timeout=90)
def optional_mode_reports_revocation(ctx):
    """Under `optional` a revoked client is served and the app sees why,
    through the tls extension (the C app of test_tls_pagi)."""
    pki = TestPKI(ctx)
    cert, key = pki.issue("server")
    alice = pki.issue("alice", client=True)
    mallory = pki.issue("mallory", client=True)
    crl = pki.crl(["mallory"])
    port = free_port()
    conf = "listen:\n" + tls_listen(port, cert, key, "      client_auth: {ca: %s, mode: optional, "
                                    "crl: %s}\n" % (pki.ca_cert, crl))
    ctx.start(tlsapp(ctx), listen=False, config=conf, port=port)
    j, _ = ask(port, pki.client_context(*mallory))
    check_eq((j["tls"]["client_cert_name"], j["tls"]["client_cert_error"]),
             ("CN=mallory", "certificate revoked"), "the revoked client as the app sees it")
    j, _ = ask(port, pki.client_context(*alice))
    check_eq((j["tls"]["client_cert_name"], j["tls"]["client_cert_error"]), ("CN=alice", None),
             "a client the CRL does not list")


@test(timeout=60)
def expired_crl_refuses_and_check_warns(ctx):
    pki = TestPKI(ctx)
    cert, key = pki.issue("srv")
    alice = pki.issue("alice", client=True)
    old = pki.crl([], name="old.pem", next_update_days=-1, last_update_days=-8)
    port = free_port()
    extra = "      client_auth: {ca: %s, crl: %s}\n" % (pki.ca_cert, old)
    rc, out, path = check_config(ctx, base(port, cert, key, extra))
    check_eq(rc, 0, "pagid -t exit status with an expired CRL (a warning): %s" % out)
    check(re.search(r"%s:6:\d+: warning: CRL of /CN=pagid test CA in %s expired on "
                    r"\d{4}-\d\d-\d\d [\d:]+ UTC: clients with certificates of that CA are "
                    r"refused" % (re.escape(path), re.escape(old)), out),
          "no warning about the expired CRL: %r" % out)
    start(ctx, base(port, cert, key, extra), port)
    status, _ = try_resume(pki, port, client_for(pki, V13, *alice), None)
    check(refused(status), "a client was served under an expired CRL: %r" % status)


@test(timeout=60)
def verify_depth_counts_intermediates(ctx):
    """A client whose certificate comes from an intermediate CA: refused
    with verify_depth 0, served with 1; one issued by the root directly is
    served with 0."""
    pki = TestPKI(ctx)
    cert, key = pki.issue("srv")
    direct = pki.issue("direct", client=True)
    leaf, leaf_key, inter = chain_pki(pki, ctx)
    chained = cat(ctx, "chained-client.pem", leaf, inter)
    for depth, want_chained in ((0, False), (1, True)):
        port = free_port()
        extra = "      client_auth: {ca: %s, verify_depth: %d}\n" % (pki.ca_cert, depth)
        start(ctx, base(port, cert, key, extra), port)
        status, _ = try_resume(pki, port, client_for(pki, V13, chained, leaf_key), None)
        check_eq(status == 200, want_chained,
                 "verify_depth %d, a client under one intermediate: %r" % (depth, status))
        status, _ = try_resume(pki, port, client_for(pki, V13, *direct), None)
        check_eq(status, 200, "verify_depth %d, a client of the root itself" % depth)


@test(timeout=40)
def crl_and_depth_errors_have_positions(ctx):
    pki = TestPKI(ctx)
    cert, key = pki.issue("srv")
    port = free_port()
    head = "listen:\n  - address: 127.0.0.1:%d\n    tls:\n      cert: %s\n      key: %s\n" % (
        port, cert, key)
    ca = pki.ca_cert
    cases = [
        ("      client_auth: {ca: %s, verify_depth: deep}\n" % ca, 6, len(ca) + 41,
         r"invalid verify_depth 'deep' \(expected 0 to 100"),
        ("      client_auth: {ca: %s, verify_depth: 101}\n" % ca, 6, len(ca) + 41,
         r"invalid verify_depth '101'"),
        ("      client_auth: {ca: %s, verify_depth: -1}\n" % ca, 6, len(ca) + 41,
         r"invalid verify_depth '-1'"),
        ("      client_auth: {ca: %s, crl: /nonexistent.crl}\n" % ca, 6, len(ca) + 32,
         r"cannot load CRL '/nonexistent.crl'"),
        ("      client_auth: {ca: %s, crl: %s}\n" % (ca, cert), 6, len(ca) + 32,
         r"cannot load CRL '%s': no X509 CRL block in" % re.escape(cert)),
        ("      client_auth: {ca: %s, crls: x}\n" % ca, 6, len(ca) + 27,
         r"unknown key 'crls' in 'listen.tls.client_auth' \(did you mean 'crl'"),
    ]
    for tls, line, col, pattern in cases:
        rc, out, path = check_config(ctx, head + tls + "app: hello\n")
        check_eq(rc, 1, "exit status for %r (output %r)" % (pattern, out))
        where = r"%s:%d:%d: " % (re.escape(path), line, col)
        check(re.search(where + pattern, out), "expected %s%s in %r" % (where, pattern, out))
