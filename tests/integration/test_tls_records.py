"""TLS at the record level: a record that arrives in pieces costs no CPU
while the rest is awaited, and files go out over TLS (sendfile's path
through tls_conn: kernel TLS where the kernel has it, else read and
encrypted in user space) byte-exact, with a slow reader, with and without
PAGID_NO_KTLS."""

import hashlib
import os
import socket
import ssl
import time

from lib import TestPKI, check, check_eq, test, tls_listen, SLOW


def tls_server(ctx, pki, app="hello", env=None, workers=0, extra=""):
    port = ctx.lib.free_port()
    cert, key = pki.issue("server")
    text = "listen:\n" + tls_listen(port, cert, key) + extra
    return ctx.start(app=app, workers=workers, config=text, port=port, listen=False, env=env)


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory_bio_client(pki, port):
    """A TLS client over a plain socket through memory BIOs, so the test
    decides which raw bytes go when. Returns (sock, sslobj, incoming, outgoing)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5 * SLOW)
    c = pki.client_context(alpn=["http/1.1"])
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = c.wrap_bio(inc, out, server_hostname="localhost")
    while True:
        try:
            obj.do_handshake()
            s.sendall(out.read())
            return s, obj, inc, out
        except ssl.SSLWantReadError:
            s.sendall(out.read())
            data = s.recv(65536)
            check(data, "the server closed during the handshake")
            inc.write(data)


@test(timeout=60)
def half_a_record_costs_no_cpu(ctx):
    """Regression: the start of a record made the connection look "pending"
    and the worker read again at once, spinning (1.5 s of CPU in 2 s) until
    the rest came."""
    pki = TestPKI(ctx)
    srv = tls_server(ctx, pki)
    s, obj, inc, out = memory_bio_client(pki, srv.port)
    obj.write(b"GET / HTTP/1.1\r\nHost: localhost\r\nX-Pad: " + b"p" * 3000 + b"\r\n\r\n")
    record = out.read()
    check(len(record) > 3000, "one record of the request: %d bytes" % len(record))
    s.sendall(record[:1000])
    time.sleep(0.3)
    before = cpu_seconds(srv.pid)
    time.sleep(1.5)
    spent = cpu_seconds(srv.pid) - before
    check(spent < 0.2, "the server used %.2f s of CPU in 1.5 s waiting for the rest of a "
                       "record" % spent)
    s.sendall(record[1000:])
    got = b""
    deadline = time.monotonic() + 5 * SLOW
    while b"\r\n\r\n" not in got and time.monotonic() < deadline:
        try:
            got += obj.read(65536)
        except ssl.SSLWantReadError:
            data = s.recv(65536)
            check(data, "closed before the response")
            inc.write(data)
    check(got.startswith(b"HTTP/1.1 200 "), "response after the rest: %r" % got[:60])
    s.close()


def fetch(pki, port, path, rcvbuf=None, headers="", pause_every=0):
    """GET path over TLS; returns (head, body). A small receive buffer and
    pauses keep the server's socket full, so its writes see EAGAIN."""
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    raw.settimeout(10 * SLOW)
    raw.connect(("127.0.0.1", port))
    s = pki.client_context(alpn=["http/1.1"]).wrap_socket(raw, server_hostname="localhost")
    s.sendall(("GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n%s\r\n"
               % (path, headers)).encode())
    data = b""
    n = 0
    while True:
        chunk = s.recv(16384)
        if not chunk:
            break
        data += chunk
        n += 1
        if pause_every and n % pause_every == 0:
            time.sleep(0.01)
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return head.decode("latin-1"), body


def static_files_exact(ctx, env):
    pki = TestPKI(ctx)
    root = os.path.join(ctx.tmpdir, "www")
    os.makedirs(root)
    big = os.urandom(3 * 1024 * 1024 + 12345)
    with open(os.path.join(root, "big.bin"), "wb") as f:
        f.write(big)
    with open(os.path.join(root, "small.txt"), "wb") as f:
        f.write(b"x" * 100)
    srv = tls_server(ctx, pki, app="static:" + root, env=env, workers=1)
    head, body = fetch(pki, srv.port, "/big.bin", rcvbuf=8192, pause_every=16)
    check(head.startswith("HTTP/1.1 200 "), "status: %s" % head.split("\r\n")[0])
    check_eq(len(body), len(big), "body length")
    check_eq(hashlib.sha256(body).hexdigest(), hashlib.sha256(big).hexdigest(), "body digest")
    # a range from an odd offset: sendfile's path from the middle of a file
    head, body = fetch(pki, srv.port, "/big.bin", headers="Range: bytes=70001-1300000\r\n")
    check(head.startswith("HTTP/1.1 206 "), "status: %s" % head.split("\r\n")[0])
    check(body == big[70001:1300001], "range body differs (%d bytes)" % len(body))
    head, body = fetch(pki, srv.port, "/small.txt")
    check_eq(body, b"x" * 100, "small file")


@test(timeout=90)
def static_files_over_tls_exact(ctx):
    static_files_exact(ctx, None)


@test(timeout=90)
def static_files_over_tls_without_ktls(ctx):
    static_files_exact(ctx, {"PAGID_NO_KTLS": "1"})
