"""HTTP/1.1 request-path attacks: the smuggling set (each refused with its
error status, answered once, the connection closed, never a second request
parsed from the leftovers), legal pipelines still parsed exactly, and the
header / idle / keepalive timeouts enforced over many slow connections."""

import socket
import threading
import time

from common import SLOW, Server, check, free_port, statuses, h1_raw, wait_for

SMUGGLE = b"GET /smuggled HTTP/1.1\r\nHost: t\r\n\r\n"


class H1Target:
    def __init__(self, binary, workdir):
        self.port = free_port()
        conf = ("listen:\n  - 127.0.0.1:%d\napp: echo\n"
                "limits:\n  max_body_size: 64k\n"
                "timeouts:\n  header: 2s\n  idle: 2s\n  keepalive: 2s\n  request: 2s\n" % self.port)
        self.srv = Server(binary, workdir, "h1", conf)


def head(*lines):
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


P = "POST / HTTP/1.1"
# (name, bytes, accepted statuses)
CASES = [
    ("cl_te", head(P, "Host: t", "Content-Length: 5", "Transfer-Encoding: chunked") + b"0\r\n\r\n" + SMUGGLE, {400}),
    ("te_cl", head(P, "Host: t", "Transfer-Encoding: chunked", "Content-Length: 40") + b"0\r\n\r\n" + SMUGGLE, {400}),
    ("dup_cl_differ", head(P, "Host: t", "Content-Length: 0", "Content-Length: 37") + SMUGGLE, {400}),
    ("dup_cl_same", head(P, "Host: t", "Content-Length: 37", "Content-Length: 37") + SMUGGLE, {400}),
    ("cl_list", head(P, "Host: t", "Content-Length: 37, 37") + SMUGGLE, {400}),
    ("cl_plus", head(P, "Host: t", "Content-Length: +37") + SMUGGLE, {400}),
    ("cl_negative", head(P, "Host: t", "Content-Length: -1") + SMUGGLE, {400}),
    ("cl_hex", head(P, "Host: t", "Content-Length: 0x25") + SMUGGLE, {400}),
    ("cl_overflow", head(P, "Host: t", "Content-Length: 18446744073709551653") + SMUGGLE, {400, 413}),
    ("cl_inner_space", head(P, "Host: t", "Content-Length: 3 7") + SMUGGLE, {400}),
    ("cl_empty", head(P, "Host: t", "Content-Length:") + SMUGGLE, {400}),
    ("te_obs_fold", head(P, "Host: t", "Transfer-Encoding:", " chunked") + b"0\r\n\r\n" + SMUGGLE, {400}),
    ("te_obs_fold_cl", head(P, "Host: t", "Content-Length: 5", "X: y", " Transfer-Encoding: chunked")
     + b"0\r\n\r\n" + SMUGGLE, {400}),
    ("te_space_before_colon", head(P, "Host: t", "Transfer-Encoding : chunked", "Content-Length: 5")
     + b"0\r\n\r\n" + SMUGGLE, {400}),
    ("te_tab_before_colon", head(P, "Host: t", "Transfer-Encoding\t: chunked") + b"0\r\n\r\n" + SMUGGLE, {400}),
    ("te_vtab_value", head(P, "Host: t", "Transfer-Encoding: \x0bchunked") + b"0\r\n\r\n" + SMUGGLE, {400, 501}),
    ("te_xchunked", head(P, "Host: t", "Transfer-Encoding: xchunked") + b"0\r\n\r\n" + SMUGGLE, {400, 501}),
    ("te_chunked_identity", head(P, "Host: t", "Transfer-Encoding: chunked, identity") + b"0\r\n\r\n" + SMUGGLE,
     {400, 501}),
    ("te_chunked_twice", head(P, "Host: t", "Transfer-Encoding: chunked", "Transfer-Encoding: chunked")
     + b"0\r\n\r\n" + SMUGGLE, {400, 501}),
    ("te_identity", head(P, "Host: t", "Transfer-Encoding: identity", "Content-Length: 5") + b"hello" + SMUGGLE,
     {400, 501}),
    ("te_http10", head("POST / HTTP/1.0", "Host: t", "Transfer-Encoding: chunked") + b"0\r\n\r\n" + SMUGGLE,
     {400}),
    ("chunk_size_overflow", head(P, "Host: t", "Transfer-Encoding: chunked")
     + b"10000000000000000000000005\r\nhello\r\n0\r\n\r\n" + SMUGGLE, {400, 413}),
    ("chunk_size_64bit_wrap", head(P, "Host: t", "Transfer-Encoding: chunked")
     + b"FFFFFFFFFFFFFFFF\r\nhello\r\n0\r\n\r\n" + SMUGGLE, {400, 413}),
    ("chunk_size_negative", head(P, "Host: t", "Transfer-Encoding: chunked") + b"-5\r\nhello\r\n0\r\n\r\n"
     + SMUGGLE, {400}),
    ("chunk_size_0x", head(P, "Host: t", "Transfer-Encoding: chunked") + b"0x5\r\nhello\r\n0\r\n\r\n" + SMUGGLE,
     {400}),
    ("chunk_size_space", head(P, "Host: t", "Transfer-Encoding: chunked") + b" 5\r\nhello\r\n0\r\n\r\n" + SMUGGLE,
     {400}),
    ("chunk_size_bare_lf", head(P, "Host: t", "Transfer-Encoding: chunked") + b"5\nhello\r\n0\r\n\r\n" + SMUGGLE,
     {400}),
    ("chunk_data_too_long", head(P, "Host: t", "Transfer-Encoding: chunked") + b"3\r\nhello\r\n0\r\n\r\n" + SMUGGLE,
     {400}),
    ("chunk_ext_bare_lf", head(P, "Host: t", "Transfer-Encoding: chunked") + b"5;a=b\nhello\r\n0\r\n\r\n" + SMUGGLE,
     {400}),
    ("chunk_ext_nul", head(P, "Host: t", "Transfer-Encoding: chunked") + b"5;a=\x00\r\nhello\r\n0\r\n\r\n"
     + SMUGGLE, {400}),
    ("chunk_ext_cr", head(P, "Host: t", "Transfer-Encoding: chunked") + b"5;a\rb\r\nhello\r\n0\r\n\r\n" + SMUGGLE,
     {400}),
    ("last_chunk_bare_lf", head(P, "Host: t", "Transfer-Encoding: chunked") + b"5\r\nhello\r\n0\n\n" + SMUGGLE,
     {400}),
    ("trailer_bare_lf", head(P, "Host: t", "Transfer-Encoding: chunked") + b"0\r\nX: y\n\r\n" + SMUGGLE, {400}),
    ("trailer_obs_fold", head(P, "Host: t", "Transfer-Encoding: chunked") + b"0\r\nX: y\r\n z\r\n\r\n" + SMUGGLE,
     {400}),
    ("trailer_space_colon", head(P, "Host: t", "Transfer-Encoding: chunked") + b"0\r\nX : y\r\n\r\n" + SMUGGLE,
     {400}),
    ("trailer_nul", head(P, "Host: t", "Transfer-Encoding: chunked") + b"0\r\nX: a\x00b\r\n\r\n" + SMUGGLE, {400}),
    ("bare_lf_head", b"GET / HTTP/1.1\nHost: t\n\n" + SMUGGLE, {400}),
    ("bare_lf_one_line", b"GET / HTTP/1.1\r\nHost: t\nX: y\r\n\r\n" + SMUGGLE, {400}),
    ("bare_cr", b"GET / HTTP/1.1\r\nHost: t\rX: y\r\n\r\n" + SMUGGLE, {400}),
    ("nul_in_value", head("GET / HTTP/1.1", "Host: t", "X: a\x00b") + SMUGGLE, {400}),
    ("nul_in_name", head("GET / HTTP/1.1", "Host: t", "X\x00Y: b") + SMUGGLE, {400}),
    ("nul_in_target", b"GET /a\x00b HTTP/1.1\r\nHost: t\r\n\r\n" + SMUGGLE, {400}),
    ("space_before_colon", head("GET / HTTP/1.1", "Host : t") + SMUGGLE, {400}),
    ("cl_space_before_colon", head(P, "Host: t", "Content-Length : 37") + SMUGGLE, {400}),
    ("leading_obs_fold", b"GET / HTTP/1.1\r\n Host: t\r\n\r\n" + SMUGGLE, {400}),
    ("double_host", head("GET / HTTP/1.1", "Host: a", "Host: b") + SMUGGLE, {400}),
    ("request_line_extra_space", b"GET  / HTTP/1.1\r\nHost: t\r\n\r\n" + SMUGGLE, {400}),
    ("version_garbage", b"GET / HTTP/1.1x\r\nHost: t\r\n\r\n" + SMUGGLE, {400, 505}),
    ("no_host_11", b"GET / HTTP/1.1\r\nX: y\r\n\r\n" + SMUGGLE, {400}),
    ("chunked_body_past_limit", head(P, "Host: t", "Transfer-Encoding: chunked")
     + b"".join(b"4000\r\n" + b"z" * 0x4000 + b"\r\n" for _ in range(5)) + b"0\r\n\r\n" + SMUGGLE, {413}),
]


