#!/usr/bin/env python3
"""load.py - runs inside the guest: GET requests to a URL from THREADS
threads (half on fresh connections, half on keep-alive ones) until the file
STOPFILE exists or SECONDS pass; prints one JSON line: ok, failed, the first
few failures. A failure is any status but 200, or any error on a request
that was sent on a fresh connection. On a reused keep-alive connection the
server may close between requests (RFC 9112 9.3.1): a client retries that
request once on a new connection, as browsers and curl do."""

import http.client
import json
import os
import sys
import threading
import time

host, port, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
threads, seconds, stopfile = int(sys.argv[4]), float(sys.argv[5]), sys.argv[6]
lock = threading.Lock()
ok = [0]
failed = []


def one(conn):
    conn.request("GET", path)
    r = conn.getresponse()
    r.read()
    return r.status, r.getheader("connection", "")


def worker(keepalive):
    deadline = time.time() + seconds
    conn = None
    while time.time() < deadline and not os.path.exists(stopfile):
        fresh = conn is None
        if conn is None:
            conn = http.client.HTTPConnection(host, port, timeout=10)
        try:
            try:
                status, connhdr = one(conn)
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                if fresh:
                    raise
                conn.close()  # closed while idle: retry once, fresh
                conn = http.client.HTTPConnection(host, port, timeout=10)
                status, connhdr = one(conn)
            with lock:
                if status == 200:
                    ok[0] += 1
                else:
                    failed.append("status %d" % status)
            if not keepalive or connhdr.lower() == "close":
                conn.close()
                conn = None
        except Exception as e:  # noqa: BLE001 - every failure is counted
            with lock:
                failed.append("%s: %s" % (type(e).__name__, e))
            conn.close()
            conn = None
            time.sleep(0.01)
    if conn:
        conn.close()


ts = [threading.Thread(target=worker, args=(i % 2 == 1,)) for i in range(threads)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print(json.dumps({"ok": ok[0], "failed": len(failed), "failures": failed[:5]}))
