"""PSGI apps on the Perl host (docs/psgi.md): Plack's own server conformance
suite (Plack::Test::Suite, every subtest), the PSGI env, the request body
read whole and spooled, every response form, the streaming writer reaching
the client as it writes and pacing on a slow one, errors as a 500 naming the
request, psgi.errors, psgix.cleanup, psgix.harakiri with the master's
respawn, bad .psgi files, and a PSGI app mounted beside a PAGI one.
Skipped when pagid was built without Perl or Plack is not installed."""

import hashlib
import os
import re
import socket
import subprocess
import time

import lib
from lib import SLOW, Conn, build_request, check, check_eq, request, test, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
PSGI_DIR = os.path.join(HERE, "psgi")
PERL_DIR = os.path.join(HERE, "perl")
_usable = {}


def psgi(ctx, name):
    """Path of a test .psgi; skips without the Perl host or Plack."""
    if ctx.pagid not in _usable:
        p = subprocess.run([ctx.pagid, "-t", "-a", os.path.join(PERL_DIR, "hello.pl"),
                            "-l", "127.0.0.1:1"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=30)
        plack = subprocess.run(["perl", "-MPlack::Test::Suite", "-e", "1"],
                               capture_output=True, timeout=30).returncode == 0
        _usable[ctx.pagid] = (b"built with the Perl host" not in p.stdout, plack)
    perl, plack = _usable[ctx.pagid]
    if not perl:
        raise lib.Skip("pagid was built without the Perl host")
    if not plack:
        raise lib.Skip("Plack is not installed (Debian: libplack-perl)")
    return os.path.join(PSGI_DIR, name + ".psgi")


def env_of(body):
    return dict(ln.split("=", 1) for ln in body.decode().splitlines() if "=" in ln)


def worker_pid(srv):
    return int(request(srv.port, path="/pid").body.decode().split("=")[1])


@test(timeout=180)
def plack_test_suite(ctx):
    """Plack::Test::Suite->run_server_tests with a server callback that execs
    pagid (-w 2) on the suite's app wrapped in Plack::Middleware::Lint, run
    on the workers' loops (worker_pool: {processes: 0}): every Plack subtest
    must pass; a failing one is named."""
    run_plack_suite(ctx, "{processes: 0}")


@test(timeout=180)
def plack_test_suite_through_the_pool(ctx):
    """The same suite with the app in a worker pool of 2 processes: every
    request relayed to a pool process and its response back."""
    run_plack_suite(ctx, "{processes: 2, queue_limit: 64}")


def run_plack_suite(ctx, pool):
    psgi(ctx, "plack_suite")
    n_tests = int(subprocess.run(
        ["perl", "-MPlack::Test::Suite", "-e", "print scalar @Plack::Test::Suite::TEST"],
        capture_output=True, timeout=30).stdout)
    env = dict(os.environ, PAGID=ctx.pagid, PAGID_POOL=pool, TMPDIR=ctx.tmpdir,
               PAGID_ARGS=" ".join(["-w", "2"] + lib.root_user_args()))
    p = subprocess.run(["perl", os.path.join(PSGI_DIR, "plack_suite.t")], env=env,
                       cwd=ctx.tmpdir, capture_output=True, timeout=150 * SLOW)
    out = p.stdout.decode("utf-8", "replace").splitlines()
    subtest, seen, failed, oks = None, [], {}, 0
    for line in out:
        if line.startswith("# ") and not line.startswith("#   "):
            subtest = line[2:]
            seen.append(subtest)
        elif line.startswith("not ok"):
            failed.setdefault(subtest, []).append(line)
        elif line.startswith("ok "):
            oks += 1
    plan = [ln for ln in out if re.match(r"^1\.\.\d+$", ln)]
    ctx.note("Plack::Test::Suite: %d subtests, %d assertions ok, %d subtests failed"
             % (len(seen), oks, len(failed)))
    check(not failed, "Plack subtests failed: %s\n%s" % (
        ", ".join(failed), p.stderr.decode("utf-8", "replace")[-2000:]))
    check_eq(len(seen), n_tests, "Plack subtests run (of @Plack::Test::Suite::TEST)")
    check(plan and int(plan[0][3:]) == oks, "the TAP plan %s against %d oks" % (plan, oks))
    check_eq(p.returncode, 0, "plack_suite.t exit status (stderr: %s)"
             % p.stderr.decode("utf-8", "replace")[-1500:])


@test()
def env_is_complete(ctx):
    check_env(ctx, ctx.start(psgi(ctx, "app"), workers=0), pooled=False)


@test()
def env_is_complete_through_the_pool(ctx):
    """The same env from a pool process (built there in C from the worker's
    frames, perl_pool_serve.c): multiprocess and harakiri are 1."""
    check_env(ctx, ctx.start(None, workers=1, config=POOL_1 % psgi(ctx, "app")), pooled=True)


POOL_1 = "app: {psgi: %s, worker_pool: {processes: 1}}\n"


def check_env(ctx, srv, pooled):
    r = request(srv.port, method="POST", path="/env/a%2cb//c%E3%81%82?x=1&y=%20",
                headers={"Foo": "one", "Content-Type": "text/plain", "X_Under": "dropped",
                         "Cookie": "a=1"}, body=b"hello")
    check_eq(r.status, 200, "status")
    check_eq(r.header("content-length"), str(len(r.body)), "an array body gets a content-length")
    e = env_of(r.body)
    want = {"REQUEST_METHOD": "POST", "SCRIPT_NAME": "",
            "PATH_INFO": "/env/a,b//c\u00e3\u0081\u0082",  # bytes, shown as latin-1 by the app
            "REQUEST_URI": "/env/a%2cb//c%E3%81%82?x=1&y=%20", "QUERY_STRING": "x=1&y=%20",
            "SERVER_NAME": "127.0.0.1", "SERVER_PORT": str(srv.port),
            "SERVER_PROTOCOL": "HTTP/1.1", "REMOTE_ADDR": "127.0.0.1",
            "CONTENT_LENGTH": "5", "CONTENT_TYPE": "text/plain", "HTTP_FOO": "one",
            "HTTP_COOKIE": "a=1", "psgi.version": "1,1", "psgi.url_scheme": "http",
            "psgi.multithread": "0", "psgi.multiprocess": "%d" % pooled, "psgi.run_once": "0",
            "psgi.nonblocking": "0", "psgi.streaming": "1", "psgix.input.buffered": "1",
            "psgix.cleanup": "1", "psgix.harakiri": "%d" % pooled, "input.length": "5",
            "input.reread": "1", "input.file": "0", "errors.ok": "1"}
    # The app prints PATH_INFO's bytes; the body decoded as UTF-8 gives the
    # characters back: compare the raw bytes instead.
    check(b"PATH_INFO=/env/a,b//c\xe3\x81\x82\n" in r.body, "PATH_INFO decoded once, bytes")
    del want["PATH_INFO"]
    for k, v in want.items():
        check_eq(e.get(k), v, k)
    check("REMOTE_PORT" in e and int(e["REMOTE_PORT"]) > 0, "REMOTE_PORT")
    check("HTTP_X_UNDER" not in e, "a header name with '_' is dropped (it would alias X-Under)")
    check("HTTP_CONTENT_LENGTH" not in e and "HTTP_CONTENT_TYPE" not in e, "no HTTP_CONTENT_*")
    # Repeated headers joined with ", ", cookies with "; ".
    c = Conn(srv.port)
    c.send(b"GET /env HTTP/1.1\r\nHost: t\r\nFoo: a\r\nFoo: b\r\nCookie: x=1\r\nCookie: y=2\r\n"
           b"Connection: close\r\n\r\n")
    e = env_of(c.read_response("GET").body)
    c.close()
    check_eq(e.get("HTTP_FOO"), "a, b", "repeated header")
    check_eq(e.get("HTTP_COOKIE"), "x=1; y=2", "cookies")
    check("CONTENT_LENGTH" not in e, "no CONTENT_LENGTH on a GET without a body")


@test()
def body_read_whole_spooled_and_bounded(ctx):
    check_body(ctx.start(psgi(ctx, "app"), workers=0, config="limits: {max_body_size: 2m}\n"))


@test()
def body_read_whole_spooled_and_bounded_through_the_pool(ctx):
    """The same in a pool process, which reads the body frames in C and
    spools past 64 KiB again (perl_pool_serve.c)."""
    check_body(ctx.start(None, workers=1, config=POOL_1 % psgi(ctx, "app")
                         + "limits: {max_body_size: 2m}\n"))


def check_body(srv):
    big = os.urandom(1024 * 1024)
    r = request(srv.port, method="POST", path="/env", body=big,
                headers={"Content-Type": "application/octet-stream"}, timeout=20)
    e = env_of(r.body)
    check_eq((e.get("input.length"), e.get("input.md5")),
             (str(len(big)), hashlib.md5(big).hexdigest()), "1 MiB body, intact")
    check_eq(e.get("input.file"), "1", "past 64 KiB the body is in a spool file")
    check_eq(e.get("input.reread"), "1", "psgi.input is seekable")
    small = b"x" * 60000
    e = env_of(request(srv.port, method="POST", path="/env", body=small).body)
    check_eq((e.get("input.length"), e.get("input.file")), ("60000", "0"), "64 KiB stays in memory")
    # Chunked: the length is known once read.
    c = Conn(srv.port)
    c.send(b"POST /env HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
           b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
    e = env_of(c.read_response("POST").body)
    c.close()
    check_eq((e.get("CONTENT_LENGTH"), e.get("input.length")), ("11", "11"), "chunked body")
    # Over limits.max_body_size: refused by the server, the app never sees it.
    r = request(srv.port, method="POST", path="/env", body=b"y" * (3 * 1024 * 1024), timeout=20)
    check_eq(r.status, 413, "a body over max_body_size")


@test()
def response_forms(ctx):
    srv = ctx.start(psgi(ctx, "app"), workers=0)
    r = request(srv.port, path="/delayed")
    check_eq((r.status, r.body), (200, b"delayed body"), "delayed responder, full response")
    r = request(srv.port, path="/getline")
    check_eq(r.body, b"".join(b"line %d\n" % i for i in range(1, 6)), "getline body")
    check_eq(request(srv.port, path="/closed").body, b"1", "the getline body was closed")
    data = os.urandom(300000)
    path = os.path.join(ctx.tmpdir, "blob.bin")
    with open(path, "wb") as f:
        f.write(data)
    for q in ("with_path&path=", "plain&path="):
        r = request(srv.port, path="/file?" + q + path, timeout=20)
        check_eq((r.status, hashlib.md5(r.body).hexdigest()),
                 (200, hashlib.md5(data).hexdigest()), "file body " + q)
    r = request(srv.port, path="/cookies", headers={"Cookie": "k=v"})
    check_eq([v for n, v in r.headers if n == "set-cookie"], ["a=1; Path=/", "b=2; Path=/"],
             "two Set-Cookie headers")
    check_eq(r.body, b"k=v", "cookie in")
    r = request(srv.port, method="HEAD", path="/getline")
    check_eq((r.status, r.body), (200, b""), "HEAD: no body")


@test(timeout=60)
def streaming_writer_reaches_client_as_written(ctx):
    srv = ctx.start(psgi(ctx, "app"), workers=0)
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    s.sendall(b"GET /stream?n=3&pause=1.2 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    t0 = time.monotonic()
    got, when = b"", {}
    while True:
        d = s.recv(65536)
        if not d:
            break
        got += d
        for i in (1, 2, 3):
            if i not in when and b"chunk %d\n" % i in got:
                when[i] = time.monotonic() - t0
    s.close()
    check_eq(sorted(when), [1, 2, 3], "all chunks (%r)" % got[-200:])
    # Pauses of 1.2 s leave room for a loaded machine in both directions.
    check(when[1] < 0.9, "chunk 1 came %.2fs in, before the app's first pause ended" % when[1])
    check(when[2] - when[1] > 0.8, "chunk 2 came a pause after chunk 1 (%.2f)" % (when[2] - when[1]))


@test(timeout=90, serial=True)
def streaming_writer_paced_by_slow_client(ctx):
    """64 MiB streamed by a synchronous writer to a client that reads nothing
    for 2 s: the writer waits for the client (memory stays flat), then every
    byte arrives."""
    srv = ctx.start(psgi(ctx, "app"), workers=0)
    def rss():
        with open("/proc/%d/status" % srv.pid) as f:
            return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))
    base = rss()
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    s.sendall(b"GET /big-stream?mib=64 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    time.sleep(2)
    grown = rss() - base
    total = 0
    head = b""
    while True:
        d = s.recv(1 << 20)
        if not d:
            break
        if len(head) < 200:
            head += d[:200]
        total += len(d)
    s.close()
    check(grown < 32 * 1024, "the worker grew %d KiB while the client did not read" % grown)
    check(b"200 OK" in head, "status")
    check(total > 64 * 1024 * 1024, "all 64 MiB arrived (%d bytes with the chunk framing)" % total)
    check(wait_for(lambda: "big-stream: done" in srv.stderr(), 5), "the app finished its loop")


@test(timeout=60)
def streaming_stops_when_client_leaves(ctx):
    srv = ctx.start(psgi(ctx, "app"), workers=0)
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    s.sendall(b"GET /big-stream?mib=512 HTTP/1.1\r\nHost: t\r\n\r\n")
    s.recv(65536)
    s.close()
    check(wait_for(lambda: "stopped after" in srv.stderr(), 15),
          "the app's write died once the client left: %s" % srv.stderr()[-500:])
    check("the client went away" in srv.stderr(), "the die says why")
    check_eq(request(srv.port, path="/pid").status, 200, "the worker serves on")
    check(not re.search(r"error: .*big-stream", srv.stderr()), "not logged as an app error")


@test()
def errors_are_500_naming_the_request(ctx):
    check_errors(ctx.start(psgi(ctx, "app"), workers=0))


@test()
def errors_are_500_through_the_pool(ctx):
    """The same from a pool process, where an array response is checked and
    written in C (perl_pool_serve.c) and anything it declines goes through
    PSGI.pm's adapter."""
    check_errors(ctx.start(None, workers=1, config=POOL_1 % psgi(ctx, "app")))


def check_errors(srv):
    cases = {"/dies": "PSGI app died: the app broke on purpose",
             "/bad-status": "the status is not a 3-digit code",
             "/odd-headers": "the headers are not an array reference of name/value pairs",
             "/bad-body": "the body is not an array reference, a file handle",
             "/wide": "wide characters",
             "/nul-in-name": "is not a valid header name",
             "/cr-in-value": "has CR, LF or NUL in its value",
             "/undef-value": "has an undefined value"}
    for path, why in cases.items():
        r = request(srv.port, path=path)
        check_eq(r.status, 500, path)
        check(wait_for(lambda: re.search(r"error: .*GET %s: .*%s" % (re.escape(path), re.escape(why)),
                                         srv.stderr()), 3),
              "the error log names GET %s and why (%s): %s" % (path, why, srv.stderr()[-600:]))
    check_eq(request(srv.port, path="/pid").status, 200, "the worker serves on")


@test()
def a_die_mid_stream_cuts_the_response(ctx):
    """A streaming app that dies after its first write: the client sees the
    response cut short (no last chunk), the error log names the request;
    a writer dropped without close by an app that returns ends the body."""
    srv = ctx.start(psgi(ctx, "app"), workers=0)
    c = Conn(srv.port)
    c.send("GET /dies-mid-stream HTTP/1.1\r\nHost: t\r\n\r\n")
    check_eq(c.read_head().status, 200, "status")
    rest = c.read_to_eof()
    check(b"part1" in rest, "the first write came: %r" % rest)
    check(not rest.endswith(b"0\r\n\r\n"), "the response ended clean: %r" % rest)
    c.close()
    check(wait_for(lambda: re.search(r"error: .*broke mid-stream.*GET /dies-mid-stream",
                                     srv.stderr()), 3),
          "the error log names the request: %s" % srv.stderr()[-600:])
    r = request(srv.port, path="/drops-writer")
    check_eq((r.status, r.body), (200, b"all of it\n"), "a dropped writer ends the body")


@test()
def psgi_errors_and_cleanup(ctx):
    srv = ctx.start(psgi(ctx, "app"), workers=0)
    check_eq(request(srv.port, path="/errors").body, b"logged", "response")
    check(wait_for(lambda: "psgi.errors line one" in srv.stderr()
                   and "psgi.errors line two" in srv.stderr(), 3),
          "both print forms reach the error log: %s" % srv.stderr()[-400:])
    check_eq(request(srv.port, path="/cleanup").body, b"cleanup=1", "response")

    def ran():
        try:
            with open(ctx.app_log) as f:
                return "cleanup ran for /cleanup" in f.read()
        except OSError:
            return False
    check(wait_for(ran, 3), "the psgix.cleanup handler ran after the response")


@test(timeout=60)
def harakiri_ends_the_worker_and_the_master_respawns_it(ctx):
    # On the worker's loop (no pool); through a pool: pool.harakiri_*.
    srv = ctx.start(None, workers=1, config="app: {psgi: %s, worker_pool: {processes: 0}}\n"
                    % psgi(ctx, "app"))
    first = worker_pid(srv)
    r = request(srv.port, path="/harakiri")
    check_eq(r.body.decode(), "pid=%d harakiri=1" % first, "the response still goes out")
    check(wait_for(lambda: first not in srv.workers() and len(srv.workers()) == 1, 10),
          "a new worker replaced %d: %s" % (first, srv.workers()))
    check(wait_for(lambda: request(srv.port, path="/pid").status == 200, 10), "served again")
    check(worker_pid(srv) != first, "by another process")
    check("set psgix.harakiri.commit: recycling this worker" in srv.stderr(), "logged")
    # Alone (-w 0) there is nobody to respawn it: psgix.harakiri is false.
    one = ctx.start(psgi(ctx, "app"), workers=0)
    check_eq(request(one.port, path="/harakiri").body.decode(),
             "pid=%d harakiri=0" % one.pid, "no harakiri without a master")
    check_eq(worker_pid(one), one.pid, "the single process goes on")


@test()
def bad_psgi_files_fail_with_file_and_line(ctx):
    psgi(ctx, "app")
    cases = {"syntax_error": r"syntax_error\.psgi:4: syntax error",
             "missing_module": r"missing_module\.psgi:3: Can't locate Pagid/No/Such/Module\.pm",
             "no_coderef": r"no_coderef\.psgi:\d+: did not return a code reference"}
    for name, pattern in cases.items():
        path = os.path.join(PSGI_DIR, name + ".psgi")
        p = subprocess.run([ctx.pagid, "-w", "0", "-l", "127.0.0.1:%d" % lib.free_port(),
                            "-a", path] + lib.root_user_args(), stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=30 * SLOW)
        err = p.stderr.decode("utf-8", "replace")
        check_eq(p.returncode, 3, "%s: exit status" % name)
        check(re.search(pattern, err), "%s: %r in %s" % (name, pattern, err[-600:]))
    # -t loads the app as a zygote would (docs/psgi.md), and names a missing file.
    p = subprocess.run([ctx.pagid, "-t", "-a", os.path.join(PSGI_DIR, "syntax_error.psgi")]
                       + lib.root_user_args(), capture_output=True, timeout=60 * SLOW)
    check_eq(p.returncode, 1, "-t on a .psgi that does not compile")
    check(re.search(rb"syntax_error\.psgi:4: syntax error", p.stderr), p.stderr.decode()[-300:])
    p = subprocess.run([ctx.pagid, "-t", "-a", os.path.join(ctx.tmpdir, "absent.psgi")],
                       capture_output=True, timeout=30)
    check_eq(p.returncode, 1, "-t on a missing .psgi")
    check(b"PSGI app" in p.stderr and b"absent.psgi" in p.stderr, p.stderr.decode()[-300:])


@test()
def yaml_psgi_mounted_beside_a_pagi_app(ctx):
    app = psgi(ctx, "app")
    hello = os.path.join(PERL_DIR, "hello.pl")
    srv = ctx.start(None, workers=0, config="app: {perl: %s}\nmounts:\n"
                    "  - {path: /psgi, app: {psgi: %s, lib: [%s]}}\n" % (hello, app, PSGI_DIR))
    check_eq(request(srv.port, path="/").body, b"Hello from PAGI", "the PAGI app at /")
    e = env_of(request(srv.port, path="/psgi/env?q=1").body)
    check_eq((e.get("SCRIPT_NAME"), e.get("PATH_INFO"), e.get("REQUEST_URI")),
             ("/psgi", "/env", "/psgi/env?q=1"), "SCRIPT_NAME is the mount, PATH_INFO the rest")
    check_eq(env_of(request(srv.port, path="/psgi").body).get("PATH_INFO"), "",
             "the mount itself: PATH_INFO empty")
    # The psgi key wants a .psgi file, and -T shows it back as psgi.
    conf = os.path.join(ctx.tmpdir, "wrong.yaml")
    with open(conf, "w") as f:
        f.write("app: {psgi: %s}\n" % hello)
    p = subprocess.run([ctx.pagid, "-t", "-c", conf], capture_output=True, timeout=30)
    check_eq(p.returncode, 1, "-t on app: {psgi: FILE.pl}")
    check(b"must name a PSGI app file (.psgi)" in p.stderr, p.stderr.decode()[-300:])
    with open(conf, "w") as f:
        f.write("app: {psgi: %s, lib: [/tmp]}\n" % app)
    p = subprocess.run([ctx.pagid, "-T", "-c", conf], capture_output=True, timeout=30)
    check(re.search(rb"psgi: .*app\.psgi", p.stdout), "-T shows the psgi key: %s" % p.stdout[-400:])


@test()
def a_psgi_app_in_a_pl_file_is_named_as_one(ctx):
    """plackup runs a PSGI app whatever its file's name (Mojolicious::Lite's
    is myapp.pl); pagid picks the PSGI adapter by .psgi, so a PSGI app in a
    .pl runs as a PAGI app. Both ways that can go say so: a request gets a
    500 whose log line says the app returned a PSGI response, and a file
    ending in something other than a code reference names FILE.psgi."""
    psgi(ctx, "app")
    app_pl = os.path.join(ctx.tmpdir, "psgi_app.pl")
    with open(app_pl, "w") as f:
        f.write("my $app = sub { [200, ['Content-Type' => 'text/plain'], ['psgi']] };\n")
    srv = ctx.start(app_pl, workers=0)
    check_eq(request(srv.port, path="/x").status, 500, "a PSGI app called as a PAGI app")
    check(wait_for(lambda: re.search(r"error: .*GET /x: the app returned a PSGI response "
                                     r"\(\[200, \.\.\.\]\).*FILE\.psgi", srv.stderr()), 3),
          "the error log says it is a PSGI app: %s" % srv.stderr()[-600:])
    ends_with_one = os.path.join(ctx.tmpdir, "myapp.pl")
    with open(ends_with_one, "w") as f:
        f.write("my $app = sub { [200, [], ['x']] };\n1;\n")
    p = subprocess.run([ctx.pagid, "-w", "0", "-l", "127.0.0.1:%d" % lib.free_port(),
                        "-a", ends_with_one] + lib.root_user_args(), stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=30 * SLOW)
    err = p.stderr.decode("utf-8", "replace")
    check_eq(p.returncode, 3, "exit status")
    check(re.search(r"myapp\.pl:2: did not return a code reference but '1' .*"
                    r"a PSGI app.* must be named FILE\.psgi", err), err[-600:])
    # Under a master the same file stops the zygote, which counts what will
    # not start as -w said (workers) and the pool apart.
    port = lib.free_port()
    p = subprocess.run([ctx.pagid, "-w", "2", "-l", "127.0.0.1:%d" % port, "-c",
                        lib.write_config(ctx, "app: {psgi: %s, worker_pool: {processes: 3}}\n"
                                         % os.path.join(PSGI_DIR, "no_coderef.psgi"), "nc.yaml")]
                       + lib.root_user_args(), stdin=subprocess.DEVNULL, capture_output=True,
                       timeout=60 * SLOW)
    err = p.stderr.decode("utf-8", "replace")
    check_eq(p.returncode, 3, "exit status under a master")
    check("could not load the apps; 2 workers and 3 pool processes will not start" in err,
          err[-800:])


@test()
def a_psgi_mount_under_a_master_runs_in_the_default_pool(ctx):
    """A PSGI app under `mounts` gets the worker pool under a master, as the
    top-level one does (the default pool when nothing sizes it): answered by
    a pool process with SCRIPT_NAME under its mount, and neither the start
    nor -t warns; with workers: 0 (no pool) it runs in the single process."""
    app = psgi(ctx, "app")
    conf = "app: hello\nmounts:\n  - {path: /psgi, app: {psgi: %s}}\n" % app
    srv = ctx.start(None, workers=1, config=conf)
    env = env_of(request(srv.port, path="/psgi/env").body)
    check_eq(env.get("SCRIPT_NAME"), "/psgi", "the mount serves")
    pool = [p for p, state, cmd in lib.proc_children(srv.pid)
            if cmd.startswith("pagid: pool process ")]
    pid = int(request(srv.port, path="/psgi/pid").body.decode().split("=")[1])
    check(pid in pool, "answered by a pool process (%d in %s)" % (pid, pool))
    check("not in a worker pool" not in srv.stderr(), "no warning: %s" % srv.stderr()[-800:])
    path = lib.write_config(ctx, conf, "mount.yaml")
    p = subprocess.run([ctx.pagid, "-t", "-w", "2", "-c", path] + lib.root_user_args(),
                       capture_output=True, timeout=60 * SLOW)
    err = p.stderr.decode("utf-8", "replace")
    check_eq(p.returncode, 0, "-t: %s" % err[-400:])
    check("mount /psgi" not in err, "no warning about the mount from -t: %s" % err[-600:])
    single = ctx.start(None, workers=0, config=conf)
    check_eq(request(single.port, path="/psgi/env").status, 200, "served alone")


@test(timeout=60)
def preload_warning_for_a_psgi_app_says_open_lazily(ctx):
    """A file a PSGI app opened while the zygote loaded it is named in the
    zygote's warning, with a PSGI app's advice (no lifespan: open it lazily
    on first use, or --no-preload); with --no-preload there is no zygote and
    no warning."""
    app = psgi(ctx, "preload_opens")
    srv = ctx.start(app, workers=1)
    check_eq(request(srv.port).body, b"ok", "served")
    check(wait_for(lambda: "the app opened the file" in srv.stderr(), 5),
          "no warning:\n%s" % srv.stderr()[-1500:])
    line = [ln for ln in srv.stderr().splitlines() if "the app opened the file" in ln][0]
    check(re.search(r"the app opened the file .*preload_opens\.psgi \(fd \d+\) while it was "
                    r"loaded: .*; open it lazily on first use, in each process \(a PSGI app has "
                    r"no lifespan\), or use --no-preload \(docs/psgi\.md, Preloading\)$", line),
          "the warning: %s" % line)
    check("lifespan startup" not in line, "a PAGI app's advice: %s" % line)
    srv.stop()
    lazy = ctx.start(app, workers=1, args=["--no-preload"])
    check_eq(request(lazy.port).body, b"ok", "served without preload")
    check("the app opened" not in lazy.stderr(), "a warning without preload:\n%s"
          % lazy.stderr()[-1500:])