def smuggling_set(t):
    """Each malformed request: exactly one response, of its error status, then
    the connection closed; never a response for /smuggled (a second request
    parsed from the leftovers)."""
    bad = []
    for name, data, ok in CASES:
        got = h1_raw(t.port, data, timeout=4)
        st = statuses(got)
        if len(st) != 1 or st[0] not in ok or b"smuggled" in got:
            bad.append("%s: statuses %r, smuggled=%s, %r" % (name, st, b"smuggled" in got, got[:60]))
    check(not bad, "%d of %d refused wrongly: %s" % (len(bad), len(CASES), " ;; ".join(bad[:6])))
    check(t.srv.alive(), "server died")
    return "%d smuggling shapes refused once with their status, none parsed twice" % len(CASES)


def smuggling_split_writes(t):
    """The same set written one byte at a time on 10 of them and split at
    every CRLF on the rest (a parser whose state crosses reads differently
    from a lockstep copy shows here)."""
    bad = []
    for k, (name, data, ok) in enumerate(CASES):
        s = socket.create_connection(("127.0.0.1", t.port), timeout=4 * SLOW)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pieces = [data[i:i + 1] for i in range(len(data))] if k % 5 == 0 else \
            [p + b"\n" for p in data.split(b"\n")]
        try:
            for p in pieces:
                if p:
                    s.sendall(p)
                    if k % 5 == 0:
                        time.sleep(0.0005)
        except OSError:
            pass
        got = b""
        try:
            while True:
                b = s.recv(65536)
                if not b:
                    break
                got += b
        except (socket.timeout, OSError):
            pass
        s.close()
        st = statuses(got)
        if len(st) != 1 or st[0] not in ok or b"smuggled" in got:
            bad.append("%s: statuses %r smuggled=%s" % (name, st, b"smuggled" in got))
    check(not bad, "%d refused wrongly when split: %s" % (len(bad), " ;; ".join(bad[:6])))
    return "the set split byte-wise/line-wise: same verdicts"


