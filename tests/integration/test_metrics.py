"""Metrics on status.listen: after a known mix of requests (200s, 404s, a 413,
an abandoned upload) on a master with two workers, the counters summed over
both workers match exactly, byte counters included; the metrics are not
served on the normal listener; the status listener serves only its path;
status.* keys are validated with FILE:LINE:COLUMN."""

import os
import re
import socket
import subprocess
import time

from lib import SLOW, app_events, check, check_eq, free_port, test, wait_event, wait_for


def raw(port, data, read=True):
    """Send data on a fresh connection; return every byte received until EOF."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5 * SLOW)
    try:
        s.sendall(data)
        if not read:
            return b""
        got = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return got
            got += chunk
    finally:
        s.close()


def req(path, method="GET", extra=""):
    return ("%s %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n%s\r\n"
            % (method, path, extra)).encode()


def parse(text):
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, value = line.rsplit(" ", 1)
        out[name] = float(value)
    return out


def scrape(port, path="/metrics"):
    """(metrics dict, request bytes sent, response bytes received)."""
    data = req(path)
    resp = raw(port, data)
    head, _, body = resp.partition(b"\r\n\r\n")
    check(head.startswith(b"HTTP/1.1 200"), "status listener answered %r" % head[:60])
    check(b"content-type: text/plain; version=0.0.4" in head.lower(), "content type: %r" % head)
    return parse(body.decode()), len(data), len(resp)


def start_with_status(ctx, workers=2, extra=""):
    sport = free_port()
    conf = "status:\n  listen: 127.0.0.1:%d\nlimits:\n  max_body_size: 1k\n%s" % (sport, extra)
    srv = ctx.start("lifecycle", workers=workers, config=conf)
    ok = wait_for(lambda: scrape_quiet(sport).get("pagid_workers_ready") == workers, 10)
    check(ok, "workers never all ready on the status listener")
    return srv, sport


def scrape_quiet(sport):
    try:
        return scrape(sport)[0]
    except Exception:
        return {}


C2 = 'pagid_requests_total{class="2xx"}'
C4 = 'pagid_requests_total{class="4xx"}'
C5 = 'pagid_requests_total{class="5xx"}'
CC = 'pagid_disconnects_total{reason="client_closed"}'


@test(timeout=40)
def counters_match_a_known_mix(ctx):
    srv, sport = start_with_status(ctx)
    a, a_req, a_resp = scrape(sport)
    sent = received = 0
    plan = [req("/hello")] * 3 + [req("/nope")] * 2 + [req("/body", "POST", "Content-Length: 5000\r\n")]
    for d in plan:
        r = raw(srv.port, d)
        sent, received = sent + len(d), received + len(r)
    # An abandoned upload: part of the announced body, then the client vanishes.
    d = req("/body", "POST", "Content-Length: 900\r\nx-test-id: abandoned\r\n") + b"x" * 100
    s = socket.create_connection(("127.0.0.1", srv.port))
    s.sendall(d)
    check(wait_event(ctx, "abandoned", "handle"), "the upload never reached the app")
    time.sleep(0.1 * SLOW)  # the 100 body bytes are read
    s.close()
    sent += len(d)
    # Wait on the app's own log, not on scrapes (each scrape counts as a 200).
    check(wait_event(ctx, "abandoned", "release"), "the abandoned upload was never released")
    check("on_disconnect client_closed" in app_events(ctx, "abandoned"),
          "abandoned upload: %r" % app_events(ctx, "abandoned"))
    b, b_req, _ = scrape(sport)
    check_eq(b[C2] - a[C2], 4, "2xx: three /hello and scrape a")
    check_eq(b[C4] - a[C4], 3, "4xx: two 404s and the 413")
    check_eq(b[C5] - a[C5], 0, "5xx")
    check_eq(b[CC] - a[CC], 1, "client_closed")
    for reason in ("body_too_large", "server_error", "protocol_error", "write_error"):
        k = 'pagid_disconnects_total{reason="%s"}' % reason
        check_eq(b[k] - a[k], 0, k)
    check_eq(b["pagid_workers_up"], 2, "workers up")
    check_eq(b["pagid_workers_ready"], 2, "workers ready")
    check_eq(b["pagid_open_connections"], 1, "open connections (the scrape's own)")
    check_eq(b['pagid_open_scopes{type="http"}'], 1, "open http scopes (the scrape's own)")
    check_eq(b['pagid_open_scopes{type="websocket"}'], 0, "open websocket scopes")
    check_eq(b["pagid_worker_restarts_total"], 0, "restarts")
    check(b["pagid_generation"] >= 1, "generation %r" % b["pagid_generation"])
    # In: every mix byte, plus scrape b's request (read before it rendered).
    check_eq(b["pagid_received_bytes_total"] - a["pagid_received_bytes_total"], sent + b_req,
             "bytes received")
    # Out: every mix response, plus scrape a's whole response (written after it rendered).
    check_eq(b["pagid_sent_bytes_total"] - a["pagid_sent_bytes_total"], received + a_resp,
             "bytes sent")


@test(timeout=30)
def metrics_not_on_normal_listener(ctx):
    srv, sport = start_with_status(ctx)
    r = raw(srv.port, req("/metrics"))
    check(b"pagid_requests_total" not in r, "the app's listener served the metrics: %r" % r[:200])
    check(r.startswith(b"HTTP/1.1 404"), "the app (lifecycle) answers /metrics itself: %r" % r[:60])
    # The status listener serves its path only, and only GET/HEAD; never the app.
    r = raw(sport, req("/hello"))
    check(r.startswith(b"HTTP/1.1 404"), "status listener /hello: %r" % r[:60])
    r = raw(sport, req("/metrics", "POST", "Content-Length: 0\r\n"))
    check(r.startswith(b"HTTP/1.1 405"), "status listener POST: %r" % r[:60])
    r = raw(sport, req("/metrics", "HEAD"))
    check(r.startswith(b"HTTP/1.1 200") and r.endswith(b"\r\n\r\n"), "HEAD: %r" % r[-60:])
    r = raw(sport, req("/metrics", extra="Upgrade: websocket\r\nConnection: Upgrade\r\n"
                       "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"))
    check(r.startswith(b"HTTP/1.1 200") and b"pagid_up 1" in r, "no upgrade on status: %r" % r[:80])
    r = raw(sport, req("/metrics", extra="Accept: text/event-stream\r\n"))
    check(r.startswith(b"HTTP/1.1 200") and b"pagid_up 1" in r, "no sse on status: %r" % r[:80])
    # The app saw the one /metrics sent to the normal listener, nothing from the status one.
    with open(ctx.app_log) as f:
        handled = [ln for ln in f.read().splitlines() if " handle " in ln]
    check_eq(len(handled), 1, "requests the app handled (%r)" % handled)


@test(timeout=30)
def custom_status_path(ctx):
    port2 = free_port()
    conf = "status:\n  listen: 127.0.0.1:%d\n  path: /_stats\n" % port2
    srv2 = ctx.start("hello", workers=1, config=conf)
    ok = wait_for(lambda: raw(port2, req("/_stats")).startswith(b"HTTP/1.1 200"), 5)
    check(ok, "status.path /_stats not served")
    check(raw(port2, req("/metrics")).startswith(b"HTTP/1.1 404"), "old path still served")
    check(srv2.alive(), "server died")


@test(timeout=20)
def single_process_metrics(ctx):
    port2 = free_port()
    srv = ctx.start("hello", workers=0, config="status:\n  listen: 127.0.0.1:%d\n" % port2)
    r = raw(port2, req("/metrics"))
    check(r.startswith(b"HTTP/1.1 200") and b"pagid_up 1" in r, "-w 0 metrics: %r" % r[:120])


def check_config(ctx, text, want_re):
    path = os.path.join(ctx.tmpdir, "c%d.yaml" % len(os.listdir(ctx.tmpdir)))
    with open(path, "w") as f:
        f.write(text)
    p = subprocess.run([ctx.pagid, "-t", "-c", path], capture_output=True, text=True, timeout=10)
    check_eq(p.returncode, 1, "-t exit status for %r" % text)
    check(re.search(want_re.replace("FILE", re.escape(path)), p.stderr),
          "stderr %r does not match %r" % (p.stderr, want_re))


@test(timeout=20)
def status_keys_validated(ctx):
    check_config(ctx, "status:\n  listen: nonsense:port\n", r"FILE:2:11: invalid listen address")
    check_config(ctx, "status:\n  path: metrics\n", r"FILE:2:9: invalid 'status.path'")
    check_config(ctx, "status:\n  bogus: 1\n", r"FILE:2:3: unknown key 'bogus' in 'status'")
    check_config(ctx, "listen: 127.0.0.1:9\nstatus:\n  listen: 127.0.0.1:9\n",
                 r"status.listen 127.0.0.1:9 is also a normal listener")


@test(timeout=30)
def access_log_drops_counted_never_blocking(ctx):
    # /dev/full fails every write with ENOSPC: lines are dropped and counted, requests go on.
    srv, sport = start_with_status(ctx, extra="access_log:\n  path: /dev/full\n")
    for _ in range(10):
        r = raw(srv.port, req("/hello"))
        check(r.startswith(b"HTTP/1.1 200"), "request while the log fails: %r" % r[:40])
    k = "pagid_access_log_dropped_total"
    check(wait_for(lambda: scrape(sport)[0][k] >= 10, 5), "drops not counted: %r" % scrape(sport)[0][k])
    # The scrapes above are requests too: their lines are dropped as well.
    check(wait_for(lambda: "dropping lines" in srv.stderr(), 5), "no warning in the error log")


@test(timeout=40)
def status_listener_outside_max_connections(ctx):
    """At limits.max_connections the worker stops taking app connections, but
    the status listener still answers; reaching the limit is counted and
    logged once per 10 s (with how often it happened)."""
    srv, sport = start_with_status(ctx, workers=1, extra="  max_connections: 5\n")
    idle = []
    try:
        for _ in range(5):
            idle.append(socket.create_connection(("127.0.0.1", srv.port), timeout=5 * SLOW))
        time.sleep(0.3)  # accepted: the worker is at its limit
        k = "pagid_max_connections_reached_total"
        check_eq(scrape(sport)[0].get(k), 1.0, k)
        # A sixth waits in the listen queue; the metrics still answer.
        waiting = socket.create_connection(("127.0.0.1", srv.port), timeout=5 * SLOW)
        idle.append(waiting)
        check_eq(scrape(sport)[0].get(k), 1.0, k + " with one waiting")
        # One closes: the waiting one is taken, and the limit is reached again.
        idle.pop(0).close()
        check(wait_for(lambda: scrape(sport)[0].get(k) == 2.0, 5),
              "second time at the limit not counted: %r" % scrape(sport)[0].get(k))
        waiting.sendall(b"GET /hello HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        check(waiting.recv(100).startswith(b"HTTP/1.1 200"), "the queued connection was served")
    finally:
        for s in idle:
            s.close()
    lines = [ln for ln in srv.stderr().splitlines() if "max_connections" in ln]
    check_eq(len(lines), 1, "log lines about the limit (once per 10 s): %r" % lines)
    check("limits.max_connections (5) reached" in lines[0], "the line: %r" % lines[0])
