"""Operator safety of the master: workers never outlive a killed master (also
after switching user), who the workers run as when started as root (nobody
unless `user` says otherwise, root only when asked), the pid file never
written through a symlink."""

import os
import pwd
import re
import signal
import socket
import subprocess
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
        check_eq(uid_of(w), nobody, "worker %d uid" % w)
    check_eq(uid_of(srv.pid), 0, "master uid")
    check(re.search(r"info: no 'user' is set: workers run as nobody:\S+", srv.stderr()),
          "no info line about the fallback: %r" % srv.stderr()[-600:])
    check_eq(request(port).status, 200, "status")
    # The single process (-w 0) runs the app too: the same rule.
    port2 = free_port()
    single = ctx.start("hello", workers=0, port=port2, default_user=False)
    check_eq(uid_of(single.pid), nobody, "single process uid")
    check_eq(request(port2).status, 200, "status (-w 0)")


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
