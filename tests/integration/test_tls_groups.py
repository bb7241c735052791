"""Key exchange groups and ALPN on TLS listeners (issue 25): a ClientHello
offering only finite-field groups (ffdhe8192 costs the worker ~140 ms of CPU
per handshake) is refused unless the config names them; `tls: {groups}` on a
listener and at the top level choose the groups (pagid -t checks the names,
pagid -T shows them in OpenSSL's spelling, a reload applies new ones); a
client whose ALPN offers no protocol we speak gets the no_application_protocol
alert (RFC 7301 3.2), one that offers none still gets HTTP/1.1. Driven with
openssl s_client, which names the group it agreed on and the alert it got."""

import re
import subprocess

from lib import SLOW, TestPKI, check, check_eq, free_port, test, tls_listen
from test_metrics import scrape
from test_ops import write
from test_tls_config import check_config, https_get, reload_ok, run_pagid, start


def s_client(port, *args):
    """openssl s_client with args, nothing sent; (handshake done, agreed group
    or None, the whole output)."""
    p = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % port,
                        "-servername", "localhost", "-no_ign_eof"] + list(args),
                       input=b"", capture_output=True, timeout=20 * SLOW)
    out = (p.stdout + p.stderr).decode("utf-8", "replace")
    done = re.search(r"Cipher is (?!\(NONE\))", out) is not None and p.returncode == 0
    key = re.search(r"(?:Server|Peer) Temp Key: (?:ECDH, )?([\w-]+)", out)
    return done, key.group(1) if key else None, out


def expect_group(port, group, want, *args):
    """A client offering only group: it agrees on want, or fails (want None)
    with a handshake_failure alert, not by a broken connection."""
    done, got, out = s_client(port, "-groups", group, *args)
    if want is None:
        check(not done, "a client offering only %s %s was served: %s" % (group, args, out[-800:]))
        check("handshake failure" in out,
              "a client offering only %s %s: no handshake_failure alert: %s"
              % (group, args, out[-800:]))
    else:
        check(done, "a client offering only %s %s failed: %s" % (group, args, out[-800:]))
        check_eq(got, want, "the group agreed with a client offering %s %s" % (group, args))


def listener(ctx, extra=""):
    """An RSA certificate: under TLS 1.2 a client's groups also limit the
    curve of an ECDSA one (RFC 8422), which would blur what the server's
    groups decide."""
    pki = TestPKI(ctx)
    cert, key = pki.issue("srv", key_type="rsa")
    port = free_port()
    text = "listen:\n" + tls_listen(port, cert, key, extra) + "app: hello\nworkers: 1\n"
    return pki, port, text


@test(timeout=60)
def tls_groups_default_refuses_ffdhe(ctx):
    """Mozilla intermediate's groups by default: X25519, P-256, P-384."""
    _, port, text = listener(ctx)
    start(ctx, text, port)
    expect_group(port, "ffdhe8192", None, "-tls1_3")
    expect_group(port, "ffdhe2048", None, "-tls1_3")
    expect_group(port, "P-521", None, "-tls1_3")
    expect_group(port, "X25519", "X25519", "-tls1_3")
    expect_group(port, "P-256", "prime256v1", "-tls1_3")
    expect_group(port, "P-384", "secp384r1", "-tls1_3")
    # TLS 1.2: the same list chooses the ECDHE curve.
    expect_group(port, "X25519", "X25519", "-tls1_2")
    expect_group(port, "P-521", None, "-tls1_2")


@test(timeout=60)
def tls_groups_per_listener(ctx):
    pki, port, text = listener(ctx, "      groups: [P-384]\n")
    start(ctx, text, port)
    for version in ("-tls1_3", "-tls1_2"):
        expect_group(port, "X25519", None, version)
        expect_group(port, "P-384", "secp384r1", version)
    # A client offering all of them: the listener's one.
    done, got, out = s_client(port, "-groups", "X25519:P-256:P-384", "-tls1_3")
    check(done, "a client offering X25519:P-256:P-384 failed: %s" % out[-800:])
    check_eq(got, "secp384r1", "the group agreed")
    status, s = https_get(pki, port)
    s.close()
    check_eq(status, 200, "a request over a P-384 handshake")


@test(timeout=60)
def tls_groups_server_wide_default(ctx):
    """The top-level tls.groups is every listener's default; a listener's own
    groups win over it."""
    pki = TestPKI(ctx)
    cert, key = pki.issue("srv")
    p1, p2 = free_port(), free_port()
    text = ("listen:\n" + tls_listen(p1, cert, key) +
            tls_listen(p2, cert, key, "      groups: [x25519, ffdhe3072]\n") +
            "app: hello\nworkers: 1\ntls:\n  groups: [secp384r1]\n")
    start(ctx, text, p1)
    expect_group(p1, "X25519", None, "-tls1_3")
    expect_group(p1, "P-384", "secp384r1", "-tls1_3")
    expect_group(p2, "X25519", "X25519", "-tls1_3")
    expect_group(p2, "P-384", None, "-tls1_3")
    # Named explicitly, a finite-field group is the operator's choice.
    done, got, out = s_client(p2, "-groups", "ffdhe3072", "-tls1_3")
    check(done, "ffdhe3072 named in groups was refused: %s" % out[-800:])


