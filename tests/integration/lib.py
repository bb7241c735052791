"""Helpers for pagid's integration tests: registering tests, starting and
stopping the server under test, raw HTTP/1.x over sockets, reading the
lifecycle app's log. Python 3 standard library only."""

import collections
import fcntl
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.dirname(os.path.abspath(__file__))

# Sanitizer builds start and run slower; every wait scales with this.
SLOW = float(os.environ.get("PAGID_TEST_SLOWDOWN", "1"))

# The binary under test is a sanitizer build (run.py sets this).
SANITIZED = os.environ.get("PAGID_TEST_SANITIZED") == "1"

# ---------------------------------------------------------------------------
# Test registry
# ---------------------------------------------------------------------------

TESTS = []


class TestFailure(AssertionError):
    pass


class Skip(Exception):
    pass


def test(timeout=30, name=None, serial=False):
    """Register a test function f(ctx); its name is '<area>.<function>'.

    serial=True: the test's result depends on the machine not being busy
    (timing, fairness, memory measured as RSS, tail latency, ...), so the
    runner gives it the machine alone: with -j N it runs after the
    concurrent ones, one at a time. A module setting SERIAL = True marks
    all of its tests so."""

    def deco(fn):
        area = fn.__module__.replace("test_", "")
        TESTS.append(TestCase(name or "%s.%s" % (area, fn.__name__), fn, timeout, serial))
        return fn

    return deco


class TestCase(collections.namedtuple("TestCase", "name fn timeout serial_mark")):
    """A registered test; serial counts the module's SERIAL marker too."""

    @property
    def serial(self):
        mod = sys.modules.get(self.fn.__module__)
        return bool(self.serial_mark or getattr(mod, "SERIAL", False))


def check(cond, msg):
    if not cond:
        raise TestFailure(msg)


def check_eq(got, expected, what):
    if got != expected:
        raise TestFailure("%s: expected %r, got %r" % (what, expected, got))


def wait_for(pred, timeout, interval=0.02):
    """Poll pred() until truthy or timeout (scaled); returns its last value."""
    deadline = time.monotonic() + timeout * SLOW
    while True:
        v = pred()
        if v or time.monotonic() >= deadline:
            return v
        time.sleep(interval)


# ---------------------------------------------------------------------------
# Ports and processes
# ---------------------------------------------------------------------------


_recent_ports = collections.deque(maxlen=512)

# Ports for the tests' listeners come from below the kernel's ephemeral range
# (32768-60999 on Linux), so no client connection's local port takes one
# between free_port() and the server's bind.
PORT_RANGE = (20000, 32000)
# Concurrent tests (run.py -j, or two runs on one machine) never get the same
# port: a port handed out is locked (a POSIX record lock on byte PORT of this
# file) until the process of the test that got it exits.
PORT_LOCK_FILE = os.path.join(tempfile.gettempdir(), "pagid-itest-ports.lock")
_port_lock_fd = None
_rand = random.SystemRandom()  # no state shared by forked runners


