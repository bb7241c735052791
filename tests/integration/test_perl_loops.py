"""Foreign event loops in the Perl host (docs/perl.md, "Event loops"): apps
written for IO::Async (timers, Process, Function, Net::Async::HTTP, signals)
and AnyEvent run on the worker's own loop; running a second loop (IO::Async's
->run, ->get on a pending future, a blocking condvar ->recv) fails the scope
loudly while the worker serves on; EV is refused at require; an app using
none of them loads none. Skipped without the Perl host or the Perl modules."""

import os
import re
import signal
import subprocess
import time

import lib
from lib import check, check_eq, request, test, wait_for
from test_perl import app

_has_modules = {}


def loops_app(ctx, name, modules=("IO::Async::Loop",)):
    """app(), also skipping when a Perl module the app needs is not installed."""
    path = app(ctx, name)
    for m in modules:
        if m not in _has_modules:
            _has_modules[m] = subprocess.run(["perl", "-M" + m, "-e", "1"],
                                             stderr=subprocess.DEVNULL).returncode == 0
        if not _has_modules[m]:
            raise lib.Skip("the Perl module %s is not installed" % m)
    return path


def get(srv, path, timeout=20):
    """GET path; (status, body as text). The timeout is generous: never a hang."""
    r = request(srv.port, path=path, timeout=timeout)
    return r.status, r.body.decode("utf-8", "replace")


def worker_of(srv):
    """The worker, once ready: with preload the zygote forks it after the load."""
    check(wait_for(lambda: "all workers ready" in srv.stderr(), 20),
          "the worker never became ready:\n" + srv.stderr()[-2000:])
    kids = wait_for(lambda: srv.workers(), 10)
    check_eq(len(kids), 1, "one worker")
    return kids[0]


@test(timeout=60)
def io_async_timers(ctx):
    srv = ctx.start(loops_app(ctx, "io_async"), workers=1)
    seen = {}

    def ticked():
        seen["r"] = get(srv, "/ticks")
        m = re.search(r"ticks=(\d+) countdown=(\w+)", seen["r"][1])
        return m and int(m.group(1)) >= 3 and m.group(2) == "expired"

    check(wait_for(ticked, 10, 0.1), "the Periodic timer ticks and the Countdown expires: %r" %
          (seen.get("r"),))
    check("loop=IO::Async::Loop::Pagid" in seen["r"][1], "IO::Async::Loop->new is pagid's: %r" %
          (seen["r"],))
    status, body = get(srv, "/delay")
    check_eq(status, 200, "delay_future status")
    slept = float(body.split()[1])
    check(0.19 <= slept < 5, "delay_future(after => 0.2) slept %.3f" % slept)


@test(timeout=60)
def io_async_processes(ctx):
    srv = ctx.start(loops_app(ctx, "io_async"), workers=1)
    worker = worker_of(srv)
    status, body = get(srv, "/process")
    check_eq(status, 200, "IO::Async::Process status")
    check(body.startswith("status=0 process-output\npid "), "the command's output: %r" % body)
    check_eq(get(srv, "/run_child"), (200, "exit=3 child\n"), "run_child: exit code and output")
    check_eq(get(srv, "/run_process"), (200, "ran\n"), "run_process")
    check_eq(get(srv, "/open_process"), (200, "status=0 opened\n"), "open_process, stdin to stdout")
    check(wait_for(lambda: not lib.zombies_of(worker), 5),
          "children reaped: %r" % lib.zombies_of(worker))
    check_eq(get(srv, "/ticks")[0], 200, "the worker serves on")


@test(timeout=60)
def io_async_function(ctx):
    srv = ctx.start(loops_app(ctx, "io_async"), workers=1)
    worker = worker_of(srv)
    status, body = get(srv, "/function")
    check_eq(status, 200, "IO::Async::Function status")
    m = re.match(r"square=49 worker_pid=(\d+) me=(\d+)$", body)
    check(m, "the function's result: %r" % body)
    fpid, me = int(m.group(1)), int(m.group(2))
    check_eq(me, worker, "the app runs in the worker")
    check(fpid != worker, "the code ran in another process")
    kids = {p: (st, cmd) for p, st, cmd in lib.proc_children(worker)}
    check(fpid in kids, "the function's worker is the worker's child: %r" % kids)
    check("pagid: app process" in kids[fpid][1],
          "a forked child is not titled as a worker: %r" % (kids[fpid],))
    # A second call goes to the same (or a second) forked worker: it still answers.
    check_eq(get(srv, "/function")[0], 200, "second call")
    check_eq(get(srv, "/function_stop"), (200, "stopped"), "Function->stop")
    check(wait_for(lambda: not lib.proc_children(worker), 5),
          "the function's workers exited and were reaped: %r" % lib.proc_children(worker))
    check_eq(srv.stop(), 0, "clean stop")


