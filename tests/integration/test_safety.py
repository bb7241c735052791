"""Operator safety of the master: workers never outlive a killed master (also
after switching user), who the workers run as when started as root (nobody
unless `user` says otherwise, root only when asked), a second instance on
the same address refused (TCP and unix) while the first keeps serving, the
pid file never written through a symlink, a kill the master is not allowed
to make said loudly, and pagid -t catching what would fail at startup."""

import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import lib
from lib import (SLOW, Skip, check, check_eq, free_port, pid_alive, request, test, wait_for,
                 write_config)


def need_root():
    if os.geteuid() != 0:
        raise Skip("needs root")


def uid_of(pid):
    with open("/proc/%d/status" % pid) as f:
        return int([ln.split()[1] for ln in f if ln.startswith("Uid:")][0])


def wait_workers(srv, n, timeout=10):
    kids = wait_for(lambda: len(srv.workers()) == n and srv.workers(), timeout)
    check(kids, "expected %d workers, found %r" % (n, srv.workers()))
    return kids


def check_cmd(ctx, *args):
    """pagid ARGS (typically -t ...): (exit status, stdout, stderr)."""
    p = subprocess.run([ctx.pagid] + list(args), stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, cwd=ctx.tmpdir, timeout=20 * SLOW)
    check(p.returncode >= 0, "pagid died from signal %d" % -p.returncode)
    return p.returncode, p.stdout, p.stderr


# ---------------------------------------------------------------------------
# Workers die with their master
# ---------------------------------------------------------------------------


def workers_die_with_master(ctx, config, default_user=True):
    port = free_port()
    srv = ctx.start(None, workers=3, listen=False, port=port, default_user=default_user,
                    config="listen: [127.0.0.1:%d]\napp: hello\n%s" % (port, config))
    check(wait_for(lambda: "all workers ready" in srv.stderr(), 10), "workers never ready")
    workers = wait_workers(srv, 3)
    check_eq(request(port).status, 200, "status")
    os.kill(srv.pid, signal.SIGKILL)
    check(srv.wait_exit(5), "master survived SIGKILL")
    gone = wait_for(lambda: not any(pid_alive(w) for w in workers), 5)
    left = [w for w in workers if pid_alive(w)]
    for w in left:  # do not leave them behind for the next test
        os.kill(w, signal.SIGKILL)
    check(gone, "workers %r still running 5s after kill -9 of their master" % left)
    return workers


@test(timeout=30)
def workers_die_with_killed_master(ctx):
    workers_die_with_master(ctx, "")


@test(timeout=30)
def workers_as_nobody_die_with_killed_master(ctx):
    # The kernel clears the parent-death signal when a process changes its
    # credentials: set before setuid() it was lost, and workers ran on.
    need_root()
    port = free_port()
    srv = ctx.start(None, workers=2, listen=False, port=port, default_user=False,
                    config="listen: [127.0.0.1:%d]\napp: hello\nuser: nobody\n" % port)
    check(wait_for(lambda: "all workers ready" in srv.stderr(), 10), "workers never ready")
    workers = wait_workers(srv, 2)
    nobody = pwd.getpwnam("nobody").pw_uid
    for w in workers:
        check_eq(uid_of(w), nobody, "worker %d uid" % w)
    os.kill(srv.pid, signal.SIGKILL)
    check(srv.wait_exit(5), "master survived SIGKILL")
    gone = wait_for(lambda: not any(pid_alive(w) for w in workers), 5)
    left = [w for w in workers if pid_alive(w)]
    for w in left:
        os.kill(w, signal.SIGKILL)
    check(gone, "workers %r (as nobody) still running 5s after kill -9 of their master" % left)


# ---------------------------------------------------------------------------
# Who the workers run as
# ---------------------------------------------------------------------------