def _lock_port(port):
    global _port_lock_fd
    if _port_lock_fd is None:
        try:
            _port_lock_fd = os.open(PORT_LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except OSError:
            _port_lock_fd = -1
    if _port_lock_fd < 0:
        return True  # no lock file (read-only /tmp?): the bind probe alone
    try:
        fcntl.lockf(_port_lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, port)
        return True
    except OSError:
        return False


def free_port():
    """A loopback TCP port nobody listens on, held for this test alone: not
    one of the last 512 this process handed out (two listeners of one
    config), nor one another running test holds."""
    for _ in range(1000):
        port = _rand.randrange(*PORT_RANGE)
        if port not in _recent_ports and port_is_free(port) and _lock_port(port):
            break
    else:
        raise TestFailure("no free port in %d-%d" % PORT_RANGE)
    _recent_ports.append(port)
    return port


def port_is_free(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def proc_children(pid):
    """[(pid, state, cmdline)] of pid's children, zombies included (scans
    /proc, works without procps)."""
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
        # pid (comm) state ppid ...; comm may contain spaces or parens.
        rest = stat[stat.rfind(")") + 2:].split()
        if len(rest) > 1 and int(rest[1]) == pid:
            out.append((int(d), rest[0], cmd))
    return sorted(out)


def children_of(pid):
    """PIDs whose parent is pid, zombies left out."""
    return [p for p, state, _ in proc_children(pid) if state != "Z"]


def zombies_of(pid):
    """Children of pid that exited and were not reaped."""
    return [p for p, state, _ in proc_children(pid) if state == "Z"]


def is_zygote(pid):
    """Does pid's process title say it is a pagid zygote (preload)?"""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().startswith(b"pagid: zygote")
    except OSError:
        return False


def pid_alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
        return stat[stat.rfind(")") + 2] != "Z"
    except OSError:
        return False


CRASH_PATTERNS = [
    r"crashed",
    r"AddressSanitizer",
    r"LeakSanitizer",
    r"UndefinedBehaviorSanitizer",
    r"runtime error:",
    r"Segmentation fault",
    r"SIGSEGV",
    r"SIGABRT",
    r"Assertion .* failed",
]


def root_user_args(args=()):
    """["-u", "root"] when the tests run as root and args choose no user.

    Started as root with no `user`, pagid runs its workers as nobody, who
    cannot read the tests' 0700 temp dirs (logs, static files, modules,
    Perl apps); every server of the suite keeps root that way, except in the
    tests of that very rule (Server(..., default_user=False))."""
    if os.geteuid() != 0 or "-u" in args or "--user" in args:
        return []
    return ["-u", "root"]


class Server:
    """One pagid process. Logs go to files in the test's temp dir."""

    def __init__(self, ctx, args, port, env=None, name="pagid", default_user=True):
        self.ctx = ctx
        self.port = port
        self.args = args
        self.name = name
        self.stdout_path = os.path.join(ctx.tmpdir, "%s.stdout" % name)
        self.stderr_path = os.path.join(ctx.tmpdir, "%s.stderr" % name)
        full_env = dict(os.environ)
        full_env["PAGID_TEST_LOG"] = ctx.app_log
        if env:
            full_env.update(env)
        self.out = open(self.stdout_path, "wb")
        self.err = open(self.stderr_path, "wb")
        self.argv = [ctx.pagid] + args + (root_user_args(args) if default_user else [])
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=self.out,
            stderr=self.err,
            env=full_env,
            cwd=ctx.tmpdir,
        )
        self.pid = self.proc.pid
        self.returncode = None
        self.stopped_by_kill = False
        self.allow_crash = False
        self.fd_baseline = None  # single-process servers: open fds once idle

    # -- state -------------------------------------------------------------
    def alive(self):
        return self.proc.poll() is None

    def stderr(self):
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def stdout(self):
        try:
            with open(self.stdout_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def crash_reports(self):
        text = self.stderr()
        return [
            line
            for line in text.splitlines()
            if any(re.search(p, line) for p in CRASH_PATTERNS)
        ]

    def wait_ready(self, timeout=10):
        """Wait until the port accepts connections (or the process dies)."""
        deadline = time.monotonic() + timeout * SLOW
        while time.monotonic() < deadline:
            if not self.alive():
                raise TestFailure(
                    "pagid exited with status %s before listening on %d"
                    % (self.proc.returncode, self.port)
                )
            try:
                s = socket.create_connection(("127.0.0.1", self.port), timeout=1)
                s.close()
                return self
            except OSError:
                time.sleep(0.02)
        raise TestFailure("pagid not listening on %d after %ss" % (self.port, timeout))

    def workers(self):
        """The master's worker processes: its children titled as such, so not
        the zygote, nor a child just forked that still has the master's
        title (it could be either), nor one exiting (its title is gone
        before it is a zombie, as a zygote's that found the app not
        preloadable)."""
        return [p for p, state, cmd in proc_children(self.pid)
                if state != "Z" and cmd.startswith("pagid: worker ")]

    def zygotes(self):
        """The master's zygote processes (preload: one per live generation)."""
        return [p for p, state, cmd in proc_children(self.pid)
                if state != "Z" and cmd.startswith("pagid: zygote")]

    def fd_count(self):
        try:
            return len(os.listdir("/proc/%d/fd" % self.pid))
        except OSError:
            return None

    # -- stopping ----------------------------------------------------------
    def signal(self, sig):
        if self.alive():
            os.kill(self.pid, sig)

    def wait_exit(self, timeout):
        try:
            self.returncode = self.proc.wait(timeout=timeout * SLOW)
            return True
        except subprocess.TimeoutExpired:
            return False

    def stop(self, timeout=10):
        """SIGTERM, then SIGKILL after timeout. Returns the exit status."""
        if self.returncode is None:
            if self.alive():
                self.signal(signal.SIGTERM)
                if not self.wait_exit(timeout):
                    self.stopped_by_kill = True
                    self.proc.kill()
                    self.returncode = self.proc.wait()
            else:
                self.returncode = self.proc.returncode
        for f in (self.out, self.err):
            if not f.closed:
                f.close()
        return self.returncode

    def kill_now(self):
        if self.alive():
            self.proc.kill()
        try:
            self.returncode = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


# ---------------------------------------------------------------------------
# Raw HTTP/1.x
# ---------------------------------------------------------------------------


class Response:
    def __init__(self):
        self.version = None
        self.status = None
        self.reason = None
        self.headers = []  # (lower-case name, value)
        self.body = b""
        self.chunked = False
        self.complete = False  # framing finished (not truncated)
        self.interim = []  # 1xx responses seen before this one

    def header(self, name, default=None):
        name = name.lower()
        for k, v in self.headers:
            if k == name:
                return v
        return default

    def header_all(self, name):
        name = name.lower()
        return [v for k, v in self.headers if k == name]

    def __repr__(self):
        return "<Response %s %s headers=%r body=%r%s>" % (
            self.status,
            self.reason,
            self.headers,
            self.body[:200],
            "" if self.complete else " INCOMPLETE",
        )


class Closed(Exception):
    pass


class Conn:
    """A client connection with its own read buffer."""

    def __init__(self, port, timeout=5, host="127.0.0.1", tls=None, server_hostname="localhost"):
        """tls: an ssl.SSLContext (TestPKI.client_context) to speak HTTPS."""
        self.sock = socket.create_connection((host, port), timeout=timeout * SLOW)
        self.sock.settimeout(timeout * SLOW)
        if tls is not None:
            self.sock = tls.wrap_socket(self.sock, server_hostname=server_hostname)
        self.buf = b""
        self.eof = False

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def reset(self):
        """Close with RST (SO_LINGER 0)."""
        import struct

        try:
            self.sock.setsockopt(
                socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
            )
        except OSError:
            pass
        self.close()

    def send(self, data):
        if isinstance(data, str):
            data = data.encode("latin-1")
        self.sock.sendall(data)

    def settimeout(self, t):
        self.sock.settimeout(t * SLOW)

    def _fill(self):
        if self.eof:
            raise Closed("connection closed by server")
        try:
            data = self.sock.recv(65536)
        except ConnectionResetError:
            self.eof = True
            raise Closed("connection reset by server")
        if not data:
            self.eof = True
            raise Closed("connection closed by server")
        self.buf += data

    def read_until(self, marker, limit=1 << 20):
        while marker not in self.buf:
            if len(self.buf) > limit:
                raise TestFailure("no %r within %d bytes" % (marker, limit))
            self._fill()
        i = self.buf.index(marker) + len(marker)
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    def read_exact(self, n):
        while len(self.buf) < n:
            self._fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_to_eof(self):
        while True:
            try:
                self._fill()
            except Closed:
                break
        out, self.buf = self.buf, b""
        return out

    def read_head(self):
        head = self.read_until(b"\r\n\r\n", limit=64 * 1024)
        lines = head[:-4].split(b"\r\n")
        m = re.match(rb"^HTTP/(\d\.\d) (\d{3})(?: (.*))?$", lines[0])
        if not m:
            raise TestFailure("bad status line %r" % lines[0])
        r = Response()
        r.version = m.group(1).decode()
        r.status = int(m.group(2))
        r.reason = (m.group(3) or b"").decode("latin-1")
        for line in lines[1:]:
            if b":" not in line:
                raise TestFailure("bad response header line %r" % line)
            k, v = line.split(b":", 1)
            r.headers.append((k.decode("latin-1").lower(), v.strip().decode("latin-1")))
        return r

    def read_response(self, method="GET", allow_truncated=False):
        """Read one response (skipping 1xx interim ones, kept in .interim)."""
        interim = []
        while True:
            r = self.read_head()
            if 100 <= r.status < 200 and r.status != 101:
                interim.append(r)
                continue
            break
        r.interim = interim
        if method == "HEAD" or r.status in (204, 304):
            r.complete = True
            return r
        te = r.header("transfer-encoding")
        cl = r.header("content-length")
        try:
            if te is not None:
                check("chunked" in te.lower(), "unexpected transfer-encoding %r" % te)
                r.chunked = True
                self._read_chunked(r)
            elif cl is not None:
                r.body = self.read_exact(int(cl))
                r.complete = True
            else:
                r.body = self.read_to_eof()
                r.complete = True
        except (Closed, socket.timeout) as e:
            if not allow_truncated:
                raise TestFailure("truncated response (%s): %r" % (e, r))
        return r

    def _read_chunked(self, r):
        body = b""
        while True:
            line = self.read_until(b"\r\n")
            size = int(line.split(b";")[0].strip(), 16)
            if size == 0:
                # trailers until an empty line
                while self.read_until(b"\r\n") != b"\r\n":
                    pass
                r.body = body
                r.complete = True
                return
            chunk = self.read_exact(size + 2)
            check(chunk.endswith(b"\r\n"), "chunk not followed by CRLF")
            body += chunk[:-2]
            r.body = body

    def expect_closed(self, timeout=3):
        """The server closes the connection within timeout (s); returns extra bytes."""
        self.settimeout(timeout)
        extra = self.buf
        self.buf = b""
        start = time.monotonic()
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    return extra
                extra += data
        except ConnectionResetError:
            return extra
        except socket.timeout:
            raise TestFailure(
                "connection still open %.1fs after the response (extra bytes %r)"
                % (time.monotonic() - start, extra[:200])
            )

    def is_open(self, wait=0.3):
        """True if the server has not closed the connection within wait seconds."""
        self.sock.settimeout(wait)
        try:
            data = self.sock.recv(65536, socket.MSG_PEEK)
            return bool(data)
        except socket.timeout:
            return True
        except OSError:
            return False
        finally:
            self.sock.settimeout(5 * SLOW)


def request(port, method="GET", path="/", headers=None, body=b"", version="1.1",
            timeout=5):
    """One request on a fresh connection with Connection: close."""
    c = Conn(port, timeout=timeout)
    try:
        h = {"Host": "127.0.0.1:%d" % port, "Connection": "close"}
        h.update(headers or {})
        if body and "Content-Length" not in h and "Transfer-Encoding" not in h:
            h["Content-Length"] = str(len(body))
        c.send(build_request(method, path, h, version) + body)
        return c.read_response(method)
    finally:
        c.close()


def build_request(method, path, headers, version="1.1"):
    head = "%s %s HTTP/%s\r\n" % (method, path, version)
    for k, v in headers.items():
        head += "%s: %s\r\n" % (k, v)
    return (head + "\r\n").encode("latin-1")


def get(port, path, test_id=None, extra=""):
    """A keep-alive-less GET request as bytes, tagged with x-test-id."""
    s = "GET %s HTTP/1.1\r\nHost: t\r\n" % path
    if test_id:
        s += "x-test-id: %s\r\n" % test_id
    return (s + extra + "\r\n").encode()


# ---------------------------------------------------------------------------
# Lifecycle app log
# ---------------------------------------------------------------------------


def app_events(ctx, test_id):
    """The lifecycle app's log lines for test_id, without the id."""
    try:
        with open(ctx.app_log, "rb") as f:
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return []
    prefix = test_id + " "
    return [ln[len(prefix):] for ln in lines if ln.startswith(prefix)]


def wait_event(ctx, test_id, event, timeout=5):
    """Wait until an event line starting with `event` is logged for test_id."""
    return wait_for(
        lambda: any(e.startswith(event) for e in app_events(ctx, test_id)), timeout
    )


def count_events(events, prefix):
    return sum(1 for e in events if e == prefix or e.startswith(prefix + " "))


class TestPKI:
    """A throwaway certificate authority made with the openssl CLI, in the
    test's temp dir: server and client certificates signed by it, and
    client-side ssl contexts that trust it."""

    def __init__(self, ctx, name="pki", ca_name="pagid test CA"):
        self.dir = os.path.join(ctx.tmpdir, name)
        os.makedirs(self.dir, exist_ok=True)
        self.ca_key = os.path.join(self.dir, "ca.key")
        self.ca_cert = os.path.join(self.dir, "ca.pem")
        self._serial = 1
        self.serials = {}  # name -> serial of the certificates issued
        self._openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                      "-nodes", "-keyout", self.ca_key, "-out", self.ca_cert, "-days", "30",
                      "-subj", "/CN=" + ca_name,
                      "-addext", "basicConstraints=critical,CA:TRUE",
                      "-addext", "keyUsage=critical,keyCertSign,cRLSign")

    def _openssl(self, *args):
        r = subprocess.run(("openssl",) + args, capture_output=True, timeout=30)
        if r.returncode != 0:
            raise TestFailure("openssl %s failed: %s" % (args[0], r.stderr.decode(errors="replace")))

    def issue(self, name, cn=None, sans=None, days=30, client=False, key_type="ec",
              start_offset_days=0):
        """A key and a certificate signed by this CA; returns (cert, key)
        paths. The certificate file holds the leaf only (the CA is the
        root). days may be negative with start_offset_days to make an
        expired certificate."""
        key = os.path.join(self.dir, name + ".key")
        csr = os.path.join(self.dir, name + ".csr")
        cert = os.path.join(self.dir, name + ".pem")
        ext = os.path.join(self.dir, name + ".ext")
        if key_type == "rsa":
            keyargs = ("-newkey", "rsa:2048")
        else:
            keyargs = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256")
        self._openssl("req", *keyargs, "-nodes", "-keyout", key, "-out", csr,
                      "-subj", "/CN=" + (cn or name))
        if sans is None and not client:
            sans = ["DNS:localhost", "IP:127.0.0.1"]
        with open(ext, "w") as f:
            f.write("basicConstraints=CA:FALSE\n")
            f.write("extendedKeyUsage=%s\n" % ("clientAuth" if client else "serverAuth"))
            if sans:
                f.write("subjectAltName=%s\n" % ",".join(sans))
        self._serial += 1
        self.serials[name] = self._serial
        args = ["x509", "-req", "-in", csr, "-CA", self.ca_cert, "-CAkey", self.ca_key,
                "-set_serial", str(self._serial), "-extfile", ext, "-out", cert]
        if start_offset_days:
            # openssl x509 cannot backdate; ca -startdate can, via a tiny config
            return self._issue_dated(csr, ext, cert, key, start_offset_days, days)
        args += ["-days", str(days)]
        self._openssl(*args)
        return cert, key

    def _issue_dated(self, csr, ext, cert, key, start_offset_days, days):
        import datetime

        now = datetime.datetime.now(datetime.timezone.utc)
        start = now + datetime.timedelta(days=start_offset_days)
        end = start + datetime.timedelta(days=days)
        fmt = "%Y%m%d%H%M%SZ"
        d = os.path.join(self.dir, "ca-db")
        os.makedirs(d, exist_ok=True)
        open(os.path.join(d, "index.txt"), "a").close()
        conf = os.path.join(d, "ca.cnf")
        with open(conf, "w") as f:
            f.write("[ca]\ndefault_ca=d\n[d]\ndatabase=%s/index.txt\nnew_certs_dir=%s\n"
                    "serial=%s/serial\ndefault_md=sha256\npolicy=p\nunique_subject=no\n"
                    "[p]\ncommonName=supplied\n" % (d, d, d))
        self._openssl("ca", "-batch", "-config", conf, "-cert", self.ca_cert, "-keyfile",
                      self.ca_key, "-in", csr, "-out", cert, "-extfile", ext,
                      "-startdate", start.strftime(fmt), "-enddate", end.strftime(fmt),
                      "-notext", "-create_serial")
        return cert, key

    def crl(self, revoked=(), name="crl.pem", next_update_days=7, last_update_days=0):
        """A CRL of this CA (PEM) revoking the certificates issued under the
        names in revoked; returns its path. Negative next_update_days (with
        last_update_days further back) make an expired one."""
        import datetime

        now = datetime.datetime.now(datetime.timezone.utc)
        fmt = "%Y%m%d%H%M%SZ"
        d = os.path.join(self.dir, "crl-db")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "index.txt"), "w") as f:
            for n in revoked:
                f.write("R\t%s\t%s\t%02X\tunknown\t/CN=%s\n"
                        % ((now + datetime.timedelta(days=30)).strftime("%y%m%d%H%M%SZ"),
                           (now - datetime.timedelta(hours=1)).strftime("%y%m%d%H%M%SZ"),
                           self.serials[n], n))
        conf = os.path.join(d, "ca.cnf")
        with open(conf, "w") as f:
            f.write("[ca]\ndefault_ca=d\n[d]\ndatabase=%s/index.txt\ndefault_md=sha256\n" % d)
        out = os.path.join(self.dir, name)
        last = now + datetime.timedelta(days=last_update_days)
        self._openssl("ca", "-batch", "-gencrl", "-config", conf, "-cert", self.ca_cert,
                      "-keyfile", self.ca_key, "-out", out,
                      "-crl_lastupdate", last.strftime(fmt),
                      "-crl_nextupdate", (now + datetime.timedelta(days=next_update_days)).strftime(fmt))
        return out

    def ocsp(self, name, revoked=False, out=None, days=7, signer=None):
        """A DER OCSP response of this CA (as responder; or signed by signer,
        a (cert, key) pair) on the certificate issued under name: good, or
        revoked; returns its path."""
        import datetime

        d = os.path.join(self.dir, "ocsp-db")
        os.makedirs(d, exist_ok=True)
        now = datetime.datetime.now(datetime.timezone.utc)
        expiry = (now + datetime.timedelta(days=30)).strftime("%y%m%d%H%M%SZ")
        revdate = (now - datetime.timedelta(hours=1)).strftime("%y%m%d%H%M%SZ")
        index = os.path.join(d, "index-%s.txt" % name)
        with open(index, "w") as f:
            f.write("%s\t%s\t%s\t%02X\tunknown\t/CN=%s\n"
                    % ("R" if revoked else "V", expiry, revdate if revoked else "",
                       self.serials[name], name))
        req = os.path.join(d, name + ".req")
        out = out or os.path.join(self.dir, name + ".ocsp")
        cert = os.path.join(self.dir, name + ".pem")
        self._openssl("ocsp", "-issuer", self.ca_cert, "-cert", cert, "-no_nonce", "-reqout", req)
        rsigner, rkey = signer or (self.ca_cert, self.ca_key)
        self._openssl("ocsp", "-index", index, "-rsigner", rsigner, "-rkey", rkey,
                      "-CA", self.ca_cert, "-reqin", req, "-respout", out, "-ndays", str(days))
        return out

    def client_context(self, cert=None, key=None, alpn=None):
        """An ssl.SSLContext trusting this CA, presenting cert/key if given."""
        import ssl

        c = ssl.create_default_context(cafile=self.ca_cert)
        if cert:
            c.load_cert_chain(cert, key)
        if alpn:
            c.set_alpn_protocols(alpn)
        return c


