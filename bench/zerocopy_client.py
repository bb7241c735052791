#!/usr/bin/env python3
"""bench/zerocopy_client.py - worker memory while big responses are queued.

Opens COUNT connections to HOST:PORT with a small receive window, asks each
for PATH (an 8 MiB response), reads only the head and lets the rest wait in
the server, then prints one line: the worker's (PID) VmRSS before, VmRSS
while the responses are queued, VmHWM (peak), in KiB, and the growth per
queued response in KiB. Then it reads every response to the end and checks
its length. Python stdlib only; used by bench/zerocopy.sh.
"""
import argparse
import socket
import time


def status_kib(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise RuntimeError("no " + key)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--path", required=True)
    ap.add_argument("--count", type=int, default=4)
    ap.add_argument("--settle", type=float, default=1.0)
    a = ap.parse_args()

    before = status_kib(a.pid, "VmRSS")
    socks, rests, lengths = [], [], []
    for _ in range(a.count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
        s.settimeout(60)
        s.connect(("127.0.0.1", a.port))
        s.sendall(("GET %s HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n"
                   % a.path).encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                raise SystemExit("closed before a response")
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        length = None
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                length = int(v.strip())
        socks.append(s)
        rests.append(len(rest))
        lengths.append(length)
    time.sleep(a.settle)  # the server has queued what the sockets do not take
    held = status_kib(a.pid, "VmRSS")
    peak = status_kib(a.pid, "VmHWM")
    for s, got, length in zip(socks, rests, lengths):
        while True:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            got += len(chunk)
        s.close()
        if length is not None and got != length:
            raise SystemExit("short response: %d of %d bytes" % (got, length))
    print("%d %d %d %d" % (before, held, peak, (held - before) // a.count))


if __name__ == "__main__":
    main()
