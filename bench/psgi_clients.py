#!/usr/bin/env python3
"""psgi_clients.py - the misbehaving clients of bench/psgi.sh, and the
ordinary requests timed beside them. Prints one line of figures; never
fails on them (a tool, not a test).

  psgi_clients.py slow PORT N HOLD      N slow clients (a third each:
      slowloris heads, trickled uploads, readers that never read a 4 MiB
      response), held HOLD seconds, then 20 ordinary requests timed
  psgi_clients.py blocked PORT K SECS   K requests that block their
      process for SECS seconds, then 20 ordinary requests timed meanwhile
"""

import socket
import sys
import threading
import time

TIMEOUT = 5.0  # an ordinary request slower than this counts as failed


def ordinary(port, path="/"):
    """Seconds one GET on a new connection took, or None when it failed."""
    t0 = time.monotonic()
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        s.settimeout(TIMEOUT - (time.monotonic() - t0))
        s.sendall(b"GET %s HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n" % path.encode())
        buf = b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            buf += d
        s.close()
        if not buf.startswith(b"HTTP/1.1 200") and not buf.startswith(b"HTTP/1.0 200"):
            return None
        return time.monotonic() - t0
    except OSError:
        return None


def measure(port, n=20, gap=0.05):
    """n ordinary requests one after another; their latencies (None = failed)."""
    out = []
    for _ in range(n):
        out.append(ordinary(port))
        time.sleep(gap)
    return out


def report(label, lat, bound):
    ok = [x for x in lat if x is not None]
    within = sum(1 for x in ok if x <= bound)
    worst = max(ok) * 1e3 if ok else float("nan")
    p50 = sorted(ok)[len(ok) // 2] * 1e3 if ok else float("nan")
    print("%s answered=%d/%d within_%dms=%d p50_ms=%.1f worst_ms=%.1f"
          % (label, len(ok), len(lat), bound * 1e3, within, p50, worst))


def slow_clients(port, n, hold):
    socks = []
    kinds = ("head", "upload", "reader")
    for i in range(n):
        kind = kinds[i % 3]
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=2)
        except OSError:
            continue
        try:
            if kind == "head":  # slowloris: a request line, then a header byte now and then
                s.sendall(b"GET / HTTP/1.1\r\nHost: bench\r\n")
            elif kind == "upload":  # a 1 MiB upload trickled
                s.sendall(b"POST / HTTP/1.1\r\nHost: bench\r\nContent-Length: 1048576\r\n\r\nx")
            else:  # asks for 4 MiB and never reads
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                s.sendall(b"GET /big?kb=4096 HTTP/1.1\r\nHost: bench\r\n\r\n")
        except OSError:
            pass
        socks.append((kind, s))
    stop = time.monotonic() + hold
    while time.monotonic() < stop:  # keep them alive, slowly
        for kind, s in socks:
            try:
                if kind == "head":
                    s.send(b"X")
                elif kind == "upload":
                    s.send(b"x")
            except OSError:
                pass
        time.sleep(1.0)
    return socks


def main():
    mode, port = sys.argv[1], int(sys.argv[2])
    if mode == "slow":
        n, hold = int(sys.argv[3]), float(sys.argv[4])
        socks = slow_clients(port, n, hold)
        keeper = threading.Event()

        def trickle():  # the slow ones go on while the ordinary ones are timed
            while not keeper.is_set():
                for kind, s in socks:
                    try:
                        if kind in ("head", "upload"):
                            s.send(b"x")
                    except OSError:
                        pass
                keeper.wait(1.0)

        t = threading.Thread(target=trickle, daemon=True)
        t.start()
        report("slow", measure(port), 1.0)
        keeper.set()
        for _, s in socks:
            s.close()
    elif mode == "blocked":
        k, secs = int(sys.argv[3]), float(sys.argv[4])
        ts = [threading.Thread(target=ordinary, args=(port, "/sleep?s=%g" % secs), daemon=True)
              for _ in range(k)]
        for t in ts:
            t.start()
        time.sleep(0.3)  # the blocked ones have their processes
        report("blocked", measure(port, n=20, gap=0.1), 0.3)
        for t in ts:
            t.join(secs + 5)
    else:
        sys.exit("usage: psgi_clients.py slow|blocked PORT ...")


if __name__ == "__main__":
    main()
