"""Debug mode (issue 12, complaint 5): with --debug, misuse of the C
interface is logged with the request it concerns (double finish, finish with
a receive pending or before a send's callback, rejected sends, a scope never
finished, a stale handle) while other requests are served, and a callback
holding the loop over 100 ms is reported; without it none of that is. The
crash line names the request a segfault interrupted, in any mode, and the
restarted worker serves the next request. The app is apps/debugapp.c."""

import os
import re
import subprocess

import lib
from lib import check, check_eq, request, test, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
INCLUDE = os.path.join(lib.REPO, "include")


def build_debugapp(ctx):
    so = os.path.join(ctx.tmpdir, "debugapp.so")
    cmd = [os.environ.get("CC", "cc"), "-std=c11", "-Wall", "-Wextra", "-Werror", "-shared",
           "-fPIC", "-I", INCLUDE, "-o", so, os.path.join(HERE, "apps", "debugapp.c")]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    check_eq(p.returncode, 0, "building debugapp.so: %s" % p.stdout.decode())
    return so


def logged(srv, needle, timeout=3):
    """Wait until needle is in the server's log; the log's text either way."""
    wait_for(lambda: needle in srv.stderr(), timeout * lib.SLOW)
    return srv.stderr()


def expect_line(srv, needle):
    text = logged(srv, needle)
    check(needle in text, "not logged: %r\n--- log:\n%s" % (needle, text[-3000:]))


@test(timeout=90)
def misuse_is_logged_with_the_request(ctx):
    so = build_debugapp(ctx)
    # /leak's scope is never finished: the stop waits timeouts.shutdown for it.
    srv = ctx.start(so, workers=1, args=["--debug"], config="timeouts:\n  shutdown: 1s\n")
    expect_line(srv, "debug mode: app interface misuse")
    for path, body in (("/double", b"double"), ("/pending", b"pending"), ("/early", b"early"),
                       ("/rejected", b"rejected"), ("/leak", b"leak"), ("/stale", b"kept")):
        r = request(srv.port, "GET", path)
        check_eq((r.status, r.body), (200, body), path)
        check_eq(request(srv.port, "GET", "/ok").body, b"ok", "/ok after " + path)
    expect_line(srv, "debug: pagi_scope_finish called twice (http scope, GET /double)")
    expect_line(srv, "debug: pagi_scope_finish with a receive pending (its callback will not "
                     "run) (http scope, GET /pending)")
    expect_line(srv, "debug: pagi_scope_finish before 1 send callback ran (http scope, "
                     "GET /early)")
    expect_line(srv, "debug: pagi_send of websocket.accept refused: ")
    expect_line(srv, "(http scope, GET /rejected)")
    expect_line(srv, "the connection is done with this scope but the app never finished it")
    expect_line(srv, "(http scope, GET /leak)")
    # The handle kept from /stale was released: its path reads empty, logged.
    r = request(srv.port, "GET", "/stale-read")
    check_eq((r.status, r.body), (200, b"[]"), "a released handle's path")
    expect_line(srv, "debug: pagi_scope_path: stale handle")
    expect_line(srv, "(its scope, http GET /stale, was released)")
    check_eq(request(srv.port, "GET", "/ok").body, b"ok", "/ok at the end")
    check_eq(len(re.findall(r"called twice", srv.stderr())), 1, "double finish lines")
    # Nothing misused by /ok: no line names it.
    check("GET /ok)" not in srv.stderr(), "a well-behaved request was reported:\n" +
          srv.stderr()[-2000:])


@test(timeout=90)
def loop_hold_is_reported_in_debug_mode_only(ctx):
    so = build_debugapp(ctx)
    srv = ctx.start(so, workers=1, args=["--debug"])
    r = request(srv.port, "GET", "/block", timeout=10)
    check_eq((r.status, r.body), (200, b"blocked"), "/block")
    text = logged(srv, "held the loop")
    m = re.search(r"debug: an app's handle callback held the loop for (\d+) ms "
                  r"\(http scope, GET /block\)", text)
    check(m, "no loop-hold warning for /block:\n" + text[-2000:])
    check(int(m.group(1)) >= 100, "held %s ms, the route sleeps 300 ms" % m.group(1))
    check_eq(len(re.findall("held the loop", text)), 1, "one warning per hold")
    check_eq(request(srv.port, "GET", "/ok").body, b"ok", "/ok")

    plain = ctx.start(so, workers=1)
    r = request(plain.port, "GET", "/block", timeout=10)
    check_eq((r.status, r.body), (200, b"blocked"), "/block without debug mode")
    r = request(plain.port, "GET", "/double")
    check_eq(r.status, 200, "/double without debug mode")
    check_eq(request(plain.port, "GET", "/ok").body, b"ok", "/ok without debug mode")
    text = plain.stderr()
    check("held the loop" not in text and "debug:" not in text,
          "debug-mode lines without debug mode:\n" + text[-2000:])


@test(timeout=90)
def crash_line_names_the_request(ctx):
    so = build_debugapp(ctx)
    for args in ([], ["--debug"]):
        srv = ctx.start(so, workers=1, args=args)
        srv.allow_crash = True  # the worker dies of SIGSEGV on purpose
        before = wait_for(lambda: srv.workers(), 5 * lib.SLOW)
        check(before, "no worker")
        try:
            request(srv.port, "GET", "/crash?x=1")
        except Exception:
            pass  # the connection dies with the worker
        text = logged(srv, "crashed (signal", 10)
        m = re.search(r"worker crashed: SIGSEGV \(signal 11\) in an app's handle callback "
                      r"serving GET /crash for 127\.0\.0\.1:(\d+)", text)
        check(m, "no crash line naming GET /crash %r:\n%s" % (args, text[-3000:]))
        # The master still sees the death by signal and restarts the worker.
        check(re.search(r"worker \d+ \(pid \d+\) crashed \(signal \d+", text),
              "master's crash line %r:\n%s" % (args, text[-3000:]))
        ok = wait_for(lambda: [p for p in srv.workers() if p not in before], 10 * lib.SLOW)
        check(ok, "no new worker after the crash")
        r = None
        for _ in range(50):
            try:
                r = request(srv.port, "GET", "/ok")
                break
            except Exception:
                wait_for(lambda: False, 0.1)
        check(r is not None and r.body == b"ok", "the restarted worker does not serve /ok")
        srv.stop(timeout=10)
