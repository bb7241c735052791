"""OCSP stapling from files (a cert/key pair's `ocsp:`): openssl s_client
-status sees the response stapled over TLS 1.3 and 1.2, per SNI
certificate, and a fresh one after a reload; a response that is revoked,
for another certificate, signed by a stranger, garbage or missing is a
config error at its position; an expired one is warned about and not
stapled. Responses come from `openssl ocsp` as responder (lib.TestPKI)."""

import datetime
import os
import re
import shutil
import subprocess
import sys

from lib import SLOW, TestPKI, check, check_eq, free_port, test
from test_tls_config import cat, check_config, reload_ok, start


def s_client(port, servername="localhost", version="-tls1_3"):
    """openssl s_client -status: its output (the OCSP part and the rest)."""
    p = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % port, "-status",
                        "-servername", servername, version, "-no_ign_eof"],
                       input=b"", capture_output=True, timeout=20 * SLOW)
    return p.stdout.decode("utf-8", "replace")


def stapled(out):
    """(response status, cert status, next update) of a stapled response, or None."""
    if "OCSP response: no response sent" in out:
        return None
    st = re.search(r"OCSP Response Status: (\w+)", out)
    cs = re.search(r"Cert Status: (\w+)", out)
    nu = re.search(r"Next Update: (.+)", out)
    check(st and cs, "s_client said neither 'no response' nor a status: %r" % out[:1500])
    return st.group(1), cs.group(1), nu.group(1).strip() if nu else None


def setup(ctx):
    pki = TestPKI(ctx)
    leaf, key = pki.issue("srv")
    full = cat(ctx, "srv-full.pem", leaf, pki.ca_cert)  # the issuer, to check the response
    return pki, full, key


def listen(port, cert, key, ocsp, more=""):
    return ("listen:\n  - address: 127.0.0.1:%d\n    tls:\n      cert: %s\n      key: %s\n"
            "      ocsp: %s\n%s" % (port, cert, key, ocsp, more))


@test(timeout=90)
def response_stapled_and_reloaded(ctx):
    pki, full, key = setup(ctx)
    other_leaf, other_key = pki.issue("other", sans=["DNS:other.test"])
    other_full = cat(ctx, "other-full.pem", other_leaf, pki.ca_cert)
    resp = os.path.join(ctx.tmpdir, "srv.ocsp")
    shutil.copy(pki.ocsp("srv", days=3), resp)
    port, plain = free_port(), free_port()
    more = ("      certificates:\n        - {cert: %s, key: %s, ocsp: %s}\n"
            % (other_full, other_key, pki.ocsp("other")))
    text = listen(port, full, key, resp, more) + (
        "  - address: 127.0.0.1:%d\n    tls: {cert: %s, key: %s}\napp: hello\n" % (plain, full, key))
    srv, _ = start(ctx, text, port)
    first = None
    for version in ("-tls1_3", "-tls1_2"):
        got = stapled(s_client(port, version=version))
        check(got is not None and got[:2] == ("successful", "good"),
              "%s: stapled response %r" % (version, got))
        first = got[2]
    out = s_client(port, servername="other.test")
    check("CN = other" in out, "SNI did not choose the other certificate: %r" % out[:600])
    got = stapled(out)
    check(got is not None and got[:2] == ("successful", "good"), "the SNI certificate's: %r" % (got,))
    check(got[2] != first, "the SNI certificate got the default one's response (%r)" % first)
    check_eq(stapled(s_client(plain)), None, "a listener without ocsp staples nothing")
    # A fresh response, and a reload: the new one is stapled.
    shutil.copy(pki.ocsp("srv", days=5), resp)
    reload_ok(srv)
    got = stapled(s_client(port))
    check(got is not None and got[2] != first, "after the reload: %r (before: %r)" % (got, first))


