"""The config loader's operator conveniences through the real binary: "did you
mean" in pagid -t, include: of conf.d files (errors at the included file's own
FILE:LINE:COLUMN, cycles), and a server whose config lives in conf.d picking up
an added file, a changed one and a broken one on SIGHUP."""

import os
import re
import signal
import subprocess
import tempfile
import time

import lib
from lib import SLOW, check, check_eq, free_port, request, test, wait_for

CRASH = re.compile(r"AddressSanitizer|runtime error:|Segmentation fault|LeakSanitizer")


def put(ctx, name, text):
    """Write ctx.tmpdir/name atomically (a reload never reads half a file)."""
    path = os.path.join(ctx.tmpdir, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.rename(path + ".tmp", path)
    return path


def check_config(ctx, path):
    """pagid -t -c path: (exit status, stderr)."""
    p = subprocess.run([ctx.pagid, "-t", "-c", path], stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ctx.tmpdir,
                       timeout=10 * SLOW)
    err = p.stderr.decode("utf-8", "replace")
    check(not CRASH.search(err), "crash report: %s" % err[-500:])
    check(p.returncode >= 0, "pagid -t died from signal %d" % -p.returncode)
    return p.returncode, err


@test()
def did_you_mean(ctx):
    path = put(ctx, "typos.yaml", "limts:\n"
                                  "  max_body_size: 1k\n"
                                  "timeouts: {idel: 5s}\n"
                                  "workrs: 2\n"
                                  "error_log: {level: wran}\n"
                                  "bogus: 1\n")
    rc, err = check_config(ctx, path)
    check_eq(rc, 1, "exit status of -t")
    for line in ("%s:1:1: unknown key 'limts' (did you mean 'limits'?)",
                 "%s:3:12: unknown key 'idel' in 'timeouts' (did you mean 'idle'?)",
                 "%s:4:1: unknown key 'workrs' (did you mean 'workers'?)",
                 "%s:5:20: invalid log level 'wran' (did you mean 'warn'?)",
                 "%s:6:1: unknown key 'bogus'"):
        check(re.search("^%s$" % re.escape(line % path), err, re.M),
              "no line %r in stderr:\n%s" % (line % path, err))


@test()
def include_checked_by_t(ctx):
    main = put(ctx, "etc/pagid.yaml", "workers: 2\napp: hello\ninclude: conf.d/*.yaml\n")
    put(ctx, "etc/conf.d/10-listen.yaml", "listen: ['127.0.0.1:%d']\n" % free_port())
    put(ctx, "etc/conf.d/20-limits.yaml", "limits:\n  max_body_size: 1m\n")
    rc, err = check_config(ctx, main)
    check_eq(rc, 0, "exit status of -t on a valid set (stderr %r)" % err)

    # Errors inside included files, each at its own file's position.
    bad = put(ctx, "etc/conf.d/30-bad.yaml", "\ntimeouts:\n  idle: forever\nworkers: 3\n")
    rc, err = check_config(ctx, main)
    check_eq(rc, 1, "exit status of -t with a broken include")
    want = ["%s:3:9: invalid duration 'forever' for 'timeouts.idle'" % bad,
            "%s:4:1: duplicate key 'workers' (first set at %s:1:1)" % (bad, main)]
    for w in want:
        check(w in err, "no %r in stderr:\n%s" % (w, err))
    os.unlink(bad)

    # A missing plain path, and a cycle through a glob that matches the main file.
    put(ctx, "etc/conf.d/40-more.yaml", "include: [../nope.yaml, ../*.yaml]\n")
    rc, err = check_config(ctx, main)
    check_eq(rc, 1, "exit status of -t with a cycle")
    more = os.path.join(ctx.tmpdir, "etc/conf.d/40-more.yaml")
    check(re.search(r"^%s:1:11: cannot include '.*nope\.yaml': No such file or directory$"
                    % re.escape(more), err, re.M), "no missing-file error:\n%s" % err)
    check(re.search(r"^%s:1:25: include cycle: %s -> %s -> .*pagid\.yaml$"
                    % (re.escape(more), re.escape(main), re.escape(more)), err, re.M),
          "no cycle error:\n%s" % err)


def workers_now(srv):
    return len(srv.workers())


def serves(port):
    """A 200 on port. A listener a reload just removed may reset connections
    queued on it when it closes: that is not serving either."""
    try:
        return request(port, "GET", "/").status == 200
    except (OSError, lib.Closed):
        return False


@test(timeout=60)
def include_reloaded_on_sighup(ctx):
    p1, p2 = free_port(), free_port()
    main = put(ctx, "etc/pagid.yaml", "app: hello\ninclude: conf.d/*.yaml\n")
    put(ctx, "etc/conf.d/10-listen.yaml", "listen: ['127.0.0.1:%d']\n" % p1)
    put(ctx, "etc/conf.d/20-workers.yaml", "workers: 2\n")
    srv = lib.Server(ctx, ["-c", main], p1, name="pagid0")
    ctx.servers.append(srv)
    srv.wait_ready()
    r = request(p1, "GET", "/")
    check_eq((r.status, r.body), (200, b"Hello from PAGI"), "served from the included listen")
    check(wait_for(lambda: workers_now(srv) == 2, 10), "workers: %r, expected 2 from conf.d"
          % srv.workers())
    check(not serves(p2), "port %d answers before it is configured" % p2)
    first = set(srv.workers())

    # A new file in conf.d and a changed one, then SIGHUP: both apply.
    put(ctx, "etc/conf.d/30-second-port.yaml", "listen: ['127.0.0.1:%d']\n" % p2)
    put(ctx, "etc/conf.d/20-workers.yaml", "workers: 3\n")
    os.kill(srv.pid, signal.SIGHUP)
    check(wait_for(lambda: serves(p2), 15), "the added listen was not picked up by SIGHUP")
    # Three workers, all of the new generation (the old ones drain and exit).
    check(wait_for(lambda: workers_now(srv) == 3 and not first & set(srv.workers()), 15),
          "workers %r after SIGHUP, expected 3 new ones" % srv.workers())
    check(serves(p1), "the first port stopped answering")
    serving = sorted(srv.workers())

    # A broken file: the reload fails with its FILE:LINE:COLUMN and nothing changes.
    bad = put(ctx, "etc/conf.d/40-bad.yaml", "workers: 4\n")
    os.kill(srv.pid, signal.SIGHUP)
    want = "%s:1:1: duplicate key 'workers' (first set at " % bad
    check(wait_for(lambda: want in srv.stderr(), 10), "no %r in the error log:\n%s"
          % (want, srv.stderr()[-1500:]))
    check(serves(p1) and serves(p2), "not serving after a failed reload")
    check_eq(sorted(srv.workers()), serving, "workers after a failed reload")

    # Removed again (and the second port's file too): the next SIGHUP applies it.
    os.unlink(bad)
    os.unlink(os.path.join(ctx.tmpdir, "etc/conf.d/30-second-port.yaml"))
    os.kill(srv.pid, signal.SIGHUP)
    check(wait_for(lambda: not serves(p2), 15), "port %d still answers after its file went"
          % p2)
    check(serves(p1), "the first port stopped answering")


def has_perl(ctx):
    out = subprocess.run([ctx.pagid, "-V"], stdout=subprocess.PIPE, timeout=10).stdout
    return b"perl" in out.split(b"features:", 1)[-1].split(b"\n", 1)[0]


def timed_check(ctx, path):
    """pagid -t -c path as the suite's servers run (workers keep root when
    the tests are root: nobody cannot read the 0700 temp dir): (exit
    status, stderr, seconds, CPU seconds). The CPU time is the process's
    own (user + system, from wait4), which a loaded machine inflates far
    less than the elapsed time."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as errf:
        t0 = time.monotonic()
        p = subprocess.Popen([ctx.pagid, "-t", "-c", path] + lib.root_user_args(),
                             stdin=subprocess.DEVNULL, stdout=out, stderr=errf, cwd=ctx.tmpdir)
        deadline = t0 + 30 * SLOW
        while True:
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                p.kill()
                p.wait()
                raise lib.TestFailure("pagid -t -c %s still running after %.0f s" % (path, 30 * SLOW))
            time.sleep(0.002)
        took = time.monotonic() - t0
        p.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        errf.seek(0)
        err = errf.read().decode("utf-8", "replace")
    check(not CRASH.search(err), "crash report: %s" % err[-500:])
    check(p.returncode >= 0, "pagid -t died from signal %d" % -p.returncode)
    return p.returncode, err, took, usage.ru_utime + usage.ru_stime


def alias_heavy_config(ctx, target, app):
    """About target bytes of mounts in groups of 50: the first of a group
    anchors its app (and lib list), the rest alias them, as generated
    configs do. app(i, g, libs) -> the mapping text of a group's first app."""
    lines = ["listen: ['127.0.0.1:%d']" % free_port(), "mounts:"]
    size, i = 0, 0
    while size < target:
        g = i // 50
        if i % 50 == 0:
            e = "  - path: /g%d/m%d\n    app: &app%d %s" % (g, i, g, app(g))
        elif i % 5 == 0:
            e = "  - path: /g%d/s%d\n    app: {static: %s, listing: true}" % (g, i, ctx.tmpdir)
        elif i % 2 == 0 or "&libs" not in app(g):
            e = "  - path: /g%d/m%d\n    app: *app%d" % (g, i, g)
        else:
            e = "  - path: /g%d/m%d\n    app: {perl: %s, lib: *libs%d}" % (
                g, i, os.path.join(ctx.tmpdir, "app.pl"), g)
        lines.append(e)
        size += len(e) + 1
        i += 1
    return "\n".join(lines) + "\n", i


def app_text(ctx, perl):
    if not perl:
        return lambda g: "{static: %s}" % ctx.tmpdir
    pl = put(ctx, "app.pl", "sub { }\n")
    return lambda g: "{perl: %s, lib: &libs%d [%s]}" % (
        pl, g, ", ".join("/srv/lib/g%d/d%d" % (g, k) for k in range(10)))


@test(timeout=60, serial=True)
def config_large_aliases_linear(ctx):
    """A 1 MB config of thousands of mounts whose apps and lib lists are
    anchors and aliases: pagid -t accepts it at once. The requirement is
    100 ms; it takes about 60 ms of CPU on the 2-core test machine. The
    bounds leave room for a shared, loaded machine: 0.5 s of CPU, 1 s in all
    (the run before the document store took 0.2 s of CPU; a quadratic
    loader, minutes)."""
    text, n = alias_heavy_config(ctx, 1000000, app_text(ctx, has_perl(ctx)))
    path = put(ctx, "big.yaml", text)
    rc, err, took, cpu = timed_check(ctx, path)
    check_eq(rc, 0, "exit status of -t on a %d-byte config (stderr %s)" % (len(text), err[-500:]))
    print("  pagid -t on %d bytes, %d mounts: %.3f s, %.3f s of CPU" % (len(text), n, took, cpu))
    check(cpu < 0.5 * SLOW, "pagid -t used %.2f s of CPU on a 1 MB config" % cpu)
    check(took < 1 * SLOW, "pagid -t took %.2f s on a 1 MB config" % took)


@test(timeout=60)
def config_alias_lib_lists(ctx):
    """The measured case: 23 KB whose perl apps share a 100-entry lib list
    through one alias took 78 s (the joined @INC string was rebuilt per
    entry). Each directory is added once now."""
    if not has_perl(ctx):
        raise lib.Skip("pagid built without the Perl host")
    put(ctx, "app.pl", "sub { }\n")
    libs = ", ".join("/srv/lib/dir%03d" % i for i in range(100))
    lines = ["listen: ['127.0.0.1:%d']" % free_port(), "mounts:",
             "  - path: /m0\n    app: {perl: app.pl, lib: &libs [%s]}" % libs]
    lines += ["  - path: /m%d\n    app: {perl: app.pl, lib: *libs}" % i for i in range(1, 400)]
    text = "\n".join(lines) + "\n"
    check(20000 < len(text) < 40000, "config of %d bytes" % len(text))
    path = put(ctx, "libs.yaml", text)
    rc, err, took, _ = timed_check(ctx, path)
    check_eq(rc, 0, "exit status of -t (stderr %s)" % err[-500:])
    print("  pagid -t on %d bytes, 400 x 100 aliased lib entries: %.3f s" % (len(text), took))
    check(took < 2 * SLOW, "pagid -t took %.2f s" % took)
    # The effective config lists each directory once.
    out = subprocess.run([ctx.pagid, "-T", "-c", path] + lib.root_user_args(), stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, cwd=ctx.tmpdir, timeout=10 * SLOW).stdout.decode()
    check_eq(out.count("/srv/lib/dir042"), 1, "times a lib directory is in -T's output")


@test(timeout=30)
def config_billion_laughs(ctx):
    """Nested aliases that would make the walk visit 10^10 nodes: refused at
    the alias that passes the bound, at once, without a walk (no unknown-key
    errors for the anchors' keys)."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 10):
        lines.append("a%d: &a%d [%s]" % (i, i, ", ".join(["*a%d" % (i - 1)] * 10)))
    path = put(ctx, "laughs.yaml", "\n".join(lines) + "\n")
    rc, err, took, _ = timed_check(ctx, path)
    check_eq(rc, 1, "exit status of -t")
    want = ("%s:6:45: aliases expand to more than 1000000 nodes (at '*a4'): refusing a config "
            "that repeats itself this much" % path)
    check(re.search("^%s$" % re.escape(want), err, re.M), "no %r in:\n%s" % (want, err))
    check("unknown key" not in err, "the document was walked:\n%s" % err[-500:])
    check(took < 5 * SLOW, "pagid -t took %.2f s" % took)
    # An alias of its own ancestor would make the walk endless.
    path = put(ctx, "loop.yaml", "mounts: &m [{path: /a, app: hello}, *m]\n")
    rc, err = check_config(ctx, path)
    check_eq(rc, 1, "exit status of -t")
    want = "%s:1:37: alias '*m' refers to a node that contains it" % path
    check(want in err, "no %r in:\n%s" % (want, err))


def overlap_line(path, at, second, first, first_at, why):
    return "%s:%s: %s overlaps %s at %s:%s: %s" % (path, at, second, first, path, first_at, why)


@test(timeout=30)
def listen_overlap_refused_by_t(ctx):
    """Entries are compared after resolution: status.listen localhost:P
    beside listen 127.0.0.1:P was bound twice (SO_REUSEPORT), and metrics
    were answered on the app's port. Refused at the later entry."""
    p = free_port()
    metrics = "the metrics would be answered on the app's address and app requests on the metrics'"
    split = "both would be bound and split its connections"
    cases = [
        ("listen: ['127.0.0.1:%d']\nstatus:\n  listen: localhost:%d\n" % (p, p),
         overlap_line("FILE", "3:11", "status.listen 'localhost:%d' (127.0.0.1:%d)" % (p, p),
                      "listen address '127.0.0.1:%d'" % p, "1:10", metrics)),
        ("status:\n  listen: 0.0.0.0:%d\nlisten: ['127.0.0.1:%d']\n" % (p, p),
         overlap_line("FILE", "2:11", "status.listen '0.0.0.0:%d'" % p,
                      "listen address '127.0.0.1:%d'" % p, "3:10", metrics)),
        ("listen: ['0.0.0.0:%d', '127.0.0.1:%d']\n" % (p, p),
         overlap_line("FILE", "1:%d" % (len("listen: ['0.0.0.0:%d', " % p) + 1),
                      "listen address '127.0.0.1:%d'" % p,
                      "listen address '0.0.0.0:%d'" % p, "1:10", split)),
        ("listen: ['127.0.0.1:%d', 'localhost:%d']\n" % (p, p),
         overlap_line("FILE", "1:%d" % (len("listen: ['127.0.0.1:%d', " % p) + 1),
                      "listen address 'localhost:%d' (127.0.0.1:%d)" % (p, p),
                      "listen address '127.0.0.1:%d'" % p, "1:10", split)),
        ("listen: ['unix:%s/s.sock', 'unix:%s/./s.sock']\n" % (ctx.tmpdir, ctx.tmpdir),
         overlap_line("FILE", "1:%d" % (len("listen: ['unix:%s/s.sock', " % ctx.tmpdir) + 1),
                      "listen address 'unix:%s/./s.sock' (%s/s.sock)" % (ctx.tmpdir, ctx.tmpdir),
                      "listen address 'unix:%s/s.sock'" % ctx.tmpdir, "1:10",
                      "one socket file cannot be two listeners")),
    ]
    for i, (text, want) in enumerate(cases):
        path = put(ctx, "overlap%d.yaml" % i, text)
        rc, err, _, _ = timed_check(ctx, path)
        check_eq(rc, 1, "exit status of -t for %r (stderr %s)" % (text, err))
        want = want.replace("FILE", path)
        check(re.search("^%s$" % re.escape(want), err, re.M), "no line\n%s\nin:\n%s" % (want, err))
    # Different ports, and IPv6 sockets (v6-only) beside IPv4 ones, do not overlap.
    path = put(ctx, "apart.yaml", "listen: ['127.0.0.1:%d', '127.0.0.1:%d', '[::]:%d']\n"
                                  "status:\n  listen: '127.0.0.2:%d'\n" % (p, free_port(), p, p))
    rc, err, _, _ = timed_check(ctx, path)
    check("overlaps" not in err, "a false overlap:\n%s" % err)


@test(timeout=60)
def listen_overlap_refused_at_start_and_reload(ctx):
    p, other = free_port(), free_port()
    path = put(ctx, "pagid.yaml", "app: hello\nlisten: ['127.0.0.1:%d']\nstatus:\n"
                                  "  listen: localhost:%d\n" % (p, p))
    srv = lib.Server(ctx, ["-c", path], p, name="start")
    ctx.servers.append(srv)
    check(srv.wait_exit(10), "pagid started with overlapping addresses")
    check_eq(srv.returncode, 1, "exit status")  # EXIT_CONFIG
    want = "%s:4:11: status.listen 'localhost:%d' (127.0.0.1:%d) overlaps" % (path, p, p)
    check(want in srv.stderr(), "no %r in:\n%s" % (want, srv.stderr()))

    # A reload that brings the overlap is refused; the old config serves on.
    put(ctx, "pagid.yaml", "app: hello\nlisten: ['127.0.0.1:%d']\nstatus:\n"
                           "  listen: 127.0.0.1:%d\n" % (p, other))
    srv = lib.Server(ctx, ["-c", path], p, name="reload")
    ctx.servers.append(srv)
    srv.wait_ready()
    check(wait_for(lambda: serves(p), 10), "not serving")
    put(ctx, "pagid.yaml", "app: hello\nlisten: ['127.0.0.1:%d']\nstatus:\n"
                           "  listen: localhost:%d\n" % (p, p))
    # Every worker up (one per CPU): one that is still being forked has no
    # worker title yet and would look like a new one after the reload.
    check(wait_for(lambda: len(srv.workers()) == (os.cpu_count() or 1), 10),
          "workers before the reload: %s" % srv.workers())
    workers = sorted(srv.workers())
    os.kill(srv.pid, signal.SIGHUP)
    check(wait_for(lambda: want in srv.stderr(), 10), "no %r in the error log:\n%s"
          % (want, srv.stderr()[-1500:]))
    check(serves(p), "not serving after the refused reload")
    check_eq(sorted(srv.workers()), workers, "workers after a refused reload")
    for _ in range(20):  # the app port never answers with metrics
        r = request(p, "GET", "/metrics")
        check_eq((r.status, r.body), (200, b"Hello from PAGI"), "the app's port")