def legal_pipelines_exact(t):
    """Legal framing right at the edges is parsed exactly: CL body then a
    request, chunked with extensions and trailers then a request, a body
    containing request-looking bytes: responses count and echo right."""
    body = b"GET /inner HTTP/1.1\r\nHost: t\r\n\r\n"
    data = (head(P, "Host: t", "Content-Length: %d" % len(body)) + body
            + head(P, "Host: t", "Transfer-Encoding: chunked")
            + b"5;name=val;x=\"q\"\r\nhello\r\n1a\r\n" + body[:26] + b"\r\n0\r\nX-Trailer: v\r\n\r\n"
            + head("GET /third HTTP/1.1", "Host: t", "Connection: close"))
    for mode in ("whole", "bytewise"):
        s = socket.create_connection(("127.0.0.1", t.port), timeout=5 * SLOW)
        if mode == "whole":
            s.sendall(data)
        else:
            for i in range(len(data)):
                s.sendall(data[i:i + 1])
        got = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += b
        s.close()
        check(statuses(got) == [200, 200, 200], "%s: statuses %r" % (mode, statuses(got)))
        check(got.count(body) == 1 and b"hello" + body[:26] in got and b"x-echo-path: /third" in got.lower(),
              "%s: bodies/paths wrong: %r" % (mode, got[:400]))
        import re
        paths = re.findall(rb"x-echo-path: (\S+)", got.lower())
        check(paths == [b"/", b"/", b"/third"], "%s: body bytes parsed as a request? paths %r" % (mode, paths))
    return "CL body, chunked+ext+trailer, then a GET: 3 responses, bodies exact (whole and byte-wise)"


