#!/usr/bin/env python3
"""The system test: pagid's Debian package the way operators run it.

Builds the .deb from this tree, boots Debian 12 with a real systemd as PID 1
(systemd-nspawn on the debootstrapped tree of tests/system/rootfs.sh, a
fresh copy each run, private network), installs the package with apt and
drives it with systemctl, journalctl, logrotate, dpkg and real HTTP clients.
Each check prints "ok - NAME" or "FAIL - NAME: why"; the run ends with
"system: N passed, M failed" and exits non-zero on a failure.

    tests/system/run.py [--keep] [--debs DIR]
    tests/system/run.py --build-debs DIR

--debs DIR tests the .debs in DIR instead of building them; --build-debs DIR
only builds them (from this work tree, as the test does) into DIR and exits:
dev.sh builds them once so, for this test and tests/integration's packaging
test (PAGID_DEBS=DIR).

Needs root, systemd-nspawn (systemd-container), debootstrap and the Debian
build tools; dev.sh installs them. Bounded: every guest command has a
timeout and the whole run a deadline (PAGID_SYSTEM_DEADLINE, 20 min).
"""

import argparse
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DEADLINE = time.monotonic() + float(os.environ.get("PAGID_SYSTEM_DEADLINE", 1200))
GUEST_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
             "LANG": "C.UTF-8", "DEBIAN_FRONTEND": "noninteractive", "SYSTEMD_PAGER": "",
             "SYSTEMD_COLORS": "0"}

passed = 0
failed = 0


def log(msg):
    print(msg, flush=True)


def check(name, cond, why=""):
    global passed, failed
    if cond:
        passed += 1
        log("ok - " + name)
    else:
        failed += 1
        log("FAIL - %s%s" % (name, ": " + why if why else ""))
    return cond


def remaining(cap):
    left = DEADLINE - time.monotonic()
    if left <= 0:
        raise TimeoutError("the system test ran past its deadline")
    return min(cap, left)


# ------------------------------------------------------------------ build

def build_debs(out):
    """dpkg-buildpackage -b on a copy of the work tree (tracked and new files)."""
    src = os.path.join(out, "pagid")
    files = subprocess.run(["git", "-C", REPO, "ls-files", "-co", "--exclude-standard", "-z"],
                           capture_output=True, check=True, timeout=60).stdout.split(b"\0")
    for f in filter(None, (x.decode() for x in files)):
        s = os.path.join(REPO, f)
        if os.path.isfile(s) and not os.path.islink(s):
            os.makedirs(os.path.dirname(os.path.join(src, f)), exist_ok=True)
            shutil.copy2(s, os.path.join(src, f))
    shutil.copytree(os.path.join(src, "packaging", "debian"), os.path.join(src, "debian"))
    env = dict(os.environ, DEB_BUILD_OPTIONS="nocheck parallel=%d" % (os.cpu_count() or 2))
    p = subprocess.run(["dpkg-buildpackage", "-us", "-uc", "-b"], cwd=src, env=env,
                       capture_output=True, text=True, timeout=remaining(600))
    if p.returncode:
        log("\n".join((p.stdout + p.stderr).splitlines()[-40:]))
        raise RuntimeError("dpkg-buildpackage failed (%d)" % p.returncode)
    return sorted(glob.glob(os.path.join(out, "*.deb")))


def build_only(dest):
    """--build-debs DIR: the .debs of this tree into DIR; 0 when built."""
    work = tempfile.mkdtemp(prefix="pagid-debs-", dir="/var/tmp")
    t0 = time.monotonic()
    try:
        debs = build_debs(os.path.join(work, "build"))
        os.makedirs(dest, exist_ok=True)
        for d in glob.glob(os.path.join(dest, "*.deb")):
            os.unlink(d)
        for d in debs:
            shutil.move(d, dest)
        log("debs: built %s into %s in %.0fs" % (
            " ".join(os.path.basename(d) for d in debs), dest, time.monotonic() - t0))
        return 0 if debs else 1
    except Exception as e:  # noqa: BLE001 - one line, and a non-zero exit
        log("debs: not built: %s: %s" % (type(e).__name__, e))
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


UPGRADE_SUFFIX = "+systest1"
UPGRADE_VERSION = "?"


