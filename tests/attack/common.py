"""Shared helpers for the attack battery: start pagid from a generated config
on free loopback ports, watch its log for crashes, measure the worker's fds
and RSS, raw HTTP/1.1 and HTTP/2 (python3-h2) clients."""

import os
import re
import signal
import socket
import ssl
import subprocess
import tempfile
import time

SLOW = float(os.environ.get("ATTACK_SLOW", "1"))
# Under ASan freed memory sits in the quarantine: RSS says nothing there.
SANITIZED = os.environ.get("ATTACK_SANITIZED") == "1"
HERE = os.path.dirname(os.path.abspath(__file__))

CRASH_RE = re.compile(r"crashed|Sanitizer|runtime error:|Segmentation fault|SIGSEGV|SIGABRT|"
                      r"Assertion .* failed|double free|heap-use-after-free")


class AttackFailure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise AttackFailure(msg)


def wait_for(pred, timeout, interval=0.05):
    deadline = time.monotonic() + timeout * SLOW
    while True:
        v = pred()
        if v or time.monotonic() >= deadline:
            return v
        time.sleep(interval)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def proc_children(pid):
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                stat = f.read()
            with open("/proc/%s/cmdline" % d, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except OSError:
            continue
        rest = stat[stat.rfind(")") + 2:].split()
        if len(rest) > 1 and int(rest[1]) == pid and rest[0] != "Z":
            out.append((int(d), cmd))
    return sorted(out)


def fd_count(pid):
    try:
        return len(os.listdir("/proc/%d/fd" % pid))
    except OSError:
        return None


def rss_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None


def make_cert(d):
    cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
    if not os.path.exists(cert):
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert,
                        "-days", "2", "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                       check=True, capture_output=True)
    return cert, key


class Server:
    """pagid -c CONF with one worker (so fds and RSS have one process to
    watch), a status listener, and whatever listeners the caller adds."""

    def __init__(self, binary, workdir, name, conf_body, workers=1):
        self.binary, self.workdir, self.name = binary, workdir, name
        self.sport = free_port()
        self.workers_n = workers
        conf = conf_body + "status:\n  listen: 127.0.0.1:%d\nworkers: %d\n" % (self.sport, workers)
        self.conf_path = os.path.join(workdir, name + ".yaml")
        with open(self.conf_path, "w") as f:
            f.write(conf)
        self.log_path = os.path.join(workdir, name + ".log")
        self.log = open(self.log_path, "ab")
        env = dict(os.environ)
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
        args = [binary, "-c", self.conf_path]
        if os.geteuid() == 0:
            args += ["-u", "root"]
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=self.log, cwd=workdir, env=env)
        self.pid = self.proc.pid
        self.log_mark = 0
        ok = wait_for(lambda: self.metrics_quiet().get("pagid_workers_ready") == workers, 20)
        if not ok:
            self.stop()
            raise AttackFailure("%s: workers never ready; log: %s" % (name, self.log_text()[-800:]))

    # -- observation --------------------------------------------------------
    def alive(self):
        return self.proc.poll() is None

    def log_text(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def crash_lines(self):
        """Crash lines, less the pool processes the attacks kill themselves."""
        return [l for l in self.log_text().splitlines()
                if CRASH_RE.search(l) and not re.search(r"pool process \d+ \(pid \d+\) crashed \(signal 9\)", l)]

    def metrics(self):
        s = socket.create_connection(("127.0.0.1", self.sport), timeout=5 * SLOW)
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
        s.close()
        out = {}
        for line in data.partition(b"\r\n\r\n")[2].decode().splitlines():
            if line and not line.startswith("#"):
                k, _, v = line.rpartition(" ")
                try:
                    out[k] = float(v)
                except ValueError:
                    pass
        return out

    def metrics_quiet(self):
        try:
            return self.metrics()
        except Exception:
            return {}

    def workers(self):
        return [p for p, cmd in proc_children(self.pid) if cmd.startswith("pagid: worker ")]

    def pool_procs(self):
        return [p for p, cmd in proc_children(self.pid) if cmd.startswith("pagid: pool process")]

    def worker(self):
        w = self.workers()
        check(len(w) == self.workers_n, "%s: workers %r" % (self.name, w))
        return w[0]

    def baseline(self):
        """(worker pid, fds, rss KiB) once the worker is idle."""
        time.sleep(0.3 * SLOW)
        w = self.worker()
        return w, fd_count(w), rss_kib(w)

    def check_back_to(self, base, rss_slack_kib=16384, fd_slack=0, timeout=8):
        """The same worker (not restarted), its fds back to the baseline, RSS
        within slack, the master alive, no crash line in the log."""
        w, fds, rss = base
        check(self.alive(), "master died")
        check(not self.crash_lines(), "crash in log: %s" % self.crash_lines()[:3])
        check(w in self.workers(), "worker %d gone (restarted?) workers now %r" % (w, self.workers()))
        ok = wait_for(lambda: (fd_count(w) or 0) <= fds + fd_slack, timeout)
        check(ok, "worker fds %s, baseline %d (leak)" % (fd_count(w), fds))
        r = rss_kib(w)
        check(SANITIZED or (r is not None and r <= rss + rss_slack_kib),
              "worker RSS %s KiB, baseline %d KiB (+%d allowed)" % (r, rss, rss_slack_kib))

    def stop(self):
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15 * SLOW)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