@test(timeout=30)
def root_without_user_runs_workers_as_nobody(ctx):
    need_root()
    port = free_port()
    srv = ctx.start("hello", workers=2, port=port, default_user=False)
    workers = wait_workers(srv, 2)
    nobody = pwd.getpwnam("nobody").pw_uid
    for w in workers:
        # A worker is a child before it switches user: wait for the switch.
        check(wait_for(lambda: uid_of(w) == nobody, 5), "worker %d uid %r" % (w, uid_of(w)))
    check_eq(uid_of(srv.pid), 0, "master uid")
    check(re.search(r"info: no 'user' is set: workers run as nobody:\S+", srv.stderr()),
          "no info line about the fallback: %r" % srv.stderr()[-600:])
    check_eq(request(port).status, 200, "status")
    # The single process (-w 0) runs the app too: the same rule.
    port2 = free_port()
    single = ctx.start("hello", workers=0, port=port2, default_user=False)
    check_eq(uid_of(single.pid), nobody, "single process uid")
    check_eq(request(port2).status, 200, "status (-w 0)")


@test(timeout=30)
def explicit_root_kept_with_warning(ctx):
    need_root()
    port = free_port()
    srv = ctx.start(None, workers=1, listen=False, port=port, default_user=False,
                    config="listen: [127.0.0.1:%d]\napp: hello\nuser: root\n" % port)
    workers = wait_workers(srv, 1)
    check_eq(uid_of(workers[0]), 0, "worker uid with user: root")
    check(re.search(r"warn: workers run as root \('user: root'\)", srv.stderr()),
          "no warning at startup: %r" % srv.stderr()[-600:])
    path = os.path.join(ctx.tmpdir, "pagid-0.yaml")
    rc, out, err = check_cmd(ctx, "-t", "-c", path)
    check_eq(rc, 0, "-t exit status (a warning is not an error); stderr %r" % err)
    check("%s:3:7: warning: workers run as root" % path in err, "-t warning: %r" % err)
    rc, out, err = check_cmd(ctx, "-t", "-u", "root")
    check_eq(rc, 0, "-t -u root exit status")
    check("pagid: warning: workers run as root" in err, "-t -u root warning: %r" % err)


@test(timeout=20)
def check_says_who_workers_run_as(ctx):
    rc, out, err = check_cmd(ctx, "-t", "-a", "hello")
    check_eq(rc, 0, "exit status (stderr %r)" % err)
    if os.geteuid() == 0:
        check(re.search(r"^pagid: no 'user' is set: workers run as nobody:\S+", out, re.M),
              "-t as root does not say the workers fall back to nobody: %r" % out)
    else:
        check("nobody" not in out + err, "-t not as root speaks of nobody: %r" % (out + err))


@test(timeout=20)
def group_without_user_is_an_error(ctx):
    path = write_config(ctx, "app: hello\ngroup: daemon\n", "g.yaml")
    rc, out, err = check_cmd(ctx, "-t", "-c", path)
    check_eq(rc, 1, "-t exit status")
    check("%s:2:8: 'group' needs 'user'" % path in err, "stderr: %r" % err)
    # and pagid does not start with it
    rc, out, err = check_cmd(ctx, "-c", path, "-l", "127.0.0.1:%d" % free_port())
    check_eq(rc, 1, "exit status when started")
    # -u names both: fine
    rc, out, err = check_cmd(ctx, "-t", "-c", path, "-u", "nobody:daemon")
    check_eq(rc, 0, "-t -u nobody:daemon (stderr %r)" % err)


@test(timeout=20)
def check_reports_unknown_user_and_group(ctx):
    path = write_config(ctx, "app: hello\nuser:  no-such-user-pagid\n", "u.yaml")
    rc, out, err = check_cmd(ctx, "-t", "-c", path)
    check_eq(rc, 1, "-t exit status")
    check("%s:2:8: unknown user 'no-such-user-pagid'" % path in err, "stderr: %r" % err)
    path = write_config(ctx, "app: hello\nuser: nobody\ngroup: no-such-group-pagid\n", "g.yaml")
    rc, out, err = check_cmd(ctx, "-t", "-c", path)
    check_eq(rc, 1, "-t exit status")
    check("%s:3:8: unknown group 'no-such-group-pagid'" % path in err, "stderr: %r" % err)
    rc, out, err = check_cmd(ctx, "-t", "-u", "no-such-user-pagid")
    check_eq(rc, 1, "-t -u exit status")
    check("pagid: unknown user 'no-such-user-pagid'" in err, "stderr: %r" % err)


