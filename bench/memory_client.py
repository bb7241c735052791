#!/usr/bin/env python3
"""bench/memory_client.py - memory per held connection, measured on the server.

Opens COUNT connections to HOST:PORT, brings each into one state (MODE), holds
them all, and prints how much the server process PID grew (VmRSS), in bytes
per connection. Python stdlib only; used by bench/memory.sh.

Modes:
  fresh      connected, nothing sent
  idle       one small GET answered, then idle keep-alive
  idle8k     one GET with an 8 KB header answered, then idle keep-alive
  sse        an event stream (Accept: text/event-stream) after its first bytes
  slowloris  a request head padded to ~30 KB, never finished
  ws         a WebSocket after one echoed message
  wsdeflate  the same with permessage-deflate offered

With --tls CAFILE every connection is TLS (verified against CAFILE, SNI
localhost), the handshake done before the mode's state is reached.
"""
import argparse
import base64
import os
import resource
import socket
import ssl
import sys
import time


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def read_response(s, need_body=True):
    """Read one HTTP response head (+ Content-Length body); returns the head."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("closed before a response")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v.strip())
    while need_body and len(rest) < length:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("closed in a response body")
        rest += chunk
    return head


def ws_frame(payload):
    mask = os.urandom(4)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return bytes([0x81, 0x80 | len(payload)]) + mask + masked


def open_one(host, port, mode, args):
    s = socket.create_connection((host, port), timeout=10)
    if args.tls_context:
        s = args.tls_context.wrap_socket(s, server_hostname="localhost")
    hostline = f"Host: {host}:{port}\r\n"
    if mode == "fresh":
        pass
    elif mode in ("idle", "idle8k"):
        pad = "X-Pad: " + "a" * 8000 + "\r\n" if mode == "idle8k" else ""
        s.sendall(f"GET {args.path} HTTP/1.1\r\n{hostline}{pad}\r\n".encode())
        read_response(s)
    elif mode == "sse":
        # The answer is checked once all are open (check_streams): nginx's
        # rate-limited stand-in sends its head late.
        s.sendall(f"GET {args.sse_path} HTTP/1.1\r\n{hostline}"
                  "Accept: text/event-stream\r\n\r\n".encode())
    elif mode == "slowloris":
        line = "X-Pad-%04d: " + "b" * 1000 + "\r\n"
        head = f"GET {args.path} HTTP/1.1\r\n{hostline}"
        i = 0
        while len(head) < args.slowloris_bytes:
            head += line % i
            i += 1
        s.sendall(head.encode())  # never the final empty line
    elif mode in ("ws", "wsdeflate"):
        key = base64.b64encode(os.urandom(16)).decode()
        ext = "Sec-WebSocket-Extensions: permessage-deflate\r\n" if mode == "wsdeflate" else ""
        s.sendall(f"GET {args.ws_path} HTTP/1.1\r\n{hostline}Upgrade: websocket\r\n"
                  f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                  f"Sec-WebSocket-Version: 13\r\n{ext}\r\n".encode())
        head = read_response(s, need_body=False)
        if not head.startswith(b"HTTP/1.1 101"):
            raise ConnectionError("upgrade refused: " + head.split(b"\r\n")[0].decode())
        s.sendall(ws_frame(b"hello, memory"))
        got = s.recv(4096)
        if not got:
            raise ConnectionError("no echo")
    else:
        raise ValueError(mode)
    s.settimeout(None)
    return s


def check_streams(socks):
    """Every stream was answered 200 (peeked: the bytes stay unread)."""
    for s in socks:
        s.settimeout(30)
        got = s.recv(16) if isinstance(s, ssl.SSLSocket) else s.recv(16, socket.MSG_PEEK)
        if not got.startswith(b"HTTP/1.1 200"):
            raise ConnectionError("stream refused: %r" % got)


def raise_nofile(n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = n + 256
    if soft < want:
        new = want if hard == resource.RLIM_INFINITY else min(want, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= want


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--pid", type=int, required=True, help="the server process to measure")
    ap.add_argument("--mode", required=True)
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--warm", type=int, default=50, help="connections opened and closed first")
    ap.add_argument("--settle", type=float, default=1.5, help="seconds before measuring")
    ap.add_argument("--path", default="/")
    ap.add_argument("--sse-path", default="/")
    ap.add_argument("--ws-path", default="/")
    ap.add_argument("--slowloris-bytes", type=int, default=30000)
    ap.add_argument("--tls", metavar="CAFILE", help="connect over TLS, trusting CAFILE")
    ap.add_argument("--verbose", action="store_true",
                    help="also print the RSS before and after (bytes) on stderr")
    args = ap.parse_args()
    args.tls_context = ssl.create_default_context(cafile=args.tls) if args.tls else None
    if not raise_nofile(args.count):
        print("n/a (open-file limit)")
        return 1
    try:
        warm = [open_one(args.host, args.port, args.mode, args) for _ in range(args.warm)]
        for s in warm:
            s.close()
        time.sleep(args.settle)
        before = rss_bytes(args.pid)
        held = [open_one(args.host, args.port, args.mode, args) for _ in range(args.count)]
        time.sleep(args.settle)
        after = rss_bytes(args.pid)
        if args.mode == "sse":
            check_streams(held)
    except (OSError, ValueError) as e:
        print(f"n/a ({e})")
        return 1
    if args.verbose:
        print("rss before %d after %d" % (before, after), file=sys.stderr)
    print((after - before) // args.count)
    for s in held:
        s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
