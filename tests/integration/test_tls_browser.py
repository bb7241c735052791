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


def start_tls_demo(ctx, extra=""):
    pki = lib.TestPKI(ctx)
    cert, key = pki.issue("server")
    port = free_port()
    srv = ctx.start(app=None, listen=False, port=port,
                    config="listen:\n" + lib.tls_listen(port, cert, key) + extra)
    return srv, cert


def with_tls_browser(ctx, body, trust=True, extra=""):
    srv, cert = start_tls_demo(ctx, extra)
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
        # fetch, the SSE clock and the WebSocket (RFC 8441, see
        # demo_websocket_over_http2) are streams of one connection.
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


@test(timeout=90)
def demo_websocket_over_http2(ctx):
    """Chromium takes the server's SETTINGS_ENABLE_CONNECT_PROTOCOL: the
    chat WebSocket is an extended CONNECT on the page's h2 connection (the
    access log says HTTP/2.0 and 200 for /ws, where HTTP/1.1 would log 101),
    and typed messages round-trip over it."""
    log = os.path.join(ctx.tmpdir, "access.log")

    def logged():
        try:
            with open(log) as f:
                return f.read()
        except OSError:
            return ""

    def body(wd, srv):
        st = poll(wd, lambda s: s["wsStatus"] == "open", 10)
        check(st["wsStatus"] == "open", "the page's WebSocket did not open: %r" % st["wsStatus"])
        for i in range(3):
            message = "h2 websocket %d/%d" % (os.getpid(), i)
            wd.type_into("#ws-input", message)
            wd.click("#ws-send")
            st = poll(wd, lambda s: any(message in m for m in s["wsLog"]), 5)
            check(any(message in m for m in st["wsLog"]),
                  "typed message not echoed: %r" % st["wsLog"])
        # Leaving the page ends the WebSocket: its log line is written at its end.
        wd.navigate("about:blank")
        time.sleep(0.5)
        srv.stop()  # the access log is written out by then
        ok = lib.wait_for(lambda: "/ws " in logged(), 10)
        text = logged()
        check(ok, "no access log line for /ws: %r" % text[-1000:])
        line = [ln for ln in text.splitlines() if "/ws " in ln][0]
        check('"GET /ws HTTP/2.0" 200' in line,
              "the WebSocket did not go over HTTP/2 (RFC 8441): %r" % line)
        check(not any("HTTP/1.1" in ln for ln in text.splitlines()),
              "a request went over HTTP/1.1: %r" % text[-1000:])

    with_tls_browser(ctx, body, extra="access_log:\n  path: %s\n" % log)


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