# ---------------------------------------------------------------------------
# Workers the master cannot signal
# ---------------------------------------------------------------------------


@test(timeout=60)
def kill_refused_is_said_loudly(ctx):
    # A master without CAP_KILL (a unit's CapabilityBoundingSet= without it)
    # cannot signal workers that switched to another user: the heartbeat's
    # SIGKILL and the stop's SIGTERM fail with EPERM, and the log must say
    # why instead of waiting in silence.
    need_root()
    setpriv = shutil.which("setpriv")
    if not setpriv:
        raise Skip("setpriv not installed (util-linux)")
    port = free_port()
    conf = write_config(ctx, "listen: [127.0.0.1:%d]\napp: hello\nworkers: 1\nuser: nobody\n"
                             "timeouts: {heartbeat: 1s, shutdown: 1s}\n" % port, "nokill.yaml")
    log = os.path.join(ctx.tmpdir, "nokill.stderr")
    out = open(log, "wb")
    p = subprocess.Popen([setpriv, "--bounding-set=-kill", "--", ctx.pagid, "-c", conf],
                         stdin=subprocess.DEVNULL, stdout=out, stderr=out, cwd=ctx.tmpdir)
    text = lambda: open(log, errors="replace").read()  # noqa: E731
    workers = []
    try:
        check(wait_for(lambda: "all workers ready" in text(), 10), "not ready: %r" % text())
        workers = lib.children_of(p.pid)
        check_eq(len(workers), 1, "workers")
        os.kill(workers[0], signal.SIGSTOP)  # a stuck loop; the test itself may signal it
        want = ("cannot send SIGKILL to worker 1 (pid %d): Operation not permitted: the master "
                "lacks CAP_KILL" % workers[0])
        check(wait_for(lambda: want in text(), 10), "no loud EPERM line: %r" % text()[-800:])
        time.sleep(1.0)
        check_eq(text().count("Operation not permitted"), 1, "EPERM lines (once per worker)")
        p.send_signal(signal.SIGTERM)
        # SIGTERM refused too; SIGKILL at shutdown + 5s, refused; 5s later given up
        rc = p.wait(30 * SLOW)
        check_eq(rc, 0, "exit status")
        check("generation 1: 1 worker(s) could not be killed (EPERM: the master lacks CAP_KILL)"
              in text(), "no final word on the unkillable worker: %r" % text()[-800:])
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        for w in workers:
            if pid_alive(w):
                os.kill(w, signal.SIGKILL)
        out.close()


# ---------------------------------------------------------------------------
# pagid -t catches what would fail at startup
# ---------------------------------------------------------------------------


def not_local_address():
    """An IPv4 address this host cannot bind (documentation ranges), or skip."""
    for addr in ("203.0.113.77", "198.51.100.77", "192.0.2.250"):
        s = socket.socket()
        try:
            s.bind((addr, 0))
        except OSError:
            return addr
        finally:
            s.close()
    raise Skip("every documentation address is bindable here (ip_nonlocal_bind?)")


def snapshot(d):
    """Every name under d, for "nothing was created"."""
    out = set()
    for root, dirs, files in os.walk(d):
        for n in dirs + files:
            out.add(os.path.join(root, n))
    return out


