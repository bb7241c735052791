#!/usr/bin/env python3
"""pagid integration tests: run every test against a built pagid binary.

usage: run.py PAGID_BINARY [-k SUBSTRING]... [--list] [-v]

Each test gets its own temp dir, free ports, its own servers (stopped by PID:
SIGTERM, then SIGKILL), and a time bound. Prints PASS/FAIL/SKIP per test and
ends with "integration: N passed, M failed" (plus skips); exit 1 on failure.
"""

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def is_sanitized(binary):
    try:
        with open(binary, "rb") as f:
            return b"__asan_init" in f.read()
    except OSError:
        return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pagid")
    ap.add_argument("-k", action="append", default=[], help="run tests whose name contains this")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("-v", action="store_true", help="show server logs for passing tests too")
    ap.add_argument("--keep", action="store_true", help="keep temp dirs")
    opts = ap.parse_args()

    pagid = os.path.abspath(opts.pagid)
    if not os.access(pagid, os.X_OK):
        print("integration: %s is not an executable" % pagid)
        print("integration: 0 passed, 1 failed")
        return 1
    if "PAGID_TEST_SLOWDOWN" not in os.environ and is_sanitized(pagid):
        os.environ["PAGID_TEST_SLOWDOWN"] = "2"

    import importlib
    import lib  # after PAGID_TEST_SLOWDOWN is settled
    # Every test_*.py registers its tests by being imported.
    for fname in sorted(os.listdir(HERE)):
        if fname.startswith("test_") and fname.endswith(".py"):
            importlib.import_module(fname[:-3])

    tests = [t for t in lib.TESTS if not opts.k or any(k in t[0] for k in opts.k)]
    if opts.list:
        for name, _, _ in tests:
            print(name)
        return 0

    session = tempfile.mkdtemp(prefix="pagid-itest-")
    build = build_lifecycle_app(session)

    passed, failed, skipped = 0, [], []
    t0 = time.monotonic()
    for name, fn, timeout in tests:
        ctx = Context(lib, pagid, session, name, build)
        status, why, secs = run_one(lib, ctx, fn, timeout)
        if status == "PASS":
            passed += 1
            print("PASS %s" % name, flush=True)
            if opts.v:
                ctx.dump_logs()
        elif status == "SKIP":
            skipped.append(name)
            print("SKIP %s: %s" % (name, why), flush=True)
        else:
            failed.append(name)
            print("FAIL %s: %s" % (name, why), flush=True)
            ctx.dump_logs()
        if status != "FAIL" and not opts.keep:
            shutil.rmtree(ctx.tmpdir, ignore_errors=True)

    if not opts.keep and not failed:
        shutil.rmtree(session, ignore_errors=True)
    print("integration: %.1fs, temp dir %s" % (time.monotonic() - t0, session))
    if skipped:
        print("integration: %d skipped: %s" % (len(skipped), ", ".join(skipped)))
    if failed:
        print("integration: failed: %s" % ", ".join(failed))
    print("integration: %d passed, %d failed" % (passed, len(failed)), flush=True)
    return 1 if failed else 0


def build_lifecycle_app(session):
    """Compile apps/lifecycle.c once; returns (path or None, compiler output)."""
    import lib

    src = os.path.join(HERE, "apps", "lifecycle.c")
    out = os.path.join(session, "lifecycle.so")
    cc = os.environ.get("CC", "cc")
    cmd = [cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
           "-I", os.path.join(lib.REPO, "include"), "-o", out, src]
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
        text = p.stdout.decode("utf-8", "replace")
        return (out if p.returncode == 0 else None), " ".join(cmd) + "\n" + text
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, "%s: %s" % (" ".join(cmd), e)


