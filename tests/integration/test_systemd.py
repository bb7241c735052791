"""systemd: socket activation with systemd-socket-activate (also with no
listener configured: exactly the passed sockets are served), and the
sd_notify protocol seen from a NOTIFY_SOCKET this test plays systemd with
(READY only once the workers passed lifespan startup, RELOADING=1 +
MONOTONIC_USEC then READY=1 around a reload, STATUS, WATCHDOG from the
master's loop even while a worker is blocked, which the heartbeat kills,
STOPPING=1); the units in packaging/systemd pass systemd-analyze verify."""

import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time

import lib
from lib import SLOW, Skip, TestFailure, check, check_eq, free_port, request, test, wait_for


class Notifications:
    """A unix datagram socket playing systemd's NOTIFY_SOCKET; keeps (time, line)."""

    def __init__(self, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.settimeout(0.1)
        self.lines = []
        self.lock = threading.Lock()
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop_flag.is_set():
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            now = time.monotonic()
            with self.lock:
                for line in data.decode("utf-8", "replace").splitlines():
                    self.lines.append((now, line))
            if self.on_message:
                self.on_message(data.decode("utf-8", "replace"))

    on_message = None

    def all(self):
        with self.lock:
            return list(self.lines)

    def index(self, pred, start=0):
        for i, (_, line) in enumerate(self.all()):
            if i >= start and pred(line):
                return i
        return -1

    def wait(self, pred, timeout, start=0):
        return wait_for(lambda: self.index(pred, start) >= 0, timeout)

    def close(self):
        self.stop_flag.set()
        self.thread.join(2)
        self.sock.close()


class Activated:
    """systemd-socket-activate -l ADDR [-l MORE]... -E ... pagid ARGS, stopped by pid."""

    def __init__(self, ctx, port, args, env, more=()):
        tool = shutil.which("systemd-socket-activate")
        if not tool:
            raise Skip("systemd-socket-activate not installed (Debian package systemd)")
        self.stderr_path = os.path.join(ctx.tmpdir, "activated.stderr")
        self.err = open(self.stderr_path, "wb")
        argv = [tool, "-l", "127.0.0.1:%d" % port]
        for addr in more:
            argv += ["-l", addr]
        full_env = dict(os.environ)
        for k, v in env.items():
            full_env[k] = v
            argv += ["-E", k]
        argv += [ctx.pagid] + args + lib.root_user_args(args)
        # systemd-socket-activate execs pagid on the first connection, same pid
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.err,
                                     stderr=self.err, env=full_env, cwd=ctx.tmpdir)
        self.pid = self.proc.pid

    def stderr(self):
        with open(self.stderr_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10 * SLOW)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.err.close()
        return self.proc.returncode


def activated(ctx, port, extra_env, config):
    note = Notifications(os.path.join(ctx.tmpdir, "notify.sock"))
    env = {"NOTIFY_SOCKET": note.path}
    env.update(extra_env)
    path = lib.write_config(ctx, config)
    # -l names the same address: pagid must take the activated socket, since
    # binding the port itself would fail (systemd's socket has no REUSEPORT)
    srv = Activated(ctx, port, ["-c", path, "-l", "127.0.0.1:%d" % port], env)
    return srv, note, path


def trigger(port):
    """Connect until systemd-socket-activate listens; that connection execs pagid."""
    def attempt():
        try:
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
            return True
        except OSError:
            return False
    check(wait_for(attempt, 10), "systemd-socket-activate not listening on %d" % port)


def dump(ctx, srv, note):
    ctx.note("notifications: %r" % [line for _, line in note.all()][-30:])
    ctx.note("pagid stderr: %s" % srv.stderr()[-3000:])


