#!/usr/bin/env python3
"""pagid integration tests: run every test against a built pagid binary.

usage: run.py PAGID_BINARY [-j N] [-k SUBSTRING]... [--list] [-v] [--keep]

Each test runs in a process of its own (forked from the runner), with its own
temp dir, free ports (lib.free_port: no two running tests get the same one),
its own servers (stopped by PID: SIGTERM, then SIGKILL), and a time bound.
With -j N, N tests run at once; the tests marked serial (lib.test(serial=True)
or a module's SERIAL = True: timing, fairness, memory measurements) run
afterwards, one at a time, with nothing else running. -j 1 runs every test in
registration order, one at a time. Prints one line per test, PASS/FAIL/SKIP
(with the test's own output before it and, on failure, its servers' logs after
it, all in one piece), and ends with "integration: N passed, M failed" (plus
skips); exit 1 on failure.
"""

import argparse
import contextlib
import io
import json
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


def default_jobs():
    """Three per CPU, at most 16: most of a test's time is spent waiting (on
    timers, on servers starting and stopping), so the CPUs stay far from
    busy. Measured on 2 CPUs (the whole pass, serial tests included, which
    take some 145 s alone): -j 1 689 s, -j 4 325 s, -j 6 285 s, -j 8 283 s
    (and a timing test failed). Past that the serial tests dominate anyway."""
    return min(16, 3 * (os.cpu_count() or 1))


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
    ap.add_argument("-j", "--jobs", type=int, default=None,
                    help="tests run at once (default: $PAGID_TEST_JOBS, else 3 per CPU up to 16: %d)"
                    % default_jobs())
    ap.add_argument("--list", action="store_true", help="list the tests (serial ones marked)")
    ap.add_argument("-v", action="store_true", help="show server logs for passing tests too")
    ap.add_argument("--keep", action="store_true", help="keep temp dirs")
    ap.add_argument("--durations", type=int, default=0, metavar="N",
                    help="list the N slowest tests at the end")
    opts = ap.parse_args()
    jobs = opts.jobs or int(os.environ.get("PAGID_TEST_JOBS") or 0) or default_jobs()
    jobs = max(1, jobs)

    pagid = os.path.abspath(opts.pagid)
    if not os.access(pagid, os.X_OK):
        print("integration: %s is not an executable" % pagid)
        print("integration: 0 passed, 1 failed")
        return 1
    if is_sanitized(pagid):
        os.environ["PAGID_TEST_SANITIZED"] = "1"
        if "PAGID_TEST_SLOWDOWN" not in os.environ:
            os.environ["PAGID_TEST_SLOWDOWN"] = "2"
    else:
        os.environ.pop("PAGID_TEST_SANITIZED", None)

    import importlib
    import lib  # after PAGID_TEST_SLOWDOWN is settled
    # Every test_*.py registers its tests by being imported.
    for fname in sorted(os.listdir(HERE)):
        if fname.startswith("test_") and fname.endswith(".py"):
            importlib.import_module(fname[:-3])

    tests = [t for t in lib.TESTS if not opts.k or any(k in t.name for k in opts.k)]
    if opts.list:
        for t in tests:
            print(t.name + ("  (serial)" if t.serial else ""))
        return 0

    session = tempfile.mkdtemp(prefix="pagid-itest-")
    build = build_lifecycle_app(session)

    if jobs == 1:
        phases = [(1, tests)]
    else:
        # Longest bound first, so a long test does not start last and run alone.
        concurrent = sorted((t for t in tests if not t.serial), key=lambda t: -t.timeout)
        phases = [(jobs, concurrent), (1, [t for t in tests if t.serial])]

    passed, failed, skipped, took = 0, [], [], []
    t0 = time.monotonic()
    try:
        for n, batch in phases:
            for t, status, why, secs, output in run_batch(lib, pagid, session, build, batch, n,
                                                          opts):
                sys.stdout.write(output)
                took.append((secs, t.name))
                if status == "PASS":
                    passed += 1
                elif status == "SKIP":
                    skipped.append(t.name)
                else:
                    failed.append(t.name)
                sys.stdout.flush()
    except KeyboardInterrupt:
        print("integration: interrupted", flush=True)
        failed.append("(interrupted)")

    if not opts.keep and not failed:
        shutil.rmtree(session, ignore_errors=True)
    if opts.durations:
        print("integration: slowest: %s" % ", ".join(
            "%s %.1fs" % (name, secs) for secs, name in sorted(took, reverse=True)[:opts.durations]))
    print("integration: %.1fs (-j %d), temp dir %s" % (time.monotonic() - t0, jobs, session))
    if skipped:
        print("integration: %d skipped: %s" % (len(skipped), ", ".join(skipped)))
    if failed:
        print("integration: failed: %s" % ", ".join(failed))
    print("integration: %d passed, %d failed" % (passed, len(failed)), flush=True)
    return 1 if failed else 0


