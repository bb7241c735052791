"""The command line: --version, --help, config checking with -t (FILE:LINE:COL
errors, exit 1, never a crash), bad options, a port already in use, and the
default listener 127.0.0.1:8080 when started with nothing at all."""

import re
import socket
import subprocess
import time

from lib import (SLOW, Skip, check, check_eq, port_is_free, request, test, write_config)

CRASH = re.compile(r"AddressSanitizer|runtime error:|Segmentation fault|LeakSanitizer")


def run(ctx, *args, timeout=10):
    p = subprocess.run([ctx.pagid] + list(args), stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       cwd=ctx.tmpdir, timeout=timeout * SLOW)
    out = p.stdout.decode("utf-8", "replace")
    err = p.stderr.decode("utf-8", "replace")
    check(not CRASH.search(out + err), "crash report: %s" % (out + err)[-500:])
    check(p.returncode >= 0, "pagid %s died from signal %d" % (" ".join(args), -p.returncode))
    return p.returncode, out, err


@test()
def version(ctx):
    rc, out, err = run(ctx, "--version")
    check_eq(rc, 0, "exit status")
    check(re.match(r"^pagid \d+\.\d+\.\d+\s*$", out.splitlines()[0] if out else ""),
          "--version printed %r" % out)


@test()
def help_lists_options(ctx):
    rc, out, err = run(ctx, "--help")
    check_eq(rc, 0, "exit status")
    for opt in ("-c", "-t", "-l", "-w", "-a", "--listen", "--workers", "--app", "--version",
                "--help"):
        check(re.search(r"(^|[\s,])%s\b" % re.escape(opt), out), "--help does not list %s:\n%s"
              % (opt, out))


@test()
def unknown_option_is_usage_error(ctx):
    rc, out, err = run(ctx, "--no-such-option")
    check_eq(rc, 2, "exit status (EXIT_USAGE)")
    check(err.strip(), "no message on stderr")


GOOD = """\
listen:
  - 127.0.0.1:{port}
workers: 2
app: hello
timeouts:
  header: 1s
  idle: 2s
  keepalive: 1s
  request: 1s
  write: 1s
  shutdown: 2s
limits:
  max_body_size: 1k
  max_header_size: 1k
  max_request_line: 256
  max_header_count: 10
flow_control:
  high_watermark: 64k
  low_watermark: 16k
"""


@test()
def check_good_config(ctx):
    path = write_config(ctx, GOOD.format(port=8080), "good.yaml")
    rc, out, err = run(ctx, "-t", "-c", path)
    check_eq(rc, 0, "exit status of -t on a valid config (stderr %r)" % err)


@test()
def check_bad_config(ctx):
    path = write_config(ctx, "workers: 2\n"
                             "timeouts:\n"
                             "  bogus_key: 1s\n"
                             "  header: 10 parsecs\n", "bad.yaml")
    rc, out, err = run(ctx, "-t", "-c", path)
    check_eq(rc, 1, "exit status of -t on an invalid config")
    check(re.search(r"(^|\s)%s:3:3: \S" % re.escape(path), err, re.M),
          "no '%s:3:3: ...' line for the unknown key; stderr:\n%s" % (path, err))
    check(re.search(r"(^|\s)%s:4:\d+: \S" % re.escape(path), err, re.M),
          "no '%s:4:COL: ...' line for the bad duration (all errors, not just the first); "
          "stderr:\n%s" % (path, err))


@test()
def check_bad_types(ctx):
    path = write_config(ctx, "workers: many\n"
                             "limits:\n"
                             "  max_body_size: 12q\n"
                             "app: no-such-app\n", "types.yaml")
    rc, out, err = run(ctx, "-t", "-c", path)
    check_eq(rc, 1, "exit status")
    for line in (1, 3, 4):
        check(re.search(r"%s:%d:\d+: \S" % (re.escape(path), line), err),
              "no error reported for line %d; stderr:\n%s" % (line, err))


