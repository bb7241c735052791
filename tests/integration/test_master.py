"""Master and workers (-w 2): a killed worker is replaced while the service
keeps answering; SIGTERM drains in-flight responses within timeouts.shutdown
(reporting server_shutdown to the app) and exits 0 promptly when idle."""

import os
import signal
import socket
import threading
import time

from lib import (SLOW, TestFailure, app_events, check, check_eq, pid_alive, request, test,
                 wait_event, wait_for)


def wait_workers(srv, n, timeout=5):
    kids = wait_for(lambda: len(srv.workers()) == n and srv.workers(), timeout)
    check(kids, "expected %d workers under master %d, found %r" % (n, srv.pid, srv.workers()))
    return kids


class Hammer(threading.Thread):
    """Requests in a loop on fresh connections; records (time, ok)."""

    def __init__(self, port, path="/"):
        super().__init__(daemon=True)
        self.port = port
        self.path = path
        self.results = []
        self.stop_flag = threading.Event()

    def run(self):
        while not self.stop_flag.is_set():
            t = time.monotonic()
            try:
                r = request(self.port, "GET", self.path, timeout=2)
                ok = r.status == 200
            except Exception:
                ok = False
            self.results.append((t, ok))
            time.sleep(0.005)

    def stop(self):
        self.stop_flag.set()
        self.join(10)


@test(timeout=40)
def worker_killed_is_replaced(ctx):
    srv = ctx.start("hello", workers=2)
    srv.allow_crash = True  # the master may report the SIGKILL as a crash
    before = wait_workers(srv, 2)
    hammer = Hammer(srv.port)
    hammer.start()
    time.sleep(0.5)
    victim = before[0]
    t_kill = time.monotonic()
    os.kill(victim, signal.SIGKILL)
    replaced = wait_for(lambda: [p for p in srv.workers() if p not in before], 1.0, interval=0.01)
    t_new = time.monotonic() - t_kill
    time.sleep(1.5)
    hammer.stop()
    check(replaced, "no new worker within 1s of killing %d (workers now %r)"
          % (victim, srv.workers()))
    check(t_new <= 1.0 * SLOW + 0.1, "replacement took %.2fs" % t_new)
    check_eq(len(srv.workers()), 2, "number of workers after the restart")
    check(victim not in srv.workers(), "killed worker still listed")
    after = [ok for t, ok in hammer.results if t > t_kill]
    late = [ok for t, ok in hammer.results if t > t_kill + 0.5]
    check(len(after) > 10, "only %d requests attempted after the kill" % len(after))
    check(late and all(late), "%d of %d requests failed from 0.5s after the kill"
          % (late.count(False), len(late)))
    failed = after.count(False)
    check(failed <= 5, "%d of %d requests failed around the kill" % (failed, len(after)))
    check(srv.alive(), "master died")
    r = request(srv.port, "GET", "/")
    check_eq(r.status, 200, "status after the restart")


@test(timeout=30)
def sigterm_idle_exits_zero(ctx):
    srv = ctx.start("hello", workers=2)
    kids = wait_workers(srv, 2)
    r = request(srv.port, "GET", "/")
    check_eq(r.status, 200, "status")
    t0 = time.monotonic()
    srv.signal(signal.SIGTERM)
    check(srv.wait_exit(5), "master still running 5s after SIGTERM with nothing in flight")
    check(time.monotonic() - t0 < 3 * SLOW, "idle shutdown took %.1fs" % (time.monotonic() - t0))
    check_eq(srv.returncode, 0, "exit status")
    check(wait_for(lambda: not any(pid_alive(k) for k in kids), 2),
          "workers %r outlived the master" % [k for k in kids if pid_alive(k)])


def slow_reader(port, tid, stop):
    """Reads a long stream slowly; returns the socket's total bytes in a list."""
    got = [0]

    def run():
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=15)
            s.sendall(("GET /stream?n=100000&size=1024 HTTP/1.1\r\nHost: t\r\n"
                       "x-test-id: %s\r\n\r\n" % tid).encode())
            while not stop.is_set():
                data = s.recv(1024)
                if not data:
                    break
                got[0] += len(data)
                time.sleep(0.01)
            s.close()
        except OSError:
            pass

    th = threading.Thread(target=run, daemon=True)
    th.start()
    return th, got


