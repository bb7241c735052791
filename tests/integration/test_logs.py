"""Access log: the clf, combined and json formats and custom %-atoms give the
right line for GET, POST, HEAD, 404, 413, a streamed response, an sse stream
and an aborted request; SIGUSR1 reopens after a rename (single process and
under a master); 5,000 requests make 5,000 lines; a bad format is reported
at its FILE:LINE:COLUMN."""

import json
import os
import re
import signal
import subprocess
import threading
import time

from lib import Conn, check, check_eq, request, test, wait_for

CLF_TIME = r"\[\d{2}/[A-Z][a-z]{2}/\d{4}:\d{2}:\d{2}:\d{2} [+-]\d{4}\]"


def start_logged(ctx, fmt, workers=0, extra="", app="lifecycle", name="access.log"):
    path = os.path.join(ctx.tmpdir, name)
    conf = "access_log:\n  path: %s\n  format: '%s'\n%s" % (path, fmt.replace("'", "''"), extra)
    srv = ctx.start(app, workers=workers, config=conf)
    return srv, path


def read_lines(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8").splitlines()
    except OSError:
        return []


def wait_lines(path, n, timeout=5):
    """Lines are flushed at most 100 ms after the request ends."""
    wait_for(lambda: len(read_lines(path)) >= n, timeout)
    lines = read_lines(path)
    check(len(lines) >= n, "expected %d access log lines in %s, got %r" % (n, path, lines))
    return lines


def abort_upload(port, path="/body"):
    """Send a head announcing a body (under the 1k limit), part of it, then vanish."""
    c = Conn(port)
    c.send(b"POST " + path.encode() + b" HTTP/1.1\r\nHost: t\r\nContent-Length: 900\r\n\r\n"
           + b"x" * 100)
    time.sleep(0.2)
    c.close()


def mixed_requests(port):
    """GET, POST, HEAD, 404, streamed, 413, aborted: in this order, one line each."""
    r = request(port, "GET", "/hello", headers={"User-Agent": "ua/1", "Referer": "http://r/"})
    check_eq(r.status, 200, "GET status")
    r = request(port, "POST", "/body", body=b"abcde")
    check_eq(r.status, 200, "POST status")
    r = request(port, "HEAD", "/hello")
    check_eq(r.status, 200, "HEAD status")
    r = request(port, "GET", "/nope?x=1&y=%22")
    check_eq(r.status, 404, "404 status")
    r = request(port, "GET", "/stream?n=3&size=100")
    check_eq(len(r.body), 300, "streamed body")
    r = request(port, "POST", "/body", body=b"y" * 5000)
    check_eq(r.status, 413, "413 status")
    abort_upload(port)


LIMIT = "limits:\n  max_body_size: 1k\n"


@test(timeout=30)
def clf_lines(ctx):
    srv, path = start_logged(ctx, "clf", extra=LIMIT)
    mixed_requests(srv.port)
    lines = wait_lines(path, 7)
    want = [
        r'"GET /hello HTTP/1\.1" 200 2',
        r'"POST /body HTTP/1\.1" 200 5',
        r'"HEAD /hello HTTP/1\.1" 200 -',
        r'"GET /nope\?x=1&y=%22 HTTP/1\.1" 404 \d+',
        r'"GET /stream\?n=3&size=100 HTTP/1\.1" 200 300',
        r'"POST /body -" 413 -',  # refused at the head, before any scope: the parser's facts
        r'"POST /body HTTP/1\.1" 0 -',
    ]
    check_eq(len(lines), 7, "line count (%r)" % lines)
    for line, w in zip(lines, want):
        check(re.match(r"^127\.0\.0\.1 - - " + CLF_TIME + " " + w + "$", line),
              "clf line %r does not match %r" % (line, w))


@test(timeout=30)
def combined_lines(ctx):
    srv, path = start_logged(ctx, "combined")
    request(srv.port, "GET", "/hello", headers={"User-Agent": 'ua "quoted"', "Referer": "http://r/"})
    request(srv.port, "GET", "/hello")
    lines = wait_lines(path, 2)
    check(re.match(r'^127\.0\.0\.1 - - ' + CLF_TIME
                   + r' "GET /hello HTTP/1\.1" 200 2 "http://r/" "ua \\x22quoted\\x22"$', lines[0]),
          "combined line with headers: %r" % lines[0])
    check(lines[1].endswith('200 2 "-" "-"'), "combined line without headers: %r" % lines[1])


@test(timeout=30)
def json_lines(ctx):
    srv, path = start_logged(ctx, "json", extra=LIMIT)
    mixed_requests(srv.port)
    lines = wait_lines(path, 7)
    recs = []
    for line in lines:
        try:
            recs.append(json.loads(line))
        except ValueError as e:
            raise AssertionError("not JSON: %r (%s)" % (line, e))
    check_eq([r["status"] for r in recs], [200, 200, 200, 404, 200, 413, 0], "statuses")
    check_eq([r["method"] for r in recs], ["GET", "POST", "HEAD", "GET", "GET", "POST", "POST"],
             "methods")
    check_eq((recs[5]["path"], recs[5]["protocol"]), ("/body", None), "the refused request")
    check_eq(recs[0]["path"], "/hello", "path")
    check_eq(recs[0]["user_agent"], "ua/1", "user_agent")
    check_eq(recs[0]["referer"], "http://r/", "referer")
    check_eq(recs[0]["client"], "127.0.0.1", "client")
    check_eq(recs[0]["type"], "http", "type")
    check_eq(recs[0]["reason"], None, "reason of a completed request")
    check_eq(recs[0]["bytes"], 2, "bytes")
    check_eq(recs[2]["bytes"], 0, "HEAD bytes")
    check_eq(recs[3]["query"], "x=1&y=%22", "query")
    check_eq(recs[4]["bytes"], 300, "streamed bytes")
    check_eq(recs[6]["reason"], "client_closed", "aborted upload reason")
    check(re.match(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}[+-]\d{2}:\d{2}$", recs[0]["time"]),
          "ISO 8601 time: %r" % recs[0]["time"])
    check(all(isinstance(r["duration_ms"], (int, float)) and r["duration_ms"] >= 0 for r in recs),
          "durations")
    check(recs[6]["duration_ms"] >= 150, "the aborted upload lasted ~200ms: %r" % recs[6])


@test(timeout=30)
def custom_atoms(ctx):
    fmt = ("%m|%U|%q|%H|%s|%>s|%b|%B|%{X-Test}i|%{content-type}o|%X|%y|%{iso}t|%t|%D|"
           "%{ms}T|%T|%P|%h|100%%")
    srv, path = start_logged(ctx, fmt)
    request(srv.port, "GET", "/nope?a=b", headers={"X-Test": "t1"})
    abort_upload(srv.port)
    lines = wait_lines(path, 2)
    f = lines[0].split("|")
    check_eq(f[:12], ["GET", "/nope", "?a=b", "HTTP/1.1", "404", "404", f[6], f[6], "t1",
                      "text/plain", "-", "http"], "atoms of a completed request (%r)" % lines[0])
    check(int(f[7]) > 0, "bytes: %r" % f[7])
    check(re.match(r"^\d{4}-\d{2}-\d{2}T", f[12]), "iso time %r" % f[12])
    check(re.match("^" + CLF_TIME + "$", f[13]), "clf time %r" % f[13])
    check(int(f[14]) >= 0 and float(f[15]) >= 0 and int(f[16]) == 0, "durations %r" % f[14:17])
    check_eq(int(f[17]), srv.pid, "pid (-w 0: the server itself)")
    check_eq(f[18:], ["127.0.0.1", "100%"], "client and literal")
    g = lines[1].split("|")
    check_eq((g[0], g[4], g[6], g[9], g[10]), ("POST", "0", "-", "-", "client_closed"),
             "aborted request (%r)" % lines[1])
    check(int(g[14]) >= 150000, "aborted request duration in us: %r" % g[14])


@test(timeout=30)
def sse_stream_logged_at_end(ctx):
    srv, path = start_logged(ctx, "%y %s %B %X", app="echo")
    r = request(srv.port, "GET", "/?count=2", headers={"Accept": "text/event-stream"})
    check_eq(r.status, 200, "sse status")
    lines = wait_lines(path, 1)
    check_eq(lines[0].split(" ")[:2], ["sse", "200"], "sse line %r" % lines[0])
    check_eq(lines[0].split(" ")[3], "-", "sse stream completed")
    check_eq(int(lines[0].split(" ")[2]), len(r.body), "sse bytes = body bytes")


def reopen_after_rename(ctx, workers):
    srv, path = start_logged(ctx, "%U", workers=workers)
    for i in range(4):
        request(srv.port, "GET", "/before%d" % i)
    wait_lines(path, 4)
    os.rename(path, path + ".1")
    time.sleep(0.2)  # a line logged now still goes to the renamed file
    srv.signal(signal.SIGUSR1)
    check(wait_for(lambda: os.path.exists(path), 5), "SIGUSR1 did not recreate %s" % path)
    # Every worker reopens on its own: wait until all of them wrote to the new file.
    time.sleep(0.3)
    for i in range(20):
        request(srv.port, "GET", "/after%d" % i)
    new = wait_lines(path, 20)
    old = read_lines(path + ".1")
    check_eq(sorted(old), sorted("/before%d" % i for i in range(4)), "rotated file")
    check_eq(sorted(new), sorted("/after%d" % i for i in range(20)), "new file")
    check(srv.alive(), "pagid died of SIGUSR1")


@test(timeout=30)
def usr1_reopens_single_process(ctx):
    reopen_after_rename(ctx, 0)


@test(timeout=30)
def usr1_reopens_under_master(ctx):
    reopen_after_rename(ctx, 2)


def hammer(port, n, errors):
    """n keep-alive GETs on one connection."""
    try:
        c = Conn(port)
        for _ in range(n):
            c.send(b"GET /hello HTTP/1.1\r\nHost: t\r\n\r\n")
            r = c.read_response()
            if r.status != 200:
                errors.append(r.status)
        c.close()
    except Exception as e:  # reported by the caller
        errors.append(repr(e))


def many_requests(ctx, workers):
    srv, path = start_logged(ctx, "clf", workers=workers)
    errors = []
    threads = [threading.Thread(target=hammer, args=(srv.port, 500, errors)) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    check(not errors, "request errors: %r" % errors[:5])
    lines = wait_lines(path, 5000, timeout=5)
    check_eq(len(lines), 5000, "lines for 5000 requests")
    check(all(ln.endswith('"GET /hello HTTP/1.1" 200 2') for ln in lines), "every line whole")


@test(timeout=90)
def five_thousand_requests_five_thousand_lines(ctx):
    many_requests(ctx, 0)


@test(timeout=90)
def five_thousand_lines_from_two_workers(ctx):
    many_requests(ctx, 2)


@test(timeout=20)
def lines_flushed_on_stop(ctx):
    # Under the 100 ms timer a line may still be buffered: a graceful stop writes it.
    srv, path = start_logged(ctx, "%U")
    request(srv.port, "GET", "/last")
    srv.stop()
    check_eq(read_lines(path), ["/last"], "line written at stop")


@test(timeout=20)
def bad_format_reported_with_position(ctx):
    conf = os.path.join(ctx.tmpdir, "bad.yaml")
    with open(conf, "w") as f:
        f.write('access_log:\n  format: "%h %Z"\n')
    p = subprocess.run([ctx.pagid, "-t", "-c", conf], capture_output=True, text=True, timeout=10)
    check_eq(p.returncode, 1, "exit status of -t")
    check("%s:2:15: invalid access log format" % conf in p.stderr, "error position: %r" % p.stderr)


@test(timeout=20)
def unwritable_log_stops_startup(ctx):
    conf = os.path.join(ctx.tmpdir, "c.yaml")
    with open(conf, "w") as f:
        f.write("access_log:\n  path: %s/no/such/dir/a.log\n" % ctx.tmpdir)
    p = subprocess.run([ctx.pagid, "-w", "0", "-c", conf, "-l", "127.0.0.1:%d" % ctx.lib.free_port()],
                       capture_output=True, text=True, timeout=10)
    check(p.returncode != 0, "pagid started without its access log")
    check("cannot open access log" in p.stderr, "message: %r" % p.stderr)


def ws_frame(opcode, payload):
    mask = os.urandom(4)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + masked


@test(timeout=30)
def websocket_session_logged_at_end(ctx):
    srv, path = start_logged(ctx, "%y %m %U %s %B %X", app="echo")
    c = Conn(srv.port)
    c.send(b"GET /chat HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
    head = c.read_until(b"\r\n\r\n")
    check(head.startswith(b"HTTP/1.1 101"), "handshake: %r" % head)
    c.send(ws_frame(1, b"hi"))
    check_eq(c.read_exact(4), b"\x81\x02hi", "echoed frame")
    time.sleep(0.2)
    check_eq(read_lines(path), [], "a line before the session ended")
    c.send(ws_frame(8, b"\x03\xe8"))
    c.read_to_eof()
    c.close()
    lines = wait_lines(path, 1)
    f = lines[0].split(" ")
    check_eq(f[:5], ["websocket", "GET", "/chat", "101", "0"], "websocket line %r" % lines[0])


@test(timeout=20)
def refused_websocket_handshake_logged(ctx):
    srv, path = start_logged(ctx, "%s %y %X", app="echo")
    c = Conn(srv.port)
    c.send(b"GET /chat HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           b"Sec-WebSocket-Version: 8\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
    r = c.read_response()
    c.close()
    check_eq(r.status, 426, "handshake refused")
    check_eq(wait_lines(path, 1), ["426 http -"], "line of the refused handshake")


@test(timeout=20)
def refused_requests_keep_their_request_line(ctx):
    srv, path = start_logged(ctx, "%s|%r|%m|%U|%q")
    c = Conn(srv.port)
    c.send(b"GET /big?a=1 HTTP/1.1\r\nHost: t\r\nX-Big: " + b"x" * 70000 + b"\r\n\r\n")
    r = c.read_response()
    c.close()
    check_eq(r.status, 431, "oversized head")
    c = Conn(srv.port)
    c.send(b"G\x01T / HTTP/1.1\r\n\r\n")
    r = c.read_response()
    c.close()
    check_eq(r.status, 400, "bad method")
    check_eq(wait_lines(path, 2), ["431|GET /big?a=1 -|GET|/big|?a=1", "400|-|-|-|"],
             "lines of refused requests")


@test(timeout=30)
def error_log_to_stderr_has_priorities(ctx):
    srv = ctx.start("hello", workers=1)
    # The master accepts on the port before the worker has said anything
    # (slow under ASan): wait for the worker's line, then stop.
    wait_for(lambda: "<6>worker 1[" in srv.stderr(), 10)
    srv.stop()
    lines = [ln for ln in srv.stderr().splitlines() if ln]
    check(lines and all(re.match(r"^<[3467]>(master|worker \d+)\[\d+\]: (error|warn|info|debug): ",
                                 ln) for ln in lines),
          "stderr lines without a syslog priority prefix: %r" % lines[:5])
    check(any(ln.startswith("<6>worker 1[") for ln in lines), "no info line from worker 1")


@test(timeout=30)
def error_log_file_reopens_on_usr1(ctx):
    path = os.path.join(ctx.tmpdir, "error.log")
    srv = ctx.start("hello", workers=2, config="error_log:\n  path: %s\n" % path)
    check(wait_for(lambda: sum("ready" in ln for ln in read_lines(path)) >= 2, 5),
          "workers never said ready in %r" % read_lines(path))
    line = read_lines(path)[0]
    check(re.match(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}[+-]\d{4} \[(info|warn|error)\] ", line),
          "file line format: %r" % line)
    os.rename(path, path + ".1")
    srv.signal(signal.SIGUSR1)
    check(wait_for(lambda: os.path.exists(path), 5), "SIGUSR1 did not recreate %s" % path)
    time.sleep(0.3)
    srv.stop()
    new = read_lines(path)
    # After the reopen, the workers' and the master's stop messages land in the new file.
    check(any(re.search(r"worker \d+\[\d+\]: .*exiting", ln) for ln in new),
          "no worker line in the reopened error log: %r" % new)
    check(any("master[" in ln for ln in new), "no master line in the reopened error log: %r" % new)


def root_only_dir(ctx):
    """A log directory as distributions make them: root's, mode 0700."""
    if os.geteuid() != 0:
        raise ctx.lib.Skip("needs root")
    d = os.path.join(ctx.tmpdir, "log")
    os.mkdir(d, 0o700)
    return d


def root_only_logs(ctx, workers, preload):
    d = root_only_dir(ctx)
    acc, err = os.path.join(d, "access.log"), os.path.join(d, "error.log")
    conf = ("user: nobody\npreload: %s\naccess_log:\n  path: %s\n  format: '%%U'\n"
            "error_log:\n  path: %s\n" % (preload, acc, err))
    srv = ctx.start("hello", workers=workers, config=conf, default_user=False)
    for i in range(3):
        check_eq(request(srv.port, "GET", "/before%d" % i).status, 200, "status")
    check_eq(sorted(wait_lines(acc, 3)), ["/before%d" % i for i in range(3)], "access log")
    os.rename(acc, acc + ".1")
    os.rename(err, err + ".1")
    srv.signal(signal.SIGUSR1)
    check(wait_for(lambda: os.path.exists(acc), 5), "SIGUSR1 did not recreate %s" % acc)
    time.sleep(0.3)
    for i in range(10):
        request(srv.port, "GET", "/after%d" % i)
    check_eq(sorted(wait_lines(acc, 10)), sorted("/after%d" % i for i in range(10)), "new file")
    check_eq(sorted(read_lines(acc + ".1")), ["/before%d" % i for i in range(3)], "rotated file")
    srv.stop()
    new = read_lines(err)
    check(any(re.search(r"worker \d+\[\d+\]: .*exiting", ln) for ln in new),
          "no worker line in the reopened error log: %r" % new)
    check(not any("cannot" in ln for ln in read_lines(err + ".1") + new),
          "errors logged: %r" % (read_lines(err + ".1") + new))


@test(timeout=30)
def root_only_log_dir_workers_as_nobody(ctx):
    """The master opens the logs as root and hands them to workers that run as
    nobody, at start and on SIGUSR1 (a rename, then a new file)."""
    root_only_logs(ctx, 2, "false")


@test(timeout=30)
def root_only_log_dir_workers_from_zygote(ctx):
    root_only_logs(ctx, 2, "true")


@test(timeout=20)
def check_config_opens_logs_as_the_master(ctx):
    """pagid -t checks the log files as the process that opens them (the
    master): a root-only directory is fine with workers as nobody; one it
    cannot open is reported at FILE:LINE:COLUMN with the user."""
    d = root_only_dir(ctx)
    conf = os.path.join(ctx.tmpdir, "c.yaml")
    with open(conf, "w") as f:
        f.write("user: nobody\naccess_log:\n  path: %s/a.log\nerror_log:\n  path: %s/e.log\n"
                % (d, d))
    p = subprocess.run([ctx.pagid, "-t", "-c", conf], capture_output=True, text=True, timeout=10)
    check_eq(p.returncode, 0, "-t exit status: %s" % p.stderr)
    with open(conf, "w") as f:
        f.write("user: nobody\naccess_log:\n  path: %s/missing/a.log\n" % d)
    p = subprocess.run([ctx.pagid, "-t", "-c", conf], capture_output=True, text=True, timeout=10)
    check_eq(p.returncode, 1, "-t exit status")
    check(re.search(r"%s:3:9: access_log.path %s/missing/a.log: cannot open for append as user "
                    r"root: " % (re.escape(conf), re.escape(d)), p.stderr),
          "message: %r" % p.stderr)