@test()
def check_unparsable_yaml(ctx):
    for i, text in enumerate(["listen: [unclosed\n", "\x00\x01\x02 binary",
                              "- a\n- list at top\n", "key: value\n  bad: indent\n", ""]):
        path = write_config(ctx, text, "junk%d.yaml" % i)
        rc, out, err = run(ctx, "-t", "-c", path)
        if text == "":
            check(rc in (0, 1), "empty config: exit %d" % rc)
            continue
        check_eq(rc, 1, "exit status for %r" % text)
        check(re.search(r"%s:\d+:\d+: \S" % re.escape(path), err),
              "no FILE:LINE:COL message for %r; stderr:\n%s" % (text, err))


@test()
def check_missing_file(ctx):
    rc, out, err = run(ctx, "-t", "-c", "/nonexistent/pagid.yaml")
    check_eq(rc, 1, "exit status")
    check("/nonexistent/pagid.yaml" in err, "message does not name the file: %r" % err)


@test()
def config_file_is_used(ctx):
    # listen/app from the file alone (no -l/-a), workers from the file too.
    from lib import free_port
    port = free_port()
    path = write_config(ctx, "listen:\n  - 127.0.0.1:%d\nworkers: 0\napp: echo\n" % port, "run.yaml")
    srv = ctx.start(app=None, workers=0, listen=False, args=["-c", path], port=port)
    r = request(port, "POST", "/from-file", body=b"cfg")
    check_eq((r.status, r.body, r.header("x-echo-path")), (200, b"cfg", "/from-file"),
             "echo app from the config file")
    check(srv.alive(), "server died")


@test()
def cli_overrides_config(ctx):
    from lib import free_port
    port = free_port()
    path = write_config(ctx, "listen:\n  - 127.0.0.1:1\nworkers: 4\napp: echo\n", "ovr.yaml")
    ctx.start(app="hello", workers=0, port=port, args=["-c", path])
    r = request(port, "GET", "/")
    check_eq(r.body, b"Hello from PAGI", "-a hello overrides app: echo")


def occupied_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    return s, s.getsockname()[1]


def port_in_use(ctx, workers):
    s, port = occupied_port()
    try:
        t0 = time.monotonic()
        rc, out, err = run(ctx, "-w", str(workers), "-l", "127.0.0.1:%d" % port, "-a", "hello",
                           timeout=15)
        check(rc != 0, "exit status 0 although the port is taken")
        check(time.monotonic() - t0 < 5 * SLOW, "took %.1fs to give up" % (time.monotonic() - t0))
        check(str(port) in err and re.search(r"(?i)in use|bind", err),
              "message does not say which address failed and why: %r" % err)
    finally:
        s.close()


@test()
def port_in_use_single(ctx):
    port_in_use(ctx, 0)


@test()
def port_in_use_master(ctx):
    port_in_use(ctx, 2)


@test()
def bad_listen_address(ctx):
    rc, out, err = run(ctx, "-w", "0", "-l", "999.1.2.3:notaport", "-a", "hello")
    check(rc != 0, "exit status 0 for an invalid -l")
    check("999.1.2.3:notaport" in err or "notaport" in err, "message does not quote it: %r" % err)


@test()
def unknown_app(ctx):
    rc, out, err = run(ctx, "-w", "0", "-l", "127.0.0.1:1", "-a", "/nonexistent/app.so")
    check(rc != 0, "exit status 0 for a missing app module")
    check("/nonexistent/app.so" in err, "message does not name the app: %r" % err)


@test()
def default_listen_8080(ctx):
    if not port_is_free(8080):
        raise Skip("127.0.0.1:8080 is busy")
    srv = ctx.start(app=None, workers=None, listen=False, port=8080)
    check_eq(srv.args, [], "command line")
    r = request(8080, "GET", "/")
    check_eq(r.status, 200, "status of GET / on the default listener")
    check(srv.alive(), "server died")
