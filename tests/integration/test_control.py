"""Operator controls nginx users expect: process titles (master, workers with
their generation, draining, the old master of an upgrade) while the comm
name stays "pagid"; -V build information that matches how the binary was
built; -T printing the effective configuration as YAML that loads again;
-s reload|reopen|quit|stop|upgrade through the pid file."""

import os
import re
import signal
import subprocess
import time

import lib
from lib import (SLOW, Conn, TestFailure, check, check_eq, free_port, pid_alive, request, test,
                 wait_for)
from test_ops import opsapp, read_pid, stop_pid, write

CRASH = re.compile(r"AddressSanitizer|runtime error:|Segmentation fault|LeakSanitizer")


def run(ctx, *args, timeout=10):
    """pagid ARGS (with -u root when the suite runs as root and -s is not
    used, as lib.Server does: the temp dirs are root's only)."""
    extra = [] if "-s" in args else lib.root_user_args(args)
    p = subprocess.run([ctx.pagid] + list(args) + extra, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       cwd=ctx.tmpdir, timeout=timeout * SLOW)
    out = p.stdout.decode("utf-8", "replace")
    err = p.stderr.decode("utf-8", "replace")
    check(not CRASH.search(out + err), "crash report: %s" % (out + err)[-500:])
    check(p.returncode >= 0, "pagid %s died from signal %d" % (" ".join(args), -p.returncode))
    return p.returncode, out, err