@test(timeout=60)
def io_async_forked_child_signals(ctx):
    """A process forked from the worker gets default signal dispositions back:
    libev's handlers (SIGTERM among them) would swallow the signal there."""
    srv = ctx.start(loops_app(ctx, "io_async"), workers=1)
    worker = worker_of(srv)
    m = re.match(r"square=49 worker_pid=(\d+)", get(srv, "/function")[1])
    check(m, "the function ran")
    fpid = int(m.group(1))
    with open("/proc/%d/status" % fpid) as f:
        caught = int(re.search(r"^SigCgt:\s*([0-9a-f]+)", f.read(), re.M).group(1), 16)
    for sig in (3, 10, 15, 17):  # the worker's loop catches QUIT, USR1, TERM, CHLD
        check(not caught & (1 << (sig - 1)), "signal %d caught in the forked child (SigCgt %x)" %
              (sig, caught))
    os.kill(fpid, 15)
    check(wait_for(lambda: fpid not in lib.children_of(worker), 5),
          "SIGTERM ends the forked child")
    check(wait_for(lambda: not lib.zombies_of(worker), 5), "and it was reaped")
    check_eq(get(srv, "/ticks")[0], 200, "the worker serves on")


@test(timeout=60)
def net_async_http_to_itself(ctx):
    srv = ctx.start(loops_app(ctx, "io_async", ("IO::Async::Loop", "Net::Async::HTTP")),
                    workers=1)
    status, body = get(srv, "/fetch")
    check_eq(status, 200, "status")
    check(body.startswith("fetched 200 ticks="), "Net::Async::HTTP fetched /ticks: %r" % body)
    check_eq(get(srv, "/fetch")[0], 200, "again (a pooled connection)")
    status, body = get(srv, "/fetch?localhost")
    check_eq(status, 200, "status by name")
    check(body.startswith("fetched 200 ticks="), "by name, through IO::Async's resolver: %r" % body)


@test(timeout=60)
def io_async_signal(ctx):
    srv = ctx.start(loops_app(ctx, "io_async"), workers=1)
    check_eq(get(srv, "/signal"), (200, "got USR2"), "attach_signal on pagid's loop")
    check_eq(get(srv, "/ticks")[0], 200, "the worker serves on")


@test(timeout=60)
def io_async_second_loop_fails_loudly(ctx):
    srv = ctx.start(loops_app(ctx, "io_async"), workers=1)
    worker = worker_of(srv)
    for path, want in (("/run", "IO::Async::Loop->run inside a pagid worker: pagid runs the "
                                "loop; return/await the Future instead at "),
                       ("/get", "->get/->await on a pending IO::Async future inside a pagid "
                                "worker")):
        t0 = time.monotonic()
        check_eq(get(srv, path)[0], 500, path + " status")
        check(time.monotonic() - t0 < 5, path + " answered at once, no hang")
        check(wait_for(lambda: want in srv.stderr(), 5),
              "%s: no %r in the log:\n%s" % (path, want, srv.stderr()[-1500:]))
    check("io_async.pl line" in srv.stderr(), "the log names the app's line")
    check_eq(get(srv, "/ticks")[0], 200, "the worker serves on")
    check_eq(worker_of(srv), worker, "the same worker")


