"""Adversarial review, round three (the attack branch): findings that
reproduce against main at the time of writing. Each test states what
happened and what should. They are expected to FAIL until fixed."""

import os
import socket
import struct
import time

from lib import check, check_eq, request, test


# ---------------------------------------------------------------------------
# a minimal HTTP/2 client: raw frames, HPACK literals without indexing
# ---------------------------------------------------------------------------

def _frame(t, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([t, flags]) + struct.pack(">I", sid) + payload


def _hpack_literal(fields):
    out = b""
    for n, v in fields:
        n, v = n.encode(), v.encode()
        assert len(n) < 127 and len(v) < 127
        out += b"\x00" + bytes([len(n)]) + n + bytes([len(v)]) + v
    return out


def _h2_zero_window_streams(port, path, n_streams):
    """A connection whose SETTINGS shut every stream window, with n_streams
    GETs of path on it; nothing more is ever read or acknowledged."""
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + _frame(4, 0, 0, struct.pack(">HI", 4, 0)))
    block = b""
    for k in range(n_streams):
        hdr = _hpack_literal([(":method", "GET"), (":path", path), (":scheme", "http"),
                              (":authority", "t")])
        block += _frame(1, 0x4 | 0x1, 1 + 2 * k, hdr)
    block += _frame(4, 1, 0)  # ack the server's SETTINGS
    s.sendall(block)
    return s


def _rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


@test(timeout=60, serial=True)
def h2_cached_small_file_is_not_copied_per_stream(ctx):
    """docs/static.md: files up to 64 KiB are held once in memory and sent
    over HTTP/2 from that memory. Before the fix each stream copied the
    whole file into its own buffer, so 40 connections x 100 streams with
    shut windows pinned ~4000 x 64 KiB = 250 MiB in one worker for
    timeouts.http2_window from ~200 KB of client input. Now a stream holds
    a reference to the cached pagi_buf (h2_response.c, st->held)."""
    root = os.path.join(ctx.tmpdir, "www")
    os.makedirs(root)
    with open(os.path.join(root, "f64k.bin"), "wb") as f:
        f.write(b"x" * 65536)
    port = ctx.lib.free_port()
    conf = ("listen:\n  - {address: 127.0.0.1:%d, http2: prior-knowledge}\n"
            "app: {static: '%s'}\nlimits: {max_connections: 1000}\n" % (port, root))
    srv = ctx.start(app=None, config=conf, listen=False, port=port)
    time.sleep(0.3)
    base = _rss_kib(srv.pid)
    conns, n_conns, n_streams = [], 40, 100
    try:
        for _ in range(n_conns):
            conns.append(_h2_zero_window_streams(port, "/f64k.bin", n_streams))
        time.sleep(2)
        grown = _rss_kib(srv.pid) - base
        copies = n_conns * n_streams * 64
        ctx.note("RSS grew by %d KiB for %d streams of a 64 KiB cached file" %
                 (grown, n_conns * n_streams))
        check(grown < copies // 4,
              "worker RSS grew by %d MiB for %d zero-window streams of one cached 64 KiB file "
              "(~%d MiB = a copy per stream); the file should be held once" %
              (grown // 1024, n_conns * n_streams, copies // 1024))
    finally:
        for s in conns:
            s.close()


@test()
def pubsub_origin_same_origin_is_not_decided_by_the_client_host(ctx):
    """docs/pubsub.md: the Origin check exists so that a page of another
    site cannot make a visitor's browser publish/subscribe "from inside
    their network, to a pagid they can reach and the attacker cannot".
    Under DNS rebinding (attacker.example re-resolved to the pagid's
    address) the browser sends Host: attacker.example:PORT and Origin:
    http://attacker.example:PORT; before the fix the app answered 202. A
    Host that is a DNS name no longer makes an Origin "same origin" (only
    an address does, or the origin listed in allowed_origins)."""
    srv = ctx.start("pubsub")
    name = "rebind.attacker.example:%d" % srv.port
    r = request(srv.port, "POST", "/chan", headers={"Host": name, "Origin": "http://" + name,
                                                   "Content-Type": "text/plain"}, body=b"x")
    check(r.status in (403, 421),
          "a publish from origin http://%s with Host %s (DNS rebinding) was answered %d" %
          (name, name, r.status))
    # The address form is still the request's own; a listed name is trusted.
    own = "127.0.0.1:%d" % srv.port
    r = request(srv.port, "POST", "/chan", headers={"Host": own, "Origin": "http://" + own,
                                                   "Content-Type": "text/plain"}, body=b"x")
    check_eq(r.status, 202, "same origin by address")
    srv2 = ctx.start("pubsub", config="pubsub:\n  allowed_origins: ['http://%s']\n" % name)
    r = request(srv2.port, "POST", "/chan", headers={"Host": name, "Origin": "http://" + name,
                                                    "Content-Type": "text/plain"}, body=b"x")
    check_eq(r.status, 202, "a listed name")