def sigterm_inflight(ctx, workers, strict_release=False):
    srv = ctx.start("lifecycle", workers=workers, config="timeouts:\n  shutdown: 2s\n")
    if workers:
        wait_workers(srv, workers)
    stop = threading.Event()
    th, got = slow_reader(srv.port, "sd1", stop)
    check(wait_event(ctx, "sd1", "send_done", 5), "stream never started: %r"
          % app_events(ctx, "sd1"))
    time.sleep(0.3)
    t0 = time.monotonic()
    srv.signal(signal.SIGTERM)
    exited = srv.wait_exit(2 + 4)
    secs = time.monotonic() - t0
    stop.set()
    th.join(5)
    check(exited, "still running %.1fs after SIGTERM (shutdown timeout 2s)" % secs)
    check(secs > 0.5, "exited after %.2fs: in-flight response not drained for a while" % secs)
    ev = app_events(ctx, "sd1")
    check(any(e == "on_disconnect server_shutdown" for e in ev),
          "no on_disconnect server_shutdown; last events %r" % ev[-6:])
    check_eq(sum(1 for e in ev if e.startswith("on_disconnect")), 1, "on_disconnect count")
    check(not any(e == "on_complete" for e in ev), "on_complete for an aborted stream")
    check_eq(sum(1 for e in ev if e == "release"), 1, "release count")
    check(srv.returncode is not None and srv.returncode >= 0,
          "killed by signal %s" % (-(srv.returncode or 0)))
    if workers == 0:
        # Lifespan spec: lifespan.shutdown comes once all connections are closed.
        with open(ctx.app_log) as f:
            lines = f.read().splitlines()
        check("lifespan lifespan shutdown" in lines, "lifespan.shutdown never delivered")
        shutdown_at = lines.index("lifespan lifespan shutdown")
        check(shutdown_at > lines.index("sd1 on_disconnect server_shutdown"),
              "lifespan.shutdown delivered while the stream was still open: %r" % lines[-8:])
        if strict_release:
            check(shutdown_at > lines.index("sd1 release"),
                  "the request scope was released after lifespan.shutdown (the app's global "
                  "teardown ran before its per-request cleanup): %r" % lines[-8:])


@test(timeout=40)
def sigterm_inflight_stream_master(ctx):
    sigterm_inflight(ctx, 2)


@test(timeout=40)
def sigterm_inflight_stream_single_process(ctx):
    sigterm_inflight(ctx, 0)


@test(timeout=40)
def lifespan_shutdown_after_requests_released(ctx):
    # Per-request release callbacks run before the worker's lifespan.shutdown.
    sigterm_inflight(ctx, 0, strict_release=True)


@test(timeout=40)
def sigterm_lets_short_request_finish(ctx):
    # A request in progress when SIGTERM arrives still gets its response.
    srv = ctx.start("lifecycle", workers=2, config="timeouts:\n  shutdown: 5s\n")
    wait_workers(srv, 2)
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    s.sendall(b"POST /body HTTP/1.1\r\nHost: t\r\nx-test-id: sl1\r\nContent-Length: 10\r\n\r\n01234")
    check(wait_event(ctx, "sl1", "recv http.request", 5), "upload not started")
    srv.signal(signal.SIGTERM)
    time.sleep(0.3)
    s.sendall(b"56789")
    data = b""
    try:
        while b"got 10" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    except OSError as e:
        raise TestFailure("connection broke during graceful shutdown: %s" % e)
    s.close()
    check(data.startswith(b"HTTP/1.1 200") and b"got 10" in data,
          "in-flight request not completed during shutdown: %r" % data[:120])
    check(srv.wait_exit(8), "not exited after the last request finished")
    check_eq(srv.returncode, 0, "exit status")


@test(timeout=30, serial=True)
def workers_serve_in_parallel(ctx):
    # One slow (never answering) request must not block the others.
    srv = ctx.start("lifecycle", workers=2)
    wait_workers(srv, 2)
    blockers = []
    for i in range(4):
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        s.sendall(("GET /never HTTP/1.1\r\nHost: t\r\nx-test-id: blk%d\r\n\r\n" % i).encode())
        blockers.append(s)
    t0 = time.monotonic()
    for _ in range(20):
        r = request(srv.port, "GET", "/hello")
        check_eq(r.status, 200, "status")
    check(time.monotonic() - t0 < 3 * SLOW, "20 requests took %.1fs" % (time.monotonic() - t0))
    for s in blockers:
        s.close()