def title(pid):
    """What ps shows as the command line: /proc/PID/cmdline, NULs as spaces."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            raw = f.read()
    except OSError:
        return ""
    return raw.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace")


def comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return ""


def titles(pids):
    return {p: title(p) for p in pids}


def start(ctx, text, port, env=None, name="pagid.yaml", log=None):
    """pagid -c FILE, waiting until every worker passed lifespan startup (as
    the error log says: stderr, or the file log)."""
    path = os.path.join(ctx.tmpdir, name)
    write(path, text)
    srv = lib.Server(ctx, ["-c", path], port, env=env, name="pagid%d" % len(ctx.servers))
    ctx.servers.append(srv)
    srv.wait_ready()

    def said_ready():
        if log is None:
            return "all workers ready" in srv.stderr()
        return os.path.exists(log) and "all workers ready" in open(log).read()

    check(wait_for(said_ready, 10), "workers never became ready")
    return srv, path


def config(ctx, port, workers=2, app="echo", extra=""):
    return ("listen: [127.0.0.1:%d]\nworkers: %d\napp: %s\npid_file: %s\n"
            "timeouts: {shutdown: 20s, lifespan_startup: 5s}\n%s"
            % (port, workers, app, os.path.join(ctx.tmpdir, "pagid.pid"), extra))


def open_sse(port, count=300, interval_ms=100):
    """A long SSE stream from the echo app: keeps one worker busy draining."""
    c = Conn(port, timeout=10)
    c.send("GET /?count=%d&interval=%d HTTP/1.1\r\nHost: t\r\nAccept: text/event-stream\r\n\r\n"
           % (count, interval_ms))
    r = c.read_head()
    check_eq(r.status, 200, "SSE status")
    c.read_until(b"data: 1")
    return c


def gen_titles(srv, gen):
    return [p for p, t in titles(srv.workers()).items()
            if re.fullmatch(r"pagid: worker \d+ \(generation %d\)" % gen, t)]


# ---------------------------------------------------------------------------
# Process titles
# ---------------------------------------------------------------------------


@test(timeout=60)
def titles_master_workers_reload_and_drain(ctx):
    port = free_port()
    srv, path = start(ctx, config(ctx, port), port)
    check_eq(title(srv.pid), "pagid: master process " + " ".join(srv.argv), "master title")
    kids = wait_for(lambda: len(gen_titles(srv, 1)) == 2 and srv.workers(), 5)
    check(kids, "worker titles: %r" % titles(srv.workers()))
    check_eq(sorted(t for t in titles(kids).values()),
             ["pagid: worker 1 (generation 1)", "pagid: worker 2 (generation 1)"],
             "worker titles")
    # pkill -x pagid, pidof pagid and logrotate match the comm name: unchanged.
    for pid in [srv.pid] + kids:
        check_eq(comm(pid), "pagid", "comm of %d" % pid)

    # A stream holds one generation-1 worker in its drain across a reload.
    sse = open_sse(port)
    os.kill(srv.pid, signal.SIGHUP)
    check(wait_for(lambda: "generation 2 ready" in srv.stderr(), 10), "reload not ready")
    check(wait_for(lambda: len(gen_titles(srv, 2)) == 2, 5),
          "generation 2 titles: %r" % titles(srv.workers()))
    draining = wait_for(lambda: [p for p, t in titles(srv.workers()).items()
                                 if re.fullmatch(r"pagid: worker \d \(generation 1, draining\)", t)],
                        5)
    check(len(draining or []) == 1,
          "expected one draining generation-1 worker: %r" % titles(srv.workers()))
    check(wait_for(lambda: len(srv.workers()) == 3, 5),
          "the idle old worker did not exit: %r" % titles(srv.workers()))
    sse.read_until(b"data: ")  # still streaming from the draining worker
    sse.close()
    check(wait_for(lambda: not pid_alive(draining[0]), 10), "draining worker did not exit")

    # The master's own drain: SIGTERM while a stream is open.
    sse = open_sse(port)
    srv.signal(signal.SIGTERM)
    check(wait_for(lambda: title(srv.pid).startswith("pagid: master process (draining) "), 5),
          "master title while draining: %r" % title(srv.pid))
    check(wait_for(lambda: any(t.endswith(", draining)") for t in titles(srv.workers()).values()),
                   5), "no worker titled draining: %r" % titles(srv.workers()))
    sse.close()
    check(srv.wait_exit(15), "master did not exit after the drain")
    check_eq(srv.returncode, 0, "exit status")


@test(timeout=90, serial=True)
def titles_during_upgrade(ctx):
    port = free_port()
    env = {"OPSAPP_SLOW_START": "1500"}
    srv, path = start(ctx, config(ctx, port, app=opsapp(ctx)), port, env=env)
    pidfile = os.path.join(ctx.tmpdir, "pagid.pid")
    new = 0
    try:
        p = subprocess.Popen([ctx.pagid, "-s", "upgrade", "-c", path], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, cwd=ctx.tmpdir)
        check(wait_for(lambda: title(srv.pid).startswith("pagid: master process (old, upgrading) "),
                       5), "old master's title: %r" % title(srv.pid))
        # The master's children, not srv.workers(): that leaves out master-titled ones.
        masters = wait_for(lambda: [k for k in lib.children_of(srv.pid) if "master" in title(k)],
                           5)
        check(masters, "no new master under the old one: %r" % titles(lib.children_of(srv.pid)))
        new = masters[0]
        check(title(new).startswith("pagid: master process (new, starting) "),
              "new master's title while starting: %r" % title(new))
        check_eq(comm(new), "pagid", "new master's comm")
        out, err = p.communicate(timeout=40 * SLOW)
        check_eq(p.returncode, 0, "pagid -s upgrade status (stderr %r)" % err)
        check_eq(read_pid(pidfile), new, "pid file after the upgrade")
        check_eq(title(new), "pagid: master process " + " ".join(srv.argv),
                 "new master's title once serving")
        t = title(srv.pid)  # draining: gone soon, as it has no connections
        check(t == "" or t.startswith("pagid: master process (old, draining) "),
              "old master's title after the handover: %r" % t)
        check(srv.wait_exit(15), "old master still running")
        check_eq(srv.returncode, 0, "old master's exit status")
        check_eq(request(port).status, 200, "status after the upgrade")
    finally:
        if new:
            check(stop_pid(new), "new master did not stop")


# ---------------------------------------------------------------------------
# -V
# ---------------------------------------------------------------------------


@test()
def build_info_matches_the_binary(ctx):
    rc, out, err = run(ctx, "-V")
    check_eq(rc, 0, "exit status")
    lines = out.splitlines()
    check(lines and re.fullmatch(r"pagid \d+\.\d+\.\d+", lines[0]), "first line: %r" % out)
    rc, version, _ = run(ctx, "--version")
    check_eq(lines[0], version.strip(), "-V's first line vs --version")
    feat = [ln for ln in lines if ln.startswith("features:")]
    check(len(feat) == 1, "no features line:\n%s" % out)
    features = feat[0].split()[1:]

    # perl iff this binary accepts a Perl app.
    app = os.path.join(ctx.tmpdir, "app.pl")
    with open(app, "w") as f:
        f.write("sub { }\n")
    rc, _, err = run(ctx, "-t", "-a", app)
    check_eq("perl" in features, rc == 0,
             "'perl' in features (%r) vs -t -a app.pl (exit %d, %s)" % (features, rc, err.strip()))
    # sanitizers iff ASan is linked in.
    with open(ctx.pagid, "rb") as f:
        asan = b"__asan_init" in f.read()
    check_eq("sanitizers" in features, asan, "'sanitizers' in features %r" % features)
    for always in ("systemd", "permessage-deflate"):  # configure requires them
        check(always in features, "%s not in features %r" % (always, features))
    check(any(re.match(r"libraries: libev \d+\.\d+, libyaml \S+, zlib \S+", ln) for ln in lines),
          "no libraries line:\n%s" % out)

    # The configure arguments are those config.status recorded for this build.
    args = [ln for ln in lines if ln.startswith("configure arguments:")]
    check(len(args) == 1, "no configure arguments line:\n%s" % out)
    status = os.path.join(os.path.dirname(ctx.pagid), "config.status")
    if os.path.exists(status):
        p = subprocess.run([status, "--config"], stdout=subprocess.PIPE, cwd=ctx.tmpdir)
        recorded = p.stdout.decode().replace("'", "").split()
        shown = args[0][len("configure arguments:"):].replace("'", "").split()
        check_eq(shown, recorded, "configure arguments")


# ---------------------------------------------------------------------------
# -T
# ---------------------------------------------------------------------------

FULL = """\
listen:
  - 127.0.0.1:{port}
  - {{address: unix:{sock}, mode: 0640}}