def tls_listen(port, cert, key, extra="", host="127.0.0.1"):
    """A YAML listen entry (list item) for a TLS listener; extra adds keys
    under tls: (indented lines, e.g. "      client_auth: {ca: F}\n")."""
    return ("  - address: %s:%d\n    tls:\n      cert: %s\n      key: %s\n%s"
            % (host, port, cert, key, extra))


def app_so(ctx, name):
    """apps/NAME.c compiled into NAME.so in the session's temp dir, once per
    session: the runner's concurrent test processes share it (the first
    builds it under a lock file, the others wait and take it). A failed
    build fails every test that wants it, with the compiler's output."""
    session = os.path.dirname(ctx.tmpdir)
    out = os.path.join(session, name + ".so")
    status = out + ".status"
    with open(out + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(status):
            cmd = [os.environ.get("CC", "cc"), "-std=c11", "-Wall", "-Wextra", "-Werror",
                   "-shared", "-fPIC", "-I", os.path.join(REPO, "include"), "-o", out,
                   os.path.join(HERE, "apps", name + ".c")]
            try:
                p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   timeout=120)
                ok, text = p.returncode == 0, p.stdout.decode("utf-8", "replace")
            except (OSError, subprocess.TimeoutExpired) as e:
                ok, text = False, str(e)
            with open(status + ".tmp", "w") as f:
                f.write(("ok\n" if ok else "failed\n") + " ".join(cmd) + "\n" + text)
            os.rename(status + ".tmp", status)
        with open(status) as f:
            result = f.read()
    if not result.startswith("ok\n"):
        raise TestFailure("tests/integration/apps/%s.c does not build:\n%s"
                          % (name, result.split("\n", 1)[1]))
    return out


def write_config(ctx, text, name="pagid.yaml"):
    path = os.path.join(ctx.tmpdir, name)
    with open(path, "w") as f:
        f.write(text)
    return path
