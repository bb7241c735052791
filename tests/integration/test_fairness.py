"""Connections spread over workers (docs/ARCHITECTURE.md, "Spreading
connections over workers"): with N workers and C connections opened in a
burst, no worker holds more than 1.1 * C / N + 2 of them, for keep-alive
HTTP, WebSocket and SSE alike; connections waiting in the shared queue are
served when a worker is killed while its peer cannot accept.

Which worker holds a connection is read from /proc: the server side of an
accepted connection is a socket in exactly one worker's fd table."""

import os
import signal
import socket
import time

from lib import (SLOW, Skip, TestFailure, check, check_eq, pid_alive, test, wait_for)

# Serial (run.py runs these alone): how connections spread over workers
# depends on every worker getting a CPU when it wants one.
SERIAL = True

ROUNDS = 3


def worker_sockets(pid):
    """Inodes of the sockets pid holds."""
    inodes = set()
    try:
        fds = os.listdir("/proc/%d/fd" % pid)
    except OSError:
        return inodes
    for fd in fds:
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def established_inodes(port):
    """Inodes of the established TCP sockets whose local port is port."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    cols = line.split()
                    if int(cols[1].rsplit(":", 1)[1], 16) == port and cols[3] == "01":
                        found.add(cols[9])
        except OSError:
            pass
    return found


def holdings(srv, workers):
    """{worker pid: connections to srv.port it holds}."""
    est = established_inodes(srv.port)
    return {pid: len(worker_sockets(pid) & est) for pid in workers}


def wait_ready(srv, n):
    """Until n workers run and the master says all of them passed startup: a
    worker not yet ready takes no connection, which is not unfairness."""
    if os.geteuid() != 0:
        raise Skip("reading the workers' /proc/PID/fd needs root")
    kids = wait_for(lambda: len(srv.workers()) == n and srv.workers(), 10)
    check(kids, "expected %d workers, found %r" % (n, srv.workers()))
    check(wait_for(lambda: "all workers ready" in srv.stderr(), 10), "workers never became ready")
    return kids


def burst(port, count, head):
    """count connections opened back to back, then head sent on each."""
    conns = []
    try:
        for _ in range(count):
            conns.append(socket.create_connection(("127.0.0.1", port), timeout=10 * SLOW))
        for s in conns:
            s.sendall(head)
    except BaseException:
        for s in conns:
            s.close()
        raise
    return conns


def read_head(s):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            raise TestFailure("connection closed before a response head: %r" % data)
        data += chunk
    return data


def read_response(s):
    """One response with a content-length body."""
    data = read_head(s)
    head, body = data.split(b"\r\n\r\n", 1)
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = s.recv(4096)
        if not chunk:
            break
        body += chunk
    return head.split(b"\r\n", 1)[0], body


def spread_rounds(srv, workers, count, head, expect):
    """ROUNDS bursts of count connections held open; each round checks the
    split, closes them and waits for the server to let go."""
    bound = 1.1 * count / len(workers) + 2
    splits = []
    for _ in range(ROUNDS):
        conns = burst(srv.port, count, head)
        try:
            for s in conns:
                first = read_head(s).split(b"\r\n", 1)[0]
                check(expect in first, "unexpected answer %r" % first)
            held = wait_for(lambda: (lambda h: sum(h.values()) == count and h)(
                holdings(srv, workers)), 5)
            check(held, "the workers hold %r, not %d connections in all"
                  % (holdings(srv, workers), count))
            split = sorted(held.values(), reverse=True)
            splits.append(split)
            check(split[0] <= bound, "%d connections over %d workers split %r: one holds %d, "
                  "over the bound %.2f (rounds so far %r)"
                  % (count, len(workers), split, split[0], bound, splits))
        finally:
            for s in conns:
                s.close()
        check(wait_for(lambda: sum(holdings(srv, workers).values()) == 0, 5),
              "the workers still hold %r after the clients closed" % holdings(srv, workers))
    check(srv.alive(), "server died")
    return splits


KEEPALIVE = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n"
WS = (b"GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
SSE = b"GET /clock HTTP/1.1\r\nHost: t\r\nAccept: text/event-stream\r\n\r\n"


def keepalive_spread(ctx, workers):
    srv = ctx.start("hello", workers=workers)
    kids = wait_ready(srv, workers)
    for count in (10, 50, 200):
        splits = spread_rounds(srv, kids, count, KEEPALIVE, b" 200 ")
        ctx.note("%d workers, %d keep-alive connections: %r" % (workers, count, splits))


@test(timeout=90)
def keepalive_two_workers(ctx):
    keepalive_spread(ctx, 2)


@test(timeout=90)
def keepalive_four_workers(ctx):
    keepalive_spread(ctx, 4)


@test(timeout=90)
def websocket_two_workers(ctx):
    srv = ctx.start("demo", workers=2)
    kids = wait_ready(srv, 2)
    for count in (10, 50, 200):
        spread_rounds(srv, kids, count, WS, b" 101 ")


@test(timeout=90)
def sse_two_workers(ctx):
    srv = ctx.start("demo", workers=2)
    kids = wait_ready(srv, 2)
    for count in (10, 50, 200):
        spread_rounds(srv, kids, count, SSE, b" 200 ")


@test(timeout=60)
def queued_connections_survive_worker_kill(ctx):
    # Both workers stopped: a burst waits in the shared accept queue. One is
    # killed; its replacement serves every queued connection although the
    # other worker still looks ready (slot, fresh heartbeat) and holds fewer
    # connections: a gated worker takes what no peer takes.
    srv = ctx.start("hello", workers=2, config="timeouts:\n  heartbeat: 60s\n")
    srv.allow_crash = True  # the master reports the SIGKILL
    victim, stuck = wait_ready(srv, 2)
    for pid in (victim, stuck):
        os.kill(pid, signal.SIGSTOP)
    conns = []
    try:
        conns = burst(srv.port, 50, KEEPALIVE)
        time.sleep(0.2)
        check_eq(sum(holdings(srv, [victim, stuck]).values()), 0, "connections accepted by "
                 "stopped workers")
        os.kill(victim, signal.SIGKILL)
        answered = 0
        for s in conns:
            status, body = read_response(s)
            check(b" 200 " in status, "answer %r" % status)
            answered += 1
        check_eq(answered, 50, "clients answered")
        check(pid_alive(stuck), "the stopped worker went away")
        others = [p for p in srv.workers() if p != stuck]
        check_eq(holdings(srv, [stuck])[stuck], 0, "connections on the stopped worker")
        check_eq(sum(holdings(srv, others).values()), 50, "connections on the replacement")
    finally:
        for s in conns:
            s.close()
        if pid_alive(stuck):
            os.kill(stuck, signal.SIGCONT)