@test(timeout=30)
def check_reports_what_would_fail_to_start(ctx):
    bad = not_local_address()
    d = ctx.tmpdir
    text = ("listen:\n"
            "  - 127.0.0.1:%d\n"
            "  - no-such-host.invalid:8080\n"
            "  - %s:8080\n"
            "  - unix:%s/no/such/dir/p.sock\n"
            "app: hello\n"
            "error_log: {path: %s/missing-dir/error.log}\n"
            "access_log: {path: %s/also-missing/access.log}\n"
            "pid_file: %s/none/pagid.pid\n" % (free_port(), bad, d, d, d, d))
    path = write_config(ctx, text, "bad.yaml")
    before = snapshot(d)
    rc, out, err = check_cmd(ctx, "-t", "-c", path, *lib.root_user_args())
    check_eq(rc, 1, "-t exit status; stderr %r" % err)
    for want in ("%s:3:5: cannot resolve listen address 'no-such-host.invalid:8080': " % path,
                 "%s:4:5: listen address '%s:8080': %s is not an address of this host"
                 % (path, bad, bad),
                 "%s:5:5: listen address 'unix:%s/no/such/dir/p.sock': directory %s/no/such/dir: "
                 "No such file or directory" % (path, d, d),
                 # The master opens the logs (and hands them to the workers):
                 # checked as whoever runs pagid -t.
                 "%s:7:19: error_log.path %s/missing-dir/error.log: cannot open for append as "
                 "user root: directory %s/missing-dir: No such file or directory" % (path, d, d),
                 "%s:8:20: access_log.path %s/also-missing/access.log: cannot open for append "
                 "as user root: directory %s/also-missing: No such file or directory"
                 % (path, d, d),
                 "%s:9:11: pid_file %s/none/pagid.pid: directory %s/none: No such file or "
                 "directory" % (path, d, d)):
        check(want in err, "missing %r in:\n%s" % (want, err))
    check("is invalid (6 errors)" in err, "error count: %r" % err)
    check_eq(snapshot(d) - before, set(), "files created by -t")


@test(timeout=30)
def check_valid_config_binds_and_creates_nothing(ctx):
    port = free_port()
    d = ctx.tmpdir
    log = os.path.join(d, "error.log")
    with open(log, "w") as f:
        f.write("old line\n")
    path = write_config(ctx, ("listen: [127.0.0.1:%d, 'unix:%s/p.sock']\napp: hello\n"
                              "error_log: {path: %s}\naccess_log: {path: %s/access.log}\n"
                              "pid_file: %s/pagid.pid\n") % (port, d, log, d, d), "good.yaml")
    before = snapshot(d)
    rc, out, err = check_cmd(ctx, "-t", "-c", path, *lib.root_user_args())
    check_eq(rc, 0, "-t exit status; stderr %r" % err)
    check("configuration %s is valid" % path in out, "stdout: %r" % out)
    check_eq(snapshot(d) - before, set(), "files created by -t")
    check_eq(open(log).read(), "old line\n", "the existing error log")
    check(lib.port_is_free(port), "port %d taken after -t" % port)
    # -l overrides are checked too, without a position
    rc, out, err = check_cmd(ctx, "-t", "-l", "no-such-host.invalid:80", "-a", "hello",
                             *lib.root_user_args())
    check_eq(rc, 1, "-t -l exit status")
    check(re.search(r"^pagid: cannot resolve listen address 'no-such-host.invalid:80'", err, re.M),
          "stderr: %r" % err)


@test(timeout=30)
def check_invalid_ipv4_with_position(ctx):
    path = write_config(ctx, "listen:\n  - 300.1.2.3:80\napp: hello\n", "v4.yaml")
    rc, out, err = check_cmd(ctx, "-t", "-c", path)
    check_eq(rc, 1, "-t exit status")
    check("%s:2:5: invalid listen address '300.1.2.3:80': invalid IPv4 address" % path in err,
          "stderr: %r" % err)


@test(timeout=30)
def check_access_log_as_the_workers_user(ctx):
    # As root with user: nobody, the master opens the access log and hands
    # it to the workers: a 0700 root directory (nginx's layout) is fine. A
    # log neither root nor the workers can open is an error naming both.
    need_root()
    base = tempfile.mkdtemp(prefix="pagid-safety-")  # the session dir is 0700: out of nobody's reach
    try:
        os.chmod(base, 0o711)
        d = os.path.join(base, "private")
        os.mkdir(d, 0o700)
        path = write_config(ctx, "app: hello\nuser: nobody\naccess_log:\n  path: %s/a.log\n" % d,
                            "a.yaml")
        rc, out, err = check_cmd(ctx, "-t", "-c", path)
        check_eq(rc, 0, "-t exit status for a root-only log directory; stderr %r" % err)
        path = write_config(ctx, "app: hello\nuser: nobody\naccess_log:\n  path: %s/no/a.log\n"
                            % d, "b.yaml")
        rc, out, err = check_cmd(ctx, "-t", "-c", path)
        check_eq(rc, 1, "-t exit status; stderr %r" % err)
        check(re.search(r"^%s:4:9: access_log.path %s/no/a.log: cannot open for append as user "
                        r"root: .*, nor as user nobody: Permission denied$"
                        % (re.escape(path), re.escape(d)), err, re.M),
              "stderr: %r" % err)
    finally:
        shutil.rmtree(base, ignore_errors=True)


