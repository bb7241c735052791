"""The command line: --version, --help, config checking with -t (FILE:LINE:COL
errors, exit 1, never a crash), bad options, a port already in use, and the
default listener 127.0.0.1:8080 when started with nothing at all."""

import os
import re
import socket
import subprocess
import time

import lib
from lib import (SLOW, Skip, check, check_eq, port_is_free, request, test, wait_for,
                 write_config)

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


# ---------------------------------------------------------------------------
# The command line a Perl developer expects (issue 27): pagi-server's and
# plackup's options beside the nginx-style ones.
# ---------------------------------------------------------------------------

PERL_APPS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "perl")


def dump(ctx, *args):
    """pagid -T ARGS: (exit status, the effective config, stderr)."""
    return run(ctx, "-T", *args)


def perl_or_skip(ctx):
    rc, out, err = run(ctx, "-V")
    if " perl" not in out:
        raise Skip("pagid was built without the Perl host")


@test()
def directory_as_app_suggests_static(ctx):
    """`pagid -w 2 DIR` (a static server's habit) says static:DIR; an unknown
    app's message lists every kind, the .pl and .psgi files too."""
    d = os.path.join(ctx.tmpdir, "www")
    os.mkdir(d)
    rc, out, err = run(ctx, "-t", "-w", "2", d)
    check_eq(rc, 1, "exit status")
    check("pagid: -a: app '%s' is a directory: to serve its files, use static:%s" % (d, d) in err,
          "stderr: %s" % err)
    rc, out, err = run(ctx, "-t", "-w", "2", "bogus")
    check_eq(rc, 1, "exit status")
    check("unknown app 'bogus' (expected hello, echo, demo, pubsub, static:DIR, a .so module, "
          "a PAGI app FILE.pl or a PSGI app FILE.psgi)" in err, "stderr: %s" % err)


@test()
def positional_app_and_port(ctx):
    """`pagid -p PORT app.pl` serves app.pl on 127.0.0.1:PORT (no -a, no -l)."""
    perl_or_skip(ctx)
    port = lib.free_port()
    srv = ctx.start(app=None, workers=0, listen=False, port=port,
                    args=["-p", str(port), os.path.join(PERL_APPS, "hello.pl")])
    r = request(port, "GET", "/")
    check_eq(r.status, 200, "status")
    check_eq(r.body, b"Hello from PAGI", "body")
    srv.stop()


@test()
def host_port_and_bare_port_are_loopback(ctx):
    """-p alone and a bare -l PORT bind 127.0.0.1, like the default; -o picks the host."""
    rc, out, err = dump(ctx, "-a", "hello", "-p", "5000")
    check_eq(rc, 0, "exit status: %s" % err)
    check("- 127.0.0.1:5000\n" in out, "-p 5000 listens on:\n%s" % out)
    rc, out, err = dump(ctx, "-a", "hello", "-l", "19297")
    check_eq(rc, 0, "exit status: %s" % err)
    check("- 127.0.0.1:19297\n" in out, "-l 19297 listens on:\n%s" % out)
    rc, out, err = dump(ctx, "-a", "hello", "--host", "::1", "--port", "5001")
    check_eq(rc, 0, "exit status: %s" % err)
    check("- '[::1]:5001'\n" in out or "- \"[::1]:5001\"\n" in out or "- [::1]:5001\n" in out,
          "-o ::1 -p 5001 listens on:\n%s" % out)
    rc, out, err = dump(ctx, "-a", "hello", "-o", "0.0.0.0")
    check("- 0.0.0.0:8080\n" in out, "-o 0.0.0.0 listens on:\n%s" % out)


@test()
def server_options_reach_the_config(ctx):
    """--max-requests, --timeout (pagi-server's: keep-alive), --log-level,
    --access-log and --access-log-format, as -T shows them."""
    rc, out, err = dump(ctx, "-a", "hello", "--max-requests", "100", "--timeout", "7",
                        "--log-level", "debug", "--access-log", "-",
                        "--access-log-format", "clf")
    check_eq(rc, 0, "exit status: %s" % err)
    for want in ("max_requests: 100\n", "  keepalive: 7s\n", "  level: debug\n",
                 "  path: '-'\n", "  format: clf\n"):
        check(want in out, "-T lacks %r:\n%s" % (want, out))
    rc, out, err = run(ctx, "-t", "-a", "hello", "--log-level", "loud")
    check_eq(rc, 1, "exit status of a bad --log-level")
    check("--log-level" in err and "debug, info, warn, error" in err, "stderr: %s" % err)
    rc, out, err = run(ctx, "-t", "-a", "hello", "--max-requests", "many")
    check_eq(rc, 1, "exit status of a bad --max-requests")


@test()
def access_log_dash_after_privileges_drop(ctx):
    """--access-log - writes to pagid's standard error, also from workers that
    run as nobody (who could not open /dev/stderr)."""
    port = lib.free_port()
    args = ["--access-log", "-"]
    if os.geteuid() == 0:
        args += ["-u", "nobody"]
    srv = ctx.start(app="hello", workers=1, port=port, args=args, default_user=False)
    r = request(port, "GET", "/logged-path")
    check_eq(r.status, 200, "status")
    check(wait_for(lambda: "GET /logged-path HTTP/1.1\" 200" in srv.stderr(), 3),
          "no access log line on stderr:\n%s" % srv.stderr())
    check("cannot open access log" not in srv.stderr(), srv.stderr())
    srv.stop()


