"""The config loader's operator conveniences through the real binary: "did you
mean" in pagid -t, include: of conf.d files (errors at the included file's own
FILE:LINE:COLUMN, cycles), and a server whose config lives in conf.d picking up
an added file, a changed one and a broken one on SIGHUP."""

import os
import re
import signal
import subprocess

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
