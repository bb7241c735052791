"""--dev (issue 27): a Perl developer's loop. One worker, the app reloaded
when its file or a module it loaded changes (a new generation, as SIGHUP),
a broken edit leaving the old generation serving with the error's FILE:LINE
on standard error, the access log and readable log lines on the terminal."""

import os
import re
import time

import lib
from lib import check, check_eq, request, test, wait_for

APP = """\
use Future::AsyncAwait;
use lib '{lib}';
use Greeting;
async sub {{
    my ($scope, $receive, $send) = @_;
    return if $scope->{{type}} ne 'http';
    await $send->({{type => 'http.response.start', status => 200, headers => []}});
    await $send->({{type => 'http.response.body', body => '{word} ' . Greeting::who()}});
}};
"""

MODULE = "package Greeting;\nsub who {{ '{who}' }}\n1;\n"


def write(path, text):
    # As an editor saves: a new file renamed over the old one.
    tmp = path + ".tmp~"
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, path)


def body(port):
    try:
        return request(port, "GET", "/", timeout=2).body
    except Exception as e:  # between generations
        return repr(e).encode()


def perl_or_skip(ctx):
    import subprocess
    out = subprocess.run([ctx.pagid, "-V"], stdout=subprocess.PIPE).stdout
    if b" perl" not in out:
        raise lib.Skip("pagid was built without the Perl host")


@test(timeout=60)
def dev_reloads_on_change(ctx):
    perl_or_skip(ctx)
    libdir = os.path.join(ctx.tmpdir, "mylib")
    os.mkdir(libdir)
    app = os.path.join(ctx.tmpdir, "app.pl")
    module = os.path.join(libdir, "Greeting.pm")
    write(module, MODULE.format(who="world"))
    write(app, APP.format(lib=libdir, word="hello"))
    port = lib.free_port()
    srv = ctx.start(app=None, workers=None, listen=False, port=port,
                    args=["--dev", "-p", str(port), app])
    check_eq(body(port), b"hello world", "first response")
    check_eq(len(srv.workers()), 1, "workers under --dev")

    # The app file changes: the new response within ~2 s.
    write(app, APP.format(lib=libdir, word="howdy"))
    check(wait_for(lambda: body(port) == b"howdy world", 3),
          "no reload after the app changed: %r\n%s" % (body(port), srv.stderr()[-2000:]))

    # A module it loaded changes.
    write(module, MODULE.format(who="perl"))
    check(wait_for(lambda: body(port) == b"howdy perl", 3),
          "no reload after a module changed: %r\n%s" % (body(port), srv.stderr()[-2000:]))

    # A syntax error: the old generation keeps serving, the error names FILE:LINE.
    with open(app) as f:
        good = f.read()
    write(app, good.replace("async sub {", "async sub {{ my $x = ;", 1))
    check(wait_for(lambda: "reload failed" in srv.stderr(), 5),
          "the broken reload was not reported:\n%s" % srv.stderr()[-2000:])
    err = srv.stderr()
    check(re.search(r"app\.pl(:| line )\d+", err), "no FILE:LINE in:\n%s" % err[-2000:])
    check_eq(body(port), b"howdy perl", "response while the edit is broken")

    # Fixed again: served again.
    write(app, APP.format(lib=libdir, word="fixed"))
    check(wait_for(lambda: body(port) == b"fixed perl", 3), "no reload after the fix")

    # The access log and human log lines on the terminal (stderr).
    err = srv.stderr()
    check(re.search(r'"GET / HTTP/1.1" 200', err), "no access log line:\n%s" % err[-1500:])
    check(not re.search(r"^<\d>", err, re.M), "syslog prefixes under --dev:\n%s" % err[-1500:])
    check(re.search(r"^\d\d:\d\d:\d\d(\.\d+)? +info +master", err, re.M),
          "no readable 'TIME info master' line:\n%s" % err[-1500:])
    srv.stop()


@test(timeout=30)
def production_is_unchanged(ctx):
    """Without --dev: no watcher, no access log, syslog prefixes (journald)."""
    perl_or_skip(ctx)
    app = os.path.join(ctx.tmpdir, "app.pl")
    libdir = os.path.join(ctx.tmpdir, "mylib")
    os.mkdir(libdir)
    write(os.path.join(libdir, "Greeting.pm"), MODULE.format(who="world"))
    write(app, APP.format(lib=libdir, word="hello"))
    port = lib.free_port()
    srv = ctx.start(app=None, workers=1, listen=False, port=port, args=["-p", str(port), app])
    check_eq(body(port), b"hello world", "first response")
    write(app, APP.format(lib=libdir, word="howdy"))
    time.sleep(1.0)
    check_eq(body(port), b"hello world", "response after an edit without --dev")
    err = srv.stderr()
    check("GET / HTTP" not in err, "an access log without --dev")
    check(re.search(r"^<6>master\[", err, re.M), "no syslog prefix:\n%s" % err[-1000:])
    srv.stop()
