"""The embedded Perl host (docs/perl.md): real PAGI Perl apps from
tests/integration/perl/*.pl, each driven over real sockets: hello, a streamed
response, a request body reader with the scope's keys, WebSocket echo (text
as characters), an SSE ticker paced by Future::IO, lifespan state, startup
failure, on_disconnect/on_complete cleanup, a producer paced by
pagi.transport, apps that die before/after starting their response, the
server's validation messages, a plain app chaining on the Futures $send returns. Skipped when pagid was built without Perl."""

import os
import re
import signal
import socket
import subprocess
import time

import lib
from lib import SLOW, Conn, build_request, check, check_eq, request, test, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
PERL_DIR = os.path.join(HERE, "perl")
_has_perl = {}


def app(ctx, name):
    """Path of a test app; skips the test when pagid has no Perl host."""
    if ctx.pagid not in _has_perl:
        p = subprocess.run([ctx.pagid, "-t", "-a", os.path.join(PERL_DIR, "hello.pl"),
                            "-l", "127.0.0.1:1"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=30)
        _has_perl[ctx.pagid] = b"built with the Perl host" not in p.stdout
    if not _has_perl[ctx.pagid]:
        raise lib.Skip("pagid was built without the Perl host")
    return os.path.join(PERL_DIR, name + ".pl")


def app_log(ctx):
    try:
        with open(ctx.app_log) as f:
            return f.read().splitlines()
    except OSError:
        return []


@test()
def hello(ctx):
    srv = ctx.start(app(ctx, "hello"))
    for _ in range(3):
        r = request(srv.port, path="/")
        check_eq(r.status, 200, "status")
        check_eq(r.body, b"Hello from PAGI", "body")
        check_eq(r.header("content-type"), "text/plain", "content-type")
    # keep-alive: many requests on one connection
    c = Conn(srv.port)
    for _ in range(50):
        c.send(build_request("GET", "/", {"Host": "t"}))
        r = c.read_response("GET")
        check_eq(r.body, b"Hello from PAGI", "keep-alive body")
    c.close()


@test()
def spec_examples(ctx):
    srv = ctx.start(app(ctx, "spec_examples"))
    r = request(srv.port)
    check_eq((r.status, r.body), (200, b"Hello from PAGI!"), "Spec.pod's application")
    check_eq(request(srv.port, path="/poll").body, b"the event", "Www.pod's long_poll_handler")
    check("does not support lifespan" not in srv.stderr(), "Lifespan.pod's app ran lifespan")
    check_eq(srv.stop(), 0, "clean shutdown through lifespan.shutdown")


@test()
def include_dir_option(ctx):
    srv = ctx.start(app(ctx, "uses_lib"), workers=1, args=["-I", "/nonexistent",
                                                           "-I", os.path.join(PERL_DIR, "lib")])
    check_eq(request(srv.port).body, b"greetings from -I", "module found through -I")


@test()
def yaml_app_mapping_with_lib(ctx):
    """app: {perl: FILE, lib: [DIRS]} in the YAML: the file is the app, lib reaches @INC
    (and survives a reload without piling up)."""
    path = app(ctx, "uses_lib")
    conf = "app:\n  perl: %s\n  lib: [/nonexistent, %s]\n" % (path, os.path.join(PERL_DIR, "lib"))
    srv = ctx.start(None, workers=1, config=conf)
    check_eq(request(srv.port).body, b"greetings from -I", "module found through the lib list")
    # Without the lib list the app cannot compile: no worker can start, pagid exits 3.
    conf_path = os.path.join(ctx.tmpdir, "bare.yaml")
    with open(conf_path, "w") as f:
        f.write("app: {perl: %s}\nlisten: ['127.0.0.1:%d']\nworkers: 0\n" % (path, lib.free_port()))
    env = dict(os.environ)
    env.pop("PAGID_PERL_LIB", None)
    p = subprocess.run([ctx.pagid, "-c", conf_path] + lib.root_user_args(),
                       stdin=subprocess.DEVNULL, env=env, capture_output=True, timeout=30 * SLOW)
    check_eq(p.returncode, 3, "exit status without the lib list")
    check(b"Can't locate" in p.stderr, "the missing module is named: %r" % p.stderr[-300:])


@test()
def streamed_response(ctx):
    srv = ctx.start(app(ctx, "stream"))
    r = request(srv.port)
    check_eq(r.status, 200, "status")
    check(r.chunked, "a streamed response is chunked")
    check_eq(r.body, b"".join(b"chunk %d\n" % i for i in range(1, 6)) + b"end\n", "body")


@test()
def request_body_and_scope(ctx):
    srv = ctx.start(app(ctx, "body"))
    body = os.urandom(300000)
    r = request(srv.port, method="POST", path="/caf%C3%A9?a=1&b=%20",
                headers={"X-Test": "yes"}, body=body)
    check_eq(r.status, 200, "status")
    got = dict(ln.split("=", 1) for ln in r.body.decode().splitlines())
    want = {"method": "POST", "path_chars": "5", "raw_path": "/caf%C3%A9",
            "query": "a=1&b=%20", "root_path": "[]", "http_version": "1.1",
            "scheme": "http", "pagi": "0.3", "client": "127.0.0.1",
            "server_port": str(srv.port), "x_test": "yes", "length": str(len(body)),
            "utf8": "0", "connected": "1", "started": "0"}
    for k, v in want.items():
        check_eq(got.get(k), v, k)
    check(got["hwm"].isdigit(), "pagi.transport high_water_mark is a number")
    # chunked upload
    c = Conn(srv.port)
    c.send(build_request("POST", "/x", {"Host": "t", "Transfer-Encoding": "chunked"})
           + b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
    r = c.read_response("POST")
    check("length=11" in r.body.decode(), "chunked body length: %r" % r.body)
    c.close()


@test()
def websocket_echo(ctx):
    import test_websocket as tw
    srv = ctx.start(app(ctx, "ws_echo"))
    ws = tw.RawWS(srv.port, path="/ws")
    check_eq(ws.status, 101, "handshake status")
    ws.send_frame(0x1, "h\u00e9llo \u263a".encode())
    op, data = ws.recv_message()
    check_eq(op, 0x1, "text opcode")
    check_eq(data.decode(), "7:h\u00e9llo \u263a", "text echo counts characters")
    ws.send_frame(0x2, b"\x00\xff\xfe")
    op, data = ws.recv_message()
    check_eq((op, data), (0x2, b"\x00\xff\xfe"), "binary echo")
    ws.send_frame(0x1, b"close")
    f = ws.expect_close(4000)
    check_eq(f.close_reason(), "bye \u00e9", "close reason encoded as UTF-8")
    ws.sock.close()


@test()
def sse_ticker_with_future_io(ctx):
    srv = ctx.start(app(ctx, "sse_ticker"))
    t0 = time.monotonic()
    r = request(srv.port, headers={"Accept": "text/event-stream"})
    elapsed = time.monotonic() - t0
    check_eq(r.status, 200, "status")
    check_eq(r.header("content-type", "").split(";")[0], "text/event-stream", "content-type")
    text = r.body.decode()
    for i in (1, 2, 3):
        check("event: tick\nid: %d\ndata: tick %d\n\n" % (i, i) in text, "tick %d in %r" % (i, text))
    check(elapsed >= 0.15, "three 50 ms Future::IO sleeps took %.3fs" % elapsed)
    check("event: error\ndata: sse.send: id must not contain a newline" in text,
          "the send of an id with a newline failed with the server's message: %r" % text)


@test()
def event_defaults(ctx):
    """Optional event keys left out get Www.pod's defaults (issue 11: sse.start
    without status was a 500)."""
    import test_websocket as tw
    srv = ctx.start(app(ctx, "defaults"))
    r = request(srv.port, headers={"Accept": "text/event-stream"})
    check_eq(r.status, 200, "sse.start without status")
    check_eq(r.header("content-type", "").split(";")[0], "text/event-stream", "content-type")
    check_eq(r.body.decode(), "data: one\n\nevent: e\ndata: two\n\n", "events")
    r = request(srv.port, path="/stream")
    check_eq((r.status, r.body), (200, b"ab"), "no headers; a body event with no body/more ends")
    r = request(srv.port, path="/empty")
    check_eq((r.status, r.body), (204, b""), "body event with no keys")
    ws = tw.RawWS(srv.port, path="/ws")
    check_eq(ws.status, 101, "websocket.accept with no keys")
    ws.send_frame(0x1, b"x")
    check_eq(ws.recv_message(), (0x1, b"x"), "echo")
    f = ws.expect_close(1000)
    check_eq(f.close_reason(), "", "websocket.close: reason defaults to empty")
    ws.send_close(1000)
    ws.close()
    check("500" not in srv.stderr() and "missing" not in srv.stderr(),
          "no event was refused: %s" % srv.stderr()[-500:])


@test()
def required_fields_refused(ctx):
    """Www.pod: sse.send needs 'data'; websocket.send needs exactly one of
    'text' or 'bytes'. Such a send fails with the server's message (nothing
    written) and the scope goes on."""
    import test_websocket as tw
    srv = ctx.start(app(ctx, "required_fields"))
    r = request(srv.port, headers={"Accept": "text/event-stream"})
    check_eq(r.status, 200, "status")
    check_eq(r.body.decode(), "event: error\ndata: sse.send: needs 'data'\n\ndata: \n\n",
             "the refused send wrote nothing; its message and an empty data event follow")
    ws = tw.RawWS(srv.port, path="/ws")
    check_eq(ws.status, 101, "accepted")
    check_eq(ws.recv_message(),
             (0x1, b"websocket.send: needs exactly one of 'bytes' or 'text', not both"),
             "the refused send's message")
    ws.expect_close(1000)
    ws.send_close(1000)
    ws.close()
    # Each refused send is logged once per scope, at the app's own file and line.
    src = os.path.join(lib.REPO, "tests", "integration", "perl", "required_fields.pl")
    lines = open(src).read().split("\n")
    at = {what: 1 + next(i for i, t in enumerate(lines) if what in t)
          for what in ("event => 'no-data'", "text => 'a', bytes => 'b'")}
    for what, msg in (("event => 'no-data'", "sse.send: needs 'data'"),
                      ("text => 'a', bytes => 'b'",
                       "websocket.send: needs exactly one of 'bytes' or 'text', not both")):
        want = "warn: perl: send refused at %s line %d: %s" % (src, at[what], msg)
        check(wait_for(lambda: want in srv.stderr(), 5), "no %r in:\n%s" % (want, srv.stderr()))
        check_eq(srv.stderr().count(want), 1, "times logged")


@test()
def mounted_apps_are_sandboxed(ctx):
    """Two Perl apps mounted in one config, with the same global and sub
    names: each keeps its own (they are compiled in packages of their own),
    and each ran its own lifespan startup."""
    a, b = app(ctx, "sandbox_a"), app(ctx, "sandbox_b")
    srv = ctx.start(None, workers=0, config="app: hello\nmounts:\n"
                    "  - {path: /a, app: %s}\n  - {path: /b, app: %s}\n" % (a, b))
    got = [request(srv.port, path=p).body.decode() for p in ("/a", "/a", "/b", "/a", "/b")]
    check_eq(got, ["a count=1 started=1", "a count=2 started=1", "b count=101 started=1",
                   "a count=3 started=1", "b count=102 started=1"], "responses")
    check("redefined" not in srv.stderr(), "a sub was redefined:\n%s" % srv.stderr()[-800:])


@test()
def body_from_file_handle(ctx):
    """http.response.body's fh form: the file's bytes, whatever they are."""
    data = bytes(range(256)) * 300 + b"end"
    path = os.path.join(ctx.tmpdir, "blob.bin")
    with open(path, "wb") as f:
        f.write(data)
    srv = ctx.start(app(ctx, "fh_body"))
    r = request(srv.port, path="/?" + path)
    check_eq(r.status, 200, "status")
    check_eq(len(r.body), len(data), "length")
    check(r.body == data, "the body differs from the file")


@test()
def long_app_path_loads(ctx):
    """The app's package name does not grow with its path (Perl caps a
    package name's length near 250 characters)."""
    d = os.path.join(ctx.tmpdir, *(["a-rather-long-directory-name.with.dots"] * 6))
    os.makedirs(d)
    path = os.path.join(d, "hello-app.pl")
    with open(os.path.join(PERL_DIR, "hello.pl")) as src, open(path, "w") as dst:
        dst.write(src.read())
    check(len(path) > 250, "path of %d characters" % len(path))
    app(ctx, "hello")  # skips without the Perl host
    srv = ctx.start(path)
    check_eq(request(srv.port).status, 200, "status")


@test()
def lifespan_state(ctx):
    srv = ctx.start(app(ctx, "lifespan"))
    for i in (1, 2, 3):
        r = request(srv.port)
        check_eq(r.body.decode(), "hello from startup count=%d fresh" % i, "request %d" % i)
    check("does not support lifespan" not in srv.stderr(), "lifespan ran")


@test()
def lifespan_worker_num(ctx):
    """Lifespan.pod 0.2: each pre-forked worker's lifespan scope has pagi.is_worker 1
    and its own worker_num (1..N); single-process mode has is_worker 0, no worker_num."""
    srv = ctx.start(app(ctx, "lifespan_worker"), workers=2)
    ok = wait_for(lambda: len([l for l in app_log(ctx) if l.startswith("lifespan ")]) >= 2, 10)
    lines = sorted(l.split(" ", 2)[2] for l in app_log(ctx) if l.startswith("lifespan "))
    check(ok, "both workers ran lifespan startup: %r" % lines)
    check_eq(lines, ["is_worker=1 worker_num=1", "is_worker=1 worker_num=2"], "per-worker values")
    pids = {l.split()[1]: l.split(" ", 2)[2] for l in app_log(ctx) if l.startswith("lifespan ")}
    check_eq(len(pids), 2, "two distinct worker processes")
    for _ in range(10):
        body = request(srv.port).body.decode()
        pid, rest = body.split(" ", 1)
        check_eq(rest, pids.get(pid), "a request sees its own worker's lifespan values")
    check_eq(srv.stop(), 0, "clean stop")
    open(ctx.app_log, "w").close()
    srv = ctx.start(app(ctx, "lifespan_worker"), workers=0)
    check_eq(request(srv.port).body.decode().split(" ", 1)[1], "is_worker=0 worker_num=absent",
             "single-process mode")


def _sigterm_after_client_left(ctx, workers):
    srv = ctx.start(app(ctx, "ignores_disconnect"), workers=workers,
                    config="timeouts:\n  shutdown: 30s\n")
    c = Conn(srv.port)
    c.send(build_request("GET", "/ignore", {"Host": "t"}))
    check(wait_for(lambda: "start /ignore" in app_log(ctx), 5), "the handler started")
    c.close()  # the client leaves; the handler keeps sleeping, ignoring it
    time.sleep(0.3)
    t0 = time.monotonic()
    srv.signal(signal.SIGTERM)
    check(srv.wait_exit(10), "exited within the grace, not timeouts.shutdown (30 s)")
    took = time.monotonic() - t0
    check(took < 5 * SLOW, "stopped in %.1fs" % took)
    check_eq(srv.returncode, 0, "exit status")
    check("end /ignore" not in app_log(ctx), "the orphaned handler did not run to its end")
    check("still running at shutdown" in srv.stderr(), "the abandoned handler is logged")


@test(timeout=40)
def sigterm_orphaned_handler_gets_a_short_grace(ctx):
    """Issue 11: a handler that ignores its client's disconnect does not hold a
    draining worker for the whole timeouts.shutdown once no connection is left."""
    _sigterm_after_client_left(ctx, 1)


@test(timeout=40)
def sigterm_orphaned_handler_gets_a_short_grace_single_process(ctx):
    _sigterm_after_client_left(ctx, 0)


@test(timeout=40)
def sigterm_work_after_a_complete_response_keeps_the_deadline(ctx):
    """A handler still working after its complete response was never told of a
    disconnect: it keeps timeouts.shutdown, not the 1 s grace."""
    srv = ctx.start(app(ctx, "ignores_disconnect"), workers=1,
                    config="timeouts:\n  shutdown: 30s\n")
    r = request(srv.port, path="/after")
    check_eq((r.status, r.body), (200, b"done"), "response")
    t0 = time.monotonic()
    srv.signal(signal.SIGTERM)
    check(srv.wait_exit(15), "exited once the handler was done")
    check("end /after" in app_log(ctx), "the handler's work after its response was cut")
    check(time.monotonic() - t0 >= 1.0, "it exited before the handler's 2 s of work")
    check_eq(srv.returncode, 0, "exit status")
    check("still running at shutdown" not in srv.stderr(), "nothing was abandoned")


@test(timeout=40)
def sigterm_teardown_cancel_of_a_stopped_timer(ctx):
    """An abandoned handler's sleep, cancelled from a DESTROY during the
    interpreter's teardown after the host stopped its timer: no use after
    free (ASan), a clean exit."""
    srv = ctx.start(app(ctx, "ignores_disconnect"), workers=0,
                    config="timeouts:\n  shutdown: 30s\n")
    c = Conn(srv.port)
    c.send(build_request("GET", "/guarded", {"Host": "t"}))
    check(wait_for(lambda: "start /guarded" in app_log(ctx), 5), "the handler started")
    c.close()
    time.sleep(0.3)
    srv.signal(signal.SIGTERM)
    check(srv.wait_exit(10), "exited within the grace")
    check_eq(srv.returncode, 0, "exit status")
    check("end /guarded" not in app_log(ctx), "the handler did not run to its end")


@test(timeout=40)
def sigterm_live_connection_gets_the_full_drain(ctx):
    """A handler whose client is still connected gets timeouts.shutdown, well past
    the short grace: a 3 s handler still answers after SIGTERM."""
    srv = ctx.start(app(ctx, "ignores_disconnect"), workers=1,
                    config="timeouts:\n  shutdown: 30s\n")
    c = Conn(srv.port, timeout=20)
    c.send(build_request("GET", "/slow?s=3", {"Host": "t"}))
    check(wait_for(lambda: "start /slow" in app_log(ctx), 5), "the handler started")
    t0 = time.monotonic()
    srv.signal(signal.SIGTERM)
    r = c.read_response("GET")
    check_eq((r.status, r.body), (200, b"slept 3"), "the live request got its response")
    check(time.monotonic() - t0 >= 2.0, "the response came after the handler's sleep")
    c.close()
    check(srv.wait_exit(10), "exited once the request was done")
    check_eq(srv.returncode, 0, "exit status")


@test()
def lifespan_startup_failed_stops_the_worker(ctx):
    srv = ctx.start(app(ctx, "lifespan"), wait=False, env={"PAGID_PERL_FAIL_STARTUP": "1"})
    check(srv.wait_exit(10), "pagid exits when lifespan startup fails")
    check(srv.returncode != 0, "non-zero exit status")
    check("no database" in srv.stderr(), "the failure message is logged: %r" % srv.stderr())


@test()
def send_futures_chain(ctx):
    # $send and $receive are code refs; a send accepted at once returns a done
    # Future (one shared object) that then/needs_all/get work on, scope after scope.
    srv = ctx.start(app(ctx, "futures"))
    want = (b"send:CODE receive:CODE same:1 connected:1 isa:1 done:1 failed:0 values:0"
            b"\nend")
    for _ in range(3):
        r = request(srv.port, path="/")
        check_eq(r.status, 200, "status")
        check_eq(r.body, want, "what the app saw")


@test()
def app_declining_lifespan_still_serves(ctx):
    srv = ctx.start(app(ctx, "stream"))
    check_eq(request(srv.port).status, 200, "status")
    check("does not support lifespan: http only" in srv.stderr(), "decline logged")


@test()
def cleanup_callbacks(ctx):
    srv = ctx.start(app(ctx, "cleanup"))
    r = request(srv.port, path="/ok?r1")
    check_eq(r.body, b"ok", "body")
    check(wait_for(lambda: "r1 complete complete=1" in app_log(ctx), 5),
          "on_complete ran: %r" % app_log(ctx))
    c = Conn(srv.port)
    c.send(build_request("GET", "/slow?r2", {"Host": "t"}))
    check(wait_for(lambda: b"waiting" in c.sock.recv(4096), 5), "partial response")
    c.close()
    check(wait_for(lambda: "r2 raced disconnect client_closed" in app_log(ctx), 5),
          "disconnect_future resolved with the reason: %r" % app_log(ctx))
    log = app_log(ctx)
    check("r2 disconnect client_closed connected=0" in log, "on_disconnect: %r" % log)
    check(not any(ln.startswith("r2 complete") for ln in log), "no on_complete for r2: %r" % log)
    check(not any(ln.startswith("r1 disconnect") for ln in log), "no on_disconnect for r1")


@test()
def producer_paced_by_transport(ctx):
    srv = ctx.start(app(ctx, "producer"))
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
    s.settimeout(10 * SLOW)
    s.connect(("127.0.0.1", srv.port))
    s.sendall(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    data = b""
    while True:
        time.sleep(0.001)
        b = s.recv(65536)
        if not b:
            break
        data += b
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    check(head.startswith(b"HTTP/1.1 200"), "status: %r" % head[:40])
    check_eq(len(body), 4 * 1024 * 1024, "body length")
    check(wait_for(lambda: any(ln.startswith("producer waits=") for ln in app_log(ctx)), 5),
          "producer finished")
    waits = [int(ln.split("=")[1]) for ln in app_log(ctx) if ln.startswith("producer waits=")][0]
    check(waits > 0, "the producer waited for on_drain at least once")


@test()
def app_that_dies(ctx):
    srv = ctx.start(app(ctx, "dies"))
    for _ in range(20):
        check_eq(request(srv.port, path="/before").status, 500, "die before start -> 500")
        check_eq(request(srv.port, path="/sync").status, 500, "synchronous die -> 500")
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=5 * SLOW)
        s.sendall(b"GET /after HTTP/1.1\r\nHost: t\r\n\r\n")
        data = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
        s.close()
        check(data.startswith(b"HTTP/1.1 200"), "die after start keeps the status: %r" % data)
        check(b"partial" in data and not data.endswith(b"0\r\n\r\n"),
              "the response is cut short, not completed: %r" % data)
    check_eq(request(srv.port, path="/exit").status, 500, "exit in an app -> 500")
    check_eq(request(srv.port, path="/ok").body, b"partial done", "still serving")
    check("exit(3) called by the app" in srv.stderr(), "exit logged as the failure")
    err = srv.stderr()
    check("boom before start" in err and "boom sync" in err and "boom after start" in err,
          "the Perl messages are logged: %r" % err[-2000:])


@test()
def send_validation_messages(ctx):
    srv = ctx.start(app(ctx, "dies"))
    r = request(srv.port, path="/bad")
    check_eq(r.status, 200, "status")
    check_eq(r.body.decode().splitlines(), [
        "http.response.start: header value contains CR/LF/NUL",
        "http.response.start: missing 'status'",
        "http.response.start: 'status' must be an integer",
        "send: unknown event type 'no.such.event'",
        "send: event has no 'type'"], "messages")


@test(timeout=120, serial=True)
def no_leak_over_many_requests(ctx):
    srv = ctx.start(app(ctx, "hello"))
    def rss():
        with open("/proc/%d/status" % srv.pid) as f:
            for ln in f:
                if ln.startswith("VmRSS:"):
                    return int(ln.split()[1])
        return 0
    c = Conn(srv.port)
    req = build_request("GET", "/", {"Host": "t"})
    def burst(n):
        for _ in range(n // 100):
            c.send(req * 100)
            for _ in range(100):
                c.read_response("GET")
    burst(2000)
    before = rss()
    burst(int(20000 / SLOW))
    after = rss()
    c.close()
    if SLOW > 1:
        return  # sanitizer builds: ASan's quarantine grows RSS by design; this run checks crashes
    check(after - before < 4096, "RSS grew %d KiB over the requests" % (after - before))


@test()
def offset_length_and_retry_keep_their_perl_meaning(ctx):
    """The C interface marks an fd body with use_fd and a retry line with
    has_retry, and reads length 0 as "to EOF"; a Perl app still means
    Www.pod's: length => 0 sends nothing, no length sends to EOF, retry => 0
    writes "retry: 0", no retry key writes no retry line."""
    path = os.path.join(ctx.tmpdir, "digits.txt")
    with open(path, "wb") as f:
        f.write(b"0123456789")
    srv = ctx.start(app(ctx, "zero_fields"))
    for route, want in (("/len0", b""), ("/fh0", b""), ("/range", b"234"),
                        ("/tail", b"456789")):
        r = request(srv.port, path=route + "?" + path)
        check_eq((r.status, r.body), (200, want), route)
    # length => 0 sends nothing, but a file that isn't there still fails the send
    try:
        request(srv.port, path="/len0-missing?" + path)
    except Exception:
        pass  # the response started, then the app died: the connection is cut
    check(wait_for(lambda: "cannot open %s.missing" % path in srv.stderr(), 5),
          "the missing file's send refused: %s" % srv.stderr()[-400:])
    c = lib.Conn(srv.port)
    c.send(b"GET /sse HTTP/1.1\r\nHost: t\r\nAccept: text/event-stream\r\n\r\n")
    raw = c.read_to_eof()
    c.close()
    check(b"data: no retry\n\n" in raw and b"retry: 0\ndata: retry zero\n\n" in raw,
          "sse events: %r" % raw[-400:])
    check_eq(raw.count(b"retry:"), 1, "retry: lines")


@test()
def lifespan_startup_that_dies_fails(ctx):
    """A startup handler that dies after taking lifespan.startup fails the
    start like lifespan.startup.failed, with the exception in the log; an app
    that refuses the lifespan scope (stream.pl) is still 'does not support'."""
    srv = ctx.start(app(ctx, "lifespan_dies"), workers=1, wait=False)
    check(srv.wait_exit(10), "pagid exits when lifespan startup dies")
    check(srv.returncode != 0, "non-zero exit status")
    err = srv.stderr()
    check(re.search(r"error.*lifespan startup failed: .*DBI connect\('dbname=app'\) failed", err)
          or re.search(r"lifespan startup failed: .*DBI connect", err),
          "the exception is logged as a startup failure:\n%s" % err[-1500:])
    check("does not support lifespan" not in err, "called unsupported:\n%s" % err[-1500:])


@test()
def preload_names_what_the_app_opened(ctx):
    """After preload the zygote warns of each socket or file the app opened
    while loading (shared by every worker), naming it; hello.pl opens none."""
    db = socket.socket()
    db.bind(("127.0.0.1", 0))
    db.listen(4)
    port = db.getsockname()[1]
    path = app(ctx, "preload_opens")
    srv = ctx.start(path, workers=1, env={"PAGID_TEST_DB_PORT": str(port)})
    check_eq(request(srv.port).body, b"ok", "served")
    err = srv.stderr()
    check(re.search(r"warn.*the app opened a socket connected to 127\.0\.0\.1:%d \(fd \d+\)" % port,
                    err), "no warning naming the socket:\n%s" % err[-1500:])
    check(re.search(r"the app opened the file .*preload_opens\.pl \(fd \d+\)", err),
          "no warning naming the file:\n%s" % err[-1500:])
    check(re.search(r"preload_opens\.pl \(fd \d+\) while it was loaded: .*; open it in lifespan "
                    r"startup or per worker \(docs/perl\.md, Preloading\)", err),
          "a PAGI app's advice (lifespan startup):\n%s" % err[-1500:])
    srv.stop()
    db.close()
    quiet = ctx.start(app(ctx, "hello"), workers=1)
    check_eq(request(quiet.port).status, 200, "status")
    check("the app opened" not in quiet.stderr(), "a warning for hello.pl:\n%s" % quiet.stderr())


def _chunked_raw(port, path):
    """GET path over HTTP/1.1; the raw bytes up to the end of the chunked message."""
    c = Conn(port, timeout=5)
    try:
        c.send(build_request("GET", path, {"Host": "t", "Connection": "close"}))
        return c.read_to_eof()
    finally:
        c.close()


@test()
def cookbook_streaming_sends_its_trailer(ctx):
    """Cookbook "Streaming a response": trailers => 1 and bodies with more => 1,
    then http.response.trailers. Www.pod: after the trailers the body is
    complete, so they also end a body left open with more => 1 (the recipe's
    loop stops early: its first $receive is http.request, not a disconnect).
    The response is whole, with its trailer, over HTTP/1.1 and h2c."""
    port = lib.free_port()
    srv = ctx.start(None, workers=1, listen=False, port=port,
                    config="app: %s\nlisten:\n  - {address: '127.0.0.1:%d', http2: prior-knowledge}\n"
                    % (app(ctx, "cookbook_streaming"), port))
    raw = _chunked_raw(port, "/")
    head, _, body = raw.partition(b"\r\n\r\n")
    check(b"transfer-encoding: chunked" in head.lower(), "not chunked: %r" % raw)
    check(body.startswith(b"8\r\nChunk 1\n\r\n"), "first chunk: %r" % raw)
    check(body.endswith(b"0\r\nx-stream-complete: 1\r\n\r\n"),
          "the trailer does not end the message: %r" % raw)
    check("needs trailers" not in srv.stderr() and "refused" not in srv.stderr(),
          "a send was refused:\n%s" % srv.stderr()[-1500:])
    hdr = os.path.join(ctx.tmpdir, "h2.txt")
    p = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "-D", hdr,
                        "http://127.0.0.1:%d/" % port], capture_output=True, timeout=10)
    check_eq(p.returncode, 0, "curl h2c exit (stderr %r)" % p.stderr)
    check(p.stdout.startswith(b"Chunk 1\n"), "h2 body %r" % p.stdout)
    with open(hdr, "rb") as f:
        check(b"x-stream-complete: 1" in f.read().lower(), "no h2 trailer")
    srv.stop()


@test()
def trailers_refusals_say_what_the_app_did(ctx):
    """A trailers send the server must refuse names the app's mistake."""
    path = os.path.join(ctx.tmpdir, "bad_trailers.pl")
    with open(path, "w") as f:
        f.write("""use Future::AsyncAwait;
async sub {
    my ($scope, $receive, $send) = @_;
    return if $scope->{type} ne 'http';
    await $send->({type => 'http.response.start', status => 200, headers => []});
    await $send->({type => 'http.response.body', body => 'x', more => 1});
    my $err = '';
    eval { await $send->({type => 'http.response.trailers', headers => [['x-a', '1']]}); 1 }
        or $err = $@;
    await $send->({type => 'http.response.body', body => "refused: $err"});
};
""")
    srv = ctx.start(path, workers=0)
    r = request(srv.port)
    check(b"did not declare trailers => 1" in r.body, "the message: %r" % r.body)
    srv.stop()


@test()
def cookbook_broadcast_first_receive_is_sse_request(ctx):
    """Cookbook "Broadcasting events": the first $receive of an SSE GET is
    sse.request (Www.pod), so the recipe as written stops before its last
    events; taking sse.request first and then holding $receive, all three."""
    srv = ctx.start(app(ctx, "cookbook_broadcast"), workers=1)
    c = Conn(srv.port, timeout=5)
    c.send(build_request("GET", "/?as=fixed", {"Host": "t", "Accept": "text/event-stream",
                                               "Connection": "close"}))
    data = c.read_to_eof()
    c.close()
    check_eq(data.count(b"event: "), 3, "events of the corrected recipe in %r" % data)
    check(b"data: finished" in data, "last event: %r" % data)
    check(wait_for(lambda: "fixed first=sse.request sent=3" in app_log(ctx), 5),
          "app log: %r" % app_log(ctx))
    c = Conn(srv.port, timeout=5)
    c.send(build_request("GET", "/?as=written", {"Host": "t", "Accept": "text/event-stream",
                                                 "Connection": "close"}))
    data = c.read_to_eof()
    c.close()
    check(wait_for(lambda: any(l.startswith("written first=sse.request")
                               for l in app_log(ctx)), 5),
          "the recipe's 'disconnect' Future held sse.request: %r" % app_log(ctx))
    written = [l for l in app_log(ctx) if l.startswith("written")][0]
    check(int(written.rsplit("=", 1)[1]) < 3, "the recipe as written sent all: %r" % written)
    check(data.startswith(b"HTTP/1.1 200"), "the stream ended cleanly: %r" % data)
    srv.stop()


@test()
def app_stderr_goes_to_the_error_log(ctx):
    """With error_log.path set, a worker's standard error (warn, print STDERR,
    a write on fd 2) lands in the error log, a warn tagged with the worker;
    nothing of it on the terminal."""
    log = os.path.join(ctx.tmpdir, "error.log")
    srv = ctx.start(app(ctx, "stderr_app"), workers=1,
                    config="error_log: {path: %s}\n" % log)
    check_eq(request(srv.port).body, b"ok", "served")

    def text():
        try:
            with open(log) as f:
                return f.read()
        except OSError:
            return ""
    check(wait_for(lambda: "written to fd 2" in text(), 5), "fd 2 not in the log:\n%s" % text())
    t = text()
    check(re.search(r"\[warn\] worker 1\[\d+\]: perl: DBD::Pg::st execute failed: relation", t),
          "the warn is not a tagged log line:\n%s" % t[-1500:])
    check("printed to STDERR\n" in t, "print STDERR not in the log:\n%s" % t[-1500:])
    err = srv.stderr()
    for s in ("DBD::Pg", "printed to STDERR", "written to fd 2"):
        check(s not in err, "%r on the terminal:\n%s" % (s, err[-1000:]))
    srv.stop()


@test(timeout=40, serial=True)
def blocked_handler_killed_with_its_request_named(ctx):
    # A Perl handler that blocks (sleep 30 without await) holds its worker's
    # loop: the master's kill line names the request, as for a C app; the
    # other worker serves meanwhile.
    srv = ctx.start(app(ctx, "blocks"), workers=2, config="timeouts: {heartbeat: 2s}\n")
    srv.allow_crash = True  # the master reports the killed worker
    check(wait_for(lambda: "all workers ready" in srv.stderr(), 10 * SLOW), "workers not ready")
    c = Conn(srv.port)
    c.send(b"POST /slow?q=%22a%20b%22 HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n")
    time.sleep(0.3 * SLOW)
    r = request(srv.port, path="/")
    check_eq(r.status, 200, "a request while one worker is blocked")
    line = (r"worker \d \(pid (\d+)\): event loop blocked for [\d.]+s in POST "
            r"/slow\?q=%22a%20b%22 \(the app's handle callback, started [\d.]+s ago; limit "
            r"2\.0s: timeouts\.heartbeat\); killing it")
    m = wait_for(lambda: re.search(line, srv.stderr()), 6 * SLOW)
    check(m, "no kill line naming the request: %r" % srv.stderr()[-800:])
    check(r.body != b"ok " + m.group(1).encode(), "served by the blocked worker")
    c.close()
