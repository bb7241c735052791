"""Unix domain socket listeners: the mapping form's mode, owner and group
(0666 when unset), who can connect then, a stale socket file replaced, a
live one refused, the file unlinked on stop, a reload applying a changed
mode to the socket it keeps, and `pagid -t` on bad entries (FILE:LINE:COL).
Requests go through `curl --unix-socket`."""

import errno
import grp
import os
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time

import lib
from lib import Skip, TestFailure, check, check_eq, test, wait_for


def need_curl():
    if not shutil.which("curl"):
        raise Skip("curl is not installed")


def curl(sock, path="/"):
    """(status, body) of GET path over the unix socket."""
    p = subprocess.run(["curl", "-s", "-m", str(int(10 * lib.SLOW)), "--unix-socket", sock,
                        "-o", "-", "-w", "\n%{http_code}", "http://localhost" + path],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30 * lib.SLOW)
    body, _, code = p.stdout.decode("utf-8", "replace").rpartition("\n")
    return int(code or 0), body


def start(ctx, text, name="pagid.yaml", wait=True):
    """pagid -c FILE (only the file, so SIGHUP re-reads everything)."""
    path = os.path.join(ctx.tmpdir, name)
    write(path, text)
    srv = lib.Server(ctx, ["-c", path], None, name="pagid%d" % len(ctx.servers))
    ctx.servers.append(srv)
    if wait:
        ok = wait_for(lambda: "all workers ready" in srv.stderr() or not srv.alive(), 10)
        check(ok and srv.alive(), "pagid did not start:\n%s" % srv.stderr())
    return srv, path


def write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, path)  # a reload never reads half a file


def config(sock, extra=""):
    """One unix listener; extra lines go into its mapping (indented by the caller)."""
    return ("listen:\n  - address: 'unix:%s'\n%sworkers: 1\napp: hello\n" % (sock, extra))


def mode_of(path):
    st = os.lstat(path)
    check(stat.S_ISSOCK(st.st_mode), "%s is not a socket" % path)
    return stat.S_IMODE(st.st_mode)


def reload(srv, gen):
    os.kill(srv.pid, signal.SIGHUP)
    check(wait_for(lambda: "generation %d ready" % gen in srv.stderr()
                   or "reload failed" in srv.stderr(), 10), "reload %d not done" % gen)


def connect_as(sock, uid, gid):
    """Can a process of uid:gid (no other groups) connect? 'ok' or the errno name.
    A forked child, not a new interpreter: ours may live where nobody may run it."""
    pid = os.fork()
    if pid == 0:
        code = 100
        try:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(5)
            s.connect(sock)
            code = 0
        except OSError as e:
            code = e.errno if 0 < (e.errno or 0) < 100 else 100
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    return "ok" if code == 0 else errno.errorcode.get(code, str(code))


def shared_dir():
    """A directory everyone may traverse (the test's tmpdir is 0700)."""
    d = tempfile.mkdtemp(prefix="pagid-unix-")
    os.chmod(d, 0o755)
    return d


@test(timeout=30)
def default_mode_is_0666(ctx):
    need_curl()
    sock = os.path.join(ctx.tmpdir, "s.sock")
    srv, _ = start(ctx, "listen: 'unix:%s'\nworkers: 1\napp: hello\n" % sock)
    check_eq(mode_of(sock), 0o666, "mode of a string-form listener")
    check_eq(os.lstat(sock).st_uid, os.geteuid(), "owner")
    status, body = curl(sock)
    check_eq(status, 200, "status")
    check("Hello" in body, "body %r" % body)
    check_eq(srv.stop(), 0, "exit status")
    check(not os.path.exists(sock), "socket file left after the stop")


@test(timeout=30)
def mode_0600_owner_only(ctx):
    need_curl()
    d = shared_dir()
    try:
        sock = os.path.join(d, "s.sock")
        srv, _ = start(ctx, config(sock, "    mode: '0600'\n"))
        check_eq(mode_of(sock), 0o600, "mode")
        check_eq(curl(sock)[0], 200, "status for the owner")
        if os.geteuid() == 0:
            check_eq(connect_as(sock, 65534, 65534), "EACCES", "another user connects")
        check_eq(srv.stop(), 0, "exit status")
        check(not os.path.exists(sock), "socket file left after the stop")
    finally:
        shutil.rmtree(d, ignore_errors=True)


@test(timeout=30)
def mode_0660_with_group(ctx):
    need_curl()
    if os.geteuid() != 0:
        raise Skip("changing a socket's group to another group needs root")
    try:
        gid = grp.getgrnam("daemon").gr_gid
    except KeyError:
        raise Skip("no group 'daemon'")
    d = shared_dir()
    try:
        sock = os.path.join(d, "s.sock")
        srv, _ = start(ctx, config(sock, "    mode: 0660\n    owner: root\n    group: daemon\n"))
        st = os.lstat(sock)
        check_eq(mode_of(sock), 0o660, "mode")
        check_eq(st.st_uid, 0, "owner")
        check_eq(st.st_gid, gid, "group")
        check_eq(curl(sock)[0], 200, "status")
        # The group grants access; anyone else is refused by the mode.
        check_eq(connect_as(sock, 65534, gid), "ok", "a member of the group connects")
        check_eq(connect_as(sock, 65534, 65534), "EACCES", "a non-member connects")
        check_eq(srv.stop(), 0, "exit status")
        check(not os.path.exists(sock), "socket file left after the stop")
    finally:
        shutil.rmtree(d, ignore_errors=True)