@test(timeout=60)
def io_async_job_runner(ctx):
    srv = ctx.start(loops_app(ctx, "io_async_jobs"), workers=1)
    ids = []
    for n in (10, 100, 1000):
        r = request(srv.port, method="POST", path="/jobs?n=%d" % n, timeout=20)
        check_eq(r.status, 201, "job created")
        ids.append((int(r.body), n))
    for jid, n in ids:
        seen = {}

        def done():
            seen["r"] = get(srv, "/jobs/%d" % jid)
            return "status=completed" in seen["r"][1]

        check(wait_for(done, 15, 0.1), "job %d completes: %r" % (jid, seen.get("r")))
        check_eq(seen["r"][1], "status=completed step=3 result=%d" % (n * (n + 1) // 2),
                 "job %d's result" % jid)


@test(timeout=60)
def anyevent_on_pagids_loop(ctx):
    srv = ctx.start(loops_app(ctx, "anyevent", ("AnyEvent",)), workers=1)
    worker = worker_of(srv)
    seen = {}

    def ticked():
        seen["r"] = get(srv, "/ticks")
        m = re.search(r"ticks=(\d+)", seen["r"][1])
        return m and int(m.group(1)) >= 3

    check(wait_for(ticked, 10, 0.1), "the interval timer ticks: %r" % (seen.get("r"),))
    check("model=AnyEvent::Impl::Pagid" in seen["r"][1], "AnyEvent's backend: %r" % (seen["r"],))
    status, body = get(srv, "/timer")
    check_eq(status, 200, "timer status")
    waited = float(body.split()[1])
    check(0.19 <= waited < 5, "AnyEvent->timer(after => 0.2) waited %.3f" % waited)
    check_eq(get(srv, "/io"), (200, "read: through the pipe"), "AnyEvent->io on a pipe")
    check_eq(get(srv, "/child"), (200, "child exit=7"),
             "AnyEvent->child; exit() in a forked child exits")
    check(wait_for(lambda: not lib.proc_children(worker), 5), "the child was reaped")
    check_eq(get(srv, "/signal"), (200, "got USR2"), "AnyEvent->signal")
    for _ in range(3):
        check_eq(get(srv, "/fork_die"), (200, "child exit=255"),
                 "a forked child that dies back into pagid's code ends there, answering nothing")
    check("came back into the worker's code, ending it: the child died" in srv.stderr(),
          "and says so:\n" + srv.stderr()[-1000:])
    check("the child died" not in srv.stderr().replace(
        "came back into the worker's code, ending it: the child died", ""),
        "the child's die did not fail a scope:\n" + srv.stderr()[-1000:])
    check(wait_for(lambda: not lib.proc_children(worker), 5), "the children were reaped")
    check_eq(get(srv, "/idle"), (200, "idle ran 3 times"), "AnyEvent->idle")


@test(timeout=60)
def anyevent_blocking_recv_fails_loudly(ctx):
    srv = ctx.start(loops_app(ctx, "anyevent", ("AnyEvent",)), workers=1)
    t0 = time.monotonic()
    check_eq(get(srv, "/recv")[0], 500, "status")
    check(time.monotonic() - t0 < 4, "answered at once, no hang (the timer was 5 s)")
    want = "AnyEvent condvar ->recv would block inside a pagid worker"
    check(wait_for(lambda: want in srv.stderr(), 5), "no %r in:\n%s" % (want, srv.stderr()[-1500:]))
    check("anyevent.pl line" in srv.stderr(), "the log names the app's line")
    check_eq(get(srv, "/ticks")[0], 200, "the worker serves on")


@test(timeout=60)
def ev_refused(ctx):
    srv = ctx.start(loops_app(ctx, "anyevent", ("AnyEvent",)), workers=1)
    status, body = get(srv, "/ev")
    check_eq(status, 200, "status")
    check(body.startswith("require EV: EV cannot be used inside a pagid worker: it would be a "
                          "second event loop"), "eval { require EV } fails with a reason: %r" %
          body)
    check("Use IO::Async, AnyEvent or Future::IO" in body, "the message names the alternatives")


@test()
def loops_unused_not_loaded(ctx):
    srv = ctx.start(app(ctx, "loops_unused"), workers=1)
    check_eq(get(srv, "/"), (200, "loaded: ."), "no event loop module loaded for an app using none")


# ---- preload (the default): the app is compiled in the zygote -------------

def preloaded(ctx, srv, n):
    """The n workers, forked from a zygote (the app was preloaded)."""
    kids = wait_for(lambda: len(srv.workers()) == n and srv.workers(), 10)
    check(kids, "%d workers: %r" % (n, srv.workers()))
    check(srv.zygotes(), "the app was preloaded (a zygote is there):\n" + srv.stderr()[-1000:])
    return sorted(kids)


@test(timeout=60)
def preload_exit_dies_in_worker(ctx):
    srv = ctx.start(loops_app(ctx, "loops_preload", ("IO::Async::Loop", "AnyEvent")), workers=2)
    workers = preloaded(ctx, srv, 2)
    for _ in range(6):  # enough to reach both workers, whichever accepts
        check_eq(get(srv, "/exit", timeout=10)[0], 500, "exit in a handler is a failed scope")
    want = "exit(3) called by the app"
    check(wait_for(lambda: want in srv.stderr(), 5), "no %r in:\n%s" % (want, srv.stderr()[-1500:]))
    for _ in range(4):
        status, body = get(srv, "/pid")
        check_eq(status, 200, "the workers serve on")
        check(int(body.split()[1]) in workers, "answered by a worker of the start: %r" % body)
    check_eq(sorted(srv.workers()), workers, "no worker died")


@test(timeout=60)
def preload_io_async_loop_is_pagids(ctx):
    srv = ctx.start(loops_app(ctx, "loops_preload", ("IO::Async::Loop", "AnyEvent")), workers=2)
    preloaded(ctx, srv, 2)
    for _ in range(4):
        check_eq(get(srv, "/loop"), (200, "load=IO::Async::Loop::Pagid new=IO::Async::Loop::Pagid "
                                          "really_new=IO::Async::Loop::Pagid "
                                          "pagid_new=IO::Async::Loop::Pagid"),
                 "the loop made in the zygote and those made in the worker")
    check_eq(get(srv, "/fork"), (200, "child: own loop ran"),
             "in the app's own fork, IO::Async::Loop->new is a loop that runs there")
    check_eq(get(srv, "/loop")[0], 200, "the worker serves on")


@test(timeout=60)
def io_async_timer_ids_dropped(ctx):
    srv = ctx.start(loops_app(ctx, "loops_preload", ("IO::Async::Loop", "AnyEvent")), workers=1)
    for _ in range(2):
        check_eq(get(srv, "/timers"), (200, "fired fired fired timeout left=0"),
                 "watch_time, enqueue_timer and later with the id dropped fire; an unwatched "
                 "timer does not; the loop keeps no fired timer")


def sig_ignored(pid):
    with open("/proc/%d/status" % pid) as f:
        mask = int(re.search(r"^SigIgn:\s*([0-9a-f]+)", f.read(), re.M).group(1), 16)
    return {s for s in (signal.SIGHUP, signal.SIGPIPE) if mask & (1 << (s - 1))}


@test(timeout=60)
def dropped_signal_watcher_keeps_ignored(ctx):
    srv = ctx.start(loops_app(ctx, "loops_preload", ("IO::Async::Loop", "AnyEvent")), workers=1)
    worker = worker_of(srv)
    check_eq(sig_ignored(worker), {signal.SIGHUP, signal.SIGPIPE}, "the worker ignores HUP, PIPE")
    check_eq(get(srv, "/signals"), (200, "dropped"), "watchers armed and dropped")
    check_eq(sig_ignored(worker), {signal.SIGHUP, signal.SIGPIPE},
             "HUP and PIPE are still ignored after the last watcher went")
    os.kill(worker, signal.SIGHUP)
    time.sleep(0.3)
    check_eq(get(srv, "/pid"), (200, "pid %d" % worker), "the worker survived a SIGHUP")
    check_eq(worker_of(srv), worker, "the same worker")


@test(timeout=60)
def anyevent_model_env_ignored(ctx):
    for var in ("PERL_ANYEVENT_MODEL", "AE_MODEL"):
        srv = ctx.start(loops_app(ctx, "loops_preload", ("IO::Async::Loop", "AnyEvent")),
                        workers=1, env={var: "Perl"})
        check_eq(get(srv, "/anyevent", timeout=10), (200, "fired model=AnyEvent::Impl::Pagid"),
                 "%s=Perl in the environment: AnyEvent still runs on pagid's loop" % var)
        srv.stop()