# ---------------------------------------------------------------------------
# HTTP/1.1
# ---------------------------------------------------------------------------

def h1_raw(port, data, timeout=5, read_until_close=True, shut=False):
    """Send bytes, read until close or timeout; returns the bytes read."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout * SLOW)
    s.sendall(data)
    if shut:
        s.shutdown(socket.SHUT_WR)
    out = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
            if not read_until_close:
                break
    except socket.timeout:
        pass
    except ConnectionResetError:
        pass
    s.close()
    return out


def statuses(data):
    return [int(m) for m in re.findall(rb"HTTP/1\.[01] (\d{3}) ", data)]


def h1_get(port, path, timeout=10, headers=""):
    """One request on its own connection: (status, headers bytes, body bytes)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout * SLOW)
    s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n%s\r\n" % (path, headers)).encode())
    data = b""
    try:
        while True:
            b = s.recv(1 << 20)
            if not b:
                break
            data += b
    finally:
        s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    st = statuses(head[:20])
    return (st[0] if st else None), head, body


# ---------------------------------------------------------------------------
# HTTP/2 (python3-h2)
# ---------------------------------------------------------------------------

import h2.config  # noqa: E402
import h2.connection  # noqa: E402
import h2.events  # noqa: E402
import h2.settings  # noqa: E402


class H2:
    """An HTTP/2 client connection (h2c prior knowledge, or TLS with ALPN)."""

    def __init__(self, port, tls=False, window=None, max_frame=None, timeout=10, rcvbuf=None):
        s = socket.socket()
        if rcvbuf:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)  # before connect: the window scale
        s.settimeout(timeout * SLOW)
        s.connect(("127.0.0.1", port))
        if tls:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            ctx.set_alpn_protocols(["h2"])
            s = ctx.wrap_socket(s, server_hostname="localhost")
            check(s.selected_alpn_protocol() == "h2", "ALPN gave %r" % s.selected_alpn_protocol())
        self.sock = s
        self.conn = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.conn.local_settings = h2.settings.Settings(client=True)
        settings = {}
        if window is not None:
            settings[h2.settings.SettingCodes.INITIAL_WINDOW_SIZE] = window
        if max_frame is not None:
            settings[h2.settings.SettingCodes.MAX_FRAME_SIZE] = max_frame
        self.conn.initiate_connection()
        if settings:
            self.conn.update_settings(settings)
        self.flush()
        self.streams = {}  # id -> dict(status, headers, data, ended, reset)
        self.closed = False
        self.goaway = None
        self.auto_ack = True

    def flush(self):
        d = self.conn.data_to_send()
        if d:
            self.sock.sendall(d)

    def request(self, path, method="GET", extra=(), end=True):
        sid = self.conn.get_next_available_stream_id()
        hdrs = [(":method", method), (":path", path), (":scheme", "http"),
                (":authority", "localhost")] + list(extra)
        self.conn.send_headers(sid, hdrs, end_stream=end)
        self.flush()
        self.streams[sid] = {"status": None, "headers": [], "data": bytearray(), "ended": False,
                             "reset": None}
        return sid

    def pump(self, timeout=0.5):
        """Read once (up to timeout); process events; False on EOF."""
        self.sock.settimeout(timeout * SLOW)
        try:
            data = self.sock.recv(1 << 20)
        except (socket.timeout, ssl.SSLWantReadError):
            return True
        except (ConnectionResetError, ssl.SSLError, OSError):
            self.closed = True
            return False
        if not data:
            self.closed = True
            return False
        for ev in self.conn.receive_data(data):
            st = self.streams.get(getattr(ev, "stream_id", None))
            if isinstance(ev, h2.events.ResponseReceived) and st is not None:
                st["headers"] = ev.headers
                st["status"] = int(dict(ev.headers)[":status"])
            elif isinstance(ev, h2.events.DataReceived):
                if st is not None:
                    st["data"] += ev.data
                if self.auto_ack and ev.flow_controlled_length:
                    self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded) and st is not None:
                st["ended"] = True
            elif isinstance(ev, h2.events.StreamReset) and st is not None:
                st["reset"] = ev.error_code
            elif isinstance(ev, h2.events.ConnectionTerminated):
                self.goaway = ev
        try:
            self.flush()
        except OSError:
            self.closed = True
            return False
        return True

    def run_until(self, pred, timeout=10):
        deadline = time.monotonic() + timeout * SLOW
        while not pred() and time.monotonic() < deadline:
            if not self.pump(0.2):
                break
        return pred()

    def done(self, sid):
        st = self.streams[sid]
        return st["ended"] or st["reset"] is not None

    def close(self, rst=False):
        try:
            if rst:
                import struct
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.sock.close()
        except OSError:
            pass


def h2_get(port, path, tls=False, timeout=20, method="GET", extra=()):
    c = H2(port, tls=tls)
    sid = c.request(path, method=method, extra=extra)
    c.run_until(lambda: c.done(sid), timeout)
    st = c.streams[sid]
    c.close()
    return st
