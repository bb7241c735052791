"""examples/polls.c and shared dictionaries (pagi_shared(3)) from C: the
module built against a staged install (as a third party builds it), run
with -w 2. A poll created on one connection is read at once on many others
(spread over both workers); concurrent votes through pagi_shared_incr are
exact; the SSE and WebSocket feeds carry counts from either worker; the data
survives a worker killed with SIGKILL and a SIGHUP reload (and a reload that
changes the dict's size starts it empty); eviction and "no memory" show in
the pagid_shared_dict_* metrics; pagid -t reports bad shared_dicts entries."""

import http.client
import json
import os
import re
import signal
import subprocess
import threading
import time

from lib import SLOW, check, check_eq, free_port, request, test, wait_for
from test_examples import stage_examples
from test_metrics import scrape_quiet
from test_sse import SSEClient
from test_websocket import RawWS

_built = {}


def build_polls(ctx):
    if ctx.pagid not in _built or not os.path.exists(_built[ctx.pagid]):
        prefix, src = stage_examples(ctx, "pagi_shared.h")
        p = subprocess.run(["make", "-C", src, "PREFIX=" + prefix, "polls.so",
                            "CFLAGS=-std=c11 -O2 -g -Wall -Wextra -Werror"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        check_eq(p.returncode, 0, "building polls.so (%s)" % p.stdout.decode()[-600:])
        _built[ctx.pagid] = os.path.join(src, "polls.so")
    return _built[ctx.pagid]


def start_polls(ctx, size="16m", extra=""):
    sport = free_port()
    conf = ("shared_dicts:\n  - {name: polls, size: %s}\nstatus:\n  listen: 127.0.0.1:%d\n%s"
            % (size, sport, extra))
    srv = ctx.start(build_polls(ctx), workers=2, config=conf)
    check(wait_for(lambda: scrape_quiet(sport).get("pagid_workers_ready") == 2, 10),
          "workers never ready")
    return srv, sport


def call(port, method, path, body=b""):
    r = request(port, method, path, body=body,
                headers={"Content-Type": "application/json"} if body else None)
    return r.status, r.body


def create(port, question="Tea?", options=("yes", "no", "maybe")):
    st, body = call(port, "POST", "/polls",
                    json.dumps({"question": question, "options": list(options)}).encode())
    check_eq(st, 201, "create: %r" % body)
    return json.loads(body)["id"]


def counts(port, pid):
    st, body = call(port, "GET", "/polls/%d" % pid)
    check_eq(st, 200, "GET poll %d: %r" % (pid, body))
    return json.loads(body)["counts"]


def dict_metric(sport, name):
    return scrape_quiet(sport).get('pagid_shared_dict_%s{name="polls"}' % name)


@test(timeout=240)
def polls_read_your_writes_across_workers(ctx):
    srv, _ = start_polls(ctx)
    check_eq(len(srv.workers()), 2, "two workers")
    for round_ in range(5):
        pid = create(srv.port, "q%d" % round_)
        # At once, each on a fresh connection: whichever worker accepts it.
        seen = [call(srv.port, "GET", "/polls/%d" % pid)[0] for _ in range(20)]
        check_eq(seen.count(200), 20, "poll %d read on 20 connections: %r" % (pid, seen))
    check_eq(call(srv.port, "GET", "/polls/999")[0], 404, "missing poll")
    check_eq(call(srv.port, "POST", "/polls/1/vote/3")[0], 400, "no option 3")
    check_eq(call(srv.port, "POST", "/polls", b'{"question":"x","options":["a"]}')[0], 400,
             "one option is refused")


@test(timeout=240)
def polls_concurrent_votes_exact(ctx):
    srv, _ = start_polls(ctx)
    pid = create(srv.port)
    errors = []

    def voter(n, option):
        c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=20 * SLOW)
        try:
            for _ in range(n):
                c.request("POST", "/polls/%d/vote/%d" % (pid, option), body=b"")
                r = c.getresponse()
                r.read()
                if r.status != 200:
                    errors.append(r.status)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))
        finally:
            c.close()

    threads = [threading.Thread(target=voter, args=(100, i % 3)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    check_eq(errors, [], "vote errors")
    check_eq(counts(srv.port, pid), [700, 700, 600], "2000 concurrent votes")


@test(timeout=240)
def polls_feeds_from_either_worker(ctx):
    srv, _ = start_polls(ctx)
    pid = create(srv.port)
    sse = [SSEClient(srv.port, "/polls/%d/events" % pid) for _ in range(4)]
    for c in sse:
        c.read_head()
    ws = [RawWS(srv.port, "/polls/%d/ws" % pid) for _ in range(2)]
    time.sleep(0.3 * SLOW)  # the groups' subscriptions reach the master
    for _ in range(6):
        check_eq(call(srv.port, "POST", "/polls/%d/vote/0" % pid)[0], 200, "vote")
    # Each feed reads the counts when a vote's message arrives: whatever order
    # the two workers' messages arrive in, a feed's counts only grow and its
    # last event carries all six votes.
    for c in sse:
        deadline = time.monotonic() + 10 * SLOW
        while (not c.events or c.events[-1].data != "[6,0,0]") and not c.eof \
                and time.monotonic() < deadline:
            c.pump(0.2)
        got = [(e.type, json.loads(e.data)[0]) for e in c.events]
        check(got and all(t == "counts" for t, _ in got), "SSE events: %r" % got)
        check_eq([n for _, n in got][-1:], [6], "last SSE event: %r" % got)
        check_eq(sorted(n for _, n in got), [n for _, n in got], "SSE counts only grow")
        c.close()
    for w in ws:
        got = []
        while not got or got[-1] != 6:
            got.append(json.loads(w.recv_message()[1])[0])
        check_eq(sorted(got), got, "WebSocket counts only grow")
        w.close()
    check_eq(call(srv.port, "GET", "/polls/%d/events" % (pid + 1))[0], 404, "no feed of a missing poll")


@test(timeout=240)
def polls_survive_worker_kill_and_reload(ctx):
    srv, sport = start_polls(ctx)
    pid = create(srv.port)
    for _ in range(5):
        call(srv.port, "POST", "/polls/%d/vote/2" % pid)
    srv.allow_crash = True  # the SIGKILL below is reported as a crash
    victim = srv.workers()[0]
    os.kill(victim, signal.SIGKILL)
    check(wait_for(lambda: len(srv.workers()) == 2 and victim not in srv.workers(), 10),
          "the killed worker was not replaced")
    check(wait_for(lambda: scrape_quiet(sport).get("pagid_workers_ready") == 2, 10), "ready")
    for _ in range(10):
        check_eq(counts(srv.port, pid), [0, 0, 5], "after a worker was killed")
    before = set(srv.workers())
    srv.signal(signal.SIGHUP)
    check(wait_for(lambda: len(srv.workers()) == 2 and not before & set(srv.workers()), 20),
          "reload did not replace the workers")
    for _ in range(10):
        check_eq(counts(srv.port, pid), [0, 0, 5], "after a reload")
    check_eq(create(srv.port), pid + 1, "ids go on after a reload")
    # Another size is another dictionary: it starts empty.
    conf = srv.args[srv.args.index("-c") + 1]
    with open(conf) as f:
        text = f.read()
    with open(conf, "w") as f:
        f.write(text.replace("size: 16m", "size: 8m"))
    before = set(srv.workers())
    srv.signal(signal.SIGHUP)
    check(wait_for(lambda: len(srv.workers()) == 2 and not before & set(srv.workers()), 20),
          "second reload did not replace the workers")
    check_eq(call(srv.port, "GET", "/polls/%d" % pid)[0], 404, "a resized dict starts empty")


@test(timeout=240)
def polls_eviction_and_full_counted(ctx):
    srv, sport = start_polls(ctx, size="32k")
    check_eq(dict_metric(sport, "capacity_bytes") is not None, True, "capacity metric")
    ids = [create(srv.port, "question %d" % i) for i in range(300)]
    check_eq(call(srv.port, "GET", "/polls/%d" % ids[0])[0], 404, "the oldest poll was evicted")
    check_eq(call(srv.port, "GET", "/polls/%d" % ids[-1])[0], 200, "the newest poll is there")
    check((dict_metric(sport, "evictions_total") or 0) > 100,
          "evictions: %r" % dict_metric(sport, "evictions_total"))
    check_eq(dict_metric(sport, "full_total"), 0.0, "nothing refused yet")
    # A poll of ~15 KiB needs more room than one write may evict: refused, counted.
    st, body = call(srv.port, "POST", "/polls", json.dumps(
        {"question": "q" * 15000, "options": ["a", "b"]}).encode())
    check_eq((st, body), (503, b'{"error":"no memory"}\n'), "a poll that cannot fit")
    check_eq(dict_metric(sport, "full_total"), 1.0, "full counted")
    used = dict_metric(sport, "bytes")
    cap = dict_metric(sport, "capacity_bytes")
    check(0 < used <= cap, "bytes %r of %r" % (used, cap))


@test(timeout=60)
def shared_dicts_config_errors(ctx):
    path = os.path.join(ctx.tmpdir, "bad.yaml")
    with open(path, "w") as f:
        f.write("shared_dicts:\n  - {name: polls, size: 16m}\n  - {name: polls, size: 1m}\n"
                "  - {name: x, size: 1k}\n  - {name: y, sise: 1m}\n")
    p = subprocess.run([ctx.pagid, "-t", "-c", path], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=30)
    err = p.stderr.decode()
    check_eq(p.returncode, 1, "pagid -t exit status")
    for want in (r"bad\.yaml:3:5: duplicate shared dict 'polls' \(first at .*:2:12\)",
                 r"bad\.yaml:4:21: size of 'x' .* must be from 32k",
                 r"bad\.yaml:5:15: unknown key 'sise' .*did you mean 'size'"):
        check(re.search(want, err), "no %r in %r" % (want, err))
    with open(path, "w") as f:
        f.write("shared_dicts: [{name: polls, size: 16m}]\n")
    p = subprocess.run([ctx.pagid, "-T", "-c", path], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=30)
    check(re.search(r"shared_dicts:\n- name: polls\n  size: 16m", p.stdout.decode()),
          "-T shows the dicts: %r" % p.stdout.decode())