class Context:
    """What a test gets: temp dir, the binary, server start helpers."""

    def __init__(self, lib, pagid, session, name, build):
        self.lib = lib
        self.pagid = pagid
        self.name = name
        self.tmpdir = tempfile.mkdtemp(prefix=name.replace(".", "_") + "-", dir=session)
        self.app_log = os.path.join(self.tmpdir, "app.log")
        self.servers = []
        self.lifecycle_build = build
        self.notes = []

    @property
    def lifecycle_so(self):
        path, text = self.lifecycle_build
        if path is None:
            raise self.lib.TestFailure("tests/integration/apps/lifecycle.c does not build:\n" + text)
        return path

    def start(self, app="hello", workers=0, config=None, args=None, port=None,
              wait=True, env=None, listen=True, default_user=True):
        """Start pagid -w N -l 127.0.0.1:PORT -a APP [-c FILE]; wait until it listens.
        As root, -u root is added unless default_user is False (lib.root_user_args)."""
        lib = self.lib
        if app == "lifecycle":
            app = self.lifecycle_so
        port = port or lib.free_port()
        argv = [] if workers is None else ["-w", str(workers)]
        if listen:
            argv += ["-l", "127.0.0.1:%d" % port]
        if app:
            argv += ["-a", app]
        if config is not None:
            argv += ["-c", lib.write_config(self, config, "pagid-%d.yaml" % len(self.servers))]
        argv += args or []
        srv = lib.Server(self, argv, port, env=env, name="pagid%d" % len(self.servers),
                         default_user=default_user)
        self.servers.append(srv)
        if wait:
            srv.wait_ready()
            if workers == 0:
                time.sleep(0.1)
                srv.fd_baseline = srv.fd_count()
        return srv

    def note(self, msg):
        self.notes.append(msg)

    def finish(self):
        """After the test body: servers still alive, no crash, clean stop."""
        problems = []
        for srv in self.servers:
            if srv.returncode is None and srv.alive() and srv.fd_baseline is not None:
                # every connection's fd is released once its clients are gone
                base = srv.fd_baseline + 2
                if not self.lib.wait_for(lambda: (srv.fd_count() or 0) <= base, 3):
                    problems.append("pagid (pid %d) holds %s fds after the test, %d when idle "
                                    "(fd leak?)" % (srv.pid, srv.fd_count(), srv.fd_baseline))
            if srv.returncode is None:
                if not srv.alive():
                    rc = srv.proc.returncode
                    problems.append("pagid (pid %d) died during the test (status %s)" % (srv.pid, rc))
                rc = srv.stop(timeout=10)
                if srv.stopped_by_kill:
                    problems.append("pagid (pid %d) did not exit within 10s of SIGTERM" % srv.pid)
                elif rc is not None and rc < 0 and rc != -signal.SIGTERM:
                    problems.append("pagid (pid %d) died from signal %d" % (srv.pid, -rc))
            if not srv.allow_crash:
                reports = srv.crash_reports()
                if reports:
                    problems.append("crash/sanitizer report in pagid stderr: %s" % reports[0])
        return problems

    def kill_all(self):
        for srv in self.servers:
            srv.kill_now()

    def dump_logs(self):
        for msg in self.notes:
            print("    note: %s" % msg)
        for srv in self.servers:
            print("    --- %s %s (pid %d, exit %s)" % (
                os.path.basename(self.pagid), " ".join(srv.argv[1:]), srv.pid, srv.returncode))
            for label, text in (("stderr", srv.stderr()), ("stdout", srv.stdout())):
                lines = text.splitlines()
                if lines:
                    print("    %s (last 40 lines):" % label)
                    for line in lines[-40:]:
                        print("      | " + line)
        if os.path.exists(self.app_log):
            with open(self.app_log, errors="replace") as f:
                lines = f.read().splitlines()
            print("    app log (last 40 lines):")
            for line in lines[-40:]:
                print("      | " + line)


def run_one(lib, ctx, fn, timeout):
    result = {}

    def body():
        try:
            fn(ctx)
            result["status"] = ("PASS", "")
        except lib.Skip as e:
            result["status"] = ("SKIP", str(e))
        except lib.TestFailure as e:
            result["status"] = ("FAIL", str(e))
        except Exception as e:  # a bug or an unexpected socket error: still a failure
            tb = traceback.extract_tb(e.__traceback__)
            where = "%s:%d" % (os.path.basename(tb[-1].filename), tb[-1].lineno) if tb else "?"
            result["status"] = ("FAIL", "%s: %s (at %s)" % (type(e).__name__, e, where))

    start = time.monotonic()
    th = threading.Thread(target=body, daemon=True)
    th.start()
    th.join(timeout * lib.SLOW)
    if th.is_alive():
        ctx.kill_all()
        th.join(5)
        status, why = "FAIL", "timed out after %ss" % (timeout * lib.SLOW)
    else:
        status, why = result.get("status", ("FAIL", "no result"))
    try:
        problems = ctx.finish()
    except Exception as e:
        problems = ["cleanup failed: %s" % e]
    if problems and status != "FAIL":
        status, why = "FAIL", "; ".join(problems)
    elif problems:
        why += "; " + "; ".join(problems)
    return status, why, time.monotonic() - start


if __name__ == "__main__":
    sys.exit(main())
