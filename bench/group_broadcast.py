#!/usr/bin/env python3
"""bench/group_broadcast.py - worker memory of one pagi_group broadcast: the
kv example with N WebSocket members that never read (small receive window),
COUNT PUTs of SIZE bytes, each broadcast to all; prints the worker's VmRSS
before/after. On loopback the kernel's send buffers autotune to MiBs and take
the whole message, hiding what the worker holds: run it as root in a private
network namespace with small ones (what bench/README.md's figures used):
  unshare -n sh -c 'ip link set lo up; echo "4096 16384 16384" \
      >/proc/sys/net/ipv4/tcp_wmem; exec python3 bench/group_broadcast.py ...'
Usage: group_broadcast.py PAGID KV_SO [N] [SIZE_KIB] [COUNT]"""
import base64
import os
import socket
import subprocess
import sys
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def rss_kb(pid):
    for ln in open("/proc/%d/status" % pid):
        if ln.startswith("VmRSS"):
            return int(ln.split()[1])


def worker_of(master):
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                st = open("/proc/%s/stat" % d).read()
                cmd = open("/proc/%s/cmdline" % d, "rb").read()
            except OSError:
                continue
            if int(st.rsplit(")", 1)[1].split()[1]) == master and cmd.startswith(b"pagid: worker"):
                return int(d)


def ws(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: a small window
    s.connect(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall(("GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % key).encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += s.recv(4096)
    return s


def main():
    pagid, so = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 50
    size = (int(sys.argv[4]) if len(sys.argv) > 4 else 256) * 1024
    count = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    port = free_port()
    argv = [pagid, "-w", "1", "-l", "127.0.0.1:%d" % port, "-a", so]
    if os.getuid() == 0:
        argv += ["-u", "root"]
    srv = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        for _ in range(100):
            w = worker_of(srv.pid)
            try:
                socket.create_connection(("127.0.0.1", port)).close()
            except OSError:
                w = None
            if w:
                break
            time.sleep(0.1)
        time.sleep(0.5)
        clients = [ws(port) for _ in range(n)]
        time.sleep(0.5)
        before = rss_kb(w)
        for i in range(count):
            body = bytes([ord("a") + i % 26]) * size
            c = socket.create_connection(("127.0.0.1", port))
            c.sendall(b"PUT /kv/big HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n"
                      b"Connection: close\r\n\r\n" % size + body)
            resp = b""
            while True:
                d = c.recv(65536)
                if not d:
                    break
                resp += d
            c.close()
        time.sleep(0.5)
        after = rss_kb(w)
        print("%d members, %d x %d KiB broadcast: worker VmRSS %d kB -> %d kB (+%d kB); last PUT %s"
              % (n, count, size // 1024, before, after, after - before,
                 resp.split(b"\r\n")[0].decode()))
        for s in clients:
            s.close()
    finally:
        srv.terminate()
        err = srv.communicate(timeout=30)[1]
        if srv.returncode != 0 and err:
            sys.stderr.write(err.decode(errors="replace")[-2000:])


main()