@test(timeout=60)
def bad_responses_are_config_errors(ctx):
    pki, full, key = setup(ctx)
    pki.issue("bob", client=True)
    stranger = TestPKI(ctx, name="stranger", ca_name="someone else")
    leaf_only = os.path.join(pki.dir, "srv.pem")
    garbage = os.path.join(ctx.tmpdir, "garbage.ocsp")
    with open(garbage, "wb") as f:
        f.write(b"\x30\x03\x0a\x01\x00 and more")
    port = free_port()
    cases = [
        (full, pki.ocsp("srv", revoked=True, out=os.path.join(ctx.tmpdir, "r.ocsp")),
         r"cannot be stapled: it says the certificate is revoked"),
        (full, pki.ocsp("bob"), r"cannot be stapled: it is not about this certificate"),
        (full, pki.ocsp("srv", out=os.path.join(ctx.tmpdir, "forged.ocsp"),
                        signer=(stranger.ca_cert, stranger.ca_key)),
         r"cannot be stapled: its signature does not verify against the certificate's issuer"),
        (full, garbage, r"cannot be stapled: not a DER OCSP response"),
        (full, "/nonexistent.ocsp", r"cannot read OCSP response '/nonexistent.ocsp': No such file"),
        (leaf_only, pki.ocsp("srv"), r"the certificate file holds no issuer of the certificate"),
    ]
    for cert, ocsp, pattern in cases:
        rc, out, path = check_config(ctx, listen(port, cert, key, ocsp) + "app: hello\n")
        check_eq(rc, 1, "exit status for %r (output %r)" % (pattern, out))
        where = r"%s:6:13: OCSP response '?%s'? " % (re.escape(path), re.escape(ocsp))
        if "cannot read" in pattern:
            where = r"%s:6:13: " % re.escape(path)
        check(re.search(where + ".*" + pattern if "cannot read" not in pattern
                        else where + pattern, out),
              "expected %s...%s in %r" % (where, pattern, out))
    text = ("listen:\n  - address: 127.0.0.1:%d\n    tls:\n      certificates: [{cert: %s, key: %s}]\n"
            "      ocsp: %s\napp: hello\n" % (port, full, key, pki.ocsp("srv")))
    rc, out, path = check_config(ctx, text)
    check(rc == 1 and re.search(r"%s:5:7: 'ocsp' belongs with 'cert' and 'key'" % re.escape(path),
                                out), "ocsp without cert: %r" % out)


def expired_response(pki, name, out):
    """A response whose nextUpdate has passed (openssl ocsp cannot backdate):
    made with the cryptography package (Debian's python3-cryptography)."""
    try:
        from cryptography import x509
    except ImportError:
        sys.path.append("/usr/lib/python3/dist-packages")
        from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.x509 import ocsp

    def load(path):
        with open(path, "rb") as f:
            return f.read()
    ca = x509.load_pem_x509_certificate(load(pki.ca_cert))
    ca_key = serialization.load_pem_private_key(load(pki.ca_key), None)
    cert = x509.load_pem_x509_certificate(load(os.path.join(pki.dir, name + ".pem")))
    now = datetime.datetime.utcnow()
    b = ocsp.OCSPResponseBuilder().add_response(
        cert=cert, issuer=ca, algorithm=hashes.SHA1(), cert_status=ocsp.OCSPCertStatus.GOOD,
        this_update=now - datetime.timedelta(days=8), next_update=now - datetime.timedelta(days=1),
        revocation_time=None, revocation_reason=None).responder_id(ocsp.OCSPResponderEncoding.HASH, ca)
    with open(out, "wb") as f:
        f.write(b.sign(ca_key, hashes.SHA256()).public_bytes(serialization.Encoding.DER))
    return out


@test(timeout=60)
def expired_response_warned_not_stapled(ctx):
    pki, full, key = setup(ctx)
    old = expired_response(pki, "srv", os.path.join(ctx.tmpdir, "old.ocsp"))
    port = free_port()
    text = listen(port, full, key, old) + "app: hello\n"
    rc, out, path = check_config(ctx, text)
    check_eq(rc, 0, "pagid -t with an expired OCSP response (a warning): %s" % out)
    check(re.search(r"%s:6:13: warning: OCSP response %s expired on \d{4}-\d\d-\d\d [\d:]+ UTC: "
                    r"it is not stapled" % (re.escape(path), re.escape(old)), out),
          "no warning: %r" % out)
    srv, _ = start(ctx, text, port)
    check("OCSP response %s expired" % old in srv.stderr(), "not warned at start: %r"
          % srv.stderr()[-800:])
    check_eq(stapled(s_client(port)), None, "an expired response was stapled")