def run_batch(lib, pagid, session, build, batch, jobs, opts):
    """Run the tests of batch, jobs at a time, each in a forked process;
    yields (test, status, why, seconds, output) as each one ends. output is what
    the test printed, its PASS/FAIL/SKIP line and (failed, or -v) its logs."""
    pending = list(batch)
    running = {}  # pid -> (test, result file, output file, hard deadline)
    while pending or running:
        while pending and len(running) < jobs:
            t = pending.pop(0)
            res = tempfile.mktemp(prefix="result-", dir=session)
            out = res + ".out"
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                child(lib, pagid, session, build, t, res, out, opts)  # never returns
            # A last resort if the child is stuck past its own bounds (run_one
            # stops the test after its timeout, then its servers).
            limit = t.timeout * lib.SLOW * 1.5 + 120
            running[pid] = (t, res, out, time.monotonic() + limit, limit)
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            now = time.monotonic()
            for p, (t, res, out, deadline, limit) in list(running.items()):
                if now > deadline:
                    if not os.path.exists(res + ".killed"):
                        # SIGTERM: the child kills its servers (by PID) and exits
                        with open(res + ".killed", "w") as f:
                            f.write("%d" % limit)
                        os.kill(p, signal.SIGTERM)
                        running[p] = (t, res, out, now + 15, limit)
                    else:
                        os.kill(p, signal.SIGKILL)  # reaped by waitpid above
                        running[p] = (t, res, out, float("inf"), limit)
            time.sleep(0.05)
            continue
        if pid not in running:
            continue
        t, res, out, _, _ = running.pop(pid)
        yield (t,) + collect(t, res, out, status)


def collect(t, res, out, wstatus):
    """The result the child left in res (and its output in out)."""
    try:
        with open(out, errors="replace") as f:
            printed = f.read()
    except OSError:
        printed = ""
    try:
        with open(res) as f:
            r = json.load(f)
        status, why, secs, logs = r["status"], r["why"], r["secs"], r["logs"]
    except (OSError, ValueError, KeyError):
        status, secs, logs = "FAIL", 0.0, ""
        if os.path.exists(res + ".killed"):
            with open(res + ".killed") as f:
                why = "the test's process was still there %ss after it started: killed" % f.read()
        else:
            why = "the test's process ended without a result (%s)" % describe_wait(wstatus)
    for f in (res, out, res + ".killed"):
        with contextlib.suppress(OSError):
            os.unlink(f)
    if printed and not printed.endswith("\n"):
        printed += "\n"
    line = "%s %s" % (status, t.name) if status == "PASS" else "%s %s: %s" % (status, t.name, why)
    return status, why, secs, printed + line + "\n" + logs


def describe_wait(wstatus):
    if os.WIFSIGNALED(wstatus):
        return "signal %d" % os.WTERMSIG(wstatus)
    return "exit %d" % os.WEXITSTATUS(wstatus)


def child(lib, pagid, session, build, t, res, out, opts):
    """In the forked process: run test t, leave its result in res."""
    code = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        # What the test (or a program it runs) prints goes to out.
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        ctx = Context(lib, pagid, session, t.name, build)

        def stop(signum, frame):  # the runner gave up on this process
            with contextlib.suppress(BaseException):
                ctx.kill_all()
            os._exit(3)

        signal.signal(signal.SIGTERM, stop)
        status, why, secs = run_one(lib, ctx, t.fn, t.timeout)
        logs = io.StringIO()
        if status == "FAIL" or opts.v:
            with contextlib.redirect_stdout(logs):
                ctx.dump_logs()
        if status != "FAIL" and not opts.keep:
            shutil.rmtree(ctx.tmpdir, ignore_errors=True)
        sys.stdout.flush()
        sys.stderr.flush()
        with open(res + ".tmp", "w") as f:
            json.dump({"status": status, "why": why, "secs": secs, "logs": logs.getvalue()}, f)
        os.rename(res + ".tmp", res)
    except BaseException:  # noqa: BLE001 - reported by the parent as no result
        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


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
