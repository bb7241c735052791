"""Worker memory: slow clients, and lifespan scopes left at exit.

After slow clients (issue 11): a Perl producer that streams as
fast as the transport allows and never looks at its connection (as the
reference server's backpressure example does) is served to clients that read
almost nothing and are then cut off with a reset, cycle after cycle. Each
request's scope and closures must be let go of, and the worker's RSS must come
back near its baseline rather than keep what the cut-off streams cost (it kept
tens of MB when every no-op send after the disconnect held a Perl hold and a
queued job, and the run queue never shrank).

At exit: a lifespan handler that never answers lifespan.shutdown (alone, or
mounted beside one that does) is cut off by the worker's shutdown limit, and
its scope must still be released before the app is unloaded (LSan, in the
sanitizer build, fails the run otherwise: single-process mode, as a worker
under a master ends with _exit and is not leak-checked); the order of the lifespan events
stays table order up, reverse order down.
"""

import socket
import struct
import time

from lib import SLOW, check, check_eq, request, test, wait_for

# Serial (run.py runs these alone): RSS and the time it takes to settle are
# measured.
SERIAL = True
from test_perl import app, app_log

CLIENTS = 20
CYCLES = 5 if SLOW == 1 else 3  # sanitizer builds: RSS is not judged, the releases are
STREAM_MIB = 32  # 8,192 sends per request, nearly all after its client is gone


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS for %d" % pid)


def worker_of(srv):
    """The worker, once ready (loaded, past lifespan startup): with preload
    it is forked by the zygote, so it appears only after the load."""
    check(wait_for(lambda: "all workers ready" in srv.stderr(), 20),
          "the worker never became ready:\n" + srv.stderr()[-2000:])
    check(wait_for(lambda: srv.workers(), 5), "no worker process")
    return srv.workers()[0]


def count(prefix):
    return lambda log: sum(1 for ln in log if ln.startswith(prefix))


def slow_clients(port, n, path):
    """n clients that ask for path and read a few bytes at most; returned open."""
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.settimeout(5 * SLOW)
        s.connect(("127.0.0.1", port))
        s.sendall(("GET %s HTTP/1.1\r\nHost: t\r\n\r\n" % path).encode())
        socks.append(s)
    for s in socks:
        check(s.recv(1000).startswith(b"HTTP/1.1 200"), "a streamed response began")
    return socks


def reset(socks):
    for s in socks:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()


@test(timeout=240)
def slow_clients_cut_off_mid_stream(ctx):
    """Five cycles of 20 clients that stop reading a 32 MiB stream and are reset:
    every request ends and is released, and RSS settles near its baseline."""
    srv = ctx.start(app(ctx, "slow_stream"), workers=1)
    pid = worker_of(srv)
    time.sleep(0.5)
    base = rss_kib(pid)
    settled = []
    for cycle in range(1, CYCLES + 1):
        want = cycle * CLIENTS
        socks = slow_clients(srv.port, CLIENTS, "/stream/%d" % STREAM_MIB)
        check(wait_for(lambda: count("start ")(app_log(ctx)) == want, 10),
              "cycle %d: %d requests started" % (cycle, count("start ")(app_log(ctx))))
        time.sleep(0.5)  # the producers fill their queues to the high-water mark
        peak = rss_kib(pid)
        reset(socks)
        for what in ("gone ", "end ", "freed "):
            check(wait_for(lambda: count(what)(app_log(ctx)) == want, 30),
                  "cycle %d: %d of %d requests '%s'" % (cycle, count(what)(app_log(ctx)), want,
                                                          what.strip()))
        # memtrim gives the heap back within a second, at most every 5 s: wait for it.
        wait_for(lambda: rss_kib(pid) < base + 1024, 7)
        settled.append(rss_kib(pid))
        ctx.note("cycle %d: baseline %d KiB, peak %d KiB, settled %d KiB"
                 % (cycle, base, peak, settled[-1]))
    log = app_log(ctx)
    # The reset is seen by a read (client_closed) or by a write (write_error).
    reasons = {ln.split()[2] for ln in log if ln.startswith("gone ")}
    check(reasons <= {"client_closed", "write_error"}, "on_disconnect reasons: %r" % reasons)
    check(srv.alive(), "pagid died")
    if SLOW > 1:
        return  # sanitizer builds: ASan's quarantine keeps freed memory resident
    # Generous bounds (a shared machine); the fault kept 10+ MB per cycle's burst.
    check(settled[-1] - base < 3 * 1024,
          "worker RSS settled %d KiB above its baseline after %d cycles: %r"
          % (settled[-1] - base, CYCLES, settled))
    check(settled[-1] - settled[0] < 1024,
          "worker RSS grew %d KiB from cycle 1 to cycle %d: %r"
          % (settled[-1] - settled[0], CYCLES, settled))


def lifespan_lines(ctx):
    return [ln for ln in app_log(ctx) if ln.endswith(("startup", "shutdown"))]


@test(timeout=60)
def lifespan_shutdown_never_answered_is_released(ctx):
    """The handler takes lifespan.shutdown and waits for good: the worker gives
    up after its limit, warns, and exits cleanly with the scope released."""
    srv = ctx.start(app(ctx, "lifespan_hang"), workers=0)
    check_eq(request(srv.port).body, b"hang", "body")
    check_eq(srv.stop(timeout=20), 0, "exit status")
    check_eq(lifespan_lines(ctx), ["hang startup", "hang shutdown"], "lifespan events")
    check("lifespan shutdown did not finish in time" in srv.stderr(),
          "the limit was reported:\n%s" % srv.stderr()[-600:])


@test(timeout=60)
def mounted_lifespan_shutdown_never_answered_is_released(ctx):
    """Two mounted apps: startup in table order, shutdown in reverse; the first
    app never answers its shutdown, the worker's limit ends the wait, and both
    apps' lifespan scopes (and the table's own) are released at exit."""
    hang, polite = app(ctx, "lifespan_hang"), app(ctx, "lifespan_polite")
    srv = ctx.start(None, workers=0, config="app: hello\nmounts:\n"
                    "  - {path: /a, app: %s}\n  - {path: /b, app: %s}\n" % (hang, polite))
    check_eq(request(srv.port, path="/a").body, b"hang", "/a")
    check_eq(request(srv.port, path="/b").body, b"polite", "/b")
    check_eq(srv.stop(timeout=20), 0, "exit status")
    check_eq(lifespan_lines(ctx), ["hang startup", "polite startup", "polite shutdown",
                                   "hang shutdown"], "lifespan events, in order")
    check("lifespan shutdown did not finish in time" in srv.stderr(),
          "the limit was reported:\n%s" % srv.stderr()[-600:])
