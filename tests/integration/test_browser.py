"""End to end in a real browser: headless Chromium, driven over the W3C
WebDriver protocol (plain urllib + JSON against chromedriver), loads the demo
page from a pagid started with no app option (the default app is demo) and
sees the three demos work: the streamed lines arrive, the SSE clock ticks,
a WebSocket message typed into the input comes back in the log; and two tabs
on a 2-worker pagid, their chats held by different workers, each see the
other's message (the chat goes through publish/subscribe).

Chromium and chromium-driver are Debian packages that dev.sh installs; a
machine without them fails these tests rather than skipping them, so that a
CI that lost them cannot look green."""

import base64
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request

import lib
from lib import SLOW, TestFailure, check, free_port, test

CHROMEDRIVER_CANDIDATES = ["/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"]
CHROMIUM_CANDIDATES = ["/usr/lib/chromium/chromium", "/usr/bin/chromium"]


def find_exe(candidates, name):
    for path in candidates:
        if os.access(path, os.X_OK):
            return path
    path = shutil.which(name)
    if path is None:
        raise TestFailure("%s is not installed (Debian: apt-get install chromium chromium-driver;"
                          " ./dev.sh installs them)" % name)
    return path


def descendants(pid):
    out, todo = [], [pid]
    while todo:
        kids = lib.children_of(todo.pop())
        out += kids
        todo += kids
    return out


