"""Preloading (issue 11): a Perl app is compiled once, in a zygote per
generation, and its workers are forked from it; `preload: false` and
--no-preload compile it in each worker. perl/preload.pl logs each compile
("load pid=") and each lifespan startup, and answers with its pid, uid and
a random number. Kills of a worker and of the zygote, reload with edited
code, unprivileged zygote and workers, no zombie, nothing left after stop.
Skipped when pagid was built without Perl."""

import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import time

import lib
from lib import check, check_eq, request, test, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
APP = os.path.join(HERE, "perl", "preload.pl")
_has_perl = {}


def need_perl(ctx):
    if ctx.pagid not in _has_perl:
        p = subprocess.run([ctx.pagid, "-V"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=30)
        _has_perl[ctx.pagid] = re.search(rb"perl", p.stdout, re.I) is not None
    if not _has_perl[ctx.pagid]:
        raise lib.Skip("pagid was built without the Perl host")


def log_lines(ctx, kind):
    """pids of the app log's "KIND pid=N" lines, in order."""
    try:
        with open(ctx.app_log) as f:
            text = f.read()
    except OSError:
        return []
    return [int(m) for m in re.findall(r"^%s pid=(\d+)$" % kind, text, re.M)]


def ppid_of(pid):
    with open("/proc/%d/stat" % pid) as f:
        stat = f.read()
    return int(stat[stat.rfind(")") + 2:].split()[1])


def uid_of(pid):
    with open("/proc/%d/status" % pid) as f:
        return int([ln.split()[1] for ln in f if ln.startswith("Uid:")][0])


def title_of(pid):
    with open("/proc/%d/cmdline" % pid, "rb") as f:
        return f.read().rstrip(b"\0").decode("utf-8", "replace")


def wait_workers(srv, n, timeout=15):
    kids = wait_for(lambda: len(srv.workers()) == n and srv.workers(), timeout)
    check(kids, "expected %d workers, found %r" % (n, srv.workers()))
    return kids


def wait_ready(srv, count=1, timeout=15):
    check(wait_for(lambda: srv.stderr().count("all workers ready") >= count
                   or srv.stderr().count("ready (2 workers)") >= count, timeout),
          "workers never became ready:\n" + srv.stderr()[-2000:])


def responses(port, n):
    """n responses to GET / over n connections open at once (fair accept
    spreads them over the workers)."""
    conns = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(n)]
    for c in conns:
        c.sendall(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    out = []
    for c in conns:
        data = b""
        while True:
            chunk = c.recv(65536)
            if not chunk:
                break
            data += chunk
        c.close()
        out.append(data)
    return out


def answers(port, n=12):
    """{pid: [(tag, uid, rand)]} from n answers at once."""
    seen = {}
    for data in responses(port, n):
        m = re.search(rb"(v\d+) pid=(\d+) uid=(\d+) rand=(\d+)\r\n", data)
        check(m, "unexpected answer %r" % data[-200:])
        seen.setdefault(int(m.group(2)), []).append(
            (m.group(1).decode(), int(m.group(3)), int(m.group(4))))
    return seen


def serve_both(srv, workers):
    """Both workers answer (retried: the spreading is fair, not exact). The
    tests using it are serial: on a busy machine one worker can take every
    connection of ten rounds."""
    seen = {}
    for _ in range(10):
        for pid, v in answers(srv.port).items():
            seen.setdefault(pid, []).extend(v)
        if set(workers) <= set(seen):
            break
    check(set(workers) <= set(seen), "workers %r answered, expected %r" % (sorted(seen), workers))
    return seen


@test(timeout=60, serial=True)
def preload_compiles_once_and_forks_workers(ctx):
    need_perl(ctx)
    srv = ctx.start(APP, workers=2)
    wait_ready(srv)
    workers = wait_workers(srv, 2)
    zyg = srv.zygotes()
    check_eq(len(zyg), 1, "zygotes")
    check_eq(title_of(zyg[0]), "pagid: zygote (generation 1)", "zygote title")
    # One compile, in the zygote; lifespan startup in each worker.
    check_eq(log_lines(ctx, "load"), zyg, "compiled by")
    check(wait_for(lambda: sorted(log_lines(ctx, "lifespan")) == sorted(workers), 5),
          "lifespan startups %r, workers %r" % (log_lines(ctx, "lifespan"), workers))
    for w in workers:
        check_eq(ppid_of(w), srv.pid, "parent of worker %d" % w)
        check(title_of(w).startswith("pagid: worker "), "worker title %r" % title_of(w))
    seen = serve_both(srv, workers)
    # rand() was seeded at load time; each worker reseeds after the fork,
    # so the workers' numbers are not one shared sequence.
    a, b = ([r for _, _, r in seen[w]] for w in workers)
    check(not set(a) & set(b), "workers drew the same random numbers: %r %r" % (a, b))
    check(re.search(r"zygote started \(pid %d, generation 1\)" % zyg[0], srv.stderr()),
          "no zygote start in the log")


@test(timeout=60, serial=True)
def no_preload_compiles_in_each_worker(ctx):
    need_perl(ctx)
    srv = ctx.start(APP, workers=2, config="preload: false\n")
    wait_ready(srv)
    workers = wait_workers(srv, 2)
    check_eq(srv.zygotes(), [], "zygotes")
    check(wait_for(lambda: sorted(log_lines(ctx, "load")) == sorted(workers), 5),
          "compiled by %r, workers %r" % (log_lines(ctx, "load"), workers))
    serve_both(srv, workers)
    srv2 = ctx.start(APP, workers=2, args=["--no-preload"])
    wait_ready(srv2)
    workers2 = wait_workers(srv2, 2)
    check_eq(srv2.zygotes(), [], "zygotes with --no-preload")
    serve_both(srv2, workers2)
    # -T shows the effective value: auto is true for a Perl app.
    for extra, want in (([], "true"), (["--no-preload"], "false")):
        p = subprocess.run([ctx.pagid, "-T", "-a", APP, "-l", "127.0.0.1:1"] + extra,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
        check_eq(p.returncode, 0, "pagid -T %r" % extra)
        check(re.search(rb"^preload: %s$" % want.encode(), p.stdout, re.M),
              "-T %r: no 'preload: %s' in %r" % (extra, want, p.stdout[:400]))


@test(timeout=60, serial=True)
def killed_worker_is_replaced_from_the_zygote(ctx):
    need_perl(ctx)
    srv = ctx.start(APP, workers=2)
    wait_ready(srv)
    workers = wait_workers(srv, 2)
    zyg = srv.zygotes()
    srv.allow_crash = True  # the kill is logged as a crash
    os.kill(workers[0], signal.SIGKILL)
    new = wait_for(lambda: (lambda w: len(w) == 2 and workers[0] not in w and w)(srv.workers()),
                   15)
    check(new, "worker not replaced: %r" % srv.workers())
    check(re.search(r"worker \d started \(pid %d, generation 1, from the zygote\)"
                    % (set(new) - set(workers)).pop(), srv.stderr()),
          "replacement not forked by the zygote")
    check(wait_for(lambda: len(log_lines(ctx, "lifespan")) == 3, 10), "no lifespan startup")
    serve_both(srv, new)
    check_eq(log_lines(ctx, "load"), zyg, "compiles (the replacement compiled nothing)")
    check_eq(lib.zombies_of(srv.pid), [], "zombies")


@test(timeout=60, serial=True)
def killed_zygote_is_replaced_and_service_continues(ctx):
    need_perl(ctx)
    srv = ctx.start(APP, workers=2)
    wait_ready(srv)
    workers = wait_workers(srv, 2)
    old = srv.zygotes()
    check_eq(len(old), 1, "zygotes")
    os.kill(old[0], signal.SIGKILL)
    new = wait_for(lambda: (lambda z: len(z) == 1 and z != old and z)(srv.zygotes()), 15)
    check(new, "zygote not replaced: %r" % srv.zygotes())
    check(re.search(r"zygote \(pid %d, generation 1\) died \(signal 9\)" % old[0], srv.stderr()),
          "the zygote's death was not logged")
    # The workers it had forked never stopped serving.
    check_eq(sorted(srv.workers()), sorted(workers), "workers")
    serve_both(srv, workers)
    # The new zygote loaded the app and forks the next replacement.
    check(wait_for(lambda: log_lines(ctx, "load") == old + new, 10),
          "compiles %r, zygotes %r" % (log_lines(ctx, "load"), old + new))
    srv.allow_crash = True  # the kill is logged as a crash
    os.kill(workers[1], signal.SIGKILL)
    now = wait_for(lambda: (lambda w: len(w) == 2 and workers[1] not in w and w)(srv.workers()),
                   15)
    check(now, "worker not replaced after the zygote's restart: %r" % srv.workers())
    # Titled is not ready yet (lifespan startup): slow under the sanitizers.
    check(wait_for(lambda: len(re.findall(r"info: worker \d+ ready", srv.stderr())) >= 3, 15),
          "the replacement never became ready")
    serve_both(srv, now)
    check_eq(lib.zombies_of(srv.pid), [], "zombies")


@test(timeout=90, serial=True)
def reload_serves_edited_code_from_a_new_zygote(ctx):
    need_perl(ctx)
    path = os.path.join(ctx.tmpdir, "preload_app.pl")
    shutil.copy(APP, path)
    srv = ctx.start(path, workers=2)
    wait_ready(srv)
    workers = wait_workers(srv, 2)
    old_zyg = srv.zygotes()
    tags = {t for v in serve_both(srv, workers).values() for t, _, _ in v}
    check_eq(tags, {"v1"}, "before the edit")
    with open(path) as f:
        text = f.read()
    with open(path, "w") as f:
        f.write(text.replace("my $tag = 'v1';", "my $tag = 'v2';"))
    srv.signal(signal.SIGHUP)
    check(wait_for(lambda: "generation 2 ready" in srv.stderr(), 20),
          "generation 2 never ready:\n" + srv.stderr()[-2000:])
    new_workers = wait_for(lambda: (lambda w: len(w) == 2 and not set(w) & set(workers) and w)(
        srv.workers()), 20)
    check(new_workers, "old workers still running: %r" % srv.workers())
    zyg = wait_for(lambda: (lambda z: len(z) == 1 and z != old_zyg and z)(srv.zygotes()), 10)
    check(zyg, "zygotes %r (old %r)" % (srv.zygotes(), old_zyg))
    check_eq(title_of(zyg[0]), "pagid: zygote (generation 2)", "new zygote title")
    tags = {t for v in serve_both(srv, new_workers).values() for t, _, _ in v}
    check_eq(tags, {"v2"}, "after the reload")
    check_eq(log_lines(ctx, "load"), old_zyg + zyg, "one compile per generation")
    check(not lib.pid_alive(old_zyg[0]), "the old generation's zygote is still running")
    check_eq(lib.zombies_of(srv.pid), [], "zombies")


@test(timeout=60, serial=True)
def zygote_and_workers_run_unprivileged(ctx):
    need_perl(ctx)
    if os.geteuid() != 0:
        raise lib.Skip("needs root (the master keeps root, the zygote drops it)")
    try:
        nobody = pwd.getpwnam("nobody").pw_uid
    except KeyError:
        raise lib.Skip("no user nobody")
    # The app file in the source tree is world-readable; the test log is not
    # reachable for nobody, which the app tolerates.
    srv = ctx.start(APP, workers=2, config="user: nobody\n", default_user=False)
    wait_ready(srv)
    workers = wait_workers(srv, 2)
    zyg = srv.zygotes()
    check_eq(len(zyg), 1, "zygotes")
    check_eq(uid_of(srv.pid), 0, "master uid")
    check_eq(uid_of(zyg[0]), nobody, "zygote uid (it runs the app's load-time code)")
    for w in workers:
        check_eq(uid_of(w), nobody, "worker %d uid" % w)
    seen = serve_both(srv, workers)
    for w in workers:
        check_eq({u for _, u, _ in seen[w]}, {nobody}, "uid the app saw in worker %d" % w)


@test(timeout=60)
def stop_leaves_no_process_and_no_zombie(ctx):
    need_perl(ctx)
    srv = ctx.start(APP, workers=2)
    wait_ready(srv)
    workers = wait_workers(srv, 2)
    # A replaced worker and a replaced zygote first: their exits must be reaped too.
    srv.allow_crash = True
    os.kill(workers[0], signal.SIGKILL)
    check(wait_for(lambda: len(srv.workers()) == 2 and workers[0] not in srv.workers(), 15),
          "worker not replaced")
    z = srv.zygotes()
    os.kill(z[0], signal.SIGKILL)
    check(wait_for(lambda: len(srv.zygotes()) == 1 and srv.zygotes() != z, 15),
          "zygote not replaced")
    time.sleep(0.3)
    check_eq(lib.zombies_of(srv.pid), [], "zombies")
    procs = srv.workers() + srv.zygotes()
    check_eq(srv.stop(), 0, "exit status")
    left = [p for p in procs if lib.pid_alive(p)]
    check(wait_for(lambda: not [p for p in procs if lib.pid_alive(p)], 5),
          "still running after stop: %r" % left)


@test(timeout=60)
def app_that_cannot_load_stops_the_start(ctx):
    need_perl(ctx)
    path = os.path.join(ctx.tmpdir, "broken.pl")
    with open(path, "w") as f:
        f.write("use strict;\ndie \"broken at load\\n\";\n")
    srv = ctx.start(path, workers=2, wait=False)
    check(srv.wait_exit(20), "pagid did not exit")
    check_eq(srv.returncode, 3, "exit status (EXIT_STARTUP)")
    err = srv.stderr()
    check("broken at load" in err, "the app's error is not in the log:\n" + err[-2000:])
    check(re.search(r"zygote \(pid \d+, generation 1\) could not load the apps", err),
          "the zygote's failure is not in the log")


@test(timeout=60, serial=True)
def app_starting_a_timer_at_load_is_loaded_in_each_worker(ctx):
    """A timer started while the file loads needs a worker's loop: the
    zygote says it cannot preload the app and the workers load it
    themselves, each with its timer running (not a failed start)."""
    need_perl(ctx)
    # A relative app path means pagid's working directory (Perl's `do`
    # alone would search @INC for it).
    srv = ctx.start(os.path.relpath(os.path.join(HERE, "perl", "preload_timer.pl"), ctx.tmpdir),
                    workers=2)
    wait_ready(srv)
    workers = wait_workers(srv, 2)
    err = srv.stderr()
    check(re.search(r"cannot preload: \S*preload_timer.pl starts event watchers while it "
                    r"loads.*generation 1 loads the apps in each worker", err),
          "no preload refusal in the log:\n" + err[-2000:])
    check(wait_for(lambda: not srv.zygotes(), 5), "zygote still running: %r" % srv.zygotes())
    for w in workers:
        check_eq(ppid_of(w), srv.pid, "parent of worker %d" % w)
    check(wait_for(lambda: set(workers) <= set(log_lines(ctx, "load")), 5),
          "compiled by %r, workers %r" % (log_lines(ctx, "load"), workers))
    time.sleep(0.5)  # the timers fire 0.1 s after each worker's load
    seen = set()
    for _ in range(10):
        for pid_ in workers_answering(srv.port):
            seen.add(pid_)
        if set(workers) <= seen:
            break
    check(set(workers) <= seen, "workers %r answered, expected %r" % (sorted(seen), workers))


def workers_answering(port, n=8):
    """pids answering "fired=1" over n connections open at once."""
    pids = []
    for data in responses(port, n):
        m = re.search(rb"fired=(\d) pid=(\d+)", data)
        check(m, "unexpected answer %r" % data[-200:])
        check_eq(m.group(1), b"1", "the load-time timer of worker %s fired" % m.group(2))
        pids.append(int(m.group(2)))
    return pids


def stop_pid(pid, timeout=15):
    """SIGTERM a master that is not our child; True once it is gone."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    if wait_for(lambda: not lib.pid_alive(pid), timeout):
        return True
    os.kill(pid, signal.SIGKILL)
    return False


@test(timeout=90)
def upgrade_new_master_makes_its_own_zygote(ctx):
    need_perl(ctx)
    pidfile = os.path.join(ctx.tmpdir, "pagid.pid")
    srv = ctx.start(APP, workers=2, config="pid_file: %s\n" % pidfile)
    wait_ready(srv)
    old_zyg = srv.zygotes()
    check_eq(len(old_zyg), 1, "zygotes")
    old_workers = wait_workers(srv, 2)
    srv.signal(signal.SIGUSR2)
    new = 0
    try:
        new = wait_for(lambda: (lambda p: p and p != srv.pid and p)(read_pid(pidfile)), 30)
        check(new, "no new master in the pid file")
        check(srv.wait_exit(30), "old master still running")
        check_eq(srv.returncode, 0, "old master's exit status")
        kids = lib.children_of(new)
        zyg = [k for k in kids if lib.is_zygote(k)]
        workers = [k for k in kids if not lib.is_zygote(k)]
        check_eq(len(zyg), 1, "the new master's zygotes (children %r)" % kids)
        check_eq(len(workers), 2, "the new master's workers")
        check_eq(log_lines(ctx, "load"), old_zyg + zyg, "one compile per master")
        for p in old_zyg + old_workers:
            check(wait_for(lambda: not lib.pid_alive(p), 10), "old process %d still running" % p)
        served = set()
        for _ in range(10):
            served |= set(answers(srv.port))
        check(served <= set(workers), "served by %r, not the new workers %r" % (served, workers))
    finally:
        if new and new != srv.pid:
            check(stop_pid(new), "new master did not stop")


def read_pid(path):
    try:
        with open(path) as f:
            return int(f.read().strip() or 0)
    except (OSError, ValueError):
        return 0


@test(timeout=60)
def zygote_stuck_loading_is_killed_and_restarted(ctx):
    need_perl(ctx)
    path = os.path.join(ctx.tmpdir, "slow.pl")
    with open(path, "w") as f:
        f.write("BEGIN { sleep 600 }\nsub { die }\n")
    srv = ctx.start(path, workers=1, wait=False,
                    config="timeouts:\n  lifespan_startup: 2s\n  heartbeat: 1s\n")
    srv.allow_crash = True
    first = wait_for(lambda: srv.zygotes(), 10)
    check(first, "no zygote")
    check(wait_for(lambda: "has not forked worker 1" in srv.stderr(), 20),
          "the stuck zygote was not noticed:\n" + srv.stderr()[-2000:])
    again = wait_for(lambda: (lambda z: z and z != first and z)(srv.zygotes()), 15)
    check(again, "no new zygote after the stuck one was killed")
    check(not lib.pid_alive(first[0]), "the stuck zygote is still running")
    check(srv.alive(), "pagid gave up")


def perl_app(name):
    return os.path.join(HERE, "perl", name)


@test(timeout=60, serial=True)
def forged_zygote_report_signals_no_foreign_process(ctx):
    """App code runs in the zygote and can write reports on its channel:
    the root master must never signal a pid it reported unless it is the
    master's own child."""
    need_perl(ctx)
    victim = subprocess.Popen(["sleep", "100"])
    try:
        srv = ctx.start(perl_app("preload_forge.pl"), workers=2,
                        env={"PAGID_TEST_VICTIM": str(victim.pid)})
        wait_ready(srv)
        workers = wait_workers(srv, 2)
        check(wait_for(lambda: len(re.findall(r"reported pid %d for worker 1, which is not a "
                                              r"child of the master" % victim.pid,
                                              srv.stderr())) == 2, 15),
              "the forged reports were not logged:\n" + srv.stderr()[-2000:])
        check(victim.poll() is None, "the victim was killed (status %r)" % victim.poll())
        serve_both(srv, workers)
        # A worker replaced later is still supervised.
        srv.allow_crash = True
        os.kill(workers[0], signal.SIGKILL)
        check(wait_for(lambda: len(srv.workers()) == 2 and workers[0] not in srv.workers(), 15),
              "worker not replaced")
        check(victim.poll() is None, "the victim was killed (status %r)" % victim.poll())
        check_eq(srv.stop(), 0, "exit status")
        check(victim.poll() is None, "the victim was killed at stop (status %r)" % victim.poll())
    finally:
        victim.kill()
        victim.wait()


@test(timeout=60)
def app_signal_handlers_do_not_keep_the_zygote_alive(ctx):
    """An app that sets $SIG{TERM}/$SIG{QUIT} at load time: stop and reload
    still end its zygote at once (the channel closes), not at the deadline."""
    need_perl(ctx)
    cfg = "timeouts:\n  shutdown: 30s\n"
    srv = ctx.start(perl_app("preload_sigterm.pl"), workers=2, config=cfg)
    wait_ready(srv)
    wait_workers(srv, 2)
    old = srv.zygotes()
    check_eq(len(old), 1, "zygotes")
    srv.signal(signal.SIGHUP)
    check(wait_for(lambda: "generation 2 ready" in srv.stderr(), 20),
          "generation 2 never ready:\n" + srv.stderr()[-2000:])
    t0 = time.monotonic()
    check(wait_for(lambda: not lib.pid_alive(old[0]), 10),
          "the old zygote is still running after the reload")
    gone_after = time.monotonic() - t0
    check("still running at the deadline" not in srv.stderr(), "needed the deadline's SIGKILL")
    new = wait_for(lambda: (lambda z: len(z) == 1 and z != old and z)(srv.zygotes()), 10)
    check(new, "zygotes %r" % srv.zygotes())
    procs = srv.workers() + new
    t0 = time.monotonic()
    srv.signal(signal.SIGTERM)
    check(srv.wait_exit(15), "pagid did not stop within 15s")
    took = time.monotonic() - t0
    check_eq(srv.returncode, 0, "exit status")
    check(not [p for p in procs if lib.pid_alive(p)], "left running: %r" % procs)
    check("still running at the deadline" not in srv.stderr(),
          "stop needed the deadline's SIGKILL:\n" + srv.stderr()[-2000:])
    print("old zygote gone %.2fs after generation 2 ready; stop took %.2fs" % (gone_after, took))


@test(timeout=60)
def log_reopen_during_the_load_does_not_break_it(ctx):
    """SIGUSR1 (reopen the logs) while the zygote loads a slow app: the
    app's load-time sleep is not interrupted, the reopen happens after."""
    need_perl(ctx)
    srv = ctx.start(perl_app("preload_slow.pl"), workers=1, wait=False)
    check(wait_for(lambda: srv.zygotes(), 10), "no zygote")
    for _ in range(3):
        time.sleep(0.5)
        srv.signal(signal.SIGUSR1)
    srv.wait_ready(20)
    wait_ready(srv)
    check(srv.alive(), "pagid exited")
    check("interrupted" not in srv.stderr(), "the load was interrupted:\n" + srv.stderr()[-2000:])
    workers = wait_workers(srv, 1)
    check(answers(srv.port, 2).keys() == set(workers), "the worker does not answer")
    check_eq(srv.stop(), 0, "exit status")


@test(timeout=60)
def load_time_output_is_written_once_per_compile(ctx):
    need_perl(ctx)
    srv = ctx.start(perl_app("preload_print.pl"), workers=3)
    wait_ready(srv)
    workers = wait_workers(srv, 3)
    zyg = srv.zygotes()
    time.sleep(0.3)
    lines = re.findall(r"printed at load time by (\d+)", srv.stdout())
    check_eq([int(p) for p in lines], zyg, "load-time lines (3 workers, one zygote)")
    srv.allow_crash = True
    os.kill(workers[0], signal.SIGKILL)
    check(wait_for(lambda: len(srv.workers()) == 3 and workers[0] not in srv.workers(), 15),
          "worker not replaced")
    time.sleep(0.3)
    lines = re.findall(r"printed at load time by (\d+)", srv.stdout())
    check_eq([int(p) for p in lines], zyg, "load-time lines after a replaced worker")
    check_eq(srv.stop(), 0, "exit status")