@test(timeout=60)
def socket_activation_and_notify_sequence(ctx):
    port = free_port()
    srv, note, _ = activated(ctx, port, {}, "workers: 2\napp: hello\ntimeouts: {keepalive: 5s}\n")
    try:
        ready_snapshot = []
        note.on_message = lambda m: ready_snapshot.append(srv.stderr()) if "READY=1" in m else None
        # The first connection makes systemd-socket-activate exec pagid.
        trigger(port)
        r = request(port, "GET", "/", timeout=10)
        check_eq(r.status, 200, "first request through the activated socket")
        check(note.wait(lambda ln: ln == "READY=1", 10), "no READY=1")
        err = srv.stderr()
        check("socket activation: 1 socket from systemd" in err, "activated socket not used")
        check(ready_snapshot and len(re.findall(r"worker \d ready", ready_snapshot[0])) == 2,
              "READY=1 before both workers passed lifespan startup: %r"
              % (ready_snapshot[:1] or [""])[0][-800:])
        check(note.index(lambda ln: ln.startswith("MAINPID=%d" % srv.pid)) >= 0, "no MAINPID")
        check(note.wait(lambda ln: ln.startswith("STATUS=generation 1:") and "2 workers" in ln,
                        5), "no STATUS line with generation and workers")
        for _ in range(20):
            check_eq(request(port, "GET", "/").status, 200, "status")

        # Reload: RELOADING=1 with MONOTONIC_USEC, then READY=1 once generation 2 serves.
        start = len(note.all())
        ready_snapshot.clear()
        t0 = time.monotonic()
        os.kill(srv.pid, signal.SIGHUP)
        check(note.wait(lambda ln: ln == "RELOADING=1", 5, start), "no RELOADING=1")
        i = note.index(lambda ln: ln == "RELOADING=1", start)
        lines = [ln for _, ln in note.all()]
        m = [ln for ln in lines[i:i + 3] if ln.startswith("MONOTONIC_USEC=")]
        check(m, "RELOADING=1 without MONOTONIC_USEC: %r" % lines[i:i + 3])
        usec = int(m[0].split("=", 1)[1])
        mono = time.clock_gettime(time.CLOCK_MONOTONIC) * 1e6
        check(abs(mono - usec) < 10e6 * SLOW, "MONOTONIC_USEC %d is not CLOCK_MONOTONIC (%d)"
              % (usec, mono))
        check(note.wait(lambda ln: ln == "READY=1", 10, i), "no READY=1 after RELOADING=1")
        check(ready_snapshot and "generation 2 ready" in ready_snapshot[0],
              "READY=1 before the new generation was ready")
        check(time.monotonic() - t0 < 10 * SLOW, "reload took too long")
        check(note.wait(lambda ln: ln.startswith("STATUS=generation 2:"), 5),
              "STATUS does not show generation 2")
        check_eq(request(port, "GET", "/").status, 200, "status after reload")

        # Stop: STOPPING=1, exit 0.
        start = len(note.all())
        rc = srv.stop()
        check(note.index(lambda ln: ln == "STOPPING=1", start) >= 0, "no STOPPING=1")
        check_eq(rc, 0, "exit status")
        check(not re.search(r"crashed|Sanitizer", srv.stderr()), "a crash in the log")
    except TestFailure:
        dump(ctx, srv, note)
        raise
    finally:
        srv.stop()
        note.close()


def pings_between(note, t0, t1):
    return [t for t, ln in note.all() if ln == "WATCHDOG=1" and t0 <= t <= t1]


def max_gap(times, t0, t1):
    """The longest stretch without a ping in [t0, t1]."""
    marks = [t0] + sorted(times) + [t1]
    return max(b - a for a, b in zip(marks, marks[1:]))


