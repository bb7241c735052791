"""TLS listeners read ahead (one read(2) takes whole records, not a header
and then a body): several records that arrive in one TCP segment are all
decrypted and answered, none left waiting in OpenSSL's buffer for a
readiness event that never comes."""

import socket
import ssl

import lib
from lib import SLOW, check, free_port, test


def handshake(port, ssl_ctx):
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ssl_ctx.wrap_bio(inc, out, server_hostname="localhost")
    sock = socket.create_connection(("127.0.0.1", port), timeout=10 * SLOW)
    while True:
        try:
            obj.do_handshake()
            break
        except ssl.SSLWantReadError:
            sock.sendall(out.read())
            got = sock.recv(65536)
            check(got, "closed during the handshake")
            inc.write(got)
    sock.sendall(out.read())
    return sock, obj, inc, out


def read_all(sock, obj, inc):
    data = b""
    while True:
        try:
            d = sock.recv(65536)
        except socket.timeout:
            break
        if not d:
            break
        inc.write(d)
        try:
            while True:
                got = obj.read(65536)
                if not got:
                    break
                data += got
        except (ssl.SSLWantReadError, ssl.SSLZeroReturnError, ssl.SSLEOFError):
            pass
    return data


@test(timeout=30)
def records_in_one_segment_all_answered(ctx):
    pki = lib.TestPKI(ctx)
    cert, key = pki.issue("server")
    port = free_port()
    ctx.start(app="hello", listen=False, port=port,
              config="listen:\n" + lib.tls_listen(port, cert, key))
    for n in (2, 8, 40):
        sock, obj, inc, out = handshake(port, pki.client_context())
        try:
            # n requests, each its own TLS record, all in one sendall.
            for _ in range(n - 1):
                obj.write(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
            obj.write(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            sock.sendall(out.read())
            data = read_all(sock, obj, inc)
        finally:
            sock.close()
        check(data.count(b"HTTP/1.1 200") == n and data.count(b"Hello from PAGI") == n,
              "%d pipelined records in one segment: %d responses (%r...)"
              % (n, data.count(b"HTTP/1.1 200"), data[:200]))