class WebDriver:
    """The few W3C WebDriver commands the test needs, over HTTP/JSON."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.port = free_port()
        self.log_path = os.path.join(ctx.tmpdir, "chromedriver.log")
        self.log = open(self.log_path, "wb")
        exe = find_exe(CHROMEDRIVER_CANDIDATES, "chromedriver")
        self.proc = subprocess.Popen([exe, "--port=%d" % self.port, "--log-level=WARNING"],
                                     stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self.session = None
        self.pids = []
        deadline = time.monotonic() + 15 * SLOW
        while True:
            try:
                if self._call("GET", "/status", timeout=2).get("ready"):
                    break
            except (OSError, TestFailure):
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise TestFailure("chromedriver did not come up: %s" % self.read_log())
            time.sleep(0.1)

    def read_log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-2000:].decode("utf-8", "replace")
        except OSError:
            return ""

    def _call(self, method, path, body=None, timeout=30):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.port, path), data=data,
                                     method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout * SLOW) as resp:
                payload = json.loads(resp.read().decode() or "{}")
        except urllib.error.HTTPError as e:
            text = e.read().decode("utf-8", "replace")
            raise TestFailure("WebDriver %s %s: HTTP %d %s" % (method, path, e.code, text[:500]))
        return payload.get("value")

    def cmd(self, method, path, body=None, timeout=30):
        return self._call(method, "/session/%s%s" % (self.session, path), body, timeout)

    def start_session(self, user_data_dir, extra_args=()):
        args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--user-data-dir=%s" % user_data_dir,
                "--window-size=1200,900"] + list(extra_args)
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "pageLoadStrategy": "normal",
            "timeouts": {"pageLoad": int(20000 * SLOW), "script": int(10000 * SLOW)},
            "goog:chromeOptions": {"binary": find_exe(CHROMIUM_CANDIDATES, "chromium"),
                                   "args": args},
        }}}
        value = self._call("POST", "/session", caps, timeout=60)
        self.session = value["sessionId"]
        self.pids = descendants(self.proc.pid)

    def navigate(self, url):
        self.cmd("POST", "/url", {"url": url})

    def js(self, script, *args):
        return self.cmd("POST", "/execute/sync", {"script": script, "args": list(args)})

    def element(self, css):
        value = self.cmd("POST", "/element", {"using": "css selector", "value": css})
        return next(iter(value.values()))  # the W3C element reference key

    def type_into(self, css, text):
        self.cmd("POST", "/element/%s/value" % self.element(css), {"text": text})

    def click(self, css):
        self.cmd("POST", "/element/%s/click" % self.element(css), {})

    def screenshot(self, path):
        try:
            png = base64.b64decode(self.cmd("GET", "/screenshot"))
            with open(path, "wb") as f:
                f.write(png)
        except (TestFailure, OSError, ValueError):
            pass

    def quit(self):
        """End the session, then make sure chromedriver and every browser
        process it started are gone (by PID, never by name)."""
        if self.session:
            try:
                self._call("DELETE", "/session/%s" % self.session, timeout=10)
            except (OSError, TestFailure):
                pass
            self.session = None
        pids = set(self.pids) | set(descendants(self.proc.pid))
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        self.log.close()


def page_state(wd):
    return wd.js("""
        var t = function (id) { var e = document.getElementById(id); return e ? e.textContent : null; };
        var items = Array.prototype.map.call(document.querySelectorAll('#ws-log li'),
                                             function (li) { return li.textContent; });
        return {stream: t('stream-log'), streamStatus: t('stream-status'),
                clock: t('clock'), ticks: parseInt(t('clock-count') || '0', 10),
                clockStatus: t('clock-status'), wsStatus: t('ws-status'), wsLog: items};
    """)


def poll(wd, pred, timeout):
    deadline = time.monotonic() + timeout * SLOW
    state = page_state(wd)
    while not pred(state) and time.monotonic() < deadline:
        time.sleep(0.1)
        state = page_state(wd)
    return state


def with_browser(ctx, body):
    srv = ctx.start(app=None)  # no -a: pagid's default app, the demo
    wd = WebDriver(ctx)
    try:
        profile = os.path.join(ctx.tmpdir, "chromium-profile")
        os.makedirs(profile)
        wd.start_session(profile)
        wd.navigate("http://127.0.0.1:%d/" % srv.port)
        check(wd.js("return document.title;") == "pagid demo",
              "the default app's page is not the demo: title %r" % wd.js("return document.title;"))
        try:
            body(wd, srv)
        finally:
            wd.screenshot(os.path.join(ctx.tmpdir, "demo.png"))
    except TestFailure as e:
        raise TestFailure("%s\n    chromedriver log: %s" % (e, wd.read_log()[-600:]))
    finally:
        wd.quit()


@test(timeout=60)
def demo_stream_and_clock(ctx):
    def body(wd, srv):
        t0 = time.monotonic()
        # The page starts /stream on load: lines appear one by one, then "done".
        st = poll(wd, lambda s: s["stream"] and s["stream"].count("\n") >= 2, 5)
        check(st["stream"] and st["stream"].count("\n") >= 2,
              "no streamed lines after 5s: %r" % st)
        partial = st["stream"].count("\n")
        st = poll(wd, lambda s: s["streamStatus"] == "done", 8)
        check(st["streamStatus"] == "done", "stream did not finish: %r" % st)
        lines = st["stream"].strip().split("\n")
        check(len(lines) == 10 and lines[0].startswith("line 1 of 10") and
              lines[-1].startswith("line 10 of 10"), "streamed lines: %r" % lines)
        check(partial < 10, "all 10 lines were there at the first look (not streamed): %d"
              % partial)
        check(time.monotonic() - t0 >= 1.0, "10 lines 200 ms apart took under 1s")
        # The SSE clock ticks at least twice (one a second) and shows a time.
        st = poll(wd, lambda s: s["ticks"] >= 3, 6)
        check(st["ticks"] >= 3, "SSE clock ticks seen by EventSource: %r" % st)
        check(st["clock"] and st["clock"].endswith(" UTC") and ":" in st["clock"],
              "clock text: %r" % st["clock"])
        check(st["clockStatus"] == "open", "EventSource state: %r" % st["clockStatus"])
        # Running the stream again works on the same page.
        wd.click("#stream-run")
        st = poll(wd, lambda s: s["streamStatus"] == "done" and
                  s["stream"].count("\n") == 10, 8)
        check(st["streamStatus"] == "done", "second stream run: %r" % st)

    with_browser(ctx, body)


@test(timeout=60)
def demo_websocket_chat(ctx):
    def body(wd, srv):
        st = poll(wd, lambda s: s["wsStatus"] == "open", 8)
        check(st["wsStatus"] == "open", "the page's WebSocket did not open: %r" % st["wsStatus"])
        message = "hello from chromium %d" % os.getpid()
        wd.type_into("#ws-input", message)
        wd.click("#ws-send")
        st = poll(wd, lambda s: any(message in m for m in s["wsLog"]), 5)
        check(any(message in m for m in st["wsLog"]),
              "typed message not echoed into the log: %r" % st["wsLog"])
        check(wd.js("return document.getElementById('ws-input').value;") == "",
              "input not cleared after sending")

    with_browser(ctx, body)


def chat_state(wd):
    return wd.js("""
        var me = document.getElementById('ws-me').textContent;
        var items = Array.prototype.map.call(document.querySelectorAll('#ws-log li'),
                                             function (li) { return li.textContent; });
        return {me: me, wsStatus: document.getElementById('ws-status').textContent,
                wsLog: items};
    """)


def wait_chat(wd, pred, timeout):
    deadline = time.monotonic() + timeout * SLOW
    st = chat_state(wd)
    while not pred(st) and time.monotonic() < deadline:
        time.sleep(0.1)
        st = chat_state(wd)
    return st


def tab_worker(wd, url):
    """Load the demo in the current tab; the worker its chat landed on."""
    wd.navigate(url)
    st = wait_chat(wd, lambda s: s["wsStatus"] == "open" and " on worker " in s["me"], 8)
    check(" on worker " in st["me"], "the page never learned its worker: %r" % st)
    return int(st["me"].rsplit(" ", 1)[1])


@test(timeout=120)
def demo_chat_two_tabs_on_two_workers(ctx):
    # Two tabs of the demo on a 2-worker pagid, their chats on different
    # workers: each one's message shows in both (publish/subscribe).
    srv = ctx.start(app=None, workers=2)
    check(lib.wait_for(lambda: "all workers ready" in srv.stderr(), 10 * SLOW), "workers never all ready")
    url = "http://127.0.0.1:%d/" % srv.port
    wd = WebDriver(ctx)
    try:
        profile = os.path.join(ctx.tmpdir, "chromium-profile")
        os.makedirs(profile)
        wd.start_session(profile)
        tab1 = wd.cmd("GET", "/window")
        w1 = tab_worker(wd, url)
        tab2 = wd.cmd("POST", "/window/new", {"type": "tab"})["handle"]
        wd.cmd("POST", "/window", {"handle": tab2})
        seen = [w1]
        w2 = tab_worker(wd, url)
        seen.append(w2)
        for _ in range(20):  # connections land where they land: reload until apart
            if w2 != w1:
                break
            w2 = tab_worker(wd, url)
            seen.append(w2)
        ctx.note("chat workers of the tab loads: %r" % seen)
        check(w2 != w1, "tab 2 never landed on the other worker: %r" % seen)
        m1 = "from tab one %d" % os.getpid()
        m2 = "from tab two %d" % os.getpid()
        try:
            wd.cmd("POST", "/window", {"handle": tab1})
            wd.type_into("#ws-input", m1)
            wd.click("#ws-send")
            wd.cmd("POST", "/window", {"handle": tab2})
            wd.type_into("#ws-input", m2)
            wd.click("#ws-send")
            for name, handle in (("tab 1", tab1), ("tab 2", tab2)):
                wd.cmd("POST", "/window", {"handle": handle})
                st = wait_chat(wd, lambda s: any(m1 in m for m in s["wsLog"]) and
                               any(m2 in m for m in s["wsLog"]), 8)
                for m in (m1, m2):
                    n = sum(1 for x in st["wsLog"] if m in x)
                    check(n == 1, "%s (worker %d) shows %r %d times: %r"
                          % (name, w1 if handle == tab1 else w2, m, n, st["wsLog"]))
        finally:
            wd.screenshot(os.path.join(ctx.tmpdir, "demo-tab.png"))
    except TestFailure as e:
        raise TestFailure("%s\n    chromedriver log: %s" % (e, wd.read_log()[-600:]))
    finally:
        wd.quit()
