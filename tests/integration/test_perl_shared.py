"""The pagi.shared extension of the Perl host (docs/perl.md, "Shared
dictionaries"): $scope->{extensions}{'pagi.shared'} with -w 2, every method
from Perl, a value written through one connection read on many (both
workers), concurrent incr exact, the counted "no memory" of safe_set, and
the key absent when no dict is configured. App: tests/integration/perl/shared_dict.pl."""

import threading

from lib import check, check_eq, request, test
from test_perl import app

CONF = "shared_dicts:\n  - {name: t, size: 64k}\n  - {name: other, size: 32k}\n"


def op(port, path):
    r = request(port, path=path)
    check_eq(r.status, 200, "status of %s" % path)
    return r.body.decode()


@test(timeout=120)
def perl_shared_dict_methods(ctx):
    srv = ctx.start(app(ctx, "shared_dict"), workers=2, config=CONF)
    p = srv.port
    check_eq(op(p, "/names"), "other,t", "names")
    check_eq(op(p, "/get?k=a"), "undef: not found", "missing")
    check_eq(op(p, "/set?k=a&v=hello&flags=5"), "1", "set")
    for _ in range(20):
        check_eq(op(p, "/get?k=a"), "hello 5", "read back (value, flags) on any worker")
    check_eq(op(p, "/add?k=a&v=x"), "undef: exists", "add on existing")
    check_eq(op(p, "/replace?k=b&v=x"), "undef: not found", "replace missing")
    check_eq(op(p, "/cas?k=a&old=nope&v=x"), "undef: value mismatch", "cas mismatch")
    check_eq(op(p, "/cas?k=a&old=hello&v=bye"), "1", "cas")
    check_eq(op(p, "/get?k=a"), "bye 0", "after cas")
    check_eq(op(p, "/incr?k=n&by=2"), "undef: not found", "incr without init")
    check_eq(op(p, "/incr?k=n&by=2&init=40"), "42", "incr with init")
    check_eq(op(p, "/incr?k=a&by=1"), "undef: not a number", "incr of text")
    check_eq(op(p, "/set?k=t&v=1&ttl=100"), "1", "set with ttl")
    ttl = float(op(p, "/ttl?k=t"))
    check(0 < ttl <= 100, "ttl %r" % ttl)
    check_eq(op(p, "/delete?k=t"), "1", "delete")
    check_eq(op(p, "/delete?k=t"), "undef: not found", "delete again")
    check_eq(op(p, "/get?k=a&d=nope"), "undef: no such dict", "unknown dict")

    def voter():
        for _ in range(100):
            op(p, "/incr?k=votes&by=1&init=0")

    threads = [threading.Thread(target=voter) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    check_eq(op(p, "/get?k=votes"), "800 0", "800 concurrent increments from Perl")
    # safe_set evicts nothing: fill the dict, then it says "no memory".
    big = "x" * 1000
    for i in range(200):
        op(p, "/set?k=f%d&v=%s" % (i, big))
    check_eq(op(p, "/safe_set?k=new&v=%s" % big), "undef: no memory", "safe_set when full")


@test(timeout=60)
def perl_shared_absent_without_dicts(ctx):
    srv = ctx.start(app(ctx, "shared_dict"), workers=0)
    check_eq(op(srv.port, "/get?k=a"), "no pagi.shared", "no key without shared_dicts")