@test(timeout=60)
def tls_groups_check_and_dump(ctx):
    pki = TestPKI(ctx)
    cert, key = pki.issue("srv")
    port = free_port()
    head = "listen:\n" + tls_listen(port, cert, key)
    rc, out, path = check_config(ctx, head + "      groups: [P-256, brainpool]\napp: hello\n")
    check_eq(rc, 1, "pagid -t exit status for an unknown group: %s" % out)
    want = ("%s:6:23: unknown TLS group 'brainpool' in 'listen.tls.groups' (valid: X25519, "
            "prime256v1, secp384r1, secp521r1, X448, ffdhe2048, ffdhe3072, ffdhe4096, "
            "ffdhe6144, ffdhe8192)" % path)
    check(want in out, "pagid -t on an unknown group said %r, not %r" % (out, want))
    rc, out, path = check_config(ctx, head + "      groups: []\napp: hello\n")
    check_eq(rc, 1, "pagid -t exit status for an empty groups list: %s" % out)
    check(re.search(r"%s:6:15: 'listen.tls.groups' is empty" % re.escape(path), out),
          "pagid -t on groups: [] said %r" % out)
    rc, out, path = check_config(ctx, head + "app: hello\ntls:\n  groups: [X25519, P-999]\n")
    check_eq(rc, 1, "pagid -t exit status for an unknown top-level group: %s" % out)
    check(re.search(r"%s:8:20: unknown TLS group 'P-999' in 'tls.groups'" % re.escape(path), out),
          "pagid -t on tls.groups: [X25519, P-999] said %r" % out)
    rc, out, _ = check_config(ctx, head + "      groups: [p-256, X25519]\napp: hello\n")
    check(rc == 0 and "is valid" in out, "pagid -t on valid groups: %d %s" % (rc, out))

    # -T: OpenSSL's names, the effective list of each listener and the default.
    path = ctx.tmpdir + "/dump.yaml"
    write(path, head + "      groups: [p-256, x25519]\n" + tls_listen(free_port(), cert, key) +
          "app: hello\n")
    rc, out = run_pagid(ctx, "-T", "-c", path)
    check_eq(rc, 0, "pagid -T: %s" % out)
    check_eq(re.findall(r"groups: \[.*\]", out),
             ["groups: [prime256v1, X25519]", "groups: [X25519, prime256v1, secp384r1]",
              "groups: [X25519, prime256v1, secp384r1]"], "groups shown by pagid -T")
    check(re.search(r"^tls:\n  groups: \[X25519, prime256v1, secp384r1\]$", out, re.M),
          "no top-level tls.groups in pagid -T: %s" % out)


@test(timeout=90)
def tls_groups_reload(ctx):
    _, port, text = listener(ctx, "      groups: [P-384]\n")
    srv, path = start(ctx, text, port)
    expect_group(port, "X25519", None, "-tls1_3")
    write(path, text.replace("groups: [P-384]", "groups: [X25519]"))
    reload_ok(srv)
    expect_group(port, "X25519", "X25519", "-tls1_3")
    expect_group(port, "P-384", None, "-tls1_3")


@test(timeout=60)
def tls_alpn_no_common_protocol(ctx):
    pki = TestPKI(ctx)
    cert, key = pki.issue("srv")
    port, h1port, sport = free_port(), free_port(), free_port()
    text = ("listen:\n" + tls_listen(port, cert, key) + tls_listen(h1port, cert, key) +
            "    http2: false\napp: hello\nworkers: 1\nstatus:\n  listen: 127.0.0.1:%d\n" % sport)
    start(ctx, text, port)

    def refused():
        return scrape(sport)[0].get('pagid_tls_handshakes_total{result="no_application_protocol"}')

    for p, offer in ((port, "foo"), (port, "foo,spdy/3"), (h1port, "h2")):
        done, _, out = s_client(p, "-alpn", offer)
        check(not done, "ALPN %r was served: %s" % (offer, out[-800:]))
        check("no application protocol" in out,
              "ALPN %r: no no_application_protocol alert: %s" % (offer, out[-800:]))
    check_eq(refused(), 3, "ALPN refusals counted")
    check_eq(scrape(sport)[0].get('pagid_tls_handshakes_total{result="failed"}'), 0,
             "ALPN refusals counted as failed too")
    for p, offer, want in ((port, "h2,http/1.1", "h2"), (port, "foo,http/1.1", "http/1.1"),
                           (h1port, "h2,http/1.1", "http/1.1"), (port, "http/1.0", "http/1.0")):
        done, _, out = s_client(p, "-alpn", offer)
        check(done, "ALPN %r failed: %s" % (offer, out[-800:]))
        check("ALPN protocol: %s" % want in out, "ALPN %r did not choose %s: %s"
              % (offer, want, out[-800:]))
    # No ALPN at all: HTTP/1.1, as before.
    done, _, out = s_client(port)
    check(done and "No ALPN negotiated" in out, "a client without ALPN: %s" % out[-800:])
    c = pki.client_context()
    status, s = https_get(pki, port, ctx=c)
    check_eq((status, s.selected_alpn_protocol()), (200, None), "a request without ALPN")
    s.close()