@test(timeout=60)
def watchdog_pings_while_a_worker_is_stopped(ctx):
    # The watchdog watches the master's loop; a stuck worker is the
    # heartbeat's business. heartbeat 0: the stopped worker stays stopped.
    port = free_port()
    srv, note, _ = activated(ctx, port, {"WATCHDOG_USEC": "600000"},
                             "workers: 2\napp: hello\ntimeouts: {heartbeat: 0}\n")
    try:
        trigger(port)
        check_eq(request(port, "GET", "/", timeout=10).status, 200, "first request")
        check(note.wait(lambda ln: ln == "READY=1", 10), "no READY=1")
        workers = lib.children_of(srv.pid)
        check_eq(len(workers), 2, "workers")
        os.kill(workers[0], signal.SIGSTOP)
        try:
            time.sleep(2.5)  # its heartbeat is stale after 2s
            t1 = time.monotonic()
            time.sleep(2.0)
            t2 = time.monotonic()
        finally:
            os.kill(workers[0], signal.SIGCONT)
        n = len(pings_between(note, t1, t2))
        check(n >= 2, "%d WATCHDOG=1 in 2s while a worker was stopped (every 0.3s expected)" % n)
        check(note.wait(lambda ln: ln.startswith("STATUS=") and "1 blocked" in ln, 1) or
              any("1 blocked" in ln for _, ln in note.all()),
              "STATUS never said a worker was blocked")
        check_eq(request(port, "GET", "/").status, 200, "status after SIGCONT")
    except TestFailure:
        dump(ctx, srv, note)
        raise
    finally:
        srv.stop()
        note.close()


@test(timeout=60)
def blocked_worker_killed_watchdog_keeps_pinging(ctx):
    # A worker whose loop blocks (deaf to SIGTERM) is SIGKILLed once its
    # heartbeat is timeouts.heartbeat old and replaced, and the master pings
    # the watchdog all along: WatchdogSec=2s never fires, although the
    # heartbeat limit (5s) is longer.
    from test_ops import opsapp
    port = free_port()
    srv, note, _ = activated(ctx, port, {"WATCHDOG_USEC": "2000000"},
                             "workers: 2\napp: %s\ntimeouts: {heartbeat: 5s}\n" % opsapp(ctx))
    srv_stderr = srv.stderr
    try:
        trigger(port)
        check_eq(request(port, "GET", "/", timeout=10).status, 200, "first request")
        check(note.wait(lambda ln: ln == "READY=1", 10), "no READY=1")
        before = lib.children_of(srv.pid)
        check_eq(len(before), 2, "workers")
        c = lib.Conn(port)
        t0 = time.monotonic()
        c.send(b"GET /block HTTP/1.1\r\nHost: t\r\n\r\n")
        m = wait_for(lambda: re.search(r"worker \d \(pid (\d+)\): event loop blocked",
                                       srv_stderr()), 15)
        check(m, "the blocked worker was never called blocked")
        victim = int(m.group(1))
        check(victim in before, "blocked pid %d is not a worker %r" % (victim, before))
        check(wait_for(lambda: not lib.pid_alive(victim), 3), "blocked worker %d still alive"
              % victim)
        t_gone = time.monotonic() - t0
        # the last beat came up to 0.5s before the block began
        check(t_gone >= 4.4, "killed after %.1fs, before the 5s heartbeat limit" % t_gone)
        check(t_gone <= 5.0 + 3.0 * SLOW, "killed only after %.1fs (heartbeat 5s)" % t_gone)
        # the pid can be gone (a zombie) before the master reaps it and logs why
        check(wait_for(lambda: "was killed for a stale heartbeat (signal 9)" in srv_stderr(), 5),
              "not SIGKILLed: %r" % srv_stderr()[-800:])
        c.close()
        check(wait_for(lambda: len(lib.children_of(srv.pid)) == 2, 10), "not replaced")
        check_eq(request(port, "GET", "/").status, 200, "status after the replacement")
        t1 = time.monotonic()
        gap = max_gap(pings_between(note, t0, t1), t0, t1)
        check(gap < 2.0, "no WATCHDOG=1 for %.2fs while a worker was blocked (WatchdogSec=2s)"
              % gap)
    except TestFailure:
        dump(ctx, srv, note)
        raise
    finally:
        srv.stop()
        note.close()


def listening_ports(pid):
    """Local ports of the TCP sockets in LISTEN state that process pid holds."""
    inodes = set()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if cols[3] == "0A" and cols[9] in inodes:  # 0A: LISTEN
                ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return ports