@test(timeout=30)
def check_app_files_as_the_workers_user(ctx):
    # As root with user: nobody, -t checks that the workers can read each app
    # file: once per file, however many mounts name it (a generated config
    # mounts one app under thousands of paths).
    need_root()
    base = tempfile.mkdtemp(prefix="pagid-safety-")  # the session dir is 0700: out of nobody's reach
    try:
        os.chmod(base, 0o711)
        secret, shared = os.path.join(base, "secret.so"), os.path.join(base, "shared.so")
        for f, mode in ((secret, 0o600), (shared, 0o644)):
            shutil.copy(ctx.lifecycle_so, f)  # a real module: -t also reads its table
            os.chmod(f, mode)
        mounts = "".join("  - {path: /s%d, app: %s}\n  - {path: /p%d, app: %s}\n"
                         % (i, secret, i, shared) for i in range(50))
        path = write_config(ctx, "app: hello\nuser: nobody\nmounts:\n" + mounts, "apps.yaml")
        rc, out, err = check_cmd(ctx, "-t", "-c", path)
        check_eq(rc, 1, "-t exit status; stderr %r" % err)
        want = "pagid: app %s: the workers' user nobody cannot read it: Permission denied" % secret
        check_eq(err.count(want), 1, "lines about %s in stderr %r" % (secret, err))
        check(shared not in err, "a readable app reported: %r" % err)
        os.chmod(secret, 0o644)
        rc, out, err = check_cmd(ctx, "-t", "-c", path)
        check_eq(rc, 0, "-t exit status once nobody may read it; stderr %r" % err)
    finally:
        shutil.rmtree(base, ignore_errors=True)


# ---------------------------------------------------------------------------
# A second instance on the same address
# ---------------------------------------------------------------------------


def served_by(port, n):
    """n requests to the ops app; the set of worker pids that answered."""
    pids = set()
    for _ in range(n):
        r = request(port)
        check_eq(r.status, 200, "status")
        pids.add(int(r.body.split()[1]))
    return pids


@test(timeout=40)
def second_instance_refused(ctx):
    from test_ops import opsapp
    port = free_port()
    pid = os.path.join(ctx.tmpdir, "first.pid")
    first = ctx.start(opsapp(ctx), workers=2, port=port, config="pid_file: %s\n" % pid)
    check(wait_for(lambda: "all workers ready" in first.stderr(), 10), "first not ready")
    workers = set(wait_workers(first, 2))
    for workers_arg in (2, 0):
        second = ctx.start(opsapp(ctx), workers=workers_arg, port=port, wait=False,
                           config="pid_file: %s\n" % os.path.join(ctx.tmpdir, "second.pid"))
        check(second.wait_exit(10), "a second pagid (-w %d) runs on port %d beside the first"
              % (workers_arg, port))
        check_eq(second.returncode, 3, "exit status of the second (startup failure)")
        want = ("cannot listen on 127.0.0.1:%d: address already in use (is another pagid "
                "running? see pid file %s)" % (port, os.path.join(ctx.tmpdir, "second.pid")))
        check(want in second.stderr(), "message: %r" % second.stderr()[-500:])
        check(not os.path.exists(os.path.join(ctx.tmpdir, "second.pid")),
              "the refused instance wrote a pid file")
    pids = served_by(port, 60)
    check(pids <= workers, "requests answered by %r, not only by the first's workers %r"
          % (pids, workers))
    check_eq(open(pid).read(), "%d\n" % first.pid, "the first's pid file")