@test(timeout=30)
def stale_socket_replaced(ctx):
    need_curl()
    sock = os.path.join(ctx.tmpdir, "s.sock")
    # A crashed server's file: a socket nobody listens on.
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(sock)
    s.close()
    srv, _ = start(ctx, config(sock, "    mode: '0640'\n"))
    check("removed stale socket %s" % sock in srv.stderr(), "no log line for the stale file")
    check_eq(mode_of(sock), 0o640, "mode of the new socket")
    check_eq(curl(sock)[0], 200, "status")
    srv.stop()
    check(not os.path.exists(sock), "socket file left after the stop")


@test(timeout=30)
def live_socket_refused(ctx):
    sock = os.path.join(ctx.tmpdir, "s.sock")
    other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    other.bind(sock)
    other.listen(4)
    try:
        srv, _ = start(ctx, config(sock, "    mode: '0600'\n"), wait=False)
        check(srv.wait_exit(10), "pagid still running beside a live socket")
        check_eq(srv.returncode, 3, "exit status")
        check("cannot listen on unix:%s: another process is listening on this socket" % sock
              in srv.stderr(), "reason not given:\n%s" % srv.stderr())
        check(os.path.exists(sock), "the other process's socket file was removed")
        check_eq(mode_of(sock), 0o777 & ~current_umask(), "the other socket's mode was changed")
    finally:
        other.close()


def current_umask():
    u = os.umask(0)
    os.umask(u)
    return u


@test(timeout=40)
def reload_applies_changed_mode(ctx):
    need_curl()
    if os.geteuid() != 0:
        raise Skip("changing a socket's group needs root")
    try:
        gid = grp.getgrnam("adm").gr_gid
    except KeyError:
        raise Skip("no group 'adm'")
    sock = os.path.join(ctx.tmpdir, "s.sock")
    srv, path = start(ctx, config(sock, "    mode: '0600'\n"))
    check_eq(mode_of(sock), 0o600, "mode before the reload")
    ino = os.lstat(sock).st_ino

    write(path, config(sock, "    mode: '0640'\n    group: adm\n"))
    reload(srv, 2)
    check("reload failed" not in srv.stderr(), "reload failed:\n%s" % srv.stderr())
    st = os.lstat(sock)
    check_eq(st.st_ino, ino, "the reload kept the socket")
    check_eq(mode_of(sock), 0o640, "mode after the reload")
    check_eq(st.st_gid, gid, "group after the reload")
    check_eq(curl(sock)[0], 200, "status after the reload")

    # Not set any more: the file keeps what it has (documented).
    write(path, config(sock))
    reload(srv, 3)
    check_eq(mode_of(sock), 0o640, "mode after a reload without mode")
    check_eq(os.lstat(sock).st_gid, gid, "group after a reload without group")

    # A bad group fails the reload at load time; the live generation keeps serving.
    write(path, config(sock, "    mode: '0666'\n    group: no-such-group-pagid\n"))
    os.kill(srv.pid, signal.SIGHUP)
    check(wait_for(lambda: "reload failed" in srv.stderr(), 10), "bad reload not refused")
    check("%s:4:12: unknown group 'no-such-group-pagid' for 'listen.group'" % path
          in srv.stderr(), "error without FILE:LINE:COL:\n%s" % srv.stderr())
    time.sleep(0.3)
    check_eq(mode_of(sock), 0o640, "mode after a failed reload")
    check_eq(curl(sock)[0], 200, "status after a failed reload")
    check_eq(srv.stop(), 0, "exit status")
    check(not os.path.exists(sock), "socket file left after the stop")


@test(timeout=20)
def check_reports_bad_entries(ctx):
    path = lib.write_config(ctx, "listen:\n"
                                 "  - {address: '127.0.0.1:8080', mode: '0660'}\n"
                                 "  - address: 'unix:/run/pagid-test.sock'\n"
                                 "    mode: '0999'\n"
                                 "    owner: no-such-user-pagid\n"
                                 "  - {group: daemon}\n"
                                 "app: hello\n")
    p = subprocess.run([ctx.pagid, "-t", "-c", path], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, cwd=ctx.tmpdir, timeout=20 * lib.SLOW)
    err = p.stderr.decode("utf-8", "replace")
    check_eq(p.returncode, 1, "exit status of -t")
    for line in ("%s:2:33: 'listen.mode' applies to unix socket addresses only",
                 "%s:4:11: invalid mode '0999' for 'listen.mode' (expected octal permissions "
                 "such as 0660, at most 0777)",
                 "%s:5:12: unknown user 'no-such-user-pagid' for 'listen.owner'",
                 "%s:6:5: a 'listen' entry needs an address"):
        if line % path not in err:
            raise TestFailure("missing %r in:\n%s" % (line % path, err))