def repack_version(deb, out):
    """The same package with its version raised (VERSION+systest1): the
    upgrade a package manager sees, without building twice."""
    global UPGRADE_VERSION
    tree = os.path.join(out, "tree")
    os.makedirs(out)
    subprocess.run(["dpkg-deb", "-R", deb, tree], check=True, timeout=60)
    ctl = os.path.join(tree, "DEBIAN", "control")
    with open(ctl) as f:
        text = f.read()
    m = re.search(r"^Version: (\S+)$", text, re.M)
    UPGRADE_VERSION = m[1] + UPGRADE_SUFFIX
    with open(ctl, "w") as f:
        f.write(text.replace(m[0], "Version: " + UPGRADE_VERSION))
    new = os.path.join(out, "pagid_%s.deb" % UPGRADE_VERSION)
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", tree, new], check=True,
                   capture_output=True, timeout=120)
    shutil.rmtree(tree)
    return new


def deb_depends(deb):
    """The package names of a .deb's Depends (first of each alternative)."""
    dep = subprocess.run(["dpkg-deb", "-f", deb, "Depends"], capture_output=True, text=True,
                         check=True, timeout=30).stdout
    names = []
    for part in dep.split(","):
        name = part.split("|")[0].strip().split(" ")[0].split(":")[0]
        if name:
            names.append(name)
    return names


# ------------------------------------------------------------------ guest