def unix_get(path):
    u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    u.settimeout(5 * SLOW)
    try:
        u.connect(path)
        u.sendall(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        return u.recv(100)
    finally:
        u.close()


@test(timeout=60)
def activation_without_listen(ctx):
    # No listen entry in the file, no -l: the sockets systemd passed (TCP and
    # unix) are the listeners, and the default 127.0.0.1:8080 is not opened.
    port = free_port()
    sock = os.path.join(ctx.tmpdir, "act.sock")
    note = Notifications(os.path.join(ctx.tmpdir, "notify.sock"))
    path = lib.write_config(ctx, "workers: 2\napp: hello\n")
    srv = Activated(ctx, port, ["-c", path], {"NOTIFY_SOCKET": note.path}, more=[sock])
    try:
        trigger(port)
        check_eq(request(port, "GET", "/", timeout=10).status, 200, "TCP socket from systemd")
        check(note.wait(lambda ln: ln == "READY=1", 10), "no READY=1")
        check(unix_get(sock).startswith(b"HTTP/1.1 200"), "unix socket from systemd")
        err = srv.stderr()
        check("socket activation: 2 sockets from systemd" in err, "sockets not taken: %r"
              % err[-800:])
        check("matches no listen entry" not in err, "a passed socket was closed: %r" % err[-800:])
        check_eq(listening_ports(srv.pid), {port}, "TCP ports the master listens on")
        # A reload keeps serving them, and still opens no default.
        os.kill(srv.pid, signal.SIGHUP)
        check(wait_for(lambda: "generation 2 ready" in srv.stderr(), 10), "reload not done")
        check_eq(request(port, "GET", "/").status, 200, "TCP after the reload")
        check(unix_get(sock).startswith(b"HTTP/1.1 200"), "unix after the reload")
        check_eq(listening_ports(srv.pid), {port}, "TCP ports after the reload")
        # A binary upgrade hands them on: the new master serves the same two.
        os.kill(srv.pid, signal.SIGUSR2)
        m = wait_for(lambda: re.search(r"upgrade: the new master \(pid (\d+)\) is ready",
                                       srv.stderr()), 20)
        check(m, "upgrade not done")
        new = int(m.group(1))
        try:
            srv.proc.wait(15 * SLOW)
            check_eq(srv.proc.returncode, 0, "old master's exit status")
            check_eq(request(port, "GET", "/").status, 200, "TCP after the upgrade")
            check(unix_get(sock).startswith(b"HTTP/1.1 200"), "unix after the upgrade")
            check_eq(listening_ports(new), {port}, "TCP ports of the new master")
        finally:
            if lib.pid_alive(new):
                os.kill(new, signal.SIGTERM)
            check(wait_for(lambda: not lib.pid_alive(new), 15), "new master did not stop")
        check(os.path.exists(sock), "pagid removed systemd's socket file")
    except TestFailure:
        dump(ctx, srv, note)
        raise
    finally:
        srv.stop()
        note.close()


@test(timeout=60)
def units_verify(ctx):
    tool = shutil.which("systemd-analyze")
    if not tool:
        raise Skip("systemd-analyze not installed (Debian package systemd)")
    src = os.path.join(lib.REPO, "packaging", "systemd")
    for name in ("pagid.service", "pagid.socket"):
        with open(os.path.join(src, name)) as f:
            text = f.read()
        # verify checks that the binary exists: point it at the one under test
        with open(os.path.join(ctx.tmpdir, name), "w") as f:
            f.write(text.replace("/usr/sbin/pagid", ctx.pagid))
    p = subprocess.run([tool, "verify", "--man=no", "./pagid.service", "./pagid.socket"],
                       cwd=ctx.tmpdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=30)
    out = p.stdout.decode("utf-8", "replace")
    check(p.returncode == 0 and not out.strip(), "systemd-analyze verify: %s" % out)
    service = open(os.path.join(src, "pagid.service")).read()
    for key in ("Type=notify", "ExecReload=/bin/kill -HUP $MAINPID", "WatchdogSec=",
                "NoNewPrivileges=yes", "ProtectSystem=strict", "RuntimeDirectory=pagid",
                "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX",
                "CapabilityBoundingSet=CAP_NET_BIND_SERVICE CAP_SETUID CAP_SETGID"):
        check(key in service, "pagid.service lacks %s" % key)