ENV_APP = """\
use Future::AsyncAwait;
async sub {
    my ($scope, $receive, $send) = @_;
    return if $scope->{type} ne 'http';
    await $send->({type => 'http.response.start', status => 200, headers => []});
    await $send->({type => 'http.response.body',
                   body => join ',', map { $_ . '=' . ($ENV{$_} // 'unset') } qw(PAGI_ENV PLACK_ENV)});
};
"""

ENV_PSGI = "sub { [200, [], [join ',', map { $_ . '=' . ($ENV{$_} // 'unset') } qw(PAGI_ENV PLACK_ENV)]] };\n"


@test()
def env_mode_sets_pagi_env(ctx):
    """-E MODE sets PAGI_ENV (and PLACK_ENV for a PSGI app); without it PAGI_ENV is production."""
    perl_or_skip(ctx)
    pl = os.path.join(ctx.tmpdir, "env.pl")
    with open(pl, "w") as f:
        f.write(ENV_APP)
    psgi = os.path.join(ctx.tmpdir, "env.psgi")
    with open(psgi, "w") as f:
        f.write(ENV_PSGI)
    env = {"PAGI_ENV": "", "PLACK_ENV": ""}
    for path, args, want in ((pl, ["-E", "staging"], b"PAGI_ENV=staging,PLACK_ENV="),
                             (psgi, ["--env", "staging"], b"PAGI_ENV=staging,PLACK_ENV=staging"),
                             (pl, [], b"PAGI_ENV=production,PLACK_ENV=")):
        port = lib.free_port()
        srv = ctx.start(app=None, workers=0, listen=False, port=port, env=env,
                        args=["-p", str(port), path] + args)
        r = request(port, "GET", "/")
        check_eq(r.body, want, "the app's environment with %s" % args)
        srv.stop()


@test()
def inline_app_with_modules(ctx):
    """-M MODULE -e CODE, as pagi-server and perl have them; a compile error
    in -e is reported at -e line N."""
    perl_or_skip(ctx)
    port = lib.free_port()
    code = ("async sub { my ($s, $r, $send) = @_; return if $s->{type} ne 'http';"
            " await $send->({type => 'http.response.start', status => 200, headers => []});"
            " await $send->({type => 'http.response.body', body => 'inline ' . Digest::MD5::md5_hex('x')}) }")
    srv = ctx.start(app=None, workers=0, listen=False, port=port,
                    args=["-p", str(port), "-MFuture::AsyncAwait", "-M", "Digest::MD5", "-e", code])
    r = request(port, "GET", "/")
    check_eq(r.body, b"inline 9dd4e461268c8034f5c8564e155c67a6", "body")
    srv.stop()
    rc, out, err = run(ctx, "-t", "-e", "sub { ")
    check_eq(rc, 1, "exit status of -t with a broken -e")
    check("-e line 1" in err, "stderr: %s" % err)


@test()
def positional_app_twice_is_usage_error(ctx):
    rc, out, err = run(ctx, "-a", "hello", "echo")
    check_eq(rc, 2, "exit status")
    check("app" in err, "stderr: %s" % err)
    rc, out, err = run(ctx, "hello", "echo")
    check_eq(rc, 2, "exit status")


BAD_APPS = {
    "syntax.pl": ("use strict;\nmy $app = sub {\n    my $x = ;\n};\n$app;\n", r"syntax\.pl:3: syntax error"),
    "missing.pl": ("use strict;\nuse No::Such::Module::Here;\nsub { 1 };\n",
                   r"missing\.pl:2: Can't locate No/Such/Module/Here\.pm"),
    "hashref.pl": ("use strict;\nmy %h = (a => 1);\n\\%h;\n",
                   r"hashref\.pl:3: did not return a code reference"),
    "missing.psgi": ("use No::Such::Module::Here;\nsub { [200, [], []] };\n",
                     r"missing\.psgi:1: Can't locate"),
}


@test()
def check_loads_the_app(ctx):
    """pagid -t loads a Perl app in a child (as the workers' user) and reports
    a compile error, a missing module and a non-coderef with FILE:LINE, exit 1."""
    perl_or_skip(ctx)
    for name, (text, want) in sorted(BAD_APPS.items()):
        path = os.path.join(ctx.tmpdir, name)
        with open(path, "w") as f:
            f.write(text)
        rc, out, err = run(ctx, "-t", "-u", "root", "-l", "127.0.0.1:1", name)
        check_eq(rc, 1, "exit status of -t for %s (stdout %r, stderr %r)" % (name, out, err))
        check(re.search(want, err), "-t for %s: want /%s/ in:\n%s" % (name, want, err))
        check("is invalid" in err, "no verdict for %s:\n%s" % (name, err))
    rc, out, err = run(ctx, "-t", "-u", "root", "-l", "127.0.0.1:1",
                       os.path.join(PERL_APPS, "hello.pl"))
    check_eq(rc, 0, "exit status of -t for hello.pl: %s" % err)
    check("is valid" in out, "stdout: %s" % out)