class Guest:
    """A Debian 12 tree booted with systemd-nspawn; commands run in it by nsenter."""

    def __init__(self, tree):
        self.tree = tree
        self.name = "pagidtest%d" % os.getpid()
        self.proc = None
        self.pid1 = None
        self.console = None

    def boot(self):
        self.console = open(os.path.join(os.path.dirname(self.tree), "console.log"), "w")
        self.proc = subprocess.Popen(
            ["systemd-nspawn", "--quiet", "-D", self.tree, "--boot", "-M", self.name,
             "--private-network", "--register=no", "--keep-unit", "--console=pipe"],
            stdin=subprocess.DEVNULL, stdout=self.console, stderr=subprocess.STDOUT,
            start_new_session=True)
        end = time.monotonic() + remaining(120)
        while time.monotonic() < end and self.proc.poll() is None:
            kids = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True,
                                  text=True).stdout.split()
            for k in kids:
                try:
                    with open("/proc/%s/comm" % k) as f:
                        if f.read().strip() == "systemd":
                            self.pid1 = int(k)
                except OSError:
                    pass
            if self.pid1:
                r = self.sh("systemctl is-system-running --wait", timeout=60, quiet=True)
                if r.stdout.strip() in ("running", "degraded"):
                    return True
            time.sleep(0.2)
        return False

    def sh(self, cmd, timeout=60, quiet=False, check_rc=False):
        """Run cmd with /bin/sh in the guest; a CompletedProcess (rc 124 on timeout)."""
        argv = ["nsenter", "-t", str(self.pid1), "-a", "--", "/bin/sh", "-c", cmd]
        try:
            r = subprocess.run(argv, capture_output=True, text=True, env=GUEST_ENV,
                               timeout=remaining(timeout), stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as e:
            r = subprocess.CompletedProcess(argv, 124, e.stdout or "", e.stderr or "")
            if isinstance(r.stdout, bytes):
                r.stdout, r.stderr = r.stdout.decode(errors="replace"), r.stderr.decode(
                    errors="replace")
        if not quiet:
            log("  $ %s  [rc %d]" % (cmd if len(cmd) < 160 else cmd[:157] + "...", r.returncode))
        if check_rc and r.returncode:
            raise RuntimeError("guest command failed (%d): %s\n%s%s" % (
                r.returncode, cmd, r.stdout[-2000:], r.stderr[-2000:]))
        return r

    def out(self, cmd, timeout=60):
        return self.sh(cmd, timeout=timeout, quiet=True).stdout.strip()

    def put(self, path, data, mode=0o644):
        full = os.path.join(self.tree, path.lstrip("/"))
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb" if isinstance(data, bytes) else "w") as f:
            f.write(data)
        os.chmod(full, mode)

    def poweroff(self, timeout=60):
        """systemctl poweroff; seconds until nspawn exited, or None."""
        t0 = time.monotonic()
        self.sh("systemctl poweroff --no-block", timeout=20, quiet=True)
        try:
            self.proc.wait(timeout=timeout)
            return time.monotonic() - t0
        except subprocess.TimeoutExpired:
            return None

    def kill(self):
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        if self.console:
            self.console.close()


def ensure_nspawn_runtime_dir():
    """nspawn keeps a propagation directory under /run/systemd/nspawn and will
    only remove it from a tmpfs; on a host without systemd /run may be a disk.
    Returns the mount point to unmount afterwards, or None."""
    d = "/run/systemd/nspawn"
    os.makedirs(d, exist_ok=True)
    fs = subprocess.run(["stat", "-f", "-c", "%T", d], capture_output=True, text=True).stdout
    if fs.strip() in ("tmpfs", "ramfs"):
        return None
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", d], check=True)
    return d


# ------------------------------------------------------------------ helpers

def http_code(g, url, extra=""):
    return g.out("curl -s -o /dev/null --max-time 10 -w '%%{http_code}' %s '%s'" % (extra, url))



def make_tls_files(d):
    """A throwaway CA and two certificates for 127.0.0.1 (different serials),
    made on the host with the openssl CLI; {name: path}."""
    def run(*args):
        subprocess.run(("openssl",) + args, check=True, capture_output=True, timeout=60)
    files = {"ca": os.path.join(d, "ca.pem"), "ca_key": os.path.join(d, "ca.key")}
    run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", files["ca_key"], "-out", files["ca"], "-days", "7", "-subj", "/CN=system CA")
    ext = os.path.join(d, "leaf.ext")
    with open(ext, "w") as f:
        f.write("basicConstraints=CA:FALSE\nsubjectAltName=IP:127.0.0.1\n")
    for n, serial in (("one", "4097"), ("two", "4098")):
        key, csr, cert = (os.path.join(d, n + s) for s in (".key", ".csr", ".pem"))
        run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", key, "-out", csr, "-subj", "/CN=127.0.0.1")
        run("x509", "-req", "-in", csr, "-CA", files["ca"], "-CAkey", files["ca_key"],
            "-set_serial", serial, "-extfile", ext, "-days", "7", "-out", cert)
        files[n] = (cert, key)
    return files


def served_serial(g):
    """The serial (hex, as curl's %{certs} prints it) of the certificate the
    TLS listener serves to a new connection, or ''."""
    text = g.out("curl -s -o /dev/null --max-time 10 --cacert /etc/pagid/tls/ca.pem "
                 "-w '%{certs}' https://127.0.0.1:8443/")
    for line in text.splitlines():
        if line.startswith("Serial Number:"):
            return line.split(":", 1)[1].strip().lower()
    return ""


def tls_system_checks(g):
    with tempfile.TemporaryDirectory() as d:
        f = make_tls_files(d)
        pem = {}
        for name in ("ca", "one", "two"):
            paths = (f[name],) if name == "ca" else f[name]
            pem[name] = []
            for path in paths:
                with open(path) as fh:
                    pem[name].append(fh.read())

    def put_pair(name):
        g.put("/etc/pagid/tls/server.pem", pem[name][0], 0o644)
        g.put("/etc/pagid/tls/server.key", pem[name][1], 0o600)  # root's alone

    g.put("/etc/pagid/tls/ca.pem", pem["ca"][0], 0o644)
    put_pair("one")
    g.put("/etc/pagid/conf.d/tls.yaml",
          "listen:\n  - address: 127.0.0.1:8443\n    tls:\n"
          "      cert: /etc/pagid/tls/server.pem\n      key: /etc/pagid/tls/server.key\n", 0o640)
    r = g.sh("pagid -t -c /etc/pagid/pagid.yaml", timeout=60)
    check("pagid -t accepts the TLS listener", r.returncode == 0, r.stdout + r.stderr)
    r = g.sh("systemctl reload pagid.service", timeout=60)
    ok = r.returncode == 0 and wait_until(
        lambda: http_code(g, "https://127.0.0.1:8443/", "--cacert /etc/pagid/tls/ca.pem") == "200",
        10)
    check("https: a reload adds the TLS listener; the root-only key works with user pagid",
          ok, r.stderr + g.out("journalctl -u pagid -n 20 --no-pager"))
    first = served_serial(g)
    check("https: the first certificate is served", first in ("1001", "10:01"), repr(first))
    put_pair("two")
    r = g.sh("systemctl reload pagid.service", timeout=60)
    check("https: systemctl reload serves the renewed certificate",
          r.returncode == 0 and wait_until(lambda: served_serial(g) in ("1002", "10:02"), 10),
          r.stderr + served_serial(g))
    # (the files go too: an operator's files left in /etc/pagid would keep
    # purge from removing it)
    g.sh("rm -r /etc/pagid/conf.d/tls.yaml /etc/pagid/tls && systemctl reload pagid.service",
         timeout=60)
    check("https: removing the drop-in closes the TLS listener",
          wait_until(lambda: http_code(g, "https://127.0.0.1:8443/", "-k") == "000", 10))


def main_pid(g):
    return int(g.out("systemctl show -p MainPID --value pagid.service") or 0)


def children(g, pid):
    """The master's workers (its children but a preloading zygote, titled
    'pagid: zygote', and one just forked and not titled yet)."""
    return [int(x) for x in g.out("pgrep -P %d -f '^pagid: worker '" % pid).split()] if pid else []


def wait_until(pred, timeout, step=0.2):
    end = time.monotonic() + remaining(timeout)
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(step)
    return pred()


def journal_since(g, cursor, unit="pagid.service"):
    """The unit's journal entries after cursor, as dicts."""
    after = " --after-cursor='%s'" % cursor if cursor else ""
    r = g.sh("journalctl -q -u %s -o json%s" % (unit, after), quiet=True)
    out = []
    for line in r.stdout.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def cursor(g):
    r = g.out("journalctl -q -n 1 -o json")
    try:
        return json.loads(r.splitlines()[-1])["__CURSOR"]
    except (ValueError, IndexError, KeyError):
        return ""


def messages(entries):
    return [str(e.get("MESSAGE", "")) for e in entries]


def start_load(g, name, path="/", threads=4, seconds=60):
    g.sh("rm -f /tmp/%s.stop /tmp/%s.json; (python3 /root/load.py 127.0.0.1 8080 %s %d %d "
         "/tmp/%s.stop > /tmp/%s.json 2>&1 &)" % (name, name, path, threads, seconds, name, name),
         quiet=True)


def stop_load(g, name):
    g.sh("touch /tmp/%s.stop" % name, quiet=True)
    txt = wait_until(lambda: g.out("cat /tmp/%s.json" % name), 30)
    try:
        return json.loads(txt.splitlines()[-1])
    except (ValueError, IndexError):
        return {"ok": 0, "failed": -1, "failures": [txt[-300:]]}


def no_forced_kill(entries):
    bad = [m for m in messages(entries) if re.search(
        r"SIGKILL|did not die|Killing process|timed out|Watchdog timeout|watchdog", m)]
    return not bad, bad[:5]


# ------------------------------------------------------------------ the checks

def run_checks(g, debs):
    names = " ".join("/root/debs/" + os.path.basename(d) for d in debs
                     if os.path.basename(d).startswith("pagid_"))
    nproc = min(int(g.out("getconf _NPROCESSORS_ONLN") or 1), 64)  # what workers: auto uses

    # --- install: service started, the socket unit shipped but left alone
    t0 = time.monotonic()
    r = g.sh("apt-get install -y -q %s 2>&1" % names, timeout=300)
    out = r.stdout + r.stderr
    check("apt install succeeds", r.returncode == 0, out[-1500:])
    check("apt install prints no systemctl failure",
          not re.search(r"Could not execute systemctl|Failed to|refusing", out), out[-1500:])
    log("  install took %.1fs" % (time.monotonic() - t0))
    check("pagid.service active after install",
          wait_until(lambda: g.out("systemctl is-active pagid.service") == "active", 15),
          g.out("systemctl status pagid.service --no-pager -l | tail -20"))
    check("pagid.socket shipped, not enabled, not failed",
          g.out("systemctl is-enabled pagid.socket") == "disabled"
          and g.out("systemctl is-active pagid.socket") == "inactive",
          g.out("systemctl status pagid.socket --no-pager | tail -5"))
    check("no failed units", "pagid" not in g.out("systemctl --failed --no-legend"),
          g.out("systemctl --failed --no-legend"))
    check("GET / on the packaged config answers 200", http_code(g, "http://127.0.0.1:8080/") == "200")
    mp = main_pid(g)
    users = g.out("ps -o user= --ppid %d" % mp).split()
    check("master root, %d workers as pagid (workers: auto)" % nproc,
          g.out("ps -o user= -p %d" % mp) == "root" and users == ["pagid"] * nproc, repr(users))
    check("/etc/pagid/pagid.yaml is 0640 root:pagid",
          g.out("stat -c '%a %U %G' /etc/pagid/pagid.yaml") == "640 root pagid",
          g.out("stat -c '%a %U %G' /etc/pagid/pagid.yaml"))
    check("the packaged binary has the Perl host", "perl" in g.out("pagid -V 2>&1"),
          g.out("pagid -V 2>&1"))

    # --- journal: levels become priorities, no raw <N> prefixes
    entries = journal_since(g, "")
    prios = {str(e.get("PRIORITY")) for e in entries if "pagid" in str(e.get("SYSLOG_IDENTIFIER", ""))}
    raw = [m for m in messages(entries) if re.match(r"<\d>", m)]
    check("journal: pagid's lines carry priorities, info as 6",
          "6" in prios and not raw, "prios %r, raw %r" % (prios, raw[:3]))
    sec = g.out("systemd-analyze security pagid.service --no-pager 2>&1")
    score = re.search(r"Overall exposure level for pagid.service: ([0-9.]+)", sec)
    check("systemd-analyze security: exposure %s <= 2.5" % (score[1] if score else "?"),
          score is not None and float(score[1]) <= 2.5, sec[-300:])

    # --- the test config: Perl app under /p, unix socket for www-data
    with open(os.path.join(HERE, "guest", "pagid.yaml")) as f:
        g.put("/etc/pagid/pagid.yaml", f.read(), 0o640)
    g.sh("chgrp pagid /etc/pagid/pagid.yaml", quiet=True)
    with open(os.path.join(HERE, "guest", "app.pl")) as f:
        g.put("/etc/pagid/app.pl", f.read(), 0o644)
    t0 = time.monotonic()
    r = g.sh("systemctl restart pagid.service", timeout=60)
    check("restart onto the test config", r.returncode == 0 and main_pid(g) != mp,
          r.stderr + g.out("journalctl -u pagid -n 20 --no-pager"))
    log("  restart took %.1fs" % (time.monotonic() - t0))
    body = g.out("curl -s --max-time 10 http://127.0.0.1:8080/p/hello")
    check("a Perl app served by the packaged binary", body.startswith("perl "), body)
    check("unix socket owned by www-data, mode 0660",
          g.out("stat -c '%U %G %a' /run/pagid/pagid.sock") == "www-data www-data 660",
          g.out("stat -c '%U %G %a' /run/pagid/pagid.sock 2>&1"))
    check("the unix socket answers",
          http_code(g, "http://localhost/", "--unix-socket /run/pagid/pagid.sock") == "200")

    # --- reload with a changed worker count under load
    mp = main_pid(g)
    old = children(g, mp)
    start_load(g, "reload")
    time.sleep(1.5)
    g.sh("sed -i 's/^workers: 2$/workers: 3/' /etc/pagid/pagid.yaml", quiet=True)
    c = cursor(g)
    t0 = time.monotonic()
    r = g.sh("systemctl reload pagid.service", timeout=60)
    check("systemctl reload succeeds", r.returncode == 0, r.stderr)

    def reloaded():
        kids = children(g, mp)
        return len(kids) == 3 and not set(kids) & set(old)
    check("reload: 3 new workers, the 2 old ones gone", wait_until(reloaded, 20),
          "old %r now %r" % (old, children(g, mp)))
    log("  reload to 3 workers took %.1fs" % (time.monotonic() - t0))
    time.sleep(1)
    res = stop_load(g, "reload")
    check("reload under load: 0 failed requests (%d ok)" % res["ok"],
          res["failed"] == 0 and res["ok"] > 50, repr(res))
    check("reload: same master, still active",
          main_pid(g) == mp and g.out("systemctl is-active pagid") == "active")
    ok, bad = no_forced_kill(journal_since(g, c))
    check("reload: nothing killed", ok, repr(bad))

    g.sh("cp /etc/pagid/pagid.yaml /root/good.yaml; printf 'workers: [\\n' >> /etc/pagid/pagid.yaml",
         quiet=True)
    r = g.sh("systemctl reload pagid.service", timeout=60)
    check("reload of a broken config fails and keeps serving",
          r.returncode != 0 and main_pid(g) == mp and len(children(g, mp)) == 3
          and http_code(g, "http://127.0.0.1:8080/") == "200", r.stderr)
    g.sh("cp /root/good.yaml /etc/pagid/pagid.yaml", quiet=True)

    # --- a drop-in in /etc/pagid/conf.d, picked up by a reload
    g.put("/etc/pagid/conf.d/extra.yaml", "listen:\n  - 127.0.0.1:8081\n", 0o640)
    r = g.sh("systemctl reload pagid.service", timeout=60)
    check("conf.d drop-in: a reload adds its listener",
          r.returncode == 0 and wait_until(
              lambda: http_code(g, "http://127.0.0.1:8081/") == "200", 10), r.stderr)
    g.sh("rm /etc/pagid/conf.d/extra.yaml && systemctl reload pagid.service", timeout=60)
    check("conf.d drop-in removed: its listener closes",
          wait_until(lambda: http_code(g, "http://127.0.0.1:8081/") == "000", 10))

    # --- HTTPS: a root-only key read by the master (workers run as pagid),
    # a renewed certificate picked up by systemctl reload
    tls_system_checks(g)

    # --- logrotate: the workers write to the new file
    for i in range(5):
        http_code(g, "http://127.0.0.1:8080/before-rotate-%d" % i)
    r = g.sh("logrotate -f /etc/logrotate.d/pagid 2>&1", timeout=60)
    check("logrotate runs clean", r.returncode == 0 and "error" not in r.stdout.lower(), r.stdout)
    time.sleep(0.5)
    for i in range(10):
        http_code(g, "http://127.0.0.1:8080/after-rotate-%d" % i)
    n_new = wait_until(lambda: g.out("grep -c after-rotate /var/log/pagid/access.log") == "10", 5)
    check("after logrotate: 10/10 new lines in the new access.log", n_new,
          g.out("grep -c after-rotate /var/log/pagid/access.log; ls -l /var/log/pagid"))
    check("after logrotate: the rotated file holds the old lines only",
          g.out("grep -c before-rotate /var/log/pagid/access.log.1") == "5"
          and g.out("grep -c after-rotate /var/log/pagid/access.log.1") == "0",
          g.out("ls -l /var/log/pagid"))

    # --- reinstalling the same version re-executes nothing
    mp = main_pid(g)
    inv = g.out("systemctl show -p InvocationID --value pagid")
    r = g.sh("apt-get install -y -q --reinstall -o Dpkg::Options::=--force-confold %s 2>&1" % names,
             timeout=300)
    check("reinstall of the same version: same master, no upgrade",
          r.returncode == 0 and main_pid(g) == mp and "handing" not in r.stdout
          and g.out("systemctl show -p InvocationID --value pagid") == inv, r.stdout[-800:])

    # --- package upgrade: the hot upgrade (SIGUSR2), not a restart
    start_load(g, "upgrade")
    time.sleep(1.5)
    t0 = time.monotonic()
    r = g.sh("apt-get install -y -q -o Dpkg::Options::=--force-confold /root/debs/upgrade/*.deb "
             "2>&1", timeout=300)
    check("package upgrade to %s succeeds" % UPGRADE_VERSION, r.returncode == 0, r.stdout[-1500:])
    new = main_pid(g)
    check("package upgrade: a new master took over (hot upgrade)",
          "new master" in r.stdout and new not in (0, mp)
          and g.out("systemctl is-active pagid") == "active", r.stdout[-800:])
    check("package upgrade: the old master is gone",
          wait_until(lambda: g.sh("kill -0 %d" % mp, quiet=True).returncode != 0, 20))
    log("  upgrade took %.1fs" % (time.monotonic() - t0))
    time.sleep(1)
    res = stop_load(g, "upgrade")
    check("package upgrade under load: 0 failed requests (%d ok)" % res["ok"],
          res["failed"] == 0 and res["ok"] > 50, repr(res))
    check("package upgrade: the service was not restarted (same invocation)",
          g.out("systemctl show -p InvocationID --value pagid") == inv)

    # --- a master started under an older unit (no CAP_KILL) is restarted
    g.put("/etc/systemd/system/pagid.service.d/old-unit.conf",
          "# the system test: the unit of pagid 0.1.0-1, which lacked CAP_KILL\n"
          "[Service]\nCapabilityBoundingSet=\n"
          "CapabilityBoundingSet=CAP_NET_BIND_SERVICE CAP_SETUID CAP_SETGID CAP_CHOWN\n"
          "TimeoutStopSec=8s\n")
    g.sh("systemctl daemon-reload && systemctl restart pagid", timeout=60)
    inv = g.out("systemctl show -p InvocationID --value pagid")
    r = g.sh("apt-get install -y -q --allow-downgrades -o Dpkg::Options::=--force-confold %s 2>&1"
             % names, timeout=300)
    check("upgrade under an older unit: restarted, not re-executed",
          r.returncode == 0 and "lacks CAP_KILL" in r.stdout
          and g.out("systemctl show -p InvocationID --value pagid") not in ("", inv)
          and g.out("systemctl is-active pagid") == "active", r.stdout[-800:])
    g.sh("rm -r /etc/systemd/system/pagid.service.d && systemctl daemon-reload "
         "&& systemctl restart pagid", timeout=60, quiet=True)

    # --- a stuck worker: the master replaces it, the watchdog stays quiet
    g.put("/etc/systemd/system/pagid.service.d/watchdog.conf",
          "# the system test: a watchdog shorter than timeouts.heartbeat (10s), so\n"
          "# a master that stopped pinging while a worker is stuck would trip it\n"
          "[Service]\nWatchdogSec=4s\n")
    g.sh("systemctl daemon-reload && systemctl restart pagid", timeout=60)
    mp = main_pid(g)
    kids = children(g, mp)
    c = cursor(g)
    t0 = time.monotonic()
    g.sh("(curl -s --max-time 30 http://127.0.0.1:8080/p/block >/dev/null 2>&1 &)", quiet=True)
    time.sleep(1)

    def replaced():
        now = children(g, mp)
        return len(now) == len(kids) and set(now) != set(kids)
    check("stuck worker replaced by the master", wait_until(replaced, 25),
          "before %r now %r" % (kids, children(g, mp)))
    log("  stuck worker replaced after %.1fs" % (time.monotonic() - t0))
    time.sleep(max(0.0, 14 - (time.monotonic() - t0)))  # past heartbeat + WatchdogSec
    entries = journal_since(g, c)
    wd = [m for m in messages(entries) if "atchdog" in m]
    check("stuck worker: systemd's watchdog did not fire",
          not wd and main_pid(g) == mp and g.out("systemctl is-active pagid") == "active",
          repr(wd))
    blocked = [e for e in entries if "block" in str(e.get("MESSAGE", ""))]
    check("stuck worker: the master says so, as a warning or error",
          blocked and all(str(e.get("PRIORITY")) in ("3", "4") for e in blocked),
          repr([(e.get("PRIORITY"), e.get("MESSAGE")) for e in blocked][:3]))
    g.sh("rm -r /etc/systemd/system/pagid.service.d && systemctl daemon-reload", quiet=True)
    check("serving after the stuck worker", http_code(g, "http://127.0.0.1:8080/") == "200")

    # --- stop: the master drains an in-flight request, nothing is killed
    g.sh("systemctl restart pagid", timeout=60, quiet=True)
    g.sh("rm -f /tmp/slow.out; (curl -s --max-time 20 'http://127.0.0.1:8080/p/slow?ms=3000' "
         "> /tmp/slow.out 2>&1 &)", quiet=True)
    time.sleep(0.7)
    c = cursor(g)
    t0 = time.monotonic()
    r = g.sh("systemctl stop pagid", timeout=60)
    took = time.monotonic() - t0
    log("  stop took %.1fs" % took)
    check("stop: within timeouts.shutdown (10s)", r.returncode == 0 and took < 10, "%.1fs" % took)
    check("stop: the in-flight request finished",
          wait_until(lambda: "slow done" in g.out("cat /tmp/slow.out"), 5),
          g.out("cat /tmp/slow.out"))
    ok, bad = no_forced_kill(journal_since(g, c))
    check("stop: no SIGKILL, nothing timed out", ok, repr(bad))
    check("stop: no pagid process left", g.out("pgrep -x pagid") == "", g.out("ps -ef | grep pagi[d]"))

    # --- restart
    g.sh("systemctl start pagid", timeout=60, quiet=True)
    mp = main_pid(g)
    t0 = time.monotonic()
    r = g.sh("systemctl restart pagid", timeout=60)
    took = time.monotonic() - t0
    log("  restart took %.1fs" % took)
    check("restart: quick, new master, serving",
          r.returncode == 0 and took < 10 and main_pid(g) not in (0, mp)
          and http_code(g, "http://127.0.0.1:8080/") == "200", "%.1fs" % took)

    # --- socket activation through pagid.socket
    g.sh("systemctl stop pagid.service && systemctl start pagid.socket", timeout=60)
    check("pagid.socket listening, service inactive",
          g.out("systemctl is-active pagid.socket") == "active"
          and g.out("systemctl is-active pagid.service") == "inactive")
    c = cursor(g)
    check("socket activation: the first request is served",
          http_code(g, "http://127.0.0.1:8080/") == "200")
    check("socket activation: pagid.service started on the passed socket",
          wait_until(lambda: g.out("systemctl is-active pagid.service") == "active", 15)
          and any("socket activation" in m for m in messages(journal_since(g, c))),
          repr(messages(journal_since(g, c))[:8]))
    g.sh("systemctl stop pagid.socket pagid.service", timeout=60)
    g.sh("systemctl start pagid.service", timeout=60, quiet=True)

    # --- purge: nothing left running, nothing left behind
    g.sh("rm -f /etc/pagid/app.pl", quiet=True)  # the test's own file
    t0 = time.monotonic()
    r = g.sh("apt-get purge -y -q pagid 2>&1", timeout=120)
    took = time.monotonic() - t0
    log("  purge took %.1fs" % took)
    check("purge: succeeds within 15s", r.returncode == 0 and took < 15, r.stdout[-800:])
    check("purge: no pagid process, no files left",
          g.out("pgrep -x pagid") == ""
          and g.sh("test -e /etc/pagid || test -e /var/log/pagid || test -e "
                   "/lib/systemd/system/pagid.service || test -e /usr/sbin/pagid",
                   quiet=True).returncode != 0,
          g.out("ls -d /etc/pagid /var/log/pagid /usr/sbin/pagid 2>&1"))

    # --- the machine's own shutdown stops pagid cleanly
    g.sh("apt-get install -y -q %s >/dev/null 2>&1" % names, timeout=300)
    check("reinstalled and serving", http_code(g, "http://127.0.0.1:8080/") == "200")
    took = g.poweroff(60)
    log("  poweroff took %s" % ("%.1fs" % took if took is not None else "too long"))
    check("poweroff with pagid running: under 15s", took is not None and took < 15)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keep", action="store_true", help="keep the guest tree afterwards")
    ap.add_argument("--debs", help="use the .deb files in DIR instead of building")
    ap.add_argument("--build-debs", metavar="DIR", help="only build the .deb files into DIR")
    a = ap.parse_args()
    if a.build_debs:
        return build_only(a.build_debs)
    if os.geteuid() != 0:
        log("system: needs root (systemd-nspawn)")
        log("system: 0 passed, 1 failed")
        return 1
    work = tempfile.mkdtemp(prefix="pagid-system-", dir="/var/tmp")
    mounted = None
    g = None
    t_start = time.monotonic()
    try:
        if a.debs:
            debs = sorted(glob.glob(os.path.join(a.debs, "*.deb")))
        else:
            t0 = time.monotonic()
            debs = build_debs(os.path.join(work, "build"))
            log("system: built %s in %.0fs" % (
                " ".join(os.path.basename(d) for d in debs), time.monotonic() - t0))
        pagid_deb = [d for d in debs if os.path.basename(d).startswith("pagid_")]
        if not check("the pagid .deb exists", pagid_deb, repr(debs)):
            return 1
        upgrade_deb = repack_version(pagid_deb[0], os.path.join(work, "upgrade"))
        t0 = time.monotonic()
        base = subprocess.run([os.path.join(HERE, "rootfs.sh")] + deb_depends(pagid_deb[0]),
                              capture_output=True, text=True, timeout=remaining(1200))
        if not check("the Debian 12 tree is there (rootfs.sh)", base.returncode == 0, base.stderr):
            return 1
        tree = os.path.join(work, "root")
        subprocess.run(["cp", "-a", "--reflink=auto", base.stdout.strip(), tree], check=True,
                       timeout=remaining(300))
        log("system: guest tree ready in %.0fs" % (time.monotonic() - t0))
        os.makedirs(os.path.join(tree, "root", "debs"), exist_ok=True)
        for d in debs:
            shutil.copy(d, os.path.join(tree, "root", "debs"))
        os.makedirs(os.path.join(tree, "root", "debs", "upgrade"))
        shutil.copy(upgrade_deb, os.path.join(tree, "root", "debs", "upgrade"))
        shutil.copy(os.path.join(HERE, "guest", "load.py"), os.path.join(tree, "root"))
        mounted = ensure_nspawn_runtime_dir()
        g = Guest(tree)
        t0 = time.monotonic()
        if not check("Debian 12 boots with systemd as PID 1", g.boot(),
                     open(g.console.name).read()[-2000:] if g.console else ""):
            return 1
        log("system: booted in %.1fs" % (time.monotonic() - t0))
        run_checks(g, debs)
    except Exception as e:  # noqa: BLE001 - reported as a failure, never a traceback only
        check("the system test ran to its end", False, "%s: %s" % (type(e).__name__, e))
    finally:
        if g:
            try:
                g.kill()
            except Exception as e:  # noqa: BLE001 - cleanup goes on
                log("system: could not stop the guest: %s" % e)
        if mounted:
            subprocess.run(["umount", "-l", mounted])
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            log("system: kept %s" % work)
        log("system: %.0fs in all" % (time.monotonic() - t_start))
        log("system: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
