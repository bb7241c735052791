"""Operator safety of the master: the pid file never written through a
symlink."""

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