def slowloris_heads(t):
    """200 connections send a head a byte every 0.5 s: all cut after
    timeouts.header (2 s) even though they keep sending (about 2-4 s, never
    past 6 s), each answered 408 or closed; a normal client is answered
    meanwhile in under 0.5 s."""
    base = t.srv.baseline()
    n = 200
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", t.port))
        s.setblocking(False)
        socks.append([s, 0, None, b""])
    head_bytes = b"GET / HTTP/1.1\r\nHost: t\r\nX-Slow: " + b"a" * 100
    t0 = time.monotonic()
    worst = 0
    while time.monotonic() - t0 < 8 * SLOW and any(x[2] is None for x in socks):
        for x in socks:
            if x[2] is not None:
                continue
            try:
                x[0].send(head_bytes[x[1]:x[1] + 1])
                x[1] = min(x[1] + 1, len(head_bytes) - 1)
            except OSError:
                x[2] = time.monotonic() - t0
                continue
            try:
                b = x[0].recv(4096)
                x[3] += b
                if not b:
                    x[2] = time.monotonic() - t0
            except BlockingIOError:
                pass
            except OSError:
                x[2] = time.monotonic() - t0
        t1 = time.monotonic()
        r = h1_raw(t.port, b"GET /probe HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", timeout=3)
        worst = max(worst, time.monotonic() - t1)
        check(statuses(r) == [200], "probe during slowloris: %r" % r[:60])
        time.sleep(0.5)
    cut = [x[2] for x in socks if x[2] is not None]
    for x in socks:
        x[0].close()
    check(len(cut) == n, "%d of %d slow heads still open after 8 s" % (n - len(cut), n))
    check(max(cut) < 6 * SLOW and min(cut) > 1.5, "cut between %.1f and %.1f s" % (min(cut), max(cut)))
    check(worst < 0.5 * SLOW, "a normal request took %.2f s beside them" % worst)
    t.srv.check_back_to(base)
    return "200 slow heads cut in %.1f-%.1f s; probes answered (worst %.0f ms)" % (min(cut), max(cut), worst * 1000)


def idle_and_keepalive(t):
    """100 connections that send nothing, and 100 that finish a request and
    then idle: all closed by the idle / keepalive timeouts (2 s) within 5 s;
    a connection that sends only part of a body is cut by the request
    timeout; fds back to the baseline."""
    base = t.srv.baseline()
    idle = [socket.create_connection(("127.0.0.1", t.port)) for _ in range(100)]
    kept = []
    for _ in range(100):
        s = socket.create_connection(("127.0.0.1", t.port))
        s.sendall(b"GET /k HTTP/1.1\r\nHost: t\r\n\r\n")
        kept.append(s)
    body = socket.create_connection(("127.0.0.1", t.port))
    body.sendall(head(P, "Host: t", "Content-Length: 100") + b"part")
    t0 = time.monotonic()
    closed_at = {}
    all_s = idle + kept + [body]
    for s in all_s:
        s.settimeout(0.05)
    while time.monotonic() - t0 < 7 * SLOW and len(closed_at) < len(all_s):
        for k, s in enumerate(all_s):
            if k in closed_at:
                continue
            try:
                b = s.recv(65536)
                if not b:
                    closed_at[k] = time.monotonic() - t0
            except socket.timeout:
                pass
            except OSError:
                closed_at[k] = time.monotonic() - t0
    for s in all_s:
        s.close()
    check(len(closed_at) == len(all_s), "%d of %d connections never closed by a timeout"
          % (len(all_s) - len(closed_at), len(all_s)))
    late = max(closed_at.values())
    check(late < 5 * SLOW, "last timeout close at %.1f s" % late)
    check(min(closed_at.values()) > 1.0, "closed too early (%.1f s)" % min(closed_at.values()))
    t.srv.check_back_to(base)
    return "201 idle/keepalive/stalled-body connections closed in %.1f-%.1f s" % (min(closed_at.values()), late)


ATTACKS = [smuggling_set, smuggling_split_writes, legal_pipelines_exact, slowloris_heads, idle_and_keepalive]
