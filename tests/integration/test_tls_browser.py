"""The demo page in headless Chromium over HTTPS: pagid's default app on a TLS
listener whose certificate comes from a test CA made at test time. The
browser trusts that one certificate through Chromium's
--ignore-certificate-errors-spki-list (the SHA-256 of its public key), and
the page's streamed fetch, SSE clock and WebSocket chat (wss://, built from
the page's own scheme) must all work. Without the flag the browser refuses
the certificate, which shows the trust is what lets the page load.

Like test_browser.py, a machine without chromium and chromium-driver fails
these tests rather than skipping them."""

import base64
import hashlib
import os
import subprocess
import time

import lib
from lib import TestFailure, check, free_port, test
from test_browser import WebDriver, page_state, poll


def spki_sha256(cert):
    """base64(SHA-256(SubjectPublicKeyInfo, DER)) of a PEM certificate: the
    form --ignore-certificate-errors-spki-list takes."""
    pub = subprocess.run(["openssl", "x509", "-in", cert, "-noout", "-pubkey"],
                         capture_output=True, timeout=30, check=True).stdout
    der = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "DER"], input=pub,
                         capture_output=True, timeout=30, check=True).stdout
    return base64.b64encode(hashlib.sha256(der).digest()).decode()


def start_tls_demo(ctx):
    pki = lib.TestPKI(ctx)
    cert, key = pki.issue("server")
    port = free_port()
    srv = ctx.start(app=None, listen=False, port=port,
                    config="listen:\n" + lib.tls_listen(port, cert, key))
    return srv, cert


def with_tls_browser(ctx, body, trust=True):
    srv, cert = start_tls_demo(ctx)
    wd = WebDriver(ctx)
    try:
        profile = os.path.join(ctx.tmpdir, "chromium-profile")
        os.makedirs(profile)
        extra = ["--ignore-certificate-errors-spki-list=%s" % spki_sha256(cert)] if trust else []
        wd.start_session(profile, extra)
        # localhost: the name in the certificate (127.0.0.1 is in it too).
        wd.navigate("https://localhost:%d/" % srv.port)
        try:
            body(wd, srv)
        finally:
            wd.screenshot(os.path.join(ctx.tmpdir, "tls-demo.png"))
    except TestFailure as e:
        raise TestFailure("%s\n    chromedriver log: %s" % (e, wd.read_log()[-600:]))
    finally:
        wd.quit()


@test(timeout=90)
def demo_page_over_https(ctx):
    def body(wd, srv):
        title = wd.js("return document.title;")
        check(title == "pagid demo", "the demo page did not load over HTTPS: title %r" % title)
        where = wd.js("""return {protocol: location.protocol, secure: window.isSecureContext,
                                 alpn: performance.getEntriesByType('navigation')[0].nextHopProtocol};""")
        check(where["protocol"] == "https:" and where["secure"],
              "not a secure https page: %r" % where)
        # HTTP/2 by ALPN (the listener's default): the page, the streamed
        # fetch and the SSE clock are streams of one connection; the
        # WebSocket opens a connection of its own over HTTP/1.1 (no RFC 8441 yet).
        check(where["alpn"] == "h2", "protocol negotiated by the browser: %r" % where)
        # The streamed fetch.
        st = poll(wd, lambda s: s["streamStatus"] == "done", 10)
        lines = (st["stream"] or "").strip().split("\n")
        check(st["streamStatus"] == "done" and len(lines) == 10 and
              lines[-1].startswith("line 10 of 10"), "streamed fetch over HTTPS: %r" % st)
        # The SSE clock over HTTPS.
        st = poll(wd, lambda s: s["ticks"] >= 3, 8)
        check(st["ticks"] >= 3 and st["clockStatus"] == "open",
              "SSE clock over HTTPS (EventSource): %r" % st)
        check(st["clock"] and st["clock"].endswith(" UTC"), "clock text: %r" % st["clock"])
        # The WebSocket chat, over wss:// since the page is https.
        st = poll(wd, lambda s: s["wsStatus"] == "open", 10)
        check(st["wsStatus"] == "open", "the page's WebSocket did not open: %r" % st["wsStatus"])
        url = wd.js("return ws.url;")
        check(url == "wss://localhost:%d/ws" % srv.port, "WebSocket URL: %r" % url)
        message = "hello over wss %d" % os.getpid()
        wd.type_into("#ws-input", message)
        wd.click("#ws-send")
        st = poll(wd, lambda s: any(message in m for m in s["wsLog"]), 5)
        check(any(message in m for m in st["wsLog"]),
              "typed message not echoed over wss: %r" % st["wsLog"])
        # Everything stayed up: one more tick after the chat.
        ticks = st["ticks"]
        st = poll(wd, lambda s: s["ticks"] > ticks, 4)
        check(st["ticks"] > ticks and st["wsStatus"] == "open",
              "SSE or WebSocket dropped after the chat: %r" % st)

    with_tls_browser(ctx, body)


@test(timeout=60)
def untrusted_certificate_refused(ctx):
    def body(wd, srv):
        time.sleep(0.5 * lib.SLOW)
        title = wd.js("return document.title;")
        check(title != "pagid demo",
              "Chromium loaded the page with a certificate it has no reason to trust")
        # The clock's stream was never opened either: nothing ticks.
        ticks = wd.js("var e = document.getElementById('clock-count');"
                      " return e ? e.textContent : null;")
        check(ticks in (None, "", "0"), "the untrusted page runs: clock %r" % ticks)

    with_tls_browser(ctx, body, trust=False)
