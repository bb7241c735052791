#!/usr/bin/env python3
"""psgi_clients.py - the misbehaving clients of bench/psgi.sh, and the
ordinary requests timed beside them. Prints one line of figures; never
fails on them (a tool, not a test).

  psgi_clients.py slow PORT N HOLD      N slow clients (a third each:
      slowloris heads, trickled uploads, readers that never read a 4 MiB
      response), held HOLD seconds, then 20 ordinary requests timed
  psgi_clients.py blocked PORT K SECS   K requests that block their
      process for SECS seconds, then 20 ordinary requests timed meanwhile
  psgi_clients.py fair PORT N SECS      N keep-alive clients, each sending
      GET / again as soon as its answer is whole, for SECS seconds: how
      many got any answer, and the longest any of them waited for its
      first (wrk's figures count only the answers that came, so a server
      that serves some connections and starves the rest looks fine there)
"""

import selectors
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


def fair(port, n, secs):
    """n keep-alive clients in one loop for secs seconds; one line of figures."""
    req = b"GET / HTTP/1.1\r\nHost: bench\r\n\r\n"
    sel = selectors.DefaultSelector()
    count, pending, first = [0] * n, [b""] * n, [None] * n
    t0 = time.monotonic()
    for i in range(n):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
            s.setblocking(False)
            s.send(req)
            sel.register(s, selectors.EVENT_READ, i)
        except OSError:
            pass
    end = t0 + secs
    while time.monotonic() < end and sel.get_map():
        for key, _ in sel.select(0.1):
            i, s = key.data, key.fileobj
            try:
                d = s.recv(65536)
            except OSError:
                d = b""
            if not d:  # closed (a server's keepalive limit): this client is done
                sel.unregister(s)
                s.close()
                continue
            pending[i] += d
            while b"\r\n\r\n" in pending[i]:
                head, rest = pending[i].split(b"\r\n\r\n", 1)
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                if len(rest) < length:
                    break
                pending[i] = rest[length:]
                count[i] += 1
                if first[i] is None:
                    first[i] = time.monotonic() - t0
                try:
                    s.send(req)
                except OSError:
                    break
    for key in list(sel.get_map().values()):
        key.fileobj.close()
    served = sum(1 for c in count if c)
    waits = [f for f in first if f is not None]
    print("%d/%d %.0f" % (served, n, max(waits) * 1e3 if waits else float("nan")))


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
    elif mode == "fair":
        fair(port, int(sys.argv[3]), float(sys.argv[4]))
    else:
        sys.exit("usage: psgi_clients.py slow|blocked|fair PORT ...")


if __name__ == "__main__":
    main()