workers: 3
max_requests: 500
app: {{static: {dir}, listing: yes}}
mounts:
  - {{path: /e/, app: echo}}
limits: {{max_connections: 77, max_body_size: 2m, max_header_size: 3000}}
timeouts: {{header: 1500ms, idle: 2m, shutdown: 0.25, ws_idle: 0}}
flow_control: {{high_watermark: 256k, low_watermark: 32k}}
access_log: {{path: "{dir}/access log", format: '%h "%r" %>s #%X'}}
error_log: {{level: warn}}
status: {{listen: 127.0.0.1:{sport}, path: /m}}
pid_file: {dir}/pagid.pid
user: nobody
"""


@test()
def dump_config_round_trip(ctx):
    port, sport = free_port(), free_port()
    src = lib.write_config(ctx, FULL.format(port=port, sport=sport, dir=ctx.tmpdir,
                                            sock=os.path.join(ctx.tmpdir, "s.sock")), "full.yaml")
    rc, out, err = run(ctx, "-T", "-c", src)
    check_eq(rc, 0, "pagid -T status (stderr %r)" % err)
    check(out.startswith("# pagid "), "no header comment:\n%s" % out)
    for want in ("- 127.0.0.1:%d\n" % port, "  mode: '0640'\n", "workers: 3\n",
                 "max_requests: 500\n", "  listing: true\n", "- path: /e\n", "  app: echo\n",
                 "  max_connections: 77\n", "  max_body_size: 2m\n", "  header: 1500ms\n",
                 "  idle: 2m\n", "  shutdown: 250ms\n", "  high_watermark: 256k\n",
                 "  level: warn\n", "  listen: 127.0.0.1:%d\n" % sport,
                 # the file says nobody; as root run() adds -u root, which replaces it
                 "user: root\n" if lib.root_user_args() else "user: nobody\n",
                 "group: ~\n", "  keepalive: 75s\n"):
        check(want in out, "-T output lacks %r:\n%s" % (want, out))
    dumped = lib.write_config(ctx, out, "dumped.yaml")
    rc, out2, err = run(ctx, "-t", "-c", dumped)
    check_eq(rc, 0, "pagid -t on the dump (stderr %r)" % err)
    rc, out3, err = run(ctx, "-T", "-c", dumped)
    check_eq(rc, 0, "pagid -T on the dump")
    body = lambda text: text.split("\n", 1)[1]  # noqa: E731 - the header names the file
    check_eq(body(out3), body(out), "the dump of the dump")


@test()
def dump_config_overrides_and_errors(ctx):
    port = free_port()
    src = lib.write_config(ctx, "listen: 127.0.0.1:%d\nworkers: 2\napp: hello\n" % port)
    rc, out, err = run(ctx, "-T", "-c", src, "-l", "unix:/tmp/pagid-T-%d.sock" % port, "-w", "5",
                       "-a", "echo")
    check_eq(rc, 0, "status")
    check("listen:\n- unix:/tmp/pagid-T-%d.sock\nworkers: 5\n" % port in out, "overrides:\n%s" % out)
    check("app: echo\n" in out and "127.0.0.1:%d" % port not in out, "overrides:\n%s" % out)
    # Without any file: the built-in defaults, as a config.
    rc, out, err = run(ctx, "-T", "-w", "1")
    check_eq(rc, 0, "status without -c")
    check("- 127.0.0.1:8080\n" in out and "app: demo\n" in out, "defaults:\n%s" % out)
    # Invalid: the usual errors, exit 1, nothing printed as a config.
    bad = lib.write_config(ctx, "workers: many\ntimeouts: {idle: 3 weeks}\n", "bad.yaml")
    rc, out, err = run(ctx, "-T", "-c", bad)
    check_eq(rc, 1, "status on an invalid config")
    check_eq(out, "", "stdout on an invalid config")
    for line in (1, 2):
        check(re.search(r"^%s:%d:\d+: \S" % (re.escape(bad), line), err, re.M),
              "no error for line %d:\n%s" % (line, err))


# ---------------------------------------------------------------------------
# -s
# ---------------------------------------------------------------------------


@test(timeout=60)
def signal_reload_changes_workers(ctx):
    port = free_port()
    srv, path = start(ctx, config(ctx, port), port)
    check(wait_for(lambda: len(gen_titles(srv, 1)) == 2, 5), "two workers first")
    write(path, config(ctx, port, workers=3))
    rc, out, err = run(ctx, "-s", "reload", "-c", path)
    check_eq(rc, 0, "pagid -s reload status (stderr %r)" % err)
    check_eq(out + err, "", "output of -s reload")
    check(wait_for(lambda: len(gen_titles(srv, 2)) == 3 and len(srv.workers()) == 3, 10),
          "not 3 generation-2 workers: %r" % titles(srv.workers()))
    # An invalid config is refused before anything is sent.
    write(path, config(ctx, port, workers=3) + "bogus: 1\n")
    rc, out, err = run(ctx, "-s", "reload", "-c", path)
    check_eq(rc, 1, "status for an invalid config")
    check(re.search(r"%s:\d+:1: unknown key 'bogus'" % re.escape(path), err), err)
    check("not sending reload" in err, err)
    time.sleep(0.3 * SLOW)
    check("generation 3" not in srv.stderr(), "a reload happened anyway")
    # Valid YAML whose certificate the master cannot load is refused the same way.
    tls = ("listen:\n  - 127.0.0.1:%d\n  - address: 127.0.0.1:%d\n"
           "    tls: {cert: %s/none.pem, key: %s/none.key}\n"
           % (port, free_port(), ctx.tmpdir, ctx.tmpdir))
    write(path, config(ctx, port, workers=3).replace("listen: [127.0.0.1:%d]\n" % port, tls, 1))
    rc, out, err = run(ctx, "-s", "reload", "-c", path)
    check_eq(rc, 1, "status for a certificate the master cannot load (stderr %r)" % err)
    check("none.pem" in err and "not sending reload" in err, err)
    time.sleep(0.3 * SLOW)
    check("generation 3" not in srv.stderr(), "a reload happened anyway")


@test(timeout=30)
def signal_reopen_reopens_logs(ctx):
    port = free_port()
    log = os.path.join(ctx.tmpdir, "error.log")
    srv, path = start(ctx, config(ctx, port, extra="error_log: {path: %s}\n" % log), port,
                      log=log)
    os.rename(log, log + ".1")
    rc, out, err = run(ctx, "-s", "reopen", "-c", path)
    check_eq(rc, 0, "pagid -s reopen status (stderr %r)" % err)
    check(wait_for(lambda: os.path.exists(log) and "reopened" in open(log).read(), 5),
          "no new error log with the reopen line")


@test(timeout=40)
def signal_quit_drains_stop_does_not(ctx):
    port = free_port()
    srv, path = start(ctx, config(ctx, port), port)
    pidfile = os.path.join(ctx.tmpdir, "pagid.pid")
    # quit: graceful. A 10-event stream (1 s) still completes.
    sse = open_sse(port, count=10, interval_ms=100)
    rc, out, err = run(ctx, "-s", "quit", "-c", path)
    check_eq(rc, 0, "pagid -s quit status (stderr %r)" % err)
    rest = sse.read_to_eof()
    check(b"data: 10" in rest, "the stream was cut by quit: %r" % rest[-200:])
    check(srv.wait_exit(15), "master did not exit after quit")
    check_eq(srv.returncode, 0, "exit status after quit")
    check(not os.path.exists(pidfile), "pid file left after quit")

    # stop: fast. A long stream does not hold it up.
    port = free_port()
    srv, path = start(ctx, config(ctx, port), port, name="two.yaml")
    sse = open_sse(port, count=600, interval_ms=100)
    t0 = time.monotonic()
    rc, out, err = run(ctx, "-s", "stop", "-c", path)
    check_eq(rc, 0, "pagid -s stop status (stderr %r)" % err)
    check(srv.wait_exit(5), "master still running 5 s after stop")
    check(time.monotonic() - t0 < 4 * SLOW, "stop took %.1fs" % (time.monotonic() - t0))
    check_eq(srv.returncode, 0, "exit status after stop")
    sse.close()


@test(timeout=90)
def signal_upgrade_hands_over(ctx):
    port = free_port()
    srv, path = start(ctx, config(ctx, port, app=opsapp(ctx)), port)
    pidfile = os.path.join(ctx.tmpdir, "pagid.pid")
    new = 0
    try:
        rc, out, err = run(ctx, "-s", "upgrade", "-c", path, timeout=45)
        new = read_pid(pidfile)
        check_eq(rc, 0, "pagid -s upgrade status (stderr %r)" % err)
        check(new and new != srv.pid and pid_alive(new), "pid file holds %r" % new)
        check_eq(out, "pagid: upgraded: the new master (pid %d) serves; the old one (pid %d) "
                      "drains and exits\n" % (new, srv.pid), "stdout")
        # When -s upgrade returns, the new master serves: its workers answer.
        r = request(port)
        check_eq(r.status, 200, "status right after -s upgrade")
        check(not os.path.exists(pidfile + ".oldbin"), ".oldbin still there after the handover")
        check(srv.wait_exit(15), "old master still running")
        check_eq(srv.returncode, 0, "old master's exit status")
        check_eq(read_pid(pidfile), new, "pid file after the old master exited")
        served_by = {request(port).body.split()[1] for _ in range(6)}
        kids = {str(k).encode() for k in lib.children_of(new)}
        check(served_by <= kids, "served by %r, not the new master's workers %r"
              % (served_by, kids))
    finally:
        if new and new != srv.pid:
            check(stop_pid(new), "new master did not stop")


@test(timeout=90)
def signal_upgrade_failure_reported(ctx):
    port = free_port()
    flag = os.path.join(ctx.tmpdir, "fail-startup")
    srv, path = start(ctx, config(ctx, port, app=opsapp(ctx)), port,
                      env={"OPSAPP_FAIL_IF": flag})
    pidfile = os.path.join(ctx.tmpdir, "pagid.pid")
    before = sorted(srv.workers())
    open(flag, "w").close()  # the new master's workers fail lifespan startup
    rc, out, err = run(ctx, "-s", "upgrade", "-c", path, timeout=45)
    check_eq(rc, 7, "pagid -s upgrade status when the new master fails (EXIT_SIGNAL)")
    check("pagid: upgrade failed: the new master did not take over; the old master (pid %d) "
          "keeps serving" % srv.pid in err, "stderr: %r" % err)
    check_eq(read_pid(pidfile), srv.pid, "pid file after the failed upgrade")
    check(not os.path.exists(pidfile + ".oldbin"), ".oldbin left behind")
    check_eq(sorted(srv.workers()), before, "workers after the failed upgrade")
    check_eq(request(port).status, 200, "still serving")
    check(title(srv.pid).startswith("pagid: master process /"),
          "old master's title after the failed upgrade: %r" % title(srv.pid))


@test(timeout=30)
def signal_errors(ctx):
    pidfile = os.path.join(ctx.tmpdir, "pagid.pid")
    path = lib.write_config(ctx, "pid_file: %s\n" % pidfile)
    rc, out, err = run(ctx, "-s", "reload", "-c", path)
    check_eq(rc, 6, "no pid file (EXIT_NOT_RUNNING)")
    check_eq(err, "pagid: %s does not exist: is pagid running?\n" % pidfile, "stderr")
    # A stale pid: a process that has exited.
    p = subprocess.Popen(["true"])
    p.wait()
    write(pidfile, "%d\n" % p.pid)
    rc, out, err = run(ctx, "-s", "stop", "-c", path)
    check_eq(rc, 6, "stale pid (EXIT_NOT_RUNNING)")
    check("not running (stale pid file)" in err, err)
    # A live process that is not pagid is left alone.
    p = subprocess.Popen(["sleep", "30"])
    try:
        write(pidfile, "%d\n" % p.pid)
        rc, out, err = run(ctx, "-s", "stop", "-c", path)
        check_eq(rc, 6, "a pid that is not pagid")
        check("which is 'sleep', not pagid" in err, err)
        check(p.poll() is None, "sleep was signalled")
    finally:
        p.kill()
        p.wait()
    for junk, code in (("1\n", 7), ("0\n", 7), ("x\n", 7)):
        write(pidfile, junk)
        rc, out, err = run(ctx, "-s", "reload", "-c", path)
        check_eq(rc, code, "pid file %r" % junk)
    # No pid_file to go by.
    rc, out, err = run(ctx, "-s", "reload")
    check_eq(rc, 1, "no -c")
    check("pid file" in err, err)
    rc, out, err = run(ctx, "-s", "restart", "-c", path)
    check_eq(rc, 2, "unknown signal (EXIT_USAGE)")
    check("unknown signal 'restart'" in err, err)