@test(timeout=40)
def second_instance_refused_unix(ctx):
    sock = os.path.join(ctx.tmpdir, "p.sock")
    conf = "listen: ['unix:%s']\napp: hello\n" % sock
    first = ctx.start(None, workers=1, listen=False, config=conf, wait=False)
    check(wait_for(lambda: "all workers ready" in first.stderr(), 10), "first not ready")
    ino = os.stat(sock).st_ino
    second = ctx.start(None, workers=1, listen=False, config=conf, wait=False)
    check(second.wait_exit(10), "a second pagid runs on the first's unix socket")
    check_eq(second.returncode, 3, "exit status of the second")
    check("cannot listen on unix:%s: another process is listening on this socket: address "
          "already in use (is another pagid running?)" % sock in second.stderr(),
          "message: %r" % second.stderr()[-500:])
    check_eq(os.stat(sock).st_ino, ino, "the first's socket file")
    u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    u.settimeout(5 * SLOW)
    u.connect(sock)
    u.sendall(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    check(u.recv(100).startswith(b"HTTP/1.1 200"), "the first no longer serves its socket")
    u.close()


@test(timeout=40)
def restart_on_a_port_in_time_wait(ctx):
    # The probe uses SO_REUSEADDR: connections the server closed first
    # (TIME_WAIT) must not make a restart look like a second instance.
    port = free_port()
    srv = ctx.start("hello", workers=1, port=port)
    for _ in range(20):
        check_eq(request(port).status, 200, "status")  # connection: close: the server closes
    check_eq(srv.stop(), 0, "exit status")
    again = ctx.start("hello", workers=1, port=port)
    check_eq(request(port).status, 200, "status after the restart")
    check(again.alive(), "restart refused")


# ---------------------------------------------------------------------------
# The pid file
# ---------------------------------------------------------------------------


@test(timeout=30)
def pid_file_symlink_refused(ctx):
    target = os.path.join(ctx.tmpdir, "precious")
    with open(target, "w") as f:
        f.write("do not touch\n")
    pid = os.path.join(ctx.tmpdir, "pagid.pid")
    os.symlink(target, pid)
    port = free_port()
    for workers in (2, 0):
        srv = ctx.start("hello", workers=workers, port=port, wait=False,
                        config="pid_file: %s\n" % pid)
        check(srv.wait_exit(10), "pagid started with a symlink as its pid file")
        check_eq(srv.returncode, 3, "exit status (startup failure)")
        check("cannot write pid file %s: is a symbolic link" % pid in srv.stderr(),
              "no clear message: %r" % srv.stderr()[-500:])
        check_eq(open(target).read(), "do not touch\n", "the symlink's target")
        check(os.path.islink(pid), "the symlink itself was replaced")
        check(lib.port_is_free(port), "port %d still taken after the failed start" % port)
    # -t says so before a start is tried
    rc, out, err = check_cmd(ctx, "-t", "-c", os.path.join(ctx.tmpdir, "pagid-0.yaml"),
                             *lib.root_user_args())
    check_eq(rc, 1, "-t exit status")
    check("pagid-0.yaml:1:11: pid_file %s: is a symbolic link" % pid in err, "-t: %r" % err)


@test(timeout=30)
def pid_file_written_0644_and_removed(ctx):
    pid = os.path.join(ctx.tmpdir, "pagid.pid")
    old = os.umask(0o077)
    try:
        srv = ctx.start("hello", workers=1, config="pid_file: %s\n" % pid)
    finally:
        os.umask(old)
    def content():
        try:
            return open(pid).read()
        except OSError:
            return None
    check(wait_for(lambda: content() == "%d\n" % srv.pid, 5), "pid file holds %r" % content())
    check_eq(os.stat(pid).st_mode & 0o7777, 0o644, "pid file mode under umask 077")
    check_eq(srv.stop(), 0, "exit status")
    check(not os.path.exists(pid), "pid file left after the stop")
